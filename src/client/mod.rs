//! zklock's own blocking ZooKeeper client.
//!
//! A synchronous client in the architecture of Java's `ClientCnxn`, built to carry
//! locks (see the crate's README for why the `zookeeper` crate could not):
//!
//! - **Two threads per handle**: a connection thread (connect, ping, reconnect,
//!   and reading whenever something may come that no caller waits for: a
//!   notification for a watch, an asynchronous reply) and an event thread (calls
//!   watchers). Callers write their own requests and read their own replies,
//!   matched by xid: whichever caller holds the read side handles every frame
//!   that comes and hands it on, so many threads pipeline on one connection and a
//!   call on a session without watches costs one thread wake-up, not two.
//! - **Timers of the Java client**, from the negotiated session timeout: nothing
//!   received for 2/3 of it → the connection is dead (`Disconnected`, in-flight calls
//!   fail with `ConnectionLoss`, reconnect to the next host); a ping whenever nothing
//!   was sent for 1/3 of it, busy or idle; each connect attempt bounded by session
//!   timeout / number of hosts, the first included, and by the handshake timeout
//!   (default 2 s) as a total deadline.
//! - **A reconnect waits first**, as Java's (`ClientCnxn.startConnect`): a
//!   random pause of up to 1 s (at most a quarter of the session timeout), so
//!   that a second handle resuming the session (HBase's and Curator's way of
//!   expiring it in tests) gets its close through before this one takes the
//!   session back; failed attempts then back off from 10 ms to 1 s.
//! - **`close()` says whether the session is gone**: `Ok` only when a server
//!   answered closeSession or said the session had expired; an unanswered
//!   close is sent again on a new connection, within a bound.
//! - **The session survives reconnects**: id, password and last zxid are sent again,
//!   auth is replayed and every watch (data, exist, child, persistent) is re-set with
//!   SetWatches, so a change made during the gap fires once.
//! - **Expiry is final**: `Expired` is delivered once, every pending and later call
//!   fails with `SessionExpired`, and no replacement session is opened. Build a new
//!   handle. The client also declares the session expired itself when no server
//!   has been heard from for a whole negotiated session timeout: a partitioned
//!   lock holder learns it has lost its lock without waiting for the partition to
//!   heal. The server has not necessarily expired it by then (a one-way partition
//!   in which it still hears the client; a restarted server restores its
//!   sessions), so the connection thread keeps trying, in the background for up
//!   to one more session timeout, to reconnect with the old id and password only
//!   to send closeSession: the session's ephemeral nodes go as soon as a server
//!   is reachable. No event is delivered for it. `close()` takes it over: it
//!   sends closeSession itself, within its bound, and says `Ok` only when a
//!   server confirmed the session gone (a drop does the same in the
//!   background).
//! - **Every call is bounded**: while disconnected, a call waits for the reconnect up
//!   to the connect wait (default: the session timeout), then fails with
//!   `ConnectionLoss`; a sent request waits for its reply at most the request timeout
//!   (default: twice the session timeout, but a dead connection fails it sooner, at
//!   the read timeout), then fails with `OperationTimeout`.
//! - **No panic on any input**: malformed frames reset the connection; a panicking
//!   watcher is caught and logged.
//!
//! Connection changes reach the default watcher **and every distinct per-watch
//! watcher currently registered** (data, exist, child, persistent, recursive) as
//! events of type [`EventType::None`]: `SyncConnected`, `Disconnected`, `Expired`,
//! `AuthFailed`, `Closed`, each watcher once per change (Java's
//! `ZKWatchManager.materialize(state, None, path)`), so a thread waiting on a node
//! watch wakes when the session ends. Registrations survive `Disconnected` and
//! `SyncConnected` (they are set again on the reconnect); after `Expired`,
//! `AuthFailed` or `Closed` they are dropped.
//!
//! Watchers and asynchronous callbacks (`*_async`) run on one event thread, in
//! the order they were queued, and **when a connection is lost the order is
//! Java's** (`ClientCnxn.SendThread.cleanAndNotifyState`): every request sent
//! on it and not answered is answered with `ConnectionLoss`, its callback
//! queued in the order the requests were sent, and only then is
//! `Disconnected` queued — the callbacks run before `Disconnected`. The session
//! has left `Connected` before any of them runs, so a callback that sends
//! again gets `ConnectionLoss` at once (a recipe reacting to it must not retry
//! in a loop before its watcher has seen `Disconnected`). At the session's
//! end: `Expired` (told by the server, or found by the client) and
//! `AuthFailed` come first, then the callbacks still pending fail
//! (`SessionExpired`, `AuthFailed`), as in Java; after `close()` the callbacks
//! still pending fail first, then `Closed` comes. A request issued while the
//! loss is being found (its write fails on the dead socket after the
//! connection thread drained the connection) may be answered just after
//! `Disconnected`.

pub(crate) mod config;
mod connect;
mod data;
mod multi;
pub(crate) mod proto;
mod sasl;
mod session;
#[cfg(feature = "tls")]
mod tls;
mod watches;
mod watching;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub use crate::types::*;

pub use crate::deadline::Deadline;
use crate::error::{Error, Result, ZkError};
use crate::path::validate_path;
pub use config::{ClientConfig, QuorumServer, Reconfig, ServerRole};
use connect::{prepend_chroot, strip_chroot, ConnectString};
pub(crate) use data::CreatedAndListed;
pub use multi::{ReadOp, ReadResult};
use proto::{op, Reader, Writer};
pub use sasl::SaslConfig;
pub use session::hosts::ServerOrder;
use session::{SessionShared, Settings, WatchReg};
#[cfg(feature = "tls")]
pub use tls::{TlsConfig, TlsConfigBuilder, TlsError, TlsVersion};
use watches::{Kind, WatcherRef};

/// ZooKeeper's default `jute.maxbuffer`: the largest request a server accepts,
/// and the default bound on a frame from a server
/// ([`ZooKeeperBuilder::with_max_buffer`]).
pub const MAX_PACKET: usize = 0xfffff;

