//! The chaos worker process: one ZooKeeper session, several threads taking read
//! and write locks and doing fenced writes, every step logged on stdout.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

mod recipes;

pub(crate) use recipes::queue_path;

use super::event::{now_us, Logger, Rng};
use super::Recipe;
use zklock::client::{Op, OpResult, WatchedEvent, ZooKeeper};
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, LockEvent, ZkInterProcessReadWriteLock,
};
use zklock::{Error, RetryConfig, ZooKeeperWatcher};

/// The lock znode number `i` under `root`.
pub(crate) fn lock_path(root: &str, i: u64) -> String {
    format!("{root}/lock-{i}")
}

/// The resource znode guarded by lock `i`: `"<counter> <last op>"`.
pub(crate) fn resource_path(root: &str, i: u64) -> String {
    format!("{root}/res-{i}")
}

/// The lock number of a lock node path (`<root>/lock-<i>/<child>`).
fn lock_of(path: &str) -> String {
    path.rsplit('/')
        .nth(1)
        .and_then(|dir| dir.strip_prefix("lock-"))
        .unwrap_or("?")
        .to_string()
}

/// Parses a resource's data: `(counter, last op)`.
pub(crate) fn parse_resource(data: &[u8]) -> (i64, String) {
    let s = String::from_utf8_lossy(data);
    let mut it = s.split_whitespace();
    let counter = it.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let op = it.next().unwrap_or("-").to_string();
    (counter, op)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A worker's settings (its command line).
#[derive(Debug, Clone)]
struct Args {
    id: u32,
    servers: String,
    root: String,
    locks: u64,
    threads: u64,
    seed: u64,
    session: Duration,
    /// Deliberately broken: write unfenced, and go on writing after `Lost`.
    broken: bool,
    /// What the worker exercises.
    recipe: Recipe,
}

impl Args {
    fn parse(args: &[String]) -> Result<Args, String> {
        let mut map = HashMap::new();
        let mut broken = false;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--broken" {
                broken = true;
                continue;
            }
            let key = a
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {a}"))?;
            let value = it.next().ok_or_else(|| format!("{a} needs a value"))?;
            map.insert(key.to_string(), value.clone());
        }
        let get = |k: &str| map.get(k).cloned().ok_or_else(|| format!("--{k} missing"));
        let num =
            |k: &str| -> Result<u64, String> { get(k)?.parse().map_err(|e| format!("--{k}: {e}")) };
        Ok(Args {
            id: num("id")? as u32,
            servers: get("servers")?,
            root: get("root")?,
            locks: num("locks")?.max(1),
            threads: num("threads")?.max(1),
            seed: num("seed")?,
            session: Duration::from_millis(num("session-ms")?),
            broken,
            recipe: match map.get("recipe") {
                None => Recipe::Locks,
                Some(r) => Recipe::from_name(r).ok_or_else(|| format!("--recipe {r}?"))?,
            },
        })
    }
}

/// What a worker believes about a lock it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Belief {
    Valid,
    InDoubt,
    Lost,
}

struct Worker {
    args: Args,
    log: Logger,
    /// The session generation and its watcher.
    session: Mutex<(u64, ZooKeeperWatcher)>,
    beliefs: Mutex<HashMap<String, Belief>>,
    stop: AtomicBool,
    ops: AtomicU64,
    /// The broken mode's writer: a session of its own, as a storage client.
    side: Option<ZooKeeper>,
}

