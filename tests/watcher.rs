//! `ZooKeeperWatcher`, `ZooKeeperListener`, `Abortable` and `PendingWatcher`
//! against a real ZooKeeper server (issue 4).
//!
//! Node events come from the server: a test sets a watch through the watcher's
//! default watcher (`exists(path, true)` and friends) and changes the node. A
//! listener registered last (the *sentinel*) tells the test when one event's
//! dispatch is complete, since listeners run one after another on the event
//! thread. The leak test (threads, connections, listeners) runs alone: see
//! [`common::Serial`].

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    force_expiry, init_log, ms, setup_root, thread_names, CountingAbortable, Serial, WAIT,
};
use zklock::client::{
    Acl, CreateMode, EventType, KeeperState, State, WatchedEvent, Watcher, ZooKeeper,
};
use zklock::testing::{
    eventually, four_letter, shared_server, test_servers, unique_root, wait_until, FaultProxy,
};
use zklock::{
    zkutil, Abortable, DeletionListener, Error, LoggingAbortable, PendingWatcher, RetryConfig,
    WeakZooKeeperWatcher, ZkError, ZooKeeperListener, ZooKeeperNodeTracker, ZooKeeperWatcher,
    DEFAULT_BASE_ZNODE,
};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

const SESSION: Duration = Duration::from_secs(6);
/// The client's event thread.
const EVENT_THREAD: &str = "zklock-event";

fn builder(servers: &str) -> zklock::ZooKeeperWatcherBuilder {
    ZooKeeperWatcher::builder(servers)
        .with_identifier("wtest")
        .with_session_timeout(SESSION)
        .with_retry(RetryConfig::default().with_sleep_interval(ms(10)))
}

fn watcher(servers: &str) -> ZooKeeperWatcher {
    builder(servers).connect().expect("connect")
}

/// One listener call: who, which callback, the path or connection state, and the
/// thread it ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    who: &'static str,
    what: String,
    thread: Option<String>,
}

type Log = Arc<Mutex<Vec<Call>>>;

/// A listener that logs every call; with `tx`, it also signals each call (the
/// sentinel).
struct Recorder {
    who: &'static str,
    path: Option<String>,
    log: Log,
    tx: Option<Mutex<Sender<String>>>,
    panics: bool,
}

impl Recorder {
    fn new(who: &'static str, path: Option<&str>, log: &Log) -> Arc<Recorder> {
        Arc::new(Recorder {
            who,
            path: path.map(str::to_owned),
            log: Arc::clone(log),
            tx: None,
            panics: false,
        })
    }

    fn sentinel(log: &Log) -> (Arc<Recorder>, Receiver<String>) {
        let (tx, rx) = mpsc::channel();
        let recorder = Arc::new(Recorder {
            who: "sentinel",
            path: None,
            log: Arc::clone(log),
            tx: Some(Mutex::new(tx)),
            panics: false,
        });
        (recorder, rx)
    }

    fn record(&self, what: String) {
        self.log.lock().unwrap().push(Call {
            who: self.who,
            what: what.clone(),
            thread: thread::current().name().map(str::to_owned),
        });
        if let Some(tx) = &self.tx {
            let _ = tx.lock().unwrap().send(what);
        }
        assert!(!self.panics, "{} panics on purpose", self.who);
    }
}

impl ZooKeeperListener for Recorder {
    fn node_created(&self, path: &str) {
        self.record(format!("created {path}"));
    }
    fn node_deleted(&self, path: &str) {
        self.record(format!("deleted {path}"));
    }
    fn node_data_changed(&self, path: &str) {
        self.record(format!("data {path}"));
    }
    fn node_children_changed(&self, path: &str) {
        self.record(format!("children {path}"));
    }
    fn connection_event(&self, event: &WatchedEvent) {
        self.record(format!("state {:?}", event.keeper_state));
    }
    fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }
}

fn as_listener(r: &Arc<Recorder>) -> Arc<dyn ZooKeeperListener> {
    Arc::clone(r) as Arc<dyn ZooKeeperListener>
}

/// Waits for the sentinel's next call, which must be `what`; returns the calls
/// logged since the last `take` (the whole dispatch of one event).
fn take(log: &Log, sentinel: &Receiver<String>, what: &str) -> Vec<(&'static str, String)> {
    let got = sentinel
        .recv_timeout(WAIT)
        .unwrap_or_else(|_| panic!("no {what:?} within {WAIT:?}"));
    assert_eq!(got, what);
    // Up to the sentinel's own entry: the event thread may already be telling
    // the next event (a reconnect follows a blip at once).
    let calls: Vec<_> = {
        let mut log = log.lock().unwrap();
        let end = log
            .iter()
            .position(|c| c.who == "sentinel" && c.what == what)
            .map_or(log.len(), |i| i + 1);
        log.drain(..end).collect()
    };
    for call in &calls {
        assert_eq!(call.thread.as_deref(), Some(EVENT_THREAD), "{call:?}");
    }
    calls.into_iter().map(|c| (c.who, c.what)).collect()
}

