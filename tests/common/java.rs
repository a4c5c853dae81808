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

use zklock::client::{Acl, CreateMode, Id, ZooKeeper};
use zklock::testing::ScratchDir;
use zklock::ZkError;

/// The Java client of the server version under test (`ZK_TEST_VERSION`), with
/// its Netty jars (TLS): `zklock::testing::java_client_classpath`.
fn jars() -> String {
    zklock::testing::java_client_classpath().unwrap_or_else(|e| panic!("{e}"))
}

/// Compiles tests/java/TlsClient.java once; panics with the fix when there is
/// no JDK (no silent skip).
fn java_classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Used by every Java client of this binary: removed when the process ends.
        let out = ScratchDir::new("java")
            .and_then(ScratchDir::until_exit)
            .unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/TlsClient.java");
        let status = Command::new("javac")
            .args(["-nowarn", "-proc:none", "-implicit:none", "-d"])
            .arg(&out)
            .args(["-cp", &jars()])
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
        let cp = format!("{}:{}", java_classes().display(), jars());
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

/// The JVM options of a Java client authenticating with DIGEST-MD5 as
/// `user` (a JAAS `Client` section with `DigestLoginModule`, in a file of a
/// scratch directory shared by the process and removed when it ends: a JVM
/// may read the file whenever it logs in).
pub fn jaas_options(user: &str, password: &str) -> Vec<String> {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        ScratchDir::new("sasl-java")
            .and_then(ScratchDir::until_exit)
            .unwrap()
    });
    let file = dir.join(format!("{user}.jaas"));
    std::fs::write(
        &file,
        format!(
            "Client {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
             username=\"{user}\"\n  password=\"{password}\";\n}};\n"
        ),
    )
    .unwrap();
    vec![format!(
        "-Djava.security.auth.login.config={}",
        file.display()
    )]
}

/// zklock (`za`, `zb`) and the Java client (`ja`, `jb`) as alice and bob,
/// with the same credentials, under a fresh `root`: the node each creates
/// with `CREATOR_ALL` carries the same ids (`alice_ids`: `sasl:alice`,
/// `x509:<DN>`, or both over TLS with SASL, in the order the server learnt
/// them); alice reads both on either client, bob neither (nor their
/// ACLs: READ is needed since ZooKeeper 3.6); bob's world-readable node is
/// read by alice and written by nobody. Removes what it made.
pub fn same_identities_and_acls(
    za: &ZooKeeper,
    zb: &ZooKeeper,
    ja: &mut JavaClient,
    jb: &mut JavaClient,
    root: &str,
    alice_ids: &[Id],
) {
    let no_auth = |r: zklock::Result<_>| match r {
        Err(e) if e.is(ZkError::NoAuth) => {}
        other => panic!("expected NoAuth, got {other:?}"),
    };
    za.create(root, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let by_rust = format!("{root}/by-zklock");
    let by_java = format!("{root}/by-java");
    za.create(&by_rust, b"r", Acl::creator_all(), CreateMode::Persistent)
        .unwrap();
    assert_eq!(
        ja.ask(&format!("create {by_java} j creator")),
        format!("ok {by_java}")
    );
    // An ACL is a set: the server lists a node's ids in the order the
    // connection authenticated them, which may differ between clients.
    let mut alice_all: Vec<String> = alice_ids
        .iter()
        .map(|id| format!("31:{}:{}", id.scheme, id.id))
        .collect();
    alice_all.sort();
    let zklock_form = |acl: Vec<Acl>| {
        let mut v: Vec<String> = acl
            .iter()
            .map(|a| format!("{}:{}:{}", a.perms.0, a.id.scheme, a.id.id))
            .collect();
        v.sort();
        v
    };
    let java_form = |answer: String| {
        let mut words = answer.split_whitespace();
        assert_eq!(words.next(), Some("acl"), "{answer}");
        let mut v: Vec<String> = words.map(str::to_string).collect();
        v.sort();
        v
    };
    assert_eq!(zklock_form(za.get_acl(&by_rust).unwrap().0), alice_all);
    assert_eq!(zklock_form(za.get_acl(&by_java).unwrap().0), alice_all);
    assert_eq!(java_form(ja.ask(&format!("acl {by_rust}"))), alice_all);
    assert_eq!(java_form(ja.ask(&format!("acl {by_java}"))), alice_all);
    assert_eq!(jb.ask(&format!("acl {by_rust}")), "err NOAUTH");
    no_auth(zb.get_acl(&by_java).map(drop));
    assert_eq!(za.get_data(&by_java, false).unwrap().0, b"j");
    assert_eq!(ja.ask(&format!("get {by_rust}")), "data r");
    no_auth(zb.get_data(&by_rust, false).map(drop));
    no_auth(zb.get_data(&by_java, false).map(drop));
    assert_eq!(jb.ask(&format!("get {by_rust}")), "err NOAUTH");
    assert_eq!(jb.ask(&format!("set {by_java} x")), "err NOAUTH");
    let bobs = format!("{root}/bobs");
    assert_eq!(
        jb.ask(&format!("create {bobs} b read")),
        format!("ok {bobs}")
    );
    assert_eq!(za.get_data(&bobs, false).unwrap().0, b"b");
    no_auth(za.set_data(&bobs, b"x", None).map(drop));
    assert_eq!(ja.ask(&format!("set {bobs} x")), "err NOAUTH");
    for p in [&by_rust, &by_java] {
        za.delete(p, None).unwrap();
    }
    assert_eq!(ja.ask(&format!("delete {bobs}")), "ok");
    za.delete(root, None).unwrap();
}
