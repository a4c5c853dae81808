//! Scale benchmark in one process and across processes (issue 16, part 3):
//! prints figures; fails only on a wrong result (a waiter that never gets its
//! lock, two holders at once, a node or a watch left behind).
//!
//! `cargo bench --all-features --bench scale`. Uses `$ZK_SERVERS` if set (the
//! request counts then include every other client of those servers), else
//! starts a ZooKeeper server through `zklock::testing` (no limit on connections
//! per address). Env vars:
//!
//! - `ZK_SCALE_WAITERS` (default `1,1000,10000`): the numbers of waiters of part
//!   1, in the order run; 1 is the baseline, measured in rounds half before and
//!   half after the others (and always, listed or not);
//! - `ZK_SCALE_SAMPLES` (300): measured releases per number of waiters;
//! - `ZK_SCALE_ONE_ROUNDS` (200): measured single-waiter rounds (after 20 more);
//! - `ZK_BENCH_WAITER_STACK_KIB` (128): the stack of every waiting or
//!   contending thread;
//! - `ZK_SCALE_IDLE_MS` (2000): the window in which the CPU time of the process
//!   is read while its waiters wait;
//! - `ZK_SCALE_PROCS` (4), `ZK_SCALE_LOCKS` (1000), `ZK_SCALE_PER_LOCK` (2),
//!   `ZK_SCALE_SECS` (20): part 2's processes, lock znodes, threads per lock per
//!   process and timed duration;
//! - `ZK_SCALE_FUTEX` (on; `0` skips it): part 1 again with the futex hash
//!   raised (1b); `ZK_SCALE_FUTEX_SLOTS` (16384, a power of two): its size;
//!   `ZK_SCALE_FUTEX_WAITERS` (1 and the largest of `ZK_SCALE_WAITERS`): its
//!   numbers of waiters; `CC` (`gcc`): the compiler of its shim;
//! - `ZK_SCALE_PARTS` (`waiters,contention,sessions,held,directory`): the
//!   parts to run;
//! - `ZK_SCALE_SESSIONS` (`100,1000`), `ZK_SCALE_HELD` (`10000`),
//!   `ZK_SCALE_DIRECTORY` (`1000,10000`), `ZK_SCALE_HANDOFFS` (200): parts 4–6's
//!   sizes (see `benches/scale_side/mod.rs`); `ZK_SCALE_IMPLS`
//!   (`zklock,curator,kazoo`): the anchors beside zklock there;
//!   `ZK_COMPARE_PYTHON`: the python that imports kazoo (default the venv of
//!   `make kazoo`);
//! - `ZK_SCALE_SHORT=1`: a smoke run, every size small (the knobs above not
//!   set: 1 and 100 waiters, 20 samples, no futex pass, 2 processes × 50 locks
//!   for 2 s, 10 and 50 sessions, 300 held locks, directories of 50 and 200
//!   waiters with 20 hand-offs); about a minute.
//!
//! Sizes of the machine: 10,000 threads of 128 KiB stack reserve 1.3 GiB of
//! address space and 20,000 memory maps (`vm.max_map_count`, 65,530 by
//! default); `ulimit -u` and `kernel.threads-max` must allow them, and part 2's
//! 4 × 2,000 threads. The throwaway server has `maxClientCnxns=0` (unlimited;
//! ZooKeeper's default is 60 per address, more than this bench's 8 sessions);
//! no reply comes near `jute.maxbuffer` (1 MB): the bench never lists its
//! 10,000 lock znodes, and a lock znode has at most 2 children in part 1 and 8
//! in part 2.
//!
//! 1. **N threads waiting on distinct locks through one `ZooKeeperWatcher`**,
//!    for each N: a holder session holds the write lock of each of N lock
//!    znodes (acquired by 4 threads); then one thread per lock blocks in
//!    `acquire()` through one waiter `ZooKeeperWatcher` (queued: each told its
//!    `LockStep::Watching` through the step hook, then the server's `wchp` shows
//!    every held node watched). Printed for each N: the time to queue; RSS and
//!    VmSize before and after (per waiter: the delta / N; VmSize is what the
//!    stacks reserve); threads; the waiter watcher's listeners, the client's
//!    `watch_count` and the server's `zk_watch_count`; the CPU the process
//!    burns while the N wait and its context switches per second (all its
//!    threads, over `ZK_SCALE_IDLE_MS`); the cost of `zkw.process(..)` (HBase's
//!    listener dispatch) per event for an unrelated path and for a waited node's
//!    sibling with the N waiting (with 10 `DeletionListener`s as the reference,
//!    measured first; the waiters themselves wait on per-watch watchers held by
//!    the client, not on listeners, so this must stay flat: fails past 3× the
//!    10-listener cost); then **release → acquired**: for `ZK_SCALE_SAMPLES`
//!    evenly spread locks, after the same 2 ms of quiet (`SETTLE`), the time
//!    from the holder's `release()` call to that waiter's `acquire()` returning
//!    (its thread sends the instant at once); p50 and p99, and the ratio of p50
//!    to the single waiter's; and its parts (p50 of each, from the `release()`
//!    call): the holder's `release()` returned, the waiter was woken
//!    (`LockStep::Woken`), it had listed the children (`LockStep::Listed`, the
//!    getChildren after the wake-up). Those are released first, so ≥ N −
//!    samples still wait at each; then the rest are released back to back and
//!    every waiter must get its lock (a 30 s bound each) and release it. N = 1
//!    is the same code run `ZK_SCALE_ONE_ROUNDS` times, half before the larger
//!    N and half after (the load of a shared machine drifts). Target (issue
//!    16): flat, and p50 with 10,000 waiters within 1.2× of the single
//!    waiter's: printed as PASS or MISS, not asserted. At the end of each N
//!    every lock znode must have no child left and the client no watch.
//!
//!    **1b. The same with the futex hash raised** (see "Reading the figures"):
//!    the bench compiles `benches/c/futex_hash.c` with `gcc -shared -fPIC -O2`
//!    into a temporary directory (removed afterwards) and re-executes itself
//!    (`ZKLOCK_SCALE_FUTEX_CHILD`) with `LD_PRELOAD` of it, on the same server:
//!    the shim's constructor, before the first thread, calls
//!    `prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, ZK_SCALE_FUTEX_SLOTS)` and
//!    prints its result on stderr; the child runs part 1 alone, for N in
//!    `ZK_SCALE_FUTEX_WAITERS` (its own N = 1 rounds, half before and half
//!    after), its lines echoed with a `[futex hash]` prefix, and reports its
//!    summary rows to the parent (lines starting with `@futex `). Its ratios
//!    and its PASS or MISS are against its own single waiter. Without a C
//!    compiler, or when the prctl fails (`EINVAL` on a kernel before 6.16), the
//!    bench says so and goes on; a wrong result in the child fails the run.
//! 2. **Contention across processes**: `ZK_SCALE_LOCKS` lock znodes; the bench
//!    re-executes itself `ZK_SCALE_PROCS` times as a worker
//!    (`ZKLOCK_SCALE_WORKER`), each with one `ZooKeeperWatcher` and
//!    `ZK_SCALE_PER_LOCK` threads per lock, each with its own write-lock
//!    instance (by default 8 contenders per lock: 2 in each of 4 processes,
//!    2,000 threads per process). A worker says `ready` on stdout once its
//!    threads wait at its gate and starts them when the parent writes `start` on
//!    its stdin, so the timed window excludes start-up. Each thread loops
//!    acquire → release (no work inside) for `ZK_SCALE_SECS`; a grant counts
//!    when its `acquire()` returned within the window (the ones still waiting at
//!    its end are granted after it, counted apart). Printed: grants (hand-offs)
//!    per second in total and per process, the acquire wait's p50 and p99, and
//!    requests per grant from the servers' `zk_packets_received` over the whole
//!    run (start line to the last worker's exit; every grant, window or tail,
//!    divides it; the pings that may fall inside are an allowance). Mutual
//!    exclusion: within a process a per-lock counter (two threads of one process
//!    inside at once fail the run); across processes each grant's interval
//!    (wall clock after `acquire()` returned, before `release()`: inside the
//!    true holding; `CLOCK_REALTIME`, shared by the processes) is sent to the
//!    parent, and no two intervals of one lock may overlap. At the end no lock
//!    znode has a child left.
//! 4. **Side by side with Curator and kazoo**, parts 4 to 6 (issue 49, in
//!    `benches/scale_side/mod.rs`, which describes them): sessions per
//!    process with their memory and threads; held locks in one session; a
//!    lock directory with W waiters, its hand-off's latency and requests.
//! 3. A summary table (markdown): date, kernel, cores, load average, and the
//!    figures; part 1's rows for the kernel's default futex hash, then those of
//!    1b (labelled `futex hash 16384 slots`), and a PASS or MISS for each (the
//!    10 `DeletionListener`s reference is the first pass's).
//!
//! The load average counts the bench's own threads (10,000 runnable at once
//! while they queue, 8,000 in part 2), so each figure also comes with the
//! disturbance: the cores used meanwhile by everything but the bench, its
//! workers and its server (`/proc/stat` busy time minus theirs).
//!
//! Reading the figures: every blocked thread waits on a futex. Since Linux
//! 6.16 a process's futexes hash into a table of its own, sized when threads
//! are made from min(threads, CPUs) × 4 buckets (at least 16): 16 buckets on a
//! 2-CPU machine, so with 10,000 blocked threads every futex wake in the
//! process (a condvar's notify, a channel's, a contended mutex's) walks a chain
//! of about 600 waiters (part 2's workers, 2,000 threads each, about 125).
//! Each futex wake on the release → acquired path (the watcher waking the
//! waiter, the client's hand-offs, the bench's channel) pays it, which is why
//! part 1 runs twice: with the kernel's default (what a user of the library
//! gets as is), and in 1b with the table raised by
//! `prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, n)` before the first thread
//! (the bench cannot call it itself: the crate forbids `unsafe`; an
//! `LD_PRELOAD` shim can, and so can an application at start-up). The gap
//! between the two 10,000 rows is the kernel's default; 1b's ratio is the
//! library's own flatness. A waiting lock has nothing to do until its node's
//! watch fires: the session's end wakes it directly, and its safety-net
//! recheck is every 10 s (`LOCK_RECHECK`, `src/engine/wait.rs`), so the idle CPU and
//! context switches with N waiting stay near zero.
//!
//! Everything started is stopped: waiter and worker threads are joined, worker
//! processes waited for (killed if they hang), sessions closed, the bench's
//! znodes deleted, the server stopped; a final check prints each.

