//! ZooKeeper's recipes against a real server, with Java participants running
//! ZooKeeper's own recipe jars: WriteLock, leader election, HBase's
//! ZKLeaderManager, revocable shared locks.

mod common;

use common::participant::Participant;

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{Acl, WatchedEvent, ZooKeeper};
use zklock::recipes::election::{ElectionEventType as Ev, ElectionStep, LeaderElectionSupport};
use zklock::recipes::write_lock::{LockListener, WriteLock, WriteLockStep};
use zklock::testing::{eventually, shared_server, unique_root, FaultProxy, ScratchDir, ZkServer};
use zklock::{RetryConfig, ZkError, ZooKeeperWatcher};

fn init_log() {
    let _ = env_logger::builder().is_test(true).try_init();
}

fn watcher(servers: &str, timeout: Duration) -> ZooKeeperWatcher {
    init_log();
    ZooKeeperWatcher::builder(servers)
        .with_identifier("recipes-test")
        .with_session_timeout(timeout)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .connect()
        .expect("connect")
}

fn zkw() -> ZooKeeperWatcher {
    watcher(&shared_server().connect_string(), Duration::from_secs(10))
}

fn raw() -> ZooKeeper {
    ZooKeeper::connect(
        &shared_server().connect_string(),
        Duration::from_secs(10),
        |_e: WatchedEvent| {},
    )
    .expect("raw connect")
}

fn children(zk: &ZooKeeper, path: &str) -> Vec<String> {
    match zk.get_children(path, false) {
        Ok(mut c) => {
            c.sort();
            c
        }
        Err(e) if e.is(ZkError::NoNode) => Vec::new(),
        Err(e) => panic!("get_children {path}: {e}"),
    }
}

// ---------------------------------------------------------------- WriteLock

/// The owner flag shared by Rust and Java contenders: a file created with
/// O_EXCL inside the lock and deleted before unlock. A second owner finds it.
fn enter(flag: &Path) {
    if let Err(e) = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(flag)
    {
        panic!("two owners at once: {flag:?} exists ({e})");
    }
}

fn leave(flag: &Path) {
    fs::remove_file(flag).expect("flag gone while owner");
}

/// Set in the child process of `a_java_participant_leaves_nothing_in_the_temp_dir`.
const SCRATCH_CHILD_ENV: &str = "ZKLOCK_SCRATCH_CHILD";

/// Runs in a child process (see `a_java_participant_leaves_nothing_in_the_temp_dir`,
/// which gives it a private `$TMPDIR`): the set-up of the Java-participant tests —
/// the shared server, the participant's classes compiled once for the process, a
/// flag in a scratch directory — and one grant of the Java write lock.
#[test]
#[ignore = "helper: runs only as a child process of a_java_participant_leaves_nothing_in_the_temp_dir"]
fn java_participant_scratch_child() {
    if std::env::var_os(SCRATCH_CHILD_ENV).is_none() {
        return;
    }
    let servers = shared_server().connect_string();
    let (zk, dir) = common::setup_root(&servers, "wl-scratch");
    let flag_dir = ScratchDir::new("wl-flag").unwrap();
    let flag = flag_dir.join("owner").display().to_string();
    let j = Participant::java("WriteLockParticipant", &[&servers, &dir, "1", &flag]);
    j.expect("DONE", Duration::from_secs(60));
    j.finish();
    zk.delete(&dir, None).unwrap();
    zk.close().unwrap();
}

/// Nothing the harness or a Java-participant test makes under the temp dir
/// outlives the test process: scratch directories are removed on drop, the
/// process-wide ones (compiled classes) and the shared server's when the process
/// ends. Checked on a child process with a private, empty `$TMPDIR`.
#[test]
fn a_java_participant_leaves_nothing_in_the_temp_dir() {
    let tmp = ScratchDir::new("tmpdir").unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "java_participant_scratch_child"])
        .args(["--nocapture"])
        .env(SCRATCH_CHILD_ENV, "1")
        .env("TMPDIR", tmp.path())
        .env_remove("ZK_TEST_SERVERS")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let left = || -> Vec<String> {
        fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("zklock-"))
            .collect()
    };
    // The process-exit cleaners run once the child is gone: a moment later.
    assert!(
        eventually(Duration::from_secs(20), || left().is_empty()),
        "left in the temp dir: {:?}",
        left()
    );
}

