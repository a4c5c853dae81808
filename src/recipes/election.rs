//! ZooKeeper's `org.apache.zookeeper.recipes.leader.LeaderElectionSupport`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use log::{info, warn};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::background::{on_reconnect, remove_in_background};
use crate::error::{Error, Result, ZkError};
use crate::sequence::number_after_last;
use crate::types::{Acl, CreateMode, EventType, KeeperState, WatchedEvent, Watcher, WatcherType};
use crate::watcher::{SessionHook, WeakZooKeeperWatcher, ZooKeeperWatcher};
use crate::zkutil;

/// Java's `LeaderElectionSupport.EventType`, told to [`LeaderElectionAware`]
/// listeners in Java's order, plus three zklock events for the leader's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElectionEventType {
    /// `START`: `start()` began.
    Start,
    /// `OFFER_START`: creating the offer node.
    OfferStart,
    /// `OFFER_COMPLETE`: the offer node exists.
    OfferComplete,
    /// `DETERMINE_START`: listing the offers.
    DetermineStart,
    /// `DETERMINE_COMPLETE`: this offer's place is known.
    DetermineComplete,
    /// `ELECTED_START`: this candidate is becoming the leader.
    ElectedStart,
    /// `ELECTED_COMPLETE`: this candidate is the leader.
    ElectedComplete,
    /// `READY_START`: about to watch the offer ahead.
    ReadyStart,
    /// `READY_COMPLETE`: watching the offer ahead.
    ReadyComplete,
    /// `FAILED`: the election failed (session ended, offer deleted, error).
    Failed,
    /// `STOP_START`: `stop()` began.
    StopStart,
    /// `STOP_COMPLETE`: the offer is withdrawn.
    StopComplete,
    /// zklock only: the leader's connection dropped. It is leader only while its
    /// session lives: stop acting as leader until `LeadershipRestored`. Told at
    /// once (before the server can expire the session).
    LeadershipInDoubt,
    /// zklock only: the leader reconnected within its session.
    LeadershipRestored,
    /// zklock only: the leader's session ended or its offer was deleted; it is
    /// no longer leader (`Failed` follows).
    LeadershipLost,
}

/// Java's `LeaderElectionAware`. Closures `Fn(ElectionEventType)` implement it.
/// Called on the client's event thread (or the thread in `start`/`stop`), one
/// event at a time: keep it short, never block on ZooKeeper in it.
pub trait LeaderElectionAware: Send + Sync {
    /// Java's `onElectionEvent(EventType)`.
    fn on_election_event(&self, event: ElectionEventType);
}

impl<F: Fn(ElectionEventType) + Send + Sync> LeaderElectionAware for F {
    fn on_election_event(&self, event: ElectionEventType) {
        self(event)
    }
}

/// Java's `LeaderElectionSupport.State`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElectionState {
    /// `START`.
    Start,
    /// `OFFER`.
    Offer,
    /// `DETERMINE`.
    Determine,
    /// `ELECTED`.
    Elected,
    /// `READY`.
    Ready,
    /// `FAILED`.
    Failed,
    /// `STOP`.
    Stop,
}

#[derive(Debug)]
struct St {
    state: ElectionState,
    node: Option<String>,
    generation: u64,
    rounds: u64,
    in_doubt: bool,
}

struct Inner {
    root: String,
    zkw: WeakZooKeeperWatcher,
    st: Mutex<St>,
    cv: Condvar,
    listeners: RwLock<Vec<Arc<dyn LeaderElectionAware>>>,
    /// Events told one at a time, in order.
    telling: Mutex<()>,
    watcher: Arc<dyn Watcher>,
    me: Weak<Inner>,
}

