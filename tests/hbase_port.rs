//! Porting HBase code as it is (issue 24): HBase's `ZKLeaderManager` layout
//! and sessions, HBase's znode layout on the watcher, the extensible tracker,
//! and HBase's `TableLockManager`'s either-kind lock — against a real
//! ZooKeeper, with raw sessions playing HBase processes.

mod common;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{force_expiry, init_log, raw_session, setup_root, Serial, WAIT};
use zklock::client::{Acl, CreateMode, EventType, WatchedEvent};
use zklock::recipes::leader_manager::ZkLeaderManager;
use zklock::testing::{shared_server, test_servers, wait_until, FaultProxy};
use zklock::{append_metadata, remove_metadata, RetryConfig, ZkError, ZooKeeperWatcher};

const SESSION: Duration = Duration::from_secs(6);

fn builder(servers: &str) -> zklock::ZooKeeperWatcherBuilder {
    ZooKeeperWatcher::builder(servers)
        .with_identifier("hbase-port")
        .with_session_timeout(SESSION)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(10)))
}

fn connect(servers: &str) -> ZooKeeperWatcher {
    builder(servers).connect().expect("connect")
}

// ---------------------------------------------------------------------------
// ZKLeaderManager: HBase's layout, shared with HBase processes
// ---------------------------------------------------------------------------

/// The leader znode is HBase's: one ephemeral znode whose data (after HBase's
/// metadata prefix, as HBase's `RecoverableZooKeeper` writes it) is the
/// leader's id; a raw reader (an HBase tool) finds the id there, and a waiting
/// candidate knows a leader exists.
#[test]
fn leader_manager_writes_hbase_s_leader_znode_that_a_raw_reader_reads() {
    init_log();
    let servers = test_servers();
    let (raw, root) = setup_root(&servers, "leader-layout");
    let leader_znode = format!("{root}/replication/leader");
    let (zkw_a, zkw_b) = (connect(&servers), connect(&servers));
    let a = ZkLeaderManager::new(&zkw_a, &leader_znode, "server-a");
    let b = Arc::new(ZkLeaderManager::new(&zkw_b, &leader_znode, "server-b"));
    a.start().unwrap();
    b.start().unwrap();
    assert!(raw
        .exists(&format!("{root}/replication"), false)
        .unwrap()
        .is_some());
    assert!(a.wait_to_become_leader().unwrap());
    assert!(a.has_leadership() && a.has_leader());
    assert!(a.wait_to_become_leader().unwrap(), "leading already");

    // What an HBase tool reading the znode sees.
    let (data, stat) = raw.get_data(&leader_znode, false).unwrap();
    assert_eq!(data[0], 0xFF, "HBase's metadata prefix");
    assert_eq!(remove_metadata(&data), b"server-a");
    assert_eq!(stat.ephemeral_owner, zkw_a.zookeeper().session_id());
    assert_eq!(raw.get_children(&leader_znode, false).unwrap().len(), 0);

    // A waiting candidate.
    let waiting = {
        let b = b.clone();
        thread::spawn(move || b.wait_to_become_leader())
    };
    wait_until(WAIT, "b sees a leader", || b.has_leader());
    assert!(!b.has_leadership());
    a.step_down_as_leader().unwrap();
    assert!(!a.has_leadership());
    assert!(
        waiting.join().unwrap().unwrap(),
        "b leads after a stepped down"
    );
    let (data, _) = raw.get_data(&leader_znode, false).unwrap();
    assert_eq!(remove_metadata(&data), b"server-b");
    b.stop().unwrap();
    assert!(b.is_stopped() && !b.has_leadership());
    assert_eq!(raw.exists(&leader_znode, false).unwrap(), None);
    assert!(!b.wait_to_become_leader().unwrap(), "stopped");
    zkw_a.close().unwrap();
    zkw_b.close().unwrap();
    raw.delete(&format!("{root}/replication"), None).unwrap();
    raw.delete(&root, None).unwrap();
}