#[test]
fn write_lock_rust_and_java_contenders_200_grants_never_two_owners() {
    let servers = shared_server().connect_string();
    let dir = unique_root("wl-mixed");
    let flag_dir = ScratchDir::new("wl-flag").unwrap();
    let flag = flag_dir.join("owner");
    const RUST: usize = 5;
    let java_n: usize = std::env::var("WL_JAVA")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    const JAVA: usize = 3;
    const EACH: usize = 25; // 8 x 25 = 200 grants
    let flag_s = flag.display().to_string();
    let mut javas: Vec<Participant> = (0..java_n)
        .map(|_| {
            Participant::java(
                "WriteLockParticipant",
                &[&servers, &dir, &EACH.to_string(), &flag_s],
            )
        })
        .collect();
    let started = Instant::now();
    let inside = Arc::new(AtomicBool::new(false));
    let grants = Arc::new(AtomicUsize::new(0));
    let acquired_events = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..RUST)
        .map(|_| {
            let (servers, dir, flag) = (servers.clone(), dir.clone(), flag.clone());
            let (inside, grants, events) =
                (inside.clone(), grants.clone(), acquired_events.clone());
            thread::spawn(move || {
                let zkw = watcher(&servers, Duration::from_secs(10));
                for _ in 0..EACH {
                    let e = events.clone();
                    let lock = WriteLock::new(&zkw, &dir, Acl::open_unsafe())
                        .unwrap()
                        .with_lock_listener(Listener(e));
                    if !lock.lock_blocking(Duration::from_secs(90)).unwrap() {
                        let zk = zkw.zookeeper();
                        let c = zk.get_children(&dir, false).unwrap_or_default();
                        let owners: Vec<_> = c
                            .iter()
                            .map(|n| {
                                let st = zk.exists(&format!("{dir}/{n}"), false).ok().flatten();
                                (n.clone(), st.map(|s| s.ephemeral_owner))
                            })
                            .collect();
                        panic!(
                            "a Rust contender ({}) waited 90 s: {owners:?}",
                            lock.id().unwrap_or_default()
                        );
                    }
                    assert!(lock.is_owner());
                    assert!(!inside.swap(true, Ordering::SeqCst), "two Rust owners");
                    enter(&flag);
                    thread::sleep(Duration::from_millis(2));
                    leave(&flag);
                    inside.store(false, Ordering::SeqCst);
                    lock.unlock().unwrap();
                    grants.fetch_add(1, Ordering::SeqCst);
                }
                zkw.close().unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a Rust contender failed");
    }
    let mut java_grants = 0;
    for j in &mut javas {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let line = j
                .try_line(deadline.saturating_duration_since(Instant::now()))
                .expect("a Java contender hung");
            assert!(!line.starts_with("VIOLATION"), "{line}");
            assert!(!line.starts_with("HANG"), "{line}");
            if line.starts_with("GRANT") {
                java_grants += 1;
            }
            if line == "DONE" {
                break;
            }
        }
    }
    let total = grants.load(Ordering::SeqCst) + java_grants;
    eprintln!(
        "write lock: {} Rust + {java_grants} Java grants = {total} in {:?}",
        grants.load(Ordering::SeqCst),
        started.elapsed()
    );
    assert_eq!(total, (RUST + java_n) * EACH);
    let _ = JAVA;
    assert_eq!(acquired_events.load(Ordering::SeqCst), RUST * EACH);
    let zk = raw();
    assert!(
        eventually(Duration::from_secs(10), || children(&zk, &dir).is_empty()),
        "orphans: {:?}",
        children(&zk, &dir)
    );
}

struct Listener(Arc<AtomicUsize>);

impl LockListener for Listener {
    fn lock_acquired(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn lock_released(&self) {}
}

#[test]
fn write_lock_predecessor_gone_before_the_watch_is_rechecked() {
    // The race Java's recipe loses, forced: the predecessor is deleted right
    // before the waiter's watch is set. The waiter must list again and own the
    // lock, not wait for a watch that never fires.
    let (a, b) = (zkw(), zkw());
    let dir = unique_root("wl-race");
    let first = WriteLock::new(&a, &dir, Acl::open_unsafe()).unwrap();
    assert!(first.lock().unwrap());
    let victim = first.id().unwrap();
    let deleter = raw();
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let second = WriteLock::new(&b, &dir, Acl::open_unsafe())
        .unwrap()
        .with_step_hook(move |step, path| {
            if step == WriteLockStep::Watching && path == victim {
                deleter.delete(path, None).unwrap();
                f.fetch_add(1, Ordering::SeqCst);
            }
        });
    let t = Instant::now();
    assert!(second.lock().unwrap(), "the recheck found the lock free");
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert!(second.is_owner());
    assert!(t.elapsed() < Duration::from_secs(5));
    second.unlock().unwrap();
    // The first instance learns its node is gone.
    assert!(eventually(Duration::from_secs(5), || !first.is_owner()));
    drop(first);
}

#[test]
fn write_lock_wakes_the_listener_and_close_while_waiting_leaves_no_node() {
    let (a, b, c) = (zkw(), zkw(), zkw());
    let dir = unique_root("wl-close");
    let owner = WriteLock::new(&a, &dir, Acl::open_unsafe()).unwrap();
    assert!(owner.lock().unwrap());
    let acquired = Arc::new(AtomicUsize::new(0));
    let waiter = WriteLock::new(&b, &dir, Acl::open_unsafe())
        .unwrap()
        .with_lock_listener(Listener(acquired.clone()));
    assert!(!waiter.lock().unwrap(), "not owner yet");
    let quitter = WriteLock::new(&c, &dir, Acl::open_unsafe()).unwrap();
    assert!(!quitter.lock().unwrap());
    let zk = raw();
    assert_eq!(children(&zk, &dir).len(), 3);
    // close() while waiting: its node goes, nobody else moves.
    quitter.close().unwrap();
    assert_eq!(children(&zk, &dir).len(), 2);
    assert!(quitter.id().is_none());
    // A timed-out blocking lock leaves no node either.
    let timed = WriteLock::new(&c, &dir, Acl::open_unsafe()).unwrap();
    let t = Instant::now();
    assert!(!timed.lock_blocking(Duration::from_millis(300)).unwrap());
    assert!(t.elapsed() < Duration::from_secs(3));
    assert_eq!(children(&zk, &dir).len(), 2);
    // The owner lets go: the waiter's listener hears lock_acquired (event
    // thread, no call to lock()).
    owner.unlock().unwrap();
    assert!(eventually(Duration::from_secs(5), || acquired
        .load(Ordering::SeqCst)
        == 1));
    assert!(waiter.is_owner());
    // A lock_blocking ended by close() from another thread.
    let blocked = Arc::new(WriteLock::new(&c, &dir, Acl::open_unsafe()).unwrap());
    let b2 = blocked.clone();
    let h = thread::spawn(move || b2.lock_blocking(Duration::from_secs(30)));
    // The node shows on the server before `lock` binds it: a close in that
    // moment is the case of the next test; here it comes once the lock waits.
    assert!(eventually(Duration::from_secs(30), || children(&zk, &dir)
        .len()
        == 2
        && blocked.id().is_some()));
    blocked.close().unwrap();
    assert!(h.join().unwrap().is_err());
    assert_eq!(children(&zk, &dir).len(), 1);
    drop(waiter); // dropped while owner: removed in the background
    assert!(eventually(Duration::from_secs(5), || children(&zk, &dir).is_empty()));
}

/// An `unlock` from another thread as the instance becomes owner (decided,
/// `lock_acquired` not yet told): the listener hears `lock_acquired` then
/// `lock_released`, in the order the instance became owner and let go.
/// Before, `lock_acquired` was told after the decision, unordered with the
/// unlock's `lock_released`: the listener heard `released` then `acquired`
/// and was left believing it owned an unlocked lock. Forced with the
/// `Owner` step.
#[test]
fn write_lock_unlocked_as_it_becomes_owner_tells_acquired_then_released() {
    use std::sync::{OnceLock, Weak};
    struct Told(Arc<parking_lot::Mutex<Vec<&'static str>>>);
    impl LockListener for Told {
        fn lock_acquired(&self) {
            self.0.lock().push("acquired");
        }
        fn lock_released(&self) {
            self.0.lock().push("released");
        }
    }
    let session = zkw();
    let zk = raw();
    let dir = unique_root("wl-unlock-owner");
    let told: Arc<parking_lot::Mutex<Vec<&'static str>>> = Arc::default();
    let me: Arc<OnceLock<Weak<WriteLock>>> = Arc::default();
    let me2 = me.clone();
    let once = AtomicBool::new(false);
    let w = Arc::new(
        WriteLock::new(&session, &dir, Acl::open_unsafe())
            .unwrap()
            .with_lock_listener(Told(told.clone()))
            .with_step_hook(move |step, _| {
                if step == WriteLockStep::Owner && !once.swap(true, Ordering::SeqCst) {
                    let w = me2.get().and_then(Weak::upgrade).unwrap();
                    // Another thread's unlock, over before the owner is told.
                    thread::spawn(move || w.unlock()).join().unwrap().unwrap();
                }
            }),
    );
    me.set(Arc::downgrade(&w)).unwrap();
    let _ = w.lock().unwrap();
    assert!(eventually(Duration::from_secs(10), || told.lock().len() >= 2));
    assert_eq!(
        *told.lock(),
        ["acquired", "released"],
        "the listener's last word is not the lock's state"
    );
    assert!(!w.is_owner());
    assert!(children(&zk, &dir).is_empty());
    // The instance locks again, and is told so.
    assert!(w.lock().unwrap());
    w.unlock().unwrap();
    // Told by the unlock, or by a thread telling the `acquired` meanwhile.
    assert!(eventually(Duration::from_secs(10), || told.lock().len() >= 4));
    assert_eq!(
        *told.lock(),
        ["acquired", "released", "acquired", "released"]
    );
}

/// A `close` from another thread while `lock` is making the instance's node
/// (made on the server, not yet the instance's): the close finds no node to
/// remove, and before, the lock went on with its node and waited its whole
/// timeout, a close that did not end it (a `make test-versions` failure of
/// the test above). Now the lock ends with `Closed` and removes the node.
/// Forced with the `NodeMade` step. Then the same for an election candidate
/// stopped while its offer is made, and a leader latch closed while its start
/// makes its node.
/// A hook action that tells the test the node made (its path, on `made`),
/// then waits for its go (the first time only), and the two channel ends.
fn hold_at_the_made_step() -> (
    impl Fn(&str) + Send + Sync + 'static,
    mpsc::Receiver<String>,
    mpsc::Sender<()>,
) {
    let (made_tx, made_rx) = mpsc::channel::<String>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (made_tx, go_rx) = (
        parking_lot::Mutex::new(made_tx),
        parking_lot::Mutex::new(go_rx),
    );
    let once = AtomicBool::new(true);
    let hold = move |path: &str| {
        if once.swap(false, Ordering::SeqCst) {
            made_tx.lock().send(path.to_string()).unwrap();
            go_rx.lock().recv_timeout(Duration::from_secs(60)).unwrap();
        }
    };
    (hold, made_rx, go_tx)
}

/// Runs `attempt` on a thread of its own; once its node is made (told on
/// `made` by [`hold_at_the_made_step`]), `withdraw`s from this thread and
/// lets the attempt go on: it must end with `Closed`, its node gone.
fn withdrawn_while_made<T: std::fmt::Debug + Send + 'static>(
    attempt: impl FnOnce() -> zklock::Result<T> + Send + 'static,
    withdraw: impl FnOnce(),
    made: &mpsc::Receiver<String>,
    go: &mpsc::Sender<()>,
    zk: &ZooKeeper,
) {
    let h = thread::spawn(attempt);
    let node = made.recv_timeout(Duration::from_secs(60)).unwrap();
    withdraw();
    go.send(()).unwrap();
    let r = h.join().unwrap();
    assert!(matches!(r, Err(zklock::Error::Closed)), "{r:?}");
    assert!(
        zk.exists(&node, false).unwrap().is_none(),
        "{node} left behind"
    );
}

/// A `close` from another thread while `lock` is making the instance's node
/// (made on the server, not yet the instance's): the close finds no node to
/// remove, and before, the lock went on with its node and waited its whole
/// timeout, a close that did not end it (a `make test-versions` failure of
/// the test above). Now the lock ends with `Closed` and removes the node.
/// Forced with the `NodeMade` step. Then the same for an election candidate
/// stopped while its offer is made, and a leader latch closed while its start
/// makes its node.
#[test]
fn a_withdrawal_while_the_node_is_made_ends_the_attempt_and_leaves_no_node() {
    use zklock::recipes::leader_latch::{LatchStep, LeaderLatch};
    let (a, b) = (zkw(), zkw());
    let zk = raw();

    let dir = unique_root("wl-close-made");
    let owner = WriteLock::new(&a, &dir, Acl::open_unsafe()).unwrap();
    assert!(owner.lock().unwrap());
    let (hold, made, go) = hold_at_the_made_step();
    let blocked = Arc::new(
        WriteLock::new(&b, &dir, Acl::open_unsafe())
            .unwrap()
            .with_step_hook(move |step, path| {
                if step == WriteLockStep::NodeMade {
                    hold(path);
                }
            }),
    );
    let b2 = blocked.clone();
    withdrawn_while_made(
        move || b2.lock_blocking(Duration::from_secs(5)),
        || {
            assert_eq!(children(&zk, &dir).len(), 2);
            blocked.close().unwrap();
        },
        &made,
        &go,
        &zk,
    );
    assert!(blocked.id().is_none());
    // The instance may lock again.
    owner.unlock().unwrap();
    assert!(blocked.lock().unwrap());
    blocked.unlock().unwrap();

    let root = unique_root("election-stop-made");
    let (hold, made, go) = hold_at_the_made_step();
    let c = Arc::new(
        LeaderElectionSupport::new(&b, &root, "late")
            .unwrap()
            .with_step_hook(move |step, path| {
                if step == ElectionStep::OfferMade {
                    hold(path);
                }
            }),
    );
    let c2 = c.clone();
    withdrawn_while_made(move || c2.start(), || c.stop().unwrap(), &made, &go, &zk);
    assert!(children(&zk, &root).is_empty());

    // A leader latch closed while its start makes its node: the start ends
    // with `Closed` and the latch never leads.
    let path = unique_root("latch-close-made");
    let (hold, made, go) = hold_at_the_made_step();
    let latch = Arc::new(LeaderLatch::new(&b, &path, "late").unwrap().with_step_hook(
        move |step, node| {
            if step == LatchStep::NodeMade {
                hold(node);
            }
        },
    ));
    let l2 = latch.clone();
    withdrawn_while_made(
        move || l2.start(),
        || latch.close().unwrap(),
        &made,
        &go,
        &zk,
    );
    assert!(!latch.has_leadership());
    assert!(children(&zk, &path).is_empty());
}

/// Entry points are atomic (issue 44): a second `start` of one election
/// candidate while the first is making its offer refuses, making nothing
/// (before, both returned `Ok` with two offers: the candidate queued behind
/// its own orphan, and with another candidate on the root nobody led); a
/// second `lock` of one `WriteLock` joins the first's node (Java's
/// `synchronized`). Forced with the made steps holding the first call
/// between its create and its bind.
#[test]
fn a_second_start_or_lock_while_the_first_makes_its_node_makes_nothing() {
    let session = zkw();
    let zk = raw();

    let root = unique_root("election-double-start");
    let (hold, made, go) = hold_at_the_made_step();
    let c = Arc::new(
        LeaderElectionSupport::new(&session, &root, "twice")
            .unwrap()
            .with_step_hook(move |step, path| {
                if step == ElectionStep::OfferMade {
                    hold(path);
                }
            }),
    );
    let c2 = c.clone();
    let first = thread::spawn(move || c2.start());
    let offer = made.recv_timeout(Duration::from_secs(60)).unwrap();
    let second = c.start();
    assert!(
        matches!(second, Err(zklock::Error::BadArguments(_))),
        "{second:?}"
    );
    assert_eq!(children(&zk, &root).len(), 1, "a second offer was made");
    go.send(()).unwrap();
    first.join().unwrap().unwrap();
    assert!(c.has_leadership());
    assert_eq!(c.offer_node().as_deref(), Some(offer.as_str()));
    // Another candidate queues behind it, and leads once it stops.
    let other = LeaderElectionSupport::new(&session, &root, "other").unwrap();
    other.start().unwrap();
    assert!(!other.has_leadership());
    c.stop().unwrap();
    assert!(eventually(Duration::from_secs(20), || other.has_leadership()));
    other.stop().unwrap();
    assert!(children(&zk, &root).is_empty());

    // WriteLock: the second `lock` waits while the first makes the node,
    // then joins it; held at `Joining` until the first is owner, its round
    // runs on an owner (before: that round's answer was dropped, and the
    // second `lock` waited for good: a make test hang).
    let dir = unique_root("wl-double-lock");
    let (hold, made, go) = hold_at_the_made_step();
    let (making_tx, making_rx) = mpsc::channel::<()>();
    let (joined_tx, joined_rx) = mpsc::channel::<()>();
    let (go2_tx, go2_rx) = mpsc::channel::<()>();
    let (making_tx, joined_tx, go2_rx) = (
        parking_lot::Mutex::new(making_tx),
        parking_lot::Mutex::new(joined_tx),
        parking_lot::Mutex::new(go2_rx),
    );
    let makers = AtomicUsize::new(0);
    let w = Arc::new(
        WriteLock::new(&session, &dir, Acl::open_unsafe())
            .unwrap()
            .with_step_hook(move |step, path| match step {
                WriteLockStep::NodeMade => hold(path),
                WriteLockStep::Making if makers.fetch_add(1, Ordering::SeqCst) == 1 => {
                    making_tx.lock().send(()).unwrap();
                }
                WriteLockStep::Joining => {
                    joined_tx.lock().send(()).unwrap();
                    go2_rx.lock().recv_timeout(Duration::from_secs(60)).unwrap();
                }
                _ => {}
            }),
    );
    let (w1, w2) = (w.clone(), w.clone());
    let first = thread::spawn(move || w1.lock());
    let node = made.recv_timeout(Duration::from_secs(60)).unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || done_tx.send(w2.lock()).unwrap());
    // The second is past its owner check, at (or in) the one-at-a-time lock.
    making_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(children(&zk, &dir).len(), 1, "a second node was made");
    go.send(()).unwrap();
    assert!(first.join().unwrap().unwrap());
    joined_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    go2_tx.send(()).unwrap();
    let second = done_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the second lock never returned");
    assert!(second.unwrap());
    assert_eq!(w.id().as_deref(), Some(node.as_str()));
    assert_eq!(children(&zk, &dir).len(), 1);
    w.unlock().unwrap();
    assert!(children(&zk, &dir).is_empty());
}

/// Issue 44, item 2: a leadership call that gives up after the server made
/// its node (a lost reply, then every lookup failing on the link) leaves
/// nothing: the election's offer, the latch's node, the leader manager's
/// znode. Afterwards another candidate leads (nobody waits behind an
/// orphan), and a new start of the same instance works.
#[test]
fn a_leadership_call_that_gives_up_after_its_create_leaves_nothing() {
    use zklock::recipes::leader_latch::LeaderLatch;
    use zklock::recipes::leader_manager::ZkLeaderManager;
    let zk = raw();
    let other = zkw();

    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let session = common::giving_up(&proxy);
    // The directories exist: the first create is the node's.
    let root = unique_root("election-gives-up");
    zklock::zkutil::create_with_parents(&other, &root).unwrap();
    let c = Arc::new(LeaderElectionSupport::new(&session, &root, "gives-up").unwrap());
    let c2 = c.clone();
    common::gives_up_after_its_create(
        &proxy,
        move || c2.start(),
        || !children(&zk, &root).is_empty(),
    );
    assert_eq!(c.state(), zklock::recipes::election::ElectionState::Failed);
    let b = LeaderElectionSupport::new(&other, &root, "other").unwrap();
    b.start().unwrap();
    assert!(
        b.has_leadership(),
        "the other candidate waits behind an orphan"
    );
    b.stop().unwrap();
    assert!(eventually(Duration::from_secs(20), || session
        .zookeeper()
        .state()
        == zklock::client::State::Connected));
    c.start().unwrap();
    assert!(c.has_leadership());
    c.stop().unwrap();
    assert!(children(&zk, &root).is_empty());

    let path = unique_root("latch-gives-up");
    zklock::zkutil::create_with_parents(&other, &path).unwrap();
    let latch = Arc::new(LeaderLatch::new(&session, &path, "gives-up").unwrap());
    let l2 = latch.clone();
    common::gives_up_after_its_create(
        &proxy,
        move || l2.start(),
        || !children(&zk, &path).is_empty(),
    );
    assert!(!latch.has_leadership());
    let b = LeaderLatch::new(&other, &path, "other").unwrap();
    b.start().unwrap();
    assert!(b.await_leadership(Duration::from_secs(20)).unwrap());
    b.close().unwrap();

    let znode = format!("{}/leader", unique_root("manager-gives-up"));
    let m = Arc::new(ZkLeaderManager::new(&session, &znode, "gives-up"));
    m.start().unwrap();
    let m2 = m.clone();
    common::gives_up_after_its_create(
        &proxy,
        move || m2.wait_to_become_leader(),
        || zk.exists(&znode, false).unwrap().is_some(),
    );
    assert!(!m.has_leadership());
    let b = ZkLeaderManager::new(&other, &znode, "other");
    b.start().unwrap();
    assert!(b.wait_to_become_leader().unwrap());
    b.stop().unwrap();
    m.stop().unwrap();
    session.close().unwrap();
}

#[test]
fn write_lock_session_expiry_fails_a_waiter() {
    let (a, b) = (zkw(), zkw());
    let dir = unique_root("wl-expiry");
    let owner = WriteLock::new(&a, &dir, Acl::open_unsafe()).unwrap();
    assert!(owner.lock().unwrap());
    let waiter = Arc::new(WriteLock::new(&b, &dir, Acl::open_unsafe()).unwrap());
    let w = waiter.clone();
    let h = thread::spawn(move || w.lock_blocking(Duration::from_secs(60)));
    let zk = raw();
    assert!(eventually(Duration::from_secs(5), || children(&zk, &dir)
        .len()
        == 2));
    let t = Instant::now();
    b.close().unwrap();
    assert!(h.join().unwrap().is_err());
    assert!(t.elapsed() < Duration::from_secs(3));
    assert!(eventually(Duration::from_secs(5), || children(&zk, &dir)
        .len()
        == 1));
    owner.unlock().unwrap();
}

// ---------------------------------------------------------------- election

type Events = Arc<std::sync::Mutex<Vec<Ev>>>;

/// `c`, waiting behind a node, fails with `NoNode` without a round (its own
/// offer's watch fired first: the listeners' last events are `ReadyComplete`
/// then `Failed`, told after the waits are woken), never elected, and
/// `root` is left empty.
fn fails_unelected(c: &LeaderElectionSupport, events: &Events, root: &str) {
    let r = c.await_leadership(Duration::from_secs(20));
    assert!(matches!(&r, Err(e) if e.is(ZkError::NoNode)), "{r:?}");
    assert!(
        eventually(Duration::from_secs(10), || events
            .lock()
            .unwrap()
            .ends_with(&[Ev::ReadyComplete, Ev::Failed])),
        "{events:?}"
    );
    assert!(!c.has_leadership());
    assert!(children(&raw(), root).is_empty());
}

fn candidate(zkw: &ZooKeeperWatcher, root: &str, host: &str) -> (LeaderElectionSupport, Events) {
    let c = LeaderElectionSupport::new(zkw, root, host).unwrap();
    let events: Events = Arc::default();
    let e = events.clone();
    c.add_listener(move |ev: Ev| e.lock().unwrap().push(ev));
    (c, events)
}

/// `n` started candidates under `root`, each in a session of its own, on a
/// server of their own (so its counters see only the test): the server, the
/// sessions, the candidates and their events, in order of start.
#[allow(clippy::type_complexity)]
fn started_candidates(
    n: usize,
    root: &str,
) -> (
    ZkServer,
    Vec<ZooKeeperWatcher>,
    Vec<LeaderElectionSupport>,
    Vec<Events>,
) {
    let server = ZkServer::start().unwrap();
    let servers = server.connect_string();
    let zkws: Vec<_> = (0..n)
        .map(|_| watcher(&servers, Duration::from_secs(30)))
        .collect();
    zklock::zkutil::create_with_parents(&zkws[0], root).unwrap();
    let (cands, evs): (Vec<_>, Vec<_>) = zkws
        .iter()
        .enumerate()
        .map(|(i, w)| candidate(w, root, &format!("h{i}")))
        .unzip();
    for c in &cands {
        c.start().unwrap();
    }
    (server, zkws, cands, evs)
}

fn java_leader(j: &mut Participant) -> String {
    j.send("LEADER");
    j.expect("LEADER ", Duration::from_secs(20))["LEADER ".len()..].to_string()
}

#[test]
fn election_rust_and_java_candidates_one_leader_at_a_time_in_node_order() {
    let server = shared_server();
    let servers = server.connect_string();
    let root = unique_root("election-mixed");
    let admin = zkw();
    zklock::zkutil::create_with_parents(&admin, &root).unwrap();
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", server.port())).unwrap();
    let short = Duration::from_secs(4);
    let (w0, w1, w2) = (
        watcher(&proxy.connect_string(), short),
        watcher(&servers, short),
        watcher(&servers, short),
    );
    let java_args = |host: &'static str| {
        let (servers, root) = (servers.clone(), root.clone());
        move || Participant::java("ElectionParticipant", &[&servers, &root, host, "4000"])
    };
    // Candidates in node order: r0, j0, r1, j1, r2.
    let (r0, ev0) = candidate(&w0, &root, "r0");
    r0.start().unwrap();
    let mut j0 = java_args("j0")();
    j0.expect("STARTED", Duration::from_secs(60));
    let (r1, ev1) = candidate(&w1, &root, "r1");
    r1.start().unwrap();
    let mut j1 = java_args("j1")();
    j1.expect("STARTED", Duration::from_secs(60));
    let (r2, ev2) = candidate(&w2, &root, "r2");
    r2.start().unwrap();
    assert_eq!(
        *ev0.lock().unwrap(),
        [
            Ev::Start,
            Ev::OfferStart,
            Ev::OfferComplete,
            Ev::DetermineStart,
            Ev::DetermineComplete,
            Ev::ElectedStart,
            Ev::ElectedComplete
        ]
    );
    assert_eq!(
        *ev2.lock().unwrap(),
        [
            Ev::Start,
            Ev::OfferStart,
            Ev::OfferComplete,
            Ev::DetermineStart,
            Ev::DetermineComplete,
            Ev::ReadyStart,
            Ev::ReadyComplete
        ]
    );
    // A monitor: never two Rust leaders at once.
    let rust = Arc::new([r0, r1, r2]);
    let stop = Arc::new(AtomicBool::new(false));
    let (m_rust, m_stop) = (rust.clone(), stop.clone());
    let monitor = thread::spawn(move || {
        let mut samples = 0u64;
        while !m_stop.load(Ordering::SeqCst) {
            let n = m_rust.iter().filter(|c| c.has_leadership()).count();
            assert!(n <= 1, "{n} Rust leaders at once");
            samples += 1;
            thread::sleep(Duration::from_millis(5));
        }
        samples
    });
    let agree = |expected: &str, javas: &mut [&mut Participant]| {
        for c in rust.iter().filter(|c| !c.zkw_is_dead()) {
            assert_eq!(c.get_leader_host_name().unwrap().as_deref(), Some(expected));
        }
        for j in javas.iter_mut() {
            assert_eq!(java_leader(j), expected);
        }
    };
    agree("r0", &mut [&mut j0, &mut j1]);
    assert!(rust[0].has_leadership());

    // 1. Session expiry of the leader through a stalled proxy: told in doubt at
    //    once, before anyone else is elected; lost after the expiry.
    proxy.stall();
    assert!(eventually(Duration::from_secs(10), || ev0
        .lock()
        .unwrap()
        .contains(&Ev::LeadershipInDoubt)));
    assert!(!rust[0].has_leadership());
    let in_doubt_at = Instant::now();
    j0.expect("EVENT ELECTED_COMPLETE", Duration::from_secs(20));
    eprintln!(
        "j0 elected {:?} after r0 was told in doubt",
        in_doubt_at.elapsed()
    );
    proxy.pass();
    assert!(eventually(Duration::from_secs(20), || ev0
        .lock()
        .unwrap()
        .ends_with(&[Ev::LeadershipLost, Ev::Failed])));
    agree("j0", &mut [&mut j1]);

    // 2. kill -9 of the Java leader: r1 next, after its session times out.
    j0.kill9();
    assert!(eventually(Duration::from_secs(20), || rust[1].has_leadership()));
    agree("r1", &mut [&mut j1]);
    assert!(ev1.lock().unwrap().ends_with(&[
        Ev::DetermineStart,
        Ev::DetermineComplete,
        Ev::ElectedStart,
        Ev::ElectedComplete
    ]));

    // 3. close (stop) of the Rust leader: j1 next.
    rust[1].stop().unwrap();
    j1.expect("EVENT ELECTED_COMPLETE", Duration::from_secs(20));
    assert!(ev1
        .lock()
        .unwrap()
        .ends_with(&[Ev::StopStart, Ev::StopComplete]));
    agree("j1", &mut [&mut j1]);
    assert!(!rust[2].has_leadership());

    // 4. the Java leader stops: r2 last.
    j1.send("STOP");
    j1.expect("STOPPED", Duration::from_secs(20));
    assert!(eventually(Duration::from_secs(10), || rust[2].has_leadership()));
    agree("r2", &mut []);
    stop.store(true, Ordering::SeqCst);
    let samples = monitor.join().unwrap();
    eprintln!("election: {samples} samples, never two Rust leaders");
    rust[2].stop().unwrap();
    let zk = raw();
    assert!(eventually(Duration::from_secs(10), || children(&zk, &root).is_empty()));
}

