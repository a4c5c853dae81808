//! The session layer: one connection thread (connect, handshake, ping, detect
//! dead connections, reconnect) and one event thread (calls watchers). Callers
//! write their request frames themselves, under the writer lock; an
//! asynchronous request never waits for that lock (it is deferred to the lock's
//! holder).
//!
//! Reading is done by whoever holds the reader (the connection's read side, one
//! holder at a time, so frames are handled in order): a caller waiting for its
//! reply reads it itself when nobody else reads, handling every frame that
//! comes meanwhile (other callers' replies, which wake them, notifications,
//! ping replies), and hands the reader on to the next caller still waiting. The
//! connection thread reads when something may come that no caller waits to
//! read (a watch is set, an asynchronous call, an auth packet or a ping is
//! unanswered) and on an idle session. So on a session without watches a call
//! costs one thread switch (the server's reply wakes the caller) where a
//! dedicated reader costs two (it wakes the reader, which wakes the caller):
//! half the client CPU per call on a 2-core machine. With a watch set the
//! connection thread reads everything, as a dedicated reader: a notification
//! is read as soon as it comes, never left for the next call.
//!
//! Timers follow the Java client (`ClientCnxn`), tightened where a fault probe
//! showed a gap: read timeout = 2/3 of the negotiated session timeout; a ping at
//! least every sixth of it, each timed (unanswered for the read timeout = a dead
//! connection, even while notifications flow); each connect attempt bounded by
//! a total handshake deadline.
//!
//! This module holds the session's shared state, its start and close; by job:
//! [`depot`] (xids, pending calls, answering and failing them), [`connection`]
//! (the connection thread), [`rewatch`] (SetWatches), [`events`] (the event
//! thread).

mod connection;
mod depot;
mod events;
pub(crate) mod hosts;
mod link;
mod rewatch;

use super::connect::strip_chroot;
use super::proto::{self, op, xid, ConnectResponse, Reader, ReplyHeader, Writer};
use super::sasl::SaslFailure;
use super::watches::{same, Kind, WatchManager, WatcherRef};
use crate::deadline::Deadline;
use crate::engine::wake::{EndWakes, Wake};
use crate::error::{ConnectCause, Error, ZkError};
use crate::metrics::{metric, Timer};
use crate::types::{EventType, KeeperState, State, WatchedEvent};
use crate::util::{jitter, random_u64};
use crossbeam_channel::{Receiver, Sender};
use log::{debug, error, info, trace, warn};
use parking_lot::{Condvar, Mutex, MutexGuard, ReentrantMutex};
use std::collections::{HashSet, VecDeque};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use connection::*;
use depot::*;
use events::*;
use hosts::{unit_random, HostList, ServerOrder};
use link::*;
use rewatch::*;

/// The node holding the ensemble's configuration (Java's
/// `ZooDefs.CONFIG_NODE`): a server path, never under the chroot.
pub(crate) const CONFIG_NODE: &str = "/zookeeper/config";

/// What a caller gets back: the reply body, or the failure.
pub(crate) type Reply = Result<Vec<u8>, Error>;

/// A watch to register when the reply arrives.
#[derive(Clone)]
pub(crate) struct WatchReg {
    /// `exists`: registered as a data watch on success, an exist watch on NoNode.
    pub(crate) exists: bool,
    pub(crate) kind: Kind,
    pub(crate) path: String,
    pub(crate) watcher: WatcherRef,
}

/// A callback for an asynchronous call: run on the event thread with the reply.
pub(crate) type Callback = Box<dyn FnOnce(Reply) + Send>;

/// How the connection thread ended the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Terminal {
    Expired,
    AuthFailed,
    Closed,
}

struct Session {
    state: State,
    id: i64,
    password: Vec<u8>,
    negotiated: Duration,
    closing: bool,
    /// The last connection-state event delivered (each change is told once).
    told: Option<KeeperState>,
    /// Whether a read-write server has ever served this session (Java's
    /// `seenRwServerBefore`): a session a read-only server made (a local
    /// session, never known to the quorum) is not resumed on a read-write
    /// server; the client asks it for a new session instead.
    seen_rw: bool,
    /// Whether the live connection is to a read-only server.
    read_only: bool,
    /// Counts the connections made (see
    /// [`SessionShared::read_write_connection`]).
    connections: u64,
}

