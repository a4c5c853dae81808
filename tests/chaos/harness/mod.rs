//! A chaos suite for the locks, in the spirit of Jepsen's ZooKeeper checks:
//! test code (shared by `tests/chaos.rs` and the `zklock-chaos-worker`
//! binary), built on the `testing` feature's harness; not part of the crate.
//!
//! [`run`] starts a three-server [`ZkEnsemble`] and a number
//! of worker **processes** (the `zklock-chaos-worker` binary, see
//! [`worker_main`]). Each worker has one session and several threads; it talks
//! to every ensemble member through [`FaultProxy`]s of its own, which live in
//! the controlling process. Workers take random read and write locks on a few
//! lock znodes (blocking `acquire`, `try_acquire(t)` with `t` from 0 to 1.5 s)
//! and, while holding a write lock, do a **fenced write** to the resource the
//! lock guards: `multi[check(own lock node, its version), set_data(resource,
//! expected version)]`, incrementing a counter (readers only read). Every step
//! is an [`Event`] line on the worker's stdout, stamped with wall-clock
//! microseconds (one host: the stamps of all processes compare).
//!
//! A nemesis injects faults on a seeded schedule ([`Fault`]): kill -9 and restart
//! of members (the leader too), SIGSTOP of a member, a worker's proxies stalled
//! for less and for more than the session timeout, a one-way stall, cuts and
//! resets, SIGSTOP of a worker longer than its session (a GC pause), kill -9 of
//! a worker holding a lock, expiry forced by a second handle with the
//! worker's session id and password, and the ensemble changed by `reconfig`
//! (a member removed and stopped, a new one added: [`Fault::Reconfig`]).
//! Then a calm phase, a clean stop, and the [`check`]er: see there for the
//! checks.
//!
//! The same run exercises the recipes ([`ChaosConfig::recipe`]):
//! [`Recipe::Election`] makes every worker thread a candidate of one
//! [`LeaderElectionSupport`](zklock::recipes::election::LeaderElectionSupport)
//! election whose leader does the fenced writes with its offer as the fence
//! and stops after a few (so leadership rotates); leadership is checked as a
//! write lock is: never two leaders unless the earlier was told `InDoubt` or
//! `Lost` first, every candidate leads again after the heal.
//! [`Recipe::Queue`] has even worker threads offer unique items to one
//! [`DistributedQueue`](zklock::recipes::queue::DistributedQueue) and odd ones
//! take them; the controller drains what is left at the end, and
//! [`check_queue`] proves every item taken exactly once and none lost.
//!
//! The broken worker mode ([`ChaosConfig::broken_worker`]) writes unfenced and
//! goes on writing after `Lost`: a run with it must fail the checks (the
//! checker's own test).

#![allow(dead_code, unreachable_pub, unused_imports)]

mod check;
mod event;
mod queue_check;
mod worker;

pub use check::{check, CheckConfig, Report};
pub use event::{now_us, Event, Rng, CONTROLLER};
pub use queue_check::check_queue;
pub use worker::worker_main;

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use worker::{lock_path, parse_resource, queue_path, resource_path};
use zklock::client::{Acl, ClientConfig, CreateMode, Reconfig, WatchedEvent, ZooKeeper};
use zklock::testing::{FaultProxy, ZkEnsemble, SUPER_AUTH};
use zklock::ZkError;

/// What a chaos run exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recipe {
    /// The read/write locks (the suite's first run).
    Locks,
    /// ZooKeeper's leader election: leaders do the fenced writes.
    Election,
    /// The distributed queue: unique items offered and taken.
    Queue,
}

impl Recipe {
    /// The name on the worker's command line.
    pub fn name(self) -> &'static str {
        match self {
            Recipe::Locks => "locks",
            Recipe::Election => "election",
            Recipe::Queue => "queue",
        }
    }

    /// The recipe named `name` ([`name`](Self::name)).
    pub fn from_name(name: &str) -> Option<Recipe> {
        [Recipe::Locks, Recipe::Election, Recipe::Queue]
            .into_iter()
            .find(|r| r.name() == name)
    }

    /// The event that shows a worker making progress (liveness).
    pub fn progress(self) -> &'static str {
        match self {
            Recipe::Locks | Recipe::Election => "granted",
            Recipe::Queue => "took",
        }
    }
}

