//! Inter-process lock benchmark (issue 6, "Performance (benchmark)"): prints
//! figures; fails only when a stated target is clearly missed.
//!
//! `cargo bench --bench lock`. Uses `$ZK_SERVERS` if set (the request counts then
//! include every other client of those servers), else starts a ZooKeeper server
//! through `zklock::testing`. Sizes: `ZK_BENCH_CYCLES` (uncontended cycles per
//! form, default 2000), `ZK_BENCH_WARMUP` (default 3000), `ZK_BENCH_THREADS` (8),
//! `ZK_BENCH_GRANTS` (per thread, 200), `ZK_BENCH_WAITERS` (1000),
//! `ZK_BENCH_WAITER_STACK_KIB` (128).
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
//!    1.05x). After a warm-up (the server's JIT), the forms run in 8
//!    alternating rounds (the load of a shared machine drifts severalfold within
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
//!    the woken waiter's getChildren) and 1 notification.
//! 3. **1,000 waiters**: a holder session holds the write lock of each of 1,000
//!    lock znodes; then one thread per lock (stack `ZK_BENCH_WAITER_STACK_KIB`)
//!    blocks in `acquire()` through one waiter `ZooKeeperWatcher`. Printed: RSS
//!    and threads before/after the waiters queue, bytes per waiter, the waiter
//!    watcher's listeners and the client's watches; `zkw.process(..)` cost for an
//!    event on an unrelated path and on a waited node's sibling, with 0, 10 and
//!    1,000 registered waiters (fails if 1,000 cost more than 3× what 10 listeners
//!    cost; with none the path index is not even hashed); then the holders release one by one and the latency from the
//!    `release()` call to the waiter's `acquire()` returning is recorded, against
//!    the same with a single waiter (rounds before and after the 1,000), each
//!    release after the same 2 ms of quiet (see `SETTLE`). Every waiter must get
//!    its lock (a 30 s bound each); at the end every lock znode must have no
//!    child left, and the watcher no listener and no watch.
//! 4. A summary table (markdown).

use std::env;
use std::hint::black_box;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{Acl, CreateMode, EventType, WatchedEvent, ZooKeeper};
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, LockStep, ZkInterProcessReadLock,
    ZkInterProcessReadWriteLock, ZkInterProcessWriteLock,
};
use zklock::testing::{eventually, ZkServer};

mod common;
use common::*;
use zklock::{zkutil, DeletionListener, ZkError, ZooKeeperListener, ZooKeeperWatcher};

/// The most a waiter may take to get its lock once its predecessor is gone.
const WAKE_BOUND: Duration = Duration::from_secs(30);
/// Largest uncontended requests per cycle (the protocol's floor).
const MAX_REQUESTS_PER_CYCLE: u64 = 3;
/// Largest acceptable dispatch cost ratio, 1,000 waiters : few.
const MAX_DISPATCH_RATIO: f64 = 3.0;
/// `process` calls per dispatch sample, and samples (median reported).
const DISPATCH_EVENTS: u32 = 100_000;
const DISPATCH_SAMPLES: usize = 7;
/// Rounds of the single-waiter latency measurement, after unreported ones.
const ONE_WAITER_ROUNDS: usize = 200;
const ONE_WAITER_WARMUP: usize = 20;
/// Quiet time before each measured release, in both the 1,000-waiter and the
/// 1-waiter case. A request after an idle gap is slower (on this kind of machine
/// a raw `exists` after 20 ms idle takes ~1.6 ms instead of ~0.2–0.4 ms hot), and
/// the single-waiter rounds necessarily idle while their waiter queues: the same
/// pause before every release keeps the two comparable.
const SETTLE: Duration = Duration::from_millis(2);

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
    }
}

