//! HBase's `ZKLeaderManager`: one ephemeral leader znode holding the leading
//! candidate's id, which every candidate watches. (The herd-free election is
//! [`LeaderElectionSupport`](super::election::LeaderElectionSupport).)

use std::sync::{Arc, Weak};

use log::{debug, info, warn};
use parking_lot::Mutex;

use super::candidate::LeadershipEvent;
use super::rounds::Listeners;
use crate::client::{CreateMode, EventType, KeeperState, ZooKeeper};
use crate::deadline::Deadline;
use crate::engine::call::Pinned;
use crate::engine::held::{self, Done, Held, HeldWatch, Sorted};
use crate::engine::owned::{
    create_owned, remove_found, Guard, NodeSpec, OwnerMark, Parents, Removal, Unsettled,
};
use crate::engine::wait::{Wake, WhenDown};
use crate::error::{Error, Result, ZkError, ZkResultExt};
use crate::types::Stat;
use crate::watcher::{SessionHook, WeakZooKeeperWatcher, ZooKeeperWatcher};

/// HBase's `ZKLeaderManager`: the first candidate to create the ephemeral
/// `leader_znode` (holding its id) leads; the others watch it and race to
/// create it again when it is deleted.
///
/// The layout is HBase's: one znode, its data the leader's id, written through
/// the watcher's [`RecoverableZooKeeper`](crate::RecoverableZooKeeper) (so with
/// HBase's metadata prefix unless the watcher turned it off; a raw reader
/// strips it with [`remove_metadata`](crate::remove_metadata)). An HBase
/// process and a zklock process with the same `leader_znode` share the
/// leadership, and an HBase tool reading the znode's data finds the leader's id.
///
/// Watches are the session's default watch, so the watcher's listeners for
/// `leader_znode` hear its events too (HBase registers the manager as one of
/// them). The manager itself hears them through a library subscription of the
/// watcher and never blocks the event thread: an event wakes the waiting
/// thread, which makes the calls (HBase re-checks on the event thread).
///
/// This is a herd: every change wakes every candidate, which all race to
/// create the znode. For many candidates use the herd-free
/// [`LeaderElectionSupport`](super::election::LeaderElectionSupport).
///
/// # Sessions
/// A claim belongs to the session that created the znode. When that session
/// ends (expiry, also with
/// [`with_session_renewal`](crate::ZooKeeperWatcherBuilder::with_session_renewal),
/// or `close`), the manager no longer leads
/// ([`has_leadership`](Self::has_leadership) is false; the server removed the
/// znode) and a [`wait_to_become_leader`](Self::wait_to_become_leader) begun
/// in it ends with `SessionExpired` (or `Closed`). After a renewal, a new
/// `wait_to_become_leader` competes in the new session.
///
/// # zklock differs here
/// - **In doubt.** When the connection drops while it leads, the manager stops
///   leading at once ([`is_in_doubt`](Self::is_in_doubt),
///   [`has_leadership`](Self::has_leadership) false) and, after the
///   reconnect, checks that the znode is still this claim's before it leads
///   again (a znode gone or another's ends the claim).
/// - **No answer is forgotten.** The re-check after a change of the znode
///   (HBase's `handleLeaderChange`) is asked again after the reconnect when
///   its answer is lost, so a claim whose znode is gone never stays, and a
///   waiting candidate always keeps a watch.
/// - **Guarded deletes.** [`step_down_as_leader`](Self::step_down_as_leader)
///   and `Drop` delete the znode only when it is this session's znode of this
///   claim (its owner and creation zxid, read first), at the version read.
/// - **Its own znode, by a mark.** The create goes through zklock's one way to
///   own a node: the znode carries one extra ACL entry (`digest`, no
///   permissions, a uuid of this manager; only `getAcl` shows it), by which a
///   create whose reply was lost finds this manager's znode again. HBase (and
///   `RecoverableZooKeeper`'s plain create) take "my data, my session" for
///   their own, which is another manager's znode when two managers of one
///   session share an id: both would lead.
///
/// # Examples
/// ```no_run
/// use zklock::recipes::leader_manager::ZkLeaderManager;
/// use zklock::ZooKeeperWatcher;
///
/// let zkw = ZooKeeperWatcher::connect("127.0.0.1:2181", "server1", None)?;
/// let manager = ZkLeaderManager::new(&zkw, "/hbase/leader", "server1");
/// manager.start()?;
/// if manager.wait_to_become_leader()? {
///     // ... lead ...
///     manager.step_down_as_leader()?;
/// }
/// # Ok::<(), zklock::Error>(())
/// ```
///
/// # Read-only mode
/// With [read-only mode](crate::ZooKeeperWatcherBuilder::with_read_only) on,
/// a read-only server (`ConnectedReadOnly`) proves nothing: it cannot write,
/// its data may lag the quorum's, and it cannot tell whether the session
/// lives. A leadership had stays **in doubt** (`InDoubt`, told at the
/// disconnect; restored only after a read-write server confirmed the node)
/// and is lost only when the session ends or the node goes; its claim (a
/// node it must create) is never made on a read-only server.
pub struct ZkLeaderManager {
    zkw: ZooKeeperWatcher,
    shared: Arc<LeaderShared>,
    hook: Option<u64>,
}

