//! zklock's locks side by side with Apache Curator 5.4's (issue 16) and kazoo's
//! (Python, 2.11): prints figures and zklock's ratio over each; asserts only
//! that the locks work and that nothing is left behind.
//!
//! `cargo bench --all-features --bench compare` (or `make bench`, which installs
//! Curator and kazoo first: `make curator`, `make kazoo`). Uses `$ZK_SERVERS` if
//! set (the request counts then include every other client of those servers),
//! else starts a ZooKeeper server through `zklock::testing`. The Java side is
//! `benches/java/CuratorLockBench.java`, compiled at run time with `javac`
//! against Debian's jars in `/usr/share/java` (`libcurator-recipes-java` brings
//! Curator 5.4 and Guava; ZooKeeper's jars come with `zookeeper`). Without them
//! (or without a JDK) the bench prints a note and leaves the Curator column
//! empty; without `zookeeper-recipes-lock.jar` only the last column is skipped.
//! The Python side is `benches/python/kazoo_lock_bench.py`, which speaks the
//! Java bench's line protocol, run by `$ZK_COMPARE_PYTHON` or else by
//! `target/kazoo-venv/bin/python`, the venv that `make kazoo` makes (`python3 -m
//! venv`, then `pip install kazoo==2.11.0` from PyPI). When that python cannot
//! be started or cannot import kazoo, the bench prints a note and leaves the
//! kazoo column empty.
//!
//! The libraries work on the same server, each under a directory of its own
//! below one root znode (`/zklock-compare-<pid>`), every session with a 30 s
//! timeout, and take turns: a zklock round, a Curator round, a kazoo round, a
//! zklock round, ... (a shared machine's speed drifts severalfold within
//! seconds; alternating short rounds puts them all under the same conditions). A
//! rate or a median cycle is the median over the rounds; its ratio is the median
//! of the per-round ratios (each zklock round against the Curator or kazoo round
//! that follows it in the same turn). Before the rounds all warm up, zklock and kazoo with the
//! same number of cycles as the JVM's JIT gets: uncontended cycles, then one
//! unreported round of each contended scenario.
//!
//! 1. **Uncontended**: one thread, one session, acquire + release in a loop,
//!    each cycle timed: cycles/s and the median (p50) cycle. zklock's write lock
//!    against Curator's `InterProcessMutex` and kazoo's `Lock` (exclusive locks),
//!    and against the write lock of Curator's `InterProcessReadWriteLock` and
//!    kazoo's `WriteLock`; zklock's read lock against Curator's read lock and
//!    kazoo's `ReadLock`. Each lock instance is kept across the rounds.
//! 2. **Threads**: `ZK_COMPARE_THREADS` threads of one process, one session
//!    (one `ZooKeeperWatcher`; one `CuratorFramework`; one `KazooClient`, which
//!    is thread-safe, with its default threading handler), each thread with its
//!    own write-lock instance (`InterProcessMutex`, kazoo `Lock`) on one lock
//!    znode, acquire + release until the round's time is up: grants (hand-offs)
//!    per second. Python's threads share its GIL.
//! 3. **Processes**: `ZK_COMPARE_PROCESSES` processes per library, each with its
//!    own session and lock instance, contending on one lock znode: grants/s in
//!    total. zklock's are this bench binary re-executed as a worker
//!    (`ZKLOCK_COMPARE_WORKER` names the lock znode); Curator's are JVMs running
//!    the Java bench's worker mode, kazoo's Pythons running the Python bench's.
//!    Every worker is started, connected and says `ready` before the first
//!    round (start-up is outside the timing), then warms up: a JVM's JIT needs
//!    it, the others do the same. The workers warm up in pairs, each pair on
//!    a lock znode of its own, `ZK_COMPARE_WORKER_WARMUP` acquire + release
//!    cycles each, so that both the immediate grant and the queued one (watch,
//!    wake-up) run hot in every process. A round is a `go <ms>` line
//!    to each, answered with its grants and the time from `go` to its last
//!    release; the rate is the sum of the grants over the longest of those times.
//! 4. **Readers**: `ZK_COMPARE_READERS` threads of one session take the read
//!    lock of one znode concurrently in a loop: read grants/s.
//! 5. **Requests and notifications**: every round runs inside a window of the
//!    server's `mntr` counters, read before and after (summed over the servers of
//!    the connect string): `zk_packets_received` counts the requests (pings
//!    included), `zk_packets_sent` − `zk_packets_received` the notifications
//!    (every request and ping is answered once). The packets the two `mntr`
//!    reads add are measured at start and subtracted (what a read adds to
//!    `zk_packets_sent` is 2 or 3 from one run to the next, so what a window with
//!    requests in it counts sent beyond their replies is measured too, around
//!    plain `exists` reads, which have no notification, and subtracted); the pings
//!    that may fall in a window (every session pings at least every sixth of its
//!    timeout) are inside the counts and printed as an allowance. Printed per cycle for the uncontended forms, per
//!    grant for the contended scenarios, and per hand-off for a **two-party
//!    hand-off**: two instances (two threads, one session) pass a write lock back
//!    and forth, each holder releasing only once the other's watch on its node is
//!    set (zklock: the lock's step hook; Curator: its `AdvancedTracerDriver`,
//!    which sees the waiter's `getData` with a watcher once the server answered;
//!    kazoo, which has no tracer: each of its two `Lock`s is given a proxy of
//!    the client whose `get` with a watcher tells the other thread once it
//!    returned), so that every grant but the first is a queued hand-off. The
//!    first grant's create + getChildren and the last release's delete are
//!    outside the hand-offs and subtracted (3 per round; 5 for kazoo, whose two
//!    new `Lock`s each check with an `exists` that the lock znode is there at
//!    their first acquire). The floor: 5 requests (the waiter's
//!    create, getChildren and watch on its predecessor; the holder's delete; the
//!    woken waiter's getChildren) and 1 notification.
//!
//!    kazoo's `Lock` (and its `WriteLock` and `ReadLock`) does 4 requests per
//!    uncontended cycle where the others do 3 (create, getChildren, delete):
//!    from its second acquire on, an instance first lists the lock znode's
//!    children to look for a node of its own that an earlier create may have
//!    left (its `create_tried` flag, set at the first acquire, is never reset,
//!    so `_find_node` runs at every acquire after the first), hence 6 per
//!    contended grant or hand-off where the floor is 5. A new instance's first
//!    acquire also checks once that the lock znode exists (`ensure_path`).
//!
//!    Each round also reads the CPU time (user + system, `/proc/<pid>/stat`, 10 ms
//!    ticks) of the library's processes before and after: zklock's bench process
//!    (its sessions' threads and the lock threads; its main thread otherwise only
//!    waits) or its workers, Curator's JVM or JVMs (JIT and GC included), kazoo's
//!    Python process or processes: client CPU per cycle, grant or hand-off.
//! 6. **Summary**: a markdown table, scenario | zklock | Curator | ratio
//!    (zklock/Curator) | kazoo | ratio (zklock/kazoo) | ZooKeeper's recipe lock,
//!    with the date, kernel, cores, load average, and the ZooKeeper, Curator,
//!    kazoo and Python versions.
//!
//! The last column is ZooKeeper's own recipe (`org.apache.zookeeper.recipes.
//! lock.WriteLock`, asynchronous: `lock()` then wait for its listener's
//! `lockAcquired`; `unlock()`), uncontended only: under contention ZooKeeper
//! 3.8.0's recipe can leave a waiter without a watch (when the node it would
//! wait on is deleted between its `getChildren` and its `exists`, `lock()`
//! returns false and nothing ever calls back), so its waiters hang; and it knows
//! its own node by the session id, so two of its instances cannot share a
//! session on one lock znode.
//!
//! Lock znodes are persistent and made beforehand for every library, outside
//! the windows. Curator would otherwise make them as containers, which the test
//! server reaps within a second once empty; a reaped one costs Curator's next
//! acquire a `NoNode` and the creates of the missing parents. At the end every
//! lock znode must have no child left (checked and printed), and the root is
//! removed.
//!
//! `ZK_BENCH_ENSEMBLE=1` runs every scenario on a three-member ensemble (every
//! client of every library on one follower: writes go through the leader),
//! `ZK_TEST_FORCE_SYNC=yes` with servers that fsync their log before
//! answering a write (ZooKeeper's default; the harness's is not to); see
//! `common::bench_servers` and `docs/benchmarks.md`.
//!
//! Sizes: `ZK_COMPARE_ROUNDS` (rounds per scenario, default 5),
//! `ZK_COMPARE_CYCLES` (uncontended cycles per form per round, 400),
//! `ZK_COMPARE_WARMUP` (uncontended warm-up cycles per library, 4000),
//! `ZK_COMPARE_ROUND_MS` (length of a contended round, 1500),
//! `ZK_COMPARE_THREADS` (8), `ZK_COMPARE_PROCESSES` (8 per library),
//! `ZK_COMPARE_READERS` (8), `ZK_COMPARE_HANDOFFS` (acquires per party per
//! hand-off round, 100), `ZK_COMPARE_WORKER_WARMUP` (warm-up cycles per worker
//! process, in pairs, 5000: the JVMs' share of scenario 3 depends on it, as
//! each JVM warms its own JIT: on a loaded two-core machine Curator's grants/s
//! there were ~3× below zklock's after 2,000 cycles, ~1.8× after 8,000);
//! `ZK_COMPARE_RECIPE=0` leaves out ZooKeeper's recipe; `ZK_COMPARE_PYTHON`
//! (the python for kazoo's side; a python without kazoo, or a bogus path,
//! leaves out kazoo). About four minutes on two cores. The JVMs run with
//! `-Xmx256m -XX:+UseSerialGC` (nine of them on two cores).

