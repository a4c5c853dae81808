//! HBase 1.3's `TableLockManager.ZKTableLockManager`, ported on zklock: table
//! locks under the watcher's `tableLockZNode`, read or write chosen at run
//! time into one owned guard, a timeout that names the holder,
//! `visitAllLocks`, `reapAllExpiredLocks` and `tableDeleted`. Each piece sits
//! next to the HBase lines it ports.
//!
//! Runs against `$ZK_SERVERS` or a throwaway local ZooKeeper:
//! `cargo run --example table_lock_manager`. `make test` runs it
//! (tests/hbase_port.rs, `the_ported_examples_run`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, ensure};
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, MetadataHandler, OwnedLockGuard,
    ZkInterProcessReadWriteLock,
};
use zklock::{zkutil, ZkError, ZooKeeperWatcher};

// private static final MetadataHandler METADATA_HANDLER = new MetadataHandler() {
//   public void handleMetadata(byte[] ownerMetadata) {
//     ZooKeeperProtos.TableLock data = fromBytes(ownerMetadata);
//     LOG.debug("Table is locked by " + String.format("[tableName=%s, lockOwner=%s, ...
fn metadata_handler() -> Arc<dyn MetadataHandler> {
    Arc::new(|owner: &[u8]| println!("  table is locked by [{}]", String::from_utf8_lossy(owner)))
}

/// `ZKTableLockManager(zkWatcher, serverName, writeLockTimeoutMs, readLockTimeoutMs,
/// lockExpireTimeoutMs)`.
struct ZkTableLockManager {
    zkw: ZooKeeperWatcher,
    server_name: String,
    write_lock_timeout: Option<Duration>,
    read_lock_timeout: Option<Duration>,
    expire_timeout: Duration,
}

/// `TableLockImpl`: one acquisition of a table's read or write lock.
struct TableLock {
    zkw: ZooKeeperWatcher,
    table: String,
    server_name: String,
    lock_timeout: Option<Duration>,
    is_shared: bool,
    purpose: String,
    // InterProcessLock lock;  (held: the owned guard, either kind)
    held: Option<OwnedLockGuard>,
}

impl TableLock {
    // public void acquire() throws IOException {
    //   lock = createTableLock();
    //   if (lockTimeoutMs == -1) { lock.acquire(); }
    //   else if (!lock.tryAcquire(lockTimeoutMs)) {
    //     throw new LockTimeoutException("Timed out acquiring " + (isShared ? "read" : "write")
    //       + "lock for table:" + tableName + "for:" + purpose + " after " + lockTimeoutMs + " ms.");
    //   }
    fn acquire(&mut self) -> anyhow::Result<()> {
        let lock = self.create_table_lock()?;
        let guard = match self.lock_timeout {
            None => Some(OwnedLockGuard::acquire(lock)?),
            Some(t) => OwnedLockGuard::try_acquire(lock, t)?,
        };
        let kind = if self.is_shared { "read" } else { "write" };
        self.held = Some(guard.ok_or_else(|| {
            anyhow!(
                "timed out acquiring {kind} lock for table:{} for:{} after {:?}",
                self.table,
                self.purpose,
                self.lock_timeout.unwrap_or_default()
            )
        })?);
        Ok(())
    }

    // public void release() throws IOException {
    //   if (lock == null) { throw new IllegalStateException("Table " + tableName + " is not locked!"); }
    //   lock.release();
    fn release(&mut self) -> anyhow::Result<()> {
        let guard = self
            .held
            .take()
            .ok_or_else(|| anyhow!("table {} is not locked!", self.table))?;
        Ok(guard.unlock()?)
    }

