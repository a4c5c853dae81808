//! `RecoverableZooKeeper` against a real ZooKeeper server (issue 4): HBase's retry
//! rules, proven with the client's lost-reply hook (`ZooKeeper::lose_next_reply`:
//! the server applies the request, the reply never reaches the caller) and
//! `FaultProxy` partitions.
//!
//! Two techniques keep these tests deterministic, without sleeps for sync:
//! - **Proof that a retry happened.** Every handle under test has a default
//!   watcher that records connection events; a lost reply drops the connection, so
//!   a `Disconnected` event proves the call went through the retry path.
//! - **Another writer between a lost reply and the retry** ([`Split`]). The handle
//!   connects through two proxies; after the lost reply it reconnects to the
//!   *other* host (the client cycles through its host list), which the test has
//!   stalled: the retry cannot run until the test has changed the node through a
//!   second session and lets that proxy pass.

mod common;

use std::collections::HashSet;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use common::{assert_code, init_log, local, ms, setup_root, WAIT};
use zklock::client::{
    Acl, CreateMode, EventType, KeeperState, Op, OpResult, ReplyKind, State, WatchedEvent,
    ZooKeeper,
};
use zklock::testing::{test_servers, wait_until, FaultProxy};
use zklock::{
    metadata_identifier, BackoffPolicy, Error, RecoverableZooKeeper, RetryConfig, ZkError,
};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

const SESSION: Duration = Duration::from_secs(6);
/// The identifier every handle under test writes into its metadata.
const ID: &str = "rzk-test";

/// HBase's defaults with a 10 ms interval: 3 retries after 10, 20, 40 ms.
fn fast_retry() -> RetryConfig {
    RetryConfig::default().with_sleep_interval(ms(10))
}

/// A `RecoverableZooKeeper` under test, and the connection events of its default
/// watcher.
struct Under {
    rzk: RecoverableZooKeeper,
    events: Receiver<WatchedEvent>,
}

impl Under {
    fn connect(builder: zklock::client::ZooKeeperBuilder, retry: RetryConfig) -> Under {
        let (tx, events) = mpsc::channel();
        let zk = builder
            .connect(move |e: WatchedEvent| {
                let _ = tx.send(e);
            })
            .expect("connect");
        let under = Under {
            rzk: RecoverableZooKeeper::new(zk, ID, retry),
            events,
        };
        under.expect_state(KeeperState::SyncConnected);
        under
    }

    fn on(servers: &str, retry: RetryConfig) -> Under {
        Under::connect(
            ZooKeeper::builder(servers).with_session_timeout(SESSION),
            retry,
        )
    }

    /// Waits for the connection event `state`, skipping node events.
    fn expect_state(&self, state: KeeperState) {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(e) if e.event_type == EventType::None && e.keeper_state == state => return,
                Ok(_) => {}
                Err(_) => panic!("no {state:?} event within {WAIT:?}"),
            }
        }
    }

    /// Proof that the last call went through the retry path: its connection was
    /// dropped (the lost reply) and the session reconnected.
    fn expect_reconnected(&self) {
        self.expect_state(KeeperState::Disconnected);
        self.expect_state(KeeperState::SyncConnected);
    }

    /// No connection event is pending: the connection never dropped.
    fn expect_no_reconnect(&self) {
        let seen: Vec<WatchedEvent> = self.events.try_iter().collect();
        assert!(
            seen.iter().all(|e| e.event_type != EventType::None),
            "unexpected connection events {seen:?}"
        );
    }
}

/// Whether raw `data` carries the metadata prefix of the handle under test.
fn written_by_us(data: &[u8]) -> bool {
    metadata_identifier(data).is_some_and(|id| id.starts_with(ID.as_bytes()))
}

/// A handle connected through two proxies to the local server, one of which
/// (`other`) is stalled: after a lost reply the client reconnects to `other`, so
/// its retry waits until [`Split::heal`]. Meanwhile the test changes the node
/// through its own session.
struct Split {
    under: Under,
    current: FaultProxy,
    other: FaultProxy,
}

