//! HBase 1.3's `ActiveMasterManager` beside a `MasterAddressTracker`, ported on
//! zklock: two masters race for the master znode; the loser registers as a
//! backup master and waits; the manager (a `ZooKeeperListener`) hears the
//! master znode's events that the tracker watches, so when the active master
//! dies the backup takes over. Each piece sits next to the HBase lines it
//! ports.
//!
//! Runs against `$ZK_SERVERS` or a throwaway local ZooKeeper:
//! `cargo run --example active_master_manager`. `make test` runs it
//! (tests/hbase_port.rs, `the_ported_examples_run`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use anyhow::ensure;
use zklock::{
    zkutil, LoggingAbortable, NodeTrackerListener, WeakZooKeeperWatcher, ZooKeeperListener,
    ZooKeeperNodeTracker, ZooKeeperWatcher,
};

/// `MasterAddressTracker extends ZooKeeperNodeTracker`.
struct MasterAddressTracker {
    tracker: ZooKeeperNodeTracker,
}

/// What a subclass's `nodeCreated` / `nodeDeleted` overrides would log.
struct LogChanges(String);

impl NodeTrackerListener for LogChanges {
    fn node_created(&self, _path: &str, data: &[u8]) {
        println!(
            "  [{}] master address now {}",
            self.0,
            String::from_utf8_lossy(data)
        );
    }
    fn node_deleted(&self, _path: &str) {
        println!("  [{}] no master address", self.0);
    }
}

impl MasterAddressTracker {
    // public MasterAddressTracker(ZooKeeperWatcher watcher, Abortable abortable) {
    //   super(watcher, watcher.getMasterAddressZNode(), abortable);
    fn new(zkw: &ZooKeeperWatcher, name: &str) -> MasterAddressTracker {
        let tracker = ZooKeeperNodeTracker::with_listener(
            zkw,
            zkw.master_address_znode(),
            Arc::new(LoggingAbortable::new()),
            Arc::new(LogChanges(name.to_string())),
        );
        MasterAddressTracker { tracker }
    }

    // public ServerName getMasterAddress(final boolean refresh) {
    //   return ServerName.parseFrom(super.getData(refresh));
    fn master_address(&self, refresh: bool) -> Option<String> {
        self.tracker
            .get_data(refresh)
            .map(|d| String::from_utf8_lossy(&d).into_owned())
    }

    // public static boolean setMasterAddress(final ZooKeeperWatcher zkw, final String znode,
    //     final ServerName master, int infoPort) throws KeeperException {
    //   return ZKUtil.createEphemeralNodeAndWatch(zkw, znode, toByteArray(master, infoPort));
    fn set_master_address(
        zkw: &ZooKeeperWatcher,
        znode: &str,
        master: &str,
    ) -> zklock::Result<bool> {
        zkutil::create_ephemeral_node_and_watch(zkw, znode, master.as_bytes())
    }
}

/// `ActiveMasterManager extends ZooKeeperListener`.
struct ActiveMasterManager {
    // Holds the watcher weakly: the registry owns the listener (no Arc cycle).
    watcher: WeakZooKeeperWatcher,
    master_znode: String,
    cluster_state_znode: String,
    // final AtomicBoolean clusterHasActiveMaster = new AtomicBoolean(false);
    cluster_has_active_master: Mutex<bool>,
    changed: Condvar,
    // final AtomicBoolean clusterShutDown = new AtomicBoolean(false);
    cluster_shut_down: AtomicBool,
    sn: String,
    stopped: AtomicBool,
}

impl ZooKeeperListener for ActiveMasterManager {
    // public void nodeCreated(String path) { handle(path); }
    fn node_created(&self, path: &str) {
        self.handle(path, true);
    }

    // public void nodeDeleted(String path) {
    //   if (path.equals(watcher.clusterStateZNode) && !master.isStopped()) { clusterShutDown.set(true); }
    //   handle(path);
    fn node_deleted(&self, path: &str) {
        if path == self.cluster_state_znode && !self.stopped.load(Ordering::SeqCst) {
            self.cluster_shut_down.store(true, Ordering::SeqCst);
        }
        self.handle(path, false);
    }
}