/// Runs a chaos worker with `args` (the command line after the program name):
/// `--id N --servers CS --root PATH --locks N --threads N --seed N --session-ms N
/// [--recipe locks|election|queue] [--broken]`. Logs [`Event`](super::Event)s on stdout until stdin says `stop`
/// or closes; returns the exit code (0 after a clean stop).
pub fn worker_main(args: &[String]) -> i32 {
    let args = match Args::parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("chaos worker: {e}");
            return 2;
        }
    };
    let log = Logger::new(args.id);
    if let Ok(level) = std::env::var("CHAOS_WORKER_LOG") {
        StderrLog::install(&level);
    }
    {
        let id = args.id;
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            Logger::new(id).log(Logger::new(id).ev("panic").with("msg", info));
            previous(info);
        }));
    }
    log.log(log.ev("start").with("pid", std::process::id()));
    let Some(zkw) = connect(&args, &log, &AtomicBool::new(false)) else {
        return 3;
    };
    let side = if args.broken {
        match ZooKeeper::connect(&args.servers, args.session, |_e: WatchedEvent| {}) {
            Ok(zk) => Some(zk),
            Err(e) => {
                log.log(log.ev("error").with("what", "side").with("err", e));
                return 3;
            }
        }
    } else {
        None
    };
    let worker = Arc::new(Worker {
        args: args.clone(),
        log,
        session: Mutex::new((0, zkw)),
        beliefs: Mutex::new(HashMap::new()),
        stop: AtomicBool::new(false),
        ops: AtomicU64::new(0),
        side,
    });
    let w = worker.clone();
    thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            match line {
                Ok(l) if l.trim() == "stop" => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        w.stop.store(true, Ordering::SeqCst);
    });
    let threads: Vec<_> = (0..args.threads)
        .map(|t| {
            let w = worker.clone();
            thread::Builder::new()
                .name(format!("chaos-{t}"))
                .spawn(move || w.run(t))
                .expect("spawn a worker thread")
        })
        .collect();
    let mut code = 0;
    for t in threads {
        if t.join().is_err() {
            code = 101;
        }
    }
    let zkw = worker.current().1;
    let _ = zkw.close();
    if let Some(side) = &worker.side {
        let _ = side.close();
    }
    worker.log.log(worker.log.ev("exit").with("code", code));
    code
}

/// The client's own log on stderr, stamped as the events are (wall-clock
/// microseconds), at the level `$CHAOS_WORKER_LOG` names (`debug`, ...):
/// the controller keeps every worker's stderr, and writes it beside the
/// event log of a failed run. (The worker is a binary: no dev-dependency
/// logger.)
struct StderrLog(log::LevelFilter);

