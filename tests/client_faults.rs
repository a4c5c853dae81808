//! `zklock::client` under faults: partitions, cuts, server restarts, expiry, a
//! silent host, malformed input from a fake server, pipelining under cuts, and
//! the failure of the ensemble member a client is connected to.
//!
//! Issue 3, "Session and connection behaviour" 1–9. Every test that injects a
//! fault puts a `FaultProxy` (or its own server, or a fake server) between itself
//! and the client; the binary's shared server is never disturbed.

mod common;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::client::*;
use common::{member_of, retry_election};
use zklock::client::{
    Acl, AddWatchMode, CreateMode, EventType, KeeperState, ReplyKind, State, WatchedEvent,
    ZooKeeper,
};
use zklock::testing::{shared_server, unique_root, FaultProxy, ZkEnsemble, ZkServer};
use zklock::{Error, ZkError};

const WAIT: Duration = Duration::from_secs(10);

fn open() -> &'static [Acl] {
    Acl::open_unsafe()
}

fn server() -> String {
    count_client_thread_panics();
    shared_server().connect_string()
}

/// A client through a fresh proxy to the shared server.
fn via_proxy(session: Duration) -> (FaultProxy, ZooKeeper, Arc<Events>) {
    let proxy = FaultProxy::start(server()).unwrap();
    let (zk, events) = connect(&proxy.connect_string(), session);
    (proxy, zk, events)
}

fn no_client_panics() {
    assert_eq!(client_thread_panics(), 0, "a client thread panicked");
}

// ---------------------------------------------------------------------------
// 1. Read timeout, pings, next host
// ---------------------------------------------------------------------------

#[test]
fn a_stall_is_detected_within_the_read_timeout() {
    let (proxy, zk, events) = via_proxy(Duration::from_secs(4));
    assert_eq!(zk.session_timeout(), Duration::from_secs(4));
    let read_timeout = Duration::from_secs(4) * 2 / 3;
    let id = zk.session_id();
    zk.exists("/", false).unwrap();

    proxy.stall();
    let stalled = Instant::now();
    let r = zk.exists("/", false); // in flight when the link dies
    let took = stalled.elapsed();
    assert_code(r, ZkError::ConnectionLoss);
    assert!(
        took <= read_timeout + Duration::from_millis(500),
        "the in-flight call failed after {took:?} (read timeout {read_timeout:?})"
    );
    events.wait_state(KeeperState::Disconnected, 1, WAIT);
    let told = events.state_time(KeeperState::Disconnected, 0).unwrap() - stalled;
    assert!(
        told <= Duration::from_millis(3200),
        "Disconnected after {told:?}"
    );
    assert_eq!(zk.state(), State::Connecting);

    proxy.reset();
    events.wait_state(KeeperState::SyncConnected, 2, WAIT);
    assert_eq!(zk.session_id(), id, "same session after the reconnect");
    zk.exists("/", false).unwrap();
    assert_eq!(
        events.states(),
        [
            KeeperState::SyncConnected,
            KeeperState::Disconnected,
            KeeperState::SyncConnected
        ]
    );
    zk.close().unwrap();
    no_client_panics();
}

#[test]
fn pings_keep_a_session_alive_over_a_slow_link_with_calls_in_flight() {
    // Round trip 2 s on a 4 s session (read timeout 2.67 s): only pings sent every
    // 1.33 s, whether or not a call waits for its reply, keep bytes coming.
    let (proxy, zk, events) = via_proxy(Duration::from_secs(4));
    proxy.delay(Duration::from_secs(1));
    let start = Instant::now();
    let mut calls = 0;
    while start.elapsed() < Duration::from_secs(5) {
        let t = Instant::now();
        zk.exists("/", false).unwrap();
        assert!(
            t.elapsed() >= Duration::from_millis(1900),
            "{:?}",
            t.elapsed()
        );
        calls += 1;
        thread::sleep(Duration::from_millis(600)); // deliberate: idle gaps too
    }
    assert!(calls >= 2);
    assert_eq!(
        events.states(),
        [KeeperState::SyncConnected],
        "never disconnected"
    );
    proxy.pass();
    zk.close().unwrap();
}

#[test]
fn a_dead_host_makes_the_client_move_to_the_next_one() {
    let a = FaultProxy::start(server()).unwrap();
    let b = FaultProxy::start(server()).unwrap();
    let cs = format!("{},{}", a.connect_string(), b.connect_string());
    let (zk, events) = connect(&cs, Duration::from_secs(4));
    let id = zk.session_id();
    let (used, other) = if a.connections() == 1 {
        (&a, &b)
    } else {
        (&b, &a)
    };
    assert_eq!((used.connections(), other.connections()), (1, 0));
    used.stall();
    let t = Instant::now();
    events.wait_state(KeeperState::SyncConnected, 2, WAIT);
    // Read timeout (2.67 s), then the next host at once.
    assert!(
        t.elapsed() < Duration::from_millis(3700),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(other.connections(), 1);
    assert_eq!(zk.session_id(), id);
    zk.exists("/", false).unwrap();
    zk.close().unwrap();

    // The first connect attempt is bounded too (session timeout / hosts = 2 s):
    // with one host stalled, connecting always succeeds, whichever comes first.
    used.stall();
    let t = Instant::now();
    let (zk, _) = connect(&cs, Duration::from_secs(4));
    assert!(
        t.elapsed() < Duration::from_millis(3500),
        "{:?}",
        t.elapsed()
    );
    zk.close().unwrap();
    used.reset();
}

// ---------------------------------------------------------------------------
// 2. A host that accepts and never answers
// ---------------------------------------------------------------------------

#[test]
fn a_silent_host_hangs_neither_connect_nor_calls_nor_close() {
    init_log();
    count_client_thread_panics();
    // Accepts TCP (the kernel's backlog) and never reads or answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();

    let t = Instant::now();
    let r = ZooKeeper::connect(&addr, Duration::from_secs(2), |_e: WatchedEvent| {});
    assert_code(r, ZkError::ConnectionLoss);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(3000),
        "connect took {took:?}"
    );

    let events = Events::new();
    let zk = ZooKeeper::builder(&addr)
        .with_session_timeout(Duration::from_secs(2))
        .with_connect_wait(Duration::from_secs(1))
        .start(events.watcher())
        .unwrap();
    for _ in 0..2 {
        let t = Instant::now();
        assert_code(zk.exists("/", false), ZkError::ConnectionLoss);
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_millis(2000),
            "call took {took:?}"
        );
    }
    assert_code(
        zk.wait_connected(Duration::from_millis(300)),
        ZkError::ConnectionLoss,
    );
    assert_eq!(zk.state(), State::Connecting);
    let t = Instant::now();
    zk.close().unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "close took {:?}",
        t.elapsed()
    );
    assert_eq!(events.states(), [KeeperState::Closed]);

    // Same through a stalled proxy in front of a live server.
    let proxy = FaultProxy::start(server()).unwrap();
    proxy.stall();
    let t = Instant::now();
    let r = ZooKeeper::connect(
        &proxy.connect_string(),
        Duration::from_secs(2),
        |_e: WatchedEvent| {},
    );
    assert_code(r, ZkError::ConnectionLoss);
    assert!(
        t.elapsed() < Duration::from_millis(3000),
        "{:?}",
        t.elapsed()
    );
    drop(silent);
    no_client_panics();
}

// ---------------------------------------------------------------------------
// 3. Watches survive reconnects; a change in the gap is delivered once
// ---------------------------------------------------------------------------

/// The watches of [`arm`]: one recorder per kind.
struct Armed {
    data: Arc<Events>,
    exist: Arc<Events>,
    child: Arc<Events>,
    persistent: Arc<Events>,
    recursive: Arc<Events>,
}

fn arm(zk: &ZooKeeper, root: &str) -> Armed {
    let a = Armed {
        data: Events::new(),
        exist: Events::new(),
        child: Events::new(),
        persistent: Events::new(),
        recursive: Events::new(),
    };
    zk.get_data_w(&format!("{root}/d"), a.data.watcher())
        .unwrap();
    assert!(zk
        .exists_w(&format!("{root}/e"), a.exist.watcher())
        .unwrap()
        .is_none());
    zk.get_children_w(&format!("{root}/c"), a.child.watcher())
        .unwrap();
    zk.add_watch_w(
        &format!("{root}/p"),
        AddWatchMode::Persistent,
        a.persistent.watcher(),
    )
    .unwrap();
    zk.add_watch_w(
        &format!("{root}/r"),
        AddWatchMode::PersistentRecursive,
        a.recursive.watcher(),
    )
    .unwrap();
    a
}

fn make_nodes(zk: &ZooKeeper, root: &str) {
    for n in ["d", "c", "p", "r"] {
        zk.create(&format!("{root}/{n}"), b"", open(), CreateMode::Persistent)
            .unwrap();
    }
}

