//! What every leadership candidate shares: making its offer (the ephemeral
//! sequential node it queues with) so that a create whose reply was lost finds
//! this candidate's own node again, and nobody else's.
//!
//! A lost create reply leaves the caller not knowing whether its node exists.
//! The retry looks for it first, after a `sync` (the reconnect may have landed
//! on a follower that has not applied the create yet: a listing there would
//! hide the node, and the candidate would queue behind its own orphan), by a
//! mark only this create call can have made:
//!
//! - [`OfferMark::Owner`]: a name prefix unique to the call (Curator's
//!   protected `_c_<uuid>-`, an [`OwnerMark`]'s);
//! - [`OfferMark::Serial`]: for a layout with no room for a tag (Java's
//!   `LeaderElectionSupport` parses everything after `n_` as the sequence, and
//!   reads the data as the host name): the offers of one session on one root
//!   are made one at a time in the process, and the node sought is the one of
//!   this session created after the last zxid the client saw before the first
//!   try. Never "the first node owned by this session": two candidates of one
//!   session are told apart, and a second match is refused with a typed error
//!   rather than adopted.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use parking_lot::{Condvar, Mutex};

use super::rounds::create_in_session;
use crate::client::{Stat, ZooKeeper};
use crate::engine::owned::{
    remove_found, synced_children, with_parents, OwnerMark, Parents, Unsettled,
};
use crate::error::{Error, Result, ZkError};
use crate::types::CreateMode;
use crate::watcher::{WeakZooKeeperWatcher, ZooKeeperWatcher};
use crate::zkutil;

/// How a retried create recognises its own node (see the module docs).
#[derive(Debug, Clone)]
pub(crate) enum OfferMark {
    /// Curator's protected name `_c_<uuid>-` (the name already carries the
    /// mark's prefix): found again by [`OwnerMark::find`], the one way to own
    /// a node.
    Owner(OwnerMark),
    /// The child of this session created after the zxid the client had seen
    /// before the first try; offers of one session on one root made one at a
    /// time in the process.
    Serial,
}

/// A candidate's offer: an ephemeral sequential child `name<sequence>` of
/// `root` holding `data`.
#[derive(Debug)]
pub(crate) struct Offer<'a> {
    /// The directory the candidates share.
    pub(crate) root: &'a str,
    /// The child's name before ZooKeeper's sequence.
    pub(crate) name: String,
    /// The offer's data.
    pub(crate) data: &'a [u8],
    /// How a retry finds the node of a create whose reply was lost.
    pub(crate) mark: OfferMark,
    /// How missing parents are made.
    pub(crate) parents: Parents,
}

impl Offer<'_> {
    /// Makes the offer, retried on connection loss (a lost reply is found
    /// again by the offer's mark, after a `sync`). Returns the node and the
    /// session it was made in.
    ///
    /// # Errors
    /// `SessionExpired` when the session ended (or was renewed) on the way;
    /// `RuntimeInconsistency` when two nodes of this session carry the mark
    /// (another process using this session, or a create still in flight from
    /// an earlier attempt that gave up): nothing is adopted then; ZooKeeper
    /// errors after retries.
    pub(crate) fn make(&self, zkw: &ZooKeeperWatcher) -> Result<(String, i64)> {
        zkw.check_session()?;
        let session = zkw.zookeeper().session_id();
        let _one_at_a_time = match self.mark {
            OfferMark::Serial => {
                let guard = SerialGuard::take(session, self.root);
                // An earlier offer's unsettled create goes first (its find
                // would take this offer for its own otherwise).
                let zk = zkw.zookeeper().pinned();
                guard.settle_pending(&zk, &zkw.downgrade(), &self.name)?;
                Some(guard)
            }
            OfferMark::Owner(_) => None,
        };
        // Read before the first create is sent: that create's zxid is larger.
        let mut floor = None;
        let mut sent = false;
        let made = create_in_session(zkw, |zk, retry| {
            let floor = *floor.get_or_insert_with(|| zk.last_zxid_seen());
            if retry {
                if let Some((found, _)) = self.find(zk, floor)? {
                    return Ok(found);
                }
            }
            sent = true;
            let node = zkutil::join_znode(self.root, &self.name);
            let rzk = zkw.recoverable_zookeeper();
            // The offer's own ACL (its name counts as its path, as for every
            // sequential node), not its directory's: a rule that lets the
            // others list the directory does not open the offers.
            let acl = rzk.acl_for(&node);
            with_parents(rzk, &node, self.parents, || {
                zk.create(&node, self.data, acl, CreateMode::EphemeralSequential)
            })
        });
        match (&made, floor) {
            // The outcome of a create sent is unknown: settled after the
            // reconnect (found and removed), never left in the queue.
            (Err(e), Some(floor)) if sent && e.is_retryable() => {
                self.unsettled(zkw, session, floor)
            }
            _ => {}
        }
        made
    }

    /// A create of this offer gave up with its outcome unknown: what it may
    /// have made is found and removed after the reconnect ([`Unsettled`]),
    /// in its session. A serial offer's settle holds the offers of the
    /// session on the root (the next offer there settles it first, if it
    /// comes before the reconnect).
    fn unsettled(&self, zkw: &ZooKeeperWatcher, session: i64, floor: i64) {
        let node = zkutil::join_znode(self.root, &self.name);
        match &self.mark {
            // A mark of this attempt only.
            OfferMark::Owner(mark) => {
                mark.clone()
                    .unsettled(&node, CreateMode::EphemeralSequential, session, zkw);
            }
            OfferMark::Serial => {
                let (root, name) = (self.root.to_string(), self.name.clone());
                pending().lock().insert((session, root.clone()), floor);
                Unsettled::new(node, move |zk, zkw| {
                    SerialGuard::take(session, &root).settle_pending(zk, zkw, &name)
                })
                .in_session(zkw, session);
            }
        }
    }

    /// The node an earlier try made, if any: `sync` first, then the listing.
    fn find(&self, zk: &ZooKeeper, floor: i64) -> Result<Option<(String, Stat)>> {
        if let OfferMark::Owner(mark) = &self.mark {
            let node = zkutil::join_znode(self.root, &self.name);
            return mark.find(zk, &node, CreateMode::EphemeralSequential);
        }
        find_serial(zk, self.root, &self.name, floor)
    }
}

