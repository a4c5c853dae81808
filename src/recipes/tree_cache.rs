//! A cache of one node, its children, or a whole subtree (Curator's
//! `CuratorCache` / `TreeCache` / `NodeCache` / `PathChildrenCache`, kazoo's
//! `TreeCache`), with a typed event stream, data and `Stat` per node, an
//! explicit staleness signal, and a resync after a reconnect that costs
//! requests in proportion to what changed, not to the tree.
//!
//! # How it keeps up
//! - **Live changes** come from one persistent recursive watch on the root
//!   (ZooKeeper 3.6+ `addWatch`): created, changed and deleted, for the root
//!   and every descendant.
//! - **Every read the cache makes also arms a one-shot watch** on the node it
//!   reads (a data watch with each `getData`, a child watch with each
//!   `getChildren`). These are the cache's *stat sentinels*: on a reconnect in
//!   the same session the client sends them to the server with the last zxid
//!   it saw (`setWatches`), and the server compares each node's `mzxid` /
//!   `pzxid` with it and fires an event **only for the nodes that changed**
//!   during the cut. The cache re-reads exactly those: one `setWatches`
//!   request (per 128 KiB of paths) plus one read per change, instead of
//!   re-reading the tree (kazoo#664's flood). On servers without `addWatch`
//!   (3.5 and older) the sentinels alone keep the cache, as one-shot watches
//!   (Curator's `TreeCache`); [`TreeCacheBuilder::one_shot_watches`] asks
//!   for that mode on any server (how the tests exercise it: no server
//!   older than 3.6 is installable here).
//! - **An event during a read is read again after it**: ZooKeeper sends a
//!   change's event before any reply that shows the change, but a read the
//!   server processed just *before* the change can be answered just *after*
//!   its event (reads run beside the commits). Such a reply shows the old
//!   state, and the one-shot watch it set was the one the change consumed. So
//!   an event for a node whose read is in flight marks that read to be made
//!   once more when its reply is in (at most one more, however many events
//!   come meanwhile). Replies are applied only when they are newer (`mzxid`)
//!   or of a new incarnation (`czxid`).
//! - **A reply older than a deletion is ignored**: a deletion event carries
//!   no zxid to compare a reply with, and the reply of a read made before
//!   the deletion would put the deleted node back (nothing else in the cache
//!   is there to compare it with). So a `NodeDeleted` makes every read in
//!   flight of that node or below it *superseded*: its reply, whatever it
//!   says, is ignored, and the read is made once more (which finds the node
//!   gone, or its new incarnation).
//! - **Bounded concurrency**: at most [`TreeCacheBuilder::max_in_flight`]
//!   reads are outstanding; the rest wait in a queue.
//! - **No blocking on the event thread**: the cache's reads are the client's
//!   `*_async` calls, whose replies are handled on the event thread; listeners
//!   run there too, after the cache's lock is released, and must be short.
//!
//! # Staleness
//! While the connection is down the cache is stale ([`TreeCache::is_stale`],
//! [`CacheEvent::Suspended`]); after the reconnect it stays stale until the
//! resync has run (a marker read sent after the client's `setWatches` returns
//! after every event the server fired for it, and every re-read it caused is
//! answered): then [`CacheEvent::Resynced`].
//!
//! A read-only server (read-only mode,
//! [`ZooKeeperWatcherBuilder::with_read_only`](crate::ZooKeeperWatcherBuilder::with_read_only):
//! `ConnectedReadOnly`) counts as no connection: the cache keeps serving
//! what it holds, stays stale and suspended, and sends no read (a server cut
//! off from its quorum may lag it); it resyncs at the first read-write
//! server, as after any reconnect. A cache started while read-only makes its
//! initial load there.
//!
//! # Session
//! A cache belongs to the session it was started in. When that session ends
//! ([`CacheEvent::Lost`]) the cache stays stale for good; with
//! `with_session_renewal`, start a new cache on the renewed session (the new
//! session has none of the old one's watches, so a full load is the only
//! correct resync). A deliberate difference from Curator, which rebuilds in
//! place: every zklock handle is bound to its session.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use log::{debug, warn};
use parking_lot::Mutex;

use crate::client::{
    AddWatchMode, EventType, KeeperState, WatchedEvent, Watcher, WatcherType, ZooKeeper,
};
use crate::deadline::Deadline;
use crate::engine::call::Pinned;
use crate::engine::hook::{hook, Hold, Hook, Kept};
use crate::engine::wait::{Wake, WhenDown};
use crate::error::{Error, Result, ZkError};
use crate::types::Stat;
use crate::watcher::ZooKeeperWatcher;

/// How deep a [`TreeCache`] follows its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheDepth {
    /// The root node only (Curator's `NodeCache`).
    Node,
    /// The root and its children (Curator's `PathChildrenCache`, with the root).
    Children,
    /// The whole subtree (Curator's `CuratorCache` / `TreeCache`).
    Subtree,
}

