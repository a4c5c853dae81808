//! `ZooKeeperNodeTracker` and `DeletionListener` against a real ZooKeeper
//! server, with a raw second session playing "another process".

mod common;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{
    drain_event_thread, node_recorder, raw_session, setup, watcher, CountingAbortable,
    NodeRecorder, WAIT,
};
use parking_lot::{Condvar, Mutex};
use zklock::client::KeeperState;
use zklock::client::{Acl, CreateMode, EventType, Op, WatchedEvent};
use zklock::testing::{shared_server, test_servers, unique_root, FaultProxy};
use zklock::{
    zkutil, Abortable, DeletionListener, Error, LoggingAbortable, WeakZooKeeperWatcher, ZkError,
    ZooKeeperListener, ZooKeeperNodeTracker, ZooKeeperWatcher,
};

/// The session timeout of the tests' plain clients.
const SESSION: Duration = Duration::from_secs(4);

fn logging() -> Arc<dyn Abortable> {
    Arc::new(LoggingAbortable::new())
}

/// Polls `f` (every 10 ms, at most `WAIT`) until it holds.
#[track_caller]
fn eventually(what: &str, f: impl FnMut() -> bool) {
    zklock::testing::wait_until(WAIT, what, f);
}

/// A user listener for `zkw`'s default watcher ([`node_recorder`]). Registered
/// *after* a tracker or deletion listener, it sees each event after that
/// listener handled it (dispatch is in registration order on the one event
/// thread): a sync point without sleeps. The trackers and deletion listeners
/// watch with the session's default watch, so the recorder hears their events
/// (after them: the library's subscriptions are told first).
fn recorder(zkw: &ZooKeeperWatcher) -> Arc<NodeRecorder> {
    node_recorder(zkw)
}

// ---------------------------------------------------------------------------
// Issue 24, point 1: a listener hears what a tracker watches
// ---------------------------------------------------------------------------

