//! The lock and the read/write lock in Curator's and kazoo's dialects,
//! against real Curator 5.4 (tests/java/CuratorLocks.java) and kazoo 2.11
//! (tests/python/kazoo_locks.py) participants on the same paths, and
//! zklock's own guarantees in each dialect. Every test ends with an orphan
//! check: no node of any participant is left.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::participant::Participant;
use common::{children, force_expiry, init_log, lock_recorder, lock_watcher, raw, zkw, LockEvents};
use zklock::lock::{
    Dialect, InterProcessLock, InterProcessReadWriteLock, LockEvent, LockStep, ZkInterProcessMutex,
    ZkInterProcessReadWriteLock,
};
use zklock::testing::{
    eventually, shared_server, test_servers, unique_root, FaultProxy, ScratchDir,
};
use zklock::{Error, RetryConfig, ZkError, ZooKeeperWatcher};

const LONG: Duration = Duration::from_secs(30);

/// A flag file private to one test: created with O_EXCL inside the lock and
/// deleted before the release, by every participant, so a second holder
/// finds it. It lies in a scratch directory the test keeps while it runs.
fn flag(name: &str) -> (ScratchDir, PathBuf) {
    let dir = ScratchDir::new(&format!("dialect-{name}")).unwrap();
    let f = dir.join("flag");
    (dir, f)
}

fn enter(flag: &Path) {
    if let Err(e) = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(flag)
    {
        panic!("two holders at once: {flag:?} exists ({e})");
    }
}

fn leave(flag: &Path) {
    fs::remove_file(flag).expect("flag gone while holding");
}

fn curator() -> Participant {
    Participant::java("CuratorLocks", &[&test_servers()])
}

fn kazoo() -> Participant {
    Participant::kazoo("kazoo_locks.py", &[&test_servers()])
}

/// Asserts `p` answers `expected` (skipping nothing) within `timeout`.
#[track_caller]
fn answer(p: &Participant, expected: &str, timeout: Duration) {
    let line = p.line(timeout);
    assert_eq!(line, expected);
}

/// Asserts `p` answers each of `expected`, in any order, within `timeout`
/// each (answers from different threads of the participant).
#[track_caller]
fn answers(p: &Participant, expected: &[&str], timeout: Duration) {
    let mut got: Vec<String> = expected.iter().map(|_| p.line(timeout)).collect();
    got.sort();
    let mut want: Vec<&str> = expected.to_vec();
    want.sort();
    assert_eq!(got, want);
}

/// No answer from `p` for a while (it is blocked waiting for the lock).
#[track_caller]
fn silent(p: &Participant, for_: Duration) {
    if let Some(l) = p.try_line(for_) {
        panic!("unexpected answer {l:?}");
    }
}

fn mutex(zkw: &ZooKeeperWatcher, path: &str, dialect: Dialect, data: &[u8]) -> ZkInterProcessMutex {
    ZkInterProcessMutex::new(zkw, path, dialect, data).unwrap()
}

/// Nothing left under `path`: no participant's node.
#[track_caller]
fn no_orphans(path: &str) {
    let zk = raw();
    assert!(
        eventually(LONG, || children(&zk, path).is_empty()),
        "orphans under {path}: {:?}",
        children(&zk, path)
    );
}

/// The one node under `path` not in `others`, waited for: a participant's
/// create lands when its library gets to it, which nothing it says marks (a
/// Curator participant told to acquire behind a holder only goes silent;
/// under load its create came more than 300 ms later).
fn new_node(path: &str, others: &[String]) -> String {
    let zk = raw();
    let fresh = || -> Vec<String> {
        children(&zk, path)
            .into_iter()
            .filter(|c| !others.contains(c))
            .collect()
    };
    assert!(
        eventually(LONG, || !fresh().is_empty()),
        "no new node under {path}"
    );
    let mut new = fresh();
    assert_eq!(new.len(), 1, "{new:?}");
    new.pop().unwrap()
}

fn data_of(path: &str) -> Vec<u8> {
    raw().get_data(path, false).unwrap().0
}