/// The default bound on one connect attempt
/// ([`ZooKeeperBuilder::with_handshake_timeout`]).
const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// A blocking ZooKeeper session: Java's `org.apache.zookeeper.ZooKeeper`.
///
/// # Threads and cloning
/// `ZooKeeper` is `Send + Sync` and a cheap `Clone` (an `Arc`); clones share the
/// session. Any number of threads may call it at once; their requests are
/// pipelined on the one connection. The session ends when [`close`](Self::close)
/// is called (synchronous) or the last clone is dropped (then it closes in the
/// background: the drop returns at once, even during a partition). A watcher that owns a clone of the
/// handle it watches keeps the session alive: hold a `Weak` or close explicitly.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use zklock::client::{Acl, CreateMode, ZooKeeper};
///
/// let zk = ZooKeeper::connect("127.0.0.1:2181", Duration::from_secs(10), |_e| {})?;
/// zk.create("/demo", b"hello", Acl::open_unsafe(), CreateMode::Ephemeral)?;
/// let (data, stat) = zk.get_data("/demo", false)?;
/// assert_eq!(data, b"hello");
/// zk.delete("/demo", Some(stat.version))?;
/// zk.close()?;
/// # Ok::<(), zklock::Error>(())
/// ```
#[derive(Clone)]
pub struct ZooKeeper {
    handle: Arc<Handle>,
    /// Ends every call of this handle (see [`ZooKeeper::with_deadline`]).
    deadline: Deadline,
    /// The one session this handle's calls go to (see
    /// [`ZooKeeper::pinned`]); `None`: whichever is current.
    pinned: Option<Arc<SessionShared>>,
}

struct Handle {
    /// The session; replaced only by [`ZooKeeper::renew_session`] after expiry.
    shared: parking_lot::RwLock<Arc<SessionShared>>,
    threads: Mutex<Option<session::Threads>>,
    /// The connect string's chroot (the same for every session of the handle).
    chroot: Option<String>,
}

/// How long `close` waits for a watcher still running on the event thread.
const EVENT_THREAD_JOIN: Duration = Duration::from_secs(5);

impl Handle {
    fn shared(&self) -> Arc<SessionShared> {
        self.shared.read().clone()
    }

    fn close(&self) -> Result<()> {
        close_session(self.shared(), self.threads.lock().take())
    }
}

/// Ends `shared` (see [`ZooKeeper::close`]: closeSession, confirmed by the
/// server within a bound) and joins `threads`.
fn close_session(shared: Arc<SessionShared>, threads: Option<session::Threads>) -> Result<()> {
    let closed = shared.close();
    join_threads(threads);
    closed
}

/// Joins the client's threads after the session's end.
fn join_threads(threads: Option<session::Threads>) {
    let Some(threads) = threads else {
        return;
    };
    // The connection thread runs no user code: it ends promptly.
    let _ = threads.conn.join();
    // close() may run on the event thread (from a watcher): it ends by itself.
    if threads.events.thread().id() == std::thread::current().id() {
        return;
    }
    // A watcher that never returns must not hang close(): wait a bound, then
    // leave the thread to finish on its own.
    match threads.events_done.recv_timeout(EVENT_THREAD_JOIN) {
        Ok(()) | Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
            let _ = threads.events.join();
        }
        Err(crossbeam_channel::RecvTimeoutError::Timeout) => log::warn!(
            "a watcher is still running {EVENT_THREAD_JOIN:?} after close(); not waiting for it"
        ),
    }
}

impl Drop for Handle {
    /// The last handle is gone: the session is closed in the background
    /// (see [`Handle::close_in_background`]). `close()` is the synchronous
    /// form.
    fn drop(&mut self) {
        self.close_in_background();
    }
}

impl Handle {
    /// Closes the session on a short-lived thread (`zklock-close`) unless
    /// nothing is left to do (the threads joined, and the session known gone
    /// on the server or its close already under way in the background):
    /// closeSession waits up to the close bound (2 s) for the server's answer
    /// (more for a watcher still running), and `Drop` never waits on the
    /// network. A close that failed (no server answered within its bound) is
    /// tried once more this way, as `close()` would.
    fn close_in_background(&self) {
        let shared = self.shared();
        let threads = self.threads.lock().take();
        let close = shared.close_in_background();
        if threads.is_none() && !close {
            return;
        }
        crate::util::run_in_background("zklock-close", move || {
            if let Err(e) = close_session(shared, threads) {
                log::warn!("closing a dropped ZooKeeper: {e}");
            }
        });
    }
}

impl fmt::Debug for ZooKeeper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.handle.shared(), f)
    }
}

/// A [`ZooKeeper`] handle that does not keep the session alive (see
/// [`ZooKeeper::downgrade`]): the session ends when the last strong handle is
/// dropped or closed, whatever weak handles remain.
#[derive(Clone)]
pub struct WeakZooKeeper {
    handle: std::sync::Weak<Handle>,
    deadline: Deadline,
}

impl WeakZooKeeper {
    /// The session's handle, while some strong handle still exists.
    pub fn upgrade(&self) -> Option<ZooKeeper> {
        self.handle.upgrade().map(|handle| ZooKeeper {
            handle,
            deadline: self.deadline,
            pinned: None,
        })
    }
}

impl fmt::Debug for WeakZooKeeper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never upgrade here: a temporary strong handle could become the last.
        f.debug_struct("WeakZooKeeper")
            .field("alive", &(self.handle.strong_count() > 0))
            .finish()
    }
}

/// Builds a [`ZooKeeper`] with non-default settings.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::client::ZooKeeper;
/// let zk = ZooKeeper::builder("127.0.0.1:2181/app")
///     .with_session_timeout(Duration::from_secs(6))
///     .connect(|_e| {})?;
/// # Ok::<(), zklock::Error>(())
/// ```
///
/// `Debug` never shows the session password ([`with_session`](Self::with_session):
/// it takes the session over) nor the SASL password: only the session id.
#[derive(Clone)]
pub struct ZooKeeperBuilder {
    connect_string: String,
    session_timeout: Duration,
    connect_wait: Option<Duration>,
    request_timeout: Option<Duration>,
    session: Option<(i64, Vec<u8>)>,
    max_buffer: usize,
    handshake_timeout: Option<Duration>,
    #[cfg(feature = "tls")]
    tls: Option<TlsConfig>,
    sasl: Option<SaslConfig>,
    server_order: ServerOrder,
    read_only: bool,
}

