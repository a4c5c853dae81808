//! The session layer: one connection thread (connect, handshake, read replies and
//! notifications, ping, detect dead connections, reconnect) and one event thread
//! (calls watchers). Callers write their request frames themselves, under the
//! writer lock, and block on their own reply, matched by xid.
//!
//! Timers follow the Java client (`ClientCnxn`): read timeout = 2/3 of the
//! negotiated session timeout; a ping when nothing was sent for half of it; a
//! connect timeout per attempt of session timeout / number of hosts.

use std::collections::{HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use log::{debug, error, info, trace, warn};
use parking_lot::{Condvar, Mutex};

use super::connect::strip_chroot;
use super::proto::{self, op, xid, ConnectResponse, Reader, ReplyHeader, Writer};
use super::watches::{same, Kind, WatchManager, WatcherRef};
use crate::deadline::Deadline;
use crate::error::{Error, ZkError};
use crate::types::{EventType, KeeperState, State, WatchedEvent};
use crate::util::{jitter, shuffle};

/// What a caller gets back: the reply body, or the failure.
pub(crate) type Reply = Result<Vec<u8>, Error>;

/// Queued event-thread messages past which a warning is logged (see
/// [`SessionShared::enqueue`]).
pub(crate) const EVENT_QUEUE_WARN: usize = 10_000;

/// The most a single SetWatches packet carries (the Java client's limit).
const SET_WATCHES_MAX: usize = 128 * 1024;

/// A watch to register when the reply arrives.
#[derive(Clone)]
pub(crate) struct WatchReg {
    /// `exists`: registered as a data watch on success, an exist watch on NoNode.
    pub(crate) exists: bool,
    pub(crate) kind: Kind,
    pub(crate) path: String,
    pub(crate) watcher: WatcherRef,
}

/// A request frame on its way out, with what its reply needs.
struct Outgoing {
    opcode: i32,
    frame: Vec<u8>,
    reg: Option<WatchReg>,
    rewatch: Option<String>,
}

/// A callback for an asynchronous call: run on the event thread with the reply.
pub(crate) type Callback = Box<dyn FnOnce(Reply) + Send>;

/// Where a reply goes: a blocked caller, or a callback on the event thread.
enum ReplyTo {
    Caller(Sender<Reply>),
    Callback(Callback),
}

struct Pending {
    xid: i32,
    opcode: i32,
    to: ReplyTo,
    reg: Option<WatchReg>,
    /// removeWatches: the client path whose remaining watches are set again
    /// when the reply arrives (see [`SessionShared::call_remove_watches`]).
    rewatch: Option<String>,
}

enum EventMsg {
    Deliver(Vec<WatcherRef>, WatchedEvent),
    Answer(Callback, Reply),
    Stop,
}

/// Why a connection ended (its fields are read through `Debug`, in logs).
#[derive(Debug)]
#[allow(dead_code)]
enum ConnEnd {
    Io(io::Error),
    ReadTimeout(Duration),
    /// A ping unanswered for the read timeout (bytes may still flow).
    PingTimeout(Duration),
    Protocol(String),
    AuthFailed,
    Closing,
    #[cfg(feature = "testing")]
    Injected,
}

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
}

/// Settings fixed at connect time.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) hosts: Vec<String>,
    pub(crate) chroot: Option<String>,
    pub(crate) session_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) connect_wait: Duration,
    pub(crate) session_id: i64,
    pub(crate) password: Vec<u8>,
    /// Frames from a server must be shorter than this (Java's `jute.maxbuffer`).
    pub(crate) max_buffer: usize,
    /// The most one connect attempt (TCP connect, then the whole
    /// ConnectRequest/ConnectResponse exchange) may take.
    pub(crate) handshake_timeout: Duration,
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
    /// The connection's write half; `None` while not connected.
    writer: Mutex<Option<TcpStream>>,
    /// The socket of a handshake in progress, so that `close` can end it.
    handshaking: Mutex<Option<TcpStream>>,
    pending: Mutex<VecDeque<Pending>>,
    auth_waiters: Mutex<VecDeque<Option<Sender<Reply>>>>,
    auth: Mutex<Vec<(String, Vec<u8>)>>,
    pub(crate) watches: Mutex<WatchManager>,
    events: Sender<EventMsg>,
    next_xid: AtomicI32,
    epoch: Instant,
    last_send_nanos: AtomicU64,
    /// When a byte last came from a server (since `epoch`; 0 = the start).
    last_heard_nanos: AtomicU64,
    #[cfg(feature = "testing")]
    lose_replies: Mutex<Vec<i32>>,
}

impl std::fmt::Debug for SessionShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.session.lock();
        f.debug_struct("SessionShared")
            .field("hosts", &self.settings.hosts)
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
    };
    let shared = Arc::new(SessionShared {
        settings,
        default_watcher,
        session: Mutex::new(session),
        session_cv: Condvar::new(),
        last_zxid: AtomicI64::new(0),
        abandon: AtomicBool::new(false),
        queue_warned: AtomicBool::new(false),
        writer: Mutex::new(None),
        handshaking: Mutex::new(None),
        pending: Mutex::new(VecDeque::new()),
        auth_waiters: Mutex::new(VecDeque::new()),
        auth: Mutex::new(Vec::new()),
        watches: Mutex::new(WatchManager::default()),
        events: tx,
        next_xid: AtomicI32::new(1),
        epoch: Instant::now(),
        last_send_nanos: AtomicU64::new(0),
        last_heard_nanos: AtomicU64::new(0),
        #[cfg(feature = "testing")]
        lose_replies: Mutex::new(Vec::new()),
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

fn run_events(rx: Receiver<EventMsg>) {
    for msg in rx {
        match msg {
            EventMsg::Deliver(watchers, event) => {
                for w in watchers {
                    let ev = event.clone();
                    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| w.process(ev))) {
                        let why = panic
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "non-string panic".into());
                        error!("a watcher panicked on {event}: {why}");
                    }
                }
            }
            EventMsg::Answer(callback, reply) => {
                if catch_unwind(AssertUnwindSafe(|| callback(reply))).is_err() {
                    error!("an async callback panicked");
                }
            }
            EventMsg::Stop => break,
        }
    }
    trace!("event thread ends");
}

