//! How every recipe waits: a per-watch watcher handed to the client with the
//! request, which wakes the waiting thread (never the listener registry, never a
//! blocking call on the event thread), and a bounded wait that also ends with
//! the session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::deadline::Deadline;
use crate::error::{Error, Result, ZkError};
use crate::types::{EventType, KeeperState, State, WatchedEvent, Watcher};
use crate::watcher::ZooKeeperWatcher;

/// How often a waiting thread looks at its session without being woken (in
/// case the event thread is held up by a user's listener, or the connection is
/// down and no event can come).
const RECHECK: Duration = Duration::from_millis(500);

/// How long past a recipe's timeout its ZooKeeper calls may run (the same grace
/// as the locks' `DEFAULT_CALL_GRACE`).
pub(super) const CALL_GRACE: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Wake {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Wake {
    fn wake(&self) {
        *self.woken.lock() = true;
        self.cv.notify_all();
    }
}

/// Wakes the waiter on any node event, on a reconnect (the waiter re-reads: a
/// watch set again by SetWatches may have fired during the gap) and when the
/// session ends. A disconnect alone does not wake it (see [`Waiter::wait`]).
struct WakeWatcher(Arc<Wake>);

impl Watcher for WakeWatcher {
    fn process(&self, event: WatchedEvent) {
        let wake = event.event_type != EventType::None
            || !matches!(event.keeper_state, KeeperState::Disconnected);
        if wake {
            self.0.wake();
        }
    }
}

/// One recipe instance's wake-up: its watcher is passed with every watching
/// request of the instance (the client keeps a watcher once per path, so
/// repeated waits on one node do not pile up registrations).
pub(super) struct Waiter {
    wake: Arc<Wake>,
    watcher: Arc<dyn Watcher>,
}

impl Default for Waiter {
    fn default() -> Self {
        let wake = Arc::new(Wake::default());
        Waiter {
            watcher: Arc::new(WakeWatcher(wake.clone())),
            wake,
        }
    }
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter")
            .field("woken", &*self.wake.woken.lock())
            .finish()
    }
}

impl Waiter {
    /// The watcher to pass with the request that sets this round's watch.
    pub(super) fn watcher(&self) -> &Arc<dyn Watcher> {
        &self.watcher
    }

    /// Forgets earlier wake-ups; call before setting the watch of a round, so
    /// a wake-up of this round is never lost (a stale one costs a re-read).
    pub(super) fn arm(&self) {
        *self.wake.woken.lock() = false;
    }

    /// Waits until woken or `deadline`: `Ok(true)` woken, `Ok(false)` out of
    /// time. Ends with the session's error (`SessionExpired`, `Closed`, ...)
    /// when it ends, and with `ConnectionLoss` about `what` when the connection
    /// stays down for a whole session timeout (the server expires the session
    /// by then; the client learns it only when it reconnects).
    pub(super) fn wait(
        &self,
        zkw: &ZooKeeperWatcher,
        deadline: Deadline,
        what: &str,
    ) -> Result<bool> {
        let mut down_since: Option<Instant> = None;
        loop {
            {
                let mut woken = self.wake.woken.lock();
                if !*woken {
                    let until = deadline.min_after(RECHECK);
                    let _ = self.wake.cv.wait_until(&mut woken, until);
                }
                if *woken {
                    return Ok(true);
                }
            }
            zkw.check_session()?;
            if zkw.state() == State::Connecting {
                let since = *down_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= zkw.zookeeper().session_timeout() {
                    return Err(Error::zk(ZkError::ConnectionLoss, what));
                }
            } else {
                down_since = None;
            }
            if deadline.is_past() {
                return Ok(false);
            }
        }
    }
}

/// The bounds of a recipe call with a timeout: `wait` ends the waiting, `calls`
/// every ZooKeeper call (retries included).
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    pub(super) wait: Deadline,
    pub(super) calls: Deadline,
}

impl Bounds {
    /// A recoverable error from a call that the calls' deadline cut short:
    /// the wait ran out of time (a timeout, not an error).
    pub(super) fn cut_short(&self, e: &Error) -> bool {
        e.is_retryable() && self.calls.is_past()
    }

    pub(super) fn new(timeout: Option<Duration>) -> Bounds {
        match timeout {
            None => Bounds {
                wait: Deadline::never(),
                calls: Deadline::never(),
            },
            Some(t) => Bounds {
                wait: Deadline::after(t),
                calls: Deadline::after(t.saturating_add(CALL_GRACE)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disconnect_does_not_wake_but_a_reconnect_and_events_do() {
        let w = Waiter::default();
        w.arm();
        w.watcher()
            .process(WatchedEvent::state(KeeperState::Disconnected));
        assert!(!*w.wake.woken.lock());
        w.watcher()
            .process(WatchedEvent::state(KeeperState::SyncConnected));
        assert!(*w.wake.woken.lock());
        w.arm();
        w.watcher().process(WatchedEvent {
            event_type: EventType::NodeDeleted,
            keeper_state: KeeperState::SyncConnected,
            path: Some("/b".into()),
        });
        assert!(*w.wake.woken.lock());
    }
}
