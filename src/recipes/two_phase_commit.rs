//! `TwoPhaseCommit`: the "Two-phased Commit" recipe.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::layout::ALIVE_NODE;
use super::node::{delete_if_present, Look, NodeWaiter};
use crate::engine::call::CallSession;
use crate::engine::owned::{with_parents, Parents};
use crate::engine::session_node::SessionNode;
use crate::engine::wait::Bounds;
use crate::error::{Error, Result, ZkError};
use crate::recoverable::RecoverableZooKeeper;
use crate::types::{CreateMode, Op, Stat, Watcher};
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// A site's vote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vote {
    /// The site can commit.
    Commit,
    /// The site cannot commit: the transaction aborts.
    Abort,
}

impl Vote {
    fn as_bytes(self) -> &'static [u8] {
        match self {
            Vote::Commit => b"commit",
            Vote::Abort => b"abort",
        }
    }
}

/// The decision every site reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Every site voted commit.
    Commit,
    /// A site voted abort, or died before voting.
    Abort,
}

/// What one site's node says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SiteState {
    Voted(Vote),
    /// Joined (its `alive` node was created) and gone without a vote.
    Died,
    Pending,
}

fn site_state(data: &[u8], stat: &Stat) -> SiteState {
    match data {
        b"commit" => SiteState::Voted(Vote::Commit),
        b"abort" => SiteState::Voted(Vote::Abort),
        // `alive` was created and deleted: cversion counts both.
        _ if stat.num_children == 0 && stat.cversion > 0 => SiteState::Died,
        _ => SiteState::Pending,
    }
}

/// A transaction: the "Two-phased Commit" recipe of ZooKeeper's recipes page.
///
/// The coordinator [`create`](Self::create)s the transaction node with one child
/// per site, left empty. Each site [`open`](Self::open)s it, [`join`](Self::join)s
/// (an ephemeral `alive` child under its node, so its death is seen) and
/// [`vote`](Self::vote)s by writing its node; every site (and the coordinator)
/// learns the outcome from the nodes with [`wait_outcome`](Self::wait_outcome):
/// commit when all voted commit, abort as soon as one voted abort or died
/// (joined, then its session ended, before voting).
///
/// # zklock differs here
/// - The page leaves a dead site to timeouts; here the `alive` node makes a
///   death an abort as soon as the server ends its session. A site that never
///   joins is still only caught by the waits' timeouts.
/// - [`delete`](Self::delete) removes the transaction's nodes once decided (the
///   page leaves them).
/// - The outcome is final once anyone has read it. A site votes once, in one
///   `multi` that checks its `alive` node (the site is still joined, in the
///   session that joined) and writes its node at version 0 (no vote yet): a
///   second vote, or a vote of a site recorded dead, fails with `BadVersion`.
///   A reader that finds a site dead records it (`abort` written at version
///   0) before it reports Abort, so that site cannot vote Commit later from a
///   new session.
/// - [`join`](Self::join) binds the site to the session that joined: after
///   that session expired (also with `with_session_renewal`), `vote` returns
///   `SessionExpired`.
pub struct TwoPhaseCommit {
    /// The watcher, the transaction node and the waits on it.
    waiter: NodeWaiter,
    sites: Vec<String>,
    /// The sites this instance joined, with their `alive` nodes.
    joined: Mutex<Vec<(String, SessionNode)>>,
}

impl std::fmt::Debug for TwoPhaseCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwoPhaseCommit")
            .field("path", &self.waiter.path)
            .field("sites", &self.sites)
            .finish()
    }
}

impl TwoPhaseCommit {
    /// The coordinator's step: creates the transaction node `path` (with
    /// parents) and one empty child per site.
    ///
    /// # Errors
    /// `NodeExists` when the transaction exists; `BadArguments` for bad names
    /// or no site; session errors.
    pub fn create(zkw: &ZooKeeperWatcher, path: &str, sites: &[&str]) -> Result<TwoPhaseCommit> {
        let waiter = NodeWaiter::new(zkw, path)?;
        if sites.is_empty() || sites.iter().any(|s| s.is_empty() || s.contains('/')) {
            return Err(Error::BadArguments(format!("bad site names: {sites:?}")));
        }
        let rzk = zkw.recoverable_zookeeper();
        with_parents(rzk, path, Parents::Persistent, || {
            rzk.create(path, &[], rzk.acl_for(path), CreateMode::Persistent)
        })?;
        for s in sites {
            let site = zkutil::join_znode(path, s);
            rzk.create(&site, &[], rzk.acl_for(&site), CreateMode::Persistent)?;
        }
        Ok(TwoPhaseCommit {
            waiter,
            sites: sites.iter().map(|s| s.to_string()).collect(),
            joined: Mutex::new(Vec::new()),
        })
    }

