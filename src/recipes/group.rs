//! `Group`: group membership (the page's ephemeral-node idiom, ZooKeeper's
//! tutorial "Group Membership").

use std::time::Duration;

use super::layout::PARTY_PREFIX;
use super::node::{children_or_none, Look, NodeWaiter};
use crate::engine::call::CallSession;
use crate::engine::owned::Parents;
use crate::engine::session_node::SessionNode;
use crate::engine::wait::Bounds;
use crate::error::{Result, ZkError};
use crate::types::CreateMode;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// A group: each member is an ephemeral child `<path>/<name>` holding the
/// member's data, so a member whose process dies (its session ends) leaves the
/// group by itself. The recipes page builds on this idiom (its "ephemeral
/// nodes" and the group-membership example of ZooKeeper's programmer's guide;
/// Curator's `GroupMember`).
///
/// [`members`](Self::members) lists the group; [`wait_for_change`](Self::wait_for_change)
/// is the membership watch: it waits, through a child watch with a per-watch
/// watcher, until the membership differs from what the caller saw.
///
/// # zklock differs here
/// The membership watch is a blocking, bounded wait rather than a callback: no
/// library code runs on the event thread, and the caller re-reads at its pace
/// (changes between two calls are never missed: the wait compares with what
/// the caller saw, not with the last event).
pub struct Group {
    waiter: NodeWaiter,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.waiter.fmt_as(f, "Group")
    }
}

/// This process's membership of a [`Group`]: [`leave`](Self::leave) ends it,
/// and so does dropping it (in the background) or the session's end.
///
/// A member is bound to the session that joined: after that session expired
/// (also when `with_session_renewal` opened a new one), `set_data` and `leave`
/// return `SessionExpired` and never touch the node of whoever joined under
/// the same name since; its writes and its delete are also guarded by the
/// node's creation zxid and version. Join again to be a member of the new
/// session.
#[must_use = "if unused the member leaves the group at once"]
pub struct Member {
    node: Option<SessionNode>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("node", &self.node.as_ref().map(SessionNode::path))
            .finish()
    }
}

impl Group {
    /// The group at `path` (created with parents on the first join).
    ///
    /// # Errors
    /// `BadArguments` for an invalid path.
    pub fn new(zkw: &ZooKeeperWatcher, path: &str) -> Result<Group> {
        let waiter = NodeWaiter::new(zkw, path)?;
        Ok(Group { waiter })
    }

    crate::engine::wait::with_wait_hook!();

    /// The group's node.
    pub fn path(&self) -> &str {
        &self.waiter.path
    }

    /// Joins as `name` with `data` (an ephemeral node of this session).
    ///
    /// # Errors
    /// `NodeExists` when a live member already has `name`; `BadArguments` for a
    /// name with a `/`; session errors. A join that fails leaves
    /// nothing: a node the server may have made for a create whose reply
    /// was lost is found by its mark and removed once the connection is back.
    pub fn join(&self, name: &str, data: &[u8]) -> Result<Member> {
        let node = zkutil::join_znode(self.path(), name);
        crate::path::validate(&node)?;
        if name.contains('/') {
            return Err(crate::Error::BadArguments(format!(
                "a member name has no '/': {name}"
            )));
        }
        let call = CallSession::begin(&self.waiter.zkw)?;
        let node = SessionNode::create(
            &call,
            &node,
            data,
            CreateMode::Ephemeral,
            Parents::Persistent,
        )?;
        Ok(Member { node: Some(node) })
    }

    /// Joins with a name the group makes up (kazoo's `Party`): an ephemeral
    /// sequential child `<path>/p-<tag><sequence>` holding `data`. The name is
    /// [`Member::node`]'s last segment.
    ///
    /// # Errors
    /// Session errors. A join that fails leaves
    /// nothing: a node the server may have made for a create whose reply
    /// was lost is found by its tag and removed once the connection is back.
    pub fn join_party(&self, data: &[u8]) -> Result<Member> {
        let call = CallSession::begin(&self.waiter.zkw)?;
        let prefix = zkutil::join_znode(self.path(), PARTY_PREFIX);
        let node = SessionNode::create(
            &call,
            &prefix,
            data,
            CreateMode::EphemeralSequential,
            Parents::Persistent,
        )?;
        Ok(Member { node: Some(node) })
    }

    /// The members' names, sorted (empty when the group does not exist).
    ///
    /// # Errors
    /// Session errors.
    pub fn members(&self) -> Result<Vec<String>> {
        let mut c = children_or_none(self.waiter.zkw.recoverable_zookeeper(), self.path())?;
        c.sort();
        Ok(c)
    }

    /// A member's data, `None` when there is no such member.
    ///
    /// # Errors
    /// Session errors.
    pub fn member_data(&self, name: &str) -> Result<Option<Vec<u8>>> {
        match self
            .waiter
            .zkw
            .recoverable_zookeeper()
            .get_data(&zkutil::join_znode(self.path(), name), false)
        {
            Ok((d, _)) => Ok(Some(d)),
            Err(e) if e.is(ZkError::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The membership watch: waits at most `timeout` until the members differ
    /// from `seen` (sorted names, as [`members`](Self::members) returns them):
    /// `Ok(Some(members))` the new membership, `Ok(None)` unchanged in time.
    ///
    /// # Errors
    /// `SessionExpired`, `Closed`; `ConnectionLoss` when the connection stays
    /// down for a session timeout.
    pub fn wait_for_change(
        &self,
        seen: &[String],
        timeout: Duration,
    ) -> Result<Option<Vec<String>>> {
        let bounds = Bounds::new(Some(timeout));
        self.waiter.wait_until(bounds, |rzk, watcher| {
            let mut now = match rzk.get_children_watch(self.path(), watcher) {
                Ok(c) => c,
                Err(e) if e.is(ZkError::NoNode) => {
                    rzk.create_with_parents(self.path(), &[])?;
                    return Ok(Look::Again);
                }
                Err(e) => return Err(e),
            };
            now.sort();
            Ok(if now != seen {
                Look::Done(now)
            } else {
                Look::Wait
            })
        })
    }
}

impl Member {
    /// The member's node.
    pub fn node(&self) -> &str {
        self.node
            .as_ref()
            .map(SessionNode::path)
            .unwrap_or_default()
    }

    /// Replaces the member's data.
    ///
    /// # Errors
    /// `SessionExpired` once the session that joined expired (renewed or
    /// not); `NoNode` when the member's node is gone (or another node took its
    /// name); session errors.
    pub fn set_data(&self, data: &[u8]) -> Result<()> {
        match &self.node {
            Some(n) => n.set_data(data).map(drop),
            None => Err(crate::Error::zk(ZkError::NoNode, self.node())),
        }
    }

    /// Leaves the group: deletes the member's node (no error when it is
    /// already gone).
    ///
    /// # Errors
    /// `SessionExpired` once the session that joined expired (its node went
    /// with it; after a renewal the node under this name, if any, is someone
    /// else's and is left alone); recoverable errors after the retries (the
    /// node then goes with the session).
    pub fn leave(mut self) -> Result<()> {
        match self.node.take() {
            Some(n) => n.delete(),
            None => Ok(()),
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            // Retried after a reconnect; nothing to do once the session ended.
            node.remove_in_background();
        }
    }
}
