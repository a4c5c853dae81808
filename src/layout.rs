//! Node names of every layout zklock speaks, below the locks and the recipes
//! that both use them: the recipes' names (re-exported as
//! [`recipes::layout`](crate::recipes::layout), whose docs list them by
//! recipe) and Curator's protected-name prefix, which the locks' dialects
//! read too. A leaf module: it imports nothing of the crate but the
//! sequence helpers and the uuid.

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

/// A fresh protected-mode prefix `_c_<uuid>-` (a random version-4 UUID in
/// Java's `UUID.toString()` form, as Curator's `ProtectedUtils` writes it).
pub(crate) fn curator_protected_prefix() -> String {
    format!("{CURATOR_PROTECTED_PREFIX}{}-", crate::util::random_uuid())
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

/// The TTL child a [`PersistentTtlNode`](crate::recipes::persistent_node::PersistentTtlNode)
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