struct LeaderShared {
    me: Weak<LeaderShared>,
    zkw: WeakZooKeeperWatcher,
    znode: String,
    node_id: Vec<u8>,
    /// The mark of this manager's leader znode (one way to own a node).
    mark: OwnerMark,
    /// Held while a wait creates or adopts the leader znode and records the
    /// claim, and while a settle of a create that gave up decides on the
    /// znode: so a settle never removes a znode a later wait claimed.
    making: Mutex<()>,
    state: Mutex<LeaderState>,
    /// Woken by the watch on the leader znode (through the subscription), a
    /// stop, and the session's end.
    wake: Arc<Wake>,
    /// Told the claim's [`LeadershipEvent`]s.
    listeners: Listeners<dyn Fn(LeadershipEvent) + Send + Sync>,
}

#[derive(Debug, Default)]
struct LeaderState {
    /// HBase's `leaderExists`.
    leader_exists: bool,
    /// HBase's `candidate.isStopped()`.
    stopped: bool,
    /// The leader znode this manager created, if it still leads (or is being
    /// confirmed: see `confirmed`).
    claim: Option<Claim>,
    /// The claim was confirmed (its watch set and the znode still this
    /// claim's) and no stop came first: only then does this manager lead
    /// ([`ZkLeaderManager::has_leadership`]), so a wait that returns
    /// `Ok(false)` never led, and one that returns `Ok(true)` was seen
    /// leading by no one before it returned.
    confirmed: bool,
    /// The connection dropped while it held a claim; not confirmed since.
    in_doubt: bool,
}

/// The leader znode as created: its session and creation zxid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Claim {
    session: i64,
    czxid: i64,
}

impl std::fmt::Debug for ZkLeaderManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.shared.state.lock();
        f.debug_struct("ZkLeaderManager")
            .field("znode", &self.shared.znode)
            .field("node_id", &String::from_utf8_lossy(&self.shared.node_id))
            .field("leader_exists", &st.leader_exists)
            .field("leading", &(st.claim.is_some() && st.confirmed))
            .field("in_doubt", &st.in_doubt)
            .field("stopped", &st.stopped)
            .finish()
    }
}

