//! [`Link`]: one connection's byte stream, plain TCP or TLS over it, shared by
//! its reader (one at a time under the reader lock: a caller waiting for its
//! reply or the connection thread) and the callers (writers, one at a time
//! under the writer lock).
//!
//! TLS (rustls) is sans-IO, so the socket is never wrapped: the reader reads raw
//! bytes from the socket without any lock and feeds them to the shared rustls
//! connection under a short mutex; a writer encrypts under that mutex, lets it
//! go, and writes the records to the socket. No lock is ever held across a
//! socket read or write except the writer lock (as for plain TCP), so the
//! reader's timers (pings, the read timeout) never wait for a blocked writer.
//! Records leave in the order they were made: every record is made and written
//! under the writer lock; the reader only ever makes alerts and key-update
//! replies, which the next writer sends.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(feature = "tls")]
use crate::client::tls::TlsError;
#[cfg(feature = "tls")]
use parking_lot::Mutex;

/// A connection's stream; clones share it. The socket closes when the last
/// clone goes.
#[derive(Clone)]
pub(super) struct Link(Arc<Inner>);

struct Inner {
    sock: TcpStream,
    #[cfg(feature = "tls")]
    tls: Option<Tls>,
    /// Set by [`Link::shutdown`]: a link that is shut down is dropped by whoever
    /// holds the writer next.
    shut: AtomicBool,
}

#[cfg(feature = "tls")]
struct Tls {
    conn: Mutex<rustls::ClientConnection>,
    /// The connect-string host (for errors).
    host: String,
    /// The server's close_notify came with plaintext in the same read: that
    /// plaintext was handed out, and the next read reports the close.
    closed: AtomicBool,
}

/// The time left until `deadline`; `TimedOut` when none.
pub(super) fn left_until(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "handshake timed out",
        ));
    }
    Ok(left)
}

/// The server's close_notify, as a read error.
#[cfg(feature = "tls")]
fn tls_closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "server closed the TLS session",
    )
}

/// Whether a read ended at its timeout (or was interrupted), not in failure.
pub(super) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

impl Link {
    /// Plain TCP on `sock`.
    pub(super) fn plain(sock: TcpStream) -> Link {
        Link(Arc::new(Inner {
            sock,
            #[cfg(feature = "tls")]
            tls: None,
            shut: AtomicBool::new(false),
        }))
    }

