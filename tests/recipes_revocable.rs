//! Revocable shared locks (issue 12, item 3; ZooKeeper recipes page, "Revocable
//! Shared Locks") against a real server, one session per party: the holder, the
//! waiter, the revoker.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{children, lock_recorder, raw, zkw};
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, LockEvent, ZkInterProcessReadWriteLock,
    ZkInterProcessWriteLock,
};
use zklock::recipes::revocable::{
    attempt_revoke, attempt_revoke_with_grace, attempt_revoke_with_grace_hooked, lock_holders,
    RevocableReadLock, RevocableReadWriteLock, RevocableWriteLock, RevocationReply, RevokeOutcome,
    RevokeStep, REVOKE_DATA,
};
use zklock::testing::{eventually, unique_root};
use zklock::Error;

/// A revocation listener answering `reply`, recording the paths it was asked for.
fn asked(
    reply: RevocationReply,
) -> (
    Arc<Mutex<Vec<String>>>,
    impl Fn(&str) -> RevocationReply + Send + Sync + 'static,
) {
    let paths: Arc<Mutex<Vec<String>>> = Arc::default();
    let p = paths.clone();
    (paths, move |path: &str| {
        p.lock().unwrap().push(path.to_string());
        reply
    })
}

/// Waits until `n` lock nodes are under `root`.
fn wait_for_nodes(root: &str, n: usize) {
    let zk = raw();
    assert!(
        eventually(Duration::from_secs(10), || children(&zk, root).len() == n),
        "expected {n} nodes under {root}: {:?}",
        children(&zk, root)
    );
}

/// No orphan node is left under `root`.
fn assert_no_orphans(root: &str) {
    let zk = raw();
    assert!(
        eventually(Duration::from_secs(5), || children(&zk, root).is_empty()),
        "orphan nodes under {root}: {:?}",
        children(&zk, root)
    );
}

#[test]
fn a_reader_asked_to_revoke_releases_and_the_waiting_writer_gets_the_lock() {
    let root = unique_root("revocable-reader");
    let (holder_s, writer_s, revoker_s) = (zkw(), zkw(), zkw());
    let (paths, listener) = asked(RevocationReply::Release);
    let (events, recorder) = lock_recorder();
    let reader = RevocableReadLock::new(&holder_s, &root, b"reader", None)
        .unwrap()
        .with_revocation_listener(listener)
        .with_lock_listener(recorder);
    reader.acquire().unwrap();
    let node = reader.acquired_lock().unwrap().path;

    let writer = Arc::new(ZkInterProcessWriteLock::new(&writer_s, &root, b"writer", None).unwrap());
    let w = writer.clone();
    let waiting = thread::spawn(move || w.try_acquire(Duration::from_secs(15)).unwrap());
    wait_for_nodes(&root, 2);

    // A write that is not `unlock` is not a request.
    raw().set_data(&node, b"something else", None).unwrap();
    thread::sleep(Duration::from_millis(200));
    assert!(paths.lock().unwrap().is_empty());
    assert!(reader.is_held());

    assert_eq!(
        lock_holders(&revoker_s, &root).unwrap(),
        std::slice::from_ref(&node)
    );
    let asked_at = Instant::now();
    assert!(attempt_revoke(&revoker_s, &node).unwrap());
    assert!(waiting.join().unwrap(), "the writer got the lock");
    println!("revoke -> writer holds: {:?}", asked_at.elapsed());
    assert_eq!(*paths.lock().unwrap(), std::slice::from_ref(&node));
    assert!(!reader.is_held());
    assert!(reader.acquired_lock().is_none());
    assert!(events.lock().unwrap().is_empty(), "a release is no loss");
    assert!(matches!(reader.release(), Err(Error::LockNotHeld { .. })));
    let w_node = writer.acquired_lock().unwrap().path;
    assert_eq!(lock_holders(&revoker_s, &root).unwrap(), [w_node]);

    // The instance can take the lock again once the writer is done.
    writer.release().unwrap();
    reader.acquire().unwrap();
    assert!(reader.is_held());
    assert!(!reader.is_revocation_requested());
    reader.release().unwrap();
    assert_no_orphans(&root);
}

