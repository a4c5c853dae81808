//! Apache Curator's `LeaderLatch`, in Curator's layout, so that zklock and
//! Curator participants share one latch.

use std::sync::Arc;
use std::time::Duration;

use log::info;

use super::candidate::{LeadershipEvent, Offer, OfferMark};
use super::layout::{sorted_by_sequence_after, LATCH_MARKER};
use super::node::read_participants;
use super::rounds::{
    listener_trait, Listeners, Placed, RoundEngine, RoundHandle, RoundRecipe, Taken,
};
use crate::engine::hook::{hook, Hook};
use crate::engine::owned::{OwnerMark, Parents};
use crate::error::{Error, Result, ZkError};
use crate::lock::Dialect;
use crate::types::{EventType, WatchedEvent};
use crate::watcher::ZooKeeperWatcher;

pub use super::node::Participant;

/// What a [`LeaderLatch`] tells its listeners: Curator's `LeaderLatchListener`
/// (`isLeader`, `notLeader`) and zklock's lost signal around them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LatchEvent {
    /// Curator's `isLeader()`: this latch leads now (its node is the lowest
    /// and its connection is up).
    IsLeader,
    /// Curator's `notLeader()`: this latch stopped leading (after
    /// `LeadershipInDoubt` or `LeadershipLost`). Not told on `close` (Curator's
    /// default `CloseMode.SILENT`).
    NotLeader,
    /// zklock: the leader's connection dropped; it is leader only while its
    /// session lives, so it stops acting as leader now (`NotLeader` follows),
    /// before the server can expire the session and let another lead.
    LeadershipInDoubt,
    /// zklock: the connection came back within the session and the latch's
    /// node is still the lowest (`IsLeader` follows).
    LeadershipRestored,
    /// zklock: the leader's session ended (or its node was deleted): it is no
    /// longer leader and this latch is over (see [`LeaderLatch::start`]).
    LeadershipLost,
}

impl LatchEvent {
    /// The event in the leadership recipes' one vocabulary:
    /// `LeadershipInDoubt`, `LeadershipRestored` and `LeadershipLost` are
    /// [`LeadershipEvent`]s; Curator's `IsLeader`/`NotLeader` are `None`.
    pub fn leadership(self) -> Option<LeadershipEvent> {
        match self {
            LatchEvent::LeadershipInDoubt => Some(LeadershipEvent::InDoubt),
            LatchEvent::LeadershipRestored => Some(LeadershipEvent::Restored),
            LatchEvent::LeadershipLost => Some(LeadershipEvent::Lost),
            LatchEvent::IsLeader | LatchEvent::NotLeader => None,
        }
    }
}

listener_trait! {
    /// Curator's `LeaderLatchListener`. Closures `Fn(LatchEvent)` implement it.
    /// Called on the client's event thread (or the thread in `start`), one event
    /// at a time: keep it short, never block on ZooKeeper in it, with one
    /// exception: it may close its latch from inside an event (the close's
    /// delete then holds the telling thread for its round trip; `close` tells
    /// nothing, as Curator's default).
    pub trait LeaderLatchListener {
        /// One event, in order.
        fn on_latch_event(LatchEvent);
    }
}

/// Curator's `LeaderLatch.State`, plus zklock's `Failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LatchState {
    /// `LATENT`: not started.
    Latent,
    /// `STARTED`: in the latch (leading or waiting).
    Started,
    /// zklock: the latch's session ended (or its node was deleted under it);
    /// `start` enters again as a new participant.
    Failed,
    /// `CLOSED`.
    Closed,
}

/// A latch's own state beside its [`RoundEngine`]'s.
#[derive(Debug)]
struct LatchRound {
    state: LatchState,
    /// The latch's node is the lowest (confirmed by a round).
    lowest: bool,
    /// The listeners were last told `IsLeader` (Curator's `hasLeadership`).
    told_leader: bool,
    /// Set by a failure when the listeners are still to hear `NotLeader`.
    not_leader_due: bool,
}

/// The part of a [`LeaderLatch`] its rounds (on the event thread) reach.
struct Latching {
    engine: RoundEngine<Latching>,
    listeners: Listeners<dyn LeaderLatchListener>,
    hook: Hook<LatchStep>,
}

