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
///
/// A mode governs everything a connection carries, each direction on its
/// own: its bytes and its end (the EOF of an orderly close, passed on as a
/// half-close, or a read error such as a reset, passed on by closing the
/// connection both ways). Whatever a mode holds is held in order, neither
/// forwarded nor dropped, until the mode forwards that direction again; then
/// it flows on as it was read, the held bytes first and the end, if one came,
/// after them. Only a [`cut`](FaultProxy::cut) (or
/// [`reset`](FaultProxy::reset), or the proxy's drop) drops what is held,
/// with the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forward every byte, and the end of each stream, at once, both ways.
    Pass,
    /// Forward nothing, either way, but keep every socket open: a network partition
    /// (a blackhole). Nothing read after [`FaultProxy::stall`] returned reaches
    /// the other side — not a byte, nor the end of the stream (a peer closing
    /// its side during the stall is not seen by the other until the stall
    /// ends) — even what a read already under way when the stall began
    /// brought in. Bytes are held, not dropped: they flow on, then the end
    /// of the stream, after [`FaultProxy::pass`]. (A chunk the proxy was
    /// already writing when the stall began — read before it — completes.)
    Stall,
    /// Forward every byte, and the end of each stream, both ways, this long
    /// after the proxy read it.
    Delay(Duration),
    /// A one-way partition: client→server bytes (and the client's end of
    /// stream) are held (as in `Stall`), server→client bytes flow. The
    /// server hears nothing (no requests, no pings, no close) while the
    /// client keeps receiving whatever the server sends.
    StallUpstream,
    /// The other way: server→client bytes (and the server's end of stream)
    /// are held, client→server bytes flow. The server keeps hearing the
    /// client's pings and connect requests (the session stays alive there)
    /// while the client hears nothing, not even the server closing.
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
/// | [`stall`](FaultProxy::stall) | forward nothing, keep the sockets open, hold the bytes and the ends of the streams (a peer's close) — until `pass`, `delay`, `cut`/`reset` or drop |
/// | [`cut`](FaultProxy::cut) | close every current connection on both sides (the client reads EOF), dropping what is held; new connections are accepted, in the current mode |
/// | [`reset`](FaultProxy::reset) | `cut`, then `pass` |
/// | [`delay(d)`](FaultProxy::delay) | forward each chunk, and each end of stream, `d` after it was read, both ways (a round trip gains `2 d`) |
/// | [`stall_upstream`](FaultProxy::stall_upstream) / [`stall_downstream`](FaultProxy::stall_downstream) | a one-way partition: hold the bytes and the end of one direction only |
///
/// Stalled connections are not timed out by the proxy: the client's and the
/// server's own timeouts decide what happens, exactly as in a partition. If the
/// target refuses a new connection, the proxy closes the client's side at once.
///
/// # What a mode change promises
///
/// The mode is read under one lock, by the thread that writes each chunk,
/// after the chunk was read and right before it is written: so once
/// [`stall`](FaultProxy::stall) (or a one-way stall) has returned, nothing
/// read after it moves the held way, however the proxy's threads were
/// placed then (a reader blocked in `read` included), until a mode that
/// forwards that way is set; and that change takes effect at once (the held
/// threads wait on a condition variable, not a timer). What a held direction
/// carries stays in the proxy's queue or the kernel's socket buffers, in
/// order: bytes, then the end of the stream. [`round_trips`](FaultProxy::round_trips)
/// and [`quorum_counts`](FaultProxy::quorum_counts)' requests count what was
/// forwarded, never what is held or was dropped by a cut.
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
    /// See [`FaultProxy::round_trips`].
    round_trips: AtomicU64,
    /// See [`FaultProxy::requests`]: forwarded client requests by opcode.
    requests: Mutex<HashMap<i32, u64>>,
    /// See [`FaultProxy::set_mode_after`]: the opcodes whose next request
    /// switches the mode, and the mode.
    trip: Mutex<Option<(Vec<i32>, ProxyMode)>>,
    /// See [`FaultProxy::request_reads`]: `Some` once
    /// [`FaultProxy::record_reads`] was called.
    reads: Mutex<Option<Vec<Vec<i32>>>>,
}

#[derive(Debug)]
struct ProxyState {
    mode: ProxyMode,
    target: SocketAddr,
    stopped: bool,
    connections: HashMap<u64, Arc<Connection>>,
    next_connection: u64,
    threads: Vec<JoinHandle<()>>,
    /// `Some` on a quorum link ([`FaultProxy::start_quorum_link`]).
    quorum: Option<QuorumLink>,
}

