//! `ZkInterProcessLockBase`: HBase's `ZKInterProcessLockBase`, generic over the
//! lock kind.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::{Mutex, RwLock};

use super::kind::LockKind;
use super::kind::{distance, sequence_of_child};
use super::{AcquiredLock, InterProcessLock, LockEvent, LockListener, MetadataHandler};
use crate::client::{
    Acl, CreateMode, Deadline, EventType, KeeperState, Stat, State as ClientState, WatchedEvent,
};
use crate::error::{Error, Result, ZkError};
use crate::listener::ZooKeeperListener;
use crate::recoverable::{tagged_prefix, RecoverableZooKeeper};
use crate::tracker::DeletionListener;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// The state of one lock instance.
enum State {
    Idle,
    Acquiring,
    Held {
        lock: AcquiredLock,
        watch: Arc<dyn ZooKeeperListener>,
    },
}

/// Shared between the lock and its held-lock listener (no `ZooKeeperWatcher`
/// inside: no reference cycle through the watcher's registry).
struct Shared {
    state: Mutex<State>,
    lost: AtomicBool,
    listener: RwLock<Option<Arc<dyn LockListener>>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            State::Idle => f.write_str("Idle"),
            State::Acquiring => f.write_str("Acquiring"),
            State::Held { lock, .. } => f.debug_tuple("Held").field(lock).finish(),
        }
    }
}

impl Shared {
    fn tell(&self, path: &str, event: LockEvent) {
        let l = self.listener.read().clone();
        if let Some(l) = l {
            l.lock_event(path, event);
        }
    }
}

/// Watches a held lock: connection events and its own node's deletion.
struct HeldWatch {
    path: String,
    shared: Arc<Shared>,
    in_doubt: AtomicBool,
    rzk: RecoverableZooKeeper,
}

impl HeldWatch {
    fn lose(&self, why: &str) {
        if !self.shared.lost.swap(true, Ordering::SeqCst) {
            warn!("lock {} lost: {why}", self.path);
            self.shared.tell(&self.path, LockEvent::Lost);
        }
    }
}

impl ZooKeeperListener for HeldWatch {
    fn node_deleted(&self, path: &str) {
        if path == self.path {
            self.lose("its node was deleted");
        }
    }

    fn node_data_changed(&self, path: &str) {
        // Someone wrote to our node: the one-shot watch is spent; set it again.
        if path == self.path {
            if let Ok(false) = zkutil::set_watch_if_node_exists_rzk(&self.rzk, path) {
                self.lose("its node was deleted");
            }
        }
    }

    fn connection_event(&self, event: &WatchedEvent) {
        if event.event_type != EventType::None {
            return;
        }
        let lost = self.shared.lost.load(Ordering::SeqCst);
        match event.keeper_state {
            KeeperState::Disconnected if !lost && !self.in_doubt.swap(true, Ordering::SeqCst) => {
                info!("lock {} in doubt: disconnected", self.path);
                self.shared.tell(&self.path, LockEvent::InDoubt);
            }
            KeeperState::SyncConnected if !lost && self.in_doubt.swap(false, Ordering::SeqCst) => {
                info!(
                    "lock {} restored: reconnected within the session",
                    self.path
                );
                self.shared.tell(&self.path, LockEvent::Restored);
            }
            KeeperState::Expired => self.lose("the session expired"),
            KeeperState::Closed => self.lose("the session was closed"),
            KeeperState::AuthFailed => self.lose("authentication failed"),
            _ => {}
        }
    }

    fn path(&self) -> Option<&str> {
        Some(&self.path)
    }
}

/// Watches a waiting attempt's own node: if it is deleted (reaped) while the
/// attempt waits on another node, the wait ends with `LockLost` at once.
struct OwnNodeWatch {
    path: String,
    rzk: RecoverableZooKeeper,
    waiting_on: Mutex<Option<Arc<DeletionListener>>>,
    gone: AtomicBool,
}

