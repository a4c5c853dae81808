//! [`FaultProxy`]: a TCP proxy that injects partitions, cuts and latency.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long the proxy waits for the target to accept a new connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const BUFFER_SIZE: usize = 16 * 1024;
const STACK_SIZE: usize = 256 * 1024;

/// What a [`FaultProxy`] does with the bytes of its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forward every byte at once, both ways.
    Pass,
    /// Forward nothing, either way, but keep every socket open: a network partition
    /// (a blackhole). Bytes are held, not dropped: they flow on after
    /// [`FaultProxy::pass`].
    Stall,
    /// Forward every byte, both ways, this long after the proxy read it.
    Delay(Duration),
    /// A one-way partition: client→server bytes are held (as in `Stall`),
    /// server→client bytes flow. The server hears nothing (no requests, no
    /// pings) while the client keeps receiving whatever the server sends.
    StallUpstream,
    /// The other way: server→client bytes are held, client→server bytes flow.
    /// The server keeps hearing the client's pings and connect requests (the
    /// session stays alive there) while the client hears nothing.
    StallDownstream,
}

impl ProxyMode {
    /// Whether bytes going the way `to_upstream` says are held in this mode.
    fn holds(self, to_upstream: bool) -> bool {
        match self {
            ProxyMode::Stall => true,
            ProxyMode::StallUpstream => to_upstream,
            ProxyMode::StallDownstream => !to_upstream,
            ProxyMode::Pass | ProxyMode::Delay(_) => false,
        }
    }
}

/// A TCP proxy on 127.0.0.1 in front of one server, controlled from the test: how
/// tests make partitions, connection blips, slow links and session expiry.
///
/// Clients connect to [`connect_string`](FaultProxy::connect_string) instead of the
/// server. Each accepted connection opens its own connection to the target; then
/// the current [`ProxyMode`] applies to every connection, old and new:
///
/// | call | effect |
/// |---|---|
/// | [`pass`](FaultProxy::pass) | forward normally (the initial mode) |
/// | [`stall`](FaultProxy::stall) | forward nothing, keep the sockets open, hold the bytes — until `pass`, `delay`, `cut`/`reset` or drop |
/// | [`cut`](FaultProxy::cut) | close every current connection on both sides (the client reads EOF); new connections are accepted, in the current mode |
/// | [`reset`](FaultProxy::reset) | `cut`, then `pass` |
/// | [`delay(d)`](FaultProxy::delay) | forward each chunk `d` after it was read, both ways (a round trip gains `2 d`) |
/// | [`stall_upstream`](FaultProxy::stall_upstream) / [`stall_downstream`](FaultProxy::stall_downstream) | a one-way partition: hold the bytes of one direction only |
///
/// Stalled connections are not timed out by the proxy: the client's and the
/// server's own timeouts decide what happens, exactly as in a partition. If the
/// target refuses a new connection, the proxy closes the client's side at once.
///
/// # Threads
///
/// One thread accepts; each connection has four (a reader and a writer per
/// direction, so delayed bytes queue up instead of adding up). They block in
/// `read`/`accept` or on a condition variable — no polling. Threads are named
/// `zkp<id>:…` (see [`id`](FaultProxy::id)). Dropping the proxy closes every
/// connection and joins every thread.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::testing::{FaultProxy, ZkServer};
///
/// let server = ZkServer::start()?;
/// let proxy = FaultProxy::start(server.connect_string())?;
/// let servers = proxy.connect_string(); // give this to the client under test
/// proxy.stall(); // partition: the client hears nothing, the session runs out
/// std::thread::sleep(Duration::from_secs(2));
/// proxy.reset(); // drop the connections and heal
/// # let _ = servers;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct FaultProxy {
    shared: Arc<Shared>,
    addr: SocketAddr,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    id: u64,
    state: Mutex<ProxyState>,
    changed: Condvar,
}

#[derive(Debug)]
struct ProxyState {
    mode: ProxyMode,
    target: SocketAddr,
    stopped: bool,
    connections: HashMap<u64, Arc<Connection>>,
    next_connection: u64,
    threads: Vec<JoinHandle<()>>,
}

