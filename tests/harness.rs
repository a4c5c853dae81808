//! Self-tests of `zklock::testing` against real Apache ZooKeeper servers.
//!
//! No ZooKeeper client exists at this layer, so the tests speak four-letter words and
//! a few raw protocol messages (connect, create, getData, close) over TCP.

use std::fs;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use zklock::testing::{
    four_letter, parse_mntr, shared_server, test_servers, wait_until, FaultProxy, ProxyMode,
    ZkEnsemble, ZkServer, FORCE_SYNC_ENV, SERVERS_ENV,
};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Whether a process with this PID exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 1..].trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Sends `ruok` over `stream` and reads the reply to EOF, with a read timeout.
fn ruok_over(mut stream: TcpStream, timeout: Duration) -> io::Result<String> {
    stream.set_read_timeout(Some(timeout))?;
    stream.write_all(b"ruok")?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Threads of this process whose name starts with `prefix` (Linux: /proc/self/task).
fn threads_named(prefix: &str) -> usize {
    fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// A minimal raw ZooKeeper session: enough to prove that data and sessions survive a
/// restart and that a quorum accepts writes.
struct RawSession {
    stream: TcpStream,
    session_id: i64,
    password: Vec<u8>,
    timeout_ms: i32,
    xid: i32,
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        head
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().unwrap())
    }
    fn buffer(&mut self) -> Vec<u8> {
        let n = self.i32();
        if n < 0 {
            return Vec::new();
        }
        self.take(n as usize).to_vec()
    }
}

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_buffer(out: &mut Vec<u8>, b: &[u8]) {
    put_i32(out, b.len() as i32);
    out.extend_from_slice(b);
}

fn write_frame(stream: &mut TcpStream, body: &[u8]) -> io::Result<()> {
    let mut frame = Vec::with_capacity(body.len() + 4);
    put_buffer(&mut frame, body);
    stream.write_all(&frame)
}

fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body)?;
    Ok(body)
}

impl RawSession {
    /// Opens a session (or resumes `resume = (id, password)`). `Ok(None)` when the
    /// server refuses to resume it (expired).
    fn connect(
        addr: &str,
        timeout_ms: i32,
        resume: Option<(i64, &[u8])>,
    ) -> io::Result<Option<RawSession>> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let (id, password) = resume.unwrap_or((0, &[0u8; 16]));
        let mut req = Vec::new();
        put_i32(&mut req, 0); // protocolVersion
        put_i64(&mut req, 0); // lastZxidSeen
        put_i32(&mut req, timeout_ms);
        put_i64(&mut req, id);
        put_buffer(&mut req, password);
        req.push(0); // readOnly = false
        write_frame(&mut stream, &req)?;
        let reply = read_frame(&mut stream)?;
        let mut r = Reader(&reply);
        let _protocol = r.i32();
        let timeout_ms = r.i32();
        let session_id = r.i64();
        let password = r.buffer();
        if timeout_ms <= 0 {
            return Ok(None);
        }
        Ok(Some(RawSession {
            stream,
            session_id,
            password,
            timeout_ms,
            xid: 0,
        }))
    }

    /// Sends one request, returns (err, body) of its reply.
    fn call(&mut self, op: i32, body: &[u8]) -> io::Result<(i32, Vec<u8>)> {
        self.xid += 1;
        let mut req = Vec::new();
        put_i32(&mut req, self.xid);
        put_i32(&mut req, op);
        req.extend_from_slice(body);
        write_frame(&mut self.stream, &req)?;
        loop {
            let reply = read_frame(&mut self.stream)?;
            let mut r = Reader(&reply);
            let xid = r.i32();
            let _zxid = r.i64();
            let err = r.i32();
            if xid == self.xid {
                return Ok((err, r.0.to_vec()));
            }
        }
    }

    /// Creates a persistent node with `data`, open ACL; returns the error code.
    fn create(&mut self, path: &str, data: &[u8]) -> io::Result<i32> {
        let mut body = Vec::new();
        put_buffer(&mut body, path.as_bytes());
        put_buffer(&mut body, data);
        put_i32(&mut body, 1); // one ACL
        put_i32(&mut body, 31); // Perms.ALL
        put_buffer(&mut body, b"world");
        put_buffer(&mut body, b"anyone");
        put_i32(&mut body, 0); // PERSISTENT
        Ok(self.call(1, &body)?.0)
    }

    /// Reads a node's data; `Err` carries a non-zero code as `Other`.
    fn get_data(&mut self, path: &str) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        put_buffer(&mut body, path.as_bytes());
        body.push(0); // no watch
        let (err, reply) = self.call(4, &body)?;
        if err != 0 {
            return Err(io::Error::other(format!("getData {path}: error {err}")));
        }
        Ok(Reader(&reply).buffer())
    }

    fn delete(&mut self, path: &str) -> io::Result<i32> {
        let mut body = Vec::new();
        put_buffer(&mut body, path.as_bytes());
        put_i32(&mut body, -1);
        Ok(self.call(2, &body)?.0)
    }

    fn close(mut self) -> io::Result<()> {
        self.call(-11, &[]).map(drop)
    }
}

// ---------------------------------------------------------------------------
// ZkServer
// ---------------------------------------------------------------------------