/// ZooKeeper's `org.apache.zookeeper.recipes.leader.LeaderElectionSupport`: a
/// leader election among candidates sharing `root` with Java's recipe.
///
/// # Layout (Java's)
/// Each candidate creates the ephemeral sequential child `n_<seq>` of `root`
/// holding its host name (UTF-8); the lowest sequence leads, every other
/// candidate watches (`exists`) only the offer just ahead of it: one deletion
/// notifies one candidate. [`get_leader_host_name`](Self::get_leader_host_name)
/// reads the lowest offer's data, as Java's does.
///
/// # zklock differs here
/// - Offers are created without zklock's metadata prefix and without a tag, so
///   Java reads the host name; a create whose reply was lost is found by its
///   `ephemeralOwner` (this session) before a new one is made.
/// - The rounds after a deletion run as asynchronous calls on the event thread
///   (Java re-runs its blocking `determineElectionStatus` there).
/// - The leader watches its own offer: a dropped connection is told at once
///   ([`ElectionEventType::LeadershipInDoubt`], and
///   [`is_leader`](Self::is_leader) turns false), a reconnect within the
///   session `LeadershipRestored`, an expired session or a deleted offer
///   `LeadershipLost` then `Failed`. With a session timeout `t`, the client
///   declares the connection lost at 2/3 `t`, before the server can expire the
///   session at `t` and elect another: at most one candidate has `is_leader()`.
/// - Dropping a started candidate withdraws its offer in the background.
pub struct LeaderElectionSupport {
    zkw: ZooKeeperWatcher,
    host_name: String,
    inner: Arc<Inner>,
    hook_id: Option<u64>,
}

impl std::fmt::Debug for LeaderElectionSupport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElectionSupport")
            .field("root", &self.inner.root)
            .field("host_name", &self.host_name)
            .field("state", &*self.inner.st.lock())
            .finish()
    }
}

struct OfferWatcher(Weak<Inner>);

impl Watcher for OfferWatcher {
    fn process(&self, event: WatchedEvent) {
        if let Some(inner) = self.0.upgrade() {
            inner.event(event);
        }
    }
}

impl SessionHook for Inner {
    fn session_event(&self, state: KeeperState) {
        if matches!(
            state,
            KeeperState::Expired | KeeperState::Closed | KeeperState::AuthFailed
        ) {
            let generation = self.st.lock().generation;
            self.fail(generation, true);
        }
    }
}

impl Inner {
    fn dispatch(&self, events: &[ElectionEventType]) {
        let _one_at_a_time = self.telling.lock();
        let listeners = self.listeners.read().clone();
        for &e in events {
            for l in &listeners {
                l.on_election_event(e);
            }
        }
    }

    fn event(&self, event: WatchedEvent) {
        let (generation, own, state) = {
            let st = self.st.lock();
            (st.generation, st.node.clone(), st.state)
        };
        match event.event_type {
            EventType::None => match event.keeper_state {
                KeeperState::Disconnected => {
                    let mut st = self.st.lock();
                    if st.state == ElectionState::Elected && !st.in_doubt {
                        st.in_doubt = true;
                        drop(st);
                        warn!(
                            "leader of {}: connection lost, leadership in doubt",
                            self.root
                        );
                        self.dispatch(&[ElectionEventType::LeadershipInDoubt]);
                    }
                }
                KeeperState::SyncConnected => {
                    let mut st = self.st.lock();
                    if st.state == ElectionState::Elected && st.in_doubt {
                        st.in_doubt = false;
                        drop(st);
                        self.dispatch(&[ElectionEventType::LeadershipRestored]);
                    }
                }
                KeeperState::Expired | KeeperState::Closed | KeeperState::AuthFailed => {
                    self.fail(generation, true)
                }
                _ => {}
            },
            EventType::NodeDeleted if event.path.is_some() && event.path == own => {
                self.fail(generation, true)
            }
            EventType::NodeDeleted
                if matches!(state, ElectionState::Ready | ElectionState::Determine) =>
            {
                self.determine(generation)
            }
            _ => {}
        }
    }

    fn after_reconnect(&self, generation: u64) {
        let Some(me) = self.me.upgrade() else { return };
        on_reconnect(&self.zkw, move |connected| {
            if connected {
                me.determine(generation);
            } else {
                me.fail(generation, true);
            }
        });
    }

    /// Java's `determineElectionStatus`, as asynchronous calls.
    fn determine(&self, generation: u64) {
        {
            let mut st = self.st.lock();
            if st.generation != generation || st.node.is_none() {
                return;
            }
            st.state = ElectionState::Determine;
        }
        self.dispatch(&[ElectionEventType::DetermineStart]);
        let (Some(zk), Some(me)) = (self.zkw.zookeeper(), self.me.upgrade()) else {
            return;
        };
        zk.get_children_async(&self.root, None, move |r| me.listed(generation, r));
    }

