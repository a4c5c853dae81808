//! [`ZkEnsemble`]: a ZooKeeper ensemble (`QuorumPeerMain` servers) on loopback.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use super::ids::{self, ServerId};
use super::pki::TestPki;
use super::process::{
    conf_names_dir, four_letter_timeout, free_ports, is_bind_failure, log_len, log_since, log_tail,
    make_temp_dir, parse_mode, JvmSpec, ReservedPort, Watchdog, FIX_HINT,
};
use super::proxy::FaultProxy;
use super::server::{
    jaas_server_section, tls_config, JAAS_FILE, MAX_SESSION_TIMEOUT, MIN_SESSION_TIMEOUT,
    SASL_CONFIG, TICK_TIME,
};
use super::FOUR_LETTER_TIMEOUT;

const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// The `digest` credentials of the super user of an ensemble of
/// [`ZkEnsemble::start_reconfigurable`] (`add_auth("digest", SUPER_AUTH)`):
/// the user who may `reconfig`.
pub const SUPER_AUTH: &[u8] = b"super:zklock";

/// [`SUPER_AUTH`]'s digest, as the servers' `superDigest` setting names
/// it (`base64(sha1("super:zklock"))`).
pub const SUPER_DIGEST: &str = "super:GTvXID4KgrBNvIYRGOvRjN2lsFw=";

/// How long [`ZkEnsemble::start`] waits for the first quorum. Three cold JVMs on a
/// loaded two-core machine need a few seconds.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Followers must connect and sync within `initLimit` ticks (10 s): generous, as
/// JVMs start slowly on a loaded machine. A follower that falls `syncLimit` ticks
/// (2 s) behind is dropped. A killed member's sockets close at once, so failover
/// does not wait for either limit.
const INIT_LIMIT: u32 = 50;
const SYNC_LIMIT: u32 = 10;

/// A ZooKeeper ensemble of (by default) three `QuorumPeerMain` servers on loopback,
/// each with its own free client, peer and election ports, its own data directory
/// and log, and the same settings as [`ZkServer`](super::ZkServer) (tick, session
/// limits, four-letter words, TTL nodes). Clients reach them on 127.0.0.1.
///
/// Members are numbered `0..size()`. Their ZooKeeper ids (`myid`,
/// [`server_id`](Self::server_id)) are not the index plus one: each is
/// reserved, for the ensemble's life, among every live ensemble of the
/// machine (other test processes' too), and ascends with the index (but
/// for a member [added](Self::add_member) later). Its ports (client,
/// quorum, election) are reserved the same way while the ensemble lives, so
/// the ports a stopped member frees are bound again by no other test
/// process's server: its peers, which still list them, would reach a
/// stranger, whose configuration a looking member of a
/// [reconfigurable](Self::start_reconfigurable) ensemble adopts when it is
/// newer (leader election reads a notification's configuration before it
/// checks the sender), and whose votes it would count were its id one of
/// theirs. Every port is on 127.0.0.1.
///
/// Every JVM runs under the same watchdog as `ZkServer`, so none outlives the test
/// process; dropping the ensemble kills all members and removes the directory
/// (kept, and its path printed, when the thread is panicking).
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::testing::ZkEnsemble;
///
/// let mut ensemble = ZkEnsemble::start()?;
/// let servers = ensemble.connect_string(); // "127.0.0.1:A,127.0.0.1:B,127.0.0.1:C"
/// let leader = ensemble.leader().expect("a started ensemble has a leader");
/// ensemble.kill(leader)?;
/// ensemble.wait_for_quorum(Duration::from_secs(30))?; // the other two elect a leader
/// ensemble.restart(leader)?;
/// # let _ = servers;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct ZkEnsemble {
    dir: PathBuf,
    members: Vec<Member>,
    /// `links[from][to]`: the quorum link proxy member `from` reaches member
    /// `to`'s quorum port through (see
    /// [`start_with_quorum_links`](ZkEnsemble::start_with_quorum_links));
    /// empty otherwise.
    links: Vec<Vec<Option<FaultProxy>>>,
    /// Started by [`start_reconfigurable`](ZkEnsemble::start_reconfigurable):
    /// dynamic configuration, `reconfigEnabled=true`.
    reconfigurable: bool,
}

