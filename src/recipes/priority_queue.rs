//! `DistributedPriorityQueue`: the "Priority Queues" recipe.

use std::time::{Duration, Instant};

use super::layout::PRIORITY_PREFIX;
use super::node::children_or_none;
use super::take::{claim, create_item, peek_first, queue_parts, Contention, Receipts, TakeQueue};
use crate::deadline::Deadline;
use crate::engine::call::CallSession;
use crate::engine::wait::Waiter;
use crate::error::{Error, Result, ZkError};
use crate::recoverable::RecoverableZooKeeper;
use crate::sequence::sequence_of;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// A distributed priority queue: the "Priority Queues" recipe of ZooKeeper's
/// recipes page. An item's node is `<dir>/pq-<priority>-<sequence>`
/// (persistent sequential, the priority zero-padded to 10 digits, the data as
/// it is); items come out lowest priority value first, FIFO within a priority.
///
/// Consumers claim by deleting, as [`DistributedQueue`](super::queue::DistributedQueue)
/// (same guarantees on connection loss: exactly once, with this consumer's
/// receipt node in `<dir>-receipts`, written in the same `multi` as the
/// item's delete; at most once only for a consumer killed between its
/// claim's commit and its processing of the item).
///
/// Contended takes back off as the FIFO queue's do (see
/// [`DistributedQueue`](super::queue::DistributedQueue#contended-takes-and-the-floor)):
/// a consumer whose claim of the most urgent item lost waits a random time of
/// a few of its claims' round trips (growing with further losses), then lists
/// again, instead of going on to the next item of its listing.
///
/// # zklock differs here
/// The page says "a client must invalidate all previously obtained children
/// lists if it gets a notification"; an instance here keeps no list at all: every
/// `poll` lists the directory (3 requests per item), so an urgent item offered
/// while consumers wait or work is the next one taken.
pub struct DistributedPriorityQueue {
    zkw: ZooKeeperWatcher,
    dir: String,
    waiter: Waiter,
    receipts: Receipts,
}

impl std::fmt::Debug for DistributedPriorityQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedPriorityQueue")
            .field("dir", &self.dir)
            .finish()
    }
}

/// `(priority, sequence, name)` of the items among `children`, first out first.
fn ordered(children: &[String]) -> Vec<(u32, i64, String)> {
    let mut items: Vec<(u32, i64, String)> = children
        .iter()
        .filter_map(|c| {
            let rest = c.strip_prefix(PRIORITY_PREFIX)?;
            let (priority, _) = rest.split_once('-')?;
            Some((
                priority.parse().ok()?,
                i64::from(sequence_of(rest)?),
                c.clone(),
            ))
        })
        .collect();
    items.sort();
    items
}

impl DistributedPriorityQueue {
    /// A priority queue in `dir`, created on the first `offer` when missing.
    ///
    /// # Errors
    /// `BadArguments` for an invalid path.
    pub fn new(zkw: &ZooKeeperWatcher, dir: &str) -> Result<DistributedPriorityQueue> {
        let (zkw, dir, waiter, receipts) = queue_parts(zkw, dir)?;
        Ok(DistributedPriorityQueue {
            zkw,
            dir,
            waiter,
            receipts,
        })
    }

    super::take::queue_methods!();

    /// Adds an item with `priority` (lower comes out first); returns its node.
    ///
    /// # Errors
    /// `ConnectionLoss`: the item may or may not be in the queue. Session errors.
    pub fn offer(&self, priority: u32, data: &[u8]) -> Result<String> {
        create_item(
            &self.zkw,
            &self.dir,
            &format!("{PRIORITY_PREFIX}{priority:010}-"),
            data,
        )
    }

    /// The first item's `(priority, data)` without taking it.
    ///
    /// # Errors
    /// Session errors.
    pub fn peek(&self) -> Result<Option<(u32, Vec<u8>)>> {
        let rzk = self.zkw.recoverable_zookeeper();
        let items = self.list(rzk)?.into_iter().map(|(p, _, name)| (p, name));
        peek_first(rzk, &self.dir, items)
    }

