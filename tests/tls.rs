//! TLS against a real ZooKeeper 3.8 configured the way operators do
//! (`secureClientPort`, the Netty server factory, `ssl.clientAuth=need`), with
//! certificates made at test time ([`TestPki`]); the Java client, with the
//! same certificates, is the reference.

mod common;

use common::java::JavaClient;

use std::io::Write;
use std::process::Command;
use std::sync::OnceLock;
use std::thread;
use std::time::Duration;

use zklock::testing::{ClientCert, ScratchDir, TestPki, ZkEnsemble, ZkServer};

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
    let mut j = JavaClient::start(&pki.java_client_options(&alice), &secure(server));
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

// ---------------------------------------------------------------------------
// zklock over TLS
// ---------------------------------------------------------------------------

use std::time::Instant;
use zklock::client::{
    Acl, CreateMode, Id, TlsConfig, TlsError, TlsVersion, ZooKeeper, ZooKeeperBuilder,
};
use zklock::testing::FaultProxy;
use zklock::{Error, ZkError};

/// TLS trusting `pki`'s CA, with `client`'s certificate when given.
fn tls(pki: &TestPki, client: Option<&ClientCert>) -> TlsConfig {
    let b = TlsConfig::builder().with_ca_file(pki.ca_pem());
    let b = match client {
        Some(c) => b.with_client_cert(&c.cert_pem, &c.key_pem),
        None => b,
    };
    b.build().expect("a TLS config")
}

fn builder(connect: &str, tls: Option<TlsConfig>) -> ZooKeeperBuilder {
    let b = ZooKeeper::builder(connect)
        .with_session_timeout(Duration::from_secs(6))
        .with_connect_wait(Duration::from_secs(20));
    match tls {
        Some(t) => b.with_tls(t),
        None => b,
    }
}

fn zk_as(pki: &TestPki, cert: &ClientCert, connect: &str) -> ZooKeeper {
    builder(connect, Some(tls(pki, Some(cert))))
        .connect(|_e| {})
        .expect("connect over TLS")
}

#[test]
fn zklock_and_java_share_x509_identities_and_acls() {
    let (pki, server) = shared();
    let (alice, bob) = (pki.client("alice").unwrap(), pki.client("bob").unwrap());
    let cs = secure(server);
    let za = zk_as(pki, &alice, &cs);
    let zb = zk_as(pki, &bob, &cs);
    let mut ja = JavaClient::start(&pki.java_client_options(&alice), &cs);
    let mut jb = JavaClient::start(&pki.java_client_options(&bob), &cs);
    let root = format!("/tls-acl-{}", std::process::id());
    let alice_id = Id::x509(&alice.acl_id);
    common::java::same_identities_and_acls(&za, &zb, &mut ja, &mut jb, &root, &[alice_id]);
}

/// TLS 1.2 and 1.3: what the server offers by default (1.2 only before 3.9,
/// 1.3 only from 3.9 on), and 1.3 when it is configured.
#[test]
fn tls_12_and_13() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let only13 = TlsConfig::builder()
        .with_ca_file(pki.ca_pem())
        .with_client_cert(&alice.cert_pem, &alice.key_pem)
        .with_protocols(&[TlsVersion::Tls13])
        .build()
        .unwrap();
    let only12 = TlsConfig::builder()
        .with_ca_file(pki.ca_pem())
        .with_client_cert(&alice.cert_pem, &alice.key_pem)
        .with_protocols(&[TlsVersion::Tls12])
        .build()
        .unwrap();
    // ZooKeeper 3.8 (and before) offers TLS 1.2 only by default; 3.9's
    // default is TLS 1.3 only (its `ssl.protocol` default, and the enabled
    // protocols follow it): a client offering only the other one is refused
    // in the handshake.
    let version = server.version().unwrap();
    let (default, refused) = if version.at_least(3, 9) {
        (only13.clone(), only12)
    } else {
        (only12, only13.clone())
    };
    let e = builder(&secure(server), Some(refused))
        .connect(|_e| {})
        .unwrap_err();
    assert!(
        matches!(e, Error::Tls(TlsError::Handshake(_))),
        "{version}: {e:?}"
    );
    let zk = builder(&secure(server), Some(default))
        .connect(|_e| {})
        .unwrap_or_else(|e| panic!("{version}'s default TLS: {e:?}"));
    zk.exists("/", false).unwrap();
    zk.close().unwrap();
    // A server with TLS 1.3 suites configured.
    let server13 = ZkServer::start_tls(pki, true).unwrap();
    let zk = builder(&secure(&server13), Some(only13))
        .connect(|_e| {})
        .unwrap();
    let path = format!("/tls13-{}", std::process::id());
    zk.create(&path, b"13", Acl::creator_all(), CreateMode::Ephemeral)
        .unwrap();
    assert_eq!(zk.get_acl(&path).unwrap().0[0].id.id, alice.acl_id);
}

/// Connecting to `target` (through a proxy that counts the attempts, as
/// `host:proxy port`) fails with the TLS error `check` accepts, long before
/// the connect wait; a client left running retries at most about once a second.
fn assert_refused(
    target: &str,
    host: &str,
    tls: Option<TlsConfig>,
    check: impl Fn(&Error) -> bool,
) {
    let proxy = FaultProxy::start(target).unwrap();
    let cs = format!("{host}:{}", proxy.addr().port());
    let started = Instant::now();
    let e = builder(&cs, tls.clone()).connect(|_e| {}).unwrap_err();
    assert!(check(&e), "unexpected error: {e:?}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?} (the connect wait is 20 s)",
        started.elapsed()
    );
    // The client left running gets a proxy of its own: the failed client's
    // handle closes in the background, and under load its connection thread
    // may make one more attempt inside this window (7 counted, once, on a
    // loaded machine, when both shared one proxy).
    let proxy = FaultProxy::start(target).unwrap();
    let cs = format!("{host}:{}", proxy.addr().port());
    let zk = builder(&cs, tls).start(|_e| {}).unwrap();
    thread::sleep(Duration::from_secs(3));
    let attempts = proxy.accepted();
    drop(zk);
    assert!(
        (1..=6).contains(&attempts),
        "{attempts} connect attempts in 3 s: a retry storm"
    );
}

#[test]
fn server_certificate_for_another_host() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let target = format!("127.0.0.1:{}", server.secure_port().unwrap());
    // The certificate names localhost; 127.0.0.1 is another host.
    assert_refused(
        &target,
        "127.0.0.1",
        Some(tls(pki, Some(&alice))),
        |e| matches!(e, Error::Tls(TlsError::HostnameMismatch { host }) if host.starts_with("127.0.0.1:")),
    );
    // Java's zookeeper.ssl.hostnameVerification=false: the chain is still checked.
    let lax = TlsConfig::builder()
        .with_ca_file(pki.ca_pem())
        .with_client_cert(&alice.cert_pem, &alice.key_pem)
        .with_hostname_verification(false);
    let zk = builder(&target, Some(lax.clone().build().unwrap()))
        .connect(|_e| {})
        .unwrap();
    zk.exists("/", false).unwrap();
    let untrusted = TlsConfig::builder()
        .with_ca_file(pki.other_ca_pem())
        .with_client_cert(&alice.cert_pem, &alice.key_pem)
        .with_hostname_verification(false)
        .build()
        .unwrap();
    let e = builder(&target, Some(untrusted))
        .connect(|_e| {})
        .unwrap_err();
    assert!(
        matches!(e, Error::Tls(TlsError::UntrustedServer(_))),
        "{e:?}"
    );
}

