//! [`ZooKeeperNodeTracker`] and [`DeletionListener`]: HBase's listeners that
//! follow one znode, the first to know its data, the second to wait for its
//! deletion.
//!
//! # On the event thread, never block
//! Both react to events without blocking the session's event thread: they
//! re-arm their watch and re-read the node with the client's asynchronous calls
//! (`exists_async`, `get_data_async`), and the answer comes back as another
//! call on the event thread. A recoverable error (`ConnectionLoss`,
//! `OperationTimeout`) is not retried inline: the read is issued again on the
//! next `SyncConnected` (or at once, a few times, if the client is connected
//! already). Only application threads (`start`, `get_data(true)`,
//! `block_until_available(.., true)`, `set_watch_if_node_exists`) wait and
//! retry, on their own thread.
//!
//! # Reads answered in the order they are numbered
//! The tracker numbers its reads and keeps the answer of the latest one. A read
//! is numbered and sent in one step (under one lock, around an asynchronous call
//! that never waits), whoever sends it: the event thread, or an application
//! thread's refresh, which then waits for its answer. One session answers in
//! send order, so a higher number is always a newer answer.
//!
//! # The tracker first, then the user's listeners
//! HBase's tracker is a listener registered first: its handler has changed its
//! state (with a synchronous read on the event thread) before any later
//! listener hears the same event, and ported code reads trackers from its
//! listeners. zklock's trackers are told of each event on their node before
//! the watcher's listeners too, and change their state there, without a
//! server call:
//!
//! - `NodeDeleted` empties the tracker at once: a listener that hears it, and
//!   any thread it wakes, finds `get_data(false) == None` (then the tracker
//!   checks whether the node is back, as HBase's does).
//! - `NodeCreated` and `NodeDataChanged` cannot bring the new data without a
//!   read, and the read's answer comes back on the event thread, after the
//!   listeners. Until it does, the tracker has no *current* data: an
//!   application thread's [`get_data(false)`](ZooKeeperNodeTracker::get_data)
//!   or [`block_until_available`](ZooKeeperNodeTracker::block_until_available)
//!   waits for that answer (as HBase's synchronized getters wait for the
//!   tracker's handler), and on the event thread itself, which cannot wait for
//!   it, they answer `None` at once — never the old data as current. The new
//!   data reaches the event thread in a [`NodeTrackerListener`] call.
//!
//! No request is added: the re-read is the one HBase makes too.
//!
//! # Events for every listener, handling off the user's registry
//! As in HBase, their watches are the session's default watch: an event on the
//! tracked node reaches the tracker **and** every [`ZooKeeperListener`]
//! registered on the watcher for that path (HBase's `TestZooKeeperNodeTracker`
//! waits for `nodeCreated` with a listener that sets no watch of its own). The
//! client keeps one registration per watcher and path, so each event is
//! delivered once, however many trackers, `zkutil` calls and listeners watch
//! the node. The tracker itself is not in the listener registry: it learns of
//! the events on its node, and of connection events, through a library
//! subscription of the watcher (told before the user's listeners), so
//! `unregister_all_listeners` cannot strand it. It holds the session only
//! through a [`WeakZooKeeperWatcher`], so the session ends with the
//! application's last [`ZooKeeperWatcher`] handle.

use std::fmt;
use std::sync::{Arc, Weak};
use std::thread::{self, ThreadId};
use std::time::Duration;

use log::{debug, error, warn};
use parking_lot::{Mutex, ReentrantMutex};

use crate::client::{EventType, KeeperState, Stat, State, WatchedEvent, Watcher, ZooKeeper};
use crate::deadline::Deadline;
use crate::engine::call::Pinned;
use crate::engine::held::{self, Budget, Done, Held, HeldWatch};
use crate::engine::hook::{hook, OnceHook};
use crate::engine::wait::{self, Wake, WhenDown};
use crate::error::{Error, Result, ZkError, ZkResultExt};
use crate::listener::{Abortable, ZooKeeperListener};
use crate::metadata::remove_metadata;
use crate::recoverable::RecoverableZooKeeper;
use crate::watcher::{SessionHook, WeakZooKeeperWatcher, ZooKeeperWatcher};
use crate::zkutil;

/// Whether `e` means the session is over (no point re-arming anything).
fn ends_session(e: &Error) -> bool {
    matches!(e, Error::Closed) || e.is(ZkError::SessionExpired) || e.is(ZkError::AuthFailed)
}

/// How many times in a row an asynchronous read that failed with a recoverable
/// error is issued again at once because the client says it is connected (the
/// reconnect's `SyncConnected` may have come before the failure); beyond that it
/// waits for the next `SyncConnected`: the retry budget of the engine's held
/// watch ([`Budget`]).
const IMMEDIATE_RETRIES: u32 = 3;

/// The session a blocking wait of a tracker or a deletion listener began in,
/// as the wait engine ([`wait::wait`]) sees it: the client pinned to that
/// session, and the watcher held weakly (a waiting thread does not keep the
/// session open: dropping the application's last [`ZooKeeperWatcher`] still
/// ends it, and the wait). The session's end wakes the wait from the thread
/// that ends it, so the wait ends even while the event thread, which tells the
/// listeners' state of that end, is held up by a user's listener.
struct WaitingIn {
    zkw: WeakZooKeeperWatcher,
    zk: ZooKeeper,
}

impl WaitingIn {
    /// The watcher's session now; `None` once the watcher is gone (or for a
    /// listener without a session).
    fn begin(zkw: &WeakZooKeeperWatcher) -> Option<WaitingIn> {
        zkw.zookeeper().map(|zk| WaitingIn {
            zkw: zkw.clone(),
            zk: zk.pinned(),
        })
    }
}

impl WaitingIn {
    /// An error once the session can no longer be used (ended, or the
    /// watcher's session is no longer usable).
    fn check(&self) -> Result<()> {
        if let Some(e) = Error::for_ended_session(self.zk.state()) {
            return Err(e);
        }
        self.zkw.check_session()
    }

    /// The session as a wait sees it.
    fn pinned(&self) -> Pinned<'_, impl Fn() -> Result<()> + '_> {
        Pinned::new(&self.zk, || self.check())
    }
}

// ---------------------------------------------------------------------------
// ZooKeeperNodeTracker
// ---------------------------------------------------------------------------

