//! Helpers of the `client*` test binaries: an event recorder, bounded waits,
//! error assertions, `/proc` readings and a fake ZooKeeper server.

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{EventType, KeeperState, WatchedEvent, Watcher, ZooKeeper};
use zklock::{Error, ZkError};

#[allow(unused_imports)]
pub use super::{assert_code, init_log, process_cpu, thread_names, threads_named};

/// Records every event it is given; tests wait on it with a bound.
#[derive(Default)]
pub struct Events {
    list: Mutex<Vec<WatchedEvent>>,
    times: Mutex<Vec<Instant>>,
    cv: Condvar,
}

impl Events {
    pub fn new() -> Arc<Events> {
        Arc::new(Events::default())
    }

    /// A watcher that records into this recorder (each call makes a new `Arc`,
    /// so the client sees a distinct watcher).
    pub fn watcher(self: &Arc<Self>) -> impl Watcher + 'static {
        let me = self.clone();
        move |e: WatchedEvent| me.push(e)
    }

    pub fn push(&self, e: WatchedEvent) {
        let mut list = self.list.lock().unwrap();
        self.times.lock().unwrap().push(Instant::now());
        list.push(e);
        self.cv.notify_all();
    }

    /// When the `n`-th (0-based) event matching `f` was recorded.
    pub fn time_of(&self, n: usize, f: impl Fn(&WatchedEvent) -> bool) -> Option<Instant> {
        let list = self.list.lock().unwrap();
        let times = self.times.lock().unwrap();
        list.iter()
            .zip(times.iter())
            .filter(|(e, _)| f(e))
            .nth(n)
            .map(|(_, t)| *t)
    }

    /// When the state `ks` was told for the `n`-th (0-based) time.
    pub fn state_time(&self, ks: KeeperState, n: usize) -> Option<Instant> {
        self.time_of(n, |e| {
            e.event_type == EventType::None && e.keeper_state == ks
        })
    }

    pub fn all(&self) -> Vec<WatchedEvent> {
        self.list.lock().unwrap().clone()
    }

    pub fn clear(&self) {
        let mut list = self.list.lock().unwrap();
        self.times.lock().unwrap().clear();
        list.clear();
    }

    pub fn len(&self) -> usize {
        self.list.lock().unwrap().len()
    }

    /// Connection states told so far, in order (events of type None).
    pub fn states(&self) -> Vec<KeeperState> {
        self.all()
            .iter()
            .filter(|e| e.event_type == EventType::None)
            .map(|e| e.keeper_state)
            .collect()
    }

    /// Node events so far (type, path), in order.
    pub fn nodes(&self) -> Vec<(EventType, String)> {
        self.all()
            .iter()
            .filter(|e| e.event_type != EventType::None)
            .map(|e| (e.event_type, e.path.clone().unwrap_or_default()))
            .collect()
    }

    pub fn count(&self, f: impl Fn(&WatchedEvent) -> bool) -> usize {
        self.list.lock().unwrap().iter().filter(|e| f(e)).count()
    }

    /// Waits until at least `n` recorded events match `f`; panics after `timeout`.
    pub fn wait_count(
        &self,
        n: usize,
        timeout: Duration,
        what: &str,
        f: impl Fn(&WatchedEvent) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        let mut list = self.list.lock().unwrap();
        loop {
            if list.iter().filter(|e| f(e)).count() >= n {
                return;
            }
            let now = Instant::now();
            assert!(
                now < deadline,
                "timed out after {timeout:?} waiting for {what}; events: {:?}",
                *list
            );
            list = self.cv.wait_timeout(list, deadline - now).unwrap().0;
        }
    }

    /// Waits for the state `ks` to have been told `n` times in total.
    pub fn wait_state(&self, ks: KeeperState, n: usize, timeout: Duration) {
        self.wait_count(n, timeout, &format!("{n} x {ks:?}"), |e| {
            e.event_type == EventType::None && e.keeper_state == ks
        });
    }

    /// Waits for `n` node events of `t` on `path` in total.
    pub fn wait_node(&self, t: EventType, path: &str, n: usize, timeout: Duration) {
        self.wait_count(n, timeout, &format!("{n} x {t:?} {path}"), |e| {
            e.event_type == t && e.path.as_deref() == Some(path)
        });
    }

    pub fn node_count(&self, t: EventType, path: &str) -> usize {
        self.count(|e| e.event_type == t && e.path.as_deref() == Some(path))
    }
}

