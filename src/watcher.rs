//! `ZooKeeperWatcher`: one per process or session; owns the
//! `RecoverableZooKeeper`, receives every ZooKeeper event and dispatches it to the
//! registered [`ZooKeeperListener`]s.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use log::{debug, error, info, warn};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::client::{
    AclPolicy, EventType, KeeperState, State, WatchedEvent, Watcher, ZooKeeper, ZooKeeperBuilder,
};
use crate::error::{Error, Result, ZkError};
use crate::listener::{Abortable, LoggingAbortable, ZooKeeperListener};
use crate::pending::PendingWatcher;
use crate::recoverable::RecoverableZooKeeper;
use crate::retry::RetryConfig;
use crate::util::same_arc;
use crate::znodes::{ZNodePaths, DEFAULT_ZOOKEEPER_ZNODE_PARENT, ZOOKEEPER_ZNODE_PARENT};

/// The default base znode.
pub const DEFAULT_BASE_ZNODE: &str = "/zklock";

type ListenerRef = Arc<dyn ZooKeeperListener>;

/// The listener registry: listeners about one path are indexed by it; the others
/// see every event. Each entry carries a sequence number so that events reach
/// listeners in registration order across both kinds.
#[derive(Default)]
struct Registry {
    /// Next sequence for `register_listener`; `register_listener_first` counts
    /// down from -1.
    next: i64,
    first: i64,
    general: Vec<(i64, ListenerRef)>,
    by_path: HashMap<String, Vec<(i64, ListenerRef)>>,
    count: usize,
}

impl Registry {
    fn insert(&mut self, listener: ListenerRef, first: bool) {
        let seq = if first {
            self.first -= 1;
            self.first
        } else {
            self.next += 1;
            self.next
        };
        let list = match listener.path() {
            Some(p) => self.by_path.entry(p.to_string()).or_default(),
            None => &mut self.general,
        };
        if first {
            list.insert(0, (seq, listener));
        } else {
            list.push((seq, listener));
        }
        self.count += 1;
    }

    fn remove(&mut self, listener: &ListenerRef) -> bool {
        let (list, key) = match listener.path() {
            Some(p) => match self.by_path.get_mut(p) {
                Some(l) => (l, Some(p.to_string())),
                None => return false,
            },
            None => (&mut self.general, None),
        };
        let Some(i) = list.iter().position(|(_, l)| same_arc(l, listener)) else {
            return false;
        };
        list.remove(i);
        if list.is_empty() {
            if let Some(k) = key {
                self.by_path.remove(&k);
            }
        }
        self.count -= 1;
        true
    }

    /// Listeners for an event on `path`, in registration order.
    fn for_path(&self, path: Option<&str>) -> Vec<ListenerRef> {
        let specific: &[(i64, ListenerRef)] = path
            .and_then(|p| self.by_path.get(p))
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        merge(&self.general, specific)
    }

    fn all(&self) -> Vec<ListenerRef> {
        let mut v: Vec<&(i64, ListenerRef)> = self
            .general
            .iter()
            .chain(self.by_path.values().flatten())
            .collect();
        v.sort_by_key(|(seq, _)| *seq);
        v.into_iter().map(|(_, l)| l.clone()).collect()
    }
}

fn merge(a: &[(i64, ListenerRef)], b: &[(i64, ListenerRef)]) -> Vec<ListenerRef> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if j >= b.len() || (i < a.len() && a[i].0 < b[j].0) {
            out.push(a[i].1.clone());
            i += 1;
        } else {
            out.push(b[j].1.clone());
            j += 1;
        }
    }
    out
}

struct WatcherInner {
    prefix: String,
    identifier: RwLock<String>,
    rzk: RecoverableZooKeeper,
    abortable: Arc<dyn Abortable>,
    registry: RwLock<Registry>,
    base_znode: String,
    /// HBase's znode layout under `base_znode`.
    znodes: ZNodePaths,
    /// The session id whose `Expired` has been handled (abort once).
    expired: AtomicBool,
    closed: AtomicBool,
    /// Whether the session's end (Expired, Closed, AuthFailed) reached the
    /// listeners.
    end_told: AtomicBool,
    /// Session renewal is on (see [`ZooKeeperWatcherBuilder::with_session_renewal`]).
    renew: bool,
    /// A new session was opened after an expiry; announced at its SyncConnected.
    renewing: AtomicBool,
    /// The id of the session last connected (0 before): a connection with
    /// another id (the new session a read-write server gives a session that
    /// a read-only server made) is announced as a renewal.
    last_session: AtomicI64,
    /// Connection generation: bumped on every state event (what `connect`
    /// waits for; the library's waits use `crate::engine::wait`).
    state_seq: AtomicI64,
    state_lock: Mutex<KeeperState>,
    state_cv: Condvar,
    pending: Arc<PendingWatcher>,
    /// The library's own connection-event subscribers (trackers, deletion
    /// listeners): apart from the user's registry, so that
    /// `unregister_all_listeners` cannot strand a library wait, and weak, so
    /// that they never keep the session alive.
    hooks: Mutex<Hooks>,
    /// Whether any hook subscribed to a path (see `has_path_hooks`).
    path_hooks: AtomicBool,
    /// The ensemble tracker of
    /// [`ZooKeeperWatcherBuilder::with_ensemble_tracking`] (it holds this
    /// watcher weakly).
    ensemble: Mutex<Option<crate::EnsembleTracker>>,
}

/// A library listener's subscription to connection events (type `None`). Called
/// on the event thread before the user's listeners; must not block.
pub(crate) trait SessionHook: Send + Sync {
    /// `state` is the new connection state (`SyncConnected`, `Disconnected`,
    /// `Expired`, `AuthFailed`, `Closed`).
    fn session_event(&self, state: KeeperState);

    /// A new session replaced an expired one (session renewal), connected now.
    fn session_renewed(&self) {}

    /// A node event on the path this hook subscribed with
    /// [`WeakZooKeeperWatcher::add_path_hook`], from a watch of the session's
    /// default watcher (see [`node_event`](WatcherInner::tell_node_hooks)).
    fn node_event(&self, _event_type: EventType, _path: &str) {}
}

#[derive(Default)]
struct Hooks {
    next: u64,
    by_id: HashMap<u64, Weak<dyn SessionHook>>,
    /// Hooks nobody else owns (a node removal waiting for the reconnect): kept
    /// here until removed. They hold the watcher weakly, so no cycle.
    owned: HashMap<u64, Arc<dyn SessionHook>>,
    /// Hooks told of the node events on one path (trackers, deletion
    /// listeners, leader managers), by that path: see `add_path_hook`.
    by_path: HashMap<String, Vec<u64>>,
    path_of: HashMap<u64, String>,
}

impl Hooks {
    fn remove(&mut self, id: u64) {
        self.by_id.remove(&id);
        self.owned.remove(&id);
        if let Some(path) = self.path_of.remove(&id) {
            if let Some(ids) = self.by_path.get_mut(&path) {
                ids.retain(|&i| i != id);
                if ids.is_empty() {
                    self.by_path.remove(&path);
                }
            }
        }
    }
}

