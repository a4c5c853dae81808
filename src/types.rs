//! ZooKeeper's value types (`Stat`, ACLs, create modes, events, watchers, multi
//! operations), below every layer that uses them; public as `zklock::client::*`.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A znode's metadata: Java's `org.apache.zookeeper.data.Stat`, every field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Stat {
    /// The zxid of the change that created the node.
    pub czxid: i64,
    /// The zxid of the change that last modified the node's data.
    pub mzxid: i64,
    /// Creation time, milliseconds since the epoch, by the server's clock.
    pub ctime: i64,
    /// Last modification time, milliseconds since the epoch, by the server's clock.
    pub mtime: i64,
    /// The number of changes to the node's data.
    pub version: i32,
    /// The number of changes to the node's children.
    pub cversion: i32,
    /// The number of changes to the node's ACL.
    pub aversion: i32,
    /// The owning session id for an ephemeral node, else 0.
    pub ephemeral_owner: i64,
    /// The length of the node's data.
    pub data_length: i32,
    /// The number of children.
    pub num_children: i32,
    /// The zxid of the change that last modified the node's children.
    pub pzxid: i64,
}

/// Permission bits of an [`Acl`]: Java's `ZooDefs.Perms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Perms(pub i32);

impl Perms {
    /// May read data and list children.
    pub const READ: Perms = Perms(1);
    /// May set data.
    pub const WRITE: Perms = Perms(2);
    /// May create children.
    pub const CREATE: Perms = Perms(4);
    /// May delete children.
    pub const DELETE: Perms = Perms(8);
    /// May set the ACL.
    pub const ADMIN: Perms = Perms(16);
    /// All of the above.
    pub const ALL: Perms = Perms(31);

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Perms) -> bool {
        self.0 & other.0 == other.0
    }
}

impl fmt::Display for Perms {
    /// The letters `zkCli`'s `getAcl` prints, in its order: `c` create, `d`
    /// delete, `r` read, `w` write, `a` admin (`cdrwa` for all).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (bit, letter) in [
            (Perms::CREATE, 'c'),
            (Perms::DELETE, 'd'),
            (Perms::READ, 'r'),
            (Perms::WRITE, 'w'),
            (Perms::ADMIN, 'a'),
        ] {
            if self.contains(bit) {
                fmt::Write::write_char(f, letter)?;
            }
        }
        Ok(())
    }
}

impl std::ops::BitOr for Perms {
    type Output = Perms;
    fn bitor(self, rhs: Perms) -> Perms {
        Perms(self.0 | rhs.0)
    }
}

/// An identity in an ACL: Java's `org.apache.zookeeper.data.Id` (`scheme:id`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Id {
    /// The scheme: `world`, `auth`, `digest`, `ip`, ...
    pub scheme: String,
    /// The id within the scheme.
    pub id: String,
}