/// What a quorum link ([`FaultProxy::start_quorum_link`]) does and has seen.
#[derive(Debug, Default)]
struct QuorumLink {
    /// Whether the learner's `ACK` packets are held.
    hold_acks: bool,
    counts: QuorumCounts,
}

/// What a quorum link ([`FaultProxy::start_quorum_link`]) has seen of its
/// learners' packets (learner → leader), over all its connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuorumCounts {
    /// `REQUEST` packets forwarded: the writes, syncs and session requests
    /// the learner's clients sent, which the learner hands to the leader.
    pub requests: u64,
    /// `ACK` packets (the learner's votes for proposals) held now by
    /// [`FaultProxy::hold_acks`].
    pub held_acks: usize,
}

#[derive(Debug)]
struct Connection {
    id: u64,
    client: TcpStream,
    upstream: TcpStream,
    closed: AtomicBool,
    live_threads: AtomicUsize,
    /// A quorum link's learner → leader packets (see [`QuorumFramer`]).
    framer: Option<Mutex<QuorumFramer>>,
    /// A quorum link's client → upstream sender, so that released `ACK`s
    /// reach the writer; dropped when the reader ends.
    upstream_tx: Mutex<Option<Sender<Chunk>>>,
    /// A client link's ZooKeeper frames (see [`FaultProxy::round_trips`]).
    exchanges: Mutex<Exchanges>,
}

/// The largest frame a client link's counting accepts (ZooKeeper's
/// `jute.maxbuffer` is 1 MB by default); a larger length is not ZooKeeper's
/// client framing (a TLS record, say): the link is then not counted.
const CLIENT_MAX_FRAME: i32 = 64 * 1024 * 1024;

/// What [`FaultProxy::round_trips`] has seen of one client connection: its
/// frames each way, and its requests still awaiting their replies.
#[derive(Debug, Default)]
struct Exchanges {
    to_server: ClientFrames,
    to_client: ClientFrames,
    /// Requests read from the client whose replies have not been read from
    /// the server yet (pings left out).
    outstanding: usize,
    /// Not ZooKeeper's client framing: nothing more is counted.
    raw: bool,
}

/// The xid of a ZooKeeper ping and of its reply.
const PING_XID: i32 = -2;
/// The xid of a watch notification (server → client, no request).
const NOTIFICATION_XID: i32 = -1;

impl Exchanges {
    /// Reads `bytes` (from the client when `to_server`): `true` when they
    /// start a round trip (see [`FaultProxy::round_trips`]); the opcode of
    /// each client request they complete (pings left out) goes to `opcodes`.
    fn feed(&mut self, to_server: bool, bytes: &[u8], opcodes: &mut Vec<i32>) -> bool {
        if self.raw {
            return false;
        }
        let frames = if to_server {
            self.to_server.feed(bytes)
        } else {
            self.to_client.feed(bytes)
        };
        let Ok(xids) = frames else {
            self.raw = true;
            return false;
        };
        let mut started = false;
        // `None`: the connect request or its response, which hold no xid.
        for (xid, opcode) in xids.into_iter().flatten() {
            match (to_server, xid) {
                (_, PING_XID) | (false, NOTIFICATION_XID) => {}
                (true, _) => {
                    started |= self.outstanding == 0;
                    self.outstanding += 1;
                    opcodes.extend(opcode);
                }
                (false, _) => self.outstanding = self.outstanding.saturating_sub(1),
            }
        }
        started
    }
}

/// One direction of a client connection cut into ZooKeeper frames (a 4-byte
/// length, then the frame; every frame but the first, the connect request or
/// response, starts with its xid).
#[derive(Debug, Default)]
struct ClientFrames {
    pending: Vec<u8>,
    seen: u64,
}

impl ClientFrames {
    /// The xid of each frame `bytes` completes, with the 4 bytes after it
    /// (a request's opcode) when the frame has them (`None` for the first);
    /// `Err` when the bytes are not ZooKeeper's framing.
    #[allow(clippy::type_complexity)]
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Option<(i32, Option<i32>)>>, ()> {
        self.pending.extend_from_slice(bytes);
        let mut xids = Vec::new();
        loop {
            let Some(len) = self.pending.get(..4) else {
                return Ok(xids);
            };
            let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
            if !(0..=CLIENT_MAX_FRAME).contains(&len) {
                return Err(());
            }
            let end = 4 + len as usize;
            if self.pending.len() < end {
                return Ok(xids);
            }
            let word = |at: usize| {
                self.pending
                    .get(at..at + 4)
                    .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            };
            let xid = word(4)
                .filter(|_| self.seen > 0 && len >= 4)
                .map(|xid| (xid, word(8).filter(|_| len >= 8)));
            self.seen += 1;
            self.pending.drain(..end);
            xids.push(xid);
        }
    }
}

