//! zklock's locks side by side with Apache Curator 5.4's (issue 16): prints
//! figures and zklock's ratio over Curator; asserts only that the locks work
//! and that nothing is left behind.
//!
//! `cargo bench --all-features --bench compare` (or `make bench`, which installs
//! Curator first: `make curator`). Uses `$ZK_SERVERS` if set (the request counts
//! then include every other client of those servers), else starts a ZooKeeper
//! server through `zklock::testing`. The Java side is
//! `benches/java/CuratorLockBench.java`, compiled at run time with `javac`
//! against Debian's jars in `/usr/share/java` (`libcurator-recipes-java` brings
//! Curator 5.4 and Guava; ZooKeeper's jars come with `zookeeper`). Without them
//! (or without a JDK) the bench prints a note and runs zklock alone; without
//! `zookeeper-recipes-lock.jar` only the third column is skipped.
//!
//! Both libraries work on the same server, under one root znode
//! (`/zklock-compare-<pid>`), every session with a 30 s timeout, and take turns:
//! a zklock round, a Curator round, a zklock round, ... (a shared machine's speed
//! drifts severalfold within seconds; alternating short rounds puts both under
//! the same conditions). A rate or a median cycle is the median over the rounds;
//! its ratio is the median of the per-round ratios (each zklock round against the
//! Curator round right after it). Before the rounds both warm up, zklock with the
//! same number of cycles as the JVM's JIT gets: uncontended cycles, then one
//! unreported round of each contended scenario.
//!
//! 1. **Uncontended**: one thread, one session, acquire + release in a loop,
//!    each cycle timed: cycles/s and the median (p50) cycle. zklock's write lock
//!    against Curator's `InterProcessMutex` and against the write lock of its
//!    `InterProcessReadWriteLock`; zklock's read lock against Curator's read lock.
//! 2. **Threads**: `ZK_COMPARE_THREADS` threads of one process, one session
//!    (one `ZooKeeperWatcher`; one `CuratorFramework`), each thread with its own
//!    write-lock instance (`InterProcessMutex`) on one lock znode, acquire +
//!    release until the round's time is up: grants (hand-offs) per second.
//! 3. **Processes**: `ZK_COMPARE_PROCESSES` processes, each with its own session
//!    and lock instance, contending on one lock znode: grants/s in total. zklock's
//!    are this bench binary re-executed as a worker (`ZKLOCK_COMPARE_WORKER`
//!    names the lock znode); Curator's are JVMs running the Java bench's worker
//!    mode. Every worker is started, connected and says `ready` before the first
//!    round (JVM start-up is outside the timing), then warms up: a JVM's JIT needs
//!    it, zklock's workers do the same. The workers warm up in pairs, each pair on
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
//!    which sees the waiter's `getData` with a watcher once the server answered),
//!    so that every grant but the first is a queued hand-off. The first grant's
//!    create + getChildren and the last release's delete are outside the
//!    hand-offs and subtracted (3 per round). The floor: 5 requests (the waiter's
//!    create, getChildren and watch on its predecessor; the holder's delete; the
//!    woken waiter's getChildren) and 1 notification.
//!
//!    Each round also reads the CPU time (user + system, `/proc/<pid>/stat`, 10 ms
//!    ticks) of the library's processes before and after: zklock's bench process
//!    (its sessions' threads and the lock threads; its main thread otherwise only
//!    waits) or its workers, Curator's JVM or JVMs (JIT and GC included): client
//!    CPU per cycle, grant or hand-off.
//! 6. **Summary**: a markdown table, scenario | zklock | Curator | ratio
//!    (zklock/Curator) | ZooKeeper's recipe lock, with the date, kernel, cores,
//!    load average, and the ZooKeeper and Curator versions.
//!
//! The third column is ZooKeeper's own recipe (`org.apache.zookeeper.recipes.
//! lock.WriteLock`, asynchronous: `lock()` then wait for its listener's
//! `lockAcquired`; `unlock()`), uncontended only: under contention ZooKeeper
//! 3.8.0's recipe can leave a waiter without a watch (when the node it would
//! wait on is deleted between its `getChildren` and its `exists`, `lock()`
//! returns false and nothing ever calls back), so its waiters hang; and it knows
//! its own node by the session id, so two of its instances cannot share a
//! session on one lock znode.
//!
//! Lock znodes are persistent and made beforehand for both libraries, outside
//! the windows. Curator would otherwise make them as containers, which the test
//! server reaps within a second once empty; a reaped one costs Curator's next
//! acquire a `NoNode` and the creates of the missing parents. At the end every
//! lock znode must have no child left (checked and printed), and the root is
//! removed.
//!
//! Sizes: `ZK_COMPARE_ROUNDS` (rounds per scenario, default 5),
//! `ZK_COMPARE_CYCLES` (uncontended cycles per form per round, 400),
//! `ZK_COMPARE_WARMUP` (uncontended warm-up cycles per library, 4000),
//! `ZK_COMPARE_ROUND_MS` (length of a contended round, 1500),
//! `ZK_COMPARE_THREADS` (8), `ZK_COMPARE_PROCESSES` (8), `ZK_COMPARE_READERS`
//! (8), `ZK_COMPARE_HANDOFFS` (acquires per party per hand-off round, 100),
//! `ZK_COMPARE_WORKER_WARMUP` (warm-up cycles per worker process, in pairs,
//! 5000: the JVMs' share of scenario 3 depends on it, as each JVM warms its own
//! JIT: on a loaded two-core machine Curator's grants/s there were ~3× below
//! zklock's after 2,000 cycles, ~1.8× after 8,000); `ZK_COMPARE_RECIPE=0` leaves
//! out ZooKeeper's recipe. About three minutes on two cores. The JVMs run with
//! `-Xmx256m -XX:+UseSerialGC` (nine of them on two cores).