impl Id {
    /// An id `scheme:id`.
    pub fn new(scheme: impl Into<String>, id: impl Into<String>) -> Id {
        Id {
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    /// `world:anyone`: everybody.
    pub fn anyone() -> Id {
        Id::new("world", "anyone")
    }

    /// `sasl:<name>`: a SASL-authenticated user (DIGEST-MD5's user name, or
    /// Kerberos' principal as the server maps it).
    pub fn sasl(name: &str) -> Id {
        Id::new("sasl", name)
    }

    /// `x509:<subject DN>`: a TLS client certificate's subject, as Java prints
    /// it (`CN=alice,OU=test,O=zklock`).
    pub fn x509(subject_dn: &str) -> Id {
        Id::new("x509", subject_dn)
    }

    /// `ip:<address>[/<prefix bits>]`: clients from an address or a network.
    pub fn ip(address: &str) -> Id {
        Id::new("ip", address)
    }

    /// `digest:<user>:base64(sha1(<user>:<password>))`: the id a session gets
    /// from `add_auth("digest", b"user:password")` (Java's
    /// `DigestAuthenticationProvider.generateDigest`).
    pub fn digest(user: &str, password: &str) -> Id {
        Id::new("digest", digest_id(user, password))
    }
}

impl fmt::Display for Id {
    /// `scheme:id`, as ACLs are written (`x509:CN=alice,O=example`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.scheme, self.id)
    }
}

/// `user:base64(sha1(user:password))`, the id part of a `digest:` ACL id
/// (Java's `DigestAuthenticationProvider.generateDigest`).
pub fn digest_id(user: &str, password: &str) -> String {
    use base64::Engine as _;
    use sha1::{Digest, Sha1};
    let hash = Sha1::digest(format!("{user}:{password}").as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// Which ACL every node zklock creates gets (Curator's `ACLProvider`;
/// HBase's `ZKUtil.createACL` with `isSecureZooKeeper`): a default ACL, and
/// ACLs for given paths or subtrees (the most specific one wins). Set on the
/// watcher ([`ZooKeeperWatcherBuilder::with_acl_policy`](crate::ZooKeeperWatcherBuilder::with_acl_policy))
/// and used by `zkutil` and the [`RecoverableZooKeeper`](crate::RecoverableZooKeeper)'s own
/// node creation. Paths are the client's (below the chroot).
///
/// A policy may name another one for a session that has no authenticated
/// identity ([`with_anonymous`](Self::with_anonymous)): which one applies is
/// decided at each creation by
/// [`ZooKeeper::has_identity`](crate::client::ZooKeeper::has_identity)
/// (SASL, a TLS client certificate, an `add_auth` that gives an id).
///
/// # Who may delete a node
/// ZooKeeper checks a `delete` against the **parent's** ACL (its `DELETE`
/// bit), never the node's own, and a `create` against the parent's `CREATE`
/// bit. A lock's or an election's nodes are therefore protected by the ACL of
/// the directory that holds them: whoever may create and delete their own
/// node in it may delete everyone else's too. ZooKeeper has no "delete your
/// own child" permission, so a policy cannot let several identities contend
/// for one lock and at the same time stop them deleting each other's nodes.
/// The unit of trust is the set of identities the policy gives `ALL`: the
/// creator (`CREATOR_ALL_ACL`), plus those named with
/// [`with_grant`](Self::with_grant) when a fleet's members hold different
/// identities (e.g. one certificate per host). Every other identity can
/// neither create nor delete in the directories such a policy made (`NoAuth`)
/// and, without world `READ`, not read them either.
///
/// # `READ` and the other participants' nodes
/// A participant that waits for, or reads, another participant's node needs
/// `READ` on it, on every server version: `getData` and `getChildren`
/// always checked it, ZooKeeper 3.8.4+ and 3.9.2+ check it on `exists` too
/// (ZOOKEEPER-2590; 3.8.0 and 3.6 answered the `Stat`), and servers from
/// 3.7 on deliver a node's watch events only to sessions with `READ` on it
/// (they drop the others' silently: a watch set by `exists` there never
/// fires). A refused read is [`Error::NoReadPermission`](crate::Error::NoReadPermission)
/// (`e.is(ZkError::NoAuth)` holds), naming the node and the read, at once,
/// never a hang or a retry. The crossings, with a policy that gives the
/// other participants `CREATE | DELETE` but no `READ` on the nodes (the
/// directories readable), tested on 3.6.3, 3.8.0 and 3.9.3
/// (`tests/acl_versions.rs`):
///
/// | crossing | reads the other's node with | without `READ` |
/// |---|---|---|
/// | lock and read/write lock waiter | `getData` (node ahead) | `NoReadPermission` (`getData`), the waiter's node removed |
/// | semaphore waiter | `getChildren` (leases' directory) | works |
/// | election (`LeaderElectionSupport`) | `getData` (offer ahead; Java: `exists`) | `NoReadPermission` (`getData`) |
/// | leader latch | `getData` (node ahead) | `NoReadPermission` (`getData`) from `start` |
/// | queue consumer | `getData` (item) | `NoReadPermission` (`getData`), the item stays |
/// | barrier | `exists` (`is_set`), `getData` (wait) | `is_set`: `Stat` before 3.8.4, `NoReadPermission` (`exists`) after; wait: `NoReadPermission` (`getData`) |
/// | group member's data | `getData` | membership listed, its data `NoReadPermission` |
/// | node tracker | `exists`, `getData` | start fails (`NoReadPermission`), the abortable told |
/// | tree cache | `getData` / `getChildren` | `wait_synced` returns the refusal |
/// | double barrier | `check` in the round's `multi` (members), `getData` (`ready`) | the member filling the round: `NoReadPermission` (`check`); a member that cannot read `ready`: `NoReadPermission` at once; members also need `WRITE` on the barrier's node |
/// | persistent / TTL node at a name another's node holds | `exists` | `Foreign` (`ForeignUnreadable` where the `exists` is refused); made once the node goes (the parent's child watch) |
/// | revoker (`attempt_revoke_with_grace`) | `getData` (holder's node) | `NoReadPermission` (`getData`) at once, nothing written |
/// | `createAndFailSilent` on a shared node | `exists`, then `create` | `Ok` (the create's `NodeExists`) |
///
/// Give the participants `READ`: [`with_grant`](Self::with_grant) of
/// `Perms::ALL` (or `READ | CREATE | DELETE`), or
/// [`creator_all_world_read`](Self::creator_all_world_read) (CLI
/// `--acl creator-read`). docs/security.md has the audit of every `exists`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclPolicy {
    default: Vec<Acl>,
    /// (path, whether the whole subtree, ACL).
    paths: Vec<(String, bool, Vec<Acl>)>,
    /// The policy of a session without an authenticated identity; `None`:
    /// this one.
    anonymous: Option<Box<AclPolicy>>,
}

impl Default for AclPolicy {
    /// [`AclPolicy::open`].
    fn default() -> Self {
        AclPolicy::open()
    }
}

impl AclPolicy {
    /// `OPEN_ACL_UNSAFE` everywhere: an unsecured ensemble (HBase without
    /// `isSecureZooKeeper`; Curator's `DefaultACLProvider`).
    pub fn open() -> AclPolicy {
        AclPolicy::with_default(Acl::open_unsafe())
    }

    /// `CREATOR_ALL_ACL` everywhere: only the creating session's
    /// authenticated identities (its `sasl:`, `x509:`, `digest:` ids) may
    /// touch what it creates. Needs an authenticated session
    /// (`InvalidACL` otherwise).
    pub fn creator_all() -> AclPolicy {
        AclPolicy::with_default(Acl::creator_all())
    }

    /// `CREATOR_ALL_ACL` plus world `READ` (`READ_ACL_UNSAFE`) everywhere:
    /// only the creator's identities may change what it creates, anyone may
    /// read it (HBase's ACL for the nodes its clients read). Needs an
    /// authenticated session, as [`creator_all`](Self::creator_all).
    pub fn creator_all_world_read() -> AclPolicy {
        AclPolicy::with_default(&creator_and_read())
    }

    /// HBase's secure layout (`ZKUtil.createACL` on a secure ensemble):
    /// `CREATOR_ALL_ACL` everywhere, plus world `READ` on the nodes others
    /// must read (`world_readable`: HBase's base znode, master address,
    /// meta server, cluster id, region servers' parent, ...).
    pub fn secure(world_readable: &[&str]) -> AclPolicy {
        let read = creator_and_read();
        world_readable
            .iter()
            .fold(AclPolicy::creator_all(), |p, path| p.with_path(path, &read))
    }

    /// `acl` for every node no path rule names.
    pub fn with_default(acl: &[Acl]) -> AclPolicy {
        AclPolicy {
            default: acl.to_vec(),
            paths: Vec::new(),
            anonymous: None,
        }
    }

    /// Adds `perms` for `id` to every ACL of this policy (its default and
    /// each path rule given so far; not its
    /// [anonymous](Self::with_anonymous) policy's):
    /// how the members of a fleet that hold different identities (one TLS
    /// certificate per host, several SASL users) share its locks and
    /// elections under a creator-only policy. Each member names the others
    /// (naming its own id too is harmless: the server then stores that
    /// entry twice).
    /// Every identity given `DELETE` on a directory may delete any node in
    /// it (see [who may delete a node](Self#who-may-delete-a-node)). The
    /// server refuses an id its scheme does not accept with `InvalidACL` when
    /// a node is created.
    #[must_use]
    pub fn with_grant(mut self, perms: Perms, id: Id) -> AclPolicy {
        let entry = Acl::new(perms, id);
        let add = |acl: &mut Vec<Acl>| {
            if !acl.contains(&entry) {
                acl.push(entry.clone());
            }
        };
        add(&mut self.default);
        for (_, _, acl) in &mut self.paths {
            add(acl);
        }
        self
    }

    /// `policy` for a session that has no authenticated identity (see
    /// [`for_session`](Self::for_session)); this policy for one that has.
    /// The watcher's default is [`AclPolicy::hbase`](AclPolicy::hbase) with
    /// [`AclPolicy::open`] for anonymous sessions.
    #[must_use]
    pub fn with_anonymous(mut self, policy: AclPolicy) -> AclPolicy {
        self.anonymous = Some(Box::new(policy.for_session(false).clone()));
        self
    }

    /// The policy for a session with (`identified`) or without an
    /// authenticated identity: this one, or its
    /// [anonymous](Self::with_anonymous) policy when it has one.
    pub fn for_session(&self, identified: bool) -> &AclPolicy {
        match &self.anonymous {
            Some(anonymous) if !identified => anonymous,
            _ => self,
        }
    }

    /// `acl` for the node `path` itself.
    #[must_use]
    pub fn with_path(mut self, path: &str, acl: &[Acl]) -> AclPolicy {
        self.paths.retain(|(p, sub, _)| p != path || *sub);
        self.paths.push((path.to_string(), false, acl.to_vec()));
        self
    }

    /// `acl` for `path` and every node below it (unless a longer rule names
    /// the node).
    #[must_use]
    pub fn with_subtree(mut self, path: &str, acl: &[Acl]) -> AclPolicy {
        let path = if path.len() > 1 {
            path.trim_end_matches('/')
        } else {
            path
        };
        self.paths.retain(|(p, sub, _)| !(p == path && *sub));
        self.paths.push((path.to_string(), true, acl.to_vec()));
        self
    }

    /// The default ACL.
    pub fn default_acl(&self) -> &[Acl] {
        &self.default
    }

    /// The ACL for a node at `path` (a sequential node's prefix counts as its
    /// path): the exact rule, else the longest subtree rule, else the default.
    pub fn acl_for(&self, path: &str) -> &[Acl] {
        if let Some((_, _, acl)) = self.paths.iter().find(|(p, sub, _)| !sub && p == path) {
            return acl;
        }
        self.paths
            .iter()
            .filter(|(p, sub, _)| {
                *sub && (p == "/"
                    || path == p
                    || path
                        .strip_prefix(p.as_str())
                        .is_some_and(|r| r.starts_with('/')))
            })
            .max_by_key(|(p, _, _)| p.len())
            .map(|(_, _, acl)| acl.as_slice())
            .unwrap_or(&self.default)
    }

    /// Whether some node would get an ACL that lets anyone write, create,
    /// delete or administer it (HBase's check of a secure deployment).
    /// An [anonymous](Self::with_anonymous) policy counts too.
    pub fn is_world_writable(&self) -> bool {
        std::iter::once(&self.default)
            .chain(self.paths.iter().map(|(_, _, a)| a))
            .flatten()
            .any(|a| a.id == Id::anyone() && a.perms.0 & !Perms::READ.0 != 0)
            || self
                .anonymous
                .as_ref()
                .is_some_and(|p| p.is_world_writable())
    }
}

/// `CREATOR_ALL_ACL` then `READ_ACL_UNSAFE`.
fn creator_and_read() -> Vec<Acl> {
    let mut read = Acl::creator_all().to_vec();
    read.extend_from_slice(Acl::read_unsafe());
    read
}

/// One ACL entry: Java's `org.apache.zookeeper.data.ACL`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Acl {
    /// What the identity may do.
    pub perms: Perms,
    /// Who.
    pub id: Id,
}

impl Acl {
    /// An entry granting `perms` to `id`.
    pub fn new(perms: Perms, id: Id) -> Acl {
        Acl { perms, id }
    }

