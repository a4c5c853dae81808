//! The cost of the metrics (issue 36): the uncontended write-lock cycle
//! (`acquire` + `release`: create + getChildren, then delete) in this build,
//! with the feature `metrics` or without it. With the feature a recorder is
//! installed (metrics-util's `DebuggingRecorder`: a registry of atomic
//! counters and histogram buckets, what an exporter keeps), so every request,
//! attempt and hold of the cycle is recorded.
//!
//! `make bench-metrics` runs it built both ways, alternately, and prints one
//! line per run; the target is "within noise". One run:
//! `cargo bench --bench metrics [--features metrics]`. Sizes:
//! `ZK_BENCH_CYCLES` (cycles per round, default 500), `ZK_BENCH_ROUNDS` (5),
//! `ZK_BENCH_WARMUP` (1000). Uses `$ZK_SERVERS` if set, else starts a
//! ZooKeeper server.

use std::time::{Duration, Instant};

use zklock::lock::{InterProcessLock, ZkInterProcessWriteLock};
use zklock::testing::{example_servers, unique_root};
use zklock::ZooKeeperWatcher;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `n` timed acquire + release cycles.
fn cycles(lock: &ZkInterProcessWriteLock, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            lock.acquire().expect("acquire");
            lock.release().expect("release");
            t.elapsed()
        })
        .collect()
}

fn main() {
    let cycles_per_round = env_usize("ZK_BENCH_CYCLES", 500);
    let rounds = env_usize("ZK_BENCH_ROUNDS", 5);
    let warmup = env_usize("ZK_BENCH_WARMUP", 1000);
    #[cfg(feature = "metrics")]
    let snapshotter = {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::set_global_recorder(recorder).expect("the only recorder");
        snapshotter
    };
    let (_server, servers) = example_servers().expect("a ZooKeeper server");
    let zkw = ZooKeeperWatcher::connect(&servers, "metrics-bench", None).expect("connect");
    let root = unique_root("metrics-bench");
    let lock = ZkInterProcessWriteLock::new(&zkw, &root, b"bench", None).expect("lock");
    cycles(&lock, warmup);
    let mut medians = Vec::with_capacity(rounds);
    let mut all = Vec::with_capacity(rounds * cycles_per_round);
    for _ in 0..rounds {
        let mut round = cycles(&lock, cycles_per_round);
        round.sort();
        medians.push(round[round.len() / 2]);
        all.extend(round);
        // The recorder's histograms are drained, as an exporter's scrape does.
        #[cfg(feature = "metrics")]
        drop(snapshotter.snapshot());
    }
    all.sort();
    medians.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let total: Duration = all.iter().sum();
    println!(
        "metrics {:<3} uncontended write-lock cycle: median {:>7.1} us (round medians {:.1}..{:.1} us), p99 {:>7.1} us, {:>6.0} cycles/s ({} cycles)",
        if cfg!(feature = "metrics") { "on" } else { "off" },
        us(all[all.len() / 2]),
        us(medians[0]),
        us(medians[medians.len() - 1]),
        us(all[all.len() * 99 / 100]),
        all.len() as f64 / total.as_secs_f64(),
        all.len(),
    );
    let _ = zkw.close();
}