impl fmt::Debug for ZooKeeperBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ZooKeeperBuilder");
        d.field("connect_string", &self.connect_string)
            .field("session_timeout", &self.session_timeout)
            .field("connect_wait", &self.connect_wait)
            .field("request_timeout", &self.request_timeout)
            .field(
                "session",
                &self
                    .session
                    .as_ref()
                    .map(|(id, _)| format!("{id:#x} (password redacted)")),
            )
            .field("max_buffer", &self.max_buffer)
            .field("handshake_timeout", &self.handshake_timeout);
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls);
        d.field("sasl", &self.sasl)
            .field("server_order", &self.server_order)
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl ZooKeeperBuilder {
    /// Authenticates every connection with SASL (Java's JAAS `Client`
    /// section), after the session handshake and before any request is sent,
    /// on every connect and reconnect: the session's ACL id becomes
    /// `sasl:<user>`. The exchange counts in the
    /// [handshake timeout](Self::with_handshake_timeout) (a server stalling
    /// in it is a failed attempt, retried). A server refusing the credentials
    /// ends the handle: `AuthFailed`, told once, never retried (Java's
    /// `AuthFailed`). Unlike Java, `SyncConnected` is told only after the
    /// exchange succeeded (then `SaslAuthenticated`, as Java): no request can
    /// reach a SASL-only server unauthenticated.
    #[must_use]
    pub fn with_sasl(mut self, sasl: SaslConfig) -> Self {
        self.sasl = Some(sasl);
        self
    }

    /// Connects over TLS (feature `tls`; Java's `zookeeper.client.secure`):
    /// every server of the connect string is reached on its TLS port
    /// (`secureClientPort`) and verified with `tls`. The TLS handshake counts
    /// in the [handshake timeout](Self::with_handshake_timeout). A server that
    /// fails verification, refuses the client certificate or does not speak
    /// TLS is retried at most once a second; while no session was ever
    /// established and the last attempt on every host failed that way,
    /// `connect` and waiting calls fail at once with
    /// [`Error::Tls`] instead of waiting for
    /// `ConnectionLoss`.
    #[must_use]
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The most one connect attempt may take, TCP connect and the whole
    /// ConnectRequest/ConnectResponse exchange together (a total deadline, not a
    /// per-read timeout: a peer trickling bytes cannot stretch it). A live
    /// server answers in milliseconds; a ZooKeeper server in its start-up window
    /// accepts and never answers, and must not eat the session on a one-host
    /// connect string. Each attempt is bounded by the smaller of this and
    /// session timeout / number of hosts (Java's per-attempt bound), and by the
    /// time left before the session must have expired. Default 2 s.
    ///
    /// An attempt that a server accepted and then ran out of time in (a live
    /// but slow server: a restarted JVM's first TLS handshakes on a loaded
    /// machine) doubles the next attempt's bound, up to Java's per-attempt
    /// bound, until one succeeds: a server slower than this bound is still
    /// reached, where fixed attempts would each end a moment before its
    /// answer. Java waits its whole per-attempt bound on every attempt.
    #[must_use]
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = Some(timeout);
        self
    }

    /// The order the servers of the connect string are tried in: shuffled
    /// (the default, as Java's, so that clients spread) or
    /// [listed](ServerOrder::Listed), the first servers preferred and the
    /// others a fallback (say the servers of the client's own zone first).
    /// Applies to [`ZooKeeper::update_server_list`]'s lists too.
    #[must_use]
    pub fn with_server_order(mut self, order: ServerOrder) -> Self {
        self.server_order = order;
        self
    }

    /// Read-only mode (opt-in, off by default; Java's `canBeReadOnly`, kazoo's
    /// `read_only=True`): a server cut off from its quorum that was started
    /// with `-Dreadonlymode.enabled=true` may serve this client's reads.
    ///
    /// Connected to such a server the client tells its watchers
    /// [`KeeperState::ConnectedReadOnly`] instead of `SyncConnected`, and
    /// [`ZooKeeper::is_read_only`] is true: reads (and watches) work, every
    /// write fails with [`ZkError::NotReadOnly`]. Meanwhile the client keeps
    /// looking for a read-write server, as Java's: it asks the other servers
    /// of its list with the `isro` four-letter word, first after 100 ms,
    /// then at doubling intervals up to a minute; the first that answers
    /// `rw` is where it reconnects (`Disconnected`, then `SyncConnected`).
    ///
    /// Sessions: a read-only server serves only sessions it made itself
    /// (ZooKeeper 3.7 and later, ZOOKEEPER-3863: it refuses to resume a
    /// session of the quorum, and needs `localSessionsEnabled=true`); 3.6
    /// also resumes a session of the quorum. A session a read-only server
    /// made is unknown to the quorum: at the first read-write server the
    /// client gets a new session id (as Java's), its watches set again on it.
    /// A [`ZooKeeperWatcher`](crate::ZooKeeperWatcher) announces that change
    /// as a [session renewal](crate::ZooKeeperListener::session_renewed).
    /// With this off (the default) the client behaves as before: a read-only
    /// server refuses it.
    #[must_use]
    pub fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// The largest frame accepted from a server, Java's `jute.maxbuffer`: a
    /// frame whose length prefix is negative, shorter than a reply header or
    /// not below this is a broken connection (reset, then a reconnect with the
    /// same session), and nothing of it is buffered. Default [`MAX_PACKET`]
    /// (0xfffff, ZooKeeper's default); raise it together with the servers'
    /// `jute.maxbuffer` for larger replies (e.g. huge `get_children`). At most
    /// about this much plus 64 KB is buffered per connection.
    #[must_use]
    pub fn with_max_buffer(mut self, bytes: usize) -> Self {
        self.max_buffer = bytes.clamp(64, i32::MAX as usize);
        self
    }

    /// The requested session timeout; the server negotiates it into its
    /// `[minSessionTimeout, maxSessionTimeout]`. Default 10 s.
    #[must_use]
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long `connect` and calls made while disconnected wait for a
    /// connection before failing with `ConnectionLoss`. Default: the session
    /// timeout the server granted (the requested one until then). Before a first session, every server refusing the connection
    /// ends the wait at once (see [`connect`](Self::connect)).
    #[must_use]
    pub fn with_connect_wait(mut self, wait: Duration) -> Self {
        self.connect_wait = Some(wait);
        self
    }

    /// How long a sent request waits for its reply before `OperationTimeout`.
    /// Default: twice the session timeout the server granted (the requested
    /// one until then; a dead connection fails calls sooner).
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// How long `connect` waits: the connect wait, or the session timeout.
    pub(crate) fn connect_wait(&self) -> Duration {
        self.connect_wait.unwrap_or(self.session_timeout)
    }

    /// Resumes an existing session (Java's `ZooKeeper(.., sessionId, passwd)`).
    #[must_use]
    pub fn with_session(mut self, session_id: i64, password: &[u8]) -> Self {
        self.session = Some((session_id, password.to_vec()));
        self
    }

    /// Connects, blocking until the session is established: [`start`](Self::start)
    /// then [`ZooKeeper::wait_connected`] for the connect wait.
    ///
    /// A connect string on which every server refuses the TCP connection
    /// (nothing listens on any of its ports) fails at once, as soon as each
    /// host was tried once, with `ConnectionLoss` carrying the reason
    /// ([`Error::Connect`]: "connection refused by
    /// ..."), not after the whole connect wait. A deliberate difference: Java's
    /// client (and Curator's `blockUntilConnected`) and kazoo's `start()` keep
    /// retrying refused hosts until their connection timeout, which only makes
    /// a mistyped port or a stopped server slow to report. It applies only
    /// while no session was ever established: a session that existed (a
    /// reconnect, or [`with_session`](Self::with_session)) keeps retrying
    /// refused hosts until it expires, as Java's does, since a server
    /// restarting refuses for a moment.
    ///
    /// # Errors
    /// `BadArguments` for a bad connect string or timeout; `ConnectionLoss` when
    /// no server answered within the connect wait, or at once when every
    /// server refused the connection ([`Error::Connect`]);
    /// `SessionExpired` when resuming an expired session; `AuthFailed` (with
    /// the SASL mechanism's or the server's reason in
    /// [`Error::Connect`] when the SASL exchange
    /// failed).
    pub fn connect(self, watcher: impl Watcher + 'static) -> Result<ZooKeeper> {
        let wait = self.connect_wait.unwrap_or(self.session_timeout);
        let zk = self.start(watcher)?;
        // Dropping `zk` on failure closes it in the background (Drop never
        // waits): its connection thread stops at its next check of `closing`.
        zk.wait_connected(wait)?;
        Ok(zk)
    }

    /// Starts the client and returns at once, like Java's `ZooKeeper`
    /// constructor: the connection is made in the background and the watcher told
    /// `SyncConnected`. Calls made before then wait for it (up to the connect
    /// wait). This is what a watcher that is finished after the client needs
    /// (HBase's `PendingWatcher`).
    ///
    /// # Errors
    /// `BadArguments` for a bad connect string or session timeout; `Io` if the
    /// threads cannot be spawned.
    pub fn start(self, watcher: impl Watcher + 'static) -> Result<ZooKeeper> {
        let cs = ConnectString::parse(&self.connect_string)?;
        if self.session_timeout < Duration::from_millis(1)
            || self.session_timeout > Duration::from_secs(i32::MAX as u64 / 1000)
        {
            return Err(Error::BadArguments(format!(
                "session timeout {:?} out of range",
                self.session_timeout
            )));
        }
        let (session_id, password) = self.session.unwrap_or((0, vec![0; 16]));
        let settings = Settings {
            hosts: cs.hosts,
            chroot: cs.chroot,
            session_timeout: self.session_timeout,
            request_timeout: self.request_timeout,
            connect_wait: self.connect_wait,
            session_id,
            password,
            max_buffer: self.max_buffer,
            handshake_timeout: self
                .handshake_timeout
                .unwrap_or(DEFAULT_HANDSHAKE_TIMEOUT)
                .max(Duration::from_millis(1)),
            #[cfg(feature = "tls")]
            tls: self.tls,
            sasl: self.sasl,
            server_order: self.server_order,
            read_only: self.read_only,
        };
        let (shared, threads) = session::start(settings, Arc::new(watcher))?;
        Ok(ZooKeeper {
            handle: Arc::new(Handle {
                chroot: shared.settings.chroot.clone(),
                shared: parking_lot::RwLock::new(shared),
                threads: Mutex::new(Some(threads)),
            }),
            deadline: Deadline::never(),
            pinned: None,
        })
    }
}