#[test]
fn untrusted_server_ca() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let other = TlsConfig::builder()
        .with_ca_file(pki.other_ca_pem())
        .with_client_cert(&alice.cert_pem, &alice.key_pem)
        .build()
        .unwrap();
    let target = format!("127.0.0.1:{}", server.secure_port().unwrap());
    assert_refused(&target, "localhost", Some(other), |e| {
        matches!(e, Error::Tls(TlsError::UntrustedServer(_)))
    });
}

#[test]
fn client_certificate_refused_expired_missing_or_foreign() {
    let (pki, server) = shared();
    let target = format!("127.0.0.1:{}", server.secure_port().unwrap());
    let rejected = |e: &Error| matches!(e, Error::Tls(TlsError::ClientCertificateRejected(_)));
    let expired = pki.expired_client("carol").unwrap();
    assert_refused(
        &target,
        "localhost",
        Some(tls(pki, Some(&expired))),
        rejected,
    );
    assert_refused(&target, "localhost", Some(tls(pki, None)), rejected);
    let foreign = pki.foreign_client("mallory").unwrap();
    assert_refused(
        &target,
        "localhost",
        Some(tls(pki, Some(&foreign))),
        rejected,
    );
}

/// ZooKeeper's Netty TLS port closes a plaintext connection without a byte
/// (no alert), and its plaintext port closes a TLS connection the same way, as
/// a server that is not serving does: a client cannot tell these apart, so it
/// gets `ConnectionLoss` after its connect wait (as Java's client, which keeps
/// reconnecting), its attempts spaced by the backoff (10 ms doubling to 1 s),
/// never a storm.
#[test]
fn plaintext_client_on_the_tls_port_and_the_reverse() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let cases = [
        (server.secure_port().unwrap(), None),
        (server.port(), Some(tls(pki, Some(&alice)))),
    ];
    for (port, tls) in cases {
        let proxy = FaultProxy::start(format!("127.0.0.1:{port}")).unwrap();
        let started = Instant::now();
        let b = ZooKeeper::builder(&format!("localhost:{}", proxy.addr().port()))
            .with_session_timeout(Duration::from_secs(6))
            .with_connect_wait(Duration::from_secs(3));
        let b = match tls {
            Some(t) => b.with_tls(t),
            None => b,
        };
        let e = b.connect(|_e| {}).unwrap_err();
        assert!(e.is(ZkError::ConnectionLoss), "{e:?}");
        let attempts = proxy.accepted();
        assert!(
            (3..=14).contains(&attempts),
            "{attempts} attempts in {:?}",
            started.elapsed()
        );
    }
}

/// A port that answers the ClientHello with something else than TLS (here a
/// ZooKeeper-like frame) is a typed error at once.
#[test]
fn a_server_answering_the_client_hello_with_plaintext_is_not_tls() {
    let (pki, _) = shared();
    let alice = pki.client("alice").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let _ = s.write_all(&[0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0x17, 0x70, 1, 2, 3, 4]);
            thread::sleep(Duration::from_millis(200)); // deliberate: let it read
        }
    });
    let target = format!("127.0.0.1:{port}");
    assert_refused(&target, "localhost", Some(tls(pki, Some(&alice))), |e| {
        matches!(e, Error::Tls(TlsError::NotTls(_)))
    });
}

#[test]
fn a_server_stalling_mid_handshake_is_bounded_by_the_handshake_deadline() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", server.secure_port().unwrap())).unwrap();
    // The ClientHello reaches the server; nothing comes back.
    proxy.stall_downstream();
    let cs = format!("localhost:{}", proxy.addr().port());
    let started = Instant::now();
    let e = ZooKeeper::builder(&cs)
        .with_session_timeout(Duration::from_secs(6))
        .with_connect_wait(Duration::from_secs(3))
        .with_handshake_timeout(Duration::from_millis(500))
        .with_tls(tls(pki, Some(&alice)))
        .connect(|_e| {})
        .unwrap_err();
    let took = started.elapsed();
    assert!(e.is(ZkError::ConnectionLoss), "{e:?}");
    assert!(took < Duration::from_secs(6), "took {took:?}");
    // Each attempt waited its whole deadline: at most one per 0.5 s, plus the backoff.
    let attempts = proxy.accepted();
    assert!(
        (2..=8).contains(&attempts),
        "{attempts} attempts in {took:?}"
    );
    // Let through, it connects.
    proxy.reset();
    let zk = builder(&cs, Some(tls(pki, Some(&alice))))
        .connect(|_e| {})
        .unwrap();
    zk.exists("/", false).unwrap();
}

// ---------------------------------------------------------------------------
// Faults over TLS
// ---------------------------------------------------------------------------

use common::client::{disconnected_at_the_read_timeout_with_writers_blocked, Events};
use zklock::client::{EventType, KeeperState};
use zklock::testing::wait_until;
use zklock::{RetryConfig, ZooKeeperWatcher};

fn count_state(events: &Events, ks: KeeperState) -> usize {
    events.count(|e| e.event_type == EventType::None && e.keeper_state == ks)
}

#[test]
fn a_tls_session_survives_a_cut_and_a_server_restart_with_its_watches() {
    let (pki, _) = shared();
    let alice = pki.client("alice").unwrap();
    let mut server = ZkServer::start_tls(pki, false).unwrap();
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", server.secure_port().unwrap())).unwrap();
    let cs = format!("localhost:{}", proxy.addr().port());
    let events = Events::new();
    // Long enough for a JVM restart on a loaded machine.
    let zk = builder(&cs, Some(tls(pki, Some(&alice))))
        .with_session_timeout(Duration::from_secs(15))
        .connect(events.watcher())
        .unwrap();
    let other = zk_as(pki, &alice, &secure(&server));
    let id = zk.session_id();
    let path = format!("/tls-faults-{}", std::process::id());
    zk.create(&path, b"0", Acl::creator_all(), CreateMode::Persistent)
        .unwrap();
    for (round, fault) in ["cut", "restart"].into_iter().enumerate() {
        zk.get_data(&path, true).unwrap();
        match fault {
            "cut" => proxy.cut(),
            _ => server.restart().unwrap(),
        }
        wait_until(Duration::from_secs(20), "Disconnected", || {
            count_state(&events, KeeperState::Disconnected) > round
        });
        wait_until(Duration::from_secs(20), "SyncConnected again", || {
            count_state(&events, KeeperState::SyncConnected) > round + 1
        });
        assert_eq!(zk.session_id(), id, "{fault}: the same session");
        let other = if fault == "restart" {
            zk_as(pki, &alice, &secure(&server))
        } else {
            other.clone()
        };
        other.set_data(&path, b"1", None).unwrap();
        wait_until(Duration::from_secs(10), "the data watch fires", || {
            events.count(|e| e.event_type == EventType::NodeDataChanged) > round
        });
    }
    assert_eq!(count_state(&events, KeeperState::Expired), 0);
    zk.delete(&path, None).unwrap();
}

#[test]
fn a_partition_longer_than_the_session_ends_in_expired_over_tls() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", server.secure_port().unwrap())).unwrap();
    let cs = format!("localhost:{}", proxy.addr().port());
    let events = Events::new();
    let session = Duration::from_secs(2);
    let zk = builder(&cs, Some(tls(pki, Some(&alice))))
        .with_session_timeout(session)
        .connect(events.watcher())
        .unwrap();
    let stalled = Instant::now();
    proxy.stall();
    wait_until(Duration::from_secs(8), "Expired", || {
        count_state(&events, KeeperState::Expired) == 1
    });
    let took = stalled.elapsed();
    assert!(
        took < session + Duration::from_millis(1500),
        "Expired after {took:?}"
    );
    common::assert_code(zk.exists("/", false), ZkError::SessionExpired);
    proxy.pass();
}