/// What a port of an HBase `ZooKeeperNodeTracker` subclass overrides
/// (`MasterAddressTracker`, `ClusterStatusTracker`, `ReplicationPeer`'s
/// `PeerStateTracker`, ...): code run on each change of the tracked node,
/// **after** the tracker's data has been refreshed (HBase's overrides call
/// `super.nodeDataChanged(path)` first, then read `getData(false)`). Given to
/// [`ZooKeeperNodeTracker::with_listener`].
///
/// Calls come on the session's event thread, one at a time, in the order of
/// the tracker's reads, with the data the tracker holds then (what
/// [`ZooKeeperNodeTracker::get_data(false)`](ZooKeeperNodeTracker::get_data)
/// returns, unless a later event's re-read is already in flight: then that
/// is `None` until its answer, which comes with a call of its own). This is
/// where code on the event thread gets a change's new data. They must not
/// block: no synchronous ZooKeeper call, no lock wait (see
/// [`ZooKeeperListener`]); hand blocking work to a thread, or use the
/// client's asynchronous calls.
///
/// | event on the node | what the tracker read | call |
/// |---|---|---|
/// | `NodeCreated` | the node | `node_created` |
/// | `NodeDataChanged` | the node | `node_data_changed` |
/// | `NodeDeleted` | the node is back already | `node_created` (HBase's `nodeDeleted` calls `nodeCreated` then) |
/// | any | no node | `node_deleted` |
/// | a session renewal | a change from the data held before | the call for that change |
///
/// A read that fails (`ConnectionLoss`) is issued again at the reconnect and
/// the call comes with its answer. Nothing is called after
/// [`stop`](ZooKeeperNodeTracker::stop), nor for a refresh an application
/// thread makes (`get_data(true)`, `start`), as in HBase.
pub trait NodeTrackerListener: Send + Sync {
    /// The node exists now (after `NodeCreated`, or a `NodeDeleted` whose
    /// node is back), holding `data` (without HBase's metadata prefix).
    fn node_created(&self, _path: &str, _data: &[u8]) {}
    /// The node's data changed; `data` is what the tracker read.
    fn node_data_changed(&self, _path: &str, _data: &[u8]) {}
    /// The node does not exist now.
    fn node_deleted(&self, _path: &str) {}
}

/// Why the tracker reads its node asynchronously: the event it follows (for
/// the [`NodeTrackerListener`]), or a renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Created,
    DataChanged,
    Deleted,
    Renewal,
}

impl Cause {
    /// Whether the read follows an event on the node (what the getters wait
    /// for), not a renewal.
    fn is_event(self) -> bool {
        matches!(self, Cause::Created | Cause::DataChanged | Cause::Deleted)
    }

    fn name(self) -> &'static str {
        match self {
            Cause::Created => "nodeCreated",
            Cause::DataChanged => "nodeDataChanged",
            Cause::Deleted => "nodeDeleted",
            Cause::Renewal => "session renewal",
        }
    }
}

/// Tracks the existence and data of one znode: HBase's `ZooKeeperNodeTracker`.
///
/// After [`start`](Self::start) the tracker always keeps a watch on the node
/// (the session's default watch, so the watcher's listeners for the node hear
/// its events too): a data watch while it exists, an exists watch while it
/// does not. It reacts as HBase's does, without ever blocking the
/// session's event thread: re-reads are asynchronous requests whose answers
/// come back on the event thread, and a recoverable error is not retried
/// inline:
///
/// | event | reaction, before any user listener hears the event | then, asynchronously |
/// |---|---|---|
/// | `NodeCreated`, `NodeDataChanged` | no current data until the re-read is answered (see [`get_data`](Self::get_data)) | read the data with a watch; if the node is gone meanwhile, handle it as a deletion |
/// | `NodeDeleted` | forget the data | set an exists watch; if the node is back already, read it as a creation |
/// | a read fails with `ConnectionLoss` / `OperationTimeout` | the tracker keeps what it held | read again on the next `SyncConnected` |
/// | `Expired`, `AuthFailed`, `Closed` | wake the threads in [`block_until_available`](Self::block_until_available) with the error | |
///
/// Any other ZooKeeper error while tracking (`NoAuth`, ...) is passed to the
/// [`Abortable`] given at construction, as in HBase.
///
/// Every read is numbered as it is sent (in one step, so numbers follow the
/// send order, and the answers' order); what a read found is stored only if no
/// later-sent read was stored already. Any change after a read fires the watch
/// that read left, so the tracker always converges on the node's state.
///
/// A deliberate difference from HBase, because the event thread never waits
/// on the network: on that thread (in a [`ZooKeeperListener`] hearing
/// `nodeCreated` or `nodeDataChanged` for the node), `get_data(false)` and
/// `block_until_available(.., false)` answer `None` where HBase's tracker has
/// already read the new data; application threads get it, and a
/// [`NodeTrackerListener`] is given it.
///
/// Unlike HBase's, the tracker is not in the watcher's listener registry (it
/// subscribes to its node's events apart from it, and is told of them before
/// the listeners, as HBase's tracker registered first is), so
/// `unregister_all_listeners` does not stop it,
/// and it holds the watcher weakly: dropping the application's last
/// [`ZooKeeperWatcher`] handle ends the session (and the tracker's waits, with
/// [`Error::Closed`]).
///
/// # Threads and cloning
/// `Send + Sync`; share it with an `Arc`. Waiting goes through the crate's one
/// wait engine (woken by the tracker's changes, [`stop`](Self::stop) and the
/// session's end; no polling). Dropping the tracker stops it.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use zklock::{LoggingAbortable, ZooKeeperNodeTracker, ZooKeeperWatcher};
///
/// let zkw = ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// let tracker = ZooKeeperNodeTracker::new(&zkw, "/app/master", Arc::new(LoggingAbortable::new()));
/// tracker.start()?;
/// match tracker.block_until_available(Duration::from_secs(10), false)? {
///     Some(data) => println!("master: {}", String::from_utf8_lossy(&data)),
///     None => println!("no master yet"),
/// }
/// tracker.stop();
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct ZooKeeperNodeTracker {
    shared: Arc<TrackerShared>,
    hook: Option<u64>,
}

/// The tracker's state, reached by its watch and its connection hook weakly.
struct TrackerShared {
    me: Weak<TrackerShared>,
    zkw: WeakZooKeeperWatcher,
    node: String,
    abortable: Arc<dyn Abortable>,
    /// The port's code run on each change (see [`NodeTrackerListener`]).
    listener: Option<Arc<dyn NodeTrackerListener>>,
    state: Mutex<TrackerState>,
    /// Woken by every change of `state` a getter waits for (data, the end of
    /// an awaited re-read, stop, the session's end as the event thread tells
    /// it): the wait engine's wake-up counter.
    wake: Arc<Wake>,
    /// Held around numbering a read and sending it, so that reads are sent in
    /// the order of their numbers (and answered in it: one session answers in
    /// send order). Reentrant: a send answered at once on the sending thread
    /// (the session is over) may run a callback that sends again.
    send_order: ReentrantMutex<()>,
    /// Run once on the refreshing thread before its next read is sent (tests).
    before_refresh_send: OnceHook,
    /// The re-reads' retry budget (the engine's held watch re-arms them).
    budget: Budget,
}

#[derive(Default)]
struct TrackerState {
    data: Option<Vec<u8>>,
    started: bool,
    stopped: bool,
    /// The number of the last read sent.
    sent: u64,
    /// The number of the read whose result `data` is.
    stored: u64,
    session_error: Option<Error>,
    /// The number of the re-read in flight that an event on the node made
    /// necessary (`nodeCreated`, `nodeDataChanged`, the check after
    /// `nodeDeleted`); 0 when none is. While one is, `data` is not known to be
    /// current: the getters wait for its answer (see
    /// [`ZooKeeperNodeTracker::get_data`]).
    awaited: u64,
    /// The session's event thread, which answers the tracker's reads (noted
    /// when it tells the tracker of an event): the getters never wait there.
    event_thread: Option<ThreadId>,
    /// The [`NodeTrackerListener`] is being told (on the event thread) of the
    /// data the tracker holds: while it runs, `get_data(false)` there answers
    /// that data, as an HBase subclass's override reads the field just set,
    /// even when a later re-read is already in flight.
    telling: bool,
}

