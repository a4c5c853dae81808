//! Inter-process read/write locks: HBase's `InterProcessLock`,
//! `InterProcessReadWriteLock` and `ZKInterProcess{Read,Write,ReadWrite}Lock`,
//! safe under faults, with an RAII guard, a lock-lost signal and a fencing token.
//!
//! # Layout in ZooKeeper (HBase's)
//! A lock is a znode; each attempt creates an ephemeral sequential child
//! `read-<tag>-<sequence>` or `write-<tag>-<sequence>` (the tag unique to the
//! attempt), holding the caller's metadata. Children are ordered by their parsed
//! sequence. A writer holds the lock when no child is lower, else it watches its
//! immediate predecessor; a reader holds it when no `write-` child is lower, else
//! it watches the nearest lower writer. One deletion wakes one waiter (all readers
//! behind a writer wake together), and a writer queued before later readers is
//! served first.
//!
//! # Dialects: joining a Curator or kazoo fleet
//! [`ZkInterProcessMutex`] (an exclusive lock) and
//! [`ZkInterProcessReadWriteLock::with_dialect`] speak Curator's
//! (`InterProcessMutex`, `InterProcessReadWriteLock`) and kazoo's (`Lock`,
//! `ReadLock`, `WriteLock`) layouts beside HBase's, on the same path as those
//! libraries' own clients: the same node names, data, parent kind and watch
//! choice, with every guarantee below kept. A directory holding nodes of
//! another dialect is refused ([`Error::MixedDialect`](crate::Error::MixedDialect)).
//! The layouts are in [`Dialect`].
//!
//! # Fixed where HBase leaks
//! Every exit from `acquire`/`try_acquire` that does not end holding the lock —
//! timeout, error, session loss — deletes the attempt's node. A connection loss
//! while creating the node never yields two nodes nor adopts another thread's
//! (per-attempt tag + `RecoverableZooKeeper`'s sequential rule). `release` of a
//! node that vanished returns [`Error::LockLost`](crate::Error::LockLost) and leaves
//! the instance ready for a new `acquire`. `reap_expired_locks` measures age
//! against the server's clock.
//!
//! # Round trips
//! An attempt sends its create and its first getChildren together: ZooKeeper
//! answers a session's requests in order, so the listing sees the new node, and
//! a free lock is taken in one round trip (an acquire + release cycle: 3
//! requests in two round trips, the protocol's floor; Curator's and HBase's
//! acquire wait for the create's reply before listing). Any failure of that
//! pair falls back to one request at a time with `RecoverableZooKeeper`'s rules
//! for the create: a lost reply finds the node by its tag, never makes two.
//!
//! # Waiting, timeouts, drops and shutdown
//! - A waiter wakes through a per-watch watcher set with its `get_data` on the
//!   node it waits for: a contended hand-off costs 5 requests and 1 notification
//!   (Curator's count), and nothing done to the `ZooKeeperWatcher`'s listener
//!   registry affects it. The watcher sends the woken waiter's listing on the
//!   event itself, so the waiter wakes to the answer. An idle waiter does not wake up at all (no periodic
//!   look at the session): the session's end, `close()` and a cancel wake it
//!   directly, from the thread that ends the session, even while a listener
//!   holds the event thread up.
//! - `try_acquire(timeout)` bounds the waiting for the nodes ahead, as HBase's
//!   `tryAcquire` and kazoo's `acquire(timeout=)`: `try_acquire(Duration::ZERO)`
//!   takes a free lock whenever the server answers. Its ZooKeeper calls get a
//!   grace past the timeout ([`DEFAULT_CALL_GRACE`], see
//!   [`ZkInterProcessLockBase::with_call_grace`]), so a partition cannot stretch
//!   the call past `timeout` + grace (+ up to 250 ms to remove its node).
//! - Dropping a guard or a held instance releases in the background and never
//!   waits on the network; `unlock()`/`release()` are synchronous and return the
//!   error.
//! - A blocked `acquire` ends with [`Error::Cancelled`](crate::Error::Cancelled)
//!   on [`ZkInterProcessLockBase::cancel`] (or a [`LockCanceller`] from another
//!   thread), and with `Closed` when the watcher is closed; either way its node
//!   is removed.
//! - [`InterProcessLock::lock_owned`] returns an [`OwnedLockGuard`] to store and
//!   release elsewhere (HBase's `TableLock` shape).
//!
//! # Examples
//! ```no_run
//! use std::time::Duration;
//! use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
//! use zklock::ZooKeeperWatcher;
//!
//! let zkw = ZooKeeperWatcher::connect("127.0.0.1:2181", "worker", None)?;
//! let rw = ZkInterProcessReadWriteLock::new(&zkw, "/locks/table-1", None)?;
//! let write = rw.write_lock(b"worker-1 compacting");
//! {
//!     let guard = write.lock()?; // released when the guard drops
//!     println!("fencing token {}", guard.fencing_token());
//! }
//! let read = rw.read_lock(b"worker-1 scanning");
//! if let Some(guard) = read.try_lock_for(Duration::from_secs(1))? {
//!     guard.unlock()?; // or drop it
//! }
//! # Ok::<(), zklock::Error>(())
//! ```

