//! The recipes' blocking look-and-wait on one node ([`NodeWaiter`], [`Look`]:
//! a recipe's decision over the engine's wait, as `barrier.rs` uses it) and
//! the small node helpers the recipes share (participants of an election,
//! a guarded delete, a listing of a directory that may be missing). A node a
//! recipe creates for its caller is an engine
//! [`SessionNode`](crate::engine::session_node::SessionNode); a queue's take is
//! in `take.rs`.

use std::sync::Arc;

use crate::engine::call::CallSession;
use crate::engine::owned::{Guard, Removal};
use crate::engine::wait::{Bounds, Waiter};
use crate::error::{Result, ZkError};
use crate::recoverable::RecoverableZooKeeper;
use crate::types::Watcher;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// A participant of a leader election or latch, as read from its node
/// (Curator's `Participant`; kazoo's `contenders()` lists their ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    /// Its id: the node's data (Curator's participant id, Java's host name).
    pub id: String,
    /// Its node (full path).
    pub node: String,
    /// Whether it is the leader (the lowest node).
    pub is_leader: bool,
}

/// The participants in `root`, in the order `sorted` puts its children
/// (the leader first), each read from its node (`1 + N` requests; none when
/// `root` does not exist). A node withdrawn while being read is left out, so
/// the leader is the first node still there, as in Curator's
/// `LeaderSelector.getParticipants`.
///
/// # Errors
/// ZooKeeper errors after retries.
pub(super) fn read_participants(
    rzk: &RecoverableZooKeeper,
    root: &str,
    sorted: impl Fn(&[String]) -> Vec<&String>,
) -> Result<Vec<Participant>> {
    let children = children_or_none(rzk, root)?;
    let mut out = Vec::new();
    for name in sorted(&children) {
        let node = zkutil::join_znode(root, name);
        match rzk.get_raw_data(&node) {
            Ok((data, _)) => out.push(Participant {
                id: String::from_utf8_lossy(&data).into_owned(),
                node,
                is_leader: out.is_empty(),
            }),
            Err(e) if e.is(ZkError::NoNode) => {} // withdrawn meanwhile
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Deletes `path` (any version); no error when it is gone already.
pub(super) fn delete_if_present(rzk: &RecoverableZooKeeper, path: &str) -> Result<()> {
    Removal::new(path, Guard::Any).run(rzk).map(drop)
}

/// Lists `dir`'s children; an empty list when `dir` does not exist.
pub(super) fn children_or_none(rzk: &RecoverableZooKeeper, dir: &str) -> Result<Vec<String>> {
    match rzk.get_children(dir, false) {
        Ok(c) => Ok(c),
        Err(e) if e.is(ZkError::NoNode) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// A recipe's waits on one node (a barrier's node, a group's directory): the
/// watcher, the node's path and the recipe's one [`Waiter`]. A recipe keeps
/// it in its field `waiter`, where `with_wait_hook!` finds
/// [`set_hook`](Self::set_hook).
pub(super) struct NodeWaiter {
    /// The recipe's watcher.
    pub(super) zkw: ZooKeeperWatcher,
    /// The node waited on.
    pub(super) path: String,
    waiter: Waiter,
}

/// What a look at the node found (see [`NodeWaiter::wait_until`]).
pub(super) enum Look<T> {
    /// What was waited for: the wait ends with it.
    Done(T),
    /// Not yet, the look's watch is set: wait for it to fire.
    Wait,
    /// Look again at once (the look changed something, set no watch).
    Again,
}

impl NodeWaiter {
    /// The waits on `path`.
    ///
    /// # Errors
    /// `BadArguments` for an invalid path.
    pub(super) fn new(zkw: &ZooKeeperWatcher, path: &str) -> Result<NodeWaiter> {
        crate::path::validate(path)?;
        Ok(NodeWaiter {
            zkw: zkw.clone(),
            path: path.to_string(),
            waiter: Waiter::default(),
        })
    }

    /// The recipe's `Debug`: `name { path }`.
    pub(super) fn fmt_as(&self, f: &mut std::fmt::Formatter<'_>, name: &str) -> std::fmt::Result {
        f.debug_struct(name).field("path", &self.path).finish()
    }

    /// The waiter's test hook (feature `testing`; see `with_wait_hook!`).
    #[cfg(feature = "testing")]
    pub(super) fn set_hook(
        &self,
        hook: impl Fn(crate::engine::wait::WaitStep, &str) + Send + Sync + 'static,
    ) {
        self.waiter.set_hook(hook);
    }

    /// Waits until `look` finds what is waited for (`Ok(Some)`), at most
    /// `bounds` (`Ok(None)`, also when a call was cut short by the calls'
    /// deadline). Each round `look` reads the node with the handle of the
    /// session the wait began in (bounded by the calls' deadline), setting
    /// the watch it is given; the wait is woken by that watch and ends with
    /// that session.
    ///
    /// # Errors
    /// `look`'s errors; `SessionExpired`, `Closed`; `ConnectionLoss` when the
    /// connection stays down for a session timeout.
    pub(super) fn wait_until<T>(
        &self,
        bounds: Bounds,
        look: impl FnMut(&RecoverableZooKeeper, &Arc<dyn Watcher>) -> Result<Look<T>>,
    ) -> Result<Option<T>> {
        match self.wait_loop(bounds, look) {
            Err(e) if bounds.cut_short(&e) => Ok(None),
            other => other,
        }
    }

    fn wait_loop<T>(
        &self,
        bounds: Bounds,
        mut look: impl FnMut(&RecoverableZooKeeper, &Arc<dyn Watcher>) -> Result<Look<T>>,
    ) -> Result<Option<T>> {
        let call = CallSession::begin(&self.zkw)?;
        let rzk = call.rzk().with_deadline(bounds.calls);
        loop {
            call.check()?;
            let round = self.waiter.round();
            match look(&rzk, self.waiter.watcher())? {
                Look::Done(found) => return Ok(Some(found)),
                Look::Again => continue,
                Look::Wait => {}
            }
            if !self
                .waiter
                .wait(&call.pinned(), round, bounds.wait, &self.path)?
            {
                return Ok(None);
            }
        }
    }
}