use std::env;
use std::io::{self, BufRead, Write};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::ZooKeeper;
use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
use zklock::{zkutil, ZkError, ZooKeeperWatcher};

mod common;
use common::*;

/// What the rounds' lines call the perfect client (`PerfectLock`).
const PERFECT_LABEL: &str = "perfect client (Java)";

/// Set in a worker process of scenario 3: the lock znode it contends on.
const WORKER_ENV: &str = "ZKLOCK_COMPARE_WORKER";
/// The connect string of a worker process.
const WORKER_SERVERS_ENV: &str = "ZKLOCK_COMPARE_SERVERS";

/// The libraries, in the order of their rounds and of the summary's columns;
/// every other one's figures are put against zklock's.
const LIBRARIES: [&str; 3] = ["zklock", "Curator", "kazoo"];
const ZKLOCK: usize = 0;
const CURATOR: usize = 1;
const KAZOO: usize = 2;
/// Each library's directory under the bench's root znode.
const LIBRARY_DIRS: [&str; 3] = ["zklock", "curator", "kazoo"];
/// What the rounds' lines call each library's uncontended forms: its exclusive
/// lock (zklock: its write lock), its read/write lock's write lock, its read lock.
const FORM_LABELS: [[&str; 3]; 3] = [
    ["zklock write", "zklock write", "zklock read"],
    [
        "Curator InterProcessMutex",
        "Curator RW write",
        "Curator RW read",
    ],
    ["kazoo Lock", "kazoo WriteLock", "kazoo ReadLock"],
];

/// The python that runs kazoo's side, if not the venv's.
const PYTHON_ENV: &str = "ZK_COMPARE_PYTHON";
/// kazoo's side, under the crate root.
const KAZOO_SCRIPT: &str = "benches/python/kazoo_lock_bench.py";

const JAVA_DIR: &str = "/usr/share/java";
const CURATOR_JARS: [&str; 3] = [
    "/usr/share/java/curator-recipes.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-client.jar",
];
const BASE_JARS: [&str; 5] = [
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/guava.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];
const RECIPE_JAR: &str = "/usr/share/java/zookeeper-recipes-lock.jar";
const JVM_OPTIONS: [&str; 2] = ["-Xmx256m", "-XX:+UseSerialGC"];

/// How long a Java or Python command or a worker's round may take before the
/// bench gives up.
const ANSWER_BOUND: Duration = Duration::from_secs(180);
/// How long the workers may take to start and connect.
const READY_BOUND: Duration = Duration::from_secs(180);
/// Requests of a hand-off round outside its hand-offs: the first grant's create
/// and getChildren, the last release's delete.
const HANDOFF_OUTSIDE: u64 = 3;
/// The same for kazoo, plus the `exists` of each of its two new `Lock`s (its
/// `ensure_path`, once per instance, at its first acquire).
const KAZOO_HANDOFF_OUTSIDE: u64 = HANDOFF_OUTSIDE + 2;

struct Sizes {
    rounds: usize,
    cycles: usize,
    warmup: usize,
    round: Duration,
    threads: usize,
    processes: usize,
    readers: usize,
    handoffs: usize,
    worker_warmup: usize,
    recipe: bool,
}

impl Sizes {
    fn from_env() -> Sizes {
        Sizes {
            rounds: env_usize("ZK_COMPARE_ROUNDS", 5).max(1),
            cycles: env_usize("ZK_COMPARE_CYCLES", 400).max(10),
            warmup: env_usize("ZK_COMPARE_WARMUP", 4000),
            round: Duration::from_millis(env_usize("ZK_COMPARE_ROUND_MS", 1500).max(100) as u64),
            threads: env_usize("ZK_COMPARE_THREADS", 8).max(1),
            processes: env_usize("ZK_COMPARE_PROCESSES", 8).max(1),
            readers: env_usize("ZK_COMPARE_READERS", 8).max(1),
            handoffs: env_usize("ZK_COMPARE_HANDOFFS", 100).max(2),
            worker_warmup: env_usize("ZK_COMPARE_WORKER_WARMUP", 5000),
            recipe: env_usize("ZK_COMPARE_RECIPE", 1) != 0,
        }
    }
}

// ---------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------

/// One library's figures for one scenario, over its rounds.
#[derive(Default, Clone)]
struct Samples {
    /// Units per second, per round.
    rates: Vec<f64>,
    /// Median cycle, µs, per round (uncontended only).
    p50s: Vec<f64>,
    /// Cycles, grants or hand-offs over all rounds.
    units: u64,
    /// Traffic over all rounds.
    traffic: Traffic,
    /// CPU time of the library's processes over all rounds.
    cpu: Duration,
}

impl Samples {
    fn push(
        &mut self,
        units: u64,
        elapsed: Duration,
        p50: Option<Duration>,
        t: Traffic,
        cpu: Duration,
    ) {
        self.rates.push(units as f64 / elapsed.as_secs_f64());
        if let Some(p) = p50 {
            self.p50s.push(us(p));
        }
        self.units += units;
        self.traffic.add(&t);
        self.cpu += cpu;
    }

    fn rate(&self) -> Option<f64> {
        (!self.rates.is_empty()).then(|| median_f64(self.rates.clone()))
    }

    fn p50(&self) -> Option<f64> {
        (!self.p50s.is_empty()).then(|| median_f64(self.p50s.clone()))
    }

    fn requests(&self) -> Option<f64> {
        (self.units > 0).then(|| self.traffic.received as f64 / self.units as f64)
    }

    fn notifications(&self) -> Option<f64> {
        (self.units > 0).then(|| self.traffic.notifications() as f64 / self.units as f64)
    }

    /// Client CPU per unit, µs.
    fn cpu_per(&self) -> Option<f64> {
        (self.units > 0).then(|| us(self.cpu) / self.units as f64)
    }