impl OwnNodeWatch {
    fn gone(&self) {
        self.gone.store(true, Ordering::SeqCst);
        if let Some(l) = self.waiting_on.lock().as_ref() {
            l.release(Some(Error::LockLost {
                path: self.path.clone(),
            }));
        }
    }
}

impl ZooKeeperListener for OwnNodeWatch {
    fn node_deleted(&self, path: &str) {
        if path == self.path {
            self.gone();
        }
    }

    fn node_data_changed(&self, path: &str) {
        if path == self.path {
            if let Ok(false) = zkutil::set_watch_if_node_exists_rzk(&self.rzk, path) {
                self.gone();
            }
        }
    }

    fn path(&self) -> Option<&str> {
        Some(&self.path)
    }
}

/// What a failed attempt left behind: its node, or (when the create's reply was
/// lost) the tagged prefix its node carries.
#[derive(Debug, Clone)]
enum Attempt {
    Node(String),
    Tag(String),
}

/// Removes an attempt's node once the connection is back, when removing it
/// failed with a recoverable error (Curator's "guaranteed delete"). Registered
/// on the watcher; unregisters itself when done or when the session ends (its
/// ephemeral node then goes with it).
struct Sweeper {
    attempt: Attempt,
    zkw: Mutex<Option<ZooKeeperWatcher>>,
    me: Mutex<Weak<Sweeper>>,
}

impl Sweeper {
    fn start(zkw: &ZooKeeperWatcher, attempt: Attempt) {
        if zkw.state().is_terminal() {
            return; // ephemeral: gone with the session
        }
        let sweeper = Arc::new(Sweeper {
            attempt,
            zkw: Mutex::new(Some(zkw.clone())),
            me: Mutex::new(Weak::new()),
        });
        *sweeper.me.lock() = Arc::downgrade(&sweeper);
        info!(
            "will remove {:?} when the connection is back",
            sweeper.attempt
        );
        zkw.register_listener(sweeper.clone());
        // Reconnected before the registration: do not wait for the next time.
        if zkw.state() == ClientState::Connected {
            sweeper.sweep();
        }
    }

    /// Hands the removal back to `remove_async` (which starts a new sweeper if it
    /// fails again) and retires this one.
    fn sweep(&self) {
        if let Some(zkw) = self.finish() {
            let (done, _) = crossbeam_channel::bounded(1);
            remove_async(zkw, self.attempt.clone(), done);
        }
    }

    fn finish(&self) -> Option<ZooKeeperWatcher> {
        let zkw = self.zkw.lock().take()?;
        if let Some(me) = self.me.lock().upgrade() {
            let me: Arc<dyn ZooKeeperListener> = me;
            zkw.unregister_listener(&me);
        }
        Some(zkw)
    }
}

impl ZooKeeperListener for Sweeper {
    fn connection_event(&self, event: &WatchedEvent) {
        match event.keeper_state {
            KeeperState::SyncConnected => self.sweep(),
            KeeperState::Expired | KeeperState::Closed | KeeperState::AuthFailed => {
                self.finish();
            }
            _ => {}
        }
    }
}

/// How long a failed attempt waits for its node's removal before returning; the
/// removal goes on without it (or after the reconnect).
const REMOVAL_WAIT: Duration = Duration::from_millis(250);

/// Removes an attempt's node without blocking (async calls, answered on the event
/// thread); when the connection is lost first, a [`Sweeper`] removes it after the
/// reconnect. `done` is told once the removal is settled here.
fn remove_async(zkw: ZooKeeperWatcher, attempt: Attempt, done: crossbeam_channel::Sender<()>) {
    let zk = zkw.zookeeper().clone();
    match attempt.clone() {
        Attempt::Node(path) => zk.delete_async(&path.clone(), None, move |r| {
            match r {
                Err(e) if e.is_retryable() => Sweeper::start(&zkw, attempt),
                Err(e) if !e.is(ZkError::NoNode) && !e.is_fatal() => {
                    warn!("could not remove lock node {path}: {e}")
                }
                _ => {}
            }
            let _ = done.send(());
        }),
        Attempt::Tag(prefix) => {
            let (parent, name_prefix) = match prefix.rfind('/') {
                Some(i) => (prefix[..i.max(1)].to_string(), prefix[i + 1..].to_string()),
                None => return,
            };
            zk.get_children_async(&parent.clone(), None, move |r| match r {
                Ok(children) => match children.iter().find(|c| c.starts_with(&name_prefix)) {
                    Some(c) => {
                        remove_async(zkw, Attempt::Node(zkutil::join_znode(&parent, c)), done)
                    }
                    None => {
                        let _ = done.send(());
                    }
                },
                Err(e) => {
                    if e.is_retryable() {
                        Sweeper::start(&zkw, attempt);
                    }
                    let _ = done.send(());
                }
            })
        }
    }
}