/// Changes every watched node from `other` and checks each watch fired once:
/// one-shot watches are spent, persistent ones keep going.
fn change_and_check(zk: &ZooKeeper, other: &ZooKeeper, root: &str, a: &Armed, round: usize) {
    other.set_data(&format!("{root}/d"), b"x", None).unwrap();
    other
        .create(&format!("{root}/e"), b"", open(), CreateMode::Persistent)
        .unwrap();
    other
        .create(
            &format!("{root}/c/k{round}"),
            b"",
            open(),
            CreateMode::Persistent,
        )
        .unwrap();
    other.set_data(&format!("{root}/p"), b"x", None).unwrap();
    other
        .create(
            &format!("{root}/r/k{round}"),
            b"",
            open(),
            CreateMode::Persistent,
        )
        .unwrap();
    a.data
        .wait_node(EventType::NodeDataChanged, &format!("{root}/d"), 1, WAIT);
    a.exist
        .wait_node(EventType::NodeCreated, &format!("{root}/e"), 1, WAIT);
    a.child.wait_node(
        EventType::NodeChildrenChanged,
        &format!("{root}/c"),
        1,
        WAIT,
    );
    a.persistent.wait_node(
        EventType::NodeDataChanged,
        &format!("{root}/p"),
        round,
        WAIT,
    );
    a.recursive.wait_node(
        EventType::NodeCreated,
        &format!("{root}/r/k{round}"),
        1,
        WAIT,
    );
    settle(zk);
    assert_eq!(a.data.nodes().len(), 1, "{:?}", a.data.all());
    assert_eq!(a.exist.nodes().len(), 1, "{:?}", a.exist.all());
    assert_eq!(a.child.nodes().len(), 1, "{:?}", a.child.all());
    assert_eq!(
        a.persistent.nodes().len(),
        round,
        "{:?}",
        a.persistent.all()
    );
    assert_eq!(a.recursive.nodes().len(), round, "{:?}", a.recursive.all());
    other.delete(&format!("{root}/e"), None).unwrap();
}

#[test]
fn watches_survive_a_short_cut() {
    let (proxy, zk, events) = via_proxy(Duration::from_secs(6));
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("cut");
    mkdirs(&other, &root);
    make_nodes(&other, &root);
    let a = arm(&zk, &root);
    let id = zk.session_id();
    let watches = zk.watch_count();

    // A 5 ms cut.
    proxy.cut();
    thread::sleep(Duration::from_millis(5)); // deliberate: the cut lasts 5 ms
    events.wait_state(KeeperState::SyncConnected, 2, WAIT);
    assert_eq!(zk.session_id(), id);
    assert_eq!(zk.watch_count(), watches);
    zk.exists("/", false).unwrap(); // SetWatches went first on this connection
    let addr = server();
    let mut w = wchc_paths(&addr, id);
    w.sort();
    let want = [
        format!("{root}/d"),
        format!("{root}/e"),
        format!("{root}/p"),
        format!("{root}/r"),
    ];
    assert_eq!(
        w, want,
        "data/exist/persistent watches set again on the server"
    );
    change_and_check(&zk, &other, &root, &a, 1);
    assert_eq!(
        events.states(),
        [
            KeeperState::SyncConnected,
            KeeperState::Disconnected,
            KeeperState::SyncConnected
        ]
    );

    // Deleting a watched node fires its watcher exactly once.
    let del = Events::new();
    zk.get_data_w(&format!("{root}/d"), del.watcher()).unwrap();
    proxy.cut();
    events.wait_state(KeeperState::SyncConnected, 3, WAIT);
    other.delete(&format!("{root}/d"), None).unwrap();
    del.wait_node(EventType::NodeDeleted, &format!("{root}/d"), 1, WAIT);
    settle(&zk);
    assert_eq!(del.nodes().len(), 1, "{:?}", del.all());
    zk.close().unwrap();
    rmr(&other, &root);
    other.close().unwrap();
    no_client_panics();
}

#[test]
fn a_change_made_during_the_gap_is_delivered_once() {
    let (proxy, zk, events) = via_proxy(Duration::from_secs(6));
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("gap");
    mkdirs(&other, &root);
    make_nodes(&other, &root);
    let a = arm(&zk, &root);
    // A persistent and a one-shot watch on one path, and a child watch on the
    // root of the recursive watch: all must survive the reconnect.
    let q = format!("{root}/q");
    other
        .create(&q, b"", open(), CreateMode::Persistent)
        .unwrap();
    let mixed_once = Events::new();
    let mixed_pers = Events::new();
    let rec_child = Events::new();
    zk.add_watch_w(&q, AddWatchMode::Persistent, mixed_pers.watcher())
        .unwrap();
    zk.get_data_w(&q, mixed_once.watcher()).unwrap();
    zk.get_children_w(&format!("{root}/r"), rec_child.watcher())
        .unwrap();
    let id = zk.session_id();

    // Partition; change everything; heal. Held notifications are dropped with
    // the old connection: only SetWatches can tell the client.
    proxy.stall();
    events.wait_state(KeeperState::Disconnected, 1, WAIT);
    other.set_data(&q, b"gap", None).unwrap();
    change_and_check_after_heal(&proxy, &zk, &other, &root, &a, &events);
    assert_eq!(zk.session_id(), id);
    // Persistent watches do not replay gap changes (ZooKeeper's SetWatches), but
    // keep working; the one-shot got the gap change once (and with it the
    // persistent watcher on the same path, as in Java's client).
    mixed_once.wait_node(EventType::NodeDataChanged, &q, 1, WAIT);
    mixed_pers.wait_node(EventType::NodeDataChanged, &q, 1, WAIT);
    other.set_data(&q, b"after", None).unwrap();
    other
        .set_data(&format!("{root}/p"), b"after", None)
        .unwrap();
    other
        .create(
            &format!("{root}/r/after"),
            b"",
            open(),
            CreateMode::Persistent,
        )
        .unwrap();
    mixed_pers.wait_node(EventType::NodeDataChanged, &q, 2, WAIT);
    a.persistent
        .wait_node(EventType::NodeDataChanged, &format!("{root}/p"), 1, WAIT);
    a.recursive
        .wait_node(EventType::NodeCreated, &format!("{root}/r/after"), 1, WAIT);
    rec_child.wait_node(
        EventType::NodeChildrenChanged,
        &format!("{root}/r"),
        1,
        WAIT,
    );
    settle(&zk);
    assert_eq!(mixed_once.nodes().len(), 1, "{:?}", mixed_once.all());
    assert_eq!(mixed_pers.nodes().len(), 2, "{:?}", mixed_pers.all());
    assert_eq!(rec_child.nodes().len(), 1, "{:?}", rec_child.all());
    assert_eq!(a.persistent.nodes().len(), 1, "{:?}", a.persistent.all());
    zk.close().unwrap();
    rmr(&other, &root);
    other.close().unwrap();
    no_client_panics();
}

/// Makes the changes while the client is partitioned, heals, and checks that
/// each one-shot watch fired exactly once.
fn change_and_check_after_heal(
    proxy: &FaultProxy,
    zk: &ZooKeeper,
    other: &ZooKeeper,
    root: &str,
    a: &Armed,
    events: &Events,
) {
    other.set_data(&format!("{root}/d"), b"gap", None).unwrap();
    other
        .create(&format!("{root}/e"), b"", open(), CreateMode::Persistent)
        .unwrap();
    other
        .create(
            &format!("{root}/c/gap"),
            b"",
            open(),
            CreateMode::Persistent,
        )
        .unwrap();
    other.set_data(&format!("{root}/p"), b"gap", None).unwrap();
    other
        .create(
            &format!("{root}/r/gap"),
            b"",
            open(),
            CreateMode::Persistent,
        )
        .unwrap();
    let connected = events
        .states()
        .iter()
        .filter(|s| **s == KeeperState::SyncConnected)
        .count();
    proxy.reset();
    events.wait_state(KeeperState::SyncConnected, connected + 1, WAIT);
    a.data
        .wait_node(EventType::NodeDataChanged, &format!("{root}/d"), 1, WAIT);
    a.exist
        .wait_node(EventType::NodeCreated, &format!("{root}/e"), 1, WAIT);
    a.child.wait_node(
        EventType::NodeChildrenChanged,
        &format!("{root}/c"),
        1,
        WAIT,
    );
    settle(zk);
    assert_eq!(a.data.nodes().len(), 1, "{:?}", a.data.all());
    assert_eq!(a.exist.nodes().len(), 1, "{:?}", a.exist.all());
    assert_eq!(a.child.nodes().len(), 1, "{:?}", a.child.all());
    assert_eq!(a.persistent.nodes().len(), 0, "{:?}", a.persistent.all());
    assert_eq!(a.recursive.nodes().len(), 0, "{:?}", a.recursive.all());
}

#[test]
fn more_watches_than_one_packet_holds_are_set_again_in_chunks() {
    // 5000 exist watches on 250-byte paths: 1.3 MB of paths, more than the
    // server takes in one packet (jute.maxbuffer, 1 MB).
    let (proxy, zk, events) = via_proxy(Duration::from_secs(10));
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("chunks");
    mkdirs(&other, &root);
    let prefix = format!("{root}/w");
    let pad = "x".repeat(250 - root.len() - 8);
    let path = move |i: usize| format!("{prefix}{i:05}-{pad}");
    assert_eq!(path(0).len(), 250);
    let n = 5000;
    let seen = Events::new();
    let w: Arc<dyn zklock::client::Watcher> = Arc::new(seen.watcher());
    let workers: Vec<_> = (0..4)
        .map(|k| {
            let (zk, w, path) = (zk.clone(), w.clone(), path.clone());
            thread::spawn(move || {
                for i in (k..n).step_by(4) {
                    assert!(zk.exists_watch(&path(i), w.clone()).unwrap().is_none());
                }
            })
        })
        .collect();
    for h in workers {
        h.join().unwrap();
    }
    assert_eq!(zk.watch_count(), n);
    let id = zk.session_id();

    proxy.stall();
    events.wait_state(KeeperState::Disconnected, 1, WAIT);
    let changed = [0, n / 2, n - 1];
    for i in changed {
        other
            .create(&path(i), b"", open(), CreateMode::Persistent)
            .unwrap();
    }
    proxy.reset();
    events.wait_state(KeeperState::SyncConnected, 2, WAIT);
    for i in changed {
        seen.wait_node(EventType::NodeCreated, &path(i), 1, WAIT);
    }
    zk.exists("/", false).unwrap(); // every SetWatches packet was handled
    settle(&zk);
    assert_eq!(seen.nodes().len(), changed.len(), "{:?}", seen.nodes());
    assert_eq!(zk.watch_count(), n - changed.len());
    assert_eq!(
        wchc_paths(&server(), id).len(),
        n - changed.len(),
        "set again on the server"
    );
    assert_eq!(
        events.states(),
        [
            KeeperState::SyncConnected,
            KeeperState::Disconnected,
            KeeperState::SyncConnected
        ],
        "one reconnect, not a loop of rejected packets"
    );
    // And they still fire.
    other
        .create(&path(1), b"", open(), CreateMode::Persistent)
        .unwrap();
    seen.wait_node(EventType::NodeCreated, &path(1), 1, WAIT);
    zk.close().unwrap();
    rmr(&other, &root);
    other.close().unwrap();
    no_client_panics();
}

