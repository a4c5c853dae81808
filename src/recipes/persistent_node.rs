//! A node that stays created (Curator's `PersistentNode`, how services
//! register themselves): created with its data, re-created after the session
//! that held it expired (on the session `with_session_renewal` opens) or after
//! someone deleted it, and removed on close.
//!
//! # How
//! One background thread per node (named `zklock-persistent-node`) makes
//! every call: it creates the node, sets an `exists` watch on it, and waits
//! on the wait engine's wake-up counter, which the watch and the session's
//! state events bump from the event thread (never a call there). While the
//! session is down it looks again every 200 ms until the (renewed) session
//! answers. Nothing else polls.
//!
//! # Protection against the lost-create duplicate
//! The node has a fixed name, so a create whose reply was lost and is
//! retried finds `NodeExists`: the node is this recipe's when its
//! `ephemeralOwner` is the current session (ephemeral) or its creation zxid
//! is the one recorded (persistent), and it is adopted, never taken for a
//! stranger's and never created twice. Sequential modes (where Curator's
//! protection names the node with a uuid) are not offered: a deliberate
//! limit, since a registration under a fixed name is what `PersistentNode`
//! is used for.
//!
//! # Foreign changes
//! A change of the node's data by someone else is reported
//! ([`PersistentNodeEvent::ChangedByOther`]) and left as it is; a foreign
//! node of the same name (another session's ephemeral) is waited out, then
//! the node is created again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use log::{debug, warn};
use parking_lot::Mutex;

use crate::client::{CreateMode, WatchedEvent, Watcher, ZooKeeper};
use crate::deadline::Deadline;
use crate::error::{Error, Result, ZkError};
use crate::types::Stat;
use crate::wait::Wake;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// What a [`PersistentNode`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersistentNodeEvent {
    /// The node was created (the first time, or again), with the `Stat` of
    /// the create.
    Created(Stat),
    /// Someone else wrote the node's data.
    ChangedByOther(Vec<u8>, Stat),
    /// The node's name is held by another session's node; created again
    /// once it is gone.
    Foreign(Stat),
}

struct Shared {
    zkw: ZooKeeperWatcher,
    path: String,
    mode: CreateMode,
    data: Mutex<Vec<u8>>,
    /// The node as this recipe last created or wrote it: (session, czxid, mzxid).
    ours: Mutex<Option<(i64, i64, i64)>>,
    closed: AtomicBool,
    wake: Arc<Wake>,
    events: Mutex<Vec<mpsc::Sender<PersistentNodeEvent>>>,
}

/// A node kept created (see the module docs). Dropping it removes the node
/// in the background (its thread does, then ends); [`close`](Self::close)
/// waits for that.
pub struct PersistentNode {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for PersistentNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentNode")
            .field("path", &self.shared.path)
            .finish()
    }
}

