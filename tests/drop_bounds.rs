//! Issue 50, item 5: `Drop` never waits on the network. One test per `Drop`
//! of the crate that can reach the network (see `grep -rn "impl Drop" src`):
//! each object is made holding its node through a `FaultProxy`, the proxy is
//! stalled (a blackhole: nothing is answered), and the drop must return well
//! under the close bound (2 s; a synchronous close or delete would wait that
//! long or more). The node then goes once the link heals. The session's own
//! drops (`ZooKeeper`, `ZooKeeperWatcher`, its inner state after a failed
//! close) are tested in `tests/watcher.rs` and `tests/client_hardening.rs`;
//! the lock guards' and a held lock's in `tests/lock_safety.rs`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{lock_watcher, raw};
use zklock::client::{CreateMode, ZooKeeper};
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, ZkInterProcessWriteLock, ZkSemaphore,
};
use zklock::recipes::double_barrier::DoubleBarrier;
use zklock::recipes::election::LeaderElectionSupport;
use zklock::recipes::group::Group;
use zklock::recipes::leader_latch::LeaderLatch;
use zklock::recipes::leader_manager::ZkLeaderManager;
use zklock::recipes::persistent_node::PersistentNode;
use zklock::recipes::revocable::RevocableReadWriteLock;
use zklock::recipes::tree_cache::TreeCache;
use zklock::recipes::write_lock::WriteLock;
use zklock::testing::{test_servers, unique_root, wait_until, FaultProxy};
use zklock::{zkutil, ZooKeeperWatcher};

/// Well under the close bound (2 s): what a drop that returns "at once" takes
/// on a loaded machine.
const PROMPT: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(15);

/// A watcher through a fresh proxy, a direct client, and a fresh root.
struct Setup {
    proxy: FaultProxy,
    zkw: ZooKeeperWatcher,
    direct: ZooKeeper,
    root: String,
}

fn setup(name: &str) -> Setup {
    let proxy = FaultProxy::start(test_servers()).unwrap();
    let zkw = lock_watcher(&proxy.connect_string(), Duration::from_secs(10));
    let direct = raw();
    let root = unique_root(name);
    zkutil::create_with_parents(&zkw, &root).unwrap();
    Setup {
        proxy,
        zkw,
        direct,
        root,
    }
}

impl Setup {
    /// The children of `path` on the server, seen by the direct client.
    fn children(&self, path: &str) -> Vec<String> {
        self.direct.get_children(path, false).unwrap_or_default()
    }

    /// Stalls the link, drops `value` and asserts the drop was prompt; then
    /// heals the link and waits until `gone` holds (the node removed in the
    /// background, or with the session).
    fn drop_during_a_stall<T>(&self, what: &str, value: T, gone: impl Fn() -> bool) {
        self.proxy.stall();
        let t = Instant::now();
        drop(value);
        let took = t.elapsed();
        assert!(
            took < PROMPT,
            "dropping {what} during a stall took {took:?}"
        );
        self.proxy.reset();
        wait_until(WAIT, &format!("{what}'s node to go after the heal"), gone);
    }

    fn finish(self) {
        let _ = zkutil::delete_node_recursively(&self.zkw, &self.root);
        self.zkw.close().unwrap();
        self.direct.close().unwrap();
    }
}

#[test]
fn a_semaphore_lease() {
    let s = setup("drop-lease");
    let sem = ZkSemaphore::new(&s.zkw, &format!("{}/sem", s.root), 1, b"").unwrap();
    let lease = sem.acquire().unwrap();
    let leases = format!("{}/sem/leases", s.root);
    let before = s.children(&leases).len();
    assert!(before >= 1, "the lease's node");
    s.drop_during_a_stall("a SemaphoreLease", lease, || {
        s.children(&leases).len() < before
    });
    s.finish();
}

#[test]
fn an_owned_lock_guard_and_its_lock() {
    let s = setup("drop-owned");
    let path = format!("{}/lock", s.root);
    let lock = Arc::new(ZkInterProcessWriteLock::new(&s.zkw, &path, b"", None).unwrap());
    let guard = lock.clone().lock_owned().unwrap();
    assert_eq!(s.children(&path).len(), 1);
    s.drop_during_a_stall("an OwnedLockGuard", guard, || s.children(&path).is_empty());
    // A held lock instance (no guard) dropped.
    lock.acquire().unwrap();
    assert_eq!(s.children(&path).len(), 1);
    let Ok(lock) = Arc::try_unwrap(lock) else {
        panic!("the only handle");
    };
    s.drop_during_a_stall("a held ZkInterProcessLockBase", lock, || {
        s.children(&path).is_empty()
    });
    s.finish();
}

#[test]
fn a_held_revocable_lock() {
    let s = setup("drop-revocable");
    let path = format!("{}/rw", s.root);
    let rw = RevocableReadWriteLock::new(&s.zkw, &path, None).unwrap();
    let lock = rw.write_lock(b"");
    lock.acquire().unwrap();
    assert_eq!(s.children(&path).len(), 1);
    s.drop_during_a_stall("a held RevocableLock", lock, || {
        s.children(&path).is_empty()
    });
    s.finish();
}

