//! A waiting thread's wake-up counter, the core of the wait engine
//! ([`wait`](crate::engine::wait)): a leaf module, so that the client can wake a
//! wait when its session ends without importing the engine.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::deadline::Deadline;

#[cfg(all(test, zklock_loom))]
use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(all(test, zklock_loom)))]
use std::sync::{Condvar, Mutex, MutexGuard};

/// A waiting thread's wake-up counter: bumped by watchers (on the event
/// thread), by a cancel and by the session's end; waited for by the thread
/// that makes the calls. See the [`wait`](crate::engine::wait) module docs.
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
            crate::engine::hook::note_wake_up();
        }
        true
    }
}

/// The waits to wake when a session ends, by registration id: the client's
/// table behind `ZooKeeper::wake_at_end` (and the loom model's session). The
/// owner sets its ended state *before* [`wake_all`](Self::wake_all), and a
/// registration looks at that state *after* [`register`](Self::register), so
/// an end is never missed between the two.
#[derive(Debug, Default)]
pub(crate) struct EndWakes {
    table: Mutex<EndTable>,
}

#[derive(Debug, Default)]
struct EndTable {
    next: u64,
    by_id: HashMap<u64, Weak<Wake>>,
}

impl EndWakes {
    fn table(&self) -> MutexGuard<'_, EndTable> {
        // Nothing runs user code under this lock: a poisoned one is still sound.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `wake`, until [`forget`](Self::forget) with the returned id,
    /// then wakes it at once when `ended()` says the session has ended
    /// already: an end after that look wakes it from the table.
    pub(crate) fn register(&self, wake: &Arc<Wake>, ended: impl FnOnce() -> bool) -> u64 {
        let id = {
            let mut t = self.table();
            t.next += 1;
            let id = t.next;
            t.by_id.insert(id, Arc::downgrade(wake));
            id
        };
        if ended() {
            wake.wake();
        }
        id
    }

    /// Unregisters a [`register`](Self::register).
    pub(crate) fn forget(&self, id: u64) {
        self.table().by_id.remove(&id);
    }

    /// Wakes every registered wait (never blocks: each wake only bumps a
    /// counter). Called after the session's ended state is set.
    pub(crate) fn wake_all(&self) {
        let wakes: Vec<Arc<Wake>> = {
            let mut t = self.table();
            t.by_id.retain(|_, w| w.strong_count() > 0);
            t.by_id.values().filter_map(Weak::upgrade).collect()
        };
        for w in wakes {
            w.wake();
        }
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
