//! A node that stays created (Curator's `PersistentNode`, how services
//! register themselves): created with its data, re-created after the session
//! that held it expired (on the session `with_session_renewal` opens) or after
//! someone deleted it, holding the data the application gave last
//! ([`PersistentNode::set_data`]), and removed on close (with the node of a
//! create whose outcome is still unknown: [`PersistentNode::close`]).
//!
//! # How
//! One background thread per node (named `zklock-persistent-node`) makes
//! every call: it creates the node, sets an `exists` watch on it, and waits
//! through the wait engine (a wait not bound to one session: the thread
//! outlives the sessions, re-creating the node on the one
//! `with_session_renewal` opens) for a wake-up of the engine's one watcher,
//! bumped by the watch and the session's state events on the event thread
//! (never a call there). Nothing is looked at periodically:
//!
//! - a call that fails on a lost connection is tried again once the
//!   connection is back (a one-shot reconnect hook wakes the thread; a
//!   round woken while the client is disconnected makes no call, it waits
//!   for that hook: a close is not held up by a call waiting for the
//!   connection); one
//!   that fails because the session ended (a renewal may come) is tried
//!   again once a session connects (the thread's session hook, told every
//!   connect, wakes it);
//! - after any other failure (a server without TTL nodes, a parent the
//!   session may not create in) it looks again at the next event its watch
//!   hears (a change of the node, or for a sequential node of its parent;
//!   a connection-state change). Deliberate difference from zklock's
//!   earlier versions, which tried again every 200 ms: an idle node costs no
//!   request and no wake-up.
//!
//! # Protection against the lost-create duplicate
//! Every create carries a mark only this node can have written, one fresh
//! uuid per incarnation (the crate's one way to own a node, `engine/owned.rs`), so
//! a create whose reply was lost finds its node again in every mode, and
//! never takes a stranger's node for its own (not even one of the same
//! session with equal data):
//!
//! - A **fixed name** (`Persistent`, `Ephemeral`, `PersistentWithTtl`)
//!   carries the mark as one extra ACL entry granting nothing
//!   (`digest:_c_<uuid>:owner`, permissions 0); name and data are as given.
//!   After `NodeExists` or a lost reply, the node is this recipe's when its
//!   ACL holds the mark (and, ephemeral, this session owns it): it is adopted,
//!   reported `Created`, and removed on close. A node without the mark is a
//!   stranger's: [`PersistentNodeEvent::Foreign`], waited out. A container
//!   node has no owner: one that exists is adopted (several
//!   [`PersistentTtlNode`]s share it, as in Curator).
//! - **Sequential modes** are always **protected** as Curator's
//!   `withProtection()`: the node is named `<parent>/_c_<uuid>-<name><sequence>`
//!   ([`layout::CURATOR_PROTECTED_PREFIX`](super::layout::CURATOR_PROTECTED_PREFIX)).
//!   After a create whose outcome is unknown, the parent's children are
//!   searched for the uuid and a node found is adopted (an ephemeral only
//!   when this session owns it). Curator makes protection optional; here a
//!   sequential node is always protected, since without it a lost create
//!   leaves an orphan nobody can recognise.
//!
//! Deliberate difference from Curator, whose `PersistentNode` takes over any
//! node it finds at a fixed name (it writes its data into it): a stranger's
//! node is left alone and reported.
//!
//! # TTL nodes
//! [`PersistentNode::start_ttl`] keeps a `PersistentWithTtl` or
//! `PersistentSequentialWithTtl` node (the server needs
//! `zookeeper.extendedTypesEnabled=true`): the server removes it once it has
//! no children and was not written for its TTL, and the node is then created
//! again, as after any delete (Curator's `PersistentNode` in a TTL mode).
//! [`PersistentTtlNode`] is Curator's recipe of the same name: a container
//! node kept created plus a TTL child (`touch`) written every TTL / 2, so the
//! node lives while its owner does and goes (child by TTL, then the empty
//! container) within about a TTL plus the reaper's interval once it stops.
//!
//! # Data
//! The data the application gave last (each [`PersistentNode::set_data`] is
//! one more generation of it) is what every create carries; after every
//! create or adoption whose node holds an older generation (a create that
//! was on its way, or whose reply was lost, when `set_data` ran) the node's
//! thread writes it at the node's version (as Curator's writes its data
//! into a node it finds existing; here only into its own, see above).
//!
//! # Foreign changes
//! A change of the node's data by someone else is reported
//! ([`PersistentNodeEvent::ChangedByOther`]) and left as it is (it counts as
//! the latest data); this recipe's own writes never are, not even one whose
//! reply was lost (it is pending until a look shows the node: written with
//! its data, it is this recipe's); a foreign
//! node of the same name (another session's ephemeral) is reported
//! ([`PersistentNodeEvent::Foreign`], or
//! [`PersistentNodeEvent::ForeignUnreadable`] when this session may not read
//! it and the server refuses its `exists`) and waited out through a watch on
//! the parent's children as well as its own (whose events servers from 3.7
//! on drop for a session without `READ` on it), then the node is created
//! again, on every server version.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use log::{debug, warn};
use parking_lot::Mutex;

