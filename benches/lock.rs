//! Inter-process lock benchmark (issue 6, "Performance (benchmark)"): prints
//! figures; fails only when a stated target is clearly missed.
//!
//! `cargo bench --bench lock`. Uses `$ZK_SERVERS` if set (the request counts then
//! include every other client of those servers), else starts a ZooKeeper server
//! through `zklock::testing`. Sizes: `ZK_BENCH_CYCLES` (uncontended cycles per
//! form, default 2000), `ZK_BENCH_WARMUP` (default 3000), `ZK_BENCH_THREADS` (8),
//! `ZK_BENCH_GRANTS` (per thread, 200). Many waiters on one watcher (1 to
//! 10,000) and contention across processes: `benches/scale.rs`.
//!
//! `ZK_BENCH_ENSEMBLE=1` runs it on a three-member ensemble (every client on
//! one follower, writes through the leader), `ZK_TEST_FORCE_SYNC=yes` with
//! servers that fsync their log before answering a write (see
//! `common::bench_servers`; `docs/benchmarks.md`).
//!
//! 1. **Uncontended** acquire + release of one lock, one thread, one session:
//!    write lock (`acquire`/`release`), read lock, the RAII form
//!    (`try_lock_for` + drop) of each, the write lock with the create and the
//!    first listing sent one after the other (`with_sequential_acquire`: two
//!    round trips to acquire instead of one), and as the floors the same 3
//!    requests made with the raw client, in two round trips (`create_async`,
//!    then `get_children` right behind it, then `delete`) and in three. Printed:
//!    the gain of the one-round-trip acquire over the sequential one, and the
//!    lock's median cycle over the raw two-round-trip floor (target: at most
//!    1.05x). Beside them, **the perfect client**: the Java client (ZooKeeper
//!    3.8) making the lock's requests with no lock logic
//!    (`benches/java/RawCycleBench.java`, its own process and session): an
//!    asynchronous `create2` of a node with the write lock's name (before the
//!    sequence number) and data length, `getChildren` right behind it, then
//!    the `delete` — the same 3 requests in the same 2 round trips, byte for
//!    byte in size — the same requests one at a time (three round trips, but
//!    no hand-off to the Java client's event thread for the asynchronous
//!    create's callback), and the pipelined form with a plain `create` of a
//!    short name and no data. The bound in a round is the better of the two
//!    forms with the lock's requests. Printed: each zklock form's cycles/s over the perfect client's,
//!    round by round (median and min–max; target for the write lock: at least
//!    95%). Each form's CPU per cycle is printed too: its client process's
//!    (every thread, `schedstat`) and the server's. After a warm-up (the
//!    server's JIT; the JVM gets as many cycles), the forms run in
//!    `ZK_BENCH_UNC_ROUNDS` (8) alternating rounds (the load of a shared machine drifts severalfold within
//!    seconds); each cycle is timed: cycles/s, median and p99. ZooKeeper requests per cycle come from the
//!    server's `zk_packets_received` (summed over the servers of the connect
//!    string), read before and after; the cost of the `mntr` reads themselves is
//!    measured and subtracted, and the pings that may fall in the window (one per
//!    session every third of its timeout) are counted as an allowance. Target: at
//!    most 3 (create, getChildren, delete).
//! 2. **Contended**: `ZK_BENCH_THREADS` threads of one process (one
//!    `ZooKeeperWatcher`), each with its own write-lock instance on one lock znode,
//!    each doing `ZK_BENCH_GRANTS` acquire/release cycles: grants/s and requests
//!    per grant.
//!    **Hand-off**: two instances (two threads, one watcher) pass a write lock back
//!    and forth, each queuing behind the other's grant (the step hook tells the
//!    holder when the waiter's watch is set): requests and notifications per
//!    hand-off from `zk_packets_received` and `zk_packets_sent` (sent − received =
//!    notifications). Curator's floor, and the target: 5 requests (the waiter's
//!    create, getChildren, getData watch on the predecessor; the holder's delete;
//!    the woken waiter's getChildren) and 1 notification. In
//!    `ZK_BENCH_HANDOFF_ROUNDS` (8) alternating rounds: zklock as it is (the
//!    woken waiter's listing sent by the watcher on the event), zklock with the
//!    listing sent by the woken waiter (`with_listing_after_wake`, as before),
//!    and the bound: the same requests with the raw client on the same session,
//!    no lock logic, the listing sent from the event thread at once. Printed:
//!    median hand-offs/s and the median per-round % of the bound (target: at
//!    least 90%).
//! 3. A summary table (markdown).

