//! The counting semaphore, the multi-lock and guarded writes (issue 23),
//! against a real server: the limit under contention, one wake-up per grant,
//! bounds and cancel that leave no node, the lost signal and the session
//! bound, overlapping multi-locks that neither deadlock nor overlap, and
//! writes the server refuses once the lock is lost.

mod common;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::participant::Participant;
use common::{children, force_expiry, init_log, lock_recorder, raw, zkw};
use zklock::client::{Acl, CreateMode, Op};
use zklock::lock::{
    Dialect, InterProcessLock, LockEvent, LockStep, MultiLock, OrderedLock, SemaphoreStep,
    ZkInterProcessMutex, ZkInterProcessReadLock, ZkInterProcessWriteLock, ZkSemaphore,
};
use zklock::recipes::counter::SharedCount;
use zklock::testing::{eventually, shared_server, unique_root, FaultProxy, ScratchDir};
use zklock::{Error, RetryConfig, ZkError, ZooKeeperWatcher};

/// The directory of a semaphore's leases in `dialect`'s layout.
fn leases_of(root: &str, dialect: Dialect) -> String {
    match dialect {
        Dialect::Kazoo => root.to_string(),
        _ => format!("{root}/leases"),
    }
}

/// The directory of a semaphore's internal mutex in `dialect`'s layout.
fn locks_of(root: &str, dialect: Dialect) -> String {
    match dialect {
        Dialect::Kazoo => format!("{root}-__lock__"),
        _ => format!("{root}/locks"),
    }
}

/// No lease or mutex node left under the semaphore `root` in `dialect`.
fn assert_no_nodes_in(root: &str, dialect: Dialect) {
    let zk = raw();
    for path in [leases_of(root, dialect), locks_of(root, dialect)] {
        assert!(
            eventually(Duration::from_secs(5), || children(&zk, &path).is_empty()),
            "orphans under {path}: {:?}",
            children(&zk, &path)
        );
    }
}

/// Waits (generously) until `path` has `n` children.
fn wait_children(path: &str, n: usize) {
    let zk = raw();
    assert!(
        eventually(Duration::from_secs(20), || children(&zk, path).len() == n),
        "{path}: expected {n} children, saw {:?}",
        children(&zk, path)
    );
}

/// 8 holders (two sessions, one instance each) for a limit of 4 over many
/// rounds, in each dialect: a shared holder count checked inside never
/// exceeds 4, every fencing token is new and each holder's grow; nothing is
/// left.
#[test]
fn holders_never_exceed_the_limit_and_tokens_grow() {
    for dialect in Dialect::ALL {
        holders_within_the_limit(dialect);
    }
}

fn holders_within_the_limit(dialect: Dialect) {
    init_log();
    let root = unique_root("sem-limit");
    let sessions = [zkw(), zkw()];
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    // Until two holders have held at once (or this deadline), a holder keeps
    // its lease: a semaphore that let only one hold at a time fails below,
    // and a correct one shows it whatever the machine's load (holding for
    // 3 ms only, the grants could fall one after the other).
    let overlap_by = Instant::now() + Duration::from_secs(10);
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let sem =
                ZkSemaphore::in_dialect(&sessions[i % 2], &root, dialect, 4, b"holder").unwrap();
            let (holding, most, tokens) = (holding.clone(), most.clone(), tokens.clone());
            thread::spawn(move || {
                let mut last = 0;
                for _ in 0..12 {
                    let lease = sem.acquire().unwrap();
                    let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= 4, "{now} holders for a limit of 4");
                    assert!(lease.fencing_token() > last, "fencing token went back");
                    last = lease.fencing_token();
                    tokens.lock().unwrap().push(last);
                    thread::sleep(Duration::from_millis(3));
                    while most.load(Ordering::SeqCst) < 2 && Instant::now() < overlap_by {
                        thread::sleep(Duration::from_millis(1));
                    }
                    holding.fetch_sub(1, Ordering::SeqCst);
                    lease.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!(
        (2..=4).contains(&most),
        "at most {most} holders at once (limit 4)"
    );
    let mut tokens = tokens.lock().unwrap().clone();
    let n = tokens.len();
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), n, "a fencing token was given twice");
    assert_no_nodes_in(&root, dialect);
}

/// Herd-free: with one lease held and 6 idle waiters, the waiters do not
/// wake while idle, and each grant wakes at most two waits (the mutex
/// holder's wait on the leases, then the next waiter's on the mutex): a herd
/// would wake every waiter at every release.
#[test]
fn each_grant_wakes_one_waiter_not_the_herd() {
    for dialect in Dialect::ALL {
        one_wake_per_grant(dialect);
    }
}