impl CacheDepth {
    fn max(self) -> usize {
        match self {
            CacheDepth::Node => 0,
            CacheDepth::Children => 1,
            CacheDepth::Subtree => usize::MAX,
        }
    }
}

/// A cached node: its data and `Stat` as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildData {
    /// The node's data.
    pub data: Vec<u8>,
    /// The node's `Stat` from the same read.
    pub stat: Stat,
}

/// What a [`TreeCache`] tells its listeners.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheEvent {
    /// A node entered the cache (also during the initial load).
    Added(String, ChildData),
    /// A cached node's data (or incarnation) changed.
    Updated(String, ChildData),
    /// A node left the cache (with its last known data).
    Removed(String, ChildData),
    /// The initial load is complete: the cache held the whole tree once.
    Initialized,
    /// The connection is down: the cache is stale from now on.
    Suspended,
    /// The connection is back in the same session; the resync runs.
    Reconnected,
    /// The resync after a reconnect is complete: the cache is current again.
    Resynced,
    /// The session ended (expired, closed, auth failed): the cache stays stale.
    Lost,
}

type Listener = Arc<dyn Fn(&CacheEvent) + Send + Sync>;

/// A read the cache makes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Read {
    Data(String),
    Children(String),
    /// `exists` of a missing root, arming a sentinel for its creation.
    RootExists,
    /// Sent after a reconnect: its reply comes after every catch-up event.
    Marker,
}

#[derive(Default)]
struct State {
    nodes: BTreeMap<String, ChildData>,
    in_flight: HashSet<Read>,
    queue: VecDeque<Read>,
    queued: HashSet<Read>,
    /// Reads cut off by a lost connection, made again after the reconnect.
    retry: HashSet<Read>,
    /// Reads in flight when an event for their node came: made once more
    /// when answered (the reply may predate the change).
    again: HashSet<Read>,
    /// Reads in flight when their node (or an ancestor) was deleted: their
    /// reply may predate the deletion and is ignored (they are in `again`
    /// too).
    superseded: HashSet<Read>,
    connected: bool,
    initialized: bool,
    resyncing: bool,
    /// Node reads sent during the resync (feature `metrics`).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    resync_reads: crate::metrics::Tally,
    stale: bool,
    lost: bool,
    closed: bool,
    /// Whether the cache holds a recursive watch (not on a server older
    /// than 3.6, nor with `one_shot_watches`).
    recursive: bool,
    /// The last read the server refused (not `NoNode`, not the end of the
    /// connection or the session; e.g. a node whose ACL gives this session
    /// no `READ`) and its error: the cache lacks that node's data or
    /// children while it stands. Cleared when that read succeeds.
    refused: Option<(Read, Error)>,
}

struct Inner {
    zk: ZooKeeper,
    root: String,
    max_depth: usize,
    max_in_flight: usize,
    state: Mutex<State>,
    listeners: Mutex<Vec<Listener>>,
    /// Bumped when the cache told events (or closed); its session's end
    /// wakes it too ([`TreeCache::wait_synced`]).
    wake: Arc<Wake>,
    requests: AtomicU64,
    live: Arc<dyn Watcher>,
    sentinel: Arc<dyn Watcher>,
    /// The reply [`TreeCache::hold_next_data_reply`] holds (feature `testing`).
    held: Hold<DataReply>,
    hook: Hook<CacheStep>,
}

/// A step of a [`TreeCache`]'s reply handling, told to the hook of
/// [`TreeCache::hold_next_data_reply`] (feature `testing`).
#[cfg_attr(not(feature = "testing"), doc(hidden))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheStep {
    /// The getData reply for the path came and is held, not handled.
    ReplyHeld,
    /// The cache applied a `NodeDeleted` for the path, then handled the held
    /// reply.
    HeldReplyHandled,
    /// [`TreeCacheBuilder::start`] has set its watch on the root (the path
    /// given) and has not yet started the initial load: events may already
    /// come (a hook of [`TreeCacheBuilder::with_step_hook`]).
    WatchSet,
    /// The cache applied a watch event for the path given (a hook of
    /// [`TreeCacheBuilder::with_step_hook`]; told on the event thread).
    EventApplied,
}

/// A getData reply.
type DataReply = Result<(Vec<u8>, Stat)>;

/// Starts a [`TreeCache`] with options.
#[derive(Clone)]
pub struct TreeCacheBuilder {
    root: String,
    depth: CacheDepth,
    max_in_flight: usize,
    one_shot: bool,
    hook: Hook<CacheStep>,
}

impl std::fmt::Debug for TreeCacheBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeCacheBuilder")
            .field("root", &self.root)
            .field("depth", &self.depth)
            .field("max_in_flight", &self.max_in_flight)
            .field("one_shot", &self.one_shot)
            .finish()
    }
}

impl TreeCacheBuilder {
    /// How deep the cache follows its root (default: [`CacheDepth::Subtree`]).
    #[must_use]
    pub fn depth(mut self, depth: CacheDepth) -> Self {
        self.depth = depth;
        self
    }