#[allow(unused_imports)]
pub use zklock::testing::wait_until;

/// Asserts `r` failed with `BadArguments`.
#[track_caller]
pub fn assert_bad_args<T: std::fmt::Debug>(r: zklock::Result<T>) {
    match r {
        Err(Error::BadArguments(_)) => {}
        other => panic!("expected BadArguments, got {other:?}"),
    }
}

/// Stalls `proxy`, the link of `zk` (connected, telling `events`, session
/// `session`), while eight writers block in 900 KB writes into it:
/// Disconnected must come at the read timeout (2/3 of the session) whatever
/// they do; then the link heals and the session goes on. For plain TCP and TLS.
pub fn disconnected_at_the_read_timeout_with_writers_blocked(
    zk: &ZooKeeper,
    proxy: &zklock::testing::FaultProxy,
    events: &Events,
    session: Duration,
) {
    let read_timeout = session * 2 / 3;
    zk.exists("/", false).unwrap();
    proxy.stall();
    let stalled = Instant::now();
    let big = vec![7u8; 900 * 1024];
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let (zk, big) = (zk.clone(), big.clone());
            thread::spawn(move || {
                let _ = zk.set_data(&format!("/zklock-test/nowhere-{i}"), &big, None);
            })
        })
        .collect();
    events.wait_state(KeeperState::Disconnected, 1, Duration::from_secs(10));
    let told = events.state_time(KeeperState::Disconnected, 0).unwrap() - stalled;
    assert!(
        told <= read_timeout + Duration::from_millis(700),
        "Disconnected after {told:?} (read timeout {read_timeout:?})"
    );
    proxy.reset();
    events.wait_state(KeeperState::SyncConnected, 2, Duration::from_secs(10));
    for w in writers {
        w.join().unwrap();
    }
    zk.exists("/", false).unwrap();
}

/// Connects with a recorder as the default watcher.
pub fn connect(servers: &str, session: Duration) -> (ZooKeeper, Arc<Events>) {
    init_log();
    let events = Events::new();
    let zk = ZooKeeper::connect(servers, session, events.watcher()).expect("connect");
    (zk, events)
}

/// Gives in-flight notifications time to arrive: a round trip on `zk` (replies and
/// notifications come in order on one connection), then a short pause for the
/// event thread. Deliberate: for checks that no further event comes.
pub fn settle(zk: &ZooKeeper) {
    let _ = zk.exists("/", false);
    thread::sleep(Duration::from_millis(150));
}

/// Creates `path` and its missing parents (persistent, open ACL).
pub fn mkdirs(zk: &ZooKeeper, path: &str) {
    use zklock::client::{Acl, CreateMode};
    let mut cur = String::new();
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        cur.push('/');
        cur.push_str(seg);
        match zk.create(&cur, b"", Acl::open_unsafe(), CreateMode::Persistent) {
            Ok(_) => {}
            Err(e) if e.is(ZkError::NodeExists) => {}
            Err(e) => panic!("create {cur}: {e}"),
        }
    }
}

/// Deletes `path` and everything under it (best effort).
pub fn rmr(zk: &ZooKeeper, path: &str) {
    if let Ok(children) = zk.get_children(path, false) {
        for c in children {
            rmr(zk, &format!("{path}/{c}"));
        }
    }
    let _ = zk.delete(path, None);
}