impl Split {
    fn start() -> Split {
        let a = FaultProxy::start(local()).unwrap();
        let b = FaultProxy::start(local()).unwrap();
        // The handshake to the stalled host may take up to session / 2 = 3 s; the
        // test heals it within milliseconds.
        let under = Under::on(
            &format!("{},{}", a.connect_string(), b.connect_string()),
            fast_retry(),
        );
        let (current, other) = match (a.connections(), b.connections()) {
            (1, 0) => (a, b),
            (0, 1) => (b, a),
            n => panic!("expected one proxied connection, got {n:?}"),
        };
        other.stall();
        Split {
            under,
            current,
            other,
        }
    }

    /// Lets the retry through; checks that it came over the stalled host, i.e.
    /// that it really ran after the test's change.
    fn heal(&self) {
        self.other.pass();
        self.under.expect_reconnected();
        assert_eq!(
            self.other.connections(),
            1,
            "the retry reconnected elsewhere"
        );
        wait_until(WAIT, "the lost connection is gone", || {
            self.current.connections() == 0
        });
    }
}

/// A watcher that forwards node events to a channel.
fn node_events() -> (
    impl Fn(WatchedEvent) + Send + Sync + 'static,
    Receiver<WatchedEvent>,
) {
    let (tx, rx) = mpsc::channel();
    (
        move |e: WatchedEvent| {
            let _ = tx.send(e);
        },
        rx,
    )
}

// ---------------------------------------------------------------------------
// delete
// ---------------------------------------------------------------------------

