//! The queues' take ([`take_from_queue`]): both queues' exactly-once claim
//! with a consumer's [`Receipts`], the back-off of a lost claim
//! ([`Contention`]), and the idle consumers' queue behind the takers' lock,
//! so that an offered item wakes one consumer. What each queue adds (its
//! names and order) is its [`TakeQueue`].

use log::{debug, warn};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::layout::{RECEIPTS_SUFFIX, RECEIPT_PREFIX, TAKERS_SUFFIX};
use crate::client::CreateMode;
use crate::deadline::Deadline;
use crate::engine::call::CallSession;
use crate::engine::owned::{with_parents, OwnerMark, Parents};
use crate::engine::session_node::SessionNode;
use crate::engine::wait::{Bounds, Waiter};
use crate::error::{Error, Result, ZkError};
use crate::lock::{InterProcessLock, ZkInterProcessWriteLock};
use crate::recoverable::RecoverableZooKeeper;
use crate::types::Op;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// The items among `children` (names `<prefix><sequence>`), oldest first.
/// Other children are skipped (Java logs and skips names it cannot parse).
pub(super) fn ordered_items(children: &[String], prefix: &str) -> Vec<(i64, String)> {
    let mut items: Vec<(i64, String)> = children
        .iter()
        .filter_map(|c| {
            let seq = c.strip_prefix(prefix)?.parse::<i64>().ok()?;
            Some((seq, c.clone()))
        })
        .collect();
    items.sort();
    items
}

/// A hook run by a claim with the item's path just before its commit (the
/// `multi`) is sent: tests put a fault there (a lost reply).
pub(super) type ClaimHook = Arc<dyn Fn(&str) + Send + Sync>;

/// The methods both queues have alike, for a type whose [`Receipts`] is its
/// field `receipts`, its [`Waiter`] its field `waiter` and its directory its
/// field `dir`: `with_claim_hook`, `with_wait_hook` and `dir`, written once.
macro_rules! queue_methods {
    () => {
        /// Runs `hook` with the item's path in every claim of this instance just
        /// before the claim's commit (the `multi`) is sent: for tests, to put a
        /// fault exactly there (a lost reply). Call before sharing the queue.
        #[must_use]
        pub fn with_claim_hook(mut self, hook: impl Fn(&str) + Send + Sync + 'static) -> Self {
            let hook: super::take::ClaimHook = std::sync::Arc::new(hook);
            self.receipts.set_hook(hook);
            self
        }

        crate::engine::wait::with_wait_hook!();

        /// The queue's directory.
        pub fn dir(&self) -> &str {
            &self.dir
        }
    };
}
pub(super) use queue_methods;

/// What a queue on `dir` starts with: its watcher, its directory, its
/// waiter and its consumer's [`Receipts`].
///
/// # Errors
/// `BadArguments` for an invalid path.
pub(super) fn queue_parts(
    zkw: &ZooKeeperWatcher,
    dir: &str,
) -> Result<(ZooKeeperWatcher, String, Waiter, Receipts)> {
    crate::path::validate(dir)?;
    Ok((
        zkw.clone(),
        dir.to_string(),
        Waiter::default(),
        Receipts::new(dir),
    ))
}

/// A consumer's receipt node: one per queue instance and session, created on
/// the first claim ([`RECEIPT_PREFIX`] in `<dir>`[`RECEIPTS_SUFFIX`]), written
/// by every claim in the same `multi` that deletes the item (its data: the
/// item's path), so that a claim whose reply is lost can tell afterwards
/// whether it committed. Removed in the background on drop; an ephemeral node,
/// it goes with its session (a new session makes a new one).
pub(super) struct Receipts {
    /// `<dir>-receipts`.
    parent: String,
    /// This instance's number in the process (two instances of one session
    /// have a receipt each).
    tag: u64,
    held: Mutex<Option<Receipt>>,
    hook: Option<ClaimHook>,
    /// This consumer's mark on its receipts: a receipt whose create reply
    /// was lost, or one to read anew, is found by it.
    mark: OwnerMark,
}

struct Receipt {
    node: SessionNode,
    /// The receipt's version as of this consumer's last write.
    version: i32,
}

impl std::fmt::Debug for Receipts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receipts")
            .field("parent", &self.parent)
            .field("tag", &self.tag)
            .finish()
    }
}

impl Receipts {
    /// The receipts of a consumer of the queue in `dir`.
    pub(super) fn new(dir: &str) -> Receipts {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Receipts {
            parent: format!("{dir}{RECEIPTS_SUFFIX}"),
            tag: NEXT.fetch_add(1, Ordering::Relaxed),
            held: Mutex::new(None),
            hook: None,
            mark: OwnerMark::new(),
        }
    }