/// Whether any hook subscribed to a path: node events skip the hook table
/// (and its lock) while none did. Set under the hooks' lock.
fn has_path_hooks(hooks: &Hooks, flag: &AtomicBool) {
    flag.store(!hooks.by_path.is_empty(), Ordering::SeqCst);
}

/// HBase's `ZooKeeperWatcher`: the process's ZooKeeper session, its
/// [`RecoverableZooKeeper`], and the registry of [`ZooKeeperListener`]s that
/// every event is dispatched to.
///
/// Connection events: `SyncConnected` sets the identifier to
/// `"<prefix>-0x<session id in hex>"`; `Disconnected` is logged and told to the
/// listeners; `Expired` calls [`Abortable::abort`] exactly once and is told to the
/// listeners, so every wait on this watcher ends with `SessionExpired`. zklock
/// never opens a replacement session: make a new `ZooKeeperWatcher`.
///
/// # Threads and cloning
/// `Send + Sync`, a cheap `Clone`; share one per process among all threads.
/// Listener calls run on the client's event thread, in registration order; a
/// listener about one path ([`ZooKeeperListener::path`]) is found by that path,
/// so dispatch cost does not grow with the number of waiting locks.
/// The session ends with [`close`](Self::close) (synchronous: closeSession,
/// then the client's threads joined) or when the last clone is dropped: then
/// in the background, so that the drop returns at once whatever the network
/// does (closeSession waits up to 2 s for its answer).
///
/// # Listeners and the session's lifetime
/// A clone is a *user handle*: it keeps the session open. The library's own
/// listeners ([`ZooKeeperNodeTracker`](crate::ZooKeeperNodeTracker),
/// [`DeletionListener`](crate::DeletionListener)) hold only a
/// [`WeakZooKeeperWatcher`], so the session ends with the application's last
/// handle whatever they registered. A listener of yours that owns a clone and
/// is registered on this watcher is an `Arc` cycle (the registry owns the
/// listener, the listener owns the watcher): the session, its two threads and
/// its ephemeral nodes then live until [`close`](Self::close). Port HBase
/// listeners (which keep a `watcher` field) with a [`WeakZooKeeperWatcher`]
/// from [`downgrade`](Self::downgrade) and
/// [`upgrade`](WeakZooKeeperWatcher::upgrade) it inside the callback:
///
/// ```no_run
/// use std::sync::Arc;
/// use zklock::{zkutil, WeakZooKeeperWatcher, ZooKeeperListener, ZooKeeperWatcher};
///
/// struct MasterListener {
///     watcher: WeakZooKeeperWatcher, // HBase: `protected ZooKeeperWatcher watcher`
/// }
///
/// impl ZooKeeperListener for MasterListener {
///     fn node_created(&self, path: &str) {
///         // `None` once the application dropped its last handle.
///         let Some(zkw) = self.watcher.upgrade() else { return };
///         let _ = zkutil::get_data_no_watch(&zkw, path);
///     }
/// }
///
/// let zkw = ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// zkw.register_listener(Arc::new(MasterListener { watcher: zkw.downgrade() }));
/// drop(zkw); // the session ends here
/// # Ok::<(), zklock::Error>(())
/// ```
///
/// # Examples
/// ```no_run
/// use zklock::ZooKeeperWatcher;
/// let zkw = ZooKeeperWatcher::connect("127.0.0.1:2181", "my-service", None)?;
/// println!("connected as {}", zkw.identifier());
/// zkw.close()?;
/// # Ok::<(), zklock::Error>(())
/// ```
#[derive(Clone)]
pub struct ZooKeeperWatcher {
    inner: Arc<WatcherInner>,
    /// Shared by the handle's clones only. The event thread holds `WatcherInner` too
    /// while it dispatches an event (the `PendingWatcher` upgrades its `Weak`), so
    /// the last `Arc<WatcherInner>` may be dropped there; the last *handle* closes the
    /// session (in the background: see [`Closer`]'s drop).
    _closer: Arc<Closer>,
}

/// Closes the session when the last [`ZooKeeperWatcher`] clone is dropped.
struct Closer(Arc<WatcherInner>);

impl Drop for Closer {
    /// The last user handle is gone: the session closes in the background
    /// (closeSession waits up to 2 s for its answer; `Drop` never waits on the
    /// network). [`ZooKeeperWatcher::close`] is the synchronous form.
    fn drop(&mut self) {
        if self.0.closed.load(Ordering::SeqCst) {
            return; // closed already (`close()` is idempotent): nothing to do
        }
        let inner = self.0.clone();
        crate::util::run_in_background("zklock-close", move || {
            if let Err(e) = inner.close() {
                debug!("closing a dropped ZooKeeperWatcher: {e}");
            }
        });
    }
}

impl std::fmt::Debug for ZooKeeperWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperWatcher")
            .field("identifier", &*self.inner.identifier.read())
            .field("base_znode", &self.inner.base_znode)
            .field("listeners", &self.number_of_listeners())
            .finish()
    }
}

/// Builds a [`ZooKeeperWatcher`].
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{RetryConfig, ZooKeeperWatcher};
/// let zkw = ZooKeeperWatcher::builder("127.0.0.1:2181")
///     .with_identifier("worker")
///     .with_session_timeout(Duration::from_secs(6))
///     .with_retry(RetryConfig::default().with_max_attempts(5))
///     .with_base_znode("/myapp")
///     .with_create_base_znodes(true)
///     .connect()?;
/// # Ok::<(), zklock::Error>(())
/// ```
///
/// Each `with_*` returns the builder and is `#[must_use]`: a setting whose
/// result is dropped is a compile-time warning (here an error), not a
/// silently ignored setting.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// let builder = zklock::ZooKeeperWatcher::builder("127.0.0.1:2181");
/// builder.clone().with_identifier("worker"); // dropped: nothing configured
/// ```
#[derive(Clone)]
pub struct ZooKeeperWatcherBuilder {
    /// The client's settings (connect string, timeouts, buffer limit).
    client: ZooKeeperBuilder,
    prefix: String,
    abortable: Option<Arc<dyn Abortable>>,
    retry: RetryConfig,
    base_znode: String,
    create_base: bool,
    renew: bool,
    /// Follow the ensemble's configuration (`with_ensemble_tracking`).
    track_ensemble: bool,
    /// HBase configuration entries for the znode layout (`with_hbase_conf`).
    hbase_conf: Option<Vec<(String, String)>>,
    /// Whether writes carry HBase's metadata prefix (`with_metadata_prefix`).
    metadata: bool,
    /// The ACLs of the nodes zklock creates (`with_acl_policy`).
    acl: Option<AclPolicy>,
}

impl std::fmt::Debug for ZooKeeperWatcherBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperWatcherBuilder")
            .field("client", &self.client)
            .field("prefix", &self.prefix)
            .field("retry", &self.retry)
            .field("base_znode", &self.base_znode)
            .field("create_base", &self.create_base)
            .field("hbase_conf", &self.hbase_conf)
            .field("acl", &self.acl)
            .finish_non_exhaustive()
    }
}

impl ZooKeeperWatcherBuilder {
    /// The identifier prefix (HBase's `identifier` argument). Default `zklock`.
    #[must_use]
    pub fn with_identifier(mut self, prefix: &str) -> Self {
        self.prefix = prefix.to_string();
        self
    }

