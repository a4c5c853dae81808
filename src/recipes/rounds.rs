//! The asynchronous rounds ZooKeeper's election, Curator's leader latch and
//! ZooKeeper's WriteLock share: the candidate engine.
//!
//! Both recipes own one sequential node and, after their first round (made by
//! the caller's thread), go on in rounds of asynchronous calls answered on the
//! event thread: list the directory, watch the node ahead (or their own node
//! once first), and start again when a watch fires. A [`RoundEngine`] holds
//! what every such recipe needs around that:
//!
//! - the **generation** of the attempt: bumped when the caller withdraws the
//!   node (`unlock`, `stop`, drop), so answers of earlier rounds are ignored;
//! - the count of **rounds done**, which a caller waiting for its first round
//!   waits on (woken by the round's end, by a failure, by the session's end:
//!   no periodic recheck);
//! - the **caller's waits** ([`run_round`](RoundEngine::run_round),
//!   [`wait_until`](RoundEngine::wait_until)) on the wait engine's
//!   [`Wake`]: bound to the node's session by construction. The session's
//!   end wakes them directly, from the client thread that ends it
//!   (`wake_at_end`, as every other wait), and each look at the state also
//!   looks at that session: a wait ends with `SessionExpired` whatever the
//!   order of the events, even when the hook or the watcher that fails the
//!   attempt on the event thread comes late, or never;
//! - the **session the node belongs to**: a round never continues in another
//!   session (with session renewal, a reconnect after the expiry is a new
//!   session): it fails with `SessionExpired` instead;
//! - the failure (`SessionExpired`, `AuthFailed`, `NoNode` when the node was
//!   deleted under the recipe), told once;
//! - the per-watch watcher and the session hook, both holding the recipe
//!   weakly, so dropping the recipe's handle ends everything.
//! - for the leadership recipes (election, latch), the one **in-doubt**
//!   state: a leader ([`RoundRecipe::leads`]) whose connection drops is in
//!   doubt at once, and after a reconnect within its session leads again
//!   only once [`confirm_first`](RoundEngine::confirm_first) found its node
//!   still there and first; their offers are made by
//!   [`candidate::Offer`](super::candidate::Offer).
//!
//! # Succession without a listing
//!
//! zklock differs here from ZooKeeper's and Curator's recipes, which list
//! the directory again whenever the node they watch is deleted. On the
//! engine, a candidate whose node ahead was **first** in the listing that
//! placed it becomes first when that node's `NodeDeleted` arrives, without a
//! listing (no request from the successor between the notification and its
//! election), when all of these hold:
//!
//! - **Nothing can appear ahead later.** ZooKeeper numbers the sequential
//!   children of a parent from the parent's `cversion`, which only grows: a
//!   node made after the listing sorts after the candidate's in the
//!   recipe's order ([`RoundRecipe::sorted`], by sequence). So once the
//!   node ahead was first in a listing that held the candidate's node, its
//!   deletion leaves nothing ahead. (A node made with a forged sequence by a
//!   plain, non-sequential create is not a participant the recipes know.)
//! - **The candidate's node still exists at the deletion.** From its first
//!   round on, the candidate keeps an `exists` watch on its own node, sent
//!   with the listing (no round trip of its own, see
//!   [`RoundEngine::list_placed`]). ZooKeeper delivers a session's
//!   notifications and replies in zxid order on one connection: that watch
//!   was answered before the deletion's notification came and has not fired
//!   since (a deletion, a write or a removal of the session's watches on the
//!   node spends it, and the engine notes it), so the node existed at the
//!   deletion's zxid, and a deletion of it would have been heard first.
//! - **No connection change since both watches were armed.** On a reconnect
//!   ZooKeeper's `SetWatches` delivers the events missed meanwhile by watch
//!   type (data, then exist, then child watches), not in zxid order: the
//!   own node's deletion could come after its predecessor's. Every
//!   connection event the recipe's watcher hears (`Disconnected`,
//!   `SyncConnected`, ...) counts, and both watches must have been armed in
//!   the current connection; otherwise the round lists the directory as
//!   before (with the watch on the own node again), and a later succession
//!   may be decided without a listing again.
//!
//! The candidate then becomes first exactly as when a listing finds it first
//! (same state changes, listeners and in-doubt rules); its own node's watch
//! stays armed, as a leader's is. A node ahead that was not first (a
//! candidate in the middle leaving) starts a round with a listing, as
//! before.
//!
//! ## The second ahead: a chain of successions
//!
//! In a chain (c0 leads, c1, c2, ... wait, each steps down in turn) only
//! c1's predecessor was first in its listing: c2 listed [c0, c1, c2], and
//! without more, c1's deletion would make c2 list (a round trip on the
//! critical path) since it cannot know c0 is gone. So a candidate behind
//! at least two nodes also watches the node just ahead of its predecessor,
//! the **second ahead** (`getData` with the recipe's watcher, sent right
//! before the watch on the predecessor: ZooKeeper answers them in one round
//! trip, [`Placed::watch_second`]). Its events are the engine's alone:
//!
//! - its `NodeDeleted`, when it was first in the listing and its watch was
//!   armed in the current connection and had not fired: the predecessor is
//!   first now (nothing can appear ahead later, and the one node that was
//!   ahead of it is gone). No request: the engine notes it, and the
//!   predecessor's deletion is then decided without a listing under the
//!   rules above (both watches armed in the current connection, not fired,
//!   checked then);
//! - its `NodeDeleted` otherwise (it was not first, or a connection change
//!   came between): a round with a listing, off the critical path (nobody
//!   waits for this candidate). The listing places the node anew; a watch
//!   still armed in the current connection on a node that stays ahead (the
//!   predecessor, or the old second ahead now just ahead) is not set again,
//!   and the new second ahead, if any, is watched;
//! - a write on it, or a removal of the session's watches there
//!   (`NodeDataChanged`, `DataWatchRemoved`), spends the watch: the engine
//!   forgets it rather than set it again (a request for a case no recipe
//!   makes: their nodes are not written), and the predecessor's deletion
//!   then starts a round with a listing, as without the second watch. So
//!   does a `getData` on it that fails (gone already, or the connection
//!   lost).
//!
//! **Notifications per succession: 2, not a herd.** A deletion now notifies
//! the successor (watching it just ahead) and the candidate two behind it
//! (watching it second ahead): a bounded fan-out of two whatever the number
//! of candidates, where a herd (every candidate watching the leader, or the
//! directory) grows with it. The second notification buys the successor's
//! shortcut at the next step: in the chain, c2 hears c0's deletion and knows
//! c1 is first, so c1's deletion elects it with no request. Its listing, when
//! the second ahead was not first (c3 hears c1 leave, but c0 was first in
//! its listing), is one request off the critical path, made while the
//! successor leads, and it leaves c3 knowing c2 first: every succession of
//! the chain is decided without a listing.
//!
//! **Stepping down.** [`RoundHandle::step_down`] removes only the watch on
//! the own node. The watches a candidate set on the nodes ahead are left:
//! a removal would be a request on the step-down's path, and a watch on a
//! deleted node is gone already at the server. One left on a live node
//! (a candidate that stops while behind others) fires later, once, into a
//! generation that ended: the per-watch watcher holds the recipe weakly,
//! and the engine ignores events when the attempt has no node or a
//! stale generation (a new attempt's round then at most lists once more).
//! The client holds that watch until it fires or the session ends, as it
//! held the predecessor's watch before.
//!
//! What the recipes on the engine did alike around it is here too, once: the
//! caller's handle ([`RoundHandle`]: set-up, `Debug`, whether it leads or
//! owns now, in doubt, the wait for leadership, stepping down, the session
//! hook ended on drop), a listing placed ([`RoundEngine::placed`]), the watch
//! on the own node ([`watch_own_node`]) and the listener traits
//! (`listener_trait!`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use log::debug;
use parking_lot::{Mutex, MutexGuard, ReentrantMutex};

