//! The node names of every layout zklock speaks, and the lock dialects that
//! choose among them: the words, below the locks and the recipes that both
//! use them. A leaf module: it imports nothing of the crate but the sequence
//! helpers and the uuid.
//!
//! "Layout" has one meaning in zklock: how a participant's nodes are named and
//! ordered in a directory. A lock's layout (a [`Dialect`] and a role) is
//! decided in one place, `lock/dialect.rs` (its `Layout`); the recipes'
//! layouts are listed in [`recipes::layout`](crate::recipes::layout), which
//! re-exports the recipes' names from here. This module holds only the names
//! (and Curator's protected-name prefix, which the locks' dialects read too).

use std::fmt;

use crate::sequence::{parse_sequence, sequence_of, tagged_sequence};

/// The prefix of a queue item's node, as in Java's `DistributedQueue`.
pub const ITEM_PREFIX: &str = "qn-";

/// The suffix of the lock beside a queue's directory behind which idle
/// consumers queue up (`<dir>-takers`): only its holder watches the queue, so
/// an offered item wakes one consumer, not all.
pub const TAKERS_SUFFIX: &str = "-takers";

/// The suffix of the directory beside a queue's directory holding its
/// consumers' receipts (`<dir>-receipts`; beside the queue, not in the
/// takers' lock directory, whose children are the lock's).
pub const RECEIPTS_SUFFIX: &str = "-receipts";

/// The prefix of a consumer's receipt node in `<dir>-receipts`:
/// `receipt-<session id, 16 hex digits>-<instance number>`, ephemeral; its
/// data is the path of the last item the consumer took.
pub const RECEIPT_PREFIX: &str = "receipt-";

/// The prefix of a priority-queue item's node: `pq-<priority>-<sequence>`.
pub const PRIORITY_PREFIX: &str = "pq-";

/// The prefix of a double-barrier member's node (then the creator's tag and
/// ZooKeeper's sequence).
pub const MEMBER_PREFIX: &str = "m-";

/// The double barrier's node created when it is full.
pub const READY_NODE: &str = "ready";

/// A two-phase-commit site's ephemeral child, present while it is joined.
pub const ALIVE_NODE: &str = "alive";

/// The prefix of a group member named by the recipe
/// ([`Group::join_party`](crate::recipes::group::Group::join_party)).
pub const PARTY_PREFIX: &str = "p-";

/// The data a revoker writes into a holder's lock node (the recipes page's
/// "Revocable Shared Locks").
pub const REVOKE_DATA: &[u8] = b"unlock";

/// The prefix of every node Curator creates in protected mode
/// (`ProtectedUtils`): `_c_<uuid>-` then the recipe's name. A create whose
/// reply was lost finds its node again by this prefix.
pub const CURATOR_PROTECTED_PREFIX: &str = "_c_";

/// The lock name of Curator's `LeaderLatch` (`LOCK_NAME`): a participant's
/// node is `<path>/_c_<uuid>-latch-<10-digit sequence>`, ephemeral
/// sequential, holding the participant's id (UTF-8); the latch's parents are
/// created as containers.
pub const LATCH_MARKER: &str = "latch-";

/// The lock name of Curator's `InterProcessMutex`, under its `LeaderSelector`
/// (`<path>/_c_<uuid>-lock-<seq>`, the participant's id as data): the name
/// [`ZkInterProcessMutex`](crate::lock::ZkInterProcessMutex) writes in the
/// Curator dialect, read here to list a selector's participants.
pub const CURATOR_MUTEX_MARKER: &str = "lock-";

/// The node name of kazoo's `Lock`, under its `Election`
/// (`<path>/<uuid hex>__lock__<seq>`, the identifier as data): the name
/// [`ZkInterProcessMutex`](crate::lock::ZkInterProcessMutex) writes in the
/// kazoo dialect, read here to list an election's contenders.
pub const KAZOO_LOCK_MARKER: &str = "__lock__";

/// The children named `<anything><marker><sequence>` in Curator's order
/// (`StandardLockInternalsDriver.standardFixForSorting`: by what follows the
/// last `marker`), here by the parsed sequence, never by the whole string.
/// Children without the marker or a number after it are left out (Curator
/// would sort them by their whole name; none of its recipes makes them).
pub(crate) fn sorted_by_sequence_after<'a>(
    children: &'a [String],
    marker: &str,
) -> Vec<&'a String> {
    let mut v: Vec<(i64, &String)> = children
        .iter()
        .filter_map(|c| {
            let i = c.rfind(marker)?;
            Some((c[i + marker.len()..].parse().ok()?, c))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, c)| c).collect()
}