use std::hint::black_box;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{Acl, CreateMode, ZooKeeper};
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadLock,
    ZkInterProcessReadWriteLock, ZkInterProcessWriteLock,
};

mod common;
use common::*;
use zklock::{zkutil, ZkError, ZooKeeperWatcher};

/// The perfect client's forms (see [`Form::Java`]).
const JAVA_LOCK: &str = "Java client, lock's requests";
const JAVA_PLAIN: &str = "Java client, plain create";
const JAVA_SYNC: &str = "Java client, 3 round trips";

/// `form`'s cycles/s over the perfect client's, round by round (the rounds
/// alternate, so each pair ran under the same load): median, min, max. The
/// perfect client's rate in a round is the best of its forms with the lock's
/// requests (`perfect`: pipelined, or one at a time).
fn of_perfect(form: &Uncontended, perfect: &[&Uncontended]) -> (f64, f64, f64) {
    let ratios: Vec<f64> = form
        .rates
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let best = perfect
                .iter()
                .filter_map(|p| p.rates.get(i))
                .fold(0.0f64, |m, r| m.max(*r));
            a / best
        })
        .collect();
    spread(ratios)
}

/// The same by the rounds' median cycles: the perfect client's best median
/// over `form`'s (above 1: `form`'s median cycle is shorter). Less swayed by a
/// round's stalls than the rates.
fn of_perfect_p50(form: &Uncontended, perfect: &[&Uncontended]) -> (f64, f64, f64) {
    let ratios: Vec<f64> = form
        .p50s
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let best = perfect
                .iter()
                .filter_map(|p| p.p50s.get(i))
                .fold(f64::INFINITY, |m, r| m.min(*r));
            best / a
        })
        .collect();
    spread(ratios)
}

/// Median, min and max.
fn spread(ratios: Vec<f64>) -> (f64, f64, f64) {
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(0.0, f64::max);
    (median_f64(ratios), min, max)
}

/// Largest uncontended requests per cycle (the protocol's floor).
const MAX_REQUESTS_PER_CYCLE: u64 = 3;

/// The children of `path` (none when it is missing).
fn children(zk: &ZooKeeper, path: &str) -> Vec<String> {
    match zk.get_children(path, false) {
        Ok(c) => c,
        Err(e) if e.is(ZkError::NoNode) => Vec::new(),
        Err(e) => panic!("get_children {path}: {e}"),
    }
}

// ---------------------------------------------------------------------------
// 1. Uncontended
// ---------------------------------------------------------------------------