    /// The most reads the cache has outstanding at once (default 64; at
    /// least 1).
    #[must_use]
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.max(1);
        self
    }

    /// Keeps the cache with one-shot watches only (the sentinels), without
    /// the recursive watch: what the cache does by itself on a server older
    /// than 3.6, which answers `addWatch` with `Unimplemented` (Curator's
    /// `TreeCache`). Default `false`. Every change then costs the re-read
    /// that re-arms the watch, as with the recursive watch, plus a listing of
    /// the parent for a creation or deletion.
    #[must_use]
    pub fn one_shot_watches(mut self, one_shot: bool) -> Self {
        self.one_shot = one_shot;
        self
    }

    /// Test hook (feature `testing`): `hook` is told the cache's steps
    /// [`CacheStep::WatchSet`] (on the thread calling
    /// [`start`](Self::start), which it may hold) and
    /// [`CacheStep::EventApplied`] (on the client's event thread; it must not
    /// block), from the start on.
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_step_hook(self, hook: impl Fn(CacheStep, &str) + Send + Sync + 'static) -> Self {
        self.hook.set(hook);
        self
    }

    /// Starts the cache on `zkw`'s current session: sets the recursive watch
    /// (blocking, on the calling thread; with one-shot watches only, an
    /// `exists` watch on the root instead, so that the cache hears of the
    /// connection from the start) and starts the initial load, which runs
    /// asynchronously ([`CacheEvent::Initialized`],
    /// [`TreeCache::wait_synced`]).
    ///
    /// # Errors
    /// `BadArguments` for an invalid root; the session's errors
    /// (`SessionExpired`, `Closed`, `ConnectionLoss`) from setting the watch.
    pub fn start(self, zkw: &ZooKeeperWatcher) -> Result<TreeCache> {
        crate::path::validate(&self.root)?;
        let zk = zkw.zookeeper().clone();
        let inner = Arc::new_cyclic(|me: &Weak<Inner>| {
            let live = me.clone();
            let sentinel = me.clone();
            Inner {
                zk: zk.clone(),
                root: self.root.clone(),
                max_depth: self.depth.max(),
                max_in_flight: self.max_in_flight,
                state: Mutex::new(State::default()),
                listeners: Mutex::new(Vec::new()),
                wake: Arc::default(),
                requests: AtomicU64::new(0),
                live: Arc::new(move |e: WatchedEvent| {
                    if let Some(inner) = live.upgrade() {
                        inner.on_event(e);
                    }
                }),
                sentinel: Arc::new(move |e: WatchedEvent| {
                    if let Some(inner) = sentinel.upgrade() {
                        inner.on_event(e);
                    }
                }),
                held: Hold::default(),
                hook: self.hook.clone(),
            }
        });
        let added = if self.one_shot {
            Err(Error::zk(ZkError::Unimplemented, self.root.clone()))
        } else {
            zk.add_watch_w(
                &self.root,
                AddWatchMode::PersistentRecursive,
                inner.live.clone(),
            )
        };
        match added {
            Ok(()) => inner.state.lock().recursive = true,
            Err(e) if e.is(ZkError::Unimplemented) => {
                debug!(
                    "{}: no persistent watches on this server; one-shot watches only",
                    self.root
                );
                // A sentinel on the root before anything else: the client
                // tells its watchers of the connection, and a cache started
                // while the connection is down must hear of the reconnect to
                // make its first reads (the recursive watch does that in the
                // other mode). Its event is one the cache reads anyway.
                zk.exists_watch(&self.root, inner.sentinel.clone())?;
            }
            Err(e) => return Err(e),
        }
        hook!(inner.hook, CacheStep::WatchSet, &inner.root);
        let mut issue = Vec::new();
        {
            let mut s = inner.state.lock();
            // A read-only server is no connection here (see `# Staleness`).
            s.connected = zk.state() == crate::client::State::Connected && !zk.is_read_only();
            s.stale = true;
            // Events can come as soon as the watch is set, before this: a
            // change the cache's member applied after the addWatch (a
            // follower lagging the writer's member). Their reads waited in
            // `retry`, `connected` not yet known, and the initial load could
            // never end while they did (found on an ensemble under load).
            if s.connected {
                for read in std::mem::take(&mut s.retry) {
                    inner.touch(&mut s, read, &mut issue);
                }
            }
            inner.touch_node(&mut s, &inner.root, &mut issue);
        }
        inner.issue(issue);
        Ok(TreeCache { inner })
    }
}

/// A cache of a node, its children or a subtree (see the module docs).
/// Dropping it removes its recursive watch in the background.
pub struct TreeCache {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TreeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeCache")
            .field("root", &self.inner.root)
            .field("stale", &self.is_stale())
            .finish()
    }
}

impl TreeCache {
    /// A builder for a cache of `root`.
    pub fn builder(root: &str) -> TreeCacheBuilder {
        TreeCacheBuilder {
            root: root.to_string(),
            depth: CacheDepth::Subtree,
            max_in_flight: 64,
            one_shot: false,
            hook: Hook::default(),
        }
    }

