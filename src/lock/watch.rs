//! What a lock instance shares with its watchers, and the watchers themselves.
//!
//! Every wait of a lock goes through a per-watch watcher handed to the client with
//! the request, so the watch and its handler are registered on the connection
//! thread together with the reply: no event can fall into a gap, and nothing a
//! user does to the `ZooKeeperWatcher`'s listener registry affects a lock. The
//! watchers never block: they set a flag and wake the acquiring thread, or tell
//! the lock listener, or (rarely) issue an asynchronous call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use std::collections::VecDeque;

use log::{debug, info, warn};
use parking_lot::{Mutex, RwLock};

use super::{LockEvent, LockListener};
use crate::client::ZooKeeper;
use crate::engine::held::{self, Done, Held, HeldWatch};
use crate::engine::wait::{NodeEventStep, StateEvents, WaitWatcher, Wake};
use crate::error::Error;
use crate::metrics::{metric, Flag};
use crate::types::{EventType, KeeperState, Stat, State as ClientState, WatchedEvent, Watcher};
use crate::watcher::WeakZooKeeperWatcher;

/// What one lock instance shares with its watchers (no `ZooKeeperWatcher`
/// inside: a watcher in the client's table must not keep the session alive).
#[derive(Default)]
pub(super) struct LockShared {
    /// Set when the held lock is known lost; reset by each new attempt.
    pub(super) lost: AtomicBool,
    /// Set by `cancel`: attempts in progress and later ones fail with `Cancelled`.
    pub(super) cancelled: AtomicBool,
    pub(super) listener: RwLock<Option<Arc<dyn LockListener>>>,
    /// Shared with the client's table of waits woken at the session's end.
    pub(super) wake: Arc<Wake>,
    /// Listener events decided but not told yet, in decision order.
    queue: Mutex<VecDeque<(String, LockEvent, &'static str)>>,
    /// Held by the one thread telling the queue; never waited for.
    telling: Mutex<()>,
    /// The listing the wait watcher sends when a round's watch fires.
    prefetch: Mutex<Prefetch>,
    /// Set when an attempt waits (feature `metrics`: a wait, not an
    /// uncontended grant).
    pub(super) waited: Flag,
}

/// The woken waiter's listing, sent by the [`wait_watcher`] on the event thread
/// as soon as the watch fires, so the waiter wakes to an answer rather than to
/// a request of its own (one round trip and one thread hand-off fewer on the
/// contended hand-off's path; the same requests).
#[derive(Default)]
struct Prefetch {
    /// The wait round whose watch is set: the first node event takes it and
    /// sends one listing for it. `None`: an event only wakes (nobody waits, or
    /// the round's listing is already on its way).
    armed: Option<u64>,
    /// A listing and the round it answers. Sent after an event of that round,
    /// so after the round's watch was set: never older than the round.
    listed: Option<(u64, Vec<String>)>,
}

/// Disarms the round's listing on every exit of a wait (a timeout, an error, a
/// cancel): an event that comes later only wakes, as before the round.
pub(super) struct Armed<'a>(&'a LockShared);

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        self.0.prefetch.lock().armed = None;
    }
}

