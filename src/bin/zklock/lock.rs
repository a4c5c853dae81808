//! `zklock lock` / `zklock read-lock` / `zklock semaphore`: run a command
//! while holding the lock (or one of the semaphore's leases), in a dialect.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use parking_lot::Mutex;
use zklock::lock::{
    AcquiredLock, Dialect, InterProcessLock, InterProcessReadWriteLock, LockCanceller, LockEvent,
    MetadataHandler, SemaphoreLease, ZkInterProcessMutex, ZkInterProcessReadWriteLock, ZkSemaphore,
};
use zklock::{Error, WeakZooKeeperWatcher, ZooKeeperWatcher};

use crate::duration::human;
use crate::supervise::{signal_name, spawn, supervise, Ended, SignalWatch, Verdict, Watchdog};
use crate::{
    connect, Global, LockArgs, SemaphoreArgs, EXIT_ERROR, EXIT_LOST, EXIT_MIXED, EXIT_TIMEOUT,
};

pub(crate) fn run(g: &Global, a: &LockArgs, write: bool, rw: bool) -> anyhow::Result<i32> {
    let shared = !write;
    let role = match (a.dialect, shared, rw) {
        (_, true, _) => "read",
        // Curator's InterProcessMutex (`lock-`) is another lock than its
        // read/write lock's write side (`__WRIT__`): `--rw` picks the latter.
        (Dialect::Curator, false, false) => "mutex",
        _ => "write",
    };
    let what = match a.dialect {
        Dialect::HBase => format!("the {role} lock {}", a.znode),
        d => format!("the {d} {role} lock {}", a.znode),
    };
    let zkw = connect(g)?;
    let result = hold_and_run(&zkw, g, a, &what, "held", |handler, events| {
        let listener = move |_path: &str, event: LockEvent| {
            let _ = events.send(event);
        };
        let metadata = a.metadata_or_default();
        if role == "mutex" {
            let lock = ZkInterProcessMutex::new(&zkw, &a.znode, a.dialect, metadata.as_bytes())?
                .with_lock_listener(listener);
            return Ok(Lock::boxed(&a.znode, lock.canceller(), Arc::new(lock)));
        }
        let rw = ZkInterProcessReadWriteLock::new(&zkw, &a.znode, Some(handler))?
            .with_dialect(a.dialect)
            .with_lock_listener(listener);
        Ok(if shared {
            let lock = rw.read_lock(metadata.as_bytes());
            Lock::boxed(&a.znode, lock.canceller(), Arc::new(lock))
        } else {
            let lock = rw.write_lock(metadata.as_bytes());
            Lock::boxed(&a.znode, lock.canceller(), Arc::new(lock))
        })
    });
    close(zkw);
    result
}

/// `zklock semaphore`: the command runs holding one of `--limit` leases.
pub(crate) fn run_semaphore(g: &Global, a: &SemaphoreArgs) -> anyhow::Result<i32> {
    let l = &a.lock;
    let what = match l.dialect {
        Dialect::HBase => format!("a lease of the semaphore {} (limit {})", l.znode, a.limit),
        d => format!(
            "a lease of the {d} semaphore {} (limit {})",
            l.znode, a.limit
        ),
    };
    let zkw = connect(g)?;
    let busy = format!("all {} leases held", a.limit);
    let result = hold_and_run(&zkw, g, l, &what, &busy, |_handler, events| {
        let sem = ZkSemaphore::in_dialect(
            &zkw,
            &l.znode,
            l.dialect,
            a.limit,
            l.metadata_or_default().as_bytes(),
        )?
        .with_lock_listener(move |_path: &str, event: LockEvent| {
            let _ = events.send(event);
        });
        Ok(Box::new(Arc::new(sem)))
    });
    close(zkw);
    result.map_err(|e| other_limit(e, &l.znode, a.limit))
}

/// A `--limit` other than the one the semaphore's znode keeps (zklock's and
/// kazoo's layouts): says which limit to give, instead of the library's
/// (kazoo's) "inconsistent max leases: 3, expected: 2". A usage error (2).
fn other_limit(e: anyhow::Error, znode: &str, limit: u32) -> anyhow::Error {
    let stored = e.chain().find_map(|c| match c.downcast_ref::<Error>() {
        Some(Error::BadArguments(m)) => m
            .split_once("inconsistent max leases: ")
            .and_then(|(_, rest)| rest.split(',').next())
            .and_then(|n| n.trim().parse::<i64>().ok()),
        _ => None,
    });
    match stored {
        Some(stored) => {
            let line = format!(
                "the semaphore {znode} has a limit of {stored}, kept in its znode; --limit \
                 {limit} disagrees (every participant must give the same): give --limit {stored}"
            );
            crate::explained(e, line)
        }
        None => e,
    }
}