    /// `ZooDefs.Ids.OPEN_ACL_UNSAFE`: anyone may do anything.
    pub fn open_unsafe() -> &'static [Acl] {
        static ACL: OnceLock<Vec<Acl>> = OnceLock::new();
        ACL.get_or_init(|| vec![Acl::new(Perms::ALL, Id::new("world", "anyone"))])
    }

    /// `ZooDefs.Ids.CREATOR_ALL_ACL`: all permissions to the creator's
    /// authenticated ids (needs `add_auth` first).
    pub fn creator_all() -> &'static [Acl] {
        static ACL: OnceLock<Vec<Acl>> = OnceLock::new();
        ACL.get_or_init(|| vec![Acl::new(Perms::ALL, Id::new("auth", ""))])
    }

    /// `ZooDefs.Ids.READ_ACL_UNSAFE`: anyone may read.
    pub fn read_unsafe() -> &'static [Acl] {
        static ACL: OnceLock<Vec<Acl>> = OnceLock::new();
        ACL.get_or_init(|| vec![Acl::new(Perms::READ, Id::new("world", "anyone"))])
    }
}

impl fmt::Display for Acl {
    /// `scheme:id:perms` (`world:anyone:cdrwa`, `x509:CN=alice:r`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.id, self.perms)
    }
}

