//! [`EnsembleTracker`]: follows the ensemble's configuration and keeps the
//! client's server list in step (Curator's `EnsembleTracker`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::client::{ClientConfig, EventType, KeeperState, WatchedEvent, Watcher, WeakZooKeeper};
use crate::listener::ZooKeeperListener;
use crate::watcher::{ListenerRegistration, ZooKeeperWatcher};

/// Follows `/zookeeper/config` and gives each new configuration's client
/// addresses to [`ZooKeeper::update_server_list`](crate::client::ZooKeeper::update_server_list):
/// Curator's `EnsembleTracker` (HBase has none). Made by
/// [`ZooKeeperWatcher::track_ensemble`]; it follows until dropped.
///
/// It reads the configuration with a watch, without blocking (its reads
/// are asynchronous: the event thread never waits for them); each change
/// reads it again. A read lost to a disconnection is made again at the
/// next `SyncConnected`, and after a [session
/// renewal](crate::ZooKeeperWatcherBuilder::with_session_renewal). A
/// configuration without client addresses (a standalone server, members
/// configured without a client port) leaves the list alone, as Curator
/// does. Members are named as the configuration names them (a wildcard
/// client address becomes the member's quorum host; see
/// [`QuorumServer::connect_address`](crate::client::QuorumServer::connect_address)).
///
/// # Examples
/// ```no_run
/// use zklock::ZooKeeperWatcher;
/// let zkw = ZooKeeperWatcher::connect("10.0.0.1:2181,10.0.0.2:2181", "svc", None)?;
/// let tracker = zkw.track_ensemble();
/// // ... members added and removed by reconfig reach the client's list ...
/// println!("{:?}", tracker.config());
/// # Ok::<(), zklock::Error>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the tracker stops it: keep it as long as the client should follow the ensemble"]
pub struct EnsembleTracker {
    inner: Arc<Inner>,
    _registration: ListenerRegistration,
}

struct Inner {
    zk: WeakZooKeeper,
    /// Set on drop: a watch still registered is ignored when it fires.
    stopped: AtomicBool,
    /// A read failed (or never succeeded): read at the next connect.
    stale: AtomicBool,
    /// The last configuration applied.
    config: Mutex<Option<ClientConfig>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnsembleTracker")
            .field("config", &*self.config.lock())
            .finish_non_exhaustive()
    }
}

/// The watch on `/zookeeper/config`; holds the tracker weakly, so that a
/// watch still set after the tracker's drop keeps nothing alive.
struct ConfigWatch(Weak<Inner>);

impl Watcher for ConfigWatch {
    fn process(&self, event: WatchedEvent) {
        let Some(inner) = self.0.upgrade() else {
            return;
        };
        match event.event_type {
            EventType::NodeDataChanged | EventType::NodeCreated => Inner::read(&inner),
            // A connection event: the listener handles reconnects.
            _ => {}
        }
    }
}

/// The tracker's listener: reads again after a reconnect that follows a
/// failed read, and after a session renewal.
struct Reconnects(Weak<Inner>);

impl ZooKeeperListener for Reconnects {
    fn connection_event(&self, event: &WatchedEvent) {
        if event.keeper_state != KeeperState::SyncConnected {
            return;
        }
        if let Some(inner) = self.0.upgrade() {
            if inner.stale.load(Ordering::SeqCst) {
                Inner::read(&inner);
            }
        }
    }

    fn session_renewed(&self) {
        if let Some(inner) = self.0.upgrade() {
            Inner::read(&inner);
        }
    }
}

impl Inner {
    /// Reads the configuration with a watch (asynchronously) and applies it.
    fn read(me: &Arc<Inner>) {
        if me.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Some(zk) = me.zk.upgrade() else {
            return;
        };
        let watch: Arc<dyn Watcher> = Arc::new(ConfigWatch(Arc::downgrade(me)));
        let weak = Arc::downgrade(me);
        let zk2 = zk.downgrade();
        zk.get_config_async(Some(watch), move |result| {
            let Some(me) = weak.upgrade() else {
                return;
            };
            match result {
                Ok((config, _)) => {
                    me.stale.store(false, Ordering::SeqCst);
                    if let Some(zk) = zk2.upgrade() {
                        me.apply(&zk, config);
                    }
                }
                Err(e) => {
                    // Read again at the next SyncConnected.
                    me.stale.store(true, Ordering::SeqCst);
                    log::debug!("ensemble tracker: reading the configuration: {e}");
                }
            }
        });
    }

    fn apply(&self, zk: &crate::client::ZooKeeper, config: ClientConfig) {
        if self.stopped.load(Ordering::SeqCst) {
            return;
        }
        let servers = config.connect_string();
        let mut last = self.config.lock();
        let changed = last
            .as_ref()
            .map_or(true, |l| l.connect_string() != servers);
        log::debug!("ensemble tracker: configuration {:#x}", config.version());
        if !servers.is_empty() && changed {
            match zk.update_server_list(&servers) {
                Ok(_) => log::info!(
                    "ensemble tracker: configuration {:#x}, servers {servers}",
                    config.version()
                ),
                Err(e) => log::warn!("ensemble tracker: cannot use {servers}: {e}"),
            }
        }
        *last = Some(config);
    }
}

impl EnsembleTracker {
    pub(crate) fn start(zkw: &ZooKeeperWatcher) -> EnsembleTracker {
        let inner = Arc::new(Inner {
            zk: zkw.zookeeper().downgrade(),
            stopped: AtomicBool::new(false),
            stale: AtomicBool::new(true),
            config: Mutex::new(None),
        });
        let registration = zkw.listen(Arc::new(Reconnects(Arc::downgrade(&inner))));
        Inner::read(&inner);
        EnsembleTracker {
            inner,
            _registration: registration,
        }
    }

    /// The last configuration read (`None` before the first answer).
    pub fn config(&self) -> Option<ClientConfig> {
        self.inner.config.lock().clone()
    }
}

impl Drop for EnsembleTracker {
    /// Stops following: a watch still set is ignored when it fires (it is
    /// not removed from the server: at most one more notification).
    fn drop(&mut self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
    }
}
