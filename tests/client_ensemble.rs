//! `zklock::client` against a three-server ensemble: killing the member a client
//! is connected to keeps its session and its watches (issue 3, behaviour 3).

mod client_common;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use client_common::*;
use zklock::client::{Acl, AddWatchMode, CreateMode, EventType, KeeperState, State, ZooKeeper};
use zklock::testing::{unique_root, FaultProxy, ZkEnsemble};

const WAIT: Duration = Duration::from_secs(20);
const QUORUM: Duration = Duration::from_secs(60);

/// Retries `f` while it fails with ConnectionLoss (an election in progress).
fn retry<T>(what: &str, mut f: impl FnMut() -> zklock::Result<T>) -> T {
    let deadline = Instant::now() + QUORUM;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(100))
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// The member whose `cons` lists session `id`.
fn member_of(ensemble: &ZkEnsemble, id: i64) -> usize {
    let mut found = None;
    wait_until(WAIT, "the session shows in a member's cons", || {
        found = (0..ensemble.size()).find(|&i| cons_sessions(&ensemble.address(i)).contains(&id));
        found.is_some()
    });
    found.unwrap()
}

struct Watches {
    data: Arc<Events>,
    child: Arc<Events>,
    exist: Arc<Events>,
    persistent: Arc<Events>,
}

fn arm(zk: &ZooKeeper, root: &str) -> Watches {
    let w = Watches {
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

fn setup_nodes(other: &ZooKeeper, root: &str) {
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
    setup_nodes(&other, &root);
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
    let w = arm(&zk, &root);
    let victim = member_of(&ensemble, id);
    ensemble.kill(victim).unwrap();
    events.wait_state(KeeperState::SyncConnected, 2, QUORUM);
    assert_eq!(zk.session_id(), id);
    assert_eq!(zk.state(), State::Connected);
    assert_ne!(member_of(&ensemble, id), victim);
    assert!(
        retry("exists eph", || other.exists(&eph, false)).is_some(),
        "session lives"
    );
    // Every watch survived the failover: each fires once.
    retry("set d", || other.set_data(&format!("{root}/d"), b"1", None));
    retry("create c/k", || {
        other.create(
            &format!("{root}/c/k"),
            b"",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
    });
    retry("create e", || {
        other.create(
            &format!("{root}/e"),
            b"",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
    });
    retry("set p", || other.set_data(&format!("{root}/p"), b"1", None));
    w.data
        .wait_node(EventType::NodeDataChanged, &format!("{root}/d"), 1, WAIT);
    w.child.wait_node(
        EventType::NodeChildrenChanged,
        &format!("{root}/c"),
        1,
        WAIT,
    );
    w.exist
        .wait_node(EventType::NodeCreated, &format!("{root}/e"), 1, WAIT);
    w.persistent
        .wait_node(EventType::NodeDataChanged, &format!("{root}/p"), 1, WAIT);
    // Deleting a watched node fires its watcher exactly once.
    let del = Events::new();
    zk.exists_w(&format!("{root}/d"), del.watcher()).unwrap();
    retry("delete d", || other.delete(&format!("{root}/d"), None));
    del.wait_node(EventType::NodeDeleted, &format!("{root}/d"), 1, WAIT);
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
    setup_nodes(&other, &root);
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
    let w = arm(&zk, &root);
    let victim = member_of(&ensemble, id);
    assert_eq!(proxies[victim].connections(), 1);
    for p in &proxies {
        p.stall();
    }
    ensemble.kill(victim).unwrap();
    ensemble.wait_for_quorum(QUORUM).unwrap();
    retry("gap set d", || {
        other.set_data(&format!("{root}/d"), b"gap", None)
    });
    retry("gap create c/g", || {
        other.create(
            &format!("{root}/c/g"),
            b"",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
    });
    retry("gap create e", || {
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
    w.data
        .wait_node(EventType::NodeDataChanged, &format!("{root}/d"), 1, WAIT);
    w.child.wait_node(
        EventType::NodeChildrenChanged,
        &format!("{root}/c"),
        1,
        WAIT,
    );
    w.exist
        .wait_node(EventType::NodeCreated, &format!("{root}/e"), 1, WAIT);
    // The persistent watch did not replay the gap, and works on.
    retry("set p", || {
        other.set_data(&format!("{root}/p"), b"after", None)
    });
    w.persistent
        .wait_node(EventType::NodeDataChanged, &format!("{root}/p"), 1, WAIT);
    let del = Events::new();
    zk.get_data_w(&format!("{root}/d"), del.watcher()).unwrap();
    retry("delete d", || other.delete(&format!("{root}/d"), None));
    del.wait_node(EventType::NodeDeleted, &format!("{root}/d"), 1, WAIT);
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