    fn listed(&self, generation: u64, r: Result<Vec<String>>) {
        let children = match r {
            Ok(c) => c,
            Err(e) if e.is_retryable() => return self.after_reconnect(generation),
            Err(_) => return self.fail(generation, false),
        };
        let Some(node) = self.current(generation) else {
            return;
        };
        let mine = zkutil::get_node_name(&node).to_string();
        let offers = sorted_offers(&children);
        let Some(pos) = offers.iter().position(|o| **o == mine) else {
            return self.fail(generation, false);
        };
        self.dispatch(&[ElectionEventType::DetermineComplete]);
        let (Some(zk), Some(me)) = (self.zkw.zookeeper(), self.me.upgrade()) else {
            return;
        };
        if pos == 0 {
            // Watch our own offer: its deletion, and the connection events.
            zk.exists_async(&node, Some(self.watcher.clone()), move |r| match r {
                Ok(Some(_)) => me.elected(generation),
                Ok(None) => me.fail(generation, false),
                Err(e) if e.is_retryable() => me.after_reconnect(generation),
                Err(_) => me.fail(generation, false),
            });
        } else {
            let ahead = zkutil::join_znode(&self.root, offers[pos - 1]);
            self.dispatch(&[ElectionEventType::ReadyStart]);
            zk.exists_async(&ahead, Some(self.watcher.clone()), move |r| match r {
                Ok(Some(_)) => me.ready(generation),
                // Gone before the watch: determine again (as Java does).
                Ok(None) => me.determine(generation),
                Err(e) if e.is_retryable() => me.after_reconnect(generation),
                Err(_) => me.fail(generation, false),
            });
        }
    }

    fn current(&self, generation: u64) -> Option<String> {
        let st = self.st.lock();
        (st.generation == generation)
            .then(|| st.node.clone())
            .flatten()
    }

    fn elected(&self, generation: u64) {
        {
            let mut st = self.st.lock();
            if st.generation != generation || st.state != ElectionState::Determine {
                return;
            }
            st.state = ElectionState::Elected;
            st.in_doubt = false;
        }
        info!("elected leader of {}", self.root);
        self.dispatch(&[
            ElectionEventType::ElectedStart,
            ElectionEventType::ElectedComplete,
        ]);
        self.round_done(generation);
    }

    /// Tells `start` (waiting for its first round) that the round is over:
    /// after its events, so `start` returns with them told.
    fn round_done(&self, generation: u64) {
        let mut st = self.st.lock();
        if st.generation == generation {
            st.rounds += 1;
            self.cv.notify_all();
        }
    }

    fn ready(&self, generation: u64) {
        {
            let mut st = self.st.lock();
            if st.generation != generation || st.state != ElectionState::Determine {
                return;
            }
            st.state = ElectionState::Ready;
        }
        self.dispatch(&[ElectionEventType::ReadyComplete]);
        self.round_done(generation);
    }

    /// Java's `becomeFailed`; a leader hears `LeadershipLost` first.
    fn fail(&self, generation: u64, _session: bool) {
        let was_leader = {
            let mut st = self.st.lock();
            if st.generation != generation
                || matches!(st.state, ElectionState::Failed | ElectionState::Stop)
                || st.node.is_none()
            {
                return;
            }
            let was = st.state == ElectionState::Elected;
            st.state = ElectionState::Failed;
            was
        };
        warn!("election on {} failed", self.root);
        if was_leader {
            self.dispatch(&[ElectionEventType::LeadershipLost, ElectionEventType::Failed]);
        } else {
            self.dispatch(&[ElectionEventType::Failed]);
        }
        self.round_done(generation);
    }
}

/// Offers ordered as Java's `LeaderOffer.IdComparator`: by the number after
/// `n_`; other children are ignored.
fn sorted_offers(children: &[String]) -> Vec<&String> {
    let mut v: Vec<(i64, &String)> = children
        .iter()
        .filter(|c| c.starts_with("n_"))
        .filter_map(|c| number_after_last(c, '_').map(|s| (s, c)))
        .collect();
    v.sort();
    v.into_iter().map(|(_, c)| c).collect()
}

