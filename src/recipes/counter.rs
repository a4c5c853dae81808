//! Shared counters in Curator's byte layouts: [`SharedCount`] (Curator's
//! `SharedCount`: a 4-byte big-endian `int`, compare-and-set on the node's
//! version) and [`DistributedAtomicLong`] (Curator's `DistributedAtomicLong`:
//! an 8-byte big-endian `long`, optimistic retries, optionally promoted to a
//! lock). Curator participants on the same path read and write the same
//! values.
//!
//! Writes go to the node as they are (no HBase metadata prefix, which would
//! break Curator's layout), so a write whose reply is lost cannot be told
//! from another participant's: such a call returns `ConnectionLoss` (the
//! outcome is in doubt) instead of retrying blind. A deliberate difference
//! from Curator, whose retry of a lost `setData` can apply an increment twice.

use std::time::Duration;

use log::debug;

use crate::client::{CreateMode, ZooKeeper};
use crate::error::{Error, Result, ZkError};
use crate::lock::{InterProcessLock, ZkInterProcessWriteLock};
use crate::types::Stat;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// A value with the node version it was read at (Curator's `VersionedValue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionedValue<T> {
    /// The node's data version when read.
    pub version: i32,
    /// The value.
    pub value: T,
}

/// Creates `path` with `data` unless it exists (and its parents).
fn create_if_missing(
    zk: &ZooKeeper,
    zkw: &ZooKeeperWatcher,
    path: &str,
    data: &[u8],
) -> Result<()> {
    let acl = zkw.recoverable_zookeeper().acl_for(path);
    let create = || zk.create(path, data, acl, CreateMode::Persistent);
    match create() {
        Ok(_) => Ok(()),
        Err(e) if e.is(ZkError::NodeExists) => Ok(()),
        Err(e) if e.is(ZkError::NoNode) => {
            if let Some(parent) = zkutil::get_parent(path) {
                zkw.recoverable_zookeeper()
                    .create_with_parents(parent, &[])?;
            }
            match create() {
                Err(e) if e.is(ZkError::NodeExists) => Ok(()),
                other => other.map(drop),
            }
        }
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

/// The outcome of a [`DistributedAtomicLong`] operation (Curator's
/// `AtomicValue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicValue {
    /// Whether the operation was applied.
    pub succeeded: bool,
    /// The value before.
    pub pre_value: i64,
    /// The value after (when it succeeded).
    pub post_value: i64,
    /// Optimistic tries made.
    pub optimistic_tries: u32,
    /// Whether it was applied holding the promotion lock.
    pub promoted: bool,
}

/// A shared `i64` (Curator's `DistributedAtomicLong`: 8 bytes, big-endian; a
/// missing node reads 0 and is created by the first write).
#[derive(Debug, Clone)]
pub struct DistributedAtomicLong {
    zkw: ZooKeeperWatcher,
    path: String,
    tries: u32,
    promoted: Option<(String, Duration)>,
}

impl DistributedAtomicLong {
    /// The long at `path`, with up to `tries` optimistic tries per operation
    /// (Curator's retry policy; at least 1).
    ///
    /// # Errors
    /// `BadArguments` for an invalid path.
    pub fn new(zkw: &ZooKeeperWatcher, path: &str, tries: u32) -> Result<DistributedAtomicLong> {
        crate::path::validate(path)?;
        Ok(DistributedAtomicLong {
            zkw: zkw.clone(),
            path: path.to_string(),
            tries: tries.max(1),
            promoted: None,
        })
    }

    /// When the optimistic tries fail, takes zklock's write lock at
    /// `lock_path` (waiting up to `wait`) and applies the operation holding
    /// it (Curator's `PromotedToLock`).
    ///
    /// # Errors
    /// `BadArguments` for an invalid lock path.
    pub fn promoted_to_lock(mut self, lock_path: &str, wait: Duration) -> Result<Self> {
        crate::path::validate(lock_path)?;
        self.promoted = Some((lock_path.to_string(), wait));
        Ok(self)
    }

    /// The value now (0 when the node is missing).
    ///
    /// # Errors
    /// `BadArguments` when the node's data is not 8 bytes; the session's errors.
    pub fn get(&self) -> Result<i64> {
        self.read().map(|(v, _)| v)
    }

    fn read(&self) -> Result<(i64, Option<Stat>)> {
        match self.zkw.zookeeper().get_data(&self.path, false) {
            Ok((data, stat)) => Ok((decode_long(&self.path, &data)?, Some(stat))),
            Err(e) if e.is(ZkError::NoNode) => Ok((0, None)),
            Err(e) => Err(e),
        }
    }

    /// One compare-and-set try: `Ok(false)` when another write came first.
    fn try_once(&self, stat: Option<Stat>, value: i64) -> Result<bool> {
        let zk = self.zkw.zookeeper();
        let acl = self.zkw.recoverable_zookeeper().acl_for(&self.path);
        let data = value.to_be_bytes();
        let r = match stat {
            Some(stat) => zk.set_data(&self.path, &data, Some(stat.version)).map(drop),
            None => match zk.create(&self.path, &data, acl, CreateMode::Persistent) {
                Err(e) if e.is(ZkError::NoNode) => {
                    if let Some(parent) = zkutil::get_parent(&self.path) {
                        self.zkw
                            .recoverable_zookeeper()
                            .create_with_parents(parent, &[])?;
                    }
                    zk.create(&self.path, &data, acl, CreateMode::Persistent)
                        .map(drop)
                }
                other => other.map(drop),
            },
        };
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.is(ZkError::BadVersion) || e.is(ZkError::NodeExists) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Applies `f` (the new value from the current one; `None` leaves it):
    /// optimistic tries, then the promotion lock when configured.
    fn apply(&self, f: impl Fn(i64) -> Option<i64>) -> Result<AtomicValue> {
        let mut result = AtomicValue {
            succeeded: false,
            pre_value: 0,
            post_value: 0,
            optimistic_tries: 0,
            promoted: false,
        };
        for _ in 0..self.tries {
            result.optimistic_tries += 1;
            if self.attempt(&f, &mut result)? {
                return Ok(result);
            }
        }
        let Some((lock_path, wait)) = &self.promoted else {
            return Ok(result);
        };
        let lock = ZkInterProcessWriteLock::new(&self.zkw, lock_path, &[], None)?;
        if !lock.try_acquire(*wait)? {
            return Ok(result);
        }
        result.promoted = true;
        // Holding the lock, only optimistic writers not promoted compete.
        let outcome = loop {
            match self.attempt(&f, &mut result) {
                Ok(true) => break Ok(result),
                Ok(false) => continue,
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = lock.release() {
            debug!("releasing {lock_path}: {e}");
        }
        outcome
    }

    /// One read and compare-and-set into `result`: `Ok(true)` when done
    /// (applied, or `f` left the value), `Ok(false)` when another write came
    /// first.
    fn attempt(&self, f: &impl Fn(i64) -> Option<i64>, result: &mut AtomicValue) -> Result<bool> {
        let (pre, stat) = self.read()?;
        result.pre_value = pre;
        let Some(new) = f(pre) else {
            return Ok(true);
        };
        if self.try_once(stat, new)? {
            result.succeeded = true;
            result.post_value = new;
            return Ok(true);
        }
        Ok(false)
    }

    /// Adds `delta` (Curator's `add`).
    ///
    /// # Errors
    /// `ConnectionLoss` when a write's reply was lost (the outcome is in
    /// doubt); the session's errors; the lock's errors when promoted.
    pub fn add(&self, delta: i64) -> Result<AtomicValue> {
        self.apply(|v| Some(v.wrapping_add(delta)))
    }

    /// Adds 1.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn increment(&self) -> Result<AtomicValue> {
        self.add(1)
    }

    /// Subtracts 1.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn decrement(&self) -> Result<AtomicValue> {
        self.add(-1)
    }

    /// Sets `new` when the value is `expected` (Curator's `compareAndSet`).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn compare_and_set(&self, expected: i64, new: i64) -> Result<AtomicValue> {
        self.apply(|v| (v == expected).then_some(new))
    }

    /// Sets `value` (Curator's `trySet`: optimistic, then promoted).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn try_set(&self, value: i64) -> Result<AtomicValue> {
        self.apply(|_| Some(value))
    }
}

/// Curator's `bytesToValue`: empty data is 0.
fn decode_long(path: &str, data: &[u8]) -> Result<i64> {
    if data.is_empty() {
        return Ok(0);
    }
    let bytes: [u8; 8] = data.try_into().map_err(|_| {
        Error::BadArguments(format!(
            "{path}: {} bytes, not a DistributedAtomicLong's 8",
            data.len()
        ))
    })?;
    Ok(i64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_is_eight_big_endian_bytes() {
        assert_eq!(decode_long("/x", &[0, 0, 0, 0, 0, 0, 1, 2]).unwrap(), 258);
        assert_eq!(decode_long("/x", &[]).unwrap(), 0);
        assert!(matches!(
            decode_long("/x", &[1, 2]),
            Err(Error::BadArguments(_))
        ));
    }
}