/// Closing the session removes anything of ours at once (not after the
/// session timeout).
fn close(zkw: ZooKeeperWatcher) {
    if let Err(e) = zkw.close() {
        log::warn!("closing the session: {e}");
    }
}

/// What the command runs holding: a lock or a semaphore's lease.
trait Target {
    /// Takes it, waiting at most `timeout` (`None`: as long as it takes);
    /// `Ok(None)` when the time ran out.
    fn take(&self, timeout: Option<Duration>) -> Result<Option<Box<dyn Grant>>, Error>;
    /// Ends a `take` in progress with `Cancelled` (from the signal thread).
    fn canceller(&self) -> Box<dyn Fn() + Send>;
}

/// A taken lock or lease.
trait Grant {
    /// The holder's own node.
    fn node(&self) -> &str;
    fn fencing_token(&self) -> i64;
    /// Gives it back: `LockLost` when it was lost meanwhile.
    fn release(self: Box<Self>) -> Result<(), Error>;
}

/// A lock of any dialect and kind, with its canceller.
struct Lock {
    znode: String,
    canceller: LockCanceller,
    lock: Arc<dyn InterProcessLock>,
}

impl Lock {
    fn boxed(znode: &str, canceller: LockCanceller, lock: Arc<dyn InterProcessLock>) -> Box<Lock> {
        Box::new(Lock {
            znode: znode.to_string(),
            canceller,
            lock,
        })
    }
}

struct HeldLock {
    lock: Arc<dyn InterProcessLock>,
    granted: AcquiredLock,
}

impl Target for Lock {
    fn take(&self, timeout: Option<Duration>) -> Result<Option<Box<dyn Grant>>, Error> {
        let acquired = match timeout {
            Some(t) => self.lock.try_acquire(t)?,
            None => self.lock.acquire().map(|()| true)?,
        };
        if !acquired {
            return Ok(None);
        }
        // None: lost as it was granted.
        let granted = self.lock.acquired_lock().ok_or_else(|| Error::LockLost {
            path: self.znode.clone(),
        })?;
        Ok(Some(Box::new(HeldLock {
            lock: self.lock.clone(),
            granted,
        })))
    }

    fn canceller(&self) -> Box<dyn Fn() + Send> {
        let c = self.canceller.clone();
        Box::new(move || c.cancel())
    }
}

impl Grant for HeldLock {
    fn node(&self) -> &str {
        &self.granted.path
    }
    fn fencing_token(&self) -> i64 {
        self.granted.fencing_token()
    }
    fn release(self: Box<Self>) -> Result<(), Error> {
        self.lock.release()
    }
}

impl Target for Arc<ZkSemaphore> {
    fn take(&self, timeout: Option<Duration>) -> Result<Option<Box<dyn Grant>>, Error> {
        let lease = match timeout {
            Some(t) => self.try_acquire(t)?,
            None => Some(self.acquire()?),
        };
        Ok(lease.map(|l| Box::new(l) as Box<dyn Grant>))
    }

    fn canceller(&self) -> Box<dyn Fn() + Send> {
        let sem = self.clone();
        Box::new(move || sem.cancel())
    }
}

impl Grant for SemaphoreLease {
    fn node(&self) -> &str {
        self.path()
    }
    fn fencing_token(&self) -> i64 {
        SemaphoreLease::fencing_token(self)
    }
    fn release(self: Box<Self>) -> Result<(), Error> {
        SemaphoreLease::release(*self)
    }
}

/// Who holds the lock, as the waiting attempt last saw it.
#[derive(Default)]
struct Holder {
    metadata: Option<String>,
    /// The node in the way is itself waiting (a reader behind a queued writer).
    queued: bool,
}

/// The waiting display: a live line on a terminal, plain lines otherwise.
struct Waiting {
    znode: String,
    /// "the write lock /x", "a lease of the semaphore /x (limit 2)".
    what: String,
    /// What is said of a busy target whose holder is not known.
    busy: String,
    holder: Mutex<Holder>,
    tty: bool,
    /// No "waiting" lines: not `-v` (flock's habit: silent unless asked),
    /// or `-t 0` / `-n` (one try).
    quiet: bool,
    start: Instant,
    /// To tell a holder from a queued node (read on the acquiring thread).
    zkw: WeakZooKeeperWatcher,
}

