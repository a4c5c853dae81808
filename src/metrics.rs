//! Metrics through the [`metrics`](https://docs.rs/metrics) facade (feature
//! `metrics`): what operators ask of a coordination library — who waits how
//! long, how long locks are held, whether the session is healthy, which
//! ZooKeeper requests fail with which code. HBase 2's `MetricsZooKeeper`
//! (failures by class, read/write/sync latencies) and Curator's
//! `TracerDriver` measure the same things.
//!
//! The application installs the recorder/exporter (Prometheus, StatsD, ...)
//! with the `metrics` ecosystem; zklock only emits. Without a recorder the
//! facade's calls do nothing. Every metric name, type, label and meaning is
//! listed in `docs/observability.md` and in the constants below.
//!
//! Without the feature every instrumentation point compiles to nothing: the
//! crate-internal `metric!` macro drops its arguments unevaluated (no clock
//! read, no label string), its start times and the wait flag are zero-sized, and
//! the `metrics` crate is not built. [`PathLabel`] and [`set_path_label`]
//! exist either way, so that an application's setup compiles with and
//! without the feature.
//!
//! This module is a leaf: it imports nothing of zklock, so every layer (the
//! client included) may use it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `zklock_client_requests_total` (counter; labels `op`): ZooKeeper requests
/// the client completed, successful or not, by operation (`create`,
/// `getData`, `multi`, ...). Counted once per request, in the client's one
/// request path (a retry of `RecoverableZooKeeper` is another request).
pub const CLIENT_REQUESTS_TOTAL: &str = "zklock_client_requests_total";
/// `zklock_client_request_errors_total` (counter; labels `op`, `code`):
/// requests that failed, by ZooKeeper code (`NoNode`, `ConnectionLoss`, ...:
/// [`ZkError::name`](crate::error::ZkError::name), so `Unknown` for any code
/// zklock does not know; `Closed` or another error's name when there is no
/// code).
pub const CLIENT_REQUEST_ERRORS_TOTAL: &str = "zklock_client_request_errors_total";
/// `zklock_client_request_duration_seconds` (histogram; labels `op`): from
/// the request's call (a wait for a connection included) to its reply or
/// error.
pub const CLIENT_REQUEST_DURATION_SECONDS: &str = "zklock_client_request_duration_seconds";

/// `zklock_session_state_changes_total` (counter; labels `state`): the
/// connection states told to the session's watchers (`SyncConnected`,
/// `Disconnected`, `Expired`, `AuthFailed`, `Closed`, ...).
pub const SESSION_STATE_CHANGES_TOTAL: &str = "zklock_session_state_changes_total";
/// `zklock_session_reconnects_total` (counter): `SyncConnected` again after
/// `Disconnected`, the same session.
pub const SESSION_RECONNECTS_TOTAL: &str = "zklock_session_reconnects_total";
/// `zklock_session_expirations_total` (counter): sessions the server expired.
pub const SESSION_EXPIRATIONS_TOTAL: &str = "zklock_session_expirations_total";
/// `zklock_session_auth_failures_total` (counter): sessions ended by a failed
/// authentication.
pub const SESSION_AUTH_FAILURES_TOTAL: &str = "zklock_session_auth_failures_total";
/// `zklock_session_negotiated_timeout_seconds` (gauge): the session timeout
/// the server granted at the last connection handshake.
pub const SESSION_NEGOTIATED_TIMEOUT_SECONDS: &str = "zklock_session_negotiated_timeout_seconds";

/// `zklock_lock_attempts_total` (counter; labels `kind`, `path`, `outcome`):
/// finished `acquire`/`try_acquire` calls of a lock (`kind` `read`, `write`,
/// `mutex`) or a semaphore (`kind` `semaphore`), by `outcome`: `acquired`,
/// `timeout` (a `try_acquire` that ran out), `cancelled`, `error`.
pub const LOCK_ATTEMPTS_TOTAL: &str = "zklock_lock_attempts_total";
/// `zklock_lock_timeouts_total` (counter; labels `kind`, `path`): attempts
/// that ran out of time (also `zklock_lock_attempts_total{outcome="timeout"}`).
pub const LOCK_TIMEOUTS_TOTAL: &str = "zklock_lock_timeouts_total";
/// `zklock_lock_wait_seconds` (histogram; labels `kind`, `path`, `outcome`):
/// the whole attempt's time, for attempts that had to wait behind another
/// holder (an uncontended acquire is not a wait).
pub const LOCK_WAIT_SECONDS: &str = "zklock_lock_wait_seconds";
/// `zklock_lock_hold_seconds` (histogram; labels `kind`, `path`): from the
/// grant to the release (synchronous, in the background, or finding it lost).
pub const LOCK_HOLD_SECONDS: &str = "zklock_lock_hold_seconds";
/// `zklock_lock_in_doubt_total` (counter; labels `path`): `InDoubt` signals
/// of held locks and leases (the connection was lost while held).
pub const LOCK_IN_DOUBT_TOTAL: &str = "zklock_lock_in_doubt_total";
/// `zklock_lock_lost_total` (counter; labels `path`): held locks and leases
/// lost (their node deleted, their session ended): the `Lost` signal, or a
/// release that finds the node gone when no signal told it. Once per hold.
pub const LOCK_LOST_TOTAL: &str = "zklock_lock_lost_total";
/// `zklock_lock_reaps_total` (counter; labels `kind`, `path`): lock nodes
/// removed by `reap_expired_locks`/`reap_all_locks`.
pub const LOCK_REAPS_TOTAL: &str = "zklock_lock_reaps_total";