impl TrackerState {
    /// Whether the calling thread is the session's event thread.
    fn on_event_thread(&self) -> bool {
        self.event_thread == Some(thread::current().id())
    }
}

impl fmt::Debug for ZooKeeperNodeTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.state.lock();
        f.debug_struct("ZooKeeperNodeTracker")
            .field("node", &self.shared.node)
            .field("started", &st.started)
            .field("stopped", &st.stopped)
            .field("data_len", &st.data.as_ref().map(Vec::len))
            .field("rereading", &(st.awaited != 0))
            .finish()
    }
}

impl ZooKeeperNodeTracker {
    /// `new ZooKeeperNodeTracker(watcher, node, abortable)`: a tracker of `node`,
    /// not started yet. `abortable` hears of ZooKeeper errors while tracking.
    pub fn new(
        zkw: &ZooKeeperWatcher,
        node: &str,
        abortable: Arc<dyn Abortable>,
    ) -> ZooKeeperNodeTracker {
        ZooKeeperNodeTracker::make(zkw, node, abortable, None)
    }

    /// A tracker that runs `listener` on each change of the node, with its data
    /// already refreshed: how HBase's subclasses of `ZooKeeperNodeTracker`
    /// (which override `nodeCreated` / `nodeDataChanged` / `nodeDeleted`) are
    /// ported. See [`NodeTrackerListener`].
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use zklock::{LoggingAbortable, NodeTrackerListener, ZooKeeperNodeTracker, ZooKeeperWatcher};
    ///
    /// // HBase's ReplicationPeer.PeerStateTracker: nodeDataChanged reads the state.
    /// struct PeerState;
    /// impl NodeTrackerListener for PeerState {
    ///     fn node_data_changed(&self, _path: &str, data: &[u8]) {
    ///         println!("peer is now {}", String::from_utf8_lossy(data));
    ///     }
    /// }
    ///
    /// let zkw = ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
    /// let tracker = ZooKeeperNodeTracker::with_listener(
    ///     &zkw,
    ///     "/hbase/replication/peers/1/peer-state",
    ///     Arc::new(LoggingAbortable::new()),
    ///     Arc::new(PeerState),
    /// );
    /// tracker.start()?;
    /// # Ok::<(), zklock::Error>(())
    /// ```
    pub fn with_listener(
        zkw: &ZooKeeperWatcher,
        node: &str,
        abortable: Arc<dyn Abortable>,
        listener: Arc<dyn NodeTrackerListener>,
    ) -> ZooKeeperNodeTracker {
        ZooKeeperNodeTracker::make(zkw, node, abortable, Some(listener))
    }

    fn make(
        zkw: &ZooKeeperWatcher,
        node: &str,
        abortable: Arc<dyn Abortable>,
        listener: Option<Arc<dyn NodeTrackerListener>>,
    ) -> ZooKeeperNodeTracker {
        let weak = zkw.downgrade();
        let shared = Arc::new_cyclic(|me: &Weak<TrackerShared>| TrackerShared {
            me: me.clone(),
            zkw: weak.clone(),
            node: node.to_string(),
            abortable,
            listener,
            state: Mutex::new(TrackerState::default()),
            wake: Arc::new(Wake::default()),
            send_order: ReentrantMutex::new(()),
            before_refresh_send: OnceHook::default(),
            budget: Budget::new(IMMEDIATE_RETRIES),
        });
        let hook = weak.add_path_hook(Arc::downgrade(&shared) as Weak<dyn SessionHook>, node);
        ZooKeeperNodeTracker { shared, hook }
    }

    /// `ZooKeeperNodeTracker.start`: reads the node, leaving a watch whether or
    /// not it exists, and follows it from then on. A second call while started
    /// does nothing; a call after [`stop`](Self::stop) starts tracking again.
    ///
    /// # Errors
    /// `BadArguments` for a bad path; a ZooKeeper error of the first read, which
    /// is also passed to the `Abortable` (as HBase does). The tracker stays
    /// started.
    pub fn start(&self) -> Result<()> {
        crate::path::validate(&self.shared.node)?;
        {
            let mut st = self.shared.state.lock();
            if st.started && !st.stopped {
                return Ok(());
            }
            st.started = true;
            st.stopped = false;
        }
        self.shared.refresh(true).map(drop).map_err(|e| {
            self.shared
                .abort("unexpected exception during initialization, aborting", e)
        })
    }

    /// `ZooKeeperNodeTracker.stop`: stops tracking and wakes every thread in
    /// [`block_until_available`](Self::block_until_available) (they return what
    /// is known, `None` if the node was not available). Idempotent. The last
    /// known data stays readable with `get_data(false)`. A watch already set
    /// fires once more, and is ignored.
    pub fn stop(&self) {
        self.shared.state.lock().stopped = true;
        self.shared.wake.wake();
    }

    /// HBase's `stopped` flag: whether [`stop`](Self::stop) was called (and no
    /// `start` since).
    pub fn is_stopped(&self) -> bool {
        self.shared.state.lock().stopped
    }

    /// `ZooKeeperNodeTracker.blockUntilAvailable(timeout, refresh)`: the node's
    /// data, waiting up to `timeout` for the node to exist. With `refresh`, reads
    /// the node from ZooKeeper first (on this thread) instead of trusting the
    /// tracked state.
    ///
    /// Returns `Some(data)` once the node exists, `None` when `timeout` passes or
    /// the tracker is stopped first. A huge timeout (`Duration::MAX`) waits until
    /// one of those or the session's end. `Duration::ZERO` does not wait.
    ///
    /// After a `nodeCreated` or `nodeDataChanged` on the node, the data counts
    /// as available only once the tracker's re-read is answered: this waits
    /// for it first, as [`get_data`](Self::get_data) does, whatever the
    /// `timeout` (HBase's synchronized method waits for the tracker's
    /// handler), instead of returning the old data. On the session's
    /// event thread, which answers that re-read, it returns `Ok(None)` at once
    /// while the re-read is in flight (a deliberate difference: HBase's
    /// tracker read the node before the listener was called; see
    /// [`get_data`](Self::get_data)). After a `nodeDeleted` the tracker is
    /// empty before any listener hears it.
    ///
    /// # Errors
    /// `BadArguments` if the tracker was never started; `SessionExpired`,
    /// `AuthFailed` or [`Error::Closed`] when the session is or becomes unusable
    /// (the wait ends at once); with `refresh`, a ZooKeeper error of the read
    /// (also passed to the `Abortable`). The wait goes through the crate's wait
    /// engine: the end of the session it began in wakes it from the client's
    /// thread that ends it, so it ends even while a user's listener holds up
    /// the event thread, and it ends with `SessionExpired` also when
    /// [`with_session_renewal`](crate::ZooKeeperWatcherBuilder::with_session_renewal)
    /// opens a new session (call again to wait in that one).
    #[doc(alias = "blockUntilAvailable")]
    pub fn block_until_available(
        &self,
        timeout: Duration,
        refresh: bool,
    ) -> Result<Option<Vec<u8>>> {
        let deadline = Deadline::after(timeout);
        if !self.shared.state.lock().started {
            return Err(Error::BadArguments(format!(
                "tracker of {} is not started",
                self.shared.node
            )));
        }
        self.shared.zkw.check_session()?;
        let session = WaitingIn::begin(&self.shared.zkw).ok_or(Error::Closed)?;
        if refresh {
            self.shared.refresh(false).map_err(|e| {
                self.shared
                    .abort("unexpected exception handling blockUntilAvailable", e)
            })?;
        }
        let here = self.shared.state.lock().on_event_thread();
        // A re-read in flight is waited for whatever the timeout, as HBase's
        // synchronized method waits for the tracker's handler.
        self.shared.settle(Some(&session));
        let wake = &self.shared.wake;
        loop {
            // Read before looking: a change after the look wakes the wait.
            let seen = wake.generation();
            // The session's end as its own thread set it (before it woke this
            // wait), which the event thread may not have told the tracker yet:
            // the same as the tracker's `session_event`, which records it and
            // gives up the re-read in flight.
            let ended = session.check().err();
            {
                let st = self.shared.state.lock();
                let ended = st.session_error.clone().or(ended);
                let awaited = if ended.is_some() { 0 } else { st.awaited };
                // The listener being told of the data reads that data.
                let current = awaited == 0 || (here && st.telling);
                if current {
                    if let Some(data) = &st.data {
                        return Ok(Some(data.clone()));
                    }
                }
                if st.stopped {
                    return Ok(None);
                }
                if let Some(e) = ended {
                    return Err(e);
                }
                if !current && here {
                    // The re-read's answer comes on this very thread: waiting
                    // could only time out.
                    return Ok(None);
                }
            }
            // The session's end is looked at above: an error here (the
            // session ended) is answered by the next look.
            let woken = wait::wait(
                wake,
                seen,
                &session.pinned(),
                deadline,
                WhenDown::Wait,
                &self.shared.node,
            );
            if let Ok(false) = woken {
                let st = self.shared.state.lock();
                return Ok(st.data.clone().filter(|_| st.awaited == 0));
            }
        }
    }

