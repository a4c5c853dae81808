//! The waiting step of one attempt, written once for the lock
//! (`ZkInterProcessLockBase`) and the semaphore (`ZkSemaphore`): each round
//! begins with a check of the attempt's session and of a cancel, reads the
//! wake-up round before it lists or watches, and waits for a wake-up of that
//! round with the wait engine until the wait's bound, a cancel looked at
//! again after it; a granted node is watched and held in one way.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::watch::{LockShared, NodeWatch};
use crate::engine::call::CallSession;
use crate::engine::wait::{self, Bounds, WhenDown};
use crate::error::{Error, Result, ZkError};
use crate::recoverable::RecoverableZooKeeper;
use crate::watcher::ZooKeeperWatcher;

/// One attempt of a lock or a semaphore while it waits: its session, its
/// bounded client and its bounds, with the instance's wake-ups and cancel.
pub(super) struct LockWait<'a> {
    /// The attempt's session: every call of the attempt is made in it.
    pub(super) call: &'a CallSession,
    /// The session's client, its calls bounded by `bounds.calls`.
    pub(super) rzk: &'a RecoverableZooKeeper,
    /// The wait's and the calls' bounds.
    pub(super) bounds: Bounds,
    /// The instance's wake-ups and cancel flag.
    shared: &'a LockShared,
    /// The lock's (the semaphore's) znode: a wait and a `Cancelled` name it.
    znode: &'a str,
}

impl<'a> LockWait<'a> {
    /// The waiting of an attempt of the instance whose state is `shared`,
    /// on the lock znode `znode`.
    pub(super) fn new(
        call: &'a CallSession,
        rzk: &'a RecoverableZooKeeper,
        bounds: Bounds,
        shared: &'a LockShared,
        znode: &'a str,
    ) -> LockWait<'a> {
        LockWait {
            call,
            rzk,
            bounds,
            shared,
            znode,
        }
    }

    /// The start of each round: `SessionExpired`/`Closed` when the attempt's
    /// session ended, `Cancelled` when the instance was cancelled.
    pub(super) fn check(&self) -> Result<()> {
        self.call.check()?;
        self.cancelled()
    }

    /// The read-write connection now (see [`proven`](Self::proven)): taken
    /// before a listing that may grant.
    pub(super) fn connection(&self) -> Option<u64> {
        self.rzk.zookeeper().read_write_connection()
    }

    /// Whether a listing that grants, made since `before` (its
    /// [`connection`](Self::connection)), proves the grant: `Ok(true)` when a
    /// read-write server answered it (the same read-write connection before
    /// and after); `Ok(false)` when it may have come from another connection
    /// (list again); `NotReadOnly` when the client is connected to a
    /// read-only server, whose data may lag the quorum's without bound and
    /// which cannot tell whether this session still lives: never a grant
    /// without proof (read-only mode).
    pub(super) fn proven(&self, before: Option<u64>) -> Result<bool> {
        if !self.rzk.zookeeper().can_be_read_only() {
            // Read-only mode off: every server that answers is read-write.
            return Ok(true);
        }
        match self.connection() {
            Some(now) => Ok(before == Some(now)),
            None if self.rzk.zookeeper().is_read_only() => {
                Err(Error::zk(ZkError::NotReadOnly, self.znode))
            }
            None => Ok(false),
        }
    }

    /// `Cancelled` when the instance was cancelled.
    pub(super) fn cancelled(&self) -> Result<()> {
        check_cancelled(self.shared, self.znode)
    }

    /// The wake-up round a wait begins with: read before the listing or the
    /// watch it waits on, so that no wake-up after them is missed.
    pub(super) fn round(&self) -> u64 {
        self.shared.wake.generation()
    }

    /// Waits for a wake-up of `round` until the wait's bound: `Ok(true)`
    /// woken, `Ok(false)` out of time. A cancel wakes the wait directly (the
    /// caller looks at [`cancelled`](Self::cancelled) after it, at its own
    /// step), and so does the end of the attempt's session, from the client
    /// thread that ends it (`close()` included): never through the event
    /// thread, which a listener may hold up. Nothing is looked at
    /// periodically (the engine's [`wait`](crate::engine::wait::wait)): an idle
    /// waiter costs no wake-up.
    pub(super) fn wait(&self, round: u64) -> Result<bool> {
        self.shared.waited.set();
        wait::wait(
            &self.shared.wake,
            round,
            &self.call.pinned(),
            self.bounds.wait,
            WhenDown::Wait,
            self.znode,
        )
    }

    /// Watches the attempt's node `path` with a [`NodeWatch`] telling
    /// `shared`: registered with the reply, so a deletion from here on fires
    /// it, and one before it shows as a missing node (`LockLost`).
    pub(super) fn watch_node(
        &self,
        path: &str,
        shared: &Arc<LockShared>,
        zkw: &ZooKeeperWatcher,
    ) -> Result<Arc<NodeWatch>> {
        let watch = NodeWatch::new(path, shared, &zkw.downgrade());
        if self.rzk.exists_watch(path, &watch.watcher())?.is_none() {
            return Err(lost(path));
        }
        Ok(watch)
    }

    /// The grant of the node `path` is held from now on by `watch`:
    /// `LockLost` when the node is already known gone; a connection lost
    /// since the watch was set is told now.
    pub(super) fn hold(&self, watch: &NodeWatch, path: &str) -> Result<()> {
        if !watch.hold() {
            return Err(lost(path));
        }
        watch.catch_up(self.call.rzk().state());
        Ok(())
    }

    /// The grant's last look, after its last network call, then the grant
    /// held by `watch` (if it is watched): a cancel or the session's end from
    /// another thread since the last round (while the grant was listed or
    /// watched) ends the attempt (the caller removes its node), as one
    /// during the create does at the round after it. Only a withdrawal after
    /// this look finds the lock (or lease) held.
    pub(super) fn hold_grant(&self, watch: Option<&NodeWatch>, path: &str) -> Result<()> {
        if let Err(e) = self.check() {
            if let Some(w) = watch {
                w.release(); // our own delete: no `Lost`
            }
            log::info!("acquiring {} withdrawn at its grant", self.znode);
            return Err(e);
        }
        match watch {
            Some(w) => self.hold(w, path),
            None => Ok(()),
        }
    }
}

/// `Cancelled` about `znode` when the instance whose state is `shared` was
/// cancelled.
pub(super) fn check_cancelled(shared: &LockShared, znode: &str) -> Result<()> {
    if shared.cancelled.load(Ordering::SeqCst) {
        return Err(Error::Cancelled {
            lock: znode.to_string(),
        });
    }
    Ok(())
}

/// `LockLost` about the attempt's node `path`: it is gone.
pub(super) fn lost(path: &str) -> Error {
    Error::LockLost {
        path: path.to_string(),
    }
}

/// The `kind` label of a lock in `role` (feature `metrics`).
#[cfg(feature = "metrics")]
pub(super) fn kind_label(role: super::dialect::Role) -> &'static str {
    use super::dialect::Role;
    match role {
        Role::Mutex => "mutex",
        Role::Read => "read",
        Role::Write => "write",
    }
}

/// The `outcome` label of an attempt (feature `metrics`): `acquired`,
/// `timeout`, `cancelled`, `error`.
#[cfg(feature = "metrics")]
pub(super) fn outcome<T>(result: &Result<Option<T>>) -> &'static str {
    match result {
        Ok(Some(_)) => "acquired",
        Ok(None) => "timeout",
        Err(Error::Cancelled { .. }) => "cancelled",
        Err(_) => "error",
    }
}
