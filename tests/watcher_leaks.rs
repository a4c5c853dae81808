//! No leaked threads, connections or listeners: `ZooKeeperWatcher`s opened and
//! closed (or dropped) against a real server (issue 4).
//!
//! Alone in its test binary, as one test, so that no other test's threads or
//! sessions move the counts: this process's threads (`/proc/self/task`) and the
//! server's client connections (`cons`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{Acl, CreateMode, WatchedEvent, ZooKeeper};
use zklock::testing::{four_letter, shared_server, unique_root, wait_until};
use zklock::{
    zkutil, Abortable, DeletionListener, Error, LoggingAbortable, WeakZooKeeperWatcher, ZkError,
    ZooKeeperListener, ZooKeeperNodeTracker, ZooKeeperWatcher,
};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

/// Asserts this process has `expected` threads. A thread that `join` has
/// returned for can stay listed in /proc/self/task for a moment until the
/// kernel reaps it, so the count gets a short bounded time to settle: a thread
/// that is really left behind still fails.
fn assert_threads(expected: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while threads() != expected && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(threads(), expected, "{what}");
}

/// The server's client connections with a session (`cons` lists one line per
/// connection, ours for `cons` itself included, which has no session).
fn sessions(server: &str) -> Vec<String> {
    four_letter(server, "cons")
        .expect("cons")
        .lines()
        .filter(|l| l.contains("sid=0x") && !l.contains("sid=0x0,") && !l.contains("sid=0x0)"))
        .map(str::to_owned)
        .collect()
}

struct Counting(AtomicUsize);