    /// Who is told when the session expires. Default: a [`LoggingAbortable`].
    #[must_use]
    pub fn with_abortable(mut self, abortable: Arc<dyn Abortable>) -> Self {
        self.abortable = Some(abortable);
        self
    }

    /// The requested session timeout. Default 30 s (HBase's
    /// `zookeeper.session.timeout` is 90 s; ZooKeeper caps at 20 ticks by default).
    #[must_use]
    pub fn with_session_timeout(self, timeout: Duration) -> Self {
        self.with_client(|c| c.with_session_timeout(timeout))
    }

    /// How long `connect` (and a call while disconnected) waits for a
    /// connection. Default: the session timeout.
    #[must_use]
    pub fn with_connect_wait(self, wait: Duration) -> Self {
        self.with_client(|c| c.with_connect_wait(wait))
    }

    /// How long a sent request waits for its reply (see
    /// [`ZooKeeperBuilder::with_request_timeout`]).
    #[must_use]
    pub fn with_request_timeout(self, timeout: Duration) -> Self {
        self.with_client(|c| c.with_request_timeout(timeout))
    }

    /// Any other client setting (handshake timeout, `jute.maxbuffer`, ...): `f`
    /// gets the client's builder and returns it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::ZooKeeperWatcher;
    /// let zkw = ZooKeeperWatcher::builder("127.0.0.1:2181")
    ///     .with_client(|c| c.with_handshake_timeout(Duration::from_millis(500)))
    ///     .connect()?;
    /// # Ok::<(), zklock::Error>(())
    /// ```
    #[must_use]
    pub fn with_client(mut self, f: impl FnOnce(ZooKeeperBuilder) -> ZooKeeperBuilder) -> Self {
        self.client = f(self.client);
        self
    }

    /// `RecoverableZooKeeper`'s retries. Default [`RetryConfig::default`]
    /// (HBase's: 3 retries, 1 s, exponential).
    #[must_use]
    pub fn with_retry(mut self, retry: RetryConfig) -> Self {
        self.retry = retry;
        self
    }

    /// The base znode. Default [`DEFAULT_BASE_ZNODE`] (`/zklock`).
    #[must_use]
    pub fn with_base_znode(mut self, base: &str) -> Self {
        self.base_znode = base.to_string();
        self
    }

