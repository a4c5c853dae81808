//! `DistributedQueue`: the "Queues" recipe, with the layout of ZooKeeper's Java
//! `org.apache.zookeeper.recipes.queue.DistributedQueue`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::layout::ITEM_PREFIX;
use super::node::children_or_none;
use super::take::{
    claim, create_item, ordered_items, peek_first, queue_parts, Contention, Receipts, TakeQueue,
};
use crate::client::{CreateMode, ReadOp, ReadResult};
use crate::deadline::Deadline;
use crate::engine::call::CallSession;
use crate::engine::wait::Waiter;
use crate::error::{Error, Result, ZkError};
use crate::recoverable::RecoverableZooKeeper;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// The most items [`DistributedQueue::offer_all`] sends in one batch.
pub const OFFER_ALL_BATCH: usize = 1000;

/// The sequence number of an item's path (`.../qn-0000000042`).
fn item_sequence(path: &str) -> Option<i64> {
    let name = path.rsplit('/').next()?;
    name.strip_prefix(ITEM_PREFIX)?.parse().ok()
}

/// A distributed FIFO queue: the "Queues" recipe of ZooKeeper's recipes page,
/// laid out as ZooKeeper's Java `org.apache.zookeeper.recipes.queue.DistributedQueue`
/// (an item is a persistent sequential child `<dir>/qn-<10-digit sequence>`
/// holding the item's bytes as they are; the head is the lowest sequence), so a
/// Java program using that class and a Rust one using this type share a queue.
///
/// - [`offer`](Self::offer) creates an item, [`offer_all`](Self::offer_all)
///   many in one round trip; [`peek`](Self::peek) /
///   [`element`](Self::element) read the head; [`poll`](Self::poll) /
///   [`remove`](Self::remove) take it; [`take`](Self::take) /
///   [`take_timeout`](Self::take_timeout) wait for one.
/// - FIFO: items come out in sequence order, so the items of one producer come
///   out in the order it offered them, to one consumer or spread over many.
/// - A consumer claims an item by deleting its node (after reading it): of
///   concurrent consumers exactly one delete succeeds, the others go on to the
///   next item. No item is handed out twice.
/// - **Exactly once**, also when a claim's reply is lost (see below): each
///   consumer (an instance, per session) owns an ephemeral receipt node beside
///   the queue (`<dir>-receipts/receipt-<session id>-<n>`, see
///   [`layout`](super::layout)), and a claim commits with one `multi`: the
///   item's delete (at the version read) and a write of the item's path into
///   the receipt (at the receipt's version). Still 2 requests per item taken
///   (the read and the `multi`); the cost is one ephemeral node per consumer
///   instance and session (created by its first claim, one request; removed
///   in the background when the queue is dropped, and with its session). The
///   queue's own layout is Java's: Java consumers (who delete without a
///   receipt) share the queue, and an item still goes to one of them or one
///   of these.
/// - What stays at most once: a consumer killed (or crashing) after its claim
///   committed and before it processed the item; the item is out of the
///   queue (its receipt, until the session ends, names it).
///
/// # Contended takes, and the floor
/// An item costs at least 3 requests: its create, and the claim's read and
/// `multi` (ZooKeeper's `multi` cannot read, so the data is read first; the
/// receipt's write rides in the same `multi`), plus listings shared by many
/// items. Consumers busy on one backlog cannot share the claims out: FIFO
/// means a consumer claims an item only once every older item it listed is
/// gone, so only the head can be claimed at any moment, and they all go for
/// it. Left alone they stay in step (the winner comes back for the next head
/// as fast as the losers move on to it): every consumer reads and claims
/// every item, about 8 requests per item at 4 × 4. So a consumer whose claim
/// lost backs off before it lists again: a random time of one to two of its
/// claims' round trips, doubled with each further loss of the same take up to
/// 64 times that (at most 250 ms); then it lists afresh. The back-off is a
/// wait bound to the take's session, like the take's other waits: the
/// session's end (an expiry, `close()`) ends it at once with
/// `SessionExpired` / `Closed`. The winner meanwhile
/// takes on alone at one claim per item, as fast as all of them together
/// (the claims are serial anyway), and a waking consumer costs a listing and
/// a claim attempt per back-off, spread over the winner's items. Measured
/// (`mntr`, the bench's 4 × 4: 4 producers, 4 consumers, 8 sessions, 1,000
/// items): 3.4–3.5 requests per item instead of 8.3, and more items per second
/// (the losers' requests no longer queue before the winner's).
///
/// zklock differs here: Java's consumers (and zklock's before) move on to the
/// next item at once, kazoo's list again after a back-off of 0.1 s and more
/// (its retry's sleep). Under a backlog with consumers that take as fast as
/// they can, one consumer may take most items (the others are backing off);
/// consumers that spend time on each item share the items, as a consumer
/// away processing one does not contend. An item waits at most one back-off
/// longer for a consumer that lost.
///
/// # Waiting
/// A `take` that finds the queue empty queues up behind a write lock beside
/// the directory (`<dir>-takers`, see [`layout`](super::layout)); only the
/// lock's holder sets a child watch on the directory (a per-watch watcher) and
/// waits. An offer wakes that one consumer, not every idle one (Java's and the
/// recipes page's consumers all wake and race for the head); when it has
/// taken its item it releases the lock, which wakes the next idle consumer.
/// Measured on a server of its own (`mntr`), 8 idle consumers and items
/// offered one at a time: 12 requests per item, against 33 when every idle
/// consumer wakes. An idle consumer behind the lock waits as a lock waiter
/// does: through a disconnection until the session's end (`SessionExpired`);
/// only the holder's wait ends with `ConnectionLoss` after a session timeout
/// down.
///
/// # zklock differs here
/// - Java re-lists the directory for every item; an instance here keeps the
///   last listing and takes from it in order until it is used up (an item
///   created later has a higher sequence than every listed one, so the order is
///   the same) or a claim of it lost (then it backs off and lists afresh, see
///   above), then lists again: about 2 requests per item instead of 3.
/// - Java's `element`/`remove` throw `NoSuchElementException` on an empty
///   queue; here they return `Error::Zk { code: NoNode, path: <dir> }`.
/// - Java's `take` waits without bound and dies with its session by exception;
///   here [`take_timeout`](Self::take_timeout) bounds it, and both end with
///   `SessionExpired`/`Closed`, or `ConnectionLoss` when the connection stays
///   down for a session timeout.
///
/// # Errors under connection loss
/// A `ConnectionLoss` from `offer` leaves the item in doubt (it may have been
/// created), as with Java: the node's name cannot carry a retry tag without
/// breaking Java's layout ([`offer_all`](Self::offer_all) settles it from the
/// directory's listing while that can tell). A claim whose commit loses its
/// reply reads its receipt after the reconnect: naming the item one version
/// on, the claim committed and the item is returned; unchanged, it did not,
/// and the claim is tried again while the item is there (when it is gone,
/// another consumer took it: the next item is tried). So a take is exactly once: an item is never
/// lost to a lost reply (zklock differs here: Java's consumer gets
/// `ConnectionLoss` and the item its delete's lost reply was about is lost
/// when that delete was applied). Only if the receipt
/// itself is gone while the session lives (someone deleted it) is the item in
/// doubt: `ConnectionLoss` about its path.
pub struct DistributedQueue {
    zkw: ZooKeeperWatcher,
    dir: String,
    /// The last listing's items not taken yet, oldest first.
    cache: Mutex<VecDeque<String>>,
    waiter: Waiter,
    receipts: Receipts,
}