/// How to create a node: Java's `CreateMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CreateMode {
    /// Stays until deleted.
    Persistent,
    /// Deleted when the creating session ends.
    Ephemeral,
    /// Persistent, with a 10-digit sequence number appended to the name.
    PersistentSequential,
    /// Ephemeral, with a 10-digit sequence number appended to the name.
    EphemeralSequential,
    /// Deleted by the server some time after its last child is deleted.
    Container,
    /// Persistent, deleted when unmodified and childless for its TTL
    /// (server started with `zookeeper.extendedTypesEnabled=true`).
    PersistentWithTtl,
    /// [`PersistentWithTtl`](CreateMode::PersistentWithTtl) with a sequence number.
    PersistentSequentialWithTtl,
}

impl CreateMode {
    /// The wire `flags` value.
    pub fn flags(self) -> i32 {
        match self {
            CreateMode::Persistent => 0,
            CreateMode::Ephemeral => 1,
            CreateMode::PersistentSequential => 2,
            CreateMode::EphemeralSequential => 3,
            CreateMode::Container => 4,
            CreateMode::PersistentWithTtl => 5,
            CreateMode::PersistentSequentialWithTtl => 6,
        }
    }

    /// Whether the server appends a sequence number.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }

    /// Whether the node ends with its session.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    /// Whether the mode needs a TTL.
    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

/// The type of a [`WatchedEvent`]: Java's `Watcher.Event.EventType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventType {
    /// A connection-state change; see [`WatchedEvent::keeper_state`].
    None,
    /// The node was created.
    NodeCreated,
    /// The node was deleted.
    NodeDeleted,
    /// The node's data changed.
    NodeDataChanged,
    /// The node's children changed.
    NodeChildrenChanged,
    /// A data watch was removed.
    DataWatchRemoved,
    /// A child watch was removed.
    ChildWatchRemoved,
    /// A persistent watch was removed.
    PersistentWatchRemoved,
}

