//! The engine room: the mechanisms every lock and recipe shares, each
//! written once. A floor below [`lock`](crate::lock) and
//! [`recipes`](crate::recipes) (it imports neither), above the client, the
//! recoverable handle and the watcher.
//!
//! | file | job |
//! |---|---|
//! | `wait.rs` | the one wait engine: rounds over a [`Wake`](wake::Wake), the per-watch watcher, the bounds of a timed call (loom-checked through its real `wait()`) |
//! | `wake.rs` | the generation counter a wait waits on, and the waits a session's end wakes |
//! | `call.rs` | the session a blocking call began in, pinned (what a wait is told) |
//! | `background.rs` | reconnect hooks and work run after a reconnect, in the same session |
//! | `held.rs` | one held watch: armed with its request (or a user's chain of requests); `NoNode` gone, a lost connection armed again after the reconnect in the session the user names (at once within a retry budget while connected, for the tracker), any other error ends it, by default: a user may sort the errors its own way, and gets the context it captured at send time (each user keeps its reaction; used by the lock's node watch, the revocation's, the rounds, the leader manager's check, the tracker and the deletion listener) |
//! | `owned.rs` | one way to own and remove a node: create under a mark, find it after a lost reply, remove by name or by tag |
//! | `session_node.rs` | a node a recipe creates for its caller, bound to the session that created it: its writes and deletes reach that session only, guarded by its creation zxid |
//! | `hook.rs` | the test-hook seam (zero cost without the feature `testing`) |

pub(crate) mod background;
pub(crate) mod call;
pub(crate) mod held;
pub(crate) mod hook;
pub(crate) mod owned;
pub(crate) mod session_node;
pub(crate) mod wait;
pub(crate) mod wake;
