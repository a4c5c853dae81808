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
//! | [`DoubleBarrier`](super::double_barrier::DoubleBarrier) | the barrier is full | `<path>/ready` |
//! | [`TwoPhaseCommit`](super::two_phase_commit::TwoPhaseCommit) | a site is alive | `<path>/<site>/alive`, ephemeral |
//! | [`Group`](super::group::Group) | a party member named by the recipe | `<path>/p-<tag><10-digit sequence>`, ephemeral sequential (the tag makes a retried create find its node; kazoo's `Party` names its members with a uuid) |
//! | [`RevocableLock`](super::revocable::RevocableLock) | a revocation request | the data `unlock` written into the holder's lock node |
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

// --- Persistent nodes (tree_cache / persistent_node / lease helper) ---

/// The prefix of a protected node's name (Curator's `ProtectedUtils`):
/// `_c_<uuid>-` then the name asked for (and, sequential, the sequence).
pub const PROTECTED_PREFIX: &str = "_c_";

/// The TTL child a [`PersistentTtlNode`](super::persistent_node::PersistentTtlNode)
/// writes to keep its container alive (Curator's `DEFAULT_CHILD_NODE_NAME`).
pub const TTL_TOUCH_NODE: &str = "touch";
