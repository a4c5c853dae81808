//! The connection thread: connect and handshake (a total deadline per attempt),
//! read frames (bounded by `jute.maxbuffer`), ping and time the pings, match
//! replies to requests, dispatch notifications, detect a dead connection,
//! reconnect, and end the session (closing it on the server after a local
//! expiry).
//!
//! Event order at a connection's or a session's end is Java's: on a lost
//! connection the requests left are answered (`ConnectionLoss`, callbacks
//! queued in the order sent) before `Disconnected` is queued
//! ([`SessionShared::on_disconnected`]); `Expired` and `AuthFailed` are queued
//! before what is left fails, `Closed` after ([`SessionShared::finish`]). The
//! state changes before either, so a callback never finds the session
//! connected.

use super::*;

/// The bound on one connect attempt: the handshake timeout, within Java's
/// per-attempt bound (`java`: the session timeout's share of the hosts), at
/// least 100 ms, doubled for each of the `slow` attempts before it in a row
/// that a server accepted and then ran out of time in, up to Java's bound.
///
/// A live server answers a ConnectRequest in milliseconds, and one in its
/// start-up window accepts and never answers: the handshake timeout (2 s by
/// default) keeps such a server from eating the session on a one-host
/// connect string. But a live server can be slower than that, a freshly
/// restarted JVM on a loaded machine doing its first TLS handshakes: every
/// attempt then ran out of time a moment before its answer, and the client
/// never got back (a TLS server restart under `make test-versions`: three
/// attempts in a row, each dropped by the client at 2 s). Java waits its
/// whole per-attempt bound every time; zklock starts short and stretches
/// toward it.
pub(super) fn attempt_bound(java: Duration, handshake_timeout: Duration, slow: u32) -> Duration {
    let base = java.min(handshake_timeout);
    base.saturating_mul(1 << slow.min(16))
        .min(java.max(base))
        .max(Duration::from_millis(100))
}

/// The most [`SessionShared::pause_before_reconnect`] waits: Java's 1 s.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// Connected read-only, the first look for a read-write server comes after
/// this (Java's `minPingRwTimeout`); each later one after twice the wait
/// before it, up to [`RW_PROBE_MAX`] (Java's `maxPingRwTimeout`).
const RW_PROBE_FIRST: Duration = Duration::from_millis(100);
const RW_PROBE_MAX: Duration = Duration::from_secs(60);
/// The most one probe (`isro`) may take: Java's 1 s socket timeout, and at
/// most a quarter of the read timeout (the connection thread probes, and its
/// pings must keep their times).
const RW_PROBE_BOUND: Duration = Duration::from_secs(1);

/// Whether `host` answers the `isro` four-letter word with `rw` within
/// `bound` (Java's `pingRwServer`). Plain TCP, as Java's: a server reached
/// only over TLS is never found this way (the client comes back to
/// read-write when the read-only server rejoins its quorum and closes its
/// connections).
fn answers_read_write(host: &str, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    let Ok(addrs) = host.to_socket_addrs() else {
        return false;
    };
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let Ok(mut sock) = TcpStream::connect_timeout(&addr, left) else {
            continue;
        };
        let mut answer = Vec::new();
        let asked = (|| -> io::Result<()> {
            use std::io::{Read, Write};
            sock.set_write_timeout(Some(left))?;
            sock.write_all(b"isro")?;
            sock.shutdown(Shutdown::Write)?;
            let mut chunk = [0u8; 16];
            while answer.len() < 16 {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                sock.set_read_timeout(Some(left))?;
                match sock.read(&mut chunk)? {
                    0 => break,
                    n => answer.extend_from_slice(&chunk[..n]),
                }
            }
            Ok(())
        })();
        let _ = sock.shutdown(Shutdown::Both);
        if asked.is_ok() || !answer.is_empty() {
            return answer.starts_with(b"rw");
        }
    }
    false
}

/// A connection made by [`SessionShared::handshake`]: the stream, whether the
/// session existed before, and bytes read past the ConnectResponse.
pub(super) type Connected = (Link, bool, Vec<u8>);

/// Why an attempt to close a locally expired session failed.
pub(super) enum CloseFailure {
    /// Try again (with the next host, after a backoff).
    Retry(io::Error),
    /// Give up: a further attempt could only extend the session on the server,
    /// or be refused again.
    Final(io::Error),
}

/// Why a connection ended (its fields are read through `Debug`, in logs).
#[derive(Debug)]
#[allow(dead_code)]
pub(super) enum ConnEnd {
    Io(io::Error),
    ReadTimeout(Duration),
    /// A ping unanswered for the read timeout (bytes may still flow).
    PingTimeout(Duration),
    Protocol(String),
    AuthFailed,
    Closing,
    /// A server-list update moved this client elsewhere.
    Moved,
    /// Connected read-only, a probe found this read-write server: the
    /// client moves to it (Java's `RWServerFoundException`).
    ReadWriteFound(String),
    #[cfg(feature = "testing")]
    Injected,
}

impl ConnEnd {
    /// The same end again, for every later reader of a failed read side (an
    /// `io::Error` is not `Clone`: its kind and text are kept).
    fn again(&self) -> ConnEnd {
        match self {
            ConnEnd::Io(e) => ConnEnd::Io(io::Error::new(e.kind(), e.to_string())),
            ConnEnd::ReadTimeout(d) => ConnEnd::ReadTimeout(*d),
            ConnEnd::PingTimeout(d) => ConnEnd::PingTimeout(*d),
            ConnEnd::Protocol(s) => ConnEnd::Protocol(s.clone()),
            ConnEnd::AuthFailed => ConnEnd::AuthFailed,
            ConnEnd::Closing => ConnEnd::Closing,
            ConnEnd::Moved => ConnEnd::Moved,
            ConnEnd::ReadWriteFound(h) => ConnEnd::ReadWriteFound(h.clone()),
            #[cfg(feature = "testing")]
            ConnEnd::Injected => ConnEnd::Injected,
        }
    }
}

