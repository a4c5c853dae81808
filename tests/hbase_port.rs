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

/// A test's start: logging, the servers, a raw session and the test's root.
fn begin(name: &str) -> (String, zklock::client::ZooKeeper, String) {
    init_log();
    let servers = test_servers();
    let (raw, root) = setup_root(&servers, name);
    (servers, raw, root)
}

/// Removes a test's root (its whole subtree) and closes its raw session.
fn cleanup(raw: zklock::client::ZooKeeper, root: &str) {
    let zkw = connect(&test_servers());
    zklock::zkutil::delete_node_recursively(&zkw, root).unwrap();
    zkw.close().unwrap();
    raw.close().unwrap();
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
    let (servers, raw, root) = begin("leader-layout");
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
    cleanup(raw, &root);
}

/// Leadership handed over both ways between a manager and an HBase process
/// (a raw session following `ZKLeaderManager`'s steps: create the ephemeral
/// znode with HBase's metadata-prefixed id; else watch it).
#[test]
fn leadership_hands_over_between_an_hbase_process_and_a_manager() {
    let (servers, raw, root) = begin("leader-handover");
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
    cleanup(raw, &root);
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
    cleanup(raw, &root);
}

// ---------------------------------------------------------------------------
// Extensible trackers: HBase's ZooKeeperNodeTracker subclasses, ported
// ---------------------------------------------------------------------------

mod trackers {
    use std::sync::{Arc, Mutex, OnceLock, Weak};

    use super::*;
    use zklock::{
        zkutil, LoggingAbortable, NodeTrackerListener, ZooKeeperNodeTracker, ZooKeeperWatcher,
    };

    /// What a ported subclass's overrides saw: the call, the data passed, the
    /// tracker's own `get_data(false)` at that moment, and the thread.
    #[derive(Default)]
    struct Seen {
        calls: Mutex<Vec<(String, Option<Vec<u8>>)>>,
        tracker: OnceLock<Weak<ZooKeeperNodeTracker>>,
        mismatches: Mutex<Vec<String>>,
    }

    impl Seen {
        fn note(&self, call: &str, data: Option<&[u8]>) {
            // The tracker's data is already refreshed when the override runs.
            let held = self
                .tracker
                .get()
                .and_then(Weak::upgrade)
                .and_then(|t| t.get_data(false));
            if held.as_deref() != data {
                self.mismatches
                    .lock()
                    .unwrap()
                    .push(format!("{call}: given {data:?}, tracker holds {held:?}"));
            }
            let thread = std::thread::current().name().unwrap_or("").to_string();
            if thread != "zklock-event" {
                self.mismatches
                    .lock()
                    .unwrap()
                    .push(format!("{call} on thread {thread:?}"));
            }
            self.calls
                .lock()
                .unwrap()
                .push((call.to_string(), data.map(<[u8]>::to_vec)));
        }

        fn calls(&self) -> Vec<(String, Option<Vec<u8>>)> {
            self.calls.lock().unwrap().clone()
        }

        fn wait_calls(&self, n: usize) -> Vec<(String, Option<Vec<u8>>)> {
            wait_until(WAIT, &format!("{n} tracker calls"), || {
                self.calls.lock().unwrap().len() >= n
            });
            assert!(
                self.mismatches.lock().unwrap().is_empty(),
                "{:?}",
                self.mismatches
            );
            self.calls()
        }
    }

    impl NodeTrackerListener for Seen {
        fn node_created(&self, _path: &str, data: &[u8]) {
            self.note("created", Some(data));
        }
        fn node_data_changed(&self, _path: &str, data: &[u8]) {
            self.note("changed", Some(data));
        }
        fn node_deleted(&self, _path: &str) {
            self.note("deleted", None);
        }
    }

    fn tracker_with(
        zkw: &ZooKeeperWatcher,
        node: &str,
        seen: &Arc<Seen>,
    ) -> Arc<ZooKeeperNodeTracker> {
        let t = Arc::new(ZooKeeperNodeTracker::with_listener(
            zkw,
            node,
            Arc::new(LoggingAbortable::new()),
            seen.clone(),
        ));
        let _ = seen.tracker.set(Arc::downgrade(&t));
        t
    }