#[test]
fn server_starts_answers_and_stops_without_leftovers() {
    let started = Instant::now();
    let mut server = ZkServer::start().unwrap();
    eprintln!("ZkServer::start took {:?}", started.elapsed());
    let pid = server.pid().unwrap();
    let dir = server.dir().to_path_buf();
    assert!(alive(pid));
    assert!(server.is_running());
    assert_eq!(
        server.connect_string(),
        format!("127.0.0.1:{}", server.port())
    );
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    assert!(server
        .four_letter("srvr")
        .unwrap()
        .contains("Mode: standalone"));
    let conf = server.four_letter("conf").unwrap();
    assert!(conf.contains("tickTime=200"), "{conf}");
    assert!(conf.contains("minSessionTimeout=400"), "{conf}");
    assert!(conf.contains("maxClientCnxns=0"), "{conf}");
    let mntr = server.mntr().unwrap();
    assert!(mntr.contains_key("zk_znode_count"), "{mntr:?}");
    // Every four-letter word is whitelisted.
    for word in ["cons", "wchc", "wchs", "dump", "stat", "envi"] {
        let reply = server.four_letter(word).unwrap();
        assert!(!reply.contains("not in the whitelist"), "{word}: {reply}");
    }

    server.stop().unwrap();
    assert!(!alive(pid), "pid {pid} still runs after stop()");
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    assert!(dir.exists(), "stop() keeps the data for restart");
    server.stop().unwrap(); // idempotent
    assert!(four_letter(&server.connect_string(), "ruok").is_err());

    drop(server);
    assert!(!dir.exists(), "drop removes {}", dir.display());
}

#[test]
fn server_drop_kills_the_jvm_and_removes_its_directory() {
    let server = ZkServer::start().unwrap();
    let pid = server.pid().unwrap();
    let dir = server.dir().to_path_buf();
    let log = server.log_path();
    assert!(log.starts_with(&dir) && log.exists());
    drop(server);
    assert!(!alive(pid), "pid {pid} still runs after drop");
    assert!(!dir.exists(), "{} still exists after drop", dir.display());
}

#[test]
fn server_restart_keeps_port_data_and_sessions() {
    let mut server = ZkServer::start().unwrap();
    let addr = server.connect_string();
    let port = server.port();
    let old_pid = server.pid().unwrap();

    let mut session = RawSession::connect(&addr, 20_000, None)
        .unwrap()
        .expect("new session");
    assert_eq!(session.timeout_ms, 20_000);
    assert_eq!(session.create("/restart", b"kept").unwrap(), 0);
    let (id, password) = (session.session_id, session.password.clone());
    let nodes = |s: &ZkServer| s.mntr().unwrap()["zk_znode_count"].clone();
    let before = nodes(&server);

    let started = Instant::now();
    server.restart().unwrap();
    eprintln!("ZkServer::restart took {:?}", started.elapsed());
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), Some(old_pid));
    assert!(!alive(old_pid));
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    assert_eq!(nodes(&server), before);

    // The session outlives the restart: resuming it with id + password works.
    let mut resumed = RawSession::connect(&addr, 20_000, Some((id, &password)))
        .unwrap()
        .expect("the session survives a restart within its timeout");
    assert_eq!(resumed.session_id, id);
    assert_eq!(resumed.get_data("/restart").unwrap(), b"kept");
    resumed.close().unwrap();

    // A bogus session is refused: the check above can fail.
    let refused = RawSession::connect(&addr, 20_000, Some((id ^ 0x5555, &password))).unwrap();
    assert!(refused.is_none(), "an unknown session must not be resumed");
}

#[test]
fn server_pause_freezes_and_resume_thaws() {
    let mut server = ZkServer::start().unwrap();
    let addr = server.connect_string();
    server.pause().unwrap();
    let frozen = ruok_over(
        TcpStream::connect(&addr).unwrap(),
        Duration::from_millis(700),
    );
    assert!(
        frozen.as_ref().is_err_and(is_timeout),
        "a paused server answered: {frozen:?}"
    );
    server.resume().unwrap();
    assert_eq!(
        ruok_over(TcpStream::connect(&addr).unwrap(), Duration::from_secs(5)).unwrap(),
        "imok"
    );
}

// ---------------------------------------------------------------------------
// The shared server and the watchdog
// ---------------------------------------------------------------------------

#[test]
fn shared_server_is_started_once() {
    let a = shared_server();
    let b = shared_server();
    assert!(std::ptr::eq(a, b));
    assert_eq!(a.four_letter("ruok").unwrap(), "imok");
    match std::env::var(SERVERS_ENV) {
        Ok(s) if !s.trim().is_empty() => assert_eq!(test_servers(), s.trim()),
        _ => assert_eq!(test_servers(), a.connect_string()),
    }
    let mntr = parse_mntr(&a.four_letter("mntr").unwrap());
    assert_eq!(mntr["zk_server_state"], "standalone");
}

/// The fsync calls a server has timed (`zk_cnt_fsynctime`: ZooKeeper times
/// its log's fsync only when it makes one) after a write.
fn fsyncs_after_a_write(server: &ZkServer) -> u64 {
    let mut session = RawSession::connect(&server.connect_string(), 10_000, None)
        .unwrap()
        .expect("a session");
    assert_eq!(session.create("/fsync-probe", b"x").unwrap(), 0);
    session.close().unwrap();
    parse_mntr(&server.four_letter("mntr").unwrap())["zk_cnt_fsynctime"]
        .parse()
        .unwrap()
}

/// Runs in a child process (see `force_sync_env_makes_the_servers_fsync`):
/// prints the fsyncs of a server started under the child's environment.
#[test]
#[ignore = "helper: runs only as a child process of force_sync_env_makes_the_servers_fsync"]
fn force_sync_child() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    let server = ZkServer::start().unwrap();
    println!("FSYNCS {}", fsyncs_after_a_write(&server));
}

/// `ZK_TEST_FORCE_SYNC=yes` starts servers that fsync their log before
/// answering a write (the benchmarks' fsync figures); by default they do not.
#[test]
fn force_sync_env_makes_the_servers_fsync() {
    let fsyncs = |force: Option<&str>| -> u64 {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--ignored", "--exact", "force_sync_child", "--nocapture"])
            .env(CHILD_ENV, "fsync")
            .env_remove(FORCE_SYNC_ENV)
            .stdin(Stdio::null());
        if let Some(v) = force {
            cmd.env(FORCE_SYNC_ENV, v);
        }
        let output = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("FSYNCS "))
            .unwrap_or_else(|| {
                panic!(
                    "the child printed no count: {stdout}\n{}",
                    String::from_utf8_lossy(&output.stderr)
                )
            })
            .parse()
            .unwrap()
    };
    assert_eq!(fsyncs(None), 0, "no fsync by default");
    assert!(fsyncs(Some("yes")) > 0, "{FORCE_SYNC_ENV}=yes: fsync");
}