/// The [`InterProcessLock`] methods a type that wraps a lock passes on as
/// they are, written once for every wrapper: inside its `impl
/// InterProcessLock`, `forward_lock!(field)` forwards reaping, visiting,
/// `is_held` and `acquired_lock` to the lock in `self.field`, and
/// `forward_lock!(field, acquire_release)` also `acquire`, `try_acquire`,
/// `release` and `release_in_background` (a wrapper that adds nothing to
/// them).
macro_rules! forward_lock {
    ($inner:ident, acquire_release) => {
        /// Curator's `acquire()`, kazoo's `acquire()`: see
        /// [`ZkInterProcessLockBase`](crate::lock::ZkInterProcessLockBase)'s.
        fn acquire(&self) -> $crate::error::Result<()> {
            self.$inner.acquire()
        }

        /// Curator's `acquire(time, unit)`, kazoo's `acquire(timeout=)`: see
        /// [`ZkInterProcessLockBase`](crate::lock::ZkInterProcessLockBase)'s.
        fn try_acquire(&self, timeout: std::time::Duration) -> $crate::error::Result<bool> {
            self.$inner.try_acquire(timeout)
        }

        fn release(&self) -> $crate::error::Result<()> {
            self.$inner.release()
        }

        fn release_in_background(&self) {
            self.$inner.release_in_background();
        }

        $crate::lock::forward_lock!($inner);
    };
    ($inner:ident) => {
        fn reap_expired_locks(
            &self,
            expire_after: std::time::Duration,
        ) -> $crate::error::Result<()> {
            self.$inner.reap_expired_locks(expire_after)
        }

        fn reap_all_locks(&self) -> $crate::error::Result<()> {
            self.$inner.reap_all_locks()
        }

        fn visit_locks(
            &self,
            handler: &dyn $crate::lock::MetadataHandler,
        ) -> $crate::error::Result<()> {
            self.$inner.visit_locks(handler)
        }

        fn is_held(&self) -> bool {
            self.$inner.is_held()
        }

        fn acquired_lock(&self) -> Option<$crate::lock::AcquiredLock> {
            self.$inner.acquired_lock()
        }
    };
}
pub(crate) use forward_lock;

mod base;
mod dialect;
mod either;
mod guarded;
mod kind;
mod multi;
mod mutex;
mod rw;
mod semaphore;
mod step;
mod watch;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use crate::engine::wait::DEFAULT_CALL_GRACE;
pub use base::{LockCanceller, LockStep, ZkInterProcessLockBase};
pub use dialect::{lock_nodes, Dialect, LockNode};
pub use guarded::{guarded_multi, guarded_multi_all};
pub use kind::{LockKind, ReadLockKind, WriteLockKind, READ_LOCK_PREFIX, WRITE_LOCK_PREFIX};
pub use multi::{MultiLock, OrderedLock};
pub use mutex::ZkInterProcessMutex;
pub use rw::ZkInterProcessReadWriteLock;
pub use semaphore::{
    SemaphoreLease, SemaphoreStep, ZkSemaphore, LEASE_PREFIX, SEMAPHORE_LEASES, SEMAPHORE_LOCKS,
};

use crate::error::Result;

/// HBase's `ZKInterProcessReadLock`.
#[doc(alias = "ZKInterProcessReadLock")]
pub type ZkInterProcessReadLock = ZkInterProcessLockBase<ReadLockKind>;

