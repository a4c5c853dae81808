//! Either kind of lock into one owned guard type, chosen at run time: HBase's
//! `TableLockManager` does `isShared ? lock.readLock(md) : lock.writeLock(md)`.

use std::sync::Arc;
use std::time::Duration;

use super::{
    InterProcessLock, InterProcessReadWriteLock, OwnedLockGuard, ZkInterProcessReadWriteLock,
};
use crate::error::Result;

impl ZkInterProcessReadWriteLock {
    /// HBase's `isShared ? lock.readLock(metadata) : lock.writeLock(metadata)`:
    /// a read lock when `shared`, else a write lock, as one type. Take it with
    /// [`OwnedLockGuard::acquire`] (or call [`InterProcessLock`]'s methods on
    /// it: `acquire`, `try_acquire`, `release`, `reap_*`, `visit_locks`).
    ///
    /// ```no_run
    /// use zklock::lock::{OwnedLockGuard, ZkInterProcessReadWriteLock};
    /// # let zkw = zklock::ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
    /// let rw = ZkInterProcessReadWriteLock::new(&zkw, "/hbase/table-lock/t1", None)?;
    /// let is_shared = true; // decided at run time
    /// let guard: OwnedLockGuard = OwnedLockGuard::acquire(rw.read_or_write_lock(is_shared, b"compaction"))?;
    /// guard.unlock()?;
    /// # Ok::<(), zklock::Error>(())
    /// ```
    pub fn read_or_write_lock(&self, shared: bool, metadata: &[u8]) -> Arc<dyn InterProcessLock> {
        if shared {
            Arc::new(self.read_lock(metadata))
        } else {
            Arc::new(self.write_lock(metadata))
        }
    }

    /// [`read_or_write_lock`](Self::read_or_write_lock) acquired into an
    /// [`OwnedLockGuard`] (blocks until held).
    ///
    /// # Errors
    /// As [`InterProcessLock::acquire`].
    pub fn lock_owned(&self, shared: bool, metadata: &[u8]) -> Result<OwnedLockGuard> {
        OwnedLockGuard::acquire(self.read_or_write_lock(shared, metadata))
    }

    /// [`read_or_write_lock`](Self::read_or_write_lock) with
    /// [`try_acquire`](InterProcessLock::try_acquire): `None` when `timeout` ran
    /// out.
    ///
    /// # Errors
    /// As [`InterProcessLock::acquire`].
    pub fn try_lock_owned_for(
        &self,
        shared: bool,
        metadata: &[u8],
        timeout: Duration,
    ) -> Result<Option<OwnedLockGuard>> {
        OwnedLockGuard::try_acquire(self.read_or_write_lock(shared, metadata), timeout)
    }
}

impl OwnedLockGuard {
    /// [`InterProcessLock::lock_owned`] for any lock, a trait object included
    /// (`lock_owned` needs `Self: Sized`): acquires `lock` and returns the guard
    /// that owns it.
    ///
    /// # Errors
    /// As [`InterProcessLock::acquire`].
    pub fn acquire(lock: Arc<dyn InterProcessLock>) -> Result<OwnedLockGuard> {
        lock.acquire()?;
        Ok(OwnedLockGuard::new(lock))
    }

    /// [`InterProcessLock::try_lock_owned_for`] for any lock: `None` when
    /// `timeout` ran out.
    ///
    /// # Errors
    /// As [`InterProcessLock::acquire`].
    #[must_use = "`Ok(None)` means neither lock was acquired; dropping the guard releases it"]
    pub fn try_acquire(
        lock: Arc<dyn InterProcessLock>,
        timeout: Duration,
    ) -> Result<Option<OwnedLockGuard>> {
        Ok(lock
            .try_acquire(timeout)?
            .then(|| OwnedLockGuard::new(lock)))
    }
}
