//! The ensemble's configuration as clients see it: the typed view of
//! `/zookeeper/config` ([`ClientConfig`], Java's `QuorumVerifier` and
//! `ConfigUtils.getClientConfigStr`), read with `get_config` and changed
//! with `reconfig` (Java's `ZooKeeper.getConfig` and
//! `ZooKeeperAdmin.reconfigure`).

use super::*;
use session::CONFIG_NODE;

/// What [`Error::Unsupported`] says a `reconfig` needs when the server
/// answered `ReconfigDisabled`; [`Error::code`] is then
/// `Some(ZkError::ReconfigDisabled)`.
pub(crate) const NEEDS_RECONFIG_ENABLED: &str =
    "servers started with reconfigEnabled=true (ZooKeeper 3.5.3 or later)";

/// What a member of the ensemble does in it (the fourth field of a
/// `server.N` line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerRole {
    /// Votes (the default).
    Participant,
    /// Serves clients and follows the leader without voting.
    Observer,
}

/// One member of the ensemble's configuration, one `server.N=` line of
/// `/zookeeper/config`: Java's `QuorumPeer.QuorumServer`.
///
/// The line's form: `host:quorumPort:electionPort[:role][;[clientHost:]clientPort]`
/// (ZooKeeper 3.6 allows several `|`-separated quorum addresses; the first
/// is kept here).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuorumServer {
    /// The server id (`myid`), the `N` of `server.N`.
    pub id: u64,
    /// The host of its quorum and election addresses.
    pub host: String,
    /// The port followers reach the leader on.
    pub quorum_port: u16,
    /// The leader-election port.
    pub election_port: u16,
    /// Voting or observing.
    pub role: ServerRole,
    /// Its client address as configured (`host`, `port`); the host may be a
    /// wildcard (`0.0.0.0`) when only a port is given. `None`: the line has
    /// no client part (a server configured the pre-3.5 way).
    pub client_address: Option<(String, u16)>,
}

impl QuorumServer {
    /// The `host:port` a client connects to: the client address, with a
    /// wildcard host (`0.0.0.0`, `::`) or none replaced by the quorum host
    /// (what Curator's `EnsembleTracker` does; Java's
    /// `ConfigUtils.getClientConfigStr` keeps `0.0.0.0`, which no client can
    /// reach). `None` without a client part.
    pub fn connect_address(&self) -> Option<String> {
        let (host, port) = self.client_address.as_ref()?;
        let host = match host.as_str() {
            "" | "0.0.0.0" | "::" | "[::]" | "0:0:0:0:0:0:0:0" => self.host.as_str(),
            h => h,
        };
        Some(if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        })
    }

    /// The line's value in the form `reconfig` takes for a joining server:
    /// `server.N=host:quorum:election:role;clientHost:clientPort`.
    pub fn to_spec(&self) -> String {
        let role = match self.role {
            ServerRole::Participant => "participant",
            ServerRole::Observer => "observer",
        };
        let mut s = format!(
            "server.{}={}:{}:{}:{role}",
            self.id, self.host, self.quorum_port, self.election_port
        );
        if let Some((host, port)) = &self.client_address {
            let _ = std::fmt::Write::write_fmt(&mut s, format_args!(";{host}:{port}"));
        }
        s
    }

    /// Parses the value of a `server.N=` line for server `id`.
    fn parse(id: u64, value: &str) -> std::result::Result<QuorumServer, String> {
        let mut parts = value.trim().split(';');
        let quorum = parts.next().unwrap_or_default();
        let client = parts.next().map(str::trim).filter(|c| !c.is_empty());
        // 3.6's multi-address form: the first address names the member.
        let first = quorum.split('|').next().unwrap_or_default().trim();
        let (host, rest) = host_and_fields(first)?;
        if !(2..=3).contains(&rest.len()) {
            return Err(format!(
                "server.{id}: expected host:port:port[:role], got {value:?}"
            ));
        }
        let quorum_port = port(&rest[0], id)?;
        let election_port = port(&rest[1], id)?;
        let role = match rest
            .get(2)
            .map(|r| r.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("participant") => ServerRole::Participant,
            Some("observer") => ServerRole::Observer,
            Some(r) => return Err(format!("server.{id}: unknown role {r:?}")),
        };
        let client_address = match client {
            None => None,
            Some(c) => {
                let (h, rest) = host_and_fields(c)?;
                match rest.as_slice() {
                    // `;port`: a port alone parses as the "host".
                    [] => Some(("0.0.0.0".to_string(), port(&h, id)?)),
                    [p] => Some((h, port(p, id)?)),
                    _ => return Err(format!("server.{id}: bad client address {c:?}")),
                }
            }
        };
        Ok(QuorumServer {
            id,
            host,
            quorum_port,
            election_port,
            role,
            client_address,
        })
    }
}

