//! ZooKeeper's `org.apache.zookeeper.recipes.lock.WriteLock`, without its lost
//! wake-up.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, info};
use parking_lot::Mutex;

use super::rounds::{create_in_session, RoundEngine, RoundHandle, RoundRecipe, Taken};
use crate::engine::hook::{hook, Hook};
use crate::engine::owned::{Guard, Removal, REMOVAL_WAIT};
use crate::error::{Result, ZkError};
use crate::sequence::number_after_last;
use crate::types::{Acl, CreateMode, EventType, WatchedEvent};
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// ZooKeeper's `org.apache.zookeeper.recipes.lock.LockListener`: told when a
/// [`WriteLock`] becomes owner and when it lets go.
///
/// Called on the client's event thread (or on the thread calling
/// [`WriteLock::lock`] when the lock is free at once, or on a thread waiting in
/// `lock`/`lock_blocking` that sees the session's end before the event thread
/// tells it, or on the thread calling [`WriteLock::unlock`]): keep it short and
/// never block on ZooKeeper in it. Told in the order the instance became owner
/// and let go, one at a time: `lock_released` never comes before the
/// `lock_acquired` it follows, whichever threads decided them.
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
#[cfg_attr(not(feature = "testing"), doc(hidden))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WriteLockStep {
    /// The directory was listed; the instance is not first. The path given is
    /// the predecessor about to be watched: a hook deleting it here forces the
    /// race the Java recipe loses.
    Watching,
    /// The instance became owner (path: its node).
    Owner,
    /// `lock` made the instance's node (path: the node) and has not yet
    /// bound it to the instance: a hook calling `close` from another thread
    /// here forces the race of a close during the create.
    NodeMade,
    /// `lock` found the instance not owner and is about to make its node,
    /// or join the one being made (path: empty).
    Making,
    /// `lock` found the instance's node bound (made by another `lock` of
    /// the instance) and is about to join its round (path: the node).
    Joining,
}

/// A [`WriteLock`]'s own state beside its [`RoundEngine`]'s.
#[derive(Debug, Default)]
struct WriteLockRound {
    owner: bool,
    /// The listener's events decided (under the engine's lock, with the
    /// change of `owner` they tell) and not told yet, in decision order:
    /// `true` acquired, `false` released (see [`WriteLockCore::drain`]).
    due: VecDeque<bool>,
}

impl WriteLockRound {
    /// No longer owner: `lock_released` is due when it was. Whether it was.
    fn let_go(&mut self) -> bool {
        let was_owner = std::mem::replace(&mut self.owner, false);
        if was_owner {
            self.due.push_back(false);
        }
        was_owner
    }
}

/// The part of a [`WriteLock`] its rounds (on the event thread) reach.
struct WriteLockCore {
    engine: RoundEngine<WriteLockCore>,
    listener: Mutex<Option<Arc<dyn LockListener>>>,
    hook: Hook<WriteLockStep>,
    /// Held by the one thread telling the due events; never waited for.
    telling: Mutex<()>,
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
///
/// # Read-only mode
/// With [read-only mode](crate::ZooKeeperWatcherBuilder::with_read_only) on,
/// the lock is never granted on a read-only server's listing (its data may
/// lag the quorum's, and it cannot tell whether the session lives): the
/// round resumes at the next read-write server; joining while read-only
/// fails with `NotReadOnly`.
pub struct WriteLock {
    rounds: RoundHandle<WriteLockCore>,
    acl: Vec<Acl>,
    data: Vec<u8>,
    /// Held while `lock` makes the instance's node: a second `lock` of the
    /// instance waits for it and joins that node (Java's `synchronized`).
    making: parking_lot::Mutex<()>,
}

impl std::fmt::Debug for WriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.rounds.fmt_as(f, "WriteLock", "dir", &[])
    }
}

impl RoundRecipe for WriteLockCore {
    type State = WriteLockRound;

    fn engine(&self) -> &RoundEngine<Self> {
        &self.engine
    }

    /// Lists the directory (asynchronously) and acts on it.
    fn round(&self, generation: u64) {
        self.engine.list(generation, Self::listed);
    }

    /// A predecessor's deletion starts a new round; the owner's node changing
    /// is watched again, its deletion ends ownership.
    fn node_event(&self, generation: u64, event: WatchedEvent) {
        let (owner, own) = {
            let st = self.engine.state();
            (st.recipe.owner, st.node == event.path)
        };
        if owner && own {
            match event.event_type {
                EventType::NodeDeleted => self.engine.fail(generation, ZkError::NoNode),
                _ => self.watch_own(generation),
            }
        } else if !owner {
            self.round(generation);
        }
    }

    fn mark_failed(state: &mut WriteLockRound) -> bool {
        state.let_go()
    }

    fn tell_failed(&self, _was_owner: bool, _code: ZkError) {
        self.drain();
    }
}

