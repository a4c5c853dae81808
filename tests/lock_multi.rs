//! The multi-lock at its edges (issue 31, items 1 and 2), against a real
//! server: a guarded write under a multi-lock checks every member's node, so
//! a holder that lost a member with its expired session cannot write; a
//! multi-lock refuses two members on one lock znode instead of waiting for
//! itself forever.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{children, init_log, local, local_raw, lock_watcher};
use zklock::client::{Acl, CreateMode, Op, WatchedEvent, ZooKeeper};
use zklock::lock::{
    Dialect, InterProcessLock, InterProcessReadWriteLock, MultiLock, OrderedLock,
    ZkInterProcessMutex, ZkInterProcessReadWriteLock, ZkInterProcessWriteLock,
};
use zklock::testing::{eventually, unique_root, FaultProxy};
use zklock::Error;

/// A multi-lock holds `a` through session 1 and `b` through session 2, which
/// reaches the server through a proxy. The proxy cuts session 2's client off,
/// the server expires the session (its node of `b` goes) and another session
/// takes `b`. The stale holder still believes it holds both (its client heard
/// nothing), but its guarded write is refused by the server with `LockLost`
/// about `b`'s node, and the data is unchanged. (Before: the `multi` checked
/// `a`'s node only and the write went through.)
#[test]
fn a_guarded_write_checks_every_member() {
    init_log();
    let root = unique_root("multi-stale");
    let (a, b, data) = (
        format!("{root}/a"),
        format!("{root}/b"),
        format!("{root}/data"),
    );
    let zk = local_raw();
    let one = lock_watcher(&local(), Duration::from_secs(6));
    let proxy = FaultProxy::start(local()).expect("proxy");
    // Long: its client must not give the session up on its own clock while
    // the test runs (the server ends it below).
    let two = lock_watcher(&proxy.connect_string(), Duration::from_secs(30));
    zklock::zkutil::create_with_parents(&one, &root).unwrap();
    zk.create(&data, b"0", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();

    let la: Arc<dyn OrderedLock> =
        Arc::new(ZkInterProcessWriteLock::new(&one, &a, b"a", None).unwrap());
    let lb: Arc<dyn OrderedLock> =
        Arc::new(ZkInterProcessWriteLock::new(&two, &b, b"b", None).unwrap());
    let multi = MultiLock::new(vec![lb, la]).unwrap();
    let guard = multi.lock().unwrap();
    let grants = multi.acquired_locks().unwrap();
    assert_eq!(grants.len(), 2);
    assert!(grants[0].path.starts_with(&format!("{a}/")), "{grants:?}");
    assert!(grants[1].path.starts_with(&format!("{b}/")), "{grants:?}");
    guard
        .guarded_multi(&one, &[Op::set_data(data.clone(), b"1".to_vec(), None)])
        .unwrap();

    // Session 2's client cut off; the server ends the session (closed from a
    // second handle on it, as HBase's tests expire one) and deletes its node
    // of `b`. The client hears nothing of it.
    proxy.stall();
    let twin = ZooKeeper::connect_with_session(
        &local(),
        Duration::from_secs(30),
        |_e: WatchedEvent| {},
        two.zookeeper().session_id(),
        &two.zookeeper().session_password(),
    )
    .unwrap();
    twin.wait_connected(Duration::from_secs(20)).unwrap();
    twin.close().unwrap();
    assert!(
        eventually(Duration::from_secs(20), || zk
            .exists(&grants[1].path, false)
            .unwrap()
            .is_none()),
        "the server did not end session 2"
    );
    // Another session takes `b`.
    let three = lock_watcher(&local(), Duration::from_secs(6));
    let other = ZkInterProcessWriteLock::new(&three, &b, b"other", None).unwrap();
    let taken = other
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("b is free on the server");
    assert!(taken.fencing_token() > grants[1].czxid);
    // The stale holder's client heard nothing: it still believes it holds both.
    assert!(multi.is_held() && guard.is_held());

    match guard.guarded_multi(&one, &[Op::set_data(data.clone(), b"2".to_vec(), None)]) {
        Err(Error::LockLost { path }) => assert_eq!(path, grants[1].path),
        other => panic!("a stale multi-lock holder's guarded write: {other:?}"),
    }
    // Written through RecoverableZooKeeper (HBase's metadata prefix): read back alike.
    assert_eq!(
        one.recoverable_zookeeper()
            .get_data(&data, false)
            .unwrap()
            .0,
        b"1",
        "the stale holder's write got through"
    );

    // The guard covers both grants; its token is the greatest of the
    // members': the last member's, whose node was created last.
    assert_eq!(guard.acquired_locks(), &grants[..]);
    assert!(grants[1].czxid > grants[0].czxid);
    assert_eq!(guard.fencing_token(), grants[1].czxid);
    assert_eq!(multi.acquired_lock().as_ref(), Some(&grants[1]));

    // Clean up: the stale guard gives `a` back; nothing is left.
    drop(guard);
    drop(taken);
    proxy.reset();
    assert!(eventually(Duration::from_secs(10), || children(&zk, &a)
        .is_empty()
        && children(&zk, &b).is_empty()));
    let _ = two.close();
}

/// `MultiLock::new` refuses two members on one lock znode with
/// `BadArguments`, creating nothing: the read and the write lock of one
/// znode (before: accepted, and `try_acquire` ran out every time on a free
/// znode, `acquire` never returned), two instances of one lock, and a
/// dialect's mutex beside an HBase lock of the same znode. Members on
/// different znodes are fine and the lock works.
#[test]
fn two_members_on_one_znode_are_refused() {
    init_log();
    let root = unique_root("multi-same");
    let (z, y) = (format!("{root}/z"), format!("{root}/y"));
    let zk = local_raw();
    let zkw = lock_watcher(&local(), Duration::from_secs(6));
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &z, None).unwrap();
    let read: Arc<dyn OrderedLock> = Arc::new(rw.read_lock(b"r"));
    let write: Arc<dyn OrderedLock> = Arc::new(rw.write_lock(b"w"));
    let again: Arc<dyn OrderedLock> = Arc::new(rw.write_lock(b"w2"));
    let curator: Arc<dyn OrderedLock> =
        Arc::new(ZkInterProcessMutex::new(&zkw, &z, Dialect::Curator, b"c").unwrap());
    let other: Arc<dyn OrderedLock> =
        Arc::new(ZkInterProcessWriteLock::new(&zkw, &y, b"y", None).unwrap());
    for (what, pair) in [
        ("a read and a write lock", vec![read.clone(), write.clone()]),
        ("two instances of one lock", vec![write.clone(), again]),
        (
            "a Curator mutex and an HBase lock",
            vec![curator, read.clone()],
        ),
        (
            "two locks of one znode among others",
            vec![other.clone(), write.clone(), read],
        ),
    ] {
        match MultiLock::new(pair) {
            Err(Error::BadArguments(why)) => assert!(why.contains(&z), "{what}: {why}"),
            other => panic!("{what} on one znode: {other:?}"),
        }
    }
    assert!(
        zk.exists(&z, false).unwrap().is_none(),
        "a refused multi-lock created something"
    );
    let fine = MultiLock::new(vec![write, other]).unwrap();
    assert!(fine.try_acquire(Duration::from_secs(5)).unwrap());
    fine.release().unwrap();
    assert!(children(&zk, &z).is_empty() && children(&zk, &y).is_empty());
}

