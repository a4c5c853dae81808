//! Counting semaphore benchmark (issue 23): prints figures.
//!
//! `cargo bench --bench semaphore`. Uses `$ZK_SERVERS` if set, else starts a
//! ZooKeeper server through `zklock::testing`. Sizes: `ZK_BENCH_CYCLES`
//! (uncontended cycles, default 1000), `ZK_BENCH_GRANTS` (grants per holder
//! when contended, default 100).
//!
//! 1. **Uncontended** acquire + release of one lease (limit 4), one thread,
//!    one session: cycles/s, median and p99, and ZooKeeper requests per cycle
//!    (the server's `zk_packets_received`, the `mntr` reads' own cost
//!    subtracted, pings allowed for) and notifications per cycle
//!    (`zk_packets_sent` − received).
//! 2. **Contended**: 8 holders (threads, each with its own instance, on two
//!    sessions) for a limit of 4, each doing `ZK_BENCH_GRANTS` acquire/release
//!    cycles: grants/s, requests and notifications per grant, and the most
//!    holders seen at once (must not exceed 4).
//!
//! Curator's `InterProcessSemaphoreV2` and kazoo's `Semaphore` run on other
//! layouts (`<p>/locks` + `<p>/leases` with Curator's names; kazoo's lock at
//! `<p>-__lock__` and unsequenced leases); their figures are printed beside
//! zklock's when the dialects are in (see the report of issue 23).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use zklock::lock::ZkSemaphore;
use zklock::testing::example_servers;

mod common;
use common::*;

/// One form's figures.
struct Figures {
    name: String,
    rate: f64,
    median_us: f64,
    p99_us: f64,
    requests: f64,
    notifications: f64,
}

fn uncontended(servers: &str, m: &Mntr, root: &str, cycles: usize) -> Figures {
    let zkw = connect(servers, "bench-sem-uncontended");
    let sem = ZkSemaphore::new(&zkw, root, 4, b"bench").unwrap();
    for _ in 0..cycles.min(300) {
        sem.acquire().unwrap().release().unwrap();
    }
    let mut times = Vec::with_capacity(cycles);
    let window = Window::start(m);
    let started = Instant::now();
    for _ in 0..cycles {
        let t = Instant::now();
        let lease = sem.acquire().unwrap();
        lease.release().unwrap();
        times.push(t.elapsed());
    }
    let elapsed = started.elapsed();
    // The mutex's delete goes in the background: let it land in the window.
    thread::sleep(Duration::from_millis(200));
    let traffic = window.stop(m);
    times.sort();
    Figures {
        name: "zklock ZkSemaphore, uncontended (limit 4)".into(),
        rate: cycles as f64 / elapsed.as_secs_f64(),
        median_us: us(percentile(&times, 0.5)),
        p99_us: us(percentile(&times, 0.99)),
        requests: traffic.received.saturating_sub(traffic.ping_allowance) as f64 / cycles as f64,
        notifications: traffic.notifications() as f64 / cycles as f64,
    }
}

fn contended(servers: &str, m: &Mntr, root: &str, grants: usize) -> (Figures, usize) {
    let sessions = [
        connect(servers, "bench-sem-a"),
        connect(servers, "bench-sem-b"),
    ];
    let holders = 8;
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(holders + 1));
    let threads: Vec<_> = (0..holders)
        .map(|i| {
            let sem = ZkSemaphore::new(&sessions[i % 2], root, 4, b"bench").unwrap();
            let (holding, most, start) = (holding.clone(), most.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let mut times = Vec::with_capacity(grants);
                for _ in 0..grants {
                    let t = Instant::now();
                    let lease = sem.acquire().unwrap();
                    times.push(t.elapsed());
                    let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    holding.fetch_sub(1, Ordering::SeqCst);
                    lease.release().unwrap();
                }
                times
            })
        })
        .collect();
    let window = Window::start(m);
    let started = Instant::now();
    start.wait();
    let mut times: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let elapsed = started.elapsed();
    thread::sleep(Duration::from_millis(200));
    let traffic = window.stop(m);
    times.sort();
    let n = (holders * grants) as f64;
    (
        Figures {
            name: "zklock ZkSemaphore, 8 holders for a limit of 4".into(),
            rate: n / elapsed.as_secs_f64(),
            median_us: us(percentile(&times, 0.5)),
            p99_us: us(percentile(&times, 0.99)),
            requests: traffic.received.saturating_sub(traffic.ping_allowance) as f64 / n,
            notifications: traffic.notifications() as f64 / n,
        },
        most.load(Ordering::SeqCst),
    )
}

fn main() {
    let _ = env_logger::builder().is_test(true).try_init();
    let cycles = env_usize("ZK_BENCH_CYCLES", 1000);
    let grants = env_usize("ZK_BENCH_GRANTS", 100);
    let (_server, servers) = example_servers().expect("a ZooKeeper server");
    println!(
        "zklock semaphore benchmark against {servers} ({} CPUs, load {})",
        thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg()
    );
    let m = Mntr::new(&servers);
    let root = format!("/zklock-bench-semaphore-{}", std::process::id());
    let mut rows = vec![uncontended(&servers, &m, &format!("{root}/u"), cycles)];
    let (figures, most) = contended(&servers, &m, &format!("{root}/c"), grants);
    println!("most holders at once: {most} (limit 4)");
    assert!(most <= 4, "{most} holders for a limit of 4");
    rows.push(figures);
    println!();
    println!("| form | ops/s | median µs | p99 µs | requests/op | notifications/op |");
    println!("|---|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |",
            r.name, r.rate, r.median_us, r.p99_us, r.requests, r.notifications
        );
    }
}