impl ZooKeeper {
    /// A builder for `connect_string` (`"host:port,host:port/optional/chroot"`).
    pub fn builder(connect_string: &str) -> ZooKeeperBuilder {
        ZooKeeperBuilder {
            connect_string: connect_string.to_string(),
            session_timeout: Duration::from_secs(10),
            connect_wait: None,
            request_timeout: None,
            session: None,
            max_buffer: MAX_PACKET,
            handshake_timeout: None,
            #[cfg(feature = "tls")]
            tls: None,
            sasl: None,
            server_order: ServerOrder::Random,
            read_only: false,
        }
    }

    /// Connects to `connect_string` with a requested `session_timeout`; `watcher`
    /// is the default watcher (connection events, and `watch = true` calls).
    /// Blocks until connected, at most the session timeout.
    ///
    /// # Errors
    /// See [`ZooKeeperBuilder::connect`].
    pub fn connect(
        connect_string: &str,
        session_timeout: Duration,
        watcher: impl Watcher + 'static,
    ) -> Result<ZooKeeper> {
        ZooKeeper::builder(connect_string)
            .with_session_timeout(session_timeout)
            .connect(watcher)
    }

    /// Resumes the session `session_id` with its `password`.
    ///
    /// # Errors
    /// `SessionExpired` when the session is gone; see [`ZooKeeperBuilder::connect`].
    pub fn connect_with_session(
        connect_string: &str,
        session_timeout: Duration,
        watcher: impl Watcher + 'static,
        session_id: i64,
        password: &[u8],
    ) -> Result<ZooKeeper> {
        ZooKeeper::builder(connect_string)
            .with_session_timeout(session_timeout)
            .with_session(session_id, password)
            .connect(watcher)
    }

    fn shared(&self) -> Arc<SessionShared> {
        match &self.pinned {
            Some(s) => s.clone(),
            None => self.handle.shared(),
        }
    }

    /// This handle's calls made in the session that is current now, and only
    /// in it: after a renewal ([`renew_session`](Self::renew_session)) they
    /// fail with `SessionExpired` instead of reaching the new session. What a
    /// library wait holds, so that nothing it does outlives its session.
    pub(crate) fn pinned(&self) -> ZooKeeper {
        ZooKeeper {
            handle: self.handle.clone(),
            deadline: self.deadline,
            pinned: Some(self.shared()),
        }
    }