/// A fault the nemesis can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// kill -9 of a random member, restarted 1–3 s later.
    KillMember,
    /// kill -9 of the leader, restarted 1–3 s later.
    KillLeader,
    /// SIGSTOP of a member (the leader half the time) for 0.5–2 session timeouts.
    PauseMember,
    /// A worker's proxies stalled for 0.3–0.9 session timeout, then passing.
    StallShort,
    /// A worker's proxies stalled for 1.3–2 session timeouts, then reset.
    StallLong,
    /// A worker's proxies hold client→server bytes for 0.5–1.5 session
    /// timeouts, then reset.
    StallUpstream,
    /// A worker's proxies stalled 0.2–0.8 s, then cut (held bytes dropped).
    Cut,
    /// A worker's connections reset.
    Reset,
    /// SIGSTOP of a worker for 1.3–2 session timeouts (a GC pause).
    PauseWorker,
    /// kill -9 of a worker (one holding a lock, if any within 3 s); restarted.
    KillWorker,
    /// A worker's session closed by a second handle with its id and password
    /// ([`close_session`](zklock::testing::close_session), confirmed by the server),
    /// the worker's proxies stalled meanwhile so that it cannot take the
    /// session back, then reset.
    Expire,
    /// The election run's: a leading worker's proxies stalled for 0.75–0.8
    /// session timeout (past the 2/3 at which its leadership is in doubt),
    /// then its offers deleted through the controller's own session and the
    /// proxies passing at once: a reconnect within the session with the offer
    /// gone, racing the next leader's turn.
    /// Not in [`Fault::ALL`] (no other run has offers).
    DeleteOffer,
    /// The ensemble changes by `reconfig`: a voting member (the leader half
    /// the time) is removed and then stopped, and a server is added, in
    /// three ways taken in turn: a new server (a new member id) added
    /// first (through four members), or after the removal (through two),
    /// or the removed one added back under its own id, with its data.
    /// The ensemble is then started reconfigurable
    /// ([`ZkEnsemble::start_reconfigurable`]) and every worker lists one
    /// more proxy than there are members: the workers' connect string names
    /// every place a member can be (as a deployment that names its members
    /// by stable DNS names lists them all), and the added member takes the
    /// free place (its name now points at it), the removed one's becomes
    /// free (its name points nowhere).
    Reconfig,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 12] = [
        Fault::KillMember,
        Fault::KillLeader,
        Fault::PauseMember,
        Fault::StallShort,
        Fault::StallLong,
        Fault::StallUpstream,
        Fault::Cut,
        Fault::Reset,
        Fault::PauseWorker,
        Fault::KillWorker,
        Fault::Expire,
        Fault::Reconfig,
    ];

    /// The name in events and reports.
    pub fn name(self) -> &'static str {
        match self {
            Fault::KillMember => "kill_member",
            Fault::KillLeader => "kill_leader",
            Fault::PauseMember => "pause_member",
            Fault::StallShort => "stall_short",
            Fault::StallLong => "stall_long",
            Fault::StallUpstream => "stall_upstream",
            Fault::Cut => "cut",
            Fault::Reset => "reset",
            Fault::PauseWorker => "pause_worker",
            Fault::KillWorker => "kill_worker",
            Fault::Expire => "expire",
            Fault::DeleteOffer => "delete_offer",
            Fault::Reconfig => "reconfig",
        }
    }
}

/// A chaos run's settings.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// The worker binary (`env!("CARGO_BIN_EXE_zklock-chaos-worker")` in a test).
    pub worker_exe: PathBuf,
    /// Seeds the nemesis and the workers.
    pub seed: u64,
    /// Worker processes.
    pub workers: u32,
    /// Threads per worker.
    pub threads: u32,
    /// Lock znodes (each guards its own resource znode).
    pub locks: u32,
    /// The workers' session timeout.
    pub session: Duration,
    /// How long the nemesis runs.
    pub faults_for: Duration,
    /// The calm phase after the faults (at least; it lasts until every worker
    /// took a lock, up to this + 30 s).
    pub calm_for: Duration,
    /// The nemesis's pause between two faults, drawn in this range.
    pub gap: (Duration, Duration),
    /// The faults to draw from, in seeded rounds: each once per round, in a
    /// shuffled order.
    pub faults: Vec<Fault>,
    /// Finish the round under way when `faults_for` ends (every fault of
    /// the list then comes at least once, however long each takes; off by
    /// default: the faults stop at `faults_for`).
    pub whole_rounds: bool,
    /// A worker (1-based) run in the broken mode: unfenced writes, continued
    /// after `Lost`. Per-worker faults then target it.
    pub broken_worker: Option<u32>,
    /// The checker's allowances.
    pub check: CheckConfig,
    /// Print every event as it arrives.
    pub verbose: bool,
    /// What the workers exercise.
    pub recipe: Recipe,
}

impl ChaosConfig {
    /// Defaults for a run of `faults_for` with `seed`: 3 workers × 3 threads, 3
    /// locks, 4 s sessions, every fault, 1–3 s apart.
    pub fn new(worker_exe: impl Into<PathBuf>, seed: u64, faults_for: Duration) -> ChaosConfig {
        ChaosConfig {
            worker_exe: worker_exe.into(),
            seed,
            workers: 3,
            threads: 3,
            locks: 3,
            session: Duration::from_secs(4),
            faults_for,
            calm_for: Duration::from_secs(5),
            gap: (Duration::from_secs(1), Duration::from_secs(3)),
            faults: Fault::ALL.to_vec(),
            whole_rounds: false,
            broken_worker: None,
            check: CheckConfig::default(),
            verbose: false,
            recipe: Recipe::Locks,
        }
    }
}

