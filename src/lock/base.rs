//! `ZkInterProcessLockBase`: HBase's `ZKInterProcessLockBase`, generic over the
//! lock kind.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use log::{debug, info, warn};
use parking_lot::Mutex;

use super::dialect::{Dialect, Layout};
use super::kind::{role_of, LockKind};
use super::step::{check_cancelled, lost, LockWait};
#[cfg(feature = "metrics")]
use super::step::{kind_label, outcome};
use super::watch::{wait_watcher, LockShared, NodeWatch};
use super::{AcquiredLock, InterProcessLock, LockListener, MetadataHandler};
use crate::client::CreatedAndListed;
use crate::engine::call::CallSession;
use crate::engine::hook::{hook, Hook};
use crate::engine::owned::{
    create_tagged, remove_and_wait, remove_in_background, Attempt, Guard, Parents, Removal,
};
use crate::engine::wait::{Bounds, DEFAULT_CALL_GRACE};
use crate::error::{Error, Result, ZkError};
use crate::metrics::{metric, Timer};
use crate::path;
use crate::recoverable::RecoverableZooKeeper;
use crate::types::{CreateMode, Watcher};
use crate::watcher::ZooKeeperWatcher;

/// The state of one lock instance.
enum LockState {
    Idle,
    Acquiring,
    Held {
        lock: AcquiredLock,
        /// The watch on the held node (with a lock listener, or when the wait
        /// already set it).
        watch: Option<Arc<NodeWatch>>,
        /// The grant's time (feature `metrics`: the hold's length).
        held: Timer,
    },
}

impl std::fmt::Debug for LockState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockState::Idle => f.write_str("Idle"),
            LockState::Acquiring => f.write_str("Acquiring"),
            LockState::Held { lock, .. } => f.debug_tuple("Held").field(lock).finish(),
        }
    }
}

/// A step of an attempt, told to a test hook (see
/// [`ZkInterProcessLockBase::with_step_hook`]) with the attempt's node path (empty
/// before it exists): how tests put a fault or a deletion at an exact point of
/// the attempt instead of hoping for a race.
#[cfg_attr(not(feature = "testing"), doc(hidden))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockStep {
    /// Before the attempt's node is created.
    Creating,
    /// The node was created (and the first listing, sent with the create,
    /// came back too: the next step is `Listed`).
    Created,
    /// The lock znode's children were listed (each round).
    Listed,
    /// The watch on the node waited for is set; the wait starts.
    Watching,
    /// The wait ended (woken, or out of time).
    Woken,
    /// The listing showed the lock is this attempt's; the held node is not
    /// watched yet.
    Granted,
    /// The grant is complete; `acquire` records it and returns next (a
    /// cancel until the record still ends it with `Cancelled`).
    Held,
}

/// How a wait ended.
enum Waited {
    /// Held; the own-node watch, when the wait set one.
    Held(Option<Arc<NodeWatch>>),
    TimedOut,
}

