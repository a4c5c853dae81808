//! How the library's waits wait, shared by the locks and the recipes: a wake-up
//! set by a per-watch watcher (on the event thread) and waited for by the
//! calling thread, and the bounds of a call with a timeout.

use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::deadline::Deadline;
use crate::error::Error;

/// How long past its timeout a `try_acquire` (or a recipe's timed call) lets
/// the ZooKeeper calls of its attempt run: the create and each listing. The
/// locks take another with `ZkInterProcessLockBase::with_call_grace`.
pub const DEFAULT_CALL_GRACE: Duration = Duration::from_secs(2);

/// How often a recipe's waiting thread looks at its session without being
/// woken: in case a listener holds the event thread up, or no event can come
/// (and to end a wait through a connection down for a whole session timeout).
pub(crate) const RECHECK: Duration = Duration::from_millis(500);

/// How often a lock's waiting thread looks at its session and its cancel
/// flag without being woken: a safety net only. The session's end wakes the
/// wait directly (`ZooKeeper::wake_at_end`, from the thread that ends it, even
/// while a listener holds the event thread up), and so does a cancel; a short
/// period would wake every one of 10,000 idle waiters twice a second.
pub(crate) const LOCK_RECHECK: Duration = Duration::from_secs(10);

/// A waiting thread's wake-up: set by watchers (on the event thread) and by
/// `cancel`, waited for by the thread that makes the calls.
#[derive(Default)]
pub(crate) struct Wake {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Wake {
    /// Forgets earlier wake-ups: called before the watch of a round is set, so a
    /// wake-up for this round is never lost (a stale one only costs a re-read).
    pub(crate) fn arm(&self) {
        *self.woken.lock() = false;
    }

    pub(crate) fn wake(&self) {
        *self.woken.lock() = true;
        self.cv.notify_all();
    }

    /// Whether a wake-up is pending.
    pub(crate) fn is_woken(&self) -> bool {
        *self.woken.lock()
    }

    /// Waits until woken or `deadline`; `true` when woken.
    pub(crate) fn wait(&self, deadline: Deadline) -> bool {
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

/// The bounds of a call with a timeout: `wait` ends the waiting, `calls` every
/// ZooKeeper call (retries included) a grace later.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) wait: Deadline,
    pub(crate) calls: Deadline,
}

impl Bounds {
    /// `timeout` with [`DEFAULT_CALL_GRACE`]; `None` bounds nothing.
    pub(crate) fn new(timeout: Option<Duration>) -> Bounds {
        Bounds::with_grace(timeout, DEFAULT_CALL_GRACE)
    }

    /// `timeout` with its calls `grace` longer; `None` bounds nothing.
    pub(crate) fn with_grace(timeout: Option<Duration>, grace: Duration) -> Bounds {
        match timeout {
            None => Bounds {
                wait: Deadline::never(),
                calls: Deadline::never(),
            },
            Some(t) => Bounds {
                wait: Deadline::after(t),
                calls: Deadline::after(t.saturating_add(grace)),
            },
        }
    }

    /// A recoverable error from a call that the calls' deadline cut short: the
    /// wait ran out of time (a timeout, not an error).
    pub(crate) fn cut_short(&self, e: &Error) -> bool {
        e.is_retryable() && self.calls.is_past()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_wake() {
        let b = Bounds::new(None);
        assert!(b.wait.is_never() && b.calls.is_never());
        let b = Bounds::with_grace(Some(Duration::ZERO), Duration::from_secs(60));
        assert!(b.wait.is_past() && !b.calls.is_past());
        let w = Wake::default();
        assert!(!w.wait(Deadline::after(Duration::from_millis(1))));
        w.wake();
        assert!(w.is_woken() && w.wait(Deadline::never()));
        w.arm();
        assert!(!w.is_woken());
    }
}