/// `zklock_queue_takes_total` (counter; labels `path`, `outcome`): the
/// waiting takes of the queues (`take`, `take_timeout` of
/// `DistributedQueue` and `DistributedPriorityQueue`), by `outcome`: `taken`,
/// `timeout` (nothing in time), `error`.
pub const QUEUE_TAKES_TOTAL: &str = "zklock_queue_takes_total";
/// `zklock_queue_take_wait_seconds` (histogram; labels `path`, `outcome`):
/// how long each take took, waiting for an item included.
pub const QUEUE_TAKE_WAIT_SECONDS: &str = "zklock_queue_take_wait_seconds";
/// `zklock_leader_changes_total` (counter; labels `kind`, `path`, `role`):
/// leadership gained (`role="leader"`) or given up/lost (`role="follower"`)
/// by this process's candidates (`kind` `leader_latch`: `IsLeader` /
/// `NotLeader`; `election`: `ElectedComplete` / `LeadershipLost`;
/// `leader_selector`: the leader function's start and end; `leader_manager`:
/// `wait_to_become_leader` claiming the znode / a step down ending the claim
/// or `Lost`; `write_lock`: `lock_acquired` / `lock_released`).
pub const LEADER_CHANGES_TOTAL: &str = "zklock_leader_changes_total";
/// `zklock_barrier_wait_seconds` (histogram; labels `kind`, `path`,
/// `outcome`): barrier waits (`kind` `barrier`, `double_barrier_enter`,
/// `double_barrier_leave`), by `outcome`: `passed`, `timeout`, `error`.
pub const BARRIER_WAIT_SECONDS: &str = "zklock_barrier_wait_seconds";
/// `zklock_cache_resyncs_total` (counter; labels `kind`, `path`): resyncs
/// of a cache (`kind` `tree_cache`) after a reconnect, counted when complete
/// (`Resynced`).
pub const CACHE_RESYNCS_TOTAL: &str = "zklock_cache_resyncs_total";
/// `zklock_cache_resync_nodes` (histogram; labels `kind`, `path`): the node
/// reads (data or children) each resync sent.
pub const CACHE_RESYNC_NODES: &str = "zklock_cache_resync_nodes";

/// How much of a lock's (queue's, barrier's, cache's) path goes into the
/// `path` label: the label's cardinality is the number of distinct values,
/// which a path per job or per table would make unbounded. A process-wide
/// setting ([`set_path_label`]); the default is [`PathLabel::Prefix`]`(2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathLabel {
    /// No `path` label at all: one series per kind.
    Omit,
    /// The full path: one series per lock (bounded only by the application).
    Full,
    /// The first `n` components: `/app/locks/job-17` with `Prefix(2)` is
    /// `/app/locks`. `Prefix(0)` is [`Omit`](Self::Omit).
    Prefix(usize),
}

/// The default [`PathLabel`]: the first two components.
pub const DEFAULT_PATH_LABEL: PathLabel = PathLabel::Prefix(2);

/// 0: omit; `usize::MAX`: full; n: the first n components.
static PATH_LABEL: AtomicUsize = AtomicUsize::new(2);

/// Sets the process-wide [`PathLabel`] for the metrics recorded from now on
/// (series already recorded keep their labels). Has no effect without the
/// feature `metrics`.
pub fn set_path_label(setting: PathLabel) {
    let v = match setting {
        PathLabel::Omit => 0,
        PathLabel::Full => usize::MAX,
        PathLabel::Prefix(n) => n.min(usize::MAX - 1),
    };
    PATH_LABEL.store(v, Ordering::Relaxed);
}