    /// HBase's `MasterAddressTracker`, ported on the extensible tracker:
    ///
    /// ```java
    /// public class MasterAddressTracker extends ZooKeeperNodeTracker {
    ///   public MasterAddressTracker(ZooKeeperWatcher watcher, Abortable abortable) {
    ///     super(watcher, watcher.getMasterAddressZNode(), abortable);
    ///   }
    ///   public ServerName getMasterAddress(final boolean refresh) {
    ///     return ServerName.parseFrom(super.getData(refresh));
    ///   }
    ///   public boolean hasMaster() { return super.getData(false) != null; }
    ///   public static boolean setMasterAddress(ZooKeeperWatcher zkw, String znode,
    ///       ServerName master, int infoPort) {
    ///     return ZKUtil.createEphemeralNodeAndWatch(zkw, znode, toByteArray(master, infoPort));
    ///   }
    /// }
    /// ```
    struct MasterAddressTracker {
        tracker: Arc<ZooKeeperNodeTracker>,
    }

    impl MasterAddressTracker {
        fn get_master_address(&self, refresh: bool) -> Option<String> {
            self.tracker
                .get_data(refresh)
                .map(|d| String::from_utf8_lossy(&d).into_owned())
        }
        fn has_master(&self) -> bool {
            self.tracker.get_data(false).is_some()
        }
    }

    #[test]
    fn a_master_address_tracker_port_follows_the_active_master() {
        let (servers, raw, root) = begin("master-address-tracker");
        // HBase's layout: `super(watcher, watcher.getMasterAddressZNode(), abortable)`.
        let zkw = builder(&servers)
            .with_hbase_conf([("zookeeper.znode.parent", format!("{root}/hbase"))])
            .with_create_base_znodes(true)
            .connect()
            .unwrap();
        let master_znode = zkw.master_address_znode().to_string();
        let seen = Arc::new(Seen::default());
        let mat = MasterAddressTracker {
            tracker: tracker_with(&zkw, &master_znode, &seen),
        };
        mat.tracker.start().unwrap();
        assert!(!mat.has_master());

        // A master comes up in another process and registers itself.
        let master = connect(&servers);
        assert!(
            zkutil::create_ephemeral_node_and_watch(&master, &master_znode, b"m1,16000,1").unwrap()
        );
        assert!(
            !zkutil::create_ephemeral_node_and_watch(&zkw, &master_znode, b"m2,16000,2").unwrap()
        );
        assert_eq!(
            seen.wait_calls(1),
            [("created".to_string(), Some(b"m1,16000,1".to_vec()))]
        );
        assert!(mat.has_master());
        assert_eq!(mat.get_master_address(false).as_deref(), Some("m1,16000,1"));
        // The master dies: its ephemeral znode goes, the override hears it.
        master.close().unwrap();
        assert_eq!(seen.wait_calls(2)[1], ("deleted".to_string(), None));
        assert!(!mat.has_master());
        assert_eq!(mat.get_master_address(true), None);
        mat.tracker.stop();
        zkw.close().unwrap();
        cleanup(raw, &root);
    }

    /// HBase's `ClusterStatusTracker`, ported: `isClusterUp` is "the node
    /// exists", `setClusterUp` creates it (or sets its data), `setClusterDown`
    /// deletes it; the override hears each change with the data refreshed.
    ///
    /// ```java
    /// public boolean isClusterUp() { return super.getData(false) != null; }
    /// public void setClusterUp() throws KeeperException {
    ///   byte [] upData = toByteArray();
    ///   try { ZKUtil.createAndWatch(watcher, watcher.clusterStateZNode, upData); }
    ///   catch(KeeperException.NodeExistsException nee) {
    ///     ZKUtil.setData(watcher, watcher.clusterStateZNode, upData);
    ///   }
    /// }
    /// public void setClusterDown() throws KeeperException {
    ///   try { ZKUtil.deleteNode(watcher, watcher.clusterStateZNode); }
    ///   catch(KeeperException.NoNodeException nne) { LOG.warn(...); }
    /// }
    /// ```
    struct ClusterStatusTracker {
        zkw: ZooKeeperWatcher,
        tracker: Arc<ZooKeeperNodeTracker>,
    }

    impl ClusterStatusTracker {
        fn is_cluster_up(&self) -> bool {
            self.tracker.get_data(false).is_some()
        }
        fn set_cluster_up(&self, up_data: &[u8]) -> zklock::Result<()> {
            let node = self.tracker.get_node();
            match zkutil::create_and_watch(&self.zkw, node, up_data) {
                Err(e) if e.is(ZkError::NodeExists) => {
                    zkutil::set_data(&self.zkw, node, up_data, None).map(drop)
                }
                r => r.map(drop),
            }
        }
        fn set_cluster_down(&self) -> zklock::Result<()> {
            match zkutil::delete_node(&self.zkw, self.tracker.get_node(), None) {
                Err(e) if e.is(ZkError::NoNode) => Ok(()),
                r => r.map(drop),
            }
        }
    }