    /// "R requests + N notifications per unit (...); C µs client CPU per unit".
    fn traffic_text(&self, unit: &str) -> String {
        match (self.requests(), self.notifications(), self.cpu_per()) {
            (Some(r), Some(n), Some(c)) => format!(
                "{r:.2} requests + {n:.2} notifications per {unit} ({} requests, {} pings at \
                 most); {c:.0} µs client CPU per {unit}",
                self.traffic.received, self.traffic.ping_allowance
            ),
            _ => String::new(),
        }
    }
}

/// The median of the per-round ratios `a[i] / b[i]`.
fn ratio(a: &[f64], b: &[f64]) -> Option<f64> {
    let r: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(_, b)| **b > 0.0)
        .map(|(a, b)| a / b)
        .collect();
    (!r.is_empty()).then(|| median_f64(r))
}

fn timed_p50(mut times: Vec<Duration>) -> Duration {
    times.sort();
    percentile(&times, 0.5)
}

// ---------------------------------------------------------------------------
// zklock's side
// ---------------------------------------------------------------------------

/// `cycles` timed acquire + release cycles.
fn zk_uncontended(lock: &dyn InterProcessLock, cycles: usize) -> (Vec<Duration>, Duration) {
    let mut times = Vec::with_capacity(cycles);
    let started = Instant::now();
    for _ in 0..cycles {
        let t = Instant::now();
        lock.acquire().expect("uncontended acquire");
        lock.release().expect("release");
        times.push(t.elapsed());
    }
    (times, started.elapsed())
}