/// The process-wide [`PathLabel`] in effect.
pub fn path_label() -> PathLabel {
    match PATH_LABEL.load(Ordering::Relaxed) {
        0 => PathLabel::Omit,
        usize::MAX => PathLabel::Full,
        n => PathLabel::Prefix(n),
    }
}

/// The `path` label's value for `path` under `setting`: `None` to omit it.
pub fn path_label_value(setting: PathLabel, path: &str) -> Option<String> {
    match setting {
        PathLabel::Omit | PathLabel::Prefix(0) => None,
        PathLabel::Full => Some(path.to_string()),
        PathLabel::Prefix(n) => {
            let mut out = String::new();
            for c in path.split('/').filter(|c| !c.is_empty()).take(n) {
                out.push('/');
                out.push_str(c);
            }
            if out.is_empty() {
                out.push('/');
            }
            Some(out)
        }
    }
}

/// Registers every zklock metric's description and unit with the installed
/// recorder (an exporter's `# HELP` lines). Optional; a no-op without the
/// feature `metrics` or without a recorder.
pub fn describe() {
    #[cfg(feature = "metrics")]
    on::describe();
}

/// A start time: an `Instant` with the feature, nothing without it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timer {
    #[cfg(feature = "metrics")]
    at: std::time::Instant,
}

impl Timer {
    /// Now (with the feature; without it, free).
    #[inline(always)]
    pub(crate) fn start() -> Timer {
        Timer {
            #[cfg(feature = "metrics")]
            at: std::time::Instant::now(),
        }
    }

    /// Seconds since the start.
    #[cfg(feature = "metrics")]
    pub(crate) fn seconds(&self) -> f64 {
        self.at.elapsed().as_secs_f64()
    }
}

/// A flag set by one step of an attempt and taken at its end (whether the
/// attempt waited): an atomic with the feature, nothing without it.
#[derive(Debug, Default)]
pub(crate) struct Flag {
    #[cfg(feature = "metrics")]
    set: std::sync::atomic::AtomicBool,
}

impl Flag {
    /// Sets the flag.
    #[inline(always)]
    pub(crate) fn set(&self) {
        #[cfg(feature = "metrics")]
        self.set.store(true, Ordering::Relaxed);
    }

    /// Whether the flag was set, clearing it.
    #[cfg(feature = "metrics")]
    pub(crate) fn take(&self) -> bool {
        self.set.swap(false, Ordering::Relaxed)
    }
}

/// A count kept between two instrumentation points (the reads of a cache's
/// resync): a `usize` with the feature, nothing without it.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    #[cfg(feature = "metrics")]
    n: usize,
}

impl Tally {
    /// The count, reset to 0.
    #[cfg(feature = "metrics")]
    pub(crate) fn take(&mut self) -> usize {
        std::mem::take(&mut self.n)
    }
}

/// `metric!(f(args))` calls the recording function `on::f(args)` with the
/// feature; without it, expands to nothing (the arguments are not evaluated).
#[cfg(feature = "metrics")]
macro_rules! metric {
    ($f:ident($($arg:expr),* $(,)?)) => {
        $crate::metrics::on::$f($($arg),*)
    };
}

/// `metric!(f(args))`: without the feature `metrics`, nothing.
#[cfg(not(feature = "metrics"))]
macro_rules! metric {
    ($f:ident($($arg:expr),* $(,)?)) => {
        ()
    };
}

pub(crate) use metric;

/// The recording functions behind `metric!` (feature `metrics`).
#[cfg(feature = "metrics")]
pub(crate) mod on {
    use super::*;
    use ::metrics::{
        counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Label,
        Unit,
    };
    use std::time::Duration;

