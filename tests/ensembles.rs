//! Ensembles that change (issue 46): `getConfig` and `reconfig` against a
//! real reconfigurable ensemble (`reconfigEnabled=true`,
//! `standaloneEnabled=false`, a dynamic configuration file), the typed
//! error from servers that cannot, and server-list updates.
//!
//! The ensemble tests start their own three JVMs (and a fourth): about
//! 15–25 s each on a loaded two-core machine. Run on another server version
//! with `ZK_TEST_VERSION=3.6|3.9`.

mod common;

use std::time::Duration;

use common::client::*;
use common::WAIT;
use zklock::client::{ClientConfig, EventType, Reconfig, ReplyKind, ServerRole, ZooKeeper};
use zklock::testing::{shared_server, ZkEnsemble, SUPER_AUTH};
use zklock::{Error, ZkError};

const SESSION: Duration = Duration::from_secs(10);

/// A standalone server (the shared one, started the default way:
/// `reconfigEnabled=false`) has no configuration to tell and refuses
/// `reconfig` with the typed, matchable error.
#[test]
fn a_standalone_server_has_an_empty_config_and_refuses_reconfig() {
    let cs = shared_server().connect_string();
    let (zk, _ev) = connect(&cs, SESSION);
    let (config, _stat) = zk.get_config(false).unwrap();
    assert!(config.servers().is_empty(), "{config:?}");
    let e = zk
        .reconfig(&Reconfig::incremental::<&str>(&[], &[1]), None)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Unsupported {
                operation: "reconfig",
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.code(), Some(ZkError::ReconfigDisabled), "{e:?}");
    assert!(e.to_string().contains("reconfigEnabled=true"), "{e}");
    // Checked before sending: nothing joins, nothing leaves.
    let e = zk
        .reconfig(&Reconfig::incremental::<&str>(&[], &[]), None)
        .unwrap_err();
    assert!(matches!(e, Error::BadArguments(_)), "{e:?}");
    // The session is unharmed.
    zk.exists("/", false).unwrap();
    zk.close().unwrap();
}

/// The whole cycle of Java's `ZooKeeperAdmin`: `getConfig` (through a
/// chroot, with a watch) lists the three members and the version; a fourth
/// server joins by an incremental `reconfig` (refused first for a stale
/// `fromConfig` and without the super user's rights); the watch fires on
/// `/zookeeper/config` whatever the chroot; a member leaves; a
/// non-incremental `reconfig` names the whole membership.
#[test]
fn reconfig_adds_and_removes_members_and_get_config_follows() {
    init_log();
    let mut ensemble = ZkEnsemble::start_reconfigurable().expect("ensemble");
    let root = format!("{}/chrooted", ensemble.connect_string());
    let admin = ZooKeeper::connect(&ensemble.connect_string(), SESSION, |_e| {}).unwrap();
    admin
        .create(
            "/chrooted",
            b"",
            zklock::client::Acl::open_unsafe(),
            zklock::client::CreateMode::Persistent,
        )
        .unwrap();
    let (zk, _ev) = connect(&root, SESSION);
    let events = Events::new();
    let (config, _stat) = zk.get_config_w(events.watcher()).unwrap();
    assert_eq!(config.servers().len(), 3, "{config}");
    assert!(config.version() > 0, "{config}");
    for i in 0..3 {
        let s = config
            .server(ensemble.server_id(i))
            .expect("member in config");
        assert_eq!(s.role, ServerRole::Participant);
        assert_eq!(s.connect_address().unwrap(), ensemble.address(i));
        assert_eq!(s.to_spec(), ensemble.server_spec(i));
    }
    let mut addresses: Vec<String> = config
        .connect_string()
        .split(',')
        .map(String::from)
        .collect();
    addresses.sort();
    let mut expected: Vec<String> = (0..3).map(|i| ensemble.address(i)).collect();
    expected.sort();
    assert_eq!(addresses, expected);

    // The watch survives a reconnect: SetWatches names the server path,
    // not the chroot's.
    zk.lose_next_reply(ReplyKind::Exists);
    assert!(zk.exists("/", false).unwrap_err().is_retryable());
    zk.wait_connected(WAIT).unwrap();

    let added = ensemble.add_member().expect("a fourth server");
    let join = Reconfig::incremental(&[ensemble.server_spec(added)], &[]);
    // Without the super user: the server checks WRITE on /zookeeper/config.
    assert_code(admin.reconfig(&join, None), ZkError::NoAuth);
    admin.add_auth("digest", SUPER_AUTH).unwrap();
    // A stale fromConfig.
    assert_code(
        admin.reconfig(&join, Some(config.version() - 1)),
        ZkError::BadVersion,
    );
    let four = admin.reconfig(&join, Some(config.version())).unwrap();
    assert_eq!(four.servers().len(), 4, "{four}");
    assert!(four.version() > config.version());
    assert!(four.server(ensemble.server_id(added)).is_some(), "{four}");
    // The watch set through the chroot fires on the server path.
    events.wait_node(EventType::NodeDataChanged, "/zookeeper/config", 1, WAIT);
    zk.sync("/").unwrap();
    let (seen, _) = zk.get_config(false).unwrap();
    assert_eq!(seen.version(), four.version());

    // A member leaves; its server is stopped; the rest keep a quorum.
    let leaving = ensemble.server_id(0);
    let three = admin
        .reconfig(
            &Reconfig::incremental::<&str>(&[], &[leaving]),
            Some(four.version()),
        )
        .unwrap();
    assert_eq!(three.servers().len(), 3, "{three}");
    assert!(three.server(leaving).is_none(), "{three}");
    ensemble.stop_removed(0).unwrap();
    ensemble.wait_for_quorum(Duration::from_secs(60)).unwrap();

    // Non-incremental: the same three members, named whole. (The admin's
    // session may have been on the stopped member: it moves, keeping its
    // session.)
    admin.wait_connected(WAIT).unwrap();
    let members: Vec<String> = three.servers().iter().map(|s| s.to_spec()).collect();
    let whole = reconfig_surely(&admin, &Reconfig::new_members(&members), three.version());
    assert_eq!(whole.servers().len(), 3, "{whole}");
    assert!(whole.version() > three.version());
    zk.close().unwrap();
    admin.close().unwrap();
}

/// `change` applied to configuration `from`: a reconfig may end the
/// connection it came on (the ensemble re-forms around the new
/// configuration), applied or not; the configuration read again says
/// which, and an unapplied change is sent again.
fn reconfig_surely(admin: &ZooKeeper, change: &Reconfig, from: i64) -> ClientConfig {
    for _ in 0..10 {
        match admin.reconfig(change, Some(from)) {
            Ok(c) => return c,
            Err(e) if e.is_retryable() => {
                admin.wait_connected(WAIT).unwrap();
                admin.sync("/zookeeper/config").unwrap();
                let (now, _) = admin.get_config(false).unwrap();
                if now.version() != from {
                    return now;
                }
            }
            Err(e) => panic!("reconfig {change:?}: {e:?}"),
        }
    }
    panic!("reconfig {change:?} still lost after 10 tries");
}
