//! `DistributedQueue::offer_all` against a real ZooKeeper server: a pipelined
//! batch of creates whose items arrive once each and in order, also when the
//! reply to a create inside the batch is lost (the server applied it, the
//! connection dropped): no item twice, none missing.

mod common;

use common::init_log;
use std::time::Duration;

use zklock::client::ReplyKind;
use zklock::recipes::queue::{DistributedQueue, OFFER_ALL_BATCH};
use zklock::testing::{shared_server, unique_root};
use zklock::{RetryConfig, ZooKeeperWatcher};

fn connect(servers: &str) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(servers)
        .with_identifier("offer-all-test")
        .with_session_timeout(Duration::from_secs(6))
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .connect()
        .unwrap()
}

/// Every item left in `q`, in order.
fn drain(q: &DistributedQueue) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(item) = q.poll().unwrap() {
        out.push(String::from_utf8(item).unwrap());
    }
    out
}

#[test]
fn offer_all_items_arrive_once_each_in_order_over_several_batches() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers);
    // A missing directory: made by the first batch.
    let dir = format!("{}/q", unique_root("offer-all"));
    let q = DistributedQueue::new(&zkw, &dir).unwrap();
    let n = OFFER_ALL_BATCH * 2 + 7;
    let items: Vec<String> = (0..n).map(|i| format!("item-{i}")).collect();
    let paths = q.offer_all(&items).unwrap();
    assert_eq!(paths.len(), n);
    assert!(
        paths.windows(2).all(|w| w[0] < w[1]),
        "paths in the order offered"
    );
    assert!(q.offer_all::<&[u8]>(&[]).unwrap().is_empty());
    assert_eq!(drain(&q), items);
    drop(q);
    zkw.close().unwrap();
}

#[test]
fn a_lost_create_reply_inside_a_batch_leaves_no_duplicate_and_no_gap() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers);
    let dir = format!("{}/q", unique_root("offer-all-lost"));
    let q = DistributedQueue::new(&zkw, &dir).unwrap();
    q.offer(b"before").unwrap();
    // The batch's first create (after its exists) loses its reply: the
    // server applied it, and the connection drops under the rest.
    zkw.zookeeper().lose_next_reply(ReplyKind::Create);
    let items: Vec<String> = (0..20).map(|i| format!("item-{i}")).collect();
    let paths = q.offer_all(&items).unwrap();
    assert_eq!(paths.len(), items.len());
    assert!(paths.windows(2).all(|w| w[0] < w[1]));
    let mut expected = vec!["before".to_string()];
    expected.extend(items.iter().cloned());
    assert_eq!(drain(&q), expected, "each item once, in order");
    drop(q);
    zkw.close().unwrap();
}

#[test]
fn a_batch_whose_replies_are_all_lost_ends_in_doubt_and_offers_nothing_twice() {
    use zklock::testing::FaultProxy;
    use zklock::ZkError;
    init_log();
    let servers = shared_server().connect_string();
    let admin = connect(&servers);
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zkw = connect(&proxy.connect_string());
    let dir = format!("{}/q", unique_root("offer-all-doubt"));
    let q = DistributedQueue::new(&zkw, &dir).unwrap();
    q.offer(b"before").unwrap();
    // The server gets and applies the batch; every reply (the directory's
    // exists too) is held, then dropped with the connection.
    proxy.stall_downstream();
    let items: Vec<String> = (0..20).map(|i| format!("item-{i}")).collect();
    let offering = std::thread::spawn(move || {
        let r = q.offer_all(&items);
        (q, r)
    });
    let count = || admin.zookeeper().get_children(&dir, false).unwrap().len();
    let t0 = std::time::Instant::now();
    while count() < 21 {
        assert!(t0.elapsed() < Duration::from_secs(20), "the batch applied");
        std::thread::sleep(Duration::from_millis(10));
    }
    proxy.reset();
    let (q, r) = offering.join().unwrap();
    let e = r.expect_err("nothing confirmed: in doubt");
    assert!(e.is(ZkError::ConnectionLoss), "{e}");
    // Nothing offered twice.
    assert_eq!(drain(&q).len(), 21);
    drop(q);
    zkw.close().unwrap();
    admin.close().unwrap();
}
