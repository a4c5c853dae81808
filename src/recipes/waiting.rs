//! How every recipe waits: a per-watch watcher handed to the client with the
//! request, which wakes the waiting thread (never the listener registry, never a
//! blocking call on the event thread), and a bounded wait that also ends with
//! the session.

use std::sync::Arc;
use std::time::Instant;

use crate::deadline::Deadline;
use crate::error::{Error, Result, ZkError};
use crate::types::{EventType, KeeperState, State, WatchedEvent, Watcher};
pub(super) use crate::wait::Bounds;
use crate::wait::{Wake, RECHECK};
use crate::watcher::ZooKeeperWatcher;

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
            .field("woken", &self.wake.is_woken())
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
        self.wake.arm();
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
            if self.wake.wait(deadline.min(Deadline::after(RECHECK))) {
                return Ok(true);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disconnect_does_not_wake_but_a_reconnect_and_events_do() {
        let w = Waiter::default();
        w.arm();
        w.watcher()
            .process(WatchedEvent::state(KeeperState::Disconnected));
        assert!(!w.wake.is_woken());
        w.watcher()
            .process(WatchedEvent::state(KeeperState::SyncConnected));
        assert!(w.wake.is_woken());
        w.arm();
        w.watcher().process(WatchedEvent {
            event_type: EventType::NodeDeleted,
            keeper_state: KeeperState::SyncConnected,
            path: Some("/b".into()),
        });
        assert!(w.wake.is_woken());
    }
}