impl ZkLeaderManager {
    /// HBase's `new ZKLeaderManager(watcher, leaderZNode, identifier,
    /// candidate)`: `identifier` is the data of the leader znode while this
    /// candidate leads. HBase's `Stoppable candidate` is the manager's own
    /// [`stop`](Self::stop) / [`is_stopped`](Self::is_stopped).
    pub fn new(zkw: &ZooKeeperWatcher, leader_znode: &str, identifier: impl AsRef<[u8]>) -> Self {
        let weak = zkw.downgrade();
        let shared = Arc::new_cyclic(|me| LeaderShared {
            me: me.clone(),
            zkw: weak.clone(),
            znode: leader_znode.to_string(),
            node_id: identifier.as_ref().to_vec(),
            mark: OwnerMark::new(),
            making: Mutex::new(()),
            state: Mutex::new(LeaderState::default()),
            wake: Arc::new(Wake::default()),
            listeners: Listeners::default(),
        });
        let hook = weak.add_path_hook(
            Arc::downgrade(&shared) as Weak<dyn SessionHook>,
            leader_znode,
        );
        ZkLeaderManager {
            zkw: zkw.clone(),
            shared,
            hook,
        }
    }

    /// zklock: calls `listener` with the claim's [`LeadershipEvent`]s, the
    /// other leadership recipes' lost signal: `InDoubt` when the connection
    /// drops while it leads, `Restored` when the re-check after the reconnect
    /// found the znode still this claim's, `Lost` when a claim ends other
    /// than by [`step_down_as_leader`](Self::step_down_as_leader) or
    /// [`stop`](Self::stop) (its znode gone or another's, its session
    /// ended). Called on the event thread, one event at a time: keep it
    /// short, never block on ZooKeeper in it, with one exception: it may
    /// stop the manager from inside an event (the stop's delete then holds
    /// the event thread for its round trip; `stop` tells nothing).
    pub fn add_listener(&self, listener: impl Fn(LeadershipEvent) + Send + Sync + 'static) {
        self.shared.listeners.add(Arc::new(listener));
    }

    /// The leader znode.
    pub fn leader_znode(&self) -> &str {
        &self.shared.znode
    }

    /// HBase's `start()`: creates the leader znode's parent (with its parents)
    /// if missing. The manager hears the leader znode's events from its
    /// construction on (HBase: `registerListener` here).
    ///
    /// # Errors
    /// `BadArguments` for a bad path; ZooKeeper errors after retries. HBase
    /// aborts the watcher and stops the candidate instead; zklock returns the
    /// error to the caller, who decides.
    pub fn start(&self) -> Result<()> {
        crate::path::validate(&self.shared.znode)?;
        if let Some(parent) = crate::path::get_parent(&self.shared.znode) {
            if crate::zkutil::check_exists(&self.zkw, parent)?.is_none() {
                crate::zkutil::create_with_parents(&self.zkw, parent)?;
            }
        }
        Ok(())
    }

