//! Two identities, one recipe: where one participant must look at another's
//! node, under the project's ACL policies, on every server version
//! (`make test` runs this binary on 3.8.0, 3.6.3 and 3.9.3).
//!
//! ZooKeeper 3.8.4+ and 3.9.2+ check `READ` on `exists` (ZOOKEEPER-2590),
//! as every version does on `getData` and `getChildren`. Each test runs a
//! crossing twice: under a policy that gives the other participant no `READ`
//! on the nodes it watches (the recipe's directories world-readable, the
//! participants' nodes creator-only plus `CREATE | DELETE` for the other:
//! `AclPolicy::secure(dirs).with_grant(CREATE | DELETE, other)`), and under
//! the remedy the docs give (the same grant with `READ`). Under the first,
//! each crossing either works on every version or fails at once with
//! [`Error::NoReadPermission`] naming the node and the read, never a hang,
//! a retry loop or a wrong answer; under the remedy it works everywhere.
//! Sessions are digest identities (`alice`, `bob`) on the shared server.

mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zklock::client::{AclPolicy, Id, Perms, ReplyKind};
use zklock::lock::{
    Dialect, InterProcessLock, InterProcessReadWriteLock, ZkInterProcessMutex,
    ZkInterProcessReadWriteLock, ZkSemaphore, SEMAPHORE_LEASES, SEMAPHORE_LOCKS,
};
use zklock::recipes::barrier::Barrier;
use zklock::recipes::double_barrier::{BarrierStep, DoubleBarrier};
use zklock::recipes::election::LeaderElectionSupport;
use zklock::recipes::group::Group;
use zklock::recipes::leader_latch::LeaderLatch;
use zklock::recipes::queue::DistributedQueue;
use zklock::recipes::tree_cache::TreeCache;
use zklock::testing::{server_version, test_servers, ServerVersion};
use zklock::{Error, LoggingAbortable, ZkError, ZooKeeperNodeTracker, ZooKeeperWatcher};

/// Bound of every wait for an outcome.
const WAIT: Duration = Duration::from_secs(10);

/// Whether the server checks `READ` on `exists` (ZOOKEEPER-2590: 3.8.4+,
/// 3.9.2+); prints which behaviour the calling test expects.
fn exists_checks_read() -> bool {
    let v = server_version();
    let checks = v >= ServerVersion::new(3, 9, 2)
        || (ServerVersion::new(3, 8, 4)..ServerVersion::new(3, 9, 0)).contains(&v);
    let test = thread::current().name().unwrap_or("this test").to_string();
    println!(
        "{test}: ZooKeeper {v}: exists {} READ (ZOOKEEPER-2590)",
        if checks { "checks" } else { "does not check" }
    );
    checks
}

/// Two participants of one recipe under `root`: alice and bob, digest
/// identities, each with the policy `AclPolicy::secure(dirs)` (the recipe's
/// directories: creator `ALL` plus world `READ`; every other node
/// creator-only) granting `perms` to the other.
struct Pair {
    alice: ZooKeeperWatcher,
    bob: ZooKeeperWatcher,
    root: String,
}

impl Pair {
    fn new(name: &str, dirs: &[&str], perms: Perms) -> Pair {
        Pair::with_policy(name, dirs, |dirs, other| {
            AclPolicy::secure(dirs).with_grant(perms, other)
        })
    }

    /// As [`Pair::new`], each session's policy `policy(dirs, other's id)`
    /// (`dirs` under the root).
    fn with_policy(name: &str, dirs: &[&str], policy: impl Fn(&[&str], Id) -> AclPolicy) -> Pair {
        common::init_log();
        let (setup, root) = common::setup_root(&test_servers(), name);
        setup.close().unwrap();
        let dirs: Vec<String> = dirs
            .iter()
            .map(|d| {
                if d.is_empty() {
                    root.clone()
                } else {
                    format!("{root}/{d}")
                }
            })
            .collect();
        let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
        let connect = |me: &str, other: &str| {
            let zkw = ZooKeeperWatcher::builder(&test_servers())
                .with_identifier(me)
                .with_session_timeout(Duration::from_secs(6))
                .with_acl_policy(policy(&dirs, Id::digest(other, other)))
                .connect()
                .unwrap();
            zkw.zookeeper()
                .add_auth("digest", format!("{me}:{me}").as_bytes())
                .unwrap();
            zkw
        };
        Pair {
            alice: connect("alice", "bob"),
            bob: connect("bob", "alice"),
            root,
        }
    }

    fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root)
    }

    fn children(&self, rel: &str) -> Vec<String> {
        common::children(self.alice.zookeeper(), &self.path(rel))
    }

    fn close(self) {
        common::client::rmr(self.alice.zookeeper(), &self.root);
        self.bob.close().unwrap();
        self.alice.close().unwrap();
    }
}

/// The grant without `READ`: the other participant may create and delete
/// beside the node, not read it.
fn no_read() -> Perms {
    Perms::CREATE | Perms::DELETE
}

/// The remedy: the same grant with `READ`.
fn with_read() -> Perms {
    Perms::READ | Perms::CREATE | Perms::DELETE
}

/// `r` is [`Error::NoReadPermission`] of `operation` on a node under `under`.
#[track_caller]
fn assert_no_read<T: std::fmt::Debug>(r: zklock::Result<T>, operation: &str, under: &str) {
    match r {
        Err(Error::NoReadPermission {
            operation: o,
            ref path,
        }) if o == operation && path.starts_with(under) => {
            let e = r.unwrap_err();
            assert!(e.is(ZkError::NoAuth), "{e:?}");
            assert!(e.to_string().contains("READ"), "{e}");
            if operation == "exists" {
                assert!(e.to_string().contains("ZOOKEEPER-2590"), "{e}");
            }
        }
        other => panic!("expected NoReadPermission of {operation} under {under}, got {other:?}"),
    }
}

/// `f` on a thread, its outcome within [`WAIT`] (a hang or an endless retry
/// fails the test).
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(WAIT)
        .unwrap_or_else(|_| panic!("{what}: no outcome within {WAIT:?}"))
}

/// Lock waiters watch the node ahead with `getData` (as Curator), which
/// needs `READ` on every version: without it, bob's waiter fails at once
/// with `NoReadPermission` of `getData` on alice's node, and leaves no node
/// behind; with it, bob waits and gets the lock alice releases.
#[test]
fn lock_waiter_behind_another_identity() {
    for (perms, works) in [(no_read(), false), (with_read(), true)] {
        let p = Pair::new("aclv-lock", &["", "lock"], perms);
        let lock = p.path("lock");
        let a = ZkInterProcessMutex::new(&p.alice, &lock, Dialect::Curator, b"a").unwrap();
        let b = Arc::new(ZkInterProcessMutex::new(&p.bob, &lock, Dialect::Curator, b"b").unwrap());
        a.acquire().unwrap();
        let waiter = b.clone();
        let r = within("bob's try_acquire", move || {
            waiter.try_acquire(Duration::from_millis(300))
        });
        if works {
            assert!(!r.unwrap());
            a.release().unwrap();
            assert!(b.try_acquire(WAIT).unwrap());
            b.release().unwrap();
        } else {
            assert_no_read(r, "getData", &lock);
            assert_eq!(p.children("lock").len(), 1, "bob's node is gone");
            assert!(a.is_held());
            a.release().unwrap();
        }
        p.close();
    }
}