/// A connection's read side: the stream, and bytes read and not handled yet
/// (an incomplete frame). One holder at a time reads (the `reader` mutex),
/// so frames are handled one by one, in the order they came.
pub(super) struct ReadSide {
    link: Link,
    buf: Vec<u8>,
    /// Where the unhandled bytes in `buf` start.
    start: usize,
    chunk: Box<[u8]>,
    max_buffer: usize,
    /// The first failure: the connection is over, and nothing more of it is
    /// handled (a frame left in the buffer, say a reply the testing hook lost,
    /// must not be handled by the next reader); every later read fails the
    /// same way (an AuthFailed read by a caller stays AuthFailed for the
    /// connection thread: final, not a reconnect).
    failed: Option<ConnEnd>,
    /// The socket's read timeout now (the tick, or less for a caller whose
    /// deadline is nearer).
    timeout: Duration,
    tick: Duration,
}

impl ReadSide {
    /// `early`: bytes read with the handshake's reply.
    /// `tick`: the socket's read timeout, set already.
    pub(super) fn new(link: Link, early: Vec<u8>, max_buffer: usize, tick: Duration) -> ReadSide {
        let mut buf = early;
        buf.reserve(64 * 1024);
        ReadSide {
            link,
            buf,
            start: 0,
            chunk: vec![0u8; 64 * 1024].into_boxed_slice(),
            max_buffer,
            failed: None,
            timeout: tick,
            tick,
        }
    }

    /// Handles the complete frames read earlier, if any; else reads once (up
    /// to the socket's read timeout) and handles the frames that completed.
    /// After a failure, every later call fails.
    pub(super) fn read_once(&mut self, shared: &SessionShared) -> Result<(), ConnEnd> {
        if let Some(end) = &self.failed {
            return Err(end.again());
        }
        let read = self.read_and_handle(shared);
        if let Err(end) = &read {
            self.failed = Some(end.again());
        }
        read
    }

    /// [`read_once`](Self::read_once), blocking at most `left` (a caller's
    /// time to its deadline) where that is less than the tick.
    pub(super) fn read_within(
        &mut self,
        shared: &SessionShared,
        left: Duration,
    ) -> Result<(), ConnEnd> {
        let want = left.clamp(Duration::from_millis(1), self.tick);
        if want != self.timeout {
            if let Err(e) = self.link.set_read_timeout(Some(want)) {
                return Err(ConnEnd::Io(e));
            }
            self.timeout = want;
        }
        let read = self.read_once(shared);
        if self.timeout != self.tick && self.link.set_read_timeout(Some(self.tick)).is_ok() {
            self.timeout = self.tick;
        }
        read
    }

    /// Whether the connection failed (nothing more is read).
    pub(super) fn failed(&self) -> bool {
        self.failed.is_some()
    }

    fn read_and_handle(&mut self, shared: &SessionShared) -> Result<(), ConnEnd> {
        // A whole frame (or a bad length) in the buffer is handled first.
        if matches!(self.next_frame(), Ok(None)) {
            match self.link.read_into(&mut self.chunk, &mut self.buf) {
                Ok(_) => {}
                Err(e) if is_timeout(&e) => return Ok(()),
                Err(e) => return Err(ConnEnd::Io(e)),
            }
        }
        self.handle_frames(shared)
    }

    /// The length of the next frame's body when it waits whole in the buffer;
    /// `None` while it is incomplete. A length out of range is Java's "Packet
    /// len is out of range": the connection is reset before any of it is
    /// buffered, so memory stays bounded.
    fn next_frame(&self) -> Result<Option<usize>, ConnEnd> {
        let avail = &self.buf[self.start..];
        if avail.len() < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]);
        if len < 16 || len as usize >= self.max_buffer {
            return Err(ConnEnd::Protocol(format!(
                "frame length {len} out of range (max buffer {})",
                self.max_buffer
            )));
        }
        let len = len as usize;
        Ok((avail.len() >= 4 + len).then_some(len))
    }

    /// Handles every complete frame in the buffer.
    fn handle_frames(&mut self, shared: &SessionShared) -> Result<(), ConnEnd> {
        let mut framed = false;
        while let Some(len) = self.next_frame()? {
            let avail = &self.buf[self.start..];
            if shared.handle_frame(&avail[4..4 + len])? {
                shared.pings.lock().pop_front();
            }
            framed = true;
            self.start += 4 + len;
        }
        // Only whole frames count as hearing from the server (as in Java):
        // bytes that never complete a frame, e.g. after a corrupted length,
        // end in the read timeout.
        if framed {
            shared.touch_heard();
        }
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 64 * 1024 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(())
    }
}