/// Whether a zklock attempt (acquiring on another thread) ended up granted
/// within `timeout`.
fn granted(rx: &mpsc::Receiver<zklock::Result<()>>, timeout: Duration) -> bool {
    match rx.recv_timeout(timeout) {
        Ok(r) => {
            r.unwrap();
            true
        }
        Err(_) => false,
    }
}

/// Acquires `lock` on a new thread; the result comes on the channel.
fn acquire_in_background<L: InterProcessLock + 'static>(
    lock: Arc<L>,
) -> mpsc::Receiver<zklock::Result<()>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(lock.acquire());
    });
    rx
}

/// The exclusive lock with a native participant of `dialect` on the same
/// path, both directions, then a ring of mixed holders with a shared flag.
/// `native` was started for that dialect; `ident` is the data its nodes
/// carry.
fn mutex_against_native(mut native: Participant, dialect: Dialect, name: &str, ident: &[u8]) {
    let zkw = zkw();
    let root = unique_root(name);
    // A fresh path two levels deep: the lock creates its parents itself.
    let p = format!("{root}/deep/lock");
    let id = String::from_utf8_lossy(ident).to_string();

    // zklock first: its node and parents look as the native library's.
    let z = Arc::new(mutex(&zkw, &p, dialect, ident));
    z.acquire().unwrap();
    let mine = new_node(&p, &[]);
    let zk = raw();
    native.send(&format!("mutex n1 {p} {id}"));
    answer(&native, "ok n1", LONG);
    native.send("acquire n1 300");
    answer(&native, "timeout n1", LONG);
    native.send("acquire n1");
    silent(&native, Duration::from_millis(300));
    let theirs = new_node(&p, std::slice::from_ref(&mine));
    match dialect {
        Dialect::Curator => {
            for n in [&mine, &theirs] {
                let uuid = n
                    .strip_prefix("_c_")
                    .unwrap()
                    .split_once("-lock-")
                    .unwrap()
                    .0;
                assert_eq!(uuid.len(), 36, "{n}");
            }
        }
        _ => {
            for n in [&mine, &theirs] {
                let (hex, seq) = n.split_once("__lock__").unwrap();
                assert_eq!((hex.len(), seq.len()), (32, 10), "{n}");
            }
        }
    }
    // The same data: Curator's default (the local address), kazoo's identifier.
    assert_eq!(
        data_of(&format!("{p}/{mine}")),
        data_of(&format!("{p}/{theirs}"))
    );
    let token = z.acquired_lock().unwrap().fencing_token();
    z.release().unwrap();
    answer(&native, "acquired n1", LONG);

    // The native library first: zklock waits, and is granted right after.
    assert!(!z.try_acquire(Duration::from_millis(300)).unwrap());
    assert_eq!(
        std::slice::from_ref(&theirs),
        children(&zk, &p).as_slice(),
        "a timed-out attempt left a node"
    );
    let rx = acquire_in_background(z.clone());
    assert!(!granted(&rx, Duration::from_millis(300)));
    native.send("release n1");
    answer(&native, "released n1", LONG);
    assert!(granted(&rx, LONG), "not granted after the native release");
    assert!(z.acquired_lock().unwrap().fencing_token() > token);
    z.release().unwrap();

    // A ring: two zklock holders and two native ones, one flag.
    let (_flag_dir, f) = flag(name);
    const ROUNDS: usize = 25;
    native.send(&format!("mutex n2 {p} {id}"));
    answer(&native, "ok n2", LONG);
    for n in ["n1", "n2"] {
        native.send(&format!("ring {n} {ROUNDS} {}", f.display()));
    }
    let ours: Vec<_> = (0..2)
        .map(|_| {
            let (zkw, p, f) = (zkw.clone(), p.clone(), f.clone());
            let ident = ident.to_vec();
            thread::spawn(move || {
                let l = mutex(&zkw, &p, dialect, &ident);
                for _ in 0..ROUNDS {
                    let g = l.lock().unwrap();
                    enter(&f);
                    thread::sleep(Duration::from_millis(1));
                    leave(&f);
                    g.unlock().unwrap();
                }
            })
        })
        .collect();
    for t in ours {
        t.join().unwrap();
    }
    let mut done = vec![native.line(LONG), native.line(LONG)];
    done.sort();
    assert_eq!(
        done,
        [
            format!("ringdone n1 {ROUNDS} 0"),
            format!("ringdone n2 {ROUNDS} 0")
        ]
    );
    assert!(!f.exists());
    native.finish();
    no_orphans(&p);
    // Curator's parents are containers (the test server reaps an empty one
    // within a second or two); kazoo's are persistent.
    let deep = format!("{root}/deep");
    match dialect {
        Dialect::Curator => assert!(
            eventually(LONG, || zk.exists(&deep, false).unwrap().is_none()),
            "{deep} is not a container"
        ),
        _ => {
            thread::sleep(Duration::from_millis(2500));
            assert!(
                zk.exists(&p, false).unwrap().is_some(),
                "{p} is not persistent"
            );
        }
    }
    zkw.close().unwrap();
}