/// `host` then the `:`-separated fields after it; an IPv6 host in brackets.
fn host_and_fields(s: &str) -> std::result::Result<(String, Vec<String>), String> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("unclosed [ in {s:?}"))?;
        let fields = match after.strip_prefix(':') {
            Some(a) => a.split(':').map(str::to_string).collect(),
            None if after.is_empty() => Vec::new(),
            None => return Err(format!("junk after ] in {s:?}")),
        };
        return Ok((host.to_string(), fields));
    }
    let mut it = s.split(':');
    let host = it.next().unwrap_or_default().to_string();
    Ok((host, it.map(str::to_string).collect()))
}

fn port(s: &str, id: u64) -> std::result::Result<u16, String> {
    s.trim()
        .parse::<u16>()
        .map_err(|_| format!("server.{id}: bad port {s:?}"))
}

/// The ensemble's configuration, parsed from `/zookeeper/config`: its
/// members and its version. What Java spreads over `QuorumVerifier` (the
/// members, the version) and `ConfigUtils.getClientConfigStr` (the client
/// addresses); what [`ZooKeeper::get_config`] and
/// [`ZooKeeper::reconfig`] return.
///
/// ```
/// use zklock::client::{ClientConfig, ServerRole};
/// let config = ClientConfig::parse(
///     b"server.1=10.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
///       server.2=10.0.0.2:2888:3888:observer;10.0.0.2:2181\n\
///       version=100000003",
/// )?;
/// assert_eq!(config.version(), 0x1_0000_0003);
/// assert_eq!(config.connect_string(), "10.0.0.1:2181,10.0.0.2:2181");
/// assert_eq!(config.server(2).unwrap().role, ServerRole::Observer);
/// # Ok::<(), zklock::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    version: i64,
    servers: Vec<QuorumServer>,
    raw: String,
}

impl ClientConfig {
    /// Parses the data of `/zookeeper/config`: `server.N=` lines, a
    /// `version=` line (hexadecimal, without `0x`, as the server writes it);
    /// other keys (`group.N`, `weight.N`) are ignored. Servers come sorted by
    /// id. Empty data (a standalone server) gives no servers and version 0.
    ///
    /// # Errors
    /// `BadArguments` naming the bad line (not UTF-8, a malformed
    /// `server.N` line, a bad version).
    pub fn parse(data: &[u8]) -> Result<ClientConfig> {
        let raw = std::str::from_utf8(data)
            .map_err(|_| Error::BadArguments("the ensemble's configuration is not UTF-8".into()))?
            .to_string();
        let bad = |why: String| Error::BadArguments(format!("ensemble configuration: {why}"));
        let mut version = 0;
        let mut servers = Vec::new();
        for line in raw.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(bad(format!("no '=' in {line:?}")));
            };
            let key = key.trim();
            if key == "version" {
                version = i64::from_str_radix(value.trim(), 16)
                    .map_err(|_| bad(format!("bad version {value:?}")))?;
            } else if let Some(id) = key.strip_prefix("server.") {
                let id = id
                    .parse::<u64>()
                    .map_err(|_| bad(format!("bad server id in {key:?}")))?;
                servers.push(QuorumServer::parse(id, value).map_err(bad)?);
            }
        }
        servers.sort_by_key(|s| s.id);
        Ok(ClientConfig {
            version,
            servers,
            raw,
        })
    }

    /// The configuration's version: the zxid that committed it, what
    /// [`ZooKeeper::reconfig`]'s `from_config` compares with.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// Every member, voting or not, by id.
    pub fn servers(&self) -> &[QuorumServer] {
        &self.servers
    }

    /// Member `id`, if the configuration has it.
    pub fn server(&self, id: u64) -> Option<&QuorumServer> {
        self.servers.iter().find(|s| s.id == id)
    }

    /// The voting members (participants).
    pub fn voting_members(&self) -> impl Iterator<Item = &QuorumServer> {
        self.servers
            .iter()
            .filter(|s| s.role == ServerRole::Participant)
    }

    /// The client addresses of every member that has one
    /// ([`QuorumServer::connect_address`]), comma-separated, in id order:
    /// a connect string (without chroot) for
    /// [`ZooKeeper::update_server_list`].
    pub fn connect_string(&self) -> String {
        self.servers
            .iter()
            .filter_map(QuorumServer::connect_address)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The data as the server sent it.
    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

impl fmt::Display for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// A membership change for [`ZooKeeper::reconfig`]: Java's
/// `ZooKeeperAdmin.reconfigure` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reconfig {
    /// Incremental: add `joining` (each a `server.N=...` line, as
    /// [`QuorumServer::to_spec`] writes) and remove `leaving` (server ids);
    /// either may be empty, not both.
    Incremental {
        /// `server.N=host:quorum:election[:role];[clientHost:]clientPort` lines.
        joining: Vec<String>,
        /// Ids of the members to remove.
        leaving: Vec<u64>,
    },
    /// Non-incremental: the whole new membership, `server.N=...` lines.
    NewMembers(Vec<String>),
}

