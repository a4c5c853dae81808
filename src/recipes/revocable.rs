//! Revocable shared locks (ZooKeeper recipes page, "Revocable Shared Locks"), on
//! zklock's read/write lock layout.
//!
//! # The protocol (the page's)
//! A holder of a read or write lock watches its own lock node for data changes.
//! A party that wants the lock revoked writes [`REVOKE_DATA`] (`unlock`) into the
//! holder's node ([`attempt_revoke`]). The holder's [`RevocationListener`]
//! decides; when it agrees, the lock is released and the party waiting behind it
//! gets it.
//!
//! zklock differs here:
//! - **Forced revocation**: [`attempt_revoke_with_grace`] deletes the holder's
//!   node when the holder has not released within the grace period (the page
//!   leaves an uncooperative holder in place). The holder is told
//!   [`LockEvent::Lost`] and its `is_held()` turns false, as for any deletion of
//!   a held node.
//! - The nodes are the [lock](crate::lock)'s: `read-<tag>-<sequence>` and
//!   `write-<tag>-<sequence>` under the lock znode, so revocable holders and
//!   plain [`ZkInterProcessReadWriteLock`](crate::lock::ZkInterProcessReadWriteLock)
//!   users share one lock znode. A plain holder ignores the request (its release
//!   deletes at any version after the write), so only forced revocation moves it.
//! - A request written while the node still waits (before the grant) is honoured
//!   at the grant: the grant's first read of the node sees it.
//!
//! # Threads
//! The holder's watch is a per-watch watcher set with an asynchronous
//! `get_data` right after the grant and re-armed asynchronously after each change
//! (after the reconnect when the connection is lost first): never through the
//! `ZooKeeperWatcher`'s listener registry, never a blocking call on the event
//! thread. The [`RevocationListener`] runs on the client's event thread and must
//! not block: it answers [`RevocationReply::Release`] (the lock is then released
//! in the background) or [`RevocationReply::Keep`], and may signal a worker that
//! later calls [`release`](InterProcessLock::release).
//!
//! # Example
//! ```no_run
//! use std::time::Duration;
//! use zklock::lock::InterProcessLock;
//! use zklock::recipes::revocable::{
//!     attempt_revoke_with_grace, lock_holders, RevocableReadLock, RevocationReply,
//! };
//! # let zkw = zklock::ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
//! let reader = RevocableReadLock::new(&zkw, "/locks/t1", b"scanner", None)?
//!     .with_revocation_listener(|path: &str| {
//!         println!("asked to give up {path}");
//!         RevocationReply::Release
//!     });
//! reader.acquire()?;
//! // Elsewhere: ask every holder to let go, forcing it after 5 s.
//! for node in lock_holders(&zkw, "/locks/t1")? {
//!     let outcome = attempt_revoke_with_grace(&zkw, &node, Duration::from_secs(5))?;
//!     println!("{node}: {outcome:?}");
//! }
//! # Ok::<(), zklock::Error>(())
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use log::{debug, info, warn};
use parking_lot::{Mutex, RwLock};

use crate::client::ZooKeeper;
use crate::engine::call::CallSession;
use crate::engine::held::{self, Done, Held, HeldWatch};
use crate::engine::hook::{hook, Hook};
use crate::engine::owned::{Guard, Removal};
use crate::engine::wait::{Bounds, Waiter};
use crate::error::{Error, Result, ZkError};
use crate::lock::{
    AcquiredLock, InterProcessLock, InterProcessReadWriteLock, LockEvent, LockKind, LockListener,
    MetadataHandler, ReadLockKind, WriteLockKind, ZkInterProcessLockBase, DEFAULT_CALL_GRACE,
    READ_LOCK_PREFIX, WRITE_LOCK_PREFIX,
};
use crate::path;
use crate::recoverable::RecoverableZooKeeper;
use crate::types::{EventType, Stat, WatchedEvent, Watcher};
use crate::watcher::{WeakZooKeeperWatcher, ZooKeeperWatcher};

/// Revocable Shared Locks: the data a revoker writes into a holder's node to
/// ask for the lock (`unlock`, the page's word).
///
/// [`attempt_revoke`] writes it through `RecoverableZooKeeper`, so the node
/// holds it behind HBase's metadata prefix; a holder accepts it with or without
/// the prefix (a bare `unlock` from a revoker following the page).
pub use super::layout::REVOKE_DATA;