/// HBase's `ZKInterProcessWriteLock`.
#[doc(alias = "ZKInterProcessWriteLock")]
pub type ZkInterProcessWriteLock = ZkInterProcessLockBase<WriteLockKind>;

/// Receives a lock node's metadata: HBase's `InterProcessLock.MetadataHandler`.
///
/// Closures `Fn(&[u8])` implement it.
pub trait MetadataHandler: Send + Sync {
    /// Called with a lock node's metadata (the bytes given to `read_lock` /
    /// `write_lock`).
    fn handle_metadata(&self, metadata: &[u8]);
}

impl<F: Fn(&[u8]) + Send + Sync> MetadataHandler for F {
    fn handle_metadata(&self, metadata: &[u8]) {
        self(metadata)
    }
}

/// A granted lock: HBase's `AcquiredLock { path, version }`, plus the node's
/// creation zxid and sequence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AcquiredLock {
    /// The lock node's path.
    pub path: String,
    /// Its data version; `release` deletes at this version.
    pub version: i32,
    /// The zxid that created the node.
    pub czxid: i64,
    /// Its sequence number within the lock znode.
    pub sequence: i32,
}

impl AcquiredLock {
    /// A number that grows with every grant of the lock (the node's creation
    /// zxid, which ZooKeeper orders globally): hand it to a resource so it can
    /// reject a stale holder (Martin Kleppmann's fencing token). For writes to
    /// ZooKeeper itself, the server can refuse a stale holder directly: see
    /// [`check_op`](AcquiredLock::check_op) and [`guarded_multi`] (guarded
    /// writes, also across session renewal).
    pub fn fencing_token(&self) -> i64 {
        self.czxid
    }
}

/// What happened to a held lock, told to the lock's listener (see
/// [`ZkInterProcessLockBase::with_lock_listener`]). Not in HBase, Curator or kazoo
/// in this form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockEvent {
    /// The connection dropped: the lock is held only while the session lives;
    /// stop acting on it until `Restored`. A read-only server
    /// (`ConnectedReadOnly`, read-only mode) does not end the doubt: only a
    /// read-write server can prove the node.
    InDoubt,
    /// Reconnected within the session: the lock is held again for sure.
    Restored,
    /// The lock is lost (session expired or closed, or its node deleted, e.g.
    /// reaped, or its node can no longer be watched: setting the watch again
    /// after a write to it failed with a permanent error, such as `NoAuth`
    /// once its ACL no longer lets the session read it):
    /// `is_held()` is now false and `release` returns `LockLost`.
    Lost,
}

/// Receives [`LockEvent`]s for a held lock, with the lock node's path. Closures
/// `Fn(&str, LockEvent)` implement it. Called on the client's event thread (or,
/// for a change seen before `acquire` returned, on the acquiring thread), one
/// event at a time in the order they happened: keep it short.
pub trait LockListener: Send + Sync {
    /// The held lock at `path` went through `event`.
    fn lock_event(&self, path: &str, event: LockEvent);
}

impl<F: Fn(&str, LockEvent) + Send + Sync> LockListener for F {
    fn lock_event(&self, path: &str, event: LockEvent) {
        self(path, event)
    }
}

/// HBase's `InterProcessLock`: a lock shared between processes.
///
/// Not reentrant: `acquire` on an instance that holds or is acquiring the lock
/// fails with [`Error::LockBusy`](crate::Error::LockBusy). The RAII forms
/// [`lock`](InterProcessLock::lock) and [`try_lock_for`](InterProcessLock::try_lock_for)
/// return a [`LockGuard`] that releases on drop.
///
/// # Read-only mode
/// With [read-only mode](crate::ZooKeeperWatcherBuilder::with_read_only) on,
/// a read-only server (`ConnectedReadOnly`) proves nothing about a lock: it
/// cannot write a node, its data may lag the quorum's, and it cannot tell
/// whether this session still lives. So a held lock stays **in doubt**
/// ([`LockEvent::InDoubt`], told at the disconnect before it; `Restored` only
/// once a read-write server has served the session again) and is `Lost`
/// only when the session ends or its node goes; an `acquire` is granted only
/// on a listing a read-write server answered: connected read-only it fails
/// with `NotReadOnly` (its node, if it made one, removed at the next
/// read-write server). Every lock kind of this module, and the
/// [semaphore](crate::lock::ZkSemaphore), behaves so.
pub trait InterProcessLock: Send + Sync {
    /// Blocks until the lock is held (or the session ends).
    ///
    /// # Errors
    /// `SessionExpired` / `Closed` when the session ends while waiting;
    /// `LockBusy`; `LockLost` when this attempt's node was reaped while waiting;
    /// ZooKeeper errors after retries. The attempt's node is deleted on every error.
    fn acquire(&self) -> Result<()>;

