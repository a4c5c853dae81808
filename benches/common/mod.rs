//! Measuring helpers shared by the benchmarks (`mod common;` in each): the
//! servers' `mntr` counters, request windows with their ping allowance,
//! percentiles, `/proc` readings, and the Java side of the comparisons (compiling
//! a bench's Java source, driving a child process line by line). Each bench uses
//! only some of them.
#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, HashSet};
use std::env;
use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{Acl, CreateMode, WatchedEvent, Watcher, ZooKeeper};
use zklock::lock::{InterProcessLock, LockStep, ZkInterProcessWriteLock};
use zklock::testing::{
    example_servers, four_letter, parse_mntr, ScratchDir, ZkEnsemble, ZkServer, FORCE_SYNC_ENV,
};
use zklock::ZkError;
use zklock::ZooKeeperWatcher;

/// Session timeout of every session of the benchmarks (the ping allowance
/// depends on it).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

pub fn env_usize(name: &str, default: usize) -> usize {
    env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

pub fn connect(servers: &str, identifier: &str) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(servers)
        .with_identifier(identifier)
        .with_session_timeout(SESSION_TIMEOUT)
        .connect()
        .unwrap_or_else(|e| panic!("cannot connect to {servers}: {e}"))
}

/// `ZK_BENCH_ENSEMBLE=1`: the benches that take it run on a three-member
/// ensemble instead of one standalone server (see [`bench_servers`]).
pub const ENSEMBLE_ENV: &str = "ZK_BENCH_ENSEMBLE";

/// What a bench runs against (see [`bench_servers`]); kept alive while it runs.
pub enum BenchServers {
    /// `$ZK_SERVERS`: servers the bench did not start.
    Given,
    /// One standalone server.
    One(ZkServer),
    /// A three-member ensemble; every client of the bench connects to
    /// `follower`, whose writes go through the leader.
    Ensemble {
        ensemble: ZkEnsemble,
        follower: usize,
    },
}

impl BenchServers {
    /// The PIDs of the servers (none for `$ZK_SERVERS`): their CPU time.
    pub fn pids(&self) -> Vec<u32> {
        match self {
            BenchServers::Given => Vec::new(),
            BenchServers::One(s) => s.pid().into_iter().collect(),
            BenchServers::Ensemble { ensemble, .. } => (0..ensemble.size())
                .filter_map(|i| ensemble.pid(i))
                .collect(),
        }
    }

    /// For the bench's heading: the servers and whether they fsync.
    pub fn describe(&self) -> String {
        let fsync = if zklock_force_sync() {
            "forceSync=yes"
        } else {
            "forceSync=no"
        };
        match self {
            BenchServers::Given => "$ZK_SERVERS".to_string(),
            BenchServers::One(_) => format!("one standalone server, {fsync}"),
            BenchServers::Ensemble { ensemble, follower } => format!(
                "a {}-member ensemble, every client on follower {follower} (writes through the \
                 leader, member {}), {fsync}",
                ensemble.size(),
                ensemble.leader().map_or("?".to_string(), |l| l.to_string())
            ),
        }
    }
}

/// Whether the harness's servers fsync (`$ZK_TEST_FORCE_SYNC`, read as the
/// harness reads it).
fn zklock_force_sync() -> bool {
    env::var(FORCE_SYNC_ENV)
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "yes" | "true" | "1"))
}

/// The servers of a bench and their connect string: `$ZK_SERVERS` if set;
/// else, with `ZK_BENCH_ENSEMBLE=1`, a three-member ensemble (the connect
/// string is one follower's, so that every client of the run, zklock's and
/// the anchors', talks to the same member and writes go through the leader);
/// else one standalone server. `ZK_TEST_FORCE_SYNC=yes` makes the started
/// servers fsync their log before answering a write (the harness's default
/// is not to).
pub fn bench_servers() -> (BenchServers, String) {
    let ensemble = env::var(ENSEMBLE_ENV).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "no"));
    let given = env::var("ZK_SERVERS").is_ok_and(|s| !s.trim().is_empty());
    if given || !ensemble {
        let (server, servers) = example_servers().expect("a ZooKeeper server");
        return (
            server.map_or(BenchServers::Given, BenchServers::One),
            servers,
        );
    }
    let ensemble = ZkEnsemble::start().expect("a ZooKeeper ensemble");
    let leader = ensemble.leader().expect("an ensemble with a leader");
    let follower = (0..ensemble.size())
        .find(|&i| i != leader)
        .expect("a follower");
    let servers = ensemble.address(follower);
    println!(
        "started a throwaway {}-member ZooKeeper ensemble; the bench's clients use {servers}",
        ensemble.size()
    );
    (BenchServers::Ensemble { ensemble, follower }, servers)
}