/// A read lock behind another identity's write lock (and a write lock
/// behind its read lock): as [`lock_waiter_behind_another_identity`].
#[test]
fn read_write_lock_behind_another_identity() {
    for (perms, works) in [(no_read(), false), (with_read(), true)] {
        let p = Pair::new("aclv-rw", &["", "rw"], perms);
        let lock = p.path("rw");
        let a = ZkInterProcessReadWriteLock::new(&p.alice, &lock, None)
            .unwrap()
            .write_lock(b"a");
        let b = Arc::new(
            ZkInterProcessReadWriteLock::new(&p.bob, &lock, None)
                .unwrap()
                .read_lock(b"b"),
        );
        a.acquire().unwrap();
        let waiter = b.clone();
        let r = within("bob's read lock", move || {
            waiter.try_acquire(Duration::from_millis(300))
        });
        if works {
            assert!(!r.unwrap());
            a.release().unwrap();
            assert!(b.try_acquire(WAIT).unwrap());
            // And alice's write lock behind bob's read lock.
            assert!(!a.try_acquire(Duration::from_millis(300)).unwrap());
            b.release().unwrap();
        } else {
            assert_no_read(r, "getData", &lock);
            assert_eq!(p.children("rw").len(), 1, "bob's node is gone");
            a.release().unwrap();
        }
        p.close();
    }
}

/// A semaphore's waiter waits on the leases' directory (a child watch)
/// and its internal lock's holder only briefly: with a holder of another
/// identity it works under both policies, on every version.
#[test]
fn semaphore_with_another_identity() {
    for perms in [no_read(), with_read()] {
        let dirs = [
            "",
            "sem",
            &format!("sem/{SEMAPHORE_LOCKS}"),
            &format!("sem/{SEMAPHORE_LEASES}"),
        ];
        let p = Pair::new("aclv-sem", &dirs, perms);
        let sem = p.path("sem");
        let a = ZkSemaphore::new(&p.alice, &sem, 1, b"a").unwrap();
        let b = Arc::new(ZkSemaphore::new(&p.bob, &sem, 1, b"b").unwrap());
        let lease = a.acquire().unwrap();
        let waiter = b.clone();
        let r = within("bob's lease", move || {
            waiter.try_acquire(Duration::from_millis(300))
        });
        assert!(r.unwrap().is_none(), "one lease, alice holds it");
        lease.release().unwrap();
        let lease = b.try_acquire(WAIT).unwrap().expect("bob's lease");
        lease.release().unwrap();
        p.close();
    }
}

/// ZooKeeper's election recipe (`LeaderElectionSupport`) watches the offer
/// ahead with `exists`, as Java's: without `READ` on alice's offer bob
/// waits behind it on 3.8.0 and 3.6 and becomes the leader when alice
/// stops, and fails at once with `NoReadPermission` of `exists` naming
/// alice's offer (and ZOOKEEPER-2590) on 3.8.4+ / 3.9.2+. With `READ` it
/// works on every version.
#[test]
fn election_behind_another_identity() {
    for (perms, works) in [(no_read(), false), (with_read(), true)] {
        let p = Pair::new("aclv-elect", &["", "elect"], perms);
        let root = p.path("elect");
        let a = LeaderElectionSupport::new(&p.alice, &root, "alice").unwrap();
        a.start().unwrap();
        assert!(a.await_leadership(WAIT).unwrap());
        let b = Arc::new(LeaderElectionSupport::new(&p.bob, &root, "bob").unwrap());
        let waiter = b.clone();
        let r = within("bob's election", move || {
            waiter.start()?;
            waiter.await_leadership(Duration::from_millis(500))
        });
        if works {
            assert!(!r.unwrap());
            a.stop().unwrap();
            assert!(b.await_leadership(WAIT).unwrap());
        } else {
            assert_no_read(r, "getData", &root);
            assert!(a.has_leadership());
            a.stop().unwrap();
        }
        b.stop().unwrap();
        assert!(p.children("elect").is_empty(), "{:?}", p.children("elect"));
        p.close();
    }
}

