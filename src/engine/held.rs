//! One held watch: a watch armed with its request, whose answer is sorted
//! once, the same way for every user, so that each user keeps only its
//! reaction.
//!
//! | the request's answer | what the held watch does |
//! |---|---|
//! | the node's answer (an `exists`' `Stat` or its absence, the data) | [`on_answer`](HeldWatch::on_answer) |
//! | `NoNode` | [`on_gone`](HeldWatch::on_gone) |
//! | a fatal error (the session expired, closed, auth failed) | [`on_ended`](HeldWatch::on_ended): nothing is armed again |
//! | any other error (the connection lost) | armed again after the reconnect, in the same session ([`on_reconnected`](HeldWatch::on_reconnected) first); [`on_lost`](HeldWatch::on_lost) when the session ends before |
//!
//! A user sorts the errors its own way with [`sort`](HeldWatch::sort) (the
//! table's sorting is its default): the leader manager's check ends its
//! claim on any error that cannot be retried. Each reaction gets the
//! user's [`Context`](HeldWatch::Context) as it was when the request was
//! sent (the leader manager's claim then), on every path.
//!
//! The request is asynchronous: [`arm`] never blocks, and the answer comes
//! back on the client's event thread (where the reactions run: they must not
//! block). The re-arm after a reconnect waits on the watcher's session hooks
//! ([`on_reconnect`]), never on the user's listener registry.

use std::sync::Arc;

use log::debug;

use crate::client::ZooKeeper;
use crate::engine::background::on_reconnect;
use crate::error::{Error, Result, ZkError};
use crate::watcher::WeakZooKeeperWatcher;

/// The answer callback a [`HeldWatch::request`] sends its request with.
pub(crate) type Done<A> = Box<dyn FnOnce(Result<A>) + Send>;

/// What a held watch does with a failed request (see [`HeldWatch::sort`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sorted {
    /// [`HeldWatch::on_gone`].
    Gone,
    /// [`HeldWatch::on_ended`]: nothing is armed again.
    Ended,
    /// Armed again after the reconnect.
    Again,
}

/// A watch held on a node: its request, and its user's reactions.
pub(crate) trait HeldWatch: Send + Sync + 'static {
    /// What the request answers when it succeeds.
    type Answer: Send + 'static;

    /// What the user captures when the request is sent, handed to the
    /// reaction to its answer (`()` when nothing).
    type Context: Send + 'static;

    /// Captures the context, right before the request is sent.
    fn context(&self) -> Self::Context;

    /// The watcher the watch is held on (weakly: a held watch does not keep
    /// the session open).
    fn watcher(&self) -> &WeakZooKeeperWatcher;

    /// The node watched (for the logs).
    fn path(&self) -> &str;

    /// Sends the watching request on `zk`, asynchronously, with `done` as its
    /// callback; sending nothing (dropping `done`) ends the watch.
    fn request(self: &Arc<Self>, zk: &ZooKeeper, done: Done<Self::Answer>);

    /// How a failed request is sorted; by default as the module docs' table
    /// says: `NoNode` is gone, a fatal error ends the watch, any other error
    /// arms it again after the reconnect.
    fn sort(&self, e: &Error) -> Sorted {
        if e.is(ZkError::NoNode) {
            Sorted::Gone
        } else if e.is_fatal() {
            Sorted::Ended
        } else {
            Sorted::Again
        }
    }

    /// The request's answer.
    fn on_answer(&self, answer: Self::Answer, context: Self::Context);

    /// `NoNode` (as [`sort`](Self::sort) sorts it): the node is gone.
    fn on_gone(&self, context: Self::Context);

    /// An error that ends the watch (as [`sort`](Self::sort) sorts it).
    fn on_ended(&self, e: &Error, context: Self::Context);

    /// The connection is back in the same session, before the watch is armed
    /// again (the watch missed the changes of the gap: its answer tells).
    fn on_reconnected(&self) {}

    /// The session ended before the connection came back: the watch ends.
    fn on_lost(&self) {}
}

/// Arms `watch`: sends its request and sorts the answer (see the module
/// docs). Does nothing once the watcher is gone.
pub(crate) fn arm<W: HeldWatch>(watch: &Arc<W>) {
    let Some(zk) = watch.watcher().zookeeper() else {
        return;
    };
    let me = watch.clone();
    let context = watch.context();
    watch.request(
        &zk,
        Box::new(move |r| match r {
            Ok(answer) => me.on_answer(answer, context),
            Err(e) => match me.sort(&e) {
                Sorted::Gone => me.on_gone(context),
                Sorted::Ended => me.on_ended(&e, context),
                Sorted::Again => again_after_reconnect(me, &e),
            },
        }),
    );
}

/// Arms `watch` again after the reconnect (see the module docs).
fn again_after_reconnect<W: HeldWatch>(me: Arc<W>, e: &Error) {
    debug!(
        "watch on {}: armed again after the reconnect ({e})",
        me.path()
    );
    // Not in the client's table now: no event reaches it until then.
    let watcher = me.watcher().clone();
    on_reconnect(&watcher, move |connected| {
        if connected {
            me.on_reconnected();
            arm(&me);
        } else {
            me.on_lost();
        }
    });
}
