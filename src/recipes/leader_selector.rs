//! Apache Curator's `LeaderSelector` and kazoo's `Election`: leadership as a
//! lock in their layout, held while the leader's function runs.

use std::sync::Arc;
use std::time::Duration;

use log::warn;
use parking_lot::Mutex;

use super::candidate::{LeadershipEvent, LeadershipSignal};
use super::layout::{sorted_by_sequence_after, CURATOR_MUTEX_MARKER, KAZOO_LOCK_MARKER};
use super::node::read_participants;
use crate::error::{Error, Result};
use crate::lock::{Dialect, InterProcessLock, LockEvent, ZkInterProcessMutex};
use crate::watcher::ZooKeeperWatcher;

pub use super::node::Participant;

/// The leadership a [`LeaderSelector`]'s leader function holds: zklock's lost
/// signal, where Curator's `LeaderSelectorListener.stateChanged` throws
/// `CancelLeadershipException` to interrupt `takeLeadership` on `SUSPENDED`
/// or `LOST`. The function should stop acting as leader as soon as
/// [`has_leadership`](Self::has_leadership) turns false, and return.
#[derive(Debug)]
pub struct Leadership {
    signal: Arc<LeadershipSignal>,
    fencing_token: i64,
}

/// The lock's lost signal in the leadership recipes' vocabulary.
fn leadership_event(event: LockEvent) -> LeadershipEvent {
    match event {
        LockEvent::InDoubt => LeadershipEvent::InDoubt,
        LockEvent::Restored => LeadershipEvent::Restored,
        LockEvent::Lost => LeadershipEvent::Lost,
    }
}

impl Leadership {
    /// Whether the leadership holds now: not lost, connection not in doubt
    /// (the leadership recipes' one "do I lead now").
    pub fn has_leadership(&self) -> bool {
        self.signal.leads()
    }

    /// The former name of [`has_leadership`](Self::has_leadership).
    #[deprecated(note = "use has_leadership, the name every leadership recipe uses")]
    pub fn is_leader(&self) -> bool {
        self.has_leadership()
    }

    /// Whether the connection dropped: the leadership holds only while the
    /// session lives (it may come back: `has_leadership` turns true again).
    pub fn is_in_doubt(&self) -> bool {
        self.signal.is_in_doubt()
    }

    /// Whether the leadership is lost for good (session ended, node deleted).
    pub fn is_lost(&self) -> bool {
        self.signal.is_lost()
    }

    /// Waits until the leadership stops holding (in doubt or lost): `true`
    /// then, `false` when `timeout` passed first. For a leader function that
    /// has nothing else to wait for (Curator's leader sleeping until
    /// interrupted).
    pub fn wait_until_not_leader(&self, timeout: Duration) -> bool {
        self.signal.wait_until_not_leader(timeout)
    }

    /// The fencing token of the lock node behind this leadership (its
    /// creation zxid): larger for every later leader.
    pub fn fencing_token(&self) -> i64 {
        self.fencing_token
    }
}

/// The selector's attempt now and its count of cancels, under one lock: a
/// `run` notes the count when it starts, and an attempt it makes after a
/// `cancel` (between `run_requeued`'s turns, or before the first attempt
/// is recorded) ends with `Cancelled` instead of queuing.
#[derive(Debug, Default)]
struct Slot {
    attempt: Option<Attempt>,
    cancels: u64,
}

/// One attempt: its lock and the signal its leader function reads.
#[derive(Debug)]
struct Attempt {
    mutex: Arc<ZkInterProcessMutex>,
    signal: Arc<LeadershipSignal>,
}

