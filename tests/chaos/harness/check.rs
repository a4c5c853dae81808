//! The checker: reads a run's events and reports every violation and the figures.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use super::event::{Event, CONTROLLER};

/// What the checker allows.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// How far past its `t` a `try_acquire(t)` may return: the documented call
    /// grace + 250 ms, plus slack for a loaded machine. Time the worker spent
    /// SIGSTOPped is subtracted first.
    pub try_extra: Duration,
}

impl Default for CheckConfig {
    /// [`DEFAULT_CALL_GRACE`](zklock::lock::DEFAULT_CALL_GRACE) + 250 ms + 1 s.
    fn default() -> CheckConfig {
        CheckConfig {
            try_extra: zklock::lock::DEFAULT_CALL_GRACE + Duration::from_millis(1250),
        }
    }
}

/// The checker's verdict on a run: violations (the run failed if there is
/// any), overlaps excused by a SIGSTOPped holder, and the figures.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every violation found, one line each.
    pub violations: Vec<String>,
    /// Overlaps no lock can prevent, so reported apart, not as violations
    /// (what fencing is for): the earlier holder was SIGSTOPped during its
    /// interval, or its session was closed by another handle (forced expiry)
    /// before the later grant — the server deletes the node before the holder
    /// can hear of it.
    pub excused_overlaps: Vec<String>,
    /// Named figures (counts, rates, latencies), in display order.
    pub figures: Vec<(String, String)>,
}

impl Report {
    /// No violation.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// A figure's value.
    pub fn figure(&self, name: &str) -> Option<&str> {
        self.figures
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn fig(&mut self, name: &str, value: impl fmt::Display) {
        self.figures.push((name.to_string(), value.to_string()));
    }

    /// Whether some violation contains `needle`.
    pub fn has_violation(&self, needle: &str) -> bool {
        self.violations.iter().any(|v| v.contains(needle))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "chaos report")?;
        for (k, v) in &self.figures {
            writeln!(f, "  {k:<34} {v}")?;
        }
        writeln!(
            f,
            "  overlapping pairs excused (earlier holder SIGSTOPped or force-expired): {}",
            self.excused_overlaps.len()
        )?;
        for o in self.excused_overlaps.iter().take(5) {
            writeln!(f, "    {o}")?;
        }
        if self.violations.is_empty() {
            writeln!(f, "  violations: none")?;
        } else {
            writeln!(f, "  VIOLATIONS: {}", self.violations.len())?;
            for v in self.violations.iter().take(40) {
                writeln!(f, "    {v}")?;
            }
        }
        Ok(())
    }
}

/// One validity interval: a holder's belief that it holds a lock.
#[derive(Debug, Clone)]
struct Interval {
    worker: u32,
    path: String,
    write: bool,
    start: u64,
    end: u64,
}

#[derive(Debug, Default)]
struct PathState {
    worker: u32,
    lock: String,
    write: bool,
    czxid: i64,
    granted: bool,
    doubt: bool,
    ended: bool,
    open: Option<u64>,
    lost: Option<u64>,
}

/// The violation an event states by itself, whatever the recipe: a worker's
/// panic, a worker's unclean exit, the controller's trouble.
pub(super) fn plain_violation(e: &Event) -> Option<String> {
    match (e.worker == CONTROLLER, e.kind.as_str()) {
        (false, "panic") => Some(format!(
            "worker {} panicked: {}",
            e.worker,
            e.get("msg").unwrap_or("?")
        )),
        (true, "worker_exit") if e.num("code") != Some(0) => Some(format!(
            "worker {} exited with {}",
            w_of(e),
            e.get("code").unwrap_or("?")
        )),
        (true, "trouble") => Some(format!("controller: {}", e.get("what").unwrap_or("?"))),
        _ => None,
    }
}

/// `name=count ...` of a tally.
pub(super) fn counted<K: fmt::Display>(tally: &BTreeMap<K, u64>) -> String {
    tally
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The controller's `reconfig` events: `added(rejoined)/removed` members
/// (a member added back under its own id is added, and rejoined).
pub(super) fn reconfigs<'a>(events: impl IntoIterator<Item = &'a Event>) -> String {
    let (mut added, mut rejoined, mut removed) = (0, 0, 0);
    for e in events {
        if e.worker == CONTROLLER && e.kind == "reconfig" {
            match e.get("op") {
                Some("add") => added += 1,
                Some("rejoin") => {
                    added += 1;
                    rejoined += 1;
                }
                Some("remove") => removed += 1,
                _ => {}
            }
        }
    }
    format!("{added}({rejoined})/{removed}")
}

