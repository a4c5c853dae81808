//! ZooKeeper's recipes against a real server, with Java participants running
//! ZooKeeper's own recipe jars: WriteLock, leader election, HBase's
//! ZKLeaderManager, revocable shared locks.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{Acl, WatchedEvent, ZooKeeper};
use zklock::recipes::write_lock::{LockListener, WriteLock, WriteLockStep};
use zklock::testing::{eventually, shared_server, unique_root};
use zklock::{RetryConfig, ZkError, ZooKeeperWatcher};

const JARS: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/zookeeper-recipes-lock.jar",
    "/usr/share/java/zookeeper-recipes-election.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];

fn init_log() {
    let _ = env_logger::builder().is_test(true).try_init();
}

fn watcher(servers: &str, timeout: Duration) -> ZooKeeperWatcher {
    init_log();
    ZooKeeperWatcher::builder(servers)
        .with_identifier("recipes-test")
        .with_session_timeout(timeout)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .connect()
        .expect("connect")
}

fn zkw() -> ZooKeeperWatcher {
    watcher(&shared_server().connect_string(), Duration::from_secs(10))
}

fn raw() -> ZooKeeper {
    ZooKeeper::connect(
        &shared_server().connect_string(),
        Duration::from_secs(10),
        |_e: WatchedEvent| {},
    )
    .expect("raw connect")
}

fn children(zk: &ZooKeeper, path: &str) -> Vec<String> {
    match zk.get_children(path, false) {
        Ok(mut c) => {
            c.sort();
            c
        }
        Err(e) if e.is(ZkError::NoNode) => Vec::new(),
        Err(e) => panic!("get_children {path}: {e}"),
    }
}

/// Compiles tests/java/*.java once (javac against Debian's jars); panics with
/// the fix when there is no JDK (no silent skip).
fn java_classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        for jar in JARS {
            assert!(
                Path::new(jar).exists(),
                "{jar} missing: run `make zookeeper`"
            );
        }
        let out = std::env::temp_dir().join(format!("zklock-recipes-java-{}", std::process::id()));
        fs::create_dir_all(&out).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
        let sources: Vec<PathBuf> = fs::read_dir(&src)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "java"))
            .collect();
        let status = Command::new("javac")
            .args(["-nowarn", "-d"])
            .arg(&out)
            .args(["-cp", &JARS.join(":")])
            .args(&sources)
            .status()
            .expect("javac not found: run `make zookeeper` (installs default-jdk-headless)");
        assert!(status.success(), "javac failed");
        out
    })
}

/// A running Java participant; its stdout lines arrive on `lines`; killed on
/// drop.
struct Java {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Java {
    fn start(class: &str, args: &[&str]) -> Java {
        let cp = format!("{}:{}", java_classes().display(), JARS.join(":"));
        let mut child = Command::new("java")
            .args([
                "-Xss512k",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                &cp,
                class,
            ])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("java");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Java { child, lines }
    }

