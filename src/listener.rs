//! `ZooKeeperListener` and `Abortable`: HBase's hooks for ZooKeeper events and
//! fatal errors.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::Error;
use crate::types::WatchedEvent;

/// Receives node events from a [`ZooKeeperWatcher`](crate::ZooKeeperWatcher): HBase's
/// `ZooKeeperListener`.
///
/// Every method has a no-op default; implement the ones you need. Calls come on
/// the client's event thread, in registration order, one event at a time: keep
/// them short. They may call ZooKeeper (replies never wait for the event thread)
/// but must never wait for another event.
///
/// # What a blocking call costs
/// The event thread is the session's only one: while your callback runs, no
/// other event of the session is delivered — not to the other listeners, not to
/// a [`ZooKeeperNodeTracker`](crate::ZooKeeperNodeTracker), not to a lock (whose
/// `InDoubt` warning and `Lost` signal then arrive late, possibly together). A
/// synchronous ZooKeeper call costs a round trip; during a partition it waits
/// up to the read timeout (2/3 of the session timeout), and a
/// [`RecoverableZooKeeper`](crate::RecoverableZooKeeper) or
/// [`zkutil`](crate::zkutil) call retries on top of that (by default up to
/// 1 + 2 + 4 s of back-off). Prefer handing the work to a thread of yours, or
/// use the client's asynchronous calls (`exists_async`, `get_data_async`, ...)
/// whose answers come back on the event thread. The library's own listeners
/// never block there.
///
/// # Reaching the session
/// Hold a [`WeakZooKeeperWatcher`](crate::WeakZooKeeperWatcher) (from
/// [`ZooKeeperWatcher::downgrade`](crate::ZooKeeperWatcher::downgrade)), not a
/// `ZooKeeperWatcher` clone: a registered listener that owns a clone keeps the
/// session, its threads and its ephemeral nodes alive after the application
/// dropped its last handle. [`ZooKeeperWatcher::listen`](crate::ZooKeeperWatcher::listen)
/// registers a listener until the returned registration is dropped.
///
/// A listener interested in a single znode returns it from
/// [`path`](ZooKeeperListener::path): the watcher then indexes it by that path and
/// calls it only for events on it, so thousands of such listeners (one per
/// waiting lock) cost nothing to events on other paths.
pub trait ZooKeeperListener: Send + Sync {
    /// The node was created.
    fn node_created(&self, _path: &str) {}
    /// The node was deleted.
    fn node_deleted(&self, _path: &str) {}
    /// The node's data changed.
    fn node_data_changed(&self, _path: &str) {}
    /// The node's children changed.
    fn node_children_changed(&self, _path: &str) {}
    /// A connection-state change (type `None`: `SyncConnected`, `Disconnected`,
    /// `Expired`, `AuthFailed`, `Closed`). Not in HBase's class; zklock tells
    /// listeners so that waits end when the session does.
    fn connection_event(&self, _event: &WatchedEvent) {}
    /// A new session replaced an expired one and is connected (only with
    /// [`ZooKeeperWatcherBuilder::with_session_renewal`](crate::ZooKeeperWatcherBuilder::with_session_renewal);
    /// not in HBase, which aborts on expiry). Watches set on the old session are
    /// gone: set again what you need.
    fn session_renewed(&self) {}
    /// The single path this listener is about, if any (see the type docs). Must
    /// not change while registered.
    fn path(&self) -> Option<&str> {
        None
    }
}

/// Something that can be aborted on a fatal error: HBase's `Abortable`.
///
/// A [`ZooKeeperWatcher`](crate::ZooKeeperWatcher) calls [`abort`](Abortable::abort)
/// exactly once when its session expires (and trackers call it on ZooKeeper
/// errors they cannot handle). Closures `Fn(&str, Option<&Error>)` implement it
/// (then `is_aborted` is always false).
pub trait Abortable: Send + Sync {
    /// Aborts: `why` says why, `error` is the cause when there is one.
    fn abort(&self, why: &str, error: Option<&Error>);
    /// Whether [`abort`](Abortable::abort) was called.
    fn is_aborted(&self) -> bool {
        false
    }
}

impl<F: Fn(&str, Option<&Error>) + Send + Sync> Abortable for F {
    fn abort(&self, why: &str, error: Option<&Error>) {
        self(why, error)
    }
}

/// The default [`Abortable`]: logs the reason at error level and remembers it.
#[derive(Debug, Default)]
pub struct LoggingAbortable {
    aborted: AtomicBool,
}

impl LoggingAbortable {
    /// A fresh, not aborted instance.
    pub fn new() -> LoggingAbortable {
        LoggingAbortable::default()
    }
}

impl Abortable for LoggingAbortable {
    fn abort(&self, why: &str, error: Option<&Error>) {
        self.aborted.store(true, Ordering::SeqCst);
        match error {
            Some(e) => log::error!("aborting: {why}: {e}"),
            None => log::error!("aborting: {why}"),
        }
    }

    fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closures_are_abortable_and_logging_abortable_remembers() {
        let a = LoggingAbortable::new();
        assert!(!a.is_aborted());
        a.abort("test", None);
        assert!(a.is_aborted());
        let hits = std::sync::atomic::AtomicUsize::new(0);
        let f = |_why: &str, _e: Option<&Error>| {
            hits.fetch_add(1, Ordering::SeqCst);
        };
        f.abort("x", Some(&Error::Closed));
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }
}