use std::collections::{HashMap, HashSet};
use std::env;
use std::fs;
use std::hint::black_box;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use zklock::client::{Acl, CreateMode, EventType, WatchedEvent, ZooKeeper};
use zklock::lock::{InterProcessLock, LockStep, ZkInterProcessWriteLock};
use zklock::testing::{eventually, example_servers, four_letter, ScratchDir};
use zklock::{DeletionListener, ZkError, ZooKeeperListener, ZooKeeperWatcher};

mod common;
use common::*;
#[path = "scale_side/mod.rs"]
mod side;

/// `ZK_SCALE_SHORT=1`: the sizes a smoke run uses, for the knobs not set.
const SHORT_KNOBS: [(&str, &str); 9] = [
    ("ZK_SCALE_WAITERS", "1,100"),
    ("ZK_SCALE_SAMPLES", "20"),
    ("ZK_SCALE_ONE_ROUNDS", "10"),
    ("ZK_SCALE_IDLE_MS", "200"),
    ("ZK_SCALE_FUTEX", "0"),
    ("ZK_SCALE_PROCS", "2"),
    ("ZK_SCALE_LOCKS", "50"),
    ("ZK_SCALE_SECS", "2"),
    ("ZK_SCALE_PER_LOCK", "2"),
];

/// The most a waiter may take to get its lock once its predecessor is gone.
const WAKE_BOUND: Duration = Duration::from_secs(30);
/// Largest acceptable dispatch cost ratio, N waiters : 10 listeners.
const MAX_DISPATCH_RATIO: f64 = 3.0;
/// `process` calls per dispatch sample, and samples: the fastest is reported
/// (the code's cost; what a loaded machine adds by descheduling the thread
/// only ever makes a sample slower — one 7-sample median read 1,160 ns for a
/// 50 ns dispatch at load 140).
const DISPATCH_EVENTS: u32 = 20_000;
const DISPATCH_SAMPLES: usize = 25;
/// Unreported single-waiter rounds before the measured ones.
const ONE_WAITER_WARMUP: usize = 20;
/// Quiet time before each measured release, whatever N. A request after an
/// idle gap is slower (on this kind of machine a raw `exists` after 20 ms idle
/// takes ~1.6 ms instead of ~0.2–0.4 ms hot), and the single-waiter rounds
/// necessarily idle while their waiter queues: the same pause before every
/// release keeps the cases comparable.
const SETTLE: Duration = Duration::from_millis(2);
/// The target: p50 with 10,000 waiters within this factor of 1 waiter's.
const TARGET_RATIO: f64 = 1.2;
/// Threads that make the holders' grants, lock znodes and checks in parallel.
const SETUP_THREADS: usize = 4;
/// The worker's env var: its index.
const WORKER_ENV: &str = "ZKLOCK_SCALE_WORKER";
/// The futex-hash pass's env var: set, the process runs part 1 only, under the
/// shim, and reports to its parent in lines starting with [`FUTEX_MARK`].
const FUTEX_CHILD_ENV: &str = "ZKLOCK_SCALE_FUTEX_CHILD";
/// The server's JVM pid, given to the futex-hash pass (its CPU is the bench's).
const SERVER_PID_ENV: &str = "ZKLOCK_SCALE_SERVER_PID";
/// What the shim sets: `ok <slots>` or `error <ERRNO> <message>`.
const FUTEX_RESULT_ENV: &str = "ZK_SCALE_FUTEX_RESULT";
/// The prefix of the futex-hash pass's report lines on its stdout.
const FUTEX_MARK: &str = "@futex ";
/// The shim's source, compiled with `gcc -shared -fPIC -O2` at run time.
const FUTEX_SHIM_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/c/futex_hash.c");

fn children(zk: &ZooKeeper, path: &str) -> Vec<String> {
    match zk.get_children(path, false) {
        Ok(c) => c,
        Err(e) if e.is(ZkError::NoNode) => Vec::new(),
        Err(e) => panic!("get_children {path}: {e}"),
    }
}

/// `f` on every item, by [`SETUP_THREADS`] threads; the results in order.
fn parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let chunk = items.len().div_ceil(SETUP_THREADS).max(1);
    thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| s.spawn(|| c.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("setup thread"))
            .collect()
    })
}

/// The process's CPU time (all threads, user + system), in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: state is the first,
    // utime the 12th and stime the 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux).
fn clk_tck() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Context switches (voluntary + not) of every thread of the process.
fn context_switches() -> u64 {
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("status")).ok())
        .map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// The server's JVM, when this bench started it (its CPU is the bench's, not
/// another engineer's).
static SERVER_PID: OnceLock<u32> = OnceLock::new();

/// CPU time, in clock ticks: busy time of the whole machine (`/proc/stat`), of
/// this process and of the server's JVM.
#[derive(Clone, Copy)]
struct Busy {
    at: Instant,
    machine: u64,
    own: u64,
    server: u64,
}

