//! `zklock elect`: run a command only while leader.

use crossbeam_channel::{select, unbounded};
use zklock::recipes::election::{ElectionEventType, LeaderElectionSupport};
use zklock::ZooKeeperWatcher;

use crate::supervise::{signal_name, spawn, supervise, Ended, SignalWatch, Verdict};
use crate::{connect, ElectArgs, Global, EXIT_ERROR, EXIT_LOST};

pub(crate) fn run(g: &Global, a: &ElectArgs) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let result = lead_and_run(&zkw, a);
    if let Err(e) = zkw.close() {
        log::warn!("closing the session: {e}");
    }
    result
}

fn lead_and_run(zkw: &ZooKeeperWatcher, a: &ElectArgs) -> anyhow::Result<i32> {
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
    candidate.start()?;

    // Wait to be elected; say who leads meanwhile.
    let mut shown: Option<String> = None;
    loop {
        if candidate.is_leader() {
            break;
        }
        select! {
            recv(signals.signals()) -> sig => {
                let sig = sig.unwrap_or(15);
                let _ = candidate.stop();
                eprintln!("zklock: {} while waiting to lead {znode}; withdrew", signal_name(sig));
                return Ok(128 + sig);
            }
            recv(events) -> event => match event {
                Ok(ElectionEventType::ReadyComplete) => {
                    let leader = candidate.get_leader_host_name().ok().flatten();
                    if leader.is_some() && leader != shown {
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
    eprintln!("zklock: {name} is the leader of {znode}; starting the command");
    let env = [
        ("ZKLOCK_ELECTION", znode.to_string()),
        ("ZKLOCK_LEADER_NODE", offer),
        ("ZKLOCK_LEADER_NAME", name.clone()),
    ];
    let child = match spawn(&a.command, &env) {
        Ok(c) => c,
        Err((code, message)) => {
            let _ = candidate.stop();
            eprintln!("zklock: {message}");
            return Ok(code);
        }
    };
    let ended = supervise(child, &signals, &events, |event| match event {
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
    })?;
    // Withdraw the offer at once: the next candidate is told now.
    let _ = candidate.stop();
    Ok(match ended {
        Ended::Exited(code) | Ended::Stopped(code) => code,
    })
}
