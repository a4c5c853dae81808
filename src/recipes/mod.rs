//! Recipes from ZooKeeper's "Recipes and Solutions" page
//! (<https://zookeeper.apache.org/doc/r3.8.0/recipes.html>), blocking, on a
//! [`ZooKeeperWatcher`](crate::ZooKeeperWatcher).
//!
//! Every recipe waits as the [locks](crate::lock) do: the waiting thread makes
//! the ZooKeeper calls; a watch wakes it through a per-watch watcher passed with
//! the request (never the `ZooKeeperWatcher`'s listener registry, never a
//! blocking call on the event thread); every wait takes a `Duration` or ends
//! with the session (`SessionExpired`, `Closed`), and with `ConnectionLoss`
//! when the connection stays down for a whole session timeout.

mod waiting;

pub mod barrier;
pub mod double_barrier;
pub mod group;
pub mod priority_queue;
pub mod queue;
pub mod two_phase_commit;
