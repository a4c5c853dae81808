//! Failover storms, side by side (issue 49): a fleet of N clients per
//! implementation — zklock (threads in this process), Apache Curator (one JVM,
//! `benches/java/CuratorStormFleet.java`) and kazoo (one Python process,
//! `benches/python/kazoo_storm_fleet.py`, the venv of `make kazoo`) — on a
//! three-member ensemble on loopback (`zklock::testing::ZkEnsemble`). Every
//! client holds or waits on a write lock (`clients per lock` clients share one),
//! keeps a tree cache of 1,000 nodes (zklock's `TreeCache`, `CuratorCache`,
//! kazoo's `TreeCache`) and tracks one node (`ZooKeeperNodeTracker`, a
//! single-node `CuratorCache`, kazoo's `DataWatch`).
//!
//! Two scenarios, each run for every implementation in every round:
//! - **kill**: the leader is killed (SIGKILL). Its followers drop every client
//!   connection too while they elect a new leader: the whole fleet reconnects.
//! - **cut**: one member's clients are cut off: the `FaultProxy` in front of the
//!   member with the most of the fleet's connections closes them and refuses new
//!   ones for `ZK_STORM_CUT_MS` (1 s), then forwards again. Its clients move to
//!   the other two members at once (a refused connection fails fast for every
//!   client alike; a blackhole would measure each client's connect timeout
//!   instead of its storm).
//! - **none**, the control: no fault, the same changes to the tree; what the
//!   changes alone cost each client (a storm's figures less these are the
//!   storm's own).
//!
//! Every client reaches the ensemble through one `FaultProxy` per member (the
//! three proxies' addresses are the fleet's connect string), so that the
//! proxies count the fleet's requests per opcode exactly (pings and connect
//! requests left out); the bench's own session connects to the members
//! directly. Right after the fault (kill: once a new leader serves) the bench
//! changes the tree (sets `tree/d0/n0`, creates a node, deletes one) and the
//! tracked node; each client reports when its cache and tracker show all of it.
//!
//! Figures per implementation, median (min–max) over the rounds:
//! - requests per client until steady: `zk_packets_received` (`mntr`) summed over
//!   the members that live through the fault, from the fault until steady, minus
//!   the `mntr` reads' own packets and the fleet's pings at the rate measured
//!   before the fault; beside it the proxies' exact count (no pings, no connect
//!   requests) and, per opcode, where the requests went. Steady: every client
//!   current, every holder told, then the members' request rate at the fleet's
//!   pings (plus 100 requests/s) for 1 s.
//! - peak connections/s (`zk_connection_request_count`) and requests/s
//!   (`zk_packets_received`) on those members, from `mntr` read every 100 ms;
//! - the time from the fault until every holder is told restored (or lost), and
//!   until every cache and tracker is current again;
//! - how reconnects spread: each client's first reconnection after the fault
//!   (median, p90, last; Java's client waits a random 0–1 s before each
//!   reconnection attempt after the first);
//! - safety: overlaps (a marker file per lock, created exclusively by each holder
//!   on grant and removed before release, or when the holder is told its lock
//!   is lost: a grant that finds it broke mutual exclusion) and orphans (lock nodes left once every client has had and
//!   released its lock, sessions still open).
//!
//! The storm fleets' line protocol is described in `CuratorStormFleet.java`;
//! zklock's fleet speaks it through a channel.
//!
//! Knobs: `ZK_STORM_CLIENTS` (50), `ZK_STORM_PER_LOCK` (5 clients per lock),
//! `ZK_STORM_NODES` (1,000), `ZK_BENCH_ROUNDS` (3), `ZK_STORM_SCENARIOS`
//! (`kill,cut,none`), `ZK_STORM_IMPLS` (`zklock,curator,kazoo`), `ZK_STORM_CUT_MS`
//! (1000), `ZK_COMPARE_PYTHON` (the python that imports kazoo).

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::env;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{
    bench_rounds, compile_java, env_usize, loadavg, JavaClasses, LineProcess, Spread, CURATOR_JARS,
};
use zklock::client::{Acl, CreateMode, KeeperState, WatchedEvent};
use zklock::lock::{InterProcessLock, LockEvent, ZkInterProcessWriteLock};
use zklock::recipes::tree_cache::TreeCache;
use zklock::testing::{four_letter, parse_mntr, FaultProxy, ScratchDir, ZkEnsemble};
use zklock::ZooKeeperWatcher;
use zklock::{zkutil, LoggingAbortable, ZkError, ZooKeeperListener, ZooKeeperNodeTracker};

const IMPLS: [&str; 3] = ["zklock", "Curator", "kazoo"];
const SESSION_TIMEOUT: Duration = Duration::from_secs(30);
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// The most one phase of a run may take before the run is given up.
const PHASE_BOUND: Duration = Duration::from_secs(180);
/// Children of each of the tree's 10 directories: 10 + 10 × 99 = 1,000 nodes.
const DIRS: usize = 10;
const KAZOO_SCRIPT: &str = "benches/python/kazoo_storm_fleet.py";
/// ZooKeeper's opcodes, by name, for the per-opcode counts.
const OPCODES: [(i32, &str); 21] = [
    (1, "create"),
    (2, "delete"),
    (3, "exists"),
    (4, "getData"),
    (5, "setData"),
    (6, "getACL"),
    (8, "getChildren"),
    (9, "sync"),
    (12, "getChildren2"),
    (13, "check"),
    (14, "multi"),
    (15, "create2"),
    (17, "checkWatches"),
    (18, "removeWatches"),
    (19, "createContainer"),
    (22, "multiRead"),
    (101, "setWatches"),
    (103, "getEphemerals"),
    (104, "getAllChildrenNumber"),
    (105, "setWatches2"),
    (106, "addWatch"),
];

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

