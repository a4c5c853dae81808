//! ZooKeeper's `org.apache.zookeeper.recipes.lock.WriteLock`, without its lost
//! wake-up.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::{Condvar, Mutex};

use crate::background::{remove_and_wait, remove_in_background};
use crate::error::{Error, Result, ZkError};
use crate::sequence::number_after_last;
use crate::types::{Acl, CreateMode, EventType, KeeperState, WatchedEvent, Watcher};
use crate::watcher::{SessionHook, WeakZooKeeperWatcher, ZooKeeperWatcher};
use crate::zkutil;

/// ZooKeeper's `org.apache.zookeeper.recipes.lock.LockListener`: told when a
/// [`WriteLock`] becomes owner and when it lets go.
///
/// Called on the client's event thread (or on the thread calling
/// [`WriteLock::lock`] when the lock is free at once): keep it short and never
/// block on ZooKeeper in it.
pub trait LockListener: Send + Sync {
    /// Java's `lockAcquired()`: this instance now owns the lock.
    fn lock_acquired(&self);
    /// Java's `lockReleased()`: this instance no longer owns the lock.
    ///
    /// zklock differs here: told only when the instance *was* owner (Java tells
    /// every `unlock()` of an instance with a node), and also when the session
    /// ends or the node is deleted while owner (Java says nothing then).
    fn lock_released(&self);
}

/// A step of a [`WriteLock`] round, told to a test hook (feature `testing`).
#[cfg(feature = "testing")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteLockStep {
    /// The directory was listed; the instance is not first. The path given is
    /// the predecessor about to be watched: a hook deleting it here forces the
    /// race the Java recipe loses.
    Watching,
    /// The instance became owner (path: its node).
    Owner,
}

#[cfg(feature = "testing")]
type StepHook = Arc<dyn Fn(WriteLockStep, &str) + Send + Sync>;

#[derive(Debug, Default)]
struct St {
    /// Our node (full path), once created.
    id: Option<String>,
    owner: bool,
    /// Bumped by `unlock`/`close`: answers of earlier rounds are ignored.
    generation: u64,
    /// Rounds that reached an outcome (owner, watching, failed).
    rounds: u64,
    /// Why the attempt failed (session ended, node deleted).
    failed: Option<ZkError>,
}

struct Inner {
    dir: String,
    zkw: WeakZooKeeperWatcher,
    st: Mutex<St>,
    cv: Condvar,
    listener: Mutex<Option<Arc<dyn LockListener>>>,
    /// The instance's one per-watch watcher (holding it weakly): the client
    /// registers it once per path however many rounds pass it.
    watcher: Arc<dyn Watcher>,
    me: Weak<Inner>,
    #[cfg(feature = "testing")]
    hook: Mutex<Option<StepHook>>,
}

/// ZooKeeper's `org.apache.zookeeper.recipes.lock.WriteLock`: an exclusive lock
/// on a directory shared with Java's recipe.
///
/// # Layout (Java's)
/// Each instance creates the ephemeral sequential child `x-<sessionId>-<seq>`
/// of `dir` (session id in decimal, 10-digit sequence), reusing a child of its
/// own session when one exists (Java's `findPrefixInChildren`). Children are
/// ordered as Java's `ZNodeName` orders them: by the number after the last `-`,
/// then by prefix. The first child owns the lock; every other watches only its
/// immediate predecessor.
///
/// As in Java, two instances on one directory **in one session** share a node
/// (the session is the owner): contend with one session per contender.
///
/// # Waiting
/// [`lock`](Self::lock) is non-blocking like Java's: it returns whether the
/// instance owns the lock now; otherwise it watches the predecessor and the
/// [`LockListener`] is told `lock_acquired` when it becomes owner.
/// [`lock_blocking`](Self::lock_blocking) waits (bounded) on top.
///
/// zklock differs here: the watch is a per-watch watcher set with a `getData`
/// on the predecessor. When the predecessor is already gone at that call, the
/// instance lists the directory again instead of returning (Java's recipe logs
/// "Could not find the stats for less than me" and then waits for a watch it
/// never set: a lost wake-up, which deadlocks 8 contenders within seconds).
/// The rounds after a wake-up run as asynchronous calls answered on the event
/// thread (Java re-runs the blocking `lock()` on its event thread); a round cut
/// by a connection loss resumes after the reconnect (Java's `ProtocolSupport`
/// retries; the session keeps the node). A session that ends fails the attempt
/// with `SessionExpired`/`Closed` and tells an owner's listener `lock_released`.
/// An owner watches its own node (one `exists` per grant, which Java does not
/// do), so a deletion by someone else ends ownership too.
///
/// # Dropping
/// Dropping an instance with a node removes it in the background: the drop
/// never waits on the network.
pub struct WriteLock {
    zkw: ZooKeeperWatcher,
    acl: Vec<Acl>,
    data: Vec<u8>,
    inner: Arc<Inner>,
    hook_id: Option<u64>,
}

