//! The `zklock` binary against a real ZooKeeper: every subcommand, the signal
//! paths and the error cases. Runs the built binary as a child process.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use common::{children, local, raw};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use zklock::client::ZooKeeper;
use zklock::testing::{
    four_letter, pid_alive as alive, test_servers, unique_root, wait_until, ScratchDir,
};

const WAIT: Duration = Duration::from_secs(15);

/// `zklock` with `--zk` set to the test servers and a 4 s session.
fn zklock() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zklock"));
    c.env("ZK_SERVERS", test_servers())
        .env_remove("RUST_LOG")
        .args(["--session-timeout", "4s"]);
    c
}

/// Runs `zklock args...` to completion.
fn run(args: &[&str]) -> Output {
    let mut child = zklock()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zklock");
    let status = wait_for(&mut child, WAIT);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_end(&mut err).unwrap();
    Output {
        status,
        stdout: out,
        stderr: err,
    }
}

/// Starts `zklock args...` in the background, stderr piped.
fn start(args: &[&str]) -> Child {
    zklock()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zklock")
}

/// Waits for `child` to exit, at most `timeout` (then kills it and fails).
#[track_caller]
fn wait_for(child: &mut Child, timeout: Duration) -> ExitStatus {
    let end = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("zklock did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    child.stderr.take().unwrap().read_to_string(&mut s).unwrap();
    s
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn signal(child: &Child, sig: Signal) {
    kill(Pid::from_raw(child.id() as i32), sig).expect("kill");
}

/// A temp directory for a test's marker files, removed when the test drops it.
fn temp_dir(name: &str) -> ScratchDir {
    ScratchDir::new(&format!("cli-{name}")).unwrap()
}

/// A shell command that creates `started`, then waits until `release` exists.
fn hold_until(started: &Path, release: &Path) -> String {
    format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.02; done",
        started.display(),
        release.display()
    )
}

/// A shell command that creates `started`, runs until SIGTERM, then creates
/// `termed` and exits 0.
fn until_sigterm(started: &Path, termed: &Path) -> String {
    format!(
        "trap 'touch {}; exit 0' TERM; touch {}; while :; do sleep 0.02; done",
        termed.display(),
        started.display()
    )
}

/// A write-lock holder with metadata "stuck" running [`until_sigterm`],
/// holding when this returns; and the file its command creates on SIGTERM.
fn start_stuck_holder(znode: &str, dir: &Path) -> (Child, PathBuf) {
    let (started, termed) = (dir.join("started"), dir.join("got-sigterm"));
    let holder = start(&[
        "lock",
        znode,
        "-m",
        "stuck",
        "--",
        "sh",
        "-c",
        &until_sigterm(&started, &termed),
    ]);
    wait_until(WAIT, "holding", || started.exists());
    (holder, termed)
}

fn lock_nodes(zk: &ZooKeeper, znode: &str) -> Vec<String> {
    children(zk, znode)
}

/// One lock holder (or, for `elect`, leader) running `hold_until`, started
/// and holding when this returns.
fn start_holder(znode: &str, dir: &Path, name: &str, kind: &str) -> (Child, PathBuf) {
    let (started, release) = (dir.join(format!("{name}.started")), dir.join(name));
    let label = if kind == "elect" {
        "--name"
    } else {
        "--metadata"
    };
    let child = start(&[
        kind,
        znode,
        label,
        name,
        "--",
        "sh",
        "-c",
        &hold_until(&started, &release),
    ]);
    wait_until(WAIT, "the holder's command started", || started.exists());
    (child, release)
}

#[test]
fn lock_runs_the_command_and_exits_with_its_code() {
    let root = unique_root("cli-exit");
    let znode = format!("{root}/job");
    let out = run(&["lock", &znode, "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let out = run(&[
        "read-lock",
        &znode,
        "--",
        "sh",
        "-c",
        "case $ZKLOCK_LOCK_NODE in */read-*) echo $ZKLOCK_FENCING_TOKEN;; *) exit 9;; esac",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let token: i64 = text(&out.stdout).trim().parse().expect("a fencing token");
    assert!(token > 0);
    assert!(lock_nodes(&raw(), &znode).is_empty(), "released");
    // A command that does not exist: 127, as a shell says, and no node left.
    let out = run(&["lock", &znode, "--", "/no/such/command"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(lock_nodes(&raw(), &znode).is_empty());
}

#[test]
fn a_second_writer_times_out_with_75_and_leaves_no_node() {
    let (root, dir) = (unique_root("cli-timeout"), temp_dir("timeout"));
    let znode = format!("{root}/job");
    let (mut holder, release) = start_holder(&znode, &dir, "first-writer", "lock");
    let t = Instant::now();
    let out = run(&["lock", &znode, "-v", "--timeout", "500ms", "--", "true"]);
    assert_eq!(out.status.code(), Some(75), "{}", text(&out.stderr));
    assert!(t.elapsed() >= Duration::from_millis(500));
    let err = text(&out.stderr);
    assert!(err.contains("timed out after"), "{err}");
    assert!(err.contains("first-writer"), "shows the holder: {err}");
    assert_eq!(
        lock_nodes(&raw(), &znode).len(),
        1,
        "only the holder's node"
    );
    // --timeout 0 tries once.
    let out = run(&["read-lock", &znode, "--timeout", "0", "--", "true"]);
    assert_eq!(out.status.code(), Some(75));
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut holder, WAIT).success());
    assert!(lock_nodes(&raw(), &znode).is_empty());
}

#[test]
fn writers_take_turns_and_the_waiter_runs_after_the_holder() {
    let (root, dir) = (unique_root("cli-turns"), temp_dir("turns"));
    let znode = format!("{root}/job");
    let (mut holder, release) = start_holder(&znode, &dir, "a", "lock");
    let log = dir.join("log");
    let mut waiter = start(&[
        "lock",
        &znode,
        "--verbose",
        "--",
        "sh",
        "-c",
        &format!("echo waiter-ran >> {}", log.display()),
    ]);
    // The waiting line is read before the holder releases: the waiter reads
    // the holder's metadata some time after its node exists, and a quick
    // release could come first.
    let err = stderr_lines(&mut waiter);
    let waiting = err
        .recv_timeout(WAIT)
        .expect("a waiting line on the waiter's stderr");
    assert!(
        waiting.contains("held by \"a\""),
        "plain waiting line: {waiting}"
    );
    assert!(
        !log.exists(),
        "the waiter must not run while the lock is held"
    );
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut holder, WAIT).success());
    assert!(wait_for(&mut waiter, WAIT).success());
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "waiter-ran\n");
    let rest: Vec<String> = err.iter().collect();
    assert!(
        rest.iter().any(|l| l.contains("got the write lock")),
        "{rest:?}"
    );
}

/// The lines of `child`'s stderr as they come (a thread reads them).
fn stderr_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let err = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[test]
fn readers_share_the_lock() {
    let (root, dir) = (unique_root("cli-readers"), temp_dir("readers"));
    let znode = format!("{root}/table");
    // Each reader's command finishes only once the other one is inside too.
    let (a, b) = (dir.join("a"), dir.join("b"));
    let cmd = |me: &Path, other: &Path| {
        format!(
            "touch {}; while [ ! -e {} ]; do sleep 0.02; done",
            me.display(),
            other.display()
        )
    };
    let mut r1 = start(&["read-lock", &znode, "--", "sh", "-c", &cmd(&a, &b)]);
    let mut r2 = start(&["read-lock", &znode, "--", "sh", "-c", &cmd(&b, &a)]);
    assert!(wait_for(&mut r1, WAIT).success());
    assert!(wait_for(&mut r2, WAIT).success());
}

#[test]
fn ls_shows_holders_and_waiters_in_order() {
    let (root, dir) = (unique_root("cli-ls"), temp_dir("ls"));
    let znode = format!("{root}/table");
    let (mut holder, release) = start_holder(&znode, &dir, "reader-1", "read-lock");
    let mut writer = start(&["lock", &znode, "-v", "-m", "writer-2", "--", "true"]);
    let zk = raw();
    wait_until(WAIT, "the writer queued", || {
        lock_nodes(&zk, &znode).len() == 2
    });
    let mut reader = start(&["read-lock", &znode, "-m", "reader-3", "--", "true"]);
    wait_until(WAIT, "the second reader queued", || {
        lock_nodes(&zk, &znode).len() == 3
    });

    let out = run(&["ls", &znode]);
    assert!(out.status.success());
    let table = text(&out.stdout);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{table}");
    let summary: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r[0], r[1], *r.last().unwrap()))
        .collect();
    assert_eq!(
        summary,
        [
            ("holder", "read", "reader-1"),
            ("waiter", "write", "writer-2"),
            ("waiter", "read", "reader-3"),
        ],
        "{table}"
    );
    assert_eq!(rows[0][2], "hbase", "dialect column: {table}");
    assert!(rows[0][4].starts_with("0x"), "session column: {table}");

    let out = run(&["ls", &znode, "--json"]);
    let json = text(&out.stdout);
    assert!(
        json.starts_with('[') && json.trim_end().ends_with(']'),
        "{json}"
    );
    let h = json.find("\"metadata\":\"reader-1\"").expect("reader-1");
    let w = json.find("\"metadata\":\"writer-2\"").expect("writer-2");
    let r = json.find("\"metadata\":\"reader-3\"").expect("reader-3");
    assert!(h < w && w < r, "in queue order: {json}");
    assert_eq!(json.matches("\"state\":\"waiter\"").count(), 2, "{json}");
    assert!(json.contains("\"age_ms\":"), "{json}");

    std::fs::write(&release, "").unwrap();
    for c in [&mut holder, &mut writer, &mut reader] {
        assert!(wait_for(c, WAIT).success());
    }
    let out = run(&["ls", &znode]);
    assert!(
        text(&out.stdout).contains("no holders"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn reap_removes_what_it_says_and_the_holder_sigterms_its_command() {
    let (root, dir) = (unique_root("cli-reap"), temp_dir("reap"));
    let znode = format!("{root}/job");
    let (mut holder, termed) = start_stuck_holder(&znode, &dir);

    let out = run(&["reap", &znode, "--older-than", "1h"]);
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("nothing to reap"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(lock_nodes(&raw(), &znode).len(), 1);

    let out = run(&["reap", &znode, "--all"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("removed") && said.contains("stuck"), "{said}");
    // The holder learns the lock is lost, SIGTERMs its command, exits 3.
    let status = wait_for(&mut holder, WAIT);
    assert_eq!(status.code(), Some(3));
    assert!(termed.exists(), "the command got SIGTERM");
    let err = stderr_of(&mut holder);
    assert!(err.contains("lost the write lock"), "{err}");
    // Needs one of the two options.
    let out = run(&["reap", &znode]);
    assert_eq!(out.status.code(), Some(2));
}

/// SIGTERM or SIGINT while waiting: the waiter's node goes, exit 128 + signal.
fn signal_while_waiting(sig: Signal, code: i32) {
    let (root, dir) = (unique_root("cli-signal"), temp_dir(sig.as_str()));
    let znode = format!("{root}/job");
    let (mut holder, release) = start_holder(&znode, &dir, "holder", "lock");
    let mut waiter = start(&["lock", &znode, "-v", "--", "true"]);
    let zk = raw();
    wait_until(WAIT, "the waiter queued", || {
        lock_nodes(&zk, &znode).len() == 2
    });
    let t = Instant::now();
    signal(&waiter, sig);
    assert_eq!(wait_for(&mut waiter, WAIT).code(), Some(code));
    wait_until(Duration::from_secs(1), "the waiter's node removed", || {
        lock_nodes(&zk, &znode).len() == 1
    });
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "not after the session timeout"
    );
    let err = stderr_of(&mut waiter);
    assert!(err.contains("left the queue"), "{err}");
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut holder, WAIT).success());
}

#[test]
fn sigterm_while_waiting_removes_the_waiters_node() {
    signal_while_waiting(Signal::SIGTERM, 143);
}

#[test]
fn sigint_while_waiting_removes_the_waiters_node() {
    signal_while_waiting(Signal::SIGINT, 130);
}

#[test]
fn sigterm_while_holding_is_forwarded_and_the_lock_released_at_once() {
    let (root, dir) = (unique_root("cli-forward"), temp_dir("forward"));
    let znode = format!("{root}/job");
    let started = dir.join("started");
    let mut holder = start(&[
        "lock",
        &znode,
        "--",
        "sh",
        "-c",
        &format!("touch {}; exec sleep 30", started.display()),
    ]);
    wait_until(WAIT, "holding", || started.exists());
    signal(&holder, Signal::SIGTERM);
    // The command died of SIGTERM: 128 + 15.
    assert_eq!(wait_for(&mut holder, WAIT).code(), Some(143));
    assert!(lock_nodes(&raw(), &znode).is_empty());
}

#[test]
fn elect_runs_one_leader_at_a_time_in_order() {
    let (root, dir) = (unique_root("cli-elect"), temp_dir("elect"));
    let znode = format!("{root}/leader");
    let log = dir.join("log");
    let mut candidates = Vec::new();
    let zk = raw();
    for i in 1..=3 {
        let cmd = format!(
            "echo start $ZKLOCK_LEADER_NAME >> {0}; sleep 0.3; echo end $ZKLOCK_LEADER_NAME >> {0}",
            log.display()
        );
        candidates.push(start(&[
            "elect",
            &znode,
            "--name",
            &format!("c{i}"),
            "--",
            "sh",
            "-c",
            &cmd,
        ]));
        // In order: each offer is made before the next candidate starts.
        let me = format!("c{i}");
        wait_until(WAIT, "the offer made", || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.contains(&format!("start {me}")))
                || lock_nodes(&zk, &znode).iter().any(|c| {
                    zk.get_data(&format!("{znode}/{c}"), false)
                        .is_ok_and(|(d, _)| d == me.as_bytes())
                })
        });
    }
    for c in &mut candidates {
        assert!(wait_for(c, WAIT).success());
    }
    let lines = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    for pair in lines.chunks(2) {
        let (s, e) = (pair[0].strip_prefix("start "), pair[1].strip_prefix("end "));
        assert!(s.is_some() && s == e, "one leader at a time: {lines:?}");
    }
    assert_eq!(lines[0], "start c1");
    assert!(lock_nodes(&zk, &znode).is_empty(), "offers withdrawn");
}