impl Waiting {
    fn describe(&self) -> String {
        let h = self.holder.lock();
        match (&h.metadata, h.queued) {
            (Some(m), false) => format!("held by {m:?}"),
            (Some(m), true) => format!("queued behind {m:?}, itself waiting"),
            (None, _) => self.busy.clone(),
        }
    }

    /// [`describe`](Self::describe), or, when the attempt never saw who is
    /// in the way (Curator's mutex and the semaphores pass no holder's
    /// metadata), who holds now by a listing.
    fn describe_now(&self) -> String {
        if self.holder.lock().metadata.is_some() {
            return self.describe();
        }
        let holders: Vec<String> = self
            .zkw
            .upgrade()
            .and_then(|zkw| crate::ls::list(&zkw, &self.znode).ok())
            .map(|listing| {
                listing
                    .entries
                    .into_iter()
                    .filter(|e| e.state == "holder")
                    .map(|e| format!("{:?}", e.metadata))
                    .collect()
            })
            .unwrap_or_default();
        if holders.is_empty() {
            self.busy.clone()
        } else {
            format!("{} by {}", self.busy, holders.join(", "))
        }
    }

    /// Whether the node in the way (with `metadata`) is a waiter, not a
    /// holder: a reader queued behind a waiting writer.
    fn is_queued(&self, metadata: &str) -> bool {
        let Some(zkw) = self.zkw.upgrade() else {
            return false;
        };
        crate::ls::list(&zkw, &self.znode).is_ok_and(|listing| {
            let entries = &listing.entries;
            entries
                .iter()
                .any(|e| e.state == "waiter" && e.metadata == metadata)
                && !entries
                    .iter()
                    .any(|e| e.state == "holder" && e.metadata == metadata)
        })
    }

    /// The metadata of the node in the way, from the lock's
    /// `MetadataHandler` (on the acquiring thread): once per round of waiting.
    fn seen(&self, metadata: &[u8]) {
        let m = String::from_utf8_lossy(metadata).into_owned();
        let queued = !self.quiet && self.is_queued(&m);
        let changed = {
            let mut h = self.holder.lock();
            let changed = h.metadata.as_deref() != Some(m.as_str()) || h.queued != queued;
            h.metadata = Some(m);
            h.queued = queued;
            changed
        };
        if changed && !self.tty && !self.quiet {
            eprintln!("zklock: waiting for {}: {}", self.what, self.describe());
        }
    }

    /// Redraws the live line until `done` (terminal only).
    fn tick(self: Arc<Self>, done: Receiver<()>) {
        loop {
            if let Ok(()) | Err(crossbeam_channel::RecvTimeoutError::Disconnected) =
                done.recv_timeout(Duration::from_millis(100))
            {
                break;
            }
            if self.start.elapsed() < Duration::from_millis(300) {
                continue; // no flicker for a lock that is free
            }
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r\x1b[2Kzklock: waiting {} for {}: {}",
                human(self.start.elapsed()),
                self.what,
                self.describe()
            );
            let _ = err.flush();
        }
        if self.start.elapsed() >= Duration::from_millis(300) {
            eprint!("\r\x1b[2K");
        }
    }
}

/// The default metadata: "pid <pid> on <host>: <command>" ("pid <pid> on
/// <host>" for a hold without a command).
pub(crate) fn default_metadata(command: &[std::ffi::OsString]) -> String {
    let cmd: Vec<String> = command
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let who = format!("pid {} on {}", std::process::id(), crate::host_name());
    if cmd.is_empty() {
        who
    } else {
        format!("{who}: {}", cmd.join(" "))
    }
}

