//! `zklock::recipes::persistent_node` against a real ZooKeeper server: the
//! node is created, re-created after a delete and after a forced session
//! expiry (with renewal), never twice, a foreign change is reported, and it
//! is removed on close and on drop; a sequential node is protected (a lost
//! create is adopted by its uuid, never made twice); TTL nodes go after their
//! TTL unless touched (`PersistentTtlNode`).

mod common;

use common::{force_expiry, init_log};
use std::time::{Duration, Instant};

use zklock::client::CreateMode;
use zklock::client::{ReplyKind, WatchedEvent, ZooKeeper};
use zklock::recipes::persistent_node::{PersistentNode, PersistentNodeEvent, PersistentTtlNode};
use zklock::testing::{eventually, shared_server, unique_root, FaultProxy};
use zklock::{RetryConfig, ZooKeeperWatcher};

const LONG: Duration = Duration::from_secs(60);
const SESSION: Duration = Duration::from_secs(6);

fn connect(servers: &str, renew: bool) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(servers)
        .with_identifier("pnode-test")
        .with_session_timeout(SESSION)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .with_session_renewal(renew)
        .connect()
        .unwrap()
}

fn created(rx: &std::sync::mpsc::Receiver<PersistentNodeEvent>) -> Stat {
    loop {
        if let PersistentNodeEvent::Created(stat) = rx.recv_timeout(LONG).unwrap() {
            return stat;
        }
    }
}

use zklock::client::Stat;

#[test]
fn the_node_is_kept_reports_foreign_changes_and_goes_on_close() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers, false);
    let path = format!("{}/svc", unique_root("pnode"));
    let node = PersistentNode::start(&zkw, &path, CreateMode::Ephemeral, b"me").unwrap();
    let events = node.events();
    assert!(node.wait_created(LONG));
    let other = connect(&servers, false);
    let (data, stat) = other.zookeeper().get_data(&path, false).unwrap();
    assert_eq!(data, b"me");
    assert_eq!(stat.ephemeral_owner, zkw.zookeeper().session_id());

    node.set_data(b"mine").unwrap();
    other.zookeeper().set_data(&path, b"theirs", None).unwrap();
    loop {
        match events.recv_timeout(LONG).unwrap() {
            PersistentNodeEvent::ChangedByOther(d, _) => {
                assert_eq!(d, b"theirs", "my own write is not reported");
                break;
            }
            PersistentNodeEvent::Created(_) => {}
            e => panic!("{e:?}"),
        }
    }
    other.zookeeper().delete(&path, None).unwrap();
    let again = created(&events);
    assert_eq!(
        other.zookeeper().get_data(&path, false).unwrap().0,
        b"mine",
        "re-created with its data"
    );
    assert_eq!(again.ephemeral_owner, zkw.zookeeper().session_id());
    node.close();
    assert_eq!(
        other.zookeeper().exists(&path, false).unwrap(),
        None,
        "removed on close"
    );

    let dropped = PersistentNode::start(&zkw, &path, CreateMode::Persistent, b"p").unwrap();
    assert!(dropped.wait_created(LONG));
    drop(dropped);
    assert!(
        eventually(LONG, || other
            .zookeeper()
            .exists(&path, false)
            .unwrap()
            .is_none()),
        "removed in the background on drop"
    );
    assert!(
        PersistentNode::start(&zkw, &path, CreateMode::PersistentSequentialWithTtl, b"").is_err()
    );
    assert!(PersistentNode::start(&zkw, "rel", CreateMode::Ephemeral, b"").is_err());
}