#[test]
fn curator_mutex_both_directions_and_a_mixed_ring() {
    init_log();
    mutex_against_native(curator(), Dialect::Curator, "curator-mutex", b"");
}

#[test]
fn kazoo_lock_both_directions_and_a_mixed_ring() {
    init_log();
    mutex_against_native(kazoo(), Dialect::Kazoo, "kazoo-lock", b"zk-worker-1");
}

/// The read/write lock with native readers and writers: readers share
/// across libraries, writers exclude, both directions.
fn read_write_against_native(mut native: Participant, dialect: Dialect, name: &str) {
    let zkw = zkw();
    let p = unique_root(name);
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &p, None)
        .unwrap()
        .with_dialect(dialect);
    assert_eq!(rw.dialect(), dialect);
    native.send(&format!("rlock r1 {p} them"));
    answer(&native, "ok r1", LONG);
    native.send(&format!("wlock w1 {p} them"));
    answer(&native, "ok w1", LONG);
    native.send("acquire r1");
    answer(&native, "acquired r1", LONG);
    // Readers share with the native reader; a writer waits for it.
    let r = Arc::new(rw.read_lock(b"us"));
    assert!(r.try_acquire(Duration::from_secs(5)).unwrap());
    let w = Arc::new(rw.write_lock(b"us"));
    assert!(!w.try_acquire(Duration::from_millis(300)).unwrap());
    // A native writer queues behind both readers ...
    native.send("acquire w1");
    silent(&native, Duration::from_millis(300));
    // ... and a zklock reader behind that writer (readers do not jump it).
    let r2 = Arc::new(rw.read_lock(b"us-2"));
    let rx = acquire_in_background(r2.clone());
    assert!(!granted(&rx, Duration::from_millis(300)));
    r.release().unwrap();
    silent(&native, Duration::from_millis(200));
    native.send("release r1");
    // The participant answers each lock on its own thread, and the server
    // sends the watch event before the delete's reply: "acquired w1" may
    // come first.
    answers(&native, &["released r1", "acquired w1"], LONG);
    assert!(!granted(&rx, Duration::from_millis(300)));
    native.send("release w1");
    answer(&native, "released w1", LONG);
    assert!(
        granted(&rx, LONG),
        "the reader was not granted after the writer"
    );
    // The native reader shares with the zklock reader; the native writer
    // waits for it.
    native.send("acquire r1 5000");
    answer(&native, "acquired r1", LONG);
    native.send("acquire w1 300");
    answer(&native, "timeout w1", LONG);
    native.send("release r1");
    answer(&native, "released r1", LONG);
    native.send("acquire w1");
    silent(&native, Duration::from_millis(300));
    r2.release().unwrap();
    answer(&native, "acquired w1", LONG);
    // zklock's writer waits for the native writer.
    let rx = acquire_in_background(w.clone());
    assert!(!granted(&rx, Duration::from_millis(300)));
    native.send("release w1");
    answer(&native, "released w1", LONG);
    assert!(granted(&rx, LONG));
    w.release().unwrap();
    native.finish();
    no_orphans(&p);
    zkw.close().unwrap();
}

#[test]
fn curator_read_write_lock_readers_share_writers_exclude() {
    init_log();
    read_write_against_native(curator(), Dialect::Curator, "curator-rw");
}

#[test]
fn kazoo_read_write_lock_readers_share_writers_exclude() {
    init_log();
    read_write_against_native(kazoo(), Dialect::Kazoo, "kazoo-rw");
}

