//! Signals and the child command: a thread watches SIGINT/SIGTERM/SIGHUP, and
//! the main thread runs the command while watching the lock (or leadership).
//!
//! # The command's process group and its watchdog
//!
//! The command runs in a process group of its own, led by a watchdog: a tiny
//! `sh` that ignores SIGINT, SIGTERM and SIGHUP and reads a pipe from zklock.
//! zklock holds the pipe's write end (close-on-exec, so the command does not
//! inherit it). When zklock dies in any way — `kill -9` included — the kernel
//! closes that end, the watchdog reads EOF and sends SIGKILL to the whole
//! group: the command and everything it started that stayed in its group
//! (a shell's background jobs, pipelines) die at once, before the session
//! of the dead zklock expires and another host gets the lock (or the
//! leadership). The watchdog is started before the command, so there is no
//! moment when the command runs unwatched. No `unsafe` code is needed.
//!
//! What this cannot cover: a process that leaves the group (`setsid`,
//! `setpgid`, a daemon that double-forks into a session of its own), and the
//! watchdog itself killed with SIGKILL together with zklock
//! (`kill -9 -- -PGID` of both groups).
//!
//! Signals for the command go to its whole group (the watchdog ignores
//! them), as a terminal's Ctrl-C would. When zklock runs in the foreground of
//! a terminal, the command's group is given the terminal while it runs (so it
//! can read it and Ctrl-C reaches it directly), and zklock takes it back after.

use std::ffi::OsString;
use std::io::{self, IsTerminal};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{after, never, select, Receiver};
use nix::errno::Errno;
use nix::sys::signal::{killpg, pthread_sigmask, SigSet, SigmaskHow, Signal};
use nix::unistd::{getpgrp, tcgetpgrp, tcsetpgrp, Pid};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::duration::human;

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

/// The watchdog (see the module docs): ignores the signals meant for the
/// command, waits for EOF on stdin (zklock gone), then kills its own group.
const WATCHDOG: &str = "trap '' INT TERM HUP QUIT; while read -r _; do :; done; kill -s KILL 0";

/// The watchdog of a command's process group (see the module docs), started
/// before the lock is waited for, so that starting the command later costs
/// one `fork`/`exec`. Dropped unused, it exits (EOF) and is reaped.
pub(crate) struct Watchdog {
    child: Child,
    /// The group: the watchdog's PID. It stays valid while the watchdog lives,
    /// so signals to the group never reach a recycled PID.
    group: Pid,
    /// Whether zklock is the subreaper of what its command leaves behind
    /// (`PR_SET_CHILD_SUBREAPER`): then leftovers are found among zklock's
    /// own children, not by reading every process of the machine.
    subreaper: bool,
}

impl Watchdog {
    /// Starts the watchdog, a new process group's leader, and makes zklock a
    /// child subreaper (Linux).
    pub(crate) fn start() -> io::Result<Watchdog> {
        let child = Command::new("sh")
            .args(["-c", WATCHDOG, "zklock-watchdog"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot start sh for the command's watchdog: {e}"),
                )
            })?;
        let group = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let subreaper = nix::sys::prctl::set_child_subreaper(true).is_ok();
        Ok(Watchdog {
            child,
            group,
            subreaper,
        })
    }

    /// Ends the watchdog and anything left in its group (SIGKILL), reaps it.
    fn stop(&mut self) {
        let _ = killpg(self.group, Signal::SIGKILL);
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}

/// A command running under supervision, in its own process group.
pub(crate) struct Running {
    /// The command's exit status, sent once by the thread that waits for it
    /// (so the supervisor wakes when it exits, without polling).
    exited: Receiver<ExitStatus>,
    /// The group's watchdog.
    watchdog: Watchdog,
    /// The terminal's foreground group to give back, when the command got it.
    terminal: Option<Pid>,
}

/// Starts `argv` with `env` added, in the process group of `watchdog`. `Err`
/// carries the exit code a shell would give (127 not found, 126 not
/// executable) and a message.
pub(crate) fn spawn(
    watchdog: Watchdog,
    argv: &[OsString],
    env: &[(&str, String)],
) -> Result<Running, (i32, String)> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| (2, "no command given".to_string()))?;
    let group = watchdog.group;
    let mut cmd = Command::new(program);
    cmd.args(args).process_group(group.as_raw());
    for (k, v) in env {
        cmd.env(k, v);
    }
    // The terminal first: a command that reads it at once must not find its
    // group in the background (SIGTTIN would stop the whole group).
    let terminal = give_terminal(group);
    let mut child = cmd.spawn().map_err(|e| {
        if let Some(ours) = terminal {
            take_terminal(ours);
        }
        let code = match e.kind() {
            io::ErrorKind::NotFound => 127,
            _ => 126,
        };
        (
            code,
            format!("cannot run {}: {e}", program.to_string_lossy()),
        )
    })?;
    let (tx, exited) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("zklock-child".into())
        .spawn(move || {
            let status = child
                .wait()
                .unwrap_or_else(|_| ExitStatus::from_raw(1 << 8));
            let _ = tx.send(status);
        })
        .map_err(|e| (1, format!("cannot start a thread: {e}")))?;
    Ok(Running {
        exited,
        watchdog,
        terminal,
    })
}

