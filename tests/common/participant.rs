//! Participants from the other ecosystems, for the interop tests: a Java
//! program on Debian's ZooKeeper and Curator jars (`tests/java/<Class>.java`)
//! or a Python script on kazoo (`tests/python/<script>.py`, run by the venv
//! `make kazoo` builds), each driven by one command per stdin line and
//! answering with lines on stdout.
//!
//! The convention every participant program follows: it prints `ready` once
//! connected, then one answer line per command (plus unsolicited event lines
//! the test may [`expect`](Participant::expect)); it exits when stdin closes.
//! A participant is killed (SIGKILL) on drop, so a failing test leaves no
//! process behind.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use zklock::testing::ScratchDir;

/// ZooKeeper's own recipes (lock, election) a Java participant may use:
/// Debian's, built on 3.8's client API, which 3.6 and 3.9 keep.
pub const RECIPE_JARS: [&str; 2] = [
    "/usr/share/java/zookeeper-recipes-lock.jar",
    "/usr/share/java/zookeeper-recipes-election.jar",
];

/// The jars a Java participant runs on: the Java client of the server version
/// under test (`ZK_TEST_VERSION`: Debian's 3.8 by default, `make zookeeper`),
/// ZooKeeper's recipes ([`RECIPE_JARS`]) and that version's Curator (Debian's
/// 5.4 with 3.8, `make curator`; 5.7.1 with 3.9, 2.13.0 with 3.6;
/// `ZK_TEST_CURATOR` picks another): see `zklock::testing::curator_classpath`.
pub fn java_jars() -> String {
    let client = zklock::testing::java_client_classpath().unwrap_or_else(|e| panic!("{e}"));
    let curator = zklock::testing::curator_classpath().unwrap_or_else(|e| panic!("{e}"));
    let jars = format!("{client}:{}:{curator}", RECIPE_JARS.join(":"));
    for jar in jars.split(':') {
        assert!(
            Path::new(jar).exists(),
            "{jar} missing: run `make zookeeper curator` (and `make zookeeper-versions`)"
        );
    }
    jars
}

/// The kazoo venv's interpreter (`make kazoo`).
pub const KAZOO_PYTHON: &str = "target/kazoo-venv/bin/python";

/// How long an answer may take by default.
pub const ANSWER: Duration = Duration::from_secs(40);

/// Compiles `tests/java/<class>.java` once per test binary; panics with the
/// fix when a jar or the JDK is missing (no silent skip).
fn java_classes(class: &str) -> PathBuf {
    static DIRS: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut dirs = DIRS.get_or_init(Default::default).lock().unwrap();
    if let Some(dir) = dirs.get(class) {
        return dir.clone();
    }
    let jars = java_jars();
    // Used by every participant of this binary: removed when the process ends.
    let out = ScratchDir::new(&format!("participant-{class}"))
        .and_then(ScratchDir::until_exit)
        .unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/java/{class}.java"));
    let status = Command::new("javac")
        .args(["-nowarn", "-proc:none", "-implicit:none", "-d"])
        .arg(&out)
        .args(["-cp", &jars])
        .arg(&src)
        .status()
        .expect("javac not found: run `make zookeeper` (installs default-jdk-headless)");
    assert!(status.success(), "javac failed on {}", src.display());
    dirs.insert(class.to_string(), out.clone());
    out
}

/// A running participant (see the module docs). Killed on drop.
pub struct Participant {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Participant {
    /// Starts `java <class> <args>` (compiled from `tests/java/<class>.java`)
    /// and waits for its `ready` line.
    pub fn java(class: &str, args: &[&str]) -> Participant {
        let cp = format!("{}:{}", java_classes(class).display(), java_jars());
        let mut cmd = Command::new("java");
        cmd.args(["-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .args(["-cp", &cp, class])
            .args(args);
        Participant::start(class, cmd)
    }

    /// Starts `tests/python/<script>` on kazoo's venv and waits for its
    /// `ready` line.
    pub fn kazoo(script: &str, args: &[&str]) -> Participant {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let python = root.join(KAZOO_PYTHON);
        assert!(
            python.exists(),
            "{} missing: run `make kazoo`",
            python.display()
        );
        let mut cmd = Command::new(python);
        cmd.arg("-u")
            .arg(root.join("tests/python").join(script))
            .args(args);
        Participant::start(script, cmd)
    }

    fn start(name: &str, mut cmd: Command) -> Participant {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let out = child.stdout.take().unwrap();
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let p = Participant {
            name: name.to_string(),
            child,
            stdin,
            lines,
        };
        p.expect("ready", ANSWER);
        p
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command line.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin closed");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends one command and returns the next line (its answer).
    pub fn ask(&mut self, command: &str) -> String {
        self.send(command);
        self.line(ANSWER)
    }

    /// The next line within `timeout`; panics without one.
    pub fn line(&self, timeout: Duration) -> String {
        self.try_line(timeout)
            .unwrap_or_else(|| panic!("{}: no line within {timeout:?}", self.name))
    }

    /// The next line within `timeout`, if any.
    pub fn try_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// The next line starting with `prefix` within `timeout` (other lines
    /// are skipped); panics without one.
    pub fn expect(&self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(e) => panic!("{}: no {prefix:?} line within {timeout:?}: {e}", self.name),
            }
        }
    }

    /// Closes its stdin (a participant exits then) and waits for it to end.
    pub fn finish(mut self) {
        self.stdin.take();
        let _ = self.child.wait();
    }

    /// Kills it with SIGKILL (its session stays until it expires).
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        self.kill9();
    }
}