impl ActiveMasterManager {
    // ActiveMasterManager(ZooKeeperWatcher watcher, ServerName sn, Server master) {
    //   super(watcher);
    //   watcher.registerListener(this);
    fn new(zkw: &ZooKeeperWatcher, sn: &str) -> Arc<ActiveMasterManager> {
        let manager = Arc::new(ActiveMasterManager {
            watcher: zkw.downgrade(),
            master_znode: zkw.master_address_znode().to_string(),
            cluster_state_znode: zkw.znode_paths().cluster_state_znode.clone(),
            cluster_has_active_master: Mutex::new(false),
            changed: Condvar::new(),
            cluster_shut_down: AtomicBool::new(false),
            sn: sn.to_string(),
            stopped: AtomicBool::new(false),
        });
        zkw.register_listener(manager.clone());
        manager
    }

    // void handle(final String path) {
    //   if (path.equals(watcher.getMasterAddressZNode()) && !master.isStopped()) { handleMasterNodeChange(); }
    // private void handleMasterNodeChange() {
    //   synchronized(clusterHasActiveMaster) {
    //     if (ZKUtil.watchAndCheckExists(watcher, watcher.getMasterAddressZNode())) {
    //       clusterHasActiveMaster.set(true);
    //     } else {
    //       clusterHasActiveMaster.set(false);
    //       clusterHasActiveMaster.notifyAll();
    // zklock: listeners run on the event thread and must not block, so the event
    // itself says whether the node exists; the waiting thread below makes the
    // calls (and sets the watch again).
    fn handle(&self, path: &str, exists: bool) {
        if path == self.master_znode && !self.stopped.load(Ordering::SeqCst) {
            let mut has = self.cluster_has_active_master.lock().unwrap();
            *has = exists;
            if !exists {
                println!(
                    "  [{}] no master available; notifying waiting threads",
                    self.sn
                );
                self.changed.notify_all();
            }
        }
    }

    // boolean blockUntilBecomingActiveMaster(int checkInterval, MonitoredTask startupStatus) {
    fn block_until_becoming_active_master(&self) -> zklock::Result<bool> {
        let Some(zkw) = self.watcher.upgrade() else {
            return Ok(false);
        };
        // String backupZNode = ZKUtil.joinZNode(this.watcher.backupMasterAddressesZNode, this.sn.toString());
        let backup_znode =
            zkutil::join_znode(&zkw.znode_paths().backup_master_addresses_znode, &self.sn);
        // while (!(master.isAborted() || master.isStopped())) {
        while !self.stopped.load(Ordering::SeqCst) {
            // if (MasterAddressTracker.setMasterAddress(this.watcher, this.watcher.getMasterAddressZNode(), this.sn, infoPort)) {
            if MasterAddressTracker::set_master_address(&zkw, &self.master_znode, &self.sn)? {
                // if (ZKUtil.checkExists(this.watcher, backupZNode) != -1) {
                //   ZKUtil.deleteNodeFailSilent(this.watcher, backupZNode);
                if zkutil::check_exists(&zkw, &backup_znode)?.is_some() {
                    println!(
                        "  [{}] deleting {backup_znode} from the backup master directory",
                        self.sn
                    );
                    zkutil::delete_node_fail_silent(&zkw, &backup_znode)?;
                }
                // this.clusterHasActiveMaster.set(true); LOG.info("Registered Active Master=" + this.sn);
                *self.cluster_has_active_master.lock().unwrap() = true;
                println!("  [{}] registered as the active master", self.sn);
                return Ok(true);
            }
            // this.clusterHasActiveMaster.set(true);
            *self.cluster_has_active_master.lock().unwrap() = true;
            // byte[] bytes = ZKUtil.getDataAndWatch(this.watcher, this.watcher.getMasterAddressZNode());
            match zkutil::get_data_and_watch(&zkw, &self.master_znode)? {
                // msg = "A master was detected, but went down before its address could be read..."
                None => {
                    println!(
                        "  [{}] a master went down before its address could be read",
                        self.sn
                    );
                    *self.cluster_has_active_master.lock().unwrap() = false;
                }
                // if (ServerName.isSameHostnameAndPort(currentMaster, this.sn)) { ... ZKUtil.deleteNode(...)
                Some(current) if current == self.sn.as_bytes() => {
                    println!(
                        "  [{}] the master znode has our address; deleting it",
                        self.sn
                    );
                    zkutil::delete_node(&zkw, &self.master_znode, None)?;
                }
                // msg = "Another master is the active master, " + currentMaster + "; waiting to become the next active master";
                Some(current) => println!(
                    "  [{}] another master is the active master, {}; waiting",
                    self.sn,
                    String::from_utf8_lossy(&current)
                ),
            }
            // synchronized (this.clusterHasActiveMaster) {
            //   while (clusterHasActiveMaster.get() && !master.isStopped()) {
            //     clusterHasActiveMaster.wait(checkInterval);
            //   }
            //   if (clusterShutDown.get()) { this.master.stop("Cluster went down before this master became active"); }
            let mut has = self.cluster_has_active_master.lock().unwrap();
            while *has && !self.stopped.load(Ordering::SeqCst) {
                has = self.changed.wait(has).unwrap();
            }
            if self.cluster_shut_down.load(Ordering::SeqCst) {
                println!(
                    "  [{}] cluster went down before this master became active",
                    self.sn
                );
                self.stop();
            }
        }
        Ok(false)
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let _g = self.cluster_has_active_master.lock().unwrap();
        self.changed.notify_all();
    }
}

