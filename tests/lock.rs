//! Inter-process read/write locks against a real ZooKeeper server: exclusion,
//! sharing, timeouts leaving no node, reaping, metadata, expiry, herd, FIFO, and
//! a waiter failing over to another ensemble member.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::client::cons_sessions;
use common::{
    children, init_log, local, local_raw, local_zkw, lock_recorder, lock_watcher, member_of, raw,
    zkw,
};
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, LockEvent, LockStep, ZkInterProcessReadWriteLock,
    ZkInterProcessWriteLock,
};
use zklock::testing::{eventually, test_servers, unique_root, wait_until, FaultProxy, ZkEnsemble};
use zklock::{Error, RetryConfig, ZkError, ZooKeeperWatcher};

#[test]
fn writers_exclude_writers() {
    let zkw = zkw();
    let root = unique_root("writers");
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &root, None).unwrap();
    let inside = Arc::new(AtomicBool::new(false));
    let entries = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..10)
        .map(|i| {
            let lock = rw.write_lock(format!("writer-{i}").as_bytes());
            let inside = inside.clone();
            let entries = entries.clone();
            thread::spawn(move || {
                let guard = lock.lock().expect("lock");
                assert!(!inside.swap(true, Ordering::SeqCst), "two writers inside");
                entries.fetch_add(1, Ordering::SeqCst);
                // Deliberate: stay inside a while, for another writer to collide.
                thread::sleep(Duration::from_millis(100));
                inside.store(false, Ordering::SeqCst);
                guard.unlock().expect("unlock");
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(entries.load(Ordering::SeqCst), 10);
    assert!(
        children(zkw.zookeeper(), &root).is_empty(),
        "no node left behind"
    );
    zkw.close().unwrap();
}

#[test]
fn readers_share() {
    let zkw = zkw();
    let root = unique_root("readers");
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &root, None).unwrap();
    let barrier = Arc::new(Barrier::new(10));
    let handles: Vec<_> = (0..10)
        .map(|_| {
            let lock = rw.read_lock(b"reader");
            let barrier = barrier.clone();
            thread::spawn(move || {
                let guard = lock
                    .try_lock_for(Duration::from_secs(10))
                    .unwrap()
                    .expect("read lock");
                // All ten wait here together: only possible if they share the lock.
                barrier.wait();
                drop(guard);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(children(zkw.zookeeper(), &root).is_empty());
    zkw.close().unwrap();
}

#[test]
fn readers_and_writers_exclude_each_other() {
    let zkw = zkw();
    let root = unique_root("rw-exclusion");
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &root, None).unwrap();
    let readers = Arc::new(AtomicUsize::new(0));
    let writer = Arc::new(AtomicBool::new(false));
    let violations = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..12 {
        let rw = rw.clone();
        let (readers, writer, violations) = (readers.clone(), writer.clone(), violations.clone());
        handles.push(thread::spawn(move || {
            for _ in 0..3 {
                if i % 3 == 0 {
                    let lock = rw.write_lock(b"w");
                    let g = lock.lock().unwrap();
                    writer.store(true, Ordering::SeqCst);
                    if readers.load(Ordering::SeqCst) != 0 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    // Deliberate: hold the lock a while (exclusion is checked meanwhile).
                    thread::sleep(Duration::from_millis(20));
                    writer.store(false, Ordering::SeqCst);
                    drop(g);
                } else {
                    let lock = rw.read_lock(b"r");
                    let g = lock.lock().unwrap();
                    readers.fetch_add(1, Ordering::SeqCst);
                    if writer.load(Ordering::SeqCst) {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    // Deliberate: hold the lock a while (exclusion is checked meanwhile).
                    thread::sleep(Duration::from_millis(10));
                    readers.fetch_sub(1, Ordering::SeqCst);
                    drop(g);
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0);
    assert!(children(zkw.zookeeper(), &root).is_empty());
    zkw.close().unwrap();
}

#[test]
fn two_sessions_read_blocks_write_and_timeout_leaves_no_node() {
    let (s1, s2) = (zkw(), zkw());
    let root = unique_root("two-sessions");
    let read = ZkInterProcessReadWriteLock::new(&s1, &root, None)
        .unwrap()
        .read_lock(b"s1");
    read.acquire().unwrap();
    let write = ZkInterProcessReadWriteLock::new(&s2, &root, None)
        .unwrap()
        .write_lock(b"s2");
    let t = Instant::now();
    assert!(!write.try_acquire(Duration::from_secs(1)).unwrap());
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    let left = children(s1.zookeeper(), &root);
    assert_eq!(left.len(), 1, "only the reader's node: {left:?}");
    assert!(left[0].starts_with("read-"));
    read.release().unwrap();
    assert!(write.try_acquire(Duration::from_secs(5)).unwrap());
    assert!(write.is_held());
    write.release().unwrap();
    assert!(children(s1.zookeeper(), &root).is_empty());
    s1.close().unwrap();
    s2.close().unwrap();
}

#[test]
fn timed_out_writer_does_not_block_a_later_writer() {
    let zkw = zkw();
    let root = unique_root("timeout-cleanup");
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &root, None).unwrap();
    let holder = rw.write_lock(b"holder");
    holder.acquire().unwrap();
    let impatient = rw.write_lock(b"impatient");
    assert!(!impatient.try_acquire(Duration::from_millis(200)).unwrap());
    assert!(!impatient.is_held());
    // A writer queued after the impatient one: once the holder leaves it must
    // not wait behind the impatient one's (removed) node.
    let later = rw.write_lock(b"later");
    let handle = thread::spawn(move || {
        let ok = later.try_acquire(Duration::from_secs(5)).unwrap();
        (ok, later)
    });
    // The later writer is queued (behind the holder) once its node exists.
    wait_until(Duration::from_secs(5), "the later writer queued", || {
        children(zkw.zookeeper(), &root).len() == 2
    });
    holder.release().unwrap();
    let (ok, later) = handle.join().unwrap();
    assert!(ok);
    later.release().unwrap();
    assert!(children(zkw.zookeeper(), &root).is_empty());
    // Zero timeout: fails at once when held, and leaves nothing.
    holder.acquire().unwrap();
    assert!(!impatient.try_acquire(Duration::ZERO).unwrap());
    assert_eq!(children(zkw.zookeeper(), &root).len(), 1);
    holder.release().unwrap();
    zkw.close().unwrap();
}

#[test]
fn not_reentrant_and_release_without_hold_are_clear_errors() {
    let zkw = zkw();
    let root = unique_root("reentrant");
    let lock = ZkInterProcessReadWriteLock::new(&zkw, &root, None)
        .unwrap()
        .write_lock(b"x");
    assert!(matches!(lock.release(), Err(Error::LockNotHeld { .. })));
    lock.acquire().unwrap();
    assert!(matches!(lock.acquire(), Err(Error::LockBusy { .. })));
    assert!(matches!(
        lock.try_acquire(Duration::from_secs(1)),
        Err(Error::LockBusy { .. })
    ));
    assert_eq!(children(zkw.zookeeper(), &root).len(), 1, "no second node");
    lock.release().unwrap();
    assert!(matches!(lock.release(), Err(Error::LockNotHeld { .. })));
    // Bad lock paths are typed errors.
    assert!(matches!(
        ZkInterProcessReadWriteLock::new(&zkw, "no-slash", None),
        Err(Error::BadArguments(_))
    ));
    assert!(matches!(
        ZkInterProcessReadWriteLock::new(&zkw, "/a//b", None),
        Err(Error::BadArguments(_))
    ));
    zkw.close().unwrap();
}

#[test]
fn fifo_across_kinds_and_fencing_tokens_grow() {
    let zkw = zkw();
    let root = unique_root("fifo");
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &root, None).unwrap();
    let r1 = rw.read_lock(b"r1");
    let g1 = r1.lock().unwrap();
    let t1 = g1.fencing_token();
    let order = Arc::new(Mutex::new(Vec::new()));
    let w = rw.write_lock(b"w");
    let o = order.clone();
    let writer = thread::spawn(move || {
        let g = w.lock().unwrap();
        o.lock().unwrap().push("w");
        let token = g.fencing_token();
        // Deliberate: hold the write lock a while before the reader's turn.
        thread::sleep(Duration::from_millis(100));
        drop(g);
        token
    });
    // The writer is queued once its node exists.
    assert!(eventually(Duration::from_secs(5), || children(
        zkw.zookeeper(),
        &root
    )
    .len()
        == 2));
    let r2 = rw.read_lock(b"r2");
    assert!(
        !r2.try_acquire(Duration::from_millis(300)).unwrap(),
        "reader must queue behind the writer"
    );
    let o = order.clone();
    let reader = thread::spawn(move || {
        let g = r2.lock().unwrap();
        o.lock().unwrap().push("r2");
        g.fencing_token()
    });
    assert!(eventually(Duration::from_secs(5), || children(
        zkw.zookeeper(),
        &root
    )
    .len()
        == 3));
    drop(g1);
    let tw = writer.join().unwrap();
    let t2 = reader.join().unwrap();
    assert_eq!(*order.lock().unwrap(), ["w", "r2"]);
    assert!(t1 < tw && tw < t2, "tokens {t1} {tw} {t2}");
    zkw.close().unwrap();
}

#[test]
fn visit_locks_shows_holders_and_waiters_metadata() {
    let zkw = zkw();
    let root = unique_root("visit");
    let seen_while_blocked = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let s = seen_while_blocked.clone();
    let handler: Arc<dyn zklock::lock::MetadataHandler> =
        Arc::new(move |m: &[u8]| s.lock().unwrap().push(m.to_vec()));
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &root, Some(handler)).unwrap();
    let holder = rw.write_lock(b"holder-meta");
    holder.acquire().unwrap();
    let waiter = rw.write_lock(b"waiter-meta");
    let h = thread::spawn(move || {
        let ok = waiter.try_acquire(Duration::from_secs(10)).unwrap();
        waiter.release().unwrap();
        ok
    });
    assert!(eventually(Duration::from_secs(5), || children(
        zkw.zookeeper(),
        &root
    )
    .len()
        == 2));
    // The waiter's handler saw the holder's metadata (HBase's handleLockMetadata).
    assert!(eventually(Duration::from_secs(5), || seen_while_blocked
        .lock()
        .unwrap()
        .iter()
        .any(|m| m == b"holder-meta")));
    let visited = Mutex::new(Vec::new());
    let visitor = |m: &[u8]| {
        visited
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(m).into_owned())
    };
    holder.visit_locks(&visitor).unwrap();
    assert_eq!(*visited.lock().unwrap(), ["holder-meta", "waiter-meta"]);
    holder.release().unwrap();
    assert!(h.join().unwrap());
    zkw.close().unwrap();
}

#[test]
fn reaping_frees_stuck_holders_and_fails_reaped_waiters() {
    let (stuck, other) = (zkw(), zkw());
    let root = unique_root("reap");
    let stuck_lock = ZkInterProcessReadWriteLock::new(&stuck, &root, None)
        .unwrap()
        .write_lock(b"stuck");
    stuck_lock.acquire().unwrap();
    let rw = ZkInterProcessReadWriteLock::new(&other, &root, None).unwrap();
    // A waiter in the stuck holder's own session: its node gets reaped too.
    let waiter = ZkInterProcessReadWriteLock::new(&stuck, &root, None)
        .unwrap()
        .write_lock(b"waiter");
    let h = thread::spawn(move || waiter.try_acquire(Duration::from_secs(10)));
    assert!(eventually(Duration::from_secs(5), || children(
        other.zookeeper(),
        &root
    )
    .len()
        == 2));
    // reap_expired_locks with a long expiry removes nothing.
    rw.write_lock(b"reaper")
        .reap_expired_locks(Duration::from_secs(3600))
        .unwrap();
    assert_eq!(children(other.zookeeper(), &root).len(), 2);
    rw.write_lock(b"reaper").reap_all_locks().unwrap();
    let r = h.join().unwrap();
    assert!(
        matches!(r, Err(Error::LockLost { .. })),
        "reaped waiter: {r:?}"
    );
    // The lock is free for others now.
    let next = rw.write_lock(b"next");
    assert!(next.try_acquire(Duration::from_secs(5)).unwrap());
    // The reaped holder learns it at release, and can acquire again afterwards.
    assert!(matches!(stuck_lock.release(), Err(Error::LockLost { .. })));
    next.release().unwrap();
    stuck_lock.acquire().unwrap();
    stuck_lock.release().unwrap();
    // Reaping by age: only nodes older than the expiry go.
    let old = rw.write_lock(b"old");
    old.acquire().unwrap();
    // Deliberate: let the old node age past the expiry used below.
    thread::sleep(Duration::from_millis(1500));
    let young = rw.read_lock(b"young");
    let hy = thread::spawn(move || {
        let r = young.try_acquire(Duration::from_secs(10));
        (r, young)
    });
    assert!(eventually(Duration::from_secs(5), || children(
        other.zookeeper(),
        &root
    )
    .len()
        == 2));
    rw.write_lock(b"reaper")
        .reap_expired_locks(Duration::from_millis(1000))
        .unwrap();
    // The write node was old: gone; the read waiter's node is not of this kind.
    let left = children(other.zookeeper(), &root);
    assert!(left.iter().all(|c| c.starts_with("read-")), "{left:?}");
    let (r, young) = hy.join().unwrap();
    assert!(
        r.unwrap(),
        "the reader gets the lock once the old writer is reaped"
    );
    young.release().unwrap();
    assert!(matches!(old.release(), Err(Error::LockLost { .. })));
    assert!(children(other.zookeeper(), &root).is_empty());
    stuck.close().unwrap();
    other.close().unwrap();
}

#[test]
fn herd_one_release_wakes_exactly_one_waiter() {
    let zkw = zkw();
    let root = unique_root("herd");
    let wakeups = Arc::new(AtomicUsize::new(0));
    let w = wakeups.clone();
    // The handler runs once per wait round of a blocked waiter: a wake-up that
    // does not grant the lock shows up as another call.
    let handler: Arc<dyn zklock::lock::MetadataHandler> = Arc::new(move |_m: &[u8]| {
        w.fetch_add(1, Ordering::SeqCst);
    });
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &root, Some(handler)).unwrap();
    let holder = rw.write_lock(b"holder");
    holder.acquire().unwrap();
    let acquired = Arc::new(AtomicUsize::new(0));
    // A gate: every waiter holds a receiver; dropping the sender opens it.
    let (open_gate, release) = crossbeam_channel::bounded::<()>(0);
    let n = 50;
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let lock = rw.write_lock(b"waiter");
            let (acquired, release) = (acquired.clone(), release.clone());
            thread::spawn(move || {
                let g = lock.lock().unwrap();
                acquired.fetch_add(1, Ordering::SeqCst);
                // Held until the test opens the gate (drops the sender).
                let _ = release.recv();
                drop(g);
            })
        })
        .collect();
    assert!(eventually(Duration::from_secs(20), || wakeups
        .load(Ordering::SeqCst)
        >= n));
    assert!(eventually(Duration::from_secs(5), || children(
        zkw.zookeeper(),
        &root
    )
    .len()
        == n + 1));
    let before = wakeups.load(Ordering::SeqCst);
    assert_eq!(before, n, "each waiter blocked exactly once");
    holder.release().unwrap();
    assert!(eventually(Duration::from_secs(5), || acquired
        .load(Ordering::SeqCst)
        == 1));
    // Deliberate: give a wrong wake-up time to show (nothing to wait for).
    thread::sleep(Duration::from_millis(300));
    assert_eq!(acquired.load(Ordering::SeqCst), 1);
    assert_eq!(
        wakeups.load(Ordering::SeqCst),
        before,
        "no other waiter woke"
    );
    drop(open_gate);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), n);
    assert!(children(zkw.zookeeper(), &root).is_empty());
    zkw.close().unwrap();
}

#[test]
fn expiry_while_holding_and_while_waiting() {
    init_log();
    let proxy = FaultProxy::start(local().as_str()).unwrap();
    let (events, listener) = lock_recorder();
    let holder_zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_millis(1500))
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .connect()
        .unwrap();
    let root = unique_root("expiry");
    let rw = ZkInterProcessReadWriteLock::new(&holder_zkw, &root, None)
        .unwrap()
        .with_lock_listener(listener);
    let held = rw.write_lock(b"holder");
    held.acquire().unwrap();
    // A waiter in the same (soon expired) session.
    let waiter = rw.write_lock(b"waiter");
    let hw = thread::spawn(move || waiter.acquire());
    let other = local_zkw();
    assert!(eventually(Duration::from_secs(5), || children(
        other.zookeeper(),
        &root
    )
    .len()
        == 2));
    proxy.stall();
    // Deliberate: stay partitioned past the 1.5 s session.
    thread::sleep(Duration::from_millis(2500));
    proxy.pass();
    let r = hw.join().unwrap();
    assert!(
        matches!(&r, Err(e) if e.is(ZkError::SessionExpired)),
        "waiter ends with SessionExpired: {r:?}"
    );
    assert!(eventually(Duration::from_secs(5), || !held.is_held()));
    assert!(eventually(Duration::from_secs(5), || events
        .lock()
        .unwrap()
        .contains(&LockEvent::Lost)));
    assert_eq!(
        *events.lock().unwrap(),
        [LockEvent::InDoubt, LockEvent::Lost]
    );
    assert!(matches!(held.release(), Err(Error::LockLost { .. })));
    // Both nodes went with the session; another session acquires.
    assert!(eventually(Duration::from_secs(5), || children(
        other.zookeeper(),
        &root
    )
    .is_empty()));
    let lock = ZkInterProcessReadWriteLock::new(&other, &root, None)
        .unwrap()
        .write_lock(b"next");
    assert!(lock.try_acquire(Duration::from_secs(5)).unwrap());
    lock.release().unwrap();
    other.close().unwrap();
    holder_zkw.close().unwrap();
}

#[test]
fn lock_survives_a_short_blip_in_doubt_then_restored() {
    init_log();
    let proxy = FaultProxy::start(local().as_str()).unwrap();
    let zkw = lock_watcher(&proxy.connect_string(), Duration::from_secs(6));
    let root = unique_root("blip");
    let (events, listener) = lock_recorder();
    let lock = ZkInterProcessReadWriteLock::new(&zkw, &root, None)
        .unwrap()
        .with_lock_listener(listener)
        .write_lock(b"x");
    lock.acquire().unwrap();
    proxy.cut();
    assert!(eventually(Duration::from_secs(10), || events
        .lock()
        .unwrap()
        .len()
        == 2));
    assert_eq!(
        *events.lock().unwrap(),
        [LockEvent::InDoubt, LockEvent::Restored]
    );
    assert!(lock.is_held());
    lock.release().unwrap();
    assert!(children(&local_raw(), &root).is_empty());
    zkw.close().unwrap();
}

#[test]
fn a_create_whose_reply_was_lost_leaves_no_orphan_when_retries_run_out() {
    init_log();
    let root = unique_root("lost-create");
    // No retries: the first ConnectionLoss is returned, as when a flapping link
    // spends the whole budget.
    let zkw = ZooKeeperWatcher::builder(&test_servers())
        .with_session_timeout(Duration::from_secs(6))
        .with_retry(RetryConfig::default().with_max_attempts(0))
        .connect()
        .unwrap();
    zklock::zkutil::create_with_parents(&zkw, &root).unwrap();
    let lock = ZkInterProcessReadWriteLock::new(&zkw, &root, None)
        .unwrap()
        .write_lock(b"victim");
    zkw.zookeeper()
        .lose_next_reply(zklock::client::ReplyKind::Create);
    let r = lock.acquire();
    assert!(
        matches!(&r, Err(e) if e.is(ZkError::ConnectionLoss)),
        "{r:?}"
    );
    assert!(!lock.is_held());
    // The node the server created is found by its tag and removed.
    let zk = raw();
    assert!(
        eventually(Duration::from_secs(10), || children(&zk, &root).is_empty()),
        "orphan: {:?}",
        children(&zk, &root)
    );
    let other = ZkInterProcessReadWriteLock::new(&common::zkw(), &root, None)
        .unwrap()
        .write_lock(b"next");
    assert!(other.try_acquire(Duration::from_secs(2)).unwrap());
    other.release().unwrap();
    // The instance is usable again.
    lock.acquire().unwrap();
    lock.release().unwrap();
    zkw.close().unwrap();
}

#[test]
fn a_reaped_waiter_behind_the_other_kind_fails_at_once() {
    let (a, b, c) = (zkw(), zkw(), zkw());
    let root = unique_root("reaped-behind-reader");
    let reader = ZkInterProcessReadWriteLock::new(&a, &root, None)
        .unwrap()
        .read_lock(b"stuck reader");
    reader.acquire().unwrap();
    let writer = ZkInterProcessReadWriteLock::new(&b, &root, None)
        .unwrap()
        .write_lock(b"waiting writer");
    let h = thread::spawn(move || {
        let r = writer.try_acquire(Duration::from_secs(20));
        (r, Instant::now())
    });
    let zk = raw();
    assert!(eventually(Duration::from_secs(5), || children(&zk, &root)
        .len()
        == 2));
    // Reaping write locks leaves the reader, which the writer waits on.
    ZkInterProcessReadWriteLock::new(&c, &root, None)
        .unwrap()
        .write_lock(b"reaper")
        .reap_all_locks()
        .unwrap();
    let reaped_at = Instant::now();
    let (r, ended) = h.join().unwrap();
    assert!(matches!(r, Err(Error::LockLost { .. })), "{r:?}");
    assert!(
        ended.saturating_duration_since(reaped_at) < Duration::from_secs(3),
        "the waiter must learn at once, not at its timeout"
    );
    assert_eq!(children(&zk, &root).len(), 1, "only the reader is left");
    reader.release().unwrap();
    for w in [a, b, c] {
        w.close().unwrap();
    }
}

#[test]
fn a_reaped_holder_with_a_listener_is_told_lost() {
    let (a, b) = (zkw(), zkw());
    let root = unique_root("reaped-holder");
    let (events, listener) = lock_recorder();
    let held = ZkInterProcessReadWriteLock::new(&a, &root, None)
        .unwrap()
        .with_lock_listener(listener)
        .write_lock(b"holder");
    held.acquire().unwrap();
    ZkInterProcessReadWriteLock::new(&b, &root, None)
        .unwrap()
        .write_lock(b"reaper")
        .reap_all_locks()
        .unwrap();
    // is_held() turns false just before the listener is called.
    assert!(eventually(Duration::from_secs(5), || !held.is_held()
        && !events.lock().unwrap().is_empty()));
    assert_eq!(*events.lock().unwrap(), [LockEvent::Lost]);
    assert!(matches!(held.release(), Err(Error::LockLost { .. })));
    held.acquire().unwrap();
    held.release().unwrap();
    a.close().unwrap();
    b.close().unwrap();
}

#[test]
fn a_holder_partitioned_past_its_session_is_told_lost_while_still_partitioned() {
    init_log();
    let proxy = FaultProxy::start(local().as_str()).unwrap();
    let session = Duration::from_millis(2000);
    let holder_zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_session_timeout(session)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .connect()
        .unwrap();
    let root = unique_root("partitioned-holder");
    let (events, listener) = lock_recorder();
    let held = ZkInterProcessReadWriteLock::new(&holder_zkw, &root, None)
        .unwrap()
        .with_lock_listener(listener)
        .write_lock(b"partitioned holder");
    held.acquire().unwrap();
    let partitioned_at = Instant::now();
    proxy.stall();
    // The partition never heals during the test: the holder must learn on its own.
    assert!(
        eventually(Duration::from_secs(6), || events
            .lock()
            .unwrap()
            .contains(&LockEvent::Lost)),
        "events {:?}",
        events.lock().unwrap()
    );
    let told = partitioned_at.elapsed();
    assert!(!held.is_held());
    assert!(
        told < session + Duration::from_millis(1500),
        "told after {told:?}"
    );
    assert_eq!(
        *events.lock().unwrap(),
        [LockEvent::InDoubt, LockEvent::Lost]
    );
    // Meanwhile the server expired the session and another session can take it.
    let other = local_zkw();
    let lock = ZkInterProcessReadWriteLock::new(&other, &root, None)
        .unwrap()
        .write_lock(b"other");
    assert!(lock.try_acquire(Duration::from_secs(10)).unwrap());
    assert!(!held.is_held(), "never two holders");
    lock.release().unwrap();
    assert!(matches!(held.release(), Err(Error::LockLost { .. })));
    proxy.reset();
    other.close().unwrap();
    let _ = holder_zkw.close();
}

#[test]
fn try_acquire_keeps_its_bound_through_a_partition_and_leaves_nothing() {
    init_log();
    let proxy = FaultProxy::start(local().as_str()).unwrap();
    // Defaults that would take many seconds per call: a 6 s session, HBase's
    // retries with 1 s sleeps.
    let zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(6))
        .connect()
        .unwrap();
    let root = unique_root("bounded-try");
    zklock::zkutil::create_with_parents(&zkw, &root).unwrap();
    let grace = Duration::from_millis(300);
    let lock = ZkInterProcessReadWriteLock::new(&zkw, &root, None)
        .unwrap()
        .write_lock(b"x")
        .with_call_grace(grace);
    proxy.stall();
    for timeout in [
        Duration::ZERO,
        Duration::from_millis(200),
        Duration::from_millis(700),
    ] {
        let t = Instant::now();
        let r = lock.try_acquire(timeout);
        let took = t.elapsed();
        assert!(matches!(r, Ok(false)), "{timeout:?}: {r:?}");
        // The documented bound: timeout + grace + 250 ms to remove the node.
        assert!(
            took < timeout + grace + Duration::from_millis(250 + 400),
            "try_acquire({timeout:?}) took {took:?}"
        );
    }
    proxy.reset();
    // Whatever reached the server is removed once the connection is back.
    let zk = local_raw();
    assert!(eventually(Duration::from_secs(10), || children(&zk, &root).is_empty()));
    assert!(lock.try_acquire(Duration::from_secs(5)).unwrap());
    lock.release().unwrap();
    zkw.close().unwrap();
}

