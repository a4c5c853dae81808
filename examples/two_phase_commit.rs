//! `cargo run --example two_phase_commit`: a coordinator and three sites; all
//! vote commit in the first transaction, one votes abort in the second. Runs
//! against `$ZK_SERVERS` or a throwaway local ZooKeeper.

use std::thread;
use std::time::Duration;

use anyhow::{ensure, Context};
use zklock::recipes::two_phase_commit::{Outcome, TwoPhaseCommit, Vote};
use zklock::ZooKeeperWatcher;

fn connect(servers: &str, name: &str) -> anyhow::Result<ZooKeeperWatcher> {
    ZooKeeperWatcher::builder(servers)
        .with_identifier(name)
        .with_session_timeout(Duration::from_secs(10))
        .connect()
        .with_context(|| format!("connecting to {servers}"))
}

fn run(servers: &str, path: &str, votes: [Vote; 3]) -> anyhow::Result<Outcome> {
    let coordinator = connect(servers, "coordinator")?;
    let tx = TwoPhaseCommit::create(&coordinator, path, &["s0", "s1", "s2"])?;
    let sites: Vec<_> = votes
        .into_iter()
        .enumerate()
        .map(|(i, vote)| {
            let (servers, path) = (servers.to_string(), path.to_string());
            thread::spawn(move || -> anyhow::Result<Option<Outcome>> {
                let zkw = connect(&servers, "site")?;
                let tx = TwoPhaseCommit::open(&zkw, &path)?;
                let site = format!("s{i}");
                tx.join(&site)?;
                tx.vote(&site, vote)?;
                let outcome = tx.wait_outcome(Duration::from_secs(30))?;
                println!("  site {site} voted {vote:?}, sees {outcome:?}");
                zkw.close()?;
                Ok(outcome)
            })
        })
        .collect();
    let outcome = tx
        .wait_outcome(Duration::from_secs(30))?
        .context("undecided")?;
    for s in sites {
        ensure!(
            s.join().expect("site")? == Some(outcome),
            "a site disagrees"
        );
    }
    tx.delete()?;
    coordinator.close()?;
    Ok(outcome)
}

fn main() -> anyhow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let (_server, servers) = zklock::testing::example_servers()?;
    let root = format!("/zklock-example-2pc-{}", std::process::id());
    println!("transaction 1");
    let o = run(&servers, &format!("{root}/tx1"), [Vote::Commit; 3])?;
    println!("outcome: {o:?}");
    ensure!(o == Outcome::Commit);
    println!("transaction 2");
    let o = run(
        &servers,
        &format!("{root}/tx2"),
        [Vote::Commit, Vote::Abort, Vote::Commit],
    )?;
    println!("outcome: {o:?}");
    ensure!(o == Outcome::Abort);
    let zkw = connect(&servers, "cleanup")?;
    zkw.zookeeper().delete(&root, None)?;
    zkw.close()?;
    Ok(())
}
