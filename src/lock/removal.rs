//! An attempt that ends without its grant: its node (or, after a lost create
//! reply, the tagged name it may carry) is removed through the crate's one
//! way to settle what a failed attempt left (`owned`'s [`Attempt`]), and the
//! attempt's outcome is decided.

pub(super) use crate::engine::owned::{remove_and_wait, remove_in_background, Attempt};
use crate::watcher::ZooKeeperWatcher;

/// An attempt that ends without its grant: removes what it left (waiting up
/// to [`REMOVAL_WAIT`](crate::engine::owned::REMOVAL_WAIT)) and returns its outcome, an error that the attempt's
/// call bound cut short made a timeout (`Ok(None)`). `ended` is `Ok(())` for
/// a wait that ran out. `remove` false leaves the attempt alone (an error
/// that cannot have left a node).
pub(super) fn abandon<T>(
    zkw: &ZooKeeperWatcher,
    attempt: Attempt,
    ended: crate::Result<()>,
    bounds: &crate::engine::wait::Bounds,
    remove: bool,
) -> crate::Result<Option<T>> {
    if remove {
        remove_and_wait(zkw, attempt);
    }
    match ended {
        Ok(()) => Ok(None),
        Err(e) if bounds.cut_short(&e) => Ok(None),
        Err(e) => Err(e),
    }
}
