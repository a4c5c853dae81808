//! ZooKeeper's `org.apache.zookeeper.recipes.leader.LeaderElectionSupport`.

use std::sync::Arc;
use std::time::Duration;

use log::info;

use super::candidate::{LeadershipEvent, Offer, OfferMark};
use super::node::read_participants;
use super::rounds::{
    listener_trait, Listeners, Placed, RoundEngine, RoundHandle, RoundRecipe, Taken,
};
use crate::engine::hook::{hook, Hook};
use crate::engine::owned::Parents;
use crate::error::{Error, Result, ZkError};
use crate::sequence::number_after_last;
use crate::types::{EventType, WatchedEvent};
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// Java's `LeaderElectionSupport.EventType`, told to [`LeaderElectionAware`]
/// listeners in Java's order, plus three zklock events for the leader's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElectionEventType {
    /// `START`: `start()` began.
    Start,
    /// `OFFER_START`: creating the offer node.
    OfferStart,
    /// `OFFER_COMPLETE`: the offer node exists.
    OfferComplete,
    /// `DETERMINE_START`: listing the offers.
    DetermineStart,
    /// `DETERMINE_COMPLETE`: this offer's place is known.
    DetermineComplete,
    /// `ELECTED_START`: this candidate is becoming the leader.
    ElectedStart,
    /// `ELECTED_COMPLETE`: this candidate is the leader.
    ElectedComplete,
    /// `READY_START`: about to watch the offer ahead.
    ReadyStart,
    /// `READY_COMPLETE`: watching the offer ahead.
    ReadyComplete,
    /// `FAILED`: the election failed (session ended, offer deleted, error).
    Failed,
    /// `STOP_START`: `stop()` began.
    StopStart,
    /// `STOP_COMPLETE`: the offer is withdrawn.
    StopComplete,
    /// zklock only: the leader's connection dropped. It is leader only while its
    /// session lives: stop acting as leader until `LeadershipRestored`. Told at
    /// once (before the server can expire the session).
    LeadershipInDoubt,
    /// zklock only: the leader reconnected within its session and its offer
    /// was found still there and first.
    LeadershipRestored,
    /// zklock only: the leader's session ended or its offer was deleted; it is
    /// no longer leader (`Failed` follows).
    LeadershipLost,
}

impl ElectionEventType {
    /// The event in the leadership recipes' one vocabulary:
    /// `LeadershipInDoubt`, `LeadershipRestored` and `LeadershipLost` are
    /// [`LeadershipEvent`]s; Java's events are `None`.
    pub fn leadership(self) -> Option<LeadershipEvent> {
        match self {
            ElectionEventType::LeadershipInDoubt => Some(LeadershipEvent::InDoubt),
            ElectionEventType::LeadershipRestored => Some(LeadershipEvent::Restored),
            ElectionEventType::LeadershipLost => Some(LeadershipEvent::Lost),
            _ => None,
        }
    }
}

listener_trait! {
    /// Java's `LeaderElectionAware`. Closures `Fn(ElectionEventType)` implement it.
    /// Called on the client's event thread (or the thread in `start`/`stop`, or a
    /// thread waiting in `start`/`await_leadership` that sees the session's end
    /// before the event thread tells it), one event at a time: keep it short,
    /// never block on ZooKeeper in it, with one exception: it may stop its
    /// candidate from inside an event (the stop's delete then holds the
    /// telling thread, maybe the event thread, for its round trip). That
    /// stop returns before its own events are told; they follow once the
    /// events being told have reached every listener, so all of them hear
    /// one order.
    pub trait LeaderElectionAware {
        /// Java's `onElectionEvent(EventType)`.
        fn on_election_event(ElectionEventType);
    }
}

/// Java's `LeaderElectionSupport.State`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElectionState {
    /// `START`.
    Start,
    /// `OFFER`.
    Offer,
    /// `DETERMINE`.
    Determine,
    /// `ELECTED`.
    Elected,
    /// `READY`.
    Ready,
    /// `FAILED`.
    Failed,
    /// `STOP`.
    Stop,
}