fn one_wake_per_grant(dialect: Dialect) {
    init_log();
    let root = unique_root("sem-herd");
    let zkw = zkw();
    let (leases, locks) = (leases_of(&root, dialect), locks_of(&root, dialect));
    let one_waiting = if dialect == Dialect::Kazoo { 1 } else { 2 };
    let holder = ZkSemaphore::in_dialect(&zkw, &root, dialect, 1, b"holder").unwrap();
    let first = holder.acquire().unwrap();
    let wakes = Arc::new(AtomicUsize::new(0));
    let grants = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let waiters: Vec<_> = (0..6)
        .map(|_| {
            let w = wakes.clone();
            let sem = ZkSemaphore::in_dialect(&zkw, &root, dialect, 1, b"waiter")
                .unwrap()
                .with_step_hook(move |s, _| {
                    if matches!(
                        s,
                        SemaphoreStep::Woken | SemaphoreStep::Mutex(LockStep::Woken)
                    ) {
                        w.fetch_add(1, Ordering::SeqCst);
                    }
                });
            let (grants, tx) = (grants.clone(), tx.clone());
            thread::spawn(move || {
                let lease = sem.try_acquire(Duration::from_secs(60)).unwrap().unwrap();
                grants.fetch_add(1, Ordering::SeqCst);
                tx.send(lease).unwrap();
            })
        })
        .collect();
    // Queued: 6 at the mutex (one of them holding it), 2 leases.
    wait_children(&locks, 6);
    wait_children(&leases, one_waiting);
    thread::sleep(Duration::from_millis(500));
    assert_eq!(wakes.load(Ordering::SeqCst), 0, "idle waiters woke up");
    first.release().unwrap();
    for granted in 1..=6 {
        let lease = rx.recv_timeout(Duration::from_secs(30)).expect("a grant");
        // Let the next waiter settle (holding the mutex, watching the leases).
        if granted < 6 {
            wait_children(&leases, one_waiting);
            wait_children(&locks, 6 - granted);
        }
        lease.release().unwrap();
    }
    for t in waiters {
        t.join().unwrap();
    }
    let wakes = wakes.load(Ordering::SeqCst);
    println!("{dialect}: {wakes} wake-ups for 6 grants to 6 idle waiters");
    assert_eq!(grants.load(Ordering::SeqCst), 6);
    // Two per grant (the leases' watcher, the next at the mutex), one for the
    // last: 11. A herd wakes every remaining waiter at each release (21+).
    assert!(
        wakes < 2 * 6,
        "{wakes} wake-ups for 6 grants (a herd wakes every waiter each time)"
    );
    assert_no_nodes_in(&root, dialect);
}

/// try_acquire's bound, at both places an attempt waits (behind the leases
/// holding the mutex, and queued at the mutex), and cancel, in each dialect:
/// each leaves no node; try_acquire(0) takes a free lease.
#[test]
fn timeouts_and_cancel_leave_no_node() {
    for dialect in Dialect::ALL {
        bounds_and_cancel(dialect);
    }
}