fn pid_ticks(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

impl Busy {
    fn now() -> Busy {
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        // cpu user nice system idle iowait irq softirq steal ...
        let f: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        let get = |i: usize| f.get(i).copied().unwrap_or(0);
        Busy {
            at: Instant::now(),
            machine: get(0) + get(1) + get(2) + get(5) + get(6) + get(7),
            own: cpu_ticks(),
            server: SERVER_PID.get().map_or(0, |&p| pid_ticks(p)),
        }
    }

    /// Cores used since `start` by everything but this bench (`extra`: ticks
    /// of the bench's other processes), on average: the disturbance.
    fn others_since(&self, start: &Busy, extra: u64, tck: f64) -> f64 {
        let ours = (self.own - start.own) + (self.server - start.server) + extra;
        let others = (self.machine - start.machine).saturating_sub(ours);
        others as f64 / tck / (self.at - start.at).as_secs_f64()
    }
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn command_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn env_list(name: &str, default: &str) -> Vec<usize> {
    env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect()
}

// ---------------------------------------------------------------------------
// 1. N waiters
// ---------------------------------------------------------------------------

enum Msg {
    Acquired(usize, Instant),
    Released(usize),
    Failed(usize, String),
}

/// When a waiter passed its last steps (from its step hook).
#[derive(Default)]
struct Stamps {
    /// Its wait ended (the watcher woke it).
    woken: Mutex<Option<Instant>>,
    /// It listed the lock's children (the last time).
    listed: Mutex<Option<Instant>>,
}

/// Where a release → acquired goes: the holder's `release()` returns; the
/// waiter is woken; it has listed the children (getChildren); `acquire()`
/// returned. Each from the `release()` call.
#[derive(Clone, Copy)]
struct Parts {
    returned: Duration,
    woken: Duration,
    listed: Duration,
    acquired: Duration,
}

/// A thread blocking in `acquire()` on `znode` through `zkw`; counts itself in
/// `queued` when its watch is set, stamps its wake-up and listing in `stamps`;
/// releases right after it gets the lock.
fn spawn_waiter(
    zkw: &ZooKeeperWatcher,
    znode: &str,
    i: usize,
    stack: usize,
    tx: Sender<Msg>,
    queued: &Arc<AtomicUsize>,
    stamps: &Arc<Stamps>,
) -> thread::JoinHandle<()> {
    let queued = queued.clone();
    let stamps = stamps.clone();
    let lock = ZkInterProcessWriteLock::new(zkw, znode, b"waiter", None)
        .unwrap()
        .with_step_hook(move |step, _path| match step {
            LockStep::Watching => {
                queued.fetch_add(1, Ordering::SeqCst);
            }
            LockStep::Woken => *stamps.woken.lock().unwrap() = Some(Instant::now()),
            LockStep::Listed => *stamps.listed.lock().unwrap() = Some(Instant::now()),
            _ => {}
        });
    thread::Builder::new()
        .name(format!("waiter-{i}"))
        .stack_size(stack)
        .spawn(move || match lock.acquire() {
            Ok(()) => {
                let _ = tx.send(Msg::Acquired(i, Instant::now()));
                match lock.release() {
                    Ok(()) => {
                        let _ = tx.send(Msg::Released(i));
                    }
                    Err(e) => {
                        let _ = tx.send(Msg::Failed(i, format!("release: {e}")));
                    }
                }
            }
            Err(e) => {
                let _ = tx.send(Msg::Failed(i, format!("acquire: {e}")));
            }
        })
        .expect("spawn a waiter thread")
}

/// Waits for waiter `i` to acquire (returns when) and release.
fn await_waiter(rx: &Receiver<Msg>, i: usize) -> Instant {
    let mut acquired = None;
    loop {
        match rx.recv_timeout(WAKE_BOUND) {
            Ok(Msg::Acquired(j, at)) if j == i => acquired = Some(at),
            Ok(Msg::Released(j)) if j == i => {
                return acquired.expect("released before acquired");
            }
            Ok(Msg::Acquired(j, _) | Msg::Released(j)) => {
                panic!("waiter {j} got its lock while only waiter {i}'s holder released")
            }
            Ok(Msg::Failed(j, e)) => panic!("waiter {j}: {e}"),
            Err(RecvTimeoutError::Timeout) => panic!(
                "waiter {i} did not get its lock within {WAKE_BOUND:?} of its holder's release"
            ),
            Err(RecvTimeoutError::Disconnected) => panic!("waiter {i} vanished"),
        }
    }
}

/// Waits until `n` waiters told their watch is set (a waiter's last step
/// before it blocks); with `server`, then checks that every path of `waited`
/// carries a watch on the server (`wchp`).
fn await_queued(
    m: &Mntr,
    rx: &Receiver<Msg>,
    queued: &AtomicUsize,
    n: usize,
    waited: &[String],
    server: bool,
) {
    let end = Instant::now() + Duration::from_secs(300);
    let poll = if n <= 10 {
        Duration::from_micros(200)
    } else {
        Duration::from_millis(20)
    };
    while queued.load(Ordering::SeqCst) < n {
        match rx.try_recv() {
            Ok(Msg::Failed(j, e)) => panic!("waiter {j}: {e}"),
            Ok(Msg::Acquired(j, _) | Msg::Released(j)) => {
                panic!("waiter {j} got its lock while its holder holds it")
            }
            Err(_) => {}
        }
        assert!(
            Instant::now() < end,
            "{} of {n} waiters not queued after 300 s",
            n - queued.load(Ordering::SeqCst)
        );
        thread::sleep(poll);
    }
    assert_eq!(queued.load(Ordering::SeqCst), n, "a waiter waited twice");
    if server {
        let watched = m.watched_paths();
        let missing: Vec<&String> = waited.iter().filter(|p| !watched.contains(*p)).collect();
        assert!(
            missing.is_empty(),
            "{} held nodes not watched on the server, e.g. {}",
            missing.len(),
            missing[0]
        );
    }
}

/// ns per `zkw.process(event)`, the fastest of the samples.
fn dispatch_ns(zkw: &ZooKeeperWatcher, event: &WatchedEvent) -> f64 {
    for _ in 0..DISPATCH_EVENTS / 10 {
        zkw.process(black_box(event.clone()));
    }
    (0..DISPATCH_SAMPLES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..DISPATCH_EVENTS {
                zkw.process(black_box(event.clone()));
            }
            started.elapsed().as_nanos() as f64 / f64::from(DISPATCH_EVENTS)
        })
        .fold(f64::INFINITY, f64::min)
}

#[derive(Clone, Copy)]
struct Dispatch {
    unrelated: f64,
    sibling: f64,
}

fn dispatch(zkw: &ZooKeeperWatcher, unrelated: &str, sibling: &str) -> Dispatch {
    Dispatch {
        unrelated: dispatch_ns(
            zkw,
            &WatchedEvent::node(EventType::NodeDataChanged, unrelated),
        ),
        sibling: dispatch_ns(
            zkw,
            &WatchedEvent::node(EventType::NodeDataChanged, sibling),
        ),
    }
}

/// The shared state of part 1.
struct Waiting<'a> {
    m: &'a Mntr,
    holder: ZooKeeperWatcher,
    waiter: ZooKeeperWatcher,
    /// The lock znodes, as many as the largest N.
    locks: Vec<String>,
    stack: usize,
    idle: Duration,
    tck: f64,
}

/// What one N measured besides its latencies (the N = 1 figures come from one
/// warm-up round).
#[derive(Clone)]
struct Footprint {
    queue_time: Duration,
    rss_before: u64,
    rss_after: u64,
    vm_before: u64,
    vm_after: u64,
    threads_before: usize,
    threads_after: usize,
    listeners: usize,
    watches: usize,
    server_watches: u64,
    /// % of one core, while the N wait.
    idle_cpu: f64,
    /// Context switches per second of all threads, while the N wait.
    idle_switches: f64,
    dispatch: Dispatch,
    load: String,
}

