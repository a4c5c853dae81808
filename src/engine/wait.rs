//! The one wait engine of the locks and the recipes.
//!
//! - [`Wake`]: a generation counter, bumped by every wake-up (a per-watch
//!   watcher on the event thread, a cancel, the session's end). A round reads
//!   the generation *before* it sets its watch and waits until it differs, so
//!   a wake-up can never be lost, whatever other threads sharing the counter
//!   do (a shared boolean re-armed by one thread would swallow another's).
//! - [`WaitSession`]: the session a blocking call began in, as the wait sees
//!   it (implemented by [`CallSession`](crate::engine::call::CallSession), in the
//!   module above, which holds the watcher; the engine needs no client, so its
//!   loom model runs the real [`wait`]). Every ZooKeeper call of the wait
//!   goes to that session only (a handle pinned to it), and the wait ends
//!   with `SessionExpired` when it ends, even when `with_session_renewal` has
//!   opened a new session meanwhile: a wait never carries on in another
//!   session. The engine itself waits on the client's events only.
//! - [`Waiter`]: a recipe instance's wake-up and the per-watch watcher passed
//!   with each watching request (registered with the request, never through
//!   the listener registry). Its wait is ended by the session's end directly
//!   (`ZooKeeper::wake_at_end`, from the client thread that ends it) and looks
//!   at nothing periodically: an idle waiter costs no wake-up at all.
//! - [`WaitWatcher`]: the one per-watch watcher of every wait (the
//!   [`Waiter`]'s, the locks' with their prefetch step, the persistent
//!   node's thread's): it wakes a [`Wake`] and never blocks.
//! - [`wait_unbound`]: the engine's wait for a state that outlives sessions
//!   (the persistent node's thread, the TTL node's touch thread, a
//!   leadership signal): woken only by its wake-ups, never periodically.
//! - [`Bounds`]: the deadlines of a call with a timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::deadline::Deadline;
use crate::engine::hook::{hook, Hook};
pub(crate) use crate::engine::wake::Wake;
use crate::error::{Error, Result, ZkError};
use crate::types::{EventType, KeeperState, WatchedEvent, Watcher};

/// How long past its timeout a `try_acquire` (or a recipe's timed call) lets
/// the ZooKeeper calls of its attempt run: the create and each listing. The
/// locks take another with `ZkInterProcessLockBase::with_call_grace`.
pub const DEFAULT_CALL_GRACE: Duration = Duration::from_secs(2);

/// What the engine's [`wait`] needs of the session a blocking call began in
/// ([`CallSession`](crate::engine::call::CallSession) over the client; the loom model's
/// session in the tests): whether it has ended, whether its connection is up,
/// its timeout, and a wake-up at its end.
pub(crate) trait WaitSession {
    /// An error when the session can no longer be used: `SessionExpired`
    /// once it expired (whether or not a new one replaced it), `AuthFailed`,
    /// `Closed`.
    fn check(&self) -> Result<()>;

    /// Whether the session's connection is up now.
    fn connected(&self) -> bool;

    /// The session's negotiated timeout.
    fn session_timeout(&self) -> Duration;

    /// Wakes `wake` when the session ends (at once if it has), from the
    /// thread that ends it, until the returned registration is dropped.
    fn wake_at_end(&self, wake: &Arc<Wake>) -> EndRegistration;
}

/// A [`WaitSession::wake_at_end`] registration: unregistered on drop.
pub(crate) struct EndRegistration(#[allow(dead_code)] Box<dyn Send>);

impl EndRegistration {
    /// Unregisters by dropping `guard`.
    pub(crate) fn new(guard: impl Send + 'static) -> EndRegistration {
        EndRegistration(Box::new(guard))
    }
}

/// What ends a [`wait`] besides a wake-up and the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WhenDown {
    /// Waits through a disconnection for as long as the session lives (the
    /// locks: HBase's waiter sleeps until its watch fires or the session ends).
    Wait,
    /// Ends with `ConnectionLoss` when the connection stays down for a whole
    /// session timeout (the server expires the session by then; the client
    /// learns it only when it reconnects). The recipes' waits.
    EndAfterSessionTimeout,
}