/// A step of a [`LeaderLatch`], told to a test hook (feature `testing`).
#[cfg_attr(not(feature = "testing"), doc(hidden))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LatchStep {
    /// `start` marked the latch started and has made nothing yet (path:
    /// empty): a hook calling `close` from another thread here forces the
    /// race of a close at the very start of a start.
    Starting,
    /// `start` made the latch's node (path: the node) and has not yet bound
    /// it to the latch: a hook calling `close` from another thread here
    /// forces the race of a close during the start.
    NodeMade,
}

/// Apache Curator's `LeaderLatch`: one of the participants sharing `path`
/// leads, until it closes or its session ends; Curator's latches and zklock's
/// on one path agree on one leader.
///
/// # Layout (Curator's)
/// Each participant creates `<path>/_c_<uuid>-latch-<10-digit sequence>`
/// (protected mode: a create whose reply was lost finds its node again by the
/// `_c_<uuid>-` prefix; ephemeral sequential) holding its id (UTF-8); missing
/// parents are created as containers. Nodes are ordered by the sequence after
/// the last `latch-`; the lowest leads; every other participant watches only
/// the node just ahead of it (`getData`, as Curator does): one deletion wakes
/// one participant (zklock's two: see "Down a chain, too" below).
/// [`participants`](Self::participants) and
/// [`leader`](Self::leader) read the nodes' data as Curator's
/// `getParticipants` / `getLeader` do.
///
/// # zklock differs here
/// - **The lost signal.** The leader watches its own node too, so a dropped
///   connection is told at once ([`LatchEvent::LeadershipInDoubt`] then
///   `NotLeader`; [`has_leadership`](Self::has_leadership) turns false; as
///   Curator's `SUSPENDED`), a reconnect within the session re-checks the
///   node's place and tells `LeadershipRestored` then `IsLeader`, and an
///   expired session or a deleted node `LeadershipLost` (then `NotLeader`
///   when still told leader). With a session timeout `t` the client declares
///   the connection lost at 2/3 `t`, before the server can expire the session
///   at `t` and let another lead: at most one latch has `has_leadership()`.
/// - **Bound to its session.** Curator's latch re-creates its node after a
///   lost session (or a node deleted under it) and queues again silently.
///   zklock's latch belongs to the session its node was made in: when that
///   session ends (also when `with_session_renewal` has opened a new one) or
///   its node is deleted, the latch fails ([`LatchState::Failed`],
///   `LeadershipLost`, [`await_leadership`](Self::await_leadership) returns
///   `SessionExpired` / `NoNode`) and re-enters only when the caller calls
///   [`start`](Self::start) again, as a new participant at the end of the
///   queue. A leader must learn that it lost leadership before it can lead
///   again; an automatic re-entry could make it leader again with no sign in
///   between.
/// - **Succession without a listing.** Every participant watches its own
///   node too (an `exists` sent with its first listing, no round trip of its
///   own). When the node it watches was the lowest in the listing that
///   placed it, that node's deletion makes it leader at once (`IsLeader`,
///   as after a listing), with no request between the notification and
///   `IsLeader`; Curator's latch lists the children again. Sound because a
///   sequence number comes from the parent's `cversion`, which only grows (a
///   node made after that listing sorts after this one), and because
///   ZooKeeper delivers a session's notifications in zxid order: the own
///   node's watch, armed before the deletion and not fired, shows the node
///   was there when its predecessor left. After a connection change since
///   either watch was set (a reconnect's `SetWatches` re-delivers missed
///   events by watch type, not zxid order), or when the departed node was
///   not the lowest, the latch lists the children as Curator's does. See
///   the `rounds` module's "Succession without a listing".
/// - **Down a chain, too.** A participant behind two nodes or more also
///   watches the node just ahead of its predecessor (`getData`, sent with
///   the predecessor's watch, in the same round trip). When that node was
///   the lowest in its listing, its deletion tells the latch its
///   predecessor is the lowest now (no request, no event), so the
///   predecessor's deletion makes it leader at once; otherwise the latch
///   lists the children again then, off the critical path, and its
///   predecessor's watch, still armed, is not set again. Every leader
///   closing in a chain is so succeeded without a listing. A deletion
///   notifies two participants (the successor and the one behind it) where
///   Curator's notifies one: a bounded fan-out, not a herd. See the
///   `rounds` module's "The second ahead: a chain of successions".
/// - [`start`](Self::start) returns once the latch's place is known (Curator's
///   starts in the background); the later rounds run as asynchronous calls
///   answered on the event thread. [`close`](Self::close) is idempotent and
///   deletes the node before it returns; dropping a started latch removes
///   its node in the background.
///
/// # Read-only mode
/// With [read-only mode](crate::ZooKeeperWatcherBuilder::with_read_only) on,
/// a read-only server (`ConnectedReadOnly`) proves nothing: it cannot write,
/// its data may lag the quorum's, and it cannot tell whether the session
/// lives. A leadership had stays **in doubt** (`InDoubt`, told at the
/// disconnect; restored only after a read-write server confirmed the node)
/// and is lost only when the session ends or the node goes; no one is made
/// leader on a read-only server's listing (the round resumes at the next
/// read-write server); joining while read-only fails with `NotReadOnly`.
pub struct LeaderLatch {
    rounds: RoundHandle<Latching>,
    id: String,
}