fn bounds_and_cancel(dialect: Dialect) {
    init_log();
    let root = unique_root("sem-bound");
    let zkw = zkw();
    let (leases, locks) = (leases_of(&root, dialect), locks_of(&root, dialect));
    // The leases while one holds and one waits holding the mutex (kazoo's
    // waiter creates its lease only when there is room).
    let one_waiting = if dialect == Dialect::Kazoo { 1 } else { 2 };
    let sem = |id: &[u8]| ZkSemaphore::in_dialect(&zkw, &root, dialect, 1, id).unwrap();
    let holder = sem(b"holder");
    let held = holder.acquire().unwrap();
    assert!(
        ZkSemaphore::new(&zkw, &root, 0, b"").is_err(),
        "a limit of 0"
    );

    // Out of time behind the leases (holding the mutex).
    let w = sem(b"w");
    let started = Instant::now();
    assert!(w.try_acquire(Duration::from_millis(300)).unwrap().is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    let zk = raw();
    assert!(eventually(Duration::from_secs(5), || children(&zk, &locks).is_empty()));
    assert_eq!(children(&zk, &leases).len(), 1);

    // One waits behind the leases (cancelled later), one at the mutex (out
    // of time).
    let behind = Arc::new(sem(b"behind"));
    let b = behind.clone();
    let waiting = thread::spawn(move || b.acquire().map(drop));
    wait_children(&locks, 1);
    wait_children(&leases, one_waiting);
    let queued = sem(b"queued");
    assert!(queued
        .try_acquire(Duration::from_millis(300))
        .unwrap()
        .is_none());
    wait_children(&locks, 1);
    behind.cancel();
    match waiting.join().unwrap() {
        Err(Error::Cancelled { .. }) => {}
        other => panic!("cancelled acquire: {other:?}"),
    }
    assert!(matches!(behind.acquire(), Err(Error::Cancelled { .. })));
    wait_children(&locks, 0);
    wait_children(&leases, 1);

    // Free: taken with a zero timeout; dropped in the background.
    drop(held);
    wait_children(&leases, 0);
    let lease = w
        .try_acquire(Duration::ZERO)
        .unwrap()
        .expect("a free lease");
    assert!(lease.is_held());
    drop(lease);
    assert_no_nodes_in(&root, dialect);
}

/// A session through a proxy (to force its expiry), renewing.
fn expirable() -> (FaultProxy, ZooKeeperWatcher) {
    init_log();
    let proxy = FaultProxy::start(shared_server().connect_string()).expect("proxy");
    let zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_identifier("semaphore-expiry")
        .with_session_timeout(Duration::from_secs(6))
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .with_session_renewal(true)
        .connect()
        .expect("connect");
    (proxy, zkw)
}

/// The session's expiry (renewal on): a held lease hears Lost, is no longer
/// held, its guarded write is refused (nothing written) and its release says
/// LockLost; a waiter blocked across the expiry ends with SessionExpired
/// (never carries on in the renewed session); nothing is left. A guarded
/// write from a live lease goes through.
#[test]
fn expiry_loses_leases_and_refuses_their_writes() {
    for dialect in Dialect::ALL {
        lost_with_the_session(dialect);
    }
}

fn lost_with_the_session(dialect: Dialect) {
    let root = unique_root("sem-expiry");
    let data = format!("{root}-data");
    let (proxy, zkw) = expirable();
    let (events, listener) = lock_recorder();
    let sem = Arc::new(
        ZkSemaphore::in_dialect(&zkw, &root, dialect, 1, b"a")
            .unwrap()
            .with_lock_listener(listener),
    );
    let lease = sem.acquire().unwrap();
    zklock::zkutil::create_with_parents(&common::zkw(), &data).unwrap();
    lease
        .guarded_multi(&[Op::set_data(data.clone(), b"1".to_vec(), None)])
        .unwrap();
    let s = sem.clone();
    let waiter = thread::spawn(move || s.acquire().map(drop));
    wait_children(&locks_of(&root, dialect), 1);
    let one_waiting = if dialect == Dialect::Kazoo { 1 } else { 2 };
    wait_children(&leases_of(&root, dialect), one_waiting);

    force_expiry(&proxy, &shared_server().connect_string(), &zkw);
    assert!(eventually(Duration::from_secs(10), || events
        .lock()
        .unwrap()
        .contains(&LockEvent::Lost)));
    assert!(!lease.is_held());
    match waiter.join().unwrap() {
        Err(e) if e.is(ZkError::SessionExpired) => {}
        other => panic!("a wait across the expiry: {other:?}"),
    }
    let refused = lease.guarded_multi(&[Op::set_data(data.clone(), b"2".to_vec(), None)]);
    assert!(
        matches!(refused, Err(Error::LockLost { .. }))
            || refused
                .as_ref()
                .is_err_and(|e| e.is(ZkError::SessionExpired)),
        "a guarded write of a lost lease: {refused:?}"
    );
    assert!(matches!(lease.release(), Err(Error::LockLost { .. })));
    // Written through RecoverableZooKeeper (HBase's metadata prefix): read back alike.
    let reader = common::zkw();
    let read = reader.recoverable_zookeeper().get_data(&data, false);
    assert_eq!(read.unwrap().0, b"1", "the lost lease's write got through");
    // The renewed session leases anew.
    let again = sem.acquire().unwrap();
    assert!(again.is_held());
    again.release().unwrap();
    assert_no_nodes_in(&root, dialect);
}

/// Guarded writes from a lock: applied while held; refused by the server
/// (typed `LockLost`, nothing written) once its node was deleted by another
/// session; a failing op of the caller's keeps its index.
#[test]
fn a_lost_lock_cannot_write() {
    init_log();
    let root = unique_root("guarded");
    let zkw = zkw();
    let zk = raw();
    let data = format!("{root}/data");
    zklock::zkutil::create_with_parents(&zkw, &root).unwrap();
    zk.create(&data, b"0", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let lock = ZkInterProcessWriteLock::new(&zkw, &format!("{root}/lock"), b"w", None).unwrap();
    let guard = lock.lock().unwrap();
    let results = guard
        .guarded_multi(&zkw, &[Op::set_data(data.clone(), b"1".to_vec(), None)])
        .unwrap();
    assert_eq!(results.len(), 1);
    match guard.guarded_multi(&zkw, &[Op::set_data(data.clone(), b"x".to_vec(), Some(99))]) {
        Err(Error::Multi { index: 0, code, .. }) => assert_eq!(code, ZkError::BadVersion),
        other => panic!("a bad version in the caller's op: {other:?}"),
    }
    let check = guard.acquired_lock().unwrap().check_op();
    assert_eq!(check.path(), guard.acquired_lock().unwrap().path);
    // Lost: its node deleted from another session.
    zk.delete(&guard.acquired_lock().unwrap().path, None)
        .unwrap();
    match guard.guarded_multi(&zkw, &[Op::set_data(data.clone(), b"2".to_vec(), None)]) {
        Err(Error::LockLost { .. }) => {}
        other => panic!("a lost lock's write: {other:?}"),
    }
    let read = zkw.recoverable_zookeeper().get_data(&data, false);
    assert_eq!(read.unwrap().0, b"1", "the lost lock's write got through");
    drop(guard);
    zk.delete(&data, None).unwrap();
}

/// Two kinds of multi-lock over {A, B} and {B, A}, from 8 threads (own
/// instances, two sessions), many rounds: none deadlocks (all finish well
/// within the bound) and no two hold A, or B, at once. A try_acquire that
/// runs out releases what it took; a lock twice is refused.
#[test]
fn overlapping_multi_locks_never_deadlock_nor_overlap() {
    init_log();
    let (a, b) = (unique_root("multi-a"), unique_root("multi-b"));
    let sessions = [zkw(), zkw()];
    let in_a = Arc::new(AtomicBool::new(false));
    let in_b = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicI64::new(0));
    let (done_tx, done_rx) = mpsc::channel();
    for i in 0..8 {
        let zkw = sessions[i % 2].clone();
        let (a, b) = (a.clone(), b.clone());
        let (in_a, in_b, rounds, done) =
            (in_a.clone(), in_b.clone(), rounds.clone(), done_tx.clone());
        thread::spawn(move || {
            let la: Arc<dyn OrderedLock> =
                Arc::new(ZkInterProcessWriteLock::new(&zkw, &a, b"m", None).unwrap());
            let lb: Arc<dyn OrderedLock> =
                Arc::new(ZkInterProcessWriteLock::new(&zkw, &b, b"m", None).unwrap());
            let multi = if i % 2 == 0 {
                MultiLock::new(vec![la, lb]).unwrap()
            } else {
                MultiLock::new(vec![lb, la]).unwrap()
            };
            for _ in 0..10 {
                let guard = multi.lock().unwrap();
                assert!(!in_a.swap(true, Ordering::SeqCst), "A held twice");
                assert!(!in_b.swap(true, Ordering::SeqCst), "B held twice");
                thread::sleep(Duration::from_millis(1));
                in_a.store(false, Ordering::SeqCst);
                in_b.store(false, Ordering::SeqCst);
                rounds.fetch_add(1, Ordering::SeqCst);
                guard.unlock().unwrap();
            }
            done.send(()).unwrap();
        });
    }
    for _ in 0..8 {
        done_rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("deadlock: {} rounds done", rounds.load(Ordering::SeqCst)));
    }
    assert_eq!(rounds.load(Ordering::SeqCst), 80);

    // B held elsewhere: the multi-lock runs out and leaves A free.
    let zkw = &sessions[0];
    let other = ZkInterProcessWriteLock::new(zkw, &b, b"other", None).unwrap();
    let held_b = other.lock().unwrap();
    let la = Arc::new(ZkInterProcessWriteLock::new(zkw, &a, b"m", None).unwrap());
    let lb = Arc::new(ZkInterProcessWriteLock::new(zkw, &b, b"m", None).unwrap());
    let multi = MultiLock::new(vec![lb.clone(), la.clone()]).unwrap();
    assert!(!multi.try_acquire(Duration::from_millis(300)).unwrap());
    assert!(!la.is_held() && !lb.is_held());
    let zk = raw();
    assert!(eventually(Duration::from_secs(5), || children(&zk, &a).is_empty()));
    drop(held_b);
    assert!(multi.try_acquire(Duration::from_secs(5)).unwrap());
    assert!(multi.is_held() && la.is_held() && lb.is_held());
    assert_eq!(multi.acquired_locks().unwrap().len(), 2);
    multi.release().unwrap();
    assert!(!la.is_held() && !lb.is_held());
    // A dialect's mutex takes part too (Curator's here).
    let curator = format!("{a}-curator");
    let c = Arc::new(ZkInterProcessMutex::new(zkw, &curator, Dialect::Curator, b"").unwrap());
    let with_curator = MultiLock::new(vec![c.clone(), la.clone()]).unwrap();
    let guard = with_curator.lock().unwrap();
    assert!(c.is_held() && la.is_held());
    assert!(children(&zk, &curator)[0].starts_with("_c_"));
    drop(guard);
    assert!(eventually(Duration::from_secs(5), || children(
        &zk, &curator
    )
    .is_empty()));
    // Twice the same lock; a read and a write of one znode are fine.
    let again = Arc::new(ZkInterProcessWriteLock::new(zkw, &a, b"m", None).unwrap());
    assert!(matches!(
        MultiLock::new(vec![la.clone(), again]),
        Err(Error::BadArguments(_))
    ));
    let read_a = Arc::new(ZkInterProcessReadLock::new(zkw, &b, b"r", None).unwrap());
    assert!(MultiLock::new(vec![la, read_a]).is_ok());
    assert!(children(&zk, &a).is_empty() && children(&zk, &b).is_empty());
}