    /// `ZooKeeperNodeTracker.getData(refresh)`: the node's data, `None` if it
    /// does not exist (as far as the tracker knows). With `refresh`, reads it from
    /// ZooKeeper (with a watch, on this thread) and returns what ZooKeeper said;
    /// on a ZooKeeper error, the `Abortable` is told and the tracked data is
    /// returned.
    ///
    /// The tracker changes its state before the watcher's listeners hear an
    /// event on the node. After `nodeDeleted`: `None` at once. After
    /// `nodeCreated` or `nodeDataChanged` the new data needs a read, whose
    /// answer comes back on the session's event thread:
    ///
    /// | caller | while that re-read is in flight |
    /// |---|---|
    /// | an application thread (e.g. one a listener woke) | waits for its answer (as HBase's synchronized `getData` waits for the tracker's handler), as long as each step of it may take (the client's request timeout), and returns it |
    /// | the event thread (a [`ZooKeeperListener`], a [`NodeTrackerListener`] of another event) | `None` at once: the data is not known yet, and waiting there could only stall the answer |
    ///
    /// The second row is a deliberate difference from HBase, whose tracker
    /// reads the node synchronously before the next listener is called (the
    /// event thread never waits on the network in zklock's own code). A
    /// listener that needs the new data gets it from the tracker's
    /// [`NodeTrackerListener`], hands the work to a thread, or calls
    /// `get_data(true)`: on the event thread that is a synchronous read, one
    /// round trip (what any ZooKeeper call from a listener costs: see
    /// [`ZooKeeperListener`]), after which the tracker holds the data it
    /// returned. A re-read that fails with
    /// `ConnectionLoss` is made again at the reconnect; meanwhile the tracker
    /// answers with what it held (as HBase's does when its handler's read
    /// fails).
    #[doc(alias = "getData")]
    pub fn get_data(&self, refresh: bool) -> Option<Vec<u8>> {
        if refresh {
            match self.shared.refresh(false) {
                Ok(data) => return data,
                Err(e) => {
                    self.shared
                        .abort("unexpected exception handling getData", e);
                }
            }
        }
        self.shared.current_data()
    }

    /// Testing only: runs `hook` once, on the thread of the next blocking
    /// refresh ([`get_data(true)`](Self::get_data), `start`,
    /// `block_until_available(.., true)`), just before that refresh sends its
    /// next read: how a test makes an event-driven read overtake it.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn before_next_refresh_send(&self, hook: impl FnOnce() + Send + 'static) {
        self.shared.before_refresh_send.set(hook);
    }

    /// `ZooKeeperNodeTracker.getNode`: the tracked path.
    #[doc(alias = "getNode")]
    pub fn get_node(&self) -> &str {
        &self.shared.node
    }

    /// Whether what the tracker holds may lag the quorum (not in HBase): the
    /// session is not served by a read-write server now, disconnected or
    /// connected to a read-only one (read-only mode,
    /// [`ZooKeeperWatcherBuilder::with_read_only`](crate::ZooKeeperWatcherBuilder::with_read_only)),
    /// or it has ended. Meanwhile [`get_data`](Self::get_data) keeps
    /// answering with what the tracker held (a read-only server's reads, if
    /// it read there); at the next read-write server its watch, set again by
    /// the client, tells it of what changed (and a new session, as after a
    /// read-only server's session, makes it read again).
    pub fn is_stale(&self) -> bool {
        self.shared.zkw.zookeeper().map_or(true, |zk| {
            zk.state() != State::Connected || zk.is_read_only()
        })
    }

    /// `ZooKeeperNodeTracker.checkIfBaseNodeAvailable`: whether the watcher's
    /// base znode exists. A ZooKeeper error is passed to the `Abortable` and gives
    /// `false` (HBase answers `true` then; zklock does not claim what it could not
    /// check).
    #[doc(alias = "checkIfBaseNodeAvailable")]
    pub fn check_if_base_node_available(&self) -> bool {
        let (Some(rzk), Some(base)) = (
            self.shared.zkw.recoverable_zookeeper(),
            self.shared.zkw.base_znode(),
        ) else {
            return false;
        };
        match zkutil::check_exists_rzk(&rzk, &base) {
            Ok(version) => version.is_some(),
            Err(e) => {
                self.shared.abort(
                    &format!("exception while checking if basenode ({base}) exists in ZooKeeper"),
                    e,
                );
                false
            }
        }
    }
}

impl Drop for ZooKeeperNodeTracker {
    fn drop(&mut self) {
        self.stop();
        if let Some(id) = self.hook {
            self.shared.zkw.remove_hook(id);
        }
    }
}

impl TrackerShared {
    /// Tells the abortable of `e` (unless the session is over: that is told to
    /// the waiters); returns `e`.
    fn abort(&self, why: &str, e: Error) -> Error {
        if ends_session(&e) {
            debug!("tracker of {}: {why}: {e}", self.node);
        } else {
            warn!("tracker of {}: {why}: {e}", self.node);
            self.abortable.abort(why, Some(&e));
        }
        e
    }

    /// Numbers a read about to be sent; call it under `send_order`, with the
    /// send.
    fn next_read(&self) -> u64 {
        let mut st = self.state.lock();
        st.sent += 1;
        st.sent
    }

    /// Stores what read `read` found, unless a later-sent read was stored. A
    /// read sent at or after the awaited re-read settles the tracker.
    fn store(&self, read: u64, data: Option<Vec<u8>>) {
        let mut st = self.state.lock();
        if read > st.stored {
            st.stored = read;
            st.data = data;
            self.wake.wake();
        }
        Self::unawait(&mut st, read, &self.wake);
    }

