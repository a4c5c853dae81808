//! `ZkInterProcessMutex`: the exclusive lock in a dialect (Curator's
//! `InterProcessMutex`, kazoo's `Lock`, HBase's write lock).

use std::time::Duration;

use super::dialect::{Dialect, Layout, Role};
use super::{InterProcessLock, LockListener, ZkInterProcessWriteLock};
use crate::error::Result;
use crate::watcher::ZooKeeperWatcher;

/// An exclusive lock in a [`Dialect`]: Curator's `InterProcessMutex`
/// (`<path>/_c_<uuid>-lock-<seq>`, containers as parents), kazoo's `Lock`
/// (`<path>/<uuid hex>__lock__<seq>`, persistent parents) or HBase's write lock
/// (`<path>/write-<tag>-<seq>`). A zklock participant looks on the server as a
/// native one (names, data, parents, the node it watches: see [`Dialect`]) and
/// takes the lock in turn with them, with zklock's guarantees on top: the lost
/// signal ([`with_lock_listener`](Self::with_lock_listener)), the fencing token,
/// owned guards, cancel, the `try_acquire` bound, no node left behind on any
/// exit, the create and first listing in one round trip, and
/// [`Error::MixedDialect`](crate::Error::MixedDialect) in a directory holding
/// another dialect's nodes.
///
/// Not reentrant (Curator's mutex is, per thread): a second `acquire` on a
/// holding instance, or while another thread's `acquire` of it is in
/// progress, fails with `LockBusy` and creates nothing (see "Threads sharing
/// an instance" on [`ZkInterProcessLockBase`](super::ZkInterProcessLockBase)).
///
/// ```no_run
/// use zklock::lock::{Dialect, InterProcessLock, ZkInterProcessMutex};
/// # let zkw = zklock::ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// // The lock a Curator service takes with `new InterProcessMutex(client, "/locks/job")`.
/// let mutex = ZkInterProcessMutex::new(&zkw, "/locks/job", Dialect::Curator, b"")?;
/// let guard = mutex.lock()?;
/// println!("fencing token {}", guard.fencing_token());
/// # Ok::<(), zklock::Error>(())
/// ```
#[derive(Debug)]
pub struct ZkInterProcessMutex {
    lock: ZkInterProcessWriteLock,
}

impl ZkInterProcessMutex {
    /// An exclusive lock on `path` in `dialect`, whose node carries `data`
    /// (Curator: the local address when `data` is empty, as Curator's default
    /// data; kazoo: its identifier; HBase: the lock's metadata).
    ///
    /// # Errors
    /// `BadArguments` for an invalid `path`.
    pub fn new(
        zkw: &ZooKeeperWatcher,
        path: &str,
        dialect: Dialect,
        data: &[u8],
    ) -> Result<ZkInterProcessMutex> {
        let lock = ZkInterProcessWriteLock::new(zkw, path, data, None)?
            .with_layout(Layout::new(dialect, Role::Mutex));
        Ok(ZkInterProcessMutex { lock })
    }

    /// See [`ZkInterProcessLockBase::with_lock_listener`](super::ZkInterProcessLockBase::with_lock_listener).
    #[must_use]
    pub fn with_lock_listener(self, listener: impl LockListener + 'static) -> Self {
        ZkInterProcessMutex {
            lock: self.lock.with_lock_listener(listener),
        }
    }

    /// See [`ZkInterProcessLockBase::with_call_grace`](super::ZkInterProcessLockBase::with_call_grace).
    #[must_use]
    pub fn with_call_grace(self, grace: Duration) -> Self {
        ZkInterProcessMutex {
            lock: self.lock.with_call_grace(grace),
        }
    }

    /// See [`ZkInterProcessLockBase::with_step_hook`](super::ZkInterProcessLockBase::with_step_hook)
    /// (feature `testing`).
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_step_hook(
        self,
        hook: impl Fn(super::LockStep, &str) + Send + Sync + 'static,
    ) -> Self {
        ZkInterProcessMutex {
            lock: self.lock.with_step_hook(hook),
        }
    }
}

impl ZkInterProcessMutex {
    /// See [`ZkInterProcessLockBase::with_sequential_acquire`](super::ZkInterProcessLockBase::with_sequential_acquire)
    /// (feature `testing`).
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_sequential_acquire(self) -> Self {
        ZkInterProcessMutex {
            lock: self.lock.with_sequential_acquire(),
        }
    }
}

/// The lock engine underneath: its accessors (`lock_znode`, `dialect`,
/// `metadata`, `cancel`, `canceller`).
impl std::ops::Deref for ZkInterProcessMutex {
    type Target = ZkInterProcessWriteLock;

    fn deref(&self) -> &ZkInterProcessWriteLock {
        &self.lock
    }
}

impl InterProcessLock for ZkInterProcessMutex {
    super::forward_lock!(lock, acquire_release);
}