impl Reconfig {
    /// Adds `joining` and removes `leaving` ([`Reconfig::Incremental`]).
    pub fn incremental<S: AsRef<str>>(joining: &[S], leaving: &[u64]) -> Reconfig {
        Reconfig::Incremental {
            joining: joining.iter().map(|s| s.as_ref().to_string()).collect(),
            leaving: leaving.to_vec(),
        }
    }

    /// Replaces the membership with `members` ([`Reconfig::NewMembers`]).
    pub fn new_members<S: AsRef<str>>(members: &[S]) -> Reconfig {
        Reconfig::NewMembers(members.iter().map(|s| s.as_ref().to_string()).collect())
    }

    /// The request's three strings (joining, leaving, new members), null
    /// where absent; `BadArguments` for an empty change or a line that
    /// would break the server's comma-separated list.
    fn wire(&self) -> Result<[Option<String>; 3]> {
        let check = |lines: &[String]| -> Result<Option<String>> {
            for l in lines {
                if l.trim().is_empty() || l.contains([',', '\n', '\r']) {
                    return Err(Error::BadArguments(format!(
                        "reconfig: bad server line {l:?} (one `server.N=...` per entry, no commas or newlines)"
                    )));
                }
            }
            Ok((!lines.is_empty()).then(|| lines.join(",")))
        };
        match self {
            Reconfig::Incremental { joining, leaving } => {
                if joining.is_empty() && leaving.is_empty() {
                    return Err(Error::BadArguments(
                        "reconfig: nothing joins and nothing leaves".into(),
                    ));
                }
                let leaving = (!leaving.is_empty()).then(|| {
                    leaving
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                });
                Ok([check(joining)?, leaving, None])
            }
            Reconfig::NewMembers(members) => {
                if members.is_empty() {
                    return Err(Error::BadArguments(
                        "reconfig: an empty new membership".into(),
                    ));
                }
                Ok([None, None, check(members)?])
            }
        }
    }
}

impl ZooKeeper {
    fn get_config_impl(&self, watcher: Option<WatcherRef>) -> Result<(ClientConfig, Stat)> {
        let mut w = Writer::request(0, op::GET_DATA);
        w.string(CONFIG_NODE).bool(watcher.is_some());
        let reg = watch_reg(false, Kind::Config, CONFIG_NODE, watcher);
        let body = self
            .shared()
            .call(op::GET_DATA, w.finish(), reg, self.deadline)
            .map_err(|e| config_error("getConfig", e))?;
        let (data, stat) = read_data(&body).map_err(|_| marshalling(CONFIG_NODE))?;
        Ok((ClientConfig::parse(&data)?, stat))
    }

    /// The ensemble's configuration, read from `/zookeeper/config`: Java's
    /// `ZooKeeper.getConfig`. It ignores the chroot (the node is always the
    /// server's `/zookeeper/config`). With `watch`, the default watcher is
    /// told of the next change (a `NodeDataChanged` whose path is
    /// `/zookeeper/config`, chroot or not); the watch is set again after a
    /// reconnect, as every other.
    ///
    /// A standalone server (or one started with `standaloneEnabled=true`
    /// and one member) has no configuration to tell: empty, with no
    /// servers. Read from a follower, the configuration may lag the
    /// leader's: [`sync`](Self::sync) `"/zookeeper/config"` first when that
    /// matters (Java's advice too).
    ///
    /// # Errors
    /// [`Error::Unsupported`] (`code()` `Unimplemented`) from a server before 3.5,
    /// which has no `/zookeeper/config`; `BadArguments` when the data does
    /// not parse ([`ClientConfig::parse`]); the session's errors.
    #[doc(alias = "getConfig")]
    pub fn get_config(&self, watch: bool) -> Result<(ClientConfig, Stat)> {
        self.get_config_impl(watch.then(|| self.default_watcher()))
    }