#[test]
fn a_create_whose_reply_is_lost_is_adopted_never_made_twice() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers, false);
    let root = unique_root("pnode-lost");
    let path = format!("{root}/svc");
    zklock::zkutil::create_with_parents(&zkw, &root).unwrap();
    zkw.zookeeper().lose_next_reply(ReplyKind::Create);
    let node = PersistentNode::start(&zkw, &path, CreateMode::Ephemeral, b"x").unwrap();
    let events = node.events();
    assert!(node.wait_created(LONG));
    let stat = zkw.zookeeper().exists(&path, false).unwrap().unwrap();
    assert_eq!(stat.ephemeral_owner, zkw.zookeeper().session_id());
    assert_eq!(zkw.zookeeper().get_children(&root, false).unwrap().len(), 1);
    std::thread::sleep(Duration::from_millis(500));
    let seen: Vec<_> = events.try_iter().collect();
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, PersistentNodeEvent::Foreign(_))),
        "its own node is not foreign: {seen:?}"
    );
    node.close();
    assert!(zkw.zookeeper().exists(&path, false).unwrap().is_none());
}

#[test]
fn after_a_forced_expiry_with_renewal_the_node_is_back_once() {
    init_log();
    let servers = shared_server().connect_string();
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zkw = connect(&proxy.connect_string(), true);
    let path = format!("{}/svc", unique_root("pnode-expiry"));
    let node = PersistentNode::start(&zkw, &path, CreateMode::Ephemeral, b"reg").unwrap();
    let events = node.events();
    assert!(node.wait_created(LONG));
    let first = zkw.zookeeper().session_id();
    while events.recv_timeout(Duration::from_millis(300)).is_ok() {}

    // Force the expiry: a twin of the session closes it behind a stall.
    proxy.stall();
    let zk = zkw.zookeeper().clone();
    let twin = ZooKeeper::connect_with_session(
        &servers,
        SESSION,
        |_e: WatchedEvent| {},
        zk.session_id(),
        &zk.session_password(),
    )
    .unwrap();
    twin.wait_connected(LONG).unwrap();
    twin.close().unwrap();
    proxy.reset();

    let observer = connect(&servers, false);
    assert!(eventually(LONG, || zkw.zookeeper().session_id() != first
        && zkw.zookeeper().state() == zklock::client::State::Connected));
    let renewed = Instant::now();
    let stat = created(&events);
    let back = renewed.elapsed();
    println!("back {back:?} after the renewed session connected");
    assert!(back < Duration::from_secs(5), "back after {back:?}");
    assert_eq!(stat.ephemeral_owner, zkw.zookeeper().session_id());
    let now = observer.zookeeper().exists(&path, false).unwrap().unwrap();
    assert_eq!(now.ephemeral_owner, zkw.zookeeper().session_id());
    let parent = zklock::zkutil::get_parent(&path).unwrap();
    assert_eq!(
        observer
            .zookeeper()
            .get_children(parent, false)
            .unwrap()
            .len(),
        1,
        "never two"
    );
    node.close();
    assert!(observer.zookeeper().exists(&path, false).unwrap().is_none());
}

/// The node's protected name: `_c_<uuid>-<name><10-digit sequence>`.
fn assert_protected(child: &str, name: &str) -> String {
    let uuid = child
        .strip_prefix("_c_")
        .unwrap_or_else(|| panic!("{child}: no protection prefix"));
    let (uuid, rest) = uuid.split_at(36);
    assert_eq!(uuid.matches('-').count(), 4, "{child}: uuid {uuid}");
    let seq = rest
        .strip_prefix('-')
        .and_then(|r| r.strip_prefix(name))
        .unwrap_or_else(|| panic!("{child}: not -{name}<sequence>"));
    assert!(
        seq.len() == 10 && seq.bytes().all(|b| b.is_ascii_digit()),
        "{child}"
    );
    uuid.to_string()
}

