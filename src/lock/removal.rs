//! Removing a failed or abandoned attempt's node without blocking: asynchronous
//! calls answered on the event thread, finished after a reconnect when the
//! connection is lost first (Curator's "guaranteed delete").
//!
//! Nothing here goes through the user's listener registry or keeps the session
//! alive: a removal waiting for the reconnect is a session hook of the watcher,
//! holding it weakly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use log::{info, warn};
use parking_lot::Mutex;

use crate::client::{KeeperState, State as ClientState};
use crate::error::ZkError;
use crate::watcher::{SessionHook, WeakZooKeeperWatcher, ZooKeeperWatcher};
use crate::zkutil;

/// What a failed attempt left behind: its node, or (when the create's reply was
/// lost) the tagged prefix its node carries.
#[derive(Debug, Clone)]
pub(super) enum Attempt {
    Node(String),
    Tag(String),
}

/// Removes an attempt's node once the connection is back, when removing it
/// failed with a recoverable error. Owned by the watcher's hook list until it is
/// done or the session ends (its ephemeral node then goes with it).
struct Sweeper {
    attempt: Attempt,
    zkw: WeakZooKeeperWatcher,
    /// The hook's id, once subscribed.
    id: Mutex<Option<u64>>,
    /// Set by the first `finish`.
    done: AtomicBool,
    me: Weak<Sweeper>,
}

impl Sweeper {
    fn start(zkw: &WeakZooKeeperWatcher, attempt: Attempt) {
        let Some(zk) = zkw.zookeeper() else {
            return; // the watcher is gone: its session's end removes the node
        };
        if zk.state().is_terminal() {
            return;
        }
        let sweeper = Arc::new_cyclic(|me| Sweeper {
            attempt,
            zkw: zkw.clone(),
            id: Mutex::new(None),
            done: AtomicBool::new(false),
            me: me.clone(),
        });
        info!(
            "will remove {:?} when the connection is back",
            sweeper.attempt
        );
        // An event may come before the id is stored (at once, if the session
        // just ended): whichever of `finish` and this sees the id removes it.
        let id = zkw.add_owned_hook(sweeper.clone());
        *sweeper.id.lock() = id;
        if sweeper.done.load(Ordering::SeqCst) {
            sweeper.unsubscribe();
        }
        // Reconnected before the subscription: do not wait for the next time.
        if zk.state() == ClientState::Connected {
            sweeper.sweep();
        }
    }

    /// Hands the removal back to `remove_async` (which starts a new sweeper if it
    /// fails again) and retires this one.
    fn sweep(&self) {
        if self.finish() {
            let (done, _) = crossbeam_channel::bounded(1);
            remove_async(&self.zkw, self.attempt.clone(), done);
        }
    }

    /// Retires the sweeper; `true` the first time.
    fn finish(&self) -> bool {
        if self.done.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.unsubscribe();
        true
    }

    fn unsubscribe(&self) {
        let id = self.id.lock().take();
        if let Some(id) = id {
            let _me = self.me.upgrade(); // alive until this call returns
            self.zkw.remove_hook(id);
        }
    }
}

impl SessionHook for Sweeper {
    fn session_event(&self, state: KeeperState) {
        match state {
            KeeperState::SyncConnected => self.sweep(),
            KeeperState::Expired | KeeperState::Closed | KeeperState::AuthFailed => {
                self.finish();
            }
            _ => {}
        }
    }
}

/// How long a failed attempt waits for its node's removal before returning; the
/// removal goes on without it (or after the reconnect).
pub(super) const REMOVAL_WAIT: Duration = Duration::from_millis(250);

/// Removes an attempt's node without blocking (async calls, answered on the event
/// thread); when the connection is lost first, a [`Sweeper`] removes it after the
/// reconnect. `done` is told once the removal is settled here.
fn remove_async(zkw: &WeakZooKeeperWatcher, attempt: Attempt, done: crossbeam_channel::Sender<()>) {
    let Some(zk) = zkw.zookeeper() else {
        let _ = done.send(());
        return;
    };
    let zkw = zkw.clone();
    match attempt.clone() {
        Attempt::Node(path) => zk.delete_async(&path.clone(), None, move |r| {
            match r {
                Err(e) if e.is_retryable() => Sweeper::start(&zkw, attempt),
                Err(e) if !e.is(ZkError::NoNode) && !e.is_fatal() => {
                    warn!("could not remove lock node {path}: {e}")
                }
                _ => {}
            }
            let _ = done.send(());
        }),
        Attempt::Tag(prefix) => {
            let (parent, name_prefix) = match prefix.rfind('/') {
                Some(i) => (prefix[..i.max(1)].to_string(), prefix[i + 1..].to_string()),
                None => return,
            };
            zk.get_children_async(&parent.clone(), None, move |r| match r {
                Ok(children) => match children.iter().find(|c| c.starts_with(&name_prefix)) {
                    Some(c) => {
                        remove_async(&zkw, Attempt::Node(zkutil::join_znode(&parent, c)), done)
                    }
                    None => {
                        let _ = done.send(());
                    }
                },
                Err(e) => {
                    if e.is_retryable() {
                        Sweeper::start(&zkw, attempt);
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