    /// The awaited re-read `read` ended without an answer to store (it failed,
    /// and is not issued again at once): the tracker keeps what it held.
    fn unawait(st: &mut TrackerState, read: u64, wake: &Wake) {
        if st.awaited != 0 && read >= st.awaited {
            st.awaited = 0;
            wake.wake();
        }
    }

    /// What `get_data(false)` answers: the data, once no re-read that an event
    /// made necessary is in flight. An application thread waits for that
    /// re-read's answer (as HBase's synchronized `getData` waits for the
    /// tracker's event handling), as long as each step of it may take (the
    /// client's request timeout); the event thread, which answers it, never
    /// waits. `None` while the re-read is still in flight after that.
    fn current_data(&self) -> Option<Vec<u8>> {
        self.settle(None);
        let st = self.state.lock();
        let told = st.telling && st.on_event_thread();
        st.data.clone().filter(|_| st.awaited == 0 || told)
    }

    /// Off the event thread, waits while a re-read that an event made
    /// necessary is in flight, as long as each step of it may take (the
    /// client's request timeout). With a `session`, also until that session
    /// ends (woken from the thread that ends it: `block_until_available`
    /// then answers at once, even while the event thread is held up).
    fn settle(&self, session: Option<&WaitingIn>) {
        let (mut step, bound) = {
            let st = self.state.lock();
            if st.awaited == 0 || st.on_event_thread() {
                return;
            }
            let bound = self
                .zkw
                .zookeeper()
                .map_or(Duration::ZERO, |zk| zk.request_timeout());
            (st.awaited, bound)
        };
        let mut until = Deadline::after(bound);
        loop {
            // Read before looking: a change after the look wakes the wait.
            let seen = self.wake.generation();
            {
                let st = self.state.lock();
                if st.awaited == 0 {
                    return;
                }
                if st.awaited != step {
                    // The re-read went on (getData → NoNode → exists).
                    step = st.awaited;
                    until = Deadline::after(bound);
                }
            }
            let woken = match session {
                Some(s) => match wait::wait(
                    &self.wake,
                    seen,
                    &s.pinned(),
                    until,
                    WhenDown::Wait,
                    &self.node,
                ) {
                    Ok(woken) => woken,
                    // The session ended: nothing more will be answered.
                    Err(_) => return,
                },
                None => self.wake.wait(seen, until),
            };
            if !woken && self.state.lock().awaited == step {
                warn!(
                    "tracker of {}: no answer to its re-read within {bound:?}",
                    self.node
                );
                return;
            }
        }
    }

    /// An application thread's blocking read (with the `RecoverableZooKeeper`'s
    /// retries): the node's data and a data watch while it exists, `None` and an
    /// exists watch while it does not. With `check_first`, starts with the
    /// exists check (HBase's `start`), else with the data read.
    fn refresh(&self, check_first: bool) -> Result<Option<Vec<u8>>> {
        let rzk = self.zkw.recoverable_zookeeper().ok_or(Error::Closed)?;
        let mut check = check_first;
        loop {
            if check {
                let (read, stat) = self.read_blocking(
                    &rzk,
                    "exists",
                    |zk, watch, answer| zk.exists_async(&self.node, Some(watch), answer),
                    |zk, watch| zk.exists_watch(&self.node, watch),
                )?;
                if stat.is_none() {
                    self.store(read, None);
                    return Ok(None);
                }
            }
            let (read, found) = self.read_blocking(
                &rzk,
                "getData",
                |zk, watch, answer| {
                    zk.get_data_async(&self.node, Some(watch), move |r| {
                        answer(
                            r.map(|(data, _)| remove_metadata(&data).to_vec())
                                .optional(),
                        );
                    });
                },
                |zk, watch| {
                    zk.get_data_watch(&self.node, watch)
                        .map(|(data, _)| remove_metadata(&data).to_vec())
                        .optional()
                },
            )?;
            if let Some(data) = found {
                self.store(read, Some(data.clone()));
                return Ok(Some(data));
            }
            // It existed but does not now: make sure a watch is set.
            debug!(
                "znode {} vanished while reading it; checking again",
                self.node
            );
            check = true;
        }
    }