#[test]
fn a_holder_that_ignores_the_request_is_forced_after_the_grace_period() {
    let root = unique_root("revocable-forced");
    let (holder_s, writer_s, revoker_s) = (zkw(), zkw(), zkw());
    let (paths, listener) = asked(RevocationReply::Keep);
    let (events, recorder) = lock_recorder();
    let reader = RevocableReadLock::new(&holder_s, &root, b"stubborn", None)
        .unwrap()
        .with_revocation_listener(listener)
        .with_lock_listener(recorder);
    reader.acquire().unwrap();
    let node = reader.acquired_lock().unwrap().path;

    let writer = Arc::new(RevocableWriteLock::new(&writer_s, &root, b"writer", None).unwrap());
    let w = writer.clone();
    let waiting = thread::spawn(move || w.try_acquire(Duration::from_secs(15)).unwrap());
    wait_for_nodes(&root, 2);

    let grace = Duration::from_millis(500);
    let started = Instant::now();
    let outcome = attempt_revoke_with_grace(&revoker_s, &node, grace).unwrap();
    let took = started.elapsed();
    println!("forced revocation took {took:?} (grace {grace:?})");
    assert_eq!(outcome, RevokeOutcome::Forced);
    assert!(took >= grace);
    assert!(took < grace + Duration::from_secs(2), "{took:?}");
    assert!(waiting.join().unwrap(), "the writer got the lock");

    assert_eq!(
        *paths.lock().unwrap(),
        std::slice::from_ref(&node),
        "asked first"
    );
    assert!(eventually(Duration::from_secs(5), || !reader.is_held()));
    assert!(eventually(Duration::from_secs(5), || events
        .lock()
        .unwrap()
        .contains(&LockEvent::Lost)));
    assert_eq!(*events.lock().unwrap(), [LockEvent::Lost]);
    // Issue 20, finding 9: revoked and lost, the lock is no longer held, so no
    // revocation of it is pending (true here until `release()` before).
    assert!(!reader.is_revocation_requested());
    assert!(matches!(reader.release(), Err(Error::LockLost { .. })));
    assert!(!reader.is_revocation_requested());
    writer.release().unwrap();
    assert_no_orphans(&root);
}

#[test]
fn a_holder_that_lets_its_worker_release_within_the_grace_is_not_forced() {
    let root = unique_root("revocable-worker");
    let (holder_s, revoker_s) = (zkw(), zkw());
    // The listener only signals; a worker thread releases synchronously.
    let (tx, rx) = crossbeam_channel::bounded::<String>(1);
    let reader = Arc::new(
        RevocableReadLock::new(&holder_s, &root, b"worker", None)
            .unwrap()
            .with_revocation_listener(move |path: &str| {
                let _ = tx.try_send(path.to_string());
                RevocationReply::Keep
            }),
    );
    reader.acquire().unwrap();
    let node = reader.acquired_lock().unwrap().path;
    let r = reader.clone();
    let worker = thread::spawn(move || {
        let path = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(r.is_revocation_requested());
        thread::sleep(Duration::from_millis(100)); // finishing its work
        r.release().unwrap();
        path
    });
    let outcome = attempt_revoke_with_grace(&revoker_s, &node, Duration::from_secs(10)).unwrap();
    assert_eq!(outcome, RevokeOutcome::Released);
    assert_eq!(worker.join().unwrap(), node);
    assert!(!reader.is_held());
    assert_no_orphans(&root);
}

#[test]
fn revoking_a_node_that_is_gone_is_a_clean_result() {
    let root = unique_root("revocable-gone");
    let zkw = zkw();
    let missing = format!("{root}/read-0123456789abcdef-0000000000");
    assert!(!attempt_revoke(&zkw, &missing).unwrap());
    assert_eq!(
        attempt_revoke_with_grace(&zkw, &missing, Duration::from_millis(100)).unwrap(),
        RevokeOutcome::AlreadyGone
    );
    assert!(lock_holders(&zkw, &root).unwrap().is_empty());
    // A node released before the request.
    let w = RevocableWriteLock::new(&zkw, &root, b"w", None).unwrap();
    w.acquire().unwrap();
    let node = w.acquired_lock().unwrap().path;
    w.release().unwrap();
    assert!(!attempt_revoke(&zkw, &node).unwrap());
    assert_eq!(
        attempt_revoke_with_grace(&zkw, &node, Duration::ZERO).unwrap(),
        RevokeOutcome::AlreadyGone
    );
    // A bad path is a typed error.
    assert!(matches!(
        attempt_revoke(&zkw, "no-slash"),
        Err(Error::BadArguments(_))
    ));
    assert!(matches!(
        lock_holders(&zkw, "/trailing/"),
        Err(Error::BadArguments(_))
    ));
    assert_no_orphans(&root);
}