    /// Waits at most `timeout`; `Ok(false)` when it ran out (the attempt's node is
    /// deleted).
    ///
    /// The `bool` is the whole answer, so the call is `#[must_use]` with a
    /// message saying so. Rust's lint checks only a call whose value is
    /// dropped whole: `lock.try_acquire(t)?;` and `lock.try_acquire(t).unwrap();`
    /// drop the `bool` without a warning. Where that risk matters, use
    /// [`try_lock_for`](InterProcessLock::try_lock_for): its guard is the
    /// proof of the lock, and `None` cannot be mistaken for it.
    ///
    /// ```compile_fail
    /// #![deny(unused_must_use)]
    /// use zklock::lock::{InterProcessLock, ZkInterProcessWriteLock};
    /// # fn f(lock: &ZkInterProcessWriteLock) {
    /// lock.try_acquire(std::time::Duration::from_secs(1)); // refused: the answer is dropped
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](InterProcessLock::acquire).
    #[must_use = "`Ok(false)` means the lock was not acquired (`try_lock_for` returns a guard instead)"]
    fn try_acquire(&self, timeout: Duration) -> Result<bool>;

    /// Releases the lock (deletes the node at its version).
    ///
    /// # Errors
    /// `LockNotHeld` when not held; `LockLost` when the node vanished (session
    /// expiry, reaping) — the instance is then free for a new `acquire`.
    fn release(&self) -> Result<()>;

    /// Gives the lock up without waiting on the network: the instance stops
    /// holding it at once and its node is removed in the background (when the
    /// server answers, after a reconnect, or with the session). What dropping a
    /// guard or a held lock does. Nothing when not held.
    ///
    /// The default calls [`release`](InterProcessLock::release) and logs an error.
    fn release_in_background(&self) {
        if let Err(e) = self.release() {
            log::warn!("releasing a lock failed: {e}");
        }
    }

    /// Deletes this kind's lock nodes created more than `expire_after` ago, by
    /// the server's clock.
    ///
    /// # Errors
    /// ZooKeeper errors (the others are still reaped; the last error is returned).
    fn reap_expired_locks(&self, expire_after: Duration) -> Result<()>;

    /// Deletes every lock node of this kind (HBase's `reapAllLocks`).
    ///
    /// # Errors
    /// As [`reap_expired_locks`](InterProcessLock::reap_expired_locks).
    fn reap_all_locks(&self) -> Result<()>;

    /// Calls `handler` with the metadata of every node of this kind, holders and
    /// waiters.
    ///
    /// # Errors
    /// ZooKeeper errors listing the children.
    fn visit_locks(&self, handler: &dyn MetadataHandler) -> Result<()>;

    /// Whether this instance holds the lock (false once it is known lost).
    fn is_held(&self) -> bool;

    /// The granted lock, while held.
    fn acquired_lock(&self) -> Option<AcquiredLock>;

    /// Every grant this lock is made of, while held: the one of
    /// [`acquired_lock`](InterProcessLock::acquired_lock) for a single lock,
    /// one per member (in the global order) for a [`MultiLock`]. A guard's
    /// `guarded_multi` checks every one of them and its fencing token is the
    /// greatest of theirs.
    ///
    /// The default is [`acquired_lock`](InterProcessLock::acquired_lock) alone.
    fn acquired_locks(&self) -> Option<Vec<AcquiredLock>> {
        self.acquired_lock().map(|a| vec![a])
    }

    /// [`acquire`](InterProcessLock::acquire), returning a guard that releases on drop.
    ///
    /// # Errors
    /// As [`acquire`](InterProcessLock::acquire).
    fn lock(&self) -> Result<LockGuard<'_>>
    where
        Self: Sized,
    {
        self.acquire()?;
        Ok(LockGuard::new(self))
    }

    /// [`try_acquire`](InterProcessLock::try_acquire), returning a guard, or
    /// `None` when `timeout` ran out.
    ///
    /// # Errors
    /// As [`acquire`](InterProcessLock::acquire).
    #[must_use = "`Ok(None)` means the lock was not acquired; dropping the guard releases it"]
    fn try_lock_for(&self, timeout: Duration) -> Result<Option<LockGuard<'_>>>
    where
        Self: Sized,
    {
        Ok(self.try_acquire(timeout)?.then(|| LockGuard::new(self)))
    }

    /// [`acquire`](InterProcessLock::acquire) on a shared instance, returning a
    /// guard that owns its `Arc`: store it (HBase's `TableLock` shape) and
    /// release it from another call site or thread.
    ///
    /// # Errors
    /// As [`acquire`](InterProcessLock::acquire).
    fn lock_owned(self: Arc<Self>) -> Result<OwnedLockGuard>
    where
        Self: Sized + 'static,
    {
        self.acquire()?;
        Ok(OwnedLockGuard::new(self))
    }

    /// [`try_acquire`](InterProcessLock::try_acquire) on a shared instance,
    /// returning an [`OwnedLockGuard`], or `None` when `timeout` ran out.
    ///
    /// # Errors
    /// As [`acquire`](InterProcessLock::acquire).
    #[must_use = "`Ok(None)` means the lock was not acquired; dropping the guard releases it"]
    fn try_lock_owned_for(self: Arc<Self>, timeout: Duration) -> Result<Option<OwnedLockGuard>>
    where
        Self: Sized + 'static,
    {
        Ok(self
            .try_acquire(timeout)?
            .then(|| OwnedLockGuard::new(self)))
    }
}

