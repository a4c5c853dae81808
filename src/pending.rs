//! HBase's `InstancePending` and `PendingWatcher`: a one-shot latch, and the
//! default watcher a client gets before the real watcher exists.
//!
//! `ZooKeeper::connect` needs its default watcher before the object that should
//! receive the events (HBase's `ZooKeeperWatcher`) has been built. As in HBase,
//! the client is given a [`PendingWatcher`]; the client's event thread blocks in it
//! until [`PendingWatcher::prepare`] hands over the finished watcher, then every
//! event, including those that arrived in between, reaches it in order.

use std::fmt;
use std::sync::Weak;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::types::{WatchedEvent, Watcher};

/// HBase's `InstancePending`: a value that is set once and awaited by any number of
/// threads.
///
/// [`get`](InstancePending::get) blocks until [`prepare`](InstancePending::prepare)
/// has been called, then returns a clone of the value; every later `get` returns at
/// once. `prepare` succeeds once: a second call is an error and the first value
/// stays (HBase asserts instead). Waiting threads sleep on a condition variable;
/// nothing spins.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use zklock::InstancePending;
///
/// let pending = Arc::new(InstancePending::new());
/// assert_eq!(pending.get_timeout(Duration::from_millis(1)), None);
///
/// let waiter = {
///     let pending = Arc::clone(&pending);
///     std::thread::spawn(move || pending.get())
/// };
/// pending.prepare("ready")?;
/// assert_eq!(waiter.join().unwrap(), "ready");
///
/// // Once only: the first value stays.
/// assert!(pending.prepare("again").is_err());
/// assert_eq!(pending.get(), "ready");
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct InstancePending<T> {
    value: Mutex<Option<T>>,
    prepared: Condvar,
}

impl<T> InstancePending<T> {
    /// HBase's `new InstancePending<>()`: a latch without a value.
    pub const fn new() -> InstancePending<T> {
        InstancePending {
            value: Mutex::new(None),
            prepared: Condvar::new(),
        }
    }

    /// HBase's `InstancePending.prepare(instance)`: sets the value and wakes every
    /// waiting thread.
    ///
    /// # Errors
    ///
    /// [`Error::BadArguments`] if the value was already set; the first value is kept
    /// and `value` is dropped.
    pub fn prepare(&self, value: T) -> Result<()> {
        let mut slot = self.value.lock();
        if slot.is_some() {
            return Err(Error::BadArguments(
                "InstancePending::prepare called twice: the value was already set".to_owned(),
            ));
        }
        *slot = Some(value);
        drop(slot);
        self.prepared.notify_all();
        Ok(())
    }

    /// Whether [`prepare`](InstancePending::prepare) has been called (no HBase
    /// counterpart).
    pub fn is_prepared(&self) -> bool {
        self.value.lock().is_some()
    }
}

impl<T: Clone> InstancePending<T> {
    /// HBase's `InstancePending.get()`: blocks until the value is prepared, then
    /// returns a clone of it.
    ///
    /// There is no timeout: use [`get_timeout`](InstancePending::get_timeout) when
    /// `prepare` may never come.
    pub fn get(&self) -> T {
        let mut slot = self.value.lock();
        loop {
            if let Some(value) = slot.as_ref() {
                return value.clone();
            }
            self.prepared.wait(&mut slot);
        }
    }

    /// A bounded [`get`](InstancePending::get) (HBase has none): the value, or
    /// `None` if it was not prepared within `timeout`.
    pub fn get_timeout(&self, timeout: Duration) -> Option<T> {
        // A timeout too large for an `Instant` is no timeout.
        let deadline = Instant::now().checked_add(timeout);
        let mut slot = self.value.lock();
        loop {
            if let Some(value) = slot.as_ref() {
                return Some(value.clone());
            }
            match deadline {
                Some(deadline) => {
                    if self.prepared.wait_until(&mut slot, deadline).timed_out() {
                        return slot.clone();
                    }
                }
                None => self.prepared.wait(&mut slot),
            }
        }
    }
}

impl<T> Default for InstancePending<T> {
    fn default() -> InstancePending<T> {
        InstancePending::new()
    }
}

impl<T> fmt::Debug for InstancePending<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstancePending")
            .field("prepared", &self.is_prepared())
            .finish()
    }
}

