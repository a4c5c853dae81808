//! One held watch: a watch armed with its request, whose failures are sorted
//! (and the watch armed again) here, the same way for every user, so that
//! each user keeps only its reaction.
//!
//! | the request's answer | what the held watch does |
//! |---|---|
//! | the node's answer (an `exists`' `Stat` or its absence, the data) | [`on_answer`](HeldWatch::on_answer) |
//! | `NoNode` | [`on_gone`](Held::on_gone) |
//! | a lost connection (`ConnectionLoss`, `OperationTimeout`: [`Error::is_retryable`]) | armed again after the reconnect, in the same session ([`on_reconnected`](Held::on_reconnected) first); [`on_lost`](Held::on_lost) when the session ends (or another replaced it) before |
//! | any other error: fatal (the session expired, closed, auth failed) or permanent (`NoAuth`, a missing `READ`, ...) | [`on_ended`](Held::on_ended): nothing is armed again |
//!
//! **A permanent error is never "again".** Sent again, it fails again: the
//! re-arm after the reconnect fires at once while connected, so a `NoAuth`
//! re-armed would be a request sent without end (ZOOKEEPER-2590: `exists` on
//! a node the client cannot read). Every user is told it ends instead, and
//! reacts as it does to its other permanent errors.
//!
//! **The same session.** A watch is armed again only in the session it was
//! held in: by default the one its request was sent in; a user names its
//! own with [`session`](Held::session) (the rounds': the session their node
//! was made in). A reconnect in another (a renewed session) is
//! [`on_lost`](Held::on_lost), whatever the order of the events.
//!
//! **A retry budget** ([`Budget`], a user's [`budget`](Held::budget)): a
//! watch with one is sent again at once while the client says it is
//! connected (the reconnect's `SyncConnected` may have come before the
//! failure), a few times in a row; beyond that it waits for the next
//! `SyncConnected`. Failures that wait for the same reconnect are armed
//! again once, the latest's request (the tracker's). Without one, a failure
//! waits for the reconnect (at once when connected now).
//!
//! A user sorts the errors its own way with [`sort`](Held::sort) (the
//! table's sorting is its default): the leader manager's check ends its
//! claim on `NoNode` too. Each reaction to an answer gets the user's
//! [`Context`](Held::Context) as it was when the request was sent (the
//! leader manager's claim then), on every path.
//!
//! Two ways in: [`arm`] sends a [`HeldWatch`]'s one request and sorts its
//! answer; [`failed`] sorts the failure of a chain of requests a user sends
//! itself (the rounds' `sync` → `getChildren` → `exists`, the tracker's
//! `exists` → `getData`), whose [`resend`](Held::resend) sends the chain
//! again. Either way the re-arm is this file's.
//!
//! The requests are asynchronous: nothing here blocks, and the answers come
//! back on the client's event thread (where the reactions run: they must not
//! block). The re-arm after a reconnect waits on the watcher's session hooks
//! ([`on_reconnect`]), never on the user's listener registry.

use std::sync::Arc;

use log::debug;
use parking_lot::Mutex;

use crate::client::{State, ZooKeeper};
use crate::engine::background::{on_next_connect, on_reconnect};
use crate::error::{Error, Result, ZkError};
use crate::watcher::WeakZooKeeperWatcher;

/// The answer callback a [`HeldWatch::request`] sends its request with.
pub(crate) type Done<A> = Box<dyn FnOnce(Result<A>) + Send>;

/// What a held watch does with a failed request (see [`Held::sort`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sorted {
    /// [`Held::on_gone`].
    Gone,
    /// [`Held::on_ended`]: nothing is armed again.
    Ended,
    /// Armed again after the reconnect.
    Again,
}

/// The default sorting (the module docs' table): `NoNode` is gone, a lost
/// connection is armed again, any other error ends the watch.
pub(crate) fn sort(e: &Error) -> Sorted {
    if e.is(ZkError::NoNode) {
        Sorted::Gone
    } else if e.is_retryable() {
        Sorted::Again
    } else {
        Sorted::Ended
    }
}

