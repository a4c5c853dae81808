//! `make demo`: zklock's showcase against a real ZooKeeper.
//!
//! Starts a throwaway local ZooKeeper (unless `ZK_SERVERS` names one), then shows
//! writers excluding each other, readers sharing, a timed-out attempt leaving no
//! node, fencing tokens, what a lock cycle costs the server (counted from `mntr`),
//! and a lock held through a connection blip and lost to session expiry.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, LockEvent, ZkInterProcessReadWriteLock,
};
use zklock::testing::{four_letter, parse_mntr, FaultProxy, ZkServer};
use zklock::{RetryConfig, ZooKeeperWatcher};

fn connect(servers: &str, name: &str, session: Duration) -> anyhow::Result<ZooKeeperWatcher> {
    ZooKeeperWatcher::builder(servers)
        .with_identifier(name)
        .with_session_timeout(session)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(50)))
        .connect()
        .with_context(|| format!("connecting to ZooKeeper at {servers}"))
}

fn packets(server: &str) -> anyhow::Result<u64> {
    let m = parse_mntr(&four_letter(server, "mntr")?);
    m.get("zk_packets_received")
        .and_then(|v| v.parse().ok())
        .context("mntr has no zk_packets_received")
}

fn main() -> anyhow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let own_server;
    let servers = match std::env::var("ZK_SERVERS") {
        Ok(s) if !s.trim().is_empty() => {
            println!("using ZooKeeper at {s}");
            s
        }
        _ => {
            let t = Instant::now();
            own_server = ZkServer::start()
                .context("starting a throwaway ZooKeeper (try `make zookeeper`)")?;
            println!(
                "started a throwaway ZooKeeper 3.8 at {} in {:.1?} (stopped when the demo ends)",
                own_server.connect_string(),
                t.elapsed()
            );
            own_server.connect_string()
        }
    };
    let root = format!("/zklock-demo-{}", std::process::id());
    let zkw = connect(&servers, "demo", Duration::from_secs(10))?;
    println!("connected: {}\n", zkw.identifier());

    // 1. Writers exclude writers.
    println!("1. five threads take turns on one write lock");
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &format!("{root}/table"), None)?;
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..5)
        .map(|i| {
            let lock = rw.write_lock(format!("writer-{i}").as_bytes());
            let (inside, overlaps) = (inside.clone(), overlaps.clone());
            thread::spawn(move || -> zklock::Result<i64> {
                let guard = lock.lock()?;
                if inside.swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                println!(
                    "   writer-{i} holds the lock (fencing token {})",
                    guard.fencing_token()
                );
                thread::sleep(Duration::from_millis(50));
                inside.store(false, Ordering::SeqCst);
                let token = guard.fencing_token();
                guard.unlock()?;
                Ok(token)
            })
        })
        .collect();
    let mut tokens = Vec::new();
    for h in handles {
        tokens.push(h.join().expect("writer thread")?);
    }
    tokens.sort_unstable();
    tokens.dedup();
    ensure!(
        overlaps.load(Ordering::SeqCst) == 0,
        "two writers were inside at once"
    );
    ensure!(tokens.len() == 5, "every grant has its own fencing token");
    println!("   no overlap; 5 distinct, growing fencing tokens\n");

    // 2. Readers share.
    println!("2. four readers hold the read lock at the same time");
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let lock = rw.read_lock(format!("reader-{i}").as_bytes());
            let barrier = barrier.clone();
            thread::spawn(move || -> zklock::Result<()> {
                let guard = lock.lock()?;
                barrier.wait();
                if i == 0 {
                    println!("   all four readers are inside together");
                }
                drop(guard);
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().expect("reader thread")?;
    }
    println!();

    // 3. A reader holds; a writer from another session times out and leaves nothing.
    println!("3. another session's writer waits 500 ms behind a reader, then gives up");
    let other = connect(&servers, "demo-other", Duration::from_secs(10))?;
    let reader = rw.read_lock(b"long reader");
    reader.acquire()?;
    let seen = Arc::new(Mutex::new(String::new()));
    let s = seen.clone();
    let handler: Arc<dyn zklock::lock::MetadataHandler> =
        Arc::new(move |m: &[u8]| *s.lock().unwrap() = String::from_utf8_lossy(m).into_owned());
    let writer = ZkInterProcessReadWriteLock::new(&other, &format!("{root}/table"), Some(handler))?
        .write_lock(b"impatient writer");
    let t = Instant::now();
    let got = writer.try_acquire(Duration::from_millis(500))?;
    ensure!(
        !got,
        "the writer must not get the lock while a reader holds it"
    );
    let left = zkw
        .zookeeper()
        .get_children(&format!("{root}/table"), false)?;
    println!(
        "   try_acquire returned false after {:.0?}; it saw the holder's metadata {:?}; nodes left: {left:?}",
        t.elapsed(),
        seen.lock().unwrap()
    );
    ensure!(left.len() == 1, "only the reader's node remains");
    reader.release()?;
    ensure!(writer.try_acquire(Duration::from_secs(5))?, "free now");
    writer.release()?;
    println!("   after the reader released, the writer got it at once\n");

    // 4. Cost of a lock cycle, counted by the server.
    println!("4. what an uncontended acquire + release costs the server");
    let lock = rw.write_lock(b"cycle");
    // Warm up (the lock znode exists afterwards; a fresh JVM is slow at first).
    for _ in 0..300 {
        lock.acquire()?;
        lock.release()?;
    }
    let cycles = 500u64;
    let before = packets(&servers)?;
    let t = Instant::now();
    for _ in 0..cycles {
        lock.acquire()?;
        lock.release()?;
    }
    let elapsed = t.elapsed();
    let after = packets(&servers)?;
    // Each mntr is itself one packet.
    let per_cycle = (after - before - 1) as f64 / cycles as f64;
    println!(
        "   {cycles} cycles in {elapsed:.2?}: {:.0} cycles/s, {per_cycle:.2} requests per cycle (create, getChildren, delete)\n",
        cycles as f64 / elapsed.as_secs_f64()
    );

    // 5. A held lock through a blip and through expiry.
    println!("5. a lock held through a connection blip, then lost to session expiry");
    let proxy = FaultProxy::start(servers.split(',').next().unwrap_or(&servers))?;
    let fragile = connect(
        &proxy.connect_string(),
        "demo-fragile",
        Duration::from_millis(2000),
    )?;
    let events = Arc::new(Mutex::new(Vec::new()));
    let e = events.clone();
    let lock = ZkInterProcessReadWriteLock::new(&fragile, &format!("{root}/fragile"), None)?
        .with_lock_listener(move |path: &str, ev: LockEvent| {
            println!("   lock listener: {path}: {ev:?}");
            e.lock().unwrap().push(ev);
        })
        .write_lock(b"fragile");
    lock.acquire()?;
    proxy.cut();
    let end = Instant::now() + Duration::from_secs(10);
    while events.lock().unwrap().len() < 2 && Instant::now() < end {
        thread::sleep(Duration::from_millis(20));
    }
    println!("   after the blip, is_held() = {}", lock.is_held());
    proxy.stall();
    println!("   network stalled for 3 s (session timeout 2 s) ...");
    thread::sleep(Duration::from_secs(3));
    proxy.pass();
    let end = Instant::now() + Duration::from_secs(10);
    while !events.lock().unwrap().contains(&LockEvent::Lost) && Instant::now() < end {
        thread::sleep(Duration::from_millis(20));
    }
    println!(
        "   is_held() = {}; release() = {:?}",
        lock.is_held(),
        lock.release().err().map(|e| e.to_string())
    );
    let taker = ZkInterProcessReadWriteLock::new(&zkw, &format!("{root}/fragile"), None)?
        .write_lock(b"taker");
    ensure!(
        taker.try_acquire(Duration::from_secs(5))?,
        "the expired holder's node is gone"
    );
    println!("   another session acquired it: no orphan node stayed behind");
    taker.release()?;
    let _ = fragile.close();

    zklock::zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()?;
    println!("\ndemo finished: every step checked");
    Ok(())
}