/// A step of an election round, told to a test hook (feature `testing`).
#[cfg_attr(not(feature = "testing"), doc(hidden))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElectionStep {
    /// The offers were listed; this candidate is not first. The path given is
    /// the offer ahead, about to be watched: a hook stopping that candidate
    /// here forces the race of upstream's `testReadyOffer`.
    Watching,
    /// `start` made the offer (path: the offer) and has not yet bound it to
    /// the candidate: a hook calling `stop` from another thread here forces
    /// the race of a stop during the offer.
    OfferMade,
    /// The candidate was found first and marked `Elected`; its listeners are
    /// not told yet (path: the offer): a hook calling `stop` from another
    /// thread here forces the race of a stop as the candidate is elected.
    Elected,
}

/// A candidate's own state beside its [`RoundEngine`]'s.
#[derive(Debug)]
struct CandidateRound {
    state: ElectionState,
    /// The offer ahead, watched while `Ready`.
    ahead: Option<String>,
}

/// The part of a [`LeaderElectionSupport`] its rounds (on the event thread)
/// reach.
struct Candidacy {
    engine: RoundEngine<Candidacy>,
    listeners: Listeners<dyn LeaderElectionAware>,
    hook: Hook<ElectionStep>,
}

/// ZooKeeper's `org.apache.zookeeper.recipes.leader.LeaderElectionSupport`: a
/// leader election among candidates sharing `root` with Java's recipe.
///
/// # Layout (Java's)
/// Each candidate creates the ephemeral sequential child `n_<seq>` of `root`
/// holding its host name (UTF-8); the lowest sequence leads, every other
/// candidate watches only the offer just ahead of it: one deletion
/// notifies one candidate (zklock's two: see "Down a chain, too" below).
/// [`get_leader_host_name`](Self::get_leader_host_name)
/// reads the lowest offer's data, as Java's does.
///
/// # zklock differs here
/// - Offers are created without zklock's metadata prefix and without a tag, so
///   Java reads the host name. A create whose reply was lost is found again
///   (after a `sync`) before a new one is made, as the offer of this session
///   created after the create was sent: the offers of one session on one root
///   are made one at a time in the process, so two candidates sharing a
///   session never adopt each other's offer (Java's recipe does not retry).
/// - The rounds after a deletion run as asynchronous calls on the event thread
///   (Java re-runs its blocking `determineElectionStatus` there).
/// - **Succession without a listing.** Every candidate watches its own
///   offer too (an `exists` sent with its first listing, no round trip of
///   its own). When the offer it watches was the lowest in the listing that
///   placed it, that offer's deletion elects it at once (`DetermineStart`,
///   `DetermineComplete`, `ElectedStart`, `ElectedComplete`, as after a
///   listing), with no request between the notification and
///   `ElectedComplete`; Java's recipe lists the offers again. Sound because
///   a sequence number comes from the root's `cversion`, which only grows (an
///   offer made after that listing sorts after this one), and because
///   ZooKeeper delivers a session's notifications in zxid order: the own
///   offer's watch, armed before the deletion and not fired, shows the offer
///   was there when its predecessor left. After a connection change since
///   either watch was set (a reconnect's `SetWatches` re-delivers missed
///   events by watch type, not zxid order), or when the departed offer was
///   not the lowest, the candidate lists the offers as Java's does. See the
///   `rounds` module's "Succession without a listing".
/// - **Down a chain, too.** A candidate behind two offers or more also
///   watches the offer just ahead of its predecessor (`getData`, sent with
///   the predecessor's watch, in the same round trip). When that offer was
///   the lowest in its listing, its deletion tells the candidate its
///   predecessor is the lowest now (no request, no event), so the
///   predecessor's deletion elects it at once; otherwise the candidate lists
///   the offers again then, off the critical path (its events as after any
///   listing), and its predecessor's watch, still armed, is not set again.
///   Every leader stepping down in a chain is so succeeded without a
///   listing. A deletion notifies two candidates (the successor and the one
///   behind it) where Java's notifies one: a bounded fan-out, not a herd.
///   See the `rounds` module's "The second ahead: a chain of successions".
/// - The leader watches its own offer: a dropped connection is told at once
///   ([`ElectionEventType::LeadershipInDoubt`], and
///   [`has_leadership`](Self::has_leadership) turns false), a reconnect within the
///   session `LeadershipRestored` once the offer is found still there and
///   first (else `LeadershipLost` then `Failed`), an expired session or a
///   deleted offer
///   `LeadershipLost` then `Failed`. With a session timeout `t`, the client
///   declares the connection lost at 2/3 `t`, before the server can expire the
///   session at `t` and elect another: at most one candidate has `has_leadership()`.
/// - Dropping a started candidate withdraws its offer in the background.
/// - The offer ahead is watched with `getData`, not Java's `exists`: a
///   server from 3.7 on delivers a node's events only to sessions its ACL
///   gives `READ` (it drops the others' silently), so under a policy that
///   gives the other candidates no `READ` on an offer Java's watch is set
///   on 3.7 to 3.8.3 and never fires (the candidate waits for ever), and
///   its `exists` fails on 3.8.4+ / 3.9.2+ (ZOOKEEPER-2590). `getData`
///   needs `READ` on every version: the candidate fails at once with
///   [`Error::NoReadPermission`] naming the offer (see
///   [`AclPolicy`](crate::client::AclPolicy); on 3.6, where Java's
///   election works without `READ`, zklock's fails too).
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
pub struct LeaderElectionSupport {
    rounds: RoundHandle<Candidacy>,
    host_name: String,
}