/// zklock's own guarantees, in each dialect: the fencing token, the
/// `try_acquire` bound leaving no node, cancel, a lost create reply found by
/// its uuid, the lost signal on expiry.
#[test]
fn zklock_guarantees_in_every_dialect() {
    init_log();
    for dialect in [Dialect::Curator, Dialect::Kazoo, Dialect::HBase] {
        let zkw = zkw();
        let p = unique_root(&format!("guarantees-{dialect}"));
        let a = mutex(&zkw, &p, dialect, b"a");
        assert_eq!(a.dialect(), dialect);
        let g = a.lock().unwrap();
        let t1 = g.fencing_token();
        let held = g.acquired_lock().unwrap().clone();
        assert_eq!(raw().exists(&held.path, false).unwrap().unwrap().czxid, t1);
        // The try_acquire bound: out of time, no node left.
        let b = Arc::new(mutex(&zkw, &p, dialect, b"b"));
        assert!(!b.try_acquire(Duration::from_millis(200)).unwrap());
        assert_eq!(children(&raw(), &p).len(), 1);
        // Cancel: the blocked acquire ends, its node removed.
        let rx = acquire_in_background(b.clone());
        assert!(eventually(LONG, || children(&raw(), &p).len() == 2));
        b.cancel();
        let r = rx.recv_timeout(LONG).unwrap();
        assert!(matches!(r, Err(Error::Cancelled { .. })), "{r:?}");
        assert_eq!(children(&raw(), &p).len(), 1);
        g.unlock().unwrap();
        // The fencing token grows with every grant; an owned guard.
        let a = Arc::new(a);
        let g = a.clone().lock_owned().unwrap();
        assert!(g.fencing_token() > t1);
        g.unlock().unwrap();
        no_orphans(&p);
        zkw.close().unwrap();

        // A create whose reply was lost, no retries left: found by its uuid
        // and removed.
        let zkw = ZooKeeperWatcher::builder(&test_servers())
            .with_session_timeout(Duration::from_secs(6))
            .with_retry(RetryConfig::default().with_max_attempts(0))
            .connect()
            .unwrap();
        let l = mutex(&zkw, &p, dialect, b"");
        zkw.zookeeper()
            .lose_next_reply(zklock::client::ReplyKind::Create);
        let r = l.acquire();
        assert!(
            matches!(&r, Err(e) if e.is(ZkError::ConnectionLoss)),
            "{r:?}"
        );
        no_orphans(&p);
        zkw.close().unwrap();
    }
}

/// The lost signal (InDoubt, then Lost) on expiry, and the one-round-trip
/// acquire, in Curator's and kazoo's dialects.
#[test]
fn the_lost_signal_on_expiry_in_curator_and_kazoo_dialects() {
    init_log();
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    for dialect in [Dialect::Curator, Dialect::Kazoo] {
        let zkw = lock_watcher(&proxy.connect_string(), Duration::from_secs(4));
        let p = unique_root(&format!("expiry-{dialect}"));
        let (events, listener): (LockEvents, _) = lock_recorder();
        let l = mutex(&zkw, &p, dialect, b"").with_lock_listener(listener);
        // One round trip to take a free lock (create and listing together):
        // over a link that delays every chunk by D each way, under 2 round
        // trips (4 D), with room for a slow machine.
        zklock::zkutil::create_with_parents(&zkw, &p).unwrap();
        const D: Duration = Duration::from_millis(250);
        proxy.delay(D);
        // (Without a lock listener, which adds a watch on the held node.)
        let quick = mutex(&zkw, &p, dialect, b"");
        let t = std::time::Instant::now();
        quick.acquire().unwrap();
        let took = t.elapsed();
        proxy.pass();
        quick.release().unwrap();
        l.acquire().unwrap();
        assert!(
            took < 3 * D,
            "{dialect}: acquire took {took:?} (one round trip: {:?})",
            2 * D
        );
        force_expiry(&proxy, &shared_server().connect_string(), &zkw);
        assert!(eventually(LONG, || events.lock().unwrap().last()
            == Some(&LockEvent::Lost)));
        assert_eq!(events.lock().unwrap().first(), Some(&LockEvent::InDoubt));
        assert!(!l.is_held());
        assert!(matches!(l.release(), Err(Error::LockLost { .. })));
        let zk = common::raw_session(&shared_server().connect_string(), Duration::from_secs(6));
        assert!(eventually(LONG, || children(&zk, &p).is_empty()));
        let _ = zkw.close();
    }
}