/// The engine's wait: until `wake` moves past `seen` (a wake-up), `deadline`
/// (`Ok(false)`), or the end of `session` (its error). The session's end wakes
/// it directly; nothing is looked at periodically. A wake-up while the
/// connection is down waits on for the reconnect (whose event wakes it
/// again); with [`WhenDown::EndAfterSessionTimeout`] at most a session timeout,
/// then `ConnectionLoss` about `what`.
pub(crate) fn wait(
    wake: &Arc<Wake>,
    seen: u64,
    session: &dyn WaitSession,
    deadline: Deadline,
    when_down: WhenDown,
    what: &str,
) -> Result<bool> {
    let _end = session.wake_at_end(wake);
    let mut seen = seen;
    let mut down_since: Option<Instant> = None;
    loop {
        session.check()?;
        let limit = match down_since {
            Some(t) if when_down == WhenDown::EndAfterSessionTimeout => {
                deadline.min(Deadline::at(t + session.session_timeout()))
            }
            _ => deadline,
        };
        if wake.wait(seen, limit) {
            session.check()?;
            // Read before looking at the state: a reconnect after this read
            // wakes the next round, one before it shows as connected.
            seen = wake.generation();
            if session.connected() || when_down == WhenDown::Wait {
                return Ok(true);
            }
            down_since.get_or_insert_with(Instant::now);
            continue;
        }
        session.check()?;
        if deadline.is_past() {
            return Ok(false);
        }
        if session.connected() {
            down_since = None;
        } else if down_since.is_some() {
            return Err(Error::zk(ZkError::ConnectionLoss, what));
        }
    }
}

/// The engine's pause: a wait that nothing but the session's end wakes,
/// until `deadline` (`Ok(())`) or the end of `session` (its error: the end
/// wakes it directly, from the client thread that ends it). The recipes'
/// back-offs and retry pauses (a queue take's lost claim, a recipe node's
/// create retried on connection loss): a `close()` or an expiry during one
/// ends it at once, as it ends every other wait. A disconnection does not
/// end it (the deadline is the pause's length, not a wait for an event).
pub(crate) fn pause(session: &dyn WaitSession, deadline: Deadline, what: &str) -> Result<()> {
    let wake = Arc::new(Wake::default());
    // Only the session's end wakes `wake`, and `wait` then fails with its
    // error; a wake-up without one waits on for the deadline.
    while wait(
        &wake,
        wake.generation(),
        session,
        deadline,
        WhenDown::Wait,
        what,
    )? {}
    Ok(())
}

/// What the one wait watcher ([`WaitWatcher`]) hears of the connection
/// state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateEvents {
    /// Every connection-state change wakes: a disconnect (a recipe's wait
    /// then bounds itself by the session timeout,
    /// [`WhenDown::EndAfterSessionTimeout`]), a reconnect (the waiter re-reads:
    /// a watch set again by SetWatches may have fired during the gap) and the
    /// session's end. The recipes' waits and the threads that keep a node.
    All,
    /// Only the session's end wakes (a lock's wait, [`WhenDown::Wait`], waits
    /// through a disconnection: its watch is set again by SetWatches).
    SessionEnd,
}

/// A non-blocking step a [`WaitWatcher`] runs on a node event, on the event
/// thread, before it wakes the waiter: the lock's listing of an armed round
/// (sent as soon as the watch fires, so the waiter wakes to an answer).
pub(crate) trait NodeEventStep: Send + Sync + 'static {
    /// Called with each node event (never a connection event), on the event
    /// thread: it must not block. `true` when the step takes the wake-up
    /// over (it wakes `wake` itself later, when its asynchronous answer is
    /// in); `false` lets the watcher wake at once.
    fn take_over(&self, event: &WatchedEvent, wake: &Arc<Wake>) -> bool;
}

/// The one per-watch watcher of every wait (the recipes' [`Waiter`], the
/// locks' and the semaphore's waits, the persistent node's thread): wakes its
/// [`Wake`] on a node event and on the connection-state events of its
/// [`StateEvents`], never blocking. One per waiting instance, passed with each
/// watching request, so the client registers it once per path however often
/// the instance waits there. A node event may first run a
/// [`NodeEventStep`] (the lock's prefetch listing).
pub(crate) struct WaitWatcher {
    wake: Arc<Wake>,
    states: StateEvents,
    step: Option<Box<dyn NodeEventStep>>,
}

impl WaitWatcher {
    /// Wakes `wake` on every node event and on the state events of `states`.
    pub(crate) fn new(wake: Arc<Wake>, states: StateEvents) -> WaitWatcher {
        WaitWatcher {
            wake,
            states,
            step: None,
        }
    }

