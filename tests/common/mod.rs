//! Fixtures shared by the integration-test binaries (`mod common;` in each):
//! connections, test roots, event recorders, `/proc` readings, and the
//! `client*` binaries' helpers in [`client`].
//!
//! Each binary uses only some of them.
#![allow(dead_code, unreachable_pub)]

pub mod client;
pub mod java;
pub mod participant;

use std::fs;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use zklock::client::{Acl, CreateMode, EventType, WatchedEvent, ZooKeeper};
use zklock::lock::LockEvent;
use zklock::testing::{
    eventually, shared_server, test_servers, unique_root, wait_until, FaultProxy, ZkEnsemble,
};
use zklock::{zkutil, Abortable, Error, RetryConfig, ZkError, ZooKeeperListener, ZooKeeperWatcher};

/// Bound for every wait on an event.
pub const WAIT: Duration = Duration::from_secs(10);

/// Installs `env_logger` once (`RUST_LOG=zklock=debug` to see the library).
pub fn init_log() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
    });
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Asserts `result` failed with the ZooKeeper code `code`; returns the error.
#[track_caller]
pub fn assert_code<T: std::fmt::Debug>(result: zklock::Result<T>, code: ZkError) -> Error {
    match result {
        Err(e) if e.is(code) => e,
        other => panic!("expected {code:?}, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Connections and test roots
// ---------------------------------------------------------------------------

/// A plain client with no default-watcher work: "another process".
pub fn raw_session(servers: &str, session: Duration) -> ZooKeeper {
    ZooKeeper::connect(servers, session, |_e: WatchedEvent| {}).expect("raw connect")
}

/// A fresh root (with its parent `/zklock-test`) and a plain client with a 6 s
/// session on `servers`.
pub fn setup_root(servers: &str, name: &str) -> (ZooKeeper, String) {
    let zk = raw_session(servers, Duration::from_secs(6));
    let root = unique_root(name);
    match zk.create(
        "/zklock-test",
        b"",
        Acl::open_unsafe(),
        CreateMode::Persistent,
    ) {
        Ok(_) => {}
        Err(e) if e.is(ZkError::NodeExists) => {}
        Err(e) => panic!("create /zklock-test: {e}"),
    }
    zk.create(&root, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .expect("create root");
    (zk, root)
}

/// The `zkutil`/tracker tests' watcher: `$ZK_TEST_SERVERS` or the shared server,
/// a 4 s session, default retries.
pub fn watcher() -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(&test_servers())
        .with_session_timeout(Duration::from_secs(4))
        .connect()
        .expect("connect a ZooKeeperWatcher")
}

/// [`watcher`] and a fresh root znode for one test.
pub fn setup(name: &str) -> (ZooKeeperWatcher, String) {
    let zkw = watcher();
    let root = unique_root(name);
    zkutil::create_with_parents(&zkw, &root).expect("create the test root");
    (zkw, root)
}

// ---------------------------------------------------------------------------
// Lock tests
// ---------------------------------------------------------------------------

/// The lock tests' watcher: `session`, retries 20 ms apart.
pub fn lock_watcher(servers: &str, session: Duration) -> ZooKeeperWatcher {
    init_log();
    ZooKeeperWatcher::builder(servers)
        .with_identifier("lock-test")
        .with_session_timeout(session)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .connect()
        .expect("connect")
}

/// [`lock_watcher`] on `$ZK_TEST_SERVERS` or the shared server, 6 s session.
pub fn zkw() -> ZooKeeperWatcher {
    lock_watcher(&test_servers(), Duration::from_secs(6))
}

/// A plain session (6 s) on `$ZK_TEST_SERVERS` or the shared server.
pub fn raw() -> ZooKeeper {
    raw_session(&test_servers(), Duration::from_secs(6))
}

/// The local shared server, whatever `$ZK_TEST_SERVERS` says: for tests that put
/// a [`zklock::testing::FaultProxy`] in front of it, and for every other session
/// of such a test, so that all of them see the same server.
pub fn local() -> String {
    shared_server().connect_string()
}

/// [`zkw`] on the [`local`] server.
pub fn local_zkw() -> ZooKeeperWatcher {
    lock_watcher(&local(), Duration::from_secs(6))
}

/// [`raw`] on the [`local`] server.
pub fn local_raw() -> ZooKeeper {
    raw_session(&local(), Duration::from_secs(6))
}

/// The sorted children of `path`; none if it does not exist.
pub fn children(zk: &ZooKeeper, path: &str) -> Vec<String> {
    match zk.get_children(path, false) {
        Ok(mut c) => {
            c.sort();
            c
        }
        Err(e) if e.is(ZkError::NoNode) => Vec::new(),
        Err(e) => panic!("get_children {path}: {e}"),
    }
}

pub type LockEvents = Arc<Mutex<Vec<LockEvent>>>;

/// A lock listener recording every event, and the record.
pub fn lock_recorder() -> (LockEvents, impl Fn(&str, LockEvent) + Send + Sync + 'static) {
    let events: LockEvents = Arc::default();
    let e = events.clone();
    (events, move |_p: &str, ev: LockEvent| {
        e.lock().unwrap().push(ev)
    })
}

/// A write lock held by `holder` (whose connection goes through `proxy`)
/// while `contender` queues for it, then `proxy` stalls for longer than the
/// holder's session: the holder hears InDoubt before the contender is
/// granted the lock, then Lost; nothing is left under `root`. The caller
/// lets `proxy` pass again and closes the watchers.
pub fn lock_held_through_a_partition(
    holder: &ZooKeeperWatcher,
    contender: &ZooKeeperWatcher,
    proxy: &zklock::testing::FaultProxy,
    root: &str,
) {
    use std::thread;
    use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
    let (events, listener) = lock_recorder();
    let event_times: Arc<Mutex<Vec<(LockEvent, Instant)>>> = Arc::default();
    let times = event_times.clone();
    let rw = ZkInterProcessReadWriteLock::new(holder, root, None)
        .unwrap()
        .with_lock_listener(move |p: &str, e: LockEvent| {
            times.lock().unwrap().push((e, Instant::now()));
            listener(p, e)
        });
    let held = rw.write_lock(b"holder");
    held.acquire().unwrap();
    let wanted = ZkInterProcessReadWriteLock::new(contender, root, None)
        .unwrap()
        .write_lock(b"contender");
    let waiting = thread::spawn(move || {
        wanted.acquire().unwrap();
        let granted = Instant::now();
        wanted.release().unwrap();
        granted
    });
    thread::sleep(Duration::from_millis(300)); // deliberate: the contender queues
    proxy.stall();
    let granted = waiting.join().unwrap();
    wait_until(Duration::from_secs(10), "Lost", || {
        events.lock().unwrap().contains(&LockEvent::Lost)
    });
    assert_eq!(
        *events.lock().unwrap(),
        [LockEvent::InDoubt, LockEvent::Lost]
    );
    let in_doubt = event_times.lock().unwrap()[0].1;
    assert!(in_doubt < granted, "InDoubt must come before another grant");
    assert!(!held.is_held());
    wait_until(Duration::from_secs(10), "no orphan", || {
        contender
            .zookeeper()
            .get_children(root, false)
            .map(|c| c.is_empty())
            .unwrap_or(true)
    });
}

/// Retries `f` while it fails with a retryable error (an ensemble electing a
/// leader), up to a minute; its result. Any other error fails the test.
#[track_caller]
pub fn retry_election<T>(what: &str, mut f: impl FnMut() -> zklock::Result<T>) -> T {
    let mut out = None;
    wait_until(Duration::from_secs(60), what, || match f() {
        Ok(v) => {
            out = Some(v);
            true
        }
        Err(e) if e.is_retryable() => false,
        Err(e) => panic!("{what}: {e}"),
    });
    out.unwrap()
}

/// The ensemble member whose `cons` lists session `id`.
pub fn member_of(ensemble: &ZkEnsemble, id: i64) -> usize {
    let mut found = None;
    wait_until(
        Duration::from_secs(20),
        "the session shows in a member's cons",
        || {
            found = (0..ensemble.size())
                .find(|&i| client::cons_sessions(&ensemble.address(i)).contains(&id));
            found.is_some()
        },
    );
    found.unwrap()
}

// ---------------------------------------------------------------------------
// Listeners
// ---------------------------------------------------------------------------

/// Records node events (a general listener: sees all paths) and wakes waiters.
#[derive(Default)]
pub struct NodeRecorder {
    events: Mutex<Vec<(EventType, String)>>,
    cv: Condvar,
}

impl NodeRecorder {
    fn push(&self, t: EventType, path: &str) {
        self.events.lock().unwrap().push((t, path.to_string()));
        self.cv.notify_all();
    }

    pub fn count(&self, t: EventType, path: &str) -> usize {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, p)| *k == t && p == path)
            .count()
    }

    pub fn has(&self, t: EventType, path: &str) -> bool {
        self.count(t, path) > 0
    }

    /// Waits (bounded by [`WAIT`]) until `n` events `t` on `path` were recorded.
    pub fn wait_for(&self, t: EventType, path: &str, n: usize) -> bool {
        let deadline = Instant::now() + WAIT;
        let mut events = self.events.lock().unwrap();
        loop {
            if events.iter().filter(|(k, p)| *k == t && p == path).count() >= n {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            events = self.cv.wait_timeout(events, left).unwrap().0;
        }
    }
}

impl ZooKeeperListener for NodeRecorder {
    fn node_created(&self, path: &str) {
        self.push(EventType::NodeCreated, path);
    }
    fn node_deleted(&self, path: &str) {
        self.push(EventType::NodeDeleted, path);
    }
    fn node_data_changed(&self, path: &str) {
        self.push(EventType::NodeDataChanged, path);
    }
    fn node_children_changed(&self, path: &str) {
        self.push(EventType::NodeChildrenChanged, path);
    }
}

/// A [`NodeRecorder`] registered on `zkw` (after the listeners already there).
pub fn node_recorder(zkw: &ZooKeeperWatcher) -> Arc<NodeRecorder> {
    let r = Arc::new(NodeRecorder::default());
    zkw.register_listener(r.clone());
    r
}

/// Counts `abort` calls and keeps the last one.
#[derive(Default)]
pub struct CountingAbortable {
    calls: AtomicUsize,
    last: Mutex<Option<(String, Option<Error>)>>,
}

impl CountingAbortable {
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The reason and error of the last `abort`.
    pub fn last(&self) -> Option<(String, Option<Error>)> {
        self.last.lock().unwrap().clone()
    }

    /// The error of the last `abort`.
    pub fn last_error(&self) -> Option<Error> {
        self.last().and_then(|(_, e)| e)
    }
}

impl Abortable for CountingAbortable {
    fn abort(&self, why: &str, error: Option<&Error>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        *self.last.lock().unwrap() = Some((why.to_owned(), error.cloned()));
    }
    fn is_aborted(&self) -> bool {
        self.calls() > 0
    }
}

// ---------------------------------------------------------------------------
// The process: /proc readings, and tests that measure it
// ---------------------------------------------------------------------------

/// This process's CPU time (user + system) from `/proc/self/stat`.
pub fn process_cpu() -> Duration {
    let stat = fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are 12 and 13 after the state field.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
}

/// Names of this process's threads (`comm`: at most 15 bytes).
pub fn thread_names() -> Vec<String> {
    fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

pub fn threads_named(prefix: &str) -> usize {
    thread_names()
        .iter()
        .filter(|n| n.starts_with(prefix))
        .count()
}

/// Serialises the tests of one binary against a test that measures the whole
/// process (threads, sessions on the shared server): every test takes
/// [`Serial::shared`] first (so it is dropped last), the measuring test takes
/// [`Serial::exclusive`], and runs alone.
pub struct Serial;

static SERIAL: RwLock<()> = RwLock::new(());

impl Serial {
    pub fn shared() -> RwLockReadGuard<'static, ()> {
        SERIAL.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
        SERIAL.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The voluntary context switches of this process's thread named `name`.
pub fn context_switches_of(name: &str) -> Option<u64> {
    std::fs::read_dir("/proc/self/task").ok()?.find_map(|e| {
        let dir = e.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
        if comm.trim() != name {
            return None;
        }
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        status
            .lines()
            .find(|l| l.starts_with("voluntary_ctxt_switches:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    })
}

/// Expires `zkw`'s session for sure with the exported
/// [`zklock::testing::expire_session`] (a second handle on the same session,
/// closed; the close is confirmed by the server, and the client must have
/// learned the expiry). `proxy`, which `zkw` goes through, is set to pass
/// first, so that the client can reconnect and learn it.
pub fn force_expiry(proxy: &zklock::testing::FaultProxy, servers: &str, zkw: &ZooKeeperWatcher) {
    proxy.pass();
    if let Err(e) = zklock::testing::expire_session(zkw.zookeeper(), servers) {
        panic!("force_expiry: {e}");
    }
}

/// The tests' server's ZooKeeper version (major, minor, patch), from the
/// harness ([`zklock::testing::server_version`], one `srvr`).
pub fn server_version() -> (u32, u32, u32) {
    let v = zklock::testing::server_version();
    (v.major, v.minor, v.patch)
}

/// Whether the shared server checks READ on `exists` (ZOOKEEPER-2590:
/// 3.8.4+ and 3.9.2+): a node without it answers `NoAuth`, not its `Stat`.
pub fn exists_checks_read_acl() -> bool {
    let v = server_version();
    v >= (3, 9, 2) || ((3, 8, 4)..(3, 9, 0)).contains(&v)
}

/// A session through `proxy` that gives up fast while the link is down: a
/// short wait for the connection and two retries, its session long enough
/// to outlive the cut.
pub fn giving_up(proxy: &FaultProxy) -> ZooKeeperWatcher {
    init_log();
    ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_identifier("recipes-test")
        .with_session_timeout(Duration::from_secs(12))
        .with_connect_wait(Duration::from_millis(300))
        .with_retry(
            RetryConfig::default()
                .with_max_attempts(2)
                .with_sleep_interval(Duration::from_millis(20)),
        )
        .connect()
        .expect("connect")
}

/// Runs `attempt` through `proxy` so that its create reaches the server and
/// its reply never comes back, and no later request of the call gets an
/// answer either (replies held from the create on, then the connection cut,
/// every reconnect's handshake held): the call must give up with a recoverable error while
/// the node it made is on the server (`made` tells, from `zk`). Then the
/// link heals: the node must go (the unsettled create settled after the
/// reconnect), where before it stayed in the queue for the session's life.
pub fn gives_up_after_its_create<T: std::fmt::Debug + Send + 'static>(
    proxy: &FaultProxy,
    attempt: impl FnOnce() -> zklock::Result<T> + Send + 'static,
    made: impl Fn() -> bool,
) {
    proxy.set_mode_after(
        &[1, 15, 19, 21],
        zklock::testing::ProxyMode::StallDownstream,
    );
    let h = std::thread::spawn(attempt);
    assert!(
        eventually(Duration::from_secs(20), &made),
        "the create never reached the server"
    );
    proxy.cut();
    let r = h.join().unwrap();
    assert!(
        matches!(&r, Err(e) if e.is_retryable()),
        "expected a recoverable error: {r:?}"
    );
    assert!(made(), "the node is there after the call gave up");
    proxy.pass();
    assert!(
        eventually(Duration::from_secs(20), || !made()),
        "the node of a call that gave up was left behind"
    );
}

/// Writes `data` to `node` (firing the watches of `holder`, who reads it),
/// then, while `holder`'s requests are held on the way (`proxy` stalled
/// upstream), takes away every right but an admin's: the request the watch's
/// event makes `holder` send again reaches the server when it may no longer
/// read the node (ZOOKEEPER-2590's `NoAuth`). Returns how many requests with
/// `opcode` `holder` sent from the write on, once the first is through and
/// what its answers made it send is too: the test that a watch refused
/// `NoAuth` is not set again in a loop.
pub fn write_then_hide_from(
    proxy: &FaultProxy,
    holder: &ZooKeeperWatcher,
    node: &str,
    data: &[u8],
    opcode: i32,
) -> u64 {
    use zklock::client::{Id, Perms};
    let admin = local_raw();
    admin.add_auth("digest", b"admin:secret").unwrap();
    let sent = proxy.requests(opcode);
    proxy.stall_upstream();
    admin.set_data(node, data, None).unwrap();
    admin
        .set_acl(
            node,
            &[Acl::new(Perms::ALL, Id::digest("admin", "secret"))],
            None,
        )
        .unwrap();
    proxy.pass();
    assert!(eventually(WAIT, || proxy.requests(opcode) > sent));
    // Twice over: whatever the answers' callbacks sent is through the proxy.
    drain_event_thread(holder, 2);
    proxy.requests(opcode) - sent
}

/// Waits until `zkw`'s event thread has run the callbacks of every request
/// sent before, `rounds` times over (a chain of asynchronous steps, such as a
/// tracker's `getData` → `NoNode` → `exists`, needs one round per step): a
/// `getChildren` of `/` each round, which tests that count `exists` or
/// `getData` at a proxy do not count.
pub fn drain_event_thread(zkw: &ZooKeeperWatcher, rounds: usize) {
    for _ in 0..rounds {
        let (tx, rx) = std::sync::mpsc::channel();
        zkw.zookeeper().get_children_async("/", None, move |_| {
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the event thread answers");
    }
}
