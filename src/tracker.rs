//! [`ZooKeeperNodeTracker`] and [`DeletionListener`]: HBase's listeners that
//! follow one znode, the first to know its data, the second to wait for its
//! deletion.
//!
//! Both hold a clone of the watcher's [`RecoverableZooKeeper`], never of the
//! [`ZooKeeperWatcher`] itself: the watcher's listener registry holds them, so a
//! watcher clone inside would be an `Arc` cycle keeping the session alive after
//! the application dropped its last handle.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, error, warn};
use parking_lot::{Condvar, Mutex};

use crate::client::{KeeperState, WatchedEvent};
use crate::error::{Error, Result, ZkError};
use crate::listener::{Abortable, ZooKeeperListener};
use crate::recoverable::RecoverableZooKeeper;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// The error a connection-state event means for a waiter, if the session is
/// over: `Expired` → `SessionExpired`, `AuthFailed` → `AuthFailed`, `Closed` →
/// [`Error::Closed`]. `Disconnected` is not an end: the client reconnects and
/// re-sets every watch.
fn session_end(state: KeeperState) -> Option<Error> {
    match state {
        KeeperState::Expired => Some(Error::zk_code(ZkError::SessionExpired)),
        KeeperState::AuthFailed => Some(Error::zk_code(ZkError::AuthFailed)),
        KeeperState::Closed => Some(Error::Closed),
        _ => None,
    }
}

/// `now + timeout`, `None` (wait forever) when that overflows.
fn deadline_after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

// ---------------------------------------------------------------------------
// ZooKeeperNodeTracker
// ---------------------------------------------------------------------------

/// Tracks the existence and data of one znode: HBase's `ZooKeeperNodeTracker`.
///
/// After [`start`](Self::start) the tracker is a listener of the watcher (found by
/// its path) and always keeps a watch on the node: a data watch while it exists,
/// an exists watch while it does not. It reacts as HBase's does:
///
/// | event | reaction |
/// |---|---|
/// | `NodeCreated`, `NodeDataChanged` | read the data with a watch; if the node is gone meanwhile, handle it as a deletion |
/// | `NodeDeleted` | set an exists watch; if the node is back already, read it as a creation, else forget the data |
/// | `Expired`, `AuthFailed`, `Closed` | wake the threads in [`block_until_available`](Self::block_until_available) with the error |
///
/// A ZooKeeper error while tracking (after the `RecoverableZooKeeper`'s retries)
/// is passed to the [`Abortable`] given at construction, as in HBase (an error
/// because the watcher was closed is only logged).
///
/// Reads made by application threads (`start`, `get_data(true)`,
/// `block_until_available(.., true)`) never overwrite what an event handler that
/// began after them found; any change after the last read fires the watch that
/// read left, so the tracker always converges on the node's state.
///
/// # Threads and cloning
/// `Send + Sync`; share it with an `Arc`. Waiting uses a condition variable (no
/// polling). Dropping the tracker stops it.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use zklock::{LoggingAbortable, ZooKeeperNodeTracker, ZooKeeperWatcher};
///
/// let zkw = ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// let tracker = ZooKeeperNodeTracker::new(&zkw, "/app/master", Arc::new(LoggingAbortable::new()));
/// tracker.start()?;
/// match tracker.block_until_available(Duration::from_secs(10), false)? {
///     Some(data) => println!("master: {}", String::from_utf8_lossy(&data)),
///     None => println!("no master yet"),
/// }
/// tracker.stop();
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct ZooKeeperNodeTracker {
    zkw: ZooKeeperWatcher,
    shared: Arc<TrackerShared>,
    /// Serializes `start` and `stop` (registration), never held over a call to
    /// ZooKeeper or a listener.
    lifecycle: Mutex<()>,
}

/// The part of the tracker the watcher's registry holds.
struct TrackerShared {
    rzk: RecoverableZooKeeper,
    node: String,
    abortable: Arc<dyn Abortable>,
    state: Mutex<TrackerState>,
    changed: Condvar,
}

#[derive(Default)]
struct TrackerState {
    data: Option<Vec<u8>>,
    registered: bool,
    started: bool,
    stopped: bool,
    /// Bumped when an event handler begins: an application thread's read that
    /// started before is stale and is not stored.
    epoch: u64,
    session_error: Option<Error>,
}

