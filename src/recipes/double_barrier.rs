//! `DoubleBarrier`: the "Double Barriers" recipe.

use std::time::Duration;

use log::{debug, warn};
use parking_lot::Mutex;

use super::waiting::{Bounds, Waiter};
use crate::error::{Error, Result, ZkError};
use crate::recoverable::{tagged_prefix, RecoverableZooKeeper};
use crate::sequence::sequence_of;
use crate::types::{Acl, CreateMode};
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// The prefix of a member's node: `<path>/m-<tag>-<sequence>`.
pub const MEMBER_PREFIX: &str = "m-";

/// The node the last member to enter creates.
pub const READY_NODE: &str = "ready";

/// A double barrier: the "Double Barriers" recipe of ZooKeeper's recipes page
/// (Curator's `DistributedDoubleBarrier`). `member_count` processes
/// [`enter`](Self::enter) — each waits until all have — compute, then
/// [`leave`](Self::leave) — each waits until all have.
///
/// The page's pseudo code, step for step: a member creates an ephemeral node
/// under the barrier (sequential, so members are ordered), with an `exists`
/// watch on `<path>/ready` set first; the member that finds `member_count`
/// members creates `ready`, which wakes the others. To leave, the lowest member
/// waits on the highest; every other member deletes its node and waits on the
/// lowest: one deletion wakes one process (no herd) until the lowest is alone,
/// deletes its node and wakes the rest.
///
/// One instance is one member; give each thread or process its own.
///
/// # zklock differs here
/// - The page never removes `ready`; here the last member to leave deletes it,
///   so the barrier's directory is empty again (and the barrier can be used for
///   another round once every member of the last one has left).
/// - A member whose `enter` times out or fails deletes its node; a `leave`
///   that times out withdraws the member (deletes its node), so a member that
///   gives up never blocks the others. A member's node is ephemeral: a member
///   whose process dies leaves with its session.
/// - Dropping an instance that entered and did not leave deletes its node in the
///   background (no network wait in `Drop`).
pub struct DoubleBarrier {
    zkw: ZooKeeperWatcher,
    path: String,
    member_count: usize,
    /// This member's node while it is in the barrier.
    node: Mutex<Option<String>>,
    waiter: Waiter,
}

impl std::fmt::Debug for DoubleBarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoubleBarrier")
            .field("path", &self.path)
            .field("member_count", &self.member_count)
            .field("node", &*self.node.lock())
            .finish()
    }
}

/// The members among `children`, lowest sequence first.
fn members(children: &[String]) -> Vec<String> {
    let mut m: Vec<(i64, &String)> = children
        .iter()
        .filter(|c| c.starts_with(MEMBER_PREFIX))
        .filter_map(|c| sequence_of(c).map(|s| (i64::from(s), c)))
        .collect();
    m.sort();
    m.into_iter().map(|(_, c)| c.clone()).collect()
}

impl DoubleBarrier {
    /// A member of the double barrier at `path` for `member_count` members.
    ///
    /// # Errors
    /// `BadArguments` for an invalid path or a zero count.
    pub fn new(zkw: &ZooKeeperWatcher, path: &str, member_count: usize) -> Result<DoubleBarrier> {
        crate::path::validate(path)?;
        if member_count == 0 {
            return Err(Error::BadArguments(
                "a double barrier needs at least one member".into(),
            ));
        }
        Ok(DoubleBarrier {
            zkw: zkw.clone(),
            path: path.to_string(),
            member_count,
            node: Mutex::new(None),
            waiter: Waiter::default(),
        })
    }

    /// The barrier's node.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// This member's node, while it is in the barrier.
    pub fn node(&self) -> Option<String> {
        self.node.lock().clone()
    }