impl std::fmt::Debug for LeaderLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.rounds
            .fmt_as(f, "LeaderLatch", "path", &[("id", &self.id)])
    }
}

impl RoundRecipe for Latching {
    type State = LatchRound;

    fn engine(&self) -> &RoundEngine<Self> {
        &self.engine
    }

    /// Curator's `getChildren` then `checkLeadership`, as asynchronous calls.
    fn round(&self, generation: u64) {
        self.engine.list_placed(generation, Self::listed);
    }

    fn node_event(&self, generation: u64, event: WatchedEvent) {
        let Some(path) = event.path.clone() else {
            return;
        };
        let (is_own, lowest) = {
            let st = self.engine.state();
            (st.node.as_deref() == Some(path.as_str()), st.recipe.lowest)
        };
        match event.event_type {
            EventType::NodeDeleted if is_own => self.engine.fail(generation, ZkError::NoNode),
            // The node ahead left: decide again.
            EventType::NodeDeleted if !lowest => self.round(generation),
            // A write spends the watch: set it again, or the deletion that
            // follows would go unheard.
            // A latch behind another watches its node too (see the type's
            // docs: the succession without a listing).
            EventType::NodeDataChanged | EventType::DataWatchRemoved if is_own => {
                self.engine.watch_own(generation, Self::round)
            }
            EventType::NodeDataChanged | EventType::DataWatchRemoved if !is_own && !lowest => {
                self.watch_ahead(generation, path)
            }
            _ => {}
        }
    }

    fn leads(state: &LatchRound) -> bool {
        state.lowest
    }

    fn sorted(children: &[String]) -> Vec<&String> {
        sorted_by_sequence_after(children, LATCH_MARKER)
    }

    /// `LeadershipInDoubt`, then `NotLeader` when told leader (Curator's
    /// `SUSPENDED`).
    fn tell_in_doubt(&self) {
        let mut told = vec![LatchEvent::LeadershipInDoubt];
        if std::mem::take(&mut self.engine.state().recipe.told_leader) {
            told.push(LatchEvent::NotLeader);
        }
        self.dispatch(&told);
    }

    /// Curator's `RECONNECTED`: the node's place checked again and found
    /// first; `LeadershipRestored` then `IsLeader`.
    fn restored(&self, generation: u64) {
        self.lowest(generation);
    }

    fn mark_failed(state: &mut LatchRound) -> bool {
        let was_leader = state.lowest;
        state.state = LatchState::Failed;
        state.lowest = false;
        state.not_leader_due = std::mem::take(&mut state.told_leader);
        was_leader
    }

    /// A leader hears `LeadershipLost` (then `NotLeader` when still told
    /// leader).
    fn tell_failed(&self, was_leader: bool, _code: ZkError) {
        let not_leader = std::mem::take(&mut self.engine.state().recipe.not_leader_due);
        let mut told = Vec::new();
        if was_leader {
            told.push(LatchEvent::LeadershipLost);
        }
        if not_leader {
            told.push(LatchEvent::NotLeader);
        }
        self.dispatch(&told);
    }
}

