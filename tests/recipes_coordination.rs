//! The recipes of `zklock::recipes` against a real ZooKeeper server, with several
//! sessions each, their failure paths (a process killed with SIGKILL, a session
//! expired behind a stalled `FaultProxy`, timeouts) and a no-orphan check of the
//! test's whole tree at the end of each test.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{WatchedEvent, ZooKeeper};
use zklock::recipes::barrier::Barrier;
use zklock::recipes::double_barrier::DoubleBarrier;
use zklock::recipes::group::Group;
use zklock::recipes::priority_queue::DistributedPriorityQueue;
use zklock::recipes::queue::DistributedQueue;
use zklock::recipes::two_phase_commit::{Outcome, TwoPhaseCommit, Vote};
use zklock::testing::{eventually, shared_server, unique_root, FaultProxy, ScratchDir};
use zklock::{Error, RetryConfig, ZkError, ZooKeeperWatcher};

const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
const QUEUE_JAR: &str = "/usr/share/java/zookeeper-recipes-queue.jar";
const SLF4J_NOP_JAR: &str = "/usr/share/java/slf4j-nop.jar";

fn init_log() {
    let _ = env_logger::builder().is_test(true).try_init();
}

fn connect_to(servers: &str, session: Duration) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(servers)
        .with_identifier("recipes-test")
        .with_session_timeout(session)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .connect()
        .expect("connect")
}

fn session() -> ZooKeeperWatcher {
    init_log();
    connect_to(&shared_server().connect_string(), Duration::from_secs(6))
}

/// A session through a proxy, to expire it by stalling the proxy.
fn proxied(session: Duration) -> (FaultProxy, ZooKeeperWatcher) {
    init_log();
    let proxy = FaultProxy::start(shared_server().connect_string()).expect("proxy");
    let zkw = connect_to(&proxy.connect_string(), session);
    (proxy, zkw)
}

fn raw() -> ZooKeeper {
    ZooKeeper::connect(
        &shared_server().connect_string(),
        Duration::from_secs(6),
        |_e: WatchedEvent| {},
    )
    .expect("raw connect")
}

/// Every node under `root` (relative paths, sorted), `root` excluded.
fn tree(zk: &ZooKeeper, root: &str) -> Vec<String> {
    fn walk(zk: &ZooKeeper, path: &str, rel: &str, out: &mut Vec<String>) {
        let children = match zk.get_children(path, false) {
            Ok(c) => c,
            Err(e) if e.is(ZkError::NoNode) => return,
            Err(e) => panic!("get_children {path}: {e}"),
        };
        for c in children {
            let r = if rel.is_empty() {
                c.clone()
            } else {
                format!("{rel}/{c}")
            };
            out.push(r.clone());
            walk(zk, &format!("{path}/{c}"), &r, out);
        }
    }
    let mut out = Vec::new();
    walk(zk, root, "", &mut out);
    out.sort();
    out
}

/// The no-orphan check: the tree under `root` is exactly `expected` (within a
/// few seconds, for nodes removed in the background or with a dead session),
/// then the test's tree is removed.
#[track_caller]
fn assert_tree_then_clean(root: &str, expected: &[&str]) {
    let zk = raw();
    let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    let ok = eventually(Duration::from_secs(10), || tree(&zk, root) == expected);
    assert!(
        ok,
        "orphans under {root}: {:?} (expected {expected:?})",
        tree(&zk, root)
    );
    let mut all = tree(&zk, root);
    all.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
    for p in all {
        zk.delete(&format!("{root}/{p}"), None).expect("clean");
    }
    let _ = zk.delete(root, None);
    zk.close().unwrap();
}

// ---------------------------------------------------------------------------
// Java side
// ---------------------------------------------------------------------------

fn java_classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        for jar in [ZOOKEEPER_JAR, QUEUE_JAR, SLF4J_NOP_JAR] {
            assert!(
                Path::new(jar).exists(),
                "{jar} is missing: run `make zookeeper`"
            );
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/RecipeClient.java");
        // Used by every Java client of this binary: removed when the process ends.
        let out = ScratchDir::new("recipes-java")
            .and_then(ScratchDir::until_exit)
            .unwrap();
        let status = Command::new("javac")
            .args(["-nowarn", "-d"])
            .arg(&out)
            .args(["-cp", &format!("{ZOOKEEPER_JAR}:{QUEUE_JAR}")])
            .arg(&src)
            .status()
            .expect("cannot run javac: run `make zookeeper` (default-jdk-headless)");
        assert!(status.success(), "javac failed: {status}");
        out
    })
}

/// A Java `RecipeClient` child; its stdout lines arrive on a channel. Killed
/// (SIGKILL) when dropped.
struct JavaChild {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl JavaChild {
    fn start(args: &[&str]) -> JavaChild {
        let cp = format!(
            "{}:{ZOOKEEPER_JAR}:{QUEUE_JAR}:{SLF4J_NOP_JAR}",
            java_classes().display()
        );
        let mut child = Command::new("java")
            .args([
                "-Xss512k",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                &cp,
                "RecipeClient",
            ])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot run java: run `make zookeeper`");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        JavaChild { child, lines }
    }

    /// The next line, within `timeout`.
    #[track_caller]
    fn line(&self, timeout: Duration) -> String {
        self.lines
            .recv_timeout(timeout)
            .unwrap_or_else(|e| panic!("no line from the Java child in {timeout:?}: {e}"))
    }

    #[track_caller]
    fn expect(&self, want: &str, timeout: Duration) {
        let got = self.line(timeout);
        assert_eq!(got, want, "from the Java child");
    }

