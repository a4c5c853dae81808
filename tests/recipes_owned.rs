//! The one way to own a node, through the recipes whose nodes are created
//! for their caller (a group member here; two-phase-commit sites and queue
//! receipts share it), against a real ZooKeeper server: a create whose reply
//! is lost finds its own node again by a mark only it can have written, and
//! never takes a stranger's node for its own, not even one of the same
//! session holding equal data (with HBase's metadata prefix off, equal data
//! is all that a read-back could compare).

mod common;

use common::init_log;
use std::time::Duration;

use zklock::client::{EventType, ReplyKind};
use zklock::recipes::group::Group;
use zklock::testing::{shared_server, unique_root};
use zklock::{RetryConfig, ZkError, ZooKeeperWatcher};

fn connect(servers: &str, prefix: bool) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(servers)
        .with_identifier("owned-test")
        .with_session_timeout(Duration::from_secs(6))
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .with_metadata_prefix(prefix)
        .connect()
        .unwrap()
}

#[test]
fn a_members_lost_create_is_its_own_node_with_and_without_the_metadata_prefix() {
    init_log();
    let servers = shared_server().connect_string();
    for prefix in [true, false] {
        let zkw = connect(&servers, prefix);
        let root = unique_root("owned-member");
        let group = Group::new(&zkw, &root).unwrap();
        group.join("warm-up", b"").unwrap().leave().unwrap();
        zkw.zookeeper().lose_next_reply(ReplyKind::Create);
        let member = group.join("m", b"same").unwrap();
        assert_eq!(member.node(), format!("{root}/m"));
        let zk = zkw.zookeeper();
        let stat = zk.exists(member.node(), false).unwrap().unwrap();
        assert_eq!(stat.ephemeral_owner, zk.session_id());
        assert_eq!(
            zk.get_children(&root, false).unwrap(),
            vec!["m".to_string()]
        );
        member.leave().unwrap();
        assert_eq!(
            zk.exists(&format!("{root}/m"), false).unwrap(),
            None,
            "prefix {prefix}"
        );
        zkw.close().unwrap();
    }
}

#[test]
fn a_lost_create_never_takes_another_members_node_of_the_same_session() {
    init_log();
    let servers = shared_server().connect_string();
    for prefix in [false, true] {
        let zkw = connect(&servers, prefix);
        let root = unique_root("owned-stranger");
        let group = Group::new(&zkw, &root).unwrap();
        let first = group.join("m", b"same").unwrap();
        let zk = zkw.zookeeper();
        let theirs = zk.exists(first.node(), false).unwrap().unwrap();
        // The second participant's create fails (NodeExists), its reply is
        // lost; the retry finds the first participant's node: equal data,
        // same session, but not this participant's mark.
        zkw.zookeeper().lose_next_reply(ReplyKind::Create);
        let second = group.join("m", b"same");
        match second {
            Err(e) => assert!(e.is(ZkError::NodeExists), "prefix {prefix}: {e}"),
            Ok(m) => {
                let node = m.node().to_string();
                // Leaving would delete the first participant's node.
                std::mem::forget(m);
                panic!("prefix {prefix}: the first participant's node {node} was taken for the second's");
            }
        }
        let now = zk.exists(first.node(), false).unwrap().unwrap();
        assert_eq!(now.czxid, theirs.czxid);
        first.leave().unwrap();
        zkw.close().unwrap();
    }
}

/// How a member whose node another session took over goes.
#[derive(Clone, Copy, PartialEq)]
enum Goes {
    /// Dropped: its background removal is guarded by its creation zxid.
    Dropped,
    /// `leave()`: the synchronous guarded removal.
    Leaves,
}

/// A member's node is removed by someone else and another session joins
/// under its name; the member then goes (`how`): the node at its name is not
/// the one it created (another creation zxid), so it is left alone.
fn a_member_never_removes_another_node_that_took_its_name(how: Goes) {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers, true);
    let rival = connect(&servers, true);
    let root = unique_root("owned-name");
    let group = Group::new(&zkw, &root).unwrap();
    let member = group.join("m", b"mine").unwrap();
    let zk = rival.zookeeper();
    zk.delete(member.node(), None).unwrap();
    let theirs = Group::new(&rival, &root)
        .unwrap()
        .join("m", b"theirs")
        .unwrap();
    let stat = zk.exists(theirs.node(), false).unwrap().unwrap();
    match how {
        Goes::Dropped => {
            drop(member);
            // Its requests go before this sync of the same session.
            zkw.recoverable_zookeeper().sync(&root).unwrap();
            zkw.zookeeper().exists(&root, false).unwrap();
        }
        Goes::Leaves => member.leave().unwrap(),
    }
    assert_eq!(
        zk.exists(theirs.node(), false).unwrap().map(|s| s.czxid),
        Some(stat.czxid),
        "the other session's node stays"
    );
    theirs.leave().unwrap();
    zkw.close().unwrap();
    rival.close().unwrap();
}

#[test]
fn a_dropped_member_never_removes_another_node_that_took_its_name() {
    a_member_never_removes_another_node_that_took_its_name(Goes::Dropped);
}