// --- Persistent nodes (tree_cache / persistent_node / lease helper) ---

/// The TTL child a [`PersistentTtlNode`](crate::recipes::persistent_node::PersistentTtlNode)
/// writes to keep its container alive (Curator's `DEFAULT_CHILD_NODE_NAME`).
pub const TTL_TOUCH_NODE: &str = "touch";

// --- The locks' dialects (re-exported by `lock`) ---
//
// Here, below `error.rs`, so that `Error::MixedDialect` carries the `Dialect`
// itself; its `FromStr` (whose error is an `Error`) is in `lock/dialect.rs`.

/// HBase's `READ_LOCK_CHILD_NODE_PREFIX`.
pub const READ_LOCK_PREFIX: &str = "read-";
/// HBase's `WRITE_LOCK_CHILD_NODE_PREFIX`.
pub const WRITE_LOCK_PREFIX: &str = "write-";

/// A lock child's sequence: by position for zklock's `<kind><tag>-<sequence>`
/// names, else from the suffix (nodes written by HBase, `<kind><identifier><sequence>`).
pub(crate) fn sequence_of_child(name: &str, prefix: &str) -> Option<i32> {
    tagged_sequence(name, prefix).or_else(|| sequence_of(name))
}

/// Whose node layout a lock speaks (default [`HBase`](Dialect::HBase)).
///
/// | | HBase (zklock's own) | Curator 5 | kazoo 2.11 |
/// |---|---|---|---|
/// | exclusive lock node | `write-<tag>-<seq>` | `_c_<uuid>-lock-<seq>` (`InterProcessMutex`) | `<uuid hex>__lock__<seq>` (`Lock`) |
/// | read/write lock nodes | `read-<tag>-<seq>` / `write-<tag>-<seq>` | `_c_<uuid>-__READ__<seq>` / `_c_<uuid>-__WRIT__<seq>` (`InterProcessReadWriteLock`) | `<uuid hex>__rlock__<seq>` / `<uuid hex>__lock__<seq>` (`ReadLock` / `WriteLock`) |
/// | node data | HBase's metadata prefix + the given bytes | the given bytes, or the local address (ASCII) when empty, as Curator's `defaultData` | the given bytes (kazoo's identifier) |
/// | parents | persistent | containers | persistent |
/// | queue order | the parsed sequence, across its wrap | Curator's: the text after the last lock name, as strings, every child of the directory taking part | kazoo's: the `-?\d{10}` after `__lock__`/`__rlock__`, as strings; other names ignored |
/// | an exclusive waiter watches | its predecessor | its predecessor | its nearest lower contender (`Lock`: `__lock__` only; `WriteLock`: both kinds) |
/// | a reader watches | the nearest lower writer | the nearest lower writer (Curator's own reader watches the *first* writer: zklock's choice is compatible and wakes no pile-up of readers when that writer goes) | the nearest lower writer |
///
/// The `<tag>`/`<uuid>` is new for every attempt: a create whose reply was lost
/// is found by it and adopted or removed (Curator's protected mode, kazoo's
/// `_find_node`), never made twice and never left behind.
///
/// # Mixed directories are refused
/// The layouts do not see each other: Curator sorts kazoo's nodes after all of
/// its own (it orders by the text after the last `lock-`, which kazoo's names
/// lack), kazoo ignores Curator's (its pattern matches only `__lock__<seq>`),
/// HBase's ignores both. Two holders of different dialects would hold the lock
/// at once. So every listing of a zklock attempt — the first one comes back
/// with its create, in the same round trip — is checked for nodes of another
/// dialect ([`Dialect::of_node`]); if there is one, the attempt removes its own
/// node and fails with [`Error::MixedDialect`](crate::Error::MixedDialect). Of two zklock participants of
/// different dialects, at most one goes on: each lists after its own create,
/// so the one that lists second sees the other's node unless that one has
/// already refused and removed it (two that start at once usually both
/// refuse). A later one refuses. (A native Curator or kazoo client does not
/// check: a zklock participant already holding in a directory that such a
/// client of another dialect joins keeps holding.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Dialect {
    /// HBase's `read-`/`write-` layout (zklock's own).
    #[default]
    HBase,
    /// Apache Curator 5's `InterProcessMutex` / `InterProcessReadWriteLock`.
    Curator,
    /// kazoo 2.11's `Lock` / `ReadLock` / `WriteLock`.
    Kazoo,
}

