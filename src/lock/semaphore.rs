//! A counting semaphore: at most N holders of leases on one path, herd-free,
//! with the locks' guarantees (Curator's `InterProcessSemaphoreV2` algorithm).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use log::{debug, info};
use parking_lot::Mutex;

use super::dialect::{semaphore_foreign, Dialect, Layout, Role, KAZOO_SEMAPHORE_LOCK};
#[cfg(feature = "metrics")]
use super::step::outcome;
use super::step::{check_cancelled, lost, LockWait};
use super::watch::{wait_watcher, LockShared, NodeWatch};
use super::LockStep;
use super::{AcquiredLock, InterProcessLock, LockCanceller, LockListener, ZkInterProcessWriteLock};
use crate::client::CreatedAndListed;
use crate::engine::call::CallSession;
use crate::engine::hook::{hook, Hook};
use crate::engine::owned::{
    abandon, create_tagged, remove_and_wait, remove_in_background, with_parents, Attempt, Guard,
    OwnerMark, Parents, Removal,
};
use crate::engine::wait::{Bounds, DEFAULT_CALL_GRACE};
use crate::error::{Error, Result, ZkError};
use crate::metrics::{metric, Timer};
use crate::path;
use crate::recoverable::{tagged_prefix, RecoverableZooKeeper};
use crate::sequence::{number_after_last, tagged_sequence};
use crate::shared_count::SharedCount;
use crate::types::{CreateMode, Op, OpResult, Stat, Watcher};
use crate::util::random_uuid;
use crate::watcher::ZooKeeperWatcher;

pub use super::dialect::{LEASE_PREFIX, SEMAPHORE_LEASES, SEMAPHORE_LOCKS};

/// A step of a semaphore attempt, told to a test hook (see
/// [`ZkSemaphore::with_step_hook`]) with the lease node's path (empty before
/// it exists; the mutex's node for [`SemaphoreStep::Mutex`]).
#[cfg_attr(not(feature = "testing"), doc(hidden))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SemaphoreStep {
    /// A step of the internal mutex's attempt.
    Mutex(LockStep),
    /// kazoo's layout: the listing of `<p>` showed room; the lease node is
    /// created next.
    Room,
    /// The lease node was created (its first listing came with it).
    Created,
    /// Over the limit: the leases' children are watched; the wait starts.
    Waiting,
    /// The wait ended (woken, or out of time).
    Woken,
    /// The lease is held; `acquire` returns next.
    Granted,
}