    /// The next line starting with `prefix` within `timeout`; other lines are
    /// returned to the caller through `seen`.
    fn expect(&self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(e) => panic!("java: no {prefix:?} within {timeout:?}: {e}"),
            }
        }
    }

    #[allow(dead_code)] // used by the election tests
    fn send(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn kill9(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for Java {
    fn drop(&mut self) {
        self.kill9();
    }
}

// ---------------------------------------------------------------- WriteLock

/// The owner flag shared by Rust and Java contenders: a file created with
/// O_EXCL inside the lock and deleted before unlock. A second owner finds it.
fn enter(flag: &Path) {
    if let Err(e) = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(flag)
    {
        panic!("two owners at once: {flag:?} exists ({e})");
    }
}

fn leave(flag: &Path) {
    fs::remove_file(flag).expect("flag gone while owner");
}

#[test]
fn write_lock_rust_and_java_contenders_200_grants_never_two_owners() {
    let servers = shared_server().connect_string();
    let dir = unique_root("wl-mixed");
    let flag = std::env::temp_dir().join(format!("zklock-wl-flag-{}", std::process::id()));
    let _ = fs::remove_file(&flag);
    const RUST: usize = 5;
    let java_n: usize = std::env::var("WL_JAVA")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    const JAVA: usize = 3;
    const EACH: usize = 25; // 8 x 25 = 200 grants
    let flag_s = flag.display().to_string();
    let mut javas: Vec<Java> = (0..java_n)
        .map(|_| {
            Java::start(
                "WriteLockParticipant",
                &[&servers, &dir, &EACH.to_string(), &flag_s],
            )
        })
        .collect();
    for j in &javas {
        j.expect("READY", Duration::from_secs(60));
    }
    let started = Instant::now();
    let inside = Arc::new(AtomicBool::new(false));
    let grants = Arc::new(AtomicUsize::new(0));
    let acquired_events = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..RUST)
        .map(|_| {
            let (servers, dir, flag) = (servers.clone(), dir.clone(), flag.clone());
            let (inside, grants, events) =
                (inside.clone(), grants.clone(), acquired_events.clone());
            thread::spawn(move || {
                let zkw = watcher(&servers, Duration::from_secs(10));
                for _ in 0..EACH {
                    let e = events.clone();
                    let lock = WriteLock::new(&zkw, &dir, Acl::open_unsafe())
                        .unwrap()
                        .with_lock_listener(Listener(e));
                    if !lock.lock_blocking(Duration::from_secs(90)).unwrap() {
                        let zk = zkw.zookeeper();
                        let c = zk.get_children(&dir, false).unwrap_or_default();
                        let owners: Vec<_> = c
                            .iter()
                            .map(|n| {
                                let st = zk.exists(&format!("{dir}/{n}"), false).ok().flatten();
                                (n.clone(), st.map(|s| s.ephemeral_owner))
                            })
                            .collect();
                        panic!(
                            "a Rust contender ({}) waited 90 s: {owners:?}",
                            lock.id().unwrap_or_default()
                        );
                    }
                    assert!(lock.is_owner());
                    assert!(!inside.swap(true, Ordering::SeqCst), "two Rust owners");
                    enter(&flag);
                    thread::sleep(Duration::from_millis(2));
                    leave(&flag);
                    inside.store(false, Ordering::SeqCst);
                    lock.unlock().unwrap();
                    grants.fetch_add(1, Ordering::SeqCst);
                }
                zkw.close().unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a Rust contender failed");
    }
    let mut java_grants = 0;
    for j in &mut javas {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let line = j
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("a Java contender hung");
            assert!(!line.starts_with("VIOLATION"), "{line}");
            assert!(!line.starts_with("HANG"), "{line}");
            if line.starts_with("GRANT") {
                java_grants += 1;
            }
            if line == "DONE" {
                break;
            }
        }
    }
    let total = grants.load(Ordering::SeqCst) + java_grants;
    eprintln!(
        "write lock: {} Rust + {java_grants} Java grants = {total} in {:?}",
        grants.load(Ordering::SeqCst),
        started.elapsed()
    );
    assert_eq!(total, (RUST + java_n) * EACH);
    let _ = JAVA;
    assert_eq!(acquired_events.load(Ordering::SeqCst), RUST * EACH);
    let zk = raw();
    assert!(
        eventually(Duration::from_secs(10), || children(&zk, &dir).is_empty()),
        "orphans: {:?}",
        children(&zk, &dir)
    );
}

struct Listener(Arc<AtomicUsize>);

impl LockListener for Listener {
    fn lock_acquired(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn lock_released(&self) {}
}

#[test]
fn write_lock_predecessor_gone_before_the_watch_is_rechecked() {
    // The race Java's recipe loses, forced: the predecessor is deleted right
    // before the waiter's watch is set. The waiter must list again and own the
    // lock, not wait for a watch that never fires.
    let (a, b) = (zkw(), zkw());
    let dir = unique_root("wl-race");
    let first = WriteLock::new(&a, &dir, Acl::open_unsafe()).unwrap();
    assert!(first.lock().unwrap());
    let victim = first.id().unwrap();
    let deleter = raw();
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let second = WriteLock::new(&b, &dir, Acl::open_unsafe())
        .unwrap()
        .with_step_hook(move |step, path| {
            if step == WriteLockStep::Watching && path == victim {
                deleter.delete(path, None).unwrap();
                f.fetch_add(1, Ordering::SeqCst);
            }
        });
    let t = Instant::now();
    assert!(second.lock().unwrap(), "the recheck found the lock free");
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert!(second.is_owner());
    assert!(t.elapsed() < Duration::from_secs(5));
    second.unlock().unwrap();
    // The first instance learns its node is gone.
    assert!(eventually(Duration::from_secs(5), || !first.is_owner()));
    drop(first);
}

#[test]
fn write_lock_wakes_the_listener_and_close_while_waiting_leaves_no_node() {
    let (a, b, c) = (zkw(), zkw(), zkw());
    let dir = unique_root("wl-close");
    let owner = WriteLock::new(&a, &dir, Acl::open_unsafe()).unwrap();
    assert!(owner.lock().unwrap());
    let acquired = Arc::new(AtomicUsize::new(0));
    let waiter = WriteLock::new(&b, &dir, Acl::open_unsafe())
        .unwrap()
        .with_lock_listener(Listener(acquired.clone()));
    assert!(!waiter.lock().unwrap(), "not owner yet");
    let quitter = WriteLock::new(&c, &dir, Acl::open_unsafe()).unwrap();
    assert!(!quitter.lock().unwrap());
    let zk = raw();
    assert_eq!(children(&zk, &dir).len(), 3);
    // close() while waiting: its node goes, nobody else moves.
    quitter.close().unwrap();
    assert_eq!(children(&zk, &dir).len(), 2);
    assert!(quitter.id().is_none());
    // A timed-out blocking lock leaves no node either.
    let timed = WriteLock::new(&c, &dir, Acl::open_unsafe()).unwrap();
    let t = Instant::now();
    assert!(!timed.lock_blocking(Duration::from_millis(300)).unwrap());
    assert!(t.elapsed() < Duration::from_secs(3));
    assert_eq!(children(&zk, &dir).len(), 2);
    // The owner lets go: the waiter's listener hears lock_acquired (event
    // thread, no call to lock()).
    owner.unlock().unwrap();
    assert!(eventually(Duration::from_secs(5), || acquired
        .load(Ordering::SeqCst)
        == 1));
    assert!(waiter.is_owner());
    // A lock_blocking ended by close() from another thread.
    let blocked = Arc::new(WriteLock::new(&c, &dir, Acl::open_unsafe()).unwrap());
    let b2 = blocked.clone();
    let h = thread::spawn(move || b2.lock_blocking(Duration::from_secs(30)));
    assert!(eventually(Duration::from_secs(5), || children(&zk, &dir)
        .len()
        == 2));
    blocked.close().unwrap();
    assert!(h.join().unwrap().is_err());
    assert_eq!(children(&zk, &dir).len(), 1);
    drop(waiter); // dropped while owner: removed in the background
    assert!(eventually(Duration::from_secs(5), || children(&zk, &dir).is_empty()));
}

#[test]
fn write_lock_session_expiry_fails_a_waiter() {
    let (a, b) = (zkw(), zkw());
    let dir = unique_root("wl-expiry");
    let owner = WriteLock::new(&a, &dir, Acl::open_unsafe()).unwrap();
    assert!(owner.lock().unwrap());
    let waiter = Arc::new(WriteLock::new(&b, &dir, Acl::open_unsafe()).unwrap());
    let w = waiter.clone();
    let h = thread::spawn(move || w.lock_blocking(Duration::from_secs(60)));
    let zk = raw();
    assert!(eventually(Duration::from_secs(5), || children(&zk, &dir)
        .len()
        == 2));
    let t = Instant::now();
    b.close().unwrap();
    assert!(h.join().unwrap().is_err());
    assert!(t.elapsed() < Duration::from_secs(3));
    assert!(eventually(Duration::from_secs(5), || children(&zk, &dir)
        .len()
        == 1));
    owner.unlock().unwrap();
}
