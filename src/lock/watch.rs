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

use log::{info, warn};
use parking_lot::{Condvar, Mutex, RwLock};

use super::{LockEvent, LockListener};
use crate::client::{EventType, KeeperState, State as ClientState, WatchedEvent, Watcher};
use crate::client::{WeakZooKeeper, ZooKeeper};
use crate::deadline::Deadline;

/// Wakes the thread waiting in an attempt: set by watchers (on the event thread)
/// and by `cancel`, waited on by the acquiring thread.
#[derive(Default)]
pub(super) struct Wake {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Wake {
    /// Forgets earlier wake-ups: called before the watch of a round is set, so a
    /// wake-up for this round is never lost (a stale one only costs a re-list).
    pub(super) fn arm(&self) {
        *self.woken.lock() = false;
    }

    pub(super) fn wake(&self) {
        *self.woken.lock() = true;
        self.cv.notify_all();
    }

    /// Waits until woken or `deadline`; `true` when woken.
    pub(super) fn wait(&self, deadline: Deadline) -> bool {
        let mut woken = self.woken.lock();
        while !*woken {
            match deadline.instant() {
                None => self.cv.wait(&mut woken),
                Some(d) => {
                    if self.cv.wait_until(&mut woken, d).timed_out() {
                        return *woken;
                    }
                }
            }
        }
        true
    }
}

/// What one lock instance shares with its watchers (no `ZooKeeperWatcher`
/// inside: a watcher in the client's table must not keep the session alive).
#[derive(Default)]
pub(super) struct Shared {
    /// Set when the held lock is known lost; reset by each new attempt.
    pub(super) lost: AtomicBool,
    /// Set by `cancel`: attempts in progress and later ones fail with `Cancelled`.
    pub(super) cancelled: AtomicBool,
    pub(super) listener: RwLock<Option<Arc<dyn LockListener>>>,
    pub(super) wake: Wake,
    /// Serialises the listener's events in the order they were decided.
    tell_order: Mutex<()>,
}

impl Shared {
    fn tell(&self, path: &str, event: LockEvent) {
        let l = self.listener.read().clone();
        if let Some(l) = l {
            l.lock_event(path, event);
        }
    }
}

/// Wakes the waiting attempt on any event of the node it waits for, and when the
/// session ends (every watcher hears the session's end, as in Java). One per
/// lock instance, so the client registers it once per path.
pub(super) struct WaitWatcher(pub(super) Arc<Shared>);

impl Watcher for WaitWatcher {
    fn process(&self, event: WatchedEvent) {
        let ends = matches!(
            event.keeper_state,
            KeeperState::Expired | KeeperState::Closed | KeeperState::AuthFailed
        );
        if event.event_type != EventType::None || ends {
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

/// What a [`NodeWatch`] decided, to be told outside its state lock.
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
    shared: Arc<Shared>,
    state: Mutex<NodeState>,
    zk: WeakZooKeeper,
    me: Weak<NodeWatch>,
}

impl NodeWatch {
    pub(super) fn new(path: &str, shared: &Arc<Shared>, zk: &ZooKeeper) -> Arc<NodeWatch> {
        Arc::new_cyclic(|me| NodeWatch {
            path: path.to_string(),
            shared: shared.clone(),
            state: Mutex::new(NodeState {
                phase: Phase::Waiting,
                gone: false,
                in_doubt: false,
            }),
            zk: zk.downgrade(),
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

    /// A release that failed with a recoverable error: the lock is still held.
    pub(super) fn unrelease(&self) {
        let mut st = self.state.lock();
        if st.gone {
            drop(st);
            self.lose("its node was deleted");
        } else {
            st.phase = Phase::Held;
        }
    }

    fn lose(&self, why: &'static str) {
        let st = self.state.lock();
        if st.phase == Phase::Held {
            self.tell(st, Tell::Event(LockEvent::Lost, why));
        }
    }

    /// Acts on a decision: the listener is called after the state lock is let go
    /// (it may call back into the lock) but in decision order.
    fn tell(&self, st: parking_lot::MutexGuard<'_, NodeState>, tell: Tell) {
        let order = self.shared.tell_order.lock();
        drop(st);
        match tell {
            Tell::Nothing => {}
            Tell::Wake => self.shared.wake.wake(),
            Tell::Event(LockEvent::Lost, why) => {
                if !self.shared.lost.swap(true, Ordering::SeqCst) {
                    warn!("lock {} lost: {why}", self.path);
                    self.shared.tell(&self.path, LockEvent::Lost);
                }
            }
            Tell::Event(event, why) => {
                if !self.shared.lost.load(Ordering::SeqCst) {
                    info!("lock {} {event:?}: {why}", self.path);
                    self.shared.tell(&self.path, event);
                }
            }
        }
        drop(order);
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
    /// blocking (the answer comes back on the event thread).
    fn rearm(&self) {
        let (Some(zk), Some(me)) = (self.zk.upgrade(), self.me.upgrade()) else {
            return;
        };
        let watcher: Arc<dyn Watcher> = me.clone();
        zk.exists_async(&self.path, Some(watcher), move |r| match r {
            Ok(Some(_)) => {}
            Ok(None) => me.gone("its node was deleted"),
            Err(e) if e.is_fatal() => me.gone("the session ended"),
            Err(e) => warn!(
                "lock node {}: could not watch it again ({e}); a deletion may go unnoticed",
                me.path
            ),
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
    pub(super) fn check_session(&self, state: ClientState) {
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