/// HBase's `ZKInterProcessLockBase`: one lock instance (read or write, by `K`)
/// on the lock znode `parent`.
///
/// Use the aliases [`ZkInterProcessReadLock`](super::ZkInterProcessReadLock) and
/// [`ZkInterProcessWriteLock`](super::ZkInterProcessWriteLock), usually made by
/// [`ZkInterProcessReadWriteLock`](super::ZkInterProcessReadWriteLock). One instance
/// is one would-be holder: share it between threads only to hand the lock over
/// (it is not reentrant); give each thread its own instance to contend.
///
/// # Threads sharing an instance
/// The methods take `&self`; what one thread's call does to another's
/// `acquire`/`try_acquire` in progress (its node made or being made, not yet
/// the instance's):
/// - A second `acquire`/`try_acquire` fails at once with
///   [`Error::LockBusy`], creating nothing, as it does while the instance
///   holds. Curator's `InterProcessMutex` is re-entrant per thread (the
///   owning thread counts up, another thread queues); zklock's locks are
///   neither: one attempt and one node per instance, never a second node in
///   place of a recorded one.
/// - [`release`](InterProcessLock::release) finds nothing held
///   ([`Error::LockNotHeld`], Curator's "You do not own the lock") and
///   [`release_in_background`](InterProcessLock::release_in_background) does
///   nothing; the acquire goes on.
/// - [`cancel`](Self::cancel) and the session's [`close`](ZooKeeperWatcher::close)
///   end it with [`Error::Cancelled`] / [`Error::Closed`], its node removed (a
///   closed session's ephemeral node goes with it): the attempt looks at
///   each round and once more after its grant's last network call (the
///   held node's watch); a cancel, once more in the step that records the
///   grant, under the lock [`is_held`](InterProcessLock::is_held) reads. So
///   an `acquire` that an observer saw not holding after a cancel returned
///   never comes back holding; only a cancel after the record finds the
///   lock held. A close after the grant's last look is a loss (`is_held()`
///   false, a listener told `Lost`).
///
/// # Costs
/// An uncontended `acquire` + `release` is 3 ZooKeeper requests (create, get
/// children, delete) in two round trips: the create and the first listing of
/// the lock's children are sent together (the server answers a session's
/// requests in order, so the listing sees the new node), and `acquire` waits
/// for one round trip. After any failure of that pair the attempt goes on
/// one request at a time, with `RecoverableZooKeeper`'s rules for the create
/// (a lost reply: the node is found by its tag, never made twice).
///
/// A contended hand-off between two of one kind is 5 requests and one
/// notification, as in Curator: the waiter's create, get children and `get_data`
/// watch on its predecessor; after the predecessor's deletion, get children
/// again; its own delete. Waiting behind a node of the other kind adds one
/// watch on the attempt's own node (a reaper of one kind leaves the other
/// kind's nodes in place: the watch makes a reaped waiter fail at once). A
/// [`MetadataHandler`] adds a `get_data` of the holder's metadata per round; a
/// [lock listener](Self::with_lock_listener) adds one watch on the held node
/// when the wait did not set it.
///
/// # Waiting and threads
/// The waiting thread does every ZooKeeper call but one: the listing after
/// the watched node's event is sent by the per-watch watcher at once, without
/// blocking, and the waiter wakes when it is in (to an answer, not to a
/// request: one round trip and one thread hand-off fewer per hand-off; the
/// listing is tied to the wait round it answers, and a wake-up by anything
/// else lists anew). Watches wake it through that watcher, registered together
/// with the request's reply, never
/// through the `ZooKeeperWatcher`'s listener registry (which
/// `unregister_all_listeners` may empty). The client's event thread never waits
/// on the network for a lock.
///
/// # Dropping
/// Dropping an instance that holds the lock releases it in the background
/// ([`release_in_background`](InterProcessLock::release_in_background)): the drop
/// never waits on the network, even during a partition; the node is removed
/// when the server answers, or after the reconnect, or with the session.
#[doc(alias = "ZKInterProcessLockBase")]
pub struct ZkInterProcessLockBase<K: LockKind> {
    zkw: ZooKeeperWatcher,
    parent: String,
    /// The dialect and role: names, order, data, parents.
    layout: Layout,
    metadata: Vec<u8>,
    handler: Option<Arc<dyn MetadataHandler>>,
    shared: Arc<LockShared>,
    /// Wakes this instance's waits: one watcher for every wait of the instance,
    /// so a watch left on a node it stopped waiting for (a timeout) is not
    /// registered again for each new wait on that node.
    waiter: Arc<dyn Watcher>,
    state: Mutex<LockState>,
    call_grace: Duration,
    /// Whether an attempt sends its create and first listing together (one
    /// round trip); off only for benchmarks comparing the two.
    pipelined: bool,
    /// Whether the wait watcher sends the woken waiter's listing (see
    /// [`wait_watcher`]); off only for benchmarks comparing the two.
    listing_on_wake: bool,
    step_hook: Hook<LockStep>,
    _kind: PhantomData<fn() -> K>,
}

impl<K: LockKind> std::fmt::Debug for ZkInterProcessLockBase<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkInterProcessLockBase")
            .field("layout", &self.layout)
            .field("parent", &self.parent)
            .field("state", &*self.state.lock())
            .finish()
    }
}

/// Cancels a lock instance's `acquire` from another thread (see
/// [`ZkInterProcessLockBase::canceller`]). `Clone`, `Send`, `Sync`; holds no
/// session.
#[derive(Clone)]
pub struct LockCanceller {
    shared: Arc<LockShared>,
    lock: String,
}