    pub(super) fn describe() {
        describe_counter!(CLIENT_REQUESTS_TOTAL, "ZooKeeper requests completed, by op");
        describe_counter!(
            CLIENT_REQUEST_ERRORS_TOTAL,
            "ZooKeeper requests failed, by op and code"
        );
        describe_histogram!(
            CLIENT_REQUEST_DURATION_SECONDS,
            Unit::Seconds,
            "ZooKeeper request latency, by op"
        );
        describe_counter!(
            SESSION_STATE_CHANGES_TOTAL,
            "Session state changes, by state"
        );
        describe_counter!(SESSION_RECONNECTS_TOTAL, "Reconnects of a live session");
        describe_counter!(SESSION_EXPIRATIONS_TOTAL, "Sessions expired by the server");
        describe_counter!(
            SESSION_AUTH_FAILURES_TOTAL,
            "Sessions ended by an auth failure"
        );
        describe_gauge!(
            SESSION_NEGOTIATED_TIMEOUT_SECONDS,
            Unit::Seconds,
            "Session timeout granted by the server"
        );
        describe_counter!(
            LOCK_ATTEMPTS_TOTAL,
            "Lock/semaphore acquire attempts, by outcome"
        );
        describe_counter!(
            LOCK_TIMEOUTS_TOTAL,
            "Lock/semaphore acquire attempts that ran out of time"
        );
        describe_histogram!(
            LOCK_WAIT_SECONDS,
            Unit::Seconds,
            "Lock/semaphore acquire time of attempts that waited"
        );
        describe_histogram!(LOCK_HOLD_SECONDS, Unit::Seconds, "Lock/semaphore hold time");
        describe_counter!(LOCK_IN_DOUBT_TOTAL, "InDoubt signals of held locks");
        describe_counter!(LOCK_LOST_TOTAL, "Held locks lost");
        describe_counter!(LOCK_REAPS_TOTAL, "Lock nodes reaped");
        describe_counter!(QUEUE_TAKES_TOTAL, "Queue takes, by outcome");
        describe_histogram!(QUEUE_TAKE_WAIT_SECONDS, Unit::Seconds, "Queue take time");
        describe_counter!(LEADER_CHANGES_TOTAL, "Leadership changes, by role");
        describe_histogram!(BARRIER_WAIT_SECONDS, Unit::Seconds, "Barrier wait time");
        describe_counter!(CACHE_RESYNCS_TOTAL, "Cache full re-reads");
        describe_histogram!(
            CACHE_RESYNC_NODES,
            Unit::Count,
            "Nodes re-read per cache resync"
        );
    }

    /// `kind` and, per the [`PathLabel`] setting, `path`.
    fn labels(kind: Option<&'static str>, path: &str) -> Vec<Label> {
        let mut v = Vec::with_capacity(3);
        if let Some(kind) = kind {
            v.push(Label::new("kind", kind));
        }
        if let Some(p) = path_label_value(path_label(), path) {
            v.push(Label::new("path", p));
        }
        v
    }

    fn with(mut v: Vec<Label>, key: &'static str, value: &'static str) -> Vec<Label> {
        v.push(Label::new(key, value));
        v
    }

    /// One ZooKeeper request ended: `error` is its code's name when it failed
    /// ([`ZkError::name`](crate::error::ZkError::name): a static string, no
    /// allocation per failed reply).
    pub(crate) fn request(op: &'static str, started: Timer, error: Option<&'static str>) {
        let secs = started.seconds();
        counter!(CLIENT_REQUESTS_TOTAL, "op" => op).increment(1);
        if let Some(code) = error {
            counter!(CLIENT_REQUEST_ERRORS_TOTAL, "op" => op, "code" => code).increment(1);
        }
        histogram!(CLIENT_REQUEST_DURATION_SECONDS, "op" => op).record(secs);
    }

    /// A connection state told to the watchers; `reconnect` when it is
    /// `SyncConnected` after `Disconnected`.
    pub(crate) fn session_state(state: &'static str, reconnect: bool) {
        counter!(SESSION_STATE_CHANGES_TOTAL, "state" => state).increment(1);
        if reconnect {
            counter!(SESSION_RECONNECTS_TOTAL).increment(1);
        }
        match state {
            "Expired" => counter!(SESSION_EXPIRATIONS_TOTAL).increment(1),
            "AuthFailed" => counter!(SESSION_AUTH_FAILURES_TOTAL).increment(1),
            _ => {}
        }
    }

    /// The session timeout the server granted.
    pub(crate) fn negotiated_timeout(timeout: Duration) {
        gauge!(SESSION_NEGOTIATED_TIMEOUT_SECONDS).set(timeout.as_secs_f64());
    }

    /// An acquire attempt of a lock or semaphore ended with `outcome`;
    /// `waited` when it waited behind another holder.
    pub(crate) fn lock_attempt(
        kind: &'static str,
        path: &str,
        outcome: &'static str,
        started: Timer,
        waited: bool,
    ) {
        let base = labels(Some(kind), path);
        if outcome == "timeout" {
            counter!(LOCK_TIMEOUTS_TOTAL, base.clone()).increment(1);
        }
        let labelled = with(base, "outcome", outcome);
        if waited {
            histogram!(LOCK_WAIT_SECONDS, labelled.clone()).record(started.seconds());
        }
        counter!(LOCK_ATTEMPTS_TOTAL, labelled).increment(1);
    }