#[test]
fn a_member_leaving_never_removes_another_node_that_took_its_name() {
    a_member_never_removes_another_node_that_took_its_name(Goes::Leaves);
}

#[test]
fn a_dropped_members_removal_whose_reply_is_lost_is_done_after_the_reconnect() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers, true);
    let root = unique_root("owned-drop-reconnect");
    let group = Group::new(&zkw, &root).unwrap();
    let member = group.join("m", b"mine").unwrap();
    let node = member.node().to_string();
    let (observer, events) = common::client::connect(&servers, Duration::from_secs(6));
    assert!(observer.exists(&node, true).unwrap().is_some());
    // The background removal's first request (the guarded read) loses its
    // reply: the connection drops; the removal is sent again once the
    // session is back, and the node goes (the session lives on).
    zkw.zookeeper().lose_next_reply(ReplyKind::Exists);
    let session = zkw.zookeeper().session_id();
    drop(member);
    events.wait_node(EventType::NodeDeleted, &node, 1, common::WAIT);
    assert_eq!(zkw.zookeeper().session_id(), session, "the same session");
    assert_eq!(observer.exists(&node, false).unwrap(), None);
    observer.close().unwrap();
    zkw.close().unwrap();
}

#[test]
fn a_queue_consumers_receipt_whose_create_reply_is_lost_is_its_own() {
    use zklock::recipes::queue::DistributedQueue;
    init_log();
    let servers = shared_server().connect_string();
    for prefix in [true, false] {
        let zkw = connect(&servers, prefix);
        let dir = format!("{}/q", unique_root("owned-receipt"));
        let q = DistributedQueue::new(&zkw, &dir).unwrap();
        q.offer(b"one").unwrap();
        q.offer(b"two").unwrap();
        // The first claim creates the consumer's receipt (its directory
        // made first, so that the lost reply is the receipt's own create).
        zklock::zkutil::create_with_parents(&zkw, &format!("{dir}-receipts")).unwrap();
        zkw.zookeeper().lose_next_reply(ReplyKind::Create);
        assert_eq!(q.poll().unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(q.poll().unwrap().as_deref(), Some(&b"two"[..]));
        assert_eq!(q.poll().unwrap(), None);
        let receipts = zkw
            .zookeeper()
            .get_children(&format!("{dir}-receipts"), false)
            .unwrap();
        assert_eq!(
            receipts.len(),
            1,
            "prefix {prefix}: one receipt: {receipts:?}"
        );
        drop(q);
        zkw.close().unwrap();
    }
}

/// Issue 44, item 2, for every other caller that makes a node of its session:
/// a group join (fixed name, found by its owner mark), a party join
/// (sequential, found by its tag), a two-phase commit's join (its `alive`
/// node) and a double barrier's enter (its member node, which the other
/// members would count). Each call's create reaches the server, its reply and
/// every later one are held, the link is cut and every retry fails: the call
/// gives up with a recoverable error, and once the link heals the node it
/// made goes (before: it stayed for the session's life).
#[test]
fn a_join_or_enter_that_gives_up_after_its_create_leaves_nothing() {
    use std::sync::Arc;
    use zklock::recipes::double_barrier::DoubleBarrier;
    use zklock::recipes::two_phase_commit::TwoPhaseCommit;
    use zklock::testing::FaultProxy;
    let zk = common::raw();
    let children = |p: &str| common::children(&zk, p);
    let proxy = FaultProxy::start(shared_server().connect_string().as_str()).unwrap();
    let session = common::giving_up(&proxy);
    let other = common::zkw();

    let path = unique_root("group-gives-up");
    zklock::zkutil::create_with_parents(&other, &path).unwrap();
    let group = Arc::new(Group::new(&session, &path).unwrap());
    let g = group.clone();
    common::gives_up_after_its_create(
        &proxy,
        move || g.join("m", b""),
        || !children(&path).is_empty(),
    );
    let g = group.clone();
    common::gives_up_after_its_create(
        &proxy,
        move || g.join_party(b""),
        || !children(&path).is_empty(),
    );
    drop(group);

    let tx = format!("{}/tx", unique_root("2pc-gives-up"));
    let coordinator = TwoPhaseCommit::create(&other, &tx, &["s1"]).unwrap();
    let site = Arc::new(TwoPhaseCommit::open(&session, &tx).unwrap());
    let s = site.clone();
    let alive = format!("{tx}/s1");
    common::gives_up_after_its_create(
        &proxy,
        move || s.join("s1"),
        || !children(&alive).is_empty(),
    );
    drop(site);
    coordinator.delete().unwrap();

    let barrier = format!("{}/b", unique_root("dbarrier-gives-up"));
    zklock::zkutil::create_with_parents(&other, &barrier).unwrap();
    let member = Arc::new(DoubleBarrier::new(&session, &barrier, 2).unwrap());
    let m = member.clone();
    common::gives_up_after_its_create(
        &proxy,
        move || m.enter(Duration::from_secs(30)),
        || !children(&barrier).is_empty(),
    );
    drop(member);
    session.close().unwrap();
}