use crate::client::{CreateMode, Watcher, ZooKeeper};
use crate::deadline::Deadline;
use crate::engine::background::on_reconnect;
use crate::engine::hook::{hook, Counter, Hook};
use crate::engine::owned::{create_once, Guard, NodeSpec, OwnerMark, Parents, Removal};
use crate::engine::wait::{Waiter, Wake};
use crate::error::{Error, Result, ZkError};
use crate::recipes::layout::TTL_TOUCH_NODE;
use crate::types::KeeperState;
use crate::types::Stat;
use crate::watcher::{SessionHook, ZooKeeperWatcher};

/// What a [`PersistentNode`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PersistentNodeEvent {
    /// The node was created (the first time, or again), with the `Stat` of
    /// the create.
    Created(Stat),
    /// Someone else wrote the node's data.
    ChangedByOther(Vec<u8>, Stat),
    /// The node's name is held by another session's node; created again
    /// once it is gone.
    Foreign(Stat),
    /// The node's name is held by a node this session may not read (its
    /// ACL gives it no `READ`): ZooKeeper 3.8.4+ and 3.9.2+ refuse its
    /// `exists` (ZOOKEEPER-2590), so there is no `Stat` to report (where the
    /// server answers the `exists`, the node is [`Foreign`](Self::Foreign)).
    /// Created again once it is gone. The path of the node.
    ForeignUnreadable(String),
}

struct Shared {
    zkw: ZooKeeperWatcher,
    /// The path asked for (for a sequential mode, the parent and the name
    /// before the protection prefix and the sequence).
    path: String,
    mode: CreateMode,
    ttl: Option<Duration>,
    /// Whether close removes the node (not for [`PersistentTtlNode`]'s
    /// container, which its TTL child's expiry removes).
    remove_on_close: bool,
    /// The data the application gave last, and its generation (one more at
    /// each [`PersistentNode::set_data`]).
    data: Mutex<(Vec<u8>, u64)>,
    /// The node as this recipe last created, adopted or wrote it. Held by
    /// every write of the node (the application's and the thread's), so the
    /// thread never takes one of them for someone else's.
    ours: Mutex<Option<Held>>,
    /// Whether `ours` holds a node, readable without waiting for a write
    /// under way ([`PersistentNode::is_created`]).
    created: AtomicBool,
    /// The node's actual path, once created (the sequence is the server's).
    actual: Mutex<Option<String>>,
    /// This incarnation's mark (see the module docs), and once a create with
    /// it was sent (its outcome may be unknown: look for it first), the
    /// generation of the data it carried.
    mark: Mutex<(OwnerMark, Option<u64>)>,
    closed: AtomicBool,
    /// The thread's wake-up and the one watcher of its watches.
    waiter: Waiter,
    /// The rounds the thread made (feature `testing`: see
    /// [`PersistentNode::rounds`]).
    rounds: Counter,
    /// The test hook told each [`PersistentNodeStep`] (feature `testing`).
    hook: Hook<PersistentNodeStep>,
    events: Mutex<Vec<mpsc::Sender<PersistentNodeEvent>>>,
    /// The foreign node last reported at the name (its creation zxid;
    /// `None`: one this session may not read), so each one is told once.
    foreign: Mutex<Option<Option<i64>>>,
}

/// The node as a [`PersistentNode`] last created, adopted or wrote it.
#[derive(Debug, Clone)]
struct Held {
    /// The session it was created or adopted in.
    session: i64,
    czxid: i64,
    /// Its `mzxid` as this recipe last saw it (its own write, or a look).
    mzxid: i64,
    /// The generation of the data it holds as far as this recipe knows (a
    /// foreign write counts as the latest: it is left as it is).
    generation: u64,
    /// A write of this recipe's whose answer is not in (its reply lost):
    /// its generation and data. The first look that shows the node written
    /// tells whether it was this one (the data it shows) or someone else's.
    pending: Option<(u64, Vec<u8>)>,
}