use std::env;
use std::io::{self, BufRead, Write};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::ZooKeeper;
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, LockStep, ZkInterProcessReadWriteLock,
    ZkInterProcessWriteLock,
};
use zklock::testing::ZkServer;
use zklock::{zkutil, ZkError, ZooKeeperWatcher};

mod common;
use common::*;

/// Set in a worker process of scenario 3: the lock znode it contends on.
const WORKER_ENV: &str = "ZKLOCK_COMPARE_WORKER";
/// The connect string of a worker process.
const WORKER_SERVERS_ENV: &str = "ZKLOCK_COMPARE_SERVERS";

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

/// How long a Java command or a worker's round may take before the bench gives up.
const ANSWER_BOUND: Duration = Duration::from_secs(180);
/// How long the workers may take to start and connect.
const READY_BOUND: Duration = Duration::from_secs(180);
/// Acquire bound inside the hand-off.
const WAKE_BOUND: Duration = Duration::from_secs(30);
/// Requests of a hand-off round outside its hand-offs: the first grant's create
/// and getChildren, the last release's delete.
const HANDOFF_OUTSIDE: u64 = 3;

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

/// What the two hand-off threads tell each other.
enum Turn {
    /// My watch on your node is set: release.
    Queued,
    /// I am done: release the last time.
    Done,
}