/// Revocable Shared Locks: a holder's answer to a revocation request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RevocationReply {
    /// Give the lock up now: it is released in the background (its node deleted
    /// without waiting on the network), and the instance no longer holds it.
    Release,
    /// Keep the lock (for now). The holder may release later; a revoker with a
    /// grace period deletes the node once it runs out.
    Keep,
}

/// Revocable Shared Locks: the holder's revocation callback, told when someone
/// writes [`REVOKE_DATA`] into the held lock's node. Closures
/// `Fn(&str) -> RevocationReply` implement it.
///
/// zklock differs here: the page has the holder release inside its callback;
/// the callback runs on the client's event thread, which must never block, so
/// it answers instead, and zklock releases in the background on
/// [`RevocationReply::Release`].
pub trait RevocationListener: Send + Sync {
    /// Revocable Shared Locks: someone asked for the lock held at `path`.
    /// Called on the client's event thread (or, for a request already written
    /// at the grant, possibly before `acquire` returned): keep it short, never
    /// block, never call ZooKeeper synchronously here.
    fn revocation_requested(&self, path: &str) -> RevocationReply;
}

impl<F: Fn(&str) -> RevocationReply + Send + Sync> RevocationListener for F {
    fn revocation_requested(&self, path: &str) -> RevocationReply {
        self(path)
    }
}

/// What a lock instance shares with its grant watches: no `ZooKeeperWatcher`,
/// no lock (a watcher in the client's table must not keep either alive).
#[derive(Default)]
struct RevocationState {
    listener: RwLock<Option<Arc<dyn RevocationListener>>>,
    auto_release: AtomicBool,
    lock_listener: RwLock<Option<Arc<dyn LockListener>>>,
    /// The watch of the current grant; taken by whoever ends the grant.
    grant: Mutex<Option<Arc<GrantWatch>>>,
}

/// Forwards the inner lock's events to the user's lock listener. Always set on
/// the inner lock, so that it watches its held node and tells a deletion
/// (forced revocation) as `Lost`.
struct Forward(Arc<RevocationState>);

impl LockListener for Forward {
    fn lock_event(&self, path: &str, event: LockEvent) {
        if event == LockEvent::Lost {
            if let Some(w) = &*self.0.grant.lock() {
                if w.path == path {
                    w.active.store(false, Ordering::SeqCst);
                }
            }
        }
        let l = self.0.lock_listener.read().clone();
        if let Some(l) = l {
            l.lock_event(path, event);
        }
    }
}

/// The revocation watch of one grant: a per-watch data watch on the held node.
struct GrantWatch {
    path: String,
    /// Cleared when the grant ends (released, revoked, lost): later events are
    /// ignored.
    active: AtomicBool,
    /// A request came for this grant.
    requested: AtomicBool,
    /// Weak: the lock's slot holds this watch.
    shared: Weak<RevocationState>,
    lock: Weak<dyn InterProcessLock>,
    zkw: WeakZooKeeperWatcher,
    me: Weak<GrantWatch>,
}

impl GrantWatch {
    /// Reads the node and sets the data watch, without blocking: the answer
    /// comes back on the event thread. A request written before the read is in
    /// the data; one written after fires the watch. The engine's one held
    /// watch ([`held::arm`]): after a lost connection, armed again once it is
    /// back.
    fn arm(&self) {
        if !self.active.load(Ordering::SeqCst) {
            return;
        }
        if let Some(me) = self.me.upgrade() {
            held::arm(&me);
        }
    }

    /// A request for this grant: ask the listener, release when it (or
    /// auto-release) agrees.
    fn requested(&self) {
        if !self.active.load(Ordering::SeqCst) {
            return;
        }
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        self.requested.store(true, Ordering::SeqCst);
        info!("revocation of {} requested", self.path);
        let listener = shared.listener.read().clone();
        let reply = listener.map_or(RevocationReply::Keep, |l| {
            l.revocation_requested(&self.path)
        });
        if reply == RevocationReply::Release || shared.auto_release.load(Ordering::SeqCst) {
            self.release_lock(&shared);
        }
    }