/// The session ids a server lists in `cons` (`sid=0x...`).
pub fn cons_sessions(addr: &str) -> HashSet<i64> {
    let cons = zklock::testing::four_letter(addr, "cons").unwrap_or_default();
    cons.split("sid=0x")
        .skip(1)
        .filter_map(|s| {
            let hex: String = s.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
            i64::from_str_radix(&hex, 16)
                .ok()
                .or_else(|| u64::from_str_radix(&hex, 16).ok().map(|v| v as i64))
        })
        .collect()
}

/// Whether the server's `dump` lists the session (alive, not yet expired).
pub fn dump_has_session(addr: &str, id: i64) -> bool {
    let dump = zklock::testing::four_letter(addr, "dump").unwrap_or_default();
    session_in_dump(&dump, id)
}

/// Whether a `dump` reply lists session `id` among the server's sessions (its
/// session tracker and ephemeral-node sections). Its last section,
/// `Connections dump`, is left out: it lists connections by idle expiry with
/// the session id each had, and a connection the server has already closed
/// can stay there until that expiry (3.6 to 3.9: a worker thread that did I/O
/// on the connection re-queues it after another thread closed it, e.g. as the
/// old connection of a session that reconnected), after its session is gone.
pub fn session_in_dump(dump: &str, id: i64) -> bool {
    let sessions = dump.split("Connections dump:").next().unwrap_or_default();
    sessions.contains(&format!("0x{:x}", id as u64))
}

/// The watched paths the server holds for session `id` (`wchc`).
pub fn wchc_paths(addr: &str, id: i64) -> Vec<String> {
    let wchc = zklock::testing::four_letter(addr, "wchc").unwrap_or_default();
    let mut out = Vec::new();
    let mut mine = false;
    for line in wchc.lines() {
        if line.starts_with("0x") {
            mine = line.trim() == format!("0x{:x}", id as u64);
        } else if mine && line.trim_start().starts_with('/') {
            out.push(line.trim().to_string());
        }
    }
    out
}

// ---------------------------------------------------------------------------
// A fake server: just enough protocol to hand the client malformed input.
// ---------------------------------------------------------------------------

pub fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub fn put_buffer(out: &mut Vec<u8>, b: &[u8]) {
    put_i32(out, b.len() as i32);
    out.extend_from_slice(b);
}

/// A length-prefixed frame.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(body.len() + 4);
    put_buffer(&mut f, body);
    f
}

/// Reads one length-prefixed frame.
pub fn read_frame(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    if !(0..=1 << 20).contains(&len) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "bad length"));
    }
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

/// The parsed ConnectRequest: (last zxid, timeout ms, session id).
pub fn parse_connect(body: &[u8]) -> (i64, i32, i64) {
    let zxid = i64::from_be_bytes(body[4..12].try_into().unwrap());
    let to = i32::from_be_bytes(body[12..16].try_into().unwrap());
    let id = i64::from_be_bytes(body[16..24].try_into().unwrap());
    (zxid, to, id)
}

/// A ConnectResponse frame (with the readOnly flag).
pub fn connect_response(timeout_ms: i32, session_id: i64) -> Vec<u8> {
    let mut b = Vec::new();
    put_i32(&mut b, 0);
    put_i32(&mut b, timeout_ms);
    put_i64(&mut b, session_id);
    put_buffer(&mut b, &[7u8; 16]);
    b.push(0);
    frame(&b)
}

/// A reply frame: header + body.
pub fn reply(xid: i32, zxid: i64, err: i32, body: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_i32(&mut b, xid);
    put_i64(&mut b, zxid);
    put_i32(&mut b, err);
    b.extend_from_slice(body);
    frame(&b)
}

/// A notification frame with a raw (maybe non-UTF-8) path.
pub fn notification(event_type: i32, path: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    put_i32(&mut body, event_type);
    put_i32(&mut body, 3);
    put_buffer(&mut body, path);
    reply(-1, -1, 0, &body)
}