/// Apache Curator's `LeaderSelector` and kazoo's `Election`: participants
/// queue on a lock in their layout; the holder runs its leader function and
/// leadership passes on when it returns. Curator's selectors or kazoo's
/// elections on the same path take turns with zklock's.
///
/// # Layout
/// The lock is a [`ZkInterProcessMutex`] in the dialect: Curator's
/// `InterProcessMutex` (`<path>/_c_<uuid>-lock-<seq>`, the id as data, the
/// local address when the id is empty, container parents) or kazoo's `Lock`
/// (`<path>/<uuid hex>__lock__<seq>`, the identifier as data, persistent
/// parents). The lock's own guarantees hold (one waiter woken per hand-off,
/// no node left on any exit, a directory holding another dialect's nodes
/// refused with [`Error::MixedDialect`]).
///
/// # zklock differs here
/// - The leader function runs on the caller's thread
///   ([`run`](Self::run), as kazoo's `Election.run`), not on an executor as
///   Curator's `takeLeadership`; Curator's `autoRequeue` is
///   [`run_requeued`](Self::run_requeued).
/// - Rust threads are not interrupted: where Curator interrupts
///   `takeLeadership` on `SUSPENDED`/`LOST`, the function gets a
///   [`Leadership`] whose lost signal (in doubt at once when the connection
///   drops, lost when the session ends: the leadership recipes' one
///   [`LeadershipEvent`] vocabulary) it must heed.
/// - Every attempt belongs to its session: a session that ends (also by
///   renewal) ends the attempt with `SessionExpired`; the next `run` is a new
///   attempt in the current session.
/// - The participants are listed by the sequence after the lock name, parsed
///   (Curator and kazoo compare the 10-digit texts: the same order until the
///   sequence wraps).
///
/// # Read-only mode
/// With [read-only mode](crate::ZooKeeperWatcherBuilder::with_read_only) on,
/// a read-only server (`ConnectedReadOnly`) proves nothing: it cannot write,
/// its data may lag the quorum's, and it cannot tell whether the session
/// lives. A leadership had stays **in doubt** (`InDoubt`, told at the
/// disconnect; restored only after a read-write server confirmed the node)
/// and is lost only when the session ends or the node goes; no one is made
/// leader on a read-only server's listing (the round resumes at the next
/// read-write server); joining while read-only fails with `NotReadOnly`.
#[derive(Debug)]
pub struct LeaderSelector {
    zkw: ZooKeeperWatcher,
    path: String,
    id: String,
    dialect: Dialect,
    current: Mutex<Slot>,
}

impl LeaderSelector {
    /// A participant with id `id` of the selector on `path`, in `dialect`:
    /// [`Dialect::Curator`] (Curator's `LeaderSelector` with `setId(id)`) or
    /// [`Dialect::Kazoo`] (kazoo's `Election(path, identifier=id)`).
    ///
    /// # Errors
    /// `BadArguments` for an invalid `path`, or [`Dialect::HBase`] (whose lock
    /// node carries HBase's metadata, not an id: use
    /// [`LeaderLatch`](super::leader_latch::LeaderLatch) or
    /// [`LeaderElectionSupport`](super::election::LeaderElectionSupport)).
    pub fn new(zkw: &ZooKeeperWatcher, path: &str, dialect: Dialect, id: &str) -> Result<Self> {
        crate::path::validate(path)?;
        if dialect == Dialect::HBase {
            return Err(Error::BadArguments(format!(
                "{path}: a leader selector speaks Curator's or kazoo's dialect"
            )));
        }
        Ok(LeaderSelector {
            zkw: zkw.clone(),
            path: path.to_string(),
            id: id.to_string(),
            dialect,
            current: Mutex::new(Slot::default()),
        })
    }

    /// Curator's `getId()`, kazoo's identifier.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The selector's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The count of cancels now: a `run` started now ends with `Cancelled`
    /// once it changes.
    fn cancels(&self) -> u64 {
        self.current.lock().cancels
    }

    /// A new attempt (a new lock instance: a cancelled one stays cancelled),
    /// or `Cancelled` when [`cancel`](Self::cancel) came after the caller's
    /// `run` noted `cancels`: decided under the lock `cancel` takes, before
    /// any node exists.
    fn attempt(&self, cancels: u64) -> Result<(Arc<ZkInterProcessMutex>, Arc<LeadershipSignal>)> {
        let signal = Arc::new(LeadershipSignal::default());
        let told = signal.clone();
        let mutex = Arc::new(
            ZkInterProcessMutex::new(&self.zkw, &self.path, self.dialect, self.id.as_bytes())?
                .with_lock_listener(move |_: &str, e: LockEvent| told.tell(leadership_event(e))),
        );
        let mut current = self.current.lock();
        if current.cancels != cancels {
            return Err(Error::Cancelled {
                lock: self.path.clone(),
            });
        }
        if current.attempt.is_some() {
            return Err(Error::BadArguments(format!(
                "{}: this participant is already queued or leading",
                self.path
            )));
        }
        current.attempt = Some(Attempt {
            mutex: mutex.clone(),
            signal: signal.clone(),
        });
        Ok((mutex, signal))
    }

    /// kazoo's `Election.run(func)`, Curator's `takeLeadership`: queues,
    /// waits until this participant leads, runs `leader` with the
    /// [`Leadership`] and gives leadership up when it returns (its result is
    /// returned). Waits without bound: [`cancel`](Self::cancel) from another
    /// thread, or the session's end, ends the wait.
    ///
    /// # Errors
    /// `Cancelled` when [`cancel`](Self::cancel) came first (kazoo's `run`
    /// returns then); `SessionExpired` / `Closed` when the session ended;
    /// `MixedDialect`; `BadArguments` when this participant is queued already
    /// (on another thread); ZooKeeper errors after retries.
    pub fn run<R>(&self, leader: impl FnOnce(&Leadership) -> R) -> Result<R> {
        self.try_run(self.cancels(), None, leader)
            .map(|r| r.expect("an unbounded wait only ends leading or with an error"))
    }