/// What a run gives back: the report, every event, and the workers' stderr.
#[derive(Debug)]
pub struct RunOutcome {
    /// The checker's report.
    pub report: Report,
    /// Every event, as received.
    pub events: Vec<Event>,
    /// The workers' stderr lines (panics, logs), prefixed with the worker.
    pub stderr: Vec<String>,
    /// Each member's server log (by member index), when the checks failed:
    /// the ensemble's directory goes with the run.
    pub server_logs: Vec<(usize, Vec<u8>)>,
}

#[derive(Debug, Default)]
struct Observed {
    events: Vec<Event>,
    stderr: Vec<String>,
    sessions: HashMap<u32, (i64, Vec<u8>)>,
    holds: HashMap<u32, i64>,
}

type Shared = Arc<Mutex<Observed>>;

#[derive(Debug)]
struct WorkerProc {
    id: u32,
    child: Child,
    stdin: Option<ChildStdin>,
    readers: Vec<JoinHandle<()>>,
    proxies: Vec<FaultProxy>,
}

struct Run {
    cfg: ChaosConfig,
    root: String,
    ensemble: ZkEnsemble,
    workers: Vec<WorkerProc>,
    seen: Shared,
    rng: Rng,
    /// The places a member can be, in the order of every worker's proxies:
    /// `slots[k]` is the member behind each worker's proxy `k` (`None`: a
    /// free place, its proxies forwarding to [`NOWHERE`]). One per member,
    /// and one free place with [`Fault::Reconfig`].
    slots: Vec<Option<usize>>,
    /// [`Fault::Reconfig`]s so far.
    reconfigs: u64,
}

/// Where the proxies of a free place forward to: a port nothing listens on
/// (connections refused, as a name that points nowhere).
const NOWHERE: &str = "127.0.0.1:1";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

/// Runs one chaos run and checks it.
///
/// # Errors
/// The harness failed (the ensemble did not start, a worker could not be
/// spawned); the run's own failures are in the report.
pub fn run(cfg: ChaosConfig) -> io::Result<RunOutcome> {
    let reconfig = cfg.faults.contains(&Fault::Reconfig);
    let ensemble = if reconfig {
        ZkEnsemble::start_reconfigurable()?
    } else {
        ZkEnsemble::start()?
    };
    ensemble.wait_for_quorum(Duration::from_secs(60))?;
    let root = format!("/zklock-chaos/run-{}-{}", std::process::id(), cfg.seed);
    let mut slots: Vec<Option<usize>> = (0..ensemble.size()).map(Some).collect();
    if reconfig {
        slots.push(None);
    }
    let mut run = Run {
        rng: Rng::new(cfg.seed),
        cfg,
        root,
        ensemble,
        workers: Vec::new(),
        seen: Shared::default(),
        slots,
        reconfigs: 0,
    };
    run.setup().map_err(io::Error::other)?;
    for id in 1..=run.cfg.workers {
        let proxies = run
            .slots
            .iter()
            .map(|slot| match slot {
                Some(i) => FaultProxy::start(run.ensemble.address(*i).as_str()),
                None => FaultProxy::start(NOWHERE),
            })
            .collect::<io::Result<Vec<_>>>()?;
        let w = run.spawn(id, proxies)?;
        run.workers.push(w);
    }
    let result = run.go();
    // Whatever happened: no worker outlives the run.
    for w in &mut run.workers {
        let _ = Command::new("kill")
            .stderr(Stdio::null())
            .args(["-CONT", &w.child.id().to_string()])
            .status();
        let _ = w.child.kill();
        let _ = w.child.wait();
    }
    result?;
    let seen = std::mem::take(&mut *lock(&run.seen));
    let report = match run.cfg.recipe {
        Recipe::Queue => check_queue(&seen.events),
        Recipe::Locks | Recipe::Election => check(&seen.events, &run.cfg.check),
    };
    let server_logs = if report.is_ok() {
        Vec::new()
    } else {
        (0..run.ensemble.size())
            .filter_map(|i| Some((i, std::fs::read(run.ensemble.log_path(i)?).ok()?)))
            .collect()
    };
    Ok(RunOutcome {
        report,
        events: seen.events,
        stderr: seen.stderr,
        server_logs,
    })
}

impl Run {
    fn record(&self, event: Event) {
        if self.cfg.verbose {
            println!("{event}");
        }
        lock(&self.seen).events.push(event);
    }

    fn admin(&self) -> zklock::Result<ZooKeeper> {
        ZooKeeper::connect(
            &self.ensemble.connect_string(),
            Duration::from_secs(10),
            |_e: WatchedEvent| {},
        )
    }