// ---------------------------------------------------------------------------
// zklock's fleet: the line protocol through a channel
// ---------------------------------------------------------------------------

/// Tells a client's connection states as protocol lines.
struct ConnLines {
    i: usize,
    tx: Sender<String>,
}

impl ZooKeeperListener for ConnLines {
    fn connection_event(&self, event: &WatchedEvent) {
        let s = match event.keeper_state {
            KeeperState::Disconnected => "down",
            KeeperState::SyncConnected => "up",
            KeeperState::Expired => "lost",
            _ => return,
        };
        let _ = self.tx.send(format!("conn {} {s} {}", self.i, now_ns()));
    }
}

struct ZkMember {
    zkw: ZooKeeperWatcher,
    cache: TreeCache,
    tracker: ZooKeeperNodeTracker,
}

type Expected = Arc<Mutex<Option<Arc<(String, String, String)>>>>;

/// zklock's fleet: N sessions in this process, each with its cache, tracker
/// and lock thread; it answers the protocol's commands from `send`.
struct ZkFleet {
    connect: String,
    root: String,
    markers: PathBuf,
    tx: Sender<String>,
    members: Arc<Vec<ZkMember>>,
    expected: Expected,
    releasing: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl ZkFleet {
    fn new(connect: &str, root: &str, markers: &Path, tx: Sender<String>) -> ZkFleet {
        ZkFleet {
            connect: connect.to_string(),
            root: root.to_string(),
            markers: markers.to_path_buf(),
            tx,
            members: Arc::new(Vec::new()),
            expected: Arc::new(Mutex::new(None)),
            releasing: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        }
    }

    fn send(&mut self, line: &str) -> Result<(), String> {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first().copied() {
            Some("start") => {
                let n: usize = w[1].parse().map_err(|e| format!("start: {e}"))?;
                let per_lock: usize = w[2].parse().map_err(|e| format!("start: {e}"))?;
                self.start(n, per_lock)
            }
            Some("expect") => {
                *self.expected.lock().unwrap() = Some(Arc::new((
                    w[1].to_string(),
                    w[2].to_string(),
                    w[3].to_string(),
                )));
                Ok(())
            }
            Some("release") => {
                self.releasing.store(true, Ordering::SeqCst);
                Ok(())
            }
            _ => Err(format!("zklock fleet: unknown command {line:?}")),
        }
    }

    fn start(&mut self, n: usize, per_lock: usize) -> Result<(), String> {
        let mut members = Vec::with_capacity(n);
        for i in 0..n {
            let zkw = ZooKeeperWatcher::builder(&self.connect)
                .with_identifier(&format!("storm-{i}"))
                .with_session_timeout(SESSION_TIMEOUT)
                .connect()
                .map_err(|e| format!("zklock client {i}: {e}"))?;
            zkw.register_listener(Arc::new(ConnLines {
                i,
                tx: self.tx.clone(),
            }));
            let cache = TreeCache::start(&zkw, &format!("{}/tree", self.root))
                .map_err(|e| format!("zklock cache {i}: {e}"))?;
            let tracker = ZooKeeperNodeTracker::new(
                &zkw,
                &format!("{}/tracked", self.root),
                Arc::new(LoggingAbortable::new()),
            );
            tracker
                .start()
                .map_err(|e| format!("zklock tracker {i}: {e}"))?;
            members.push(ZkMember {
                zkw,
                cache,
                tracker,
            });
        }
        for (i, m) in members.iter().enumerate() {
            if !m
                .cache
                .wait_synced(PHASE_BOUND)
                .map_err(|e| format!("zklock cache {i}: {e}"))?
            {
                return Err(format!("zklock cache {i}: not loaded in {PHASE_BOUND:?}"));
            }
        }
        self.members = Arc::new(members);
        for i in 0..n {
            let lock = i / per_lock;
            let path = format!("{}/locks/l{lock}", self.root);
            let marker = self.markers.join(format!("l{lock}"));
            let zkw = self.members[i].zkw.clone();
            let tx = self.tx.clone();
            let releasing = self.releasing.clone();
            let stop = self.stop.clone();
            self.threads.push(
                thread::Builder::new()
                    .name(format!("storm-holder-{i}"))
                    .spawn(move || {
                        if let Err(e) = hold(i, &zkw, &path, &marker, &tx, &releasing, &stop) {
                            let _ = tx.send(format!("error client {i}: {e}"));
                        }
                    })
                    .map_err(|e| e.to_string())?,
            );
        }
        let members = self.members.clone();
        let expected = self.expected.clone();
        let stop = self.stop.clone();
        let tx = self.tx.clone();
        let root = self.root.clone();
        self.threads.push(
            thread::Builder::new()
                .name("storm-checker".into())
                .spawn(move || check(&members, &root, &expected, &stop, &tx))
                .map_err(|e| e.to_string())?,
        );
        let _ = self.tx.send("ready".into());
        Ok(())
    }
}

/// One client's lock: acquire, hold until `release`, release (the marker file
/// created on grant, removed before release).
fn hold(
    i: usize,
    zkw: &ZooKeeperWatcher,
    path: &str,
    marker: &Path,
    tx: &Sender<String>,
    releasing: &AtomicBool,
    stop: &AtomicBool,
) -> Result<(), String> {
    let events = Mutex::new(tx.clone());
    let lost_marker = marker.to_path_buf();
    let lock = ZkInterProcessWriteLock::new(zkw, path, format!("storm-{i}").as_bytes(), None)
        .map_err(|e| e.to_string())?
        .with_lock_listener(move |_path: &str, event: LockEvent| {
            let what = match event {
                LockEvent::InDoubt => "indoubt",
                LockEvent::Restored => "restored",
                LockEvent::Lost => "lost",
                _ => "other",
            };
            if event == LockEvent::Lost {
                // No longer the holder: the next one may be granted.
                let _ = std::fs::remove_file(&lost_marker);
            }
            let _ = events
                .lock()
                .unwrap()
                .send(format!("lock {i} {what} {}", now_ns()));
        });
    lock.acquire().map_err(|e| e.to_string())?;
    let _ = tx.send(format!("lock {i} acquired {}", now_ns()));
    if std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(marker)
        .is_err()
    {
        let _ = tx.send(format!(
            "overlap {i} {}",
            marker.file_name().unwrap().to_string_lossy()
        ));
    }
    while !releasing.load(Ordering::SeqCst) {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(5));
    }
    let _ = std::fs::remove_file(marker);
    let _ = tx.send(format!("lock {i} released {}", now_ns()));
    lock.release().map_err(|e| e.to_string())?;
    let _ = tx.send(format!("released-one {i}"));
    Ok(())
}

