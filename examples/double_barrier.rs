//! `cargo run --example double_barrier`: four members enter together, work for
//! different times, and leave together. Runs against `$ZK_SERVERS` or a
//! throwaway local ZooKeeper.

use std::thread;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use zklock::recipes::double_barrier::DoubleBarrier;
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
    let path = format!("/zklock-example-double-barrier-{}", std::process::id());
    let start = Instant::now();
    let members: Vec<_> = (0..4u64)
        .map(|i| {
            let (servers, path) = (servers.clone(), path.clone());
            thread::spawn(move || -> anyhow::Result<()> {
                let zkw = connect(&servers, "member")?;
                let db = DoubleBarrier::new(&zkw, &path, 4)?;
                thread::sleep(Duration::from_millis(150 * i));
                ensure!(db.enter(Duration::from_secs(30))?, "enter timed out");
                println!("member {i} entered at {:.0?}", start.elapsed());
                thread::sleep(Duration::from_millis(150 * (4 - i)));
                ensure!(db.leave(Duration::from_secs(30))?, "leave timed out");
                println!("member {i} left at {:.0?}", start.elapsed());
                zkw.close()?;
                Ok(())
            })
        })
        .collect();
    for m in members {
        m.join().expect("member")?;
    }
    let zkw = connect(&servers, "cleanup")?;
    zkw.zookeeper().delete(&path, None)?;
    zkw.close()?;
    Ok(())
}