// ---------------------------------------------------------------------------
// Failover (was tests/lock_failover.rs): a waiter survives the failure of the
// ensemble member it is connected to.
// ---------------------------------------------------------------------------

fn failover_watcher(servers: &str) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(servers)
        .with_session_timeout(Duration::from_secs(8))
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(50)))
        .connect()
        .expect("connect")
}

#[test]
fn waiter_gets_the_lock_after_its_server_is_killed() {
    init_log();
    let mut ensemble = ZkEnsemble::start().expect("ensemble");
    ensemble
        .wait_for_quorum(Duration::from_secs(60))
        .expect("quorum");
    let holder_zkw = failover_watcher(&ensemble.connect_string());
    let holder_member = member_of(&ensemble, holder_zkw.zookeeper().session_id());
    // The waiter connects only to a member other than the holder's, so killing it
    // leaves the holder alone; it knows every member, to fail over.
    let mut waiter_zkw = failover_watcher(&ensemble.connect_string());
    while member_of(&ensemble, waiter_zkw.zookeeper().session_id()) == holder_member {
        waiter_zkw.close().unwrap();
        waiter_zkw = failover_watcher(&ensemble.connect_string());
    }
    let waiter_id = waiter_zkw.zookeeper().session_id();
    let waiter_member = member_of(&ensemble, waiter_id);
    let root = "/zklock-test/failover";
    let holder = ZkInterProcessReadWriteLock::new(&holder_zkw, root, None)
        .unwrap()
        .write_lock(b"holder");
    holder.acquire().unwrap();
    let waiter = ZkInterProcessReadWriteLock::new(&waiter_zkw, root, None)
        .unwrap()
        .write_lock(b"waiter");
    let h = thread::spawn(move || {
        let ok = waiter.try_acquire(Duration::from_secs(60)).unwrap();
        (ok, waiter)
    });
    wait_until(Duration::from_secs(10), "the waiter queued", || {
        holder_zkw
            .zookeeper()
            .get_children(root, false)
            .unwrap()
            .len()
            >= 2
    });
    ensemble.kill(waiter_member).unwrap();
    // The waiter notices and moves to another member.
    wait_until(
        Duration::from_secs(20),
        "the waiter reconnected to another member",
        || {
            (0..ensemble.size())
                .filter(|&i| i != waiter_member)
                .any(|i| cons_sessions(&ensemble.address(i)).contains(&waiter_id))
        },
    );
    holder.release().unwrap();
    let (ok, waiter) = h.join().unwrap();
    assert!(ok, "the waiter got the lock after failover");
    assert_ne!(
        member_of(&ensemble, waiter_zkw.zookeeper().session_id()),
        waiter_member
    );
    waiter.release().unwrap();
    // The holder's member may apply the waiter's delete a moment after the
    // waiter's member answered it: sync first (ZooKeeper's read-your-others'-writes).
    holder_zkw.zookeeper().sync(root).unwrap();
    assert!(holder_zkw
        .zookeeper()
        .get_children(root, false)
        .unwrap()
        .is_empty());
    holder_zkw.close().unwrap();
    waiter_zkw.close().unwrap();
}