trait Dead {
    fn zkw_is_dead(&self) -> bool;
}

impl Dead for LeaderElectionSupport {
    fn zkw_is_dead(&self) -> bool {
        self.state() == zklock::recipes::election::ElectionState::Failed
    }
}

#[test]
fn election_succession_wakes_only_the_successor() {
    // Own server: its counters see only this test.
    let (server, _zkws, cands, evs) = started_candidates(6, "/election-herd");
    // Watch notifications the server sent: its per-event watcher counts
    // (ZooKeeper 3.6+ `ServerMetrics`, summed per event type). Not packets
    // sent minus received: a ping in flight at either end of a window (every
    // session pings every few seconds) made that off by one.
    let net = || -> i64 {
        let m = server.mntr().unwrap();
        ["created", "deleted", "changed", "children"]
            .iter()
            .map(|k| {
                m.get(&format!("zk_sum_node_{k}_watch_count"))
                    .map_or(0, |v| v.parse::<f64>().unwrap() as i64)
            })
            .sum()
    };
    let mut per = Vec::new();
    for i in 0..cands.len() - 1 {
        let told: Vec<usize> = evs.iter().map(|e| e.lock().unwrap().len()).collect();
        let before = net();
        cands[i].stop().unwrap();
        assert!(eventually(Duration::from_secs(10), || cands[i + 1].has_leadership()));
        thread::sleep(Duration::from_millis(300)); // let any stray notification land
        let after = net();
        per.push(after - before);
        // Herd-free: the candidates behind the successor, but the one
        // right behind it (its second ahead left), heard nothing.
        for j in i + 3..cands.len() {
            assert_eq!(
                evs[j].lock().unwrap().len(),
                told[j],
                "candidate {j} was woken"
            );
        }
    }
    eprintln!("notifications per succession: {per:?}");
    // 2 = the successor's watch and the watch of the candidate right behind
    // it (its second ahead left); 1 for the last succession, with nobody
    // behind the successor. Nobody else: the departing leader removes its
    // watch on its own offer before withdrawing it.
    let expected: Vec<i64> = (0..per.len())
        .map(|i| if i + 2 < cands.len() { 2 } else { 1 })
        .collect();
    assert_eq!(per, expected);
}

/// A candidate sends the watch on its own offer with its listing (no round
/// trip of its own, issue 37), from its first round on; when that `exists`
/// answer is lost, it is placed only after the reconnect (its round again),
/// leads once its predecessor leaves, once, and the session's watches on
/// the offer are still there for in-doubt and deletion.
#[test]
fn election_successor_s_lost_own_exists_answer_elects_after_the_reconnect() {
    use zklock::client::ReplyKind;
    let root = unique_root("election-lost-own-exists");
    let (wa, wb) = (zkw(), zkw());
    let (a, _) = candidate(&wa, &root, "a");
    let (b, b_events) = candidate(&wb, &root, "b");
    a.start().unwrap();
    // The next exists of b's session is the one on its own offer, sent with
    // its first listing.
    wb.zookeeper().lose_next_reply(ReplyKind::Exists);
    b.start().unwrap();
    assert!(a.has_leadership() && !b.has_leadership());
    assert_eq!(b.state(), zklock::recipes::election::ElectionState::Ready);
    a.stop().unwrap();
    assert!(eventually(Duration::from_secs(20), || b.has_leadership()));
    // The state turns before the listeners are told.
    assert!(eventually(Duration::from_secs(10), || b_events
        .lock()
        .unwrap()
        .contains(&Ev::ElectedComplete)));
    let elected = b_events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| **e == Ev::ElectedComplete)
        .count();
    assert_eq!(elected, 1, "{:?}", b_events.lock().unwrap());
    // Its offer is watched: a deletion under it ends its leadership.
    let zk = raw();
    zk.delete(&b.offer_node().unwrap(), None).unwrap();
    assert!(eventually(Duration::from_secs(10), || b.state()
        == zklock::recipes::election::ElectionState::Failed));
    assert!(!b.has_leadership());
    // The state turns Failed before the listeners are told.
    assert!(
        eventually(Duration::from_secs(10), || b_events
            .lock()
            .unwrap()
            .ends_with(&[Ev::LeadershipLost, Ev::Failed])),
        "{b_events:?}"
    );
}

/// A candidate whose round ran after a withdrawal ahead of it (the watch on
/// its own offer sent with the listing, issue 37) and found itself still
/// behind the leader removes that watch when it stops: its withdrawal
/// notifies nobody, itself included.
#[test]
fn election_candidate_behind_the_leader_stops_without_a_notification() {
    // Own server: its counters see only this test.
    let (server, _zkws, cands, evs) = started_candidates(3, "/election-behind");
    let deleted = || -> i64 {
        let m = server.mntr().unwrap();
        m.get("zk_sum_node_deleted_watch_count")
            .map_or(0, |v| v.parse::<f64>().unwrap() as i64)
    };
    // The middle candidate leaves: the last one runs a round, still behind
    // the leader.
    let told = evs[2].lock().unwrap().len();
    cands[1].stop().unwrap();
    assert!(eventually(Duration::from_secs(10), || {
        let e = evs[2].lock().unwrap();
        e.len() > told && e.ends_with(&[Ev::ReadyStart, Ev::ReadyComplete])
    }));
    assert!(cands[0].has_leadership() && !cands[2].has_leadership());
    let before = deleted();
    cands[2].stop().unwrap();
    thread::sleep(Duration::from_millis(300)); // let any stray notification land
    assert_eq!(deleted() - before, 0, "the stopping candidate was notified");
    assert!(cands[0].has_leadership());
}

// ------------------------------------- succession without a listing (issue 37)

/// The round trips `proxy` counted when `ev` was told to a listener of the
/// candidate it is added to (`u64::MAX` until then).
fn rt_at(proxy: &Arc<FaultProxy>, ev: Ev) -> (Arc<std::sync::atomic::AtomicU64>, impl Fn(Ev)) {
    use std::sync::atomic::AtomicU64;
    let at = Arc::new(AtomicU64::new(u64::MAX));
    let (p, a) = (proxy.clone(), at.clone());
    let listener = move |e: Ev| {
        if e == ev {
            a.store(p.round_trips(), Ordering::SeqCst);
        }
    };
    (at, listener)
}

/// The directory listings (getChildren, getChildren2) sent through `proxy`.
fn listings(proxy: &FaultProxy) -> u64 {
    proxy.requests(8) + proxy.requests(12)
}

/// A counter of the listings sent through `proxy` by the time the listener
/// is told `ev` (read it with [`told_at`]): unlike round trips, a count that
/// no timing changes.
fn listings_at(
    proxy: &Arc<FaultProxy>,
    ev: Ev,
) -> (Arc<std::sync::atomic::AtomicU64>, impl Fn(Ev)) {
    use std::sync::atomic::AtomicU64;
    let at = Arc::new(AtomicU64::new(u64::MAX));
    let (p, a) = (proxy.clone(), at.clone());
    let listener = move |e: Ev| {
        if e == ev {
            a.store(listings(&p), Ordering::SeqCst);
        }
    };
    (at, listener)
}

/// The round trips an [`rt_at`] counter noted, once its event is told.
fn told_at(at: &std::sync::atomic::AtomicU64) -> u64 {
    // The leader's state turns before its listeners are told: a wait for
    // leadership may return first.
    assert!(eventually(Duration::from_secs(10), || at
        .load(Ordering::SeqCst)
        != u64::MAX));
    at.load(Ordering::SeqCst)
}

/// A successor whose predecessor was the first offer it listed is elected
/// on that offer's deletion without a request: no round trip between the
/// notification and `ElectedComplete` (before: one, its listing with the
/// `exists` on its own offer). Its offer stays watched, as a leader's.
#[test]
fn election_successor_of_the_first_offer_is_elected_without_a_request() {
    let root = unique_root("election-fast-succession");
    let proxy = Arc::new(FaultProxy::start(shared_server().connect_string().as_str()).unwrap());
    let (wa, wb) = (zkw(), through(&proxy, Duration::from_secs(10)));
    let (a, _) = candidate(&wa, &root, "a");
    let (b, b_events) = candidate(&wb, &root, "b");
    let (at, listener) = rt_at(&proxy, Ev::ElectedComplete);
    b.add_listener(listener);
    a.start().unwrap();
    b.start().unwrap();
    assert_eq!(b.state(), zklock::recipes::election::ElectionState::Ready);
    let before = proxy.round_trips();
    a.stop().unwrap();
    assert!(b.await_leadership(Duration::from_secs(20)).unwrap());
    assert_eq!(
        told_at(&at) - before,
        0,
        "requests from the successor between the notification and ElectedComplete"
    );
    assert!(b_events.lock().unwrap().ends_with(&[
        Ev::ReadyComplete,
        Ev::DetermineStart,
        Ev::DetermineComplete,
        Ev::ElectedStart,
        Ev::ElectedComplete
    ]));
    // Its offer is watched: a deletion under it ends its leadership.
    raw().delete(&b.offer_node().unwrap(), None).unwrap();
    assert!(eventually(Duration::from_secs(10), || b.state()
        == zklock::recipes::election::ElectionState::Failed));
    // The state turns Failed before the listeners are told.
    assert!(
        eventually(Duration::from_secs(10), || b_events
            .lock()
            .unwrap()
            .ends_with(&[Ev::LeadershipLost, Ev::Failed])),
        "{b_events:?}"
    );
    assert!(children(&raw(), &root).is_empty());
}

/// The successor's own offer is deleted by another session before its
/// predecessor leaves, both notifications held by the proxy and delivered
/// together, in zxid order: the own offer's watch fires first, so it fails
/// with `NoNode` and is never elected.
#[test]
fn election_successor_whose_offer_was_deleted_first_is_never_elected() {
    let root = unique_root("election-fast-own-deleted");
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let (wa, wb) = (zkw(), through(&proxy, Duration::from_secs(10)));
    let (a, _) = candidate(&wa, &root, "a");
    let (b, b_events) = candidate(&wb, &root, "b");
    a.start().unwrap();
    b.start().unwrap();
    assert_eq!(b.state(), zklock::recipes::election::ElectionState::Ready);
    proxy.stall_downstream();
    raw().delete(&b.offer_node().unwrap(), None).unwrap();
    a.stop().unwrap();
    proxy.pass();
    // The own offer's watch fired first: no round ran.
    fails_unelected(&b, &b_events, &root);
}

/// A write on the successor's own offer spends its watch (the server keeps
/// no watch there after `NodeDataChanged`); the offer is then deleted and
/// the predecessor leaves, all three notifications held by the proxy and
/// delivered together. The deletion of the offer is not notified (no watch
/// left), so only an exact account of the spent watch keeps the successor
/// from being elected on its predecessor's deletion: it lists, fails with
/// `NoNode`, and is never elected.
#[test]
fn election_successor_whose_watch_a_write_spent_is_never_elected() {
    let root = unique_root("election-fast-own-written");
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let (wa, wb) = (zkw(), through(&proxy, Duration::from_secs(10)));
    let (a, _) = candidate(&wa, &root, "a");
    let (b, b_events) = candidate(&wb, &root, "b");
    a.start().unwrap();
    b.start().unwrap();
    assert_eq!(b.state(), zklock::recipes::election::ElectionState::Ready);
    let offer = b.offer_node().unwrap();
    proxy.stall_downstream();
    let zk = raw();
    zk.set_data(&offer, b"written", None).unwrap();
    zk.delete(&offer, None).unwrap();
    a.stop().unwrap();
    proxy.pass();
    let r = b.await_leadership(Duration::from_secs(20));
    assert!(matches!(&r, Err(e) if e.is(ZkError::NoNode)), "{r:?}");
    let events = b_events.lock().unwrap().clone();
    assert!(!events.contains(&Ev::ElectedComplete), "{events:?}");
    assert!(children(&zk, &root).is_empty());
}

/// A candidate in the middle leaves: the one behind it re-lists (its
/// predecessor was not first) and waits behind the leader, not elected;
/// when the leader then leaves, it is elected without a request.
#[test]
fn election_successor_of_a_middle_offer_lists_again_and_waits() {
    let root = unique_root("election-fast-middle");
    let proxy = Arc::new(FaultProxy::start(shared_server().connect_string().as_str()).unwrap());
    let (w0, w1, w2) = (zkw(), zkw(), through(&proxy, Duration::from_secs(10)));
    let (c0, _) = candidate(&w0, &root, "c0");
    let (c1, _) = candidate(&w1, &root, "c1");
    let (c2, events) = candidate(&w2, &root, "c2");
    let (at, listener) = rt_at(&proxy, Ev::ElectedComplete);
    c2.add_listener(listener);
    for c in [&c0, &c1, &c2] {
        c.start().unwrap();
    }
    let before = proxy.round_trips();
    let told = events.lock().unwrap().len();
    c1.stop().unwrap();
    assert!(eventually(Duration::from_secs(10), || {
        let e = events.lock().unwrap();
        e.len() > told && e.ends_with(&[Ev::ReadyStart, Ev::ReadyComplete])
    }));
    let e = events.lock().unwrap()[told..].to_vec();
    assert_eq!(
        e,
        [
            Ev::DetermineStart,
            Ev::DetermineComplete,
            Ev::ReadyStart,
            Ev::ReadyComplete
        ]
    );
    assert!(proxy.round_trips() > before, "it listed");
    assert!(c0.has_leadership() && !c2.has_leadership());
    // Now its predecessor is the first offer it listed.
    let before = proxy.round_trips();
    c0.stop().unwrap();
    assert!(c2.await_leadership(Duration::from_secs(20)).unwrap());
    assert_eq!(told_at(&at) - before, 0);
    c2.stop().unwrap();
}

/// A connection drop between the arming of the watches and the
/// predecessor's deletion: the missed deletion comes with the reconnect's
/// `SetWatches`, out of zxid order, so the successor lists before it is
/// elected (a round trip of its own after the reconnect's), and is elected.
#[test]
fn election_successor_after_a_disconnect_lists_before_it_is_elected() {
    let root = unique_root("election-fast-disconnect");
    let proxy = Arc::new(FaultProxy::start(shared_server().connect_string().as_str()).unwrap());
    let (wa, wb) = (zkw(), through(&proxy, Duration::from_secs(10)));
    let (a, _) = candidate(&wa, &root, "a");
    let (b, b_events) = candidate(&wb, &root, "b");
    let (at, listener) = listings_at(&proxy, Ev::ElectedComplete);
    b.add_listener(listener);
    a.start().unwrap();
    b.start().unwrap();
    // Cut, and keep it cut (no byte flows on a new connection) while the
    // leader leaves.
    proxy.stall();
    proxy.cut();
    assert!(eventually(Duration::from_secs(10), || wb
        .zookeeper()
        .state()
        == zklock::client::State::Connecting));
    a.stop().unwrap();
    let before = listings(&proxy);
    proxy.pass();
    assert!(b.await_leadership(Duration::from_secs(20)).unwrap());
    // After the reconnect (its SetWatches), one listing (with the own
    // exists): the fast path would make none. Counted by requests, not round
    // trips, which the server's timing can join or split.
    assert_eq!(told_at(&at) - before, 1);
    assert!(b_events.lock().unwrap().ends_with(&[
        Ev::DetermineStart,
        Ev::DetermineComplete,
        Ev::ElectedStart,
        Ev::ElectedComplete
    ]));
    b.stop().unwrap();
}

/// The same drop, with the successor's own offer deleted too while it is
/// cut off: after the reconnect it fails with `NoNode`, never elected,
/// whatever order the reconnect delivers the two deletions in.
#[test]
fn election_successor_whose_offer_was_deleted_while_cut_off_is_never_elected() {
    let root = unique_root("election-fast-disconnect-deleted");
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let (wa, wb) = (zkw(), through(&proxy, Duration::from_secs(10)));
    let (a, _) = candidate(&wa, &root, "a");
    let (b, b_events) = candidate(&wb, &root, "b");
    a.start().unwrap();
    b.start().unwrap();
    proxy.stall();
    proxy.cut();
    assert!(eventually(Duration::from_secs(10), || wb
        .zookeeper()
        .state()
        == zklock::client::State::Connecting));
    raw().delete(&b.offer_node().unwrap(), None).unwrap();
    a.stop().unwrap();
    proxy.pass();
    let r = b.await_leadership(Duration::from_secs(20));
    assert!(matches!(&r, Err(e) if e.is(ZkError::NoNode)), "{r:?}");
    let events = b_events.lock().unwrap().clone();
    assert!(!events.contains(&Ev::ElectedComplete), "{events:?}");
    assert!(children(&raw(), &root).is_empty());
}

