//! `cargo run --example queue`: two producers and two consumers share a
//! `DistributedQueue` (the layout of ZooKeeper's Java `DistributedQueue`), each
//! in its own session; every item comes out once, each producer's in order.
//! Runs against `$ZK_SERVERS` or a throwaway local ZooKeeper.

use std::collections::HashSet;
use std::thread;
use std::time::Duration;

use anyhow::{ensure, Context};
use zklock::recipes::queue::DistributedQueue;
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
    let dir = format!("/zklock-example-queue-{}", std::process::id());
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let (servers, dir) = (servers.clone(), dir.clone());
            thread::spawn(move || -> anyhow::Result<()> {
                let zkw = connect(&servers, "producer")?;
                let q = DistributedQueue::new(&zkw, &dir)?;
                for i in 0..50 {
                    q.offer(format!("p{p}-{i:02}").as_bytes())?;
                }
                zkw.close()?;
                Ok(())
            })
        })
        .collect();
    let consumers: Vec<_> = (0..2)
        .map(|c| {
            let (servers, dir) = (servers.clone(), dir.clone());
            thread::spawn(move || -> anyhow::Result<Vec<String>> {
                let zkw = connect(&servers, "consumer")?;
                let q = DistributedQueue::new(&zkw, &dir)?;
                let mut got = Vec::new();
                // Stop after a second with nothing new.
                while let Some(item) = q.take_timeout(Duration::from_secs(1))? {
                    got.push(String::from_utf8(item)?);
                }
                println!(
                    "consumer {c} took {} items, first {:?}",
                    got.len(),
                    got.first()
                );
                zkw.close()?;
                Ok(got)
            })
        })
        .collect();
    for p in producers {
        p.join().expect("producer")?;
    }
    let mut all = HashSet::new();
    for c in consumers {
        for item in c.join().expect("consumer")? {
            ensure!(all.insert(item.clone()), "{item} taken twice");
        }
    }
    ensure!(all.len() == 100, "{} of 100 items taken", all.len());
    println!("100 items, each taken once");
    let zkw = connect(&servers, "cleanup")?;
    zkw.zookeeper().delete(&dir, None)?;
    zkw.close()?;
    Ok(())
}
