//! Benchmark of `zklock::recipes::tree_cache::TreeCache`: prints figures,
//! asserts only that the cache equals a fresh read, node by node.
//!
//! 1. Initial load of a subtree of `1 + F + F²` nodes (F = 100: 10,101
//!    nodes): time, the cache's reads, the server's requests.
//! 2. W writers (W = 100, one session each) write random nodes for a few
//!    seconds; after they stop: the time until the cache is current, checked
//!    node by node against a fresh read.
//! 3. A short cut (the cache's connection stalled behind a `FaultProxy`, 1% of
//!    the nodes written meanwhile, then the connection cut and re-made in the
//!    same session): the resync's time, the cache's reads and the server's
//!    requests (`zk_packets_received`, less what the `mntr` reads add), next
//!    to what the initial load cost. Beside Curator's `CuratorCache` (its
//!    events and the server's requests until it was quiet for 2 s, behind a
//!    proxy of its own) in `ZK_BENCH_ROUNDS` alternating rounds (zklock's
//!    cut, Curator's cut, zklock's, ...): every round printed, then the
//!    median and the range (min–max) over the rounds.
//!
//! `cargo bench --bench cache`; starts a ZooKeeper server with the test
//! harness. Sizes: `ZK_BENCH_CACHE_FANOUT` (100), `ZK_BENCH_CACHE_WRITERS`
//! (100), `ZK_BENCH_CACHE_WRITE_SECS` (5), `ZK_BENCH_ROUNDS` (5).

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use zklock::client::{CreateMode, Op, WatchedEvent, ZooKeeper};
use zklock::recipes::tree_cache::{CacheEvent, ChildData, TreeCache};
use zklock::testing::{FaultProxy, ZkServer};

const ROOT: &str = "/cache-bench";

fn plain(servers: &str) -> ZooKeeper {
    let zk = ZooKeeper::connect(servers, SESSION_TIMEOUT, |_e: WatchedEvent| {}).unwrap();
    zk.wait_connected(Duration::from_secs(60)).unwrap();
    zk
}

fn fresh_read(zk: &ZooKeeper) -> BTreeMap<String, ChildData> {
    let mut out = BTreeMap::new();
    let mut todo = vec![ROOT.to_string()];
    while let Some(p) = todo.pop() {
        let Ok((data, stat)) = zk.get_data(&p, false) else {
            continue;
        };
        out.insert(p.clone(), ChildData { data, stat });
        if let Ok(children) = zk.get_children(&p, false) {
            todo.extend(children.iter().map(|c| format!("{p}/{c}")));
        }
    }
    out
}

/// Waits until the cache is quiet (current, no read for 100 ms) and then
/// equals a fresh read node by node; the time until it was quiet (the fresh
/// read of the whole tree, blocking, is not counted).
fn until_equal(cache: &TreeCache, zk: &ZooKeeper) -> Duration {
    let t = Instant::now();
    loop {
        let reads = cache.requests();
        thread::sleep(Duration::from_millis(100));
        if cache.is_stale() || cache.requests() != reads {
            continue;
        }
        let quiet = t.elapsed().saturating_sub(Duration::from_millis(100));
        if cache.snapshot() == fresh_read(zk) {
            return quiet;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the cache never caught up"
        );
    }
}