#[derive(Debug)]
struct Connection {
    id: u64,
    client: TcpStream,
    upstream: TcpStream,
    closed: AtomicBool,
    live_threads: AtomicUsize,
}

enum Chunk {
    Data(Vec<u8>, Instant),
    Eof,
}

impl FaultProxy {
    /// Starts a proxy on a free port of 127.0.0.1, forwarding to `target` (e.g. a
    /// server's `"127.0.0.1:PORT"`; the first address it resolves to), in
    /// [`ProxyMode::Pass`].
    pub fn start<A: ToSocketAddrs>(target: A) -> io::Result<FaultProxy> {
        let target = resolve(target)?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        static IDS: AtomicU64 = AtomicU64::new(1);
        let shared = Arc::new(Shared {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            state: Mutex::new(ProxyState {
                mode: ProxyMode::Pass,
                target,
                stopped: false,
                connections: HashMap::new(),
                next_connection: 1,
                threads: Vec::new(),
            }),
            changed: Condvar::new(),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name(format!("zkp{}:accept", shared.id))
                .stack_size(STACK_SIZE)
                .spawn(move || accept_loop(&shared, &listener))?
        };
        Ok(FaultProxy {
            shared,
            addr,
            acceptor: Some(acceptor),
        })
    }

    /// The proxy's listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The connect string for clients: `"127.0.0.1:PORT"` of the proxy.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// The address new connections are forwarded to.
    pub fn target(&self) -> SocketAddr {
        self.shared.lock().target
    }

    /// Forwards new connections to `target` from now on (e.g. another ensemble
    /// member); current connections keep theirs.
    pub fn set_target<A: ToSocketAddrs>(&self, target: A) -> io::Result<()> {
        let target = resolve(target)?;
        self.shared.lock().target = target;
        Ok(())
    }

    /// This proxy's number, unique in the process; its threads are named `zkp<id>:…`.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The current mode.
    pub fn mode(&self) -> ProxyMode {
        self.shared.lock().mode
    }

    /// Forwards normally, both ways; held bytes flow on.
    pub fn pass(&self) {
        self.set_mode(ProxyMode::Pass);
    }

    /// Stops forwarding in both directions, keeping every socket open (a partition).
    /// No byte read after this call is delivered until the mode changes.
    pub fn stall(&self) {
        self.set_mode(ProxyMode::Stall);
    }

    /// A one-way partition ([`ProxyMode::StallUpstream`]): holds client→server
    /// bytes, forwards server→client bytes.
    pub fn stall_upstream(&self) {
        self.set_mode(ProxyMode::StallUpstream);
    }

    /// A one-way partition ([`ProxyMode::StallDownstream`]): holds server→client
    /// bytes, forwards client→server bytes.
    pub fn stall_downstream(&self) {
        self.set_mode(ProxyMode::StallDownstream);
    }

    /// Forwards every byte `delay` after the proxy read it, in both directions.
    pub fn delay(&self, delay: Duration) {
        self.set_mode(ProxyMode::Delay(delay));
    }

    /// Sets the mode (see [`ProxyMode`]).
    pub fn set_mode(&self, mode: ProxyMode) {
        self.shared.lock().mode = mode;
        self.shared.changed.notify_all();
    }

    /// Closes every current connection, on both sides (both peers read EOF; held
    /// bytes are dropped). The mode stays; new connections are accepted.
    pub fn cut(&self) {
        let connections: Vec<Arc<Connection>> = {
            let mut state = self.shared.lock();
            state.connections.drain().map(|(_, c)| c).collect()
        };
        for connection in &connections {
            connection.close(&self.shared);
        }
    }

    /// [`cut`](FaultProxy::cut), then [`pass`](FaultProxy::pass).
    pub fn reset(&self) {
        // Cut first: passing first could deliver held bytes before the cut.
        self.cut();
        self.set_mode(ProxyMode::Pass);
    }

    /// The number of open connections.
    pub fn connections(&self) -> usize {
        self.shared.lock().connections.len()
    }

    /// The number of connections accepted since the start (open or not): a
    /// client's connect attempts.
    pub fn accepted(&self) -> u64 {
        self.shared.lock().next_connection - 1
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.lock().stopped = true;
        self.cut();
        self.shared.changed.notify_all();
        // Wake the acceptor, blocked in accept(), with a connection of our own.
        let woke = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).is_ok();
        if let Some(acceptor) = self.acceptor.take() {
            if woke {
                let _ = acceptor.join();
            } else {
                log::warn!(
                    "could not wake FaultProxy {}'s acceptor; leaving it",
                    self.id()
                );
            }
        }
        loop {
            let threads = std::mem::take(&mut self.shared.lock().threads);
            if threads.is_empty() {
                break;
            }
            for t in threads {
                let _ = t.join();
            }
        }
    }
}