/// Reports each client once its cache and tracker show the expected state.
fn check(
    members: &[ZkMember],
    root: &str,
    expected: &Expected,
    stop: &AtomicBool,
    tx: &Sender<String>,
) {
    let mut reported: Vec<Option<Arc<(String, String, String)>>> = vec![None; members.len()];
    let n0 = format!("{root}/tree/d0/n0");
    while !stop.load(Ordering::SeqCst) {
        let e = expected.lock().unwrap().clone();
        if let Some(e) = e {
            for (i, m) in members.iter().enumerate() {
                if reported[i].as_ref().is_some_and(|r| Arc::ptr_eq(r, &e)) {
                    continue;
                }
                let stamp = e.0.as_bytes();
                let current = m.cache.get(&n0).is_some_and(|d| d.data == stamp)
                    && m.cache.get(&e.1).is_some()
                    && m.cache.get(&e.2).is_none()
                    && m.tracker.get_data(false).as_deref() == Some(stamp);
                if current {
                    reported[i] = Some(e.clone());
                    let _ = tx.send(format!("current {i} {}", now_ns()));
                }
            }
        }
        thread::sleep(Duration::from_millis(5));
    }
}

impl Drop for ZkFleet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for m in self.members.iter() {
            m.tracker.stop();
            let _ = m.zkw.close();
        }
    }
}

// ---------------------------------------------------------------------------
// A fleet of any implementation
// ---------------------------------------------------------------------------

enum Fleet {
    Zklock(ZkFleet, Receiver<String>),
    Process(LineProcess),
}

impl Fleet {
    fn send(&mut self, line: &str) -> Result<(), String> {
        match self {
            Fleet::Zklock(f, _) => f.send(line),
            Fleet::Process(p) => p.send(line),
        }
    }

    fn recv(&self, timeout: Duration) -> Result<String, String> {
        match self {
            Fleet::Zklock(_, rx) => rx
                .recv_timeout(timeout)
                .map_err(|e| format!("zklock fleet: {e}")),
            Fleet::Process(p) => p.recv(timeout),
        }
    }
}

/// What a fleet said, parsed.
#[derive(Debug, Clone)]
enum Said {
    Ready,
    Released,
    ReleasedOne,
    Conn(usize, String, i64),
    Lock(usize, String, i64),
    Current(usize, i64),
    Overlap(String),
    Error(String),
}

fn parse(line: &str) -> Said {
    let w: Vec<&str> = line.split_whitespace().collect();
    let num = |k: usize| w.get(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
    match w.first().copied() {
        Some("ready") => Said::Ready,
        Some("released") => Said::Released,
        Some("released-one") => Said::ReleasedOne,
        Some("conn") if w.len() >= 4 => Said::Conn(num(1) as usize, w[2].into(), num(3)),
        Some("lock") if w.len() >= 4 => Said::Lock(num(1) as usize, w[2].into(), num(3)),
        Some("current") if w.len() >= 3 => Said::Current(num(1) as usize, num(2)),
        Some("overlap") => Said::Overlap(line.to_string()),
        _ => Said::Error(line.to_string()),
    }
}

/// Everything a fleet said so far.
#[derive(Default)]
struct Log {
    said: Vec<Said>,
    released_ones: usize,
}

impl Log {
    /// Reads lines until `done` holds (checked after each line and every
    /// 50 ms), at most `bound`.
    fn until(
        &mut self,
        fleet: &Fleet,
        bound: Duration,
        what: &str,
        mut done: impl FnMut(&Log) -> bool,
    ) -> Result<(), String> {
        let end = Instant::now() + bound;
        while !done(self) {
            if Instant::now() >= end {
                return Err(format!("{what}: not within {bound:?}"));
            }
            match fleet.recv(Duration::from_millis(50)) {
                Ok(line) => {
                    let s = parse(&line);
                    match &s {
                        Said::Error(e) => println!("  fleet: {e}"),
                        Said::Overlap(e) => println!("  OVERLAP: {e}"),
                        Said::ReleasedOne => self.released_ones += 1,
                        _ => {}
                    }
                    self.said.push(s);
                }
                Err(e)
                    if e.contains("no answer")
                        || e.contains("Timeout")
                        || e.contains("timed out") => {}
                Err(e) => return Err(format!("{what}: {e}")),
            }
        }
        Ok(())
    }

    fn has(&self, f: impl Fn(&Said) -> bool) -> bool {
        self.said.iter().any(f)
    }
}

// ---------------------------------------------------------------------------
// Sampling the members
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Sample {
    t: i64,
    /// Per member: (zk_packets_received, zk_connection_request_count), `None`
    /// when it did not answer (killed).
    members: Vec<Option<(u64, u64)>>,
}

fn read_member(addr: &str) -> Option<(u64, u64)> {
    let m = parse_mntr(&four_letter(addr, "mntr").ok()?);
    let get = |k: &str| m.get(k).and_then(|v| v.parse::<u64>().ok());
    Some((
        get("zk_packets_received")?,
        get("zk_connection_request_count").unwrap_or(0),
    ))
}

fn sample(addrs: &[String]) -> Sample {
    Sample {
        t: now_ns(),
        members: addrs.iter().map(|a| read_member(a)).collect(),
    }
}

/// Reads every member every 100 ms on a thread until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Sample>>>,
}