#[derive(Debug)]
struct Member {
    client_port: u16,
    /// Its quorum and election ports (the `server.N` line's).
    quorum_port: u16,
    election_port: u16,
    /// Taken out of the ensemble by [`ZkEnsemble::stop_removed`].
    removed: bool,
    /// The TLS port of a member of [`ZkEnsemble::start_tls`].
    secure_port: Option<u16>,
    dir: PathBuf,
    watchdog: Option<Watchdog>,
    /// Its id (`myid`, the `N` of its `server.N` line), held while the
    /// member lives. Declared after `watchdog`, so dropped after it (whose
    /// drop ends the JVM): an id is let go only once its server is gone.
    id: ServerId,
    /// Its ports (client, quorum, election, TLS), reserved machine-wide while
    /// the member lives, stopped or removed too (clients and peers still
    /// name them): let go after the watchdog, as the id.
    _ports: Vec<ReservedPort>,
}

impl Member {
    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// Its `server.N` line, with its client address (the
    /// dynamic-configuration form).
    fn spec(&self) -> String {
        format!(
            "server.{}=127.0.0.1:{}:{}:participant;127.0.0.1:{}",
            self.id.get(),
            self.quorum_port,
            self.election_port,
            self.client_port
        )
    }

    fn log(&self) -> PathBuf {
        self.dir.join("zookeeper.log")
    }

    fn spawn(&mut self, root: &Path) -> io::Result<()> {
        let spec = JvmSpec {
            main_class: QUORUM_MAIN,
            config: self.dir.join("zoo.cfg"),
            log: self.log(),
            cleanup: Some(self.dir.clone()),
            cleanup_parent: Some(root.to_path_buf()),
            netty: self.secure_port.is_some(),
        };
        self.watchdog = Some(Watchdog::spawn(&spec)?);
        Ok(())
    }

    fn running(&self) -> bool {
        self.watchdog.as_ref().is_some_and(Watchdog::alive)
    }

    /// Whether the member's leader-election listener holds its election port,
    /// from its log since byte `since` (its launch): `Some(true)` once it
    /// accepts connections there; `Some(false)` when it gave up binding it
    /// (another process took the port: the JVM exits a moment later, and an
    /// ensemble that looked whole loses a member, as a SASL failover test
    /// found when the quorum was gone after one kill) or the JVM is gone;
    /// `None` while undecided. Every supported server version logs both lines.
    fn election_listening(&self, since: u64) -> Option<bool> {
        let log = log_since(&self.log(), since);
        if log.contains("my election bind port") {
            Some(true)
        } else if log.contains("Leaving listener thread") || !self.running() {
            Some(false)
        } else {
            None
        }
    }

    fn kill(&mut self) -> io::Result<()> {
        match self.watchdog.take() {
            Some(w) => w.finish("KILL", true).map(drop),
            None => Ok(()),
        }
    }

    /// `Some(mode)` when the member answers `srvr` with a mode.
    fn mode(&self) -> Option<String> {
        if !self.running() {
            return None;
        }
        four_letter_timeout(&self.addr(), "srvr", Duration::from_secs(1))
            .ok()
            .and_then(|r| parse_mode(&r))
    }
}

impl ZkEnsemble {
    /// Starts a three-server ensemble and waits (up to 60 s) until every member
    /// serves: one leader, two followers.
    ///
    /// # Errors
    ///
    /// When ZooKeeper or Java is missing, or no quorum forms, the error says how to fix
    /// it and includes the tail of each member's log.
    pub fn start() -> io::Result<ZkEnsemble> {
        ZkEnsemble::start_with_size(3)
    }

    /// Starts an ensemble of `size` servers (1 to 9; odd sizes make sense) and waits
    /// until every member serves.
    pub fn start_with_size(size: usize) -> io::Result<ZkEnsemble> {
        ZkEnsemble::start_with(size, None)
    }