impl Shared {
    /// The state lock; a panic on another thread does not poison the harness.
    fn lock(&self) -> MutexGuard<'_, ProxyState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, ProxyState>) -> MutexGuard<'a, ProxyState> {
        self.changed.wait(guard).unwrap_or_else(|e| e.into_inner())
    }

    fn wait_timeout<'a>(
        &self,
        guard: MutexGuard<'a, ProxyState>,
        d: Duration,
    ) -> MutexGuard<'a, ProxyState> {
        match self.changed.wait_timeout(guard, d) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }

    /// Spawns a named thread and records it for joining, unless the proxy stopped.
    fn spawn(self: &Arc<Self>, name: String, f: impl FnOnce() + Send + 'static) -> bool {
        let mut state = self.lock();
        if state.stopped {
            return false;
        }
        state.threads.retain(|t| !t.is_finished());
        match thread::Builder::new()
            .name(name)
            .stack_size(STACK_SIZE)
            .spawn(f)
        {
            Ok(handle) => {
                state.threads.push(handle);
                true
            }
            Err(e) => {
                log::warn!("FaultProxy {}: cannot spawn a thread: {e}", self.id);
                false
            }
        }
    }
}

impl Connection {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Closes both sockets (waking every thread of this connection) and forgets it.
    fn close(&self, shared: &Shared) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.upstream.shutdown(Shutdown::Both);
        shared.lock().connections.remove(&self.id);
        shared.changed.notify_all();
    }
}

/// Decrements the live-thread count on exit; the last thread out forgets the
/// connection, which closes its sockets.
struct ThreadExit {
    shared: Arc<Shared>,
    connection: Arc<Connection>,
}

impl Drop for ThreadExit {
    fn drop(&mut self) {
        if self.connection.live_threads.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.shared.lock().connections.remove(&self.connection.id);
        }
    }
}