use crate::client::{State, ZooKeeper};
use crate::deadline::Deadline;
use crate::engine::held::{self, Held};
use crate::engine::owned::{Guard, Removal};
use crate::engine::wait::Wake;
use crate::error::{Error, Result, ZkError};
use crate::types::{EventType, KeeperState, Stat, WatchedEvent, Watcher};
use crate::watcher::{SessionHook, WeakZooKeeperWatcher, ZooKeeperWatcher};

/// What continues a round after its failed request (see [`Resume`]).
type Again<R> = Box<dyn FnOnce(&R, u64) + Send>;

/// A recipe made of asynchronous rounds on a [`RoundEngine`].
pub(crate) trait RoundRecipe: Send + Sync + Sized + 'static {
    /// The recipe's own state, kept under the engine's lock.
    type State: Send + std::fmt::Debug;

    /// The recipe's engine.
    fn engine(&self) -> &RoundEngine<Self>;

    /// Starts a round of `generation` (the directory is listed again).
    fn round(&self, generation: u64);

    /// A watch of the attempt `generation` fired on a node.
    fn node_event(&self, generation: u64, event: WatchedEvent);

    /// Whether the recipe leads (elected, lowest) in `state`: the engine puts
    /// a leader in doubt when its connection drops, and re-checks it after
    /// the reconnect.
    fn leads(_state: &Self::State) -> bool {
        false
    }

    /// The directory's children in the recipe's order, the leader first
    /// (the re-check after a reconnect requires the node to be first).
    fn sorted(children: &[String]) -> Vec<&String> {
        children.iter().collect()
    }

    /// Tells the recipe's listeners that the leader is in doubt (the engine
    /// set [`RoundState::in_doubt`] and woke the waits; not under its lock).
    fn tell_in_doubt(&self) {}

    /// The re-check after a reconnect found the node still there and first:
    /// the recipe leads again (it clears [`RoundState::in_doubt`] and tells
    /// its listeners).
    fn restored(&self, _generation: u64) {}

    /// Marks the recipe's state failed (under the engine's lock); returns
    /// whether it led (owner, elected) until now.
    fn mark_failed(state: &mut Self::State) -> bool;

    /// Tells the recipe's listeners that the attempt failed (not under the
    /// engine's lock); `led` as returned by [`mark_failed`](Self::mark_failed).
    fn tell_failed(&self, led: bool, code: ZkError);
}

/// What a [`RoundEngine`] keeps under its lock.
#[derive(Debug)]
pub(crate) struct RoundState<S> {
    /// Bumped when the node is withdrawn: answers of earlier rounds are stale.
    pub(crate) generation: u64,
    /// Rounds that reached an outcome (led, waiting behind a node, failed).
    pub(crate) rounds: u64,
    /// The session the node was created in.
    pub(crate) session: i64,
    /// A handle pinned to that session while the node is bound: its end
    /// wakes and ends the caller's waits.
    client: Option<ZooKeeper>,
    /// The recipe's node (full path), once made.
    pub(crate) node: Option<String>,
    /// Connection changes the recipe's watcher was told (`Disconnected`,
    /// `SyncConnected`, ...): the connection a watch was armed in (see
    /// "Succession without a listing" in the module docs).
    connection: u64,
    /// An `exists` found the node and watches it ([`watch_own_node`]), in
    /// the [`connection`](Self::connection) given; `None` once that watch
    /// fired (a deletion, a write, a removal of the session's watches spend
    /// it). The watch to remove when stepping down
    /// ([`RoundHandle::step_down`]).
    own_watch: Option<u64>,
    /// The node just ahead (full path) in the last listing placed
    /// ([`RoundEngine::placed`]).
    ahead: Option<String>,
    /// [`ahead`](Self::ahead) is first in the recipe's order: it was in the
    /// listing, or the deletion of the node ahead of it, first there, made
    /// it so (see "Succession without a listing" in the module docs).
    ahead_first: bool,
    /// The connection the watch on [`ahead`](Self::ahead) was set in
    /// ([`RoundEngine::ahead_watched`]); `None` once it fired.
    ahead_watch: Option<u64>,
    /// The node just ahead of [`ahead`](Self::ahead) in the last listing
    /// placed (full path): the second ahead.
    second: Option<String>,
    /// [`second`](Self::second) was first in that listing.
    second_first: bool,
    /// The connection the watch on [`second`](Self::second) was set in
    /// ([`RoundEngine::second_watched`]); `None` once it fired.
    second_watch: Option<u64>,
    /// Set on the event thread while the recipe hears the deletion of
    /// [`ahead`](Self::ahead), first, with both watches armed in the
    /// current connection: the round it starts is decided without a listing
    /// ([`RoundEngine::list_placed`]).
    succession: bool,
    /// Why the attempt ended (session ended, node deleted, error): what the
    /// caller's waits return.
    pub(crate) failed: Option<Error>,
    /// The leader's connection dropped; its place is not confirmed since
    /// (the one in-doubt state of every recipe on the engine).
    pub(crate) in_doubt: bool,
    /// The recipe's own state.
    pub(crate) recipe: S,
}

/// The machinery of an asynchronous-round recipe (see the module docs).
pub(crate) struct RoundEngine<R: RoundRecipe> {
    path: String,
    zkw: WeakZooKeeperWatcher,
    state: Mutex<RoundState<R::State>>,
    /// Bumped at every change a caller may wait for (a round's end, a
    /// failure, a withdrawal, [`wake`](Self::wake)) and by the end of the
    /// node's session.
    changed: Arc<Wake>,
    /// The recipe's one per-watch watcher: the client registers it once per
    /// path however many rounds pass it.
    watcher: Arc<dyn Watcher>,
    /// Registered (weakly) with the session's hooks while the recipe lives.
    hook: Arc<dyn SessionHook>,
    recipe: Weak<R>,
}

struct RoundWatcher<R>(Weak<R>);

impl<R: RoundRecipe> Watcher for RoundWatcher<R> {
    fn process(&self, event: WatchedEvent) {
        let Some(recipe) = self.0.upgrade() else {
            return;
        };
        if event.event_type == EventType::None {
            // Every connection change, before it is acted on: a watch armed
            // earlier no longer orders its events with the next ones.
            recipe.engine().state().connection += 1;
            return match session_end(event.keeper_state) {
                Some(code) => recipe.engine().fail_current(code),
                None => recipe.engine().connection_event(event.keeper_state),
            };
        }
        let (generation, fired) = {
            let mut st = recipe.engine().state();
            if st.node.is_none() || st.failed.is_some() {
                return;
            }
            let fired = st.watch_fired(&event);
            st.succession = fired == Fired::Succession;
            (st.generation, fired)
        };
        match fired {
            Fired::Node | Fired::Succession => recipe.node_event(generation, event),
            // The second ahead's events are the engine's alone.
            Fired::Promoted | Fired::Forgotten => return,
            Fired::Relist => {
                debug!(
                    "{}: the node two ahead left, not known first; listing again",
                    recipe.engine().path
                );
                recipe.round(generation)
            }
        }
        // Heard by the round the event started, or by nobody.
        recipe.engine().state().succession = false;
    }
}

/// What a watch that fired means to the engine ([`RoundState::watch_fired`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fired {
    /// An event for the recipe ([`RoundRecipe::node_event`]).
    Node,
    /// The deletion of the node ahead, first, that leaves the attempt's node
    /// first without a listing: told to the recipe, whose round is decided
    /// without one.
    Succession,
    /// The deletion of the second ahead, first, with its watch armed in the
    /// current connection: the node ahead is first now; nothing to do.
    Promoted,
    /// The deletion of the second ahead otherwise: a round (with a listing)
    /// places the node anew.
    Relist,
    /// A write on the second ahead, or a removal of the session's watches
    /// there, spent its watch: forgotten (the node ahead's deletion then
    /// starts a round with a listing, as without it).
    Forgotten,
}

