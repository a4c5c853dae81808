//! Counting semaphore and dialect mutex benchmark (issue 23): prints figures.
//!
//! `cargo bench --bench semaphore`. Uses `$ZK_SERVERS` if set, else starts a
//! ZooKeeper server through `zklock::testing`. Sizes: `ZK_BENCH_CYCLES`
//! (uncontended cycles, default 1000), `ZK_BENCH_GRANTS` (grants per holder
//! when contended, default 100), `ZK_BENCH_ROUNDS` (default 5).
//!
//! Rounds: every form runs in each of `ZK_BENCH_ROUNDS` rounds, the forms
//! taking turns within a round (zklock, Curator, kazoo), in paths of the
//! round's own; the table gives the median and the range (min–max) over the
//! rounds, and the load average before and after.
//!
//! Two recipes, each in two scenarios:
//!
//! 1. **Uncontended** acquire + release of one lease (semaphore, limit 4) or
//!    of the mutex, one thread, one session: cycles/s, median and p99, and
//!    ZooKeeper requests per cycle (the server's `zk_packets_received`, the
//!    `mntr` reads' own cost subtracted, pings allowed for) and notifications
//!    per cycle (`zk_packets_sent` − received).
//! 2. **Contended**: 8 holders (threads, each with its own instance, on two
//!    sessions) for a semaphore limit of 4, or on one mutex, each doing
//!    `ZK_BENCH_GRANTS` acquire/release cycles: grants/s, requests and
//!    notifications per grant, and the most holders seen at once (must not
//!    exceed the limit: 4, or 1 for the mutex).
//!
//! Each runs for zklock in its own layout, zklock in Curator's dialect beside
//! Curator's `InterProcessSemaphoreV2` and `InterProcessMutex` (a JVM running
//! `benches/java/CuratorSemaphoreBench.java` on Debian's jars, `make
//! curator`), and zklock in kazoo's dialect beside kazoo's `Semaphore` and
//! `Lock` (the venv's python running
//! `benches/python/kazoo_semaphore_bench.py`, `make kazoo`); a peer that
//! cannot start is left out with a note. The same server, one form after the
//! other; requests and notifications per operation from the server's
//! counters around each form.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use std::path::Path;
use std::process::Command;

use zklock::lock::{Dialect, InterProcessLock, SemaphoreLease, ZkInterProcessMutex, ZkSemaphore};
use zklock::testing::example_servers;
use zklock::ZooKeeperWatcher;

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

/// How long a peer's command may take.
const PEER_BOUND: Duration = Duration::from_secs(600);

/// The recipe a form measures.
#[derive(Clone, Copy, PartialEq)]
enum Recipe {
    /// The counting semaphore, limit 4.
    Semaphore,
    /// The exclusive lock (`ZkInterProcessMutex`).
    Mutex,
}

impl Recipe {
    /// Most holders at once.
    fn limit(self) -> usize {
        match self {
            Recipe::Semaphore => 4,
            Recipe::Mutex => 1,
        }
    }

    /// The peers' word for it.
    fn word(self) -> &'static str {
        match self {
            Recipe::Semaphore => "semaphore",
            Recipe::Mutex => "mutex",
        }
    }

    /// The contended scenario's name.
    fn contended(self) -> &'static str {
        match self {
            Recipe::Semaphore => "8 holders / limit 4",
            Recipe::Mutex => "8 holders / 1 mutex",
        }
    }
}

/// One participant: a semaphore or a mutex instance.
enum Holder {
    Semaphore(ZkSemaphore),
    Mutex(ZkInterProcessMutex),
}

impl Holder {
    fn new(zkw: &ZooKeeperWatcher, path: &str, dialect: Dialect, recipe: Recipe) -> Holder {
        match recipe {
            Recipe::Semaphore => {
                Holder::Semaphore(ZkSemaphore::in_dialect(zkw, path, dialect, 4, b"bench").unwrap())
            }
            Recipe::Mutex => {
                Holder::Mutex(ZkInterProcessMutex::new(zkw, path, dialect, b"bench").unwrap())
            }
        }
    }

    /// Acquires; the lease when a semaphore's.
    fn acquire(&self) -> Option<SemaphoreLease> {
        match self {
            Holder::Semaphore(s) => Some(s.acquire().unwrap()),
            Holder::Mutex(m) => {
                m.acquire().unwrap();
                None
            }
        }
    }

    fn release(&self, lease: Option<SemaphoreLease>) {
        match (self, lease) {
            (Holder::Semaphore(_), Some(lease)) => lease.release().unwrap(),
            (Holder::Mutex(m), None) => m.release().unwrap(),
            _ => unreachable!("a lease is a semaphore's"),
        }
    }
}