/// The create and the first listing go out together: taking a free lock
/// costs one round trip where the one-request-at-a-time path costs two,
/// counted exactly by the proxy ([`FaultProxy::round_trips`]: a request sent
/// after the replies to the earlier ones came back starts a new one), not
/// timed. The link delays every chunk by `D` each way, so that the replies of
/// a pipelined batch come back long after its last request went out.
#[test]
fn a_free_lock_is_taken_in_one_round_trip() {
    const D: Duration = Duration::from_millis(100);
    let proxy = FaultProxy::start(local().as_str()).unwrap();
    let zkw = lock_watcher(&proxy.connect_string(), Duration::from_secs(20));
    let root = unique_root("one-round-trip");
    zklock::zkutil::create_with_parents(&zkw, &root).unwrap();
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &root, None).unwrap();
    let pipelined = rw.write_lock(b"pipelined");
    let sequential = rw.write_lock(b"sequential").with_sequential_acquire();
    proxy.delay(D);
    let round_trips = |lock: &dyn InterProcessLock| {
        let before = proxy.round_trips();
        lock.acquire().unwrap();
        let taken = proxy.round_trips() - before;
        lock.release().unwrap();
        taken
    };
    for _ in 0..3 {
        assert_eq!(round_trips(&pipelined), 1, "pipelined acquire");
        assert_eq!(round_trips(&sequential), 2, "sequential acquire");
    }
    proxy.pass();
    assert!(children(&local_raw(), &root).is_empty());
    zkw.close().unwrap();
}

