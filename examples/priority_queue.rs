//! `cargo run --example priority_queue`: a backlog of low-priority items, an
//! urgent item offered by another session overtakes it. Runs against
//! `$ZK_SERVERS` or a throwaway local ZooKeeper.

use std::time::Duration;

use anyhow::{ensure, Context};
use zklock::recipes::priority_queue::DistributedPriorityQueue;
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
    let dir = format!("/zklock-example-pq-{}", std::process::id());
    let worker = connect(&servers, "worker")?;
    let q = DistributedPriorityQueue::new(&worker, &dir)?;
    for i in 0..5 {
        q.offer(10, format!("batch job {i}").as_bytes())?;
    }
    let (p, first) = q.take_timeout(Duration::from_secs(5))?.context("an item")?;
    println!("took priority {p}: {}", String::from_utf8_lossy(&first));
    let ops = connect(&servers, "ops")?;
    DistributedPriorityQueue::new(&ops, &dir)?.offer(0, b"page the on-call")?;
    let mut rest = Vec::new();
    while let Some((p, item)) = q.poll()? {
        println!("took priority {p}: {}", String::from_utf8_lossy(&item));
        rest.push(p);
    }
    ensure!(rest.first() == Some(&0), "the urgent item comes next");
    worker.zookeeper().delete(&dir, None)?;
    ops.close()?;
    worker.close()?;
    Ok(())
}