#[test]
fn a_group_member() {
    let s = setup("drop-member");
    let path = format!("{}/group", s.root);
    let group = Group::new(&s.zkw, &path).unwrap();
    let member = group.join("m", b"").unwrap();
    assert_eq!(s.children(&path).len(), 1);
    s.drop_during_a_stall("a group Member", member, || s.children(&path).is_empty());
    s.finish();
}

#[test]
fn a_double_barrier_entered() {
    let s = setup("drop-barrier");
    let path = format!("{}/barrier", s.root);
    let barrier = DoubleBarrier::new(&s.zkw, &path, 1).unwrap();
    assert!(barrier.enter(WAIT).unwrap());
    let node = barrier.node().expect("its node");
    s.drop_during_a_stall("an entered DoubleBarrier", barrier, || {
        matches!(s.direct.exists(&node, false), Ok(None))
    });
    s.finish();
}

#[test]
fn a_write_lock_owner() {
    let s = setup("drop-write-lock");
    let dir = format!("{}/wl", s.root);
    let lock = WriteLock::new(&s.zkw, &dir, zklock::client::Acl::open_unsafe()).unwrap();
    assert!(lock.lock().unwrap());
    assert_eq!(s.children(&dir).len(), 1);
    s.drop_during_a_stall("an owning WriteLock", lock, || s.children(&dir).is_empty());
    s.finish();
}

#[test]
fn a_leader_election_offer() {
    let s = setup("drop-election");
    let root = format!("{}/election", s.root);
    let election = LeaderElectionSupport::new(&s.zkw, &root, "host").unwrap();
    election.start().unwrap();
    assert_eq!(s.children(&root).len(), 1);
    s.drop_during_a_stall("a started LeaderElectionSupport", election, || {
        s.children(&root).is_empty()
    });
    s.finish();
}

#[test]
fn a_leader_latch() {
    let s = setup("drop-latch");
    let path = format!("{}/latch", s.root);
    let latch = LeaderLatch::new(&s.zkw, &path, "me").unwrap();
    latch.start().unwrap();
    assert!(latch.await_leadership(WAIT).unwrap());
    assert_eq!(s.children(&path).len(), 1);
    s.drop_during_a_stall("a leading LeaderLatch", latch, || {
        s.children(&path).is_empty()
    });
    s.finish();
}

#[test]
fn a_leader_manager_leading() {
    let s = setup("drop-manager");
    let znode = format!("{}/leader", s.root);
    let manager = ZkLeaderManager::new(&s.zkw, &znode, "me");
    manager.start().unwrap();
    assert!(manager.wait_to_become_leader().unwrap());
    // Its drop tries the guarded delete once (no retry after a reconnect),
    // so after a stall the znode goes with the session, not before.
    s.drop_during_a_stall("a leading ZkLeaderManager", manager, || true);
    s.zkw.close().unwrap();
    assert!(
        s.direct.exists(&znode, false).unwrap().is_none(),
        "the znode went with the session"
    );
    let cleaner = lock_watcher(&test_servers(), Duration::from_secs(6));
    zkutil::delete_node_recursively(&cleaner, &s.root).unwrap();
    cleaner.close().unwrap();
    s.direct.close().unwrap();
}

#[test]
fn a_persistent_node() {
    let s = setup("drop-persistent");
    let path = format!("{}/node", s.root);
    let node = PersistentNode::start(&s.zkw, &path, CreateMode::Ephemeral, b"").unwrap();
    assert!(node.wait_created(WAIT));
    s.drop_during_a_stall("a PersistentNode", node, || {
        matches!(s.direct.exists(&path, false), Ok(None))
    });
    s.finish();
}

#[test]
fn a_tree_cache() {
    let s = setup("drop-cache");
    let cache = TreeCache::start(&s.zkw, &s.root).unwrap();
    // Its persistent recursive watch is removed in the background; nothing
    // to see on the server but the drop's bound.
    s.drop_during_a_stall("a TreeCache", cache, || true);
    s.finish();
}

/// A distributed queue whose consumer holds a receipt (made by its first
/// claim): dropping it removes the receipt in the background.
#[test]
fn a_queue_with_its_receipt() {
    use zklock::recipes::queue::DistributedQueue;
    let s = setup("drop-queue");
    let dir = format!("{}/q", s.root);
    let queue = DistributedQueue::new(&s.zkw, &dir).unwrap();
    queue.offer(b"item").unwrap();
    assert_eq!(queue.poll().unwrap().as_deref(), Some(&b"item"[..]));
    let receipts = format!("{dir}-receipts");
    assert_eq!(s.children(&receipts).len(), 1, "the consumer's receipt");
    s.drop_during_a_stall("a DistributedQueue with its receipt", queue, || {
        s.children(&receipts).is_empty()
    });
    s.finish();
}