impl LockShared {
    /// The watch of wait round `round` is set: its first node event sends the
    /// listing (see [`wait_watcher`]). Any older listing is dropped.
    pub(super) fn arm(&self, round: u64) -> Armed<'_> {
        let mut p = self.prefetch.lock();
        p.armed = Some(round);
        p.listed = None;
        drop(p);
        Armed(self)
    }

    /// The listing sent for `round`, if it came (a wake-up of the round by
    /// anything else finds none: the waiter then lists itself).
    pub(super) fn listed_for(&self, round: u64) -> Option<Vec<String>> {
        let mut p = self.prefetch.lock();
        p.armed = None;
        match p.listed.take() {
            Some((r, children)) if r == round => Some(children),
            _ => None,
        }
    }

    /// Queues a decided event; call [`drain`](Self::drain) once no lock is held.
    fn decide(&self, path: &str, event: LockEvent, why: &'static str) {
        self.queue.lock().push_back((path.to_string(), event, why));
    }

    /// Tells the queued events in order. Whoever finds another thread telling
    /// leaves its events to it: no lock is held while the listener runs except
    /// the teller's own flag, which nobody waits for, so a listener may call back
    /// into the lock (release, drop a guard) without a deadlock.
    fn drain(&self) {
        loop {
            let Some(_telling) = self.telling.try_lock() else {
                return;
            };
            loop {
                // Not in the `while let`: its guard would live through the call.
                let next = self.queue.lock().pop_front();
                let Some((path, event, why)) = next else {
                    break;
                };
                self.tell(&path, event, why);
            }
            drop(_telling);
            // An event queued after the last pop, while we still held the flag.
            if self.queue.lock().is_empty() {
                return;
            }
        }
    }

    fn tell(&self, path: &str, event: LockEvent, why: &'static str) {
        match event {
            LockEvent::Lost => {
                if self.lost.swap(true, Ordering::SeqCst) {
                    return;
                }
                warn!("lock {path} lost: {why}");
                metric!(lock_lost(path, true));
            }
            _ => {
                if self.lost.load(Ordering::SeqCst) {
                    return;
                }
                info!("lock {path} {event:?}: {why}");
                metric!(lock_in_doubt(path, event == LockEvent::InDoubt));
            }
        }
        let l = self.listener.read().clone();
        if let Some(l) = l {
            l.lock_event(path, event);
        }
    }
}

/// The lock's wait watcher: the wait engine's one watcher
/// ([`WaitWatcher`]), woken by any event of the node the attempt waits for
/// and by the session's end (every watcher hears the session's end, as in
/// Java; the client wakes the wait at the session's end directly too). One
/// per lock instance, so the client registers it once per path however often
/// the instance waits on it.
///
/// A node event of an armed round (see [`LockShared::arm`]) first sends the
/// lock's listing of `parent` ([`Prefetch`]), asynchronously (the event
/// thread never blocks), and wakes the waiter when the answer is in: the
/// waiter decides on it instead of listing again.
pub(super) fn wait_watcher(
    shared: &Arc<LockShared>,
    parent: &str,
    zkw: WeakZooKeeperWatcher,
) -> Arc<dyn Watcher> {
    Arc::new(
        WaitWatcher::new(shared.wake.clone(), StateEvents::SessionEnd).with_step(Prefetching {
            shared: shared.clone(),
            parent: parent.to_string(),
            zkw,
        }),
    )
}

/// The lock's step on a node event of its wait (see [`wait_watcher`]).
struct Prefetching {
    shared: Arc<LockShared>,
    /// The lock znode, whose children the listing is of.
    parent: String,
    zkw: WeakZooKeeperWatcher,
}

impl NodeEventStep for Prefetching {
    fn take_over(&self, _event: &WatchedEvent, wake: &Arc<Wake>) -> bool {
        let armed = self.shared.prefetch.lock().armed.take();
        let (Some(round), Some(zk)) = (armed, self.zkw.zookeeper()) else {
            return false;
        };
        let (shared, wake) = (self.shared.clone(), wake.clone());
        zk.get_children_async(&self.parent, None, move |r| {
            match r {
                Ok(children) => shared.prefetch.lock().listed = Some((round, children)),
                // The waiter lists itself, through the recoverable client.
                Err(e) => debug!("lock listing after the wake-up: {e}"),
            }
            wake.wake();
        });
        true
    }
}

/// Where an attempt's own node stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The attempt waits: a deletion wakes it (it then fails with `LockLost`).
    Waiting,
    /// Granted: a deletion or the session's end is a loss.
    Held,
    /// Released (or abandoned) by us: our own delete is no loss.
    Released,
}

#[derive(Debug)]
struct NodeState {
    phase: Phase,
    gone: bool,
    in_doubt: bool,
}