    /// HBase's znode layout from HBase configuration entries (`key`, `value`):
    /// the base znode becomes `zookeeper.znode.parent` (default `/hbase`), and
    /// [`ZooKeeperWatcher::znode_paths`] takes its node names from the
    /// `zookeeper.znode.*` keys (see [`ZNodePaths::from_conf`]); a later
    /// [`with_base_znode`](Self::with_base_znode) moves the whole layout.
    /// With [`with_create_base_znodes`](Self::with_create_base_znodes),
    /// `connect` creates what HBase's `createBaseZNodes` does.
    ///
    /// Without it the watcher keeps zklock's base znode (`/zklock` unless set)
    /// and HBase's default names under it: zklock's own nodes and an HBase
    /// cluster's never share a directory by accident.
    ///
    /// ```no_run
    /// use zklock::ZooKeeperWatcher;
    /// let zkw = ZooKeeperWatcher::builder("127.0.0.1:2181")
    ///     .with_hbase_conf([("zookeeper.znode.parent", "/hbase-unsecure")])
    ///     .connect()?;
    /// assert_eq!(zkw.base_znode(), "/hbase-unsecure");
    /// assert_eq!(zkw.master_address_znode(), "/hbase-unsecure/master");
    /// assert_eq!(zkw.znode_paths().table_lock_znode, "/hbase-unsecure/table-lock");
    /// # Ok::<(), zklock::Error>(())
    /// ```
    #[must_use]
    pub fn with_hbase_conf<K: AsRef<str>, V: AsRef<str>>(
        mut self,
        conf: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let conf: Vec<(String, String)> = conf
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string()))
            .collect();
        self.base_znode = conf
            .iter()
            .rev()
            .find(|(k, _)| k == ZOOKEEPER_ZNODE_PARENT)
            .map_or(DEFAULT_ZOOKEEPER_ZNODE_PARENT, |(_, v)| v.as_str())
            .to_string();
        self.hbase_conf = Some(conf);
        self
    }

    /// Whether the session's [`RecoverableZooKeeper`] writes HBase's metadata
    /// prefix before the data of every node it creates or sets (default
    /// `true`, as HBase, whose retry rules need it). `false` stores the data as
    /// given, for plain readers; what that costs the `create` / `set_data`
    /// retry rules is in [`RecoverableZooKeeper`'s docs](RecoverableZooKeeper#data-format).
    #[must_use]
    pub fn with_metadata_prefix(mut self, on: bool) -> Self {
        self.metadata = on;
        self
    }

    /// The ACLs of every node zklock creates on this watcher's session
    /// (`zkutil`, the [`RecoverableZooKeeper`]'s own creation of parents,
    /// every lock and recipe): Curator's `ACLProvider`, HBase's
    /// `ZKUtil.createACL`.
    ///
    /// Default: [`AclPolicy::hbase`] of the watcher's znode layout
    /// (creator-only, world-readable where HBase's clients must read) while
    /// the session has an authenticated identity
    /// ([`ZooKeeper::has_identity`]: SASL, a TLS client certificate, or an
    /// `add_auth` such as `digest`), [`AclPolicy::open`] while it has none
    /// (decided at each creation, so an `add_auth` right after `connect`
    /// counts). HBase switches on SASL alone (`isSecureZooKeeper`); zklock
    /// counts every identity the server gives `CREATOR_ALL_ACL`, as
    /// DESIGN.md's security rule says: a certificate holder's nodes are no
    /// longer world-writable (the Java client with `CREATOR_ALL_ACL` gets the
    /// same ACL on the same server).
    ///
    /// Creator-only includes the directories zklock creates (a lock's
    /// znode and its parents): only the creating identity may create or
    /// delete nodes in them, so participants holding *different* identities
    /// cannot share a lock under the default. ZooKeeper checks a delete
    /// against the parent's ACL, so any identity allowed to take part may
    /// also delete the others' nodes (see
    /// [`AclPolicy`'s docs](AclPolicy#who-may-delete-a-node)): give such a
    /// fleet `AclPolicy::hbase(..)` (or [`AclPolicy::creator_all`]) with
    /// [`with_grant`](AclPolicy::with_grant) for each member's id, or create
    /// the shared directories up front with an ACL of your own.
    #[must_use]
    pub fn with_acl_policy(mut self, policy: AclPolicy) -> Self {
        self.acl = Some(policy);
        self
    }

    /// HBase's znode layout with HBase's defaults: [`with_hbase_conf`](Self::with_hbase_conf)
    /// with no entries (base znode `/hbase`).
    #[must_use]
    pub fn with_hbase_layout(self) -> Self {
        self.with_hbase_conf(std::iter::empty::<(&str, &str)>())
    }

    /// Whether `connect` creates the base znode (with parents), and with
    /// [`with_hbase_conf`](Self::with_hbase_conf) HBase's `createBaseZNodes`
    /// children ([`ZNodePaths::base_children`]; the assignment znode unless
    /// `hbase.assignment.usezk` is `false`). Default false.
    #[must_use]
    pub fn with_create_base_znodes(mut self, create: bool) -> Self {
        self.create_base = create;
        self
    }

    /// Session renewal (opt-in; off by default, as in HBase, which aborts).
    /// When the session expires, the watcher first tells every library wait and
    /// every listener `Expired` (each held lock is told `Lost`, each waiting
    /// acquire ends with an error), then opens a new session instead of calling
    /// the [`Abortable`], and announces it once connected with
    /// [`ZooKeeperListener::session_renewed`]. Locks, trackers and recipes made
    /// from this watcher work on the new session; a lock held before the expiry
    /// is never re-held silently: its `release()` returns `LockLost`, then it
    /// can be acquired anew. Node trackers read their node again.
    #[must_use]
    pub fn with_session_renewal(mut self, renew: bool) -> Self {
        self.renew = renew;
        self
    }

    /// Read-only mode (opt-in, off by default): the client's
    /// [`ZooKeeperBuilder::with_read_only`] (Java's `canBeReadOnly`). A server
    /// cut off from its quorum and started with
    /// `-Dreadonlymode.enabled=true` may then serve this watcher's reads;
    /// its state is [`KeeperState::ConnectedReadOnly`], told to every
    /// listener as a connection event, and
    /// [`ZooKeeperWatcher::is_read_only`] is true. Writes fail with
    /// `NotReadOnly`.
    ///
    /// What the layers above do while read-only: a held lock, semaphore
    /// lease or leadership stays **in doubt** (its `InDoubt` is not followed
    /// by `Restored`: a read-only server can prove neither that its node is
    /// the quorum's nor that its session lives) until a read-write server
    /// serves the session again, and is `Lost` only when the session ends; a
    /// new acquire fails with `NotReadOnly`. Node trackers and caches keep
    /// serving what they hold and say they are stale (`is_stale`) until
    /// read-write again, then read again. A session that only read-only
    /// servers served gets a new id at its first read-write server (see
    /// [`ZooKeeperBuilder::with_read_only`]): the watcher announces it as a
    /// [session renewal](ZooKeeperListener::session_renewed), with or
    /// without [`with_session_renewal`](Self::with_session_renewal).
    #[must_use]
    pub fn with_read_only(self, read_only: bool) -> Self {
        self.with_client(|c| c.with_read_only(read_only))
    }

    /// Follows the ensemble's configuration for the watcher's whole life
    /// (off by default): the [`EnsembleTracker`](crate::EnsembleTracker) of
    /// [`ZooKeeperWatcher::track_ensemble`], started at `connect` and kept
    /// by the watcher; [`ZooKeeperWatcher::ensemble_config`] reads what it
    /// last saw. For an ensemble that changes by `reconfig` (see
    /// `docs/ensembles.md`).
    #[must_use]
    pub fn with_ensemble_tracking(mut self, track: bool) -> Self {
        self.track_ensemble = track;
        self
    }

    /// Connects and returns the watcher once the session is established and the
    /// watcher has handled its `SyncConnected` event: listeners registered
    /// afterwards are told only of later events.
    ///
    /// # Errors
    /// `BadArguments` (connect string, base znode); `ConnectionLoss` when no
    /// server answered in time; errors creating the base znode.
    pub fn connect(self) -> Result<ZooKeeperWatcher> {
        crate::path::validate(&self.base_znode)?;
        let znodes = self.znode_paths()?;
        let pending = Arc::new(PendingWatcher::new());
        let wait = self.client.connect_wait();
        let deadline = std::time::Instant::now().checked_add(wait);
        // Started, not connected: events queue in the PendingWatcher until the
        // watcher below is ready (HBase's InstancePending dance).
        let acl = self
            .acl
            .unwrap_or_else(|| AclPolicy::hbase(&znodes).with_anonymous(AclPolicy::open()));
        let zk = self.client.start(pending.clone())?;
        let inner = Arc::new(WatcherInner {
            prefix: self.prefix.clone(),
            identifier: RwLock::new(self.prefix.clone()),
            rzk: RecoverableZooKeeper::new(zk.clone(), &self.prefix, self.retry)
                .with_metadata_prefix(self.metadata)
                .with_acl_policy(acl),
            abortable: self
                .abortable
                .unwrap_or_else(|| Arc::new(LoggingAbortable::new())),
            registry: RwLock::new(Registry::default()),
            base_znode: self.base_znode,
            znodes,
            expired: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            end_told: AtomicBool::new(false),
            state_seq: AtomicI64::new(0),
            state_lock: Mutex::new(KeeperState::Disconnected),
            state_cv: Condvar::new(),
            pending: pending.clone(),
            hooks: Mutex::new(Hooks::default()),
            path_hooks: AtomicBool::new(false),
            renew: self.renew,
            renewing: AtomicBool::new(false),
            last_session: AtomicI64::new(0),
            ensemble: Mutex::new(None),
        });
        let weak: Weak<dyn Watcher> = Arc::downgrade(&inner) as Weak<dyn Watcher>;
        pending.prepare(weak)?;
        let zkw = ZooKeeperWatcher {
            _closer: Arc::new(Closer(Arc::clone(&inner))),
            inner,
        };
        if let Err(e) = zk.wait_connected(wait) {
            let _ = zkw.close();
            return Err(e);
        }
        // The client is connected before its SyncConnected event has reached this
        // watcher on the event thread. Return only once the watcher has handled
        // it, so listeners registered after `connect` never get that stale event.
        {
            let mut g = zkw.inner.state_lock.lock();
            while zkw.inner.state_seq.load(Ordering::SeqCst) == 0 {
                let timed_out = match deadline {
                    Some(d) => zkw.inner.state_cv.wait_until(&mut g, d).timed_out(),
                    None => {
                        zkw.inner.state_cv.wait(&mut g);
                        false
                    }
                };
                if timed_out {
                    break;
                }
            }
        }
        *zkw.inner.identifier.write() = format!("{}-0x{:x}", zkw.inner.prefix, zk.session_id());
        if self.track_ensemble {
            *zkw.inner.ensemble.lock() = Some(zkw.track_ensemble());
        }
        if self.create_base {
            if let Err(e) = zkw
                .inner
                .rzk
                .create_with_parents(&zkw.inner.base_znode, &[])
                .and_then(|()| create_hbase_base_znodes(&zkw, self.hbase_conf.as_deref()))
            {
                let _ = zkw.close();
                return Err(e);
            }
        }
        Ok(zkw)
    }

    /// HBase's layout under the base znode, named by `with_hbase_conf`'s
    /// entries (HBase's defaults without them).
    fn znode_paths(&self) -> Result<ZNodePaths> {
        let base = [(ZOOKEEPER_ZNODE_PARENT.to_string(), self.base_znode.clone())];
        ZNodePaths::from_conf(self.hbase_conf.iter().flatten().cloned().chain(base))
    }
}