    /// HBase's `waitToBecomeLeader()`: blocks until this candidate has claimed
    /// the leader znode (`Ok(true)`) or is stopped (`Ok(false)`). Returns at
    /// once when it leads already.
    ///
    /// Each round tries to create the ephemeral znode with the candidate's id;
    /// if another holds it, reads it with a watch and waits on a condition that
    /// the watch's event wakes (no polling). A leader znode holding this
    /// candidate's own id from another session (a restarted process) is
    /// deleted, as HBase does (at the version read, so a newer claim stays);
    /// one from this session but not carrying this manager's mark is another
    /// manager's claim, waited for like any other leader's. A create whose
    /// reply was lost is recognised by the mark only (see the type's docs).
    /// Missing parents are created (HBase creates them in `start()` only, and
    /// its wait fails without them; zklock's create makes a node with its
    /// parents in one way everywhere).
    ///
    /// # Errors
    /// `SessionExpired` (or `Closed`, `AuthFailed`) when the session the wait
    /// began in ends, renewed or not; `BadArguments` for a bad path; other
    /// ZooKeeper errors after retries (HBase aborts the watcher and stops the
    /// candidate; zklock returns the error, holds no claim, and leaves no
    /// znode: one the server may have made for a create whose reply was lost
    /// is found by its mark and removed once the connection is back, unless
    /// a later wait of this manager has claimed it).
    #[must_use = "`Ok(false)` means this manager was stopped before it led"]
    pub fn wait_to_become_leader(&self) -> Result<bool> {
        crate::path::validate(&self.shared.znode)?;
        let zk = self.zkw.zookeeper();
        self.zkw.check_session()?;
        let session = zk.session_id();
        // The session the wait began in, as the wait engine sees it.
        let began = Pinned::new(zk, || self.check_session(session));
        let rzk = self.zkw.recoverable_zookeeper();
        let znode = self.shared.znode.as_str();
        loop {
            // The wait engine's round: read before the watch (issue 20: a
            // generation, not a re-armed flag).
            let round = self.shared.wake.generation();
            if self.shared.state.lock().stopped {
                return Ok(false);
            }
            self.check_session(session)?;
            if self.has_leadership() {
                return Ok(true);
            }
            // HBase: ZKUtil.createEphemeralNodeAndWatch(watcher, leaderZNode,
            // nodeId), the one way to own a node: a lost reply finds this
            // manager's znode by its mark, never by "same data, same session"
            // (another manager of this session may have this id).
            let spec = NodeSpec {
                path: znode,
                data: &rzk.encode(&self.shared.node_id),
                acl: rzk.acl_for(znode),
                mode: CreateMode::Ephemeral,
                ttl: None,
                parents: Parents::Persistent,
            };
            let making = self.shared.making.lock();
            let claimed = create_owned(rzk, &spec, &self.shared.mark)
                .and_then(|(_, stat)| self.claimed(session, stat.czxid));
            match claimed {
                Ok(true) => {
                    debug!("claimed the leader znode {znode}");
                    return Ok(true);
                }
                Ok(false) => continue,
                Err(e) if e.is(ZkError::NodeExists) => {}
                Err(e) => {
                    // The server may have made the znode (a lost reply, then
                    // every lookup failed): no claim, and what is there is
                    // settled after the reconnect, never left as a leader
                    // nobody is.
                    self.shared.state.lock().claim = None;
                    drop(making);
                    if e.is_retryable() {
                        self.unsettled(session);
                    }
                    return Err(e);
                }
            }
            drop(making);
            // HBase: ZKUtil.getDataAndWatch(watcher, leaderZNode)
            match rzk.get_data(znode, true).optional()? {
                None => {
                    self.shared.state.lock().leader_exists = false;
                    continue;
                }
                Some((current, stat)) if current == self.shared.node_id => {
                    if stat.ephemeral_owner == session {
                        // Created since our create by this manager (another
                        // thread's wait): ours. Else another manager of this
                        // session with our id leads: wait for it.
                        let zk = self.zkw.zookeeper();
                        let mark = &self.shared.mark;
                        let _making = self.shared.making.lock();
                        let marked = rzk.retrying("getACL", znode, |_| {
                            mark.is_marked(zk, znode, CreateMode::Ephemeral)
                        })?;
                        if marked.is_some_and(|s| s.czxid == stat.czxid) {
                            if self.claimed(session, stat.czxid)? {
                                return Ok(true);
                            }
                            continue;
                        }
                        debug!("another manager of this session leads at {znode}");
                        self.shared.state.lock().leader_exists = true;
                    } else {
                        info!("found an existing leader with our id at {znode}, removing");
                        match Removal::new(znode, Guard::Version(stat.version)).run(rzk) {
                            Ok(_) => {}
                            Err(e) if e.is(ZkError::BadVersion) => {}
                            Err(e) => return Err(e),
                        }
                        self.shared.state.lock().leader_exists = false;
                        continue;
                    }
                }
                Some(_) => {
                    debug!("found an existing leader at {znode}");
                    self.shared.state.lock().leader_exists = true;
                }
            }
            // Wait for the next chance: the leader znode's deletion (the watch
            // set above), a stop or the session's end. Armed before the watch
            // was set, so an event since then is not lost. A wait of the wait
            // engine, bound to the session the call began in: its end wakes
            // the wait directly (and ends it with its error).
            crate::engine::wait::wait(
                &self.shared.wake,
                round,
                &began,
                Deadline::never(),
                WhenDown::Wait,
                znode,
            )?;
        }
    }