/// HBase's `PendingWatcher`: the client's default watcher, created before the real
/// watcher exists.
///
/// Give it (as an `Arc<PendingWatcher>`) to the client as its default watcher, build
/// the real watcher, then call [`prepare`](PendingWatcher::prepare) with a `Weak`
/// to it. Until then, the first event blocks the client's event thread inside
/// [`process`](Watcher::process); afterwards that event and every later one are
/// forwarded, in order, to the real watcher.
///
/// It holds a [`Weak`], so the client → `PendingWatcher` → watcher → client chain
/// is not an `Arc` cycle: once the real watcher is dropped, events are dropped
/// (logged at debug level) instead of keeping it alive.
///
/// If building the real watcher fails, call [`cancel`](PendingWatcher::cancel) (or
/// `prepare` with a dead `Weak`) before closing the client, so that an event
/// thread blocked here is released and drops its events.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex, Weak};
/// use zklock::client::{KeeperState, WatchedEvent, Watcher};
/// use zklock::PendingWatcher;
///
/// let pending = Arc::new(PendingWatcher::new());
/// // ... `pending.clone()` goes to the client as its default watcher ...
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let real: Arc<dyn Watcher> = {
///     let seen = Arc::clone(&seen);
///     Arc::new(move |event: WatchedEvent| seen.lock().unwrap().push(event))
/// };
/// pending.prepare(Arc::downgrade(&real))?;
///
/// pending.process(WatchedEvent::state(KeeperState::SyncConnected));
/// assert_eq!(seen.lock().unwrap().len(), 1);
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct PendingWatcher {
    pending: InstancePending<Weak<dyn Watcher>>,
}

/// The target of [`PendingWatcher::cancel`]: never alive, never called.
struct Cancelled;

impl Watcher for Cancelled {
    fn process(&self, _event: WatchedEvent) {}
}

impl PendingWatcher {
    /// HBase's `new PendingWatcher()`: a watcher whose target is not yet known.
    pub const fn new() -> PendingWatcher {
        PendingWatcher {
            pending: InstancePending::new(),
        }
    }

    /// HBase's `PendingWatcher.prepare(watcher)`: sets the watcher that receives the
    /// events, and releases an event thread blocked in `process`.
    ///
    /// # Errors
    ///
    /// [`Error::BadArguments`] if a watcher was already set (or the watcher was
    /// cancelled); the first one stays.
    pub fn prepare(&self, watcher: Weak<dyn Watcher>) -> Result<()> {
        self.pending.prepare(watcher)
    }

    /// Gives up on the real watcher (no HBase counterpart): every event, pending or
    /// future, is dropped and logged at debug level.
    ///
    /// Call it when the object that should have been prepared could not be built,
    /// so the client's event thread is not left blocked. It is
    /// `prepare(Weak::new())` with a watcher that never existed.
    ///
    /// # Errors
    ///
    /// [`Error::BadArguments`] if a watcher was already set.
    pub fn cancel(&self) -> Result<()> {
        self.prepare(Weak::<Cancelled>::new())
    }

    /// Whether [`prepare`](PendingWatcher::prepare) or
    /// [`cancel`](PendingWatcher::cancel) has been called.
    pub fn is_prepared(&self) -> bool {
        self.pending.is_prepared()
    }
}

impl Watcher for PendingWatcher {
    /// HBase's `PendingWatcher.process(event)`: blocks until the watcher is
    /// prepared, then forwards `event` to it, or drops it if the watcher is gone.
    fn process(&self, event: WatchedEvent) {
        let watcher = self.pending.get();
        match watcher.upgrade() {
            Some(watcher) => watcher.process(event),
            None => log::debug!("no watcher (dropped or cancelled): dropping event {event:?}"),
        }
    }
}

impl Default for PendingWatcher {
    fn default() -> PendingWatcher {
        PendingWatcher::new()
    }
}

impl fmt::Debug for PendingWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingWatcher")
            .field("prepared", &self.is_prepared())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{EventType, KeeperState};
    use std::sync::mpsc;
    use std::sync::Arc;
    use std::thread;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn get_waits_for_prepare() {
        let pending = Arc::new(InstancePending::<u32>::new());
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let pending = Arc::clone(&pending);
            thread::spawn(move || tx.send(pending.get()).unwrap())
        };
        // Nothing after 100 ms ...
        assert_eq!(
            rx.recv_timeout(ms(100)),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        assert!(!pending.is_prepared());
        // ... then the value right after prepare.
        let prepared_at = Instant::now();
        pending.prepare(7).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(7));
        assert!(prepared_at.elapsed() < Duration::from_secs(5));
        waiter.join().unwrap();
        assert!(pending.is_prepared());
        assert_eq!(pending.get(), 7);
    }

    #[test]
    fn get_timeout_none_then_some() {
        let pending = InstancePending::new();
        let started = Instant::now();
        assert_eq!(pending.get_timeout(ms(50)), None);
        assert!(started.elapsed() >= ms(50));
        assert_eq!(pending.get_timeout(Duration::ZERO), None);
        pending.prepare("x".to_owned()).unwrap();
        assert_eq!(pending.get_timeout(ms(50)).as_deref(), Some("x"));
        assert_eq!(pending.get_timeout(Duration::ZERO).as_deref(), Some("x"));
        // A timeout beyond `Instant`'s range is no timeout, not a panic.
        assert_eq!(pending.get_timeout(Duration::MAX).as_deref(), Some("x"));
    }

    #[test]
    fn get_timeout_wakes_on_prepare() {
        let pending = Arc::new(InstancePending::new());
        let waiter = {
            let pending = Arc::clone(&pending);
            thread::spawn(move || pending.get_timeout(Duration::MAX))
        };
        thread::sleep(ms(20));
        pending.prepare(1u8).unwrap();
        assert_eq!(waiter.join().unwrap(), Some(1));
    }

    #[test]
    fn second_prepare_is_an_error_and_the_first_value_stays() {
        let pending = InstancePending::new();
        pending.prepare(1).unwrap();
        match pending.prepare(2) {
            Err(Error::BadArguments(msg)) => assert!(msg.contains("twice"), "{msg}"),
            other => panic!("expected BadArguments, got {other:?}"),
        }
        assert_eq!(pending.get(), 1);
    }

    #[test]
    fn many_waiters_all_wake() {
        let pending = Arc::new(InstancePending::new());
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let pending = Arc::clone(&pending);
                thread::spawn(move || pending.get())
            })
            .collect();
        pending.prepare(42u64).unwrap();
        for waiter in waiters {
            assert_eq!(waiter.join().unwrap(), 42);
        }
    }

    #[test]
    fn debug_shows_state() {
        let pending = InstancePending::<()>::default();
        assert_eq!(
            format!("{pending:?}"),
            "InstancePending { prepared: false }"
        );
        let watcher = PendingWatcher::default();
        watcher.cancel().unwrap();
        assert_eq!(format!("{watcher:?}"), "PendingWatcher { prepared: true }");
    }

    fn node_event(i: usize) -> WatchedEvent {
        WatchedEvent::node(EventType::NodeCreated, format!("/n{i}"))
    }

    #[test]
    fn events_before_prepare_arrive_after_it_in_order() {
        let pending = Arc::new(PendingWatcher::new());
        let (seen_tx, seen_rx) = mpsc::channel();
        // The client's event thread delivers 5 events before the watcher exists.
        let event_thread = {
            let pending = Arc::clone(&pending);
            thread::spawn(move || {
                pending.process(WatchedEvent::state(KeeperState::SyncConnected));
                for i in 0..4 {
                    pending.process(node_event(i));
                }
            })
        };
        let real: Arc<dyn Watcher> = {
            let seen_tx = Mutex::new(seen_tx);
            Arc::new(move |event: WatchedEvent| seen_tx.lock().send(event).unwrap())
        };
        assert_eq!(
            seen_rx.recv_timeout(ms(100)),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        pending.prepare(Arc::downgrade(&real)).unwrap();
        event_thread.join().unwrap();

        let seen: Vec<_> = seen_rx.try_iter().collect();
        let mut expected = vec![WatchedEvent::state(KeeperState::SyncConnected)];
        expected.extend((0..4).map(node_event));
        assert_eq!(seen, expected);

        // Later events go straight through.
        pending.process(node_event(9));
        assert_eq!(seen_rx.try_recv().unwrap(), node_event(9));
        // A second prepare is refused; the first watcher stays.
        assert!(pending.prepare(Weak::<Cancelled>::new()).is_err());
        pending.process(node_event(10));
        assert_eq!(seen_rx.try_recv().unwrap(), node_event(10));
    }

    #[test]
    fn dead_watcher_drops_events() {
        let pending = PendingWatcher::new();
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let real: Arc<dyn Watcher> = {
            let calls = Arc::clone(&calls);
            Arc::new(move |_: WatchedEvent| {
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })
        };
        pending.prepare(Arc::downgrade(&real)).unwrap();
        pending.process(node_event(0));
        drop(real);
        pending.process(node_event(1));
        pending.process(WatchedEvent::state(KeeperState::Closed));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn cancel_releases_a_blocked_event_thread() {
        let pending = Arc::new(PendingWatcher::new());
        let event_thread = {
            let pending = Arc::clone(&pending);
            thread::spawn(move || pending.process(node_event(0)))
        };
        thread::sleep(ms(20));
        pending.cancel().unwrap();
        event_thread.join().unwrap();
        pending.process(node_event(1));
        assert!(pending.cancel().is_err());
        let real: Arc<dyn Watcher> = Arc::new(|_: WatchedEvent| {});
        assert!(pending.prepare(Arc::downgrade(&real)).is_err());
    }
}