#[test]
fn watches_and_session_survive_a_server_restart() {
    count_client_thread_panics();
    let mut own = ZkServer::start().unwrap();
    let proxy = FaultProxy::start(own.connect_string()).unwrap();
    let (zk, events) = connect(&proxy.connect_string(), Duration::from_secs(10));
    let root = unique_root("restart");
    mkdirs(&zk, &root);
    make_nodes(&zk, &root);
    let eph = zk
        .create(&format!("{root}/eph"), b"", open(), CreateMode::Ephemeral)
        .unwrap();
    let a = arm(&zk, &root);
    let id = zk.session_id();

    // Keep the client off the server while it restarts, and change things on the
    // new server before the client comes back.
    proxy.stall();
    own.restart().unwrap();
    let (other, _) = connect(&own.connect_string(), Duration::from_secs(10));
    assert!(
        other.exists(&eph, false).unwrap().is_some(),
        "the session survived the restart"
    );
    change_and_check_after_heal(&proxy, &zk, &other, &root, &a, &events);
    assert_eq!(zk.session_id(), id);
    assert_eq!(zk.state(), State::Connected);
    assert!(!events.states().contains(&KeeperState::Expired));

    // After the restart, every kind of watch still fires, once.
    let del = Events::new();
    zk.exists_w(&format!("{root}/d"), del.watcher()).unwrap();
    other.delete(&format!("{root}/d"), None).unwrap();
    other
        .set_data(&format!("{root}/p"), b"after", None)
        .unwrap();
    other
        .create(
            &format!("{root}/r/after"),
            b"",
            open(),
            CreateMode::Persistent,
        )
        .unwrap();
    del.wait_node(EventType::NodeDeleted, &format!("{root}/d"), 1, WAIT);
    a.persistent
        .wait_node(EventType::NodeDataChanged, &format!("{root}/p"), 1, WAIT);
    a.recursive
        .wait_node(EventType::NodeCreated, &format!("{root}/r/after"), 1, WAIT);
    settle(&zk);
    assert_eq!(del.nodes().len(), 1);
    zk.delete(&eph, None).unwrap();
    zk.close().unwrap();
    other.close().unwrap();
    no_client_panics();
}

#[test]
fn auth_is_replayed_after_a_reconnect() {
    let (proxy, zk, events) = via_proxy(Duration::from_secs(6));
    let root = unique_root("auth_replay");
    mkdirs(&zk, &root);
    zk.add_auth("digest", b"carol:pw").unwrap();
    let s = format!("{root}/secret");
    zk.create(&s, b"mine", Acl::creator_all(), CreateMode::Persistent)
        .unwrap();
    proxy.cut();
    events.wait_state(KeeperState::SyncConnected, 2, WAIT);
    assert_eq!(zk.get_data(&s, false).unwrap().0, b"mine");
    zk.set_data(&s, b"still mine", None).unwrap();
    zk.delete(&s, None).unwrap();
    rmr(&zk, &root);
    zk.close().unwrap();
}

#[test]
fn a_lost_reply_is_connection_loss_and_the_session_lives_on() {
    let (_proxy, zk, events) = via_proxy(Duration::from_secs(6));
    let root = unique_root("lost");
    mkdirs(&zk, &root);
    let id = zk.session_id();
    zk.lose_next_reply(ReplyKind::Create);
    let p = format!("{root}/n");
    assert_code(
        zk.create(&p, b"v", open(), CreateMode::Persistent),
        ZkError::ConnectionLoss,
    );
    // Applied by the server all the same.
    assert_eq!(zk.get_data(&p, false).unwrap().0, b"v");
    assert_eq!(zk.session_id(), id);
    events.wait_state(KeeperState::SyncConnected, 2, WAIT);
    assert_eq!(
        events
            .states()
            .iter()
            .filter(|s| **s == KeeperState::Disconnected)
            .count(),
        1
    );
    rmr(&zk, &root);
    zk.close().unwrap();
}

// ---------------------------------------------------------------------------
// 4. Expiry
// ---------------------------------------------------------------------------

#[test]
fn a_partition_longer_than_the_session_ends_in_expired_once() {
    let proxy = FaultProxy::start(server()).unwrap();
    let events = Events::new();
    let zk = ZooKeeper::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(2))
        .with_connect_wait(Duration::from_secs(20))
        .connect(events.watcher())
        .unwrap();
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("expiry");
    mkdirs(&other, &root);
    let eph = zk
        .create(&format!("{root}/eph"), b"", open(), CreateMode::Ephemeral)
        .unwrap();
    let id = zk.session_id();

    proxy.stall();
    events.wait_state(KeeperState::Disconnected, 1, WAIT);
    // A call made while disconnected waits for the outcome of the reconnect.
    let waiting = {
        let zk = zk.clone();
        thread::spawn(move || zk.exists("/", false))
    };
    let addr = server();
    wait_until(
        Duration::from_secs(15),
        "the server expires the session",
        || !dump_has_session(&addr, id),
    );
    assert!(
        other.exists(&eph, false).unwrap().is_none(),
        "ephemerals gone"
    );
    proxy.pass();
    events.wait_state(KeeperState::Expired, 1, WAIT);
    assert_code(waiting.join().unwrap(), ZkError::SessionExpired);
    assert_eq!(zk.state(), State::Expired);
    assert_code(zk.exists("/", false), ZkError::SessionExpired);
    assert_code(
        zk.create(&format!("{root}/x"), b"", open(), CreateMode::Persistent),
        ZkError::SessionExpired,
    );
    assert_code(
        zk.wait_connected(Duration::from_secs(1)),
        ZkError::SessionExpired,
    );
    assert_eq!(zk.session_id(), id);

    // No replacement session: the client stays off the server (deliberate
    // sleeps: nothing must happen meanwhile).
    thread::sleep(Duration::from_millis(700));
    wait_until(WAIT, "the client's connections are gone", || {
        proxy.connections() == 0
    });
    thread::sleep(Duration::from_millis(700));
    assert_eq!(
        proxy.connections(),
        0,
        "the client reconnected after expiry"
    );
    assert_eq!(
        events.states(),
        [
            KeeperState::SyncConnected,
            KeeperState::Disconnected,
            KeeperState::Expired
        ]
    );
    zk.close().unwrap();
    assert_eq!(
        events.states().len(),
        3,
        "nothing after Expired, not even Closed"
    );
    rmr(&other, &root);
    other.close().unwrap();
    no_client_panics();
}

#[test]
fn a_second_handle_closing_the_session_expires_the_first() {
    let (proxy, zk, events) = via_proxy(Duration::from_secs(10));
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("forced");
    mkdirs(&other, &root);
    let eph = zk
        .create(&format!("{root}/eph"), b"", open(), CreateMode::Ephemeral)
        .unwrap();
    let (id, pw) = (zk.session_id(), zk.session_password());

    proxy.stall(); // keep the first handle from taking the session back
    let second_events = Events::new();
    let second = ZooKeeper::connect_with_session(
        &server(),
        Duration::from_secs(10),
        second_events.watcher(),
        id,
        &pw,
    )
    .unwrap();
    assert_eq!(second.session_id(), id);
    assert_eq!(second.get_ephemerals(&root).unwrap(), vec![eph.clone()]);
    second.close().unwrap();
    assert!(
        other.exists(&eph, false).unwrap().is_none(),
        "closing ended the session"
    );

    proxy.reset();
    events.wait_state(KeeperState::Expired, 1, WAIT);
    assert_code(zk.get_data(&eph, false), ZkError::SessionExpired);
    settle_ms(300);
    let states = events.states();
    assert_eq!(
        states
            .iter()
            .filter(|s| **s == KeeperState::Expired)
            .count(),
        1
    );
    assert_eq!(states.last(), Some(&KeeperState::Expired));
    assert!(
        !states[1..].contains(&KeeperState::SyncConnected),
        "{states:?}"
    );
    zk.close().unwrap();
    rmr(&other, &root);
    other.close().unwrap();
}

/// Deliberate: gives an unwanted event time to show (nothing to wait for).
fn settle_ms(ms: u64) {
    thread::sleep(Duration::from_millis(ms));
}

// ---------------------------------------------------------------------------
// 5. Calls while disconnected; a busy client survives a blip like an idle one
// ---------------------------------------------------------------------------