/// Curator's leader latch watches the node ahead with `getData`: without
/// `READ`, bob's latch fails with `NoReadPermission` of `getData` on every
/// version; with it, bob leads once alice closes.
#[test]
fn leader_latch_behind_another_identity() {
    for (perms, works) in [(no_read(), false), (with_read(), true)] {
        let p = Pair::new("aclv-latch", &["", "latch"], perms);
        let path = p.path("latch");
        let a = LeaderLatch::new(&p.alice, &path, "alice").unwrap();
        a.start().unwrap();
        assert!(a.await_leadership(WAIT).unwrap());
        let b = Arc::new(LeaderLatch::new(&p.bob, &path, "bob").unwrap());
        let waiter = b.clone();
        // The first round runs in `start`: its failure is start's.
        let r = within("bob's latch", move || {
            waiter.start()?;
            waiter.await_leadership(Duration::from_millis(500))
        });
        if works {
            assert!(!r.unwrap());
            a.close().unwrap();
            assert!(b.await_leadership(WAIT).unwrap());
        } else {
            assert_no_read(r, "getData", &path);
            a.close().unwrap();
        }
        b.close().unwrap();
        assert!(p.children("latch").is_empty(), "{:?}", p.children("latch"));
        p.close();
    }
}

/// A consumer of another identity's items reads them (`getData`): without
/// `READ` the poll fails with `NoReadPermission` and the item stays; with
/// it, bob takes alice's item.
#[test]
fn queue_items_of_another_identity() {
    for (perms, works) in [(no_read(), false), (with_read(), true)] {
        let p = Pair::new("aclv-queue", &["", "queue"], perms);
        let dir = p.path("queue");
        DistributedQueue::new(&p.alice, &dir)
            .unwrap()
            .offer(b"job")
            .unwrap();
        let b = DistributedQueue::new(&p.bob, &dir).unwrap();
        let r = within("bob's poll", move || b.poll());
        if works {
            assert_eq!(r.unwrap(), Some(b"job".to_vec()));
            assert!(p.children("queue").is_empty());
        } else {
            assert_no_read(r, "getData", &dir);
            assert_eq!(p.children("queue").len(), 1, "alice's item stays");
        }
        p.close();
    }
}

/// A barrier is alice's node. Bob's `is_set` looks at it with `exists`:
/// without `READ` it answers on 3.8.0 and 3.6 and fails with
/// `NoReadPermission` of `exists` on 3.8.4+ / 3.9.2+. Bob's wait reads it
/// with a data watch (`getData`: no watch is left behind when it is gone),
/// which needs `READ` on every version. With `READ` both work everywhere.
#[test]
fn barrier_of_another_identity() {
    let checks = exists_checks_read();
    for (perms, works) in [(no_read(), false), (with_read(), true)] {
        let p = Pair::new("aclv-barrier", &[""], perms);
        let path = p.path("barrier");
        let a = Barrier::new(&p.alice, &path).unwrap();
        a.set_barrier().unwrap();
        let b = Arc::new(Barrier::new(&p.bob, &path).unwrap());
        if works || !checks {
            assert!(b.is_set().unwrap());
        } else {
            assert_no_read(b.is_set(), "exists", &path);
        }
        if works {
            let waiter = b.clone();
            let t = thread::spawn(move || waiter.wait_on_barrier(WAIT));
            assert!(!b.wait_on_barrier(Duration::from_millis(200)).unwrap());
            assert!(a.remove_barrier().unwrap());
            assert!(
                t.join().unwrap().unwrap(),
                "bob's wait ends when alice removes it"
            );
        } else {
            let waiter = b.clone();
            let r = within("bob's wait", move || waiter.wait_on_barrier(WAIT));
            assert_no_read(r, "getData", &path);
            assert!(a.remove_barrier().unwrap());
        }
        p.close();
    }
}

