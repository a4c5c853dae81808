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

/// A watch held on a node: its request, and its user's reactions.
pub(crate) trait HeldWatch: Send + Sync + 'static {
    /// What the request answers when it succeeds.
    type Answer: Send + 'static;

    /// The watcher the watch is held on (weakly: a held watch does not keep
    /// the session open).
    fn watcher(&self) -> &WeakZooKeeperWatcher;

    /// The node watched (for the logs).
    fn path(&self) -> &str;

    /// Sends the watching request on `zk`, asynchronously, with `done` as its
    /// callback; sending nothing (dropping `done`) ends the watch.
    fn request(self: &Arc<Self>, zk: &ZooKeeper, done: Done<Self::Answer>);

    /// The request's answer.
    fn on_answer(&self, answer: Self::Answer);

    /// `NoNode`: the node is gone.
    fn on_gone(&self);

    /// A fatal error: the watch ends.
    fn on_ended(&self, e: &Error);

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
    watch.request(
        &zk,
        Box::new(move |r| match r {
            Ok(answer) => me.on_answer(answer),
            Err(e) if e.is(ZkError::NoNode) => me.on_gone(),
            Err(e) if e.is_fatal() => me.on_ended(&e),
            Err(e) => {
                debug!(
                    "watch on {}: armed again after the reconnect ({e})",
                    me.path()
                );
                // Not in the client's table now: no event reaches it until then.
                let again = me.clone();
                on_reconnect(me.watcher(), move |connected| {
                    if connected {
                        again.on_reconnected();
                        arm(&again);
                    } else {
                        again.on_lost();
                    }
                });
            }
        }),
    );
}