impl SessionShared {
    // ---- state -------------------------------------------------------------

    pub(crate) fn state(&self) -> State {
        self.session.lock().state
    }

    pub(crate) fn session_id(&self) -> i64 {
        self.session.lock().id
    }

    pub(crate) fn session_password(&self) -> Vec<u8> {
        self.session.lock().password.clone()
    }

    pub(crate) fn negotiated_timeout(&self) -> Duration {
        self.session.lock().negotiated
    }

    pub(crate) fn last_zxid(&self) -> i64 {
        self.last_zxid.load(Ordering::Relaxed)
    }

    /// Queues `msg` for the event thread.
    ///
    /// The event queue is unbounded, as Java's `EventThread` queue: the
    /// connection thread never blocks on it, so replies, pings and the session
    /// stay correct however slow a watcher is. A watcher stuck for good makes it
    /// grow: each queued event costs about 100 bytes plus its path and one
    /// `Arc` per watcher told (a callback: its reply). Past
    /// [`EVENT_QUEUE_WARN`] queued messages a warning is logged (once, again
    /// after the queue fell below half of it); [`ZooKeeper::queued_events`]
    /// reads the length. Bounding it would mean dropping events (a watch lost
    /// silently) or dropping the connection (the next reconnect replays the
    /// same events): neither keeps the session correct.
    ///
    /// [`ZooKeeper::queued_events`]: super::ZooKeeper::queued_events
    fn enqueue(&self, msg: EventMsg) -> Result<(), crossbeam_channel::SendError<EventMsg>> {
        let sent = self.events.send(msg);
        let len = self.events.len();
        if len >= EVENT_QUEUE_WARN {
            if !self.queue_warned.swap(true, Ordering::Relaxed) {
                warn!(
                    "{len} events wait for the event thread: a watcher or callback is slow or stuck"
                );
            }
        } else if len < EVENT_QUEUE_WARN / 2 {
            self.queue_warned.store(false, Ordering::Relaxed);
        }
        sent
    }

    /// Messages waiting for the event thread.
    pub(crate) fn queued_events(&self) -> usize {
        self.events.len()
    }