impl StderrLog {
    fn install(level: &str) {
        let level = level.parse().unwrap_or(log::LevelFilter::Debug);
        if log::set_boxed_logger(Box::new(StderrLog(level))).is_ok() {
            log::set_max_level(level);
        }
    }
}

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= self.0
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let thread = thread::current();
            eprintln!(
                "{} {} [{}] {}: {}",
                now_us(),
                record.level(),
                thread.name().unwrap_or("?"),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

/// Opens a session, retrying until it works or `stop`; logs its id and password.
fn connect(args: &Args, log: &Logger, stop: &AtomicBool) -> Option<ZooKeeperWatcher> {
    while !stop.load(Ordering::SeqCst) {
        let result = ZooKeeperWatcher::builder(&args.servers)
            .with_identifier(&format!("chaos-w{}", args.id))
            .with_session_timeout(args.session)
            .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
            .connect();
        match result {
            Ok(zkw) => {
                let zk = zkw.zookeeper();
                log.log(
                    log.ev("session")
                        .with("id", format!("{:016x}", zk.session_id()))
                        .with("pwd", hex(&zk.session_password()))
                        .with("timeout_ms", zk.session_timeout().as_millis()),
                );
                return Some(zkw);
            }
            Err(e) => {
                log.log(log.ev("error").with("what", "connect").with("err", e));
                thread::sleep(Duration::from_millis(200));
            }
        }
    }
    None
}

impl Worker {
    fn current(&self) -> (u64, ZooKeeperWatcher) {
        let s = self.session.lock().unwrap_or_else(|e| e.into_inner());
        (s.0, s.1.clone())
    }

    /// Replaces session `generation` by a new one (once, whichever thread asks
    /// first).
    fn renew(&self, generation: u64) {
        let mut s = self.session.lock().unwrap_or_else(|e| e.into_inner());
        if s.0 != generation {
            return;
        }
        let _ = s.1.close();
        if let Some(zkw) = connect(&self.args, &self.log, &self.stop) {
            *s = (generation + 1, zkw);
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn belief(&self, path: &str) -> Option<Belief> {
        self.beliefs.lock().unwrap().get(path).copied()
    }

    /// The lock listener: logs the event and updates the belief.
    fn listener(self: &Arc<Self>) -> impl Fn(&str, LockEvent) + Send + Sync + 'static {
        let w = Arc::downgrade(self);
        move |path: &str, event: LockEvent| {
            let Some(w) = w.upgrade() else { return };
            let (kind, belief) = match event {
                LockEvent::InDoubt => ("indoubt", Belief::InDoubt),
                LockEvent::Restored => ("restored", Belief::Valid),
                LockEvent::Lost => ("lost", Belief::Lost),
                // A signal a later zklock adds: no writes until it is known.
                _ => ("unknown", Belief::InDoubt),
            };
            let mut beliefs = w.beliefs.lock().unwrap();
            beliefs.insert(path.to_string(), belief);
            // Logged under the beliefs' lock: no write decision in between.
            w.log.log(
                w.log
                    .ev(kind)
                    .with("path", path)
                    .with("lock", lock_of(path)),
            );
        }
    }

    fn run(self: Arc<Self>, thread_no: u64) {
        let mut rng = Rng::new(
            self.args.seed ^ (u64::from(self.args.id) << 32) ^ (thread_no << 16) ^ now_us(),
        );
        while !self.stopping() {
            let (generation, zkw) = self.current();
            if zkw.is_expired() {
                self.renew(generation);
                continue;
            }
            match self.args.recipe {
                Recipe::Locks => self.attempt(&zkw, generation, &mut rng),
                Recipe::Election => self.candidacy(&zkw, generation, &mut rng),
                Recipe::Queue => self.queue_step(&zkw, generation, thread_no, &mut rng),
            }
            thread::sleep(rng.millis(0, 20));
        }
    }

    /// One lock attempt, and the work while holding.
    fn attempt(self: &Arc<Self>, zkw: &ZooKeeperWatcher, generation: u64, rng: &mut Rng) {
        let i = rng.below(self.args.locks);
        let write = self.args.broken || rng.chance(0.6);
        let kind = if write { "w" } else { "r" };
        let rw = match ZkInterProcessReadWriteLock::new(zkw, &lock_path(&self.args.root, i), None) {
            Ok(rw) => rw.with_lock_listener(self.listener()),
            Err(e) => {
                self.log
                    .log(self.log.ev("error").with("what", "new").with("err", e));
                return;
            }
        };
        let meta = format!("w{}", self.args.id);
        let lock: Box<dyn InterProcessLock> = if write {
            Box::new(rw.write_lock(meta.as_bytes()))
        } else {
            Box::new(rw.read_lock(meta.as_bytes()))
        };
        let wait = match rng.below(6) {
            0 | 1 => None,
            2 => Some(Duration::ZERO),
            3 => Some(Duration::from_millis(50)),
            4 => Some(Duration::from_millis(300)),
            _ => Some(Duration::from_millis(1500)),
        };
        let start = now_us();
        let t0 = Instant::now();
        let result = match wait {
            None => lock.acquire().map(|()| true),
            Some(t) => lock.try_acquire(t),
        };
        if let Some(t) = wait {
            let outcome = match &result {
                Ok(true) => "ok".to_string(),
                Ok(false) => "timeout".to_string(),
                Err(e) => format!("err:{e}"),
            };
            self.log.log(
                self.log
                    .ev("try")
                    .with("lock", i)
                    .with("kind", kind)
                    .with("t_ms", t.as_millis())
                    .with("start", start)
                    .with("elapsed_us", t0.elapsed().as_micros())
                    .with("result", outcome),
            );
        }
        match result {
            Ok(true) => self.hold(&*lock, zkw, i, write, start, rng),
            Ok(false) => {}
            Err(e) => {
                self.log.log(
                    self.log
                        .ev("error")
                        .with("what", "acquire")
                        .with("lock", i)
                        .with("err", &e),
                );
                if e.is_fatal() || zkw.is_expired() {
                    self.renew(generation);
                } else {
                    thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    fn hold(
        &self,
        lock: &dyn InterProcessLock,
        zkw: &ZooKeeperWatcher,
        i: u64,
        write: bool,
        start: u64,
        rng: &mut Rng,
    ) {
        let Some(acq) = lock.acquired_lock() else {
            return;
        };
        let path = acq.path.clone();
        {
            let mut beliefs = self.beliefs.lock().unwrap();
            beliefs.entry(path.clone()).or_insert(Belief::Valid);
            self.log.log(
                self.log
                    .ev("granted")
                    .with("lock", i)
                    .with("kind", if write { "w" } else { "r" })
                    .with("path", &path)
                    .with("czxid", acq.czxid)
                    .with("version", acq.version)
                    .with("seq", acq.sequence)
                    .with("start", start),
            );
        }
        let zk = zkw.zookeeper();
        if self.args.broken {
            // Broken on purpose: unfenced writes, for a while, whatever the
            // listener says (a holder that ignores Lost).
            let side = self.side.as_ref().expect("broken mode has a side session");
            for _ in 0..30 {
                if self.stopping() {
                    break;
                }
                self.write(side, i, &path, None);
                thread::sleep(Duration::from_millis(100));
            }
        } else {
            for _ in 0..1 + rng.below(3) {
                if self.stopping() || self.belief(&path) != Some(Belief::Valid) {
                    break;
                }
                if write {
                    self.write(zk, i, &path, Some(acq.version));
                } else {
                    self.read(zk, i, &path);
                }
                thread::sleep(rng.millis(5, 40));
            }
        }
        self.log
            .log(self.log.ev("releasing").with("lock", i).with("path", &path));
        let outcome = match lock.release() {
            Ok(()) => "ok".to_string(),
            Err(Error::LockLost { .. }) => "lost".to_string(),
            Err(e) => format!("err:{e}"),
        };
        self.beliefs.lock().unwrap().remove(&path);
        self.log.log(
            self.log
                .ev("released")
                .with("lock", i)
                .with("path", &path)
                .with("result", outcome),
        );
    }

    fn read(&self, zk: &ZooKeeper, i: u64, path: &str) {
        match zk.get_data(&resource_path(&self.args.root, i), false) {
            Ok((data, _)) => {
                let (counter, op) = parse_resource(&data);
                self.log.log(
                    self.log
                        .ev("read")
                        .with("lock", i)
                        .with("path", path)
                        .with("counter", counter)
                        .with("op", op),
                );
            }
            Err(e) => self.log.log(
                self.log
                    .ev("error")
                    .with("what", "read")
                    .with("lock", i)
                    .with("err", e),
            ),
        }
    }

    /// A write to the resource: fenced by the lock node at `fence` (its version)
    /// when given, else unfenced (the broken mode).
    fn write(&self, zk: &ZooKeeper, i: u64, path: &str, fence: Option<i32>) {
        let res = resource_path(&self.args.root, i);
        let ev = |kind: &str| {
            self.log
                .ev(kind)
                .with("lock", i)
                .with("path", path)
                .with("fenced", fence.is_some())
        };
        let (data, stat) = match zk.get_data(&res, false) {
            Ok(r) => r,
            Err(e) => {
                self.log
                    .log(ev("write_rejected").with("reason", format!("read:{e}")));
                return;
            }
        };
        let (counter, prev) = parse_resource(&data);
        let op = format!(
            "w{}.{}.{}",
            self.args.id,
            std::process::id(),
            self.ops.fetch_add(1, Ordering::SeqCst)
        );
        let mut ops = Vec::new();
        if let Some(version) = fence {
            ops.push(Op::Check {
                path: path.to_string(),
                version: Some(version),
            });
        }
        ops.push(Op::SetData {
            path: res,
            data: format!("{} {op}", counter + 1).into_bytes(),
            version: Some(stat.version),
        });
        let sent = now_us();
        // Before sending: a worker killed with the write in flight leaves a
        // write whose outcome nobody logged; the checker settles it by the
        // resource's chain of ops (seen: a kill 4 ms after a grant).
        self.log.log(
            ev("write_sent")
                .with("op", &op)
                .with("prev", &prev)
                .with("sent", sent),
        );
        match zk.multi(&ops) {
            Ok(results) => {
                let mzxid = results
                    .iter()
                    .find_map(|r| match r {
                        OpResult::SetData { stat } => Some(stat.mzxid),
                        _ => None,
                    })
                    .unwrap_or(-1);
                self.log.log(
                    ev("write_ok")
                        .with("counter", counter + 1)
                        .with("op", op)
                        .with("prev", prev)
                        .with("mzxid", mzxid)
                        .with("sent", sent),
                );
            }
            Err(Error::Multi { index, code, .. }) => {
                let why = if fence.is_some() && index == 0 {
                    "fence"
                } else {
                    "version"
                };
                self.log
                    .log(ev("write_rejected").with("reason", format!("{why}:{code:?}")));
            }
            Err(e) if e.is_retryable() => {
                self.log.log(
                    ev("write_unknown")
                        .with("op", op)
                        .with("prev", prev)
                        .with("sent", sent)
                        .with("err", e),
                );
            }
            Err(e) => {
                self.log
                    .log(ev("write_rejected").with("reason", format!("{e}")));
            }
        }
    }
}
