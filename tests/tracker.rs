//! `ZooKeeperNodeTracker` and `DeletionListener` against a real ZooKeeper
//! server, with a raw second session playing "another process".

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use zklock::client::KeeperState;
use zklock::client::{Acl, CreateMode, EventType, Op, WatchedEvent, ZooKeeper};
use zklock::testing::{shared_server, test_servers, unique_root, FaultProxy};
use zklock::{
    zkutil, Abortable, DeletionListener, Error, LoggingAbortable, WeakZooKeeperWatcher, ZkError,
    ZooKeeperListener, ZooKeeperNodeTracker, ZooKeeperWatcher,
};

type TestResult = Result<(), Error>;

const WAIT: Duration = Duration::from_secs(10);

fn watcher() -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(&test_servers())
        .with_session_timeout(Duration::from_secs(4))
        .connect()
        .expect("connect a ZooKeeperWatcher")
}

fn raw() -> ZooKeeper {
    ZooKeeper::connect(
        &test_servers(),
        Duration::from_secs(4),
        |_e: WatchedEvent| {},
    )
    .expect("connect a raw session")
}

fn setup(name: &str) -> (ZooKeeperWatcher, String) {
    let zkw = watcher();
    let root = unique_root(name);
    zkutil::create_with_parents(&zkw, &root).expect("create the test root");
    (zkw, root)
}

fn logging() -> Arc<dyn Abortable> {
    Arc::new(LoggingAbortable::new())
}

/// Polls `f` (every 10 ms, at most `WAIT`) until it holds.
#[track_caller]
fn eventually(what: &str, f: impl FnMut() -> bool) {
    zklock::testing::wait_until(WAIT, what, f);
}

/// Records node events. Registered *after* a tracker or deletion listener, it
/// sees each event after that listener handled it (dispatch is in registration
/// order on the one event thread): a sync point without sleeps.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<(EventType, String)>>,
    cv: Condvar,
}

impl Recorder {
    fn push(&self, t: EventType, path: &str) {
        self.events.lock().push((t, path.to_string()));
        self.cv.notify_all();
    }

    fn count(&self, t: EventType, path: &str) -> usize {
        self.events
            .lock()
            .iter()
            .filter(|(k, p)| *k == t && p == path)
            .count()
    }

    /// Waits (bounded) until `n` events `t` on `path` were recorded.
    fn wait_for(&self, t: EventType, path: &str, n: usize) -> bool {
        let deadline = Instant::now() + WAIT;
        let mut events = self.events.lock();
        loop {
            if events.iter().filter(|(k, p)| *k == t && p == path).count() >= n {
                return true;
            }
            if self.cv.wait_until(&mut events, deadline).timed_out() {
                return false;
            }
        }
    }
}

impl ZooKeeperListener for Recorder {
    fn node_created(&self, path: &str) {
        self.push(EventType::NodeCreated, path);
    }
    fn node_deleted(&self, path: &str) {
        self.push(EventType::NodeDeleted, path);
    }
    fn node_data_changed(&self, path: &str) {
        self.push(EventType::NodeDataChanged, path);
    }
}

/// Waits until `zkw`'s event thread has run the callbacks of every request
/// sent before, `rounds` times over: a chain of asynchronous steps (a
/// tracker's `getData` → `NoNode` → `exists`) needs one round per step.
fn drain_event_thread(zkw: &ZooKeeperWatcher, rounds: usize) {
    for _ in 0..rounds {
        let (tx, rx) = std::sync::mpsc::channel();
        zkw.zookeeper().exists_async("/", None, move |_| {
            let _ = tx.send(());
        });
        rx.recv_timeout(WAIT).expect("the event thread answers");
    }
}

/// A user listener for `zkw`'s default watcher. The trackers and deletion
/// listeners watch with watchers of their own: to see an event on the same
/// path, set a default watch too (after theirs, so the client calls theirs
/// first).
fn recorder(zkw: &ZooKeeperWatcher) -> Arc<Recorder> {
    let r = Arc::new(Recorder::default());
    zkw.register_listener(r.clone());
    r
}

