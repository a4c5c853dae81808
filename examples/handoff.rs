//! The release → next-command hand-off of the `zklock` command: how long after
//! one holder's command exits the next waiter's command starts.
//!
//! `WRITERS` (default 12) `zklock lock` processes queue on one lock; each
//! command stamps its start and end (`date +%s.%N`) and holds for 50 ms. The
//! gaps between one command's end and the next one's start are the hand-offs:
//! zklock noticing its command's exit, releasing (a delete), the waiter's
//! watch firing, its checks, and starting its command (a fork/exec of `sh`,
//! whose own start-up and `date` are in every figure alike). Repeated
//! `ROUNDS` (default 3) times; prints the median and the 90th percentile.
//!
//! ```text
//! cargo run --release --features cli --example handoff
//! ZKLOCK_BIN=/path/to/another/zklock cargo run --release --features cli --example handoff
//! ```
//! Against `$ZK_SERVERS`, or a throwaway local server.

#[path = "support/zklock_bin.rs"]
mod zklock_bin;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{ensure, Context};
use zklock::testing::example_servers;

const STAMPED: &str = "echo \"start $(date +%s.%N)\"; sleep 0.05; echo \"end $(date +%s.%N)\"";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> anyhow::Result<()> {
    let bin = zklock_bin::zklock_bin()?;
    let (_server, servers) = example_servers()?;
    let (writers, rounds) = (env_usize("WRITERS", 12), env_usize("ROUNDS", 3));
    let mut gaps = Vec::new();
    for round in 0..rounds {
        let lock = format!("/zklock-handoff-{}/r{round}", std::process::id());
        let mut children = Vec::new();
        for _ in 0..writers {
            children.push(
                Command::new(&bin)
                    .args(["--zk", &servers, "lock", &lock, "--", "sh", "-c", STAMPED])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()?,
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut spans = Vec::new();
        for mut c in children {
            let mut out = String::new();
            c.stdout
                .take()
                .context("stdout")?
                .read_to_string(&mut out)?;
            ensure!(c.wait()?.success(), "a writer failed");
            let stamp = |what: &str| -> Option<f64> {
                out.lines()
                    .find_map(|l| l.strip_prefix(what)?.trim().parse().ok())
            };
            spans.push((
                stamp("start ").context("no start")?,
                stamp("end ").context("no end")?,
            ));
        }
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in spans.windows(2) {
            ensure!(w[1].0 >= w[0].1, "two commands overlapped");
            gaps.push((w[1].0 - w[0].1) * 1000.0);
        }
    }
    gaps.sort_by(f64::total_cmp);
    let at = |q: f64| gaps[((gaps.len() - 1) as f64 * q).round() as usize];
    println!(
        "release -> next command ({}, {} hand-offs): median {:.1} ms, p90 {:.1} ms, min {:.1} ms",
        bin.display(),
        gaps.len(),
        at(0.5),
        at(0.9),
        gaps[0]
    );
    // Clean up on a shared server.
    let zkw = zklock::ZooKeeperWatcher::connect(&servers, "handoff-cleanup", None)?;
    zklock::zkutil::delete_node_recursively(
        &zkw,
        &format!("/zklock-handoff-{}", std::process::id()),
    )?;
    zkw.close()?;
    Ok(())
}