impl std::fmt::Debug for LeaderElectionSupport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host_name = ("host_name", self.host_name.as_str());
        self.rounds
            .fmt_as(f, "LeaderElectionSupport", "root", &[host_name])
    }
}

impl RoundRecipe for Candidacy {
    type State = CandidateRound;

    fn engine(&self) -> &RoundEngine<Self> {
        &self.engine
    }

    /// Java's `determineElectionStatus`, as asynchronous calls.
    fn round(&self, generation: u64) {
        if self.engine.proceed(generation).is_none() {
            return;
        }
        self.engine.state().recipe.state = ElectionState::Determine;
        self.dispatch(&[ElectionEventType::DetermineStart]);
        self.engine.list_placed(generation, Self::listed);
    }

    fn node_event(&self, generation: u64, event: WatchedEvent) {
        let (own, state, ahead) = {
            let st = self.engine.state();
            (st.node.clone(), st.recipe.state, st.recipe.ahead.clone())
        };
        let Some(path) = event.path.clone() else {
            return;
        };
        let is_own = own.as_deref() == Some(path.as_str());
        match event.event_type {
            EventType::NodeDeleted if is_own => self.engine.fail(generation, ZkError::NoNode),
            EventType::NodeDeleted
                if matches!(state, ElectionState::Ready | ElectionState::Determine) =>
            {
                self.round(generation)
            }
            // A write spends the watch: set it again, or the deletion that
            // follows would go unheard (Java's recipe has that hole). So does a
            // leader of this session stepping down: its `remove_watches` on its
            // offer removes the session's every data watch there, this one too.
            // A candidate behind another watches its offer too (see the type's
            // docs: the succession without a listing).
            EventType::NodeDataChanged | EventType::DataWatchRemoved
                if is_own && matches!(state, ElectionState::Elected | ElectionState::Ready) =>
            {
                self.engine.watch_own(generation, Self::round)
            }
            EventType::NodeDataChanged | EventType::DataWatchRemoved
                if state == ElectionState::Ready && ahead.as_deref() == Some(path.as_str()) =>
            {
                self.watch_again(generation, path)
            }
            _ => {}
        }
    }

    fn leads(state: &CandidateRound) -> bool {
        state.state == ElectionState::Elected
    }

    fn sorted(children: &[String]) -> Vec<&String> {
        sorted_offers(children)
    }

    fn tell_in_doubt(&self) {
        self.dispatch(&[ElectionEventType::LeadershipInDoubt]);
    }

    /// The re-check after a reconnect found the offer still first: the
    /// leader leads again.
    fn restored(&self, generation: u64) {
        {
            let mut st = self.engine.state();
            if st.generation != generation
                || st.failed.is_some()
                || st.recipe.state != ElectionState::Elected
                || !st.in_doubt
            {
                return;
            }
            st.in_doubt = false;
        }
        self.engine.wake();
        info!("leader of {}: restored", self.engine.path());
        self.dispatch(&[ElectionEventType::LeadershipRestored]);
    }