/// Counts `abort` calls and keeps the last error.
#[derive(Default)]
struct CountingAbortable {
    calls: AtomicUsize,
    last: Mutex<Option<Error>>,
}

impl Abortable for CountingAbortable {
    fn abort(&self, _why: &str, error: Option<&Error>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        *self.last.lock() = error.cloned();
    }
    fn is_aborted(&self) -> bool {
        self.calls.load(Ordering::SeqCst) > 0
    }
}

// ---------------------------------------------------------------------------
// ZooKeeperNodeTracker
// ---------------------------------------------------------------------------

#[test]
fn trackers_follow_a_node_another_session_creates_changes_and_deletes() -> TestResult {
    let (zkw1, root) = setup("tracker-follow");
    let zkw2 = watcher();
    let node = format!("{root}/master");
    let trackers = [
        Arc::new(ZooKeeperNodeTracker::new(&zkw1, &node, logging())),
        Arc::new(ZooKeeperNodeTracker::new(&zkw1, &node, logging())),
        Arc::new(ZooKeeperNodeTracker::new(&zkw2, &node, logging())),
    ];
    for t in &trackers {
        t.start()?;
        assert_eq!(t.get_node(), node);
        assert_eq!(t.get_data(false), None, "started before the node exists");
        assert_eq!(t.block_until_available(Duration::ZERO, false)?, None);
    }
    // Threads blocked until the node appears.
    let waiters: Vec<_> = trackers
        .iter()
        .map(|t| {
            let t = t.clone();
            thread::spawn(move || t.block_until_available(Duration::from_secs(60), false))
        })
        .collect();
    let timed = trackers[0].block_until_available(Duration::from_millis(50), false)?;
    assert_eq!(timed, None, "a bounded wait on a missing node times out");

    let other = raw();
    let all_see = |want: Option<&[u8]>| {
        eventually(&format!("every tracker sees {want:?}"), || {
            trackers
                .iter()
                .all(|t| t.get_data(false).as_deref() == want)
        })
    };
    other.create(&node, b"v1", Acl::open_unsafe(), CreateMode::Persistent)?;
    for w in waiters {
        assert_eq!(w.join().unwrap()?.as_deref(), Some(&b"v1"[..]));
    }
    all_see(Some(b"v1"));
    other.set_data(&node, b"v2", None)?;
    all_see(Some(b"v2"));
    other.delete(&node, None)?;
    all_see(None);
    other.create(&node, b"v3", Acl::open_unsafe(), CreateMode::Persistent)?;
    all_see(Some(b"v3"));
    other.set_data(&node, b"", None)?;
    all_see(Some(b""));
    for t in &trackers {
        assert_eq!(t.get_data(true).as_deref(), Some(&b""[..]));
        assert_eq!(
            t.block_until_available(Duration::ZERO, true)?.as_deref(),
            Some(&b""[..])
        );
    }

    for t in &trackers {
        t.stop();
    }
    zkutil::delete_node_recursively(&zkw1, &root)?;
    other.close()?;
    zkw2.close()?;
    zkw1.close()
}

/// HBase: "a delete re-sets the watch and notices a re-create". Deleting and
/// re-creating in one transaction fires only NodeDeleted at the tracker; only
/// its re-check finds the new node.
#[test]
fn a_delete_notices_a_re_create_in_the_same_transaction() -> TestResult {
    let (zkw, root) = setup("tracker-recreate");
    let node = format!("{root}/n");
    let other = raw();
    other.create(&node, b"old", Acl::open_unsafe(), CreateMode::Persistent)?;
    let t = ZooKeeperNodeTracker::new(&zkw, &node, logging());
    t.start()?;
    assert_eq!(t.get_data(false).as_deref(), Some(&b"old"[..]));
    let rec = recorder(&zkw);
    assert!(zkutil::watch_and_check_exists(&zkw, &node)?);
    other.multi(&[
        Op::delete(node.as_str(), None),
        Op::create(node.as_str(), b"new".to_vec(), CreateMode::Persistent),
    ])?;
    assert!(rec.wait_for(EventType::NodeDeleted, &node, 1));
    // The tracker's exists → getData chain, answered on the event thread.
    drain_event_thread(&zkw, 3);
    assert_eq!(
        t.get_data(false).as_deref(),
        Some(&b"new"[..]),
        "the tracker's re-check after NodeDeleted found the new node"
    );
    assert_eq!(
        rec.count(EventType::NodeCreated, &node),
        0,
        "no creation event came"
    );
    t.stop();
    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}