/// Curator's latch on the engine: a successor of the first node becomes
/// leader on its deletion without a request (no round trip between the
/// notification and `IsLeader`); one behind a middle node that leaves lists
/// again and waits.
#[test]
fn latch_successor_of_the_first_node_leads_without_a_request() {
    use std::sync::atomic::AtomicU64;
    use zklock::recipes::leader_latch::{LatchEvent, LeaderLatch};
    let path = format!("{}/latch", unique_root("latch-fast-succession"));
    let proxy = Arc::new(FaultProxy::start(shared_server().connect_string().as_str()).unwrap());
    let (w0, w1, w2) = (zkw(), zkw(), through(&proxy, Duration::from_secs(10)));
    let l0 = LeaderLatch::new(&w0, &path, "l0").unwrap();
    let l1 = LeaderLatch::new(&w1, &path, "l1").unwrap();
    let l2 = LeaderLatch::new(&w2, &path, "l2").unwrap();
    let at = Arc::new(AtomicU64::new(u64::MAX));
    let (p, a) = (proxy.clone(), at.clone());
    l2.add_listener(move |e: LatchEvent| {
        if e == LatchEvent::IsLeader {
            a.store(p.round_trips(), Ordering::SeqCst);
        }
    });
    for l in [&l0, &l1, &l2] {
        l.start().unwrap();
    }
    // The middle one leaves: l2 lists again, still behind l0.
    let before = proxy.round_trips();
    l1.close().unwrap();
    // Its listing; l0, its second ahead until then, is watched already (no
    // second watch); the probe's answer comes after the listing's.
    assert!(eventually(Duration::from_secs(10), || proxy.round_trips() > before));
    flush(&w2, &path);
    assert!(l0.has_leadership() && !l2.has_leadership());
    // l0 was first in l2's listing: its deletion makes l2 leader at once.
    let before = proxy.round_trips();
    l0.close().unwrap();
    assert!(l2.await_leadership(Duration::from_secs(20)).unwrap());
    assert_eq!(told_at(&at) - before, 0);
    // Its node is watched: a deletion under it ends the latch.
    raw().delete(&l2.our_path().unwrap(), None).unwrap();
    assert!(eventually(Duration::from_secs(10), || l2.state()
        == zklock::recipes::leader_latch::LatchState::Failed));
    assert!(!l2.has_leadership());
}

// ------------------------- the second ahead: successions down a chain (issue 37)

/// Whether `recipe`'s state (its `Debug`) knows the node just ahead of it
/// to be first: its deletion elects it without a request.
fn knows_ahead_first(recipe: &impl std::fmt::Debug) -> bool {
    format!("{recipe:?}").contains("ahead_first: true")
}

/// A chain a < b < c < d, each leader stepping down in turn: every
/// successor is elected without a request between the predecessor's
/// stepping down and its `ElectedComplete`. c watched a too (two ahead,
/// first in its listing): a's deletion told it b was first, so b's deletion
/// elects it at once (before: c listed). d's second ahead, b, was not first
/// in its listing: b's deletion makes d list again, off the critical path,
/// and c's deletion then elects d at once.
#[test]
fn election_chain_of_successions_without_a_request() {
    let root = unique_root("election-chain");
    let proxies: Vec<Arc<FaultProxy>> = (0..3)
        .map(|_| Arc::new(FaultProxy::start(shared_server().connect_string().as_str()).unwrap()))
        .collect();
    let wa = zkw();
    let ws: Vec<_> = proxies
        .iter()
        .map(|p| through(p, Duration::from_secs(10)))
        .collect();
    let (a, _) = candidate(&wa, &root, "a");
    let mut cands = Vec::new();
    let mut ats = Vec::new();
    for (i, name) in ["b", "c", "d"].iter().enumerate() {
        let (c, events) = candidate(&ws[i], &root, name);
        let (at, listener) = rt_at(&proxies[i], Ev::ElectedComplete);
        c.add_listener(listener);
        cands.push((c, events));
        ats.push(at);
    }
    a.start().unwrap();
    for (c, _) in &cands {
        c.start().unwrap();
    }
    let (b, c, d) = (&cands[0].0, &cands[1].0, &cands[2].0);
    // a leaves: b is elected without a request.
    let before = proxies[0].round_trips();
    a.stop().unwrap();
    assert!(b.await_leadership(Duration::from_secs(20)).unwrap());
    assert_eq!(told_at(&ats[0]) - before, 0);
    // b leaves: c is elected without a request (it heard a's deletion first,
    // in zxid order on its connection).
    let told = cands[2].1.lock().unwrap().len();
    let before = proxies[1].round_trips();
    b.stop().unwrap();
    assert!(c.await_leadership(Duration::from_secs(20)).unwrap());
    assert_eq!(
        told_at(&ats[1]) - before,
        0,
        "requests from c between b's stepping down and ElectedComplete"
    );
    assert!(cands[1].1.lock().unwrap().ends_with(&[
        Ev::DetermineStart,
        Ev::DetermineComplete,
        Ev::ElectedStart,
        Ev::ElectedComplete
    ]));
    // d listed again on b's deletion (b was not first in its listing), and
    // waits behind c, now first.
    assert!(eventually(Duration::from_secs(10), || {
        let e = cands[2].1.lock().unwrap();
        e.len() > told && e.ends_with(&[Ev::ReadyStart, Ev::ReadyComplete])
    }));
    assert!(eventually(Duration::from_secs(10), || knows_ahead_first(d)));
    assert!(!d.has_leadership());
    let before = proxies[2].round_trips();
    c.stop().unwrap();
    assert!(d.await_leadership(Duration::from_secs(20)).unwrap());
    assert_eq!(told_at(&ats[2]) - before, 0);
    d.stop().unwrap();
    assert!(children(&raw(), &root).is_empty());
}

/// A chain a < b < c < d whose middle candidate b quits: c lists again (its
/// predecessor was not first) and waits behind a; d, whose second ahead b
/// was not first in its listing, lists again off the critical path, stays
/// behind c and now watches a as its second ahead. a leaves: c is elected
/// without a request, and d learns c is first; c leaves: d is elected
/// without a request.
#[test]
fn election_chain_whose_middle_quits_lists_again_and_stays_correct() {
    let root = unique_root("election-chain-middle");
    let pc = Arc::new(FaultProxy::start(shared_server().connect_string().as_str()).unwrap());
    let pd = Arc::new(FaultProxy::start(shared_server().connect_string().as_str()).unwrap());
    let (wa, wb) = (zkw(), zkw());
    let (wc, wd) = (
        through(&pc, Duration::from_secs(10)),
        through(&pd, Duration::from_secs(10)),
    );
    let (a, _) = candidate(&wa, &root, "a");
    let (b, _) = candidate(&wb, &root, "b");
    let (c, c_events) = candidate(&wc, &root, "c");
    let (d, d_events) = candidate(&wd, &root, "d");
    let (at_c, listener) = rt_at(&pc, Ev::ElectedComplete);
    c.add_listener(listener);
    let (at_d, listener) = rt_at(&pd, Ev::ElectedComplete);
    d.add_listener(listener);
    for x in [&a, &b, &c, &d] {
        x.start().unwrap();
    }
    let (told_c, told_d) = (
        c_events.lock().unwrap().len(),
        d_events.lock().unwrap().len(),
    );
    let (before_c, before_d) = (pc.round_trips(), pd.round_trips());
    b.stop().unwrap();
    for (events, told) in [(&c_events, told_c), (&d_events, told_d)] {
        assert!(eventually(Duration::from_secs(10), || {
            let e = events.lock().unwrap();
            e.len() > told && e.ends_with(&[Ev::ReadyStart, Ev::ReadyComplete])
        }));
        assert_eq!(
            events.lock().unwrap()[told..],
            [
                Ev::DetermineStart,
                Ev::DetermineComplete,
                Ev::ReadyStart,
                Ev::ReadyComplete
            ]
        );
    }
    assert!(pc.round_trips() > before_c, "c listed");
    assert!(pd.round_trips() > before_d, "d listed");
    // d's watch on a (its new second ahead) is answered before the probe.
    flush(&wd, &root);
    assert!(a.has_leadership() && !c.has_leadership() && !d.has_leadership());
    assert!(knows_ahead_first(&c) && !knows_ahead_first(&d));
    // a leaves: c at once; d hears it too and learns c is first.
    let before = pc.round_trips();
    a.stop().unwrap();
    assert!(c.await_leadership(Duration::from_secs(20)).unwrap());
    assert_eq!(told_at(&at_c) - before, 0);
    flush(&wd, &root);
    assert!(knows_ahead_first(&d));
    assert!(!d.has_leadership());
    let before = pd.round_trips();
    c.stop().unwrap();
    assert!(d.await_leadership(Duration::from_secs(20)).unwrap());
    assert_eq!(told_at(&at_d) - before, 0);
    d.stop().unwrap();
    assert!(children(&raw(), &root).is_empty());
}

/// The second ahead's deletion told c that b is first; then c's own offer
/// is deleted by another session and b leaves, both notifications held by
/// the proxy and delivered together in zxid order: the own offer's watch
/// fires first, so c fails with `NoNode` and is never elected.
#[test]
fn election_chain_successor_whose_offer_was_deleted_first_is_never_elected() {
    let root = unique_root("election-chain-own-deleted");
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let (wa, wb, wc) = (zkw(), zkw(), through(&proxy, Duration::from_secs(10)));
    let (a, _) = candidate(&wa, &root, "a");
    let (b, _) = candidate(&wb, &root, "b");
    let (c, c_events) = candidate(&wc, &root, "c");
    for x in [&a, &b, &c] {
        x.start().unwrap();
    }
    a.stop().unwrap();
    assert!(b.await_leadership(Duration::from_secs(20)).unwrap());
    flush(&wc, &root);
    assert!(knows_ahead_first(&c), "{c:?}");
    proxy.stall_downstream();
    raw().delete(&c.offer_node().unwrap(), None).unwrap();
    b.stop().unwrap();
    proxy.pass();
    fails_unelected(&c, &c_events, &root);
}

/// The second ahead's deletion told c that b is first; then c's connection
/// drops and comes back (the watches re-set by `SetWatches`), and b leaves:
/// the watches were armed in an earlier connection, so c lists before it is
/// elected (the listing with the own `exists`), and is elected.
#[test]
fn election_chain_successor_after_a_disconnect_lists_before_it_is_elected() {
    let root = unique_root("election-chain-disconnect");
    let proxy = Arc::new(FaultProxy::start(shared_server().connect_string().as_str()).unwrap());
    let (wa, wb, wc) = (zkw(), zkw(), through(&proxy, Duration::from_secs(10)));
    let (a, _) = candidate(&wa, &root, "a");
    let (b, _) = candidate(&wb, &root, "b");
    let (c, c_events) = candidate(&wc, &root, "c");
    let (at, listener) = listings_at(&proxy, Ev::ElectedComplete);
    c.add_listener(listener);
    for x in [&a, &b, &c] {
        x.start().unwrap();
    }
    a.stop().unwrap();
    assert!(b.await_leadership(Duration::from_secs(20)).unwrap());
    flush(&wc, &root);
    assert!(knows_ahead_first(&c), "{c:?}");
    proxy.stall();
    proxy.cut();
    assert!(eventually(Duration::from_secs(10), || wc
        .zookeeper()
        .state()
        == zklock::client::State::Connecting));
    proxy.pass();
    assert!(eventually(Duration::from_secs(10), || wc
        .zookeeper()
        .state()
        == zklock::client::State::Connected));
    // The reconnect's events are heard before the probe's answer.
    flush(&wc, &root);
    assert!(knows_ahead_first(&c), "{c:?}");
    let told = c_events.lock().unwrap().len();
    let before = listings(&proxy);
    b.stop().unwrap();
    assert!(c.await_leadership(Duration::from_secs(20)).unwrap());
    // It listed once (the fast path makes none). Counted by requests: the
    // listing and the own `exists` sent with it are one round trip or two,
    // as the server answers the first before or after the proxy reads the
    // second.
    let listed = told_at(&at) - before;
    assert_eq!(listed, 1, "{:?}", c_events.lock().unwrap());
    assert_eq!(
        c_events.lock().unwrap()[told..],
        [
            Ev::DetermineStart,
            Ev::DetermineComplete,
            Ev::ElectedStart,
            Ev::ElectedComplete
        ]
    );
    c.stop().unwrap();
    assert!(children(&raw(), &root).is_empty());
}

/// Curator's latch on the engine, down a chain l0 < l1 < l2 < l3: each
/// successor leads without a request between its predecessor's close and
/// `IsLeader` (before: l2 listed on l1's deletion).
#[test]
fn latch_chain_of_successions_without_a_request() {
    use std::sync::atomic::AtomicU64;
    use zklock::recipes::leader_latch::{LatchEvent, LeaderLatch};
    let path = format!("{}/latch", unique_root("latch-chain"));
    let proxies: Vec<Arc<FaultProxy>> = (0..3)
        .map(|_| Arc::new(FaultProxy::start(shared_server().connect_string().as_str()).unwrap()))
        .collect();
    let w0 = zkw();
    let ws: Vec<_> = proxies
        .iter()
        .map(|p| through(p, Duration::from_secs(10)))
        .collect();
    let l0 = LeaderLatch::new(&w0, &path, "l0").unwrap();
    let mut latches = Vec::new();
    let mut ats = Vec::new();
    for (i, w) in ws.iter().enumerate() {
        let l = LeaderLatch::new(w, &path, &format!("l{}", i + 1)).unwrap();
        let at = Arc::new(AtomicU64::new(u64::MAX));
        let (p, a) = (proxies[i].clone(), at.clone());
        l.add_listener(move |e: LatchEvent| {
            if e == LatchEvent::IsLeader {
                a.store(p.round_trips(), Ordering::SeqCst);
            }
        });
        latches.push(l);
        ats.push(at);
    }
    l0.start().unwrap();
    for l in &latches {
        l.start().unwrap();
    }
    let mut leaving = &l0;
    for (i, l) in latches.iter().enumerate() {
        // The one taking over knows its predecessor is first (its listing,
        // or the deletion two ahead, told it).
        assert!(
            eventually(Duration::from_secs(10), || knows_ahead_first(l)),
            "{l:?}"
        );
        let before = proxies[i].round_trips();
        leaving.close().unwrap();
        assert!(l.await_leadership(Duration::from_secs(20)).unwrap());
        assert_eq!(told_at(&ats[i]) - before, 0, "l{}", i + 1);
        leaving = l;
    }
    leaving.close().unwrap();
    assert!(children(&raw(), &path).is_empty());
}

// ---------------------------------------------------------------- ZKLeaderManager

#[test]
fn leader_manager_like_hbase_test_zk_leader_manager() {
    use zklock::recipes::leader_manager::ZkLeaderManager;
    let root = unique_root("leader-manager");
    let zkws: Vec<_> = (0..3).map(|_| zkw()).collect();
    let managers: Vec<Arc<ZkLeaderManager>> = zkws
        .iter()
        .enumerate()
        .map(|(i, w)| Arc::new(ZkLeaderManager::new(w, &root, format!("server{i}"))))
        .collect();
    let leaders = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = managers
        .iter()
        .map(|m| {
            let m = m.clone();
            m.start().unwrap();
            thread::spawn(move || m.wait_to_become_leader().unwrap())
        })
        .collect();
    let current = || {
        let l: Vec<usize> = (0..3).filter(|&i| managers[i].has_leadership()).collect();
        assert!(l.len() <= 1, "two leaders: {l:?}");
        l.first().copied()
    };
    assert!(eventually(Duration::from_secs(10), || current().is_some()));
    let first = current().unwrap();
    leaders.fetch_add(1, Ordering::SeqCst);
    // Step down: another takes over.
    managers[first].step_down_as_leader().unwrap();
    assert!(!managers[first].has_leadership());
    assert!(eventually(Duration::from_secs(10), || current()
        .is_some_and(|l| l != first)));
    let second = current().unwrap();
    // Stop the new leader: the third takes over.
    managers[second].stop().unwrap();
    assert!(managers[second].is_stopped());
    assert!(eventually(Duration::from_secs(10), || current()
        .is_some_and(|l| l != first && l != second)));
    let third = current().unwrap();
    // Every waiting thread returned true once it led.
    for h in handles {
        assert!(h.join().unwrap());
    }
    managers[third].stop().unwrap();
    // The abdicated one may offer again and lead.
    let m = managers[first].clone();
    assert!(m.wait_to_become_leader().unwrap());
    m.stop().unwrap();
    // HBase's layout: the leader znode itself, gone once nobody leads.
    let zk = raw();
    assert_eq!(zk.exists(&root, false).unwrap(), None);
}