    /// Opens a new session on this handle after the old one expired (a new
    /// session id; the old session's watches are gone): returns at once, the
    /// new session connects in the background and the default watcher is told
    /// `SyncConnected`. Every clone of the handle uses the new session from
    /// then on. What `ZooKeeperWatcher`'s opt-in session renewal uses; a plain
    /// client never renews by itself.
    ///
    /// # Errors
    /// `BadArguments` when the session has not expired; `Io` when the threads
    /// cannot be spawned.
    pub(crate) fn renew_session(&self) -> Result<()> {
        let old = self.handle.shared();
        if old.state() != State::Expired {
            return Err(Error::BadArguments(
                "renew_session: the session has not expired".into(),
            ));
        }
        let mut settings = old.settings.clone();
        // The servers as last updated, not as first given.
        settings.hosts = old.server_list();
        settings.session_id = 0;
        settings.password = vec![0; 16];
        let (shared, threads) = session::start(settings, old.default_watcher.clone())?;
        *self.handle.shared.write() = shared;
        // Ends the old connection thread's attempt to close the expired session
        // on the server (it would outlive the handle's threads otherwise). On
        // a short-lived thread: this runs on the event thread, and after an
        // expiry the client declared itself the close asks the server, up to
        // the close bound (the server may still hold the old session and its
        // ephemeral nodes).
        crate::util::run_in_background("zklock-close", move || {
            if let Err(e) = old.close() {
                log::debug!("closing the expired session after a renewal: {e}");
            }
        });
        // The old threads end by themselves (the connection thread has, the
        // event thread may be the one running this): not joined.
        *self.handle.threads.lock() = Some(threads);
        Ok(())
    }

    /// This session's handle with every call ended by `deadline` (or by the
    /// handle's own deadline, if earlier): the wait for a connection fails with
    /// `ConnectionLoss`, the wait for the reply with `OperationTimeout`. The
    /// session is the same; only the calls made through the returned handle are
    /// bounded. How a lock's `try_acquire(timeout)` keeps its bound through a
    /// partition.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::client::{Deadline, ZooKeeper};
    /// # let zk = ZooKeeper::connect("127.0.0.1:2181", Duration::from_secs(10), |_e| {})?;
    /// let bounded = zk.with_deadline(Deadline::after(Duration::from_millis(300)));
    /// match bounded.exists("/config", false) {
    ///     Ok(stat) => println!("{stat:?}"),
    ///     Err(e) if e.is_retryable() => println!("no answer within 300 ms"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), zklock::Error>(())
    /// ```
    #[must_use]
    pub fn with_deadline(&self, deadline: Deadline) -> ZooKeeper {
        ZooKeeper {
            handle: self.handle.clone(),
            deadline: self.deadline.min(deadline),
            pinned: self.pinned.clone(),
        }
    }

    /// The deadline this handle's calls end by ([`Deadline::never`] unless made
    /// by [`with_deadline`](Self::with_deadline)).
    pub fn deadline(&self) -> Deadline {
        self.deadline
    }

    /// A handle that does not keep the session alive: what a watcher registered
    /// on this session keeps, so that it forms no cycle through the client's
    /// watch table.
    pub fn downgrade(&self) -> WeakZooKeeper {
        WeakZooKeeper {
            handle: Arc::downgrade(&self.handle),
            deadline: self.deadline,
        }
    }