/// A group's members are listed from its directory (readable) and read one
/// by one: bob sees alice's membership under both policies, her data only
/// with `READ` (`NoReadPermission` of `getData` without it).
#[test]
fn group_member_of_another_identity() {
    for (perms, works) in [(no_read(), false), (with_read(), true)] {
        let p = Pair::new("aclv-group", &["", "group"], perms);
        let path = p.path("group");
        let member = Group::new(&p.alice, &path)
            .unwrap()
            .join("alice", b"a")
            .unwrap();
        let b = Group::new(&p.bob, &path).unwrap();
        assert_eq!(b.members().unwrap(), vec!["alice".to_string()]);
        if works {
            assert_eq!(b.member_data("alice").unwrap(), Some(b"a".to_vec()));
        } else {
            assert_no_read(b.member_data("alice"), "getData", &path);
        }
        member.leave().unwrap();
        p.close();
    }
}

/// HBase's node tracker of another identity's node: without `READ` its
/// start fails with `NoReadPermission` (of `exists` where the server checks
/// it, of the `getData` after it elsewhere) and the abortable hears of it;
/// with `READ` it tracks the data.
#[test]
fn tracker_of_another_identitys_node() {
    let checks = exists_checks_read();
    for (perms, works) in [(no_read(), false), (with_read(), true)] {
        let p = Pair::new("aclv-tracker", &[""], perms);
        let node = p.path("master");
        zklock::zkutil::create_with_parents(&p.alice, &node).unwrap();
        zklock::zkutil::set_data(&p.alice, &node, b"alice", None).unwrap();
        let abortable = Arc::new(LoggingAbortable::new());
        let t = ZooKeeperNodeTracker::new(&p.bob, &node, abortable.clone());
        let r = t.start();
        if works {
            r.unwrap();
            assert_eq!(t.get_data(false), Some(b"alice".to_vec()));
        } else {
            assert_no_read(r, if checks { "exists" } else { "getData" }, &node);
            assert!(zklock::Abortable::is_aborted(&*abortable));
        }
        t.stop();
        p.close();
    }
}

/// A tree cache of another identity's subtree: the directory is readable,
/// alice's node in it is not (without `READ`). The cache must not claim a
/// complete picture it does not have.
#[test]
fn tree_cache_of_another_identitys_nodes() {
    for (perms, works) in [(no_read(), false), (with_read(), true)] {
        let p = Pair::new("aclv-cache", &["", "tree"], perms);
        let dir = p.path("tree");
        let node = p.path("tree/alice");
        zklock::zkutil::create_with_parents(&p.alice, &node).unwrap();
        p.alice.zookeeper().set_data(&node, b"a", None).unwrap();
        let bob = p.bob.clone();
        let d = dir.clone();
        let r = within("bob's cache", move || {
            let cache = TreeCache::start(&bob, &d)?;
            let synced = cache.wait_synced(WAIT);
            let got = cache.get(&format!("{d}/alice"));
            cache.close()?;
            synced.map(|s| (s, got))
        });
        if works {
            let (synced, got) = r.unwrap();
            assert!(synced);
            assert_eq!(got.expect("alice's node cached").data, b"a");
        } else {
            assert_no_read(r, "getData", &node);
        }
        p.close();
    }
}

/// A shared node another identity created, which this one may create and
/// delete beside but not read (a directory of a fleet): HBase's
/// `createAndFailSilent` (`zkutil`, and the watcher's base znodes at
/// connect) looks with `exists` first, which 3.8.4+ / 3.9.2+ refuse there;
/// it then creates, and the `NodeExists` says the node is there: `Ok` on
/// every version, as on 3.8.0.
#[test]
fn create_and_fail_silent_on_another_identitys_node() {
    let checks = exists_checks_read();
    let p = Pair::new("aclv-shared", &[""], no_read());
    let shared = p.path("shared");
    zklock::zkutil::create_and_fail_silent(&p.alice, &shared).unwrap();
    if checks {
        assert_no_read(p.bob.zookeeper().exists(&shared, false), "exists", &shared);
    } else {
        assert!(p.bob.zookeeper().exists(&shared, false).unwrap().is_some());
    }
    zklock::zkutil::create_and_fail_silent(&p.bob, &shared).unwrap();
    // And a child of it: bob may create there.
    zklock::zkutil::create_with_parents(&p.bob, &format!("{shared}/bob")).unwrap();
    assert_eq!(p.children("shared"), vec!["bob".to_string()]);
    p.close();
}