/// A directory holding another dialect's nodes is refused, with a typed
/// error and the attempt's node removed; two zklock participants of
/// different dialects starting at once (each creates before the other
/// lists: forced with step hooks) both refuse.
#[test]
fn mixed_directories_are_refused_both_at_once() {
    init_log();
    let zkw = zkw();
    let p = unique_root("mixed");
    // A Curator-dialect holder: kazoo and HBase participants refuse.
    let c = mutex(&zkw, &p, Dialect::Curator, b"");
    c.acquire().unwrap();
    let curator_node = new_node(&p, &[]);
    for other in [Dialect::Kazoo, Dialect::HBase] {
        let k = mutex(&zkw, &p, other, b"k");
        match k.try_acquire(Duration::from_secs(5)) {
            Err(Error::MixedDialect { path, found }) => {
                assert_eq!(
                    (path, found),
                    (format!("{p}/{curator_node}"), Dialect::Curator)
                );
            }
            r => panic!("{other}: {r:?}"),
        }
        assert_eq!(children(&raw(), &p), std::slice::from_ref(&curator_node));
    }
    let rw = ZkInterProcessReadWriteLock::new(&zkw, &p, None)
        .unwrap()
        .with_dialect(Dialect::Kazoo);
    assert!(matches!(
        rw.read_lock(b"r").acquire(),
        Err(Error::MixedDialect {
            found: Dialect::Curator,
            ..
        })
    ));
    c.release().unwrap();
    no_orphans(&p);

    // Both at once: A (Curator) creates, then waits until B (kazoo) has
    // created, then lists; B's listing (sent with its create) came after A's
    // create, and B waits until A has listed. On a directory that exists (a
    // persistent one: the Curator container above may be reaped once empty,
    // and B would then create it and list after A refused, alone and safe).
    let p = format!("{p}-both");
    raw()
        .create(
            &p,
            b"",
            zklock::client::Acl::open_unsafe(),
            zklock::client::CreateMode::Persistent,
        )
        .unwrap();
    // B creates only once A's node exists (else B's listing, sent with its
    // create, could miss A's node: B would then hold alone, safe, but not
    // the case this part forces).
    let a_created = Arc::new(Barrier::new(2));
    let b_created = Arc::new(Barrier::new(2));
    let a_listed = Arc::new(Barrier::new(2));
    let (ac, bc, al) = (a_created.clone(), b_created.clone(), a_listed.clone());
    let zkw_a = zkw.clone();
    let p_a = p.clone();
    let ta = thread::spawn(move || {
        let l = ZkInterProcessMutex::new(&zkw_a, &p_a, Dialect::Curator, b"")
            .unwrap()
            .with_sequential_acquire()
            .with_step_hook(move |step, _| match step {
                LockStep::Created => {
                    a_created.wait();
                    b_created.wait();
                }
                LockStep::Listed => {
                    a_listed.wait();
                }
                _ => {}
            });
        l.try_acquire(LONG)
    });
    let zkw_b = zkw.clone();
    let p_b = p.clone();
    let tb = thread::spawn(move || {
        let l = ZkInterProcessMutex::new(&zkw_b, &p_b, Dialect::Kazoo, b"b")
            .unwrap()
            .with_step_hook(move |step, _| match step {
                LockStep::Creating => {
                    ac.wait();
                }
                LockStep::Created => {
                    bc.wait();
                    al.wait();
                }
                _ => {}
            });
        l.try_acquire(LONG)
    });
    let (ra, rb) = (ta.join().unwrap(), tb.join().unwrap());
    assert!(
        matches!(
            ra,
            Err(Error::MixedDialect {
                found: Dialect::Kazoo,
                ..
            })
        ),
        "{ra:?}"
    );
    assert!(
        matches!(
            rb,
            Err(Error::MixedDialect {
                found: Dialect::Curator,
                ..
            })
        ),
        "{rb:?}"
    );
    no_orphans(&p);
    zkw.close().unwrap();
}