#[test]
fn calls_while_disconnected_wait_a_bound_then_fail_or_go_through() {
    let proxy = FaultProxy::start(server()).unwrap();
    let ev_short = Events::new();
    let short = ZooKeeper::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(4))
        .with_connect_wait(Duration::from_secs(1))
        .connect(ev_short.watcher())
        .unwrap();
    let ev_long = Events::new();
    let long = ZooKeeper::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(4))
        .with_connect_wait(Duration::from_secs(8))
        .connect(ev_long.watcher())
        .unwrap();
    // Partitioned, with the connections gone: disconnected at once, and every
    // reconnect attempt hangs (well within the 4 s the server keeps the sessions).
    proxy.stall();
    proxy.cut();
    ev_short.wait_state(KeeperState::Disconnected, 1, WAIT);
    ev_long.wait_state(KeeperState::Disconnected, 1, WAIT);

    // Waits up to the connect wait, then ConnectionLoss.
    let t = Instant::now();
    assert_code(short.exists("/", false), ZkError::ConnectionLoss);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_millis(2000),
        "{took:?}"
    );

    // Goes through when the connection comes back in time.
    let call = {
        let long = long.clone();
        thread::spawn(move || {
            let t = Instant::now();
            (long.exists("/", false), t.elapsed())
        })
    };
    thread::sleep(Duration::from_millis(500)); // deliberate: the call waits meanwhile
    proxy.reset();
    let (r, took) = call.join().unwrap();
    assert!(r.unwrap().is_some());
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(4),
        "{took:?}"
    );
    short.exists("/", false).unwrap();
    short.close().unwrap();
    long.close().unwrap();
}

#[test]
fn a_busy_client_survives_a_blip_like_an_idle_one() {
    let proxy = FaultProxy::start(server()).unwrap();
    let (idle, idle_ev) = connect(&proxy.connect_string(), Duration::from_secs(6));
    let (busy, busy_ev) = connect(&proxy.connect_string(), Duration::from_secs(6));
    let root = unique_root("busy");
    mkdirs(&busy, &root);
    let ids = (idle.session_id(), busy.session_id());
    let watch = Events::new();
    idle.exists_w(&format!("{root}/w"), watch.watcher())
        .unwrap();
    busy.exists_w(&format!("{root}/w"), watch.watcher())
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let hammer: Vec<_> = (0..8)
        .map(|t| {
            let (busy, stop, ok, errors) = (busy.clone(), stop.clone(), ok.clone(), errors.clone());
            let p = format!("{root}/t{t}");
            thread::spawn(move || {
                busy.create(&p, b"", Acl::open_unsafe(), CreateMode::Persistent)
                    .unwrap();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let r = busy
                        .set_data(&p, &i.to_be_bytes(), None)
                        .and_then(|_| busy.get_data(&p, false));
                    match r {
                        Ok((d, _)) if d == i.to_be_bytes() => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok((d, _)) => panic!("thread {t} read {d:?}, wrote {i}"),
                        Err(e) => errors.lock().unwrap().push((Instant::now(), e)),
                    }
                }
            })
        })
        .collect();
    wait_until(WAIT, "the busy client is busy", || {
        ok.load(Ordering::Relaxed) > 200
    });

    // A 700 ms stall (below the 4 s read timeout): nobody notices but latency.
    proxy.stall();
    thread::sleep(Duration::from_millis(700)); // deliberate: the stall's length
    proxy.pass();
    let before = ok.load(Ordering::Relaxed);
    wait_until(WAIT, "progress after the stall", || {
        ok.load(Ordering::Relaxed) > before + 100
    });
    assert!(
        errors.lock().unwrap().is_empty(),
        "{:?}",
        errors.lock().unwrap()
    );
    assert_eq!(idle_ev.states(), [KeeperState::SyncConnected]);
    assert_eq!(busy_ev.states(), [KeeperState::SyncConnected]);

    // A cut: both reconnect once, same sessions; the busy threads see only
    // ConnectionLoss, then carry on.
    let cut_at = Instant::now();
    proxy.cut();
    idle_ev.wait_state(KeeperState::SyncConnected, 2, WAIT);
    busy_ev.wait_state(KeeperState::SyncConnected, 2, WAIT);
    let before = ok.load(Ordering::Relaxed);
    wait_until(WAIT, "progress after the cut", || {
        ok.load(Ordering::Relaxed) > before + 100
    });
    stop.store(true, Ordering::Relaxed);
    for h in hammer {
        h.join().unwrap();
    }
    for (at, e) in errors.lock().unwrap().iter() {
        assert!(e.is(ZkError::ConnectionLoss), "{e:?}");
        assert!(
            *at >= cut_at && *at - cut_at < Duration::from_secs(2),
            "an error {:?} after the cut",
            *at - cut_at
        );
    }
    for ev in [&idle_ev, &busy_ev] {
        assert_eq!(
            ev.states(),
            [
                KeeperState::SyncConnected,
                KeeperState::Disconnected,
                KeeperState::SyncConnected
            ]
        );
    }
    assert_eq!((idle.session_id(), busy.session_id()), ids);
    // Both handles' watches survived.
    busy.create(&format!("{root}/w"), b"", open(), CreateMode::Persistent)
        .unwrap();
    watch.wait_node(EventType::NodeCreated, &format!("{root}/w"), 2, WAIT);
    rmr(&busy, &root);
    idle.close().unwrap();
    busy.close().unwrap();
}

// ---------------------------------------------------------------------------
// 8. close() bounded during a stall
// ---------------------------------------------------------------------------

#[test]
fn close_and_drop_are_bounded_during_a_stall() {
    // Connected, then stalled: closeSession gets no answer.
    let (proxy, zk, events) = via_proxy(Duration::from_secs(4));
    proxy.stall();
    let t = Instant::now();
    // No server confirmed the close: it says so (issue 31).
    let e = zk.close().unwrap_err();
    assert_eq!(e.code(), Some(ZkError::ConnectionLoss), "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(2600),
        "close took {:?}",
        t.elapsed()
    );
    assert_eq!(zk.state(), State::Closed);
    assert_eq!(
        events.states(),
        [KeeperState::SyncConnected, KeeperState::Closed]
    );
    // A second close tries again, as bounded.
    let t = Instant::now();
    assert!(zk.close().is_err());
    assert!(
        t.elapsed() < Duration::from_millis(2600),
        "{:?}",
        t.elapsed()
    );
    drop(proxy);

    // Stalled long enough to be reconnecting (a handshake hangs): close is prompt.
    let (proxy, zk, events) = via_proxy(Duration::from_secs(4));
    proxy.stall();
    events.wait_state(KeeperState::Disconnected, 1, WAIT);
    // Deliberate: into the next handshake (no event marks it).
    thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    drop(zk); // the last handle
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "drop took {:?}",
        t.elapsed()
    );
    // The drop closes in the background (issue 20): Closed comes after it.
    events.wait_state(KeeperState::Closed, 1, WAIT);
    assert_eq!(
        events.states(),
        [
            KeeperState::SyncConnected,
            KeeperState::Disconnected,
            KeeperState::Closed
        ]
    );
    no_client_panics();
}

// ---------------------------------------------------------------------------
// 8b. Event order when a connection or the session ends (Java's)
// ---------------------------------------------------------------------------

/// One ordered log of what the event thread ran: state events and callbacks.
type Log = Arc<Mutex<Vec<String>>>;

/// A client through `proxy` whose default watcher logs its state events.
fn logged(proxy: &FaultProxy) -> (ZooKeeper, Log) {
    let log: Log = Arc::default();
    let l = log.clone();
    let zk = ZooKeeper::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(4))
        .connect(move |e: WatchedEvent| {
            if e.event_type == EventType::None {
                l.lock().unwrap().push(format!("{:?}", e.keeper_state));
            }
        })
        .unwrap();
    (zk, log)
}

/// The outcome's name: "ok", or the error code's name.
fn outcome<T>(r: &Result<T, Error>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => e
            .code()
            .map_or_else(|| format!("{e}"), |c| c.name().to_string()),
    }
}

/// Sends `n` exists_async on `/` (written, the proxy holding them), each
/// callback logging `cb{i}:{outcome}`; the first one also sends again at once
/// and logs that answer (`again:{outcome}`).
fn send_logged(zk: &ZooKeeper, log: &Log, n: usize) {
    for i in 0..n {
        let l = log.clone();
        let again = (i == 0).then(|| zk.clone());
        zk.exists_async("/", None, move |r| {
            l.lock().unwrap().push(format!("cb{i}:{}", outcome(&r)));
            if let Some(zk) = again {
                let l = l.clone();
                zk.exists_async("/", None, move |r| {
                    l.lock().unwrap().push(format!("again:{}", outcome(&r)));
                });
            }
        });
    }
}