/// The figures of one form, accumulated over its rounds.
struct Uncontended {
    name: &'static str,
    times: Vec<Duration>,
    elapsed: Duration,
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
            requests: 0,
            ping_allowance: 0,
            max_outstanding: 0,
            connections: 0,
        })
        .collect();
    for _ in 0..rounds {
        for ((_, form), acc) in forms.iter().zip(out.iter_mut()) {
            let window = Requests::start(m);
            let started = Instant::now();
            for _ in 0..per_round {
                let t = Instant::now();
                cycle(*form);
                acc.times.push(t.elapsed());
            }
            acc.elapsed += started.elapsed();
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
            "  {:<28} {:>7} {:>10.0} {:>10.1} {:>10.1} {:>9.3} {:>11} {:>6} {:>6}",
            u.name,
            u.cycles(),
            u.per_second(),
            us(u.median()),
            us(u.p99()),
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

/// Per hand-off figures of [`handoff`].
struct Handoff {
    handoffs: usize,
    requests: f64,
    notifications: f64,
    per_second: f64,
}

/// What the two hand-off threads tell each other.
enum Turn {
    /// My watch on your node is set: release.
    Queued,
    /// I am done: release the last time.
    Done,
}

/// Two write-lock instances pass the lock back and forth `k` times each; each
/// holder releases only once the other's watch is set, so every grant but the
/// first is a hand-off.
fn handoff(m: &Mntr, zkw: &ZooKeeperWatcher, znode: &str, k: usize) -> Handoff {
    // The lock znode exists before the window.
    zkutil::create_with_parents(zkw, znode).unwrap();
    let (to_a, a_rx) = mpsc::channel::<Turn>();
    let (to_b, b_rx) = mpsc::channel::<Turn>();
    let make = |name: &str, tell_other: Sender<Turn>| {
        let tell = std::sync::Mutex::new(tell_other);
        ZkInterProcessWriteLock::new(zkw, znode, name.as_bytes(), None)
            .unwrap()
            .with_step_hook(move |step, _path| {
                if step == LockStep::Watching {
                    let _ = tell.lock().unwrap().send(Turn::Queued);
                }
            })
    };
    let a = make("a", to_b.clone());
    let b = make("b", to_a.clone());
    let barrier = Arc::new(Barrier::new(3));
    let run = |lock: ZkInterProcessWriteLock,
               rx: Receiver<Turn>,
               other: Sender<Turn>,
               barrier: Arc<Barrier>| {
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
    let (received_before, sent_before) = m.received_and_sent();
    let ta = run(a, a_rx, to_b, barrier.clone());
    let tb = run(b, b_rx, to_a, barrier.clone());
    barrier.wait();
    let started = Instant::now();
    ta.join().expect("hand-off thread");
    tb.join().expect("hand-off thread");
    let elapsed = started.elapsed();
    let (received_after, sent_after) = m.received_and_sent();
    // One mntr read's own packets are inside the window (each way).
    let received = received_after.saturating_sub(received_before + m.overhead);
    let sent = sent_after.saturating_sub(sent_before + m.sent_overhead);
    let pings = ping_allowance(elapsed, m);
    // 2k grants, all but the first after a hand-off. Outside the hand-offs: the
    // first grant's create + getChildren and the last release's delete.
    let handoffs = 2 * k - 1;
    let requests = received.saturating_sub(3);
    // Every request and ping is answered once; the rest sent are notifications.
    let notifications = sent.saturating_sub(received);
    let r = Handoff {
        handoffs,
        requests: requests as f64 / handoffs as f64,
        notifications: notifications as f64 / handoffs as f64,
        per_second: handoffs as f64 / elapsed.as_secs_f64(),
    };
    println!(
        "  hand-off between two instances, {handoffs} hand-offs in {:.2} s = {:.0}/s: \
         {received} requests ({pings} pings at most; 3 outside the hand-offs) = {:.2} per \
         hand-off; {notifications} notifications = {:.2} per hand-off",
        elapsed.as_secs_f64(),
        r.per_second,
        r.requests,
        r.notifications,
    );
    assert!(
        children(zkw.zookeeper(), znode).is_empty(),
        "hand-off left children"
    );
    r
}

// ---------------------------------------------------------------------------
// 3. Many waiters
// ---------------------------------------------------------------------------

enum Msg {
    Acquired(usize, Instant),
    Released(usize),
    Failed(usize, String),
}

/// A thread blocking in `acquire()` on `znode` through `zkw`; releases right
/// after it gets the lock.
fn spawn_waiter(
    zkw: &ZooKeeperWatcher,
    znode: &str,
    i: usize,
    stack: usize,
    tx: Sender<Msg>,
) -> thread::JoinHandle<()> {
    let lock = ZkInterProcessWriteLock::new(zkw, znode, b"waiter", None).unwrap();
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

/// Waits until every path of `waited` carries a watch on the server (`wchp`):
/// the last step of a waiter before it blocks is its watch on the node it waits
/// for, so this is "every waiter is blocked" whatever else a waiter watches.
fn await_queued(m: &Mntr, rx: &Receiver<Msg>, waited: &[String], poll: Duration) {
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        match rx.try_recv() {
            Ok(Msg::Failed(j, e)) => panic!("waiter {j}: {e}"),
            Ok(Msg::Acquired(j, _) | Msg::Released(j)) => {
                panic!("waiter {j} got its lock while its holder holds it")
            }
            Err(_) => {}
        }
        let watched = m.watched_paths();
        let missing = waited.iter().filter(|p| !watched.contains(*p)).count();
        if missing == 0 {
            return;
        }
        assert!(
            Instant::now() < end,
            "{missing} of {} waiters not queued after 120 s",
            waited.len()
        );
        thread::sleep(poll);
    }
}

/// ns per `zkw.process(event)`, median of samples.
fn dispatch_ns(zkw: &ZooKeeperWatcher, event: &WatchedEvent) -> f64 {
    for _ in 0..DISPATCH_EVENTS / 10 {
        zkw.process(black_box(event.clone()));
    }
    let samples = (0..DISPATCH_SAMPLES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..DISPATCH_EVENTS {
                zkw.process(black_box(event.clone()));
            }
            started.elapsed().as_nanos() as f64 / f64::from(DISPATCH_EVENTS)
        })
        .collect();
    median_f64(samples)
}

struct Dispatch {
    listeners: usize,
    unrelated: f64,
    sibling: f64,
}

fn dispatch(zkw: &ZooKeeperWatcher, label: &str, unrelated: &str, sibling: &str) -> Dispatch {
    let d = Dispatch {
        listeners: zkw.number_of_listeners(),
        unrelated: dispatch_ns(
            zkw,
            &WatchedEvent::node(EventType::NodeDataChanged, unrelated),
        ),
        sibling: dispatch_ns(
            zkw,
            &WatchedEvent::node(EventType::NodeDataChanged, sibling),
        ),
    };
    println!(
        "  {label:<34} {:>9} {:>14.1} {:>14.1}",
        d.listeners, d.unrelated, d.sibling
    );
    d
}

/// `rounds` times (after `ONE_WAITER_WARMUP` unreported ones): the holder takes
/// `znode`, one waiter thread queues, the holder releases; release → acquired.
fn one_waiter(
    m: &Mntr,
    holder_zkw: &ZooKeeperWatcher,
    waiter_zkw: &ZooKeeperWatcher,
    znode: &str,
    stack: usize,
    rounds: usize,
) -> Vec<Duration> {
    let holder = ZkInterProcessWriteLock::new(holder_zkw, znode, b"holder", None).unwrap();
    let mut out = Vec::with_capacity(rounds);
    for round in 0..ONE_WAITER_WARMUP + rounds {
        holder.acquire().unwrap();
        let (tx, rx) = mpsc::channel();
        let h = spawn_waiter(waiter_zkw, znode, 0, stack, tx);
        let held = holder.acquired_lock().expect("held").path;
        await_queued(m, &rx, &[held], Duration::from_millis(1));
        thread::sleep(SETTLE);
        let released = Instant::now();
        holder.release().unwrap();
        let acquired = await_waiter(&rx, 0);
        h.join().expect("waiter thread");
        if round >= ONE_WAITER_WARMUP {
            out.push(acquired - released);
        }
    }
    assert!(
        children(holder_zkw.zookeeper(), znode).is_empty(),
        "{znode} has children"
    );
    assert!(eventually(Duration::from_secs(5), || {
        waiter_zkw.number_of_listeners() == 0 && waiter_zkw.zookeeper().watch_count() == 0
    }));
    out
}

struct Waiters {
    n: usize,
    stack_kib: usize,
    queue_time: Duration,
    rss_before: u64,
    rss_after: u64,
    threads_before: usize,
    threads_after: usize,
    listeners: usize,
    watches: usize,
    server_watches: u64,
    dispatch: Vec<Dispatch>,
    /// release → acquired, with ≥ n/2 waiters still queued.
    many: Vec<Duration>,
    /// release → acquired, all n.
    all: Vec<Duration>,
    /// release → acquired, one waiter.
    one: Vec<Duration>,
}

fn many_waiters(m: &Mntr, servers: &str, root: &str, n: usize, stack_kib: usize) -> Waiters {
    let stack = stack_kib * 1024;
    let holder_zkw = connect(servers, "bench-holder");
    let waiter_zkw = connect(servers, "bench-waiter");
    let zk = holder_zkw.zookeeper().clone();
    let dir = format!("{root}/many");
    zk.create(&dir, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let locks: Vec<String> = (0..n).map(|i| format!("{dir}/lock-{i:05}")).collect();
    for l in &locks {
        zk.create(l, b"", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
    }

    // Release → acquired with a single waiter, half before and half after the
    // 1,000 (the load drifts).
    let one_lock = format!("{root}/one");
    let mut one = one_waiter(
        m,
        &holder_zkw,
        &waiter_zkw,
        &one_lock,
        stack,
        ONE_WAITER_ROUNDS / 2,
    );

    // Holders.
    let holders: Vec<ZkInterProcessWriteLock> = locks
        .iter()
        .map(|l| {
            let h = ZkInterProcessWriteLock::new(&holder_zkw, l, b"holder", None).unwrap();
            h.acquire().unwrap();
            h
        })
        .collect();
    let target = n / 2;
    let held = holders[target].acquired_lock().unwrap().path;
    let unrelated = "/some/unrelated/path";
    let sibling = format!("{}/read-sibling-{:010}", locks[target], 999_999_999);
    assert_ne!(held, sibling);

    println!(
        "  dispatch: zkw.process(NodeDataChanged), ns/event (median of {DISPATCH_SAMPLES} x {DISPATCH_EVENTS})"
    );
    println!(
        "  {:<34} {:>9} {:>14} {:>14}",
        "", "listeners", "unrelated path", "waited sibling"
    );
    let mut dispatches = vec![dispatch(&waiter_zkw, "no waiter", unrelated, &sibling)];
    // Ten DeletionListeners on other lock nodes (as ten waiters), no watch needed.
    let ten: Vec<Arc<dyn ZooKeeperListener>> = (0..10)
        .map(|i| {
            let l: Arc<dyn ZooKeeperListener> = Arc::new(DeletionListener::new(
                &waiter_zkw,
                &format!("{}/write-x-{:010}", locks[i], i),
            ));
            waiter_zkw.register_listener(l.clone());
            l
        })
        .collect();
    dispatches.push(dispatch(
        &waiter_zkw,
        "10 DeletionListeners",
        unrelated,
        &sibling,
    ));
    for l in &ten {
        assert!(waiter_zkw.unregister_listener(l));
    }

    // The waiters.
    let (rss_before, vm_before, threads_before) = (rss_kib(), vm_kib(), threads());
    let (tx, rx) = mpsc::channel();
    let queue_started = Instant::now();
    let handles: Vec<_> = locks
        .iter()
        .enumerate()
        .map(|(i, l)| spawn_waiter(&waiter_zkw, l, i, stack, tx.clone()))
        .collect();
    drop(tx);
    let waited: Vec<String> = holders
        .iter()
        .map(|h| h.acquired_lock().expect("held").path)
        .collect();
    await_queued(m, &rx, &waited, Duration::from_millis(20));
    let queue_time = queue_started.elapsed();
    let (rss_after, vm_after, threads_after) = (rss_kib(), vm_kib(), threads());
    let listeners = waiter_zkw.number_of_listeners();
    let watches = waiter_zkw.zookeeper().watch_count();
    let mntr = m.read();
    let server = |k: &str| -> u64 {
        mntr.iter()
            .map(|x| x.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
            .sum()
    };
    let server_watches = server("zk_watch_count");
    println!(
        "  {n} waiters queued in {:.2} s (thread stack {stack_kib} KiB): \
         RSS {rss_before} -> {rss_after} KiB ({:.1} KiB/waiter), threads {threads_before} -> \
         {threads_after}; virtual {} -> {} MiB",
        queue_time.as_secs_f64(),
        (rss_after.saturating_sub(rss_before)) as f64 / n as f64,
        vm_before / 1024,
        vm_after / 1024
    );
    println!(
        "  waiter watcher: {listeners} listeners, client watch_count {watches}; server: \
         zk_watch_count {server_watches}, zk_ephemerals_count {}, zk_znode_count {}, \
         zk_num_alive_connections {}",
        server("zk_ephemerals_count"),
        server("zk_znode_count"),
        server("zk_num_alive_connections")
    );
    println!(
        "  per waiter: {:.2} listeners, {:.2} client watches, {:.2} server watches",
        listeners as f64 / n as f64,
        watches as f64 / n as f64,
        server_watches as f64 / n as f64
    );
    // Every waiter waits on a per-watch watcher of its holder's node, never on
    // the watcher's listener registry (which is the users' alone).
    assert_eq!(listeners, 0, "{listeners} listeners for {n} waiters");
    assert!(watches >= n, "{watches} watches for {n} waiters");
    for l in &locks[..3] {
        assert_eq!(children(&zk, l).len(), 2, "{l}: holder + waiter");
    }

    dispatches.push(dispatch(
        &waiter_zkw,
        &format!("{n} waiting locks"),
        unrelated,
        &sibling,
    ));

    // Release the holders one by one.
    let mut all = Vec::with_capacity(n);
    for (i, holder) in holders.iter().enumerate() {
        thread::sleep(SETTLE);
        let released = Instant::now();
        holder.release().unwrap();
        let acquired = await_waiter(&rx, i);
        all.push(acquired - released);
    }
    for h in handles {
        h.join().expect("waiter thread");
    }
    // The trend against the number still waiting, in tenths of the releases.
    let tenth = n.div_ceil(10).max(1);
    let trend: Vec<String> = all
        .chunks(tenth)
        .enumerate()
        .map(|(k, c)| {
            let mut c = c.to_vec();
            c.sort();
            format!("{}: {:.0}", n - k * tenth, us(percentile(&c, 0.5)))
        })
        .collect();
    println!(
        "  release -> acquired median µs by waiters still queued: {}",
        trend.join(", ")
    );
    let mut many: Vec<Duration> = all[..n.div_ceil(2)].to_vec();
    many.sort();
    all.sort();
    let rss_end = rss_kib();
    one.extend(one_waiter(
        m,
        &holder_zkw,
        &waiter_zkw,
        &one_lock,
        stack,
        ONE_WAITER_ROUNDS - ONE_WAITER_ROUNDS / 2,
    ));
    one.sort();

    // Nothing left behind.
    for l in &locks {
        let c = children(&zk, l);
        assert!(c.is_empty(), "{l} still has children {c:?}");
    }
    assert!(eventually(Duration::from_secs(5), || {
        waiter_zkw.number_of_listeners() == 0 && waiter_zkw.zookeeper().watch_count() == 0
    }));
    assert_eq!(holder_zkw.number_of_listeners(), 0);
    dispatches.push(dispatch(
        &waiter_zkw,
        "after all released",
        unrelated,
        &sibling,
    ));
    println!(
        "  all {n} waiters got their lock; every lock znode is empty; \
         RSS after joining {rss_end} KiB, threads {}",
        threads()
    );
    drop(holders);
    for l in &locks {
        zk.delete(l, None).unwrap();
    }
    zk.delete(&dir, None).unwrap();
    zk.delete(&one_lock, None).unwrap();
    waiter_zkw.close().unwrap();
    holder_zkw.close().unwrap();

    Waiters {
        n,
        stack_kib,
        queue_time,
        rss_before,
        rss_after,
        threads_before,
        threads_after,
        listeners,
        watches,
        server_watches,
        dispatch: dispatches,
        many,
        all,
        one,
    }
}

// ---------------------------------------------------------------------------

fn main() {
    let _ = env_logger::builder().is_test(true).try_init();
    let cycles_n = env_usize("ZK_BENCH_CYCLES", 2000);
    let warmup = env_usize("ZK_BENCH_WARMUP", 3000);
    let threads_n = env_usize("ZK_BENCH_THREADS", 8);
    let grants = env_usize("ZK_BENCH_GRANTS", 200);
    let waiters_n = env_usize("ZK_BENCH_WAITERS", 1000);
    let stack_kib = env_usize("ZK_BENCH_WAITER_STACK_KIB", 128);

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
    println!(
        "zklock lock benchmark against {servers} ({} CPUs, load {load_start})",
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
    let rounds = 8;
    let per_round = cycles_n.div_ceil(rounds);
    println!();
    println!(
        "1. uncontended acquire + release, one thread, one session (warm-up {warmup} cycles; \
         {rounds} alternating rounds of {per_round} cycles per form)"
    );
    println!(
        "  {:<28} {:>7} {:>10} {:>10} {:>10} {:>9} {:>11} {:>6} {:>6}",
        "form",
        "cycles",
        "cycles/s",
        "median µs",
        "p99 µs",
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
    let forms: [(&'static str, Form<'_>); 7] = [
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
    let unc = uncontended(&m, &forms, rounds, per_round);
    assert!(children(zkw.zookeeper(), &unc_znode).is_empty());
    drop((write, read, sequential));
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

    // 2. Contended.
    println!();
    println!("2. contended: write locks on one znode, one watcher, a thread per instance");
    let cont = contended(&m, &zkw, &format!("{root}/contended"), threads_n, grants);
    let hand = handoff(&m, &zkw, &format!("{root}/handoff"), grants.max(100));
    zkw.close().unwrap();

    // 3. Many waiters.
    println!();
    println!("3. {waiters_n} threads waiting on distinct write locks through one ZooKeeperWatcher");
    let w = many_waiters(&m, &servers, &root, waiters_n, stack_kib);
    println!(
        "  release() (after {} ms quiet) -> waiter's acquire() returned, µs: {:>8} {:>8} {:>8} {:>8}",
        SETTLE.as_millis(),
        "median", "p90", "p99", "max"
    );
    for (label, v) in [
        (
            format!("with {}..{} waiting", w.n, w.n - w.many.len() + 1),
            &w.many,
        ),
        (format!("all {} releases", w.n), &w.all),
        ("1 waiter (rounds before and after)".to_string(), &w.one),
    ] {
        println!(
            "    {label:<40} {:>8.0} {:>8.0} {:>8.0} {:>8.0}",
            us(percentile(v, 0.5)),
            us(percentile(v, 0.9)),
            us(percentile(v, 0.99)),
            us(percentile(v, 1.0))
        );
    }

    zkutil::delete_node_recursively(&admin, &root).unwrap();
    admin.close().unwrap();
    let load_end = loadavg();

    // 4. Summary.
    // Dispatch with 1,000 waiters against 10 listeners: the same code path (a
    // lookup in a non-empty path index; with none the index is skipped).
    let (ten, loaded) = (&w.dispatch[1], &w.dispatch[2]);
    let ratio = (loaded.unrelated / ten.unrelated).max(loaded.sibling / ten.sibling);
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
    println!(
        "| hand-off between two instances ({} hand-offs) | {:.2} requests + {:.2} notifications / hand-off | {:.0} hand-offs/s | | |",
        hand.handoffs, hand.requests, hand.notifications, hand.per_second
    );
    println!(
        "| {} waiters: release → waiter acquired ({}..{} waiting) | | | {:.0} µs | {:.0} µs |",
        w.n,
        w.n,
        w.n - w.many.len() + 1,
        us(percentile(&w.many, 0.5)),
        us(percentile(&w.many, 0.99))
    );
    println!(
        "| 1 waiter: release → waiter acquired ({} rounds, before and after) | | | {:.0} µs | {:.0} µs |",
        w.one.len(),
        us(percentile(&w.one, 0.5)),
        us(percentile(&w.one, 0.99))
    );
    println!();
    println!("| {} waiters, one watcher | value |", w.n);
    println!("|---|---|");
    println!(
        "| queued in | {:.2} s |\n| RSS before → after | {} → {} KiB |\n| per waiter (thread stack {} KiB) | {:.1} KiB |\n| threads before → after | {} → {} |\n| listeners / client watches / server watches | {} / {} / {} |\n| per waiter: listeners / client watches | {:.2} / {:.2} |",
        w.queue_time.as_secs_f64(),
        w.rss_before,
        w.rss_after,
        w.stack_kib,
        (w.rss_after.saturating_sub(w.rss_before)) as f64 / w.n as f64,
        w.threads_before,
        w.threads_after,
        w.listeners,
        w.watches,
        w.server_watches,
        w.listeners as f64 / w.n as f64,
        w.watches as f64 / w.n as f64
    );
    for d in &w.dispatch {
        println!(
            "| dispatch, {} listeners: unrelated / sibling | {:.0} / {:.0} ns |",
            d.listeners, d.unrelated, d.sibling
        );
    }
    println!(
        "| dispatch ratio {} waiters : 10 listeners (worse of the two events) | {ratio:.2} |",
        w.n
    );

    assert!(
        hand.requests < 5.05 && hand.notifications < 1.05,
        "hand-off: {:.3} requests, {:.3} notifications",
        hand.requests,
        hand.notifications
    );
    for u in &unc {
        assert!(
            u.per_cycle() < MAX_REQUESTS_PER_CYCLE as f64 + 0.05,
            "{}: {:.3} requests per cycle",
            u.name,
            u.per_cycle()
        );
    }
    assert!(
        ratio <= MAX_DISPATCH_RATIO,
        "dispatch grows with waiters: {ratio:.2}x with {} waiters vs 10 (max {MAX_DISPATCH_RATIO})",
        w.n
    );
}
