//! `cargo run --example barrier`: three workers wait on a barrier until the
//! coordinator removes it. Runs against `$ZK_SERVERS` or a throwaway local
//! ZooKeeper.

use std::thread;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use zklock::recipes::barrier::Barrier;
use zklock::ZooKeeperWatcher;

fn connect(servers: &str, name: &str) -> anyhow::Result<ZooKeeperWatcher> {
    ZooKeeperWatcher::builder(servers)
        .with_identifier(name)
        .with_session_timeout(Duration::from_secs(10))
        .connect()
        .with_context(|| format!("connecting to {servers}"))
}

fn main() -> anyhow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let (_server, servers) = zklock::testing::example_servers()?;
    let path = format!("/zklock-example-barrier-{}", std::process::id());
    let coordinator = connect(&servers, "coordinator")?;
    let barrier = Barrier::new(&coordinator, &path)?;
    barrier.set_barrier()?;
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let (servers, path) = (servers.clone(), path.clone());
            thread::spawn(move || -> anyhow::Result<bool> {
                let zkw = connect(&servers, "worker")?;
                let b = Barrier::new(&zkw, &path)?;
                println!("worker {i} waits at the barrier");
                let through = b.wait_on_barrier(Duration::from_secs(30))?;
                println!("worker {i} through: {through}");
                zkw.close()?;
                Ok(through)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    println!("coordinator removes the barrier");
    barrier.remove_barrier()?;
    for w in workers {
        ensure!(w.join().expect("worker")?, "a worker timed out");
    }
    println!("all through {:.0?} after the removal", t.elapsed());
    coordinator.close()?;
    Ok(())
}
