//! Ensembles that change (issue 46): `getConfig` and `reconfig` against a
//! real reconfigurable ensemble (`reconfigEnabled=true`,
//! `standaloneEnabled=false`, a dynamic configuration file), the typed
//! error from servers that cannot, and server-list updates.
//!
//! The ensemble tests start their own three JVMs (and a fourth): about
//! 15–25 s each on a loaded two-core machine. Run on another server version
//! with `ZK_TEST_VERSION=3.6|3.9`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::client::*;
use common::{lock_recorder, member_of, WAIT};
use zklock::client::{
    Acl, ClientConfig, CreateMode, EventType, Reconfig, ReplyKind, ServerOrder, ServerRole,
    ZooKeeper,
};
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, LockEvent, ZkInterProcessReadWriteLock,
};
use zklock::recipes::leader_latch::{LatchEvent, LeaderLatch};
use zklock::testing::{shared_server, ZkEnsemble, SUPER_AUTH};
use zklock::{EnsembleTracker, Error, RetryConfig, ZkError, ZooKeeperWatcher};

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
/// non-incremental `reconfig` names the whole membership; the member that
/// left comes back under its own id.
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

    // The removed member comes back under its own id, with its data and
    // ports (the harness's rejoin_removed), and serves what was written
    // while it was away.
    admin
        .create(
            "/while-away",
            b"x",
            zklock::client::Acl::open_unsafe(),
            zklock::client::CreateMode::Persistent,
        )
        .unwrap();
    ensemble
        .rejoin_removed(0)
        .expect("the removed member starts again");
    let back = reconfig_surely(
        &admin,
        &Reconfig::incremental(&[ensemble.server_spec(0)], &[]),
        whole.version(),
    );
    assert_eq!(back.servers().len(), 4, "{back}");
    assert_eq!(
        back.server(leaving).unwrap().to_spec(),
        ensemble.server_spec(0)
    );
    ensemble.wait_for_quorum(Duration::from_secs(60)).unwrap();
    let (on_it, _ev) = connect(&ensemble.address(0), SESSION);
    on_it.sync("/").unwrap();
    assert_eq!(on_it.get_data("/while-away", false).unwrap().0, b"x");
    // Only a removed member rejoins.
    let e = ensemble.rejoin_removed(1).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    on_it.close().unwrap();
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

/// Waits until `zk` is connected to one of `servers`, reading it from the
/// client and checking it in that server's `cons` (the server's word).
fn settled_on(zk: &ZooKeeper, servers: &[String]) -> String {
    let mut on = None;
    zklock::testing::wait_until(
        Duration::from_secs(30),
        "the client is connected to a listed server that lists its session",
        || {
            on = zk
                .current_server()
                .filter(|s| servers.contains(s))
                .filter(|s| cons_sessions(s).contains(&zk.session_id()));
            on.is_some()
        },
    );
    on.unwrap()
}