/// What a [`NodeWatch`] decided, acted on outside its state lock.
enum Tell {
    Nothing,
    Wake,
    Event(LockEvent, &'static str),
}

/// The watch on an attempt's own node: set while waiting behind a node of the
/// other kind (a reaper of one kind leaves the other kind's nodes in place, so the
/// waiter would otherwise wait forever), and on a held node when a lock listener
/// is set. The same watcher serves the wait and the grant: a deletion at any
/// point is seen, either as `LockLost` from the attempt or as `Lost`.
pub(super) struct NodeWatch {
    path: String,
    shared: Arc<LockShared>,
    state: Mutex<NodeState>,
    zkw: WeakZooKeeperWatcher,
    me: Weak<NodeWatch>,
}

impl NodeWatch {
    pub(super) fn new(
        path: &str,
        shared: &Arc<LockShared>,
        zkw: &WeakZooKeeperWatcher,
    ) -> Arc<NodeWatch> {
        Arc::new_cyclic(|me| NodeWatch {
            path: path.to_string(),
            shared: shared.clone(),
            state: Mutex::new(NodeState {
                phase: Phase::Waiting,
                gone: false,
                in_doubt: false,
            }),
            zkw: zkw.clone(),
            me: me.clone(),
        })
    }

    pub(super) fn watcher(self: &Arc<Self>) -> Arc<dyn Watcher> {
        self.clone()
    }

    /// Whether the node is known deleted.
    pub(super) fn is_gone(&self) -> bool {
        self.state.lock().gone
    }

    /// The attempt now holds the lock. `false` when the node is already known
    /// gone (the grant is void). A connection lost since the watch was set is
    /// told as `InDoubt` now.
    pub(super) fn hold(&self) -> bool {
        let mut st = self.state.lock();
        if st.gone {
            return false;
        }
        st.phase = Phase::Held;
        let tell = if st.in_doubt {
            Tell::Event(LockEvent::InDoubt, "disconnected")
        } else {
            Tell::Nothing
        };
        self.tell(st, tell);
        true
    }

    /// We delete the node ourselves: its deletion is no loss (see
    /// [`unrelease`](Self::unrelease) when the delete fails).
    pub(super) fn release(&self) {
        self.state.lock().phase = Phase::Released;
    }

    /// A release that failed with a recoverable error: the lock is still held
    /// (or lost, if its node went meanwhile).
    pub(super) fn unrelease(&self) {
        let mut st = self.state.lock();
        st.phase = Phase::Held;
        let tell = if st.gone {
            Tell::Event(LockEvent::Lost, "its node was deleted")
        } else {
            Tell::Nothing
        };
        self.tell(st, tell);
    }

    /// Acts on a decision: the event is queued under the state lock (so events
    /// are told in decision order) and told once it is let go (the listener may
    /// call back into the lock).
    fn tell(&self, st: parking_lot::MutexGuard<'_, NodeState>, tell: Tell) {
        match tell {
            Tell::Nothing => drop(st),
            Tell::Wake => {
                drop(st);
                self.shared.wake.wake();
            }
            Tell::Event(event, why) => {
                self.shared.decide(&self.path, event, why);
                drop(st);
                self.shared.drain();
            }
        }
    }

    fn gone(&self, why: &'static str) {
        let mut st = self.state.lock();
        st.gone = true;
        let tell = match st.phase {
            Phase::Waiting => Tell::Wake,
            Phase::Held => Tell::Event(LockEvent::Lost, why),
            Phase::Released => Tell::Nothing,
        };
        self.tell(st, tell);
    }

    /// A write to our node spent the one-shot watch: set it again, without
    /// blocking (the answer comes back on the event thread); when the connection
    /// is lost first, again after the reconnect (the watch missed the changes of
    /// the gap, so the answer tells whether the node is still there): the
    /// engine's one held watch ([`held::arm`]).
    fn rearm(&self) {
        if let Some(me) = self.me.upgrade() {
            held::arm(&me);
        }
    }

    fn connection(&self, ks: KeeperState) {
        let mut st = self.state.lock();
        let tell = match ks {
            KeeperState::Disconnected if !st.in_doubt => {
                st.in_doubt = true;
                if st.phase == Phase::Held {
                    Tell::Event(LockEvent::InDoubt, "disconnected")
                } else {
                    Tell::Nothing
                }
            }
            KeeperState::SyncConnected if st.in_doubt => {
                st.in_doubt = false;
                if st.phase == Phase::Held {
                    Tell::Event(LockEvent::Restored, "reconnected within the session")
                } else {
                    Tell::Nothing
                }
            }
            KeeperState::Expired | KeeperState::Closed | KeeperState::AuthFailed => {
                match st.phase {
                    Phase::Waiting => Tell::Wake,
                    Phase::Held => Tell::Event(LockEvent::Lost, "the session ended"),
                    Phase::Released => Tell::Nothing,
                }
            }
            _ => Tell::Nothing,
        };
        self.tell(st, tell);
    }