// ---------------------------------------------------------------------------
// Measuring helpers
// ---------------------------------------------------------------------------

/// The servers' `mntr` counters, summed over every host of the connect string.
pub struct Mntr {
    pub hosts: Vec<String>,
    /// Packets one `packets()` call itself adds (measured; 0 when four-letter
    /// words are not counted).
    pub overhead: u64,
    /// The same for `zk_packets_sent`.
    pub sent_overhead: u64,
}

impl Mntr {
    pub fn new(servers: &str) -> Mntr {
        let hosts_part = servers.split('/').next().unwrap_or(servers);
        let hosts = hosts_part
            .split(',')
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .collect();
        let mut m = Mntr {
            hosts,
            overhead: 0,
            sent_overhead: 0,
        };
        // Consecutive reads with nothing in between: what the reads cost.
        let first = m.received_and_sent();
        let mut last = first;
        const READS: u64 = 5;
        for _ in 0..READS {
            last = m.received_and_sent();
        }
        m.overhead = (last.0 - first.0) / READS;
        m.sent_overhead = (last.1 - first.1) / READS;
        m
    }

    pub fn read(&self) -> Vec<HashMap<String, String>> {
        self.hosts
            .iter()
            .map(|h| {
                four_letter(h, "mntr")
                    .map(|r| parse_mntr(&r))
                    .unwrap_or_else(|e| {
                        panic!(
                            "mntr on {h}: {e} (requests are counted from `mntr`: the servers \
                             must allow it, 4lw.commands.whitelist; or unset ZK_SERVERS to use \
                             a local server)"
                        )
                    })
            })
            .collect()
    }

