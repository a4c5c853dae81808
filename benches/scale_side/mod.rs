//! The scale bench's side-by-side parts (issue 49): zklock, Apache Curator 5.4
//! (`benches/java/CuratorScaleBench.java`, one JVM per job) and kazoo
//! (`benches/python/kazoo_scale_bench.py`, one Python process per job, the
//! venv of `make kazoo`) doing the same work on the same server, one after the
//! other, in one run:
//!
//! Each implementation runs each job in a process of its own (zklock's: this
//! bench re-executed, [`zklock_job`]), so that the job's memory and threads
//! are read the same way for all three (`/proc/<pid>/status` between steps).
//!
//! 4. **sessions per process**: N sessions opened in one process (zklock: N
//!    `ZooKeeperWatcher`s; Curator: N `CuratorFramework`s;
//!    kazoo: N `KazooClient`s), each connected. Printed: the time to open them,
//!    the process's RSS and threads after, and per session (the growth from
//!    before the first / N).
//! 5. **held locks in one session**: one session takes N write locks, one on
//!    each of N lock znodes (made beforehand), one after the other from one
//!    thread (zklock's `ZkInterProcessWriteLock`, Curator's `InterProcessMutex`,
//!    kazoo's `Lock`), then releases them. Printed: acquire and release time
//!    per lock, requests per acquire and per release (`mntr`), RSS per held
//!    lock (the growth from the connected session to every lock held / N; a
//!    JVM's RSS counts the heap it touched, so its live heap per lock after a
//!    GC is printed beside it).
//! 6. **a lock directory with W waiters**: one session; a holder takes one
//!    lock znode, then W threads, each with its own lock instance on it, queue
//!    behind it, started 250 at a time (the next once these are queued: see
//!    [`QUEUE_BATCH`]); then the holder
//!    releases and each waiter, as it gets the lock, notes the instant and
//!    releases at once, for K grants (the others still waiting: each hand-off
//!    has about W − k waiters behind it; the hand-offs start once the server
//!    is quiet: every waiter's first listing and watch answered). Printed: the time to queue, RSS per
//!    waiter, the hand-off's p50, p99 and mean (from the previous grant's
//!    instant, the holder's release call for the first, to this grant's), and
//!    requests per hand-off from `mntr` over the K hand-offs, and the size of
//!    the directory's listing reply at the first hand-off (from its children's
//!    names: each implementation names its nodes its own way). Every one of the
//!    three lists the whole directory on each succession (zklock's lock on the
//!    watch's event, Curator's `getSortedChildren`, kazoo's
//!    `_get_sorted_children`): the reply's size grows with W, and so does the
//!    hand-off. Then the session is closed (every waiter's node goes with it).
//!
//! Requests are the server's `zk_packets_received` over the window (the
//! `mntr` reads' own packets taken off; pings of the bench's idle sessions
//! may fall inside: at most one per session per 10 s). Counts do not depend
//! on the machine's load; times do (the machine may be shared: the load
//! average is printed with each table).
#![allow(unreachable_pub)]

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{Acl, CreateMode};
use zklock::lock::{InterProcessLock, ZkInterProcessWriteLock};
use zklock::ZooKeeperWatcher;

use crate::common::{
    compile_java, connect, env_usize, loadavg, percentile, us, JavaClasses, LineProcess, Mntr,
    CURATOR_JARS,
};

const KAZOO_SCRIPT: &str = "benches/python/kazoo_scale_bench.py";
/// The most one step of an anchor's job may take.
const STEP_BOUND: Duration = Duration::from_secs(900);
const IMPLS: [&str; 3] = ["zklock", "Curator", "kazoo"];
/// Set in zklock's job process: the bench re-executed, its arguments the
/// job's (see [`zklock_job`]).
pub const JOB_ENV: &str = "ZKLOCK_SCALE_SIDE_JOB";
/// Waiters started at once in part 6: the next ones start once these are
/// queued (each waiter's first listing is of the whole directory, and the
/// server holds every reply of a burst at once: 10,000 at once overloaded it
/// on a 2-core machine, and sessions expired).
const QUEUE_BATCH: usize = 250;