    /// After a session renewal the tracker reads its node again; the override
    /// hears the change the old session missed (here a data change made while
    /// the session was cut off and expired), and nothing when there is none.
    #[test]
    fn after_a_session_renewal_the_override_hears_what_changed_meanwhile() {
        let _serial = Serial::shared();
        let (_, raw, root) = begin("tracker-renewal");
        let servers = shared_server().connect_string();
        let proxy = FaultProxy::start(servers.as_str()).unwrap();
        let zkw = builder(&proxy.connect_string())
            .with_session_renewal(true)
            .connect()
            .unwrap();
        let node = format!("{root}/peer-state");
        raw.create(
            &node,
            b"ENABLED",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .unwrap();
        let seen = Arc::new(Seen::default());
        let tracker = tracker_with(&zkw, &node, &seen);
        tracker.start().unwrap();
        assert_eq!(tracker.get_data(false).as_deref(), Some(&b"ENABLED"[..]));

        // Cut off; the node changes; the session expires; it is renewed.
        let old = zkw.zookeeper().session_id();
        proxy.stall();
        raw.set_data(&node, b"DISABLED", None).unwrap();
        let zk = zkw.zookeeper();
        let twin = zklock::client::ZooKeeper::connect_with_session(
            &servers,
            SESSION,
            |_e: WatchedEvent| {},
            zk.session_id(),
            &zk.session_password(),
        )
        .unwrap();
        twin.close().unwrap();
        proxy.reset();
        assert_eq!(
            seen.wait_calls(1),
            [("changed".to_string(), Some(b"DISABLED".to_vec()))]
        );
        assert_ne!(zkw.zookeeper().session_id(), old);

        // A second renewal with nothing changed: no call. (A listener's
        // session_renewed comes after the tracker's renewal read was sent;
        // an asynchronous round trip after it, after that read's answer.)
        struct Renewals(std::sync::atomic::AtomicUsize);
        impl zklock::ZooKeeperListener for Renewals {
            fn session_renewed(&self) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let renewals = Arc::new(Renewals(Default::default()));
        let _registration = zkw.listen(renewals.clone());
        force_expiry(&proxy, &servers, &zkw);
        wait_until(WAIT, "renewed again", || {
            renewals.0.load(std::sync::atomic::Ordering::SeqCst) == 1
        });
        let (tx, rx) = std::sync::mpsc::channel();
        zkw.zookeeper().exists_async("/", None, move |_| {
            let _ = tx.send(());
        });
        rx.recv_timeout(WAIT).unwrap();
        assert_eq!(seen.calls().len(), 1, "{:?}", seen.calls());
        raw.set_data(&node, b"ENABLED", None).unwrap();
        assert_eq!(
            seen.wait_calls(2)[1],
            ("changed".to_string(), Some(b"ENABLED".to_vec()))
        );
        tracker.stop();
        zkw.close().unwrap();
        cleanup(raw, &root);
    }

    #[test]
    fn a_cluster_status_tracker_port_hears_up_change_and_down() {
        let (servers, raw, root) = begin("cluster-status-tracker");
        let zkw = builder(&servers)
            .with_hbase_conf([("zookeeper.znode.parent", format!("{root}/hbase"))])
            .with_create_base_znodes(true)
            .connect()
            .unwrap();
        // `super(watcher, watcher.clusterStateZNode, abortable)`
        let running = zkw.znode_paths().cluster_state_znode.clone();
        let seen = Arc::new(Seen::default());
        let cst = ClusterStatusTracker {
            zkw: zkw.clone(),
            tracker: tracker_with(&zkw, &running, &seen),
        };
        cst.tracker.start().unwrap();
        assert!(!cst.is_cluster_up());
        assert!(seen.calls().is_empty(), "start calls nothing");

        // Another master's tracker sets the cluster up, then again, then down.
        let other_zkw = connect(&servers);
        let other = ClusterStatusTracker {
            zkw: other_zkw.clone(),
            tracker: Arc::new(ZooKeeperNodeTracker::new(
                &other_zkw,
                &running,
                Arc::new(LoggingAbortable::new()),
            )),
        };
        other.set_cluster_up(b"up-1").unwrap();
        assert_eq!(
            seen.wait_calls(1)[0],
            ("created".to_string(), Some(b"up-1".to_vec()))
        );
        assert!(cst.is_cluster_up());
        other.set_cluster_up(b"up-2").unwrap();
        assert_eq!(
            seen.wait_calls(2)[1],
            ("changed".to_string(), Some(b"up-2".to_vec()))
        );
        other.set_cluster_down().unwrap();
        assert_eq!(seen.wait_calls(3)[2], ("deleted".to_string(), None));
        assert!(!cst.is_cluster_up());
        other.set_cluster_down().unwrap();
        // Stopped: nothing more is called.
        cst.tracker.stop();
        other.set_cluster_up(b"up-3").unwrap();
        let t = ZooKeeperNodeTracker::new(&zkw, &running, Arc::new(LoggingAbortable::new()));
        t.start().unwrap();
        assert!(t.block_until_available(WAIT, false).unwrap().is_some());
        assert_eq!(seen.calls().len(), 3, "{:?}", seen.calls());
        t.stop();
        other_zkw.close().unwrap();
        zkw.close().unwrap();
        cleanup(raw, &root);
    }
}

// ---------------------------------------------------------------------------
// HBase 1.3's znode layout on the watcher
// ---------------------------------------------------------------------------

/// `ZooKeeperWatcher.setNodeNames` on a real session: the names follow
/// `zookeeper.znode.parent` and the `zookeeper.znode.*` keys, and
/// `createBaseZNodes` makes HBase's directories, which a raw client lists.
#[test]
fn the_watcher_carries_hbase_s_znode_layout_and_creates_its_base_znodes() {
    let (servers, raw, root) = begin("znode-layout");
    let parent = format!("{root}/hbase-unsecure");
    let zkw = builder(&servers)
        .with_hbase_conf([
            ("zookeeper.znode.parent", parent.as_str()),
            ("zookeeper.znode.tableLock", "locks"),
            ("hbase.meta.replica.count", "2"),
        ])
        .with_create_base_znodes(true)
        .connect()
        .unwrap();
    assert_eq!(zkw.base_znode(), parent);
    let paths = zkw.znode_paths();
    assert_eq!(zkw.master_address_znode(), format!("{parent}/master"));
    assert_eq!(
        zkw.region_normalizer_znode(),
        format!("{parent}/normalizer")
    );
    assert_eq!(
        zkw.znode_for_replica(1),
        format!("{parent}/meta-region-server-1")
    );
    assert_eq!(paths.table_lock_znode, format!("{parent}/locks"));
    assert_eq!(paths.cluster_state_znode, format!("{parent}/running"));
    assert_eq!(
        paths.assignment_znode,
        format!("{parent}/region-in-transition")
    );
    assert!(paths.is_any_meta_replica_znode(&format!("{parent}/meta-region-server-1")));
    let mut children = raw.get_children(&parent, false).unwrap();
    children.sort();
    assert_eq!(
        children,
        [
            "backup-masters",
            "draining",
            "locks",
            "recovering-regions",
            "region-in-transition",
            "rs",
            "splitWAL",
            "table"
        ]
    );
    zkw.close().unwrap();

    // HBase's defaults, without creating anything; a later base moves it all.
    let hbase = builder(&servers).with_hbase_layout().connect().unwrap();
    assert_eq!(hbase.base_znode(), "/hbase");
    assert_eq!(hbase.znode_paths(), &zklock::ZNodePaths::default());
    hbase.close().unwrap();
    let moved = builder(&servers)
        .with_hbase_layout()
        .with_base_znode(&format!("{root}/other"))
        .connect()
        .unwrap();
    assert_eq!(moved.znode_paths().rs_znode, format!("{root}/other/rs"));
    moved.close().unwrap();
    // zklock's own base stays the default without an HBase conf.
    let plain = connect(&servers);
    assert_eq!(plain.base_znode(), zklock::DEFAULT_BASE_ZNODE);
    assert_eq!(plain.master_address_znode(), "/zklock/master");
    plain.close().unwrap();
    // A bad configuration is a typed error at connect.
    let e = builder(&servers)
        .with_hbase_conf([("zookeeper.znode.rs", "a//b")])
        .connect()
        .unwrap_err();
    assert!(matches!(e, zklock::Error::BadArguments(_)), "{e}");
    cleanup(raw, &root);
}

// ---------------------------------------------------------------------------
// TableLockManager's run-time choice: either kind into one owned guard type
// ---------------------------------------------------------------------------

/// HBase's `lock = isShared ? lock.readLock(md) : lock.writeLock(md)`: the
/// kind is a run-time value, and both kinds are held as the one
/// `OwnedLockGuard` type (stored side by side, released anywhere).
#[test]
fn either_kind_of_lock_into_one_owned_guard_type_chosen_at_run_time() {
    use zklock::lock::{OwnedLockGuard, ZkInterProcessReadWriteLock};
    let (servers, raw, root) = begin("either-kind");
    let zkw = connect(&servers);
    let table = format!("{root}/t1");
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &table, None).unwrap();
    let mut held: Vec<OwnedLockGuard> = Vec::new();
    for is_shared in [true, true] {
        held.push(rw.lock_owned(is_shared, b"region split").unwrap());
    }
    let mut children = raw.get_children(&table, false).unwrap();
    children.sort();
    assert_eq!(children.len(), 2);
    assert!(
        children.iter().all(|c| c.starts_with("read-")),
        "{children:?}"
    );
    let exclusive = false;
    assert!(
        rw.try_lock_owned_for(exclusive, b"alter", Duration::ZERO)
            .unwrap()
            .is_none(),
        "a write waits for the reads"
    );
    for guard in held.drain(..) {
        assert!(guard.is_held());
        guard.unlock().unwrap();
    }
    let write = rw
        .try_lock_owned_for(exclusive, b"alter", WAIT)
        .unwrap()
        .expect("free now");
    assert!(raw.get_children(&table, false).unwrap()[0].starts_with("write-"));
    assert!(
        OwnedLockGuard::try_acquire(rw.read_or_write_lock(true, b"r"), Duration::ZERO)
            .unwrap()
            .is_none()
    );
    held.push(write);
    drop(held);
    wait_until(WAIT, "the dropped guard's node removed", || {
        raw.get_children(&table, false).unwrap().is_empty()
    });
    zkw.close().unwrap();
    cleanup(raw, &root);
}

// ---------------------------------------------------------------------------
// The pipelined and the sequential acquire agree on a lost listing
// ---------------------------------------------------------------------------

/// With `max_attempts(0)` a listing whose reply is lost ends the acquire with
/// `ConnectionLoss` on both paths: the sequential one (create, then list) and
/// the pipelined one (create and list in one round trip), where the lost
/// listing counts as the listing's first attempt. Neither leaves its node.
#[test]
fn pipelined_and_sequential_acquire_agree_on_a_lost_listing_with_no_retries() {
    use zklock::client::ReplyKind;
    use zklock::lock::{InterProcessLock, ZkInterProcessWriteLock};
    let (servers, raw, root) = begin("lost-listing");
    let zkw = builder(&servers)
        .with_retry(RetryConfig::default().with_max_attempts(0))
        .connect()
        .unwrap();
    for pipelined in [true, false] {
        let znode = format!("{root}/lock-{pipelined}");
        let mut lock = ZkInterProcessWriteLock::new(&zkw, &znode, b"m", None).unwrap();
        if !pipelined {
            lock = lock.with_sequential_acquire();
        }
        lock.acquire().unwrap();
        lock.release().unwrap();
        zkw.zookeeper().lose_next_reply(ReplyKind::GetChildren);
        let e = lock.acquire().unwrap_err();
        assert_eq!(
            e.code(),
            Some(ZkError::ConnectionLoss),
            "pipelined {pipelined}: {e}"
        );
        wait_until(WAIT, "no node left", || {
            raw.get_children(&znode, false).is_ok_and(|c| c.is_empty())
        });
        wait_until(WAIT, "reconnected", || {
            zkw.state() == zklock::client::State::Connected
        });
        lock.acquire().unwrap();
        lock.release().unwrap();
    }
    zkw.close().unwrap();
    cleanup(raw, &root);
}

// ---------------------------------------------------------------------------
// The two examples that are ports, run
// ---------------------------------------------------------------------------

/// `examples/<name>`, built by `cargo test --all-features` next to the test
/// binaries (built here when missing, e.g. for a targeted run).
fn example(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(std::path::Path::parent)
        .unwrap()
        .join("examples")
        .join(name);
    if !path.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--all-features", "--example", name])
            .status()
            .expect("cargo build --example");
        assert!(status.success(), "building examples/{name}");
    }
    path
}

/// HBase's `TableLockManager` and a master's `ActiveMasterManager` beside a
/// `MasterAddressTracker`, ported as examples: each runs to its end against
/// the test server (each checks its own outcome and fails otherwise).
#[test]
fn the_ported_examples_run() {
    for name in ["table_lock_manager", "active_master_manager"] {
        let out = std::process::Command::new(example(name))
            .env("ZK_SERVERS", test_servers())
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("run the example");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "examples/{name} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("examples/{name}:\n{stdout}");
    }
}