impl EventType {
    /// From the wire value; unknown values give `None`.
    pub fn from_code(code: i32) -> Option<EventType> {
        Some(match code {
            -1 => EventType::None,
            1 => EventType::NodeCreated,
            2 => EventType::NodeDeleted,
            3 => EventType::NodeDataChanged,
            4 => EventType::NodeChildrenChanged,
            5 => EventType::DataWatchRemoved,
            6 => EventType::ChildWatchRemoved,
            7 => EventType::PersistentWatchRemoved,
            _ => return None,
        })
    }
}

/// The connection state carried by a [`WatchedEvent`]: Java's
/// `Watcher.Event.KeeperState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeeperState {
    /// The client lost its connection; it is reconnecting, the session may live on.
    Disconnected,
    /// Connected to a server.
    SyncConnected,
    /// Authentication failed; the handle is dead.
    AuthFailed,
    /// Connected to a read-only server.
    ConnectedReadOnly,
    /// SASL authentication succeeded.
    SaslAuthenticated,
    /// The handle was closed by `close()`.
    Closed,
    /// The server expired the session; the handle is dead.
    Expired,
}

impl KeeperState {
    /// From the wire value; unknown values give `None`.
    pub fn from_code(code: i32) -> Option<KeeperState> {
        Some(match code {
            0 => KeeperState::Disconnected,
            3 => KeeperState::SyncConnected,
            4 => KeeperState::AuthFailed,
            5 => KeeperState::ConnectedReadOnly,
            6 => KeeperState::SaslAuthenticated,
            7 => KeeperState::Closed,
            -112 => KeeperState::Expired,
            _ => return None,
        })
    }
}

