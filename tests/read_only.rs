//! Read-only mode (issue 46) against a real three-server ensemble started
//! with `-Dreadonlymode.enabled=true` and `localSessionsEnabled=true`: a
//! quorum lost (two members killed), a read-only-capable client reads
//! through the member left, writes and locks fail with `NotReadOnly`, a lock
//! held from before stays in doubt (never "held" again without proof), and
//! both come back to read-write when the quorum heals.
//!
//! One ensemble of three JVMs per test: about 30–60 s on a loaded two-core
//! machine. Run on another server version with `ZK_TEST_VERSION=3.6|3.9`.

mod common;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::client::*;
use common::lock_recorder;
use zklock::client::{CreateMode, KeeperState, WatchedEvent, ZooKeeper};
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, LockEvent, ZkInterProcessReadWriteLock,
};
use zklock::recipes::leader_latch::LeaderLatch;
use zklock::testing::{ServerVersion, ZkEnsemble};
use zklock::{ZkError, ZooKeeperListener, ZooKeeperWatcher};

/// Long enough for the whole outage (kill, read-only, restart, election):
/// the holder's session must outlive it.
const SESSION: Duration = Duration::from_secs(40);

/// One ensemble at a time: three JVMs each, and two of them killed and
/// restarted, on a two-core machine.
static ONE_ENSEMBLE: Mutex<()> = Mutex::new(());

fn one_ensemble() -> std::sync::MutexGuard<'static, ()> {
    ONE_ENSEMBLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits up to `timeout` for `f`, polling (a test of a server's state, which
/// no event tells).
fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// A listener recording connection states and renewals.
#[derive(Default)]
struct States(Mutex<Vec<String>>);

impl ZooKeeperListener for States {
    fn connection_event(&self, event: &WatchedEvent) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{:?}", event.keeper_state));
    }
    fn session_renewed(&self) {
        self.0.lock().unwrap().push("renewed".into());
    }
}