    /// Java's `becomeFailed`.
    fn mark_failed(state: &mut CandidateRound) -> bool {
        let was_leader = state.state == ElectionState::Elected;
        state.state = ElectionState::Failed;
        state.ahead = None;
        was_leader
    }

    /// A leader hears `LeadershipLost` first.
    fn tell_failed(&self, was_leader: bool, _code: ZkError) {
        if was_leader {
            self.dispatch(&[ElectionEventType::LeadershipLost, ElectionEventType::Failed]);
        } else {
            self.dispatch(&[ElectionEventType::Failed]);
        }
    }
}

impl Candidacy {
    fn dispatch(&self, events: &[ElectionEventType]) {
        let telling = self.listeners.hold();
        self.dispatch_held(&telling, events);
    }

    /// [`dispatch`](Self::dispatch) with the telling held already (see
    /// [`Listeners::hold`](super::rounds::Listeners::hold)).
    fn dispatch_held(
        &self,
        telling: &super::rounds::Telling<'_, dyn LeaderElectionAware>,
        events: &[ElectionEventType],
    ) {
        crate::metrics::metric!(leader_change(
            "election",
            self.engine.path(),
            events.contains(&ElectionEventType::ElectedComplete),
            events.contains(&ElectionEventType::LeadershipLost)
        ));
        self.listeners
            .tell_held(telling, events, |l, e| l.on_election_event(e));
    }

    fn listed(&self, generation: u64, placed: Placed<Self>) {
        self.dispatch(&[ElectionEventType::DetermineComplete]);
        let Some(ahead) = placed.ahead.clone() else {
            // Watch our own offer: its deletion, and the connection events.
            return placed.watch_own(generation, Self::elected, Self::round);
        };
        hook!(self.hook, ElectionStep::Watching, &ahead);
        // The second ahead first, in the same round trip (see the type's
        // docs: the succession without a listing).
        placed.watch_second(generation);
        if placed.ahead_armed {
            // Watched for an earlier listing, not fired since.
            return self.ready(generation, ahead);
        }
        // Java's `becomeReady`: READY_START only once the offer ahead was
        // found (with `getData`, not Java's `exists`: see the type's docs).
        let (zk, me) = (placed.zk, placed.me);
        zk.get_data_async(
            &ahead.clone(),
            Some(self.engine.watcher()),
            move |r| match r {
                Ok(_) => me.ready(generation, ahead),
                // Gone before the watch: determine again (as Java does).
                Err(e) if e.is(ZkError::NoNode) => me.round(generation),
                Err(e) => me.engine.request_failed(generation, &e, Self::round),
            },
        );
    }

    /// Sets the watch on the offer ahead, `path`, again after a write spent
    /// it: its deletion must still be heard (the leader's own offer:
    /// [`RoundEngine::watch_own`]).
    fn watch_again(&self, generation: u64, path: String) {
        self.engine.watch_ahead(generation, path, |_, _| {});
    }

    /// The candidate is first: elected, and told so in the same step under
    /// the listeners' telling. A `stop` from another thread that took the
    /// offer first is found here (nothing told); one after it tells its
    /// `StopStart` after `ElectedComplete` (its telling waits). Before, the
    /// events were told after the decision, unordered with a stop's: a
    /// listener could hear `StopComplete` then `ElectedComplete`, and
    /// believe a stopped candidate led.
    fn elected(&self, generation: u64) {
        let telling = self.listeners.hold();
        let offer = {
            let mut st = self.engine.state();
            if st.generation != generation
                || st.failed.is_some()
                || st.recipe.state != ElectionState::Determine
            {
                return;
            }
            st.recipe.state = ElectionState::Elected;
            st.in_doubt = false;
            st.recipe.ahead = None;
            st.node.clone().unwrap_or_default()
        };
        hook!(self.hook, ElectionStep::Elected, &offer);
        info!("elected leader of {}", self.engine.path());
        self.dispatch_held(
            &telling,
            &[
                ElectionEventType::ElectedStart,
                ElectionEventType::ElectedComplete,
            ],
        );
        drop(telling);
        // After the events: `start` returns with them told.
        self.engine.round_done(generation);
    }