/// Whether the bench runs short (`ZK_SCALE_SHORT=1`): every part's sizes
/// small, to smoke-run it.
pub fn short() -> bool {
    env::var("ZK_SCALE_SHORT").is_ok_and(|v| !v.is_empty() && v.trim() != "0")
}

/// A comma-separated list of numbers from `name`, else `full` (or `short`
/// when the bench runs short).
fn sizes(name: &str, full: &str, short_default: &str) -> Vec<usize> {
    let default = if short() { short_default } else { full };
    env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// The anchors that could be started: Curator's classes, kazoo's python.
pub struct Anchors {
    java: Option<JavaClasses>,
    python: Option<PathBuf>,
}

impl Anchors {
    /// Compiles the Java side and finds kazoo's python (`ZK_SCALE_IMPLS`,
    /// default `zklock,curator,kazoo`, says which run); a missing one is a
    /// printed note.
    pub fn find() -> Anchors {
        let wanted = env::var("ZK_SCALE_IMPLS").unwrap_or_else(|_| "zklock,curator,kazoo".into());
        let wants = |n: &str| wanted.split(',').any(|w| w.trim() == n);
        let java = if wants("curator") {
            match compile_java(
                "scale",
                &["benches/java/CuratorScaleBench.java"],
                &CURATOR_JARS,
            ) {
                Ok(c) => Some(c),
                Err(e) => {
                    println!("NOTE: Curator skipped ({e}); install it with `make curator`.");
                    None
                }
            }
        } else {
            None
        };
        let python = if wants("kazoo") {
            crate::common::kazoo_python_if_installed()
        } else {
            None
        };
        Anchors { java, python }
    }

    /// An anchor's job process (`imp` 1 Curator, 2 kazoo), once it said
    /// `base`; `None` when that anchor is not available.
    fn job(&self, imp: usize, servers: &str, args: &[String]) -> Option<Job> {
        let mut cmd = match imp {
            0 => {
                let exe = env::current_exe().expect("the bench's executable");
                let mut c = Command::new(exe);
                c.env(JOB_ENV, "1").arg(servers).args(args);
                c
            }
            1 => {
                let mut c = self
                    .java
                    .as_ref()?
                    .java(&["-Xss256k", "-XX:+UseSerialGC"], "CuratorScaleBench");
                c.arg(servers).args(args);
                c
            }
            _ => {
                let mut c = Command::new(self.python.as_ref()?);
                c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(KAZOO_SCRIPT))
                    .arg(servers)
                    .args(args);
                c
            }
        };
        cmd.env("PYTHONUNBUFFERED", "1");
        let proc = LineProcess::spawn(IMPLS[imp], cmd)
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", IMPLS[imp]));
        let job = Job { proc };
        let base = job.recv();
        assert!(base.starts_with("base"), "{}: {base}", IMPLS[imp]);
        Some(job)
    }
}

/// An anchor's job process.
struct Job {
    proc: LineProcess,
}

impl Job {
    fn recv(&self) -> String {
        let line = self
            .proc
            .recv(STEP_BOUND)
            .unwrap_or_else(|e| panic!("{}: {e}", self.proc.name));
        assert!(!line.starts_with("error"), "{}: {line}", self.proc.name);
        line
    }

    /// Sends `word`, returns the answer's fields.
    fn ask(&mut self, word: &str) -> std::collections::HashMap<String, f64> {
        self.proc
            .send(word)
            .unwrap_or_else(|e| panic!("{}: {e}", self.proc.name));
        crate::common::parse_fields(&self.recv())
    }

    fn status(&self) -> Status {
        Status::of(&format!("/proc/{}/status", self.proc.pid()))
    }