/// The re-arm of a held watch: what it does with a failed request. The
/// reactions to the failures; [`HeldWatch`] adds the request and its answer.
pub(crate) trait Held: Send + Sync + 'static {
    /// What the user captures when the request is sent, handed to the
    /// reaction to its answer (`()` when nothing).
    type Context: Send + 'static;

    /// The watcher the watch is held on (weakly: a held watch does not keep
    /// the session open).
    fn watcher(&self) -> &WeakZooKeeperWatcher;

    /// The node watched (for the logs).
    fn path(&self) -> &str;

    /// The session the watch is held in, when it is not the one its request
    /// was sent in (the rounds' node's): armed again only in it.
    fn session(&self) -> Option<i64> {
        None
    }

    /// The retry budget shared by the user's requests (see the module
    /// docs); `None`: each failure waits for the reconnect.
    fn budget(&self) -> Option<&Budget> {
        None
    }

    /// How a failed request is sorted; by default as the module docs' table
    /// says ([`sort`]).
    fn sort(&self, e: &Error) -> Sorted {
        sort(e)
    }

    /// Sends the request (or the user's chain of requests) again, after the
    /// reconnect.
    fn resend(self: &Arc<Self>);

    /// `NoNode` (as [`sort`](Self::sort) sorts it): the node is gone.
    fn on_gone(&self, context: Self::Context);

    /// An error that ends the watch (as [`sort`](Self::sort) sorts it).
    fn on_ended(&self, e: &Error, context: Self::Context);

    /// The request waits for a reconnect (it is not sent again at once).
    fn on_waiting(&self) {}

    /// The connection is back in the same session, before the watch is armed
    /// again (the watch missed the changes of the gap: its answer tells).
    fn on_reconnected(&self) {}

    /// The session ended (or another replaced it) before the connection came
    /// back: the watch ends.
    fn on_lost(&self) {}
}

/// A watch held on a node by one request: the request, and the reaction to
/// its answer.
pub(crate) trait HeldWatch: Held {
    /// What the request answers when it succeeds.
    type Answer: Send + 'static;

    /// Captures the context, right before the request is sent.
    fn context(&self) -> Self::Context;

    /// Sends the watching request on `zk`, asynchronously, with `done` as its
    /// callback; sending nothing (dropping `done`) ends the watch.
    fn request(self: &Arc<Self>, zk: &ZooKeeper, done: Done<Self::Answer>);

    /// The request's answer.
    fn on_answer(&self, answer: Self::Answer, context: Self::Context);
}

/// Arms `watch`: sends its request and sorts the answer (see the module
/// docs). Does nothing once the watcher is gone.
pub(crate) fn arm<W: HeldWatch>(watch: &Arc<W>) {
    let Some(zk) = watch.watcher().zookeeper() else {
        return;
    };
    let me = watch.clone();
    let sent_in = zk.session_id();
    let context = watch.context();
    watch.request(
        &zk,
        Box::new(move |r| match r {
            Ok(answer) => {
                if let Some(budget) = me.budget() {
                    budget.answered();
                }
                me.on_answer(answer, context)
            }
            Err(e) => failed(me, sent_in, &e, context),
        }),
    );
}

/// Sorts the failure `e` of a request of `me` sent in the session `sent_in`
/// (see the module docs): gone, ended, or armed again
/// ([`resend`](Held::resend)) after the reconnect.
pub(crate) fn failed<H: Held>(me: Arc<H>, sent_in: i64, e: &Error, context: H::Context) {
    match me.sort(e) {
        Sorted::Gone => me.on_gone(context),
        Sorted::Ended => me.on_ended(e, context),
        Sorted::Again => again(me, sent_in, e),
    }
}