    /// [`get_config`](Self::get_config) with its own watcher.
    pub fn get_config_w(&self, watcher: impl Watcher + 'static) -> Result<(ClientConfig, Stat)> {
        self.get_config_impl(Some(Arc::new(watcher)))
    }

    /// [`get_config`](Self::get_config) with a shared watcher.
    pub fn get_config_watch(&self, watcher: Arc<dyn Watcher>) -> Result<(ClientConfig, Stat)> {
        self.get_config_impl(Some(watcher))
    }

    /// [`get_config`](Self::get_config) without waiting (Java's
    /// `getConfig(watcher, DataCallback, ctx)`): `callback` gets the outcome
    /// on the event thread (see [`delete_async`](Self::delete_async)); the
    /// watch, if any, is registered with the reply. Never blocks: what a
    /// watcher following the configuration calls.
    pub fn get_config_async(
        &self,
        watcher: Option<Arc<dyn Watcher>>,
        callback: impl FnOnce(Result<(ClientConfig, Stat)>) + Send + 'static,
    ) {
        let mut w = Writer::request(0, op::GET_DATA);
        w.string(CONFIG_NODE).bool(watcher.is_some());
        let reg = watch_reg(false, Kind::Config, CONFIG_NODE, watcher);
        self.shared().call_async(
            op::GET_DATA,
            w.finish(),
            reg,
            Box::new(move |reply| {
                callback(
                    reply
                        .map_err(|e| config_error("getConfig", e))
                        .and_then(|body| read_data(&body).map_err(|_| marshalling(CONFIG_NODE)))
                        .and_then(|(data, stat)| Ok((ClientConfig::parse(&data)?, stat))),
                )
            }),
        );
    }

    /// Changes the ensemble's membership: Java's
    /// `ZooKeeperAdmin.reconfigure` (opcode 16). `from_config`: the
    /// [version](ClientConfig::version) the change applies to, refused with
    /// `BadVersion` if the configuration moved on (`None`: any). Returns the
    /// new configuration once the leader committed it.
    ///
    /// The server checks `WRITE` on `/zookeeper/config` (which only a
    /// super user has, unless the servers skip ACLs): authenticate first,
    /// e.g. [`add_auth`](Self::add_auth) `digest` as the user of the
    /// servers' `DigestAuthenticationProvider.superDigest`. A joining
    /// server must be running and connected to the leader (started with
    /// the current configuration plus itself); a removed one stops serving
    /// clients, whose sessions move to the remaining members (see
    /// [`update_server_list`](Self::update_server_list)).
    ///
    /// # Errors
    /// [`Error::Unsupported`] when the server cannot: `code()`
    /// `ReconfigDisabled` from servers without `reconfigEnabled=true`,
    /// `Unimplemented` from a standalone server or one before 3.5;
    /// `BadVersion` (`from_config` is stale), `NewConfigNoQuorum` (the new
    /// members are not connected to the leader), `ReconfigInProgress`,
    /// `NoAuth`, `BadArguments` (an empty change, a malformed line; also the
    /// server's refusal of one); the session's errors. A reconfig lost to
    /// `ConnectionLoss` may have been applied: read the configuration again.
    #[doc(alias = "reconfigure")]
    pub fn reconfig(&self, change: &Reconfig, from_config: Option<i64>) -> Result<ClientConfig> {
        Ok(self.reconfig_stat(change, from_config)?.0)
    }

    /// [`reconfig`](Self::reconfig) that also returns the `Stat` of
    /// `/zookeeper/config` after the change.
    ///
    /// # Errors
    /// As [`reconfig`](Self::reconfig).
    pub fn reconfig_stat(
        &self,
        change: &Reconfig,
        from_config: Option<i64>,
    ) -> Result<(ClientConfig, Stat)> {
        let [joining, leaving, members] = change.wire()?;
        let mut w = Writer::request(0, op::RECONFIG);
        w.opt_string(joining.as_deref())
            .opt_string(leaving.as_deref())
            .opt_string(members.as_deref())
            .i64(from_config.unwrap_or(-1));
        self.check_size(&w, CONFIG_NODE)?;
        log::debug!("reconfig {change:?} from {from_config:?}");
        let body = self
            .shared()
            .call(op::RECONFIG, w.finish(), None, self.deadline)
            .map_err(|e| config_error("reconfig", e))?;
        let (data, stat) = read_data(&body).map_err(|_| marshalling(CONFIG_NODE))?;
        Ok((ClientConfig::parse(&data)?, stat))
    }
}