    /// [`run`](Self::run) waiting at most `timeout` to lead: `Ok(None)`
    /// (and the queue left) when it passed first.
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub fn try_run_for<R>(
        &self,
        timeout: Duration,
        leader: impl FnOnce(&Leadership) -> R,
    ) -> Result<Option<R>> {
        self.try_run(self.cancels(), Some(timeout), leader)
    }

    /// One attempt of a `run` that noted `cancels` when it started.
    fn try_run<R>(
        &self,
        cancels: u64,
        timeout: Option<Duration>,
        leader: impl FnOnce(&Leadership) -> R,
    ) -> Result<Option<R>> {
        let (mutex, signal) = self.attempt(cancels)?;
        let outcome = self.lead(&mutex, signal, timeout, leader);
        self.current.lock().attempt = None;
        outcome
    }

    fn lead<R>(
        &self,
        mutex: &ZkInterProcessMutex,
        signal: Arc<LeadershipSignal>,
        timeout: Option<Duration>,
        leader: impl FnOnce(&Leadership) -> R,
    ) -> Result<Option<R>> {
        let acquired = match timeout {
            Some(t) => mutex.try_acquire(t)?,
            None => mutex.acquire().map(|()| true)?,
        };
        if !acquired {
            return Ok(None);
        }
        let leadership = Leadership {
            signal,
            fencing_token: mutex.acquired_lock().map_or(0, |a| a.fencing_token()),
        };
        crate::metrics::metric!(leader_change("leader_selector", &self.path, true, false));
        let result = leader(&leadership);
        crate::metrics::metric!(leader_change("leader_selector", &self.path, false, true));
        match mutex.release() {
            Ok(()) => {}
            // Lost meanwhile: nothing to give up (the function was told).
            Err(Error::LockLost { .. }) => {}
            Err(e) => warn!("{}: giving leadership up: {e}", self.path),
        }
        Ok(Some(result))
    }

    /// Curator's `autoRequeue`: runs `leader` each time this participant
    /// leads, queueing again after each turn, until it returns `false` (then
    /// `Ok(())`) or an attempt fails. A [`cancel`](Self::cancel) ends it for
    /// good (Curator's `close()`: no requeue after it): while queued at once,
    /// while `leader` runs once that turn returns; either way with
    /// `Cancelled`, no node left.
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub fn run_requeued(&self, mut leader: impl FnMut(&Leadership) -> bool) -> Result<()> {
        let cancels = self.cancels();
        while self
            .try_run(cancels, None, &mut leader)?
            .expect("an unbounded wait only ends leading or with an error")
        {}
        Ok(())
    }

    /// kazoo's `Election.cancel()`, Curator's `close()` of a queued selector:
    /// ends this participant's wait in [`run`](Self::run) (with `Cancelled`,
    /// its node removed), also a `run` started but not yet queued, and stops
    /// [`run_requeued`](Self::run_requeued) from queuing again. A leader
    /// function already running is not interrupted (as kazoo's); a `run`
    /// called after `cancel` queues again.
    pub fn cancel(&self) {
        let mut current = self.current.lock();
        current.cancels += 1;
        if let Some(a) = current.attempt.as_ref() {
            a.mutex.cancel();
        }
    }

    /// Curator's `hasLeadership()`: whether this participant's leader
    /// function runs and its leadership holds (not in doubt, not lost).
    pub fn has_leadership(&self) -> bool {
        self.current
            .lock()
            .attempt
            .as_ref()
            .is_some_and(|a| a.mutex.is_held() && a.signal.leads())
    }

    /// Curator's `getParticipants()`, kazoo's `contenders()` (their ids):
    /// every participant in queue order, the leader first, read from the
    /// lock's nodes (`1 + N` requests).
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        let marker = match self.dialect {
            Dialect::Kazoo => KAZOO_LOCK_MARKER,
            _ => CURATOR_MUTEX_MARKER,
        };
        read_participants(self.zkw.recoverable_zookeeper(), &self.path, |c| {
            sorted_by_sequence_after(c, marker)
        })
    }

    /// Curator's `getLeader()`: the first participant, `None` without
    /// participants.
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants()?.into_iter().next())
    }
}