fn resolve<A: ToSocketAddrs>(target: A) -> io::Result<SocketAddr> {
    target.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the target resolves to no address",
        )
    })
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    loop {
        let accepted = listener.accept();
        if shared.lock().stopped {
            return;
        }
        let client = match accepted {
            Ok((client, _)) => client,
            Err(e) => {
                log::debug!("FaultProxy {}: accept failed: {e}", shared.id);
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let number = {
            let mut state = shared.lock();
            state.next_connection += 1;
            state.next_connection - 1
        };
        let for_thread = Arc::clone(shared);
        shared.spawn(format!("zkp{}:{number}up", shared.id), move || {
            open_connection(&for_thread, client, number);
        });
    }
}

/// Connects to the target for a freshly accepted client, then runs the four pumps.
fn open_connection(shared: &Arc<Shared>, client: TcpStream, id: u64) {
    let target = shared.lock().target;
    let upstream = match TcpStream::connect_timeout(&target, CONNECT_TIMEOUT) {
        Ok(s) => s,
        Err(e) => {
            log::debug!("FaultProxy {}: cannot reach {target}: {e}", shared.id);
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let connection = Arc::new(Connection {
        id,
        client,
        upstream,
        closed: AtomicBool::new(false),
        live_threads: AtomicUsize::new(4),
    });
    {
        let mut state = shared.lock();
        if state.stopped {
            return;
        }
        state.connections.insert(id, Arc::clone(&connection));
    }
    // Client -> upstream and upstream -> client, each a reader and a writer.
    for (to_upstream, tag) in [(true, 'c'), (false, 'u')] {
        let (tx, rx) = mpsc::channel();
        let (s1, c1) = (Arc::clone(shared), Arc::clone(&connection));
        let (s2, c2) = (Arc::clone(shared), Arc::clone(&connection));
        let reader_ok = shared.spawn(format!("zkp{}:{id}{tag}r", shared.id), move || {
            let exit = ThreadExit {
                shared: s1,
                connection: c1,
            };
            read_loop(&exit, to_upstream, &tx);
        });
        let writer_ok = shared.spawn(format!("zkp{}:{id}{tag}w", shared.id), move || {
            let exit = ThreadExit {
                shared: s2,
                connection: c2,
            };
            write_loop(&exit, to_upstream, &rx);
        });
        if !(reader_ok && writer_ok) {
            // Stopped (or out of threads): undo the count of the threads not started.
            let missing = usize::from(!reader_ok) + usize::from(!writer_ok);
            connection.live_threads.fetch_sub(missing, Ordering::SeqCst);
            connection.close(shared);
        }
    }
}

fn read_loop(exit: &ThreadExit, to_upstream: bool, tx: &Sender<Chunk>) {
    let (shared, connection) = (&exit.shared, &exit.connection);
    let mut source = if to_upstream {
        &connection.client
    } else {
        &connection.upstream
    };
    let mut buffer = vec![0u8; BUFFER_SIZE];
    loop {
        {
            // Stalled: read nothing, so the bytes wait in the kernel's buffers.
            let mut state = shared.lock();
            while state.mode.holds(to_upstream) && !state.stopped && !connection.is_closed() {
                state = shared.wait(state);
            }
            if state.stopped || connection.is_closed() {
                return;
            }
        }
        match source.read(&mut buffer) {
            Ok(0) => {
                let _ = tx.send(Chunk::Eof);
                return;
            }
            Ok(n) => {
                let due = match shared.lock().mode {
                    ProxyMode::Delay(d) => Instant::now() + d,
                    _ => Instant::now(),
                };
                if tx.send(Chunk::Data(buffer[..n].to_vec(), due)).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                connection.close(shared);
                return;
            }
        }
    }
}

fn write_loop(exit: &ThreadExit, to_upstream: bool, rx: &Receiver<Chunk>) {
    let (shared, connection) = (&exit.shared, &exit.connection);
    let mut sink = if to_upstream {
        &connection.upstream
    } else {
        &connection.client
    };
    // Ends when the reader is gone (it drops the sender).
    while let Ok(chunk) = rx.recv() {
        let bytes = match chunk {
            Chunk::Data(bytes, due) => {
                let mut state = shared.lock();
                loop {
                    if state.stopped || connection.is_closed() {
                        return;
                    }
                    if state.mode.holds(to_upstream) {
                        state = shared.wait(state);
                        continue;
                    }
                    let now = Instant::now();
                    if now >= due {
                        break;
                    }
                    state = shared.wait_timeout(state, due - now);
                }
                bytes
            }
            Chunk::Eof => {
                // Half-close: pass the FIN on, keep the other direction going.
                if !connection.is_closed() {
                    let _ = sink.shutdown(Shutdown::Write);
                }
                return;
            }
        };
        if sink.write_all(&bytes).is_err() {
            connection.close(shared);
            return;
        }
    }
}

/// A TLS front for a plaintext server: a listener on 127.0.0.1 that takes
/// TLS connections with the server certificate of a [`TestPki`] (issued for
/// `localhost`; no client certificate asked for), and forwards the decrypted
/// bytes of each to its own plain connection to `target`, and the target's
/// answers back, encrypted. Put in front of a scripted fake server, it makes
/// every malformed-input test a TLS one: the client's TLS layer works, the
/// ZooKeeper frames inside are the script's. When either side closes, both do
/// (the client reads EOF).
///
/// One thread accepts; one thread per connection moves the bytes (short
/// read timeouts on both sockets, so it ends within milliseconds of a close
/// or of the front's drop). Dropping the front stops and joins them all.
///
/// [`TestPki`]: super::TestPki
#[cfg(feature = "tls")]
#[derive(Debug)]
pub struct TlsFront {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicU64>,
    acceptor: Option<JoinHandle<()>>,
}

#[cfg(feature = "tls")]
impl TlsFront {
    /// Starts the front on a free port of 127.0.0.1, forwarding to `target`.
    ///
    /// # Errors
    /// The server certificate or key of `pki` unreadable, or no port.
    pub fn start<A: ToSocketAddrs>(pki: &super::TestPki, target: A) -> io::Result<TlsFront> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let invalid =
            |e: rustls::pki_types::pem::Error| io::Error::new(io::ErrorKind::InvalidData, e);
        let certs = CertificateDer::pem_file_iter(pki.dir().join("server.pem"))
            .map_err(invalid)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let key = PrivateKeyDer::from_pem_file(pki.dir().join("server.key")).map_err(invalid)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let config = Arc::new(config);
        let target = target
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no target address"))?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicU64::new(0));
        let (s, a) = (stop.clone(), accepted.clone());
        let acceptor = thread::Builder::new()
            .name("zkp-tls-front".into())
            .stack_size(STACK_SIZE)
            .spawn(move || {
                let mut conns: Vec<JoinHandle<()>> = Vec::new();
                while !s.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            a.fetch_add(1, Ordering::SeqCst);
                            let (config, stop) = (config.clone(), s.clone());
                            let spawned = thread::Builder::new()
                                .name("zkp-tls-conn".into())
                                .stack_size(STACK_SIZE)
                                .spawn(move || tls_front_pump(client, target, config, &stop));
                            if let Ok(h) = spawned {
                                conns.push(h);
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            thread::sleep(Duration::from_millis(5));
                        }
                        Err(_) => thread::sleep(Duration::from_millis(5)),
                    }
                    conns.retain(|h| !h.is_finished());
                }
                for h in conns {
                    let _ = h.join();
                }
            })?;
        Ok(TlsFront {
            addr,
            stop,
            accepted,
            acceptor: Some(acceptor),
        })
    }

    /// `"localhost:PORT"`: the host the [`TestPki`](super::TestPki) server
    /// certificate names.
    pub fn connect_string(&self) -> String {
        format!("localhost:{}", self.addr.port())
    }

    /// The TLS connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

#[cfg(feature = "tls")]
impl Drop for TlsFront {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
    }
}