    /// One read of [`refresh`](Self::refresh), on the calling thread: numbered
    /// and sent (by `send`, with an asynchronous call, the tracker's watch and
    /// the callback it is given) in one step under `send_order`, like every
    /// read of the tracker; then waits for the callback's answer. Retried in
    /// `RecoverableZooKeeper`'s own loop: `ConnectionLoss` and
    /// `OperationTimeout` as its `RetryConfig` says (no retry starts whose
    /// backoff would pass the handle's deadline), any other error returned.
    /// Each attempt waits for a connection first, and for the answer, as long
    /// as any blocking call of the session does: the client's
    /// [`connect_wait`](ZooKeeper::connect_wait) and
    /// [`request_timeout`](ZooKeeper::request_timeout) (the watcher's
    /// `with_connect_wait` / `with_request_timeout`), within the handle's
    /// deadline.
    ///
    /// On the session's event thread (a listener refreshing the tracker),
    /// which would deliver that answer, the read is the synchronous call
    /// `sync` instead (its reply never waits for the event thread), still
    /// numbered and sent under `send_order`: one round trip, as any ZooKeeper
    /// call from a listener.
    fn read_blocking<T: Send + 'static>(
        &self,
        rzk: &RecoverableZooKeeper,
        what: &str,
        send: impl Fn(&ZooKeeper, Arc<dyn Watcher>, Box<dyn FnOnce(Result<T>) + Send>),
        sync: impl Fn(&ZooKeeper, Arc<dyn Watcher>) -> Result<T>,
    ) -> Result<(u64, T)> {
        let zk = rzk.zookeeper();
        let deadline = zk.deadline();
        rzk.retrying(what, &self.node, |_| {
            zk.wait_connected(deadline.cap(zk.connect_wait()))
                .and_then(|()| {
                    hook!(once self.before_refresh_send);
                    // A tracker that heard nothing yet has not noted its
                    // session's event thread: the client knows it.
                    let here = self.state.lock().on_event_thread() || zk.is_event_thread();
                    if here {
                        let _order = self.send_order.lock();
                        let read = self.next_read();
                        return sync(zk, zk.default_watcher()).map(|t| (read, t));
                    }
                    let (tx, rx) = crossbeam_channel::bounded(1);
                    let me = self.me.clone();
                    let read = {
                        let _order = self.send_order.lock();
                        let read = self.next_read();
                        send(
                            zk,
                            zk.default_watcher(),
                            Box::new(move |r: Result<T>| {
                                if r.is_ok() {
                                    // A reply: on the event thread.
                                    if let Some(me) = me.upgrade() {
                                        me.note_event_thread();
                                    }
                                }
                                let _ = tx.send(r);
                            }),
                        );
                        read
                    };
                    // Every request is answered (its reply, or the connection's
                    // or the session's end); the bound is a blocking call's.
                    match rx.recv_timeout(deadline.cap(zk.request_timeout())) {
                        Ok(r) => r.map(|t| (read, t)),
                        Err(_) => Err(Error::zk_code(ZkError::OperationTimeout)),
                    }
                })
        })
    }

    /// Notes the calling thread as the session's event thread (called there).
    fn note_event_thread(&self) {
        self.state.lock().event_thread = Some(thread::current().id());
    }

    /// An event on the node (on the event thread, before any user listener
    /// hears it): what the event itself says is applied now, then the node is
    /// re-read asynchronously. `nodeDeleted` empties the tracker at once (a
    /// number of its own, so no answer of a read sent before it can bring the
    /// old data back); `nodeCreated` and `nodeDataChanged` leave it without
    /// current data until the re-read is answered (`awaited`).
    fn on_event(&self, what: Cause) {
        self.note_event_thread();
        {
            let st = self.state.lock();
            if st.stopped || !st.started {
                return;
            }
        }
        let _order = self.send_order.lock();
        if what == Cause::Deleted {
            let read = self.next_read();
            self.store(read, None);
        }
        self.read_async(what, what == Cause::Deleted);
    }

    /// Sends the read (`exists` with `check_first`, else `getData`) with the
    /// tracker's watch; the answer continues on the event thread. Never blocks.
    fn read_async(&self, what: Cause, check_first: bool) {
        let (Some(me), Some(zk)) = (self.me.upgrade(), self.zkw.zookeeper()) else {
            return;
        };
        // Numbered and sent in one step (the asynchronous call never waits).
        let _order = self.send_order.lock();
        let read = self.next_read();
        if what.is_event() {
            // The getters wait for this answer (set before the send: a session
            // already over answers on this thread, at once).
            self.state.lock().awaited = read;
        }
        let sent_in = zk.session_id();
        if check_first {
            zk.exists_async(&self.node, Some(zk.default_watcher()), move |r| match r {
                Ok(Some(_)) => me.read_async(what, false),
                Ok(None) => me.found(read, None, what),
                Err(e) => Reread::failed(me, read, what, sent_in, &e),
            });
        } else {
            zk.get_data_async(&self.node, Some(zk.default_watcher()), move |r| match r {
                Ok((data, _)) => me.found(read, Some(remove_metadata(&data).to_vec()), what),
                Err(e) if e.is(ZkError::NoNode) => {
                    debug!(
                        "znode {} vanished while reading it; checking again",
                        me.node
                    );
                    me.read_async(what, true)
                }
                Err(e) => Reread::failed(me, read, what, sent_in, &e),
            });
        }
    }

    fn found(&self, read: u64, data: Option<Vec<u8>>, cause: Cause) {
        self.budget.answered();
        let before = self.state.lock().data.clone();
        self.store(read, data);
        self.tell_listener(cause, before);
    }

    /// Runs the [`NodeTrackerListener`] for a read made because of `cause`,
    /// with the data the tracker holds now (`before` is what it held before
    /// the read was stored). On the event thread; a panic is caught and logged.
    fn tell_listener(&self, cause: Cause, before: Option<Vec<u8>>) {
        let Some(listener) = &self.listener else {
            return;
        };
        let now = {
            let st = self.state.lock();
            if st.stopped || !st.started {
                return;
            }
            st.data.clone()
        };
        let node = self.node.as_str();
        let call = || match (cause, &now) {
            (Cause::Renewal, _) if before == now => {}
            (_, None) => listener.node_deleted(node),
            (Cause::DataChanged, Some(d)) => listener.node_data_changed(node, d),
            (Cause::Renewal, Some(d)) if before.is_some() => listener.node_data_changed(node, d),
            (_, Some(d)) => listener.node_created(node, d),
        };
        self.state.lock().telling = true;
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).is_err();
        self.state.lock().telling = false;
        if panicked {
            error!("the NodeTrackerListener of {node} panicked");
        }
    }
}

/// A re-read of the tracker that failed (on the event thread), as the
/// engine's held watch sees it: armed again (the read, `exists` first) at
/// once within the tracker's budget while connected, else at the reconnect;
/// a session's end is told to the waiters, any other error to the
/// [`Abortable`]. Meanwhile the getters answer with what the tracker held.
struct Reread {
    shared: Arc<TrackerShared>,
    /// The failed read's number.
    read: u64,
    /// What the read follows (told to the listener with its answer).
    what: Cause,
}

impl Reread {
    /// Read `read` of `shared`, sent in the session `sent_in`, failed with `e`.
    fn failed(shared: Arc<TrackerShared>, read: u64, what: Cause, sent_in: i64, e: &Error) {
        debug!("tracker of {}: {e} handling {}", shared.node, what.name());
        held::failed(Arc::new(Reread { shared, read, what }), sent_in, e, ());
    }

    /// The read ended without an answer to store.
    fn unawait(&self) {
        TrackerShared::unawait(&mut self.shared.state.lock(), self.read, &self.shared.wake);
    }
}

impl Held for Reread {
    type Context = ();

    fn watcher(&self) -> &WeakZooKeeperWatcher {
        &self.shared.zkw
    }

    fn path(&self) -> &str {
        &self.shared.node
    }

    fn budget(&self) -> Option<&Budget> {
        Some(&self.shared.budget)
    }

    fn resend(self: &Arc<Self>) {
        let go = {
            let st = self.shared.state.lock();
            st.started && !st.stopped
        };
        if go {
            self.shared.read_async(self.what, true);
        } else {
            self.unawait();
        }
    }

    /// Not reached (a read that finds no node answers it).
    fn on_gone(&self, (): ()) {
        self.shared.read_async(self.what, true);
    }

    fn on_ended(&self, e: &Error, (): ()) {
        let shared = &self.shared;
        if ends_session(e) {
            debug!(
                "tracker of {}: session over handling {}: {e}",
                shared.node,
                self.what.name()
            );
            let mut st = shared.state.lock();
            st.session_error.get_or_insert(e.clone());
            TrackerShared::unawait(&mut st, self.read, &shared.wake);
            shared.wake.wake();
        } else {
            self.unawait();
            shared.abort(
                &format!("unexpected exception handling {} event", self.what.name()),
                e.clone(),
            );
        }
    }

    /// Read again at the reconnect; meanwhile the getters answer with what
    /// the tracker held.
    fn on_waiting(&self) {
        self.unawait();
    }

    fn on_lost(&self) {
        self.unawait();
    }
}

impl SessionHook for TrackerShared {
    fn node_event(&self, event_type: EventType, path: &str) {
        if path != self.node {
            return;
        }
        match event_type {
            EventType::NodeCreated => self.on_event(Cause::Created),
            EventType::NodeDataChanged => self.on_event(Cause::DataChanged),
            EventType::NodeDeleted => self.on_event(Cause::Deleted),
            _ => {}
        }
    }

    fn session_renewed(&self) {
        // A new session: the old one's end no longer holds, its watch is gone.
        let go = {
            let mut st = self.state.lock();
            st.event_thread = Some(thread::current().id());
            st.session_error = None;
            st.started && !st.stopped
        };
        // Nothing of the old session is read again: this read replaces it.
        self.budget.reset();
        if go {
            debug!("tracker of {}: session renewed, reading again", self.node);
            self.read_async(Cause::Renewal, true);
        }
    }