    /// The TLS handshake on `sock` with `host` (its connect-string entry), by
    /// `deadline` (a total bound: the caller's handshake deadline). A TLS
    /// failure is an `io::Error` carrying a [`TlsError`].
    #[cfg(feature = "tls")]
    pub(super) fn tls(
        sock: TcpStream,
        config: &crate::client::TlsConfig,
        host: &str,
        deadline: Instant,
    ) -> io::Result<Link> {
        let name = crate::client::tls::server_name(host).map_err(TlsError::into_io)?;
        let conn = rustls::ClientConnection::new(config.client_config(), name)
            .map_err(|e| TlsError::from_rustls(e, host).into_io())?;
        let link = Link(Arc::new(Inner {
            sock,
            tls: Some(Tls {
                conn: Mutex::new(conn),
                host: host.to_string(),
                closed: AtomicBool::new(false),
            }),
            shut: AtomicBool::new(false),
        }));
        let tls = link.0.tls.as_ref().expect("made with TLS");
        let mut raw = vec![0u8; 16 * 1024];
        let mut heard = false;
        loop {
            link.flush_tls(Some(deadline))?;
            {
                let conn = tls.conn.lock();
                if !conn.is_handshaking() {
                    log::debug!(
                        "TLS with {host}: {:?}, {:?}",
                        conn.protocol_version(),
                        conn.negotiated_cipher_suite().map(|s| s.suite())
                    );
                    drop(conn);
                    return Ok(link);
                }
            }
            link.0.sock.set_read_timeout(Some(left_until(deadline)?))?;
            let n = match (&link.0.sock).read(&mut raw) {
                // Before any byte: as a server that is not serving (or a proxy
                // whose server is down) does; a plaintext port does the same
                // with a ClientHello, but the two cannot be told apart, so this
                // is retried like any lost connection.
                Ok(0) if !heard => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection before answering the TLS \
                         handshake (not serving, or not a TLS port)",
                    ))
                }
                Ok(0) => {
                    return Err(TlsError::Handshake(
                        "the server closed the connection during the TLS handshake".into(),
                    )
                    .into_io())
                }
                Ok(n) => n,
                Err(e) if is_timeout(&e) => {
                    left_until(deadline)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            heard = true;
            let mut plain = Vec::new();
            let fed = link.feed(tls, &raw[..n], &mut plain);
            if let Err(e) = fed {
                // The alert that tells the server why, best effort.
                let _ = link.flush_tls(Some(deadline));
                return Err(e);
            }
        }
    }

    /// Feeds raw bytes to the TLS connection (under its mutex), appending the
    /// plaintext they complete to `out`. The server's close_notify is
    /// `UnexpectedEof`, but only after the plaintext before it: when the same
    /// bytes complete both (a server that answers and closes at once, as
    /// 3.9's Netty does with closeSession's reply or an expired session's
    /// ConnectResponse over TLS 1.3), the plaintext is returned and the next
    /// read reports the close (as plain TCP's data, then EOF).
    #[cfg(feature = "tls")]
    fn feed(&self, tls: &Tls, mut raw: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let before = out.len();
        let mut conn = tls.conn.lock();
        while !raw.is_empty() {
            conn.read_tls(&mut raw)?;
            let state = conn
                .process_new_packets()
                .map_err(|e| TlsError::from_rustls(e, &tls.host).into_io())?;
            let mut want = state.plaintext_bytes_to_read();
            while want > 0 {
                let start = out.len();
                out.resize(start + want, 0);
                let got = conn.reader().read(&mut out[start..])?;
                out.truncate(start + got);
                if got == 0 {
                    break;
                }
                want -= got;
            }
            if state.peer_has_closed() {
                if out.len() > before {
                    tls.closed.store(true, Ordering::SeqCst);
                    return Ok(());
                }
                return Err(tls_closed());
            }
        }
        Ok(())
    }

    /// Writes every TLS record waiting in the connection (the writer lock is
    /// held, or the link is not shared yet). The mutex is let go before the
    /// socket write. `deadline`: the handshake's bound on each write.
    #[cfg(feature = "tls")]
    fn flush_tls(&self, deadline: Option<Instant>) -> io::Result<()> {
        let Some(tls) = &self.0.tls else {
            return Ok(());
        };
        loop {
            let mut out = Vec::new();
            {
                let mut conn = tls.conn.lock();
                while conn.wants_write() {
                    conn.write_tls(&mut out)?;
                }
            }
            if out.is_empty() {
                return Ok(());
            }
            if let Some(d) = deadline {
                self.0.sock.set_write_timeout(Some(left_until(d)?))?;
            }
            (&self.0.sock).write_all(&out)?;
        }
    }

    /// Writes `data` whole (the writer lock is held). TLS: encrypted in pieces
    /// under the connection's mutex, each written after letting it go.
    pub(super) fn write_all(&self, data: &[u8]) -> io::Result<()> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.0.tls {
            let mut rest = data;
            while !rest.is_empty() {
                let n = tls.conn.lock().writer().write(rest)?;
                if n == 0 {
                    // The buffer is full of records: write them first.
                    if !tls.conn.lock().wants_write() {
                        return Err(io::Error::new(
                            io::ErrorKind::WriteZero,
                            "the TLS connection takes no more data",
                        ));
                    }
                }
                rest = &rest[n..];
                self.flush_tls(None)?;
            }
            return Ok(());
        }
        (&self.0.sock).write_all(data)
    }

    /// One read for the holder of the reader lock (the only reader): appends what
    /// arrived to `out` and returns how much (0: bytes came but no plaintext
    /// yet). `raw` is scratch space. The server closing the connection is
    /// `UnexpectedEof`; the read timeout, `WouldBlock` / `TimedOut`.
    pub(super) fn read_into(&self, raw: &mut [u8], out: &mut Vec<u8>) -> io::Result<usize> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.0.tls {
            if tls.closed.load(Ordering::SeqCst) {
                return Err(tls_closed());
            }
        }
        let n = match (&self.0.sock).read(raw) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the connection",
                ))
            }
            Ok(n) => n,
            Err(e) => return Err(e),
        };
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.0.tls {
            let before = out.len();
            self.feed(tls, &raw[..n], out)?;
            return Ok(out.len() - before);
        }
        out.extend_from_slice(&raw[..n]);
        Ok(n)
    }

    /// Fills `buf` by `deadline`, a bound on the whole read (a peer trickling
    /// one byte at a time cannot stretch it, as a per-`read` timeout would let
    /// it). `pending` holds plaintext read beyond earlier calls' needs.
    pub(super) fn read_by(
        &self,
        buf: &mut [u8],
        pending: &mut Vec<u8>,
        deadline: Instant,
    ) -> io::Result<()> {
        let mut raw = [0u8; 4096];
        while pending.len() < buf.len() {
            self.0.sock.set_read_timeout(Some(left_until(deadline)?))?;
            match self.read_into(&mut raw, pending) {
                Ok(_) => {}
                Err(e) if is_timeout(&e) => {
                    left_until(deadline)?;
                }
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "server closed the connection during the handshake",
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        buf.copy_from_slice(&pending[..buf.len()]);
        pending.drain(..buf.len());
        Ok(())
    }

    /// Reads one length-prefixed frame of less than `max` bytes by `deadline`.
    pub(super) fn read_frame_by(
        &self,
        pending: &mut Vec<u8>,
        max: usize,
        deadline: Instant,
    ) -> io::Result<Vec<u8>> {
        let mut len = [0u8; 4];
        self.read_by(&mut len, pending, deadline)?;
        let len = i32::from_be_bytes(len);
        if len < 0 || len as usize >= max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("frame length {len} out of range"),
            ));
        }
        let mut body = vec![0u8; len as usize];
        self.read_by(&mut body, pending, deadline)?;
        Ok(body)
    }

    pub(super) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.0.sock.set_read_timeout(t)
    }

    pub(super) fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.0.sock.set_write_timeout(t)
    }

    /// Shuts the socket down (a blocked read or write fails at once); the
    /// socket itself closes when the last clone is dropped.
    pub(super) fn shutdown(&self) {
        self.0.shut.store(true, Ordering::SeqCst);
        let _ = self.0.sock.shutdown(Shutdown::Both);
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub(super) fn is_shut(&self) -> bool {
        self.0.shut.load(Ordering::SeqCst)
    }
}
