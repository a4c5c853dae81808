//! HBase's `ZKLeaderManager`, herd-free on [`LeaderElectionSupport`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::election::{ElectionState, LeaderElectionSupport};
use crate::error::Result;
use crate::watcher::ZooKeeperWatcher;

#[derive(Default)]
struct Signal {
    m: Mutex<()>,
    cv: Condvar,
}

/// HBase's `ZKLeaderManager`: `start`, `wait_to_become_leader`,
/// `has_leadership`, `abdicate` (`stepDownAsLeader`), `stop`.
///
/// zklock differs here: HBase creates one ephemeral leader znode and every
/// candidate watches it (a herd: each leader change wakes all candidates, who
/// race to create it). This manager is a [`LeaderElectionSupport`] under
/// `leader_znode` (Java's `n_<seq>` offers holding `identifier`): each
/// candidate watches only the offer ahead, one change wakes one candidate, and
/// leadership passes in offer order. The leader's session in doubt makes
/// [`has_leadership`](Self::has_leadership) false at once.
pub struct ZkLeaderManager {
    zkw: ZooKeeperWatcher,
    znode: String,
    identifier: String,
    election: Mutex<Option<LeaderElectionSupport>>,
    stopped: AtomicBool,
    signal: Arc<Signal>,
}

impl std::fmt::Debug for ZkLeaderManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkLeaderManager")
            .field("znode", &self.znode)
            .field("identifier", &self.identifier)
            .field("stopped", &self.stopped.load(Ordering::SeqCst))
            .finish()
    }
}

impl ZkLeaderManager {
    /// HBase's `new ZKLeaderManager(watcher, leaderZNode, identifier, candidate)`.
    pub fn new(zkw: &ZooKeeperWatcher, leader_znode: &str, identifier: &str) -> Self {
        ZkLeaderManager {
            zkw: zkw.clone(),
            znode: leader_znode.to_string(),
            identifier: identifier.to_string(),
            election: Mutex::new(None),
            stopped: AtomicBool::new(false),
            signal: Arc::default(),
        }
    }

    /// HBase's `start()`: creates `leader_znode` (with parents) if needed.
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn start(&self) -> Result<()> {
        crate::zkutil::create_with_parents(&self.zkw, &self.znode)
    }

    /// HBase's `waitToBecomeLeader()`: offers this candidate (once) and blocks
    /// until it leads or [`stop`](Self::stop) is called. `Ok(false)` when
    /// stopped.
    ///
    /// # Errors
    /// `SessionExpired`/`Closed`; ZooKeeper errors.
    pub fn wait_to_become_leader(&self) -> Result<bool> {
        loop {
            if self.stopped.load(Ordering::SeqCst) {
                return Ok(false);
            }
            {
                let mut e = self.election.lock();
                let fresh = match &*e {
                    None => true,
                    Some(c) => matches!(c.state(), ElectionState::Failed | ElectionState::Stop),
                };
                if fresh {
                    let c = LeaderElectionSupport::new(&self.zkw, &self.znode, &self.identifier)?;
                    let s = self.signal.clone();
                    c.add_listener(move |_| {
                        let _g = s.m.lock();
                        s.cv.notify_all();
                    });
                    c.start()?;
                    *e = Some(c);
                }
                if e.as_ref().is_some_and(|c| c.is_leader()) {
                    return Ok(true);
                }
            }
            self.zkw.check_session()?;
            let mut g = self.signal.m.lock();
            self.signal.cv.wait_for(&mut g, Duration::from_millis(200));
        }
    }

    /// HBase's `hasLeadership()`.
    pub fn has_leadership(&self) -> bool {
        self.election.lock().as_ref().is_some_and(|c| c.is_leader())
    }

    /// HBase's `stepDownAsLeader()`: withdraws this candidate's offer if it
    /// leads (the next candidate takes over). A later
    /// [`wait_to_become_leader`](Self::wait_to_become_leader) offers again.
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn abdicate(&self) -> Result<()> {
        let mut e = self.election.lock();
        if e.as_ref().is_some_and(|c| c.is_leader()) {
            let c = e.take().expect("checked");
            return c.stop();
        }
        Ok(())
    }

    /// HBase's `stop(why)`: ends a `wait_to_become_leader` and withdraws the
    /// offer, leading or not.
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn stop(&self) -> Result<()> {
        self.stopped.store(true, Ordering::SeqCst);
        {
            let _g = self.signal.m.lock();
            self.signal.cv.notify_all();
        }
        let c = self.election.lock().take();
        match c {
            Some(c) => c.stop(),
            None => Ok(()),
        }
    }

    /// Whether [`stop`](Self::stop) was called (HBase's `isStopped`).
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}