/// HBase: "a create that finds the node gone handles it as a delete" — which
/// re-sets the exists watch, so a later creation is still seen.
#[test]
fn a_create_that_finds_the_node_gone_keeps_watching() -> TestResult {
    let (zkw, root) = setup("tracker-flash");
    let node = format!("{root}/n");
    let other = raw();
    let t = ZooKeeperNodeTracker::new(&zkw, &node, logging());
    t.start()?;
    let rec = recorder(&zkw);
    assert!(!zkutil::watch_and_check_exists(&zkw, &node)?);
    other.multi(&[
        Op::create(node.as_str(), b"flash".to_vec(), CreateMode::Persistent),
        Op::delete(node.as_str(), None),
    ])?;
    assert!(rec.wait_for(EventType::NodeCreated, &node, 1));
    // getData → NoNode → exists (which re-sets the exists watch) → None.
    drain_event_thread(&zkw, 3);
    assert_eq!(t.get_data(false), None);
    other.create(&node, b"later", Acl::open_unsafe(), CreateMode::Persistent)?;
    eventually(
        "the tracker left an exists watch: it sees the creation",
        || t.get_data(false).as_deref() == Some(&b"later"[..]),
    );
    t.stop();
    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}

#[test]
fn stop_wakes_a_blocked_thread() -> TestResult {
    let (zkw, root) = setup("tracker-stop");
    let node = format!("{root}/never");
    let t = Arc::new(ZooKeeperNodeTracker::new(&zkw, &node, logging()));
    t.start()?;
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let waiter = {
        let (t, barrier) = (t.clone(), barrier.clone());
        thread::spawn(move || {
            barrier.wait();
            let start = Instant::now();
            let r = t.block_until_available(Duration::from_secs(60), false);
            (r, start.elapsed())
        })
    };
    barrier.wait();
    // Not for correctness: lets the thread park, so `stop` has to wake it.
    thread::sleep(Duration::from_millis(200));
    t.stop();
    let (r, waited) = waiter.join().unwrap();
    assert_eq!(r?, None);
    assert!(
        waited < Duration::from_secs(5),
        "woken promptly, waited {waited:?}"
    );
    assert!(t.is_stopped());
    assert_eq!(
        t.block_until_available(Duration::from_secs(60), false)?,
        None
    );

    // Stopped: events no longer reach it.
    let rec = recorder(&zkw);
    assert!(!zkutil::watch_and_check_exists(&zkw, &node)?);
    let other = raw();
    other.create(&node, b"x", Acl::open_unsafe(), CreateMode::Persistent)?;
    assert!(rec.wait_for(EventType::NodeCreated, &node, 1));
    drain_event_thread(&zkw, 3);
    assert_eq!(t.get_data(false), None);
    // Started again, it reads the node.
    t.start()?;
    assert_eq!(t.get_data(false).as_deref(), Some(&b"x"[..]));
    drop(t); // Drop stops and unregisters.
    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}

#[test]
fn closing_the_session_ends_a_wait() -> TestResult {
    let (zkw, root) = setup("tracker-close");
    let t = Arc::new(ZooKeeperNodeTracker::new(
        &zkw,
        &format!("{root}/never"),
        logging(),
    ));
    t.start()?;
    let waiter = {
        let t = t.clone();
        thread::spawn(move || t.block_until_available(Duration::from_secs(60), false))
    };
    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()?;
    let r = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    let r = t.block_until_available(Duration::from_secs(60), false);
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    Ok(())
}