impl<S> RoundState<S> {
    /// Notes that a watch of the attempt fired with `event`: the own node's,
    /// the node ahead's and the second ahead's are spent. Says what the
    /// event means (see "Succession without a listing" in the module docs):
    /// [`Fired::Succession`] when it is the deletion of the node ahead, first,
    /// with both its watch and the own node's armed in the current
    /// connection and not fired; the second ahead's events are the engine's.
    fn watch_fired(&mut self, event: &WatchedEvent) -> Fired {
        let path = event.path.as_deref();
        let spends = matches!(
            event.event_type,
            EventType::NodeDeleted | EventType::NodeDataChanged | EventType::DataWatchRemoved
        );
        if !spends || path.is_none() {
            return Fired::Node;
        }
        let deleted = event.event_type == EventType::NodeDeleted;
        let now = Some(self.connection);
        if path == self.node.as_deref() {
            self.own_watch = None;
            return Fired::Node;
        }
        if path == self.ahead.as_deref() {
            let armed = self.ahead_watch.take();
            if !deleted {
                return Fired::Node;
            }
            let first = std::mem::take(&mut self.ahead_first);
            self.ahead = None;
            return match first && armed == now && self.own_watch == now {
                true => Fired::Succession,
                false => Fired::Node,
            };
        }
        if path != self.second.as_deref() {
            return Fired::Node;
        }
        let armed = self.second_watch.take();
        let first = std::mem::take(&mut self.second_first);
        self.second = None;
        if !deleted {
            return Fired::Forgotten;
        }
        if first && armed == now && self.ahead.is_some() {
            // Nothing can appear ahead later, and the one node ahead of the
            // node ahead is gone: that node is first.
            self.ahead_first = true;
            return Fired::Promoted;
        }
        Fired::Relist
    }
}

struct RoundHook<R>(Weak<R>);

impl<R: RoundRecipe> SessionHook for RoundHook<R> {
    fn session_event(&self, state: KeeperState) {
        if let (Some(code), Some(recipe)) = (session_end(state), self.0.upgrade()) {
            recipe.engine().fail_current(code);
        }
    }
}

/// The failure a session state ends an attempt with.
fn session_end(state: KeeperState) -> Option<ZkError> {
    match state {
        KeeperState::Expired | KeeperState::Closed => Some(ZkError::SessionExpired),
        KeeperState::AuthFailed => Some(ZkError::AuthFailed),
        _ => None,
    }
}

/// [`session_end`] for a client handle's state.
fn ended(state: State) -> Option<ZkError> {
    match state {
        State::Expired | State::Closed => Some(ZkError::SessionExpired),
        State::AuthFailed => Some(ZkError::AuthFailed),
        State::Connecting | State::Connected => None,
    }
}

impl<R: RoundRecipe> RoundEngine<R> {
    /// The engine of `recipe` (made with `Arc::new_cyclic`) on `path`.
    pub(crate) fn new(
        zkw: &ZooKeeperWatcher,
        path: &str,
        state: R::State,
        recipe: &Weak<R>,
    ) -> RoundEngine<R> {
        RoundEngine {
            path: path.to_string(),
            zkw: zkw.downgrade(),
            state: Mutex::new(RoundState {
                generation: 0,
                rounds: 0,
                session: 0,
                client: None,
                node: None,
                connection: 0,
                own_watch: None,
                ahead: None,
                ahead_first: false,
                ahead_watch: None,
                second: None,
                second_first: false,
                second_watch: None,
                succession: false,
                failed: None,
                in_doubt: false,
                recipe: state,
            }),
            changed: Arc::default(),
            watcher: Arc::new(RoundWatcher(recipe.clone())),
            hook: Arc::new(RoundHook(recipe.clone())),
            recipe: recipe.clone(),
        }
    }

    /// Subscribes to the session's end; the id to give
    /// [`unregister`](Self::unregister) when the recipe's handle drops.
    pub(crate) fn register(&self) -> Option<u64> {
        self.zkw.add_hook(Arc::downgrade(&self.hook))
    }

    /// Ends the subscription made by [`register`](Self::register).
    pub(crate) fn unregister(&self, id: Option<u64>) {
        if let Some(id) = id {
            self.zkw.remove_hook(id);
        }
    }