/// A `Stat` record: 68 bytes, every field set from `v`.
pub fn stat_bytes(v: i32) -> Vec<u8> {
    let mut b = Vec::new();
    for _ in 0..4 {
        put_i64(&mut b, v as i64);
    }
    for _ in 0..3 {
        put_i32(&mut b, v);
    }
    put_i64(&mut b, 0);
    put_i32(&mut b, 0);
    put_i32(&mut b, 0);
    put_i64(&mut b, v as i64);
    b
}

/// A request read by the fake server: (xid, opcode).
pub fn parse_request(body: &[u8]) -> (i32, i32) {
    (
        i32::from_be_bytes(body[0..4].try_into().unwrap()),
        i32::from_be_bytes(body[4..8].try_into().unwrap()),
    )
}

/// A fake server on 127.0.0.1: each accepted connection is handed to `script`
/// with its number (0, 1, ...). Runs until the listener thread is dropped with
/// the process; connections are closed when `script` returns.
pub struct FakeServer {
    pub addr: String,
    pub accepted: Arc<Mutex<usize>>,
}

impl FakeServer {
    pub fn start(script: impl Fn(usize, TcpStream) + Send + Sync + 'static) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(Mutex::new(0usize));
        let count = accepted.clone();
        let script = Arc::new(script);
        thread::Builder::new()
            .name("fake-zk".into())
            .spawn(move || {
                for s in listener.incoming() {
                    let Ok(s) = s else { continue };
                    let n = {
                        let mut c = count.lock().unwrap();
                        *c += 1;
                        *c - 1
                    };
                    let script = script.clone();
                    thread::spawn(move || {
                        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                        script(n, s)
                    });
                }
            })
            .unwrap();
        FakeServer { addr, accepted }
    }

    pub fn accepted(&self) -> usize {
        *self.accepted.lock().unwrap()
    }
}

/// Fake-server step: reads the ConnectRequest and answers a session.
pub fn fake_handshake(s: &mut TcpStream, session_id: i64) -> io::Result<(i64, i32, i64)> {
    let req = read_frame(s)?;
    let parsed = parse_connect(&req);
    s.write_all(&connect_response(parsed.1.max(1000), session_id))?;
    Ok(parsed)
}

/// Fake-server step: reads requests until one that is not a ping (answering pings);
/// returns its (xid, opcode).
pub fn fake_next_request(s: &mut TcpStream) -> io::Result<(i32, i32)> {
    loop {
        let body = read_frame(s)?;
        let (xid, op) = parse_request(&body);
        if xid == -2 {
            s.write_all(&reply(-2, 1, 0, &[]))?;
            continue;
        }
        return Ok((xid, op));
    }
}

/// Fake-server step: serves well (pings, exists → a Stat of 42, closeSession)
/// until the client goes away.
pub fn fake_serve_well(mut s: TcpStream) {
    loop {
        let Ok((xid, op)) = fake_next_request(&mut s) else {
            return;
        };
        let body = if op == 3 { stat_bytes(42) } else { Vec::new() };
        if s.write_all(&reply(xid, 5, 0, &body)).is_err() {
            return;
        }
        if op == -11 {
            return;
        }
    }
}

