//! The queue run's checker: every item taken exactly once, none lost.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::check::{counted, plain_violation, reconfigs, w_of, Report};
use super::event::{Event, CONTROLLER};

/// Checks a queue run's events (workers' and controller's, any order):
///
/// - **at most once**: no item (a unique op) is taken twice, counting the
///   controller's final drain (`left`);
/// - **no phantom**: every item taken was offered (`offer_sent`);
/// - **none lost**: every item whose offer was confirmed (`offered`) is taken
///   or left at the end (claims are exactly once: a claim whose commit lost
///   its reply reads its receipt), except at most one item per consumer
///   thread killed (kill -9) in the middle of a `take` (after its commit,
///   before its log). A `take` failing with an error naming an item is no
///   excuse: it is counted in the figures, and its item must be taken or left
///   all the same;
/// - **liveness**: every worker took an item after the `calm` phase began;
///   no panic; every worker exited cleanly; no controller trouble.
pub fn check_queue(events: &[Event]) -> Report {
    let mut events: Vec<&Event> = events.iter().collect();
    events.sort_by_key(|e| e.ts);
    let mut report = Report::default();
    let mut sent: HashSet<&str> = HashSet::new();
    let mut offered: HashMap<&str, &str> = HashMap::new();
    let mut taken: HashMap<&str, u32> = HashMap::new();
    let mut in_doubt: HashSet<&str> = HashSet::new();
    // Per worker and thread: a take in flight (started, no outcome yet).
    let mut taking: HashMap<(u32, &str), bool> = HashMap::new();
    let mut killed_in_take = 0u64;
    let mut workers: HashSet<u32> = HashSet::new();
    let mut took_after_calm: HashSet<u32> = HashSet::new();
    let mut calm = false;
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut left = 0u64;
    let mut faults: BTreeMap<&str, u64> = BTreeMap::new();
    for e in &events {
        *counts.entry(e.kind.as_str()).or_default() += 1;
        report.violations.extend(plain_violation(e));
        let w = w_of(e);
        if e.worker == CONTROLLER {
            match e.kind.as_str() {
                "phase" => calm |= e.get("name") == Some("calm"),
                "fault" => *faults.entry(e.get("type").unwrap_or("?")).or_default() += 1,
                "worker_spawned" => {
                    workers.insert(w);
                }
                "worker_killed" => {
                    for ((_, _), busy) in taking.iter_mut().filter(|((x, _), _)| *x == w) {
                        if std::mem::take(busy) {
                            killed_in_take += 1;
                        }
                    }
                }
                "left" => {
                    left += 1;
                    *taken.entry(e.get("op").unwrap_or("?")).or_default() += 1;
                }
                _ => {}
            }
            continue;
        }
        let thread = e.get("t").unwrap_or("?");
        match e.kind.as_str() {
            "offer_sent" => {
                sent.insert(e.get("op").unwrap_or("?"));
            }
            "offered" => {
                offered.insert(e.get("op").unwrap_or("?"), e.get("path").unwrap_or("?"));
            }
            "take_start" => {
                taking.insert((e.worker, thread), true);
            }
            "took" | "take_none" | "take_failed" => {
                taking.insert((e.worker, thread), false);
                if e.kind == "took" {
                    *taken.entry(e.get("op").unwrap_or("?")).or_default() += 1;
                    if calm {
                        took_after_calm.insert(e.worker);
                    }
                }
                if let Some(item) = e.get("item") {
                    in_doubt.insert(item);
                }
            }
            _ => {}
        }
    }
    let mut twice: Vec<_> = taken.iter().filter(|(_, &n)| n > 1).collect();
    twice.sort();
    for (op, n) in twice {
        report.violations.push(format!("item {op} taken {n} times"));
    }
    let mut phantoms: Vec<_> = taken.keys().filter(|op| !sent.contains(*op)).collect();
    phantoms.sort();
    for op in phantoms {
        report
            .violations
            .push(format!("item {op} taken but never offered"));
    }
    let mut lost: Vec<(&str, &str)> = offered
        .iter()
        .filter(|(op, _)| !taken.contains_key(*op))
        .map(|(op, path)| (*op, *path))
        .collect();
    lost.sort();
    if lost.len() as u64 > killed_in_take {
        report.violations.push(format!(
            "{} items lost (offered, never taken nor left), more than the {killed_in_take} takes cut by kill -9: {:?}",
            lost.len(),
            lost.iter().take(10).collect::<Vec<_>>()
        ));
    }
    if calm {
        let mut missing: Vec<_> = workers.difference(&took_after_calm).collect();
        missing.sort();
        for w in missing {
            report
                .violations
                .push(format!("worker {w} took no item after the faults stopped"));
        }
    }
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    report.fig("faults", counted(&faults));
    report.fig(
        "members added(rejoined)/removed by reconfig",
        reconfigs(events.iter().copied()),
    );
    report.fig("items offered (confirmed)", offered.len());
    report.fig(
        "offers in doubt / failed",
        format!("{}/{}", count("offer_unknown"), count("offer_failed")),
    );
    report.fig("items taken", count("took"));
    report.fig("items left at the end", left);
    // A failed take naming an item whose item nobody took: counted here, and
    // among the lost above (no excuse).
    let by_path: HashMap<&str, &str> = offered.iter().map(|(op, path)| (*path, *op)).collect();
    let dropped = in_doubt
        .iter()
        .filter(|path| by_path.get(*path).is_some_and(|op| !taken.contains_key(op)))
        .count();
    report.fig(
        "takes failed naming an item (of which never taken)",
        format!("{} ({dropped})", in_doubt.len()),
    );
    report.fig(
        "items lost to takes cut by kill -9 (allowed)",
        format!("{}/{killed_in_take}", lost.len()),
    );
    report
}