fn uncontended(
    servers: &str,
    m: &Mntr,
    root: &str,
    cycles: usize,
    dialect: Dialect,
    recipe: Recipe,
) -> Figures {
    let zkw = connect(servers, "bench-sem-uncontended");
    let holder = Holder::new(&zkw, root, dialect, recipe);
    for _ in 0..cycles.min(300) {
        holder.release(holder.acquire());
    }
    let mut times = Vec::with_capacity(cycles);
    let window = Window::start(m);
    let started = Instant::now();
    for _ in 0..cycles {
        let t = Instant::now();
        let lease = holder.acquire();
        holder.release(lease);
        times.push(t.elapsed());
    }
    let elapsed = started.elapsed();
    // The mutex's delete goes in the background: let it land in the window.
    thread::sleep(Duration::from_millis(200));
    let traffic = window.stop(m);
    times.sort();
    Figures {
        name: format!("zklock {} ({dialect} layout), uncontended", recipe.word()),
        rate: cycles as f64 / elapsed.as_secs_f64(),
        median_us: us(percentile(&times, 0.5)),
        p99_us: us(percentile(&times, 0.99)),
        requests: traffic.received.saturating_sub(traffic.ping_allowance) as f64 / cycles as f64,
        notifications: traffic.notifications() as f64 / cycles as f64,
    }
}

fn contended(
    servers: &str,
    m: &Mntr,
    root: &str,
    grants: usize,
    dialect: Dialect,
    recipe: Recipe,
) -> (Figures, usize) {
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
            let holder = Holder::new(&sessions[i % 2], root, dialect, recipe);
            let (holding, most, start) = (holding.clone(), most.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let mut times = Vec::with_capacity(grants);
                for _ in 0..grants {
                    let t = Instant::now();
                    let lease = holder.acquire();
                    times.push(t.elapsed());
                    let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    holding.fetch_sub(1, Ordering::SeqCst);
                    holder.release(lease);
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
            name: format!(
                "zklock {} ({dialect} layout), {}",
                recipe.word(),
                recipe.contended()
            ),
            rate: n / elapsed.as_secs_f64(),
            median_us: us(percentile(&times, 0.5)),
            p99_us: us(percentile(&times, 0.99)),
            requests: traffic.received.saturating_sub(traffic.ping_allowance) as f64 / n,
            notifications: traffic.notifications() as f64 / n,
        },
        most.load(Ordering::SeqCst),
    )
}

/// A peer's figures for one command, with the server's counters around it.
fn peer_form(
    peer: &mut LineProcess,
    m: &Mntr,
    name: &str,
    command: &str,
) -> Option<(Figures, usize)> {
    let window = Window::start(m);
    let answer = peer.ask(command, PEER_BOUND);
    let traffic = window.stop(m);
    let line = match answer {
        Ok(line) if line.starts_with("ok") => line,
        other => {
            println!("({name}: {other:?})");
            return None;
        }
    };
    let f = parse_fields(&line);
    let n = f.get("cycles").or(f.get("grants")).copied().unwrap_or(1.0);
    let elapsed = f.get("elapsed_ns").copied().unwrap_or(1.0) / 1e9;
    Some((
        Figures {
            name: name.to_string(),
            rate: n / elapsed,
            median_us: f.get("p50_ns").map_or(f64::NAN, |v| v / 1e3),
            p99_us: f.get("p99_ns").map_or(f64::NAN, |v| v / 1e3),
            requests: traffic.received.saturating_sub(traffic.ping_allowance) as f64 / n,
            notifications: traffic.notifications() as f64 / n,
        },
        f.get("most").copied().unwrap_or(0.0) as usize,
    ))
}

/// Starts a peer and waits for its `ready`.
fn start_peer(name: &str, cmd: Command) -> Option<LineProcess> {
    let p = match LineProcess::spawn(name, cmd) {
        Ok(p) => p,
        Err(e) => {
            println!("({name} left out: {e})");
            return None;
        }
    };
    match p.recv(Duration::from_secs(60)) {
        Ok(l) if l.starts_with("ready") => Some(p),
        other => {
            println!("({name} left out: {other:?})");
            None
        }
    }
}

/// The Curator peer, when Java and the jars are there.
fn curator_peer(servers: &str) -> Option<(JavaClasses, LineProcess)> {
    let classes = match compile_java(
        "semaphore",
        &["benches/java/CuratorSemaphoreBench.java"],
        &CURATOR_JARS,
    ) {
        Ok(c) => c,
        Err(e) => {
            println!("(Curator left out: {e})");
            return None;
        }
    };
    let mut cmd = classes.java(&["-Xmx256m", "-XX:+UseSerialGC"], "CuratorSemaphoreBench");
    cmd.arg(servers);
    let p = start_peer("Curator", cmd)?;
    Some((classes, p))
}

/// The kazoo peer, when the venv is there.
fn kazoo_peer(servers: &str) -> Option<LineProcess> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new(root.join("target/kazoo-venv/bin/python"));
    cmd.arg(root.join("benches/python/kazoo_semaphore_bench.py"))
        .arg(servers);
    start_peer("kazoo", cmd)
}