#[test]
fn a_protected_sequential_node_survives_a_lost_create_and_an_expiry_once() {
    init_log();
    let servers = shared_server().connect_string();
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zkw = connect(&proxy.connect_string(), true);
    let root = unique_root("pnode-seq");
    zklock::zkutil::create_with_parents(&zkw, &root).unwrap();
    let observer = connect(&servers, false);
    let children = || observer.zookeeper().get_children(&root, false).unwrap();

    // The reply of the first create is lost: the uuid finds the node.
    zkw.zookeeper().lose_next_reply(ReplyKind::Create);
    let path = format!("{root}/svc-");
    let node = PersistentNode::start(&zkw, &path, CreateMode::EphemeralSequential, b"s").unwrap();
    let events = node.events();
    assert!(node.wait_created(LONG));
    let kids = children();
    assert_eq!(kids.len(), 1, "never two: {kids:?}");
    let first_uuid = assert_protected(&kids[0], "svc-");
    assert_eq!(node.actual_path(), Some(format!("{root}/{}", kids[0])));
    let stat = observer
        .zookeeper()
        .exists(&node.actual_path().unwrap(), false)
        .unwrap()
        .unwrap();
    assert_eq!(stat.ephemeral_owner, zkw.zookeeper().session_id());
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !events
            .try_iter()
            .any(|e| matches!(e, PersistentNodeEvent::Foreign(_))),
        "its own node is not foreign"
    );

    // The session expires: a new incarnation under a new uuid, once.
    force_expiry(&proxy, &servers, &zkw);
    let stat = created(&events);
    assert_eq!(stat.ephemeral_owner, zkw.zookeeper().session_id());
    assert!(eventually(LONG, || children().len() == 1));
    let kids = children();
    assert_ne!(assert_protected(&kids[0], "svc-"), first_uuid);
    assert_eq!(node.actual_path(), Some(format!("{root}/{}", kids[0])));
    node.set_data(b"t").unwrap();
    node.close();
    assert!(children().is_empty(), "removed on close");

    // Persistent sequential: protected too, removed on close.
    let node = PersistentNode::start(&zkw, &path, CreateMode::PersistentSequential, b"p").unwrap();
    assert!(node.wait_created(LONG));
    assert_protected(&children()[0], "svc-");
    node.close();
    assert!(children().is_empty());
}

#[test]
fn ttl_nodes_go_after_their_ttl_unless_a_persistent_ttl_node_touches_them() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers, false);
    let observer = connect(&servers, false);
    let zk = observer.zookeeper();
    let root = unique_root("pnode-ttl");
    let ttl = Duration::from_secs(1);

    // A TTL node: the server removes it once childless and unwritten for
    // its TTL (reaper every second); the recipe creates it again.
    let path = format!("{root}/ttl");
    let node =
        PersistentNode::start_ttl(&zkw, &path, CreateMode::PersistentWithTtl, ttl, b"t").unwrap();
    let events = node.events();
    let first = created(&events);
    // (The server shows a TTL node's `ephemeralOwner` as 0: its TTL shows
    // only in that it goes.)
    assert_eq!(first.ephemeral_owner, 0);
    let again = created(&events);
    assert_ne!(again.czxid, first.czxid, "reaped, then created again");
    node.close();
    assert_eq!(zk.exists(&path, false).unwrap(), None, "removed on close");

    // A PersistentTtlNode: a container kept alive by a touched TTL child.
    let path = format!("{root}/kept");
    let kept = PersistentTtlNode::start(&zkw, &path, ttl, b"k").unwrap();
    assert!(kept.node().wait_created(LONG));
    let container = zk.exists(&path, false).unwrap().unwrap();
    let touch = format!("{path}/touch");
    assert!(eventually(LONG, || zk
        .exists(&touch, false)
        .unwrap()
        .is_some()));
    let child = zk.exists(&touch, false).unwrap().unwrap();
    // Four TTLs (and reaper rounds): the node stays the same node, and its
    // child is written.
    let until = Instant::now() + 4 * ttl;
    while Instant::now() < until {
        let now = zk.exists(&path, false).unwrap();
        assert_eq!(now.map(|s| s.czxid), Some(container.czxid), "kept alive");
        std::thread::sleep(Duration::from_millis(200));
    }
    let later = zk.exists(&touch, false).unwrap().unwrap();
    assert!(later.mzxid > child.mzxid, "the child is touched");
    assert_eq!(zk.get_data(&path, false).unwrap().0, b"k");
    // Closed: the child expires, then the empty container goes.
    let closed = Instant::now();
    kept.close();
    assert!(
        zk.exists(&path, false).unwrap().is_some(),
        "close leaves it to the TTL"
    );
    assert!(eventually(LONG, || zk
        .exists(&path, false)
        .unwrap()
        .is_none()));
    println!(
        "a closed PersistentTtlNode (TTL {ttl:?}) went after {:?}",
        closed.elapsed()
    );

    // Bad input.
    assert!(PersistentNode::start(&zkw, &path, CreateMode::PersistentWithTtl, b"").is_err());
    assert!(PersistentNode::start_ttl(&zkw, &path, CreateMode::Ephemeral, ttl, b"").is_err());
    assert!(PersistentNode::start_ttl(
        &zkw,
        &path,
        CreateMode::PersistentWithTtl,
        Duration::ZERO,
        b""
    )
    .is_err());
    assert!(PersistentTtlNode::start(&zkw, "rel", ttl, b"").is_err());
}