/// Waits (bounded) until `log` holds every entry `done` asks for.
fn wait_log(log: &Log, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let until = Instant::now() + WAIT;
    loop {
        let now = log.lock().unwrap().clone();
        if done(&now) {
            return now;
        }
        assert!(Instant::now() < until, "log so far: {now:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

fn position(log: &[String], entry: &str) -> usize {
    log.iter()
        .position(|e| e == entry)
        .unwrap_or_else(|| panic!("{entry} not in {log:?}"))
}

#[test]
fn a_lost_connection_fails_the_callbacks_in_order_before_disconnected() {
    let proxy = FaultProxy::start(server()).unwrap();
    let (zk, log) = logged(&proxy);
    zk.exists("/", false).unwrap();
    // Five requests written and held by the partition, then the connection
    // drops (reconnects hang: the proxy still stalls).
    proxy.stall();
    send_logged(&zk, &log, 5);
    proxy.cut();
    let got = wait_log(&log, |l| {
        l.iter().any(|e| e == "Disconnected") && l.iter().any(|e| e.starts_with("again:"))
    });
    // Java's order (cleanAndNotifyState): every callback, in the order sent,
    // then Disconnected.
    let disconnected = position(&got, "Disconnected");
    let callbacks: Vec<usize> = (0..5)
        .map(|i| position(&got, &format!("cb{i}:ConnectionLoss")))
        .collect();
    assert!(
        callbacks.windows(2).all(|w| w[0] < w[1]),
        "callbacks out of the order sent: {got:?}"
    );
    assert!(
        callbacks.iter().all(|&c| c < disconnected),
        "a callback after Disconnected: {got:?}"
    );
    // The session was not connected any more when the first callback ran.
    position(&got, "again:ConnectionLoss");
    assert_eq!(got[0], "SyncConnected", "{got:?}");
    proxy.reset();
    wait_log(&log, |l| {
        l.iter().filter(|e| *e == "SyncConnected").count() == 2
    });
    zk.exists("/", false).unwrap();
    zk.close().unwrap();
    no_client_panics();
}

#[test]
fn a_lost_connection_then_expiry_tells_the_callbacks_then_disconnected_then_expired() {
    let proxy = FaultProxy::start(server()).unwrap();
    let log: Log = Arc::default();
    let l = log.clone();
    let zk = ZooKeeper::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(2))
        .connect(move |e: WatchedEvent| {
            if e.event_type == EventType::None {
                l.lock().unwrap().push(format!("{:?}", e.keeper_state));
            }
        })
        .unwrap();
    zk.exists("/", false).unwrap();
    // Requests held, the connection dropped, and no reconnect until the
    // session is over (the client finds it expired on its own).
    proxy.stall();
    send_logged(&zk, &log, 3);
    proxy.cut();
    let got = wait_log(&log, |l| l.iter().any(|e| e == "Expired"));
    let at = |entry: &str| position(&got, entry);
    assert!(
        at("cb0:ConnectionLoss") < at("cb1:ConnectionLoss")
            && at("cb1:ConnectionLoss") < at("cb2:ConnectionLoss")
            && at("cb2:ConnectionLoss") < at("Disconnected")
            && at("Disconnected") < at("Expired"),
        "{got:?}"
    );
    assert_eq!(zk.state(), State::Expired);
    // The client declared the expiry itself: close() asks the server, which
    // must be reachable for an Ok.
    proxy.reset();
    zk.close().unwrap();
    no_client_panics();
}

#[test]
fn close_fails_the_pending_callbacks_before_closed() {
    let proxy = FaultProxy::start(server()).unwrap();
    let (zk, log) = logged(&proxy);
    zk.exists("/", false).unwrap();
    // Requests and then closeSession held: close() ends the connection with
    // them unanswered.
    proxy.stall();
    send_logged(&zk, &log, 3);
    assert!(zk.close().is_err());
    let got = wait_log(&log, |l| l.iter().any(|e| e == "Closed"));
    // Java's order after close(): the cleanup (every callback, in the order
    // sent), then Closed; no Disconnected.
    let closed = position(&got, "Closed");
    let callbacks: Vec<usize> = (0..3)
        .map(|i| {
            got.iter()
                .position(|e| e.starts_with(&format!("cb{i}:")))
                .unwrap_or_else(|| panic!("cb{i} not in {got:?}"))
        })
        .collect();
    assert!(
        callbacks.windows(2).all(|w| w[0] < w[1]) && callbacks.iter().all(|&c| c < closed),
        "{got:?}"
    );
    assert!(!got.iter().any(|e| e == "Disconnected"), "{got:?}");
    no_client_panics();
}

// ---------------------------------------------------------------------------
// 9. Pipelining under cuts
// ---------------------------------------------------------------------------

#[test]
fn thirty_two_threads_under_cuts_every_700ms_each_get_their_own_replies() {
    let (proxy, zk, events) = via_proxy(Duration::from_secs(6));
    let root = unique_root("pipeline_cuts");
    mkdirs(&zk, &root);
    let id = zk.session_id();
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let losses = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..32)
        .map(|t| {
            let (zk, stop, ok, losses) = (zk.clone(), stop.clone(), ok.clone(), losses.clone());
            let dir = format!("{root}/t{t}");
            thread::Builder::new()
                .name(format!("worker{t}"))
                .spawn(move || worker(&zk, &dir, t, &stop, &ok, &losses))
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    let mut cuts = 0;
    while start.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(700)); // deliberate: a cut every 700 ms
        proxy.cut();
        cuts += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(30);
    for h in threads {
        wait_until(
            deadline.saturating_duration_since(Instant::now()),
            "a worker hangs",
            || h.is_finished(),
        );
        h.join().expect("a worker failed: see its panic message");
    }
    let ok = ok.load(Ordering::Relaxed);
    let losses = losses.load(Ordering::Relaxed);
    eprintln!("pipelining under {cuts} cuts: {ok} checked ops, {losses} connection losses");
    assert!(ok > 32 * 10, "too little progress: {ok}");
    assert!(losses > 0, "the cuts hit no call");
    assert_eq!(zk.session_id(), id);
    assert_eq!(zk.state(), State::Connected);
    let disconnects = events
        .states()
        .iter()
        .filter(|s| **s == KeeperState::Disconnected)
        .count();
    assert!(
        disconnects >= cuts / 2 && disconnects <= cuts,
        "{disconnects} disconnects for {cuts} cuts"
    );
    rmr(&zk, &root);
    zk.close().unwrap();
    no_client_panics();
}

/// One worker: creates, reads back, updates, lists and deletes nodes of its own,
/// with data only it writes; checks every reply is its own. A ConnectionLoss may
/// hide an applied write, so the next step tolerates exactly that.
fn worker(
    zk: &ZooKeeper,
    dir: &str,
    t: usize,
    stop: &AtomicBool,
    ok: &AtomicUsize,
    losses: &AtomicUsize,
) {
    let loss = |e: &Error| {
        assert!(
            e.is(ZkError::ConnectionLoss),
            "thread {t}: unexpected {e:?}"
        );
        losses.fetch_add(1, Ordering::Relaxed);
    };
    loop {
        match zk.create(dir, b"", Acl::open_unsafe(), CreateMode::Persistent) {
            Ok(p) => assert_eq!(p, dir),
            Err(e) if e.is(ZkError::NodeExists) => {}
            Err(e) => {
                loss(&e);
                continue;
            }
        }
        break;
    }
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let p = format!("{dir}/n{i}");
        let data = format!("{t}/{i}");
        let remove = |p: &str| loop {
            match zk.delete(p, None) {
                Ok(()) => break,
                Err(e) if e.is(ZkError::NoNode) => break, // a lost reply's delete
                Err(e) => loss(&e),
            }
        };
        match zk.create(
            &p,
            data.as_bytes(),
            Acl::open_unsafe(),
            CreateMode::Persistent,
        ) {
            Ok(created) => assert_eq!(created, p, "thread {t}"),
            Err(e) => {
                loss(&e); // maybe created all the same
                remove(&p);
                continue;
            }
        }
        match zk.get_data(&p, false) {
            Ok((d, st)) => {
                assert_eq!(d, data.as_bytes(), "thread {t} got another caller's reply");
                assert_eq!(st.data_length as usize, data.len());
            }
            Err(e) => loss(&e),
        }
        let updated = format!("{data}+");
        match zk.set_data(&p, updated.as_bytes(), Some(0)) {
            Ok(st) => assert_eq!(
                (st.version, st.data_length as usize),
                (1, updated.len()),
                "thread {t}"
            ),
            Err(e) => loss(&e),
        }
        match zk.get_children(dir, false) {
            Ok(children) => assert_eq!(children, vec![format!("n{i}")], "thread {t}"),
            Err(e) => loss(&e),
        }
        match zk.exists(&p, false) {
            Ok(Some(st)) => assert!(st.data_length as usize >= data.len(), "thread {t}"),
            Ok(None) => panic!("thread {t}: {p} vanished"),
            Err(e) => loss(&e),
        }
        remove(&p);
        ok.fetch_add(1, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------
// 7. Malformed input from a fake server
// ---------------------------------------------------------------------------

const FAKE_SESSION: i64 = 0x5e55_1011_0000_0001;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// The in-flight call fails with ConnectionLoss; the client reconnects.
    Reset,
    /// The in-flight call gets this code; the connection stays.
    Code(ZkError),
    /// The in-flight call succeeds; the connection stays.
    Fine,
}

/// Runs one malformed-input case: the fake server's first connection hands the
/// client `garbage` in answer to its first request (an `exists`); later
/// connections serve well. Checks the outcome, the reconnect with the same
/// session, and that everything stays bounded.
fn fake_case(name: &str, expect: Expect, garbage: fn(&mut TcpStream, i32)) {
    init_log();
    count_client_thread_panics();
    let sessions = Arc::new(Mutex::new(Vec::new()));
    let seen = sessions.clone();
    let fake = FakeServer::start(move |n, mut s| {
        let Ok((_, _, id)) = fake_handshake(&mut s, FAKE_SESSION) else {
            return;
        };
        seen.lock().unwrap().push(id);
        if n == 0 {
            let Ok((xid, _op)) = fake_next_request(&mut s) else {
                return;
            };
            garbage(&mut s, xid);
            if expect != Expect::Reset {
                fake_serve_well(s);
                return;
            }
            // Deliberate: hold the socket a while (a client that waits for more
            // must not hang).
            thread::sleep(Duration::from_secs(3));
            return;
        }
        fake_serve_well(s);
    });
    let events = Events::new();
    let zk = ZooKeeper::builder(&fake.addr)
        .with_session_timeout(Duration::from_secs(2))
        .with_connect_wait(Duration::from_secs(5))
        .connect(events.watcher())
        .unwrap();
    assert_eq!(zk.session_id(), FAKE_SESSION);
    let t = Instant::now();
    let r = zk.exists("/x", false);
    let took = t.elapsed();
    // At worst the read timeout (1.33 s) ends a connection that sent half a frame.
    assert!(
        took < Duration::from_millis(2500),
        "{name}: the call took {took:?}"
    );
    match expect {
        Expect::Reset => {
            assert_code(r, ZkError::ConnectionLoss);
        }
        Expect::Code(c) => {
            assert_code(r, c);
        }
        Expect::Fine => assert_eq!(r.unwrap().unwrap().version, 42, "{name}"),
    }
    // The client works afterwards (after reconnecting with its session, if reset).
    let t = Instant::now();
    assert_eq!(
        zk.exists("/x", false).unwrap().unwrap().version,
        42,
        "{name}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "{name}: {:?}",
        t.elapsed()
    );
    let seen = sessions.lock().unwrap().clone();
    match expect {
        Expect::Reset => {
            assert_eq!(
                seen,
                vec![0, FAKE_SESSION],
                "{name}: reconnect with the session"
            );
            events.wait_state(KeeperState::SyncConnected, 2, WAIT);
            assert_eq!(
                events.states(),
                [
                    KeeperState::SyncConnected,
                    KeeperState::Disconnected,
                    KeeperState::SyncConnected
                ],
                "{name}"
            );
        }
        _ => {
            assert_eq!(seen, vec![0], "{name}: no reconnect");
            assert_eq!(fake.accepted(), 1, "{name}");
        }
    }
    let t = Instant::now();
    zk.close().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "{name}: close took {:?}",
        t.elapsed()
    );
    no_client_panics();
}

#[test]
fn malformed_frames_reset_the_connection() {
    fake_case("eof mid-frame", Expect::Reset, |s, _| {
        let _ = s.write_all(&[0, 0, 0, 100, 1, 2, 3, 4, 5]);
        let _ = s.shutdown(std::net::Shutdown::Both);
    });
    fake_case("half a frame, then silence", Expect::Reset, |s, _| {
        let _ = s.write_all(&[0, 0, 0, 100, 1, 2, 3, 4, 5]);
    });
    fake_case("negative length", Expect::Reset, |s, _| {
        let _ = s.write_all(&(-5i32).to_be_bytes());
    });
    fake_case("huge length", Expect::Reset, |s, _| {
        let _ = s.write_all(&i32::MAX.to_be_bytes());
        let _ = s.write_all(&[0; 64]);
    });
    fake_case(
        "length shorter than a reply header",
        Expect::Reset,
        |s, _| {
            let _ = s.write_all(&frame(&[1, 2, 3]));
        },
    );
    fake_case(
        "reply with a reserved negative xid",
        Expect::Reset,
        |s, _| {
            let _ = s.write_all(&reply(i32::MIN, 0, 0, &[]));
        },
    );
}

#[test]
fn unexpected_xids_and_bad_strings_reset_the_connection() {
    fake_case("reply to an unknown xid", Expect::Reset, |s, xid| {
        let _ = s.write_all(&reply(xid + 1000, 1, 0, &stat_bytes(1)));
    });
    fake_case("non-UTF-8 path in a notification", Expect::Reset, |s, _| {
        let _ = s.write_all(&notification(3, b"/\xff\xfe\xfd"));
    });
    fake_case("truncated notification", Expect::Reset, |s, _| {
        let mut body = Vec::new();
        put_i32(&mut body, 3);
        put_i32(&mut body, 3);
        put_i32(&mut body, 100); // a 100-byte path that is not there
        let _ = s.write_all(&reply(-1, -1, 0, &body));
    });
    fake_case("seeded random garbage", Expect::Reset, |s, _| {
        let mut x: u32 = 0x2545_f491;
        let mut junk = Vec::new();
        // Frames with plausible lengths and random contents, then raw noise.
        for _ in 0..20 {
            let len = 16 + (x % 48) as usize;
            put_i32(&mut junk, len as i32);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                junk.push(x as u8);
            }
        }
        let _ = s.write_all(&junk);
    });
}

#[test]
fn odd_but_well_formed_replies_keep_the_connection() {
    fake_case(
        "reply body too short for a Stat",
        Expect::Code(ZkError::MarshallingError),
        |s, xid| {
            let _ = s.write_all(&reply(xid, 1, 0, &[0, 0, 0, 1, 2]));
        },
    );
    fake_case(
        "unknown error code",
        Expect::Code(ZkError::from_code(-9999)),
        |s, xid| {
            let _ = s.write_all(&reply(xid, 1, -9999, &[]));
        },
    );
    fake_case(
        "notification of an unknown type, then the reply",
        Expect::Fine,
        |s, xid| {
            let _ = s.write_all(&notification(99, b"/x"));
            let _ = s.write_all(&notification(1, b"/unwatched"));
            let _ = s.write_all(&reply(xid, 1, 0, &stat_bytes(42)));
        },
    );
}

#[test]
fn bad_handshakes_are_retried_with_backoff() {
    init_log();
    count_client_thread_panics();
    // Connection 0: a ConnectResponse cut off by the end of the connection;
    // 1: a truncated one; 2: a zero timeout; 3 serves a new session. (A
    // length no ConnectResponse has, such as 5000 bytes, is not ZooKeeper: a
    // first connect fails at once: `a_first_connect_names_its_cause_at_once`
    // below.) On a reconnect, another session's id is refused
    // (below).
    let fake = FakeServer::start(|n, mut s| {
        let Ok(_) = read_frame(&mut s) else { return };
        match n {
            0 => {
                let _ = s.write_all(&[0, 0, 0, 36]); // 36 bytes announced, 10 sent
                let _ = s.write_all(&[0; 10]);
            }
            1 => {
                let _ = s.write_all(&frame(&[0, 0, 0, 0, 0, 0]));
            }
            2 => {
                // timeOut 0 for a new session: refused, retried.
                let _ = s.write_all(&connect_response(0, 0));
            }
            _ => {
                let _ = s.write_all(&connect_response(2000, FAKE_SESSION));
                fake_serve_well(s);
            }
        }
    });
    let t = Instant::now();
    let events = Events::new();
    let zk = ZooKeeper::builder(&fake.addr)
        .with_session_timeout(Duration::from_secs(2))
        .with_connect_wait(Duration::from_secs(5))
        .connect(events.watcher())
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(fake.accepted(), 4);
    assert_eq!(zk.session_id(), FAKE_SESSION);
    assert_eq!(zk.exists("/x", false).unwrap().unwrap().version, 42);
    zk.close().unwrap();
    events.wait_state(KeeperState::Closed, 1, WAIT);
    assert_eq!(
        events.states(),
        [KeeperState::SyncConnected, KeeperState::Closed]
    );

    // On a reconnect, a server answering with another session id is refused.
    let fake = FakeServer::start(|n, mut s| {
        let Ok(req) = read_frame(&mut s) else { return };
        let (_, _, id) = parse_connect(&req);
        match n {
            0 => {
                let _ = s.write_all(&connect_response(2000, FAKE_SESSION));
                let _ = fake_next_request(&mut s);
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            1 => {
                assert_eq!(id, FAKE_SESSION);
                let _ = s.write_all(&connect_response(2000, FAKE_SESSION + 1));
            }
            _ => {
                let _ = s.write_all(&connect_response(2000, FAKE_SESSION));
                fake_serve_well(s);
            }
        }
    });
    let (zk, events) = connect(&fake.addr, Duration::from_secs(2));
    assert_code(zk.exists("/x", false), ZkError::ConnectionLoss);
    assert_eq!(zk.exists("/x", false).unwrap().unwrap().version, 42);
    assert_eq!(zk.session_id(), FAKE_SESSION);
    assert!(fake.accepted() >= 3);
    events.wait_state(KeeperState::SyncConnected, 2, WAIT);
    zk.close().unwrap();
    no_client_panics();
}

#[test]
fn a_client_hearing_nothing_for_a_session_timeout_declares_the_expiry_itself() {
    let session = Duration::from_secs(2);
    let (proxy, zk, events) = via_proxy(session);
    let id = zk.session_id();
    let stalled_at = Instant::now();
    proxy.stall();
    // The partition never heals: the client must not wait for it to learn.
    events.wait_state(KeeperState::Expired, 1, Duration::from_secs(6));
    let told = stalled_at.elapsed();
    assert!(
        told >= session * 2 / 3 && told < session + Duration::from_millis(1500),
        "Expired after {told:?} of silence (session {session:?})"
    );
    assert_eq!(
        events.states(),
        [
            KeeperState::SyncConnected,
            KeeperState::Disconnected,
            KeeperState::Expired
        ]
    );
    assert_eq!(zk.state(), State::Expired);
    assert_code(zk.exists("/", false), ZkError::SessionExpired);
    // Final: healing the network opens no new session.
    proxy.pass();
    thread::sleep(Duration::from_millis(500)); // deliberate: nothing must happen
    assert_eq!(zk.state(), State::Expired);
    assert_eq!(zk.session_id(), id);
    wait_until(WAIT, "the client's connections are gone", || {
        proxy.connections() == 0
    });
    no_client_panics();
}

// ---------------------------------------------------------------------------
// An ensemble (was tests/client_ensemble.rs): killing the member a client is
// connected to keeps its session and its watches (issue 3, behaviour 3).
// ---------------------------------------------------------------------------

const ENSEMBLE_WAIT: Duration = Duration::from_secs(20);
const QUORUM: Duration = Duration::from_secs(60);

struct EnsembleWatches {
    data: Arc<Events>,
    child: Arc<Events>,
    exist: Arc<Events>,
    persistent: Arc<Events>,
}

fn arm_ensemble(zk: &ZooKeeper, root: &str) -> EnsembleWatches {
    let w = EnsembleWatches {
        data: Events::new(),
        child: Events::new(),
        exist: Events::new(),
        persistent: Events::new(),
    };
    zk.get_data_w(&format!("{root}/d"), w.data.watcher())
        .unwrap();
    zk.get_children_w(&format!("{root}/c"), w.child.watcher())
        .unwrap();
    assert!(zk
        .exists_w(&format!("{root}/e"), w.exist.watcher())
        .unwrap()
        .is_none());
    zk.add_watch_w(
        &format!("{root}/p"),
        AddWatchMode::Persistent,
        w.persistent.watcher(),
    )
    .unwrap();
    w
}

fn ensemble_nodes(other: &ZooKeeper, root: &str) {
    mkdirs(other, root);
    for n in ["d", "c", "p"] {
        other
            .create(
                &format!("{root}/{n}"),
                b"",
                Acl::open_unsafe(),
                CreateMode::Persistent,
            )
            .unwrap();
    }
}

#[test]
fn killing_the_member_a_client_uses_keeps_its_session_and_watches() {
    init_log();
    count_client_thread_panics();
    let mut ensemble = ZkEnsemble::start().unwrap();
    let servers = ensemble.connect_string();
    let other = ZooKeeper::builder(&servers)
        .with_session_timeout(Duration::from_secs(10))
        .with_connect_wait(QUORUM)
        .connect(|_e: zklock::client::WatchedEvent| {})
        .unwrap();

    // Phase 1: a client on the plain connect string; its member is killed.
    let root = unique_root("ensemble_kill");
    ensemble_nodes(&other, &root);
    let (zk, events) = connect(&servers, Duration::from_secs(10));
    let id = zk.session_id();
    let eph = zk
        .create(
            &format!("{root}/eph"),
            b"",
            Acl::open_unsafe(),
            CreateMode::Ephemeral,
        )
        .unwrap();
    let w = arm_ensemble(&zk, &root);
    let victim = member_of(&ensemble, id);
    ensemble.kill(victim).unwrap();
    events.wait_state(KeeperState::SyncConnected, 2, QUORUM);
    assert_eq!(zk.session_id(), id);
    assert_eq!(zk.state(), State::Connected);
    assert_ne!(member_of(&ensemble, id), victim);
    assert!(
        retry_election("exists eph", || other.exists(&eph, false)).is_some(),
        "session lives"
    );
    // Every watch survived the failover: each fires once.
    retry_election("set d", || other.set_data(&format!("{root}/d"), b"1", None));
    retry_election("create c/k", || {
        other.create(
            &format!("{root}/c/k"),
            b"",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
    });
    retry_election("create e", || {
        other.create(
            &format!("{root}/e"),
            b"",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
    });
    retry_election("set p", || other.set_data(&format!("{root}/p"), b"1", None));
    w.data.wait_node(
        EventType::NodeDataChanged,
        &format!("{root}/d"),
        1,
        ENSEMBLE_WAIT,
    );
    w.child.wait_node(
        EventType::NodeChildrenChanged,
        &format!("{root}/c"),
        1,
        ENSEMBLE_WAIT,
    );
    w.exist.wait_node(
        EventType::NodeCreated,
        &format!("{root}/e"),
        1,
        ENSEMBLE_WAIT,
    );
    w.persistent.wait_node(
        EventType::NodeDataChanged,
        &format!("{root}/p"),
        1,
        ENSEMBLE_WAIT,
    );
    // Deleting a watched node fires its watcher exactly once.
    let del = Events::new();
    zk.exists_w(&format!("{root}/d"), del.watcher()).unwrap();
    retry_election("delete d", || other.delete(&format!("{root}/d"), None));
    del.wait_node(
        EventType::NodeDeleted,
        &format!("{root}/d"),
        1,
        ENSEMBLE_WAIT,
    );
    settle(&zk);
    for (name, e) in [
        ("data", &w.data),
        ("child", &w.child),
        ("exist", &w.exist),
        ("persistent", &w.persistent),
        ("delete", &del),
    ] {
        assert_eq!(e.nodes().len(), 1, "{name}: {:?}", e.all());
    }
    assert!(!events.states().contains(&KeeperState::Expired));
    zk.close().unwrap();
    ensemble.restart(victim).unwrap();
    ensemble.wait_for_quorum(QUORUM).unwrap();

    // Phase 2: behind one proxy per member, so that a change can be made while
    // the client is away: it must be delivered once after the failover.
    let root = unique_root("ensemble_gap");
    ensemble_nodes(&other, &root);
    let proxies: Vec<FaultProxy> = (0..ensemble.size())
        .map(|i| FaultProxy::start(ensemble.address(i)).unwrap())
        .collect();
    let cs = proxies
        .iter()
        .map(FaultProxy::connect_string)
        .collect::<Vec<_>>()
        .join(",");
    let (zk, events) = connect(&cs, Duration::from_secs(10));
    let id = zk.session_id();
    let w = arm_ensemble(&zk, &root);
    let victim = member_of(&ensemble, id);
    assert_eq!(proxies[victim].connections(), 1);
    for p in &proxies {
        p.stall();
    }
    ensemble.kill(victim).unwrap();
    ensemble.wait_for_quorum(QUORUM).unwrap();
    retry_election("gap set d", || {
        other.set_data(&format!("{root}/d"), b"gap", None)
    });
    retry_election("gap create c/g", || {
        other.create(
            &format!("{root}/c/g"),
            b"",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
    });
    retry_election("gap create e", || {
        other.create(
            &format!("{root}/e"),
            b"",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
    });
    let connected = events
        .states()
        .iter()
        .filter(|s| **s == KeeperState::SyncConnected)
        .count();
    for p in &proxies {
        p.reset();
    }
    events.wait_state(KeeperState::SyncConnected, connected + 1, QUORUM);
    assert_eq!(zk.session_id(), id);
    assert_ne!(member_of(&ensemble, id), victim);
    w.data.wait_node(
        EventType::NodeDataChanged,
        &format!("{root}/d"),
        1,
        ENSEMBLE_WAIT,
    );
    w.child.wait_node(
        EventType::NodeChildrenChanged,
        &format!("{root}/c"),
        1,
        ENSEMBLE_WAIT,
    );
    w.exist.wait_node(
        EventType::NodeCreated,
        &format!("{root}/e"),
        1,
        ENSEMBLE_WAIT,
    );
    // The persistent watch did not replay the gap, and works on.
    retry_election("set p", || {
        other.set_data(&format!("{root}/p"), b"after", None)
    });
    w.persistent.wait_node(
        EventType::NodeDataChanged,
        &format!("{root}/p"),
        1,
        ENSEMBLE_WAIT,
    );
    let del = Events::new();
    zk.get_data_w(&format!("{root}/d"), del.watcher()).unwrap();
    retry_election("delete d", || other.delete(&format!("{root}/d"), None));
    del.wait_node(
        EventType::NodeDeleted,
        &format!("{root}/d"),
        1,
        ENSEMBLE_WAIT,
    );
    settle(&zk);
    for (name, e) in [
        ("data", &w.data),
        ("child", &w.child),
        ("exist", &w.exist),
        ("persistent", &w.persistent),
        ("delete", &del),
    ] {
        assert_eq!(e.nodes().len(), 1, "{name}: {:?}", e.all());
    }
    assert!(!events.states().contains(&KeeperState::Expired));
    zk.close().unwrap();
    other.close().unwrap();
    assert_eq!(client_thread_panics(), 0);
}

// ---------------------------------------------------------------------------
// Issue 21's two session-layer defects.
// ---------------------------------------------------------------------------

/// After a one-way cut (server→client lost), the client declares its session
/// expired and closes it on the server. Each close attempt reconnects with the
/// old session id, which refreshes the session on the server; if the attempt
/// waited for the ConnectResponse (lost) before sending closeSession, the
/// session would live on a whole session timeout after the last attempt, its
/// ephemeral nodes blocking others. closeSession goes right behind the
/// ConnectRequest: the session ends with the first attempt that reaches the
/// server.
#[test]
fn closing_a_locally_expired_session_never_extends_it_on_the_server() {
    let session = Duration::from_secs(2);
    let (proxy, zk, events) = via_proxy(session);
    let other = ZooKeeper::connect(&server(), Duration::from_secs(6), |_e| {}).unwrap();
    let path = format!(
        "/zklock-test-oneway-close-{}-{}",
        std::process::id(),
        zk.session_id()
    );
    zk.create(&path, b"", open(), CreateMode::Ephemeral)
        .unwrap();
    proxy.stall_downstream();
    events.wait_state(KeeperState::Expired, 1, Duration::from_secs(8));
    let expired_at = Instant::now();
    wait_until(Duration::from_secs(15), "the ephemeral node goes", || {
        matches!(other.exists(&path, false), Ok(None))
    });
    let after = expired_at.elapsed();
    // Without the close the server would keep it `session` past the client's
    // last reconnect attempt; with each attempt extending it, longer still.
    assert!(
        after < Duration::from_millis(1500),
        "the session outlived the client's Expired by {after:?}"
    );
    proxy.pass();
    no_client_panics();
}

/// Whether this process still holds a socket open from local port `local` to
/// remote port `remote` on 127.0.0.1 (`/proc/net/tcp`: a closed socket still
/// in FIN_WAIT or TIME_WAIT has no inode).
fn socket_open(local: u16, remote: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() > 9
            && f[1].ends_with(&format!(":{local:04X}"))
            && f[2].ends_with(&format!(":{remote:04X}"))
            && f[9] != "0"
    })
}

/// After a malformed frame the old socket is closed, not only shut down (a
/// shut-down socket keeps its unread bytes and its descriptor, and the peer
/// gets no reset, until the next connection replaced it), while the client
/// reconnects (here slowly: the fake server answers the second connection's
/// handshake only after 1.5 s).
#[test]
fn a_malformed_frame_closes_the_old_socket_before_the_reconnect() {
    init_log();
    count_client_thread_panics();
    let (tx, rx) = std::sync::mpsc::channel::<(u16, u16, Instant)>();
    let tx = Mutex::new(tx);
    let fake = FakeServer::start(move |n, mut s| {
        if n > 0 {
            thread::sleep(Duration::from_millis(1500));
            if fake_handshake(&mut s, FAKE_SESSION).is_ok() {
                fake_serve_well(s);
            }
            return;
        }
        let Ok(_) = fake_handshake(&mut s, FAKE_SESSION) else {
            return;
        };
        let Ok((_xid, _op)) = fake_next_request(&mut s) else {
            return;
        };
        // A negative length, and bytes behind it.
        let mut garbage = (-5i32).to_be_bytes().to_vec();
        garbage.extend_from_slice(&[7; 4096]);
        let _ = s.write_all(&garbage);
        let ports = (s.peer_addr(), s.local_addr());
        if let (Ok(client), Ok(server)) = ports {
            let _ = tx
                .lock()
                .unwrap()
                .send((client.port(), server.port(), Instant::now()));
        }
        thread::sleep(Duration::from_secs(3)); // deliberate: the server holds on
    });
    let zk = ZooKeeper::builder(&fake.addr)
        .with_session_timeout(Duration::from_secs(6))
        .with_connect_wait(Duration::from_secs(5))
        .connect(|_e| {})
        .unwrap();
    assert_code(zk.exists("/x", false), ZkError::ConnectionLoss);
    let (client, server, sent) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    wait_until(Duration::from_secs(3), "the old socket closed", || {
        !socket_open(client, server)
    });
    let took = sent.elapsed();
    assert!(
        took < Duration::from_millis(1000),
        "the old socket was closed {took:?} after the malformed frame"
    );
    // And the client goes on with its session on the next connection.
    assert_eq!(zk.exists("/x", false).unwrap().unwrap().version, 42);
    zk.close().unwrap();
    no_client_panics();
}

// ---------------------------------------------------------------------------
// Issue 35: a refused port fails the first connect at once
// ---------------------------------------------------------------------------

/// A port nothing listens on (bound, then freed).
fn refused_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Every server of the connect string refusing the connection fails
/// `connect` at once, long before its connect wait, with `ConnectionLoss`
/// carrying "connection refused by" and the servers.
#[test]
fn a_first_connect_every_server_refuses_fails_at_once_saying_refused() {
    let (a, b) = (refused_port(), refused_port());
    let started = Instant::now();
    let r = ZooKeeper::builder(&format!("{a},{b}"))
        .with_session_timeout(Duration::from_secs(10))
        .with_connect_wait(Duration::from_secs(120))
        .connect(|_e: WatchedEvent| {});
    let took = started.elapsed();
    let e = assert_code(r, ZkError::ConnectionLoss);
    assert!(
        matches!(&e, Error::Connect { reason, .. } if reason.contains("refused")),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("connection refused by") && text.contains(&a) && text.contains(&b),
        "{text}"
    );
    // Behaviour, not speed: the connect wait is two minutes.
    assert!(took < Duration::from_secs(60), "failed after {took:?}");
}

/// A server that answers every connection at once with bytes that cannot
/// begin a ZooKeeper answer (an HTTP server's), until the test ends.
fn http_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for mut s in listener.incoming().map_while(Result::ok) {
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        }
    });
    addr
}

/// The first connect's cause, as a value, at once: a host name that does
/// not resolve is `ConnectCause::Unresolvable`, a server that answers but
/// not as ZooKeeper `NotZooKeeper` (with its first bytes), refused
/// `Refused`, and every server failing for one of these, not the same one,
/// `Several` naming each (issue 48: these were a bare `ConnectionLoss`
/// after the whole connect wait, but for the refusal).
#[test]
fn a_first_connect_names_its_cause_at_once() {
    use zklock::ConnectCause;
    let connect = |servers: &str| {
        let started = Instant::now();
        let r = ZooKeeper::builder(servers)
            .with_session_timeout(Duration::from_secs(10))
            .with_connect_wait(Duration::from_secs(120))
            .connect(|_e: WatchedEvent| {});
        let took = started.elapsed();
        // Behaviour, not speed: the connect wait is two minutes.
        assert!(
            took < Duration::from_secs(60),
            "{servers}: failed after {took:?}"
        );
        assert_code(r, ZkError::ConnectionLoss)
    };
    let cause = |e: &Error| match e {
        Error::Connect { cause, .. } => *cause,
        other => panic!("not Error::Connect: {other:?}"),
    };
    let e = connect("no-such-host.invalid:2181");
    assert_eq!(cause(&e), ConnectCause::Unresolvable, "{e}");
    assert!(
        e.to_string().contains("cannot resolve the host name"),
        "{e}"
    );

    let http = http_server();
    let e = connect(&http);
    assert_eq!(cause(&e), ConnectCause::NotZooKeeper, "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&http) && text.contains("HTTP/1.1 400"),
        "{text}"
    );

    let refused = refused_port();
    let e = connect(&refused);
    assert_eq!(cause(&e), ConnectCause::Refused, "{e}");

    let e = connect(&format!("{refused},no-such-host.invalid:2181"));
    assert_eq!(cause(&e), ConnectCause::Several, "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("{refused}: connection refused"))
            && text.contains("no-such-host.invalid:2181: cannot resolve"),
        "{text}"
    );
}

/// One server refusing while another is silent is no refusal of every
/// server: the connect waits for its connect wait (plain `ConnectionLoss`).
#[test]
fn a_refusing_server_beside_a_silent_one_waits_the_connect_wait() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let cs = format!("{},{}", refused_port(), silent.local_addr().unwrap());
    let r = ZooKeeper::builder(&cs)
        .with_session_timeout(Duration::from_secs(4))
        .with_connect_wait(Duration::from_secs(2))
        .connect(|_e: WatchedEvent| {});
    let e = assert_code(r, ZkError::ConnectionLoss);
    assert!(matches!(e, Error::Zk { .. }), "{e:?}");
}

