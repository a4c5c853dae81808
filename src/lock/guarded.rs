//! Guarded writes: a `multi` that the server applies only while a lock (or a
//! semaphore lease) is held (see [`guarded_multi`]).

use super::{AcquiredLock, LockGuard, OwnedLockGuard};
use crate::error::{Error, Result, ZkError};
use crate::recoverable::RecoverableZooKeeper;
use crate::types::{Op, OpResult};
use crate::watcher::ZooKeeperWatcher;

impl AcquiredLock {
    /// The `multi` operation that checks this grant is still held: its node
    /// exists (any version; see [`guarded_multi`]).
    /// Put it in a `multi` of your own, or use [`guarded_multi`].
    pub fn check_op(&self) -> Op {
        Op::check(self.path.clone(), None)
    }
}

/// Sends `ops` in one `multi` after a check that `held`'s node still exists:
/// the server applies them only while the grant is held, all or nothing, so
/// a holder that lost its lock cannot write (what Curator users ask for in
/// CURATOR-689). Returns the results of `ops` (the check's left out).
///
/// # Guard and fencing token
/// The [fencing token](AcquiredLock::fencing_token) lets a *resource* refuse
/// a stale holder; a guarded write lets *ZooKeeper* refuse one: the `multi`
/// starts with a check that the holder's node still exists
/// ([`AcquiredLock::check_op`]), and ZooKeeper applies all of it or nothing.
/// The check is of the node's existence at any version: the node's name is
/// unique to the grant (a per-attempt tag and a sequence; Curator's and
/// kazoo's names are unique too), so it exists exactly while that grant is
/// held, and a write to the node's data (which the lock tolerates) does not
/// void the guard.
///
/// # Session renewal
/// The check is what decides, not the session the write is sent in. A
/// holder whose session was replaced by a renewal has lost its ephemeral
/// node with the old session (the server deletes a session's ephemerals when
/// it expires it, before the client can learn of the expiry), so its guarded
/// write is refused with `LockLost`. Were the old session still alive on the
/// server (a client that gave it up on its own clock), its node would still
/// exist, no other process could hold the lock meanwhile, and the write
/// would still be exclusive: the guard holds either way.
/// [`SemaphoreLease::guarded_multi`](super::SemaphoreLease::guarded_multi)
/// sends in the lease's own session and fails with `SessionExpired` after a
/// renewal; a lock guard's sends in the watcher's current session.
///
/// # Retries
/// The `multi` goes through `RecoverableZooKeeper`, which sends it again
/// after a `ConnectionLoss`: a first attempt that was applied with its reply
/// lost makes the retry apply `ops` again while the lock is still held (or
/// fail on them, e.g. `NodeExists`). Make `ops` conditional (versions) when
/// that matters, as with any retried `multi`.
///
/// # Errors
/// `LockLost` about the node when it is gone (nothing applied); `Multi` when
/// one of `ops` failed (nothing applied; `index` counts in `ops`); session
/// errors; `BadArguments` for empty `ops`.
pub fn guarded_multi(
    rzk: &RecoverableZooKeeper,
    held: &AcquiredLock,
    ops: &[Op],
) -> Result<Vec<OpResult>> {
    if ops.is_empty() {
        return Err(Error::BadArguments(format!(
            "a guarded multi under {} needs at least one operation",
            held.path
        )));
    }
    let mut all = Vec::with_capacity(ops.len() + 1);
    all.push(held.check_op());
    all.extend_from_slice(ops);
    match rzk.multi(&all) {
        Ok(mut results) => {
            results.remove(0);
            Ok(results)
        }
        Err(Error::Multi { index: 0, code, .. })
            if code == ZkError::NoNode || code == ZkError::BadVersion =>
        {
            Err(Error::LockLost {
                path: held.path.clone(),
            })
        }
        Err(Error::Multi {
            index,
            code,
            mut results,
        }) => {
            if !results.is_empty() {
                results.remove(0);
            }
            Err(Error::Multi {
                index: index.saturating_sub(1),
                code,
                results,
            })
        }
        Err(e) => Err(e),
    }
}

/// The grant a guard holds, or `LockLost` when it is known lost.
fn held_grant(
    acquired: Option<&AcquiredLock>,
    lock: &dyn super::InterProcessLock,
) -> Result<AcquiredLock> {
    let acquired = acquired.cloned().unwrap_or_else(|| AcquiredLock {
        path: String::new(),
        version: 0,
        czxid: 0,
        sequence: 0,
    });
    let current = lock.acquired_lock();
    if !lock.is_held() || current.as_ref().map(|a| &a.path) != Some(&acquired.path) {
        return Err(Error::LockLost {
            path: acquired.path,
        });
    }
    Ok(acquired)
}

impl LockGuard<'_> {
    /// [`guarded_multi`] for this guard's grant, sent through `zkw`'s
    /// current session: `ops` are applied only while the lock is held.
    ///
    /// # Errors
    /// As [`guarded_multi`]; `LockLost` without sending when the lock is
    /// already known lost (or released).
    pub fn guarded_multi(&self, zkw: &ZooKeeperWatcher, ops: &[Op]) -> Result<Vec<OpResult>> {
        let held = held_grant(self.grant.acquired.as_ref(), self.lock)?;
        guarded_multi(zkw.recoverable_zookeeper(), &held, ops)
    }
}

impl OwnedLockGuard {
    /// [`guarded_multi`] for this guard's grant (see
    /// [`LockGuard::guarded_multi`]).
    ///
    /// # Errors
    /// As [`LockGuard::guarded_multi`].
    pub fn guarded_multi(&self, zkw: &ZooKeeperWatcher, ops: &[Op]) -> Result<Vec<OpResult>> {
        let held = held_grant(self.grant.acquired.as_ref(), &*self.lock)?;
        guarded_multi(zkw.recoverable_zookeeper(), &held, ops)
    }
}
