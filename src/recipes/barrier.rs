//! `Barrier`: the "Barriers" recipe.

use std::time::Duration;

use super::node::{Look, NodeWaiter};
use crate::engine::owned::{Guard, Removal};
use crate::engine::wait::Bounds;
use crate::error::{Result, ZkError};
use crate::watcher::ZooKeeperWatcher;

/// A barrier: the "Barriers" recipe of ZooKeeper's recipes page (Curator's
/// `DistributedBarrier`). While its node exists, [`wait_on_barrier`](Self::wait_on_barrier)
/// blocks; removing the node lets every waiter through.
///
/// The node is persistent: a barrier outlives the process that set it (remove
/// it with [`remove_barrier`](Self::remove_barrier)).
///
/// # zklock differs here
/// The page sets an `exists` watch; a waiter here reads the node with a data
/// watch (`getData`), so that no watch is left on the server when the barrier
/// is already gone. Every waiter is woken by the one deletion: that is the
/// recipe (all waiters must go).
pub struct Barrier {
    waiter: NodeWaiter,
}

impl std::fmt::Debug for Barrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.waiter.fmt_as(f, "Barrier")
    }
}

impl Barrier {
    /// A barrier on the node `path` (nothing is created yet).
    ///
    /// # Errors
    /// `BadArguments` for an invalid path.
    pub fn new(zkw: &ZooKeeperWatcher, path: &str) -> Result<Barrier> {
        let waiter = NodeWaiter::new(zkw, path)?;
        Ok(Barrier { waiter })
    }

    crate::engine::wait::with_wait_hook!();

    /// The barrier's node.
    pub fn path(&self) -> &str {
        &self.waiter.path
    }

    /// Sets the barrier: creates its node (and missing parents); no error when
    /// it is already set.
    ///
    /// # Errors
    /// Session errors.
    pub fn set_barrier(&self) -> Result<()> {
        self.waiter
            .zkw
            .recoverable_zookeeper()
            .create_with_parents(self.path(), &[])
    }

    /// Removes the barrier: deletes its node, waking every waiter. `true`
    /// when this call removed it, `false` when it was not set (kazoo's
    /// `remove` returns False then).
    ///
    /// # Errors
    /// `NotEmpty` if someone put children under the node; session errors.
    pub fn remove_barrier(&self) -> Result<bool> {
        Removal::new(self.path(), Guard::Any).run(self.waiter.zkw.recoverable_zookeeper())
    }

    /// Whether the barrier is set now.
    ///
    /// # Errors
    /// Session errors.
    pub fn is_set(&self) -> Result<bool> {
        Ok(self
            .waiter
            .zkw
            .recoverable_zookeeper()
            .exists(self.path(), false)?
            .is_some())
    }

    /// Waits until the barrier is removed, at most `timeout`: `Ok(true)` when
    /// it is gone (at once when it is not set), `Ok(false)` out of time.
    ///
    /// # Errors
    /// `SessionExpired`, `Closed`; `ConnectionLoss` when the connection stays
    /// down for a session timeout.
    #[must_use = "`Ok(false)` means the barrier was still set when the time ran out"]
    pub fn wait_on_barrier(&self, timeout: Duration) -> Result<bool> {
        self.wait_within(Bounds::new(Some(timeout)))
    }

    /// Waits until the barrier is removed, as long as it takes (kazoo's
    /// `wait()` without a timeout); at once when it is not set.
    ///
    /// # Errors
    /// As [`wait_on_barrier`](Self::wait_on_barrier).
    pub fn wait(&self) -> Result<()> {
        // Without a deadline the wait ends only when the barrier is gone.
        self.wait_within(Bounds::new(None)).map(drop)
    }

    /// Whether the barrier went within `bounds`: reads the node with a data
    /// watch until it is gone.
    fn wait_within(&self, bounds: Bounds) -> Result<bool> {
        let _started = crate::metrics::Timer::start();
        let gone = self
            .waiter
            .wait_until(bounds, |rzk, watcher| {
                match rzk.get_data_watch(self.path(), watcher) {
                    Err(e) if e.is(ZkError::NoNode) => Ok(Look::Done(())),
                    Err(e) => Err(e),
                    Ok(_) => Ok(Look::Wait),
                }
            })
            .map(|gone| gone.is_some());
        crate::metrics::metric!(barrier_wait(
            "barrier",
            self.path(),
            gone.as_ref().ok().copied(),
            _started
        ));
        gone
    }
}