fn names(calls: &[(&'static str, String)]) -> Vec<&'static str> {
    calls.iter().map(|(who, _)| *who).collect()
}

/// Connection states seen by the sentinel, skipping node events, until `state`.
fn expect_state(sentinel: &Receiver<String>, state: KeeperState) {
    let want = format!("state {state:?}");
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match sentinel.recv_timeout(left) {
            Ok(got) if got == want => return,
            Ok(_) => {}
            Err(_) => panic!("no {want} within {WAIT:?}"),
        }
    }
}

// ---------------------------------------------------------------------------
// Identity
// ---------------------------------------------------------------------------

#[test]
fn identifier_is_prefix_dash_session_id_in_hex() {
    let _serial = Serial::shared();
    init_log();
    fn send_sync<T: Send + Sync + Clone + 'static>() {}
    send_sync::<ZooKeeperWatcher>();

    let zkw = watcher(&test_servers());
    let session = zkw.zookeeper().session_id();
    assert_ne!(session, 0);
    assert_eq!(zkw.identifier(), format!("wtest-0x{session:x}"));
    assert_eq!(zkw.prefix(), "wtest");
    assert_eq!(zkw.state(), State::Connected);
    assert!(format!("{zkw:?}").contains(&zkw.identifier()));
    // A clone is the same session.
    assert_eq!(zkw.clone().identifier(), zkw.identifier());
    zkw.close().unwrap();

    // HBase's constructor form; the default prefix is "zklock".
    let zkw = ZooKeeperWatcher::connect(&test_servers(), "svc", None).unwrap();
    assert_eq!(
        zkw.identifier(),
        format!("svc-0x{:x}", zkw.zookeeper().session_id())
    );
    zkw.close().unwrap();
    let zkw = ZooKeeperWatcher::builder(&test_servers())
        .connect()
        .unwrap();
    assert!(
        zkw.identifier().starts_with("zklock-0x"),
        "{}",
        zkw.identifier()
    );
    zkw.close().unwrap();
}

// ---------------------------------------------------------------------------
// PendingWatcher
// ---------------------------------------------------------------------------

#[test]
fn pending_watcher_delivers_events_from_before_prepare_after_it_in_order() {
    let _serial = Serial::shared();
    init_log();
    let servers = test_servers();
    let (other, root) = setup_root(&servers, "pending");
    let path = format!("{root}/n");

    // The client starts with a PendingWatcher and connects: its SyncConnected
    // event blocks the event thread in the PendingWatcher.
    let pending = Arc::new(PendingWatcher::new());
    let zk = ZooKeeper::builder(&servers)
        .with_session_timeout(SESSION)
        .start(Arc::clone(&pending))
        .unwrap();
    zk.wait_connected(WAIT).unwrap();
    // A watch through the default watcher, fired by another session. The server
    // queues the notification before the reply to our next call, so once that
    // call returns the client has received the event too.
    assert_eq!(zk.exists(&path, true).unwrap(), None);
    other
        .create(&path, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert!(zk.exists(&path, false).unwrap().is_some());

    let (tx, rx) = mpsc::channel();
    let real: Arc<dyn Watcher> = {
        let tx = Mutex::new(tx);
        Arc::new(move |e: WatchedEvent| {
            let _ = tx
                .lock()
                .unwrap()
                .send((e, thread::current().name().map(str::to_owned)));
        })
    };
    // Nothing gets through before prepare ...
    assert_eq!(
        rx.recv_timeout(ms(100)).err(),
        Some(RecvTimeoutError::Timeout)
    );
    assert!(!pending.is_prepared());
    pending.prepare(Arc::downgrade(&real)).unwrap();
    // ... then both events, in order, on the event thread.
    let expected = [
        WatchedEvent::state(KeeperState::SyncConnected),
        WatchedEvent::node(EventType::NodeCreated, path.clone()),
    ];
    // (The zxid a 3.9 server gives a node event is not compared.)
    let seen = |e: &WatchedEvent| (e.event_type, e.keeper_state, e.path.clone());
    for want in expected {
        let (got, thread) = rx.recv_timeout(WAIT).expect("a held event");
        assert_eq!(seen(&got), seen(&want));
        assert_eq!(thread.as_deref(), Some(EVENT_THREAD));
    }
    // Later events go straight through.
    zk.exists(&path, true).unwrap();
    other.delete(&path, None).unwrap();
    let (got, _) = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(
        seen(&got),
        seen(&WatchedEvent::node(EventType::NodeDeleted, path.clone()))
    );
    zk.close().unwrap();
    let (got, _) = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(got, WatchedEvent::state(KeeperState::Closed));
    assert_eq!(rx.try_recv().err(), Some(mpsc::TryRecvError::Empty));
}

// ---------------------------------------------------------------------------
// Connection events and expiry
// ---------------------------------------------------------------------------

#[test]
fn disconnected_and_sync_connected_reach_the_listeners() {
    let _serial = Serial::shared();
    init_log();
    let proxy = FaultProxy::start(shared_server().connect_string()).unwrap();
    let zkw = watcher(&proxy.connect_string());
    let identifier = zkw.identifier();
    let log = Log::default();
    let (sentinel, rx) = Recorder::sentinel(&log);
    let general = Recorder::new("general", None, &log);
    let by_path = Recorder::new("by_path", Some("/some/path"), &log);
    zkw.register_listener(as_listener(&general));
    zkw.register_listener(as_listener(&by_path));
    zkw.register_listener(as_listener(&sentinel));
    // A connection blip: the session survives.
    proxy.reset();
    assert_eq!(
        take(&log, &rx, "state Disconnected"),
        [
            ("general", "state Disconnected".to_owned()),
            ("by_path", "state Disconnected".to_owned()),
            ("sentinel", "state Disconnected".to_owned()),
        ],
        "every listener, path-indexed too, in order"
    );
    assert_eq!(
        names(&take(&log, &rx, "state SyncConnected")),
        ["general", "by_path", "sentinel"]
    );
    assert_eq!(
        zkw.identifier(),
        identifier,
        "same session, same identifier"
    );
    assert!(!zkw.is_expired());
    zkw.check_session().unwrap();
    zkw.recoverable_zookeeper().exists("/", false).unwrap();
    zkw.close().unwrap();
}

#[test]
fn expiry_aborts_exactly_once_and_ends_every_wait() {
    let _serial = Serial::shared();
    init_log();
    let (other, root) = setup_root(&shared_server().connect_string(), "expiry");
    let proxy = FaultProxy::start(shared_server().connect_string()).unwrap();
    let abortable = Arc::new(CountingAbortable::default());
    let zkw = builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(1))
        .with_abortable(Arc::clone(&abortable) as Arc<dyn Abortable>)
        .connect()
        .unwrap();
    let identifier = zkw.identifier();
    let log = Log::default();
    let (sentinel, rx) = Recorder::sentinel(&log);
    zkw.register_listener(as_listener(&sentinel));
    let owned = format!("{root}/ephemeral");
    zkw.recoverable_zookeeper()
        .create(&owned, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();

    // A thread waiting on the watcher, as a lock or recipe waiter does: it
    // must learn.
    let barrier = zklock::recipes::barrier::Barrier::new(&zkw, &format!("{root}/barrier")).unwrap();
    barrier.set_barrier().unwrap();
    let waiter = thread::spawn(move || barrier.wait_on_barrier(Duration::from_secs(30)));

    // Partition until the server expires the session. The client, hearing
    // nothing for a whole session timeout, declares the expiry itself while
    // still partitioned; healing afterwards changes nothing.
    proxy.stall();
    wait_until(WAIT, "the server expires the session", || {
        other.exists(&owned, false).unwrap().is_none()
    });
    wait_until(
        WAIT,
        "the client declares the expiry while partitioned",
        || abortable.calls() == 1,
    );
    expect_state(&rx, KeeperState::Expired);
    proxy.reset();

    match waiter.join().unwrap() {
        Err(e) if e.is(ZkError::SessionExpired) => {}
        other => panic!("the waiter should end with SessionExpired, got {other:?}"),
    }
    assert_eq!(abortable.calls(), 1);
    let (why, error) = abortable.last().unwrap();
    let code = error.and_then(|e| e.code());
    assert!(why.contains(&identifier), "{why}");
    assert_eq!(code, Some(ZkError::SessionExpired));
    assert!(zkw.is_expired());
    assert!(zkw.abortable().is_aborted());
    assert_eq!(zkw.state(), State::Expired);
    assert!(zkw.check_session().unwrap_err().is(ZkError::SessionExpired));
    assert!(zkw
        .recoverable_zookeeper()
        .exists("/", false)
        .unwrap_err()
        .is(ZkError::SessionExpired));
    // No replacement session, no second abort: not on close either.
    zkw.close().unwrap();
    zkw.close().unwrap();
    assert_eq!(abortable.calls(), 1);
}

// ---------------------------------------------------------------------------
// The listener registry
// ---------------------------------------------------------------------------

fn same(a: &Arc<dyn ZooKeeperListener>, b: &Arc<Recorder>) -> bool {
    std::ptr::eq(Arc::as_ptr(a) as *const u8, Arc::as_ptr(b) as *const u8)
}

fn assert_listeners(zkw: &ZooKeeperWatcher, expected: &[&Arc<Recorder>]) {
    let got = zkw.listeners();
    assert_eq!(zkw.number_of_listeners(), expected.len());
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(same(g, e), "listener {i} should be {}", e.who);
    }
}

#[test]
fn registry_register_first_unregister_and_unregister_all() {
    let _serial = Serial::shared();
    init_log();
    let zkw = watcher(&test_servers());
    let log = Log::default();
    let a = Recorder::new("a", None, &log);
    let b = Recorder::new("b", Some("/x"), &log);
    let c = Recorder::new("c", None, &log);
    let d = Recorder::new("d", Some("/y"), &log);
    let e = Recorder::new("e", Some("/x"), &log);
    let f = Recorder::new("f", None, &log);
    assert_listeners(&zkw, &[]);
    zkw.register_listener(as_listener(&a));
    zkw.register_listener(as_listener(&b));
    zkw.register_listener(as_listener(&c));
    zkw.register_listener(as_listener(&d));
    zkw.register_listener_first(as_listener(&e));
    zkw.register_listener_first(as_listener(&f));
    assert_listeners(&zkw, &[&f, &e, &a, &b, &c, &d]);

    let b_ref = as_listener(&b);
    assert!(zkw.unregister_listener(&b_ref));
    assert!(!zkw.unregister_listener(&b_ref), "already gone");
    let never = as_listener(&Recorder::new("never", Some("/x"), &log));
    assert!(!zkw.unregister_listener(&never));
    assert!(zkw.unregister_listener(&as_listener(&f)));
    drop((b_ref, never));
    assert_listeners(&zkw, &[&e, &a, &c, &d]);
    // Registered again: at the end.
    zkw.register_listener(as_listener(&b));
    assert_listeners(&zkw, &[&e, &a, &c, &d, &b]);

    zkw.unregister_all_listeners();
    assert_listeners(&zkw, &[]);
    // The registry holds no reference any more.
    for r in [&a, &b, &c, &d, &e, &f] {
        assert_eq!(Arc::strong_count(r), 1, "{}", r.who);
    }
    zkw.register_listener(as_listener(&c));
    assert_listeners(&zkw, &[&c]);
    zkw.close().unwrap();
}

#[test]
fn events_reach_listeners_in_registration_order_on_the_event_thread() {
    let _serial = Serial::shared();
    init_log();
    let servers = test_servers();
    let (_other, root) = setup_root(&servers, "order");
    let zkw = watcher(&servers);
    let rzk = zkw.recoverable_zookeeper().clone();
    let (x, y) = (format!("{root}/x"), format!("{root}/y"));
    let log = Log::default();
    // Registration order, path-indexed and general listeners mixed.
    let a = Recorder::new("a", None, &log);
    let b = Recorder::new("b", Some(&x), &log);
    let c = Recorder::new("c", None, &log);
    let d = Recorder::new("d", Some(&y), &log);
    let e = Recorder::new("e", Some(&x), &log);
    let f = Recorder::new("f", None, &log);
    let (sentinel, rx) = Recorder::sentinel(&log);
    zkw.register_listener(as_listener(&a));
    zkw.register_listener(as_listener(&b));
    zkw.register_listener(as_listener(&c));
    zkw.register_listener(as_listener(&d));
    zkw.register_listener(as_listener(&sentinel));
    zkw.register_listener_first(as_listener(&e));
    zkw.register_listener_first(as_listener(&f));
    assert_listeners(&zkw, &[&f, &e, &a, &b, &c, &d, &sentinel]);

    // Each callback, from real watches on the default watcher.
    let open = Acl::open_unsafe();
    assert_eq!(rzk.exists(&x, true).unwrap(), None);
    rzk.create(&x, b"", open, CreateMode::Persistent).unwrap();
    let on_x = ["f", "e", "a", "b", "c", "sentinel"];
    let calls = take(&log, &rx, &format!("created {x}"));
    assert_eq!(names(&calls), on_x);
    assert!(calls
        .iter()
        .all(|(_, what)| *what == format!("created {x}")));

    rzk.get_data(&x, true).unwrap();
    rzk.set_data(&x, b"1", None).unwrap();
    assert_eq!(names(&take(&log, &rx, &format!("data {x}"))), on_x);

    rzk.get_children(&x, true).unwrap();
    rzk.create(&format!("{x}/child"), b"", open, CreateMode::Persistent)
        .unwrap();
    assert_eq!(names(&take(&log, &rx, &format!("children {x}"))), on_x);

    // Path listeners see only their path.
    assert_eq!(rzk.exists(&y, true).unwrap(), None);
    rzk.create(&y, b"", open, CreateMode::Persistent).unwrap();
    assert_eq!(
        names(&take(&log, &rx, &format!("created {y}"))),
        ["f", "a", "c", "d", "sentinel"]
    );
    let z = format!("{root}/z");
    rzk.exists(&z, true).unwrap();
    rzk.create(&z, b"", open, CreateMode::Persistent).unwrap();
    assert_eq!(
        names(&take(&log, &rx, &format!("created {z}"))),
        ["f", "a", "c", "sentinel"]
    );

    // Unregistered listeners are no longer called; the others keep their order.
    assert!(zkw.unregister_listener(&as_listener(&a)));
    assert!(zkw.unregister_listener(&as_listener(&e)));
    rzk.exists(&x, true).unwrap();
    rzk.delete(&format!("{x}/child"), None).unwrap();
    rzk.delete(&x, None).unwrap();
    assert_eq!(
        names(&take(&log, &rx, &format!("deleted {x}"))),
        ["f", "b", "c", "sentinel"]
    );
    zkw.close().unwrap();
}

#[test]
fn a_panicking_listener_does_not_stop_the_others() {
    let _serial = Serial::shared();
    init_log();
    let servers = test_servers();
    let (other, root) = setup_root(&servers, "panic");
    let zkw = watcher(&servers);
    let log = Log::default();
    let path = format!("{root}/n");
    let panicky = |who, path: Option<&str>| {
        Arc::new(Recorder {
            who,
            path: path.map(str::to_owned),
            log: Arc::clone(&log),
            tx: None,
            panics: true,
        })
    };
    let first = panicky("panics-general", None);
    let ok = Recorder::new("ok", None, &log);
    let second = panicky("panics-path", Some(&path));
    let (sentinel, rx) = Recorder::sentinel(&log);
    for l in [&first, &ok, &second, &sentinel] {
        zkw.register_listener(as_listener(l));
    }
    // Twice: the event thread survives the panics.
    for what in ["created", "deleted"] {
        zkw.recoverable_zookeeper().exists(&path, true).unwrap();
        if what == "created" {
            other
                .create(&path, b"", Acl::open_unsafe(), CreateMode::Persistent)
                .unwrap();
        } else {
            other.delete(&path, None).unwrap();
        }
        assert_eq!(
            names(&take(&log, &rx, &format!("{what} {path}"))),
            ["panics-general", "ok", "panics-path", "sentinel"]
        );
    }
    assert_eq!(zkw.state(), State::Connected);
    zkw.check_session().unwrap();
    zkw.close().unwrap();
}

// ---------------------------------------------------------------------------
// Base znode, close
// ---------------------------------------------------------------------------

#[test]
fn base_znode_is_created_with_parents_only_when_asked() {
    let _serial = Serial::shared();
    init_log();
    let servers = test_servers();
    let (zk, root) = setup_root(&servers, "base");

    let default = watcher(&servers);
    assert_eq!(default.base_znode(), DEFAULT_BASE_ZNODE);
    assert_eq!(DEFAULT_BASE_ZNODE, "/zklock");
    default.close().unwrap();

    let not_asked = format!("{root}/not/asked");
    let zkw = builder(&servers)
        .with_base_znode(&not_asked)
        .connect()
        .unwrap();
    assert_eq!(zkw.base_znode(), not_asked);
    assert_eq!(zk.exists(&format!("{root}/not"), false).unwrap(), None);
    zkw.close().unwrap();

    let base = format!("{root}/a/b/base");
    for _ in 0..2 {
        // The second time it exists already: fine.
        let zkw = builder(&servers)
            .with_base_znode(&base)
            .with_create_base_znodes(true)
            .connect()
            .unwrap();
        assert_eq!(zkw.base_znode(), base);
        let stat = zk.exists(&base, false).unwrap().expect("base created");
        assert_eq!(stat.ephemeral_owner, 0, "persistent");
        assert_eq!(
            zkw.recoverable_zookeeper()
                .get_data(&base, false)
                .unwrap()
                .0,
            b""
        );
        zkw.close().unwrap();
    }
    assert!(zk.exists(&format!("{root}/a/b"), false).unwrap().is_some());

    for bad in ["relative", "/trailing/", "/a//b", ""] {
        match builder(&servers).with_base_znode(bad).connect() {
            Err(Error::BadArguments(_)) => {}
            other => panic!("{bad:?}: expected BadArguments, got {other:?}"),
        }
    }
}

#[test]
fn close_is_idempotent_and_drops_the_listeners() {
    let _serial = Serial::shared();
    init_log();
    let zkw = watcher(&test_servers());
    let clone = zkw.clone();
    let log = Log::default();
    let (sentinel, rx) = Recorder::sentinel(&log);
    let listener = Recorder::new("l", Some("/x"), &log);
    zkw.register_listener(as_listener(&listener));
    zkw.register_listener(as_listener(&sentinel));

    zkw.close().unwrap();
    // Listeners were told, then dropped.
    expect_state(&rx, KeeperState::Closed);
    assert_eq!(zkw.number_of_listeners(), 0);
    assert!(zkw.listeners().is_empty());
    assert_eq!(Arc::strong_count(&listener), 1);
    assert_eq!(Arc::strong_count(&sentinel), 1);

    zkw.close().unwrap();
    clone.close().unwrap();
    assert_eq!(zkw.state(), State::Closed);
    assert!(matches!(zkw.check_session(), Err(Error::Closed)));
    assert!(matches!(
        zkw.recoverable_zookeeper().exists("/", false),
        Err(Error::Closed)
    ));
    assert!(!zkw.is_expired());
    assert_eq!(
        rx.try_recv().err(),
        Some(mpsc::TryRecvError::Empty),
        "one Closed"
    );
}

/// `PendingWatcher` holds a `Weak`: a dropped watcher is freed even while its
/// client delivers events (no `Arc` cycle through the default watcher).
#[test]
fn dropping_the_last_handle_frees_the_watcher() {
    let _serial = Serial::shared();
    init_log();
    let abortable = Arc::new(CountingAbortable::default());
    let zkw = builder(&test_servers())
        .with_abortable(Arc::clone(&abortable) as Arc<dyn Abortable>)
        .connect()
        .unwrap();
    let weak: Weak<CountingAbortable> = Arc::downgrade(&abortable);
    assert_eq!(Arc::strong_count(&abortable), 2);
    let clone = zkw.clone();
    drop(zkw);
    assert_eq!(Arc::strong_count(&abortable), 2, "a clone keeps it");
    clone.recoverable_zookeeper().exists("/", false).unwrap();
    drop(clone);
    // The session closes in the background (the drop does not wait for
    // closeSession's answer); then the watcher is freed.
    wait_until(WAIT, "the watcher to be freed", || {
        Arc::strong_count(&abortable) == 1
    });
    assert_eq!(abortable.calls(), 0);
    drop(abortable);
    assert!(weak.upgrade().is_none());
}

/// `listen` returns a registration that unregisters on drop: the listener gets
/// no more events. `unregister` says whether it was still registered.
#[test]
fn a_listener_registration_unregisters_on_drop() {
    let _serial = Serial::shared();
    init_log();
    let servers = test_servers();
    let (zk, root) = setup_root(&servers, "registration");
    let zkw = watcher(&servers);
    let log = Log::default();
    let listener = Recorder::new("listener", None, &log);
    let registration = zkw.listen(as_listener(&listener));
    assert!(Arc::ptr_eq(
        registration.listener(),
        &as_listener(&listener)
    ));
    let (sentinel, rx) = Recorder::sentinel(&log);
    zkw.register_listener(as_listener(&sentinel));
    assert_eq!(zkw.number_of_listeners(), 2);

    let node = format!("{root}/n");
    assert!(zkw.zookeeper().exists(&node, true).unwrap().is_none());
    zk.create(&node, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let calls = take(&log, &rx, &format!("created {node}"));
    assert_eq!(names(&calls), ["listener", "sentinel"]);

    drop(registration);
    assert_eq!(zkw.number_of_listeners(), 1);
    assert_eq!(Arc::strong_count(&listener), 1, "no reference left");
    assert!(zkw.zookeeper().exists(&node, true).unwrap().is_some());
    zk.delete(&node, None).unwrap();
    let calls = take(&log, &rx, &format!("deleted {node}"));
    assert_eq!(names(&calls), ["sentinel"], "the dropped registration");

    // `unregister` reports; after `unregister_all_listeners` it was not.
    let registration = zkw.listen(as_listener(&listener));
    assert!(registration.unregister());
    let registration = zkw.listen(as_listener(&listener));
    zkw.unregister_all_listeners();
    assert!(!registration.unregister());
    // A registration does not keep the watcher: dropped after it, it is a no-op.
    let registration = zkw.listen(as_listener(&listener));
    let weak = zkw.downgrade();
    assert!(weak.upgrade().is_some());
    zk.delete(&root, None).unwrap();
    drop(zkw);
    assert!(weak.upgrade().is_none(), "the last user handle is gone");
    drop(registration);
    assert_eq!(Arc::strong_count(&listener), 1);
    zk.close().unwrap();
}

// ---------------------------------------------------------------------------
// Leaks (was tests/watcher_leaks.rs): no leaked threads, connections or
// listeners, `ZooKeeperWatcher`s opened and closed (or dropped). The test runs
// alone ([`Serial::exclusive`]; every other test here takes [`Serial::shared`]
// first) so that no other test's sessions move the server's `cons`, and counts
// only its own and the client's threads (see [`threads`]).
// ---------------------------------------------------------------------------

/// The threads the leak test counts: the client's (`zklock-*`) and those named
/// like the calling test's thread. On Linux a thread spawned without a name
/// inherits its creator's, so every thread the library could start — from the
/// test's thread or from its own — is counted, as when the test was alone in its
/// binary. Not counted: the other tests' threads, which libtest names after
/// their tests and which wait on [`Serial`] (or are ending) meanwhile.
fn threads() -> usize {
    let me = std::fs::read_to_string("/proc/thread-self/comm").expect("/proc/thread-self/comm");
    let me = me.trim();
    thread_names()
        .iter()
        .filter(|n| n.starts_with("zklock") || n.as_str() == me)
        .count()
}

/// Asserts this process has `expected` threads. A thread that `join` has
/// returned for can stay listed in /proc/self/task for a moment until the
/// kernel reaps it, so the count gets a short bounded time to settle: a thread
/// that is really left behind still fails.
fn assert_threads(expected: usize, what: &str) {
    eventually(Duration::from_secs(2), || threads() == expected);
    assert_eq!(threads(), expected, "{what}: {:?}", thread_names());
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
    // Alone in the process while it counts: no other test's threads or sessions.
    let _serial = Serial::exclusive();
    init_log();
    let server = shared_server().connect_string();
    let listener = Arc::new(Counting(AtomicUsize::new(0)));
    let abortable = Arc::new(Counting(AtomicUsize::new(0)));
    // Warm up (lazy statics, the server's first session), then the baseline.
    open(&server, &listener, &abortable).close().unwrap();
    // Sessions other tests dropped close in the background: let them finish.
    wait_until(Duration::from_secs(10), "no background close left", || {
        !thread_names().iter().any(|n| n == "zklock-close")
    });
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
        assert_threads(
            base_threads,
            "the last drop ends the threads (in the background)",
        );
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

// ---------------------------------------------------------------------------
// Session renewal (opt-in)
// ---------------------------------------------------------------------------

#[test]
fn session_renewal_after_a_forced_expiry_makes_locks_and_trackers_work_again() {
    use zklock::lock::{InterProcessLock, LockEvent, ZkInterProcessWriteLock};

    let _serial = Serial::shared();
    init_log();
    // Through a proxy: the forced expiry below must not race a reconnect.
    let servers = shared_server().connect_string();
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let aborts = Arc::new(CountingAbortable::default());
    let zkw = builder(&proxy.connect_string())
        .with_abortable(aborts.clone())
        .with_session_renewal(true)
        .connect()
        .unwrap();
    let (other, root) = setup_root(&servers, "renewal");
    let old_id = zkw.zookeeper().session_id();

    /// Notes connection events and renewals, in order.
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);
    impl ZooKeeperListener for Seen {
        fn connection_event(&self, e: &WatchedEvent) {
            self.0.lock().unwrap().push(format!("{:?}", e.keeper_state));
        }
        fn session_renewed(&self) {
            self.0.lock().unwrap().push("renewed".into());
        }
    }
    let seen = Arc::new(Seen::default());
    zkw.register_listener(seen.clone());

    // A held lock with a listener, and a tracker on a node.
    let lock_events: Arc<Mutex<Vec<LockEvent>>> = Arc::default();
    let le = lock_events.clone();
    let lock = ZkInterProcessWriteLock::new(&zkw, &format!("{root}/lock"), b"me", None)
        .unwrap()
        .with_lock_listener(move |_p: &str, e: LockEvent| le.lock().unwrap().push(e));
    lock.acquire().unwrap();
    let tracked = format!("{root}/tracked");
    other
        .create(&tracked, b"v1", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let tracker = ZooKeeperNodeTracker::new(&zkw, &tracked, Arc::new(LoggingAbortable::new()));
    tracker.start().unwrap();
    assert_eq!(tracker.get_data(false).as_deref(), Some(&b"v1"[..]));

    // Force the expiry: while the client is cut off, a second handle on the
    // same session closes it; the reconnect then learns it expired.
    force_expiry(&proxy, &servers, &zkw);

    // Everyone hears the end, then the new session is announced.
    wait_until(WAIT, "the renewal", || {
        seen.0.lock().unwrap().iter().any(|s| s == "renewed")
    });
    let order = seen.0.lock().unwrap().clone();
    let expired = order
        .iter()
        .position(|s| s == "Expired")
        .expect("Expired told");
    let renewed = order.iter().position(|s| s == "renewed").unwrap();
    assert!(expired < renewed, "{order:?}");
    assert_eq!(order[renewed - 1], "SyncConnected", "{order:?}");
    let new_id = zkw.zookeeper().session_id();
    assert_ne!(new_id, old_id);
    assert_eq!(zkw.state(), State::Connected);
    assert!(!zkw.is_expired());
    assert_eq!(aborts.calls(), 0, "renewal replaces the abort");
    assert!(zkw.identifier().ends_with(&format!("0x{new_id:x}")));

    // The held lock was lost, is never silently re-held, and works again.
    // (InDoubt first when the client noticed the cut before the reconnect.)
    let events = lock_events.lock().unwrap().clone();
    assert_eq!(events.last(), Some(&LockEvent::Lost), "{events:?}");
    assert_eq!(events.iter().filter(|e| **e == LockEvent::Lost).count(), 1);
    assert!(!lock.is_held());
    assert!(matches!(lock.release(), Err(Error::LockLost { .. })));
    lock.acquire().unwrap();
    assert!(lock.is_held());
    assert_eq!(
        lock.acquired_lock().map(|a| a.czxid > 0),
        Some(true),
        "a new grant"
    );
    lock.release().unwrap();

    // The tracker reads again on the new session and follows changes.
    other.set_data(&tracked, b"v2", None).unwrap();
    wait_until(WAIT, "the tracker to follow on the new session", || {
        tracker.get_data(false).as_deref() == Some(&b"v2"[..])
    });
    other.set_data(&tracked, b"v3", None).unwrap();
    wait_until(WAIT, "the tracker's watch on the new session", || {
        tracker.get_data(false).as_deref() == Some(&b"v3"[..])
    });
    drop(tracker);
    zkw.close().unwrap();
    zkutil::delete_node_recursively(&common::watcher(), &root).unwrap();
}

#[test]
fn without_renewal_an_expiry_is_final_and_aborts() {
    let _serial = Serial::shared();
    init_log();
    let servers = shared_server().connect_string();
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let aborts = Arc::new(CountingAbortable::default());
    let zkw = builder(&proxy.connect_string())
        .with_abortable(aborts.clone())
        .connect()
        .unwrap();
    force_expiry(&proxy, &servers, &zkw);
    wait_until(WAIT, "the abort", || aborts.calls() == 1);
    assert!(zkw.is_expired());
    assert_eq!(zkw.state(), State::Expired);
    thread::sleep(ms(300)); // deliberate: nothing else may happen
    assert_eq!(zkw.state(), State::Expired, "no replacement session");
    zkw.close().unwrap();
}

/// Issue 50, item 5. Dropping a `ZooKeeperWatcher` after a `close()` that
/// no server confirmed (`ConnectionLoss`: the session may live on) returns at
/// once: the close is tried again in the background (the watcher's inner
/// state used to try it on the dropping thread, for the whole close bound,
/// 2 s). Once the server is reachable the retry closes the session: its
/// ephemeral node goes, as a second, direct client sees, long before the
/// server would have expired the session.
#[test]
fn dropping_a_watcher_after_a_failed_close_returns_at_once_and_retries_in_the_background() {
    let _serial = Serial::shared();
    init_log();
    let servers = shared_server().connect_string();
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zkw = builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(10))
        .connect()
        .unwrap();
    let other = ZooKeeper::connect(&servers, SESSION, |_e: WatchedEvent| {}).unwrap();
    other.wait_connected(WAIT).unwrap();
    let root = unique_root("drop_after_failed_close");
    zkutil::create_with_parents(&zkw, &root).unwrap();
    let node = format!("{root}/eph");
    zkw.recoverable_zookeeper()
        .create(&node, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    let (tx, gone) = mpsc::channel();
    let tx = Mutex::new(tx);
    assert!(other
        .exists_w(&node, move |e: WatchedEvent| {
            if e.event_type == EventType::NodeDeleted {
                let _ = tx.lock().unwrap().send(());
            }
        })
        .unwrap()
        .is_some());

    proxy.stall();
    let stalled = Instant::now();
    let e = zkw
        .close()
        .expect_err("close() without the server's answer");
    assert_eq!(e.code(), Some(ZkError::ConnectionLoss), "{e}");
    assert!(
        other.exists(&node, false).unwrap().is_some(),
        "the session lives on"
    );
    let t = Instant::now();
    drop(zkw);
    let took = t.elapsed();
    assert!(
        took < ms(300),
        "dropping the watcher after a failed close took {took:?}"
    );
    proxy.reset();
    gone.recv_timeout(WAIT)
        .expect("the background retry closed the session");
    // The server alone holds the session 10 s after the last ping it heard.
    let after = stalled.elapsed();
    assert!(
        after < Duration::from_secs(7),
        "the node went {after:?} after the stall: by the server's expiry, not the retried close"
    );
    let _ = zkutil::delete_node_recursively(&common::watcher(), &root);
    other.close().unwrap();
}

/// Dropping the last handle never waits on the network: during a blackhole
/// (closeSession unanswered, up to 2 s before) the drop of a watcher and of a
/// raw client returns at once; the session still closes, in the background.
/// `close()` stays the synchronous form.
#[test]
fn dropping_the_last_handle_during_a_blackhole_returns_at_once() {
    let _serial = Serial::shared();
    init_log();
    let proxy = FaultProxy::start(shared_server().connect_string()).unwrap();
    let zkw = watcher(&proxy.connect_string());
    let zk = ZooKeeper::connect(&proxy.connect_string(), SESSION, |_e: WatchedEvent| {}).unwrap();
    zk.wait_connected(WAIT).unwrap();
    let weak = zkw.downgrade();
    proxy.stall();
    let t = Instant::now();
    drop(zkw);
    drop(zk);
    let took = t.elapsed();
    // closeSession's answer was awaited up to 2 s on this thread before.
    assert!(took < ms(1000), "the drops took {took:?}");
    assert!(weak.upgrade().is_none(), "the last user handle is gone");
    // The background closes end by themselves (closeSession unanswered).
    wait_until(WAIT, "the background closes to end", || {
        !thread_names().iter().any(|n| n == "zklock-close")
    });
    proxy.reset();

    // close() is synchronous: when it returns, the session is closed.
    let zk = ZooKeeper::connect(&proxy.connect_string(), SESSION, |_e: WatchedEvent| {}).unwrap();
    zk.wait_connected(WAIT).unwrap();
    zk.close().unwrap();
    assert_eq!(zk.state(), State::Closed);
}
