//! The session a blocking call began in ([`CallSession`]): the glue between
//! the wait engine ([`wait`](crate::engine::wait), which waits on the client's
//! events) and the watcher a lock or a recipe was made on. Above the engine,
//! the recoverable handle and the watcher; below the locks and the recipes.

use std::sync::Arc;
use std::time::Duration;

use crate::client::{State, ZooKeeper};
use crate::engine::wait::{EndRegistration, WaitSession};
use crate::engine::wake::Wake;
use crate::error::{Error, Result};
use crate::recoverable::RecoverableZooKeeper;
use crate::watcher::ZooKeeperWatcher;

/// The session a blocking call (an acquire, a take, a barrier's enter) began
/// in, and a handle whose calls reach that session only. After an expiry its
/// calls and [`check`](Self::check) fail with `SessionExpired`, also when
/// session renewal has opened a new session on the same watcher.
#[derive(Debug, Clone)]
pub(crate) struct CallSession {
    zkw: ZooKeeperWatcher,
    rzk: RecoverableZooKeeper,
}

impl CallSession {
    /// The watcher's session now.
    ///
    /// # Errors
    /// The session's error when it has ended (`SessionExpired`, `Closed`, ...).
    pub(crate) fn begin(zkw: &ZooKeeperWatcher) -> Result<CallSession> {
        let rzk = zkw.recoverable_zookeeper().pinned();
        let call = CallSession {
            zkw: zkw.clone(),
            rzk,
        };
        call.check()?;
        Ok(call)
    }

    /// The session's handle (retries as `RecoverableZooKeeper` does; its calls
    /// reach this session only).
    pub(crate) fn rzk(&self) -> &RecoverableZooKeeper {
        &self.rzk
    }

    /// The watcher the call was made on.
    pub(crate) fn watcher(&self) -> &ZooKeeperWatcher {
        &self.zkw
    }

    /// This session's id.
    pub(crate) fn session_id(&self) -> i64 {
        self.rzk.session_id()
    }

    /// This session as a wait sees it: ended when [`check`](Self::check)
    /// fails.
    pub(crate) fn pinned(&self) -> Pinned<'_, impl Fn() -> Result<()> + '_> {
        Pinned::new(self.rzk.zookeeper(), move || self.check())
    }

    /// An error when this session can no longer be used: `SessionExpired`
    /// once it expired (whether or not a new one replaced it), `AuthFailed`,
    /// `Closed`.
    pub(crate) fn check(&self) -> Result<()> {
        if let Some(e) = Error::for_ended_session(self.rzk.state()) {
            return Err(e);
        }
        self.zkw.check_session()
    }
}

/// The session a wait began in, as the wait engine ([`wait`](crate::engine::wait::wait))
/// sees it: the client whose state and end the wait follows (pinned to that
/// session, or the watcher's), and `ends`, an error once the wait's session
/// can no longer be used (the user's own ends too: a closed cache). The one
/// [`WaitSession`] of the crate: a blocking call's ([`CallSession::pinned`]),
/// a tracker's and a deletion listener's wait, the cache's `wait_synced`,
/// the leader manager's wait.
pub(crate) struct Pinned<'a, F> {
    zk: &'a ZooKeeper,
    ends: F,
}

impl<'a, F: Fn() -> Result<()>> Pinned<'a, F> {
    /// The session of `zk`, ended when `ends` returns an error.
    pub(crate) fn new(zk: &'a ZooKeeper, ends: F) -> Self {
        Pinned { zk, ends }
    }
}

impl<F: Fn() -> Result<()>> WaitSession for Pinned<'_, F> {
    fn check(&self) -> Result<()> {
        (self.ends)()
    }

    fn connected(&self) -> bool {
        self.zk.state() == State::Connected
    }

    fn session_timeout(&self) -> Duration {
        self.zk.session_timeout()
    }

    fn wake_at_end(&self, wake: &Arc<Wake>) -> EndRegistration {
        EndRegistration::new(self.zk.wake_at_end(wake))
    }
}