    /// Waits until the client is connected, at most `timeout`.
    ///
    /// # Errors
    /// `ConnectionLoss` when not connected in time; `SessionExpired`,
    /// `AuthFailed`, `Closed` when the handle is dead.
    pub fn wait_connected(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86400 * 365));
        self.shared().wait_connected(deadline)
    }

    /// The session id.
    pub fn session_id(&self) -> i64 {
        self.shared().session_id()
    }

    /// Whether the client is connected to a read-only server (Java's
    /// `States.CONNECTEDREADONLY`; see
    /// [`ZooKeeperBuilder::with_read_only`]): [`state`](Self::state) is
    /// `Connected`, reads are served, writes fail with
    /// [`ZkError::NotReadOnly`].
    pub fn is_read_only(&self) -> bool {
        self.shared().is_read_only()
    }

    /// See [`SessionShared::read_write_connection`].
    pub(crate) fn read_write_connection(&self) -> Option<u64> {
        self.shared().read_write_connection()
    }

    /// Whether read-only mode is on ([`ZooKeeperBuilder::with_read_only`]):
    /// without it no server serves read-only, and nothing needs the proof
    /// of [`read_write_connection`](Self::read_write_connection).
    pub(crate) fn can_be_read_only(&self) -> bool {
        self.shared().settings.read_only
    }

    /// The session password (to resume the session from another handle).
    pub fn session_password(&self) -> Vec<u8> {
        self.shared().session_password()
    }

    /// The session timeout the server negotiated.
    pub fn session_timeout(&self) -> Duration {
        self.shared().negotiated_timeout()
    }

    /// How long a call made while disconnected waits for a connection (see
    /// [`ZooKeeperBuilder::with_connect_wait`]).
    pub fn connect_wait(&self) -> Duration {
        self.shared().connect_wait()
    }

    /// How long a sent request waits for its reply (see
    /// [`ZooKeeperBuilder::with_request_timeout`]).
    pub fn request_timeout(&self) -> Duration {
        self.shared().request_timeout()
    }

    /// The connection state.
    pub fn state(&self) -> State {
        self.shared().state()
    }

    /// The last zxid this client has seen.
    pub fn last_zxid_seen(&self) -> i64 {
        self.shared().last_zxid()
    }

    /// Replaces the servers this client connects to: Java's
    /// `ZooKeeper.updateServerList` (ZOOKEEPER-1355), for an ensemble that
    /// changed ([`reconfig`](Self::reconfig); what
    /// [`ClientConfig::connect_string`] gives). `connect_string`:
    /// `host:port,...`, with no chroot or the handle's own.
    ///
    /// The session stays: a client whose server is in the new list keeps
    /// its connection, unless the list grew and the load-balancing rule
    /// picks it to move (with probability `1 - old / new`, so the new
    /// servers end with their share of the clients); a client whose server
    /// left moves, and with the probability that evens the load goes to a
    /// server that was already in the list or a new one. A client that
    /// moves ends its connection at once (without waiting here: safe on the
    /// event thread, in a watcher) and reconnects with its session id and
    /// password, so its ephemeral nodes and watches stay (its watcher sees
    /// `Disconnected` then `SyncConnected`); calls in flight on the old
    /// connection fail with `ConnectionLoss`, as on any reconnect. With
    /// [`ServerOrder::Listed`] there is no balancing: the client moves only
    /// when its server left, and then down the new list.
    ///
    /// Names are resolved again on every connect attempt (a name that moved
    /// to new addresses is followed without an update). Servers are compared
    /// as written: `localhost:2181` and `127.0.0.1:2181` are two servers here.
    ///
    /// Returns whether this client moves.
    ///
    /// # Errors
    /// `BadArguments` for a bad connect string or another chroot.
    #[doc(alias = "updateServerList")]
    pub fn update_server_list(&self, connect_string: &str) -> Result<bool> {
        let cs = ConnectString::parse(connect_string)?;
        if cs.chroot.is_some() && cs.chroot.as_deref() != self.chroot() {
            return Err(Error::BadArguments(format!(
                "update_server_list: {connect_string:?} has another chroot than {:?}",
                self.chroot()
            )));
        }
        let moves = self.shared().update_server_list(cs.hosts);
        log::info!(
            "server list updated to {connect_string}{}",
            if moves {
                "; moving to another server"
            } else {
                ""
            }
        );
        Ok(moves)
    }

    /// The servers this client connects to, as last given (connect string
    /// or [`update_server_list`](Self::update_server_list)), in the order
    /// they are tried.
    pub fn server_list(&self) -> Vec<String> {
        self.shared().server_list()
    }

    /// The server (`host:port`, as listed) of the live connection; `None`
    /// while not connected.
    pub fn current_server(&self) -> Option<String> {
        self.shared().current_server()
    }

    /// The chroot of the connect string, if any.
    pub fn chroot(&self) -> Option<&str> {
        self.handle.chroot.as_deref()
    }

    /// The number of watch registrations held by this client (all kinds).
    pub fn watch_count(&self) -> usize {
        self.shared().watches.lock().len()
    }

    fn server_path(&self, path: &str) -> String {
        prepend_chroot(self.chroot(), path)
    }

    fn client_path(&self, server_path: &str) -> String {
        strip_chroot(self.chroot(), server_path)
    }

    /// The session's default watcher (the one `watch = true` sets): library
    /// listeners pass it with their requests so that their events reach the
    /// `ZooKeeperWatcher`'s listeners too, once per event.
    pub(crate) fn default_watcher(&self) -> WatcherRef {
        self.shared().default_watcher.clone()
    }

    /// `BadArguments` for a request over ZooKeeper's packet limit.
    fn check_size(&self, w: &Writer, path: &str) -> Result<()> {
        if w.body_len() > MAX_PACKET {
            return Err(Error::BadArguments(format!(
                "request of {} bytes for {path} exceeds ZooKeeper's packet limit of {MAX_PACKET} bytes (jute.maxbuffer)",
                w.body_len()
            )));
        }
        Ok(())
    }

    fn call(&self, opcode: i32, w: Writer, reg: Option<WatchReg>, path: &str) -> Result<Vec<u8>> {
        self.check_size(&w, path)?;
        log::trace!("op {opcode} {path}");
        self.shared()
            .call(opcode, w.finish(), reg, self.deadline)
            .map_err(|e| no_read(opcode, with_path(unsupported(opcode, e), path)))
    }

    // ---- auth, multi, close -----------------------------------------------

    /// Adds authentication (`scheme`, e.g. `digest` with `user:password`); replayed
    /// after every reconnect.
    ///
    /// # Errors
    /// `AuthFailed` (the handle is then dead).
    pub fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<()> {
        if scheme.is_empty() {
            return Err(Error::BadArguments("empty auth scheme".into()));
        }
        self.shared().add_auth(scheme, auth)
    }

    /// The session's identities as the server knows them: Java's `whoAmI()`
    /// (ZooKeeper 3.7), what `zkCli whoami` prints. A plain session has its
    /// `ip` identity; each accepted [`add_auth`](Self::add_auth) adds one
    /// (digest: the user name), SASL a `sasl` one, a TLS client certificate
    /// an `x509` one. Sets no watch.
    ///
    /// # Errors
    /// [`Error::Unsupported`] (`code()` `Unimplemented`) from a server before
    /// 3.7, which also closes the connection after answering: the client
    /// reconnects and the session lives on (calls in flight on that
    /// connection fail with `ConnectionLoss`, as with Java's client, which
    /// sends the request the same way). The session's errors
    /// (`ConnectionLoss`, `SessionExpired`, `Closed`).
    #[doc(alias = "whoAmI")]
    pub fn who_am_i(&self) -> Result<Vec<ClientInfo>> {
        let w = Writer::request(0, op::WHO_AM_I);
        let body = self
            .shared()
            .call(op::WHO_AM_I, w.finish(), None, self.deadline)
            .map_err(|e| unsupported(op::WHO_AM_I, e))?;
        Reader::new(&body)
            .client_infos()
            .map_err(|_| Error::zk_code(ZkError::MarshallingError))
    }

    /// Whether the calling thread is this client's event thread, the one
    /// that runs watchers (and so the `ZooKeeperWatcher`'s listeners). A
    /// blocking wait there for something only the event thread delivers could
    /// only time out; library code checks this before waiting. `false` once
    /// the handle is closed.
    pub fn is_event_thread(&self) -> bool {
        self.handle
            .threads
            .lock()
            .as_ref()
            .is_some_and(|t| t.events.thread().id() == std::thread::current().id())
    }

    /// Whether the session has an authenticated identity, one that
    /// `CREATOR_ALL_ACL` names (HBase's `isSecureZooKeeper`, widened): SASL
    /// is configured, a TLS client certificate is presented (the server maps
    /// it to `x509:<subject>`), or an [`add_auth`](Self::add_auth) gave an id
    /// (any scheme but `ip`). The watcher's default [`AclPolicy`] is
    /// creator-only exactly when this holds.
    ///
    /// A server that does not ask for client certificates
    /// (`ssl.clientAuth=none`) gives the certificate no id: creator-only
    /// creations then fail with `InvalidACL`; choose an ACL policy explicitly
    /// there.
    pub fn has_identity(&self) -> bool {
        let shared = self.shared();
        #[cfg(feature = "tls")]
        let cert = shared
            .settings
            .tls
            .as_ref()
            .is_some_and(TlsConfig::has_client_cert);
        #[cfg(not(feature = "tls"))]
        let cert = false;
        shared.settings.sasl.is_some() || cert || shared.has_auth_identity()
    }

    /// Ends the session: the server deletes its ephemeral nodes at once. Joins
    /// the client's threads (except when called from a watcher, on the event
    /// thread, which then ends by itself). The default watcher and every
    /// registered per-watch watcher get a `Closed` event.
    ///
    /// `Ok` means the session is gone on the server: it answered closeSession,
    /// or said the session had expired (or the handle had ended already: by
    /// an expiry a server told; by a refused authentication; or it never got
    /// a session). When the answer does not come (the connection drops, e.g.
    /// because another handle resumed the session and the server closed this
    /// connection, or the server is cut off), closeSession is sent again on a
    /// new connection with the session's id and password, until 2/3 of the
    /// session timeout (at most 2 s) has passed since the call. The same after
    /// an expiry the client declared itself (no server heard for a whole
    /// session timeout): the server may still hold the session and its
    /// ephemeral nodes (in a one-way partition it still hears the client, and
    /// keeps the session up to about 2/3 of a timeout longer), so `close()`
    /// sends closeSession on a new connection and returns `Ok` only on the
    /// server's answer: closed, or a reconnect answered with the session
    /// expired. So HBase's way of expiring a
    /// session in tests (`HBaseTestingUtility.expireSession`: a second handle
    /// on the same session id and password, then its `close()`) expires it
    /// when `close()` returns `Ok`. Java's `close()` returns normally in every
    /// case (it ignores closeSession's outcome); zklock says when it could not.
    ///
    /// Idempotent: a later call returns `Ok` at once after a confirmed close,
    /// and tries again (within the same bound) after a failed one.
    ///
    /// # Errors
    /// `ConnectionLoss` when no server confirmed the close within the bound:
    /// the session may live on until the server expires it (after the session
    /// timeout), and its ephemeral nodes with it. The handle is closed anyway.
    pub fn close(&self) -> Result<()> {
        self.handle.close()
    }

    /// [`close`](Self::close) without waiting: on a short-lived thread, unless
    /// nothing is left to do (the session known gone on the server, or its
    /// background close already under way). What a `Drop` that ends the
    /// session calls: `Drop` never waits on the network.
    pub(crate) fn close_in_background(&self) {
        self.handle.close_in_background()
    }

    /// Wakes `wake` when this session ends or is closed, from the thread that
    /// ends it (not the event thread, which a user's watcher may hold up),
    /// until the returned registration is dropped; at once if it has ended.
    /// The library's waits use it instead of looking at the session
    /// periodically.
    pub(crate) fn wake_at_end(&self, wake: &Arc<crate::engine::wake::Wake>) -> EndWake {
        let shared = self.shared();
        let id = shared.wake_at_end(wake);
        EndWake { shared, id }
    }

    /// Events and async callbacks waiting for the event thread. The queue is
    /// unbounded, as Java's: the connection thread never waits for a watcher,
    /// so a slow watcher delays only other watchers, never the session. A
    /// watcher stuck for good makes it grow (about 100 bytes plus the path per
    /// event); past 10,000 queued a warning is logged.
    pub fn queued_events(&self) -> usize {
        self.shared().queued_events()
    }

    /// Test hook: the reply to the next request of `kind` is lost — the server
    /// applies it, then the connection drops before the reply reaches the caller,
    /// who sees `ConnectionLoss` (the session survives and reconnects).
    #[cfg(feature = "testing")]
    pub fn lose_next_reply(&self, kind: ReplyKind) {
        let ops: &[i32] = match kind {
            ReplyKind::Create => &[
                op::CREATE,
                op::CREATE2,
                op::CREATE_CONTAINER,
                op::CREATE_TTL,
            ],
            ReplyKind::Delete => &[op::DELETE],
            ReplyKind::SetData => &[op::SET_DATA],
            ReplyKind::GetData => &[op::GET_DATA],
            ReplyKind::Exists => &[op::EXISTS],
            ReplyKind::GetChildren => &[op::GET_CHILDREN, op::GET_CHILDREN2],
            ReplyKind::Multi => &[op::MULTI],
        };
        self.shared().lose_next_reply(ops);
    }

    /// Test hook: `hook` runs on the thread of the next call that reads its own
    /// reply, after it took the connection's read side and before it reads, so
    /// a test can make frames meant for others (an auth refusal, a
    /// notification) wait for that caller to read them.
    #[cfg(feature = "testing")]
    pub fn on_next_caller_read(&self, hook: impl FnOnce() + Send + 'static) {
        self.shared().on_next_caller_read(Box::new(hook));
    }

    /// Test hook: every request write of this session from now on is followed
    /// by `pause` (on the writing thread, the writer held; zero: none), so two
    /// writes reach the server `pause` apart and a proxy reads them apart
    /// ([`FaultProxy::request_reads`](crate::testing::FaultProxy::request_reads)):
    /// a test tells whether requests left in one write.
    #[cfg(feature = "testing")]
    pub fn pause_after_writes(&self, pause: Duration) {
        self.shared().pause_after_writes(pause);
    }
}

