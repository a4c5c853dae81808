//! A waiting thread's wake-up counter, the core of the wait engine
//! ([`wait`](crate::wait)): a leaf module, so that the client can wake a
//! wait when its session ends without importing the engine.

use std::time::{Duration, Instant};

use crate::deadline::Deadline;

#[cfg(all(test, zklock_loom))]
use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(all(test, zklock_loom)))]
use std::sync::{Condvar, Mutex, MutexGuard};

/// A waiting thread's wake-up counter: bumped by watchers (on the event
/// thread), by a cancel and by the session's end; waited for by the thread
/// that makes the calls. See the [`wait`](crate::wait) module docs.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    generation: Mutex<u64>,
    cv: Condvar,
}

impl Wake {
    fn lock(&self) -> MutexGuard<'_, u64> {
        // Nothing runs user code under this lock: a poisoned one is still sound.
        self.generation.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The generation now: read it *before* setting a round's watch, then
    /// [`wait`](Self::wait) for a later one.
    pub(crate) fn generation(&self) -> u64 {
        *self.lock()
    }

    /// Wakes every wait of an earlier generation (never blocks).
    pub(crate) fn wake(&self) {
        let mut g = self.lock();
        *g = g.wrapping_add(1);
        drop(g);
        self.cv.notify_all();
    }

    /// Waits until the generation differs from `seen`, or `deadline`: `true`
    /// when woken.
    pub(crate) fn wait(&self, seen: u64, deadline: Deadline) -> bool {
        let mut g = self.lock();
        while *g == seen {
            match deadline.instant() {
                None => g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    g = wait_timeout(&self.cv, g, left);
                }
            }
        }
        true
    }
}

#[cfg(not(all(test, zklock_loom)))]
fn wait_timeout<'a>(cv: &Condvar, g: MutexGuard<'a, u64>, left: Duration) -> MutexGuard<'a, u64> {
    cv.wait_timeout(g, left)
        .map(|(g, _)| g)
        .unwrap_or_else(|e| e.into_inner().0)
}

#[cfg(all(test, zklock_loom))]
fn wait_timeout<'a>(cv: &Condvar, g: MutexGuard<'a, u64>, _left: Duration) -> MutexGuard<'a, u64> {
    // loom models no clock: a timed wait is a wait.
    cv.wait(g).unwrap_or_else(|e| e.into_inner())
}