/// Takes the target `make` builds (with the waiting display's metadata
/// handler and the channel of its lost-lock events), runs the command while
/// holding it (or, with no command, holds it until a signal: [`hold`]),
/// gives it back: `lock`, `read-lock` and `semaphore` alike.
///
/// Silent unless `-v` (flock's habit): the waiting lines, "got ... after",
/// a lock taken at once (`-n`), a timeout and a signal while waiting are
/// told by the exit code alone. Errors, a lost lock and a lock in doubt are
/// always told.
fn hold_and_run(
    zkw: &ZooKeeperWatcher,
    g: &Global,
    a: &LockArgs,
    what: &str,
    busy: &str,
    make: impl FnOnce(Arc<dyn MetadataHandler>, Sender<LockEvent>) -> Result<Box<dyn Target>, Error>,
) -> anyhow::Result<i32> {
    let znode = a.znode.as_str();
    let argv = a.run.argv();
    let timeout = if a.nonblock {
        Some(Duration::ZERO)
    } else {
        a.timeout
    };
    let talk = g.verbose > 0;
    let try_once = timeout == Some(Duration::ZERO);
    let quiet = try_once || !talk;
    let waiting = Arc::new(Waiting {
        znode: znode.to_string(),
        what: what.to_string(),
        busy: busy.to_string(),
        holder: Mutex::new(Holder::default()),
        tty: std::io::stderr().is_terminal() && !quiet,
        quiet,
        start: Instant::now(),
        zkw: zkw.downgrade(),
    });
    let w = waiting.clone();
    let handler: Arc<dyn MetadataHandler> = Arc::new(move |m: &[u8]| w.seen(m));
    let (events_tx, events): (Sender<LockEvent>, Receiver<LockEvent>) = unbounded();
    let target = make(handler, events_tx)?;
    let cancel = target.canceller();
    // A signal while waiting cancels the attempt (its node is removed); while
    // the command runs, it is forwarded to the command.
    let signals = SignalWatch::start(move |_| cancel())?;

    // Ready before the lock is: starting the command is then one fork/exec.
    // (None to hold without a command.)
    let watchdog = if argv.is_empty() {
        None
    } else {
        Some(Watchdog::start()?)
    };

    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
    let ticker = waiting.tty.then(|| {
        let w = waiting.clone();
        std::thread::spawn(move || w.tick(done_rx))
    });
    let taken = target.take(timeout);
    let _ = done_tx.send(());
    if let Some(t) = ticker {
        let _ = t.join();
    }
    let waited = waiting.holder.lock().metadata.is_some();

    let granted = match taken {
        Ok(Some(granted)) => granted,
        Ok(None) => {
            if !talk {
                // Silent, as flock: the exit code says it.
            } else if try_once {
                eprintln!(
                    "zklock: {what} is taken ({}); gave up at once (-n / -t 0)",
                    waiting.describe_now()
                );
            } else {
                eprintln!(
                    "zklock: timed out after {} waiting for {what} ({})",
                    human(waiting.start.elapsed()),
                    waiting.describe_now()
                );
            }
            return Ok(a.conflict_exit_code.map_or(EXIT_TIMEOUT, i32::from));
        }
        Err(Error::Cancelled { .. }) => {
            let sig = signals.received().unwrap_or(15);
            if talk {
                eprintln!(
                    "zklock: {} while waiting for {what}; left the queue",
                    signal_name(sig)
                );
            }
            return Ok(128 + sig);
        }
        Err(e @ Error::MixedDialect { .. }) => {
            eprintln!(
                "zklock: {e}: not taking {what} (clients of different dialects do not see \
                 each other's nodes; `zklock ls {znode}` shows them)"
            );
            return Ok(EXIT_MIXED);
        }
        Err(e) if e.is(zklock::ZkError::NoAuth) => {
            return Err(anyhow::Error::new(e).context(format!(
                "acquiring {what}: its directory's ACL does not let this identity take part \
                 (`zklock ls {znode} --show-acl` shows it; its creator can name this \
                 identity with --acl-id)"
            )))
        }
        Err(e) => return Err(anyhow::Error::new(e).context(format!("acquiring {what}"))),
    };
    if let Some(sig) = signals.received() {
        // The signal came as the lock was granted: give it back, run nothing.
        let _ = granted.release();
        if talk {
            eprintln!(
                "zklock: {} while acquiring {what}; released it",
                signal_name(sig)
            );
        }
        return Ok(128 + sig);
    }
    if waited && talk {
        eprintln!(
            "zklock: got {what} after {}",
            human(waiting.start.elapsed())
        );
    }
    log::info!(
        "holding {} (fencing token {})",
        granted.node(),
        granted.fencing_token()
    );
    let env = [
        ("ZKLOCK_LOCK", znode.to_string()),
        ("ZKLOCK_LOCK_NODE", granted.node().to_string()),
        ("ZKLOCK_FENCING_TOKEN", granted.fencing_token().to_string()),
    ];
    let Some(watchdog) = watchdog else {
        let session = zkw.recoverable_zookeeper().session_id();
        return hold(
            granted, znode, what, a.json, session, talk, &signals, &events,
        );
    };
    let child = match spawn(watchdog, &argv, &env) {
        Ok(c) => c,
        Err((code, message)) => {
            let _ = granted.release();
            eprintln!("zklock: {message}");
            return Ok(code);
        }
    };
    let ended = supervise(
        child,
        &signals,
        &events,
        a.run.kill_after,
        |event| match event {
            LockEvent::InDoubt => {
                eprintln!(
                    "zklock: connection to ZooKeeper lost: {what} is in doubt \
                 (held only while the session lives)"
                );
                Verdict::Continue
            }
            LockEvent::Restored => {
                eprintln!("zklock: reconnected: {what} is held again");
                Verdict::Continue
            }
            LockEvent::Lost => {
                eprintln!("zklock: lost {what}; sending SIGTERM to the command");
                Verdict::Stop(EXIT_LOST)
            }
            // A signal a later zklock adds (LockEvent is non-exhaustive): told,
            // and the lock is still held until Lost says otherwise.
            other => {
                eprintln!("zklock: {what}: {other:?}");
                Verdict::Continue
            }
        },
    )?;
    match ended {
        Ended::Stopped(code) => Ok(code),
        Ended::Exited(code) => match granted.release() {
            Ok(()) => Ok(code),
            Err(Error::LockLost { .. }) => {
                eprintln!("zklock: {what} was lost before the command finished");
                Ok(EXIT_LOST)
            }
            Err(e) => {
                eprintln!("zklock: releasing {what}: {e}");
                Ok(if code == 0 { EXIT_ERROR } else { code })
            }
        },
    }
}