/// HBase's `TestZooKeeperNodeTracker.testNodeTracker`, translated: three
/// trackers follow one node (one of them with a thread blocked until it
/// appears), and a `TestingZKListener` that sets no watch of its own waits for
/// `nodeCreated`, `nodeDeleted` and `nodeDataChanged` on it. In HBase the
/// trackers' watches are the watcher's, so every registered listener hears
/// them; so in zklock. A `zkutil` watch and a deletion listener on the same
/// node add no second delivery: each event reaches the listener exactly once.
///
/// HBase's trackers re-read on the event thread before the next listener is
/// called; zklock's issue their re-read there and its answer comes back
/// later, but `get_data(false)` on this (application) thread waits for it
/// (issue 31, item 6: see the tests at the end). The drains
/// ([`drain_event_thread`]) date from before; they do no harm.
#[test]
fn hbase_test_node_tracker_a_listener_hears_what_the_trackers_watch() {
    let (zkw, root) = setup("tracker-hbase-test-node-tracker");
    let node = format!("{root}/{}", std::process::id());
    let (data_one, data_two) = (&b"dataOne"[..], &b"dataTwo"[..]);

    // Start a tracker with no node currently available.
    let local = ZooKeeperNodeTracker::new(&zkw, &node, logging());
    local.start().unwrap();
    assert_eq!(local.get_data(false), None);
    // A thread with another tracker, blocked until the node is there.
    let thread_tracker = Arc::new(ZooKeeperNodeTracker::new(&zkw, &node, logging()));
    thread_tracker.start().unwrap();
    let wait_to_get_data = |t: &Arc<ZooKeeperNodeTracker>| {
        let t = t.clone();
        thread::spawn(move || t.block_until_available(Duration::from_secs(60), false))
    };
    let waiting = wait_to_get_data(&thread_tracker);
    let second = ZooKeeperNodeTracker::new(&zkw, &node, logging());
    second.start().unwrap();
    // The TestingZKListener: registered, sets no watch.
    let listener = recorder(&zkw);
    let count = |t| listener.count(t, &node);

    // A separate connection for the test's triggers.
    let zkconn = raw_session(&test_servers(), SESSION);
    zkconn
        .create(&node, data_one, Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert!(
        listener.wait_for(EventType::NodeCreated, &node, 1),
        "the listener hears the creation the trackers watch"
    );
    assert_eq!(waiting.join().unwrap().unwrap().as_deref(), Some(data_one));
    drain_event_thread(&zkw, 2);
    for t in [&local, &*thread_tracker, &second] {
        assert_eq!(t.get_data(false).as_deref(), Some(data_one));
        assert!(t.block_until_available(WAIT, false).unwrap().is_some());
    }
    // A deletion listener on the same node (HBase's way: the default watch).
    let deletion = DeletionListener::new(&zkw, &node);
    assert!(deletion.set_watch_if_node_exists().unwrap());

    zkconn.delete(&node, None).unwrap();
    assert!(listener.wait_for(EventType::NodeDeleted, &node, 1));
    assert!(deletion.await_deletion(Some(WAIT)));
    assert!(!deletion.has_exception());
    drain_event_thread(&zkw, 2);
    for t in [&local, &*thread_tracker, &second] {
        assert_eq!(t.get_data(false), None, "made unavailable");
    }
    let waiting = wait_to_get_data(&thread_tracker);
    // zkutil's watch on the same node too (HBase's trackers set theirs so).
    assert!(!zkutil::watch_and_check_exists(&zkw, &node).unwrap());

    zkconn
        .create(&node, data_two, Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert!(listener.wait_for(EventType::NodeCreated, &node, 2));
    assert_eq!(waiting.join().unwrap().unwrap().as_deref(), Some(data_two));
    drain_event_thread(&zkw, 2);
    for t in [&local, &*thread_tracker, &second] {
        assert_eq!(t.get_data(false).as_deref(), Some(data_two));
    }

    zkconn.set_data(&node, data_one, None).unwrap();
    assert!(listener.wait_for(EventType::NodeDataChanged, &node, 1));
    drain_event_thread(&zkw, 2);
    for t in [&local, &*thread_tracker, &second] {
        assert_eq!(t.get_data(false).as_deref(), Some(data_one));
    }
    // Exactly once per event, however many trackers and zkutil watches.
    assert_eq!(count(EventType::NodeCreated), 2);
    assert_eq!(count(EventType::NodeDeleted), 1);
    assert_eq!(count(EventType::NodeDataChanged), 1);
    // One registration per path in the client, whoever set the watch.
    assert_eq!(zkw.zookeeper().watch_count(), 1);

    for t in [&local, &*thread_tracker, &second] {
        t.stop();
    }
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkconn.close().unwrap();
    zkw.close().unwrap();
}

// ---------------------------------------------------------------------------
// ZooKeeperNodeTracker
// ---------------------------------------------------------------------------

#[test]
fn trackers_follow_a_node_another_session_creates_changes_and_deletes() {
    let (zkw1, root) = setup("tracker-follow");
    let zkw2 = watcher();
    let node = format!("{root}/master");
    let trackers = [
        Arc::new(ZooKeeperNodeTracker::new(&zkw1, &node, logging())),
        Arc::new(ZooKeeperNodeTracker::new(&zkw1, &node, logging())),
        Arc::new(ZooKeeperNodeTracker::new(&zkw2, &node, logging())),
    ];
    for t in &trackers {
        t.start().unwrap();
        assert_eq!(t.get_node(), node);
        assert_eq!(t.get_data(false), None, "started before the node exists");
        assert_eq!(
            t.block_until_available(Duration::ZERO, false).unwrap(),
            None
        );
    }
    // Threads blocked until the node appears.
    let waiters: Vec<_> = trackers
        .iter()
        .map(|t| {
            let t = t.clone();
            thread::spawn(move || t.block_until_available(Duration::from_secs(60), false))
        })
        .collect();
    let timed = trackers[0]
        .block_until_available(Duration::from_millis(50), false)
        .unwrap();
    assert_eq!(timed, None, "a bounded wait on a missing node times out");

    let other = raw_session(&test_servers(), SESSION);
    let all_see = |want: Option<&[u8]>| {
        eventually(&format!("every tracker sees {want:?}"), || {
            trackers
                .iter()
                .all(|t| t.get_data(false).as_deref() == want)
        })
    };
    other
        .create(&node, b"v1", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    for w in waiters {
        assert_eq!(w.join().unwrap().unwrap().as_deref(), Some(&b"v1"[..]));
    }
    all_see(Some(b"v1"));
    other.set_data(&node, b"v2", None).unwrap();
    all_see(Some(b"v2"));
    other.delete(&node, None).unwrap();
    all_see(None);
    other
        .create(&node, b"v3", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    all_see(Some(b"v3"));
    other.set_data(&node, b"", None).unwrap();
    all_see(Some(b""));
    for t in &trackers {
        assert_eq!(t.get_data(true).as_deref(), Some(&b""[..]));
        assert_eq!(
            t.block_until_available(Duration::ZERO, true)
                .unwrap()
                .as_deref(),
            Some(&b""[..])
        );
    }

    for t in &trackers {
        t.stop();
    }
    zkutil::delete_node_recursively(&zkw1, &root).unwrap();
    other.close().unwrap();
    zkw2.close().unwrap();
    zkw1.close().unwrap();
}

/// HBase: "a delete re-sets the watch and notices a re-create". Deleting and
/// re-creating in one transaction fires only NodeDeleted at the tracker; only
/// its re-check finds the new node.
#[test]
fn a_delete_notices_a_re_create_in_the_same_transaction() {
    let (zkw, root) = setup("tracker-recreate");
    let node = format!("{root}/n");
    let other = raw_session(&test_servers(), SESSION);
    other
        .create(&node, b"old", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let t = ZooKeeperNodeTracker::new(&zkw, &node, logging());
    t.start().unwrap();
    assert_eq!(t.get_data(false).as_deref(), Some(&b"old"[..]));
    let rec = recorder(&zkw);
    assert!(zkutil::watch_and_check_exists(&zkw, &node).unwrap());
    other
        .multi(&[
            Op::delete(node.as_str(), None),
            Op::create(node.as_str(), b"new".to_vec(), CreateMode::Persistent),
        ])
        .unwrap();
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
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

/// HBase: "a create that finds the node gone handles it as a delete" — which
/// re-sets the exists watch, so a later creation is still seen.
#[test]
fn a_create_that_finds_the_node_gone_keeps_watching() {
    let (zkw, root) = setup("tracker-flash");
    let node = format!("{root}/n");
    let other = raw_session(&test_servers(), SESSION);
    let t = ZooKeeperNodeTracker::new(&zkw, &node, logging());
    t.start().unwrap();
    let rec = recorder(&zkw);
    assert!(!zkutil::watch_and_check_exists(&zkw, &node).unwrap());
    other
        .multi(&[
            Op::create(node.as_str(), b"flash".to_vec(), CreateMode::Persistent),
            Op::delete(node.as_str(), None),
        ])
        .unwrap();
    assert!(rec.wait_for(EventType::NodeCreated, &node, 1));
    // getData → NoNode → exists (which re-sets the exists watch) → None.
    drain_event_thread(&zkw, 3);
    assert_eq!(t.get_data(false), None);
    other
        .create(&node, b"later", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    eventually(
        "the tracker left an exists watch: it sees the creation",
        || t.get_data(false).as_deref() == Some(&b"later"[..]),
    );
    t.stop();
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

#[test]
fn stop_wakes_a_blocked_thread() {
    let (zkw, root) = setup("tracker-stop");
    let node = format!("{root}/never");
    let t = Arc::new(ZooKeeperNodeTracker::new(&zkw, &node, logging()));
    t.start().unwrap();
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
    // Deliberate, not for correctness: lets the thread park, so `stop` has to
    // wake it.
    thread::sleep(Duration::from_millis(200));
    t.stop();
    let (r, waited) = waiter.join().unwrap();
    assert_eq!(r.unwrap(), None);
    assert!(
        waited < Duration::from_secs(5),
        "woken promptly, waited {waited:?}"
    );
    assert!(t.is_stopped());
    assert_eq!(
        t.block_until_available(Duration::from_secs(60), false)
            .unwrap(),
        None
    );

    // Stopped: events no longer reach it.
    let rec = recorder(&zkw);
    assert!(!zkutil::watch_and_check_exists(&zkw, &node).unwrap());
    let other = raw_session(&test_servers(), SESSION);
    other
        .create(&node, b"x", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert!(rec.wait_for(EventType::NodeCreated, &node, 1));
    drain_event_thread(&zkw, 3);
    assert_eq!(t.get_data(false), None);
    // Started again, it reads the node.
    t.start().unwrap();
    assert_eq!(t.get_data(false).as_deref(), Some(&b"x"[..]));
    drop(t); // Drop stops and unregisters.
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

#[test]
fn closing_the_session_ends_a_wait() {
    let (zkw, root) = setup("tracker-close");
    let t = Arc::new(ZooKeeperNodeTracker::new(
        &zkw,
        &format!("{root}/never"),
        logging(),
    ));
    t.start().unwrap();
    let waiter = {
        let t = t.clone();
        thread::spawn(move || t.block_until_available(Duration::from_secs(60), false))
    };
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
    let r = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    let r = t.block_until_available(Duration::from_secs(60), false);
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
}

/// Holds the session's event thread from the first `Disconnected` it hears
/// (before the `Expired` that follows it is told to anyone, trackers
/// included) until released or dropped.
struct HoldAtDisconnect {
    entered: std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl ZooKeeperListener for HoldAtDisconnect {
    fn connection_event(&self, event: &WatchedEvent) {
        if event.keeper_state == KeeperState::Disconnected {
            if let Some(tx) = self.entered.lock().unwrap().take() {
                let _ = tx.send(());
                let _ = self.release.lock().unwrap().recv_timeout(WAIT * 3);
            }
        }
    }
}

/// Issue 33: `block_until_available` and `await_deletion` wait through the
/// one wait engine, whose wait the session's end wakes from the client's
/// thread that ends it. A wait begun before the session expired ends with
/// `SessionExpired` (the deletion listener is released with it recorded)
/// while a user's listener holds up the event thread, before the tracker and
/// the deletion listener are told of the expiry. (With their own condition
/// variables, which only that event woke, both waited on until the hold
/// ended: checked, the tracker's wait was still running after `WAIT`.)
#[test]
fn waits_end_with_their_session_even_while_the_event_thread_is_held() {
    let (zkw, root) = setup("tracker-held-at-end");
    let held = format!("{root}/held");
    zkutil::create_and_fail_silent(&zkw, &held).unwrap();
    let tracker = Arc::new(ZooKeeperNodeTracker::new(
        &zkw,
        &format!("{root}/never"),
        logging(),
    ));
    tracker.start().unwrap();
    let deletion = Arc::new(DeletionListener::new(&zkw, &held));
    assert!(deletion.set_watch_if_node_exists().unwrap());
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let _registration = zkw.listen(Arc::new(HoldAtDisconnect {
        entered: std::sync::Mutex::new(Some(entered_tx)),
        release: std::sync::Mutex::new(release_rx),
    }));

    let (done_tx, done) = std::sync::mpsc::channel();
    let waiting = {
        let (t, done_tx) = (tracker.clone(), done_tx.clone());
        thread::spawn(move || {
            let r = t.block_until_available(Duration::from_secs(60), false);
            let _ = done_tx.send("tracker");
            r
        })
    };
    let awaiting = {
        let l = deletion.clone();
        thread::spawn(move || {
            let r = l.await_deletion(Some(Duration::from_secs(60)));
            let _ = done_tx.send("deletion listener");
            r
        })
    };
    // Deliberate, not for correctness (whenever they start, the waits end
    // with the session): lets both threads park before the expiry, so that
    // the session's end has to wake them.
    thread::sleep(Duration::from_millis(200));
    zklock::testing::expire_session(zkw.zookeeper(), &test_servers()).unwrap();
    entered
        .recv_timeout(WAIT)
        .expect("the event thread is held at Disconnected");
    // Held: the trackers have not heard the expiry.
    for _ in 0..2 {
        let which = done.recv_timeout(WAIT);
        if which.is_err() {
            let _ = release.send(());
        }
        assert!(
            which.is_ok(),
            "a wait ran on past its session's end while the event thread was held"
        );
    }
    let r = waiting.join().unwrap();
    assert!(
        matches!(&r, Err(e) if e.is(ZkError::SessionExpired)),
        "{r:?}"
    );
    assert!(awaiting.join().unwrap(), "released by the session's end");
    assert!(
        deletion
            .exception()
            .is_some_and(|e| e.is(ZkError::SessionExpired)),
        "{deletion:?}"
    );
    let _ = release.send(());

    let cleanup = watcher();
    zkutil::delete_node_recursively(&cleanup, &root).unwrap();
    cleanup.close().unwrap();
    let _ = zkw.close();
}

#[test]
fn a_zookeeper_error_while_tracking_aborts() {
    let (zkw, root) = setup("tracker-abort");
    let node = format!("{root}/secret");
    let owner = raw_session(&test_servers(), SESSION);
    owner.add_auth("digest", b"u:p").unwrap();
    owner
        .create(&node, b"hidden", Acl::creator_all(), CreateMode::Persistent)
        .unwrap();
    let abortable = Arc::new(CountingAbortable::default());
    let t = ZooKeeperNodeTracker::new(&zkw, &node, abortable.clone());
    let e = t.start().unwrap_err();
    assert!(e.is(ZkError::NoAuth), "{e}");
    assert_eq!(abortable.calls(), 1);
    assert!(abortable
        .last_error()
        .is_some_and(|e| e.is(ZkError::NoAuth)));
    assert_eq!(t.get_data(true), None);
    assert_eq!(abortable.calls(), 2, "getData(true) aborts too");
    t.stop();
    owner.delete(&node, None).unwrap();
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    owner.close().unwrap();
    zkw.close().unwrap();
}

#[test]
fn check_if_base_node_available_and_not_started() {
    let root = unique_root("tracker-base");
    let base = format!("{root}/base");
    let zkw = ZooKeeperWatcher::builder(&test_servers())
        .with_session_timeout(Duration::from_secs(4))
        .with_base_znode(&base)
        .connect()
        .unwrap();
    let t = ZooKeeperNodeTracker::new(&zkw, &format!("{base}/x"), logging());
    assert!(!t.check_if_base_node_available());
    zkutil::create_with_parents(&zkw, &base).unwrap();
    assert!(t.check_if_base_node_available());
    let r = t.block_until_available(Duration::ZERO, false);
    assert!(
        matches!(r, Err(Error::BadArguments(_))),
        "not started: {r:?}"
    );
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
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
fn deletion_listener_is_released_by_a_delete() {
    let (zkw, root) = setup("deletion-delete");
    let node = format!("{root}/holder");
    let other = raw_session(&test_servers(), SESSION);
    other
        .create(&node, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let (l, registered) = listen(&zkw, &node);
    assert_eq!(l.path_to_watch(), node);
    assert_eq!(registered.path(), Some(node.as_str()));
    assert!(zkutil::set_watch_if_node_exists(&zkw, &node).unwrap());
    assert!(!l.is_released());
    let waiter = {
        let l = l.clone();
        thread::spawn(move || l.await_deletion(None))
    };
    other.delete(&node, None).unwrap();
    assert!(waiter.join().unwrap());
    assert!(l.is_released() && !l.has_exception());
    assert!(zkw.unregister_listener(&registered));
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

#[test]
fn deletion_listener_is_not_released_by_a_data_change_alone() {
    let (zkw, root) = setup("deletion-change");
    let node = format!("{root}/holder");
    let other = raw_session(&test_servers(), SESSION);
    other
        .create(&node, b"a", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let (l, registered) = listen(&zkw, &node);
    let rec = recorder(&zkw);
    assert!(zkutil::set_watch_if_node_exists(&zkw, &node).unwrap());
    other.set_data(&node, b"b", None).unwrap();
    assert!(rec.wait_for(EventType::NodeDataChanged, &node, 1));
    assert!(
        !l.is_released(),
        "the listener handled the change: not released"
    );
    assert!(!l.await_deletion(Some(Duration::from_millis(300))));
    assert!(!l.has_exception());

    // The change re-set the watch: the delete that follows releases it.
    other.delete(&node, None).unwrap();
    assert!(
        l.await_deletion(Some(WAIT)),
        "released by the delete after a change"
    );
    assert!(!l.has_exception());
    zkw.unregister_listener(&registered);
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

#[test]
fn deletion_listener_is_released_by_a_data_change_then_a_delete() {
    let (zkw, root) = setup("deletion-change-delete");
    let node = format!("{root}/holder");
    let other = raw_session(&test_servers(), SESSION);
    other
        .create(&node, b"a", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let (l, registered) = listen(&zkw, &node);
    assert!(zkutil::set_watch_if_node_exists(&zkw, &node).unwrap());
    let waiter = {
        let l = l.clone();
        thread::spawn(move || l.await_deletion(Some(WAIT)))
    };
    other.set_data(&node, b"b", None).unwrap();
    other.set_data(&node, b"c", None).unwrap();
    other.delete(&node, None).unwrap();
    assert!(waiter.join().unwrap());
    assert!(!l.has_exception());
    zkw.unregister_listener(&registered);
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

/// A NodeDataChanged whose re-check finds the node gone releases (the deletion
/// itself was not seen: the watch had fired for the change).
#[test]
fn deletion_listener_released_when_the_changed_node_is_gone() {
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
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}

/// An error re-setting the watch is recorded and releases the waiter.
#[test]
fn deletion_listener_records_an_error_re_setting_the_watch() {
    let (zkw, root) = setup("deletion-error");
    let node = format!("{root}/secret");
    let owner = raw_session(&test_servers(), SESSION);
    owner.add_auth("digest", b"u:p").unwrap();
    owner
        .create(&node, b"", Acl::creator_all(), CreateMode::Persistent)
        .unwrap();
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
    owner.delete(&node, None).unwrap();
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    owner.close().unwrap();
    zkw.close().unwrap();
}

#[test]
fn deletion_listener_is_released_with_an_error_when_the_session_closes() {
    let (zkw, root) = setup("deletion-close");
    let node = format!("{root}/holder");
    zkutil::create_and_fail_silent(&zkw, &node).unwrap();
    let (l, _registered) = listen(&zkw, &node);
    assert!(zkutil::set_watch_if_node_exists(&zkw, &node).unwrap());
    let waiter = {
        let l = l.clone();
        thread::spawn(move || l.await_deletion(Some(WAIT)))
    };
    let cleanup = watcher();
    zkw.close().unwrap();
    assert!(waiter.join().unwrap());
    assert!(matches!(l.exception(), Some(Error::Closed)), "{l:?}");
    zkutil::delete_node_recursively(&cleanup, &root).unwrap();
    cleanup.close().unwrap();
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
fn a_stall_while_a_tracker_re_reads_does_not_delay_disconnected_and_heals() {
    let _ = env_logger::builder().is_test(true).try_init();
    let proxy = Arc::new(FaultProxy::start(shared_server().connect_string()).unwrap());
    let zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(6))
        .connect()
        .unwrap();
    let root = unique_root("tracker-stall");
    zkutil::create_with_parents(&zkw, &root).unwrap();
    let node = format!("{root}/n");
    let other_node = format!("{root}/m");
    let other = raw_session(&test_servers(), SESSION);
    other
        .create(&node, b"v1", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    other
        .create(&other_node, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();

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
    assert!(zkutil::set_watch_if_node_exists(&zkw, &node).unwrap());
    let abortable = Arc::new(CountingAbortable::default());
    let tracker = ZooKeeperNodeTracker::new(&zkw, &node, abortable.clone());
    tracker.start().unwrap();
    assert_eq!(tracker.get_data(false).as_deref(), Some(&b"v1"[..]));
    // HBase's way: registered, on the default watch; its re-arm after the
    // change goes into the stall.
    let hbase_style = Arc::new(DeletionListener::new(&zkw, &node));
    let _hbase_registration = zkw.listen(hbase_style.clone());
    // Self-contained, on its own watch, which the client re-sets on reconnect.
    let own = DeletionListener::new(&zkw, &other_node);
    assert!(own.set_watch_if_node_exists().unwrap());

    other.set_data(&node, b"v2", None).unwrap();
    let stalled_at = staller.wait("stall", |s| &s.stalled_at);
    // Partitioned: another process deletes both nodes.
    other.delete(&node, None).unwrap();
    other.delete(&other_node, None).unwrap();
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
    other
        .create(&node, b"v4", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    eventually("the tracker follows the node after the heal", || {
        tracker.get_data(false).as_deref() == Some(&b"v4"[..])
    });
    assert!(!zkw.is_expired(), "the session outlived the stall");
    assert_eq!(abortable.calls(), 0, "nothing aborted");

    tracker.stop();
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

/// Issue 9, item 4: `unregister_all_listeners` removes the user's listeners
/// only; a tracker (its watch, and a thread blocked in it) and a deletion
/// listener on its own watch keep working.
#[test]
fn unregister_all_listeners_does_not_stop_a_tracker_or_a_deletion_listener() {
    let (zkw, root) = setup("tracker-unregister-all");
    let other = raw_session(&test_servers(), SESSION);
    let followed = format!("{root}/followed");
    let awaited = format!("{root}/awaited");
    let deleted = format!("{root}/deleted");
    other
        .create(&followed, b"a", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    other
        .create(&deleted, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let tracker = ZooKeeperNodeTracker::new(&zkw, &followed, logging());
    tracker.start().unwrap();
    let waiting = Arc::new(ZooKeeperNodeTracker::new(&zkw, &awaited, logging()));
    waiting.start().unwrap();
    let listener = DeletionListener::new(&zkw, &deleted);
    assert!(listener.set_watch_if_node_exists().unwrap());
    let rec = recorder(&zkw);
    assert_eq!(zkw.number_of_listeners(), 1, "only the user's listener");

    let blocked = {
        let waiting = waiting.clone();
        thread::spawn(move || waiting.block_until_available(WAIT, false))
    };
    zkw.unregister_all_listeners();
    assert_eq!(zkw.number_of_listeners(), 0);
    drop(rec);

    other.set_data(&followed, b"b", None).unwrap();
    eventually("the tracker follows a change", || {
        tracker.get_data(false).as_deref() == Some(&b"b"[..])
    });
    other
        .create(
            &awaited,
            b"here",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .unwrap();
    assert_eq!(
        blocked.join().unwrap().unwrap().as_deref(),
        Some(&b"here"[..])
    );
    other.delete(&deleted, None).unwrap();
    assert!(listener.await_deletion(Some(WAIT)));
    assert!(!listener.has_exception(), "{listener:?}");

    tracker.stop();
    waiting.stop();
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

// ---------------------------------------------------------------------------
// A tracker keeps the newest answer, whatever order its reads were numbered in
// (found in review: a refresh and an event-driven re-read crossing)
// ---------------------------------------------------------------------------

mod read_order {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::Duration;

    use zklock::client::{Acl, CreateMode, WatchedEvent, WatcherType, ZooKeeper};
    use zklock::testing::{shared_server, unique_root, wait_until, FaultProxy};
    use zklock::{zkutil, Abortable, Error, ZooKeeperNodeTracker, ZooKeeperWatcher};

    const WAIT: Duration = Duration::from_secs(10);

    fn init_log() {
        let _ = env_logger::builder().is_test(true).try_init();
    }

    fn raw(servers: &str, session: Duration) -> ZooKeeper {
        init_log();
        ZooKeeper::connect(servers, session, |_e: WatchedEvent| {}).expect("connect a raw session")
    }

    fn watcher(servers: &str) -> ZooKeeperWatcher {
        init_log();
        ZooKeeperWatcher::builder(servers)
            .with_session_timeout(Duration::from_secs(4))
            .connect()
            .expect("connect a ZooKeeperWatcher")
    }

    /// Counts what the tracker passes to its `Abortable`.
    #[derive(Default)]
    struct Aborts(Mutex<Vec<String>>);

    impl Abortable for Aborts {
        fn abort(&self, why: &str, e: Option<&Error>) {
            self.0.lock().unwrap().push(format!("{why}: {e:?}"));
        }

        fn is_aborted(&self) -> bool {
            !self.0.lock().unwrap().is_empty()
        }
    }

    // ---------------------------------------------------------------------------
    // 1. A tracker keeps the newest answer, whatever order its reads were numbered
    // ---------------------------------------------------------------------------

    /// The reviewer's interleaving, forced: a blocking refresh (`get_data(true)`)
    /// starts; before it sends its read, the node changes and the tracker's
    /// event-driven re-read is sent, answered and stored. Then the node changes
    /// once more and the refresh is sent: its answer is the newest, and the
    /// tracker must keep it.
    ///
    /// To make a stale answer visible instead of healed a moment later, the
    /// tracker's watch is removed before the last change (the tracker ignores the
    /// removal), so the refresh is the only read that sees that change.
    #[test]
    fn a_refresh_overtaken_by_an_event_read_keeps_the_newest_data() {
        let servers = shared_server().connect_string();
        let zkw = watcher(&servers);
        let other = raw(&servers, Duration::from_secs(4));
        let root = unique_root("review_tracker_order");
        zkutil::create_with_parents(&zkw, &root).unwrap();
        let node = format!("{root}/master");
        other
            .create(&node, b"one", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        let aborts = Arc::new(Aborts::default());
        let tracker = Arc::new(ZooKeeperNodeTracker::new(&zkw, &node, aborts.clone()));
        tracker.start().unwrap();
        assert_eq!(tracker.get_data(false).as_deref(), Some(&b"one"[..]));

        let overtaken = Arc::new(AtomicUsize::new(0));
        {
            let (t, zkw, other, node, overtaken) = (
                tracker.clone(),
                zkw.clone(),
                other.clone(),
                node.clone(),
                overtaken.clone(),
            );
            tracker.before_next_refresh_send(move || {
                other.set_data(&node, b"two", None).unwrap();
                wait_until(WAIT, "the tracker's event read stored 'two'", || {
                    t.get_data(false).as_deref() == Some(&b"two"[..])
                });
                zkw.zookeeper()
                    .remove_watches(&node, WatcherType::Data)
                    .unwrap();
                other.set_data(&node, b"three", None).unwrap();
                overtaken.fetch_add(1, Ordering::SeqCst);
            });
        }
        assert_eq!(tracker.get_data(true).as_deref(), Some(&b"three"[..]));
        assert_eq!(overtaken.load(Ordering::SeqCst), 1, "the hook ran");
        assert_eq!(
            tracker.get_data(false).as_deref(),
            Some(&b"three"[..]),
            "the tracker kept the event read's older answer over the refresh's newer one"
        );
        assert_eq!(
            tracker
                .block_until_available(Duration::ZERO, false)
                .unwrap()
                .as_deref(),
            Some(&b"three"[..])
        );
        assert!(!aborts.is_aborted(), "{:?}", aborts.0.lock().unwrap());
        tracker.stop();
    }

    /// The blocking refresh, now made of asynchronous calls, keeps the
    /// `RecoverableZooKeeper`'s retry rule: a connection lost under it is retried
    /// (after the configured backoff), not reported.
    #[test]
    fn a_refresh_retries_a_lost_connection() {
        let proxy = FaultProxy::start(shared_server().connect_string()).unwrap();
        let zkw = watcher(&proxy.connect_string());
        let other = raw(&shared_server().connect_string(), Duration::from_secs(4));
        let root = unique_root("review_tracker_retry");
        zkutil::create_with_parents(&zkw, &root).unwrap();
        let node = format!("{root}/master");
        other
            .create(&node, b"one", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        let aborts = Arc::new(Aborts::default());
        let tracker = Arc::new(ZooKeeperNodeTracker::new(&zkw, &node, aborts.clone()));
        tracker.start().unwrap();
        other.set_data(&node, b"two", None).unwrap();
        wait_until(WAIT, "the tracker read 'two'", || {
            tracker.get_data(false).as_deref() == Some(&b"two"[..])
        });

        proxy.stall();
        let refresh = {
            let t = tracker.clone();
            thread::spawn(move || t.get_data(true))
        };
        other.set_data(&node, b"three", None).unwrap();
        // The refresh's read is on its way (or about to be) into the stalled link;
        // cutting the connection answers it with ConnectionLoss.
        thread::sleep(Duration::from_millis(200));
        proxy.reset();
        assert_eq!(refresh.join().unwrap().as_deref(), Some(&b"three"[..]));
        assert_eq!(tracker.get_data(false).as_deref(), Some(&b"three"[..]));
        assert!(!aborts.is_aborted(), "{:?}", aborts.0.lock().unwrap());
        tracker.stop();
    }
}

/// Issue 24: a tracker's blocking refresh waits for a connection as long as
/// the watcher's `with_connect_wait` says (HBase: any blocking call), not a
/// session timeout: here 300 ms against a 20 s session.
#[test]
fn a_blocking_refresh_follows_the_watchers_connect_wait() {
    use zklock::RetryConfig;
    let servers = shared_server().connect_string();
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(20))
        .with_connect_wait(Duration::from_millis(300))
        .with_request_timeout(Duration::from_millis(300))
        .with_retry(RetryConfig::default().with_max_attempts(0))
        .connect()
        .unwrap();
    assert_eq!(zkw.zookeeper().connect_wait(), Duration::from_millis(300));
    assert_eq!(
        zkw.zookeeper().request_timeout(),
        Duration::from_millis(300)
    );
    let aborts = Arc::new(CountingAbortable::default());
    let node = format!("{}/followed", unique_root("tracker-connect-wait"));
    let tracker = ZooKeeperNodeTracker::new(&zkw, &node, aborts.clone());
    tracker.start().unwrap();
    // The server becomes unreachable: the client reconnects in vain.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    proxy.set_target(dead_addr).unwrap();
    proxy.cut();
    eventually("the client is disconnected", || {
        zkw.state() != zklock::client::State::Connected
    });
    let started = Instant::now();
    assert_eq!(tracker.get_data(true), None);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "the refresh waited {took:?}, not the 300 ms connect wait"
    );
    assert!(
        aborts
            .last_error()
            .is_some_and(|e| e.is(ZkError::ConnectionLoss)),
        "{:?}",
        aborts.last()
    );
    tracker.stop();
    // No server reachable: close() says it could not close the session.
    let e = zkw.close().unwrap_err();
    assert!(e.is(ZkError::ConnectionLoss), "{e}");
}

// ---------------------------------------------------------------------------
// Issue 31, item 6: a tracker's state changes before any user listener hears
// the same event
// ---------------------------------------------------------------------------

/// What a user listener saw of a tracker on the event thread: the event,
/// `get_data(false)` and `block_until_available(50 ms, false)`.
type Read = (EventType, Option<Vec<u8>>, Option<Vec<u8>>);

/// A user listener registered on the watcher after a tracker of `node` (as
/// ported code's listeners are): on each event on `node` it reads the tracker
/// from the event thread, notes what it saw, runs the test's step (if any),
/// then hands the event on, as HBase's `TestingZKListener` counts down its
/// latch.
struct TrackerReader {
    node: String,
    tracker: Arc<ZooKeeperNodeTracker>,
    step: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    seen: Mutex<Vec<Read>>,
    cv: Condvar,
}

impl TrackerReader {
    fn new(zkw: &ZooKeeperWatcher, tracker: &Arc<ZooKeeperNodeTracker>) -> Arc<TrackerReader> {
        let r = Arc::new(TrackerReader {
            node: tracker.get_node().to_string(),
            tracker: tracker.clone(),
            step: Mutex::new(None),
            seen: Mutex::new(Vec::new()),
            cv: Condvar::new(),
        });
        zkw.register_listener(r.clone());
        r
    }

    fn read(&self, t: EventType, path: &str) {
        if path != self.node {
            return;
        }
        let data = self.tracker.get_data(false);
        let available = self
            .tracker
            .block_until_available(Duration::from_millis(50), false)
            .expect("the session lives");
        let step = self.step.lock().take();
        if let Some(step) = step {
            step();
        }
        self.seen.lock().push((t, data, available));
        self.cv.notify_all();
    }

    /// Waits (at most `WAIT`) for the `n`-th event and returns what the
    /// listener saw then.
    fn wait(&self, n: usize) -> Read {
        let deadline = Instant::now() + WAIT;
        let mut seen = self.seen.lock();
        while seen.len() < n {
            assert!(
                !self.cv.wait_until(&mut seen, deadline).timed_out(),
                "event {n} never reached the listener"
            );
        }
        seen[n - 1].clone()
    }
}

impl ZooKeeperListener for TrackerReader {
    fn node_created(&self, path: &str) {
        self.read(EventType::NodeCreated, path);
    }
    fn node_deleted(&self, path: &str) {
        self.read(EventType::NodeDeleted, path);
    }
    fn node_data_changed(&self, path: &str) {
        self.read(EventType::NodeDataChanged, path);
    }
}

/// The setting of the tracker-order tests: a node `<root>/<leaf>` that
/// another session created with `data`, a started tracker of it (seen to
/// hold `data`), and a listener that reads the tracker on every event.
struct Watched {
    zkw: ZooKeeperWatcher,
    root: String,
    node: String,
    other: zklock::client::ZooKeeper,
    abortable: Arc<CountingAbortable>,
    tracker: Arc<ZooKeeperNodeTracker>,
    reader: Arc<TrackerReader>,
}

impl Watched {
    fn new(name: &str, leaf: &str, data: &[u8]) -> Watched {
        let (zkw, root) = setup(name);
        let node = format!("{root}/{leaf}");
        let other = raw_session(&test_servers(), SESSION);
        other
            .create(&node, data, Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        let abortable = Arc::new(CountingAbortable::default());
        let tracker = Arc::new(ZooKeeperNodeTracker::new(&zkw, &node, abortable.clone()));
        tracker.start().unwrap();
        assert_eq!(tracker.get_data(false).as_deref(), Some(data));
        let reader = TrackerReader::new(&zkw, &tracker);
        Watched {
            zkw,
            root,
            node,
            other,
            abortable,
            tracker,
            reader,
        }
    }

    /// Nothing aborted; the tracker stopped, the tree removed, both
    /// sessions closed.
    fn finish(self) {
        assert_eq!(self.abortable.calls(), 0);
        self.tracker.stop();
        zkutil::delete_node_recursively(&self.zkw, &self.root).unwrap();
        self.other.close().unwrap();
        self.zkw.close().unwrap();
    }
}

/// Issue 31, item 6 (HBase's `TestZooKeeperNodeTracker`, translated): a user
/// listener that hears `nodeDeleted` for a tracked node finds the tracker
/// empty, on the event thread as on the thread it wakes — HBase's tracker is
/// a listener registered first, whose `nodeDeleted` runs before the others.
/// (Before: the tracker was emptied only when its asynchronous `exists` came
/// back, after every listener had run: the listener read the old data, and
/// `block_until_available` returned it at once.) Then the node is created
/// again: the listener hearing `nodeCreated` finds no data yet (the read is in
/// flight; it is answered on the event thread, which the listener holds), and
/// the thread it wakes gets the new data from `get_data(false)`.
#[test]
fn a_listener_hearing_node_deleted_finds_the_tracker_empty() {
    let t = Watched::new("tracker-order-deleted", "master", b"old");
    let (node, other, tracker, reader) = (&t.node, &t.other, &t.tracker, &t.reader);

    other.delete(node, None).unwrap();
    assert_eq!(
        reader.wait(1),
        (EventType::NodeDeleted, None, None),
        "the listener read the deleted node's data from the tracker"
    );
    // HBase: `zkListener.waitForDeletion(); assertNull(localTracker.getData(false))`.
    assert_eq!(tracker.get_data(false), None);
    assert_eq!(
        tracker
            .block_until_available(Duration::from_millis(100), false)
            .unwrap(),
        None
    );

    other
        .create(node, b"new", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert_eq!(
        reader.wait(2),
        (EventType::NodeCreated, None, None),
        "on the event thread the re-read is not answered yet"
    );
    // HBase: `zkListener.waitForCreation(); localTracker.getData(false)`: the
    // woken thread waits for the tracker's re-read.
    assert_eq!(tracker.get_data(false).as_deref(), Some(&b"new"[..]));
    t.finish();
}

/// Issue 31, item 6: a user listener that hears `nodeDataChanged` for a
/// tracked node does not read the old data as current. On the event thread
/// (which answers the tracker's re-read, so cannot wait for it) the tracker
/// has no current data: `get_data(false)` is `None` and
/// `block_until_available` returns `None` at once. A thread the listener
/// wakes, which reads while the re-read's answer is provably queued behind
/// the listener (forced: the listener holds the event thread until the
/// answer is queued, then wakes the thread, then waits up to 1 s for it),
/// waits for that answer and gets the new data (before: the old data, at
/// once) — with `get_data(false)`, then, on a second change, with
/// `block_until_available(0, false)`.
#[test]
fn a_listener_hearing_node_data_changed_does_not_read_the_old_data() {
    let t = Watched::new("tracker-order-changed", "peer-state", b"one");
    let (node, other, tracker, reader) = (&t.node, &t.other, &t.tracker, &t.reader);

    type Getter = fn(&ZooKeeperNodeTracker) -> Option<Vec<u8>>;
    let rounds: [(&[u8], &[u8], Getter); 2] = [
        (b"one", b"two", |t| t.get_data(false)),
        (b"two", b"three", |t| {
            t.block_until_available(Duration::ZERO, false).unwrap()
        }),
    ];
    for (n, (old, new, read)) in rounds.into_iter().enumerate() {
        // The thread the listener wakes (HBase's test thread after
        // `waitForDataChange`).
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
        let (read_tx, read_rx) = std::sync::mpsc::channel::<Option<Vec<u8>>>();
        let woken = {
            let tracker = tracker.clone();
            thread::spawn(move || {
                go_rx.recv().unwrap();
                entered_tx.send(()).unwrap();
                let data = read(&tracker);
                let _ = read_tx.send(data.clone());
                data
            })
        };
        let while_held = Arc::new(Mutex::new(None));
        {
            let zk = t.zkw.zookeeper().clone();
            let while_held = while_held.clone();
            *reader.step.lock() = Some(Box::new(move || {
                // The tracker's re-read was sent before this listener ran;
                // its answer queues behind it.
                zklock::testing::wait_until(WAIT, "the re-read's answer is queued", || {
                    zk.queued_events() >= 1
                });
                go_tx.send(()).unwrap();
                entered_rx.recv().unwrap();
                *while_held.lock() = Some(read_rx.recv_timeout(Duration::from_secs(1)).ok());
            }));
        }

        other.set_data(node, new, None).unwrap();
        assert_eq!(
            reader.wait(n + 1),
            (EventType::NodeDataChanged, None, None),
            "the listener read the old data {old:?} from the tracker as current"
        );
        assert_eq!(
            *while_held.lock(),
            Some(None),
            "round {n}: the woken thread answered while the re-read's answer was still queued"
        );
        assert_eq!(woken.join().unwrap().as_deref(), Some(new));
        assert_eq!(tracker.get_data(false).as_deref(), Some(new));
    }
    t.finish();
}

/// Issue 31, item 6: keeping the order costs no request: per event on the
/// node the tracker's session sends its one re-read (`getData` after a
/// creation or a change, `exists` after a deletion), counted by a server of
/// the test's own (`mntr`'s `zk_packets_received`), with the writes of the
/// other session: two packets per event, a few pings aside.
#[test]
fn the_tracker_order_costs_no_request_beyond_the_re_read() {
    let server = zklock::testing::ZkServer::start().expect("a server of the test's own");
    let servers = server.connect_string();
    let zkw = ZooKeeperWatcher::builder(&servers)
        .with_session_timeout(Duration::from_secs(30))
        .connect()
        .unwrap();
    let other = raw_session(&servers, Duration::from_secs(30));
    let node = "/counted";
    let tracker = ZooKeeperNodeTracker::new(&zkw, node, logging());
    tracker.start().unwrap();
    let rec = recorder(&zkw);
    let packets = || -> i64 {
        server.mntr().unwrap()["zk_packets_received"]
            .parse()
            .unwrap()
    };
    let before = packets();
    other
        .create(node, b"v0", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert!(rec.wait_for(EventType::NodeCreated, node, 1));
    assert_eq!(tracker.get_data(false).as_deref(), Some(&b"v0"[..]));
    const CHANGES: usize = 5;
    for i in 1..=CHANGES {
        let v = format!("v{i}");
        other.set_data(node, v.as_bytes(), None).unwrap();
        assert!(rec.wait_for(EventType::NodeDataChanged, node, i));
        assert_eq!(tracker.get_data(false).as_deref(), Some(v.as_bytes()));
    }
    other.delete(node, None).unwrap();
    assert!(rec.wait_for(EventType::NodeDeleted, node, 1));
    assert_eq!(tracker.get_data(false), None);
    drain_event_thread(&zkw, 1);
    let after = packets();
    // `drain_event_thread`'s getChildren, the mntr connection's own (if counted).
    let events = CHANGES as i64 + 2;
    let sent = after - before - 1;
    println!("{events} events: {sent} packets at the server (writes and re-reads)");
    assert!(
        sent <= 2 * events + 3,
        "{sent} packets for {events} events: more than a write and a re-read each"
    );

    tracker.stop();
    other.close().unwrap();
    zkw.close().unwrap();
}

/// What a [`Refresher`] read: `get_data(true)`, then what a tracker it
/// started read.
type Refreshed = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A listener that refreshes the tracker on the event thread, as ported
/// code calls `getData(true)` from a listener.
struct Refresher {
    node: String,
    zkw: WeakZooKeeperWatcher,
    tracker: Arc<ZooKeeperNodeTracker>,
    abortable: Arc<CountingAbortable>,
    /// What `get_data(true)` returned, then what a tracker started here
    /// read.
    seen: Mutex<Vec<Refreshed>>,
    cv: Condvar,
}

impl ZooKeeperListener for Refresher {
    fn node_data_changed(&self, path: &str) {
        if path == self.node {
            let data = self.tracker.get_data(true);
            let fresh = self.zkw.upgrade().map(|zkw| {
                let t = ZooKeeperNodeTracker::new(&zkw, &self.node, self.abortable.clone());
                t.start().expect("started on the event thread");
                t.get_data(false)
            });
            self.seen.lock().push((data, fresh.flatten()));
            self.cv.notify_all();
        }
    }
}

/// Issue 31, item 6 (what HBase users see on the event thread): a listener
/// that hears `nodeDataChanged` and calls `get_data(true)` gets the new data
/// with one round trip, as any ZooKeeper call from a listener does, and the
/// tracker holds it from then on. (Before: the refresh waited for an
/// asynchronous answer that only the event thread it held could deliver, so
/// it ran into the request timeout, told the `Abortable` of an
/// `OperationTimeout`, and returned the old data.) So does a tracker started
/// there.
#[test]
fn a_listener_refreshing_a_tracker_on_the_event_thread_gets_the_new_data() {
    let servers = test_servers();
    let zkw = ZooKeeperWatcher::builder(&servers)
        .with_session_timeout(Duration::from_secs(4))
        .with_request_timeout(Duration::from_secs(1))
        .with_retry(zklock::RetryConfig::default().with_max_attempts(0))
        .connect()
        .unwrap();
    let root = unique_root("tracker-order-refresh");
    zkutil::create_with_parents(&zkw, &root).unwrap();
    let node = format!("{root}/n");
    let other = raw_session(&servers, SESSION);
    other
        .create(&node, b"one", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let abortable = Arc::new(CountingAbortable::default());
    let tracker = Arc::new(ZooKeeperNodeTracker::new(&zkw, &node, abortable.clone()));
    tracker.start().unwrap();
    let refresher = Arc::new(Refresher {
        node: node.clone(),
        zkw: zkw.downgrade(),
        tracker: tracker.clone(),
        abortable: abortable.clone(),
        seen: Mutex::new(Vec::new()),
        cv: Condvar::new(),
    });
    let _registration = zkw.listen(refresher.clone());

    other.set_data(&node, b"two", None).unwrap();
    let deadline = Instant::now() + WAIT;
    let mut seen = refresher.seen.lock();
    while seen.is_empty() {
        assert!(!refresher.cv.wait_until(&mut seen, deadline).timed_out());
    }
    let two = Some(b"two".to_vec());
    assert_eq!(
        seen[0],
        (two.clone(), two),
        "refreshed, and started, on the event thread"
    );
    drop(seen);
    assert_eq!(abortable.calls(), 0, "{:?}", abortable.last());
    assert_eq!(tracker.get_data(false).as_deref(), Some(&b"two"[..]));

    tracker.stop();
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

/// Issue 47: a re-read that fails with the lost connection (the tracker's
/// `getData` after `NodeDataChanged`, and the deletion listener's re-set
/// watch, whose replies the partition held) is sent again after the
/// reconnect by the engine's held watch: nothing else sets the watch again
/// (the server dropped the watches of the closed connection; the client
/// registers one with its reply only), so without it the tracker would keep
/// the old data and the listener would never hear the deletion.
#[test]
fn a_re_read_lost_with_the_connection_is_sent_again_after_the_reconnect() {
    let _ = env_logger::builder().is_test(true).try_init();
    let proxy = FaultProxy::start(shared_server().connect_string()).unwrap();
    let zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(10))
        .connect()
        .unwrap();
    let root = unique_root("tracker-rearm");
    zkutil::create_with_parents(&zkw, &root).unwrap();
    let node = format!("{root}/n");
    let other = raw_session(&test_servers(), SESSION);
    other
        .create(&node, b"v1", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let abortable = Arc::new(CountingAbortable::default());
    let tracker = ZooKeeperNodeTracker::new(&zkw, &node, abortable.clone());
    tracker.start().unwrap();
    assert_eq!(tracker.get_data(false).as_deref(), Some(&b"v1"[..]));
    let listener = DeletionListener::new(&zkw, &node);
    assert!(listener.set_watch_if_node_exists().unwrap());

    // The change's re-reads reach the server; their replies are held.
    let sent = proxy.requests(4);
    proxy.set_mode_after(&[4], zklock::testing::ProxyMode::StallDownstream);
    other.set_data(&node, b"v2", None).unwrap();
    eventually("both re-reads are sent", || proxy.requests(4) >= sent + 2);
    // The connection is lost with them: ConnectionLoss, then a reconnect.
    proxy.reset();
    eventually("the tracker reads again after the reconnect", || {
        tracker.get_data(false).as_deref() == Some(&b"v2"[..])
    });
    other.set_data(&node, b"v3", None).unwrap();
    eventually("the tracker's watch is set again", || {
        tracker.get_data(false).as_deref() == Some(&b"v3"[..])
    });
    other.delete(&node, None).unwrap();
    assert!(
        listener.await_deletion(Some(WAIT)),
        "the deletion listener's watch is set again after the reconnect"
    );
    assert!(!listener.has_exception(), "{listener:?}");
    eventually("the tracker hears the deletion", || {
        tracker.get_data(false).is_none()
    });
    assert!(!zkw.is_expired(), "one session throughout");
    assert_eq!(abortable.calls(), 0, "nothing aborted");

    tracker.stop();
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}
