//! `TwoPhaseCommit`: the "Two-phased Commit" recipe.

use std::time::Duration;

use super::double_barrier::delete_if_present;
use super::waiting::{Bounds, Waiter};
use crate::error::{Error, Result};
use crate::recoverable::RecoverableZooKeeper;
use crate::types::{Acl, CreateMode, Stat};
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// The ephemeral child a site keeps under its node while it takes part.
pub const ALIVE_NODE: &str = "alive";

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
pub struct TwoPhaseCommit {
    zkw: ZooKeeperWatcher,
    path: String,
    sites: Vec<String>,
    waiter: Waiter,
}

impl std::fmt::Debug for TwoPhaseCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwoPhaseCommit")
            .field("path", &self.path)
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
        crate::path::validate(path)?;
        if sites.is_empty() || sites.iter().any(|s| s.is_empty() || s.contains('/')) {
            return Err(Error::BadArguments(format!("bad site names: {sites:?}")));
        }
        let rzk = zkw.recoverable_zookeeper();
        if let Some(parent) = zkutil::get_parent(path) {
            rzk.create_with_parents(parent, &[])?;
        }
        rzk.create(path, &[], Acl::open_unsafe(), CreateMode::Persistent)?;
        for s in sites {
            rzk.create(
                &zkutil::join_znode(path, s),
                &[],
                Acl::open_unsafe(),
                CreateMode::Persistent,
            )?;
        }
        Ok(TwoPhaseCommit {
            zkw: zkw.clone(),
            path: path.to_string(),
            sites: sites.iter().map(|s| s.to_string()).collect(),
            waiter: Waiter::default(),
        })
    }

    /// A site's step: opens the transaction at `path` (its sites are its
    /// children).
    ///
    /// # Errors
    /// `NoNode` when there is no such transaction; session errors.
    pub fn open(zkw: &ZooKeeperWatcher, path: &str) -> Result<TwoPhaseCommit> {
        crate::path::validate(path)?;
        let mut sites = zkw.recoverable_zookeeper().get_children(path, false)?;
        sites.sort();
        Ok(TwoPhaseCommit {
            zkw: zkw.clone(),
            path: path.to_string(),
            sites,
            waiter: Waiter::default(),
        })
    }

    /// The transaction node.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The sites, sorted.
    pub fn sites(&self) -> &[String] {
        &self.sites
    }

    fn site_node(&self, site: &str) -> Result<String> {
        if !self.sites.iter().any(|s| s == site) {
            return Err(Error::BadArguments(format!(
                "{site} is not a site of {}",
                self.path
            )));
        }
        Ok(zkutil::join_znode(&self.path, site))
    }

    /// `site` takes part: an ephemeral `alive` node under its node, so that its
    /// session's end before it votes aborts the transaction.
    ///
    /// # Errors
    /// `BadArguments` for an unknown site; `NodeExists` when it already joined;
    /// session errors.
    pub fn join(&self, site: &str) -> Result<()> {
        let node = zkutil::join_znode(&self.site_node(site)?, ALIVE_NODE);
        self.zkw
            .recoverable_zookeeper()
            .create(&node, &[], Acl::open_unsafe(), CreateMode::Ephemeral)
            .map(drop)
    }

    /// `site` votes by writing its node (the other sites' watches fire).
    ///
    /// # Errors
    /// `BadArguments` for an unknown site; session errors.
    pub fn vote(&self, site: &str, vote: Vote) -> Result<()> {
        let node = self.site_node(site)?;
        self.zkw
            .recoverable_zookeeper()
            .set_data(&node, vote.as_bytes(), None)
            .map(drop)
    }

    /// The outcome now, `None` while undecided.
    ///
    /// # Errors
    /// Session errors.
    pub fn outcome(&self) -> Result<Option<Outcome>> {
        self.decide(self.zkw.recoverable_zookeeper(), false)
    }

    /// Waits at most `timeout` for the outcome: `Ok(None)` undecided in time.
    ///
    /// # Errors
    /// `SessionExpired`, `Closed`; `ConnectionLoss` when the connection stays
    /// down for a session timeout; `NoNode` when the transaction was deleted.
    pub fn wait_outcome(&self, timeout: Duration) -> Result<Option<Outcome>> {
        let bounds = Bounds::new(Some(timeout));
        match self.wait_loop(bounds) {
            Err(e) if bounds.cut_short(&e) => Ok(None),
            other => other,
        }
    }

    fn wait_loop(&self, bounds: Bounds) -> Result<Option<Outcome>> {
        let rzk = self.zkw.recoverable_zookeeper().with_deadline(bounds.calls);
        loop {
            self.zkw.check_session()?;
            self.waiter.arm();
            if let Some(o) = self.decide(&rzk, true)? {
                return Ok(Some(o));
            }
            if !self.waiter.wait(&self.zkw, bounds.wait, &self.path)? {
                return Ok(None);
            }
        }
    }

    /// Reads every site (watching the undecided ones when `watch`): abort as
    /// soon as one aborted or died, commit when all committed.
    fn decide(&self, rzk: &RecoverableZooKeeper, watch: bool) -> Result<Option<Outcome>> {
        let mut all_commit = true;
        for s in &self.sites {
            let node = zkutil::join_znode(&self.path, s);
            let (data, stat) = if watch {
                rzk.get_data_watch(&node, self.waiter.watcher())?
            } else {
                rzk.get_data(&node, false)?
            };
            let mut state = site_state(&data, &stat);
            if state == SiteState::Pending && watch {
                // The `alive` node's deletion is a child event of the site node.
                rzk.get_children_watch(&node, self.waiter.watcher())?;
                let (data, stat) = rzk.get_data(&node, false)?;
                state = site_state(&data, &stat);
            }
            match state {
                SiteState::Voted(Vote::Abort) | SiteState::Died => return Ok(Some(Outcome::Abort)),
                SiteState::Voted(Vote::Commit) => {}
                SiteState::Pending => all_commit = false,
            }
        }
        Ok(all_commit.then_some(Outcome::Commit))
    }

    /// Removes the transaction's nodes (the coordinator, once every site knows
    /// the outcome). No error when they are gone.
    ///
    /// # Errors
    /// Session errors; `NotEmpty` when a site joins meanwhile.
    pub fn delete(&self) -> Result<()> {
        let rzk = self.zkw.recoverable_zookeeper();
        for s in &self.sites {
            let node = zkutil::join_znode(&self.path, s);
            delete_if_present(rzk, &zkutil::join_znode(&node, ALIVE_NODE))?;
            delete_if_present(rzk, &node)?;
        }
        delete_if_present(rzk, &self.path)
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