#[test]
fn delete_no_node_on_a_retry_is_success() {
    init_log();
    let (zk, root) = setup_root(&test_servers(), "delete_retry");
    let under = Under::on(&test_servers(), fast_retry());
    let rzk = &under.rzk;
    for (i, version) in [None, Some(0)].into_iter().enumerate() {
        let path = format!("{root}/n{i}");
        zk.create(&path, b"x", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        rzk.zookeeper().lose_next_reply(ReplyKind::Delete);
        // Applied, reply lost: the retry sees NoNode, which means our delete won.
        rzk.delete(&path, version).unwrap();
        under.expect_reconnected();
        assert_eq!(zk.exists(&path, false).unwrap(), None);
    }
}

#[test]
fn delete_no_node_on_the_first_attempt_is_an_error() {
    init_log();
    let (_zk, root) = setup_root(&test_servers(), "delete_first");
    let under = Under::on(&test_servers(), fast_retry());
    let path = format!("{root}/missing");
    let e = assert_code(under.rzk.delete(&path, None), ZkError::NoNode);
    assert!(e.to_string().contains(&path), "{e}");
    // BadVersion on the first attempt is an error too.
    under
        .rzk
        .create(&path, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert_code(under.rzk.delete(&path, Some(7)), ZkError::BadVersion);
    under.expect_no_reconnect();
}

// ---------------------------------------------------------------------------
// set_data
// ---------------------------------------------------------------------------

#[test]
fn set_data_whose_reply_was_lost_succeeds_and_the_data_is_ours() {
    init_log();
    let (zk, root) = setup_root(&test_servers(), "set_data_lost");
    let under = Under::on(&test_servers(), fast_retry());
    let rzk = &under.rzk;
    let path = format!("{root}/n");
    zk.create(&path, b"v0", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    // A compare-and-set loop, every reply lost: each write lands with version
    // `v + 1`, so each retry gets BadVersion, reads back, and finds its own write.
    for version in 0..5 {
        let data = format!("ours-{version}");
        rzk.zookeeper().lose_next_reply(ReplyKind::SetData);
        let stat = rzk.set_data(&path, data.as_bytes(), Some(version)).unwrap();
        under.expect_reconnected();
        assert_eq!(stat.version, version + 1, "applied exactly once");
        let (read, read_stat) = rzk.get_data(&path, false).unwrap();
        assert_eq!(read, data.as_bytes());
        assert_eq!(read_stat, stat);
        let (stored, _) = zk.get_data(&path, false).unwrap();
        assert!(written_by_us(&stored), "{stored:?}");
    }
}

#[test]
fn set_data_bad_version_on_the_first_attempt_is_an_error() {
    init_log();
    let (zk, root) = setup_root(&test_servers(), "set_data_first");
    let under = Under::on(&test_servers(), fast_retry());
    let path = format!("{root}/n");
    zk.create(&path, b"theirs", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert_code(
        under.rzk.set_data(&path, b"ours", Some(3)),
        ZkError::BadVersion,
    );
    assert_eq!(zk.get_data(&path, false).unwrap().0, b"theirs");
    under.expect_no_reconnect();
}

#[test]
fn set_data_bad_version_on_a_retry_with_another_writers_data_is_an_error() {
    init_log();
    let (zk, root) = setup_root(&local(), "set_data_theirs");
    let split = Split::start();
    let path = format!("{root}/n");
    zk.create(&path, b"v0", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let (watcher, changes) = node_events();
    zk.get_data_w(&path, watcher).unwrap();

    split
        .under
        .rzk
        .zookeeper()
        .lose_next_reply(ReplyKind::SetData);
    let rzk = split.under.rzk.clone();
    let writer = {
        let path = path.clone();
        thread::spawn(move || rzk.set_data(&path, b"ours", Some(0)))
    };
    // Our write landed (version 1) ...
    let e = changes.recv_timeout(WAIT).expect("our write lands");
    assert_eq!(e.event_type, EventType::NodeDataChanged);
    // ... another writer overwrites it before the retry (version 2) ...
    zk.set_data(&path, b"theirs", None).unwrap();
    split.heal();
    // ... so the retry's BadVersion is not ours: the error.
    assert_code(writer.join().unwrap(), ZkError::BadVersion);
    let (data, stat) = zk.get_data(&path, false).unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"theirs"[..], 2));
}

// ---------------------------------------------------------------------------
// create
// ---------------------------------------------------------------------------

#[test]
fn create_node_exists_on_a_retry_with_our_data_is_success() {
    init_log();
    let (zk, root) = setup_root(&test_servers(), "create_ours");
    let under = Under::on(&test_servers(), fast_retry());
    let rzk = &under.rzk;
    // Empty data too: zklock prefixes it, so the retry can recognise it.
    let cases: [(&str, &[u8], CreateMode); 3] = [
        ("p", b"ours", CreateMode::Persistent),
        ("e", b"ours", CreateMode::Ephemeral),
        ("empty", b"", CreateMode::Persistent),
    ];
    for (name, data, mode) in cases {
        let path = format!("{root}/{name}");
        rzk.zookeeper().lose_next_reply(ReplyKind::Create);
        assert_eq!(
            rzk.create(&path, data, Acl::open_unsafe(), mode).unwrap(),
            path
        );
        under.expect_reconnected();
        let (read, stat) = rzk.get_data(&path, false).unwrap();
        assert_eq!(read, data);
        assert_eq!(stat.version, 0, "created once");
        assert_eq!(stat.ephemeral_owner != 0, mode.is_ephemeral());
        assert!(written_by_us(&zk.get_data(&path, false).unwrap().0));
    }
    assert_eq!(zk.get_children(&root, false).unwrap().len(), 3);
}

#[test]
fn create_node_exists_on_the_first_attempt_is_an_error() {
    init_log();
    let (_zk, root) = setup_root(&test_servers(), "create_first");
    let under = Under::on(&test_servers(), fast_retry());
    let path = format!("{root}/n");
    let rzk = &under.rzk;
    rzk.create(&path, b"ours", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    // Even our own earlier node: NodeExists on a first attempt is the error.
    assert_code(
        rzk.create(&path, b"ours", Acl::open_unsafe(), CreateMode::Persistent),
        ZkError::NodeExists,
    );
    under.expect_no_reconnect();
}

#[test]
fn create_node_exists_on_a_retry_with_another_writers_data_is_an_error() {
    init_log();
    let (zk, root) = setup_root(&local(), "create_theirs");
    let split = Split::start();
    let path = format!("{root}/n");
    let (watcher, created) = node_events();
    assert_eq!(zk.exists_w(&path, watcher).unwrap(), None);

    split
        .under
        .rzk
        .zookeeper()
        .lose_next_reply(ReplyKind::Create);
    let rzk = split.under.rzk.clone();
    let creator = {
        let path = path.clone();
        thread::spawn(move || {
            rzk.create(&path, b"ours", Acl::open_unsafe(), CreateMode::Persistent)
        })
    };
    // Our create landed, its reply was lost ...
    let e = created.recv_timeout(WAIT).expect("our create lands");
    assert_eq!(e.event_type, EventType::NodeCreated);
    // ... another session deletes it and creates its own before the retry ...
    zk.delete(&path, None).unwrap();
    zk.create(&path, b"theirs", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    split.heal();
    // ... so the retry's NodeExists is someone else's node: the error.
    assert_code(creator.join().unwrap(), ZkError::NodeExists);
    assert_eq!(zk.get_data(&path, false).unwrap().0, b"theirs");
}

/// The creator tag of a node `create` made from `prefix`: the name is
/// `<prefix><16 lowercase hex digits>-<ZooKeeper's 10-digit sequence>`.
fn creator_tag<'a>(name: &'a str, prefix: &str) -> &'a str {
    let rest = name
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{name} does not start with {prefix}"));
    assert_eq!(rest.len(), 16 + 1 + 10, "{name}: <tag>-<sequence> expected");
    let (tag, sequence) = rest.split_at(16);
    let sequence = sequence
        .strip_prefix('-')
        .unwrap_or_else(|| panic!("{name}: no - after the tag"));
    assert!(
        tag.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{name}: tag {tag:?}"
    );
    assert!(sequence.bytes().all(|b| b.is_ascii_digit()), "{name}");
    tag
}

#[test]
fn sequential_create_whose_reply_was_lost_adopts_its_one_node() {
    init_log();
    let (zk, root) = setup_root(&test_servers(), "sequential_lost");
    let under = Under::on(&test_servers(), fast_retry());
    let rzk = &under.rzk;
    let prefix = format!("{root}/write-");
    let mut tags = HashSet::new();
    for (i, mode) in [
        CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential,
    ]
    .into_iter()
    .enumerate()
    {
        rzk.zookeeper().lose_next_reply(ReplyKind::Create);
        let path = rzk
            .create(&prefix, b"ours", Acl::open_unsafe(), mode)
            .unwrap();
        under.expect_reconnected();
        // Exactly one new node, and it is the one returned.
        let children = zk.get_children(&root, false).unwrap();
        assert_eq!(children.len(), i + 1, "{children:?}");
        let name = path.rsplit('/').next().unwrap();
        assert!(children.iter().any(|c| c == name), "{path} in {children:?}");
        assert!(tags.insert(creator_tag(name, "write-").to_owned()));
        let (data, stat) = rzk.get_data(&path, false).unwrap();
        assert_eq!(data, b"ours");
        assert_eq!(stat.ephemeral_owner != 0, mode.is_ephemeral());
    }
    // Without a loss: another tag, another node.
    let path = rzk
        .create(
            &prefix,
            b"",
            Acl::open_unsafe(),
            CreateMode::PersistentSequential,
        )
        .unwrap();
    assert!(tags.insert(creator_tag(path.rsplit('/').next().unwrap(), "write-").to_owned()));
    assert_eq!(zk.get_children(&root, false).unwrap().len(), 3);
}

#[test]
fn concurrent_sequential_creates_with_lost_replies_never_adopt_each_others_node() {
    init_log();
    const THREADS: usize = 4;
    const ROUNDS: usize = 8;
    let (zk, root) = setup_root(&test_servers(), "sequential_concurrent");
    let under = Under::on(&test_servers(), fast_retry());
    let prefix = format!("{root}/write-");
    let mut created: Vec<(String, String)> = Vec::new();
    for round in 0..ROUNDS {
        // One lost reply per round: it drops the connection under every thread's
        // call in flight, so several threads of one session retry at once.
        under.rzk.zookeeper().lose_next_reply(ReplyKind::Create);
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (rzk, prefix, barrier) =
                    (under.rzk.clone(), prefix.clone(), Arc::clone(&barrier));
                thread::spawn(move || {
                    let data = format!("round {round} thread {t}");
                    barrier.wait();
                    let path = rzk
                        .create(
                            &prefix,
                            data.as_bytes(),
                            Acl::open_unsafe(),
                            CreateMode::EphemeralSequential,
                        )
                        .unwrap();
                    (path, data)
                })
            })
            .collect();
        created.extend(handles.into_iter().map(|h| h.join().unwrap()));
        under.expect_reconnected();
    }
    // One node per call, each returned to exactly one caller, holding its data.
    let paths: HashSet<&str> = created.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths.len(), THREADS * ROUNDS, "two calls adopted one node");
    let children = zk.get_children(&root, false).unwrap();
    assert_eq!(
        children.len(),
        THREADS * ROUNDS,
        "a call left a second node"
    );
    for (path, data) in &created {
        assert_eq!(under.rzk.get_data(path, false).unwrap().0, data.as_bytes());
    }
}