#[test]
fn a_zookeeper_error_while_tracking_aborts() -> TestResult {
    let (zkw, root) = setup("tracker-abort");
    let node = format!("{root}/secret");
    let owner = raw();
    owner.add_auth("digest", b"u:p")?;
    owner.create(&node, b"hidden", Acl::creator_all(), CreateMode::Persistent)?;
    let abortable = Arc::new(CountingAbortable::default());
    let t = ZooKeeperNodeTracker::new(&zkw, &node, abortable.clone());
    let e = t.start().unwrap_err();
    assert!(e.is(ZkError::NoAuth), "{e}");
    assert_eq!(abortable.calls.load(Ordering::SeqCst), 1);
    assert!(abortable
        .last
        .lock()
        .as_ref()
        .is_some_and(|e| e.is(ZkError::NoAuth)));
    assert_eq!(t.get_data(true), None);
    assert_eq!(
        abortable.calls.load(Ordering::SeqCst),
        2,
        "getData(true) aborts too"
    );
    t.stop();
    owner.delete(&node, None)?;
    zkutil::delete_node_recursively(&zkw, &root)?;
    owner.close()?;
    zkw.close()
}

#[test]
fn check_if_base_node_available_and_not_started() -> TestResult {
    let root = unique_root("tracker-base");
    let base = format!("{root}/base");
    let zkw = ZooKeeperWatcher::builder(&test_servers())
        .with_session_timeout(Duration::from_secs(4))
        .with_base_znode(&base)
        .connect()?;
    let t = ZooKeeperNodeTracker::new(&zkw, &format!("{base}/x"), logging());
    assert!(!t.check_if_base_node_available());
    zkutil::create_with_parents(&zkw, &base)?;
    assert!(t.check_if_base_node_available());
    let r = t.block_until_available(Duration::ZERO, false);
    assert!(
        matches!(r, Err(Error::BadArguments(_))),
        "not started: {r:?}"
    );
    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()
}

// ---------------------------------------------------------------------------
// DeletionListener
// ---------------------------------------------------------------------------

/// Registers a deletion listener for `path` the way the lock does; returns it
/// and its registration handle.
fn listen(
    zkw: &ZooKeeperWatcher,
    path: &str,
) -> (Arc<DeletionListener>, Arc<dyn ZooKeeperListener>) {
    let l = Arc::new(DeletionListener::new(zkw, path));
    let registered: Arc<dyn ZooKeeperListener> = l.clone();
    zkw.register_listener(registered.clone());
    (l, registered)
}

#[test]
fn deletion_listener_is_released_by_a_delete() -> TestResult {
    let (zkw, root) = setup("deletion-delete");
    let node = format!("{root}/holder");
    let other = raw();
    other.create(&node, b"", Acl::open_unsafe(), CreateMode::Persistent)?;
    let (l, registered) = listen(&zkw, &node);
    assert_eq!(l.path_to_watch(), node);
    assert_eq!(registered.path(), Some(node.as_str()));
    assert!(zkutil::set_watch_if_node_exists(&zkw, &node)?);
    assert!(!l.is_released());
    let waiter = {
        let l = l.clone();
        thread::spawn(move || l.await_deletion(None))
    };
    other.delete(&node, None)?;
    assert!(waiter.join().unwrap());
    assert!(l.is_released() && !l.has_exception());
    assert!(zkw.unregister_listener(&registered));
    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}