/// HBase's `InterProcessReadWriteLock`: makes read and write locks on one znode.
pub trait InterProcessReadWriteLock {
    /// The read lock type.
    type ReadLock: InterProcessLock;
    /// The write lock type.
    type WriteLock: InterProcessLock;
    /// A read (shared) lock whose node carries `metadata`.
    fn read_lock(&self, metadata: &[u8]) -> Self::ReadLock;
    /// A write (exclusive) lock whose node carries `metadata`.
    fn write_lock(&self, metadata: &[u8]) -> Self::WriteLock;
}

/// The grant a guard was made for, and whether it was given back.
#[derive(Debug)]
struct Grant {
    /// The lock's [`acquired_lock`](InterProcessLock::acquired_lock).
    acquired: Option<AcquiredLock>,
    /// Its [`acquired_locks`](InterProcessLock::acquired_locks): every grant
    /// the guard covers (one per member of a multi-lock); empty when none.
    all: Vec<AcquiredLock>,
    released: bool,
}

impl Grant {
    fn of(lock: &dyn InterProcessLock) -> Grant {
        Grant {
            acquired: lock.acquired_lock(),
            all: lock.acquired_locks().unwrap_or_default(),
            released: false,
        }
    }

    /// The greatest fencing token of the grants covered (0 when none).
    fn fencing_token(&self) -> i64 {
        self.all
            .iter()
            .map(AcquiredLock::fencing_token)
            .max()
            .unwrap_or(0)
    }

    /// Whether the instance still holds this grant (not a later one of the same
    /// instance): the same nodes, every one of them.
    fn is_current(&self, lock: &dyn InterProcessLock) -> bool {
        let Some(current) = lock.acquired_locks() else {
            return false;
        };
        !current.is_empty()
            && current.len() == self.all.len()
            && current.iter().zip(&self.all).all(|(c, g)| c.path == g.path)
    }

    /// Releases synchronously, only the grant this guard was made for.
    fn unlock(&mut self, lock: &dyn InterProcessLock) -> Result<()> {
        self.released = true;
        if !self.is_current(lock) {
            return Err(crate::Error::LockNotHeld {
                lock: self
                    .acquired
                    .as_ref()
                    .map_or_else(String::new, |a| a.path.clone()),
            });
        }
        lock.release()
    }

    /// On drop: releases in the background, never waiting on the network.
    fn drop_release(&mut self, lock: &dyn InterProcessLock) {
        if !self.released && self.is_current(lock) {
            lock.release_in_background();
        }
    }
}

