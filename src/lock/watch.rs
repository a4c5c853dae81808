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
use crate::background::on_reconnect;
use crate::types::{EventType, KeeperState, State as ClientState, WatchedEvent, Watcher};
use crate::wait::Wake;
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
}

impl LockShared {
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
            }
            _ => {
                if self.lost.load(Ordering::SeqCst) {
                    return;
                }
                info!("lock {path} {event:?}: {why}");
            }
        }
        let l = self.listener.read().clone();
        if let Some(l) = l {
            l.lock_event(path, event);
        }
    }
}

/// Wakes the waiting attempt on any event of the node it waits for, and when the
/// session ends (every watcher hears the session's end, as in Java). One per
/// lock instance, so the client registers it once per path however often the
/// instance waits on it.
pub(super) struct WaitWatcher(pub(super) Arc<LockShared>);

impl Watcher for WaitWatcher {
    fn process(&self, event: WatchedEvent) {
        if event.event_type != EventType::None || crate::wait::ends_session(&event) {
            self.0.wake.wake();
        }
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
    /// the gap, so the answer tells whether the node is still there).
    fn rearm(&self) {
        let (Some(zk), Some(me)) = (self.zkw.zookeeper(), self.me.upgrade()) else {
            return;
        };
        let watcher: Arc<dyn Watcher> = me.clone();
        zk.exists_async(&self.path, Some(watcher), move |r| match r {
            Ok(Some(_)) => {}
            Ok(None) => me.gone("its node was deleted"),
            Err(e) if e.is_fatal() => me.connection(KeeperState::Expired),
            Err(e) => {
                debug!(
                    "lock node {}: watching it again after the reconnect ({e})",
                    me.path
                );
                // Not in the client's table now: no event reaches it until then.
                let again = me.clone();
                on_reconnect(&me.zkw, move |connected| {
                    if connected {
                        again.connection(KeeperState::SyncConnected);
                        again.rearm();
                    } else {
                        again.connection(KeeperState::Expired);
                    }
                });
            }
        });
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
}