pub(super) fn w_of(e: &Event) -> u32 {
    e.num("w").unwrap_or(-1) as u32
}

/// `p`-th percentile (0..=100) of sorted `v`.
fn percentile(v: &[u64], p: usize) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v[((v.len() - 1) * p).div_ceil(100)]
}

/// Checks a run's events (workers' and controller's, any order) and returns the
/// report. The checks:
///
/// - **exclusion**: per lock, no write holder's validity interval overlaps
///   another holder's (write or read). An interval runs from `granted` (or
///   `restored`) to `releasing`, `indoubt`, `lost` or the worker's kill.
///   Overlaps whose earlier holder was SIGSTOPped during its interval, or
///   was force-expired (alive when the controller cut it off, `expire_cut`,
///   begun before its session was closed, `expire_closed`, with the later
///   grant after the cut), are counted apart ([`Report::excused_overlaps`]);
/// - **fencing**: no write sent after its grant's `lost` was accepted; per
///   resource, accepted writes in zxid order come from grants in creation
///   order (a stale holder's write never lands after a newer holder's);
/// - **counter**: the resource's final counter equals the accepted writes
///   (writes with an unknown outcome resolved through the op chain), and every
///   accepted write is in the chain;
/// - **bounds**: every `try_acquire(t)` returned within `t` +
///   [`CheckConfig::try_extra`], SIGSTOPs subtracted;
/// - **liveness**: every worker took a lock after the `calm` phase began; no
///   panic; every worker exited cleanly; no orphan lock node.
pub fn check(events: &[Event], config: &CheckConfig) -> Report {
    let mut events: Vec<&Event> = events.iter().collect();
    events.sort_by_key(|e| e.ts);
    let mut report = Report::default();

    // Pauses (SIGSTOP windows) and kills of workers, from the controller.
    let mut pauses: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    let mut paused_since: HashMap<u32, u64> = HashMap::new();
    let mut expiries: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    let last_ts = events.last().map_or(0, |e| e.ts);
    for e in events.iter().filter(|e| e.worker == CONTROLLER) {
        match e.kind.as_str() {
            "worker_paused" => {
                paused_since.insert(w_of(e), e.ts);
            }
            // A forced expiry's window: the worker cut off (its proxies
            // stalled), then its session closed by another handle.
            "expire_cut" => {
                expiries.entry(w_of(e)).or_default().push((e.ts, u64::MAX));
            }
            "expire_closed" => {
                if let Some(w) = expiries.get_mut(&w_of(e)).and_then(|v| v.last_mut()) {
                    if w.1 == u64::MAX {
                        w.1 = e.ts;
                    }
                }
            }
            "worker_resumed" => {
                if let Some(s) = paused_since.remove(&w_of(e)) {
                    pauses.entry(w_of(e)).or_default().push((s, e.ts));
                }
            }
            _ => {}
        }
    }
    for (w, s) in paused_since {
        pauses.entry(w).or_default().push((s, last_ts));
    }
    let paused_during = |w: u32, a: u64, b: u64| -> u64 {
        pauses.get(&w).map_or(0, |v| {
            v.iter()
                .map(|&(s, e)| e.min(b).saturating_sub(s.max(a)))
                .sum()
        })
    };

    // Validity intervals.
    let mut paths: HashMap<String, PathState> = HashMap::new();
    let mut intervals: BTreeMap<String, Vec<Interval>> = BTreeMap::new();
    let close = |st: &mut PathState, path: &str, ts: u64, out: &mut BTreeMap<_, Vec<_>>| {
        if let Some(start) = st.open.take() {
            out.entry(st.lock.clone()).or_default().push(Interval {
                worker: st.worker,
                path: path.to_string(),
                write: st.write,
                start,
                end: ts,
            });
        }
    };
    let mut phase: HashMap<String, u64> = HashMap::new();
    let mut grants_by_phase: HashMap<&str, u64> = HashMap::new();
    let mut releases: HashMap<String, Vec<u64>> = HashMap::new();
    let mut handoffs = Vec::new();
    let mut faults: BTreeMap<String, u64> = BTreeMap::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut workers: HashSet<u32> = HashSet::new();
    let mut granted_after_calm: HashSet<u32> = HashSet::new();
    let mut try_max_excess: i64 = i64::MIN;
    for e in &events {
        *counts.entry(e.kind.as_str()).or_default() += 1;
        report.violations.extend(plain_violation(e));
        let path = e.get("path").unwrap_or("").to_string();
        if e.worker == CONTROLLER {
            match e.kind.as_str() {
                "phase" => {
                    phase.insert(e.get("name").unwrap_or("?").to_string(), e.ts);
                }
                "fault" => {
                    *faults
                        .entry(e.get("type").unwrap_or("?").to_string())
                        .or_default() += 1;
                }
                "worker_spawned" => {
                    workers.insert(w_of(e));
                }
                "worker_killed" => {
                    let w = w_of(e);
                    for (p, st) in paths.iter_mut().filter(|(_, s)| s.worker == w) {
                        close(st, p, e.ts, &mut intervals);
                        st.ended = true;
                    }
                }
                "orphans" if e.num("children").unwrap_or(0) != 0 => {
                    report.violations.push(format!(
                        "orphans: lock {} still has {} children after every session ended",
                        e.get("lock").unwrap_or("?"),
                        e.get("children").unwrap_or("?")
                    ));
                }
                _ => {}
            }
            continue;
        }
        let st = paths.entry(path.clone()).or_insert_with(|| PathState {
            worker: e.worker,
            ..PathState::default()
        });
        match e.kind.as_str() {
            "granted" => {
                st.granted = true;
                st.lock = e.get("lock").unwrap_or("?").to_string();
                st.write = e.get("kind") == Some("w");
                st.czxid = e.num("czxid").unwrap_or(0);
                if !st.doubt && !st.ended {
                    st.open = Some(e.ts);
                }
                let in_phase = if phase.contains_key("calm") {
                    granted_after_calm.insert(e.worker);
                    "calm"
                } else if phase.contains_key("faults") {
                    "faults"
                } else {
                    "warmup"
                };
                *grants_by_phase.entry(in_phase).or_default() += 1;
                // Hand-off: the last release on this lock after the attempt began.
                let start = e.num("start").unwrap_or(0) as u64;
                if in_phase == "faults" {
                    if let Some(&r) = releases
                        .get(&st.lock)
                        .and_then(|v| v.iter().rev().find(|&&r| r >= start))
                    {
                        handoffs.push(e.ts.saturating_sub(r));
                    }
                }
            }
            "indoubt" => {
                st.doubt = true;
                close(st, &path, e.ts, &mut intervals);
            }
            "restored" => {
                st.doubt = false;
                if st.granted && !st.ended && st.open.is_none() {
                    st.open = Some(e.ts);
                }
            }
            "lost" => {
                close(st, &path, e.ts, &mut intervals);
                st.ended = true;
                st.lost.get_or_insert(e.ts);
            }
            "releasing" => {
                close(st, &path, e.ts, &mut intervals);
                st.ended = true;
                releases
                    .entry(e.get("lock").unwrap_or("?").to_string())
                    .or_default()
                    .push(e.ts);
            }
            "write_ok" => {
                if let (Some(lost), Some(sent)) = (st.lost, e.num("sent")) {
                    if sent as u64 > lost {
                        report.violations.push(format!(
                            "stale write accepted: worker {} wrote {} (op {}) {} ms after its lock {} was Lost",
                            e.worker,
                            e.get("counter").unwrap_or("?"),
                            e.get("op").unwrap_or("?"),
                            (sent as u64 - lost) / 1000,
                            path
                        ));
                    }
                }
            }
            "try" => {
                let t = e.num("t_ms").unwrap_or(0) as u64 * 1000;
                let start = e.num("start").unwrap_or(0) as u64;
                let elapsed = e.num("elapsed_us").unwrap_or(0) as u64;
                let paused = paused_during(e.worker, start, start + elapsed);
                let net = elapsed.saturating_sub(paused);
                let bound = t + config.try_extra.as_micros() as u64;
                try_max_excess = try_max_excess.max(net as i64 - t as i64);
                if net > bound {
                    report.violations.push(format!(
                        "try_acquire({} ms) on lock {} by worker {} took {} ms (paused {} ms), bound {} ms",
                        t / 1000,
                        e.get("lock").unwrap_or("?"),
                        e.worker,
                        elapsed / 1000,
                        paused / 1000,
                        bound / 1000
                    ));
                }
            }
            _ => {}
        }
    }
    for (p, st) in paths.iter_mut() {
        close(st, p, last_ts, &mut intervals);
    }

    // Exclusion.
    let mut overlaps = 0;
    for (lock, list) in &mut intervals {
        list.sort_by_key(|i| i.start);
        for (n, a) in list.iter().enumerate() {
            for b in list[n + 1..].iter().take_while(|b| b.start < a.end) {
                if a.path == b.path || !(a.write || b.write) {
                    continue;
                }
                let what = format!(
                    "lock {lock}: {} {} of worker {} [{}..{}] overlaps {} {} of worker {} from {} ({} ms)",
                    if a.write { "write" } else { "read" },
                    a.path,
                    a.worker,
                    a.start,
                    a.end,
                    if b.write { "write" } else { "read" },
                    b.path,
                    b.worker,
                    b.start,
                    (a.end.min(b.end) - b.start) / 1000
                );
                // Excused by a forced expiry: the earlier holder was alive at
                // the cut and began before its session was closed (it could
                // not learn of the close while cut off), the later grant
                // came after the cut.
                let expired = expiries.get(&a.worker).is_some_and(|v| {
                    v.iter()
                        .any(|&(cut, closed)| a.start < closed && cut <= a.end && cut <= b.start)
                });
                if paused_during(a.worker, a.start, a.end) > 0 {
                    report.excused_overlaps.push(format!("paused: {what}"));
                } else if expired {
                    report
                        .excused_overlaps
                        .push(format!("force-expired: {what}"));
                } else {
                    overlaps += 1;
                    report.violations.push(format!("overlap: {what}"));
                }
            }
        }
    }

    // Fencing order and the counter chain, per resource.
    let mut writes_ok = 0;
    let mut unknown_applied = 0;
    for lock in events
        .iter()
        .filter(|e| e.kind == "final")
        .map(|e| e.get("lock").unwrap_or("?").to_string())
        .collect::<Vec<_>>()
    {
        let mut oks: Vec<&Event> = events
            .iter()
            .copied()
            .filter(|e| e.kind == "write_ok" && e.get("lock") == Some(lock.as_str()))
            .collect();
        oks.sort_by_key(|e| e.num("mzxid").unwrap_or(0));
        let mut newest: Option<(i64, &Event)> = None;
        for w in &oks {
            let czxid = paths
                .get(w.get("path").unwrap_or(""))
                .map_or(0, |s| s.czxid);
            if let Some((c, prev)) = newest {
                if czxid < c {
                    report.violations.push(format!(
                        "lock {lock}: write {} of grant {} (czxid {czxid}) accepted after write {} of newer grant {} (czxid {c})",
                        w.get("op").unwrap_or("?"),
                        w.get("path").unwrap_or("?"),
                        prev.get("op").unwrap_or("?"),
                        prev.get("path").unwrap_or("?"),
                    ));
                    continue;
                }
            }
            newest = Some((czxid, w));
        }
        let mut prev_of: HashMap<&str, &str> = HashMap::new();
        let mut unknown: HashSet<&str> = HashSet::new();
        for e in events
            .iter()
            .filter(|e| e.get("lock") == Some(lock.as_str()))
        {
            if let (Some(op), Some(prev)) = (e.get("op"), e.get("prev")) {
                if matches!(e.kind.as_str(), "write_ok" | "write_unknown" | "write_sent") {
                    prev_of.insert(op, prev);
                }
                // Sent with no outcome logged (the worker was killed with the
                // write in flight) is an unknown outcome too.
                if e.kind == "write_unknown" || e.kind == "write_sent" {
                    unknown.insert(op);
                }
            }
        }
        for e in &oks {
            if let Some(op) = e.get("op") {
                unknown.remove(op);
            }
        }
        let Some(fin) = events
            .iter()
            .find(|e| e.kind == "final" && e.get("lock") == Some(lock.as_str()))
        else {
            continue;
        };
        let mut chain = HashSet::new();
        let mut op = fin.get("op").unwrap_or("-");
        while let Some(&prev) = prev_of.get(op) {
            if !chain.insert(op) {
                break;
            }
            op = prev;
        }
        let counter = fin.num("counter").unwrap_or(-1);
        let applied = chain.iter().filter(|o| unknown.contains(*o)).count();
        writes_ok += oks.len();
        unknown_applied += applied;
        if counter != chain.len() as i64 || op != "init" {
            report.violations.push(format!(
                "lock {lock}: counter {counter} but the chain of writes from the final op back has {} (ends at {op})",
                chain.len()
            ));
        }
        if counter != (oks.len() + applied) as i64 {
            report.violations.push(format!(
                "lock {lock}: counter {counter} != {} accepted writes + {applied} applied of unknown outcome",
                oks.len()
            ));
        }
        for w in &oks {
            if !chain.contains(w.get("op").unwrap_or("")) {
                report.violations.push(format!(
                    "lock {lock}: accepted write {} is not in the resource's history (lost update)",
                    w.get("op").unwrap_or("?")
                ));
            }
        }
    }

    // Liveness.
    if phase.contains_key("calm") {
        let mut missing: Vec<_> = workers.difference(&granted_after_calm).collect();
        missing.sort();
        for w in missing {
            report
                .violations
                .push(format!("worker {w} took no lock after the faults stopped"));
        }
    }

    // Figures.
    let minutes = |a: Option<&u64>, b: Option<&u64>| match (a, b) {
        (Some(&a), Some(&b)) if b > a => (b - a) as f64 / 60e6,
        _ => 0.0,
    };
    let per_min = |n: u64, m: f64| {
        if m > 0.0 {
            format!("{:.0}", n as f64 / m)
        } else {
            "-".to_string()
        }
    };
    let faults_min = minutes(phase.get("faults"), phase.get("calm"));
    let calm_min = minutes(phase.get("calm"), phase.get("stop"));
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    report.fig(
        "grants/min under faults",
        per_min(
            grants_by_phase.get("faults").copied().unwrap_or(0),
            faults_min,
        ),
    );
    report.fig(
        "grants/min without faults",
        per_min(grants_by_phase.get("calm").copied().unwrap_or(0), calm_min),
    );
    report.fig("grants", count("granted"));
    report.fig("faults", counted(&faults));
    report.fig(
        "members added(rejoined)/removed by reconfig",
        reconfigs(events.iter().copied()),
    );
    report.fig("lock events (indoubt/restored/lost)", {
        format!(
            "{}/{}/{}",
            count("indoubt"),
            count("restored"),
            count("lost")
        )
    });
    report.fig(
        "writes ok/rejected/unknown(applied)",
        format!(
            "{writes_ok}/{}/{}({unknown_applied})",
            count("write_rejected"),
            count("write_unknown")
        ),
    );
    report.fig(
        "writes stopped by the fence",
        events
            .iter()
            .filter(|e| {
                e.kind == "write_rejected"
                    && e.get("reason").is_some_and(|r| r.starts_with("fence"))
            })
            .count(),
    );
    report.fig("reads", count("read"));
    report.fig("try_acquire calls", count("try"));
    report.fig(
        "try_acquire max over t (ms)",
        if try_max_excess == i64::MIN {
            "-".to_string()
        } else {
            (try_max_excess / 1000).to_string()
        },
    );
    handoffs.sort_unstable();
    report.fig(
        "hand-off p50/p99 in fault phase (ms)",
        format!(
            "{:.1}/{:.1} (n={})",
            percentile(&handoffs, 50) as f64 / 1000.0,
            percentile(&handoffs, 99) as f64 / 1000.0,
            handoffs.len()
        ),
    );
    report.fig("acquire/connect errors", count("error"));
    report.fig("unexcused overlaps", overlaps);
    report
}