    /// Starts a cache of the whole subtree at `root` (see
    /// [`TreeCacheBuilder::start`]).
    ///
    /// # Errors
    /// As [`TreeCacheBuilder::start`].
    pub fn start(zkw: &ZooKeeperWatcher, root: &str) -> Result<TreeCache> {
        TreeCache::builder(root).start(zkw)
    }

    /// The root.
    pub fn root(&self) -> &str {
        &self.inner.root
    }

    /// Adds a listener; it gets every later event, on the client's event
    /// thread (or on the thread that started the cache for the first reads),
    /// and must not block.
    pub fn listen(&self, listener: impl Fn(&CacheEvent) + Send + Sync + 'static) {
        self.inner.listeners.lock().push(Arc::new(listener));
    }

    /// Every later event through a channel (a listener that sends; never
    /// blocks the event thread).
    pub fn events(&self) -> std::sync::mpsc::Receiver<CacheEvent> {
        let (tx, rx) = std::sync::mpsc::channel();
        let tx = Mutex::new(tx);
        self.listen(move |e| {
            let _ = tx.lock().send(e.clone());
        });
        rx
    }

    /// The cached node at `path`.
    pub fn get(&self, path: &str) -> Option<ChildData> {
        self.inner.state.lock().nodes.get(path).cloned()
    }

    /// The names of the cached children of `path`, sorted.
    pub fn children(&self, path: &str) -> Vec<String> {
        let s = self.inner.state.lock();
        direct_children(&s.nodes, path)
            .into_iter()
            .map(|p| p.rsplit('/').next().unwrap_or_default().to_string())
            .collect()
    }

    /// Every cached node, by path.
    pub fn snapshot(&self) -> BTreeMap<String, ChildData> {
        self.inner.state.lock().nodes.clone()
    }

    /// Whether the cache may lag the server: before the initial load is
    /// complete, while disconnected, until the resync after a reconnect is
    /// complete, and for good after its session ended or after `close`.
    pub fn is_stale(&self) -> bool {
        self.inner.state.lock().stale
    }

    /// Whether the cache keeps up with one-shot watches only: on a server
    /// older than 3.6 (no `addWatch`), or asked with
    /// [`TreeCacheBuilder::one_shot_watches`].
    pub fn is_one_shot(&self) -> bool {
        !self.inner.state.lock().recursive
    }

    /// Whether the initial load is complete.
    pub fn is_initialized(&self) -> bool {
        self.inner.state.lock().initialized
    }

    /// The number of reads the cache has sent (its own requests; the
    /// client's `setWatches` on a reconnect is not among them).
    pub fn requests(&self) -> u64 {
        self.inner.requests.load(Ordering::Relaxed)
    }

    /// Waits until the cache is not stale: `Ok(true)` when current,
    /// `Ok(false)` after `timeout`. A wait of the wait engine bound to the
    /// cache's session (the cache is lost with it): its end wakes the wait
    /// directly, from the client thread that ends it, even while a listener
    /// holds up the event thread; nothing is looked at periodically.
    ///
    /// # Errors
    /// `SessionExpired` once its session ended; `Closed` after `close`; the
    /// error of a read the server refused once the cache is otherwise
    /// loaded (e.g. [`Error::NoReadPermission`] for a node whose ACL gives
    /// this session no `READ`): the cache then lacks that node, it is not
    /// told as current. Curator's `TreeCache` hands such errors to its
    /// unhandled-error listeners and initializes anyway.
    #[must_use = "`Ok(false)` means the cache did not load in time"]
    pub fn wait_synced(&self, timeout: Duration) -> Result<bool> {
        let deadline = Deadline::after(timeout);
        let inner: &Inner = &self.inner;
        loop {
            let seen = self.inner.wake.generation();
            {
                let s = self.inner.state.lock();
                if s.closed {
                    return Err(Error::Closed);
                }
                if s.lost {
                    return Err(Error::zk(ZkError::SessionExpired, self.inner.root.clone()));
                }
                if !s.stale {
                    if let Some((_, e)) = &s.refused {
                        return Err(e.clone());
                    }
                    return Ok(true);
                }
            }
            if !crate::engine::wait::wait(
                &inner.wake,
                seen,
                &Pinned::new(&inner.zk, || inner.ended()),
                deadline,
                WhenDown::Wait,
                &inner.root,
            )? {
                let s = self.inner.state.lock();
                return match &s.refused {
                    Some((_, e)) if !s.stale => Err(e.clone()),
                    _ => Ok(!s.stale),
                };
            }
        }
    }

    /// Test hook (feature `testing`): the next getData reply for `path` the
    /// cache receives is held, not handled, until the cache has applied a
    /// `NodeDeleted` event for `path`; then it is handled. This is a reply
    /// the server made before a deletion arriving after the deletion's event
    /// (reads run beside commits on the server), forced. `hook` is told
    /// [`CacheStep::ReplyHeld`] when the reply is held and
    /// [`CacheStep::HeldReplyHandled`] once it was handled, on the client's
    /// event thread; it must not block. It replaces the builder's hook
    /// ([`TreeCacheBuilder::with_step_hook`]) and is told the cache's other
    /// steps too.
    #[cfg(feature = "testing")]
    pub fn hold_next_data_reply(
        &self,
        path: &str,
        hook: impl Fn(CacheStep, &str) + Send + Sync + 'static,
    ) {
        self.inner.hook.set(hook);
        self.inner.held.arm(path);
    }

