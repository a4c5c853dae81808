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
//! Each runs for zklock in its own layout, zklock in Curator's dialect beside
//! Curator's `InterProcessSemaphoreV2` (a JVM running
//! `benches/java/CuratorSemaphoreBench.java` on Debian's jars, `make
//! curator`), and zklock in kazoo's dialect beside kazoo's `Semaphore` (the
//! venv's python running `benches/python/kazoo_semaphore_bench.py`, `make
//! kazoo`); a peer that cannot start is left out with a note. The same
//! server, one form after the other; requests and notifications per
//! operation from the server's counters around each form.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use std::path::Path;
use std::process::Command;

use zklock::lock::{Dialect, ZkSemaphore};
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

/// How long a peer's command may take.
const PEER_BOUND: Duration = Duration::from_secs(600);

fn uncontended(servers: &str, m: &Mntr, root: &str, cycles: usize, dialect: Dialect) -> Figures {
    let zkw = connect(servers, "bench-sem-uncontended");
    let sem = ZkSemaphore::in_dialect(&zkw, root, dialect, 4, b"bench").unwrap();
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
        name: format!("zklock ({dialect} layout), uncontended"),
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
            let sem =
                ZkSemaphore::in_dialect(&sessions[i % 2], root, dialect, 4, b"bench").unwrap();
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
            name: format!("zklock ({dialect} layout), 8 holders / limit 4"),
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
        &CURATOR_CLASSPATH_JARS,
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
        "zklock semaphore benchmark against {servers} ({} CPUs, load {})",
        thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg()
    );
    let m = Mntr::new(&servers);
    let root = format!("/zklock-bench-semaphore-{}", std::process::id());
    let mut rows = Vec::new();
    let mut most_seen = Vec::new();
    let zklock_rows = |dialect: Dialect, rows: &mut Vec<Figures>, most_seen: &mut Vec<_>| {
        let d = dialect.name();
        rows.push(uncontended(
            &servers,
            &m,
            &format!("{root}/{d}-u"),
            cycles,
            dialect,
        ));
        let (figures, most) = contended(&servers, &m, &format!("{root}/{d}-c"), grants, dialect);
        most_seen.push((figures.name.clone(), most));
        rows.push(figures);
    };
    zklock_rows(Dialect::HBase, &mut rows, &mut most_seen);
    zklock_rows(Dialect::Curator, &mut rows, &mut most_seen);
    let curator = curator_peer(&servers);
    if let Some((_classes, mut peer)) = curator {
        let u = format!("uncontended {root}/curator-u 4 {cycles}");
        if let Some((f, _)) = peer_form(
            &mut peer,
            &m,
            "Curator InterProcessSemaphoreV2, uncontended",
            &u,
        ) {
            rows.push(f);
        }
        let c = format!("contended {root}/curator-c 4 8 {grants}");
        let name = "Curator InterProcessSemaphoreV2, 8 holders / limit 4";
        if let Some((f, most)) = peer_form(&mut peer, &m, name, &c) {
            most_seen.push((f.name.clone(), most));
            rows.push(f);
        }
    }
    zklock_rows(Dialect::Kazoo, &mut rows, &mut most_seen);
    if let Some(mut peer) = kazoo_peer(&servers) {
        let u = format!("uncontended {root}/kazoo-u 4 {cycles}");
        if let Some((f, _)) = peer_form(&mut peer, &m, "kazoo Semaphore, uncontended", &u) {
            rows.push(f);
        }
        let c = format!("contended {root}/kazoo-c 4 8 {grants}");
        if let Some((f, most)) =
            peer_form(&mut peer, &m, "kazoo Semaphore, 8 holders / limit 4", &c)
        {
            most_seen.push((f.name.clone(), most));
            rows.push(f);
        }
    }
    println!();
    for (name, most) in &most_seen {
        println!("{name}: most holders at once {most} (limit 4)");
        assert!(*most <= 4, "{name}: {most} holders for a limit of 4");
    }
    println!();
    println!("| form | ops/s | median µs | p99 µs | requests/op | notifications/op |");
    println!("|---|---:|---:|---:|---:|---:|");
    // Latencies the peers do not time per grant print as "–".
    let us = |v: f64| {
        if v.is_nan() {
            "–".to_string()
        } else {
            format!("{v:.0}")
        }
    };
    for r in &rows {
        println!(
            "| {} | {:.0} | {} | {} | {:.2} | {:.2} |",
            r.name,
            r.rate,
            us(r.median_us),
            us(r.p99_us),
            r.requests,
            r.notifications
        );
    }
}