/// An event from ZooKeeper: Java's `WatchedEvent`.
///
/// `#[non_exhaustive]`: made by the client, or in tests by
/// [`state`](Self::state) and [`node`](Self::node).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchedEvent {
    /// What happened.
    pub event_type: EventType,
    /// The connection state when it happened.
    pub keeper_state: KeeperState,
    /// The node, client-side (chroot removed); `None` for connection events.
    pub path: Option<String>,
    /// The zxid of the change that fired a node event (Java's
    /// `WatchedEvent.getZxid`): sent by ZooKeeper 3.9 and later
    /// (ZOOKEEPER-4655); `None` from older servers, for connection events
    /// and for the events the client makes itself (a watch removed, a
    /// persistent watch's end).
    pub zxid: Option<i64>,
}

impl WatchedEvent {
    /// A connection-state event (type `None`).
    pub fn state(keeper_state: KeeperState) -> WatchedEvent {
        WatchedEvent {
            event_type: EventType::None,
            keeper_state,
            path: None,
            zxid: None,
        }
    }

    /// A node event on `path` while connected.
    pub fn node(event_type: EventType, path: impl Into<String>) -> WatchedEvent {
        WatchedEvent {
            event_type,
            keeper_state: KeeperState::SyncConnected,
            path: Some(path.into()),
            zxid: None,
        }
    }
}

/// Receives [`WatchedEvent`]s: Java's `Watcher`.
///
/// Called on the client's event thread, one event at a time, in order. Keep it
/// short; it may call the client (a reply never waits for the event thread) but
/// must not wait for another event. A panic is caught and logged; the client lives
/// on.
///
/// Closures implement it:
/// ```
/// use zklock::client::{Watcher, WatchedEvent};
/// let w = |e: WatchedEvent| println!("{e:?}");
/// fn takes(_: impl Watcher + 'static) {}
/// takes(w);
/// ```
pub trait Watcher: Send + Sync {
    /// Handles one event.
    fn process(&self, event: WatchedEvent);
}

impl<F: Fn(WatchedEvent) + Send + Sync> Watcher for F {
    fn process(&self, event: WatchedEvent) {
        self(event)
    }
}

impl<W: Watcher + ?Sized> Watcher for Arc<W> {
    fn process(&self, event: WatchedEvent) {
        (**self).process(event)
    }
}

/// The handle's connection state: Java's `ZooKeeper.States`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Not connected; (re)connecting.
    Connecting,
    /// Connected; calls go through.
    Connected,
    /// The session expired; every call fails with `SessionExpired`.
    Expired,
    /// Authentication failed; every call fails with `AuthFailed`.
    AuthFailed,
    /// Closed by `close()`; every call fails with `Error::Closed`.
    Closed,
}

impl State {
    /// Whether the handle can never be used again.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Expired | State::AuthFailed | State::Closed)
    }
}

/// The mode of [`ZooKeeper::add_watch`](crate::client::ZooKeeper::add_watch): Java's
/// `AddWatchMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AddWatchMode {
    /// Fires on data changes, creation and deletion of the node, and changes of its
    /// children list, until removed.
    Persistent,
    /// Fires on creation, deletion and data changes of the node and every
    /// descendant, until removed.
    PersistentRecursive,
}

impl AddWatchMode {
    /// The wire value.
    pub fn code(self) -> i32 {
        match self {
            AddWatchMode::Persistent => 0,
            AddWatchMode::PersistentRecursive => 1,
        }
    }
}