/// A `getConfig` or `reconfig` failure, typed: what the server lacks as
/// [`Error::Unsupported`], the rest with the config node's path.
fn config_error(operation: &'static str, e: Error) -> Error {
    let needs = match (operation, e.code()) {
        ("reconfig", Some(ZkError::ReconfigDisabled)) => NEEDS_RECONFIG_ENABLED,
        ("reconfig", Some(ZkError::Unimplemented)) => {
            "ZooKeeper 3.5 or later, in quorum mode (standaloneEnabled=false or more than one server)"
        }
        ("getConfig", Some(ZkError::NoNode)) => "ZooKeeper 3.5 or later (/zookeeper/config)",
        _ => return with_path(e, CONFIG_NODE),
    };
    Error::Unsupported { operation, needs }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse() {
        let c = ClientConfig::parse(
            b"server.3=[::1]:2890:3890:observer;[::1]:2183\n\
              server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
              server.2=h2:2889:3889|h2b:2999:3999;2182\n\
              group.1=1:2\n\
              version=10000000a\n",
        )
        .unwrap();
        assert_eq!(c.version(), 0x1_0000_000a);
        let ids: Vec<u64> = c.servers().iter().map(|s| s.id).collect();
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(c.voting_members().count(), 2);
        assert_eq!(
            c.connect_string(),
            "127.0.0.1:2181,h2:2182,[::1]:2183",
            "wildcards become the quorum host"
        );
        let s1 = c.server(1).unwrap();
        assert_eq!(
            s1.to_spec(),
            "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181"
        );
        assert_eq!(c.server(3).unwrap().host, "::1");
        // Pre-3.5 lines: no client part.
        let old = ClientConfig::parse(b"server.1=h:1:2\nversion=0").unwrap();
        assert_eq!(old.server(1).unwrap().connect_address(), None);
        assert_eq!(old.connect_string(), "");
        // A standalone server's empty data.
        let empty = ClientConfig::parse(b"").unwrap();
        assert_eq!((empty.version(), empty.servers().len()), (0, 0));
        for bad in [
            &b"server.x=h:1:2"[..],
            b"server.1=h:1",
            b"server.1=h:1:2:boss",
            b"server.1=h:1:99999",
            b"server.1=h:1:2;a:b:c",
            b"version=zz",
            b"junk",
            b"\xff",
        ] {
            assert!(
                matches!(ClientConfig::parse(bad), Err(Error::BadArguments(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn reconfig_requests_are_checked_before_sending() {
        let wire = Reconfig::incremental(&["server.4=h:1:2;3"], &[2, 3])
            .wire()
            .unwrap();
        assert_eq!(
            wire,
            [Some("server.4=h:1:2;3".into()), Some("2,3".into()), None]
        );
        let wire = Reconfig::incremental::<&str>(&[], &[1]).wire().unwrap();
        assert_eq!(wire, [None, Some("1".into()), None]);
        let wire = Reconfig::new_members(&["server.1=a:1:2;3", "server.2=b:1:2;3"])
            .wire()
            .unwrap();
        assert_eq!(
            wire,
            [None, None, Some("server.1=a:1:2;3,server.2=b:1:2;3".into())]
        );
        for bad in [
            Reconfig::incremental::<&str>(&[], &[]),
            Reconfig::new_members::<&str>(&[]),
            Reconfig::incremental(&["server.4=h:1:2;3,server.5=h:1:2;3"], &[]),
            Reconfig::new_members(&["server.1=a\n"]),
        ] {
            assert!(matches!(bad.wire(), Err(Error::BadArguments(_))), "{bad:?}");
        }
    }

    #[test]
    fn servers_lacking_reconfig_are_unsupported() {
        let e = config_error("reconfig", Error::zk_code(ZkError::ReconfigDisabled));
        assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
        assert_eq!(e.code(), Some(ZkError::ReconfigDisabled));
        assert!(e.to_string().contains("reconfigEnabled=true"), "{e}");
        let e = config_error("reconfig", Error::zk_code(ZkError::Unimplemented));
        assert_eq!(e.code(), Some(ZkError::Unimplemented));
        assert!(e.to_string().contains("3.5"), "{e}");
        let e = config_error("getConfig", Error::zk_code(ZkError::NoNode));
        assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
        let e = config_error("reconfig", Error::zk_code(ZkError::BadVersion));
        assert!(
            matches!(&e, Error::Zk { code: ZkError::BadVersion, path: Some(p) } if p == CONFIG_NODE),
            "{e:?}"
        );
    }
}