impl std::fmt::Debug for WriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteLock")
            .field("dir", &self.inner.dir)
            .field("state", &*self.inner.st.lock())
            .finish()
    }
}

/// The per-watch watcher of one instance: a predecessor's deletion starts a new
/// round (asynchronous calls, never blocking the event thread); the end of the
/// session fails the attempt.
struct PredecessorWatcher(Weak<Inner>);

impl Watcher for PredecessorWatcher {
    fn process(&self, event: WatchedEvent) {
        let Some(inner) = self.0.upgrade() else {
            return;
        };
        if event.event_type == EventType::None {
            return inner.session_event(event.keeper_state);
        }
        let (generation, own) = {
            let st = inner.st.lock();
            if st.id.is_none() || st.failed.is_some() {
                return;
            }
            (st.generation, st.owner && st.id == event.path)
        };
        if own {
            match event.event_type {
                EventType::NodeDeleted => inner.fail(generation, ZkError::NoNode),
                _ => inner.watch_own(generation),
            }
        } else if !inner.st.lock().owner {
            inner.round(generation);
        }
    }
}

impl SessionHook for Inner {
    fn session_event(&self, state: KeeperState) {
        let code = match state {
            KeeperState::Expired => ZkError::SessionExpired,
            KeeperState::AuthFailed => ZkError::AuthFailed,
            KeeperState::Closed => ZkError::SessionExpired,
            _ => return,
        };
        let generation = self.st.lock().generation;
        self.fail(generation, code);
    }
}

impl Inner {
    #[cfg(feature = "testing")]
    fn step(&self, step: WriteLockStep, path: &str) {
        let hook = self.hook.lock().clone();
        if let Some(hook) = hook {
            hook(step, path);
        }
    }

    /// Lists the directory (asynchronously) and acts on it.
    fn round(&self, generation: u64) {
        let (Some(zk), Some(me)) = (self.zkw.zookeeper(), self.me.upgrade()) else {
            return;
        };
        zk.get_children_async(&self.dir, None, move |r| me.listed(generation, r));
    }

    /// Runs `round` again after the reconnect, or fails when the session ends.
    fn after_reconnect(&self, generation: u64) {
        let Some(me) = self.me.upgrade() else { return };
        crate::background::on_reconnect(&self.zkw, move |connected| {
            if connected {
                me.round(generation);
            } else {
                me.fail(generation, ZkError::SessionExpired);
            }
        });
    }

    fn listed(&self, generation: u64, r: Result<Vec<String>>) {
        let children = match r {
            Ok(c) => c,
            Err(e) if e.is_retryable() => return self.after_reconnect(generation),
            Err(e) => return self.fail(generation, e.code().unwrap_or(ZkError::SystemError)),
        };
        let my_name = {
            let st = self.st.lock();
            if st.generation != generation || st.owner {
                return;
            }
            match &st.id {
                Some(id) => zkutil::get_node_name(id).to_string(),
                None => return,
            }
        };
        if !children.contains(&my_name) {
            // Deleted by someone else (or the session ended).
            return self.fail(generation, ZkError::NoNode);
        }
        let sorted = sort_like_znode_name(&children);
        let pos = sorted.iter().position(|c| **c == my_name).unwrap_or(0);
        if pos == 0 {
            return self.become_owner(generation);
        }
        let predecessor = zkutil::join_znode(&self.dir, sorted[pos - 1]);
        #[cfg(feature = "testing")]
        self.step(WriteLockStep::Watching, &predecessor);
        let (Some(zk), Some(me)) = (self.zkw.zookeeper(), self.me.upgrade()) else {
            return;
        };
        let watcher = me.watcher.clone();
        zk.get_data_async(&predecessor.clone(), Some(watcher), move |r| match r {
            Ok(_) => {
                debug!("{}: waiting for {predecessor}", me.dir);
                me.round_done(generation);
            }
            // Gone before the watch: look again (Java's lost wake-up).
            Err(e) if e.is(ZkError::NoNode) => {
                debug!("{predecessor} already gone: listing again");
                me.round(generation)
            }
            Err(e) if e.is_retryable() => me.after_reconnect(generation),
            Err(e) => me.fail(generation, e.code().unwrap_or(ZkError::SystemError)),
        });
    }