impl SessionShared {
    pub(super) fn run(self: Arc<Self>) {
        let mut failures = 0u32;
        // Attempts in a row that ran out of time on a server that accepted
        // them (see `handshake`).
        let mut slow = 0u32;
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
                self.declared_expired.store(true, Ordering::SeqCst);
                break Terminal::Expired;
            }
            let (host, n_hosts, generation) = {
                let mut hosts = self.hosts.lock();
                (
                    hosts.next(&mut unit_random),
                    hosts.len(),
                    hosts.generation(),
                )
            };
            let host = &host;
            let mut accepted = false;
            match self.handshake(host, n_hosts, &mut slow, &mut accepted) {
                Ok(None) => break Terminal::Expired,
                Ok(Some((stream, reconnect, pending))) => {
                    failures = 0;
                    // A move asked before this attempt is done by it; one
                    // asked during its handshake ends it (see
                    // `HostList::connected`). Under the list's lock, so an
                    // update that comes next sets its request after this.
                    {
                        let mut hosts = self.hosts.lock();
                        let must_move = hosts.connected(host, generation);
                        self.move_requested.store(must_move, Ordering::SeqCst);
                    }
                    self.failed_hosts.lock().clear();
                    #[cfg(feature = "tls")]
                    self.tls_failed.lock().clear();
                    let end = match self.on_connected(&stream, reconnect, pending) {
                        Ok(()) => self.serve(&stream),
                        Err(e) => ConnEnd::Io(e),
                    };
                    // Through the reader's own handle, never the writer lock: a
                    // caller blocked writing into a dead link fails at once.
                    stream.shutdown();
                    // A caller reading fails at once too, and lets it go.
                    self.reader.lock().take();
                    // And closed, not only shut down (unread bytes make the
                    // close a reset, which the server sees at once): the
                    // writer slot's clone goes now if the writer is free, else
                    // when its holder lets it go (see `release_writer`).
                    if let Some(slot) = self.writer.try_lock() {
                        self.release_writer(slot);
                    }
                    drop(stream);
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
                        ConnEnd::Moved => info!(
                            "the server list changed: leaving {host} for another server (the session moves with the client)"
                        ),
                        ConnEnd::ReadWriteFound(rw) => info!(
                            "leaving read-only {host} for read-write {rw}"
                        ),
                        e => info!("connection to {host} lost ({e:?}); reconnecting"),
                    }
                    // An auth failure ends the handle: no Disconnected before
                    // AuthFailed, and pending calls fail with AuthFailed.
                    if let ConnEnd::AuthFailed = end {
                        break Terminal::AuthFailed;
                    }
                    self.on_disconnected();
                    self.hosts.lock().disconnected();
                    if let ConnEnd::Closing = end {
                        break Terminal::Closed;
                    }
                    if let ConnEnd::ReadWriteFound(rw) = end {
                        // Straight to the server the probe found (Java's
                        // `rwServerAddress`): no other handle contends here.
                        self.hosts.lock().prefer(&rw);
                        continue;
                    }
                    self.pause_before_reconnect();
                }
                Err(e) if SaslFailure::in_io(&e).is_some() => {
                    // Fatal, told once (AuthFailed), never retried; the
                    // reason goes to the error `connect` returns.
                    warn!("connection to {host}: {e}");
                    *self.auth_failure.lock() = SaslFailure::in_io(&e).map(|f| f.0.clone());
                    break Terminal::AuthFailed;
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    self.note_failure(host, &e);
                    // A TLS failure (a certificate, not the network) does not
                    // mend itself in milliseconds: straight to the longest wait.
                    #[cfg(feature = "tls")]
                    if self.tls_failure(host, &e) {
                        failures = failures.max(8);
                    }
                    // 10 ms, 20 ms, ... up to 1 s, jittered: a dead ensemble costs
                    // no CPU, a blip costs little time.
                    let exp = failures.saturating_sub(1).min(7);
                    let mut delay =
                        jitter(Duration::from_millis(10 << exp).min(Duration::from_secs(1)));
                    // A server that took the connection of a session and let it
                    // go unanswered is up but not serving (electing a leader,
                    // at its connection limit): the whole fleet it dropped is
                    // knocking, so each waits Java's random 0-1 s, which
                    // spreads their return over a second instead of bunching
                    // it on the backoff's steps (the storm bench's "most
                    // reconnections in any 100 ms"). A refused or silent
                    // server, and a first connect, keep the short backoff.
                    if accepted && not_serving(&e) {
                        if let Some(pause) = self.reconnect_pause() {
                            delay = pause;
                        }
                    }
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
            let hosts = self.server_list();
            self.close_expired_session(&hosts, 0);
        }
    }

    /// Java's pause before reconnecting: `ClientCnxn.SendThread.startConnect`
    /// sleeps a random 0–1000 ms before every connect but the first. It
    /// matters when the server closed the connection because another handle
    /// resumed the session (the server closes the session's old connection on
    /// every ConnectRequest that revalidates it): the other handle's next
    /// request, typically HBase's `expireSession` closing the session, gets
    /// through before this handle takes the session back. Bounded here by a
    /// quarter of the negotiated session timeout and by half the time left
    /// before the session must have expired, so a short session is not lost
    /// to the pause. (Java also sleeps a further second, its host provider's
    /// spin delay, when it comes back to the host it was connected to, e.g.
    /// on a one-host connect string; zklock does not: the random pause
    /// already orders the two handles, and a second more only eats the
    /// session's time.) Ends at once on `close()`.
    fn pause_before_reconnect(&self) {
        let Some(pause) = self.reconnect_pause() else {
            return;
        };
        debug!("reconnecting in {pause:?}");
        let until = Instant::now() + pause;
        let mut s = self.session.lock();
        while !s.closing && !self.session_cv.wait_until(&mut s, until).timed_out() {}
    }

    /// The random pause of [`pause_before_reconnect`](Self::pause_before_reconnect):
    /// up to Java's 1 s, a quarter of the negotiated session timeout and
    /// half the time left before the session must have expired; `None`
    /// before the first session (nothing negotiated yet).
    fn reconnect_pause(&self) -> Option<Duration> {
        let mut max = RECONNECT_PAUSE.min(self.negotiated_timeout() / 4);
        if let Some(left) = self.until_surely_expired() {
            max = max.min(left / 2);
        }
        let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        (nanos > 0).then(|| Duration::from_nanos(random_u64() % nanos))
    }

    /// After declaring the session expired on its own (no server heard for a
    /// whole session timeout), the client closes it on the server: the server
    /// may still hold it (a one-way partition; a server restarted from its
    /// snapshot restores sessions), and its ephemeral nodes would block others
    /// for up to another session timeout. Reconnects with the old id and
    /// password only to send closeSession; tells nobody anything (the handle is
    /// dead, Expired was delivered) and gives up after one more negotiated
    /// session timeout, or at once when `close()` is called, so close and drop
    /// stay bounded as before. With SASL it also gives up after an attempt
    /// that heard no answer in time (see [`close_remote`](Self::close_remote)).
    pub(super) fn close_expired_session(&self, hosts: &[String], mut next: usize) {
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
            match self.close_remote(host, id, &password, until, true) {
                Ok(gone) => {
                    info!("session {id:#x}: {gone} on {host}");
                    self.close_confirmed.store(true, Ordering::SeqCst);
                    return;
                }
                Err(CloseFailure::Final(e)) => {
                    info!("not closing expired session {id:#x} on the server: {e}");
                    return;
                }
                Err(CloseFailure::Retry(e)) => {
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
    ///
    /// Without SASL, closeSession (behind the `add_auth` packets, which a
    /// server enforcing `digest` needs first) goes out right behind the
    /// ConnectRequest, without waiting for the ConnectResponse (the server
    /// reads no request before it has settled the connect, as for the
    /// SetWatches and auth packets Java sends the same way): a reconnect with
    /// the old session id refreshes the session on the server, so an attempt
    /// whose answers are lost (a one-way cut) must close the session it
    /// refreshed, or each attempt would extend it by a whole session timeout.
    ///
    /// With SASL the server refuses any request of an unauthenticated
    /// connection, closeSession included (`SESSIONCLOSEDREQUIRESASLAUTH`), and
    /// the exchange needs the server's answers, so the close follows Java's
    /// order: ConnectResponse, the whole SASL exchange, then closeSession. An
    /// attempt that hears no ConnectResponse in time is the last one
    /// ([`CloseFailure::Final`]): its ConnectRequest may have refreshed the
    /// session on a server whose answers are lost, and every further attempt
    /// would refresh it again without being able to close it. An attempt that
    /// reached no server (refused, reset, closed before answering) is retried.
    ///
    /// Once the ConnectResponse has come, an attempt waits at most half the
    /// time left for the rest, then is retried (with or without SASL): the
    /// server drops a request of a session that another close ended meanwhile
    /// without answering it or closing the connection, and only a new
    /// ConnectRequest gets its word.
    ///
    /// Only the server's word counts: its answer to closeSession, or a
    /// ConnectResponse (or a closeSession answer) saying the session expired.
    /// A connection that ends before either (another handle took the session
    /// over, and the server closed this connection) is a failed attempt,
    /// retried. `background`: the connection thread's close of a locally
    /// expired session, which `close()` abandons; `close()` itself passes
    /// `false`.
    pub(super) fn close_remote(
        &self,
        host: &str,
        id: i64,
        password: &[u8],
        until: Instant,
        background: bool,
    ) -> Result<&'static str, CloseFailure> {
        let deadline = (Instant::now() + self.settings.handshake_timeout).min(until);
        let addr = host
            .to_socket_addrs()
            .map_err(CloseFailure::Retry)?
            .next()
            .ok_or_else(|| {
                CloseFailure::Retry(io::Error::new(io::ErrorKind::NotFound, "no address"))
            })?;
        let timeout = left_until(deadline).map_err(CloseFailure::Retry)?;
        let sock = TcpStream::connect_timeout(&addr, timeout).map_err(CloseFailure::Retry)?;
        *self.handshaking.lock() = Some(sock.try_clone().map_err(CloseFailure::Retry)?);
        let sasl = self.settings.sasl.as_ref();
        let mut requested = false;
        // Set once the server has answered the ConnectRequest: from then on,
        // silence is not a lost link but a request the server dropped.
        let mut heard = false;
        let result = (|| {
            if background && self.abandon.load(Ordering::SeqCst) {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "closed"));
            }
            let link = self.open_link(sock, host, deadline)?;
            let answer = (|| {
                let timeout_ms =
                    i32::try_from(self.settings.session_timeout.as_millis()).unwrap_or(i32::MAX);
                let mut frames = proto::connect_request(
                    self.last_zxid(),
                    timeout_ms,
                    id,
                    password,
                    self.settings.read_only,
                );
                let close = self.close_frames();
                if sasl.is_none() {
                    frames.extend_from_slice(&close);
                }
                requested = true;
                link.write_all(&frames)?;
                let mut pending = Vec::new();
                let body = link.read_frame_by(&mut pending, 4096, deadline)?;
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
                heard = true;
                // ZooKeeper drops a request whose session is gone, unanswered,
                // and leaves its connection open ("Dropping request",
                // MissingSessionException): a closeSession (or a SASL packet)
                // behind a reconnect that another close of the session
                // overtook — a stale attempt released by a healed partition,
                // another handle — is never answered. The server has just
                // answered, so silence now means that: the attempt ends at
                // half the time left, and the next one asks again on a new
                // connection, whose ConnectResponse says the session is gone.
                let deadline =
                    deadline.min(Instant::now() + left_until(until).unwrap_or_default() / 2);
                if let Some(sasl) = sasl {
                    self.authenticate(&link, sasl, &mut pending, deadline)?;
                    link.write_all(&close)?;
                }
                // Its answer ends it; the auth packets' answers come first.
                // The connection ending before it is no answer: retried.
                loop {
                    let body =
                        link.read_frame_by(&mut pending, self.settings.max_buffer, deadline)?;
                    let hdr = ReplyHeader::read(&mut Reader::new(&body))
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
                    if hdr.xid == xid::AUTH {
                        if hdr.err != 0 {
                            return Err(io::Error::new(
                                io::ErrorKind::PermissionDenied,
                                format!(
                                    "the server refused the session's auth: {}",
                                    ZkError::from_code(hdr.err)
                                ),
                            ));
                        }
                        continue;
                    }
                    if hdr.err == ZkError::SessionExpired.code() {
                        return Ok("already expired");
                    }
                    if hdr.err != 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            format!(
                                "the server refused closeSession: {}",
                                ZkError::from_code(hdr.err)
                            ),
                        ));
                    }
                    return Ok("closed");
                }
            })();
            link.shutdown();
            answer
        })();
        self.handshaking.lock().take();
        result.map_err(|e| {
            let unanswered = matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            );
            // Refused (SASL, or the close itself): it would be refused again.
            let refused = e.kind() == io::ErrorKind::PermissionDenied;
            if refused || (sasl.is_some() && requested && unanswered && !heard) {
                CloseFailure::Final(e)
            } else {
                CloseFailure::Retry(e)
            }
        })
    }

    /// The `add_auth` packets, then closeSession (xid 1): what a close after
    /// a local expiry sends once the connection is set up.
    fn close_frames(&self) -> Vec<u8> {
        let mut frames = Vec::new();
        for (scheme, auth) in self.auth.lock().iter() {
            frames.extend_from_slice(&auth_frame(scheme, auth));
        }
        frames.extend_from_slice(&Writer::request(1, op::CLOSE_SESSION).finish());
        frames
    }

    /// The connection's stream on a connected socket: TLS (its handshake by
    /// `deadline`) when configured, else plain.
    fn open_link(&self, sock: TcpStream, host: &str, deadline: Instant) -> io::Result<Link> {
        sock.set_nodelay(true)?;
        sock.set_write_timeout(Some(left_until(deadline)?))?;
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.settings.tls {
            return Link::tls(sock, tls, host, deadline);
        }
        let _ = host;
        Ok(Link::plain(sock))
    }

    /// TCP connect + ConnectRequest/Response. `Ok(None)`: the session expired.
    /// `Ok(Some((stream, reconnect, pending)))`: connected; `reconnect` when the
    /// session already existed; `pending`, bytes read past the ConnectResponse.
    ///
    /// `slow`: the attempts in a row before this one that a server accepted
    /// (TCP) and then ran out of time in (TLS, ConnectResponse, SASL); this
    /// attempt counts in it (reset when one succeeds).
    pub(super) fn handshake(
        &self,
        host: &str,
        n_hosts: usize,
        slow: &mut u32,
        accepted: &mut bool,
    ) -> io::Result<Option<Connected>> {
        let (id, password, negotiated, seen_rw) = {
            let s = self.session.lock();
            (s.id, s.password.clone(), s.negotiated, s.seen_rw)
        };
        // A session only read-only servers ever served is local to the one
        // that made it: a read-write server does not know it, so the client
        // asks for a new session (Java's `seenRwServerBefore`), and every
        // layer above learns of the new id as of a renewed session.
        let (send_id, send_password) = if id != 0 && !seen_rw {
            (0, vec![0; 16])
        } else {
            (id, password)
        };
        let n = u32::try_from(n_hosts).unwrap_or(u32::MAX).max(1);
        let mut attempt = attempt_bound(negotiated / n, self.settings.handshake_timeout, *slow);
        // Never wait on a silent server past the point where the session must
        // have expired.
        if let Some(left) = self.until_surely_expired() {
            attempt = attempt.min(left.max(Duration::from_millis(10)));
        }
        let deadline = Instant::now() + attempt;
        // A name that does not resolve: told at once (a lasting cause).
        let addrs: Vec<SocketAddr> = host
            .to_socket_addrs()
            .map_err(|e| {
                HostFailure::into_io(
                    ConnectCause::Unresolvable,
                    format!("cannot resolve the host name ({e})"),
                )
            })?
            .collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "host resolved to no address");
        let mut stream = None;
        // A host is refused only when every one of its addresses refused.
        let mut refused = 0;
        for addr in &addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match TcpStream::connect_timeout(addr, left) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => {
                    if e.kind() == io::ErrorKind::ConnectionRefused {
                        refused += 1;
                    }
                    last = e;
                }
            }
        }
        if stream.is_none()
            && last.kind() == io::ErrorKind::ConnectionRefused
            && refused < addrs.len()
        {
            last = io::Error::other(format!("{last} (on some addresses)"));
        }
        let stream = stream.ok_or(last)?;
        *accepted = true;
        *self.handshaking.lock() = Some(stream.try_clone()?);
        // After publishing the socket: a close() before it is seen here, one
        // after it shuts the socket down.
        let result = if self.session.lock().closing {
            Err(io::Error::new(io::ErrorKind::Interrupted, "closing"))
        } else {
            self.exchange_connect(stream, host, send_id, &send_password, deadline)
                // SetWatches on the new session too (Java sends them on
                // every connection): the watches set on the old one survive.
                .map(|c| c.map(|(link, reconnect, early)| (link, reconnect || id != 0, early)))
        };
        self.handshaking.lock().take();
        match &result {
            Err(e) if e.kind() == io::ErrorKind::TimedOut => *slow = slow.saturating_add(1),
            Err(_) => {}
            Ok(_) => *slow = 0,
        }
        result
    }

    /// The ConnectRequest/ConnectResponse exchange of [`handshake`](Self::handshake).
    pub(super) fn exchange_connect(
        &self,
        sock: TcpStream,
        host: &str,
        id: i64,
        password: &[u8],
        deadline: Instant,
    ) -> io::Result<Option<Connected>> {
        let stream = self.open_link(sock, host, deadline)?;
        let requested =
            i32::try_from(self.settings.session_timeout.as_millis()).unwrap_or(i32::MAX);
        let frame = proto::connect_request(
            self.last_zxid(),
            requested,
            id,
            password,
            self.settings.read_only,
        );
        stream.write_all(&frame)?;
        let mut pending = Vec::new();
        let mut len = [0u8; 4];
        stream.read_by(&mut len, &mut pending, deadline)?;
        let length = i32::from_be_bytes(len);
        // Bytes that cannot begin a ConnectResponse (an HTTP or SSH server's
        // text): not ZooKeeper, told at once (a lasting cause).
        if !(0..=4096).contains(&length) {
            return Err(not_zookeeper(&len, &pending));
        }
        let mut body = vec![0u8; length as usize];
        stream.read_by(&mut body, &mut pending, deadline)?;
        let resp = ConnectResponse::read(&mut Reader::new(&body)).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad connect response: {}", e.0),
            )
        })?;
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
        if s.id != 0 && s.id != resp.session_id {
            info!(
                "session {:#x} was a read-only server's; {host} gave session {:#x}",
                s.id, resp.session_id
            );
        }
        s.read_only = resp.read_only;
        if !resp.read_only {
            s.seen_rw = true;
        }
        s.id = resp.session_id;
        s.password = resp.password;
        s.negotiated = Duration::from_millis(resp.timeout_ms as u64);
        metric!(negotiated_timeout(s.negotiated));
        debug!(
            "connected to {host}: session {:#x}, timeout {:?}",
            s.id, s.negotiated
        );
        drop(s);
        if let Some(sasl) = &self.settings.sasl {
            self.authenticate(&stream, sasl, &mut pending, deadline)?;
            debug!("SASL {} authenticated on {host}", sasl.mechanism());
        }
        Ok(Some((stream, id != 0, pending)))
    }

    /// The SASL exchange (Java's `ZooKeeperSaslClient`), by the attempt's
    /// `deadline`: `GetSASLRequest` with the mechanism's token, the server's
    /// `SetSASLResponse`, until the mechanism is complete (two round trips for
    /// DIGEST-MD5). Nothing else is sent before it ends. A reply with an error
    /// code, or a server token the mechanism rejects, is a [`SaslFailure`]
    /// (the handle ends with `AuthFailed`); an I/O error or the deadline is an
    /// ordinary failed attempt (retried).
    fn authenticate(
        &self,
        stream: &Link,
        sasl: &crate::client::SaslConfig,
        pending: &mut Vec<u8>,
        deadline: Instant,
    ) -> io::Result<()> {
        let mut mech = sasl.start();
        let mut token = mech.initial().map_err(SaslFailure::into_io)?;
        loop {
            let x = self.xid();
            let mut w = Writer::request(x, op::SASL);
            w.buffer(&token);
            stream.write_all(&w.finish())?;
            let body = stream.read_frame_by(pending, self.settings.max_buffer, deadline)?;
            let mut r = Reader::new(&body);
            let hdr = ReplyHeader::read(&mut r)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
            if hdr.xid != x {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("SASL reply xid {} for request {x}", hdr.xid),
                ));
            }
            if hdr.err != 0 {
                return Err(SaslFailure(format!(
                    "the server refused the {} login of {} ({})",
                    sasl.mechanism(),
                    sasl.who(),
                    ZkError::from_code(hdr.err)
                ))
                .into_io());
            }
            let reply = r
                .buffer()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
            match mech.step(&reply).map_err(SaslFailure::into_io)? {
                Some(next) => token = next,
                None => return Ok(()),
            }
        }
    }

    /// Replays auth and watches, then opens the connection to callers.
    /// `early`: bytes read with the handshake's reply.
    pub(super) fn on_connected(
        &self,
        stream: &Link,
        reconnect: bool,
        early: Vec<u8>,
    ) -> io::Result<()> {
        {
            // The previous connection's socket (shut down) goes; nothing can be
            // pending on it any more, but never let a stale slot meet a new reply.
            let mut slot = self.writer.lock();
            slot.take();
            self.fail_pending(|| Error::zk_code(ZkError::ConnectionLoss));
            self.release_writer(slot);
        }
        let w = stream.clone();
        let read_timeout = self.negotiated_timeout() * 2 / 3;
        w.set_write_timeout(Some((read_timeout / 2).max(Duration::from_millis(50))))?;
        // The read side before any request can be written: its first reader
        // (a caller or this thread) finds it ready.
        let tick = (read_timeout / 10).clamp(Duration::from_millis(5), Duration::from_millis(100));
        stream.set_read_timeout(Some(tick))?;
        self.tick_nanos.store(
            u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.pings.lock().clear();
        *self.read_end.lock() = None;
        *self.reader.lock() = Some(ReadSide::new(
            stream.clone(),
            early,
            self.settings.max_buffer,
            tick,
        ));
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
        {
            let mut slot = self.writer.lock();
            *slot = Some(w);
            self.release_writer(slot);
        }
        let mut s = self.session.lock();
        if s.closing {
            // close() found no connection to end: this one must not open.
            return Err(io::Error::new(io::ErrorKind::Interrupted, "closing"));
        }
        s.state = State::Connected;
        s.connections = s.connections.wrapping_add(1);
        let connected = if s.read_only {
            KeeperState::ConnectedReadOnly
        } else {
            KeeperState::SyncConnected
        };
        self.tell_state(&mut s, connected);
        if self.settings.sasl.is_some() {
            // Java's order: SyncConnected, then SaslAuthenticated (here the
            // exchange is already over, see `authenticate`).
            self.tell_state(&mut s, KeeperState::SaslAuthenticated);
        }
        self.session_cv.notify_all();
        Ok(())
    }

    /// Serves the connection until it ends: pings and their timing, the read
    /// timeout, and reading whenever no caller does.
    ///
    /// Pings: one when nothing was sent for half the read timeout (Java's
    /// rule), and in any case one every quarter of it (1/6 of the session
    /// timeout) unless one is unanswered. A ping unanswered for the read timeout
    /// is a dead connection, even while other bytes (notifications) flow: a
    /// one-way partition that loses the requests is found at most 5/6 of the
    /// session timeout after the server last heard from the client, before the
    /// server expires the session, and the client reconnects in time.
    ///
    /// Reading: callers waiting for a reply read it themselves (see
    /// [`await_reply`](Self::await_reply)). This thread reads when anything
    /// else may arrive that nobody waits to read ([`must_listen`]: a watch is
    /// set, an asynchronous call, an auth packet or a ping is unanswered), and
    /// when no caller has waited for a tick (so that a closed connection is
    /// seen at once on an idle session). Otherwise it steps aside: a caller's
    /// reply then wakes the caller, not this thread. It never blocks longer
    /// than a tick, on anything, so its timers hold however the callers fare.
    ///
    /// [`must_listen`]: Self::must_listen
    pub(super) fn serve(&self, stream: &Link) -> ConnEnd {
        let negotiated = self.negotiated_timeout();
        let read_timeout = negotiated * 2 / 3;
        let ping_after = read_timeout / 2;
        let ping_every = read_timeout / 4;
        let mut last_ping = Instant::now();
        let tick = self.read_tick();
        let ping = Writer::request(xid::PING, op::PING).finish();
        // Connected read-only: look for a read-write server (Java's
        // `pingRwServer`), first after 100 ms, then at doubling intervals up
        // to a minute, each probe bounded so that the pings keep their times.
        let read_only = self.session.lock().read_only;
        let mut probe_every = RW_PROBE_FIRST;
        let mut last_probe = Instant::now();
        let mut probed = 0usize;
        let probe_bound = (read_timeout / 4).clamp(Duration::from_millis(10), RW_PROBE_BOUND);
        loop {
            // Taken first: a poke after this look is not lost.
            let poked = *self.conn_poke.lock();
            if let Some(end) = self.read_end.lock().take() {
                return end;
            }
            if self.move_requested.swap(false, Ordering::SeqCst) {
                return ConnEnd::Moved;
            }
            if read_only && last_probe.elapsed() >= probe_every {
                probe_every = (probe_every * 2).min(RW_PROBE_MAX);
                if let Some(rw) = self.find_read_write(&mut probed, probe_bound) {
                    return ConnEnd::ReadWriteFound(rw);
                }
                last_probe = Instant::now();
            }
            if stream.is_shut() {
                if self.session.lock().closing {
                    return ConnEnd::Closing;
                }
                return ConnEnd::Io(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the connection was shut down",
                ));
            }
            let quiet = self.since(&self.last_heard_nanos);
            if quiet >= read_timeout {
                return ConnEnd::ReadTimeout(quiet);
            }
            let oldest_ping = self.pings.lock().front().copied();
            if let Some(sent) = oldest_ping {
                let waited = sent.elapsed();
                if waited >= read_timeout {
                    return ConnEnd::PingTimeout(waited);
                }
            }
            let due = self.since(&self.last_send_nanos) >= ping_after
                || (oldest_ping.is_none() && last_ping.elapsed() >= ping_every);
            // Deferred requests whose writer left them (a safety net: every
            // holder of the writer flushes them before releasing it).
            let deferred = !self.deferred.lock().is_empty();
            if due || deferred {
                // Never wait behind a caller's write: if one is writing, that counts
                // (and it flushes the deferred requests when done).
                if let Some(mut w) = self.writer.try_lock_for(Duration::from_millis(1)) {
                    if due {
                        if let Some(s) = w.as_mut() {
                            // Queued before the write: its answer may come at once.
                            last_ping = Instant::now();
                            self.pings.lock().push_back(last_ping);
                            if let Err(e) = s.write_all(&ping) {
                                // Deferred requests are answered with the disconnect.
                                return ConnEnd::Io(e);
                            }
                            trace!("ping");
                        }
                        self.touch_send();
                    }
                    self.release_writer(w);
                }
            }
            if self.must_listen() || self.since(&self.last_call_nanos) >= tick {
                // A caller reading keeps the reader; its holder reads for us.
                if let Some(mut reader) = self.reader.try_lock_for(tick) {
                    let read = match reader.as_mut() {
                        Some(side) => side.read_once(self),
                        None => Ok(()),
                    };
                    drop(reader);
                    if let Err(end) = read {
                        return end;
                    }
                }
            } else {
                // Callers that left the reading to this thread read on.
                self.wake_next_reader();
                let mut pokes = self.conn_poke.lock();
                if *pokes == poked {
                    self.conn_cv.wait_for(&mut pokes, tick);
                }
            }
        }
    }

    /// One look for a read-write server while connected read-only: the next
    /// server of the list after the last one looked at (`probed`), the
    /// connection's own left out (it answers through the connection: a
    /// read-only server that rejoins its quorum closes it).
    fn find_read_write(&self, probed: &mut usize, bound: Duration) -> Option<String> {
        let candidates: Vec<String> = {
            let hosts = self.hosts.lock();
            let current = hosts.current().map(str::to_string);
            hosts
                .hosts()
                .iter()
                .filter(|h| Some(h.as_str()) != current.as_deref())
                .cloned()
                .collect()
        };
        if candidates.is_empty() {
            return None;
        }
        let host = &candidates[*probed % candidates.len()];
        *probed = probed.wrapping_add(1);
        let rw = answers_read_write(host, bound);
        debug!(
            "read-only: {host} is {}",
            if rw { "read-write" } else { "not read-write" }
        );
        rw.then(|| host.clone())
    }

    /// Whether this thread must read now (whether or not callers do): a
    /// notification may come (a watch is set), or an answer nobody waits
    /// to read (an asynchronous call, an auth packet, a ping).
    pub(super) fn must_listen(&self) -> bool {
        self.async_in_flight.load(Ordering::SeqCst) > 0
            || !self.pings.lock().is_empty()
            || !self.auth_waiters.lock().is_empty()
            || !self.watches.lock().is_empty()
    }

    /// Wakes the connection thread where it waits while callers read: it
    /// must read ([`must_listen`](Self::must_listen) became true), or end
    /// the connection.
    pub(super) fn poke_conn(&self) {
        let mut pokes = self.conn_poke.lock();
        *pokes = pokes.wrapping_add(1);
        self.conn_cv.notify_one();
    }

    /// A caller reading found the connection's end: the connection thread
    /// ends it (told through `read_end`; the socket is shut down at once).
    pub(super) fn reader_failed(&self, side: &ReadSide, end: ConnEnd) {
        {
            let mut e = self.read_end.lock();
            if e.is_none() {
                *e = Some(end);
            }
        }
        side.link.shutdown();
        self.leave_connected();
        self.poke_conn();
    }

    /// The socket's read timeout, the connection thread's tick.
    pub(super) fn read_tick(&self) -> Duration {
        Duration::from_nanos(self.tick_nanos.load(Ordering::Relaxed))
    }

    /// Handles one frame; `Ok(true)` for a ping reply.
    pub(super) fn handle_frame(&self, body: &[u8]) -> Result<bool, ConnEnd> {
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
                let refused = hdr.err == ZkError::AuthFailed.code();
                if refused {
                    // Before the waiter hears it: its next call must not find
                    // the session connected.
                    self.leave_connected();
                }
                if let Some(tx) = waiter {
                    let _ = tx.send(reply);
                }
                if refused {
                    return Err(ConnEnd::AuthFailed);
                }
                Ok(false)
            }
            xid::NOTIFICATION => {
                let (t, state, server_path) = proto::read_watcher_event(&mut r)
                    .map_err(|e| ConnEnd::Protocol(format!("notification: {}", e.0)))?;
                // ZooKeeper 3.9 sends the zxid of the change (ZOOKEEPER-4655),
                // older servers -1.
                self.dispatch(t, state, &server_path, (hdr.zxid > 0).then_some(hdr.zxid));
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
                        // The connection thread reads from now on (it may be
                        // waiting while callers read).
                        self.poke_conn();
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
                            Kind::Persistent | Kind::Recursive | Kind::Config => false,
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
                // A SASL-only server refusing an unauthenticated client (it
                // closes the connection; every reconnect would be refused the
                // same way): fatal, as a refused authentication.
                let refused = hdr.err == ZkError::SessionClosedRequireSaslAuth.code()
                    || hdr.err == ZkError::AuthFailed.code();
                if refused {
                    // Before the caller hears it: its next call waits for the
                    // handle's end (AuthFailed), not ConnectionLoss.
                    self.leave_connected();
                }
                self.answer(p.to, reply);
                if refused {
                    warn!(
                        "the server refused a request: {}; ending the session's handle",
                        ZkError::from_code(hdr.err)
                    );
                    return Err(ConnEnd::AuthFailed);
                }
                Ok(false)
            }
        }
    }

    pub(super) fn dispatch(&self, t: i32, state: i32, server_path: &str, zxid: Option<i64>) {
        let Some(event_type) = EventType::from_code(t) else {
            warn!("ignoring a notification of unknown type {t} on {server_path}");
            return;
        };
        let path = strip_chroot(self.settings.chroot.as_deref(), server_path);
        let keeper_state = KeeperState::from_code(state).unwrap_or(KeeperState::SyncConnected);
        let (mut watchers, config) = {
            let mut m = self.watches.lock();
            let config = if server_path == CONFIG_NODE {
                m.materialize_config(event_type)
            } else {
                Vec::new()
            };
            (m.materialize(event_type, &path), config)
        };
        // The configuration's watchers hear the server path (Java's
        // `getConfig` watch ignores the chroot); without a chroot it is the
        // same event, told once to each watcher.
        if !config.is_empty() {
            if path == server_path {
                for w in config {
                    if !watchers.iter().any(|x| same(x, &w)) {
                        watchers.push(w);
                    }
                }
            } else {
                let event = WatchedEvent {
                    event_type,
                    keeper_state,
                    path: Some(server_path.to_string()),
                    zxid,
                };
                let _ = self.enqueue(EventMsg::Deliver(config, event));
            }
        }
        trace!("event {event_type:?} {path}: {} watcher(s)", watchers.len());
        if watchers.is_empty() {
            return;
        }
        let event = WatchedEvent {
            event_type,
            keeper_state,
            path: Some(path),
            zxid,
        };
        let _ = self.enqueue(EventMsg::Deliver(watchers, event));
    }

    /// The connection (already shut down) is gone. Never takes the writer lock:
    /// a caller may hold it, blocked in a write, and Disconnected must not wait
    /// for it. A request written after the shutdown fails its write and answers
    /// itself (see [`send_to`](Self::send_to)); one written before is drained here.
    ///
    /// Java's order (`ClientCnxn.SendThread.cleanAndNotifyState`): first every
    /// request of the lost connection is answered with `ConnectionLoss`, in
    /// the order it was sent (those written, then those never written), which
    /// queues each asynchronous callback on the event thread; only then is
    /// `Disconnected` queued. So on the event thread the callbacks come
    /// before `Disconnected`. The state leaves `Connected` before any of them
    /// runs: a callback that sends again gets `ConnectionLoss` at once.
    pub(super) fn on_disconnected(&self) {
        // The state before the callers wake up: a caller that retries at once
        // must wait for the reconnect, not find "connected" without a connection.
        {
            let mut s = self.session.lock();
            if !s.state.is_terminal() {
                s.state = State::Connecting;
            }
        }
        // Held across both steps: a caller whose write failed answers what is
        // pending under it too, so its answers cannot come after Disconnected.
        let _order = self.answering.lock();
        self.fail_pending(|| Error::zk_code(ZkError::ConnectionLoss));
        let mut s = self.session.lock();
        if !s.closing {
            self.tell_state(&mut s, KeeperState::Disconnected);
        }
    }

    /// Ends the session with `terminal`: the state first, then, in Java's
    /// order, `Expired` / `AuthFailed` told before what is still pending
    /// fails (`SessionExpired` / `AuthFailed`), or, after `close()`, what is
    /// pending fails (`Closed`) before `Closed` is told; then the event
    /// thread stops.
    pub(super) fn finish(&self, terminal: Terminal) {
        let mut w = self.writer.lock();
        if let Some(s) = w.take() {
            s.shutdown();
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
            self.session_cv.notify_all();
        }
        self.wake_end_waits();
        let err = Error::for_ended_session(state).unwrap_or(Error::Closed);
        let code = err.code();
        let fail = || {
            self.fail_pending(|| match code {
                Some(c) => Error::zk_code(c),
                None => Error::Closed,
            })
        };
        // Java's order: `Expired` and `AuthFailed` are queued as the server's
        // answer is read, before the cleanup fails what is left; after
        // `close()` the cleanup comes first, then `Closed`. Either way the
        // state is the session's end before any callback runs.
        let _order = self.answering.lock();
        if let Terminal::Closed = terminal {
            fail();
            self.tell_state(&mut self.session.lock(), ks);
        } else {
            self.tell_state(&mut self.session.lock(), ks);
            fail();
        }
        // A request deferred meanwhile gets the session's end too.
        self.release_writer(w);
        let _ = self.events.send(EventMsg::Stop);
        debug!("connection thread ends: {state:?}");
    }
}