    /// `kill -9`.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    #[track_caller]
    fn wait_success(&mut self, timeout: Duration) {
        let end = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "the Java child failed: {status}");
                return;
            }
            assert!(
                Instant::now() < end,
                "the Java child did not end in {timeout:?}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for JavaChild {
    fn drop(&mut self) {
        self.kill();
    }
}

// ---------------------------------------------------------------------------
// Queue
// ---------------------------------------------------------------------------

/// 4 producers × 4 consumers × 1,000 items, each in its own session: every item
/// consumed exactly once, and each consumer sees each producer's items in the
/// order they were offered.
#[test]
fn queue_4_producers_4_consumers_1000_items_each_once_in_order() {
    const PRODUCERS: usize = 4;
    const CONSUMERS: usize = 4;
    const ITEMS: usize = 1000;
    let root = unique_root("queue-4x4");
    let dir = format!("{root}/q");
    let total = PRODUCERS * ITEMS;
    let taken = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (dir, taken) = (dir.clone(), taken.clone());
            thread::spawn(move || {
                let zkw = session();
                let q = DistributedQueue::new(&zkw, &dir).unwrap();
                let mut got: Vec<(usize, usize)> = Vec::new();
                let end = Instant::now() + Duration::from_secs(240);
                while taken.load(Ordering::SeqCst) < total {
                    assert!(Instant::now() < end, "consumers stuck at {taken:?}");
                    if let Some(item) = q
                        .take_timeout(Duration::from_millis(500))
                        .unwrap_or_else(|e| panic!("take_timeout: {e:?}"))
                    {
                        let s = String::from_utf8(item).unwrap();
                        let (p, i) = s.split_once('-').unwrap();
                        got.push((p.parse().unwrap(), i.parse().unwrap()));
                        taken.fetch_add(1, Ordering::SeqCst);
                    }
                }
                zkw.close().unwrap();
                got
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let dir = dir.clone();
            thread::spawn(move || {
                let zkw = session();
                let q = DistributedQueue::new(&zkw, &dir).unwrap();
                for i in 0..ITEMS {
                    q.offer(format!("{p}-{i}").as_bytes()).unwrap();
                }
                zkw.close().unwrap();
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let mut seen = HashSet::new();
    let mut per_consumer = Vec::new();
    for c in consumers {
        let got = c.join().unwrap();
        per_consumer.push(got.len());
        let mut last: HashMap<usize, usize> = HashMap::new();
        for (p, i) in got {
            assert!(seen.insert((p, i)), "item {p}-{i} consumed twice");
            if let Some(&prev) = last.get(&p) {
                assert!(i > prev, "producer {p}: {i} after {prev} in one consumer");
            }
            last.insert(p, i);
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(seen.len(), total, "every item consumed once");
    println!(
        "4x4x1000: {total} items in {elapsed:.1?} ({:.0} items/s), per consumer {per_consumer:?}",
        total as f64 / elapsed.as_secs_f64()
    );
    assert_tree_then_clean(&root, &["q", "q-receipts", "q-takers"]);
}

/// Java's own `DistributedQueue` produces, Rust consumes, in order; then the
/// reverse, with both on one queue at once.
#[test]
fn queue_java_producer_rust_consumer_and_the_reverse() {
    let zkw = session();
    let root = unique_root("queue-java");
    let dir = format!("{root}/q");
    let servers = shared_server().connect_string();
    let q = DistributedQueue::new(&zkw, &dir).unwrap();

    // Java → Rust: the Rust consumer waits before the Java producer starts.
    let consumer = {
        let dir = dir.clone();
        thread::spawn(move || {
            let zkw = session();
            let q = DistributedQueue::new(&zkw, &dir).unwrap();
            let got: Vec<String> = (0..200)
                .map(|_| {
                    let item = q.take_timeout(Duration::from_secs(60)).unwrap();
                    String::from_utf8(item.expect("an item from Java in time")).unwrap()
                })
                .collect();
            zkw.close().unwrap();
            got
        })
    };
    let mut producer = JavaChild::start(&["produce", &servers, &dir, "200", "java"]);
    producer.expect("ready", Duration::from_secs(60));
    producer.expect("done", Duration::from_secs(60));
    producer.wait_success(Duration::from_secs(10));
    let got = consumer.join().unwrap();
    let want: Vec<String> = (0..200).map(|i| format!("java-{i}")).collect();
    assert_eq!(got, want, "Java's items in Java's order");

    // Rust → Java: the Java consumer (take) starts first and waits.
    let consumer = JavaChild::start(&["consume", &servers, &dir, "200"]);
    consumer.expect("ready", Duration::from_secs(60));
    for i in 0..200 {
        q.offer(format!("rust-{i}").as_bytes()).unwrap();
    }
    for i in 0..200 {
        assert_eq!(consumer.line(Duration::from_secs(60)), format!("rust-{i}"));
    }
    consumer.expect("done", Duration::from_secs(10));
    assert_eq!(q.peek().unwrap(), None);
    zkw.close().unwrap();
    assert_tree_then_clean(&root, &["q", "q-receipts", "q-takers"]);
}

/// `peek`/`element`/`poll`/`remove` on empty and full queues, `take_timeout`
/// running out, and an offer waking a waiting `take`.
#[test]
fn queue_api_timeouts_and_wake_up() {
    let zkw = session();
    let root = unique_root("queue-api");
    let q = DistributedQueue::new(&zkw, &format!("{root}/q")).unwrap();
    assert_eq!(q.peek().unwrap(), None);
    assert_eq!(q.poll().unwrap(), None);
    assert!(matches!(
        q.element(),
        Err(Error::Zk {
            code: ZkError::NoNode,
            ..
        })
    ));
    assert!(matches!(
        q.remove(),
        Err(Error::Zk {
            code: ZkError::NoNode,
            ..
        })
    ));
    let t = Instant::now();
    assert_eq!(q.take_timeout(Duration::from_millis(400)).unwrap(), None);
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(3),
        "{waited:?}"
    );

    q.offer(b"a").unwrap();
    q.offer(b"b").unwrap();
    assert_eq!(q.peek().unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(q.element().unwrap(), b"a");
    assert_eq!(q.remove().unwrap(), b"a");
    assert_eq!(q.poll().unwrap().as_deref(), Some(&b"b"[..]));

    // A take waiting in another session is woken by the offer.
    let dir = q.dir().to_string();
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        let zkw = session();
        let q = DistributedQueue::new(&zkw, &dir).unwrap();
        tx.send(()).unwrap();
        let t = Instant::now();
        let item = q.take_timeout(Duration::from_secs(30)).unwrap();
        zkw.close().unwrap();
        (item, t.elapsed())
    });
    rx.recv().unwrap();
    thread::sleep(Duration::from_millis(300)); // let it wait (any order is correct)
    q.offer(b"c").unwrap();
    let (item, waited) = h.join().unwrap();
    assert_eq!(item.as_deref(), Some(&b"c"[..]));
    assert!(waited < Duration::from_secs(10), "woken late: {waited:?}");
    zkw.close().unwrap();
    assert_tree_then_clean(&root, &["q", "q-receipts", "q-takers"]);
}

/// A consumer waiting in `take` whose session is partitioned past its timeout
/// ends with an error (not a hang); the items offered meanwhile stay for the
/// other consumers.
#[test]
fn queue_consumer_partitioned_past_its_session_ends_with_an_error() {
    let root = unique_root("queue-expiry");
    let dir = format!("{root}/q");
    let (proxy, victim) = proxied(Duration::from_secs(2));
    let vq = DistributedQueue::new(&victim, &dir).unwrap();
    let other = session();
    let q = DistributedQueue::new(&other, &dir).unwrap();
    q.offer(b"first").unwrap();
    assert_eq!(vq.poll().unwrap().as_deref(), Some(&b"first"[..]));

    let h = thread::spawn(move || {
        let t = Instant::now();
        let r = vq.take();
        (r, t.elapsed())
    });
    thread::sleep(Duration::from_millis(300));
    proxy.stall();
    q.offer(b"second").unwrap();
    let (r, waited) = h.join().unwrap();
    let e = r.expect_err("a partitioned take ends with an error");
    assert!(
        matches!(
            e.code(),
            Some(ZkError::ConnectionLoss | ZkError::SessionExpired)
        ),
        "{e}"
    );
    assert!(waited < Duration::from_secs(10), "ended after {waited:?}");
    println!("partitioned take ended after {waited:.1?} with: {e}");
    proxy.pass();
    assert!(
        eventually(Duration::from_secs(10), || victim.check_session().is_err()),
        "the partitioned session is expired after the partition"
    );
    assert_eq!(q.poll().unwrap().as_deref(), Some(&b"second"[..]));
    victim.close().unwrap();
    other.close().unwrap();
    assert_tree_then_clean(&root, &["q", "q-receipts", "q-takers"]);
}

// ---------------------------------------------------------------------------
// Barrier
// ---------------------------------------------------------------------------

#[test]
fn barrier_holds_waiters_until_removed_and_times_out() {
    let zkw = session();
    let root = unique_root("barrier");
    let path = format!("{root}/b");
    let b = Barrier::new(&zkw, &path).unwrap();
    assert!(
        b.wait_on_barrier(Duration::from_secs(5)).unwrap(),
        "absent: at once"
    );
    b.set_barrier().unwrap();
    b.set_barrier().unwrap(); // idempotent
    assert!(b.is_set().unwrap());
    let t = Instant::now();
    assert!(!b.wait_on_barrier(Duration::from_millis(300)).unwrap());
    assert!(t.elapsed() >= Duration::from_millis(300));

    let released = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let (path, released) = (path.clone(), released.clone());
            thread::spawn(move || {
                let zkw = session();
                let b = Barrier::new(&zkw, &path).unwrap();
                let through = b.wait_on_barrier(Duration::from_secs(60)).unwrap();
                released.fetch_add(1, Ordering::SeqCst);
                zkw.close().unwrap();
                through
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    assert_eq!(
        released.load(Ordering::SeqCst),
        0,
        "nobody passes a set barrier"
    );
    let t = Instant::now();
    b.remove_barrier().unwrap();
    for w in waiters {
        assert!(w.join().unwrap());
    }
    println!(
        "3 barrier waiters released {:.0?} after the removal",
        t.elapsed()
    );
    assert!(t.elapsed() < Duration::from_secs(10));
    b.remove_barrier().unwrap(); // idempotent
    zkw.close().unwrap();
    assert_tree_then_clean(&root, &[]);
}

#[test]
fn barrier_waiter_partitioned_past_its_session_ends_with_an_error() {
    let root = unique_root("barrier-expiry");
    let path = format!("{root}/b");
    let setter = session();
    Barrier::new(&setter, &path).unwrap().set_barrier().unwrap();
    let (proxy, victim) = proxied(Duration::from_secs(2));
    let b = Barrier::new(&victim, &path).unwrap();
    let h = thread::spawn(move || {
        let t = Instant::now();
        (b.wait_on_barrier(Duration::from_secs(60)), t.elapsed())
    });
    thread::sleep(Duration::from_millis(300));
    proxy.stall();
    let (r, waited) = h.join().unwrap();
    assert!(r.is_err(), "{r:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    proxy.pass();
    victim.close().unwrap();
    Barrier::new(&setter, &path)
        .unwrap()
        .remove_barrier()
        .unwrap();
    setter.close().unwrap();
    assert_tree_then_clean(&root, &[]);
}

// ---------------------------------------------------------------------------
// Double barrier
// ---------------------------------------------------------------------------

#[test]
fn double_barrier_enters_together_and_leaves_together() {
    const N: usize = 4;
    let root = unique_root("double");
    let path = format!("{root}/db");
    let arrived = Arc::new(AtomicUsize::new(0));
    let leaving = Arc::new(AtomicUsize::new(0));
    let members: Vec<_> = (0..N)
        .map(|i| {
            let (path, arrived, leaving) = (path.clone(), arrived.clone(), leaving.clone());
            thread::spawn(move || {
                let zkw = session();
                let db = DoubleBarrier::new(&zkw, &path, N).unwrap();
                thread::sleep(Duration::from_millis(100 * i as u64)); // staggered arrivals
                arrived.fetch_add(1, Ordering::SeqCst);
                assert!(db.enter(Duration::from_secs(60)).unwrap());
                assert_eq!(
                    arrived.load(Ordering::SeqCst),
                    N,
                    "entered before all arrived"
                );
                thread::sleep(Duration::from_millis(100 * (N - i) as u64)); // work
                leaving.fetch_add(1, Ordering::SeqCst);
                assert!(db.leave(Duration::from_secs(60)).unwrap());
                assert_eq!(
                    leaving.load(Ordering::SeqCst),
                    N,
                    "left before all were leaving"
                );
                assert_eq!(db.node(), None);
                zkw.close().unwrap();
            })
        })
        .collect();
    for m in members {
        m.join().unwrap();
    }
    assert_tree_then_clean(&root, &["db"]);
}

#[test]
fn double_barrier_timeouts_and_a_dead_member() {
    let root = unique_root("double-fail");
    let path = format!("{root}/db");
    // Two of three arrive: both time out and withdraw.
    let a = session();
    let b = session();
    let (da, db) = (
        DoubleBarrier::new(&a, &path, 3).unwrap(),
        DoubleBarrier::new(&b, &path, 3).unwrap(),
    );
    let h = thread::spawn(move || (db.enter(Duration::from_millis(600)).unwrap(), db));
    let t = Instant::now();
    assert!(!da.enter(Duration::from_millis(600)).unwrap());
    assert!(t.elapsed() >= Duration::from_millis(600));
    let (entered, db) = h.join().unwrap();
    assert!(!entered);
    assert_eq!(da.node(), None);
    assert!(tree(&raw(), &path).is_empty(), "timed-out members withdrew");

    // Three enter; one dies (its session ends) instead of leaving: the others
    // still leave.
    let c = session();
    let dc = DoubleBarrier::new(&c, &path, 3).unwrap();
    let hb = thread::spawn(move || {
        assert!(db.enter(Duration::from_secs(30)).unwrap());
        db
    });
    let hc = thread::spawn(move || {
        assert!(dc.enter(Duration::from_secs(30)).unwrap());
        dc
    });
    assert!(da.enter(Duration::from_secs(30)).unwrap());
    let db = hb.join().unwrap();
    let dc = hc.join().unwrap();
    let hl = thread::spawn(move || (db.leave(Duration::from_secs(30)), db));
    thread::sleep(Duration::from_millis(300));
    c.close().unwrap(); // c dies in the barrier
    assert!(da.leave(Duration::from_secs(30)).unwrap());
    let (left, _db) = hl.join().unwrap();
    assert!(left.unwrap());
    drop(dc);
    a.close().unwrap();
    b.close().unwrap();
    assert_tree_then_clean(&root, &["db"]);
}

// ---------------------------------------------------------------------------
// Group membership
// ---------------------------------------------------------------------------

#[test]
fn group_members_join_leave_and_a_killed_process_leaves() {
    let zkw = session();
    let root = unique_root("group");
    let path = format!("{root}/g");
    let g = Group::new(&zkw, &path).unwrap();
    let m1 = g.join("rust-1", b"one").unwrap();
    let other = session();
    let m2 = Group::new(&other, &path)
        .unwrap()
        .join("rust-2", b"two")
        .unwrap();
    assert_eq!(g.members().unwrap(), ["rust-1", "rust-2"]);
    assert_eq!(
        g.member_data("rust-2").unwrap().as_deref(),
        Some(&b"two"[..])
    );
    assert!(matches!(
        Group::new(&other, &path).unwrap().join("rust-1", b""),
        Err(Error::Zk {
            code: ZkError::NodeExists,
            ..
        })
    ));
    assert_eq!(
        g.wait_for_change(&g.members().unwrap(), Duration::from_millis(300))
            .unwrap(),
        None
    );

    // A Java process joins, then is killed with SIGKILL (2 s session).
    let seen = g.members().unwrap();
    let servers = shared_server().connect_string();
    let mut java = JavaChild::start(&["member", &servers, &format!("{path}/java")]);
    java.expect("ready", Duration::from_secs(60));
    let now = g
        .wait_for_change(&seen, Duration::from_secs(60))
        .unwrap()
        .expect("the Java member seen");
    assert_eq!(now, ["java", "rust-1", "rust-2"]);
    java.kill();
    let t = Instant::now();
    let now = g
        .wait_for_change(&now, Duration::from_secs(30))
        .unwrap()
        .expect("the killed member leaves");
    println!(
        "killed Java member left the group {:.1?} after kill -9",
        t.elapsed()
    );
    assert_eq!(now, ["rust-1", "rust-2"]);

    // Leaving, dropping and a session ending.
    m1.leave().unwrap();
    drop(m2); // in the background
    let now = g
        .wait_for_change(&now, Duration::from_secs(10))
        .unwrap()
        .unwrap();
    assert!(now.len() < 2);
    assert!(eventually(Duration::from_secs(10), || g
        .members()
        .unwrap()
        .is_empty()));
    let m3 = Group::new(&other, &path)
        .unwrap()
        .join("rust-3", b"")
        .unwrap();
    other.close().unwrap();
    assert!(eventually(Duration::from_secs(10), || g
        .members()
        .unwrap()
        .is_empty()));
    drop(m3); // after close: nothing to do, no hang
    zkw.close().unwrap();
    assert_tree_then_clean(&root, &["g"]);
}

#[test]
fn group_member_partitioned_past_its_session_leaves_and_its_watch_errors() {
    let root = unique_root("group-expiry");
    let path = format!("{root}/g");
    let observer = session();
    let g = Group::new(&observer, &path).unwrap();
    let (proxy, victim) = proxied(Duration::from_secs(2));
    let vg = Group::new(&victim, &path).unwrap();
    let _m = vg.join("victim", b"").unwrap();
    let seen = g.members().unwrap();
    assert_eq!(seen, ["victim"]);
    let h = thread::spawn(move || {
        let t = Instant::now();
        (
            vg.wait_for_change(&["victim".to_string()], Duration::from_secs(60)),
            t.elapsed(),
        )
    });
    thread::sleep(Duration::from_millis(300));
    proxy.stall();
    let now = g.wait_for_change(&seen, Duration::from_secs(30)).unwrap();
    assert_eq!(
        now,
        Some(vec![]),
        "the partitioned member left with its session"
    );
    let (r, waited) = h.join().unwrap();
    assert!(
        r.is_err(),
        "the partitioned watch ends with an error: {r:?}"
    );
    assert!(waited < Duration::from_secs(10));
    proxy.pass();
    victim.close().unwrap();
    observer.close().unwrap();
    assert_tree_then_clean(&root, &["g"]);
}

// ---------------------------------------------------------------------------
// Priority queue
// ---------------------------------------------------------------------------

#[test]
fn priority_queue_orders_by_priority_then_fifo_and_urgent_items_go_next() {
    let zkw = session();
    let root = unique_root("pq");
    let dir = format!("{root}/pq");
    let q = DistributedPriorityQueue::new(&zkw, &dir).unwrap();
    for i in 0..5 {
        q.offer(9, format!("low-{i}").as_bytes()).unwrap();
    }
    q.offer(5, b"mid-0").unwrap();
    q.offer(5, b"mid-1").unwrap();
    assert_eq!(q.peek().unwrap(), Some((5, b"mid-0".to_vec())));
    assert_eq!(q.poll().unwrap(), Some((5, b"mid-0".to_vec())));
    assert_eq!(q.poll().unwrap(), Some((5, b"mid-1".to_vec())));
    assert_eq!(q.poll().unwrap(), Some((9, b"low-0".to_vec())));
    // Another session offers an urgent item while this consumer works.
    let other = session();
    DistributedPriorityQueue::new(&other, &dir)
        .unwrap()
        .offer(0, b"urgent")
        .unwrap();
    assert_eq!(q.remove().unwrap(), (0, b"urgent".to_vec()));
    for i in 1..5 {
        assert_eq!(
            q.poll().unwrap(),
            Some((9, format!("low-{i}").into_bytes()))
        );
    }
    assert_eq!(q.poll().unwrap(), None);

    // Two consumers wait on the empty queue; an urgent item offered after
    // low ones is taken first.
    let got = Arc::new(Mutex::new(Vec::new()));
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let (dir, got) = (dir.clone(), got.clone());
            thread::spawn(move || {
                let zkw = session();
                let q = DistributedPriorityQueue::new(&zkw, &dir).unwrap();
                while let Some(item) = q.take_timeout(Duration::from_secs(3)).unwrap() {
                    got.lock().unwrap().push(item);
                }
                zkw.close().unwrap();
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    assert_eq!(
        q.take_timeout(Duration::from_millis(200)).unwrap(),
        None,
        "empty: times out"
    );
    let oq = DistributedPriorityQueue::new(&other, &dir).unwrap();
    for i in 0..3 {
        oq.offer(3, format!("n-{i}").as_bytes()).unwrap();
    }
    for c in consumers {
        c.join().unwrap();
    }
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 3, "{got:?}");
    other.close().unwrap();
    zkw.close().unwrap();
    assert_tree_then_clean(&root, &["pq", "pq-receipts", "pq-takers"]);
}

#[test]
fn priority_queue_urgent_item_overtakes_a_backlog_between_takes() {
    let zkw = session();
    let root = unique_root("pq-backlog");
    let dir = format!("{root}/pq");
    let q = DistributedPriorityQueue::new(&zkw, &dir).unwrap();
    for i in 0..20 {
        q.offer(7, format!("b-{i}").as_bytes()).unwrap();
    }
    let other = session();
    let oq = DistributedPriorityQueue::new(&other, &dir).unwrap();
    let mut order = Vec::new();
    for step in 0..21 {
        if step == 10 {
            oq.offer(1, b"urgent").unwrap();
        }
        let (p, d) = q.take_timeout(Duration::from_secs(5)).unwrap().unwrap();
        order.push((p, String::from_utf8(d).unwrap()));
    }
    assert_eq!(
        order[10],
        (1, "urgent".to_string()),
        "taken right after it came"
    );
    let backlog: Vec<String> = order
        .iter()
        .filter(|(p, _)| *p == 7)
        .map(|(_, d)| d.clone())
        .collect();
    let want: Vec<String> = (0..20).map(|i| format!("b-{i}")).collect();
    assert_eq!(backlog, want, "FIFO within a priority");
    other.close().unwrap();
    zkw.close().unwrap();
    assert_tree_then_clean(&root, &["pq", "pq-receipts"]);
}

// ---------------------------------------------------------------------------
// Two-phase commit
// ---------------------------------------------------------------------------

fn run_sites(
    path: &str,
    votes: &[(&str, Option<Vote>)],
) -> Vec<thread::JoinHandle<Option<Outcome>>> {
    votes
        .iter()
        .map(|&(site, vote)| {
            let (path, site) = (path.to_string(), site.to_string());
            thread::spawn(move || {
                let zkw = session();
                let tx = TwoPhaseCommit::open(&zkw, &path).unwrap();
                tx.join(&site).unwrap();
                if let Some(v) = vote {
                    tx.vote(&site, v).unwrap();
                }
                let o = tx.wait_outcome(Duration::from_secs(30)).unwrap();
                zkw.close().unwrap();
                o
            })
        })
        .collect()
}

#[test]
fn two_phase_commit_commits_when_all_commit_and_aborts_on_one_abort() {
    let coordinator = session();
    let root = unique_root("2pc");
    // All commit: every site and the coordinator see Commit.
    let path = format!("{root}/tx1");
    let tx = TwoPhaseCommit::create(&coordinator, &path, &["s1", "s2", "s3"]).unwrap();
    assert_eq!(tx.outcome().unwrap(), None);
    let sites = run_sites(
        &path,
        &[
            ("s1", Some(Vote::Commit)),
            ("s2", Some(Vote::Commit)),
            ("s3", Some(Vote::Commit)),
        ],
    );
    assert_eq!(
        tx.wait_outcome(Duration::from_secs(30)).unwrap(),
        Some(Outcome::Commit)
    );
    for s in sites {
        assert_eq!(s.join().unwrap(), Some(Outcome::Commit));
    }
    tx.delete().unwrap();

    // One abort decides at once, though s3 never votes.
    let path = format!("{root}/tx2");
    let tx = TwoPhaseCommit::create(&coordinator, &path, &["s1", "s2", "s3"]).unwrap();
    let s3 = session();
    let s3tx = TwoPhaseCommit::open(&s3, &path).unwrap();
    s3tx.join("s3").unwrap();
    let sites = run_sites(
        &path,
        &[("s1", Some(Vote::Commit)), ("s2", Some(Vote::Abort))],
    );
    for s in sites {
        assert_eq!(s.join().unwrap(), Some(Outcome::Abort));
    }
    assert_eq!(
        s3tx.wait_outcome(Duration::from_secs(5)).unwrap(),
        Some(Outcome::Abort)
    );

    // Undecided: a bounded wait returns None.
    let path3 = format!("{root}/tx3");
    let tx3 = TwoPhaseCommit::create(&coordinator, &path3, &["a", "b"]).unwrap();
    tx3.join("a").unwrap();
    tx3.vote("a", Vote::Commit).unwrap();
    let t = Instant::now();
    assert_eq!(tx3.wait_outcome(Duration::from_millis(400)).unwrap(), None);
    assert!(t.elapsed() >= Duration::from_millis(400));
    assert!(matches!(
        tx3.vote("zz", Vote::Commit),
        Err(Error::BadArguments(_))
    ));
    s3.close().unwrap();
    tx.delete().unwrap();
    tx3.delete().unwrap();
    coordinator.close().unwrap();
    assert_tree_then_clean(&root, &[]);
}

#[test]
fn two_phase_commit_aborts_when_a_site_dies_before_voting() {
    let coordinator = session();
    let root = unique_root("2pc-death");
    let path = format!("{root}/tx");
    let tx = TwoPhaseCommit::create(&coordinator, &path, &["s1", "s2", "s3"]).unwrap();
    // s3 joins through a proxy, then is partitioned past its session timeout.
    let (proxy, s3) = proxied(Duration::from_secs(2));
    TwoPhaseCommit::open(&s3, &path)
        .unwrap()
        .join("s3")
        .unwrap();
    let sites = run_sites(
        &path,
        &[("s1", Some(Vote::Commit)), ("s2", Some(Vote::Commit))],
    );
    thread::sleep(Duration::from_millis(300));
    assert_eq!(tx.outcome().unwrap(), None);
    let t = Instant::now();
    proxy.stall();
    for s in sites {
        assert_eq!(s.join().unwrap(), Some(Outcome::Abort));
    }
    println!(
        "sites saw the dead site's abort {:.1?} after the partition",
        t.elapsed()
    );
    assert_eq!(tx.outcome().unwrap(), Some(Outcome::Abort));
    proxy.pass();
    s3.close().unwrap();
    tx.delete().unwrap();
    coordinator.close().unwrap();
    assert_tree_then_clean(&root, &[]);
}

// ---------------------------------------------------------------------------
// Every wait ends with its session (issue 20, findings 1 and 9): with and
// without session renewal, a recipe (or lock) wait blocked when its session
// expires ends with SessionExpired, never carries on in the new session.
// ---------------------------------------------------------------------------

/// A session through a proxy (to force its expiry), renewing or not.
fn expirable(renew: bool) -> (FaultProxy, ZooKeeperWatcher) {
    init_log();
    let proxy = FaultProxy::start(shared_server().connect_string()).expect("proxy");
    let zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_identifier("recipes-expiry")
        .with_session_timeout(Duration::from_secs(6))
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .with_session_renewal(renew)
        .connect()
        .expect("connect");
    (proxy, zkw)
}

/// The paths session `id` watches on the server (`wchc`).
fn watched_by(id: i64) -> Vec<String> {
    let reply =
        zklock::testing::four_letter(&shared_server().connect_string(), "wchc").expect("wchc");
    let mut mine = false;
    let mut paths = Vec::new();
    for line in reply.lines() {
        if let Some(path) = line.strip_prefix('\t') {
            if mine {
                paths.push(path.trim().to_string());
            }
        } else {
            mine = line.trim() == format!("0x{id:x}");
        }
    }
    paths
}

/// How a test knows a wait has begun (so that the expiry comes after).
#[derive(Clone, Copy)]
enum Begun {
    /// The session has a data watch under the root (`wchc` lists data
    /// watches only).
    Watching,
    /// The wait created this child of the root (a wait on children creates
    /// its directory; every call after it is made in the wait's session, so
    /// an expiry from then on must end it).
    Created(&'static str),
}

/// Runs `wait` on `root` (a fresh directory) on an expirable session; once
/// the wait has begun, expires the session; the wait must end with
/// SessionExpired (a renewed session must not carry it on), within the
/// test's bound.
fn a_wait_ends_with_its_session<T: std::fmt::Debug + Send + 'static>(
    name: &str,
    renew: bool,
    begun: Begun,
    wait: impl FnOnce(ZooKeeperWatcher, String) -> zklock::Result<T> + Send + 'static,
) {
    let (proxy, zkw) = expirable(renew);
    let root = unique_root(name);
    zklock::zkutil::create_with_parents(&session(), &root).unwrap();
    let old = zkw.zookeeper().session_id();
    let (tx, rx) = mpsc::channel();
    let (w, r) = (zkw.clone(), root.clone());
    thread::spawn(move || {
        let _ = tx.send(wait(w, r));
    });
    let observer = raw();
    assert!(
        eventually(Duration::from_secs(20), || match begun {
            Begun::Watching => watched_by(old).iter().any(|p| p.starts_with(&root)),
            Begun::Created(child) => observer
                .exists(&format!("{root}/{child}"), false)
                .unwrap()
                .is_some(),
        }),
        "{name}: the wait never began under {root}"
    );
    observer.close().unwrap();
    common::force_expiry(&proxy, &shared_server().connect_string(), &zkw);
    let got = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{name} (renew {renew}): the wait outlived its session"));
    match got {
        Err(e) if e.code() == Some(ZkError::SessionExpired) => {}
        other => panic!("{name} (renew {renew}): {other:?}, not SessionExpired"),
    }
    if renew {
        assert!(
            eventually(Duration::from_secs(20), || zkw.zookeeper().session_id()
                != old
                && zkw.state() == zklock::client::State::Connected),
            "renewed"
        );
    }
    zkw.close().unwrap();
    zklock::zkutil::delete_node_recursively(&session(), &root).unwrap();
}

/// Both ways: without and with session renewal.
fn both(
    name: &str,
    begun: Begun,
    wait: impl Fn(ZooKeeperWatcher, String) -> zklock::Result<String> + Clone + Send + 'static,
) {
    for renew in [false, true] {
        a_wait_ends_with_its_session(name, renew, begun, wait.clone());
    }
}

#[test]
fn queue_take_ends_with_its_session() {
    both("expiry-queue", Begun::Created("q"), |zkw, root| {
        let q = DistributedQueue::new(&zkw, &format!("{root}/q"))?;
        q.take().map(|d| format!("{d:?}"))
    });
}

#[test]
fn priority_queue_take_ends_with_its_session() {
    both("expiry-pq", Begun::Created("q"), |zkw, root| {
        let q = DistributedPriorityQueue::new(&zkw, &format!("{root}/q"))?;
        q.take().map(|d| format!("{d:?}"))
    });
}

#[test]
fn barrier_wait_ends_with_its_session() {
    both("expiry-barrier", Begun::Watching, |zkw, root| {
        let b = Barrier::new(&zkw, &format!("{root}/b"))?;
        b.set_barrier()?;
        b.wait().map(|d| format!("{d:?}"))
    });
}

/// Finding 1: a member of a barrier of 2 waits alone; its session expires
/// (with renewal, the old engine woke it into the new session and it carried
/// on, later passing with members of the new session).
#[test]
fn double_barrier_enter_ends_with_its_session() {
    both("expiry-dbe", Begun::Watching, |zkw, root| {
        let b = DoubleBarrier::new(&zkw, &format!("{root}/b"), 2)?;
        b.enter(Duration::from_secs(60)).map(|d| format!("{d:?}"))
    });
}

#[test]
fn double_barrier_leave_ends_with_its_session() {
    both("expiry-dbl", Begun::Watching, |zkw, root| {
        let path = format!("{root}/b");
        // The other member stays in: our leave waits for it.
        let other = session();
        let (tx, rx) = mpsc::channel();
        let p = path.clone();
        thread::spawn(move || {
            let b = DoubleBarrier::new(&other, &p, 2).unwrap();
            assert!(b.enter(Duration::from_secs(30)).unwrap());
            let _ = rx.recv();
            drop(b);
            other.close().unwrap();
        });
        let b = DoubleBarrier::new(&zkw, &path, 2)?;
        assert!(b.enter(Duration::from_secs(30))?);
        let r = b.leave(Duration::from_secs(60)).map(|d| format!("{d:?}"));
        let _ = tx.send(());
        r
    });
}

#[test]
fn group_wait_ends_with_its_session() {
    both("expiry-group", Begun::Created("g"), |zkw, root| {
        let g = Group::new(&zkw, &format!("{root}/g"))?;
        let seen = g.members()?;
        g.wait_for_change(&seen, Duration::from_secs(60))
            .map(|d| format!("{d:?}"))
    });
}

#[test]
fn two_phase_commit_wait_ends_with_its_session() {
    both("expiry-2pc", Begun::Watching, |zkw, root| {
        let path = format!("{root}/tx");
        TwoPhaseCommit::create(&session(), &path, &["a", "b"])?;
        let tx = TwoPhaseCommit::open(&zkw, &path)?;
        tx.wait_outcome(Duration::from_secs(60))
            .map(|d| format!("{d:?}"))
    });
}

/// Finding 9: a lock waiter blocked across the expiry ends with
/// SessionExpired, never LockLost, with renewal too.
#[test]
fn lock_waiter_ends_with_its_session() {
    use zklock::lock::{InterProcessLock, ZkInterProcessWriteLock};
    both("expiry-lock", Begun::Watching, |zkw, root| {
        let path = format!("{root}/l");
        let holder_session = session();
        let holder = ZkInterProcessWriteLock::new(&holder_session, &path, b"h", None)?;
        holder.acquire()?;
        let waiter = ZkInterProcessWriteLock::new(&zkw, &path, b"w", None)?;
        let r = waiter.acquire().map(|d| format!("{d:?}"));
        holder.release()?;
        holder_session.close()?;
        r
    });
}

/// The revoker's wait (forced revocation's grace) ends with its session too.
#[test]
fn revoker_wait_ends_with_its_session() {
    use zklock::lock::{InterProcessLock, ZkInterProcessWriteLock};
    use zklock::recipes::revocable::{attempt_revoke_with_grace, lock_holders};
    both("expiry-revoke", Begun::Watching, |zkw, root| {
        let path = format!("{root}/l");
        let holder_session = session();
        let holder = ZkInterProcessWriteLock::new(&holder_session, &path, b"h", None)?;
        holder.acquire()?;
        let node = lock_holders(&zkw, &path)?.remove(0);
        let r = attempt_revoke_with_grace(&zkw, &node, Duration::from_secs(60))
            .map(|d| format!("{d:?}"));
        holder.release()?;
        holder_session.close()?;
        r
    });
}

// ---------------------------------------------------------------------------
// Session-bound participant nodes (issue 20, findings 2 to 4)
// ---------------------------------------------------------------------------

/// Finding 2: a `Member` of an expired session (renewal on) never acts for
/// the process that joined under the same name since: `set_data` and `leave`
/// return SessionExpired, and the other's node keeps its data; a dropped
/// member leaves it alone too.
#[test]
fn group_member_of_an_expired_session_never_touches_the_new_holder_of_its_name() {
    let (proxy, zkw) = expirable(true);
    let root = unique_root("group-renewal");
    let path = format!("{root}/g");
    let g = Group::new(&zkw, &path).unwrap();
    let stale = g.join("worker", b"mine").unwrap();
    let stale_dropped = g.join("other", b"mine").unwrap();
    let old = zkw.zookeeper().session_id();
    common::force_expiry(&proxy, &shared_server().connect_string(), &zkw);
    assert!(eventually(Duration::from_secs(20), || {
        zkw.zookeeper().session_id() != old && zkw.state() == zklock::client::State::Connected
    }));
    // Another process takes both names.
    let rival = session();
    let rg = Group::new(&rival, &path).unwrap();
    let theirs = rg.join("worker", b"theirs").unwrap();
    let theirs2 = rg.join("other", b"theirs").unwrap();

    assert_code(stale.set_data(b"overwritten"), ZkError::SessionExpired);
    drop(stale_dropped); // in the background: must not delete theirs2
    assert_code(stale.leave(), ZkError::SessionExpired);
    assert_eq!(
        g.member_data("worker").unwrap().as_deref(),
        Some(&b"theirs"[..])
    );
    // A background removal that reached the node would be done by now
    // (asynchronous delete, answered in a round trip); look twice.
    rival.recoverable_zookeeper().sync(&path).unwrap();
    assert_eq!(
        g.member_data("other").unwrap().as_deref(),
        Some(&b"theirs"[..])
    );
    assert_eq!(g.members().unwrap(), ["other", "worker"]);

    // The renewed session joins again as a member of its own.
    let fresh = g.join_party(b"p").unwrap();
    fresh.set_data(b"p2").unwrap();
    theirs.leave().unwrap();
    theirs2.leave().unwrap();
    fresh.leave().unwrap();
    assert!(g.members().unwrap().is_empty());
    zkw.close().unwrap();
    rival.close().unwrap();
    zklock::zkutil::delete_node_recursively(&session(), &root).unwrap();
}

fn assert_code<T: std::fmt::Debug>(r: zklock::Result<T>, code: ZkError) {
    match r {
        Err(e) if e.code() == Some(code) => {}
        other => panic!("{other:?}, expected {code:?}"),
    }
}

/// Finding 3: the outcome is final once read. A site that joined and whose
/// session ended before voting reads as Abort; the same site, joining again
/// from a new session, can no longer vote Commit; and a site cannot change
/// its vote.
#[test]
fn two_phase_commit_outcome_is_final_once_read() {
    let root = unique_root("2pc-final");
    let path = format!("{root}/tx");
    let coordinator = session();
    let tx = TwoPhaseCommit::create(&coordinator, &path, &["a", "b"]).unwrap();
    // a votes Commit; b joins, then its session ends before it votes.
    let a = session();
    let atx = TwoPhaseCommit::open(&a, &path).unwrap();
    atx.join("a").unwrap();
    atx.vote("a", Vote::Commit).unwrap();
    // A vote is cast once.
    assert_code(atx.vote("a", Vote::Abort), ZkError::BadVersion);
    let b = session();
    let btx = TwoPhaseCommit::open(&b, &path).unwrap();
    btx.join("b").unwrap();
    b.close().unwrap();
    assert_eq!(tx.outcome().unwrap(), Some(Outcome::Abort));
    // b again, from a new session: joins, but its Commit cannot flip it.
    let b2 = session();
    let b2tx = TwoPhaseCommit::open(&b2, &path).unwrap();
    b2tx.join("b").unwrap();
    assert_code(b2tx.vote("b", Vote::Commit), ZkError::BadVersion);
    assert_eq!(tx.outcome().unwrap(), Some(Outcome::Abort));
    assert_eq!(
        atx.wait_outcome(Duration::from_secs(5)).unwrap(),
        Some(Outcome::Abort)
    );
    // A vote without joining through this instance is refused.
    assert!(matches!(
        tx.vote("a", Vote::Commit),
        Err(Error::BadArguments(_))
    ));
    b2.close().unwrap();
    a.close().unwrap();
    tx.delete().unwrap();
    coordinator.close().unwrap();
    zklock::zkutil::delete_node_recursively(&session(), &root).unwrap();
}

/// Finding 3, the renewal side: a site whose joining session expired (renewal
/// on) cannot vote through the renewed session.
#[test]
fn two_phase_commit_vote_after_renewal_is_session_expired() {
    let (proxy, zkw) = expirable(true);
    let root = unique_root("2pc-renewal");
    let path = format!("{root}/tx");
    let tx = TwoPhaseCommit::create(&session(), &path, &["a"]).unwrap();
    let site = TwoPhaseCommit::open(&zkw, &path).unwrap();
    site.join("a").unwrap();
    let old = zkw.zookeeper().session_id();
    common::force_expiry(&proxy, &shared_server().connect_string(), &zkw);
    assert!(eventually(Duration::from_secs(20), || {
        zkw.zookeeper().session_id() != old && zkw.state() == zklock::client::State::Connected
    }));
    assert_code(site.vote("a", Vote::Commit), ZkError::SessionExpired);
    assert_eq!(tx.outcome().unwrap(), Some(Outcome::Abort));
    zkw.close().unwrap();
    zklock::zkutil::delete_node_recursively(&session(), &root).unwrap();
}

/// Finding 4, forced with the step hook: A counts C, C's deadline passes and
/// C withdraws, then A goes on to create `ready`. The `multi` with a check
/// of every counted member fails: no `ready`, A does not pass believing C is
/// in (C returned `Ok(false)`).
#[test]
fn double_barrier_never_counts_a_member_that_left() {
    use zklock::recipes::double_barrier::BarrierStep;
    let root = unique_root("dbarrier-counted");
    let path = format!("{root}/b");
    let (c_done_tx, c_done_rx) = mpsc::channel::<bool>();
    let c_done_rx = Mutex::new(Some(c_done_rx));
    let (counted_tx, counted_rx) = mpsc::channel::<()>();
    let counted_tx = Mutex::new(counted_tx);
    // C enters first, with a short deadline, and waits alone; then A.
    let (c_waiting_tx, c_waiting_rx) = mpsc::channel::<()>();
    let c_waiting_tx = Mutex::new(c_waiting_tx);
    let c_zkw = session();
    let c = DoubleBarrier::new(&c_zkw, &path, 2)
        .unwrap()
        .with_step_hook(move |step| {
            if step == BarrierStep::Waiting {
                let _ = c_waiting_tx.lock().unwrap().send(());
            }
        });
    let c_thread = thread::spawn(move || {
        let entered = c.enter(Duration::from_secs(3)).unwrap();
        let _ = c_done_tx.send(entered);
        drop(c);
        c_zkw.close().unwrap();
        entered
    });
    c_waiting_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("C waits alone");
    let p = path.clone();
    let a_thread = thread::spawn(move || {
        let a_zkw = session();
        let a = DoubleBarrier::new(&a_zkw, &p, 2)
            .unwrap()
            .with_step_hook(move |step| {
                if step == BarrierStep::Counted {
                    // Hold A here (once) until C has given up.
                    if let Some(rx) = c_done_rx.lock().unwrap().take() {
                        let _ = counted_tx.lock().unwrap().send(());
                        let _ = rx.recv_timeout(Duration::from_secs(30));
                    }
                }
            });
        let entered = a.enter(Duration::from_secs(6)).unwrap();
        drop(a);
        a_zkw.close().unwrap();
        entered
    });
    counted_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("A counted the members");
    assert!(!c_thread.join().unwrap(), "C gave up");
    assert!(
        !a_thread.join().unwrap(),
        "A passed the barrier counting C, who had left"
    );
    let zk = raw();
    assert!(zk
        .exists(&format!("{path}/ready"), false)
        .unwrap()
        .is_none());
    assert!(zk.get_children(&path, false).unwrap().is_empty());
    zk.close().unwrap();
    zklock::zkutil::delete_node_recursively(&session(), &root).unwrap();
}

// ---------------------------------------------------------------------------
// What a kazoo or Curator user misses (issue 20, point 8)
// ---------------------------------------------------------------------------

/// A queue's length; the priority queue's unbounded `take`; whether
/// `remove_barrier` removed anything; an unbounded barrier wait; a group that
/// names its members (kazoo's `Party`).
#[test]
fn queue_len_priority_take_barrier_wait_and_party() {
    let zkw = session();
    let root = unique_root("point-8");
    // Queue length (kazoo `len(queue)`).
    let q = DistributedQueue::new(&zkw, &format!("{root}/q")).unwrap();
    assert_eq!(q.len().unwrap(), 0);
    assert!(q.is_empty().unwrap());
    q.offer(b"a").unwrap();
    q.offer(b"b").unwrap();
    assert_eq!(q.len().unwrap(), 2);
    assert_eq!(q.poll().unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(q.len().unwrap(), 1);

    // The priority queue's take without a bound, woken by an offer.
    let dir = format!("{root}/pq");
    let d = dir.clone();
    let taker = thread::spawn(move || {
        let zkw = session();
        let pq = DistributedPriorityQueue::new(&zkw, &d).unwrap();
        let item = pq.take().unwrap();
        zkw.close().unwrap();
        item
    });
    let pq = DistributedPriorityQueue::new(&zkw, &dir).unwrap();
    // Offered whenever the taker waits or not: either order is correct.
    pq.offer(3, b"x").unwrap();
    assert_eq!(taker.join().unwrap(), (3, b"x".to_vec()));

    // Barrier: remove says whether it removed; wait() has no bound.
    let b = Barrier::new(&zkw, &format!("{root}/b")).unwrap();
    assert!(!b.remove_barrier().unwrap(), "not set: nothing removed");
    b.set_barrier().unwrap();
    let p = b.path().to_string();
    let waiter = thread::spawn(move || {
        let zkw = session();
        let r = Barrier::new(&zkw, &p).unwrap().wait();
        zkw.close().unwrap();
        r
    });
    assert!(b.remove_barrier().unwrap(), "set: removed");
    waiter.join().unwrap().unwrap();
    assert!(!b.remove_barrier().unwrap());

    // Party: the group names its members.
    let g = Group::new(&zkw, &format!("{root}/party")).unwrap();
    let m1 = g.join_party(b"one").unwrap();
    let m2 = g.join_party(b"two").unwrap();
    assert_ne!(m1.node(), m2.node());
    let names = g.members().unwrap();
    assert_eq!(names.len(), 2);
    assert!(names.iter().all(|n| n.starts_with("p-")), "{names:?}");
    let n1 = m1.node().rsplit('/').next().unwrap().to_string();
    assert_eq!(g.member_data(&n1).unwrap().as_deref(), Some(&b"one"[..]));
    m1.leave().unwrap();
    drop(m2);
    assert!(eventually(Duration::from_secs(10), || g
        .members()
        .unwrap()
        .is_empty()));
    zkw.close().unwrap();
    zklock::zkutil::delete_node_recursively(&session(), &root).unwrap();
}

// ---------------------------------------------------------------------------
// No herd (issue 20, finding 6), counted by the server (`mntr`)
// ---------------------------------------------------------------------------

/// The server's count of packets received (requests, pings included).
fn packets_received(server: &str) -> u64 {
    let mntr = zklock::testing::four_letter(server, "mntr").expect("mntr");
    zklock::testing::parse_mntr(&mntr)["zk_packets_received"]
        .parse()
        .expect("zk_packets_received")
}

/// Eight idle consumers, items offered one at a time: each item wakes one
/// consumer (the takers' lock holder), so the requests per item stay a small
/// constant instead of growing with the consumers (before: every idle
/// consumer woke, listed and raced for every item). On its own server, so
/// that no other test's requests are counted.
#[test]
fn an_offer_wakes_one_idle_consumer_not_all() {
    init_log();
    let server = zklock::testing::ZkServer::start().expect("server");
    let servers = server.connect_string();
    const CONSUMERS: usize = 8;
    const ITEMS: usize = 20;
    let root = "/herd";
    let dir = format!("{root}/q");
    let taken = Arc::new(AtomicUsize::new(0));
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (servers, dir, taken) = (servers.clone(), dir.clone(), taken.clone());
            thread::spawn(move || {
                // A long session timeout: few pings in the count.
                let zkw = connect_to(&servers, Duration::from_secs(30));
                let q = DistributedQueue::new(&zkw, &dir).unwrap();
                loop {
                    let item = q.take().unwrap();
                    if item == b"stop" {
                        break;
                    }
                    taken.fetch_add(1, Ordering::SeqCst);
                }
                zkw.close().unwrap();
            })
        })
        .collect();
    let zkw = connect_to(&servers, Duration::from_secs(30));
    let zk = zkw.zookeeper();
    let takers = format!("{dir}-takers");
    let all_idle = || {
        zk.get_children(&takers, false)
            .map(|c| c.len() == CONSUMERS)
            .unwrap_or(false)
            && zk
                .get_children(&dir, false)
                .map(|c| c.is_empty())
                .unwrap_or(false)
    };
    assert!(
        eventually(Duration::from_secs(30), all_idle),
        "consumers idle"
    );
    let q = DistributedQueue::new(&zkw, &dir).unwrap();
    let before = packets_received(&servers);
    for i in 0..ITEMS {
        q.offer(format!("item {i}").as_bytes()).unwrap();
        assert!(eventually(Duration::from_secs(30), || taken
            .load(Ordering::SeqCst)
            == i + 1));
        assert!(eventually(Duration::from_secs(30), all_idle), "idle again");
    }
    let after = packets_received(&servers);
    // Our own requests: the offers and the idle checks (2 listings per look):
    // counted out by measuring them alone.
    let mine_before = packets_received(&servers);
    for _ in 0..ITEMS {
        assert!(all_idle());
    }
    let mine = packets_received(&servers) - mine_before;
    let per_item = (after - before).saturating_sub(mine) as f64 / ITEMS as f64;
    println!(
        "{CONSUMERS} idle consumers: {per_item:.1} requests per offered item (server mntr, offer and hand-off included)"
    );
    // One consumer woken per item: its listing, claim (read + delete), the
    // takers' lock hand-off (release, the next holder's listing) and its
    // listing + watch, the offer, and each idle look of this test beyond the
    // one counted out: about 12. A herd costs at least 2 per idle consumer
    // and item on top (each wakes, lists and re-watches).
    assert!(
        per_item < 2.0 * CONSUMERS as f64,
        "{per_item:.1} requests per item: the idle consumers herd"
    );
    for _ in 0..CONSUMERS {
        q.offer(b"stop").unwrap();
    }
    for c in consumers {
        c.join().unwrap();
    }
    zkw.close().unwrap();
}

/// Finding 4, the other side, forced with the step hook: C's time runs out,
/// and before it withdraws A counts C in and creates `ready`. C's withdrawal
/// (one `multi` that fails when `ready` exists) finds it: C entered after
/// all, as A believes; before, C deleted its node and reported `Ok(false)`.
#[test]
fn double_barrier_member_out_of_time_looks_for_ready_first() {
    use zklock::recipes::double_barrier::BarrierStep;
    let root = unique_root("dbarrier-late");
    let path = format!("{root}/b");
    let (timed_out_tx, timed_out_rx) = mpsc::channel::<()>();
    let timed_out_tx = Mutex::new(timed_out_tx);
    let (a_done_tx, a_done_rx) = mpsc::channel::<bool>();
    let a_done_rx = Mutex::new(a_done_rx);
    let c_zkw = session();
    let c = DoubleBarrier::new(&c_zkw, &path, 2)
        .unwrap()
        .with_step_hook(move |step| {
            if step == BarrierStep::TimedOut {
                // Hold C until A has passed (counting C, still present).
                let _ = timed_out_tx.lock().unwrap().send(());
                let _ = a_done_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(30));
            }
        });
    let c_thread = thread::spawn(move || {
        let entered = c.enter(Duration::from_millis(500)).unwrap();
        let node = c.node();
        (entered, node, c, c_zkw)
    });
    timed_out_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("C timed out");
    let a_zkw = session();
    let a = DoubleBarrier::new(&a_zkw, &path, 2).unwrap();
    let a_entered = a.enter(Duration::from_secs(10)).unwrap();
    a_done_tx.send(a_entered).unwrap();
    assert!(a_entered, "A counted C and passed");
    let (c_entered, c_node, c, c_zkw) = c_thread.join().unwrap();
    assert!(c_entered, "C is in the barrier A passed");
    assert!(c_node.is_some(), "C's node stays until it leaves");
    // Both leave together.
    let leaving = thread::spawn(move || {
        let left = c.leave(Duration::from_secs(10)).unwrap();
        drop(c);
        c_zkw.close().unwrap();
        left
    });
    assert!(a.leave(Duration::from_secs(10)).unwrap());
    assert!(leaving.join().unwrap());
    drop(a);
    a_zkw.close().unwrap();
    let zk = raw();
    assert!(zk.get_children(&path, false).unwrap().is_empty());
    zk.close().unwrap();
    zklock::zkutil::delete_node_recursively(&session(), &root).unwrap();
}

/// An idle recipe waiter costs no wake-up (the old engine looked at its
/// session every 500 ms): a barrier waiter's thread, counted by the wait
/// engine itself ([`zklock::testing::engine_wake_ups`], exact and per
/// thread, where the OS's context switches of the thread also counted
/// whatever else woke it), is woken at most once over 3 s of waiting and the
/// barrier's removal: by the removal.
#[test]
fn an_idle_recipe_waiter_does_not_wake_up() {
    let zkw = session();
    let root = unique_root("idle-recipe");
    let b = Barrier::new(&zkw, &format!("{root}/b")).unwrap();
    b.set_barrier().unwrap();
    let path = b.path().to_string();
    let w = zkw.clone();
    let waiter = thread::Builder::new()
        .name("idle-barrier".into())
        .spawn(move || {
            let barrier = Barrier::new(&w, &path).unwrap();
            let before = zklock::testing::engine_wake_ups();
            let waited = barrier.wait();
            (waited, zklock::testing::engine_wake_ups() - before)
        })
        .unwrap();
    let id = zkw.zookeeper().session_id();
    assert!(eventually(Duration::from_secs(10), || watched_by(id)
        .iter()
        .any(|p| p.starts_with(&root))));
    // Deliberate: an idle wait, long enough for 6 rechecks at 500 ms.
    thread::sleep(Duration::from_secs(3));
    assert!(b.remove_barrier().unwrap());
    let (waited, woken) = waiter.join().unwrap();
    waited.unwrap();
    assert!(
        woken <= 1,
        "the idle waiter woke {woken} times (the removal wakes it once)"
    );
    zkw.close().unwrap();
    zklock::zkutil::delete_node_recursively(&session(), &root).unwrap();
}

/// A claim whose commit (the `multi` deleting the item and writing the
/// consumer's receipt) is applied but whose reply is lost: the proxy holds the
/// server's replies from just before the commit is sent, and the connection is
/// cut once the item is gone from the server. After the reconnect the claim
/// reads its receipt and returns the item: taken exactly once, with a second
/// consumer waiting on the queue all along (it gets nothing). Before the
/// receipts, such a claim returned `ConnectionLoss` and the item was lost.
/// Then the receipt goes with the queue's drop: no orphan.
fn lost_commit_reply_returns_the_item<Q: Send + 'static>(
    kind: &str,
    make: impl Fn(&ZooKeeperWatcher, &str) -> Q + Send + Sync + Clone + 'static,
    with_hook: impl FnOnce(Q, Box<dyn Fn(&str) + Send + Sync>) -> Q,
    offer: impl Fn(&Q, &[u8]),
    poll: impl Fn(&Q) -> zklock::Result<Option<Vec<u8>>>,
    wait: impl Fn(&Q, Duration) -> zklock::Result<Option<Vec<u8>>> + Send + Sync + 'static,
) {
    let (proxy, zkw) = proxied(Duration::from_secs(6));
    let proxy = Arc::new(proxy);
    let dir = format!("{}/{kind}", unique_root("lost-commit"));
    let other = session();
    let competitor = Arc::new(Mutex::new(None));
    let hooked = Arc::new(AtomicUsize::new(0));
    let wait = Arc::new(wait);
    let hook = {
        let (proxy, dir, other, competitor, hooked, make, wait) = (
            proxy.clone(),
            dir.clone(),
            other.clone(),
            competitor.clone(),
            hooked.clone(),
            make.clone(),
            wait.clone(),
        );
        Box::new(move |item: &str| {
            if hooked.fetch_add(1, Ordering::SeqCst) > 0 {
                return;
            }
            proxy.stall_downstream();
            let (proxy, dir, other, competitor, make, item, wait) = (
                proxy.clone(),
                dir.clone(),
                other.clone(),
                competitor.clone(),
                make.clone(),
                item.to_string(),
                wait.clone(),
            );
            thread::spawn(move || {
                let zk = other.zookeeper();
                assert!(
                    eventually(Duration::from_secs(20), || matches!(
                        zk.exists(&item, false),
                        Ok(None)
                    )),
                    "the commit reached the server"
                );
                // A competitor waits on the queue while the claim is in doubt.
                let q = make(&other, &dir);
                let (tx, rx) = mpsc::channel();
                *competitor.lock().unwrap() = Some(rx);
                thread::spawn(move || {
                    let _ = tx.send(wait(&q, Duration::from_secs(5)).map_err(|e| e.to_string()));
                });
                thread::sleep(Duration::from_millis(300));
                proxy.reset();
            });
        }) as Box<dyn Fn(&str) + Send + Sync>
    };
    let q = with_hook(make(&zkw, &dir), hook);
    offer(&q, b"only once");
    let got = poll(&q).expect("the claim ends without an error");
    assert_eq!(
        got.as_deref(),
        Some(&b"only once"[..]),
        "the item is returned"
    );
    assert_eq!(hooked.load(Ordering::SeqCst), 1, "one commit sent");
    let rx = competitor
        .lock()
        .unwrap()
        .take()
        .expect("competitor started");
    let theirs = rx.recv().unwrap().expect("competitor's take");
    assert_eq!(theirs, None, "the competitor got nothing: taken once");
    let zk = other.zookeeper();
    let receipts = format!("{dir}-receipts");
    let listed = zk.get_children(&receipts, false).unwrap();
    assert_eq!(listed.len(), 1, "one receipt: {listed:?}");
    drop(q);
    assert!(
        eventually(Duration::from_secs(20), || zk
            .get_children(&receipts, false)
            .map(|c| c.is_empty())
            .unwrap_or(false)),
        "the receipt is removed on drop"
    );
    zkw.close().unwrap();
    other.close().unwrap();
}

#[test]
fn a_lost_commit_reply_still_takes_the_item_exactly_once() {
    lost_commit_reply_returns_the_item(
        "fifo",
        |zkw, dir| DistributedQueue::new(zkw, dir).unwrap(),
        |q, hook| q.with_claim_hook(hook),
        |q, data| {
            q.offer(data).unwrap();
        },
        |q| q.poll(),
        |q, t| q.take_timeout(t),
    );
}

#[test]
fn a_lost_commit_reply_still_takes_the_priority_item_exactly_once() {
    lost_commit_reply_returns_the_item(
        "priority",
        |zkw, dir| DistributedPriorityQueue::new(zkw, dir).unwrap(),
        |q, hook| q.with_claim_hook(hook),
        |q, data| {
            q.offer(3, data).unwrap();
        },
        |q| q.poll().map(|o| o.map(|(_, d)| d)),
        |q, t| q.take_timeout(t).map(|o| o.map(|(_, d)| d)),
    );
}

/// Exactly-once claims cost no request per take: the item's read and one
/// `multi` (its delete and the receipt's write), the receipt created once by
/// the consumer's first claim. Counted on a server of its own (`mntr`), 50
/// items polled from one listing: 2 requests per item (plus the one listing).
#[test]
fn an_exactly_once_take_is_still_two_requests() {
    init_log();
    let server = zklock::testing::ZkServer::start().expect("server");
    let servers = server.connect_string();
    const ITEMS: u64 = 50;
    let zkw = connect_to(&servers, Duration::from_secs(30));
    let q = DistributedQueue::new(&zkw, "/costs/q").unwrap();
    for i in 0..=ITEMS {
        q.offer(format!("item {i}").as_bytes()).unwrap();
    }
    // The first take lists and creates the receipt.
    assert_eq!(q.poll().unwrap().as_deref(), Some(&b"item 0"[..]));
    let before = packets_received(&servers);
    for i in 1..=ITEMS {
        let item = q.poll().unwrap();
        assert_eq!(item, Some(format!("item {i}").into_bytes()));
    }
    let after = packets_received(&servers);
    // The second mntr's own packet is not counted (four-letter words are not
    // session packets); a ping may be.
    let per_item = (after - before) as f64 / ITEMS as f64;
    println!("exactly-once take: {per_item:.2} requests per item (server mntr)");
    assert!(
        (2.0..2.2).contains(&per_item),
        "{per_item:.2} requests per item, expected 2 (read + multi)"
    );
    drop(q);
    zkw.close().unwrap();
}

/// Contended takes near the floor (issue 37), counted on a server of its own
/// (`mntr`): a backlog of 400 items (one `offer_all` into the existing
/// directory), then 4 consumers, a
/// session each, released together on it and polling until it is empty.
/// Every item is taken once, each consumer's in order, and all the requests
/// (the creates, the consumers' connects, listings, claims, lost claims and
/// closes) stay at most 4 per item; the floor is 3 (a create, the claim's
/// read and its `multi`). Before, the consumers went for the same head in
/// step, each with a read and a `multi`: about 7 per item.
#[test]
fn contended_takes_cost_at_most_4_requests_per_item() {
    init_log();
    let server = zklock::testing::ZkServer::start().expect("server");
    let servers = server.connect_string();
    const CONSUMERS: usize = 4;
    const ITEMS: usize = 400;
    let dir = "/contended/q";
    let zkw = connect_to(&servers, Duration::from_secs(30));
    // The directory first (else the batch is sent twice: its creates find
    // no parent); the count starts with the offers.
    zklock::zkutil::create_with_parents(&zkw, dir).unwrap();
    let before = packets_received(&servers);
    let q = DistributedQueue::new(&zkw, dir).unwrap();
    let items: Vec<String> = (0..ITEMS).map(|i| format!("{i}")).collect();
    assert_eq!(q.offer_all(&items).unwrap().len(), ITEMS);
    drop(q);
    zkw.close().unwrap();
    let start = Arc::new(std::sync::Barrier::new(CONSUMERS));
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (servers, start) = (servers.clone(), start.clone());
            thread::spawn(move || {
                // A long session timeout: few pings in the count.
                let zkw = connect_to(&servers, Duration::from_secs(30));
                let q = DistributedQueue::new(&zkw, dir).unwrap();
                let mut got: Vec<usize> = Vec::new();
                start.wait();
                while let Some(item) = q.poll().unwrap() {
                    got.push(String::from_utf8(item).unwrap().parse().unwrap());
                }
                drop(q);
                zkw.close().unwrap();
                got
            })
        })
        .collect();
    let mut seen = HashSet::new();
    let mut per_consumer = Vec::new();
    for c in consumers {
        let got = c.join().unwrap();
        per_consumer.push(got.len());
        assert!(got.windows(2).all(|w| w[0] < w[1]), "in order: {got:?}");
        for i in got {
            assert!(seen.insert(i), "item {i} taken twice");
        }
    }
    assert_eq!(seen.len(), ITEMS, "every item taken once");
    let per_item = (packets_received(&servers) - before) as f64 / ITEMS as f64;
    println!(
        "{CONSUMERS} contended consumers: {per_item:.2} requests per item (server mntr, \
         offers, sessions and lost claims included), per consumer {per_consumer:?}"
    );
    assert!(
        per_item <= 4.0,
        "{per_item:.2} requests per item: the consumers contend in step for the head"
    );
}

/// How [`a_lost_claims_back_off_ends_with_its_session`] ends the consumer's
/// session.
#[derive(Clone, Copy, Debug)]
enum SessionEnd {
    /// `close()` on the consumer's watcher.
    Close,
    /// A confirmed expiry (`expire_session`: the client has learned it).
    Expire,
}

/// A take whose claim lost (another consumer took the item) backs off before
/// it lists again, and the end of its session ends the back-off at once: it
/// is a wait of the wait engine, not a plain sleep. Forced: the claim hook has
/// another session take the item just before the consumer's commit and holds
/// the claim 400 ms, so that the back-off (the claim's own time, at most
/// 250 ms, with a jitter down to half) lasts at least 125 ms; the wait hook,
/// told `BackingOff` as the back-off begins, ends the consumer's session
/// (`close()` or a confirmed expiry) before it lets the back-off run. The take
/// must return the session's error within 100 ms of that end, before the
/// back-off's shortest end; the old `thread::sleep` back-off returned only
/// when it was over (125 to 250 ms on).
fn a_lost_claims_back_off_ends_with_its_session<Q: Send + 'static>(
    kind: &str,
    end: SessionEnd,
    make: impl Fn(&ZooKeeperWatcher, &str) -> Q,
    with_hooks: impl FnOnce(
        Q,
        Box<dyn Fn(&str) + Send + Sync>,
        Box<dyn Fn(zklock::recipes::WaitStep, &str) + Send + Sync>,
    ) -> Q,
    offer: impl Fn(&Q, &[u8]),
    take: impl FnOnce(&Q) -> zklock::Result<Vec<u8>>,
) {
    let zkw = session();
    let other = session();
    let root = unique_root("lost-claim-back-off");
    let dir = format!("{root}/{kind}");
    let claims = Arc::new(AtomicUsize::new(0));
    let claim_hook = {
        let (claims, other) = (claims.clone(), other.clone());
        Box::new(move |item: &str| {
            if claims.fetch_add(1, Ordering::SeqCst) == 0 {
                // Another consumer takes the item first, and the claim is
                // slow: its back-off gets the longest length.
                other
                    .zookeeper()
                    .delete(item, None)
                    .expect("the other take");
                thread::sleep(Duration::from_millis(400));
            }
        }) as Box<dyn Fn(&str) + Send + Sync>
    };
    let ended = Arc::new(Mutex::new(None::<Instant>));
    let back_offs = Arc::new(AtomicUsize::new(0));
    let wait_hook = {
        let (ended, back_offs, zkw) = (ended.clone(), back_offs.clone(), zkw.clone());
        Box::new(move |step: zklock::recipes::WaitStep, _dir: &str| {
            if step != zklock::recipes::WaitStep::BackingOff
                || back_offs.fetch_add(1, Ordering::SeqCst) > 0
            {
                return;
            }
            match end {
                SessionEnd::Close => zkw.close().expect("close"),
                SessionEnd::Expire => {
                    zklock::testing::expire_session(
                        zkw.zookeeper(),
                        &shared_server().connect_string(),
                    )
                    .expect("expire");
                }
            }
            *ended.lock().unwrap() = Some(Instant::now());
        }) as Box<dyn Fn(zklock::recipes::WaitStep, &str) + Send + Sync>
    };
    let q = with_hooks(make(&zkw, &dir), claim_hook, wait_hook);
    offer(&q, b"taken by the other");
    let got = take(&q);
    let returned = Instant::now();
    assert_eq!(claims.load(Ordering::SeqCst), 1, "{kind}: one claim, lost");
    assert_eq!(back_offs.load(Ordering::SeqCst), 1, "{kind}: one back-off");
    match (&got, end) {
        (Err(Error::Closed), SessionEnd::Close) => {}
        (Err(e), SessionEnd::Expire) if e.code() == Some(ZkError::SessionExpired) => {}
        _ => panic!("{kind} ({end:?}): {got:?}, not the session's end"),
    }
    let ended = ended.lock().unwrap().expect("the session was ended");
    let late = returned.duration_since(ended);
    eprintln!("{kind} ({end:?}): the take returned {late:?} after the session's end");
    assert!(
        late < Duration::from_millis(100),
        "{kind} ({end:?}): the take returned {late:?} after its session's end: \
         it slept on through its back-off (at least 125 ms)"
    );
    drop(q);
    let _ = zkw.close();
    zklock::zkutil::delete_node_recursively(&other, &root).unwrap();
    other.close().unwrap();
}

fn fifo_back_off_ends_with(end: SessionEnd) {
    a_lost_claims_back_off_ends_with_its_session(
        "fifo",
        end,
        |zkw, dir| DistributedQueue::new(zkw, dir).unwrap(),
        |q, claim, wait| q.with_claim_hook(claim).with_wait_hook(wait),
        |q, data| {
            q.offer(data).unwrap();
        },
        |q| q.take(),
    );
}

#[test]
fn a_lost_claims_back_off_ends_at_close() {
    fifo_back_off_ends_with(SessionEnd::Close);
}

#[test]
fn a_lost_claims_back_off_ends_at_expiry() {
    fifo_back_off_ends_with(SessionEnd::Expire);
}

#[test]
fn a_lost_priority_claims_back_off_ends_at_close() {
    a_lost_claims_back_off_ends_with_its_session(
        "priority",
        SessionEnd::Close,
        |zkw, dir| DistributedPriorityQueue::new(zkw, dir).unwrap(),
        |q, claim, wait| q.with_claim_hook(claim).with_wait_hook(wait),
        |q, data| {
            q.offer(3, data).unwrap();
        },
        |q| q.take().map(|(_, d)| d),
    );
}

/// A recipe node's create retried on connection loss (`create_in_session`:
/// the latch's, the election's and the WriteLock's node) pauses by the
/// watcher's retry policy, and a `close()` during that pause ends it at once.
/// Forced: the latch's create reply is lost (`lose_next_reply`, the server
/// made the node), the watcher's retry pause is 30 s; the test closes the
/// watcher once the node is on the server and a second has passed (the
/// start is then in its pause). `start()` must end with `Closed` well
/// before the pause's end. (The old retry slept its own 50 ms and retried
/// before the close; a plain sleep of the retry policy's pause returned only
/// after the 30 s.)
#[test]
fn a_close_ends_a_recipe_create_s_retry_pause() {
    use zklock::client::ReplyKind;
    use zklock::recipes::leader_latch::LeaderLatch;
    init_log();
    const PAUSE: Duration = Duration::from_secs(30);
    let zkw = ZooKeeperWatcher::builder(&shared_server().connect_string())
        .with_identifier("recipes-test")
        .with_session_timeout(Duration::from_secs(6))
        .with_retry(
            RetryConfig::default()
                .with_sleep_interval(PAUSE)
                .with_backoff_policy(zklock::BackoffPolicy::Fixed),
        )
        .connect()
        .expect("connect");
    let root = unique_root("create-retry-close");
    let path = format!("{root}/latch");
    // The directory first: the lost reply is the latch's own create's.
    zklock::zkutil::create_with_parents(&session(), &path).unwrap();
    let latch = LeaderLatch::new(&zkw, &path, "a").unwrap();
    zkw.zookeeper().lose_next_reply(ReplyKind::Create);
    let (tx, rx) = mpsc::channel();
    let starting = thread::spawn(move || {
        let _ = tx.send(latch.start());
        latch
    });
    let zk = raw();
    assert!(
        eventually(Duration::from_secs(20), || zk
            .get_children(&path, false)
            .map(|c| c.len() == 1)
            .unwrap_or(false)),
        "the latch's create reached the server"
    );
    thread::sleep(Duration::from_secs(1));
    let closed = Instant::now();
    zkw.close().unwrap();
    let got = rx
        .recv_timeout(PAUSE / 2)
        .expect("start() slept on through its retry pause after close()");
    let late = closed.elapsed();
    eprintln!("start() returned {late:?} after close(): {got:?}");
    assert!(
        matches!(got, Err(Error::Closed)),
        "start() during its retry pause, then close(): {got:?}, not Closed"
    );
    drop(starting.join().unwrap());
    assert!(
        eventually(Duration::from_secs(10), || zk
            .get_children(&path, false)
            .map(|c| c.is_empty())
            .unwrap_or(false)),
        "the latch's node went with its session"
    );
    zk.close().unwrap();
    zklock::zkutil::delete_node_recursively(&session(), &root).unwrap();
}

// ---------------------------------------------------------------------------
// Finding 5: a lost wake-up between threads sharing an instance, forced
// ---------------------------------------------------------------------------

/// A wait hook that holds the first thread reaching `WaitStep::Watching` (its
/// round's watch set, about to wait) until `release` is sent: the channel
/// `parked` tells the test it is there. Later threads pass through.
fn hold_first_waiter() -> (
    impl Fn(zklock::recipes::WaitStep, &str) + Send + Sync + 'static,
    mpsc::Receiver<()>,
    mpsc::Sender<()>,
) {
    let (parked_tx, parked) = mpsc::channel::<()>();
    let (release, release_rx) = mpsc::channel::<()>();
    let held = Mutex::new(Some((parked_tx, release_rx)));
    let hook = move |step: zklock::recipes::WaitStep, _path: &str| {
        if step != zklock::recipes::WaitStep::Watching {
            return;
        }
        let first = held.lock().unwrap().take();
        if let Some((parked_tx, release_rx)) = first {
            parked_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(Duration::from_secs(60));
        }
    };
    (hook, parked, release)
}

/// Returns once `zkw`'s event thread has handled every event that reached
/// the client before now (an asynchronous call's answer is handled after
/// them, in order): a watch that fired is then known to have woken its waiter.
fn events_handled(zkw: &ZooKeeperWatcher) {
    let (tx, rx) = mpsc::channel();
    zkw.zookeeper().exists_async("/", None, move |_r| {
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the event thread answers");
}

/// Finding 5 of issue 20 against a real server, forced with the wait hook:
/// thread A of a shared instance (barrier, group, two-phase commit) has set
/// its round's watch and is held just before it waits; the watch fires
/// (another session removes the barrier, joins the group, votes abort) and
/// the event thread has handled it (A's wake-up is in), then
/// thread B runs a wait of its own on the same instance, which sees the
/// change and returns; then A is let go. A must see its wake-up at once. With
/// the old engine's shared boolean, B's re-arm (made after the event) swallowed
/// A's wake-up and A slept until its deadline, then reported "unchanged"
/// (`Ok(false)` / `Ok(None)`) though the change it waited for had happened.
#[test]
fn another_threads_round_never_swallows_a_wake_up_on_a_shared_instance() {
    const LONG: Duration = Duration::from_secs(30);
    let zkw = session();
    let other = session();
    let root = unique_root("shared-wake");

    // Barrier.
    let path = format!("{root}/barrier");
    let (hook, parked, release) = hold_first_waiter();
    let b = Arc::new(Barrier::new(&zkw, &path).unwrap().with_wait_hook(hook));
    b.set_barrier().unwrap();
    let a = {
        let b = b.clone();
        thread::spawn(move || b.wait_on_barrier(LONG))
    };
    parked.recv_timeout(LONG).expect("A reaches its wait");
    assert!(Barrier::new(&other, &path)
        .unwrap()
        .remove_barrier()
        .unwrap());
    events_handled(&zkw);
    assert!(b.wait_on_barrier(Duration::ZERO).unwrap());
    let t = Instant::now();
    release.send(()).unwrap();
    assert!(a.join().unwrap().unwrap(), "A's wake-up was lost: barrier");
    eprintln!("barrier: A returned {:?} after its release", t.elapsed());

    // Group.
    let path = format!("{root}/group");
    let (hook, parked, release) = hold_first_waiter();
    let g = Arc::new(Group::new(&zkw, &path).unwrap().with_wait_hook(hook));
    let first = g.join("first", b"").unwrap();
    let seen = g.members().unwrap();
    let a = {
        let (g, seen) = (g.clone(), seen.clone());
        thread::spawn(move || g.wait_for_change(&seen, LONG))
    };
    parked.recv_timeout(LONG).expect("A reaches its wait");
    let second = Group::new(&other, &path)
        .unwrap()
        .join("second", b"")
        .unwrap();
    events_handled(&zkw);
    assert_eq!(
        g.wait_for_change(&seen, LONG).unwrap().unwrap(),
        ["first", "second"]
    );
    release.send(()).unwrap();
    assert_eq!(
        a.join()
            .unwrap()
            .unwrap()
            .expect("A's wake-up was lost: group"),
        ["first", "second"]
    );
    second.leave().unwrap();
    first.leave().unwrap();

    // Two-phase commit.
    let path = format!("{root}/tx");
    TwoPhaseCommit::create(&other, &path, &["a", "b"]).unwrap();
    let voter = TwoPhaseCommit::open(&other, &path).unwrap();
    voter.join("b").unwrap();
    let (hook, parked, release) = hold_first_waiter();
    let tx = Arc::new(
        TwoPhaseCommit::open(&zkw, &path)
            .unwrap()
            .with_wait_hook(hook),
    );
    let a = {
        let tx = tx.clone();
        thread::spawn(move || tx.wait_outcome(LONG))
    };
    parked.recv_timeout(LONG).expect("A reaches its wait");
    voter.vote("b", Vote::Abort).unwrap();
    events_handled(&zkw);
    assert_eq!(tx.wait_outcome(LONG).unwrap(), Some(Outcome::Abort));
    release.send(()).unwrap();
    assert_eq!(
        a.join().unwrap().unwrap(),
        Some(Outcome::Abort),
        "A's wake-up was lost: two-phase commit"
    );
    voter.delete().unwrap();
    drop((b, g, tx, voter));
    zkw.close().unwrap();
    other.close().unwrap();
    // The group's node stays (persistent, as Curator's and kazoo's do).
    assert_tree_then_clean(&root, &["group"]);
}

/// Entry points are atomic (issue 44): two threads joining one site of one
/// transaction through one instance: one joins, the other gets `NodeExists`
/// (the `alive` node carries the first's mark), and one `alive` node exists.
#[test]
fn two_joins_of_one_site_make_one_alive_node() {
    let coordinator = session();
    let site = session();
    let root = unique_root("2pc-two-joins");
    let path = format!("{root}/tx");
    let tx = TwoPhaseCommit::create(&coordinator, &path, &["s1"]).unwrap();
    let s1 = Arc::new(TwoPhaseCommit::open(&site, &path).unwrap());
    let joins: Vec<_> = (0..2)
        .map(|_| {
            let s1 = s1.clone();
            thread::spawn(move || s1.join("s1"))
        })
        .collect();
    let results: Vec<_> = joins.into_iter().map(|j| j.join().unwrap()).collect();
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|r| matches!(r, Err(e) if e.is(ZkError::NodeExists))),
        "{results:?}"
    );
    let zk = coordinator.zookeeper();
    assert_eq!(
        zk.get_children(&format!("{path}/s1"), false).unwrap(),
        ["alive"]
    );
    drop(s1);
    site.close().unwrap(); // the ephemeral alive node goes with the session
    tx.delete().unwrap();
    zklock::zkutil::delete_node_recursively(&coordinator, &root).unwrap();
    coordinator.close().unwrap();
}

/// A site joining a transaction the coordinator deleted gets `NoNode` about
/// the transaction path and creates nothing (issue 44: the join used to
/// recreate `<path>` and `<path>/<site>` as persistent nodes, forever).
#[test]
fn two_phase_commit_join_after_delete_is_no_node_and_creates_nothing() {
    let coordinator = session();
    let site = session();
    let observer = session();
    let root = unique_root("2pc-join-deleted");
    let path = format!("{root}/tx");
    let tx = TwoPhaseCommit::create(&coordinator, &path, &["s1", "s2"]).unwrap();
    let s1 = TwoPhaseCommit::open(&site, &path).unwrap();
    tx.delete().unwrap();
    let r = s1.join("s1");
    assert!(
        matches!(&r, Err(Error::Zk { code: ZkError::NoNode, path: Some(p), .. }) if *p == path),
        "{r:?}"
    );
    let zk = observer.zookeeper();
    assert_eq!(zk.exists(&path, false).unwrap(), None, "{path} recreated");
    assert_eq!(zk.exists(&format!("{path}/s1"), false).unwrap(), None);
    // The site's node alone gone (the transaction still there): the same.
    let tx = TwoPhaseCommit::create(&coordinator, &path, &["s1", "s2"]).unwrap();
    let s2 = TwoPhaseCommit::open(&site, &path).unwrap();
    zk.delete(&format!("{path}/s2"), None).unwrap();
    let r = s2.join("s2");
    assert!(matches!(&r, Err(e) if e.is(ZkError::NoNode)), "{r:?}");
    assert_eq!(zk.exists(&format!("{path}/s2"), false).unwrap(), None);
    // A live transaction is joined as before.
    s2.join("s1").unwrap();
    tx.delete().unwrap();
    zklock::zkutil::delete_node_recursively(&observer, &root).unwrap();
    for w in [coordinator, site, observer] {
        w.close().unwrap();
    }
}