/// How a wait ended.
enum Waited {
    /// Held; `watched` when a data watch is already set on our own node.
    Held {
        watched: bool,
    },
    TimedOut,
}

/// HBase's `ZKInterProcessLockBase`: one lock instance (read or write, by `K`)
/// on the lock znode `parent`.
///
/// Use the aliases [`ZkInterProcessReadLock`](super::ZkInterProcessReadLock) and
/// [`ZkInterProcessWriteLock`](super::ZkInterProcessWriteLock), usually made by
/// [`ZkInterProcessReadWriteLock`](super::ZkInterProcessReadWriteLock). One instance
/// is one would-be holder: share it between threads only to hand the lock over
/// (it is not reentrant); give each thread its own instance to contend.
///
/// Costs: an uncontended `acquire` + `release` is 3 ZooKeeper requests (create,
/// get children, delete). A wait adds a `get_data` watch on the node waited for
/// per round, one on the attempt's own node (so a reaped waiter fails at once),
/// and, with a [`MetadataHandler`], a `get_data` of the holder's metadata per
/// round. A [lock listener](Self::with_lock_listener) adds one watch on the held
/// node when the grant needed no wait.
///
/// Dropping an instance that holds the lock releases it.
#[doc(alias = "ZKInterProcessLockBase")]
pub struct ZkInterProcessLockBase<K: LockKind> {
    zkw: ZooKeeperWatcher,
    parent: String,
    metadata: Vec<u8>,
    handler: Option<Arc<dyn MetadataHandler>>,
    shared: Arc<Shared>,
    _kind: PhantomData<fn() -> K>,
}

impl<K: LockKind> std::fmt::Debug for ZkInterProcessLockBase<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkInterProcessLockBase")
            .field("kind", &K::PREFIX)
            .field("parent", &self.parent)
            .field("state", &*self.shared.state.lock())
            .finish()
    }
}

impl<K: LockKind> ZkInterProcessLockBase<K> {
    /// A lock instance on the lock znode `parent` (created with parents when
    /// needed), whose node carries `metadata`; `handler` sees the holder's
    /// metadata while this instance waits (HBase's `handleLockMetadata`).
    ///
    /// # Errors
    /// `BadArguments` for an invalid `parent` path.
    pub fn new(
        zkw: &ZooKeeperWatcher,
        parent: &str,
        metadata: &[u8],
        handler: Option<Arc<dyn MetadataHandler>>,
    ) -> Result<Self> {
        crate::client::validate_path(parent)?;
        Ok(ZkInterProcessLockBase {
            zkw: zkw.clone(),
            parent: parent.to_string(),
            metadata: metadata.to_vec(),
            handler,
            shared: Arc::new(Shared {
                state: Mutex::new(State::Idle),
                lost: AtomicBool::new(false),
                listener: RwLock::new(None),
            }),
            _kind: PhantomData,
        })
    }

    /// Tells `listener` what happens to the lock while held: in doubt on
    /// disconnect, restored on reconnect, lost on session expiry or close, or
    /// when its node is deleted (e.g. reaped by another process: the lock keeps a
    /// watch on its node while a listener is set).
    pub fn with_lock_listener(self, listener: impl LockListener + 'static) -> Self {
        *self.shared.listener.write() = Some(Arc::new(listener));
        self
    }