/// Environment variable that turns `watchdog_child` into a real test body.
const CHILD_ENV: &str = "ZKLOCK_HARNESS_CHILD";

/// Runs in a child process (see `shared_server_dies_with_the_process`): starts the
/// shared server, prints its PID and directory, then ends as `$ZKLOCK_HARNESS_CHILD`
/// says — returning (the static is never dropped), aborting, or panicking.
#[test]
#[ignore = "helper: runs only as a child process of the watchdog tests"]
fn watchdog_child() {
    let Ok(how) = std::env::var(CHILD_ENV) else {
        return;
    };
    let server = shared_server();
    println!(
        "CHILD pid={} dir={}",
        server.pid().unwrap(),
        server.dir().display()
    );
    io::stdout().flush().unwrap();
    match how.as_str() {
        "abort" => std::process::abort(),
        "panic" => panic!("deliberate panic in the watchdog child"),
        "caught" => {
            // A panic the test expects (a panicking watcher on the client's
            // event thread, a worker thread joined): the test passes.
            for name in [None, Some("zklock-event")] {
                let mut b = thread::Builder::new();
                if let Some(n) = name {
                    b = b.name(n.to_string());
                }
                let r = b.spawn(|| panic!("deliberate, caught")).unwrap().join();
                assert!(r.is_err());
            }
        }
        _ => {}
    }
}