/// Leadership handed over both ways between a manager and an HBase process
/// (a raw session following `ZKLeaderManager`'s steps: create the ephemeral
/// znode with HBase's metadata-prefixed id; else watch it).
#[test]
fn leadership_hands_over_between_an_hbase_process_and_a_manager() {
    init_log();
    let servers = test_servers();
    let (raw, root) = setup_root(&servers, "leader-handover");
    let leader_znode = format!("{root}/leader");
    let hbase_id = append_metadata("hbase-master-1", b"hbase-master");
    let hbase = raw_session(&servers, SESSION);
    hbase
        .create(
            &leader_znode,
            &hbase_id,
            Acl::open_unsafe(),
            CreateMode::Ephemeral,
        )
        .unwrap();

    let zkw = connect(&servers);
    let manager = Arc::new(ZkLeaderManager::new(&zkw, &leader_znode, "zklock-1"));
    manager.start().unwrap();
    let waiting = {
        let m = manager.clone();
        thread::spawn(move || m.wait_to_become_leader())
    };
    wait_until(WAIT, "the manager sees HBase's leader", || {
        manager.has_leader()
    });
    assert!(!manager.has_leadership());
    assert!(!waiting.is_finished());
    // The HBase process goes away: its ephemeral znode with it.
    hbase.close().unwrap();
    assert!(waiting.join().unwrap().unwrap(), "woken by the deletion");
    assert!(manager.has_leadership());

    // Another HBase process now finds the manager leading, and watches.
    let (tx, rx) = std::sync::mpsc::channel();
    let hbase2 = raw_session(&servers, SESSION);
    let created = hbase2.create(
        &leader_znode,
        &hbase_id,
        Acl::open_unsafe(),
        CreateMode::Ephemeral,
    );
    assert_eq!(created.unwrap_err().code(), Some(ZkError::NodeExists));
    let (data, _) = hbase2
        .get_data_w(&leader_znode, move |e: WatchedEvent| {
            let _ = tx.send(e.event_type);
        })
        .unwrap();
    assert_eq!(
        remove_metadata(&data),
        b"zklock-1",
        "HBase reads zklock's id"
    );
    manager.step_down_as_leader().unwrap();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), EventType::NodeDeleted);
    hbase2
        .create(
            &leader_znode,
            &hbase_id,
            Acl::open_unsafe(),
            CreateMode::Ephemeral,
        )
        .unwrap();
    wait_until(WAIT, "the manager sees the new leader", || {
        manager.has_leader()
    });
    assert!(!manager.has_leadership());
    hbase2.close().unwrap();
    zkw.close().unwrap();
    raw.delete(&root, None).unwrap();
}

/// A manager knows its session: after an expiry (here with session renewal)
/// the leader no longer leads, a waiting candidate's wait ends with
/// `SessionExpired`, and a new wait competes in the renewed session.
#[test]
fn after_an_expiry_a_leader_no_longer_leads_and_a_wait_ends_with_session_expired() {
    let _serial = Serial::shared();
    init_log();
    let servers = shared_server().connect_string();
    let (raw, root) = setup_root(&servers, "leader-expiry");
    let leader_znode = format!("{root}/leader");
    let proxy_a = FaultProxy::start(servers.as_str()).unwrap();
    let proxy_b = FaultProxy::start(servers.as_str()).unwrap();
    let renewing = |p: &FaultProxy| {
        builder(&p.connect_string())
            .with_session_renewal(true)
            .connect()
            .unwrap()
    };
    let (zkw_a, zkw_b) = (renewing(&proxy_a), renewing(&proxy_b));
    let a = ZkLeaderManager::new(&zkw_a, &leader_znode, "a");
    let b = Arc::new(ZkLeaderManager::new(&zkw_b, &leader_znode, "b"));
    assert!(a.wait_to_become_leader().unwrap());
    let waiting = {
        let b = b.clone();
        thread::spawn(move || b.wait_to_become_leader())
    };
    wait_until(WAIT, "b waits behind a", || b.has_leader());

    // b's session expires (and is renewed): its wait ends.
    let old_b = zkw_b.zookeeper().session_id();
    force_expiry(&proxy_b, &servers, &zkw_b);
    let ended = waiting.join().unwrap();
    assert_eq!(ended.unwrap_err().code(), Some(ZkError::SessionExpired));
    wait_until(WAIT, "b's session renewed", || {
        zkw_b.check_session().is_ok() && zkw_b.zookeeper().session_id() != old_b
    });

    // a's session expires: it no longer leads, even once renewed.
    let old_a = zkw_a.zookeeper().session_id();
    force_expiry(&proxy_a, &servers, &zkw_a);
    wait_until(WAIT, "a's session renewed", || {
        zkw_a.check_session().is_ok() && zkw_a.zookeeper().session_id() != old_a
    });
    assert!(!a.has_leadership(), "the claim belonged to the old session");
    // b, in its new session, takes the leadership the server freed.
    assert!(b.wait_to_become_leader().unwrap());
    let (data, stat) = raw.get_data(&leader_znode, false).unwrap();
    assert_eq!(remove_metadata(&data), b"b");
    assert_eq!(stat.ephemeral_owner, zkw_b.zookeeper().session_id());
    b.step_down_as_leader().unwrap();
    assert!(
        a.wait_to_become_leader().unwrap(),
        "a competes in its new session"
    );
    assert!(a.has_leadership());
    a.stop().unwrap();
    zkw_a.close().unwrap();
    zkw_b.close().unwrap();
    raw.delete(&root, None).unwrap();
}
