//! Work that must not block, shared by the locks and the recipes: a one-shot
//! reaction to the next reconnect (the removal API of `owned.rs` sends a
//! removal again with it when the connection is lost first). It lives on the
//! watcher's session hooks, never in the user's listener registry, and holds
//! the watcher weakly.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::types::{KeeperState, State as ClientState};
use crate::watcher::{SessionHook, WeakZooKeeperWatcher};

type Reaction = Box<dyn FnOnce(bool) + Send>;

/// Runs `f(true)` once on the event thread at the next `SyncConnected` (or at
/// once when connected now), `f(false)` when the session ends first. A
/// read-only server (`ConnectedReadOnly`) is no reconnect here: what waits
/// for one (a held node's watch, a removal) needs a server of the quorum. Held by
/// the watcher's hook list, never by the user's listener registry.
pub(crate) fn on_reconnect(zkw: &WeakZooKeeperWatcher, f: impl FnOnce(bool) + Send + 'static) {
    reconnect_hook(zkw, true, f)
}

/// [`on_reconnect`] at the next `SyncConnected` only, also when connected now
/// (a held watch whose retry budget is spent, see
/// [`held`](crate::engine::held)).
pub(crate) fn on_next_connect(zkw: &WeakZooKeeperWatcher, f: impl FnOnce(bool) + Send + 'static) {
    reconnect_hook(zkw, false, f)
}

fn reconnect_hook(
    zkw: &WeakZooKeeperWatcher,
    at_once: bool,
    f: impl FnOnce(bool) + Send + 'static,
) {
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
    if at_once
        && zkw
            .zookeeper()
            .is_some_and(|zk| zk.state() == ClientState::Connected && !zk.is_read_only())
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