/// The quorum packet types the framer acts on (Java's `Leader` constants).
const QUORUM_REQUEST: i32 = 1;
const QUORUM_ACK: i32 = 3;
/// Larger lengths are not ZooKeeper's framing: the framer gives up.
const QUORUM_MAX_LENGTH: i32 = 256 * 1024 * 1024;

/// Cuts a learner's byte stream to its leader into quorum packets (jute's
/// `QuorumPacket`: `int type, long zxid, buffer data, vector<Id> authinfo`),
/// so that `ACK`s can be held while later packets overtake them.
#[derive(Debug, Default)]
struct QuorumFramer {
    /// Bytes read but not yet a whole packet.
    pending: Vec<u8>,
    /// The `ACK` packets held, in order.
    held: Vec<Vec<u8>>,
    /// The stream is not quorum framing: every byte passes as read.
    raw: bool,
}

impl QuorumFramer {
    /// The whole packets (type, bytes) `bytes` completes; `raw` from the
    /// first byte that does not parse (type 0 then).
    fn feed(&mut self, bytes: &[u8]) -> Vec<(i32, Vec<u8>)> {
        if self.raw {
            return vec![(0, bytes.to_vec())];
        }
        self.pending.extend_from_slice(bytes);
        let mut packets = Vec::new();
        loop {
            match quorum_packet_len(&self.pending) {
                Ok(Some(len)) => {
                    let rest = self.pending.split_off(len);
                    let packet = std::mem::replace(&mut self.pending, rest);
                    let kind = i32::from_be_bytes([packet[0], packet[1], packet[2], packet[3]]);
                    packets.push((kind, packet));
                }
                Ok(None) => return packets,
                Err(()) => {
                    log::warn!("FaultProxy: not a quorum packet stream; forwarding it raw");
                    self.raw = true;
                    packets.push((0, std::mem::take(&mut self.pending)));
                    return packets;
                }
            }
        }
    }
}