/// Settings fixed at connect time. No `Debug`: the session password is here.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) hosts: Vec<String>,
    pub(crate) chroot: Option<String>,
    pub(crate) session_timeout: Duration,
    /// Set by the builder; `None`: twice the negotiated session timeout
    /// ([`SessionShared::request_timeout`]).
    pub(crate) request_timeout: Option<Duration>,
    /// Set by the builder; `None`: the negotiated session timeout
    /// ([`SessionShared::connect_wait`]).
    pub(crate) connect_wait: Option<Duration>,
    pub(crate) session_id: i64,
    pub(crate) password: Vec<u8>,
    /// Frames from a server must be shorter than this (Java's `jute.maxbuffer`).
    pub(crate) max_buffer: usize,
    /// The most one connect attempt (TCP connect, then the whole
    /// ConnectRequest/ConnectResponse exchange) may take.
    pub(crate) handshake_timeout: Duration,
    /// TLS on every connection (feature `tls`).
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::TlsConfig>,
    /// SASL on every connection, after the ConnectResponse.
    pub(crate) sasl: Option<super::SaslConfig>,
    /// The order `hosts` are tried in.
    pub(crate) server_order: ServerOrder,
    /// Java's `canBeReadOnly`: the ConnectRequest's `readOnly` flag, so that
    /// a server cut off from its quorum (started with
    /// `readonlymode.enabled=true`) may serve this client's reads.
    pub(crate) read_only: bool,
}

/// State shared by the handle, the connection thread and the event thread.
pub(crate) struct SessionShared {
    pub(crate) settings: Settings,
    pub(crate) default_watcher: WatcherRef,
    session: Mutex<Session>,
    session_cv: Condvar,
    last_zxid: AtomicI64,
    /// Whether the event-queue warning was logged (see [`SessionShared::enqueue`]).
    queue_warned: AtomicBool,
    /// Set by `close()`: the connection thread stops whatever it still does
    /// after the session's end (closing an expired session on the server).
    abandon: AtomicBool,
    /// Set when the session was seen to end on the server (its answer to
    /// closeSession, or a server saying the session expired), by a `close()`
    /// or by the connection thread's close of a session it declared expired:
    /// a later `close()` returns `Ok` at once.
    close_confirmed: AtomicBool,
    /// Set when the client declared the session expired itself (no server
    /// heard for a whole session timeout), not told by a server: the server
    /// may still hold it (a one-way partition), so `close()` has to hear the
    /// server before it says the session is gone.
    declared_expired: AtomicBool,
    /// Set when a drop handed the session's close to the background (see
    /// [`close_in_background`](Self::close_in_background)): one such close
    /// per session, however many drops follow.
    background_close: AtomicBool,
    /// The connection's stream, for writing; `None` while not connected.
    writer: Mutex<Option<Link>>,
    /// The connection's read side, taken by whoever reads: a caller waiting
    /// for its reply, or the connection thread (see
    /// [`await_reply`](SessionShared::await_reply)); `None` while not
    /// connected.
    reader: Mutex<Option<ReadSide>>,
    /// How the connection ended, when a caller reading found it (the
    /// connection thread ends the connection).
    read_end: Mutex<Option<ConnEnd>>,
    /// The sending times of the pings not answered yet, oldest first.
    pings: Mutex<VecDeque<Instant>>,
    /// Asynchronous calls not answered yet (nobody waits to read their
    /// replies: the connection thread reads while there are any).
    async_in_flight: AtomicUsize,
    /// When a caller last waited for a reply (since `epoch`).
    last_call_nanos: AtomicU64,
    /// The read timeout of the current connection's socket (nanoseconds):
    /// the connection thread's tick.
    tick_nanos: AtomicU64,
    /// Wakes the connection thread where it waits while callers read (see
    /// [`poke_conn`](SessionShared::poke_conn)): a count of pokes.
    conn_poke: Mutex<u64>,
    conn_cv: Condvar,
    /// The socket of a handshake in progress, so that `close` can end it.
    handshaking: Mutex<Option<TcpStream>>,
    pending: Mutex<VecDeque<Pending>>,
    /// Held while a lost connection's requests are answered and while its
    /// `Disconnected` (or the session's `Closed`) is told, so that on the
    /// event thread every callback answered for the lost connection comes
    /// first, in the order its request was sent, as in Java (see
    /// [`SessionShared::fail_pending`]). Re-entrant: a callback answered here
    /// on a dead event thread runs inline and may end up here again.
    answering: ReentrantMutex<()>,
    /// Asynchronous requests that found the writer taken: written, in order,
    /// by whoever holds the writer next, before releasing it (see
    /// [`SessionShared::release_writer`]); answered as pending ones when the
    /// connection or the session ends.
    deferred: Mutex<VecDeque<(Outgoing, ReplyTo)>>,
    auth_waiters: Mutex<VecDeque<Option<Sender<Reply>>>>,
    auth: Mutex<Vec<(String, Vec<u8>)>>,
    pub(crate) watches: Mutex<WatchManager>,
    events: Sender<EventMsg>,
    next_xid: AtomicI32,
    epoch: Instant,
    last_send_nanos: AtomicU64,
    /// When a byte last came from a server (since `epoch`; 0 = the start).
    last_heard_nanos: AtomicU64,
    /// Waits of the layers above to wake when the session ends, directly from
    /// the thread that ends it: not through the event thread, which a user's
    /// watcher or listener may hold up (see [`SessionShared::wake_at_end`]).
    end_wakes: EndWakes,
    /// The last TLS failure of each host since the last connection (see
    /// [`SessionShared::tls_failure`]).
    #[cfg(feature = "tls")]
    tls_failed: Mutex<std::collections::HashMap<String, crate::client::TlsError>>,
    /// The hosts whose last connect attempt failed for a lasting cause
    /// (refused by every address, a name that does not resolve, an answer
    /// that is not ZooKeeper's), with it, since the last connection (see
    /// [`SessionShared::known_failure`]).
    failed_hosts: Mutex<std::collections::HashMap<String, HostFailure>>,
    /// Why the handle ended with `AuthFailed` (the SASL mechanism's or the
    /// server's words), for the error `connect` returns.
    auth_failure: Mutex<Option<String>>,
    /// The servers to connect to, and in which order: `settings.hosts` until
    /// [`update_server_list`](SessionShared::update_server_list) replaces them.
    hosts: Mutex<HostList>,
    /// Set by an update that moves this client: the connection thread ends
    /// the connection (the session reconnects elsewhere).
    move_requested: AtomicBool,
    #[cfg(feature = "testing")]
    lose_replies: Mutex<Vec<i32>>,
    /// Run by the next caller that takes the read side, on its thread, before
    /// it reads (see [`SessionShared::on_next_caller_read`]).
    #[cfg(feature = "testing")]
    caller_read_hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// How long each request write is followed by a pause, the writer held
    /// (see [`SessionShared::pause_after_writes`]).
    #[cfg(feature = "testing")]
    write_pause: Mutex<Duration>,
}

