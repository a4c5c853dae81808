//! The session a blocking call began in ([`CallSession`]): the glue between
//! the wait engine ([`wait`](crate::engine::wait), which waits on the client's
//! events) and the watcher a lock or a recipe was made on. Above the engine,
//! the recoverable handle and the watcher; below the locks and the recipes.

use std::sync::Arc;
use std::time::Duration;

use crate::client::State;
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

impl WaitSession for CallSession {
    fn check(&self) -> Result<()> {
        CallSession::check(self)
    }

    fn connected(&self) -> bool {
        self.rzk.zookeeper().state() == State::Connected
    }

    fn session_timeout(&self) -> Duration {
        self.rzk.zookeeper().session_timeout()
    }

    fn wake_at_end(&self, wake: &Arc<Wake>) -> EndRegistration {
        EndRegistration::new(self.rzk.zookeeper().wake_at_end(wake))
    }
}
