//! `zklock::client` against a real ZooKeeper server: every operation and create
//! mode, multi, ACLs and auth, watches (one-shot, persistent, recursive, removal),
//! chroot, path validation, watcher isolation, connection events and close.
//!
//! One shared server for the binary; each test works under its own root. Fault
//! injection (proxy, restarts, ensembles) lives in `client_faults.rs` and
//! `client_ensemble.rs`; process-wide measurements in `client_process.rs`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::client::*;
use common::exists_checks_read_acl;
use zklock::client::{
    Acl, AddWatchMode, CreateMode, EventType, Id, KeeperState, Op, OpResult, Perms, State,
    WatchedEvent, Watcher, WatcherType, ZooKeeper,
};
use zklock::testing::{shared_server, test_servers, unique_root, wait_until};
use zklock::{Error, ZkError};

const SESSION: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(10);

fn open() -> &'static [Acl] {
    Acl::open_unsafe()
}

/// A connected client and a fresh root for the test.
fn setup(name: &str) -> (ZooKeeper, Arc<Events>, String) {
    let (zk, events) = connect(&test_servers(), SESSION);
    let root = unique_root(name);
    mkdirs(&zk, &root);
    (zk, events, root)
}

fn teardown(zk: &ZooKeeper, root: &str) {
    rmr(zk, root);
    zk.close().unwrap();
}

// ---------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------

#[test]
fn crud_errors_and_every_stat_field() {
    let (zk, _ev, root) = setup("crud");
    let p = format!("{root}/n");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;

    let (created, st) = zk
        .create2(&p, b"one", open(), CreateMode::Persistent)
        .unwrap();
    assert_eq!(created, p);
    assert_eq!(st.czxid, st.mzxid);
    assert_eq!(st.czxid, st.pzxid);
    assert!(st.czxid > 0);
    assert!(
        (st.ctime - before).abs() < 60_000,
        "ctime {} vs {before}",
        st.ctime
    );
    assert_eq!(st.ctime, st.mtime);
    assert_eq!((st.version, st.cversion, st.aversion), (0, 0, 0));
    assert_eq!(st.ephemeral_owner, 0);
    assert_eq!(st.data_length, 3);
    assert_eq!(st.num_children, 0);
    assert!(zk.last_zxid_seen() >= st.czxid);

    let (data, st2) = zk.get_data(&p, false).unwrap();
    assert_eq!(data, b"one");
    assert_eq!(st2, st);
    assert_eq!(zk.exists(&p, false).unwrap(), Some(st));

    let st3 = zk.set_data(&p, b"two!", Some(0)).unwrap();
    assert_eq!(st3.version, 1);
    assert_eq!(st3.data_length, 4);
    assert!(st3.mzxid > st.mzxid);
    assert_eq!(st3.czxid, st.czxid);
    match zk.set_data(&p, b"x", Some(0)) {
        Err(Error::Zk {
            code: ZkError::BadVersion,
            path: Some(path),
        }) => assert_eq!(path, p),
        other => panic!("{other:?}"),
    }
    assert_eq!(zk.set_data(&p, b"", None).unwrap().version, 2);
    // An empty (or null) data buffer reads back empty.
    assert_eq!(zk.get_data(&p, false).unwrap().0, b"");

    // Children, cversion, num_children, pzxid.
    for c in ["a", "b", "c"] {
        zk.create(
            &format!("{p}/{c}"),
            c.as_bytes(),
            open(),
            CreateMode::Persistent,
        )
        .unwrap();
    }
    let mut kids = zk.get_children(&p, false).unwrap();
    kids.sort();
    assert_eq!(kids, ["a", "b", "c"]);
    let (mut kids2, pst) = zk.get_children2(&p, false).unwrap();
    kids2.sort();
    assert_eq!(kids2, kids);
    assert_eq!(pst.num_children, 3);
    assert_eq!(pst.cversion, 3);
    assert!(pst.pzxid > st3.mzxid);

    // Normal-state errors, each with the path.
    assert_code(
        zk.create(&p, b"", open(), CreateMode::Persistent),
        ZkError::NodeExists,
    );
    assert_code(
        zk.create(
            &format!("{root}/no/parent"),
            b"",
            open(),
            CreateMode::Persistent,
        ),
        ZkError::NoNode,
    );
    assert_code(zk.delete(&p, None), ZkError::NotEmpty);
    assert_code(zk.delete(&format!("{p}/a"), Some(7)), ZkError::BadVersion);
    match zk.get_data(&format!("{root}/missing"), false) {
        Err(Error::Zk {
            code: ZkError::NoNode,
            path: Some(path),
        }) => assert_eq!(path, format!("{root}/missing")),
        other => panic!("{other:?}"),
    }
    assert_code(
        zk.get_children(&format!("{root}/missing"), false),
        ZkError::NoNode,
    );
    assert_code(
        zk.set_data(&format!("{root}/missing"), b"", None),
        ZkError::NoNode,
    );
    assert_code(zk.delete(&format!("{root}/missing"), None), ZkError::NoNode);
    assert_eq!(zk.exists(&format!("{root}/missing"), false).unwrap(), None);
    let eph = zk
        .create(&format!("{root}/eph"), b"", open(), CreateMode::Ephemeral)
        .unwrap();
    assert_code(
        zk.create(&format!("{eph}/child"), b"", open(), CreateMode::Persistent),
        ZkError::NoChildrenForEphemerals,
    );
    // An empty ACL is refused before sending.
    assert_code(
        zk.create(&format!("{root}/x"), b"", &[], CreateMode::Persistent),
        ZkError::InvalidAcl,
    );

    for c in ["a", "b", "c"] {
        zk.delete(&format!("{p}/{c}"), Some(0)).unwrap();
    }
    zk.delete(&p, Some(2)).unwrap();
    assert_eq!(zk.exists(&p, false).unwrap(), None);
    zk.sync(&root).unwrap();
    teardown(&zk, &root);
}

#[test]
fn create_modes_ephemeral_and_sequential() {
    let (zk, _ev, root) = setup("modes");
    let e = zk
        .create2(&format!("{root}/e"), b"", open(), CreateMode::Ephemeral)
        .unwrap();
    assert_eq!(e.1.ephemeral_owner, zk.session_id());

    let s1 = zk
        .create(
            &format!("{root}/s-"),
            b"",
            open(),
            CreateMode::PersistentSequential,
        )
        .unwrap();
    let s2 = zk
        .create(
            &format!("{root}/s-"),
            b"",
            open(),
            CreateMode::EphemeralSequential,
        )
        .unwrap();
    let seq = |p: &str| -> i32 {
        let tail = &p[p.len() - 10..];
        assert!(tail.chars().all(|c| c.is_ascii_digit()), "{p}");
        tail.parse().unwrap()
    };
    assert!(s1.starts_with(&format!("{root}/s-")) && s1.len() == root.len() + 3 + 10);
    assert_eq!(seq(&s2), seq(&s1) + 1);
    assert_eq!(zk.exists(&s1, false).unwrap().unwrap().ephemeral_owner, 0);
    assert_eq!(
        zk.exists(&s2, false).unwrap().unwrap().ephemeral_owner,
        zk.session_id()
    );
    // A sequential node may be named by its parent alone ("dir/").
    let bare = zk
        .create(
            &format!("{root}/"),
            b"",
            open(),
            CreateMode::PersistentSequential,
        )
        .unwrap();
    assert_eq!(bare.len(), root.len() + 1 + 10, "{bare}");
    assert_bad_args(zk.create(&format!("{root}/"), b"", open(), CreateMode::Persistent));

    // The session's ephemerals: exactly those two.
    let mut mine = zk.get_ephemerals(&root).unwrap();
    mine.sort();
    let mut want = vec![e.0.clone(), s2.clone()];
    want.sort();
    assert_eq!(mine, want);
    assert!(zk.get_ephemerals("/").unwrap().contains(&s2));
    assert_eq!(
        zk.get_ephemerals(&format!("{root}/s-")).unwrap(),
        vec![s2.clone()]
    );
    assert_bad_args(zk.get_ephemerals("no-slash"));
    teardown(&zk, &root);
}

#[test]
fn container_is_reaped_after_its_last_child_goes() {
    let (zk, _ev, root) = setup("container");
    let c = format!("{root}/c");
    let (p, st) = zk.create2(&c, b"", open(), CreateMode::Container).unwrap();
    assert_eq!(p, c);
    // The server shows clients 0 as a container's owner (its marker is internal).
    assert_eq!(st.ephemeral_owner, 0);
    // Never had a child: not reaped (deliberate: give the 1 s container check a
    // chance).
    zk.create(&format!("{c}/k"), b"", open(), CreateMode::Persistent)
        .unwrap();
    thread::sleep(Duration::from_millis(1500));
    assert!(
        zk.exists(&c, false).unwrap().is_some(),
        "reaped while it had a child"
    );
    zk.delete(&format!("{c}/k"), None).unwrap();
    wait_until(Duration::from_secs(20), "container reaped", || {
        zk.exists(&c, false).unwrap().is_none()
    });
    // A container in a multi.
    let r = zk
        .multi(&[Op::create(
            format!("{root}/c2"),
            b"x".to_vec(),
            CreateMode::Container,
        )])
        .unwrap();
    assert!(
        matches!(&r[0], OpResult::Create { path, .. } if *path == format!("{root}/c2")),
        "{r:?}"
    );
    zk.create(&format!("{root}/c2/k"), b"", open(), CreateMode::Persistent)
        .unwrap();
    zk.delete(&format!("{root}/c2/k"), None).unwrap();
    wait_until(
        Duration::from_secs(20),
        "container from multi reaped",
        || zk.exists(&format!("{root}/c2"), false).unwrap().is_none(),
    );
    teardown(&zk, &root);
}

