//! Recipes from ZooKeeper's "Recipes and Solutions" page
//! (<https://zookeeper.apache.org/doc/r3.8.0/recipes.html>) and its Java recipe
//! code (`org.apache.zookeeper.recipes.*`), plus HBase's `ZKLeaderManager`,
//! blocking, on a [`ZooKeeperWatcher`](crate::ZooKeeperWatcher). Where Java has
//! a recipe, zklock uses its node layout, so Java and Rust participants meet in
//! one directory.
//!
//! Every recipe waits as the [locks](crate::lock) do: the waiting thread makes
//! the ZooKeeper calls; a watch wakes it through a per-watch watcher passed with
//! the request (never the `ZooKeeperWatcher`'s listener registry, never a
//! blocking call on the event thread); every wait takes a `Duration` or ends
//! with the session (`SessionExpired`, `Closed`), and with `ConnectionLoss`
//! when the connection stays down for a whole session timeout. No exit leaves an
//! orphan node (drops remove nodes in the background).

mod node;

pub mod barrier;
pub mod double_barrier;
pub mod election;
pub mod group;
pub mod layout;
pub mod leader_manager;
pub mod priority_queue;
pub mod queue;
pub mod revocable;
pub mod two_phase_commit;
pub mod write_lock;