/// What both guards ([`LockGuard`], [`OwnedLockGuard`]) tell of their grant
/// (`self.grant`) and their lock (`self.lock`), written once.
macro_rules! guard_queries {
    () => {
        /// The fencing token of this grant (see [`AcquiredLock::fencing_token`]);
        /// under a [`MultiLock`], the greatest of its members' (see
        /// [`MultiLock`]'s "Guard and fencing token").
        pub fn fencing_token(&self) -> i64 {
            self.grant.fencing_token()
        }

        /// The granted lock.
        pub fn acquired_lock(&self) -> Option<&AcquiredLock> {
            self.grant.acquired.as_ref()
        }

        /// Every grant this guard covers (see
        /// [`InterProcessLock::acquired_locks`]): one per member of a
        /// [`MultiLock`], each with its own fencing token.
        pub fn acquired_locks(&self) -> &[AcquiredLock] {
            &self.grant.all
        }

        /// Whether the lock is still held (false once known lost).
        pub fn is_held(&self) -> bool {
            self.lock.is_held()
        }
    };
}

/// Holds a lock until dropped (or [`unlock`](LockGuard::unlock)ed).
///
/// Dropping releases in the background
/// ([`release_in_background`](InterProcessLock::release_in_background)): a drop
/// never waits on the network, not during a partition, not while unwinding from
/// a panic. [`unlock`](LockGuard::unlock) releases synchronously and returns the
/// error.
#[must_use = "if unused the lock is released immediately"]
#[clippy::has_significant_drop]
pub struct LockGuard<'a> {
    lock: &'a dyn InterProcessLock,
    grant: Grant,
}

impl<'a> LockGuard<'a> {
    fn new(lock: &'a dyn InterProcessLock) -> LockGuard<'a> {
        LockGuard {
            grant: Grant::of(lock),
            lock,
        }
    }

    guard_queries!();

    /// Releases the lock, returning the error.
    ///
    /// # Errors
    /// As [`InterProcessLock::release`]; `LockNotHeld` when the instance no longer
    /// holds this guard's grant (released through the instance meanwhile).
    pub fn unlock(mut self) -> Result<()> {
        self.grant.unlock(self.lock)
    }
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        self.grant.drop_release(self.lock);
    }
}

impl fmt::Debug for LockGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("acquired", &self.grant.acquired)
            .field("released", &self.grant.released)
            .finish()
    }
}

/// A [`LockGuard`] that owns its lock instance through an `Arc` (see
/// [`InterProcessLock::lock_owned`]): `'static`, so it can be stored in a struct
/// and released from another call site or thread, as HBase's `TableLock` does
/// with `acquire()` and `release()`.
///
/// ```no_run
/// use std::sync::Arc;
/// use zklock::lock::{InterProcessLock, OwnedLockGuard, ZkInterProcessWriteLock};
/// # let zkw = zklock::ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// struct TableLock {
///     lock: Arc<ZkInterProcessWriteLock>,
///     held: Option<OwnedLockGuard>,
/// }
/// let mut t = TableLock {
///     lock: Arc::new(ZkInterProcessWriteLock::new(&zkw, "/locks/t", b"alter", None)?),
///     held: None,
/// };
/// t.held = Some(t.lock.clone().lock_owned()?); // acquire here ...
/// if let Some(g) = t.held.take() {
///     g.unlock()?; // ... release there
/// }
/// # Ok::<(), zklock::Error>(())
/// ```
#[must_use = "if unused the lock is released immediately"]
#[clippy::has_significant_drop]
pub struct OwnedLockGuard {
    lock: Arc<dyn InterProcessLock>,
    grant: Grant,
}

impl OwnedLockGuard {
    fn new(lock: Arc<dyn InterProcessLock>) -> OwnedLockGuard {
        OwnedLockGuard {
            grant: Grant::of(&*lock),
            lock,
        }
    }

    guard_queries!();

    /// The lock instance.
    pub fn lock(&self) -> &Arc<dyn InterProcessLock> {
        &self.lock
    }

    /// Releases the lock, returning the error (see [`LockGuard::unlock`]).
    ///
    /// # Errors
    /// As [`LockGuard::unlock`].
    pub fn unlock(mut self) -> Result<()> {
        let lock = self.lock.clone();
        self.grant.unlock(&*lock)
    }
}

impl Drop for OwnedLockGuard {
    fn drop(&mut self) {
        let lock = self.lock.clone();
        self.grant.drop_release(&*lock);
    }
}

impl fmt::Debug for OwnedLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedLockGuard")
            .field("acquired", &self.grant.acquired)
            .field("released", &self.grant.released)
            .finish()
    }
}