    fn setup(&self) -> zklock::Result<()> {
        let zk = self.admin()?;
        let mut path = String::new();
        for part in self.root.split('/').filter(|p| !p.is_empty()) {
            path.push('/');
            path.push_str(part);
            match zk.create(&path, b"", Acl::open_unsafe(), CreateMode::Persistent) {
                Ok(_) => {}
                Err(e) if e.is(ZkError::NodeExists) => {}
                Err(e) => return Err(e),
            }
        }
        for i in 0..u64::from(self.cfg.locks) {
            let l = lock_path(&self.root, i);
            zk.create(&l, b"", Acl::open_unsafe(), CreateMode::Persistent)?;
            let r = resource_path(&self.root, i);
            zk.create(&r, b"0 init", Acl::open_unsafe(), CreateMode::Persistent)?;
        }
        let q = queue_path(&self.root);
        zk.create(&q, b"", Acl::open_unsafe(), CreateMode::Persistent)?;
        zk.close()
    }

    fn spawn(&self, id: u32, proxies: Vec<FaultProxy>) -> io::Result<WorkerProc> {
        let servers = proxies
            .iter()
            .map(FaultProxy::connect_string)
            .collect::<Vec<_>>()
            .join(",");
        let mut cmd = Command::new(&self.cfg.worker_exe);
        cmd.args(["--id", &id.to_string()])
            .args(["--servers", &servers])
            .args(["--root", &self.root])
            .args(["--locks", &self.cfg.locks.to_string()])
            .args(["--threads", &self.cfg.threads.to_string()])
            .args(["--seed", &self.cfg.seed.to_string()])
            .args(["--session-ms", &self.cfg.session.as_millis().to_string()])
            .args(["--recipe", self.cfg.recipe.name()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if self.cfg.broken_worker == Some(id) {
            cmd.arg("--broken");
        }
        let mut child = cmd.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("spawning {}: {e}", self.cfg.worker_exe.display()),
            )
        })?;
        self.record(
            Event::now(CONTROLLER, "worker_spawned")
                .with("w", id)
                .with("pid", child.id()),
        );
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let seen = self.seen.clone();
        let verbose = self.cfg.verbose;
        let out = thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let Some(ev) = Event::parse(&line) else {
                    continue;
                };
                if verbose {
                    println!("{line}");
                }
                let mut s = lock(&seen);
                match ev.kind.as_str() {
                    "session" => {
                        let sid = u64::from_str_radix(ev.get("id").unwrap_or("0"), 16).unwrap_or(0)
                            as i64;
                        let pwd = unhex(ev.get("pwd").unwrap_or(""));
                        s.sessions.insert(id, (sid, pwd));
                    }
                    "granted" => *s.holds.entry(id).or_default() += 1,
                    "released" => *s.holds.entry(id).or_default() -= 1,
                    _ => {}
                }
                s.events.push(ev);
            }
        });
        let seen = self.seen.clone();
        let err = thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lock(&seen).stderr.push(format!("[w{id}] {line}"));
            }
        });
        Ok(WorkerProc {
            id,
            stdin: child.stdin.take(),
            child,
            readers: vec![out, err],
            proxies,
        })
    }

    fn worker(&mut self, id: u32) -> &mut WorkerProc {
        self.workers
            .iter_mut()
            .find(|w| w.id == id)
            .expect("a worker of this run")
    }

    fn signal(&self, id: u32, sig: &str) {
        let pid = self
            .workers
            .iter()
            .find(|w| w.id == id)
            .map(|w| w.child.id());
        if let Some(pid) = pid {
            let _ = Command::new("kill")
                .stderr(Stdio::null())
                .args([sig, &pid.to_string()])
                .status();
        }
    }

    fn go(&mut self) -> io::Result<()> {
        // Let every worker get going first.
        self.wait_all_granted(Duration::from_secs(30));
        self.record(Event::now(CONTROLLER, "phase").with("name", "faults"));
        let end = Instant::now() + self.cfg.faults_for;
        let mut round: Vec<Fault> = Vec::new();
        // Past `end`, a round begun is finished with `whole_rounds`.
        let whole = self.cfg.whole_rounds;
        let over = |round: &[Fault]| Instant::now() >= end && (round.is_empty() || !whole);
        while !over(&round) {
            let (lo, hi) = self.cfg.gap;
            let gap = self
                .rng
                .millis(lo.as_millis() as u64, hi.as_millis() as u64);
            if round.is_empty() || !whole {
                thread::sleep(gap.min(end.saturating_duration_since(Instant::now())));
            } else {
                thread::sleep(gap);
            }
            if over(&round) || self.cfg.faults.is_empty() {
                break;
            }
            if round.is_empty() {
                // Seeded rounds without replacement: every fault comes once a
                // round, so even a short run sees the whole list.
                round = self.cfg.faults.clone();
                for i in (1..round.len()).rev() {
                    round.swap(i, self.rng.below(i as u64 + 1) as usize);
                }
            }
            let fault = round.pop().expect("a non-empty round");
            self.inject(fault)?;
        }
        self.heal()?;
        self.record(Event::now(CONTROLLER, "phase").with("name", "calm"));
        thread::sleep(self.cfg.calm_for);
        self.wait_all_granted(Duration::from_secs(30));
        self.record(Event::now(CONTROLLER, "phase").with("name", "stop"));
        self.stop_workers();
        self.check_orphans_and_finals();
        Ok(())
    }

    /// Waits until every worker logged a grant (an item taken, for the queue)
    /// after the last phase mark.
    fn wait_all_granted(&self, timeout: Duration) {
        let since = now_us();
        let progress = self.cfg.recipe.progress();
        zklock::testing::eventually(timeout, || {
            let s = lock(&self.seen);
            (1..=self.cfg.workers).all(|w| {
                s.events
                    .iter()
                    .rev()
                    .take_while(|e| e.ts >= since)
                    .any(|e| e.worker == w && e.kind == progress)
            })
        });
    }

    fn target(&mut self) -> u32 {
        match self.cfg.broken_worker {
            Some(w) => w,
            None => 1 + self.rng.below(u64::from(self.cfg.workers)) as u32,
        }
    }

    /// Waits (up to 3 s) until worker `w` holds a lock.
    fn wait_holding(&self, w: u32) -> bool {
        zklock::testing::eventually(Duration::from_secs(3), || {
            lock(&self.seen).holds.get(&w).copied().unwrap_or(0) > 0
        })
    }

    fn fault_event(&self, fault: Fault) -> Event {
        Event::now(CONTROLLER, "fault").with("type", fault.name())
    }

    fn inject(&mut self, fault: Fault) -> io::Result<()> {
        let session = self.cfg.session.as_millis() as u64;
        match fault {
            Fault::KillMember | Fault::KillLeader => {
                let i = match (fault, self.ensemble.leader()) {
                    (Fault::KillLeader, Some(l)) => l,
                    _ => self.any_member(),
                };
                self.record(self.fault_event(fault).with("member", i));
                self.ensemble.kill(i)?;
                thread::sleep(self.rng.millis(1000, 3000));
                self.ensemble.restart(i)?;
                self.ensemble.wait_for_quorum(Duration::from_secs(60))?;
            }
            Fault::PauseMember => {
                let i = match self.ensemble.leader() {
                    Some(l) if self.rng.chance(0.5) => l,
                    _ => self.any_member(),
                };
                let d = self.rng.millis(session / 2, session * 2);
                self.record(
                    self.fault_event(fault)
                        .with("member", i)
                        .with("ms", d.as_millis()),
                );
                self.ensemble.pause(i)?;
                thread::sleep(d);
                self.ensemble.resume(i)?;
                self.ensemble.wait_for_quorum(Duration::from_secs(60))?;
            }
            Fault::StallShort | Fault::StallLong | Fault::StallUpstream | Fault::Cut => {
                let w = self.target();
                let d = match fault {
                    Fault::StallShort => self.rng.millis(session * 3 / 10, session * 9 / 10),
                    Fault::StallLong => self.rng.millis(session * 13 / 10, session * 2),
                    Fault::StallUpstream => self.rng.millis(session / 2, session * 3 / 2),
                    _ => self.rng.millis(200, 800),
                };
                self.record(
                    self.fault_event(fault)
                        .with("w", w)
                        .with("ms", d.as_millis()),
                );
                let proxies = &self.worker(w).proxies;
                for p in proxies {
                    if fault == Fault::StallUpstream {
                        p.stall_upstream();
                    } else {
                        p.stall();
                    }
                }
                thread::sleep(d);
                let proxies = &self.worker(w).proxies;
                for p in proxies {
                    match fault {
                        Fault::StallShort => p.pass(),
                        _ => p.reset(),
                    }
                }
            }
            Fault::Reset => {
                let w = self.target();
                self.record(self.fault_event(fault).with("w", w));
                for p in &self.worker(w).proxies {
                    p.reset();
                }
            }
            Fault::PauseWorker => {
                let w = self.target();
                let d = self.rng.millis(session * 13 / 10, session * 2);
                self.record(
                    self.fault_event(fault)
                        .with("w", w)
                        .with("ms", d.as_millis()),
                );
                self.signal(w, "-STOP");
                self.record(Event::now(CONTROLLER, "worker_paused").with("w", w));
                thread::sleep(d);
                self.record(Event::now(CONTROLLER, "worker_resumed").with("w", w));
                self.signal(w, "-CONT");
            }
            Fault::KillWorker => {
                let w = self.target();
                let held = self.wait_holding(w);
                self.record(self.fault_event(fault).with("w", w).with("holding", held));
                let worker = self.worker(w);
                let _ = worker.child.kill();
                let _ = worker.child.wait();
                self.record(Event::now(CONTROLLER, "worker_killed").with("w", w));
                let old = self.worker(w);
                for r in old.readers.drain(..) {
                    let _ = r.join();
                }
                let proxies = std::mem::take(&mut old.proxies);
                lock(&self.seen).holds.insert(w, 0);
                thread::sleep(Duration::from_millis(300));
                let fresh = self.spawn(w, proxies)?;
                *self.worker(w) = fresh;
            }
            Fault::DeleteOffer => {
                let w = self.target();
                let held = self.wait_holding(w);
                // Past the 2/3 at which the leader is in doubt, well before
                // the server can expire the session.
                let d = self.rng.millis(session * 3 / 4, session * 4 / 5);
                for p in &self.worker(w).proxies {
                    p.stall();
                }
                thread::sleep(d);
                let host = format!("w{w}");
                let dir = lock_path(&self.root, 0);
                let mut deleted = Vec::new();
                if let Ok(zk) = self.admin() {
                    for c in zk.get_children(&dir, false).unwrap_or_default() {
                        let path = format!("{dir}/{c}");
                        if let Ok((data, stat)) = zk.get_data(&path, false) {
                            if data == host.as_bytes()
                                && zk.delete(&path, Some(stat.version)).is_ok()
                            {
                                deleted.push(path);
                            }
                        }
                    }
                    let _ = zk.close();
                }
                // At once: the reconnect races the next leader's turn.
                for p in &self.worker(w).proxies {
                    p.pass();
                }
                self.record(
                    self.fault_event(fault)
                        .with("w", w)
                        .with("holding", held)
                        .with("ms", d.as_millis())
                        .with("deleted", deleted.join(",")),
                );
            }
            Fault::Reconfig => {
                let victim = match self.ensemble.leader() {
                    Some(l) if self.rng.chance(0.5) => l,
                    _ => self.any_member(),
                };
                // The three ways in turn, from a seeded start: a new
                // member added then one removed (through four members);
                // one removed then a new one added (through two); one
                // removed then added back under its own id, with its data.
                let way = (self.cfg.seed + self.reconfigs) % 3;
                self.reconfigs += 1;
                let way_name = ["add_then_remove", "remove_then_add", "remove_then_rejoin"];
                self.record(
                    self.fault_event(fault)
                        .with("member", victim)
                        .with("way", way_name[way as usize]),
                );
                let mut admin = match self.super_admin() {
                    Ok(zk) => zk,
                    Err(e) => {
                        self.trouble(format!("reconfig_admin:{e}"));
                        return Ok(());
                    }
                };
                match way {
                    0 => {
                        self.add_member(&mut admin, None)?;
                        self.remove_member(&mut admin, victim)?;
                    }
                    1 => {
                        self.remove_member(&mut admin, victim)?;
                        self.add_member(&mut admin, None)?;
                    }
                    _ => {
                        if self.remove_member(&mut admin, victim)? {
                            self.add_member(&mut admin, Some(victim))?;
                        }
                    }
                }
                let _ = admin.close();
            }
            Fault::Expire => {
                let w = self.target();
                let held = self.wait_holding(w);
                let session = lock(&self.seen).sessions.get(&w).cloned();
                self.record(
                    self.fault_event(fault)
                        .with("w", w)
                        .with("holding", held)
                        .with(
                            "session",
                            format!("{:x}", session.as_ref().map_or(0, |s| s.0)),
                        ),
                );
                if let Some((id, pwd)) = session {
                    // Cut the worker off first, so that it cannot take its
                    // session back while the close is under way (as the
                    // tests' `force_expiry`); the close is confirmed by the
                    // server (or the session was gone already). Then the
                    // worker reconnects and learns of it.
                    // The checker excuses exactly what this window allows: an
                    // interval of the worker alive at `expire_cut` and begun
                    // before `expire_closed`, overlapped by a grant after the cut.
                    for p in &self.worker(w).proxies {
                        p.stall();
                    }
                    self.record(Event::now(CONTROLLER, "expire_cut").with("w", w));
                    let servers = self.ensemble.connect_string();
                    let closed =
                        zklock::testing::close_session(&servers, id, &pwd, self.cfg.session);
                    self.record(
                        Event::now(CONTROLLER, "expire_closed")
                            .with("w", w)
                            .with("ok", closed.is_ok()),
                    );
                    for p in &self.worker(w).proxies {
                        p.reset();
                    }
                    if let Err(e) = closed {
                        log::warn!("chaos: expiring worker {w}'s session {id:x}: {e}");
                    }
                }
            }
        }
        Ok(())
    }

    /// The members in place (voting), in the order of their places.
    fn members(&self) -> Vec<usize> {
        self.slots.iter().flatten().copied().collect()
    }

    /// A member in place, drawn by the seed.
    fn any_member(&mut self) -> usize {
        let members = self.members();
        members[self.rng.below(members.len() as u64) as usize]
    }

    fn trouble(&self, what: String) {
        self.record(Event::now(CONTROLLER, "trouble").with("what", what));
    }

    /// A session of the super user, who may `reconfig`.
    fn super_admin(&self) -> zklock::Result<ZooKeeper> {
        let zk = self.admin()?;
        zk.add_auth("digest", SUPER_AUTH)?;
        Ok(zk)
    }

    /// Applies `change` until the configuration shows it (`done`), for up
    /// to 60 s: a `reconfig` lost to a connection loss may have been
    /// applied (the configuration, synced, says whether), one refused
    /// while another is in progress, or before the joining server synced,
    /// is sent again. Each try names the version it read (`fromConfig`).
    /// A session of `admin` that ended (expired while the ensemble could
    /// not serve it) is replaced by a new one.
    fn reconfig_until(
        &self,
        admin: &mut ZooKeeper,
        change: &Reconfig,
        done: impl Fn(&ClientConfig) -> bool,
    ) -> Result<ClientConfig, String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if admin.state().is_terminal() {
                match self.super_admin() {
                    Ok(zk) => *admin = zk,
                    Err(e) if Instant::now() >= deadline => return Err(e.to_string()),
                    Err(_) => {
                        thread::sleep(Duration::from_millis(200));
                        continue;
                    }
                }
            }
            let read = admin
                .sync("/zookeeper/config")
                .and_then(|()| admin.get_config(false));
            let error = match read {
                Ok((config, _)) if done(&config) => return Ok(config),
                Ok((config, _)) => match admin.reconfig(change, Some(config.version())) {
                    Ok(config) if done(&config) => return Ok(config),
                    Ok(config) => format!("applied, not shown: {config}"),
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(error);
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    /// Points every worker's proxy of place `slot` at `target`, for new
    /// connections (the ones open keep theirs).
    fn retarget(&self, slot: usize, target: &str) -> io::Result<()> {
        for w in &self.workers {
            w.proxies[slot].set_target(target)?;
        }
        Ok(())
    }

    /// Removes member `m` by `reconfig`, stops it 0–2 s later, frees its
    /// place. Whether it was removed.
    fn remove_member(&mut self, admin: &mut ZooKeeper, m: usize) -> io::Result<bool> {
        let id = self.ensemble.server_id(m);
        let leave = Reconfig::incremental::<&str>(&[], &[id]);
        match self.reconfig_until(admin, &leave, |c| c.server(id).is_none()) {
            Ok(config) => {
                self.record(
                    Event::now(CONTROLLER, "reconfig")
                        .with("op", "remove")
                        .with("member", m)
                        .with("id", id)
                        .with("version", format!("{:x}", config.version()))
                        .with("servers", config.connect_string()),
                );
                // Stopped a moment later, as an operator would: its name
                // still points at it meanwhile (a removed server serves no
                // client).
                thread::sleep(self.rng.millis(0, 2000));
                self.ensemble.stop_removed(m)?;
                self.record(Event::now(CONTROLLER, "member_stopped").with("member", m));
                if let Some(slot) = self.slots.iter().position(|s| *s == Some(m)) {
                    self.slots[slot] = None;
                    self.retarget(slot, NOWHERE)?;
                }
                self.ensemble.wait_for_quorum(Duration::from_secs(60))?;
                Ok(true)
            }
            Err(e) => {
                self.trouble(format!("reconfig_remove_{m}:{e}"));
                Ok(false)
            }
        }
    }

    /// Starts a server, adds it by `reconfig` and puts it in a free place:
    /// a new one (a new member id), or `removed` again, under its own id
    /// with its data and ports.
    fn add_member(&mut self, admin: &mut ZooKeeper, removed: Option<usize>) -> io::Result<()> {
        let Some(slot) = self.slots.iter().position(Option::is_none) else {
            self.trouble("reconfig_add:no_free_place".to_string());
            return Ok(());
        };
        let started = match removed {
            Some(m) => self.ensemble.rejoin_removed(m).map(|()| m),
            None => {
                let before = self.ensemble.size();
                let started = self.ensemble.add_member();
                if started.is_err() && self.ensemble.size() > before {
                    let _ = self.ensemble.stop_removed(before);
                }
                started
            }
        };
        let n = match started {
            Ok(n) => n,
            Err(e) => {
                self.trouble(format!("reconfig_add_start:{e}"));
                return Ok(());
            }
        };
        let id = self.ensemble.server_id(n);
        let join = Reconfig::incremental(&[self.ensemble.server_spec(n)], &[]);
        match self.reconfig_until(admin, &join, |c| c.server(id).is_some()) {
            Ok(config) => {
                self.slots[slot] = Some(n);
                self.retarget(slot, &self.ensemble.address(n))?;
                self.record(
                    Event::now(CONTROLLER, "reconfig")
                        .with("op", if removed.is_some() { "rejoin" } else { "add" })
                        .with("member", n)
                        .with("id", id)
                        .with("version", format!("{:x}", config.version()))
                        .with("servers", config.connect_string()),
                );
                self.ensemble.wait_for_quorum(Duration::from_secs(60))?;
            }
            Err(e) => {
                self.ensemble.stop_removed(n)?;
                self.trouble(format!("reconfig_add_{n}:{e}"));
            }
        }
        Ok(())
    }

    /// Ends every fault: members running and serving, proxies passing, workers
    /// running.
    fn heal(&mut self) -> io::Result<()> {
        for i in self.members() {
            if !self.ensemble.is_running(i) {
                self.ensemble.restart(i)?;
            }
        }
        self.ensemble.wait_for_quorum(Duration::from_secs(60))?;
        for w in 1..=self.cfg.workers {
            self.signal(w, "-CONT");
            for p in &self.worker(w).proxies {
                p.pass();
            }
        }
        Ok(())
    }

    fn stop_workers(&mut self) {
        for w in &mut self.workers {
            if let Some(mut stdin) = w.stdin.take() {
                let _ = stdin.write_all(b"stop\n");
            }
        }
        let deadline = Instant::now() + self.cfg.session * 3 + Duration::from_secs(30);
        let mut events = Vec::new();
        for w in &mut self.workers {
            let code = loop {
                match w.child.try_wait() {
                    Ok(Some(status)) => break status.code().unwrap_or(-1),
                    Ok(None) if Instant::now() < deadline => {
                        thread::sleep(Duration::from_millis(20))
                    }
                    _ => {
                        events.push(
                            Event::now(CONTROLLER, "trouble")
                                .with("what", format!("worker_{}_did_not_stop", w.id)),
                        );
                        let _ = w.child.kill();
                        break w.child.wait().ok().and_then(|s| s.code()).unwrap_or(-1);
                    }
                }
            };
            for r in w.readers.drain(..) {
                let _ = r.join();
            }
            events.push(
                Event::now(CONTROLLER, "worker_exit")
                    .with("w", w.id)
                    .with("code", code),
            );
        }
        for e in events {
            self.record(e);
        }
    }

    /// After every worker session ended: no lock znode has children; the
    /// resources' final values.
    fn check_orphans_and_finals(&self) {
        let zk = match self.admin() {
            Ok(zk) => zk,
            Err(e) => {
                self.record(
                    Event::now(CONTROLLER, "trouble").with("what", format!("admin_connect:{e}")),
                );
                return;
            }
        };
        // A killed worker's session ends at its timeout; an expired-then-closed
        // one at once.
        let wait = self.cfg.session * 3 + Duration::from_secs(10);
        for i in 0..u64::from(self.cfg.locks) {
            let l = lock_path(&self.root, i);
            let mut n = usize::MAX;
            zklock::testing::eventually(wait, || {
                n = zk.get_children(&l, false).map_or(usize::MAX, |c| c.len());
                n == 0
            });
            self.record(
                Event::now(CONTROLLER, "orphans")
                    .with("lock", i)
                    .with("children", n as i64),
            );
            match zk.get_data(&resource_path(&self.root, i), false) {
                Ok((data, stat)) => {
                    let (counter, op) = parse_resource(&data);
                    self.record(
                        Event::now(CONTROLLER, "final")
                            .with("lock", i)
                            .with("counter", counter)
                            .with("op", op)
                            .with("version", stat.version),
                    );
                }
                Err(e) => self.record(
                    Event::now(CONTROLLER, "trouble").with("what", format!("final_read:{e}")),
                ),
            }
        }
        self.drain_queue(&zk);
        let _ = zk.close();
    }

    /// Takes what is left in the queue (after every worker stopped): one
    /// `left` event per item, for the checker's accounts.
    fn drain_queue(&self, zk: &ZooKeeper) {
        let dir = queue_path(&self.root);
        let names = match zk.get_children(&dir, false) {
            Ok(names) => names,
            Err(e) => {
                return self
                    .record(Event::now(CONTROLLER, "trouble").with("what", format!("drain:{e}")))
            }
        };
        for name in names {
            let path = format!("{dir}/{name}");
            match zk.get_data(&path, false) {
                Ok((data, _)) => {
                    let _ = zk.delete(&path, None);
                    self.record(
                        Event::now(CONTROLLER, "left")
                            .with("path", &path)
                            .with("op", String::from_utf8_lossy(&data)),
                    );
                }
                Err(e) => self.record(
                    Event::now(CONTROLLER, "trouble").with("what", format!("drain:{path}:{e}")),
                ),
            }
        }
    }
}