    /// Takes the first item: `(priority, data)`, `None` when empty.
    ///
    /// # Errors
    /// `ConnectionLoss` about an item only if this consumer's receipt was
    /// deleted under it while its claim's reply was lost; session errors.
    pub fn poll(&self) -> Result<Option<(u32, Vec<u8>)>> {
        self.poll_with(&CallSession::begin(&self.zkw)?, Deadline::never())
    }

    /// Takes the most urgent item, waiting for one as long as it takes (or
    /// until the session ends).
    ///
    /// # Errors
    /// `SessionExpired`, `Closed`; `ConnectionLoss` when the connection stays
    /// down for a session timeout.
    pub fn take(&self) -> Result<(u32, Vec<u8>)> {
        self.take_item()
    }

    /// Takes the first item, waiting at most `timeout` for one: `Ok(None)` when
    /// none came. The listing and watching calls get a 2 s grace past `timeout`
    /// (cut short: a timeout); claims are not cut short (see
    /// [`DistributedQueue::take_timeout`](super::queue::DistributedQueue::take_timeout)).
    ///
    /// # Errors
    /// `SessionExpired`, `Closed`; `ConnectionLoss` when the connection stays
    /// down for a session timeout.
    pub fn take_timeout(&self, timeout: Duration) -> Result<Option<(u32, Vec<u8>)>> {
        self.take_item_within(timeout)
    }

    fn list(&self, rzk: &RecoverableZooKeeper) -> Result<Vec<(u32, i64, String)>> {
        Ok(ordered(&children_or_none(rzk, &self.dir)?))
    }

    fn poll_with(&self, call: &CallSession, until: Deadline) -> Result<Option<(u32, Vec<u8>)>> {
        // One listing per item taken; a head taken by another consumer means
        // consumers contend: back off (see `Contention`), then list afresh
        // (the most urgent item then, an item offered meanwhile included).
        let mut contention = Contention::default();
        loop {
            let Some((priority, _, name)) = self.list(call.rzk())?.into_iter().next() else {
                return Ok(None);
            };
            let t0 = Instant::now();
            if let Some(data) = claim(call, &self.receipts, &zkutil::join_znode(&self.dir, &name))?
            {
                return Ok(Some((priority, data)));
            }
            if !contention.lost(call, &self.waiter, &self.dir, until, t0.elapsed())? {
                return Ok(None);
            }
        }
    }

    /// Takes the first item, or `NoNode` about the directory when empty.
    ///
    /// # Errors
    /// As [`poll`](Self::poll).
    pub fn remove(&self) -> Result<(u32, Vec<u8>)> {
        self.poll()?
            .ok_or_else(|| Error::zk(ZkError::NoNode, self.dir.clone()))
    }
}

impl TakeQueue for DistributedPriorityQueue {
    type Item = (u32, Vec<u8>);

    fn parts(&self) -> (&ZooKeeperWatcher, &str, &Waiter) {
        (&self.zkw, &self.dir, &self.waiter)
    }

    fn poll_in(&self, call: &CallSession, until: Deadline) -> Result<Option<(u32, Vec<u8>)>> {
        self.poll_with(call, until)
    }

    fn listed(&self, children: &[String]) -> bool {
        !ordered(children).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_then_sequence() {
        let c: Vec<String> = [
            "pq-0000000005-0000000001",
            "pq-0000000001-0000000009",
            "pq-0000000005-0000000000",
            "qn-0000000000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let names: Vec<String> = ordered(&c).into_iter().map(|(_, _, n)| n).collect();
        assert_eq!(
            names,
            [
                "pq-0000000001-0000000009",
                "pq-0000000005-0000000000",
                "pq-0000000005-0000000001"
            ]
        );
    }
}