#[test]
fn ttl_nodes_expire_and_ttl_arguments_are_checked() {
    let (zk, _ev, root) = setup("ttl");
    let t = format!("{root}/t");
    let (p, st) = zk
        .create_ttl(
            &t,
            b"x",
            open(),
            CreateMode::PersistentWithTtl,
            Duration::from_millis(300),
        )
        .unwrap();
    assert_eq!(p, t);
    assert_eq!(st.data_length, 1);
    let (ps, _) = zk
        .create_ttl(
            &format!("{root}/ts-"),
            b"",
            open(),
            CreateMode::PersistentSequentialWithTtl,
            Duration::from_millis(300),
        )
        .unwrap();
    assert!(ps.len() == root.len() + 4 + 10, "{ps}");
    // A long TTL stays.
    zk.create_ttl(
        &format!("{root}/long"),
        b"",
        open(),
        CreateMode::PersistentWithTtl,
        Duration::from_secs(3600),
    )
    .unwrap();
    wait_until(Duration::from_secs(20), "ttl nodes reaped", || {
        zk.exists(&t, false).unwrap().is_none() && zk.exists(&ps, false).unwrap().is_none()
    });
    assert!(zk.exists(&format!("{root}/long"), false).unwrap().is_some());

    assert_bad_args(zk.create(
        &format!("{root}/x"),
        b"",
        open(),
        CreateMode::PersistentWithTtl,
    ));
    assert_bad_args(zk.create_ttl(
        &format!("{root}/x"),
        b"",
        open(),
        CreateMode::Persistent,
        Duration::from_secs(1),
    ));
    assert_bad_args(zk.create_ttl(
        &format!("{root}/x"),
        b"",
        open(),
        CreateMode::PersistentWithTtl,
        Duration::ZERO,
    ));
    assert_bad_args(zk.multi(&[Op::create(
        format!("{root}/x"),
        b"".to_vec(),
        CreateMode::PersistentWithTtl,
    )]));
    teardown(&zk, &root);
}