/// A write lock held over TLS through a partition longer than the session:
/// the holder hears InDoubt before a contender (over TLS too) is granted the
/// lock, then Lost; nothing is left behind.
#[test]
fn a_lock_held_over_tls_through_a_partition_keeps_its_guarantees() {
    let (pki, server) = shared();
    let (alice, bob) = (pki.client("alice").unwrap(), pki.client("bob").unwrap());
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", server.secure_port().unwrap())).unwrap();
    // The two sessions are different identities: each names the other (the
    // default, creator-only, would keep the second out of the lock).
    let zkw = |cs: &str, cert: &ClientCert, other: &ClientCert| {
        let t = tls(pki, Some(cert));
        ZooKeeperWatcher::builder(cs)
            .with_session_timeout(Duration::from_secs(2))
            .with_connect_wait(Duration::from_secs(10))
            .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
            .with_client(move |b| b.with_tls(t))
            .with_acl_policy(fleet_policy(&[other]))
            .connect()
            .unwrap()
    };
    let holder = zkw(&format!("localhost:{}", proxy.addr().port()), &alice, &bob);
    let contender = zkw(&secure(server), &bob, &alice);
    let root = format!("/tls-lock-{}", std::process::id());
    common::lock_held_through_a_partition(&holder, &contender, &proxy, &root);
    proxy.pass();
    contender.close().unwrap();
    holder.close().unwrap();
}

/// Runs `zklock lock <lock> --zk <cs> [what configure adds] -- echo held`;
/// whether it held the lock.
#[cfg(feature = "cli")]
fn cli_lock_held(cs: &str, lock: &str, configure: impl FnOnce(&mut Command)) -> bool {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zklock"));
    c.args(["lock", lock, "--zk", cs, "--connect-timeout", "5s"])
        .env_remove("ZKLOCK_SASL_PASSWORD");
    configure(&mut c);
    let out = c.args(["--", "echo", "held"]).output().expect("run zklock");
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("held")
}

/// `zklock lock` over TLS: `--tls-ca` (here from `ZKLOCK_TLS_CA`), `--tls-cert`,
/// `--tls-key`; without them the TLS port is out of reach.
#[cfg(feature = "cli")]
#[test]
fn the_cli_takes_a_lock_over_tls() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let lock = format!("/tls-cli-{}", std::process::id());
    let cs = secure(server);
    assert!(cli_lock_held(&cs, &lock, |c| {
        c.env("ZKLOCK_TLS_CA", pki.ca_pem())
            .arg("--tls-cert")
            .arg(&alice.cert_pem)
            .arg("--tls-key")
            .arg(&alice.key_pem);
    }));
    assert!(!cli_lock_held(&cs, &lock, |_| {}));
}

/// Java's `zookeeper.ssl.crl`: a CRL from the CA that revokes the server's
/// certificate makes it refused; one that revokes nothing does not.
#[test]
fn a_revoked_server_certificate_is_refused() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let with_crl = |revoked: bool| {
        TlsConfig::builder()
            .with_ca_file(pki.ca_pem())
            .with_client_cert(&alice.cert_pem, &alice.key_pem)
            .with_crl_file(pki.crl(revoked).unwrap())
            .build()
            .unwrap()
    };
    let zk = builder(&secure(server), Some(with_crl(false)))
        .connect(|_e| {})
        .unwrap();
    zk.exists("/", false).unwrap();
    let target = format!("127.0.0.1:{}", server.secure_port().unwrap());
    assert_refused(&target, "localhost", Some(with_crl(true)), |e| {
        matches!(e, Error::Tls(TlsError::ServerCertificateRevoked))
    });
}

/// Over TLS as over plain TCP: eight writers blocked in 900 KB writes into a
/// stalled link never hold up the reader's Disconnected (the TLS mutex is let
/// go before every socket write), which comes at the read timeout (2/3 of the
/// session); after the stall the session goes on.
#[test]
fn disconnected_comes_at_the_read_timeout_whatever_the_writers_do_over_tls() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", server.secure_port().unwrap())).unwrap();
    let events = Events::new();
    let session = Duration::from_secs(6);
    let cs = format!("localhost:{}", proxy.addr().port());
    let zk = builder(&cs, Some(tls(pki, Some(&alice))))
        .with_session_timeout(session)
        .connect(events.watcher())
        .unwrap();
    disconnected_at_the_read_timeout_with_writers_blocked(&zk, &proxy, &events, session);
    zk.close().unwrap();
}

/// A server that answers and closes the TLS session at once sends its
/// close_notify right behind the last reply (3.9's Netty with closeSession's
/// reply, under load): the replies before it count. A step hook holds caller
/// A on the read side (before it reads) while `close()` sends closeSession
/// and the server answers both and closes the session; then A reads its
/// reply, close's and the close_notify together. A's exists succeeds, and
/// `close()` is `Ok` on that connection, without another one to close the
/// session again.
#[test]
fn replies_that_come_with_the_servers_close_notify_are_read() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", server.secure_port().unwrap())).unwrap();
    let cs = format!("localhost:{}", proxy.addr().port());
    let zk = builder(&cs, Some(tls(pki, Some(&alice))))
        .connect(|_e| {})
        .unwrap();
    let id = zk.session_id();
    // (A connect attempt may have timed out before: counted from here.)
    let accepted = proxy.accepted();
    // A call held on the read side of its own reply (the hook runs on the
    // next call that reads its own reply; A calls until its call is held).
    let a = common::client::HeldCaller::start(&zk, Duration::from_secs(30));
    let closing = {
        let zk = zk.clone();
        thread::spawn(move || zk.close())
    };
    // The server closed the session, then the connection: its replies and
    // close_notify wait in the socket for A, before the FIN (the proxy
    // passes it on after the bytes), which puts the socket in CLOSE_WAIT.
    let plain = server.connect_string();
    common::client::wait_until(Duration::from_secs(30), "the session closed", || {
        !common::client::dump_has_session(&plain, id)
    });
    common::client::wait_until(
        Duration::from_secs(30),
        "the server's close reached the client's socket",
        || close_wait_towards(proxy.addr().port()),
    );
    a.release();
    assert!(a.join().unwrap().is_some(), "A's reply was read");
    closing.join().unwrap().unwrap();
    assert_eq!(
        proxy.accepted(),
        accepted,
        "close() was answered on its connection"
    );
}

/// Whether a local TCP socket connected to `port` is in CLOSE_WAIT (its
/// peer closed, it has not): Linux's `/proc/net/tcp` and `tcp6`.
fn close_wait_towards(port: u16) -> bool {
    const CLOSE_WAIT: &str = "08";
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table)
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.len() > 3
                    && fields[3] == CLOSE_WAIT
                    && fields[2]
                        .rsplit(':')
                        .next()
                        .and_then(|p| u16::from_str_radix(p, 16).ok())
                        == Some(port)
            })
    })
}

/// Retries `f` while it fails with ConnectionLoss (an election in progress).
fn while_electing<T>(mut f: impl FnMut() -> zklock::Result<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match f() {
            Err(e) if e.is(ZkError::ConnectionLoss) && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(100));
            }
            other => return other.unwrap(),
        }
    }
}

