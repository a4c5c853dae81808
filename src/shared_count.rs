//! Curator's `SharedCount` (a 4-byte big-endian `int` at a node), below the
//! locks and the recipes: the semaphore reads and watches one as its limit
//! (Curator's `SharedCountReader`), and [`recipes::counter`](crate::recipes::counter)
//! re-exports it beside its other counters. Also the counters' one way to
//! make their node.

use crate::client::{CreateMode, ZooKeeper};
use crate::engine::owned::{with_parents, Parents};
use crate::error::{Error, Result, ZkError};
use crate::watcher::ZooKeeperWatcher;

/// A value with the node version it was read at (Curator's `VersionedValue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionedValue<T> {
    /// The node's data version when read.
    pub version: i32,
    /// The value.
    pub value: T,
}

/// Creates `path` with `data` unless it exists (and its parents).
pub(crate) fn create_if_missing(
    zk: &ZooKeeper,
    zkw: &ZooKeeperWatcher,
    path: &str,
    data: &[u8],
) -> Result<()> {
    let rzk = zkw.recoverable_zookeeper();
    let acl = rzk.acl_for(path);
    match with_parents(rzk, path, Parents::Persistent, || {
        zk.create(path, data, acl, CreateMode::Persistent)
    }) {
        Ok(_) => Ok(()),
        Err(e) if e.is(ZkError::NodeExists) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A shared `i32` (Curator's `SharedCount`: 4 bytes, big-endian).
#[derive(Debug, Clone)]
pub struct SharedCount {
    zkw: ZooKeeperWatcher,
    path: String,
}

impl SharedCount {
    /// The count at `path`, created with `seed` when missing (as Curator's
    /// `start`).
    ///
    /// # Errors
    /// `BadArguments` for an invalid path; the session's errors.
    pub fn new(zkw: &ZooKeeperWatcher, path: &str, seed: i32) -> Result<SharedCount> {
        crate::path::validate(path)?;
        create_if_missing(zkw.zookeeper(), zkw, path, &seed.to_be_bytes())?;
        Ok(SharedCount {
            zkw: zkw.clone(),
            path: path.to_string(),
        })
    }

    /// The count's znode.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The count and the version it was read at.
    ///
    /// # Errors
    /// `NoNode` when the node was deleted; `BadArguments` when its data is
    /// not 4 bytes; the session's errors.
    pub fn get(&self) -> Result<VersionedValue<i32>> {
        let (data, stat) = self.zkw.zookeeper().get_data(&self.path, false)?;
        let bytes: [u8; 4] = data.as_slice().try_into().map_err(|_| {
            Error::BadArguments(format!(
                "{}: {} bytes, not a SharedCount's 4",
                self.path,
                data.len()
            ))
        })?;
        Ok(VersionedValue {
            version: stat.version,
            value: i32::from_be_bytes(bytes),
        })
    }

    /// Sets the count to `value` when the node is still at `previous`'s
    /// version (Curator's `trySetCount`): `Ok(false)` when it changed
    /// meanwhile.
    ///
    /// # Errors
    /// `ConnectionLoss` when the reply was lost (the outcome is in doubt);
    /// the session's errors.
    #[must_use = "`Ok(false)` means the count was not set (it changed meanwhile)"]
    pub fn try_set(&self, previous: VersionedValue<i32>, value: i32) -> Result<bool> {
        match self.zkw.zookeeper().set_data(
            &self.path,
            &value.to_be_bytes(),
            Some(previous.version),
        ) {
            Ok(_) => Ok(true),
            Err(e) if e.is(ZkError::BadVersion) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sets the count to `value` whatever it is (Curator's `setCount`).
    ///
    /// # Errors
    /// The session's errors.
    pub fn set(&self, value: i32) -> Result<()> {
        self.zkw
            .zookeeper()
            .set_data(&self.path, &value.to_be_bytes(), None)
            .map(drop)
    }
}