#[test]
fn a_request_written_while_waiting_is_honoured_at_the_grant() {
    let root = unique_root("revocable-early");
    let (first_s, holder_s, revoker_s) = (zkw(), zkw(), zkw());
    let first = ZkInterProcessWriteLock::new(&first_s, &root, b"first", None).unwrap();
    first.acquire().unwrap();
    let (paths, listener) = asked(RevocationReply::Keep);
    let reader = Arc::new(
        RevocableReadLock::new(&holder_s, &root, b"late", None)
            .unwrap()
            .with_revocation_listener(listener)
            .with_auto_release(true),
    );
    let r = reader.clone();
    let waiting = thread::spawn(move || r.acquire().unwrap());
    wait_for_nodes(&root, 2);
    let zk = raw();
    let reader_node = children(&zk, &root)
        .into_iter()
        .find(|c| c.starts_with("read-"))
        .map(|c| format!("{root}/{c}"))
        .unwrap();
    assert!(attempt_revoke(&revoker_s, &reader_node).unwrap());
    assert_eq!(
        zklock::remove_metadata(&zk.get_data(&reader_node, false).unwrap().0),
        REVOKE_DATA
    );
    first.release().unwrap();
    waiting.join().unwrap();
    // Granted, then given up at once: auto-release overrides the listener's Keep.
    assert!(eventually(Duration::from_secs(5), || !reader.is_held()));
    assert_eq!(*paths.lock().unwrap(), [reader_node]);
    assert_no_orphans(&root);
}

#[test]
fn a_plain_holder_on_the_shared_znode_can_only_be_forced() {
    let root = unique_root("revocable-plain");
    let (plain_s, reader_s, revoker_s) = (zkw(), zkw(), zkw());
    let (events, recorder) = lock_recorder();
    let plain = ZkInterProcessReadWriteLock::new(&plain_s, &root, None)
        .unwrap()
        .with_lock_listener(recorder)
        .write_lock(b"plain writer");
    plain.acquire().unwrap();
    let node = plain.acquired_lock().unwrap().path;
    let rw = RevocableReadWriteLock::new(&reader_s, &root, None).unwrap();
    let reader = Arc::new(rw.read_lock(b"revocable reader"));
    let r = reader.clone();
    let waiting = thread::spawn(move || r.try_acquire(Duration::from_secs(15)).unwrap());
    wait_for_nodes(&root, 2);
    assert_eq!(
        attempt_revoke_with_grace(&revoker_s, &node, Duration::from_millis(300)).unwrap(),
        RevokeOutcome::Forced
    );
    assert!(waiting.join().unwrap());
    assert!(eventually(Duration::from_secs(5), || !plain.is_held()));
    assert_eq!(*events.lock().unwrap(), [LockEvent::Lost]);
    assert!(matches!(plain.release(), Err(Error::LockLost { .. })));
    drop(reader); // releases in the background
    assert_no_orphans(&root);
}

#[test]
fn a_write_holder_hands_over_to_every_waiting_reader() {
    let root = unique_root("revocable-writer");
    let holder_s = zkw();
    let writer = RevocableWriteLock::new(&holder_s, &root, b"writer", None)
        .unwrap()
        .with_auto_release(true);
    writer.acquire().unwrap();
    let node = writer.acquired_lock().unwrap().path;
    let sessions: Vec<_> = (0..3).map(|_| zkw()).collect();
    let got = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = sessions
        .iter()
        .map(|s| {
            let lock = RevocableReadLock::new(s, &root, b"reader", None).unwrap();
            let got = got.clone();
            thread::spawn(move || {
                assert!(lock.try_acquire(Duration::from_secs(15)).unwrap());
                got.fetch_add(1, Ordering::SeqCst);
                // Hold until every reader holds: they share the lock.
                assert!(eventually(Duration::from_secs(10), || got
                    .load(Ordering::SeqCst)
                    == 3));
                lock.release().unwrap();
            })
        })
        .collect();
    wait_for_nodes(&root, 4);
    // The listener registry plays no part: emptying it strands nothing.
    holder_s.unregister_all_listeners();
    assert!(attempt_revoke(&sessions[0], &node).unwrap());
    for r in readers {
        r.join().unwrap();
    }
    assert!(!writer.is_held());
    assert_no_orphans(&root);
}