    /// The lock znode.
    pub fn lock_znode(&self) -> &str {
        &self.parent
    }

    /// The metadata this instance's node carries.
    pub fn metadata(&self) -> &[u8] {
        &self.metadata
    }

    fn deadline(timeout: Option<Duration>) -> Option<Instant> {
        // A timeout too large for an Instant waits forever.
        timeout.and_then(|t| Instant::now().checked_add(t))
    }

    /// acquire / try_acquire: `None` waits until held or the session ends.
    fn try_acquire_until(&self, deadline: Option<Instant>) -> Result<bool> {
        {
            let mut st = self.shared.state.lock();
            if !matches!(*st, State::Idle) {
                return Err(Error::LockBusy {
                    lock: self.parent.clone(),
                });
            }
            *st = State::Acquiring;
        }
        let result = self.acquire_node(deadline);
        let mut st = self.shared.state.lock();
        match result {
            Ok(Some(lock)) => {
                self.shared.lost.store(false, Ordering::SeqCst);
                let held = Arc::new(HeldWatch {
                    path: lock.path.clone(),
                    shared: self.shared.clone(),
                    in_doubt: AtomicBool::new(false),
                    rzk: self.zkw.recoverable_zookeeper().clone(),
                });
                let watch: Arc<dyn ZooKeeperListener> = held.clone();
                self.zkw.register_listener(watch.clone());
                debug!("acquired {}", lock.path);
                *st = State::Held { lock, watch };
                drop(st);
                // A connection event between the grant and the registration
                // above was not seen by the watch: catch up from the state.
                match self.zkw.state() {
                    s if s.is_terminal() => held.lose("the session ended"),
                    ClientState::Connecting => {
                        held.connection_event(&WatchedEvent::state(KeeperState::Disconnected))
                    }
                    _ => {}
                }
                Ok(true)
            }
            Ok(None) => {
                *st = State::Idle;
                Ok(false)
            }
            Err(e) => {
                *st = State::Idle;
                Err(e)
            }
        }
    }

    /// Creates this attempt's node and waits; every exit that does not hold the
    /// lock removes the node (later, on reconnect, if it cannot now).
    fn acquire_node(&self, deadline: Option<Instant>) -> Result<Option<AcquiredLock>> {
        self.zkw.check_session()?;
        // Every ZooKeeper call of the attempt (retries included) ends by the
        // deadline; a call it cuts short makes the attempt a timeout.
        let cut_short =
            |e: &Error| e.is_retryable() && deadline.is_some_and(|d| Instant::now() >= d);
        let tagged = tagged_prefix(&zkutil::join_znode(&self.parent, K::PREFIX));
        let rzk = self
            .zkw
            .recoverable_zookeeper()
            .with_deadline(deadline.map_or(Deadline::never(), Deadline::at));
        let (path, stat) = match self.create_lock_znode(&rzk, &tagged) {
            Ok(created) => created,
            Err(e) => {
                // The create may have reached the server with its reply lost:
                // find the node by its tag and remove it.
                if e.is_retryable() {
                    self.remove_attempt(Attempt::Tag(tagged));
                }
                return if cut_short(&e) { Ok(None) } else { Err(e) };
            }
        };
        let outcome = match self.wait_for_lock(&rzk, &path, deadline) {
            Err(e) if cut_short(&e) => Ok(Waited::TimedOut),
            other => other,
        };
        match outcome {
            Ok(Waited::Held { watched }) => {
                if !watched && self.shared.listener.read().is_some() {
                    // Watch our node so a deletion (reaping) is told as Lost.
                    match zkutil::set_watch_if_node_exists(&self.zkw, &path) {
                        Ok(true) => {}
                        Ok(false) => return Err(Error::LockLost { path }),
                        Err(e) => {
                            self.remove_attempt(Attempt::Node(path));
                            return Err(e);
                        }
                    }
                }
                let sequence =
                    sequence_of_child(zkutil::get_node_name(&path), K::PREFIX).unwrap_or(0);
                Ok(Some(AcquiredLock {
                    path,
                    version: stat.version,
                    czxid: stat.czxid,
                    sequence,
                }))
            }
            Ok(Waited::TimedOut) => {
                info!("unable to acquire {} in time; removing {path}", self.parent);
                self.remove_attempt(Attempt::Node(path));
                Ok(None)
            }
            Err(e) => {
                self.remove_attempt(Attempt::Node(path));
                Err(e)
            }
        }
    }