    /// A site's step: opens the transaction at `path` (its sites are its
    /// children).
    ///
    /// # Errors
    /// `NoNode` when there is no such transaction; session errors.
    pub fn open(zkw: &ZooKeeperWatcher, path: &str) -> Result<TwoPhaseCommit> {
        let waiter = NodeWaiter::new(zkw, path)?;
        let mut sites = zkw.recoverable_zookeeper().get_children(path, false)?;
        sites.sort();
        Ok(TwoPhaseCommit {
            waiter,
            sites,
            joined: Mutex::new(Vec::new()),
        })
    }

    crate::engine::wait::with_wait_hook!();

    /// The transaction node.
    pub fn path(&self) -> &str {
        &self.waiter.path
    }

    /// The sites, sorted.
    pub fn sites(&self) -> &[String] {
        &self.sites
    }

    fn site_node(&self, site: &str) -> Result<String> {
        if !self.sites.iter().any(|s| s == site) {
            return Err(Error::BadArguments(format!(
                "{site} is not a site of {}",
                self.waiter.path
            )));
        }
        Ok(zkutil::join_znode(&self.waiter.path, site))
    }

    /// `site` takes part: an ephemeral `alive` node under its node, so that its
    /// session's end before it votes aborts the transaction. The site is bound
    /// to this session (see [`vote`](Self::vote)).
    ///
    /// Only the `alive` node is created: a transaction the coordinator
    /// deleted (or never created) is not brought back by a late join.
    ///
    /// # Errors
    /// `BadArguments` for an unknown site; `NoNode` about the transaction
    /// path when the transaction (or the site's node) is gone: deleted by
    /// the coordinator, nothing created; `NodeExists` when it already
    /// joined; session errors. A join that fails leaves
    /// nothing: a node the server may have made for a create whose reply
    /// was lost is found by its mark and removed once the connection is back.
    pub fn join(&self, site: &str) -> Result<()> {
        let node = zkutil::join_znode(&self.site_node(site)?, ALIVE_NODE);
        let call = CallSession::begin(&self.waiter.zkw)?;
        let alive =
            match SessionNode::create(&call, &node, &[], CreateMode::Ephemeral, Parents::None) {
                Err(e) if e.is(ZkError::NoNode) => {
                    return Err(Error::zk(ZkError::NoNode, &self.waiter.path))
                }
                other => other?,
            };
        self.joined.lock().push((site.to_string(), alive));
        Ok(())
    }

    /// `site` votes by writing its node (the other sites' watches fire), once:
    /// one `multi` checks that the site is still joined (its `alive` node, in
    /// the session that joined through this instance) and writes the vote at
    /// version 0.
    ///
    /// # Errors
    /// `BadArguments` for an unknown site, or one this instance has not
    /// joined; `SessionExpired` when the session that joined has expired
    /// (renewed or not); `BadVersion` about the site's node when it voted
    /// already or was recorded dead; `NoNode` when its `alive` node is gone;
    /// session errors.
    pub fn vote(&self, site: &str, vote: Vote) -> Result<()> {
        let node = self.site_node(site)?;
        let call = {
            let joined = self.joined.lock();
            match joined.iter().find(|(s, _)| s == site) {
                Some((_, alive)) => alive.session().clone(),
                None => {
                    return Err(Error::BadArguments(format!(
                        "{site} has not joined {} through this instance",
                        self.waiter.path
                    )))
                }
            }
        };
        call.check()?;
        let ops = [
            Op::Check {
                path: zkutil::join_znode(&node, ALIVE_NODE),
                version: None,
            },
            Op::SetData {
                path: node.clone(),
                data: vote.as_bytes().to_vec(),
                version: Some(0),
            },
        ];
        match call.rzk().zookeeper().multi(&ops) {
            Ok(_) => Ok(()),
            Err(Error::Multi { index, code, .. }) => {
                let path = if index == 0 {
                    zkutil::join_znode(&node, ALIVE_NODE)
                } else {
                    node
                };
                Err(Error::zk(code, path))
            }
            Err(e) => Err(e),
        }
    }

