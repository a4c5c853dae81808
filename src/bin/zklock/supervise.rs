//! Signals and the child command: a thread watches SIGINT/SIGTERM/SIGHUP, and
//! the main thread runs the command while watching the lock (or leadership).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{after, never, select, Receiver};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How long a command has to exit after SIGTERM before it gets SIGKILL.
pub(crate) const KILL_AFTER: Duration = Duration::from_secs(10);

/// Watches SIGINT, SIGTERM and SIGHUP on a thread of its own. The first signal
/// is remembered; each is passed to `on_signal` (on the watching thread) and
/// sent on [`SignalWatch::signals`].
pub(crate) struct SignalWatch {
    first: Arc<AtomicI32>,
    rx: Receiver<i32>,
    handle: signal_hook::iterator::Handle,
}

impl SignalWatch {
    pub(crate) fn start(on_signal: impl Fn(i32) + Send + 'static) -> io::Result<SignalWatch> {
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let handle = signals.handle();
        let first = Arc::new(AtomicI32::new(0));
        let (tx, rx) = crossbeam_channel::unbounded();
        let f = first.clone();
        std::thread::Builder::new()
            .name("zklock-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let _ = f.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                    log::info!("received signal {sig}");
                    on_signal(sig);
                    let _ = tx.send(sig);
                }
            })?;
        Ok(SignalWatch { first, rx, handle })
    }

    /// The first signal received, if any.
    pub(crate) fn received(&self) -> Option<i32> {
        match self.first.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    pub(crate) fn signals(&self) -> &Receiver<i32> {
        &self.rx
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        self.handle.close();
    }
}

/// A signal's name for messages.
pub(crate) fn signal_name(sig: i32) -> String {
    Signal::try_from(sig).map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string())
}

/// The exit code of a finished command, as a shell reports it (128 + signal).
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Starts `argv` with `env` added. `Err` carries the exit code a shell would
/// give (127 not found, 126 not executable) and a message.
pub(crate) fn spawn(argv: &[OsString], env: &[(&str, String)]) -> Result<Child, (i32, String)> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| (2, "no command given".to_string()))?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    // The command stays in zklock's process group, so Ctrl-C at a terminal
    // reaches it too; the handlers signal-hook installed are reset by exec.
    cmd.spawn().map_err(|e| {
        let code = match e.kind() {
            io::ErrorKind::NotFound => 127,
            _ => 126,
        };
        (
            code,
            format!("cannot run {}: {e}", program.to_string_lossy()),
        )
    })
}

/// Sends `sig` to the child (if it has not been reaped yet).
pub(crate) fn signal_child(child: &mut Child, sig: Signal) {
    if matches!(child.try_wait(), Ok(None)) {
        let Ok(pid) = i32::try_from(child.id()) else {
            return;
        };
        if let Err(e) = kill(Pid::from_raw(pid), sig) {
            log::warn!("sending {sig} to the command: {e}");
        }
    }
}

/// What the supervising loop is told besides signals.
pub(crate) enum Verdict {
    /// Keep running the command.
    Continue,
    /// Stop the command (SIGTERM, then SIGKILL after [`KILL_AFTER`]) and return
    /// [`Ended::Stopped`] with this exit code.
    Stop(i32),
}

/// How a supervised command ended.
pub(crate) enum Ended {
    /// It exited by itself (or after a forwarded signal) with this code.
    Exited(i32),
    /// It was stopped because the watch said so; zklock exits with this code.
    Stopped(i32),
}

/// Runs until `child` exits: forwards SIGINT/SIGTERM/SIGHUP to it, passes
/// each message of `events` to `on_event`, and stops the command when
/// `on_event` says so.
pub(crate) fn supervise<E>(
    mut child: Child,
    signals: &SignalWatch,
    events: &Receiver<E>,
    mut on_event: impl FnMut(E) -> Verdict,
) -> io::Result<Ended> {
    let mut stopping: Option<(i32, Instant)> = None;
    let mut killed = false;
    loop {
        if let Some(status) = child.try_wait()? {
            let code = exit_code(status);
            return Ok(match stopping {
                Some((code, _)) => Ended::Stopped(code),
                None => Ended::Exited(code),
            });
        }
        if let Some((_, since)) = stopping {
            if !killed && since.elapsed() >= KILL_AFTER {
                eprintln!(
                    "zklock: the command did not exit {} after SIGTERM; sending SIGKILL",
                    crate::duration::human(KILL_AFTER)
                );
                signal_child(&mut child, Signal::SIGKILL);
                killed = true;
            }
        }
        let events = if stopping.is_some() { &never() } else { events };
        select! {
            recv(signals.signals()) -> sig => {
                if let Ok(sig) = sig {
                    if let Ok(s) = Signal::try_from(sig) {
                        log::info!("forwarding {s} to the command");
                        signal_child(&mut child, s);
                    }
                }
            }
            recv(events) -> ev => {
                if let Ok(ev) = ev {
                    if let Verdict::Stop(code) = on_event(ev) {
                        signal_child(&mut child, Signal::SIGTERM);
                        stopping = Some((code, Instant::now()));
                    }
                }
            }
            recv(after(Duration::from_millis(20))) -> _ => {}
        }
    }
}