/// Arms `me` again: at once within its budget while connected, else after
/// the reconnect, in the same session (see the module docs).
fn again<H: Held>(me: Arc<H>, sent_in: i64, e: &Error) {
    let session = me.session().unwrap_or(sent_in);
    let zk = me.watcher().zookeeper();
    let connected = zk.as_ref().is_some_and(|zk| zk.state() == State::Connected);
    let same = zk.as_ref().is_some_and(|zk| zk.session_id() == session);
    let Some(budget) = me.budget() else {
        debug!(
            "watch on {}: armed again after the reconnect ({e})",
            me.path()
        );
        me.on_waiting();
        // Not in the client's table now: no event reaches it until then.
        let watcher = me.watcher().clone();
        return on_reconnect(&watcher, move |connected| {
            reconnected(me, session, connected)
        });
    };
    if !same {
        // Another session (renewed) or none: nothing to arm again.
        return me.on_lost();
    }
    if connected && budget.spend() {
        debug!("watch on {}: armed again now ({e})", me.path());
        return me.resend();
    }
    debug!("watch on {}: armed again on reconnect ({e})", me.path());
    me.on_waiting();
    let ticket = budget.wait();
    let watcher = me.watcher().clone();
    let reconnect = move |connected| {
        let latest = me.budget().is_some_and(|b| b.reconnected(ticket));
        // An earlier failure waiting for the same reconnect: the latest's
        // request is armed again, once.
        if latest {
            reconnected(me, session, connected)
        }
    };
    if connected {
        // The client is connected and the budget spent: the next reconnect.
        on_next_connect(&watcher, reconnect);
    } else {
        on_reconnect(&watcher, reconnect);
    }
}

/// The reconnect awaited by a re-arm of `me` (or the session's end).
fn reconnected<H: Held>(me: Arc<H>, session: i64, connected: bool) {
    let same = me
        .watcher()
        .zookeeper()
        .is_some_and(|zk| zk.session_id() == session);
    if connected && same {
        me.on_reconnected();
        me.resend();
    } else {
        debug!(
            "watch on {}: its session ended before the reconnect",
            me.path()
        );
        me.on_lost();
    }
}

/// A retry budget shared by a user's requests (see the module docs): how
/// many times in a row a failed request is sent again at once while
/// connected, and which of the failures waiting for the reconnect is the
/// latest (the one armed again). Holds no request: the reconnect hooks do.
#[derive(Debug)]
pub(crate) struct Budget {
    immediate: u32,
    state: Mutex<Spent>,
}

#[derive(Debug, Default)]
struct Spent {
    /// Sent again at once since the last answer or reconnect.
    immediate: u32,
    /// The latest failure waiting for the reconnect (its ticket).
    waiting: u64,
}

impl Budget {
    /// `immediate` re-sends at once in a row while connected.
    pub(crate) fn new(immediate: u32) -> Self {
        Budget {
            immediate,
            state: Mutex::default(),
        }
    }

    /// An answer came: the budget is whole again.
    pub(crate) fn answered(&self) {
        self.state.lock().immediate = 0;
    }

    /// Whole again, and none of the failures waiting for the reconnect is
    /// armed again (a renewed session: the user reads anew).
    pub(crate) fn reset(&self) {
        let mut st = self.state.lock();
        st.immediate = 0;
        st.waiting += 1;
    }

    /// Whole again (a reconnect).
    pub(crate) fn immediate_reset(&self) {
        self.state.lock().immediate = 0;
    }

    /// One re-send at once, if the budget allows it (it replaces any
    /// failure waiting for the reconnect).
    fn spend(&self) -> bool {
        let mut st = self.state.lock();
        if st.immediate < self.immediate {
            st.immediate += 1;
            st.waiting += 1;
            true
        } else {
            false
        }
    }

    /// A failure waits for the reconnect: its ticket.
    fn wait(&self) -> u64 {
        let mut st = self.state.lock();
        st.waiting += 1;
        st.waiting
    }

    /// The reconnect (or the session's end) came for the failure `ticket`:
    /// whether it is the latest waiting (then the budget is whole again).
    fn reconnected(&self, ticket: u64) -> bool {
        let mut st = self.state.lock();
        if st.waiting != ticket {
            return false;
        }
        st.immediate = 0;
        st.waiting += 1;
        true
    }
}