/// A step of a [`PersistentNode`]'s thread, told to a test hook (feature
/// `testing`, [`PersistentNode::with_step_hook`]); the hook runs on the
/// node's thread.
#[cfg_attr(not(feature = "testing"), doc(hidden))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PersistentNodeStep {
    /// The thread is about to send a create of the node (under its mark,
    /// with the application's data as it is now). Path: the path given to
    /// `start`. A hook that holds the reply here (a proxy's one-way stall)
    /// makes a create in flight, or one whose outcome stays unknown.
    Creating,
    /// A round looked at the node it holds and has done what that look
    /// called for (a report, a write of the application's data); the node's
    /// `mzxid` as that look saw it. Path: the node's actual path.
    Looked {
        /// The node's `mzxid` in the look.
        mzxid: i64,
    },
    /// The thread stopped keeping the node (closed or dropped) and is about
    /// to remove it. Path: the path given to `start`.
    Removing,
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
    /// Keeps `path` created with `data`, `mode` being `Ephemeral`,
    /// `Persistent`, `Container`, or a sequential mode (then protected, see
    /// the module docs; the actual path is [`actual_path`](Self::actual_path)).
    /// A container has no owner: an existing one is adopted, and close
    /// removes it only when it has no children.
    /// Returns at once; the node is created by the node's thread
    /// ([`wait_created`](Self::wait_created)).
    ///
    /// # Errors
    /// `BadArguments` for an invalid path or a TTL mode (use
    /// [`start_ttl`](Self::start_ttl)); `Closed` when the watcher is closed.
    pub fn start(
        zkw: &ZooKeeperWatcher,
        path: &str,
        mode: CreateMode,
        data: &[u8],
    ) -> Result<PersistentNode> {
        Self::start_impl(zkw, path, mode, None, data, true)
    }

    /// Keeps a TTL node created: `mode` is `PersistentWithTtl` or
    /// `PersistentSequentialWithTtl` (protected as every sequential node).
    /// The server removes it once childless and unwritten for `ttl`; it is
    /// then created again (see the module docs).
    ///
    /// # Errors
    /// `BadArguments` for an invalid path, a non-TTL mode or a TTL out of
    /// range (1 ms to 2^40 ms); `Closed` when the watcher is closed. A server
    /// without TTL nodes answers each create `Unimplemented`: the node's
    /// thread logs it and tries again, so [`wait_created`](Self::wait_created)
    /// stays `false`.
    pub fn start_ttl(
        zkw: &ZooKeeperWatcher,
        path: &str,
        mode: CreateMode,
        ttl: Duration,
        data: &[u8],
    ) -> Result<PersistentNode> {
        if !mode.is_ttl() {
            return Err(Error::BadArguments(format!(
                "a TTL node is PersistentWithTtl or PersistentSequentialWithTtl, not {mode:?}"
            )));
        }
        if crate::types::ttl_millis(ttl).is_none() {
            return Err(Error::BadArguments(format!(
                "ttl {ttl:?} out of range (1 ms to 2^40 ms)"
            )));
        }
        Self::start_impl(zkw, path, mode, Some(ttl), data, true)
    }

    fn start_impl(
        zkw: &ZooKeeperWatcher,
        path: &str,
        mode: CreateMode,
        ttl: Option<Duration>,
        data: &[u8],
        remove_on_close: bool,
    ) -> Result<PersistentNode> {
        crate::path::validate(path)?;
        if mode.is_ttl() && ttl.is_none() {
            return Err(Error::BadArguments(format!(
                "{mode:?} needs a ttl: use start_ttl"
            )));
        }
        zkw.check_session()?;
        let shared = Arc::new(Shared {
            zkw: zkw.clone(),
            path: path.to_string(),
            mode,
            ttl,
            remove_on_close,
            data: Mutex::new((data.to_vec(), 0)),
            ours: Mutex::new(None),
            created: AtomicBool::new(false),
            actual: Mutex::new(None),
            mark: Mutex::new((OwnerMark::new(), None)),
            closed: AtomicBool::new(false),
            waiter: Waiter::default(),
            rounds: Counter::default(),
            hook: Hook::default(),
            events: Mutex::new(Vec::new()),
            foreign: Mutex::new(None),
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

    /// The path given to `start` (for a sequential mode, not the node's own
    /// name: see [`actual_path`](Self::actual_path)).
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// The node's actual path while it is created (Curator's
    /// `getActualPath`): the given path, or for a sequential mode
    /// `<parent>/_c_<uuid>-<name><sequence>`; `None` before the first create
    /// and while the node is gone.
    pub fn actual_path(&self) -> Option<String> {
        self.shared.actual.lock().clone()
    }

    /// Every later event through a channel.
    pub fn events(&self) -> mpsc::Receiver<PersistentNodeEvent> {
        let (tx, rx) = mpsc::channel();
        self.shared.events.lock().push(tx);
        rx
    }

    /// Whether the recipe holds the node now (as far as it knows). Never
    /// waits for a write under way.
    pub fn is_created(&self) -> bool {
        self.shared.created.load(Ordering::SeqCst)
    }

    /// Waits until the node is created: `true`, or `false` after `timeout`.
    /// A wait through the wait engine, not bound to one session (the node
    /// outlives sessions: after an expiry it is created again on the renewed
    /// session); woken by each change the node's thread makes. The node is
    /// created or adopted then; when its create carried older data than
    /// the last [`set_data`](Self::set_data), that data is written just
    /// after (see there).
    pub fn wait_created(&self, timeout: Duration) -> bool {
        let deadline = Deadline::after(timeout);
        self.shared
            .waiter
            .wait_unbound(deadline, || self.is_created().then_some(()))
            .is_some()
            || self.is_created()
    }

    /// The rounds the node's thread has made so far (each a look at the
    /// node, made when something woke the thread): feature `testing`, how
    /// a test checks that an idle node costs no wake-up.
    #[cfg(feature = "testing")]
    pub fn rounds(&self) -> u64 {
        self.shared.rounds.get()
    }

    /// Calls `hook` at each [`PersistentNodeStep`] of the node's thread
    /// (feature `testing`); it runs on that thread.
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_step_hook(
        self,
        hook: impl Fn(PersistentNodeStep, &str) + Send + Sync + 'static,
    ) -> Self {
        self.shared.hook.set(hook);
        self
    }

    /// Sets the node's data (Curator's `setData`): the data the node holds
    /// from now on, in this incarnation and every later one.
    ///
    /// What is guaranteed: the node comes to hold the data given last,
    /// unless someone else writes it afterwards (their write is reported as
    /// [`ChangedByOther`](PersistentNodeEvent::ChangedByOther) and left as
    /// it is); and this recipe's own writes are never reported as someone
    /// else's.
    /// - While the node is created, the data is written now (at any
    ///   version, as Curator's).
    /// - While it is not (before the first create, while it is gone, while
    ///   a create is on its way, or unsettled after a lost reply), the data
    ///   is kept and `NoNode` returned: the node's thread writes it into the
    ///   node it creates or adopts next (a create that carried older data,
    ///   or a lost one's node found by its mark, is followed by a write of
    ///   this data at the node's version).
    /// - When the write fails on the connection (`ConnectionLoss`,
    ///   `OperationTimeout`), it stays this recipe's write until the node's
    ///   thread looks at the node once connected: a node written since
    ///   holding this data is this write (not reported); one still holding
    ///   the older data gets this data written again. (A foreign write of
    ///   exactly this data in that window is taken for this one.)
    ///
    /// # Errors
    /// `NoNode` as above; the session's errors (`ConnectionLoss`,
    /// `OperationTimeout`: the data is written by the node's thread as
    /// above; `SessionExpired`: with a renewal, the node of the next
    /// session is created with it).
    pub fn set_data(&self, data: &[u8]) -> Result<()> {
        // Held across the write: the node's thread, woken by its watch, must
        // not take this write for someone else's, nor write older data after
        // it.
        let mut ours = self.shared.ours.lock();
        let generation = {
            let mut kept = self.shared.data.lock();
            kept.1 += 1;
            kept.0 = data.to_vec();
            kept.1
        };
        let path = self.shared.actual.lock().clone();
        let (Some(held), Some(path)) = (ours.as_mut(), path) else {
            return Err(Error::zk(ZkError::NoNode, self.shared.path.clone()));
        };
        let zk = self.shared.zkw.zookeeper().clone();
        let before = held.pending.replace((generation, data.to_vec()));
        match zk.set_data(&path, data, None) {
            Ok(stat) => {
                held.pending = None;
                if held.czxid == stat.czxid {
                    held.mzxid = stat.mzxid;
                    held.generation = generation;
                }
                Ok(())
            }
            // Its answer lost: pending until the thread's next look.
            Err(e) if e.is_retryable() => Err(e),
            // Not written.
            Err(e) => {
                held.pending = before;
                Err(e)
            }
        }
    }

    /// Stops keeping the node and removes it, waiting for the node's thread
    /// (Curator's `close`).
    ///
    /// What is guaranteed: once it returns, the node this recipe created or
    /// adopted is deleted (guarded by its creation zxid: a node that took
    /// its name since is left alone), and so is the node of a create whose
    /// outcome was unknown (its reply lost, the client maybe still
    /// disconnected): the thread waits for the reconnect, finds that node by
    /// its mark and deletes it. Both within the removal's bound, one session
    /// timeout (after the round under way, if any, ends): when the
    /// connection is not back by then, or the session ended without a
    /// renewal, the node is left (an ephemeral one goes with its session)
    /// and a warning logged. Not deleted: a container that still has
    /// children, and a [`PersistentTtlNode`]'s container (its TTL does).
    /// Dropping the node does the same on the node's thread, not waited for.
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
        self.waiter.counter().wake();
    }

    fn tell(&self, e: PersistentNodeEvent) {
        self.events.lock().retain(|tx| tx.send(e.clone()).is_ok());
    }

    /// The node's thread: a round at each wake-up, through the wait engine
    /// (see the module docs), until closed.
    fn run(self: Arc<Self>) {
        let watcher = self.waiter.watcher().clone();
        // Wakes the thread at each connect (a reconnect, the renewed
        // session's) and at the session's end: what a round that failed
        // because the session ended waits for.
        let wake = self.waiter.counter().clone();
        let sessions = SessionWake::subscribe(&self.zkw, move |state| {
            if state != KeeperState::Disconnected {
                wake.wake();
            }
        });
        self.waiter.wait_unbound(Deadline::never(), || {
            (self.closed.load(Ordering::SeqCst) || self.round(&watcher)).then_some(())
        });
        sessions.unsubscribe(&self.zkw);
        self.remove();
    }

    /// One round: keeps the node, and when that fails, arranges the wake-up
    /// of the next round (nothing periodic). `true` when the thread ends (the
    /// watcher is closed).
    fn round(&self, watcher: &Arc<dyn Watcher>) -> bool {
        self.rounds.bump();
        let zk = self.zkw.zookeeper().clone();
        // Disconnected: no call now (one would wait for the connection, and
        // a close meanwhile for it); again once the connection is back.
        if zk.state() == crate::client::State::Connecting {
            let wake = self.waiter.counter().clone();
            on_reconnect(&self.zkw.downgrade(), move |_| wake.wake());
            return false;
        }
        match self.keep(&zk, watcher) {
            Ok(()) => false,
            Err(e) if self.zkw.state() == crate::client::State::Closed => {
                debug!("{}: the watcher is closed ({e})", self.path);
                true
            }
            // The session ended (a renewal may come): again at the next
            // connect, which the thread's session hook tells.
            Err(e) if e.is_fatal() || zk.state().is_terminal() => {
                debug!("keeping {}: {e}; again in a new session", self.path);
                false
            }
            // The connection is down (the session lives): again once it is
            // back (at once if it is back already).
            Err(e) if e.is_retryable() => {
                debug!("keeping {}: {e}; again once connected", self.path);
                let wake = self.waiter.counter().clone();
                on_reconnect(&self.zkw.downgrade(), move |_| wake.wake());
                false
            }
            // Any other failure (a server without TTL nodes, a parent this
            // session may not create in): again at the next event of the
            // node's watch, set before each create; a sequential node's
            // watch is on its parent.
            Err(e) => {
                debug!("keeping {}: {e}; again at the next event", self.path);
                if self.mode.is_sequential() {
                    let parent = crate::path::get_parent(&self.path).unwrap_or("/");
                    if let Err(e) = zk.exists_watch(parent, watcher.clone()) {
                        debug!("watching {parent}: {e}");
                    }
                }
                false
            }
        }
    }

    /// Whether the node at `path` (`stat`) is this recipe's: the one it
    /// created (its creation zxid), or, after a create whose outcome is
    /// unknown, one carrying this incarnation's mark; an ephemeral only of
    /// this session. A container has no owner: it is shared.
    fn is_ours(&self, zk: &ZooKeeper, path: &str, stat: &Stat) -> Result<bool> {
        if self.mode == CreateMode::Container {
            return Ok(true);
        }
        if self.mode.is_ephemeral() && stat.ephemeral_owner != zk.session_id() {
            return Ok(false);
        }
        if self
            .ours
            .lock()
            .as_ref()
            .is_some_and(|held| held.czxid == stat.czxid)
        {
            return Ok(true);
        }
        let (mark, sent) = self.mark.lock().clone();
        if sent.is_none() {
            return Ok(false);
        }
        if self.mode.is_sequential() {
            let name = crate::path::get_node_name(path);
            return Ok(name.starts_with(&mark.protected_prefix()));
        }
        Ok(mark
            .is_marked(zk, path, self.mode)?
            .is_some_and(|s| s.czxid == stat.czxid))
    }

    /// Forgets the node (gone, or a stranger's); the next create is a new
    /// incarnation under a new mark.
    fn forget(&self) {
        *self.ours.lock() = None;
        self.created.store(false, Ordering::SeqCst);
        *self.actual.lock() = None;
        *self.mark.lock() = (OwnerMark::new(), None);
    }

    /// Creates the node (and its parents when they are missing) under this
    /// incarnation's mark, with the application's data; the actual path and
    /// `Stat`.
    fn create(&self) -> Result<(String, Stat)> {
        let (data, generation) = self.data.lock().clone();
        let rzk = self.zkw.recoverable_zookeeper();
        let mark = {
            let mut m = self.mark.lock();
            // Two creates under one mark (the first's outcome unknown): the
            // node may carry the older data.
            m.1 = Some(m.1.map_or(generation, |sent| sent.min(generation)));
            m.0.clone()
        };
        let spec = NodeSpec {
            path: &self.path,
            data: &data,
            acl: rzk.acl_for(&self.path),
            mode: self.mode,
            ttl: self.ttl,
            parents: Parents::Persistent,
        };
        hook!(self.hook, PersistentNodeStep::Creating, &self.path);
        create_once(rzk, &spec, &mark)
    }

    /// Records a node this recipe created (or adopted) and tells it. The
    /// round's next look writes the application's data into it when the
    /// create carried older data ([`still_ours`](Self::still_ours)).
    fn created(&self, zk: &ZooKeeper, path: String, stat: Stat) {
        let sent = self.mark.lock().1;
        let generation = match sent {
            // Made by this incarnation's create and not written since: it
            // holds the data that create carried.
            Some(generation) if stat.mzxid == stat.czxid => generation,
            // Not made by this recipe's create (a shared container), or
            // written since by someone else: its data is left as it is.
            _ => self.data.lock().1,
        };
        *self.ours.lock() = Some(Held {
            session: zk.session_id(),
            czxid: stat.czxid,
            mzxid: stat.mzxid,
            generation,
            pending: None,
        });
        self.created.store(true, Ordering::SeqCst);
        *self.actual.lock() = Some(path);
        *self.foreign.lock() = None;
        self.tell(PersistentNodeEvent::Created(stat));
        self.waiter.counter().wake();
    }

    /// The node is ours and exists (`stat`, the round's look): adopts a node
    /// whose create reply was lost, tells a write since the last look that
    /// was not this recipe's, and writes the application's data when the
    /// node holds older data (at the version looked at).
    fn still_ours(&self, zk: &ZooKeeper, path: &str, mut stat: Stat) -> Result<()> {
        let adopted = self
            .ours
            .lock()
            .as_ref()
            .is_some_and(|held| held.czxid == stat.czxid);
        if !adopted {
            debug!("{path}: adopting this recipe's node (its mark)");
            self.created(zk, path.to_string(), stat);
        }
        // Held across the reads and the write (see `set_data`).
        let mut ours = self.ours.lock();
        let Some(held) = ours.as_mut().filter(|held| held.czxid == stat.czxid) else {
            return Ok(());
        };
        // A look from before a write of this recipe's that was answered
        // since: the watch this round set fires for that write.
        if stat.mzxid < held.mzxid {
            return Ok(());
        }
        let mut report = None;
        if stat.mzxid > held.mzxid {
            // Written since the last look: by this recipe (a write whose
            // answer was lost: its data shows) or by someone else.
            let (data, now) = match zk.get_data(path, false) {
                Ok(read) => read,
                // Gone meanwhile: the watch wakes the next round.
                Err(e) if e.is(ZkError::NoNode) => return Ok(()),
                Err(e) => return Err(e),
            };
            if now.czxid != held.czxid {
                return Ok(()); // replaced meanwhile: the watch tells
            }
            held.mzxid = now.mzxid;
            match held.pending.take() {
                Some((generation, mine)) if mine == data => held.generation = generation,
                _ => {
                    // Someone else's data is the latest: left as it is.
                    held.generation = self.data.lock().1;
                    report = Some(PersistentNodeEvent::ChangedByOther(data, now));
                }
            }
            stat = now;
        }
        let (data, generation) = self.data.lock().clone();
        let mut written = Ok(());
        if held.generation != generation {
            held.pending = Some((generation, data.clone()));
            match zk.set_data(path, &data, Some(stat.version)) {
                Ok(now) => {
                    held.pending = None;
                    held.mzxid = now.mzxid;
                    held.generation = generation;
                }
                // Written since the look: by a write of this recipe's whose
                // answer was lost (still pending), or by someone else (their
                // data is the latest); the watch wakes the next round, whose
                // look tells which. Or gone: the next round creates it again
                // with this data.
                Err(e) if e.is(ZkError::BadVersion) || e.is(ZkError::NoNode) => {}
                // Its answer lost (pending until the next look), or refused.
                Err(e) => written = Err(e),
            }
        }
        drop(ours);
        if let Some(report) = report {
            self.tell(report);
        }
        hook!(
            self.hook,
            PersistentNodeStep::Looked { mzxid: stat.mzxid },
            path
        );
        written
    }

    /// One look at a sequential node: keeps a watch on the created node, or
    /// finds the node of a create whose outcome is unknown (by its mark), or
    /// creates the next incarnation.
    fn keep_sequential(&self, zk: &ZooKeeper, watcher: &Arc<dyn Watcher>) -> Result<()> {
        loop {
            let actual = self.actual.lock().clone();
            if let Some(actual) = actual {
                match zk.exists_watch(&actual, watcher.clone())? {
                    Some(stat) if self.is_ours(zk, &actual, &stat)? => {
                        return self.still_ours(zk, &actual, stat);
                    }
                    // Gone (or an ended session's ephemeral, going with
                    // it): the next incarnation, under a new uuid.
                    _ => self.forget(),
                }
                continue;
            }
            let (mark, sent) = self.mark.lock().clone();
            if sent.is_some() {
                if let Some((found, stat)) = mark.find(zk, &self.path, self.mode)? {
                    debug!("{found}: adopting the node of a lost create");
                    self.created(zk, found, stat);
                    continue;
                }
            }
            match self.create() {
                Ok((actual, stat)) => self.created(zk, actual, stat),
                // A lost connection (the mark finds a node of this create
                // after the reconnect, which wakes the next round), or any
                // other failure.
                Err(e) => return Err(e),
            }
        }
    }

    /// One look: create the node when missing, adopt it when it is ours,
    /// report foreign changes; leaves an `exists` watch on it.
    fn keep(&self, zk: &ZooKeeper, watcher: &Arc<dyn Watcher>) -> Result<()> {
        if self.mode.is_sequential() {
            return self.keep_sequential(zk, watcher);
        }
        loop {
            let found = match zk.exists_watch(&self.path, watcher.clone()) {
                // A node this session may not read is not its own (its
                // policy gives the creator `READ`).
                Err(Error::NoReadPermission { .. }) => {
                    self.forget();
                    return self.foreign(zk, watcher, None);
                }
                found => found?,
            };
            let ours = match &found {
                Some(stat) => match self.is_ours(zk, &self.path, stat) {
                    // Its ACL gives this session neither `READ` nor
                    // `ADMIN` (`getACL` of its mark): not its own node.
                    Err(e) if e.is(ZkError::NoAuth) => false,
                    ours => ours?,
                },
                None => false,
            };
            match found {
                Some(stat) if ours => return self.still_ours(zk, &self.path, stat),
                Some(stat) => {
                    self.forget();
                    return self.foreign(zk, watcher, Some(stat));
                }
                None => {
                    *self.foreign.lock() = None;
                    if self.ours.lock().is_some() {
                        self.forget();
                    }
                    match self.create() {
                        // Loop: set the watch on it.
                        Ok((path, stat)) => self.created(zk, path, stat),
                        // Someone else's, or ours from a lost reply: the
                        // mark tells.
                        Err(e) if e.is(ZkError::NodeExists) => {}
                        // A lost connection: the next round, woken by the
                        // reconnect, looks (the mark tells); or any other
                        // failure.
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// The name is held by a foreign node (`stat`; `None`: one this session
    /// may not read): tells it (once per node), and watches the parent's
    /// children, whose change wakes the next round when the node goes. Its
    /// own watch may never fire: servers from 3.7 on drop its events for a
    /// session without `READ` on it, and 3.8.4+ / 3.9.2+ refuse the
    /// `exists` that would set it. Deliberate cost: while a foreign node
    /// holds the name, each change of the parent's children is one more
    /// round (an `exists` and this `getChildren`).
    fn foreign(
        &self,
        zk: &ZooKeeper,
        watcher: &Arc<dyn Watcher>,
        stat: Option<Stat>,
    ) -> Result<()> {
        let parent = crate::path::get_parent(&self.path).unwrap_or("/");
        let watched = zk.get_children_watch(parent, watcher.clone());
        let key = stat.as_ref().map(|s| s.czxid);
        if self.foreign.lock().replace(key) != Some(key) {
            self.tell(match stat {
                Some(stat) => PersistentNodeEvent::Foreign(stat),
                None => PersistentNodeEvent::ForeignUnreadable(self.path.clone()),
            });
        }
        // Gone already (before the watch was set): the next round at once.
        if !watched?
            .iter()
            .any(|c| c == crate::path::get_node_name(&self.path))
        {
            self.waiter.counter().wake();
        }
        Ok(())
    }

    /// Removes the node when it is ours (on close or drop, on this thread;
    /// see [`PersistentNode::close`]): the node it holds, or the node of a
    /// create whose outcome is unknown, found by its mark once connected;
    /// within one session timeout.
    fn remove(&self) {
        hook!(self.hook, PersistentNodeStep::Removing, &self.path);
        let held = self.ours.lock().take();
        self.created.store(false, Ordering::SeqCst);
        let actual = self.actual.lock().take();
        let (mark, sent) = self.mark.lock().clone();
        if !self.remove_on_close {
            return; // left to its TTL child
        }
        let zk = self.zkw.zookeeper().clone();
        let rzk = self
            .zkw
            .recoverable_zookeeper()
            .with_deadline(Deadline::after(zk.session_timeout()));
        let removed = match (held, actual) {
            (Some(held), Some(path)) => {
                if zk.session_id() != held.session && self.mode.is_ephemeral() {
                    return; // went with its session
                }
                Removal::new(path.as_str(), Guard::Created(held.czxid)).run(&rzk)
            }
            // No node recorded, but a create under this incarnation's mark
            // was sent: its outcome is unknown (its reply lost, the client
            // maybe still disconnected). Settled now: its node, if any, is
            // found by the mark after the reconnect and removed.
            _ if sent.is_some() => mark.remove_if_created(&rzk, &self.path, self.mode),
            _ => return,
        };
        match removed {
            Ok(_) => {}
            // A shared container still in use stays.
            Err(e) if e.is(ZkError::NotEmpty) && self.mode == CreateMode::Container => {}
            // The session ended without a renewal: nothing can be done.
            Err(e) if e.is_fatal() => debug!("removing {}: {e}", self.path),
            Err(e) => warn!("removing {}: {e}; the node is left", self.path),
        }
    }
}

/// Curator's `PersistentTtlNode`: a container node kept created at `path`
/// (a [`PersistentNode`] in `Container` mode) and a child
/// [`TTL_TOUCH_NODE`] with a TTL, written (or created) every TTL / 2 by a
/// thread of its own (`zklock-ttl-touch`). While the owner runs the node
/// stays; once it stops (close, drop, a crash) the child is not written any
/// more, the server removes it after its TTL and then the empty container:
/// the node goes within about a TTL plus the server's reaper interval. A
/// watch on the node sees no event from the touches (they write the child).
///
/// As in Curator, closing does not remove the node: the TTL does, so
/// several owners of one path can share it.
pub struct PersistentTtlNode {
    node: Option<PersistentNode>,
    touching: Arc<Touching>,
    thread: Option<JoinHandle<()>>,
}

/// What a [`PersistentTtlNode`]'s touch thread shares with its owner and its
/// reconnect hook.
#[derive(Default)]
struct Touching {
    /// Set by close or drop: the thread ends.
    stop: AtomicBool,
    /// Set by the thread's session hook at each connect: what the thread
    /// waits for after a touch that failed on a lost connection or an ended
    /// session.
    back: AtomicBool,
    wake: Wake,
}

impl std::fmt::Debug for PersistentTtlNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentTtlNode")
            .field("path", &self.node.as_ref().map(|n| n.path()))
            .finish()
    }
}

impl PersistentTtlNode {
    /// Keeps `path` (a container holding `data`) alive with a TTL child
    /// touched every `ttl / 2`. Returns at once.
    ///
    /// # Errors
    /// `BadArguments` for an invalid path or a TTL out of range (2 ms to
    /// 2^40 ms); `Closed` when the watcher is closed.
    pub fn start(
        zkw: &ZooKeeperWatcher,
        path: &str,
        ttl: Duration,
        data: &[u8],
    ) -> Result<PersistentTtlNode> {
        if crate::types::ttl_millis(ttl).is_none() || ttl < Duration::from_millis(2) {
            return Err(Error::BadArguments(format!(
                "ttl {ttl:?} out of range (2 ms to 2^40 ms)"
            )));
        }
        let node = PersistentNode::start_impl(zkw, path, CreateMode::Container, None, data, false)?;
        let touching = Arc::new(Touching::default());
        let child = crate::path::join_znode(path, TTL_TOUCH_NODE);
        let (zkw, t) = (zkw.clone(), touching.clone());
        let thread = std::thread::Builder::new()
            .name("zklock-ttl-touch".into())
            .spawn(move || touch_thread(&zkw, &t, &child, ttl))
            .map_err(|e| Error::BadArguments(format!("cannot start the touch thread: {e}")))?;
        Ok(PersistentTtlNode {
            node: Some(node),
            touching,
            thread: Some(thread),
        })
    }

    /// The container node (its data, its events, [`PersistentNode::wait_created`]).
    pub fn node(&self) -> &PersistentNode {
        self.node.as_ref().expect("present until drop")
    }

    /// Stops touching and keeping the node, waiting for both threads; the
    /// node goes with its TTL.
    pub fn close(mut self) {
        self.stop_touching();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(node) = self.node.take() {
            node.close();
        }
    }

    fn stop_touching(&self) {
        self.touching.stop.store(true, Ordering::SeqCst);
        self.touching.wake.wake();
    }
}

impl Drop for PersistentTtlNode {
    fn drop(&mut self) {
        // Both threads end on their own; not waited for.
        self.stop_touching();
    }
}

/// A [`PersistentTtlNode`]'s touch thread: a touch every `ttl / 2`, waiting
/// in between through the wait engine (not bound to one session: the node
/// is kept across sessions). A touch that failed on a lost connection (or an
/// ended session, a renewal may come) waits for the reconnect instead of the
/// next tick, and touches at once then: no wake-up while disconnected.
fn touch_thread(zkw: &ZooKeeperWatcher, touching: &Arc<Touching>, child: &str, ttl: Duration) {
    let every = ttl / 2;
    let mut next = Deadline::after(every);
    let t = touching.clone();
    let sessions = SessionWake::subscribe(zkw, move |state| {
        if state == KeeperState::SyncConnected {
            t.back.store(true, Ordering::SeqCst);
            t.wake.wake();
        }
    });
    loop {
        crate::engine::wait::wait_unbound(&touching.wake, next, || {
            let stop = touching.stop.load(Ordering::SeqCst);
            (stop || touching.back.swap(false, Ordering::SeqCst)).then_some(())
        });
        if touching.stop.load(Ordering::SeqCst) {
            sessions.unsubscribe(zkw);
            return;
        }
        next = match touch(zkw, child, ttl) {
            Ok(()) => Deadline::after(every),
            // Connected all the same (a call cut short): the next tick.
            Err(_) if zkw.zookeeper().state() == crate::client::State::Connected => {
                Deadline::after(every)
            }
            // Down, or the session ended: at the next connect.
            Err(e) => {
                debug!("touching {child}: {e}; again once connected");
                Deadline::never()
            }
        };
    }
}

/// A thread's standing subscription to its watcher's session events (the
/// watcher holds it weakly, the thread holds it): `react` runs on the event
/// thread at each (`SyncConnected`, `Disconnected`, the session's end), and
/// once at once when the session has already ended. Never blocks.
struct SessionWake<F>(F);

/// A [`SessionWake`] subscribed: kept by the thread until it ends.
struct Subscribed {
    _hook: Arc<dyn SessionHook>,
    id: Option<u64>,
}

impl<F: Fn(KeeperState) + Send + Sync + 'static> SessionWake<F> {
    fn subscribe(zkw: &ZooKeeperWatcher, react: F) -> Subscribed {
        let hook: Arc<dyn SessionHook> = Arc::new(SessionWake(react));
        let id = zkw.downgrade().add_hook(Arc::downgrade(&hook));
        Subscribed { _hook: hook, id }
    }
}

impl Subscribed {
    fn unsubscribe(self, zkw: &ZooKeeperWatcher) {
        if let Some(id) = self.id {
            zkw.downgrade().remove_hook(id);
        }
    }
}

impl<F: Fn(KeeperState) + Send + Sync> SessionHook for SessionWake<F> {
    fn session_event(&self, state: KeeperState) {
        (self.0)(state);
    }
}

/// One touch of a [`PersistentTtlNode`]'s child: write it, or create it with
/// its TTL when missing (Curator's `setData`, then `create().orSetData()`).
/// Other failures wait for the next touch (the container may be gone for a
/// moment); a lost connection or an ended session is the error returned.
fn touch(zkw: &ZooKeeperWatcher, child: &str, ttl: Duration) -> Result<()> {
    let zk = zkw.zookeeper().clone();
    let zk = zk.with_deadline(Deadline::after(ttl / 2));
    let r = match zk.set_data(child, &[], None) {
        Err(e) if e.is(ZkError::NoNode) => zk
            .create_ttl(
                child,
                &[],
                zkw.recoverable_zookeeper().acl_for(child),
                CreateMode::PersistentWithTtl,
                ttl,
            )
            .map(drop),
        other => other.map(drop),
    };
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.is(ZkError::NoNode) || e.is(ZkError::NodeExists) => Ok(()),
        Err(e) if e.is_retryable() || e.is_fatal() || zk.state().is_terminal() => Err(e),
        Err(e) => {
            debug!("touching {child}: {e}");
            Ok(())
        }
    }
}