    /// The directory (or root) the recipe works in.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The engine's state.
    pub(crate) fn state(&self) -> MutexGuard<'_, RoundState<R::State>> {
        self.state.lock()
    }

    /// The recipe's per-watch watcher.
    pub(crate) fn watcher(&self) -> Arc<dyn Watcher> {
        self.watcher.clone()
    }

    /// The node of the attempt `generation` while it goes on, with the client
    /// and the recipe to continue it; `None` when the answer is stale (or the
    /// recipe gone). A session other than the node's fails the attempt with
    /// `SessionExpired` (session renewal): a round never continues there.
    pub(crate) fn proceed(&self, generation: u64) -> Option<(String, ZooKeeper, Arc<R>)> {
        let (zk, recipe) = (self.zkw.zookeeper()?, self.recipe.upgrade()?);
        let (node, session) = {
            let st = self.state();
            if st.generation != generation || st.failed.is_some() {
                return None;
            }
            (st.node.clone()?, st.session)
        };
        if zk.session_id() != session {
            self.fail(generation, ZkError::SessionExpired);
            return None;
        }
        Some((node, zk, recipe))
    }

    /// Lists the directory for the attempt `generation` (asynchronously,
    /// unless the answer would be stale); `then` gets the listing on the
    /// event thread.
    pub(crate) fn list(&self, generation: u64, then: fn(&R, u64, Result<Vec<String>>)) {
        let Some((_, zk, me)) = self.proceed(generation) else {
            return;
        };
        let before = zk.read_write_connection();
        let zk2 = zk.clone();
        zk.get_children_async(&self.path, None, move |r| {
            then(&me, generation, from_read_write(&zk2, before, r))
        });
    }

    /// The one in-doubt handling of the recipes on the engine: a leader whose
    /// connection drops is in doubt at once (before the server can expire
    /// its session and let another lead); after a reconnect within the
    /// session it leads again only once [`confirm_first`](Self::confirm_first)
    /// found its node still there and first.
    fn connection_event(&self, state: KeeperState) {
        let Some(recipe) = self.recipe.upgrade() else {
            return;
        };
        let mut st = self.state();
        let leads = st.failed.is_none() && st.node.is_some() && R::leads(&st.recipe);
        match state {
            KeeperState::Disconnected if leads && !st.in_doubt => {
                st.in_doubt = true;
                drop(st);
                self.changed.wake();
                log::warn!(
                    "leader of {}: connection lost, leadership in doubt",
                    self.path
                );
                recipe.tell_in_doubt();
            }
            KeeperState::SyncConnected if leads && st.in_doubt => {
                let generation = st.generation;
                drop(st);
                self.confirm_first(generation, R::sorted, R::restored);
            }
            _ => {}
        }
    }

    /// The re-check on every restore, before a leader is told it leads
    /// again: a `sync` (the reconnect may have landed on a follower that has
    /// not applied a deletion of the node yet), then the directory's listing,
    /// which must hold the node first in the order `sorted` puts the
    /// children in, then a watch on the node (`exists`); `confirmed` runs on
    /// the event thread when all hold. A node gone or no longer first fails
    /// the attempt with `NoNode`; a lost answer re-checks after the next
    /// reconnect. Asynchronous calls only: it runs on the event thread.
    pub(crate) fn confirm_first(
        &self,
        generation: u64,
        sorted: fn(&[String]) -> Vec<&String>,
        confirmed: fn(&R, u64),
    ) {
        let Some((_, zk, me)) = self.proceed(generation) else {
            return;
        };
        let again = move |recipe: &R, generation: u64| {
            recipe.engine().confirm_first(generation, sorted, confirmed)
        };
        zk.sync_async(&self.path, move |r| {
            if let Err(e) = r {
                return me.engine().request_failed(generation, &e, again);
            }
            let Some((node, zk, me)) = me.engine().proceed(generation) else {
                return;
            };
            let path = me.engine().path.clone();
            zk.get_children_async(&path, None, move |r| {
                let children = match r {
                    Ok(c) => c,
                    Err(e) => return me.engine().request_failed(generation, &e, again),
                };
                let mine = crate::zkutil::get_node_name(&node);
                if sorted(&children).first().map(|c| c.as_str()) != Some(mine) {
                    return me.engine().fail(generation, ZkError::NoNode);
                }
                let Some((node, zk, me)) = me.engine().proceed(generation) else {
                    return;
                };
                watch_own_node(&zk, &node, me, generation, confirmed, again);
            });
        });
    }

    /// Reacts to a failed request of the attempt `generation`: resumes with
    /// `again` after a connection loss, in the node's session (the engine's
    /// one held watch, [`held::failed`], re-runs `again`: the round's chain of
    /// requests); fails the attempt otherwise (see [`Resume`]).
    pub(crate) fn request_failed(
        &self,
        generation: u64,
        e: &Error,
        again: impl FnOnce(&R, u64) + Send + 'static,
    ) {
        let Some(recipe) = self.recipe.upgrade() else {
            return;
        };
        let session = self.state().session;
        let resume = Resume {
            recipe,
            generation,
            again: Mutex::new(Some(Box::new(again))),
        };
        held::failed(Arc::new(resume), session, e, ());
    }

    /// A round of `generation` reached its outcome: wakes the caller waiting
    /// for it.
    pub(crate) fn round_done(&self, generation: u64) {
        let mut st = self.state();
        if st.generation == generation {
            st.rounds += 1;
            self.changed.wake();
        }
    }

    /// Wakes the callers waiting in [`wait_until`](Self::wait_until) (the
    /// recipe's state changed outside a round's end).
    pub(crate) fn wake(&self) {
        self.changed.wake();
    }

    /// Ends the attempt `generation` with `code` (once): the waiting caller
    /// is woken, the recipe's listeners told.
    pub(crate) fn fail(&self, generation: u64, code: ZkError) {
        self.fail_with(generation, Error::zk(code, self.path.clone()));
    }

    /// [`fail`](Self::fail) with the error the caller's waits return.
    fn fail_with(&self, generation: u64, error: Error) {
        let code = error.code().unwrap_or(ZkError::SystemError);
        let led = {
            let mut st = self.state();
            if st.generation != generation || st.node.is_none() || st.failed.is_some() {
                return;
            }
            st.failed = Some(error);
            st.in_doubt = false;
            st.rounds += 1;
            self.changed.wake();
            R::mark_failed(&mut st.recipe)
        };
        log::warn!("{}: {code:?}", self.path);
        if let Some(recipe) = self.recipe.upgrade() {
            recipe.tell_failed(led, code);
        }
    }

    /// Ends the current attempt (the session ended).
    pub(crate) fn fail_current(&self, code: ZkError) {
        let generation = self.state().generation;
        self.fail(generation, code);
    }

    /// The current attempt's generation: read before the attempt's node is
    /// made, and given to [`bind`](Self::bind).
    pub(crate) fn generation(&self) -> u64 {
        self.state().generation
    }

    /// Records `node`, made in `session` for the attempt `generation`, as the
    /// attempt's node, with a handle pinned to that session (whose end ends
    /// the caller's waits). The attempt fails at once when that session has
    /// already ended or been replaced (its end, told before, found no node to
    /// fail).
    ///
    /// # Errors
    /// `Closed` when another thread withdrew the attempt (an `unlock`,
    /// `close` or `stop`) while its node was being made: that withdrawal
    /// found no node to remove, so the node is removed here (waited for as a
    /// withdrawal; in the background when that fails) and the attempt ends,
    /// as it would have had the withdrawal come a moment later. Before, the
    /// node was bound anyway and the attempt went on after its withdrawal
    /// (a `lock_blocking` that a `close` from another thread did not end).
    /// Likewise when the attempt has another node bound already: `bind`
    /// never replaces a bound node (that one would be orphaned, and the
    /// attempt queued behind it).
    pub(crate) fn bind(&self, node: String, session: i64, generation: u64) -> Result<()> {
        let client = self
            .zkw
            .zookeeper()
            .map(|zk| zk.pinned())
            .filter(|zk| zk.session_id() == session);
        let live = client
            .as_ref()
            .is_some_and(|zk| ended(zk.state()).is_none());
        {
            let mut st = self.state();
            // Withdrawn meanwhile, or (a caller's bug the recipes' entry
            // points rule out) another call of the same attempt bound its
            // node first: this node is never bound over the other.
            let replaces = st.node.as_ref().is_some_and(|bound| *bound != node);
            if st.generation != generation || replaces {
                drop(st);
                debug!("{node}: withdrawn while it was made (or another node bound); removing it");
                if let Some(zkw) = self.zkw.upgrade() {
                    let taken = Taken {
                        node,
                        session,
                        watched: false,
                    };
                    let _ = taken.withdraw(&zkw);
                }
                return Err(Error::Closed);
            }
            st.node = Some(node);
            st.session = session;
            st.client = client;
        }
        if !live {
            self.fail(generation, ZkError::SessionExpired);
        }
        Ok(())
    }

    /// Runs a round of the current attempt and waits for its outcome. Woken
    /// by the round's end, a failure or the session's end (no periodic
    /// recheck). Returns the generation and whether it is still current.
    ///
    /// # Errors
    /// The attempt's failure (`SessionExpired` when the session ended).
    pub(crate) fn run_round(&self) -> Result<MutexGuard<'_, RoundState<R::State>>> {
        let (generation, before) = {
            let st = self.state();
            (st.generation, st.rounds)
        };
        if let Some(recipe) = self.recipe.upgrade() {
            recipe.round(generation);
        }
        let done = |st: &RoundState<R::State>| st.rounds != before || st.generation != generation;
        match self.wait_for(Deadline::never(), done)? {
            Some(st) => Ok(st),
            // Never: a wait without a deadline ends only with `done` or an error.
            None => Err(Error::zk(ZkError::OperationTimeout, self.path.clone())),
        }
    }

    /// Waits until `done` holds, the attempt fails or `deadline` passes
    /// (then `Ok(false)`).
    ///
    /// # Errors
    /// The attempt's failure (`SessionExpired` when the node's session ended,
    /// also when nothing on the event thread told the engine); `Closed` when
    /// the node was withdrawn by another thread.
    pub(crate) fn wait_until(
        &self,
        deadline: Instant,
        done: impl Fn(&RoundState<R::State>) -> bool,
    ) -> Result<bool> {
        Ok(self.wait_for(Deadline::at(deadline), done)?.is_some())
    }

    /// The engine's one wait: until `done` holds (the state returned, still
    /// locked), the attempt fails (its error), the node is withdrawn without
    /// `done` (`Closed`) or `deadline` passes (`None`). Bound to the node's
    /// session: registered to be woken at its end (from the client thread
    /// that ends it), and each look at the state looks at that session too,
    /// failing the attempt when it has ended. So no order of the events (the
    /// hook told late or never, the expiry seen before the node was bound)
    /// lets the wait run on.
    fn wait_for(
        &self,
        deadline: Deadline,
        done: impl Fn(&RoundState<R::State>) -> bool,
    ) -> Result<Found<'_, R::State>> {
        let mut end: Option<(i64, crate::client::EndWake)> = None;
        // The engine's unbound wait (the recipe's state outlives sessions);
        // the end of the node's session wakes it through `wake_at_end`.
        let look = || -> Option<Result<Found<'_, R::State>>> {
            let st = self.state();
            if let Some(e) = &st.failed {
                return Some(Err(e.clone()));
            }
            if done(&st) {
                return Some(Ok(Some(st)));
            }
            let (Some(client), true) = (st.client.clone(), st.node.is_some()) else {
                return Some(Err(Error::Closed));
            };
            let generation = st.generation;
            drop(st);
            if end.as_ref().map(|(id, _)| *id) != Some(client.session_id()) {
                end = Some((client.session_id(), client.wake_at_end(&self.changed)));
            }
            if let Some(code) = ended(client.state()) {
                // Told to the recipe's listeners here if nothing on the event
                // thread did yet (`fail` tells once, and wakes this wait).
                self.fail(generation, code);
            }
            None
        };
        if let Some(found) = crate::engine::wait::wait_unbound(&self.changed, deadline, look) {
            return found;
        }
        // The deadline: one last look.
        let st = self.state();
        if let Some(e) = &st.failed {
            return Err(e.clone());
        }
        Ok(done(&st).then_some(st))
    }

    /// Forgets the node: a new generation (answers of earlier rounds are
    /// ignored, waiters woken), the recipe's own state reset by `reset`
    /// (under the engine's lock). Returns the node and its session, for the
    /// caller to withdraw.
    pub(crate) fn take(&self, reset: impl FnOnce(&mut R::State)) -> Option<Taken> {
        let mut st = self.state();
        st.generation += 1;
        st.failed = None;
        st.in_doubt = false;
        st.ahead = None;
        st.ahead_first = false;
        st.ahead_watch = None;
        st.second = None;
        st.second_first = false;
        st.second_watch = None;
        st.succession = false;
        let watched = st.own_watch.take().is_some();
        reset(&mut st.recipe);
        st.client = None;
        self.changed.wake();
        let node = st.node.take()?;
        Some(Taken {
            node,
            session: st.session,
            watched,
        })
    }
}