/// Runs `watchdog_child` in a child process; returns the shared server's PID and
/// directory it printed, once the child has exited.
fn run_child(how: &str) -> (u32, PathBuf) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "watchdog_child", "--nocapture"])
        .env(CHILD_ENV, how)
        .env_remove(SERVERS_ENV)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CHILD "))
        .unwrap_or_else(|| {
            panic!(
                "child printed no PID: {stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let (pid, dir) = line.split_once(' ').unwrap();
    let pid = pid.strip_prefix("pid=").unwrap().parse().unwrap();
    let dir = PathBuf::from(dir.strip_prefix("dir=").unwrap());
    (pid, dir)
}

fn assert_jvm_gone(pid: u32) {
    wait_until(
        Duration::from_secs(10),
        "the JVM dies with its test process",
        || !alive(pid),
    );
}

#[test]
fn shared_server_dies_when_the_test_process_exits() {
    let (pid, dir) = run_child("exit");
    assert_jvm_gone(pid);
    wait_until(Duration::from_secs(10), "the directory is removed", || {
        !dir.exists()
    });
}

#[test]
fn shared_server_dies_when_the_test_process_aborts() {
    let (pid, dir) = run_child("abort");
    assert_jvm_gone(pid);
    wait_until(Duration::from_secs(10), "the directory is removed", || {
        !dir.exists()
    });
}

#[test]
fn shared_server_dir_is_removed_after_a_caught_panic() {
    let (pid, dir) = run_child("caught");
    assert_jvm_gone(pid);
    wait_until(Duration::from_secs(10), "the directory is removed", || {
        !dir.exists()
    });
}

#[test]
fn shared_server_keeps_its_log_when_a_test_panics() {
    let (pid, dir) = run_child("panic");
    assert_jvm_gone(pid);
    // The watchdog is done once the JVM is reaped; give it a moment (deliberate:
    // a removal would take that long), then the directory must still be there,
    // log included.
    thread::sleep(Duration::from_millis(300));
    assert!(
        dir.join("zookeeper.log").exists(),
        "a panic must keep {}",
        dir.display()
    );
    fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------
// ZkEnsemble
// ---------------------------------------------------------------------------

#[test]
fn ensemble_keeps_serving_after_the_leader_is_killed() {
    let started = Instant::now();
    let mut ensemble = ZkEnsemble::start().unwrap();
    eprintln!("ZkEnsemble::start took {:?}", started.elapsed());
    assert_eq!(ensemble.size(), 3);
    assert_eq!(ensemble.connect_string().split(',').count(), 3);
    let leader = ensemble.leader().expect("a started ensemble has a leader");
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    for &i in &followers {
        assert_eq!(ensemble.mode(i).as_deref(), Some("follower"));
    }
    let mut session = RawSession::connect(&ensemble.address(followers[0]), 20_000, None)
        .unwrap()
        .unwrap();
    assert_eq!(session.create("/before", b"1").unwrap(), 0);
    session.close().unwrap();

    let leader_pid = ensemble.pid(leader).unwrap();
    let killed = Instant::now();
    ensemble.kill(leader).unwrap();
    assert!(!alive(leader_pid));
    assert!(!ensemble.is_running(leader));
    assert!(ensemble.four_letter(leader, "ruok").is_err());
    ensemble.wait_for_quorum(Duration::from_secs(30)).unwrap();
    eprintln!("new leader elected in {:?}", killed.elapsed());
    let new_leader = ensemble.leader().expect("a new leader");
    assert_ne!(new_leader, leader);
    for &i in &followers {
        let srvr = ensemble.four_letter(i, "srvr").unwrap();
        assert!(
            srvr.contains("Mode: leader") || srvr.contains("Mode: follower"),
            "{srvr}"
        );
    }
    // The remaining two accept writes and kept the data.
    let mut session = RawSession::connect(&ensemble.address(followers[1]), 20_000, None)
        .unwrap()
        .unwrap();
    assert_eq!(session.get_data("/before").unwrap(), b"1");
    assert_eq!(session.create("/after", b"2").unwrap(), 0);
    session.close().unwrap();

    ensemble.restart(leader).unwrap();
    assert!(ensemble.is_running(leader));
    ensemble.wait_for_quorum(Duration::from_secs(30)).unwrap();
    assert_eq!(ensemble.mode(leader).as_deref(), Some("follower"));
    let mut session = RawSession::connect(&ensemble.address(leader), 20_000, None)
        .unwrap()
        .unwrap();
    assert_eq!(session.get_data("/after").unwrap(), b"2");
    session.close().unwrap();

    // Without a majority there is no quorum: wait_for_quorum can fail.
    ensemble.kill(followers[0]).unwrap();
    ensemble.kill(followers[1]).unwrap();
    let e = ensemble
        .wait_for_quorum(Duration::from_millis(500))
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut);

    let pids: Vec<u32> = (0..3).filter_map(|i| ensemble.pid(i)).collect();
    let dir = ensemble.dir().to_path_buf();
    drop(ensemble);
    for pid in pids {
        assert!(!alive(pid));
    }
    assert!(!dir.exists());
}

/// A member restarted while another process holds its election port: the
/// JVM answers `ruok` but its election listener gives up after three tries
/// and the JVM exits a moment later (an ensemble that looked whole, then
/// lost its quorum at the next kill: a SASL failover test under load).
/// `restart` returns only once the member holds its election port, starting
/// it again when the listener gave up. Forced: the port is held until the
/// member's log says its listener gave up. Before, `restart` returned at
/// `ruok` and nobody held the port afterwards.
#[test]
fn ensemble_restart_waits_for_the_election_port() {
    let mut ensemble = ZkEnsemble::start().unwrap();
    let victim = (0..3)
        .find(|&i| ensemble.mode(i).as_deref() == Some("follower"))
        .unwrap();
    let (host, election_port) = election_addr(&ensemble, victim);
    ensemble.kill(victim).unwrap();
    let log = ensemble.log_path(victim).unwrap();
    let offset = fs::metadata(&log).unwrap().len() as usize;
    let squatter = std::net::TcpListener::bind((host.as_str(), election_port)).unwrap();
    let holder = thread::spawn(move || {
        wait_until(
            Duration::from_secs(60),
            "the election listener gave up",
            || {
                fs::read(&log).is_ok_and(|b| {
                    String::from_utf8_lossy(&b[offset.min(b.len())..])
                        .contains("Leaving listener thread")
                })
            },
        );
        drop(squatter);
    });
    ensemble.restart(victim).unwrap();
    holder.join().unwrap();
    let taken = std::net::TcpListener::bind((host.as_str(), election_port));
    assert!(
        taken.is_err(),
        "the restarted member does not hold its election port {election_port}"
    );
    ensemble.wait_for_quorum(Duration::from_secs(60)).unwrap();
    assert!(ensemble.is_running(victim));
    assert_eq!(ensemble.mode(victim).as_deref(), Some("follower"));
}

/// Two ensembles live at once (as `make test`'s lanes start them, or two
/// tests of one binary) run with disjoint server ids: a stopped member's
/// ports taken by the other ensemble's member lead its peers to a server
/// whose id none of them has, whose votes leader election ignores
/// (issue 46: `tests/read_only.rs` once saw a second leader while three
/// ensembles ran). Each server runs with the id `server_id` names (its
/// `conf`), a member added later gets a free one too, and its `server.N`
/// spec names it. Before, every ensemble used `1..=n`.
#[test]
fn live_ensembles_have_disjoint_server_ids() {
    let first = ZkEnsemble::start().unwrap();
    let mut second = ZkEnsemble::start_reconfigurable().unwrap();
    let added = second.add_member().unwrap();
    let ids = |e: &ZkEnsemble| (0..e.size()).map(|i| e.server_id(i)).collect::<Vec<u64>>();
    let (a, b) = (ids(&first), ids(&second));
    assert!(
        a.iter().all(|id| !b.contains(id)),
        "the ensembles share server ids: {a:?} and {b:?}"
    );
    for (e, ids) in [(&first, &a), (&second, &b)] {
        // The started members' ascend (an added one's is any free id).
        assert!(ids[..3].windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        assert!(ids.iter().all(|id| (1..=127).contains(id)), "{ids:?}");
        for (i, id) in ids.iter().enumerate() {
            let conf = e.four_letter(i, "conf").unwrap();
            assert!(
                conf.lines().any(|l| l.trim() == format!("serverId={id}")),
                "member {i} does not run as server {id}:\n{conf}"
            );
            // Its election port on 127.0.0.1, where it listens (reserved
            // machine-wide: no other ensemble's server can bind it).
            let (host, port) = election_addr(e, i);
            assert_eq!(host, "127.0.0.1");
            if e.is_running(i) {
                TcpStream::connect((host.as_str(), port)).unwrap();
            }
        }
    }
    assert!(
        second
            .server_spec(added)
            .starts_with(&format!("server.{}=", b[added])),
        "{}",
        second.server_spec(added)
    );
}

/// The cross-talk itself (issue 46), forced: ensemble A's leader `s` loses
/// its two followers, whose election addresses are then bound by forwarders
/// to the election addresses of ensemble B's members of the same index (as
/// when B's members took A's freed ports, before every port was reserved
/// for its ensemble's life), B's leader among them. `s`, looking
/// for a quorum, reaches B's servers; were their ids A's (every ensemble
/// used `1..=3`), B's leader and follower would be a quorum of A's voters
/// agreeing on a leader, and `s` would follow it (`QuorumPeer - FOLLOWING`
/// in its log) with no member of its own ensemble alive. With ids unique
/// on the machine they are non-voters there, whose votes leader election
/// ignores: `s` keeps looking. The forwarders must carry connections (else
/// the test proves nothing). Static configurations: a reconfigurable
/// ensemble's looking member would still adopt B's configuration were it
/// newer, which only the ports' reservation keeps out (see `ZkEnsemble`).
#[test]
fn a_stopped_members_port_taken_by_another_ensemble_does_not_vote() {
    let mut a = ZkEnsemble::start().unwrap();
    let mut b = ZkEnsemble::start().unwrap();
    let s = a.leader().expect("A has a leader");
    // B's leader must be at another index than `s`: one of the forwarded.
    if b.leader() == Some(s) {
        b.kill(s).unwrap();
        b.wait_for_quorum(Duration::from_secs(60)).unwrap();
        b.restart(s).unwrap();
        b.wait_for_quorum(Duration::from_secs(60)).unwrap();
    }
    let b_leader = b.leader().expect("B has a leader");
    assert_ne!(b_leader, s);
    let log = a.log_path(s).unwrap();
    let log_len = || fs::metadata(&log).map_or(0, |m| m.len() as usize);
    let since = |offset: usize| {
        fs::read(&log)
            .map(|b| String::from_utf8_lossy(&b[offset.min(b.len())..]).into_owned())
            .unwrap_or_default()
    };
    let state_line = |text: &str, state: &str| {
        text.lines()
            .any(|l| l.trim_end().ends_with(&format!("QuorumPeer - {state}")))
    };
    let before_kills = log_len();
    let others: Vec<usize> = (0..3).filter(|&i| i != s).collect();
    for &i in &others {
        a.kill(i).unwrap();
    }
    // `s` gives up leading without its followers.
    wait_until(Duration::from_secs(60), "A's leader looks again", || {
        state_line(&since(before_kills), "LOOKING")
    });
    let looking = log_len();
    let forwarders: Vec<Forwarder> = others
        .iter()
        .map(|&i| Forwarder::start(election_addr(&a, i), election_addr(&b, i)))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let text = since(looking);
        assert!(
            !state_line(&text, "FOLLOWING") && !state_line(&text, "LEADING"),
            "A's member {s} (id {}), alone in A, left LOOKING through B's servers \
             (A's ids {:?}, B's {:?}, B's leader {b_leader}):\n{text}",
            a.server_id(s),
            (0..3).map(|i| a.server_id(i)).collect::<Vec<_>>(),
            (0..3).map(|i| b.server_id(i)).collect::<Vec<_>>(),
        );
        thread::sleep(Duration::from_millis(200));
    }
    let carried: u64 = forwarders.iter().map(Forwarder::accepted).sum();
    assert!(carried > 0, "A's leader never reached the forwarders");
    assert_eq!(a.mode(s), None, "A's member {s} serves without a quorum");
}

/// Member `i`'s election address (host and port), from the
/// `server.N=host:quorum:election[...]` line of its `zoo.cfg` (or of its
/// dynamic file, in a reconfigurable ensemble).
fn election_addr(ensemble: &ZkEnsemble, i: usize) -> (String, u16) {
    let dir = ensemble.dir().join(i.to_string());
    let config = ["zoo.cfg", "zoo.cfg.dynamic"]
        .iter()
        .filter_map(|f| fs::read_to_string(dir.join(f)).ok())
        .collect::<String>();
    let line = format!("server.{}=", ensemble.server_id(i));
    let value = config
        .lines()
        .find_map(|l| l.strip_prefix(line.as_str()))
        .unwrap();
    let parts: Vec<&str> = value.split(':').collect();
    (parts[0].to_string(), parts[2].parse().unwrap())
}

/// A TCP forwarder listening on a given loopback port (a server of another
/// ensemble on a freed port), until dropped.
struct Forwarder {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    accepted: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Forwarder {
    fn start(addr: (String, u16), target: (String, u16)) -> Forwarder {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind((addr.0.as_str(), addr.1)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (stop2, accepted2) = (stop.clone(), accepted.clone());
        let thread = thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((inbound, _)) => {
                        accepted2.fetch_add(1, Ordering::SeqCst);
                        inbound.set_nonblocking(false).unwrap();
                        let Ok(outbound) = TcpStream::connect((target.0.as_str(), target.1)) else {
                            continue;
                        };
                        for (mut from, mut to) in [
                            (inbound.try_clone().unwrap(), outbound.try_clone().unwrap()),
                            (outbound, inbound),
                        ] {
                            thread::spawn(move || {
                                let _ = io::copy(&mut from, &mut to);
                                let _ = to.shutdown(std::net::Shutdown::Both);
                            });
                        }
                    }
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Forwarder {
            stop,
            accepted,
            thread: Some(thread),
        }
    }

    fn accepted(&self) -> u64 {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An ensemble whose members reach each other's quorum port through link
/// proxies: each follower's link to the leader carries its traffic, and
/// holding both followers' votes keeps a write uncommitted (the leader does
/// not show it, the writer waits) while the ensemble stays up; released, the
/// write commits.
#[test]
fn ensemble_quorum_links_carry_the_followers_and_hold_their_votes() {
    let ensemble = ZkEnsemble::start_with_quorum_links().unwrap();
    let leader = ensemble.leader().expect("a leader");
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let links: Vec<&FaultProxy> = followers
        .iter()
        .map(|&f| ensemble.quorum_link(f, leader).unwrap())
        .collect();
    for link in &links {
        assert_eq!(link.connections(), 1, "a follower's link carries it");
    }
    assert!(ensemble.quorum_link(leader, leader).is_none());
    assert!(
        ensemble
            .quorum_link(leader, followers[0])
            .unwrap()
            .accepted()
            == 0
    );
    let plain = FaultProxy::start(ensemble.address(leader)).unwrap();
    assert_eq!(
        plain.hold_acks().unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(plain.quorum_counts(), None);

    // Sessions are writes too: made before the hold.
    let mut session = RawSession::connect(&ensemble.address(followers[0]), 20_000, None)
        .unwrap()
        .unwrap();
    let mut reader = RawSession::connect(&ensemble.address(leader), 20_000, None)
        .unwrap()
        .unwrap();
    for link in &links {
        link.hold_acks().unwrap();
    }
    let writer = thread::spawn(move || {
        let created = session.create("/held", b"1");
        session.close().unwrap();
        created
    });
    for link in &links {
        assert!(link.wait_for_quorum_counts(Duration::from_secs(30), |c| c.held_acks >= 1));
    }
    // Proposed, voted for, not committed: the leader does not show it.
    assert!(reader.get_data("/held").is_err());
    assert!(!writer.is_finished());
    assert!(
        links[0].quorum_counts().unwrap().requests >= 1,
        "the create went through it"
    );
    for link in &links {
        link.release_acks().unwrap();
        assert_eq!(link.quorum_counts().unwrap().held_acks, 0);
    }
    assert_eq!(writer.join().unwrap().unwrap(), 0);
    assert_eq!(reader.get_data("/held").unwrap(), b"1");
    reader.close().unwrap();
}

// ---------------------------------------------------------------------------
// FaultProxy
// ---------------------------------------------------------------------------

#[test]
fn proxy_passes_by_default() {
    let server = shared_server();
    let proxy = FaultProxy::start(server.connect_string()).unwrap();
    assert_eq!(proxy.mode(), ProxyMode::Pass);
    assert_eq!(
        four_letter(&proxy.connect_string(), "ruok").unwrap(),
        "imok"
    );
    let mut session = RawSession::connect(&proxy.connect_string(), 10_000, None)
        .unwrap()
        .unwrap();
    let path = format!("/proxy-pass-{}", std::process::id());
    assert_eq!(session.create(&path, b"x").unwrap(), 0);
    assert_eq!(session.get_data(&path).unwrap(), b"x");
    assert_eq!(session.delete(&path).unwrap(), 0);
    // The four-letter connection ends on its own; the session's stays.
    wait_until(
        Duration::from_secs(5),
        "only the session's connection",
        || proxy.connections() == 1,
    );
    session.close().unwrap();
    wait_until(
        Duration::from_secs(5),
        "a closed connection is forgotten",
        || proxy.connections() == 0,
    );
}

#[test]
fn proxy_stall_holds_bytes_until_pass() {
    let server = shared_server();
    let proxy = FaultProxy::start(server.connect_string()).unwrap();
    proxy.stall();
    assert_eq!(proxy.mode(), ProxyMode::Stall);
    let mut stream = TcpStream::connect(proxy.addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    stream.write_all(b"ruok").unwrap();
    let mut reply = Vec::new();
    let started = Instant::now();
    let e = stream.read_to_end(&mut reply).unwrap_err();
    assert!(is_timeout(&e), "expected a read timeout, got {e:?}");
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(reply.is_empty());
    // The server itself is fine.
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    wait_until(
        Duration::from_secs(5),
        "a stall keeps the connection",
        || proxy.connections() == 1,
    );

    // Still stalled a while later (deliberate); then the held "ruok" goes through.
    thread::sleep(Duration::from_millis(300));
    proxy.pass();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.read_to_end(&mut reply).unwrap();
    assert_eq!(reply, b"imok");
}

#[test]
fn proxy_stall_blocks_a_live_session_both_ways() {
    let server = shared_server();
    let proxy = FaultProxy::start(server.connect_string()).unwrap();
    let mut session = RawSession::connect(&proxy.connect_string(), 10_000, None)
        .unwrap()
        .unwrap();
    let path = format!("/proxy-stall-{}", std::process::id());
    proxy.stall();
    session
        .stream
        .set_read_timeout(Some(Duration::from_millis(800)))
        .unwrap();
    let e = session.create(&path, b"held").unwrap_err();
    assert!(is_timeout(&e), "{e:?}");
    proxy.pass();
    // The held request reaches the server and its reply comes back.
    session
        .stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let reply = read_frame(&mut session.stream).unwrap();
    let mut r = Reader(&reply);
    assert_eq!(r.i32(), session.xid);
    let _zxid = r.i64();
    assert_eq!(r.i32(), 0, "create succeeded");
    assert_eq!(session.get_data(&path).unwrap(), b"held");
    assert_eq!(session.delete(&path).unwrap(), 0);
    session.close().unwrap();
}

/// A proxy in front of a plain TCP peer of the test's own (no ZooKeeper
/// server: the test plays the server's side of the bytes), one client
/// connected through it, and the peer's end of that connection.
fn proxy_to_a_peer() -> (FaultProxy, TcpStream, TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = FaultProxy::start(listener.local_addr().unwrap()).unwrap();
    let client = TcpStream::connect(proxy.addr()).unwrap();
    let (peer, _) = listener.accept().unwrap();
    for s in [&client, &peer] {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    (proxy, client, peer)
}

/// Linux's numbers of the system calls a `TcpStream::read` blocks in
/// (`recvfrom`, `read`), as /proc/…/syscall shows them.
#[cfg(target_arch = "x86_64")]
const SOCKET_READ_SYSCALLS: &[&str] = &["45", "0"];
#[cfg(target_arch = "aarch64")]
const SOCKET_READ_SYSCALLS: &[&str] = &["207", "63"];

/// Waits until the thread of this process named `name` (a proxy's reader,
/// `zkp<id>:<connection><c|u>r`) is blocked in a socket read
/// (/proc/self/task/*/syscall): the state in which a stall used to let the
/// read's bytes or end of stream through.
fn wait_blocked_in_read(name: &str) {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    wait_until(
        Duration::from_secs(10),
        &format!("{name} blocked in a socket read"),
        || {
            fs::read_dir("/proc/self/task").unwrap().any(|e| {
                let dir = e.unwrap().path();
                let named = fs::read_to_string(dir.join("comm")).unwrap_or_default();
                let call = fs::read_to_string(dir.join("syscall")).unwrap_or_default();
                named.trim_end() == name
                    && call
                        .split_whitespace()
                        .next()
                        .is_some_and(|n| SOCKET_READ_SYSCALLS.contains(&n))
            })
        },
    );
}

/// A ZooKeeper client frame: its length, then `xid` (`None`: the connect
/// request, which holds none) and a body.
fn client_frame(xid: Option<i32>) -> Vec<u8> {
    let mut body = xid.map(|x| x.to_be_bytes().to_vec()).unwrap_or_default();
    body.extend_from_slice(b"body");
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// That `stream` reads nothing — no byte, no end — for a while.
fn assert_reads_nothing(stream: &mut TcpStream, what: &str) {
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Err(e) if is_timeout(&e) => {}
        Ok(0) => panic!("{what}: the end of the stream got through"),
        Ok(n) => panic!("{what}: {:?} got through", &buf[..n]),
        Err(e) => panic!("{what}: {e:?}"),
    }
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
}

#[test]
fn proxy_stall_holds_what_a_read_already_under_way_brings() {
    let (proxy, mut client, mut peer) = proxy_to_a_peer();
    // The connect request passes (not a round trip); then nothing is in
    // flight, and the proxy's client→server reader blocks in its read.
    let connect = client_frame(None);
    client.write_all(&connect).unwrap();
    let mut got = vec![0u8; connect.len()];
    peer.read_exact(&mut got).unwrap();
    assert_eq!(got, connect);
    wait_blocked_in_read(&format!("zkp{}:1cr", proxy.id()));
    proxy.stall();
    // Written after the stall: the blocked read takes it, the proxy holds it.
    let request = client_frame(Some(1));
    client.write_all(&request).unwrap();
    assert_reads_nothing(&mut peer, "a request written after the stall");
    assert_eq!(proxy.round_trips(), 0, "a held request is no round trip");
    proxy.pass();
    let mut got = vec![0u8; request.len()];
    peer.read_exact(&mut got).unwrap();
    assert_eq!(got, request);
    assert_eq!(proxy.round_trips(), 1, "forwarded, it is one");
}

#[test]
fn proxy_stall_holds_the_server_closing_until_pass() {
    let (proxy, mut client, peer) = proxy_to_a_peer();
    // The server→client reader blocks in its read; the server closes its
    // side during the stall: that read takes the end of the stream.
    wait_blocked_in_read(&format!("zkp{}:1ur", proxy.id()));
    proxy.stall();
    drop(peer);
    assert_reads_nothing(&mut client, "the server's close during the stall");
    assert_eq!(proxy.connections(), 1, "a stall keeps the connection");
    proxy.pass();
    let mut buf = [0u8; 64];
    assert_eq!(
        client.read(&mut buf).unwrap(),
        0,
        "the close, after the stall"
    );
}

#[test]
fn proxy_stall_holds_the_server_resetting_until_pass() {
    let (proxy, mut client, peer) = proxy_to_a_peer();
    // A byte the server never reads: closing with it unread resets the
    // connection (RST), which the proxy's blocked read takes as an error.
    client.write_all(b"x").unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(peer.peek(&mut byte).unwrap(), 1);
    wait_blocked_in_read(&format!("zkp{}:1ur", proxy.id()));
    proxy.stall();
    drop(peer);
    assert_reads_nothing(&mut client, "the server's reset during the stall");
    assert_eq!(proxy.connections(), 1, "a stall keeps the connection");
    proxy.pass();
    let r = client.read(&mut byte);
    assert!(
        matches!(r, Ok(0)) || r.as_ref().is_err_and(|e| !is_timeout(e)),
        "the reset ends the client's connection after the stall: {r:?}"
    );
}

#[test]
fn proxy_stall_delivers_held_bytes_in_order_then_the_end() {
    let (proxy, mut client, mut peer) = proxy_to_a_peer();
    let connect = client_frame(None);
    client.write_all(&connect).unwrap();
    let mut got = vec![0u8; connect.len()];
    peer.read_exact(&mut got).unwrap();
    wait_blocked_in_read(&format!("zkp{}:1cr", proxy.id()));
    proxy.stall();
    // Two pipelined requests (one round trip) in two writes, then the
    // client's close: all of it held, the blocked read's share included.
    let (first, second) = (client_frame(Some(1)), client_frame(Some(2)));
    client.write_all(&first).unwrap();
    client.write_all(&second).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    assert_reads_nothing(&mut peer, "bytes and close written during the stall");
    assert_eq!(proxy.round_trips(), 0, "held requests are no round trip");
    proxy.pass();
    let mut got = Vec::new();
    peer.read_to_end(&mut got).unwrap();
    assert_eq!(
        got,
        [first, second].concat(),
        "the held bytes, in order, then EOF"
    );
    assert_eq!(proxy.round_trips(), 1, "two pipelined requests forwarded");
}

#[test]
fn proxy_cut_closes_the_client_side() {
    let server = shared_server();
    let proxy = FaultProxy::start(server.connect_string()).unwrap();
    let mut session = RawSession::connect(&proxy.connect_string(), 10_000, None)
        .unwrap()
        .unwrap();
    wait_until(Duration::from_secs(5), "one connection", || {
        proxy.connections() == 1
    });
    session
        .stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let cut = Instant::now();
    proxy.cut();
    let mut byte = [0u8; 1];
    match session.stream.read(&mut byte) {
        Ok(0) => {}
        Ok(n) => panic!("read {n} bytes after a cut"),
        Err(e) => assert!(!is_timeout(&e), "the cut was not seen: {e:?}"),
    }
    assert!(
        cut.elapsed() < Duration::from_secs(1),
        "{:?}",
        cut.elapsed()
    );
    assert_eq!(proxy.connections(), 0);
    // The mode is unchanged and new connections work.
    assert_eq!(proxy.mode(), ProxyMode::Pass);
    assert_eq!(
        four_letter(&proxy.connect_string(), "ruok").unwrap(),
        "imok"
    );
}

#[test]
fn proxy_cut_while_stalled_and_reset() {
    let server = shared_server();
    let proxy = FaultProxy::start(server.connect_string()).unwrap();
    proxy.stall();
    let stream = TcpStream::connect(proxy.addr()).unwrap();
    let mut held = stream.try_clone().unwrap();
    held.write_all(b"ruok").unwrap();
    wait_until(Duration::from_secs(5), "one connection", || {
        proxy.connections() == 1
    });
    proxy.cut();
    assert_eq!(proxy.mode(), ProxyMode::Stall, "cut keeps the mode");
    let r = ruok_over(stream, Duration::from_secs(2));
    assert!(
        matches!(&r, Ok(s) if s.is_empty()) || r.as_ref().is_err_and(|e| !is_timeout(e)),
        "a cut connection delivers nothing and ends: {r:?}"
    );
    // New connections are accepted, still stalled.
    let r = ruok_over(
        TcpStream::connect(proxy.addr()).unwrap(),
        Duration::from_millis(500),
    );
    assert!(r.as_ref().is_err_and(is_timeout), "{r:?}");
    wait_until(Duration::from_secs(5), "the stalled connection", || {
        proxy.connections() == 1
    });
    proxy.reset();
    assert_eq!(proxy.mode(), ProxyMode::Pass);
    assert_eq!(proxy.connections(), 0, "reset cut the stalled connection");
    assert_eq!(
        four_letter(&proxy.connect_string(), "ruok").unwrap(),
        "imok"
    );
}

#[test]
fn proxy_delay_adds_latency() {
    let server = shared_server();
    let proxy = FaultProxy::start(server.connect_string()).unwrap();
    let mut session = RawSession::connect(&proxy.connect_string(), 10_000, None)
        .unwrap()
        .unwrap();
    let path = format!("/proxy-delay-{}", std::process::id());
    assert_eq!(session.create(&path, b"d").unwrap(), 0);
    let round_trip = |s: &mut RawSession| {
        let t = Instant::now();
        assert_eq!(s.get_data(&path).unwrap(), b"d");
        t.elapsed()
    };
    let fast = round_trip(&mut session);
    proxy.delay(Duration::from_millis(150));
    assert_eq!(proxy.mode(), ProxyMode::Delay(Duration::from_millis(150)));
    let slow = round_trip(&mut session);
    assert!(
        slow >= Duration::from_millis(300) && slow < Duration::from_secs(2),
        "delay 150 ms each way: round trip {slow:?} (undelayed {fast:?})"
    );
    // Pipelined requests are delayed once each, not one after another.
    let t = Instant::now();
    for _ in 0..5 {
        session.xid += 1;
        let mut body = Vec::new();
        put_i32(&mut body, session.xid);
        put_i32(&mut body, 4);
        put_buffer(&mut body, path.as_bytes());
        body.push(0);
        write_frame(&mut session.stream, &body).unwrap();
    }
    for _ in 0..5 {
        read_frame(&mut session.stream).unwrap();
    }
    let pipelined = t.elapsed();
    assert!(
        pipelined < Duration::from_millis(900),
        "5 pipelined requests took {pipelined:?}"
    );
    proxy.pass();
    let again = round_trip(&mut session);
    assert!(again < Duration::from_millis(250), "{again:?}");
    assert_eq!(session.delete(&path).unwrap(), 0);
    session.close().unwrap();
}

#[test]
fn proxy_set_target_redirects_new_connections() {
    let server = shared_server();
    let other = ZkServer::start().unwrap();
    let proxy = FaultProxy::start(server.connect_string()).unwrap();
    let port_of = |addr: &str| {
        let conf = four_letter(addr, "conf").unwrap();
        parse_conf_port(&conf)
    };
    assert_eq!(port_of(&proxy.connect_string()), server.port());
    proxy.set_target(other.connect_string()).unwrap();
    assert_eq!(proxy.target().port(), other.port());
    assert_eq!(port_of(&proxy.connect_string()), other.port());
}

fn parse_conf_port(conf: &str) -> u16 {
    conf.lines()
        .find_map(|l| l.strip_prefix("clientPort="))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn proxy_to_a_dead_target_closes_the_client() {
    let mut server = ZkServer::start().unwrap();
    let proxy = FaultProxy::start(server.connect_string()).unwrap();
    server.stop().unwrap();
    let r = ruok_over(
        TcpStream::connect(proxy.addr()).unwrap(),
        Duration::from_secs(5),
    );
    assert!(
        matches!(&r, Ok(s) if s.is_empty()) || r.as_ref().is_err_and(|e| !is_timeout(e)),
        "{r:?}"
    );
}

#[test]
fn dropping_a_proxy_stops_its_threads() {
    let server = shared_server();
    let proxy = FaultProxy::start(server.connect_string()).unwrap();
    let prefix = format!("zkp{}:", proxy.id());
    let mut sessions: Vec<RawSession> = (0..3)
        .map(|_| {
            RawSession::connect(&proxy.connect_string(), 10_000, None)
                .unwrap()
                .unwrap()
        })
        .collect();
    // One with a partial request in flight under a delay, then all stalled.
    proxy.delay(Duration::from_millis(100));
    sessions[0].stream.write_all(&[0, 0, 0, 8]).unwrap();
    wait_until(
        Duration::from_secs(5),
        "1 + 4 threads per connection",
        || threads_named(&prefix) == 1 + 4 * 3,
    );
    proxy.stall();
    assert_eq!(proxy.connections(), 3);

    let t = Instant::now();
    drop(proxy);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "drop took {:?}",
        t.elapsed()
    );
    assert_eq!(threads_named(&prefix), 0, "threads left behind");
    // Dropping closed the client sides too.
    for mut s in sessions {
        s.stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 64];
        let r = s.stream.read(&mut buf);
        assert!(
            matches!(r, Ok(0)) || r.as_ref().is_err_and(|e| !is_timeout(e)),
            "{r:?}"
        );
    }
}

#[test]
fn four_letter_to_nothing_fails_cleanly() {
    // Bind, then free, a port: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = four_letter(&format!("127.0.0.1:{port}"), "ruok").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
}
