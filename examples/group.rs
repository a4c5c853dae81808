//! `cargo run --example group`: members join a group; one session ends
//! without leaving and the membership watch sees it go. Runs against
//! `$ZK_SERVERS` or a throwaway local ZooKeeper.

use std::time::Duration;

use anyhow::{ensure, Context};
use zklock::recipes::group::Group;
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
    let path = format!("/zklock-example-group-{}", std::process::id());
    let observer = connect(&servers, "observer")?;
    let group = Group::new(&observer, &path)?;
    let a = connect(&servers, "a")?;
    let b = connect(&servers, "b")?;
    let ma = Group::new(&a, &path)?.join("worker-a", b"10.0.0.1:8080")?;
    let _mb = Group::new(&b, &path)?.join("worker-b", b"10.0.0.2:8080")?;
    let members = group.members()?;
    println!("members: {members:?}");
    for m in &members {
        let data = group.member_data(m)?.unwrap_or_default();
        println!("  {m}: {}", String::from_utf8_lossy(&data));
    }
    println!("worker-b's process dies (its session ends without leaving)");
    b.close()?;
    let now = group
        .wait_for_change(&members, Duration::from_secs(30))?
        .context("no change seen")?;
    println!("members: {now:?}");
    ensure!(now == ["worker-a"], "worker-b left");
    ma.leave()?;
    a.close()?;
    observer.zookeeper().delete(&path, None)?;
    observer.close()?;
    Ok(())
}