impl fmt::Debug for ZooKeeperNodeTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.state.lock();
        f.debug_struct("ZooKeeperNodeTracker")
            .field("node", &self.shared.node)
            .field("started", &st.started)
            .field("stopped", &st.stopped)
            .field("data_len", &st.data.as_ref().map(Vec::len))
            .finish()
    }
}

impl ZooKeeperNodeTracker {
    /// `new ZooKeeperNodeTracker(watcher, node, abortable)`: a tracker of `node`,
    /// not started yet. `abortable` hears of ZooKeeper errors while tracking.
    pub fn new(
        zkw: &ZooKeeperWatcher,
        node: &str,
        abortable: Arc<dyn Abortable>,
    ) -> ZooKeeperNodeTracker {
        ZooKeeperNodeTracker {
            zkw: zkw.clone(),
            shared: Arc::new(TrackerShared {
                rzk: zkw.recoverable_zookeeper().clone(),
                node: node.to_string(),
                abortable,
                state: Mutex::new(TrackerState::default()),
                changed: Condvar::new(),
            }),
            lifecycle: Mutex::new(()),
        }
    }

    fn as_listener(&self) -> Arc<dyn ZooKeeperListener> {
        self.shared.clone()
    }

    /// `ZooKeeperNodeTracker.start`: registers the tracker as a listener (by its
    /// path) and reads the node, leaving a watch whether or not it exists. A
    /// second call while started does nothing; a call after
    /// [`stop`](Self::stop) starts tracking again.
    ///
    /// # Errors
    /// `BadArguments` for a bad path; a ZooKeeper error of the first read, which
    /// is also passed to the `Abortable` (as HBase does). The tracker stays
    /// registered.
    pub fn start(&self) -> Result<()> {
        crate::client::validate_path(&self.shared.node)?;
        {
            let _lifecycle = self.lifecycle.lock();
            let register = {
                let mut st = self.shared.state.lock();
                if st.started && !st.stopped {
                    return Ok(());
                }
                st.started = true;
                st.stopped = false;
                !std::mem::replace(&mut st.registered, true)
            };
            if register {
                self.zkw.register_listener(self.as_listener());
            }
        }
        self.shared.refresh(true).map(drop).map_err(|e| {
            self.shared
                .abort("unexpected exception during initialization, aborting", e)
        })
    }

    /// `ZooKeeperNodeTracker.stop`: stops tracking, unregisters the listener and
    /// wakes every thread in [`block_until_available`](Self::block_until_available)
    /// (they return what is known, `None` if the node was not available).
    /// Idempotent. The last known data stays readable with `get_data(false)`.
    pub fn stop(&self) {
        let _lifecycle = self.lifecycle.lock();
        let unregister = {
            let mut st = self.shared.state.lock();
            st.stopped = true;
            self.shared.changed.notify_all();
            std::mem::replace(&mut st.registered, false)
        };
        if unregister {
            self.zkw.unregister_listener(&self.as_listener());
        }
    }

    /// HBase's `stopped` flag: whether [`stop`](Self::stop) was called (and no
    /// `start` since).
    pub fn is_stopped(&self) -> bool {
        self.shared.state.lock().stopped
    }

    /// `ZooKeeperNodeTracker.blockUntilAvailable(timeout, refresh)`: the node's
    /// data, waiting up to `timeout` for the node to exist. With `refresh`, reads
    /// the node from ZooKeeper first instead of trusting the tracked state.
    ///
    /// Returns `Some(data)` once the node exists, `None` when `timeout` passes or
    /// the tracker is stopped first. A huge timeout (`Duration::MAX`) waits until
    /// one of those or the session's end. `Duration::ZERO` does not wait.
    ///
    /// # Errors
    /// `BadArguments` if the tracker was never started; `SessionExpired`,
    /// `AuthFailed` or [`Error::Closed`] when the session is or becomes unusable
    /// (the wait ends at once); with `refresh`, a ZooKeeper error of the read
    /// (also passed to the `Abortable`).
    pub fn block_until_available(
        &self,
        timeout: Duration,
        refresh: bool,
    ) -> Result<Option<Vec<u8>>> {
        let deadline = deadline_after(timeout);
        if !self.shared.state.lock().started {
            return Err(Error::BadArguments(format!(
                "tracker of {} is not started",
                self.shared.node
            )));
        }
        self.zkw.check_session()?;
        if refresh {
            self.shared.refresh(false).map_err(|e| {
                self.shared
                    .abort("unexpected exception handling blockUntilAvailable", e)
            })?;
        }
        let mut st = self.shared.state.lock();
        loop {
            if let Some(data) = &st.data {
                return Ok(Some(data.clone()));
            }
            if st.stopped {
                return Ok(None);
            }
            if let Some(e) = &st.session_error {
                return Err(e.clone());
            }
            match deadline {
                None => self.shared.changed.wait(&mut st),
                Some(d) => {
                    if self.shared.changed.wait_until(&mut st, d).timed_out() {
                        return Ok(st.data.clone());
                    }
                }
            }
        }
    }