/// `zklock lock PATH` with no command: prints the held lock on stdout (its
/// node and fencing token, or `--json`'s object) and holds it until SIGINT,
/// SIGTERM or SIGHUP (then releases it: exit 0), or until it is lost (said
/// on stderr: exit 3). A lock in doubt (connection lost) is told, and held
/// again once reconnected.
#[allow(clippy::too_many_arguments)]
fn hold(
    granted: Box<dyn Grant>,
    znode: &str,
    what: &str,
    json: bool,
    session: i64,
    talk: bool,
    signals: &SignalWatch,
    events: &Receiver<LockEvent>,
) -> anyhow::Result<i32> {
    let line = if json {
        serde_json::json!({
            "lock": znode,
            "node": granted.node(),
            "fencing_token": granted.fencing_token(),
            "session": format!("0x{session:x}"),
        })
        .to_string()
    } else {
        format!("{} {}", granted.node(), granted.fencing_token())
    };
    {
        // A reader gone (a closed pipe) does not end the hold: the signal does.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
    if talk {
        eprintln!("zklock: holding {what} until SIGINT or SIGTERM");
    }
    let never = crossbeam_channel::never();
    let mut events = events;
    loop {
        crossbeam_channel::select! {
            recv(signals.signals()) -> sig => {
                let sig = sig.unwrap_or(15);
                return match granted.release() {
                    Ok(()) => {
                        if talk {
                            eprintln!("zklock: {}: released {what}", signal_name(sig));
                        }
                        Ok(0)
                    }
                    Err(Error::LockLost { .. }) => {
                        eprintln!("zklock: {what} was lost before {}", signal_name(sig));
                        Ok(EXIT_LOST)
                    }
                    Err(e) => {
                        eprintln!("zklock: releasing {what}: {e}");
                        Ok(EXIT_ERROR)
                    }
                };
            }
            recv(events) -> event => match event {
                Ok(LockEvent::Lost) => {
                    eprintln!("zklock: lost {what}: no longer held");
                    let _ = granted.release();
                    return Ok(EXIT_LOST);
                }
                Ok(LockEvent::InDoubt) => eprintln!(
                    "zklock: connection to ZooKeeper lost: {what} is in doubt (held only while \
                     the session lives)"
                ),
                Ok(LockEvent::Restored) => eprintln!("zklock: reconnected: {what} is held again"),
                Ok(other) => eprintln!("zklock: {what}: {other:?}"),
                // No more events: only a signal ends the hold now.
                Err(_) => events = &never,
            },
        }
    }
}