/// Which watches [`ZooKeeper::remove_watches`](crate::client::ZooKeeper::remove_watches)
/// removes: Java's `Watcher.WatcherType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WatcherType {
    /// Child watches.
    Children,
    /// Data and exists watches.
    Data,
    /// Every one-shot and persistent watch.
    Any,
    /// Persistent watches.
    Persistent,
    /// Persistent recursive watches.
    PersistentRecursive,
}

impl WatcherType {
    /// The wire value.
    pub fn code(self) -> i32 {
        match self {
            WatcherType::Children => 1,
            WatcherType::Data => 2,
            WatcherType::Any => 3,
            WatcherType::Persistent => 4,
            WatcherType::PersistentRecursive => 5,
        }
    }
}

/// One operation of a [`multi`](crate::client::ZooKeeper::multi): Java's `Op`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Create a node (any mode but the TTL ones).
    Create {
        /// The path (a prefix for sequential modes).
        path: String,
        /// The data.
        data: Vec<u8>,
        /// The ACL.
        acl: Vec<Acl>,
        /// The mode.
        mode: CreateMode,
    },
    /// Delete a node, optionally only at `version`.
    Delete {
        /// The path.
        path: String,
        /// The expected version; `None` for any.
        version: Option<i32>,
    },
    /// Set a node's data, optionally only at `version`.
    SetData {
        /// The path.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The expected version; `None` for any.
        version: Option<i32>,
    },
    /// Check that a node exists, optionally at `version`.
    Check {
        /// The path.
        path: String,
        /// The expected version; `None` for any.
        version: Option<i32>,
    },
}

impl Op {
    /// `Op::Create` with an open ACL.
    pub fn create(path: impl Into<String>, data: impl Into<Vec<u8>>, mode: CreateMode) -> Op {
        Op::Create {
            path: path.into(),
            data: data.into(),
            acl: Acl::open_unsafe().to_vec(),
            mode,
        }
    }

    /// `Op::Delete`.
    pub fn delete(path: impl Into<String>, version: Option<i32>) -> Op {
        Op::Delete {
            path: path.into(),
            version,
        }
    }

    /// `Op::SetData`.
    pub fn set_data(path: impl Into<String>, data: impl Into<Vec<u8>>, version: Option<i32>) -> Op {
        Op::SetData {
            path: path.into(),
            data: data.into(),
            version,
        }
    }

    /// `Op::Check`.
    pub fn check(path: impl Into<String>, version: Option<i32>) -> Op {
        Op::Check {
            path: path.into(),
            version,
        }
    }

    /// The operation's path.
    pub fn path(&self) -> &str {
        match self {
            Op::Create { path, .. }
            | Op::Delete { path, .. }
            | Op::SetData { path, .. }
            | Op::Check { path, .. } => path,
        }
    }
}

/// The result of one operation of a `multi`: Java's `OpResult`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpResult {
    /// A create succeeded: the created path (client-side) and, when the server
    /// returned it, the new node's `Stat`.
    Create {
        /// The created path.
        path: String,
        /// The node's `Stat`, when known.
        stat: Option<Stat>,
    },
    /// A delete succeeded.
    Delete,
    /// A set-data succeeded.
    SetData {
        /// The node's new `Stat`.
        stat: Stat,
    },
    /// A check succeeded.
    Check,
    /// The operation failed (or was rolled back: `RuntimeInconsistency`, or `Ok`
    /// reported as code 0 for operations before the failing one).
    Error {
        /// The wire code (0 for an operation that was fine but rolled back).
        code: i32,
    },
}

/// Wraps a `Duration` TTL as milliseconds, checked.
pub(crate) fn ttl_millis(ttl: Duration) -> Option<i64> {
    let ms = i64::try_from(ttl.as_millis()).ok()?;
    // The server keeps TTLs below 2^40 ms (EphemeralType.TTL max).
    (1..=0xFF_FFFF_FFFF).contains(&ms).then_some(ms)
}

impl fmt::Display for WatchedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{:?} {:?} {}", self.event_type, self.keeper_state, p),
            None => write!(f, "{:?} {:?}", self.event_type, self.keeper_state),
        }
    }
}