/// `update_server_list` after the ensemble grew by `reconfig` moves the
/// expected fraction of the clients (1 − 3/4) to the new server, and after
/// a member left moves exactly its clients, to the members that stay; every
/// session, with its ephemeral node, survives both.
#[test]
fn update_server_list_rebalances_clients_and_keeps_their_sessions() {
    init_log();
    let mut ensemble = ZkEnsemble::start_reconfigurable().expect("ensemble");
    let admin = ZooKeeper::connect(&ensemble.connect_string(), SESSION, |_e| {}).unwrap();
    admin.add_auth("digest", SUPER_AUTH).unwrap();
    admin
        .create("/clients", b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    const N: usize = 40;
    let clients: Vec<(ZooKeeper, i64, String)> = (0..N)
        .map(|c| {
            let zk = ZooKeeper::connect(&ensemble.connect_string(), SESSION, |_e| {}).unwrap();
            let node = zk
                .create(
                    &format!("/clients/c{c}"),
                    b"",
                    Acl::open_unsafe(),
                    CreateMode::Ephemeral,
                )
                .unwrap();
            let id = zk.session_id();
            (zk, id, node)
        })
        .collect();
    let sessions_kept = |clients: &[(ZooKeeper, i64, String)]| {
        for (zk, id, node) in clients {
            assert_eq!(zk.session_id(), *id);
            let stat = zk
                .exists(node, false)
                .unwrap()
                .expect("the ephemeral node stays");
            assert_eq!(stat.ephemeral_owner, *id);
        }
    };

    // Grow: 3 → 4.
    let (config, _) = admin.get_config(false).unwrap();
    let added = ensemble.add_member().unwrap();
    let four = reconfig_surely(
        &admin,
        &Reconfig::incremental(&[ensemble.server_spec(added)], &[]),
        config.version(),
    );
    let four_list: Vec<String> = four.connect_string().split(',').map(String::from).collect();
    let before: Vec<String> = clients
        .iter()
        .map(|(zk, ..)| settled_on(zk, &four_list))
        .collect();
    let moved = clients
        .iter()
        .filter(|(zk, ..)| zk.update_server_list(&four.connect_string()).unwrap())
        .count();
    let after: Vec<String> = clients
        .iter()
        .map(|(zk, ..)| settled_on(zk, &four_list))
        .collect();
    let on_new = after
        .iter()
        .filter(|s| **s == ensemble.address(added))
        .count();
    // Binomial(40, 1/4): mean 10, sd 2.7; [2, 20] is beyond 3.5 sd.
    assert!(
        (2..=20).contains(&moved),
        "{moved} of {N} clients moved; expected about {}",
        N / 4
    );
    assert_eq!(
        on_new, moved,
        "every client that moved went to the new server"
    );
    let stayed = before.iter().zip(&after).filter(|(b, a)| b == a).count();
    assert_eq!(stayed, N - moved, "the others kept their server");
    sessions_kept(&clients);

    // Shrink: member 0 leaves; its clients (only they) move to the others.
    let leaving = ensemble.address(0);
    let three = reconfig_surely(
        &admin,
        &Reconfig::incremental::<&str>(&[], &[ensemble.server_id(0)]),
        four.version(),
    );
    let three_list: Vec<String> = three
        .connect_string()
        .split(',')
        .map(String::from)
        .collect();
    assert!(!three_list.contains(&leaving));
    let on_leaving = after.iter().filter(|s| **s == leaving).count();
    let moved = clients
        .iter()
        .filter(|(zk, ..)| zk.update_server_list(&three.connect_string()).unwrap())
        .count();
    assert_eq!(
        moved, on_leaving,
        "exactly the leaving member's clients move"
    );
    for (zk, ..) in &clients {
        settled_on(zk, &three_list);
    }
    ensemble.stop_removed(0).unwrap();
    for (zk, ..) in &clients {
        settled_on(zk, &three_list);
    }
    sessions_kept(&clients);
    for (zk, ..) in clients {
        zk.close().unwrap();
    }
    admin.close().unwrap();
}

/// `ServerOrder::Listed` tries the servers in the listed order: a dead
/// first server is passed over for the second, and the list's order is
/// kept (not shuffled).
#[test]
fn listed_server_order_falls_back_in_order() {
    let live = shared_server().connect_string();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let cs = format!("{dead},{live}");
    for _ in 0..5 {
        let zk = ZooKeeper::builder(&cs)
            .with_session_timeout(SESSION)
            .with_server_order(ServerOrder::Listed)
            .connect(|_e| {})
            .unwrap();
        assert_eq!(zk.server_list(), [dead.clone(), live.clone()]);
        assert_eq!(zk.current_server().as_deref(), Some(live.as_str()));
        // An update with another chroot is refused; the list stays.
        let e = zk
            .update_server_list(&format!("{live}/elsewhere"))
            .unwrap_err();
        assert!(matches!(e, Error::BadArguments(_)), "{e:?}");
        // An update that keeps the current server moves nobody.
        assert!(!zk.update_server_list(&format!("{live},{dead}")).unwrap());
        assert_eq!(zk.server_list(), [live.clone(), dead.clone()]);
        zk.close().unwrap();
    }
}

/// A client of the "done when" test: a watcher that follows the ensemble.
fn tracked(ensemble: &ZkEnsemble) -> (ZooKeeperWatcher, EnsembleTracker) {
    let zkw = ZooKeeperWatcher::builder(&ensemble.connect_string())
        .with_session_timeout(SESSION)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(50)))
        .connect()
        .expect("connect");
    let tracker = zkw.track_ensemble();
    (zkw, tracker)
}