impl LeaderElectionSupport {
    /// Java's `LeaderElectionSupport` with `setZooKeeper`, `setRootNodeName`
    /// and `setHostName`: a candidate on `root` (created with parents at
    /// `start`) announcing `host_name`.
    ///
    /// # Errors
    /// `BadArguments` for an invalid `root`.
    pub fn new(zkw: &ZooKeeperWatcher, root: &str, host_name: &str) -> Result<Self> {
        crate::path::validate(root)?;
        let inner = Arc::new_cyclic(|me| Inner {
            root: root.to_string(),
            zkw: zkw.downgrade(),
            st: Mutex::new(St {
                state: ElectionState::Stop,
                node: None,
                generation: 0,
                rounds: 0,
                in_doubt: false,
            }),
            cv: Condvar::new(),
            listeners: RwLock::new(Vec::new()),
            telling: Mutex::new(()),
            watcher: Arc::new(OfferWatcher(me.clone())),
            me: me.clone(),
        });
        let hook: Arc<dyn SessionHook> = inner.clone();
        let hook_id = zkw.downgrade().add_hook(Arc::downgrade(&hook));
        Ok(LeaderElectionSupport {
            zkw: zkw.clone(),
            host_name: host_name.to_string(),
            inner,
            hook_id,
        })
    }

    /// Java's `addListener`.
    pub fn add_listener(&self, listener: impl LeaderElectionAware + 'static) {
        self.inner.listeners.write().push(Arc::new(listener));
    }

    /// Java's `getRootNodeName()`.
    pub fn root_node_name(&self) -> &str {
        &self.inner.root
    }

    /// Java's `getHostName()`.
    pub fn host_name(&self) -> &str {
        &self.host_name
    }

    /// Java's `getState()`-like view of the candidate's state.
    pub fn state(&self) -> ElectionState {
        self.inner.st.lock().state
    }

    /// This candidate's offer node, once made.
    pub fn offer_node(&self) -> Option<String> {
        self.inner.st.lock().node.clone()
    }

    /// zklock: whether this candidate leads now: elected, connection not in
    /// doubt, session alive.
    pub fn is_leader(&self) -> bool {
        let st = self.inner.st.lock();
        st.state == ElectionState::Elected && !st.in_doubt && !self.zkw.state().is_terminal()
    }

    /// Java's `start()`: makes the offer and determines this candidate's place
    /// (elected, or ready behind the offer ahead). Returns once that is known;
    /// later changes arrive as events.
    ///
    /// # Errors
    /// `SessionExpired`/`Closed`; ZooKeeper errors (after `FAILED` is told, as
    /// Java's `becomeFailed`).
    pub fn start(&self) -> Result<()> {
        {
            let mut st = self.inner.st.lock();
            if st.node.is_some() {
                return Err(Error::BadArguments(format!(
                    "election on {} already started",
                    self.inner.root
                )));
            }
            st.state = ElectionState::Start;
        }
        self.inner.dispatch(&[ElectionEventType::Start]);
        self.inner.st.lock().state = ElectionState::Offer;
        self.inner.dispatch(&[ElectionEventType::OfferStart]);
        let node = match self.make_offer() {
            Ok(n) => n,
            Err(e) => {
                self.inner.st.lock().state = ElectionState::Failed;
                self.inner.dispatch(&[ElectionEventType::Failed]);
                return Err(e);
            }
        };
        let (generation, before) = {
            let mut st = self.inner.st.lock();
            st.node = Some(node);
            (st.generation, st.rounds)
        };
        self.inner.dispatch(&[ElectionEventType::OfferComplete]);
        self.inner.determine(generation);
        let mut st = self.inner.st.lock();
        while st.rounds == before && st.generation == generation {
            self.inner.cv.wait_for(&mut st, Duration::from_millis(500));
            if st.rounds == before && self.zkw.state().is_terminal() {
                drop(st);
                self.zkw.check_session()?;
                return Err(Error::Closed);
            }
        }
        if st.state == ElectionState::Failed {
            return Err(Error::zk(ZkError::NoNode, self.inner.root.clone()));
        }
        Ok(())
    }

