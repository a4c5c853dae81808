//! SASL GSSAPI (Kerberos) against a real ZooKeeper 3.8 with `Krb5LoginModule`
//! ([`ZkServer::start_kerberos`]) and a local MIT KDC ([`TestKdc`], realm,
//! principals and keytabs made at test time); the Java client, with the same
//! principal, is the reference.
//!
//! GSSAPI takes its credentials from the process environment (`KRB5_CONFIG`,
//! `KRB5CCNAME`): this binary sets them once, before any Kerberos call, to
//! alice's ticket cache.

mod common;

use common::client::Events;
use common::java::JavaClient;

use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

use zklock::client::{Acl, CreateMode, Id, KeeperState, Perms, SaslConfig, ZooKeeper};
use zklock::testing::{FaultProxy, TestKdc, ZkServer};
use zklock::ZkError;

/// The KDC (zookeeper/localhost, alice, bob), alice's ticket cache in the
/// environment, and a Kerberos server.
fn shared() -> &'static (TestKdc, ZkServer) {
    static SHARED: OnceLock<(TestKdc, ZkServer)> = OnceLock::new();
    SHARED.get_or_init(|| {
        common::init_log();
        let kdc = TestKdc::start(&["zookeeper/localhost", "alice", "bob"]).expect("start a KDC");
        let cache = kdc.kinit("alice").expect("kinit alice");
        // Before any GSSAPI call of this process (none happens elsewhere).
        std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
        std::env::set_var("KRB5CCNAME", format!("FILE:{}", cache.display()));
        let server = ZkServer::start_kerberos(&kdc).expect("start a Kerberos ZooKeeper");
        (kdc, server)
    })
}

fn connect(
    cs: &str,
    server_principal: &str,
    events: &std::sync::Arc<Events>,
) -> zklock::Result<ZooKeeper> {
    ZooKeeper::builder(cs)
        .with_session_timeout(Duration::from_secs(6))
        .with_connect_wait(Duration::from_secs(15))
        .with_sasl(SaslConfig::kerberos(server_principal))
        .connect(events.watcher())
}

/// The JVM options of a Java client logging in as `principal` from its keytab.
fn java_as(kdc: &TestKdc, principal: &str) -> Vec<String> {
    let file = kdc.dir().join(format!("{principal}-client.jaas"));
    let mut f = std::fs::File::create(&file).unwrap();
    write!(
        f,
        "Client {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  \
         useKeyTab=true\n  keyTab=\"{}\"\n  storeKey=true\n  useTicketCache=false\n  \
         principal=\"{}\";\n}};\n",
        kdc.keytab(principal).display(),
        kdc.full_name(principal)
    )
    .unwrap();
    vec![
        format!("-Djava.security.auth.login.config={}", file.display()),
        format!("-Djava.security.krb5.conf={}", kdc.krb5_conf().display()),
        "-Dzookeeper.sasl.client.canonicalize.hostname=false".into(),
    ]
}

/// alice's ticket: her session is `sasl:alice` (the server drops host and
/// realm), the same id the Java client gets from her keytab; each reads the
/// other's creator-only node, which bob's session may not.
#[test]
fn a_kerberos_session_is_sasl_alice_as_with_java() {
    let (kdc, server) = shared();
    let events = Events::new();
    let zk = connect(&server.connect_string(), "zookeeper/localhost", &events).unwrap();
    events.wait_state(KeeperState::SaslAuthenticated, 1, Duration::from_secs(5));
    let root = format!("/krb-{}", std::process::id());
    zk.create(&root, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let by_rust = format!("{root}/by-rust");
    zk.create(&by_rust, b"r", Acl::creator_all(), CreateMode::Persistent)
        .unwrap();
    let alice_all = [Acl::new(Perms::ALL, Id::sasl("alice"))];
    assert_eq!(zk.get_acl(&by_rust).unwrap().0, alice_all);
    let cs = format!("localhost:{}", server.port());
    let mut ja = JavaClient::start(&java_as(kdc, "alice"), &cs);
    let mut jb = JavaClient::start(&java_as(kdc, "bob"), &cs);
    let by_java = format!("{root}/by-java");
    assert_eq!(
        ja.ask(&format!("create {by_java} j creator")),
        format!("ok {by_java}")
    );
    assert_eq!(ja.ask(&format!("acl {by_rust}")), "acl 31:sasl:alice");
    assert_eq!(zk.get_acl(&by_java).unwrap().0, alice_all);
    assert_eq!(zk.get_data(&by_java, false).unwrap().0, b"j");
    assert_eq!(ja.ask(&format!("get {by_rust}")), "data r");
    assert_eq!(jb.ask(&format!("get {by_rust}")), "err NOAUTH");
    for p in [&by_rust, &by_java, &root] {
        zk.delete(p, None).unwrap();
    }
}

/// A service principal the KDC does not know: `AuthFailed` at once, told
/// once, one connection (no retry storm).
#[test]
fn an_unknown_service_principal_is_auth_failed_without_retries() {
    let (_kdc, server) = shared();
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", server.port())).unwrap();
    let events = Events::new();
    let r = connect(&proxy.connect_string(), "zookeeper/elsewhere", &events);
    common::assert_code(r, ZkError::AuthFailed);
    events.wait_state(KeeperState::AuthFailed, 1, Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(1)); // deliberate: a retry would show
    assert_eq!(proxy.accepted(), 1);
    assert_eq!(
        events.count(|e| e.path.is_none() && e.keeper_state == KeeperState::AuthFailed),
        1
    );
}