impl Latching {
    fn dispatch(&self, events: &[LatchEvent]) {
        crate::metrics::metric!(leader_change(
            "leader_latch",
            self.engine.path(),
            events.contains(&LatchEvent::IsLeader),
            events.contains(&LatchEvent::NotLeader)
        ));
        self.listeners.tell(events, |l, e| l.on_latch_event(e));
    }

    /// Curator's `checkLeadership`.
    /// A node missing from the listing fails the latch with `NoNode`:
    /// Curator resets (a new node); zklock's latch ends (see the docs).
    fn listed(&self, generation: u64, placed: Placed<Self>) {
        match placed.ahead.clone() {
            // The second ahead first, in the same round trip (see the type's
            // docs: the succession without a listing); the node ahead's
            // watch unless it is armed already (an earlier listing's).
            Some(_) if placed.ahead_armed => {
                placed.watch_second(generation);
                self.waiting(generation)
            }
            Some(ahead) => {
                placed.watch_second(generation);
                self.watch_ahead(generation, ahead)
            }
            // Watch the own node: its deletion, and the connection's events.
            None => placed.watch_own(generation, Self::lowest, Self::round),
        }
    }

    /// Watches the node ahead with `getData` (Curator's choice: no exists
    /// watch is left behind when it is gone); decides again when it is.
    fn watch_ahead(&self, generation: u64, ahead: String) {
        self.engine.watch_ahead(generation, ahead, Self::waiting);
    }

    /// The node is the lowest: this latch leads (again, after a doubt).
    fn lowest(&self, generation: u64) {
        let told = {
            let mut st = self.engine.state();
            if st.generation != generation || st.failed.is_some() {
                return;
            }
            let mut told = Vec::new();
            st.recipe.lowest = true;
            if std::mem::take(&mut st.in_doubt) {
                told.push(LatchEvent::LeadershipRestored);
            }
            if !st.recipe.told_leader {
                st.recipe.told_leader = true;
                told.push(LatchEvent::IsLeader);
            }
            told
        };
        if told.contains(&LatchEvent::IsLeader) {
            info!("latch {}: leader", self.engine.path());
        }
        self.dispatch(&told);
        // After the events: `start` returns with them told.
        self.engine.round_done(generation);
    }

    /// Another node is ahead, watched.
    fn waiting(&self, generation: u64) {
        let not_leader = {
            let mut st = self.engine.state();
            if st.generation != generation || st.failed.is_some() {
                return;
            }
            st.recipe.lowest = false;
            std::mem::take(&mut st.recipe.told_leader)
        };
        if not_leader {
            self.dispatch(&[LatchEvent::NotLeader]);
        }
        self.engine.round_done(generation);
    }
}

impl LeaderLatch {
    /// Curator's `LeaderLatch(client, latchPath, id)`: a latch on `path`
    /// (created, with container parents, at `start`) whose participant id is
    /// `id`.
    ///
    /// # Errors
    /// `BadArguments` for an invalid `path`.
    pub fn new(zkw: &ZooKeeperWatcher, path: &str, id: &str) -> Result<Self> {
        let state = LatchRound {
            state: LatchState::Latent,
            lowest: false,
            told_leader: false,
            not_leader_due: false,
        };
        let rounds = RoundHandle::new(zkw, path, state, |engine| Latching {
            engine,
            listeners: Listeners::default(),
            hook: Hook::default(),
        })?;
        Ok(LeaderLatch {
            rounds,
            id: id.to_string(),
        })
    }

    /// Calls `hook` at each [`LatchStep`] (feature `testing`); it runs on the
    /// thread that does the step.
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_step_hook(self, hook: impl Fn(LatchStep, &str) + Send + Sync + 'static) -> Self {
        self.rounds.core.hook.set(hook);
        self
    }

    /// Curator's `addListener`.
    pub fn add_listener(&self, listener: impl LeaderLatchListener + 'static) {
        self.rounds.core.listeners.add(Arc::new(listener));
    }