    /// Stops the cache: removes the recursive watch (waiting for the server)
    /// and ignores every later event. The one-shot sentinels left on the
    /// nodes go when they fire or with the session. Note that ZooKeeper
    /// removes watches by path and type: another recursive watch this client
    /// holds on the same root goes too.
    ///
    /// # Errors
    /// The session's errors from `removeWatches`.
    pub fn close(self) -> Result<()> {
        self.inner.close_now()
    }
}

/// The cache's session as the wait engine sees it ([`TreeCache::wait_synced`]).
impl Inner {
    /// An error once `wait_synced` can wait no more: the cache closed or
    /// lost, or its session ended.
    fn ended(&self) -> Result<()> {
        let s = self.state.lock();
        if s.closed {
            return Err(Error::Closed);
        }
        if s.lost || self.zk.state().is_terminal() {
            return Err(Error::zk(ZkError::SessionExpired, self.root.clone()));
        }
        Ok(())
    }
}

impl Drop for TreeCache {
    fn drop(&mut self) {
        let inner = self.inner.clone();
        let first = {
            let mut s = inner.state.lock();
            !std::mem::replace(&mut s.closed, true)
        };
        if first {
            crate::util::run_in_background("zklock-cache-close", move || {
                if let Err(e) = inner.remove_watch() {
                    debug!("closing the cache of {}: {e}", inner.root);
                }
            });
        }
    }
}

impl Inner {
    fn close_now(&self) -> Result<()> {
        {
            let mut s = self.state.lock();
            if std::mem::replace(&mut s.closed, true) {
                return Ok(());
            }
            s.stale = true;
        }
        self.wake.wake();
        self.remove_watch()
    }

    fn remove_watch(&self) -> Result<()> {
        if !self.state.lock().recursive {
            return Ok(());
        }
        match self
            .zk
            .remove_watches(&self.root, WatcherType::PersistentRecursive)
        {
            Err(e) if e.is(ZkError::NoWatcher) => Ok(()),
            Err(e) if self.zk.state().is_terminal() => {
                debug!(
                    "{}: {e}; the session is over, its watches with it",
                    self.root
                );
                Ok(())
            }
            other => other,
        }
    }

    /// The depth of `path` below the root, `None` when outside it.
    fn depth(&self, path: &str) -> Option<usize> {
        if path == self.root {
            return Some(0);
        }
        let rest = if self.root == "/" {
            path.strip_prefix('/')?
        } else {
            path.strip_prefix(self.root.as_str())?.strip_prefix('/')?
        };
        Some(rest.split('/').count())
    }

    fn wanted(&self, path: &str) -> bool {
        self.depth(path).is_some_and(|d| d <= self.max_depth)
    }

    fn lists_children(&self, path: &str) -> bool {
        self.depth(path).is_some_and(|d| d < self.max_depth)
    }

    /// Asks for `read` unless it is queued already; a read in flight is
    /// made once more after its reply (see the module docs: its reply may
    /// predate the event).
    fn touch(&self, s: &mut State, read: Read, issue: &mut Vec<Read>) {
        if s.closed || s.lost || s.queued.contains(&read) {
            return;
        }
        if s.in_flight.contains(&read) {
            if read != Read::Marker {
                s.again.insert(read);
            }
            return;
        }
        if !s.connected {
            s.retry.insert(read);
            return;
        }
        // Behind queued reads, never past them (see `touch_node`'s order).
        if s.in_flight.len() < self.max_in_flight && s.queue.is_empty() {
            s.in_flight.insert(read.clone());
            issue.push(read);
        } else {
            s.queued.insert(read.clone());
            s.queue.push_back(read);
        }
    }

    /// Reads `path`'s children (when the cache lists them) and then its
    /// data, in that order on the connection: the listing arms the child
    /// watch before the data read takes the `Stat`, so a child that comes or
    /// goes between the two either shows in that `Stat` or fires the watch.
    /// (Data first, such a change would leave the `Stat` stale with no
    /// event to come: found by the one-shot writers test under load.)
    fn touch_node(&self, s: &mut State, path: &str, issue: &mut Vec<Read>) {
        if self.lists_children(path) {
            self.touch(s, Read::Children(path.to_string()), issue);
        }
        self.touch(s, Read::Data(path.to_string()), issue);
    }

    /// Sends `reads` (outside the lock: a call may answer at once), in one
    /// write ([`ZooKeeper::in_one_write`]): a node's listing and data, or a
    /// resync's reads, cost one round trip.
    fn issue(self: &Arc<Self>, reads: Vec<Read>) {
        self.zk.in_one_write(|| self.issue_each(reads));
    }