impl AclPolicy {
    /// HBase's `ZKUtil.createACL` on a secure ensemble for the layout
    /// `znodes`: `CREATOR_ALL_ACL` everywhere, plus world `READ` on the nodes
    /// HBase's clients read unauthenticated (the base znode, the meta server,
    /// master address, cluster id, region servers' and backup masters'
    /// parents, everything under the assignment and table znodes). HBase
    /// leaves nodes outside the base znode open; zklock does not (a secured
    /// deployment gets no world-writable node from zklock). HBase's
    /// `hbase.superuser` entry is `with_default` / `with_subtree` away.
    pub fn hbase(znodes: &ZNodePaths) -> AclPolicy {
        let read = AclPolicy::creator_all_world_read().default_acl().to_vec();
        let exact = [
            &znodes.base_znode,
            &znodes.meta_server_znode,
            &znodes.master_address_znode,
            &znodes.cluster_id_znode,
            &znodes.rs_znode,
            &znodes.backup_master_addresses_znode,
        ];
        let policy = exact
            .into_iter()
            .fold(AclPolicy::creator_all(), |p, path| p.with_path(path, &read));
        [&znodes.assignment_znode, &znodes.table_znode]
            .into_iter()
            .fold(policy, |p, path| p.with_subtree(path, &read))
    }
}

/// HBase's `createBaseZNodes` children (the base exists already), with
/// `ZKUtil.createAndFailSilent`; only for a watcher with an HBase conf.
fn create_hbase_base_znodes(
    zkw: &ZooKeeperWatcher,
    conf: Option<&[(String, String)]>,
) -> Result<()> {
    let Some(conf) = conf else { return Ok(()) };
    let uses_zk = conf
        .iter()
        .rev()
        .find(|(k, _)| k == "hbase.assignment.usezk")
        .map_or(true, |(_, v)| !v.trim().eq_ignore_ascii_case("false"));
    for node in zkw.znode_paths().base_children(uses_zk) {
        zkw.recoverable_zookeeper()
            .create_and_fail_silent(node, &[])?;
    }
    Ok(())
}

impl ZooKeeperWatcher {
    /// A builder for `quorum` (`"host:port,..."`, optionally with a chroot).
    pub fn builder(quorum: &str) -> ZooKeeperWatcherBuilder {
        ZooKeeperWatcherBuilder {
            client: ZooKeeper::builder(quorum).with_session_timeout(Duration::from_secs(30)),
            prefix: "zklock".to_string(),
            abortable: None,
            retry: RetryConfig::default(),
            base_znode: DEFAULT_BASE_ZNODE.to_string(),
            create_base: false,
            renew: false,
            track_ensemble: false,
            hbase_conf: None,
            metadata: true,
            acl: None,
        }
    }

    /// HBase's `new ZooKeeperWatcher(conf, identifier, abortable)`: connects to
    /// `quorum` with default settings.
    ///
    /// # Errors
    /// See [`ZooKeeperWatcherBuilder::connect`].
    pub fn connect(
        quorum: &str,
        identifier: &str,
        abortable: Option<Arc<dyn Abortable>>,
    ) -> Result<ZooKeeperWatcher> {
        let mut b = ZooKeeperWatcher::builder(quorum).with_identifier(identifier);
        if let Some(a) = abortable {
            b = b.with_abortable(a);
        }
        b.connect()
    }

    /// The `RecoverableZooKeeper` all toolkit calls go through.
    #[doc(alias = "getRecoverableZooKeeper")]
    pub fn recoverable_zookeeper(&self) -> &RecoverableZooKeeper {
        &self.inner.rzk
    }

    /// The raw client.
    pub fn zookeeper(&self) -> &ZooKeeper {
        self.inner.rzk.zookeeper()
    }

    /// `"<prefix>-0x<session id>"` once connected.
    #[doc(alias = "toString")]
    pub fn identifier(&self) -> String {
        self.inner.identifier.read().clone()
    }

    /// The prefix given at construction.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// The base znode (HBase's `getBaseZNode`): zklock's `/zklock` by
    /// default, HBase's `zookeeper.znode.parent` (default `/hbase`) with
    /// [`ZooKeeperWatcherBuilder::with_hbase_conf`].
    #[doc(alias = "getBaseZNode")]
    pub fn base_znode(&self) -> &str {
        &self.inner.base_znode
    }

    /// HBase 1.3's znode layout under [`base_znode`](Self::base_znode)
    /// (`ZooKeeperWatcher.setNodeNames`: `watcher.rsZNode` is
    /// `zkw.znode_paths().rs_znode`, ...). See [`ZNodePaths`].
    #[doc(alias = "znodePaths")]
    pub fn znode_paths(&self) -> &ZNodePaths {
        &self.inner.znodes
    }

    /// HBase's `getMasterAddressZNode`: the active master's znode.
    #[doc(alias = "getMasterAddressZNode")]
    pub fn master_address_znode(&self) -> &str {
        &self.inner.znodes.master_address_znode
    }

    /// HBase's `getRegionNormalizerZNode`.
    #[doc(alias = "getRegionNormalizerZNode")]
    pub fn region_normalizer_znode(&self) -> &str {
        &self.inner.znodes.region_normalizer_znode
    }

    /// HBase's `getZNodeForReplica(replicaId)`: a meta replica's znode.
    #[doc(alias = "getZNodeForReplica")]
    pub fn znode_for_replica(&self, replica_id: i32) -> String {
        self.inner.znodes.znode_for_replica(replica_id)
    }

    /// The abortable told of fatal errors.
    pub fn abortable(&self) -> &Arc<dyn Abortable> {
        &self.inner.abortable
    }

    /// Tells the abortable (HBase's `ZooKeeperWatcher.abort`).
    pub fn abort(&self, why: &str, error: Option<&Error>) {
        self.inner.abortable.abort(why, error)
    }

    /// The client's connection state.
    pub fn state(&self) -> State {
        self.zookeeper().state()
    }