/// A counting semaphore (Curator's `InterProcessSemaphoreV2`): at most
/// `max_leases` [`SemaphoreLease`]s are held at once, across processes.
///
/// # Layout in ZooKeeper (zklock's)
/// The semaphore's znode `<p>` holds the limit as text (as kazoo's does; see
/// [`in_dialect`](Self::in_dialect)). Under it:
/// - `<p>/locks`: an internal mutex, zklock's own write lock
///   ([`ZkInterProcessWriteLock`]): waiters queue there as
///   `write-<tag>-<seq>`, each watching its predecessor only.
/// - `<p>/leases`: one ephemeral sequential node `lease-<tag>-<seq>` per
///   lease (holders, and the one waiter holding the mutex), carrying the
///   caller's metadata; `<tag>` is unique to the attempt, so a create whose
///   reply was lost is found and never made twice.
///
/// Curator's `InterProcessSemaphoreV2` uses the same two children with its
/// own names: `<p>/locks/_c_<uuid>-lock-<seq>` (its `InterProcessMutex`) and
/// `<p>/leases/_c_<uuid>-lease-<seq>`; kazoo's `Semaphore` is a different
/// algorithm (a lock at `<p>-__lock__`, non-sequential lease nodes directly
/// under `<p>`).
///
/// # One layout per path
/// The layouts do not count each other's leases: kazoo counts every child of
/// `<p>` (so zklock's and Curator's `locks` and `leases` too), zklock and
/// Curator count `<p>/leases` only (not kazoo's leases). Before it creates
/// anything, an attempt lists `<p>` and refuses with
/// [`Error::MixedDialect`] a path that holds another layout's semaphore:
/// kazoo's leases (or its guard lock `<p>-__lock__`, where this attempt
/// would make its directories) for zklock's and Curator's layouts, `locks`
/// and `leases` for kazoo's; its listings of `<p>/locks` and `<p>/leases`
/// refuse zklock's and Curator's nodes in one directory (its own node
/// removed). A refused attempt leaves `<p>` as it found it. A native Curator
/// or kazoo client does not check: one that joins a path where zklock of
/// another layout already holds is not stopped (see [`Dialect`]).
///
/// The look at `<p>` is taken before the attempt's own nodes exist (so that a
/// refusal creates nothing). Two zklock attempts of different layouts that
/// start on one path at once are covered as the locks' refusal covers them:
/// an attempt that makes its layout's directories (the first on a path), and
/// every attempt in kazoo's layout, list `<p>` again once their lease node
/// exists, so of two such attempts at most one goes on; a refused one
/// removes its node, and the directories it leaves empty. A native kazoo
/// client does not look again: one whose listing came before this attempt's
/// directories and whose lease came after this attempt's second look holds
/// beside it.
///
/// # The algorithm (Curator's)
/// An attempt takes the mutex, creates its lease node and lists the leases:
/// while more than N exist, it alone (the mutex holder) watches the leases'
/// children and waits; once within N it holds its lease and lets the mutex
/// go. A released lease wakes one waiter (the mutex holder), whose release
/// of the mutex wakes the next one: no herd, whatever the number of waiters.
/// The count is taken with the attempt's own lease in it, so the limit holds
/// even if the mutex were lost (a mutex holder whose node was reaped): two
/// attempts counting at once each see the other's lease.
///
/// Deliberate differences from Curator: the first listing is sent together
/// with the lease's create and sets no watch (an uncontended acquire leaves
/// no watch behind, so a release notifies nobody: Curator's leaves one watch
/// per acquirer); the mutex is released in the background once the lease is
/// held (the acquire does not wait for that round trip).
///
/// One instance may be shared between threads (`Arc`): each `acquire` is its
/// own attempt and returns its own lease (a lease is per call, as Curator's
/// `InterProcessSemaphoreV2`'s): two threads acquiring at once make two lease
/// nodes, one after the other (the second queues on the internal mutex), and
/// neither touches the other's. [`cancel`](Self::cancel) and the session's
/// [`close`](ZooKeeperWatcher::close) end every attempt in progress with
/// `Cancelled` / `Closed` and remove its nodes, also one whose lease node is
/// made but not yet returned: the attempt looks once more after its last
/// network call, just before it returns the lease. Only a withdrawal after
/// that look finds the lease held. A semaphore has no `release` of its own:
/// a lease is released through its [`SemaphoreLease`].
///
/// # Guarantees (the locks')
/// - Herd-free: a released lease wakes one waiter; idle waiters cost no
///   wake-up (no periodic look at the session).
/// - Every exit of `acquire`/`try_acquire` that does not end holding a lease
///   (timeout, error, cancel, session loss) removes the attempt's nodes.
/// - Bound to its session: an attempt whose session ends (expiry, also when
///   session renewal opened a new one) ends with `SessionExpired`; a lease
///   granted in one session is lost with it.
/// - The lost signal ([`with_lock_listener`](Self::with_lock_listener)) and a
///   fencing token per lease ([`SemaphoreLease::fencing_token`]).
///
/// # Costs
/// An uncontended acquire + release: the listing of `<p>` (one round trip;
/// the first attempt of an instance also reads the stored limit), the
/// mutex's create and listing (one round trip), the lease's create and
/// listing (one round trip), the mutex's delete (in the background) and the
/// lease's delete: 7 requests, 3 round trips for the acquire, no watch left.
/// The first attempt on a new path lists `<p>` once more after its lease's
/// create; in kazoo's layout every attempt does.
///
/// ```no_run
/// use zklock::lock::ZkSemaphore;
/// # let zkw = zklock::ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// let sem = ZkSemaphore::new(&zkw, "/semaphores/db-connections", 4, b"worker-1")?;
/// let lease = sem.acquire()?; // released when dropped
/// println!("fencing token {}", lease.fencing_token());
/// lease.release()?;
/// # Ok::<(), zklock::Error>(())
/// ```
///
/// # Read-only mode
/// As the locks' (see [`InterProcessLock`](crate::lock::InterProcessLock)):
/// a held lease stays in doubt while only a read-only server serves the
/// session (it can prove neither the lease node nor the session), `Lost`
/// only when the session ends; a lease is granted only on a read-write
/// server's listing, and an acquire connected read-only fails with
/// `NotReadOnly`.
#[doc(alias = "InterProcessSemaphoreV2")]
pub struct ZkSemaphore {
    zkw: ZooKeeperWatcher,
    path: String,
    locks: String,
    leases: String,
    dialect: Dialect,
    /// `<p>` as last seen with the stored limit checked: its creation zxid
    /// and data version (zklock's and kazoo's layouts).
    limit_checked: Mutex<Option<(i64, i32)>>,
    max: Max,
    /// A lease node's data (the dialect's: the local address for Curator's
    /// when none is given).
    lease_data: Vec<u8>,
    /// The internal mutex's node data (before its layout's transformation).
    mutex_data: Vec<u8>,
    listener: Option<Arc<dyn LockListener>>,
    /// Cancel flag and the wake-up of every wait of the instance.
    shared: Arc<LockShared>,
    /// Wakes this instance's waits on the leases' children.
    waiter: Arc<dyn Watcher>,
    call_grace: Duration,
    /// The internal mutexes of the attempts in progress (a cancel cancels them).
    mutexes: Mutex<HashMap<u64, LockCanceller>>,
    next_attempt: AtomicU64,
    step_hook: Hook<SemaphoreStep>,
}

impl std::fmt::Debug for ZkSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkSemaphore")
            .field("path", &self.path)
            .field("dialect", &self.dialect)
            .field("max", &self.max)
            .finish()
    }
}

/// Where the most leases held at once comes from.
#[derive(Debug)]
enum Max {
    Fixed(u32),
    /// Curator's `SharedCountReader` form: read at each listing, watched
    /// while waiting (a change wakes the waiter).
    Shared(SharedCount),
}

/// Unregisters an attempt's mutex from the instance's cancel list.
struct Registered<'a> {
    sem: &'a ZkSemaphore,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.sem.mutexes.lock().remove(&self.id);
    }
}

impl ZkSemaphore {
    /// A semaphore of at most `max_leases` holders on the znode `path`
    /// (created with its parents when needed); each lease node carries
    /// `metadata`.
    ///
    /// # Errors
    /// `BadArguments` for an invalid `path` or a `max_leases` of 0.
    pub fn new(
        zkw: &ZooKeeperWatcher,
        path: &str,
        max_leases: u32,
        metadata: &[u8],
    ) -> Result<ZkSemaphore> {
        ZkSemaphore::in_dialect(zkw, path, Dialect::HBase, max_leases, metadata)
    }