    /// Curator's `getId()`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The latch's path.
    pub fn path(&self) -> &str {
        self.rounds.path()
    }

    /// Curator's `getState()`.
    pub fn state(&self) -> LatchState {
        self.rounds.engine().state().recipe.state
    }

    /// Curator's `getOurPath()`: this latch's node, once made.
    pub fn our_path(&self) -> Option<String> {
        self.rounds.node()
    }

    /// Curator's `hasLeadership()`: whether this latch leads now: its node
    /// the lowest, its connection not in doubt, its session alive (not
    /// replaced by a renewed one).
    pub fn has_leadership(&self) -> bool {
        self.rounds
            .holds(|l| l.state == LatchState::Started && l.lowest)
    }

    /// zklock: whether the leader's connection dropped and its place is not
    /// confirmed since (`LeadershipInDoubt` told, `LeadershipRestored` not
    /// yet): it does not lead meanwhile.
    pub fn is_in_doubt(&self) -> bool {
        self.rounds.is_in_doubt()
    }

    /// Curator's `start()`: makes the latch's node and determines its place
    /// (leading, or waiting behind the node ahead); returns once that is
    /// known, with `IsLeader` told when it leads. Later changes arrive as
    /// events.
    ///
    /// A latch that failed ([`LatchState::Failed`]: its session ended, also
    /// by session renewal, or its node was deleted) can be started again: it
    /// enters the current session as a new participant (see the type's docs).
    ///
    /// A [`close`](Self::close) from another thread during `start` leaves
    /// the latch closed with no node left; `start` returns `Closed` (or the
    /// error it was failing with) when the close came before its node was
    /// bound, `Ok(())` when it came later (the round it ended was the
    /// start's). A close while a failed latch's start removes the failed
    /// attempt's node is one of the first kind.
    ///
    /// # Errors
    /// `MixedDialect` when `path` holds lock nodes of another dialect
    /// (kazoo's, HBase's; one listing before the create, so two latches of
    /// different dialects starting at once are not told);
    /// `BadArguments` when started already or closed; `SessionExpired` /
    /// `Closed` when the session ended; ZooKeeper errors after retries (the
    /// latch is then not started, and leaves no node: one the server may
    /// have made for a create whose reply was lost is found by its mark and
    /// removed once the connection is back).
    pub fn start(&self) -> Result<()> {
        let engine = self.rounds.engine();
        // One step under the engine's lock: the check, the state that makes
        // a second `start` refuse, and the generation a `close` from another
        // thread then bumps (so `bind` refuses the node, and a failure here
        // never reopens a closed latch).
        let mut cleaned = false;
        let generation = loop {
            let mut st = engine.state();
            let current = st.recipe.state;
            match current {
                LatchState::Latent => {
                    st.recipe.state = LatchState::Started;
                    break st.generation;
                }
                LatchState::Failed => {
                    drop(st);
                    // The failed attempt's node (if any survived) goes first;
                    // then the check again, as a `close` may have come
                    // meanwhile (the latch stays closed).
                    if let Some(taken) = self.take(LatchState::Latent) {
                        let _ = taken.withdraw(&self.rounds.zkw);
                    }
                    cleaned = true;
                }
                LatchState::Closed if cleaned => return Err(Error::Closed),
                LatchState::Started | LatchState::Closed => {
                    return Err(Error::BadArguments(format!(
                        "latch {} is {current:?}: cannot be started",
                        self.path(),
                    )))
                }
            }
        };
        hook!(self.rounds.core.hook, LatchStep::Starting, "");
        let (node, session) = match self.refuse_mixed().and_then(|()| self.make_node()) {
            Ok(made) => made,
            Err(e) => {
                let mut st = engine.state();
                // Not over a `close` that came meanwhile: it stays closed.
                if st.generation == generation {
                    st.recipe.state = LatchState::Latent;
                }
                return Err(e);
            }
        };
        hook!(self.rounds.core.hook, LatchStep::NodeMade, &node);
        engine.bind(node, session, generation)?;
        engine.run_round().map(drop)
    }

