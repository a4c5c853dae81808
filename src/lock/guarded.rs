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
    /// Put it in a `multi` of your own, or use [`guarded_multi`] (one per
    /// member of a multi-lock: [`guarded_multi_all`]).
    pub fn check_op(&self) -> Op {
        Op::check(self.path.clone(), None)
    }
}

/// Sends `ops` in one `multi` after a check that `held`'s node still exists:
/// the server applies them only while the grant is held, all or nothing, so
/// a holder that lost its lock cannot write (what Curator users ask for in
/// CURATOR-689). Returns the results of `ops` (the check's left out).
/// [`guarded_multi_all`] with the one grant.
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
    guarded_multi_all(rzk, std::slice::from_ref(held), ops)
}

/// [`guarded_multi`] under several grants at once (a
/// [`MultiLock`](super::MultiLock)'s members, see
/// [`InterProcessLock::acquired_locks`](super::InterProcessLock::acquired_locks)):
/// one `multi` of a [`check_op`](AcquiredLock::check_op) per grant, then
/// `ops`. The server applies `ops` only while every one of the nodes exists,
/// so a holder that lost any member (e.g. with the session that took it)
/// cannot write. Returns the results of `ops` (the checks' left out).
///
/// # Errors
/// `LockLost` about the first node found gone (nothing applied); `Multi`
/// when one of `ops` failed (nothing applied; `index` counts in `ops`);
/// session errors; `BadArguments` for empty `held` or `ops`.
pub fn guarded_multi_all(
    rzk: &RecoverableZooKeeper,
    held: &[AcquiredLock],
    ops: &[Op],
) -> Result<Vec<OpResult>> {
    let Some(first) = held.first() else {
        return Err(Error::BadArguments(
            "a guarded multi needs at least one grant to check".into(),
        ));
    };
    if ops.is_empty() {
        return Err(Error::BadArguments(format!(
            "a guarded multi under {} needs at least one operation",
            first.path
        )));
    }
    let checks = held.len();
    let mut all = Vec::with_capacity(checks + ops.len());
    all.extend(held.iter().map(AcquiredLock::check_op));
    all.extend_from_slice(ops);
    match rzk.multi(&all) {
        Ok(mut results) => {
            results.drain(..checks.min(results.len()));
            Ok(results)
        }
        Err(Error::Multi { index, code, .. })
            if index < checks && (code == ZkError::NoNode || code == ZkError::BadVersion) =>
        {
            Err(Error::LockLost {
                path: held[index].path.clone(),
            })
        }
        Err(Error::Multi {
            index,
            code,
            mut results,
        }) => {
            results.drain(..checks.min(results.len()));
            Err(Error::Multi {
                index: index.saturating_sub(checks),
                code,
                results,
            })
        }
        Err(e) => Err(e),
    }
}

/// Every grant a guard covers, or `LockLost` when the lock is known lost
/// (or no longer holds this guard's grant).
fn held_grants(
    grant: &super::Grant,
    lock: &dyn super::InterProcessLock,
) -> Result<Vec<AcquiredLock>> {
    if !lock.is_held() || !grant.is_current(lock) {
        return Err(Error::LockLost {
            path: grant
                .acquired
                .as_ref()
                .map_or_else(String::new, |a| a.path.clone()),
        });
    }
    Ok(grant.all.clone())
}

impl LockGuard<'_> {
    /// [`guarded_multi`] for this guard's grant, sent through `zkw`'s
    /// current session: `ops` are applied only while the lock is held. Under
    /// a [`MultiLock`](super::MultiLock) the `multi` checks every member's
    /// node ([`guarded_multi_all`]): a holder that lost any member cannot
    /// write.
    ///
    /// # Errors
    /// As [`guarded_multi_all`]; `LockLost` without sending when the lock is
    /// already known lost (or released).
    pub fn guarded_multi(&self, zkw: &ZooKeeperWatcher, ops: &[Op]) -> Result<Vec<OpResult>> {
        let held = held_grants(&self.grant, self.lock)?;
        guarded_multi_all(zkw.recoverable_zookeeper(), &held, ops)
    }
}

impl OwnedLockGuard {
    /// [`guarded_multi`] for this guard's grant (see
    /// [`LockGuard::guarded_multi`]).
    ///
    /// # Errors
    /// As [`LockGuard::guarded_multi`].
    pub fn guarded_multi(&self, zkw: &ZooKeeperWatcher, ops: &[Op]) -> Result<Vec<OpResult>> {
        let held = held_grants(&self.grant, &*self.lock)?;
        guarded_multi_all(zkw.recoverable_zookeeper(), &held, ops)
    }
}
