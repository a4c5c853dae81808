//! `make demo`: the `zklock` command line against a real ZooKeeper.
//!
//! Starts a throwaway local ZooKeeper (unless `ZK_SERVERS` names one), then runs
//! `zklock` processes — the binary built next to this example — and narrates
//! what they do: writers contending, readers sharing, a holder's `zklock`
//! killed with `kill -9` (its command dies with it at once) and its successor
//! waiting out the session timeout, `zklock ls` of
//! the queue, a clean shutdown handing the lock over at once, and a leader
//! election with succession. Every command run under a lock stamps its start
//! and end (`date +%s.%N`), and the summary checks them for overlaps.

#[path = "support/zklock_bin.rs"]
mod zklock_bin;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use zklock::testing::{pid_alive as alive, ScratchDir, ZkServer};

/// A command's start or end, stamped by the command itself.
#[derive(Debug, Clone)]
struct Stamp {
    label: String,
    lock: String,
    start: bool,
    at: f64,
}

/// Runs `zklock` processes and keeps what they say.
struct Demo {
    bin: PathBuf,
    servers: String,
    root: String,
    t0: f64,
    stamps: Arc<Mutex<Vec<Stamp>>>,
}

fn epoch() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A shell command that stamps its start, runs until SIGTERM, then stamps its
/// end (a service cleaning up before it exits).
const UNTIL_SIGTERM: &str =
    "trap 'kill $! 2>/dev/null; echo \"end $(date +%s.%N)\"; exit 0' TERM; \
     echo \"start $(date +%s.%N)\"; sleep 30 & wait";

/// A shell command that stamps its start and end around `body`.
fn stamped(body: &str) -> String {
    format!("echo \"start $(date +%s.%N)\"; {body}; echo \"end $(date +%s.%N)\"")
}

impl Demo {
    fn rel(&self, at: f64) -> String {
        format!("{:>6.2}s", at - self.t0)
    }

    /// Starts `zklock <args>` labelled `label` (in a process group of its own,
    /// so that a Ctrl-C of the demo is not forwarded twice); prints its output.
    fn spawn(&self, label: &str, lock: &str, args: &[&str]) -> anyhow::Result<Child> {
        let mut child = Command::new(&self.bin)
            .arg("--zk")
            .arg(&self.servers)
            // zklock is silent by default; the demo shows what it says.
            .arg("--verbose")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .with_context(|| format!("running {}", self.bin.display()))?;
        let out = child.stdout.take().context("stdout")?;
        let err = child.stderr.take().context("stderr")?;
        for (stream, is_out) in [
            (Box::new(out) as Box<dyn std::io::Read + Send>, true),
            (Box::new(err), false),
        ] {
            let (label, lock, stamps, t0) = (
                label.to_string(),
                lock.to_string(),
                self.stamps.clone(),
                self.t0,
            );
            thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let stamp = is_out
                        .then(|| line.split_once(' '))
                        .flatten()
                        .and_then(|(what, at)| Some((what, at.parse::<f64>().ok()?)));
                    match stamp {
                        Some((what @ ("start" | "end"), at)) => {
                            let text = if what == "start" {
                                "command starts"
                            } else {
                                "command ends"
                            };
                            println!("  {:>6.2}s  {label:<10} {text}", at - t0);
                            stamps.lock().unwrap().push(Stamp {
                                label: label.clone(),
                                lock: lock.clone(),
                                start: what == "start",
                                at,
                            });
                        }
                        _ => println!("  {:>6.2}s  {label:<10} {line}", epoch() - t0),
                    }
                }
            });
        }
        Ok(child)
    }

    /// `zklock <args>` to completion, its stdout indented.
    fn show(&self, args: &[&str]) -> anyhow::Result<()> {
        let out = Command::new(&self.bin)
            .arg("--zk")
            .arg(&self.servers)
            .args(args)
            .output()?;
        println!("  $ zklock {}", args.join(" "));
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            println!("    {line}");
        }
        Ok(())
    }

    fn lock(&self, name: &str) -> String {
        format!("{}/{name}", self.root)
    }

    /// Waits until `label`'s command has started (or `timeout`).
    fn wait_start(&self, label: &str, timeout: Duration) -> Option<f64> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(s) = self
                .stamps
                .lock()
                .unwrap()
                .iter()
                .find(|s| s.label == label && s.start)
            {
                return Some(s.at);
            }
            if Instant::now() >= end {
                return None;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// When `label`'s command started (its output may still be in flight).
    fn start_of(&self, label: &str) -> Option<f64> {
        self.wait_start(label, Duration::from_secs(2))
    }

    /// Waits until `lock` has `n` holders and waiters.
    fn wait_queue(&self, lock: &str, n: usize) -> anyhow::Result<()> {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            let out = Command::new(&self.bin)
                .args(["--zk", &self.servers, "ls", "--json", lock])
                .output()?;
            if String::from_utf8_lossy(&out.stdout)
                .matches("\"state\"")
                .count()
                == n
            {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(20));
        }
        anyhow::bail!("{lock} never had {n} nodes")
    }
}