/// When zklock is in the foreground of the terminal on stdin, makes `group`
/// the foreground group; returns zklock's group, to give the terminal back.
fn give_terminal(group: Pid) -> Option<Pid> {
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        return None;
    }
    let ours = getpgrp();
    if tcgetpgrp(&stdin).ok()? != ours {
        return None;
    }
    tcsetpgrp(&stdin, group).ok()?;
    Some(ours)
}

/// Gives the terminal back to zklock's group. SIGTTOU is blocked meanwhile:
/// zklock is then a background group, which `tcsetpgrp` would stop.
fn take_terminal(ours: Pid) {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut old = SigSet::empty();
    if pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old)).is_ok() {
        let _ = tcsetpgrp(io::stdin(), ours);
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    }
}

impl Running {
    /// Sends `sig` to the command's group (the watchdog ignores the signals
    /// zklock forwards).
    pub(crate) fn signal(&self, sig: Signal) {
        match killpg(self.watchdog.group, sig) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => log::warn!("sending {sig} to the command: {e}"),
        }
    }

    /// The processes left in the command's group besides the watchdog.
    fn leftovers(&self) -> Vec<u32> {
        let (group, watchdog) = (self.watchdog.group, self.watchdog.child.id());
        let candidates = if self.watchdog.subreaper {
            own_children()
        } else {
            None
        };
        let candidates = candidates.unwrap_or_else(all_pids);
        candidates
            .into_iter()
            .filter(|&p| p != watchdog && in_group(p, group))
            .collect()
    }

    /// After the command exited: what it left running in its group gets
    /// SIGTERM, then SIGKILL after `kill_after`; then the watchdog goes. The
    /// lock is released only after this, so nothing the command started
    /// runs without it.
    fn finish(mut self, kill_after: Duration) {
        let left = self.leftovers();
        if !left.is_empty() {
            eprintln!(
                "zklock: the command left {} process(es) running in its group; sending SIGTERM",
                left.len()
            );
            self.signal(Signal::SIGTERM);
            let end = Instant::now() + kill_after;
            while !self.leftovers().is_empty() {
                if Instant::now() >= end {
                    eprintln!(
                        "zklock: they did not exit {} after SIGTERM; sending SIGKILL",
                        human(kill_after)
                    );
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if let Some(ours) = self.terminal.take() {
            take_terminal(ours);
        }
        // SIGKILL to the group: the watchdog and anything still there.
        self.watchdog.stop();
    }
}

/// zklock's children (a subreaper's: what its command left behind is
/// re-parented here), from `/proc/self/task/*/children`; `None` when the
/// kernel does not offer that file.
fn own_children() -> Option<Vec<u32>> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).ok()?;
        pids.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    Some(pids)
}

/// Every process of the machine (`/proc`), when zklock cannot be a subreaper.
fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc").map_or_else(
        |_| Vec::new(),
        |dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        },
    )
}

/// Whether `pid` is a live (not zombie) member of process group `group`, from
/// `/proc/<pid>/stat`.
fn in_group(pid: u32, group: Pid) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    let state = fields.next();
    let pgrp = fields.nth(1).and_then(|s| s.parse::<i32>().ok());
    pgrp == Some(group.as_raw()) && !matches!(state, Some("Z" | "X"))
}

/// What the supervising loop is told besides signals.
pub(crate) enum Verdict {
    /// Keep running the command.
    Continue,
    /// Stop the command (SIGTERM, then SIGKILL after `kill_after`) and return
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

/// Runs until the command exits: forwards SIGINT/SIGTERM/SIGHUP to its
/// group, passes each message of `events` to `on_event`, and stops the
/// command when `on_event` says so (SIGTERM, SIGKILL after `kill_after`).
/// Wakes on the command's exit, a signal or an event; never polls. When it
/// returns, nothing of the command's group is left.
pub(crate) fn supervise<E>(
    running: Running,
    signals: &SignalWatch,
    events: &Receiver<E>,
    kill_after: Duration,
    mut on_event: impl FnMut(E) -> Verdict,
) -> io::Result<Ended> {
    let mut stopping: Option<i32> = None;
    let mut kill_at: Option<Instant> = None;
    loop {
        let events = if stopping.is_some() { &never() } else { events };
        let deadline = kill_at.map_or_else(never, |at| {
            after(at.saturating_duration_since(Instant::now()))
        });
        select! {
            recv(running.exited) -> status => {
                let code = status.map_or(1, exit_code);
                // The group goes before the lock is released.
                running.finish(kill_after);
                return Ok(match stopping {
                    Some(code) => Ended::Stopped(code),
                    None => Ended::Exited(code),
                });
            }
            recv(signals.signals()) -> sig => {
                if let Ok(sig) = sig {
                    if let Ok(s) = Signal::try_from(sig) {
                        log::info!("forwarding {s} to the command");
                        running.signal(s);
                    }
                }
            }
            recv(events) -> ev => {
                if let Ok(ev) = ev {
                    if let Verdict::Stop(code) = on_event(ev) {
                        running.signal(Signal::SIGTERM);
                        stopping = Some(code);
                        kill_at = Some(Instant::now() + kill_after);
                    }
                }
            }
            recv(deadline) -> _ => {
                eprintln!(
                    "zklock: the command did not exit {} after SIGTERM; sending SIGKILL",
                    human(kill_after)
                );
                running.signal(Signal::SIGKILL);
                kill_at = None;
            }
        }
    }
}