/// The serial offer of this session on `root` created after `floor`, if any
/// (`sync` first, then the listing).
fn find_serial(
    zk: &ZooKeeper,
    root: &str,
    name: &str,
    floor: i64,
) -> Result<Option<(String, Stat)>> {
    let Some(children) = synced_children(zk, root)? else {
        return Ok(None);
    };
    let mut found = Vec::new();
    for c in children.iter().filter(|c| c.starts_with(name)) {
        let path = zkutil::join_znode(root, c);
        match zk.exists(&path, false) {
            Ok(Some(stat)) if stat.ephemeral_owner == zk.session_id() && stat.czxid > floor => {
                found.push((path, stat))
            }
            Ok(_) => {}
            // Another candidate's offer whose ACL gives this session no
            // READ, on 3.8.4+ / 3.9.2+ (ZOOKEEPER-2590; older servers
            // answer its Stat): not ours, whose ACL is this session's.
            Err(Error::NoReadPermission { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    match found.len() {
        0 | 1 => Ok(found.pop()),
        _ => Err(Error::zk(ZkError::RuntimeInconsistency, root)),
    }
}

/// The (session, root) pairs whose offer is being made now in this process,
/// and the condition their end signals.
type Making = (Mutex<HashSet<(i64, String)>>, Condvar);

/// See [`Making`].
fn making() -> &'static Making {
    static MAKING: OnceLock<Making> = OnceLock::new();
    MAKING.get_or_init(Default::default)
}

/// The (session, root) pairs with a serial offer's unsettled create, and
/// the floor its find looks above: settled, under the pair's
/// [`SerialGuard`], by the background settle or by the next offer there,
/// whichever holds it first.
fn pending() -> &'static Mutex<HashMap<(i64, String), i64>> {
    static PENDING: OnceLock<Mutex<HashMap<(i64, String), i64>>> = OnceLock::new();
    PENDING.get_or_init(Default::default)
}

/// One offer of a session on a root made at a time in the process (see
/// [`OfferMark::Serial`]); released on drop.
struct SerialGuard((i64, String));

impl SerialGuard {
    /// Settles the serial offer's create that gave up on this (session,
    /// root), if one is pending ([`pending`]): under this hold, so its find
    /// (this session's node named `name` above the recorded floor) can take
    /// no later offer for it; the node is removed. A recoverable failure
    /// leaves it pending (for the settle thread or the next offer).
    fn settle_pending(&self, zk: &ZooKeeper, zkw: &WeakZooKeeperWatcher, name: &str) -> Result<()> {
        let (session, root) = &self.0;
        let Some(floor) = pending().lock().remove(&self.0) else {
            return Ok(()); // none, or settled already
        };
        let settled = find_serial(zk, root, name, floor).map(|found| {
            if let Some((path, stat)) = found {
                remove_found(zk, zkw, &path, &stat);
            }
        });
        if settled.as_ref().is_err_and(|e| e.is_retryable()) {
            pending().lock().insert((*session, root.clone()), floor);
        }
        settled
    }

    fn take(session: i64, root: &str) -> SerialGuard {
        let key = (session, root.to_string());
        let (set, changed) = making();
        let mut set = set.lock();
        while set.contains(&key) {
            changed.wait(&mut set);
        }
        set.insert(key.clone());
        SerialGuard(key)
    }
}

impl Drop for SerialGuard {
    fn drop(&mut self) {
        let (set, changed) = making();
        set.lock().remove(&self.0);
        changed.notify_all();
    }
}

/// What every leadership recipe tells about its leadership besides gaining
/// it: one vocabulary for the election's and the latch's
/// `Leadership{InDoubt,Restored,Lost}` events (see their `leadership()`), the
/// leader selector's [`Leadership`](super::leader_selector::Leadership) and
/// the leader manager's `is_in_doubt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeadershipEvent {
    /// The leader's connection dropped: it leads only while its session
    /// lives, so it stops acting as leader now, before the server can expire
    /// the session and let another lead. `has_leadership()` is false.
    InDoubt,
    /// The connection came back within the session and the leader's node was
    /// found still there and deciding (first): it leads again.
    Restored,
    /// The session ended or the leader's node was deleted: it no longer
    /// leads, for good.
    Lost,
}

/// A leadership's state as [`LeadershipEvent`]s told it, on the one wait
/// engine ([`Wake`](crate::engine::wait::Wake)): what a leader function reads and
/// waits on.
#[derive(Debug, Default)]
pub(crate) struct LeadershipSignal {
    state: Mutex<SignalState>,
    changed: crate::engine::wait::Wake,
}

#[derive(Debug, Default, Clone, Copy)]
struct SignalState {
    in_doubt: bool,
    lost: bool,
}

impl LeadershipSignal {
    /// Records `event` and wakes the waits.
    pub(crate) fn tell(&self, event: LeadershipEvent) {
        {
            let mut st = self.state.lock();
            match event {
                LeadershipEvent::InDoubt => st.in_doubt = true,
                LeadershipEvent::Restored => st.in_doubt = false,
                LeadershipEvent::Lost => st.lost = true,
            }
        }
        self.changed.wake();
    }

    /// Whether the leadership holds: not in doubt, not lost.
    pub(crate) fn leads(&self) -> bool {
        let st = *self.state.lock();
        !st.in_doubt && !st.lost
    }

    /// Whether the connection dropped (and came not back confirmed).
    pub(crate) fn is_in_doubt(&self) -> bool {
        self.state.lock().in_doubt
    }

    /// Whether the leadership is lost for good.
    pub(crate) fn is_lost(&self) -> bool {
        self.state.lock().lost
    }

    /// Waits until the leadership stops holding (`true`), or `timeout`
    /// passes first (`false`).
    pub(crate) fn wait_until_not_leader(&self, timeout: std::time::Duration) -> bool {
        // The wait engine's wait for a state not bound to one session:
        // whoever tells the signal an event wakes it.
        let deadline = crate::deadline::Deadline::after(timeout);
        crate::engine::wait::wait_unbound(&self.changed, deadline, || (!self.leads()).then_some(()))
            .is_some()
            || !self.leads()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn signal_in_doubt_restored_lost() {
        let s = LeadershipSignal::default();
        assert!(s.leads());
        s.tell(LeadershipEvent::InDoubt);
        assert!(!s.leads() && s.is_in_doubt() && !s.is_lost());
        s.tell(LeadershipEvent::Restored);
        assert!(s.leads() && !s.is_in_doubt());
        s.tell(LeadershipEvent::Lost);
        assert!(!s.leads() && s.is_lost());
        assert!(s.wait_until_not_leader(Duration::ZERO));
    }

    #[test]
    fn signal_wait_is_woken_by_a_doubt_and_times_out_without_one() {
        let s = Arc::new(LeadershipSignal::default());
        assert!(!s.wait_until_not_leader(Duration::from_millis(10)));
        let t = s.clone();
        let waiter = std::thread::spawn(move || t.wait_until_not_leader(Duration::from_secs(600)));
        s.tell(LeadershipEvent::InDoubt);
        assert!(waiter.join().unwrap());
    }

    #[test]
    fn offers_of_one_session_and_root_are_made_one_at_a_time() {
        let first = SerialGuard::take(7, "/r");
        let other_root = SerialGuard::take(7, "/s");
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _second = SerialGuard::take(7, "/r");
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        drop(first);
        rx.recv_timeout(Duration::from_secs(60)).unwrap();
        waiter.join().unwrap();
        drop(other_root);
    }
}