    /// The outcome now, `None` while undecided.
    ///
    /// # Errors
    /// Session errors.
    pub fn outcome(&self) -> Result<Option<Outcome>> {
        self.decide(self.waiter.zkw.recoverable_zookeeper(), None)
    }

    /// Waits at most `timeout` for the outcome: `Ok(None)` undecided in time.
    ///
    /// # Errors
    /// `SessionExpired`, `Closed`; `ConnectionLoss` when the connection stays
    /// down for a session timeout; `NoNode` when the transaction was deleted.
    pub fn wait_outcome(&self, timeout: Duration) -> Result<Option<Outcome>> {
        self.waiter
            .wait_until(Bounds::new(Some(timeout)), |rzk, watcher| {
                Ok(match self.decide(rzk, Some(watcher))? {
                    Some(o) => Look::Done(o),
                    None => Look::Wait,
                })
            })
    }

    /// Reads every site (watching the undecided ones with `watch`'s
    /// watcher): abort as soon as one aborted or died, commit when all
    /// committed.
    fn decide(
        &self,
        rzk: &RecoverableZooKeeper,
        watch: Option<&Arc<dyn Watcher>>,
    ) -> Result<Option<Outcome>> {
        let mut all_commit = true;
        for s in &self.sites {
            let node = zkutil::join_znode(&self.waiter.path, s);
            let (data, mut stat) = match watch {
                Some(watcher) => rzk.get_data_watch(&node, watcher)?,
                None => rzk.get_data(&node, false)?,
            };
            let mut state = site_state(&data, &stat);
            if let (SiteState::Pending, Some(watcher)) = (state, watch) {
                // The `alive` node's deletion is a child event of the site node.
                rzk.get_children_watch(&node, watcher)?;
                let (data, now) = rzk.get_data(&node, false)?;
                stat = now;
                state = site_state(&data, &stat);
            }
            if state == SiteState::Died {
                state = self.record_death(rzk, &node, &stat)?;
            }
            match state {
                SiteState::Voted(Vote::Abort) | SiteState::Died => return Ok(Some(Outcome::Abort)),
                SiteState::Voted(Vote::Commit) => {}
                SiteState::Pending => all_commit = false,
            }
        }
        Ok(all_commit.then_some(Outcome::Commit))
    }

    /// A site found dead (joined, gone, no vote): writes `abort` into its
    /// node at the version read (0: no vote), so that no later vote can change
    /// the outcome once this reader reports it. When the site voted meanwhile
    /// (`BadVersion`), its node is read again.
    fn record_death(
        &self,
        rzk: &RecoverableZooKeeper,
        node: &str,
        stat: &Stat,
    ) -> Result<SiteState> {
        match rzk
            .zookeeper()
            .set_data(node, Vote::Abort.as_bytes(), Some(stat.version))
        {
            Ok(_) => Ok(SiteState::Died),
            Err(e) if e.is(ZkError::BadVersion) => {
                let (data, stat) = rzk.get_data(node, false)?;
                Ok(site_state(&data, &stat))
            }
            Err(e) => Err(e),
        }
    }

    /// Removes the transaction's nodes (the coordinator, once every site knows
    /// the outcome). No error when they are gone.
    ///
    /// # Errors
    /// Session errors; `NotEmpty` when a site joins meanwhile.
    pub fn delete(&self) -> Result<()> {
        let rzk = self.waiter.zkw.recoverable_zookeeper();
        for s in &self.sites {
            let node = zkutil::join_znode(&self.waiter.path, s);
            delete_if_present(rzk, &zkutil::join_znode(&node, ALIVE_NODE))?;
            delete_if_present(rzk, &node)?;
        }
        delete_if_present(rzk, &self.waiter.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_that_joined_and_left_without_voting_died() {
        let mut st = Stat::default();
        assert_eq!(site_state(b"", &st), SiteState::Pending);
        st.num_children = 1;
        st.cversion = 1;
        assert_eq!(site_state(b"", &st), SiteState::Pending);
        st.num_children = 0;
        st.cversion = 2;
        assert_eq!(site_state(b"", &st), SiteState::Died);
        assert_eq!(site_state(b"commit", &st), SiteState::Voted(Vote::Commit));
        assert_eq!(site_state(b"abort", &st), SiteState::Voted(Vote::Abort));
    }
}