/// A claim being confirmed (its create made, the `exists` that sets its watch
/// not yet answered) is no leadership yet, and a stop in that window ends the
/// wait with `Ok(false)` and removes the znode: a wait that says it was stopped
/// before it led was never seen leading. (Found by CI: HBase's test above saw
/// a manager lead, stopped it, and its wait returned `false`.)
#[test]
fn leader_manager_stopped_while_its_claim_is_confirmed_never_led() {
    use zklock::recipes::leader_manager::ZkLeaderManager;
    use zklock::testing::ProxyMode;
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    // A session that outlives the test's holds under any load.
    let w = through(&proxy, Duration::from_secs(20));
    let znode = format!("{}/leader", unique_root("leader-manager-confirm"));
    let m = Arc::new(ZkLeaderManager::new(&w, &znode, "a"));
    m.start().unwrap();
    // The reply to the claim's exists (and every later one) is held.
    const EXISTS: i32 = 3;
    proxy.set_mode_after(&[EXISTS], ProxyMode::StallDownstream);
    let m2 = m.clone();
    let waiting = thread::spawn(move || m2.wait_to_become_leader());
    let zk = raw();
    assert!(eventually(Duration::from_secs(10), || zk
        .exists(&znode, false)
        .unwrap()
        .is_some()));
    thread::sleep(Duration::from_millis(200));
    assert!(!m.has_leadership(), "leads before its claim was confirmed");
    let m3 = m.clone();
    let stopping = thread::spawn(move || m3.stop());
    assert!(eventually(Duration::from_secs(5), || m.is_stopped()));
    proxy.pass();
    stopping.join().unwrap().unwrap();
    assert!(
        !waiting.join().unwrap().unwrap(),
        "a stopped wait said it led"
    );
    assert!(!m.has_leadership());
    assert_eq!(zk.exists(&znode, false).unwrap(), None);
}

/// A `close` from another thread right as a latch's `start` begins (the
/// latch marked started, nothing made yet): before, `start` read the
/// attempt's generation after the close had bumped it, so it made its node,
/// bound it to the closed latch and returned `Ok`, and the node stayed in the
/// queue (a closed latch ahead of every other participant) until the latch
/// was dropped. Now `start` ends with `Closed`, makes nothing, and the latch
/// stays closed. Then the same close with the start failing (a foreign
/// dialect's node refused): before, the failure set the closed latch back to
/// `Latent` (startable again). Forced with the `Starting` step.
#[test]
fn latch_closed_as_its_start_begins_makes_no_node_and_stays_closed() {
    use std::sync::{OnceLock, Weak};
    use zklock::recipes::leader_latch::{LatchState, LatchStep, LeaderLatch};
    let session = zkw();
    let zk = raw();
    let closing_latch = |session: &ZooKeeperWatcher, path: &str| {
        let me: Arc<OnceLock<Weak<LeaderLatch>>> = Arc::default();
        let me2 = me.clone();
        let latch = Arc::new(
            LeaderLatch::new(session, path, "closed")
                .unwrap()
                .with_step_hook(move |step, _| {
                    if step == LatchStep::Starting {
                        let latch = me2.get().and_then(Weak::upgrade).unwrap();
                        // Another thread's close, over before the start goes on.
                        thread::spawn(move || latch.close())
                            .join()
                            .unwrap()
                            .unwrap();
                    }
                }),
        );
        me.set(Arc::downgrade(&latch)).unwrap();
        latch
    };

    let path = unique_root("latch-close-starting");
    let latch = closing_latch(&session, &path);
    let started = latch.start();
    assert!(
        matches!(started, Err(zklock::Error::Closed)),
        "a start closed as it began returned {started:?}"
    );
    assert_eq!(latch.state(), LatchState::Closed);
    assert!(!latch.has_leadership());
    assert!(
        children(&zk, &path).is_empty(),
        "a closed latch left its node in the queue"
    );
    assert!(matches!(latch.start(), Err(zklock::Error::BadArguments(_))));
    assert!(children(&zk, &path).is_empty());

    // The start fails (a kazoo lock node in the path is refused) after the
    // close: the latch stays closed.
    let path = unique_root("latch-close-starting-fails");
    zklock::zkutil::create_with_parents(&session, &format!("{path}/abc__lock__0000000001"))
        .unwrap();
    let latch = closing_latch(&session, &path);
    let started = latch.start();
    assert!(
        matches!(started, Err(zklock::Error::MixedDialect { .. })),
        "{started:?}"
    );
    assert_eq!(
        latch.state(),
        LatchState::Closed,
        "a failed start reopened a closed latch"
    );
}

/// A `stop` from another thread while `start` tells its listeners `Start`
/// (before the offer is made): before, `start` then set the state to `Offer`
/// over the stop's `Stop`, its offer was refused at the bind (`Closed`), and
/// the candidate stayed in `Offer` for good: every later `start` refused it
/// as "already started". Now the stopped candidate stays stopped, and may
/// start again. Forced with a listener that waits for the stop.
#[test]
fn election_stopped_while_its_start_begins_stays_stopped_and_may_start_again() {
    use std::sync::{OnceLock, Weak};
    use zklock::recipes::election::ElectionState;
    let session = zkw();
    let zk = raw();
    let root = unique_root("election-stop-starting");
    let c = Arc::new(LeaderElectionSupport::new(&session, &root, "stopped").unwrap());
    let me: Arc<OnceLock<Weak<LeaderElectionSupport>>> = Arc::default();
    me.set(Arc::downgrade(&c)).unwrap();
    let stopping: Arc<parking_lot::Mutex<Option<thread::JoinHandle<()>>>> = Arc::default();
    let (me2, stopping2) = (me.clone(), stopping.clone());
    let once = Arc::new(AtomicBool::new(false));
    c.add_listener(move |e: Ev| {
        if e != Ev::Start || once.swap(true, Ordering::SeqCst) {
            return;
        }
        let c = me2.get().and_then(Weak::upgrade).unwrap();
        let c2 = c.clone();
        // The stop's own events wait for this one to be told: wait for its
        // state change only.
        *stopping2.lock() = Some(thread::spawn(move || c2.stop().unwrap()));
        assert!(eventually(Duration::from_secs(10), || c.state() == ElectionState::Stop));
    });
    let started = c.start();
    assert!(matches!(started, Err(zklock::Error::Closed)), "{started:?}");
    stopping.lock().take().unwrap().join().unwrap();
    assert_eq!(
        c.state(),
        ElectionState::Stop,
        "a stopped candidate is not stopped"
    );
    assert!(children(&zk, &root).is_empty());
    c.start().expect("a stopped candidate starts again");
    assert!(c.has_leadership());
    c.stop().unwrap();
    assert!(children(&zk, &root).is_empty());
}

/// Two waits of one manager: the second, finding the first's znode by its
/// mark after the first confirmed it, leaves the confirmed claim as it is
/// (before, it confirmed it again, and the leader did not lead for that
/// round trip; a retryable failure of that second confirmation removed the
/// leader's znode).
#[test]
fn a_second_wait_of_a_leader_manager_leaves_the_confirmed_claim_alone() {
    use zklock::recipes::leader_manager::ZkLeaderManager;
    use zklock::testing::ProxyMode;
    const EXISTS: i32 = 3;
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    // A session that outlives the test's holds under any load.
    let w = through(&proxy, Duration::from_secs(20));
    let znode = format!("{}/leader", unique_root("leader-manager-two-waits"));
    let m = Arc::new(ZkLeaderManager::new(&w, &znode, "a"));
    m.start().unwrap();
    // The first wait's confirmation held: the second waits behind it.
    proxy.set_mode_after(&[EXISTS], ProxyMode::StallDownstream);
    let m1 = m.clone();
    let first = thread::spawn(move || m1.wait_to_become_leader());
    let zk = raw();
    assert!(eventually(Duration::from_secs(10), || zk
        .exists(&znode, false)
        .unwrap()
        .is_some()));
    let m2 = m.clone();
    let second = thread::spawn(move || m2.wait_to_become_leader());
    thread::sleep(Duration::from_millis(300));
    // Any confirmation the second wait sends is held in turn.
    proxy.set_mode_after(&[EXISTS], ProxyMode::StallDownstream);
    let sent = proxy.requests(EXISTS);
    proxy.pass();
    assert!(first.join().unwrap().unwrap());
    // The old code sent a second confirmation; wait for it, if it comes.
    let _ = eventually(Duration::from_secs(2), || proxy.requests(EXISTS) > sent);
    assert!(
        m.has_leadership(),
        "a second wait unconfirmed the confirmed leader"
    );
    proxy.set_mode_after(&[], ProxyMode::Pass);
    proxy.pass();
    assert!(second.join().unwrap().unwrap());
    assert!(m.has_leadership());
    m.stop().unwrap();
    assert_eq!(zk.exists(&znode, false).unwrap(), None);
}

/// A claim cut off while it is being confirmed did not lead yet: its
/// listeners hear nothing then (before, `InDoubt`, for a leadership never
/// had); once confirmed after the reconnect it leads, told in doubt and
/// restored, or nothing, never a lone `InDoubt`.
#[test]
fn a_leader_manager_claim_cut_off_before_it_led_tells_nothing() {
    use zklock::recipes::leader_manager::ZkLeaderManager;
    use zklock::recipes::LeadershipEvent;
    use zklock::testing::ProxyMode;
    const EXISTS: i32 = 3;
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    // A session that outlives the test's holds under any load.
    let w = through(&proxy, Duration::from_secs(20));
    let znode = format!("{}/leader", unique_root("leader-manager-cut-confirm"));
    let m = Arc::new(ZkLeaderManager::new(&w, &znode, "a"));
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let e = events.clone();
    m.add_listener(move |ev| e.lock().unwrap().push(ev));
    m.start().unwrap();
    proxy.set_mode_after(&[EXISTS], ProxyMode::StallDownstream);
    let m1 = m.clone();
    let waiting = thread::spawn(move || m1.wait_to_become_leader());
    let zk = raw();
    assert!(eventually(Duration::from_secs(10), || zk
        .exists(&znode, false)
        .unwrap()
        .is_some()));
    // Cut off with its confirmation unanswered: the client sees the
    // connection drop; the claim is no leadership yet.
    proxy.stall();
    proxy.cut();
    assert!(eventually(Duration::from_secs(10), || w.state()
        != zklock::client::State::Connected));
    thread::sleep(Duration::from_millis(300));
    assert_eq!(
        *events.lock().unwrap(),
        [],
        "told of a claim that never led"
    );
    assert!(!m.has_leadership());
    proxy.pass();
    assert!(waiting.join().unwrap().unwrap());
    assert!(eventually(Duration::from_secs(10), || m.has_leadership()));
    let told = events.lock().unwrap().clone();
    assert!(
        told.is_empty() || told == [LeadershipEvent::InDoubt, LeadershipEvent::Restored],
        "{told:?}"
    );
    m.stop().unwrap();
    assert_eq!(zk.exists(&znode, false).unwrap(), None);
}

/// A stop while the offer is being made (its create's reply held): the
/// stop's `StopStart`/`StopComplete` are the listeners' last events (before,
/// `OfferComplete` followed them), `start` says `Closed`, and the offer the
/// server made is removed.
#[test]
fn election_stopped_while_its_offer_is_made_tells_the_stop_last() {
    use zklock::testing::ProxyMode;
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    // A session that outlives the test's holds under any load.
    let w = through(&proxy, Duration::from_secs(20));
    let zk = raw();
    let root = unique_root("election-stop-offer");
    zklock::zkutil::create_with_parents(&w, &root).unwrap();
    let (c, events) = candidate(&w, &root, "offer");
    let c = Arc::new(c);
    // create, create2: the offer's reply held.
    proxy.set_mode_after(&[1, 15], ProxyMode::StallDownstream);
    let c2 = c.clone();
    let starting = thread::spawn(move || c2.start());
    assert!(eventually(Duration::from_secs(10), || events
        .lock()
        .unwrap()
        .contains(&Ev::OfferStart)));
    assert!(eventually(Duration::from_secs(10), || !children(
        &zk, &root
    )
    .is_empty()));
    c.stop().unwrap();
    proxy.pass();
    let started = starting.join().unwrap();
    assert!(matches!(started, Err(zklock::Error::Closed)), "{started:?}");
    let told = events.lock().unwrap().clone();
    assert!(
        told.ends_with(&[Ev::StopStart, Ev::StopComplete]),
        "the stop is not the last word: {told:?}"
    );
    assert!(eventually(Duration::from_secs(10), || children(&zk, &root).is_empty()));
}

/// A failed latch started again, closed while the start removes the failed
/// attempt's node (its delete's reply held): the latch stays closed, the
/// start ends with `Closed`, and no node is made (before, the start went on
/// over the close: a closed latch took part, and could lead).
#[test]
fn latch_closed_while_a_restart_cleans_up_stays_closed() {
    use zklock::recipes::leader_latch::{LatchState, LeaderLatch};
    use zklock::testing::ProxyMode;
    const DELETE: i32 = 2;
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let w = through(&proxy, Duration::from_secs(20));
    let zk = raw();
    let path = unique_root("latch-close-restart");
    let latch = Arc::new(LeaderLatch::new(&w, &path, "restart").unwrap());
    latch.start().unwrap();
    assert!(latch.has_leadership());
    // Its node deleted under it: failed.
    for node in children(&zk, &path) {
        zk.delete(&format!("{path}/{node}"), None).unwrap();
    }
    assert!(eventually(Duration::from_secs(10), || latch.state()
        == LatchState::Failed));
    proxy.set_mode_after(&[DELETE], ProxyMode::StallDownstream);
    let deletes = proxy.requests(DELETE);
    let l2 = latch.clone();
    let starting = thread::spawn(move || l2.start());
    // The restart's removal of the failed node is on its way, or (no node
    // recorded) the start is through already.
    let removing = eventually(Duration::from_secs(3), || proxy.requests(DELETE) > deletes);
    latch.close().unwrap();
    proxy.set_mode_after(&[], ProxyMode::Pass);
    proxy.pass();
    let started = starting.join().unwrap();
    assert!(removing, "the restart sent no delete: {started:?}");
    assert!(matches!(started, Err(zklock::Error::Closed)), "{started:?}");
    assert_eq!(latch.state(), LatchState::Closed);
    assert!(!latch.has_leadership());
    assert!(eventually(Duration::from_secs(10), || children(&zk, &path).is_empty()));
}

/// A listener may stop its own candidate, latch or manager from inside an
/// event, on the thread telling it (HBase-style code stops on `Elected` or on
/// `Lost`): nothing waits for itself, and the stop's own events are told once
/// the event being told has reached every listener, so all hear one order.
#[test]
fn a_listener_stops_its_own_recipe_from_inside_an_event() {
    use std::sync::{OnceLock, Weak};
    use zklock::recipes::election::ElectionState;
    let session = zkw();
    let zk = raw();
    // The election: stopped from ElectedComplete, during start().
    let root = unique_root("election-stop-inside");
    let c = Arc::new(LeaderElectionSupport::new(&session, &root, "inside").unwrap());
    let me: Arc<OnceLock<Weak<LeaderElectionSupport>>> = Arc::default();
    me.set(Arc::downgrade(&c)).unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (me2, seen2) = (me.clone(), seen.clone());
    c.add_listener(move |e: Ev| {
        seen2.lock().unwrap().push(e);
        if e == Ev::ElectedComplete {
            let c = me2.get().and_then(Weak::upgrade).unwrap();
            c.stop().unwrap();
        }
    });
    // A second listener, told after the first: it hears the election
    // before the stop the first listener made inside it.
    let later = Arc::new(std::sync::Mutex::new(Vec::new()));
    let later2 = later.clone();
    c.add_listener(move |e: Ev| later2.lock().unwrap().push(e));
    let c2 = c.clone();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(c2.start().map_err(|e| e.to_string())));
    let started = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("start() with a listener stopping the candidate never returned");
    assert!(started.is_ok(), "{started:?}");
    assert_eq!(c.state(), ElectionState::Stop);
    // The listener's stop told its events (a deadlock of the telling thread,
    // the session's event thread, would hold them, and every later event
    // of the session, for good).
    assert!(
        eventually(Duration::from_secs(10), || seen
            .lock()
            .unwrap()
            .ends_with(&[Ev::StopStart, Ev::StopComplete])),
        "{seen:?}"
    );
    assert!(
        eventually(Duration::from_secs(10), || later
            .lock()
            .unwrap()
            .ends_with(&[Ev::ElectedComplete, Ev::StopStart, Ev::StopComplete])),
        "the events in another order for the second listener: {later:?}"
    );
    assert_eq!(*seen.lock().unwrap(), *later.lock().unwrap());
    assert!(children(&zk, &root).is_empty());
    // The latch: closed from IsLeader.
    use zklock::recipes::leader_latch::{LatchEvent, LeaderLatch};
    let root = unique_root("latch-close-inside");
    let latch = Arc::new(LeaderLatch::new(&session, &root, "inside").unwrap());
    let me: Arc<OnceLock<Weak<LeaderLatch>>> = Arc::default();
    me.set(Arc::downgrade(&latch)).unwrap();
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    latch.add_listener(move |e: LatchEvent| {
        if e == LatchEvent::IsLeader {
            if let Some(l) = me.get().and_then(Weak::upgrade) {
                let _ = tx
                    .lock()
                    .unwrap()
                    .send(l.close().map_err(|e| e.to_string()));
            }
        }
    });
    latch.start().unwrap();
    let closed = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a latch closed from IsLeader never finished");
    assert!(closed.is_ok(), "{closed:?}");
    assert!(eventually(Duration::from_secs(10), || children(&zk, &root).is_empty()));
}