    /// Runs `step` on each node event before waking (see [`NodeEventStep`]).
    pub(crate) fn with_step(mut self, step: impl NodeEventStep) -> WaitWatcher {
        self.step = Some(Box::new(step));
        self
    }
}

impl Watcher for WaitWatcher {
    fn process(&self, event: WatchedEvent) {
        if event.event_type == EventType::None {
            if self.states == StateEvents::All || ends_session(&event) {
                self.wake.wake();
            }
            return;
        }
        if let Some(step) = &self.step {
            if step.take_over(&event, &self.wake) {
                return;
            }
        }
        self.wake.wake();
    }
}

/// The engine's wait for a state that is not bound to one session (a thread
/// or a recipe's state that outlives sessions: the persistent node's thread
/// and [`wait_created`](crate::recipes::persistent_node::PersistentNode::wait_created),
/// the TTL node's touch thread): until `look` finds what it waits for
/// (`Some`), or `deadline` (`None`, without a last look). `look` runs after
/// the generation is read, so a change after the look wakes the wait. Woken
/// only by `wake` (a watch, a reconnect hook, a stop): nothing is looked at
/// periodically. The session's end is no end here: whoever keeps the state
/// wakes `wake` when it matters to it.
pub(crate) fn wait_unbound<T>(
    wake: &Wake,
    deadline: Deadline,
    mut look: impl FnMut() -> Option<T>,
) -> Option<T> {
    loop {
        let seen = wake.generation();
        if let Some(found) = look() {
            return Some(found);
        }
        if !wake.wait(seen, deadline) {
            return None;
        }
    }
}

/// A recipe instance's wake-up: its watcher is passed with every watching
/// request of the instance (the client keeps a watcher once per path, so
/// repeated waits on one node do not pile up registrations). Shared by every
/// thread waiting on the instance: each round waits for its own generation.
pub(crate) struct Waiter {
    wake: Arc<Wake>,
    watcher: Arc<dyn Watcher>,
    hook: Hook<WaitStep>,
}

impl Default for Waiter {
    fn default() -> Self {
        let wake = Arc::new(Wake::default());
        Waiter {
            watcher: Arc::new(WaitWatcher::new(wake.clone(), StateEvents::All)),
            wake,
            hook: Hook::default(),
        }
    }
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter")
            .field("generation", &self.wake.generation())
            .finish()
    }
}

/// A point of a recipe's wait where a test can hold the waiting thread
/// (feature `testing`; see for example
/// [`Barrier::with_wait_hook`](crate::recipes::barrier::Barrier::with_wait_hook)).
#[cfg_attr(not(feature = "testing"), doc(hidden))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitStep {
    /// The round's watch is set (and its generation read before that); the
    /// thread is about to wait for a wake-up. The path given is the one the
    /// wait is about. Holding a thread here while its watch fires and another
    /// thread of the same instance runs a round of its own forces finding 5 of
    /// issue 20 (a shared wake-up flag re-armed by the other thread lost this
    /// thread's wake-up).
    Watching,
    /// A queue take lost its claim (another consumer took the item) and is
    /// about to pause for its back-off (see
    /// [`DistributedQueue`](crate::recipes::queue::DistributedQueue#contended-takes-and-the-floor)).
    /// The path given is the queue's directory. A test ends the session here
    /// to see the back-off end with it.
    BackingOff,
}

#[cfg(feature = "testing")]
impl Waiter {
    /// Calls `hook` at each [`WaitStep`] of this instance's waits, on the
    /// waiting thread.
    pub(crate) fn set_hook(&self, hook: impl Fn(WaitStep, &str) + Send + Sync + 'static) {
        self.hook.set(hook);
    }
}

/// A recipe's `with_wait_hook` (feature `testing`), for a type whose
/// [`Waiter`] is its field `waiter`: one definition for every recipe.
macro_rules! with_wait_hook {
    () => {
        /// Calls `hook` at each [`WaitStep`](crate::recipes::WaitStep) of this
        /// instance's waits, on the waiting thread (feature `testing`: how the
        /// tests force a race between threads sharing the instance).
        #[must_use]
        #[cfg(feature = "testing")]
        pub fn with_wait_hook(
            self,
            hook: impl Fn(crate::engine::wait::WaitStep, &str) + Send + Sync + 'static,
        ) -> Self {
            self.waiter.set_hook(hook);
            self
        }
    };
}
pub(crate) use with_wait_hook;