impl ZooKeeperListener for Counting {
    fn node_deleted(&self, _path: &str) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Abortable for Counting {
    fn abort(&self, _why: &str, _error: Option<&Error>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn open(server: &str, listener: &Arc<Counting>, abortable: &Arc<Counting>) -> ZooKeeperWatcher {
    let zkw = ZooKeeperWatcher::builder(server)
        .with_identifier("leaks")
        .with_session_timeout(Duration::from_secs(6))
        .with_abortable(Arc::clone(abortable) as Arc<dyn Abortable>)
        .connect()
        .expect("connect");
    zkw.register_listener(Arc::clone(listener) as Arc<dyn ZooKeeperListener>);
    zkw
}

#[test]
fn fifty_watchers_open_and_close_without_leaking_threads_connections_or_listeners() {
    let _ = env_logger::builder().is_test(true).try_init();
    let server = shared_server().connect_string();
    let listener = Arc::new(Counting(AtomicUsize::new(0)));
    let abortable = Arc::new(Counting(AtomicUsize::new(0)));
    // Warm up (lazy statics, the server's first session), then the baseline.
    open(&server, &listener, &abortable).close().unwrap();
    let base_threads = threads();
    wait_until(Duration::from_secs(10), "no session left", || {
        sessions(&server).is_empty()
    });
    let counts = |what: &str| {
        assert_threads(base_threads, &format!("{what}: threads"));
        assert_eq!(
            Arc::strong_count(&listener),
            1,
            "{what}: listener references"
        );
        assert_eq!(
            Arc::strong_count(&abortable),
            1,
            "{what}: watcher not freed"
        );
        wait_until(
            Duration::from_secs(10),
            "the server drops the sessions",
            || sessions(&server).is_empty(),
        );
    };

    // 30 one after another, closed.
    for _ in 0..30 {
        let zkw = open(&server, &listener, &abortable);
        assert_threads(base_threads + 2, "one connection + one event thread");
        zkw.close().unwrap();
        assert_eq!(zkw.number_of_listeners(), 0);
        assert_threads(base_threads, "close joins the client's threads");
    }
    counts("30 closed one by one");

    // 20 open at once, then closed: 20 sessions, 40 threads while open.
    let open_now: Vec<ZooKeeperWatcher> = (0..20)
        .map(|_| open(&server, &listener, &abortable))
        .collect();
    assert_threads(base_threads + 40, "20 sessions: 40 threads");
    assert_eq!(Arc::strong_count(&listener), 21);
    let ids: Vec<String> = open_now
        .iter()
        .map(|zkw| format!("sid=0x{:x}", zkw.zookeeper().session_id()))
        .collect();
    let listed = sessions(&server);
    assert_eq!(listed.len(), 20, "{listed:#?}");
    for id in &ids {
        assert!(listed.iter().any(|l| l.contains(&format!("{id},"))), "{id}");
    }
    for zkw in &open_now {
        zkw.close().unwrap();
    }
    drop(open_now);
    counts("20 closed together");

    // 10 only dropped: drop closes.
    for _ in 0..10 {
        let zkw = open(&server, &listener, &abortable);
        let clone = zkw.clone();
        drop(zkw);
        assert_threads(base_threads + 2, "a clone keeps the session");
        drop(clone);
        assert_threads(base_threads, "the last drop joins the threads");
    }
    counts("10 dropped");

    self_registered_listeners_do_not_keep_the_session_alive(
        &server,
        base_threads,
        &listener,
        &abortable,
    );
    counts("a session with self-registered listeners, dropped");

    // 5 that never connect (nothing listens on port 1).
    for _ in 0..5 {
        match ZooKeeperWatcher::builder("127.0.0.1:1")
            .with_session_timeout(Duration::from_secs(2))
            .with_connect_wait(Duration::from_millis(200))
            .with_abortable(Arc::clone(&abortable) as Arc<dyn Abortable>)
            .connect()
        {
            Err(e) if e.is(ZkError::ConnectionLoss) => {}
            other => panic!("expected ConnectionLoss, got {other:?}"),
        }
    }
    counts("5 failed connects");
    assert_eq!(abortable.0.load(Ordering::SeqCst), 0, "nobody aborted");
}

/// An HBase listener ported with a weak handle (HBase keeps `watcher`): it
/// reaches the session in its callbacks without keeping it alive.
struct Ported {
    watcher: WeakZooKeeperWatcher,
}

impl ZooKeeperListener for Ported {
    fn node_deleted(&self, path: &str) {
        if let Some(zkw) = self.watcher.upgrade() {
            let _ = zkutil::check_exists(&zkw, path);
        }
    }
}

/// Issue 9, item 5: a tracker, two deletion listeners (one self-contained, one
/// registered the HBase way) and user listeners holding weak handles (one
/// registered for good, one through `listen`) all on one session: when the
/// application drops its last `ZooKeeperWatcher`, the session ends anyway —
/// its two threads are joined, the server lists no session, its ephemeral node
/// is gone — and the library's waits end with `Closed`.
fn self_registered_listeners_do_not_keep_the_session_alive(
    server: &str,
    base_threads: usize,
    listener: &Arc<Counting>,
    abortable: &Arc<Counting>,
) {
    let zkw = open(server, listener, abortable);
    let root = unique_root("leaks-cycle");
    zkutil::create_with_parents(&zkw, &root).unwrap();
    let ephemeral = format!("{root}/ephemeral");
    zkw.recoverable_zookeeper()
        .create(&ephemeral, b"x", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    let tracker = ZooKeeperNodeTracker::new(&zkw, &ephemeral, Arc::new(LoggingAbortable::new()));
    tracker.start().unwrap();
    assert_eq!(tracker.get_data(false).as_deref(), Some(&b"x"[..]));
    let deletion = DeletionListener::new(&zkw, &ephemeral);
    assert!(deletion.set_watch_if_node_exists().unwrap());
    let hbase_style = Arc::new(DeletionListener::new(&zkw, &ephemeral));
    zkw.register_listener(hbase_style.clone());
    assert!(zkutil::set_watch_if_node_exists(&zkw, &ephemeral).unwrap());
    zkw.register_listener(Arc::new(Ported {
        watcher: zkw.downgrade(),
    }));
    let registration = zkw.listen(Arc::new(Ported {
        watcher: zkw.downgrade(),
    }));
    let weak = zkw.downgrade();
    let sid = format!("sid=0x{:x},", zkw.zookeeper().session_id());
    assert!(sessions(server).iter().any(|l| l.contains(&sid)));
    assert_threads(base_threads + 2, "one session");

    drop(zkw);
    assert_threads(base_threads, "the last user handle's drop ends the session");
    assert!(weak.upgrade().is_none());
    wait_until(
        Duration::from_secs(10),
        "the server drops the session",
        || sessions(server).is_empty(),
    );
    let r = tracker.block_until_available(Duration::from_secs(60), false);
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    assert!(deletion.await_deletion(Some(Duration::from_secs(10))));
    assert!(
        matches!(deletion.exception(), Some(Error::Closed)),
        "{deletion:?}"
    );
    assert!(hbase_style.await_deletion(Some(Duration::from_secs(10))));
    drop((tracker, deletion, registration));
    assert_eq!(Arc::strong_count(&hbase_style), 1, "the registry let it go");

    let check = ZooKeeper::connect(server, Duration::from_secs(6), |_e: WatchedEvent| {}).unwrap();
    assert_eq!(
        check.exists(&ephemeral, false).unwrap(),
        None,
        "the session's ephemeral node is gone"
    );
    check.delete(&root, None).unwrap();
    check.close().unwrap();
}