    /// Releases the grant in the background, if it is still the current one.
    /// Holds the grant slot meanwhile, so a concurrent release + acquire of the
    /// same instance cannot have its new grant released instead.
    fn release_lock(&self, shared: &RevocationState) {
        let mut slot = shared.grant.lock();
        let current = slot
            .as_ref()
            .is_some_and(|w| std::ptr::eq(Arc::as_ptr(w), self));
        if !current || !self.active.swap(false, Ordering::SeqCst) {
            return;
        }
        *slot = None;
        let Some(lock) = self.lock.upgrade() else {
            return;
        };
        if lock.acquired_lock().is_some_and(|a| a.path == self.path) {
            info!("releasing {} on revocation", self.path);
            // Non-blocking: the node is deleted asynchronously.
            lock.release_in_background();
        }
        drop(slot);
    }
}

/// The grant's revocation watch: a data read of the held node; its reactions
/// are the revocation's.
impl Held for GrantWatch {
    type Context = ();

    fn watcher(&self) -> &WeakZooKeeperWatcher {
        &self.zkw
    }

    fn path(&self) -> &str {
        &self.path
    }

    fn resend(self: &Arc<Self>) {
        held::arm(self);
    }

    /// Gone: the lock tells Lost (or it was our own release).
    fn on_gone(&self, (): ()) {
        self.active.store(false, Ordering::SeqCst);
    }

    /// The session's end (the lock tells Lost), or a permanent error (a
    /// `NoAuth`: the node's ACL no longer lets this session read it): the
    /// revocation watch ends, logged; the lock stays held, as the lock's
    /// own permanent errors leave it (no request is heard from then on).
    fn on_ended(&self, e: &Error, (): ()) {
        if !self.active.swap(false, Ordering::SeqCst) || e.is_fatal() {
            return;
        }
        warn!(
            "revocation watch on {}: cannot be set again, requests are no longer heard: {e}",
            self.path
        );
    }
}

impl HeldWatch for GrantWatch {
    type Answer = (Vec<u8>, Stat);

    fn context(&self) {}

    fn request(self: &Arc<Self>, zk: &ZooKeeper, done: Done<(Vec<u8>, Stat)>) {
        // A grant that ended meanwhile (also before a re-arm after a
        // reconnect) watches no more.
        if !self.active.load(Ordering::SeqCst) {
            return;
        }
        let watcher: Arc<dyn Watcher> = self.clone();
        debug!("watching {} for revocation requests", self.path);
        zk.get_data_async(&self.path, Some(watcher), done);
    }

    fn on_answer(&self, (data, stat): (Vec<u8>, Stat), (): ()) {
        if is_request(&data, &stat) {
            self.requested();
        }
    }
}

impl Watcher for GrantWatch {
    fn process(&self, event: WatchedEvent) {
        debug!("revocation watch on {}: {event:?}", self.path);
        match event.event_type {
            EventType::NodeDataChanged => self.arm(),
            EventType::NodeDeleted => self.active.store(false, Ordering::SeqCst),
            _ => {}
        }
    }
}

fn is_request(data: &[u8], stat: &Stat) -> bool {
    // Version 0 is the node as created: its metadata, not a request. The
    // revoker writes through `RecoverableZooKeeper` (HBase's metadata prefix);
    // a bare `unlock` (a Java revoker following the page) counts too.
    stat.version > 0 && crate::metadata::remove_metadata(data) == REVOKE_DATA
}

/// Revocable Shared Locks: a read or write lock (by `K`) whose holder can be
/// asked to give it up.
///
/// A [`ZkInterProcessLockBase<K>`] (same nodes, same waiting, same guarantees:
/// no orphan node on any exit, drops never wait on the network) plus a data
/// watch on the held node. Use the aliases [`RevocableReadLock`] and
/// [`RevocableWriteLock`], or [`RevocableReadWriteLock`].
///
/// Without a listener and without [auto-release](Self::with_auto_release), a
/// request is only recorded ([`is_revocation_requested`](Self::is_revocation_requested)):
/// the holder keeps the lock until it releases or a revoker forces it.
///
/// zklock differs here: the inner lock always keeps a watch on its held node (a
/// lock listener is set on it), so a forced revocation is told as
/// [`LockEvent::Lost`] to [`with_lock_listener`](Self::with_lock_listener) and
/// `is_held()` turns false at once.
///
/// # Read-only mode
/// As the locks' (see [`InterProcessLock`]):
/// in doubt while only a read-only server serves the session, never
/// granted on a read-only server's listing.
pub struct RevocableLock<K: LockKind> {
    zkw: ZooKeeperWatcher,
    lock: Arc<ZkInterProcessLockBase<K>>,
    shared: Arc<RevocationState>,
}