/// A round of a [`Waiter`]: the generation read before its watch was set.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Round(u64);

impl Waiter {
    /// The watcher to pass with the request that sets this round's watch.
    pub(crate) fn watcher(&self) -> &Arc<dyn Watcher> {
        &self.watcher
    }

    /// The waiter's wake-up counter, for whoever else wakes its waits: a
    /// reconnect hook, a stop, a change of the state waited for.
    pub(crate) fn counter(&self) -> &Arc<Wake> {
        &self.wake
    }

    /// [`wait_unbound`] on this waiter (a wait not bound to one session).
    pub(crate) fn wait_unbound<T>(
        &self,
        deadline: Deadline,
        look: impl FnMut() -> Option<T>,
    ) -> Option<T> {
        wait_unbound(&self.wake, deadline, look)
    }

    /// Starts a round: call before setting its watch, so that no wake-up of
    /// the round is lost (one of another thread's round costs a re-read).
    pub(crate) fn round(&self) -> Round {
        Round(self.wake.generation())
    }

    /// A back-off of this instance's: [`pause`] for `length` from now, never
    /// past `until`, or until the end of `session` (the hook is told
    /// [`WaitStep::BackingOff`] first, before the back-off's time starts).
    pub(crate) fn back_off(
        &self,
        session: &dyn WaitSession,
        length: Duration,
        until: Deadline,
        what: &str,
    ) -> Result<()> {
        hook!(self.hook, WaitStep::BackingOff, what);
        pause(session, Deadline::after(length).min(until), what)
    }

    /// Waits for a wake-up after `round`, until `deadline` (`Ok(false)`) or the
    /// end of `session`; `ConnectionLoss` about `what` when the connection
    /// stays down for a session timeout. See [`wait`].
    pub(crate) fn wait(
        &self,
        session: &dyn WaitSession,
        round: Round,
        deadline: Deadline,
        what: &str,
    ) -> Result<bool> {
        hook!(self.hook, WaitStep::Watching, what);
        wait(
            &self.wake,
            round.0,
            session,
            deadline,
            WhenDown::EndAfterSessionTimeout,
            what,
        )
    }
}

/// Whether `event` ends the session (for watchers that only care about that
/// and node events).
pub(crate) fn ends_session(event: &WatchedEvent) -> bool {
    event.event_type == EventType::None
        && matches!(
            event.keeper_state,
            KeeperState::Expired | KeeperState::Closed | KeeperState::AuthFailed
        )
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

#[cfg(all(test, not(zklock_loom)))]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_wake() {
        let b = Bounds::new(None);
        assert!(b.wait.is_never() && b.calls.is_never());
        let b = Bounds::with_grace(Some(Duration::ZERO), Duration::from_secs(60));
        assert!(b.wait.is_past() && !b.calls.is_past());
        let w = Wake::default();
        let seen = w.generation();
        assert!(!w.wait(seen, Deadline::after(Duration::from_millis(1))));
        w.wake();
        assert!(w.wait(seen, Deadline::never()));
        assert!(!w.wait(w.generation(), Deadline::after(Duration::ZERO)));
    }

    /// Finding 5 of issue 20, forced: thread A reads its round, thread B
    /// starts its own round (the old engine's `arm` reset the shared flag
    /// here), then A's wake-up comes. With a shared boolean B's re-arm, made
    /// after the wake, swallowed it and A slept on; with generations A's wait
    /// returns.
    #[test]
    fn another_threads_round_never_swallows_a_wake_up() {
        let w = Waiter::default();
        let a = w.round();
        w.watcher()
            .process(WatchedEvent::state(KeeperState::SyncConnected));
        let b = w.round(); // B's re-arm, after A's wake-up
        assert!(
            w.wake.wait(a.0, Deadline::after(Duration::ZERO)),
            "A's wake-up was lost"
        );
        assert!(!w.wake.wait(b.0, Deadline::after(Duration::ZERO)));
    }
}