/// A session that was established keeps retrying refused servers (a server
/// restarting refuses for a moment): its waits end with plain
/// `ConnectionLoss` after the wait, and it resumes on the restarted server.
#[test]
fn an_established_session_keeps_retrying_a_refusing_server() {
    let mut server = ZkServer::start().unwrap();
    let events = Events::new();
    let zk = ZooKeeper::builder(&server.connect_string())
        .with_session_timeout(Duration::from_secs(20))
        .with_connect_wait(Duration::from_secs(10))
        .connect(events.watcher())
        .unwrap();
    let id = zk.session_id();
    server.stop().unwrap();
    events.wait_state(KeeperState::Disconnected, 1, WAIT);
    let e = assert_code(
        zk.wait_connected(Duration::from_secs(2)),
        ZkError::ConnectionLoss,
    );
    assert!(matches!(e, Error::Zk { .. }), "{e:?}");
    assert_eq!(zk.state(), State::Connecting);
    server.restart().unwrap();
    zk.wait_connected(Duration::from_secs(15)).unwrap();
    assert_eq!(zk.session_id(), id);
    zk.close().unwrap();
}

/// A server that takes a session's reconnect and closes it unanswered (up but
/// not serving: a follower while the ensemble elects a leader) is tried again
/// after Java's random pause of up to 1 s, not on the backoff's 10, 20, 40 ms
/// steps, so a fleet dropped at once comes back spread over a second (issue
/// 49's storm bench: zklock's reconnections bunched more than Java's). Ten
/// clients, each on its own fake server: connection 0 serves the session and
/// closes; 1 to 3 are accepted and closed unanswered; 4 serves the session
/// again. On the backoff's steps, connections 1 to 4 of a client are at most
/// 70 ms apart (plus scheduling); three draws of up to 1 s sum to less than
/// 150 ms with a chance of 1 in 1,800, and the test takes the median of ten.
#[test]
fn a_reconnect_closed_unanswered_is_retried_after_javas_random_pause() {
    const CLIENTS: usize = 10;
    let mut runs = Vec::new();
    for _ in 0..CLIENTS {
        let times: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
        let seen = times.clone();
        let fake = FakeServer::start(move |n, mut s| {
            seen.lock().unwrap().push((n, Instant::now()));
            match n {
                0 => {
                    let _ = fake_handshake(&mut s, FAKE_SESSION);
                    thread::sleep(Duration::from_millis(200));
                }
                1..=3 => {
                    let _ = read_frame(&mut s); // the ConnectRequest, unanswered
                }
                _ => {
                    if fake_handshake(&mut s, FAKE_SESSION).is_ok() {
                        fake_serve_well(s);
                    }
                }
            }
        });
        let zk = ZooKeeper::builder(&fake.addr)
            .with_session_timeout(Duration::from_secs(8))
            .connect(|_e| {})
            .unwrap();
        runs.push((fake, zk, times));
    }
    let mut spans = Vec::new();
    for (fake, zk, times) in &runs {
        wait_until(WAIT, "the fifth connection serves the session", || {
            fake.accepted() >= 5
        });
        assert_eq!(zk.exists("/x", false).unwrap().unwrap().version, 42);
        assert_eq!(zk.session_id(), FAKE_SESSION, "the session is kept");
        let times = times.lock().unwrap();
        let at = |n: usize| times.iter().find(|(i, _)| *i == n).unwrap().1;
        spans.push(at(4) - at(1));
    }
    spans.sort();
    let median = spans[CLIENTS / 2];
    assert!(
        median > Duration::from_millis(150),
        "retries after an unanswered close are not spread: median {median:?} of {spans:?}"
    );
    for (_, zk, _) in runs {
        zk.close().unwrap();
    }
}