    /// Enters: joins the barrier and waits at most `timeout` until
    /// `member_count` members have: `Ok(true)` entered, `Ok(false)` out of time
    /// (this member's node deleted).
    ///
    /// # Errors
    /// `BadArguments` when this instance already entered; `SessionExpired`,
    /// `Closed`; `ConnectionLoss` when the connection stays down for a session
    /// timeout. The member's node is deleted on every error.
    pub fn enter(&self, timeout: Duration) -> Result<bool> {
        if self.node.lock().is_some() {
            return Err(Error::BadArguments(format!(
                "already entered the double barrier {}",
                self.path
            )));
        }
        self.zkw.check_session()?;
        let bounds = Bounds::new(Some(timeout));
        let rzk = self.zkw.recoverable_zookeeper().with_deadline(bounds.calls);
        let ready = zkutil::join_znode(&self.path, READY_NODE);
        // 2. the watch on `ready` comes before our node.
        self.waiter.arm();
        let ready_already = rzk.exists_watch(&ready, self.waiter.watcher())?.is_some();
        // 1, 3. our node.
        let tagged = tagged_prefix(&zkutil::join_znode(&self.path, MEMBER_PREFIX));
        let create = || {
            rzk.create_sequential_tagged(
                &tagged,
                &[],
                Acl::open_unsafe(),
                CreateMode::EphemeralSequential,
            )
        };
        let created = match create() {
            Err(e) if e.is(ZkError::NoNode) => {
                rzk.create_with_parents(&self.path, &[])?;
                create()
            }
            other => other,
        };
        let me = match created {
            Ok((me, _)) => me,
            Err(e) => {
                if e.is_retryable() {
                    self.remove_tagged(&tagged);
                }
                return Err(e);
            }
        };
        *self.node.lock() = Some(me.clone());
        let result = if ready_already {
            Ok(true)
        } else {
            match self.wait_entered(&rzk, &ready, bounds) {
                Err(e) if bounds.cut_short(&e) => Ok(false),
                other => other,
            }
        };
        match result {
            Ok(true) => Ok(true),
            other => {
                debug!("leaving {} unentered: {other:?}", self.path);
                self.withdraw();
                other
            }
        }
    }

    fn wait_entered(
        &self,
        rzk: &RecoverableZooKeeper,
        ready: &str,
        bounds: Bounds,
    ) -> Result<bool> {
        let mut first = true;
        loop {
            self.zkw.check_session()?;
            if !first {
                self.waiter.arm();
                if rzk.exists_watch(ready, self.waiter.watcher())?.is_some() {
                    return Ok(true);
                }
            }
            first = false;
            // 4, 5, 6.
            let children = rzk.get_children(&self.path, false)?;
            if members(&children).len() >= self.member_count {
                match rzk
                    .zookeeper()
                    .create(ready, &[], Acl::open_unsafe(), CreateMode::Persistent)
                {
                    Ok(_) => {}
                    Err(e) if e.is(ZkError::NodeExists) => {}
                    Err(e) if e.is_retryable() => {
                        if rzk.exists(ready, false)?.is_none() {
                            return Err(e);
                        }
                    }
                    Err(e) => return Err(e),
                }
                return Ok(true);
            }
            if !self.waiter.wait(&self.zkw, bounds.wait, &self.path)? {
                return Ok(false);
            }
        }
    }

    /// Leaves: waits at most `timeout` until every member has left:
    /// `Ok(true)` all left, `Ok(false)` out of time (this member withdrawn: its
    /// node deleted, so it does not hold the others up).
    ///
    /// # Errors
    /// `BadArguments` when this instance has not entered; `SessionExpired`,
    /// `Closed`; `ConnectionLoss` when the connection stays down for a session
    /// timeout. The member's node is deleted on every error.
    pub fn leave(&self, timeout: Duration) -> Result<bool> {
        let Some(me) = self.node() else {
            return Err(Error::BadArguments(format!(
                "not in the double barrier {}",
                self.path
            )));
        };
        let bounds = Bounds::new(Some(timeout));
        let rzk = self.zkw.recoverable_zookeeper().with_deadline(bounds.calls);
        let result = match self.wait_left(&rzk, &me, bounds) {
            Err(e) if bounds.cut_short(&e) => Ok(false),
            other => other,
        };
        match result {
            Ok(true) => {
                *self.node.lock() = None;
                Ok(true)
            }
            other => {
                self.withdraw();
                other
            }
        }
    }