/// Killing the ensemble member a TLS client is connected to: the client moves
/// to another member over TLS with its session, and its watch (set again with
/// SetWatches on the new connection) fires for a change made after.
#[test]
fn killing_the_member_a_tls_client_uses_keeps_its_session_and_watches() {
    let (pki, _) = shared();
    let alice = pki.client("alice").unwrap();
    let mut ensemble = ZkEnsemble::start_tls(pki).unwrap();
    let cs = ensemble.secure_connect_string().unwrap();
    let events = Events::new();
    let zk = builder(&cs, Some(tls(pki, Some(&alice))))
        .with_session_timeout(Duration::from_secs(10))
        .connect(events.watcher())
        .unwrap();
    let path = format!("/tls-ensemble-{}", std::process::id());
    zk.create(&path, b"0", Acl::creator_all(), CreateMode::Persistent)
        .unwrap();
    zk.get_data(&path, true).unwrap();
    let id = zk.session_id();
    // `cons` lists only the plaintext port's connections; the watch table shows
    // which member holds the session's connection.
    let mut member = None;
    wait_until(
        Duration::from_secs(20),
        "the watch shows in a member's wchc",
        || {
            member = (0..ensemble.size())
                .find(|&i| common::client::wchc_paths(&ensemble.address(i), id).contains(&path));
            member.is_some()
        },
    );
    let member = member.unwrap();
    ensemble.kill(member).unwrap();
    events.wait_state(KeeperState::Disconnected, 1, Duration::from_secs(30));
    events.wait_state(KeeperState::SyncConnected, 2, Duration::from_secs(30));
    assert_eq!(zk.session_id(), id);
    let other = builder(&cs, Some(tls(pki, Some(&alice))))
        .connect(|_e| {})
        .unwrap();
    while_electing(|| other.set_data(&path, b"1", None));
    events.wait_node(
        EventType::NodeDataChanged,
        &path,
        1,
        Duration::from_secs(30),
    );
    assert_eq!(count_state(&events, KeeperState::Expired), 0);
    assert_eq!(while_electing(|| zk.get_data(&path, false)).0, b"1");
}

// ---------------------------------------------------------------------------
// TLS and SASL together (issue 22a)
// ---------------------------------------------------------------------------

use zklock::client::SaslConfig;

const SASL_USERS: [(&str, &str); 2] = [("alice", "alice-secret"), ("bob", "bob-secret")];

fn sasl_password(user: &str) -> &'static str {
    SASL_USERS.iter().find(|(u, _)| *u == user).unwrap().1
}

/// A server requiring a client certificate on its TLS port and SASL on every
/// connection: zklock with both (`TlsConfig` + DIGEST-MD5) is told
/// SaslAuthenticated and its `CREATOR_ALL` nodes name both ids (`x509:` then
/// `sasl:`), exactly as the Java client's with the same certificate and JAAS
/// section; each reads what the other's ACL allows and is refused the rest.
/// TLS without SASL is refused by the server (`SESSIONCLOSEDREQUIRESASLAUTH`,
/// once). The CLI takes both option sets together.
#[test]
fn tls_and_sasl_together_give_both_ids_to_zklock_java_and_the_cli() {
    let (pki, _) = shared();
    let server = ZkServer::start_tls_sasl(pki, &SASL_USERS).unwrap();
    let cs = secure(&server);
    let (alice, bob) = (pki.client("alice").unwrap(), pki.client("bob").unwrap());
    let both = |cert: &ClientCert, user: &str| {
        let events = Events::new();
        let zk = builder(&cs, Some(tls(pki, Some(cert))))
            .with_sasl(SaslConfig::digest_md5(user, sasl_password(user)))
            .connect(events.watcher())
            .unwrap();
        (zk, events)
    };
    let (za, events) = both(&alice, "alice");
    let (zb, _) = both(&bob, "bob");
    events.wait_state(KeeperState::SaslAuthenticated, 1, Duration::from_secs(5));
    let java = |cert: &ClientCert, user: &str| {
        let mut options = pki.java_client_options(cert);
        options.extend(common::java::jaas_options(user, sasl_password(user)));
        JavaClient::start(&options, &cs)
    };
    let mut ja = java(&alice, "alice");
    let mut jb = java(&bob, "bob");
    let root = format!("/tls-sasl-acl-{}", std::process::id());
    let alice_ids = [Id::x509(&alice.acl_id), Id::sasl("alice")];
    common::java::same_identities_and_acls(&za, &zb, &mut ja, &mut jb, &root, &alice_ids);
    drop((ja, jb));

    // The certificate alone is not enough here.
    let tls_only = builder(&cs, Some(tls(pki, Some(&alice))))
        .connect(|_e| {})
        .unwrap();
    // The server queues its refusal, then closes the channel; on its Netty
    // TLS port the close can overtake the reply (seen in 2 runs of 6 under
    // load): the call then ends with ConnectionLoss and the client connects
    // again. The refusal itself comes within a few calls, then the handle is
    // dead.
    let mut lost = 0;
    let refused = loop {
        match tls_only.exists("/", false) {
            Err(e) if e.is(ZkError::ConnectionLoss) && lost < 5 => lost += 1,
            r => break r,
        }
    };
    common::assert_code(refused, ZkError::SessionClosedRequireSaslAuth);
    common::assert_code(tls_only.exists("/", false), ZkError::AuthFailed);

    #[cfg(feature = "cli")]
    {
        let lock = format!("{root}-cli");
        let tls_options = |c: &mut Command| {
            c.arg("--tls-ca")
                .arg(pki.ca_pem())
                .arg("--tls-cert")
                .arg(&alice.cert_pem)
                .arg("--tls-key")
                .arg(&alice.key_pem);
        };
        assert!(cli_lock_held(&cs, &lock, |c| {
            tls_options(c);
            c.args(["--sasl-user", "alice"])
                .env("ZKLOCK_SASL_PASSWORD", sasl_password("alice"));
        }));
        assert!(!cli_lock_held(&cs, &lock, tls_options));
        // The CLI's lock root (if it keeps one) was made with the SASL
        // watcher's creator-only policy: alice's ids, nobody else's.
        if let Ok((acl, _)) = za.get_acl(&lock) {
            assert!(
                acl.iter().all(|a| alice_ids.contains(&a.id)) && !acl.is_empty(),
                "{acl:?}"
            );
        }
        common::client::rmr(&za, &lock);
    }
    za.close().unwrap();
    zb.close().unwrap();
}

/// The member whose `wchc` lists `path` for session `id`, if any.
fn member_watching(ensemble: &ZkEnsemble, id: i64, path: &str) -> Option<usize> {
    (0..ensemble.size()).find(|&i| {
        ensemble.is_running(i)
            && common::client::wchc_paths(&ensemble.address(i), id).contains(&path.to_string())
    })
}