    /// The candidate is behind `ahead`, watched: ready, told in the same
    /// step (as [`elected`](Self::elected)).
    fn ready(&self, generation: u64, ahead: String) {
        let telling = self.listeners.hold();
        {
            let mut st = self.engine.state();
            if st.generation != generation
                || st.failed.is_some()
                || st.recipe.state != ElectionState::Determine
            {
                return;
            }
            st.recipe.state = ElectionState::Ready;
            st.recipe.ahead = Some(ahead.clone());
        }
        self.engine.ahead_watched(generation, &ahead);
        self.dispatch_held(
            &telling,
            &[
                ElectionEventType::ReadyStart,
                ElectionEventType::ReadyComplete,
            ],
        );
        drop(telling);
        self.engine.round_done(generation);
    }
}

/// Offers ordered as Java's `LeaderOffer.IdComparator`: by the number after
/// `n_`; other children are ignored.
fn sorted_offers(children: &[String]) -> Vec<&String> {
    let mut v: Vec<(i64, &String)> = children
        .iter()
        .filter(|c| c.starts_with("n_"))
        .filter_map(|c| number_after_last(c, '_').map(|s| (s, c)))
        .collect();
    v.sort();
    v.into_iter().map(|(_, c)| c).collect()
}

impl LeaderElectionSupport {
    /// Java's `LeaderElectionSupport` with `setZooKeeper`, `setRootNodeName`
    /// and `setHostName`: a candidate on `root` (created with parents at
    /// `start`) announcing `host_name`.
    ///
    /// # Errors
    /// `BadArguments` for an invalid `root`.
    pub fn new(zkw: &ZooKeeperWatcher, root: &str, host_name: &str) -> Result<Self> {
        let state = CandidateRound {
            state: ElectionState::Stop,
            ahead: None,
        };
        let rounds = RoundHandle::new(zkw, root, state, |engine| Candidacy {
            engine,
            listeners: Listeners::default(),
            hook: Hook::default(),
        })?;
        Ok(LeaderElectionSupport {
            rounds,
            host_name: host_name.to_string(),
        })
    }

    /// Java's `addListener`.
    pub fn add_listener(&self, listener: impl LeaderElectionAware + 'static) {
        self.rounds.core.listeners.add(Arc::new(listener));
    }

    /// Calls `hook` at each [`ElectionStep`] (feature `testing`); it runs on
    /// the thread that does the step (the event thread after a wake-up).
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_step_hook(self, hook: impl Fn(ElectionStep, &str) + Send + Sync + 'static) -> Self {
        self.rounds.core.hook.set(hook);
        self
    }

    /// Java's `getRootNodeName()`.
    pub fn root_node_name(&self) -> &str {
        self.rounds.path()
    }

    /// Java's `getHostName()`.
    pub fn host_name(&self) -> &str {
        &self.host_name
    }

    /// Java's `getState()`-like view of the candidate's state.
    pub fn state(&self) -> ElectionState {
        self.rounds.engine().state().recipe.state
    }

    /// This candidate's offer node, once made.
    pub fn offer_node(&self) -> Option<String> {
        self.rounds.node()
    }

    /// zklock: whether this candidate leads now: elected, connection not in
    /// doubt, its session alive (not replaced by a renewed one). The name
    /// every leadership recipe uses (Curator's `hasLeadership`).
    pub fn has_leadership(&self) -> bool {
        self.rounds.holds(|c| c.state == ElectionState::Elected)
    }

    /// The former name of [`has_leadership`](Self::has_leadership).
    #[deprecated(note = "use has_leadership, the name every leadership recipe uses")]
    pub fn is_leader(&self) -> bool {
        self.has_leadership()
    }

    /// zklock: whether the leader's connection dropped and its leadership is
    /// not confirmed since (`LeadershipInDoubt` told, `LeadershipRestored`
    /// not yet): it does not lead meanwhile.
    pub fn is_in_doubt(&self) -> bool {
        self.rounds.is_in_doubt()
    }