    /// `ZooKeeperNodeTracker.getData(refresh)`: the node's data, `None` if it
    /// does not exist (as far as the tracker knows). With `refresh`, reads it from
    /// ZooKeeper (with a watch) and returns what ZooKeeper said; on a ZooKeeper
    /// error, the `Abortable` is told and the tracked data is returned.
    pub fn get_data(&self, refresh: bool) -> Option<Vec<u8>> {
        if refresh {
            match self.shared.refresh(false) {
                Ok(data) => return data,
                Err(e) => {
                    self.shared
                        .abort("unexpected exception handling getData", e);
                }
            }
        }
        self.shared.state.lock().data.clone()
    }

    /// `ZooKeeperNodeTracker.getNode`: the tracked path.
    pub fn get_node(&self) -> &str {
        &self.shared.node
    }

    /// `ZooKeeperNodeTracker.checkIfBaseNodeAvailable`: whether the watcher's
    /// base znode exists. A ZooKeeper error is passed to the `Abortable` and gives
    /// `false` (HBase answers `true` then; zklock does not claim what it could not
    /// check).
    pub fn check_if_base_node_available(&self) -> bool {
        let base = self.zkw.base_znode();
        match zkutil::check_exists(&self.zkw, base) {
            Ok(version) => version.is_some(),
            Err(e) => {
                self.shared.abort(
                    &format!("exception while checking if basenode ({base}) exists in ZooKeeper"),
                    e,
                );
                false
            }
        }
    }
}

impl Drop for ZooKeeperNodeTracker {
    fn drop(&mut self) {
        self.stop();
    }
}

impl TrackerShared {
    /// Tells the abortable of `e` (unless the handle was closed on purpose);
    /// returns `e`.
    fn abort(&self, why: &str, e: Error) -> Error {
        if matches!(e, Error::Closed) {
            debug!("tracker of {}: {why}: {e}", self.node);
        } else {
            warn!("tracker of {}: {why}: {e}", self.node);
            self.abortable.abort(why, Some(&e));
        }
        e
    }

    /// Reads the node and leaves a watch in every case: its data and a data watch
    /// while it exists, `None` and an exists watch while it does not. With
    /// `check_first`, starts with the exists check (HBase's `start` and
    /// `nodeDeleted`), else with the data read (`nodeCreated`).
    fn read_watched(&self, check_first: bool) -> Result<Option<Vec<u8>>> {
        let mut check = check_first;
        loop {
            if check && !zkutil::watch_and_check_exists_rzk(&self.rzk, &self.node)? {
                return Ok(None);
            }
            if let Some((data, _)) = zkutil::get_data_and_watch_rzk(&self.rzk, &self.node)? {
                return Ok(Some(data));
            }
            // It existed but does not now: make sure a watch is set.
            debug!(
                "znode {} vanished while reading it; checking again",
                self.node
            );
            check = true;
        }
    }

    /// An application thread's read: stored unless an event handler began
    /// meanwhile (its read is at least as new).
    fn refresh(&self, check_first: bool) -> Result<Option<Vec<u8>>> {
        let epoch = self.state.lock().epoch;
        let data = self.read_watched(check_first)?;
        let mut st = self.state.lock();
        if st.epoch == epoch {
            st.data.clone_from(&data);
            self.changed.notify_all();
        }
        Ok(data)
    }

    /// An event on the node: re-read it and store what was found.
    fn on_event(&self, what: &str, check_first: bool) {
        {
            let mut st = self.state.lock();
            if st.stopped || !st.started {
                return;
            }
            st.epoch += 1;
        }
        match self.read_watched(check_first) {
            Ok(data) => {
                let mut st = self.state.lock();
                st.data = data;
                self.changed.notify_all();
            }
            Err(e) => {
                self.abort(&format!("unexpected exception handling {what} event"), e);
            }
        }
    }
}

impl ZooKeeperListener for TrackerShared {
    fn node_created(&self, path: &str) {
        if path == self.node {
            self.on_event("nodeCreated", false);
        }
    }