/// The limit from a `SharedCount` (Curator's `SharedCountReader` form): a
/// waiter is let in when the count is raised (woken by the change, not by a
/// release); a lowered count admits nobody until the holders are within it.
#[test]
fn a_shared_count_sets_the_limit() {
    init_log();
    let root = unique_root("sem-count");
    let zkw = zkw();
    let count = SharedCount::new(&zkw, &format!("{root}-count"), 1).unwrap();
    let sem = |id: &[u8]| {
        ZkSemaphore::with_shared_count(&zkw, &root, Dialect::Curator, count.clone(), id).unwrap()
    };
    let a = sem(b"a").acquire().unwrap();
    let b_sem = Arc::new(sem(b"b"));
    let b = b_sem.clone();
    let waiting = thread::spawn(move || b.acquire());
    wait_children(&format!("{root}/leases"), 2);
    thread::sleep(Duration::from_millis(200));
    assert!(!waiting.is_finished(), "let in over a count of 1");
    count.set(2).unwrap();
    let b = waiting.join().unwrap().expect("let in by the raised count");
    assert_eq!(b_sem.max_leases().unwrap(), 2);
    count.set(1).unwrap();
    let c = sem(b"c");
    assert!(c.try_acquire(Duration::from_millis(300)).unwrap().is_none());
    a.release().unwrap();
    b.release().unwrap();
    c.try_acquire(Duration::from_secs(5))
        .unwrap()
        .expect("within the count")
        .release()
        .unwrap();
    assert_no_nodes_in(&root, Dialect::Curator);
    assert!(matches!(
        ZkSemaphore::with_shared_count(&zkw, &root, Dialect::Kazoo, count, b""),
        Err(Error::BadArguments(_))
    ));
}

// ---------------------------------------------------------------------------
// With Curator's and kazoo's own semaphores on the same path
// ---------------------------------------------------------------------------

