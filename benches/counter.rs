//! Benchmark of `zklock::recipes::counter` beside Apache Curator's
//! `DistributedAtomicLong` and `SharedCount` on the same server: T threads
//! (T = 4 and 8), each with a session of its own, increment one counter N
//! times each. Prints increments/s, server requests per increment (`mntr`'s
//! `zk_packets_received`, pings allowed for), optimistic retries per
//! increment, failed increments; asserts only that no increment was lost
//! (the final value is T × N).
//!
//! - zklock `DistributedAtomicLong` (optimistic, up to 1,000 tries), and
//!   promoted to zklock's write lock after 3 tries;
//! - zklock `SharedCount`: `get` then `try_set(+1)` until it succeeds;
//! - Curator `DistributedAtomicLong` (`RetryNTimes(1000, 0)`) and
//!   `SharedCount` (`getVersionedValue` then `trySetCount`), through
//!   benches/java/CuratorCounterBench.java on Debian's Curator 5.4.
//!
//! Rounds: every form runs in each of `ZK_BENCH_ROUNDS` rounds (default 5),
//! the forms taking turns within a round (zklock's three, then Curator's
//! two); every round is printed, the table gives the median and the range
//! (min–max) over the rounds.
//!
//! `cargo bench --bench counter`; starts a ZooKeeper server with the test
//! harness. Size: `ZK_BENCH_COUNTER_EACH` (N, 200).

mod common;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use zklock::recipes::counter::{DistributedAtomicLong, SharedCount};
use zklock::testing::ZkServer;
use zklock::ZooKeeperWatcher;

const ROOT: &str = "/counter-bench";

/// One run's figures.
struct Run {
    elapsed: Duration,
    increments: u64,
    retries: u64,
    failed: u64,
    requests: u64,
    pings: u64,
}

fn print(name: &str, threads: usize, r: &Run, value: i64, expected: i64) {
    println!(
        "  {name:<44} {threads} threads: {:>5} increments in {:>8.2?}  {:>7.0}/s  {:>5.2} requests/increment (≤ {} pings)  {:>6.2} retries/increment  {} failed  value {value}",
        r.increments,
        r.elapsed,
        r.increments as f64 / r.elapsed.as_secs_f64(),
        r.requests as f64 / r.increments.max(1) as f64,
        r.pings,
        r.retries as f64 / r.increments.max(1) as f64,
        r.failed
    );
    assert_eq!(value, expected, "{name}: an increment was lost or doubled");
}

/// Runs `one` (an increment: its retries, whether it applied) `each` times
/// on `threads` threads, each with its own session made by `make`.
fn run_zklock<C: Send + 'static>(
    m: &Mntr,
    sessions: &[ZooKeeperWatcher],
    each: usize,
    make: impl Fn(&ZooKeeperWatcher) -> C,
    one: fn(&C) -> (u64, bool),
) -> Run {
    let go = Arc::new(Barrier::new(sessions.len() + 1));
    let handles: Vec<_> = sessions
        .iter()
        .map(|zkw| {
            let counter = make(zkw);
            let go = go.clone();
            thread::spawn(move || {
                go.wait();
                let (mut retries, mut failed) = (0, 0);
                for _ in 0..each {
                    let (r, ok) = one(&counter);
                    retries += r;
                    failed += u64::from(!ok);
                }
                (retries, failed)
            })
        })
        .collect();
    let window = Requests::start(m);
    let t = Instant::now();
    go.wait();
    let (mut retries, mut failed) = (0, 0);
    for h in handles {
        let (r, f) = h.join().unwrap();
        retries += r;
        failed += f;
    }
    let elapsed = t.elapsed();
    let counted = window.stop(m);
    Run {
        elapsed,
        increments: (sessions.len() * each) as u64 - failed,
        retries,
        failed,
        requests: counted.requests,
        pings: counted.ping_allowance,
    }
}

fn dal_increment(c: &DistributedAtomicLong) -> (u64, bool) {
    let v = c.increment().unwrap();
    (u64::from(v.optimistic_tries.saturating_sub(1)), v.succeeded)
}

fn shared_increment(c: &SharedCount) -> (u64, bool) {
    let mut retries = 0;
    loop {
        let v = c.get().unwrap();
        if c.try_set(v, v.value + 1).unwrap() {
            return (retries, true);
        }
        retries += 1;
    }
}

/// The long at `path` (Curator's `DistributedAtomicLong` layout).
fn long_at(zkw: &ZooKeeperWatcher, path: &str) -> i64 {
    DistributedAtomicLong::new(zkw, path, 1)
        .unwrap()
        .get()
        .unwrap()
}

/// The int at `path` (Curator's `SharedCount` layout).
fn int_at(zkw: &ZooKeeperWatcher, path: &str) -> i64 {
    SharedCount::new(zkw, path, 0)
        .unwrap()
        .get()
        .unwrap()
        .value
        .into()
}