    /// Whether the client is connected to a read-only server (see
    /// [`ZooKeeperWatcherBuilder::with_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.zookeeper().is_read_only()
    }

    /// Whether the session expired.
    pub fn is_expired(&self) -> bool {
        self.inner.expired.load(Ordering::SeqCst)
    }

    /// An error if the session can no longer be used (`SessionExpired`,
    /// `AuthFailed`, `Closed`), for waits that must end with the session.
    pub fn check_session(&self) -> Result<()> {
        self.inner.check_session()
    }

    // ---- listeners ---------------------------------------------------------

    /// HBase's `registerListener`: adds a listener at the end of the order. It
    /// stays registered until [`unregister_listener`](Self::unregister_listener),
    /// [`unregister_all_listeners`](Self::unregister_all_listeners) or the
    /// session's end; [`listen`](Self::listen) is the form that unregisters when
    /// its registration is dropped.
    ///
    /// The listener's calls run on the session's event thread, one event at a
    /// time: a call that blocks (a ZooKeeper call that waits for its reply, a
    /// `RecoverableZooKeeper` call that retries for seconds during a partition, a
    /// lock, a sleep) delays **every** later event of the session — other
    /// listeners, trackers, and a lock's `InDoubt`/`Lost` signals — by as long as
    /// it blocks. See [`ZooKeeperListener`].
    ///
    /// A listener that owns a clone of this watcher keeps the session alive (see
    /// [Listeners and the session's lifetime](Self#listeners-and-the-sessions-lifetime)):
    /// hold a [`WeakZooKeeperWatcher`] instead.
    #[doc(alias = "registerListener")]
    pub fn register_listener(&self, listener: Arc<dyn ZooKeeperListener>) {
        self.inner.registry.write().insert(listener, false);
    }

    /// Registers `listener` (as [`register_listener`](Self::register_listener))
    /// and returns a registration that unregisters it when dropped (no HBase
    /// counterpart). The registration holds the watcher weakly: it does not keep
    /// the session alive.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use zklock::{ZooKeeperListener, ZooKeeperWatcher};
    ///
    /// struct Log;
    /// impl ZooKeeperListener for Log {
    ///     fn node_deleted(&self, path: &str) {
    ///         println!("{path} deleted");
    ///     }
    /// }
    ///
    /// let zkw = ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
    /// let registration = zkw.listen(Arc::new(Log));
    /// // ... events reach `Log` ...
    /// drop(registration); // and no longer
    /// # Ok::<(), zklock::Error>(())
    /// ```
    pub fn listen(&self, listener: Arc<dyn ZooKeeperListener>) -> ListenerRegistration {
        self.register_listener(listener.clone());
        ListenerRegistration {
            watcher: Arc::downgrade(&self.inner),
            listener: Some(listener),
        }
    }

    /// Follows the ensemble's configuration and keeps this client's server
    /// list in step with it, until the returned tracker is dropped
    /// (Curator's `EnsembleTracker`; see [`EnsembleTracker`](crate::EnsembleTracker)). For an
    /// ensemble that changes by `reconfig`: members added are used, clients
    /// spread onto them, and a removed member's clients move, keeping their
    /// session.
    pub fn track_ensemble(&self) -> crate::EnsembleTracker {
        crate::EnsembleTracker::start(self)
    }

    /// The configuration the tracker of
    /// [`with_ensemble_tracking`](ZooKeeperWatcherBuilder::with_ensemble_tracking)
    /// last read; `None` without it, or before its first answer.
    pub fn ensemble_config(&self) -> Option<crate::client::ClientConfig> {
        self.inner
            .ensemble
            .lock()
            .as_ref()
            .and_then(crate::EnsembleTracker::config)
    }

    /// A weak handle: reaches this session without keeping it open (see
    /// [`WeakZooKeeperWatcher`]).
    pub fn downgrade(&self) -> WeakZooKeeperWatcher {
        WeakZooKeeperWatcher {
            inner: Arc::downgrade(&self.inner),
            closer: Arc::downgrade(&self._closer),
        }
    }

    /// Adds a listener before all others.
    #[doc(alias = "registerListenerFirst")]
    pub fn register_listener_first(&self, listener: Arc<dyn ZooKeeperListener>) {
        self.inner.registry.write().insert(listener, true);
    }

    /// Removes `listener` (by identity); whether it was registered.
    #[doc(alias = "unregisterListener")]
    pub fn unregister_listener(&self, listener: &Arc<dyn ZooKeeperListener>) -> bool {
        self.inner.registry.write().remove(listener)
    }

    /// HBase's `unregisterAllListeners`: removes every listener of the registry.
    ///
    /// Only users' listeners are affected: the library's own waits and watches
    /// (a [`ZooKeeperNodeTracker`](crate::ZooKeeperNodeTracker), a started
    /// [`DeletionListener`](crate::DeletionListener), locks) use per-watch
    /// watchers and their own subscription to connection events, never this
    /// registry, and keep working.
    #[doc(alias = "unregisterAllListeners")]
    pub fn unregister_all_listeners(&self) {
        *self.inner.registry.write() = Registry::default();
    }

    /// Every listener, in dispatch order.
    #[doc(alias = "getListeners")]
    pub fn listeners(&self) -> Vec<Arc<dyn ZooKeeperListener>> {
        self.inner.registry.read().all()
    }

    /// How many listeners are registered.
    #[doc(alias = "getNumberOfListeners")]
    pub fn number_of_listeners(&self) -> usize {
        self.inner.registry.read().count
    }

    /// Dispatches `event` as if ZooKeeper had sent it (HBase's `process`, public
    /// there too; used by benchmarks and tests).
    pub fn process(&self, event: WatchedEvent) {
        self.inner.process(event)
    }

    /// Closes the session (idempotent) and drops every listener.
    pub fn close(&self) -> Result<()> {
        self.inner.close()
    }
}

/// A weak [`ZooKeeperWatcher`]: reaches the session without keeping it open
/// (no HBase counterpart; HBase's listeners hold the watcher itself, which in
/// Rust would be an `Arc` cycle through the listener registry).
///
/// [`upgrade`](Self::upgrade) gives a full handle while the application still
/// holds one; keep the upgraded handle only for the duration of a call. Made by
/// [`ZooKeeperWatcher::downgrade`]; [`Default`] is a handle to no session.
#[derive(Clone, Default)]
pub struct WeakZooKeeperWatcher {
    inner: Weak<WatcherInner>,
    closer: Weak<Closer>,
}

impl std::fmt::Debug for WeakZooKeeperWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakZooKeeperWatcher")
            .field("alive", &(self.closer.strong_count() > 0))
            .finish()
    }
}

impl WeakZooKeeperWatcher {
    /// The watcher, if a [`ZooKeeperWatcher`] handle still exists (the session
    /// may still have ended: see [`ZooKeeperWatcher::check_session`]).
    pub fn upgrade(&self) -> Option<ZooKeeperWatcher> {
        let closer = self.closer.upgrade()?;
        Some(ZooKeeperWatcher {
            inner: Arc::clone(&closer.0),
            _closer: closer,
        })
    }

    /// The session's `RecoverableZooKeeper`, for library code: not a user handle,
    /// so holding it for a call does not delay the session's end. `None` once
    /// the watcher is gone.
    pub(crate) fn recoverable_zookeeper(&self) -> Option<RecoverableZooKeeper> {
        self.inner.upgrade().map(|i| i.rzk.clone())
    }

    /// The raw client (see [`recoverable_zookeeper`](Self::recoverable_zookeeper)).
    pub(crate) fn zookeeper(&self) -> Option<ZooKeeper> {
        self.inner.upgrade().map(|i| i.rzk.zookeeper().clone())
    }

    /// [`ZooKeeperWatcher::check_session`]; [`Error::Closed`] once the watcher is
    /// gone.
    pub(crate) fn check_session(&self) -> Result<()> {
        match self.inner.upgrade() {
            Some(i) => i.check_session(),
            None => Err(Error::Closed),
        }
    }

    /// The watcher's base znode, `None` once it is gone.
    pub(crate) fn base_znode(&self) -> Option<String> {
        self.inner.upgrade().map(|i| i.base_znode.clone())
    }

    /// Subscribes `hook` to connection events; the id for
    /// [`remove_hook`](Self::remove_hook). If the session has already ended, the
    /// hook is told at once (on this thread).
    pub(crate) fn add_hook(&self, hook: Weak<dyn SessionHook>) -> Option<u64> {
        self.subscribe(hook, None, None)
    }