impl States {
    fn seen(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

#[test]
fn a_partitioned_client_reads_read_only_its_lock_stays_in_doubt_and_it_returns_to_read_write() {
    init_log();
    let _one = one_ensemble();
    let mut ens = ZkEnsemble::start_read_only().expect("ensemble");
    let cs = ens.connect_string();
    let version = ServerVersion::from_srvr(&ens.four_letter(0, "srvr").unwrap()).unwrap();
    let root = "/read-only";
    {
        let (zk, _ev) = connect(&cs, Duration::from_secs(10));
        mkdirs(&zk, root);
        zk.create(
            &format!("{root}/data"),
            b"v1",
            zklock::client::Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .unwrap();
        zk.close().unwrap();
    }

    // A lock held before the outage, by a read-only-capable watcher.
    let holder = ZooKeeperWatcher::builder(&cs)
        .with_session_timeout(SESSION)
        .with_read_only(true)
        .connect()
        .unwrap();
    let holder_states = Arc::new(States::default());
    holder.register_listener(holder_states.clone());
    let (events, listener) = lock_recorder();
    let rw = ZkInterProcessReadWriteLock::new(&holder, &format!("{root}/lock"), None)
        .unwrap()
        .with_lock_listener(listener);
    let held = rw.write_lock(b"holder");
    held.acquire().unwrap();
    let holder_session = holder.zookeeper().session_id();

    // The quorum lost: member 2 alone turns read-only.
    ens.kill(0).unwrap();
    ens.kill(1).unwrap();
    wait_for("member 2 read-only", Duration::from_secs(30), || {
        ens.four_letter(2, "isro").is_ok_and(|r| r.trim() == "ro")
    });

    // A client made during the outage reads through the read-only server.
    let reader = ZooKeeperWatcher::builder(&cs)
        .with_session_timeout(Duration::from_secs(10))
        .with_read_only(true)
        .with_client(|c| c.with_connect_wait(Duration::from_secs(30)))
        .connect()
        .unwrap();
    let reader_states = Arc::new(States::default());
    reader.register_listener(reader_states.clone());
    assert!(reader.is_read_only());
    let ro_session = reader.zookeeper().session_id();
    let zk: &ZooKeeper = reader.zookeeper();
    assert_eq!(
        zk.get_data(&format!("{root}/data"), false).unwrap().0,
        b"v1"
    );
    let e = zk
        .set_data(&format!("{root}/data"), b"v2", None)
        .unwrap_err();
    assert_eq!(e.code(), Some(ZkError::NotReadOnly), "{e:?}");
    // Its lock is never held: the attempt cannot write its node.
    let ro_lock = ZkInterProcessReadWriteLock::new(&reader, &format!("{root}/lock"), None)
        .unwrap()
        .write_lock(b"reader");
    let e = ro_lock.try_acquire(Duration::from_secs(1)).unwrap_err();
    assert_eq!(e.code(), Some(ZkError::NotReadOnly), "{e:?}");

    // The holder's lock is in doubt, and stays so while read-only: 3.6
    // resumes its session read-only; 3.7 and later refuse a session of the
    // quorum (ZOOKEEPER-3863), so it stays disconnected.
    wait_for("the holder in doubt", Duration::from_secs(10), || {
        events.lock().unwrap().contains(&LockEvent::InDoubt)
    });
    if !version.at_least(3, 7) {
        wait_for("the holder read-only", Duration::from_secs(20), || {
            holder.is_read_only()
        });
        // Told to the listeners on the event thread, after the state.
        wait_for(
            "the holder's ConnectedReadOnly",
            Duration::from_secs(10),
            || {
                holder_states
                    .seen()
                    .contains(&format!("{:?}", KeeperState::ConnectedReadOnly))
            },
        );
    }
    // Time for a wrong "Restored" to come (a held watch re-armed read-only).
    thread::sleep(Duration::from_secs(2));
    assert_eq!(*events.lock().unwrap(), [LockEvent::InDoubt]);

    // The quorum heals: both come back read-write.
    ens.restart(0).unwrap();
    ens.restart(1).unwrap();
    ens.wait_for_quorum(Duration::from_secs(60)).unwrap();
    wait_for("the reader read-write", Duration::from_secs(60), || {
        reader.state() == zklock::client::State::Connected && !reader.is_read_only()
    });
    // A read-only server's session is not the quorum's: a new one.
    assert_ne!(reader.zookeeper().session_id(), ro_session);
    wait_for("the reader's renewal", Duration::from_secs(10), || {
        reader_states.seen().contains(&"renewed".to_string())
    });
    reader
        .zookeeper()
        .set_data(&format!("{root}/data"), b"v2", None)
        .unwrap();
    wait_for("the holder restored", Duration::from_secs(60), || {
        events.lock().unwrap().contains(&LockEvent::Restored)
    });
    assert_eq!(
        *events.lock().unwrap(),
        [LockEvent::InDoubt, LockEvent::Restored]
    );
    assert_eq!(holder.zookeeper().session_id(), holder_session);
    held.release().unwrap();
    reader.close().unwrap();
    holder.close().unwrap();
}

/// Connected read-only, the client keeps looking for a read-write server
/// (`isro`, as Java's) and moves to the first that answers `rw`, while the
/// read-only server it is on never leaves read-only (frozen, so its
/// connections stay open and silent): back long before the read timeout
/// would have ended the connection. Meanwhile a node tracker and a tree
/// cache keep serving what they read, stale; at the read-write server they
/// catch up with a change made during the outage.
#[test]
fn a_read_only_client_finds_a_read_write_server_and_its_tracker_and_cache_catch_up() {
    use zklock::recipes::tree_cache::TreeCache;
    use zklock::{LoggingAbortable, ZooKeeperNodeTracker};
    init_log();
    let _one = one_ensemble();
    let mut ens = ZkEnsemble::start_read_only().expect("ensemble");
    let cs = ens.connect_string();
    let root = "/read-only-move";
    let data = format!("{root}/data");
    {
        let (zk, _ev) = connect(&cs, Duration::from_secs(10));
        mkdirs(&zk, root);
        zk.create(
            &data,
            b"v1",
            zklock::client::Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .unwrap();
        zk.close().unwrap();
    }
    ens.kill(0).unwrap();
    ens.kill(1).unwrap();
    wait_for("member 2 read-only", Duration::from_secs(30), || {
        ens.four_letter(2, "isro").is_ok_and(|r| r.trim() == "ro")
    });
    // The longest session: a read timeout of 40 s, which a probe must beat.
    let reader = ZooKeeperWatcher::builder(&cs)
        .with_session_timeout(Duration::from_secs(60))
        .with_read_only(true)
        .with_client(|c| c.with_connect_wait(Duration::from_secs(30)))
        .connect()
        .unwrap();
    assert!(reader.is_read_only());
    let tracker = ZooKeeperNodeTracker::new(&reader, &data, Arc::new(LoggingAbortable::new()));
    tracker.start().unwrap();
    wait_for("the tracker's read", Duration::from_secs(10), || {
        tracker.get_data(false).is_some()
    });
    assert_eq!(tracker.get_data(false).unwrap(), b"v1");
    assert!(tracker.is_stale());
    let cache = TreeCache::start(&reader, root).unwrap();
    // No load from a read-only server: stale, nothing claimed.
    thread::sleep(Duration::from_millis(500));
    assert!(cache.is_stale() && !cache.is_initialized());

    // The read-only server hangs (its connections stay open); the two
    // others come back as a quorum, and a change is made there.
    ens.pause(2).unwrap();
    let paused = Instant::now();
    ens.restart(0).unwrap();
    ens.restart(1).unwrap();
    wait_for("a read-write quorum", Duration::from_secs(60), || {
        ens.four_letter(0, "isro").is_ok_and(|r| r.trim() == "rw")
    });
    {
        let rw = format!("{},{}", ens.address(0), ens.address(1));
        let (zk, _ev) = connect(&rw, Duration::from_secs(10));
        zk.set_data(&data, b"v2", None).unwrap();
        zk.close().unwrap();
    }
    wait_for("the reader read-write", Duration::from_secs(40), || {
        reader.state() == zklock::client::State::Connected && !reader.is_read_only()
    });
    let back = paused.elapsed();
    assert!(
        back < Duration::from_secs(35),
        "back to read-write after {back:?}: not by a probe (the read timeout is 40 s)"
    );
    wait_for("the tracker's new data", Duration::from_secs(10), || {
        tracker.get_data(false).as_deref() == Some(b"v2".as_slice())
    });
    assert!(!tracker.is_stale());
    assert!(cache.wait_synced(Duration::from_secs(10)).unwrap());
    assert_eq!(cache.get(&data).unwrap().data, b"v2");
    assert!(!cache.is_stale());
    ens.resume(2).unwrap();
    cache.close().unwrap();
    tracker.stop();
    reader.close().unwrap();
}

/// A waiter whose turn comes while only a read-only server reaches it is
/// never granted there: the holder released while the waiter was cut off,
/// then the quorum was lost; the waiter comes back on the read-only member
/// (ZooKeeper 3.6 resumes its session there; 3.7 and later refuse it, and it
/// stays disconnected), whose data shows its turn. A read-only server's
/// listing proves nothing (its data may lag the quorum's, and it cannot tell
/// whether the session still lives): the acquire fails with `NotReadOnly`
/// on 3.6, and holds nothing on any version.
#[test]
fn a_waiter_is_never_granted_on_a_read_only_server() {
    use zklock::testing::FaultProxy;
    init_log();
    let _one = one_ensemble();
    let mut ens = ZkEnsemble::start_read_only().expect("ensemble");
    let version = ServerVersion::from_srvr(&ens.four_letter(0, "srvr").unwrap()).unwrap();
    let cs = ens.connect_string();
    let proxies: Vec<FaultProxy> = (0..3)
        .map(|i| FaultProxy::start(ens.address(i)).unwrap())
        .collect();
    let proxied: Vec<String> = proxies.iter().map(|p| p.connect_string()).collect();
    let root = "/read-only-waiter";
    let holder = ZooKeeperWatcher::builder(&cs)
        .with_session_timeout(Duration::from_secs(10))
        .connect()
        .unwrap();
    let held = ZkInterProcessReadWriteLock::new(&holder, root, None)
        .unwrap()
        .write_lock(b"holder");
    held.acquire().unwrap();
    let waiter = ZooKeeperWatcher::builder(&proxied.join(","))
        .with_session_timeout(SESSION)
        .with_read_only(true)
        .connect()
        .unwrap();
    let wanted = Arc::new(
        ZkInterProcessReadWriteLock::new(&waiter, root, None)
            .unwrap()
            .write_lock(b"waiter"),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let w = wanted.clone();
    let acquiring = thread::spawn(move || {
        let r = w.acquire();
        let _ = tx.send(r.map_err(|e| e.code()));
    });
    // A leader latch too: the holder leads, the waiter's is second.
    let latch_path = "/read-only-waiter-latch";
    let leader = LeaderLatch::new(&holder, latch_path, "holder").unwrap();
    leader.start().unwrap();
    assert!(leader.await_leadership(Duration::from_secs(10)).unwrap());
    let second = LeaderLatch::new(&waiter, latch_path, "waiter").unwrap();
    second.start().unwrap();
    let zk = holder.zookeeper();
    wait_for("the waiter's nodes", Duration::from_secs(10), || {
        zk.get_children(root, false).is_ok_and(|c| c.len() == 2)
            && zk
                .get_children(latch_path, false)
                .is_ok_and(|c| c.len() == 2)
    });
    // The waiter cut off (every attempt of its stalls), then the release.
    for p in &proxies {
        p.stall();
        p.cut();
    }
    held.release().unwrap();
    holder.close().unwrap();
    // Member 2 has applied the release before the quorum goes.
    {
        let (direct, _ev) = connect(&ens.address(2), Duration::from_secs(10));
        direct.sync(root).unwrap();
        assert_eq!(direct.get_children(root, false).unwrap().len(), 1);
        direct.sync(latch_path).unwrap();
        assert_eq!(direct.get_children(latch_path, false).unwrap().len(), 1);
        direct.close().unwrap();
    }
    ens.kill(0).unwrap();
    ens.kill(1).unwrap();
    wait_for("member 2 read-only", Duration::from_secs(30), || {
        ens.four_letter(2, "isro").is_ok_and(|r| r.trim() == "ro")
    });
    for p in &proxies {
        p.pass();
    }
    if !version.at_least(3, 7) {
        wait_for("the waiter read-only", Duration::from_secs(20), || {
            waiter.is_read_only()
        });
        let r = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("acquire ended");
        assert_eq!(r, Err(Some(ZkError::NotReadOnly)));
        // Its node's removal, refused read-only, waits for a read-write
        // server: not sent again and again to the read-only one.
        thread::sleep(Duration::from_secs(1));
        let deletes = proxies[2].requests(2);
        assert!(
            deletes <= 2,
            "{deletes} deletes sent to the read-only server"
        );
        // Its latch's turn shows there too; it does not lead on it.
        assert!(!second.has_leadership());
    } else {
        // Refused by the read-only member: still waiting, or failed.
        thread::sleep(Duration::from_secs(3));
        if let Ok(r) = rx.try_recv() {
            assert!(r.is_err(), "{r:?}");
        }
    }
    assert!(!wanted.is_held());
    assert!(!second.has_leadership());
    ens.restart(0).unwrap();
    ens.restart(1).unwrap();
    ens.wait_for_quorum(Duration::from_secs(60)).unwrap();
    if !version.at_least(3, 7) {
        // Its node, refused removal by the read-only server, is removed at
        // the first read-write one while its session lives: no orphan
        // blocks the lock.
        let (zk, _ev) = connect(&cs, Duration::from_secs(10));
        wait_for("the waiter's node removed", Duration::from_secs(30), || {
            zk.get_children(root, false).is_ok_and(|c| c.is_empty())
        });
        assert!(waiter.zookeeper().state() == zklock::client::State::Connected);
        zk.close().unwrap();
    }
    // Back on a read-write server, its turn is proven: it leads.
    assert!(second.await_leadership(Duration::from_secs(30)).unwrap());
    second.close().unwrap();
    let _ = waiter.close();
    acquiring.join().unwrap();
}