#[test]
fn dropping_a_revocable_holder_mid_request_leaves_nothing() {
    let root = unique_root("revocable-drop");
    let (holder_s, revoker_s) = (zkw(), zkw());
    let (paths, listener) = asked(RevocationReply::Keep);
    let reader = RevocableReadLock::new(&holder_s, &root, b"r", None)
        .unwrap()
        .with_revocation_listener(listener);
    let guard_node = {
        let guard = reader.lock().unwrap();
        let node = guard.acquired_lock().unwrap().path.clone();
        assert!(attempt_revoke(&revoker_s, &node).unwrap());
        assert!(eventually(Duration::from_secs(5), || !paths
            .lock()
            .unwrap()
            .is_empty()));
        assert!(guard.is_held(), "Keep keeps it");
        node
    }; // the guard drops: released in the background
    assert!(!reader.is_held());
    // The background delete lands shortly: then there is nothing to revoke.
    assert!(eventually(Duration::from_secs(5), || !attempt_revoke(
        &revoker_s,
        &guard_node
    )
    .unwrap()));
    reader.acquire().unwrap();
    drop(reader);
    assert_no_orphans(&root);
}

#[test]
fn a_request_written_while_the_holder_is_cut_off_is_seen_after_the_reconnect() {
    use zklock::testing::FaultProxy;
    let proxy = FaultProxy::start(common::local().as_str()).unwrap();
    let holder_s = common::lock_watcher(&proxy.connect_string(), Duration::from_secs(6));
    let revoker_s = common::local_zkw();
    let root = unique_root("revocable-cut");
    let (paths, listener) = asked(RevocationReply::Release);
    let (events, recorder) = lock_recorder();
    let reader = RevocableReadLock::new(&holder_s, &root, b"cut off", None)
        .unwrap()
        .with_revocation_listener(listener)
        .with_lock_listener(recorder);
    reader.acquire().unwrap();
    let node = reader.acquired_lock().unwrap().path;
    // Cut the holder's connection and hold the reconnect back; ask meanwhile.
    proxy.stall();
    proxy.cut();
    assert!(attempt_revoke(&revoker_s, &node).unwrap());
    thread::sleep(Duration::from_millis(200));
    assert!(paths.lock().unwrap().is_empty(), "cannot have heard it yet");
    proxy.pass();
    // The watch survives the reconnect (SetWatches): the request is heard.
    assert!(eventually(Duration::from_secs(10), || !paths
        .lock()
        .unwrap()
        .is_empty()));
    assert!(eventually(Duration::from_secs(5), || !reader.is_held()));
    assert!(!events.lock().unwrap().contains(&LockEvent::Lost));
    let zk = common::local_raw();
    assert!(
        eventually(Duration::from_secs(5), || children(&zk, &root).is_empty()),
        "orphan nodes: {:?}",
        children(&zk, &root)
    );
}

/// Issue 44, item 1: a cooperative holder (its listener answers `Release`)
/// and two revokers asking at once: the holder releases on the first request
/// it hears, and neither revoker forces it or finds nothing to revoke. Both
/// looked at the node while it was there (each held at its `Read` step until
/// both read), so both report `Released`, whichever request the holder heard
/// and whether the other's write came before or after the release. Before,
/// the second write finding the node released made it `AlreadyGone` (1 round
/// in 80 under load, without the hold at `Read`; the next test forces it).
#[test]
fn a_cooperative_holder_and_two_revokers_both_see_it_released() {
    for round in 0..5 {
        let root = unique_root("revocable-two-revokers");
        let (holder_s, a_s, b_s) = (zkw(), zkw(), zkw());
        let (paths, listener) = asked(RevocationReply::Release);
        let reader = RevocableReadLock::new(&holder_s, &root, b"cooperative", None)
            .unwrap()
            .with_revocation_listener(listener);
        reader.acquire().unwrap();
        let node = reader.acquired_lock().unwrap().path;
        let both_read = Arc::new(std::sync::Barrier::new(2));
        let revokers: Vec<_> = [a_s, b_s]
            .into_iter()
            .map(|s| {
                let (node, both_read) = (node.clone(), both_read.clone());
                thread::spawn(move || {
                    let hook = move |step, _: &str| {
                        if step == RevokeStep::Read {
                            both_read.wait();
                        }
                    };
                    attempt_revoke_with_grace_hooked(&s, &node, Duration::from_secs(10), hook)
                        .unwrap()
                })
            })
            .collect();
        let outcomes: Vec<_> = revokers.into_iter().map(|r| r.join().unwrap()).collect();
        assert_eq!(
            outcomes,
            [RevokeOutcome::Released, RevokeOutcome::Released],
            "round {round}"
        );
        assert_eq!(*paths.lock().unwrap(), std::slice::from_ref(&node));
        assert!(eventually(Duration::from_secs(5), || !reader.is_held()));
        assert_no_orphans(&root);
    }
}

