//! TLS against a real ZooKeeper 3.8 configured the way operators do
//! (`secureClientPort`, the Netty server factory, `ssl.clientAuth=need`), with
//! certificates made at test time ([`TestPki`]); the Java client, with the
//! same certificates, is the reference.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread;
use std::time::Duration;

use zklock::testing::{ClientCert, TestPki, ZkServer, NETTY_CLASSPATH};

const JARS: [&str; 2] = [
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-nop.jar",
];

/// Compiles tests/java/TlsClient.java once; panics with the fix when there is
/// no JDK (no silent skip).
fn java_classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = std::env::temp_dir().join(format!("zklock-tls-java-{}", std::process::id()));
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

/// The Java client (tests/java/TlsClient.java) over TLS with `cert`: one
/// command per line, one answer line each. Killed on drop.
struct JavaClient {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl JavaClient {
    fn start(pki: &TestPki, cert: &ClientCert, connect: &str) -> JavaClient {
        let cp = format!(
            "{}:{}:{NETTY_CLASSPATH}",
            java_classes().display(),
            JARS.join(":")
        );
        let mut child = Command::new("java")
            .args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .args(pki.java_client_options(cert))
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

    fn line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(40))
            .expect("an answer from the Java client")
    }

    fn ask(&mut self, command: &str) -> String {
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

/// One PKI and one TLS server for the tests of this binary that do not stop it.
fn shared() -> &'static (TestPki, ZkServer) {
    static SHARED: OnceLock<(TestPki, ZkServer)> = OnceLock::new();
    SHARED.get_or_init(|| {
        common::init_log();
        let pki = TestPki::generate().expect("make the test PKI");
        let server = ZkServer::start_tls(&pki, false).expect("start a TLS ZooKeeper");
        (pki, server)
    })
}

fn secure(server: &ZkServer) -> String {
    server.secure_connect_string().expect("a TLS server")
}

#[test]
fn java_client_connects_over_tls_with_a_client_certificate() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let mut j = JavaClient::start(pki, &alice, &secure(server));
    let path = format!("/java-tls-{}", std::process::id());
    assert_eq!(
        j.ask(&format!("create {path} hello creator")),
        format!("ok {path}")
    );
    assert_eq!(
        j.ask(&format!("acl {path}")),
        format!("acl 31:x509:{}", alice.acl_id)
    );
    assert_eq!(j.ask(&format!("get {path}")), "data hello");
    assert_eq!(j.ask(&format!("delete {path}")), "ok");
}