    fn session_event(&self, state: KeeperState) {
        if let Some(e) = Error::for_session_event(state) {
            let mut st = self.state.lock();
            st.session_error.get_or_insert(e);
            // Nothing more will be answered: the getters answer with what the
            // tracker held.
            st.awaited = 0;
            self.wake.wake();
            return;
        }
        if state == KeeperState::SyncConnected {
            // A read waiting for the reconnect is read again by the engine's
            // held watch; the budget is whole again.
            self.state.lock().event_thread = Some(thread::current().id());
            self.budget.immediate_reset();
        }
    }
}

// ---------------------------------------------------------------------------
// DeletionListener
// ---------------------------------------------------------------------------

/// Waits for one znode's deletion: HBase's `DeletionListener`, with its
/// `CountDownLatch` built in.
///
/// A listener made with [`new`](Self::new) hears every event on its path that
/// comes through the session's default watcher, through a library
/// subscription of the watcher, not its listener registry (so
/// `unregister_all_listeners` cannot strand the wait). Set the watch with
/// [`set_watch_if_node_exists`](Self::set_watch_if_node_exists) (or HBase's
/// [`zkutil::set_watch_if_node_exists`]: the same default watch); if the node
/// exists, wait with [`await_deletion`](Self::await_deletion). The events also
/// reach the watcher's registered listeners for that path, as in HBase.
/// Registering the listener on the watcher too (HBase's way) is harmless: its
/// [`ZooKeeperListener`] methods then do nothing, the subscription has it.
///
/// | event on the watched path | effect |
/// |---|---|
/// | `NodeDeleted` | released |
/// | `NodeDataChanged` | the data watch is set again (asynchronously); released if the node is gone; any other error is recorded ([`exception`](Self::exception)) and releases |
/// | setting it again fails with `ConnectionLoss` | set again on the next `SyncConnected` |
/// | `Expired`, `AuthFailed`, `Closed` | released with `SessionExpired`, `AuthFailed` or [`Error::Closed`] recorded |
/// | `Disconnected` | nothing: the client re-sets the watch when it reconnects |
///
/// The first recorded error is kept. The latch never closes again once released.
/// The listener never blocks the event thread, and holds the watcher weakly.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use zklock::{DeletionListener, ZooKeeperWatcher};
///
/// let zkw = ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// let listener = DeletionListener::new(&zkw, "/app/lock/write-0000000007");
/// if listener.set_watch_if_node_exists()? {
///     listener.await_deletion(Some(Duration::from_secs(30)));
/// }
/// if let Some(e) = listener.exception() {
///     return Err(e);
/// }
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct DeletionListener {
    shared: Arc<DeletionShared>,
    hook: Option<u64>,
}

struct DeletionShared {
    me: Weak<DeletionShared>,
    zkw: WeakZooKeeperWatcher,
    path_to_watch: String,
    latch: Mutex<Latch>,
    /// Woken when the latch is released: the wait engine's wake-up counter.
    wake: Arc<Wake>,
    /// The data watch's retry budget (the engine's held watch re-arms it).
    budget: Budget,
}

#[derive(Default)]
struct Latch {
    released: bool,
    exception: Option<Error>,
}

impl fmt::Debug for DeletionListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let latch = self.shared.latch.lock();
        f.debug_struct("DeletionListener")
            .field("path_to_watch", &self.shared.path_to_watch)
            .field("released", &latch.released)
            .field("exception", &latch.exception)
            .finish()
    }
}

impl DeletionListener {
    /// `new DeletionListener(zkw, pathToWatch, latch)`: a listener for the
    /// deletion of `path_to_watch`, not released. It hears of the session's end
    /// on its own; set its watch with
    /// [`set_watch_if_node_exists`](Self::set_watch_if_node_exists) (or register
    /// it and use [`zkutil::set_watch_if_node_exists`], HBase's way).
    pub fn new(zkw: &ZooKeeperWatcher, path_to_watch: &str) -> DeletionListener {
        let mut l = DeletionListener::with_session(zkw.downgrade(), path_to_watch);
        l.hook = l.shared.zkw.add_path_hook(
            Arc::downgrade(&l.shared) as Weak<dyn SessionHook>,
            path_to_watch,
        );
        l
    }

    fn with_session(zkw: WeakZooKeeperWatcher, path_to_watch: &str) -> DeletionListener {
        let shared = Arc::new_cyclic(|me: &Weak<DeletionShared>| DeletionShared {
            me: me.clone(),
            zkw,
            path_to_watch: path_to_watch.to_string(),
            latch: Mutex::new(Latch::default()),
            wake: Arc::new(Wake::default()),
            budget: Budget::new(IMMEDIATE_RETRIES),
        });
        DeletionListener { shared, hook: None }
    }

    /// HBase's `pathToWatch`: the watched path.
    #[doc(alias = "pathToWatch")]
    pub fn path_to_watch(&self) -> &str {
        &self.shared.path_to_watch
    }

    /// `ZKUtil.setWatchIfNodeExists` (the session's default watch), on the
    /// calling thread (blocking, with the `RecoverableZooKeeper`'s retries):
    /// `true` if the node exists and its deletion is now watched, `false` if it
    /// does not exist (the latch is then released, and no watch is left).
    ///
    /// # Errors
    /// `BadArguments` for a bad path; `NoAuth`; session errors ([`Error::Closed`]
    /// once the watcher is gone).
    pub fn set_watch_if_node_exists(&self) -> Result<bool> {
        let rzk = self
            .shared
            .zkw
            .recoverable_zookeeper()
            .ok_or(Error::Closed)?;
        crate::path::validate(&self.shared.path_to_watch)?;
        match rzk
            .get_data_watch(
                &self.shared.path_to_watch,
                &rzk.zookeeper().default_watcher(),
            )
            .optional()?
        {
            Some(_) => Ok(true),
            None => {
                self.shared.release(None);
                Ok(false)
            }
        }
    }

    /// `deletedLatch.await(timeout)`: waits until released (deletion, recorded
    /// error, session end) or until `timeout` passes; `None` waits without a
    /// bound (as does a timeout too large for an `Instant`). `true` if released.
    ///
    /// The end of the session the wait began in releases the latch at once,
    /// with its error recorded, as the `Expired` / `AuthFailed` / `Closed`
    /// event would: the client's thread that ends the session wakes the wait,
    /// so it ends even while a user's listener holds up the event thread.
    #[doc(alias = "waitForDeletion")]
    pub fn await_deletion(&self, timeout: Option<Duration>) -> bool {
        let deadline = Deadline::from_timeout(timeout);
        let session = WaitingIn::begin(&self.shared.zkw);
        let wake = &self.shared.wake;
        loop {
            // Read before looking: a release after the look wakes the wait.
            let seen = wake.generation();
            if self.shared.latch.lock().released {
                return true;
            }
            let woken = match &session {
                Some(s) => {
                    match wait::wait(
                        wake,
                        seen,
                        &s.pinned(),
                        deadline,
                        WhenDown::Wait,
                        self.path_to_watch(),
                    ) {
                        Ok(woken) => woken,
                        Err(e) => {
                            self.shared.release(Some(e));
                            return true;
                        }
                    }
                }
                // No session (the watcher is gone): only a release wakes it.
                None => wake.wait(seen, deadline),
            };
            if !woken {
                return self.is_released();
            }
        }
    }

    /// `deletedLatch.getCount() == 0`: whether the latch is released.
    pub fn is_released(&self) -> bool {
        self.shared.latch.lock().released
    }