    /// [`issue`](Self::issue)'s requests, one by one.
    fn issue_each(self: &Arc<Self>, reads: Vec<Read>) {
        for read in reads {
            self.requests.fetch_add(1, Ordering::Relaxed);
            let me = Arc::downgrade(self);
            match read {
                Read::Data(path) => {
                    let p = path.clone();
                    self.zk
                        .get_data_async(&path, Some(self.sentinel.clone()), move |r| {
                            if let Some(inner) = me.upgrade() {
                                inner.on_data(p, r);
                            }
                        })
                }
                Read::Children(path) => {
                    let p = path.clone();
                    self.zk
                        .get_children_async(&path, Some(self.sentinel.clone()), move |r| {
                            if let Some(inner) = me.upgrade() {
                                inner.on_children(p, r);
                            }
                        })
                }
                Read::RootExists => {
                    self.zk
                        .exists_async(&self.root, Some(self.sentinel.clone()), move |r| {
                            if let Some(inner) = me.upgrade() {
                                inner.on_root_exists(r);
                            }
                        })
                }
                Read::Marker => self.zk.exists_async(&self.root, None, move |r| {
                    if let Some(inner) = me.upgrade() {
                        inner.on_marker(r);
                    }
                }),
            }
        }
    }

    /// Ends `read`: on a lost connection it is made again after the
    /// reconnect; `false` when the reply is to be ignored.
    fn finish<T>(&self, s: &mut State, read: &Read, r: &Result<T>) -> bool {
        s.in_flight.remove(read);
        let again = s.again.remove(read);
        let superseded = s.superseded.remove(read);
        if s.closed || s.lost {
            return false;
        }
        if again && !r.as_ref().is_err_and(|e| e.is_retryable()) && !s.queued.contains(read) {
            // Sent by `settle` once this reply is applied.
            s.queued.insert(read.clone());
            s.queue.push_back(read.clone());
        }
        match r {
            Err(e) if e.is_retryable() => {
                s.retry.insert(read.clone());
                false
            }
            // May predate a deletion applied since: made again (`again`).
            _ if superseded => false,
            Err(e) if e.is(ZkError::NoNode) => {
                if s.refused.as_ref().is_some_and(|(r, _)| r == read) {
                    s.refused = None;
                }
                true
            }
            Err(e) if e.is_fatal() || matches!(e, Error::Closed) => false,
            Err(e) => {
                warn!("cache of {}: {e}", self.root);
                s.refused = Some((read.clone(), e.clone()));
                false
            }
            Ok(_) => {
                if s.refused.as_ref().is_some_and(|(r, _)| r == read) {
                    s.refused = None;
                }
                true
            }
        }
    }

    /// Sends queued reads into free slots; tells `Initialized` / `Resynced`
    /// when nothing is outstanding.
    ///
    /// Sends nothing while the client is not connected, even before the
    /// cache has applied `Disconnected`: on a lost connection the client
    /// answers the reads in flight with `ConnectionLoss` first and tells
    /// `Disconnected` after (Java's order), and a queued read sent from such
    /// an answer would only fail at once too (a burst of as many requests as
    /// the queue holds). The queue is sent after the reconnect.
    fn settle(&self, s: &mut State, issue: &mut Vec<Read>, events: &mut Vec<CacheEvent>) {
        let up = s.connected
            && self.zk.state() == crate::client::State::Connected
            && !self.zk.is_read_only();
        while s.in_flight.len() < self.max_in_flight && up {
            let Some(read) = s.queue.pop_front() else {
                break;
            };
            s.queued.remove(&read);
            s.in_flight.insert(read.clone());
            crate::metrics::metric!(tally(
                s.resyncing && matches!(read, Read::Data(_) | Read::Children(_)),
                &mut s.resync_reads
            ));
            issue.push(read);
        }
        if s.connected
            && s.in_flight.is_empty()
            && s.queue.is_empty()
            && s.retry.is_empty()
            && !s.closed
            && !s.lost
        {
            if !s.initialized {
                s.initialized = true;
                s.stale = false;
                events.push(CacheEvent::Initialized);
            } else if s.resyncing {
                s.resyncing = false;
                s.stale = false;
                events.push(CacheEvent::Resynced);
                crate::metrics::metric!(cache_resync(
                    "tree_cache",
                    &self.root,
                    s.resync_reads.take()
                ));
            }
        }
    }

    /// Runs the end of every entry point: settles, sends, tells.
    fn after(
        self: &Arc<Self>,
        mut s: parking_lot::MutexGuard<'_, State>,
        mut issue: Vec<Read>,
        mut events: Vec<CacheEvent>,
    ) {
        self.settle(&mut s, &mut issue, &mut events);
        drop(s);
        self.issue(issue);
        if !events.is_empty() {
            let listeners = self.listeners.lock().clone();
            for e in &events {
                for l in &listeners {
                    l(e);
                }
            }
            self.wake.wake();
        }
    }