/// A candidate whose offer's create lost its reply looks for its offer
/// among the `n_` offers (their owner is in the `Stat`): another
/// candidate's offer it may not read is not its own, on every version
/// (3.8.4+ / 3.9.2+ refuse the `exists`). It finds its own and goes on,
/// then fails at the offer ahead (`getData`, see
/// [`election_behind_another_identity`]) as without the lost reply.
#[test]
fn election_offer_found_again_beside_another_identitys_offer() {
    let p = Pair::new("aclv-elect-lost", &["", "elect"], no_read());
    let root = p.path("elect");
    let a = LeaderElectionSupport::new(&p.alice, &root, "alice").unwrap();
    a.start().unwrap();
    assert!(a.await_leadership(WAIT).unwrap());
    let b = Arc::new(LeaderElectionSupport::new(&p.bob, &root, "bob").unwrap());
    p.bob.zookeeper().lose_next_reply(ReplyKind::Create);
    let session = p.bob.zookeeper().session_id();
    let waiter = b.clone();
    let r = within("bob's election", move || {
        waiter.start()?;
        waiter.await_leadership(Duration::from_millis(500))
    });
    assert_eq!(p.bob.zookeeper().session_id(), session, "the same session");
    assert_no_read(r, "getData", &root);
    assert_eq!(p.children("elect").len(), 2, "one offer each");
    b.stop().unwrap();
    a.stop().unwrap();
    assert!(p.children("elect").is_empty(), "{:?}", p.children("elect"));
    p.close();
}

/// A double barrier: the member that fills the round counts the others
/// in the `multi` that makes `ready` (a `check` of each, which needs `READ`
/// on every version). Without `READ` on alice's node, bob, filling the
/// round, fails at once with `NoReadPermission` of `check` naming her node
/// (and withdraws); alice, waiting, sees no round and times out. With `READ`
/// (and `WRITE` on the barrier's node, which every member writes) both
/// enter and leave.
#[test]
fn double_barrier_member_of_another_identity() {
    // Every member writes the barrier's node (zklock counts the `ready`s
    // made in its version): `WRITE` too.
    for (perms, works) in [(no_read(), false), (with_read() | Perms::WRITE, true)] {
        let p = Pair::new("aclv-dbarrier", &["", "db"], perms);
        let path = p.path("db");
        let alice = double_barrier_waiter(&p.alice, &path, Duration::from_secs(2));
        let b = DoubleBarrier::new(&p.bob, &path, 2).unwrap();
        let (r, bob_left) = within("bob's enter", move || {
            let r = b.enter(WAIT);
            let left = match r {
                Ok(true) => b.leave(WAIT),
                _ => Ok(true),
            };
            (r, left)
        });
        let (alice_entered, alice_left) = within("alice's enter", move || alice.join().unwrap());
        if works {
            assert!(r.unwrap());
            assert!(alice_entered.unwrap());
            assert!(bob_left.unwrap());
            assert!(alice_left.unwrap());
        } else {
            assert_no_read(r, "check", &format!("{path}/m"));
            assert!(!alice_entered.unwrap(), "no round formed");
        }
        assert!(p.children("db").is_empty(), "{:?}", p.children("db"));
        p.close();
    }
}

/// A member of the double barrier at `path` (of 2) entering on a thread with
/// `timeout`, and leaving if it entered; returns once it waits alone.
fn double_barrier_waiter(
    zkw: &ZooKeeperWatcher,
    path: &str,
    timeout: Duration,
) -> thread::JoinHandle<(zklock::Result<bool>, zklock::Result<bool>)> {
    let (waiting_tx, waiting_rx) = mpsc::channel();
    let waiting_tx = std::sync::Mutex::new(waiting_tx);
    let a = DoubleBarrier::new(zkw, path, 2)
        .unwrap()
        .with_step_hook(move |step| {
            if step == BarrierStep::Waiting {
                let _ = waiting_tx.lock().unwrap().send(());
            }
        });
    let t = thread::spawn(move || {
        let r = a.enter(timeout);
        let left = match r {
            Ok(true) => a.leave(WAIT),
            _ => Ok(true),
        };
        (r, left)
    });
    waiting_rx
        .recv_timeout(WAIT)
        .expect("the member waits alone");
    t
}