    /// A semaphore of at most `max_leases` holders on `path` in `dialect`,
    /// taken in turn with the native participants of that layout:
    /// - [`Dialect::HBase`]: zklock's own layout ([`new`](Self::new)).
    /// - [`Dialect::Curator`]: Curator's `InterProcessSemaphoreV2(client,
    ///   path, max_leases)`: its mutex `<p>/locks/_c_<uuid>-lock-<seq>`
    ///   (Curator's default data, the local address), its leases
    ///   `<p>/leases/_c_<uuid>-lease-<seq>` carrying `data` (the local
    ///   address when empty), parents created as containers. The same
    ///   algorithm as zklock's. Curator's layout does not store the limit
    ///   (`InterProcessSemaphoreV2` keeps it in each participant, or in a
    ///   [`SharedCount`] of its own): participants whose limits differ are
    ///   not detected, and each grants by its own (Curator's own do the
    ///   same). Give every participant the same limit, or a shared count
    ///   ([`with_shared_count`](Self::with_shared_count)).
    /// - [`Dialect::Kazoo`]: kazoo's `Semaphore(path, identifier=data,
    ///   max_leases)`: `max_leases` stored as text in `<p>`'s data (a
    ///   different number stored there is refused, as kazoo does), a kazoo
    ///   `Lock` at `<p>-__lock__` (carrying `data`), and non-sequential
    ///   lease nodes `<p>/<uuid hex>` carrying `data`; kazoo counts every
    ///   child of `<p>` as a lease. kazoo's algorithm:
    ///   the mutex holder lists `<p>` with a watch and creates its lease only
    ///   when fewer than `max_leases` exist, else waits for a change.
    ///
    /// In every dialect zklock's guarantees hold (see the type's docs); the
    /// lease's sequence is 0 in kazoo's layout (its nodes have none).
    ///
    /// zklock's own layout ([`Dialect::HBase`]) stores the limit as kazoo's
    /// does, in `<p>`'s data as text: the attempt that finds `<p>` missing
    /// makes it with the limit, one that finds it bare (no data, no children)
    /// writes it there, and an attempt whose limit differs from a stored one
    /// is refused (`BadArguments`, nothing created). A `<p>` made without
    /// one (by hand, by an older zklock) is used as it is: data that is not
    /// a number is ignored, as kazoo ignores it.
    ///
    /// A path that holds another layout's semaphore is refused (see "One
    /// layout per path" in the type's docs).
    ///
    /// # Errors
    /// `BadArguments` for an invalid `path` or a `max_leases` of 0.
    pub fn in_dialect(
        zkw: &ZooKeeperWatcher,
        path: &str,
        dialect: Dialect,
        max_leases: u32,
        data: &[u8],
    ) -> Result<ZkSemaphore> {
        if max_leases == 0 {
            return Err(Error::BadArguments(format!(
                "semaphore {path}: max_leases must be at least 1"
            )));
        }
        ZkSemaphore::with_max(zkw, path, dialect, Max::Fixed(max_leases), data)
    }

    /// A semaphore whose most leases is the value of `count` (Curator's
    /// `InterProcessSemaphoreV2(client, path, SharedCountReader)`), read at
    /// each listing: raising it lets waiters in at once (a waiting attempt
    /// watches the count too); lowering it lets no new lease in until the
    /// holders are within it (held leases stay held). A count of 0 or less
    /// grants nothing.
    ///
    /// In zklock's layout or Curator's (see [`in_dialect`](Self::in_dialect)).
    /// Such a semaphore neither stores nor checks a limit in `<p>`'s data.
    ///
    /// # Errors
    /// `BadArguments` for an invalid `path`, or for [`Dialect::Kazoo`]
    /// (kazoo's `Semaphore` has no shared-count form: its limit is in `<p>`).
    pub fn with_shared_count(
        zkw: &ZooKeeperWatcher,
        path: &str,
        dialect: Dialect,
        count: SharedCount,
        data: &[u8],
    ) -> Result<ZkSemaphore> {
        if dialect == Dialect::Kazoo {
            return Err(Error::BadArguments(format!(
                "semaphore {path}: kazoo's Semaphore has no shared-count form"
            )));
        }
        ZkSemaphore::with_max(zkw, path, dialect, Max::Shared(count), data)
    }

    fn with_max(
        zkw: &ZooKeeperWatcher,
        path: &str,
        dialect: Dialect,
        max: Max,
        data: &[u8],
    ) -> Result<ZkSemaphore> {
        path::validate(path)?;
        let (locks, leases) = match dialect {
            Dialect::Kazoo => (format!("{path}{KAZOO_SEMAPHORE_LOCK}"), path.to_string()),
            _ => (
                path::join_znode(path, SEMAPHORE_LOCKS),
                path::join_znode(path, SEMAPHORE_LEASES),
            ),
        };
        path::validate(&locks)?;
        let shared = Arc::new(LockShared::default());
        Ok(ZkSemaphore {
            zkw: zkw.clone(),
            path: path.to_string(),
            dialect,
            limit_checked: Mutex::new(None),
            locks,
            waiter: wait_watcher(&shared, &leases, zkw.downgrade()),
            leases,
            max,
            lease_data: Layout::new(dialect, Role::Mutex).node_data(data),
            mutex_data: match dialect {
                // Curator's semaphore makes its mutex with the default data.
                Dialect::Curator => Vec::new(),
                _ => data.to_vec(),
            },
            listener: None,
            shared,
            call_grace: DEFAULT_CALL_GRACE,
            mutexes: Mutex::new(HashMap::new()),
            next_attempt: AtomicU64::new(0),
            step_hook: Hook::default(),
        })
    }