/// A registration of [`ZooKeeper::wake_at_end`]: unregistered on drop.
pub(crate) struct EndWake {
    shared: Arc<SessionShared>,
    id: u64,
}

impl Drop for EndWake {
    fn drop(&mut self) {
        self.shared.forget_end_wake(self.id);
    }
}

/// Which reply [`ZooKeeper::lose_next_reply`] loses (feature `testing`).
#[cfg(feature = "testing")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    /// Any create.
    Create,
    /// delete.
    Delete,
    /// setData.
    SetData,
    /// getData.
    GetData,
    /// exists.
    Exists,
    /// getChildren / getChildren2.
    GetChildren,
    /// multi.
    Multi,
}

/// A watch registration for `watcher` on `path`, if any.
fn watch_reg(
    exists: bool,
    kind: Kind,
    path: &str,
    watcher: Option<WatcherRef>,
) -> Option<WatchReg> {
    watcher.map(|watcher| WatchReg {
        exists,
        kind,
        path: path.to_string(),
        watcher,
    })
}

/// A getData reply: the data and its `Stat`.
fn read_data(body: &[u8]) -> std::result::Result<(Vec<u8>, Stat), proto::DecodeError> {
    let mut r = Reader::new(body);
    let data = r.buffer()?;
    Ok((data, r.stat()?))
}