    /// A wait gave up after a create whose outcome is unknown: once the
    /// connection is back, the znode this manager's mark made (if the server
    /// made it) is removed, unless a later wait has claimed it meanwhile
    /// (decided under the making lock, so no wait claims it in between).
    fn unsettled(&self, session: i64) {
        let shared = Arc::downgrade(&self.shared);
        let (znode, mark) = (self.shared.znode.clone(), self.shared.mark.clone());
        Unsettled::new(znode.clone(), move |zk, zkw| {
            let shared = shared.upgrade();
            let _making = shared.as_ref().map(|s| s.making.lock());
            let Some((path, stat)) = mark.find(zk, &znode, CreateMode::Ephemeral)? else {
                return Ok(());
            };
            let claim = shared.as_ref().and_then(|s| s.state.lock().claim);
            if claim.is_some_and(|c| c.czxid == stat.czxid) {
                return Ok(()); // claimed by a later wait: kept
            }
            remove_found(zk, zkw, &path, &stat);
            Ok(())
        })
        .in_session(&self.zkw, session);
    }

    /// After a create of the leader znode in `session`: records the claim and
    /// sets HBase's watch on it (`watchAndCheckExists`). `false` when it is gone
    /// already (someone deleted it) or a [`stop`](Self::stop) came meanwhile
    /// (the znode is then removed here or by the stop, whichever sees the
    /// other: each writes its side under the state lock before it reads the
    /// other's).
    ///
    /// The claim is recorded before the watch is set, so that the watch's
    /// check judges it, but it leads only once confirmed: until then
    /// [`has_leadership`](Self::has_leadership) is false, so no one sees it
    /// lead in a wait that then says it was stopped first.
    fn claimed(&self, session: i64, czxid: i64) -> Result<bool> {
        let claim = Claim { session, czxid };
        {
            let mut st = self.shared.state.lock();
            if st.claim == Some(claim) && st.confirmed {
                // Another wait of this manager confirmed it first: kept as
                // it is (in doubt or not).
                return Ok(true);
            }
            st.leader_exists = true;
            st.claim = Some(claim);
            st.confirmed = false;
            st.in_doubt = false;
        }
        let rzk = self.zkw.recoverable_zookeeper();
        let stat = match rzk.exists(&self.shared.znode, true) {
            Ok(stat) => stat,
            Err(e) => {
                // Unconfirmed: no claim is kept, and the znode (if still
                // there) is settled after the reconnect.
                let mut st = self.shared.state.lock();
                if st.claim == Some(claim) && st.confirmed {
                    return Ok(true); // confirmed by another wait meanwhile
                }
                if st.claim == Some(claim) {
                    st.claim = None;
                }
                drop(st);
                if e.is_retryable() {
                    self.unsettled(session);
                }
                return Err(e);
            }
        };
        let mut st = self.shared.state.lock();
        let kept = st.claim == Some(claim) && stat.is_some_and(|s| s.czxid == czxid);
        if !kept {
            if st.claim == Some(claim) {
                st.claim = None;
            }
            return Ok(false);
        }
        if st.confirmed {
            return Ok(true); // confirmed by another wait meanwhile
        }
        if st.stopped {
            drop(st);
            self.step_down_as_leader()?;
            return Ok(false);
        }
        st.confirmed = true;
        // The connection dropped since the create: it leads in doubt, and
        // says so now (the disconnect told nothing for a claim that did not
        // lead yet); the re-check after the reconnect restores or ends it.
        let in_doubt = st.in_doubt;
        drop(st);
        if in_doubt {
            self.shared.tell(LeadershipEvent::InDoubt);
        }
        crate::metrics::metric!(leader_change(
            "leader_manager",
            &self.shared.znode,
            true,
            false
        ));
        Ok(true)
    }