    // private InterProcessLock createTableLock() {
    //   String tableLockZNode = ZKUtil.joinZNode(zkWatcher.tableLockZNode, tableName.getNameAsString());
    //   ZooKeeperProtos.TableLock data = ... setLockOwner(serverName) .setPurpose(purpose) .setIsShared(isShared) ...
    //   InterProcessReadWriteLock lock = new ZKInterProcessReadWriteLock(zkWatcher, tableLockZNode, METADATA_HANDLER);
    //   return isShared ? lock.readLock(lockMetadata) : lock.writeLock(lockMetadata);
    fn create_table_lock(&self) -> zklock::Result<Arc<dyn InterProcessLock>> {
        let znode = zkutil::join_znode(&self.zkw.znode_paths().table_lock_znode, &self.table);
        let data = format!(
            "tableName={}, lockOwner={}, purpose={}, isShared={}",
            self.table, self.server_name, self.purpose, self.is_shared
        );
        let lock = ZkInterProcessReadWriteLock::new(&self.zkw, &znode, Some(metadata_handler()))?;
        Ok(lock.read_or_write_lock(self.is_shared, data.as_bytes()))
    }
}

impl ZkTableLockManager {
    // public TableLock writeLock(TableName tableName, String purpose) {
    //   return new TableLockImpl(tableName, zkWatcher, serverName, writeLockTimeoutMs, false, purpose);
    fn write_lock(&self, table: &str, purpose: &str) -> TableLock {
        self.table_lock(table, purpose, false, self.write_lock_timeout)
    }

    // public TableLock readLock(TableName tableName, String purpose) {
    //   return new TableLockImpl(tableName, zkWatcher, serverName, readLockTimeoutMs, true, purpose);
    fn read_lock(&self, table: &str, purpose: &str) -> TableLock {
        self.table_lock(table, purpose, true, self.read_lock_timeout)
    }

    fn table_lock(
        &self,
        table: &str,
        purpose: &str,
        is_shared: bool,
        timeout: Option<Duration>,
    ) -> TableLock {
        TableLock {
            zkw: self.zkw.clone(),
            table: table.to_string(),
            server_name: self.server_name.clone(),
            lock_timeout: timeout,
            is_shared,
            purpose: purpose.to_string(),
            held: None,
        }
    }

    // private List<String> getTableNames() throws IOException {
    //   tableNames = ZKUtil.listChildrenNoWatch(zkWatcher, zkWatcher.tableLockZNode);
    fn table_names(&self) -> zklock::Result<Vec<String>> {
        Ok(
            zkutil::list_children_no_watch(&self.zkw, &self.zkw.znode_paths().table_lock_znode)?
                .unwrap_or_default(),
        )
    }

    fn table_rw_lock(&self, table: &str) -> zklock::Result<ZkInterProcessReadWriteLock> {
        let znode = zkutil::join_znode(&self.zkw.znode_paths().table_lock_znode, table);
        ZkInterProcessReadWriteLock::new(&self.zkw, &znode, None)
    }

    // public void visitAllLocks(MetadataHandler handler) throws IOException {
    //   for (String tableName : getTableNames()) {
    //     ZKInterProcessReadWriteLock lock = new ZKInterProcessReadWriteLock(zkWatcher, tableLockZNode, null);
    //     lock.readLock(null).visitLocks(handler);
    //     lock.writeLock(null).visitLocks(handler);
    fn visit_all_locks(&self, handler: &dyn MetadataHandler) -> zklock::Result<()> {
        for table in self.table_names()? {
            let lock = self.table_rw_lock(&table)?;
            lock.read_lock(&[]).visit_locks(handler)?;
            lock.write_lock(&[]).visit_locks(handler)?;
        }
        Ok(())
    }

    // public void reapAllExpiredLocks() throws IOException {
    //   for (String tableName : getTableNames()) {
    //     lock.readLock(null).reapExpiredLocks(expireTimeoutMs);
    //     lock.writeLock(null).reapExpiredLocks(expireTimeoutMs);
    fn reap_all_expired_locks(&self) -> zklock::Result<()> {
        for table in self.table_names()? {
            let lock = self.table_rw_lock(&table)?;
            lock.read_lock(&[])
                .reap_expired_locks(self.expire_timeout)?;
            lock.write_lock(&[])
                .reap_expired_locks(self.expire_timeout)?;
        }
        Ok(())
    }