/// `peer` (Curator's `InterProcessSemaphoreV2` or kazoo's `Semaphore`, see
/// tests/java/CuratorSemaphore.java and tests/python/kazoo_semaphore.py) and
/// zklock in `dialect` on one semaphore of 2: each side's leases count for the
/// other (a third waits, in either direction), the nodes are the native
/// layout's, and a ring of the peer and 3 zklock holders over many rounds
/// never has more than 2 holders (a file per holder in a shared directory,
/// counted by each holder inside); nothing is left.
fn mixed_holders(mut peer: Participant, dialect: Dialect) {
    let root = unique_root(&format!("sem-mixed-{dialect}"));
    let zkw = zkw();
    let zk = raw();
    let sem = |id: &[u8]| ZkSemaphore::in_dialect(&zkw, &root, dialect, 2, id).unwrap();
    let leases = leases_of(&root, dialect);
    // The peer first, then zklock: a third (zklock) waits.
    let answer = peer.ask(&format!("acquire {root} 2 20000"));
    assert!(answer.starts_with("acquired"), "{answer}");
    let z1 = sem(b"z1")
        .try_acquire(Duration::from_secs(20))
        .unwrap()
        .expect("the second lease");
    let z2 = sem(b"z2");
    assert!(
        z2.try_acquire(Duration::from_millis(300))
            .unwrap()
            .is_none(),
        "a third holder"
    );
    let names = children(&zk, &leases);
    assert_eq!(names.len(), 2, "{names:?}");
    for name in &names {
        match dialect {
            Dialect::Curator => assert!(
                name.starts_with("_c_") && name.contains("-lease-"),
                "not Curator's lease name: {name}"
            ),
            _ => assert!(
                name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit()),
                "not kazoo's lease name: {name}"
            ),
        }
    }
    if dialect == Dialect::Kazoo {
        assert_eq!(
            zk.get_data(&root, false).unwrap().0,
            b"2",
            "kazoo's max_leases"
        );
        // Another limit than the one stored is refused, as kazoo does.
        let other = ZkSemaphore::in_dialect(&zkw, &root, dialect, 3, b"").unwrap();
        assert!(matches!(other.acquire(), Err(Error::BadArguments(_))));
    }
    if dialect == Dialect::Curator {
        // zklock's own layout on a Curator semaphore's path: refused, no node left.
        let own = ZkSemaphore::new(&zkw, &root, 2, b"").unwrap();
        match own.try_acquire(Duration::from_secs(5)) {
            Err(Error::MixedDialect { found, .. }) => assert_eq!(found, Dialect::Curator),
            other => panic!("zklock's layout among Curator's leases: {other:?}"),
        }
        assert!(eventually(Duration::from_secs(5), || children(
            &zk, &leases
        )
        .len()
            == 2));
    }
    assert_eq!(peer.ask("release"), "released");
    let z2 = z2
        .try_acquire(Duration::from_secs(20))
        .unwrap()
        .expect("the peer's lease back");
    // zklock holds both: the peer waits, runs out, then gets the one released.
    assert_eq!(peer.ask(&format!("acquire {root} 2 300")), "timeout");
    z1.release().unwrap();
    let answer = peer.ask(&format!("acquire {root} 2 20000"));
    assert!(answer.starts_with("acquired"), "{answer}");
    assert_eq!(peer.ask("release"), "released");
    z2.release().unwrap();

    // The ring.
    let flags_dir = ScratchDir::new("sem-flags").unwrap();
    let flags = flags_dir.to_path_buf();
    let rounds = 25;
    peer.send(&format!("ring {root} 2 {rounds} {}", flags.display()));
    let violations = Arc::new(AtomicUsize::new(0));
    let holders: Vec<_> = (0..3)
        .map(|i| {
            let sem = sem(b"ring");
            let (flags, violations) = (flags.clone(), violations.clone());
            thread::spawn(move || {
                for r in 0..rounds {
                    let lease = sem.acquire().unwrap();
                    let mine = flags.join(format!("zklock-{i}-{r}"));
                    std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&mine)
                        .unwrap();
                    if std::fs::read_dir(&flags).unwrap().count() > 2 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    thread::sleep(Duration::from_millis(2));
                    std::fs::remove_file(&mine).unwrap();
                    lease.release().unwrap();
                }
            })
        })
        .collect();
    for h in holders {
        h.join().unwrap();
    }
    let done = peer.expect("ringdone", Duration::from_secs(120));
    let words: Vec<&str> = done.split_whitespace().collect();
    assert_eq!(
        words.get(2),
        Some(&"0"),
        "the peer saw more than 2 holders: {done}"
    );
    assert_eq!(
        violations.load(Ordering::SeqCst),
        0,
        "zklock saw more than 2 holders"
    );
    drop(flags_dir);
    peer.finish();
    assert_no_nodes_in(&root, dialect);
}

#[test]
fn curator_semaphores_and_zklock_share_the_limit() {
    init_log();
    let peer = Participant::java("CuratorSemaphore", &[&shared_server().connect_string()]);
    mixed_holders(peer, Dialect::Curator);
}

#[test]
fn kazoo_semaphores_and_zklock_share_the_limit() {
    init_log();
    let peer = Participant::kazoo("kazoo_semaphore.py", &[&shared_server().connect_string()]);
    mixed_holders(peer, Dialect::Kazoo);
}

// ---------------------------------------------------------------------------
// One layout per path (issue 31, item 4)
// ---------------------------------------------------------------------------

/// Every node under `root` (itself included) with its data, in order.
/// A node of [`tree`]: its path, its data, and whether the server may reap
/// it (an empty container: Curator's directories).
type Node = (String, Vec<u8>, bool);

fn tree(zk: &zklock::client::ZooKeeper, root: &str) -> Vec<Node> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_string()];
    while let Some(path) = todo.pop() {
        let Ok((data, stat)) = zk.get_data(&path, false) else {
            continue;
        };
        // Reapable: an empty container. Its Stat does not say so on every
        // server (3.6.3 shows ephemeralOwner 0), so Curator's empty `leases`
        // and `locks` (created with creatingParentContainersIfNeeded) count
        // too: 3.6.3's transaction log showed `session 0x0 deleteContainer`
        // of such a `locks` in a failed run.
        let curator_dir = path.ends_with("/leases") || path.ends_with("/locks");
        let reapable = stat.num_children == 0 && (stat.ephemeral_owner == i64::MIN || curator_dir);
        out.push((path.clone(), data, reapable));
        for child in children(zk, &path) {
            todo.push(format!("{path}/{child}"));
        }
    }
    out.sort();
    out
}

/// `sem`'s attempt is refused as a mix with the semaphore of one of `found`,
/// and leaves everything under `root` as it was.
fn refused_leaving_nothing(sem: &ZkSemaphore, found: &[Dialect], root: &str) {
    let zk = raw();
    let before = tree(&zk, root);
    match sem.try_acquire(Duration::from_secs(5)) {
        Err(Error::MixedDialect { found: f, path }) => {
            assert!(found.contains(&f), "{f} {path}");
            assert!(path.starts_with(sem.path()), "{path}");
        }
        other => panic!("{:?} on {found:?}'s semaphore: {other:?}", sem),
    }
    // An empty container (Curator's `leases` and `locks` once released) may
    // be reaped by the server meanwhile (the harness reaps every second):
    // that is the server's doing, not the attempt's.
    let after = tree(&zk, root);
    let before: Vec<Node> = before
        .into_iter()
        .filter(|n| !n.2 || after.contains(n))
        .collect();
    assert_eq!(after, before, "the refused attempt changed {root}");
}

