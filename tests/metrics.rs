//! The metrics (feature `metrics`, `docs/observability.md`) against a real
//! server: a recorder is installed and the exact figures of scripted
//! scenarios are checked — request counts and errors by code, a contended
//! hand-off (forced with the lock's step hook), a `try_acquire` timeout, a
//! lock lost to a forced session expiry, a semaphore's lease, a reap, the
//! recipes' takes, barrier waits and leadership, and a reconnect forced with
//! the `FaultProxy` (the session's figures, a held lock's `InDoubt`, a
//! cache's resync).
//!
//! The recorder is process-wide and the tests of one binary run in
//! parallel: the scenarios run in one test, in order, each on its own lock
//! path (the `path` label is set to the full path), and the request figures
//! are read as differences.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use zklock::client::{Acl, SaslConfig, ZooKeeper};
use zklock::lock::{
    Dialect, InterProcessLock, LockEvent, LockListener, LockStep, ZkInterProcessWriteLock,
    ZkSemaphore,
};
use zklock::metrics::{self as m, PathLabel};
use zklock::recipes::barrier::Barrier;
use zklock::recipes::election::LeaderElectionSupport;
use zklock::recipes::leader_latch::LeaderLatch;
use zklock::recipes::leader_manager::ZkLeaderManager;
use zklock::recipes::leader_selector::LeaderSelector;
use zklock::recipes::queue::DistributedQueue;
use zklock::recipes::tree_cache::TreeCache;
use zklock::recipes::write_lock::WriteLock;
use zklock::testing::{expire_session, test_servers, unique_root, FaultProxy, ZkServer};
use zklock::{Error, ZkError, ZooKeeperWatcher};

/// The figures read so far (a snapshot drains every metric): counters
/// summed, gauges as last set, histograms as every observation.
struct Figures {
    snapshotter: Snapshotter,
    values: HashMap<String, f64>,
    observations: HashMap<String, Vec<f64>>,
}

impl Figures {
    fn install() -> Figures {
        static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
        let snapshotter = SNAPSHOTTER
            .get_or_init(|| {
                let recorder = DebuggingRecorder::new();
                let snapshotter = recorder.snapshotter();
                metrics::set_global_recorder(recorder).expect("the only recorder");
                snapshotter
            })
            .clone();
        Figures {
            snapshotter,
            values: HashMap::new(),
            observations: HashMap::new(),
        }
    }

    fn read(&mut self) {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            match value {
                DebugValue::Counter(n) => *self.values.entry(name).or_default() += n as f64,
                // A snapshot resets a gauge too: keep the last value set.
                DebugValue::Gauge(g) if g.into_inner() != 0.0 => {
                    self.values.insert(name, g.into_inner());
                }
                DebugValue::Gauge(_) => {}
                DebugValue::Histogram(h) => self
                    .observations
                    .entry(name)
                    .or_default()
                    .extend(h.into_iter().map(|v| v.into_inner())),
            }
        }
    }

    /// A counter's or gauge's value (0 when never recorded); labels as
    /// `k=v`, in any order.
    fn value(&mut self, name: &str, labels: &[&str]) -> f64 {
        self.read();
        self.values.get(&key(name, labels)).copied().unwrap_or(0.0)
    }

    /// A histogram's observations so far.
    fn observed(&mut self, name: &str, labels: &[&str]) -> Vec<f64> {
        self.read();
        self.observations
            .get(&key(name, labels))
            .cloned()
            .unwrap_or_default()
    }
}

fn key(name: &str, labels: &[&str]) -> String {
    let mut labels: Vec<&str> = labels.to_vec();
    labels.sort();
    format!("{name}{{{}}}", labels.join(","))
}

/// Waits (up to 10 s) until `done`: for what an event thread tells.
fn eventually(done: impl FnMut() -> bool) -> bool {
    zklock::testing::eventually(Duration::from_secs(10), done)
}

fn zkw(servers: &str) -> ZooKeeperWatcher {
    ZooKeeperWatcher::connect(servers, "metrics-test", None).expect("connect")
}

/// Counts its `Lost` events.
struct Losses(Arc<std::sync::Mutex<Vec<LockEvent>>>);

impl LockListener for Losses {
    fn lock_event(&self, _path: &str, event: LockEvent) {
        self.0.lock().unwrap().push(event);
    }
}