    /// Tells a connection-state change, once per change, as Java's
    /// `ZKWatchManager.materialize(state, None, path)` does: to the default
    /// watcher and to every distinct per-watch watcher registered in any table,
    /// each once. Registrations stay on Disconnected / SyncConnected (they are set
    /// again on the reconnect); a session's end (Expired, AuthFailed, Closed)
    /// clears them after telling them.
    fn tell_state(&self, s: &mut Session, ks: KeeperState) {
        if s.told != Some(ks) {
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

    /// Waits until connected, a terminal state, or `deadline`.
    pub(crate) fn wait_connected(&self, deadline: Instant) -> Result<(), Error> {
        let mut s = self.session.lock();
        loop {
            if let Some(e) = Error::for_ended_session(s.state) {
                return Err(e);
            }
            if s.closing {
                return Err(Error::Closed);
            }
            if s.state == State::Connected {
                return Ok(());
            }
            if self.session_cv.wait_until(&mut s, deadline).timed_out() {
                return match Error::for_ended_session(s.state) {
                    Some(e) => Err(e),
                    None if s.state == State::Connected => Ok(()),
                    None => Err(Error::zk_code(ZkError::ConnectionLoss)),
                };
            }
        }
    }

    // ---- requests ----------------------------------------------------------

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

    /// `Some(silence)` when the session must have expired: it exists (an id), and
    /// no server has been heard from for a whole negotiated session timeout. The
    /// server expires a session it has not heard from for that long, so waiting
    /// longer only lets a lock holder believe in a lock another process may hold
    /// now. (The Java client keeps trying and learns of the expiry only on
    /// reconnect; Curator simulates the expiry the same way.)
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
        let heard = Duration::from_nanos(self.last_heard_nanos.load(Ordering::Relaxed));
        Some((self.epoch.elapsed().saturating_sub(heard), negotiated))
    }

    fn since_send(&self) -> Duration {
        let last = Duration::from_nanos(self.last_send_nanos.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    fn xid(&self) -> i32 {
        loop {
            let x = self.next_xid.fetch_add(1, Ordering::Relaxed);
            if x > 0 {
                return x;
            }
            // Wrapped: start again at 1 (negative xids are reserved).
            let _ = self.next_xid.compare_exchange(
                x.wrapping_add(1),
                1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// Writes a request frame on the current connection and queues its reply
    /// slot; not connected: gives the request back, unsent.
    fn send(&self, req: Outgoing) -> Result<Receiver<Reply>, Outgoing> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        match self.send_to(req, ReplyTo::Caller(tx)) {
            Ok(()) => Ok(rx),
            Err(back) => Err(back.0),
        }
    }

    /// Answers a reply slot: wakes the caller, or queues the callback.
    fn answer(&self, to: ReplyTo, reply: Reply) {
        match to {
            ReplyTo::Caller(tx) => {
                let _ = tx.send(reply);
            }
            ReplyTo::Callback(callback) => {
                // The event thread has ended (the handle is dead): answer here.
                if let Err(crossbeam_channel::SendError(EventMsg::Answer(callback, reply))) =
                    self.enqueue(EventMsg::Answer(callback, reply))
                {
                    callback(reply);
                }
            }
        }
    }

    /// Sends a request without waiting (Java's async calls): `callback` gets the
    /// reply on the event thread, or `ConnectionLoss` at once when not connected
    /// (and when the connection is lost before the reply), or the session's end.
    pub(crate) fn call_async(
        &self,
        opcode: i32,
        frame: Vec<u8>,
        reg: Option<WatchReg>,
        callback: Callback,
    ) {
        let state = self.state();
        if let Some(e) = Error::for_ended_session(state) {
            // No event thread to answer on any more: answer here, never drop it.
            return callback(Err(e));
        }
        if state != State::Connected {
            return self.answer(
                ReplyTo::Callback(callback),
                Err(Error::zk_code(ZkError::ConnectionLoss)),
            );
        }
        let req = Outgoing {
            opcode,
            frame,
            reg,
            rewatch: None,
        };
        if let Err(back) = self.send_to(req, ReplyTo::Callback(callback)) {
            self.answer(back.1, Err(Error::zk_code(ZkError::ConnectionLoss)));
        }
    }

    /// Writes a request frame on the current connection and queues where its
    /// reply goes. Not connected: hands the request and `to` back, unsent.
    ///
    /// A failed write is a disconnect at once: the socket is shut down (the
    /// connection thread's read fails promptly and it reconnects), the state
    /// becomes `Connecting` before the writer lock is released (so the next
    /// callers wait for the reconnect instead of failing in a hot loop), and this
    /// request is answered with `ConnectionLoss`.
    fn send_to(&self, req: Outgoing, to: ReplyTo) -> Result<(), Box<(Outgoing, ReplyTo)>> {
        let mut w = self.writer.lock();
        let Some(stream) = w.as_mut() else {
            drop(w);
            return Err(Box::new((req, to)));
        };
        let Outgoing {
            opcode,
            mut frame,
            reg,
            rewatch,
        } = req;
        let xid = self.xid();
        proto::set_xid(&mut frame, xid);
        self.pending.lock().push_back(Pending {
            xid,
            opcode,
            to,
            reg,
            rewatch,
        });
        if let Err(e) = stream.write_all(&frame) {
            debug!("write failed: {e}; dropping the connection");
            self.write_failed(&mut w);
            drop(w);
            // Unless the connection thread's drain has answered it already.
            let mine = {
                let mut pending = self.pending.lock();
                let i = pending.iter().position(|p| p.xid == xid);
                i.and_then(|i| pending.remove(i))
            };
            if let Some(p) = mine {
                self.answer(p.to, Err(Error::zk_code(ZkError::ConnectionLoss)));
            }
            return Ok(());
        }
        self.touch_send();
        Ok(())
    }

    /// A write on the connection in `slot` failed (the writer lock is held): shut
    /// the socket down, forget it, and stop calling the session connected.
    fn write_failed(&self, slot: &mut Option<TcpStream>) {
        if let Some(s) = slot.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let mut s = self.session.lock();
        if s.state == State::Connected {
            s.state = State::Connecting;
        }
    }

    /// Sends a request and waits for its reply: waits for a connection first
    /// (up to `connect_wait`), then for the reply (up to `request_timeout`).
    pub(crate) fn call(
        &self,
        opcode: i32,
        frame: Vec<u8>,
        reg: Option<WatchReg>,
        deadline: Deadline,
    ) -> Reply {
        self.call_inner(opcode, frame, reg, None, deadline)
    }

    /// A removeWatches request for the client path `path`. ZooKeeper 3.8 keeps one
    /// entry per path and connection in each of its two watch tables, whatever the
    /// watch's mode, and knows only the types Children, Data and Any: a removal
    /// also drops server-side the watches this client still holds on `path` (a
    /// persistent watch lives in both tables). So when the reply arrives, the
    /// connection thread sets those again with SetWatches from the reply's zxid:
    /// a change after the removal still fires them, none fires twice.
    pub(crate) fn call_remove_watches(
        &self,
        frame: Vec<u8>,
        path: &str,
        deadline: Deadline,
    ) -> Reply {
        self.call_inner(
            op::REMOVE_WATCHES,
            frame,
            None,
            Some(path.to_string()),
            deadline,
        )
    }

    fn call_inner(
        &self,
        opcode: i32,
        frame: Vec<u8>,
        reg: Option<WatchReg>,
        rewatch: Option<String>,
        deadline: Deadline,
    ) -> Reply {
        // The caller's deadline caps both waits.
        let connect_by = deadline.min_after(self.settings.connect_wait);
        let mut req = Outgoing {
            opcode,
            frame,
            reg,
            rewatch,
        };
        let rx = loop {
            self.wait_connected(connect_by)?;
            match self.send(req) {
                Ok(rx) => break rx,
                // The connection went between the two steps: wait for the next.
                Err(back) => req = back,
            }
        };
        let reply_within = deadline.cap(self.settings.request_timeout);
        match rx.recv_timeout(reply_within) {
            Ok(reply) => reply,
            Err(_) => Err(Error::zk_code(ZkError::OperationTimeout)),
        }
    }

    /// Hands `event` to `watchers` on the event thread.
    pub(crate) fn deliver(&self, watchers: Vec<WatcherRef>, event: WatchedEvent) {
        if !watchers.is_empty() {
            let _ = self.enqueue(EventMsg::Deliver(watchers, event));
        }
    }

    /// `add_auth`: remembered for reconnects; waits for the server's answer.
    pub(crate) fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<(), Error> {
        self.auth.lock().push((scheme.to_string(), auth.to_vec()));
        self.wait_connected(Deadline::never().min_after(self.settings.connect_wait))?;
        let (tx, rx) = crossbeam_channel::bounded(1);
        {
            let mut w = self.writer.lock();
            let Some(stream) = w.as_mut() else {
                // Replayed on the next connection.
                return Ok(());
            };
            self.auth_waiters.lock().push_back(Some(tx));
            if stream.write_all(&auth_frame(scheme, auth)).is_err() {
                self.write_failed(&mut w);
            }
            self.touch_send();
        }
        match rx.recv_timeout(self.settings.request_timeout) {
            Ok(Ok(_)) => Ok(()),
            // The packet is replayed after the reconnect.
            Ok(Err(e)) if e.is_retryable() => Ok(()),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::zk_code(ZkError::OperationTimeout)),
        }
    }

    // ---- close -------------------------------------------------------------

    /// Ends the session: closeSession when connected (bounded wait), then stops
    /// the connection thread. Idempotent; joining is the handle's job.
    pub(crate) fn close(&self) {
        self.abandon.store(true, Ordering::SeqCst);
        let connected = {
            let mut s = self.session.lock();
            if s.closing || s.state.is_terminal() {
                s.closing = true;
                self.session_cv.notify_all();
                drop(s);
                self.shutdown_socket();
                return;
            }
            s.closing = true;
            s.state == State::Connected
        };
        self.session_cv.notify_all();
        if connected {
            let frame = Writer::request(0, op::CLOSE_SESSION).finish();
            let req = Outgoing {
                opcode: op::CLOSE_SESSION,
                frame,
                reg: None,
                rewatch: None,
            };
            if let Ok(rx) = self.send(req) {
                let bound = (self.negotiated_timeout() * 2 / 3).min(Duration::from_secs(2));
                match rx.recv_timeout(bound) {
                    Ok(Ok(_)) => debug!("session closed by the server"),
                    Ok(Err(e)) => debug!("closeSession: {e}"),
                    Err(_) => debug!("closeSession: no answer within {bound:?}"),
                }
            }
        }
        self.shutdown_socket();
    }

    fn shutdown_socket(&self) {
        if let Some(s) = self.writer.lock().take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        // A handshake waiting for a silent server ends now, not at its timeout.
        if let Some(s) = self.handshaking.lock().take() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    // ---- testing hook ------------------------------------------------------

    /// Makes the connection drop when the reply to the next request with one of
    /// `opcodes` arrives: the server applied it, the caller sees ConnectionLoss.
    #[cfg(feature = "testing")]
    pub(crate) fn lose_next_reply(&self, opcodes: &[i32]) {
        self.lose_replies.lock().extend_from_slice(opcodes);
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

    // ---- the connection thread ---------------------------------------------

    fn run(self: Arc<Self>) {
        let mut hosts = self.settings.hosts.clone();
        shuffle(&mut hosts);
        let mut next = 0usize;
        let mut failures = 0u32;
        let mut expired_here = false;
        let terminal = loop {
            if self.session.lock().closing {
                break Terminal::Closed;
            }
            if let Some(silence) = self.surely_expired() {
                info!(
                    "no server heard from for {silence:?}, the session timeout: the session has expired; not reconnecting"
                );
                expired_here = true;
                break Terminal::Expired;
            }
            let host = &hosts[next % hosts.len()];
            next = next.wrapping_add(1);
            match self.handshake(host, hosts.len()) {
                Ok(None) => break Terminal::Expired,
                Ok(Some((stream, reconnect))) => {
                    failures = 0;
                    let end = match self.on_connected(&stream, reconnect) {
                        Ok(()) => self.serve(&stream),
                        Err(e) => ConnEnd::Io(e),
                    };
                    // Through the reader's own handle, never the writer lock: a
                    // caller blocked writing into a dead link fails at once.
                    let _ = stream.shutdown(Shutdown::Both);
                    let closing = self.session.lock().closing;
                    match &end {
                        ConnEnd::Closing => {}
                        _ if closing => debug!("connection to {host} closed ({end:?})"),
                        ConnEnd::AuthFailed => info!("authentication failed on {host}"),
                        ConnEnd::ReadTimeout(d) => info!(
                            "no answer from {host} for {d:?}: closing the connection and reconnecting"
                        ),
                        ConnEnd::PingTimeout(d) => info!(
                            "a ping to {host} unanswered for {d:?}: closing the connection and reconnecting"
                        ),
                        e => info!("connection to {host} lost ({e:?}); reconnecting"),
                    }
                    // An auth failure ends the handle: no Disconnected before
                    // AuthFailed, and pending calls fail with AuthFailed.
                    if let ConnEnd::AuthFailed = end {
                        break Terminal::AuthFailed;
                    }
                    self.on_disconnected();
                    if let ConnEnd::Closing = end {
                        break Terminal::Closed;
                    }
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    // 10 ms, 20 ms, ... up to 1 s, jittered: a dead ensemble costs
                    // no CPU, a blip costs little time.
                    let exp = failures.saturating_sub(1).min(7);
                    let mut delay =
                        jitter(Duration::from_millis(10 << exp).min(Duration::from_secs(1)));
                    if let Some(left) = self.until_surely_expired() {
                        delay = delay.min(left);
                    }
                    debug!("connect to {host} failed: {e}; next attempt in {delay:?}");
                    let mut s = self.session.lock();
                    if !s.closing {
                        self.session_cv.wait_for(&mut s, delay);
                    }
                }
            }
        };
        self.finish(terminal);
        if expired_here {
            self.close_expired_session(&hosts, next);
        }
    }

    /// After declaring the session expired on its own (no server heard for a
    /// whole session timeout), the client closes it on the server: the server
    /// may still hold it (a one-way partition; a server restarted from its
    /// snapshot restores sessions), and its ephemeral nodes would block others
    /// for up to another session timeout. Reconnects with the old id and
    /// password only to send closeSession; tells nobody anything (the handle is
    /// dead, Expired was delivered) and gives up after one more negotiated
    /// session timeout, or at once when `close()` is called, so close and drop
    /// stay bounded as before.
    fn close_expired_session(&self, hosts: &[String], mut next: usize) {
        let (id, password, negotiated) = {
            let s = self.session.lock();
            (s.id, s.password.clone(), s.negotiated)
        };
        if id == 0 || hosts.is_empty() {
            return;
        }
        let until = Instant::now() + negotiated;
        let mut failures = 0u32;
        while !self.abandon.load(Ordering::SeqCst) && Instant::now() < until {
            let host = &hosts[next % hosts.len()];
            next = next.wrapping_add(1);
            match self.close_remote(host, id, &password, until) {
                Ok(gone) => {
                    info!("session {id:#x}: {gone} on {host}");
                    return;
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    let exp = failures.saturating_sub(1).min(7);
                    let delay =
                        jitter(Duration::from_millis(10 << exp).min(Duration::from_secs(1)))
                            .min(until.saturating_duration_since(Instant::now()));
                    debug!("closing expired session {id:#x} on {host}: {e}");
                    let mut s = self.session.lock();
                    if !self.abandon.load(Ordering::SeqCst) {
                        self.session_cv.wait_for(&mut s, delay);
                    }
                }
            }
        }
        debug!("gave up closing expired session {id:#x} on the server");
    }

    /// One attempt of [`close_expired_session`](Self::close_expired_session).
    fn close_remote(
        &self,
        host: &str,
        id: i64,
        password: &[u8],
        until: Instant,
    ) -> io::Result<&'static str> {
        let deadline = (Instant::now() + self.settings.handshake_timeout).min(until);
        let addr = host
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
        let mut stream = TcpStream::connect_timeout(&addr, left_until(deadline)?)?;
        *self.handshaking.lock() = Some(stream.try_clone()?);
        let result = (|| {
            if self.abandon.load(Ordering::SeqCst) {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "closed"));
            }
            stream.set_nodelay(true)?;
            stream.set_write_timeout(Some(left_until(deadline)?))?;
            let requested =
                i32::try_from(self.settings.session_timeout.as_millis()).unwrap_or(i32::MAX);
            stream.write_all(&proto::connect_request(
                self.last_zxid(),
                requested,
                id,
                password,
            ))?;
            let body = read_frame_by(&mut stream, 4096, deadline)?;
            let resp = ConnectResponse::read(&mut Reader::new(&body))
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
            if resp.timeout_ms <= 0 {
                return Ok("already expired");
            }
            if resp.session_id != id {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "server answered with another session id",
                ));
            }
            stream.write_all(&Writer::request(1, op::CLOSE_SESSION).finish())?;
            // Its answer (or the server closing the connection) ends it.
            let _ = read_frame_by(&mut stream, self.settings.max_buffer, deadline);
            Ok("closed")
        })();
        self.handshaking.lock().take();
        let _ = stream.shutdown(Shutdown::Both);
        result
    }

    /// TCP connect + ConnectRequest/Response. `Ok(None)`: the session expired.
    /// `Ok(Some((stream, reconnect)))`: connected; `reconnect` when the session
    /// already existed.
    fn handshake(&self, host: &str, n_hosts: usize) -> io::Result<Option<(TcpStream, bool)>> {
        let (id, password, negotiated) = {
            let s = self.session.lock();
            (s.id, s.password.clone(), s.negotiated)
        };
        let n = u32::try_from(n_hosts).unwrap_or(u32::MAX).max(1);
        // A live server answers a ConnectRequest in milliseconds; one in its
        // start-up window accepts and never answers. Bound the attempt by the
        // handshake timeout, not only by the session's share of the hosts.
        let mut attempt = (negotiated / n)
            .min(self.settings.handshake_timeout)
            .max(Duration::from_millis(100));
        // Never wait on a silent server past the point where the session must
        // have expired.
        if let Some(left) = self.until_surely_expired() {
            attempt = attempt.min(left.max(Duration::from_millis(10)));
        }
        let deadline = Instant::now() + attempt;
        let addrs: Vec<SocketAddr> = host.to_socket_addrs()?.collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "host resolved to no address");
        let mut stream = None;
        for addr in addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match TcpStream::connect_timeout(&addr, left) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let stream = stream.ok_or(last)?;
        *self.handshaking.lock() = Some(stream.try_clone()?);
        // After publishing the socket: a close() before it is seen here, one
        // after it shuts the socket down.
        let result = if self.session.lock().closing {
            Err(io::Error::new(io::ErrorKind::Interrupted, "closing"))
        } else {
            self.exchange_connect(stream, host, id, &password, deadline)
        };
        self.handshaking.lock().take();
        result
    }