/// kazoo holds the only lease of a kazoo `Semaphore` of 1 at `P`: zklock's
/// and Curator's layouts are refused there (their directories would be
/// leases to kazoo, kazoo's leases none to them), creating nothing; kazoo
/// takes its lease again afterwards. With no lease held, kazoo's guard lock
/// beside `P` still marks the path as kazoo's.
#[test]
fn a_kazoo_semaphore_is_refused_by_the_other_layouts_which_create_nothing() {
    init_log();
    let mut peer = Participant::kazoo("kazoo_semaphore.py", &[&shared_server().connect_string()]);
    let root = unique_root("sem-kazoo-path");
    let p = format!("{root}/sem");
    let zkw = zkw();
    assert_eq!(peer.ask(&format!("acquire {p} 1 20000")), "acquired");
    for dialect in [Dialect::HBase, Dialect::Curator] {
        let sem = ZkSemaphore::in_dialect(&zkw, &p, dialect, 1, b"z").unwrap();
        refused_leaving_nothing(&sem, &[Dialect::Kazoo], &root);
        // A shared count's semaphore too.
        let count = SharedCount::new(&zkw, &format!("{root}-count-{dialect}"), 1).unwrap();
        let shared = ZkSemaphore::with_shared_count(&zkw, &p, dialect, count, b"").unwrap();
        refused_leaving_nothing(&shared, &[Dialect::Kazoo], &root);
    }
    assert_eq!(children(&raw(), &p).len(), 1);
    // kazoo's lease is free again, and kazoo takes it.
    assert_eq!(peer.ask("release"), "released");
    assert!(children(&raw(), &p).is_empty());
    for dialect in [Dialect::HBase, Dialect::Curator] {
        let sem = ZkSemaphore::in_dialect(&zkw, &p, dialect, 1, b"z").unwrap();
        refused_leaving_nothing(&sem, &[Dialect::Kazoo], &root);
    }
    assert_eq!(peer.ask(&format!("acquire {p} 1 5000")), "acquired");
    assert_eq!(peer.ask("release"), "released");
    peer.finish();
}