    /// `DeletionListener.hasException`: whether an error was recorded.
    #[doc(alias = "hasException")]
    pub fn has_exception(&self) -> bool {
        self.shared.latch.lock().exception.is_some()
    }

    /// `DeletionListener.getException`: the recorded error (re-setting the
    /// watch failed, or the session ended), if any.
    #[doc(alias = "getException")]
    pub fn exception(&self) -> Option<Error> {
        self.shared.latch.lock().exception.clone()
    }
}

impl Drop for DeletionListener {
    fn drop(&mut self) {
        if let Some(id) = self.hook {
            self.shared.zkw.remove_hook(id);
        }
    }
}

impl DeletionShared {
    fn release(&self, exception: Option<Error>) {
        let mut latch = self.latch.lock();
        if latch.exception.is_none() {
            latch.exception = exception;
        }
        latch.released = true;
        self.wake.wake();
    }

    fn node_deleted(&self) {
        debug!("processing delete on {}", self.path_to_watch);
        self.release(None);
    }

    /// Sets the data watch again, asynchronously (HBase:
    /// `ZKUtil.setWatchIfNodeExists` on a data change), with the engine's
    /// held watch (see [`Held`]). Never blocks.
    fn rearm(&self) {
        if self.latch.lock().released {
            return;
        }
        if self.zkw.zookeeper().is_none() {
            self.release(Some(Error::Closed));
            return;
        }
        if let Some(me) = self.me.upgrade() {
            held::arm(&me);
        }
    }

    fn session_event(&self, state: KeeperState) {
        if let Some(e) = Error::for_session_event(state) {
            debug!(
                "session ended ({state:?}) while waiting for the deletion of {}",
                self.path_to_watch
            );
            self.release(Some(e));
        } else if state == KeeperState::SyncConnected {
            // A watch waiting for the reconnect is armed again by the
            // engine's held watch; the budget is whole again.
            self.budget.immediate_reset();
        }
    }
}

/// The deletion's data watch, re-set after a data change: gone releases the
/// latch; a lost connection sets it again (at once within the budget while
/// connected, else at the reconnect); any other error is recorded and
/// releases.
impl Held for DeletionShared {
    type Context = ();

    fn watcher(&self) -> &WeakZooKeeperWatcher {
        &self.zkw
    }

    fn path(&self) -> &str {
        &self.path_to_watch
    }

    fn budget(&self) -> Option<&Budget> {
        Some(&self.budget)
    }

    fn resend(self: &Arc<Self>) {
        self.rearm();
    }

    fn on_gone(&self, (): ()) {
        self.release(None);
    }

    fn on_ended(&self, e: &Error, (): ()) {
        if ends_session(e) {
            debug!(
                "session over re-setting the watch on {}: {e}",
                self.path_to_watch
            );
        } else {
            error!(
                "error when re-setting the watch on {}: {e}",
                self.path_to_watch
            );
        }
        self.release(Some(e.clone()));
    }
}

impl HeldWatch for DeletionShared {
    type Answer = (Vec<u8>, Stat);

    fn context(&self) {}

    fn request(self: &Arc<Self>, zk: &ZooKeeper, done: Done<(Vec<u8>, Stat)>) {
        zk.get_data_async(&self.path_to_watch, Some(zk.default_watcher()), done);
    }

    fn on_answer(&self, _: (Vec<u8>, Stat), (): ()) {}
}

impl SessionHook for DeletionShared {
    fn session_event(&self, state: KeeperState) {
        DeletionShared::session_event(self, state)
    }

    fn node_event(&self, event_type: EventType, path: &str) {
        if path != self.path_to_watch {
            return;
        }
        match event_type {
            EventType::NodeDeleted => self.node_deleted(),
            EventType::NodeDataChanged | EventType::NodeCreated => self.rearm(),
            _ => {}
        }
    }
}

/// HBase's way: registered on the watcher, told of the default watcher's
/// events. A listener made with [`DeletionListener::new`] hears them through its
/// subscription already; these methods then do nothing (once per event).
impl ZooKeeperListener for DeletionListener {
    fn node_deleted(&self, path: &str) {
        if self.hook.is_none() && path == self.shared.path_to_watch {
            self.shared.node_deleted();
        }
    }

    fn node_data_changed(&self, path: &str) {
        if self.hook.is_none() && path == self.shared.path_to_watch {
            self.shared.rearm();
        }
    }

    fn connection_event(&self, event: &WatchedEvent) {
        // Session ends also come through the hook; releasing is idempotent.
        // SyncConnected re-arms only through the hook (once).
        if Error::for_session_event(event.keeper_state).is_some() {
            self.shared.session_event(event.keeper_state);
        }
    }

    fn path(&self) -> Option<&str> {
        Some(&self.shared.path_to_watch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_end_maps_terminal_states_only() {
        assert!(Error::for_session_event(KeeperState::Expired)
            .is_some_and(|e| e.is(ZkError::SessionExpired)));
        assert!(Error::for_session_event(KeeperState::AuthFailed)
            .is_some_and(|e| e.is(ZkError::AuthFailed)));
        assert!(matches!(
            Error::for_session_event(KeeperState::Closed),
            Some(Error::Closed)
        ));
        assert!(Error::for_session_event(KeeperState::Disconnected).is_none());
        assert!(Error::for_session_event(KeeperState::SyncConnected).is_none());
    }

    /// A listener without a session: enough for the latch, which needs no
    /// server.
    fn offline_listener(path: &str) -> DeletionListener {
        DeletionListener::with_session(WeakZooKeeperWatcher::default(), path)
    }

    #[test]
    fn deletion_of_the_watched_path_releases_waiters() {
        let l = Arc::new(offline_listener("/a/b"));
        assert_eq!(l.path(), Some("/a/b"));
        l.node_deleted("/a/other");
        l.node_created("/a/b");
        assert!(!l.is_released());
        assert!(!l.await_deletion(Some(Duration::from_millis(30))));
        assert!(!l.await_deletion(Some(Duration::ZERO)));
        let waiter = {
            let l = l.clone();
            std::thread::spawn(move || l.await_deletion(None))
        };
        l.node_deleted("/a/b");
        assert!(waiter.join().unwrap());
        assert!(l.is_released());
        assert!(!l.has_exception());
        assert!(l.await_deletion(Some(Duration::ZERO)), "stays released");
    }

    #[test]
    fn session_end_releases_with_the_first_error() {
        let l = offline_listener("/x");
        l.connection_event(&WatchedEvent::state(KeeperState::Disconnected));
        l.connection_event(&WatchedEvent::state(KeeperState::SyncConnected));
        assert!(!l.is_released(), "a disconnect is not an end");
        l.connection_event(&WatchedEvent::state(KeeperState::Expired));
        assert!(l.is_released());
        l.connection_event(&WatchedEvent::state(KeeperState::Closed));
        assert!(l.exception().is_some_and(|e| e.is(ZkError::SessionExpired)));
        let l = offline_listener("/x");
        l.connection_event(&WatchedEvent::state(KeeperState::Closed));
        assert!(matches!(l.exception(), Some(Error::Closed)));
        assert!(l.await_deletion(None));
    }

    #[test]
    fn types_are_send_sync() {
        fn check<T: Send + Sync + 'static>() {}
        check::<ZooKeeperNodeTracker>();
        check::<DeletionListener>();
    }
}