impl PersistentNode {
    /// Keeps `path` created with `data`, `mode` being `Ephemeral` or
    /// `Persistent`. Returns at once; the node is created by the node's
    /// thread ([`wait_created`](Self::wait_created)).
    ///
    /// # Errors
    /// `BadArguments` for an invalid path or a sequential / TTL / container
    /// mode; `Closed` when the watcher is closed.
    pub fn start(
        zkw: &ZooKeeperWatcher,
        path: &str,
        mode: CreateMode,
        data: &[u8],
    ) -> Result<PersistentNode> {
        crate::path::validate(path)?;
        if !matches!(mode, CreateMode::Ephemeral | CreateMode::Persistent) {
            return Err(Error::BadArguments(format!(
                "a persistent node is Ephemeral or Persistent, not {mode:?}"
            )));
        }
        zkw.check_session()?;
        let shared = Arc::new(Shared {
            zkw: zkw.clone(),
            path: path.to_string(),
            mode,
            data: Mutex::new(data.to_vec()),
            ours: Mutex::new(None),
            closed: AtomicBool::new(false),
            wake: Arc::new(Wake::default()),
            events: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("zklock-persistent-node".into())
            .spawn(move || s.run())
            .map_err(|e| Error::BadArguments(format!("cannot start the node's thread: {e}")))?;
        Ok(PersistentNode {
            shared,
            thread: Some(thread),
        })
    }

    /// The path.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// Every later event through a channel.
    pub fn events(&self) -> mpsc::Receiver<PersistentNodeEvent> {
        let (tx, rx) = mpsc::channel();
        self.shared.events.lock().push(tx);
        rx
    }

    /// Whether the recipe holds the node now (as far as it knows).
    pub fn is_created(&self) -> bool {
        self.shared.ours.lock().is_some()
    }

    /// Waits until the node is created: `true`, or `false` after `timeout`.
    pub fn wait_created(&self, timeout: Duration) -> bool {
        let deadline = Deadline::after(timeout);
        loop {
            let seen = self.shared.wake.generation();
            if self.is_created() {
                return true;
            }
            if !self.shared.wake.wait(seen, deadline) {
                return self.is_created();
            }
        }
    }

    /// Sets the node's data (kept for every later re-create).
    ///
    /// # Errors
    /// The session's errors; `NoNode` while the node is not created (the
    /// data is kept and written by the next create).
    pub fn set_data(&self, data: &[u8]) -> Result<()> {
        *self.shared.data.lock() = data.to_vec();
        let zk = self.shared.zkw.zookeeper().clone();
        // Held across the write: the node's thread, woken by its watch, must
        // not take this write for someone else's.
        let mut ours = self.shared.ours.lock();
        let stat = zk.set_data(&self.shared.path, data, None)?;
        if let Some(o) = ours.as_mut() {
            if o.1 == stat.czxid {
                o.2 = stat.mzxid;
            }
        }
        Ok(())
    }

    /// Removes the node and stops keeping it, waiting for the node's thread.
    pub fn close(mut self) {
        self.shared.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for PersistentNode {
    fn drop(&mut self) {
        // The thread removes the node and ends; not waited for.
        self.shared.stop();
    }
}

impl Shared {
    fn stop(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake.wake();
    }

    fn tell(&self, e: PersistentNodeEvent) {
        self.events.lock().retain(|tx| tx.send(e.clone()).is_ok());
    }

    /// The node's thread.
    fn run(self: Arc<Self>) {
        let watcher: Arc<dyn Watcher> = Arc::new(WakeOnly(self.wake.clone()));
        while !self.closed.load(Ordering::SeqCst) {
            let seen = self.wake.generation();
            let zk = self.zkw.zookeeper().clone();
            let wait = match self.keep(&zk, &watcher) {
                Ok(()) => Deadline::never(),
                Err(e) if self.zkw.state() == crate::client::State::Closed => {
                    debug!("{}: the watcher is closed ({e})", self.path);
                    break;
                }
                Err(e) => {
                    debug!("keeping {}: {e}; again in 200 ms", self.path);
                    Deadline::after(Duration::from_millis(200))
                }
            };
            self.wake.wait(seen, wait);
        }
        self.remove();
    }

    fn is_ours(&self, zk: &ZooKeeper, stat: &Stat) -> bool {
        match self.mode {
            CreateMode::Ephemeral => stat.ephemeral_owner == zk.session_id(),
            _ => self.ours.lock().is_some_and(|o| o.1 == stat.czxid),
        }
    }

    /// One look: create the node when missing, adopt it when it is ours,
    /// report foreign changes; leaves an `exists` watch on it.
    fn keep(&self, zk: &ZooKeeper, watcher: &Arc<dyn Watcher>) -> Result<()> {
        loop {
            match zk.exists_watch(&self.path, watcher.clone())? {
                Some(stat) if self.is_ours(zk, &stat) => {
                    let mut ours = self.ours.lock();
                    match *ours {
                        Some((_, czxid, mzxid)) if czxid == stat.czxid => {
                            if stat.mzxid != mzxid {
                                *ours = Some((zk.session_id(), czxid, stat.mzxid));
                                drop(ours);
                                let data = zk.get_data(&self.path, false).map(|(d, _)| d);
                                self.tell(PersistentNodeEvent::ChangedByOther(
                                    data.unwrap_or_default(),
                                    stat,
                                ));
                            }
                        }
                        _ => {
                            // Made by a create whose reply was lost: adopt it.
                            debug!("{}: adopting the node of this session", self.path);
                            *ours = Some((zk.session_id(), stat.czxid, stat.mzxid));
                            drop(ours);
                            self.tell(PersistentNodeEvent::Created(stat));
                            self.wake.wake();
                        }
                    }
                    return Ok(());
                }
                Some(stat) => {
                    *self.ours.lock() = None;
                    self.tell(PersistentNodeEvent::Foreign(stat));
                    return Ok(());
                }
                None => {
                    *self.ours.lock() = None;
                    let data = self.data.lock().clone();
                    let acl = self.zkw.recoverable_zookeeper().acl_for(&self.path);
                    let create = || zk.create2(&self.path, &data, acl, self.mode);
                    let created = match create() {
                        Err(e) if e.is(ZkError::NoNode) => {
                            if let Some(parent) = zkutil::get_parent(&self.path) {
                                self.zkw
                                    .recoverable_zookeeper()
                                    .create_with_parents(parent, &[])?;
                            }
                            create()
                        }
                        other => other,
                    };
                    match created {
                        Ok((_, stat)) => {
                            *self.ours.lock() = Some((zk.session_id(), stat.czxid, stat.mzxid));
                            self.tell(PersistentNodeEvent::Created(stat));
                            self.wake.wake();
                            // Loop: set the watch on it.
                        }
                        // Someone else's, or ours from a lost reply: look.
                        Err(e) if e.is(ZkError::NodeExists) => {}
                        Err(e) if e.is(ZkError::ConnectionLoss) => {
                            // Look after the reconnect (exists tells whose).
                            zk.wait_connected(zk.session_timeout())?;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// Removes the node when it is ours (on close or drop, on this thread).
    fn remove(&self) {
        let Some((session, czxid, _)) = self.ours.lock().take() else {
            return;
        };
        let zk = self.zkw.zookeeper().clone();
        if zk.session_id() != session && self.mode == CreateMode::Ephemeral {
            return; // went with its session
        }
        let zk = zk.with_deadline(Deadline::after(zk.session_timeout()));
        match zk.exists(&self.path, false) {
            Ok(Some(stat)) if stat.czxid == czxid => {
                match zk.delete(&self.path, Some(stat.version)) {
                    Ok(()) => {}
                    Err(e) if e.is(ZkError::NoNode) => {}
                    Err(e) => warn!("removing {}: {e}", self.path),
                }
            }
            Ok(_) => {}
            Err(e) => warn!("removing {}: {e}", self.path),
        }
    }
}

/// The watch of the node's thread: bumps its wake-up counter, nothing else.
struct WakeOnly(Arc<Wake>);

impl Watcher for WakeOnly {
    fn process(&self, _event: WatchedEvent) {
        self.0.wake();
    }
}