/// Revocable Shared Locks: a revocable read (shared) lock.
pub type RevocableReadLock = RevocableLock<ReadLockKind>;

/// Revocable Shared Locks: a revocable write (exclusive) lock.
pub type RevocableWriteLock = RevocableLock<WriteLockKind>;

impl<K: LockKind> std::fmt::Debug for RevocableLock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevocableLock")
            .field("lock", &self.lock)
            .field(
                "auto_release",
                &self.shared.auto_release.load(Ordering::SeqCst),
            )
            .finish_non_exhaustive()
    }
}

impl<K: LockKind> RevocableLock<K> {
    /// Revocable Shared Locks: a lock instance on the lock znode `znode` whose
    /// node carries `metadata` (see [`ZkInterProcessLockBase::new`]).
    ///
    /// # Errors
    /// `BadArguments` for an invalid `znode` path.
    pub fn new(
        zkw: &ZooKeeperWatcher,
        znode: &str,
        metadata: &[u8],
        handler: Option<Arc<dyn MetadataHandler>>,
    ) -> Result<Self> {
        let shared = Arc::new(RevocationState::default());
        let lock = ZkInterProcessLockBase::<K>::new(zkw, znode, metadata, handler)?
            .with_lock_listener(Forward(shared.clone()));
        Ok(RevocableLock {
            zkw: zkw.clone(),
            lock: Arc::new(lock),
            shared,
        })
    }

    /// Revocable Shared Locks: the holder's revocation callback (see
    /// [`RevocationListener`]).
    #[must_use]
    pub fn with_revocation_listener(self, listener: impl RevocationListener + 'static) -> Self {
        *self.shared.listener.write() = Some(Arc::new(listener));
        self
    }

    /// Revocable Shared Locks: release at once on every request, whatever the
    /// listener answers (default `false`). The listener, if any, is still told.
    #[must_use]
    pub fn with_auto_release(self, auto_release: bool) -> Self {
        self.shared
            .auto_release
            .store(auto_release, Ordering::SeqCst);
        self
    }

    /// Revocable Shared Locks: tells `listener` what happens to the held lock
    /// (see [`ZkInterProcessLockBase::with_lock_listener`]); a forced revocation
    /// is [`LockEvent::Lost`].
    #[must_use]
    pub fn with_lock_listener(self, listener: impl LockListener + 'static) -> Self {
        *self.shared.lock_listener.write() = Some(Arc::new(listener));
        self
    }

    /// Revocable Shared Locks: whether someone asked for the current grant
    /// (false when not held: also once the grant ended by a forced
    /// revocation, the session's end or a reaper, before `release()`). For a
    /// holder that answers [`RevocationReply::Keep`] and lets a worker decide.
    pub fn is_revocation_requested(&self) -> bool {
        let requested =
            self.shared.grant.lock().as_ref().is_some_and(|w| {
                w.active.load(Ordering::SeqCst) && w.requested.load(Ordering::SeqCst)
            });
        requested && self.lock.is_held()
    }

    /// Revocable Shared Locks: the lock znode.
    pub fn lock_znode(&self) -> &str {
        self.lock.lock_znode()
    }

    /// Revocable Shared Locks: the inner lock instance's cancel (see
    /// [`ZkInterProcessLockBase::cancel`]).
    pub fn cancel(&self) {
        self.lock.cancel();
    }

    /// After a grant: watch the held node for requests.
    fn watch_grant(&self) {
        let Some(AcquiredLock { path, .. }) = self.lock.acquired_lock() else {
            return;
        };
        let inner: Arc<dyn InterProcessLock> = self.lock.clone();
        let w = Arc::new_cyclic(|me| GrantWatch {
            path,
            active: AtomicBool::new(true),
            requested: AtomicBool::new(false),
            shared: Arc::downgrade(&self.shared),
            lock: Arc::downgrade(&inner),
            zkw: self.zkw.downgrade(),
            me: me.clone(),
        });
        *self.shared.grant.lock() = Some(w.clone());
        w.arm();
    }