    /// Runs `hook` in every claim just before its commit.
    pub(super) fn set_hook(&mut self, hook: ClaimHook) {
        self.hook = Some(hook);
    }

    /// The receipt of `call`'s session, created when there is none yet (a
    /// receipt of an earlier session went with it). A create whose reply was
    /// lost, or a receipt read anew, is recognised by this consumer's mark.
    fn current<'a>(
        &self,
        call: &CallSession,
        held: &'a mut Option<Receipt>,
    ) -> Result<&'a mut Receipt> {
        let receipt = match held.take() {
            Some(r) if r.node.session().session_id() == call.session_id() => r,
            // None yet, or of an earlier session (ephemeral: gone with it).
            _ => self.create(call)?,
        };
        Ok(held.insert(receipt))
    }

    /// Creates the receipt of `call`'s session (or finds it: a create whose
    /// reply was lost, or a receipt not as this consumer left it).
    fn create(&self, call: &CallSession) -> Result<Receipt> {
        call.check()?;
        let path = zkutil::join_znode(
            &self.parent,
            &format!("{RECEIPT_PREFIX}{:016x}-{}", call.session_id(), self.tag),
        );
        let (node, stat) = SessionNode::create_marked(
            call,
            &path,
            &[],
            CreateMode::Ephemeral,
            Parents::Persistent,
            &self.mark,
        )?;
        Ok(Receipt {
            node,
            version: stat.version,
        })
    }
}

impl Drop for Receipts {
    /// Removes the receipt in the background (never blocks): the drop of
    /// the queue that holds it.
    fn drop(&mut self) {
        if let Some(receipt) = self.held.get_mut().take() {
            receipt.node.remove_in_background();
        }
    }
}

