//! Removing a failed or abandoned attempt's node without blocking: asynchronous
//! calls answered on the event thread, finished after a reconnect when the
//! connection is lost first (Curator's "guaranteed delete").

use std::sync::{Arc, Weak};
use std::time::Duration;

use log::{info, warn};
use parking_lot::Mutex;

use crate::client::{KeeperState, State as ClientState, WatchedEvent};
use crate::error::ZkError;
use crate::listener::ZooKeeperListener;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// What a failed attempt left behind: its node, or (when the create's reply was
/// lost) the tagged prefix its node carries.
#[derive(Debug, Clone)]
pub(super) enum Attempt {
    Node(String),
    Tag(String),
}

/// Removes an attempt's node once the connection is back, when removing it
/// failed with a recoverable error (Curator's "guaranteed delete"). Registered
/// on the watcher; unregisters itself when done or when the session ends (its
/// ephemeral node then goes with it).
struct Sweeper {
    attempt: Attempt,
    zkw: Mutex<Option<ZooKeeperWatcher>>,
    me: Mutex<Weak<Sweeper>>,
}

impl Sweeper {
    fn start(zkw: &ZooKeeperWatcher, attempt: Attempt) {
        if zkw.state().is_terminal() {
            return; // ephemeral: gone with the session
        }
        let sweeper = Arc::new(Sweeper {
            attempt,
            zkw: Mutex::new(Some(zkw.clone())),
            me: Mutex::new(Weak::new()),
        });
        *sweeper.me.lock() = Arc::downgrade(&sweeper);
        info!(
            "will remove {:?} when the connection is back",
            sweeper.attempt
        );
        zkw.register_listener(sweeper.clone());
        // Reconnected before the registration: do not wait for the next time.
        if zkw.state() == ClientState::Connected {
            sweeper.sweep();
        }
    }

    /// Hands the removal back to `remove_async` (which starts a new sweeper if it
    /// fails again) and retires this one.
    fn sweep(&self) {
        if let Some(zkw) = self.finish() {
            let (done, _) = crossbeam_channel::bounded(1);
            remove_async(zkw, self.attempt.clone(), done);
        }
    }

    fn finish(&self) -> Option<ZooKeeperWatcher> {
        let zkw = self.zkw.lock().take()?;
        if let Some(me) = self.me.lock().upgrade() {
            let me: Arc<dyn ZooKeeperListener> = me;
            zkw.unregister_listener(&me);
        }
        Some(zkw)
    }
}

impl ZooKeeperListener for Sweeper {
    fn connection_event(&self, event: &WatchedEvent) {
        match event.keeper_state {
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
pub(super) fn remove_async(
    zkw: ZooKeeperWatcher,
    attempt: Attempt,
    done: crossbeam_channel::Sender<()>,
) {
    let zk = zkw.zookeeper().clone();
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
                        remove_async(zkw, Attempt::Node(zkutil::join_znode(&parent, c)), done)
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
    remove_async(zkw.clone(), attempt, done);
    let _ = removed.recv_timeout(REMOVAL_WAIT);
}

/// Removes `attempt`'s node in the background: returns at once.
pub(super) fn remove_in_background(zkw: &ZooKeeperWatcher, attempt: Attempt) {
    if zkw.state().is_terminal() {
        return;
    }
    let (done, _) = crossbeam_channel::bounded(1);
    remove_async(zkw.clone(), attempt, done);
}
