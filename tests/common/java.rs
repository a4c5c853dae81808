//! The Java ZooKeeper client as the reference participant
//! (tests/java/TlsClient.java: one command per stdin line, one answer line
//! each), for the TLS and SASL tests: its security comes from JVM options
//! (`TestPki::java_client_options`, a JAAS `Client` section).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread;
use std::time::Duration;

use zklock::testing::NETTY_CLASSPATH;

const JARS: [&str; 2] = [
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-nop.jar",
];

/// Compiles tests/java/TlsClient.java once; panics with the fix when there is
/// no JDK (no silent skip).
fn java_classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = std::env::temp_dir().join(format!("zklock-java-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/TlsClient.java");
        let status = Command::new("javac")
            .args(["-nowarn", "-proc:none", "-implicit:none", "-d"])
            .arg(&out)
            .args(["-cp", &JARS.join(":")])
            .arg(src)
            .status()
            .expect("javac not found: run `make zookeeper` (installs default-jdk-headless)");
        assert!(status.success(), "javac failed");
        out
    })
}

/// The Java client started with `jvm_options` on `connect`. Killed on drop.
pub struct JavaClient {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl JavaClient {
    /// Starts it and waits for its "connected" line.
    pub fn start(jvm_options: &[String], connect: &str) -> JavaClient {
        let cp = format!(
            "{}:{}:{NETTY_CLASSPATH}",
            java_classes().display(),
            JARS.join(":")
        );
        let mut child = Command::new("java")
            .args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .args(jvm_options)
            .args(["-cp", &cp, "TlsClient", connect])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("java");
        let out = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let j = JavaClient {
            child,
            stdin,
            lines,
        };
        assert_eq!(j.line(), "connected");
        j
    }

    /// The next answer line.
    pub fn line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(40))
            .expect("an answer from the Java client")
    }

    /// Sends one command, returns its answer.
    pub fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        self.line()
    }
}

impl Drop for JavaClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