    /// Tells `listener` what happens to each lease while held, with the
    /// lease node's path: in doubt on disconnect, restored on reconnect, lost
    /// on session expiry or close, or when its node is deleted (a lease keeps
    /// a watch on its node while a listener is set). As
    /// [`ZkInterProcessLockBase::with_lock_listener`](super::ZkInterProcessLockBase::with_lock_listener).
    #[must_use]
    pub fn with_lock_listener(mut self, listener: impl LockListener + 'static) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// How long past its timeout a [`try_acquire`](Self::try_acquire) lets
    /// the ZooKeeper calls of its attempt run (default [`DEFAULT_CALL_GRACE`]).
    #[must_use]
    pub fn with_call_grace(mut self, grace: Duration) -> Self {
        self.call_grace = grace;
        self
    }

    /// Calls `hook` at each [`SemaphoreStep`] of an attempt, on the acquiring
    /// thread (feature `testing`).
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_step_hook(
        self,
        hook: impl Fn(SemaphoreStep, &str) + Send + Sync + 'static,
    ) -> Self {
        self.step_hook.set(hook);
        self
    }

    /// The semaphore's znode.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The most leases held at once now (the shared count's value, with
    /// [`with_shared_count`](Self::with_shared_count); 0 when it is 0 or less).
    ///
    /// # Errors
    /// Reading the shared count: `NoNode`, `BadArguments` (not 4 bytes), the
    /// session's errors.
    pub fn max_leases(&self) -> Result<u32> {
        match &self.max {
            Max::Fixed(n) => Ok(*n),
            Max::Shared(count) => Ok(u32::try_from(count.get()?.value).unwrap_or(0)),
        }
    }

    /// Blocks until a lease is held (Curator's `acquire()`).
    ///
    /// # Errors
    /// `SessionExpired` / `Closed` when the session ends while waiting (also
    /// when session renewal replaced it); `Cancelled` after
    /// [`cancel`](Self::cancel); `LockLost` when the attempt's lease node was
    /// deleted while waiting; `MixedDialect` when the semaphore's directories
    /// hold nodes of another layout, or when the path is another layout's
    /// semaphore (nothing created); `BadArguments` when the limit stored in
    /// `<p>` (zklock's and kazoo's layouts) differs; ZooKeeper errors after retries. The
    /// attempt's nodes are removed on every error.
    pub fn acquire(&self) -> Result<SemaphoreLease> {
        self.attempt(Bounds::new(None))?
            .ok_or_else(|| Error::zk(ZkError::OperationTimeout, &self.path))
    }

    /// Waits at most `timeout` for a lease (Curator's `acquire(time, unit)`):
    /// `Ok(None)` when it ran out, its nodes removed. As the locks'
    /// [`try_acquire`](InterProcessLock::try_acquire): `Duration::ZERO` takes
    /// a free lease whenever the server answers; the attempt's calls get
    /// [`with_call_grace`](Self::with_call_grace) past `timeout`, and a call
    /// cut short by that bound is a timeout, not an error.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    #[must_use = "`Ok(None)` means no lease was acquired; dropping the lease returns it"]
    pub fn try_acquire(&self, timeout: Duration) -> Result<Option<SemaphoreLease>> {
        self.attempt(Bounds::with_grace(Some(timeout), self.call_grace))
    }

    /// Ends every `acquire` in progress with [`Error::Cancelled`] (their nodes
    /// removed), and every later one: a cancelled instance stays cancelled.
    /// Leases already held stay held.
    pub fn cancel(&self) {
        if !self.shared.cancelled.swap(true, Ordering::SeqCst) {
            info!("acquiring semaphore {} cancelled", self.path);
        }
        self.shared.wake.wake();
        for c in self.mutexes.lock().values() {
            c.cancel();
        }
    }

    /// The lease nodes now (Curator's `getParticipantNodes`): holders and the
    /// one waiter holding the mutex.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub fn lease_nodes(&self) -> Result<Vec<String>> {
        match self
            .zkw
            .recoverable_zookeeper()
            .get_children(&self.leases, false)
        {
            Ok(c) => Ok(c),
            Err(e) if e.is(ZkError::NoNode) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn check_cancelled(&self) -> Result<()> {
        check_cancelled(&self.shared, &self.path)
    }

    /// The attempt's internal mutex, registered for a cancel.
    fn mutex(&self) -> Result<(ZkInterProcessWriteLock, Registered<'_>)> {
        let mutex = ZkInterProcessWriteLock::new(&self.zkw, &self.locks, &self.mutex_data, None)?
            .with_layout(Layout::new(self.dialect, Role::Mutex))
            .with_call_grace(self.call_grace)
            .with_hook(self.step_hook.map(SemaphoreStep::Mutex));
        let id = self.next_attempt.fetch_add(1, Ordering::Relaxed);
        self.mutexes.lock().insert(id, mutex.canceller());
        // A cancel before the registration: seen here.
        self.check_cancelled()?;
        Ok((mutex, Registered { sem: self, id }))
    }

    /// An attempt ([`attempt_inner`](Self::attempt_inner)), measured
    /// (feature `metrics`).
    fn attempt(&self, bounds: Bounds) -> Result<Option<SemaphoreLease>> {
        let _started = Timer::start();
        let result = self.attempt_inner(bounds);
        metric!(lock_attempt(
            "semaphore",
            &self.path,
            outcome(&result),
            _started,
            self.shared.waited.take()
        ));
        result
    }

    /// Takes the mutex, then a lease; every exit without a lease removes the
    /// attempt's nodes (the mutex's when its instance drops).
    fn attempt_inner(&self, bounds: Bounds) -> Result<Option<SemaphoreLease>> {
        let call = CallSession::begin(&self.zkw)?;
        self.check_cancelled()?;
        let look_again = self.check_path(&call.rzk().with_deadline(bounds.calls))?;
        let (mutex, _registered) = self.mutex()?;
        let got = match bounds.wait.remaining() {
            None => mutex.acquire().map(|()| true),
            Some(left) => mutex.try_acquire(left),
        };
        let got = got.map_err(|e| match e {
            Error::Cancelled { .. } => Error::Cancelled {
                lock: self.path.clone(),
            },
            e => e,
        })?;
        if !got {
            return Ok(None);
        }
        // The mutex was taken in this attempt's session (not a renewed one).
        call.check()?;
        let lease = self.lease(&call, bounds, look_again);
        if look_again && matches!(lease, Err(Error::MixedDialect { .. })) {
            // Refused after making the directories (another layout's lease
            // came meanwhile): the mutex, then whatever is left empty goes,
            // or kazoo would count the directories as leases.
            if let Err(e) = mutex.release() {
                debug!("releasing the mutex of {}: {e}", self.path);
            }
            self.remove_empty_dirs(&call.rzk().with_deadline(bounds.calls));
            return lease;
        }
        // Held or not, the mutex goes (in the background: the next waiter
        // wakes at its deletion; the acquire does not wait for it).
        mutex.release_in_background();
        lease
    }

    /// The layout's directories, each removed when empty (a participant of
    /// the layout that needs one makes it again).
    fn remove_empty_dirs(&self, rzk: &RecoverableZooKeeper) {
        let dirs = match self.dialect {
            // kazoo's guard lock (its leases are `<p>`'s children).
            Dialect::Kazoo => vec![self.locks.clone()],
            _ => vec![self.leases.clone(), self.locks.clone()],
        };
        for dir in dirs {
            match Removal::new(dir.as_str(), Guard::Any).run(rzk) {
                Ok(true) => debug!("removed {dir}, made by a refused attempt"),
                Ok(false) => {}
                Err(e) if e.is(ZkError::NotEmpty) => {}
                Err(e) => debug!("removing {dir}: {e}"),
            }
        }
    }

    /// After its lease node is made by an attempt that made the layout's
    /// directories: `<p>` listed again, another layout's lease refused
    /// (see "One layout per path" in the type's docs).
    fn look_again(&self, rzk: &RecoverableZooKeeper) -> Result<()> {
        let children = match rzk.get_children(&self.path, false) {
            Ok(children) => children,
            Err(e) if e.is(ZkError::NoNode) => return Ok(()),
            Err(e) => return Err(e),
        };
        match semaphore_foreign(self.dialect, &children) {
            None => Ok(()),
            Some((node, found)) => {
                info!("semaphore {}: {node} is {found}'s: refused", self.path);
                Err(Error::MixedDialect {
                    path: path::join_znode(&self.path, node),
                    found,
                })
            }
        }
    }

    /// Holding the mutex: takes a lease in the dialect's way, then makes it
    /// a [`SemaphoreLease`] (watched when a listener is set).
    fn lease(
        &self,
        call: &CallSession,
        bounds: Bounds,
        look_again: bool,
    ) -> Result<Option<SemaphoreLease>> {
        let rzk = call.rzk().with_deadline(bounds.calls);
        let rzk = if self.dialect == Dialect::HBase {
            rzk
        } else {
            rzk.with_metadata_prefix(false)
        };
        let at = LockWait::new(call, &rzk, bounds, &self.shared, &self.path);
        let taken = match self.dialect {
            Dialect::Kazoo => self.kazoo_lease(&at, look_again)?,
            _ => self.counted_lease(&at, look_again)?,
        };
        let Some((path, stat)) = taken else {
            return Ok(None);
        };
        match self.grant(&at, &path) {
            Ok((shared, watch)) => {
                hook!(self.step_hook, SemaphoreStep::Granted, &path);
                let name = path::get_node_name(&path);
                let sequence = match self.dialect {
                    Dialect::HBase => tagged_sequence(name, LEASE_PREFIX),
                    Dialect::Curator => {
                        number_after_last(name, '-').and_then(|n| i32::try_from(n).ok())
                    }
                    Dialect::Kazoo => None,
                }
                .unwrap_or(0);
                debug!("leased {path}");
                Ok(Some(SemaphoreLease {
                    held: Timer::start(),
                    #[cfg(feature = "metrics")]
                    sem: self.path.clone(),
                    zkw: self.zkw.clone(),
                    session: call.clone(),
                    lease: AcquiredLock {
                        path,
                        version: stat.version,
                        czxid: stat.czxid,
                        sequence,
                    },
                    shared,
                    watch,
                    released: false,
                }))
            }
            Err(e) => abandon(&self.zkw, Attempt::Node(path), Err(e), &bounds, true),
        }
    }

    /// The sequential lease node's prefix: zklock's tagged `lease-<tag>-`,
    /// or Curator's protected `_c_<uuid>-lease-`; unique to the attempt
    /// either way (a lost create's node is found by it).
    fn lease_prefix(&self) -> String {
        match self.dialect {
            Dialect::Curator => OwnerMark::new().path_to_create(
                &path::join_znode(&self.leases, LEASE_PREFIX),
                CreateMode::EphemeralSequential,
            ),
            _ => tagged_prefix(&path::join_znode(&self.leases, LEASE_PREFIX)),
        }
    }

    /// Curator's algorithm (zklock's and Curator's layouts): creates the
    /// lease node, then waits until the leases, its own counted, are within
    /// the limit. Its node is removed on every exit without it.
    fn counted_lease(&self, at: &LockWait<'_>, look_again: bool) -> Result<Option<(String, Stat)>> {
        let (rzk, bounds) = (at.rzk, at.bounds);
        let tagged = self.lease_prefix();
        let CreatedAndListed { path, stat, listed } = match self.create_lease(rzk, &tagged) {
            Ok(created) => created,
            Err(e) => {
                // The create may have reached the server with its reply lost.
                let lost = e.is_retryable();
                return abandon(&self.zkw, Attempt::Tag(tagged), Err(e), &bounds, lost);
            }
        };
        hook!(self.step_hook, SemaphoreStep::Created, &path);
        if look_again {
            if let Err(e) = self.look_again(rzk) {
                return abandon(&self.zkw, Attempt::Node(path), Err(e), &bounds, true);
            }
        }
        match self.wait_for_leases(at, &path, listed) {
            Ok(true) => Ok(Some((path, stat))),
            Ok(false) => {
                info!("no lease of {} in time; removing {path}", self.path);
                abandon(&self.zkw, Attempt::Node(path), Ok(()), &bounds, true)
            }
            Err(e) => abandon(&self.zkw, Attempt::Node(path), Err(e), &bounds, true),
        }
    }

    /// kazoo's algorithm: lists `<p>` with a watch and creates the lease
    /// node `<p>/<uuid hex>` only when fewer than the limit exist; else waits
    /// for a change. Nothing is created before there is room.
    fn kazoo_lease(&self, at: &LockWait<'_>, look_again: bool) -> Result<Option<(String, Stat)>> {
        let (rzk, bounds) = (at.rzk, at.bounds);
        let path = path::join_znode(&self.leases, &random_uuid().replace('-', ""));
        let mut made = false;
        let taken: Result<Option<Stat>> = (|| loop {
            at.check()?;
            let round = at.round();
            let children = rzk.get_children_watch(&self.leases, &self.waiter)?;
            self.refuse_foreign(&children)?;
            if children.len() < self.max_leases()? as usize {
                hook!(self.step_hook, SemaphoreStep::Room, &path);
                let (_, stat) = rzk.create2(
                    &path,
                    &self.lease_data,
                    rzk.acl_for(&path),
                    CreateMode::Ephemeral,
                )?;
                made = true;
                hook!(self.step_hook, SemaphoreStep::Created, &path);
                if look_again {
                    self.look_again(rzk)?;
                }
                return Ok(Some(stat));
            }
            if bounds.wait.is_past() {
                return Ok(None);
            }
            if !self.wait_round(at, round, &path)? {
                return Ok(None);
            }
        })();
        match taken {
            Ok(Some(stat)) => Ok(Some((path, stat))),
            Ok(None) => Ok(None),
            Err(e) => {
                // A create whose reply was lost may have made it.
                let remove = made || e.is_retryable();
                abandon(&self.zkw, Attempt::Node(path), Err(e), &bounds, remove)
            }
        }
    }

    /// Before the attempt creates anything: `MixedDialect` when the
    /// semaphore's znode `<p>` is another layout's semaphore, then the
    /// stored limit (see [`check_limit`](Self::check_limit)). One listing of
    /// `<p>` (with its `Stat`); a second look only where this attempt would
    /// make a directory of its layout:
    /// - zklock's and Curator's layouts refuse kazoo's leases in `<p>`, and,
    ///   when `locks` or `leases` is still to be made, kazoo's guard lock
    ///   `<p>-__lock__` (kazoo has used `<p>` and would count the
    ///   directories as leases: it could never take a lease again) and
    ///   another layout's leases in a `leases` without `locks`;
    /// - kazoo's layout refuses `locks`/`leases` in `<p>`.
    ///
    /// The other layouts' directories are seen by the attempt's own listings
    /// (the mutex's, the leases'), which remove its node on a refusal.
    ///
    /// `Ok(true)` when the attempt must look at `<p>` again once its lease
    /// node exists ([`look_again`](Self::look_again)): in zklock's and
    /// Curator's layouts when it makes a directory, in kazoo's always (a
    /// layout's directories made after its listing).
    fn check_path(&self, rzk: &RecoverableZooKeeper) -> Result<bool> {
        let rzk = rzk.with_metadata_prefix(false);
        let found = match rzk.get_children2(&self.path, false) {
            Ok(found) => Some(found),
            Err(e) if e.is(ZkError::NoNode) => None,
            Err(e) => return Err(e),
        };
        let (children, stat) = match &found {
            Some((children, stat)) => (children.as_slice(), Some(stat)),
            None => (&[][..], None),
        };
        if let Some((node, found)) = semaphore_foreign(self.dialect, children) {
            let found = if node == SEMAPHORE_LOCKS || node == SEMAPHORE_LEASES {
                self.dirs_dialect(&rzk)?
            } else {
                found
            };
            info!("semaphore {}: {node} is {found}'s: refused", self.path);
            return Err(Error::MixedDialect {
                path: path::join_znode(&self.path, node),
                found,
            });
        }
        let look_again = match self.dialect {
            Dialect::Kazoo => true,
            _ => {
                let has = |dir: &str| children.iter().any(|c| c == dir);
                let (locks, leases) = (has(SEMAPHORE_LOCKS), has(SEMAPHORE_LEASES));
                if !(locks && leases) {
                    let guard = format!("{}{KAZOO_SEMAPHORE_LOCK}", self.path);
                    if rzk.exists(&guard, false)?.is_some() {
                        info!(
                            "semaphore {}: kazoo's {guard} is beside it: refused",
                            self.path
                        );
                        return Err(Error::MixedDialect {
                            path: guard,
                            found: Dialect::Kazoo,
                        });
                    }
                }
                if leases && !locks {
                    match rzk.get_children(&self.leases, false) {
                        Ok(listed) => self.refuse_foreign(&listed)?,
                        Err(e) if e.is(ZkError::NoNode) => {}
                        Err(e) => return Err(e),
                    }
                }
                // This attempt makes a directory.
                !(locks && leases)
            }
        };
        self.check_limit(&rzk, stat)?;
        Ok(look_again)
    }

    /// Whose `locks`/`leases` are in `<p>` (zklock's or Curator's), by their
    /// nodes: a refusal's error names it. zklock's when they are empty.
    fn dirs_dialect(&self, rzk: &RecoverableZooKeeper) -> Result<Dialect> {
        for (dir, of) in [
            (
                SEMAPHORE_LEASES,
                Dialect::of_lease as fn(&str) -> Option<Dialect>,
            ),
            (SEMAPHORE_LOCKS, Dialect::of_node),
        ] {
            let listed = match rzk.get_children(&path::join_znode(&self.path, dir), false) {
                Ok(listed) => listed,
                Err(e) if e.is(ZkError::NoNode) => continue,
                Err(e) => return Err(e),
            };
            if let Some(d) = listed.iter().find_map(|c| of(c)) {
                return Ok(d);
            }
        }
        Ok(Dialect::HBase)
    }

    /// zklock's and kazoo's layouts store the limit in `<p>`'s data, as text
    /// (kazoo's `_ensure_path`): a missing `<p>` is created with it (and its
    /// parents); a bare one (no data, no children) gets it; one that holds
    /// another number is refused (kazoo's "Inconsistent max leases"), data
    /// that is no number is ignored, as kazoo does. Read again only when
    /// `<p>`'s data changed. Curator's layout stores no limit, nor does a
    /// shared count's semaphore: nothing is checked.
    fn check_limit(&self, rzk: &RecoverableZooKeeper, stat: Option<&Stat>) -> Result<()> {
        let max = match self.max {
            Max::Fixed(max) if self.dialect != Dialect::Curator => max,
            _ => return Ok(()),
        };
        let text = max.to_string();
        match stat {
            Some(stat) if *self.limit_checked.lock() == Some((stat.czxid, stat.version)) => {
                return Ok(());
            }
            Some(stat) if stat.data_length == 0 && stat.num_children == 0 => {
                match rzk.set_data(&self.path, text.as_bytes(), Some(stat.version)) {
                    Ok(stat) => {
                        *self.limit_checked.lock() = Some((stat.czxid, stat.version));
                        return Ok(());
                    }
                    // Written or removed meanwhile: read below.
                    Err(e) if e.is(ZkError::BadVersion) || e.is(ZkError::NoNode) => {}
                    Err(e) => return Err(e),
                }
            }
            Some(_) => {}
            None => {
                let create = || {
                    rzk.create(
                        &self.path,
                        text.as_bytes(),
                        rzk.acl_for(&self.path),
                        CreateMode::Persistent,
                    )
                };
                match with_parents(rzk, &self.path, Parents::Persistent, create) {
                    Ok(_) => return Ok(()),
                    Err(e) if e.is(ZkError::NodeExists) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let (data, stat) = match rzk.get_data(&self.path, false) {
            Ok(read) => read,
            // Removed meanwhile: the attempt makes it again, without a limit.
            Err(e) if e.is(ZkError::NoNode) => return Ok(()),
            Err(e) => return Err(e),
        };
        let stored = std::str::from_utf8(&data)
            .ok()
            .and_then(|t| t.trim().parse::<i64>().ok());
        if let Some(stored) = stored.filter(|n| *n != i64::from(max)) {
            return Err(Error::BadArguments(format!(
                "semaphore {}: inconsistent max leases: {stored}, expected: {max}",
                self.path
            )));
        }
        *self.limit_checked.lock() = Some((stat.czxid, stat.version));
        Ok(())
    }

    /// The lease's ephemeral sequential node, sent with the first listing of
    /// the leases (no watch); creates the parents when missing.
    fn create_lease(&self, rzk: &RecoverableZooKeeper, tagged: &str) -> Result<CreatedAndListed> {
        create_tagged(
            rzk,
            tagged,
            &self.lease_data,
            CreateMode::EphemeralSequential,
            Parents::of_mode(Layout::new(self.dialect, Role::Mutex).parent_mode()),
            Some(&self.leases),
        )
    }

    /// Lists the leases until at most `max_leases` exist (`Ok(true)`), the
    /// wait runs out (`Ok(false)`), or the attempt ends. The first listing
    /// (sent with the create) sets no watch; over the limit, the mutex
    /// holder lists with a watch and waits.
    fn wait_for_leases(
        &self,
        at: &LockWait<'_>,
        my_path: &str,
        mut listed: Option<Vec<String>>,
    ) -> Result<bool> {
        let rzk = at.rzk;
        let my_node = path::get_node_name(my_path);
        loop {
            at.check()?;
            let round = at.round();
            // Taken before the listing: a grant needs a read-write server's.
            let before = at.connection();
            let (children, watched) = match listed.take() {
                Some(c) => (c, false),
                None => match rzk.get_children_watch(&self.leases, &self.waiter) {
                    Ok(c) => (c, true),
                    Err(e) if e.is(ZkError::NoNode) => return Err(lost(my_path)),
                    Err(e) => return Err(e),
                },
            };
            if !children.iter().any(|c| c == my_node) {
                return Err(lost(my_path));
            }
            self.refuse_foreign(&children)?;
            if children.len() <= self.max_leases()? as usize {
                if at.proven(before)? {
                    return Ok(true);
                }
                continue;
            }
            if !watched {
                continue;
            }
            if at.bounds.wait.is_past() {
                return Ok(false);
            }
            if let Max::Shared(count) = &self.max {
                // A raised count lets this waiter in: watch it too (read after
                // the watch's round began, so no change is missed).
                if rzk.exists_watch(count.path(), &self.waiter)?.is_none() {
                    return Err(Error::zk(ZkError::NoNode, count.path()));
                }
                if children.len() <= self.max_leases()? as usize {
                    return Ok(true);
                }
            }
            if !self.wait_round(at, round, my_path)? {
                return Ok(false);
            }
        }
    }

    /// `MixedDialect` when a listing the attempt makes anyway holds a lease
    /// of another layout: zklock's `lease-<tag>-<seq>` and Curator's
    /// `_c_<uuid>-lease-<seq>` (or kazoo's `<uuid hex>`) in one
    /// `<p>/leases`, or the other layouts' `locks`/`leases` in kazoo's `<p>`
    /// (which kazoo counts as leases). The attempt's node is removed;
    /// nothing is held.
    fn refuse_foreign(&self, children: &[String]) -> Result<()> {
        let foreign = match self.dialect {
            // (Whose directories they are is not in the listing.)
            Dialect::Kazoo => semaphore_foreign(self.dialect, children),
            _ => children.iter().find_map(|c| {
                Dialect::of_lease(c)
                    .filter(|d| *d != self.dialect)
                    .map(|d| (c.as_str(), d))
            }),
        };
        match foreign {
            None => Ok(()),
            Some((node, found)) => Err(Error::MixedDialect {
                path: path::join_znode(&self.leases, node),
                found,
            }),
        }
    }

    /// Waits for a wake-up of `round` (the leases' watch is set) until the
    /// wait's bound: `Ok(false)` out of time. As the locks' waits: the
    /// session's end and a cancel wake it directly; nothing periodic.
    fn wait_round(&self, at: &LockWait<'_>, round: u64, path: &str) -> Result<bool> {
        debug!("{path} waits for a lease of {}", self.path);
        hook!(self.step_hook, SemaphoreStep::Waiting, path);
        let woken = at.wait(round)?;
        hook!(self.step_hook, SemaphoreStep::Woken, path);
        at.cancelled()?;
        Ok(woken)
    }

    /// The lease's own state, watched when a listener is set. The attempt's
    /// last look is here, after its last network call: a cancel or the
    /// session's end from another thread while the lease node was made (or
    /// watched) ends the attempt (the caller removes the node), so an
    /// `acquire` in progress at a cancel never returns a lease. (kazoo's
    /// layout lists nothing after its create: before, a cancel during it
    /// was not seen.)
    fn grant(
        &self,
        at: &LockWait<'_>,
        path: &str,
    ) -> Result<(Arc<LockShared>, Option<Arc<NodeWatch>>)> {
        let shared = Arc::new(LockShared::default());
        let watch = match &self.listener {
            Some(listener) => {
                *shared.listener.write() = Some(listener.clone());
                Some(at.watch_node(path, &shared, &self.zkw)?)
            }
            None => None,
        };
        at.hold_grant(watch.as_deref(), path)?;
        Ok((shared, watch))
    }
}

/// A held lease of a [`ZkSemaphore`] (Curator's `Lease`): owned, `'static`,
/// released by [`release`](Self::release) or on drop (in the background: a
/// drop never waits on the network).
#[must_use = "if unused the lease is released immediately"]
#[clippy::has_significant_drop]
pub struct SemaphoreLease {
    zkw: ZooKeeperWatcher,
    /// The session the lease was granted in.
    session: CallSession,
    lease: AcquiredLock,
    shared: Arc<LockShared>,
    watch: Option<Arc<NodeWatch>>,
    released: bool,
    /// The grant's time (feature `metrics`: the hold's length).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    held: Timer,
    /// The semaphore's path (feature `metrics`: the `path` label).
    #[cfg(feature = "metrics")]
    sem: String,
}

impl std::fmt::Debug for SemaphoreLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphoreLease")
            .field("lease", &self.lease)
            .field("held", &self.is_held())
            .finish()
    }
}

impl SemaphoreLease {
    /// The lease node's path (Curator's `Lease.getNodeName`, as a path).
    pub fn path(&self) -> &str {
        &self.lease.path
    }

    /// The lease node as a grant: path, version, creation zxid, sequence.
    pub fn acquired(&self) -> &AcquiredLock {
        &self.lease
    }

    /// A number that grows with every lease granted on this semaphore (and
    /// with every grant of any lock: the node's creation zxid). See
    /// [`AcquiredLock::fencing_token`] and, for a write the server itself
    /// refuses once the lease is lost, [`guarded_multi`](Self::guarded_multi).
    pub fn fencing_token(&self) -> i64 {
        self.lease.fencing_token()
    }

    /// Whether the lease is still held: false once known lost (its node
    /// deleted, with a listener set; its session ended or replaced).
    pub fn is_held(&self) -> bool {
        !self.released && !self.shared.lost.load(Ordering::SeqCst) && self.session.check().is_ok()
    }

    /// A `multi` of `ops` that the server applies only while this lease's
    /// node exists (see [`guarded_multi`](super::guarded_multi)), sent in the
    /// lease's session.
    ///
    /// # Errors
    /// `LockLost` when the lease's node is gone (nothing applied);
    /// `SessionExpired` once the lease's session ended; `Multi` when one of
    /// `ops` failed (nothing applied).
    pub fn guarded_multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        if self.shared.lost.load(Ordering::SeqCst) {
            return Err(Error::LockLost {
                path: self.lease.path.clone(),
            });
        }
        super::guarded::guarded_multi(self.session.rzk(), &self.lease, ops)
    }

    /// Deletes the lease node (Curator's `returnLease`), in the session it
    /// was granted in.
    ///
    /// # Errors
    /// `LockLost` when the node was gone (expiry, reaping; also after a
    /// renewal); ZooKeeper errors after retries (the node is then removed in
    /// the background).
    pub fn release(mut self) -> Result<()> {
        if let Some(w) = &self.watch {
            w.release();
        }
        let path = self.lease.path.clone();
        let lost = || {
            metric!(lock_hold("semaphore", &self.sem, self.held));
            metric!(lock_lost(&path, !self.shared.lost.load(Ordering::SeqCst)));
            Err(Error::LockLost { path: path.clone() })
        };
        if self.shared.lost.load(Ordering::SeqCst) {
            self.released = true;
            remove_and_wait(&self.zkw, Attempt::Node(path.clone()));
            return lost();
        }
        let rzk = self.session.rzk();
        let deleted = match Removal::new(path.as_str(), Guard::Version(self.lease.version)).run(rzk)
        {
            // Someone wrote to our node: it is still ours (tagged, ephemeral).
            Err(e) if e.is(ZkError::BadVersion) => Removal::new(path.as_str(), Guard::Any).run(rzk),
            other => other,
        };
        match deleted {
            Ok(false) => {
                self.released = true;
                lost()
            }
            Ok(true) => {
                self.released = true;
                metric!(lock_hold("semaphore", &self.sem, self.held));
                debug!("returned lease {path}");
                Ok(())
            }
            Err(e) if e.is(ZkError::NoNode) || e.is_fatal() => {
                self.released = true;
                lost()
            }
            // The drop removes it in the background.
            Err(e) => Err(e),
        }
    }
}

impl Drop for SemaphoreLease {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if let Some(w) = &self.watch {
            w.release();
        }
        metric!(lock_hold("semaphore", &self.sem, self.held));
        debug!("returning lease {} in the background", self.lease.path);
        remove_in_background(&self.zkw, Attempt::Node(self.lease.path.clone()));
    }
}