fn main() {
    let fanout = env_usize("ZK_BENCH_CACHE_FANOUT", 100);
    let writers = env_usize("ZK_BENCH_CACHE_WRITERS", 100);
    let write_secs = env_usize("ZK_BENCH_CACHE_WRITE_SECS", 5) as u64;
    let server = ZkServer::start().expect("a ZooKeeper server");
    let servers = server.connect_string();
    let m = Mntr::new(&servers);
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zk = plain(&servers);

    let mut paths = vec![ROOT.to_string()];
    for i in 0..fanout {
        paths.push(format!("{ROOT}/a{i}"));
        for j in 0..fanout {
            paths.push(format!("{ROOT}/a{i}/b{j}"));
        }
    }
    for batch in paths.chunks(500) {
        let ops: Vec<Op> = batch
            .iter()
            .map(|p| Op::create(p.clone(), b"v0".to_vec(), CreateMode::Persistent))
            .collect();
        zk.multi(&ops).unwrap();
    }
    let leaves: Vec<String> = paths
        .iter()
        .filter(|p| p.matches('/').count() == 3)
        .cloned()
        .collect();
    println!(
        "TreeCache of {} nodes, {writers} writers ({} cores, load {})",
        paths.len(),
        thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        loadavg()
    );

    // 1. Initial load.
    let zkw = connect(&proxy.connect_string(), "cache-bench");
    let window = Requests::start(&m);
    let t = Instant::now();
    let cache = TreeCache::start(&zkw, ROOT).unwrap();
    assert!(cache.wait_synced(Duration::from_secs(300)).unwrap());
    let load = t.elapsed();
    let counted = window.stop(&m);
    let load_reads = cache.requests();
    println!(
        "  initial load                    {load:>9.2?}  {load_reads:>6} reads by the cache  {:>6} requests at the server",
        counted.requests
    );
    assert_eq!(
        cache.snapshot(),
        fresh_read(&zk),
        "initial load equals a fresh read"
    );

    // 2. Writers.
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let zk = plain(&servers);
            let (stop, writes, leaves) = (stop.clone(), writes.clone(), leaves.clone());
            thread::spawn(move || {
                let mut i = w * 7919;
                while !stop.load(Ordering::Relaxed) {
                    i = i.wrapping_mul(31).wrapping_add(17);
                    let p = &leaves[i % leaves.len()];
                    if zk.set_data(p, format!("w{w}-{i}").as_bytes(), None).is_ok() {
                        writes.fetch_add(1, Ordering::Relaxed);
                    }
                }
                zk.close().unwrap();
            })
        })
        .collect();
    let before = cache.requests();
    thread::sleep(Duration::from_secs(write_secs));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let caught_up = until_equal(&cache, &zk);
    let n = writes.load(Ordering::Relaxed);
    println!(
        "  {writers} writers, {write_secs} s: {n} writes ({:.0}/s); cache quiet {caught_up:.2?} after they stopped, then equal to a fresh read node by node; {} reads by the cache ({:.2} per write)",
        n as f64 / write_secs as f64,
        cache.requests() - before,
        (cache.requests() - before) as f64 / n.max(1) as f64
    );

    // 3. A short cut, 1% changed: zklock's and Curator's caches take turns.
    let changed = paths.len() / 100;
    let mut curator = Curator::start(&servers, &m);
    let rounds = bench_rounds(5);
    let events = cache.events();
    let cut: Vec<&String> = leaves
        .iter()
        .step_by(leaves.len() / changed)
        .take(changed)
        .collect();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for r in 1..=rounds {
        println!("  round {r}:");
        // What Curator's cut changed has reached this cache before the window.
        until_equal(&cache, &zk);
        while events.try_recv().is_ok() {}
        proxy.stall();
        for p in &cut {
            zk.set_data(p, format!("changed during cut {r}").as_bytes(), None)
                .unwrap();
        }
        // Curator's cache has read those changes before the window opens.
        if let Some(c) = curator.as_mut() {
            c.quiet();
        }
        let before = cache.requests();
        let window = Requests::start(&m);
        let t = Instant::now();
        proxy.reset();
        // The cut is seen (Suspended), then the resync ends (Resynced).
        loop {
            match events.recv_timeout(Duration::from_secs(120)).unwrap() {
                CacheEvent::Resynced => break,
                _ => continue,
            }
        }
        let resync = t.elapsed();
        let counted = window.stop(&m);
        let reads = cache.requests() - before;
        println!(
            "    zklock TreeCache, resync after a cut, {changed} changed {resync:>9.2?}  {reads:>6} reads by the cache  {:>6} requests at the server (≤ {} pings among them)",
            counted.requests,
            counted.ping_allowance
        );
        until_equal(&cache, &zk);
        println!("    after the resync the cache equals a fresh read node by node");
        ours.push([
            resync.as_secs_f64() * 1e3,
            reads as f64,
            counted.requests as f64,
        ]);
        if let Some(c) = curator.as_mut() {
            // This cache reads Curator's cut's changes before its window.
            theirs.push(c.cut(&m, &zk, &cut, r, || {
                until_equal(&cache, &zk);
            }));
        }
    }
    cache.close().unwrap();
    zkw.close().unwrap();
    if let Some(c) = curator.as_mut() {
        c.quit();
    }

    println!(
        "resync after a cut, {changed} changed, {rounds} rounds: median (min–max); load {}",
        loadavg()
    );
    println!(
        "  zklock TreeCache:      resync {} ms, {} reads by the cache, {} requests at the server",
        spread(&ours, 0, 1),
        spread(&ours, 1, 0),
        spread(&ours, 2, 0)
    );
    if !theirs.is_empty() {
        println!(
            "  Curator CuratorCache:  {} events, {} requests at the server (counted until 2 s quiet)",
            spread(&theirs, 0, 0),
            spread(&theirs, 1, 0)
        );
    }
}