/// A create whose reply is lost, in one mode: the node is found again by the
/// mark only it can have written, reported created (never foreign), made
/// once, and removed on close.
fn lost_create_is_recognised(zkw: &ZooKeeperWatcher, dir: &str, mode: CreateMode) {
    let observer = zkw.zookeeper();
    zklock::zkutil::create_with_parents(zkw, dir).unwrap();
    let path = format!("{dir}/svc");
    zkw.zookeeper().lose_next_reply(ReplyKind::Create);
    let node = if mode.is_ttl() {
        PersistentNode::start_ttl(zkw, &path, mode, Duration::from_secs(60), b"same")
    } else {
        PersistentNode::start(zkw, &path, mode, b"same")
    }
    .unwrap();
    let events = node.events();
    assert!(
        node.wait_created(Duration::from_secs(20)),
        "{mode:?}: its own node after a lost create reply"
    );
    let kids = observer.get_children(dir, false).unwrap();
    assert_eq!(kids.len(), 1, "{mode:?}: made once: {kids:?}");
    assert_eq!(node.actual_path(), Some(format!("{dir}/{}", kids[0])));
    if mode.is_sequential() {
        assert_protected(&kids[0], "svc");
    }
    assert_eq!(
        observer
            .get_data(&format!("{dir}/{}", kids[0]), false)
            .unwrap()
            .0,
        b"same",
        "{mode:?}: the data as given"
    );
    std::thread::sleep(Duration::from_millis(300));
    let seen: Vec<_> = events.try_iter().collect();
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, PersistentNodeEvent::Foreign(_))),
        "{mode:?}: its own node is not foreign: {seen:?}"
    );
    node.close();
    assert_eq!(
        observer.get_children(dir, false).unwrap(),
        Vec::<String>::new(),
        "{mode:?}: removed on close, no orphan"
    );
}

#[test]
fn a_lost_create_is_recognised_in_every_mode_and_removed_on_close() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers, false);
    let root = unique_root("pnode-lost-modes");
    for mode in [
        CreateMode::Persistent,
        CreateMode::PersistentWithTtl,
        CreateMode::Ephemeral,
        CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential,
        CreateMode::PersistentSequentialWithTtl,
    ] {
        lost_create_is_recognised(&zkw, &format!("{root}/{mode:?}"), mode);
    }
}

/// Waits for a `Foreign` report (other events are skipped).
fn foreign(events: &std::sync::mpsc::Receiver<PersistentNodeEvent>) -> Stat {
    loop {
        match events.recv_timeout(LONG).unwrap() {
            PersistentNodeEvent::Foreign(stat) => return stat,
            e => println!("{e:?}"),
        }
    }
}