    /// A hold that began at `since` ended.
    pub(crate) fn lock_hold(kind: &'static str, path: &str, since: Timer) {
        histogram!(LOCK_HOLD_SECONDS, labels(Some(kind), path)).record(since.seconds());
    }

    /// A held lock's signal for its node `node`: counted when `in_doubt`.
    pub(crate) fn lock_in_doubt(node: &str, in_doubt: bool) {
        if in_doubt {
            counter!(LOCK_IN_DOUBT_TOTAL, labels(None, parent(node))).increment(1);
        }
    }

    /// The held lock of node `node` was lost; `counted` false when its
    /// `Lost` signal counted it already.
    pub(crate) fn lock_lost(node: &str, count: bool) {
        if count {
            counter!(LOCK_LOST_TOTAL, labels(None, parent(node))).increment(1);
        }
    }

    /// A lock node of the lock `path` was reaped (`removed`: it was there).
    pub(crate) fn lock_reap(kind: &'static str, path: &str, removed: bool) {
        if removed {
            counter!(LOCK_REAPS_TOTAL, labels(Some(kind), path)).increment(1);
        }
    }

    /// A queue take ended: `Some(true)` taken, `Some(false)` nothing in
    /// time, `None` an error.
    pub(crate) fn queue_take(path: &str, taken: Option<bool>, started: Timer) {
        let outcome = match taken {
            Some(true) => "taken",
            Some(false) => "timeout",
            None => "error",
        };
        let l = with(labels(None, path), "outcome", outcome);
        histogram!(QUEUE_TAKE_WAIT_SECONDS, l.clone()).record(started.seconds());
        counter!(QUEUE_TAKES_TOTAL, l).increment(1);
    }

    /// A candidate's events: it became the leader (`gained`), it stopped
    /// being it (`gave_up`).
    pub(crate) fn leader_change(kind: &'static str, path: &str, gained: bool, gave_up: bool) {
        for (happened, role) in [(gained, "leader"), (gave_up, "follower")] {
            if happened {
                let l = with(labels(Some(kind), path), "role", role);
                counter!(LEADER_CHANGES_TOTAL, l).increment(1);
            }
        }
    }

    /// A barrier wait ended: `Some(true)` passed, `Some(false)` out of
    /// time, `None` an error.
    pub(crate) fn barrier_wait(
        kind: &'static str,
        path: &str,
        passed: Option<bool>,
        started: Timer,
    ) {
        let outcome = match passed {
            Some(true) => "passed",
            Some(false) => "timeout",
            None => "error",
        };
        let l = with(labels(Some(kind), path), "outcome", outcome);
        histogram!(BARRIER_WAIT_SECONDS, l).record(started.seconds());
    }

    /// A cache re-read all of `path`: `nodes` nodes.
    pub(crate) fn cache_resync(kind: &'static str, path: &str, nodes: usize) {
        let l = labels(Some(kind), path);
        counter!(CACHE_RESYNCS_TOTAL, l.clone()).increment(1);
        histogram!(CACHE_RESYNC_NODES, l).record(nodes as f64);
    }

    /// Adds one to `tally` when `yes`.
    pub(crate) fn tally(yes: bool, tally: &mut Tally) {
        if yes {
            tally.n += 1;
        }
    }

    /// The parent of a node's path (the lock's path for a lock node).
    fn parent(node: &str) -> &str {
        match node.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &node[..i],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_label_values() {
        let p = "/app/locks/job-17";
        assert_eq!(path_label_value(PathLabel::Omit, p), None);
        assert_eq!(path_label_value(PathLabel::Prefix(0), p), None);
        assert_eq!(path_label_value(PathLabel::Full, p).as_deref(), Some(p));
        assert_eq!(
            path_label_value(PathLabel::Prefix(2), p).as_deref(),
            Some("/app/locks")
        );
        assert_eq!(
            path_label_value(PathLabel::Prefix(9), p).as_deref(),
            Some(p)
        );
        assert_eq!(
            path_label_value(PathLabel::Prefix(1), "/").as_deref(),
            Some("/")
        );
        assert_eq!(DEFAULT_PATH_LABEL, PathLabel::Prefix(2));
    }

    #[test]
    fn timer_and_flag_are_free_without_the_feature() {
        if cfg!(not(feature = "metrics")) {
            assert_eq!(std::mem::size_of::<Timer>(), 0);
            assert_eq!(std::mem::size_of::<Flag>(), 0);
        }
    }
}