impl Sampler {
    fn start(addrs: Vec<String>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::spawn(move || {
            let mut out = Vec::new();
            let mut next = Instant::now();
            while !s.load(Ordering::SeqCst) {
                out.push(sample(&addrs));
                next += SAMPLE_EVERY;
                let now = Instant::now();
                if next > now {
                    thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
            out
        });
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap_or_default()
    }
}

// ---------------------------------------------------------------------------
// One run: one implementation, one scenario
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Scenario {
    Kill,
    Cut,
    /// No fault: the changes alone (the control).
    None,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Kill => "kill the leader",
            Scenario::Cut => "cut and heal one member's clients",
            Scenario::None => "no fault, the changes alone (control)",
        }
    }
}

#[derive(Default, Clone, Debug)]
struct Figures {
    clients_hit: usize,
    /// Connections made (the client told "up") after the fault, per client cut off.
    ups_per_client: f64,
    requests_mntr: f64,
    requests_proxy: f64,
    opcodes: BTreeMap<&'static str, f64>,
    peak_conns: f64,
    peak_reqs: f64,
    election: f64,
    holders: f64,
    holders_n: usize,
    caches: f64,
    steady: f64,
    reconnect_p50: f64,
    reconnect_p90: f64,
    reconnect_last: f64,
    reconnect_first: f64,
    peak_reconnects_100ms: usize,
    overlaps: usize,
    orphans: usize,
    lost: usize,
}

struct Ctx {
    ensemble: ZkEnsemble,
    proxies: Arc<Vec<FaultProxy>>,
    admin: ZooKeeperWatcher,
    n: usize,
    per_lock: usize,
    nodes: usize,
    cut_for: Duration,
    java: Option<JavaClasses>,
    python: Option<PathBuf>,
    /// packets one `mntr` read adds on a member.
    mntr_cost: u64,
}

impl Ctx {
    fn addrs(&self) -> Vec<String> {
        (0..self.ensemble.size())
            .map(|i| self.ensemble.address(i))
            .collect()
    }

