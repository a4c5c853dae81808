//! The recipes' node names, in one place: each is the name upstream's
//! implementation uses (ZooKeeper's Java recipes, or the recipes page), so
//! that Java and Rust participants meet in one directory.
//!
//! | recipe | node | name |
//! |---|---|---|
//! | [`DistributedQueue`](super::queue::DistributedQueue) | an item | `<dir>/qn-<10-digit sequence>` (Java's `DistributedQueue`) |
//! | [`DistributedPriorityQueue`](super::priority_queue::DistributedPriorityQueue) | an item | `<dir>/pq-<10-digit priority>-<10-digit sequence>` |
//! | [`DistributedQueue`](super::queue::DistributedQueue), [`DistributedPriorityQueue`](super::priority_queue::DistributedPriorityQueue) | idle consumers queue up | a write lock (HBase's layout) at `<dir>-takers`, beside the queue (Java's consumers would log every foreign child of `<dir>`) |
//! | [`DistributedQueue`](super::queue::DistributedQueue), [`DistributedPriorityQueue`](super::priority_queue::DistributedPriorityQueue) | a consumer's receipt (exactly-once claims) | `<dir>-receipts/receipt-<session id hex>-<instance>`, ephemeral, one per consumer instance and session; data: the path of the last item taken |
//! | [`DoubleBarrier`](super::double_barrier::DoubleBarrier) | a member | `<path>/m-<tag><10-digit sequence>`, ephemeral |
//! | [`DoubleBarrier`](super::double_barrier::DoubleBarrier) | the barrier is full | `<path>/ready`, persistent, data: the name of the highest member of its round (a stale `ready` names a round whose members are gone); each one made increments `<path>`'s data version |
//! | [`TwoPhaseCommit`](super::two_phase_commit::TwoPhaseCommit) | a site is alive | `<path>/<site>/alive`, ephemeral |
//! | [`Group`](super::group::Group) | a party member named by the recipe | `<path>/p-<tag><10-digit sequence>`, ephemeral sequential (the tag makes a retried create find its node; kazoo's `Party` names its members with a uuid) |
//! | [`RevocableLock`](super::revocable::RevocableLock) | a revocation request | the data `unlock` written into the holder's lock node |
//! | [`LeaderLatch`](super::leader_latch::LeaderLatch) | a participant (Curator's `LeaderLatch`) | `<path>/_c_<uuid>-latch-<10-digit sequence>`, ephemeral sequential, data: the participant's id (UTF-8); parents created as containers; ordered by the sequence after the last `latch-` |
//! | [`LeaderSelector`](super::leader_selector::LeaderSelector) (Curator) | a participant (Curator's `LeaderSelector`) | Curator's `InterProcessMutex` at `<path>`: `<path>/_c_<uuid>-lock-<10-digit sequence>`, ephemeral sequential, data: the id (the local address when empty); container parents |
//! | [`LeaderSelector`](super::leader_selector::LeaderSelector) (kazoo) | a contender (kazoo's `Election`) | kazoo's `Lock` at `<path>`: `<path>/<uuid hex>__lock__<10-digit sequence>`, ephemeral sequential, data: the identifier; persistent parents |
//! | [`Counter`](super::counter::Counter) | kazoo's `Counter` | `<path>` itself (persistent, parents persistent), data: `repr(value)` in ASCII (`42`, `2.5`), empty = the default |
//! | [`Counter::curator`](super::counter::Counter::curator) | kazoo's `Counter(support_curator=True)` = Curator's `SharedCount` | `<path>` itself, data: a 4-byte big-endian `int` |
//! | [`SharedCount`](super::counter::SharedCount), [`DistributedAtomicLong`](super::counter::DistributedAtomicLong) | Curator's | `<path>` itself, data: a 4-byte / 8-byte big-endian integer |
//! | [`PersistentNode`](super::persistent_node::PersistentNode) (sequential modes) | the node | `<parent>/_c_<uuid>-<name><10-digit sequence>` (Curator's protected name; the uuid finds the node of a create whose reply was lost) |
//! | [`PersistentTtlNode`](super::persistent_node::PersistentTtlNode) | keeps the container alive | `<path>/touch`, a TTL node written every TTL / 2 (Curator's `PersistentTtlNode`) |

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
/// ([`Group::join_party`](super::group::Group::join_party)).
pub const PARTY_PREFIX: &str = "p-";

/// The data a revoker writes into a holder's lock node (the recipes page's
/// "Revocable Shared Locks").
pub const REVOKE_DATA: &[u8] = b"unlock";

/// The prefix of every node Curator creates in protected mode
/// (`ProtectedUtils`): `_c_<uuid>-` then the recipe's name. A create whose
/// reply was lost finds its node again by this prefix.
pub const CURATOR_PROTECTED_PREFIX: &str = crate::owned::PROTECTED_PREFIX;

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

/// A fresh protected-mode prefix `_c_<uuid>-` (a random version-4 UUID in
/// Java's `UUID.toString()` form, as Curator's `ProtectedUtils` writes it).
pub(crate) fn curator_protected_prefix() -> String {
    crate::owned::OwnerMark::new().protected_prefix()
}

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

/// The TTL child a [`PersistentTtlNode`](super::persistent_node::PersistentTtlNode)
/// writes to keep its container alive (Curator's `DEFAULT_CHILD_NODE_NAME`).
pub const TTL_TOUCH_NODE: &str = "touch";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protected_prefix_is_curators() {
        let p = curator_protected_prefix();
        // "_c_" + 36 + "-"
        assert_eq!(p.len(), 3 + 36 + 1, "{p}");
        let uuid = &p[3..39];
        let groups: Vec<&str> = uuid.split('-').collect();
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(groups[2].starts_with('4'), "{p}");
        assert!("89ab".contains(&groups[3][..1]), "{p}");
        assert_ne!(p, curator_protected_prefix());
    }

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
