//! A multi-lock (Curator's `InterProcessMultiLock`): all of several locks or
//! none, taken in one global order so that two multi-locks over overlapping
//! sets cannot deadlock.

use std::sync::Arc;
use std::time::Duration;

use log::warn;

use super::{AcquiredLock, InterProcessLock, LockKind, MetadataHandler, ZkInterProcessLockBase};
use crate::deadline::Deadline;
use crate::error::{Error, Result};

/// A lock that can take part in a [`MultiLock`]: it names its place in the
/// global order every multi-lock takes its members in.
pub trait OrderedLock: InterProcessLock {
    /// The lock's place in the global order: its lock znode, then its kind.
    /// Two instances contending for the same lock (same znode and kind) have
    /// the same key.
    fn order_key(&self) -> String;
}

impl<K: LockKind> OrderedLock for ZkInterProcessLockBase<K> {
    /// `<lock znode>` `\0` `<kind prefix>`: every lock of one znode side by
    /// side, readers before writers.
    fn order_key(&self) -> String {
        format!("{}\0{}", self.lock_znode(), K::PREFIX)
    }
}

impl OrderedLock for super::ZkInterProcessMutex {
    /// The key of the write lock it is, in its dialect's layout: an HBase
    /// write lock and a mutex of another dialect on one znode have the same
    /// key (they cannot share the znode anyway: `MixedDialect`).
    fn order_key(&self) -> String {
        (**self).order_key()
    }
}

/// All of several locks or none (Curator's `InterProcessMultiLock`).
///
/// The members are taken in ascending [`OrderedLock::order_key`] (lock znode,
/// then kind), whatever order they were given in: two multi-locks over
/// overlapping sets wait for each other's locks in the same order, so neither
/// holds one the other needs while waiting for one it holds (no deadlock;
/// Curator takes them in the order given and can deadlock). An acquire that
/// fails or runs out releases what it took; a release releases every member
/// (the last first) and reports the first error.
///
/// Implements [`InterProcessLock`]: `lock()`, `try_lock_for()` and the owned
/// guards work as for one lock. `try_acquire(timeout)` bounds the whole.
/// Cancel through the members (e.g. each [`ZkInterProcessLockBase::canceller`]):
/// a cancelled member ends the acquire with `Cancelled`, the others released.
///
/// ```no_run
/// use std::sync::Arc;
/// use zklock::lock::{InterProcessLock, MultiLock, ZkInterProcessWriteLock};
/// # let zkw = zklock::ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// let a = Arc::new(ZkInterProcessWriteLock::new(&zkw, "/locks/a", b"", None)?);
/// let b = Arc::new(ZkInterProcessWriteLock::new(&zkw, "/locks/b", b"", None)?);
/// let both = MultiLock::new(vec![b, a])?; // taken as a, then b
/// let guard = both.lock()?;
/// drop(guard); // both released
/// # Ok::<(), zklock::Error>(())
/// ```
#[doc(alias = "InterProcessMultiLock")]
pub struct MultiLock {
    /// In the global order.
    locks: Vec<Arc<dyn OrderedLock>>,
}

impl std::fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field(
                "locks",
                &self.locks.iter().map(|l| l.order_key()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl MultiLock {
    /// A multi-lock over `locks`.
    ///
    /// # Errors
    /// `BadArguments` when `locks` is empty or two of them are the same lock
    /// (same order key: the second would wait for the first forever).
    pub fn new(locks: Vec<Arc<dyn OrderedLock>>) -> Result<MultiLock> {
        if locks.is_empty() {
            return Err(Error::BadArguments(
                "a multi-lock needs at least one lock".into(),
            ));
        }
        let mut locks = locks;
        locks.sort_by_key(|l| l.order_key());
        if let Some(w) = locks
            .windows(2)
            .find(|w| w[0].order_key() == w[1].order_key())
        {
            return Err(Error::BadArguments(format!(
                "a multi-lock holds {} twice",
                w[0].order_key().replace('\0', " ")
            )));
        }
        Ok(MultiLock { locks })
    }

    /// The members, in the order they are taken.
    pub fn locks(&self) -> &[Arc<dyn OrderedLock>] {
        &self.locks
    }

    /// Every member's grant, in the global order, while all are held.
    pub fn acquired_locks(&self) -> Option<Vec<AcquiredLock>> {
        self.locks.iter().map(|l| l.acquired_lock()).collect()
    }

    /// Takes every member in order, each within what is left of `deadline`;
    /// on any failure releases the members taken (the last first).
    fn acquire_all(&self, deadline: Option<Deadline>) -> Result<bool> {
        for (i, lock) in self.locks.iter().enumerate() {
            let got = match deadline {
                None => lock.acquire().map(|()| true),
                Some(d) => lock.try_acquire(d.remaining().unwrap_or(Duration::ZERO)),
            };
            match got {
                Ok(true) => {}
                Ok(false) => {
                    self.release_taken(i);
                    return Ok(false);
                }
                Err(e) => {
                    self.release_taken(i);
                    return Err(e);
                }
            }
        }
        Ok(true)
    }

    /// Releases the first `n` members, the last first; errors are logged.
    fn release_taken(&self, n: usize) {
        for lock in self.locks[..n].iter().rev() {
            if let Err(e) = lock.release() {
                warn!("releasing {} of a multi-lock: {e}", lock.order_key());
            }
        }
    }
}

impl InterProcessLock for MultiLock {
    /// Takes every member, in the global order.
    fn acquire(&self) -> Result<()> {
        self.acquire_all(None).map(drop)
    }

    /// Takes every member within `timeout` overall; `Ok(false)` (none held)
    /// when it ran out.
    fn try_acquire(&self, timeout: Duration) -> Result<bool> {
        self.acquire_all(Some(Deadline::after(timeout)))
    }

    /// Releases every member, the last first, and returns the first error
    /// (the others are released all the same).
    fn release(&self) -> Result<()> {
        let mut first = None;
        for lock in self.locks.iter().rev() {
            if let Err(e) = lock.release() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    fn release_in_background(&self) {
        for lock in self.locks.iter().rev() {
            lock.release_in_background();
        }
    }

    fn reap_expired_locks(&self, expire_after: Duration) -> Result<()> {
        let mut last = None;
        for lock in &self.locks {
            if let Err(e) = lock.reap_expired_locks(expire_after) {
                last = Some(e);
            }
        }
        last.map_or(Ok(()), Err)
    }

    fn reap_all_locks(&self) -> Result<()> {
        self.reap_expired_locks(Duration::ZERO)
    }

    fn visit_locks(&self, handler: &dyn MetadataHandler) -> Result<()> {
        for lock in &self.locks {
            lock.visit_locks(handler)?;
        }
        Ok(())
    }

    /// Whether every member is held.
    fn is_held(&self) -> bool {
        self.locks.iter().all(|l| l.is_held())
    }

    /// The first member's grant (in the global order) while every member is
    /// held; all of them in [`acquired_locks`](MultiLock::acquired_locks).
    fn acquired_lock(&self) -> Option<AcquiredLock> {
        self.acquired_locks()?.into_iter().next()
    }
}