/// A `stop` from another thread as the candidate is elected (marked
/// `Elected`, its listeners not told yet): they hear `ElectedComplete`
/// before the stop's `StopStart`, so their last word is the stop. Before,
/// the elected events were told after the decision, unordered with the
/// stop's: a listener heard `StopComplete` then `ElectedComplete`, and
/// believed a stopped candidate led. Forced with the `Elected` step, which
/// gives the stop (its node taken) up to 2 s to tell its events.
#[test]
fn election_stopped_as_it_is_elected_tells_the_stop_last() {
    use std::sync::{OnceLock, Weak};
    let session = zkw();
    let zk = raw();
    let root = unique_root("election-stop-elected");
    let told: Arc<parking_lot::Mutex<Vec<Ev>>> = Arc::default();
    let me: Arc<OnceLock<Weak<LeaderElectionSupport>>> = Arc::default();
    // The stop's thread, sent once the step is over (the start may return
    // before: the stop ends its wait).
    let (stopping_tx, stopping) = mpsc::channel::<thread::JoinHandle<()>>();
    let stopping_tx = parking_lot::Mutex::new(stopping_tx);
    let me2 = me.clone();
    let c = Arc::new(
        LeaderElectionSupport::new(&session, &root, "stopped")
            .unwrap()
            .with_step_hook(move |step, _| {
                if step != ElectionStep::Elected {
                    return;
                }
                let c = me2.get().and_then(Weak::upgrade).unwrap();
                let c2 = c.clone();
                let stop = thread::spawn(move || c2.stop().unwrap());
                assert!(eventually(Duration::from_secs(10), || c.state()
                    == zklock::recipes::election::ElectionState::Stop));
                // The stop tells its events now, unless it must wait for
                // the elected ones (then it waits whatever the time given).
                let until = Instant::now() + Duration::from_secs(2);
                while !stop.is_finished() && Instant::now() < until {
                    thread::sleep(Duration::from_millis(10));
                }
                stopping_tx.lock().send(stop).unwrap();
            }),
    );
    me.set(Arc::downgrade(&c)).unwrap();
    let t = told.clone();
    c.add_listener(move |e: Ev| t.lock().push(e));
    c.start().unwrap();
    let stop = stopping.recv_timeout(Duration::from_secs(30)).unwrap();
    stop.join().unwrap();
    // The elected events are told once the step is over.
    assert!(eventually(Duration::from_secs(10), || told
        .lock()
        .contains(&Ev::ElectedComplete)));
    let told = told.lock().clone();
    let at = |e: Ev| {
        told.iter()
            .position(|x| *x == e)
            .unwrap_or_else(|| panic!("{e:?} not told: {told:?}"))
    };
    assert!(
        at(Ev::ElectedComplete) < at(Ev::StopStart),
        "the stop was told before the election: {told:?}"
    );
    assert_eq!(told.last(), Some(&Ev::StopComplete), "{told:?}");
    assert!(!c.has_leadership());
    assert!(children(&zk, &root).is_empty());
}

// ---------------------------------------------------------------- sessions

/// A watcher through its own proxy (so that an expiry can be forced without a
/// reconnect racing it), with or without session renewal.
fn proxied(renew: bool) -> (FaultProxy, ZooKeeperWatcher) {
    init_log();
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_identifier("recipes-session-test")
        .with_session_timeout(Duration::from_secs(4))
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .with_session_renewal(renew)
        .with_abortable(Arc::new(zklock::LoggingAbortable::new()))
        .connect()
        .expect("connect");
    (proxy, zkw)
}

/// Expires `zkw`'s session (through `proxy`) the way
/// [`common::force_expiry`] does, from a step hook: that one waits for the
/// client to learn the expiry, which a hook on the event thread would hold
/// up. This one makes sure instead, on the server, that the session is gone
/// before `zkw` may reconnect (`close` is bounded and says nothing about
/// whether the server applied the closeSession; an expiry not made would
/// leave the session alive and the test's waits running on).
fn force_expiry_from_a_hook(proxy: &FaultProxy, zkw: &ZooKeeperWatcher) {
    proxy.stall();
    let zk = zkw.zookeeper();
    let twin = || {
        ZooKeeper::connect_with_session(
            &shared_server().connect_string(),
            Duration::from_secs(4),
            |_e: WatchedEvent| {},
            zk.session_id(),
            &zk.session_password(),
        )
    };
    let mut gone = false;
    for _ in 0..10 {
        match twin() {
            Err(e) if e.is(ZkError::SessionExpired) => {
                gone = true;
                break;
            }
            Ok(twin) => twin.close().unwrap(),
            Err(e) => panic!("expiring {:#x}: {e}", zk.session_id()),
        }
    }
    assert!(gone, "could not expire session {:#x}", zk.session_id());
    proxy.reset();
}

/// [`common::force_expiry`] on the shared server.
fn force_expiry(proxy: &FaultProxy, zkw: &ZooKeeperWatcher) {
    common::force_expiry(proxy, &shared_server().connect_string(), zkw);
}

/// Waits until `mine` is connected in a session other than `old` (renewal).
fn renewed(zkw: &ZooKeeperWatcher, old: i64) {
    assert!(
        eventually(Duration::from_secs(20), || {
            let id = zkw.zookeeper().session_id();
            id != 0 && id != old && zkw.state() == zklock::client::State::Connected
        }),
        "no renewed session"
    );
}

/// Expires `zkw`'s session (through `proxy`) the first time it is called:
/// for a step hook.
fn expire_once(proxy: FaultProxy, zkw: &ZooKeeperWatcher) -> impl Fn() + Send + Sync + 'static {
    let done = AtomicBool::new(false);
    let zkw = zkw.clone();
    move || {
        if !done.swap(true, Ordering::SeqCst) {
            force_expiry_from_a_hook(&proxy, &zkw);
        }
    }
}

fn assert_session_expired<T: std::fmt::Debug>(r: &zklock::Result<T>) {
    assert!(
        matches!(r, Err(e) if e.is(ZkError::SessionExpired)),
        "{r:?}"
    );
}

fn write_lock_waiter_across_an_expiry(renew: bool) {
    let (proxy, mine) = proxied(renew);
    let dir = unique_root("wl-session");
    let other = zkw();
    let owner = WriteLock::new(&other, &dir, Acl::open_unsafe()).unwrap();
    assert!(owner.lock().unwrap());
    let waiter = Arc::new(WriteLock::new(&mine, &dir, Acl::open_unsafe()).unwrap());
    let w = waiter.clone();
    let h = thread::spawn(move || w.lock_blocking(Duration::from_secs(60)));
    let zk = raw();
    assert!(eventually(Duration::from_secs(5), || children(&zk, &dir)
        .len()
        == 2));
    let old = mine.zookeeper().session_id();
    force_expiry(&proxy, &mine);
    assert_session_expired(&h.join().unwrap());
    if renew {
        renewed(&mine, old);
    }
    // The owner leaves: the expired waiter must not take the lock in the new
    // session (it has no node there).
    owner.unlock().unwrap();
    thread::sleep(Duration::from_millis(300));
    assert!(!waiter.is_owner());
    assert!(children(&zk, &dir).is_empty(), "{:?}", children(&zk, &dir));
    if renew {
        // A fresh attempt is a new one, in the new session.
        assert!(waiter.lock().unwrap());
        assert!(waiter.is_owner());
        waiter.unlock().unwrap();
    }
}

#[test]
fn write_lock_waiter_ends_with_session_expired_at_an_expiry() {
    write_lock_waiter_across_an_expiry(false);
}

#[test]
fn write_lock_waiter_ends_with_session_expired_at_an_expiry_with_renewal() {
    write_lock_waiter_across_an_expiry(true);
}

/// A WriteLock whose session ends during its first round (forced from the
/// step hook) returns `SessionExpired` from `lock`, and keeps returning it
/// until `unlock`, also with renewal.
fn write_lock_round_across_an_expiry(renew: bool) {
    let (proxy, mine) = proxied(renew);
    let dir = unique_root("wl-round-session");
    let other = zkw();
    let owner = WriteLock::new(&other, &dir, Acl::open_unsafe()).unwrap();
    assert!(owner.lock().unwrap());
    let expire = expire_once(proxy, &mine);
    let waiter = WriteLock::new(&mine, &dir, Acl::open_unsafe())
        .unwrap()
        .with_step_hook(move |step, _path| {
            if step == WriteLockStep::Watching {
                expire();
            }
        });
    assert_session_expired(&waiter.lock());
    // Until unlock, the instance stays failed (never goes on elsewhere).
    assert_session_expired(&waiter.lock());
    owner.unlock().unwrap();
}

#[test]
fn write_lock_round_cut_by_an_expiry_returns_session_expired() {
    write_lock_round_across_an_expiry(false);
}

#[test]
fn write_lock_round_cut_by_an_expiry_returns_session_expired_with_renewal() {
    write_lock_round_across_an_expiry(true);
}

/// A candidate whose session ends while it determines its place (forced from
/// the step hook) gets `SessionExpired` from `start` (not `NoNode`), is told
/// `Failed`, and never goes on in a renewed session.
fn election_start_across_an_expiry(renew: bool) {
    let (proxy, mine) = proxied(renew);
    let root = unique_root("election-session");
    let other = zkw();
    let (leader, _) = candidate(&other, &root, "leader");
    leader.start().unwrap();
    let old = mine.zookeeper().session_id();
    let expire = expire_once(proxy, &mine);
    let c = LeaderElectionSupport::new(&mine, &root, "expiring")
        .unwrap()
        .with_step_hook(move |step, _path| {
            if step == ElectionStep::Watching {
                expire();
            }
        });
    let events: Events = Arc::default();
    let ev = events.clone();
    c.add_listener(move |x: Ev| ev.lock().unwrap().push(x));
    assert_session_expired(&c.start());
    if renew {
        renewed(&mine, old);
    }
    // The leader leaves: the failed candidate is not elected in the new session.
    leader.stop().unwrap();
    thread::sleep(Duration::from_millis(300));
    assert!(!c.has_leadership());
    assert_eq!(c.state(), zklock::recipes::election::ElectionState::Failed);
    let told = events.lock().unwrap().clone();
    assert_eq!(told.last(), Some(&Ev::Failed), "{told:?}");
    assert_eq!(told.iter().filter(|e| **e == Ev::Failed).count(), 1);
    assert!(!told.contains(&Ev::ElectedStart), "{told:?}");
    let zk = raw();
    assert!(
        children(&zk, &root).is_empty(),
        "{:?}",
        children(&zk, &root)
    );
    c.stop().unwrap();
}

#[test]
fn election_start_cut_by_an_expiry_returns_session_expired() {
    election_start_across_an_expiry(false);
}

#[test]
fn election_start_cut_by_an_expiry_returns_session_expired_with_renewal() {
    election_start_across_an_expiry(true);
}

/// An elected leader whose session expires is told LeadershipLost then
/// Failed, and with renewal is not leader again in the new session.
fn election_leader_across_an_expiry(renew: bool) {
    let (proxy, mine) = proxied(renew);
    let root = unique_root("election-leader-session");
    let (c, events) = candidate(&mine, &root, "leader");
    c.start().unwrap();
    assert!(c.has_leadership());
    let old = mine.zookeeper().session_id();
    force_expiry(&proxy, &mine);
    assert!(eventually(Duration::from_secs(20), || events
        .lock()
        .unwrap()
        .contains(&Ev::Failed)));
    if renew {
        renewed(&mine, old);
        thread::sleep(Duration::from_millis(300));
    }
    assert!(!c.has_leadership());
    let told = events.lock().unwrap().clone();
    let tail: Vec<Ev> = told
        .iter()
        .copied()
        .skip_while(|e| *e != Ev::LeadershipLost)
        .collect();
    assert_eq!(tail, [Ev::LeadershipLost, Ev::Failed], "{told:?}");
    let zk = raw();
    assert!(children(&zk, &root).is_empty());
    c.stop().unwrap();
    if renew {
        // stop then start: a new candidate, in the new session.
        c.start().unwrap();
        assert!(c.has_leadership());
        c.stop().unwrap();
    }
}

#[test]
fn election_leader_expiry_is_lost_then_failed() {
    election_leader_across_an_expiry(false);
}

#[test]
fn election_leader_expiry_is_lost_then_failed_with_renewal() {
    election_leader_across_an_expiry(true);
}

// ---------------------------------------------------------------- Java's event order

/// Upstream's `testReadyOffer`: the offer ahead goes away while the candidate
/// determines its place (forced from the step hook). Java tells READY_START
/// only once `exists()` found the offer ahead: the candidate is elected
/// without a spurious ReadyStart.
#[test]
fn election_ready_start_only_after_the_offer_ahead_is_found() {
    let root = unique_root("election-ready-offer");
    let (a, b) = (zkw(), zkw());
    let (leader, _) = candidate(&a, &root, "leader");
    leader.start().unwrap();
    let leader = Arc::new(std::sync::Mutex::new(Some(leader)));
    let l = leader.clone();
    let c = LeaderElectionSupport::new(&b, &root, "next")
        .unwrap()
        .with_step_hook(move |step, _path| {
            // The leader stops between the listing and the watch.
            if step != ElectionStep::Watching {
                return;
            }
            if let Some(leader) = l.lock().unwrap().take() {
                leader.stop().unwrap();
            }
        });
    let events: Events = Arc::default();
    let ev = events.clone();
    c.add_listener(move |x: Ev| ev.lock().unwrap().push(x));
    c.start().unwrap();
    assert!(leader.lock().unwrap().is_none(), "the hook ran");
    assert!(c.has_leadership());
    assert_eq!(
        *events.lock().unwrap(),
        [
            Ev::Start,
            Ev::OfferStart,
            Ev::OfferComplete,
            Ev::DetermineStart,
            Ev::DetermineComplete,
            Ev::DetermineStart,
            Ev::DetermineComplete,
            Ev::ElectedStart,
            Ev::ElectedComplete
        ]
    );
    c.stop().unwrap();
}

/// A write to the offer a ready candidate watches spends that watch; zklock
/// sets it again, so the candidate is elected when that leader later stops
/// (Java's recipe never elects it). Likewise a write to the leader's own offer
/// keeps its deletion heard.
#[test]
fn election_data_change_on_the_watched_offer_keeps_the_watch() {
    let root = unique_root("election-data-change");
    let (a, b) = (zkw(), zkw());
    let (leader, lev) = candidate(&a, &root, "leader");
    leader.start().unwrap();
    let (next, nev) = candidate(&b, &root, "next");
    next.start().unwrap();
    assert_eq!(
        next.state(),
        zklock::recipes::election::ElectionState::Ready
    );
    let zk = raw();
    let offer = leader.offer_node().unwrap();
    zk.set_data(&offer, b"renamed", None).unwrap();
    thread::sleep(Duration::from_millis(200));
    leader.stop().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || next.has_leadership()),
        "{:?}",
        nev.lock().unwrap()
    );
    // The new leader's own offer: written, then deleted by someone else.
    let own = next.offer_node().unwrap();
    zk.set_data(&own, b"renamed", None).unwrap();
    thread::sleep(Duration::from_millis(200));
    zk.delete(&own, None).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || nev
            .lock()
            .unwrap()
            .contains(&Ev::LeadershipLost)),
        "{:?}",
        nev.lock().unwrap()
    );
    assert!(!next.has_leadership());
    assert!(!lev.lock().unwrap().contains(&Ev::Failed));
    next.stop().unwrap();
}

/// Candidates of one session: the leader's step-down removes its watch on its
/// offer (one notification per succession), which removes the session's
/// every data watch there, the successor's too; the successor sets it again
/// and is elected.
#[test]
fn election_candidates_of_one_session_succeed_each_other() {
    let root = unique_root("election-one-session");
    let a = zkw();
    let cands: Vec<_> = (0..4)
        .map(|i| {
            let (c, _) = candidate(&a, &root, &format!("c{i}"));
            c.start().unwrap();
            c
        })
        .collect();
    assert!(cands[0].has_leadership());
    for i in 0..cands.len() - 1 {
        cands[i].stop().unwrap();
        assert!(
            eventually(Duration::from_secs(10), || cands[i + 1].has_leadership()),
            "candidate {} not elected",
            i + 1
        );
        assert!(cands[i + 2..].iter().all(|c| !c.has_leadership()));
    }
    cands[3].stop().unwrap();
}