fn main() {
    let each = env_usize("ZK_BENCH_COUNTER_EACH", 200);
    let rounds = bench_rounds(5);
    let server = ZkServer::start().expect("a ZooKeeper server");
    let servers = server.connect_string();
    let m = Mntr::new(&servers);
    let reader = connect(&servers, "counter-bench-reader");
    let load_before = loadavg();
    println!(
        "Counters: T threads x {each} increments, a session each, {rounds} alternating rounds ({} cores, load {load_before})",
        thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    );
    let mut curator = Curator::start(&servers);
    // Per thread count, per form (in the order of their first round): the
    // rounds' increments/s and requests per increment.
    let mut figures: Vec<(usize, &str, Vec<[f64; 2]>)> = Vec::new();
    let mut record = |threads: usize, name: &'static str, r: &Run| {
        let i = match figures
            .iter()
            .position(|(t, n, _)| *t == threads && *n == name)
        {
            Some(i) => i,
            None => {
                figures.push((threads, name, Vec::new()));
                figures.len() - 1
            }
        };
        figures[i].2.push([
            r.increments as f64 / r.elapsed.as_secs_f64(),
            r.requests as f64 / r.increments.max(1) as f64,
        ]);
    };
    for threads in [4usize, 8] {
        let expected = (threads * each) as i64;
        for round in 1..=rounds {
            println!("  round {round}, {threads} threads:");
            let sessions: Vec<ZooKeeperWatcher> = (0..threads)
                .map(|i| connect(&servers, &format!("counter-bench-{i}")))
                .collect();

            let name = "zklock DistributedAtomicLong";
            let path = format!("{ROOT}/zk-dal-{threads}-{round}");
            let r = run_zklock(
                &m,
                &sessions,
                each,
                |zkw| DistributedAtomicLong::new(zkw, &path, 1000).unwrap(),
                dal_increment,
            );
            print(name, threads, &r, long_at(&reader, &path), expected);
            record(threads, name, &r);

            let name = "zklock DistributedAtomicLong, lock after 3";
            let path = format!("{ROOT}/zk-promoted-{threads}-{round}");
            let lock = format!("{ROOT}/zk-promoted-{threads}-{round}-lock");
            let r = run_zklock(
                &m,
                &sessions,
                each,
                |zkw| {
                    DistributedAtomicLong::new(zkw, &path, 3)
                        .unwrap()
                        .promoted_to_lock(&lock, Duration::from_secs(60))
                        .unwrap()
                },
                dal_increment,
            );
            print(name, threads, &r, long_at(&reader, &path), expected);
            record(threads, name, &r);

            let name = "zklock SharedCount (get, try_set)";
            let path = format!("{ROOT}/zk-shared-{threads}-{round}");
            SharedCount::new(&reader, &path, 0).unwrap();
            let r = run_zklock(
                &m,
                &sessions,
                each,
                |zkw| SharedCount::new(zkw, &path, 0).unwrap(),
                shared_increment,
            );
            print(name, threads, &r, int_at(&reader, &path), expected);
            record(threads, name, &r);
            for zkw in sessions {
                zkw.close().unwrap();
            }

            if let Some(c) = curator.as_mut() {
                // Curator's side counts on one path per thread count, over
                // the rounds.
                let so_far = expected * round as i64;
                let name = "Curator DistributedAtomicLong";
                let r = c.run(&m, "dal", threads, each);
                let value = long_at(&reader, &format!("{ROOT}/dal-{threads}"));
                print(name, threads, &r, value, so_far);
                record(threads, name, &r);
                let name = "Curator SharedCount (trySetCount)";
                let r = c.run(&m, "shared", threads, each);
                let value = int_at(&reader, &format!("{ROOT}/shared-{threads}"));
                print(name, threads, &r, value, so_far);
                record(threads, name, &r);
            }
        }
    }
    println!(
        "{rounds} rounds: median (min–max) over the rounds; load average {load_before} before, {} after",
        loadavg()
    );
    println!("| form | threads | increments/s | requests/increment |");
    println!("|---|---|---|---|");
    for (threads, name, v) in &figures {
        let column = |i: usize, digits: usize| {
            let c: Vec<f64> = v.iter().map(|x| x[i]).collect();
            Spread::of(&c).map_or_else(|| "–".to_string(), |s| s.text(digits))
        };
        println!(
            "| {name} | {threads} | {} | {} |",
            column(0, 0),
            column(1, 2)
        );
    }
}

/// The Curator side: one JVM for every run.
struct Curator {
    java: LineProcess,
    _classes: JavaClasses,
}

impl Curator {
    fn start(servers: &str) -> Option<Curator> {
        let classes = match compile_java(
            "counter",
            &["benches/java/CuratorCounterBench.java"],
            &CURATOR_JARS,
        ) {
            Ok(c) => c,
            Err(e) => {
                println!("NOTE: Curator skipped ({e}); no Curator figures.");
                return None;
            }
        };
        let mut cmd = classes.java(&["-Xmx256m", "-XX:+UseSerialGC"], "CuratorCounterBench");
        cmd.args(["serve", servers, ROOT]);
        let java = LineProcess::spawn("CuratorCounterBench", cmd).unwrap();
        assert_eq!(java.recv(Duration::from_secs(120)).unwrap(), "ready");
        Some(Curator {
            java,
            _classes: classes,
        })
    }

    /// `kind` (`dal` or `shared`) on `threads` sessions: connected and armed
    /// outside the request window.
    fn run(&mut self, m: &Mntr, kind: &str, threads: usize, each: usize) -> Run {
        let bound = Duration::from_secs(600);
        let armed = self.java.ask(&format!("{kind} {threads} {each}"), bound);
        assert_eq!(armed.unwrap(), "armed");
        let window = Requests::start(m);
        let answer = self.java.ask("go", bound).unwrap();
        let counted = window.stop(m);
        assert_eq!(self.java.ask("close", bound).unwrap(), "closed");
        let f = parse_fields(&answer);
        Run {
            elapsed: Duration::from_nanos(f["elapsed_ns"] as u64),
            increments: f["increments"] as u64,
            retries: f["retries"] as u64,
            failed: f["failed"] as u64,
            requests: counted.requests,
            pings: counted.ping_allowance,
        }
    }
}