    /// The ConnectRequest/ConnectResponse exchange of [`handshake`](Self::handshake).
    fn exchange_connect(
        &self,
        mut stream: TcpStream,
        host: &str,
        id: i64,
        password: &[u8],
        deadline: Instant,
    ) -> io::Result<Option<(TcpStream, bool)>> {
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(left_until(deadline)?))?;
        let requested =
            i32::try_from(self.settings.session_timeout.as_millis()).unwrap_or(i32::MAX);
        let frame = proto::connect_request(self.last_zxid(), requested, id, password);
        stream.write_all(&frame)?;
        let mut len = [0u8; 4];
        read_by(&mut stream, &mut len, deadline)?;
        let len = i32::from_be_bytes(len);
        if !(0..=4096).contains(&len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad connect response length {len}"),
            ));
        }
        let mut body = vec![0u8; len as usize];
        read_by(&mut stream, &mut body, deadline)?;
        let resp = ConnectResponse::read(&mut Reader::new(&body))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
        if resp.timeout_ms <= 0 {
            if id != 0 {
                info!("session {id:#x} expired (told by {host})");
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "server refused a new session",
            ));
        }
        if id != 0 && resp.session_id != id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "server answered with another session id",
            ));
        }
        self.touch_heard();
        let mut s = self.session.lock();
        s.id = resp.session_id;
        s.password = resp.password;
        s.negotiated = Duration::from_millis(resp.timeout_ms as u64);
        debug!(
            "connected to {host}: session {:#x}, timeout {:?}",
            s.id, s.negotiated
        );
        Ok(Some((stream, id != 0)))
    }

    /// Replays auth and watches, then opens the connection to callers.
    fn on_connected(&self, stream: &TcpStream, reconnect: bool) -> io::Result<()> {
        {
            // The previous connection's socket (shut down) goes; nothing can be
            // pending on it any more, but never let a stale slot meet a new reply.
            let mut slot = self.writer.lock();
            slot.take();
            self.fail_pending(|| Error::zk_code(ZkError::ConnectionLoss));
        }
        let mut w = stream.try_clone()?;
        let read_timeout = self.negotiated_timeout() * 2 / 3;
        w.set_write_timeout(Some((read_timeout / 2).max(Duration::from_millis(50))))?;
        {
            let auths = self.auth.lock().clone();
            let mut waiters = self.auth_waiters.lock();
            for (scheme, auth) in &auths {
                waiters.push_back(None);
                w.write_all(&auth_frame(scheme, auth))?;
            }
        }
        if reconnect {
            for frame in self.set_watches_frames(Resend::All, self.last_zxid()) {
                w.write_all(&frame)?;
            }
        }
        self.touch_send();
        *self.writer.lock() = Some(w);
        let mut s = self.session.lock();
        if s.closing {
            // close() found no connection to end: this one must not open.
            return Err(io::Error::new(io::ErrorKind::Interrupted, "closing"));
        }
        s.state = State::Connected;
        self.tell_state(&mut s, KeeperState::SyncConnected);
        self.session_cv.notify_all();
        Ok(())
    }

    /// SetWatches / SetWatches2 frames for the registered watches `which`,
    /// relative to `zxid`, each at most ~128 KB.
    ///
    /// ZooKeeper 3.8 keeps one mode per path and connection in each of its data
    /// and child tables, and sets a persistent-recursive watch in both: in one
    /// packet (data, exist, child, persistent, recursive, in that order) the last
    /// write wins. So one-shot data and child watches go before the persistent
    /// ones (which then serve them), and a one-shot child watch on the root of a
    /// recursive watch goes in a second packet, after it (a recursive mode in the
    /// child table swallows children events).
    fn set_watches_frames(&self, which: Resend<'_>, zxid: i64) -> Vec<Vec<u8>> {
        let (path, one_shots) = match which {
            Resend::All => (None, true),
            Resend::Path(p) => (Some(p), true),
            Resend::PersistentOf(p) => (Some(p), false),
        };
        let [data, exist, child, persistent, recursive] = self.watches.lock().paths(path);
        let chroot = self.settings.chroot.as_deref();
        let pick = |t: &[String], one_shot: bool, f: &dyn Fn(&str) -> bool| -> Vec<String> {
            t.iter()
                .filter(|p| path.map_or(true, |o| o == p.as_str()))
                .filter(|_| one_shots || !one_shot)
                .filter(|p| f(p))
                .map(|p| super::connect::prepend_chroot(chroot, p))
                .collect()
        };
        let recursive_set: HashSet<&str> = recursive.iter().map(String::as_str).collect();
        let persistent_set: HashSet<&str> = persistent.iter().map(String::as_str).collect();
        let after_recursive = |p: &str| recursive_set.contains(p) && !persistent_set.contains(p);
        let any = |_: &str| true;
        let first: [Vec<String>; 5] = [
            pick(&data, true, &any),
            pick(&exist, true, &any),
            pick(&child, true, &|p| !after_recursive(p)),
            pick(&persistent, false, &any),
            pick(&recursive, false, &any),
        ];
        let second: [Vec<String>; 5] = [
            Vec::new(),
            Vec::new(),
            child
                .iter()
                .filter(|p| path.map_or(true, |o| o == p.as_str()) && after_recursive(p))
                .map(|p| super::connect::prepend_chroot(chroot, p))
                .collect(),
            Vec::new(),
            Vec::new(),
        ];
        let mut frames = set_watches_packets(&first, zxid);
        frames.extend(set_watches_packets(&second, zxid));
        if !frames.is_empty() {
            debug!(
                "re-setting watches in {} packet(s) from zxid {zxid:#x}",
                frames.len()
            );
        }
        frames
    }

    /// Reads replies and notifications until the connection ends.
    ///
    /// Pings: one when nothing was sent for half the read timeout (Java's
    /// rule), and in any case one every quarter of it (1/6 of the session
    /// timeout) unless one is unanswered. A ping unanswered for the read timeout
    /// is a dead connection, even while other bytes (notifications) flow: a
    /// one-way partition that loses the requests is found at most 5/6 of the
    /// session timeout after the server last heard from the client, before the
    /// server expires the session, and the client reconnects in time.
    fn serve(&self, mut stream: &TcpStream) -> ConnEnd {
        let negotiated = self.negotiated_timeout();
        let read_timeout = negotiated * 2 / 3;
        let ping_after = read_timeout / 2;
        let ping_every = read_timeout / 4;
        let mut pings: VecDeque<Instant> = VecDeque::new();
        let mut last_ping = Instant::now();
        let tick = (read_timeout / 10).clamp(Duration::from_millis(5), Duration::from_millis(100));
        if let Err(e) = stream.set_read_timeout(Some(tick)) {
            return ConnEnd::Io(e);
        }
        let ping = Writer::request(xid::PING, op::PING).finish();
        let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
        let mut start = 0usize;
        let mut chunk = vec![0u8; 64 * 1024];
        let max_buffer = self.settings.max_buffer;
        let mut last_recv = Instant::now();
        loop {
            if self.session.lock().closing {
                return ConnEnd::Closing;
            }
            let quiet = last_recv.elapsed();
            if quiet >= read_timeout {
                return ConnEnd::ReadTimeout(quiet);
            }
            if let Some(sent) = pings.front() {
                let waited = sent.elapsed();
                if waited >= read_timeout {
                    return ConnEnd::PingTimeout(waited);
                }
            }
            let due = self.since_send() >= ping_after
                || (pings.is_empty() && last_ping.elapsed() >= ping_every);
            if due {
                // Never wait behind a caller's write: if one is writing, that counts.
                if let Some(mut w) = self.writer.try_lock_for(Duration::from_millis(1)) {
                    if let Some(s) = w.as_mut() {
                        if let Err(e) = s.write_all(&ping) {
                            return ConnEnd::Io(e);
                        }
                        trace!("ping");
                        last_ping = Instant::now();
                        pings.push_back(last_ping);
                    }
                    self.touch_send();
                }
            }
            match stream.read(&mut chunk) {
                Ok(0) => {
                    return ConnEnd::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "server closed the connection",
                    ))
                }
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    let mut framed = false;
                    // Every complete frame.
                    loop {
                        let avail = &buf[start..];
                        if avail.len() < 4 {
                            break;
                        }
                        let len = i32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]);
                        // Java's "Packet len is out of range": reset before
                        // buffering any of it, so memory stays bounded.
                        if len < 16 || len as usize >= max_buffer {
                            return ConnEnd::Protocol(format!(
                                "frame length {len} out of range (max buffer {max_buffer})"
                            ));
                        }
                        let len = len as usize;
                        if avail.len() < 4 + len {
                            break;
                        }
                        match self.handle_frame(&avail[4..4 + len]) {
                            Ok(true) => {
                                pings.pop_front();
                            }
                            Ok(false) => {}
                            Err(end) => return end,
                        }
                        framed = true;
                        start += 4 + len;
                    }
                    // Only whole frames count as hearing from the server (as in
                    // Java): bytes that never complete a frame, e.g. after a
                    // corrupted length, end in the read timeout.
                    if framed {
                        last_recv = Instant::now();
                        self.touch_heard();
                    }
                    if start == buf.len() {
                        buf.clear();
                        start = 0;
                    } else if start > 64 * 1024 {
                        buf.drain(..start);
                        start = 0;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return ConnEnd::Io(e),
            }
        }
    }

    /// Handles one frame; `Ok(true)` for a ping reply.
    fn handle_frame(&self, body: &[u8]) -> Result<bool, ConnEnd> {
        let mut r = Reader::new(body);
        let hdr = ReplyHeader::read(&mut r).map_err(|e| ConnEnd::Protocol(e.0.into()))?;
        match hdr.xid {
            xid::PING => Ok(true),
            xid::SET_WATCHES => {
                if hdr.err != 0 {
                    warn!("SetWatches failed: {}", ZkError::from_code(hdr.err));
                }
                Ok(false)
            }
            xid::AUTH => {
                let waiter = self.auth_waiters.lock().pop_front().flatten();
                let reply = if hdr.err == 0 {
                    Ok(Vec::new())
                } else {
                    Err(Error::zk_code(ZkError::from_code(hdr.err)))
                };
                if let Some(tx) = waiter {
                    let _ = tx.send(reply);
                }
                if hdr.err == ZkError::AuthFailed.code() {
                    return Err(ConnEnd::AuthFailed);
                }
                Ok(false)
            }
            xid::NOTIFICATION => {
                let (t, state, server_path) = proto::read_watcher_event(&mut r)
                    .map_err(|e| ConnEnd::Protocol(format!("notification: {}", e.0)))?;
                self.dispatch(t, state, &server_path);
                Ok(false)
            }
            x => {
                let p = self.pending.lock().pop_front();
                let Some(p) = p else {
                    return Err(ConnEnd::Protocol(format!(
                        "reply xid {x} with no request in flight"
                    )));
                };
                if p.xid != x {
                    let want = p.xid;
                    self.pending.lock().push_front(p);
                    return Err(ConnEnd::Protocol(format!(
                        "xid out of order: got {x}, expected {want}"
                    )));
                }
                #[cfg(feature = "testing")]
                if self.take_lost_reply(p.opcode) {
                    self.pending.lock().push_front(p);
                    return Err(ConnEnd::Injected);
                }
                // Only a reply matched to its request moves the last zxid seen (as
                // Java's readResponse): a zxid from a bad header or a notification
                // sent on reconnect makes the server refuse the client ("client
                // must try another server") and costs the session.
                if hdr.zxid > 0 {
                    self.last_zxid.fetch_max(hdr.zxid, Ordering::Relaxed);
                }
                if let Some(reg) = p.reg {
                    let ok = hdr.err == 0;
                    let no_node = hdr.err == ZkError::NoNode.code();
                    let kind = match (reg.exists, ok, no_node) {
                        (true, true, _) => Some(Kind::Data),
                        (true, false, true) => Some(Kind::Exist),
                        (false, true, _) => Some(reg.kind),
                        _ => None,
                    };
                    if let Some(kind) = kind {
                        let mut m = self.watches.lock();
                        m.add(kind, &reg.path, reg.watcher);
                        // ZooKeeper 3.8 keeps one mode per path and connection in
                        // each table: a one-shot watch turns this client's
                        // persistent watch on the same path into a one-shot one
                        // (ZOOKEEPER-4466). Set the persistent one again; it serves
                        // the one-shot too (which stays one-shot here). A child
                        // watch leaves a recursive watch's data-table entry alone.
                        let (persistent, recursive) = m.persistent_on(&reg.path);
                        let restore = match kind {
                            Kind::Data | Kind::Exist => persistent || recursive,
                            Kind::Child => persistent,
                            Kind::Persistent | Kind::Recursive => false,
                        };
                        drop(m);
                        if restore {
                            self.rewatch(Resend::PersistentOf(&reg.path), hdr.zxid)?;
                        }
                    }
                }
                if let Some(path) = &p.rewatch {
                    if hdr.err == 0 {
                        self.rewatch(Resend::Path(path), hdr.zxid)?;
                    }
                }
                let reply = if hdr.err == 0 {
                    Ok(body[body.len() - r.remaining()..].to_vec())
                } else {
                    Err(Error::zk_code(ZkError::from_code(hdr.err)))
                };
                trace!("reply xid {x} op {}: err {}", p.opcode, hdr.err);
                self.answer(p.to, reply);
                Ok(false)
            }
        }
    }

    /// Sets again, relative to `zxid`, watches this client holds.
    fn rewatch(&self, which: Resend<'_>, zxid: i64) -> Result<(), ConnEnd> {
        let frames = self.set_watches_frames(which, zxid);
        if frames.is_empty() {
            return Ok(());
        }
        let mut w = self.writer.lock();
        if let Some(s) = w.as_mut() {
            for frame in &frames {
                if let Err(e) = s.write_all(frame) {
                    return Err(ConnEnd::Io(e));
                }
            }
            self.touch_send();
        }
        Ok(())
    }

    fn dispatch(&self, t: i32, state: i32, server_path: &str) {
        let Some(event_type) = EventType::from_code(t) else {
            warn!("ignoring a notification of unknown type {t} on {server_path}");
            return;
        };
        let path = strip_chroot(self.settings.chroot.as_deref(), server_path);
        let watchers = self.watches.lock().materialize(event_type, &path);
        trace!("event {event_type:?} {path}: {} watcher(s)", watchers.len());
        if watchers.is_empty() {
            return;
        }
        let keeper_state = KeeperState::from_code(state).unwrap_or(KeeperState::SyncConnected);
        let event = WatchedEvent {
            event_type,
            keeper_state,
            path: Some(path),
        };
        let _ = self.enqueue(EventMsg::Deliver(watchers, event));
    }

    fn fail_pending(&self, error: impl Fn() -> Error) {
        let drained: Vec<Pending> = self.pending.lock().drain(..).collect();
        for p in drained {
            self.answer(p.to, Err(error()));
        }
        let waiters: Vec<_> = self.auth_waiters.lock().drain(..).collect();
        for tx in waiters.into_iter().flatten() {
            let _ = tx.send(Err(error()));
        }
    }

    /// The connection (already shut down) is gone. Never takes the writer lock:
    /// a caller may hold it, blocked in a write, and Disconnected must not wait
    /// for it. A request written after the shutdown fails its write and answers
    /// itself (see [`send_to`](Self::send_to)); one written before is drained here.
    fn on_disconnected(&self) {
        // The state before the callers wake up: a caller that retries at once
        // must wait for the reconnect, not find "connected" without a connection.
        {
            let mut s = self.session.lock();
            if !s.state.is_terminal() {
                s.state = State::Connecting;
            }
            if !s.closing {
                self.tell_state(&mut s, KeeperState::Disconnected);
            }
        }
        self.fail_pending(|| Error::zk_code(ZkError::ConnectionLoss));
    }

    fn finish(&self, terminal: Terminal) {
        let mut w = self.writer.lock();
        if let Some(s) = w.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let (state, ks) = match terminal {
            Terminal::Expired => (State::Expired, KeeperState::Expired),
            Terminal::AuthFailed => (State::AuthFailed, KeeperState::AuthFailed),
            Terminal::Closed => (State::Closed, KeeperState::Closed),
        };
        {
            let mut s = self.session.lock();
            s.state = state;
            s.closing = true;
            self.tell_state(&mut s, ks);
            self.session_cv.notify_all();
        }
        let err = Error::for_ended_session(state).unwrap_or(Error::Closed);
        let code = err.code();
        self.fail_pending(|| match code {
            Some(c) => Error::zk_code(c),
            None => Error::Closed,
        });
        drop(w);
        let _ = self.events.send(EventMsg::Stop);
        debug!("connection thread ends: {state:?}");
    }
}