/// The woken waiter decides on the listing its watcher sent on the event: over
/// a link that delays every chunk by `D` each way, no round trip lies between
/// its wake-up and its listing; with the listing sent by the woken waiter (as
/// before, `with_listing_after_wake`) one does (2 D at least).
#[test]
fn a_woken_waiter_wakes_to_its_listing() {
    const D: Duration = Duration::from_millis(200);
    let proxy = FaultProxy::start(local().as_str()).unwrap();
    let zkw = lock_watcher(&proxy.connect_string(), Duration::from_secs(20));
    let root = unique_root("woken-to-listing");
    zklock::zkutil::create_with_parents(&zkw, &root).unwrap();
    let holder = ZkInterProcessWriteLock::new(&zkw, &root, b"holder", None).unwrap();
    proxy.delay(D);
    for after_wake in [false, true] {
        let woken_at: Arc<Mutex<Option<Instant>>> = Arc::default();
        let gap: Arc<Mutex<Option<Duration>>> = Arc::default();
        let (queued_tx, queued) = std::sync::mpsc::channel();
        let queued_tx = Mutex::new(queued_tx);
        let (w, g) = (woken_at.clone(), gap.clone());
        let waiter = ZkInterProcessWriteLock::new(&zkw, &root, b"waiter", None)
            .unwrap()
            .with_step_hook(move |step, _path| match step {
                LockStep::Watching => {
                    let _ = queued_tx.lock().unwrap().send(());
                }
                LockStep::Woken => *w.lock().unwrap() = Some(Instant::now()),
                LockStep::Listed => {
                    if let Some(t) = w.lock().unwrap().take() {
                        *g.lock().unwrap() = Some(t.elapsed());
                    }
                }
                _ => {}
            });
        let waiter = if after_wake {
            waiter.with_listing_after_wake()
        } else {
            waiter
        };
        holder.acquire().unwrap();
        let t = thread::spawn(move || {
            waiter.acquire().unwrap();
            waiter.release().unwrap();
        });
        queued.recv_timeout(Duration::from_secs(30)).unwrap();
        holder.release().unwrap();
        t.join().unwrap();
        let gap = gap.lock().unwrap().expect("woken, then listed");
        if after_wake {
            assert!(gap >= 2 * D, "listing after the wake-up took {gap:?}");
        } else {
            // No round trip (2 D), with room for a slow machine.
            assert!(
                gap < D,
                "the listing sent on the event: {gap:?} after the wake-up"
            );
        }
    }
    proxy.pass();
    assert!(children(&local_raw(), &root).is_empty());
    zkw.close().unwrap();
}