/// Column `i` of the rounds' figures: "median (min–max)".
fn spread<const N: usize>(rounds: &[[f64; N]], i: usize, digits: usize) -> String {
    let column: Vec<f64> = rounds.iter().map(|x| x[i]).collect();
    Spread::of(&column).map_or_else(|| "–".to_string(), |s| s.text(digits))
}

/// Curator's `CuratorCache` on the same tree, behind a proxy of its own: the
/// initial load at the start, then the resync after the same kind of cut as
/// zklock's in each round (counted until its events are quiet for 2 s).
struct Curator {
    java: LineProcess,
    proxy: FaultProxy,
    _classes: JavaClasses,
}

impl Curator {
    const BOUND: Duration = Duration::from_secs(300);

    /// Starts the JVM and its cache (the initial load, printed); `None`
    /// without Curator.
    fn start(servers: &str, m: &Mntr) -> Option<Curator> {
        let classes = match compile_java(
            "cache",
            &["benches/java/CuratorCacheBench.java"],
            &CURATOR_JARS,
        ) {
            Ok(c) => c,
            Err(e) => {
                println!("NOTE: Curator skipped ({e}); no CuratorCache figures.");
                return None;
            }
        };
        let proxy = FaultProxy::start(servers).unwrap();
        let mut cmd = classes.java(&["-Xmx512m", "-XX:+UseSerialGC"], "CuratorCacheBench");
        cmd.args(["serve", &proxy.connect_string(), ROOT]);
        let mut java = LineProcess::spawn("CuratorCacheBench", cmd).unwrap();
        assert_eq!(java.recv(Self::BOUND).unwrap(), "ready");
        let window = Requests::start(m);
        let answer = java.ask("start", Self::BOUND).unwrap();
        let counted = window.stop(m);
        let f = parse_fields(&answer);
        println!(
            "  Curator CuratorCache, initial load {:>9.2?}  size {}  {:>6} requests at the server",
            Duration::from_nanos(f["elapsed_ns"] as u64),
            f["size"],
            counted.requests
        );
        Some(Curator {
            java,
            proxy,
            _classes: classes,
        })
    }

    /// Waits until the cache had no event for 500 ms.
    fn quiet(&mut self) {
        self.java.ask("quiet 500", Self::BOUND).unwrap();
    }

    /// Round `round`'s cut: `cut` changed meanwhile (then `settle`, before
    /// the window); its events and the server's requests.
    fn cut(
        &mut self,
        m: &Mntr,
        zk: &ZooKeeper,
        cut: &[&String],
        round: usize,
        settle: impl FnOnce(),
    ) -> [f64; 2] {
        self.quiet();
        self.proxy.stall();
        for p in cut {
            let data = format!("changed during Curator's cut {round}");
            zk.set_data(p, data.as_bytes(), None).unwrap();
        }
        settle();
        let java = &mut self.java;
        java.ask("mark", Self::BOUND).unwrap();
        let window = Requests::start(m);
        let t = Instant::now();
        self.proxy.reset();
        // Until Curator reconnected and its events were quiet for 2 s.
        let answer = java.ask("reconnected 2000", Self::BOUND).unwrap();
        let counted = window.stop(m);
        let f = parse_fields(&answer);
        println!(
            "    Curator CuratorCache, resync after a cut, {} changed: {} events, {:>6} requests at the server (≤ {} pings; counted over {:.1?} incl. 2 s quiet)",
            cut.len(),
            f["events"],
            counted.requests,
            counted.ping_allowance,
            t.elapsed()
        );
        [f["events"], counted.requests as f64]
    }

    fn quit(&mut self) {
        let _ = self.java.send("quit");
        let _ = self.java.finish(Duration::from_secs(20));
    }
}
