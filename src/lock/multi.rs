//! A multi-lock (Curator's `InterProcessMultiLock`): all of several locks or
//! none, taken in one global order so that two multi-locks over overlapping
//! sets cannot deadlock.

use std::collections::HashSet;
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

    /// The lock znode whose children this lock's nodes are. A multi-lock
    /// takes at most one lock per znode (see [`MultiLock::new`]).
    fn lock_znode(&self) -> &str;
}

impl<K: LockKind> OrderedLock for ZkInterProcessLockBase<K> {
    /// `<lock znode>` `\0` `<kind prefix>`: every lock of one znode side by
    /// side, readers before writers.
    fn order_key(&self) -> String {
        format!("{}\0{}", self.lock_znode(), K::PREFIX)
    }

    fn lock_znode(&self) -> &str {
        ZkInterProcessLockBase::lock_znode(self)
    }
}

impl OrderedLock for super::ZkInterProcessMutex {
    /// The key of the write lock it is, in its dialect's layout: an HBase
    /// write lock and a mutex of another dialect on one znode have the same
    /// key (they cannot share the znode anyway: `MixedDialect`).
    fn order_key(&self) -> String {
        (**self).order_key()
    }

    fn lock_znode(&self) -> &str {
        ZkInterProcessLockBase::lock_znode(&**self)
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
///
/// # Guard and fencing token
/// A guard's `guarded_multi` (e.g. [`LockGuard::guarded_multi`](super::LockGuard::guarded_multi))
/// checks every member's node in its `multi` (one `check` each,
/// [`guarded_multi_all`](super::guarded_multi_all)): a holder that lost any
/// member — say the session that took it expired while its client was cut
/// off, and another process took that member — cannot write, even while it
/// still believes it holds them all.
///
/// The multi-lock's fencing token (the guard's `fencing_token()`, and
/// [`acquired_lock`](InterProcessLock::acquired_lock)'s) is the greatest
/// creation zxid of its members' nodes: the last member's, since each
/// member's node is created once the members before it are held. It grows
/// with every grant of multi-locks over the same members (a later grant
/// creates its last node only after it holds the first member, which this
/// grant let go of after creating all of its nodes). It does not order a
/// multi-lock against a single member's own grants or against multi-locks
/// over other sets: a resource guarded by one member compares that member's
/// own token, `acquired_locks()[i].fencing_token()`, which grows with every
/// grant of that member whoever takes it.
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
    /// Whether the multi-lock is idle, being acquired or held: one acquire
    /// at a time, and a release from another thread touches the members only
    /// once they are all held.
    state: parking_lot::Mutex<MultiState>,
}

/// See [`MultiLock`]'s `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MultiState {
    Idle,
    Acquiring,
    Held,
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
    /// At most one member per lock znode ([`OrderedLock::lock_znode`]): two
    /// instances of one lock, or the read and the write lock of one znode,
    /// would wait for each other forever (the second member's node queues
    /// behind the first's, which is held until the second is). Curator's
    /// `InterProcessMultiLock` checks nothing: there the thread holding an
    /// `InterProcessReadWriteLock`'s write lock may also take its read lock
    /// (and the other order waits forever); zklock's locks are not reentrant,
    /// so every such pair is refused.
    /// The znodes are compared by path: members on the same path of two
    /// different ensembles (or chroots) are refused too.
    ///
    /// # Errors
    /// `BadArguments` when `locks` is empty or two of them are on the same
    /// lock znode (nothing is created).
    pub fn new(locks: Vec<Arc<dyn OrderedLock>>) -> Result<MultiLock> {
        if locks.is_empty() {
            return Err(Error::BadArguments(
                "a multi-lock needs at least one lock".into(),
            ));
        }
        let mut locks = locks;
        locks.sort_by_key(|l| l.order_key());
        let mut znodes = HashSet::new();
        if let Some(twice) = locks.iter().find(|l| !znodes.insert(l.lock_znode())) {
            return Err(Error::BadArguments(format!(
                "a multi-lock takes two locks of {}: the second would wait for the first forever",
                twice.lock_znode()
            )));
        }
        Ok(MultiLock {
            locks,
            state: parking_lot::Mutex::new(MultiState::Idle),
        })
    }

    /// The members, in the order they are taken.
    pub fn locks(&self) -> &[Arc<dyn OrderedLock>] {
        &self.locks
    }

    /// The multi-lock's name in errors: its members' znodes, in order.
    fn name(&self) -> String {
        let znodes: Vec<&str> = self.locks.iter().map(|l| l.lock_znode()).collect();
        format!("multi-lock [{}]", znodes.join(", "))
    }

    /// Takes every member in order (one acquire of the multi-lock at a time:
    /// a second one is `LockBusy`, as a member's); held only when all are.
    fn acquire_all(&self, deadline: Option<Deadline>) -> Result<bool> {
        {
            let mut state = self.state.lock();
            if *state != MultiState::Idle {
                return Err(Error::LockBusy { lock: self.name() });
            }
            *state = MultiState::Acquiring;
        }
        let got = self.acquire_members(deadline);
        *self.state.lock() = if matches!(got, Ok(true)) {
            MultiState::Held
        } else {
            MultiState::Idle
        };
        got
    }

    /// Takes every member in order, each within what is left of `deadline`;
    /// on any failure releases the members taken (the last first).
    fn acquire_members(&self, deadline: Option<Deadline>) -> Result<bool> {
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
    /// (the others are released all the same). `LockNotHeld`, touching no
    /// member, unless every member is held: a release from another thread
    /// while an acquire is under way never strips the members it took (that
    /// acquire would return holding some of them only).
    fn release(&self) -> Result<()> {
        {
            let mut state = self.state.lock();
            if *state != MultiState::Held {
                return Err(Error::LockNotHeld { lock: self.name() });
            }
            *state = MultiState::Idle;
        }
        let mut first = None;
        for lock in self.locks.iter().rev() {
            if let Err(e) = lock.release() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    fn release_in_background(&self) {
        {
            let mut state = self.state.lock();
            if *state != MultiState::Held {
                return;
            }
            *state = MultiState::Idle;
        }
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

    /// The last member's grant (in the global order) while every member is
    /// held: its node was created last, so its fencing token is the
    /// multi-lock's (see "Guard and fencing token" above); all of them in
    /// [`acquired_locks`](InterProcessLock::acquired_locks).
    fn acquired_lock(&self) -> Option<AcquiredLock> {
        self.acquired_locks()?.pop()
    }

    /// Every member's grant, in the global order, while all are held.
    fn acquired_locks(&self) -> Option<Vec<AcquiredLock>> {
        self.locks.iter().map(|l| l.acquired_lock()).collect()
    }
}