/// Whether a handshake's failure says the server closed or reset the
/// connection it had accepted, without an answer (not serving now), rather
/// than a timeout, a TLS or protocol failure.
fn not_serving(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// The failure of an attempt whose server answered with bytes that cannot
/// begin a ZooKeeper `ConnectResponse` (`first`, then what came with them),
/// quoted for people: `answered, but not as ZooKeeper ("HTTP/1.1 400 Bad")`.
fn not_zookeeper(first: &[u8], more: &[u8]) -> io::Error {
    let bytes: Vec<u8> = first.iter().chain(more).copied().take(24).collect();
    let shown: String = String::from_utf8_lossy(&bytes)
        .chars()
        .map(|c| if c.is_control() { '.' } else { c })
        .collect();
    HostFailure::into_io(
        ConnectCause::NotZooKeeper,
        format!("answered, but not as ZooKeeper (its first bytes: {shown:?})"),
    )
}

#[cfg(test)]
mod tests {
    use super::attempt_bound;
    use std::time::Duration;

    #[test]
    fn the_attempt_bound_doubles_after_slow_attempts_up_to_javas() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // One host, 15 s session, default 2 s: 2, 4, 8, then Java's 15 s.
        let bounds: Vec<Duration> = (0..6).map(|n| attempt_bound(s(15), s(2), n)).collect();
        assert_eq!(bounds, [s(2), s(4), s(8), s(15), s(15), s(15)]);
        // Three hosts, 10 s session: Java's 3.33 s caps the stretch.
        assert_eq!(attempt_bound(s(10) / 3, s(2), 1), s(10) / 3);
        // A short session: Java's bound alone, never below 100 ms.
        assert_eq!(attempt_bound(ms(300), s(2), 0), ms(300));
        assert_eq!(attempt_bound(ms(300), s(2), 3), ms(300));
        assert_eq!(attempt_bound(ms(20), s(2), 0), ms(100));
        // No overflow however many slow attempts.
        assert_eq!(attempt_bound(s(60), s(2), u32::MAX), s(60));
    }
}