/// A double barrier whose members may read each other's nodes but not
/// `ready` (a path rule for it): bob fills the round and makes `ready` with
/// his ACL. From 3.7 on the server drops its creation event for alice, who
/// waits first; she also watches the barrier's node (readable; the `multi`
/// that makes `ready` writes it), so she fails at once with
/// `NoReadPermission` naming `ready` (of `exists` where the server checks
/// it, of `getData` elsewhere) on every version, never waiting out her
/// timeout. Bob enters and leaves.
#[test]
fn double_barrier_ready_of_another_identity() {
    let checks = exists_checks_read();
    let p = Pair::with_policy("aclv-dbready", &["", "db"], |dirs, other| {
        let ready = format!("{}/ready", dirs[1]);
        AclPolicy::secure(dirs)
            .with_grant(with_read() | Perms::WRITE, other.clone())
            .with_path(
                &ready,
                &[
                    zklock::client::Acl::creator_all()[0].clone(),
                    zklock::client::Acl::new(no_read(), other),
                ],
            )
    });
    let path = p.path("db");
    // Alice's timeout is WAIT: without the watch on the barrier's node she
    // waits it out.
    let alice = double_barrier_waiter(&p.alice, &path, WAIT);
    let b = DoubleBarrier::new(&p.bob, &path, 2).unwrap();
    assert!(b.enter(WAIT).unwrap(), "bob fills the round");
    let (r, _) = within("alice's enter", move || alice.join().unwrap());
    let ready = format!("{path}/ready");
    assert_no_read(r, if checks { "exists" } else { "getData" }, &ready);
    assert!(b.leave(WAIT).unwrap(), "alice withdrew: bob leaves alone");
    assert!(p.children("db").is_empty(), "{:?}", p.children("db"));
    p.close();
}

/// A persistent node whose name alice's node holds: bob's node reports it
/// (`Foreign` with its `Stat` where the server answers the `exists`,
/// `ForeignUnreadable` where 3.8.4+ / 3.9.2+ refuse it without `READ`) and
/// is created once alice's node is gone, on every version (servers from 3.7
/// on drop the deletion event for a session without `READ` on the node:
/// bob also watches the parent's children).
#[test]
fn persistent_node_behind_another_identitys_node() {
    use zklock::client::CreateMode;
    use zklock::recipes::persistent_node::{PersistentNode, PersistentNodeEvent};
    let checks = exists_checks_read();
    for (perms, readable) in [(no_read(), false), (with_read(), true)] {
        let p = Pair::new("aclv-pnode", &[""], perms);
        let path = p.path("svc");
        zklock::zkutil::create_with_parents(&p.alice, &path).unwrap();
        let node = PersistentNode::start(&p.bob, &path, CreateMode::Persistent, b"bob").unwrap();
        let events = node.events();
        let first = events
            .recv_timeout(WAIT)
            .expect("bob's node reports alice's");
        match first {
            PersistentNodeEvent::ForeignUnreadable(ref at) if checks && !readable => {
                assert_eq!(*at, path)
            }
            PersistentNodeEvent::Foreign(_) if readable || !checks => {}
            e => panic!("readable {readable}: {e:?}"),
        }
        assert!(!node.is_created());
        p.alice.zookeeper().delete(&path, None).unwrap();
        assert!(
            node.wait_created(WAIT),
            "bob's node made once alice's is gone"
        );
        assert!(matches!(
            events.recv_timeout(WAIT),
            Ok(PersistentNodeEvent::Created(_))
        ));
        node.close();
        let left = common::children(p.alice.zookeeper(), &p.root);
        assert!(left.is_empty(), "{left:?}");
        p.close();
    }
}