    fn round_done(&self, generation: u64) {
        let mut st = self.st.lock();
        if st.generation == generation {
            st.rounds += 1;
            self.cv.notify_all();
        }
    }

    fn become_owner(&self, generation: u64) {
        let path = {
            let mut st = self.st.lock();
            if st.generation != generation || st.owner || st.failed.is_some() {
                return;
            }
            st.owner = true;
            st.rounds += 1;
            self.cv.notify_all();
            st.id.clone().unwrap_or_default()
        };
        info!("{}: {path} owns the lock", self.dir);
        self.watch_own(generation);
        #[cfg(feature = "testing")]
        self.step(WriteLockStep::Owner, &path);
        let _ = path;
        let listener = self.listener.lock().clone();
        if let Some(l) = listener {
            l.lock_acquired();
        }
    }

    /// Watches the owned node (one `exists`, answered on the event thread): its
    /// deletion by someone else ends ownership (`lock_released`).
    fn watch_own(&self, generation: u64) {
        let (Some(zk), Some(me)) = (self.zkw.zookeeper(), self.me.upgrade()) else {
            return;
        };
        let Some(path) = self.st.lock().id.clone() else {
            return;
        };
        zk.exists_async(&path, Some(self.watcher.clone()), move |r| match r {
            Ok(Some(_)) => {}
            Ok(None) => me.fail(generation, ZkError::NoNode),
            Err(e) if e.is_retryable() => {
                let again = me.clone();
                crate::background::on_reconnect(&me.zkw, move |connected| {
                    if connected {
                        again.watch_own(generation);
                    } else {
                        again.fail(generation, ZkError::SessionExpired);
                    }
                });
            }
            Err(e) => me.fail(generation, e.code().unwrap_or(ZkError::SystemError)),
        });
    }

    fn fail(&self, generation: u64, code: ZkError) {
        let was_owner = {
            let mut st = self.st.lock();
            if st.generation != generation || st.id.is_none() || st.failed.is_some() {
                return;
            }
            st.failed = Some(code);
            st.rounds += 1;
            self.cv.notify_all();
            std::mem::replace(&mut st.owner, false)
        };
        warn!("write lock on {}: {code:?}", self.dir);
        if was_owner {
            let listener = self.listener.lock().clone();
            if let Some(l) = listener {
                l.lock_released();
            }
        }
    }
}

/// Children ordered as Java's `ZNodeName`: by the sequence after the last `-`
/// (names without one last), then by the prefix before it.
fn sort_like_znode_name(children: &[String]) -> Vec<&String> {
    let mut v: Vec<&String> = children.iter().collect();
    v.sort_by(|a, b| {
        let key = |n: &str| {
            let seq = number_after_last(n, '-');
            let prefix = n.rfind('-').map_or(n, |i| &n[..i]).to_string();
            (seq.is_none(), seq, prefix)
        };
        key(a).cmp(&key(b))
    });
    v
}

impl WriteLock {
    /// Java's `new WriteLock(zookeeper, dir, acl)`: a lock on `dir` (created
    /// with parents when needed, at the first `lock`).
    ///
    /// # Errors
    /// `BadArguments` for an invalid `dir`.
    pub fn new(zkw: &ZooKeeperWatcher, dir: &str, acl: &[Acl]) -> Result<WriteLock> {
        crate::path::validate(dir)?;
        let inner = Arc::new_cyclic(|me| Inner {
            dir: dir.to_string(),
            zkw: zkw.downgrade(),
            st: Mutex::new(St::default()),
            cv: Condvar::new(),
            listener: Mutex::new(None),
            watcher: Arc::new(PredecessorWatcher(me.clone())),
            me: me.clone(),
            #[cfg(feature = "testing")]
            hook: Mutex::new(None),
        });
        let hook: Arc<dyn SessionHook> = inner.clone();
        let hook_id = zkw.downgrade().add_hook(Arc::downgrade(&hook));
        Ok(WriteLock {
            zkw: zkw.clone(),
            acl: acl.to_vec(),
            data: Vec::new(),
            inner,
            hook_id,
        })
    }

