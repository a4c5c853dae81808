//! `zklock::recipes::persistent_node` against a real ZooKeeper server: the
//! node is created, re-created after a delete and after a forced session
//! expiry (with renewal), never twice, a foreign change is reported, and it
//! is removed on close and on drop; a sequential node is protected (a lost
//! create is adopted by its uuid, never made twice); TTL nodes go after their
//! TTL unless touched (`PersistentTtlNode`).

mod common;

use common::{force_expiry, init_log};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zklock::client::CreateMode;
use zklock::client::{ReplyKind, WatchedEvent, ZooKeeper};
use zklock::recipes::persistent_node::{
    PersistentNode, PersistentNodeEvent, PersistentNodeStep, PersistentTtlNode,
};
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

/// `start` (or `start_ttl`) with the step hook `hook`, its first create
/// sent to the server with its reply held by `proxy.stall_downstream()`: a
/// create in flight. A sequential node's thread creates first thing: the
/// stall is set before `start`. A fixed name's thread looks first (its
/// `exists`, whose reply the stall holds until the hook is set): the hook
/// sets the stall again at the first `Creating` step.
fn start_with_the_create_held(
    zkw: &ZooKeeperWatcher,
    proxy: &Arc<FaultProxy>,
    path: &str,
    mode: CreateMode,
    data: &[u8],
    hook: impl Fn(PersistentNodeStep, &str) + Send + Sync + 'static,
) -> PersistentNode {
    let held = AtomicBool::new(false);
    let stall = proxy.clone();
    let hook = move |step, path: &str| {
        if step == PersistentNodeStep::Creating && !held.swap(true, Ordering::SeqCst) {
            stall.stall_downstream();
        }
        hook(step, path);
    };
    proxy.stall_downstream();
    let node = if mode.is_ttl() {
        PersistentNode::start_ttl(zkw, path, mode, LONG, data)
    } else {
        PersistentNode::start(zkw, path, mode, data)
    }
    .unwrap()
    .with_step_hook(hook);
    if !mode.is_sequential() {
        proxy.pass();
    }
    node
}

/// A node whose first create the server applied while its reply is held
/// ([`start_with_the_create_held`]), then the connection cut behind a
/// stalled proxy: the client is disconnected and stays so until
/// `proxy.reset()`, and the create's outcome is unknown to the node. The
/// node (with `hook`) and the path of the node the server made.
fn node_with_an_unsettled_create(
    zkw: &ZooKeeperWatcher,
    proxy: &Arc<FaultProxy>,
    dir: &str,
    mode: CreateMode,
    data: &[u8],
    hook: impl Fn(PersistentNodeStep, &str) + Send + Sync + 'static,
) -> (PersistentNode, String) {
    zklock::zkutil::create_with_parents(zkw, dir).unwrap();
    let observer = connect(&common::local(), false);
    let path = format!("{dir}/svc");
    let node = start_with_the_create_held(zkw, proxy, &path, mode, data, hook);
    let children = || observer.zookeeper().get_children(dir, false).unwrap();
    assert!(
        eventually(LONG, || children().len() == 1),
        "{mode:?}: the server applied the create"
    );
    proxy.stall();
    proxy.cut();
    assert!(eventually(LONG, || zkw.zookeeper().state()
        != zklock::client::State::Connected));
    assert!(
        !node.is_created(),
        "{mode:?}: the create's outcome is unknown"
    );
    (node, format!("{dir}/{}", children()[0]))
}

/// Issue 50 item 1: a node closed (or dropped) while the create whose reply
/// was lost is unsettled, the client still disconnected, is removed: the
/// node's thread waits for the reconnect (the proxy passes only once it is
/// removing), finds the node by its mark and deletes it. In every mode.
/// (Before: `close` returned at once, "no recorded node", and the node
/// stayed: a persistent or TTL one for good.)
#[test]
fn a_node_closed_while_its_lost_create_is_unsettled_is_removed() {
    init_log();
    let servers = shared_server().connect_string();
    let observer = connect(&servers, false);
    let root = unique_root("pnode-close-unsettled");
    for (mode, by_drop) in [
        (CreateMode::Persistent, false),
        (CreateMode::PersistentWithTtl, false),
        (CreateMode::Ephemeral, false),
        (CreateMode::PersistentSequential, false),
        (CreateMode::EphemeralSequential, false),
        (CreateMode::Persistent, true),
    ] {
        let proxy = Arc::new(FaultProxy::start(servers.as_str()).unwrap());
        let zkw = connect(&proxy.connect_string(), false);
        let (removing, rx) = std::sync::mpsc::channel();
        let removing = std::sync::Mutex::new(removing);
        let dir = format!("{root}/{mode:?}-{by_drop}");
        let (node, made) =
            node_with_an_unsettled_create(&zkw, &proxy, &dir, mode, b"x", move |step, _| {
                if step == PersistentNodeStep::Removing {
                    let _ = removing.lock().unwrap().send(());
                }
            });
        let closing = Instant::now();
        std::thread::scope(|s| {
            let proxy = &proxy;
            s.spawn(move || {
                // The connection comes back only once the node is removing.
                let _ = rx.recv_timeout(Duration::from_secs(20));
                proxy.reset();
            });
            if by_drop {
                drop(node);
            } else {
                node.close();
            }
        });
        let gone = || observer.zookeeper().exists(&made, false).unwrap().is_none();
        if by_drop {
            assert!(
                eventually(Duration::from_secs(20), gone),
                "{mode:?}: dropped while its create was unsettled: {made} is removed in the background"
            );
        } else {
            println!("{mode:?}: closed in {:?}", closing.elapsed());
            assert!(
                gone(),
                "{mode:?}: closed while its create was unsettled: {made} is removed on close"
            );
        }
        zkw.close().unwrap();
    }
}