/// A revoker that may write alice's lock node but not read it: its wait
/// for her release needs `READ` (servers from 3.7 on drop the deletion
/// event for it, 3.8.4+ / 3.9.2+ refuse its `exists`), so
/// `attempt_revoke_with_grace` fails at once with `NoReadPermission` of
/// `getData` on every version, before writing the request (alice keeps her
/// lock, unasked), never waiting out the grace. With `READ`, alice (auto
/// release) releases and the revocation ends `Released`.
#[test]
fn revoke_lock_of_another_identity() {
    use zklock::recipes::revocable::{
        attempt_revoke_with_grace, RevocableWriteLock, RevokeOutcome,
    };
    for (perms, works) in [
        (no_read() | Perms::WRITE, false),
        (with_read() | Perms::WRITE, true),
    ] {
        let p = Pair::new("aclv-revoke", &["", "rev"], perms);
        let lock = p.path("rev");
        let a = RevocableWriteLock::new(&p.alice, &lock, b"a", None)
            .unwrap()
            .with_auto_release(true);
        a.acquire().unwrap();
        let node = a.acquired_lock().unwrap().path;
        let bob = p.bob.clone();
        let n = node.clone();
        // A grace longer than the bound: waiting it out fails the test.
        let r = within("bob's revocation", move || {
            attempt_revoke_with_grace(&bob, &n, WAIT * 3)
        });
        if works {
            assert_eq!(r.unwrap(), RevokeOutcome::Released);
            assert!(!a.is_held());
        } else {
            assert_no_read(r, "getData", &node);
            assert!(a.is_held());
            assert!(!a.is_revocation_requested(), "nothing written");
            a.release().unwrap();
        }
        assert!(p.children("rev").is_empty(), "{:?}", p.children("rev"));
        p.close();
    }
}

/// Alice replaces bob's persistent node with hers in one `multi` (she may
/// delete beside it): bob's node hears its deletion and finds a node at its
/// name that is not the one it made, whose owner mark it may not look for
/// (`getACL` needs `READ` or `ADMIN`): a foreign node, reported as such on
/// every version, and bob's made again once alice's goes.
#[test]
fn persistent_node_replaced_by_another_identitys_node() {
    use zklock::client::{CreateMode, Op};
    use zklock::recipes::persistent_node::{PersistentNode, PersistentNodeEvent};
    let checks = exists_checks_read();
    let p = Pair::new("aclv-pnode-swap", &[""], no_read());
    let path = p.path("svc");
    let node = PersistentNode::start(&p.bob, &path, CreateMode::Persistent, b"bob").unwrap();
    let events = node.events();
    assert!(node.wait_created(WAIT));
    assert!(matches!(
        events.recv_timeout(WAIT),
        Ok(PersistentNodeEvent::Created(_))
    ));
    let acl = p.alice.recoverable_zookeeper().acl_for(&path).to_vec();
    p.alice
        .zookeeper()
        .multi(&[
            Op::Delete {
                path: path.clone(),
                version: None,
            },
            Op::Create {
                path: path.clone(),
                data: b"alice".to_vec(),
                acl,
                mode: CreateMode::Persistent,
            },
        ])
        .unwrap();
    match events.recv_timeout(WAIT) {
        Ok(PersistentNodeEvent::ForeignUnreadable(ref at)) if checks => assert_eq!(*at, path),
        Ok(PersistentNodeEvent::Foreign(_)) if !checks => {}
        e => panic!("{e:?}"),
    }
    p.alice.zookeeper().delete(&path, None).unwrap();
    assert!(matches!(
        events.recv_timeout(WAIT),
        Ok(PersistentNodeEvent::Created(_))
    ));
    assert!(node.is_created());
    node.close();
    let left = common::children(p.alice.zookeeper(), &p.root);
    assert!(left.is_empty(), "{left:?}");
    p.close();
}