    /// [`add_hook`](Self::add_hook), and the hook is also told
    /// ([`SessionHook::node_event`]) of every node event on `path` that comes
    /// through the session's default watcher: HBase's listener dispatch, off
    /// the user's registry. A library listener sets its watches with the
    /// default watcher ([`ZooKeeper::default_watcher`]) and subscribes here, so
    /// that its events also reach the user's listeners for that path, and the
    /// client, which keeps one registration per watcher and path, delivers each
    /// event once however many trackers, `zkutil` calls and listeners watch it.
    pub(crate) fn add_path_hook(&self, hook: Weak<dyn SessionHook>, path: &str) -> Option<u64> {
        self.subscribe(hook, None, Some(path))
    }

    /// [`add_hook`](Self::add_hook) for a hook that the session keeps alive until
    /// [`remove_hook`](Self::remove_hook) (or the watcher's end).
    pub(crate) fn add_owned_hook(&self, hook: Arc<dyn SessionHook>) -> Option<u64> {
        self.subscribe(Arc::downgrade(&hook), Some(hook), None)
    }

    fn subscribe(
        &self,
        hook: Weak<dyn SessionHook>,
        owned: Option<Arc<dyn SessionHook>>,
        path: Option<&str>,
    ) -> Option<u64> {
        let Some(inner) = self.inner.upgrade() else {
            if let Some(h) = hook.upgrade() {
                h.session_event(KeeperState::Closed);
            }
            return None;
        };
        let id = {
            let mut hooks = inner.hooks.lock();
            hooks.next += 1;
            let id = hooks.next;
            hooks.by_id.insert(id, hook.clone());
            if let Some(owned) = owned {
                hooks.owned.insert(id, owned);
            }
            if let Some(path) = path {
                hooks.by_path.entry(path.to_string()).or_default().push(id);
                hooks.path_of.insert(id, path.to_string());
                has_path_hooks(&hooks, &inner.path_hooks);
            }
            id
        };
        if let Err(e) = inner.check_session() {
            let state = match e.code() {
                Some(ZkError::SessionExpired) => KeeperState::Expired,
                Some(ZkError::AuthFailed) => KeeperState::AuthFailed,
                _ => KeeperState::Closed,
            };
            if let Some(h) = hook.upgrade() {
                h.session_event(state);
            }
        }
        Some(id)
    }

    /// Ends a subscription of [`add_hook`](Self::add_hook).
    pub(crate) fn remove_hook(&self, id: u64) {
        if let Some(inner) = self.inner.upgrade() {
            let mut hooks = inner.hooks.lock();
            hooks.remove(id);
            has_path_hooks(&hooks, &inner.path_hooks);
        }
    }
}

/// A listener registered by [`ZooKeeperWatcher::listen`]: unregisters it when
/// dropped. Holds the watcher weakly (it does not keep the session alive).
#[must_use = "dropping the registration unregisters the listener at once"]
pub struct ListenerRegistration {
    watcher: Weak<WatcherInner>,
    listener: Option<Arc<dyn ZooKeeperListener>>,
}

impl std::fmt::Debug for ListenerRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerRegistration")
            .field("registered", &self.listener.is_some())
            .finish()
    }
}

impl ListenerRegistration {
    /// The registered listener.
    pub fn listener(&self) -> &Arc<dyn ZooKeeperListener> {
        self.listener
            .as_ref()
            .expect("a ListenerRegistration holds its listener until dropped")
    }

    /// Unregisters now; whether the listener was still registered (it is not
    /// after `unregister_all_listeners` or the session's end).
    pub fn unregister(mut self) -> bool {
        self.remove()
    }

    /// Keeps the listener registered for good, as
    /// [`register_listener`](ZooKeeperWatcher::register_listener) does.
    pub fn forget(mut self) {
        self.listener = None;
    }

    fn remove(&mut self) -> bool {
        match (self.listener.take(), self.watcher.upgrade()) {
            (Some(l), Some(inner)) => inner.registry.write().remove(&l),
            _ => false,
        }
    }
}

impl Drop for ListenerRegistration {
    fn drop(&mut self) {
        self.remove();
    }
}

impl WatcherInner {
    fn check_session(&self) -> Result<()> {
        match Error::for_ended_session(self.rzk.state()) {
            Some(e) => Err(e),
            None if self.closed.load(Ordering::SeqCst) => Err(Error::Closed),
            None => Ok(()),
        }
    }

