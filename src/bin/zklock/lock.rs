//! `zklock lock` / `zklock read-lock`: run a command while holding the lock.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use parking_lot::Mutex;
use zklock::lock::{
    InterProcessLock, LockEvent, LockKind, MetadataHandler, ReadLockKind, WriteLockKind,
    ZkInterProcessLockBase,
};
use zklock::{Error, WeakZooKeeperWatcher, ZooKeeperWatcher};

use crate::duration::human;
use crate::supervise::{signal_name, spawn, supervise, Ended, SignalWatch, Verdict, Watchdog};
use crate::{connect, Global, LockArgs, EXIT_ERROR, EXIT_LOST, EXIT_TIMEOUT};

pub(crate) fn run(g: &Global, a: &LockArgs, write: bool) -> anyhow::Result<i32> {
    if write {
        run_kind::<WriteLockKind>(g, a, "write")
    } else {
        run_kind::<ReadLockKind>(g, a, "read")
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
    kind: &'static str,
    holder: Mutex<Holder>,
    tty: bool,
    /// `-t 0` / `-n`: one try, no "waiting" lines.
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
            (None, _) => "held".to_string(),
        }
    }

    /// Whether the node in the way (with `metadata`) is a waiter, not a
    /// holder: a reader queued behind a waiting writer.
    fn is_queued(&self, metadata: &str) -> bool {
        let Some(zkw) = self.zkw.upgrade() else {
            return false;
        };
        crate::ls::list(&zkw, &self.znode).is_ok_and(|entries| {
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
            eprintln!(
                "zklock: waiting for the {} lock {}: {}",
                self.kind,
                self.znode,
                self.describe()
            );
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
                "\r\x1b[2Kzklock: waiting {} for the {} lock {}: {}",
                human(self.start.elapsed()),
                self.kind,
                self.znode,
                self.describe()
            );
            let _ = err.flush();
        }
        if self.start.elapsed() >= Duration::from_millis(300) {
            eprint!("\r\x1b[2K");
        }
    }
}

fn default_metadata(command: &[std::ffi::OsString]) -> String {
    let cmd: Vec<String> = command
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    format!(
        "pid {} on {}: {}",
        std::process::id(),
        crate::host_name(),
        cmd.join(" ")
    )
}

fn run_kind<K: LockKind>(g: &Global, a: &LockArgs, kind: &'static str) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let result = hold_and_run::<K>(&zkw, a, kind);
    // Closing the session removes anything of ours at once (not after the
    // session timeout).
    if let Err(e) = zkw.close() {
        log::warn!("closing the session: {e}");
    }
    result
}