    /// `SessionExpired` once the session `session` is over, even if a new one
    /// replaced it.
    fn check_session(&self, session: i64) -> Result<()> {
        self.zkw.check_session()?;
        if self.zkw.zookeeper().session_id() != session {
            return Err(Error::zk(ZkError::SessionExpired, &self.shared.znode));
        }
        Ok(())
    }

    /// HBase's `stepDownAsLeader()`: deletes the leader znode if this
    /// candidate holds it. A later
    /// [`wait_to_become_leader`](Self::wait_to_become_leader) competes again.
    ///
    /// HBase deletes the znode whenever it holds this candidate's id; zklock
    /// deletes it only if this session created it for this claim (owner and
    /// creation zxid read first), at the version read: a znode with the same
    /// id from another session is another process's claim. (ZooKeeper has no
    /// delete conditional on the creation zxid: a znode deleted by someone
    /// else and created again by another session at the same version between
    /// the read and the delete, one round trip, is the one case the version
    /// cannot tell apart.)
    ///
    /// # Errors
    /// ZooKeeper errors after retries (HBase aborts the watcher).
    pub fn step_down_as_leader(&self) -> Result<()> {
        {
            let st = self.shared.state.lock();
            if !st.leader_exists && st.claim.is_none() {
                return Ok(());
            }
        }
        let rzk = self.zkw.recoverable_zookeeper();
        let session = self.zkw.zookeeper().session_id();
        let znode = self.shared.znode.as_str();
        let claim = self.shared.state.lock().claim;
        let ours = |id: &[u8], stat: &crate::types::Stat| {
            id == self.shared.node_id.as_slice()
                && stat.ephemeral_owner == session
                && claim.map_or(true, |c| c.czxid == stat.czxid)
        };
        // Whether this step down ended a claim (leadership given up).
        let _ended = match rzk.get_data(znode, false).optional()? {
            // Only this session's znode of this claim (its creation zxid),
            // deleted at the version read.
            Some((id, stat)) if ours(&id, &stat) => {
                info!("stepping down as leader of {znode}");
                Removal::new(znode, Guard::Version(stat.version)).run(rzk)?;
                let mut st = self.shared.state.lock();
                st.leader_exists = false;
                st.in_doubt = false;
                st.claim.take().is_some()
            }
            _ => {
                info!("not the leader of {znode}, no need to step down");
                self.shared.state.lock().claim.take().is_some()
            }
        };
        crate::metrics::metric!(leader_change("leader_manager", znode, false, _ended));
        Ok(())
    }

    /// HBase's `hasLeader()`: whether a leader znode exists, as far as the
    /// watch told. False once the session has ended (nothing can be known).
    pub fn has_leader(&self) -> bool {
        self.shared.state.lock().leader_exists && self.zkw.check_session().is_ok()
    }

    /// Whether this candidate holds the leader znode, in the session that is
    /// current now, and its connection is not in doubt (no HBase counterpart:
    /// HBase's callers know it from `waitToBecomeLeader` returning). False
    /// once the znode is deleted (a step down, or someone else), the session
    /// that created it ended, or while [`is_in_doubt`](Self::is_in_doubt).
    pub fn has_leadership(&self) -> bool {
        let (claim, in_doubt) = {
            let st = self.shared.state.lock();
            (st.claim.filter(|_| st.confirmed), st.in_doubt)
        };
        !in_doubt
            && claim.is_some_and(|c| {
                self.zkw.check_session().is_ok() && self.zkw.zookeeper().session_id() == c.session
            })
    }

    /// zklock: whether this manager's claim is in doubt: the connection
    /// dropped while it led. It leads only while its session lives, so it
    /// stops acting as leader now ([`has_leadership`](Self::has_leadership)
    /// is false), before the server can expire the session and let another
    /// lead. After the reconnect the claim is checked again (the znode still
    /// this session's, of this claim) before it leads again; a znode found
    /// gone or another's ends the claim. (HBase has no such signal.)
    pub fn is_in_doubt(&self) -> bool {
        let st = self.shared.state.lock();
        st.in_doubt && st.claim.is_some()
    }