/// A round's failed request as the engine's held watch sees it: keyed by
/// the attempt's generation, armed again (its `again`, the round's chain of
/// requests) only in the node's session, never in a renewed one. Only a lost
/// connection is retried (the engine's rule); any other error fails the
/// attempt (`NoNode` as `NoNode`), a missing `READ` as it is.
struct Resume<R: RoundRecipe> {
    recipe: Arc<R>,
    generation: u64,
    again: Mutex<Option<Again<R>>>,
}

impl<R: RoundRecipe> Held for Resume<R> {
    type Context = ();

    fn watcher(&self) -> &WeakZooKeeperWatcher {
        &self.recipe.engine().zkw
    }

    fn path(&self) -> &str {
        &self.recipe.engine().path
    }

    /// The node's session (bound with it), not the request's.
    fn session(&self) -> Option<i64> {
        Some(self.recipe.engine().state().session)
    }

    fn resend(self: &Arc<Self>) {
        let again = self.again.lock().take();
        if let Some(again) = again {
            again(&self.recipe, self.generation);
        }
    }

    /// The directory (or a node the request needed) is gone.
    fn on_gone(&self, (): ()) {
        self.recipe.engine().fail(self.generation, ZkError::NoNode);
    }

    fn on_ended(&self, e: &Error, (): ()) {
        let engine = self.recipe.engine();
        if matches!(e, Error::NoReadPermission { .. }) {
            // The node and the missing READ (e.g. ZOOKEEPER-2590's on
            // `exists` of the node ahead) reach the caller as they are.
            engine.fail_with(self.generation, e.clone());
        } else {
            engine.fail(self.generation, e.code().unwrap_or(ZkError::SystemError));
        }
    }

    /// The node's session ended (or a renewed one replaced it) first.
    fn on_lost(&self) {
        let engine = self.recipe.engine();
        engine.fail(self.generation, ZkError::SessionExpired);
    }
}

/// What [`RoundEngine::wait_for`] found: the state, locked, when it is done.
type Found<'a, S> = Option<MutexGuard<'a, RoundState<S>>>;

/// The telling of a recipe's events, held ([`Listeners::hold`]).
pub(crate) type Telling<'a, L> = parking_lot::ReentrantMutexGuard<'a, RefCell<Queue<L>>>;

/// Events to tell, each with its call, in the order they were decided.
type Told<L> = Box<dyn FnOnce(&[Arc<L>]) + Send>;

/// The telling's own state: whether a thread is telling now, and the events
/// decided meanwhile on that thread (by a listener, inside an event).
pub(crate) struct Queue<L: ?Sized> {
    telling: bool,
    nested: VecDeque<Told<L>>,
}

/// A recipe's listeners (of the listener trait `L`), told events one at a
/// time, in order; none is called under the list's lock.
///
/// A listener may act on its recipe from inside an event (stop the
/// candidate it was told is elected, as HBase-style code does), on the
/// telling thread: the telling is reentrant, so that act never waits for
/// the telling its own thread holds, and the events it decides are told
/// once the events being told (the whole batch, `ElectedStart` and
/// `ElectedComplete`) have reached every listener, before anything else.
/// So every listener hears every event in the order decided (no listener
/// hears `ElectedComplete` after the stop's `StopComplete`), and the acting
/// listener's call returns before its own events are told. Other threads'
/// events wait their turn. A listener that panics ends the telling: the
/// events queued behind it are not told. (Not reentrant, the listener's
/// stop waited for the telling its thread held: the event thread stuck for
/// good, and every later event of the session with it.)
pub(crate) struct Listeners<L: ?Sized> {
    list: parking_lot::RwLock<Vec<Arc<L>>>,
    telling: ReentrantMutex<RefCell<Queue<L>>>,
}

impl<L: ?Sized> Default for Listeners<L> {
    fn default() -> Self {
        Listeners {
            list: parking_lot::RwLock::new(Vec::new()),
            telling: ReentrantMutex::new(RefCell::new(Queue {
                telling: false,
                nested: VecDeque::new(),
            })),
        }
    }
}

impl<L: ?Sized + Send + Sync + 'static> Listeners<L> {
    /// Adds `listener`.
    pub(crate) fn add(&self, listener: Arc<L>) {
        self.list.write().push(listener);
    }

    /// Tells every listener each of `events` (with `call`), in order.
    pub(crate) fn tell<E: Copy + Send + 'static>(
        &self,
        events: &[E],
        call: impl Fn(&L, E) + Send + 'static,
    ) {
        if events.is_empty() {
            return;
        }
        let one_at_a_time = self.hold();
        self.tell_held(&one_at_a_time, events, call);
    }

    /// Holds the telling for a recipe that decides a change and tells it in
    /// one step (taken before the engine's lock, never inside it): any
    /// other thread's events wait, so a change decided meanwhile by another
    /// thread (a `stop` taking the node) is told after this one, or this one
    /// finds it decided and tells nothing.
    pub(crate) fn hold(&self) -> Telling<'_, L> {
        self.telling.lock()
    }

    /// [`tell`](Self::tell) with the telling held already ([`hold`](Self::hold)).
    /// Inside an event being told on this thread, the events wait until that
    /// event has reached every listener (see the type's docs).
    pub(crate) fn tell_held<E: Copy + Send + 'static>(
        &self,
        held: &Telling<'_, L>,
        events: &[E],
        call: impl Fn(&L, E) + Send + 'static,
    ) {
        let events = events.to_vec();
        let told: Told<L> = Box::new(move |listeners: &[Arc<L>]| {
            for &e in &events {
                for l in listeners {
                    call(l, e);
                }
            }
        });
        {
            let mut queue = held.borrow_mut();
            if queue.telling {
                queue.nested.push_back(told);
                return;
            }
            queue.telling = true;
        }
        // Ends this telling, also when a listener panics (nothing is left
        // queued for a telling that will not come).
        struct Done<'g, 'a, L: ?Sized>(&'g Telling<'a, L>);
        impl<L: ?Sized> Drop for Done<'_, '_, L> {
            fn drop(&mut self) {
                let mut queue = self.0.borrow_mut();
                queue.telling = false;
                queue.nested.clear();
            }
        }
        let _done = Done(held);
        let mut next = Some(told);
        while let Some(told) = next {
            let listeners = self.list.read().clone();
            told(&listeners);
            next = held.borrow_mut().nested.pop_front();
        }
    }
}

/// A node taken from a [`RoundEngine`] to be withdrawn.
pub(crate) struct Taken {
    /// The node (full path).
    pub(crate) node: String,
    /// The session it was made in.
    pub(crate) session: i64,
    /// Whether the node was watched by the recipe (a leader's is).
    watched: bool,
}