/// The pipelined create's reply is lost (the server made the node, the
/// connection drops): the retry finds the node by its tag and adopts it; the
/// lock is taken with exactly one node.
#[test]
fn a_lost_reply_to_the_pipelined_create_adopts_the_node() {
    init_log();
    let zkw = zkw();
    let root = unique_root("pipelined-lost-create");
    zklock::zkutil::create_with_parents(&zkw, &root).unwrap();
    let lock = ZkInterProcessReadWriteLock::new(&zkw, &root, None)
        .unwrap()
        .write_lock(b"adopter");
    zkw.zookeeper()
        .lose_next_reply(zklock::client::ReplyKind::Create);
    lock.acquire().unwrap();
    let held = lock.acquired_lock().unwrap();
    let nodes = children(&raw(), &root);
    assert_eq!(nodes.len(), 1, "one node, not two: {nodes:?}");
    assert!(held.path.ends_with(&nodes[0]), "{} vs {nodes:?}", held.path);
    lock.release().unwrap();
    assert!(children(&raw(), &root).is_empty());
    zkw.close().unwrap();
}

/// The pipelined listing's reply is lost (the create's came first): the
/// attempt lists again after the reconnect and takes the lock.
#[test]
fn a_lost_reply_to_the_pipelined_listing_lists_again() {
    init_log();
    let zkw = zkw();
    let root = unique_root("pipelined-lost-listing");
    zklock::zkutil::create_with_parents(&zkw, &root).unwrap();
    let lock = ZkInterProcessReadWriteLock::new(&zkw, &root, None)
        .unwrap()
        .write_lock(b"lister");
    zkw.zookeeper()
        .lose_next_reply(zklock::client::ReplyKind::GetChildren);
    lock.acquire().unwrap();
    assert!(lock.is_held());
    assert_eq!(children(&raw(), &root).len(), 1);
    lock.release().unwrap();
    assert!(children(&raw(), &root).is_empty());
    zkw.close().unwrap();
}