    /// Starts a three-server ensemble whose members each also have a TLS port,
    /// configured as [`ZkServer::start_tls`](super::ZkServer::start_tls) does
    /// (Netty, `pki`'s stores, `ssl.clientAuth=need`, TLS 1.2);
    /// [`secure_connect_string`](Self::secure_connect_string) names them.
    /// `pki` must outlive the ensemble.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_tls(pki: &TestPki) -> io::Result<ZkEnsemble> {
        ZkEnsemble::start_with(3, Some(pki))
    }

    /// Starts a three-server ensemble whose members each require SASL, as
    /// [`ZkServer::start_sasl`](super::ZkServer::start_sasl) does (a JAAS
    /// `Server` section with `DigestLoginModule` and `users`, SASL required on
    /// every client connection), with the TLS ports of
    /// [`start_tls`](Self::start_tls) as well when `pki` is given. The members
    /// talk to each other without SASL (quorum SASL is a separate setting).
    ///
    /// # Errors
    /// As [`start`](Self::start); `InvalidInput` for a bad user name or
    /// password (see `start_sasl`).
    pub fn start_sasl(users: &[(&str, &str)], pki: Option<&TestPki>) -> io::Result<ZkEnsemble> {
        let jaas = jaas_server_section(users)?;
        ZkEnsemble::start_secured(3, pki, Some(&jaas), false)
    }

    /// Starts a three-server ensemble whose members reach each other's quorum
    /// port (the port a follower connects to when the other member leads)
    /// through a [`FaultProxy::start_quorum_link`] each:
    /// [`quorum_link(follower, leader)`](Self::quorum_link) is the link a
    /// follower's proposals, commits, pings, forwarded requests and votes
    /// travel on. Election ports are direct. `syncLimit` is `initLimit`'s
    /// 10 s instead of 2 s, so that a test can hold a follower's votes
    /// ([`FaultProxy::hold_acks`]) for a few seconds on a loaded machine
    /// without the leader dropping it; a killed member still fails over at
    /// once (its sockets close).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_with_quorum_links() -> io::Result<ZkEnsemble> {
        ZkEnsemble::start_secured(3, None, None, true)
    }

    /// The quorum link member `follower` reaches member `leader` through, in
    /// an ensemble of [`start_with_quorum_links`](Self::start_with_quorum_links)
    /// (`None` in another, or for `follower == leader` or a member out of
    /// range). It carries traffic only while `leader` leads and `follower`
    /// follows.
    pub fn quorum_link(&self, follower: usize, leader: usize) -> Option<&FaultProxy> {
        self.links.get(follower)?.get(leader)?.as_ref()
    }

    fn start_with(size: usize, tls: Option<&TestPki>) -> io::Result<ZkEnsemble> {
        ZkEnsemble::start_secured(size, tls, None, false)
    }

    /// Starts a three-server ensemble that can change by `reconfig`
    /// (ZooKeeper 3.5 or later): `reconfigEnabled=true`,
    /// `standaloneEnabled=false`, the members in a dynamic configuration
    /// file (`server.N=127.0.0.1:quorum:election:participant;127.0.0.1:client`),
    /// and [`SUPER_DIGEST`]'s user as the super user, who may reconfigure
    /// (`add_auth("digest", SUPER_AUTH)`). [`add_member`](Self::add_member)
    /// starts a server that a `reconfig` can add;
    /// [`stop_removed`](Self::stop_removed) stops one a `reconfig` removed.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_reconfigurable() -> io::Result<ZkEnsemble> {
        ZkEnsemble::start_prepared(3, None, None, false, |ensemble| {
            ensemble.reconfigurable = true;
            for i in 0..3 {
                ensemble.write_dynamic_config(i, &[0, 1, 2])?;
            }
            Ok(())
        })
    }

    /// Starts a three-server ensemble whose members can serve read-only
    /// (`-Dreadonlymode.enabled=true`) and keep local sessions
    /// (`localSessionsEnabled=true`, upgraded to global ones by the first
    /// ephemeral node, which a read-only server of ZooKeeper
    /// 3.7 and later needs to make a session, ZOOKEEPER-3863): a member cut
    /// off from its quorum (say the two others [killed](Self::kill)) serves
    /// reads, about 2 s later, to clients that
    /// [connect read-only](crate::client::ZooKeeperBuilder::with_read_only),
    /// and answers `isro` with `ro`.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_read_only() -> io::Result<ZkEnsemble> {
        ZkEnsemble::start_prepared(3, None, None, false, |ensemble| {
            for member in &ensemble.members {
                let config = member.dir.join("zoo.cfg");
                let mut text = fs::read_to_string(&config)?;
                text.push_str("localSessionsEnabled=true\nlocalSessionsUpgradingEnabled=true\n");
                fs::write(&config, text)?;
                fs::write(member.dir.join(super::process::READ_ONLY_MARK), "")?;
            }
            Ok(())
        })
    }

    /// Member `i`'s `server.N` line in the form `reconfig` takes for a
    /// joining server (`server.N=127.0.0.1:Q:E:participant;127.0.0.1:C`),
    /// for an ensemble of [`start_reconfigurable`](Self::start_reconfigurable).
    ///
    /// # Panics
    /// If `i >= size()`.
    pub fn server_spec(&self, i: usize) -> String {
        self.members[i].spec()
    }

    /// The id member `i` runs with (ZooKeeper's `myid`, the `N` of its
    /// `server.N` line), which `reconfig` and `/zookeeper/config` know it
    /// by. Unique among the live ensembles of the machine (see
    /// [`ZkEnsemble`]), in `1..=127`, ascending with `i` among the members
    /// started together (one [added](Self::add_member) later takes any free
    /// id); not `i + 1`.
    ///
    /// # Panics
    /// If `i >= size()`.
    pub fn server_id(&self, i: usize) -> u64 {
        self.members[i].id.get()
    }

    /// Starts one more server for an ensemble of
    /// [`start_reconfigurable`](Self::start_reconfigurable), configured
    /// with every member not [removed](Self::stop_removed) plus itself (the
    /// way ZooKeeper's reconfiguration guide adds a server), and waits (up
    /// to 60 s) until it follows the leader, not yet voting: a `reconfig`
    /// joining [`server_spec(i)`](Self::server_spec) then makes it a member.
    /// Returns its index.
    ///
    /// # Errors
    /// `Unsupported` for an ensemble not started reconfigurable; when it does
    /// not come up, the error has the tail of its log.
    pub fn add_member(&mut self) -> io::Result<usize> {
        if !self.reconfigurable {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "add_member needs an ensemble of ZkEnsemble::start_reconfigurable",
            ));
        }
        let i = self.members.len();
        let id = ids::reserve(1)?.remove(0);
        let reserved = free_ports(3)?;
        let ports: Vec<u16> = reserved.iter().map(ReservedPort::get).collect();
        let member_dir = self.dir.join(i.to_string());
        let data = member_dir.join("data");
        fs::create_dir_all(&data)?;
        fs::write(data.join("myid"), format!("{}\n", id.get()))?;
        fs::write(
            member_dir.join("zoo.cfg"),
            self.static_config(&data, SYNC_LIMIT),
        )?;
        self.members.push(Member {
            id,
            client_port: ports[0],
            quorum_port: ports[1],
            election_port: ports[2],
            removed: false,
            secure_port: None,
            dir: member_dir,
            watchdog: None,
            _ports: reserved,
        });
        let view: Vec<usize> = (0..self.members.len())
            .filter(|&m| !self.members[m].removed)
            .collect();
        self.write_dynamic_config(i, &view)?;
        self.spawn_following(i, "added")?;
        Ok(i)
    }

    /// Starts member `i` again, which a `reconfig` removed and
    /// [`stop_removed`](Self::stop_removed) stopped, so that a `reconfig`
    /// can add it back under its own id, with its data and ports (a server
    /// that comes back, as a Kubernetes pod on its volume): configured with
    /// every member not removed plus itself, as
    /// [`add_member`](Self::add_member) does, and waited for (up to 60 s)
    /// until it follows the leader, not yet voting. A `reconfig` joining
    /// [`server_spec(i)`](Self::server_spec) then makes it a member again.
    ///
    /// # Errors
    /// `Unsupported` for an ensemble not started reconfigurable;
    /// `InvalidInput` for a member not stopped by `stop_removed`; when it
    /// does not come up (its ports taken meanwhile, for one), the error has
    /// the tail of its log, and the member stays removed.
    pub fn rejoin_removed(&mut self, i: usize) -> io::Result<()> {
        if !self.reconfigurable {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "rejoin_removed needs an ensemble of ZkEnsemble::start_reconfigurable",
            ));
        }
        if !self.member_mut(i)?.removed {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ensemble member {i} was not removed (stop_removed)"),
            ));
        }
        self.members[i].removed = false;
        let view: Vec<usize> = (0..self.members.len())
            .filter(|&m| !self.members[m].removed)
            .collect();
        let started = self
            .write_dynamic_config(i, &view)
            .and_then(|()| self.spawn_following(i, "rejoining"));
        if started.is_err() {
            self.members[i].removed = true;
        }
        started
    }

    /// Starts member `i` and waits (up to 60 s) until it follows the leader
    /// and holds its election port; kills it on failure. `what`: the
    /// member's part, for the error.
    fn spawn_following(&mut self, i: usize, what: &str) -> io::Result<()> {
        let root = self.dir.clone();
        let log_start = log_len(&self.members[i].log());
        self.members[i].spawn(&root)?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if self.members[i].mode().as_deref() == Some("follower")
                && self.members[i].election_listening(log_start) == Some(true)
            {
                return Ok(());
            }
            if !self.members[i].running() || Instant::now() >= deadline {
                let member = &mut self.members[i];
                let tail = log_tail(&member.log(), 30);
                let _ = member.kill();
                return Err(io::Error::other(format!(
                    "the {what} member {i} did not follow the leader on {}; {FIX_HINT}.\nLog:\n{tail}",
                    member.addr()
                )));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops member `i`, which a `reconfig` removed from the ensemble (a
    /// removed follower may go on following the leader without a vote, and
    /// serving its clients, until it is stopped: 3.8's still answers `srvr`
    /// as a follower seconds later), and leaves it out of later
    /// [`add_member`](Self::add_member) configurations and of
    /// [`wait_for_quorum`](Self::wait_for_quorum)'s majority.
    pub fn stop_removed(&mut self, i: usize) -> io::Result<()> {
        let member = self.member_mut(i)?;
        member.removed = true;
        member.kill()
    }

    /// A member's static `zoo.cfg` in a reconfigurable ensemble: no client
    /// port (it is in the dynamic file), the dynamic file beside it.
    fn static_config(&self, data: &Path, sync_limit: u32) -> String {
        format!(
            "tickTime={tick}\n\
             initLimit={INIT_LIMIT}\n\
             syncLimit={sync_limit}\n\
             dataDir={data}\n\
             minSessionTimeout={min}\n\
             maxSessionTimeout={max}\n\
             maxClientCnxns=0\n\
             4lw.commands.whitelist=*\n\
             admin.enableServer=false\n\
             reconfigEnabled=true\n\
             standaloneEnabled=false\n\
             DigestAuthenticationProvider.superDigest={SUPER_DIGEST}\n\
             dynamicConfigFile={dynamic}\n",
            tick = TICK_TIME.as_millis(),
            data = data.display(),
            min = MIN_SESSION_TIMEOUT.as_millis(),
            max = MAX_SESSION_TIMEOUT.as_millis(),
            dynamic = data
                .parent()
                .unwrap_or(data)
                .join("zoo.cfg.dynamic")
                .display(),
        )
    }

    /// Writes member `i`'s static `zoo.cfg` and its dynamic file naming
    /// `view`'s members.
    fn write_dynamic_config(&self, i: usize, view: &[usize]) -> io::Result<()> {
        let member = &self.members[i];
        let data = member.dir.join("data");
        fs::write(
            member.dir.join("zoo.cfg"),
            self.static_config(&data, SYNC_LIMIT),
        )?;
        let mut dynamic = String::new();
        for &m in view {
            let _ = writeln!(dynamic, "{}", self.members[m].spec());
        }
        fs::write(member.dir.join("zoo.cfg.dynamic"), dynamic)
    }

    /// `jaas`: the JAAS file of a SASL ensemble; `links`: see
    /// [`start_with_quorum_links`](Self::start_with_quorum_links).
    fn start_secured(
        size: usize,
        tls: Option<&TestPki>,
        jaas: Option<&str>,
        links: bool,
    ) -> io::Result<ZkEnsemble> {
        if !(1..=9).contains(&size) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ensemble size {size} is not in 1..=9"),
            ));
        }
        ZkEnsemble::start_prepared(size, tls, jaas, links, |_| Ok(()))
    }

    /// Configures an ensemble, lets `prepare` finish its files, starts its
    /// members and waits for the quorum and every election listener; starts
    /// over with fresh ports (three times at most) when another process took
    /// one.
    fn start_prepared(
        size: usize,
        tls: Option<&TestPki>,
        jaas: Option<&str>,
        links: bool,
        prepare: impl Fn(&mut ZkEnsemble) -> io::Result<()>,
    ) -> io::Result<ZkEnsemble> {
        let mut last_error = None;
        // A port picked as free can be taken by another process before the JVM binds
        // it; then start over with fresh ports.
        for _ in 0..3 {
            let mut ensemble = ZkEnsemble::configure(size, tls, jaas, links)?;
            prepare(&mut ensemble)?;
            for i in 0..size {
                let dir = ensemble.dir.clone();
                ensemble.members[i].spawn(&dir)?;
            }
            match ensemble.wait_for_quorum(START_TIMEOUT) {
                Ok(()) if !ensemble.members_are_ours() => {
                    last_error = Some(io::Error::other("another server took a port"))
                }
                // A quorum forms even while a member's election port is
                // taken (its outgoing links suffice); the member exits once
                // its listener gives up.
                Ok(()) => match ensemble.wait_for_election_listeners(START_TIMEOUT) {
                    Ok(true) => return Ok(ensemble),
                    Ok(false) => {
                        last_error = Some(io::Error::other(
                            "another process took a member's election port",
                        ))
                    }
                    Err(e) => {
                        let message = format!("{e}\n{}", ensemble.log_tails());
                        ensemble.keep_dir_on_drop();
                        return Err(io::Error::new(e.kind(), message));
                    }
                },
                Err(e) => {
                    let bind_failure = ensemble
                        .members
                        .iter()
                        .any(|m| is_bind_failure(&log_since(&m.log(), 0)));
                    if !bind_failure {
                        let message = format!("{e}\n{}", ensemble.log_tails());
                        ensemble.keep_dir_on_drop();
                        return Err(io::Error::new(e.kind(), message));
                    }
                    last_error = Some(e);
                }
            }
            log::debug!("a ZooKeeper ensemble port was taken; retrying with fresh ports");
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("ensemble did not start")))
    }

    fn configure(
        size: usize,
        tls: Option<&TestPki>,
        jaas: Option<&str>,
        links: bool,
    ) -> io::Result<ZkEnsemble> {
        let ids = ids::reserve(size)?;
        let numbers: Vec<u64> = ids.iter().map(ServerId::get).collect();
        let dir = make_temp_dir("ensemble")?;
        // The link proxies bind their ports first, so that none takes a port
        // `free_ports` picks; their targets are set once the ports are known.
        let mut proxies = Vec::new();
        for from in 0..size {
            let mut row = Vec::new();
            for to in 0..size {
                let link = links && from != to;
                row.push(if link {
                    Some(FaultProxy::start_quorum_link("127.0.0.1:1")?)
                } else {
                    None
                });
            }
            proxies.push(row);
        }
        let mut reserved = free_ports(3 * size)?;
        let ports: Vec<u16> = reserved.iter().map(ReservedPort::get).collect();
        let mut secure_reserved = match tls {
            Some(_) => free_ports(size)?,
            None => Vec::new(),
        };
        let secure_ports: Vec<u16> = secure_reserved.iter().map(ReservedPort::get).collect();
        // Member `from`'s view of the ensemble: the quorum ports of the
        // others are their link proxies when there are some.
        let servers = |from: usize| -> io::Result<String> {
            let mut servers = String::new();
            for to in 0..size {
                let quorum_port = match &proxies[from][to] {
                    Some(proxy) => {
                        proxy.set_target(("127.0.0.1", ports[3 * to + 1]))?;
                        proxy.addr().port()
                    }
                    None => ports[3 * to + 1],
                };
                let _ = writeln!(
                    servers,
                    "server.{}=127.0.0.1:{}:{}",
                    numbers[to],
                    quorum_port,
                    ports[3 * to + 2]
                );
            }
            Ok(servers)
        };
        let sync_limit = if links { INIT_LIMIT } else { SYNC_LIMIT };
        let mut members = Vec::with_capacity(size);
        for (i, id) in ids.into_iter().enumerate() {
            let servers = servers(i)?;
            let member_dir = dir.join(i.to_string());
            let data = member_dir.join("data");
            fs::create_dir_all(&data)?;
            fs::write(data.join("myid"), format!("{}\n", id.get()))?;
            let mut config = format!(
                "tickTime={tick}\n\
                 initLimit={INIT_LIMIT}\n\
                 syncLimit={sync_limit}\n\
                 dataDir={data}\n\
                 clientPort={port}\n\
                 clientPortAddress=127.0.0.1\n\
                 minSessionTimeout={min}\n\
                 maxSessionTimeout={max}\n\
                 maxClientCnxns=0\n\
                 4lw.commands.whitelist=*\n\
                 admin.enableServer=false\n\
                 {servers}",
                tick = TICK_TIME.as_millis(),
                data = data.display(),
                port = ports[3 * i],
                min = MIN_SESSION_TIMEOUT.as_millis(),
                max = MAX_SESSION_TIMEOUT.as_millis(),
            );
            let secure_port = secure_ports.get(i).copied();
            if let (Some(port), Some(pki)) = (secure_port, tls) {
                config.push_str(&tls_config(port, pki, false));
            }
            if let Some(jaas) = jaas {
                config.push_str(SASL_CONFIG);
                fs::write(member_dir.join(JAAS_FILE), jaas)?;
            }
            fs::write(member_dir.join("zoo.cfg"), config)?;
            let mut held: Vec<ReservedPort> = reserved.drain(..3).collect();
            if !secure_reserved.is_empty() {
                held.push(secure_reserved.remove(0));
            }
            members.push(Member {
                id,
                client_port: ports[3 * i],
                quorum_port: ports[3 * i + 1],
                election_port: ports[3 * i + 2],
                removed: false,
                secure_port,
                dir: member_dir,
                watchdog: None,
                _ports: held,
            });
        }
        Ok(ZkEnsemble {
            dir,
            members,
            links: proxies,
            reconfigurable: false,
        })
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// The connect string naming every member:
    /// `"127.0.0.1:A,127.0.0.1:B,127.0.0.1:C"`.
    pub fn connect_string(&self) -> String {
        self.members
            .iter()
            .map(Member::addr)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The connect string naming every member's TLS port (an ensemble of
    /// [`start_tls`](Self::start_tls)): `"localhost:A,localhost:B,localhost:C"`,
    /// the host the servers' certificate names; `None` without TLS.
    pub fn secure_connect_string(&self) -> Option<String> {
        self.members
            .iter()
            .map(|m| m.secure_port.map(|p| format!("localhost:{p}")))
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(","))
    }

    /// Member `i`'s client address, `"127.0.0.1:PORT"` (to put a
    /// [`FaultProxy`](super::FaultProxy) in front of one member).
    ///
    /// # Panics
    ///
    /// If `i >= size()`.
    pub fn address(&self, i: usize) -> String {
        self.members[i].addr()
    }

    /// Member `i`'s client port.
    ///
    /// # Panics
    ///
    /// If `i >= size()`.
    pub fn port(&self, i: usize) -> u16 {
        self.members[i].client_port
    }

    /// Member `i`'s JVM PID, or `None` while it is killed (or `i` is out of range).
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members.get(i)?.watchdog.as_ref().map(Watchdog::pid)
    }

    /// Whether member `i`'s JVM is running.
    pub fn is_running(&self, i: usize) -> bool {
        self.members.get(i).is_some_and(Member::running)
    }

    /// The directory holding every member's `zoo.cfg`, data and `zookeeper.log`
    /// (in subdirectories `0`, `1`, ...).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Member `i`'s log file.
    pub fn log_path(&self, i: usize) -> Option<PathBuf> {
        self.members.get(i).map(Member::log)
    }

    /// Kills member `i` (SIGKILL) and waits until its process is gone. Its data and
    /// ports are kept for [`restart`](ZkEnsemble::restart). Does nothing if it is
    /// already killed.
    pub fn kill(&mut self, i: usize) -> io::Result<()> {
        self.member_mut(i)?.kill()
    }

    /// Kills member `i` if it runs, starts it again with the same ports and data, and
    /// waits (up to 30 s) until its JVM answers `ruok` and its leader-election
    /// listener holds its port (a port taken meanwhile is waited for). It rejoins the ensemble on
    /// its own; [`wait_for_quorum`](ZkEnsemble::wait_for_quorum) waits until it
    /// serves.
    pub fn restart(&mut self, i: usize) -> io::Result<()> {
        let root = self.dir.clone();
        let member = self.member_mut(i)?;
        member.kill()?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log_start = log_len(&member.log());
            member.spawn(&root)?;
            loop {
                if !member.running() {
                    break;
                }
                let ok = four_letter_timeout(&member.addr(), "ruok", Duration::from_secs(1));
                // Answering, and holding its election port (else it exits
                // in a moment: the port was taken while it was down).
                if ok.is_ok_and(|r| r == "imok") {
                    match member.election_listening(log_start) {
                        Some(true) => return Ok(()),
                        Some(false) => break,
                        None => {}
                    }
                }
                if Instant::now() >= deadline {
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
            let _ = member.kill();
            let port_taken = is_bind_failure(&log_since(&member.log(), log_start));
            if !port_taken || Instant::now() >= deadline {
                return Err(io::Error::other(format!(
                    "ensemble member {i} did not come back on {}; {FIX_HINT}.\nLog {}:\n{}",
                    member.addr(),
                    member.log().display(),
                    log_tail(&member.log(), 30)
                )));
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    /// Freezes member `i` (SIGSTOP): its sockets stay open but it answers nothing —
    /// a hung server. [`resume`](ZkEnsemble::resume) thaws it.
    pub fn pause(&mut self, i: usize) -> io::Result<()> {
        self.running_watchdog(i)?.freeze(true)
    }

    /// Thaws member `i` after [`pause`](ZkEnsemble::pause) (SIGCONT).
    pub fn resume(&mut self, i: usize) -> io::Result<()> {
        self.running_watchdog(i)?.freeze(false)
    }

    /// The member that reports `Mode: leader` in `srvr`, if any.
    pub fn leader(&self) -> Option<usize> {
        (0..self.size()).find(|&i| self.members[i].mode().as_deref() == Some("leader"))
    }

    /// Member `i`'s mode from `srvr`: `"leader"`, `"follower"` or `"observer"`;
    /// `None` when it is killed or not serving (e.g. electing).
    pub fn mode(&self, i: usize) -> Option<String> {
        self.members.get(i)?.mode()
    }

    /// Sends a four-letter word to member `i` and returns the reply (5 s bounds).
    pub fn four_letter(&self, i: usize, command: &str) -> io::Result<String> {
        let member = self
            .members
            .get(i)
            .ok_or_else(|| out_of_range(i, self.size()))?;
        four_letter_timeout(&member.addr(), command, FOUR_LETTER_TIMEOUT)
    }

    /// Waits until a quorum serves: every running member answers `srvr` as leader or
    /// follower, exactly one of them is the leader, and they are a majority of the
    /// ensemble.
    ///
    /// # Errors
    ///
    /// `TimedOut` with each member's mode when `timeout` passes first.
    pub fn wait_for_quorum(&self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let running: Vec<usize> = (0..self.size()).filter(|&i| self.is_running(i)).collect();
            let modes: Vec<Option<String>> = running.iter().map(|&i| self.mode(i)).collect();
            let serving = modes
                .iter()
                .filter(|m| matches!(m.as_deref(), Some("leader" | "follower")))
                .count();
            let leaders = modes
                .iter()
                .filter(|m| m.as_deref() == Some("leader"))
                .count();
            let voters = self.members.iter().filter(|m| !m.removed).count();
            if leaders == 1 && serving == running.len() && serving > voters / 2 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let states: Vec<String> = (0..self.size())
                    .map(|i| match running.iter().position(|&r| r == i) {
                        Some(k) => format!("{i}: {}", modes[k].as_deref().unwrap_or("not serving")),
                        None => format!("{i}: killed"),
                    })
                    .collect();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no ZooKeeper quorum within {:?} ({}); logs under {}",
                        timeout,
                        states.join(", "),
                        self.dir.display()
                    ),
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until every member's election listener holds its port
    /// ([`Member::election_listening`]): `Ok(false)` when one lost it.
    fn wait_for_election_listeners(&self, timeout: Duration) -> io::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            let states: Vec<Option<bool>> = self
                .members
                .iter()
                .map(|m| m.election_listening(0))
                .collect();
            if states.contains(&Some(false)) {
                return Ok(false);
            }
            if states.iter().all(|s| *s == Some(true)) {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("a member's election listener did not start within {timeout:?}"),
                ));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn members_are_ours(&self) -> bool {
        self.members.iter().all(|m| {
            four_letter_timeout(&m.addr(), "conf", FOUR_LETTER_TIMEOUT)
                .is_ok_and(|conf| conf_names_dir(&conf, &m.dir.join("data")))
        })
    }

    fn member_mut(&mut self, i: usize) -> io::Result<&mut Member> {
        let size = self.size();
        self.members.get_mut(i).ok_or_else(|| out_of_range(i, size))
    }

    fn running_watchdog(&self, i: usize) -> io::Result<&Watchdog> {
        let member = self
            .members
            .get(i)
            .ok_or_else(|| out_of_range(i, self.size()))?;
        match &member.watchdog {
            Some(w) if w.alive() => Ok(w),
            _ => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!("ensemble member {i} is killed"),
            )),
        }
    }

    fn log_tails(&self) -> String {
        let mut out = String::new();
        for m in &self.members {
            let _ = writeln!(
                out,
                "--- {} ({}):\n{}",
                m.log().display(),
                m.addr(),
                log_tail(&m.log(), 15)
            );
        }
        let _ = write!(out, "{FIX_HINT}");
        out
    }

    /// Called when start fails: the members die, the directory (with the logs the
    /// error names) stays.
    fn keep_dir_on_drop(&mut self) {
        for m in &mut self.members {
            let _ = m.kill();
        }
        self.dir = PathBuf::new();
    }
}

impl Drop for ZkEnsemble {
    fn drop(&mut self) {
        for m in &mut self.members {
            let _ = m.kill();
        }
        if self.dir.as_os_str().is_empty() {
            return;
        }
        if thread::panicking() {
            eprintln!(
                "zklock::testing: kept the ZooKeeper ensemble's directory for the failed test: {}",
                self.dir.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn out_of_range(i: usize, size: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("no ensemble member {i} (size {size})"),
    )
}
