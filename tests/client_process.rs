//! Process-wide measurements of `zklock::client`: CPU and logging against a
//! refused port (issue 3, behaviour 6), threads per client and no thread left
//! behind (behaviour 8). Their own binary, run one at a time, so nothing else
//! in the process uses CPU or threads.

mod common;

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use common::client::*;
use zklock::client::{Acl, CreateMode, KeeperState, WatchedEvent, ZooKeeper};
use zklock::testing::{shared_server, unique_root, FaultProxy};
use zklock::ZkError;

/// One test at a time: they measure the whole process.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts the client's log records by level.
struct Counter {
    by_level: [AtomicUsize; 6],
    attempts: AtomicUsize,
}

impl log::Log for Counter {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("zklock")
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            self.by_level[r.level() as usize].fetch_add(1, Ordering::SeqCst);
            if r.args().to_string().starts_with("connect to ") {
                self.attempts.fetch_add(1, Ordering::SeqCst);
            }
            if r.level() <= log::Level::Info {
                eprintln!("{}: {}", r.level(), r.args());
            }
        }
    }
    fn flush(&self) {}
}

fn counter() -> &'static Counter {
    static C: OnceLock<&'static Counter> = OnceLock::new();
    C.get_or_init(|| {
        let c: &'static Counter = Box::leak(Box::new(Counter {
            by_level: Default::default(),
            attempts: AtomicUsize::new(0),
        }));
        log::set_logger(c).unwrap();
        log::set_max_level(log::LevelFilter::Trace);
        c
    })
}

fn snapshot(c: &Counter) -> [usize; 6] {
    let mut out = [0; 6];
    for (o, a) in out.iter_mut().zip(c.by_level.iter()) {
        *o = a.load(Ordering::SeqCst);
    }
    out
}

#[test]
fn a_refused_port_costs_little_cpu_and_logs_at_most_debug_per_attempt() {
    let _serial = serial();
    let log = counter();
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }; // closed: connections are refused
    let addr = format!("127.0.0.1:{port}");

    let before_logs = snapshot(log);
    let attempts_before = log.attempts.load(Ordering::SeqCst);
    let events = Events::new();
    let cpu_before = process_cpu();
    let t = Instant::now();
    let zk = ZooKeeper::builder(&addr)
        .with_session_timeout(Duration::from_secs(2))
        .start(events.watcher())
        .unwrap();
    thread::sleep(Duration::from_secs(5)); // deliberate: the measured interval
    let cpu = process_cpu() - cpu_before;
    let wall = t.elapsed();
    let attempts = log.attempts.load(Ordering::SeqCst) - attempts_before;
    let after_logs = snapshot(log);
    zk.close().unwrap();
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    eprintln!(
        "refused port: {cpu:?} CPU in {wall:?} ({:.2}% of a core), {attempts} attempts",
        share * 100.0
    );
    assert!(share < 0.05, "{:.1}% of a core", share * 100.0);
    assert!(
        (4..=40).contains(&attempts),
        "{attempts} connect attempts in 5 s"
    );
    // Levels: Error = 1, Warn = 2, Info = 3.
    for level in 1..=3 {
        assert_eq!(
            after_logs[level], before_logs[level],
            "a record above debug (level {level})"
        );
    }
    let debug = after_logs[4] - before_logs[4];
    assert!(
        debug <= 2 * attempts + 4,
        "{debug} debug records for {attempts} attempts"
    );
    assert_eq!(events.states(), [KeeperState::Closed]);
}

fn threads() -> usize {
    thread_names().len()
}

#[test]
fn an_idle_client_costs_two_threads_and_none_is_left_behind() {
    let _serial = serial();
    counter();
    count_client_thread_panics();
    let servers = shared_server().connect_string();
    // Warm up (lazy statics, the server).
    let (zk, _) = connect(&servers, Duration::from_secs(10));
    zk.close().unwrap();
    // A joined thread may show in /proc a moment longer (the kernel wakes the
    // joiner before it reaps the thread): count once they are gone.
    wait_until(
        Duration::from_secs(5),
        "the warm-up client's threads are gone",
        || threads_named("zklock-") == 0,
    );
    let base = threads();

    let (zk, _) = connect(&servers, Duration::from_secs(10));
    assert_eq!(threads(), base + 2, "{:?}", thread_names());
    assert_eq!(threads_named("zklock-"), 2);
    let root = unique_root("threads");
    mkdirs(&zk, &root);

    // Every way a client ends.
    // 1. close(), with watches set.
    let (a, _) = connect(&servers, Duration::from_secs(10));
    a.get_children(&root, true).unwrap();
    a.exists(&format!("{root}/x"), true).unwrap();
    a.close().unwrap();
    // 2. Dropped, with clones used on other threads.
    let (b, _) = connect(&servers, Duration::from_secs(10));
    let b2 = b.clone();
    thread::spawn(move || b2.exists("/", false).unwrap())
        .join()
        .unwrap();
    drop(b);
    // 3. Closed from its own watcher.
    let (c, _) = connect(&servers, Duration::from_secs(10));
    let handle = Mutex::new(Some(c.clone()));
    c.exists_w(&format!("{root}/y"), move |_e: WatchedEvent| {
        if let Some(c) = handle.lock().unwrap().take() {
            c.close().unwrap();
        }
    })
    .unwrap();
    zk.create(
        &format!("{root}/y"),
        b"",
        Acl::open_unsafe(),
        CreateMode::Ephemeral,
    )
    .unwrap();
    wait_until(Duration::from_secs(5), "closed by its watcher", || {
        c.state() == zklock::client::State::Closed
    });
    drop(c);
    // 4. Never connected (refused).
    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let r = ZooKeeper::builder(&refused)
        .with_session_timeout(Duration::from_secs(1))
        .connect(|_e: WatchedEvent| {});
    assert_code(r, ZkError::ConnectionLoss);
    // 5. Auth failed.
    let (d, _) = connect(&servers, Duration::from_secs(10));
    assert_code(d.add_auth("no-such-scheme", b""), ZkError::AuthFailed);
    drop(d);
    // 6. Expired (behind a proxy, dropped before counting).
    {
        let proxy = FaultProxy::start(&servers).unwrap();
        let (e, ev) = connect(&proxy.connect_string(), Duration::from_millis(800));
        proxy.stall();
        ev.wait_state(KeeperState::Disconnected, 1, Duration::from_secs(5));
        let id = e.session_id();
        wait_until(Duration::from_secs(10), "expired on the server", || {
            !dump_has_session(&servers, id)
        });
        proxy.reset();
        ev.wait_state(KeeperState::Expired, 1, Duration::from_secs(10));
        drop(e);
    }
    // 7. A handle whose watcher keeps a clone: an explicit close ends it.
    let (f, _) = connect(&servers, Duration::from_secs(10));
    let f2 = Arc::new(Mutex::new(Some(f.clone())));
    let keep = f2.clone();
    f.get_data_w("/", move |_e: WatchedEvent| {
        let _ = keep.lock().unwrap().as_ref().map(|z| z.state());
    })
    .unwrap();
    f.close().unwrap();
    f2.lock().unwrap().take();
    drop(f);

    rmr(&zk, &root);
    zk.close().unwrap();
    drop(zk);
    wait_until(Duration::from_secs(5), "every client thread ended", || {
        threads() == base
    });
    assert_eq!(threads_named("zklock-"), 0, "{:?}", thread_names());
    assert_eq!(client_thread_panics(), 0);
}