    fn wait_left(&self, rzk: &RecoverableZooKeeper, me: &str, bounds: Bounds) -> Result<bool> {
        let my_name = zkutil::get_node_name(me).to_string();
        let ready = zkutil::join_znode(&self.path, READY_NODE);
        let mut mine = true;
        loop {
            self.zkw.check_session()?;
            // 1.
            let l = match rzk.get_children(&self.path, false) {
                Ok(c) => members(&c),
                Err(e) if e.is(ZkError::NoNode) => Vec::new(),
                Err(e) => return Err(e),
            };
            let present = l.contains(&my_name);
            // 2, 3: nobody else is left.
            if l.iter().all(|m| *m == my_name) {
                if present {
                    delete_if_present(rzk, me)?;
                }
                delete_if_present(rzk, &ready)?;
                return Ok(true);
            }
            let lowest = &l[0];
            // 4, 5.
            let to_watch = if present && *lowest == my_name {
                l.last().cloned().unwrap_or_default()
            } else {
                if mine && present {
                    delete_if_present(rzk, me)?;
                }
                mine = false;
                lowest.clone()
            };
            self.waiter.arm();
            match rzk.get_data_watch(
                &zkutil::join_znode(&self.path, &to_watch),
                self.waiter.watcher(),
            ) {
                Ok(_) => {}
                Err(e) if e.is(ZkError::NoNode) => continue,
                Err(e) => return Err(e),
            }
            // 6.
            if !self.waiter.wait(&self.zkw, bounds.wait, &self.path)? {
                return Ok(false);
            }
        }
    }

    /// Deletes this member's node (bounded; in the background when the delete
    /// cannot be done now).
    fn withdraw(&self) {
        let Some(me) = self.node.lock().take() else {
            return;
        };
        if self.zkw.state().is_terminal() {
            return; // ephemeral: gone with the session
        }
        let rzk = self
            .zkw
            .recoverable_zookeeper()
            .with_deadline(crate::Deadline::after(Duration::from_secs(1)));
        if let Err(e) = delete_if_present(&rzk, &me) {
            warn!(
                "could not remove double-barrier member {me} now ({e}); it goes with the session"
            );
        }
    }

    /// Removes the node a create with a lost reply may have made.
    fn remove_tagged(&self, tagged: &str) {
        let rzk = self
            .zkw
            .recoverable_zookeeper()
            .with_deadline(crate::Deadline::after(Duration::from_secs(1)));
        let name = zkutil::get_node_name(tagged);
        if let Ok(children) = rzk.get_children(&self.path, false) {
            for c in children.iter().filter(|c| c.starts_with(name)) {
                let _ = delete_if_present(&rzk, &zkutil::join_znode(&self.path, c));
            }
        }
    }
}

/// Deletes `path`; `NoNode` is success.
pub(super) fn delete_if_present(rzk: &RecoverableZooKeeper, path: &str) -> Result<()> {
    match rzk.delete(path, None) {
        Err(e) if e.is(ZkError::NoNode) => Ok(()),
        other => other,
    }
}

impl Drop for DoubleBarrier {
    /// Deletes this member's node in the background when it entered and did not
    /// leave; never waits on the network.
    fn drop(&mut self) {
        if let Some(me) = self.node.get_mut().take() {
            // Retried after a reconnect; nothing to do once the session ended.
            crate::background::remove_in_background(&self.zkw.downgrade(), me, Box::new(|| {}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_by_sequence_without_ready() {
        let c: Vec<String> = [
            "m-bb-0000000003",
            "ready",
            "m-aa-0000000001",
            "m-cc-0000000002",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            members(&c),
            ["m-aa-0000000001", "m-cc-0000000002", "m-bb-0000000003"]
        );
    }
}