/// Issue 22b: failover with SetWatches on a SASL ensemble, over plain TCP and
/// over TLS. The member serving both clients' sessions is killed; each
/// moves to another member with its session, runs the SASL exchange again
/// BEFORE its SetWatches (a SetWatches before the
/// exchange would be refused, `SESSIONCLOSEDREQUIRESASLAUTH`, and the
/// connection closed): the new member lists the watch in `wchc` before any
/// change is made, and the watch fires for a change made after.
#[test]
fn failover_on_a_sasl_ensemble_authenticates_before_set_watches_plain_and_tls() {
    let (pki, _) = shared();
    let alice = pki.client("alice").unwrap();
    let mut ensemble = ZkEnsemble::start_sasl(&SASL_USERS, Some(pki)).unwrap();
    let sasl = || SaslConfig::digest_md5("alice", sasl_password("alice"));
    let session = Duration::from_secs(10);
    let path = format!("/sasl-failover-{}", std::process::id());
    // The member serving `zk`, told by its watch on `path` in `wchc`.
    let serving = |ensemble: &ZkEnsemble, zk: &ZooKeeper| {
        while_electing(|| zk.get_data(&path, true));
        let mut member = None;
        wait_until(
            Duration::from_secs(20),
            "the watch in a member's wchc",
            || {
                member = member_watching(ensemble, zk.session_id(), &path);
                member.is_some()
            },
        );
        member.unwrap()
    };
    let plain_events = Events::new();
    let plain = ZooKeeper::builder(&ensemble.connect_string())
        .with_session_timeout(session)
        .with_connect_wait(Duration::from_secs(20))
        .with_sasl(sasl())
        .connect(plain_events.watcher())
        .unwrap();
    plain
        .create(&path, b"0", Acl::creator_all(), CreateMode::Persistent)
        .unwrap();
    let member = serving(&ensemble, &plain);
    // One kill for both: the TLS client is connected again (hosts are tried
    // in a shuffled order) until it lands on the plain client's member.
    let (over_tls, tls_events) = (0..30)
        .find_map(|_| {
            let events = Events::new();
            let zk = builder(
                &ensemble.secure_connect_string().unwrap(),
                Some(tls(pki, Some(&alice))),
            )
            .with_session_timeout(session)
            .with_sasl(sasl())
            .connect(events.watcher())
            .unwrap();
            if serving(&ensemble, &zk) == member {
                Some((zk, events))
            } else {
                zk.close().unwrap();
                None
            }
        })
        .expect("a TLS session on the plain client's member within 30 tries");
    let clients = [
        (&plain, &plain_events, "plain"),
        (&over_tls, &tls_events, "tls"),
    ];
    let before: Vec<(usize, usize)> = clients
        .iter()
        .map(|(_, events, _)| {
            (
                count_state(events, KeeperState::Disconnected),
                count_state(events, KeeperState::SaslAuthenticated),
            )
        })
        .collect();
    ensemble.kill(member).unwrap();
    for ((zk, events, name), (disconnected, authenticated)) in clients.iter().zip(&before) {
        wait_until(Duration::from_secs(30), "Disconnected", || {
            count_state(events, KeeperState::Disconnected) > *disconnected
        });
        wait_until(
            Duration::from_secs(30),
            "SASL again on another member",
            || count_state(events, KeeperState::SaslAuthenticated) > *authenticated,
        );
        // SetWatches went through on the new member (after the exchange).
        let mut moved = None;
        wait_until(
            Duration::from_secs(20),
            "the watch on the new member",
            || {
                moved = member_watching(&ensemble, zk.session_id(), &path);
                moved.is_some()
            },
        );
        assert_ne!(moved, Some(member), "{name}");
    }
    let other = ZooKeeper::builder(&ensemble.connect_string())
        .with_sasl(sasl())
        .connect(|_e| {})
        .unwrap();
    while_electing(|| other.set_data(&path, b"1", None));
    for (_, events, name) in &clients {
        events.wait_node(
            EventType::NodeDataChanged,
            &path,
            1,
            Duration::from_secs(30),
        );
        assert_eq!(count_state(events, KeeperState::AuthFailed), 0, "{name}");
        assert_eq!(count_state(events, KeeperState::Expired), 0, "{name}");
    }
    while_electing(|| plain.delete(&path, None));
    for zk in [&plain, &over_tls, &other] {
        zk.close().unwrap();
    }
}

// ---------------------------------------------------------------------------
// The fault scenarios still missing over TLS (issue 21): a one-way
// partition each way, malformed frames from a TLS server.
// ---------------------------------------------------------------------------