impl std::fmt::Debug for DistributedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedQueue")
            .field("dir", &self.dir)
            .field("cached", &self.cache.lock().len())
            .finish()
    }
}

impl DistributedQueue {
    /// Java's `new DistributedQueue(zookeeper, dir, acl)` (open ACL): a queue
    /// in `dir`, created on the first `offer` when missing.
    ///
    /// # Errors
    /// `BadArguments` for an invalid path.
    pub fn new(zkw: &ZooKeeperWatcher, dir: &str) -> Result<DistributedQueue> {
        let (zkw, dir, waiter, receipts) = queue_parts(zkw, dir)?;
        Ok(DistributedQueue {
            zkw,
            dir,
            cache: Mutex::new(VecDeque::new()),
            waiter,
            receipts,
        })
    }

    super::take::queue_methods!();

    /// Java's `offer(data)`: appends an item (one request); returns its node's
    /// path.
    ///
    /// # Errors
    /// `ConnectionLoss`: the item may or may not be in the queue. Session
    /// errors; `BadArguments` for data over the packet limit.
    pub fn offer(&self, data: &[u8]) -> Result<String> {
        create_item(&self.zkw, &self.dir, ITEM_PREFIX, data)
    }

    /// Offers every item of `items`, in order, pipelined: the creates go out
    /// together (in batches of at most [`OFFER_ALL_BATCH`] items or about
    /// 512 KiB), one round trip per batch instead of one per item; returns
    /// the items' node paths, in order. Their sequence numbers are in the
    /// order of `items` (ZooKeeper applies a session's requests in order).
    /// Curator's `DistributedQueue.put` without its background thread: `Ok`
    /// only when every create is confirmed.
    ///
    /// A `ConnectionLoss` in a batch is settled after the reconnect rather
    /// than reported: the server applied a prefix of the unanswered creates
    /// (in order, as sent), and one listing of the directory with its `Stat`
    /// tells which. A sequential create's number is its parent's `cversion`
    /// at the time (Java's layout), so when every number from the first
    /// unanswered create's on to the directory's `cversion` now is still a
    /// child (no item was taken meanwhile), their data (one `multi` read)
    /// shows which of the unanswered items are in; the rest are offered
    /// again: each item once, none lost. When that cannot be told (an item
    /// taken meanwhile, a node gone while read), the call ends with
    /// `ConnectionLoss` as [`offer`](Self::offer) does: the items from the
    /// first unanswered one on are in doubt; the ones before it are in the
    /// queue.
    ///
    /// zklock differs here: Java's recipe has no batch. One limit of the
    /// settling: an item another producer offers with the very same bytes
    /// between a lost reply and the reconnect cannot be told from this one's.
    ///
    /// # Errors
    /// `ConnectionLoss` in doubt as above; session errors; `BadArguments` for
    /// an item over the packet limit (nothing of its batch is sent); `NoAuth`
    /// (the items before the refused one are in the queue).
    pub fn offer_all<D: AsRef<[u8]>>(&self, items: &[D]) -> Result<Vec<String>> {
        let zk = self.zkw.zookeeper();
        let rzk = self.zkw.recoverable_zookeeper();
        let path = zkutil::join_znode(&self.dir, ITEM_PREFIX);
        let acl = rzk.acl_for(&path);
        let mut paths = Vec::with_capacity(items.len());
        let mut made_dir = false;
        while paths.len() < items.len() {
            let from = paths.len();
            let mut to = from;
            let mut bytes = 0;
            while to < items.len()
                && to - from < OFFER_ALL_BATCH
                && (to == from || bytes < 512 << 10)
            {
                bytes += items[to].as_ref().len() + path.len() + 64;
                to += 1;
            }
            let batch: Vec<&[u8]> = items[from..to].iter().map(AsRef::as_ref).collect();
            let (dir_stat, created) = zk.exists_then_create_each(
                &self.dir,
                &path,
                &batch,
                acl,
                CreateMode::PersistentSequential,
            )?;
            let mut created = created.into_iter();
            for reply in created.by_ref() {
                match reply {
                    Ok(p) => paths.push(p),
                    Err(e) if e.is(ZkError::NoNode) && !made_dir => {
                        // The directory is missing (or went): made once, and the
                        // rest offered again (the creates after this one found
                        // it missing too, unless someone made it between).
                        zkutil::create_with_parents(&self.zkw, &self.dir)?;
                        made_dir = true;
                        break;
                    }
                    Err(e) if e.is(ZkError::ConnectionLoss) => {
                        // The first number the unanswered creates may have:
                        // after the last answered one's, or the directory's
                        // `cversion` read before this batch.
                        let base = if paths.len() > from {
                            paths.last().and_then(|p| item_sequence(p)).map(|s| s + 1)
                        } else {
                            dir_stat
                                .as_ref()
                                .ok()
                                .and_then(|s| s.map(|s| i64::from(s.cversion)))
                        };
                        let unanswered = &batch[paths.len() - from..];
                        let Some(base) = base else { return Err(e) };
                        let applied = self.settle_offers(base, unanswered).map_err(|_| e)?;
                        paths.extend(applied);
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            // Replies after the one that broke off are not looked at: the
            // batch is offered again from the first item not in.
            drop(created);
        }
        Ok(paths)
    }

    /// After a lost connection: which of `unanswered` (creates sent in this
    /// order, the first of them numbered `base` or later) the server applied
    /// (a prefix of them): their paths. `Err` when that cannot be told.
    fn settle_offers(&self, base: i64, unanswered: &[&[u8]]) -> Result<Vec<String>> {
        let rzk = self.zkw.recoverable_zookeeper();
        let (children, stat) = rzk.get_children2(&self.dir, false)?;
        let since: Vec<(i64, String)> = ordered_items(&children, ITEM_PREFIX)
            .into_iter()
            .filter(|(seq, _)| *seq >= base)
            .collect();
        // Every number handed out since `base` must still be a child: else an
        // item was taken (or a node of another prefix made) meanwhile.
        if since.len() as i64 != i64::from(stat.cversion) - base {
            return Err(Error::zk(ZkError::ConnectionLoss, self.dir.clone()));
        }
        let reads: Vec<ReadOp> = since
            .iter()
            .map(|(_, name)| ReadOp::GetData {
                path: zkutil::join_znode(&self.dir, name),
            })
            .collect();
        let mut mine = Vec::new();
        for ((_, name), read) in since.iter().zip(rzk.multi_read(&reads)?) {
            let ReadResult::Data { data, .. } = read else {
                return Err(Error::zk(ZkError::ConnectionLoss, self.dir.clone()));
            };
            if mine.len() < unanswered.len() && data == unanswered[mine.len()] {
                mine.push(zkutil::join_znode(&self.dir, name));
            }
        }
        Ok(mine)
    }

    /// The number of items in the queue now (one listing; kazoo's `len`).
    ///
    /// # Errors
    /// Session errors.
    pub fn len(&self) -> Result<usize> {
        Ok(self.list(self.zkw.recoverable_zookeeper())?.len())
    }

    /// Whether the queue is empty now (see [`len`](Self::len)).
    ///
    /// # Errors
    /// Session errors.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Java's `peek()`: the head item's data without taking it, `None` when the
    /// queue is empty (or its directory missing).
    ///
    /// # Errors
    /// Session errors.
    pub fn peek(&self) -> Result<Option<Vec<u8>>> {
        let rzk = self.zkw.recoverable_zookeeper();
        Ok(peek_first(rzk, &self.dir, self.list(rzk)?)?.map(|(_, data)| data))
    }

    /// Java's `element()`: [`peek`](Self::peek), with an error on an empty queue.
    ///
    /// # Errors
    /// `NoNode` about the directory when the queue is empty (Java's
    /// `NoSuchElementException`); session errors.
    pub fn element(&self) -> Result<Vec<u8>> {
        self.peek()?
            .ok_or_else(|| Error::zk(ZkError::NoNode, self.dir.clone()))
    }

    /// Java's `poll()`: takes the head item, `None` when the queue is empty.
    /// A claim another consumer won backs off before the next (see
    /// [contended takes](Self#contended-takes-and-the-floor)).
    ///
    /// # Errors
    /// `ConnectionLoss` about an item's path only if this consumer's receipt
    /// was deleted under it while its claim's reply was lost (see
    /// [`DistributedQueue`]); session errors.
    pub fn poll(&self) -> Result<Option<Vec<u8>>> {
        self.poll_with(&CallSession::begin(&self.zkw)?, Deadline::never())
    }

    /// Java's `remove()`: [`poll`](Self::poll), with an error on an empty queue.
    ///
    /// # Errors
    /// `NoNode` about the directory when the queue is empty; as `poll`.
    pub fn remove(&self) -> Result<Vec<u8>> {
        self.poll()?
            .ok_or_else(|| Error::zk(ZkError::NoNode, self.dir.clone()))
    }

    /// Java's `take()`: takes the head item, waiting for one as long as it
    /// takes (or until the session ends).
    ///
    /// # Errors
    /// `SessionExpired`, `Closed`; `ConnectionLoss` when the connection stays
    /// down for a session timeout.
    pub fn take(&self) -> Result<Vec<u8>> {
        self.take_item()
    }

    /// [`take`](Self::take), waiting at most `timeout` for an item: `Ok(None)`
    /// when none came. The listing and watching calls get a 2 s grace past
    /// `timeout` (a call cut short makes a timeout, not an error); claiming an
    /// item found is never cut short (bounded by the client's request timeout
    /// and the retries), so that no item is left in doubt by a timeout; a
    /// back-off after a lost claim (see [contended
    /// takes](Self#contended-takes-and-the-floor)) ends at `timeout`.
    ///
    /// # Errors
    /// As [`take`](Self::take).
    pub fn take_timeout(&self, timeout: Duration) -> Result<Option<Vec<u8>>> {
        self.take_item_within(timeout)
    }

    fn list(&self, rzk: &RecoverableZooKeeper) -> Result<Vec<(i64, String)>> {
        Ok(ordered_items(
            &children_or_none(rzk, &self.dir)?,
            ITEM_PREFIX,
        ))
    }

    fn refill(&self, items: Vec<(i64, String)>) {
        let mut cache = self.cache.lock();
        cache.clear();
        cache.extend(items.into_iter().map(|(_, n)| n));
    }

    fn poll_with(&self, call: &CallSession, until: Deadline) -> Result<Option<Vec<u8>>> {
        let mut listed = false;
        let mut contention = Contention::default();
        loop {
            let next = self.cache.lock().pop_front();
            let name = match next {
                Some(name) => name,
                None if listed => return Ok(None),
                None => {
                    let items = self.list(call.rzk())?;
                    listed = true;
                    if items.is_empty() {
                        return Ok(None);
                    }
                    self.refill(items);
                    continue;
                }
            };
            let path = zkutil::join_znode(&self.dir, &name);
            let t0 = Instant::now();
            if let Some(data) = claim(call, &self.receipts, &path)? {
                return Ok(Some(data));
            }
            // Another consumer took it: back off, then list afresh (the
            // cached items are likely taken by then too).
            if !contention.lost(call, &self.waiter, &self.dir, until, t0.elapsed())? {
                return Ok(None);
            }
            self.cache.lock().clear();
            listed = false;
        }
    }
}

impl TakeQueue for DistributedQueue {
    type Item = Vec<u8>;

    fn parts(&self) -> (&ZooKeeperWatcher, &str, &Waiter) {
        (&self.zkw, &self.dir, &self.waiter)
    }

    fn poll_in(&self, call: &CallSession, until: Deadline) -> Result<Option<Vec<u8>>> {
        self.poll_with(call, until)
    }

    fn listed(&self, children: &[String]) -> bool {
        let items = ordered_items(children, ITEM_PREFIX);
        let any = !items.is_empty();
        if any {
            self.refill(items);
        }
        any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_in_sequence_order_others_skipped() {
        let children: Vec<String> = [
            "qn-0000000010",
            "qn-0000000002",
            "lock",
            "qn-x",
            "qn-0000000003",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let names: Vec<String> = ordered_items(&children, ITEM_PREFIX)
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        assert_eq!(names, ["qn-0000000002", "qn-0000000003", "qn-0000000010"]);
    }
}