/// Issue 50 item 2: `set_data` while the create is on its way (its reply
/// held) or unsettled after a lost reply (the client disconnected) returns
/// `NoNode`, and the node then holds that data: the create carried older
/// data, so the node's thread writes it after the create or the adoption.
/// (Before: the node kept the create's data, `"old"`, for good.)
#[test]
fn set_data_while_the_create_is_in_flight_or_unsettled_is_written() {
    init_log();
    let servers = shared_server().connect_string();
    let observer = connect(&servers, false);
    let root = unique_root("pnode-data-unsettled");
    let data_of = |path: &str| observer.zookeeper().get_data(path, false).map(|(d, _)| d);

    // In flight: the reply is held, then delivered.
    let proxy = Arc::new(FaultProxy::start(servers.as_str()).unwrap());
    let zkw = connect(&proxy.connect_string(), false);
    let dir = format!("{root}/in-flight");
    zklock::zkutil::create_with_parents(&zkw, &dir).unwrap();
    let path = format!("{dir}/svc");
    let node = start_with_the_create_held(
        &zkw,
        &proxy,
        &path,
        CreateMode::Persistent,
        b"old",
        |_, _| {},
    );
    assert!(eventually(LONG, || data_of(&path).is_ok()), "created");
    let e = node.set_data(b"new").unwrap_err();
    assert!(e.is(zklock::ZkError::NoNode), "{e}");
    proxy.pass();
    assert!(node.wait_created(LONG));
    assert!(
        eventually(Duration::from_secs(10), || data_of(&path).unwrap()
            == b"new"),
        "set_data during the create in flight is written: the node holds {:?}",
        String::from_utf8_lossy(&data_of(&path).unwrap())
    );
    node.close();
    zkw.close().unwrap();

    // Unsettled: the reply is lost and the client disconnected.
    for mode in [CreateMode::Persistent, CreateMode::EphemeralSequential] {
        let proxy = Arc::new(FaultProxy::start(servers.as_str()).unwrap());
        let zkw = connect(&proxy.connect_string(), false);
        let dir = format!("{root}/{mode:?}");
        let (node, made) =
            node_with_an_unsettled_create(&zkw, &proxy, &dir, mode, b"old", |_, _| {});
        let e = node.set_data(b"new").unwrap_err();
        assert!(e.is(zklock::ZkError::NoNode), "{mode:?}: {e}");
        proxy.reset();
        assert!(node.wait_created(LONG), "{mode:?}: adopted by its mark");
        assert_eq!(node.actual_path(), Some(made.clone()), "{mode:?}: adopted");
        assert!(
            eventually(Duration::from_secs(10), || data_of(&made).unwrap()
                == b"new"),
            "{mode:?}: set_data during the unsettled create is written: the node holds {:?}",
            String::from_utf8_lossy(&data_of(&made).unwrap())
        );
        node.close();
        assert!(data_of(&made).is_err(), "{mode:?}: removed on close");
        zkw.close().unwrap();
    }
}

/// Issue 50 item 4: the node's own `set_data` whose reply is lost (the
/// server applied it) is not reported as `ChangedByOther` once the node's
/// thread looks at the node after the reconnect; a foreign write still is.
/// (Before: `ChangedByOther(b"mine", ..)`.)
#[test]
fn its_own_write_whose_reply_is_lost_is_not_reported_as_someone_elses() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers, false);
    let observer = connect(&servers, false);
    let path = format!("{}/svc", unique_root("pnode-own-write"));
    let (looked, looks) = std::sync::mpsc::channel();
    let looked = std::sync::Mutex::new(looked);
    let node = PersistentNode::start(&zkw, &path, CreateMode::Ephemeral, b"first")
        .unwrap()
        .with_step_hook(move |step, _| {
            if let PersistentNodeStep::Looked { mzxid } = step {
                let _ = looked.lock().unwrap().send(mzxid);
            }
        });
    let events = node.events();
    assert!(node.wait_created(LONG));

    zkw.zookeeper().lose_next_reply(ReplyKind::SetData);
    let e = node.set_data(b"mine").unwrap_err();
    assert!(e.is_retryable(), "its reply is lost: {e}");
    let (data, written) = observer.zookeeper().get_data(&path, false).unwrap();
    assert_eq!(data, b"mine", "the server applied it");
    // The node's thread looks at the node as written (after the reconnect).
    while looks.recv_timeout(LONG).unwrap() < written.mzxid {}
    let reported: Vec<_> = events
        .try_iter()
        .filter(|e| matches!(e, PersistentNodeEvent::ChangedByOther(..)))
        .collect();
    assert!(
        reported.is_empty(),
        "its own write is not reported as someone else's: {reported:?}"
    );

    // Someone else's write still is, and the node's next write is not.
    observer
        .zookeeper()
        .set_data(&path, b"theirs", None)
        .unwrap();
    match events.recv_timeout(LONG).unwrap() {
        PersistentNodeEvent::ChangedByOther(d, _) => assert_eq!(d, b"theirs"),
        e => panic!("{e:?}"),
    }
    node.set_data(b"again").unwrap();
    let written = observer.zookeeper().exists(&path, false).unwrap().unwrap();
    while looks.recv_timeout(LONG).unwrap() < written.mzxid {}
    let seen: Vec<_> = events.try_iter().collect();
    assert!(seen.is_empty(), "{seen:?}");
    node.close();
    assert!(observer.zookeeper().exists(&path, false).unwrap().is_none());
}