/// Reads and takes the item `path` exactly once: `Ok(Some(data))` claimed,
/// `Ok(None)` another consumer had it first. Two requests: the read, and one
/// `multi` that deletes the item at the version read (an item rewritten
/// meanwhile is not taken blind) and writes its path into this consumer's
/// receipt at the receipt's version. A commit whose reply is lost reads the
/// receipt after the reconnect: naming this item one version on, the claim
/// committed (the item is returned); unchanged, it did not: the claim is tried
/// again while the item is there, and the item went to another consumer when
/// it is gone. Claims of one instance take turns (the receipt's version).
pub(super) fn claim(
    call: &CallSession,
    receipts: &Receipts,
    path: &str,
) -> Result<Option<Vec<u8>>> {
    let rzk = call.rzk();
    let (data, stat) = match rzk.get_raw_data(path) {
        Ok(read) => read,
        Err(e) if e.is(ZkError::NoNode) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut held = receipts.held.lock();
    loop {
        let receipt = receipts.current(call, &mut held)?;
        let ops = [
            Op::Delete {
                path: path.to_string(),
                version: Some(stat.version),
            },
            Op::SetData {
                path: receipt.node.path().to_string(),
                data: path.as_bytes().to_vec(),
                version: Some(receipt.version),
            },
        ];
        if let Some(hook) = &receipts.hook {
            hook(path);
        }
        match rzk.zookeeper().multi(&ops) {
            Ok(_) => {
                receipt.version += 1;
                return Ok(Some(data));
            }
            Err(Error::Multi { index: 0, code, .. })
                if code == ZkError::NoNode || code == ZkError::BadVersion =>
            {
                return Ok(None);
            }
            Err(Error::Multi { index: 1, code, .. }) => {
                // The receipt is not as this consumer left it: read it anew.
                debug!("claiming {path}: receipt {}: {code:?}", receipt.node.path());
                *held = None;
            }
            Err(e) if e.is_retryable() => {
                // Look after the reconnect (rzk retries the reads).
                match rzk.get_raw_data(receipt.node.path()) {
                    Ok((written, now)) if written == path.as_bytes() => {
                        debug!("claiming {path}: {e}; the receipt says it committed");
                        receipt.version = now.version;
                        return Ok(Some(data));
                    }
                    Ok((_, now)) => receipt.version = now.version,
                    Err(e2) if e2.is(ZkError::NoNode) => {
                        call.check()?;
                        warn!("claiming {path}: {e}; the receipt is gone, the item is in doubt");
                        return Err(e);
                    }
                    Err(e2) => return Err(e2),
                }
                match rzk.exists(path, false)? {
                    Some(now) if now.czxid == stat.czxid => {
                        debug!("claiming {path}: {e}; not committed, the item is still there: claiming again");
                    }
                    _ => {
                        debug!("claiming {path}: {e}; not committed, another consumer took it");
                        return Ok(None);
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// The most a lost claim's back-off grows: `2^LOST_CLAIM_DOUBLINGS` times
/// the claim's own time (see [`Contention`]).
const LOST_CLAIM_DOUBLINGS: u32 = 6;
/// The longest back-off after lost claims, whatever the claims' time.
const LOST_CLAIM_BACKOFF_MAX: Duration = Duration::from_millis(250);

/// A take's answer to contention. Claims are in the queue's order: a
/// consumer claims an item only when every older item it listed is gone
/// (the queues' FIFO), so at any moment only the head can be claimed, and
/// consumers busy on one backlog all go for the same head: one wins, the
/// others' read and `multi` are wasted, and as the winner comes back for the
/// next item as fast as the losers move on to it, they stay in step (at 4
/// busy consumers about 8 requests per item instead of 3). A consumer whose
/// claim lost therefore backs off before it lists again: a random time in
/// `[d/2, d]`, `d` the lost claim's own time (its two round trips) doubled
/// with each loss of the same take, up to `2^`[`LOST_CLAIM_DOUBLINGS`] times
/// it and at most [`LOST_CLAIM_BACKOFF_MAX`] (kazoo's `Queue` backs off too,
/// by its retry's sleep of 0.1 s and more). Meanwhile the winner takes on
/// alone, one claim per item, at the rate of all of them together (the
/// claims are serial anyway). Measured in claims rather than in fixed
/// milliseconds, the back-off covers about as many of the winner's claims on
/// a loaded machine (slow round trips) as on an idle one, so the cost per
/// item does not grow with the load. A consumer that finds the queue empty
/// waits behind the takers' lock instead (see [`take_from_queue`]).
#[derive(Debug, Default)]
pub(super) struct Contention {
    lost: u32,
}

impl Contention {
    /// After a claim (that took `claim_took`) another consumer won: pauses
    /// for the back-off, never past `until`, on the wait engine
    /// ([`Waiter::back_off`]: the end of the take's session ends the pause at
    /// once); `Ok(false)` when `until` has passed (the take's time is up).
    ///
    /// # Errors
    /// `SessionExpired`, `Closed` when the take's session ended before or
    /// during the back-off.
    pub(super) fn lost(
        &mut self,
        call: &CallSession,
        waiter: &Waiter,
        dir: &str,
        until: Deadline,
        claim_took: Duration,
    ) -> Result<bool> {
        let d = claim_took
            .saturating_mul(1 << self.lost.min(LOST_CLAIM_DOUBLINGS))
            .min(LOST_CLAIM_BACKOFF_MAX);
        self.lost += 1;
        waiter.back_off(&call.pinned(), crate::util::jitter(d), until, dir)?;
        Ok(!until.is_past())
    }
}

/// Creates `<dir>/<name>` persistent sequential with `data` as it is; creates
/// `dir` when missing. No retry of the create: the name cannot carry a retry
/// tag without breaking Java's layout, so a `ConnectionLoss` leaves the item in
/// doubt, as with Java.
pub(super) fn create_item(
    zkw: &ZooKeeperWatcher,
    dir: &str,
    name: &str,
    data: &[u8],
) -> Result<String> {
    let zk = zkw.zookeeper();
    let rzk = zkw.recoverable_zookeeper();
    let path = zkutil::join_znode(dir, name);
    with_parents(rzk, &path, Parents::Persistent, || {
        zk.create(
            &path,
            data,
            rzk.acl_for(&path),
            CreateMode::PersistentSequential,
        )
    })
}

/// The first of `items` (`(key, name)` of children of `dir`, first out
/// first) still there, with its data: a queue's `peek`. An item taken
/// meanwhile is passed over.
pub(super) fn peek_first<K>(
    rzk: &RecoverableZooKeeper,
    dir: &str,
    items: impl IntoIterator<Item = (K, String)>,
) -> Result<Option<(K, Vec<u8>)>> {
    for (key, name) in items {
        match rzk.get_raw_data(&zkutil::join_znode(dir, &name)) {
            Ok((data, _)) => return Ok(Some((key, data))),
            Err(e) if e.is(ZkError::NoNode) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Runs `watch_and_take` (which watches the queue's directory `dir`, waits and
/// takes) as the one idle consumer watching it: idle consumers queue up behind
/// a write lock at `<dir>-takers` ([`TAKERS_SUFFIX`]) and only its holder
/// watches the directory, so an offered item wakes one consumer (the holder),
/// and the next idle consumer is woken by the holder's release (one lock
/// hand-off), not by the item: no herd. `Ok(None)` when `bounds` ran out
/// waiting for the lock. Called with the take's session: a lock granted in
/// another session (a renewal meanwhile) ends the take with `SessionExpired`.
fn as_the_watching_taker<T>(
    call: &CallSession,
    dir: &str,
    bounds: Bounds,
    watch_and_take: impl FnOnce() -> Result<Option<T>>,
) -> Result<Option<T>> {
    let takers =
        ZkInterProcessWriteLock::new(call.watcher(), &format!("{dir}{TAKERS_SUFFIX}"), &[], None)?;
    let held = match bounds.wait.remaining() {
        None => takers.acquire().map(|()| true),
        Some(left) => takers.try_acquire(left),
    };
    let held = match held {
        Err(e) if bounds.cut_short(&e) => false,
        other => other?,
    };
    if !held {
        return Ok(None);
    }
    let result = call.check().and_then(|()| watch_and_take());
    if let Err(e) = takers.release() {
        // Its node goes with the session, or the lock's drop retries.
        debug!("releasing the takers' lock of {dir}: {e}");
    }
    result
}

/// A queue [`take_from_queue`] takes from (both queues).
pub(super) trait TakeQueue: Sync {
    /// What a take returns.
    type Item;
    /// The queue's watcher, directory and waiter.
    fn parts(&self) -> (&ZooKeeperWatcher, &str, &Waiter);
    /// Takes an item if there is one, in `call`'s session; `Ok(None)` also
    /// when `until` passes while it backs off from contention.
    fn poll_in(&self, call: &CallSession, until: Deadline) -> Result<Option<Self::Item>>;
    /// Whether a listing of the directory holds items (it may keep it).
    fn listed(&self, children: &[String]) -> bool;

    /// A queue's `take`: [`take_from_queue`] without a bound.
    fn take_item(&self) -> Result<Self::Item>
    where
        Self: Sized,
    {
        match take_from_queue(self, Bounds::new(None))? {
            Some(item) => Ok(item),
            // Without a deadline the wait ends only with an item or an error.
            None => Err(Error::zk(ZkError::OperationTimeout, self.parts().1)),
        }
    }

    /// A queue's `take_timeout`: [`take_from_queue`] waiting at most
    /// `timeout`.
    fn take_item_within(&self, timeout: Duration) -> Result<Option<Self::Item>>
    where
        Self: Sized,
    {
        take_from_queue(self, Bounds::new(Some(timeout)))
    }
}

/// The take of both queues, until an item is taken (`poll_in`) or `bounds`
/// runs out (`Ok(None)`; a call cut short by the calls' deadline is a timeout
/// too): every call in the session the take began in; a busy queue is served
/// at once; an idle consumer queues up behind the takers' lock (see
/// [`as_the_watching_taker`]) and, holding it, polls, watches the directory's
/// children with the queue's waiter and waits. Claims are not cut short by the
/// wait's deadline (an interrupted claim would leave its item in doubt):
/// `poll_in` gets the unbounded handle; the listings and the watch are
/// bounded.
pub(super) fn take_from_queue<Q: TakeQueue>(q: &Q, bounds: Bounds) -> Result<Option<Q::Item>> {
    let _started = crate::metrics::Timer::start();
    let taken = match take_loop(q, bounds) {
        Err(e) if bounds.cut_short(&e) => Ok(None),
        other => other,
    };
    crate::metrics::metric!(queue_take(
        q.parts().1,
        taken.as_ref().ok().map(Option::is_some),
        _started
    ));
    taken
}

fn take_loop<Q: TakeQueue>(q: &Q, bounds: Bounds) -> Result<Option<Q::Item>> {
    let (zkw, dir, waiter) = q.parts();
    let poll = |call: &CallSession| q.poll_in(call, bounds.wait);
    let listed = |children: &[String]| q.listed(children);
    let call = CallSession::begin(zkw)?;
    if let Some(item) = poll(&call)? {
        return Ok(Some(item));
    }
    if bounds.wait.is_past() {
        return Ok(None);
    }
    as_the_watching_taker(&call, dir, bounds, || {
        let rzk = call.rzk().with_deadline(bounds.calls);
        loop {
            call.check()?;
            if let Some(item) = poll(&call)? {
                return Ok(Some(item));
            }
            if bounds.wait.is_past() {
                return Ok(None);
            }
            let round = waiter.round();
            match rzk.get_children_watch(dir, waiter.watcher()) {
                Ok(children) if listed(&children) => continue,
                Ok(_) => {}
                Err(e) if e.is(ZkError::NoNode) => {
                    // Java creates the directory to wait on it.
                    rzk.create_with_parents(dir, &[])?;
                    continue;
                }
                Err(e) => return Err(e),
            }
            if !waiter.wait(&call.pinned(), round, bounds.wait, dir)? {
                return Ok(None);
            }
        }
    })
}