    /// Ends the current grant's watch (our own release).
    fn end_grant(&self) {
        if let Some(w) = self.shared.grant.lock().take() {
            w.active.store(false, Ordering::SeqCst);
        }
    }
}

impl<K: LockKind> InterProcessLock for RevocableLock<K> {
    fn acquire(&self) -> Result<()> {
        self.lock.acquire()?;
        self.watch_grant();
        Ok(())
    }

    fn try_acquire(&self, timeout: Duration) -> Result<bool> {
        let held = self.lock.try_acquire(timeout)?;
        if held {
            self.watch_grant();
        }
        Ok(held)
    }

    fn release(&self) -> Result<()> {
        self.end_grant();
        self.lock.release()
    }

    fn release_in_background(&self) {
        self.end_grant();
        self.lock.release_in_background();
    }

    crate::lock::forward_lock!(lock);
}

impl<K: LockKind> Drop for RevocableLock<K> {
    fn drop(&mut self) {
        // Never waits on the network; the inner lock's drop does the same if a
        // watch still holds it for a moment.
        self.release_in_background();
    }
}

/// Revocable Shared Locks: makes revocable read and write locks on one lock
/// znode (the counterpart of
/// [`ZkInterProcessReadWriteLock`](crate::lock::ZkInterProcessReadWriteLock),
/// whose users it shares the znode with).
///
/// # Read-only mode
/// As the locks' (see [`InterProcessLock`]):
/// in doubt while only a read-only server serves the session, never
/// granted on a read-only server's listing.
#[derive(Clone)]
pub struct RevocableReadWriteLock {
    zkw: ZooKeeperWatcher,
    znode: String,
    handler: Option<Arc<dyn MetadataHandler>>,
}

impl std::fmt::Debug for RevocableReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevocableReadWriteLock")
            .field("znode", &self.znode)
            .finish_non_exhaustive()
    }
}

impl RevocableReadWriteLock {
    /// Revocable Shared Locks: read and write locks on `znode`; `handler` sees
    /// the holder's metadata while an instance waits.
    ///
    /// # Errors
    /// `BadArguments` for an invalid `znode` path.
    pub fn new(
        zkw: &ZooKeeperWatcher,
        znode: &str,
        handler: Option<Arc<dyn MetadataHandler>>,
    ) -> Result<Self> {
        path::validate(znode)?;
        Ok(RevocableReadWriteLock {
            zkw: zkw.clone(),
            znode: znode.to_string(),
            handler,
        })
    }

    /// Revocable Shared Locks: the lock znode.
    pub fn znode(&self) -> &str {
        &self.znode
    }
}

impl InterProcessReadWriteLock for RevocableReadWriteLock {
    type ReadLock = RevocableReadLock;
    type WriteLock = RevocableWriteLock;

    fn read_lock(&self, metadata: &[u8]) -> RevocableReadLock {
        RevocableLock::new(&self.zkw, &self.znode, metadata, self.handler.clone())
            .unwrap_or_else(|_| unreachable!("znode validated in new"))
    }

    fn write_lock(&self, metadata: &[u8]) -> RevocableWriteLock {
        RevocableLock::new(&self.zkw, &self.znode, metadata, self.handler.clone())
            .unwrap_or_else(|_| unreachable!("znode validated in new"))
    }
}

/// Revocable Shared Locks: how a revocation with a grace period ended.
///
/// Decided by two points of the call, never by how the holder's release and
/// other revokers' requests interleave with this one's request: the call's
/// first read of the node (absent: [`AlreadyGone`](Self::AlreadyGone)) and,
/// once the grace ran out, its own delete (it removed the node:
/// [`Forced`](Self::Forced)). A node seen at the first read and gone
/// otherwise is [`Released`](Self::Released).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RevokeOutcome {
    /// The node did not exist when the call first read it: nothing to revoke.
    AlreadyGone,
    /// The node existed when the call first read it, and the holder released
    /// it within the grace period: because of this request, another
    /// revoker's, or of its own accord (also when that came before this
    /// call's request was written: the request then finds no node).
    Released,
    /// The holder kept the lock past the grace period: its node was deleted
    /// by this call (the holder is told it lost the lock).
    Forced,
}