#[test]
fn elect_sigterms_the_command_when_leadership_is_lost_and_withdraws_on_signal() {
    let (root, dir) = (unique_root("cli-elect-lost"), temp_dir("elect-lost"));
    let znode = format!("{root}/leader");
    let (started, termed) = (dir.join("started"), dir.join("termed"));
    let mut leader = start(&[
        "elect",
        &znode,
        "--name",
        "first",
        "--",
        "sh",
        "-c",
        &until_sigterm(&started, &termed),
    ]);
    wait_until(WAIT, "leading", || started.exists());
    let mut second = start(&["elect", &znode, "--name", "second", "--", "sleep", "30"]);
    let zk = raw();
    wait_until(WAIT, "second's offer", || {
        lock_nodes(&zk, &znode).len() == 2
    });
    let out = run(&["ls", &znode]);
    let table = text(&out.stdout);
    assert!(
        table.contains("leader") && table.contains("candidate"),
        "{table}"
    );

    // SIGTERM to the waiting candidate withdraws its offer at once.
    signal(&second, Signal::SIGTERM);
    assert_eq!(wait_for(&mut second, WAIT).code(), Some(143));
    wait_until(Duration::from_secs(1), "second's offer withdrawn", || {
        lock_nodes(&zk, &znode).len() == 1
    });

    // Deleting the leader's offer: leadership lost, command SIGTERMed, exit 3.
    let offer = lock_nodes(&zk, &znode).remove(0);
    zk.delete(&format!("{znode}/{offer}"), None).unwrap();
    assert_eq!(wait_for(&mut leader, WAIT).code(), Some(3));
    assert!(termed.exists(), "the command got SIGTERM");
    let err = stderr_of(&mut leader);
    assert!(err.contains("lost the leadership"), "{err}");
}

#[test]
fn server_serves_until_interrupted() {
    let mut server = Command::new(env!("CARGO_BIN_EXE_zklock"))
        .arg("server")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let connect = first.trim().to_string();
    assert!(connect.starts_with("127.0.0.1:"), "{first:?}");
    assert_eq!(four_letter(&connect, "ruok").unwrap(), "imok");
    let out = zklock()
        .args(["--zk", &connect, "lock", "/cli/server", "--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    signal(&server, Signal::SIGINT);
    assert!(wait_for(&mut server, WAIT).success());
    wait_until(WAIT, "the server is gone", || {
        four_letter(&connect, "ruok").is_err()
    });
}

/// Bad input: a non-zero exit, one line on stderr, no panic, no backtrace.
#[track_caller]
fn fails_in_one_line(args: &[&str], code: i32, says: &str) {
    let out = run(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    assert!(err.starts_with("zklock: "), "{err}");
    assert!(err.contains(says), "{args:?}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
}

#[test]
fn bad_input_fails_in_one_clear_line() {
    fails_in_one_line(
        &["lock", "/x", "--timeout", "2x", "--", "true"],
        2,
        "invalid duration",
    );
    fails_in_one_line(
        &["lock", "/x", "--timeout=-1s", "--", "true"],
        2,
        "negative duration \"-1s\"",
    );
    fails_in_one_line(
        &["--connect-timeout", "soon", "ls", "/x"],
        2,
        "invalid duration",
    );
    fails_in_one_line(&["lock", "x", "--", "true"], 2, "must start with /");
    fails_in_one_line(&["lock", "/x/", "--", "true"], 2, "must not end with /");
    fails_in_one_line(&["ls", "/a//b"], 2, "segment");
    fails_in_one_line(&["reap", "/a/./b", "--all"], 2, "segment");
    fails_in_one_line(&["elect", "/x"], 2, "elect needs a command");
    fails_in_one_line(&["frobnicate"], 2, "frobnicate");
    fails_in_one_line(
        &[
            "--zk",
            "127.0.0.1:1",
            "--connect-timeout",
            "1s",
            "lock",
            "/x",
            "--",
            "true",
        ],
        1,
        "cannot connect to ZooKeeper at 127.0.0.1:1",
    );
    fails_in_one_line(
        &[
            "--zk",
            "127.0.0.1:1",
            "--connect-timeout",
            "500ms",
            "ls",
            "/x",
        ],
        1,
        "cannot connect",
    );
    fails_in_one_line(
        &["--zk", "not a host:port", "ls", "/x"],
        2,
        "invalid connect string",
    );
}

/// `examples/shutdown`, built by `cargo test --all-features` next to the binary.
fn shutdown_example() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_zklock"));
    let example = bin.parent().unwrap().join("examples").join("shutdown");
    if !example.exists() {
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "--features",
                "cli",
                "--example",
                "shutdown",
            ])
            .status()
            .expect("cargo build --example shutdown");
        assert!(status.success(), "building examples/shutdown");
    }
    example
}

#[test]
fn clean_shutdown_frees_the_session_and_its_nodes_within_a_second() {
    // The server's four-letter words: the local shared server.
    let server = local();
    let root = unique_root("cli-shutdown");
    let mut service = Command::new(shutdown_example())
        .arg(&root)
        .env("ZK_SERVERS", &server)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run examples/shutdown");
    let mut out = BufReader::new(service.stdout.take().unwrap());
    let mut ready = String::new();
    out.read_line(&mut ready).unwrap();
    let session = ready
        .split_whitespace()
        .find(|w| w.starts_with("0x"))
        .unwrap_or_else(|| panic!("no session in {ready:?}"))
        .to_string();
    let dump = four_letter(&server, "dump").unwrap();
    assert!(
        dump.contains(&format!("{session}:")),
        "ephemerals before: {dump}"
    );
    assert!(four_letter(&server, "cons")
        .unwrap()
        .contains(&format!("sid={session}")));

    signal(&service, Signal::SIGTERM);
    let t = Instant::now();
    wait_until(Duration::from_secs(1), "session and nodes gone", || {
        let (dump, cons) = (
            four_letter(&server, "dump").unwrap(),
            four_letter(&server, "cons").unwrap(),
        );
        !dump.contains(&session) && !cons.contains(&format!("sid={session}"))
    });
    let gone_after = t.elapsed();
    assert!(wait_for(&mut service, WAIT).success());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("waiters cancelled"), "{rest}");
    let zk = ZooKeeper::connect(&server, Duration::from_secs(4), |_e| {}).unwrap();
    for t in ["orders", "customers"] {
        assert!(lock_nodes(&zk, &format!("{root}/{t}")).is_empty());
    }
    eprintln!("session and ephemerals gone {gone_after:?} after SIGTERM (session timeout 30 s)");
}

// ---------------------------------------------------------------------------
// Issue 25: a supervisor killed with kill -9, and what sysadmins expect
// ---------------------------------------------------------------------------

/// A shell command that starts a background job, writes "<its pid> <the
/// job's pid>" to `pids`, and waits; with `trap '' TERM` it ignores SIGTERM.
fn with_background_job(pids: &Path) -> String {
    format!(
        "trap '' TERM; sleep 300 & echo $$ $! > {0}.tmp; mv {0}.tmp {0}; wait",
        pids.display()
    )
}

fn read_pids(pids: &Path) -> Vec<u32> {
    wait_until(WAIT, "the command wrote its PIDs", || pids.exists());
    std::fs::read_to_string(pids)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// A command for the next holder: writes which of `pids` are alive (none:
/// an empty file) to `seen`.
fn check_pids_command(pids: &[u32], seen: &Path) -> String {
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    format!(
        "for p in {}; do if [ -e /proc/$p ] && ! grep -q '^State:[[:space:]]*Z' /proc/$p/status; \
         then echo alive $p; fi; done > {1}.tmp; mv {1}.tmp {1}",
        list.join(" "),
        seen.display()
    )
}

/// `kill -9` of a supervisor running `kind` on `znode`: its command and the
/// command's background job die at once, and when the next supervisor gets
/// the lock (or the leadership) after the session expires, they are gone.
fn kill_9_of_the_supervisor(kind: &str, znode: &str, dir: &Path) {
    let pids = dir.join("pids");
    let mut first = start(&[kind, znode, "--", "sh", "-c", &with_background_job(&pids)]);
    let first_pids = read_pids(&pids);
    assert_eq!(first_pids.len(), 2);
    assert!(first_pids.iter().all(|&p| alive(p)));
    let seen = dir.join("seen");
    let mut second = start(&[
        kind,
        znode,
        "--",
        "sh",
        "-c",
        &check_pids_command(&first_pids, &seen),
    ]);
    let zk = raw();
    wait_until(WAIT, "the second queued", || {
        lock_nodes(&zk, znode).len() == 2
    });
    signal(&first, Signal::SIGKILL);
    let _ = wait_for(&mut first, WAIT);
    let t = Instant::now();
    // At once: well before the 4 s session of the dead supervisor expires.
    wait_until(
        Duration::from_secs(3),
        "the first command and its job died",
        || first_pids.iter().all(|&p| !alive(p)),
    );
    eprintln!(
        "{kind}: the command and its job died {:?} after kill -9",
        t.elapsed()
    );
    assert!(wait_for(&mut second, Duration::from_secs(30)).success());
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        "",
        "the first command was gone when the second got the {kind}"
    );
}

#[test]
fn kill_9_of_a_lock_supervisor_kills_its_command_and_background_jobs_at_once() {
    let (root, dir) = (unique_root("cli-kill9"), temp_dir("kill9"));
    kill_9_of_the_supervisor("lock", &format!("{root}/job"), &dir);
}

#[test]
fn kill_9_of_an_elect_supervisor_kills_its_command_and_background_jobs_at_once() {
    let (root, dir) = (unique_root("cli-kill9-elect"), temp_dir("kill9-elect"));
    kill_9_of_the_supervisor("elect", &format!("{root}/leader"), &dir);
}