    /// Java's `new WriteLock(zookeeper, dir, acl, callback)`.
    pub fn with_lock_listener(self, listener: impl LockListener + 'static) -> Self {
        *self.inner.listener.lock() = Some(Arc::new(listener));
        self
    }

    /// The data of the lock node (Java's `data` field, empty by default).
    pub fn with_data(mut self, data: &[u8]) -> Self {
        self.data = data.to_vec();
        self
    }

    /// Calls `hook` at each [`WriteLockStep`] (feature `testing`); it runs on
    /// the thread that does the step (the event thread after a wake-up).
    #[cfg(feature = "testing")]
    pub fn with_step_hook(
        self,
        hook: impl Fn(WriteLockStep, &str) + Send + Sync + 'static,
    ) -> Self {
        *self.inner.hook.lock() = Some(Arc::new(hook));
        self
    }

    /// Java's `getDir()`.
    pub fn dir(&self) -> &str {
        &self.inner.dir
    }

    /// Java's `getId()`: this instance's node (full path), once created.
    pub fn id(&self) -> Option<String> {
        self.inner.st.lock().id.clone()
    }

    /// Java's `isOwner()`; false once the session has ended.
    pub fn is_owner(&self) -> bool {
        let st = self.inner.st.lock();
        st.owner && st.failed.is_none() && !self.zkw.state().is_terminal()
    }

    /// Java's `lock()`: creates this instance's node if needed and returns
    /// whether it owns the lock now. If not, it watches its predecessor and its
    /// [`LockListener`] is told `lock_acquired` once it is owner.
    ///
    /// # Errors
    /// `SessionExpired`/`Closed`; `NoNode` when the node was deleted under the
    /// instance (call `unlock` then `lock` to start over); ZooKeeper errors after
    /// retries.
    pub fn lock(&self) -> Result<bool> {
        self.zkw.check_session()?;
        {
            let st = self.inner.st.lock();
            if let Some(code) = st.failed {
                return Err(Error::zk(code, self.inner.dir.clone()));
            }
            if st.owner {
                return Ok(true);
            }
        }
        if self.inner.st.lock().id.is_none() {
            let id = self.find_or_create()?;
            let mut st = self.inner.st.lock();
            st.id = Some(id);
        }
        let (generation, before) = {
            let st = self.inner.st.lock();
            (st.generation, st.rounds)
        };
        self.inner.round(generation);
        // Wait for this round's outcome: bounded by the session (a round cut by
        // a connection loss resumes after the reconnect, or fails at expiry).
        let mut st = self.inner.st.lock();
        while st.rounds == before && st.generation == generation {
            self.inner.cv.wait_for(&mut st, Duration::from_millis(500));
            if st.rounds == before && self.zkw.state().is_terminal() {
                drop(st);
                self.zkw.check_session()?;
                return Err(Error::Closed);
            }
        }
        if let Some(code) = st.failed {
            return Err(Error::zk(code, self.inner.dir.clone()));
        }
        Ok(st.owner)
    }

    /// zklock's blocking form: [`lock`](Self::lock), then waits up to `timeout`
    /// to become owner. `Ok(false)` when out of time, with the node removed
    /// (no orphan).
    ///
    /// # Errors
    /// As [`lock`](Self::lock); the node is removed on every error.
    pub fn lock_blocking(&self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        let result = (|| {
            if self.lock()? {
                return Ok(true);
            }
            let mut st = self.inner.st.lock();
            loop {
                if let Some(code) = st.failed {
                    return Err(Error::zk(code, self.inner.dir.clone()));
                }
                if st.owner {
                    return Ok(true);
                }
                if st.id.is_none() {
                    return Err(Error::Closed); // unlocked by another thread
                }
                let now = Instant::now();
                if now >= deadline {
                    return Ok(false);
                }
                let wait = (deadline - now).min(Duration::from_millis(500));
                self.inner.cv.wait_for(&mut st, wait);
                if self.zkw.state().is_terminal() {
                    drop(st);
                    self.zkw.check_session()?;
                    return Err(Error::Closed);
                }
            }
        })();
        match result {
            Ok(true) => Ok(true),
            other => {
                self.abandon(true);
                other
            }
        }
    }