/// A step of [`attempt_revoke_with_grace`], told to a test hook (see
/// [`attempt_revoke_with_grace_hooked`]) with the node's path: how tests put
/// another revoker's request or the holder's release at an exact point of
/// the revocation instead of hoping for a race (feature `testing`).
#[cfg_attr(not(feature = "testing"), doc(hidden))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RevokeStep {
    /// The node was read and exists (the outcome is no longer
    /// `AlreadyGone`); the request is written next.
    Read,
    /// The request was written; the wait for the holder starts.
    Requested,
}

/// Revocable Shared Locks: asks the holder of the lock node `node` to release
/// it, by writing [`REVOKE_DATA`] into it (Curator's `Revoker.attemptRevoke`).
/// `Ok(false)` when the node does not exist (already released or never there).
///
/// Returns once the request is written; whether the holder agrees is up to it
/// (see [`attempt_revoke_with_grace`] to force it). Curator's `attemptRevoke`
/// ignores a missing node and tells nothing; `Ok(false)` tells it, but only
/// about the write: a write whose reply was lost and whose retry found the node
/// gone (the holder released it on this very request) is `Ok(false)` too.
/// [`attempt_revoke_with_grace`] tells a holder's release apart from a node
/// that was never there.
///
/// # Errors
/// `BadArguments` for an invalid path; ZooKeeper errors after retries
/// (`NoAuth`, `SessionExpired`, ...).
#[must_use = "`Ok(false)` means no request was written (no such node)"]
pub fn attempt_revoke(zkw: &ZooKeeperWatcher, node: &str) -> Result<bool> {
    path::validate(node)?;
    request(zkw.recoverable_zookeeper(), node)
}