/// A client that follows the ensemble for its whole life (the builder's
/// opt-in).
fn tracking(ensemble: &ZkEnsemble) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(&ensemble.connect_string())
        .with_session_timeout(SESSION)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(50)))
        .with_ensemble_tracking(true)
        .connect()
        .expect("connect")
}

/// Issue 46's "done when": while a write lock is held, 4 waiters wait and a
/// leader latch leads (another latch contending), a member is added and
/// one removed by `reconfig` (the removed one is the lock holder's server,
/// then stopped). Every client follows the configuration with an
/// `EnsembleTracker` (the waiters' kept by their watcher, the builder's
/// `with_ensemble_tracking`). No holder or leader is lost (a move is `InDoubt`,
/// then `Restored`, never `Lost`), nothing overlaps, the waiters are granted
/// in order, and every client ends on a member of the new configuration,
/// with the session it had.
#[test]
fn locks_and_leadership_hold_through_reconfig_and_clients_follow_the_ensemble() {
    init_log();
    let mut ensemble = ZkEnsemble::start_reconfigurable().expect("ensemble");
    let admin = ZooKeeper::connect(&ensemble.connect_string(), SESSION, |_e| {}).unwrap();
    admin.add_auth("digest", SUPER_AUTH).unwrap();
    let root = "/locks/reconfig";
    let latch_path = "/latch/reconfig";

    let (holder_zkw, holder_tracker) = tracked(&ensemble);
    let (holder_events, record) = lock_recorder();
    let holder = ZkInterProcessReadWriteLock::new(&holder_zkw, root, None)
        .unwrap()
        .with_lock_listener(record)
        .write_lock(b"holder");
    holder.acquire().unwrap();
    let inside = Arc::new(AtomicUsize::new(1)); // the holder
    let overlaps = Arc::new(AtomicUsize::new(0));
    let granted = Arc::new(Mutex::new(Vec::new()));

    // Four waiters, queued one after another (their order is their node's).
    let mut clients = Vec::new();
    let mut waiters = Vec::new();
    for w in 0..4 {
        let zkw = tracking(&ensemble);
        let lock = ZkInterProcessReadWriteLock::new(&zkw, root, None)
            .unwrap()
            .write_lock(format!("waiter-{w}").as_bytes());
        let (inside, overlaps, granted) = (inside.clone(), overlaps.clone(), granted.clone());
        waiters.push(thread::spawn(move || {
            assert!(
                lock.try_acquire(Duration::from_secs(120)).unwrap(),
                "waiter {w} granted"
            );
            if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            granted.lock().unwrap().push(w);
            thread::sleep(Duration::from_millis(20));
            inside.fetch_sub(1, Ordering::SeqCst);
            lock.release().unwrap();
        }));
        zklock::testing::wait_until(WAIT, "the waiter queued", || {
            admin.get_children(root, false).map_or(0, |c| c.len()) == w + 2
        });
        clients.push(zkw);
    }

    // A leader latch leads; another contends.
    let (leader_zkw, leader_tracker) = tracked(&ensemble);
    let leader = LeaderLatch::new(&leader_zkw, latch_path, "leader").unwrap();
    let leader_events = Arc::new(Mutex::new(Vec::new()));
    let e = leader_events.clone();
    leader.add_listener(move |ev: LatchEvent| e.lock().unwrap().push(ev));
    leader.start().unwrap();
    assert!(leader.await_leadership(WAIT).unwrap());
    let (other_zkw, other_tracker) = tracked(&ensemble);
    let other = LeaderLatch::new(&other_zkw, latch_path, "other").unwrap();
    let other_led = Arc::new(AtomicUsize::new(0));
    let o = other_led.clone();
    other.add_listener(move |ev: LatchEvent| {
        if ev == LatchEvent::IsLeader {
            o.fetch_add(1, Ordering::SeqCst);
        }
    });
    other.start().unwrap();

    let everyone: Vec<&ZooKeeperWatcher> = [&holder_zkw, &leader_zkw, &other_zkw]
        .into_iter()
        .chain(&clients)
        .collect();
    let sessions: Vec<i64> = everyone
        .iter()
        .map(|z| z.zookeeper().session_id())
        .collect();
    for t in [&holder_tracker, &leader_tracker, &other_tracker] {
        zklock::testing::wait_until(WAIT, "the tracker read the configuration", || {
            t.config().is_some()
        });
    }
    for z in &clients {
        zklock::testing::wait_until(WAIT, "the watcher's tracker read the configuration", || {
            z.ensemble_config().is_some()
        });
    }

    // Add a member: every tracker gives it to its client.
    let (config, _) = admin.get_config(false).unwrap();
    let added = ensemble.add_member().unwrap();
    let four = reconfig_surely(
        &admin,
        &Reconfig::incremental(&[ensemble.server_spec(added)], &[]),
        config.version(),
    );
    let new_member = ensemble.address(added);
    for z in &everyone {
        zklock::testing::wait_until(WAIT, "the client's list has the new member", || {
            z.zookeeper().server_list().contains(&new_member)
        });
    }

    let four_list: Vec<String> = four.connect_string().split(',').map(String::from).collect();
    for z in &everyone {
        settled_on(z.zookeeper(), &four_list);
    }

    // Remove the member the holder is on, then stop it.
    let gone = member_of(&ensemble, holder_zkw.zookeeper().session_id());
    let three = reconfig_surely(
        &admin,
        &Reconfig::incremental::<&str>(&[], &[ensemble.server_id(gone)]),
        four.version(),
    );
    let three_list: Vec<String> = three
        .connect_string()
        .split(',')
        .map(String::from)
        .collect();
    assert!(!three_list.contains(&ensemble.address(gone)));
    for z in &everyone {
        zklock::testing::wait_until(WAIT, "the client's list is the new configuration", || {
            let mut list = z.zookeeper().server_list();
            list.sort();
            let mut want = three_list.clone();
            want.sort();
            list == want
        });
    }
    ensemble.stop_removed(gone).unwrap();
    for (z, id) in everyone.iter().zip(&sessions) {
        let on = settled_on(z.zookeeper(), &three_list);
        assert_ne!(on, ensemble.address(gone));
        assert_eq!(z.zookeeper().session_id(), *id, "the session is the same");
    }

    // The holder and the leader kept their places.
    assert!(holder.is_held(), "the holder still holds its lock");
    // It did move: its server left (in doubt while it moved, then sure).
    assert!(
        holder_events.lock().unwrap().contains(&LockEvent::InDoubt),
        "{:?}",
        holder_events.lock().unwrap()
    );
    assert!(
        !holder_events.lock().unwrap().contains(&LockEvent::Lost),
        "{:?}",
        holder_events.lock().unwrap()
    );
    assert!(
        leader.await_leadership(WAIT).unwrap(),
        "the leader leads again"
    );
    assert!(
        !leader_events
            .lock()
            .unwrap()
            .contains(&LatchEvent::LeadershipLost),
        "{:?}",
        leader_events.lock().unwrap()
    );
    assert_eq!(other_led.load(Ordering::SeqCst), 0, "two leaders");

    // The waiters, in order, one at a time.
    inside.fetch_sub(1, Ordering::SeqCst);
    holder.release().unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*granted.lock().unwrap(), [0, 1, 2, 3]);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    // The contender first: once the leader closes, it would lead.
    other.close().unwrap();
    assert_eq!(other_led.load(Ordering::SeqCst), 0, "two leaders");
    leader.close().unwrap();
    drop((holder_tracker, leader_tracker, other_tracker));
    for zkw in clients {
        zkw.close().unwrap();
    }
    for z in [holder_zkw, leader_zkw, other_zkw] {
        z.close().unwrap();
    }
    admin.close().unwrap();
}