impl WriteLockCore {
    fn listed(&self, generation: u64, r: Result<Vec<String>>) {
        let Some((children, id, zk, me)) = self.engine.listed(generation, r) else {
            return;
        };
        if self.engine.state().recipe.owner {
            // Owner already (another caller's round decided it): this round's
            // outcome too; its waiter must hear it, or it waits for good.
            return self.engine.round_done(generation);
        }
        let my_name = zkutil::get_node_name(&id).to_string();
        if !children.contains(&my_name) {
            // Deleted by someone else.
            return self.engine.fail(generation, ZkError::NoNode);
        }
        let sorted = sort_like_znode_name(&children);
        let pos = sorted.iter().position(|c| **c == my_name).unwrap_or(0);
        if pos == 0 {
            return self.become_owner(generation);
        }
        let predecessor = zkutil::join_znode(self.engine.path(), sorted[pos - 1]);
        hook!(self.hook, WriteLockStep::Watching, &predecessor);
        let watcher = self.engine.watcher();
        zk.get_data_async(&predecessor.clone(), Some(watcher), move |r| match r {
            Ok(_) => {
                debug!("{}: waiting for {predecessor}", me.engine.path());
                me.engine.round_done(generation);
            }
            // Gone before the watch: look again (Java's lost wake-up).
            Err(e) if e.is(ZkError::NoNode) => {
                debug!("{predecessor} already gone: listing again");
                me.round(generation)
            }
            Err(e) => me.engine.request_failed(generation, &e, Self::round),
        });
    }

    fn become_owner(&self, generation: u64) {
        let path = {
            let mut st = self.engine.state();
            if st.generation != generation || st.failed.is_some() {
                return;
            }
            if st.recipe.owner {
                // Another round decided it first: this one's waiter hears it.
                drop(st);
                return self.engine.round_done(generation);
            }
            st.recipe.owner = true;
            st.recipe.due.push_back(true);
            st.node.clone().unwrap_or_default()
        };
        self.engine.round_done(generation);
        info!("{}: {path} owns the lock", self.engine.path());
        self.watch_own(generation);
        hook!(self.hook, WriteLockStep::Owner, &path);
        self.drain();
    }

    /// Watches the owned node (one `exists`, answered on the event thread): its
    /// deletion by someone else ends ownership (`lock_released`).
    fn watch_own(&self, generation: u64) {
        self.engine.watch_own(generation, Self::watch_own);
    }