/// Two write-lock instances pass the lock back and forth `k` times each; each
/// holder releases only once the other's watch is set. Returns the hand-offs
/// and their time.
fn zk_handoff(zkw: &ZooKeeperWatcher, znode: &str, k: usize) -> (u64, Duration) {
    let (to_a, a_rx) = mpsc::channel::<Turn>();
    let (to_b, b_rx) = mpsc::channel::<Turn>();
    let make = |name: &str, tell_other: Sender<Turn>| {
        let tell = Mutex::new(tell_other);
        ZkInterProcessWriteLock::new(zkw, znode, name.as_bytes(), None)
            .expect("lock")
            .with_step_hook(move |step, _path| {
                if step == LockStep::Watching {
                    let _ = tell.lock().unwrap().send(Turn::Queued);
                }
            })
    };
    let a = make("a", to_b.clone());
    let b = make("b", to_a.clone());
    let barrier = Arc::new(Barrier::new(3));
    let run = |lock: ZkInterProcessWriteLock, rx: Receiver<Turn>, other: Sender<Turn>| {
        let barrier = barrier.clone();
        thread::spawn(move || {
            barrier.wait();
            let mut other_done = false;
            for _ in 0..k {
                lock.acquire().expect("hand-off acquire");
                if !other_done {
                    match rx.recv_timeout(WAKE_BOUND) {
                        Ok(Turn::Queued) => {}
                        Ok(Turn::Done) => other_done = true,
                        Err(e) => panic!("hand-off: no word from the other thread: {e}"),
                    }
                }
                lock.release().expect("hand-off release");
            }
            let _ = other.send(Turn::Done);
        })
    };
    let ta = run(a, a_rx, to_b);
    let tb = run(b, b_rx, to_a);
    barrier.wait();
    let started = Instant::now();
    ta.join().expect("hand-off thread");
    tb.join().expect("hand-off thread");
    (2 * k as u64 - 1, started.elapsed())
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
// Curator's side and the workers
// ---------------------------------------------------------------------------

/// The Java bench in `serve` mode.
struct Curator {
    jvm: LineProcess,
    version: String,
    client_version: String,
}

impl Curator {
    /// A command's answer as numbers; panics on an `error` answer.
    fn ask(&mut self, command: &str) -> std::collections::HashMap<String, f64> {
        let line = self
            .jvm
            .ask(command, ANSWER_BOUND)
            .unwrap_or_else(|e| panic!("Curator `{command}`: {e}"));
        assert!(line.starts_with("ok "), "Curator `{command}`: {line}");
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
}

/// The processes of scenario 3, one library's.
struct Workers {
    procs: Vec<LineProcess>,
}

impl Workers {
    /// Starts `n` workers, `make(i)` each, and waits until every one is ready.
    fn start(n: usize, what: &str, make: impl Fn(usize) -> Command) -> Workers {
        let procs: Vec<LineProcess> = (0..n)
            .map(|i| {
                LineProcess::spawn(&format!("{what} worker {i}"), make(i))
                    .unwrap_or_else(|e| panic!("cannot start a {what} worker: {e}"))
            })
            .collect();
        for p in &procs {
            let line = p.recv(READY_BOUND).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(line.trim(), "ready", "{}: {line}", p.name);
        }
        Workers { procs }
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

/// A round of one library: the units (grants, hand-offs) and their time.
type Round<'a> = &'a mut dyn FnMut() -> (u64, Duration);

/// The CPU time a library's processes have used so far.
type Cpu<'a> = &'a dyn Fn() -> Duration;

/// One unreported round of each, then `rounds` alternating rounds (zklock
/// first), each inside its own window (`adjust` corrects its traffic) and
/// between two readings of its processes' CPU time.
fn alternate(
    meter: &Meter,
    rounds: usize,
    (unit, units): (&str, &str),
    (zklock, zk_cpu): (Round<'_>, Cpu<'_>),
    mut curator: Option<(Round<'_>, Cpu<'_>)>,
    adjust: fn(Traffic) -> Traffic,
) -> (Samples, Samples) {
    let (mut zs, mut cs) = (Samples::default(), Samples::default());
    zklock();
    if let Some((c, _)) = curator.as_mut() {
        c();
    }
    for r in 0..rounds {
        let (w, cpu) = (meter.window(), zk_cpu());
        let (n, elapsed) = zklock();
        let cpu = zk_cpu().saturating_sub(cpu);
        zs.push(n, elapsed, None, adjust(meter.stop(w)), cpu);
        let mut line = format!("  round {r}: zklock {:>7.0} {units}/s", zs.rates[r]);
        if let Some((c, cu_cpu)) = curator.as_mut() {
            let (w, cpu) = (meter.window(), cu_cpu());
            let (n, elapsed) = c();
            let cpu = cu_cpu().saturating_sub(cpu);
            cs.push(n, elapsed, None, adjust(meter.stop(w)), cpu);
            line += &format!("  |  Curator {:>7.0} {units}/s", cs.rates[r]);
        }
        println!("{line}");
    }
    for (name, s) in [("zklock", &zs), ("Curator", &cs)] {
        if let Some(rate) = s.rate() {
            println!(
                "  {name:<8} median {rate:>7.0} {units}/s; {}",
                s.traffic_text(unit)
            );
        }
    }
    (zs, cs)
}

/// Scenario 1's figures.
struct Uncontended {
    zk_write: Samples,
    zk_read: Samples,
    cu_mutex: Samples,
    cu_write: Samples,
    cu_read: Samples,
    recipe: Samples,
}

fn uncontended(
    sizes: &Sizes,
    meter: &Meter,
    zkw: &ZooKeeperWatcher,
    znode: &str,
    mut curator: Option<&mut Curator>,
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
    if let Some(c) = curator.as_deref_mut() {
        c.uncontended("mutex", sizes.warmup.max(1));
        c.uncontended("rw-write", some);
        c.uncontended("rw-read", some);
        if recipe {
            c.uncontended("zk-recipe", some);
        }
    }
    let mut u = Uncontended {
        zk_write: Samples::default(),
        zk_read: Samples::default(),
        cu_mutex: Samples::default(),
        cu_write: Samples::default(),
        cu_read: Samples::default(),
        recipe: Samples::default(),
    };
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
    let cu_form = |c: &mut Curator, form: &str, s: &mut Samples| {
        let pid = Some(c.jvm.pid());
        let (w, cpu) = (meter.window(), cpu_time(pid));
        let (n, elapsed, p50) = c.uncontended(form, per_round);
        let cpu = cpu_time(pid).saturating_sub(cpu);
        let t = meter.stop(w);
        s.push(n, elapsed, Some(p50), t, cpu);
    };
    for r in 0..rounds {
        zk_form(&write, &mut u.zk_write);
        report(r, "zklock write", &u.zk_write);
        if let Some(c) = curator.as_deref_mut() {
            cu_form(c, "mutex", &mut u.cu_mutex);
            report(r, "Curator InterProcessMutex", &u.cu_mutex);
            cu_form(c, "rw-write", &mut u.cu_write);
            report(r, "Curator RW write", &u.cu_write);
        }
        zk_form(&read, &mut u.zk_read);
        report(r, "zklock read", &u.zk_read);
        if let Some(c) = curator.as_deref_mut() {
            cu_form(c, "rw-read", &mut u.cu_read);
            report(r, "Curator RW read", &u.cu_read);
            if recipe {
                cu_form(c, "zk-recipe", &mut u.recipe);
                report(r, "ZooKeeper recipe WriteLock", &u.recipe);
            }
        }
    }
    for (name, s) in [
        ("zklock write", &u.zk_write),
        ("zklock read", &u.zk_read),
        ("Curator InterProcessMutex", &u.cu_mutex),
        ("Curator RW write", &u.cu_write),
        ("Curator RW read", &u.cu_read),
        ("ZooKeeper recipe WriteLock", &u.recipe),
    ] {
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

/// Scenario 3: starts both libraries' workers, warms them up, alternates.
#[allow(clippy::too_many_arguments)]
fn processes(
    sizes: &Sizes,
    meter: &Meter,
    servers: &str,
    zk_znode: &str,
    cu_znode: &str,
    warm_znode: &dyn Fn(&str, usize) -> String,
    classes: Option<&JavaClasses>,
) -> (Samples, Samples) {
    let run = sizes.round;
    println!();
    println!(
        "3. {} processes, a session each, contending on one lock znode: {} alternating rounds \
         of {run:?} (after {} warm-up cycles each, in pairs on znodes of their own, and one \
         unreported round)",
        sizes.processes, sizes.rounds, sizes.worker_warmup
    );
    let exe = env::current_exe().expect("current_exe");
    let started = Instant::now();
    let mut cu_workers = classes.map(|c| {
        Workers::start(sizes.processes, "Curator", |_| {
            let mut cmd = c.java(&JVM_OPTIONS, "CuratorLockBench");
            cmd.args(["worker", servers, cu_znode]);
            cmd
        })
    });
    let mut zk_workers = Workers::start(sizes.processes, "zklock", |_| {
        let mut cmd = Command::new(&exe);
        cmd.env(WORKER_ENV, zk_znode)
            .env(WORKER_SERVERS_ENV, servers)
            .env_remove("RUST_LOG");
        cmd
    });
    println!(
        "  {} workers started and connected in {:.1} s",
        zk_workers.procs.len() + cu_workers.as_ref().map_or(0, |w| w.procs.len()),
        started.elapsed().as_secs_f64()
    );
    let cycles = sizes.worker_warmup;
    if cycles > 0 {
        let zk_warm = zk_workers.warm(|i| warm_znode("zklock", i / 2), cycles);
        let cu_warm = cu_workers
            .as_mut()
            .map(|w| w.warm(|i| warm_znode("curator", i / 2), cycles));
        println!(
            "  warm-up: zklock's workers {:.1} s{}",
            zk_warm.as_secs_f64(),
            cu_warm.map_or_else(String::new, |d| format!(
                ", Curator's {:.1} s",
                d.as_secs_f64()
            ))
        );
    }
    let pids = |w: &Workers| w.procs.iter().map(LineProcess::pid).collect::<Vec<u32>>();
    let cpu_of = |pids: Vec<u32>| move || pids.iter().map(|p| cpu_time(Some(*p))).sum();
    let zk_cpu = cpu_of(pids(&zk_workers));
    let cu_cpu = cpu_of(cu_workers.as_ref().map(pids).unwrap_or_default());
    let mut cu_round = cu_workers.as_mut().map(|w| move || w.round(run));
    let pair = alternate(
        meter,
        sizes.rounds,
        ("grant", "grants"),
        (&mut || zk_workers.round(run), &zk_cpu),
        cu_round
            .as_mut()
            .map(|f| (f as Round<'_>, &cu_cpu as Cpu<'_>)),
        |t| t,
    );
    zk_workers.stop();
    if let Some(w) = cu_workers {
        w.stop();
    }
    pair
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

/// Starts the Java bench in `serve` mode and waits until it is connected.
fn start_curator(classes: &JavaClasses, servers: &str, root: &str) -> Curator {
    let mut cmd = classes.java(&JVM_OPTIONS, "CuratorLockBench");
    cmd.args(["serve", servers, root]);
    let jvm = LineProcess::spawn("Curator bench JVM", cmd).expect("start java");
    let ready = jvm
        .recv(READY_BOUND)
        .unwrap_or_else(|e| panic!("Curator bench JVM: {e}"));
    let w: Vec<&str> = ready.split_whitespace().collect();
    assert_eq!(w.first(), Some(&"ready"), "Curator bench JVM: {ready}");
    let version = match w.get(2) {
        Some(v) if *v != "unknown" => v.to_string(),
        _ => jar_version("curator-recipes-").unwrap_or_else(|| "unknown".to_string()),
    };
    let client_version = short_version(w.get(4).map_or("unknown", |v| v));
    println!(
        "Curator {version} (Java ZooKeeper client {client_version}), JVM pid {}",
        jvm.pid()
    );
    Curator {
        jvm,
        version,
        client_version,
    }
}

/// A row of the summary table.
struct Row {
    scenario: String,
    zklock: String,
    curator: String,
    ratio: String,
    recipe: String,
}

fn fmt_opt(v: Option<f64>, digits: usize, unit: &str) -> String {
    v.map_or_else(|| "—".to_string(), |v| format!("{v:.digits$}{unit}"))
}

/// One figure of a library's samples (`Samples::requests`, ...).
type Figure = fn(&Samples) -> Option<f64>;

/// The summary's rows (each method's `recipe`: the third column's figures, where it has any).
struct Table {
    rows: Vec<Row>,
    have_curator: bool,
}

impl Table {
    fn curator(&self, v: String) -> String {
        if self.have_curator {
            v
        } else {
            "—".to_string()
        }
    }

    /// Rates: medians over the rounds, and the median of the per-round ratios.
    fn rate(&mut self, scenario: &str, z: &Samples, c: &Samples, recipe: Option<&Samples>) {
        self.rows.push(Row {
            scenario: scenario.to_string(),
            zklock: fmt_opt(z.rate(), 0, " /s"),
            curator: self.curator(fmt_opt(c.rate(), 0, " /s")),
            ratio: fmt_opt(ratio(&z.rates, &c.rates), 2, "×"),
            recipe: recipe.map_or_else(|| "—".to_string(), |r| fmt_opt(r.rate(), 0, " /s")),
        });
    }

    /// The median cycle, the same way.
    fn p50(&mut self, scenario: &str, z: &Samples, c: &Samples, recipe: Option<&Samples>) {
        self.rows.push(Row {
            scenario: scenario.to_string(),
            zklock: fmt_opt(z.p50(), 0, " µs"),
            curator: self.curator(fmt_opt(c.p50(), 0, " µs")),
            ratio: fmt_opt(ratio(&z.p50s, &c.p50s), 2, "×"),
            recipe: recipe.map_or_else(|| "—".to_string(), |r| fmt_opt(r.p50(), 0, " µs")),
        });
    }

    /// A count per unit over all rounds.
    fn count(
        &mut self,
        scenario: &str,
        f: Figure,
        z: &Samples,
        c: &Samples,
        recipe: Option<&Samples>,
    ) {
        self.total(scenario, (f, 2, ""), z, c, recipe);
    }

    /// Client CPU per unit over all rounds.
    fn cpu(&mut self, scenario: &str, z: &Samples, c: &Samples, recipe: Option<&Samples>) {
        self.total(scenario, (Samples::cpu_per, 0, " µs"), z, c, recipe);
    }

    /// `f` over all rounds, shown with `digits` and `unit`; the ratio of the two.
    fn total(
        &mut self,
        scenario: &str,
        (f, digits, unit): (Figure, usize, &str),
        z: &Samples,
        c: &Samples,
        recipe: Option<&Samples>,
    ) {
        let (zv, cv) = (f(z), f(c));
        self.rows.push(Row {
            scenario: scenario.to_string(),
            zklock: fmt_opt(zv, digits, unit),
            curator: self.curator(fmt_opt(cv, digits, unit)),
            ratio: match (zv, cv) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
                _ => "—".to_string(),
            },
            recipe: recipe.map_or_else(|| "—".to_string(), |r| fmt_opt(f(r), digits, unit)),
        });
    }

    fn print(&self) {
        println!(
            "| scenario | zklock | Curator | ratio (zklock/Curator) | ZooKeeper recipe WriteLock |"
        );
        println!("|---|---|---|---|---|");
        for r in &self.rows {
            println!(
                "| {} | {} | {} | {} | {} |",
                r.scenario, r.zklock, r.curator, r.ratio, r.recipe
            );
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

    let _server;
    let servers = match env::var("ZK_SERVERS") {
        Ok(s) if !s.trim().is_empty() => s.trim().to_string(),
        _ => {
            let server = ZkServer::start().expect("start a ZooKeeper server");
            let s = server.connect_string();
            _server = server;
            s
        }
    };
    let load_start = loadavg();
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "zklock vs Apache Curator: lock benchmark against {servers} ({cores} CPUs, load \
         {load_start})"
    );

    // The znodes: every lock znode of both libraries, made now.
    let root = format!("/zklock-compare-{}", std::process::id());
    let zkw = connect(&servers, "compare-zklock");
    let zk = zkw.zookeeper().clone();
    let zl = |name: &str| format!("{root}/zklock/{name}");
    let cu = |name: &str| format!("{root}/curator/{name}");
    let warm_znode = |library: &str, i: usize| format!("{root}/{library}/warm-{i}");
    let lock_znodes: Vec<String> = ["uncontended", "threads", "processes", "readers", "handoff"]
        .iter()
        .map(|n| zl(n))
        .chain(
            [
                "uncontended-mutex",
                "uncontended-rw",
                "uncontended-recipe",
                "threads",
                "processes",
                "readers",
                "handoff",
            ]
            .iter()
            .map(|n| cu(n)),
        )
        .chain(
            (0..sizes.processes.div_ceil(2))
                .flat_map(|i| [warm_znode("zklock", i), warm_znode("curator", i)]),
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
    let recipe_jar = sizes.recipe && Path::new(RECIPE_JAR).exists();
    if recipe_jar {
        jars.push(RECIPE_JAR);
    } else if sizes.recipe {
        println!("(ZooKeeper's recipe lock skipped: {RECIPE_JAR} not found)");
    }
    let classes = match compile_java("compare", &["benches/java/CuratorLockBench.java"], &jars) {
        Ok(c) => Some(c),
        Err(e) => {
            println!(
                "NOTE: Curator skipped ({e}); install it with `make curator` (Debian: \
                 apt-get install libcurator-recipes-java). zklock's figures only."
            );
            None
        }
    };
    let mut curator = classes
        .as_ref()
        .map(|c| start_curator(c, &servers, &format!("{root}/curator")));
    let curator_version = curator
        .as_ref()
        .map(|c| format!("{} (Java ZooKeeper client {})", c.version, c.client_version));
    let recipe = recipe_jar && curator.is_some();

    // 1. Uncontended.
    let unc = uncontended(
        &sizes,
        &meter,
        &zkw,
        &zl("uncontended"),
        curator.as_mut(),
        recipe,
    );

    let (rounds, run) = (sizes.rounds, sizes.round);
    // CPU time: zklock's is this process's (its sessions' threads and the lock
    // threads; the bench's own main thread only waits), Curator's its JVM's.
    let zk_cpu = || cpu_time(None);
    let jvm_pid = curator.as_ref().map(|c| c.jvm.pid());
    let cu_cpu = move || cpu_time(jvm_pid);

    // 2. Threads.
    let n = sizes.threads;
    println!();
    println!(
        "2. {n} threads, one session, a write-lock instance each on one lock znode: {rounds} \
         alternating rounds of {run:?} (after one unreported round each)"
    );
    let mut cu_round = curator
        .as_mut()
        .map(|c| move || c.grants(&format!("threads {n} {}", run.as_millis())));
    let (zk_threads, cu_threads) = alternate(
        &meter,
        rounds,
        ("grant", "grants"),
        (
            &mut || zk_loop(zk_write_locks(&zkw, &zl("threads"), n), run, true),
            &zk_cpu,
        ),
        cu_round
            .as_mut()
            .map(|f| (f as Round<'_>, &cu_cpu as Cpu<'_>)),
        |t| t,
    );
    assert!(children(&zk, &zl("threads")).is_empty());

    // 3. Processes.
    let (zk_procs, cu_procs) = processes(
        &sizes,
        &meter,
        &servers,
        &zl("processes"),
        &cu("processes"),
        &warm_znode,
        classes.as_ref(),
    );
    assert!(children(&zk, &zl("processes")).is_empty());

    // 4. Readers.
    let n = sizes.readers;
    println!();
    println!(
        "4. {n} readers, one session, a read-lock instance each on one lock znode: {rounds} \
         alternating rounds of {run:?} (after one unreported round each)"
    );
    let mut cu_round = curator
        .as_mut()
        .map(|c| move || c.grants(&format!("readers {n} {}", run.as_millis())));
    let (zk_readers, cu_readers) = alternate(
        &meter,
        rounds,
        ("read grant", "read grants"),
        (
            &mut || zk_loop(zk_read_locks(&zkw, &zl("readers"), n), run, false),
            &zk_cpu,
        ),
        cu_round
            .as_mut()
            .map(|f| (f as Round<'_>, &cu_cpu as Cpu<'_>)),
        |t| t,
    );
    assert!(children(&zk, &zl("readers")).is_empty());

    // 5. Hand-off.
    let k = sizes.handoffs;
    println!();
    println!(
        "5. two-party hand-off, one session: two instances pass a write lock back and forth \
         ({k} acquires each per round, {rounds} alternating rounds, after one unreported round \
         each); the {HANDOFF_OUTSIDE} requests of a round outside its hand-offs are not counted"
    );
    let mut cu_round = curator
        .as_mut()
        .map(|c| move || c.grants(&format!("handoff {k}")));
    let (zk_hand, cu_hand) = alternate(
        &meter,
        rounds,
        ("hand-off", "hand-offs"),
        (&mut || zk_handoff(&zkw, &zl("handoff"), k), &zk_cpu),
        cu_round
            .as_mut()
            .map(|f| (f as Round<'_>, &cu_cpu as Cpu<'_>)),
        |mut t| {
            // The requests outside the hand-offs, and their replies.
            t.received = t.received.saturating_sub(HANDOFF_OUTSIDE);
            t.sent = t.sent.saturating_sub(HANDOFF_OUTSIDE);
            t
        },
    );
    assert!(children(&zk, &zl("handoff")).is_empty());

    // Every session of the Java side ends before the check.
    if let Some(mut c) = curator.take() {
        let _ = c.jvm.send("quit");
        match c.jvm.finish(Duration::from_secs(30)) {
            Ok(s) if s.success() => {}
            Ok(s) => println!("(the Curator bench JVM ended with {s})"),
            Err(e) => println!("(the Curator bench JVM: {e})"),
        }
    }

    // Nothing left behind.
    println!();
    let parents = [format!("{root}/zklock"), format!("{root}/curator")];
    let all = descendants(&zk, &root);
    let leftover: Vec<&String> = all
        .iter()
        .filter(|p| !lock_znodes.contains(p) && !parents.contains(p))
        .collect();
    println!(
        "cleanup: {} znodes under {root}: the {} lock znodes and their 2 parents; {} lock \
         nodes left{}",
        all.len(),
        lock_znodes.len(),
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
    let mut t = Table {
        rows: Vec::new(),
        have_curator: curator_version.is_some(),
    };
    let recipe_unc = (!unc.recipe.rates.is_empty()).then_some(&unc.recipe);
    t.rate(
        "uncontended write lock vs InterProcessMutex (cycles/s)",
        &unc.zk_write,
        &unc.cu_mutex,
        recipe_unc,
    );
    t.p50(
        "uncontended write lock vs InterProcessMutex: p50 cycle",
        &unc.zk_write,
        &unc.cu_mutex,
        recipe_unc,
    );
    t.rate(
        "uncontended write lock vs RW lock's write lock (cycles/s)",
        &unc.zk_write,
        &unc.cu_write,
        None,
    );
    t.p50(
        "uncontended write lock vs RW lock's write lock: p50 cycle",
        &unc.zk_write,
        &unc.cu_write,
        None,
    );
    t.rate(
        "uncontended read lock (cycles/s)",
        &unc.zk_read,
        &unc.cu_read,
        None,
    );
    t.p50(
        "uncontended read lock: p50 cycle",
        &unc.zk_read,
        &unc.cu_read,
        None,
    );
    t.rate(
        &format!(
            "{} threads, one session, one write lock (grants/s)",
            sizes.threads
        ),
        &zk_threads,
        &cu_threads,
        None,
    );
    t.rate(
        &format!("{} processes, one write lock (grants/s)", sizes.processes),
        &zk_procs,
        &cu_procs,
        None,
    );
    t.rate(
        &format!(
            "{} readers, one session, one read lock (read grants/s)",
            sizes.readers
        ),
        &zk_readers,
        &cu_readers,
        None,
    );
    t.rate(
        "two-party hand-off (hand-offs/s, the bench's signalling included)",
        &zk_hand,
        &cu_hand,
        None,
    );
    t.count(
        "requests per uncontended cycle: write lock vs InterProcessMutex",
        Samples::requests,
        &unc.zk_write,
        &unc.cu_mutex,
        recipe_unc,
    );
    t.count(
        "requests per uncontended cycle: write lock vs RW lock's write lock",
        Samples::requests,
        &unc.zk_write,
        &unc.cu_write,
        None,
    );
    t.count(
        "requests per uncontended cycle: read lock",
        Samples::requests,
        &unc.zk_read,
        &unc.cu_read,
        None,
    );
    t.count(
        "notifications per uncontended cycle: write lock vs InterProcessMutex",
        Samples::notifications,
        &unc.zk_write,
        &unc.cu_mutex,
        recipe_unc,
    );
    t.count(
        "requests per hand-off (floor 5)",
        Samples::requests,
        &zk_hand,
        &cu_hand,
        None,
    );
    t.count(
        "notifications per hand-off (floor 1)",
        Samples::notifications,
        &zk_hand,
        &cu_hand,
        None,
    );
    t.count(
        &format!("requests per grant, {} threads", sizes.threads),
        Samples::requests,
        &zk_threads,
        &cu_threads,
        None,
    );
    t.count(
        &format!("requests per grant, {} processes", sizes.processes),
        Samples::requests,
        &zk_procs,
        &cu_procs,
        None,
    );
    t.count(
        &format!("requests per read grant, {} readers", sizes.readers),
        Samples::requests,
        &zk_readers,
        &cu_readers,
        None,
    );
    t.cpu(
        "client CPU per uncontended cycle: write lock vs InterProcessMutex",
        &unc.zk_write,
        &unc.cu_mutex,
        recipe_unc,
    );
    t.cpu(
        &format!("client CPU per grant, {} threads", sizes.threads),
        &zk_threads,
        &cu_threads,
        None,
    );
    t.cpu(
        &format!(
            "client CPU per grant, {} processes (all of them)",
            sizes.processes
        ),
        &zk_procs,
        &cu_procs,
        None,
    );
    t.cpu(
        &format!("client CPU per read grant, {} readers", sizes.readers),
        &zk_readers,
        &cu_readers,
        None,
    );
    t.cpu("client CPU per hand-off", &zk_hand, &cu_hand, None);

    println!();
    println!(
        "summary: {}; Linux {}; {cores} CPUs; load average {load_start} at start, {load_end} at \
         end; ZooKeeper server {zk_version}; Curator {}; {rounds} rounds per scenario; {:.0} s \
         in all",
        utc_now(),
        kernel_release(),
        curator_version.as_deref().unwrap_or("— (not installed)"),
        total.elapsed().as_secs_f64()
    );
    println!(
        "(rates and p50: medians over the rounds; ratio: zklock/Curator, for rates and p50 the \
         median of the per-round ratios: above 1 zklock is faster for rates, below 1 for p50 \
         and counts; requests include pings, see the allowances above; client CPU: user + \
         system time of the library's processes, zklock's bench process or workers, Curator's \
         JVMs, JIT and GC included)"
    );
    println!();
    t.print();
    assert!(leftover.is_empty(), "lock nodes left behind: {leftover:?}");
    assert!(gone, "{root} is still there");
}