    /// Catches up with a session that ended before the watch could hear it.
    pub(super) fn catch_up(&self, state: ClientState) {
        if state.is_terminal() {
            self.connection(KeeperState::Expired);
        }
    }
}

impl Watcher for NodeWatch {
    fn process(&self, event: WatchedEvent) {
        match event.event_type {
            EventType::NodeDeleted => self.gone("its node was deleted"),
            EventType::NodeDataChanged => self.rearm(),
            EventType::None => self.connection(event.keeper_state),
            _ => {}
        }
    }
}

/// The held node's watch: an `exists` on it; its reactions are the lock's.
impl Held for NodeWatch {
    type Context = ();

    fn watcher(&self) -> &WeakZooKeeperWatcher {
        &self.zkw
    }

    fn path(&self) -> &str {
        &self.path
    }

    fn resend(self: &Arc<Self>) {
        held::arm(self);
    }

    fn on_gone(&self, (): ()) {
        self.gone("its node was deleted");
    }

    /// The session's end is the lock's loss; so is a permanent error (a
    /// `NoAuth`: the node can no longer be watched), as a node that cannot
    /// be watched at the grant is no grant: logged, then `Lost` (the node
    /// is removed at the release, which returns `LockLost`).
    fn on_ended(&self, e: &Error, (): ()) {
        if e.is_fatal() {
            self.connection(KeeperState::Expired);
        } else {
            warn!(
                "lock node {}: its watch cannot be set again: {e}",
                self.path
            );
            self.gone("its watch cannot be set again");
        }
    }

    fn on_reconnected(&self) {
        self.connection(KeeperState::SyncConnected);
    }

    fn on_lost(&self) {
        self.connection(KeeperState::Expired);
    }
}

impl HeldWatch for NodeWatch {
    type Answer = Option<Stat>;

    fn context(&self) {}

    fn request(self: &Arc<Self>, zk: &ZooKeeper, done: Done<Option<Stat>>) {
        let watcher: Arc<dyn Watcher> = self.clone();
        zk.exists_async(&self.path, Some(watcher), done);
    }