// ---------------------------------------------------------------------------
// The retry budget
// ---------------------------------------------------------------------------

/// A handle behind a proxy whose calls time out after 150 ms.
fn behind_proxy(retry: RetryConfig) -> (Under, FaultProxy) {
    let proxy = FaultProxy::start(local()).unwrap();
    let under = Under::connect(
        ZooKeeper::builder(&proxy.connect_string())
            .with_session_timeout(SESSION)
            .with_request_timeout(ms(150)),
        retry,
    );
    (under, proxy)
}

#[test]
fn retries_exhausted_return_the_last_error_after_exactly_the_configured_calls() {
    init_log();
    let (zk, root) = setup_root(&local(), "exhausted");
    for retries in [0u32, 1, 3] {
        let retry = RetryConfig::default()
            .with_max_attempts(retries)
            .with_sleep_interval(ms(10))
            .with_backoff_policy(BackoffPolicy::Fixed);
        let (under, proxy) = behind_proxy(retry);
        let rzk = &under.rzk;
        let parent = format!("{root}/r{retries}");
        let node = format!("{parent}/data");
        zk.create(&parent, b"", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        zk.create(&node, b"", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();

        // A partition: every call is sent, held by the proxy, and times out
        // (OperationTimeout, retryable). The connection survives: the session
        // timeout is far longer than the calls.
        proxy.stall();
        let started = Instant::now();
        let multi = rzk.multi(&[Op::create(
            format!("{parent}/call-"),
            b"",
            CreateMode::PersistentSequential,
        )]);
        let set = rzk.set_data(&node, b"x", None);
        let elapsed = started.elapsed();
        assert_code(multi, ZkError::OperationTimeout);
        assert_code(set, ZkError::OperationTimeout);
        let calls = retries as usize + 1;
        assert!(
            elapsed >= 2 * (ms(150) * calls as u32 + ms(10) * retries),
            "{elapsed:?}"
        );
        // Heal: the held calls reach the server in order. A call after them
        // returns once they are applied, so the server's state counts the calls:
        // each multi made one sequential child, each setData one version.
        proxy.pass();
        rzk.sync(&parent).unwrap();
        let children = zk.get_children(&parent, false).unwrap();
        assert_eq!(
            children.iter().filter(|c| c.starts_with("call-")).count(),
            calls,
            "{retries} retries: {children:?}"
        );
        assert_eq!(
            zk.exists(&node, false).unwrap().unwrap().version,
            calls as i32
        );
        under.expect_no_reconnect();
    }
}

#[test]
fn session_expired_is_never_retried() {
    init_log();
    let (zk, root) = setup_root(&local(), "expired");
    // A retry would sleep 5 s first: a fast SessionExpired proves there was none.
    let retry = RetryConfig::default().with_sleep_interval(Duration::from_secs(5));
    let proxy = FaultProxy::start(local()).unwrap();
    let under = Under::connect(
        ZooKeeper::builder(&proxy.connect_string()).with_session_timeout(Duration::from_secs(1)),
        retry,
    );
    let rzk = &under.rzk;
    let owned = format!("{root}/ephemeral");
    rzk.create(&owned, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    // Partition until the server expires the session (it deletes the ephemeral),
    // then heal: the client learns it is expired.
    proxy.stall();
    wait_until(WAIT, "the server expires the session", || {
        zk.exists(&owned, false).unwrap().is_none()
    });
    proxy.reset();
    under.expect_state(KeeperState::Expired);
    assert_eq!(rzk.state(), State::Expired);

    let path = format!("{root}/n");
    let started = Instant::now();
    assert_code(rzk.exists(&path, false), ZkError::SessionExpired);
    assert_code(rzk.get_data(&path, false), ZkError::SessionExpired);
    assert_code(rzk.delete(&path, None), ZkError::SessionExpired);
    assert_code(rzk.set_data(&path, b"", None), ZkError::SessionExpired);
    assert_code(
        rzk.create(&path, b"", Acl::open_unsafe(), CreateMode::Persistent),
        ZkError::SessionExpired,
    );
    assert_code(
        rzk.create(
            &path,
            b"",
            Acl::open_unsafe(),
            CreateMode::EphemeralSequential,
        ),
        ZkError::SessionExpired,
    );
    assert_code(
        rzk.multi(&[Op::check(&path, None)]),
        ZkError::SessionExpired,
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------
// multi
// ---------------------------------------------------------------------------

#[test]
fn multi_is_retried_as_a_whole() {
    init_log();
    let (zk, root) = setup_root(&test_servers(), "multi");
    let under = Under::on(&test_servers(), fast_retry());
    let rzk = &under.rzk;

    // A create whose reply was lost: the retry fails with NodeExists although
    // the node is ours (multi has no read-back rule).
    let path = format!("{root}/created");
    rzk.zookeeper().lose_next_reply(ReplyKind::Multi);
    match rzk.multi(&[Op::create(&path, b"ours", CreateMode::Persistent)]) {
        Err(Error::Multi {
            index: 0,
            code: ZkError::NodeExists,
            ..
        }) => {}
        other => panic!("expected Multi NodeExists at 0, got {other:?}"),
    }
    under.expect_reconnected();
    assert_eq!(rzk.get_data(&path, false).unwrap().0, b"ours");
    assert!(written_by_us(&zk.get_data(&path, false).unwrap().0));

    // A setData without a version whose reply was lost: applied twice.
    rzk.zookeeper().lose_next_reply(ReplyKind::Multi);
    let results = rzk.multi(&[Op::set_data(&path, b"again", None)]).unwrap();
    under.expect_reconnected();
    let stat = match results.as_slice() {
        [OpResult::SetData { stat }] => *stat,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        stat.version, 2,
        "the lost attempt and the retry both applied"
    );
    assert_eq!(rzk.get_data(&path, false).unwrap().0, b"again");

    // Guarded by a version check: the retry fails (BadVersion at the check)
    // although the lost attempt was applied once.
    rzk.zookeeper().lose_next_reply(ReplyKind::Multi);
    match rzk.multi(&[
        Op::check(&path, Some(2)),
        Op::set_data(&path, b"guarded", None),
    ]) {
        Err(Error::Multi {
            index: 0,
            code: ZkError::BadVersion,
            ..
        }) => {}
        other => panic!("expected Multi BadVersion at 0, got {other:?}"),
    }
    under.expect_reconnected();
    let (data, stat) = rzk.get_data(&path, false).unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"guarded"[..], 3));

    // A delete whose reply was lost: the retry fails with NoNode, the node is
    // gone (unlike `delete`, which calls that success).
    rzk.zookeeper().lose_next_reply(ReplyKind::Multi);
    match rzk.multi(&[Op::delete(&path, None)]) {
        Err(Error::Multi {
            index: 0,
            code: ZkError::NoNode,
            ..
        }) => {}
        other => panic!("expected Multi NoNode at 0, got {other:?}"),
    }
    under.expect_reconnected();
    assert_eq!(zk.exists(&path, false).unwrap(), None);
}

// ---------------------------------------------------------------------------
// The metadata prefix
// ---------------------------------------------------------------------------

#[test]
fn get_data_strips_the_metadata_and_leaves_raw_data_unchanged() {
    init_log();
    let (zk, root) = setup_root(&test_servers(), "metadata");
    let under = Under::on(&test_servers(), fast_retry());
    let rzk = &under.rzk;

    let path = format!("{root}/prefixed");
    rzk.create(
        &path,
        b"payload",
        Acl::open_unsafe(),
        CreateMode::Persistent,
    )
    .unwrap();
    let (stored, _) = zk.get_data(&path, false).unwrap();
    assert_eq!(stored[0], 0xFF);
    assert!(written_by_us(&stored));
    assert!(stored.ends_with(b"payload"));
    assert_eq!(rzk.get_raw_data(&path).unwrap().0, stored);
    assert_eq!(rzk.get_data(&path, false).unwrap().0, b"payload");
    rzk.set_data(&path, b"second", None).unwrap();
    assert_eq!(rzk.get_data(&path, false).unwrap().0, b"second");
    let (watcher, _events) = node_events();
    let watcher: Arc<dyn zklock::client::Watcher> = Arc::new(watcher);
    assert_eq!(rzk.get_data_watch(&path, &watcher).unwrap().0, b"second");

    // Data written without the prefix (another client, HBase-unaware) reads back
    // unchanged, including bytes that merely start like a prefix.
    let cases: [&[u8]; 5] = [b"plain", b"", &[0xFF], &[0xFF, 0, 0, 0, 9, 1], &[0, 0xFF]];
    for (i, data) in cases.into_iter().enumerate() {
        let path = format!("{root}/raw{i}");
        zk.create(&path, data, Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        assert_eq!(rzk.get_data(&path, false).unwrap().0, data, "{data:?}");
    }
}

// ---------------------------------------------------------------------------
// Without HBase's metadata prefix (issue 24)
// ---------------------------------------------------------------------------

/// `with_metadata_prefix(false)`: a plain reader reads exactly the bytes
/// written, and the retry rules still recognise a write whose reply was lost
/// (same bytes; for an ephemeral node, this session; for a versioned
/// `set_data`, the next version).
#[test]
fn without_the_metadata_prefix_plain_readers_read_the_value_and_lost_replies_still_succeed() {
    init_log();
    let (zk, root) = setup_root(&test_servers(), "no_metadata");
    let under = Under::on(&test_servers(), fast_retry());
    let rzk = under.rzk.with_metadata_prefix(false);
    assert!(!rzk.metadata_prefix() && under.rzk.metadata_prefix());
    for (name, mode) in [("p", CreateMode::Persistent), ("e", CreateMode::Ephemeral)] {
        let path = format!("{root}/{name}");
        rzk.zookeeper().lose_next_reply(ReplyKind::Create);
        assert_eq!(
            rzk.create(&path, b"plain", Acl::open_unsafe(), mode)
                .unwrap(),
            path
        );
        under.expect_reconnected();
        let (raw, stat) = zk.get_data(&path, false).unwrap();
        assert_eq!(raw, b"plain", "no prefix for a plain reader");
        assert_eq!(stat.version, 0, "created once");
    }
    let path = format!("{root}/p");
    for version in 0..3 {
        let data = format!("v{}", version + 1);
        rzk.zookeeper().lose_next_reply(ReplyKind::SetData);
        let stat = rzk.set_data(&path, data.as_bytes(), Some(version)).unwrap();
        under.expect_reconnected();
        assert_eq!(stat.version, version + 1, "applied exactly once");
        assert_eq!(zk.get_data(&path, false).unwrap().0, data.as_bytes());
    }
    // The first attempt's errors are unchanged.
    assert_code(
        rzk.create(&path, b"v3", Acl::open_unsafe(), CreateMode::Persistent),
        ZkError::NodeExists,
    );
    assert_code(rzk.set_data(&path, b"x", Some(0)), ZkError::BadVersion);
    // Sequential creates and multi write the bytes as given too.
    let seq = rzk
        .create(
            &format!("{root}/s-"),
            b"seq",
            Acl::open_unsafe(),
            CreateMode::PersistentSequential,
        )
        .unwrap();
    assert_eq!(zk.get_data(&seq, false).unwrap().0, b"seq");
    rzk.multi(&[Op::create(
        format!("{root}/m"),
        &b"multi"[..],
        CreateMode::Persistent,
    )])
    .unwrap();
    assert_eq!(
        zk.get_data(&format!("{root}/m"), false).unwrap().0,
        b"multi"
    );
    // The default handle still writes HBase's prefix, and reads strip it.
    under.rzk.set_data(&path, b"hbase", None).unwrap();
    assert!(written_by_us(&zk.get_data(&path, false).unwrap().0));
    assert_eq!(rzk.get_data(&path, false).unwrap().0, b"hbase");

    // The watcher's builder option.
    let zkw = zklock::ZooKeeperWatcher::builder(&test_servers())
        .with_metadata_prefix(false)
        .connect()
        .unwrap();
    zklock::zkutil::create_and_fail_silent_data(&zkw, &format!("{root}/w"), b"config=1").unwrap();
    assert_eq!(
        zk.get_data(&format!("{root}/w"), false).unwrap().0,
        b"config=1"
    );
    zkw.close().unwrap();
    zklock::zkutil::delete_node_recursively(
        &zklock::ZooKeeperWatcher::connect(&test_servers(), "cleanup", None).unwrap(),
        &root,
    )
    .unwrap();
}

// ---------------------------------------------------------------------------
// ZooKeeper 3.6's getAllChildrenNumber and multiRead (issue 24)
// ---------------------------------------------------------------------------

/// Against the real 3.8 server: `getAllChildrenNumber` counts descendants at
/// every depth; `multiRead` answers getData and getChildren in one request,
/// a failed read among them as its own result; the `RecoverableZooKeeper`
/// forms strip the metadata prefix from the data.
#[test]
fn get_all_children_number_and_multi_read_against_the_real_server() {
    use zklock::client::{ReadOp, ReadResult};
    init_log();
    let (zk, root) = setup_root(&test_servers(), "zk36_calls");
    let under = Under::on(&test_servers(), fast_retry());
    let rzk = &under.rzk;
    assert_eq!(zk.get_all_children_number(&root).unwrap(), 0);
    for p in ["a", "a/b", "a/b/c", "d"] {
        rzk.create(
            &format!("{root}/{p}"),
            p.as_bytes(),
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .unwrap();
    }
    assert_eq!(zk.get_all_children_number(&root).unwrap(), 4);
    assert_eq!(
        rzk.get_all_children_number(&format!("{root}/a")).unwrap(),
        2
    );
    assert_code(
        zk.get_all_children_number(&format!("{root}/missing")),
        ZkError::NoNode,
    );
    assert!(matches!(
        zk.get_all_children_number("bad").unwrap_err(),
        Error::BadArguments(_)
    ));

    let ops = [
        ReadOp::get_data(format!("{root}/a")),
        ReadOp::get_children(root.clone()),
        ReadOp::get_data(format!("{root}/missing")),
        ReadOp::get_children(format!("{root}/a/b")),
    ];
    let raw = zk.multi_read(&ops).unwrap();
    assert_eq!(raw.len(), 4);
    match &raw[0] {
        ReadResult::Data { data, stat } => {
            assert!(written_by_us(data), "as stored: {data:?}");
            assert_eq!(stat.num_children, 1);
        }
        other => panic!("{other:?}"),
    }
    match &raw[1] {
        ReadResult::Children { children } => {
            let mut c = children.clone();
            c.sort();
            assert_eq!(c, ["a", "d"]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        raw[2],
        ReadResult::Error {
            code: ZkError::NoNode
        }
    );
    assert_eq!(
        raw[3],
        ReadResult::Children {
            children: vec!["c".to_string()]
        }
    );
    let stripped = rzk.multi_read(&ops).unwrap();
    assert!(matches!(&stripped[0], ReadResult::Data { data, .. } if data == b"a"));
    assert_eq!(stripped[1..], raw[1..]);
    assert!(zk.multi_read(&[]).unwrap().is_empty());
    assert!(matches!(
        zk.multi_read(&[ReadOp::get_data("no/slash")]).unwrap_err(),
        Error::BadArguments(_)
    ));
    under.expect_no_reconnect();
}
