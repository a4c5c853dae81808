//! `zklock::client` hardening (issue 10): each test shows one failure mode of
//! the fault probe fixed, against a real ZooKeeper 3.8 behind a `FaultProxy`,
//! or a scripted fake endpoint for what a real server cannot be made to send.

mod client_common;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use client_common::*;
use zklock::client::{Acl, CreateMode, EventType, KeeperState, Watcher, ZooKeeper};
use zklock::testing::{shared_server, unique_root, FaultProxy};

const WAIT: Duration = Duration::from_secs(10);

fn server() -> String {
    count_client_thread_panics();
    shared_server().connect_string()
}

fn no_client_panics() {
    assert_eq!(client_thread_panics(), 0, "a client thread panicked");
}

/// A client through a fresh proxy to the shared server.
fn via_proxy(session: Duration) -> (FaultProxy, ZooKeeper, Arc<Events>) {
    let proxy = FaultProxy::start(server()).unwrap();
    let (zk, events) = connect(&proxy.connect_string(), session);
    (proxy, zk, events)
}

fn is_state(ks: KeeperState) -> impl Fn(&zklock::client::WatchedEvent) -> bool {
    move |e| e.event_type == EventType::None && e.keeper_state == ks
}

// ---------------------------------------------------------------------------
// 9. Every watcher hears the session
// ---------------------------------------------------------------------------

#[test]
fn every_registered_watcher_hears_each_session_change_once() {
    let (proxy, zk, default) = via_proxy(Duration::from_secs(4));
    let root = unique_root("every_watcher");
    mkdirs(&zk, &root);
    let (a, b) = (format!("{root}/a"), format!("{root}/b"));
    zk.create(&a, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();

    // Distinct watchers: a data watch, an exist watch on a missing node, the
    // watcher of an async call, one shared watcher on two paths (told once),
    // and the default watcher on a path (told once, as the default watcher).
    let data = Events::new();
    zk.get_data_w(&a, data.watcher()).unwrap();
    let exist = Events::new();
    assert!(zk.exists_w(&b, exist.watcher()).unwrap().is_none());
    let asynchronous = Events::new();
    let (tx, rx) = crossbeam_channel::bounded(1);
    zk.get_data_async(
        &a,
        Some(Arc::new(asynchronous.watcher()) as Arc<dyn Watcher>),
        move |r| {
            let _ = tx.send(r.is_ok());
        },
    );
    assert!(rx.recv_timeout(WAIT).unwrap());
    let shared = Events::new();
    let shared_w: Arc<dyn Watcher> = Arc::new(shared.watcher());
    zk.get_data_watch(&a, shared_w.clone()).unwrap();
    zk.exists_watch(&b, shared_w.clone()).unwrap();
    zk.exists(&a, true).unwrap();
    let custom = [&data, &exist, &asynchronous, &shared];

    // A cut: Disconnected, then SyncConnected after the reconnect.
    proxy.cut();
    for e in custom {
        e.wait_state(KeeperState::SyncConnected, 1, WAIT);
    }
    default.wait_state(KeeperState::SyncConnected, 2, WAIT);
    settle(&zk);
    for e in custom {
        assert_eq!(
            e.states(),
            [KeeperState::Disconnected, KeeperState::SyncConnected]
        );
    }
    assert_eq!(
        default.states(),
        [
            KeeperState::SyncConnected,
            KeeperState::Disconnected,
            KeeperState::SyncConnected
        ]
    );
    // Registrations stay across the reconnect.
    assert!(zk.watch_count() >= 5, "{}", zk.watch_count());

    // A stall past the session timeout: Disconnected, then Expired.
    proxy.stall();
    for e in custom {
        e.wait_state(KeeperState::Expired, 1, WAIT);
    }
    default.wait_state(KeeperState::Expired, 1, WAIT);
    thread::sleep(Duration::from_millis(200));
    for e in custom {
        assert_eq!(
            e.states(),
            [
                KeeperState::Disconnected,
                KeeperState::SyncConnected,
                KeeperState::Disconnected,
                KeeperState::Expired
            ]
        );
        assert!(e.nodes().is_empty(), "{:?}", e.nodes());
    }
    assert_eq!(default.count(is_state(KeeperState::Expired)), 1);
    assert_eq!(default.count(is_state(KeeperState::Disconnected)), 2);
    wait_until(WAIT, "the session's end drops the watches", || {
        zk.watch_count() == 0
    });
    proxy.pass();
    zk.close().unwrap();
    let (cleanup, _) = connect(&server(), Duration::from_secs(4));
    rmr(&cleanup, &root);
    no_client_panics();
}

#[test]
fn a_watcher_hears_closed_when_the_handle_is_closed() {
    let (zk, default) = connect(&server(), Duration::from_secs(4));
    let root = unique_root("closed_watcher");
    mkdirs(&zk, &root);
    let data = Events::new();
    zk.get_data_w(&root, data.watcher()).unwrap();
    zk.close().unwrap();
    data.wait_state(KeeperState::Closed, 1, WAIT);
    default.wait_state(KeeperState::Closed, 1, WAIT);
    assert_eq!(data.states(), [KeeperState::Closed]);
    let (cleanup, _) = connect(&server(), Duration::from_secs(4));
    rmr(&cleanup, &root);
}