/// The engine's core under every interleaving (loom): a wake-up after a round
/// began always ends that round's wait, whatever another round does; the
/// session's end and a cancel are wake-ups like any other. Then a waiter's use
/// of the engine, with the real [`wait`], [`Waiter`] and the client's end
/// table (`EndWakes`) over a model session and server: a lock-style waiter
/// (round, watch and re-check in one call, wait) and queue-style consumers
/// sharing a `Waiter`, each against a deletion or offer, the session's end,
/// and both racing. Each model was checked to fail (a loom deadlock) with the
/// bug it guards against: a round read after its watch is set, and the
/// session's end looked at neither when registering nor by the engine. Run by `make test`:
/// `RUSTFLAGS="--cfg zklock_loom" cargo test --lib --release loom_`.
#[cfg(all(test, zklock_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::thread;

    /// Two waiters share one wake; a watch event for A, and B starting a round,
    /// race: A always wakes. (Checked to fail, as a deadlock, when a round
    /// resets the counter as the old engine's `arm` reset its flag.)
    #[test]
    fn loom_shared_wake_never_loses_a_wake_up() {
        loom::model(|| {
            let w = Arc::new(Wake::default());
            let a = w.generation();
            let (w1, w2) = (w.clone(), w.clone());
            let event = thread::spawn(move || w1.wake());
            // B starts its own round while A's event comes (the old engine's
            // `arm` reset a shared flag here) and gets no event of its own:
            // A must wake all the same (with the old flag, A slept on until
            // some later event, if any).
            let other = thread::spawn(move || {
                let _b = w2.generation();
            });
            assert!(w.wait(a, Deadline::never()));
            event.join().unwrap();
            other.join().unwrap();
        });
    }

    /// The session's end (a flag set, then a wake, from another thread) and a
    /// cancel: the waiter that looks at both before waiting never sleeps
    /// through either.
    #[test]
    fn loom_end_and_cancel_wake_the_waiter() {
        loom::model(|| {
            let w = Arc::new(Wake::default());
            let ended = Arc::new(AtomicBool::new(false));
            let cancelled = Arc::new(AtomicBool::new(false));
            let (w1, e1) = (w.clone(), ended.clone());
            let end = thread::spawn(move || {
                e1.store(true, Ordering::SeqCst);
                w1.wake();
            });
            let (w2, c2) = (w.clone(), cancelled.clone());
            let cancel = thread::spawn(move || {
                c2.store(true, Ordering::SeqCst);
                w2.wake();
            });
            // The waiter's loop: a round, look, wait.
            loop {
                let seen = w.generation();
                if ended.load(Ordering::SeqCst) && cancelled.load(Ordering::SeqCst) {
                    break;
                }
                assert!(w.wait(seen, Deadline::never()));
            }
            end.join().unwrap();
            cancel.join().unwrap();
        });
    }

    /// Two waiters on one wake, each with its own event: both wake (a
    /// wake-up is never consumed by one waiter).
    #[test]
    fn loom_two_waiters_both_wake() {
        loom::model(|| {
            let w = Arc::new(Wake::default());
            let seen = w.generation();
            let w1 = w.clone();
            let other = thread::spawn(move || assert!(w1.wait(seen, Deadline::never())));
            w.wake();
            assert!(w.wait(seen, Deadline::never()));
            other.join().unwrap();
        });
    }

    // ---- A waiter's use of the engine: the real `wait`, `Waiter` and end
    // table, with a model session and a model server (an atomic "check and
    // set the watch", as ZooKeeper's exists/getChildren with a watch). ----

    use crate::engine::wake::EndWakes;
    use crate::error::ZkError;
    use loom::sync::Mutex;

    /// The model's session: an ended flag (set before the end table is woken,
    /// as the client sets its state before `wake_end_waits`) and the client's
    /// real end table.
    #[derive(Default)]
    struct SessionState {
        ended: AtomicBool,
        ends: EndWakes,
    }

    #[derive(Clone, Default)]
    struct ModelSession(Arc<SessionState>);

    impl ModelSession {
        /// The session's end, as the client's connection thread ends it.
        fn end(&self) {
            self.0.ended.store(true, Ordering::SeqCst);
            self.0.ends.wake_all();
        }
    }

    struct Forget(Arc<SessionState>, u64);

    impl Drop for Forget {
        fn drop(&mut self) {
            self.0.ends.forget(self.1);
        }
    }

    impl WaitSession for ModelSession {
        fn check(&self) -> Result<()> {
            if self.0.ended.load(Ordering::SeqCst) {
                return Err(Error::zk(ZkError::SessionExpired, "the model"));
            }
            Ok(())
        }

        fn connected(&self) -> bool {
            true
        }

        fn session_timeout(&self) -> Duration {
            Duration::from_secs(30)
        }

        fn wake_at_end(&self, wake: &Arc<Wake>) -> EndRegistration {
            let st = self.0.clone();
            let id = self
                .0
                .ends
                .register(wake, || st.ended.load(Ordering::SeqCst));
            EndRegistration::new(Forget(self.0.clone(), id))
        }
    }

    /// The model server's znodes: the lock waiter's predecessor and the
    /// queue's items, with one watch each (the client keeps one watcher per
    /// path and watcher object).
    #[derive(Default)]
    struct Znodes {
        predecessor: bool,
        predecessor_watch: Option<Arc<dyn Watcher>>,
        items: Vec<u32>,
        children_watch: Option<Arc<dyn Watcher>>,
    }

    #[derive(Clone, Default)]
    struct Server(Arc<Mutex<Znodes>>);

    fn node_event(kind: EventType) -> WatchedEvent {
        WatchedEvent {
            event_type: kind,
            keeper_state: KeeperState::SyncConnected,
            path: Some("/model".into()),
            zxid: None,
        }
    }

    impl Server {
        /// `exists` with a watch: set only when the node exists (as a lock
        /// waiter's watch on its predecessor).
        fn exists_watch(&self, watcher: &Arc<dyn Watcher>) -> bool {
            let mut z = self.0.lock().unwrap();
            if z.predecessor {
                z.predecessor_watch = Some(watcher.clone());
            }
            z.predecessor
        }

        /// Deletes the predecessor; its watch fires afterwards, on the
        /// event thread (here: the deleting thread, outside the server).
        fn delete_predecessor(&self) {
            let fired = {
                let mut z = self.0.lock().unwrap();
                z.predecessor = false;
                z.predecessor_watch.take()
            };
            if let Some(w) = fired {
                w.process(node_event(EventType::NodeDeleted));
            }
        }

        /// `getChildren` with a watch.
        fn children_watch(&self, watcher: &Arc<dyn Watcher>) -> Vec<u32> {
            let mut z = self.0.lock().unwrap();
            z.children_watch = Some(watcher.clone());
            z.items.clone()
        }

        /// Creates an item; the children watch fires afterwards.
        fn offer(&self, item: u32) {
            let fired = {
                let mut z = self.0.lock().unwrap();
                z.items.push(item);
                z.children_watch.take()
            };
            if let Some(w) = fired {
                w.process(node_event(EventType::NodeChildrenChanged));
            }
        }

        /// Deletes `item`: `false` when another consumer took it first.
        fn take(&self, item: u32) -> bool {
            let mut z = self.0.lock().unwrap();
            match z.items.iter().position(|i| *i == item) {
                Some(at) => {
                    z.items.remove(at);
                    true
                }
                None => false,
            }
        }
    }

    /// A lock-style waiter (the lock base's round): read the generation,
    /// set the watch on the predecessor and re-check it in one call, wait
    /// with the real engine; `Ok` once the predecessor is gone.
    fn lock_style_waiter(server: &Server, session: &ModelSession) -> Result<()> {
        let wake = Arc::new(Wake::default());
        let w = wake.clone();
        let watcher: Arc<dyn Watcher> = Arc::new(move |_e: WatchedEvent| w.wake());
        loop {
            let seen = wake.generation();
            if !server.exists_watch(&watcher) {
                return Ok(());
            }
            let woken = wait(
                &wake,
                seen,
                session,
                Deadline::never(),
                WhenDown::Wait,
                "model",
            )?;
            assert!(woken, "no deadline: only a wake-up or the session's end");
        }
    }

    /// A queue-style consumer on a `Waiter` shared with other consumers (the
    /// queue's take): a round, list with a watch, take the first item or
    /// wait with the real engine.
    fn queue_style_consumer(
        waiter: &Waiter,
        server: &Server,
        session: &ModelSession,
    ) -> Result<u32> {
        loop {
            let round = waiter.round();
            let items = server.children_watch(waiter.watcher());
            match items.first() {
                Some(&item) => {
                    if server.take(item) {
                        return Ok(item);
                    }
                }
                None => {
                    waiter.wait(session, round, Deadline::never(), "model")?;
                }
            }
        }
    }

    fn bounded() -> loom::model::Builder {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b
    }

    /// Arm, re-check, wake: the predecessor's deletion, at any point of the
    /// waiter's round, ends the wait (a deadlock here is a lost wake-up).
    /// Checked to fail when the round reads its generation after setting the
    /// watch.
    #[test]
    fn loom_lock_style_waiter_sees_the_deletion() {
        bounded().check(|| {
            let server = Server::default();
            server.0.lock().unwrap().predecessor = true;
            let session = ModelSession::default();
            let s2 = server.clone();
            let deleter = thread::spawn(move || s2.delete_predecessor());
            lock_style_waiter(&server, &session).unwrap();
            deleter.join().unwrap();
        });
    }

    /// The session's end wakes a lock-style waiter whose watch never fires
    /// (only the end table, not the watcher, tells it), at any point of its
    /// round: it ends with `SessionExpired`, never sleeps on.
    #[test]
    fn loom_lock_style_waiter_ends_with_the_session() {
        bounded().check(|| {
            let server = Server::default();
            server.0.lock().unwrap().predecessor = true;
            let session = ModelSession::default();
            let s2 = session.clone();
            let ender = thread::spawn(move || s2.end());
            let e = lock_style_waiter(&server, &session).unwrap_err();
            assert!(e.is(ZkError::SessionExpired), "{e}");
            ender.join().unwrap();
        });
    }

    /// A deletion and the session's end race: the waiter ends with one of
    /// them, whichever it sees, and never hangs.
    #[test]
    fn loom_lock_style_waiter_deletion_races_the_end() {
        bounded().check(|| {
            let server = Server::default();
            server.0.lock().unwrap().predecessor = true;
            let session = ModelSession::default();
            let (s2, e2) = (server.clone(), session.clone());
            let deleter = thread::spawn(move || s2.delete_predecessor());
            let ender = thread::spawn(move || e2.end());
            match lock_style_waiter(&server, &session) {
                Ok(()) => {}
                Err(e) => assert!(e.is(ZkError::SessionExpired), "{e}"),
            }
            deleter.join().unwrap();
            ender.join().unwrap();
        });
    }

    /// Two consumers share one `Waiter`; two items are offered one after the
    /// other, each create firing the one children watch: both consumers get
    /// an item, each exactly once (one watch event wakes every round begun
    /// before it; a round begun after it lists the item).
    #[test]
    fn loom_queue_style_consumers_share_a_waiter() {
        bounded().check(|| {
            let server = Server::default();
            let session = ModelSession::default();
            let waiter = Arc::new(Waiter::default());
            let (s2, w2, ses2) = (server.clone(), waiter.clone(), session.clone());
            let other = thread::spawn(move || queue_style_consumer(&w2, &s2, &ses2).unwrap());
            let s3 = server.clone();
            let producer = thread::spawn(move || {
                s3.offer(1);
                s3.offer(2);
            });
            let mine = queue_style_consumer(&waiter, &server, &session).unwrap();
            let theirs = other.join().unwrap();
            producer.join().unwrap();
            let mut got = [mine, theirs];
            got.sort();
            assert_eq!(got, [1, 2]);
        });
    }

    /// One item, two consumers sharing a `Waiter`, and the session's end: one
    /// consumer may take the item, every other ends with `SessionExpired`;
    /// none hangs, none takes twice.
    #[test]
    fn loom_queue_style_consumers_end_with_the_session() {
        bounded().check(|| {
            let server = Server::default();
            let session = ModelSession::default();
            let waiter = Arc::new(Waiter::default());
            let (s2, w2, ses2) = (server.clone(), waiter.clone(), session.clone());
            let other = thread::spawn(move || queue_style_consumer(&w2, &s2, &ses2));
            let (s3, ses3) = (server.clone(), session.clone());
            let producer = thread::spawn(move || {
                s3.offer(1);
                ses3.end();
            });
            let mine = queue_style_consumer(&waiter, &server, &session);
            let theirs = other.join().unwrap();
            producer.join().unwrap();
            let taken = [&mine, &theirs].iter().filter(|r| r.is_ok()).count();
            assert!(taken <= 1);
            for r in [&mine, &theirs] {
                if let Err(e) = r {
                    assert!(e.is(ZkError::SessionExpired), "{e}");
                }
            }
        });
    }
}