    fn node_deleted(&self, path: &str) {
        if path == self.node {
            self.on_event("nodeDeleted", true);
        }
    }

    fn node_data_changed(&self, path: &str) {
        if path == self.node {
            self.on_event("nodeDataChanged", false);
        }
    }

    fn connection_event(&self, event: &WatchedEvent) {
        if let Some(e) = session_end(event.keeper_state) {
            let mut st = self.state.lock();
            st.session_error.get_or_insert(e);
            self.changed.notify_all();
        }
    }

    fn path(&self) -> Option<&str> {
        Some(&self.node)
    }
}

// ---------------------------------------------------------------------------
// DeletionListener
// ---------------------------------------------------------------------------

/// Waits for one znode's deletion: HBase's `DeletionListener`, with its
/// `CountDownLatch` built in.
///
/// A lock waiter registers it, sets a watch with
/// [`zkutil::set_watch_if_node_exists`] and, if the node exists, waits with
/// [`await_deletion`](Self::await_deletion):
///
/// | event on the watched path | effect |
/// |---|---|
/// | `NodeDeleted` | released |
/// | `NodeDataChanged` | the watch is set again with `set_watch_if_node_exists`; released if the node is gone; an error is recorded ([`exception`](Self::exception)) and releases |
/// | `Expired`, `AuthFailed`, `Closed` (any path) | released with `SessionExpired`, `AuthFailed` or [`Error::Closed`] recorded |
/// | `Disconnected` | nothing: the client re-sets the watch when it reconnects |
///
/// The first recorded error is kept. The latch never closes again once released.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use zklock::{zkutil, DeletionListener, ZooKeeperListener, ZooKeeperWatcher};
///
/// let zkw = ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// let listener = Arc::new(DeletionListener::new(&zkw, "/app/lock/write-0000000007"));
/// let registered: Arc<dyn ZooKeeperListener> = listener.clone();
/// zkw.register_listener(registered.clone());
/// if zkutil::set_watch_if_node_exists(&zkw, listener.path_to_watch())? {
///     listener.await_deletion(Some(Duration::from_secs(30)));
/// }
/// zkw.unregister_listener(&registered);
/// if let Some(e) = listener.exception() {
///     return Err(e);
/// }
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct DeletionListener {
    rzk: RecoverableZooKeeper,
    path_to_watch: String,
    latch: Mutex<Latch>,
    released: Condvar,
}

#[derive(Default)]
struct Latch {
    released: bool,
    exception: Option<Error>,
}

impl fmt::Debug for DeletionListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let latch = self.latch.lock();
        f.debug_struct("DeletionListener")
            .field("path_to_watch", &self.path_to_watch)
            .field("released", &latch.released)
            .field("exception", &latch.exception)
            .finish()
    }
}

impl DeletionListener {
    /// `new DeletionListener(zkw, pathToWatch, latch)`: a listener for the
    /// deletion of `path_to_watch`, not released. Register it on `zkw` yourself.
    pub fn new(zkw: &ZooKeeperWatcher, path_to_watch: &str) -> DeletionListener {
        DeletionListener::with_recoverable(zkw.recoverable_zookeeper().clone(), path_to_watch)
    }

    fn with_recoverable(rzk: RecoverableZooKeeper, path_to_watch: &str) -> DeletionListener {
        DeletionListener {
            rzk,
            path_to_watch: path_to_watch.to_string(),
            latch: Mutex::new(Latch::default()),
            released: Condvar::new(),
        }
    }

    /// HBase's `pathToWatch`: the watched path.
    pub fn path_to_watch(&self) -> &str {
        &self.path_to_watch
    }

    /// `deletedLatch.await(timeout)`: waits until released (deletion, recorded
    /// error, session end) or until `timeout` passes; `None` waits without a
    /// bound (as does a timeout too large for an `Instant`). `true` if released.
    pub fn await_deletion(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.and_then(deadline_after);
        let mut latch = self.latch.lock();
        while !latch.released {
            match deadline {
                None => self.released.wait(&mut latch),
                Some(d) => {
                    if self.released.wait_until(&mut latch, d).timed_out() {
                        return latch.released;
                    }
                }
            }
        }
        true
    }

    /// `deletedLatch.getCount() == 0`: whether the latch is released.
    pub fn is_released(&self) -> bool {
        self.latch.lock().released
    }

    /// `DeletionListener.hasException`: whether an error was recorded.
    pub fn has_exception(&self) -> bool {
        self.latch.lock().exception.is_some()
    }

