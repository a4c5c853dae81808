//! What the running ZooKeeper server has, and the typed error for what it
//! lacks: `whoAmI` (3.7), persistent and recursive watches and
//! `getAllChildrenNumber` (3.6), TTL nodes (`extendedTypesEnabled`).
//!
//! Every test reads the shared server's version from `srvr` and checks that
//! version's behaviour: `make test` runs them on Debian's 3.8.0, and with
//! `ZK_TEST_CLASSPATH="$(cat /work/cache/zk/3.6.3/classpath)"` (or 3.9.3)
//! on the other versions. No 3.5 server is at hand: the 3.6 rows' error is
//! checked here only on a server that lacks them, and the mapping itself by
//! the client's unit test (`unimplemented_names_what_the_server_lacks`).

mod common;

use std::fs;
use std::io::Write;
use std::time::Duration;

use common::client::*;
use common::{server_version, WAIT};
use zklock::client::{
    Acl, AddWatchMode, ClientInfo, CreateMode, KeeperState, SaslConfig, WatchedEvent, ZooKeeper,
};
use zklock::testing::{shared_server, unique_root, ZkServer};
use zklock::{Error, ZkError, ZooKeeperWatcher};

const SESSION: Duration = Duration::from_secs(10);

fn open() -> &'static [Acl] {
    Acl::open_unsafe()
}

fn info(scheme: &str, user: &str) -> ClientInfo {
    ClientInfo {
        auth_scheme: scheme.to_string(),
        user: user.to_string(),
    }
}

/// Asserts `e` is the typed error for `operation`, naming `needs`.
#[track_caller]
fn assert_unsupported(e: &Error, operation: &str, needs: &str) {
    match e {
        Error::Unsupported {
            operation: op,
            needs: n,
            ..
        } => {
            assert!(op.contains(operation), "{e:?}");
            assert!(n.contains(needs), "{e:?}");
        }
        other => panic!("expected Unsupported({operation}), got {other:?}"),
    }
    assert!(e.is(ZkError::Unimplemented), "{e:?}");
    assert!(e.to_string().contains(needs), "{e}");
}

#[test]
fn who_am_i_lists_the_sessions_identities_or_names_the_version_needed() {
    let cs = shared_server().connect_string();
    let (zk, ev) = connect(&cs, SESSION);
    let root = unique_root("whoami");
    mkdirs(&zk, &root);
    let version = server_version();
    if version >= (3, 7, 0) {
        assert_eq!(zk.who_am_i().unwrap(), [info("ip", "127.0.0.1")]);
        zk.add_auth("digest", b"alice:secret").unwrap();
        let mut me = zk.who_am_i().unwrap();
        me.sort_by(|a, b| a.auth_scheme.cmp(&b.auth_scheme));
        assert_eq!(me, [info("digest", "alice"), info("ip", "127.0.0.1")]);
        assert_eq!(me[0].to_string(), "digest: alice");
        let zkw = ZooKeeperWatcher::builder(cs.as_str()).connect().unwrap();
        assert_eq!(
            zkw.recoverable_zookeeper().who_am_i().unwrap(),
            [info("ip", "127.0.0.1")]
        );
        zkw.close().unwrap();
    } else {
        println!("server {version:?} before 3.7: whoAmI is Unsupported");
        let eph = format!("{root}/eph");
        zk.create(&eph, b"", open(), CreateMode::Ephemeral).unwrap();
        let id = zk.session_id();
        let e = zk.who_am_i().unwrap_err();
        assert_unsupported(&e, "whoAmI", "ZooKeeper 3.7");
        // The old server closes the connection after its answer: the client
        // reconnects on the same session, whose ephemeral node stays.
        ev.wait_state(KeeperState::SyncConnected, 2, WAIT);
        assert_eq!(zk.session_id(), id);
        assert_eq!(zk.exists(&eph, false).unwrap().unwrap().ephemeral_owner, id);
        assert_eq!(ev.count(|e| e.keeper_state == KeeperState::Expired), 0);
        // The pass-through does not retry it.
        let zkw = ZooKeeperWatcher::builder(cs.as_str()).connect().unwrap();
        let e = zkw.recoverable_zookeeper().who_am_i().unwrap_err();
        assert_unsupported(&e, "whoAmI", "ZooKeeper 3.7");
        zkw.close().unwrap();
    }
    rmr(&zk, &root);
    zk.close().unwrap();
}