    // public void tableDeleted(TableName tableName) throws IOException {
    //   try { ZKUtil.deleteNode(zkWatcher, tableLockZNode); }
    //   catch (KeeperException ex) {
    //     if (ex.code() == KeeperException.Code.NOTEMPTY) { LOG.warn("Could not delete ... NOTEMPTY"); return; }
    fn table_deleted(&self, table: &str) -> zklock::Result<()> {
        let znode = zkutil::join_znode(&self.zkw.znode_paths().table_lock_znode, table);
        match zkutil::delete_node(&self.zkw, &znode, None) {
            Err(e) if e.is(ZkError::NotEmpty) => {
                println!("  could not delete the znode for table locks because NOTEMPTY: {znode}");
                Ok(())
            }
            r => r.map(drop),
        }
    }
}

fn main() -> anyhow::Result<()> {
    let _ = env_logger::try_init();
    let (_server, servers) = zklock::testing::example_servers()?;
    let parent = format!("/zklock-example/hbase-{}", std::process::id());
    // new ZooKeeperWatcher(conf, ...) with zookeeper.znode.parent, and createBaseZNodes
    let master = |name: &str| {
        ZooKeeperWatcher::builder(&servers)
            .with_identifier(name)
            .with_hbase_conf([("zookeeper.znode.parent", parent.as_str())])
            .with_create_base_znodes(true)
            .connect()
    };
    let (zkw1, zkw2) = (master("master1")?, master("master2")?);
    println!("table locks under {}", zkw1.znode_paths().table_lock_znode);
    let manager = |zkw: &ZooKeeperWatcher, sn: &str| ZkTableLockManager {
        zkw: zkw.clone(),
        server_name: sn.to_string(),
        // hbase.table.write.lock.timeout.ms / hbase.table.read.lock.timeout.ms
        write_lock_timeout: Some(Duration::from_millis(300)),
        read_lock_timeout: Some(Duration::from_millis(300)),
        // hbase.table.lock.expire.ms (HBase: 10 minutes)
        expire_timeout: Duration::from_millis(500),
    };
    let (m1, m2) = (
        manager(&zkw1, "master1,16000,1"),
        manager(&zkw2, "master2,16000,2"),
    );

    // An alter holds the write lock; a region split wants the read lock.
    let mut alter = m1.write_lock("t1", "alter table");
    alter.acquire()?;
    println!("master1 holds the write lock on t1");
    let mut split = m2.read_lock("t1", "split region");
    let timed_out = split.acquire();
    println!(
        "master2's read lock: {}",
        timed_out
            .as_ref()
            .err()
            .map_or("acquired".into(), |e| e.to_string())
    );
    ensure!(
        timed_out.is_err(),
        "the read lock must wait for the write lock"
    );
    alter.release()?;
    split.acquire()?;
    let mut compaction = m1.read_lock("t1", "compaction");
    compaction.acquire()?;
    println!("two shared holders now; visitAllLocks:");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    m1.visit_all_locks(&move |md: &[u8]| {
        s.lock()
            .unwrap()
            .push(String::from_utf8_lossy(md).into_owned())
    })?;
    for md in seen.lock().unwrap().iter() {
        println!("  {md}");
    }
    ensure!(seen.lock().unwrap().len() == 2, "two read locks visited");
    split.release()?;
    compaction.release()?;

    // A master hangs while holding t2's write lock; the next master reaps it.
    let mut stuck = m2.write_lock("t2", "create table");
    stuck.acquire()?;
    std::thread::sleep(Duration::from_millis(700));
    m1.reap_all_expired_locks()?;
    println!(
        "master1 reaped the locks older than {:?}",
        m1.expire_timeout
    );
    let mut create = m1.write_lock("t2", "create table");
    create.acquire()?;
    println!("master1 took t2's write lock");
    create.release()?;
    let lost = stuck.release();
    println!(
        "the hung master's release: {}",
        lost.as_ref()
            .err()
            .map_or("ok".to_string(), |e| e.to_string())
    );
    ensure!(lost.is_err(), "the reaped lock is lost");

    // Both tables dropped.
    m1.table_deleted("t1")?;
    m1.table_deleted("t2")?;
    ensure!(m1.table_names()?.is_empty(), "no table lock znodes left");
    println!("tables deleted; no table lock znode left");
    zkw2.close()?;
    zkutil::delete_node_recursively(&zkw1, &parent)?;
    zkw1.close()?;
    Ok(())
}
