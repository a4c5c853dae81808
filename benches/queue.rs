//! Benchmark of `zklock::recipes::queue::DistributedQueue`: prints figures,
//! asserts only that every item came out once.
//!
//! 1. One producer offers N items (one session): items/s, requests per item.
//! 2. One consumer polls them (one session): items/s, requests per item.
//! 3. 4 producers and 4 consumers (8 sessions) move N items concurrently,
//!    consumers in `take_timeout`: items/s, requests per item.
//!
//! Requests are the server's `zk_packets_received` from `mntr`, read before and
//! after each phase, less what one `mntr` read itself adds (measured); pings
//! (every 10 s on the 30 s sessions used) may add a few. `cargo bench --bench
//! queue`; starts a ZooKeeper server with the test harness unless
//! `ZK_SERVERS` names one (then its first host is read with `mntr`). Size:
//! `ZK_BENCH_ITEMS` (default 2000).

use std::collections::HashSet;
use std::env;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use zklock::recipes::queue::DistributedQueue;
use zklock::testing::{four_letter, parse_mntr};
use zklock::ZooKeeperWatcher;

fn connect(servers: &str) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(servers)
        .with_identifier("queue-bench")
        .with_session_timeout(Duration::from_secs(30))
        .connect()
        .unwrap_or_else(|e| panic!("cannot connect to {servers}: {e}"))
}

fn packets(host: &str) -> u64 {
    let m = parse_mntr(&four_letter(host, "mntr").expect("mntr"));
    m.get("zk_packets_received")
        .and_then(|v| v.parse().ok())
        .expect("zk_packets_received in mntr")
}

struct Phase<'a> {
    host: &'a str,
    overhead: u64,
}

impl Phase<'_> {
    fn run(&self, name: &str, items: usize, f: impl FnOnce()) {
        let before = packets(self.host);
        let t = Instant::now();
        f();
        let elapsed = t.elapsed();
        let after = packets(self.host);
        let requests = after.saturating_sub(before).saturating_sub(self.overhead);
        println!(
            "  {name:<44} {items:>6} items in {:>7.2?}  {:>8.0} items/s  {:>5.2} requests/item",
            elapsed,
            items as f64 / elapsed.as_secs_f64(),
            requests as f64 / items as f64
        );
    }
}

fn main() {
    let (_server, servers) = zklock::testing::example_servers().expect("a ZooKeeper server");
    let host = servers.split(',').next().unwrap().to_string();
    let n: usize = env::var("ZK_BENCH_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
        .max(16);
    // What one mntr read adds to the counter.
    let overhead = {
        let a = packets(&host);
        let b = packets(&host);
        b.saturating_sub(a)
    };
    println!(
        "zklock DistributedQueue benchmark against {servers} (mntr overhead {overhead} packets)"
    );
    let phase = Phase {
        host: &host,
        overhead,
    };
    let dir = format!("/zklock-bench-queue-{}", std::process::id());
    let zkw = connect(&servers);
    let q = DistributedQueue::new(&zkw, &dir).unwrap();
    q.offer(b"warm-up").unwrap();
    q.poll().unwrap();

    phase.run("1. one producer: offer", n, || {
        for i in 0..n {
            q.offer(format!("item-{i}").as_bytes()).unwrap();
        }
    });
    phase.run("2. one consumer: poll", n, || {
        for i in 0..n {
            let item = q.poll().unwrap().expect("an item");
            assert_eq!(item, format!("item-{i}").into_bytes());
        }
    });

    let per = n / 4;
    let total = per * 4;
    let taken = Arc::new(AtomicUsize::new(0));
    let mut seen = HashSet::new();
    phase.run("3. 4 producers x 4 consumers (take_timeout)", total, || {
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                let (servers, dir, taken) = (servers.clone(), dir.clone(), taken.clone());
                thread::spawn(move || {
                    let zkw = connect(&servers);
                    let q = DistributedQueue::new(&zkw, &dir).unwrap();
                    let mut got = Vec::new();
                    while taken.load(Ordering::SeqCst) < total {
                        if let Some(item) = q.take_timeout(Duration::from_millis(200)).unwrap() {
                            got.push(item);
                            taken.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    zkw.close().unwrap();
                    got
                })
            })
            .collect();
        let producers: Vec<_> = (0..4)
            .map(|p| {
                let (servers, dir) = (servers.clone(), dir.clone());
                thread::spawn(move || {
                    let zkw = connect(&servers);
                    let q = DistributedQueue::new(&zkw, &dir).unwrap();
                    for i in 0..per {
                        q.offer(format!("{p}-{i}").as_bytes()).unwrap();
                    }
                    zkw.close().unwrap();
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        for c in consumers {
            for item in c.join().unwrap() {
                assert!(seen.insert(item), "an item consumed twice");
            }
        }
    });
    assert_eq!(seen.len(), total, "every item consumed once");
    println!("  (phase 3 includes connecting and closing the 8 sessions)");
    zkw.zookeeper().delete(&dir, None).unwrap();
    zkw.close().unwrap();
}
