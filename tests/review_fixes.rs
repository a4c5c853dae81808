//! The review's two findings, each shown against a real ZooKeeper 3.8:
//!
//! 1. A tracker read numbered before it was sent could be overtaken by a read
//!    numbered after it, and the tracker then kept the older answer.
//! 2. An asynchronous request waited for the writer lock behind a caller
//!    blocked writing into a full socket.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{Acl, CreateMode, WatchedEvent, WatcherType, ZooKeeper};
use zklock::testing::{shared_server, unique_root, wait_until, FaultProxy};
use zklock::{zkutil, Abortable, Error, ZkError, ZooKeeperNodeTracker, ZooKeeperWatcher};

const WAIT: Duration = Duration::from_secs(10);

fn init_log() {
    let _ = env_logger::builder().is_test(true).try_init();
}

fn raw(servers: &str, session: Duration) -> ZooKeeper {
    init_log();
    ZooKeeper::connect(servers, session, |_e: WatchedEvent| {}).expect("connect a raw session")
}

fn watcher(servers: &str) -> ZooKeeperWatcher {
    init_log();
    ZooKeeperWatcher::builder(servers)
        .with_session_timeout(Duration::from_secs(4))
        .connect()
        .expect("connect a ZooKeeperWatcher")
}

/// Counts what the tracker passes to its `Abortable`.
#[derive(Default)]
struct Aborts(Mutex<Vec<String>>);

impl Abortable for Aborts {
    fn abort(&self, why: &str, e: Option<&Error>) {
        self.0.lock().unwrap().push(format!("{why}: {e:?}"));
    }

    fn is_aborted(&self) -> bool {
        !self.0.lock().unwrap().is_empty()
    }
}

// ---------------------------------------------------------------------------
// 1. A tracker keeps the newest answer, whatever order its reads were numbered
// ---------------------------------------------------------------------------