fn main() -> anyhow::Result<()> {
    let _ = env_logger::try_init();
    let (_server, servers) = zklock::testing::example_servers()?;
    let parent = format!("/zklock-example/hbase-master-{}", std::process::id());
    let connect = |name: &str| {
        ZooKeeperWatcher::builder(&servers)
            .with_identifier(name)
            .with_session_timeout(Duration::from_secs(6))
            .with_hbase_conf([("zookeeper.znode.parent", parent.as_str())])
            .with_create_base_znodes(true)
            .connect()
    };
    let (zkw1, zkw2) = (connect("master1")?, connect("master2")?);
    println!("master znode {}", zkw1.master_address_znode());

    // HMaster: the tracker first, then the manager.
    let tracker2 = MasterAddressTracker::new(&zkw2, "master2's tracker");
    tracker2.tracker.start()?;
    let manager1 = ActiveMasterManager::new(&zkw1, "master1,16000,1");
    let manager2 = ActiveMasterManager::new(&zkw2, "master2,16000,2");
    ensure!(
        manager1.block_until_becoming_active_master()?,
        "master1 becomes active"
    );

    // HMaster.startActiveMasterManager: a backup master registers itself first.
    let backup = zkutil::join_znode(
        &zkw2.znode_paths().backup_master_addresses_znode,
        &manager2.sn,
    );
    ensure!(MasterAddressTracker::set_master_address(
        &zkw2,
        &backup,
        &manager2.sn
    )?);
    let waiting = {
        let m = manager2.clone();
        thread::spawn(move || m.block_until_becoming_active_master())
    };
    let seen = tracker2
        .tracker
        .block_until_available(Duration::from_secs(10), false)?
        .map(|d| String::from_utf8_lossy(&d).into_owned());
    println!("master2's tracker: the active master is {seen:?}");
    ensure!(seen.as_deref() == Some("master1,16000,1"));

    println!("master1 dies");
    zkw1.close()?;
    ensure!(
        waiting.join().expect("master2's thread")?,
        "master2 takes over"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tracker2.master_address(false).as_deref() != Some("master2,16000,2") {
        ensure!(
            std::time::Instant::now() < deadline,
            "the tracker follows the new master"
        );
        thread::sleep(Duration::from_millis(10));
    }
    println!(
        "master2's tracker: the active master is {:?}",
        tracker2.master_address(true)
    );
    ensure!(
        zkutil::check_exists(&zkw2, &backup)?.is_none(),
        "backup znode removed"
    );

    manager2.stop();
    tracker2.tracker.stop();
    zkutil::delete_node_recursively(&zkw2, &parent)?;
    zkw2.close()?;
    Ok(())
}