#[test]
fn multi_applies_all_or_nothing_with_per_op_results() {
    let (zk, _ev, root) = setup("multi");
    assert_eq!(zk.multi(&[]).unwrap(), vec![]);
    zk.create(&format!("{root}/old"), b"o", open(), CreateMode::Persistent)
        .unwrap();
    let ok = zk
        .multi(&[
            Op::create(format!("{root}/a"), b"A".to_vec(), CreateMode::Persistent),
            Op::create(
                format!("{root}/s-"),
                b"".to_vec(),
                CreateMode::PersistentSequential,
            ),
            Op::set_data(format!("{root}/a"), b"A2".to_vec(), Some(0)),
            Op::check(format!("{root}/a"), Some(1)),
            Op::delete(format!("{root}/old"), None),
        ])
        .unwrap();
    assert_eq!(ok.len(), 5);
    // ZooKeeper 3.8 answers a create inside a multi without its Stat.
    assert!(
        matches!(&ok[0], OpResult::Create { path, .. } if *path == format!("{root}/a")),
        "{ok:?}"
    );
    match &ok[1] {
        OpResult::Create { path, .. } => {
            assert!(path.starts_with(&format!("{root}/s-")) && path.len() == root.len() + 13)
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(&ok[2], OpResult::SetData { stat } if stat.version == 1));
    assert_eq!(ok[3], OpResult::Check);
    assert_eq!(ok[4], OpResult::Delete);
    assert_eq!(zk.get_data(&format!("{root}/a"), false).unwrap().0, b"A2");
    assert!(zk.exists(&format!("{root}/old"), false).unwrap().is_none());

    // The second op fails: nothing applies; the first failing op's error; the
    // earlier ops report OK (0), the later ones RuntimeInconsistency.
    let before = zk.get_children(&root, false).unwrap().len();
    match zk.multi(&[
        Op::create(format!("{root}/b"), b"".to_vec(), CreateMode::Persistent),
        Op::check(format!("{root}/a"), Some(99)),
        Op::delete(format!("{root}/missing"), None),
        Op::set_data(format!("{root}/a"), b"never".to_vec(), None),
    ]) {
        Err(Error::Multi {
            index,
            code,
            results,
        }) => {
            assert_eq!(index, 1);
            assert_eq!(code, ZkError::BadVersion);
            assert_eq!(
                results,
                vec![
                    OpResult::Error { code: 0 },
                    OpResult::Error {
                        code: ZkError::BadVersion.code()
                    },
                    OpResult::Error {
                        code: ZkError::RuntimeInconsistency.code()
                    },
                    OpResult::Error {
                        code: ZkError::RuntimeInconsistency.code()
                    },
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(zk.exists(&format!("{root}/b"), false).unwrap().is_none());
    assert_eq!(zk.get_data(&format!("{root}/a"), false).unwrap().0, b"A2");
    assert_eq!(zk.get_children(&root, false).unwrap().len(), before);

    // First op fails.
    match zk.multi(&[
        Op::create(format!("{root}/a"), b"".to_vec(), CreateMode::Persistent),
        Op::create(format!("{root}/c"), b"".to_vec(), CreateMode::Persistent),
    ]) {
        Err(Error::Multi {
            index: 0,
            code: ZkError::NodeExists,
            results,
        }) => assert_eq!(results.len(), 2),
        other => panic!("{other:?}"),
    }
    assert!(zk.exists(&format!("{root}/c"), false).unwrap().is_none());
    // A bad path in any op is refused before sending.
    assert_bad_args(zk.multi(&[
        Op::check(format!("{root}/a"), None),
        Op::delete(format!("{root}/a/"), None),
    ]));
    teardown(&zk, &root);
}

#[test]
fn large_data_round_trips_and_oversized_is_refused() {
    let (zk, _ev, root) = setup("large");
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let p = format!("{root}/big");
    zk.create(&p, &big, open(), CreateMode::Persistent).unwrap();
    let (data, st) = zk.get_data(&p, false).unwrap();
    assert_eq!(st.data_length, big.len() as i32);
    assert!(data == big);
    assert_bad_args(zk.set_data(&p, &vec![0u8; 1 << 20], None));
    assert_bad_args(zk.create(
        &format!("{root}/b2"),
        &vec![0u8; 1 << 20],
        open(),
        CreateMode::Persistent,
    ));
    // Still connected and working.
    assert_eq!(zk.state(), State::Connected);
    zk.set_data(&p, b"small", None).unwrap();
    teardown(&zk, &root);
}

// ---------------------------------------------------------------------------
// ACLs and auth
// ---------------------------------------------------------------------------

#[test]
fn acls_digest_auth_creator_all_and_no_auth() {
    let (zk, _ev, root) = setup("acl");
    let p = format!("{root}/open");
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    let (acl, st) = zk.get_acl(&p).unwrap();
    assert_eq!(acl, open());
    assert_eq!(st.aversion, 0);
    assert_code(
        zk.set_acl(&p, Acl::read_unsafe(), Some(3)),
        ZkError::BadVersion,
    );
    let st = zk.set_acl(&p, Acl::read_unsafe(), Some(0)).unwrap();
    assert_eq!(st.aversion, 1);
    assert_eq!(zk.get_acl(&p).unwrap().0, Acl::read_unsafe());
    assert_code(zk.set_data(&p, b"x", None), ZkError::NoAuth);
    assert_code(zk.set_acl(&p, &[], None), ZkError::InvalidAcl);

    // creator_all without auth: InvalidACL from the server.
    assert_code(
        zk.create(
            &format!("{root}/noauth"),
            b"",
            Acl::creator_all(),
            CreateMode::Persistent,
        ),
        ZkError::InvalidAcl,
    );

    zk.add_auth("digest", b"alice:secret").unwrap();
    let s = format!("{root}/secret");
    zk.create(&s, b"hidden", Acl::creator_all(), CreateMode::Persistent)
        .unwrap();
    let (acl, _) = zk.get_acl(&s).unwrap();
    assert_eq!(acl.len(), 1);
    assert_eq!(acl[0].perms, Perms::ALL);
    assert_eq!(acl[0].id.scheme, "digest");
    assert!(acl[0].id.id.starts_with("alice:"), "{:?}", acl[0].id);
    assert_eq!(zk.get_data(&s, false).unwrap().0, b"hidden");

    let (other, _) = connect(&test_servers(), SESSION);
    assert_code(other.get_data(&s, false), ZkError::NoAuth);
    assert_code(other.set_data(&s, b"", None), ZkError::NoAuth);
    // exists needed no permission until ZOOKEEPER-2590 (3.8.4, 3.9.2): it
    // checks READ now, as getData does.
    if exists_checks_read_acl() {
        assert_code(other.exists(&s, false), ZkError::NoAuth);
    } else {
        assert!(
            other.exists(&s, false).unwrap().is_some(),
            "exists needs no permission before 3.8.4 / 3.9.2"
        );
    }
    other.add_auth("digest", b"alice:wrong").unwrap();
    assert_code(other.get_data(&s, false), ZkError::NoAuth);
    other.add_auth("digest", b"alice:secret").unwrap();
    assert_eq!(other.get_data(&s, false).unwrap().0, b"hidden");

    // An explicit digest ACL: read-only for alice.
    let ro = [Acl::new(
        Perms::READ,
        Id::new("digest", acl[0].id.id.clone()),
    )];
    zk.set_acl(&s, &ro, None).unwrap();
    assert_eq!(other.get_data(&s, false).unwrap().0, b"hidden");
    assert_code(other.set_data(&s, b"", None), ZkError::NoAuth);
    other.close().unwrap();
    zk.delete(&s, None).unwrap();
    zk.set_acl(&p, open(), None).unwrap_err(); // read-only for everyone: NoAuth
    teardown(&zk, &root);
}

#[test]
fn unknown_auth_scheme_is_auth_failed_and_final() {
    let (zk, events) = connect(&test_servers(), SESSION);
    assert_code(zk.add_auth("no-such-scheme", b"x"), ZkError::AuthFailed);
    assert_auth_failed_once(&zk, &events);
    zk.close().unwrap();
    assert_eq!(events.states().len(), 2);
}

/// The handle ended with AuthFailed, told once, with no Disconnected, reconnect
/// or Closed around it; later calls get AuthFailed.
fn assert_auth_failed_once(zk: &ZooKeeper, events: &Events) {
    events.wait_state(KeeperState::AuthFailed, 1, WAIT);
    assert_eq!(zk.state(), State::AuthFailed);
    assert_code(zk.exists("/", false), ZkError::AuthFailed);
    settle_closed();
    assert_eq!(
        events.states(),
        [KeeperState::SyncConnected, KeeperState::AuthFailed],
        "told once, no Disconnected, reconnect or Closed around it"
    );
}

/// The same when the refusal is read by a caller, not the connection thread:
/// a step hook holds caller A on the read side (before it reads) while the
/// auth packet goes out and the server answers it and closes the connection;
/// then A reads its reply and the refusal together. It stays final (no
/// Disconnected and reconnect before AuthFailed): the connection thread,
/// taking the failed read side next, must get AuthFailed, not an I/O error.
#[test]
fn auth_failed_read_by_a_caller_is_final_too() {
    let (zk, events) = connect(&test_servers(), SESSION);
    let id = zk.session_id();
    // A call held on the read side of its own reply (the hook runs on the
    // next call that reads its own reply; A calls until its call is held).
    let a = HeldCaller::start(&zk, WAIT);
    let b = {
        let zk = zk.clone();
        thread::spawn(move || zk.add_auth("no-such-scheme", b"x"))
    };
    // The server refused the packet and closed the connection: the refusal
    // waits in the socket for A.
    let server = test_servers();
    let addr = server.split(',').next().unwrap();
    wait_until(WAIT, "the server closed the connection", || {
        !cons_sessions(addr).contains(&id)
    });
    a.release();
    // The server handles auth packets in its I/O thread, ahead of requests
    // queued before them: A's own reply may come before the refusal, or never
    // (then A gets the handle's end). Either way A read the refusal.
    match a.join() {
        Ok(stat) => assert!(stat.is_some()),
        Err(e) => assert!(e.is(ZkError::AuthFailed), "{e}"),
    }
    let _ = b.join().unwrap();
    assert_auth_failed_once(&zk, &events);
    zk.close().unwrap();
}

/// Deliberate: gives an unwanted event time to show (nothing to wait for).
fn settle_closed() {
    thread::sleep(Duration::from_millis(200));
}

// ---------------------------------------------------------------------------
// Watches
// ---------------------------------------------------------------------------

#[test]
fn one_shot_watches_fire_once_with_the_right_event() {
    let (zk, events, root) = setup("oneshot");
    let d = format!("{root}/d");
    let missing = format!("{root}/m");
    zk.create(&d, b"", open(), CreateMode::Persistent).unwrap();

    let data = Events::new();
    let exist = Events::new();
    let child = Events::new();
    zk.get_data_w(&d, data.watcher()).unwrap();
    assert_eq!(zk.exists_w(&missing, exist.watcher()).unwrap(), None);
    zk.get_children_w(&root, child.watcher()).unwrap();
    assert_eq!(zk.watch_count(), 3);
    let addr = shared_server().connect_string();
    if test_servers() == addr {
        let mut w = wchc_paths(&addr, zk.session_id());
        w.sort();
        // wchc lists the data and exist watches (not child watches).
        let mut want = vec![d.clone(), missing.clone()];
        want.sort();
        assert_eq!(w, want, "server-side watches");
    }

    zk.set_data(&d, b"1", None).unwrap();
    data.wait_node(EventType::NodeDataChanged, &d, 1, WAIT);
    zk.set_data(&d, b"2", None).unwrap(); // one-shot: no second event
    zk.create(&missing, b"", open(), CreateMode::Persistent)
        .unwrap();
    exist.wait_node(EventType::NodeCreated, &missing, 1, WAIT);
    child.wait_node(EventType::NodeChildrenChanged, &root, 1, WAIT);
    zk.delete(&missing, None).unwrap();
    settle(&zk);
    assert_eq!(data.len(), 1, "{:?}", data.all());
    assert_eq!(exist.len(), 1, "{:?}", exist.all());
    assert_eq!(child.len(), 1, "{:?}", child.all());
    assert!(data.all()[0].keeper_state == KeeperState::SyncConnected);
    assert_eq!(zk.watch_count(), 0);
    assert!(events.nodes().is_empty(), "default watcher not involved");

    // exists on an existing node watches data and deletion; child watches see deletion.
    let ex = Events::new();
    let ch = Events::new();
    zk.exists_w(&d, ex.watcher()).unwrap();
    zk.get_children_w(&d, ch.watcher()).unwrap();
    zk.delete(&d, None).unwrap();
    ex.wait_node(EventType::NodeDeleted, &d, 1, WAIT);
    ch.wait_node(EventType::NodeDeleted, &d, 1, WAIT);

    // The default watcher with `watch = true`.
    zk.exists(&d, true).unwrap();
    zk.create(&d, b"", open(), CreateMode::Persistent).unwrap();
    events.wait_node(EventType::NodeCreated, &d, 1, WAIT);
    zk.get_children2(&d, true).unwrap();
    zk.create(&format!("{d}/k"), b"", open(), CreateMode::Ephemeral)
        .unwrap();
    events.wait_node(EventType::NodeChildrenChanged, &d, 1, WAIT);
    settle(&zk);
    assert_eq!(events.nodes().len(), 2, "{:?}", events.nodes());
    teardown(&zk, &root);
}

/// A node event carries the zxid of the change that fired it on ZooKeeper 3.9
/// (ZOOKEEPER-4655): the data change's `mzxid`, the creation's `czxid`, the
/// deletion's own zxid; older servers send none, and a connection event has
/// none.
#[test]
fn node_events_carry_the_zxid_of_their_change_on_3_9() {
    let (zk, events, root) = setup("event-zxid");
    let d = format!("{root}/d");
    let data = Events::new();
    assert_eq!(zk.exists_w(&d, data.watcher()).unwrap(), None);
    let (_, created) = zk.create2(&d, b"", open(), CreateMode::Persistent).unwrap();
    data.wait_node(EventType::NodeCreated, &d, 1, WAIT);
    zk.get_data_w(&d, data.watcher()).unwrap();
    let changed = zk.set_data(&d, b"1", None).unwrap();
    data.wait_node(EventType::NodeDataChanged, &d, 1, WAIT);
    let zxids: Vec<Option<i64>> = data.all().iter().map(|e| e.zxid).collect();
    if zklock::testing::server_version().at_least(3, 9) {
        assert_eq!(zxids, [Some(created.czxid), Some(changed.mzxid)]);
    } else {
        assert_eq!(zxids, [None, None], "a server before 3.9 sends no zxid");
    }
    assert!(
        events.all().iter().all(|e| e.zxid.is_none()),
        "connection events carry none: {:?}",
        events.all()
    );
    teardown(&zk, &root);
}

#[test]
fn a_watcher_registered_several_ways_is_called_once_per_trigger() {
    let (zk, events, root) = setup("once");
    let p = format!("{root}/p");
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    let rec = Events::new();
    let w: Arc<dyn Watcher> = Arc::new(rec.watcher());
    zk.exists_watch(&p, w.clone()).unwrap();
    zk.get_data_watch(&p, w.clone()).unwrap();
    zk.get_data_watch(&p, w.clone()).unwrap();
    zk.get_children_watch(&p, w.clone()).unwrap();
    zk.delete(&p, None).unwrap();
    rec.wait_node(EventType::NodeDeleted, &p, 1, WAIT);
    settle(&zk);
    assert_eq!(rec.len(), 1, "{:?}", rec.all());
    assert_eq!(zk.watch_count(), 0);

    // Same for the default watcher, through every `watch = true` call.
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    zk.exists(&p, true).unwrap();
    zk.get_data(&p, true).unwrap();
    zk.get_children(&p, true).unwrap();
    zk.set_data(&p, b"x", None).unwrap();
    events.wait_node(EventType::NodeDataChanged, &p, 1, WAIT);
    settle(&zk);
    assert_eq!(events.nodes(), [(EventType::NodeDataChanged, p.clone())]);
    // The child watch is still there, and it alone fires on deletion.
    assert_eq!(zk.watch_count(), 1);
    zk.delete(&p, None).unwrap();
    events.wait_node(EventType::NodeDeleted, &p, 1, WAIT);
    settle(&zk);
    assert_eq!(events.nodes().len(), 2);

    // Two distinct watchers on one path: each called once.
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    let a = Events::new();
    let b = Events::new();
    zk.get_data_w(&p, a.watcher()).unwrap();
    zk.get_data_w(&p, b.watcher()).unwrap();
    zk.set_data(&p, b"y", None).unwrap();
    a.wait_node(EventType::NodeDataChanged, &p, 1, WAIT);
    b.wait_node(EventType::NodeDataChanged, &p, 1, WAIT);
    settle(&zk);
    assert_eq!((a.len(), b.len()), (1, 1));
    teardown(&zk, &root);
}

#[test]
fn no_stale_watch_after_no_node() {
    let (zk, _events, root) = setup("stale");
    let m = format!("{root}/m");
    let rec = Events::new();
    assert_code(zk.get_data_w(&m, rec.watcher()), ZkError::NoNode);
    assert_code(zk.get_children_w(&m, rec.watcher()), ZkError::NoNode);
    assert_code(zk.get_data(&m, true), ZkError::NoNode);
    assert_eq!(zk.watch_count(), 0, "nothing registered after NoNode");
    let addr = shared_server().connect_string();
    if test_servers() == addr {
        assert!(wchc_paths(&addr, zk.session_id()).is_empty());
    }
    zk.create(&m, b"", open(), CreateMode::Persistent).unwrap();
    zk.set_data(&m, b"", None).unwrap();
    zk.delete(&m, None).unwrap();
    settle(&zk);
    assert_eq!(rec.len(), 0, "{:?}", rec.all());
    teardown(&zk, &root);
}

#[test]
fn persistent_watch_stays_until_removed() {
    let (zk, events, root) = setup("persistent");
    let p = format!("{root}/p");
    let rec = Events::new();
    zk.add_watch_w(&p, AddWatchMode::Persistent, rec.watcher())
        .unwrap();
    assert_eq!(zk.watch_count(), 1);
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    zk.set_data(&p, b"1", None).unwrap();
    zk.set_data(&p, b"2", None).unwrap();
    zk.create(&format!("{p}/c"), b"", open(), CreateMode::Persistent)
        .unwrap();
    zk.set_data(&format!("{p}/c"), b"", None).unwrap(); // not the watched node
    zk.delete(&format!("{p}/c"), None).unwrap();
    zk.delete(&p, None).unwrap();
    rec.wait_node(EventType::NodeDeleted, &p, 1, WAIT);
    settle(&zk);
    use EventType as E;
    let want: Vec<(EventType, String)> = [
        E::NodeCreated,
        E::NodeDataChanged,
        E::NodeDataChanged,
        E::NodeChildrenChanged,
        E::NodeChildrenChanged,
        E::NodeDeleted,
    ]
    .iter()
    .map(|t| (*t, p.clone()))
    .collect();
    assert_eq!(rec.nodes(), want);
    assert_eq!(zk.watch_count(), 1, "persistent watch stays");

    zk.remove_watches(&p, WatcherType::Persistent).unwrap();
    rec.wait_node(E::PersistentWatchRemoved, &p, 1, WAIT);
    assert_eq!(zk.watch_count(), 0);
    let addr = shared_server().connect_string();
    if test_servers() == addr {
        assert!(wchc_paths(&addr, zk.session_id()).is_empty());
    }
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    settle(&zk);
    assert_eq!(rec.len(), want.len() + 1, "{:?}", rec.all());
    assert_code(
        zk.remove_watches(&p, WatcherType::Persistent),
        ZkError::NoWatcher,
    );

    // The default watcher as a persistent watcher.
    zk.add_watch(&p, AddWatchMode::Persistent).unwrap();
    zk.set_data(&p, b"d", None).unwrap();
    events.wait_node(E::NodeDataChanged, &p, 1, WAIT);
    teardown(&zk, &root);
}

#[test]
fn recursive_watch_sees_the_subtree_but_not_child_lists() {
    let (zk, _events, root) = setup("recursive");
    let r = format!("{root}/r");
    zk.create(&r, b"", open(), CreateMode::Persistent).unwrap();
    let rec = Events::new();
    zk.add_watch_w(&r, AddWatchMode::PersistentRecursive, rec.watcher())
        .unwrap();
    let a = format!("{r}/a");
    let b = format!("{a}/b");
    zk.create(&a, b"", open(), CreateMode::Persistent).unwrap();
    zk.create(&b, b"", open(), CreateMode::Persistent).unwrap();
    zk.set_data(&b, b"x", None).unwrap();
    zk.set_data(&r, b"x", None).unwrap();
    zk.delete(&b, None).unwrap();
    zk.create(
        &format!("{root}/outside"),
        b"",
        open(),
        CreateMode::Persistent,
    )
    .unwrap();
    zk.create(&format!("{root}/r2"), b"", open(), CreateMode::Persistent)
        .unwrap(); // prefix, not under
    rec.wait_node(EventType::NodeDeleted, &b, 1, WAIT);
    settle(&zk);
    use EventType as E;
    assert_eq!(
        rec.nodes(),
        vec![
            (E::NodeCreated, a.clone()),
            (E::NodeCreated, b.clone()),
            (E::NodeDataChanged, b.clone()),
            (E::NodeDataChanged, r.clone()),
            (E::NodeDeleted, b.clone()),
        ]
    );
    zk.remove_watches(&r, WatcherType::PersistentRecursive)
        .unwrap();
    rec.wait_node(E::PersistentWatchRemoved, &r, 1, WAIT);
    zk.delete(&a, None).unwrap();
    settle(&zk);
    assert_eq!(rec.len(), 6);
    teardown(&zk, &root);
}

#[test]
fn remove_watches_by_kind() {
    let (zk, _events, root) = setup("remove");
    let p = format!("{root}/p");
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    let data = Events::new();
    let child = Events::new();
    zk.get_data_w(&p, data.watcher()).unwrap();
    zk.exists_w(&p, data.watcher()).unwrap();
    zk.get_children_w(&p, child.watcher()).unwrap();
    assert_eq!(zk.watch_count(), 3);

    zk.remove_watches(&p, WatcherType::Data).unwrap();
    data.wait_node(EventType::DataWatchRemoved, &p, 2, WAIT);
    assert_eq!(zk.watch_count(), 1);
    assert_code(zk.remove_watches(&p, WatcherType::Data), ZkError::NoWatcher);
    zk.set_data(&p, b"x", None).unwrap();
    zk.remove_watches(&p, WatcherType::Children).unwrap();
    child.wait_node(EventType::ChildWatchRemoved, &p, 1, WAIT);
    assert_eq!(zk.watch_count(), 0);
    let addr = shared_server().connect_string();
    if test_servers() == addr {
        assert!(wchc_paths(&addr, zk.session_id()).is_empty());
    }
    zk.create(&format!("{p}/c"), b"", open(), CreateMode::Persistent)
        .unwrap();
    settle(&zk);
    assert_eq!(data.nodes().len(), 2, "{:?}", data.nodes());
    assert_eq!(child.nodes().len(), 1, "{:?}", child.nodes());

    // Any: every kind at once.
    let any = Events::new();
    zk.get_data_w(&p, any.watcher()).unwrap();
    zk.get_children_w(&p, any.watcher()).unwrap();
    zk.add_watch_w(&p, AddWatchMode::Persistent, any.watcher())
        .unwrap();
    zk.remove_watches(&p, WatcherType::Any).unwrap();
    any.wait_count(3, WAIT, "3 removal events", |_| true);
    assert_eq!(zk.watch_count(), 0);
    zk.delete(&format!("{p}/c"), None).unwrap();
    settle(&zk);
    assert_eq!(any.len(), 3, "{:?}", any.all());
    assert_code(
        zk.remove_watches(&format!("{root}/none"), WatcherType::Any),
        ZkError::NoWatcher,
    );
    teardown(&zk, &root);
}

/// `remove_watcher` takes one watcher off a path and leaves the others
/// (Java's `removeWatches(path, watcher, type, local)`); the server's watch
/// goes only with the last one.
#[test]
fn remove_watcher_removes_one_watcher_only() {
    let (zk, _events, root) = setup("remove-one");
    let p = format!("{root}/p");
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    let (a, b) = (Events::new(), Events::new());
    let wa: Arc<dyn Watcher> = Arc::new(a.watcher());
    let wb: Arc<dyn Watcher> = Arc::new(b.watcher());
    zk.get_data_watch(&p, wa.clone()).unwrap();
    zk.exists_watch(&p, wa.clone()).unwrap();
    zk.get_data_watch(&p, wb.clone()).unwrap();
    zk.get_children_watch(&p, wa.clone()).unwrap();
    zk.remove_watcher(&p, &wa, WatcherType::Data).unwrap();
    a.wait_node(EventType::DataWatchRemoved, &p, 1, WAIT);
    assert_code(
        zk.remove_watcher(&p, &wa, WatcherType::Data),
        ZkError::NoWatcher,
    );
    // b still hears the change; a's data watch is gone, its child watch not.
    zk.set_data(&p, b"x", None).unwrap();
    b.wait_node(EventType::NodeDataChanged, &p, 1, WAIT);
    zk.create(&format!("{p}/c"), b"", open(), CreateMode::Persistent)
        .unwrap();
    a.wait_node(EventType::NodeChildrenChanged, &p, 1, WAIT);
    settle(&zk);
    assert_eq!(
        a.node_count(EventType::NodeDataChanged, &p),
        0,
        "{:?}",
        a.nodes()
    );
    assert_eq!(a.node_count(EventType::DataWatchRemoved, &p), 1);
    assert_eq!(b.nodes().len(), 1, "{:?}", b.nodes());
    // The last watcher: the server's watch goes too.
    zk.exists_watch(&p, wb.clone()).unwrap();
    zk.remove_watcher(&p, &wb, WatcherType::Any).unwrap();
    b.wait_node(EventType::DataWatchRemoved, &p, 1, WAIT);
    assert_eq!(zk.watch_count(), 0);
    let addr = shared_server().connect_string();
    if test_servers() == addr {
        assert!(wchc_paths(&addr, zk.session_id()).is_empty());
    }
    teardown(&zk, &root);
}

#[test]
fn remove_watches_async_goes_before_the_next_request() {
    let (zk, _events, root) = setup("remove_async");
    let p = format!("{root}/p");
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    let data = Events::new();
    zk.exists_w(&p, data.watcher()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let on = tx.clone();
    zk.remove_watches_async(&p, WatcherType::Data, move |r| {
        on.send((
            r.map_err(|e| e.code()),
            thread::current().name().map(String::from),
        ))
        .unwrap()
    });
    // Removed here at once; the delete sent right after, without waiting.
    assert_eq!(zk.watch_count(), 0);
    zk.delete(&p, None).unwrap();
    let (r, thread_name) = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(r, Ok(()));
    assert_ne!(thread_name, thread::current().name().map(String::from));
    data.wait_node(EventType::DataWatchRemoved, &p, 1, WAIT);
    settle(&zk);
    assert_eq!(data.len(), 1, "only the removal is told: {:?}", data.all());
    let addr = shared_server().connect_string();
    if test_servers() == addr {
        assert!(wchc_paths(&addr, zk.session_id()).is_empty());
    }
    // Nothing to remove: NoWatcher, nothing sent.
    zk.remove_watches_async(&p, WatcherType::Any, move |r| {
        tx.send((r.map_err(|e| e.code()), None)).unwrap()
    });
    assert_eq!(
        rx.recv_timeout(WAIT).unwrap().0,
        Err(Some(ZkError::NoWatcher))
    );
    teardown(&zk, &root);
}

#[test]
fn removal_events_come_on_the_event_thread() {
    let (zk, _events, root) = setup("removal_thread");
    let p = format!("{root}/p");
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    let names = Arc::new(Mutex::new(Vec::new()));
    let n = names.clone();
    let w: Arc<dyn Watcher> = Arc::new(move |e: WatchedEvent| {
        n.lock()
            .unwrap()
            .push((e.event_type, thread::current().name().map(String::from)));
    });
    zk.get_data_watch(&p, w.clone()).unwrap();
    zk.get_children_watch(&p, w.clone()).unwrap();
    zk.remove_watches(&p, WatcherType::Any).unwrap();
    wait_until(WAIT, "two removal events", || {
        names.lock().unwrap().len() == 2
    });
    let got = names.lock().unwrap().clone();
    assert!(
        got.contains(&(EventType::DataWatchRemoved, Some("zklock-event".into()))),
        "{got:?}"
    );
    assert!(
        got.contains(&(EventType::ChildWatchRemoved, Some("zklock-event".into()))),
        "{got:?}"
    );
    teardown(&zk, &root);
}

#[test]
fn removing_one_kind_of_watch_keeps_the_others_on_the_same_path() {
    // ZooKeeper 3.8 removes server-side every watch of the connection on the path
    // (its tables know no modes); the client sets the remaining ones again.
    let (zk, _events, root) = setup("remove_keeps");
    let p = format!("{root}/p");
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    let pers = Events::new();
    let data = Events::new();
    let child = Events::new();
    zk.add_watch_w(&p, AddWatchMode::Persistent, pers.watcher())
        .unwrap();
    zk.get_children_w(&p, child.watcher()).unwrap();
    // Removing the persistent watch keeps the child watch.
    zk.remove_watches(&p, WatcherType::Persistent).unwrap();
    pers.wait_node(EventType::PersistentWatchRemoved, &p, 1, WAIT);
    assert_eq!(zk.watch_count(), 1);
    zk.create(&format!("{p}/c1"), b"", open(), CreateMode::Persistent)
        .unwrap();
    child.wait_node(EventType::NodeChildrenChanged, &p, 1, WAIT);

    // Removing the data watch keeps the persistent one.
    zk.add_watch_w(&p, AddWatchMode::Persistent, pers.watcher())
        .unwrap();
    zk.get_data_w(&p, data.watcher()).unwrap();
    zk.remove_watches(&p, WatcherType::Data).unwrap();
    data.wait_node(EventType::DataWatchRemoved, &p, 1, WAIT);
    zk.set_data(&p, b"1", None).unwrap();
    zk.create(&format!("{p}/c2"), b"", open(), CreateMode::Persistent)
        .unwrap();
    zk.set_data(&p, b"2", None).unwrap();
    pers.wait_node(EventType::NodeDataChanged, &p, 2, WAIT);
    pers.wait_node(EventType::NodeChildrenChanged, &p, 1, WAIT);
    // A recursive watch survives the removal of a child watch on its root.
    let rec = Events::new();
    zk.add_watch_w(&p, AddWatchMode::PersistentRecursive, rec.watcher())
        .unwrap();
    zk.get_children_w(&p, child.watcher()).unwrap();
    zk.remove_watches(&p, WatcherType::Children).unwrap();
    child.wait_node(EventType::ChildWatchRemoved, &p, 1, WAIT);
    zk.set_data(&format!("{p}/c1"), b"x", None).unwrap();
    rec.wait_node(EventType::NodeDataChanged, &format!("{p}/c1"), 1, WAIT);
    settle(&zk);
    assert_eq!(data.len(), 1, "{:?}", data.all());
    teardown(&zk, &root);
}

#[test]
fn persistent_and_one_shot_watch_on_the_same_path() {
    let (zk, _events, root) = setup("mixed");
    let p = format!("{root}/p");
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    let pers = Events::new();
    let once = Events::new();
    zk.add_watch_w(&p, AddWatchMode::Persistent, pers.watcher())
        .unwrap();
    zk.get_data_w(&p, once.watcher()).unwrap();
    for i in 0..3u8 {
        zk.set_data(&p, &[i], None).unwrap();
        pers.wait_node(EventType::NodeDataChanged, &p, i as usize + 1, WAIT);
    }
    settle(&zk);
    assert_eq!(once.len(), 1, "{:?}", once.all());
    assert_eq!(pers.len(), 3, "{:?}", pers.all());

    // A recursive watch, with exists and child watches on its root.
    let r = format!("{root}/r");
    zk.create(&r, b"", open(), CreateMode::Persistent).unwrap();
    let rec = Events::new();
    zk.add_watch_w(&r, AddWatchMode::PersistentRecursive, rec.watcher())
        .unwrap();
    for i in 0..3u8 {
        // Both orders: each registration must leave the other watches working.
        if i % 2 == 0 {
            zk.exists_w(&r, once.watcher()).unwrap();
            zk.get_children_w(&r, once.watcher()).unwrap();
        } else {
            zk.get_children_w(&r, once.watcher()).unwrap();
            zk.exists_w(&r, once.watcher()).unwrap();
        }
        zk.set_data(&r, &[i], None).unwrap();
        zk.create(&format!("{r}/c{i}"), b"", open(), CreateMode::Persistent)
            .unwrap();
        rec.wait_node(EventType::NodeDataChanged, &r, i as usize + 1, WAIT);
        rec.wait_node(EventType::NodeCreated, &format!("{r}/c{i}"), 1, WAIT);
    }
    settle(&zk);
    assert_eq!(rec.len(), 6, "{:?}", rec.all());
    assert_eq!(once.len(), 1 + 6, "{:?}", once.all());
    teardown(&zk, &root);
}

// ---------------------------------------------------------------------------
// Chroot and paths
// ---------------------------------------------------------------------------

#[test]
fn chroot_applies_to_every_call_and_every_event_path() {
    let (plain, _pe) = connect(&test_servers(), SESSION);
    let base = unique_root("chroot");
    mkdirs(&plain, &base);
    let (zk, events) = connect(&format!("{}{base}", test_servers()), SESSION);
    assert_eq!(zk.chroot(), Some(base.as_str()));
    let srv = |p: &str| format!("{base}{p}");

    // Creates of every flavour return client paths and land under the chroot.
    assert_eq!(
        zk.create("/a", b"A", open(), CreateMode::Persistent)
            .unwrap(),
        "/a"
    );
    assert_eq!(plain.get_data(&srv("/a"), false).unwrap().0, b"A");
    let (p2, _) = zk
        .create2("/b", b"", open(), CreateMode::Persistent)
        .unwrap();
    assert_eq!(p2, "/b");
    let s = zk
        .create("/a/s-", b"", open(), CreateMode::EphemeralSequential)
        .unwrap();
    assert!(s.starts_with("/a/s-") && s.len() == 15, "{s}");
    let (t, _) = zk
        .create_ttl(
            "/ttl",
            b"",
            open(),
            CreateMode::PersistentWithTtl,
            Duration::from_secs(3600),
        )
        .unwrap();
    assert_eq!(t, "/ttl");
    let (c, _) = zk
        .create2("/cont", b"", open(), CreateMode::Container)
        .unwrap();
    assert_eq!(c, "/cont");
    assert!(plain.exists(&srv("/cont"), false).unwrap().is_some());

    // Reads, the root of the chroot, errors.
    let mut kids = zk.get_children("/", false).unwrap();
    kids.sort();
    assert_eq!(kids, ["a", "b", "cont", "ttl"]);
    assert_eq!(zk.get_children2("/a", false).unwrap().0.len(), 1);
    assert!(zk.exists("/", false).unwrap().is_some());
    assert_eq!(zk.get_data("/a", false).unwrap().0, b"A");
    match zk.get_data("/missing", false) {
        Err(Error::Zk {
            code: ZkError::NoNode,
            path: Some(p),
        }) => assert_eq!(p, "/missing"),
        other => panic!("{other:?}"),
    }
    zk.set_data("/b", b"B", None).unwrap();
    assert_eq!(plain.get_data(&srv("/b"), false).unwrap().0, b"B");
    let no_admin = [Acl::new(Perms(15), Id::new("world", "anyone"))];
    zk.set_acl("/b", &no_admin, None).unwrap();
    assert_eq!(zk.get_acl("/b").unwrap().0, no_admin);
    assert_eq!(plain.get_acl(&srv("/b")).unwrap().0, no_admin);
    zk.sync("/").unwrap();
    zk.sync("/a").unwrap();
    assert_eq!(zk.get_ephemerals("/").unwrap(), vec![s.clone()]);
    assert_eq!(zk.get_ephemerals("/a").unwrap(), vec![s.clone()]);

    // Multi: paths in and out.
    let r = zk
        .multi(&[
            Op::create("/m", b"".to_vec(), CreateMode::Persistent),
            Op::create("/m/q-", b"".to_vec(), CreateMode::PersistentSequential),
            Op::set_data("/a", b"A2".to_vec(), None),
            Op::check("/b", None),
            Op::delete("/ttl", None),
        ])
        .unwrap();
    assert!(matches!(&r[0], OpResult::Create { path, .. } if path == "/m"));
    assert!(matches!(&r[1], OpResult::Create { path, .. } if path.starts_with("/m/q-")));
    assert!(plain.exists(&srv("/m"), false).unwrap().is_some());
    assert!(plain.exists(&srv("/ttl"), false).unwrap().is_none());

    // Every kind of watch sees client paths.
    zk.get_data("/a", true).unwrap();
    zk.exists("/new", true).unwrap();
    zk.get_children("/b", true).unwrap();
    zk.add_watch("/m", AddWatchMode::Persistent).unwrap();
    let rec = Events::new();
    zk.add_watch_w("/", AddWatchMode::PersistentRecursive, rec.watcher())
        .unwrap();
    plain.set_data(&srv("/a"), b"x", None).unwrap();
    plain
        .create(&srv("/new"), b"", open(), CreateMode::Persistent)
        .unwrap();
    plain
        .create(&srv("/b/k"), b"", open(), CreateMode::Persistent)
        .unwrap();
    plain.set_data(&srv("/m"), b"", None).unwrap();
    plain.delete(&srv("/new"), None).unwrap();
    events.wait_node(EventType::NodeDataChanged, "/m", 1, WAIT);
    rec.wait_node(EventType::NodeDeleted, "/new", 1, WAIT);
    settle(&zk);
    let mut got = events.nodes();
    got.sort_by(|x, y| x.1.cmp(&y.1));
    assert_eq!(
        got,
        vec![
            (EventType::NodeDataChanged, "/a".to_string()),
            (EventType::NodeChildrenChanged, "/b".to_string()),
            (EventType::NodeDataChanged, "/m".to_string()),
            (EventType::NodeCreated, "/new".to_string()),
        ]
    );
    assert_eq!(
        rec.nodes(),
        vec![
            (EventType::NodeDataChanged, "/a".to_string()),
            (EventType::NodeCreated, "/new".to_string()),
            (EventType::NodeCreated, "/b/k".to_string()),
            (EventType::NodeDataChanged, "/m".to_string()),
            (EventType::NodeDeleted, "/new".to_string()),
        ]
    );
    // A node event on the chroot itself is "/".
    plain.set_data(&base, b"root", None).unwrap();
    rec.wait_node(EventType::NodeDataChanged, "/", 1, WAIT);
    zk.remove_watches("/", WatcherType::PersistentRecursive)
        .unwrap();
    rec.wait_node(EventType::PersistentWatchRemoved, "/", 1, WAIT);
    zk.remove_watches("/m", WatcherType::Any).unwrap();
    events.wait_node(EventType::PersistentWatchRemoved, "/m", 1, WAIT);

    // Deletes.
    zk.delete("/b/k", None).unwrap();
    zk.delete(&s, None).unwrap();
    assert!(plain.exists(&srv(&s), false).unwrap().is_none());
    zk.close().unwrap();
    rmr(&plain, &base);
    plain.close().unwrap();
}

#[test]
fn bad_paths_are_bad_arguments_for_every_call() {
    let (zk, _events, root) = setup("badpaths");
    let zxid = zk.last_zxid_seen();
    let bad = [
        "", "a", "a/b", "/a/", "//", "/a//b", "/a/./b", "/a/../b", "/.", "/..", "/a\0b",
        "/a\u{1}b", "/\u{7f}",
    ];
    let rec = Events::new();
    let w: Arc<dyn Watcher> = Arc::new(rec.watcher());
    for p in bad {
        let o = open();
        assert_bad_args(zk.create(p, b"", o, CreateMode::Persistent));
        assert_bad_args(zk.create2(p, b"", o, CreateMode::Ephemeral));
        assert_bad_args(zk.create_ttl(
            p,
            b"",
            o,
            CreateMode::PersistentWithTtl,
            Duration::from_secs(1),
        ));
        assert_bad_args(zk.delete(p, None));
        assert_bad_args(zk.exists(p, true));
        assert_bad_args(zk.exists_w(p, rec.watcher()));
        assert_bad_args(zk.exists_watch(p, w.clone()));
        assert_bad_args(zk.get_data(p, false));
        assert_bad_args(zk.get_data_w(p, rec.watcher()));
        assert_bad_args(zk.get_data_watch(p, w.clone()));
        assert_bad_args(zk.set_data(p, b"", None));
        assert_bad_args(zk.get_children(p, true));
        assert_bad_args(zk.get_children_w(p, rec.watcher()));
        assert_bad_args(zk.get_children2(p, false));
        assert_bad_args(zk.get_acl(p));
        assert_bad_args(zk.set_acl(p, o, None));
        assert_bad_args(zk.sync(p));
        assert_bad_args(zk.add_watch(p, AddWatchMode::Persistent));
        assert_bad_args(zk.add_watch_w(p, AddWatchMode::PersistentRecursive, rec.watcher()));
        assert_bad_args(zk.remove_watches(p, WatcherType::Any));
        assert_bad_args(zk.multi(&[Op::check(p, None)]));
        assert_bad_args(zk.multi(&[Op::create(p, b"".to_vec(), CreateMode::Persistent)]));
        assert_bad_args(zk.multi(&[Op::set_data(p, b"".to_vec(), None)]));
        assert_bad_args(zk.multi(&[Op::delete(p, None)]));
    }
    // Sequential creates also refuse bad prefixes (but allow "dir/").
    for p in ["/", "a-", "/a//", "/a/../"] {
        assert_bad_args(zk.create(p, b"", open(), CreateMode::PersistentSequential));
    }
    assert_bad_args(zk.get_ephemerals("x"));
    assert_bad_args(zk.get_ephemerals("/a\0"));
    assert_bad_args(zk.add_auth("", b""));
    // Bad connect strings and chroots.
    for cs in [
        "",
        "127.0.0.1:0",
        "127.0.0.1:2181/a/",
        "127.0.0.1:2181/a//b",
        "h:x",
    ] {
        assert_bad_args(ZooKeeper::connect(cs, SESSION, |_e: WatchedEvent| {}));
    }
    assert_bad_args(ZooKeeper::connect(
        &test_servers(),
        Duration::ZERO,
        |_e: WatchedEvent| {},
    ));
    // Nothing was sent: still connected, nothing registered, no write happened.
    assert_eq!(zk.state(), State::Connected);
    assert_eq!(zk.watch_count(), 0);
    assert_eq!(zk.last_zxid_seen(), zxid);
    assert!(zk.get_children(&root, false).unwrap().is_empty());
    teardown(&zk, &root);
}

// ---------------------------------------------------------------------------
// Watcher isolation
// ---------------------------------------------------------------------------

#[test]
fn a_panicking_watcher_is_caught_and_the_client_keeps_working() {
    let (zk, events, root) = setup("panic");
    let p = format!("{root}/p");
    zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
    let panics = Arc::new(AtomicUsize::new(0));
    let n = panics.clone();
    zk.get_data_w(&p, move |_e: WatchedEvent| {
        n.fetch_add(1, Ordering::SeqCst);
        panic!("watcher panics on purpose (expected in this test)");
    })
    .unwrap();
    zk.add_watch_w(&p, AddWatchMode::Persistent, |_e: WatchedEvent| {
        std::panic::panic_any(42u32) // a non-string payload
    })
    .unwrap();
    let after = Events::new();
    zk.get_data_w(&p, after.watcher()).unwrap();
    zk.set_data(&p, b"x", None).unwrap();
    after.wait_node(EventType::NodeDataChanged, &p, 1, WAIT);
    assert_eq!(panics.load(Ordering::SeqCst), 1);
    // The event thread lives on: later events are delivered, calls work.
    zk.exists(&p, true).unwrap();
    zk.set_data(&p, b"y", None).unwrap();
    events.wait_node(EventType::NodeDataChanged, &p, 1, WAIT);
    assert_eq!(zk.state(), State::Connected);
    teardown(&zk, &root);
    assert_eq!(
        events.states(),
        [KeeperState::SyncConnected, KeeperState::Closed]
    );
}

#[test]
fn a_watcher_that_calls_the_client_does_not_deadlock() {
    let (zk, _events, root) = setup("reentrant");
    let p = format!("{root}/p");
    zk.create(&p, b"0", open(), CreateMode::Persistent).unwrap();

    // A watcher that reads the node and re-arms itself, from the event thread.
    struct Rearm {
        zk: Mutex<Option<ZooKeeper>>,
        seen: Mutex<Vec<Vec<u8>>>,
        me: Mutex<Option<Arc<dyn Watcher>>>,
    }
    impl Watcher for Rearm {
        fn process(&self, e: WatchedEvent) {
            let zk = self.zk.lock().unwrap().clone();
            let me = self.me.lock().unwrap().clone();
            if let (Some(zk), Some(me), Some(path)) = (zk, me, e.path) {
                if let Ok((data, _)) = zk.get_data_watch(&path, me) {
                    // Other calls from the event thread too.
                    zk.exists(&path, false).unwrap();
                    zk.get_children(&path, false).unwrap();
                    self.seen.lock().unwrap().push(data);
                }
            }
        }
    }
    let rearm = Arc::new(Rearm {
        zk: Mutex::new(Some(zk.clone())),
        seen: Mutex::new(Vec::new()),
        me: Mutex::new(None),
    });
    let as_watcher: Arc<dyn Watcher> = rearm.clone();
    *rearm.me.lock().unwrap() = Some(as_watcher.clone());
    zk.get_data_watch(&p, as_watcher).unwrap();
    for i in 1..=10u8 {
        zk.set_data(&p, &[b'0' + i], None).unwrap();
        wait_until(WAIT, "watcher re-armed and read", || {
            rearm.seen.lock().unwrap().len() == i as usize
        });
    }
    assert_eq!(rearm.seen.lock().unwrap().last().unwrap(), &[b'0' + 10]);
    // Break the cycle (watcher → handle), then close.
    rearm.zk.lock().unwrap().take();
    rearm.me.lock().unwrap().take();

    // close() from inside a watcher: returns, the handle ends.
    let (zk2, events2) = connect(&test_servers(), SESSION);
    let handle = Mutex::new(Some(zk2.clone()));
    let closed = Arc::new(AtomicUsize::new(0));
    let c = closed.clone();
    zk2.exists_w(&p, move |_e: WatchedEvent| {
        if let Some(zk) = handle.lock().unwrap().take() {
            zk.close().unwrap();
            c.fetch_add(1, Ordering::SeqCst);
        }
    })
    .unwrap();
    zk.set_data(&p, b"close", None).unwrap();
    wait_until(WAIT, "close from a watcher returned", || {
        closed.load(Ordering::SeqCst) == 1
    });
    events2.wait_state(KeeperState::Closed, 1, WAIT);
    assert_eq!(zk2.state(), State::Closed);
    assert!(matches!(zk2.exists("/", false), Err(Error::Closed)));
    drop(zk2);
    teardown(&zk, &root);
}

// ---------------------------------------------------------------------------
// Session, connection events, close
// ---------------------------------------------------------------------------

#[test]
fn session_accessors_and_negotiated_timeout() {
    let (zk, events) = connect(&test_servers(), Duration::from_secs(7));
    assert_ne!(zk.session_id(), 0);
    assert_eq!(zk.session_password().len(), 16);
    assert_eq!(zk.session_timeout(), Duration::from_secs(7));
    assert_eq!(zk.state(), State::Connected);
    assert_eq!(zk.chroot(), None);
    events.wait_state(KeeperState::SyncConnected, 1, WAIT);
    assert_eq!(events.states(), [KeeperState::SyncConnected]);
    assert!(format!("{zk:?}").contains("Connected"));
    let lo = ZooKeeper::builder(&test_servers())
        .with_session_timeout(Duration::from_millis(50))
        .with_connect_wait(WAIT)
        .connect(|_e: WatchedEvent| {})
        .unwrap();
    assert_eq!(lo.session_timeout(), zklock::testing::MIN_SESSION_TIMEOUT);
    lo.close().unwrap();
    let (hi, _) = connect(&test_servers(), Duration::from_secs(3600));
    assert_eq!(hi.session_timeout(), zklock::testing::MAX_SESSION_TIMEOUT);
    hi.close().unwrap();
    // Resuming a session that does not exist: SessionExpired, at once.
    let t = Instant::now();
    let r = ZooKeeper::connect_with_session(
        &test_servers(),
        SESSION,
        |_e: WatchedEvent| {},
        0x7777_0000_0001,
        &[1; 16],
    );
    assert_code(r, ZkError::SessionExpired);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    zk.close().unwrap();
}

/// A session timeout the server raised (a request below its
/// `minSessionTimeout`) sets the default request timeout and connect wait
/// from the granted timeout, not the requested one: with the requested 1 ms,
/// every reply slower than 2 ms was an `OperationTimeout` (the `zklock` CLI's
/// `--session-timeout 1ms` failed so on 3.9 under load).
#[test]
fn a_raised_session_timeout_sets_the_default_request_timeout_and_connect_wait() {
    let proxy = zklock::testing::FaultProxy::start(test_servers()).unwrap();
    let zk = ZooKeeper::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_millis(1))
        .with_handshake_timeout(WAIT)
        .with_connect_wait(WAIT)
        .connect(|_e: WatchedEvent| {})
        .unwrap();
    let granted = zk.session_timeout();
    assert_eq!(granted, zklock::testing::MIN_SESSION_TIMEOUT);
    // Every reply now comes 50 ms late: well inside the granted timeout, far
    // beyond the requested 1 ms, which would fail it with OperationTimeout. A
    // 400 ms session can lose its connection on a loaded machine (the server
    // not heard for 267 ms): that is ConnectionLoss, and the call is made
    // again (or the session may end); only a timeout of the request itself
    // fails the test.
    proxy.delay(Duration::from_millis(50));
    let t = Instant::now();
    loop {
        match zk.exists("/", false) {
            Ok(_) => break,
            Err(e) if e.is(ZkError::ConnectionLoss) && t.elapsed() < WAIT => {}
            // Or the session ended with it (not heard for 400 ms): what the
            // rest checks is the handle's settings.
            Err(e) if e.is(ZkError::SessionExpired) => break,
            Err(e) => panic!("exists with replies 50 ms late: {e}"),
        }
    }
    proxy.pass();
    assert_eq!(zk.request_timeout(), granted * 2);
    assert_eq!(zk.connect_wait(), WAIT, "set by the builder");
    zk.close().unwrap();
    let defaults = ZooKeeper::builder(&test_servers())
        .with_session_timeout(Duration::from_millis(1))
        .start(|_e: WatchedEvent| {})
        .unwrap();
    wait_until(WAIT, "connected", || defaults.state() == State::Connected);
    assert_eq!(defaults.connect_wait(), defaults.session_timeout());
    assert_eq!(defaults.request_timeout(), defaults.session_timeout() * 2);
    defaults.close().unwrap();
}

#[test]
fn close_is_idempotent_ends_the_session_at_once_and_tells_closed_once() {
    let (zk, events, root) = setup("close");
    let (other, _) = connect(&test_servers(), SESSION);
    let e1 = zk
        .create(&format!("{root}/e1"), b"", open(), CreateMode::Ephemeral)
        .unwrap();
    let e2 = zk
        .create(
            &format!("{root}/e-"),
            b"",
            open(),
            CreateMode::EphemeralSequential,
        )
        .unwrap();
    let clone = zk.clone();
    let t = Instant::now();
    zk.close().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "close took {:?}",
        t.elapsed()
    );
    // Gone at once, seen from another session (no waiting for expiry).
    assert!(other.exists(&e1, false).unwrap().is_none());
    assert!(other.exists(&e2, false).unwrap().is_none());
    zk.close().unwrap();
    clone.close().unwrap();
    assert_eq!(zk.state(), State::Closed);
    assert!(matches!(zk.exists("/", false), Err(Error::Closed)));
    assert!(matches!(
        clone.create(&format!("{root}/x"), b"", open(), CreateMode::Persistent),
        Err(Error::Closed)
    ));
    assert!(matches!(
        zk.wait_connected(Duration::from_secs(1)),
        Err(Error::Closed)
    ));
    settle_closed();
    assert_eq!(
        events.states(),
        [KeeperState::SyncConnected, KeeperState::Closed]
    );

    // Dropping the last handle closes the session too.
    let (zk3, ev3) = connect(&test_servers(), SESSION);
    let e3 = zk3
        .create(&format!("{root}/e3"), b"", open(), CreateMode::Ephemeral)
        .unwrap();
    let id3 = zk3.session_id();
    let clone3 = zk3.clone();
    drop(zk3);
    assert!(
        other.exists(&e3, false).unwrap().is_some(),
        "a clone keeps the session"
    );
    drop(clone3);
    // The drop closes in the background (it never waits on the network).
    wait_until(WAIT, "the dropped session to close", || {
        other.exists(&e3, false).unwrap().is_none()
    });
    ev3.wait_state(KeeperState::Closed, 1, WAIT);
    assert_eq!(
        ev3.states(),
        [KeeperState::SyncConnected, KeeperState::Closed]
    );
    let addr = shared_server().connect_string();
    if test_servers() == addr {
        assert!(!dump_has_session(&addr, id3));
    }
    rmr(&other, &root);
    other.close().unwrap();
}

#[test]
fn huge_timeouts_are_not_a_panic() {
    init_log();
    let zk = ZooKeeper::builder(&test_servers())
        .with_session_timeout(SESSION)
        .with_connect_wait(Duration::MAX)
        .with_request_timeout(Duration::MAX)
        .connect(|_e: WatchedEvent| {})
        .unwrap();
    assert!(zk.exists("/", false).unwrap().is_some());
    zk.add_auth("digest", b"u:p").unwrap();
    zk.wait_connected(Duration::MAX).unwrap();
    zk.close().unwrap();
    assert!(matches!(zk.exists("/", false), Err(Error::Closed)));
}

#[test]
fn start_returns_at_once_and_calls_wait_for_the_connection() {
    init_log();
    let events = Events::new();
    let zk = ZooKeeper::builder(&test_servers())
        .with_session_timeout(SESSION)
        .start(events.watcher())
        .unwrap();
    // The first call waits for the handshake.
    assert!(zk.exists("/", false).unwrap().is_some());
    assert_eq!(zk.state(), State::Connected);
    zk.wait_connected(Duration::from_secs(1)).unwrap();
    events.wait_state(KeeperState::SyncConnected, 1, WAIT);
    zk.close().unwrap();
}

#[test]
fn threads_sharing_one_client_each_get_their_own_replies() {
    let (zk, _events, root) = setup("pipeline");
    let threads = 32;
    let per = 40;
    let mut handles = Vec::new();
    for t in 0..threads {
        let zk = zk.clone();
        let dir = format!("{root}/t{t}");
        handles.push(thread::spawn(move || {
            zk.create(&dir, b"", open(), CreateMode::Persistent)
                .unwrap();
            for i in 0..per {
                let p = format!("{dir}/n{i}");
                let data = format!("{t}:{i}");
                assert_eq!(
                    zk.create(&p, data.as_bytes(), open(), CreateMode::Persistent)
                        .unwrap(),
                    p
                );
                assert_eq!(zk.get_data(&p, false).unwrap().0, data.as_bytes());
                let st = zk
                    .set_data(&p, format!("{data}!").as_bytes(), Some(0))
                    .unwrap();
                assert_eq!(st.version, 1);
                assert_eq!(
                    zk.exists(&p, false).unwrap().unwrap().data_length,
                    data.len() as i32 + 1
                );
                assert_eq!(zk.get_children(&dir, false).unwrap().len(), 1);
                zk.delete(&p, Some(1)).unwrap();
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    teardown(&zk, &root);
}

/// Callers read their own replies (the connection thread steps aside on a
/// session without watches) and hand the reader on: a caller that finds
/// another reading sleeps until its reply is handed to it or the reader is let
/// go, and the caller letting it go wakes the next one still waiting. Here A
/// reads for its quick `exists` while B's write (sent just after, answered
/// later) waits: A leaves before B's reply comes. Were the wake-up missing, B
/// would sleep until the connection thread's tick (100 ms for this session).
#[test]
fn callers_reading_their_own_replies_hand_the_reader_on() {
    let (zk, _events, root) = setup("hand-on");
    let rounds = 20;
    let start = Arc::new(std::sync::Barrier::new(2));
    let a = {
        let (zk, root, start) = (zk.clone(), root.clone(), start.clone());
        thread::spawn(move || {
            for _ in 0..rounds {
                start.wait();
                assert!(zk.exists(&root, false).unwrap().is_some());
                start.wait();
            }
        })
    };
    let mut took = Vec::new();
    for i in 0..rounds {
        start.wait();
        // Sent after A's request, so answered after it (one session's
        // requests are answered in order), and a write: answered later.
        thread::sleep(Duration::from_micros(100));
        let t = Instant::now();
        let p = format!("{root}/n{i}");
        zk.create(&p, b"", open(), CreateMode::Persistent).unwrap();
        took.push(t.elapsed());
        start.wait();
    }
    a.join().unwrap();
    took.sort();
    let median = took[took.len() / 2];
    assert!(
        median < Duration::from_millis(25),
        "median create {median:?}: {took:?}"
    );
    assert_eq!(zk.watch_count(), 0, "the session had no watch");
    teardown(&zk, &root);
}

/// A watch set by a reply that a caller read (the connection thread was
/// stepping aside) makes the connection thread read from then on at once: the
/// notification is delivered as it comes, not at the connection thread's next
/// tick (100 ms for this session).
#[test]
fn a_watch_set_by_a_callers_read_is_listened_for_at_once() {
    let (zk, _events, root) = setup("listen-at-once");
    let (other, _other_events) = connect(&test_servers(), SESSION);
    let mut delays = Vec::new();
    for i in 0..15 {
        let p = format!("{root}/n{i}");
        let (tx, rx) = std::sync::mpsc::channel();
        // Calls first, so that the connection thread is stepping aside.
        for _ in 0..3 {
            zk.exists(&root, false).unwrap();
        }
        assert!(zk
            .exists_w(&p, move |e: WatchedEvent| {
                let _ = tx.send((Instant::now(), e.event_type));
            })
            .unwrap()
            .is_none());
        other
            .create(&p, b"", open(), CreateMode::Persistent)
            .unwrap();
        let created = Instant::now();
        let (at, kind) = rx.recv_timeout(WAIT).expect("the notification");
        assert_eq!(kind, EventType::NodeCreated);
        delays.push(at.saturating_duration_since(created));
    }
    delays.sort();
    let median = delays[delays.len() / 2];
    assert!(
        median < Duration::from_millis(25),
        "median notification delay {median:?}: {delays:?}"
    );
    other.close().unwrap();
    teardown(&zk, &root);
}

/// `create_async` answers on the event thread with the client path and the
/// node's `Stat`; a request sent after it is answered after it and sees the node
/// (the lock's one-round-trip acquire rests on that order); under a chroot the
/// path is the client's; errors come to the callback.
#[test]
fn create_async_is_ordered_before_later_requests_and_answers_client_paths() {
    let (plain, _pe) = connect(&test_servers(), SESSION);
    let base = unique_root("create-async");
    mkdirs(&plain, &base);
    let (zk, _events) = connect(&format!("{}{base}", test_servers()), SESSION);
    let (tx, rx) = crossbeam_channel::unbounded();
    for i in 0..20 {
        let t = tx.clone();
        zk.create_async(
            "/seq-",
            &[i],
            open(),
            CreateMode::EphemeralSequential,
            move |r| {
                let on = thread::current().name().map(str::to_owned);
                t.send((r, on)).unwrap();
            },
        );
        // Sent after the create, without waiting for its answer: sees the node.
        let listed = zk.get_children("/", false).unwrap();
        let (created, on) = rx.recv_timeout(WAIT).unwrap();
        let (path, stat) = created.unwrap();
        assert_eq!(on.as_deref(), Some("zklock-event"));
        assert!(path.starts_with("/seq-") && path.len() == 15, "{path}");
        assert_eq!(stat.data_length, 1);
        assert_eq!(stat.ephemeral_owner, zk.session_id());
        assert!(
            listed.contains(&path[1..].to_string()),
            "{listed:?} lacks {path}"
        );
        assert_eq!(
            plain.get_data(&format!("{base}{path}"), false).unwrap().0,
            vec![i]
        );
        zk.delete(&path, None).unwrap();
    }
    let t = tx.clone();
    zk.create_async(
        "/no/parent",
        b"",
        open(),
        CreateMode::Persistent,
        move |r| t.send((r, None)).unwrap(),
    );
    let (r, _) = rx.recv_timeout(WAIT).unwrap();
    assert!(
        r.as_ref().err().and_then(|e| e.code()) == Some(ZkError::NoNode),
        "{r:?}"
    );
    let t = tx.clone();
    zk.create_async("bad path", b"", open(), CreateMode::Persistent, move |r| {
        t.send((r, None)).unwrap()
    });
    assert!(matches!(
        rx.recv_timeout(WAIT).unwrap().0,
        Err(Error::BadArguments(_))
    ));
    zk.close().unwrap();
    let t = tx.clone();
    zk.create_async("/after", b"", open(), CreateMode::Persistent, move |r| {
        t.send((r, None)).unwrap()
    });
    assert!(matches!(
        rx.recv_timeout(WAIT).unwrap().0,
        Err(Error::Closed)
    ));
    teardown(&plain, &base);
}

#[test]
fn async_calls_answer_on_the_event_thread_and_fail_fast_when_closed() {
    let (zk, _events, root) = setup("async");
    let node = format!("{root}/a");
    zk.create(&node, b"", open(), CreateMode::Persistent)
        .unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    let t = tx.clone();
    zk.get_children_async(&root, None, move |r| {
        let on = thread::current().name().map(str::to_owned);
        t.send((format!("{r:?}"), on)).unwrap();
    });
    let (r, on) = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(r, r#"Ok(["a"])"#);
    assert_eq!(on.as_deref(), Some("zklock-event"));
    let t = tx.clone();
    zk.delete_async(&node, None, move |r| {
        t.send((format!("{r:?}"), None)).unwrap()
    });
    assert_eq!(rx.recv_timeout(WAIT).unwrap().0, "Ok(())");
    assert!(zk.exists(&node, false).unwrap().is_none());
    let t = tx.clone();
    zk.delete_async(&node, None, move |r| {
        t.send((format!("{:?}", r.err().and_then(|e| e.code())), None))
            .unwrap()
    });
    assert_eq!(rx.recv_timeout(WAIT).unwrap().0, "Some(NoNode)");
    let t = tx.clone();
    zk.delete_async("bad path", None, move |r| {
        t.send((
            format!("{}", matches!(r, Err(Error::BadArguments(_)))),
            None,
        ))
        .unwrap()
    });
    assert_eq!(rx.recv_timeout(WAIT).unwrap().0, "true");
    teardown(&zk, &root);
    zk.close().unwrap();
    // After close: answered at once (on the caller's thread: there is no event
    // thread any more), never lost.
    let t = tx.clone();
    zk.get_children_async("/", None, move |r| {
        t.send((format!("{}", matches!(r, Err(Error::Closed))), None))
            .unwrap()
    });
    assert_eq!(rx.recv_timeout(WAIT).unwrap().0, "true");
}