/// Entry points are atomic (issue 44): a `release` from another thread while
/// the multi-lock's acquire is under way (member `a` held, member `b`'s node
/// being made: held at its `Created` step) is `LockNotHeld` and touches no
/// member; before, it released `a`, and the acquire then returned holding
/// `b` only while believing it held both. A second acquire meanwhile is
/// `LockBusy` and makes nothing. Afterwards the multi-lock is held whole and
/// releases whole.
#[test]
fn a_release_or_second_acquire_while_acquiring_touches_no_member() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use zklock::lock::LockStep;
    init_log();
    let root = unique_root("multi-release-while-acquiring");
    let (a, b) = (format!("{root}/a"), format!("{root}/b"));
    let zk = local_raw();
    let session = lock_watcher(&local(), Duration::from_secs(6));
    let (created_tx, created_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (created_tx, go_rx) = (
        parking_lot::Mutex::new(created_tx),
        parking_lot::Mutex::new(go_rx),
    );
    let once = AtomicBool::new(true);
    let la: Arc<dyn OrderedLock> =
        Arc::new(ZkInterProcessWriteLock::new(&session, &a, b"a", None).unwrap());
    let lb: Arc<dyn OrderedLock> = Arc::new(
        ZkInterProcessWriteLock::new(&session, &b, b"b", None)
            .unwrap()
            .with_step_hook(move |step, _| {
                if step == LockStep::Created && once.swap(false, Ordering::SeqCst) {
                    created_tx.lock().send(()).unwrap();
                    go_rx.lock().recv_timeout(Duration::from_secs(60)).unwrap();
                }
            }),
    );
    let multi = Arc::new(MultiLock::new(vec![la, lb]).unwrap());
    let m2 = multi.clone();
    let acquiring = std::thread::spawn(move || m2.acquire());
    created_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let released = multi.release();
    assert!(
        matches!(released, Err(Error::LockNotHeld { .. })),
        "{released:?}"
    );
    assert_eq!(children(&zk, &a).len(), 1, "member a was released");
    let second = multi.try_acquire(Duration::from_millis(100));
    assert!(matches!(second, Err(Error::LockBusy { .. })), "{second:?}");
    go_tx.send(()).unwrap();
    acquiring.join().unwrap().unwrap();
    assert!(multi.is_held());
    assert_eq!((children(&zk, &a).len(), children(&zk, &b).len()), (1, 1));
    multi.release().unwrap();
    assert!(children(&zk, &a).is_empty() && children(&zk, &b).is_empty());
    assert!(matches!(multi.release(), Err(Error::LockNotHeld { .. })));
}