fn wait_all(children: &mut [Child]) -> anyhow::Result<Vec<i32>> {
    children
        .iter_mut()
        .map(|c| Ok(c.wait()?.code().unwrap_or(-1)))
        .collect()
}

fn pid(c: &Child) -> Pid {
    Pid::from_raw(i32::try_from(c.id()).unwrap_or(0))
}

fn main() -> anyhow::Result<()> {
    let started = Instant::now();
    let bin = zklock_bin::zklock_bin()?;
    println!(
        "the zklock demo: five scenes (writers, readers, kill -9, SIGTERM, an election), \
         each `zklock` process a real one ({})",
        bin.display()
    );
    let own_server;
    let servers = match std::env::var("ZK_SERVERS") {
        Ok(s) if !s.trim().is_empty() => {
            println!("using ZooKeeper at {s}");
            s
        }
        _ => {
            println!("starting a throwaway ZooKeeper (a JVM: a few seconds) ...");
            let t = Instant::now();
            own_server = ZkServer::start()
                .context("starting a throwaway ZooKeeper (try `make zookeeper`)")?;
            println!(
                "started a throwaway ZooKeeper at {} in {:.1?} (the same one `zklock server` runs)",
                own_server.connect_string(),
                t.elapsed()
            );
            own_server.connect_string()
        }
    };
    let demo = Demo {
        bin,
        servers,
        root: format!("/zklock-demo-{}", std::process::id()),
        t0: epoch(),
        stamps: Arc::new(Mutex::new(Vec::new())),
    };
    let mut latencies: BTreeMap<&str, Vec<f64>> = BTreeMap::new();

    // 1. Writers contend.
    let backup = demo.lock("nightly-backup");
    println!("\n1. four `zklock lock {backup} -- backup` processes contend; each holds it 0.3 s");
    let cmd = stamped("sleep 0.3");
    let mut writers = Vec::new();
    for i in 1..=4 {
        let label = format!("worker-{i}");
        writers.push(demo.spawn(
            &label,
            &backup,
            &[
                "lock",
                &backup,
                "--metadata",
                &label,
                "--",
                "sh",
                "-c",
                &cmd,
            ],
        )?);
        if i == 1 {
            demo.wait_start("worker-1", Duration::from_secs(10));
        }
    }
    demo.wait_queue(&backup, 4)?;
    println!("   the queue, as `zklock ls` shows it:");
    demo.show(&["ls", &backup])?;
    let codes = wait_all(&mut writers)?;
    ensure!(codes.iter().all(|&c| c == 0), "writers exited {codes:?}");

    // 2. Readers share, a writer waits for all of them.
    let table = demo.lock("orders-table");
    println!("\n2. three `zklock read-lock` readers (0.6 s each) and then a writer");
    let mut procs = Vec::new();
    for i in 1..=3 {
        let label = format!("reader-{i}");
        procs.push(demo.spawn(
            &label,
            &table,
            &[
                "read-lock",
                &table,
                "-m",
                &label,
                "--",
                "sh",
                "-c",
                &stamped("sleep 0.6"),
            ],
        )?);
    }
    demo.wait_queue(&table, 3)?;
    procs.push(demo.spawn(
        "writer",
        &table,
        &[
            "lock",
            &table,
            "-m",
            "writer",
            "--",
            "sh",
            "-c",
            &stamped("true"),
        ],
    )?);
    let codes = wait_all(&mut procs)?;
    ensure!(codes.iter().all(|&c| c == 0), "exited {codes:?}");
    let starts: Vec<f64> = (1..=3)
        .filter_map(|i| demo.start_of(&format!("reader-{i}")))
        .collect();
    let spread = starts.iter().cloned().fold(f64::MIN, f64::max)
        - starts.iter().cloned().fold(f64::MAX, f64::min);
    println!(
        "   the three readers started within {:.0} ms of each other: they share",
        spread * 1000.0
    );

    // 3. kill -9 of a holder's zklock: its command dies with it at once (the
    // watchdog kills the command's process group), and the successor waits
    // for the session timeout.
    let job = demo.lock("report");
    println!(
        "\n3. the zklock of a holder (session timeout 2 s) is killed with kill -9; its command \
         and the command's background job die at once, and the waiter takes over"
    );
    let pids_dir = ScratchDir::new("demo").context("a scratch directory")?;
    let pids = pids_dir.join("pids");
    let mut victim = demo.spawn(
        "victim",
        &job,
        &[
            "--session-timeout",
            "2s",
            "lock",
            &job,
            "-m",
            "victim",
            "--",
            "sh",
            "-c",
            &stamped(&format!(
                "sleep 30 & echo $$ $! > {0}.tmp; mv {0}.tmp {0}; wait",
                pids.display()
            )),
        ],
    )?;
    demo.wait_start("victim", Duration::from_secs(10));
    let mut successor = demo.spawn(
        "successor",
        &job,
        &[
            "lock",
            &job,
            "-m",
            "successor",
            "--",
            "sh",
            "-c",
            &stamped("true"),
        ],
    )?;
    demo.wait_queue(&job, 2)?;
    demo.show(&["ls", &job])?;
    let end = Instant::now() + Duration::from_secs(10);
    while !pids.exists() && Instant::now() < end {
        thread::sleep(Duration::from_millis(5));
    }
    let command_pids: Vec<u32> = std::fs::read_to_string(&pids)
        .context("the victim's command never wrote its PIDs")?
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    drop(pids_dir);
    let killed = epoch();
    println!(
        "  {}  (demo)     kill -9 {} (the victim's zklock only; its command is pid {}, \
         its background job pid {})",
        demo.rel(killed),
        victim.id(),
        command_pids.first().copied().unwrap_or(0),
        command_pids.get(1).copied().unwrap_or(0)
    );
    kill(pid(&victim), Signal::SIGKILL)?;
    let _ = victim.wait();
    let end = Instant::now() + Duration::from_secs(5);
    while command_pids.iter().any(|&p| alive(p)) && Instant::now() < end {
        thread::sleep(Duration::from_millis(1));
    }
    let died = epoch();
    ensure!(
        command_pids.iter().all(|&p| !alive(p)),
        "the victim's command outlived its zklock"
    );
    println!(
        "  {}  (demo)     the command and its background job are gone ({:.0} ms after the kill)",
        demo.rel(died),
        (died - killed) * 1000.0
    );
    // Its command died without saying so: it ended when it was seen gone.
    demo.stamps.lock().unwrap().push(Stamp {
        label: "victim".into(),
        lock: job.clone(),
        start: false,
        at: died,
    });
    ensure!(successor.wait()?.success(), "successor failed");
    let took = demo.start_of("successor").context("successor never ran")? - killed;
    println!(
        "   the successor ran {took:.2} s after the kill, once ZooKeeper expired the dead \
         session; the victim's command was long gone, so they never overlapped"
    );
    latencies
        .entry("after kill -9 (session timeout 2 s)")
        .or_default()
        .push(took);

    // 4. A clean shutdown: SIGTERM frees the lock at once.
    let job = demo.lock("deploy");
    println!("\n4. the same with SIGTERM: zklock stops its command, releases, closes its session");
    let mut holder = demo.spawn(
        "holder",
        &job,
        &[
            "--session-timeout",
            "10s",
            "lock",
            &job,
            "-m",
            "holder",
            "--",
            "sh",
            "-c",
            UNTIL_SIGTERM,
        ],
    )?;
    demo.wait_start("holder", Duration::from_secs(10));
    let mut next = demo.spawn(
        "next",
        &job,
        &[
            "lock",
            &job,
            "-m",
            "next",
            "--",
            "sh",
            "-c",
            &stamped("true"),
        ],
    )?;
    demo.wait_queue(&job, 2)?;
    let termed = epoch();
    println!("  {}  (demo)     kill -TERM holder", demo.rel(termed));
    kill(pid(&holder), Signal::SIGTERM)?;
    let code = holder.wait()?.code().unwrap_or(-1);
    ensure!(next.wait()?.success(), "next failed");
    let took = demo.start_of("next").context("next never ran")? - termed;
    println!(
        "   holder exited {code} (its command's code after cleaning up); next ran {:.0} ms after \
         the signal, not after the 10 s session timeout",
        took * 1000.0
    );
    latencies
        .entry("after SIGTERM (clean shutdown)")
        .or_default()
        .push(took);

    // 5. Leader election with succession.
    let election = demo.lock("scheduler");
    println!("\n5. three `zklock elect` candidates; each leader is stopped with SIGTERM in turn");
    let mut candidates = Vec::new();
    for i in 1..=3 {
        let name = format!("node-{i}");
        candidates.push(demo.spawn(
            &name,
            &election,
            &[
                "elect",
                &election,
                "--name",
                &name,
                "--",
                "sh",
                "-c",
                UNTIL_SIGTERM,
            ],
        )?);
        demo.wait_queue(&election, i)?;
    }
    demo.show(&["ls", &election])?;
    for i in 1..=3 {
        let name = format!("node-{i}");
        demo.wait_start(&name, Duration::from_secs(10))
            .with_context(|| format!("{name} never led"))?;
        let termed = epoch();
        println!("  {}  (demo)     kill -TERM {name}", demo.rel(termed));
        kill(pid(&candidates[i - 1]), Signal::SIGTERM)?;
        let _ = candidates[i - 1].wait();
        if i < 3 {
            let next = format!("node-{}", i + 1);
            let at = demo
                .wait_start(&next, Duration::from_secs(10))
                .with_context(|| format!("{next} never led"))?;
            latencies
                .entry("election succession")
                .or_default()
                .push(at - termed);
        }
    }

    // Summary: no two commands under one write lock overlapped.
    thread::sleep(Duration::from_millis(50)); // the last output lines
    let stamps = demo.stamps.lock().unwrap().clone();
    let grants = stamps.iter().filter(|s| s.start).count();
    let mut overlaps = 0;
    let mut handoffs = Vec::new();
    for lock in [
        &backup,
        &demo.lock("report"),
        &demo.lock("deploy"),
        &election,
    ] {
        let mut spans: Vec<(f64, f64)> = Vec::new();
        for s in stamps.iter().filter(|s| &s.lock == lock && s.start) {
            let end = stamps
                .iter()
                .find(|e| e.label == s.label && !e.start)
                .map_or(f64::MAX, |e| e.at);
            spans.push((s.at, end));
        }
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 {
                overlaps += 1;
            } else if lock == &backup {
                handoffs.push(w[1].0 - w[0].1);
            }
        }
    }
    // The writer of step 2 must not overlap any reader.
    let writer = stamps.iter().find(|s| s.label == "writer" && s.start);
    for r in stamps
        .iter()
        .filter(|s| s.label.starts_with("reader-") && !s.start)
    {
        if writer.is_some_and(|w| w.at < r.at) {
            overlaps += 1;
        }
    }
    latencies.insert("release -> next writer's command (step 1)", handoffs);
    // Leave nothing behind on a shared server.
    let zkw = zklock::ZooKeeperWatcher::connect(&demo.servers, "demo-cleanup", None)?;
    zklock::zkutil::delete_node_recursively(&zkw, &demo.root)?;
    zkw.close()?;

    println!("\nsummary");
    println!("  commands started under a lock or leadership: {grants}");
    println!("  overlapping holders of a write lock, or leaders: {overlaps}");
    for (what, v) in &latencies {
        let ms: Vec<String> = v.iter().map(|s| format!("{:.0} ms", s * 1000.0)).collect();
        println!("  hand-off {what}: {}", ms.join(", "));
    }
    println!("  demo took {:.1?}", started.elapsed());
    ensure!(overlaps == 0, "holders overlapped");
    println!("demo finished: every step checked; stopping the server");
    Ok(())
}