    /// Java's `unlock()`: deletes this instance's node (retried on connection
    /// loss) whether owner or waiting; the listener is told `lock_released` when
    /// it was owner.
    ///
    /// # Errors
    /// ZooKeeper errors after retries (the node is then removed in the
    /// background). A node already gone, or a session already ended, is no
    /// error.
    pub fn unlock(&self) -> Result<()> {
        let Some((id, was_owner)) = self.take() else {
            return Ok(());
        };
        let result = if self.zkw.state().is_terminal() {
            Ok(())
        } else {
            match self.zkw.recoverable_zookeeper().delete(&id, None) {
                Ok(()) => Ok(()),
                Err(e) if e.is(ZkError::NoNode) || e.is_fatal() => Ok(()),
                Err(e) => {
                    remove_in_background(&self.zkw.downgrade(), id, Box::new(|| {}));
                    Err(e)
                }
            }
        };
        if was_owner {
            let listener = self.inner.listener.lock().clone();
            if let Some(l) = listener {
                l.lock_released();
            }
        }
        result
    }

    /// Java's `close()`: [`unlock`](Self::unlock). Ends a
    /// [`lock_blocking`](Self::lock_blocking) of another thread; the node is
    /// removed (also while waiting). The instance may lock again.
    ///
    /// # Errors
    /// As [`unlock`](Self::unlock).
    pub fn close(&self) -> Result<()> {
        self.unlock()
    }

    /// Forgets the node (a new generation: answers of earlier rounds are
    /// ignored); returns it and whether it owned the lock.
    fn take(&self) -> Option<(String, bool)> {
        let mut st = self.inner.st.lock();
        st.generation += 1;
        st.failed = None;
        let id = st.id.take()?;
        let was_owner = std::mem::replace(&mut st.owner, false);
        self.inner.cv.notify_all();
        Some((id, was_owner))
    }

    /// Removes the node after a failed or timed-out wait.
    fn abandon(&self, wait: bool) {
        if let Some((id, was_owner)) = self.take() {
            if wait {
                remove_and_wait(&self.zkw.downgrade(), id);
            } else {
                remove_in_background(&self.zkw.downgrade(), id, Box::new(|| {}));
            }
            if was_owner {
                let listener = self.inner.listener.lock().clone();
                if let Some(l) = listener {
                    l.lock_released();
                }
            }
        }
    }

    /// Java's `findPrefixInChildren`: this session's node in `dir`, else a new
    /// one. Retried on connection loss as Java's `ProtocolSupport` does (the
    /// session prefix finds a node whose create reply was lost).
    fn find_or_create(&self) -> Result<String> {
        let zk = self.zkw.zookeeper();
        let prefix = format!("x-{}-", zk.session_id());
        let mut attempt = 0u32;
        loop {
            let r = (|| {
                let children = match zk.get_children(&self.inner.dir, false) {
                    Ok(c) => c,
                    Err(e) if e.is(ZkError::NoNode) => {
                        zkutil::create_with_parents(&self.zkw, &self.inner.dir)?;
                        Vec::new()
                    }
                    Err(e) => return Err(e),
                };
                if let Some(c) = children.iter().find(|c| c.starts_with(&prefix)) {
                    debug!("found id created last time: {c}");
                    return Ok(zkutil::join_znode(&self.inner.dir, c));
                }
                zk.create(
                    &zkutil::join_znode(&self.inner.dir, &prefix),
                    &self.data,
                    &self.acl,
                    CreateMode::EphemeralSequential,
                )
            })();
            match r {
                Err(e) if e.is_retryable() && attempt < 10 => {
                    attempt += 1;
                    debug!("write lock on {}: {e}; retry {attempt}", self.inner.dir);
                    std::thread::sleep(Duration::from_millis(100) * attempt);
                    self.zkw.check_session()?;
                }
                other => return other,
            }
        }
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        self.abandon(false);
        if let Some(id) = self.hook_id {
            self.zkw.downgrade().remove_hook(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_like_java_znode_name() {
        let c: Vec<String> = ["x-9-0000000010", "x-10-0000000002", "x-1-0000000003", "foo"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let sorted: Vec<&str> = sort_like_znode_name(&c)
            .iter()
            .map(|s| s.as_str())
            .collect();
        assert_eq!(
            sorted,
            ["x-10-0000000002", "x-1-0000000003", "x-9-0000000010", "foo"]
        );
    }
}