impl std::fmt::Debug for SessionShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.session.lock();
        f.debug_struct("SessionShared")
            .field("hosts", &self.hosts.lock().hosts())
            .field("state", &s.state)
            .field("session_id", &format_args!("{:#x}", s.id))
            .finish_non_exhaustive()
    }
}

/// The client's two threads.
pub(crate) struct Threads {
    pub(crate) conn: JoinHandle<()>,
    pub(crate) events: JoinHandle<()>,
    /// Receives once when the event thread has ended.
    pub(crate) events_done: Receiver<()>,
}

/// Starts the threads. Returns the shared state and their handles.
pub(crate) fn start(
    settings: Settings,
    default_watcher: WatcherRef,
) -> io::Result<(Arc<SessionShared>, Threads)> {
    let (tx, rx) = crossbeam_channel::unbounded();
    let negotiated = settings.session_timeout;
    let session = Session {
        state: State::Connecting,
        id: settings.session_id,
        password: settings.password.clone(),
        negotiated,
        closing: false,
        told: None,
        // A session given by the caller was made by some server: resumed as
        // it is (Java: `seenRwServerBefore` starts true for a given id).
        seen_rw: settings.session_id != 0,
        read_only: false,
        connections: 0,
    };
    let hosts = Mutex::new(HostList::new(settings.hosts.clone(), settings.server_order));
    let shared = Arc::new(SessionShared {
        hosts,
        settings,
        default_watcher,
        session: Mutex::new(session),
        session_cv: Condvar::new(),
        last_zxid: AtomicI64::new(0),
        abandon: AtomicBool::new(false),
        close_confirmed: AtomicBool::new(false),
        declared_expired: AtomicBool::new(false),
        background_close: AtomicBool::new(false),
        queue_warned: AtomicBool::new(false),
        writer: Mutex::new(None),
        reader: Mutex::new(None),
        read_end: Mutex::new(None),
        pings: Mutex::new(VecDeque::new()),
        async_in_flight: AtomicUsize::new(0),
        last_call_nanos: AtomicU64::new(0),
        tick_nanos: AtomicU64::new(100_000_000),
        conn_poke: Mutex::new(0),
        conn_cv: Condvar::new(),
        handshaking: Mutex::new(None),
        pending: Mutex::new(VecDeque::new()),
        answering: ReentrantMutex::new(()),
        deferred: Mutex::new(VecDeque::new()),
        auth_waiters: Mutex::new(VecDeque::new()),
        auth: Mutex::new(Vec::new()),
        watches: Mutex::new(WatchManager::default()),
        events: tx,
        next_xid: AtomicI32::new(1),
        epoch: Instant::now(),
        last_send_nanos: AtomicU64::new(0),
        last_heard_nanos: AtomicU64::new(0),
        end_wakes: EndWakes::default(),
        #[cfg(feature = "tls")]
        tls_failed: Mutex::new(std::collections::HashMap::new()),
        failed_hosts: Mutex::new(std::collections::HashMap::new()),
        auth_failure: Mutex::new(None),
        move_requested: AtomicBool::new(false),
        #[cfg(feature = "testing")]
        lose_replies: Mutex::new(Vec::new()),
        #[cfg(feature = "testing")]
        caller_read_hook: Mutex::new(None),
        #[cfg(feature = "testing")]
        write_pause: Mutex::new(Duration::ZERO),
    });
    let (done_tx, events_done) = crossbeam_channel::bounded(1);
    let events = thread::Builder::new()
        .name("zklock-event".into())
        .spawn(move || {
            run_events(rx);
            let _ = done_tx.send(());
        })?;
    let s = shared.clone();
    let conn = match thread::Builder::new()
        .name("zklock-conn".into())
        .spawn(move || s.run())
    {
        Ok(h) => h,
        Err(e) => {
            let _ = shared.events.send(EventMsg::Stop);
            let _ = events.join();
            return Err(e);
        }
    };
    Ok((
        shared,
        Threads {
            conn,
            events,
            events_done,
        },
    ))
}