    /// Java's `makeOffer`, retried on connection loss: an offer of this
    /// session already in `root` (a lost reply) is adopted.
    fn make_offer(&self) -> Result<String> {
        let zk = self.zkw.zookeeper();
        let mut attempt = 0u32;
        loop {
            let r = (|| {
                if attempt > 0 {
                    for c in zk.get_children(&self.inner.root, false)? {
                        let path = zkutil::join_znode(&self.inner.root, &c);
                        if c.starts_with("n_") {
                            if let Some(stat) = zk.exists(&path, false)? {
                                if stat.ephemeral_owner == zk.session_id() {
                                    return Ok(path);
                                }
                            }
                        }
                    }
                }
                match zk.create(
                    &zkutil::join_znode(&self.inner.root, "n_"),
                    self.host_name.as_bytes(),
                    Acl::open_unsafe(),
                    CreateMode::EphemeralSequential,
                ) {
                    Err(e) if e.is(ZkError::NoNode) => {
                        zkutil::create_with_parents(&self.zkw, &self.inner.root)?;
                        Err(Error::zk(ZkError::ConnectionLoss, self.inner.root.clone()))
                    }
                    other => other,
                }
            })();
            match r {
                Err(e) if e.is_retryable() && attempt < 10 => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(50) * attempt);
                    self.zkw.check_session()?;
                }
                other => return other,
            }
        }
    }

    /// Java's `stop()`: withdraws the offer (the next candidate is notified).
    ///
    /// # Errors
    /// ZooKeeper errors after retries (the offer is then removed in the
    /// background); none when the session already ended.
    pub fn stop(&self) -> Result<()> {
        let (node, was_leader) = {
            let mut st = self.inner.st.lock();
            let was_leader = st.state == ElectionState::Elected;
            st.state = ElectionState::Stop;
            st.generation += 1;
            st.in_doubt = false;
            self.inner.cv.notify_all();
            (st.node.take(), was_leader)
        };
        self.inner.dispatch(&[ElectionEventType::StopStart]);
        let mut result = Ok(());
        if let Some(node) = node {
            if !self.zkw.state().is_terminal() {
                if was_leader {
                    // The leader watches its own offer; removing the watch first
                    // (a request, no notification) leaves one notification per
                    // succession: the successor's.
                    let _ = self
                        .zkw
                        .zookeeper()
                        .remove_watches(&node, WatcherType::Data);
                }
                match self.zkw.recoverable_zookeeper().delete(&node, None) {
                    Ok(()) => {}
                    Err(e) if e.is(ZkError::NoNode) || e.is_fatal() => {}
                    Err(e) => {
                        remove_in_background(&self.zkw.downgrade(), node, Box::new(|| {}));
                        result = Err(e);
                    }
                }
            }
        }
        self.inner.dispatch(&[ElectionEventType::StopComplete]);
        result
    }

    /// Java's `getLeaderHostName()`: the lowest offer's host name, `None`
    /// without offers.
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn get_leader_host_name(&self) -> Result<Option<String>> {
        get_leader_host_name(&self.zkw, &self.inner.root)
    }
}

/// [`LeaderElectionSupport::get_leader_host_name`] without a candidate: the
/// host name in `root`'s lowest `n_` offer.
///
/// # Errors
/// ZooKeeper errors after retries.
pub fn get_leader_host_name(zkw: &ZooKeeperWatcher, root: &str) -> Result<Option<String>> {
    let rzk = zkw.recoverable_zookeeper();
    for _ in 0..10 {
        let children = match rzk.get_children(root, false) {
            Ok(c) => c,
            Err(e) if e.is(ZkError::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(first) = sorted_offers(&children).first().map(|s| s.to_string()) else {
            return Ok(None);
        };
        match rzk.get_raw_data(&zkutil::join_znode(root, &first)) {
            Ok((data, _)) => return Ok(Some(String::from_utf8_lossy(&data).into_owned())),
            Err(e) if e.is(ZkError::NoNode) => continue, // the leader just left
            Err(e) => return Err(e),
        }
    }
    Err(Error::zk(ZkError::OperationTimeout, root))
}

impl Drop for LeaderElectionSupport {
    fn drop(&mut self) {
        let node = {
            let mut st = self.inner.st.lock();
            st.generation += 1;
            st.node.take()
        };
        if let Some(node) = node {
            remove_in_background(&self.zkw.downgrade(), node, Box::new(|| {}));
        }
        if let Some(id) = self.hook_id {
            self.zkw.downgrade().remove_hook(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_ordered_by_id_like_java() {
        let c: Vec<String> = ["n_0000000010", "n_0000000002", "x", "n_0000000003"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let s: Vec<&str> = sorted_offers(&c).iter().map(|s| s.as_str()).collect();
        assert_eq!(s, ["n_0000000002", "n_0000000003", "n_0000000010"]);
    }
}