impl Dialect {
    /// Every dialect.
    pub const ALL: [Dialect; 3] = [Dialect::HBase, Dialect::Curator, Dialect::Kazoo];

    /// Its name: `hbase`, `curator` or `kazoo`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::HBase => "hbase",
            Dialect::Curator => "curator",
            Dialect::Kazoo => "kazoo",
        }
    }

    /// The dialect a lock node's name is written in, or `None` when it is none
    /// of them (other recipes' nodes, garbage):
    /// - Curator: a protected name (`_c_…`), or a name ending in `lock-`,
    ///   `__READ__`, `__WRIT__` or `latch-` and a sequence;
    /// - HBase: `read-`/`write-` and a sequence;
    /// - kazoo: a name ending in `__lock__` or `__rlock__` and a sequence.
    pub fn of_node(name: &str) -> Option<Dialect> {
        if name.starts_with(CURATOR_PROTECTED_PREFIX) {
            return Some(Dialect::Curator);
        }
        if (name.starts_with(HBASE_READ) || name.starts_with(HBASE_WRITE))
            && sequence_of_child(
                name,
                if name.starts_with(HBASE_READ) {
                    HBASE_READ
                } else {
                    HBASE_WRITE
                },
            )
            .is_some()
        {
            return Some(Dialect::HBase);
        }
        let ends_in = |lock_name: &str| {
            name.rsplit_once(lock_name)
                .is_some_and(|(_, s)| parse_sequence(s).is_some())
        };
        if [KAZOO_LOCK, KAZOO_READ].into_iter().any(ends_in) {
            return Some(Dialect::Kazoo);
        }
        if [CURATOR_LOCK, CURATOR_READ, CURATOR_WRITE, LATCH_MARKER]
            .into_iter()
            .any(ends_in)
        {
            return Some(Dialect::Curator);
        }
        None
    }
}

impl Dialect {
    /// The dialect a semaphore's lease node's name is written in, or `None`:
    /// - HBase (zklock's own): `lease-<tag>-<seq>` in `<p>/leases`;
    /// - Curator: a protected name (`_c_<uuid>-lease-<seq>`) in `<p>/leases`;
    /// - kazoo: `<uuid hex>` (32 hex digits) directly under `<p>`.
    pub fn of_lease(name: &str) -> Option<Dialect> {
        if name.starts_with(CURATOR_PROTECTED_PREFIX) {
            Some(Dialect::Curator)
        } else if tagged_sequence(name, LEASE_PREFIX).is_some() {
            Some(Dialect::HBase)
        } else if name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
            Some(Dialect::Kazoo)
        } else {
            None
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The prefix of a lease node in zklock's layout: `lease-<tag>-<seq>`
/// (Curator's lease name: `_c_<uuid>-lease-<seq>`).
pub const LEASE_PREFIX: &str = "lease-";
/// HBase's read lock name.
pub(crate) const HBASE_READ: &str = READ_LOCK_PREFIX;
/// HBase's write lock name.
pub(crate) const HBASE_WRITE: &str = WRITE_LOCK_PREFIX;
/// `InterProcessMutex`'s lock name.
pub(crate) const CURATOR_LOCK: &str = CURATOR_MUTEX_MARKER;
/// `InterProcessReadWriteLock.READ_LOCK_NAME`.
pub(crate) const CURATOR_READ: &str = "__READ__";
/// `InterProcessReadWriteLock.WRITE_LOCK_NAME`.
pub(crate) const CURATOR_WRITE: &str = "__WRIT__";
/// kazoo's `Lock._NODE_NAME` / `WriteLock._NODE_NAME`.
pub(crate) const KAZOO_LOCK: &str = KAZOO_LOCK_MARKER;
/// kazoo's `ReadLock._NODE_NAME`.
pub(crate) const KAZOO_READ: &str = "__rlock__";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curator_order_is_by_the_sequence_after_the_last_marker() {
        let c: Vec<String> = [
            "_c_b-latch-0000000010",
            "_c_a-latch-0000000002",
            "foo",
            "_c_latch-x-latch-0000000003",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let s: Vec<&str> = sorted_by_sequence_after(&c, LATCH_MARKER)
            .iter()
            .map(|s| s.as_str())
            .collect();
        assert_eq!(
            s,
            [
                "_c_a-latch-0000000002",
                "_c_latch-x-latch-0000000003",
                "_c_b-latch-0000000010"
            ]
        );
    }
}
