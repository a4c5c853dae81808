//! Benchmark of `zklock::client` (issue 3, "Performance"): prints figures, asserts
//! nothing.
//!
//! 1. Sequential `exists` latency on loopback, zklock and Java's client on the same
//!    server, alternating rounds of the same size after a warm-up; median, p99 and
//!    the ratio of the medians (target: zklock at most 1.0× Java's, issue 10).
//! 2. 32 threads sharing one client, mixed create/get/delete: ops/s (the
//!    `zookeeper` crate did ~13–17k ops/s on this kind of machine).
//! 3. Idle client cost: threads and resident memory per client, over 100 clients.
//! 4. TLS (feature `tls`; issue 21), on a harness server with a TLS port (Netty,
//!    `ssl.clientAuth=need`, certificates made at run time): sequential `exists`
//!    median over TLS (zklock, Java's client with Netty) and plaintext (zklock),
//!    alternating rounds; the uncontended write-lock cycle (acquire + release,
//!    3 requests) over TLS and plaintext, zklock and Curator (Java client over
//!    TLS), with each client's CPU per cycle (`/proc/<pid>/stat`, 10 ms ticks).
//!    Targets: zklock TLS `exists` median at or below Java's TLS median; zklock
//!    TLS lock cycle at most 1.15x plaintext.
//!
//! `cargo bench --bench client`. Starts a ZooKeeper server with the test harness
//! unless `ZK_SERVERS` names one. The Java side is compiled at run time from
//! `benches/java/ExistsBench.java` (`javac`, `/usr/share/java/zookeeper.jar`);
//! without a JDK it is skipped with a note. Sizes: `ZK_BENCH_OPS` (default 5000
//! per round), `ZK_BENCH_ROUNDS` (10), `ZK_BENCH_IDLE_CLIENTS` (100);
//! `ZK_BENCH_SECTIONS` (e.g. `4` or `1,4`: only those sections; default all);
//! `ZK_BENCH_TLS13=1`: section 4's server offers TLS 1.3 only (default 1.2).
//!
//! On a shared, loaded machine the load drifts within seconds; short alternating
//! rounds put both clients under the same conditions, and the ratio reported is
//! the median of the per-round ratios (each zklock round against the Java round
//! just before it).

use std::env;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{Acl, CreateMode, WatchedEvent, ZooKeeper};

mod common;

const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
const SLF4J_NOP_JAR: &str = "/usr/share/java/slf4j-nop.jar";