#[test]
fn scripted_scenarios_give_exact_figures() {
    let mut f = Figures::install();
    m::set_path_label(PathLabel::Full);
    let servers = test_servers();
    // The SASL-only server of the auth failure's scenario, started meanwhile.
    let sasl = thread::spawn(|| ZkServer::start_sasl(&[("alice", "alice-secret")]));

    // -- Requests: counts, errors by code, latency, by op. -----------------
    let zk = ZooKeeper::connect(&servers, Duration::from_secs(6), |_| {}).unwrap();
    let missing = unique_root("metrics-missing");
    let get = ["op=getData"];
    let no_node = ["op=getData", "code=NoNode"];
    let (requests, errors, latencies) = (
        f.value(m::CLIENT_REQUESTS_TOTAL, &get),
        f.value(m::CLIENT_REQUEST_ERRORS_TOTAL, &no_node),
        f.observed(m::CLIENT_REQUEST_DURATION_SECONDS, &get).len(),
    );
    assert!(zk
        .get_data(&missing, false)
        .unwrap_err()
        .is(ZkError::NoNode));
    assert_eq!(f.value(m::CLIENT_REQUESTS_TOTAL, &get), requests + 1.0);
    assert_eq!(
        f.value(m::CLIENT_REQUEST_ERRORS_TOTAL, &no_node),
        errors + 1.0
    );
    let seen = f.observed(m::CLIENT_REQUEST_DURATION_SECONDS, &get);
    assert_eq!(seen.len(), latencies + 1);
    assert!(seen.iter().all(|s| *s >= 0.0));
    // The negotiated session timeout: a gauge in seconds.
    assert!(f.value(m::SESSION_NEGOTIATED_TIMEOUT_SECONDS, &[]) > 0.0);
    zk.close().unwrap();

    // -- A contended hand-off: one waits, then gets it. --------------------
    let (a, b) = (zkw(&servers), zkw(&servers));
    let root = unique_root("metrics-handoff");
    let path = format!("path={root}");
    let write = |outcome: &'static str| ["kind=write", path.as_str(), outcome];
    let holder = Arc::new(ZkInterProcessWriteLock::new(&a, &root, b"a", None).unwrap());
    holder.acquire().unwrap();
    let h = holder.clone();
    let released = Arc::new(AtomicBool::new(false));
    let r = released.clone();
    // The holder lets go once the waiter waits.
    let waiter = ZkInterProcessWriteLock::new(&b, &root, b"b", None)
        .unwrap()
        .with_step_hook(move |step, _| {
            if step == LockStep::Watching && !r.swap(true, Ordering::SeqCst) {
                h.release().unwrap();
            }
        });
    waiter.acquire().unwrap();
    assert!(released.load(Ordering::SeqCst));
    waiter.release().unwrap();
    let acquired = write("outcome=acquired");
    assert_eq!(f.value(m::LOCK_ATTEMPTS_TOTAL, &acquired), 2.0);
    assert_eq!(f.observed(m::LOCK_WAIT_SECONDS, &acquired).len(), 1);
    assert_eq!(
        f.observed(m::LOCK_HOLD_SECONDS, &["kind=write", &path])
            .len(),
        2
    );
    assert_eq!(f.value(m::LOCK_TIMEOUTS_TOTAL, &["kind=write", &path]), 0.0);

    // -- A timeout: try_acquire runs out behind a holder. ------------------
    let root = unique_root("metrics-timeout");
    let path = format!("path={root}");
    let holder = ZkInterProcessWriteLock::new(&a, &root, b"a", None).unwrap();
    holder.acquire().unwrap();
    let waiter = ZkInterProcessWriteLock::new(&b, &root, b"b", None).unwrap();
    assert!(!waiter.try_acquire(Duration::from_millis(200)).unwrap());
    holder.release().unwrap();
    let labels = ["kind=write", path.as_str()];
    assert_eq!(f.value(m::LOCK_TIMEOUTS_TOTAL, &labels), 1.0);
    let timeout = ["kind=write", path.as_str(), "outcome=timeout"];
    assert_eq!(f.value(m::LOCK_ATTEMPTS_TOTAL, &timeout), 1.0);
    assert_eq!(f.observed(m::LOCK_WAIT_SECONDS, &timeout).len(), 1);
    let acquired = ["kind=write", path.as_str(), "outcome=acquired"];
    assert_eq!(f.value(m::LOCK_ATTEMPTS_TOTAL, &acquired), 1.0);
    assert!(f.observed(m::LOCK_WAIT_SECONDS, &acquired).is_empty());

    // -- A lost lock: the holder's session is expired. ----------------------
    let root = unique_root("metrics-lost");
    let path = format!("path={root}");
    let doomed = zkw(&servers);
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let lock = ZkInterProcessWriteLock::new(&doomed, &root, b"d", None)
        .unwrap()
        .with_lock_listener(Losses(events.clone()));
    lock.acquire().unwrap();
    let expired = f.value(m::SESSION_EXPIRATIONS_TOTAL, &[]);
    let expired_states = f.value(m::SESSION_STATE_CHANGES_TOTAL, &["state=Expired"]);
    expire_session(doomed.zookeeper(), &servers).unwrap();
    // The Lost signal, then a release that finds it lost: counted once.
    assert!(zklock::testing::eventually(Duration::from_secs(10), || {
        events.lock().unwrap().contains(&LockEvent::Lost)
    }));
    assert!(matches!(lock.release(), Err(Error::LockLost { .. })));
    assert_eq!(f.value(m::LOCK_LOST_TOTAL, &[&path]), 1.0);
    assert_eq!(
        f.observed(m::LOCK_HOLD_SECONDS, &["kind=write", &path])
            .len(),
        1
    );
    assert_eq!(f.value(m::SESSION_EXPIRATIONS_TOTAL, &[]), expired + 1.0);
    assert_eq!(
        f.value(m::SESSION_STATE_CHANGES_TOTAL, &["state=Expired"]),
        expired_states + 1.0
    );
    drop(lock);
    let _ = doomed.close();

    // -- A semaphore's lease. -----------------------------------------------
    let root = unique_root("metrics-semaphore");
    let path = format!("path={root}");
    let sem = ZkSemaphore::new(&a, &root, 1, b"s").unwrap();
    let lease = sem.acquire().unwrap();
    assert!(sem
        .try_acquire(Duration::from_millis(100))
        .unwrap()
        .is_none());
    lease.release().unwrap();
    let sem_labels = |outcome: &'static str| ["kind=semaphore", path.as_str(), outcome];
    assert_eq!(
        f.value(m::LOCK_ATTEMPTS_TOTAL, &sem_labels("outcome=acquired")),
        1.0
    );
    assert_eq!(
        f.value(m::LOCK_ATTEMPTS_TOTAL, &sem_labels("outcome=timeout")),
        1.0
    );
    assert_eq!(
        f.value(m::LOCK_TIMEOUTS_TOTAL, &["kind=semaphore", &path]),
        1.0
    );
    assert_eq!(
        f.observed(m::LOCK_HOLD_SECONDS, &["kind=semaphore", &path])
            .len(),
        1
    );

    // -- A reap of a stale node. --------------------------------------------
    let root = unique_root("metrics-reap");
    let path = format!("path={root}");
    let stale = ZkInterProcessWriteLock::new(&a, &root, b"stale", None).unwrap();
    stale.acquire().unwrap();
    let reaper = ZkInterProcessWriteLock::new(&b, &root, b"r", None).unwrap();
    reaper.reap_all_locks().unwrap();
    assert_eq!(f.value(m::LOCK_REAPS_TOTAL, &["kind=write", &path]), 1.0);
    drop(stale);
    thread::sleep(Duration::from_millis(10));

    // -- Recipes: a queue's takes, a barrier's waits, a latch's leadership. --
    let root = unique_root("metrics-queue");
    let path = format!("path={root}");
    let queue = DistributedQueue::new(&a, &root).unwrap();
    assert!(queue
        .take_timeout(Duration::from_millis(100))
        .unwrap()
        .is_none());
    queue.offer(b"item").unwrap();
    assert_eq!(queue.take().unwrap(), b"item");
    for outcome in ["outcome=timeout", "outcome=taken"] {
        let labels = [path.as_str(), outcome];
        assert_eq!(f.value(m::QUEUE_TAKES_TOTAL, &labels), 1.0, "{outcome}");
        assert_eq!(
            f.observed(m::QUEUE_TAKE_WAIT_SECONDS, &labels).len(),
            1,
            "{outcome}"
        );
    }

    let root = unique_root("metrics-barrier");
    let path = format!("path={root}");
    let barrier = Barrier::new(&a, &root).unwrap();
    barrier.set_barrier().unwrap();
    assert!(!barrier.wait_on_barrier(Duration::from_millis(100)).unwrap());
    assert!(barrier.remove_barrier().unwrap());
    assert!(barrier.wait_on_barrier(Duration::from_secs(10)).unwrap());
    for outcome in ["outcome=timeout", "outcome=passed"] {
        let labels = ["kind=barrier", path.as_str(), outcome];
        assert_eq!(
            f.observed(m::BARRIER_WAIT_SECONDS, &labels).len(),
            1,
            "{outcome}"
        );
    }

    let root = unique_root("metrics-latch");
    let path = format!("path={root}");
    let latch = LeaderLatch::new(&a, &root, "a").unwrap();
    latch.start().unwrap();
    assert!(latch.await_leadership(Duration::from_secs(10)).unwrap());
    let leader = ["kind=leader_latch", path.as_str(), "role=leader"];
    // IsLeader is told on the event thread: wait for it.
    let mut led = 0.0;
    assert!(zklock::testing::eventually(Duration::from_secs(10), || {
        led = f.value(m::LEADER_CHANGES_TOTAL, &leader);
        led > 0.0
    }));
    assert_eq!(led, 1.0);
    latch.close().unwrap();

    // The election: a leader, then its successor after it stops (a stop
    // tells no `LeadershipLost`); the successor's offer deleted under it
    // tells `LeadershipLost`: the one follower change.
    let root = unique_root("metrics-election");
    let path = format!("path={root}");
    let leader = ["kind=election", path.as_str(), "role=leader"];
    let follower = ["kind=election", path.as_str(), "role=follower"];
    let first = LeaderElectionSupport::new(&a, &root, "first").unwrap();
    first.start().unwrap();
    assert!(first.has_leadership());
    let second = LeaderElectionSupport::new(&b, &root, "second").unwrap();
    second.start().unwrap();
    assert!(!second.has_leadership());
    assert!(eventually(
        || f.value(m::LEADER_CHANGES_TOTAL, &leader) >= 1.0
    ));
    first.stop().unwrap();
    assert!(second.await_leadership(Duration::from_secs(10)).unwrap());
    assert!(eventually(
        || f.value(m::LEADER_CHANGES_TOTAL, &leader) >= 2.0
    ));
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &leader), 2.0);
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &follower), 0.0);
    let offer = second.offer_node().unwrap();
    a.zookeeper().delete(&offer, None).unwrap();
    assert!(eventually(
        || f.value(m::LEADER_CHANGES_TOTAL, &follower) > 0.0
    ));
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &follower), 1.0);
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &leader), 2.0);
    let _ = second.stop();

    // The leader selector: one leads while the other's bounded wait runs
    // out (no change), then the other leads.
    let root = unique_root("metrics-selector");
    let path = format!("path={root}");
    let leader = ["kind=leader_selector", path.as_str(), "role=leader"];
    let follower = ["kind=leader_selector", path.as_str(), "role=follower"];
    let one = LeaderSelector::new(&a, &root, Dialect::Curator, "one").unwrap();
    let other = LeaderSelector::new(&b, &root, Dialect::Curator, "other").unwrap();
    one.run(|_| {
        let waited = other.try_run_for(Duration::from_millis(100), |_| ());
        assert!(waited.unwrap().is_none());
    })
    .unwrap();
    other.run(|_| ()).unwrap();
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &leader), 2.0);
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &follower), 2.0);

    // HBase's leader manager: a leader steps down, its successor's znode is
    // deleted under it (`Lost`).
    let root = unique_root("metrics-manager");
    let znode = format!("{root}/leader");
    let path = format!("path={znode}");
    let leader = ["kind=leader_manager", path.as_str(), "role=leader"];
    let follower = ["kind=leader_manager", path.as_str(), "role=follower"];
    let first = ZkLeaderManager::new(&a, &znode, "first");
    first.start().unwrap();
    assert!(first.wait_to_become_leader().unwrap());
    let second = Arc::new(ZkLeaderManager::new(&b, &znode, "second"));
    let s = second.clone();
    let waiting = thread::spawn(move || s.wait_to_become_leader());
    // The successor waits behind the leader (it read the znode): then the
    // leader steps down.
    assert!(eventually(|| second.has_leader()));
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &leader), 1.0);
    first.step_down_as_leader().unwrap();
    assert!(eventually(
        || f.value(m::LEADER_CHANGES_TOTAL, &follower) >= 1.0
    ));
    assert!(waiting.join().unwrap().unwrap());
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &leader), 2.0);
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &follower), 1.0);
    a.zookeeper().delete(&znode, None).unwrap();
    assert!(eventually(
        || f.value(m::LEADER_CHANGES_TOTAL, &follower) > 1.0
    ));
    assert!(!second.has_leadership());
    second.stop().unwrap();
    first.stop().unwrap();
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &follower), 2.0);
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &leader), 2.0);

    // ZooKeeper's WriteLock: an owner unlocks, the waiting one becomes owner
    // (told on the event thread) and unlocks.
    let root = unique_root("metrics-writelock");
    let path = format!("path={root}");
    let leader = ["kind=write_lock", path.as_str(), "role=leader"];
    let follower = ["kind=write_lock", path.as_str(), "role=follower"];
    let owner = WriteLock::new(&a, &root, Acl::open_unsafe()).unwrap();
    let next = WriteLock::new(&b, &root, Acl::open_unsafe()).unwrap();
    assert!(owner.lock().unwrap());
    assert!(!next.lock().unwrap());
    assert!(eventually(
        || f.value(m::LEADER_CHANGES_TOTAL, &leader) >= 1.0
    ));
    owner.unlock().unwrap();
    assert!(eventually(
        || f.value(m::LEADER_CHANGES_TOTAL, &leader) >= 2.0
    ));
    assert!(next.is_owner());
    next.unlock().unwrap();
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &leader), 2.0);
    assert_eq!(f.value(m::LEADER_CHANGES_TOTAL, &follower), 2.0);

    // A SASL-only server refusing a wrong DIGEST-MD5 password: the session
    // ends with `AuthFailed`, counted once.
    let sasl = sasl.join().unwrap().expect("start a SASL ZooKeeper");
    let failures = f.value(m::SESSION_AUTH_FAILURES_TOTAL, &[]);
    let auth_failed = ["state=AuthFailed"];
    let told = f.value(m::SESSION_STATE_CHANGES_TOTAL, &auth_failed);
    let refused = ZooKeeper::builder(&sasl.connect_string())
        .with_session_timeout(Duration::from_secs(6))
        .with_sasl(SaslConfig::digest_md5("alice", "wrong"))
        .connect(|_| {});
    assert!(refused.unwrap_err().is(ZkError::AuthFailed));
    // Told on the event thread: wait for it.
    assert!(eventually(|| {
        f.value(m::SESSION_AUTH_FAILURES_TOTAL, &[]) > failures
    }));
    assert_eq!(f.value(m::SESSION_AUTH_FAILURES_TOTAL, &[]), failures + 1.0);
    assert_eq!(
        f.value(m::SESSION_STATE_CHANGES_TOTAL, &auth_failed),
        told + 1.0
    );
    drop(sasl);

    // -- A reconnect: the session's figures, a held lock's InDoubt, a cache's
    // resync. ---------------------------------------------------------------
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let flaky = zkw(&proxy.connect_string());
    let root = unique_root("metrics-reconnect");
    let lock_path = format!("{root}/lock");
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let lock = ZkInterProcessWriteLock::new(&flaky, &lock_path, b"f", None)
        .unwrap()
        .with_lock_listener(Losses(events.clone()));
    lock.acquire().unwrap();
    let cache = TreeCache::start(&flaky, &root).unwrap();
    assert!(cache.wait_synced(Duration::from_secs(10)).unwrap());
    let reconnects = f.value(m::SESSION_RECONNECTS_TOTAL, &[]);
    let disconnects = f.value(m::SESSION_STATE_CHANGES_TOTAL, &["state=Disconnected"]);
    let resync = ["kind=tree_cache", &format!("path={root}")].map(String::from);
    let resync: Vec<&str> = resync.iter().map(String::as_str).collect();
    proxy.reset();
    assert!(zklock::testing::eventually(Duration::from_secs(20), || {
        f.value(m::CACHE_RESYNCS_TOTAL, &resync) > 0.0
    }));
    assert_eq!(f.value(m::CACHE_RESYNCS_TOTAL, &resync), 1.0);
    assert_eq!(f.observed(m::CACHE_RESYNC_NODES, &resync).len(), 1);
    assert_eq!(f.value(m::SESSION_RECONNECTS_TOTAL, &[]), reconnects + 1.0);
    assert_eq!(
        f.value(m::SESSION_STATE_CHANGES_TOTAL, &["state=Disconnected"]),
        disconnects + 1.0
    );
    assert!(events.lock().unwrap().contains(&LockEvent::InDoubt));
    assert_eq!(
        f.value(m::LOCK_IN_DOUBT_TOTAL, &[&format!("path={lock_path}")]),
        1.0
    );
    lock.release().unwrap();
    cache.close().unwrap();
    let _ = flaky.close();

    let _ = a.close();
    let _ = b.close();
}
