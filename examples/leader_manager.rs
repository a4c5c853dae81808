//! HBase's `ZKLeaderManager` from zklock: three candidates wait to lead; the
//! leader steps down, the next one is stopped, the last one leads and stops.
//! The leader znode is HBase's: one ephemeral znode holding the leader's id.
//!
//! Runs against `$ZK_SERVERS` or a throwaway local ZooKeeper:
//! `cargo run --example leader_manager`.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use zklock::recipes::leader_manager::ZkLeaderManager;
use zklock::ZooKeeperWatcher;

/// The one candidate leading now, waiting up to 10 s for someone other than
/// `not` to lead.
fn leader(managers: &[Arc<ZkLeaderManager>], not: &[usize]) -> anyhow::Result<usize> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let leading: Vec<usize> = (0..managers.len())
            .filter(|&i| managers[i].has_leadership())
            .collect();
        anyhow::ensure!(leading.len() <= 1, "two leaders: {leading:?}");
        if let Some(&l) = leading.first().filter(|l| !not.contains(l)) {
            return Ok(l);
        }
        anyhow::ensure!(Instant::now() < deadline, "nobody took over");
        thread::sleep(Duration::from_millis(10));
    }
}

fn main() -> anyhow::Result<()> {
    let _ = env_logger::try_init();
    let (_server, servers) = zklock::testing::example_servers()?;
    let znode = format!("/zklock-example/leader-{}", std::process::id());
    let sessions = (0..3)
        .map(|i| ZooKeeperWatcher::connect(&servers, &format!("server{i}"), None))
        .collect::<zklock::Result<Vec<_>>>()?;
    let managers: Vec<Arc<ZkLeaderManager>> = sessions
        .iter()
        .enumerate()
        .map(|(i, zkw)| Arc::new(ZkLeaderManager::new(zkw, &znode, format!("server{i}"))))
        .collect();
    let waiting: Vec<_> = managers
        .iter()
        .enumerate()
        .map(|(i, m)| {
            m.start()?;
            let m = m.clone();
            Ok(thread::spawn(move || {
                let led = m.wait_to_become_leader();
                println!("  server{i}: wait_to_become_leader -> {led:?}");
                led
            }))
        })
        .collect::<zklock::Result<Vec<_>>>()?;

    let first = leader(&managers, &[])?;
    let (data, _) = sessions[0]
        .recoverable_zookeeper()
        .get_data(&znode, false)?;
    println!(
        "server{first} leads ({znode} holds {:?}); it steps down",
        String::from_utf8_lossy(&data)
    );
    managers[first].step_down_as_leader()?;
    let second = leader(&managers, &[first])?;
    println!("server{second} leads; it is stopped");
    managers[second].stop()?;
    let third = leader(&managers, &[first, second])?;
    println!("server{third} leads");
    for h in waiting {
        h.join().expect("candidate thread")?;
    }
    println!("server{first} offers again behind server{third}");
    let again = managers[first].clone();
    let h = thread::spawn(move || again.wait_to_become_leader());
    managers[third].stop()?;
    println!(
        "server{third} stopped; server{first} leads again: {}",
        h.join().expect("thread")?
    );
    managers[first].stop()?;
    let left = sessions[0].recoverable_zookeeper().exists(&znode, false)?;
    println!("leader znode left: {}", left.is_some());
    for s in &sessions {
        s.close()?;
    }
    Ok(())
}