#[test]
fn what_the_command_leaves_running_is_stopped_before_the_lock_is_released() {
    let (root, dir) = (unique_root("cli-leftovers"), temp_dir("leftovers"));
    let znode = format!("{root}/job");
    let pids = dir.join("pids");
    // The shell exits at once, leaving its background job.
    let out = run(&[
        "lock",
        &znode,
        "--",
        "sh",
        "-c",
        &format!("sleep 300 & echo $$ $! > {}", pids.display()),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let job = read_pids(&pids)[1];
    assert!(!alive(job), "the background job was stopped");
    assert!(
        text(&out.stderr).contains("left 1 process"),
        "{}",
        text(&out.stderr)
    );
    assert!(lock_nodes(&raw(), &znode).is_empty());
}

#[test]
fn a_missing_chroot_is_reported_in_one_line_not_a_stack_overflow() {
    let chroot = unique_root("cli-no-chroot");
    let zk = format!("{}{chroot}", test_servers());
    for args in [
        vec!["--zk", &zk, "lock", "/l/c", "--", "true"],
        vec!["--zk", &zk, "elect", "/l/e", "--", "true"],
    ] {
        let t = Instant::now();
        let out = run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(&format!("the chroot {chroot}")), "{err}");
        assert!(err.contains("does not exist"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
}

#[test]
fn ls_into_a_closed_pipe_exits_quietly() {
    let (root, dir) = (unique_root("cli-pipe"), temp_dir("pipe"));
    let znode = format!("{root}/job");
    let (mut holder, release) = start_holder(&znode, &dir, "holder", "lock");
    let mut waiters: Vec<Child> = (0..3)
        .map(|i| start(&["lock", &znode, "-m", &format!("waiter-{i}"), "--", "true"]))
        .collect();
    let zk = raw();
    wait_until(WAIT, "the waiters queued", || {
        lock_nodes(&zk, &znode).len() == 4
    });
    for json in [false, true] {
        let mut args = vec!["ls", znode.as_str()];
        if json {
            args.push("--json");
        }
        // `| head -c 1` closes the pipe after one byte.
        let out = Command::new("bash")
            .args([
                "-c",
                "\"$@\" | head -c 1 >/dev/null; exit ${PIPESTATUS[0]}",
                "bash",
                env!("CARGO_BIN_EXE_zklock"),
            ])
            .args(&args)
            .env("ZK_SERVERS", test_servers())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
        // A closed pipe before zklock writes: run it with stdout a closed pipe.
        let mut child = zklock()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let status = wait_for(&mut child, WAIT);
        let err = stderr_of(&mut child);
        assert_eq!(status.code(), Some(0), "{err}");
        assert!(err.is_empty(), "quiet: {err}");
    }
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut holder, WAIT).success());
    for w in &mut waiters {
        assert!(wait_for(w, WAIT).success());
    }
}

#[test]
fn unreachable_servers_say_why_and_a_malformed_connect_string_is_a_usage_error() {
    // Refused: a port nothing listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = free.local_addr().unwrap().to_string();
    drop(free);
    // A silent listener: accepts TCP (the kernel's backlog), never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    for (zk, says) in [
        (refused.as_str(), "connection refused"),
        (silent_addr.as_str(), "no ZooKeeper answer"),
        ("no-such-host.invalid:2181", "cannot resolve"),
    ] {
        fails_in_one_line(
            &["--zk", zk, "--connect-timeout", "1s", "ls", "/x"],
            1,
            says,
        );
    }
    for bad in ["a:b:c", "host:99999", "h:0", ",", "[::1"] {
        fails_in_one_line(&["--zk", bad, "ls", "/x"], 2, "invalid connect string");
    }
    drop(silent);
}

#[test]
fn every_bad_path_is_a_usage_error_with_a_reason() {
    for (path, why) in [
        ("/locks/😀", "Basic Multilingual Plane"),
        ("/locks/\u{e000}", "private-use"),
        ("/locks/\u{fff5}", "U+FFF0"),
        ("/locks/a\u{1}b", "control"),
        ("locks", "must start with /"),
        ("/", "root"),
    ] {
        for sub in [
            vec!["lock", path, "--", "true"],
            vec!["elect", path, "--", "true"],
            vec!["ls", path],
            vec!["leader", path],
            vec!["reap", path, "--all"],
        ] {
            // The root is read by ls, stat and leader (see
            // ls_and_stat_of_the_root_say_what_it_holds).
            if path == "/" && matches!(sub[0], "ls" | "leader") {
                continue;
            }
            fails_in_one_line(&sub, 2, why);
        }
    }
}

#[test]
fn reap_older_than_removes_holders_not_live_waiters_and_reap_all_empties_an_election() {
    let (root, dir) = (unique_root("cli-reap-waiters"), temp_dir("reap-waiters"));
    let znode = format!("{root}/job");
    let (mut holder, termed) = start_stuck_holder(&znode, &dir);
    let mut waiter = start(&["lock", &znode, "-m", "patient", "--", "true"]);
    let zk = raw();
    wait_until(WAIT, "the waiter queued", || {
        lock_nodes(&zk, &znode).len() == 2
    });
    std::thread::sleep(Duration::from_millis(1500));
    let out = run(&["reap", &znode, "--older-than", "1s"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("stuck") && !said.contains("patient"),
        "{said}"
    );
    // The holder lost its lock (exit 3, its command got SIGTERM); the
    // waiter got it and ran.
    assert_eq!(wait_for(&mut holder, WAIT).code(), Some(3));
    assert!(termed.exists());
    assert!(
        wait_for(&mut waiter, WAIT).success(),
        "{}",
        stderr_of(&mut waiter)
    );

    // An election: reap --all removes what ls shows, leader and candidates.
    let election = format!("{root}/leader");
    let mut leader = start(&["elect", &election, "--name", "l", "--", "sleep", "30"]);
    let mut candidate = start(&["elect", &election, "--name", "c", "--", "sleep", "30"]);
    wait_until(WAIT, "two offers", || lock_nodes(&zk, &election).len() == 2);
    let out = run(&["reap", &election, "--all"]);
    let said = text(&out.stdout);
    assert_eq!(said.matches("removed").count(), 2, "{said}");
    assert!(
        said.contains("leader") && said.contains("candidate"),
        "{said}"
    );
    for c in [&mut leader, &mut candidate] {
        assert_ne!(wait_for(c, WAIT).code(), Some(0));
    }
    assert!(lock_nodes(&zk, &election).is_empty());
}

/// Stops a `zklock server --detach`ed server when dropped (a failing test
/// leaves no JVM).
struct Detached(u32);

impl Drop for Detached {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0 as i32), Signal::SIGTERM);
    }
}