/// Which watches [`SessionShared::set_watches_frames`] sends again.
#[derive(Debug, Clone, Copy)]
enum Resend<'a> {
    /// Every watch (after a reconnect).
    All,
    /// Every watch on one client path (after a removeWatches).
    Path(&'a str),
    /// The persistent watches on one client path (after a one-shot registration
    /// on it turned them one-shot server-side).
    PersistentOf(&'a str),
}

/// SetWatches (or SetWatches2 when there are persistent paths) packets for the
/// server paths `tables` (data, exist, child, persistent, recursive), each at most
/// ~128 KB.
fn set_watches_packets(tables: &[Vec<String>; 5], zxid: i64) -> Vec<Vec<u8>> {
    let persistent = !tables[3].is_empty() || !tables[4].is_empty();
    let mut frames = Vec::new();
    let mut cursor = [0usize; 5];
    loop {
        let mut chunk: [Vec<&str>; 5] = Default::default();
        let mut size = 0usize;
        for (t, paths) in tables.iter().enumerate() {
            while cursor[t] < paths.len() && size < SET_WATCHES_MAX {
                let p = &paths[cursor[t]];
                size += p.len() + 4;
                chunk[t].push(p);
                cursor[t] += 1;
            }
        }
        if chunk.iter().all(Vec::is_empty) {
            break;
        }
        let opcode = if persistent {
            op::SET_WATCHES2
        } else {
            op::SET_WATCHES
        };
        let mut w = Writer::request(xid::SET_WATCHES, opcode);
        w.i64(zxid)
            .strings(&chunk[0])
            .strings(&chunk[1])
            .strings(&chunk[2]);
        if persistent {
            w.strings(&chunk[3]).strings(&chunk[4]);
        }
        frames.push(w.finish());
    }
    frames
}

/// Reads one length-prefixed frame of less than `max` bytes by `deadline`.
fn read_frame_by(stream: &mut TcpStream, max: usize, deadline: Instant) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    read_by(stream, &mut len, deadline)?;
    let len = i32::from_be_bytes(len);
    if len < 0 || len as usize >= max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame length {len} out of range"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    read_by(stream, &mut body, deadline)?;
    Ok(body)
}