    /// Removes a failed attempt's node: waits up to [`REMOVAL_WAIT`] for it, then
    /// lets it finish in the background (or after the reconnect).
    fn remove_attempt(&self, attempt: Attempt) {
        if self.zkw.state().is_terminal() {
            return; // ephemeral: gone with the session
        }
        let (done, removed) = crossbeam_channel::bounded(1);
        remove_async(self.zkw.clone(), attempt, done);
        let _ = removed.recv_timeout(REMOVAL_WAIT);
    }

    /// HBase's `createLockZNode`: an ephemeral sequential child under `tagged`
    /// (`<parent>/<kind><tag>-`), creating the lock znode's parents when missing.
    fn create_lock_znode(
        &self,
        rzk: &RecoverableZooKeeper,
        tagged: &str,
    ) -> Result<(String, Stat)> {
        let create = || {
            rzk.create_sequential_tagged(
                tagged,
                &self.metadata,
                Acl::open_unsafe(),
                CreateMode::EphemeralSequential,
            )
        };
        match create() {
            Err(e) if e.is(ZkError::NoNode) => {
                zkutil::create_with_parents(&self.zkw, &self.parent)?;
                create()
            }
            other => other,
        }
    }

    /// Loops until `my_path` holds the lock or the deadline passes.
    fn wait_for_lock(
        &self,
        rzk: &RecoverableZooKeeper,
        my_path: &str,
        deadline: Option<Instant>,
    ) -> Result<Waited> {
        let my_node = zkutil::get_node_name(my_path);
        if sequence_of_child(my_node, K::PREFIX).is_none() {
            return Err(Error::BadArguments(format!(
                "lock node {my_path} has no sequence number"
            )));
        }
        let own = Arc::new(OwnNodeWatch {
            path: my_path.to_string(),
            rzk: self.zkw.recoverable_zookeeper().clone(),
            waiting_on: Mutex::new(None),
            gone: AtomicBool::new(false),
        });
        let own_listener: Arc<dyn ZooKeeperListener> = own.clone();
        let mut watching_own = false;
        let result = self.wait_rounds(
            rzk,
            my_path,
            deadline,
            &own,
            &own_listener,
            &mut watching_own,
        );
        if watching_own {
            self.zkw.unregister_listener(&own_listener);
        }
        result
    }

