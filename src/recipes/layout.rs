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
//!
//! The names are defined below the locks and the recipes, in the crate's
//! one module of node names (`src/names.rs`: the locks' dialects share
//! Curator's protected prefix with the recipes), and re-exported here. A
//! lock's layout is decided in `lock/dialect.rs`.

pub(crate) use crate::names::sorted_by_sequence_after;
pub use crate::names::{
    ALIVE_NODE, CURATOR_MUTEX_MARKER, CURATOR_PROTECTED_PREFIX, ITEM_PREFIX, KAZOO_LOCK_MARKER,
    LATCH_MARKER, MEMBER_PREFIX, PARTY_PREFIX, PRIORITY_PREFIX, READY_NODE, RECEIPTS_SUFFIX,
    RECEIPT_PREFIX, REVOKE_DATA, TAKERS_SUFFIX, TTL_TOUCH_NODE,
};