/// A lock znode that does not exist yet: the pair's create fails with NoNode
/// (nothing made), the lock znode is created, and the attempt goes on.
#[test]
fn the_pipelined_acquire_creates_a_missing_lock_znode() {
    let zkw = zkw();
    let root = format!("{}/not/yet", unique_root("pipelined-no-parent"));
    let lock = ZkInterProcessReadWriteLock::new(&zkw, &root, None)
        .unwrap()
        .write_lock(b"first");
    assert!(lock.try_acquire(Duration::ZERO).unwrap());
    assert_eq!(children(&raw(), &root).len(), 1);
    lock.release().unwrap();
    zkw.close().unwrap();
}

/// Issue 47 (ZOOKEEPER-2590): the held node's watch, set again after a write
/// to it, on a node whose ACL no longer lets the holder read it: on a server
/// that checks `READ` on `exists` (3.8.4+, 3.9.2+) its `exists` fails with
/// `NoAuth`, a permanent error. It is not sent again (before, it was
/// re-armed "after the reconnect", at once while connected: requests without
/// end), and the lock is `Lost`, as a node that cannot be watched at the
/// grant is no grant; the release removes it and says `LockLost`. On an
/// older server the `exists` answers, and the lock stays held.
#[test]
fn a_held_node_the_holder_can_no_longer_read_is_not_watched_in_a_loop() {
    init_log();
    let proxy = FaultProxy::start(local().as_str()).unwrap();
    let (events, listener) = lock_recorder();
    let holder_zkw = lock_watcher(&proxy.connect_string(), Duration::from_secs(6));
    let root = unique_root("lock-noauth");
    let lock = ZkInterProcessWriteLock::new(&holder_zkw, &root, b"holder", None)
        .unwrap()
        .with_lock_listener(listener);
    lock.acquire().unwrap();
    let node = lock.acquired_lock().unwrap().path;
    // The write spends the holder's watch, and the holder hears it (it reads
    // the node); its `exists` setting the watch again is held on the way
    // until the node's ACL no longer lets it read the node (the server
    // tells a watch's event only to a session that may read the node).
    let exists = common::write_then_hide_from(&proxy, &holder_zkw, &node, b"written", 3);
    assert_eq!(exists, 1, "the watch's exists, once: {exists} sent");
    if common::exists_checks_read_acl() {
        assert!(eventually(Duration::from_secs(10), || !lock.is_held()));
        assert_eq!(*events.lock().unwrap(), [LockEvent::Lost]);
        assert!(matches!(lock.release(), Err(Error::LockLost { .. })));
    } else {
        assert!(lock.is_held());
        assert!(events.lock().unwrap().is_empty());
        lock.release().unwrap();
    }
    // Listing the lock's directory needs no right on its (hidden) nodes.
    let admin = local_raw();
    assert!(
        children(&admin, &root).is_empty(),
        "the node is removed: {:?}",
        children(&admin, &root)
    );
    holder_zkw.close().unwrap();
}
