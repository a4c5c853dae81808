//! Session-bound participant nodes ([`SessionNode`]).
//!
//! A node a recipe creates for its caller (a group member, a barrier entry, a
//! queue claim) is a [`SessionNode`]: it remembers the session that created it
//! and its creation zxid, and every later write or delete of it goes through
//! that session only (after a renewal: `SessionExpired`) and is guarded by the
//! node's creation zxid and version, so that it never touches a node of
//! another session that took the same name.

use log::debug;

use crate::client::CreateMode;
use crate::deadline::Deadline;
use crate::engine::call::CallSession;
use crate::engine::owned::{
    create_owned, create_tagged, remove_in_background, with_parents, Attempt, Guard, NodeSpec,
    OwnerMark, Parents, Removal,
};
use crate::error::{Error, Result, ZkError};
use crate::recoverable::tagged_prefix;
use crate::recoverable::RecoverableZooKeeper;
use crate::types::Stat;

/// A node a recipe created for its caller, bound to the session that created
/// it (see the module docs).
#[derive(Debug)]
pub(crate) struct SessionNode {
    call: CallSession,
    path: String,
    /// The session that created it (for the logs: the guard is `call`).
    session_id: i64,
    czxid: i64,
}

impl SessionNode {
    /// Creates `path` (`mode`, with a fresh [`OwnerMark`]; a sequential
    /// name with a fresh tag, `<path><tag>-<sequence>`) in `call`'s session;
    /// see [`create_marked`](Self::create_marked). A create that gives up
    /// with its outcome unknown (a lost reply, then every lookup failing on
    /// the connection) leaves nothing: the node the server may have made is
    /// found by its mark or tag and removed once the connection is back
    /// (both are this call's alone, so no later create is taken for it).
    pub(crate) fn create(
        call: &CallSession,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        parents: Parents,
    ) -> Result<SessionNode> {
        let zkw = call.watcher();
        if mode.is_sequential() {
            let rzk = call.rzk();
            let tagged = tagged_prefix(path);
            return match create_tagged(rzk, &tagged, data, mode, parents, None) {
                Ok(made) => Ok(SessionNode::adopt(call, made.path, &made.stat)),
                Err(e) => {
                    if e.is_retryable() {
                        remove_in_background(zkw, Attempt::Tag(tagged));
                    }
                    Err(e)
                }
            };
        }
        let mark = OwnerMark::new();
        let made = Self::create_marked(call, path, data, mode, parents, &mark);
        if made.as_ref().is_err_and(|e| e.is_retryable()) {
            mark.unsettled(path, mode, call.session_id(), zkw);
        }
        made.map(|(node, _)| node)
    }

    /// Creates `path` (`mode`) in `call`'s session, `data` with the handle's
    /// metadata prefix (as every write through `RecoverableZooKeeper`), the
    /// missing parents made as `parents` says ([`Parents::None`]: none, the
    /// `NoNode` returned); returns the node and its `Stat`.
    /// After a lost reply the node is found again by a mark only this
    /// creator wrote: a fixed name by `mark` (the crate's one way to own a
    /// node, `engine/owned.rs`), also when the create finds `NodeExists` (a node
    /// with the mark is adopted as it is now: its `Stat` may show later
    /// writes); a sequential name by `RecoverableZooKeeper`'s tag, unique to
    /// the call (`<path><tag>-<sequence>`, HBase's layout kept).
    ///
    /// # Errors
    /// `NodeExists` for a node without the mark; ZooKeeper errors after
    /// retries.
    pub(crate) fn create_marked(
        call: &CallSession,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        parents: Parents,
        mark: &OwnerMark,
    ) -> Result<(SessionNode, Stat)> {
        let rzk = call.rzk();
        let (path, stat) = if mode.is_sequential() {
            with_parents(rzk, path, parents, || {
                rzk.create2(path, data, rzk.acl_for(path), mode)
            })?
        } else {
            let data = rzk.encode(data);
            let spec = NodeSpec {
                path,
                data: &data,
                acl: rzk.acl_for(path),
                mode,
                ttl: None,
                parents,
            };
            create_owned(rzk, &spec, mark)?
        };
        Ok((SessionNode::adopt(call, path.clone(), &stat), stat))
    }

    /// A node of `call`'s session created elsewhere (a tagged sequential
    /// create), with the `Stat` of its creation.
    pub(crate) fn adopt(call: &CallSession, path: String, stat: &Stat) -> SessionNode {
        SessionNode {
            call: call.clone(),
            path,
            session_id: call.session_id(),
            czxid: stat.czxid,
        }
    }

    /// The node's path.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The session the node belongs to.
    pub(crate) fn session(&self) -> &CallSession {
        &self.call
    }

    /// The node's `Stat` now, when it is still this node (same creation
    /// zxid); `Ok(None)` when it is gone or another node took its name.
    ///
    /// # Errors
    /// `SessionExpired` once its session expired (also after a renewal).
    fn mine(&self, rzk: &RecoverableZooKeeper) -> Result<Option<Stat>> {
        self.call.check()?;
        match rzk.exists(&self.path, false)? {
            Some(stat) if stat.czxid == self.czxid => Ok(Some(stat)),
            Some(_) => {
                debug!(
                    "{} (session {:#x}) was replaced by another node: left alone",
                    self.path, self.session_id
                );
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Writes `data` into the node, through `RecoverableZooKeeper` (HBase's
    /// metadata prefix), guarded by its creation zxid and the version read.
    ///
    /// # Errors
    /// `SessionExpired` once the node's session expired (also after a
    /// renewal); `NoNode` about the node when it is gone (or another node now
    /// has its name); `BadVersion` when it was written to meanwhile.
    pub(crate) fn set_data(&self, data: &[u8]) -> Result<Stat> {
        let Some(stat) = self.mine(self.call.rzk())? else {
            return Err(Error::zk(ZkError::NoNode, self.path.clone()));
        };
        self.call
            .rzk()
            .set_data(&self.path, data, Some(stat.version))
    }

    /// Deletes the node, guarded as [`set_data`](Self::set_data); `Ok(())`
    /// when it is gone already (or another node has its name: left alone).
    ///
    /// # Errors
    /// `SessionExpired` once the node's session expired (its ephemeral node
    /// went with it); ZooKeeper errors after retries.
    pub(crate) fn delete(&self) -> Result<()> {
        self.delete_by(Deadline::never())
    }

    /// [`delete`](Self::delete), every call ended by `deadline`.
    pub(crate) fn delete_by(&self, deadline: Deadline) -> Result<()> {
        self.call.check()?;
        let rzk = self.call.rzk().with_deadline(deadline);
        Removal::new(self.path.as_str(), Guard::Created(self.czxid))
            .run(&rzk)
            .map(drop)
    }

    /// Removes the node without waiting (a drop): in the background, guarded
    /// as [`delete`](Self::delete) (its creation zxid and version, so it never
    /// removes another node that took its name, not even one of the same
    /// session), retried after a reconnect; nothing to do once its session
    /// has ended (an ephemeral node went with it).
    pub(crate) fn remove_in_background(self) {
        if self.call.check().is_err() {
            return;
        }
        Removal::new(self.path, Guard::Created(self.czxid)).in_session(
            self.call.rzk().zookeeper(),
            &self.call.watcher().downgrade(),
        );
    }
}