    fn finish(mut self) {
        let status = self.proc.finish(Duration::from_secs(60));
        assert!(
            status.as_ref().is_ok_and(|s| s.success()),
            "{}: {status:?}",
            self.proc.name
        );
    }
}

/// A process's RSS and threads.
#[derive(Clone, Copy, Debug, Default)]
struct Status {
    rss_kib: u64,
    threads: u64,
}

impl Status {
    fn of(file: &str) -> Status {
        let text = fs::read_to_string(file).unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        Status {
            rss_kib: field("VmRSS:"),
            threads: field("Threads:"),
        }
    }

    /// Bytes of RSS per item, from `self` to `after`.
    fn bytes_per(&self, after: &Status, n: usize) -> f64 {
        (after.rss_kib as f64 - self.rss_kib as f64) * 1024.0 / n.max(1) as f64
    }

    fn threads_per(&self, after: &Status, n: usize) -> f64 {
        (after.threads as f64 - self.threads as f64) / n.max(1) as f64
    }
}

fn fmt_bytes(b: f64) -> String {
    if b.abs() >= 10.0 * 1024.0 {
        format!("{:.0} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// Requests over a window (the `mntr` reads' own packets taken off).
fn requests(m: &Mntr, before: u64) -> u64 {
    m.packets().saturating_sub(before + m.overhead)
}

/// Waits until the server is quiet (at most 2 requests other than the `mntr`
/// reads in 300 ms, or 60 s passed): what a step before a window sent is
/// answered, so the window counts only its own requests.
fn settle(m: &Mntr) {
    let end = Instant::now() + Duration::from_secs(60);
    let mut last = m.packets();
    while Instant::now() < end {
        thread::sleep(Duration::from_millis(300));
        let now = m.packets();
        if now.saturating_sub(last + m.overhead) <= 2 {
            return;
        }
        last = now;
    }
}

/// The size of a getChildren reply listing `znode` now (ZooKeeper's
/// framing: length, xid, zxid, err, the vector's count, then each name with
/// its length): what each succession's listing of the directory costs on
/// the wire, whatever the load.
fn listing_bytes(admin: &ZooKeeperWatcher, znode: &str) -> usize {
    let children = admin
        .zookeeper()
        .get_children(znode, false)
        .unwrap_or_default();
    4 + 16 + 4 + children.iter().map(|c| 4 + c.len()).sum::<usize>()
}

/// Makes `root/h-0 .. root/h-(n-1)` (and `root`), pipelined.
fn make_lock_znodes(admin: &ZooKeeperWatcher, root: &str, n: usize) {
    let zk = admin.zookeeper();
    zk.create(root, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let (tx, rx) = mpsc::channel();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        zk.in_one_write(|| {
            for i in chunk {
                let tx = tx.clone();
                zk.create_async(
                    &format!("{root}/h-{i}"),
                    b"",
                    Acl::open_unsafe(),
                    CreateMode::Persistent,
                    move |r| {
                        let _ = tx.send(r.map(drop));
                    },
                );
            }
        });
        for _ in chunk {
            rx.recv_timeout(Duration::from_secs(60))
                .expect("a create's answer")
                .expect("create a lock znode");
        }
    }
}

/// Deletes `root` and everything under it, pipelined.
fn remove_tree(admin: &ZooKeeperWatcher, root: &str) {
    let zk = admin.zookeeper();
    let children = match zk.get_children(root, false) {
        Ok(c) => c,
        Err(_) => return,
    };
    for child in &children {
        let path = format!("{root}/{child}");
        if let Ok(grand) = zk.get_children(&path, false) {
            for g in grand {
                let _ = zk.delete(&format!("{path}/{g}"), None);
            }
        }
    }
    let (tx, rx) = mpsc::channel();
    for chunk in children.chunks(500) {
        zk.in_one_write(|| {
            for child in chunk {
                let tx = tx.clone();
                zk.delete_async(&format!("{root}/{child}"), None, move |r| {
                    let _ = tx.send(r);
                });
            }
        });
        for _ in chunk {
            let _ = rx.recv_timeout(Duration::from_secs(60));
        }
    }
    let _ = zk.delete(root, None);
}

// ---------------------------------------------------------------------------
// 4. Sessions per process
// ---------------------------------------------------------------------------

struct SessionsRow {
    imp: usize,
    n: usize,
    open_ms: f64,
    before: Status,
    after: Status,
}

fn sessions_anchor(a: &Anchors, imp: usize, servers: &str, n: usize) -> Option<SessionsRow> {
    let mut job = a.job(imp, servers, &["sessions".into(), n.to_string()])?;
    let before = job.status();
    let ok = job.ask("go");
    thread::sleep(Duration::from_millis(200));
    let after = job.status();
    job.ask("close");
    job.finish();
    Some(SessionsRow {
        imp,
        n,
        open_ms: ok.get("ms").copied().unwrap_or(f64::NAN),
        before,
        after,
    })
}

/// Part 4; returns its table's rows.
pub fn sessions(a: &Anchors, servers: &str) -> Vec<String> {
    let list = sizes("ZK_SCALE_SESSIONS", "100,1000", "10,50");
    let mut rows = Vec::new();
    for &n in &list {
        for imp in 0..3 {
            let row = sessions_anchor(a, imp, servers, n);
            let Some(r) = row else { continue };
            let line = format!(
                "| {} sessions | {} | {:.0} ms | {} | {:.1} | {} MiB | {} | {} |",
                r.n,
                IMPLS[r.imp],
                r.open_ms,
                fmt_bytes(r.before.bytes_per(&r.after, r.n)),
                r.before.threads_per(&r.after, r.n),
                r.after.rss_kib / 1024,
                r.after.threads,
                loadavg()
            );
            println!("{line}");
            rows.push(line);
        }
    }
    rows
}

pub const SESSIONS_HEADER: &str = "| sessions in one process | implementation | time to open | RSS per session | threads per session | process RSS | process threads | load average |\n|---|---|---|---|---|---|---|---|";

// ---------------------------------------------------------------------------
// 5. Held locks in one session
// ---------------------------------------------------------------------------

struct HeldRow {
    imp: usize,
    n: usize,
    acquire_ms: f64,
    release_ms: f64,
    acquire_requests: u64,
    release_requests: u64,
    before: Status,
    after: Status,
    /// The JVM's live heap growth per lock (after a GC), Curator only.
    heap_per_lock: Option<f64>,
}

fn held_anchor(
    a: &Anchors,
    m: &Mntr,
    imp: usize,
    servers: &str,
    root: &str,
    n: usize,
) -> Option<HeldRow> {
    let mut job = a.job(imp, servers, &["held".into(), n.to_string(), root.into()])?;
    let connected = job.ask("go");
    settle(m);
    let before = job.status();
    let packets = m.packets();
    let ok = job.ask("acquire");
    let acquire_requests = requests(m, packets);
    let after = job.status();
    let packets = m.packets();
    let released = job.ask("release");
    let release_requests = requests(m, packets);
    job.finish();
    let heap = |f: &std::collections::HashMap<String, f64>| f.get("heap_kib").copied();
    let heap_per_lock = match (heap(&connected), heap(&ok)) {
        (Some(b), Some(a)) => Some((a - b) * 1024.0 / n as f64),
        _ => None,
    };
    Some(HeldRow {
        imp,
        n,
        acquire_ms: ok.get("ms").copied().unwrap_or(f64::NAN),
        release_ms: released.get("ms").copied().unwrap_or(f64::NAN),
        acquire_requests,
        release_requests,
        before,
        after,
        heap_per_lock,
    })
}

/// Part 5; returns its table's rows.
#[allow(clippy::needless_range_loop)]
pub fn held(
    a: &Anchors,
    m: &Mntr,
    admin: &ZooKeeperWatcher,
    servers: &str,
    root: &str,
) -> Vec<String> {
    let list = sizes("ZK_SCALE_HELD", "10000", "300");
    let mut rows = Vec::new();
    for &n in &list {
        for imp in 0..3 {
            let dir = format!("{root}/held-{}-{n}", IMPLS[imp].to_lowercase());
            if a.job_missing(imp) {
                continue;
            }
            make_lock_znodes(admin, &dir, n);
            let row = held_anchor(a, m, imp, servers, &dir, n);
            remove_tree(admin, &dir);
            let Some(r) = row else { continue };
            let line = format!(
                "| {} held locks, one session | {} | {:.0} µs | {:.2} | {:.0} µs | {:.2} | {}{} | {} MiB | {} |",
                r.n,
                IMPLS[r.imp],
                r.acquire_ms * 1e3 / r.n as f64,
                r.acquire_requests as f64 / r.n as f64,
                r.release_ms * 1e3 / r.n as f64,
                r.release_requests as f64 / r.n as f64,
                fmt_bytes(r.before.bytes_per(&r.after, r.n)),
                r.heap_per_lock
                    .map(|h| format!(" (live heap {})", fmt_bytes(h)))
                    .unwrap_or_default(),
                r.after.rss_kib / 1024,
                loadavg()
            );
            println!("{line}");
            rows.push(line);
        }
    }
    rows
}

pub const HELD_HEADER: &str = "| held locks | implementation | acquire per lock | requests per acquire | release per lock | requests per release | RSS per held lock | process RSS | load average |\n|---|---|---|---|---|---|---|---|---|";

// ---------------------------------------------------------------------------
// 6. A lock directory with W waiters
// ---------------------------------------------------------------------------

struct DirectoryRow {
    imp: usize,
    waiters: usize,
    handoffs: usize,
    queued_ms: f64,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
    requests: u64,
    /// The listing's reply at the first hand-off, bytes.
    listing: usize,
    before: Status,
    after: Status,
}

#[allow(clippy::too_many_arguments)]
fn directory_anchor(
    a: &Anchors,
    m: &Mntr,
    admin: &ZooKeeperWatcher,
    imp: usize,
    servers: &str,
    znode: &str,
    w: usize,
    k: usize,
) -> Option<DirectoryRow> {
    let mut job = a.job(
        imp,
        servers,
        &[
            "directory".into(),
            w.to_string(),
            k.to_string(),
            znode.into(),
        ],
    )?;
    job.ask("go");
    let before = job.status();
    let queued = job.ask("queue");
    let listing = listing_bytes(admin, znode);
    settle(m);
    let after = job.status();
    let packets = m.packets();
    let done = job.ask("run");
    let requests = requests(m, packets);
    job.proc.send("exit").expect("exit");
    job.finish();
    let f = |key: &str| done.get(key).copied().unwrap_or(f64::NAN);
    Some(DirectoryRow {
        imp,
        waiters: w,
        handoffs: k,
        queued_ms: queued.get("ms").copied().unwrap_or(f64::NAN),
        p50_us: f("p50_us"),
        p99_us: f("p99_us"),
        mean_us: f("mean_us"),
        requests,
        listing,
        before,
        after,
    })
}

/// Part 6; returns its table's rows.
#[allow(clippy::needless_range_loop)]
pub fn directory(
    a: &Anchors,
    m: &Mntr,
    admin: &ZooKeeperWatcher,
    servers: &str,
    root: &str,
) -> Vec<String> {
    let list = sizes("ZK_SCALE_DIRECTORY", "1000,10000", "50,200");
    let k = env_usize("ZK_SCALE_HANDOFFS", if short() { 20 } else { 200 }).max(1);
    let mut rows = Vec::new();
    for &w in &list {
        let k = k.min(w);
        for imp in 0..3 {
            if a.job_missing(imp) {
                continue;
            }
            let znode = format!("{root}/dir-{}-{w}", IMPLS[imp].to_lowercase());
            admin
                .zookeeper()
                .create(&znode, b"", Acl::open_unsafe(), CreateMode::Persistent)
                .unwrap();
            let row = directory_anchor(a, m, admin, imp, servers, &znode, w, k);
            if let Some(r) = &row {
                println!("{}", directory_line(r));
            }
            // The closed session's nodes go with it.
            let rzk = admin.recoverable_zookeeper();
            let gone = Instant::now();
            while rzk.get_children(&znode, false).map_or(1, |c| c.len()) > 0 {
                assert!(
                    gone.elapsed() < Duration::from_secs(300),
                    "{znode} not emptied"
                );
                thread::sleep(Duration::from_millis(100));
            }
            rzk.delete(&znode, None).expect("delete the lock znode");
            let Some(r) = row else { continue };
            rows.push(directory_line(&r));
        }
    }
    rows
}

fn directory_line(r: &DirectoryRow) -> String {
    format!(
        "| {} waiters on one lock, {} hand-offs | {} | {:.1} s | {} | {:.0} µs | {:.0} µs | {:.0} µs | {:.2} | {} | {} |",
        r.waiters,
        r.handoffs,
        IMPLS[r.imp],
        r.queued_ms / 1e3,
        fmt_bytes(r.before.bytes_per(&r.after, r.waiters)),
        r.p50_us,
        r.p99_us,
        r.mean_us,
        r.requests as f64 / r.handoffs as f64,
        fmt_bytes(r.listing as f64),
        loadavg()
    )
}

pub const DIRECTORY_HEADER: &str = "| lock directory | implementation | time to queue | RSS per waiter | hand-off p50 | p99 | mean | requests per hand-off | listing reply per hand-off | load average |\n|---|---|---|---|---|---|---|---|---|---|";

impl Anchors {
    /// Whether the anchor `imp` (1 Curator, 2 kazoo) is unavailable.
    fn job_missing(&self, imp: usize) -> bool {
        match imp {
            0 => false,
            1 => self.java.is_none(),
            _ => self.python.is_none(),
        }
    }
}

// ---------------------------------------------------------------------------
// zklock's job process: the protocol of benches/java/CuratorScaleBench.java
// ---------------------------------------------------------------------------

fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn expect(word: &str) {
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    assert_eq!(line.trim(), word, "expected {word}");
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// zklock's side of parts 4–6, in a process of its own (the bench
/// re-executed with [`JOB_ENV`] set), so that its memory and threads are
/// measured as the anchors' are: `<servers> sessions <n>`, `<servers> held
/// <n> <root>`, `<servers> directory <waiters> <handoffs> <znode>`, spoken as
/// `CuratorScaleBench.java` describes (the same lines, in the same order).
/// zklock's objects: `ZooKeeperWatcher` sessions, `ZkInterProcessWriteLock`s.
pub fn zklock_job() {
    let args: Vec<String> = env::args().skip(1).collect();
    let servers = args[0].as_str();
    let num = |i: usize| -> usize { args[i].parse().expect("a number") };
    say("base");
    expect("go");
    match args[1].as_str() {
        "sessions" => {
            let n = num(2);
            let t = Instant::now();
            let sessions: Vec<ZooKeeperWatcher> = (0..n)
                .map(|i| connect(servers, &format!("scale-session-{i}")))
                .collect();
            say(&format!("ok ms {:.1}", ms_since(t)));
            expect("close");
            let t = Instant::now();
            for s in sessions {
                s.close().expect("close a session");
            }
            say(&format!("closed ms {:.1}", ms_since(t)));
        }
        "held" => {
            let (n, root) = (num(2), args[3].as_str());
            let zkw = connect(servers, "scale-held");
            say("connected");
            expect("acquire");
            let mut locks = Vec::with_capacity(n);
            let t = Instant::now();
            for i in 0..n {
                let lock =
                    ZkInterProcessWriteLock::new(&zkw, &format!("{root}/h-{i}"), b"held", None)
                        .expect("a lock");
                lock.acquire().expect("acquire a held lock");
                locks.push(lock);
            }
            say(&format!("ok ms {:.1}", ms_since(t)));
            expect("release");
            let t = Instant::now();
            for lock in &locks {
                lock.release().expect("release a held lock");
            }
            say(&format!("released ms {:.1}", ms_since(t)));
            drop(locks);
            zkw.close().expect("close");
        }
        "directory" => directory_job(servers, num(2), num(3), &args[4]),
        other => panic!("unknown job {other}"),
    }
}

fn directory_job(servers: &str, w: usize, k: usize, znode: &str) {
    let zkw = connect(servers, "scale-directory");
    say("connected");
    expect("queue");
    let holder = ZkInterProcessWriteLock::new(&zkw, znode, b"holder", None).expect("a lock");
    holder.acquire().expect("the holder's acquire");
    let at: Arc<Mutex<Vec<Instant>>> = Arc::new(Mutex::new(Vec::with_capacity(k + 1)));
    let granted = Arc::new(AtomicUsize::new(0));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let stack = env_usize("ZK_BENCH_WAITER_STACK_KIB", 128) * 1024;
    let t = Instant::now();
    let mut threads = Vec::with_capacity(w);
    let mut cancellers = Vec::with_capacity(w);
    for i in 0..w {
        let lock = ZkInterProcessWriteLock::new(&zkw, znode, b"waiter", None).expect("a lock");
        cancellers.push(lock.canceller());
        let (at, granted, done_tx) = (at.clone(), granted.clone(), done_tx.clone());
        threads.push(
            thread::Builder::new()
                .name(format!("dir-waiter-{i}"))
                .stack_size(stack)
                .spawn(move || {
                    // Err: the session closed at the end.
                    if lock.acquire().is_err() {
                        return;
                    }
                    let now = Instant::now();
                    let n = granted.fetch_add(1, Ordering::SeqCst) + 1;
                    if n <= k {
                        at.lock().unwrap().push(now);
                    }
                    if n < k {
                        lock.release().expect("a waiter's release");
                    } else if n == k {
                        let _ = done_tx.send(());
                    }
                })
                .expect("spawn a waiter"),
        );
        if (i + 1) % QUEUE_BATCH == 0 || i + 1 == w {
            let zk = zkw.zookeeper();
            while zk.get_children(znode, false).map_or(0, |c| c.len()) < i + 2 {
                thread::sleep(Duration::from_millis(20));
            }
        }
    }
    say(&format!("queued ms {:.1}", ms_since(t)));
    expect("run");
    let start = Instant::now();
    at.lock().unwrap().push(start);
    holder.release().expect("the holder's release");
    done_rx
        .recv_timeout(STEP_BOUND)
        .expect("every hand-off within the bound");
    let total = ms_since(start);
    let at = at.lock().unwrap().clone();
    let mut d: Vec<Duration> = at.windows(2).map(|p| p[1] - p[0]).collect();
    let mean = d.iter().map(|x| us(*x)).sum::<f64>() / d.len().max(1) as f64;
    d.sort();
    say(&format!(
        "done handoffs {k} p50_us {:.1} p99_us {:.1} mean_us {mean:.1} total_ms {total:.1}",
        us(percentile(&d, 0.5)),
        us(percentile(&d, 0.99)),
    ));
    expect("exit");
    // The waiters withdraw newest first: a deletion then wakes nobody (its
    // successor is gone already), where closing the session with them queued
    // would fire every watch of the chain at once, each waking a listing of
    // the whole directory.
    for (c, t) in cancellers.iter().zip(threads).rev() {
        c.cancel();
        t.join().expect("a waiter thread");
    }
    if let Err(e) = zkw.close() {
        eprintln!("note: zklock's directory job: close: {e}");
    }
}