/// The reviewer's interleaving, forced: a blocking refresh (`get_data(true)`)
/// starts; before it sends its read, the node changes and the tracker's
/// event-driven re-read is sent, answered and stored. Then the node changes
/// once more and the refresh is sent: its answer is the newest, and the
/// tracker must keep it.
///
/// To make a stale answer visible instead of healed a moment later, the
/// tracker's watch is removed before the last change (the tracker ignores the
/// removal), so the refresh is the only read that sees that change.
#[test]
fn a_refresh_overtaken_by_an_event_read_keeps_the_newest_data() {
    let servers = shared_server().connect_string();
    let zkw = watcher(&servers);
    let other = raw(&servers, Duration::from_secs(4));
    let root = unique_root("review_tracker_order");
    zkutil::create_with_parents(&zkw, &root).unwrap();
    let node = format!("{root}/master");
    other
        .create(&node, b"one", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let aborts = Arc::new(Aborts::default());
    let tracker = Arc::new(ZooKeeperNodeTracker::new(&zkw, &node, aborts.clone()));
    tracker.start().unwrap();
    assert_eq!(tracker.get_data(false).as_deref(), Some(&b"one"[..]));

    let overtaken = Arc::new(AtomicUsize::new(0));
    {
        let (t, zkw, other, node, overtaken) = (
            tracker.clone(),
            zkw.clone(),
            other.clone(),
            node.clone(),
            overtaken.clone(),
        );
        tracker.before_next_refresh_send(move || {
            other.set_data(&node, b"two", None).unwrap();
            wait_until(WAIT, "the tracker's event read stored 'two'", || {
                t.get_data(false).as_deref() == Some(&b"two"[..])
            });
            zkw.zookeeper()
                .remove_watches(&node, WatcherType::Data)
                .unwrap();
            other.set_data(&node, b"three", None).unwrap();
            overtaken.fetch_add(1, Ordering::SeqCst);
        });
    }
    assert_eq!(tracker.get_data(true).as_deref(), Some(&b"three"[..]));
    assert_eq!(overtaken.load(Ordering::SeqCst), 1, "the hook ran");
    assert_eq!(
        tracker.get_data(false).as_deref(),
        Some(&b"three"[..]),
        "the tracker kept the event read's older answer over the refresh's newer one"
    );
    assert_eq!(
        tracker
            .block_until_available(Duration::ZERO, false)
            .unwrap()
            .as_deref(),
        Some(&b"three"[..])
    );
    assert!(!aborts.is_aborted(), "{:?}", aborts.0.lock().unwrap());
    tracker.stop();
}

/// The blocking refresh, now made of asynchronous calls, keeps the
/// `RecoverableZooKeeper`'s retry rule: a connection lost under it is retried
/// (after the configured backoff), not reported.
#[test]
fn a_refresh_retries_a_lost_connection() {
    let proxy = FaultProxy::start(shared_server().connect_string()).unwrap();
    let zkw = watcher(&proxy.connect_string());
    let other = raw(&shared_server().connect_string(), Duration::from_secs(4));
    let root = unique_root("review_tracker_retry");
    zkutil::create_with_parents(&zkw, &root).unwrap();
    let node = format!("{root}/master");
    other
        .create(&node, b"one", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let aborts = Arc::new(Aborts::default());
    let tracker = Arc::new(ZooKeeperNodeTracker::new(&zkw, &node, aborts.clone()));
    tracker.start().unwrap();
    other.set_data(&node, b"two", None).unwrap();
    wait_until(WAIT, "the tracker read 'two'", || {
        tracker.get_data(false).as_deref() == Some(&b"two"[..])
    });

    proxy.stall();
    let refresh = {
        let t = tracker.clone();
        thread::spawn(move || t.get_data(true))
    };
    other.set_data(&node, b"three", None).unwrap();
    // The refresh's read is on its way (or about to be) into the stalled link;
    // cutting the connection answers it with ConnectionLoss.
    thread::sleep(Duration::from_millis(200));
    proxy.reset();
    assert_eq!(refresh.join().unwrap().as_deref(), Some(&b"three"[..]));
    assert_eq!(tracker.get_data(false).as_deref(), Some(&b"three"[..]));
    assert!(!aborts.is_aborted(), "{:?}", aborts.0.lock().unwrap());
    tracker.stop();
}

// ---------------------------------------------------------------------------
// 2. Asynchronous requests never wait behind a blocked writer
// ---------------------------------------------------------------------------

/// A client through a stalled proxy with writers blocked: `writers` threads
/// each send a 900 KB `setData`, more than the stalled link's socket buffers
/// hold (the client's send buffer is at most 4 MB here, the proxy reads
/// nothing), so one of them is blocked in its write, holding the writer, and
/// the others wait for it. Returns the client, the proxy, the nodes to play
/// with and the writer threads.
struct Blocked {
    proxy: FaultProxy,
    zk: ZooKeeper,
    nodes: Vec<String>,
    writers: Vec<thread::JoinHandle<()>>,
}

fn blocked_writer(name: &str, n_writers: usize, nodes: usize) -> Blocked {
    let proxy = FaultProxy::start(shared_server().connect_string()).unwrap();
    // Write timeout: 1/3 of the session timeout, 3 s: the blocked writer stays
    // blocked for the whole test unless the proxy lets it go.
    let zk = raw(&proxy.connect_string(), Duration::from_secs(9));
    let root = unique_root(name);
    let mut cur = String::new();
    for seg in root.split('/').filter(|s| !s.is_empty()) {
        cur.push('/');
        cur.push_str(seg);
        match zk.create(&cur, b"", Acl::open_unsafe(), CreateMode::Persistent) {
            Ok(_) => {}
            Err(e) if e.is(ZkError::NodeExists) => {}
            Err(e) => panic!("create {cur}: {e}"),
        }
    }
    let nodes: Vec<String> = (0..nodes)
        .map(|i| {
            let p = format!("{root}/n{i}");
            zk.create(&p, b"", Acl::open_unsafe(), CreateMode::Persistent)
                .unwrap();
            p
        })
        .collect();
    proxy.stall();
    let big = Arc::new(vec![7u8; 900 * 1024]);
    let started = Arc::new(AtomicUsize::new(0));
    let writers = (0..n_writers)
        .map(|i| {
            let (zk, big, started) = (zk.clone(), big.clone(), started.clone());
            let path = format!("{root}/nowhere-{i}");
            thread::spawn(move || {
                started.fetch_add(1, Ordering::SeqCst);
                let _ = zk.set_data(&path, &big, None);
            })
        })
        .collect();
    wait_until(WAIT, "the writers started", || {
        started.load(Ordering::SeqCst) == n_writers
    });
    // Copying 7 MB into socket buffers takes milliseconds; this leaves the
    // writer threads time to be scheduled on a busy machine.
    thread::sleep(Duration::from_millis(500));
    Blocked {
        proxy,
        zk,
        nodes,
        writers,
    }
}

/// Sends a `delete_async` and an `exists_async` for each node from this
/// thread, each returning within 50 ms; returns the answers as they come.
/// (`Ok(true)`: the node was there.)
fn send_async(zk: &ZooKeeper, nodes: &[String]) -> Arc<Mutex<Vec<Result<bool, Error>>>> {
    let answers = Arc::new(Mutex::new(Vec::new()));
    for node in nodes {
        let a = answers.clone();
        let t = Instant::now();
        zk.exists_async(node, None, move |r| {
            a.lock().unwrap().push(r.map(|stat| stat.is_some()));
        });
        let took = t.elapsed();
        assert!(
            took < Duration::from_millis(50),
            "exists_async took {took:?}"
        );
        let a = answers.clone();
        let t = Instant::now();
        zk.delete_async(node, None, move |r| {
            a.lock().unwrap().push(r.map(|()| true))
        });
        let took = t.elapsed();
        assert!(
            took < Duration::from_millis(50),
            "delete_async took {took:?}"
        );
    }
    answers
}

/// Behind a writer blocked on a full socket, asynchronous calls return at
/// once; when the link flows again, each is sent and answered.
#[test]
fn async_calls_do_not_wait_for_a_blocked_writer_and_are_sent_when_it_is_done() {
    let b = blocked_writer("review_async_pass", 8, 4);
    let answers = send_async(&b.zk, &b.nodes);
    b.proxy.pass();
    wait_until(WAIT, "every asynchronous call answered", || {
        answers.lock().unwrap().len() == 2 * b.nodes.len()
    });
    for r in answers.lock().unwrap().iter() {
        assert!(matches!(r, Ok(true)), "{r:?}");
    }
    for w in b.writers {
        w.join().unwrap();
    }
    for node in &b.nodes {
        assert!(b.zk.exists(node, false).unwrap().is_none(), "{node}");
    }
    b.zk.close().unwrap();
}

/// Behind a writer blocked on a full socket, asynchronous calls return at
/// once; when the connection is lost instead, each is answered (none is
/// dropped), and the session goes on.
#[test]
fn async_calls_deferred_behind_a_blocked_writer_are_answered_when_the_connection_goes() {
    let b = blocked_writer("review_async_cut", 8, 4);
    let answers = send_async(&b.zk, &b.nodes);
    b.proxy.reset();
    wait_until(WAIT, "every asynchronous call answered", || {
        answers.lock().unwrap().len() == 2 * b.nodes.len()
    });
    for r in answers.lock().unwrap().iter() {
        assert!(
            r.as_ref()
                .map_or_else(|e| e.is(ZkError::ConnectionLoss), |there| *there),
            "{r:?}"
        );
    }
    for w in b.writers {
        w.join().unwrap();
    }
    b.zk.wait_connected(WAIT).unwrap();
    b.zk.exists("/", false).unwrap();
    b.zk.close().unwrap();
}