    pub fn sum(&self, key: &str) -> u64 {
        self.read()
            .iter()
            .map(|m| m.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
            .sum()
    }

    pub fn packets(&self) -> u64 {
        self.sum("zk_packets_received")
    }

    /// `(zk_packets_received, zk_packets_sent)` from one read.
    pub fn received_and_sent(&self) -> (u64, u64) {
        let maps = self.read();
        let get = |key: &str| -> u64 {
            maps.iter()
                .map(|x| x.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
                .sum()
        };
        (get("zk_packets_received"), get("zk_packets_sent"))
    }

    /// Every path with a watch on any of the servers (`wchp`: a path line, then
    /// its sessions indented).
    pub fn watched_paths(&self) -> HashSet<String> {
        self.hosts
            .iter()
            .flat_map(|h| {
                let reply = four_letter(h, "wchp")
                    .unwrap_or_else(|e| panic!("wchp on {h}: {e} (the servers must allow it)"));
                reply
                    .lines()
                    .filter(|l| l.starts_with('/'))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// A window of server requests: packets received between `start` and `stop`,
/// minus one `mntr` read's cost, with the pings that may have fallen inside.
pub struct Requests {
    pub before: u64,
    pub started: Instant,
}

pub struct Counted {
    pub requests: u64,
    /// Most pings the window may include (already inside `requests`).
    pub ping_allowance: u64,
    pub outstanding: u64,
    pub connections: u64,
}

impl Requests {
    pub fn start(m: &Mntr) -> Requests {
        Requests {
            before: m.packets(),
            started: Instant::now(),
        }
    }

    pub fn stop(self, m: &Mntr) -> Counted {
        let elapsed = self.started.elapsed();
        let maps = m.read();
        let get = |key: &str| -> u64 {
            maps.iter()
                .map(|x| x.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
                .sum()
        };
        let after = get("zk_packets_received");
        let connections = get("zk_num_alive_connections");
        Counted {
            requests: after.saturating_sub(self.before + m.overhead),
            ping_allowance: pings_in(elapsed, connections),
            outstanding: get("zk_outstanding_requests"),
            connections,
        }
    }
}

/// A window of server traffic both ways: packets received and sent between
/// `start` and `stop`, minus one `mntr` read's cost each way. Every request and
/// ping is answered once, so sent − received counts the notifications.
pub struct Window {
    pub before: (u64, u64),
    pub started: Instant,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Traffic {
    /// Requests, pings included (`zk_packets_received`).
    pub received: u64,
    /// Replies and notifications (`zk_packets_sent`).
    pub sent: u64,
    /// Most pings the window may include (already inside `received`).
    pub ping_allowance: u64,
    pub elapsed: Duration,
}

impl Traffic {
    pub fn notifications(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    pub fn add(&mut self, other: &Traffic) {
        self.received += other.received;
        self.sent += other.sent;
        self.ping_allowance += other.ping_allowance;
        self.elapsed += other.elapsed;
    }
}

impl Window {
    pub fn start(m: &Mntr) -> Window {
        Window {
            before: m.received_and_sent(),
            started: Instant::now(),
        }
    }

    pub fn stop(self, m: &Mntr) -> Traffic {
        let elapsed = self.started.elapsed();
        let (received, sent) = m.received_and_sent();
        Traffic {
            received: received.saturating_sub(self.before.0 + m.overhead),
            sent: sent.saturating_sub(self.before.1 + m.sent_overhead),
            ping_allowance: ping_allowance(elapsed, m),
            elapsed,
        }
    }
}

/// Most pings `connections` sessions may send in `elapsed`: each pings at least
/// every sixth of its timeout, whatever the traffic (the client times its pings:
/// see `zklock::client`).
pub fn pings_in(elapsed: Duration, connections: u64) -> u64 {
    let interval = SESSION_TIMEOUT.as_secs_f64() / 6.0;
    (elapsed.as_secs_f64() / interval).ceil() as u64 * connections
}

/// [`pings_in`] for the servers' current connections.
pub fn ping_allowance(elapsed: Duration, m: &Mntr) -> u64 {
    pings_in(elapsed, m.sum("zk_num_alive_connections"))
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub fn us(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1000.0
}

pub fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Rounds per implementation of a side-by-side bench: `ZK_BENCH_ROUNDS`
/// (lower it while developing), else `default`; at least 1.
pub fn bench_rounds(default: usize) -> usize {
    env_usize("ZK_BENCH_ROUNDS", default).max(1)
}

/// A figure over rounds: its median and its range.
#[derive(Clone, Copy, Debug)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Spread {
            median: median_f64(values.to_vec()),
            min,
            max,
        })
    }

    /// "median (min–max)", with `digits` decimals.
    pub fn text(&self, digits: usize) -> String {
        format!(
            "{:.d$} ({:.d$}–{:.d$})",
            self.median,
            self.min,
            self.max,
            d = digits
        )
    }
}

pub fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// Virtual size: what the thread stacks reserve (resident or not).
pub fn vm_kib() -> u64 {
    status_kib("VmSize:")
}

pub fn status_kib(field: &str) -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

pub fn threads() -> usize {
    fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// CPU time this process's live threads have used so far, in nanoseconds from
/// `/proc/self/task/*/schedstat`; only threads whose name starts with `prefix`
/// (`""`: all). Exact where [`cpu_time`] counts 10 ms ticks, but a thread that
/// ended is no longer counted: for spans in which no thread ends.
pub fn threads_cpu(prefix: &str) -> Duration {
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let mut ns = 0u64;
    for task in tasks.flatten() {
        let dir = task.path();
        let name = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !name.trim_end().starts_with(prefix) {
            continue;
        }
        let stat = fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
        ns += stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(ns)
}

/// CPU time the live threads of process `pid` (`None`: this process) have
/// used so far, in nanoseconds from `/proc/<pid>/task/*/schedstat`: as exact
/// as [`threads_cpu`], for spans in which none of its threads ends.
pub fn process_threads_cpu(pid: Option<u32>) -> Duration {
    let dir = pid.map_or_else(
        || "/proc/self/task".to_string(),
        |p| format!("/proc/{p}/task"),
    );
    let Ok(tasks) = fs::read_dir(dir) else {
        return Duration::ZERO;
    };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|task| {
            fs::read_to_string(task.path().join("schedstat"))
                .ok()?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    Duration::from_nanos(ns)
}

/// CPU time (user + system, all threads) a process has used so far, from
/// `/proc/<pid>/stat` (`None`: this process); zero where unreadable. Clock ticks
/// are taken as Linux's USER_HZ, 100 a second (10 ms resolution).
pub fn cpu_time(pid: Option<u32>) -> Duration {
    let path = pid.map_or_else(
        || "/proc/self/stat".to_string(),
        |p| format!("/proc/{p}/stat"),
    );
    let stat = fs::read_to_string(path).unwrap_or_default();
    // "pid (comm) state ...": utime and stime are the 12th and 13th fields after
    // the command's closing parenthesis.
    let Some(i) = stat.rfind(')') else {
        return Duration::ZERO;
    };
    let f: Vec<&str> = stat[i + 1..].split_whitespace().collect();
    let ticks = |k: usize| f.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// The current time as `YYYY-MM-DD HH:MM UTC` (no date crate for one line).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// The kernel release (`uname -r`).
pub fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

// ---------------------------------------------------------------------------
// The Java side of the comparisons
// ---------------------------------------------------------------------------

/// Curator 5.4 and ZooKeeper 3.8 from Debian's packages (`make curator`):
/// what the Java sides of the comparisons compile and run against.
pub const CURATOR_JARS: [&str; 8] = [
    "/usr/share/java/curator-recipes.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-client.jar",
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/guava.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];

/// A bench's Java classes, compiled into a temp directory (removed on drop),
/// with the jars they run against.
pub struct JavaClasses {
    pub dir: ScratchDir,
    pub jars: Vec<String>,
}

impl JavaClasses {
    /// The runtime classpath: the classes, then the jars.
    pub fn classpath(&self) -> String {
        std::iter::once(self.dir.display().to_string())
            .chain(self.jars.iter().cloned())
            .collect::<Vec<_>>()
            .join(":")
    }

    /// `java [jvm_options] -cp <classpath> main` (the JVM of `$JAVA_HOME` if set).
    pub fn java(&self, jvm_options: &[&str], main: &str) -> Command {
        let java = match env::var_os("JAVA_HOME") {
            Some(home) if !home.is_empty() => Path::new(&home).join("bin").join("java"),
            _ => PathBuf::from("java"),
        };
        let mut c = Command::new(java);
        c.args(jvm_options)
            .arg("-cp")
            .arg(self.classpath())
            .arg(main);
        c
    }
}

/// Compiles `sources` (paths relative to the crate root) with `javac` against
/// `jars` into a fresh temp directory. `Err` says why (a missing jar, no JDK,
/// a compile error) for the bench to print as a note and skip its Java side.
pub fn compile_java(name: &str, sources: &[&str], jars: &[&str]) -> Result<JavaClasses, String> {
    if let Some(missing) = jars.iter().find(|j| !Path::new(j).exists()) {
        return Err(format!("{missing} not found"));
    }
    let dir = ScratchDir::new(&format!("bench-{name}")).map_err(|e| e.to_string())?;
    // Made now, so that an early return removes the directory.
    let classes = JavaClasses {
        dir,
        jars: jars.iter().map(|j| j.to_string()).collect(),
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // -implicit:none: no class files for what the jars' sources would bring in.
    let status = Command::new("javac")
        .args(["-nowarn", "-proc:none", "-implicit:none", "-d"])
        .arg(classes.dir.path())
        .arg("-cp")
        .arg(jars.join(":"))
        .args(sources.iter().map(|s| root.join(s)))
        .status();
    match status {
        Ok(s) if s.success() => Ok(classes),
        Ok(s) => Err(format!("javac failed: {s}")),
        Err(e) => Err(format!("cannot run javac: {e}")),
    }
}

/// A child process spoken to a line at a time: commands on its stdin, answers
/// read from its stdout by a thread (so that a wait can time out). Dropping it
/// closes its stdin (the bench's children then end by themselves), waits a
/// little, and kills it if it is still there.
pub struct LineProcess {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl LineProcess {
    /// Spawns `command` with piped stdin and stdout (stderr inherited).
    pub fn spawn(name: &str, mut command: Command) -> io::Result<LineProcess> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        thread::Builder::new()
            .name(format!("{name}-stdout"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    match line {
                        Ok(l) => {
                            if tx.send(l).is_err() {
                                break;
                            }
                        }
                        Err(_) => break,
                    }
                }
            })?;
        Ok(LineProcess {
            name: name.to_string(),
            child,
            stdin,
            lines,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, line: &str) -> Result<(), String> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| format!("{}: stdin closed", self.name))?;
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("{}: cannot write: {e}", self.name))
    }

    /// The next line, waiting at most `timeout`.
    pub fn recv(&self, timeout: Duration) -> Result<String, String> {
        match self.lines.recv_timeout(timeout) {
            Ok(l) => Ok(l),
            Err(RecvTimeoutError::Timeout) => {
                Err(format!("{}: no answer within {timeout:?}", self.name))
            }
            Err(RecvTimeoutError::Disconnected) => Err(format!("{}: ended", self.name)),
        }
    }

    /// `send` then `recv`.
    pub fn ask(&mut self, line: &str, timeout: Duration) -> Result<String, String> {
        self.send(line)?;
        self.recv(timeout)
    }

    /// Closes stdin and waits up to `timeout` for the process to end; kills it
    /// after that.
    pub fn finish(&mut self, timeout: Duration) -> io::Result<ExitStatus> {
        self.stdin = None;
        let end = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= end {
                let _ = self.child.kill();
                return self.child.wait();
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for LineProcess {
    fn drop(&mut self) {
        let _ = self.finish(Duration::from_secs(10));
    }
}

/// `key value key value ...` after a leading word (`ok`, `done`, ...) as numbers.
pub fn parse_fields(line: &str) -> HashMap<String, f64> {
    let words: Vec<&str> = line.split_whitespace().skip(1).collect();
    words
        .chunks(2)
        .filter_map(|kv| match kv {
            [k, v] => v.parse().ok().map(|v| (k.to_string(), v)),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------
// zklock's two-party hand-off (the lock and compare benches)
// ---------------------------------------------------------------------------

/// The most a hand-off thread waits for word from the other.
const HANDOFF_BOUND: Duration = Duration::from_secs(30);

/// What the two hand-off threads tell each other.
pub enum Turn {
    /// My watch on your node is set: release.
    Queued,
    /// I am done: release the last time.
    Done,
}

/// Two write-lock instances (two threads, one session) pass the lock back and
/// forth `k` times each; each holder releases only once the other's watch on
/// its node is set (the lock's step hook says so), so every grant but the
/// first is a queued hand-off. Returns the hand-offs (2k − 1) and their time.
/// Outside the hand-offs: the first grant's create + getChildren and the last
/// release's delete (3 requests).
pub fn handoff_rounds(zkw: &ZooKeeperWatcher, znode: &str, k: usize) -> (u64, Duration) {
    handoff_rounds_with(zkw, znode, k, |lock| lock)
}

/// [`handoff_rounds`] with both instances passed through `configure` (a
/// testing knob, e.g. `with_listing_after_wake`).
pub fn handoff_rounds_with(
    zkw: &ZooKeeperWatcher,
    znode: &str,
    k: usize,
    configure: impl Fn(ZkInterProcessWriteLock) -> ZkInterProcessWriteLock,
) -> (u64, Duration) {
    let (to_a, a_rx) = mpsc::channel::<Turn>();
    let (to_b, b_rx) = mpsc::channel::<Turn>();
    let make = |name: &str, tell_other: Sender<Turn>| {
        let tell = std::sync::Mutex::new(tell_other);
        configure(
            ZkInterProcessWriteLock::new(zkw, znode, name.as_bytes(), None)
                .expect("lock")
                .with_step_hook(move |step, _path| {
                    if step == LockStep::Watching {
                        let _ = tell.lock().unwrap().send(Turn::Queued);
                    }
                }),
        )
    };
    let a = make("a", to_b.clone());
    let b = make("b", to_a.clone());
    pass_back_and_forth(
        k,
        (a, a_rx, to_b),
        (b, b_rx, to_a),
        |l: &ZkInterProcessWriteLock| l.acquire().expect("hand-off acquire"),
        |l: &ZkInterProcessWriteLock| l.release().expect("hand-off release"),
    )
}

/// The two hand-off threads: each takes its turn `k` times, releasing once the
/// other says it is queued (or done).
fn pass_back_and_forth<P: Send + 'static>(
    k: usize,
    a: (P, Receiver<Turn>, Sender<Turn>),
    b: (P, Receiver<Turn>, Sender<Turn>),
    acquire: fn(&P),
    release: fn(&P),
) -> (u64, Duration) {
    let barrier = Arc::new(Barrier::new(3));
    let run = |(party, rx, other): (P, Receiver<Turn>, Sender<Turn>)| {
        let barrier = barrier.clone();
        thread::spawn(move || {
            barrier.wait();
            let mut other_done = false;
            for _ in 0..k {
                acquire(&party);
                if !other_done {
                    match rx.recv_timeout(HANDOFF_BOUND) {
                        Ok(Turn::Queued) => {}
                        Ok(Turn::Done) => other_done = true,
                        Err(e) => panic!("hand-off: no word from the other thread: {e}"),
                    }
                }
                release(&party);
            }
            let _ = other.send(Turn::Done);
        })
    };
    let ta = run(a);
    let tb = run(b);
    barrier.wait();
    let started = Instant::now();
    ta.join().expect("hand-off thread");
    tb.join().expect("hand-off thread");
    (2 * k as u64 - 1, started.elapsed())
}

/// One side of the raw client's hand-off ([`raw_handoff_rounds`]).
struct RawParty {
    zk: ZooKeeper,
    znode: String,
    tell_other: Sender<Turn>,
    node: std::sync::Mutex<Option<String>>,
}

/// The sequence number of a `write-` child.
fn raw_sequence(child: &str) -> u64 {
    child[child.len() - 10..]
        .parse()
        .expect("a sequential child")
}

impl RawParty {
    /// The lock's requests with no lock logic: create and list together, a
    /// `get_data` watch on the predecessor whose event sends the listing at
    /// once from the event thread (the fastest the client allows), the waiting
    /// thread woken by its answer.
    fn acquire(&self) {
        let (tx, rx) = mpsc::channel();
        self.zk.create_async(
            &format!("{}/write-", self.znode),
            b"raw",
            Acl::open_unsafe(),
            CreateMode::EphemeralSequential,
            move |r| {
                let _ = tx.send(r);
            },
        );
        let mut children = self.zk.get_children(&self.znode, false).expect("raw list");
        let (node, _) = rx
            .recv_timeout(HANDOFF_BOUND)
            .expect("raw create answered")
            .expect("raw create");
        let mine = raw_sequence(&node);
        loop {
            let before = children
                .iter()
                .filter(|c| raw_sequence(c) < mine)
                .max_by_key(|c| raw_sequence(c));
            let Some(before) = before else {
                *self.node.lock().unwrap() = Some(node);
                return;
            };
            let (ltx, lrx) = mpsc::channel();
            let zk = std::sync::Mutex::new(Some(self.zk.clone()));
            let znode = self.znode.clone();
            let watcher: Arc<dyn Watcher> = Arc::new(move |_e: WatchedEvent| {
                // Taken: no client handle left in the client's watch table.
                if let Some(zk) = zk.lock().unwrap().take() {
                    let ltx = ltx.clone();
                    zk.get_children_async(&znode, None, move |r| {
                        let _ = ltx.send(r);
                    });
                }
            });
            match self
                .zk
                .get_data_watch(&format!("{}/{before}", self.znode), watcher)
            {
                Ok(_) => {}
                Err(e) if e.is(ZkError::NoNode) => {
                    children = self.zk.get_children(&self.znode, false).expect("raw list");
                    continue;
                }
                Err(e) => panic!("raw get_data watch: {e}"),
            }
            let _ = self.tell_other.send(Turn::Queued);
            children = lrx
                .recv_timeout(HANDOFF_BOUND)
                .expect("raw listing after the event")
                .expect("raw list");
        }
    }

    fn release(&self) {
        let node = self.node.lock().unwrap().take().expect("held");
        self.zk.delete(&node, None).expect("raw delete");
    }
}

/// The hand-off's bound: [`handoff_rounds`]'s sequence of requests made with
/// the raw client on `zkw`'s session (create + list in one round trip, a
/// `get_data` watch on the predecessor, the holder's delete, the notification,
/// the listing sent from the event thread at once), no lock logic.
pub fn raw_handoff_rounds(zkw: &ZooKeeperWatcher, znode: &str, k: usize) -> (u64, Duration) {
    let (to_a, a_rx) = mpsc::channel::<Turn>();
    let (to_b, b_rx) = mpsc::channel::<Turn>();
    let make = |tell_other: Sender<Turn>| RawParty {
        zk: zkw.zookeeper().clone(),
        znode: znode.to_string(),
        tell_other,
        node: std::sync::Mutex::new(None),
    };
    let a = make(to_b.clone());
    let b = make(to_a.clone());
    pass_back_and_forth(
        k,
        (a, a_rx, to_b),
        (b, b_rx, to_a),
        RawParty::acquire,
        RawParty::release,
    )
}

/// The Python that runs the kazoo side of a comparison: `ZK_COMPARE_PYTHON`,
/// else `make kazoo`'s venv (`target/kazoo-venv`).
pub fn kazoo_python() -> PathBuf {
    match env::var_os("ZK_COMPARE_PYTHON") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/kazoo-venv/bin/python"),
    }
}

/// [`kazoo_python`] if it can import kazoo; otherwise `None`, with a note
/// that the kazoo side is skipped.
pub fn kazoo_python_if_installed() -> Option<PathBuf> {
    let p = kazoo_python();
    let ok = Command::new(&p)
        .args(["-c", "import kazoo"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!(
            "NOTE: kazoo skipped ({} cannot import kazoo); install it with `make kazoo`.",
            p.display()
        );
    }
    ok.then_some(p)
}