impl Taken {
    /// Deletes the node (retried on connection loss); a node already gone, or
    /// whose session already ended, is no error.
    ///
    /// # Errors
    /// ZooKeeper errors after retries (the node is then removed in the
    /// background).
    pub(crate) fn withdraw(self, zkw: &ZooKeeperWatcher) -> Result<()> {
        let zk = zkw.zookeeper();
        if zkw.state().is_terminal() || zk.session_id() != self.session {
            return Ok(()); // ephemeral: gone with its session
        }
        let removal = Removal::new(self.node, Guard::Any);
        match removal.run(zkw.recoverable_zookeeper()) {
            Ok(_) => Ok(()),
            Err(e) if e.is_fatal() => Ok(()),
            Err(e) => {
                removal.in_background(&zkw.downgrade());
                Err(e)
            }
        }
    }

    /// Removes the node in the background (from `Drop`: never waits).
    pub(crate) fn withdraw_in_background(self, zkw: &ZooKeeperWatcher) {
        if zkw.zookeeper().session_id() == self.session {
            Removal::new(self.node, Guard::Any).in_background(&zkw.downgrade());
        }
    }
}

/// Makes a recipe's node with `attempt` (given the client and whether an
/// earlier try may have made it: a lost reply), retried on connection loss as
/// Java's `ProtocolSupport` does, by the watcher's [`RetryConfig`] (the
/// retries and pauses of `RecoverableZooKeeper`; Java's `ProtocolSupport`
/// has its own 10 retries of 0.5 s × n: zklock keeps one retry policy per
/// watcher). A pause between tries is a wait of the wait engine bound to the
/// session: its end (a `close()`, an expiry) ends the pause at once. Returns
/// the node and the session it was made in.
///
/// # Errors
/// `SessionExpired` when the session ended (or was renewed) on the way: the
/// recipe never carries on in another session; `Closed` when the watcher was
/// closed; ZooKeeper errors after retries.
///
/// [`RetryConfig`]: crate::retry::RetryConfig
pub(crate) fn create_in_session(
    zkw: &ZooKeeperWatcher,
    mut attempt: impl FnMut(&ZooKeeper, bool) -> Result<String>,
) -> Result<(String, i64)> {
    let call = crate::engine::call::CallSession::begin(zkw)?;
    let zk = zkw.zookeeper();
    let session = zk.session_id();
    let same = |zk: &ZooKeeper| session != 0 && zk.session_id() == session;
    let mut retries = crate::retry::RetryCounter::new(zkw.recoverable_zookeeper().retry_config());
    loop {
        match attempt(zk, retries.is_retry()) {
            Ok(node) if same(zk) => return Ok((node, session)),
            Ok(_) => return Err(Error::zk_code(ZkError::SessionExpired)),
            Err(e) if e.is_retryable() && retries.should_retry() => {
                let pause = retries.backoff_time_and_increment_attempts();
                debug!(
                    "making a node: {e}; retry {} of {} after {pause:?}",
                    retries.attempt_times(),
                    retries.max_attempts()
                );
                crate::engine::wait::pause(
                    &call.pinned(),
                    Deadline::after(pause),
                    "making a node",
                )?;
                zkw.check_session()?;
                if !same(zk) {
                    return Err(Error::zk_code(ZkError::SessionExpired));
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// A round's listing placed: the attempt's node just listed, with what
/// continues it (as [`RoundEngine::proceed`] gives them).
pub(crate) struct Placed<R> {
    /// The node just ahead (full path); `None` when the attempt's node is
    /// first.
    pub(crate) ahead: Option<String>,
    /// The attempt's node (full path).
    pub(crate) node: String,
    /// The client, in the node's session.
    pub(crate) zk: ZooKeeper,
    /// The recipe.
    pub(crate) me: Arc<R>,
    /// What is known of the watch on the own node (see
    /// [`RoundEngine::list_placed`]).
    own: Own,
    /// The watch on [`ahead`](Self::ahead) is armed in the current
    /// connection already (set for an earlier listing and not fired): the
    /// recipe does not set it again.
    pub(crate) ahead_armed: bool,
    /// The second ahead to watch ([`watch_second`](Self::watch_second)):
    /// `None` when there is none or its watch is armed already.
    second: Option<String>,
}

/// What a [`Placed`] knows of the watch on the attempt's own node.
enum Own {
    /// Nothing: [`Placed::watch_own`] sets it.
    Unasked,
    /// The answer to the `exists` sent with the listing.
    Answer(Result<Option<Stat>>),
    /// Armed in the current connection before the listing, and not fired
    /// since (or the place was decided without a listing): the node was
    /// there when the listing was made, and its deletion will be heard.
    Armed,
}

impl<R: RoundRecipe> Placed<R> {
    /// Watches the node placed (first) with [`watch_own_node`]; when that
    /// watch went with the listing, acts on its answer instead (the `exists`
    /// reached the server after the listing: the node was there then, in the
    /// node's session, and is watched); when it was armed already (see
    /// [`RoundEngine::list_placed`]), `present` runs at once.
    /// Watches the second ahead (the node just ahead of
    /// [`ahead`](Self::ahead)) with `getData` and the recipe's watcher,
    /// without waiting for the answer: the recipe sends its own watch on
    /// the node ahead right after, so both go in one round trip (see
    /// "Succession without a listing" in the module docs). Its absence, or
    /// a failure, leaves it unwatched (the node ahead's deletion then starts
    /// a round with a listing); `getData`, not `exists`, so that no watch is
    /// left on a node already gone.
    pub(crate) fn watch_second(&self, generation: u64) {
        let Some(second) = self.second.clone() else {
            return;
        };
        let me = self.me.clone();
        let watcher = me.engine().watcher();
        self.zk
            .get_data_async(&second.clone(), Some(watcher), move |r| {
                me.engine().second_watched(generation, &second, r.is_ok())
            });
    }

    pub(crate) fn watch_own(
        self,
        generation: u64,
        present: impl FnOnce(&R, u64) + Send + 'static,
        again: impl FnOnce(&R, u64) + Send + 'static,
    ) {
        match self.own {
            Own::Armed => present(&self.me, generation),
            Own::Answer(answer) => own_answer(answer, self.me, generation, present, again),
            Own::Unasked => {
                watch_own_node(&self.zk, &self.node, self.me, generation, present, again)
            }
        }
    }
}

/// A round's listing `r`, sent when the read-write connection was `before`:
/// as it came when a read-write server answered it (the same connection
/// now); else a lost answer (`ConnectionLoss`: the round resumes at the next
/// read-write connection). A read-only server's listing decides nothing: its
/// data may lag the quorum's, and it cannot tell whether the session lives
/// (read-only mode: a leadership is never had without proof).
fn from_read_write(
    zk: &ZooKeeper,
    before: Option<u64>,
    r: Result<Vec<String>>,
) -> Result<Vec<String>> {
    if !zk.can_be_read_only() {
        // Read-only mode off: every server that answers is read-write.
        return r;
    }
    match r {
        Ok(_) if before.is_none() || before != zk.read_write_connection() => {
            Err(Error::zk_code(ZkError::ConnectionLoss))
        }
        r => r,
    }
}

/// What [`RoundEngine::list_placed`] sent together answers, whichever comes
/// first waiting for the other.
#[derive(Default)]
struct Joined {
    listing: Option<Result<Vec<String>>>,
    own: Option<Result<Option<Stat>>>,
}

/// A round's listing and what continues it: the children, the attempt's node,
/// the client and the recipe (see [`RoundEngine::listed`]).
pub(crate) type Listed<R> = (Vec<String>, String, ZooKeeper, Arc<R>);

impl<R: RoundRecipe> RoundEngine<R> {
    /// The answer `r` to the listing of a round of the attempt `generation`,
    /// to act on (with [`proceed`](Self::proceed)'s node, client and
    /// recipe); `None` when there is nothing to do: a failed listing resumes
    /// the round after the reconnect (or fails the attempt), a stale answer
    /// is dropped.
    pub(crate) fn listed(&self, generation: u64, r: Result<Vec<String>>) -> Option<Listed<R>> {
        let children = match r {
            Ok(c) => c,
            Err(e) => {
                self.request_failed(generation, &e, R::round);
                return None;
            }
        };
        let (node, zk, me) = self.proceed(generation)?;
        Some((children, node, zk, me))
    }

    /// [`listed`](Self::listed), then the node's place in the recipe's order
    /// ([`RoundRecipe::sorted`]): first, or behind the node it names. A node
    /// missing from the listing (deleted under the recipe) fails the attempt
    /// with `NoNode`.
    pub(crate) fn placed(&self, generation: u64, r: Result<Vec<String>>) -> Option<Placed<R>> {
        let (children, node, zk, me) = self.listed(generation, r)?;
        let mine = crate::zkutil::get_node_name(&node);
        let sorted = R::sorted(&children);
        let Some(pos) = sorted.iter().position(|c| c.as_str() == mine) else {
            self.fail(generation, ZkError::NoNode);
            return None;
        };
        let at = |back: usize| {
            pos.checked_sub(back)
                .map(|p| crate::zkutil::join_znode(&self.path, sorted[p]))
        };
        let (ahead, second) = (at(1), at(2));
        let (mut ahead_armed, mut to_watch) = (false, None);
        {
            let mut st = self.state();
            if st.generation == generation {
                // A listing that places the node anew. A watch armed in the
                // current connection on a node that stays ahead (and not
                // fired) is kept; the others are set again by the recipe
                // (`ahead_watched`, `second_watched`).
                let now = Some(st.connection);
                let armed = |n: &Option<String>| {
                    n.is_some()
                        && ((*n == st.ahead && st.ahead_watch == now)
                            || (*n == st.second && st.second_watch == now))
                };
                let (a, s) = (armed(&ahead), armed(&second));
                st.ahead = ahead.clone();
                st.ahead_first = pos == 1;
                st.ahead_watch = if a { now } else { None };
                st.second = second.clone();
                st.second_first = pos == 2;
                st.second_watch = if s { now } else { None };
                ahead_armed = a;
                to_watch = if s { None } else { second };
            }
        }
        Some(Placed {
            ahead,
            node,
            zk,
            me,
            own: Own::Unasked,
            ahead_armed,
            second: to_watch,
        })
    }

    /// Watches `ahead`, the node just ahead of the attempt `generation`'s
    /// (`getData` with the recipe's watcher, on the event thread): once set,
    /// it is noted ([`ahead_watched`](Self::ahead_watched)) and `then` runs;
    /// a node already gone starts a new round; another failure resumes the
    /// round after the reconnect (or fails the attempt).
    pub(crate) fn watch_ahead(&self, generation: u64, ahead: String, then: fn(&R, u64)) {
        let Some((_, zk, me)) = self.proceed(generation) else {
            return;
        };
        let path = ahead.clone();
        zk.get_data_async(&path, Some(self.watcher()), move |r| match r {
            Ok(_) => {
                me.engine().ahead_watched(generation, &ahead);
                then(&me, generation)
            }
            Err(e) if e.is(ZkError::NoNode) => me.round(generation),
            Err(e) => me.engine().request_failed(generation, &e, R::round),
        });
    }

    /// The recipe's watch on the node ahead, `ahead` (full path), is set
    /// (its `getData` answered) for the attempt `generation`: when that node
    /// was first in the listing, its deletion may decide the next round
    /// without a listing (see
    /// "Succession without a listing" in the module docs).
    pub(crate) fn ahead_watched(&self, generation: u64, ahead: &str) {
        let mut st = self.state();
        if st.generation == generation && st.ahead.as_deref() == Some(ahead) {
            st.ahead_watch = Some(st.connection);
        }
    }

    /// The answer to [`Placed::watch_second`]'s `getData` on `second` for
    /// the attempt `generation`: `set` when the watch is set (the node was
    /// there), noted with the connection; otherwise the second ahead is
    /// forgotten (as after a write on it).
    fn second_watched(&self, generation: u64, second: &str, set: bool) {
        let mut st = self.state();
        if st.generation == generation && st.second.as_deref() == Some(second) {
            if set {
                st.second_watch = Some(st.connection);
            } else {
                st.second = None;
                st.second_first = false;
                st.second_watch = None;
            }
        }
    }

    /// Whether the watch on the attempt's own node is armed in the current
    /// connection.
    fn own_armed(&self, generation: u64) -> bool {
        let st = self.state();
        st.generation == generation && st.own_watch == Some(st.connection)
    }

    /// Lists the directory for the attempt `generation` (as
    /// [`list`](Self::list)); `then` gets the node's place
    /// ([`placed`](Self::placed)) on the event thread.
    ///
    /// Unless it is armed already in the current connection, the watch on
    /// the own node (`exists`, as [`watch_own_node`]) is sent with the
    /// listing, right after it, from the attempt's first round on:
    /// ZooKeeper answers a session's requests in order, so the node's
    /// confirmation costs no round trip of its own, and
    /// [`Placed::watch_own`] acts on that answer. A node behind another
    /// keeps that watch (its deletion fails the attempt with `NoNode`, as a
    /// leader's does; [`RoundHandle::step_down`] removes it): with the watch
    /// on the node ahead, it lets the round that node's deletion starts be
    /// decided without a listing when that node was first (`then` gets the
    /// node placed first at once, no request sent; see
    /// "Succession without a listing" in the module docs).
    pub(crate) fn list_placed(&self, generation: u64, then: fn(&R, u64, Placed<R>)) {
        let Some((node, zk, me)) = self.proceed(generation) else {
            return;
        };
        let succession = {
            let mut st = self.state();
            std::mem::take(&mut st.succession) && st.generation == generation
        };
        // Only a read-write server proves the node ahead is gone (read-only
        // mode): else a listing decides, which `from_read_write` checks.
        if succession && (!zk.can_be_read_only() || zk.read_write_connection().is_some()) {
            debug!("{}: the node ahead left; {node} is first", self.path);
            let placed = Placed {
                ahead: None,
                node,
                zk,
                me: me.clone(),
                own: Own::Armed,
                ahead_armed: false,
                second: None,
            };
            return then(&me, generation, placed);
        }
        let before = zk.read_write_connection();
        if self.own_armed(generation) {
            let zk2 = zk.clone();
            zk.get_children_async(&self.path, None, move |r| {
                let r = from_read_write(&zk2, before, r);
                let engine = me.engine();
                if let Some(mut placed) = engine.placed(generation, r) {
                    // Still armed: it did not fire while the listing was made.
                    if engine.own_armed(generation) {
                        placed.own = Own::Armed;
                    }
                    then(&me, generation, placed)
                }
            });
            return;
        }
        let joined: Arc<Mutex<Joined>> = Arc::default();
        let (me2, joined2) = (me.clone(), joined.clone());
        let zk2 = zk.clone();
        // The pair in one write: one round trip, however loaded the server.
        zk.in_one_write(|| {
            zk.get_children_async(&self.path, None, move |r| {
                let r = from_read_write(&zk2, before, r);
                let own = {
                    let mut j = joined.lock();
                    match j.own.take() {
                        Some(own) => own,
                        None => return j.listing = Some(r),
                    }
                };
                me.engine().joined(generation, r, own, then)
            });
            zk.exists_async(&node, Some(self.watcher()), move |r| {
                let listing = {
                    let mut j = joined2.lock();
                    match j.listing.take() {
                        Some(listing) => listing,
                        None => return j.own = Some(r),
                    }
                };
                me2.engine().joined(generation, listing, r, then)
            });
        });
    }

    /// Both answers of [`list_placed`](Self::list_placed)'s pair: the
    /// listing placed, carrying the own node's answer to `then`. A failed
    /// listing resumes the round (as [`placed`](Self::placed)); the own
    /// node's answer then goes unused.
    fn joined(
        &self,
        generation: u64,
        listing: Result<Vec<String>>,
        own: Result<Option<Stat>>,
        then: fn(&R, u64, Placed<R>),
    ) {
        if let Some(mut placed) = self.placed(generation, listing) {
            if matches!(own, Ok(Some(_))) {
                // Watched, whether first or not: step_down removes it.
                let mut st = self.state();
                if st.generation == generation {
                    st.own_watch = Some(st.connection);
                }
            }
            placed.own = Own::Answer(own);
            let me = placed.me.clone();
            then(&me, generation, placed)
        }
    }

    /// Watches the attempt's own node again ([`watch_own_node`]) after a
    /// write, or a removal of the session's watches, spent the watch: its
    /// deletion must still be heard.
    pub(crate) fn watch_own(&self, generation: u64, again: impl FnOnce(&R, u64) + Send + 'static) {
        if let Some((node, zk, me)) = self.proceed(generation) {
            watch_own_node(&zk, &node, me, generation, |_, _| {}, again);
        }
    }
}

/// Watches the attempt `generation`'s own `node` (`exists`, with the
/// recipe's per-watch watcher: its deletion and the connection's events are
/// heard): `present` runs when it is there (on the event thread), its
/// absence fails the attempt with `NoNode`, a failed request resumes with
/// `again` after the reconnect.
pub(crate) fn watch_own_node<R: RoundRecipe>(
    zk: &ZooKeeper,
    node: &str,
    me: Arc<R>,
    generation: u64,
    present: impl FnOnce(&R, u64) + Send + 'static,
    again: impl FnOnce(&R, u64) + Send + 'static,
) {
    let watcher = me.engine().watcher();
    zk.exists_async(node, Some(watcher), move |r| {
        own_answer(r, me, generation, present, again)
    });
}

/// [`watch_own_node`]'s answer `r` acted on.
fn own_answer<R: RoundRecipe>(
    r: Result<Option<Stat>>,
    me: Arc<R>,
    generation: u64,
    present: impl FnOnce(&R, u64),
    again: impl FnOnce(&R, u64) + Send + 'static,
) {
    match r {
        Ok(Some(_)) => {
            {
                let mut st = me.engine().state();
                if st.generation == generation {
                    st.own_watch = Some(st.connection);
                }
            }
            present(&me, generation)
        }
        Ok(None) => me.engine().fail(generation, ZkError::NoNode),
        Err(e) => me.engine().request_failed(generation, &e, again),
    }
}

/// The caller's side of a recipe on a [`RoundEngine`] (the election's, the
/// latch's and the `WriteLock`'s handles): the watcher, the part of the
/// recipe its rounds reach on the event thread, and the subscription to the
/// session's end, made by [`new`](Self::new) and ended when the handle drops
/// (after the recipe's own `Drop` has withdrawn its node).
pub(crate) struct RoundHandle<R: RoundRecipe> {
    /// The recipe's watcher.
    pub(crate) zkw: ZooKeeperWatcher,
    /// The part of the recipe its rounds reach.
    pub(crate) core: Arc<R>,
    hook_id: Option<u64>,
}

impl<R: RoundRecipe> RoundHandle<R> {
    /// A recipe on `path`: `make` builds the part its rounds reach around
    /// its engine (holding `state`), which is then subscribed to the
    /// session's end.
    ///
    /// # Errors
    /// `BadArguments` for an invalid `path`.
    pub(crate) fn new(
        zkw: &ZooKeeperWatcher,
        path: &str,
        state: R::State,
        make: impl FnOnce(RoundEngine<R>) -> R,
    ) -> Result<Self> {
        crate::path::validate(path)?;
        let core = Arc::new_cyclic(|me| make(RoundEngine::new(zkw, path, state, me)));
        let hook_id = core.engine().register();
        Ok(RoundHandle {
            zkw: zkw.clone(),
            core,
            hook_id,
        })
    }

    /// The recipe's engine.
    pub(crate) fn engine(&self) -> &RoundEngine<R> {
        self.core.engine()
    }

    /// The directory (or root) the recipe works in.
    pub(crate) fn path(&self) -> &str {
        self.engine().path()
    }

    /// The recipe's node (full path), once made.
    pub(crate) fn node(&self) -> Option<String> {
        self.engine().state().node.clone()
    }

    /// The recipe's `Debug`: `name { <path_field>: path, <extra>..., state }`.
    pub(crate) fn fmt_as(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        name: &str,
        path_field: &str,
        extra: &[(&str, &str)],
    ) -> std::fmt::Result {
        let mut d = f.debug_struct(name);
        d.field(path_field, &self.path());
        for (field, value) in extra {
            d.field(field, value);
        }
        d.field("state", &*self.engine().state()).finish()
    }

    /// Whether the recipe leads (or owns) now: `holds` of its state, its
    /// connection not in doubt, the attempt not failed, its session alive
    /// and still the client's (not replaced by a renewed one). A recipe that
    /// never leads in the engine's sense ([`RoundRecipe::leads`]) is never in
    /// doubt.
    pub(crate) fn holds(&self, holds: impl FnOnce(&R::State) -> bool) -> bool {
        let st = self.engine().state();
        holds(&st.recipe)
            && !st.in_doubt
            && st.failed.is_none()
            && !self.zkw.state().is_terminal()
            && self.zkw.zookeeper().session_id() == st.session
    }

    /// Whether the leader's connection dropped and its place is not
    /// confirmed since: it does not lead meanwhile.
    pub(crate) fn is_in_doubt(&self) -> bool {
        let st = self.engine().state();
        R::leads(&st.recipe) && st.in_doubt && st.failed.is_none()
    }

    /// Waits until the recipe leads ([`RoundRecipe::leads`], not in doubt);
    /// `Ok(false)` when `timeout` passed first (a timeout too long for the
    /// clock waits a century). Woken by the engine, never polling.
    ///
    /// # Errors
    /// As [`RoundEngine::wait_until`].
    pub(crate) fn await_leadership(&self, timeout: Duration) -> Result<bool> {
        let now = Instant::now();
        let deadline = now
            .checked_add(timeout)
            .unwrap_or(now + Duration::from_secs(100 * 365 * 86_400));
        self.engine()
            .wait_until(deadline, |st| R::leads(&st.recipe) && !st.in_doubt)
    }

    /// Withdraws `taken` ([`Taken::withdraw`]). A leader watches its own
    /// node (so does a candidate behind others, from its first round on, see
    /// [`RoundEngine::list_placed`]): that watch, when armed and not fired,
    /// is removed first (a request,
    /// no notification), which leaves two notifications per succession, the
    /// successor's and the second ahead's of the candidate behind it (see
    /// "The second ahead" in the module docs: the watches on other nodes
    /// are left, harmless). The removal is sent without waiting for its answer, the
    /// delete right after it: ZooKeeper answers a session's requests in
    /// order, so the watch is gone at the server before the delete, at no
    /// round trip of its own: both go in the delete's write
    /// ([`ZooKeeper::in_one_write`]).
    ///
    /// # Errors
    /// As [`Taken::withdraw`].
    pub(crate) fn step_down(&self, taken: Taken) -> Result<()> {
        let zk = self.zkw.zookeeper();
        zk.in_one_write(|| {
            if taken.watched && zk.session_id() == taken.session {
                zk.remove_watches_async(&taken.node, crate::types::WatcherType::Data, |_| {});
            }
            taken.withdraw(&self.zkw)
        })
    }
}

impl<R: RoundRecipe> Drop for RoundHandle<R> {
    fn drop(&mut self) {
        self.core.engine().unregister(self.hook_id);
    }
}

/// Declares a recipe's listener trait `$listener` (`Send + Sync`, its one
/// method `$method` told an `$event`), with the docs given, and implements it
/// for every closure `Fn($event)`.
macro_rules! listener_trait {
    (
        $(#[$doc:meta])*
        pub trait $listener:ident {
            $(#[$method_doc:meta])*
            fn $method:ident($event:ty);
        }
    ) => {
        $(#[$doc])*
        pub trait $listener: Send + Sync {
            $(#[$method_doc])*
            fn $method(&self, event: $event);
        }

        impl<F: Fn($event) + Send + Sync> $listener for F {
            fn $method(&self, event: $event) {
                self(event)
            }
        }
    };
}
pub(crate) use listener_trait;