#[test]
fn server_detaches_prints_its_address_honours_port_and_stops_by_pid() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The shell recipe: the command substitution returns (nothing keeps its pipe).
    let cwd = temp_dir("server-detach");
    let out = Command::new("sh")
        .args([
            "-c",
            "ZK_SERVERS=$(\"$0\" server --detach --port \"$1\" 2>err) && echo \"$ZK_SERVERS\" && cat err",
            env!("CARGO_BIN_EXE_zklock"),
            &port.to_string(),
        ])
        .current_dir(&cwd)
        .output()
        .unwrap();
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said} {}", text(&out.stderr));
    let mut lines = said.lines();
    let connect = lines.next().unwrap().to_string();
    assert_eq!(connect, format!("127.0.0.1:{port}"));
    let pid: u32 = said
        .split("--stop ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no PID in {said:?}"));
    let guard = Detached(pid);
    assert_eq!(four_letter(&connect, "ruok").unwrap(), "imok");
    let out = zklock()
        .args(["--zk", &connect, "lock", "/cli/detached", "--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // --stop refuses a PID that is not a zklock server.
    let out = zklock()
        .args(["server", "--stop", &std::process::id().to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = zklock()
        .args(["server", "--stop", &pid.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!alive(pid));
    wait_until(WAIT, "the server is gone", || {
        four_letter(&connect, "ruok").is_err()
    });
    std::mem::forget(guard);

    // --zk naming a local port is the port served; another host is refused.
    let out = zklock()
        .args(["--zk", "zk.example.com:2181", "server"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--port"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn try_once_prints_no_waiting_line_and_nonblock_and_conflict_exit_code_work() {
    let (root, dir) = (unique_root("cli-nonblock"), temp_dir("nonblock"));
    let znode = format!("{root}/job");
    let (mut holder, release) = start_holder(&znode, &dir, "busy", "lock");
    for args in [
        vec!["lock", &znode, "-v", "-t", "0", "--", "true"],
        vec!["lock", &znode, "-v", "-n", "--", "true"],
        vec!["lock", &znode, "-v", "--nonblock", "--", "true"],
        vec!["read-lock", &znode, "-v", "-w", "0", "--", "true"],
    ] {
        let out = run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(75), "{args:?}: {err}");
        assert!(!err.contains("waiting"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("\"busy\""), "{err}");
    }
    let out = run(&["lock", &znode, "-n", "-E", "9", "--", "true"]);
    assert_eq!(out.status.code(), Some(9));
    let out = run(&[
        "lock",
        &znode,
        "--conflict-exit-code",
        "0",
        "-t",
        "200ms",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        lock_nodes(&raw(), &znode).len(),
        1,
        "only the holder's node"
    );
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut holder, WAIT).success());
    // Free: -n takes it and runs the command.
    let out = run(&["lock", &znode, "-n", "-E", "9", "--", "sh", "-c", "exit 4"]);
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn a_shell_string_runs_with_c_and_a_missing_double_dash_gets_a_hint() {
    let root = unique_root("cli-shell");
    let znode = format!("{root}/job");
    let out = run(&["lock", &znode, "-c", "echo \"$ZKLOCK_LOCK\" && exit 5"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), znode);
    let out = run(&[
        "elect",
        &format!("{root}/e"),
        "-c",
        "echo $ZKLOCK_LEADER_NAME",
        "--name",
        "me",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "me");
    for args in [
        vec!["lock", znode.as_str(), "true"],
        vec!["read-lock", znode.as_str(), "echo", "x"],
        vec!["elect", znode.as_str(), "true"],
    ] {
        fails_in_one_line(&args, 2, "hint: put the command after --");
    }
    fails_in_one_line(
        &["lock", &znode, "-c", "true", "--", "true"],
        2,
        "cannot be used with",
    );
}

/// A session timeout the server clamps, up to its minimum or down to its
/// maximum, is warned with the timeout granted; one in range is not. On a
/// server of its own whose minimum is 6 s (the shared test servers' 400 ms
/// session, asked for with `1ms`, expired under load before `ls` ran).
#[test]
fn a_clamped_session_timeout_is_warned() {
    let server = zklock::testing::ZkServer::start_with_session_timeouts(
        Duration::from_secs(6),
        Duration::from_secs(60),
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_zklock"))
            .env("ZK_SERVERS", server.connect_string())
            .args(args)
            .output()
            .unwrap()
    };
    // `ls` of a missing path fails (issue 35): list an existing one.
    let zk = common::raw_session(&server.connect_string(), Duration::from_secs(6));
    let clamp = unique_root("cli-clamp");
    common::client::mkdirs(&zk, &clamp);
    for (asked, granted) in [("1h", "1m00s"), ("1ms", "6.0s")] {
        let out = run(&["--session-timeout", asked, "ls", &clamp]);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains("warning") && err.contains(granted),
            "{asked}: {err}"
        );
    }
    let out = run(&["--session-timeout", "10s", "ls", &clamp]);
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
    common::client::rmr(&zk, &clamp);
    zk.close().unwrap();
}

#[test]
fn a_reader_behind_a_waiting_writer_says_queued_behind() {
    let (root, dir) = (unique_root("cli-queued"), temp_dir("queued"));
    let znode = format!("{root}/table");
    let (mut holder, release) = start_holder(&znode, &dir, "reader-1", "read-lock");
    let mut writer = start(&["lock", &znode, "-v", "-m", "writer-2", "--", "true"]);
    let zk = raw();
    wait_until(WAIT, "the writer queued", || {
        lock_nodes(&zk, &znode).len() == 2
    });
    let out = run(&["read-lock", &znode, "-v", "-t", "1s", "--", "true"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{err}");
    assert!(err.contains("queued behind \"writer-2\""), "{err}");
    assert!(!err.contains("held by \"writer-2\""), "{err}");
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut holder, WAIT).success());
    assert!(wait_for(&mut writer, WAIT).success());
    let err = stderr_of(&mut writer);
    assert!(err.contains("held by \"reader-1\""), "{err}");
}

#[test]
fn kill_after_bounds_the_grace_of_a_command_that_ignores_sigterm() {
    let (root, dir) = (unique_root("cli-kill-after"), temp_dir("kill-after"));
    let znode = format!("{root}/job");
    let started = dir.join("started");
    let mut holder = start(&[
        "lock",
        &znode,
        "--kill-after",
        "300ms",
        "--",
        "sh",
        "-c",
        &format!(
            "trap '' TERM; touch {}; while :; do sleep 0.02; done",
            started.display()
        ),
    ]);
    wait_until(WAIT, "holding", || started.exists());
    let zk = raw();
    let node = lock_nodes(&zk, &znode).remove(0);
    let t = Instant::now();
    zk.delete(&format!("{znode}/{node}"), None).unwrap();
    assert_eq!(wait_for(&mut holder, WAIT).code(), Some(3));
    // Well under the 5 s default.
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    let err = stderr_of(&mut holder);
    assert!(
        err.contains("300ms after SIGTERM; sending SIGKILL"),
        "{err}"
    );
    fails_in_one_line(
        &["lock", &znode, "--kill-after", "soon", "--", "true"],
        2,
        "invalid duration",
    );
}

#[test]
fn elect_gives_its_command_a_growing_fencing_token() {
    let root = unique_root("cli-elect-token");
    let znode = format!("{root}/leader");
    let token = || -> i64 {
        let out = run(&["elect", &znode, "-c", "echo $ZKLOCK_FENCING_TOKEN"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).trim().parse().expect("a token")
    };
    let (a, b) = (token(), token());
    assert!(a > 0 && b > a, "{a} then {b}");
}

#[test]
fn leader_prints_the_leader_and_watch_follows_it() {
    let (root, dir) = (unique_root("cli-leader"), temp_dir("leader"));
    let znode = format!("{root}/leader");
    let out = run(&["leader", &znode]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no leader"),
        "{}",
        text(&out.stderr)
    );

    let mut watch = start(&["leader", &znode, "--watch"]);
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    assert_eq!(
        lines.next().unwrap().unwrap(),
        "(no leader)",
        "no leader yet"
    );
    let (mut a, release) = start_holder(&znode, &dir, "host-a", "elect");
    assert_eq!(lines.next().unwrap().unwrap(), "host-a");
    let out = run(&["leader", &znode]);
    assert_eq!(text(&out.stdout), "host-a\n");
    let (b_started, b_release) = (dir.join("b.started"), dir.join("b"));
    let mut b = start(&[
        "elect",
        &znode,
        "--name",
        "host-b",
        "--",
        "sh",
        "-c",
        &hold_until(&b_started, &b_release),
    ]);
    wait_until(WAIT, "b's offer", || lock_nodes(&raw(), &znode).len() == 2);
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut a, WAIT).success());
    assert_eq!(lines.next().unwrap().unwrap(), "host-b");
    std::fs::write(&b_release, "").unwrap();
    assert!(wait_for(&mut b, WAIT).success());
    assert_eq!(lines.next().unwrap().unwrap(), "(no leader)");
    signal(&watch, Signal::SIGTERM);
    assert!(wait_for(&mut watch, WAIT).success());
}

#[test]
fn help_documents_the_environment() {
    let out = run(&["--help"]);
    let help = text(&out.stdout);
    for var in [
        "ZK_SERVERS",
        "ZKLOCK_LOCK",
        "ZKLOCK_LOCK_NODE",
        "ZKLOCK_FENCING_TOKEN",
        "ZKLOCK_ELECTION",
        "ZKLOCK_LEADER_NODE",
        "ZKLOCK_LEADER_NAME",
        "kill -9",
        "  4    the lock's directory holds nodes of another dialect",
        "semaphore",
    ] {
        assert!(help.contains(var), "{var}: {help}");
    }
    let out = run(&["semaphore", "--help"]);
    let help = text(&out.stdout);
    for option in [
        "--limit",
        "--dialect",
        "--timeout",
        "--kill-after",
        "curator",
    ] {
        assert!(help.contains(option), "{option}: {help}");
    }
    // Bad input is a usage error.
    for args in [
        ["semaphore", "/s", "--limit", "0", "--", "true"],
        ["lock", "/s", "--dialect", "etcd", "--", "true"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(text(&out.stderr).lines().count(), 1, "{args:?}");
    }
}

/// At a terminal (util-linux `script` gives zklock one): the command's
/// process group gets the terminal, so it can read it, and Ctrl-C reaches
/// it; zklock exits 130 and releases.
#[test]
fn at_a_terminal_the_command_reads_it_and_ctrl_c_reaches_it() {
    let root = unique_root("cli-tty");
    let znode = format!("{root}/job");
    let bin = env!("CARGO_BIN_EXE_zklock");
    let inner =
        format!("{bin} lock {znode} -- sh -c 'read a; echo got $a; exec sleep 30'; echo rc=$?");
    let mut script = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env("ZK_SERVERS", test_servers())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux)");
    let mut stdin = script.stdin.take().unwrap();
    use std::io::Write;
    stdin.write_all(b"hello\n").unwrap();
    let mut out = BufReader::new(script.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("got hello") {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "{seen}");
        seen.push_str(&line);
    }
    stdin.write_all(b"\x03").unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(wait_for(&mut script, WAIT).success());
    assert!(rest.contains("rc=130"), "{seen}{rest}");
    assert!(lock_nodes(&raw(), &znode).is_empty());
}

/// `zklock lock --dialect D` holding `name`'s `hold_until`, holding when
/// this returns.
fn start_dialect_holder(cmd: &[&str], znode: &str, dir: &Path, name: &str) -> (Child, PathBuf) {
    let (started, release) = (dir.join(format!("{name}.started")), dir.join(name));
    let script = hold_until(&started, &release);
    let mut args = cmd.to_vec();
    args.extend([znode, "-m", name, "--", "sh", "-c", &script]);
    let child = start(&args);
    wait_until(WAIT, "the holder's command started", || started.exists());
    (child, release)
}

/// `ls`'s table rows, split on whitespace.
fn ls_rows(znode: &str) -> (Vec<Vec<String>>, String) {
    let out = run(&["ls", znode]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = text(&out.stdout)
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    (rows, text(&out.stderr))
}

#[test]
fn dialect_locks_exclude_each_other_in_their_layout_and_a_mixed_directory_is_refused() {
    use zklock::client::{Acl, CreateMode};
    let (root, dir) = (unique_root("cli-dialect"), temp_dir("dialect"));
    let zk = raw();
    let is_seq = |s: &str| s.len() == 10 && s.bytes().all(|b| b.is_ascii_digit());
    for dialect in ["curator", "kazoo"] {
        let znode = format!("{root}/{dialect}");
        let (mut holder, release) =
            start_dialect_holder(&["lock", "--dialect", dialect], &znode, &dir, dialect);
        let nodes = lock_nodes(&zk, &znode);
        assert_eq!(nodes.len(), 1, "{nodes:?}");
        let node = &nodes[0];
        // Curator's InterProcessMutex `_c_<uuid>-lock-<seq>`, kazoo's Lock
        // `<uuid hex>__lock__<seq>`.
        let well_formed = match dialect {
            "curator" => node.strip_prefix("_c_").is_some_and(|rest| {
                rest.split_once("-lock-")
                    .is_some_and(|(uuid, seq)| uuid.len() == 36 && is_seq(seq))
            }),
            _ => node.split_once("__lock__").is_some_and(|(uuid, seq)| {
                uuid.len() == 32 && uuid.bytes().all(|b| b.is_ascii_hexdigit()) && is_seq(seq)
            }),
        };
        assert!(well_formed, "{dialect}: {node}");

        // A second one of the same dialect is kept out, and leaves no node.
        let out = run(&[
            "lock",
            "-v",
            "--dialect",
            dialect,
            &znode,
            "-n",
            "--",
            "true",
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(75), "{err}");
        assert!(err.contains(&format!("held by \"{dialect}\"")), "{err}");
        assert_eq!(lock_nodes(&zk, &znode).len(), 1);

        // ls: the holder and a waiter, in the dialect.
        let mut waiter = start(&["lock", "-d", dialect, &znode, "-m", "second", "--", "true"]);
        wait_until(WAIT, "the waiter queued", || {
            lock_nodes(&zk, &znode).len() == 2
        });
        let (rows, warned) = ls_rows(&znode);
        let summary: Vec<(&str, &str, &str)> = rows
            .iter()
            .map(|r| (r[0].as_str(), r[2].as_str(), r.last().unwrap().as_str()))
            .collect();
        assert_eq!(
            summary,
            [("holder", dialect, dialect), ("waiter", dialect, "second")],
            "{rows:?}"
        );
        assert!(warned.is_empty(), "{warned}");

        // Another dialect is refused in one line, with its own code, no node left.
        let out = run(&["lock", &znode, "-n", "--", "true"]);
        let err = text(&out.stderr).to_lowercase();
        assert_eq!(out.status.code(), Some(4), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&format!("the {dialect} dialect")), "{err}");
        assert_eq!(lock_nodes(&zk, &znode).len(), 2);

        // ls warns about a mixed directory (a foreign node made by hand).
        let foreign = zk
            .create(
                &format!("{znode}/write-x-"),
                b"",
                Acl::open_unsafe(),
                CreateMode::EphemeralSequential,
            )
            .unwrap();
        let (rows, warned) = ls_rows(&znode);
        assert!(
            warned.contains("mixes dialects") && warned.contains(dialect),
            "{warned}"
        );
        assert!(rows.iter().any(|r| r[2] == "hbase"), "{rows:?}");
        zk.delete(&foreign, None).unwrap();

        std::fs::write(&release, "").unwrap();
        assert!(wait_for(&mut holder, WAIT).success());
        assert!(wait_for(&mut waiter, WAIT).success());
        assert!(lock_nodes(&zk, &znode).is_empty());
    }
    // Curator's read/write lock: `lock --rw` (`__WRIT__`) keeps `read-lock` out.
    let znode = format!("{root}/curator-rw");
    let (mut writer, release) =
        start_dialect_holder(&["lock", "--rw", "-d", "curator"], &znode, &dir, "w");
    let nodes = lock_nodes(&zk, &znode);
    assert!(
        nodes[0].starts_with("_c_") && nodes[0].contains("-__WRIT__"),
        "{nodes:?}"
    );
    let out = run(&["read-lock", "-d", "curator", &znode, "-n", "--", "true"]);
    assert_eq!(out.status.code(), Some(75), "{}", text(&out.stderr));
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut writer, WAIT).success());
    let out = run(&[
        "read-lock",
        "-d",
        "curator",
        &znode,
        "-n",
        "--",
        "sh",
        "-c",
        "echo $ZKLOCK_LOCK_NODE",
    ]);
    let node = text(&out.stdout);
    assert!(node.contains("-__READ__"), "{node}");
}

#[test]
fn semaphore_runs_at_most_limit_commands_at_once_in_every_dialect() {
    let (root, dir) = (unique_root("cli-semaphore"), temp_dir("semaphore"));
    let zk = raw();
    for dialect in ["hbase", "curator", "kazoo"] {
        let znode = format!("{root}/{dialect}");
        let cmd = ["semaphore", "--limit", "2", "--dialect", dialect];
        let (mut a, release_a) = start_dialect_holder(&cmd, &znode, &dir, &format!("{dialect}-a"));
        let (mut b, release_b) = start_dialect_holder(&cmd, &znode, &dir, &format!("{dialect}-b"));
        // Both leases are taken: a third gives up.
        let mut args = cmd.to_vec();
        args.extend([znode.as_str(), "-v", "-n", "--", "true"]);
        let out = run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(75), "{err}");
        assert!(err.contains("all 2 leases held by"), "{err}");
        // zklock's and Curator's layouts share the `leases` directory: the
        // other one is refused there (exit 4), and leaves nothing.
        if let Some(other) = match dialect {
            "hbase" => Some("curator"),
            "curator" => Some("hbase"),
            _ => None,
        } {
            let leases = format!("{znode}/leases");
            let out = run(&[
                "semaphore",
                "--limit",
                "3",
                "-d",
                other,
                &znode,
                "--",
                "true",
            ]);
            assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
            assert_eq!(children(&zk, &leases).len(), 2);
        }
        // ls: two holders, one waiter.
        let mut args = cmd.to_vec();
        args.extend([znode.as_str(), "-m", "third", "--", "true"]);
        let mut third = start(&args);
        // (A holder lets its mutex go in the background once granted; the
        // waiter's lease node, which `ls` shows its data from, comes after
        // its mutex node.)
        wait_until(WAIT, "two holders and the third waiting", || {
            let rows = ls_rows(&znode).0;
            rows.len() == 3
                && rows[..2].iter().all(|r| r[0] == "holder")
                && rows[2][0] == "waiter"
                && rows[2].last().is_some_and(|m| m == "third")
        });
        let (rows, warned) = ls_rows(&znode);
        let summary: Vec<(&str, &str, &str)> = rows
            .iter()
            .map(|r| (r[0].as_str(), r[2].as_str(), r.last().unwrap().as_str()))
            .collect();
        let (ha, hb) = (format!("{dialect}-a"), format!("{dialect}-b"));
        assert_eq!(summary.len(), 3, "{rows:?}");
        assert!(
            summary.contains(&("holder", dialect, ha.as_str())),
            "{rows:?}"
        );
        assert!(
            summary.contains(&("holder", dialect, hb.as_str())),
            "{rows:?}"
        );
        assert_eq!(summary[2], ("waiter", dialect, "third"), "{rows:?}");
        assert!(warned.is_empty(), "{warned}");
        std::fs::write(&release_a, "").unwrap();
        assert!(wait_for(&mut third, WAIT).success());
        std::fs::write(&release_b, "").unwrap();
        assert!(wait_for(&mut a, WAIT).success());
        assert!(wait_for(&mut b, WAIT).success());

        // 4 commands at once: never more than 2 inside.
        let inside = dir.join(format!("{dialect}-inside"));
        std::fs::create_dir_all(&inside).unwrap();
        let counts = dir.join(format!("{dialect}-counts"));
        let script = format!(
            "touch {i}/$$; ls {i} | wc -l >> {c}; sleep 0.2; rm {i}/$$",
            i = inside.display(),
            c = counts.display()
        );
        let mut args = cmd.to_vec();
        args.extend([znode.as_str(), "-c", &script]);
        let mut all: Vec<Child> = (0..4).map(|_| start(&args)).collect();
        for c in &mut all {
            assert!(wait_for(c, WAIT).success());
        }
        let seen: Vec<u32> = std::fs::read_to_string(&counts)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect();
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert!(seen.iter().all(|&n| (1..=2).contains(&n)), "{seen:?}");
        let (rows, _) = ls_rows(&znode);
        assert!(rows.is_empty(), "{rows:?}");

        // A lease lost (reaped) SIGTERMs the command: exit 3.
        let (started, termed) = (
            dir.join(format!("{dialect}-started")),
            dir.join(format!("{dialect}-termed")),
        );
        let script = until_sigterm(&started, &termed);
        let mut args = cmd.to_vec();
        args.extend([znode.as_str(), "-c", &script]);
        let mut holder = start(&args);
        wait_until(WAIT, "holding a lease", || started.exists());
        let out = run(&["reap", &znode, "--all"]);
        assert!(
            text(&out.stdout).contains("removed"),
            "{}",
            text(&out.stdout)
        );
        assert_eq!(wait_for(&mut holder, WAIT).code(), Some(3));
        assert!(termed.exists());
        assert!(stderr_of(&mut holder).contains("lost a lease"));
    }
    // No lease node left in any layout.
    assert!(children(&zk, &format!("{root}/hbase/leases")).is_empty());
    assert!(children(&zk, &format!("{root}/curator/leases")).is_empty());
}

#[test]
fn lock_dialect_kazoo_takes_turns_with_a_real_kazoo_lock_both_ways() {
    use common::participant::Participant;
    let (root, dir) = (unique_root("cli-kazoo-peer"), temp_dir("kazoo-peer"));
    let znode = format!("{root}/job");
    let mut peer = Participant::kazoo("kazoo_locks.py", &[&test_servers()]);
    assert_eq!(peer.ask(&format!("mutex py {znode} py-holder")), "ok py");
    peer.send("acquire py");
    assert_eq!(peer.line(WAIT), "acquired py");

    // kazoo holds: zklock sees its holder, and waits its turn.
    let out = run(&["lock", "-v", "-d", "kazoo", &znode, "-n", "--", "true"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{err}");
    assert!(err.contains("held by \"py-holder\""), "{err}");
    let ran = dir.join("ran");
    let mut waiter = start(&[
        "lock",
        "-d",
        "kazoo",
        &znode,
        "-m",
        "rust",
        "--",
        "touch",
        ran.to_str().unwrap(),
    ]);
    wait_until(WAIT, "zklock queued", || {
        lock_nodes(&raw(), &znode).len() == 2
    });
    let (rows, _) = ls_rows(&znode);
    let summary: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str(), r[2].as_str(), r.last().unwrap().as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("holder", "kazoo", "py-holder"),
            ("waiter", "kazoo", "rust")
        ],
        "{rows:?}"
    );
    assert!(!ran.exists());
    assert_eq!(peer.ask("release py"), "released py");
    assert!(wait_for(&mut waiter, WAIT).success());
    assert!(ran.exists());

    // zklock holds: kazoo waits until it is done.
    let (mut holder, release) = start_dialect_holder(&["lock", "-d", "kazoo"], &znode, &dir, "z");
    assert_eq!(peer.ask("acquire py 300"), "timeout py");
    peer.send("acquire py");
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut holder, WAIT).success());
    assert_eq!(peer.line(WAIT), "acquired py");
    assert_eq!(peer.ask("release py"), "released py");
    peer.finish();
    assert!(lock_nodes(&raw(), &znode).is_empty());
}

/// (From dev-dialects, adapted.) `lock --rw --dialect curator` takes the
/// write side of a Curator fleet's `InterProcessReadWriteLock`; `ls` shows
/// every dialect's holders and warns about a mixed directory, which `lock`
/// refuses.
#[test]
fn lock_and_ls_in_every_dialect_and_a_mixed_directory() {
    use zklock::lock::{Dialect, InterProcessLock, InterProcessReadWriteLock};
    let znode = unique_root("cli-dialect-rw");
    let zkw = common::zkw();
    let curator_writer = zklock::lock::ZkInterProcessReadWriteLock::new(&zkw, &znode, None)
        .unwrap()
        .with_dialect(Dialect::Curator)
        .write_lock(b"java-1");
    curator_writer.acquire().unwrap();
    let out = run(&[
        "lock",
        "--rw",
        "--dialect",
        "curator",
        "-t",
        "300ms",
        &znode,
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    let (rows, _) = ls_rows(&znode);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (
            rows[0][0].as_str(),
            rows[0][1].as_str(),
            rows[0][2].as_str()
        ),
        ("holder", "write", "curator"),
        "{rows:?}"
    );
    assert_eq!(rows[0].last().unwrap(), "java-1", "{rows:?}");
    let out = run(&["ls", "--json", &znode]);
    assert!(text(&out.stdout).contains("\"dialect\":\"curator\""));
    curator_writer.release().unwrap();
    let out = run(&[
        "lock",
        "--rw",
        "-d",
        "curator",
        &znode,
        "--",
        "sh",
        "-c",
        "echo $ZKLOCK_LOCK_NODE",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(text(&out.stdout).contains("-__WRIT__"), "{out:?}");
    // A kazoo node beside a Curator one: ls warns, lock refuses.
    let kazoo = raw();
    let curator_reader = zklock::lock::ZkInterProcessReadWriteLock::new(&zkw, &znode, None)
        .unwrap()
        .with_dialect(Dialect::Curator)
        .read_lock(b"java-2");
    curator_reader.acquire().unwrap();
    kazoo
        .create(
            &format!("{znode}/0123456789abcdef0123456789abcdef__lock__"),
            b"py",
            zklock::client::Acl::open_unsafe(),
            zklock::client::CreateMode::EphemeralSequential,
        )
        .unwrap();
    let (rows, err) = ls_rows(&znode);
    assert!(err.contains("mixes dialects (curator, kazoo)"), "{err}");
    assert!(rows.iter().any(|r| r[2] == "kazoo"), "{rows:?}");
    let out = run(&["lock", "-d", "kazoo", "-t", "5s", &znode, "--", "true"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(text(&out.stderr).contains("dialect"), "{out:?}");
    curator_reader.release().unwrap();
    kazoo.close().unwrap();
    assert!(children(&raw(), &znode).is_empty());
    zkw.close().unwrap();
}

/// `--acl` and `--acl-id` on a session without an identity (plain port, no
/// SASL, no certificate): `creator` and `creator-read` are usage errors
/// (exit 2) before anything is created, and so are `--acl-id` with `--acl
/// open` and an id without a scheme; the default stays open, and `ls
/// --show-acl` prints the ACLs (`world:anyone:cdrwa`), run here by the lock's
/// own command. `--help` documents both.
#[test]
fn acl_options_without_an_identity_and_ls_show_acl() {
    let root = unique_root("cli-acl");
    let lock = format!("{root}/l");
    for extra in [
        &["--acl", "creator"][..],
        &["--acl", "creator-read"],
        &["--acl", "open", "--acl-id", "digest:u:x"],
        &["--acl-id", "no-scheme"],
    ] {
        let mut args = vec!["lock", lock.as_str()];
        args.extend_from_slice(extra);
        args.extend(["--", "true"]);
        let out = run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{extra:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("acl"),
            "{extra:?}: {}",
            text(&out.stderr)
        );
    }
    assert!(
        raw().exists(&root, false).unwrap().is_none(),
        "nothing created"
    );
    let out = run(&[
        "lock",
        &lock,
        "--",
        env!("CARGO_BIN_EXE_zklock"),
        "ls",
        &lock,
        "--show-acl",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let lines: Vec<Vec<&str>> = shown
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), 2, "{shown}");
    assert_eq!(lines[0], [lock.as_str(), "world:anyone:cdrwa"], "{shown}");
    assert!(lines[1][0].starts_with(&format!("{lock}/")), "{shown}");
    assert_eq!(lines[1][1..], ["world:anyone:cdrwa"], "{shown}");
    let help = text(&run(&["lock", "--help"]).stdout);
    assert!(
        help.contains("--acl <ACL>") && help.contains("creator-read"),
        "{help}"
    );
    assert!(help.contains("--acl-id <SCHEME:ID>"), "{help}");
    assert!(text(&run(&["ls", "--help"]).stdout).contains("--show-acl"));
    common::client::rmr(&raw(), &root);
}

/// (Issue 31, item 4.) A kazoo `Semaphore` of 1 holds its only lease at `P`:
/// `zklock semaphore --limit 1 -n P` is refused in zklock's and Curator's
/// layouts (exit 4, saying why) and creates nothing; `ls` shows kazoo's
/// holder, and a Curator `InterProcessSemaphoreV2`'s; a path with both
/// layouts (the directories an older zklock left beside kazoo's lease) is
/// warned about; a limit other than the one stored is refused.
#[test]
fn semaphore_refuses_a_kazoo_semaphores_path_and_ls_shows_every_layouts_holders() {
    use common::participant::Participant;
    use zklock::client::{Acl, CreateMode};
    let root = unique_root("cli-sem-layouts");
    let p = format!("{root}/kazoo");
    let zk = raw();
    let mut kazoo = Participant::kazoo("kazoo_semaphore.py", &[&test_servers()]);
    assert_eq!(kazoo.ask(&format!("acquire {p} 1 20000")), "acquired");
    let before = (children(&zk, &root), children(&zk, &p));
    for dialect in [&[][..], &["-d", "curator"][..]] {
        let mut args = vec!["semaphore", "--limit", "1", "-n"];
        args.extend(dialect);
        args.extend([p.as_str(), "--", "true"]);
        let out = run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{dialect:?}: {err}");
        assert!(
            err.contains("kazoo dialect") && err.contains("zklock ls"),
            "{err}"
        );
        assert_eq!((children(&zk, &root), children(&zk, &p)), before);
    }
    let (rows, warned) = ls_rows(&p);
    let summary: Vec<[&str; 4]> = rows
        .iter()
        .map(|r| [&*r[0], &*r[1], &*r[2], &**r.last().unwrap()])
        .collect();
    assert_eq!(summary, [["holder", "lease", "kazoo", "kazoo"]], "{rows:?}");
    assert!(warned.is_empty(), "{warned}");

    // A Curator semaphore's holder.
    let q = format!("{root}/curator");
    let mut curator = Participant::java("CuratorSemaphore", &[&test_servers()]);
    let answer = curator.ask(&format!("acquire {q} 2 20000"));
    assert!(answer.starts_with("acquired"), "{answer}");
    let (rows, warned) = ls_rows(&q);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        [&*rows[0][0], &*rows[0][1], &*rows[0][2]],
        ["holder", "lease", "curator"],
        "{rows:?}"
    );
    assert!(rows[0][3].starts_with("leases/_c_"), "{rows:?}");
    assert!(warned.is_empty(), "{warned}");
    assert_eq!(curator.ask("release"), "released");
    curator.finish();

    // zklock's directories beside kazoo's lease (what the old zklock left):
    // every holder shown, the path warned about.
    for dir in ["locks", "leases"] {
        zk.create(
            &format!("{p}/{dir}"),
            b"",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .unwrap();
    }
    let (rows, warned) = ls_rows(&p);
    assert!(
        rows.iter().any(|r| r[0] == "holder" && r[2] == "kazoo"),
        "{rows:?}"
    );
    assert!(
        warned.contains(&format!("{p} mixes dialects")) && warned.contains("kazoo"),
        "{warned}"
    );
    for dir in ["locks", "leases"] {
        zk.delete(&format!("{p}/{dir}"), None).unwrap();
    }
    assert_eq!(kazoo.ask("release"), "released");
    assert_eq!(kazoo.ask(&format!("acquire {p} 1 5000")), "acquired");
    assert_eq!(kazoo.ask("release"), "released");
    kazoo.finish();

    // zklock's layout stores its limit: another one is refused.
    let r = format!("{root}/zklock");
    let dir = temp_dir("sem-layouts");
    let (mut holder, release) =
        start_dialect_holder(&["semaphore", "--limit", "1"], &r, &dir, "one");
    let out = run(&["semaphore", "--limit", "3", "-n", &r, "--", "true"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("has a limit of 1") && err.contains("give --limit 1"),
        "{err}"
    );
    assert!(!err.contains("inconsistent max leases"), "{err}");
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut holder, WAIT).success());
    assert!(children(&zk, &format!("{r}/leases")).is_empty());
}

// ---------------------------------------------------------------------------
// Issue 35: messages that say what happened, where, and what to do
// ---------------------------------------------------------------------------

/// `ls` of a path that does not exist fails (exit 1) with "no such node";
/// of a parent of locks it says what that is, with a lock to list; of an
/// idle lock it says "no holders".
#[test]
fn ls_of_a_missing_path_fails_and_of_a_parent_of_locks_says_what_it_is() {
    let root = unique_root("cli-ls-what");
    let missing = format!("{root}/nothing");
    fails_in_one_line(&["ls", &missing], 1, &format!("no such node: {missing}"));
    fails_in_one_line(
        &["ls", &missing, "--json"],
        1,
        &format!("no such node: {missing}"),
    );

    let zk = raw();
    let parent = format!("{root}/locks");
    // With its parents: run alone, the test's is the first root.
    common::client::mkdirs(&zk, &parent);
    let out = run(&["ls", &parent]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("no holders"),
        "{}",
        text(&out.stdout)
    );

    let (lock_a, lock_b) = (format!("{parent}/a"), format!("{parent}/b"));
    for lock in [&lock_a, &lock_b] {
        let out = run(&["lock", lock, "--", "true"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    // A parent of locks fails as `stat` does (issue 48: `ls` exited 0 with
    // the note on stdout), with a lock to list.
    for args in [vec!["ls", &parent], vec!["ls", &parent, "--json"]] {
        let out = run(&args);
        let said = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
        assert_eq!(text(&out.stdout), "", "{args:?}: nothing on stdout");
        assert!(
            said.contains(&format!("{parent} is not a lock"))
                && said.contains("2 other znode(s) (a, b)")
                && said.contains(&format!("zklock ls {lock_a}")),
            "{said}"
        );
    }
    common::client::rmr(&zk, &root);
}

/// flock's `-s` (shared) gets a hint to `read-lock`, not to `--`.
#[test]
fn flocks_shared_flag_says_use_read_lock() {
    for args in [
        &["lock", "-s", "/x", "--", "true"][..],
        &["lock", "/x", "--shared", "--", "true"][..],
    ] {
        fails_in_one_line(args, 2, "use `zklock read-lock");
        let err = text(&run(args).stderr);
        assert!(!err.contains("put the command after --"), "{err}");
    }
}

/// A refused port fails at once, saying refused, however long the connect
/// timeout (two minutes here; `run` gives up after 15 s).
#[test]
fn a_refused_port_fails_at_once_saying_refused() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = free.local_addr().unwrap().to_string();
    drop(free);
    fails_in_one_line(
        &["--zk", &refused, "--connect-timeout", "2m", "ls", "/x"],
        1,
        &format!("cannot connect to ZooKeeper at {refused}: connection refused by {refused}"),
    );
}

/// `--help` says what a stopped (SIGSTOP) supervisor means and what protects
/// against it.
#[test]
fn help_says_what_a_stopped_supervisor_means() {
    let help = text(&run(&["--help"]).stdout);
    for says in [
        "SIGSTOP",
        "session expires",
        "runs beside",
        "fencing token",
        "guarded writes",
        "--session-timeout",
    ] {
        assert!(help.contains(says), "{says}: {help}");
    }
}

/// Without the `kerberos` feature, a Kerberos option says which feature and
/// packages it needs (a usage error), instead of clap's "unexpected argument".
#[cfg(not(feature = "kerberos"))]
#[test]
fn a_kerberos_option_without_the_feature_says_what_it_needs() {
    for args in [
        &["--kerberos-service", "zookeeper/localhost", "ls", "/x"][..],
        &[
            "--kerberos-service",
            "zookeeper/localhost",
            "--keytab",
            "/k",
            "ls",
            "/x",
        ][..],
    ] {
        fails_in_one_line(args, 2, "needs a zklock built with the `kerberos` feature");
        let err = text(&run(args).stderr);
        assert!(
            err.contains("--features cli,kerberos") && err.contains("libkrb5-dev"),
            "{err}"
        );
    }
}

/// `zklock whoami`: the session's identities as zkCli prints them (3.7+);
/// before 3.7 an error naming the version needed, exit 1.
#[test]
fn whoami_prints_the_sessions_identities_or_the_version_needed() {
    let out = run(&["whoami"]);
    if common::server_version() >= (3, 7, 0) {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "Auth scheme: User\nip: 127.0.0.1\n");
    } else {
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(
            err.contains("whoAmI") && err.contains("ZooKeeper 3.7"),
            "{err}"
        );
    }
}

// ---------------------------------------------------------------------------
// Issue 36: observability (ls --json's fields, ls --watch, stat)
// ---------------------------------------------------------------------------

/// `out`'s stdout as JSON; it must have succeeded.
#[track_caller]
fn json_of(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

/// A session id as zklock prints it.
fn hex_session(zkw: &zklock::ZooKeeperWatcher) -> String {
    format!("0x{:x}", zkw.recoverable_zookeeper().session_id())
}

/// The lines of `child`'s stdout as they come (a thread reads them).
fn stdout_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let out = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next NDJSON document of `ls --watch --json`.
#[track_caller]
fn next_document(docs: &std::sync::mpsc::Receiver<String>) -> serde_json::Value {
    let line = docs.recv_timeout(WAIT).expect("a document");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// No document over a quiet second.
#[track_caller]
fn quiet(docs: &std::sync::mpsc::Receiver<String>, what: &str) {
    if let Ok(line) = docs.recv_timeout(Duration::from_secs(1)) {
        panic!("{what}: printed while nothing changed: {line}");
    }
}

/// `(state, kind, session, metadata)` of each entry of a JSON array.
fn summary(entries: &serde_json::Value) -> Vec<(String, String, String, String)> {
    entries
        .as_array()
        .expect("an array")
        .iter()
        .map(|e| {
            let field = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (
                field("state"),
                field("kind"),
                field("session"),
                field("metadata"),
            )
        })
        .collect()
}

/// A read lock held by one session and a write lock waiting in another
/// (library locks): `ls --json` and `stat --json` give each node's state,
/// kind, owning session and fencing token as the library reports them (the
/// waiter's token is the one it holds with once granted), `stat` the
/// znode's stat; the text `stat` has a FENCING column.
#[test]
fn ls_and_stat_json_show_the_sessions_and_fencing_tokens_the_library_reports() {
    use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
    let znode = unique_root("cli-json");
    let (zkw_a, zkw_b) = (common::zkw(), common::zkw());
    let reader = ZkInterProcessReadWriteLock::new(&zkw_a, &znode, None)
        .unwrap()
        .read_lock(b"reader-a");
    reader.acquire().unwrap();
    let read_grant = reader.acquired_lock().unwrap();
    let writer = ZkInterProcessReadWriteLock::new(&zkw_b, &znode, None)
        .unwrap()
        .write_lock(b"writer-b");
    let waiting = std::thread::spawn(move || writer.acquire().map(|()| writer));
    let zk = raw();
    wait_until(WAIT, "the writer queued", || {
        lock_nodes(&zk, &znode).len() == 2
    });
    let (a, b) = (hex_session(&zkw_a), hex_session(&zkw_b));

    let ls = json_of(&run(&["ls", &znode, "--json"]));
    assert_eq!(
        summary(&ls),
        [
            ("holder".into(), "read".into(), a.clone(), "reader-a".into()),
            (
                "waiter".into(),
                "write".into(),
                b.clone(),
                "writer-b".into()
            ),
        ],
        "{ls}"
    );
    let (holder, waiter) = (&ls[0], &ls[1]);
    assert_eq!(holder["fencing_token"], read_grant.fencing_token(), "{ls}");
    assert_eq!(holder["path"], read_grant.path.as_str(), "{ls}");
    assert_eq!(holder["dialect"], "hbase", "{ls}");
    assert!(
        read_grant.path.ends_with(holder["node"].as_str().unwrap()),
        "{ls}"
    );
    assert_eq!(holder["sequence"], read_grant.sequence, "{ls}");
    let waiter_node = zk
        .exists(waiter["path"].as_str().unwrap(), false)
        .unwrap()
        .unwrap();
    assert_eq!(waiter["fencing_token"], waiter_node.czxid, "{ls}");
    assert_eq!(waiter["ctime_ms"], waiter_node.ctime, "{ls}");
    assert!(waiter["age_ms"].is_u64(), "{ls}");

    let stat = json_of(&run(&["stat", &znode, "--json"]));
    let lock_dir = zk.exists(&znode, false).unwrap().unwrap();
    assert_eq!(stat["path"], znode.as_str(), "{stat}");
    assert_eq!(stat["stat"]["czxid"], lock_dir.czxid, "{stat}");
    assert_eq!(stat["stat"]["pzxid"], lock_dir.pzxid, "{stat}");
    assert_eq!(stat["stat"]["num_children"], 2, "{stat}");
    assert_eq!(stat["stat"]["ephemeral_owner"], "0x0", "{stat}");
    assert_eq!(stat["mixed"], serde_json::json!([]), "{stat}");
    assert_eq!(summary(&stat["holders"]), summary(&ls)[..1], "{stat}");
    assert_eq!(summary(&stat["waiters"]), summary(&ls)[1..], "{stat}");
    assert_eq!(
        stat["holders"][0]["fencing_token"],
        read_grant.fencing_token()
    );
    assert_eq!(stat["waiters"][0]["fencing_token"], waiter["fencing_token"]);

    let out = run(&["stat", &znode]);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        said.contains("1 holder(s), 1 waiter(s)")
            && said.contains("numChildren = 2")
            && said.contains("FENCING")
            && said.contains(&format!(" {} ", read_grant.fencing_token())),
        "{said}"
    );

    reader.release().unwrap();
    let writer = waiting.join().unwrap().unwrap();
    assert_eq!(
        writer.acquired_lock().unwrap().fencing_token(),
        waiter["fencing_token"],
        "the waiter's token is its grant's"
    );
    let ls = json_of(&run(&["ls", &znode, "--json"]));
    assert_eq!(
        summary(&ls),
        [("holder".into(), "write".into(), b, "writer-b".into())],
        "{ls}"
    );
    writer.release().unwrap();
    zkw_a.close().unwrap();
    zkw_b.close().unwrap();
}

/// `ls --watch --json` prints one document (a line) when a waiter arrives
/// and when the holder releases, nothing over a quiet second in between;
/// the table form prints a headed table each time; a deleted lock znode is
/// watched until it comes back; SIGTERM and Ctrl-C end both with 0.
#[test]
fn ls_watch_prints_a_document_per_change_and_nothing_while_idle() {
    use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
    let znode = unique_root("cli-watch");
    let (zkw_a, zkw_b) = (common::zkw(), common::zkw());
    let first = ZkInterProcessReadWriteLock::new(&zkw_a, &znode, None)
        .unwrap()
        .write_lock(b"first");
    first.acquire().unwrap();
    let (a, b) = (hex_session(&zkw_a), hex_session(&zkw_b));
    let mut json = start(&["ls", &znode, "--watch", "--json"]);
    let mut table = start(&["ls", &znode, "--watch"]);
    let (docs, rows) = (stdout_lines(&mut json), stdout_lines(&mut table));

    let doc = next_document(&docs);
    assert_eq!(
        summary(&doc),
        [("holder".into(), "write".into(), a.clone(), "first".into())]
    );
    quiet(&docs, "idle, held");

    let second = ZkInterProcessReadWriteLock::new(&zkw_b, &znode, None)
        .unwrap()
        .write_lock(b"second");
    let waiting = std::thread::spawn(move || second.acquire().map(|()| second));
    let doc = next_document(&docs);
    assert_eq!(
        summary(&doc),
        [
            ("holder".into(), "write".into(), a, "first".into()),
            ("waiter".into(), "write".into(), b.clone(), "second".into()),
        ]
    );
    quiet(&docs, "idle, a waiter");

    first.release().unwrap();
    let doc = next_document(&docs);
    assert_eq!(
        summary(&doc),
        [("holder".into(), "write".into(), b, "second".into())]
    );
    let second = waiting.join().unwrap().unwrap();
    assert_eq!(
        doc[0]["fencing_token"],
        second.acquired_lock().unwrap().fencing_token()
    );
    quiet(&docs, "idle, handed over");

    // The table watcher saw the same three states, each under a heading.
    let mut seen = Vec::new();
    wait_until(WAIT, "the table's three listings", || {
        seen.extend(rows.try_iter());
        seen.iter().filter(|l| l.contains("second")).count() == 2
    });
    signal(&table, Signal::SIGINT);
    assert_eq!(wait_for(&mut table, WAIT).code(), Some(0));
    seen.extend(rows.try_iter());
    let headings = seen
        .iter()
        .filter(|l| l.starts_with(&format!("== {znode} at ")) && l.ends_with(" UTC =="))
        .count();
    assert_eq!(headings, 3, "{seen:#?}");
    assert_eq!(
        seen.iter().filter(|l| l.starts_with("STATE")).count(),
        3,
        "{seen:#?}"
    );
    assert_eq!(stderr_of(&mut table), "");

    // Released: an empty document; the znode deleted: the same, so nothing;
    // taken again: the watch on its existence brings the new holder.
    second.release().unwrap();
    assert_eq!(next_document(&docs), serde_json::json!([]));
    quiet(&docs, "idle, free");
    raw().delete(&znode, None).unwrap();
    quiet(&docs, "deleted");
    let third = ZkInterProcessReadWriteLock::new(&zkw_a, &znode, None)
        .unwrap()
        .write_lock(b"third");
    third.acquire().unwrap();
    assert_eq!(
        summary(&next_document(&docs)),
        [(
            "holder".into(),
            "write".into(),
            hex_session(&zkw_a),
            "third".into()
        )]
    );

    signal(&json, Signal::SIGTERM);
    assert_eq!(wait_for(&mut json, WAIT).code(), Some(0));
    assert_eq!(stderr_of(&mut json), "");
    third.release().unwrap();
    zkw_a.close().unwrap();
    zkw_b.close().unwrap();
}

/// `ls --watch` through a proxy: a waiter that arrives while the connection
/// is down is shown once reconnected (stderr says both); after the session
/// expired (the proxy stalled past the session timeout, the server dropped
/// the session) a new session is opened, stderr says so, and the lock is
/// read again: the hand-over that happened meanwhile is printed.
#[test]
fn ls_watch_reads_again_after_a_reconnect_and_after_a_session_expiry() {
    use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
    use zklock::testing::FaultProxy;
    let znode = unique_root("cli-watch-faults");
    let (zkw_a, zkw_b) = (common::local_zkw(), common::local_zkw());
    let first = ZkInterProcessReadWriteLock::new(&zkw_a, &znode, None)
        .unwrap()
        .write_lock(b"first");
    first.acquire().unwrap();
    let (a, b) = (hex_session(&zkw_a), hex_session(&zkw_b));
    let proxy = FaultProxy::start(local()).unwrap();
    let mut watch = start(&[
        "--zk",
        &proxy.connect_string(),
        "ls",
        &znode,
        "--watch",
        "--json",
    ]);
    let (docs, errs) = (stdout_lines(&mut watch), stderr_lines(&mut watch));
    assert_eq!(summary(&next_document(&docs)).len(), 1);

    // A reconnect within the session; the change came while cut off.
    proxy.stall();
    let second = ZkInterProcessReadWriteLock::new(&zkw_b, &znode, None)
        .unwrap()
        .write_lock(b"second");
    let waiting = std::thread::spawn(move || second.acquire().map(|()| second));
    let zk = common::local_raw();
    wait_until(WAIT, "the waiter queued", || {
        lock_nodes(&zk, &znode).len() == 2
    });
    proxy.reset();
    let doc = next_document(&docs);
    assert_eq!(
        summary(&doc),
        [
            ("holder".into(), "write".into(), a, "first".into()),
            ("waiter".into(), "write".into(), b.clone(), "second".into()),
        ]
    );
    let said_until = |what: &str| -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let line = errs
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("stderr never said {what:?}: {lines:#?}"));
            let done = line.contains(what);
            lines.push(line);
            if done {
                return lines;
            }
        }
    };
    let lines = said_until("reconnected to ZooKeeper (session 0x");
    assert!(
        lines[0].contains("connection to ZooKeeper lost"),
        "{lines:#?}"
    );
    let session = lines
        .last()
        .and_then(|l| l.split("(session ").nth(1))
        .and_then(|s| s.split(')').next())
        .unwrap()
        .to_string();

    // An expiry: stalled until the server has dropped the session.
    proxy.stall();
    first.release().unwrap();
    let second = waiting.join().unwrap().unwrap();
    wait_until(
        Duration::from_secs(30),
        "the server expired the session",
        || {
            !four_letter(&local(), "cons")
                .unwrap_or_default()
                .contains(&format!("sid={session}"))
        },
    );
    proxy.pass();
    let lines = said_until("new session 0x");
    assert!(
        lines.iter().any(|l| l.contains("the session expired")),
        "{lines:#?}"
    );
    assert!(!lines.last().unwrap().contains(&session), "{lines:#?}");
    let doc = next_document(&docs);
    assert_eq!(
        summary(&doc),
        [("holder".into(), "write".into(), b, "second".into())]
    );
    signal(&watch, Signal::SIGTERM);
    assert_eq!(wait_for(&mut watch, WAIT).code(), Some(0));
    second.release().unwrap();
    zkw_a.close().unwrap();
    zkw_b.close().unwrap();
}

/// `stat` of a missing path fails as `ls` does (exit 1, "no such node"), so
/// does `ls --watch`; of a parent of locks it fails saying what it is and
/// which path to give; of an idle lock it shows no holders and the stat.
/// `--help` documents `stat` and `ls --watch`.
#[test]
fn stat_of_a_missing_path_or_a_non_lock_fails_in_one_line() {
    let root = unique_root("cli-stat-what");
    let missing = format!("{root}/nothing");
    let says = format!("no such node: {missing}");
    fails_in_one_line(&["stat", &missing], 1, &says);
    fails_in_one_line(&["stat", &missing, "--json"], 1, &says);

    let zk = raw();
    let (parent, child) = (format!("{root}/app"), format!("{root}/app/config"));
    // With its parents: run alone, the test's is the first root.
    common::client::mkdirs(&zk, &child);
    fails_in_one_line(
        &["stat", &parent],
        1,
        &format!(
            "{parent} is not a lock, semaphore or election: it holds 1 other znode(s) (config)"
        ),
    );
    fails_in_one_line(&["stat", &parent, "--json"], 1, "is not a lock");
    // An idle lock (no children): its stat, no holders.
    let out = run(&["stat", &child]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("0 holder(s), 0 waiter(s)"),
        "{}",
        text(&out.stdout)
    );
    let stat = json_of(&run(&["stat", &child, "--json"]));
    assert_eq!(stat["holders"], serde_json::json!([]), "{stat}");
    assert_eq!(stat["waiters"], serde_json::json!([]), "{stat}");
    assert_eq!(stat["stat"]["num_children"], 0, "{stat}");

    let help = text(&run(&["--help"]).stdout);
    assert!(help.contains("stat "), "{help}");
    let help = text(&run(&["ls", "--help"]).stdout);
    assert!(
        help.contains("--watch") && help.contains("fencing_token"),
        "{help}"
    );
    let help = text(&run(&["stat", "--help"]).stdout);
    assert!(
        help.contains("--json") && help.contains("holders"),
        "{help}"
    );
    common::client::rmr(&zk, &root);
}

/// `stat --json` of a semaphore (limit 1): its lease is the holder (kind
/// `lease`, the library's lease token and session), the session queued in
/// its mutex the waiter; once handed over, the new lease's token.
#[test]
fn stat_json_of_a_semaphore_shows_its_lease_and_its_queue() {
    use zklock::lock::ZkSemaphore;
    let znode = unique_root("cli-stat-semaphore");
    let (zkw_a, zkw_b) = (common::zkw(), common::zkw());
    let (a, b) = (hex_session(&zkw_a), hex_session(&zkw_b));
    let lease = ZkSemaphore::new(&zkw_a, &znode, 1, b"lease-a")
        .unwrap()
        .acquire()
        .unwrap();
    let semaphore_b = ZkSemaphore::new(&zkw_b, &znode, 1, b"lease-b").unwrap();
    let waiting = std::thread::spawn(move || semaphore_b.acquire());
    let mut stat = serde_json::Value::Null;
    wait_until(WAIT, "the second session queued", || {
        stat = json_of(&run(&["stat", &znode, "--json"]));
        stat["waiters"].as_array().is_some_and(|w| w.len() == 1)
    });
    assert_eq!(
        summary(&stat["holders"]),
        [("holder".into(), "lease".into(), a, "lease-a".into())],
        "{stat}"
    );
    assert_eq!(stat["holders"][0]["fencing_token"], lease.fencing_token());
    assert_eq!(stat["holders"][0]["path"], lease.path(), "{stat}");
    assert_eq!(stat["waiters"][0]["state"], "waiter", "{stat}");
    // A waiter for a lease (issue 48: it showed as `write`, its mutex node's).
    assert_eq!(stat["waiters"][0]["kind"], "lease", "{stat}");
    assert_eq!(stat["waiters"][0]["session"], b.as_str(), "{stat}");
    assert!(
        stat["waiters"][0]["node"]
            .as_str()
            .unwrap()
            .starts_with("locks/"),
        "{stat}"
    );

    lease.release().unwrap();
    let lease = waiting.join().unwrap().unwrap();
    let stat = json_of(&run(&["stat", &znode, "--json"]));
    assert_eq!(
        summary(&stat["holders"]),
        [("holder".into(), "lease".into(), b, "lease-b".into())],
        "{stat}"
    );
    assert_eq!(stat["holders"][0]["fencing_token"], lease.fencing_token());
    assert_eq!(stat["waiters"], serde_json::json!([]), "{stat}");
    lease.release().unwrap();
    zkw_a.close().unwrap();
    zkw_b.close().unwrap();
}

// ---------------------------------------------------------------------------
// Issue 48: quiet by default, a hold without a command, messages that mislead
// ---------------------------------------------------------------------------

/// Silent by default, as flock(1): a lock taken (`-n -E 0`, docs/cli.md's
/// "skip quietly if taken"), a timeout and a wait that ends in the lock
/// print nothing on a non-terminal stderr; `-v` talks.
#[test]
fn quiet_by_default_and_verbose_talks() {
    let (root, dir) = (unique_root("cli-quiet"), temp_dir("quiet"));
    let znode = format!("{root}/job");
    let (mut holder, release) = start_holder(&znode, &dir, "busy", "lock");
    let out = run(&["lock", "-n", "-E", "0", &znode, "--", "true"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stderr), "", "lock -n -E 0 says nothing");
    assert_eq!(text(&out.stdout), "");
    let out = run(&["lock", "-t", "300ms", &znode, "--", "true"]);
    assert_eq!(out.status.code(), Some(75));
    assert_eq!(text(&out.stderr), "", "a timeout is its exit code");
    // -v: the same conflict, told.
    let out = run(&["lock", "-v", "-n", "-E", "0", &znode, "--", "true"]);
    assert!(
        text(&out.stderr).contains("is taken"),
        "{}",
        text(&out.stderr)
    );
    // A waiter that gets the lock after a wait: silent, its command's output alone.
    let mut waiter = start(&["lock", &znode, "--", "echo", "ran"]);
    let zk = raw();
    wait_until(WAIT, "the waiter queued", || {
        lock_nodes(&zk, &znode).len() == 2
    });
    std::fs::write(&release, "").unwrap();
    assert!(wait_for(&mut holder, WAIT).success());
    assert!(wait_for(&mut waiter, WAIT).success());
    assert_eq!(stderr_of(&mut waiter), "", "no waiting or got lines");
    let mut out = String::new();
    waiter
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(out, "ran\n");
}

/// The first line a holding `zklock` prints on stdout.
fn first_stdout_line(child: &mut Child) -> String {
    let lines = stdout_lines(child);
    lines.recv_timeout(WAIT).expect("the held lock's line")
}

/// `lock PATH` / `read-lock PATH` / `semaphore PATH` with no command hold
/// until SIGTERM (then release, exit 0), printing the node and the fencing
/// token (or `--json`'s object); a lost lock is exit 3 and said on stderr.
#[test]
fn hold_without_a_command_until_a_signal_and_a_lost_lock_is_exit_3() {
    let root = unique_root("cli-hold");
    let zk = raw();
    for (kind, extra) in [
        ("lock", None),
        ("read-lock", None),
        ("semaphore", Some("2")),
    ] {
        let znode = format!("{root}/{kind}");
        let mut args = vec![kind, znode.as_str()];
        if let Some(limit) = extra {
            args.extend(["--limit", limit]);
        }
        let mut holder = start(&args);
        let line = first_stdout_line(&mut holder);
        let (node, token) = line.split_once(' ').expect("node and token");
        let stat = zk.exists(node, false).unwrap().expect("the held node");
        assert_eq!(token.parse::<i64>().unwrap(), stat.czxid, "{kind}: {line}");
        assert_ne!(stat.ephemeral_owner, 0, "{kind}");
        signal(&holder, Signal::SIGTERM);
        assert_eq!(wait_for(&mut holder, WAIT).code(), Some(0), "{kind}");
        assert!(
            zk.exists(node, false).unwrap().is_none(),
            "{kind}: released"
        );
        assert_eq!(stderr_of(&mut holder), "", "{kind}: silent");
    }
    // --json; SIGINT too.
    let znode = format!("{root}/json");
    let mut holder = start(&["lock", &znode, "--json"]);
    let held: serde_json::Value = serde_json::from_str(&first_stdout_line(&mut holder)).unwrap();
    assert_eq!(held["lock"], znode.as_str(), "{held}");
    let node = held["node"].as_str().unwrap().to_string();
    let stat = zk.exists(&node, false).unwrap().expect("held");
    assert_eq!(held["fencing_token"], stat.czxid, "{held}");
    assert_eq!(
        held["session"],
        format!("0x{:x}", stat.ephemeral_owner).as_str()
    );
    // Held: another gives up.
    assert_eq!(
        run(&["lock", "-n", &znode, "--", "true"]).status.code(),
        Some(75)
    );
    signal(&holder, Signal::SIGINT);
    assert_eq!(wait_for(&mut holder, WAIT).code(), Some(0));
    // Lost (reaped): exit 3, said on stderr.
    let mut holder = start(&["lock", &znode]);
    first_stdout_line(&mut holder);
    assert!(run(&["reap", &znode, "--all"]).status.success());
    assert_eq!(wait_for(&mut holder, WAIT).code(), Some(3));
    let err = stderr_of(&mut holder);
    assert!(err.contains("lost the write lock"), "{err}");
    common::client::rmr(&zk, &root);
}

/// docs/cli.md's and `lock --help`'s shell example holds the lock across
/// several steps (bash's coproc), and releases it with `kill`.
#[test]
fn the_documented_hold_across_steps_pattern_works() {
    let root = unique_root("cli-hold-steps");
    let znode = format!("{root}/deploy");
    let help = text(&run(&["lock", "--help"]).stdout);
    assert!(
        help.contains("coproc HOLD { exec zklock lock /locks/deploy"),
        "{help}"
    );
    let script = format!(
        r#"coproc HOLD {{ exec zklock --session-timeout 4s lock {znode} -t 1m; }}
read -r node token <&"${{HOLD[0]}}" || exit 75
zklock lock -n {znode} -- true; echo "step1 $?"
zklock ls {znode} --json | grep -c "$node"
echo "token $token"
kill "$HOLD_PID"; wait "$HOLD_PID"; echo "released $?"
zklock lock -n {znode} -- true; echo "after $?"
"#
    );
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_zklock")).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let mut child = Command::new("bash")
        .args(["-c", &script])
        .env("PATH", path)
        .env("ZK_SERVERS", test_servers())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_for(&mut child, WAIT).success(),
        "{}",
        stderr_of(&mut child)
    );
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "step1 75", "held during the steps: {out}");
    assert_eq!(lines[1], "1", "ls shows the held node: {out}");
    assert!(
        lines[2].starts_with("token ") && lines[2][6..].parse::<i64>().is_ok(),
        "{out}"
    );
    assert_eq!(lines[3], "released 0", "{out}");
    assert_eq!(lines[4], "after 0", "free after the kill: {out}");
}

/// A mistyped flag or subcommand keeps clap's suggestion, and gets no
/// "put the command after --" hint; flock's `-x` gets its own hint; a
/// negative duration is named.
#[test]
fn typos_keep_clap_suggestions_and_flocks_flags_get_hints() {
    for (args, says) in [
        (
            vec!["lock", "--tiemout", "1s", "/x", "--", "true"],
            "a similar argument exists: '--timeout'",
        ),
        (vec!["lok", "/x"], "a similar subcommand exists: 'lock'"),
        (vec!["lock", "-x", "/x", "--", "true"], "flock's -x"),
        (
            vec!["lock", "-t", "-1s", "/x", "--", "true"],
            "negative duration \"-1s\"",
        ),
        (
            vec!["lock", "--session-timeout", "-5s", "/x", "--", "true"],
            "negative duration",
        ),
        (vec!["elect", "-n", "/e", "--", "true"], "--name"),
    ] {
        let out = run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("put the command after --"), "{args:?}: {err}");
    }
    // A word that is not a flag still gets the hint.
    let out = run(&["lock", "/x", "./backup.sh"]);
    assert!(text(&out.stderr).contains("put the command after --"));
    // Compound durations.
    let root = unique_root("cli-durations");
    let out = run(&["lock", "-t", "1h30m", &format!("{root}/d"), "--", "true"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The short flags of every subcommand's help, each with its long name.
fn short_flags(help: &str) -> Vec<(char, String)> {
    let mut found = Vec::new();
    for line in help.lines().map(str::trim_start) {
        let Some(rest) = line.strip_prefix('-') else {
            continue;
        };
        let mut chars = rest.chars();
        let (Some(short), Some(',')) = (chars.next(), chars.next()) else {
            continue;
        };
        let long: String = chars
            .as_str()
            .trim_start()
            .split(|c: char| c.is_whitespace() || c == '=')
            .next()
            .unwrap_or("")
            .to_string();
        found.push((short, long.clone()));
        if let Some(i) = line.find("[aliases: -") {
            let alias = line[i + "[aliases: -".len()..].chars().next().unwrap();
            found.push((alias, long));
        }
    }
    found
}

/// One meaning per short flag across the subcommands (issue 48: `-n` was
/// lock's --nonblock and elect's --name, `-w` lock's --timeout and ls's
/// --watch); the connection options under their own heading after the
/// subcommand's own; `-h` short, `--help` complete.
#[test]
fn one_meaning_per_short_flag_and_the_global_options_have_their_heading() {
    let mut meaning: std::collections::HashMap<char, (String, String)> = Default::default();
    for sub in [
        "lock",
        "read-lock",
        "semaphore",
        "ls",
        "stat",
        "reap",
        "elect",
        "leader",
        "server",
        "whoami",
    ] {
        let help = text(&run(&[sub, "--help"]).stdout);
        for (short, long) in short_flags(&help) {
            let (first_sub, first_long) = meaning
                .entry(short)
                .or_insert_with(|| (sub.to_string(), long.clone()))
                .clone();
            assert_eq!(
                first_long, long,
                "-{short} is {first_long} in {first_sub} and {long} in {sub}"
            );
        }
    }
    let long = text(&run(&["lock", "--help"]).stdout);
    let heading = long.find("Connection options").expect("a heading");
    assert!(long.find("--nonblock").unwrap() < heading, "{long}");
    assert!(long.find("--sasl-user").unwrap() > heading, "{long}");
    let short = text(&run(&["lock", "-h"]).stdout);
    assert!(short.contains("Connection options"), "{short}");
    assert!(short.lines().count() < long.lines().count(), "{short}");
    assert!(
        !short.contains("InterProcessSemaphoreV2"),
        "-h is short: {short}"
    );
    assert!(long.contains("InterProcessSemaphoreV2"), "--help is whole");
}

/// `reap`, `ls` and `stat` agree: a missing path is exit 1 ("no such
/// node"), a parent of locks exit 1 naming one; `ls /` and `stat /` read
/// the root instead of refusing it.
#[test]
fn reap_ls_and_stat_agree_on_missing_paths_and_the_root_is_readable() {
    let root = unique_root("cli-agree");
    let missing = format!("{root}/nope");
    fails_in_one_line(
        &["reap", &missing, "--all"],
        1,
        &format!("no such node: {missing}"),
    );
    fails_in_one_line(&["reap", &missing, "--older-than", "1h"], 1, "no such node");
    for sub in ["ls", "stat"] {
        let out = run(&[sub, "/"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{sub} /: {err}");
        assert!(
            err.contains("/ is not a lock") && err.contains("zookeeper"),
            "{sub} /: {err}"
        );
        assert!(!err.contains("root"), "not refused: {err}");
    }
}

/// `ls --watch` of a path that does not exist yet waits for it (as after a
/// deletion), instead of exit 1.
#[test]
fn ls_watch_of_a_path_not_there_yet_waits_for_it() {
    let znode = unique_root("cli-watch-later");
    let mut watch = start(&["ls", &znode, "--watch", "--json"]);
    let docs = stdout_lines(&mut watch);
    assert_eq!(next_document(&docs), serde_json::json!([]));
    // Held until seen (a lock taken and released at once may come and go
    // between two reads, leaving `[]` again, which is not printed twice).
    let mut holder = start(&["lock", &znode, "-m", "late"]);
    first_stdout_line(&mut holder);
    let mut saw_holder = false;
    while !saw_holder {
        let doc = next_document(&docs);
        saw_holder = doc
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["metadata"] == "late");
    }
    signal(&holder, Signal::SIGTERM);
    assert_eq!(wait_for(&mut holder, WAIT).code(), Some(0));
    signal(&watch, Signal::SIGTERM);
    assert_eq!(wait_for(&mut watch, WAIT).code(), Some(0));
}

/// `stat`: times as dates, zxids in hex and in decimal (as the FENCING
/// column and $ZKLOCK_FENCING_TOKEN).
#[test]
fn stat_prints_dates_and_zxids_a_fencing_token_can_be_matched_to() {
    let root = unique_root("cli-stat-dates");
    let znode = format!("{root}/job");
    let mut holder = start(&["lock", &znode]);
    let line = first_stdout_line(&mut holder);
    let token = line.split_once(' ').unwrap().1.to_string();
    let out = run(&["stat", &znode]);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ctime = said.lines().find(|l| l.contains("ctime =")).unwrap();
    // `ctime = 2026-12-04T01:57:07.123Z (2.1s ago)`, not milliseconds.
    assert!(
        ctime.contains("= 20") && ctime.contains('T') && ctime.contains("Z ("),
        "{ctime}"
    );
    let czxid = said.lines().find(|l| l.contains("cZxid =")).unwrap();
    let (hex, dec) = czxid.split_once(" (").unwrap();
    let hex = i64::from_str_radix(hex.trim().trim_start_matches("cZxid = 0x"), 16).unwrap();
    assert_eq!(
        dec.trim_end_matches(')').parse::<i64>().unwrap(),
        hex,
        "{czxid}"
    );
    assert!(
        said.contains(&token),
        "the holder's token as printed: {said}"
    );
    signal(&holder, Signal::SIGTERM);
    assert_eq!(wait_for(&mut holder, WAIT).code(), Some(0));
}

/// One JSON schema: `ls --show-acl --json` is the znode's object (path,
/// acl) then each node's `ls --json` object with its acl, ACL entries as
/// objects; a missing path fails as `ls` does.
#[test]
fn show_acl_json_shares_ls_json_objects() {
    let root = unique_root("cli-acl-schema");
    let znode = format!("{root}/job");
    let mut holder = start(&["lock", &znode, "-m", "h"]);
    first_stdout_line(&mut holder);
    let ls = json_of(&run(&["ls", &znode, "--json"]));
    let acl = json_of(&run(&["ls", &znode, "--show-acl", "--json"]));
    let items = acl.as_array().unwrap();
    assert_eq!(items.len(), 2, "{acl}");
    assert_eq!(items[0]["path"], znode.as_str(), "{acl}");
    assert_eq!(
        items[0]["acl"],
        serde_json::json!([{"scheme": "world", "id": "anyone", "perms": "cdrwa"}]),
        "{acl}"
    );
    let mut node = items[1].clone();
    assert!(node["acl"].is_array(), "{acl}");
    node.as_object_mut().unwrap().remove("acl");
    node.as_object_mut().unwrap().remove("age_ms");
    let mut listed = ls[0].clone();
    listed.as_object_mut().unwrap().remove("age_ms");
    assert_eq!(node, listed, "the same object as ls --json's");
    fails_in_one_line(
        &["ls", &format!("{root}/nope"), "--show-acl"],
        1,
        "no such node",
    );
    signal(&holder, Signal::SIGTERM);
    assert_eq!(wait_for(&mut holder, WAIT).code(), Some(0));
}

/// A fake server that answers every connection with an HTTP error.
fn http_server() -> (String, std::thread::JoinHandle<()>) {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    listener.set_nonblocking(true).unwrap();
    let handle = std::thread::spawn(move || {
        let end = Instant::now() + WAIT;
        while Instant::now() < end {
            match listener.accept() {
                Ok((mut s, _)) => {
                    let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (addr, handle)
}

/// A host that does not resolve fails at once (not after the connect
/// wait) saying so; a server that answers, but not as ZooKeeper, too.
#[test]
fn an_unresolvable_host_or_a_server_that_is_not_zookeeper_fails_at_once_saying_so() {
    // Behaviour, not speed: long before the 60 s connect wait.
    let t = Instant::now();
    let out = run(&[
        "--zk",
        "no-such-host.invalid:2181",
        "--connect-timeout",
        "60s",
        "ls",
        "/x",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot resolve"), "{err}");
    assert!(!err.contains(": connection loss"), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );

    let (http, _server) = http_server();
    let t = Instant::now();
    let out = run(&["--zk", &http, "--connect-timeout", "60s", "ls", "/x"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not as ZooKeeper") && err.contains("HTTP/1.1 400"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
}

/// `export ZK_SERVERS=$(zklock server --detach)` run again: the server
/// ZK_SERVERS names is said to serve already, and its connect string
/// printed again (ZK_SERVERS keeps it); a port taken by something else is
/// said so.
#[test]
fn server_detach_run_again_keeps_zk_servers_and_a_taken_port_says_why() {
    let servers = test_servers();
    let Some(port) = servers
        .strip_prefix("127.0.0.1:")
        .filter(|p| !p.contains(','))
    else {
        eprintln!("skipped: ZK_SERVERS={servers} is no local single server");
        return;
    };
    let mut c = Command::new(env!("CARGO_BIN_EXE_zklock"));
    let out = c
        .args(["server", "--detach"])
        .env("ZK_SERVERS", &servers)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), format!("127.0.0.1:{port}"));
    assert!(
        text(&out.stderr).contains("already serves"),
        "{}",
        text(&out.stderr)
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_zklock"))
        .args(["server", "--detach"])
        .env("ZK_SERVERS", &addr)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("already in use"), "the reason: {err}");
}

/// docs/cli.md's comparison credits each tool only with what its own
/// documentation shows: `etcdctl lock` has no `--timeout` (its timeouts are
/// the global `--dial-timeout`/`--command-timeout`; `lock` has `--ttl`).
#[test]
fn the_comparison_table_does_not_credit_etcdctl_lock_with_a_timeout() {
    let doc = include_str!("../docs/cli.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with("| non-blocking, timeout"))
        .expect("the row");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert!(!cells[3].contains("--timeout"), "etcdctl's cell: {row}");
}

/// `zklock config` prints the ensemble's configuration, as the server's text
/// and as JSON, with the chroot of `--zk` not applying (ZooKeeper's
/// getConfig); a standalone server's empty configuration is exit 1 and a
/// sentence, not an empty line.
#[test]
fn config_prints_the_ensembles_members_and_version() {
    let out = run(&["config"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("standalone"), "{out:?}");

    let ensemble = zklock::testing::ZkEnsemble::start_reconfigurable().expect("ensemble");
    let admin = ZooKeeper::connect(&ensemble.connect_string(), WAIT, |_e| {}).expect("connect");
    for node in ["/some", "/some/chroot"] {
        admin
            .create(
                node,
                b"",
                zklock::client::Acl::open_unsafe(),
                zklock::client::CreateMode::Persistent,
            )
            .expect("create the chroot");
    }
    let zk = format!("{}/some/chroot", ensemble.connect_string());
    let out = run(&["--zk", &zk, "config"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let plain = text(&out.stdout);
    let members: Vec<&str> = plain.lines().filter(|l| l.starts_with("server.")).collect();
    assert_eq!(members.len(), 3, "{plain}");
    let version = plain
        .lines()
        .find_map(|l| l.strip_prefix("version="))
        .unwrap_or_else(|| panic!("no version line: {plain}"));
    let version = i64::from_str_radix(version.trim(), 16).expect("a hex version");

    let out = run(&["--zk", &zk, "config", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(json["version"], version, "{json}");
    let servers = json["servers"].as_array().expect("servers");
    assert_eq!(servers.len(), 3, "{json}");
    let clients: Vec<String> = servers
        .iter()
        .map(|s| s["client"].as_str().expect("a client address").to_string())
        .collect();
    for client in &clients {
        assert!(
            ensemble.connect_string().split(',').any(|c| c == client),
            "{client} is not one of {}",
            ensemble.connect_string()
        );
    }
    assert_eq!(json["connect_string"], clients.join(","), "{json}");
}