    /// Java's `start()`: makes the offer and determines this candidate's place
    /// (elected, or ready behind the offer ahead). Returns once that is known;
    /// later changes arrive as events.
    ///
    /// The candidate belongs to the session its offer was made in: when that
    /// session ends (also when session renewal opens a new one) it fails with
    /// `SessionExpired` and never goes on in the new session; `stop` then
    /// `start` enters the new session as a new candidate.
    ///
    /// One candidate makes one offer: a `start` while another `start` of the
    /// same instance is under way (or the candidate is in the election)
    /// refuses with `BadArguments` and makes nothing (Java's `start` is
    /// `synchronized` and would make a second offer, queued behind the
    /// first). After `Failed`, `start` removes what is left of the failed
    /// attempt and starts over.
    ///
    /// A `start` that fails leaves no offer: when it gave up with its
    /// create's outcome unknown (a lost reply, then every lookup failing on
    /// the connection), the offer the server may have made is found and
    /// removed once the connection is back.
    ///
    /// A [`stop`](Self::stop) from another thread during `start` leaves the
    /// candidate stopped (it may `start` again) with no offer left, and its
    /// `StopStart`/`StopComplete` are the listeners' last events: each step of
    /// the start is decided and told in one step, so a stop is told after
    /// it, or finds it and the start tells nothing more. `start` then returns
    /// `Closed` when the stop came before the offer was bound, and `Ok(())`
    /// when it came later (the round it ended was the start's).
    ///
    /// # Errors
    /// `SessionExpired`/`Closed`; `NoNode` when the offer was deleted under the
    /// candidate; ZooKeeper errors (after `FAILED` is told, as Java's
    /// `becomeFailed`).
    pub fn start(&self) -> Result<()> {
        let c = &self.rounds.core;
        if self.state() == ElectionState::Failed {
            // The failed attempt's offer (if any survived) goes first.
            if let Some(taken) = self.take() {
                let _ = taken.withdraw(&self.rounds.zkw);
            }
        }
        // One step under the engine's lock: the check, the state that makes a
        // second `start` refuse, and the generation a `stop` from another
        // thread then bumps (so `bind` sees it).
        let telling = c.listeners.hold();
        let generation = {
            let mut st = c.engine.state();
            if st.node.is_some() || st.recipe.state != ElectionState::Stop {
                return Err(Error::BadArguments(format!(
                    "election on {} already started ({:?})",
                    self.root_node_name(),
                    st.recipe.state
                )));
            }
            st.recipe.state = ElectionState::Start;
            st.generation
        };
        c.dispatch_held(&telling, &[ElectionEventType::Start]);
        drop(telling);
        // Each later step of the start's own state, and its events, only
        // while no `stop` came (it bumped the generation and set `Stop`: a
        // stopped candidate stays stopped, and may start again). Decided and
        // told under the telling, so a stop's events come after them.
        let step = |state: ElectionState, events: &[ElectionEventType]| {
            let telling = c.listeners.hold();
            let current = {
                let mut st = c.engine.state();
                let current = st.generation == generation;
                if current {
                    st.recipe.state = state;
                }
                current
            };
            if current {
                c.dispatch_held(&telling, events);
            }
            current
        };
        if !step(ElectionState::Offer, &[ElectionEventType::OfferStart]) {
            return Err(Error::Closed);
        }
        let (node, session) = match self.make_offer() {
            Ok(made) => made,
            Err(e) => {
                step(ElectionState::Failed, &[ElectionEventType::Failed]);
                return Err(e);
            }
        };
        // Stopped meanwhile: nothing told, and `bind` refuses the offer
        // (removing it) with `Closed`.
        step(ElectionState::Offer, &[ElectionEventType::OfferComplete]);
        hook!(c.hook, ElectionStep::OfferMade, &node);
        c.engine.bind(node, session, generation)?;
        c.engine.run_round().map(|_| ())
    }

    /// Java's `makeOffer`, retried on connection loss. A create whose reply
    /// was lost finds its own offer again (after a `sync`) as the one of this
    /// session made after the create was sent, offers of one session on one
    /// root being made one at a time in the process (Java's layout has no room
    /// for a tag): never a sibling candidate's offer of the same session.
    fn make_offer(&self) -> Result<(String, i64)> {
        Offer {
            root: self.root_node_name(),
            name: "n_".to_string(),
            data: self.host_name.as_bytes(),
            mark: OfferMark::Serial,
            parents: Parents::Persistent,
        }
        .make(&self.rounds.zkw)
    }