    /// Refuses a directory holding another dialect's lock nodes (see
    /// [`Dialect`](crate::lock::Dialect)): a latch there would not see them.
    fn refuse_mixed(&self) -> Result<()> {
        let children = self
            .rounds
            .zkw
            .recoverable_zookeeper()
            .get_children(self.path(), false)
            .or_else(no_children)?;
        for c in children {
            if let Some(found) = Dialect::of_node(&c).filter(|d| *d != Dialect::Curator) {
                return Err(Error::MixedDialect {
                    path: crate::path::join_znode(self.path(), &c),
                    found,
                });
            }
        }
        Ok(())
    }

    /// Curator's protected `create().creatingParentContainersIfNeeded()
    /// .withProtection().withMode(EPHEMERAL_SEQUENTIAL)`: retried on
    /// connection loss, a node of this attempt's `_c_<uuid>-` prefix already
    /// in `path` (a lost reply) is adopted, looked for after a `sync`.
    fn make_node(&self) -> Result<(String, i64)> {
        let mark = OwnerMark::new();
        Offer {
            root: self.path(),
            name: format!("{}{LATCH_MARKER}", mark.protected_prefix()),
            data: self.id.as_bytes(),
            mark: OfferMark::Owner(mark),
            parents: Parents::Container,
        }
        .make(&self.rounds.zkw)
    }

    /// Curator's `close()`: withdraws the node (the next participant is
    /// notified) and tells no listener (Curator's `CloseMode.SILENT`).
    /// Idempotent.
    ///
    /// # Errors
    /// ZooKeeper errors after retries (the node is then removed in the
    /// background); none when the session already ended.
    pub fn close(&self) -> Result<()> {
        match self.take(LatchState::Closed) {
            Some(taken) => self.rounds.step_down(taken),
            None => Ok(()),
        }
    }

    /// Forgets the node (a new generation: answers of earlier rounds are
    /// ignored); the state becomes `state`.
    fn take(&self, state: LatchState) -> Option<Taken> {
        self.rounds.engine().take(|l| {
            l.state = state;
            l.lowest = false;
            l.told_leader = false;
        })
    }

    /// Curator's `await(timeout)`: waits until this latch leads
    /// ([`has_leadership`](Self::has_leadership)); `Ok(false)` when `timeout`
    /// passed first. Woken by the latch's events, never polling.
    ///
    /// # Errors
    /// `Closed` when the latch is not started or is closed meanwhile (Curator
    /// returns false, its `await()` throws `EOFException`); the latch's
    /// failure (`SessionExpired` when its session ended, also with session
    /// renewal; `NoNode` when its node was deleted).
    #[must_use = "`Ok(false)` means this latch does not lead"]
    pub fn await_leadership(&self, timeout: Duration) -> Result<bool> {
        self.rounds.await_leadership(timeout)
    }

    /// Curator's `getParticipants()`: every participant of the latch, in
    /// node order (the leader first), read from the nodes (`1 + N`
    /// requests).
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        participants(&self.rounds.zkw, self.path())
    }

    /// Curator's `getLeader()`: the leading participant (the lowest node
    /// still there), `None` without participants (Curator returns a dummy
    /// participant with an empty id).
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants()?.into_iter().next())
    }
}

/// [`LeaderLatch::participants`] without a latch: the participants of the
/// latch on `path` (Curator's or zklock's) in node order, the leader first.
///
/// # Errors
/// ZooKeeper errors after retries.
pub fn participants(zkw: &ZooKeeperWatcher, path: &str) -> Result<Vec<Participant>> {
    read_participants(zkw.recoverable_zookeeper(), path, |c| {
        sorted_by_sequence_after(c, LATCH_MARKER)
    })
}

/// A listing of a directory not made yet: no children.
fn no_children(e: Error) -> Result<Vec<String>> {
    if e.is(ZkError::NoNode) {
        Ok(Vec::new())
    } else {
        Err(e)
    }
}

impl Drop for LeaderLatch {
    fn drop(&mut self) {
        if let Some(taken) = self.take(LatchState::Closed) {
            taken.withdraw_in_background(&self.rounds.zkw);
        }
    }
}
