//! Work that must not block, shared by the locks and the recipes: a one-shot
//! reaction to the next reconnect, and removing a node in the background (tried
//! again after the reconnect when the connection is lost first). Both live on
//! the watcher's session hooks, never in the user's listener registry, and hold
//! the watcher weakly.

use std::sync::{Arc, Weak};

use log::{info, warn};
use parking_lot::Mutex;

use crate::client::ZooKeeper;
use crate::error::ZkError;
use crate::types::{KeeperState, State as ClientState};
use crate::watcher::{SessionHook, WeakZooKeeperWatcher};

type Reaction = Box<dyn FnOnce(bool) + Send>;

/// Runs `f(true)` once on the event thread at the next `SyncConnected` (or at
/// once when connected now), `f(false)` when the session ends first. Held by
/// the watcher's hook list, never by the user's listener registry.
pub(crate) fn on_reconnect(zkw: &WeakZooKeeperWatcher, f: impl FnOnce(bool) + Send + 'static) {
    let hook = Arc::new_cyclic(|me| Once {
        f: Mutex::new(Some(Box::new(f))),
        zkw: zkw.clone(),
        id: Mutex::new(None),
        me: me.clone(),
    });
    let id = zkw.add_owned_hook(hook.clone());
    let fired = hook.f.lock().is_none();
    *hook.id.lock() = id;
    if fired || id.is_none() {
        hook.unsubscribe();
        if id.is_none() {
            hook.fire(false);
        }
        return;
    }
    if zkw
        .zookeeper()
        .is_some_and(|zk| zk.state() == ClientState::Connected)
    {
        hook.fire(true);
    }
}

struct Once {
    f: Mutex<Option<Reaction>>,
    zkw: WeakZooKeeperWatcher,
    id: Mutex<Option<u64>>,
    me: Weak<Once>,
}

impl Once {
    fn fire(&self, connected: bool) {
        let f = self.f.lock().take();
        if let Some(f) = f {
            self.unsubscribe();
            f(connected);
        }
    }

    fn unsubscribe(&self) {
        let id = self.id.lock().take();
        if let Some(id) = id {
            let _me = self.me.upgrade();
            self.zkw.remove_hook(id);
        }
    }
}

impl SessionHook for Once {
    fn session_event(&self, state: KeeperState) {
        match state {
            KeeperState::SyncConnected => self.fire(true),
            KeeperState::Expired | KeeperState::Closed | KeeperState::AuthFailed => {
                self.fire(false)
            }
            _ => {}
        }
    }
}

/// Deletes `path` (any version) without waiting on the network: an
/// asynchronous delete, tried again after the reconnect when the connection is
/// lost first; nothing to do when the session ends (an ephemeral node goes with
/// it). `done` runs once settled here.
pub(crate) fn remove_in_background(
    zkw: &WeakZooKeeperWatcher,
    path: String,
    done: Box<dyn FnOnce() + Send>,
) {
    let Some(zk) = zkw.zookeeper() else {
        return done();
    };
    remove_in_session(&zk, zkw, path, done);
}

/// [`remove_in_background`] in `zk`'s session: with a handle pinned to one
/// session (`ZooKeeper::pinned`) the delete never reaches a session that
/// replaced it (a renewal); the retry after a reconnect is dropped when the
/// session ends first.
pub(crate) fn remove_in_session(
    zk: &ZooKeeper,
    zkw: &WeakZooKeeperWatcher,
    path: String,
    done: Box<dyn FnOnce() + Send>,
) {
    if zk.state().is_terminal() {
        return done();
    }
    let again = zkw.clone();
    let zk = zk.clone();
    zk.clone().delete_async(&path.clone(), None, move |r| {
        match r {
            Err(e) if e.is_retryable() => {
                info!("will remove {path} when the connection is back");
                let (w, zk) = (again.clone(), zk.clone());
                on_reconnect(&again, move |connected| {
                    if connected {
                        remove_in_session(&zk, &w, path, Box::new(|| {}));
                    }
                });
            }
            Err(e) if !e.is(ZkError::NoNode) && !e.is_fatal() => {
                warn!("could not remove {path}: {e}")
            }
            _ => {}
        }
        done();
    });
}

/// [`remove_in_background`], waiting up to 250 ms for the answer.
pub(crate) fn remove_and_wait(zkw: &WeakZooKeeperWatcher, path: String) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    remove_in_background(
        zkw,
        path,
        Box::new(move || {
            let _ = tx.try_send(());
        }),
    );
    let _ = rx.recv_timeout(std::time::Duration::from_millis(250));
}