fn hold_and_run<K: LockKind>(
    zkw: &ZooKeeperWatcher,
    a: &LockArgs,
    kind: &'static str,
) -> anyhow::Result<i32> {
    let znode = a.znode.as_str();
    let argv = a.run.argv();
    let metadata = a
        .metadata
        .clone()
        .unwrap_or_else(|| default_metadata(&argv));
    let timeout = if a.nonblock {
        Some(Duration::ZERO)
    } else {
        a.timeout
    };
    let quiet = timeout == Some(Duration::ZERO);
    let waiting = Arc::new(Waiting {
        znode: znode.to_string(),
        kind,
        holder: Mutex::new(Holder::default()),
        tty: std::io::stderr().is_terminal() && !quiet,
        quiet,
        start: Instant::now(),
        zkw: zkw.downgrade(),
    });
    let w = waiting.clone();
    let handler: Arc<dyn MetadataHandler> = Arc::new(move |m: &[u8]| w.seen(m));
    let (events_tx, events): (Sender<LockEvent>, Receiver<LockEvent>) = unbounded();
    let lock = ZkInterProcessLockBase::<K>::new(zkw, znode, metadata.as_bytes(), Some(handler))?
        .with_dialect(a.dialect)
        .with_lock_listener(move |_path: &str, event: LockEvent| {
            let _ = events_tx.send(event);
        });
    let canceller = lock.canceller();
    // A signal while waiting cancels the attempt (its node is removed); while
    // the command runs, it is forwarded to the command.
    let signals = SignalWatch::start(move |_| canceller.cancel())?;

    // Ready before the lock is: starting the command is then one fork/exec.
    let watchdog = Watchdog::start()?;

    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
    let ticker = waiting.tty.then(|| {
        let w = waiting.clone();
        std::thread::spawn(move || w.tick(done_rx))
    });
    let acquired = match timeout {
        Some(t) => lock.try_acquire(t),
        None => lock.acquire().map(|()| true),
    };
    let _ = done_tx.send(());
    if let Some(t) = ticker {
        let _ = t.join();
    }
    let waited = waiting.holder.lock().metadata.is_some();

    match acquired {
        Ok(true) => {}
        Ok(false) => {
            if quiet {
                eprintln!(
                    "zklock: the {kind} lock {znode} is taken ({}); gave up at once (-n / -t 0)",
                    waiting.describe()
                );
            } else {
                eprintln!(
                    "zklock: timed out after {} waiting for the {kind} lock {znode} ({})",
                    human(waiting.start.elapsed()),
                    waiting.describe()
                );
            }
            return Ok(a.conflict_exit_code.map_or(EXIT_TIMEOUT, i32::from));
        }
        Err(Error::Cancelled { .. }) => {
            let sig = signals.received().unwrap_or(15);
            eprintln!(
                "zklock: {} while waiting for the {kind} lock {znode}; left the queue",
                signal_name(sig)
            );
            return Ok(128 + sig);
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("acquiring the {kind} lock {znode}")))
        }
    }
    if let Some(sig) = signals.received() {
        // The signal came as the lock was granted: give it back, run nothing.
        let _ = lock.release();
        eprintln!(
            "zklock: {} while acquiring the {kind} lock {znode}; released it",
            signal_name(sig)
        );
        return Ok(128 + sig);
    }
    let granted = lock
        .acquired_lock()
        .ok_or_else(|| anyhow::anyhow!("the {kind} lock {znode} was lost as it was granted"))?;
    if waited {
        eprintln!(
            "zklock: got the {kind} lock {znode} after {}",
            human(waiting.start.elapsed())
        );
    }
    log::info!(
        "holding {} (fencing token {})",
        granted.path,
        granted.fencing_token()
    );
    let env = [
        ("ZKLOCK_LOCK", znode.to_string()),
        ("ZKLOCK_LOCK_NODE", granted.path.clone()),
        ("ZKLOCK_FENCING_TOKEN", granted.fencing_token().to_string()),
    ];
    let child = match spawn(watchdog, &argv, &env) {
        Ok(c) => c,
        Err((code, message)) => {
            let _ = lock.release();
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
                    "zklock: connection to ZooKeeper lost: the {kind} lock {znode} is in doubt \
                 (held only while the session lives)"
                );
                Verdict::Continue
            }
            LockEvent::Restored => {
                eprintln!("zklock: reconnected: the {kind} lock {znode} is held again");
                Verdict::Continue
            }
            LockEvent::Lost => {
                eprintln!("zklock: lost the {kind} lock {znode}; sending SIGTERM to the command");
                Verdict::Stop(EXIT_LOST)
            }
        },
    )?;
    match ended {
        Ended::Stopped(code) => Ok(code),
        Ended::Exited(code) => match lock.release() {
            Ok(()) => Ok(code),
            Err(Error::LockLost { .. }) => {
                eprintln!("zklock: the {kind} lock {znode} was lost before the command finished");
                Ok(EXIT_LOST)
            }
            Err(e) => {
                eprintln!("zklock: releasing the {kind} lock {znode}: {e}");
                Ok(if code == 0 { EXIT_ERROR } else { code })
            }
        },
    }
}