/// One identity of a session as the server knows it: Java's
/// `org.apache.zookeeper.data.ClientInfo`, what
/// [`who_am_i`](crate::client::ZooKeeper::who_am_i) lists and `zkCli whoami`
/// prints as `scheme: user`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientInfo {
    /// The authentication scheme: `ip`, `digest`, `sasl`, `x509`, ...
    pub auth_scheme: String,
    /// The user within the scheme (the client's address for `ip`, the user
    /// name for `digest`, the principal for `sasl`, the subject for `x509`);
    /// empty when the provider names none.
    pub user: String,
}

impl std::fmt::Display for ClientInfo {
    /// `scheme: user`, as `zkCli whoami` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.auth_scheme, self.user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's `DigestAuthenticationProvider.generateDigest` gives these
    /// (`java -cp zookeeper.jar ...DigestAuthenticationProvider user:password`).
    #[test]
    fn digest_ids_match_java() {
        assert_eq!(
            digest_id("alice", "alice-secret"),
            "alice:JYdjG/dL2+v79QyuS8/0gpT+rQQ="
        );
        assert_eq!(
            Id::digest("super", "superpw"),
            Id::new("digest", "super:g9oN2HttPfn8MMWJZ2r45Np/LIA=")
        );
        assert_eq!(Id::sasl("alice"), Id::new("sasl", "alice"));
    }

    #[test]
    fn acl_policies_pick_the_most_specific_rule() {
        let read = [Acl::new(Perms::READ, Id::anyone())];
        let bob = [Acl::new(Perms::ALL, Id::sasl("bob"))];
        let p = AclPolicy::creator_all()
            .with_subtree("/hbase", &read)
            .with_subtree("/hbase/rs", &bob)
            .with_path("/hbase/rs/x", Acl::open_unsafe());
        assert_eq!(p.acl_for("/other"), Acl::creator_all());
        assert_eq!(p.acl_for("/hbase"), read);
        assert_eq!(p.acl_for("/hbase/a/b"), read);
        assert_eq!(p.acl_for("/hbasement"), Acl::creator_all());
        assert_eq!(p.acl_for("/hbase/rs/y"), bob);
        assert_eq!(p.acl_for("/hbase/rs/x"), Acl::open_unsafe());
        assert!(p.is_world_writable());
        let secure = AclPolicy::secure(&["/hbase", "/hbase/master"]);
        assert!(!secure.is_world_writable());
        assert_eq!(secure.acl_for("/hbase/master").len(), 2);
        assert_eq!(secure.acl_for("/hbase/master/x"), Acl::creator_all());
        assert!(AclPolicy::default().is_world_writable());
        assert!(!AclPolicy::with_default(Acl::read_unsafe()).is_world_writable());
    }

    #[test]
    fn grants_reach_every_rule_and_the_anonymous_policy_only_anonymous_sessions() {
        let bob = Id::x509("CN=bob");
        let p = AclPolicy::creator_all_world_read()
            .with_path("/a", Acl::creator_all())
            .with_grant(Perms::ALL, bob.clone())
            .with_grant(Perms::ALL, bob.clone())
            .with_anonymous(AclPolicy::open());
        let bob_all = Acl::new(Perms::ALL, bob);
        assert_eq!(
            p.acl_for("/a"),
            [Acl::creator_all()[0].clone(), bob_all.clone()]
        );
        assert_eq!(
            p.acl_for("/b"),
            [
                Acl::creator_all()[0].clone(),
                Acl::read_unsafe()[0].clone(),
                bob_all
            ]
        );
        assert_eq!(p.for_session(true), &p);
        assert_eq!(p.for_session(false), &AclPolicy::open());
        assert!(p.is_world_writable());
        assert!(!AclPolicy::creator_all().is_world_writable());
        // An anonymous policy's own anonymous policy is never used.
        let nested = AclPolicy::creator_all().with_anonymous(p.clone());
        assert_eq!(nested.for_session(false), &AclPolicy::open());
    }

    #[test]
    fn acls_print_as_zkcli_does() {
        assert_eq!(Acl::open_unsafe()[0].to_string(), "world:anyone:cdrwa");
        assert_eq!(
            Acl::new(Perms::READ | Perms::CREATE, Id::x509("CN=a,O=b")).to_string(),
            "x509:CN=a,O=b:cr"
        );
    }
}