// ---------------------------------------------------------------- Curator's and kazoo's API

/// Curator's `getParticipants`/`getLeader`, kazoo's `contenders()`: every
/// candidate in offer order, the leader first; none on a missing root.
#[test]
fn election_participants_and_leader_like_curator() {
    use zklock::recipes::election::participants;
    let root = unique_root("election-participants");
    let (a, b) = (zkw(), zkw());
    assert!(participants(&a, &root).unwrap().is_empty());
    let (ca, _) = candidate(&a, &root, "alpha");
    ca.start().unwrap();
    let (cb, _) = candidate(&b, &root, "beta");
    cb.start().unwrap();
    let (cc, _) = candidate(&b, &root, "gamma");
    cc.start().unwrap();
    let all = cb.participants().unwrap();
    let ids: Vec<(&str, bool)> = all.iter().map(|p| (p.id.as_str(), p.is_leader)).collect();
    assert_eq!(ids, [("alpha", true), ("beta", false), ("gamma", false)]);
    assert_eq!(all[1].node, cb.offer_node().unwrap());
    assert_eq!(cc.leader().unwrap().unwrap().id, "alpha");
    ca.stop().unwrap();
    assert!(eventually(Duration::from_secs(10), || cb.has_leadership()));
    let ids: Vec<String> = participants(&a, &root)
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(ids, ["beta", "gamma"]);
    assert_eq!(ca.leader().unwrap().unwrap().id, "beta");
    cb.stop().unwrap();
    cc.stop().unwrap();
    assert!(ca.leader().unwrap().is_none());
}

/// Curator's `await(timeout)`: false when the time passes, true once elected
/// (woken by the election, not by a poll); `Closed` when not started or
/// stopped meanwhile.
#[test]
fn election_await_leadership_with_a_timeout() {
    let root = unique_root("election-await");
    let (a, b) = (zkw(), zkw());
    let (leader, _) = candidate(&a, &root, "leader");
    let r = leader.await_leadership(Duration::from_millis(10));
    assert!(matches!(r, Err(zklock::Error::Closed)), "{r:?}");
    leader.start().unwrap();
    assert!(leader.await_leadership(Duration::ZERO).unwrap());
    let (next, _) = candidate(&b, &root, "next");
    next.start().unwrap();
    let t = Instant::now();
    assert!(!next.await_leadership(Duration::from_millis(300)).unwrap());
    assert!(t.elapsed() >= Duration::from_millis(300));
    let next = Arc::new(next);
    let n = next.clone();
    let h = thread::spawn(move || n.await_leadership(Duration::from_secs(30)));
    thread::sleep(Duration::from_millis(100));
    leader.stop().unwrap();
    assert!(h.join().unwrap().unwrap());
    assert!(next.has_leadership());
    // Stopped by another thread while waiting: Closed.
    let (third, _) = candidate(&a, &root, "third");
    third.start().unwrap();
    let third = Arc::new(third);
    let t3 = third.clone();
    let h = thread::spawn(move || t3.await_leadership(Duration::from_secs(30)));
    thread::sleep(Duration::from_millis(100));
    third.stop().unwrap();
    let r = h.join().unwrap();
    assert!(matches!(r, Err(zklock::Error::Closed)), "{r:?}");
    next.stop().unwrap();
}

/// An `await_leadership` across an expiry ends with `SessionExpired`, also
/// with session renewal (the candidate never goes on in the new session).
#[test]
fn election_await_leadership_ends_with_session_expired() {
    for renew in [false, true] {
        let (proxy, mine) = proxied(renew);
        let root = unique_root("election-await-expiry");
        let other = zkw();
        let (leader, _) = candidate(&other, &root, "leader");
        leader.start().unwrap();
        let (c, _) = candidate(&mine, &root, "waiting");
        c.start().unwrap();
        let c = Arc::new(c);
        let w = c.clone();
        let h = thread::spawn(move || w.await_leadership(Duration::from_secs(60)));
        thread::sleep(Duration::from_millis(100));
        force_expiry(&proxy, &mine);
        assert_session_expired(&h.join().unwrap());
        leader.stop().unwrap();
        c.stop().unwrap();
    }
}

/// Holds the event thread of the watcher it listens to at the first
/// `Disconnected` until released: the session's end can then reach neither
/// the library's session hooks nor its per-watch watchers.
struct HoldEventThread {
    held: std::sync::Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
}

impl zklock::ZooKeeperListener for HoldEventThread {
    fn connection_event(&self, event: &WatchedEvent) {
        if event.keeper_state != zklock::client::KeeperState::Disconnected {
            return;
        }
        let first = self.held.lock().unwrap().take();
        if let Some((held, release)) = first {
            held.send(()).unwrap();
            let _ = release.recv_timeout(Duration::from_secs(60));
        }
    }
}

/// The asynchronous-round recipes' waits (election `await_leadership`,
/// WriteLock `lock_blocking`) are bound to their session by construction,
/// not by the event thread: with that thread held up since the disconnect
/// before the expiry (a user listener), the session hook and the watcher
/// that fail the attempt are told nothing, yet both waits end with
/// `SessionExpired` at the expiry, with and without renewal. (Before, those
/// waits were woken only from the event thread: a late or missed delivery of
/// the end left them running to their timeout, `Ok(false)`.)
#[test]
fn round_waits_end_with_their_session_while_the_event_thread_is_held() {
    for renew in [false, true] {
        let (proxy, mine) = proxied(renew);
        let root = unique_root("held-event-thread");
        let (election, dir) = (format!("{root}/election"), format!("{root}/lock"));
        let other = zkw();
        let (leader, _) = candidate(&other, &election, "leader");
        leader.start().unwrap();
        let owner = WriteLock::new(&other, &dir, Acl::open_unsafe()).unwrap();
        assert!(owner.lock().unwrap());
        let (c, _) = candidate(&mine, &election, "waiting");
        c.start().unwrap();
        let waiter = WriteLock::new(&mine, &dir, Acl::open_unsafe()).unwrap();
        assert!(!waiter.lock().unwrap());
        let (held_tx, held) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let _registration = mine.listen(Arc::new(HoldEventThread {
            held: std::sync::Mutex::new(Some((held_tx, release_rx))),
        }));
        let (c, waiter) = (Arc::new(c), Arc::new(waiter));
        let (c2, w2) = (c.clone(), waiter.clone());
        let awaiting = thread::spawn(move || c2.await_leadership(Duration::from_secs(30)));
        let locking = thread::spawn(move || w2.lock_blocking(Duration::from_secs(30)));
        force_expiry(&proxy, &mine);
        held.recv_timeout(Duration::from_secs(30))
            .expect("the event thread is held at the disconnect");
        assert_session_expired(&awaiting.join().unwrap());
        assert_session_expired(&locking.join().unwrap());
        // Told on the waiting thread (the event thread is still held).
        assert_eq!(c.state(), zklock::recipes::election::ElectionState::Failed);
        release.send(()).unwrap();
        if renew {
            renewed(&mine, 0);
        }
        c.stop().unwrap();
        waiter.unlock().unwrap();
        leader.stop().unwrap();
        owner.unlock().unwrap();
        let zk = raw();
        assert!(eventually(Duration::from_secs(10), || children(
            &zk, &election
        )
        .is_empty()
            && children(&zk, &dir).is_empty()));
    }
}

// ---------------------------------------------------------------- issue 32: leadership holes

/// Two candidates of one session (one watcher per process, HBase's model): A
/// leads; B's offer create is applied but its reply lost. B's retry must find
/// its own offer, not A's (before: "the first `n_` child of this session",
/// A's, so both were elected); after both stop, no offer is left.
#[test]
fn election_lost_offer_create_never_adopts_a_sibling_s_offer() {
    use zklock::client::ReplyKind;
    let root = unique_root("election-lost-create");
    let session = zkw();
    let (a, _) = candidate(&session, &root, "a");
    a.start().unwrap();
    assert!(a.has_leadership());
    let (b, b_events) = candidate(&session, &root, "b");
    session.zookeeper().lose_next_reply(ReplyKind::Create);
    b.start().unwrap();
    // The lost reply cost the connection: `a` is in doubt until its restore
    // check (sync, list) is answered, which may come after `b.start()`.
    assert!(!b.has_leadership(), "both candidates elected: {b_events:?}");
    assert!(eventually(Duration::from_secs(20), || a.has_leadership()));
    assert!(!b.has_leadership(), "both candidates elected: {b_events:?}");
    assert_ne!(a.offer_node(), b.offer_node());
    let zk = raw();
    assert_eq!(children(&zk, &root).len(), 2, "B's own offer is in use");
    a.stop().unwrap();
    assert!(b.await_leadership(Duration::from_secs(20)).unwrap());
    b.stop().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || children(&zk, &root).is_empty()),
        "orphan offer: {:?}",
        children(&zk, &root)
    );
}

/// A watcher through `proxy` with a session timeout of `timeout`.
fn through(proxy: &FaultProxy, timeout: Duration) -> ZooKeeperWatcher {
    watcher(&proxy.connect_string(), timeout)
}

/// A leader cut off (its connection dropped, told `LeadershipInDoubt`) whose
/// offer is deleted meanwhile, then reconnected within its session: it must
/// not be told `LeadershipRestored` (before: it was, without a check, while
/// the other candidate led), and two candidates never lead at once.
#[test]
fn election_reconnect_with_the_offer_deleted_is_never_restored() {
    init_log();
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let mine = through(&proxy, Duration::from_secs(9));
    let other = zkw();
    let root = unique_root("election-restore-check");
    let (a, a_events) = candidate(&mine, &root, "a");
    a.start().unwrap();
    assert!(a.has_leadership());
    let b = Arc::new(candidate(&other, &root, "b").0);
    b.start().unwrap();
    // Two leaders at one moment: A told it leads (again) while B leads.
    let two = Arc::new(AtomicUsize::new(0));
    let (b2, t2) = (b.clone(), two.clone());
    a.add_listener(move |ev: Ev| {
        if matches!(ev, Ev::LeadershipRestored | Ev::ElectedComplete) && b2.has_leadership() {
            t2.fetch_add(1, Ordering::SeqCst);
        }
    });
    let session = mine.zookeeper().session_id();
    let offer = a.offer_node().unwrap();
    proxy.stall();
    assert!(
        eventually(Duration::from_secs(20), || a_events
            .lock()
            .unwrap()
            .contains(&Ev::LeadershipInDoubt)),
        "{a_events:?}"
    );
    assert!(!a.has_leadership());
    raw().delete(&offer, None).unwrap();
    assert!(b.await_leadership(Duration::from_secs(20)).unwrap());
    proxy.pass();
    assert!(
        eventually(Duration::from_secs(20), || a_events
            .lock()
            .unwrap()
            .contains(&Ev::Failed)),
        "{a_events:?}"
    );
    assert_eq!(
        mine.zookeeper().session_id(),
        session,
        "reconnected within the session"
    );
    let events = a_events.lock().unwrap().clone();
    assert!(!events.contains(&Ev::LeadershipRestored), "{events:?}");
    assert_eq!(
        events[events.len() - 3..],
        [Ev::LeadershipInDoubt, Ev::LeadershipLost, Ev::Failed]
    );
    assert!(!a.has_leadership());
    assert!(b.has_leadership());
    assert_eq!(two.load(Ordering::SeqCst), 0, "two leaders at once");
    a.stop().unwrap();
    b.stop().unwrap();
}

/// Waits until every asynchronous request `zkw` sent so far, and the ones
/// their callbacks sent, is applied: an async probe (its callback runs after
/// theirs, on the event thread) then a blocking call.
fn flush(zkw: &ZooKeeperWatcher, path: &str) {
    let (tx, rx) = mpsc::channel();
    zkw.zookeeper().exists_async(path, None, move |_| {
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("probe answered");
    zkw.zookeeper().exists(path, false).unwrap();
}

/// HBase's `ZKLeaderManager` keeps its claim until the answer to an `exists`
/// after the znode's deletion says it is gone. With that answer lost the old
/// leader kept `has_leadership()` while another manager held the znode, and
/// dropping it deleted the new leader's znode (a blind delete at version 0).
#[test]
fn leader_manager_lost_exists_answer_never_keeps_a_dead_claim() {
    use zklock::client::ReplyKind;
    use zklock::recipes::leader_manager::ZkLeaderManager;
    let znode = format!("{}/leader", unique_root("leader-manager-lost-exists"));
    let (wa, wb) = (zkw(), zkw());
    let a = ZkLeaderManager::new(&wa, &znode, "a");
    let a_events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let e = a_events.clone();
    a.add_listener(move |ev| e.lock().unwrap().push(ev));
    let b = Arc::new(ZkLeaderManager::new(&wb, &znode, "b"));
    a.start().unwrap();
    assert!(a.wait_to_become_leader().unwrap());
    let b2 = b.clone();
    let (tx, rx) = mpsc::channel();
    let waiting = thread::spawn(move || tx.send(b2.wait_to_become_leader().unwrap()));
    assert!(eventually(Duration::from_secs(10), || b.has_leader()));
    wa.zookeeper().lose_next_reply(ReplyKind::Exists);
    let zk = raw();
    zk.delete(&znode, None).unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(20)).unwrap(), "b leads");
    waiting.join().unwrap().unwrap();
    assert!(
        eventually(Duration::from_secs(20), || !a.has_leadership()),
        "a kept a claim whose znode is gone while b leads"
    );
    assert!(b.has_leadership());
    use zklock::recipes::LeadershipEvent;
    assert!(
        eventually(Duration::from_secs(10), || a_events.lock().unwrap().len()
            >= 2),
        "{a_events:?}"
    );
    assert_eq!(
        *a_events.lock().unwrap(),
        [LeadershipEvent::InDoubt, LeadershipEvent::Lost]
    );
    drop(a);
    flush(&wa, &znode);
    assert_leader_znode_of(&zk, &znode, &wb);
    b.stop().unwrap();
    assert_eq!(zk.exists(&znode, false).unwrap(), None);
}

/// The leader znode is still `owner`'s, the new leader's, after the stale
/// manager was dropped.
fn assert_leader_znode_of(zk: &ZooKeeper, znode: &str, owner: &ZooKeeperWatcher) {
    let stat = zk.exists(znode, false).unwrap();
    assert_eq!(
        stat.map(|s| s.ephemeral_owner),
        Some(owner.zookeeper().session_id()),
        "dropping the stale manager deleted the new leader's znode"
    );
}

/// A waiting manager whose re-check after a data change of the leader znode
/// is lost (the `exists` that sets the watch again) is still woken when the
/// leader steps down (before: no watch was left; it waited for ever).
#[test]
fn leader_manager_waiter_is_woken_after_a_lost_exists_answer() {
    use zklock::client::ReplyKind;
    use zklock::recipes::leader_manager::ZkLeaderManager;
    let znode = format!("{}/leader", unique_root("leader-manager-lost-watch"));
    let (wa, wb) = (zkw(), zkw());
    let a = ZkLeaderManager::new(&wa, &znode, "a");
    let b = Arc::new(ZkLeaderManager::new(&wb, &znode, "b"));
    a.start().unwrap();
    assert!(a.wait_to_become_leader().unwrap());
    let b2 = b.clone();
    let (tx, rx) = mpsc::channel();
    let _waiting = thread::spawn(move || tx.send(b2.wait_to_become_leader()));
    assert!(eventually(Duration::from_secs(10), || b.has_leader()));
    wb.zookeeper().lose_next_reply(ReplyKind::Exists);
    // A data change spends b's watch; its exists (to watch again) is lost.
    let zk = raw();
    let (data, stat) = zk.get_data(&znode, false).unwrap();
    zk.set_data(&znode, &data, Some(stat.version)).unwrap();
    flush(&wb, &znode);
    a.step_down_as_leader().unwrap();
    let led = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the waiting manager was never woken");
    assert!(led.unwrap());
    assert!(b.has_leadership());
    b.stop().unwrap();
}

/// A dropped manager whose znode was deleted and claimed by another manager
/// (and the answer that would have told it lost) never deletes the new
/// leader's znode (before: `Drop` deleted at version 0 whatever znode was
/// there). No look at `has_leadership` before the drop: the drop comes as soon
/// as the other leads.
#[test]
fn leader_manager_drop_never_deletes_another_session_s_znode() {
    use zklock::client::ReplyKind;
    use zklock::recipes::leader_manager::ZkLeaderManager;
    let znode = format!("{}/leader", unique_root("leader-manager-drop"));
    let (wa, wb) = (zkw(), zkw());
    let a = ZkLeaderManager::new(&wa, &znode, "a");
    let b = ZkLeaderManager::new(&wb, &znode, "b");
    a.start().unwrap();
    assert!(a.wait_to_become_leader().unwrap());
    wa.zookeeper().lose_next_reply(ReplyKind::Exists);
    let zk = raw();
    zk.delete(&znode, None).unwrap();
    assert!(b.wait_to_become_leader().unwrap());
    drop(a);
    flush(&wa, &znode);
    assert_leader_znode_of(&zk, &znode, &wb);
    b.stop().unwrap();
}