impl SessionShared {
    pub(crate) fn state(&self) -> State {
        self.session.lock().state
    }

    pub(crate) fn session_id(&self) -> i64 {
        self.session.lock().id
    }

    /// Whether the live connection is to a read-only server (Java's
    /// `States.CONNECTEDREADONLY`): connected, reads served, writes failing
    /// with `NotReadOnly`.
    pub(crate) fn is_read_only(&self) -> bool {
        let s = self.session.lock();
        s.state == State::Connected && s.read_only
    }

    /// The live connection's number when it is to a read-write server
    /// (`None` while not connected, or connected read-only). A reply read
    /// between two calls that return the same number came over that
    /// connection, from a read-write server: what a grant needs as proof
    /// (a read-only server's data may lag the quorum's without bound).
    pub(crate) fn read_write_connection(&self) -> Option<u64> {
        let s = self.session.lock();
        (s.state == State::Connected && !s.read_only).then_some(s.connections)
    }

    pub(crate) fn session_password(&self) -> Vec<u8> {
        self.session.lock().password.clone()
    }

    pub(crate) fn negotiated_timeout(&self) -> Duration {
        self.session.lock().negotiated
    }

    /// How long a sent request waits for its reply: the builder's setting,
    /// or twice the session timeout the server granted (the requested one
    /// before the first session). Not the requested one: a server that
    /// raised a too-short request to its `minSessionTimeout` would otherwise
    /// leave calls a few milliseconds for their replies.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.settings
            .request_timeout
            .unwrap_or_else(|| self.negotiated_timeout() * 2)
            .max(Duration::from_millis(1))
    }

    /// How long a call waits for a connection: the builder's setting, or the
    /// session timeout the server granted (the requested one before the
    /// first session).
    pub(crate) fn connect_wait(&self) -> Duration {
        self.settings
            .connect_wait
            .unwrap_or_else(|| self.negotiated_timeout())
    }

    pub(crate) fn last_zxid(&self) -> i64 {
        self.last_zxid.load(Ordering::Relaxed)
    }

    /// Tells a connection-state change, once per change, as Java's
    /// `ZKWatchManager.materialize(state, None, path)` does: to the default
    /// watcher and to every distinct per-watch watcher registered in any table,
    /// each once. Registrations stay on Disconnected / SyncConnected (they are set
    /// again on the reconnect); a session's end (Expired, AuthFailed, Closed)
    /// clears them after telling them.
    fn tell_state(&self, s: &mut Session, ks: KeeperState) {
        if s.told != Some(ks) {
            metric!(session_state(state_name(ks), reconnected(s.told, ks)));
            s.told = Some(ks);
            info!("session {:#x}: {ks:?}", s.id);
            let mut watchers = vec![self.default_watcher.clone()];
            {
                let mut m = self.watches.lock();
                // Distinct already; only the default watcher may be among them.
                let all = m.all_watchers();
                if all.iter().any(|w| same(w, &self.default_watcher)) {
                    watchers.clear();
                }
                watchers.extend(all);
                if matches!(
                    ks,
                    KeeperState::Expired | KeeperState::AuthFailed | KeeperState::Closed
                ) {
                    m.clear();
                }
            }
            let _ = self.enqueue(EventMsg::Deliver(watchers, WatchedEvent::state(ks)));
        }
    }

    /// Wakes `wake` when the session ends (Expired, AuthFailed, Closed) or
    /// `close` is called, from the thread that ends it, until
    /// [`forget_end_wake`](Self::forget_end_wake) with the returned id. Wakes it
    /// at once when the session has ended already. A wait registered this way
    /// needs no periodic look at the session: its end comes even while the
    /// event thread is held up.
    pub(crate) fn wake_at_end(&self, wake: &Arc<Wake>) -> u64 {
        self.end_wakes.register(wake, || self.state().is_terminal())
    }

    /// Unregisters a [`wake_at_end`](Self::wake_at_end).
    pub(crate) fn forget_end_wake(&self, id: u64) {
        self.end_wakes.forget(id);
    }

    /// Wakes every registered end wake (never blocks: each only sets a flag).
    fn wake_end_waits(&self) {
        self.end_wakes.wake_all();
    }

    /// Waits until connected, a terminal state, or `deadline`.
    pub(crate) fn wait_connected(&self, deadline: Instant) -> Result<(), Error> {
        let mut s = self.session.lock();
        loop {
            if let Some(e) = Error::for_ended_session(s.state) {
                return Err(self.with_auth_reason(e));
            }
            if s.closing {
                return Err(Error::Closed);
            }
            if s.state == State::Connected {
                return Ok(());
            }
            #[cfg(feature = "tls")]
            if let Some(e) = self.tls_refused(&s) {
                return Err(Error::Tls(e));
            }
            if let Some(e) = self.known_failure(&s) {
                return Err(e);
            }
            if self.session_cv.wait_until(&mut s, deadline).timed_out() {
                return match Error::for_ended_session(s.state) {
                    Some(e) => Err(self.with_auth_reason(e)),
                    None if s.state == State::Connected => Ok(()),
                    None => Err(Error::zk_code(ZkError::ConnectionLoss)),
                };
            }
        }
    }

    /// `AuthFailed` with the reason the handle ended for, when known
    /// ([`Error::Connect`]); any other error unchanged.
    fn with_auth_reason(&self, e: Error) -> Error {
        match (e.code(), self.auth_failure.lock().clone()) {
            (Some(ZkError::AuthFailed), Some(reason)) => Error::Connect {
                code: ZkError::AuthFailed,
                cause: ConnectCause::AuthFailed,
                reason,
            },
            _ => e,
        }
    }

    /// Records why a failed connect attempt on `host` failed when the cause
    /// lasts (see [`HostFailure::of`]), and wakes the waits for a
    /// connection; forgets the host's cause on any other failure.
    fn note_failure(&self, host: &str, e: &io::Error) {
        match HostFailure::of(e) {
            Some(failure) => {
                self.failed_hosts.lock().insert(host.to_string(), failure);
                let _s = self.session.lock();
                self.session_cv.notify_all();
            }
            None => {
                self.failed_hosts.lock().remove(host);
            }
        }
    }

    /// The error `connect` and waiting calls fail with at once when no
    /// session was ever established and the last attempt on every host
    /// failed for a lasting cause: `ConnectionLoss` ([`Error::Connect`])
    /// with the cause and each server's. A session that existed keeps
    /// retrying until it expires (as Java's).
    fn known_failure(&self, s: &Session) -> Option<Error> {
        if s.id != 0 {
            return None;
        }
        // The list as it is now (`update_server_list` may have changed it),
        // read before the failures are locked.
        let current = self.hosts.lock().hosts().to_vec();
        let failed = self.failed_hosts.lock();
        let mut hosts: Vec<&str> = current.iter().map(String::as_str).collect();
        hosts.dedup();
        let each: Vec<(&str, &HostFailure)> = hosts
            .iter()
            .map(|h| failed.get(*h).map(|f| (*h, f)))
            .collect::<Option<_>>()?;
        let first = each.first()?.1.cause;
        let cause = if each.iter().all(|(_, f)| f.cause == first) {
            first
        } else {
            ConnectCause::Several
        };
        let reason = if cause == ConnectCause::Refused {
            format!(
                "connection refused by {} (nothing listens there: is ZooKeeper running, on \
                 that port?)",
                hosts.join(", ")
            )
        } else {
            let each: Vec<String> = each
                .iter()
                .map(|(h, f)| format!("{h}: {}", f.text))
                .collect();
            each.join("; ")
        };
        Some(Error::Connect {
            code: ZkError::ConnectionLoss,
            cause,
            reason,
        })
    }

    /// Records a failed connect attempt on `host` if it failed on TLS (a
    /// certificate or protocol problem, not the network); whether it did.
    #[cfg(feature = "tls")]
    fn tls_failure(&self, host: &str, e: &io::Error) -> bool {
        let Some(tls) = crate::client::TlsError::in_io(e) else {
            self.tls_failed.lock().remove(host);
            return false;
        };
        warn!("TLS with {host} failed: {tls}");
        self.tls_failed.lock().insert(host.to_string(), tls.clone());
        let _s = self.session.lock();
        self.session_cv.notify_all();
        true
    }

    /// The TLS failure `connect` and waiting calls fail with: no session was
    /// ever established and the last attempt on every host failed on TLS.
    #[cfg(feature = "tls")]
    fn tls_refused(&self, s: &Session) -> Option<crate::client::TlsError> {
        if s.id != 0 {
            return None;
        }
        let failed = self.tls_failed.lock();
        let all = self
            .settings
            .hosts
            .iter()
            .all(|h| failed.contains_key(h.as_str()));
        if all {
            self.settings
                .hosts
                .first()
                .and_then(|h| failed.get(h.as_str()).cloned())
        } else {
            None
        }
    }

    fn touch_send(&self) {
        self.last_send_nanos
            .store(self.now_nanos(), Ordering::Relaxed);
    }

    fn touch_heard(&self) {
        self.last_heard_nanos
            .store(self.now_nanos(), Ordering::Relaxed);
    }

    /// Nanoseconds since `epoch`, for the atomics above.
    fn now_nanos(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// `Some(silence)` when the client declares the session expired: it exists
    /// (an id), and no server has been heard from for a whole negotiated
    /// session timeout. A server that has not heard the client for that long
    /// has expired it, so waiting longer only lets a lock holder believe in a
    /// lock another process may hold now. The server may still hold it (a
    /// one-way partition: it hears the client's pings), which is why `close()`
    /// asks the server after such an expiry. (The Java client keeps trying
    /// and learns of the expiry only on reconnect; Curator simulates the
    /// expiry the same way.)
    fn surely_expired(&self) -> Option<Duration> {
        let (silence, negotiated) = self.session_silence()?;
        (silence >= negotiated).then_some(silence)
    }

    /// How long until [`surely_expired`](Self::surely_expired) holds (`None` when
    /// there is no session yet).
    fn until_surely_expired(&self) -> Option<Duration> {
        let (silence, negotiated) = self.session_silence()?;
        Some(negotiated.saturating_sub(silence))
    }

    /// How long no server has been heard from, and the negotiated timeout;
    /// `None` before the session exists.
    fn session_silence(&self) -> Option<(Duration, Duration)> {
        let (id, negotiated) = {
            let s = self.session.lock();
            (s.id, s.negotiated)
        };
        if id == 0 {
            return None;
        }
        Some((self.since(&self.last_heard_nanos), negotiated))
    }

    /// How long since the time recorded in `at` (one of the `*_nanos`
    /// atomics: nanoseconds since `epoch`).
    fn since(&self, at: &AtomicU64) -> Duration {
        let last = Duration::from_nanos(at.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// Ends the session: closeSession when connected, then stops the
    /// connection thread; joining is the handle's job. `Ok` only when the
    /// session is known to be gone on the server
    /// ([`ended_on_server`](Self::ended_on_server)): the server answered
    /// closeSession, or said the session had expired (or the handle had ended
    /// already by a refused authentication, or never had a session). A
    /// closeSession whose answer did not come (the connection dropped, e.g.
    /// because another handle took the session over, or the server is cut
    /// off, or the server dropped it because another close of the session
    /// came first: it answers no request of a session that is gone), and a
    /// session the client declared expired itself (the server may still hold
    /// it), are closed on a fresh connection with the session's id and
    /// password, closeSession right behind the ConnectRequest, until the close
    /// bound ([`close_bound`](Self::close_bound)); then `ConnectionLoss`. The
    /// live connection's answer is awaited for half the bound. A later call
    /// tries again the same way.
    pub(crate) fn close(&self) -> Result<(), Error> {
        self.abandon.store(true, Ordering::SeqCst);
        let start = Instant::now();
        let bound = self.close_bound();
        let deadline = start + bound;
        let (first, state, id) = {
            let mut s = self.session.lock();
            let first = !s.closing && !s.state.is_terminal();
            s.closing = true;
            (first, s.state, s.id)
        };
        self.session_cv.notify_all();
        if first {
            // The waits of the layers above look at their session now (a
            // ZooKeeperWatcher's is closed already); they are woken again when
            // the state becomes Closed.
            self.wake_end_waits();
        }
        let mut outcome = if self.ended_on_server() {
            Ok(())
        } else if first && state == State::Connected {
            // Half the bound: a closeSession the server dropped unanswered
            // (its session ended by another close meanwhile; see
            // `close_remote`) is asked again on a new connection in the rest.
            self.close_on_connection(start + bound / 2)
        } else {
            Err(Error::zk_code(ZkError::ConnectionLoss))
        };
        self.shutdown_socket();
        if let Err(e) = outcome {
            debug!(
                "session {id:#x}: closeSession unanswered ({e}); closing it on a new connection"
            );
            outcome = self.close_remotely(id, deadline);
        }
        if outcome.is_ok() {
            self.close_confirmed.store(true, Ordering::SeqCst);
        }
        outcome
    }

    /// Whether the session is known to be gone on the server, so that a
    /// close needs no network: a server said so (it answered closeSession,
    /// or said the session had expired), the server refused the
    /// authentication, or there never was a session. A session the client
    /// declared expired itself is not gone until a server says so.
    pub(crate) fn ended_on_server(&self) -> bool {
        if self.close_confirmed.load(Ordering::SeqCst) {
            return true;
        }
        let s = self.session.lock();
        s.id == 0
            || s.state == State::AuthFailed
            || (s.state == State::Expired && !self.declared_expired.load(Ordering::SeqCst))
    }

    /// Whether a drop should close the session in the background: the
    /// first time it is asked for a session not known gone on the server
    /// ([`ended_on_server`](Self::ended_on_server)); a drop after that finds
    /// the close done or under way.
    pub(crate) fn close_in_background(&self) -> bool {
        !self.ended_on_server() && !self.background_close.swap(true, Ordering::SeqCst)
    }

    /// How long `close()` tries to have the session closed on the server:
    /// 2/3 of the negotiated session timeout (a server that has not answered
    /// by then is as good as cut off), at most 2 s, at least 100 ms.
    fn close_bound(&self) -> Duration {
        (self.negotiated_timeout() * 2 / 3)
            .min(Duration::from_secs(2))
            .max(Duration::from_millis(100))
    }

    /// closeSession on the current connection, its answer awaited by
    /// `deadline`: `Ok` when the server answered it (or said the session
    /// had expired).
    fn close_on_connection(&self, deadline: Instant) -> Result<(), Error> {
        let frame = Writer::request(0, op::CLOSE_SESSION).finish();
        let req = Outgoing {
            opcode: op::CLOSE_SESSION,
            frame,
            reg: None,
            rewatch: None,
        };
        let Ok(slot) = self.send(req) else {
            return Err(Error::zk_code(ZkError::ConnectionLoss));
        };
        match self.await_reply(&slot, deadline) {
            Ok(_) => {
                debug!("session closed by the server");
                Ok(())
            }
            Err(e) if e.code() == Some(ZkError::SessionExpired) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Closes session `id` on the server from this thread, on connections of
    /// its own (see [`close_remote`](Self::close_remote)), host after host
    /// with a short backoff, until `deadline`: `Ok` when a server answered
    /// closeSession or said the session had expired; else `ConnectionLoss`.
    fn close_remotely(&self, id: i64, deadline: Instant) -> Result<(), Error> {
        let password = self.session_password();
        let hosts = &self.server_list();
        let mut next = usize::try_from(random_u64() % hosts.len().max(1) as u64).unwrap_or(0);
        let mut failures = 0u32;
        while !hosts.is_empty() && Instant::now() < deadline {
            let host = &hosts[next % hosts.len()];
            next = next.wrapping_add(1);
            match self.close_remote(host, id, &password, deadline, false) {
                Ok(gone) => {
                    info!("session {id:#x}: {gone} on {host}");
                    return Ok(());
                }
                Err(CloseFailure::Final(e)) => {
                    warn!("session {id:#x}: cannot close it on {host}: {e}");
                    break;
                }
                Err(CloseFailure::Retry(e)) => {
                    debug!("session {id:#x}: closing it on {host}: {e}");
                    failures = failures.saturating_add(1);
                    let exp = failures.saturating_sub(1).min(7);
                    let delay =
                        jitter(Duration::from_millis(10 << exp).min(Duration::from_secs(1)))
                            .min(deadline.saturating_duration_since(Instant::now()));
                    thread::sleep(delay);
                }
            }
        }
        warn!("session {id:#x}: no server confirmed its close; it may live until it expires");
        Err(Error::zk_code(ZkError::ConnectionLoss))
    }

    /// The servers, in the order they are tried.
    pub(crate) fn server_list(&self) -> Vec<String> {
        self.hosts.lock().hosts().to_vec()
    }

    /// The server of the live connection (`None` while not connected).
    pub(crate) fn current_server(&self) -> Option<String> {
        if self.state() != State::Connected {
            return None;
        }
        self.hosts.lock().current().map(str::to_string)
    }

    /// Replaces the server list (see [`HostList::update`]); when this client
    /// must move, its connection is ended by the connection thread (never
    /// waiting here: a watcher may call this on the event thread) and the
    /// session reconnects to the server the rule picks, keeping its id.
    /// Whether it moves.
    pub(crate) fn update_server_list(&self, hosts: Vec<String>) -> bool {
        let moves = {
            let mut list = self.hosts.lock();
            let moves = list.update(hosts, &mut unit_random);
            if moves {
                // Read by the connection thread while serving; a handshake
                // under way resets it when done (see `HostList::connected`).
                self.move_requested.store(true, Ordering::SeqCst);
            }
            moves
        };
        if moves {
            self.poke_conn();
        }
        moves
    }

    fn shutdown_socket(&self) {
        let mut w = self.writer.lock();
        if let Some(s) = w.take() {
            s.shutdown();
        }
        // The connection thread may be waiting while callers read.
        self.poke_conn();
        // Anything deferred meanwhile is answered, not left behind.
        self.release_writer(w);
        // A handshake waiting for a silent server ends now, not at its timeout.
        if let Some(s) = self.handshaking.lock().take() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Makes the connection drop when the reply to the next request with one of
    /// `opcodes` arrives: the server applied it, the caller sees ConnectionLoss.
    #[cfg(feature = "testing")]
    pub(crate) fn lose_next_reply(&self, opcodes: &[i32]) {
        self.lose_replies.lock().extend_from_slice(opcodes);
    }

    /// Runs `hook` on the thread of the next caller that takes the read side,
    /// before it reads: it holds the read side meanwhile (a step hook that
    /// forces what another thread's frames meet while a caller reads).
    #[cfg(feature = "testing")]
    pub(crate) fn on_next_caller_read(&self, hook: Box<dyn FnOnce() + Send>) {
        *self.caller_read_hook.lock() = Some(hook);
    }

    /// Every request write from now on is followed by `pause`, the writer
    /// lock held, so that two writes reach the server `pause` apart.
    #[cfg(feature = "testing")]
    pub(crate) fn pause_after_writes(&self, pause: Duration) {
        *self.write_pause.lock() = pause;
    }

    #[cfg(feature = "testing")]
    fn take_lost_reply(&self, opcode: i32) -> bool {
        let mut l = self.lose_replies.lock();
        if l.contains(&opcode) {
            l.clear();
            true
        } else {
            false
        }
    }
}

/// The state's name for the `state` label (Java's `KeeperState` names).
#[cfg(feature = "metrics")]
fn state_name(ks: KeeperState) -> &'static str {
    match ks {
        KeeperState::Disconnected => "Disconnected",
        KeeperState::SyncConnected => "SyncConnected",
        KeeperState::AuthFailed => "AuthFailed",
        KeeperState::ConnectedReadOnly => "ConnectedReadOnly",
        KeeperState::SaslAuthenticated => "SaslAuthenticated",
        KeeperState::Closed => "Closed",
        KeeperState::Expired => "Expired",
    }
}

/// Whether telling `now` after `told` is a reconnect of the same session.
#[cfg(feature = "metrics")]
fn reconnected(told: Option<KeeperState>, now: KeeperState) -> bool {
    matches!(
        (told, now),
        (
            Some(KeeperState::Disconnected),
            KeeperState::SyncConnected | KeeperState::ConnectedReadOnly
        )
    )
}

/// A connect attempt's failure whose cause lasts: another try within the
/// connect wait would fail the same way ([`SessionShared::known_failure`]).
#[derive(Debug, Clone)]
pub(super) struct HostFailure {
    cause: ConnectCause,
    /// The cause in words, for [`Error::Connect`]'s reason.
    text: String,
}

impl HostFailure {
    /// `e` as an I/O error that [`HostFailure::of`] knows again.
    pub(super) fn into_io(cause: ConnectCause, text: String) -> io::Error {
        io::Error::other(HostFailure { cause, text })
    }

    /// The lasting cause of a failed attempt: refused by every address
    /// (`ConnectionRefused`), or one [`into_io`](Self::into_io) made (a name
    /// that does not resolve, bytes that are not ZooKeeper's).
    fn of(e: &io::Error) -> Option<HostFailure> {
        if e.kind() == io::ErrorKind::ConnectionRefused {
            return Some(HostFailure {
                cause: ConnectCause::Refused,
                text: "connection refused".into(),
            });
        }
        e.get_ref()?.downcast_ref::<HostFailure>().cloned()
    }
}

impl std::fmt::Display for HostFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for HostFailure {}