    /// The library hooks still alive (drops the ones that are gone).
    fn live_hooks(&self) -> Vec<Arc<dyn SessionHook>> {
        let mut g = self.hooks.lock();
        let gone: Vec<u64> = g
            .by_id
            .iter()
            .filter(|(_, h)| h.strong_count() == 0)
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            g.remove(id);
        }
        has_path_hooks(&g, &self.path_hooks);
        g.by_id.values().filter_map(Weak::upgrade).collect()
    }

    /// Tells the hooks subscribed to `path` of a node event (on the event
    /// thread, before the user's listeners; their reactions never block).
    fn tell_node_hooks(&self, event_type: EventType, path: &str) {
        if !self.path_hooks.load(Ordering::SeqCst) {
            return;
        }
        let hooks: Vec<Arc<dyn SessionHook>> = {
            let g = self.hooks.lock();
            match g.by_path.get(path) {
                Some(ids) => ids
                    .iter()
                    .filter_map(|id| g.by_id.get(id).and_then(Weak::upgrade))
                    .collect(),
                None => return,
            }
        };
        for h in hooks {
            if catch_unwind(AssertUnwindSafe(|| h.node_event(event_type, path))).is_err() {
                error!("a library node hook panicked");
            }
        }
    }

    /// Tells every library hook of `state`.
    fn tell_hooks(&self, state: KeeperState) {
        let hooks = self.live_hooks();
        for h in hooks {
            if catch_unwind(AssertUnwindSafe(|| h.session_event(state))).is_err() {
                error!("a library connection hook panicked");
            }
        }
    }

    fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::SeqCst);
        // An event thread still parked in the PendingWatcher must not hold close.
        let _ = self.pending.cancel();
        let r = self.rzk.close();
        // Normally the event thread has told every listener `Closed` (or
        // `Expired`) by now. If a listener kept it busy past close's bound, tell
        // them here, so no wait on this watcher outlives it.
        if !self.end_told.load(Ordering::SeqCst) {
            let listeners = self.registry.read().all();
            let closed = WatchedEvent::state(KeeperState::Closed);
            self.call_each(listeners, "a connection event", |l| {
                l.connection_event(&closed)
            });
        }
        *self.registry.write() = Registry::default();
        // The library's waits end with the session, whatever the event thread
        // did (their handlers are idempotent).
        self.tell_hooks(KeeperState::Closed);
        *self.hooks.lock() = Hooks::default();
        self.path_hooks.store(false, Ordering::SeqCst);
        {
            let _g = self.state_lock.lock();
            self.state_seq.fetch_add(1, Ordering::SeqCst);
            self.state_cv.notify_all();
        }
        r
    }

    fn call_each(
        &self,
        listeners: Vec<ListenerRef>,
        what: &str,
        f: impl Fn(&dyn ZooKeeperListener),
    ) {
        for l in listeners {
            if catch_unwind(AssertUnwindSafe(|| f(&*l))).is_err() {
                error!("a ZooKeeperListener panicked handling {what}");
            }
        }
    }

    fn connection_event(&self, event: &WatchedEvent) {
        if matches!(
            event.keeper_state,
            KeeperState::Expired | KeeperState::Closed | KeeperState::AuthFailed
        ) {
            self.end_told.store(true, Ordering::SeqCst);
        }
        let identifier = self.identifier.read().clone();
        // Another session than the last one connected: a renewal, or the new
        // session a read-write server gave a read-only server's session.
        let mut swapped = false;
        if matches!(
            event.keeper_state,
            KeeperState::SyncConnected | KeeperState::ConnectedReadOnly
        ) {
            let session = self.rzk.session_id();
            let last = self.last_session.swap(session, Ordering::SeqCst);
            swapped = last != 0 && last != session;
        }
        match event.keeper_state {
            KeeperState::SyncConnected => {
                let id = format!("{}-0x{:x}", self.prefix, self.rzk.session_id());
                info!("{id} connected");
                *self.identifier.write() = id;
            }
            KeeperState::ConnectedReadOnly => {
                let id = format!("{}-0x{:x}", self.prefix, self.rzk.session_id());
                info!("{id} connected to a read-only server");
                *self.identifier.write() = id;
            }
            KeeperState::Disconnected => info!("{identifier} disconnected from ZooKeeper"),
            KeeperState::Expired if self.renew => {
                self.expired.store(true, Ordering::SeqCst);
                warn!("{identifier} received expired from ZooKeeper; opening a new session (session renewal)");
            }
            KeeperState::Expired => {
                if !self.expired.swap(true, Ordering::SeqCst) {
                    let why = format!("{identifier} received expired from ZooKeeper, aborting");
                    error!("{why}");
                    self.abortable
                        .abort(&why, Some(&Error::zk_code(ZkError::SessionExpired)));
                }
            }
            KeeperState::AuthFailed => error!("{identifier} authentication failed"),
            KeeperState::Closed => debug!("{identifier} closed"),
            other => debug!("{identifier} connection state {other:?}"),
        }
        // The listeners are taken before waiters are woken: `connect` returns on
        // the first state change, and a listener registered after that must not
        // be told of this event.
        let listeners = self.registry.read().all();
        {
            let mut g = self.state_lock.lock();
            *g = event.keeper_state;
            self.state_seq.fetch_add(1, Ordering::SeqCst);
            self.state_cv.notify_all();
        }
        // The library first: its reactions never block, and a lock's signals
        // must not wait for the user's listeners.
        self.tell_hooks(event.keeper_state);
        self.call_each(listeners, "a connection event", |l| {
            l.connection_event(event)
        });
        match event.keeper_state {
            // Everyone has been told the old session ended: open the new one
            // (returns at once; its SyncConnected comes as an event).
            KeeperState::Expired if self.renew && !self.closed.load(Ordering::SeqCst) => {
                match self.rzk.zookeeper().renew_session() {
                    Ok(()) => {
                        self.renewing.store(true, Ordering::SeqCst);
                        self.expired.store(false, Ordering::SeqCst);
                        self.end_told.store(false, Ordering::SeqCst);
                    }
                    Err(e) => {
                        let why = format!("{identifier} could not open a new session: {e}");
                        error!("{why}");
                        self.abortable.abort(&why, Some(&e));
                    }
                }
            }
            KeeperState::SyncConnected | KeeperState::ConnectedReadOnly
                if self.renewing.swap(false, Ordering::SeqCst) || swapped =>
            {
                info!("{} is the renewed session", self.identifier.read());
                let hooks = self.live_hooks();
                for h in hooks {
                    if catch_unwind(AssertUnwindSafe(|| h.session_renewed())).is_err() {
                        error!("a library hook panicked on session renewal");
                    }
                }
                let listeners = self.registry.read().all();
                self.call_each(listeners, "a session renewal", |l| l.session_renewed());
            }
            _ => {}
        }
    }
}

impl Watcher for WatcherInner {
    fn process(&self, event: WatchedEvent) {
        debug!("{} received {event}", self.identifier.read());
        let path = event.path.as_deref();
        match event.event_type {
            EventType::None => self.connection_event(&event),
            t => {
                let Some(p) = path else {
                    warn!("node event {t:?} without a path");
                    return;
                };
                // The library's listeners first (HBase registers its trackers
                // as listeners; zklock keeps them off the user's registry).
                self.tell_node_hooks(t, p);
                let listeners = self.registry.read().for_path(Some(p));
                match t {
                    EventType::NodeCreated => {
                        self.call_each(listeners, "nodeCreated", |l| l.node_created(p))
                    }
                    EventType::NodeDeleted => {
                        self.call_each(listeners, "nodeDeleted", |l| l.node_deleted(p))
                    }
                    EventType::NodeDataChanged => {
                        self.call_each(listeners, "nodeDataChanged", |l| l.node_data_changed(p))
                    }
                    EventType::NodeChildrenChanged => {
                        self.call_each(listeners, "nodeChildrenChanged", |l| {
                            l.node_children_changed(p)
                        })
                    }
                    _ => {}
                }
            }
        }
    }
}

impl Drop for WatcherInner {
    /// Ends the session if a close is still owed: after a close that no
    /// server confirmed (the session may live on), tried once more in the
    /// background, never on the dropping thread (`Drop` never waits on the
    /// network; the close waits up to its bound, 2 s). After a confirmed
    /// close there is nothing to do.
    fn drop(&mut self) {
        self.rzk.close_in_background();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct L {
        name: &'static str,
        path: Option<&'static str>,
        log: Arc<Mutex<Vec<String>>>,
    }

    impl ZooKeeperListener for L {
        fn node_deleted(&self, p: &str) {
            self.log.lock().push(format!("{}:{p}", self.name));
        }
        fn path(&self) -> Option<&str> {
            self.path
        }
    }

    #[test]
    fn registry_keeps_registration_order_across_path_and_general() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut r = Registry::default();
        let mk = |name, path| -> ListenerRef {
            Arc::new(L {
                name,
                path,
                log: log.clone(),
            })
        };
        let a = mk("a", None);
        let b = mk("b", Some("/x"));
        let c = mk("c", None);
        let d = mk("d", Some("/y"));
        let z = mk("z", Some("/x"));
        r.insert(a.clone(), false);
        r.insert(b.clone(), false);
        r.insert(c.clone(), false);
        r.insert(d.clone(), false);
        r.insert(z.clone(), true);
        let names = |v: Vec<ListenerRef>| {
            log.lock().clear();
            for l in v {
                l.node_deleted("/p");
            }
            log.lock().clone()
        };
        assert_eq!(
            names(r.for_path(Some("/x"))),
            ["z:/p", "a:/p", "b:/p", "c:/p"]
        );
        assert_eq!(names(r.for_path(Some("/q"))), ["a:/p", "c:/p"]);
        assert_eq!(names(r.all()), ["z:/p", "a:/p", "b:/p", "c:/p", "d:/p"]);
        assert_eq!(r.count, 5);
        assert!(r.remove(&b));
        assert!(!r.remove(&b));
        assert!(r.remove(&d));
        assert!(!r.by_path.contains_key("/y"), "empty buckets are dropped");
        assert_eq!(r.count, 3);
        let counter = AtomicUsize::new(0);
        for _ in r.for_path(Some("/x")) {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        assert_eq!(counter.load(Ordering::SeqCst), 3);
    }
}