/// One run with `n` waiters: holders take `n` locks, `n` waiters queue, the
/// `samples` evenly spread are released one at a time (after `SETTLE`), the
/// rest back to back. Returns the sampled release → acquired times (unsorted)
/// and, with `measure`, the footprint.
fn run_waiters(
    w: &Waiting<'_>,
    n: usize,
    samples: usize,
    measure: bool,
) -> (Vec<Parts>, Option<Footprint>) {
    let locks = &w.locks[..n];
    let loud = n > 1;
    // Holders.
    let started = Instant::now();
    let holders: Vec<ZkInterProcessWriteLock> = parallel(locks, |l| {
        let h = ZkInterProcessWriteLock::new(&w.holder, l, b"holder", None).unwrap();
        h.acquire().unwrap();
        h
    });
    let waited: Vec<String> = holders
        .iter()
        .map(|h| h.acquired_lock().expect("held").path)
        .collect();
    if loud {
        println!(
            "  N = {n}: the holder session took {n} write locks in {:.2} s (load {})",
            started.elapsed().as_secs_f64(),
            loadavg()
        );
    }

    // The waiters.
    let (rss_before, vm_before, threads_before) = (rss_kib(), vm_kib(), threads());
    let (tx, rx) = mpsc::channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let stamps: Vec<Arc<Stamps>> = (0..n).map(|_| Arc::default()).collect();
    let queue_started = Instant::now();
    let handles: Vec<_> = locks
        .iter()
        .enumerate()
        .map(|(i, l)| spawn_waiter(&w.waiter, l, i, w.stack, tx.clone(), &queued, &stamps[i]))
        .collect();
    drop(tx);
    await_queued(w.m, &rx, &queued, n, &waited, measure || loud);
    let queue_time = queue_started.elapsed();

    let footprint = measure.then(|| {
        let (rss_after, vm_after, threads_after) = (rss_kib(), vm_kib(), threads());
        let listeners = w.waiter.number_of_listeners();
        let watches = w.waiter.zookeeper().watch_count();
        let server_watches = w.m.sum("zk_watch_count");
        // Every waiter waits on a per-watch watcher of its holder's node, never
        // on the watcher's listener registry (which is the users' alone).
        assert_eq!(listeners, 0, "{listeners} listeners for {n} waiters");
        assert!(watches >= n, "{watches} watches for {n} waiters");
        // What the waiting costs when nothing happens.
        let ctx0 = context_switches();
        let (cpu0, t0) = (cpu_ticks(), Instant::now());
        thread::sleep(w.idle);
        let (cpu1, t1) = (cpu_ticks(), t0.elapsed());
        let ctx1 = context_switches();
        let ctx_elapsed = t0.elapsed();
        let idle_cpu = (cpu1 - cpu0) as f64 / w.tck / t1.as_secs_f64() * 100.0;
        let idle_switches = ctx1.saturating_sub(ctx0) as f64 / ctx_elapsed.as_secs_f64();
        let target = n / 2;
        let sibling = format!("{}/read-sibling-{:010}", locks[target], 999_999_999);
        let d = dispatch(&w.waiter, "/some/unrelated/path", &sibling);
        let f = Footprint {
            queue_time,
            rss_before,
            rss_after,
            vm_before,
            vm_after,
            threads_before,
            threads_after,
            listeners,
            watches,
            server_watches,
            idle_cpu,
            idle_switches,
            dispatch: d,
            load: loadavg(),
        };
        println!(
            "  N = {n}: queued in {:.2} s; RSS {rss_before} -> {rss_after} KiB \
             ({:.0} B/waiter), VmSize {} -> {} MiB ({:.0} KiB/waiter; stack {} KiB); \
             threads {threads_before} -> {threads_after}",
            queue_time.as_secs_f64(),
            per_waiter_bytes(&f, n),
            vm_before / 1024,
            vm_after / 1024,
            vm_after.saturating_sub(vm_before) as f64 / n as f64,
            w.stack / 1024
        );
        println!(
            "  N = {n}: {listeners} listeners, client watch_count {watches}, server \
             zk_watch_count {server_watches}; idle while waiting: {idle_cpu:.1}% of a core, \
             {idle_switches:.0} context switches/s; zkw.process ns/event: unrelated {:.1}, \
             sibling {:.1} (load {})",
            d.unrelated, d.sibling, f.load
        );
        f
    });

    // The sampled releases, evenly spread, while (nearly) all still wait.
    let samples = samples.min(n);
    let sampled: Vec<usize> = (0..samples).map(|k| k * n / samples).collect();
    let mut parts = Vec::with_capacity(samples);
    for &i in &sampled {
        thread::sleep(SETTLE);
        let released = Instant::now();
        holders[i].release().unwrap();
        let returned = Instant::now();
        let acquired = await_waiter(&rx, i);
        let stamp = |m: &Mutex<Option<Instant>>| {
            m.lock()
                .unwrap()
                .expect("a woken waiter passed the step")
                .saturating_duration_since(released)
        };
        parts.push(Parts {
            returned: returned - released,
            woken: stamp(&stamps[i].woken),
            listed: stamp(&stamps[i].listed),
            acquired: acquired - released,
        });
    }
    // The rest, back to back.
    let sampled_set: HashSet<usize> = sampled.iter().copied().collect();
    let rest: Vec<usize> = (0..n).filter(|i| !sampled_set.contains(i)).collect();
    let started = Instant::now();
    for &i in &rest {
        holders[i].release().unwrap();
    }
    let mut acquired: HashSet<usize> = HashSet::new();
    let mut pending: HashSet<usize> = rest.iter().copied().collect();
    while !pending.is_empty() {
        match rx.recv_timeout(WAKE_BOUND) {
            Ok(Msg::Acquired(j, _)) => {
                assert!(pending.contains(&j), "waiter {j} acquired twice");
                acquired.insert(j);
            }
            Ok(Msg::Released(j)) => {
                assert!(
                    acquired.contains(&j),
                    "waiter {j} released before acquiring"
                );
                pending.remove(&j);
            }
            Ok(Msg::Failed(j, e)) => panic!("waiter {j}: {e}"),
            Err(e) => panic!(
                "{} waiters did not get their lock within {WAKE_BOUND:?} ({e:?})",
                pending.len()
            ),
        }
    }
    for h in handles {
        h.join().expect("waiter thread");
    }
    if loud {
        println!(
            "  N = {n}: the other {} holders released and their waiters served in {:.2} s",
            rest.len(),
            started.elapsed().as_secs_f64()
        );
    }

    // Nothing left behind.
    let zk = w.holder.zookeeper();
    let left: Vec<String> = parallel(locks, |l| {
        let c = children(zk, l);
        (!c.is_empty()).then(|| format!("{l}: {c:?}"))
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(left.is_empty(), "lock znodes with children: {left:?}");
    assert!(
        eventually(Duration::from_secs(10), || {
            w.waiter.number_of_listeners() == 0 && w.waiter.zookeeper().watch_count() == 0
        }),
        "the waiter's client still has {} watches",
        w.waiter.zookeeper().watch_count()
    );
    assert_eq!(w.holder.number_of_listeners(), 0);
    if loud {
        println!(
            "  N = {n}: all {n} waiters got their lock; every lock znode is empty; no watch left"
        );
    }
    (parts, footprint)
}

fn per_waiter_bytes(f: &Footprint, n: usize) -> f64 {
    f.rss_after.saturating_sub(f.rss_before) as f64 * 1024.0 / n as f64
}

/// The figures of one N.
struct Scale {
    n: usize,
    /// Sorted release → acquired times.
    lat: Vec<Duration>,
    /// Their parts, unsorted.
    parts: Vec<Parts>,
    foot: Footprint,
    /// p50 of each half of the single-waiter rounds (N = 1 only).
    halves: Option<(Duration, Duration)>,
    /// The load average at the end of its measurement, and the cores used
    /// meanwhile by everything but the bench and its server.
    load: String,
    others: f64,
}

impl Scale {
    fn p50(&self) -> Duration {
        percentile(&self.lat, 0.5)
    }
    fn p99(&self) -> Duration {
        percentile(&self.lat, 0.99)
    }
    /// The p50 of each part: `release()` returned, woken, listed, acquired.
    fn parts_p50(&self) -> [Duration; 4] {
        let p50 =
            |f: fn(&Parts) -> Duration| sorted_p50(&self.parts.iter().map(f).collect::<Vec<_>>());
        [
            p50(|p| p.returned),
            p50(|p| p.woken),
            p50(|p| p.listed),
            p50(|p| p.acquired),
        ]
    }
}

impl Scale {
    fn new(n: usize, parts: Vec<Parts>, foot: Footprint) -> Scale {
        let mut lat: Vec<Duration> = parts.iter().map(|p| p.acquired).collect();
        lat.sort();
        Scale {
            n,
            lat,
            parts,
            foot,
            halves: None,
            load: loadavg(),
            others: 0.0,
        }
    }
}

struct WaitersResult {
    rows: Vec<Scale>,
    reference: Dispatch,
}

fn waiters(m: &Mntr, servers: &str, root: &str, list: &[usize]) -> WaitersResult {
    let stack_kib = env_usize("ZK_BENCH_WAITER_STACK_KIB", 128);
    let samples = env_usize("ZK_SCALE_SAMPLES", 300).max(1);
    let one_rounds = env_usize("ZK_SCALE_ONE_ROUNDS", 200).max(2);
    let many: Vec<usize> = list.iter().copied().filter(|&n| n > 1).collect();
    let max_n = many.iter().copied().max().unwrap_or(1);
    let holder = connect(servers, "scale-holder");
    let waiter = connect(servers, "scale-waiter");
    let dir = format!("{root}/waiters");
    let zk = holder.zookeeper().clone();
    zk.create(&dir, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let locks: Vec<String> = (0..max_n).map(|i| format!("{dir}/lock-{i:05}")).collect();
    let started = Instant::now();
    parallel(&locks, |l| {
        zk.create(l, b"", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
    });
    println!(
        "  {max_n} lock znodes made in {:.2} s; waiter threads' stack {stack_kib} KiB",
        started.elapsed().as_secs_f64()
    );
    let w = Waiting {
        m,
        holder,
        waiter,
        locks,
        stack: stack_kib * 1024,
        idle: Duration::from_millis(env_usize("ZK_SCALE_IDLE_MS", 2000) as u64),
        tck: clk_tck(),
    };

    // The reference of the dispatch cost: 10 DeletionListeners on other nodes.
    let unrelated = "/some/unrelated/path";
    let sibling = format!("{}/read-sibling-{:010}", w.locks[0], 999_999_999);
    let ten: Vec<Arc<dyn ZooKeeperListener>> = (0..10)
        .map(|i| {
            let l: Arc<dyn ZooKeeperListener> = Arc::new(DeletionListener::new(
                &w.waiter,
                &format!("{dir}/other-{i}/write-x-{i:010}"),
            ));
            w.waiter.register_listener(l.clone());
            l
        })
        .collect();
    let reference = dispatch(&w.waiter, unrelated, &sibling);
    for l in &ten {
        assert!(w.waiter.unregister_listener(l));
    }
    println!(
        "  zkw.process ns/event with 10 DeletionListeners (the reference): unrelated {:.1}, \
         sibling {:.1}",
        reference.unrelated, reference.sibling
    );

    // N = 1, first half: warm-up rounds (the first one measures the footprint).
    let mut foot1 = None;
    for round in 0..ONE_WAITER_WARMUP {
        let (_, f) = run_waiters(&w, 1, 1, round == 0);
        foot1 = foot1.or(f);
    }
    let half = one_rounds / 2;
    let busy = Busy::now();
    let mut first: Vec<Parts> = (0..half)
        .flat_map(|_| run_waiters(&w, 1, 1, false).0)
        .collect();
    let mut one_ticks = (Busy::now(), busy);
    let acquired = |v: &[Parts]| sorted_p50(&v.iter().map(|p| p.acquired).collect::<Vec<_>>());
    println!(
        "  N = 1: {half} rounds, release -> acquired p50 {:.0} µs (load {}; others used {:.2} \
         cores)",
        us(acquired(&first)),
        loadavg(),
        one_ticks.0.others_since(&one_ticks.1, 0, w.tck)
    );

    let mut rows = Vec::new();
    for &n in &many {
        let busy = Busy::now();
        let (parts, foot) = run_waiters(&w, n, samples, true);
        let mut s = Scale::new(n, parts, foot.expect("measured"));
        s.others = Busy::now().others_since(&busy, 0, w.tck);
        println!(
            "  N = {n}: {} releases measured: release -> acquired p50 {:.0} µs, p99 {:.0} µs \
             (load {}; others used {:.2} cores)",
            s.lat.len(),
            us(s.p50()),
            us(s.p99()),
            s.load,
            s.others
        );
        rows.push(s);
    }

    let busy = Busy::now();
    let mut second: Vec<Parts> = (0..one_rounds - half)
        .flat_map(|_| run_waiters(&w, 1, 1, false).0)
        .collect();
    let end = Busy::now();
    println!(
        "  N = 1: {} more rounds, release -> acquired p50 {:.0} µs (load {}; others used {:.2} \
         cores)",
        one_rounds - half,
        us(acquired(&second)),
        loadavg(),
        end.others_since(&busy, 0, w.tck)
    );
    // Both halves together.
    one_ticks.0.machine += end.machine - busy.machine;
    one_ticks.0.own += end.own - busy.own;
    one_ticks.0.server += end.server - busy.server;
    one_ticks.0.at += end.at - busy.at;
    let halves = (acquired(&first), acquired(&second));
    first.append(&mut second);
    let mut one = Scale::new(1, first, foot1.expect("measured"));
    one.halves = Some(halves);
    one.others = one_ticks.0.others_since(&one_ticks.1, 0, w.tck);
    rows.insert(0, one);

    // The lock znodes go.
    let zk = w.holder.zookeeper();
    parallel(&w.locks, |l| zk.delete(l, None).unwrap());
    zk.delete(&dir, None).unwrap();
    w.waiter.close().unwrap();
    w.holder.close().unwrap();
    WaitersResult { rows, reference }
}

fn sorted_p50(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    percentile(&v, 0.5)
}

/// The summary's rows of part 1: the main table's and the parts table's. `label`
/// follows N in the first column (empty: the kernel's default futex hash).
fn summary_rows(w: &WaitersResult, label: &str) -> (Vec<String>, Vec<String>) {
    let one = w.rows[0].p50();
    let main = w
        .rows
        .iter()
        .map(|s| {
            let f = &s.foot;
            let ratio = us(s.p50()) / us(one);
            format!(
                "| {}{label} ({} releases) | {:.2} s | {:.0} | {:.0} | {} → {} | {} / {} / {} | {:.1}% ({:.0} cs/s) | {:.0} / {:.0} | {:.0} µs | {:.0} µs | {ratio:.2} | {}; {:.2} cores |",
                s.n,
                s.lat.len(),
                f.queue_time.as_secs_f64(),
                per_waiter_bytes(f, s.n),
                f.vm_after.saturating_sub(f.vm_before) as f64 / s.n as f64,
                f.threads_before,
                f.threads_after,
                f.listeners,
                f.watches,
                f.server_watches,
                f.idle_cpu,
                f.idle_switches,
                f.dispatch.unrelated,
                f.dispatch.sibling,
                us(s.p50()),
                us(s.p99()),
                s.load,
                s.others
            )
        })
        .collect();
    let parts = w
        .rows
        .iter()
        .map(|s| {
            let [r, wk, l, a] = s.parts_p50();
            format!(
                "| {}{label} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs |",
                s.n,
                us(r),
                us(wk),
                us(l),
                us(a)
            )
        })
        .collect();
    (main, parts)
}

/// The single waiter's p50 before and after the larger N.
fn halves(w: &WaitersResult, label: &str) -> Option<String> {
    w.rows[0].halves.map(|(a, b)| {
        format!(
            "N = 1{label} p50 before / after the larger N: {:.0} / {:.0} µs",
            us(a),
            us(b)
        )
    })
}

/// PASS or MISS: 10,000's p50 (else the largest N's) against the single
/// waiter's, of the same pass.
fn verdict(w: &WaitersResult, label: &str) -> Option<String> {
    let one = w.rows[0].p50();
    let s = w
        .rows
        .iter()
        .rev()
        .find(|s| s.n == 10_000)
        .or(w.rows.last())?;
    let ratio = us(s.p50()) / us(one);
    Some(format!(
        "{}{label}: release -> acquired p50 with {} waiters {:.0} µs = {ratio:.2}x the single \
         waiter's {:.0} µs (target <= {TARGET_RATIO}x{})",
        if ratio <= TARGET_RATIO {
            "PASS"
        } else {
            "MISS"
        },
        s.n,
        us(s.p50()),
        us(one),
        if s.n == 10_000 {
            ""
        } else {
            "; the target is set for 10,000"
        }
    ))
}

/// Fails the run if `zkw.process` costs grow with the waiters.
fn check_dispatch(w: &WaitersResult) {
    for s in &w.rows[1..] {
        let d = &s.foot.dispatch;
        let ratio = (d.unrelated / w.reference.unrelated).max(d.sibling / w.reference.sibling);
        assert!(
            ratio <= MAX_DISPATCH_RATIO,
            "dispatch grows with waiters: {ratio:.2}x with {} waiters vs 10 listeners \
             (max {MAX_DISPATCH_RATIO})",
            s.n
        );
    }
}

// ---------------------------------------------------------------------------
// 1b. Part 1 again, with the futex hash raised
// ---------------------------------------------------------------------------

/// What the futex-hash pass gave (its summary lines, made by the child), or why
/// it did not run.
enum FutexPass {
    Skipped(String),
    Ran {
        rows: Vec<String>,
        parts: Vec<String>,
        halves: Option<String>,
        verdict: Option<String>,
    },
}

/// The label of the futex-hash pass's rows.
fn futex_label(slots: &str) -> String {
    format!(", futex hash {slots} slots")
}

/// The futex-hash pass: compiles the shim into a temporary directory, runs
/// this executable again under it (`LD_PRELOAD`) for part 1 alone with N in
/// `list`, echoes its lines and gathers its summary. Skipped, with the reason,
/// without a C compiler or when the shim's prctl fails; fails the run when the
/// pass finds a wrong result.
fn futex_pass(servers: &str, root: &str, list: &[usize]) -> FutexPass {
    let scratch = match ScratchDir::new("scale-futex") {
        Ok(d) => d,
        Err(e) => return FutexPass::Skipped(format!("skipped: {e}")),
    };
    let pass = futex_pass_in(&scratch, servers, root, list);
    if let FutexPass::Skipped(why) = &pass {
        println!("  futex hash pass {why}; going on");
    }
    let dir = scratch.to_path_buf();
    drop(scratch);
    let gone = if dir.exists() {
        "NOT removed"
    } else {
        "removed"
    };
    println!("  the shim's temporary directory {}: {gone}", dir.display());
    pass
}

fn futex_pass_in(dir: &std::path::Path, servers: &str, root: &str, list: &[usize]) -> FutexPass {
    let cc = env::var("CC").unwrap_or_else(|_| "gcc".into());
    let so = dir.join("futex_hash.so");
    let compiled = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&so)
        .arg(FUTEX_SHIM_SRC)
        .output();
    match compiled {
        Err(e) => {
            return FutexPass::Skipped(format!(
                "skipped: no C compiler to build the shim ({cc}: {e})"
            ))
        }
        Ok(o) if !o.status.success() => {
            return FutexPass::Skipped(format!(
                "skipped: {cc} failed on {FUTEX_SHIM_SRC} ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ))
        }
        Ok(_) => {}
    }
    let dir_znode = format!("{root}/futex");
    let exe = env::current_exe().expect("the bench's own executable");
    let waiters = list
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut cmd = Command::new(&exe);
    cmd.env(FUTEX_CHILD_ENV, "1")
        .env("LD_PRELOAD", &so)
        .env("ZK_SERVERS", servers)
        .env("ZKLOCK_SCALE_DIR", &dir_znode)
        .env("ZK_SCALE_WAITERS", &waiters)
        .env_remove(FUTEX_RESULT_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(pid) = SERVER_PID.get() {
        cmd.env(SERVER_PID_ENV, pid.to_string());
    }
    let mut child = cmd.spawn().expect("start the futex-hash pass");
    let stdout = child.stdout.take().expect("its stdout");
    let (mut rows, mut parts, mut halves, mut verdict, mut skipped) =
        (Vec::new(), Vec::new(), None, None, None);
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let Some(report) = line.strip_prefix(FUTEX_MARK) else {
            println!("  [futex hash]{line}");
            continue;
        };
        let (kind, rest) = report.split_once(' ').unwrap_or((report, ""));
        match kind {
            "row" => rows.push(rest.to_string()),
            "parts" => parts.push(rest.to_string()),
            "halves" => halves = Some(rest.to_string()),
            "verdict" => verdict = Some(rest.to_string()),
            "skip" => skipped = Some(rest.to_string()),
            _ => println!("  [futex hash] {report}"),
        }
    }
    let status = child.wait().expect("wait for the futex-hash pass");
    assert!(status.success(), "the futex-hash pass failed: {status}");
    match skipped {
        Some(why) => FutexPass::Skipped(format!("skipped: {why}")),
        None => FutexPass::Ran {
            rows,
            parts,
            halves,
            verdict,
        },
    }
}

/// The futex-hash pass's process (under the shim): part 1 alone, in
/// `ZKLOCK_SCALE_DIR`, on the parent's servers; reports its summary lines.
fn futex_child() {
    let result = env::var(FUTEX_RESULT_ENV).unwrap_or_default();
    let Some(slots) = result.strip_prefix("ok ") else {
        let why = if result.is_empty() {
            "the shim did not run (LD_PRELOAD not honoured)".to_string()
        } else {
            format!(
                "prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS) failed: {}",
                result.trim_start_matches("error ")
            )
        };
        println!("{FUTEX_MARK}skip {why}");
        return;
    };
    let label = futex_label(slots);
    if let Some(pid) = env::var(SERVER_PID_ENV).ok().and_then(|p| p.parse().ok()) {
        let _ = SERVER_PID.set(pid);
    }
    let servers = env::var("ZK_SERVERS").expect("ZK_SERVERS for the futex-hash pass");
    let dir = env::var("ZKLOCK_SCALE_DIR").expect("ZKLOCK_SCALE_DIR for the futex-hash pass");
    let list = env_list("ZK_SCALE_WAITERS", "1,10000");
    println!(
        " futex hash {slots} slots (load {}); N in {list:?}",
        loadavg()
    );
    let m = Mntr::new(&servers);
    let admin = connect(&servers, "scale-futex-admin");
    admin
        .zookeeper()
        .create(&dir, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let w = waiters(&m, &servers, &dir, &list);
    let rest = children(admin.zookeeper(), &dir);
    assert!(rest.is_empty(), "{dir} still has {rest:?}");
    admin.zookeeper().delete(&dir, None).unwrap();
    admin.close().unwrap();
    check_dispatch(&w);
    let (rows, parts) = summary_rows(&w, &label);
    for r in rows {
        println!("{FUTEX_MARK}row {r}");
    }
    for p in parts {
        println!("{FUTEX_MARK}parts {p}");
    }
    if let Some(h) = halves(&w, &label) {
        println!("{FUTEX_MARK}halves {h}");
    }
    if let Some(v) = verdict(&w, &label) {
        println!("{FUTEX_MARK}verdict {v}");
    }
}

// ---------------------------------------------------------------------------
// 2. Contention across processes
// ---------------------------------------------------------------------------

/// One grant, as a worker reports it.
struct Grant {
    lock: usize,
    /// Wall clock (ns) after `acquire()` returned and before `release()`.
    from: u64,
    to: u64,
    wait: Duration,
    in_window: bool,
}

/// A worker process: `ZK_SCALE_PER_LOCK` threads on each of `ZK_SCALE_LOCKS`
/// lock znodes under `ZKLOCK_SCALE_DIR`, one session; see the module docs.
fn worker(index: &str) {
    let servers = env::var("ZK_SERVERS").expect("ZK_SERVERS for a worker");
    let dir = env::var("ZKLOCK_SCALE_DIR").expect("ZKLOCK_SCALE_DIR");
    let locks_n = env_usize("ZK_SCALE_LOCKS", 1000);
    let per_lock = env_usize("ZK_SCALE_PER_LOCK", 2);
    let secs = env_usize("ZK_SCALE_SECS", 20) as u64;
    let stack = env_usize("ZK_BENCH_WAITER_STACK_KIB", 128) * 1024;
    let zkw = connect(&servers, &format!("scale-worker-{index}"));
    let gate: Arc<(Mutex<Option<Instant>>, Condvar)> = Arc::default();
    let inside: Arc<Vec<AtomicUsize>> =
        Arc::new((0..locks_n).map(|_| AtomicUsize::new(0)).collect());
    let window = Duration::from_secs(secs);
    let handles: Vec<_> = (0..locks_n * per_lock)
        .map(|t| {
            let l = t % locks_n;
            let lock = ZkInterProcessWriteLock::new(
                &zkw,
                &format!("{dir}/lock-{l:04}"),
                format!("worker {index} thread {t}").as_bytes(),
                None,
            )
            .unwrap();
            let (gate, inside) = (gate.clone(), inside.clone());
            thread::Builder::new()
                .name(format!("contender-{t}"))
                .stack_size(stack)
                .spawn(move || -> Result<Vec<Grant>, String> {
                    let start = {
                        let (m, cv) = &*gate;
                        let mut g = m.lock().unwrap();
                        while g.is_none() {
                            g = cv.wait(g).unwrap();
                        }
                        g.unwrap()
                    };
                    let deadline = start + window;
                    let mut grants = Vec::new();
                    while Instant::now() < deadline {
                        let asked = Instant::now();
                        lock.acquire()
                            .map_err(|e| format!("lock {l}: acquire: {e}"))?;
                        let got = Instant::now();
                        let from = wall_ns();
                        let alone = inside[l].fetch_add(1, Ordering::SeqCst) == 0;
                        inside[l].fetch_sub(1, Ordering::SeqCst);
                        let to = wall_ns();
                        lock.release()
                            .map_err(|e| format!("lock {l}: release: {e}"))?;
                        if !alone {
                            return Err(format!("lock {l}: two threads of this process held it"));
                        }
                        grants.push(Grant {
                            lock: l,
                            from,
                            to,
                            wait: got - asked,
                            in_window: got <= deadline,
                        });
                    }
                    Ok(grants)
                })
                .expect("spawn a contender thread")
        })
        .collect();
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    writeln!(out, "ready {} {} {}", threads(), rss_kib(), vm_kib()).unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    if line.trim() != "start" {
        // The parent is gone or gave up: end the threads without starting.
        eprintln!("worker {index}: no start line ({line:?}); exiting");
        std::process::exit(2);
    }
    let ticks = cpu_ticks();
    {
        let (m, cv) = &*gate;
        *m.lock().unwrap() = Some(Instant::now());
        cv.notify_all();
    }
    let mut failed = None;
    let mut total = 0usize;
    for h in handles {
        match h.join().expect("contender thread") {
            Ok(grants) => {
                total += grants.len();
                for g in grants {
                    writeln!(
                        out,
                        "g {} {} {} {} {}",
                        g.lock,
                        g.from,
                        g.to,
                        g.wait.as_nanos(),
                        u8::from(g.in_window)
                    )
                    .unwrap();
                }
            }
            Err(e) => failed = Some(e),
        }
    }
    zkw.close().unwrap();
    if let Some(e) = failed {
        writeln!(out, "error {e}").unwrap();
        out.flush().unwrap();
        std::process::exit(1);
    }
    writeln!(out, "done {total} {}", cpu_ticks() - ticks).unwrap();
    out.flush().unwrap();
}

struct Contention {
    procs: usize,
    locks: usize,
    per_lock: usize,
    secs: u64,
    /// Grants within the window, per process.
    per_proc: Vec<usize>,
    /// Grants after the window (the waiters of its end).
    tail: usize,
    waits: Vec<Duration>,
    requests: u64,
    pings: u64,
    threads_per_proc: usize,
    rss_per_proc: u64,
    load: String,
    /// Cores used by everything but the bench, its workers and its server.
    others: f64,
}

impl Contention {
    fn grants(&self) -> usize {
        self.per_proc.iter().sum()
    }
    fn per_second(&self) -> f64 {
        self.grants() as f64 / self.secs as f64
    }
    fn per_grant(&self) -> f64 {
        self.requests as f64 / (self.grants() + self.tail) as f64
    }
}

/// A worker process and what it said.
struct Worker {
    child: Child,
    stdin: ChildStdin,
}

fn contention(m: &Mntr, servers: &str, root: &str) -> Contention {
    let procs = env_usize("ZK_SCALE_PROCS", 4).max(1);
    let locks_n = env_usize("ZK_SCALE_LOCKS", 1000).max(1);
    let per_lock = env_usize("ZK_SCALE_PER_LOCK", 2).max(1);
    let secs = env_usize("ZK_SCALE_SECS", 20).max(1) as u64;
    let stack_kib = env_usize("ZK_BENCH_WAITER_STACK_KIB", 128);
    let admin = connect(servers, "scale-admin-contention");
    let zk = admin.zookeeper().clone();
    let dir = format!("{root}/contention");
    zk.create(&dir, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let locks: Vec<String> = (0..locks_n).map(|i| format!("{dir}/lock-{i:04}")).collect();
    parallel(&locks, |l| {
        zk.create(l, b"", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
    });
    let exe = env::current_exe().expect("the bench's own executable");
    let (tx, rx) = mpsc::channel::<(usize, Option<String>)>();
    let mut workers: Vec<Worker> = Vec::new();
    let mut readers = Vec::new();
    let started = Instant::now();
    for p in 0..procs {
        let mut child = Command::new(&exe)
            .env(WORKER_ENV, p.to_string())
            .env("ZK_SERVERS", servers)
            .env("ZKLOCK_SCALE_DIR", &dir)
            .env("ZK_SCALE_LOCKS", locks_n.to_string())
            .env("ZK_SCALE_PER_LOCK", per_lock.to_string())
            .env("ZK_SCALE_SECS", secs.to_string())
            .env("ZK_BENCH_WAITER_STACK_KIB", stack_kib.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a worker process");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let tx = tx.clone();
        readers.push(thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        let _ = tx.send((p, Some(l)));
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send((p, None));
        }));
        workers.push(Worker { child, stdin });
    }
    drop(tx);

    // Ready.
    let mut threads_per_proc = 0;
    let mut rss_per_proc = 0;
    let mut ready = 0;
    while ready < procs {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok((p, Some(l))) if l.starts_with("ready ") => {
                let f: Vec<u64> = l[6..]
                    .split_whitespace()
                    .filter_map(|v| v.parse().ok())
                    .collect();
                threads_per_proc = f[0] as usize;
                rss_per_proc = rss_per_proc.max(f[1]);
                println!(
                    "  worker {p} (pid {}): ready, {} threads, RSS {} KiB, VmSize {} MiB",
                    workers[p].child.id(),
                    f[0],
                    f[1],
                    f[2] / 1024
                );
                ready += 1;
            }
            Ok((p, l)) => {
                kill_all(&mut workers);
                panic!("worker {p} said {l:?} before ready")
            }
            Err(e) => {
                kill_all(&mut workers);
                panic!("workers not ready within 120 s: {e:?}")
            }
        }
    }
    println!(
        "  {procs} workers ready in {:.2} s; start (load {})",
        started.elapsed().as_secs_f64(),
        loadavg()
    );
    let window = Requests::start(m);
    let busy = Busy::now();
    let mut worker_ticks = 0;
    for w in &mut workers {
        writeln!(w.stdin, "start").unwrap();
        w.stdin.flush().unwrap();
    }

    // Results.
    let mut per_proc = vec![0usize; procs];
    let mut tail = 0usize;
    let mut waits = Vec::new();
    let mut intervals: HashMap<usize, Vec<(u64, u64)>> = HashMap::new();
    let mut finished = 0;
    let mut errors = Vec::new();
    let bound = Duration::from_secs(secs + 120);
    while finished < procs {
        match rx.recv_timeout(bound) {
            Ok((p, Some(l))) => {
                let mut f = l.split_whitespace();
                match f.next() {
                    Some("g") => {
                        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
                        intervals
                            .entry(v[0] as usize)
                            .or_default()
                            .push((v[1], v[2]));
                        if v[4] == 1 {
                            per_proc[p] += 1;
                            waits.push(Duration::from_nanos(v[3]));
                        } else {
                            tail += 1;
                        }
                    }
                    Some("done") => {
                        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
                        worker_ticks += v.get(1).copied().unwrap_or(0);
                    }
                    Some("error") => errors.push(format!("worker {p}: {l}")),
                    _ => errors.push(format!("worker {p} said {l:?}")),
                }
            }
            Ok((_, None)) => finished += 1,
            Err(e) => {
                kill_all(&mut workers);
                panic!("workers not done within {bound:?}: {e:?}");
            }
        }
    }
    let statuses: Vec<_> = workers
        .iter_mut()
        .map(|w| w.child.wait().expect("wait for a worker"))
        .collect();
    for r in readers {
        r.join().expect("reader thread");
    }
    let others = Busy::now().others_since(&busy, worker_ticks, clk_tck());
    let counted = window.stop(m);
    assert!(errors.is_empty(), "{errors:?}");
    for (p, s) in statuses.iter().enumerate() {
        assert!(s.success(), "worker {p} exited with {s}");
    }

    // Mutual exclusion across the processes.
    let mut overlaps = 0;
    for v in intervals.values_mut() {
        v.sort();
        overlaps += v.windows(2).filter(|w| w[1].0 < w[0].1).count();
    }
    assert_eq!(
        overlaps, 0,
        "{overlaps} grants overlap another process's grant of the same lock"
    );
    let left: Vec<String> = parallel(&locks, |l| {
        let c = children(&zk, l);
        (!c.is_empty()).then(|| format!("{l}: {c:?}"))
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(left.is_empty(), "lock znodes with children: {left:?}");
    parallel(&locks, |l| zk.delete(l, None).unwrap());
    zk.delete(&dir, None).unwrap();
    admin.close().unwrap();

    waits.sort();
    let c = Contention {
        procs,
        locks: locks_n,
        per_lock,
        secs,
        per_proc,
        tail,
        waits,
        requests: counted.requests,
        pings: counted.ping_allowance,
        threads_per_proc,
        rss_per_proc,
        load: loadavg(),
        others,
    };
    println!(
        "  {} grants in {secs} s = {:.0} grants/s (per process: {:?}); {} more granted after \
         the window; acquire wait p50 {:.0} µs, p99 {:.0} µs",
        c.grants(),
        c.per_second(),
        c.per_proc,
        c.tail,
        us(percentile(&c.waits, 0.5)),
        us(percentile(&c.waits, 0.99))
    );
    println!(
        "  {} requests ({} pings at most) = {:.2} per grant; no two grants of a lock overlap \
         ({} grant intervals checked); every worker exited 0; every lock znode empty (load {}; \
         others used {:.2} cores)",
        c.requests,
        c.pings,
        c.per_grant(),
        c.grants() + c.tail,
        c.load,
        c.others
    );
    c
}

fn kill_all(workers: &mut [Worker]) {
    for w in workers {
        let _ = w.child.kill();
        let _ = w.child.wait();
    }
}

// ---------------------------------------------------------------------------

fn main() {
    if env::var_os(side::JOB_ENV).is_some() {
        side::zklock_job();
        return;
    }
    if let Ok(index) = env::var(WORKER_ENV) {
        let _ = env_logger::builder().is_test(true).try_init();
        worker(&index);
        return;
    }
    if env::var_os(FUTEX_CHILD_ENV).is_some() {
        let _ = env_logger::builder().is_test(true).try_init();
        futex_child();
        return;
    }
    let _ = env_logger::builder().is_test(true).try_init();
    if side::short() {
        // Set before any worker starts: they read the same knobs.
        for (name, value) in SHORT_KNOBS {
            if env::var_os(name).is_none() {
                env::set_var(name, value);
            }
        }
    }
    let list = env_list("ZK_SCALE_WAITERS", "1,1000,10000");
    let parts = env::var("ZK_SCALE_PARTS")
        .unwrap_or_else(|_| "waiters,contention,sessions,held,directory".into());
    let threads_start = threads();

    let (mut server, servers) = example_servers().expect("a ZooKeeper server");
    if let Some(pid) = server.as_ref().and_then(|s| s.pid()) {
        let _ = SERVER_PID.set(pid);
    }
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    let load_start = loadavg();
    println!(
        "zklock scale benchmark against {servers} ({cores} CPUs, load {load_start}; \
         ulimit -u {}, threads-max {}, vm.max_map_count {})",
        command_line("bash", &["-c", "ulimit -u"]),
        fs::read_to_string("/proc/sys/kernel/threads-max")
            .unwrap_or_default()
            .trim(),
        fs::read_to_string("/proc/sys/vm/max_map_count")
            .unwrap_or_default()
            .trim()
    );
    let total = Instant::now();
    let m = Mntr::new(&servers);
    let root = format!("/zklock-bench-scale-{}", std::process::id());
    let admin = connect(&servers, "scale-admin");
    admin
        .zookeeper()
        .create(&root, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();

    let mut waited = None;
    let mut futex = None;
    if parts.contains("waiters") {
        println!();
        println!(
            "1. N threads waiting on distinct write locks through one ZooKeeperWatcher, N in {list:?}"
        );
        waited = Some(waiters(&m, &servers, &root, &list));
        if env::var("ZK_SCALE_FUTEX").map_or(true, |v| v.trim() != "0") {
            let max_n = list.iter().copied().max().unwrap_or(1);
            let default = if max_n > 1 {
                format!("1,{max_n}")
            } else {
                "1".to_string()
            };
            let futex_list = env_list("ZK_SCALE_FUTEX_WAITERS", &default);
            let slots = env::var("ZK_SCALE_FUTEX_SLOTS").unwrap_or_else(|_| "16384".into());
            println!();
            println!(
                "1b. The same with the process's futex hash raised to {slots} slots \
                 (LD_PRELOAD benches/c/futex_hash.c, a re-execution of this bench), \
                 N in {futex_list:?}"
            );
            futex = Some(futex_pass(&servers, &root, &futex_list));
        }
    }
    let mut contended = None;
    if parts.contains("contention") {
        println!();
        println!(
            "2. {} processes x {} threads per lock on {} locks, one session per process",
            env_usize("ZK_SCALE_PROCS", 4),
            env_usize("ZK_SCALE_PER_LOCK", 2),
            env_usize("ZK_SCALE_LOCKS", 1000)
        );
        contended = Some(contention(&m, &servers, &root));
    }

    let side_parts = ["sessions", "held", "directory"];
    let mut side_tables = Vec::new();
    if side_parts.iter().any(|p| parts.contains(p)) {
        let anchors = side::Anchors::find();
        if parts.contains("sessions") {
            println!();
            println!("4. Sessions per process, side by side");
            println!("{}", side::SESSIONS_HEADER);
            let rows = side::sessions(&anchors, &servers);
            side_tables.push((side::SESSIONS_HEADER, rows));
        }
        if parts.contains("held") {
            println!();
            println!("5. Held locks in one session, side by side");
            println!("{}", side::HELD_HEADER);
            let rows = side::held(&anchors, &m, &admin, &servers, &root);
            side_tables.push((side::HELD_HEADER, rows));
        }
        if parts.contains("directory") {
            println!();
            println!("6. A lock directory with W waiters (one session), side by side");
            println!("{}", side::DIRECTORY_HEADER);
            let rows = side::directory(&anchors, &m, &admin, &servers, &root);
            side_tables.push((side::DIRECTORY_HEADER, rows));
        }
    }

    // Nothing left behind.
    let rest = children(admin.zookeeper(), &root);
    assert!(rest.is_empty(), "{root} still has {rest:?}");
    admin.zookeeper().delete(&root, None).unwrap();
    assert!(admin.zookeeper().exists(&root, false).unwrap().is_none());
    admin.close().unwrap();
    let load_end = loadavg();
    let elapsed = total.elapsed();

    // 3. Summary.
    let date = command_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!();
    println!(
        "summary: {date}; Linux {}; {cores} CPUs; load {load_start} at start, {load_end} at end; \
         {:.0} s",
        kernel.trim(),
        elapsed.as_secs_f64()
    );
    let mut verdicts = Vec::new();
    if let Some(w) = &waited {
        let (rows, parts) = summary_rows(w, "");
        let (mut futex_rows, mut futex_parts, mut futex_halves) = (Vec::new(), Vec::new(), None);
        match &futex {
            Some(FutexPass::Ran {
                rows,
                parts,
                halves,
                verdict,
                ..
            }) => {
                futex_rows.clone_from(rows);
                futex_parts.clone_from(parts);
                futex_halves.clone_from(halves);
                verdicts.extend(verdict.clone());
            }
            Some(FutexPass::Skipped(why)) => verdicts.push(format!("futex hash pass: {why}")),
            None => {}
        }
        let label = if futex.is_some() {
            " (the kernel's default futex hash)"
        } else {
            ""
        };
        verdicts.insert(0, verdict(w, label).unwrap_or_default());
        println!();
        println!(
            "| waiters (one watcher) | queued in | bytes/waiter (RSS) | KiB/waiter (VmSize) | threads | listeners / client watches / server watches | idle CPU | zkw.process ns/event (unrelated / sibling) | release → acquired p50 | p99 | p50 ratio to N=1 | load average; others' CPU |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
        for r in rows.iter().chain(&futex_rows) {
            println!("{r}");
        }
        println!(
            "| reference: 10 DeletionListeners, no waiter | | | | | | | {:.0} / {:.0} | | | | |",
            w.reference.unrelated, w.reference.sibling
        );
        println!();
        println!(
            "| waiters | release() returned | waiter woken | children listed | acquire() returned |"
        );
        println!("|---|---|---|---|---|");
        for r in parts.iter().chain(&futex_parts) {
            println!("{r}");
        }
        println!();
        for h in halves(w, "").iter().chain(&futex_halves) {
            println!("{h}");
        }
        check_dispatch(w);
    }
    if let Some(c) = &contended {
        println!();
        println!(
            "| contention | threads | RSS per process | grants/s | per process | acquire wait p50 | p99 | requests/grant | load average; others' CPU |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        println!(
            "| {} locks × {} threads × {} processes, {} s | {} × {} | {} MiB | {:.0} | {} | {:.0} µs | {:.0} µs | {:.2} | {}; {:.2} cores |",
            c.locks,
            c.per_lock,
            c.procs,
            c.secs,
            c.procs,
            c.threads_per_proc,
            c.rss_per_proc / 1024,
            c.per_second(),
            c.per_proc
                .iter()
                .map(|g| format!("{:.0}/s", *g as f64 / c.secs as f64))
                .collect::<Vec<_>>()
                .join(", "),
            us(percentile(&c.waits, 0.5)),
            us(percentile(&c.waits, 0.99)),
            c.per_grant(),
            c.load,
            c.others
        );
    }
    for (header, rows) in &side_tables {
        println!();
        println!("{header}");
        for r in rows {
            println!("{r}");
        }
    }
    if !verdicts.is_empty() {
        println!();
    }
    for v in verdicts.iter().filter(|v| !v.is_empty()) {
        println!("{v}");
    }

    // Everything stopped.
    let stopped = match server.take() {
        Some(s) => {
            let addr = s.connect_string();
            drop(s);
            if four_letter(&addr, "ruok").is_err() {
                format!("the server on {addr} stopped")
            } else {
                format!("the server on {addr} STILL ANSWERS")
            }
        }
        None => format!("the servers of ZK_SERVERS left running ({servers})"),
    };
    println!();
    println!(
        "check: the bench's znodes deleted; its sessions closed; waiter and contender threads \
         joined, worker processes exited; threads {threads_start} at start, {} now; {stopped}",
        threads()
    );
}