    /// HBase's `candidate.stop(why)`: ends a
    /// [`wait_to_become_leader`](Self::wait_to_become_leader) (it returns
    /// `Ok(false)`, also when its create was made and not yet confirmed: the
    /// znode is removed) and steps down if leading. Idempotent.
    ///
    /// # Errors
    /// As [`step_down_as_leader`](Self::step_down_as_leader).
    pub fn stop(&self) -> Result<()> {
        self.shared.state.lock().stopped = true;
        self.shared.wake.wake();
        if self.shared.state.lock().claim.is_some() {
            return self.step_down_as_leader();
        }
        Ok(())
    }

    /// HBase's `candidate.isStopped()`: whether [`stop`](Self::stop) was called.
    pub fn is_stopped(&self) -> bool {
        self.shared.state.lock().stopped
    }
}

impl Drop for ZkLeaderManager {
    /// Never waits on the network: a manager holding a claim (leading, or in
    /// doubt) deletes its znode with asynchronous requests, guarded: the
    /// znode is read first and deleted (at the version read) only when it is
    /// this session's znode of this claim (its creation zxid); another
    /// manager's znode is never touched. The session's end removes it anyway.
    fn drop(&mut self) {
        if let Some(id) = self.hook {
            self.shared.zkw.remove_hook(id);
        }
        let claim = self.shared.state.lock().claim.take();
        let zk = self.zkw.zookeeper();
        let Some(claim) = claim.filter(|c| c.session == zk.session_id()) else {
            return;
        };
        if self.zkw.state().is_terminal() {
            return;
        }
        // Only this claim's znode (its creation zxid, so of this session),
        // at the version read; one try (no retry after a reconnect).
        Removal::new(self.shared.znode.clone(), Guard::Created(claim.czxid))
            .once()
            .in_session(zk, &self.zkw.downgrade());
    }
}

impl LeaderShared {
    /// HBase's `handleLeaderChange`, without blocking: an asynchronous exists
    /// with the default watch, whose answer sets `leader_exists` and ends a
    /// claim whose znode is gone. Only a claim made before the request was
    /// sent can be judged by its answer (a create answered before it was
    /// applied before it); a newer claim is left alone. The engine's one held
    /// watch ([`held::arm`]), with the claim at send time as its context.
    fn leader_changed(&self) {
        if let Some(me) = self.me.upgrade() {
            held::arm(&me);
        }
    }

    /// The check's answer (or the error that ends it), judged against the
    /// claim when the request was sent.
    fn checked(
        &self,
        claim_at_send: Option<Claim>,
        answer: std::result::Result<Option<Stat>, &Error>,
    ) {
        let mut st = self.state.lock();
        let same_claim = st.claim == claim_at_send;
        // Only a claim that led is told of (an unconfirmed one never led).
        let (had_claim, was_in_doubt) = (st.claim.is_some() && st.confirmed, st.in_doubt);
        match answer {
            Ok(Some(stat)) => {
                st.leader_exists = true;
                if same_claim && st.claim.is_some_and(|c| c.czxid != stat.czxid) {
                    info!("the leader znode {} is another's now", self.znode);
                    st.claim = None;
                }
            }
            Ok(None) => {
                info!("leader change at {}, but no new leader found", self.znode);
                st.leader_exists = false;
                if same_claim {
                    st.claim = None;
                }
            }
            // Never logged and forgotten: without this answer a claim whose
            // znode is gone would be kept, and no watch would be left to wake
            // a waiting candidate. A request that cannot be retried ends the
            // claim (a retryable one is checked again after the reconnect,
            // the claim in doubt meanwhile: see `sort`).
            Err(e) => {
                info!(
                    "checking the leader znode {}: {e}; the claim ends",
                    self.znode
                );
                if same_claim {
                    st.claim = None;
                }
            }
        }
        if same_claim {
            st.in_doubt = false;
        }
        let told = match (had_claim && same_claim, st.claim.is_some()) {
            (true, false) => Some(LeadershipEvent::Lost),
            (true, true) if was_in_doubt => Some(LeadershipEvent::Restored),
            _ => None,
        };
        drop(st);
        self.wake.wake();
        if let Some(event) = told {
            self.tell(event);
        }
    }