fn env_usize(name: &str, default: usize) -> usize {
    env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn connect(servers: &str) -> ZooKeeper {
    ZooKeeper::connect(servers, Duration::from_secs(10), |_e: WatchedEvent| {})
        .unwrap_or_else(|e| panic!("cannot connect to {servers}: {e}"))
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is ignored.
    let (_server, servers) = zklock::testing::example_servers().expect("a ZooKeeper server");
    println!("zklock client benchmark against {servers}");
    let root = format!("/zklock-bench-{}", std::process::id());
    let zk = connect(&servers);
    zk.create(&root, b"bench", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();

    let sections = env::var("ZK_BENCH_SECTIONS").unwrap_or_default();
    let run = |n: &str| sections.trim().is_empty() || sections.split(',').any(|s| s.trim() == n);
    if run("1") {
        latency(&servers, &zk, &root);
    }
    if run("2") {
        throughput(&zk, &root);
    }
    if run("3") {
        idle_cost(&servers);
    }
    #[cfg(feature = "tls")]
    if run("4") {
        tls::column();
    }

    zk.delete(&root, None).unwrap();
    zk.close().unwrap();
}

// ---------------------------------------------------------------------------
// 1. Sequential exists latency, zklock vs Java
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Stats {
    median: Duration,
    p99: Duration,
    mean: Duration,
}

fn stats(mut ns: Vec<u64>) -> Stats {
    let mean = ns.iter().sum::<u64>() / ns.len() as u64;
    ns.sort_unstable();
    Stats {
        median: Duration::from_nanos(ns[ns.len() / 2]),
        p99: Duration::from_nanos(ns[ns.len() * 99 / 100]),
        mean: Duration::from_nanos(mean),
    }
}

fn zklock_round(zk: &ZooKeeper, path: &str, ops: usize) -> Stats {
    let mut ns = Vec::with_capacity(ops);
    for _ in 0..ops {
        let t = Instant::now();
        zk.exists(path, false).unwrap();
        ns.push(t.elapsed().as_nanos() as u64);
    }
    stats(ns)
}

fn parse_java(line: &str) -> Option<Stats> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let get = |k: &str| -> Option<Duration> {
        let i = f.iter().position(|x| *x == k)?;
        Some(Duration::from_nanos(f.get(i + 1)?.parse().ok()?))
    };
    Some(Stats {
        median: get("median_ns")?,
        p99: get("p99_ns")?,
        mean: get("mean_ns")?,
    })
}

/// Compiles ExistsBench.java (`common::compile_java`, into a temp dir removed
/// on drop); `None` (with a note) without a JDK or the jars.
fn compile_java() -> Option<common::JavaClasses> {
    common::compile_java(
        "client",
        &["benches/java/ExistsBench.java"],
        &[ZOOKEEPER_JAR, SLF4J_NOP_JAR],
    )
    .map_err(|e| println!("  (Java client skipped: {e})"))
    .ok()
}

fn latency(servers: &str, zk: &ZooKeeper, root: &str) {
    let ops = env_usize("ZK_BENCH_OPS", 5_000).max(100);
    let rounds = env_usize("ZK_BENCH_ROUNDS", 10).max(1);
    let warm = 20_000; // the JVM's JIT needs it
    println!("\n1. sequential exists({root}): {rounds} rounds of {ops} ops each, after {warm} warm-up ops, zklock and Java alternating");
    zklock_round(zk, root, warm);

    let classes = compile_java();
    let mut java = classes.as_ref().and_then(|classes| {
        classes
            .java(&[], "ExistsBench")
            .args([servers, root])
            .arg(warm.to_string())
            .arg(ops.to_string())
            .arg(rounds.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| println!("  (Java client skipped: cannot run java: {e})"))
            .ok()
    });
    let mut java_out = java
        .as_mut()
        .map(|c| BufReader::new(c.stdout.take().unwrap()).lines());
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for r in 0..rounds {
        if let Some(lines) = java_out.as_mut() {
            match lines.next() {
                Some(Ok(line)) => match parse_java(&line) {
                    Some(s) => theirs.push(s),
                    None => println!("  (unexpected Java output: {line})"),
                },
                _ => println!("  (the Java client ended early)"),
            }
        }
        let s = zklock_round(zk, root, ops);
        ours.push(s);
        let j = theirs.last();
        println!(
            "  round {r}: zklock median {:>7.1} µs  p99 {:>7.1} µs  mean {:>7.1} µs{}",
            us(s.median),
            us(s.p99),
            us(s.mean),
            j.map(|j| format!(
                "  |  Java median {:>7.1} µs  p99 {:>7.1} µs  mean {:>7.1} µs",
                us(j.median),
                us(j.p99),
                us(j.mean)
            ))
            .unwrap_or_default()
        );
        if r + 1 < rounds {
            if let Some(c) = java.as_mut() {
                let _ = c.stdin.as_mut().map(|i| i.write_all(b"\n"));
            }
        }
    }
    if let Some(mut c) = java {
        drop(c.stdin.take());
        let _ = c.wait();
    }
    drop(classes);
    let med = |v: &[Stats], f: fn(&Stats) -> Duration| -> Duration {
        let mut d: Vec<Duration> = v.iter().map(f).collect();
        d.sort();
        d[d.len() / 2]
    };
    let (zm, zp) = (med(&ours, |s| s.median), med(&ours, |s| s.p99));
    print!(
        "  zklock: median {:.1} µs, p99 {:.1} µs (median over rounds)",
        us(zm),
        us(zp)
    );
    if theirs.is_empty() {
        println!();
        return;
    }
    let (jm, jp) = (med(&theirs, |s| s.median), med(&theirs, |s| s.p99));
    println!("; Java: median {:.1} µs, p99 {:.1} µs", us(jm), us(jp));
    let ratio = |f: fn(&Stats) -> Duration| -> f64 {
        let mut r: Vec<f64> = ours
            .iter()
            .zip(&theirs)
            .map(|(o, t)| f(o).as_secs_f64() / f(t).as_secs_f64())
            .collect();
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    };
    println!(
        "  ratio zklock/Java (median of per-round ratios): median {:.2}x, p99 {:.2}x (target: median <= 1.00x)",
        ratio(|s| s.median),
        ratio(|s| s.p99)
    );
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

// ---------------------------------------------------------------------------
// 2. 32 threads, one client, mixed create/get/delete
// ---------------------------------------------------------------------------

fn throughput(zk: &ZooKeeper, root: &str) {
    let threads = 32;
    let warm = Duration::from_secs(1);
    let measure = Duration::from_secs(5);
    println!("\n2. {threads} threads sharing one client: create + get_data + delete, {measure:?} after {warm:?} warm-up");
    let counting = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (zk, counting, stop, ops) =
                (zk.clone(), counting.clone(), stop.clone(), ops.clone());
            let dir = format!("{root}/t{t}");
            thread::spawn(move || {
                zk.create(&dir, b"", Acl::open_unsafe(), CreateMode::Persistent)
                    .unwrap();
                let data = vec![7u8; 64];
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let p = format!("{dir}/n{i}");
                    zk.create(&p, &data, Acl::open_unsafe(), CreateMode::Persistent)
                        .unwrap();
                    let (d, _) = zk.get_data(&p, false).unwrap();
                    assert_eq!(d.len(), data.len());
                    zk.delete(&p, None).unwrap();
                    if counting.load(Ordering::Relaxed) {
                        ops.fetch_add(3, Ordering::Relaxed);
                    }
                    i += 1;
                }
                zk.delete(&dir, None).unwrap();
            })
        })
        .collect();
    thread::sleep(warm);
    counting.store(true, Ordering::Relaxed);
    let t = Instant::now();
    thread::sleep(measure);
    counting.store(false, Ordering::Relaxed);
    let elapsed = t.elapsed();
    let n = ops.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    println!(
        "  {:.0} ops/s ({n} ops in {elapsed:.2?}); reference: the zookeeper crate, ~13-17k ops/s",
        n as f64 / elapsed.as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 3. Idle client cost
// ---------------------------------------------------------------------------

fn task_count() -> usize {
    fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

fn rss_kb() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn cpu_ticks() -> u64 {
    let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let Some(i) = stat.rfind(')') else { return 0 };
    let f: Vec<&str> = stat[i + 2..].split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn idle_cost(servers: &str) {
    let n = env_usize("ZK_BENCH_IDLE_CLIENTS", 100);
    println!("\n3. idle clients: {n} connected, idle");
    // Warm up allocator and lazies with one client.
    connect(servers).close().unwrap();
    let (threads0, rss0) = (task_count(), rss_kb());
    let clients: Vec<ZooKeeper> = (0..n).map(|_| connect(servers)).collect();
    thread::sleep(Duration::from_secs(1));
    let (threads1, rss1) = (task_count(), rss_kb());
    let cpu0 = cpu_ticks();
    let idle = Duration::from_secs(3);
    thread::sleep(idle);
    let cpu = Duration::from_millis((cpu_ticks() - cpu0) * 10);
    println!(
        "  threads: {} per client ({} -> {}); memory: {:.1} KiB RSS per client ({} -> {} KiB)",
        (threads1 - threads0) as f64 / n as f64,
        threads0,
        threads1,
        (rss1.saturating_sub(rss0)) as f64 / n as f64,
        rss0,
        rss1
    );
    println!(
        "  CPU while idle: {cpu:?} in {idle:?} for {n} clients ({:.3}% of a core per client)",
        cpu.as_secs_f64() / idle.as_secs_f64() / n as f64 * 100.0
    );
    for c in &clients {
        c.close().unwrap();
    }
    drop(clients);
    thread::sleep(Duration::from_millis(200));
    println!("  after closing: {} threads", task_count());
}

// ---------------------------------------------------------------------------
// 4. TLS against plaintext, zklock against Java (Netty) and Curator
// ---------------------------------------------------------------------------

#[cfg(feature = "tls")]
mod tls {
    use super::*;
    use common::LineProcess;
    use std::path::Path;
    use zklock::client::TlsConfig;
    use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
    use zklock::testing::{TestPki, ZkServer, NETTY_CLASSPATH};
    use zklock::ZooKeeperWatcher;

    const CURATOR_JARS: [&str; 6] = [
        "/usr/share/java/curator-recipes.jar",
        "/usr/share/java/zookeeper-recipes-lock.jar",
        "/usr/share/java/curator-framework.jar",
        "/usr/share/java/curator-client.jar",
        "/usr/share/java/guava.jar",
        "/usr/share/java/slf4j-api.jar",
    ];

    /// Median of per-cycle times and CPU per cycle of `cycles` uncontended
    /// write-lock cycles on `zkw` (this process's CPU: the zklock client; its
    /// threads' exact run time, `schedstat`: no thread ends meanwhile), and
    /// the connection threads' share of it.
    fn lock_round(
        zkw: &ZooKeeperWatcher,
        root: &str,
        cycles: usize,
    ) -> (Duration, Duration, Duration) {
        let rw = ZkInterProcessReadWriteLock::new(zkw, root, None).unwrap();
        let lock = rw.write_lock(b"bench");
        let mut t = Vec::with_capacity(cycles);
        let (cpu0, conn0) = (common::threads_cpu(""), common::threads_cpu("zklock-conn"));
        for _ in 0..cycles {
            let s = Instant::now();
            lock.acquire().unwrap();
            lock.release().unwrap();
            t.push(s.elapsed());
        }
        let cpu = common::threads_cpu("").saturating_sub(cpu0);
        let conn = common::threads_cpu("zklock-conn").saturating_sub(conn0);
        t.sort();
        (t[t.len() / 2], cpu / cycles as u32, conn / cycles as u32)
    }

    fn median(mut v: Vec<Duration>) -> Duration {
        v.sort();
        v[v.len() / 2]
    }

    pub(super) fn column() {
        let ops = env_usize("ZK_BENCH_TLS_OPS", 2_000).max(100);
        let rounds = env_usize("ZK_BENCH_TLS_ROUNDS", 6).max(1);
        let cycles = env_usize("ZK_BENCH_TLS_CYCLES", 1500).max(10);
        // `ZK_BENCH_TLS13=1`: the server offers TLS 1.3 only.
        let tls13 = env::var("ZK_BENCH_TLS13").is_ok_and(|v| v == "1");
        println!(
            "\n4. TLS: a harness server with a TLS port (Netty, ssl.clientAuth=need, TLS {}), {rounds} alternating rounds",
            if tls13 { "1.3" } else { "1.2" }
        );
        let pki = match TestPki::generate() {
            Ok(p) => p,
            Err(e) => return println!("  (TLS skipped: {e})"),
        };
        let server = match ZkServer::start_tls(&pki, tls13) {
            Ok(s) => s,
            Err(e) => return println!("  (TLS skipped: {e})"),
        };
        let alice = pki.client("alice").expect("a client certificate");
        let tls = TlsConfig::builder()
            .with_ca_file(pki.ca_pem())
            .with_client_cert(&alice.cert_pem, &alice.key_pem)
            .build()
            .expect("a TLS config");
        let plain_cs = server.connect_string();
        let tls_cs = server.secure_connect_string().expect("a TLS port");
        let zk_plain = connect(&plain_cs);
        let zk_tls = ZooKeeper::builder(&tls_cs)
            .with_tls(tls.clone())
            .connect(|_e| {})
            .expect("connect over TLS");
        let root = format!("/zklock-bench-tls-{}", std::process::id());
        zk_plain
            .create(&root, b"", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        for lock in ["zklock-plain", "zklock-tls", "uncontended-mutex"] {
            zk_plain
                .create(
                    &format!("{root}/{lock}"),
                    b"",
                    Acl::open_unsafe(),
                    CreateMode::Persistent,
                )
                .unwrap();
        }

        // The JVMs: ExistsBench over TLS; CuratorLockBench over TLS when Curator is there.
        let netty: Vec<&str> = NETTY_CLASSPATH.split(':').collect();
        let curator = CURATOR_JARS.iter().all(|j| Path::new(j).exists());
        let mut jars: Vec<&str> = vec![
            ZOOKEEPER_JAR,
            SLF4J_NOP_JAR,
            "/usr/share/java/zookeeper-jute.jar",
        ];
        jars.extend(&netty);
        let mut sources = vec!["benches/java/ExistsBench.java"];
        if curator {
            jars.extend(CURATOR_JARS);
            sources.push("benches/java/CuratorLockBench.java");
        }
        let classes = common::compile_java("client-tls", &sources, &jars)
            .map_err(|e| println!("  (Java skipped: {e})"))
            .ok();
        let opts = pki.java_client_options(&alice);
        let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
        let warm = 20_000;
        let mut java = classes.as_ref().and_then(|c| {
            let mut cmd = c.java(&opts, "ExistsBench");
            cmd.args([tls_cs.as_str(), root.as_str()])
                .arg(warm.to_string())
                .arg(ops.to_string())
                .arg(rounds.to_string());
            LineProcess::spawn("ExistsBench (TLS)", cmd)
                .map_err(|e| println!("  (Java skipped: {e})"))
                .ok()
        });
        // CuratorLockBench serving on `cs` with the JVM options `opts`, once ready.
        let curator_on = |c: &common::JavaClasses, opts: &[&str], cs: &str, port: &str| {
            let mut o = opts.to_vec();
            o.extend(["-Xmx256m", "-XX:+UseSerialGC"]);
            let mut cmd = c.java(&o, "CuratorLockBench");
            cmd.args(["serve", cs, root.as_str()]);
            let p = LineProcess::spawn(&format!("CuratorLockBench ({port})"), cmd).ok()?;
            match p.recv(Duration::from_secs(60)) {
                Ok(l) if l.starts_with("ready") => Some(p),
                other => {
                    println!("  (Curator on the {port} port skipped: {other:?})");
                    None
                }
            }
        };
        let mut curator_jvm = classes
            .as_ref()
            .filter(|_| curator)
            .and_then(|c| curator_on(c, &opts, &tls_cs, "TLS"));
        // Curator on the plain port too: its own TLS/plain ratio on this server
        // tells what the server's TLS costs any client.
        let mut curator_plain = curator_jvm
            .as_ref()
            .and(classes.as_ref())
            .and_then(|c| curator_on(c, &[], &plain_cs, "plain"));

        // exists: Java TLS, zklock TLS, zklock plain, round after round.
        zklock_round(&zk_tls, &root, warm);
        zklock_round(&zk_plain, &root, warm);
        let (mut j, mut t, mut p) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..rounds {
            if let Some(jp) = java.as_mut() {
                match jp
                    .recv(Duration::from_secs(120))
                    .ok()
                    .as_deref()
                    .and_then(parse_java)
                {
                    Some(s) => j.push(s.median),
                    None => println!("  (no answer from the Java client)"),
                }
            }
            t.push(zklock_round(&zk_tls, &root, ops).median);
            p.push(zklock_round(&zk_plain, &root, ops).median);
            println!(
                "  round {r}: exists median: zklock TLS {:>6.1} µs, zklock plain {:>6.1} µs{}",
                us(*t.last().unwrap()),
                us(*p.last().unwrap()),
                j.last()
                    .map(|d| format!(", Java TLS {:>6.1} µs", us(*d)))
                    .unwrap_or_default()
            );
            if r + 1 < rounds {
                if let Some(jp) = java.as_mut() {
                    let _ = jp.send("");
                }
            }
        }
        if let Some(mut jp) = java {
            let _ = jp.finish(Duration::from_secs(30));
        }
        let (tm, pm) = (median(t), median(p));
        print!(
            "  exists median over rounds: zklock TLS {:.1} µs, zklock plain {:.1} µs ({:.2}x)",
            us(tm),
            us(pm),
            tm.as_secs_f64() / pm.as_secs_f64()
        );
        if j.is_empty() {
            println!();
        } else {
            let jm = median(j);
            println!(
                ", Java TLS {:.1} µs; zklock TLS / Java TLS {:.2}x (target <= 1.00x)",
                us(jm),
                tm.as_secs_f64() / jm.as_secs_f64()
            );
        }

        // The uncontended write-lock cycle.
        let zkw = |cs: &str, tls: Option<TlsConfig>| {
            ZooKeeperWatcher::builder(cs)
                .with_client(move |b| match tls {
                    Some(t) => b.with_tls(t),
                    None => b,
                })
                .connect()
                .expect("a ZooKeeperWatcher")
        };
        let w_plain = zkw(&plain_cs, None);
        let w_tls = zkw(&tls_cs, Some(tls));
        let (lp, lt) = (format!("{root}/zklock-plain"), format!("{root}/zklock-tls"));
        lock_round(&w_plain, &lp, cycles * 4);
        lock_round(&w_tls, &lt, cycles * 4);
        let (mut pt, mut pc, mut tt, mut tc, mut ct, mut cc) = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        let (mut pconn, mut tconn) = (Vec::new(), Vec::new());
        for c in curator_jvm.iter_mut().chain(curator_plain.iter_mut()) {
            let _ = c.ask(
                &format!("uncontended mutex {}", cycles * 4),
                Duration::from_secs(300),
            );
        }
        let mut cpt = Vec::new();
        for r in 0..rounds {
            let (a, b, b_conn) = lock_round(&w_plain, &lp, cycles);
            let (c, d, d_conn) = lock_round(&w_tls, &lt, cycles);
            pt.push(a);
            pc.push(b);
            tt.push(c);
            tc.push(d);
            pconn.push(b_conn);
            tconn.push(d_conn);
            let mut line = format!(
                "  round {r}: lock cycle median: zklock plain {:>6.1} µs ({:>5.1} µs CPU, connection thread {:>4.1}), zklock TLS {:>6.1} µs ({:>5.1} µs CPU, connection thread {:>4.1})",
                us(a),
                us(b),
                us(b_conn),
                us(c),
                us(d),
                us(d_conn)
            );
            if let Some(cp) = curator_jvm.as_mut() {
                let cpu0 = common::cpu_time(Some(cp.pid()));
                let answer = cp.ask(
                    &format!("uncontended mutex {cycles}"),
                    Duration::from_secs(300),
                );
                let cpu = (common::cpu_time(Some(cp.pid())) - cpu0) / cycles as u32;
                if let Some(p50) = answer.ok().as_deref().and_then(|l| field(l, "p50_ns")) {
                    ct.push(p50);
                    cc.push(cpu);
                    line += &format!(
                        ", Curator TLS {:>6.1} µs ({:>5.1} µs CPU)",
                        us(p50),
                        us(cpu)
                    );
                }
            }
            if let Some(cp) = curator_plain.as_mut() {
                let answer = cp.ask(
                    &format!("uncontended mutex {cycles}"),
                    Duration::from_secs(300),
                );
                if let Some(p50) = answer.ok().as_deref().and_then(|l| field(l, "p50_ns")) {
                    cpt.push(p50);
                    line += &format!(", Curator plain {:>6.1} µs", us(p50));
                }
            }
            println!("{line}");
        }
        for mut c in curator_jvm.into_iter().chain(curator_plain) {
            let _ = c.send("quit");
            let _ = c.finish(Duration::from_secs(30));
        }
        let (ptm, ttm) = (median(pt), median(tt));
        println!(
            "  lock cycle over rounds: zklock plain {:.1} µs ({:.1} µs CPU, target <= 80; connection thread {:.1}), zklock TLS {:.1} µs ({:.1} µs CPU; connection thread {:.1}): TLS/plain {:.2}x (target <= 1.15x){}",
            us(ptm),
            us(median(pc)),
            us(median(pconn)),
            us(ttm),
            us(median(tc)),
            us(median(tconn)),
            ttm.as_secs_f64() / ptm.as_secs_f64(),
            if ct.is_empty() {
                String::new()
            } else {
                format!("; Curator TLS {:.1} µs ({:.1} µs CPU)", us(median(ct.clone())), us(median(cc)))
            }
        );
        if !ct.is_empty() && !cpt.is_empty() {
            let (ctm, cpm) = (median(ct), median(cpt));
            println!(
                "  Curator on the same server: TLS {:.1} µs, plain {:.1} µs: TLS/plain {:.2}x; TLS adds zklock {:.1} µs per cycle, Curator {:.1} µs",
                us(ctm),
                us(cpm),
                ctm.as_secs_f64() / cpm.as_secs_f64(),
                us(ttm.saturating_sub(ptm)),
                us(ctm.saturating_sub(cpm))
            );
        }
        w_plain.close().unwrap();
        w_tls.close().unwrap();
        for lock in ["zklock-plain", "zklock-tls", "uncontended-mutex"] {
            let _ = zk_plain.delete(&format!("{root}/{lock}"), None);
        }
        let _ = zk_plain.delete(&root, None);
        drop(classes);
    }

    /// `key value` from an "ok key value ..." line, as nanoseconds.
    fn field(line: &str, key: &str) -> Option<Duration> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let i = f.iter().position(|x| *x == key)?;
        Some(Duration::from_nanos(f.get(i + 1)?.parse().ok()?))
    }
}