fn main() {
    let _ = env_logger::builder().is_test(true).try_init();
    let cycles = env_usize("ZK_BENCH_CYCLES", 1000);
    let grants = env_usize("ZK_BENCH_GRANTS", 100);
    let (_server, servers) = example_servers().expect("a ZooKeeper server");
    println!(
        "zklock semaphore and dialect mutex benchmark against {servers} ({} CPUs, load {})",
        thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg()
    );
    let m = Mntr::new(&servers);
    let root = format!("/zklock-bench-semaphore-{}", std::process::id());
    let rounds = bench_rounds(5);
    let load_before = loadavg();
    let mut rows = Vec::new();
    let mut most_seen = Vec::new();
    let mut curator = curator_peer(&servers);
    let mut kazoo = kazoo_peer(&servers);
    let zklock_rows =
        |r: usize, dialect: Dialect, rows: &mut Vec<Figures>, most_seen: &mut Vec<_>| {
            for recipe in [Recipe::Semaphore, Recipe::Mutex] {
                let path = format!("{root}/r{r}/{}-{}", dialect.name(), recipe.word());
                rows.push(uncontended(
                    &servers,
                    &m,
                    &format!("{path}-u"),
                    cycles,
                    dialect,
                    recipe,
                ));
                let (figures, most) =
                    contended(&servers, &m, &format!("{path}-c"), grants, dialect, recipe);
                most_seen.push((figures.name.clone(), most, recipe.limit()));
                rows.push(figures);
            }
        };
    // A native peer's rows: both recipes (its classes for them), both scenarios.
    let peer_rows = |r: usize,
                     peer: &mut LineProcess,
                     native: &str,
                     classes: [&str; 2],
                     rows: &mut Vec<Figures>,
                     most_seen: &mut Vec<_>| {
        for (recipe, class) in [Recipe::Semaphore, Recipe::Mutex].into_iter().zip(classes) {
            let (w, limit) = (recipe.word(), recipe.limit());
            let path = format!("{root}/r{r}/{}-{w}", native.to_lowercase());
            let u = format!("uncontended {w} {path}-u {limit} {cycles}");
            let name = format!("{native} {class}, uncontended");
            if let Some((f, _)) = peer_form(peer, &m, &name, &u) {
                rows.push(f);
            }
            let c = format!("contended {w} {path}-c {limit} 8 {grants}");
            let name = format!("{native} {class}, {}", recipe.contended());
            if let Some((f, most)) = peer_form(peer, &m, &name, &c) {
                most_seen.push((f.name.clone(), most, limit));
                rows.push(f);
            }
        }
    };
    for r in 0..rounds {
        println!("round {}:", r + 1);
        zklock_rows(r, Dialect::HBase, &mut rows, &mut most_seen);
        zklock_rows(r, Dialect::Curator, &mut rows, &mut most_seen);
        if let Some((_classes, peer)) = &mut curator {
            peer_rows(
                r,
                peer,
                "Curator",
                ["InterProcessSemaphoreV2", "InterProcessMutex"],
                &mut rows,
                &mut most_seen,
            );
        }
        zklock_rows(r, Dialect::Kazoo, &mut rows, &mut most_seen);
        if let Some(peer) = &mut kazoo {
            peer_rows(
                r,
                peer,
                "kazoo",
                ["Semaphore", "Lock"],
                &mut rows,
                &mut most_seen,
            );
        }
    }
    let load_after = loadavg();
    println!();
    for (name, most, limit) in &most_seen {
        println!("{name}: most holders at once {most} (limit {limit})");
        assert!(
            most <= limit,
            "{name}: {most} holders for a limit of {limit}"
        );
    }
    println!();
    println!(
        "{rounds} rounds: median (min–max) over the rounds; load average {load_before} \
         before, {load_after} after."
    );
    println!();
    println!("| form | ops/s | median µs | p99 µs | requests/op | notifications/op |");
    println!("|---|---:|---:|---:|---:|---:|");
    // The forms in the order of their first round; each over its rounds.
    let mut names: Vec<&str> = Vec::new();
    for r in &rows {
        if !names.contains(&r.name.as_str()) {
            names.push(&r.name);
        }
    }
    // Latencies the peers do not time per grant print as "–".
    let spread = |name: &str, f: fn(&Figures) -> f64, digits: usize| {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| r.name == name)
            .map(f)
            .filter(|v| !v.is_nan())
            .collect();
        Spread::of(&v).map_or_else(|| "–".to_string(), |s| s.text(digits))
    };
    for name in names {
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            spread(name, |r| r.rate, 0),
            spread(name, |r| r.median_us, 0),
            spread(name, |r| r.p99_us, 0),
            spread(name, |r| r.requests, 2),
            spread(name, |r| r.notifications, 2),
        );
    }
}