    fn wait_rounds(
        &self,
        rzk: &RecoverableZooKeeper,
        my_path: &str,
        deadline: Option<Instant>,
        own: &OwnNodeWatch,
        own_listener: &Arc<dyn ZooKeeperListener>,
        watching_own: &mut bool,
    ) -> Result<Waited> {
        let my_node = zkutil::get_node_name(my_path);
        let lost = || Error::LockLost {
            path: my_path.to_string(),
        };
        loop {
            self.zkw.check_session()?;
            let children = match rzk.get_children(&self.parent, false) {
                Ok(c) => c,
                Err(e) if e.is(ZkError::NoNode) => Vec::new(),
                Err(e) => return Err(e),
            };
            if !children.iter().any(|c| c == my_node) || own.gone.load(Ordering::SeqCst) {
                return Err(lost());
            }
            let Some(to_watch) = K::get_lock_path(my_node, &children) else {
                return Ok(Waited::Held {
                    watched: *watching_own,
                });
            };
            if let Some(holder) = K::lock_holder(my_node, &children) {
                self.handle_lock_metadata(
                    &zkutil::join_znode(&self.parent, &holder),
                    self.handler.as_deref(),
                );
            }
            // Check the deadline before setting any watch.
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Ok(Waited::TimedOut);
            }
            if !*watching_own {
                // Once per attempt: learn at once if our own node is reaped.
                self.zkw.register_listener(own_listener.clone());
                *watching_own = true;
                if !zkutil::set_watch_if_node_exists_rzk(rzk, my_path)? {
                    return Err(lost());
                }
            }
            let watch_path = zkutil::join_znode(&self.parent, &to_watch);
            let listener = Arc::new(DeletionListener::new(&self.zkw, &watch_path));
            let as_listener: Arc<dyn ZooKeeperListener> = listener.clone();
            self.zkw.register_listener(as_listener.clone());
            *own.waiting_on.lock() = Some(listener.clone());
            let waited = (|| {
                if own.gone.load(Ordering::SeqCst) {
                    return Err(lost());
                }
                if !zkutil::set_watch_if_node_exists_rzk(rzk, &watch_path)? {
                    return Ok(true);
                }
                let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                if !listener.await_deletion(remaining) {
                    return Ok(false);
                }
                match listener.exception() {
                    Some(e) => Err(e),
                    None => Ok(true),
                }
            })();
            *own.waiting_on.lock() = None;
            self.zkw.unregister_listener(&as_listener);
            if !waited? {
                return Ok(Waited::TimedOut);
            }
        }
    }

    /// HBase's `handleLockMetadata`: passes `node`'s metadata to `handler`.
    fn handle_lock_metadata(&self, node: &str, handler: Option<&dyn MetadataHandler>) -> bool {
        let Some(handler) = handler else {
            return false;
        };
        match self.zkw.recoverable_zookeeper().get_data(node, false) {
            Ok((data, _)) => {
                handler.handle_metadata(&data);
                true
            }
            Err(e) => {
                debug!("no metadata from {node}: {e}");
                false
            }
        }
    }

    /// The server's clock now: the ctime of a throwaway ephemeral node under the
    /// lock znode (not a lock child: ignored by lock logic).
    fn server_now(&self) -> Result<i64> {
        let rzk = self.zkw.recoverable_zookeeper();
        let probe = zkutil::join_znode(&self.parent, "reap-clock-");
        let (path, stat) = rzk.create2(
            &probe,
            &[],
            Acl::open_unsafe(),
            CreateMode::EphemeralSequential,
        )?;
        if let Err(e) = rzk.delete(&path, None) {
            if !e.is(ZkError::NoNode) {
                warn!("could not remove clock probe {path}: {e}");
            }
        }
        Ok(stat.ctime)
    }
}

/// This kind's lock children, oldest first (in creation order, across a wrap of
/// the sequence: see `kind::distance`).
fn own_kind_by_sequence<K: LockKind>(children: &[String]) -> Vec<(i32, &String)> {
    let mut mine: Vec<(i32, &String)> = children
        .iter()
        .filter(|c| c.starts_with(K::PREFIX))
        .filter_map(|c| sequence_of_child(c, K::PREFIX).map(|s| (s, c)))
        .collect();
    if let Some(&(reference, _)) = mine.first() {
        mine.sort_by_key(|&(s, _)| distance(s, reference));
    }
    mine
}

impl<K: LockKind> InterProcessLock for ZkInterProcessLockBase<K> {
    fn acquire(&self) -> Result<()> {
        self.try_acquire_until(None).map(drop)
    }

    fn try_acquire(&self, timeout: Duration) -> Result<bool> {
        match Self::deadline(Some(timeout)) {
            Some(d) => self.try_acquire_until(Some(d)),
            None => self.try_acquire_until(None),
        }
    }

