//! A clean shutdown: a service that holds locks and has threads waiting for
//! others, and on SIGINT/SIGTERM cancels its waiters, releases what it holds
//! and closes its session — so its ephemeral lock nodes go at once, not when
//! the server expires the session (30 s here).
//!
//! ```sh
//! cargo run --features cli --example shutdown            # own throwaway server
//! ZK_SERVERS=127.0.0.1:2181 cargo run --features cli --example shutdown /my/root
//! ```
//! Then press Ctrl-C (or `kill <pid>`).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
use zklock::testing::ZkServer;
use zklock::ZooKeeperWatcher;

fn main() -> anyhow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    // Signals are watched before anything is taken, so none can be missed.
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let root = std::env::args()
        .nth(1)
        .unwrap_or_else(|| format!("/zklock-shutdown-{}", std::process::id()));
    let own_server;
    let servers = match std::env::var("ZK_SERVERS") {
        Ok(s) if !s.trim().is_empty() => s,
        _ => {
            own_server = ZkServer::start().context("starting a throwaway ZooKeeper")?;
            own_server.connect_string()
        }
    };
    // A long session: without a clean shutdown, our nodes would stay 30 s.
    let zkw = ZooKeeperWatcher::builder(&servers)
        .with_identifier("shutdown-example")
        .with_session_timeout(Duration::from_secs(30))
        .connect()
        .with_context(|| format!("connecting to {servers}"))?;

    // Two locks held by the service ...
    let tables = ["orders", "customers"].map(|t| {
        ZkInterProcessReadWriteLock::new(&zkw, &format!("{root}/{t}"), None)
            .map(|rw| rw.write_lock(format!("service {} ({t})", std::process::id()).as_bytes()))
    });
    let [orders, customers] = tables;
    let held = [orders?, customers?];
    for lock in &held {
        lock.acquire()?;
    }
    // ... and two worker threads waiting for the one it holds first.
    let waiters: Vec<_> = (0..2)
        .map(|i| {
            let rw = ZkInterProcessReadWriteLock::new(&zkw, &format!("{root}/orders"), None)?;
            Ok(Arc::new(rw.write_lock(format!("worker {i}").as_bytes())))
        })
        .collect::<anyhow::Result<_>>()?;
    let threads: Vec<_> = waiters
        .iter()
        .map(|lock| {
            let lock = lock.clone();
            thread::spawn(move || lock.acquire())
        })
        .collect();
    // Wait until both workers are queued (4 nodes: 2 held, 2 waiting).
    let rzk = zkw.recoverable_zookeeper();
    let queued = || {
        rzk.get_children(&format!("{root}/orders"), false)
            .map(|c| c.len())
    };
    let end = Instant::now() + Duration::from_secs(10);
    while queued()? < 3 && Instant::now() < end {
        thread::sleep(Duration::from_millis(10));
    }
    println!(
        "ready: session 0x{:x} holds {root}/orders and {root}/customers; 2 workers wait",
        zkw.zookeeper().session_id()
    );

    // Run until a signal.
    let sig = signals.forever().next().unwrap_or(SIGTERM);
    let t = Instant::now();
    println!("signal {sig}: shutting down");
    // 1. Cancel the waiters: each removes its node and returns Cancelled.
    for w in &waiters {
        w.cancel();
    }
    for t in threads {
        match t.join() {
            Ok(Err(zklock::Error::Cancelled { .. })) => {}
            Ok(other) => println!("a worker ended with {other:?}"),
            Err(_) => println!("a worker panicked"),
        }
    }
    println!("  waiters cancelled");
    // 2. Release what we hold, synchronously, to see any error.
    for lock in &held {
        if let Err(e) = lock.release() {
            println!("  releasing {}: {e}", lock.lock_znode());
        }
    }
    println!("  locks released");
    // 3. Close the session: the server drops it (and anything ephemeral left).
    zkw.close()?;
    println!("  session closed in {:.0?}", t.elapsed());
    Ok(())
}