    fn fleet_connect(&self) -> String {
        self.proxies
            .iter()
            .map(FaultProxy::connect_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    fn opcode_counts(&self) -> HashMap<i32, u64> {
        OPCODES
            .iter()
            .map(|&(op, _)| (op, self.proxies.iter().map(|p| p.requests(op)).sum()))
            .collect()
    }
}

/// Retries `f` while the connection is down (the bench's own writes across the
/// fault), at most `PHASE_BOUND`.
fn retrying<T>(what: &str, mut f: impl FnMut() -> zklock::Result<T>) -> T {
    let end = Instant::now() + PHASE_BOUND;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() < end && e.is_retryable() => {
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// The tree (`DIRS` directories, `nodes` nodes in all), the tracked node and the
/// lock directories, created with pipelined requests.
fn make_tree(ctx: &Ctx, root: &str, locks: usize) {
    let zk = ctx.admin.zookeeper();
    let _ = zkutil::delete_node_recursively(&ctx.admin, root);
    zkutil::create_with_parents(&ctx.admin, &format!("{root}/locks")).expect("lock root");
    let mut paths = vec![format!("{root}/tree"), format!("{root}/tracked")];
    paths.extend((0..locks).map(|l| format!("{root}/locks/l{l}")));
    paths.extend((0..DIRS).map(|d| format!("{root}/tree/d{d}")));
    let per_dir = ctx.nodes.saturating_sub(DIRS) / DIRS;
    for d in 0..DIRS {
        paths.extend((0..per_dir).map(|c| format!("{root}/tree/d{d}/n{c}")));
    }
    // Parents first: the directories are created (in order on one session)
    // before their children.
    let (tx, rx) = mpsc::channel();
    for p in &paths {
        let tx = tx.clone();
        zk.create_async(
            p,
            b"0",
            Acl::open_unsafe(),
            CreateMode::Persistent,
            move |r| {
                let _ = tx.send(r.map(drop));
            },
        );
    }
    for _ in &paths {
        rx.recv_timeout(PHASE_BOUND)
            .expect("create answered")
            .expect("create a tree node");
    }
}

fn spawn_fleet(ctx: &Ctx, imp: usize, root: &str, markers: &Path) -> Result<Fleet, String> {
    let connect = ctx.fleet_connect();
    match imp {
        0 => {
            let (tx, rx) = mpsc::channel();
            Ok(Fleet::Zklock(ZkFleet::new(&connect, root, markers, tx), rx))
        }
        1 => {
            let java = ctx.java.as_ref().ok_or("Curator not available")?;
            let mut cmd = java.java(&["-Xss512k"], "CuratorStormFleet");
            cmd.arg(&connect).arg(root).arg(markers);
            LineProcess::spawn("Curator fleet", cmd)
                .map(Fleet::Process)
                .map_err(|e| e.to_string())
        }
        _ => {
            let python = ctx.python.as_ref().ok_or("kazoo not available")?;
            let mut cmd = Command::new(python);
            cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(KAZOO_SCRIPT))
                .arg(&connect)
                .arg(root)
                .arg(markers);
            LineProcess::spawn("kazoo fleet", cmd)
                .map(Fleet::Process)
                .map_err(|e| e.to_string())
        }
    }
}

fn lock_nodes(ctx: &Ctx, root: &str, locks: usize) -> usize {
    (0..locks)
        .map(|l| {
            ctx.admin
                .zookeeper()
                .get_children(&format!("{root}/locks/l{l}"), false)
                .map_or(0, |c| c.len())
        })
        .sum()
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

fn run(ctx: &mut Ctx, imp: usize, scenario: Scenario, round: usize) -> Result<Figures, String> {
    let short = ["zklock", "curator", "kazoo"][imp];
    let sc = match scenario {
        Scenario::Kill => "kill",
        Scenario::Cut => "cut",
        Scenario::None => "none",
    };
    let root = format!("/storm/{short}-{sc}-{round}");
    let n = ctx.n;
    let locks = n.div_ceil(ctx.per_lock);
    make_tree(ctx, &root, locks);
    let markers = ScratchDir::new("storm-markers").map_err(|e| e.to_string())?;
    let mut fleet = spawn_fleet(ctx, imp, &root, markers.path())?;
    let mut log = Log::default();
    let started = Instant::now();
    fleet.send(&format!("start {n} {}", ctx.per_lock))?;
    log.until(&fleet, PHASE_BOUND, "fleet ready", |l| {
        l.has(|s| matches!(s, Said::Ready))
    })?;
    let load_time = started.elapsed();
    // Every lock has its holder and every waiter its node.
    let end = Instant::now() + PHASE_BOUND;
    loop {
        log.until(&fleet, Duration::from_millis(100), "", |_| false)
            .ok();
        let holders = log
            .said
            .iter()
            .filter(|s| matches!(s, Said::Lock(_, w, _) if w == "acquired"))
            .count();
        if holders >= locks && lock_nodes(ctx, &root, locks) >= n {
            break;
        }
        if Instant::now() >= end {
            return Err(format!(
                "locks not queued: {holders} holders, {} nodes",
                lock_nodes(ctx, &root, locks)
            ));
        }
    }
    let stamp = format!("s{round}{sc}{short}");
    let created = format!("{root}/tree/d9/x-{stamp}");
    let deleted = format!("{root}/tree/d5/n{}", round % 99);
    fleet.send(&format!("expect {stamp} {created} {deleted}"))?;
    // The pre-fault rate (the fleet's pings and the sampler's reads).
    let addrs = ctx.addrs();
    let sampler = Sampler::start(addrs.clone());
    log.until(&fleet, Duration::from_secs(2), "", |_| false)
        .ok();
    let holders_at_fault: HashSet<usize> = {
        let mut h = HashSet::new();
        for s in &log.said {
            if let Said::Lock(i, w, _) = s {
                if w == "acquired" {
                    h.insert(*i);
                }
            }
        }
        h
    };
    let ops_before = ctx.opcode_counts();
    let t0 = now_ns();
    let said_before = log.said.len();
    // The fault.
    let (survivors, killed): (Vec<usize>, Option<usize>) = match scenario {
        Scenario::Kill => {
            let leader = ctx.ensemble.leader().ok_or("no leader")?;
            ctx.ensemble.kill(leader).map_err(|e| e.to_string())?;
            (
                (0..ctx.ensemble.size()).filter(|&i| i != leader).collect(),
                Some(leader),
            )
        }
        Scenario::Cut => {
            let m = (0..ctx.proxies.len())
                .max_by_key(|&i| ctx.proxies[i].connections())
                .unwrap();
            let dead = {
                let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
                l.local_addr().map_err(|e| e.to_string())?
            };
            ctx.proxies[m].set_target(dead).map_err(|e| e.to_string())?;
            ctx.proxies[m].cut();
            let heal_at = Instant::now() + ctx.cut_for;
            let proxies = ctx.proxies.clone();
            let target = ctx.ensemble.address(m);
            thread::spawn(move || {
                thread::sleep(heal_at.saturating_duration_since(Instant::now()));
                let _ = proxies[m].set_target(target);
            });
            ((0..ctx.ensemble.size()).collect(), None)
        }
        Scenario::None => ((0..ctx.ensemble.size()).collect(), None),
    };
    if scenario == Scenario::Kill {
        ctx.ensemble
            .wait_for_quorum(PHASE_BOUND)
            .map_err(|e| e.to_string())?;
    }
    let t_quorum = now_ns();
    // The changes every cache must show.
    let zk = ctx.admin.zookeeper();
    retrying("set n0", || {
        zk.set_data(&format!("{root}/tree/d0/n0"), stamp.as_bytes(), None)
    });
    retrying("create", || {
        match zk.create(&created, b"x", Acl::open_unsafe(), CreateMode::Persistent) {
            Err(e) if e.is(ZkError::NodeExists) => Ok(String::new()),
            r => r,
        }
    });
    retrying("delete", || match zk.delete(&deleted, None) {
        Err(e) if e.is(ZkError::NoNode) => Ok(()),
        r => r,
    });
    retrying("set tracked", || {
        zk.set_data(&format!("{root}/tracked"), stamp.as_bytes(), None)
    });
    // Until every client is current, every holder told, every client that lost
    // its connection back (or lost).
    let done = |l: &Log| {
        let after = &l.said[said_before..];
        let current: HashSet<usize> = after
            .iter()
            .filter_map(|s| match s {
                Said::Current(i, _) => Some(*i),
                _ => None,
            })
            .collect();
        let mut down = HashSet::new();
        let mut back = HashSet::new();
        let mut told = HashSet::new();
        for s in after {
            match s {
                Said::Conn(i, w, _) if w == "down" => {
                    down.insert(*i);
                }
                Said::Conn(i, w, _) if w == "up" || w == "lost" => {
                    back.insert(*i);
                }
                Said::Lock(i, w, _) if w == "restored" || w == "lost" => {
                    told.insert(*i);
                }
                _ => {}
            }
        }
        let hit_holders: Vec<&usize> = holders_at_fault
            .iter()
            .filter(|i| down.contains(i))
            .collect();
        current.len() >= n
            && down.iter().all(|i| back.contains(i))
            && hit_holders.iter().all(|i| told.contains(i))
    };
    let outcome = log.until(&fleet, PHASE_BOUND, "caches current and holders told", done);
    // Then until the members' request rate stays at the fleet's pings (plus
    // 100 requests/s) for 1 s, read every 250 ms, at most 30 s.
    log.until(&fleet, Duration::from_secs(1), "", |_| false)
        .ok();
    let mut quiet_from = Instant::now();
    let settle_end = Instant::now() + Duration::from_secs(30);
    let mut last = sample(&addrs);
    while Instant::now() < settle_end {
        log.until(&fleet, Duration::from_millis(250), "", |_| false)
            .ok();
        let s = sample(&addrs);
        let rate = rate_between(&last, &s, &survivors, ctx.mntr_cost);
        last = s;
        // A fleet's pings: about n / (timeout / 3) a second; the sampler's reads.
        let ping_rate = n as f64 / (SESSION_TIMEOUT.as_secs_f64() / 3.0) + 100.0;
        if rate > ping_rate {
            quiet_from = Instant::now();
        } else if quiet_from.elapsed() >= Duration::from_secs(1) {
            break;
        }
    }
    let t_steady = now_ns();
    let samples = sampler.finish();
    let ops_after = ctx.opcode_counts();
    if let Err(e) = outcome {
        println!("  {} {}: {e}", IMPLS[imp], scenario.name());
    }

    // Figures.
    let mut f = Figures::default();
    let before: Vec<&Sample> = samples.iter().filter(|s| s.t < t0).collect();
    let (Some(first), Some(at_fault)) = (before.first(), before.last()) else {
        return Err("no samples before the fault".into());
    };
    let baseline_secs = secs(at_fault.t - first.t).max(0.1);
    let baseline_pkts: f64 = (0..addrs.len())
        .filter_map(|m| Some(at_fault.members[m]?.0 as f64 - first.members[m]?.0 as f64))
        .sum::<f64>()
        - (before.len() as f64 - 1.0) * ctx.mntr_cost as f64 * addrs.len() as f64;
    let ping_rate = (baseline_pkts / baseline_secs).max(0.0);
    let end_sample = samples
        .iter()
        .rev()
        .find(|s| s.t <= t_steady)
        .unwrap_or(at_fault);
    let window = secs(end_sample.t - at_fault.t);
    let reads = samples
        .iter()
        .filter(|s| s.t > at_fault.t && s.t <= end_sample.t)
        .count() as f64;
    // A follower that loses its leader starts a new server instance when it
    // rejoins, whose counters start from zero: sum the increases between
    // consecutive samples, a drop counting as a restart from zero.
    let window_samples: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.t >= at_fault.t && s.t <= end_sample.t)
        .collect();
    let delta: f64 = window_samples
        .windows(2)
        .map(|w| {
            survivors
                .iter()
                .filter_map(|&m| Some(increase(w[0].members[m]?.0, w[1].members[m]?.0) as f64))
                .sum::<f64>()
        })
        .sum();
    let net =
        delta - reads * ctx.mntr_cost as f64 * survivors.len() as f64 - ping_rate * window - 4.0;
    f.requests_mntr = net / n as f64;
    let mut total = 0.0;
    for &(op, name) in OPCODES.iter() {
        let d = ops_after[&op].saturating_sub(ops_before[&op]) as f64;
        if d > 0.0 {
            f.opcodes.insert(name, d / n as f64);
            total += d;
        }
    }
    f.requests_proxy = total / n as f64;
    // Peaks over the surviving members, 100 ms apart.
    let after: Vec<&Sample> = samples.iter().filter(|s| s.t >= at_fault.t).collect();
    for w in after.windows(2) {
        let dt = secs(w[1].t - w[0].t).max(0.01);
        let (mut p, mut c) = (0.0, 0.0);
        for &m in &survivors {
            if let (Some(a), Some(b)) = (w[0].members[m], w[1].members[m]) {
                p += increase(a.0, b.0).saturating_sub(ctx.mntr_cost) as f64;
                c += increase(a.1, b.1) as f64;
            }
        }
        f.peak_reqs = f.peak_reqs.max(p / dt);
        f.peak_conns = f.peak_conns.max(c / dt);
    }
    f.election = if killed.is_some() {
        secs(t_quorum - t0)
    } else {
        f64::NAN
    };
    f.steady = secs(t_steady - t0);
    // Per client: first down, first up after it; holders told; caches current.
    let after = &log.said[said_before..];
    let mut down: HashMap<usize, i64> = HashMap::new();
    let mut up: HashMap<usize, i64> = HashMap::new();
    let mut told: HashMap<usize, i64> = HashMap::new();
    let mut current: HashMap<usize, i64> = HashMap::new();
    let mut ups = 0usize;
    for s in after {
        match s {
            Said::Conn(i, w, t) if w == "down" => {
                down.entry(*i).or_insert(*t);
            }
            Said::Conn(i, w, t) if w == "up" && down.contains_key(i) => {
                up.entry(*i).or_insert(*t);
                ups += 1;
            }
            Said::Conn(_, w, _) if w == "lost" => f.lost += 1,
            Said::Lock(i, w, t) if w == "restored" || w == "lost" => {
                told.entry(*i).or_insert(*t);
            }
            Said::Current(i, t) => {
                current.entry(*i).or_insert(*t);
            }
            _ => {}
        }
    }
    f.clients_hit = down.len();
    f.ups_per_client = ups as f64 / down.len().max(1) as f64;
    let hit_holders: Vec<usize> = holders_at_fault
        .iter()
        .copied()
        .filter(|i| down.contains_key(i))
        .collect();
    f.holders_n = hit_holders.len();
    // NaN (left out of the table) when no holder lost its connection, or one
    // was never told.
    f.holders = if hit_holders.is_empty() || hit_holders.iter().any(|i| !told.contains_key(i)) {
        f64::NAN
    } else {
        hit_holders
            .iter()
            .map(|i| secs(told[i] - t0))
            .fold(0.0, f64::max)
    };
    f.caches = current.values().map(|t| secs(t - t0)).fold(0.0, f64::max);
    if current.len() < n {
        f.caches = f64::NAN;
    }
    let mut ups: Vec<f64> = up.values().map(|t| secs(t - t0)).collect();
    ups.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if !ups.is_empty() {
        let pick = |p: f64| ups[((ups.len() - 1) as f64 * p).round() as usize];
        f.reconnect_first = ups[0];
        f.reconnect_p50 = pick(0.5);
        f.reconnect_p90 = pick(0.9);
        f.reconnect_last = ups[ups.len() - 1];
        let mut j = 0;
        for k in 0..ups.len() {
            while ups[k] - ups[j] >= 0.1 {
                j += 1;
            }
            f.peak_reconnects_100ms = f.peak_reconnects_100ms.max(k - j + 1);
        }
    } else {
        // No reconnection (the control): left out of the table.
        f.reconnect_first = f64::NAN;
        f.reconnect_p50 = f64::NAN;
        f.reconnect_p90 = f64::NAN;
        f.reconnect_last = f64::NAN;
    }

    // Safety: release everything, count overlaps and orphans.
    fleet.send("release")?;
    let release = log.until(
        &fleet,
        PHASE_BOUND,
        "every client granted and released",
        |l| l.has(|s| matches!(s, Said::Released)) || l.released_ones >= n,
    );
    if let Err(e) = release {
        println!("  {} {}: {e}", IMPLS[imp], scenario.name());
    }
    f.overlaps = log
        .said
        .iter()
        .filter(|s| matches!(s, Said::Overlap(_)))
        .count();
    f.orphans = lock_nodes(ctx, &root, locks);
    if f.orphans > 0 {
        for l in 0..locks {
            let left = ctx
                .admin
                .zookeeper()
                .get_children(&format!("{root}/locks/l{l}"), false)
                .unwrap_or_default();
            if !left.is_empty() {
                println!(
                    "  {} {}: orphans under locks/l{l}: {left:?}",
                    IMPLS[imp],
                    scenario.name()
                );
            }
        }
    }
    drop(fleet);
    println!(
        "  round {round} {:8} {:34} loaded in {:.1} s; {} of {n} clients cut off; \
         {:.0} requests/client (proxies {:.0}); caches current after {:.2} s; holders told after {:.2} s",
        IMPLS[imp],
        scenario.name(),
        load_time.as_secs_f64(),
        f.clients_hit,
        f.requests_mntr,
        f.requests_proxy,
        f.caches,
        f.holders
    );
    // Back to a whole ensemble, and clean.
    if let Some(k) = killed {
        ctx.ensemble.restart(k).map_err(|e| e.to_string())?;
        ctx.ensemble
            .wait_for_quorum(PHASE_BOUND)
            .map_err(|e| e.to_string())?;
    }
    retrying("delete the tree", || {
        zkutil::delete_node_recursively(&ctx.admin, &root)
    });
    Ok(f)
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

/// How much a counter grew from `a` to `b`; a drop is a restart from zero.
fn increase(a: u64, b: u64) -> u64 {
    if b >= a {
        b - a
    } else {
        b
    }
}

fn rate_between(a: &Sample, b: &Sample, members: &[usize], cost: u64) -> f64 {
    let dt = secs(b.t - a.t).max(0.01);
    let p: u64 = members
        .iter()
        .filter_map(|&m| Some(increase(a.members[m]?.0, b.members[m]?.0).saturating_sub(cost)))
        .sum();
    p as f64 / dt
}

fn main() {
    if env::args().any(|a| a == "--list") {
        return;
    }
    // RUST_LOG=zklock=debug shows zklock's connections (nothing by default).
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("off"))
        .try_init();
    let n = env_usize("ZK_STORM_CLIENTS", 50).max(1);
    let per_lock = env_usize("ZK_STORM_PER_LOCK", 5).max(1);
    let nodes = env_usize("ZK_STORM_NODES", 1000).max(DIRS * 2);
    let rounds = bench_rounds(3);
    let cut_for = Duration::from_millis(env_usize("ZK_STORM_CUT_MS", 1000) as u64);
    let scenarios: Vec<Scenario> = env::var("ZK_STORM_SCENARIOS")
        .unwrap_or_else(|_| "kill,cut,none".into())
        .split(',')
        .filter_map(|s| match s.trim() {
            "kill" => Some(Scenario::Kill),
            "cut" => Some(Scenario::Cut),
            "none" => Some(Scenario::None),
            _ => None,
        })
        .collect();
    let impls_wanted = env::var("ZK_STORM_IMPLS").unwrap_or_else(|_| "zklock,curator,kazoo".into());
    let mut impls: Vec<usize> = Vec::new();
    for (i, name) in ["zklock", "curator", "kazoo"].iter().enumerate() {
        if impls_wanted.split(',').any(|w| w.trim() == *name) {
            impls.push(i);
        }
    }

    println!(
        "storm: {n} clients per implementation ({per_lock} per write lock), a tree cache of {nodes} \
         nodes and a tracked node each; 3-member ensemble on loopback; {rounds} round(s); \
         {} cores, load {} at start",
        thread::available_parallelism().map_or(0, |p| p.get()),
        loadavg()
    );
    let java = if impls.contains(&1) {
        match compile_java(
            "storm",
            &["benches/java/CuratorStormFleet.java"],
            &CURATOR_JARS,
        ) {
            Ok(c) => Some(c),
            Err(e) => {
                println!("NOTE: Curator skipped ({e}); install it with `make curator`.");
                None
            }
        }
    } else {
        None
    };
    let python = if impls.contains(&2) {
        common::kazoo_python_if_installed()
    } else {
        None
    };
    let ensemble = ZkEnsemble::start().expect("a three-member ensemble");
    let proxies: Vec<FaultProxy> = (0..ensemble.size())
        .map(|i| FaultProxy::start(ensemble.address(i)).expect("a proxy"))
        .collect();
    let admin = ZooKeeperWatcher::builder(&ensemble.connect_string())
        .with_identifier("storm-admin")
        .with_session_timeout(SESSION_TIMEOUT)
        .connect()
        .expect("the bench's session");
    // What one mntr read adds to a member's zk_packets_received.
    let a = ensemble.address(0);
    let first = read_member(&a).map_or(0, |m| m.0);
    let mut last = first;
    for _ in 0..5 {
        last = read_member(&a).map_or(0, |m| m.0);
    }
    let mntr_cost = (last - first) / 5;
    if let Ok(r) = four_letter(&a, "mntr") {
        if !parse_mntr(&r).contains_key("zk_connection_request_count") {
            println!("NOTE: no zk_connection_request_count in mntr: peak connections/s reads 0");
        }
    }
    let mut ctx = Ctx {
        ensemble,
        proxies: Arc::new(proxies),
        admin,
        n,
        per_lock,
        nodes,
        cut_for,
        java,
        python,
        mntr_cost,
    };

    let mut results: HashMap<(usize, Scenario), Vec<Figures>> = HashMap::new();
    for round in 0..rounds {
        for &scenario in &scenarios {
            for &imp in &impls {
                match run(&mut ctx, imp, scenario, round) {
                    Ok(f) => results.entry((imp, scenario)).or_default().push(f),
                    Err(e) => println!(
                        "  round {round} {} {}: FAILED: {e}",
                        IMPLS[imp],
                        scenario.name()
                    ),
                }
            }
        }
    }
    for &scenario in &scenarios {
        print_table(&results, scenario, &impls, n);
    }
    println!("load at the end: {}", loadavg());
}

fn print_table(
    results: &HashMap<(usize, Scenario), Vec<Figures>>,
    scenario: Scenario,
    impls: &[usize],
    n: usize,
) {
    println!();
    println!(
        "== {} ({n} clients each; median (min–max) over rounds) ==",
        scenario.name()
    );
    let header: Vec<String> = impls.iter().map(|&i| IMPLS[i].to_string()).collect();
    println!("{:44} | {}", "", header.join(" | "));
    let row = |label: &str, digits: usize, get: &dyn Fn(&Figures) -> f64| {
        let cells: Vec<String> = impls
            .iter()
            .map(|&i| {
                let v: Vec<f64> = results
                    .get(&(i, scenario))
                    .map(|fs| fs.iter().map(get).filter(|x| x.is_finite()).collect())
                    .unwrap_or_default();
                let rounds = results.get(&(i, scenario)).map_or(0, Vec::len);
                match Spread::of(&v) {
                    Some(s) if v.len() == rounds => s.text(digits),
                    Some(s) => format!("{} [{} of {rounds} rounds]", s.text(digits), v.len()),
                    None => "—".to_string(),
                }
            })
            .collect();
        println!("{label:44} | {}", cells.join(" | "));
    };
    row("clients cut off", 0, &|f| f.clients_hit as f64);
    row("reconnections told per client cut off", 2, &|f| {
        f.ups_per_client
    });
    row("requests/client until steady (mntr)", 1, &|f| {
        f.requests_mntr
    });
    row("requests/client (proxies, no pings)", 1, &|f| {
        f.requests_proxy
    });
    row("peak connections/s, surviving members", 0, &|f| {
        f.peak_conns
    });
    row("peak requests/s, surviving members", 0, &|f| f.peak_reqs);
    row("new leader serving after (s)", 2, &|f| f.election);
    row("holders cut off", 0, &|f| f.holders_n as f64);
    row("every holder told restored/lost after (s)", 2, &|f| {
        f.holders
    });
    row("every cache + tracker current after (s)", 2, &|f| f.caches);
    row("steady after (s)", 2, &|f| f.steady);
    row("reconnects: first (s)", 2, &|f| f.reconnect_first);
    row("reconnects: median (s)", 2, &|f| f.reconnect_p50);
    row("reconnects: p90 (s)", 2, &|f| f.reconnect_p90);
    row("reconnects: last (s)", 2, &|f| f.reconnect_last);
    row("reconnects: most in any 100 ms", 0, &|f| {
        f.peak_reconnects_100ms as f64
    });
    row("sessions lost", 0, &|f| f.lost as f64);
    row("overlaps (mutual exclusion broken)", 0, &|f| {
        f.overlaps as f64
    });
    row("orphan lock nodes after release", 0, &|f| f.orphans as f64);
    // Where the requests went, per client (the proxies' counts).
    let mut names: Vec<&'static str> = Vec::new();
    for &i in impls {
        for f in results.get(&(i, scenario)).into_iter().flatten() {
            for k in f.opcodes.keys() {
                if !names.contains(k) {
                    names.push(k);
                }
            }
        }
    }
    for name in names {
        let label = format!("  per client: {name}");
        row(&label, 1, &|f| f.opcodes.get(name).copied().unwrap_or(0.0));
    }
}