/// The length of the quorum packet at the start of `b`: `Ok(None)` while
/// incomplete, `Err` when `b` is not one.
fn quorum_packet_len(b: &[u8]) -> Result<Option<usize>, ()> {
    let int_at = |at: usize| -> Option<i32> {
        b.get(at..at + 4)
            .map(|s| i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    };
    // A jute buffer or ustring: its length (-1 for null), then its bytes.
    let skip_bytes = |at: usize| -> Result<Option<usize>, ()> {
        match int_at(at) {
            None => Ok(None),
            Some(-1) => Ok(Some(at + 4)),
            Some(n) if (0..=QUORUM_MAX_LENGTH).contains(&n) => Ok(Some(at + 4 + n as usize)),
            Some(_) => Err(()),
        }
    };
    // type (4), zxid (8), data.
    let Some(mut at) = skip_bytes(12)? else {
        return Ok(None);
    };
    match int_at(at) {
        None => return Ok(None),
        Some(-1) => at += 4,
        Some(n) if (0..=1024).contains(&n) => {
            at += 4;
            // Each `Id`: scheme and id, two ustrings.
            for _ in 0..2 * n {
                match skip_bytes(at)? {
                    Some(next) => at = next,
                    None => return Ok(None),
                }
            }
        }
        Some(_) => return Err(()),
    }
    Ok((at <= b.len()).then_some(at))
}

/// What a reader hands its writer, in the order it was read. Every chunk
/// waits for the same gate ([`wait_to_forward`]): the mode forwarding its
/// direction, and its due time.
enum Chunk {
    /// Bytes to write.
    Data {
        bytes: Vec<u8>,
        due: Instant,
        /// The quorum `REQUEST` packets the bytes complete, counted in
        /// [`QuorumCounts::requests`] when they are forwarded.
        requests: u64,
    },
    /// The source's end: EOF (`failed: false`, passed on as a half-close)
    /// or a read error (a reset: the connection is closed both ways).
    End { due: Instant, failed: bool },
}

impl Chunk {
    fn due(&self) -> Instant {
        match self {
            Chunk::Data { due, .. } | Chunk::End { due, .. } => *due,
        }
    }
}

impl FaultProxy {
    /// Starts a proxy on a free port of 127.0.0.1, forwarding to `target` (e.g. a
    /// server's `"127.0.0.1:PORT"`; the first address it resolves to), in
    /// [`ProxyMode::Pass`].
    pub fn start<A: ToSocketAddrs>(target: A) -> io::Result<FaultProxy> {
        FaultProxy::start_with(target, None)
    }

    /// Starts a proxy for a ZooKeeper quorum link: a learner (follower)
    /// connects to it as to its leader's quorum port `target`. Besides what
    /// every proxy does, it reads the learner's bytes as quorum packets, so
    /// that [`hold_acks`](Self::hold_acks) can hold the learner's votes for
    /// proposals while its other packets (pings, session revalidations,
    /// forwarded requests) pass, and [`quorum_counts`](Self::quorum_counts)
    /// tells what it has seen. The leader → learner bytes are forwarded as
    /// on any proxy. [`ZkEnsemble::start_with_quorum_links`] puts one on every
    /// member-to-member quorum link.
    ///
    /// [`ZkEnsemble::start_with_quorum_links`]: super::ZkEnsemble::start_with_quorum_links
    pub fn start_quorum_link<A: ToSocketAddrs>(target: A) -> io::Result<FaultProxy> {
        FaultProxy::start_with(target, Some(QuorumLink::default()))
    }

    fn start_with<A: ToSocketAddrs>(
        target: A,
        quorum: Option<QuorumLink>,
    ) -> io::Result<FaultProxy> {
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
                quorum,
            }),
            changed: Condvar::new(),
            round_trips: AtomicU64::new(0),
            requests: Mutex::new(HashMap::new()),
            reads: Mutex::new(None),
            trip: Mutex::new(None),
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

    /// Forwards normally, both ways ([`ProxyMode::Pass`]); what was held
    /// flows on at once, in order: the bytes, then the end of the stream if
    /// one came.
    pub fn pass(&self) {
        self.set_mode(ProxyMode::Pass);
    }

    /// Stops forwarding in both directions, keeping every socket open (a
    /// partition, [`ProxyMode::Stall`]). Once this returns, nothing reaches
    /// the other side — no byte written after it, no peer's close — until a
    /// mode that forwards is set (or a cut drops the connections), even
    /// when the proxy was blocked reading that byte or that close when this
    /// was called: what it reads is held, in order.
    pub fn stall(&self) {
        self.set_mode(ProxyMode::Stall);
    }

    /// A one-way partition ([`ProxyMode::StallUpstream`]): holds client→server
    /// bytes and the client's close, as [`stall`](Self::stall) holds both
    /// ways; forwards server→client bytes.
    pub fn stall_upstream(&self) {
        self.set_mode(ProxyMode::StallUpstream);
    }

    /// A one-way partition ([`ProxyMode::StallDownstream`]): holds server→client
    /// bytes and the server's close, as [`stall`](Self::stall) holds both
    /// ways; forwards client→server bytes.
    pub fn stall_downstream(&self) {
        self.set_mode(ProxyMode::StallDownstream);
    }

    /// Forwards every byte, and each end of stream, `delay` after the proxy
    /// read it, in both directions ([`ProxyMode::Delay`]); what a stall held
    /// goes as soon as it is due.
    pub fn delay(&self, delay: Duration) {
        self.set_mode(ProxyMode::Delay(delay));
    }

    /// Sets the mode (see [`ProxyMode`]); it applies at once to every
    /// connection, to what is held as to what comes next.
    pub fn set_mode(&self, mode: ProxyMode) {
        self.shared.lock().mode = mode;
        self.shared.changed.notify_all();
    }

    /// Sets `mode` as the next client request with one of `opcodes`
    /// (ZooKeeper's `OpCode`s: 1 create, 15 create2, 19 createContainer,
    /// 21 createTTL, 2 delete, 5 setData, ...) is forwarded: that request
    /// reaches the server, and with [`ProxyMode::StallDownstream`] its reply
    /// (and every later one) is held, by construction (the mode is set
    /// before the request is written). Once; replaces an earlier setting.
    pub fn set_mode_after(&self, opcodes: &[i32], mode: ProxyMode) {
        *lock(&self.shared.trip) = Some((opcodes.to_vec(), mode));
    }

    /// Closes every current connection, on both sides (both peers read EOF; held
    /// bytes and held ends of streams are dropped, never delivered). The mode
    /// stays; new connections are accepted.
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

    /// On a quorum link ([`start_quorum_link`](Self::start_quorum_link)):
    /// holds every `ACK` packet the learner sends from now on — its vote for
    /// a proposal — while its later packets overtake them. The learner stays
    /// connected, pinged and serving its clients (sessions reconnect to it,
    /// reads are answered, writes and syncs reach the leader), but its votes
    /// do not count: with every follower's link held, the leader cannot
    /// commit. Hold shorter than the ensemble's `syncLimit` (the leader drops
    /// a follower whose acknowledgement is that late).
    ///
    /// # Errors
    /// `InvalidInput` on a proxy that is not a quorum link.
    pub fn hold_acks(&self) -> io::Result<()> {
        let mut state = self.shared.lock();
        let quorum = state.quorum.as_mut().ok_or_else(not_a_quorum_link)?;
        quorum.hold_acks = true;
        Ok(())
    }

    /// On a quorum link: delivers the held `ACK` packets, in order and before
    /// any later packet of their connection, and holds no more.
    ///
    /// # Errors
    /// `InvalidInput` on a proxy that is not a quorum link.
    pub fn release_acks(&self) -> io::Result<()> {
        let connections: Vec<Arc<Connection>> = {
            let mut state = self.shared.lock();
            let quorum = state.quorum.as_mut().ok_or_else(not_a_quorum_link)?;
            quorum.hold_acks = false;
            state.connections.values().cloned().collect()
        };
        // The framer's lock, then the state's: the reader's order.
        for connection in connections {
            let Some(framer) = &connection.framer else {
                continue;
            };
            let mut framer = lock(framer);
            let held = std::mem::take(&mut framer.held);
            if let Some(tx) = lock(&connection.upstream_tx).as_ref() {
                for bytes in held {
                    let due = self.shared.due();
                    let _ = tx.send(Chunk::Data {
                        bytes,
                        due,
                        requests: 0,
                    });
                }
            }
        }
        if let Some(quorum) = self.shared.lock().quorum.as_mut() {
            quorum.counts.held_acks = 0;
        }
        self.shared.changed.notify_all();
        Ok(())
    }

    /// On a quorum link: what it has seen of its learners' packets (the
    /// requests forwarded, the `ACK`s held now); `None` on another proxy.
    pub fn quorum_counts(&self) -> Option<QuorumCounts> {
        self.shared.lock().quorum.as_ref().map(|q| q.counts)
    }

    /// On a quorum link: waits until `done` holds for its
    /// [`quorum_counts`](Self::quorum_counts) (woken by each packet counted),
    /// at most `timeout`. Returns whether it held; `false` at once on
    /// another proxy.
    pub fn wait_for_quorum_counts(
        &self,
        timeout: Duration,
        done: impl Fn(&QuorumCounts) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            let Some(quorum) = state.quorum.as_ref() else {
                return false;
            };
            if done(&quorum.counts) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline || state.stopped {
                return false;
            }
            state = self.shared.wait_timeout(state, deadline - now);
        }
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

    /// The round trips the ZooKeeper clients behind this proxy have made since
    /// it started, over all their connections: an exact count, whatever the
    /// timing. The proxy reads each client link's frames: a request (a ping
    /// left out) read from the client while none of that connection's earlier
    /// requests is still waiting for its reply from the server starts a round
    /// trip; requests the client sends before those replies come back (a
    /// pipelined batch) go in the round trip already started. So two requests
    /// sent together count one, a request sent after the previous one's reply
    /// counts one more (requests the client writes one after the other,
    /// without waiting, count one or two: as the server's reply to the first
    /// comes back before or after the proxy read the second; a test that must
    /// tell which requests went asks [`requests`](Self::requests)). Connect
    /// requests, pings and watch notifications do not
    /// count; neither does a quorum link, nor a link whose bytes are not
    /// ZooKeeper's client framing (TLS). Only what the proxy forwarded counts,
    /// when it forwards it (right before writing it on): a request held by a
    /// stall counts once it passes, one dropped by a cut never does.
    pub fn round_trips(&self) -> u64 {
        self.shared.round_trips.load(Ordering::SeqCst)
    }

    /// The requests with ZooKeeper opcode `opcode` (jute's `OpCode`:
    /// 8 getChildren, 12 getChildren2, 3 exists, 4 getData, 1 create,
    /// 2 delete, 101 setWatches, ...) the clients behind this proxy sent
    /// through it since it started, counted as
    /// [`round_trips`](Self::round_trips) counts: when forwarded, pings and
    /// connect requests left out, TLS links not counted. Timing does not
    /// change it: a test tells with it which requests a step sent.
    pub fn requests(&self, opcode: i32) -> u64 {
        lock(&self.shared.requests)
            .get(&opcode)
            .copied()
            .unwrap_or(0)
    }
}