    fn release(&self) -> Result<()> {
        let (lock, watch) = {
            let st = self.shared.state.lock();
            match &*st {
                State::Held { lock, watch } => (lock.clone(), watch.clone()),
                _ => {
                    return Err(Error::LockNotHeld {
                        lock: self.parent.clone(),
                    })
                }
            }
        };
        // Our own delete must not look like a loss.
        self.zkw.unregister_listener(&watch);
        let lost = |this: &Self| {
            *this.shared.state.lock() = State::Idle;
            Err(Error::LockLost {
                path: lock.path.clone(),
            })
        };
        if self.shared.lost.load(Ordering::SeqCst) {
            // Known lost (expiry, reaping): make sure nothing is left, then say so.
            self.remove_attempt(Attempt::Node(lock.path.clone()));
            return lost(self);
        }
        match self
            .zkw
            .recoverable_zookeeper()
            .delete(&lock.path, Some(lock.version))
        {
            Ok(()) => {
                *self.shared.state.lock() = State::Idle;
                debug!("released {}", lock.path);
                Ok(())
            }
            Err(e) if e.is(ZkError::NoNode) || e.is_fatal() => lost(self),
            Err(e) => {
                // Still held as far as we know (e.g. retries spent): let the caller
                // retry the release.
                self.zkw.register_listener(watch);
                Err(e)
            }
        }
    }

    fn reap_expired_locks(&self, expire_after: Duration) -> Result<()> {
        let rzk = self.zkw.recoverable_zookeeper();
        let children = match rzk.get_children(&self.parent, false) {
            Ok(c) => c,
            Err(e) if e.is(ZkError::NoNode) => return Ok(()),
            Err(e) => return Err(e),
        };
        let now = self.server_now()?;
        let cutoff =
            now.saturating_sub(i64::try_from(expire_after.as_millis()).unwrap_or(i64::MAX));
        let mut deferred = None;
        // Newest first: a waiter is always reaped before the node it waits on, so
        // no waiter of a reaped node wakes in the middle and takes the lock.
        for (_, child) in own_kind_by_sequence::<K>(&children).into_iter().rev() {
            let node = zkutil::join_znode(&self.parent, child);
            match rzk.exists(&node, false) {
                Ok(Some(stat))
                    if stat.ctime < cutoff || (expire_after.is_zero() && stat.ctime <= now) =>
                {
                    info!("reaping lock node {node}");
                    if let Err(e) = rzk.delete(&node, None) {
                        if !e.is(ZkError::NoNode) {
                            warn!("error reaping {node}: {e}");
                            deferred = Some(e);
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    warn!("error reaping {node}: {e}");
                    deferred = Some(e);
                }
            }
        }
        deferred.map_or(Ok(()), Err)
    }

    fn reap_all_locks(&self) -> Result<()> {
        self.reap_expired_locks(Duration::ZERO)
    }

    fn visit_locks(&self, handler: &dyn MetadataHandler) -> Result<()> {
        let children = match self
            .zkw
            .recoverable_zookeeper()
            .get_children(&self.parent, false)
        {
            Ok(c) => c,
            Err(e) if e.is(ZkError::NoNode) => return Ok(()),
            Err(e) => return Err(e),
        };
        for (_, child) in own_kind_by_sequence::<K>(&children) {
            if K::get_lock_path(child, &children).is_none() {
                info!("lock {} is held by {child}", self.parent);
            }
            self.handle_lock_metadata(&zkutil::join_znode(&self.parent, child), Some(handler));
        }
        Ok(())
    }

    fn is_held(&self) -> bool {
        matches!(*self.shared.state.lock(), State::Held { .. })
            && !self.shared.lost.load(Ordering::SeqCst)
            && !self.zkw.state().is_terminal()
    }

    fn acquired_lock(&self) -> Option<AcquiredLock> {
        match &*self.shared.state.lock() {
            State::Held { lock, .. } => Some(lock.clone()),
            _ => None,
        }
    }
}

impl<K: LockKind> Drop for ZkInterProcessLockBase<K> {
    fn drop(&mut self) {
        // A held lock whose instance goes away: release best-effort rather than
        // hold the lock until the session ends.
        if matches!(*self.shared.state.lock(), State::Held { .. }) {
            if let Err(e) = self.release() {
                warn!("releasing {} on drop failed: {e}", self.parent);
            }
        }
    }
}
