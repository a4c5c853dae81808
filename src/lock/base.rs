//! `ZkInterProcessLockBase`: HBase's `ZKInterProcessLockBase`, generic over the
//! lock kind.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::{Mutex, RwLock};

use super::kind::sequence_of_child;
use super::kind::LockKind;
use super::{AcquiredLock, InterProcessLock, LockEvent, LockListener, MetadataHandler};
use crate::client::{Acl, CreateMode, EventType, KeeperState, WatchedEvent};
use crate::error::{Error, Result, ZkError};
use crate::listener::ZooKeeperListener;
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
    lost: std::sync::atomic::AtomicBool,
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
    in_doubt: std::sync::atomic::AtomicBool,
}

impl HeldWatch {
    fn lose(&self, why: &str) {
        use std::sync::atomic::Ordering;
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

    fn connection_event(&self, event: &WatchedEvent) {
        use std::sync::atomic::Ordering;
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
/// get children, delete); each wait adds one (an `exists` watch).
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
                lost: std::sync::atomic::AtomicBool::new(false),
                listener: RwLock::new(None),
            }),
            _kind: PhantomData,
        })
    }

    /// Tells `listener` what happens to the lock while held: in doubt on
    /// disconnect, restored on reconnect, lost on expiry or when its node is
    /// deleted (seen through this process's watches).
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
                self.shared
                    .lost
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                let watch: Arc<dyn ZooKeeperListener> = Arc::new(HeldWatch {
                    path: lock.path.clone(),
                    shared: self.shared.clone(),
                    in_doubt: std::sync::atomic::AtomicBool::new(false),
                });
                self.zkw.register_listener(watch.clone());
                debug!("acquired {}", lock.path);
                *st = State::Held { lock, watch };
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
    /// lock deletes the node.
    fn acquire_node(&self, deadline: Option<Instant>) -> Result<Option<AcquiredLock>> {
        self.zkw.check_session()?;
        let (path, stat) = self.create_lock_znode()?;
        let outcome = self.wait_for_lock(&path, deadline);
        match outcome {
            Ok(true) => {
                let sequence =
                    sequence_of_child(zkutil::get_node_name(&path), K::PREFIX).unwrap_or(0);
                Ok(Some(AcquiredLock {
                    path,
                    version: stat.version,
                    czxid: stat.czxid,
                    sequence,
                }))
            }
            Ok(false) => {
                info!("unable to acquire {} in time; removing {path}", self.parent);
                self.delete_own_node(&path);
                Ok(None)
            }
            Err(e) => {
                self.delete_own_node(&path);
                Err(e)
            }
        }
    }

    fn delete_own_node(&self, path: &str) {
        match self.zkw.recoverable_zookeeper().delete(path, None) {
            Ok(()) => {}
            Err(e) if e.is(ZkError::NoNode) => {}
            // The node is ephemeral: the session's end removes it anyway.
            Err(e) if e.is_fatal() => debug!("could not remove {path}: {e}"),
            Err(e) => warn!("could not remove lock node {path}: {e}"),
        }
    }

    /// HBase's `createLockZNode`: an ephemeral sequential child, creating the lock
    /// znode's parents when missing.
    fn create_lock_znode(&self) -> Result<(String, crate::client::Stat)> {
        let prefix = zkutil::join_znode(&self.parent, K::PREFIX);
        let rzk = self.zkw.recoverable_zookeeper();
        let create = || {
            rzk.create2(
                &prefix,
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

    /// Loops until `my_path` holds the lock (`true`) or the deadline passes
    /// (`false`).
    fn wait_for_lock(&self, my_path: &str, deadline: Option<Instant>) -> Result<bool> {
        let my_node = zkutil::get_node_name(my_path);
        if sequence_of_child(my_node, K::PREFIX).is_none() {
            return Err(Error::BadArguments(format!(
                "lock node {my_path} has no sequence number"
            )));
        }
        let rzk = self.zkw.recoverable_zookeeper();
        loop {
            self.zkw.check_session()?;
            let children = match rzk.get_children(&self.parent, false) {
                Ok(c) => c,
                Err(e) if e.is(ZkError::NoNode) => Vec::new(),
                Err(e) => return Err(e),
            };
            if !children.iter().any(|c| c == my_node) {
                return Err(Error::LockLost {
                    path: my_path.to_string(),
                });
            }
            let Some(to_watch) = K::get_lock_path(my_node, &children) else {
                return Ok(true);
            };
            if let Some(holder) = K::lock_holder(my_node, &children) {
                self.handle_lock_metadata(
                    &zkutil::join_znode(&self.parent, &holder),
                    self.handler.as_deref(),
                );
            }
            let watch_path = zkutil::join_znode(&self.parent, &to_watch);
            let listener = Arc::new(DeletionListener::new(&self.zkw, &watch_path));
            let as_listener: Arc<dyn ZooKeeperListener> = listener.clone();
            self.zkw.register_listener(as_listener.clone());
            let waited = (|| {
                if !zkutil::set_watch_if_node_exists(&self.zkw, &watch_path)? {
                    return Ok(true);
                }
                let remaining = match deadline {
                    None => None,
                    Some(d) => match d.checked_duration_since(Instant::now()) {
                        Some(r) if !r.is_zero() => Some(r),
                        _ => return Ok(false),
                    },
                };
                if !listener.await_deletion(remaining) {
                    return Ok(false);
                }
                match listener.exception() {
                    Some(e) => Err(e),
                    None => Ok(true),
                }
            })();
            self.zkw.unregister_listener(&as_listener);
            if !waited? {
                return Ok(false);
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

/// This kind's lock children with their sequence, oldest first.
fn own_kind_by_sequence<K: LockKind>(children: &[String]) -> Vec<(i32, &String)> {
    let mut mine: Vec<(i32, &String)> = children
        .iter()
        .filter(|c| c.starts_with(K::PREFIX))
        .filter_map(|c| sequence_of_child(c, K::PREFIX).map(|s| (s, c)))
        .collect();
    mine.sort();
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
        if self.shared.lost.load(std::sync::atomic::Ordering::SeqCst) {
            // Known lost (expiry, reaping): make sure nothing is left, then say so.
            if !self.zkw.state().is_terminal() {
                self.delete_own_node(&lock.path);
            }
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
            Err(e)
                if e.is(ZkError::NoNode)
                    || e.is(ZkError::SessionExpired)
                    || matches!(e, Error::Closed) =>
            {
                lost(self)
            }
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
            && !self.shared.lost.load(std::sync::atomic::Ordering::SeqCst)
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