impl LockCanceller {
    /// Ends the instance's `acquire`/`try_acquire` in progress with
    /// [`Error::Cancelled`] (its node removed), and every later one: a cancelled
    /// instance stays cancelled (make a new instance to acquire again). A lock
    /// already held stays held; an `acquire` whose node is made but not yet
    /// the instance's (its create in flight, its grant being listed, watched or
    /// not yet recorded) is still in progress: it ends with `Cancelled` (see "Threads
    /// sharing an instance" on [`ZkInterProcessLockBase`]).
    pub fn cancel(&self) {
        if !self.shared.cancelled.swap(true, Ordering::SeqCst) {
            info!("acquiring lock {} cancelled", self.lock);
        }
        self.shared.wake.wake();
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for LockCanceller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockCanceller")
            .field("lock", &self.lock)
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl<K: LockKind> ZkInterProcessLockBase<K> {
    /// A lock instance on the lock znode `parent` (created with parents when
    /// needed), whose node carries `metadata`; `handler` sees the holder's
    /// metadata while this instance waits (HBase's `handleLockMetadata`).
    ///
    /// # Errors
    /// `BadArguments` for an invalid `parent` path.
    pub fn new(
        zkw: &ZooKeeperWatcher,
        parent: &str,
        metadata: &[u8],
        handler: Option<Arc<dyn MetadataHandler>>,
    ) -> Result<Self> {
        crate::path::validate(parent)?;
        let shared = Arc::new(LockShared::default());
        Ok(ZkInterProcessLockBase {
            zkw: zkw.clone(),
            parent: parent.to_string(),
            layout: Layout::new(Dialect::HBase, role_of::<K>()),
            metadata: metadata.to_vec(),
            handler,
            waiter: wait_watcher(&shared, parent, zkw.downgrade()),
            shared,
            state: Mutex::new(LockState::Idle),
            call_grace: DEFAULT_CALL_GRACE,
            pipelined: true,
            listing_on_wake: true,
            step_hook: Hook::default(),
            _kind: PhantomData,
        })
    }

    /// This instance in `layout` (a dialect's names, order, data and
    /// parents); the node carries `layout`'s data for the metadata given to
    /// `new`.
    pub(crate) fn with_layout(mut self, layout: Layout) -> Self {
        self.metadata = layout.node_data(&self.metadata);
        self.layout = layout;
        self
    }

    /// This instance in `dialect` (default HBase): for a read lock, Curator's
    /// `InterProcessReadWriteLock` read lock or kazoo's `ReadLock`; for a
    /// write lock, their write locks (kazoo's `WriteLock` names its nodes as
    /// its `Lock` does, so it also excludes `Lock` holders). For Curator's
    /// `InterProcessMutex` / kazoo's `Lock`, use [`ZkInterProcessMutex`](super::ZkInterProcessMutex).
    /// The node carries `dialect`'s data for the metadata given to `new`.
    #[must_use]
    pub fn with_dialect(self, dialect: Dialect) -> Self {
        self.with_layout(Layout::new(dialect, role_of::<K>()))
    }

    /// The dialect this instance speaks (see [`Dialect`]).
    pub fn dialect(&self) -> Dialect {
        self.layout.dialect
    }

    /// Tells `listener` what happens to the lock while held: in doubt on
    /// disconnect, restored on reconnect, lost on session expiry or close, or
    /// when its node is deleted (e.g. reaped by another process: the lock keeps a
    /// watch on its node while a listener is set). Called on the client's event
    /// thread (or, for a change that came before `acquire` returned, on the
    /// acquiring thread), in order: keep it short.
    #[must_use]
    pub fn with_lock_listener(self, listener: impl LockListener + 'static) -> Self {
        *self.shared.listener.write() = Some(Arc::new(listener));
        self
    }

    /// How long past its timeout a [`try_acquire`](InterProcessLock::try_acquire)
    /// lets the ZooKeeper calls of its attempt run (default
    /// [`DEFAULT_CALL_GRACE`]). See `try_acquire` for the bound it makes.
    #[must_use]
    pub fn with_call_grace(mut self, grace: Duration) -> Self {
        self.call_grace = grace;
        self
    }

    /// Calls `hook` at each [`LockStep`] of an attempt, on the acquiring thread
    /// (feature `testing`).
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_step_hook(self, hook: impl Fn(LockStep, &str) + Send + Sync + 'static) -> Self {
        self.step_hook.set(hook);
        self
    }

    /// Tells `hook` each [`LockStep`] of an attempt (an inner lock's hook,
    /// such as the semaphore's mutex's).
    pub(crate) fn with_hook(mut self, hook: Hook<LockStep>) -> Self {
        self.step_hook = hook;
        self
    }

    /// Makes each attempt wait for its create's reply before listing the lock's
    /// children, as before the two were sent together: two round trips to take
    /// a free lock instead of one, the same requests (feature `testing`; the
    /// lock benchmark compares the two).
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_sequential_acquire(mut self) -> Self {
        self.pipelined = false;
        self
    }

    /// Makes a woken waiter send its listing itself, as before the wait
    /// watcher sent it on the event: the same requests, one round trip and one
    /// thread hand-off more on a contended hand-off (feature `testing`; the
    /// lock benchmark compares the two).
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_listing_after_wake(mut self) -> Self {
        self.listing_on_wake = false;
        self
    }

    /// The lock znode.
    pub fn lock_znode(&self) -> &str {
        &self.parent
    }

    /// The metadata this instance's node carries.
    pub fn metadata(&self) -> &[u8] {
        &self.metadata
    }

    /// Ends the `acquire` in progress on another thread with
    /// [`Error::Cancelled`], and every later one (see [`LockCanceller::cancel`]).
    pub fn cancel(&self) {
        self.canceller().cancel();
    }

    /// A handle that cancels this instance's `acquire` from another thread, for a
    /// service shutting down. ([`ZooKeeperWatcher::close`] ends every waiting
    /// attempt of the session too, with `Closed`.)
    pub fn canceller(&self) -> LockCanceller {
        LockCanceller {
            shared: self.shared.clone(),
            lock: self.parent.clone(),
        }
    }

    /// acquire / try_acquire.
    fn try_acquire_within(&self, bounds: Bounds) -> Result<bool> {
        {
            let mut st = self.state.lock();
            if !matches!(*st, LockState::Idle) {
                return Err(Error::LockBusy {
                    lock: self.parent.clone(),
                });
            }
            *st = LockState::Acquiring;
        }
        self.shared.lost.store(false, Ordering::SeqCst);
        let _started = Timer::start();
        let result = self.attempt(bounds);
        // The attempt's last look at a cancel, in the one step with the
        // grant's record, under the lock `is_held` reads: a cancel that
        // returned while the instance did not hold (the state `Acquiring`)
        // ends the acquire with `Cancelled`, its node removed. (The grant's
        // own look, `hold_grant`, comes before the `Held` step: a cancel
        // between the two was left holding.)
        let mut st = self.state.lock();
        let result = match result {
            Ok(Some((lock, watch))) => match self.check_cancelled() {
                Ok(()) => Ok(Some((lock, watch))),
                Err(e) => {
                    drop(st);
                    self.withdraw_cancelled(lock, watch);
                    st = self.state.lock();
                    Err(e)
                }
            },
            other => other,
        };
        metric!(lock_attempt(
            kind_label(self.layout.role),
            &self.parent,
            outcome(&result),
            _started,
            self.shared.waited.take()
        ));
        match result {
            Ok(Some((lock, watch))) => {
                debug!("acquired {}", lock.path);
                let held = Timer::start();
                *st = LockState::Held { lock, watch, held };
                Ok(true)
            }
            Ok(None) => {
                *st = LockState::Idle;
                Ok(false)
            }
            Err(e) => {
                *st = LockState::Idle;
                Err(e)
            }
        }
    }

    fn check_cancelled(&self) -> Result<()> {
        check_cancelled(&self.shared, &self.parent)
    }

    /// A grant that a cancel came for before its record
    /// ([`try_acquire_within`](Self::try_acquire_within)'s last look): its
    /// watch released (our own delete: no `Lost`), its node removed.
    fn withdraw_cancelled(&self, lock: AcquiredLock, watch: Option<Arc<NodeWatch>>) {
        if let Some(w) = &watch {
            w.release();
        }
        info!("acquiring {} cancelled at its record", self.parent);
        remove_and_wait(&self.zkw, Attempt::Node(lock.path));
    }

    /// Creates this attempt's node and waits; every exit that does not hold the
    /// lock removes the node (later, on reconnect, if it cannot now).
    fn attempt(&self, bounds: Bounds) -> Result<Option<(AcquiredLock, Option<Arc<NodeWatch>>)>> {
        // Every call of the attempt is made in this session: after an expiry
        // (renewal or not) the attempt ends with SessionExpired.
        let call = CallSession::begin(&self.zkw)?;
        self.check_cancelled()?;
        let rzk = call.rzk().with_deadline(bounds.calls);
        let tagged = self.layout.tagged_prefix(&self.parent);
        hook!(self.step_hook, LockStep::Creating, "");
        let CreatedAndListed { path, stat, listed } = match self.create_lock_znode(&rzk, &tagged) {
            Ok(created) => created,
            Err(e) => {
                // The create may have reached the server with its reply lost:
                // find the node by its tag and remove it.
                if e.is_retryable() {
                    remove_and_wait(&self.zkw, Attempt::Tag(tagged));
                }
                return if bounds.cut_short(&e) {
                    Ok(None)
                } else {
                    Err(e)
                };
            }
        };
        hook!(self.step_hook, LockStep::Created, &path);
        let at = LockWait::new(&call, &rzk, bounds, &self.shared, &self.parent);
        match self.grant(&at, &path, listed) {
            Ok(Some(watch)) => {
                let sequence = self
                    .layout
                    .sequence(path::get_node_name(&path))
                    .unwrap_or(0);
                hook!(self.step_hook, LockStep::Held, &path);
                Ok(Some((
                    AcquiredLock {
                        path,
                        version: stat.version,
                        czxid: stat.czxid,
                        sequence,
                    },
                    watch,
                )))
            }
            Ok(None) => {
                info!("unable to acquire {} in time; removing {path}", self.parent);
                remove_and_wait(&self.zkw, Attempt::Node(path));
                Ok(None)
            }
            Err(e) => {
                remove_and_wait(&self.zkw, Attempt::Node(path));
                if bounds.cut_short(&e) {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Waits for the lock, then makes the grant watched when it must be:
    /// `Ok(Some(watch))` held, `Ok(None)` out of time.
    fn grant(
        &self,
        at: &LockWait<'_>,
        path: &str,
        listed: Option<Vec<String>>,
    ) -> Result<Option<Option<Arc<NodeWatch>>>> {
        let own = match self.wait_for_lock(at, path, listed)? {
            Waited::TimedOut => return Ok(None),
            Waited::Held(own) => own,
        };
        hook!(self.step_hook, LockStep::Granted, path);
        let watch = match own {
            Some(own) => Some(own),
            // Watch the held node so that a deletion (reaping) is told as
            // Lost.
            None if self.shared.listener.read().is_some() => {
                Some(at.watch_node(path, &self.shared, &self.zkw)?)
            }
            None => None,
        };
        at.hold_grant(watch.as_deref(), path)?;
        Ok(Some(watch))
    }

    /// HBase's `createLockZNode`: an ephemeral sequential child under `tagged`
    /// (`<parent>/<kind><tag>-`), creating the lock znode's parents when missing.
    /// Sent together with the first listing of the lock's children, which
    /// comes back too when it could be made (`None`: the waiting lists anew).
    fn create_lock_znode(
        &self,
        rzk: &RecoverableZooKeeper,
        tagged: &str,
    ) -> Result<CreatedAndListed> {
        // Other dialects' nodes carry the data as given.
        let raw;
        let rzk = if self.layout.metadata_prefix() {
            rzk
        } else {
            raw = rzk.with_metadata_prefix(false);
            &raw
        };
        // No lock znode yet (nothing was created): make it, then create.
        create_tagged(
            rzk,
            tagged,
            &self.metadata,
            CreateMode::EphemeralSequential,
            Parents::of_mode(self.layout.parent_mode()),
            self.pipelined.then_some(self.parent.as_str()),
        )
    }

    /// Loops until `my_path` holds the lock, the wait runs out, or the attempt
    /// ends (session, cancel, our node reaped).
    fn wait_for_lock(
        &self,
        at: &LockWait<'_>,
        my_path: &str,
        mut listed: Option<Vec<String>>,
    ) -> Result<Waited> {
        let rzk = at.rzk;
        let my_node = path::get_node_name(my_path);
        if self.layout.sequence(my_node).is_none() {
            return Err(Error::BadArguments(format!(
                "lock node {my_path} has no sequence number"
            )));
        }
        let mut own: Option<Arc<NodeWatch>> = None;
        loop {
            at.check()?;
            // Taken before the listing: a grant needs a read-write server's.
            let before = at.connection();
            // The first round's listing came with the create, when it could.
            let children = match listed.take() {
                Some(c) => c,
                None => match rzk.get_children(&self.parent, false) {
                    Ok(c) => c,
                    Err(e) if e.is(ZkError::NoNode) => Vec::new(),
                    Err(e) => return Err(e),
                },
            };
            hook!(self.step_hook, LockStep::Listed, my_path);
            if !children.iter().any(|c| c == my_node) || own.as_ref().is_some_and(|o| o.is_gone()) {
                return Err(lost(my_path));
            }
            if let Some((node, found)) = self.layout.foreign(&children) {
                warn!(
                    "lock {} holds {node} of the {found} dialect: refusing",
                    self.parent
                );
                return Err(Error::MixedDialect {
                    path: path::join_znode(&self.parent, node),
                    found,
                });
            }
            let Some(to_watch) = self.layout.get_lock_path(my_node, &children) else {
                if at.proven(before)? {
                    return Ok(Waited::Held(own));
                }
                continue;
            };
            if let Some(holder) = self.layout.lock_holder(my_node, &children) {
                self.handle_lock_metadata(
                    rzk,
                    &path::join_znode(&self.parent, &holder),
                    self.handler.as_deref(),
                );
            }
            // Check the deadline before setting any watch.
            if at.bounds.wait.is_past() {
                return Ok(Waited::TimedOut);
            }
            if own.is_none() && !self.layout.is_own_kind(&to_watch) {
                // Behind the other kind: a reaper of our kind would leave the
                // node we wait for in place; watch our own node to learn it at
                // once. (Behind our own kind, a reaper removes us first, newest
                // first, and our predecessor's deletion then wakes us.)
                own = Some(at.watch_node(my_path, &self.shared, &self.zkw)?);
            }
            let watch_path = path::join_znode(&self.parent, &to_watch);
            let round = at.round();
            // A cancel or a deletion of our node just before this round began
            // woke no wait of it: both are flagged before their wake-up, so
            // look once more.
            at.cancelled()?;
            if own.as_ref().is_some_and(|o| o.is_gone()) {
                return Err(lost(my_path));
            }
            // getData, not exists: no watch is left behind when it is gone.
            match rzk.get_data_watch(&watch_path, &self.waiter) {
                Ok(_) => {}
                Err(e) if e.is(ZkError::NoNode) => continue,
                Err(e) => return Err(e),
            }
            // Armed once the watch is set: the listing it sends on the event
            // is newer than the round's watch.
            let armed = self.listing_on_wake.then(|| self.shared.arm(round));
            hook!(self.step_hook, LockStep::Watching, my_path);
            let woken = at.wait(round)?;
            at.cancelled()?;
            hook!(self.step_hook, LockStep::Woken, my_path);
            if !woken {
                return Ok(Waited::TimedOut);
            }
            if armed.is_some() {
                listed = self.shared.listed_for(round);
            }
            drop(armed);
        }
    }

    /// HBase's `handleLockMetadata`: passes `node`'s metadata to `handler`.
    fn handle_lock_metadata(
        &self,
        rzk: &RecoverableZooKeeper,
        node: &str,
        handler: Option<&dyn MetadataHandler>,
    ) -> bool {
        let Some(handler) = handler else {
            return false;
        };
        match rzk.get_data(node, false) {
            Ok((data, _)) => {
                handler.handle_metadata(&data);
                true
            }
            Err(e) => {
                debug!("no metadata from {node}: {e}");
                false
            }
        }
    }

    /// The server's clock now: the ctime of a throwaway ephemeral node under the
    /// lock znode (not a lock child: ignored by lock logic).
    fn server_now(&self) -> Result<i64> {
        let rzk = self.zkw.recoverable_zookeeper();
        let probe = path::join_znode(&self.parent, "reap-clock-");
        let (path, stat) = rzk.create2(
            &probe,
            &[],
            rzk.acl_for(&probe),
            CreateMode::EphemeralSequential,
        )?;
        if let Err(e) = Removal::new(path.as_str(), Guard::Any).run(rzk) {
            warn!("could not remove clock probe {path}: {e}");
        }
        Ok(stat.ctime)
    }
}

impl<K: LockKind> InterProcessLock for ZkInterProcessLockBase<K> {
    /// HBase's `acquire()`: creates this attempt's node and waits for the
    /// nodes ahead of it.
    ///
    /// # Differences from HBase
    /// - A waiter whose own node someone else deletes (a reaper, an operator)
    ///   learns it at its next listing (`LockLost`), not at once: a waiter
    ///   behind a node of its own kind sets no watch on its own node, which
    ///   keeps a contended hand-off at 5 requests (HBase does not watch it
    ///   either; a waiter behind the other kind does watch it, so a reaper of
    ///   its kind cannot strand it).
    /// - The attempt's create and its first listing go in one round trip
    ///   (HBase: two). A listing whose reply is lost counts as the first
    ///   attempt of the listing's retries, as on the sequential path: with
    ///   `RetryConfig::with_max_attempts(0)` both end with `ConnectionLoss`
    ///   (and remove the node).
    fn acquire(&self) -> Result<()> {
        self.try_acquire_within(Bounds::new(None)).map(drop)
    }

    /// Waits at most `timeout` for the nodes ahead of this attempt, as HBase's
    /// `tryAcquire(timeoutMs)`: `try_acquire(Duration::ZERO)` takes a free lock
    /// whenever the server answers. The ZooKeeper calls of the attempt (its
    /// create, each listing, the held node's watch) get a grace past `timeout`
    /// ([`with_call_grace`](Self::with_call_grace), default
    /// [`DEFAULT_CALL_GRACE`]), so the call returns within `timeout` + grace
    /// through any partition, plus up to 250 ms to remove its node when it
    /// fails. A call cut short by that bound makes the attempt a timeout
    /// (`Ok(false)`), not an error.
    fn try_acquire(&self, timeout: Duration) -> Result<bool> {
        self.try_acquire_within(Bounds::with_grace(Some(timeout), self.call_grace))
    }

    /// HBase's `release()`: deletes the lock node at the version it was
    /// created with.
    ///
    /// # Differences from HBase
    /// On `BadVersion` (someone wrote to the node) zklock deletes the node at
    /// any version and reports success; HBase keeps the node and throws
    /// `IllegalStateException`. The node is still this attempt's own
    /// (ephemeral, named with this call's tag), and a release that can never
    /// succeed would keep the lock held until the session ends.
    fn release(&self) -> Result<()> {
        let (lock, watch, _held) = {
            let st = self.state.lock();
            match &*st {
                LockState::Held { lock, watch, held } => (lock.clone(), watch.clone(), *held),
                _ => {
                    return Err(Error::LockNotHeld {
                        lock: self.parent.clone(),
                    })
                }
            }
        };
        // Our own delete must not look like a loss.
        if let Some(w) = &watch {
            w.release();
        }
        let lost = |this: &Self| {
            metric!(lock_hold(kind_label(this.layout.role), &this.parent, _held));
            metric!(lock_lost(
                &lock.path,
                !this.shared.lost.load(Ordering::SeqCst)
            ));
            *this.state.lock() = LockState::Idle;
            Err(Error::LockLost {
                path: lock.path.clone(),
            })
        };
        if self.shared.lost.load(Ordering::SeqCst) {
            // Known lost (expiry, reaping): make sure nothing is left, then say so.
            remove_and_wait(&self.zkw, Attempt::Node(lock.path.clone()));
            return lost(self);
        }
        let rzk = self.zkw.recoverable_zookeeper();
        let deleted = match Removal::new(lock.path.as_str(), Guard::Version(lock.version)).run(rzk)
        {
            // Someone wrote to our node: it is still ours (ephemeral, our tag);
            // delete it at any version rather than fail every release.
            Err(e) if e.is(ZkError::BadVersion) => {
                warn!("lock node {} was written to; deleting it anyway", lock.path);
                Removal::new(lock.path.as_str(), Guard::Any).run(rzk)
            }
            other => other,
        };
        match deleted {
            Ok(false) => lost(self),
            Ok(true) => {
                metric!(lock_hold(kind_label(self.layout.role), &self.parent, _held));
                *self.state.lock() = LockState::Idle;
                debug!("released {}", lock.path);
                Ok(())
            }
            Err(e) if e.is(ZkError::NoNode) || e.is_fatal() => lost(self),
            Err(e) => {
                // Still held as far as we know (e.g. retries spent): let the caller
                // retry the release.
                if let Some(w) = &watch {
                    w.unrelease();
                }
                Err(e)
            }
        }
    }

    fn release_in_background(&self) {
        let lock = {
            let mut st = self.state.lock();
            match std::mem::replace(&mut *st, LockState::Idle) {
                LockState::Held {
                    lock,
                    watch,
                    held: _held,
                } => {
                    metric!(lock_hold(kind_label(self.layout.role), &self.parent, _held));
                    if let Some(w) = watch {
                        w.release();
                    }
                    lock
                }
                other => {
                    *st = other;
                    return;
                }
            }
        };
        debug!("releasing {} in the background", lock.path);
        remove_in_background(&self.zkw, Attempt::Node(lock.path));
    }

    fn reap_expired_locks(&self, expire_after: Duration) -> Result<()> {
        let rzk = self.zkw.recoverable_zookeeper();
        let children = match rzk.get_children(&self.parent, false) {
            Ok(c) => c,
            Err(e) if e.is(ZkError::NoNode) => return Ok(()),
            Err(e) => return Err(e),
        };
        let now = self.server_now()?;
        let cutoff =
            now.saturating_sub(i64::try_from(expire_after.as_millis()).unwrap_or(i64::MAX));
        let mut deferred = None;
        // Newest first: a waiter is always reaped before the node it waits on, so
        // no waiter of a reaped node wakes in the middle and takes the lock.
        for child in self.layout.own_kind(&children).into_iter().rev() {
            let node = path::join_znode(&self.parent, child);
            match rzk.exists(&node, false) {
                Ok(Some(stat))
                    if stat.ctime < cutoff || (expire_after.is_zero() && stat.ctime <= now) =>
                {
                    info!("reaping lock node {node}");
                    match Removal::new(node.as_str(), Guard::Any).run(rzk) {
                        Ok(_removed) => {
                            metric!(lock_reap(
                                kind_label(self.layout.role),
                                &self.parent,
                                _removed
                            ));
                        }
                        Err(e) => {
                            warn!("error reaping {node}: {e}");
                            deferred = Some(e);
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    warn!("error reaping {node}: {e}");
                    deferred = Some(e);
                }
            }
        }
        deferred.map_or(Ok(()), Err)
    }

    fn reap_all_locks(&self) -> Result<()> {
        self.reap_expired_locks(Duration::ZERO)
    }

    fn visit_locks(&self, handler: &dyn MetadataHandler) -> Result<()> {
        let children = match self
            .zkw
            .recoverable_zookeeper()
            .get_children(&self.parent, false)
        {
            Ok(c) => c,
            Err(e) if e.is(ZkError::NoNode) => return Ok(()),
            Err(e) => return Err(e),
        };
        for child in self.layout.own_kind(&children) {
            if self.layout.get_lock_path(child, &children).is_none() {
                info!("lock {} is held by {child}", self.parent);
            }
            self.handle_lock_metadata(
                self.zkw.recoverable_zookeeper(),
                &path::join_znode(&self.parent, child),
                Some(handler),
            );
        }
        Ok(())
    }

    fn is_held(&self) -> bool {
        matches!(*self.state.lock(), LockState::Held { .. })
            && !self.shared.lost.load(Ordering::SeqCst)
            && !self.zkw.state().is_terminal()
    }

    fn acquired_lock(&self) -> Option<AcquiredLock> {
        match &*self.state.lock() {
            LockState::Held { lock, .. } => Some(lock.clone()),
            _ => None,
        }
    }
}

impl<K: LockKind> Drop for ZkInterProcessLockBase<K> {
    fn drop(&mut self) {
        // A held lock whose instance goes away: release it without waiting on
        // the network (a drop during a partition must not block).
        self.release_in_background();
    }
}