#[test]
fn deletion_listener_is_not_released_by_a_data_change_alone() -> TestResult {
    let (zkw, root) = setup("deletion-change");
    let node = format!("{root}/holder");
    let other = raw();
    other.create(&node, b"a", Acl::open_unsafe(), CreateMode::Persistent)?;
    let (l, registered) = listen(&zkw, &node);
    let rec = recorder(&zkw);
    assert!(zkutil::set_watch_if_node_exists(&zkw, &node)?);
    other.set_data(&node, b"b", None)?;
    assert!(rec.wait_for(EventType::NodeDataChanged, &node, 1));
    assert!(
        !l.is_released(),
        "the listener handled the change: not released"
    );
    assert!(!l.await_deletion(Some(Duration::from_millis(300))));
    assert!(!l.has_exception());

    // The change re-set the watch: the delete that follows releases it.
    other.delete(&node, None)?;
    assert!(
        l.await_deletion(Some(WAIT)),
        "released by the delete after a change"
    );
    assert!(!l.has_exception());
    zkw.unregister_listener(&registered);
    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}

#[test]
fn deletion_listener_is_released_by_a_data_change_then_a_delete() -> TestResult {
    let (zkw, root) = setup("deletion-change-delete");
    let node = format!("{root}/holder");
    let other = raw();
    other.create(&node, b"a", Acl::open_unsafe(), CreateMode::Persistent)?;
    let (l, registered) = listen(&zkw, &node);
    assert!(zkutil::set_watch_if_node_exists(&zkw, &node)?);
    let waiter = {
        let l = l.clone();
        thread::spawn(move || l.await_deletion(Some(WAIT)))
    };
    other.set_data(&node, b"b", None)?;
    other.set_data(&node, b"c", None)?;
    other.delete(&node, None)?;
    assert!(waiter.join().unwrap());
    assert!(!l.has_exception());
    zkw.unregister_listener(&registered);
    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}

/// A NodeDataChanged whose re-check finds the node gone releases (the deletion
/// itself was not seen: the watch had fired for the change).
#[test]
fn deletion_listener_released_when_the_changed_node_is_gone() -> TestResult {
    let (zkw, root) = setup("deletion-gone");
    let node = format!("{root}/holder");
    let (l, registered) = listen(&zkw, &node);
    zkw.process(WatchedEvent::node(
        EventType::NodeDataChanged,
        node.as_str(),
    ));
    // The watch is re-set asynchronously: answered on the event thread.
    assert!(l.await_deletion(Some(WAIT)));
    assert!(!l.has_exception());
    zkw.unregister_listener(&registered);
    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()
}

/// An error re-setting the watch is recorded and releases the waiter.
#[test]
fn deletion_listener_records_an_error_re_setting_the_watch() -> TestResult {
    let (zkw, root) = setup("deletion-error");
    let node = format!("{root}/secret");
    let owner = raw();
    owner.add_auth("digest", b"u:p")?;
    owner.create(&node, b"", Acl::creator_all(), CreateMode::Persistent)?;
    let (l, registered) = listen(&zkw, &node);
    zkw.process(WatchedEvent::node(
        EventType::NodeDataChanged,
        node.as_str(),
    ));
    assert!(l.await_deletion(Some(WAIT)));
    assert!(l.has_exception());
    assert!(
        l.exception().is_some_and(|e| e.is(ZkError::NoAuth)),
        "{l:?}"
    );
    zkw.unregister_listener(&registered);
    owner.delete(&node, None)?;
    zkutil::delete_node_recursively(&zkw, &root)?;
    owner.close()?;
    zkw.close()
}

#[test]
fn deletion_listener_is_released_with_an_error_when_the_session_closes() -> TestResult {
    let (zkw, root) = setup("deletion-close");
    let node = format!("{root}/holder");
    zkutil::create_and_fail_silent(&zkw, &node)?;
    let (l, _registered) = listen(&zkw, &node);
    assert!(zkutil::set_watch_if_node_exists(&zkw, &node)?);
    let waiter = {
        let l = l.clone();
        thread::spawn(move || l.await_deletion(Some(WAIT)))
    };
    let cleanup = watcher();
    zkw.close()?;
    assert!(waiter.join().unwrap());
    assert!(matches!(l.exception(), Some(Error::Closed)), "{l:?}");
    zkutil::delete_node_recursively(&cleanup, &root)?;
    cleanup.close()
}

// ---------------------------------------------------------------------------
// The event thread during a partition; unregister_all_listeners
// ---------------------------------------------------------------------------