/// The interleaving of the flake, forced: revoker B has read the holder's
/// node (it exists) and is held before its request while revoker A's request
/// makes the cooperative holder release. B's request then finds no node: the
/// holder released within B's grace, `Released` (before: `AlreadyGone`,
/// "the node did not exist when asked", every run). A revoker that reads the
/// node after the release is `AlreadyGone`, as before.
#[test]
fn a_revoker_whose_request_finds_the_node_released_by_another_reports_released() {
    let root = unique_root("revocable-released-between");
    let (holder_s, a_s, b_s) = (zkw(), zkw(), zkw());
    let (paths, listener) = asked(RevocationReply::Release);
    let reader = RevocableReadLock::new(&holder_s, &root, b"cooperative", None)
        .unwrap()
        .with_revocation_listener(listener);
    reader.acquire().unwrap();
    let node = reader.acquired_lock().unwrap().path;
    let (read_tx, read_rx) = crossbeam_channel::bounded::<()>(1);
    let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(1);
    let n = node.clone();
    let b = thread::spawn(move || {
        attempt_revoke_with_grace_hooked(&b_s, &n, Duration::from_secs(10), move |step, _| {
            if step == RevokeStep::Read {
                read_tx.send(()).unwrap();
                go_rx.recv_timeout(Duration::from_secs(20)).unwrap();
            }
        })
        .unwrap()
    });
    read_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(
        attempt_revoke_with_grace(&a_s, &node, Duration::from_secs(10)).unwrap(),
        RevokeOutcome::Released
    );
    assert!(raw().exists(&node, false).unwrap().is_none());
    go_tx.send(()).unwrap();
    assert_eq!(b.join().unwrap(), RevokeOutcome::Released);
    assert_eq!(*paths.lock().unwrap(), std::slice::from_ref(&node));
    // Read after the release: nothing to revoke.
    assert_eq!(
        attempt_revoke_with_grace(&zkw(), &node, Duration::from_secs(1)).unwrap(),
        RevokeOutcome::AlreadyGone
    );
    assert_no_orphans(&root);
}

/// Issue 47: a revocation request written to a held node whose ACL no longer
/// lets the holder read it. The revocation watch's `getData` fails with
/// `NoAuth`, a permanent error: it is not sent again (before, it was
/// re-armed "after the reconnect", at once while connected: requests without
/// end), the revocation watch ends (logged) and the lock stays held, as the
/// lock's permanent errors leave it; on a server that checks `READ` on
/// `exists` (3.8.4+, 3.9.2+) the lock's own watch cannot be set again
/// either, and the lock is `Lost`.
#[test]
fn a_request_the_holder_cannot_read_is_not_watched_in_a_loop() {
    use zklock::testing::FaultProxy;
    let proxy = FaultProxy::start(common::local().as_str()).unwrap();
    let holder_s = common::lock_watcher(&proxy.connect_string(), Duration::from_secs(6));
    let root = unique_root("revocable-noauth");
    let (paths, listener) = asked(RevocationReply::Release);
    let (events, recorder) = lock_recorder();
    let reader = RevocableReadLock::new(&holder_s, &root, b"unreadable", None)
        .unwrap()
        .with_revocation_listener(listener)
        .with_lock_listener(recorder);
    reader.acquire().unwrap();
    let node = reader.acquired_lock().unwrap().path;
    // The request fires the holder's watches (it may read the node: the
    // server tells a watch's event only to a session that may); the
    // `getData` setting the watch again is held on the way until the node's
    // ACL no longer lets the holder read it.
    let reads = common::write_then_hide_from(&proxy, &holder_s, &node, REVOKE_DATA, 4);
    assert_eq!(
        reads, 1,
        "the revocation watch's getData, once: {reads} sent"
    );
    assert!(
        paths.lock().unwrap().is_empty(),
        "the request cannot be read"
    );
    if common::exists_checks_read_acl() {
        assert!(eventually(Duration::from_secs(10), || !reader.is_held()));
        assert_eq!(*events.lock().unwrap(), [LockEvent::Lost]);
        assert!(matches!(reader.release(), Err(Error::LockLost { .. })));
    } else {
        assert!(reader.is_held(), "the lock stays held");
        assert!(events.lock().unwrap().is_empty());
        reader.release().unwrap();
    }
    // Listing the lock's directory needs no right on its (hidden) nodes.
    let admin = common::local_raw();
    assert!(
        children(&admin, &root).is_empty(),
        "{:?}",
        children(&admin, &root)
    );
    holder_s.close().unwrap();
}
