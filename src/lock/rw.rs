//! `ZkInterProcessReadWriteLock`: HBase's `ZKInterProcessReadWriteLock`.

use std::sync::Arc;

use super::dialect::Dialect;
use super::{
    InterProcessReadWriteLock, LockListener, MetadataHandler, ZkInterProcessReadLock,
    ZkInterProcessWriteLock,
};
use crate::error::Result;
use crate::watcher::ZooKeeperWatcher;

/// HBase's `ZKInterProcessReadWriteLock`: makes read and write lock instances on
/// one lock znode; `handler` sees the holder's metadata while an instance waits.
///
/// ```no_run
/// use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
/// # let zkw = zklock::ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// let rw = ZkInterProcessReadWriteLock::new(&zkw, "/locks/t1", None)?;
/// let w = rw.write_lock(b"me");
/// w.acquire()?;
/// w.release()?;
/// # Ok::<(), zklock::Error>(())
/// ```
#[doc(alias = "ZKInterProcessReadWriteLock")]
#[derive(Clone)]
pub struct ZkInterProcessReadWriteLock {
    zkw: ZooKeeperWatcher,
    znode: String,
    handler: Option<Arc<dyn MetadataHandler>>,
    listener: Option<Arc<dyn LockListener>>,
    dialect: Dialect,
}

impl std::fmt::Debug for ZkInterProcessReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkInterProcessReadWriteLock")
            .field("znode", &self.znode)
            .finish_non_exhaustive()
    }
}

impl ZkInterProcessReadWriteLock {
    /// HBase's `new ZKInterProcessReadWriteLock(zkWatcher, znode, handler)`.
    ///
    /// # Errors
    /// `BadArguments` for an invalid `znode` path.
    pub fn new(
        zkw: &ZooKeeperWatcher,
        znode: &str,
        handler: Option<Arc<dyn MetadataHandler>>,
    ) -> Result<ZkInterProcessReadWriteLock> {
        crate::path::validate(znode)?;
        Ok(ZkInterProcessReadWriteLock {
            zkw: zkw.clone(),
            znode: znode.to_string(),
            handler,
            listener: None,
            dialect: Dialect::HBase,
        })
    }

    /// Every lock made from here tells `listener` what happens while it is held
    /// (see [`ZkInterProcessLockBase::with_lock_listener`](super::ZkInterProcessLockBase::with_lock_listener)).
    #[must_use]
    pub fn with_lock_listener(mut self, listener: impl LockListener + 'static) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// Every lock made from here speaks `dialect` (default HBase): Curator's
    /// `InterProcessReadWriteLock` (`_c_<uuid>-__READ__<seq>` /
    /// `_c_<uuid>-__WRIT__<seq>`) or kazoo's `ReadLock` / `WriteLock`
    /// (`<uuid hex>__rlock__<seq>` / `<uuid hex>__lock__<seq>`); see
    /// [`Dialect`]. A reader watches the nearest writer below it, in every
    /// dialect (Curator's own reader watches the first one: zklock's choice
    /// grants at the same moment and wakes no pile-up of readers).
    ///
    /// ```no_run
    /// use zklock::lock::{Dialect, InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
    /// # let zkw = zklock::ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
    /// let rw = ZkInterProcessReadWriteLock::new(&zkw, "/locks/table", None)?.with_dialect(Dialect::Kazoo);
    /// let read = rw.read_lock(b"worker-1");
    /// read.acquire()?;
    /// read.release()?;
    /// # Ok::<(), zklock::Error>(())
    /// ```
    #[must_use]
    pub fn with_dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// The dialect its locks speak.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The lock znode.
    pub fn znode(&self) -> &str {
        &self.znode
    }

    fn listen<L>(&self, lock: super::ZkInterProcessLockBase<L>) -> super::ZkInterProcessLockBase<L>
    where
        L: super::LockKind,
    {
        let lock = lock.with_dialect(self.dialect);
        match &self.listener {
            Some(l) => lock.with_lock_listener(l.clone()),
            None => lock,
        }
    }
}

impl<T: LockListener + ?Sized> LockListener for Arc<T> {
    fn lock_event(&self, path: &str, event: super::LockEvent) {
        (**self).lock_event(path, event)
    }
}

impl InterProcessReadWriteLock for ZkInterProcessReadWriteLock {
    type ReadLock = ZkInterProcessReadLock;
    type WriteLock = ZkInterProcessWriteLock;

    fn read_lock(&self, metadata: &[u8]) -> ZkInterProcessReadLock {
        // The path was validated in `new`.
        let lock =
            ZkInterProcessReadLock::new(&self.zkw, &self.znode, metadata, self.handler.clone())
                .unwrap_or_else(|_| unreachable!("znode validated in new"));
        self.listen(lock)
    }

    fn write_lock(&self, metadata: &[u8]) -> ZkInterProcessWriteLock {
        let lock =
            ZkInterProcessWriteLock::new(&self.zkw, &self.znode, metadata, self.handler.clone())
                .unwrap_or_else(|_| unreachable!("znode validated in new"));
        self.listen(lock)
    }
}