/// A user listener that partitions the session when `node` changes: it first
/// makes a round trip (so the server heard from the session just now and it
/// outlives the stall), then stalls the proxy. Whatever is sent after it for the
/// same event — a tracker's re-read, a deletion listener's re-arm — goes into
/// the stall. It also notes when `Disconnected` reached it.
struct Staller {
    node: String,
    zkw: WeakZooKeeperWatcher,
    proxy: Arc<FaultProxy>,
    stalled_at: Mutex<Option<Instant>>,
    disconnected_at: Mutex<Option<Instant>>,
    cv: Condvar,
}

impl Staller {
    fn wait(&self, what: &str, slot: impl Fn(&Staller) -> &Mutex<Option<Instant>>) -> Instant {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut g = slot(self).lock();
        loop {
            if let Some(t) = *g {
                return t;
            }
            assert!(
                !self.cv.wait_until(&mut g, deadline).timed_out(),
                "no {what} within 20 s"
            );
        }
    }
}

impl ZooKeeperListener for Staller {
    fn node_data_changed(&self, path: &str) {
        if path != self.node || self.stalled_at.lock().is_some() {
            return;
        }
        if let Some(zkw) = self.zkw.upgrade() {
            zkw.zookeeper().exists("/", false).expect("a round trip");
        }
        self.proxy.stall();
        *self.stalled_at.lock() = Some(Instant::now());
        self.cv.notify_all();
    }

    fn connection_event(&self, event: &WatchedEvent) {
        if event.keeper_state == KeeperState::Disconnected {
            self.disconnected_at.lock().get_or_insert_with(Instant::now);
            self.cv.notify_all();
        }
    }
}

/// Issue 9, item 2: during a partition the tracker's and the deletion
/// listener's reactions do not block the event thread. The node changes; a
/// user listener stalls the link; the tracker re-reads and the (HBase-style)
/// deletion listener re-arms into the stall. `Disconnected` must reach the user
/// at the read timeout (2/3 of the session timeout), not after the
/// `RecoverableZooKeeper`'s retries (1 + 2 + 4 s) of a blocking re-read. While
/// partitioned, another session deletes the node and a second watched node;
/// after the heal the tracker (re-armed on `SyncConnected`) has the node's
/// state, follows it on, and both deletion listeners are released.
#[test]
fn a_stall_while_a_tracker_re_reads_does_not_delay_disconnected_and_heals() -> TestResult {
    let _ = env_logger::builder().is_test(true).try_init();
    let proxy = Arc::new(FaultProxy::start(shared_server().connect_string())?);
    let zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(6))
        .connect()?;
    let root = unique_root("tracker-stall");
    zkutil::create_with_parents(&zkw, &root)?;
    let node = format!("{root}/n");
    let other_node = format!("{root}/m");
    let other = raw();
    other.create(&node, b"v1", Acl::open_unsafe(), CreateMode::Persistent)?;
    other.create(&other_node, b"", Acl::open_unsafe(), CreateMode::Persistent)?;

    // The staller first, by registration and by watch order (its default
    // watch is set before the tracker's own).
    let staller = Arc::new(Staller {
        node: node.clone(),
        zkw: zkw.downgrade(),
        proxy: proxy.clone(),
        stalled_at: Mutex::new(None),
        disconnected_at: Mutex::new(None),
        cv: Condvar::new(),
    });
    let _staller_registration = zkw.listen(staller.clone());
    assert!(zkutil::set_watch_if_node_exists(&zkw, &node)?);
    let abortable = Arc::new(CountingAbortable::default());
    let tracker = ZooKeeperNodeTracker::new(&zkw, &node, abortable.clone());
    tracker.start()?;
    assert_eq!(tracker.get_data(false).as_deref(), Some(&b"v1"[..]));
    // HBase's way: registered, on the default watch; its re-arm after the
    // change goes into the stall.
    let hbase_style = Arc::new(DeletionListener::new(&zkw, &node));
    let _hbase_registration = zkw.listen(hbase_style.clone());
    // Self-contained, on its own watch, which the client re-sets on reconnect.
    let own = DeletionListener::new(&zkw, &other_node);
    assert!(own.set_watch_if_node_exists()?);

    other.set_data(&node, b"v2", None)?;
    let stalled_at = staller.wait("stall", |s| &s.stalled_at);
    // Partitioned: another process deletes both nodes.
    other.delete(&node, None)?;
    other.delete(&other_node, None)?;
    let disconnected_at = staller.wait("Disconnected", |s| &s.disconnected_at);
    proxy.pass();

    let read_timeout = zkw.zookeeper().session_timeout() * 2 / 3;
    let told = disconnected_at - stalled_at;
    assert!(
        told >= read_timeout.saturating_sub(Duration::from_millis(500))
            && told <= read_timeout + Duration::from_secs(1),
        "Disconnected {told:?} after the stall; the read timeout is {read_timeout:?}"
    );
    assert!(
        hbase_style.await_deletion(Some(WAIT)),
        "the re-arm that failed in the partition is made again on reconnect"
    );
    assert!(!hbase_style.has_exception(), "{hbase_style:?}");
    assert!(
        own.await_deletion(Some(WAIT)),
        "its watch survives the partition"
    );
    assert!(!own.has_exception(), "{own:?}");
    eventually(
        "the tracker re-reads on reconnect: the node is gone",
        || tracker.get_data(false).is_none(),
    );
    other.create(&node, b"v4", Acl::open_unsafe(), CreateMode::Persistent)?;
    eventually("the tracker follows the node after the heal", || {
        tracker.get_data(false).as_deref() == Some(&b"v4"[..])
    });
    assert!(!zkw.is_expired(), "the session outlived the stall");
    assert_eq!(abortable.calls.load(Ordering::SeqCst), 0, "nothing aborted");

    tracker.stop();
    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}