    fn on_answer(&self, stat: Option<Stat>, (): ()) {
        if stat.is_none() {
            self.gone("its node was deleted");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded() -> (Arc<LockShared>, Arc<Mutex<Vec<LockEvent>>>) {
        let events: Arc<Mutex<Vec<LockEvent>>> = Arc::default();
        let shared = Arc::new(LockShared::default());
        let e = events.clone();
        let listener: Arc<dyn LockListener> =
            Arc::new(move |_p: &str, ev: LockEvent| e.lock().push(ev));
        *shared.listener.write() = Some(listener);
        (shared, events)
    }

    fn event(t: EventType) -> WatchedEvent {
        WatchedEvent {
            event_type: t,
            keeper_state: KeeperState::SyncConnected,
            path: Some("/l/write-0".into()),
            zxid: None,
        }
    }

    #[test]
    fn a_deletion_during_a_failed_release_is_a_loss() {
        let (shared, events) = recorded();
        let w = NodeWatch::new("/l/write-0", &shared, &WeakZooKeeperWatcher::default());
        assert!(w.hold());
        w.release();
        w.process(event(EventType::NodeDeleted));
        assert!(events.lock().is_empty(), "our own delete is no loss");
        // The delete failed (connection loss): the node went all the same.
        w.unrelease();
        assert_eq!(*events.lock(), [LockEvent::Lost]);
        assert!(shared.lost.load(Ordering::SeqCst));
    }

    #[test]
    fn in_doubt_restored_lost_in_order_and_lost_once() {
        let (shared, events) = recorded();
        let w = NodeWatch::new("/l/write-0", &shared, &WeakZooKeeperWatcher::default());
        // Disconnected before the grant: told at the grant.
        w.process(WatchedEvent::state(KeeperState::Disconnected));
        assert!(events.lock().is_empty());
        assert!(w.hold());
        w.process(WatchedEvent::state(KeeperState::SyncConnected));
        w.process(WatchedEvent::state(KeeperState::Disconnected));
        w.process(event(EventType::NodeDeleted));
        w.process(WatchedEvent::state(KeeperState::Expired));
        assert_eq!(
            *events.lock(),
            [
                LockEvent::InDoubt,
                LockEvent::Restored,
                LockEvent::InDoubt,
                LockEvent::Lost
            ]
        );
    }

    #[test]
    fn a_listener_may_call_back_into_the_lock() {
        // The listener releases (as a user dropping a guard on Lost would) and
        // its own decision is told after it returns: no deadlock, no reordering.
        let shared = Arc::new(LockShared::default());
        let w = NodeWatch::new("/l/write-0", &shared, &WeakZooKeeperWatcher::default());
        let events: Arc<Mutex<Vec<LockEvent>>> = Arc::default();
        let (e, again) = (events.clone(), Arc::downgrade(&w));
        let listener: Arc<dyn LockListener> = Arc::new(move |_p: &str, ev: LockEvent| {
            e.lock().push(ev);
            if let Some(w) = again.upgrade() {
                if ev == LockEvent::InDoubt {
                    w.release();
                    w.unrelease(); // the node is there: nothing to tell
                    w.process(WatchedEvent::state(KeeperState::SyncConnected));
                }
            }
        });
        *shared.listener.write() = Some(listener);
        assert!(w.hold());
        w.process(WatchedEvent::state(KeeperState::Disconnected));
        assert_eq!(*events.lock(), [LockEvent::InDoubt, LockEvent::Restored]);
    }

    #[test]
    fn a_waiting_node_deleted_wakes_the_waiter_and_voids_the_grant() {
        let (shared, events) = recorded();
        let w = NodeWatch::new("/l/write-0", &shared, &WeakZooKeeperWatcher::default());
        let round = shared.wake.generation();
        w.process(event(EventType::NodeDeleted));
        assert!(shared
            .wake
            .wait(round, crate::Deadline::after(std::time::Duration::ZERO)));
        assert!(w.is_gone());
        assert!(!w.hold(), "a grant of a deleted node is void");
        assert!(events.lock().is_empty());
    }

    #[test]
    fn a_listing_answers_its_round_only_and_once() {
        let shared = Arc::new(LockShared::default());
        let armed = shared.arm(3);
        // A late answer of an earlier round, in after the round was armed.
        shared.prefetch.lock().listed = Some((2, vec!["write-0000000001".into()]));
        assert_eq!(shared.listed_for(3), None, "an older round's listing");
        drop(armed);
        let armed = shared.arm(4);
        let children = vec!["write-0000000002".to_string()];
        shared.prefetch.lock().listed = Some((4, children.clone()));
        assert_eq!(shared.listed_for(4), Some(children));
        assert_eq!(shared.listed_for(4), None, "consumed once");
        drop(armed);
        // A listing left from a round is dropped when the next is armed.
        shared.prefetch.lock().listed = Some((5, vec![]));
        let _armed = shared.arm(5);
        assert_eq!(shared.listed_for(5), None);
    }

    #[test]
    fn an_event_of_no_armed_round_only_wakes() {
        let shared = Arc::new(LockShared::default());
        let w = wait_watcher(&shared, "/l", WeakZooKeeperWatcher::default());
        let woken = |round| {
            shared
                .wake
                .wait(round, crate::Deadline::after(std::time::Duration::ZERO))
        };
        // Nothing armed (the wait ended: the guard disarmed it).
        let round = shared.wake.generation();
        drop(shared.arm(round));
        assert!(shared.prefetch.lock().armed.is_none());
        w.process(event(EventType::NodeDeleted));
        assert!(woken(round));
        // Armed, but the session is gone: no listing, woken at once.
        let round = shared.wake.generation();
        let _armed = shared.arm(round);
        w.process(event(EventType::NodeDeleted));
        assert!(woken(round));
        assert_eq!(shared.listed_for(round), None);
        // A connection event that does not end the session wakes nobody; the
        // session's end does.
        let round = shared.wake.generation();
        w.process(WatchedEvent::state(KeeperState::Disconnected));
        assert!(!woken(round));
        w.process(WatchedEvent::state(KeeperState::Expired));
        assert!(woken(round));
    }
}