/// A Curator `InterProcessSemaphoreV2` holds at `P`: zklock in kazoo's
/// layout (which would count `locks` and `leases` as leases and make its
/// guard lock beside `P`) is refused, creating nothing, held or not.
#[test]
fn a_curator_semaphore_is_refused_by_the_kazoo_layout_which_creates_nothing() {
    init_log();
    let mut peer = Participant::java("CuratorSemaphore", &[&shared_server().connect_string()]);
    let root = unique_root("sem-curator-path");
    let p = format!("{root}/sem");
    let zkw = zkw();
    let answer = peer.ask(&format!("acquire {p} 1 20000"));
    assert!(answer.starts_with("acquired"), "{answer}");
    let sem = ZkSemaphore::in_dialect(&zkw, &p, Dialect::Kazoo, 1, b"z").unwrap();
    refused_leaving_nothing(&sem, &[Dialect::Curator], &root);
    assert_eq!(peer.ask("release"), "released");
    // Curator's empty directories: whose is not in their names. Curator makes
    // them containers, which the server may reap at any moment (3.6.3 did,
    // before the attempt looked, in a `make test-versions`: then `P` was bare
    // and kazoo's layout rightly took a lease). Made again as persistent
    // nodes of the same names, the case holds for the whole check.
    let zk = raw();
    for dir in ["leases", "locks"] {
        let dir = format!("{p}/{dir}");
        match zk.delete(&dir, None) {
            Err(e) if !e.is(ZkError::NoNode) => panic!("{dir}: {e}"),
            _ => {}
        }
        zk.create(&dir, b"", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
    }
    refused_leaving_nothing(&sem, &[Dialect::Curator, Dialect::HBase], &root);
    // zklock's own layout among Curator's: refused by its listings (its
    // nodes removed), nothing left either.
    let answer = peer.ask(&format!("acquire {p} 1 20000"));
    assert!(answer.starts_with("acquired"), "{answer}");
    let own = ZkSemaphore::new(&zkw, &p, 1, b"z").unwrap();
    match own.try_acquire(Duration::from_secs(5)) {
        Err(Error::MixedDialect { found, .. }) => assert_eq!(found, Dialect::Curator),
        other => panic!("zklock's layout among Curator's: {other:?}"),
    }
    assert!(eventually(Duration::from_secs(5), || children(
        &raw(),
        &format!("{p}/locks")
    )
    .is_empty()));
    let leases = children(&raw(), &format!("{p}/leases"));
    assert!(
        leases.len() == 1 && leases[0].starts_with("_c_"),
        "{leases:?}"
    );
    assert_eq!(peer.ask("release"), "released");
    peer.finish();
}

/// zklock's layout stores its limit in `P` as kazoo's does: another limit is
/// refused before anything is created; a bare `P` gets the limit; the
/// Curator layout stores none (documented: each participant grants by its
/// own limit, as Curator's do).
#[test]
fn disagreeing_limits_are_refused_where_the_layout_stores_the_limit() {
    init_log();
    let zkw = zkw();
    let zk = raw();
    let root = unique_root("sem-limits");
    for dialect in [Dialect::HBase, Dialect::Kazoo] {
        let p = format!("{root}/{dialect}");
        let one = ZkSemaphore::in_dialect(&zkw, &p, dialect, 1, b"one").unwrap();
        let held = one.acquire().unwrap();
        assert_eq!(zk.get_data(&p, false).unwrap().0, b"1", "{dialect}");
        let before = tree(&zk, &root);
        let three = ZkSemaphore::in_dialect(&zkw, &p, dialect, 3, b"three").unwrap();
        match three.try_acquire(Duration::from_secs(5)) {
            Err(Error::BadArguments(m)) => assert!(m.contains("inconsistent max leases"), "{m}"),
            other => panic!("{dialect}: limit 3 beside 1: {other:?}"),
        }
        assert_eq!(tree(&zk, &root), before, "{dialect}");
        // The same limit waits its turn.
        let other = ZkSemaphore::in_dialect(&zkw, &p, dialect, 1, b"other").unwrap();
        assert!(other
            .try_acquire(Duration::from_millis(200))
            .unwrap()
            .is_none());
        held.release().unwrap();
        assert_no_nodes_in(&p, dialect);
    }
    // A bare znode (made by hand) gets the limit.
    let bare = format!("{root}/bare");
    zk.create(&bare, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let sem = ZkSemaphore::new(&zkw, &bare, 2, b"").unwrap();
    sem.acquire().unwrap().release().unwrap();
    assert_eq!(zk.get_data(&bare, false).unwrap().0, b"2");
    assert!(matches!(
        ZkSemaphore::new(&zkw, &bare, 1, b"").unwrap().acquire(),
        Err(Error::BadArguments(_))
    ));
    // Curator's layout stores no limit: another limit is let in (documented).
    let p = format!("{root}/curator");
    let one = ZkSemaphore::in_dialect(&zkw, &p, Dialect::Curator, 1, b"one").unwrap();
    let held = one.acquire().unwrap();
    let three = ZkSemaphore::in_dialect(&zkw, &p, Dialect::Curator, 3, b"three").unwrap();
    let also = three
        .try_acquire(Duration::from_secs(5))
        .unwrap()
        .expect("Curator's layout has no stored limit");
    also.release().unwrap();
    held.release().unwrap();
}

/// The race the look at `P` before creating leaves, forced: a zklock
/// semaphore passes its look at a new `P` and stops (step hook) before
/// making its directories; kazoo takes the only lease of its `Semaphore` of
/// 1 at `P`; the zklock attempt goes on, makes its directories and lease,
/// looks at `P` again and is refused, removing its lease and the
/// directories it made (kazoo would count them as leases): kazoo takes its
/// lease again afterwards.
#[test]
fn a_kazoo_lease_taken_while_zklock_makes_its_directories_is_seen_and_nothing_is_left() {
    init_log();
    let mut peer = Participant::kazoo("kazoo_semaphore.py", &[&shared_server().connect_string()]);
    let root = unique_root("sem-kazoo-race");
    let p = format!("{root}/sem");
    let zkw = zkw();
    let (paused_tx, paused) = mpsc::channel::<()>();
    let (go, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let once = AtomicBool::new(false);
    let sem = ZkSemaphore::new(&zkw, &p, 1, b"z")
        .unwrap()
        .with_step_hook(move |step, _| {
            if step == SemaphoreStep::Mutex(LockStep::Creating)
                && !once.swap(true, Ordering::SeqCst)
            {
                paused_tx.send(()).unwrap();
                go_rx.lock().unwrap().recv().unwrap();
            }
        });
    let attempt = thread::spawn(move || sem.try_acquire(Duration::from_secs(20)));
    paused.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(
        children(&raw(), &p).is_empty(),
        "directories before the pause"
    );
    assert_eq!(peer.ask(&format!("acquire {p} 1 20000")), "acquired");
    go.send(()).unwrap();
    match attempt.join().unwrap() {
        Err(Error::MixedDialect { found, path }) => {
            assert_eq!(found, Dialect::Kazoo, "{path}")
        }
        other => panic!("zklock beside kazoo's lease: {other:?}"),
    }
    let left = children(&raw(), &p);
    assert!(
        left.len() == 1 && Dialect::of_lease(&left[0]) == Some(Dialect::Kazoo),
        "{left:?}"
    );
    assert_eq!(peer.ask("release"), "released");
    assert_eq!(peer.ask(&format!("acquire {p} 1 5000")), "acquired");
    assert_eq!(peer.ask("release"), "released");
    peer.finish();
}

/// Two zklock semaphores of different layouts start on a new path at once,
/// forced with step hooks: zklock's layout passes its look at `P` and stops;
/// one in kazoo's layout lists `P` (no directories yet) and stops before its
/// lease; zklock's makes its directories and lease and is granted (no kazoo
/// lease yet); kazoo's makes its lease, looks again, sees the directories and
/// is refused, removing its lease and its emptied guard lock: one holder.
#[test]
fn two_layouts_starting_at_once_on_a_new_path_grant_one() {
    init_log();
    let root = unique_root("sem-two-layouts");
    let p = format!("{root}/sem");
    let zkw = zkw();
    let pause_at = |at: SemaphoreStep| {
        let (paused_tx, paused) = mpsc::channel::<()>();
        let (go, go_rx) = mpsc::channel::<()>();
        let go_rx = Mutex::new(go_rx);
        let once = AtomicBool::new(false);
        let hook = move |step: SemaphoreStep, _: &str| {
            if step == at && !once.swap(true, Ordering::SeqCst) {
                paused_tx.send(()).unwrap();
                go_rx.lock().unwrap().recv().unwrap();
            }
        };
        (hook, paused, go)
    };
    let (hook, own_paused, own_go) = pause_at(SemaphoreStep::Mutex(LockStep::Creating));
    let own = ZkSemaphore::new(&zkw, &p, 1, b"own")
        .unwrap()
        .with_step_hook(hook);
    let own = thread::spawn(move || own.try_acquire(Duration::from_secs(20)));
    own_paused.recv_timeout(Duration::from_secs(20)).unwrap();
    let (hook, kazoo_paused, kazoo_go) = pause_at(SemaphoreStep::Room);
    let kazoo = ZkSemaphore::in_dialect(&zkw, &p, Dialect::Kazoo, 1, b"kazoo")
        .unwrap()
        .with_step_hook(hook);
    let kazoo = thread::spawn(move || kazoo.try_acquire(Duration::from_secs(20)));
    kazoo_paused.recv_timeout(Duration::from_secs(20)).unwrap();
    own_go.send(()).unwrap();
    let held = own
        .join()
        .unwrap()
        .unwrap()
        .expect("zklock's layout, first with its lease");
    kazoo_go.send(()).unwrap();
    match kazoo.join().unwrap() {
        Err(Error::MixedDialect { found, path }) => {
            assert_eq!(found, Dialect::HBase, "{path}")
        }
        other => panic!("kazoo's layout beside zklock's lease: {other:?}"),
    }
    let zk = raw();
    assert_eq!(children(&zk, &p), ["leases", "locks"]);
    assert!(zk
        .exists(&format!("{p}-__lock__"), false)
        .unwrap()
        .is_none());
    held.release().unwrap();
}

// ---------------------------------------------------------------------------
// Issue 44, item 2: a withdrawal while `acquire` makes its lease node
// ---------------------------------------------------------------------------

/// A hook holding the acquiring thread the first time `at` comes: it sends
/// the node's path, then waits for `go`.
#[allow(clippy::type_complexity)]
fn hold_sem_at(
    at: SemaphoreStep,
) -> (
    impl Fn(SemaphoreStep, &str) + Send + Sync + 'static,
    crossbeam_channel::Receiver<String>,
    crossbeam_channel::Sender<()>,
) {
    let (made_tx, made) = crossbeam_channel::bounded(1);
    let (go, go_rx) = crossbeam_channel::bounded::<()>(1);
    let once = AtomicBool::new(false);
    let hook = move |step: SemaphoreStep, path: &str| {
        if step == at && !once.swap(true, Ordering::SeqCst) {
            made_tx.send(path.to_string()).unwrap();
            go_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        }
    };
    (hook, made, go)
}

/// A cancel, or the session's close, from another thread while `acquire`
/// holds its lease node made but not yet returned (at `Created`), in each
/// layout: the acquire ends with `Cancelled` / `Closed`, no lease and no
/// mutex node is left, and the lock listener hears nothing (never held).
/// Before, kazoo's layout (which makes its lease node only once it has
/// room, and lists nothing after) returned the lease after the cancel had
/// returned. At `Granted`, after the attempt's last look, the lease is held:
/// a cancel leaves it held (the instance stays cancelled).
#[test]
fn a_cancel_or_close_while_acquire_makes_its_lease_ends_it_and_leaves_no_node() {
    for dialect in [Dialect::HBase, Dialect::Curator, Dialect::Kazoo] {
        for close in [false, true] {
            let root = unique_root("sem-withdraw-made");
            let session = zkw();
            let (hook, made, go) = hold_sem_at(SemaphoreStep::Created);
            let (events, listener) = lock_recorder();
            let sem = Arc::new(
                ZkSemaphore::in_dialect(&session, &root, dialect, 2, b"w")
                    .unwrap()
                    .with_lock_listener(listener)
                    .with_step_hook(hook),
            );
            let s = sem.clone();
            let acquiring = thread::spawn(move || s.acquire());
            let node = made.recv_timeout(Duration::from_secs(10)).unwrap();
            assert!(raw().exists(&node, false).unwrap().is_some());
            if close {
                session.close().unwrap();
            } else {
                sem.cancel();
            }
            go.send(()).unwrap();
            match acquiring.join().unwrap() {
                Err(Error::Cancelled { .. }) if !close => {}
                Err(e) if close && e.is_fatal() => {}
                other => panic!("{dialect:?}, close {close}: {other:?}"),
            }
            assert!(events.lock().unwrap().is_empty(), "{dialect:?}: {events:?}");
            assert_no_nodes_in(&root, dialect);
        }
    }
    // After the last look: held.
    let root = unique_root("sem-withdraw-granted");
    let (hook, made, go) = hold_sem_at(SemaphoreStep::Granted);
    let sem = Arc::new(
        ZkSemaphore::new(&zkw(), &root, 1, b"w")
            .unwrap()
            .with_step_hook(hook),
    );
    let s = sem.clone();
    let acquiring = thread::spawn(move || s.acquire());
    made.recv_timeout(Duration::from_secs(10)).unwrap();
    sem.cancel();
    go.send(()).unwrap();
    let lease = acquiring.join().unwrap().unwrap();
    assert!(lease.is_held());
    assert!(matches!(
        sem.try_acquire(Duration::ZERO),
        Err(Error::Cancelled { .. })
    ));
    lease.release().unwrap();
    assert_no_nodes_in(&root, Dialect::HBase);
}

/// Two threads calling `acquire` on one semaphore instance at once, the
/// first held between its lease's create and its return: a lease is per
/// call (Curator's `InterProcessSemaphoreV2`), so each gets its own lease
/// node (the second queues on the internal mutex meanwhile); neither
/// replaces the other, and releasing both leaves nothing. A regression
/// guard: right before issue 44 too.
#[test]
fn two_acquires_on_one_semaphore_instance_each_get_their_own_lease() {
    for dialect in [Dialect::HBase, Dialect::Kazoo] {
        let root = unique_root("sem-two-calls");
        let (hook, made, go) = hold_sem_at(SemaphoreStep::Created);
        let sem = Arc::new(
            ZkSemaphore::in_dialect(&zkw(), &root, dialect, 2, b"w")
                .unwrap()
                .with_step_hook(hook),
        );
        let s = sem.clone();
        let first = thread::spawn(move || s.acquire());
        let first_node = made.recv_timeout(Duration::from_secs(10)).unwrap();
        let s = sem.clone();
        let second = thread::spawn(move || s.acquire());
        // The second waits for the first's mutex.
        wait_children(&locks_of(&root, dialect), 2);
        go.send(()).unwrap();
        let first = first.join().unwrap().unwrap();
        let second = second.join().unwrap().unwrap();
        assert_eq!(first.path(), first_node, "{dialect:?}");
        assert_ne!(first.path(), second.path(), "{dialect:?}");
        let mut leases: Vec<String> = children(&raw(), &leases_of(&root, dialect))
            .into_iter()
            .filter(|c| !c.is_empty())
            .collect();
        leases.sort();
        let mut expected: Vec<String> = [first.path(), second.path()]
            .iter()
            .map(|p| p.rsplit('/').next().unwrap().to_string())
            .collect();
        expected.sort();
        assert_eq!(leases, expected, "{dialect:?}");
        first.release().unwrap();
        second.release().unwrap();
        assert_no_nodes_in(&root, dialect);
    }
}