#[test]
fn persistent_watches_and_all_children_number_need_3_6() {
    let (zk, _ev) = connect(&shared_server().connect_string(), SESSION);
    let root = unique_root("lacks36");
    mkdirs(&zk, &format!("{root}/a/b"));
    let version = server_version();
    if version >= (3, 6, 0) {
        assert_eq!(zk.get_all_children_number(&root).unwrap(), 2);
        zk.add_watch(&root, AddWatchMode::PersistentRecursive)
            .unwrap();
    } else {
        // Not run on this machine (no 3.5 server); what a 3.5 run checks.
        let e = zk.get_all_children_number(&root).unwrap_err();
        assert_unsupported(&e, "getAllChildrenNumber", "ZooKeeper 3.6");
        let e = zk
            .add_watch(&root, AddWatchMode::PersistentRecursive)
            .unwrap_err();
        assert_unsupported(&e, "addWatch", "ZooKeeper 3.6");
    }
    rmr(&zk, &root);
    zk.close().unwrap();
}

/// A server started without TTL nodes (`extendedTypesEnabled=false` in its
/// zoo.cfg, which the server sets as the system property after the
/// harness's `-D`): a TTL create is `Unsupported` naming the setting, and the
/// connection stays (the server's request checks answer, nothing closes).
#[test]
fn ttl_nodes_without_extended_types_name_the_setting() {
    let mut server = ZkServer::start().unwrap();
    let mut cfg = fs::OpenOptions::new()
        .append(true)
        .open(server.dir().join("zoo.cfg"))
        .unwrap();
    writeln!(cfg, "extendedTypesEnabled=false").unwrap();
    drop(cfg);
    server.restart().unwrap();
    let (zk, ev) = connect(&server.connect_string(), SESSION);
    for mode in [
        CreateMode::PersistentWithTtl,
        CreateMode::PersistentSequentialWithTtl,
    ] {
        let e = zk
            .create_ttl("/ttl", b"", open(), mode, Duration::from_secs(5))
            .unwrap_err();
        assert_unsupported(&e, "TTL", "extendedTypesEnabled=true");
    }
    zk.create("/plain", b"", open(), CreateMode::Persistent)
        .unwrap();
    assert_eq!(zk.exists("/ttl", false).unwrap(), None);
    settle(&zk);
    assert_eq!(ev.states(), [KeeperState::SyncConnected], "no reconnect");
    zk.close().unwrap();
    server.stop().unwrap();
}

/// A SASL (DIGEST-MD5) session: whoAmI lists its `sasl` identity beside
/// `ip` (3.7+; skipped with a message on an older server).
#[test]
fn who_am_i_lists_a_sasl_identity() {
    let version = server_version();
    if version < (3, 7, 0) {
        println!("skipped: server {version:?} has no whoAmI (3.7 needed)");
        return;
    }
    let server = ZkServer::start_sasl(&[("alice", "alice-secret")]).unwrap();
    let zk = ZooKeeper::builder(&server.connect_string())
        .with_session_timeout(SESSION)
        .with_sasl(SaslConfig::digest_md5("alice", "alice-secret"))
        .connect(|_e: WatchedEvent| {})
        .unwrap();
    let mut me = zk.who_am_i().unwrap();
    me.sort_by(|a, b| a.auth_scheme.cmp(&b.auth_scheme));
    assert_eq!(me, [info("ip", "127.0.0.1"), info("sasl", "alice")]);
    zk.close().unwrap();
}