/// One way to take and drop a lock, for the uncontended rounds.
#[derive(Clone, Copy)]
enum Form<'a> {
    /// `acquire()` then `release()`.
    Explicit(&'a dyn InterProcessLock),
    /// `try_lock_for(10 s)` then drop the guard.
    Guard(&'a ZkInterProcessWriteLock),
    /// The same for a read lock (the guard methods need a sized lock type).
    ReadGuard(&'a ZkInterProcessReadLock),
    /// The lock's requests without the lock code, one at a time: create an
    /// ephemeral sequential child, get the children, delete the child (raw
    /// client; three round trips).
    Raw(&'a ZooKeeper, &'a str),
    /// The same requests as the lock makes them: the create sent without
    /// waiting (`create_async`), the children listed right behind it, then the
    /// delete (raw client; two round trips, the protocol's floor).
    RawPipelined(&'a ZooKeeper, &'a str),
    /// The perfect client: the Java client making the lock's requests with no
    /// lock logic (`benches/java/RawCycleBench.java`), a whole round at a time
    /// in its own process (`"lock"`: zklock's requests, byte for byte in size;
    /// `"plain"`: a create with a short name and no data).
    Java(&'a std::cell::RefCell<LineProcess>, &'static str),
}

/// One acquire + release cycle.
fn cycle(form: Form<'_>) {
    match form {
        Form::Explicit(lock) => {
            lock.acquire().expect("uncontended acquire");
            lock.release().expect("release");
            assert!(!lock.is_held());
        }
        Form::Guard(lock) => {
            let guard = lock
                .try_lock_for(Duration::from_secs(10))
                .expect("uncontended try_lock_for")
                .expect("an uncontended lock is granted at once");
            drop(guard);
            assert!(!lock.is_held(), "released on drop");
        }
        Form::ReadGuard(lock) => {
            let guard = lock
                .try_lock_for(Duration::from_secs(10))
                .expect("uncontended try_lock_for")
                .expect("an uncontended lock is granted at once");
            drop(guard);
            assert!(!lock.is_held(), "released on drop");
        }
        Form::Raw(zk, znode) => {
            let node = zk
                .create(
                    &format!("{znode}/write-raw-"),
                    b"raw",
                    Acl::open_unsafe(),
                    CreateMode::EphemeralSequential,
                )
                .expect("raw create");
            black_box(zk.get_children(znode, false).expect("raw get_children"));
            zk.delete(&node, None).expect("raw delete");
        }
        Form::RawPipelined(zk, znode) => {
            let (tx, rx) = mpsc::channel();
            zk.create_async(
                &format!("{znode}/write-raw-"),
                b"raw",
                Acl::open_unsafe(),
                CreateMode::EphemeralSequential,
                move |r| {
                    let _ = tx.send(r);
                },
            );
            black_box(zk.get_children(znode, false).expect("raw get_children"));
            let (node, _) = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("raw create answered")
                .expect("raw create");
            zk.delete(&node, None).expect("raw delete");
        }
        Form::Java(java, form) => {
            java_round(&mut java.borrow_mut(), form, 1);
        }
    }
}

/// `cycles` cycles of the Java client's `form`: the round's time and each
/// cycle's.
fn java_round(java: &mut LineProcess, form: &str, cycles: usize) -> (Duration, Vec<Duration>) {
    let line = java
        .ask(&format!("run {form} {cycles}"), Duration::from_secs(300))
        .unwrap_or_else(|e| panic!("the Java client: {e}"));
    let mut words = line.split_whitespace();
    let (Some("done"), Some(elapsed), Some(times)) = (words.next(), words.next(), words.next())
    else {
        panic!("the Java client said: {line}");
    };
    let ns = |v: &str| Duration::from_nanos(v.parse().expect("nanoseconds"));
    (ns(elapsed), times.split(',').map(ns).collect())
}

/// The Java client of the perfect-client forms, connected, making its nodes
/// under `znode` named `node` (a sequence number appended) with `data_len`
/// bytes; `None` (with a note) without a JDK or ZooKeeper's jars.
fn java_client(
    servers: &str,
    znode: &str,
    node: &str,
    data_len: usize,
) -> Option<(JavaClasses, std::cell::RefCell<LineProcess>)> {
    let classes = compile_java(
        "lock",
        &["benches/java/RawCycleBench.java"],
        &[
            "/usr/share/java/zookeeper.jar",
            "/usr/share/java/zookeeper-jute.jar",
            "/usr/share/java/slf4j-api.jar",
            "/usr/share/java/slf4j-nop.jar",
        ],
    )
    .map_err(|e| println!("  (the Java client's forms skipped: {e})"))
    .ok()?;
    let mut cmd = classes.java(&["-Xmx256m", "-XX:+UseSerialGC"], "RawCycleBench");
    cmd.args([servers, znode, node, &data_len.to_string()]);
    let java = LineProcess::spawn("RawCycleBench", cmd)
        .map_err(|e| println!("  (the Java client's forms skipped: cannot run java: {e})"))
        .ok()?;
    match java.recv(Duration::from_secs(60)) {
        Ok(l) if l == "ready" => Some((classes, std::cell::RefCell::new(java))),
        other => {
            println!("  (the Java client's forms skipped: {other:?})");
            None
        }
    }
}

/// The figures of one form, accumulated over its rounds.
struct Uncontended {
    name: &'static str,
    times: Vec<Duration>,
    elapsed: Duration,
    /// Cycles/s of each round.
    rates: Vec<f64>,
    /// The median cycle of each round, µs.
    p50s: Vec<f64>,
    /// CPU time of the client's process (all its threads) and of the server.
    client_cpu: Duration,
    server_cpu: Duration,
    requests: u64,
    ping_allowance: u64,
    max_outstanding: u64,
    connections: u64,
}

impl Uncontended {
    fn cycles(&self) -> usize {
        self.times.len()
    }
    fn per_second(&self) -> f64 {
        self.cycles() as f64 / self.elapsed.as_secs_f64()
    }
    fn per_cycle(&self) -> f64 {
        self.requests as f64 / self.cycles() as f64
    }
    fn median(&self) -> Duration {
        percentile(&self.times, 0.5)
    }
    fn p99(&self) -> Duration {
        percentile(&self.times, 0.99)
    }
}

/// `rounds` rounds; in each, every form does `per_round` timed cycles inside its
/// own `mntr` window. Alternating short rounds puts every form under the same
/// load (on a shared machine it drifts severalfold within seconds).
fn uncontended(
    m: &Mntr,
    servers: &[u32],
    forms: &[(&'static str, Form<'_>)],
    rounds: usize,
    per_round: usize,
) -> Vec<Uncontended> {
    let mut out: Vec<Uncontended> = forms
        .iter()
        .map(|(name, _)| Uncontended {
            name,
            times: Vec::with_capacity(rounds * per_round),
            elapsed: Duration::ZERO,
            rates: Vec::with_capacity(rounds),
            p50s: Vec::with_capacity(rounds),
            client_cpu: Duration::ZERO,
            server_cpu: Duration::ZERO,
            requests: 0,
            ping_allowance: 0,
            max_outstanding: 0,
            connections: 0,
        })
        .collect();
    for _ in 0..rounds {
        for ((_, form), acc) in forms.iter().zip(out.iter_mut()) {
            let window = Requests::start(m);
            let client = match form {
                Form::Java(java, _) => Some(java.borrow().pid()),
                _ => None,
            };
            let servers_cpu =
                || -> Duration { servers.iter().map(|&p| process_threads_cpu(Some(p))).sum() };
            let (client_before, server_before) = (process_threads_cpu(client), servers_cpu());
            let elapsed = match form {
                // The whole round in the Java process, each cycle timed there.
                Form::Java(java, form) => {
                    let (elapsed, times) = java_round(&mut java.borrow_mut(), form, per_round);
                    acc.times.extend(times);
                    elapsed
                }
                _ => {
                    let started = Instant::now();
                    for _ in 0..per_round {
                        let t = Instant::now();
                        cycle(*form);
                        acc.times.push(t.elapsed());
                    }
                    started.elapsed()
                }
            };
            acc.client_cpu += process_threads_cpu(client).saturating_sub(client_before);
            acc.server_cpu += servers_cpu().saturating_sub(server_before);
            acc.elapsed += elapsed;
            acc.rates.push(per_round as f64 / elapsed.as_secs_f64());
            let mut round = acc.times[acc.times.len().saturating_sub(per_round)..].to_vec();
            round.sort();
            acc.p50s.push(us(percentile(&round, 0.5)));
            let counted = window.stop(m);
            acc.requests += counted.requests;
            acc.ping_allowance += counted.ping_allowance;
            acc.max_outstanding = acc.max_outstanding.max(counted.outstanding);
            acc.connections = counted.connections;
        }
    }
    for u in &mut out {
        u.times.sort();
        println!(
            "  {:<28} {:>7} {:>10.0} {:>10.1} {:>10.1} {:>8.1} {:>8.1} {:>9.3} {:>11} {:>6} {:>6}",
            u.name,
            u.cycles(),
            u.per_second(),
            us(u.median()),
            us(u.p99()),
            us(u.client_cpu) / u.cycles() as f64,
            us(u.server_cpu) / u.cycles() as f64,
            u.per_cycle(),
            format!("{}/{}", u.requests, u.ping_allowance),
            u.max_outstanding,
            u.connections
        );
        // Pings are the only requests a cycle does not make: the excess over 3
        // per cycle must be within what the sessions may have pinged.
        assert!(
            u.requests <= MAX_REQUESTS_PER_CYCLE * u.cycles() as u64 + u.ping_allowance,
            "{}: {} requests for {} cycles (at most {MAX_REQUESTS_PER_CYCLE}/cycle + {} pings)",
            u.name,
            u.requests,
            u.cycles(),
            u.ping_allowance
        );
    }
    out
}

// ---------------------------------------------------------------------------
// 2. Contended
// ---------------------------------------------------------------------------

struct Contended {
    threads: usize,
    grants: usize,
    per_second: f64,
    per_grant: f64,
    median: Duration,
    p99: Duration,
}

fn contended(m: &Mntr, zkw: &ZooKeeperWatcher, znode: &str, n: usize, k: usize) -> Contended {
    let rw = ZkInterProcessReadWriteLock::new(zkw, znode, None).unwrap();
    // Make the lock znode outside the window.
    {
        let w = rw.write_lock(b"setup");
        w.acquire().unwrap();
        w.release().unwrap();
    }
    let barrier = Arc::new(Barrier::new(n + 1));
    let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handles: Vec<_> = (0..n)
        .map(|t| {
            let lock = rw.write_lock(format!("contender {t}").as_bytes());
            let barrier = barrier.clone();
            let inside = inside.clone();
            thread::spawn(move || {
                use std::sync::atomic::Ordering;
                let mut waits = Vec::with_capacity(k);
                barrier.wait();
                for _ in 0..k {
                    let started = Instant::now();
                    lock.acquire().expect("contended acquire");
                    waits.push(started.elapsed());
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two writers");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    lock.release().expect("release");
                }
                waits
            })
        })
        .collect();
    let window = Requests::start(m);
    barrier.wait();
    let started = Instant::now();
    let mut waits: Vec<Duration> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("contender thread"))
        .collect();
    let elapsed = started.elapsed();
    let counted = window.stop(m);
    waits.sort();
    let grants = n * k;
    let r = Contended {
        threads: n,
        grants,
        per_second: grants as f64 / elapsed.as_secs_f64(),
        per_grant: counted.requests as f64 / grants as f64,
        median: percentile(&waits, 0.5),
        p99: percentile(&waits, 0.99),
    };
    println!(
        "  {n} threads x {k} cycles: {grants} grants in {:.2} s = {:.0} grants/s; \
         {} requests ({} pings at most) = {:.2} per grant; acquire wait median {:.0} µs, \
         p99 {:.0} µs; outstanding {}, connections {}",
        elapsed.as_secs_f64(),
        r.per_second,
        counted.requests,
        counted.ping_allowance,
        r.per_grant,
        us(r.median),
        us(r.p99),
        counted.outstanding,
        counted.connections
    );
    assert!(
        children(zkw.zookeeper(), znode).is_empty(),
        "contended lock left children"
    );
    r
}

/// One way to pass a lock back and forth (see [`handoff_rounds`]).
struct HandoffForm {
    name: &'static str,
    /// Hand-offs/s of each round.
    rates: Vec<f64>,
    handoffs: u64,
    requests: u64,
    notifications: u64,
}

impl HandoffForm {
    fn new(name: &'static str) -> HandoffForm {
        HandoffForm {
            name,
            rates: Vec::new(),
            handoffs: 0,
            requests: 0,
            notifications: 0,
        }
    }

    /// One round of `run` inside a window of the server's counters.
    fn round(&mut self, m: &Mntr, run: impl FnOnce() -> (u64, Duration)) {
        let (received_before, sent_before) = m.received_and_sent();
        let (handoffs, elapsed) = run();
        let (received_after, sent_after) = m.received_and_sent();
        // One mntr read's own packets are inside the window (each way).
        let received = received_after.saturating_sub(received_before + m.overhead);
        let sent = sent_after.saturating_sub(sent_before + m.sent_overhead);
        // Outside the hand-offs: the first grant's create + getChildren and the
        // last release's delete.
        self.requests += received.saturating_sub(3);
        // Every request and ping is answered once; the rest sent are notifications.
        self.notifications += sent.saturating_sub(received);
        self.handoffs += handoffs;
        self.rates.push(handoffs as f64 / elapsed.as_secs_f64());
    }

    fn per_second(&self) -> f64 {
        median_f64(self.rates.clone())
    }

    fn requests(&self) -> f64 {
        self.requests as f64 / self.handoffs as f64
    }

    fn notifications(&self) -> f64 {
        self.notifications as f64 / self.handoffs as f64
    }

    /// The median over the rounds of this form's rate over `bound`'s in the
    /// same round (the rounds alternate, so each pair ran under the same load).
    fn of_bound(&self, bound: &HandoffForm) -> f64 {
        median_f64(
            self.rates
                .iter()
                .zip(&bound.rates)
                .map(|(r, b)| r / b)
                .collect(),
        )
    }
}

/// The two-party hand-off: zklock (the woken waiter's listing sent on the
/// event; and sent by the woken waiter, as before) and its bound, the same
/// requests made with the raw client on the same session, in `rounds`
/// alternating rounds of `k` turns per thread.
fn handoff(
    m: &Mntr,
    zkw: &ZooKeeperWatcher,
    root: &str,
    rounds: usize,
    k: usize,
) -> [HandoffForm; 3] {
    let (on_event, after_wake, raw) = (
        format!("{root}/handoff"),
        format!("{root}/handoff-after-wake"),
        format!("{root}/handoff-raw"),
    );
    // The lock znodes exist before the windows.
    for znode in [&on_event, &after_wake, &raw] {
        zkutil::create_with_parents(zkw, znode).unwrap();
    }
    let mut forms = [
        HandoffForm::new("zklock, listing on the event"),
        HandoffForm::new("zklock, listing after the wake"),
        HandoffForm::new("raw client (the bound)"),
    ];
    // Warm-up.
    handoff_rounds(zkw, &on_event, k);
    handoff_rounds_with(zkw, &after_wake, k, |l| l.with_listing_after_wake());
    raw_handoff_rounds(zkw, &raw, k);
    for _ in 0..rounds {
        forms[0].round(m, || handoff_rounds(zkw, &on_event, k));
        forms[1].round(m, || {
            handoff_rounds_with(zkw, &after_wake, k, |l| l.with_listing_after_wake())
        });
        forms[2].round(m, || raw_handoff_rounds(zkw, &raw, k));
    }
    for znode in [&on_event, &after_wake, &raw] {
        assert!(
            children(zkw.zookeeper(), znode).is_empty(),
            "hand-off left children"
        );
    }
    println!(
        "  hand-off between two threads of one session, {rounds} alternating rounds of {} \
         hand-offs per form (medians over the rounds):",
        2 * k - 1
    );
    println!(
        "  {:<32} {:>11} {:>10} {:>9} {:>10}",
        "form", "hand-offs/s", "% of bound", "req/h-o", "notif/h-o"
    );
    for f in &forms {
        println!(
            "  {:<32} {:>11.0} {:>9.0}% {:>9.2} {:>10.2}",
            f.name,
            f.per_second(),
            100.0 * f.of_bound(&forms[2]),
            f.requests(),
            f.notifications()
        );
    }
    let pings = ping_allowance(Duration::from_secs(1), m);
    println!("  (requests include at most {pings} pings per second of the run)");
    let ratio = forms[0].of_bound(&forms[2]);
    println!(
        "  zklock's hand-off: {:.0}% of the bound (target >= 90%: {}); {:.2}x the hand-offs/s \
         of the listing after the wake",
        100.0 * ratio,
        if ratio >= 0.9 { "met" } else { "MISSED" },
        forms[0].of_bound(&forms[1])
    );
    forms
}

// ---------------------------------------------------------------------------

fn main() {
    let _ = env_logger::builder().is_test(true).try_init();
    let cycles_n = env_usize("ZK_BENCH_CYCLES", 2000);
    let warmup = env_usize("ZK_BENCH_WARMUP", 3000);
    let threads_n = env_usize("ZK_BENCH_THREADS", 8);
    let grants = env_usize("ZK_BENCH_GRANTS", 200);

    let (bench_servers, servers) = bench_servers();
    let load_start = loadavg();
    println!(
        "zklock lock benchmark against {servers}: {} ({} CPUs, load {load_start})",
        bench_servers.describe(),
        thread::available_parallelism().map_or(0, |n| n.get())
    );
    let total = Instant::now();
    let m = Mntr::new(&servers);
    println!(
        "mntr: a read adds {} packets to zk_packets_received and {} to zk_packets_sent (subtracted)",
        m.overhead, m.sent_overhead
    );
    let root = format!("/zklock-bench-lock-{}", std::process::id());
    let admin = connect(&servers, "bench-admin");
    admin
        .zookeeper()
        .create(&root, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();

    // 1. Uncontended.
    let rounds = env_usize("ZK_BENCH_UNC_ROUNDS", 8).max(1);
    let per_round = cycles_n.div_ceil(rounds);
    println!();
    println!(
        "1. uncontended acquire + release, one thread, one session (warm-up {warmup} cycles; \
         {rounds} alternating rounds of {per_round} cycles per form)"
    );
    println!(
        "  {:<28} {:>7} {:>10} {:>10} {:>10} {:>8} {:>8} {:>9} {:>11} {:>6} {:>6}",
        "form",
        "cycles",
        "cycles/s",
        "median µs",
        "p99 µs",
        "cli µs",
        "srv µs",
        "req/cycle",
        "req/pings",
        "outst",
        "conns"
    );
    let zkw = connect(&servers, "bench-lock");
    let unc_znode = format!("{root}/uncontended");
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &unc_znode, None).unwrap();
    let write = rw.write_lock(b"bench writer");
    let read = rw.read_lock(b"bench reader");
    let sequential = rw.write_lock(b"bench writer").with_sequential_acquire();
    let mut forms: Vec<(&'static str, Form<'_>)> = vec![
        ("write acquire/release", Form::Explicit(&write)),
        ("read acquire/release", Form::Explicit(&read)),
        ("write try_lock_for + drop", Form::Guard(&write)),
        ("read try_lock_for + drop", Form::ReadGuard(&read)),
        ("write, sequential acquire", Form::Explicit(&sequential)),
        (
            "raw, 2 round trips",
            Form::RawPipelined(zkw.zookeeper(), &unc_znode),
        ),
        ("raw, 3 round trips", Form::Raw(zkw.zookeeper(), &unc_znode)),
    ];
    // The JIT warms up on the write lock (which also makes the lock znode), then
    // a little on every form.
    for _ in 0..warmup {
        cycle(forms[0].1);
    }
    for (_, form) in &forms {
        for _ in 0..(warmup / 20).max(1) {
            cycle(*form);
        }
    }
    // The perfect client: the Java client, the write lock's requests (its
    // node's name before the sequence number, its data's length) with no lock
    // logic, and the same with a short name and no data.
    let (lock_node, lock_data) = {
        write.acquire().unwrap();
        let held = children(zkw.zookeeper(), &unc_znode);
        let [node] = held.as_slice() else {
            panic!("one node under {unc_znode} while held: {held:?}")
        };
        let (data, _) = zkw
            .zookeeper()
            .get_data(&format!("{unc_znode}/{node}"), false)
            .unwrap();
        write.release().unwrap();
        (node[..node.len() - 10].to_string(), data.len())
    };
    let java = java_client(&servers, &unc_znode, &lock_node, lock_data);
    if let Some((_, java)) = &java {
        // The JIT: as many cycles as zklock's warm-up, on both forms.
        java_round(&mut java.borrow_mut(), "lock", warmup);
        java_round(&mut java.borrow_mut(), "plain", warmup / 2);
        java_round(&mut java.borrow_mut(), "sync", warmup / 2);
        forms.push((JAVA_LOCK, Form::Java(java, "lock")));
        forms.push((JAVA_PLAIN, Form::Java(java, "plain")));
        forms.push((JAVA_SYNC, Form::Java(java, "sync")));
    }
    let unc = uncontended(&m, &bench_servers.pids(), &forms, rounds, per_round);
    assert!(children(zkw.zookeeper(), &unc_znode).is_empty());
    drop((write, read, sequential));
    let with_java = java.is_some();
    drop(java);
    let by_name = |name: &str| unc.iter().find(|u| u.name == name).expect(name);
    let (pipelined, sequential) = (
        by_name("write acquire/release"),
        by_name("write, sequential acquire"),
    );
    let floor = by_name("raw, 2 round trips");
    println!(
        "  one round trip to acquire: median {:.0} µs vs {:.0} µs sequential ({:.2}x faster; \
         {:.2}x the cycles/s)",
        us(pipelined.median()),
        us(sequential.median()),
        us(sequential.median()) / us(pipelined.median()),
        pipelined.per_second() / sequential.per_second()
    );
    let floor_ratio = us(pipelined.median()) / us(floor.median());
    println!(
        "  vs the raw client's 2 round trips: median {:.2}x ({:.0} vs {:.0} µs; target <= 1.05: {})",
        floor_ratio,
        us(pipelined.median()),
        us(floor.median()),
        if floor_ratio <= 1.05 { "met" } else { "MISSED" }
    );
    if with_java {
        let perfect = [by_name(JAVA_LOCK), by_name(JAVA_SYNC)];
        println!(
            "  the perfect client (Java, the lock's requests, no lock logic): {:.0} cycles/s, \
             median {:.0} µs in 2 round trips, {:.0} cycles/s one request at a time (each \
             round's best is the bound); with a plain create: {:.0} cycles/s",
            perfect[0].per_second(),
            us(perfect[0].median()),
            perfect[1].per_second(),
            by_name(JAVA_PLAIN).per_second()
        );
        for name in [
            "write acquire/release",
            "write try_lock_for + drop",
            "read acquire/release",
            "raw, 2 round trips",
        ] {
            let (median, min, max) = of_perfect(by_name(name), &perfect);
            let (p50, p50_min, p50_max) = of_perfect_p50(by_name(name), &perfect);
            println!(
                "  {name} over the perfect client, per round: cycles/s median {:.0}% \
                 ({:.0}–{:.0}%); by median cycle {:.0}% ({:.0}–{:.0}%)",
                100.0 * median,
                100.0 * min,
                100.0 * max,
                100.0 * p50,
                100.0 * p50_min,
                100.0 * p50_max
            );
        }
        let (median, _, _) = of_perfect(pipelined, &perfect);
        println!(
            "  zklock's uncontended cycle: {:.0}% of the perfect client (target >= 95%: {})",
            100.0 * median,
            if median >= 0.95 { "met" } else { "MISSED" }
        );
    }

    // 2. Contended.
    println!();
    println!("2. contended: write locks on one znode, one watcher, a thread per instance");
    let cont = contended(&m, &zkw, &format!("{root}/contended"), threads_n, grants);
    let hand = handoff(
        &m,
        &zkw,
        &root,
        env_usize("ZK_BENCH_HANDOFF_ROUNDS", 8),
        grants.max(100),
    );
    zkw.close().unwrap();

    zkutil::delete_node_recursively(&admin, &root).unwrap();
    admin.close().unwrap();
    let load_end = loadavg();

    // 3. Summary.
    println!();
    println!(
        "summary ({} CPUs; load {load_start} at start, {load_end} at end; {:.0} s)",
        thread::available_parallelism().map_or(0, |n| n.get()),
        total.elapsed().as_secs_f64()
    );
    println!();
    println!("| benchmark | requests | rate | median | p99 |");
    println!("|---|---|---|---|---|");
    for u in &unc {
        println!(
            "| uncontended {} ({} cycles) | {:.2}/cycle | {:.0} cycles/s | {:.0} µs | {:.0} µs |",
            u.name,
            u.cycles(),
            u.per_cycle(),
            u.per_second(),
            us(u.median()),
            us(u.p99())
        );
    }
    println!(
        "| contended write, {} threads, {} grants | {:.2}/grant | {:.0} grants/s | {:.0} µs wait | {:.0} µs wait |",
        cont.threads,
        cont.grants,
        cont.per_grant,
        cont.per_second,
        us(cont.median),
        us(cont.p99)
    );
    for h in &hand {
        println!(
            "| hand-off, {} ({} hand-offs) | {:.2} requests + {:.2} notifications / hand-off | {:.0} hand-offs/s ({:.0}% of the bound) | | |",
            h.name,
            h.handoffs,
            h.requests(),
            h.notifications(),
            h.per_second(),
            100.0 * h.of_bound(&hand[2])
        );
    }

    for h in &hand {
        assert!(
            h.requests() < 5.05 && h.notifications() < 1.05,
            "hand-off, {}: {:.3} requests, {:.3} notifications",
            h.name,
            h.requests(),
            h.notifications()
        );
    }
    for u in &unc {
        assert!(
            u.per_cycle() < MAX_REQUESTS_PER_CYCLE as f64 + 0.05,
            "{}: {:.3} requests per cycle",
            u.name,
            u.per_cycle()
        );
    }
}