    /// Tells the listeners `event`.
    fn tell(&self, event: LeadershipEvent) {
        crate::metrics::metric!(leader_change(
            "leader_manager",
            &self.znode,
            false,
            event == LeadershipEvent::Lost
        ));
        self.listeners.tell(&[event], |l, e| l(e));
    }
}

/// The check of the leader znode: an `exists` with the default watch,
/// judged against the claim when it was sent.
impl Held for LeaderShared {
    type Context = Option<Claim>;

    fn watcher(&self) -> &WeakZooKeeperWatcher {
        &self.zkw
    }

    fn path(&self) -> &str {
        &self.znode
    }

    /// Only a retryable error is checked again after the reconnect; any
    /// other (`NoNode` included) ends the claim.
    fn sort(&self, e: &Error) -> Sorted {
        if e.is_retryable() {
            Sorted::Again
        } else {
            Sorted::Ended
        }
    }

    fn resend(self: &Arc<Self>) {
        held::arm(self);
    }

    /// Not reached (`sort` ends the claim on `NoNode`).
    fn on_gone(&self, claim_at_send: Option<Claim>) {
        self.checked(claim_at_send, Ok(None));
    }

    fn on_ended(&self, e: &Error, claim_at_send: Option<Claim>) {
        self.checked(claim_at_send, Err(e));
    }
}

impl HeldWatch for LeaderShared {
    type Answer = Option<Stat>;

    fn context(&self) -> Option<Claim> {
        self.state.lock().claim
    }

    fn request(self: &Arc<Self>, zk: &ZooKeeper, done: Done<Option<Stat>>) {
        zk.exists_async(&self.znode, Some(zk.default_watcher()), done);
    }

    fn on_answer(&self, stat: Option<Stat>, claim_at_send: Option<Claim>) {
        self.checked(claim_at_send, Ok(stat));
    }
}

impl SessionHook for LeaderShared {
    fn session_event(&self, state: KeeperState) {
        if Error::for_session_event(state).is_some() {
            let mut st = self.state.lock();
            let had_claim = st.claim.take().is_some() && st.confirmed;
            st.leader_exists = false;
            st.in_doubt = false;
            drop(st);
            self.wake.wake();
            if had_claim {
                self.tell(LeadershipEvent::Lost);
            }
            return;
        }
        match state {
            KeeperState::Disconnected => {
                let mut st = self.state.lock();
                if st.claim.is_some() && !st.in_doubt {
                    st.in_doubt = true;
                    if !st.confirmed {
                        // Not leading yet: in doubt, told if it comes to lead.
                        return;
                    }
                    drop(st);
                    warn!(
                        "leader of {}: connection lost, leadership in doubt",
                        self.znode
                    );
                    self.wake.wake();
                    self.tell(LeadershipEvent::InDoubt);
                }
            }
            // Checked again before it leads again (the answer ends the doubt).
            KeeperState::SyncConnected if self.state.lock().in_doubt => self.leader_changed(),
            _ => {}
        }
    }

    fn session_renewed(&self) {
        self.wake.wake();
    }

    fn node_event(&self, event_type: EventType, path: &str) {
        if path != self.znode {
            return;
        }
        match event_type {
            EventType::NodeDeleted => {
                self.state.lock().leader_exists = false;
                // The waiting candidate races to create it again.
                self.wake.wake();
                self.leader_changed();
            }
            EventType::NodeCreated | EventType::NodeDataChanged => self.leader_changed(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_send_sync() {
        fn check<T: Send + Sync + 'static>() {}
        check::<ZkLeaderManager>();
    }
}
