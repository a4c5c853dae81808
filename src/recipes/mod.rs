//! Recipes from ZooKeeper's "Recipes and Solutions" page
//! (<https://zookeeper.apache.org/doc/r3.8.0/recipes.html>) and its Java recipe
//! code (`org.apache.zookeeper.recipes.*`), plus HBase's `ZKLeaderManager`,
//! blocking, on a [`ZooKeeperWatcher`](crate::ZooKeeperWatcher). Where Java has
//! a recipe, zklock uses its node layout, so Java and Rust participants meet in
//! one directory.
//!
//! Every recipe waits as the [locks](crate::lock) do, on the one wait engine
//! (`src/engine/wait.rs`): the waiting thread makes the ZooKeeper calls; a watch
//! wakes it through a per-watch watcher passed with the request (never the
//! `ZooKeeperWatcher`'s listener registry, never a blocking call on the event
//! thread); a wake-up is a generation counter, so no thread's wait can swallow
//! another's; an idle waiter never wakes up by itself (the session's end wakes
//! it directly). Every wait takes a `Duration` or ends with the session
//! (`SessionExpired`, `Closed`), and with `ConnectionLoss` when the connection
//! stays down for a whole session timeout.
//!
//! A wait belongs to the session it began in: when that session expires it
//! ends with `SessionExpired`, also when `with_session_renewal` has opened a
//! new session meanwhile (every call of the wait is made in its own session).
//! The nodes a recipe creates for its caller (a group member, a barrier
//! entry, a vote) are bound to their session the same way, and their writes
//! and deletes are guarded, so they never touch another session's node. No
//! exit leaves an orphan node (drops remove nodes in the background). Node
//! names are listed in [`layout`].

mod candidate;
mod node;
mod rounds;
mod take;

pub mod barrier;
pub mod counter;
pub mod double_barrier;
pub mod election;
pub mod group;
pub mod layout;
pub mod leader_latch;
pub mod leader_manager;
pub mod leader_selector;
pub mod lease;
pub mod persistent_node;
pub mod priority_queue;
pub mod queue;
pub mod revocable;
pub mod tree_cache;
pub mod two_phase_commit;
pub mod write_lock;

/// Where a test can hold a recipe's waiting thread (feature `testing`).
pub use crate::engine::wait::WaitStep;
pub use candidate::LeadershipEvent;
