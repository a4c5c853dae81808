//! Expiring a session on purpose: what a test of session loss needs.

use std::io;
use std::time::{Duration, Instant};

use crate::client::{State, WatchedEvent, ZooKeeper};
use crate::error::ZkError;

/// How long one attempt's second handle waits for its connection.
const TWIN_CONNECT_WAIT: Duration = Duration::from_secs(10);

/// Expires `zk`'s session on the server and waits until `zk` has learned it:
/// Curator's `KillSession.kill(client, connectString)`, kazoo's harness
/// `expire_session`, HBase's `HBaseTestingUtility.expireSession`.
///
/// As they do, a second handle resumes the session (same id and password)
/// on `servers` (the servers themselves, not a [`FaultProxy`](super::FaultProxy)
/// that `zk` may go through) and closes it. Its
/// [`close`](ZooKeeper::close) returns `Ok` only when the server answered
/// closeSession or said the session had expired, so the session is gone on
/// the server when this goes on; a failed attempt (say `zk` took the
/// session back in between) is repeated. Then it waits until `zk` has
/// learned it: its state is `Expired`, or its session id changed (a
/// `ZooKeeperWatcher` with session renewal opened a new session). `zk`
/// reconnects to learn it, so it must be able to reach a server; one cut
/// off learns it when it declares the session expired itself (after a
/// session timeout without a server). The whole is bounded by three session
/// timeouts plus 10 s.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::client::{State, ZooKeeper};
/// use zklock::testing::{expire_session, test_servers};
///
/// let servers = test_servers();
/// let zk = ZooKeeper::connect(&servers, Duration::from_secs(6), |_e| {})?;
/// expire_session(&zk, &servers)?;
/// assert_eq!(zk.state(), State::Expired);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// `InvalidInput` when `zk` never had a session; `TimedOut` when the session
/// could not be closed, or `zk` did not learn of it, within the bound (the
/// message says which).
pub fn expire_session(zk: &ZooKeeper, servers: &str) -> io::Result<()> {
    let id = zk.session_id();
    if id == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "expire_session: the handle has no session yet",
        ));
    }
    let timeout = zk.session_timeout();
    let deadline = Instant::now() + timeout * 3 + Duration::from_secs(10);
    let learned = || zk.state() == State::Expired || zk.session_id() != id;
    if !learned() {
        close_session_by(servers, id, &zk.session_password(), timeout, deadline)?;
    }
    if super::eventually(deadline.saturating_duration_since(Instant::now()), learned) {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("expire_session: session {id:#x} closed on the server, but the handle has not learned it"),
    ))
}

/// Closes session `session_id` on the server, for a session another process
/// holds (a test's controller expiring a worker's session): a handle on the
/// session id and `password` on `servers`, closed, repeated until the server
/// confirmed the close or said the session had expired. What
/// [`expire_session`] does before waiting for the session's own handle;
/// that handle learns of it when it next reaches a server. Bounded by three
/// `session_timeout`s plus 10 s.
///
/// # Errors
/// `InvalidInput` for session id 0; `TimedOut` when no server confirmed the
/// close within the bound.
pub fn close_session(
    servers: &str,
    session_id: i64,
    password: &[u8],
    session_timeout: Duration,
) -> io::Result<()> {
    if session_id == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "close_session: session id 0 is no session",
        ));
    }
    let deadline = Instant::now() + session_timeout * 3 + Duration::from_secs(10);
    close_session_by(servers, session_id, password, session_timeout, deadline)
}

/// [`close_session`] by `deadline`.
fn close_session_by(
    servers: &str,
    id: i64,
    password: &[u8],
    timeout: Duration,
    deadline: Instant,
) -> io::Result<()> {
    let mut attempt = 0u32;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("could not close session {id:#x} on {servers}"),
            ));
        }
        attempt += 1;
        let closed = ZooKeeper::builder(servers)
            .with_session_timeout(timeout)
            .with_session(id, password)
            .with_connect_wait(TWIN_CONNECT_WAIT.min(left))
            .connect(|_e: WatchedEvent| {})
            .and_then(|twin| twin.close());
        match closed {
            Ok(()) => return Ok(()),
            // The server says so: gone already.
            Err(e) if e.code() == Some(ZkError::SessionExpired) => return Ok(()),
            Err(e) => {
                log::debug!("closing session {id:#x}: attempt {attempt}: {e}");
                std::thread::sleep(Duration::from_millis(50).min(left));
            }
        }
    }
}