#[test]
fn a_strangers_node_with_equal_data_is_not_adopted() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers, false);
    let other = connect(&servers, false);
    let root = unique_root("pnode-stranger");
    zklock::zkutil::create_with_parents(&zkw, &root).unwrap();
    let zk = other.zookeeper();

    // Another session's persistent node, equal data; this create's reply is
    // lost (its NodeExists).
    let path = format!("{root}/persistent");
    let (_, theirs) = zk
        .create2(
            &path,
            b"same",
            zklock::client::Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .unwrap();
    zkw.zookeeper().lose_next_reply(ReplyKind::Create);
    let node = PersistentNode::start(&zkw, &path, CreateMode::Persistent, b"same").unwrap();
    let events = node.events();
    assert_eq!(foreign(&events).czxid, theirs.czxid);
    assert!(!node.wait_created(Duration::from_millis(500)));
    node.close();
    let now = zk
        .exists(&path, false)
        .unwrap()
        .expect("the stranger's node stays");
    assert_eq!(now.czxid, theirs.czxid);

    // Two participants of one session, equal data, one ephemeral name: the
    // second does not take the first's node for its own.
    let path = format!("{root}/ephemeral");
    let first = PersistentNode::start(&zkw, &path, CreateMode::Ephemeral, b"same").unwrap();
    assert!(first.wait_created(LONG));
    let mine = zk.exists(&path, false).unwrap().unwrap();
    let second = PersistentNode::start(&zkw, &path, CreateMode::Ephemeral, b"same").unwrap();
    let events = second.events();
    assert_eq!(foreign(&events).czxid, mine.czxid);
    assert!(!second.wait_created(Duration::from_millis(500)));
    second.close();
    assert_eq!(
        zk.exists(&path, false).unwrap().map(|s| s.czxid),
        Some(mine.czxid),
        "the first participant's node stays"
    );
    first.close();
    assert_eq!(zk.exists(&path, false).unwrap(), None);
}

/// While the connection is down the node's thread waits for the reconnect
/// (no polling); once back, a node deleted meanwhile is created again, once.
#[test]
fn a_node_deleted_while_disconnected_is_back_after_the_reconnect() {
    init_log();
    let servers = shared_server().connect_string();
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zkw = connect(&proxy.connect_string(), false);
    let root = unique_root("pnode-disconnected");
    let path = format!("{root}/svc");
    let node = PersistentNode::start(&zkw, &path, CreateMode::Persistent, b"p").unwrap();
    let events = node.events();
    let first = created(&events);
    let observer = connect(&servers, false);
    proxy.stall();
    observer.zookeeper().delete(&path, None).unwrap();
    // The client notices the silence (a read timeout) and keeps trying to
    // reconnect through the stalled proxy.
    assert!(eventually(LONG, || zkw.zookeeper().state()
        != zklock::client::State::Connected));
    proxy.pass();
    let again = created(&events);
    assert_ne!(again.czxid, first.czxid, "created again");
    assert_eq!(
        observer
            .zookeeper()
            .get_children(&root, false)
            .unwrap()
            .len(),
        1
    );
    node.close();
    assert_eq!(observer.zookeeper().exists(&path, false).unwrap(), None);
}

/// An idle node costs no wake-up: once its session has ended (no renewal
/// here), the node's thread waits for a new session and makes no round
/// meanwhile. (It looked again every 200 ms before: several rounds in the
/// second watched.) Closing still ends the thread at once.
#[test]
fn a_node_whose_session_ended_waits_without_polling() {
    init_log();
    let servers = shared_server().connect_string();
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zkw = connect(&proxy.connect_string(), false);
    let path = format!("{}/svc", unique_root("pnode-idle"));
    let node = PersistentNode::start(&zkw, &path, CreateMode::Ephemeral, b"reg").unwrap();
    assert!(node.wait_created(LONG));
    force_expiry(&proxy, &servers, &zkw);
    assert!(eventually(LONG, || zkw.zookeeper().state()
        == zklock::client::State::Expired));
    // The rounds the end itself wakes (its events reach the node's watch
    // and the reconnect hook) are over well within this.
    std::thread::sleep(Duration::from_millis(500));
    let before = node.rounds();
    std::thread::sleep(Duration::from_secs(1));
    let after = node.rounds();
    assert_eq!(
        after - before,
        0,
        "the idle node's thread made {} rounds in a second",
        after - before
    );
    let closing = Instant::now();
    node.close();
    assert!(closing.elapsed() < LONG);
}
