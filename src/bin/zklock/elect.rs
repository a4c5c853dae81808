//! `zklock elect`: run a command only while leader.

use std::io::Write;
use std::sync::Arc;

use crossbeam_channel::{select, unbounded};
use zklock::client::{WatchedEvent, Watcher};
use zklock::recipes::election::{ElectionEventType, LeaderElectionSupport};
use zklock::{ZkError, ZooKeeperWatcher};

use crate::supervise::{signal_name, spawn, supervise, Ended, SignalWatch, Verdict, Watchdog};
use crate::{connect, ElectArgs, Global, LeaderArgs, EXIT_ERROR, EXIT_LOST};

/// `zklock elect`. Silent unless `-v` (who leads while waiting, elected),
/// as `lock`; a lost leadership is always told.
pub(crate) fn run(g: &Global, a: &ElectArgs) -> anyhow::Result<i32> {
    if a.run.argv().is_empty() {
        // Only the locks hold without a command.
        return Err(zklock::Error::BadArguments(
            "elect needs a command: `zklock elect PATH -- CMD ARGS...` or -c 'CMD'".into(),
        )
        .into());
    }
    let zkw = connect(g)?;
    let result = lead_and_run(&zkw, a, g.verbose > 0);
    if let Err(e) = zkw.close() {
        log::warn!("closing the session: {e}");
    }
    result
}

fn lead_and_run(zkw: &ZooKeeperWatcher, a: &ElectArgs, talk: bool) -> anyhow::Result<i32> {
    let znode = a.znode.as_str();
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("{}-{}", crate::host_name(), std::process::id()));
    let candidate = LeaderElectionSupport::new(zkw, znode, &name)?;
    let (tx, events) = unbounded();
    candidate.add_listener(move |e: ElectionEventType| {
        let _ = tx.send(e);
    });
    let signals = SignalWatch::start(|_| {})?;
    // Ready before the leadership is: starting the command is one fork/exec.
    let watchdog = Watchdog::start()?;
    candidate.start()?;

    // Wait to be elected; say who leads meanwhile.
    let mut shown: Option<String> = None;
    loop {
        if candidate.has_leadership() {
            break;
        }
        select! {
            recv(signals.signals()) -> sig => {
                let sig = sig.unwrap_or(15);
                let _ = candidate.stop();
                if talk {
                    eprintln!("zklock: {} while waiting to lead {znode}; withdrew", signal_name(sig));
                }
                return Ok(128 + sig);
            }
            recv(events) -> event => match event {
                Ok(ElectionEventType::ReadyComplete) => {
                    let leader = candidate.get_leader_host_name().ok().flatten();
                    if talk && leader.is_some() && leader != shown {
                        eprintln!(
                            "zklock: {name} waiting to lead {znode}; the leader is {}",
                            leader.as_deref().unwrap_or("?")
                        );
                        shown = leader;
                    }
                }
                Ok(ElectionEventType::Failed) | Err(_) => {
                    eprintln!("zklock: the election on {znode} failed (session ended or offer removed)");
                    return Ok(EXIT_ERROR);
                }
                Ok(_) => {}
            },
        }
    }
    let offer = candidate.offer_node().unwrap_or_default();
    // The fencing token: the offer's creation zxid. Leaders are elected in
    // offer order, so each new leader's token is larger (as a lock's).
    let token = match zkw.recoverable_zookeeper().exists(&offer, false) {
        Ok(Some(stat)) => stat.czxid,
        Ok(None) => {
            let _ = candidate.stop();
            eprintln!("zklock: the offer {offer} vanished as {name} was elected");
            return Ok(EXIT_LOST);
        }
        Err(e) => {
            let _ = candidate.stop();
            return Err(anyhow::Error::new(e).context(format!("reading the offer {offer}")));
        }
    };
    if talk {
        eprintln!("zklock: {name} is the leader of {znode}; starting the command");
    }
    let env = [
        ("ZKLOCK_ELECTION", znode.to_string()),
        ("ZKLOCK_LEADER_NODE", offer),
        ("ZKLOCK_LEADER_NAME", name.clone()),
        ("ZKLOCK_FENCING_TOKEN", token.to_string()),
    ];
    let child = match spawn(watchdog, &a.run.argv(), &env) {
        Ok(c) => c,
        Err((code, message)) => {
            let _ = candidate.stop();
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
            ElectionEventType::LeadershipInDoubt => {
                eprintln!(
                    "zklock: connection to ZooKeeper lost: leadership of {znode} is in doubt \
                 (kept only while the session lives)"
                );
                Verdict::Continue
            }
            ElectionEventType::LeadershipRestored => {
                eprintln!("zklock: reconnected: {name} still leads {znode}");
                Verdict::Continue
            }
            ElectionEventType::LeadershipLost => {
                eprintln!(
                    "zklock: {name} lost the leadership of {znode}; sending SIGTERM to the command"
                );
                Verdict::Stop(EXIT_LOST)
            }
            _ => Verdict::Continue,
        },
    )?;
    // Withdraw the offer at once: the next candidate is told now.
    let _ = candidate.stop();
    Ok(match ended {
        Ended::Exited(code) | Ended::Stopped(code) => code,
    })
}

/// `zklock leader`: the current leader's name on stdout (exit 1 when there is
/// none); with `--watch`, a line each time the leader changes (an empty line
/// when there is none) until a signal.
pub(crate) fn leader(g: &Global, a: &LeaderArgs) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let result = show_leader(&zkw, a);
    let _ = zkw.close();
    result
}

/// The leader's name, if any.
fn current(zkw: &ZooKeeperWatcher, znode: &str) -> anyhow::Result<Option<String>> {
    Ok(crate::ls::list(zkw, znode)?
        .entries
        .into_iter()
        .find(|e| e.state == "leader")
        .map(|e| e.metadata))
}

/// What `leader --watch` prints when the election has no leader.
pub(crate) const NO_LEADER: &str = "(no leader)";

fn show_leader(zkw: &ZooKeeperWatcher, a: &LeaderArgs) -> anyhow::Result<i32> {
    let znode = a.znode.as_str();
    if !a.watch {
        return Ok(match current(zkw, znode)? {
            Some(name) => {
                println!("{name}");
                0
            }
            None => {
                eprintln!("zklock: {znode} has no leader");
                EXIT_ERROR
            }
        });
    }
    let signals = SignalWatch::start(|_| {})?;
    let (tx, changed) = unbounded::<()>();
    let watcher: Arc<dyn Watcher> = Arc::new(move |_e: WatchedEvent| {
        let _ = tx.send(());
    });
    let rzk = zkw.recoverable_zookeeper();
    let mut shown: Option<Option<String>> = None;
    loop {
        // The watch first, then the read: no change is missed between them.
        match rzk.get_children_watch(znode, &watcher) {
            Ok(_) => {}
            Err(e) if e.is(ZkError::NoNode) => {
                if rzk.exists_watch(znode, &watcher)?.is_some() {
                    continue; // created meanwhile
                }
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("watching {znode}"))),
        }
        let now = current(zkw, znode)?;
        if shown.as_ref() != Some(&now) {
            let mut out = std::io::stdout().lock();
            let written =
                writeln!(out, "{}", now.as_deref().unwrap_or(NO_LEADER)).and_then(|()| out.flush());
            if written.is_err() {
                return Ok(0); // the reader went away (a closed pipe)
            }
            shown = Some(now);
        }
        select! {
            recv(changed) -> _ => {}
            recv(signals.signals()) -> _ => return Ok(0),
        }
        zkw.check_session()?;
    }
}