    /// Java's `stop()`: withdraws the offer (the next candidate is notified).
    ///
    /// # Errors
    /// ZooKeeper errors after retries (the offer is then removed in the
    /// background); none when the session already ended.
    pub fn stop(&self) -> Result<()> {
        let taken = self.take();
        self.rounds.core.dispatch(&[ElectionEventType::StopStart]);
        let result = taken.map_or(Ok(()), |taken| self.rounds.step_down(taken));
        self.rounds
            .core
            .dispatch(&[ElectionEventType::StopComplete]);
        result
    }

    /// Forgets the offer (a new generation: answers of earlier rounds are
    /// ignored); the state becomes `Stop`.
    fn take(&self) -> Option<Taken> {
        self.rounds.engine().take(|c| {
            c.state = ElectionState::Stop;
            c.ahead = None;
        })
    }

    /// Java's `getLeaderHostName()`: the lowest offer's host name, `None`
    /// without offers.
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn get_leader_host_name(&self) -> Result<Option<String>> {
        get_leader_host_name(&self.rounds.zkw, self.root_node_name())
    }

    /// Curator's `LeaderLatch.getParticipants()`, kazoo's
    /// `Election.contenders()`: every candidate of the election, in offer order
    /// (the leader first), read from the offers (`1 + N` requests).
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        participants(&self.rounds.zkw, self.root_node_name())
    }

    /// Curator's `LeaderLatch.getLeader()`: the leading candidate (the lowest
    /// offer), `None` without candidates.
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants()?.into_iter().next())
    }

    /// Curator's `LeaderLatch.await(timeout)`: waits until this candidate
    /// leads ([`has_leadership`](Self::has_leadership)); `Ok(false)` when `timeout`
    /// passed first. Woken by the election's events, never polling.
    ///
    /// # Errors
    /// `Closed` when the candidate is not started or is stopped meanwhile
    /// (Curator: `EOFException`); the candidacy's failure (`SessionExpired`
    /// when its session ended, also with session renewal; `NoNode` when its
    /// offer was deleted).
    #[must_use = "`Ok(false)` means this candidate does not lead"]
    pub fn await_leadership(&self, timeout: Duration) -> Result<bool> {
        self.rounds.await_leadership(timeout)
    }
}

pub use super::node::Participant;

/// [`LeaderElectionSupport::participants`] without a candidate: the
/// candidates on `root` in offer order, the leader first (none when `root`
/// does not exist). An offer withdrawn while being read is left out.
///
/// # Errors
/// ZooKeeper errors after retries.
pub fn participants(zkw: &ZooKeeperWatcher, root: &str) -> Result<Vec<Participant>> {
    read_participants(zkw.recoverable_zookeeper(), root, sorted_offers)
}

/// [`LeaderElectionSupport::get_leader_host_name`] without a candidate: the
/// host name in `root`'s lowest `n_` offer.
///
/// # Errors
/// ZooKeeper errors after retries.
pub fn get_leader_host_name(zkw: &ZooKeeperWatcher, root: &str) -> Result<Option<String>> {
    let rzk = zkw.recoverable_zookeeper();
    for _ in 0..10 {
        let children = match rzk.get_children(root, false) {
            Ok(c) => c,
            Err(e) if e.is(ZkError::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(first) = sorted_offers(&children).first().map(|s| s.to_string()) else {
            return Ok(None);
        };
        match rzk.get_raw_data(&zkutil::join_znode(root, &first)) {
            Ok((data, _)) => return Ok(Some(String::from_utf8_lossy(&data).into_owned())),
            Err(e) if e.is(ZkError::NoNode) => continue, // the leader just left
            Err(e) => return Err(e),
        }
    }
    Err(Error::zk(ZkError::OperationTimeout, root))
}

impl Drop for LeaderElectionSupport {
    fn drop(&mut self) {
        if let Some(taken) = self.take() {
            taken.withdraw_in_background(&self.rounds.zkw);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_ordered_by_id_like_java() {
        let c: Vec<String> = ["n_0000000010", "n_0000000002", "x", "n_0000000003"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let s: Vec<&str> = sorted_offers(&c).iter().map(|s| s.as_str()).collect();
        assert_eq!(s, ["n_0000000002", "n_0000000003", "n_0000000010"]);
    }
}