/// One thread per lock, acquire + release until `run` is up: grants, and the
/// time from the start to the last thread's end.
fn zk_loop(
    locks: Vec<Box<dyn InterProcessLock>>,
    run: Duration,
    exclusive: bool,
) -> (u64, Duration) {
    let barrier = Arc::new(Barrier::new(locks.len() + 1));
    let inside = Arc::new(AtomicUsize::new(0));
    let grants = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = locks
        .into_iter()
        .map(|lock| {
            let (barrier, inside, grants) = (barrier.clone(), inside.clone(), grants.clone());
            thread::spawn(move || {
                barrier.wait();
                let deadline = Instant::now() + run;
                let mut mine = 0;
                while Instant::now() < deadline {
                    lock.acquire().expect("contended acquire");
                    let before = inside.fetch_add(1, Ordering::SeqCst);
                    assert!(!exclusive || before == 0, "two holders of a write lock");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    mine += 1;
                    lock.release().expect("release");
                }
                grants.fetch_add(mine, Ordering::Relaxed);
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    for h in handles {
        h.join().expect("bench thread");
    }
    (grants.load(Ordering::Relaxed), started.elapsed())
}

fn zk_write_locks(zkw: &ZooKeeperWatcher, znode: &str, n: usize) -> Vec<Box<dyn InterProcessLock>> {
    let rw = ZkInterProcessReadWriteLock::new(zkw, znode, None).expect("lock");
    (0..n)
        .map(|i| {
            Box::new(rw.write_lock(format!("thread {i}").as_bytes())) as Box<dyn InterProcessLock>
        })
        .collect()
}

fn zk_read_locks(zkw: &ZooKeeperWatcher, znode: &str, n: usize) -> Vec<Box<dyn InterProcessLock>> {
    let rw = ZkInterProcessReadWriteLock::new(zkw, znode, None).expect("lock");
    (0..n)
        .map(|i| {
            Box::new(rw.read_lock(format!("reader {i}").as_bytes())) as Box<dyn InterProcessLock>
        })
        .collect()
}

/// The worker process of scenario 3 (this binary with `ZKLOCK_COMPARE_WORKER`
/// set): one session, one write lock; `ready`, then until the end of its input
/// `warm <znode> <cycles>` (cycles of another write lock on `znode`, which one
/// other worker shares: the same warm-up as the JVMs get) and `go <ms>`, each
/// answered with `done grants <n> elapsed_ns <ns>`.
fn worker(znode: &str) {
    let servers = env::var(WORKER_SERVERS_ENV).expect("ZKLOCK_COMPARE_SERVERS");
    let zkw = connect(&servers, "compare-worker");
    let rw = ZkInterProcessReadWriteLock::new(&zkw, znode, None).expect("lock");
    let lock = rw.write_lock(format!("worker {}", std::process::id()).as_bytes());
    let mut out = io::stdout().lock();
    writeln!(out, "ready")
        .and_then(|()| out.flush())
        .expect("stdout");
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["warm", warm_znode, cycles] = words[..] {
            let cycles: usize = cycles.parse().expect("warm <znode> <cycles>");
            let rw = ZkInterProcessReadWriteLock::new(&zkw, warm_znode, None).expect("lock");
            let (_, elapsed) = zk_uncontended(&rw.write_lock(b"warm-up"), cycles);
            writeln!(
                out,
                "done grants {cycles} elapsed_ns {}",
                elapsed.as_nanos()
            )
            .and_then(|()| out.flush())
            .expect("stdout");
            continue;
        }
        let ["go", ms] = words[..] else { break };
        let ms: u64 = ms.parse().expect("go <ms>");
        let started = Instant::now();
        let deadline = started + Duration::from_millis(ms);
        let mut grants = 0u64;
        while Instant::now() < deadline {
            lock.acquire().expect("worker acquire");
            grants += 1;
            lock.release().expect("worker release");
        }
        let elapsed = started.elapsed().as_nanos();
        writeln!(out, "done grants {grants} elapsed_ns {elapsed}")
            .and_then(|()| out.flush())
            .expect("stdout");
    }
    zkw.close().expect("close");
}

// ---------------------------------------------------------------------------
// The other libraries' sides (Curator, kazoo) and the workers
// ---------------------------------------------------------------------------

/// Another library's bench in `serve` mode, spoken to a line at a time:
/// Curator's JVM (`CuratorLockBench serve`) or kazoo's Python
/// (`kazoo_lock_bench.py serve`), which answer the same commands the same way.
struct Peer {
    /// Its index in `LIBRARIES`.
    library: usize,
    proc: LineProcess,
    /// Its version and its runtime's, for the summary.
    version: String,
}

impl Peer {
    /// A command's answer as numbers; panics on an `error` answer.
    fn ask(&mut self, command: &str) -> std::collections::HashMap<String, f64> {
        let name = LIBRARIES[self.library];
        let line = self
            .proc
            .ask(command, ANSWER_BOUND)
            .unwrap_or_else(|e| panic!("{name} `{command}`: {e}"));
        assert!(line.starts_with("ok "), "{name} `{command}`: {line}");
        parse_fields(&line)
    }

    /// `uncontended <form> <cycles>`: cycles, elapsed, p50.
    fn uncontended(&mut self, form: &str, cycles: usize) -> (u64, Duration, Duration) {
        let f = self.ask(&format!("uncontended {form} {cycles}"));
        (
            f["cycles"] as u64,
            Duration::from_nanos(f["elapsed_ns"] as u64),
            Duration::from_nanos(f["p50_ns"] as u64),
        )
    }

    /// A command answered with `grants` (or `handoffs`) and `elapsed_ns`.
    fn grants(&mut self, command: &str) -> (u64, Duration) {
        let f = self.ask(command);
        let n = f.get("grants").or_else(|| f.get("handoffs")).copied();
        (
            n.expect("a count") as u64,
            Duration::from_nanos(f["elapsed_ns"] as u64),
        )
    }

    /// `quit`, then waits for it to close its session and end.
    fn quit(mut self) {
        let _ = self.proc.send("quit");
        match self.proc.finish(Duration::from_secs(30)) {
            Ok(s) if s.success() => {}
            Ok(s) => println!("({} ended with {s})", self.proc.name),
            Err(e) => println!("({}: {e})", self.proc.name),
        }
    }
}

/// Starts a bench in `serve` mode and reads its first line: `ready <library>
/// <version> <runtime> <version>`, or why it cannot serve.
fn start_peer(what: &str, cmd: Command) -> Result<(LineProcess, Vec<String>), String> {
    let mut p = LineProcess::spawn(what, cmd).map_err(|e| format!("cannot start it: {e}"))?;
    let first = p.recv(READY_BOUND);
    match first {
        Ok(line) if line.starts_with("ready") => {
            Ok((p, line.split_whitespace().map(str::to_string).collect()))
        }
        Ok(line) => {
            let _ = p.finish(Duration::from_secs(10));
            Err(line.strip_prefix("error ").unwrap_or(&line).to_string())
        }
        Err(e) => {
            let _ = p.finish(Duration::from_secs(10));
            Err(e)
        }
    }
}

/// Starts the Java bench in `serve` mode and waits until it is connected.
fn start_curator(classes: &JavaClasses, servers: &str, root: &str) -> Peer {
    let mut cmd = classes.java(&JVM_OPTIONS, "CuratorLockBench");
    cmd.args(["serve", servers, root]);
    let (jvm, w) =
        start_peer("Curator bench JVM", cmd).unwrap_or_else(|e| panic!("Curator bench JVM: {e}"));
    let version = match w.get(2).map(String::as_str) {
        Some(v) if v != "unknown" => v.to_string(),
        _ => jar_version("curator-recipes-").unwrap_or_else(|| "unknown".to_string()),
    };
    let client_version = short_version(w.get(4).map_or("unknown", |v| v));
    println!(
        "Curator {version} (Java ZooKeeper client {client_version}), JVM pid {}",
        jvm.pid()
    );
    Peer {
        library: CURATOR,
        proc: jvm,
        version: format!("{version} (Java ZooKeeper client {client_version})"),
    }
}

/// The python that runs kazoo's side: `$ZK_COMPARE_PYTHON`, else the venv that
/// `make kazoo` makes.
/// `<python> kazoo_lock_bench.py <args>`.
fn kazoo_command(python: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(KAZOO_SCRIPT))
        .args(args);
    cmd
}

/// Starts the Python bench in `serve` mode and waits until it is connected;
/// `Err` says why it cannot (no such python, kazoo not importable, ...).
fn start_kazoo(python: &Path, servers: &str, root: &str) -> Result<Peer, String> {
    let cmd = kazoo_command(python, &["serve", servers, root]);
    let (proc, w) = start_peer("kazoo bench", cmd)?;
    let version = w.get(2).cloned().unwrap_or_else(|| "unknown".to_string());
    let python_version = w.get(4).cloned().unwrap_or_else(|| "unknown".to_string());
    println!(
        "kazoo {version} (Python {python_version}, {}), pid {}",
        python.display(),
        proc.pid()
    );
    Ok(Peer {
        library: KAZOO,
        proc,
        version: format!("{version} (Python {python_version})"),
    })
}

/// The processes of scenario 3, one library's.
struct Workers {
    procs: Vec<LineProcess>,
}

impl Workers {
    /// Starts `n` workers, `make(i)` each (`wait_ready` waits for them).
    fn spawn(n: usize, what: &str, make: impl Fn(usize) -> Command) -> Workers {
        let procs: Vec<LineProcess> = (0..n)
            .map(|i| {
                LineProcess::spawn(&format!("{what} worker {i}"), make(i))
                    .unwrap_or_else(|e| panic!("cannot start a {what} worker: {e}"))
            })
            .collect();
        Workers { procs }
    }

    /// Waits until every worker said `ready` (started and connected).
    fn wait_ready(&self) {
        for p in &self.procs {
            let line = p.recv(READY_BOUND).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(line.trim(), "ready", "{}: {line}", p.name);
        }
    }

    /// One round of `run`: total grants, and the longest worker's time.
    fn round(&mut self, run: Duration) -> (u64, Duration) {
        self.all(|_| format!("go {}", run.as_millis()))
    }

    /// Worker `i` warms up on `znode(i)`, all at once; the time of the slowest.
    fn warm(&mut self, znode: impl Fn(usize) -> String, cycles: usize) -> Duration {
        self.all(|i| format!("warm {} {cycles}", znode(i))).1
    }

    /// `command(i)` to worker `i`, then every answer: the sum of the grants and
    /// the longest time.
    fn all(&mut self, command: impl Fn(usize) -> String) -> (u64, Duration) {
        for (i, p) in self.procs.iter_mut().enumerate() {
            p.send(&command(i)).unwrap_or_else(|e| panic!("{e}"));
        }
        let mut grants = 0;
        let mut longest = Duration::ZERO;
        for p in &self.procs {
            let line = p.recv(ANSWER_BOUND).unwrap_or_else(|e| panic!("{e}"));
            assert!(line.starts_with("done "), "{}: {line}", p.name);
            let f = parse_fields(&line);
            grants += f["grants"] as u64;
            longest = longest.max(Duration::from_nanos(f["elapsed_ns"] as u64));
        }
        (grants, longest)
    }

    fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(LineProcess::pid).collect()
    }

    /// Closes their input (each closes its session and exits) and waits.
    fn stop(mut self) {
        for p in &mut self.procs {
            match p.finish(Duration::from_secs(30)) {
                Ok(s) if s.success() => {}
                Ok(s) => println!("  ({} ended with {s})", p.name),
                Err(e) => println!("  ({}: {e})", p.name),
            }
        }
    }
}

/// The version in a versioned jar's file name under /usr/share/java
/// (`curator-recipes-5.4.0.jar`).
fn jar_version(prefix: &str) -> Option<String> {
    std::fs::read_dir(JAVA_DIR).ok()?.find_map(|e| {
        let name = e.ok()?.file_name().into_string().ok()?;
        let v = name.strip_prefix(prefix)?.strip_suffix(".jar")?;
        v.starts_with(|c: char| c.is_ascii_digit())
            .then(|| v.to_string())
    })
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

/// The server's counters, and the windows every round runs in.
struct Meter {
    m: Mntr,
    /// What a window with requests counts sent beyond its replies and
    /// notifications (see `Meter::new`).
    residual: u64,
}

impl Meter {
    /// Measures the `mntr` reads' cost (`Mntr::new`) and the residual: what a
    /// window with requests in it counts sent beyond their replies after that
    /// cost (0 or 1: what a read adds to `zk_packets_sent` varies from run to
    /// run, and an empty window counts none), measured around plain reads, which
    /// have no notification, and subtracted from every window.
    fn new(servers: &str, zk: &ZooKeeper, path: &str) -> Meter {
        let m = Mntr::new(servers);
        let residual = (0..3)
            .map(|_| {
                let w = Window::start(&m);
                for _ in 0..5 {
                    zk.exists(path, false).expect("exists");
                }
                w.stop(&m).notifications()
            })
            .min()
            .unwrap_or(0);
        println!(
            "mntr: a read adds {} packets to zk_packets_received and {} to zk_packets_sent; a \
             window with requests counts {residual} sent beyond the replies and notifications \
             (all subtracted)",
            m.overhead, m.sent_overhead
        );
        Meter { m, residual }
    }

    fn window(&self) -> Window {
        Window::start(&self.m)
    }

    fn stop(&self, w: Window) -> Traffic {
        let mut t = w.stop(&self.m);
        t.sent = t.sent.saturating_sub(self.residual);
        t
    }
}

/// One scenario's figures: one `Samples` per library, in the order of
/// `LIBRARIES` (empty for a library that did not run).
type Figures = [Samples; 3];

/// One library's part in a contended scenario.
struct Contender<'a> {
    /// A round: the units (grants, hand-offs) and their time.
    round: Box<dyn FnMut() -> (u64, Duration) + 'a>,
    /// The CPU time the library's processes have used so far.
    cpu: Box<dyn Fn() -> Duration + 'a>,
    /// Requests of a round outside its units, subtracted (with their replies)
    /// from the round's traffic.
    outside: u64,
}

impl<'a> Contender<'a> {
    fn new(
        round: impl FnMut() -> (u64, Duration) + 'a,
        cpu: impl Fn() -> Duration + 'a,
        outside: u64,
    ) -> Contender<'a> {
        Contender {
            round: Box::new(round),
            cpu: Box::new(cpu),
            outside,
        }
    }

    /// A peer's rounds of `command` (answered with grants or hand-offs), and its
    /// process's CPU time.
    fn peer(peer: &'a mut Peer, command: String, outside: u64) -> Contender<'a> {
        let pid = peer.proc.pid();
        Contender::new(
            move || peer.grants(&command),
            move || cpu_time(Some(pid)),
            outside,
        )
    }
}

/// One unreported round of each library, then `rounds` rounds that take turns
/// (zklock, Curator, kazoo, zklock, ...), each inside its own window and
/// between two readings of its processes' CPU time.
fn alternate(
    meter: &Meter,
    rounds: usize,
    (unit, units): (&str, &str),
    mut libraries: [Option<Contender<'_>>; 3],
) -> Figures {
    let mut figures = Figures::default();
    for c in libraries.iter_mut().flatten() {
        (c.round)();
    }
    for r in 0..rounds {
        let mut line = format!("  round {r}:");
        for (i, c) in libraries.iter_mut().enumerate() {
            let Some(c) = c else { continue };
            let (w, cpu) = (meter.window(), (c.cpu)());
            let (n, elapsed) = (c.round)();
            let cpu = (c.cpu)().saturating_sub(cpu);
            let mut t = meter.stop(w);
            // The requests outside the units, and their replies.
            t.received = t.received.saturating_sub(c.outside);
            t.sent = t.sent.saturating_sub(c.outside);
            let s = &mut figures[i];
            s.push(n, elapsed, None, t, cpu);
            if i > 0 {
                line += "  |";
            }
            line += &format!(" {} {:>7.0} {units}/s", LIBRARIES[i], s.rates[r]);
        }
        println!("{line}");
    }
    for (name, s) in LIBRARIES.iter().zip(&figures) {
        if let Some(rate) = s.rate() {
            println!(
                "  {name:<8} median {rate:>7.0} {units}/s; {}",
                s.traffic_text(unit)
            );
        }
    }
    figures
}

/// Each peer's contender for `command`, where it runs.
fn peer_contenders<'a>(
    peers: &'a mut [Option<Peer>; 2],
    command: &str,
    outside: [u64; 2],
) -> [Option<Contender<'a>>; 2] {
    let [cu, kz] = peers;
    [
        cu.as_mut()
            .map(|p| Contender::peer(p, command.to_string(), outside[0])),
        kz.as_mut()
            .map(|p| Contender::peer(p, command.to_string(), outside[1])),
    ]
}

/// Scenario 1's figures.
struct Uncontended {
    /// zklock's write lock; the peers' exclusive locks (Curator's
    /// `InterProcessMutex`, kazoo's `Lock`).
    exclusive: Figures,
    /// zklock's write lock; the write locks of the peers' read/write locks.
    rw_write: Figures,
    /// The read locks.
    read: Figures,
    /// ZooKeeper's recipe `WriteLock` (on Curator's session).
    recipe: Samples,
    /// The perfect client: the plain Java client of Curator's session making
    /// zklock's write-lock requests with no lock logic (`PerfectLock` in the
    /// Java bench).
    perfect: Samples,
}

/// The peers' uncontended forms, in the order of `FORM_LABELS`.
const PEER_FORMS: [&str; 3] = ["mutex", "rw-write", "rw-read"];

fn uncontended(
    sizes: &Sizes,
    meter: &Meter,
    zkw: &ZooKeeperWatcher,
    znode: &str,
    peers: &mut [Option<Peer>; 2],
    recipe: bool,
) -> Uncontended {
    let (rounds, per_round) = (sizes.rounds, sizes.cycles);
    println!();
    println!(
        "1. uncontended acquire + release, one thread, one session ({} warm-up cycles per \
         library; {rounds} alternating rounds of {per_round} cycles per form)",
        sizes.warmup
    );
    let rw = ZkInterProcessReadWriteLock::new(zkw, znode, None).expect("lock");
    let write = rw.write_lock(b"bench writer");
    let read = rw.read_lock(b"bench reader");
    let some = (sizes.warmup / 4).max(1);
    zk_uncontended(&write, sizes.warmup);
    zk_uncontended(&read, some);
    // The perfect client's form: the write lock's node name (before the
    // sequence number) and data length.
    let perfect_form = {
        write.acquire().expect("acquire");
        let held = children(zkw.zookeeper(), znode);
        let [node] = held.as_slice() else {
            panic!("one node under {znode} while held: {held:?}")
        };
        let (data, _) = zkw
            .zookeeper()
            .get_data(&format!("{znode}/{node}"), false)
            .expect("get_data");
        write.release().expect("release");
        format!("perfect:{}:{}", &node[..node.len() - 10], data.len())
    };
    for p in peers.iter_mut().flatten() {
        p.uncontended("mutex", sizes.warmup.max(1));
        p.uncontended("rw-write", some);
        p.uncontended("rw-read", some);
        if recipe && p.library == CURATOR {
            p.uncontended("zk-recipe", some);
        }
        if p.library == CURATOR {
            p.uncontended(&perfect_form, sizes.warmup.max(1));
        }
    }
    // Each peer's samples of its forms (PEER_FORMS).
    let mut peer_samples: [[Samples; 3]; 2] = Default::default();
    let (mut zk_write, mut zk_read) = (Samples::default(), Samples::default());
    let mut recipe_samples = Samples::default();
    let mut perfect = Samples::default();
    let report = |r: usize, name: &str, s: &Samples| {
        println!(
            "  round {r}: {name:<26} {:>8.0} cycles/s  p50 {:>7.1} µs",
            s.rates.last().copied().unwrap_or(0.0),
            s.p50s.last().copied().unwrap_or(0.0)
        );
    };
    let zk_form = |lock: &dyn InterProcessLock, s: &mut Samples| {
        let (w, cpu) = (meter.window(), cpu_time(None));
        let (times, elapsed) = zk_uncontended(lock, per_round);
        let cpu = cpu_time(None).saturating_sub(cpu);
        let t = meter.stop(w);
        s.push(per_round as u64, elapsed, Some(timed_p50(times)), t, cpu);
    };
    let peer_form = |p: &mut Peer, form: &str, s: &mut Samples| {
        let pid = Some(p.proc.pid());
        let (w, cpu) = (meter.window(), cpu_time(pid));
        let (n, elapsed, p50) = p.uncontended(form, per_round);
        let cpu = cpu_time(pid).saturating_sub(cpu);
        let t = meter.stop(w);
        s.push(n, elapsed, Some(p50), t, cpu);
    };
    for r in 0..rounds {
        zk_form(&write, &mut zk_write);
        report(r, FORM_LABELS[ZKLOCK][0], &zk_write);
        for (p, s) in peers.iter_mut().zip(&mut peer_samples) {
            let Some(p) = p else { continue };
            for f in 0..2 {
                peer_form(p, PEER_FORMS[f], &mut s[f]);
                report(r, FORM_LABELS[p.library][f], &s[f]);
            }
            if p.library == CURATOR {
                peer_form(p, &perfect_form, &mut perfect);
                report(r, PERFECT_LABEL, &perfect);
            }
        }
        zk_form(&read, &mut zk_read);
        report(r, FORM_LABELS[ZKLOCK][2], &zk_read);
        for (p, s) in peers.iter_mut().zip(&mut peer_samples) {
            let Some(p) = p else { continue };
            peer_form(p, PEER_FORMS[2], &mut s[2]);
            report(r, FORM_LABELS[p.library][2], &s[2]);
            if recipe && p.library == CURATOR {
                peer_form(p, "zk-recipe", &mut recipe_samples);
                report(r, "ZooKeeper recipe WriteLock", &recipe_samples);
            }
        }
    }
    let [[cu_mutex, cu_write, cu_read], [kz_lock, kz_write, kz_read]] = peer_samples;
    let u = Uncontended {
        exclusive: [zk_write.clone(), cu_mutex, kz_lock],
        rw_write: [zk_write, cu_write, kz_write],
        read: [zk_read, cu_read, kz_read],
        recipe: recipe_samples,
        perfect,
    };
    // zklock's write lock once, then every other library's forms.
    let mut lines: Vec<(&str, &Samples)> = vec![
        (FORM_LABELS[ZKLOCK][0], &u.exclusive[ZKLOCK]),
        (FORM_LABELS[ZKLOCK][2], &u.read[ZKLOCK]),
    ];
    for (i, labels) in FORM_LABELS.iter().enumerate().skip(ZKLOCK + 1) {
        lines.push((labels[0], &u.exclusive[i]));
        lines.push((labels[1], &u.rw_write[i]));
        lines.push((labels[2], &u.read[i]));
    }
    lines.push(("ZooKeeper recipe WriteLock", &u.recipe));
    lines.push((PERFECT_LABEL, &u.perfect));
    for (name, s) in lines {
        if let (Some(rate), Some(p50)) = (s.rate(), s.p50()) {
            println!(
                "  {name:<26} median {rate:>8.0} cycles/s, p50 {p50:>7.1} µs; {}",
                s.traffic_text("cycle")
            );
        }
    }
    assert!(children(zkw.zookeeper(), znode).is_empty());
    u
}

/// How a library's worker process of scenario 3 is started, given its lock
/// znode.
type Launch<'a> = &'a dyn Fn(&str) -> Command;

/// Scenario 3: starts every library's workers, warms them up, alternates.
/// `znode(library, name)`: a lock znode of that library's.
fn processes(
    sizes: &Sizes,
    meter: &Meter,
    znode: &dyn Fn(usize, &str) -> String,
    launch: [Option<Launch<'_>>; 3],
) -> Figures {
    let run = sizes.round;
    println!();
    println!(
        "3. {} processes, a session each, contending on one lock znode: {} alternating rounds \
         of {run:?} (after {} warm-up cycles each, in pairs on znodes of their own, and one \
         unreported round)",
        sizes.processes, sizes.rounds, sizes.worker_warmup
    );
    let started = Instant::now();
    // Every library's processes start at once; each says `ready` once connected.
    let mut workers: [Option<Workers>; 3] = Default::default();
    for (i, make) in launch.iter().enumerate() {
        if let Some(make) = make {
            let lock_znode = znode(i, "processes");
            workers[i] = Some(Workers::spawn(sizes.processes, LIBRARIES[i], |_| {
                make(&lock_znode)
            }));
        }
    }
    for w in workers.iter().flatten() {
        w.wait_ready();
    }
    println!(
        "  {} workers started and connected in {:.1} s",
        workers
            .iter()
            .flatten()
            .map(|w| w.procs.len())
            .sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
    let cycles = sizes.worker_warmup;
    if cycles > 0 {
        let mut line = "  warm-up:".to_string();
        for (i, w) in workers.iter_mut().enumerate() {
            if let Some(w) = w {
                let took = w.warm(|j| znode(i, &format!("warm-{}", j / 2)), cycles);
                line += &format!(" {}'s workers {:.1} s;", LIBRARIES[i], took.as_secs_f64());
            }
        }
        println!("{}", line.trim_end_matches(';'));
    }
    let [zk, cu, kz] = &mut workers;
    let contenders = [zk, cu, kz].map(|w| {
        w.as_mut().map(|w| {
            let pids = w.pids();
            Contender::new(
                move || w.round(run),
                move || pids.iter().map(|p| cpu_time(Some(*p))).sum(),
                0,
            )
        })
    });
    let figures = alternate(meter, sizes.rounds, ("grant", "grants"), contenders);
    for w in workers.into_iter().flatten() {
        w.stop();
    }
    figures
}

fn children(zk: &ZooKeeper, path: &str) -> Vec<String> {
    match zk.get_children(path, false) {
        Ok(c) => c,
        Err(e) if e.is(ZkError::NoNode) => Vec::new(),
        Err(e) => panic!("get_children {path}: {e}"),
    }
}

/// Every znode under `path` (not `path` itself), depth first.
fn descendants(zk: &ZooKeeper, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for c in children(zk, path) {
        let p = format!("{path}/{c}");
        out.extend(descendants(zk, &p));
        out.push(p);
    }
    out
}

/// `3.8.0` of `3.8.0-${mvngit.commit.id}, built on ...` (Debian's builds leave
/// the placeholder in).
fn short_version(v: &str) -> String {
    let v = v.split([',', ' ']).next().unwrap_or("");
    v.split("-$").next().unwrap_or(v).to_string()
}

/// A row of the summary table: the scenario, then its cells (see `Table::print`).
struct Row {
    scenario: String,
    cells: Vec<String>,
}

fn fmt_opt(v: Option<f64>, digits: usize, unit: &str) -> String {
    v.map_or_else(|| "—".to_string(), |v| format!("{v:.digits$}{unit}"))
}

/// One figure of a library's samples (`Samples::requests`, ...).
type Figure = fn(&Samples) -> Option<f64>;

/// The summary's rows (each method's `recipe`: the last column's figures, where
/// it has any).
struct Table {
    rows: Vec<Row>,
}

impl Table {
    /// zklock's `value`, then each other library's with zklock's `ratio` over
    /// it, then the recipe's.
    fn row(
        &mut self,
        scenario: &str,
        f: &Figures,
        recipe: Option<&Samples>,
        value: impl Fn(&Samples) -> String,
        ratio: impl Fn(&Samples, &Samples) -> Option<f64>,
    ) {
        let mut cells = vec![value(&f[ZKLOCK])];
        for other in &f[ZKLOCK + 1..] {
            cells.push(value(other));
            cells.push(fmt_opt(ratio(&f[ZKLOCK], other), 2, "×"));
        }
        cells.push(recipe.map_or_else(|| "—".to_string(), &value));
        self.rows.push(Row {
            scenario: scenario.to_string(),
            cells,
        });
    }

    /// Rates: medians over the rounds, and the median of the per-round ratios.
    fn rate(&mut self, scenario: &str, f: &Figures, recipe: Option<&Samples>) {
        self.row(
            scenario,
            f,
            recipe,
            |s| fmt_opt(s.rate(), 0, " /s"),
            |z, o| ratio(&z.rates, &o.rates),
        );
    }

    /// The median cycle, the same way.
    fn p50(&mut self, scenario: &str, f: &Figures, recipe: Option<&Samples>) {
        self.row(
            scenario,
            f,
            recipe,
            |s| fmt_opt(s.p50(), 0, " µs"),
            |z, o| ratio(&z.p50s, &o.p50s),
        );
    }

    /// A count per unit over all rounds.
    fn count(&mut self, scenario: &str, figure: Figure, f: &Figures, recipe: Option<&Samples>) {
        self.total(scenario, (figure, 2, ""), f, recipe);
    }

    /// Client CPU per unit over all rounds.
    fn cpu(&mut self, scenario: &str, f: &Figures, recipe: Option<&Samples>) {
        self.total(scenario, (Samples::cpu_per, 0, " µs"), f, recipe);
    }

    /// `figure` over all rounds, shown with `digits` and `unit`; the ratio of
    /// zklock's over the other's.
    fn total(
        &mut self,
        scenario: &str,
        (figure, digits, unit): (Figure, usize, &str),
        f: &Figures,
        recipe: Option<&Samples>,
    ) {
        self.row(
            scenario,
            f,
            recipe,
            |s| fmt_opt(figure(s), digits, unit),
            |z, o| match (figure(z), figure(o)) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            },
        );
    }

    fn print(&self) {
        let mut head = vec!["scenario".to_string(), LIBRARIES[ZKLOCK].to_string()];
        for other in &LIBRARIES[ZKLOCK + 1..] {
            head.push(other.to_string());
            head.push(format!("ratio (zklock/{other})"));
        }
        head.push("ZooKeeper recipe WriteLock".to_string());
        println!("| {} |", head.join(" | "));
        println!("|{}", "---|".repeat(head.len()));
        for r in &self.rows {
            println!("| {} | {} |", r.scenario, r.cells.join(" | "));
        }
    }
}

fn main() {
    if let Ok(znode) = env::var(WORKER_ENV) {
        worker(&znode);
        return;
    }
    let _ = env_logger::builder().is_test(true).try_init();
    let sizes = Sizes::from_env();
    let total = Instant::now();

    let (bench_servers, servers) = bench_servers();
    let load_start = loadavg();
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "zklock vs Apache Curator and kazoo: lock benchmark against {servers}: {} ({cores} \
         CPUs, load {load_start})",
        bench_servers.describe()
    );

    // The znodes: every lock znode of every library, made now. Each library
    // has a directory of its own under the root.
    let root = format!("/zklock-compare-{}", std::process::id());
    let zkw = connect(&servers, "compare-zklock");
    let zk = zkw.zookeeper().clone();
    let dir = |library: usize| format!("{root}/{}", LIBRARY_DIRS[library]);
    let znode = |library: usize, name: &str| format!("{}/{name}", dir(library));
    let zl = |name: &str| znode(ZKLOCK, name);
    let lock_znodes: Vec<String> = ["uncontended", "threads", "processes", "readers", "handoff"]
        .iter()
        .map(|n| zl(n))
        .chain(
            [
                "uncontended-mutex",
                "uncontended-rw",
                "uncontended-recipe",
                "uncontended-perfect",
                "threads",
                "processes",
                "readers",
                "handoff",
            ]
            .iter()
            .map(|n| znode(CURATOR, n)),
        )
        .chain(
            [
                "uncontended-mutex",
                "uncontended-rw",
                "threads",
                "processes",
                "readers",
                "handoff",
            ]
            .iter()
            .map(|n| znode(KAZOO, n)),
        )
        .chain(
            (0..sizes.processes.div_ceil(2))
                .flat_map(|i| (0..LIBRARIES.len()).map(move |library| (library, i)))
                .map(|(library, i)| znode(library, &format!("warm-{i}"))),
        )
        .collect();
    for z in &lock_znodes {
        zkutil::create_with_parents(&zkw, z).expect("create a lock znode");
    }
    let meter = Meter::new(&servers, &zk, &root);
    let zk_version = meter
        .m
        .read()
        .first()
        .and_then(|x| x.get("zk_version").cloned())
        .map_or_else(|| "unknown".to_string(), |v| short_version(&v));

    // The Java side.
    let mut jars: Vec<&str> = CURATOR_JARS
        .iter()
        .chain(BASE_JARS.iter())
        .copied()
        .collect();
    // The Java source names the recipe's classes: the jar is on the
    // classpath whenever it is there, `ZK_COMPARE_RECIPE=0` only leaves its
    // rounds out.
    let has_recipe_jar = Path::new(RECIPE_JAR).exists();
    if has_recipe_jar {
        jars.push(RECIPE_JAR);
    } else if sizes.recipe {
        println!("(ZooKeeper's recipe lock skipped: {RECIPE_JAR} not found)");
    }
    let recipe_jar = sizes.recipe && has_recipe_jar;
    let classes = match compile_java("compare", &["benches/java/CuratorLockBench.java"], &jars) {
        Ok(c) => Some(c),
        Err(e) => {
            println!(
                "NOTE: Curator skipped ({e}); install it with `make curator` (Debian: \
                 apt-get install libcurator-recipes-java). No Curator column."
            );
            None
        }
    };
    let curator = classes
        .as_ref()
        .map(|c| start_curator(c, &servers, &dir(CURATOR)));
    let recipe = recipe_jar && curator.is_some();

    // The Python side.
    let python = kazoo_python();
    let kazoo = match start_kazoo(&python, &servers, &dir(KAZOO)) {
        Ok(k) => Some(k),
        Err(e) => {
            println!(
                "NOTE: kazoo skipped ({}: {e}); install it with `make kazoo` (a venv, \
                 target/kazoo-venv, with kazoo from PyPI), or set {PYTHON_ENV} to a python \
                 that imports kazoo. No kazoo column.",
                python.display()
            );
            None
        }
    };
    let mut peers = [curator, kazoo];
    let versions: Vec<String> = LIBRARIES[ZKLOCK + 1..]
        .iter()
        .zip(&peers)
        .map(|(name, p)| match p {
            Some(p) => format!("{name} {}", p.version),
            None => format!("{name} — (not installed)"),
        })
        .collect();

    // 1. Uncontended.
    let unc = uncontended(&sizes, &meter, &zkw, &zl("uncontended"), &mut peers, recipe);

    let (rounds, run) = (sizes.rounds, sizes.round);
    // CPU time: zklock's is this process's (its sessions' threads and the lock
    // threads; the bench's own main thread only waits), the others' their
    // bench process's (JVM, Python).
    let zk_cpu = || cpu_time(None);

    // 2. Threads.
    let n = sizes.threads;
    println!();
    println!(
        "2. {n} threads, one session, a write-lock instance each on one lock znode: {rounds} \
         alternating rounds of {run:?} (after one unreported round each)"
    );
    let [cu, kz] = peer_contenders(
        &mut peers,
        &format!("threads {n} {}", run.as_millis()),
        [0, 0],
    );
    let threads = alternate(
        &meter,
        rounds,
        ("grant", "grants"),
        [
            Some(Contender::new(
                || zk_loop(zk_write_locks(&zkw, &zl("threads"), n), run, true),
                zk_cpu,
                0,
            )),
            cu,
            kz,
        ],
    );
    assert!(children(&zk, &zl("threads")).is_empty());

    // 3. Processes: zklock's workers are this binary, re-executed; Curator's
    // JVMs of the Java bench; kazoo's Pythons.
    let exe = env::current_exe().expect("current_exe");
    let zk_launch = |lock_znode: &str| {
        let mut cmd = Command::new(&exe);
        cmd.env(WORKER_ENV, lock_znode)
            .env(WORKER_SERVERS_ENV, &servers)
            .env_remove("RUST_LOG");
        cmd
    };
    let cu_launch = |lock_znode: &str| {
        let c = classes.as_ref().expect("the Java classes");
        let mut cmd = c.java(&JVM_OPTIONS, "CuratorLockBench");
        cmd.args(["worker", &servers, lock_znode]);
        cmd
    };
    let kz_launch = |lock_znode: &str| kazoo_command(&python, &["worker", &servers, lock_znode]);
    let procs = processes(
        &sizes,
        &meter,
        &znode,
        [
            Some(&zk_launch as Launch<'_>),
            peers[0].as_ref().map(|_| &cu_launch as Launch<'_>),
            peers[1].as_ref().map(|_| &kz_launch as Launch<'_>),
        ],
    );
    assert!(children(&zk, &zl("processes")).is_empty());

    // 4. Readers.
    let n = sizes.readers;
    println!();
    println!(
        "4. {n} readers, one session, a read-lock instance each on one lock znode: {rounds} \
         alternating rounds of {run:?} (after one unreported round each)"
    );
    let [cu, kz] = peer_contenders(
        &mut peers,
        &format!("readers {n} {}", run.as_millis()),
        [0, 0],
    );
    let readers = alternate(
        &meter,
        rounds,
        ("read grant", "read grants"),
        [
            Some(Contender::new(
                || zk_loop(zk_read_locks(&zkw, &zl("readers"), n), run, false),
                zk_cpu,
                0,
            )),
            cu,
            kz,
        ],
    );
    assert!(children(&zk, &zl("readers")).is_empty());

    // 5. Hand-off.
    let k = sizes.handoffs;
    println!();
    println!(
        "5. two-party hand-off, one session: two instances pass a write lock back and forth \
         ({k} acquires each per round, {rounds} alternating rounds, after one unreported round \
         each); the {HANDOFF_OUTSIDE} requests of a round outside its hand-offs are not \
         counted{}",
        if peers[1].is_some() {
            format!(" (kazoo's: {KAZOO_HANDOFF_OUTSIDE}, its two new locks' `exists` included)")
        } else {
            String::new()
        }
    );
    let [cu, kz] = peer_contenders(
        &mut peers,
        &format!("handoff {k}"),
        [HANDOFF_OUTSIDE, KAZOO_HANDOFF_OUTSIDE],
    );
    let hand = alternate(
        &meter,
        rounds,
        ("hand-off", "hand-offs"),
        [
            Some(Contender::new(
                || handoff_rounds(&zkw, &zl("handoff"), k),
                zk_cpu,
                HANDOFF_OUTSIDE,
            )),
            cu,
            kz,
        ],
    );
    assert!(children(&zk, &zl("handoff")).is_empty());

    // Every session of the Java and Python sides ends before the check.
    for p in peers.into_iter().flatten() {
        p.quit();
    }

    // Nothing left behind.
    println!();
    let parents: Vec<String> = (0..LIBRARIES.len()).map(dir).collect();
    let all = descendants(&zk, &root);
    let leftover: Vec<&String> = all
        .iter()
        .filter(|p| !lock_znodes.contains(p) && !parents.contains(p))
        .collect();
    println!(
        "cleanup: {} znodes under {root}: the {} lock znodes and their {} parents; {} lock \
         nodes left{}",
        all.len(),
        lock_znodes.len(),
        parents.len(),
        leftover.len(),
        if leftover.is_empty() {
            String::new()
        } else {
            format!(": {leftover:?}")
        }
    );
    zkutil::delete_node_recursively(&zkw, &root).expect("remove the bench's root");
    let gone = zk.exists(&root, false).expect("exists").is_none();
    println!("cleanup: {root} removed: {gone}");
    zkw.close().expect("close");
    drop(classes);
    let load_end = loadavg();

    // 6. Summary.
    let mut t = Table { rows: Vec::new() };
    let recipe_unc = (!unc.recipe.rates.is_empty()).then_some(&unc.recipe);
    t.rate(
        "uncontended write lock vs InterProcessMutex / kazoo Lock (cycles/s)",
        &unc.exclusive,
        recipe_unc,
    );
    t.p50(
        "uncontended write lock vs InterProcessMutex / kazoo Lock: p50 cycle",
        &unc.exclusive,
        recipe_unc,
    );
    t.rate(
        "uncontended write lock vs RW lock's write lock (cycles/s)",
        &unc.rw_write,
        None,
    );
    t.p50(
        "uncontended write lock vs RW lock's write lock: p50 cycle",
        &unc.rw_write,
        None,
    );
    t.rate("uncontended read lock (cycles/s)", &unc.read, None);
    t.p50("uncontended read lock: p50 cycle", &unc.read, None);
    t.rate(
        &format!(
            "{} threads, one session, one write lock (grants/s)",
            sizes.threads
        ),
        &threads,
        None,
    );
    t.rate(
        &format!("{} processes, one write lock (grants/s)", sizes.processes),
        &procs,
        None,
    );
    t.rate(
        &format!(
            "{} readers, one session, one read lock (read grants/s)",
            sizes.readers
        ),
        &readers,
        None,
    );
    t.rate(
        "two-party hand-off (hand-offs/s, the bench's signalling included)",
        &hand,
        None,
    );
    t.count(
        "requests per uncontended cycle: write lock vs InterProcessMutex / kazoo Lock",
        Samples::requests,
        &unc.exclusive,
        recipe_unc,
    );
    t.count(
        "requests per uncontended cycle: write lock vs RW lock's write lock",
        Samples::requests,
        &unc.rw_write,
        None,
    );
    t.count(
        "requests per uncontended cycle: read lock",
        Samples::requests,
        &unc.read,
        None,
    );
    t.count(
        "notifications per uncontended cycle: write lock vs InterProcessMutex / kazoo Lock",
        Samples::notifications,
        &unc.exclusive,
        recipe_unc,
    );
    t.count(
        "requests per hand-off (floor 5)",
        Samples::requests,
        &hand,
        None,
    );
    t.count(
        "notifications per hand-off (floor 1)",
        Samples::notifications,
        &hand,
        None,
    );
    t.count(
        &format!("requests per grant, {} threads", sizes.threads),
        Samples::requests,
        &threads,
        None,
    );
    t.count(
        &format!("requests per grant, {} processes", sizes.processes),
        Samples::requests,
        &procs,
        None,
    );
    t.count(
        &format!("requests per read grant, {} readers", sizes.readers),
        Samples::requests,
        &readers,
        None,
    );
    t.cpu(
        "client CPU per uncontended cycle: write lock vs InterProcessMutex / kazoo Lock",
        &unc.exclusive,
        recipe_unc,
    );
    t.cpu(
        &format!("client CPU per grant, {} threads", sizes.threads),
        &threads,
        None,
    );
    t.cpu(
        &format!(
            "client CPU per grant, {} processes (all of them)",
            sizes.processes
        ),
        &procs,
        None,
    );
    t.cpu(
        &format!("client CPU per read grant, {} readers", sizes.readers),
        &readers,
        None,
    );
    t.cpu("client CPU per hand-off", &hand, None);

    println!();
    println!(
        "summary: {}; Linux {}; {cores} CPUs; load average {load_start} at start, {load_end} at \
         end; ZooKeeper server {zk_version}, {}; {}; {rounds} rounds per scenario; {:.0} s in all",
        utc_now(),
        kernel_release(),
        bench_servers.describe(),
        versions.join("; "),
        total.elapsed().as_secs_f64()
    );
    println!(
        "(rates and p50: medians over the rounds; ratio: zklock/Curator and zklock/kazoo, for \
         rates and p50 the median of the per-round ratios: above 1 zklock is faster for rates, \
         below 1 for p50 and counts; requests include pings, see the allowances above; client \
         CPU: user + system time of the library's processes, zklock's bench process or \
         workers, Curator's JVMs (JIT and GC included), kazoo's Pythons)"
    );
    println!();
    t.print();
    if !unc.perfect.rates.is_empty() {
        let per_round: Vec<f64> = unc.exclusive[ZKLOCK]
            .rates
            .iter()
            .zip(&unc.perfect.rates)
            .map(|(z, p)| z / p)
            .collect();
        let (min, max) = per_round
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
                (lo.min(*r), hi.max(*r))
            });
        println!();
        println!(
            "uncontended write lock over the perfect client (the Java client making its \
             requests with no lock logic, Curator's session): {:.0}% (per round {:.0}–{:.0}%; \
             {} against {} cycles/s, p50 {} against {})",
            100.0 * median_f64(per_round),
            100.0 * min,
            100.0 * max,
            fmt_opt(unc.exclusive[ZKLOCK].rate(), 0, ""),
            fmt_opt(unc.perfect.rate(), 0, ""),
            fmt_opt(unc.exclusive[ZKLOCK].p50(), 0, " µs"),
            fmt_opt(unc.perfect.p50(), 0, " µs"),
        );
    }
    assert!(leftover.is_empty(), "lock nodes left behind: {leftover:?}");
    assert!(gone, "{root} is still there");
}