impl FaultProxy {
    /// Starts noting how the clients' requests arrive: from now on each read
    /// the proxy makes from a client link that completes requests is noted,
    /// with their opcodes (see [`request_reads`](Self::request_reads)).
    /// Calling it again starts over.
    pub fn record_reads(&self) {
        *lock(&self.shared.reads) = Some(Vec::new());
    }

    /// The reads noted since [`record_reads`](Self::record_reads) (empty
    /// before it), in the order forwarded: for each, the opcodes of the client
    /// requests it completed (as [`requests`](Self::requests) counts them:
    /// pings and connect requests left out), in order. Requests a client
    /// wrote in one socket write come in one read (the proxy reads up to 16
    /// KiB at a time, and a write on loopback arrives whole); requests written
    /// apart come in separate reads unless the second write landed before the
    /// proxy read the first (a test that must tell them apart makes the
    /// writes wait, `ZooKeeper::pause_after_writes`). A test tells with it
    /// whether related requests left in one write.
    pub fn request_reads(&self) -> Vec<Vec<i32>> {
        lock(&self.shared.reads).clone().unwrap_or_default()
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
    /// When a chunk read now is due, in the current mode.
    fn due(&self) -> Instant {
        match self.lock().mode {
            ProxyMode::Delay(d) => Instant::now() + d,
            _ => Instant::now(),
        }
    }

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

fn not_a_quorum_link() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "not a quorum link (FaultProxy::start_quorum_link)",
    )
}