/// One [`TlsFront`] connection: the TLS server side on `client`, plain bytes
/// to and from `target`, until either side closes or `stop`.
#[cfg(feature = "tls")]
fn tls_front_pump(
    client: TcpStream,
    target: SocketAddr,
    config: Arc<rustls::ServerConfig>,
    stop: &AtomicBool,
) {
    let Ok(mut conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let Ok(upstream) = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT) else {
        return;
    };
    let tick = Some(Duration::from_millis(2));
    if client.set_read_timeout(tick).is_err() || upstream.set_read_timeout(tick).is_err() {
        return;
    }
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (mut client, mut upstream) = (client, upstream);
    let mut buf = vec![0u8; BUFFER_SIZE];
    let timeout = |e: &io::Error| {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
        )
    };
    'pump: loop {
        if stop.load(Ordering::SeqCst) {
            break 'pump;
        }
        // Client → target: TLS records in, plaintext out.
        match client.read(&mut buf) {
            Ok(0) => break 'pump,
            Ok(n) => {
                let mut raw = &buf[..n];
                while !raw.is_empty() {
                    if conn.read_tls(&mut raw).is_err() || conn.process_new_packets().is_err() {
                        let _ = conn.write_tls(&mut client);
                        break 'pump;
                    }
                }
                let mut plain = Vec::new();
                match conn.reader().read_to_end(&mut plain) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => break 'pump,
                }
                if !plain.is_empty() && upstream.write_all(&plain).is_err() {
                    break 'pump;
                }
            }
            Err(e) if timeout(&e) => {}
            Err(_) => break 'pump,
        }
        // Target → client: plaintext in, TLS records out (after the handshake).
        if !conn.is_handshaking() {
            match upstream.read(&mut buf) {
                Ok(0) => break 'pump,
                Ok(n) => {
                    if conn.writer().write_all(&buf[..n]).is_err() {
                        break 'pump;
                    }
                }
                Err(e) if timeout(&e) => {}
                Err(_) => break 'pump,
            }
        }
        while conn.wants_write() {
            if conn.write_tls(&mut client).is_err() {
                break 'pump;
            }
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
}