    /// Reads the root's `Stat` again when one of its children came or went.
    /// ZooKeeper before 3.9 keeps one watch mode per connection and path
    /// (ZOOKEEPER-4466): the cache's recursive watch on the root swallows
    /// the root's one-shot child watch, so the root's `NodeChildrenChanged`
    /// never comes; its children come and go through the recursive watch's
    /// events, and this keeps its `Stat` (cversion, pzxid) current.
    fn touch_root_stat(&self, s: &mut State, child: &str, issue: &mut Vec<Read>) {
        if crate::zkutil::get_parent(child) == Some(self.root.as_str()) {
            self.touch(s, Read::Data(self.root.clone()), issue);
        }
    }

    /// A deletion of `path` was applied: every read in flight of `path` or
    /// below it may have been answered by the server before the deletion, so
    /// its reply is ignored and the read made once more (see the module
    /// docs).
    fn supersede(&self, s: &mut State, path: &str) {
        let prefix = subtree_prefix(path);
        let reads: Vec<Read> = s
            .in_flight
            .iter()
            .filter(|r| {
                matches!(r, Read::Data(p) | Read::Children(p) if p == path || p.starts_with(&prefix))
            })
            .cloned()
            .collect();
        for read in reads {
            s.superseded.insert(read.clone());
            s.again.insert(read);
        }
    }

    fn remove_subtree(&self, s: &mut State, path: &str, events: &mut Vec<CacheEvent>) {
        let prefix = subtree_prefix(path);
        let gone: Vec<String> = std::iter::once(path.to_string())
            .filter(|p| s.nodes.contains_key(p))
            .chain(
                s.nodes
                    .range(prefix.clone()..)
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .map(|(k, _)| k.clone()),
            )
            .collect();
        // Deepest first, as the server deletes.
        for p in gone.into_iter().rev() {
            if let Some(d) = s.nodes.remove(&p) {
                events.push(CacheEvent::Removed(p, d));
            }
        }
    }

    /// Holds `r` when [`TreeCache::hold_next_data_reply`] asked for it
    /// (`None`: held).
    fn hold(&self, path: &str, r: DataReply) -> Option<DataReply> {
        let r = self.held.hold(path, r);
        if r.is_none() {
            hook!(self.hook, CacheStep::ReplyHeld, path);
        }
        r
    }

    /// Handles the held reply for `deleted`, now that its deletion was
    /// applied.
    fn release_held(self: &Arc<Self>, deleted: &str) {
        if let Some((path, r)) = self.held.release(deleted) {
            self.on_data(path.clone(), r);
            hook!(self.hook, CacheStep::HeldReplyHandled, &path);
        }
    }

    fn on_data(self: &Arc<Self>, path: String, r: Result<(Vec<u8>, Stat)>) {
        let Some(r) = self.hold(&path, r) else {
            return;
        };
        debug!(
            "cache of {} ({:#x}): data of {path}: {:?}",
            self.root,
            self.zk.session_id(),
            r.as_ref().map(|(_, s)| s)
        );
        let mut s = self.state.lock();
        let (mut issue, mut events) = (Vec::new(), Vec::new());
        if self.finish(&mut s, &Read::Data(path.clone()), &r) {
            match r {
                Ok((data, stat)) => {
                    let new = ChildData { data, stat };
                    match s.nodes.get(&path) {
                        None => {
                            s.nodes.insert(path.clone(), new.clone());
                            events.push(CacheEvent::Added(path, new));
                        }
                        Some(old) if newer(&old.stat, &stat) => {
                            s.nodes.insert(path.clone(), new.clone());
                            events.push(CacheEvent::Updated(path, new));
                        }
                        Some(_) => {}
                    }
                }
                Err(_) => {
                    self.remove_subtree(&mut s, &path, &mut events);
                    if path == self.root {
                        self.touch(&mut s, Read::RootExists, &mut issue);
                    }
                }
            }
        }
        self.after(s, issue, events);
    }

    fn on_children(self: &Arc<Self>, path: String, r: Result<Vec<String>>) {
        debug!(
            "cache of {} ({:#x}): children of {path}: {:?}",
            self.root,
            self.zk.session_id(),
            r.as_ref().map(|c| c.len())
        );
        let mut s = self.state.lock();
        let (mut issue, mut events) = (Vec::new(), Vec::new());
        if self.finish(&mut s, &Read::Children(path.clone()), &r) {
            match r {
                Ok(names) => {
                    let listed: HashSet<String> = names
                        .iter()
                        .map(|c| crate::zkutil::join_znode(&path, c))
                        .collect();
                    for cached in direct_children(&s.nodes, &path) {
                        if !listed.contains(&cached) {
                            self.remove_subtree(&mut s, &cached, &mut events);
                        }
                    }
                    for child in listed {
                        if self.wanted(&child) && !s.nodes.contains_key(&child) {
                            self.touch_node(&mut s, &child, &mut issue);
                        }
                    }
                }
                Err(_) => self.remove_subtree(&mut s, &path, &mut events),
            }
        }
        self.after(s, issue, events);
    }