fn marshalling(path: &str) -> Error {
    Error::zk(ZkError::MarshallingError, path)
}

fn with_path(e: Error, path: &str) -> Error {
    match e {
        Error::Zk { code, path: None } => Error::zk(code, path),
        other => other,
    }
}

/// What a server lacks when it answers `UNIMPLEMENTED` to `opcode`: the
/// operation and the ZooKeeper version or server setting it needs. `None`
/// for the operations every supported server has.
///
/// A server older than the opcode answers `UNIMPLEMENTED` from its
/// `UnimplementedRequestProcessor` (and closes the connection); a server
/// with TTL nodes turned off answers a createTTL `UNIMPLEMENTED` from its
/// request checks. ZooKeeper 3.5 has none of the 3.6 opcodes below: no 3.5
/// server is at hand for the tests, so this table is unit-tested, and the
/// 3.6 and 3.7 rows are tested against 3.6.3.
fn server_lacks(opcode: i32) -> Option<(&'static str, &'static str)> {
    Some(match opcode {
        op::CREATE_TTL => (
            "TTL nodes (createTTL)",
            "ZooKeeper 3.5.3 or later started with -Dzookeeper.extendedTypesEnabled=true",
        ),
        op::CREATE_CONTAINER => (
            "container nodes (createContainer)",
            "ZooKeeper 3.5 or later",
        ),
        op::ADD_WATCH => (
            "persistent and recursive watches (addWatch)",
            "ZooKeeper 3.6 or later",
        ),
        op::GET_ALL_CHILDREN_NUMBER => ("getAllChildrenNumber", "ZooKeeper 3.6 or later"),
        op::GET_EPHEMERALS => ("getEphemerals", "ZooKeeper 3.6 or later"),
        op::MULTI_READ => ("multiRead", "ZooKeeper 3.6 or later"),
        op::WHO_AM_I => ("whoAmI", "ZooKeeper 3.7 or later"),
        _ => return None,
    })
}

/// `UNIMPLEMENTED` for an opcode of [`server_lacks`] as
/// [`Error::Unsupported`]; any other error unchanged.
fn unsupported(opcode: i32, e: Error) -> Error {
    match (&e, server_lacks(opcode)) {
        (
            Error::Zk {
                code: ZkError::Unimplemented,
                ..
            },
            Some((operation, needs)),
        ) => Error::Unsupported { operation, needs },
        _ => e,
    }
}

/// `NOAUTH` to a read that needs the node's `READ` (`exists` from
/// ZooKeeper 3.8.4 and 3.9.2, ZOOKEEPER-2590; `getData`, `getChildren`
/// always) as [`Error::NoReadPermission`], naming the read and the node;
/// any other error unchanged. `e` carries its path already.
fn no_read(opcode: i32, e: Error) -> Error {
    let operation = match opcode {
        op::EXISTS => "exists",
        op::GET_DATA => "getData",
        op::GET_CHILDREN | op::GET_CHILDREN2 => "getChildren",
        _ => return e,
    };
    match e {
        Error::Zk {
            code: ZkError::NoAuth,
            path: Some(path),
        } => Error::NoReadPermission { operation, path },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_connect_strings_and_paths_fail_before_connecting() {
        let e = ZooKeeper::connect("", Duration::from_secs(1), |_e: WatchedEvent| {}).unwrap_err();
        assert!(matches!(e, Error::BadArguments(_)), "{e}");
        let e = ZooKeeper::connect("h:1", Duration::ZERO, |_e: WatchedEvent| {}).unwrap_err();
        assert!(matches!(e, Error::BadArguments(_)), "{e}");
    }

    #[test]
    fn unimplemented_names_what_the_server_lacks() {
        let unimplemented = || Error::zk_code(ZkError::Unimplemented);
        for (opcode, needs) in [
            (op::ADD_WATCH, "3.6"),
            (op::GET_ALL_CHILDREN_NUMBER, "3.6"),
            (op::GET_EPHEMERALS, "3.6"),
            (op::MULTI_READ, "3.6"),
            (op::WHO_AM_I, "3.7"),
            (op::CREATE_TTL, "extendedTypesEnabled=true"),
            (op::CREATE_CONTAINER, "3.5"),
        ] {
            let e = with_path(unsupported(opcode, unimplemented()), "/a");
            assert!(matches!(e, Error::Unsupported { .. }), "{opcode}: {e:?}");
            assert!(e.is(ZkError::Unimplemented), "{opcode}: {e:?}");
            let text = e.to_string();
            assert!(text.contains(needs), "{opcode}: {text}");
        }
        // Other opcodes and other codes: unchanged.
        let e = unsupported(op::GET_DATA, unimplemented());
        assert!(
            matches!(
                e,
                Error::Zk {
                    code: ZkError::Unimplemented,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = unsupported(op::ADD_WATCH, Error::zk_code(ZkError::NoNode));
        assert!(e.is(ZkError::NoNode), "{e:?}");
    }

    #[test]
    fn noauth_on_a_read_names_the_missing_read() {
        let noauth = || Error::zk(ZkError::NoAuth, "/a");
        for (opcode, operation) in [
            (op::EXISTS, "exists"),
            (op::GET_DATA, "getData"),
            (op::GET_CHILDREN, "getChildren"),
            (op::GET_CHILDREN2, "getChildren"),
        ] {
            let e = no_read(opcode, noauth());
            assert!(
                matches!(&e, Error::NoReadPermission { operation: o, path } if *o == operation && path == "/a"),
                "{opcode}: {e:?}"
            );
            assert!(e.is(ZkError::NoAuth), "{e:?}");
            assert!(e.to_string().contains("READ"), "{e}");
        }
        assert!(no_read(op::EXISTS, noauth())
            .to_string()
            .contains("ZOOKEEPER-2590"));
        // Writes (their permission is another one) and other codes: unchanged.
        assert!(matches!(
            no_read(op::SET_DATA, noauth()),
            Error::Zk {
                code: ZkError::NoAuth,
                ..
            }
        ));
        assert!(matches!(
            no_read(op::EXISTS, Error::zk(ZkError::NoNode, "/a")),
            Error::Zk {
                code: ZkError::NoNode,
                ..
            }
        ));
    }

    #[test]
    fn handle_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<ZooKeeper>();
    }
}