/// Issue 9, item 4: `unregister_all_listeners` removes the user's listeners
/// only; a tracker (its watch, and a thread blocked in it) and a deletion
/// listener on its own watch keep working.
#[test]
fn unregister_all_listeners_does_not_stop_a_tracker_or_a_deletion_listener() -> TestResult {
    let (zkw, root) = setup("tracker-unregister-all");
    let other = raw();
    let followed = format!("{root}/followed");
    let awaited = format!("{root}/awaited");
    let deleted = format!("{root}/deleted");
    other.create(&followed, b"a", Acl::open_unsafe(), CreateMode::Persistent)?;
    other.create(&deleted, b"", Acl::open_unsafe(), CreateMode::Persistent)?;
    let tracker = ZooKeeperNodeTracker::new(&zkw, &followed, logging());
    tracker.start()?;
    let waiting = Arc::new(ZooKeeperNodeTracker::new(&zkw, &awaited, logging()));
    waiting.start()?;
    let listener = DeletionListener::new(&zkw, &deleted);
    assert!(listener.set_watch_if_node_exists()?);
    let rec = recorder(&zkw);
    assert_eq!(zkw.number_of_listeners(), 1, "only the user's listener");

    let blocked = {
        let waiting = waiting.clone();
        thread::spawn(move || waiting.block_until_available(WAIT, false))
    };
    zkw.unregister_all_listeners();
    assert_eq!(zkw.number_of_listeners(), 0);
    drop(rec);

    other.set_data(&followed, b"b", None)?;
    eventually("the tracker follows a change", || {
        tracker.get_data(false).as_deref() == Some(&b"b"[..])
    });
    other.create(
        &awaited,
        b"here",
        Acl::open_unsafe(),
        CreateMode::Persistent,
    )?;
    assert_eq!(blocked.join().unwrap()?.as_deref(), Some(&b"here"[..]));
    other.delete(&deleted, None)?;
    assert!(listener.await_deletion(Some(WAIT)));
    assert!(!listener.has_exception(), "{listener:?}");

    tracker.stop();
    waiting.stop();
    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}