    fn on_root_exists(self: &Arc<Self>, r: Result<Option<Stat>>) {
        let mut s = self.state.lock();
        let mut issue = Vec::new();
        if self.finish(&mut s, &Read::RootExists, &r) && matches!(r, Ok(Some(_))) {
            self.touch_node(&mut s, &self.root, &mut issue);
        }
        self.after(s, issue, Vec::new());
    }

    fn on_marker(self: &Arc<Self>, r: Result<Option<Stat>>) {
        let mut s = self.state.lock();
        self.finish(&mut s, &Read::Marker, &r);
        self.after(s, Vec::new(), Vec::new());
    }

    fn on_event(self: &Arc<Self>, e: WatchedEvent) {
        debug!(
            "cache of {} ({:#x}): {e:?}",
            self.root,
            self.zk.session_id()
        );
        // For the test hooks only (feature `testing`).
        let deleted = Kept::new(|| match (e.event_type, &e.path) {
            (EventType::NodeDeleted, Some(p)) => Some(p.clone()),
            _ => None,
        });
        let applied = Kept::new(|| e.path.clone());
        let mut s = self.state.lock();
        let (mut issue, mut events) = (Vec::new(), Vec::new());
        if s.closed || s.lost {
            return;
        }
        match (e.event_type, e.path) {
            (EventType::None, _) => match e.keeper_state {
                KeeperState::Disconnected if s.connected => {
                    s.connected = false;
                    s.stale = true;
                    events.push(CacheEvent::Suspended);
                    // The reads in flight were answered with ConnectionLoss
                    // just before (the client's order, Java's): in `retry`.
                }
                KeeperState::SyncConnected if !s.connected => {
                    s.connected = true;
                    if s.initialized {
                        s.resyncing = true;
                        events.push(CacheEvent::Reconnected);
                    }
                    // After the client's setWatches: its reply comes after
                    // every catch-up event.
                    self.touch(&mut s, Read::Marker, &mut issue);
                    // The root's sentinels do not work on 3.8 (see
                    // `touch_root_stat`): its data and children are read again.
                    if s.initialized {
                        self.touch_node(&mut s, &self.root, &mut issue);
                    }
                    for read in std::mem::take(&mut s.retry) {
                        self.touch(&mut s, read, &mut issue);
                    }
                }
                KeeperState::Expired | KeeperState::Closed | KeeperState::AuthFailed => {
                    s.lost = true;
                    s.stale = true;
                    s.connected = false;
                    events.push(CacheEvent::Lost);
                }
                _ => {}
            },
            (_, None) => {}
            (EventType::NodeCreated, Some(p)) if self.wanted(&p) => {
                self.touch_root_stat(&mut s, &p, &mut issue);
                self.touch_node(&mut s, &p, &mut issue);
            }
            (EventType::NodeDataChanged, Some(p)) if self.wanted(&p) => {
                self.touch(&mut s, Read::Data(p), &mut issue);
            }
            (EventType::NodeDeleted, Some(p)) if self.wanted(&p) => {
                self.touch_root_stat(&mut s, &p, &mut issue);
                self.supersede(&mut s, &p);
                self.remove_subtree(&mut s, &p, &mut events);
                if p == self.root {
                    self.touch(&mut s, Read::RootExists, &mut issue);
                }
            }
            (EventType::NodeChildrenChanged, Some(p)) if self.lists_children(&p) => {
                // The parent's Stat (cversion, pzxid, numChildren) moved too.
                self.touch_node(&mut s, &p, &mut issue);
            }
            _ => {}
        }
        self.after(s, issue, events);
        if let Some(p) = deleted.get().flatten() {
            self.release_held(&p);
        }
        if let Some(p) = applied.get().flatten() {
            hook!(self.hook, CacheStep::EventApplied, &p);
        }
    }
}

/// The prefix of `path`'s descendants' paths.
fn subtree_prefix(path: &str) -> String {
    if path == "/" {
        "/".to_string()
    } else {
        format!("{path}/")
    }
}

/// Whether `new` (a read's `Stat`) is of a later state of the node than
/// `old`: another incarnation, or the same one changed (data or children).
fn newer(old: &Stat, new: &Stat) -> bool {
    old.czxid != new.czxid || (new.mzxid >= old.mzxid && new.pzxid >= old.pzxid && new != old)
}

/// The cached direct children of `path`, as full paths.
fn direct_children(nodes: &BTreeMap<String, ChildData>, path: &str) -> Vec<String> {
    let prefix = subtree_prefix(path);
    nodes
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .filter(|(k, _)| k.len() > prefix.len() && !k[prefix.len()..].contains('/'))
        .map(|(k, _)| k.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_children_skips_grandchildren() {
        let mut m = BTreeMap::new();
        for p in ["/a", "/a/b", "/a/b/c", "/a/d", "/ab"] {
            m.insert(
                p.to_string(),
                ChildData {
                    data: vec![],
                    stat: Stat::default(),
                },
            );
        }
        assert_eq!(direct_children(&m, "/a"), vec!["/a/b", "/a/d"]);
        assert_eq!(direct_children(&m, "/"), vec!["/a", "/ab"]);
    }
}