/// The time left until `deadline`; `TimedOut` when none.
fn left_until(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "handshake timed out",
        ));
    }
    Ok(left)
}

/// Fills `buf` by `deadline`, a bound on the whole read (a peer trickling one
/// byte at a time cannot stretch it, as a per-`read` timeout would let it).
fn read_by(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        stream.set_read_timeout(Some(left_until(deadline)?))?;
        match stream.read(&mut buf[done..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the connection during the handshake",
                ))
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                left_until(deadline)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn auth_frame(scheme: &str, auth: &[u8]) -> Vec<u8> {
    let mut w = Writer::request(xid::AUTH, op::AUTH);
    w.i32(0).string(scheme).buffer(auth);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes a SetWatches(2) frame: (opcode, zxid, tables).
    fn decode(frame: &[u8]) -> (i32, i64, Vec<Vec<String>>) {
        let mut r = Reader::new(&frame[4..]);
        assert_eq!(r.i32().unwrap(), xid::SET_WATCHES);
        let opcode = r.i32().unwrap();
        let zxid = r.i64().unwrap();
        let n = if opcode == op::SET_WATCHES2 { 5 } else { 3 };
        let tables = (0..n).map(|_| r.strings().unwrap()).collect();
        assert_eq!(r.remaining(), 0);
        (opcode, zxid, tables)
    }

    #[test]
    fn set_watches_packets_are_chunked_and_keep_every_path_in_order() {
        let paths = |p: &str, n: usize| -> Vec<String> {
            (0..n)
                .map(|i| format!("/{p}/{i:06}-{}", "x".repeat(200)))
                .collect()
        };
        let tables = [
            paths("d", 1500),
            paths("e", 10),
            paths("c", 700),
            vec![],
            vec![],
        ];
        let frames = set_watches_packets(&tables, 42);
        assert!(frames.len() >= 3, "{} frames", frames.len());
        let mut seen: [Vec<String>; 5] = Default::default();
        for f in &frames {
            assert!(
                f.len() <= SET_WATCHES_MAX + 1024,
                "a {} byte packet",
                f.len()
            );
            let (opcode, zxid, t) = decode(f);
            assert_eq!((opcode, zxid), (op::SET_WATCHES, 42));
            for (i, v) in t.into_iter().enumerate() {
                seen[i].extend(v);
            }
        }
        assert_eq!(seen, tables);

        let persistent = [
            vec![],
            vec![],
            vec!["/c".to_string()],
            vec!["/p".into()],
            vec!["/r".into()],
        ];
        let frames = set_watches_packets(&persistent, 7);
        assert_eq!(frames.len(), 1);
        let (opcode, _, t) = decode(&frames[0]);
        assert_eq!(opcode, op::SET_WATCHES2);
        assert_eq!(t, persistent.to_vec());
        assert!(set_watches_packets(&Default::default(), 1).is_empty());
    }
}
