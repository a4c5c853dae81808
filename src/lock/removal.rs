//! Removing a failed or abandoned attempt's node without blocking: asynchronous
//! calls answered on the event thread, finished after a reconnect when the
//! connection is lost first (Curator's "guaranteed delete").
//!
//! Nothing here goes through the user's listener registry or keeps the session
//! alive: a removal waiting for the reconnect is a session hook of the watcher,
//! holding it weakly.

use log::info;

use crate::background::on_reconnect;
use crate::owned::{Guard, Removal, REMOVAL_WAIT};
use crate::watcher::{WeakZooKeeperWatcher, ZooKeeperWatcher};

/// What a failed attempt left behind: its node, or (when the create's reply was
/// lost) the tagged prefix its node carries.
#[derive(Debug, Clone)]
pub(super) enum Attempt {
    Node(String),
    Tag(String),
}

/// Looks for a lost create's tagged node again once the connection is back,
/// when listing failed with a recoverable error (Curator's "guaranteed
/// delete"); nothing when the session ends first (its ephemeral node goes with
/// it).
fn sweep_after_reconnect(zkw: &WeakZooKeeperWatcher, attempt: Attempt) {
    info!("will remove {attempt:?} when the connection is back");
    let again = zkw.clone();
    on_reconnect(zkw, move |connected| {
        if connected {
            let (done, _) = crossbeam_channel::bounded(1);
            remove_async(&again, attempt, done);
        }
    });
}

/// Removes an attempt's node without blocking (async calls, answered on the event
/// thread); when the connection is lost first, it is removed after the
/// reconnect. `done` is told once the removal is settled here.
fn remove_async(zkw: &WeakZooKeeperWatcher, attempt: Attempt, done: crossbeam_channel::Sender<()>) {
    let Some(zk) = zkw.zookeeper() else {
        let _ = done.send(());
        return;
    };
    let zkw = zkw.clone();
    match attempt.clone() {
        // The one removal API (any version: the node carries this
        // attempt's tag; retried after a reconnect).
        Attempt::Node(path) => Removal::new(path, Guard::Any)
            .then(move || {
                let _ = done.send(());
            })
            .in_background(&zkw),
        Attempt::Tag(prefix) => {
            let (parent, name_prefix) = match prefix.rfind('/') {
                Some(i) => (prefix[..i.max(1)].to_string(), prefix[i + 1..].to_string()),
                None => return,
            };
            zk.get_children_async(&parent.clone(), None, move |r| match r {
                Ok(children) => {
                    // One node at most carries the tag; remove whatever does.
                    let tagged: Vec<&String> = children
                        .iter()
                        .filter(|c| c.starts_with(&name_prefix))
                        .collect();
                    if tagged.is_empty() {
                        let _ = done.send(());
                    }
                    for c in tagged {
                        let node = Attempt::Node(crate::path::join_znode(&parent, c));
                        remove_async(&zkw, node, done.clone());
                    }
                }
                Err(e) => {
                    if e.is_retryable() {
                        sweep_after_reconnect(&zkw, attempt);
                    }
                    let _ = done.send(());
                }
            })
        }
    }
}

/// Removes `attempt`'s node: waits up to [`REMOVAL_WAIT`] for it, then lets it
/// finish in the background (or after the reconnect). Never waits on the network
/// past that bound.
pub(super) fn remove_and_wait(zkw: &ZooKeeperWatcher, attempt: Attempt) {
    if zkw.state().is_terminal() {
        return; // ephemeral: gone with the session
    }
    let (done, removed) = crossbeam_channel::bounded(1);
    remove_async(&zkw.downgrade(), attempt, done);
    let _ = removed.recv_timeout(REMOVAL_WAIT);
}

/// Removes `attempt`'s node in the background: returns at once.
pub(super) fn remove_in_background(zkw: &ZooKeeperWatcher, attempt: Attempt) {
    if zkw.state().is_terminal() {
        return;
    }
    let (done, _) = crossbeam_channel::bounded(1);
    remove_async(&zkw.downgrade(), attempt, done);
}

/// An attempt that ends without its grant: removes what it left (waiting up
/// to [`REMOVAL_WAIT`]) and returns its outcome, an error that the attempt's
/// call bound cut short made a timeout (`Ok(None)`). `ended` is `Ok(())` for
/// a wait that ran out. `remove` false leaves the attempt alone (an error
/// that cannot have left a node).
pub(super) fn abandon<T>(
    zkw: &ZooKeeperWatcher,
    attempt: Attempt,
    ended: crate::Result<()>,
    bounds: &crate::wait::Bounds,
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