    /// Tells the due events in order (as the locks' listener queue does).
    /// Whoever finds another thread telling leaves its events to it: no lock
    /// is held while the listener runs but the teller's own flag, which
    /// nobody waits for (an `unlock` from a listener, or a drop, never
    /// blocks on it). Before, `lock_acquired` was told after the decision,
    /// unordered with an `unlock` from another thread: its `lock_released`
    /// could come first, and the listener was left believing it owned.
    fn drain(&self) {
        loop {
            let Some(_telling) = self.telling.try_lock() else {
                return;
            };
            loop {
                // Not in a `while let`: its guard would live through the call.
                let next = self.engine.state().recipe.due.pop_front();
                let Some(acquired) = next else {
                    break;
                };
                crate::metrics::metric!(leader_change(
                    "write_lock",
                    self.engine.path(),
                    acquired,
                    !acquired
                ));
                let listener = self.listener.lock().clone();
                match listener {
                    Some(l) if acquired => l.lock_acquired(),
                    Some(l) => l.lock_released(),
                    None => {}
                }
            }
            drop(_telling);
            // An event decided after the last pop, while the flag was held.
            if self.engine.state().recipe.due.is_empty() {
                return;
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
        let state = WriteLockRound::default();
        let rounds = RoundHandle::new(zkw, dir, state, |engine| WriteLockCore {
            engine,
            listener: Mutex::new(None),
            hook: Hook::default(),
            telling: Mutex::new(()),
        })?;
        Ok(WriteLock {
            rounds,
            acl: acl.to_vec(),
            data: Vec::new(),
            making: parking_lot::Mutex::new(()),
        })
    }

    /// Java's `new WriteLock(zookeeper, dir, acl, callback)`.
    #[must_use]
    pub fn with_lock_listener(self, listener: impl LockListener + 'static) -> Self {
        *self.rounds.core.listener.lock() = Some(Arc::new(listener));
        self
    }

    /// The data of the lock node (Java's `data` field, empty by default).
    #[must_use]
    pub fn with_data(mut self, data: &[u8]) -> Self {
        self.data = data.to_vec();
        self
    }

    /// Calls `hook` at each [`WriteLockStep`] (feature `testing`); it runs on
    /// the thread that does the step (the event thread after a wake-up).
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_step_hook(
        self,
        hook: impl Fn(WriteLockStep, &str) + Send + Sync + 'static,
    ) -> Self {
        self.rounds.core.hook.set(hook);
        self
    }

    /// Java's `getDir()`.
    pub fn dir(&self) -> &str {
        self.rounds.path()
    }

    /// Java's `getId()`: this instance's node (full path), once created.
    pub fn id(&self) -> Option<String> {
        self.rounds.node()
    }

    /// Java's `isOwner()`; false once the session has ended (or was renewed).
    pub fn is_owner(&self) -> bool {
        self.rounds.holds(|w| w.owner)
    }

    /// Java's `lock()`: creates this instance's node if needed and returns
    /// whether it owns the lock now. If not, it watches its predecessor and its
    /// [`LockListener`] is told `lock_acquired` once it is owner.
    ///
    /// The instance belongs to the session its node was made in: once that
    /// session ended (also when session renewal opened a new one) `lock`
    /// returns `SessionExpired` until [`unlock`](Self::unlock) starts over.
    ///
    /// Two threads calling `lock` on one instance share its one node, as
    /// Java's `synchronized lock()`: the second waits while the first makes
    /// it, then joins its round.
    ///
    /// # Errors
    /// `SessionExpired`/`Closed`; `NoNode` when the node was deleted under the
    /// instance (call `unlock` then `lock` to start over); ZooKeeper errors after
    /// retries.
    #[must_use = "`Ok(false)` means the lock is not held yet"]
    pub fn lock(&self) -> Result<bool> {
        {
            let st = self.rounds.engine().state();
            if let Some(e) = &st.failed {
                return Err(e.clone());
            }
            if st.recipe.owner {
                return Ok(true);
            }
        }
        self.rounds.zkw.check_session()?;
        {
            // One maker at a time: a concurrent `lock` of this instance waits
            // here, then finds the node bound and joins its round (an
            // `unlock`/`close` from another thread never waits for it).
            hook!(self.rounds.core.hook, WriteLockStep::Making, "");
            let _one_at_a_time = self.making.lock();
            let bound = self.rounds.engine().state().node.clone();
            match bound {
                None => {
                    let generation = self.rounds.engine().generation();
                    let (id, session) = self.find_or_create()?;
                    hook!(self.rounds.core.hook, WriteLockStep::NodeMade, &id);
                    self.rounds.engine().bind(id, session, generation)?;
                }
                Some(node) => hook!(self.rounds.core.hook, WriteLockStep::Joining, &node),
            }
        }
        // Wait for this round's outcome: bounded by the session (a round cut by
        // a connection loss resumes after the reconnect, or fails at expiry).
        Ok(self.rounds.engine().run_round()?.recipe.owner)
    }

    /// zklock's blocking form: [`lock`](Self::lock), then waits up to `timeout`
    /// to become owner. `Ok(false)` when out of time, with the node removed
    /// (no orphan).
    ///
    /// # Errors
    /// As [`lock`](Self::lock); the node is removed on every error.
    #[must_use = "`Ok(false)` means the lock was not acquired"]
    pub fn lock_blocking(&self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        let result = match self.lock() {
            Ok(true) => Ok(true),
            Ok(false) => self
                .rounds
                .engine()
                .wait_until(deadline, |st| st.recipe.owner),
            Err(e) => Err(e),
        };
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
        let Some(taken) = self.take() else {
            return Ok(());
        };
        let result = taken.withdraw(&self.rounds.zkw);
        self.rounds.core.drain();
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
    /// ignored).
    fn take(&self) -> Option<Taken> {
        self.rounds.engine().take(|st| {
            st.let_go();
        })
    }

    /// Removes the node after a failed or timed-out wait.
    fn abandon(&self, wait: bool) {
        if let Some(taken) = self.take() {
            if wait {
                if self.rounds.zkw.zookeeper().session_id() == taken.session {
                    Removal::new(taken.node, Guard::Any)
                        .and_wait(&self.rounds.zkw.downgrade(), REMOVAL_WAIT);
                }
            } else {
                taken.withdraw_in_background(&self.rounds.zkw);
            }
            self.rounds.core.drain();
        }
    }

    /// Java's `findPrefixInChildren`: this session's node in `dir`, else a new
    /// one. Retried on connection loss as Java's `ProtocolSupport` does (the
    /// session prefix finds a node whose create reply was lost).
    fn find_or_create(&self) -> Result<(String, i64)> {
        let dir = self.dir();
        create_in_session(&self.rounds.zkw, |zk, _retry| {
            let prefix = format!("x-{}-", zk.session_id());
            let children = match zk.get_children(dir, false) {
                Ok(c) => c,
                Err(e) if e.is(ZkError::NoNode) => {
                    zkutil::create_with_parents(&self.rounds.zkw, dir)?;
                    Vec::new()
                }
                Err(e) => return Err(e),
            };
            if let Some(c) = children.iter().find(|c| c.starts_with(&prefix)) {
                debug!("found id created last time: {c}");
                return Ok(zkutil::join_znode(dir, c));
            }
            zk.create(
                &zkutil::join_znode(dir, &prefix),
                &self.data,
                &self.acl,
                CreateMode::EphemeralSequential,
            )
        })
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        self.abandon(false);
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
