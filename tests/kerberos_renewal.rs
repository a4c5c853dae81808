//! A Kerberos ticket that expires while the session lives (issue 46): the
//! next reconnect authenticates again with a ticket GSSAPI gets from the
//! client keytab (`KRB5_CLIENT_KTNAME`), in the same session.
//!
//! Its own binary: GSSAPI reads its credentials from the process
//! environment, set here once to a ticket cache holding a 10 s ticket.
//! About 15 s (the ticket must expire).

mod common;

use std::process::Command;
use std::time::Duration;

use common::client::Events;
use zklock::client::{KeeperState, ReplyKind, SaslConfig, ZooKeeper};
use zklock::testing::{wait_until, TestKdc, ZkServer, TEST_REALM};

#[test]
fn an_expired_ticket_is_renewed_from_the_keytab_at_the_next_reconnect() {
    common::init_log();
    let kdc = TestKdc::start(&["zookeeper/localhost", "alice"]).expect("start a KDC");
    // Every ticket of alice lives 10 s (her and the TGS's maximum).
    for principal in ["alice", &format!("krbtgt/{TEST_REALM}")] {
        let out = Command::new("kadmin.local")
            .env("KRB5_CONFIG", kdc.krb5_conf())
            .env("KRB5_KDC_PROFILE", kdc.dir().join("kdc.conf"))
            .args([
                "-q",
                &format!("modprinc -maxlife \"10 seconds\" {principal}"),
            ])
            .output()
            .expect("kadmin.local");
        assert!(out.status.success(), "{out:?}");
    }
    let cache = kdc.dir().join("short-lived.ccache");
    let klist_valid = || {
        Command::new("klist")
            .env("KRB5_CONFIG", kdc.krb5_conf())
            .args(["-s", "-c"])
            .arg(&cache)
            .status()
            .is_ok_and(|s| s.success())
    };
    let kinit = Command::new("kinit")
        .env("KRB5_CONFIG", kdc.krb5_conf())
        .args(["-l", "10s", "-c"])
        .arg(&cache)
        .arg("-kt")
        .arg(kdc.keytab("alice"))
        .arg("alice")
        .output()
        .expect("kinit");
    assert!(kinit.status.success(), "{kinit:?}");
    assert!(klist_valid());
    // Before any GSSAPI call of this process (none happens elsewhere).
    std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
    std::env::set_var("KRB5CCNAME", format!("FILE:{}", cache.display()));
    std::env::set_var("KRB5_CLIENT_KTNAME", kdc.keytab("alice"));
    let server = ZkServer::start_kerberos(&kdc).expect("start a Kerberos ZooKeeper");

    let events = Events::new();
    let zk = ZooKeeper::builder(&server.connect_string())
        .with_session_timeout(Duration::from_secs(30))
        .with_connect_wait(Duration::from_secs(15))
        .with_sasl(SaslConfig::kerberos("zookeeper/localhost"))
        .connect(events.watcher())
        .unwrap();
    events.wait_state(KeeperState::SaslAuthenticated, 1, Duration::from_secs(5));
    // Every ticket in the cache (the TGT, zookeeper/localhost's) was issued
    // by now and lives 10 s.
    let issued_by = std::time::Instant::now();
    let id = zk.session_id();
    // The server's name for the session, from its whoAmI (3.7 and later; on
    // 3.6, which has none, the SaslAuthenticated events and the absence of
    // AuthFailed below tell the authentication alone).
    let is_alice = |zk: &ZooKeeper| {
        !zklock::testing::server_version().at_least(3, 7)
            || zk
                .who_am_i()
                .unwrap()
                .into_iter()
                .any(|i| i.auth_scheme == "sasl" && i.user.starts_with("alice"))
    };
    assert!(is_alice(&zk));

    wait_until(Duration::from_secs(30), "alice's tickets expired", || {
        !klist_valid() && issued_by.elapsed() > Duration::from_secs(11)
    });
    // The next connection authenticates again: with a fresh ticket.
    zk.lose_next_reply(ReplyKind::Exists);
    assert!(zk.exists("/", false).unwrap_err().is_retryable());
    zk.wait_connected(Duration::from_secs(15)).unwrap();
    events.wait_state(KeeperState::SaslAuthenticated, 2, Duration::from_secs(5));
    assert_eq!(
        events.count(|e| e.keeper_state == KeeperState::AuthFailed),
        0
    );
    assert_eq!(zk.session_id(), id, "the same session");
    assert!(is_alice(&zk));
    assert!(klist_valid(), "the ticket cache holds the renewed ticket");
    zk.close().unwrap();
}
