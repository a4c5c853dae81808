//! Listener dispatch cost against the number of registered single-path listeners
//! (issue 4; DESIGN.md "Dispatch must not grow with the number of waiters").
//!
//! `cargo bench --bench dispatch`. Uses `$ZK_SERVERS` (or `$ZK_TEST_SERVERS`) if
//! set, else starts a ZooKeeper server through `zklock::testing`.
//!
//! 1. **Dispatch**: 10, 100, 1,000 and 10,000 listeners, each about its own path
//!    (as one `DeletionListener` per waiting lock), on one `ZooKeeperWatcher`;
//!    `zkw.process(NodeDeleted on one of those paths)` timed in a loop. Prints
//!    ns/event per size and the ratio 10,000 : 10, and fails if it exceeds 3.
//! 2. **Through the server**: the same watcher with 10 and 10,000 listeners; a
//!    delete of a watched node, timed from the `delete` call until the node's
//!    listener runs on the event thread (the notification precedes the reply).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zklock::client::{Acl, CreateMode, EventType, WatchedEvent};
use zklock::testing::ZkServer;
use zklock::{ZooKeeperListener, ZooKeeperWatcher};

const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];
/// Events per sample, and samples per size (the median is reported).
const EVENTS: u64 = 200_000;
const SAMPLES: usize = 7;
/// Deletes through the server per size, after `WARMUP` unreported ones (the
/// server's JIT).
const ROUNDS: usize = 300;
const WARMUP: usize = 200;
/// The largest acceptable ns/event ratio between 10,000 and 10 listeners.
const MAX_RATIO: f64 = 3.0;

/// A listener about one path, as a lock waiter's `DeletionListener`.
struct PathListener {
    path: String,
    hits: Arc<AtomicU64>,
    tx: Option<Mutex<Sender<Instant>>>,
}

impl ZooKeeperListener for PathListener {
    fn node_deleted(&self, _path: &str) {
        self.hits.fetch_add(1, Ordering::Relaxed);
        if let Some(tx) = &self.tx {
            let _ = tx.lock().unwrap().send(Instant::now());
        }
    }
    fn path(&self) -> Option<&str> {
        Some(&self.path)
    }
}

/// Registers `n` listeners on `<root>/lock-<i>/write-<i>`; the one for
/// `target_index` gets `tx`. Returns the path of that one.
fn register(
    zkw: &ZooKeeperWatcher,
    root: &str,
    n: usize,
    target_index: usize,
    hits: &Arc<AtomicU64>,
    tx: Option<Sender<Instant>>,
) -> String {
    zkw.unregister_all_listeners();
    let mut tx = tx;
    let mut target = String::new();
    for i in 0..n {
        let path = format!("{root}/lock-{i:05}/write-{i:010}");
        let tx = if i == target_index { tx.take() } else { None };
        if i == target_index {
            target = path.clone();
        }
        zkw.register_listener(Arc::new(PathListener {
            path,
            hits: Arc::clone(hits),
            tx: tx.map(Mutex::new),
        }));
    }
    assert_eq!(zkw.number_of_listeners(), n);
    target
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// ns per `process` call, median of `SAMPLES` samples of `EVENTS` events.
fn dispatch(zkw: &ZooKeeperWatcher, n: usize) -> f64 {
    let hits = Arc::new(AtomicU64::new(0));
    let target = register(zkw, "/zklock-bench/synthetic", n, n / 2, &hits, None);
    let event = WatchedEvent::node(EventType::NodeDeleted, target);
    // The event's clone (one String allocation) is part of every figure alike.
    for _ in 0..EVENTS / 10 {
        zkw.process(black_box(event.clone()));
    }
    let samples: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..EVENTS {
                zkw.process(black_box(event.clone()));
            }
            started.elapsed().as_nanos() as f64 / EVENTS as f64
        })
        .collect();
    // Each event reached exactly its one listener.
    assert_eq!(
        hits.load(Ordering::Relaxed),
        EVENTS / 10 + EVENTS * SAMPLES as u64
    );
    median(samples)
}

/// Latencies from `delete` to the node's listener, through the server.
fn through_server(zkw: &ZooKeeperWatcher, root: &str, n: usize) -> Vec<Duration> {
    let hits = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel();
    let node = register(zkw, root, n, n / 2, &hits, Some(tx));
    let parent = node.rsplit_once('/').unwrap().0.to_owned();
    let zk = zkw.zookeeper();
    zk.create(&parent, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let mut latencies = Vec::with_capacity(ROUNDS);
    for round in 0..WARMUP + ROUNDS {
        zk.create(&node, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
            .unwrap();
        assert!(zk.exists(&node, true).unwrap().is_some());
        let started = Instant::now();
        zk.delete(&node, None).unwrap();
        let ran = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the listener runs");
        if round >= WARMUP {
            latencies.push(ran - started);
        }
    }
    zk.delete(&parent, None).unwrap();
    assert_eq!(hits.load(Ordering::Relaxed), (WARMUP + ROUNDS) as u64);
    latencies.sort();
    latencies
}

fn main() {
    let env = std::env::var("ZK_SERVERS")
        .or_else(|_| std::env::var("ZK_TEST_SERVERS"))
        .ok()
        .filter(|s| !s.trim().is_empty());
    let (_server, servers) = match env {
        Some(s) => (None, s),
        None => {
            let server = ZkServer::start().expect("start a ZooKeeper server");
            let servers = server.connect_string();
            (Some(server), servers)
        }
    };
    let zkw = ZooKeeperWatcher::builder(&servers)
        .with_identifier("bench")
        .with_session_timeout(Duration::from_secs(30))
        .connect()
        .expect("connect");

    println!("dispatch: zkw.process(NodeDeleted) to one path, n single-path listeners");
    println!("{:>10} {:>12}", "listeners", "ns/event");
    let mut figures = Vec::new();
    for n in SIZES {
        let ns = dispatch(&zkw, n);
        println!("{n:>10} {ns:>12.1}");
        figures.push((n, ns));
    }
    let (small, large) = (figures[0].1, figures[figures.len() - 1].1);
    let ratio = large / small;
    println!("ratio 10,000 : 10 = {ratio:.2}");

    let root = format!("/zklock-bench-{}", std::process::id());
    zkw.zookeeper()
        .create(&root, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    println!();
    println!("through the server: delete of a watched node -> its listener ran ({ROUNDS} deletes)");
    println!(
        "{:>10} {:>12} {:>12} {:>12}",
        "listeners", "median µs", "p90 µs", "min µs"
    );
    for n in [10, 10_000] {
        let l = through_server(&zkw, &root, n);
        let us = |d: Duration| d.as_nanos() as f64 / 1000.0;
        println!(
            "{n:>10} {:>12.1} {:>12.1} {:>12.1}",
            us(percentile(&l, 0.5)),
            us(percentile(&l, 0.9)),
            us(l[0])
        );
    }
    zkw.unregister_all_listeners();
    zkw.zookeeper().delete(&root, None).unwrap();
    zkw.close().unwrap();

    assert!(
        ratio <= MAX_RATIO,
        "dispatch grows with the listeners: {ratio:.2} x from 10 to 10,000 (max {MAX_RATIO})"
    );
}