/// A leading manager cut off within its session is in doubt (not leading)
/// at once, and leads again after the reconnect once its znode is found
/// still its own, as the other leadership recipes.
#[test]
fn leader_manager_cut_off_is_in_doubt_then_restored() {
    use zklock::recipes::leader_manager::ZkLeaderManager;
    init_log();
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let wa = through(&proxy, Duration::from_secs(9));
    let znode = format!("{}/leader", unique_root("leader-manager-doubt"));
    let a = ZkLeaderManager::new(&wa, &znode, "a");
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let e = events.clone();
    a.add_listener(move |ev| e.lock().unwrap().push(ev));
    a.start().unwrap();
    assert!(a.wait_to_become_leader().unwrap());
    assert!(!a.is_in_doubt());
    proxy.stall();
    assert!(eventually(Duration::from_secs(20), || a.is_in_doubt()));
    assert!(!a.has_leadership());
    proxy.pass();
    assert!(eventually(Duration::from_secs(20), || a.has_leadership()));
    assert!(!a.is_in_doubt());
    use zklock::recipes::LeadershipEvent;
    assert!(eventually(Duration::from_secs(10), || events
        .lock()
        .unwrap()
        .len()
        >= 2));
    assert_eq!(
        *events.lock().unwrap(),
        [LeadershipEvent::InDoubt, LeadershipEvent::Restored]
    );
    a.stop().unwrap();
    assert_eq!(raw().exists(&znode, false).unwrap(), None);
}

/// Curator's latch (protected names) on the one offer maker: two latches of
/// one session, the second's create reply lost: it finds its own node (after
/// a `sync`), never the first's; nothing is left after both close.
#[test]
fn latch_lost_create_reply_finds_its_own_node_among_its_session_s() {
    use zklock::client::ReplyKind;
    use zklock::recipes::leader_latch::LeaderLatch;
    let path = format!("{}/latch", unique_root("latch-lost-create"));
    let session = zkw();
    let a = LeaderLatch::new(&session, &path, "a").unwrap();
    a.start().unwrap();
    assert!(a.has_leadership());
    let b = LeaderLatch::new(&session, &path, "b").unwrap();
    session.zookeeper().lose_next_reply(ReplyKind::Create);
    b.start().unwrap();
    // The lost reply cost the connection: `a` is in doubt until its restore
    // check (sync, list) is answered, which may come after `b.start()`.
    assert!(!b.has_leadership());
    assert!(eventually(Duration::from_secs(20), || a.has_leadership()));
    assert!(!b.has_leadership());
    assert_ne!(a.our_path(), b.our_path());
    let zk = raw();
    assert_eq!(children(&zk, &path).len(), 2);
    a.close().unwrap();
    assert!(b.await_leadership(Duration::from_secs(20)).unwrap());
    b.close().unwrap();
    assert!(children(&zk, &path).is_empty());
}

/// HBase's leader manager on the one way to own a node: two managers of one
/// session (one watcher per process, HBase's model) with the same
/// identifier; A leads; B's create reply is lost (the server refused it:
/// A's znode is there). B's retry must not take A's znode for its own
/// (before: "same data, same session" was adopted, so both led, and B's
/// step-down deleted A's znode); after both stop, no znode is left.
#[test]
fn leader_manager_lost_create_reply_never_adopts_a_sibling_s_znode() {
    use zklock::client::ReplyKind;
    use zklock::recipes::leader_manager::ZkLeaderManager;
    let znode = format!("{}/leader", unique_root("leader-manager-lost-create"));
    let session = zkw();
    let a = ZkLeaderManager::new(&session, &znode, "server");
    a.start().unwrap();
    assert!(a.wait_to_become_leader().unwrap());
    let b = Arc::new(ZkLeaderManager::new(&session, &znode, "server"));
    session.zookeeper().lose_next_reply(ReplyKind::Create);
    let waiting = {
        let b = b.clone();
        thread::spawn(move || b.wait_to_become_leader())
    };
    // B has made up its mind once it sees a leader (the new code: A's znode,
    // then it waits) or its wait returns (the old code: adopted).
    assert!(eventually(Duration::from_secs(20), || b.has_leader()
        || waiting.is_finished()));
    assert!(!b.has_leadership(), "both managers lead");
    assert!(!waiting.is_finished(), "B's wait returned while A leads");
    // A reconnected after the lost reply: its claim is confirmed again.
    assert!(eventually(Duration::from_secs(20), || a.has_leadership()));
    let zk = raw();
    let before = zk.exists(&znode, false).unwrap().expect("A's znode");
    b.stop().unwrap();
    assert!(
        !waiting.join().unwrap().unwrap(),
        "a stopped wait is Ok(false)"
    );
    assert_eq!(
        zk.exists(&znode, false).unwrap().map(|s| s.czxid),
        Some(before.czxid),
        "B's stop left A's znode alone"
    );
    assert!(a.has_leadership());
    a.stop().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || zk
            .exists(&znode, false)
            .unwrap()
            .is_none()),
        "orphan leader znode"
    );
}

/// The other side of a lost create reply: the server applied the manager's
/// own create; the retry finds the znode by its mark and the manager leads
/// (no orphan, no wait behind its own znode).
#[test]
fn leader_manager_lost_create_reply_finds_its_own_znode() {
    use zklock::client::ReplyKind;
    use zklock::recipes::leader_manager::ZkLeaderManager;
    let znode = format!("{}/leader", unique_root("leader-manager-own-create"));
    let session = zkw();
    let a = ZkLeaderManager::new(&session, &znode, "server");
    a.start().unwrap();
    session.zookeeper().lose_next_reply(ReplyKind::Create);
    assert!(a.wait_to_become_leader().unwrap());
    assert!(a.has_leadership());
    let zk = raw();
    assert!(zk.exists(&znode, false).unwrap().is_some());
    a.stop().unwrap();
    assert_eq!(
        zk.exists(&znode, false).unwrap(),
        None,
        "orphan leader znode"
    );
}

/// A three-server ensemble whose quorum links are proxies, a session that
/// reaches it through one proxy (first to the leader), and a client on the
/// leader to look: the setting of the lost-create-on-a-lagging-follower
/// tests (issue 32).
struct Lagging {
    ensemble: zklock::testing::ZkEnsemble,
    leader: usize,
    lagging: usize,
    front: FaultProxy,
    session: ZooKeeperWatcher,
    observer: ZooKeeper,
}

impl Lagging {
    fn start() -> Lagging {
        init_log();
        let ensemble = zklock::testing::ZkEnsemble::start_with_quorum_links().expect("ensemble");
        let leader = ensemble.leader().expect("a leader");
        let lagging = (0..3).find(|&i| i != leader).unwrap();
        let front = FaultProxy::start(ensemble.address(leader)).unwrap();
        let session = through(&front, Duration::from_secs(20));
        let observer = ZooKeeper::connect(
            &ensemble.address(leader),
            Duration::from_secs(20),
            |_e: WatchedEvent| {},
        )
        .unwrap();
        Lagging {
            ensemble,
            leader,
            lagging,
            front,
            session,
            observer,
        }
    }

    /// Runs `start` (an offer's create) so that its create is proposed at
    /// the leader with both followers' votes held (not committed), then
    /// cuts the session's connection (the create's outcome is unknown) and
    /// brings it back on the lagging follower, which has the proposal but
    /// not its commit. The votes are released when that follower hands the
    /// leader the recovery's first request: its `sync` (which the leader
    /// answers once the pending proposal committed), or, without one, the
    /// second create sent after a listing that could not show the node.
    fn lose_create_while_lagging(&self, start: impl FnOnce() -> zklock::Result<()> + Send) {
        let lagging_link = self
            .ensemble
            .quorum_link(self.lagging, self.leader)
            .unwrap();
        let other = (0..3)
            .find(|&i| i != self.leader && i != self.lagging)
            .unwrap();
        let links = [
            lagging_link,
            self.ensemble.quorum_link(other, self.leader).unwrap(),
        ];
        for link in links {
            link.hold_acks().unwrap();
        }
        thread::scope(|s| {
            let started = s.spawn(start);
            // The create is proposed: both followers voted (votes held).
            let proposed = links.iter().all(|link| {
                link.wait_for_quorum_counts(Duration::from_secs(30), |c| c.held_acks >= 1)
            });
            let requests = lagging_link.quorum_counts().unwrap().requests;
            // The reply can no longer come; the session comes back on the follower.
            self.front
                .set_target(self.ensemble.address(self.lagging))
                .unwrap();
            self.front.cut();
            let recovering = lagging_link
                .wait_for_quorum_counts(Duration::from_secs(30), |c| c.requests > requests);
            for link in links {
                link.release_acks().unwrap();
            }
            assert!(proposed, "the offer create was never proposed");
            assert!(
                recovering,
                "the recovery sent no request through the follower"
            );
            started.join().unwrap().expect("started");
        });
    }
}

/// The lost-create recovery's `sync` on a lagging follower (issue 32), for
/// Curator's latch (protected names), as [`Lagging::lose_create_while_lagging`]
/// forces it. Before (no sync): a second node; the latch waits behind its
/// own orphan and nobody leads.
#[test]
fn latch_lost_create_on_a_lagging_follower_finds_its_node_after_a_sync() {
    use zklock::recipes::leader_latch::LeaderLatch;
    let lag = Lagging::start();
    let path = "/lagging-follower/latch";
    zklock::zkutil::create_with_parents(&lag.session, path).unwrap();
    let latch = LeaderLatch::new(&lag.session, path, "lagging").unwrap();
    lag.lose_create_while_lagging(|| latch.start());
    let led = latch.await_leadership(Duration::from_secs(10)).unwrap();
    let offers = children(&lag.observer, path);
    assert!(led, "the only latch does not lead; offers {offers:?}");
    assert_eq!(offers.len(), 1, "an orphan offer: {offers:?}");
    latch.close().unwrap();
    assert!(eventually(Duration::from_secs(10), || children(
        &lag.observer,
        path
    )
    .is_empty()));
}

/// The same for Java's election (`n_` names, found by session and zxid).
#[test]
fn election_lost_create_on_a_lagging_follower_finds_its_offer_after_a_sync() {
    let lag = Lagging::start();
    let root = "/lagging-follower/election";
    zklock::zkutil::create_with_parents(&lag.session, root).unwrap();
    let (candidate, events) = candidate(&lag.session, root, "lagging");
    lag.lose_create_while_lagging(|| candidate.start());
    let led = candidate.await_leadership(Duration::from_secs(10)).unwrap();
    let offers = children(&lag.observer, root);
    assert!(
        led,
        "the only candidate does not lead; offers {offers:?}, events {events:?}"
    );
    assert_eq!(offers.len(), 1, "an orphan offer: {offers:?}");
    candidate.stop().unwrap();
    assert!(eventually(Duration::from_secs(10), || children(
        &lag.observer,
        root
    )
    .is_empty()));
}

/// Entry points are atomic (issue 44): two threads waiting to lead on one
/// leader manager share one claim (its making lock: the second adopts the
/// znode the first made, by its mark); one znode, both waits `Ok(true)`.
#[test]
fn two_waits_of_one_leader_manager_share_one_claim() {
    use zklock::recipes::leader_manager::ZkLeaderManager;
    let znode = format!("{}/leader", unique_root("manager-two-waits"));
    let session = zkw();
    let m = Arc::new(ZkLeaderManager::new(&session, &znode, "one"));
    m.start().unwrap();
    let waits: Vec<_> = (0..2)
        .map(|_| {
            let m = m.clone();
            thread::spawn(move || m.wait_to_become_leader())
        })
        .collect();
    for w in waits {
        assert!(w.join().unwrap().unwrap());
    }
    assert!(m.has_leadership());
    let zk = raw();
    assert_eq!(
        children(&zk, zklock::zkutil::get_parent(&znode).unwrap()),
        ["leader"]
    );
    m.stop().unwrap();
    assert!(zk.exists(&znode, false).unwrap().is_none());
}

// ------------------------------------- pairs in one write (issue 49)

/// Whether some read `proxy` noted carried the requests `pair` (opcodes), one
/// right after the other.
fn read_together(proxy: &FaultProxy, pair: [i32; 2]) -> bool {
    proxy
        .request_reads()
        .iter()
        .any(|read| read.windows(2).any(|w| w == pair))
}

/// The reads `proxy` noted, each cut to the requests with `opcodes` (reads
/// left with none dropped): what this session's calls sent, whatever else
/// reaches the proxy (a client of an earlier test, still closing its
/// session at the address of a proxy since dropped, whose ephemeral port
/// this one was given: a closeSession once showed up here).
fn reads_of(proxy: &FaultProxy, opcodes: &[i32]) -> Vec<Vec<i32>> {
    proxy
        .request_reads()
        .into_iter()
        .map(|read| {
            read.into_iter()
                .filter(|op| opcodes.contains(op))
                .collect::<Vec<_>>()
        })
        .filter(|read| !read.is_empty())
        .collect()
}

/// `ZooKeeper::in_one_write`: asynchronous requests made inside it leave
/// together, in one write, in the order made, even with time between them
/// (each write of the session is followed by a pause, so two writes would
/// reach the proxy in two reads); and a blocking call inside it takes the
/// held ones along in its own write.
#[test]
fn in_one_write_sends_the_requests_made_inside_in_one_write() {
    let root = unique_root("one-write");
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let w = through(&proxy, Duration::from_secs(10));
    let zk = w.zookeeper();
    zklock::zkutil::create_with_parents(&w, &root).unwrap();
    zk.pause_after_writes(Duration::from_millis(50));
    proxy.record_reads();
    let (tx, rx) = mpsc::channel();
    let (tx2, tx3) = (tx.clone(), tx.clone());
    let listed = zk.in_one_write(|| {
        zk.get_children_async(&root, None, move |r| tx.send(("list", r.is_ok())).unwrap());
        thread::sleep(Duration::from_millis(100));
        zk.exists_async(&root, None, move |r| {
            tx2.send(("exists", r.is_ok())).unwrap()
        });
        // Nothing left yet: held until the closure returns.
        assert!(
            reads_of(&proxy, &[8, 3]).is_empty(),
            "{:?}",
            proxy.request_reads()
        );
        "done"
    });
    assert_eq!(listed, "done");
    let answers: Vec<_> = (0..2)
        .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    assert_eq!(
        answers,
        [("list", true), ("exists", true)],
        "answered in order"
    );
    assert_eq!(
        reads_of(&proxy, &[8, 3]),
        [vec![8, 3]],
        "one read, in order"
    );
    // A blocking call inside takes the held request along.
    proxy.record_reads();
    zk.in_one_write(|| {
        zk.exists_async(&root, None, move |r| {
            tx3.send(("exists", r.is_ok())).unwrap()
        });
        zk.get_children(&root, false).unwrap()
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        ("exists", true)
    );
    assert_eq!(
        reads_of(&proxy, &[8, 3]),
        [vec![3, 8]],
        "one read, in order"
    );
    zk.pause_after_writes(Duration::ZERO);
    zk.delete(&root, None).unwrap();
}

/// The pairs the election engine sends together leave in one write, so each
/// costs one round trip however loaded the server: a candidate behind
/// another lists the directory and watches its own offer (getChildren 8 +
/// exists 3), and a leader stepping down removes its offer's watch and
/// deletes it (removeWatches 18 + delete 2). Each write of the candidate's
/// session is followed by a pause, so a pair sent as two writes would reach
/// the proxy in two reads.
#[test]
fn election_pairs_leave_in_one_write() {
    let root = unique_root("election-one-write");
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let (wa, wb) = (zkw(), through(&proxy, Duration::from_secs(10)));
    let (a, _) = candidate(&wa, &root, "a");
    let (b, _) = candidate(&wb, &root, "b");
    a.start().unwrap();
    wb.zookeeper().pause_after_writes(Duration::from_millis(50));
    proxy.record_reads();
    b.start().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || read_together(&proxy, [8, 3])),
        "the listing and the own offer's exists: {:?}",
        proxy.request_reads()
    );
    a.stop().unwrap();
    assert!(b.await_leadership(Duration::from_secs(20)).unwrap());
    proxy.record_reads();
    b.stop().unwrap();
    assert!(
        read_together(&proxy, [18, 2]),
        "the watch removal and the delete: {:?}",
        proxy.request_reads()
    );
    assert!(children(&raw(), &root).is_empty());
}