/// A one-way partition over TLS, each way, on one session:
/// - requests lost, notifications flowing (`stall_upstream`): the unanswered
///   ping finds the dead connection before the session ends, and the client
///   goes on with its session after the heal;
/// - answers lost (`stall_downstream`) past the session timeout: the client
///   declares its session expired; no close can get through while the TLS
///   handshake's answers are lost (nothing refreshes the session meanwhile),
///   and after the heal the close does, at once: the session the server
///   still held is gone within the client's backoff, before the server would
///   have expired it on its own.
#[test]
fn one_way_partitions_over_tls() {
    let (pki, server) = shared();
    let alice = pki.client("alice").unwrap();
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", server.secure_port().unwrap())).unwrap();
    let cs = format!("localhost:{}", proxy.addr().port());
    let session = Duration::from_secs(8);
    let events = Events::new();
    let zk = builder(&cs, Some(tls(pki, Some(&alice))))
        .with_session_timeout(session)
        .connect(events.watcher())
        .unwrap();
    let other = zk_as(pki, &alice, &secure(server));
    let id = zk.session_id();
    let root = format!("/tls-one-way-{}", std::process::id());
    other
        .create(&root, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    common::client::one_way_partition_with_notifications_flowing(
        &zk, &events, &other, &proxy, &root, session,
    );

    let eph = format!("{root}/eph");
    zk.create(&eph, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    proxy.stall_downstream();
    events.wait_state(KeeperState::Expired, 1, session * 2);
    let plain = server.connect_string();
    assert!(
        common::client::dump_has_session(&plain, id),
        "the server still holds the session at the client's Expired"
    );
    proxy.reset();
    let healed = Instant::now();
    wait_until(Duration::from_secs(10), "the session closed", || {
        !common::client::dump_has_session(&plain, id)
    });
    let gone = healed.elapsed();
    assert!(
        gone < Duration::from_secs(2),
        "closed {gone:?} after the heal"
    );
    assert_eq!(other.exists(&eph, false).unwrap(), None);
    common::client::rmr(&other, &root);
}

/// Malformed frames from a TLS server (a scripted fake behind a
/// [`TlsFront`]): a negative length, a truncated frame, a frame over
/// `jute.maxbuffer`. Each fails the connection, the call in flight gets
/// `ConnectionLoss` (within the read timeout at worst), the client reconnects
/// over TLS with its session and goes on; no client thread panics.
#[test]
fn malformed_frames_from_a_tls_server_fail_the_connection_and_the_client_reconnects() {
    use common::client::{
        client_thread_panics, count_client_thread_panics, fake_handshake, fake_next_request,
        fake_serve_well, reply, stat_bytes, FakeServer,
    };
    use std::sync::{Arc, Mutex};
    use zklock::testing::TlsFront;
    count_client_thread_panics();
    let (pki, _) = shared();
    let alice = pki.client("alice").unwrap();
    const SESSION: i64 = 0x7115_0000_0000_0001;
    /// What the fake answers the first request (its xid) with.
    type Garbage = fn(i32) -> Vec<u8>;
    let cases: [(&str, Garbage); 3] = [
        ("a negative length", |_| {
            let mut v = (-5i32).to_be_bytes().to_vec();
            v.extend_from_slice(&[7; 4096]);
            v
        }),
        ("a truncated frame", |xid| {
            let whole = reply(xid, 5, 0, &stat_bytes(42));
            whole[..whole.len() - 10].to_vec()
        }),
        ("a frame over jute.maxbuffer", |xid| {
            let mut v = (2i32 << 20).to_be_bytes().to_vec();
            v.extend_from_slice(&xid.to_be_bytes());
            v.extend_from_slice(&[0; 4096]);
            v
        }),
    ];
    for (name, garbage) in cases {
        let ids = Arc::new(Mutex::new(Vec::new()));
        let seen = ids.clone();
        let fake = FakeServer::start(move |n, mut s| {
            let Ok((_, _, id)) = fake_handshake(&mut s, SESSION) else {
                return;
            };
            seen.lock().unwrap().push(id);
            if n > 0 {
                fake_serve_well(s);
                return;
            }
            let Ok((xid, _)) = fake_next_request(&mut s) else {
                return;
            };
            let _ = s.write_all(&garbage(xid));
            thread::sleep(Duration::from_secs(3)); // deliberate: holds the socket
        });
        let front = TlsFront::start(pki, &fake.addr).unwrap();
        let events = Events::new();
        let zk = builder(&front.connect_string(), Some(tls(pki, Some(&alice))))
            .with_session_timeout(Duration::from_secs(2))
            .with_connect_wait(Duration::from_secs(5))
            .connect(events.watcher())
            .unwrap();
        let t = Instant::now();
        common::assert_code(zk.exists("/x", false), ZkError::ConnectionLoss);
        // At worst the read timeout (1.33 s) ends a connection that sent
        // part of a frame.
        assert!(t.elapsed() < Duration::from_millis(2500), "{name}");
        assert_eq!(
            zk.exists("/x", false).unwrap().unwrap().version,
            42,
            "{name}"
        );
        assert_eq!(
            *ids.lock().unwrap(),
            [0, SESSION],
            "{name}: the same session"
        );
        assert!(front.accepted() >= 2, "{name}: over TLS again");
        assert_eq!(count_state(&events, KeeperState::Expired), 0, "{name}");
        zk.close().unwrap();
    }
    assert_eq!(client_thread_panics(), 0);
}

// ---------------------------------------------------------------------------
// A client certificate is an identity for the ACL policy (issue 31, item 5)
// ---------------------------------------------------------------------------

use zklock::client::{AclPolicy, Perms};
use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};

/// Creator-only, plus all permissions for each of `members`' certificates
/// (the other members of the creator's fleet: the server keeps an entry
/// naming the creator's own id as a duplicate).
fn fleet_policy(members: &[&ClientCert]) -> AclPolicy {
    members.iter().fold(AclPolicy::creator_all(), |p, c| {
        p.with_grant(Perms::ALL, Id::x509(&c.acl_id))
    })
}

/// A watcher on `cs`, over TLS as `cert` when given, with `policy` when
/// given (else the watcher's default).
fn acl_watcher(
    pki: &TestPki,
    cert: Option<&ClientCert>,
    cs: &str,
    policy: Option<AclPolicy>,
) -> ZooKeeperWatcher {
    let mut b = ZooKeeperWatcher::builder(cs)
        .with_session_timeout(Duration::from_secs(6))
        .with_connect_wait(Duration::from_secs(20));
    if let Some(cert) = cert {
        let t = tls(pki, Some(cert));
        b = b.with_client(move |c| c.with_tls(t));
    }
    if let Some(p) = policy {
        b = b.with_acl_policy(p);
    }
    b.connect().expect("connect a watcher")
}

/// `path`'s ACL, read by `zk`.
fn acl_of(zk: &ZooKeeper, path: &str) -> Vec<Acl> {
    zk.get_acl(path).unwrap().0
}

/// The finding: with a certificate alone, a holder's lock nodes were
/// world-writable and another certificate holder deleted them. Now the
/// default policy is creator-only for a certificate as for SASL: the lock's
/// directories and node name alice's `x509` id alone, bob is refused
/// deleting, changing or reading them (`NoAuth`) and cannot queue in alice's
/// lock either, creating nothing; alice's lock is not disturbed.
#[test]
fn a_certificate_holders_lock_is_creator_only_and_another_holder_cannot_delete_it() {
    let (pki, server) = shared();
    let (alice, bob) = (pki.client("alice").unwrap(), pki.client("bob").unwrap());
    let cs = secure(server);
    let za = acl_watcher(pki, Some(&alice), &cs, None);
    let zb = acl_watcher(pki, Some(&bob), &cs, None);
    assert!(za.zookeeper().has_identity());
    let root = format!("/tls-creator-{}", std::process::id());
    let lock = format!("{root}/lock");
    let (events, listener) = common::lock_recorder();
    let held = ZkInterProcessReadWriteLock::new(&za, &lock, None)
        .unwrap()
        .with_lock_listener(listener)
        .write_lock(b"alice");
    held.acquire().unwrap();
    let nodes = common::children(za.zookeeper(), &lock);
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let node = format!("{lock}/{}", nodes[0]);
    let alice_only = [Acl::new(Perms::ALL, Id::x509(&alice.acl_id))];
    for p in [&root, &lock, &node] {
        assert_eq!(acl_of(za.zookeeper(), p), alice_only, "{p}");
    }
    let b = zb.zookeeper();
    common::assert_code(b.delete(&node, None), ZkError::NoAuth);
    common::assert_code(b.set_data(&node, b"bob", None), ZkError::NoAuth);
    common::assert_code(b.get_data(&node, false), ZkError::NoAuth);
    common::assert_code(b.get_children(&lock, false), ZkError::NoAuth);
    let queued = ZkInterProcessReadWriteLock::new(&zb, &lock, None)
        .unwrap()
        .write_lock(b"bob");
    common::assert_code(queued.try_acquire(Duration::from_secs(1)), ZkError::NoAuth);
    assert_eq!(
        common::children(za.zookeeper(), &lock),
        nodes,
        "bob created nothing"
    );
    assert!(held.is_held());
    assert!(
        events.lock().unwrap().is_empty(),
        "{:?}",
        events.lock().unwrap()
    );
    held.release().unwrap();
    common::client::rmr(za.zookeeper(), &root);
    zb.close().unwrap();
    za.close().unwrap();
}

/// Two certificate holders of one fleet, each naming the other's identity
/// (`AclPolicy::with_grant`), contend for one lock and hand it over both
/// ways; a third holder (carol, default policy) can neither delete the
/// holder's node nor queue. The nodes carry both fleet ids and no world
/// entry.
#[test]
fn certificate_holders_named_in_the_policy_share_a_lock_and_a_stranger_cannot_touch_it() {
    let (pki, server) = shared();
    let [alice, bob, carol] = ["alice", "bob", "carol"].map(|n| pki.client(n).unwrap());
    let cs = secure(server);
    let za = acl_watcher(pki, Some(&alice), &cs, Some(fleet_policy(&[&bob])));
    let zb = acl_watcher(pki, Some(&bob), &cs, Some(fleet_policy(&[&alice])));
    let zc = acl_watcher(pki, Some(&carol), &cs, None);
    let root = format!("/tls-fleet-{}", std::process::id());
    let lock = format!("{root}/lock");
    let a = ZkInterProcessReadWriteLock::new(&za, &lock, None)
        .unwrap()
        .write_lock(b"alice");
    let b = ZkInterProcessReadWriteLock::new(&zb, &lock, None)
        .unwrap()
        .write_lock(b"bob");
    a.acquire().unwrap();
    let (granted_tx, granted) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let bob_turn = thread::spawn(move || {
        b.acquire().unwrap();
        granted_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        b.release().unwrap();
    });
    wait_until(Duration::from_secs(20), "bob queues", || {
        common::children(za.zookeeper(), &lock).len() == 2
    });
    let fleet_ids = [Id::x509(&alice.acl_id), Id::x509(&bob.acl_id)];
    let mut nodes = common::children(za.zookeeper(), &lock);
    nodes.sort_by_key(|n| n[n.len() - 10..].to_string());
    for p in [&root, &lock]
        .into_iter()
        .cloned()
        .chain(nodes.iter().map(|n| format!("{lock}/{n}")))
    {
        let acl = acl_of(za.zookeeper(), &p);
        let mut ids: Vec<Id> = acl.iter().map(|e| e.id.clone()).collect();
        ids.sort_by(|x, y| x.id.cmp(&y.id));
        assert_eq!(ids, fleet_ids, "{p}: {acl:?}");
        assert!(acl.iter().all(|e| e.perms == Perms::ALL), "{p}: {acl:?}");
    }
    let alices = format!("{lock}/{}", nodes[0]);
    common::assert_code(zc.zookeeper().delete(&alices, None), ZkError::NoAuth);
    let stranger = ZkInterProcessReadWriteLock::new(&zc, &lock, None)
        .unwrap()
        .write_lock(b"carol");
    common::assert_code(stranger.try_acquire(Duration::ZERO), ZkError::NoAuth);
    assert!(a.is_held());
    a.release().unwrap();
    granted
        .recv_timeout(Duration::from_secs(20))
        .expect("bob is granted the lock alice released");
    // And back: alice queues behind bob, who releases.
    assert!(!a.try_acquire(Duration::ZERO).unwrap());
    release_tx.send(()).unwrap();
    assert!(a.try_acquire(Duration::from_secs(20)).unwrap());
    bob_turn.join().unwrap();
    a.release().unwrap();
    common::client::rmr(za.zookeeper(), &root);
    for w in [zc, zb, za] {
        w.close().unwrap();
    }
}

/// Without any identity (plain port, no SASL, no certificate) the default
/// stays open; an `add_auth` with an identity (`digest`), made after
/// `connect`, makes the next nodes creator-only (`digest:<user>`).
#[test]
fn a_plain_session_keeps_open_acls_and_an_add_auth_digest_makes_them_creator_only() {
    let (pki, server) = shared();
    let zkw = acl_watcher(pki, None, &server.connect_string(), None);
    assert!(!zkw.zookeeper().has_identity());
    let root = format!("/plain-acl-{}", std::process::id());
    let take = |name: &str| {
        let lock = format!("{root}/{name}");
        let l = ZkInterProcessReadWriteLock::new(&zkw, &lock, None)
            .unwrap()
            .write_lock(b"x");
        l.acquire().unwrap();
        let node = format!("{lock}/{}", common::children(zkw.zookeeper(), &lock)[0]);
        let acls = (
            acl_of(zkw.zookeeper(), &lock),
            acl_of(zkw.zookeeper(), &node),
        );
        l.release().unwrap();
        acls
    };
    let (dir, node) = take("open");
    assert_eq!(dir, Acl::open_unsafe());
    assert_eq!(node, Acl::open_unsafe());
    zkw.zookeeper().add_auth("digest", b"dave:pw").unwrap();
    assert!(zkw.zookeeper().has_identity());
    let (dir, node) = take("digest");
    let dave_only = [Acl::new(Perms::ALL, Id::digest("dave", "pw"))];
    assert_eq!(dir, dave_only);
    assert_eq!(node, dave_only);
    common::client::rmr(zkw.zookeeper(), &root);
    zkw.close().unwrap();
}

/// `zklock ... --tls-ca ... --tls-cert <cert> --tls-key <key>` (and `extra`).
#[cfg(feature = "cli")]
fn cli_as(pki: &TestPki, cert: &ClientCert, cs: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zklock"));
    c.args(["--zk", cs, "--connect-timeout", "10s", "--tls-ca"])
        .arg(pki.ca_pem())
        .arg("--tls-cert")
        .arg(&cert.cert_pem)
        .arg("--tls-key")
        .arg(&cert.key_pem)
        .args(args)
        .env_remove("ZKLOCK_SASL_PASSWORD")
        .env_remove("ZKLOCK_ACL")
        .env_remove("RUST_LOG");
    c
}

/// A `zklock lock` of `lock` as `cert` (with `extra` options) whose command
/// runs until `release` exists; holding when this returns.
#[cfg(feature = "cli")]
fn cli_holder(
    pki: &TestPki,
    cert: &ClientCert,
    cs: &str,
    lock: &str,
    extra: &[&str],
    dir: &std::path::Path,
) -> (std::process::Child, std::path::PathBuf) {
    let name = lock.rsplit('/').next().unwrap();
    let (started, release) = (dir.join(format!("{name}.started")), dir.join(name));
    let script = format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.02; done",
        started.display(),
        release.display()
    );
    let mut args = vec!["lock", lock];
    args.extend_from_slice(extra);
    args.extend(["--", "sh", "-c", &script]);
    let child = cli_as(pki, cert, cs, &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn zklock");
    wait_until(
        Duration::from_secs(20),
        "the holder's command started",
        || started.exists(),
    );
    (child, release)
}

/// Ends a `cli_holder`'s command; its exit code.
#[cfg(feature = "cli")]
fn finish(mut child: std::process::Child, release: &std::path::Path) -> Option<i32> {
    std::fs::write(release, b"").unwrap();
    child.wait().unwrap().code()
}

/// `zklock lock` as a certificate holder: its nodes are creator-only by
/// default, another certificate holder's delete is refused and the command
/// runs to its end (exit 0; it was SIGTERMed, exit 3, before); `ls
/// --show-acl` prints the ACLs. `--acl open` gives the old world-writable
/// nodes (bob's delete then kills the command: exit 3); `--acl
/// creator-read` lets bob read but not delete; with `--acl-id` naming each
/// other, alice and bob hand one lock over.
#[cfg(feature = "cli")]
#[test]
fn the_cli_lock_of_a_certificate_holder_is_creator_only_and_acl_chooses() {
    let (pki, server) = shared();
    let (alice, bob) = (pki.client("alice").unwrap(), pki.client("bob").unwrap());
    let cs = secure(server);
    let zb = zk_as(pki, &bob, &cs);
    let za = zk_as(pki, &alice, &cs);
    let root = format!("/tls-cli-acl-{}", std::process::id());
    let dir = ScratchDir::new("tls-cli-acl").unwrap();
    let node_of = |lock: &str| format!("{lock}/{}", common::children(&za, lock)[0]);
    let alice_all = format!("x509:{}:cdrwa", alice.acl_id);

    // Default: creator-only.
    let lock = format!("{root}/default");
    let (holder, release) = cli_holder(pki, &alice, &cs, &lock, &[], &dir);
    let node = node_of(&lock);
    let out = cli_as(pki, &alice, &cs, &["ls", &lock, "--show-acl"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<Vec<&str>> = shown
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines,
        [[lock.as_str(), &alice_all], [node.as_str(), &alice_all]],
        "{shown}"
    );
    let out = cli_as(pki, &alice, &cs, &["ls", &lock, "--show-acl", "--json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The lock znode's object first (docs/cli.md, "JSON schema"), its ACL
    // entries as {scheme, id, perms}.
    assert_eq!(json[0]["path"], lock.as_str(), "{json}");
    let entry = &json[0]["acl"][0];
    let shown = format!(
        "{}:{}:{}",
        entry["scheme"].as_str().unwrap(),
        entry["id"].as_str().unwrap(),
        entry["perms"].as_str().unwrap()
    );
    assert_eq!(shown, alice_all, "{json}");
    assert_eq!(json[0]["acl"].as_array().unwrap().len(), 1, "{json}");
    common::assert_code(zb.delete(&node, None), ZkError::NoAuth);
    let out = cli_as(pki, &bob, &cs, &["lock", &lock, "-n", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("does not let this identity take part") && err.contains("--acl-id"),
        "{err}"
    );
    assert_eq!(
        finish(holder, &release),
        Some(0),
        "the command ran to its end"
    );

    // --acl open: the old behaviour.
    let lock = format!("{root}/open");
    let (holder, release) = cli_holder(pki, &alice, &cs, &lock, &["--acl", "open"], &dir);
    let node = node_of(&lock);
    assert_eq!(acl_of(&za, &node), Acl::open_unsafe());
    zb.delete(&node, None).unwrap();
    assert_eq!(finish(holder, &release), Some(3), "lost: SIGTERMed");

    // --acl creator-read: world read, nothing more.
    let lock = format!("{root}/read");
    let (holder, release) = cli_holder(pki, &alice, &cs, &lock, &["--acl", "creator-read"], &dir);
    let node = node_of(&lock);
    assert_eq!(
        acl_of(&zb, &node),
        [
            Acl::new(Perms::ALL, Id::x509(&alice.acl_id)),
            Acl::new(Perms::READ, Id::anyone())
        ]
    );
    assert!(zb.get_data(&node, false).is_ok());
    common::assert_code(zb.delete(&node, None), ZkError::NoAuth);
    assert_eq!(finish(holder, &release), Some(0));

    // --acl-id: a fleet of two certificates hands the lock over.
    let lock = format!("{root}/fleet");
    let grant_bob = format!("x509:{}", bob.acl_id);
    let grant_alice = format!("x509:{}", alice.acl_id);
    let (holder, release) = cli_holder(pki, &alice, &cs, &lock, &["--acl-id", &grant_bob], &dir);
    let waiter = cli_as(
        pki,
        &bob,
        &cs,
        &[
            "lock",
            &lock,
            "--acl-id",
            &grant_alice,
            "-t",
            "60s",
            "--",
            "echo",
            "bob-held",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    wait_until(Duration::from_secs(20), "bob queues", || {
        common::children(&za, &lock).len() == 2
    });
    assert_eq!(finish(holder, &release), Some(0));
    let out = waiter.wait_with_output().unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("bob-held"),
        "{out:?}"
    );
    common::client::rmr(&za, &root);
    drop(dir);
    za.close().unwrap();
    zb.close().unwrap();
}

// ---------------------------------------------------------------------------
// Issue 35: the command's messages for a refused client certificate
// ---------------------------------------------------------------------------

/// `zklock` whose client certificate the server refuses (issued by a CA it
/// does not trust), or with none: one line saying the server refused our
/// certificate (or wants one) and what to check, not "no ZooKeeper answer".
#[cfg(feature = "cli")]
#[test]
fn the_cli_says_the_server_refused_our_client_certificate() {
    let (pki, server) = shared();
    let cs = secure(server);
    let foreign = pki.foreign_client("mallory").unwrap();
    let out = cli_as(pki, &foreign, &cs, &["ls", "/x"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    eprint!("foreign: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("ZooKeeper at {cs} refused our client certificate"))
            && err.contains(&foreign.cert_pem.display().to_string())
            && err.contains("trust store"),
        "{err}"
    );
    assert!(!err.contains("no ZooKeeper answer"), "{err}");

    let out = Command::new(env!("CARGO_BIN_EXE_zklock"))
        .args(["--zk", &cs, "--connect-timeout", "10s", "--tls-ca"])
        .arg(pki.ca_pem())
        .args(["ls", "/x"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    eprint!("none: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("requires a client certificate") && err.contains("--tls-cert"),
        "{err}"
    );
    assert!(!err.contains("no ZooKeeper answer"), "{err}");
}

// ---------------------------------------------------------------------------
// Rotated credentials (issue 46)
// ---------------------------------------------------------------------------

use zklock::client::ReplyKind;

/// Whether the server knows the session by the certificate of `id`: its
/// `whoAmI` on ZooKeeper 3.7 and later; before (3.6 has no `whoAmI`), whether
/// the session can read a node whose ACL grants only `x509:<id>`.
fn is_x509(zk: &ZooKeeper, id: &str) -> bool {
    if zklock::testing::server_version().at_least(3, 7) {
        return zk
            .who_am_i()
            .unwrap()
            .into_iter()
            .any(|i| i.auth_scheme == "x509" && i.user == id);
    }
    let probe = zk
        .create(
            "/x509-probe-",
            b"",
            &[Acl::new(Perms::ALL, Id::x509(id))],
            CreateMode::EphemeralSequential,
        )
        .unwrap();
    let readable = zk.get_data(&probe, false).is_ok();
    zk.delete(&probe, None).unwrap();
    readable
}

/// Ends the live connection (a lost reply); the session reconnects.
fn reconnect(zk: &ZooKeeper) {
    zk.lose_next_reply(ReplyKind::Exists);
    assert!(zk.exists("/", false).unwrap_err().is_retryable());
    zk.wait_connected(Duration::from_secs(20)).unwrap();
}

/// Certificate files replaced under a running client are used from its next
/// connection on (the server's whoAmI names the new certificate), in the
/// same session; a broken replacement is kept out with a clear error while
/// the previous certificate serves, until a good one comes.
#[test]
fn rotated_certificate_files_are_used_at_the_next_reconnect() {
    let (pki, server) = shared();
    let (alice, bob) = (pki.client("alice").unwrap(), pki.client("bob").unwrap());
    let dir = ScratchDir::new("tls-rotate").unwrap();
    let (cert, key) = (dir.path().join("client.pem"), dir.path().join("client.key"));
    let install = |c: &ClientCert| {
        std::fs::copy(&c.cert_pem, &cert).unwrap();
        std::fs::copy(&c.key_pem, &key).unwrap();
    };
    install(&alice);
    let config = TlsConfig::builder()
        .with_ca_file(pki.ca_pem())
        .with_client_cert(&cert, &key)
        .build()
        .unwrap();
    let zk = builder(&secure(server), Some(config.clone()))
        .connect(|_e| {})
        .unwrap();
    let id = zk.session_id();
    assert!(is_x509(&zk, &alice.acl_id));

    install(&bob);
    reconnect(&zk);
    assert!(
        is_x509(&zk, &bob.acl_id),
        "the new certificate at the reconnect"
    );
    assert!(!is_x509(&zk, &alice.acl_id), "no longer the old one");
    assert_eq!(zk.session_id(), id);
    assert_eq!(config.reload_error(), None);

    // Half a rotation: alice's certificate with bob's key does not build.
    std::fs::copy(&alice.cert_pem, &cert).unwrap();
    reconnect(&zk);
    assert!(is_x509(&zk, &bob.acl_id), "the previous certificate serves");
    match config.reload_error() {
        Some(TlsError::Config(why)) => assert!(why.contains("client certificate"), "{why}"),
        other => panic!("expected the mismatched key's error, got {other:?}"),
    }
    // A truncated file: kept out too, naming the file.
    std::fs::write(&cert, b"-----BEGIN CERTIFICATE-----\n").unwrap();
    reconnect(&zk);
    assert!(is_x509(&zk, &bob.acl_id));
    assert!(
        matches!(config.reload_error(), Some(TlsError::File { ref path, .. }) if *path == cert),
        "{:?}",
        config.reload_error()
    );
    // The rotation completes.
    std::fs::copy(&alice.key_pem, &key).unwrap();
    std::fs::copy(&alice.cert_pem, &cert).unwrap();
    reconnect(&zk);
    assert!(is_x509(&zk, &alice.acl_id));
    assert_eq!(config.reload_error(), None);
    assert_eq!(zk.session_id(), id, "one session throughout");
    zk.close().unwrap();
}