/// Writes the request: `Ok(false)` when the node is gone.
fn request(rzk: &RecoverableZooKeeper, node: &str) -> Result<bool> {
    match rzk.set_data(node, REVOKE_DATA, None) {
        Ok(_) => {
            info!("asked the holder of {node} to release it");
            Ok(true)
        }
        Err(e) if e.is(ZkError::NoNode) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Revocable Shared Locks, with forced revocation: [`attempt_revoke`], then
/// waits up to `grace` for the holder to release `node`; when it has not,
/// deletes the node (any version).
///
/// zklock differs here: the page has no forced revocation. A forced holder's
/// lock is gone at once for everyone else (the next waiter gets it); a zklock
/// holder is told [`LockEvent::Lost`] and `is_held()` turns false, but a holder
/// that does not look may still act on the lock for a moment: hand the lock's
/// [fencing token](AcquiredLock::fencing_token) to the resource it guards.
///
/// The outcome is decided as [`RevokeOutcome`] says: `AlreadyGone` only when
/// the first read finds no node. Several revokers of one node each get
/// `Released` from a cooperative holder, whichever request it heard: a
/// revoker whose request finds the node already released by another's is no
/// less answered (before, it reported `AlreadyGone`, by the timing of its
/// write against the holder's release).
///
/// The wait is a per-watch data watch on `node` (`getData`, woken by its
/// deletion); the ZooKeeper calls of the revocation are bounded by `grace` +
/// [`DEFAULT_CALL_GRACE`]. It needs `READ` on `node` on every server
/// version (servers from 3.7 on do not deliver a node's events to a session
/// without `READ` on it, so the wait would last the whole grace): `node` is
/// read first, and a revoker that may not read it fails at once, before the
/// request is written. Deliberate difference from Curator's `Revoker`,
/// which only writes the request: one `getData` more.
///
/// # Errors
/// As [`attempt_revoke`]; [`Error::NoReadPermission`]
/// (`getData`) when this session may not read `node` (nothing written);
/// `SessionExpired`/`Closed` when the revoker's session ends while waiting.
pub fn attempt_revoke_with_grace(
    zkw: &ZooKeeperWatcher,
    node: &str,
    grace: Duration,
) -> Result<RevokeOutcome> {
    revoke_with_grace(zkw, node, grace, &Hook::default())
}

/// [`attempt_revoke_with_grace`], calling `hook` at each [`RevokeStep`] on
/// the calling thread (feature `testing`).
///
/// # Errors
/// As [`attempt_revoke_with_grace`].
#[cfg(feature = "testing")]
pub fn attempt_revoke_with_grace_hooked(
    zkw: &ZooKeeperWatcher,
    node: &str,
    grace: Duration,
    hook: impl Fn(RevokeStep, &str) + Send + Sync + 'static,
) -> Result<RevokeOutcome> {
    let step_hook = Hook::default();
    step_hook.set(hook);
    revoke_with_grace(zkw, node, grace, &step_hook)
}

fn revoke_with_grace(
    zkw: &ZooKeeperWatcher,
    node: &str,
    grace: Duration,
    step_hook: &Hook<RevokeStep>,
) -> Result<RevokeOutcome> {
    path::validate(node)?;
    let bounds = Bounds::with_grace(Some(grace), DEFAULT_CALL_GRACE);
    let call = CallSession::begin(zkw)?;
    let rzk = call.rzk().with_deadline(bounds.calls);
    // The one read that may make it `AlreadyGone`. It also checks `READ` on
    // the node, which the wait needs (see above): without it, fail at once,
    // before the request is written.
    match rzk.get_data(node, false) {
        Err(e) if e.is(ZkError::NoNode) => return Ok(RevokeOutcome::AlreadyGone),
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    hook!(step_hook, RevokeStep::Read, node);
    // The node was there: from here on, gone without this call's delete is
    // `Released` (its holder let go since the read: on another revoker's
    // request, on its own, or on ours with the reply lost and the retry
    // finding no node).
    if !request(&rzk, node)? {
        debug!("{node} released before this request was written");
        return Ok(RevokeOutcome::Released);
    }
    hook!(step_hook, RevokeStep::Requested, node);
    let waiter = Waiter::default();
    loop {
        call.check()?;
        let round = waiter.round();
        match rzk.get_data_watch(node, waiter.watcher()) {
            Err(e) if e.is(ZkError::NoNode) => return Ok(RevokeOutcome::Released),
            Ok(_) => {}
            Err(e) if e.is_retryable() && bounds.wait.is_past() => break,
            Err(e) => return Err(e),
        }
        if !waiter.wait(&call.pinned(), round, bounds.wait, node)? {
            break;
        }
    }
    call.check()?;
    if Removal::new(node, Guard::Any).run(call.rzk())? {
        warn!("{node} not released within {grace:?}: deleted it");
        Ok(RevokeOutcome::Forced)
    } else {
        Ok(RevokeOutcome::Released)
    }
}

/// Revocable Shared Locks: the paths of the nodes holding the lock on `znode`
/// now (the readers with no writer below them, or the first writer), the nodes
/// a party waiting for the lock would revoke. Empty when the lock is free or
/// `znode` does not exist.
///
/// # Errors
/// `BadArguments` for an invalid path; ZooKeeper errors listing the children.
pub fn lock_holders(zkw: &ZooKeeperWatcher, znode: &str) -> Result<Vec<String>> {
    path::validate(znode)?;
    let children = match zkw.recoverable_zookeeper().get_children(znode, false) {
        Ok(c) => c,
        Err(e) if e.is(ZkError::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let has_sequence = |name: &str| {
        crate::sequence::tagged_sequence(name, WRITE_LOCK_PREFIX)
            .or_else(|| crate::sequence::tagged_sequence(name, READ_LOCK_PREFIX))
            .or_else(|| crate::sequence::sequence_of(name))
            .is_some()
    };
    let holders = children
        .iter()
        .filter(|c| has_sequence(c))
        .filter(|c| {
            if c.starts_with(WRITE_LOCK_PREFIX) {
                WriteLockKind::get_lock_path(c, &children).is_none()
            } else if c.starts_with(READ_LOCK_PREFIX) {
                ReadLockKind::get_lock_path(c, &children).is_none()
            } else {
                false
            }
        })
        .map(|c| path::join_znode(znode, c))
        .collect();
    Ok(holders)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_written_unlock_is_a_request() {
        let written = Stat {
            version: 1,
            ..Stat::default()
        };
        assert!(is_request(REVOKE_DATA, &written));
        assert!(!is_request(b"metadata", &written));
        // Metadata that happens to read `unlock` is the node as created.
        assert!(!is_request(REVOKE_DATA, &Stat::default()));
        let wrapped = crate::metadata::append_metadata("revoker", REVOKE_DATA);
        assert!(is_request(&wrapped, &written));
    }

    #[test]
    fn closures_are_listeners() {
        let l: Box<dyn RevocationListener> = Box::new(|_p: &str| RevocationReply::Keep);
        assert_eq!(l.revocation_requested("/l/read-0"), RevocationReply::Keep);
    }
}