/// A connection's lock; a panic on another thread does not poison the harness.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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
    let (target, quorum) = {
        let state = shared.lock();
        (state.target, state.quorum.is_some())
    };
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
        framer: quorum.then(Mutex::default),
        upstream_tx: Mutex::new(None),
        exchanges: Mutex::new(Exchanges {
            raw: quorum,
            ..Exchanges::default()
        }),
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
        if to_upstream && connection.framer.is_some() {
            *lock(&connection.upstream_tx) = Some(tx.clone());
        }
        let (s1, c1) = (Arc::clone(shared), Arc::clone(&connection));
        let (s2, c2) = (Arc::clone(shared), Arc::clone(&connection));
        let reader_ok = shared.spawn(format!("zkp{}:{id}{tag}r", shared.id), move || {
            let exit = ThreadExit {
                shared: s1,
                connection: c1,
            };
            read_loop(&exit, to_upstream, &tx);
            // The writer ends when every sender is gone.
            lock(&exit.connection.upstream_tx).take();
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
            // Held: read nothing more, so the bytes (and the end of the
            // stream) wait in the kernel's buffers. A read already under
            // way when the mode changed is held by the writer instead.
            let mut state = shared.lock();
            while state.mode.holds(to_upstream) && !state.stopped && !connection.is_closed() {
                state = shared.wait(state);
            }
            if state.stopped || connection.is_closed() {
                return;
            }
        }
        let read = source.read(&mut buffer);
        let due = shared.due();
        let sent = match read {
            Ok(0) => {
                let _ = tx.send(Chunk::End { due, failed: false });
                return;
            }
            Ok(n) => {
                let framer = connection.framer.as_ref().filter(|_| to_upstream);
                match framer {
                    Some(framer) => forward_packets(shared, &mut lock(framer), &buffer[..n], tx),
                    None => tx
                        .send(Chunk::Data {
                            bytes: buffer[..n].to_vec(),
                            due,
                            requests: 0,
                        })
                        .is_ok(),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
            Err(_) => {
                // Passed on like an end of stream: not while held.
                let _ = tx.send(Chunk::End { due, failed: true });
                return;
            }
        };
        if !sent {
            return;
        }
    }
}

/// A quorum link's learner bytes: the packets they complete are cut out,
/// `ACK`s held while [`FaultProxy::hold_acks`] says so, the rest sent on
/// (after the held ones, once released; a `REQUEST` is counted when the
/// writer forwards it). Returns `false` when the writer is gone.
fn forward_packets(
    shared: &Shared,
    framer: &mut QuorumFramer,
    bytes: &[u8],
    tx: &Sender<Chunk>,
) -> bool {
    let packets = framer.feed(bytes);
    let mut state = shared.lock();
    let due = match state.mode {
        ProxyMode::Delay(d) => Instant::now() + d,
        _ => Instant::now(),
    };
    let Some(quorum) = state.quorum.as_mut() else {
        return true;
    };
    let mut sent = true;
    for (kind, packet) in packets {
        let requests = u64::from(kind == QUORUM_REQUEST && !framer.raw);
        if quorum.hold_acks && kind == QUORUM_ACK && !framer.raw {
            framer.held.push(packet);
            quorum.counts.held_acks += 1;
            continue;
        }
        if !quorum.hold_acks {
            // Released meanwhile: the held ones first.
            for held in framer.held.drain(..) {
                quorum.counts.held_acks = quorum.counts.held_acks.saturating_sub(1);
                let chunk = Chunk::Data {
                    bytes: held,
                    due,
                    requests: 0,
                };
                sent &= tx.send(chunk).is_ok();
            }
        }
        let chunk = Chunk::Data {
            bytes: packet,
            due,
            requests,
        };
        sent &= tx.send(chunk).is_ok();
    }
    drop(state);
    shared.changed.notify_all();
    sent
}

/// Waits until a chunk of this direction due at `due` may be written: the
/// mode forwards the direction and the due time has come (woken by every
/// mode change, so a pass takes effect at once). The mode is read under the
/// state lock after the chunk was read, so nothing read after a stall
/// returned passes this gate while the stall lasts. `false` when the
/// connection was cut or the proxy stopped: the chunk is dropped with it.
fn wait_to_forward(
    shared: &Shared,
    connection: &Connection,
    to_upstream: bool,
    due: Instant,
) -> bool {
    let mut state = shared.lock();
    loop {
        if state.stopped || connection.is_closed() {
            return false;
        }
        if state.mode.holds(to_upstream) {
            state = shared.wait(state);
            continue;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        state = shared.wait_timeout(state, due - now);
    }
}

fn write_loop(exit: &ThreadExit, to_upstream: bool, rx: &Receiver<Chunk>) {
    let (shared, connection) = (&exit.shared, &exit.connection);
    let mut sink = if to_upstream {
        &connection.upstream
    } else {
        &connection.client
    };
    // Ends when the reader is gone (it drops the sender) or after the end.
    while let Ok(chunk) = rx.recv() {
        // Bytes and ends alike: in the order read, never while held.
        if !wait_to_forward(shared, connection, to_upstream, chunk.due()) {
            return;
        }
        match chunk {
            Chunk::Data {
                bytes, requests, ..
            } => {
                // Counted as it is forwarded, before it is written: a reply
                // is told before the client can answer it with a new request.
                let mut opcodes = Vec::new();
                if lock(&connection.exchanges).feed(to_upstream, &bytes, &mut opcodes) {
                    shared.round_trips.fetch_add(1, Ordering::SeqCst);
                }
                if !opcodes.is_empty() {
                    let tripped = {
                        let mut trip = lock(&shared.trip);
                        match trip.as_ref() {
                            Some((ops, mode)) if opcodes.iter().any(|o| ops.contains(o)) => {
                                let mode = *mode;
                                *trip = None;
                                Some(mode)
                            }
                            _ => None,
                        }
                    };
                    if let Some(mode) = tripped {
                        // Before the request is written: its reply cannot
                        // pass before the mode holds it.
                        shared.lock().mode = mode;
                        shared.changed.notify_all();
                    }
                    if to_upstream {
                        if let Some(reads) = lock(&shared.reads).as_mut() {
                            reads.push(opcodes.clone());
                        }
                    }
                    let mut counts = lock(&shared.requests);
                    for op in opcodes {
                        *counts.entry(op).or_default() += 1;
                    }
                }
                if requests > 0 {
                    if let Some(quorum) = shared.lock().quorum.as_mut() {
                        quorum.counts.requests += requests;
                    }
                    shared.changed.notify_all();
                }
                if sink.write_all(&bytes).is_err() {
                    connection.close(shared);
                    return;
                }
            }
            Chunk::End { failed: false, .. } => {
                // Half-close: pass the FIN on, keep the other direction going.
                let _ = sink.shutdown(Shutdown::Write);
                return;
            }
            Chunk::End { failed: true, .. } => {
                connection.close(shared);
                return;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A quorum packet as jute writes it: type, zxid, data, authinfo.
    fn packet(kind: i32, data: Option<&[u8]>, ids: Option<&[(&str, &str)]>) -> Vec<u8> {
        let mut b = kind.to_be_bytes().to_vec();
        b.extend_from_slice(&7i64.to_be_bytes());
        match data {
            Some(d) => {
                b.extend_from_slice(&(d.len() as i32).to_be_bytes());
                b.extend_from_slice(d);
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        match ids {
            Some(ids) => {
                b.extend_from_slice(&(ids.len() as i32).to_be_bytes());
                for (scheme, id) in ids {
                    for s in [scheme, id] {
                        b.extend_from_slice(&(s.len() as i32).to_be_bytes());
                        b.extend_from_slice(s.as_bytes());
                    }
                }
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        b
    }

    #[test]
    fn framer_cuts_packets_at_their_ends_whatever_the_reads() {
        let ack = packet(QUORUM_ACK, None, None);
        let request = packet(QUORUM_REQUEST, Some(b"create"), Some(&[("digest", "a:b")]));
        let stream: Vec<u8> = [ack.clone(), request.clone(), ack.clone()].concat();
        for split in 0..=stream.len() {
            let mut framer = QuorumFramer::default();
            let mut got = framer.feed(&stream[..split]);
            got.extend(framer.feed(&stream[split..]));
            let kinds: Vec<i32> = got.iter().map(|(k, _)| *k).collect();
            assert_eq!(
                kinds,
                [QUORUM_ACK, QUORUM_REQUEST, QUORUM_ACK],
                "split {split}"
            );
            assert_eq!(got[1].1, request);
            assert!(!framer.raw && framer.pending.is_empty());
        }
    }

    #[test]
    fn framer_passes_what_is_not_quorum_packets_raw() {
        let mut framer = QuorumFramer::default();
        let mut junk = 5i32.to_be_bytes().to_vec();
        junk.extend_from_slice(&[0; 8]);
        junk.extend_from_slice(&(-7i32).to_be_bytes());
        let got = framer.feed(&junk);
        assert!(framer.raw);
        assert_eq!(got, [(0, junk)]);
        assert_eq!(framer.feed(b"more"), [(0, b"more".to_vec())]);
    }

    /// [`Exchanges::feed`], the opcodes left out.
    fn feed(e: &mut Exchanges, to_server: bool, bytes: &[u8]) -> bool {
        e.feed(to_server, bytes, &mut Vec::new())
    }

    /// A client frame: its length, then `xid` and a body (`None`: the
    /// connect request or response, no xid).
    fn frame(xid: Option<i32>) -> Vec<u8> {
        let mut body = xid.map(|x| x.to_be_bytes().to_vec()).unwrap_or_default();
        body.extend_from_slice(b"body");
        let mut b = (body.len() as i32).to_be_bytes().to_vec();
        b.extend_from_slice(&body);
        b
    }

    #[test]
    fn round_trips_count_requests_sent_after_the_replies_came_back() {
        let mut e = Exchanges::default();
        assert!(!feed(&mut e, true, &frame(None)), "the connect request");
        assert!(!feed(&mut e, false, &frame(None)), "the connect response");
        // Two requests sent together, split anywhere: one round trip.
        let batch = [frame(Some(1)), frame(Some(2))].concat();
        for split in 0..=batch.len() {
            let mut e = Exchanges::default();
            e.to_server.seen = 1; // past the connect request
            let started = usize::from(feed(&mut e, true, &batch[..split]))
                + usize::from(feed(&mut e, true, &batch[split..]));
            assert_eq!((started, e.outstanding), (1, 2), "split {split}");
        }
        let mut opcodes = Vec::new();
        assert!(e.feed(true, &batch, &mut opcodes));
        let body = i32::from_be_bytes(*b"body");
        assert_eq!(opcodes, [body, body], "each request's opcode");
        // A ping and a notification between: no round trip, no reply.
        assert!(!feed(&mut e, true, &frame(Some(PING_XID))));
        assert!(!feed(&mut e, false, &frame(Some(PING_XID))));
        assert!(!feed(&mut e, false, &frame(Some(NOTIFICATION_XID))));
        assert!(!feed(&mut e, false, &frame(Some(1))));
        assert!(
            !feed(&mut e, true, &frame(Some(3))),
            "a reply still awaited"
        );
        assert!(!feed(
            &mut e,
            false,
            &[frame(Some(2)), frame(Some(3))].concat()
        ));
        // Every reply in: the next request is a new round trip.
        assert!(feed(&mut e, true, &frame(Some(4))));
        // Not ZooKeeper's framing (a TLS record): nothing counted from then.
        let mut tls = Exchanges::default();
        assert!(!feed(&mut tls, true, &[0x16, 0x03, 0x01, 0x00, 0xc8]));
        assert!(tls.raw && !feed(&mut tls, true, &frame(Some(1))));
    }
}