/// Counts panics on the client's own threads (`zklock-conn`, `zklock-event`):
/// a malformed input must never panic them. Install once per test binary that
/// has no test panicking a watcher on purpose.
pub fn count_client_thread_panics() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if thread::current()
                .name()
                .is_some_and(|n| n.starts_with("zklock-"))
            {
                CLIENT_PANICS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

static CLIENT_PANICS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Panics seen so far on the client's threads (see [`count_client_thread_panics`]).
pub fn client_thread_panics() -> usize {
    CLIENT_PANICS.load(std::sync::atomic::Ordering::SeqCst)
}

/// A one-way partition with notifications flowing (issue 10, and over TLS):
/// under `root` (which exists), `other` changes a node every 150 ms while
/// `zk` (connected through `proxy`, its session `session`, its states in
/// `events`) holds a recursive watch on `root`. Then the client's requests
/// and pings are lost (`stall_upstream`) while the notifications keep
/// coming: the client must find the dead connection by its unanswered ping
/// before the session ends, and after the heal go on with the same session.
pub fn one_way_partition_with_notifications_flowing(
    zk: &ZooKeeper,
    events: &Events,
    other: &ZooKeeper,
    proxy: &zklock::testing::FaultProxy,
    root: &str,
    session: Duration,
) {
    let wait = Duration::from_secs(10);
    let id = zk.session_id();
    let node = format!("{root}/n");
    other
        .create(
            &node,
            b"",
            zklock::client::Acl::open_unsafe(),
            zklock::client::CreateMode::Persistent,
        )
        .unwrap();
    let seen = Events::new();
    zk.add_watch_w(
        root,
        zklock::client::AddWatchMode::PersistentRecursive,
        seen.watcher(),
    )
    .unwrap();
    // The server keeps sending: another client changes the watched node.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (other, node, stop) = (other.clone(), node.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                other.set_data(&node, b"x", None).unwrap();
                thread::sleep(Duration::from_millis(150)); // deliberate pacing
            }
        })
    };
    seen.wait_node(EventType::NodeDataChanged, &node, 1, wait);
    // Requests (and pings) lost, notifications flowing.
    proxy.stall_upstream();
    let cut = Instant::now();
    let before = seen.node_count(EventType::NodeDataChanged, &node);
    seen.wait_node(EventType::NodeDataChanged, &node, before + 3, wait);
    // Found by the unanswered ping (at most 5/6 of the session after the server
    // last heard the client), before the server expires the session.
    events.wait_state(KeeperState::Disconnected, 1, session);
    let found = events.state_time(KeeperState::Disconnected, 0).unwrap() - cut;
    assert!(found < session, "Disconnected after {found:?}");
    proxy.reset();
    events.wait_state(KeeperState::SyncConnected, 2, wait);
    assert_eq!(zk.session_id(), id);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}

/// A caller held on the read side of its own reply, through the client's
/// `on_next_caller_read` step hook: a thread calls `exists("/")` until its
/// call is the held one (a call the connection thread answers, as it does
/// while callers are idle, leaves the hook armed), and [`HeldCaller::start`]
/// returns once it is held. [`release`](HeldCaller::release) lets it read;
/// [`join`](HeldCaller::join) gives the held call's result.
pub struct HeldCaller {
    thread: thread::JoinHandle<Result<Option<zklock::client::Stat>, Error>>,
    release: std::sync::mpsc::Sender<()>,
}

impl HeldCaller {
    /// Holds the next caller of `zk` that reads its own reply; waits at most
    /// `wait` for it to be held, and the held caller at most `wait` for its
    /// release.
    pub fn start(zk: &ZooKeeper, wait: Duration) -> HeldCaller {
        let (holding_tx, holding) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let held = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let h = held.clone();
        zk.on_next_caller_read(move || {
            h.store(true, std::sync::atomic::Ordering::SeqCst);
            holding_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(wait);
        });
        let zk = zk.clone();
        let thread = thread::spawn(move || loop {
            let r = zk.exists("/", false);
            if held.load(std::sync::atomic::Ordering::SeqCst) {
                return r;
            }
            r.unwrap();
        });
        holding
            .recv_timeout(wait)
            .expect("a caller holds the read side");
        HeldCaller { thread, release }
    }

    /// Lets the held caller read.
    pub fn release(&self) {
        self.release.send(()).unwrap();
    }

    /// The held call's result.
    pub fn join(self) -> Result<Option<zklock::client::Stat>, Error> {
        self.thread.join().unwrap()
    }
}