    /// `DeletionListener.getException`: the recorded error (re-setting the
    /// watch failed, or the session ended), if any.
    pub fn exception(&self) -> Option<Error> {
        self.latch.lock().exception.clone()
    }

    pub(crate) fn release(&self, exception: Option<Error>) {
        let mut latch = self.latch.lock();
        if latch.exception.is_none() {
            latch.exception = exception;
        }
        latch.released = true;
        self.released.notify_all();
    }
}

impl ZooKeeperListener for DeletionListener {
    fn node_deleted(&self, path: &str) {
        if path == self.path_to_watch {
            debug!("processing delete on {path}");
            self.release(None);
        }
    }

    fn node_data_changed(&self, path: &str) {
        if path != self.path_to_watch {
            return;
        }
        match zkutil::set_watch_if_node_exists_rzk(&self.rzk, path) {
            Ok(true) => {}
            Ok(false) => self.release(None),
            Err(e) => {
                error!("error when re-setting the watch on {path}: {e}");
                self.release(Some(e));
            }
        }
    }

    fn connection_event(&self, event: &WatchedEvent) {
        if let Some(e) = session_end(event.keeper_state) {
            debug!(
                "session ended ({:?}) while waiting for the deletion of {}",
                event.keeper_state, self.path_to_watch
            );
            self.release(Some(e));
        }
    }

    fn path(&self) -> Option<&str> {
        Some(&self.path_to_watch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_end_maps_terminal_states_only() {
        assert!(session_end(KeeperState::Expired).is_some_and(|e| e.is(ZkError::SessionExpired)));
        assert!(session_end(KeeperState::AuthFailed).is_some_and(|e| e.is(ZkError::AuthFailed)));
        assert!(matches!(
            session_end(KeeperState::Closed),
            Some(Error::Closed)
        ));
        assert!(session_end(KeeperState::Disconnected).is_none());
        assert!(session_end(KeeperState::SyncConnected).is_none());
    }

    #[test]
    fn huge_timeouts_mean_forever() {
        assert!(deadline_after(Duration::MAX).is_none());
        assert!(deadline_after(Duration::from_secs(1)).is_some());
    }

    /// A listener on a client that never connects (nothing listens on port 1):
    /// enough for the latch, which needs no server.
    fn offline_listener(path: &str) -> DeletionListener {
        let zk = crate::client::ZooKeeper::builder("127.0.0.1:1")
            .start(|_e: WatchedEvent| {})
            .unwrap();
        let rzk = RecoverableZooKeeper::new(zk, "test", crate::retry::RetryConfig::default());
        DeletionListener::with_recoverable(rzk, path)
    }

    #[test]
    fn deletion_of_the_watched_path_releases_waiters() {
        let l = Arc::new(offline_listener("/a/b"));
        assert_eq!(l.path(), Some("/a/b"));
        l.node_deleted("/a/other");
        l.node_created("/a/b");
        assert!(!l.is_released());
        assert!(!l.await_deletion(Some(Duration::from_millis(30))));
        assert!(!l.await_deletion(Some(Duration::ZERO)));
        let waiter = {
            let l = l.clone();
            std::thread::spawn(move || l.await_deletion(None))
        };
        l.node_deleted("/a/b");
        assert!(waiter.join().unwrap());
        assert!(l.is_released());
        assert!(!l.has_exception());
        assert!(l.await_deletion(Some(Duration::ZERO)), "stays released");
    }

    #[test]
    fn session_end_releases_with_the_first_error() {
        let l = offline_listener("/x");
        l.connection_event(&WatchedEvent::state(KeeperState::Disconnected));
        l.connection_event(&WatchedEvent::state(KeeperState::SyncConnected));
        assert!(!l.is_released(), "a disconnect is not an end");
        l.connection_event(&WatchedEvent::state(KeeperState::Expired));
        assert!(l.is_released());
        l.connection_event(&WatchedEvent::state(KeeperState::Closed));
        assert!(l.exception().is_some_and(|e| e.is(ZkError::SessionExpired)));
        let l = offline_listener("/x");
        l.connection_event(&WatchedEvent::state(KeeperState::Closed));
        assert!(matches!(l.exception(), Some(Error::Closed)));
        assert!(l.await_deletion(None));
    }

    #[test]
    fn types_are_send_sync() {
        fn check<T: Send + Sync + 'static>() {}
        check::<ZooKeeperNodeTracker>();
        check::<DeletionListener>();
    }
}
