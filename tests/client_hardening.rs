//! `zklock::client` hardening (issue 10): each test shows one failure mode of
//! the fault probe fixed, against a real ZooKeeper 3.8 behind a `FaultProxy`,
//! or a scripted fake endpoint for what a real server cannot be made to send.

mod common;

use std::io::Write;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::client::*;
use zklock::client::{Acl, CreateMode, EventType, KeeperState, State, Watcher, ZooKeeper};
use zklock::testing::{shared_server, unique_root, FaultProxy};
use zklock::ZkError;

const WAIT: Duration = Duration::from_secs(10);

fn server() -> String {
    count_client_thread_panics();
    shared_server().connect_string()
}

fn no_client_panics() {
    assert_eq!(client_thread_panics(), 0, "a client thread panicked");
}

/// A client through a fresh proxy to the shared server.
fn via_proxy(session: Duration) -> (FaultProxy, ZooKeeper, Arc<Events>) {
    let proxy = FaultProxy::start(server()).unwrap();
    let (zk, events) = connect(&proxy.connect_string(), session);
    (proxy, zk, events)
}

fn is_state(ks: KeeperState) -> impl Fn(&zklock::client::WatchedEvent) -> bool {
    move |e| e.event_type == EventType::None && e.keeper_state == ks
}

// ---------------------------------------------------------------------------
// 9. Every watcher hears the session
// ---------------------------------------------------------------------------

#[test]
fn every_registered_watcher_hears_each_session_change_once() {
    let (proxy, zk, default) = via_proxy(Duration::from_secs(4));
    let root = unique_root("every_watcher");
    mkdirs(&zk, &root);
    let (a, b) = (format!("{root}/a"), format!("{root}/b"));
    zk.create(&a, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();

    // Distinct watchers: a data watch, an exist watch on a missing node, the
    // watcher of an async call, one shared watcher on two paths (told once),
    // and the default watcher on a path (told once, as the default watcher).
    let data = Events::new();
    zk.get_data_w(&a, data.watcher()).unwrap();
    let exist = Events::new();
    assert!(zk.exists_w(&b, exist.watcher()).unwrap().is_none());
    let asynchronous = Events::new();
    let (tx, rx) = crossbeam_channel::bounded(1);
    zk.get_data_async(
        &a,
        Some(Arc::new(asynchronous.watcher()) as Arc<dyn Watcher>),
        move |r| {
            let _ = tx.send(r.is_ok());
        },
    );
    assert!(rx.recv_timeout(WAIT).unwrap());
    let shared = Events::new();
    let shared_w: Arc<dyn Watcher> = Arc::new(shared.watcher());
    zk.get_data_watch(&a, shared_w.clone()).unwrap();
    zk.exists_watch(&b, shared_w.clone()).unwrap();
    zk.exists(&a, true).unwrap();
    let custom = [&data, &exist, &asynchronous, &shared];

    // A cut: Disconnected, then SyncConnected after the reconnect.
    proxy.cut();
    for e in custom {
        e.wait_state(KeeperState::SyncConnected, 1, WAIT);
    }
    default.wait_state(KeeperState::SyncConnected, 2, WAIT);
    settle(&zk);
    for e in custom {
        assert_eq!(
            e.states(),
            [KeeperState::Disconnected, KeeperState::SyncConnected]
        );
    }
    assert_eq!(
        default.states(),
        [
            KeeperState::SyncConnected,
            KeeperState::Disconnected,
            KeeperState::SyncConnected
        ]
    );
    // Registrations stay across the reconnect.
    assert!(zk.watch_count() >= 5, "{}", zk.watch_count());

    // A stall past the session timeout: Disconnected, then Expired.
    proxy.stall();
    for e in custom {
        e.wait_state(KeeperState::Expired, 1, WAIT);
    }
    default.wait_state(KeeperState::Expired, 1, WAIT);
    thread::sleep(Duration::from_millis(200)); // deliberate: no further event must come
    for e in custom {
        assert_eq!(
            e.states(),
            [
                KeeperState::Disconnected,
                KeeperState::SyncConnected,
                KeeperState::Disconnected,
                KeeperState::Expired
            ]
        );
        assert!(e.nodes().is_empty(), "{:?}", e.nodes());
    }
    assert_eq!(default.count(is_state(KeeperState::Expired)), 1);
    assert_eq!(default.count(is_state(KeeperState::Disconnected)), 2);
    wait_until(WAIT, "the session's end drops the watches", || {
        zk.watch_count() == 0
    });
    proxy.pass();
    zk.close().unwrap();
    let (cleanup, _) = connect(&server(), Duration::from_secs(4));
    rmr(&cleanup, &root);
    no_client_panics();
}

#[test]
fn a_watcher_hears_closed_when_the_handle_is_closed() {
    let (zk, default) = connect(&server(), Duration::from_secs(4));
    let root = unique_root("closed_watcher");
    mkdirs(&zk, &root);
    let data = Events::new();
    zk.get_data_w(&root, data.watcher()).unwrap();
    zk.close().unwrap();
    data.wait_state(KeeperState::Closed, 1, WAIT);
    default.wait_state(KeeperState::Closed, 1, WAIT);
    assert_eq!(data.states(), [KeeperState::Closed]);
    let (cleanup, _) = connect(&server(), Duration::from_secs(4));
    rmr(&cleanup, &root);
}

// ---------------------------------------------------------------------------
// 6. A failed write is a disconnect at once
// ---------------------------------------------------------------------------

const FAKE_SESSION: i64 = 0x5e55_1010_0000_0006;

/// A fake server whose first connection never reads after the handshake (the
/// client's writes fill the buffers and time out) but keeps sending ping
/// replies (the connection thread keeps hearing it); later connections serve well.
fn deaf_then_well() -> FakeServer {
    FakeServer::start(|n, mut s| {
        if fake_handshake(&mut s, FAKE_SESSION).is_err() {
            return;
        }
        if n == 0 {
            let until = Instant::now() + Duration::from_secs(8);
            while Instant::now() < until {
                if s.write_all(&reply(-2, 1, 0, &[])).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(100)); // deliberate pacing
            }
            return;
        }
        fake_serve_well(s);
    })
}

#[test]
fn callers_behind_a_failed_write_wait_for_the_reconnect_instead_of_failing() {
    init_log();
    count_client_thread_panics();
    let fake = deaf_then_well();
    let zk = ZooKeeper::builder(&fake.addr)
        .with_session_timeout(Duration::from_secs(3))
        .with_connect_wait(Duration::from_secs(6))
        .connect(|_e: zklock::client::WatchedEvent| {})
        .unwrap();
    // Writers fill the buffers of the deaf connection; one of them blocks in a
    // write holding the writer lock until its write timeout (1 s) fails it.
    let big = vec![7u8; 900 * 1024];
    let writers: Vec<_> = (0..12)
        .map(|i| {
            let (zk, big) = (zk.clone(), big.clone());
            thread::spawn(move || {
                let _ = zk.set_data(&format!("/big{i}"), &big, None);
            })
        })
        .collect();
    // Deliberate: the writes stay blocked a while; the state must not move.
    thread::sleep(Duration::from_millis(400));
    assert_eq!(zk.state(), State::Connected);
    // These queue behind the blocked write. When it fails they must wait for
    // the reconnect and go through, not fail at once with ConnectionLoss.
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let zk = zk.clone();
            thread::spawn(move || {
                let t = Instant::now();
                (zk.exists("/x", false), t.elapsed())
            })
        })
        .collect();
    for r in readers {
        let (result, took) = r.join().unwrap();
        match result {
            Ok(Some(stat)) => assert_eq!(stat.version, 42),
            other => panic!("after {took:?}: {other:?}"),
        }
    }
    assert!(fake.accepted() >= 2, "reconnected");
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(zk.session_id(), FAKE_SESSION);
    zk.close().unwrap();
    no_client_panics();
}

#[test]
fn a_failed_write_makes_the_state_connecting_at_once() {
    init_log();
    count_client_thread_panics();
    // One writer blocks on the deaf connection; when its write times out it
    // gets ConnectionLoss, and at that moment the client must not say
    // Connected (the connection thread has not necessarily noticed yet).
    let fake = FakeServer::start(|n, mut s| {
        if n > 0 {
            // Later connections: a server that takes a while to answer, so a
            // quick reconnect cannot hide a wrong state (deliberate).
            thread::sleep(Duration::from_millis(1500));
        }
        if fake_handshake(&mut s, FAKE_SESSION).is_err() {
            return;
        }
        if n == 0 {
            let until = Instant::now() + Duration::from_secs(8);
            while Instant::now() < until {
                if s.write_all(&reply(-2, 1, 0, &[])).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(100)); // deliberate pacing
            }
            return;
        }
        fake_serve_well(s);
    });
    let zk = ZooKeeper::builder(&fake.addr)
        .with_session_timeout(Duration::from_secs(3))
        .connect(|_e: zklock::client::WatchedEvent| {})
        .unwrap();
    let big = vec![7u8; 900 * 1024];
    let writers: Vec<_> = (0..12)
        .map(|i| {
            let (zk, big) = (zk.clone(), big.clone());
            thread::spawn(move || {
                let r = zk.set_data(&format!("/big{i}"), &big, None);
                let state = zk.state();
                (r, state)
            })
        })
        .collect();
    let mut lost = 0;
    for w in writers {
        let (r, state) = w.join().unwrap();
        if matches!(&r, Err(e) if e.is(ZkError::ConnectionLoss)) {
            lost += 1;
            assert_ne!(
                state,
                State::Connected,
                "a call failed on a dead connection"
            );
        }
    }
    assert!(lost > 0, "no write failed");
    zk.close().unwrap();
    no_client_panics();
}

// ---------------------------------------------------------------------------
// 1. Disconnected does not wait for a blocked writer
// ---------------------------------------------------------------------------

#[test]
fn disconnected_comes_at_the_read_timeout_whatever_the_writers_do() {
    let session = Duration::from_secs(6);
    let (proxy, zk, events) = via_proxy(session);
    disconnected_at_the_read_timeout_with_writers_blocked(&zk, &proxy, &events, session);
    zk.close().unwrap();
    no_client_panics();
}

// ---------------------------------------------------------------------------
// 3. The last zxid seen comes only from validated replies
// ---------------------------------------------------------------------------

#[test]
fn a_bad_header_or_a_notification_does_not_move_the_last_zxid() {
    init_log();
    count_client_thread_panics();
    let reconnect_zxids = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = reconnect_zxids.clone();
    let fake = FakeServer::start(move |n, mut s| {
        let Ok((zxid, _, _)) = fake_handshake(&mut s, FAKE_SESSION) else {
            return;
        };
        if n == 0 {
            let Ok((xid, _)) = fake_next_request(&mut s) else {
                return;
            };
            // A notification from "the future", then a reply to another xid,
            // also from the future.
            let mut body = Vec::new();
            put_i32(&mut body, 3);
            put_i32(&mut body, 3);
            put_buffer(&mut body, b"/elsewhere");
            let _ = s.write_all(&reply(-1, 1 << 41, 0, &body));
            let _ = s.write_all(&reply(xid + 100, 1 << 40, 0, &stat_bytes(1)));
            thread::sleep(Duration::from_secs(2)); // deliberate: hold the socket
            return;
        }
        seen.lock().unwrap().push(zxid);
        fake_serve_well(s);
    });
    let zk = ZooKeeper::builder(&fake.addr)
        .with_session_timeout(Duration::from_secs(3))
        .connect(|_e: zklock::client::WatchedEvent| {})
        .unwrap();
    assert_code(zk.exists("/x", false), ZkError::ConnectionLoss);
    assert!(zk.last_zxid_seen() < 1 << 40, "{:#x}", zk.last_zxid_seen());
    assert_eq!(zk.exists("/x", false).unwrap().unwrap().version, 42);
    assert_eq!(zk.last_zxid_seen(), 5, "from the validated reply");
    let zxids = reconnect_zxids.lock().unwrap().clone();
    assert_eq!(
        zxids,
        [0],
        "the reconnect's ConnectRequest carried a bad zxid"
    );
    zk.close().unwrap();
    no_client_panics();
}

// ---------------------------------------------------------------------------
// 2. Frame length limits like Java's (jute.maxbuffer)
// ---------------------------------------------------------------------------

/// A fake whose first connection answers the first request with `bad`, then
/// serves well (or holds the socket, answering pings, when `hold`); later
/// connections serve well. Returns it and the session ids it saw connect.
fn fake_answering(
    bad: impl Fn(&mut std::net::TcpStream, i32) + Send + Sync + 'static,
    hold: bool,
) -> (FakeServer, Arc<std::sync::Mutex<Vec<i64>>>) {
    let ids = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = ids.clone();
    let fake = FakeServer::start(move |n, mut s| {
        let Ok((_, _, id)) = fake_handshake(&mut s, FAKE_SESSION) else {
            return;
        };
        seen.lock().unwrap().push(id);
        if n == 0 {
            let Ok((xid, _)) = fake_next_request(&mut s) else {
                return;
            };
            bad(&mut s, xid);
            if hold {
                // Answer pings (the session stays alive server-side).
                while fake_next_request(&mut s).is_ok() {}
                return;
            }
        }
        fake_serve_well(s);
    });
    (fake, ids)
}

/// A well-formed exists reply padded to `total` bytes of frame body.
fn padded_reply(xid: i32, total: usize) -> Vec<u8> {
    let mut body = Vec::new();
    put_i32(&mut body, xid);
    put_i64(&mut body, 5);
    put_i32(&mut body, 0);
    body.extend_from_slice(&stat_bytes(42));
    body.resize(total, 0);
    frame(&body)
}

#[test]
fn a_frame_over_the_max_buffer_resets_the_connection_and_keeps_the_session() {
    init_log();
    count_client_thread_panics();
    let (fake, ids) = fake_answering(
        |s, xid| {
            let _ = s.write_all(&padded_reply(xid, 2 << 20));
        },
        false,
    );
    let events = Events::new();
    let zk = ZooKeeper::builder(&fake.addr)
        .with_session_timeout(Duration::from_secs(3))
        .connect(events.watcher())
        .unwrap();
    assert_code(zk.exists("/x", false), ZkError::ConnectionLoss);
    assert_eq!(zk.exists("/x", false).unwrap().unwrap().version, 42);
    // The fake notes an id just after answering the handshake: wait for it.
    zklock::testing::wait_until(WAIT, "the fake to note both sessions", || {
        ids.lock().unwrap().len() >= 2
    });
    assert_eq!(*ids.lock().unwrap(), [0, FAKE_SESSION], "same session");
    zk.close().unwrap();

    // Raised like jute.maxbuffer, the same frame is a normal reply.
    let (fake, ids) = fake_answering(
        |s, xid| {
            let _ = s.write_all(&padded_reply(xid, 2 << 20));
        },
        false,
    );
    let zk = ZooKeeper::builder(&fake.addr)
        .with_session_timeout(Duration::from_secs(3))
        .with_max_buffer(4 << 20)
        .connect(|_e: zklock::client::WatchedEvent| {})
        .unwrap();
    assert_eq!(zk.exists("/x", false).unwrap().unwrap().version, 42);
    assert_eq!(*ids.lock().unwrap(), [0], "no reconnect");
    zk.close().unwrap();
    no_client_panics();
}

#[test]
fn a_corrupted_length_in_range_does_not_wedge_the_handle() {
    init_log();
    count_client_thread_panics();
    // 30 MB (under the old 64 MB cap) and 500 KB (under jute.maxbuffer): the
    // client waits for bytes that never come while ping replies trickle in.
    for len in [30i32 << 20, 500 << 10] {
        let (fake, ids) = fake_answering(
            move |s, _| {
                let _ = s.write_all(&len.to_be_bytes());
            },
            true,
        );
        let zk = ZooKeeper::builder(&fake.addr)
            .with_session_timeout(Duration::from_secs(3))
            .connect(|_e: zklock::client::WatchedEvent| {})
            .unwrap();
        let t = Instant::now();
        assert_code(zk.exists("/x", false), ZkError::ConnectionLoss);
        // The read timeout (2 s) at the latest, not the request timeout (6 s).
        assert!(
            t.elapsed() < Duration::from_millis(2800),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(zk.exists("/x", false).unwrap().unwrap().version, 42);
        // The fake notes an id just after answering the handshake: wait for it.
        zklock::testing::wait_until(WAIT, "the fake to note both sessions", || {
            ids.lock().unwrap().len() >= 2
        });
        assert_eq!(*ids.lock().unwrap(), [0, FAKE_SESSION], "same session");
        zk.close().unwrap();
    }
    no_client_panics();
}

// ---------------------------------------------------------------------------
// 4. A short handshake bound per attempt, as a total deadline
// ---------------------------------------------------------------------------

/// One host; its first connection serves one request and closes; the second
/// runs `stuck` (a server in its start-up window); later ones serve well. The
/// client (10 s session) must be back well within the session, on it.
fn reconnect_past_a_stuck_handshake(stuck: fn(std::net::TcpStream)) {
    init_log();
    count_client_thread_panics();
    let (fake, ids) = {
        let ids = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = ids.clone();
        let fake = FakeServer::start(move |n, mut s| {
            if n == 1 {
                return stuck(s);
            }
            let Ok((_, _, id)) = fake_handshake(&mut s, FAKE_SESSION) else {
                return;
            };
            seen.lock().unwrap().push(id);
            if n == 0 {
                if let Ok((xid, _)) = fake_next_request(&mut s) {
                    let _ = s.write_all(&reply(xid, 5, 0, &stat_bytes(1)));
                }
                return;
            }
            fake_serve_well(s);
        });
        (fake, ids)
    };
    let events = Events::new();
    let zk = ZooKeeper::builder(&fake.addr)
        .with_session_timeout(Duration::from_secs(10))
        .connect(events.watcher())
        .unwrap();
    assert_eq!(zk.session_timeout(), Duration::from_secs(10));
    let dropped = Instant::now();
    zk.exists("/x", false).unwrap();
    events.wait_state(KeeperState::SyncConnected, 2, WAIT);
    let back = dropped.elapsed();
    assert!(
        back < Duration::from_millis(3500),
        "back after {back:?} (default handshake timeout 2 s)"
    );
    assert!(fake.accepted() >= 3);
    // The fake notes an id just after answering the handshake: wait for it.
    zklock::testing::wait_until(WAIT, "the fake to note both sessions", || {
        ids.lock().unwrap().len() >= 2
    });
    assert_eq!(*ids.lock().unwrap(), [0, FAKE_SESSION], "same session");
    assert_eq!(zk.exists("/x", false).unwrap().unwrap().version, 42);
    assert_eq!(events.count(is_state(KeeperState::Expired)), 0);
    zk.close().unwrap();
    no_client_panics();
}

#[test]
fn a_silent_server_costs_one_handshake_timeout_not_the_session() {
    reconnect_past_a_stuck_handshake(|s| {
        // Accepts, never answers (ZooKeeper 3.8 starting up): deliberate.
        thread::sleep(Duration::from_secs(12));
        drop(s);
    });
}

#[test]
fn a_trickling_server_cannot_stretch_a_handshake() {
    reconnect_past_a_stuck_handshake(|mut s| {
        if read_frame(&mut s).is_err() {
            return;
        }
        // A valid ConnectResponse, one byte every 300 ms (about 13 s).
        for b in connect_response(10_000, FAKE_SESSION) {
            if s.write_all(&[b]).is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(300)); // deliberate trickle
        }
        thread::sleep(Duration::from_secs(2)); // deliberate: hold the socket
    });
}

/// A live server slower than the handshake timeout (a restarted JVM's first
/// TLS handshakes on a loaded machine): each attempt that a server accepted
/// and ran out of time in doubles the next one's bound, up to Java's
/// per-attempt bound. Forced with a real server behind a proxy that delays
/// every byte 1.2 s each way: a handshake takes 2.4 s, past the default 2 s.
/// Before, every attempt ended at 2 s, a moment before its answer, and the
/// client never connected.
#[test]
fn a_server_slower_than_the_handshake_timeout_gets_longer_attempts() {
    init_log();
    let proxy = FaultProxy::start(server().as_str()).unwrap();
    proxy.delay(Duration::from_millis(1200));
    let zk = ZooKeeper::builder(&proxy.connect_string())
        .with_session_timeout(Duration::from_secs(20))
        .connect(|_e: zklock::client::WatchedEvent| {})
        .unwrap();
    zk.wait_connected(Duration::from_secs(30)).unwrap();
    assert!(proxy.accepted() >= 2, "the first attempt ran out of time");
    assert!(zk.exists("/", false).unwrap().is_some());
    // close() bounds its wait for the server's answer well below 2.4 s.
    proxy.pass();
    zk.close().unwrap();
}

// ---------------------------------------------------------------------------
// 7. Ping replies are timed: a one-way partition is a dead connection
// ---------------------------------------------------------------------------

#[test]
fn a_one_way_partition_with_notifications_flowing_is_found_before_the_session_ends() {
    // The client finds the dead link at most 5/6 of the session after the
    // server last heard it, and must reconnect in the sixth left: at 6 s
    // that was 1 s, which a loaded make test missed by 20 ms (the server's
    // log: expired at 47.815, the reconnect at 47.835). 10 s leaves 1.7 s.
    let session = Duration::from_secs(10);
    let (proxy, zk, events) = via_proxy(session);
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("one_way");
    mkdirs(&other, &root);
    one_way_partition_with_notifications_flowing(&zk, &events, &other, &proxy, &root, session);
    zk.exists("/", false).unwrap();
    assert_eq!(events.count(is_state(KeeperState::Expired)), 0);
    zk.close().unwrap();
    rmr(&other, &root);
    no_client_panics();
}

// ---------------------------------------------------------------------------
// 5. After a local expiry the client closes the session on the server
// ---------------------------------------------------------------------------

/// The outcome is decided by construction, not by timing: the proxy cuts the
/// handle off both ways, and a second handle (a twin, through a proxy of its
/// own) attached to the same session (id and password) with a 30 s session
/// timeout keeps the session alive on the server. Nothing of the first handle
/// reaches the server while it is cut off; the twin is cut off in turn just
/// before the heal (it neither pings nor takes the session back any more, and
/// the server holds the session 20 s or more after its last ping). Once the
/// first handle's link heals, only its close of the locally expired session
/// can end the session before the test ends.
#[test]
fn a_locally_expired_session_is_closed_on_the_server_when_it_is_reachable() {
    let session = Duration::from_secs(4);
    let (proxy, zk, events) = via_proxy(session);
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("reap");
    mkdirs(&other, &root);
    let node = format!("{root}/eph");
    zk.create(&node, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    let seen = Events::new();
    assert!(other.exists_w(&node, seen.watcher()).unwrap().is_some());

    // The client hears nothing and the server hears nothing of it; the twin
    // takes the session over on the server and holds it for 30 s after each
    // of its pings (one every 10 s), past the client's expiry. (The server
    // closes the client's connection then; the stalled proxy holds that end
    // of the stream, as it holds the client's reconnects.)
    proxy.stall();
    let twin_proxy = FaultProxy::start(server()).unwrap();
    let twin_events = Events::new();
    let twin = ZooKeeper::connect_with_session(
        &twin_proxy.connect_string(),
        Duration::from_secs(30),
        twin_events.watcher(),
        zk.session_id(),
        &zk.session_password(),
    )
    .unwrap();
    events.wait_state(KeeperState::Expired, 1, WAIT);
    assert!(
        other.exists(&node, false).unwrap().is_some(),
        "the server still holds the session"
    );
    assert_eq!(twin.state(), State::Connected);
    // The twin cut off: when the first handle's connect request takes the
    // session back (the server closes the twin's connection), nothing the
    // twin sends reaches the server, so it cannot take the session back in
    // turn.
    twin_proxy.stall();
    let trips = proxy.round_trips();
    proxy.reset();
    let healed = Instant::now();
    // The first handle's close is the only thing that can end the session.
    seen.wait_node(EventType::NodeDeleted, &node, 1, WAIT);
    let gone = healed.elapsed();
    // One request through the healed link: the closeSession (connect
    // requests are not counted).
    assert_eq!(proxy.round_trips() - trips, 1, "requests after the heal");
    // The server alone would have held the session 20 s or more.
    assert!(
        gone < Duration::from_secs(10),
        "the ephemeral node went {gone:?} after the heal"
    );
    // The twin, reachable again, finds its session ended.
    twin_proxy.pass();
    twin_events.wait_state(KeeperState::Expired, 1, WAIT);
    // Nothing is told to the dead handle's watcher after Expired (deliberate
    // sleep: nothing to wait for).
    thread::sleep(Duration::from_millis(200));
    assert_eq!(
        events.states(),
        [
            KeeperState::SyncConnected,
            KeeperState::Disconnected,
            KeeperState::Expired
        ]
    );
    let t = Instant::now();
    zk.close().unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    twin.close().unwrap();
    rmr(&other, &root);
    no_client_panics();
}

/// Through a dead link (nothing reaches the server), `close()` after a
/// local expiry cannot hear the server: it gives up at its bound (2/3 of the
/// session timeout) with `ConnectionLoss`, however long the background close
/// would have tried.
#[test]
fn close_after_a_local_expiry_through_a_dead_link_is_bounded_and_an_error() {
    let session = Duration::from_secs(2);
    let (proxy, zk, events) = via_proxy(session);
    proxy.stall();
    events.wait_state(KeeperState::Expired, 1, WAIT);
    // The connection thread is trying to close the session through a dead link
    // (deliberate: no event marks it).
    thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let e = zk.close().expect_err("close() heard no server");
    assert_eq!(e.code(), Some(ZkError::ConnectionLoss), "{e}");
    // The bound is 1.33 s; slack for a loaded machine.
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    drop(proxy);
    no_client_panics();
}

// ---------------------------------------------------------------------------
// 8. A stuck watcher: the queue grows (documented), the session stays correct
// ---------------------------------------------------------------------------

#[test]
fn a_stuck_watcher_never_blocks_the_connection_thread() {
    let (zk, _events) = connect(&server(), Duration::from_secs(4));
    let root = unique_root("stuck");
    mkdirs(&zk, &root);
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
    let stuck = move |_e: zklock::client::WatchedEvent| {
        let _ = release_rx.recv_timeout(Duration::from_secs(20));
    };
    zk.add_watch_w(
        &root,
        zklock::client::AddWatchMode::PersistentRecursive,
        stuck,
    )
    .unwrap();
    let n = 300;
    for i in 0..n {
        zk.set_data(&root, format!("{i}").as_bytes(), None).unwrap();
    }
    // The connection thread went on: calls answered, events queued.
    assert_eq!(zk.state(), State::Connected);
    wait_until(WAIT, "events queued behind the stuck watcher", || {
        zk.queued_events() >= n - 2
    });
    drop(release_tx); // unblocks the watcher for good
    wait_until(WAIT, "the queue drains", || zk.queued_events() == 0);
    zk.close().unwrap();
    let (cleanup, _) = connect(&server(), Duration::from_secs(4));
    rmr(&cleanup, &root);
}

// ---------------------------------------------------------------------------
// Asynchronous calls never wait for a blocked writer (found in review)
// ---------------------------------------------------------------------------

mod deferred_async {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::{Duration, Instant};

    use zklock::client::{Acl, CreateMode, WatchedEvent, ZooKeeper};
    use zklock::testing::{shared_server, unique_root, wait_until, FaultProxy};
    use zklock::{Error, ZkError};

    const WAIT: Duration = Duration::from_secs(10);

    fn init_log() {
        let _ = env_logger::builder().is_test(true).try_init();
    }

    fn raw(servers: &str, session: Duration) -> ZooKeeper {
        init_log();
        ZooKeeper::connect(servers, session, |_e: WatchedEvent| {}).expect("connect a raw session")
    }

    // ---------------------------------------------------------------------------
    // 2. Asynchronous requests never wait behind a blocked writer
    // ---------------------------------------------------------------------------

    /// A client through a stalled proxy with writers blocked: `writers` threads
    /// each send a 900 KB `setData`, more than the stalled link's socket buffers
    /// hold (the client's send buffer is at most 4 MB here, the proxy reads
    /// nothing), so one of them is blocked in its write, holding the writer, and
    /// the others wait for it. Returns the client, the proxy, the nodes to play
    /// with and the writer threads.
    struct Blocked {
        proxy: FaultProxy,
        zk: ZooKeeper,
        nodes: Vec<String>,
        writers: Vec<thread::JoinHandle<()>>,
    }

    fn blocked_writer(name: &str, n_writers: usize, nodes: usize) -> Blocked {
        let proxy = FaultProxy::start(shared_server().connect_string()).unwrap();
        // Write timeout: 1/3 of the session timeout, 3 s: the blocked writer stays
        // blocked for the whole test unless the proxy lets it go.
        let zk = raw(&proxy.connect_string(), Duration::from_secs(9));
        let root = unique_root(name);
        let mut cur = String::new();
        for seg in root.split('/').filter(|s| !s.is_empty()) {
            cur.push('/');
            cur.push_str(seg);
            match zk.create(&cur, b"", Acl::open_unsafe(), CreateMode::Persistent) {
                Ok(_) => {}
                Err(e) if e.is(ZkError::NodeExists) => {}
                Err(e) => panic!("create {cur}: {e}"),
            }
        }
        let nodes: Vec<String> = (0..nodes)
            .map(|i| {
                let p = format!("{root}/n{i}");
                zk.create(&p, b"", Acl::open_unsafe(), CreateMode::Persistent)
                    .unwrap();
                p
            })
            .collect();
        proxy.stall();
        let big = Arc::new(vec![7u8; 900 * 1024]);
        let started = Arc::new(AtomicUsize::new(0));
        let writers = (0..n_writers)
            .map(|i| {
                let (zk, big, started) = (zk.clone(), big.clone(), started.clone());
                let path = format!("{root}/nowhere-{i}");
                thread::spawn(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    let _ = zk.set_data(&path, &big, None);
                })
            })
            .collect();
        wait_until(WAIT, "the writers started", || {
            started.load(Ordering::SeqCst) == n_writers
        });
        // Copying 7 MB into socket buffers takes milliseconds; this leaves the
        // writer threads time to be scheduled on a busy machine.
        thread::sleep(Duration::from_millis(500));
        Blocked {
            proxy,
            zk,
            nodes,
            writers,
        }
    }

    /// Sends a `delete_async` and an `exists_async` for each node from this
    /// thread, each returning within 50 ms; returns the answers as they come.
    /// (`Ok(true)`: the node was there.)
    fn send_async(zk: &ZooKeeper, nodes: &[String]) -> Arc<Mutex<Vec<Result<bool, Error>>>> {
        let answers = Arc::new(Mutex::new(Vec::new()));
        for node in nodes {
            let a = answers.clone();
            let t = Instant::now();
            zk.exists_async(node, None, move |r| {
                a.lock().unwrap().push(r.map(|stat| stat.is_some()));
            });
            let took = t.elapsed();
            assert!(
                took < Duration::from_millis(50),
                "exists_async took {took:?}"
            );
            let a = answers.clone();
            let t = Instant::now();
            zk.delete_async(node, None, move |r| {
                a.lock().unwrap().push(r.map(|()| true))
            });
            let took = t.elapsed();
            assert!(
                took < Duration::from_millis(50),
                "delete_async took {took:?}"
            );
        }
        answers
    }

    /// Behind a writer blocked on a full socket, asynchronous calls return at
    /// once; when the link flows again, each is sent and answered.
    #[test]
    fn async_calls_do_not_wait_for_a_blocked_writer_and_are_sent_when_it_is_done() {
        let b = blocked_writer("review_async_pass", 8, 4);
        let answers = send_async(&b.zk, &b.nodes);
        b.proxy.pass();
        wait_until(WAIT, "every asynchronous call answered", || {
            answers.lock().unwrap().len() == 2 * b.nodes.len()
        });
        for r in answers.lock().unwrap().iter() {
            assert!(matches!(r, Ok(true)), "{r:?}");
        }
        for w in b.writers {
            w.join().unwrap();
        }
        for node in &b.nodes {
            assert!(b.zk.exists(node, false).unwrap().is_none(), "{node}");
        }
        b.zk.close().unwrap();
    }

    /// Behind a writer blocked on a full socket, asynchronous calls return at
    /// once; when the connection is lost instead, each is answered (none is
    /// dropped), and the session goes on.
    #[test]
    fn async_calls_deferred_behind_a_blocked_writer_are_answered_when_the_connection_goes() {
        let b = blocked_writer("review_async_cut", 8, 4);
        let answers = send_async(&b.zk, &b.nodes);
        b.proxy.reset();
        wait_until(WAIT, "every asynchronous call answered", || {
            answers.lock().unwrap().len() == 2 * b.nodes.len()
        });
        for r in answers.lock().unwrap().iter() {
            assert!(
                r.as_ref()
                    .map_or_else(|e| e.is(ZkError::ConnectionLoss), |there| *there),
                "{r:?}"
            );
        }
        for w in b.writers {
            w.join().unwrap();
        }
        b.zk.wait_connected(WAIT).unwrap();
        b.zk.exists("/", false).unwrap();
        b.zk.close().unwrap();
    }
}

// ---------------------------------------------------------------------------
// Issue 31, item 7: close() returns Ok only when the session is gone
// ---------------------------------------------------------------------------

/// HBase's `HBaseTestingUtility.expireSession`: a second handle on the same
/// session id and password, then its `close()`. The order of the finding is
/// forced: the first handle has taken the session back (its reconnect closed
/// the second handle's connection on the server) before the second closes.
/// `close()` is `Ok` only when the server closed the session, and then it is
/// gone: the first handle hears `Expired`, its ephemeral node is deleted.
#[test]
fn hbase_expire_by_a_second_handle_expires_the_session() {
    let servers = server();
    let addr = shared_server().connect_string();
    let (a, a_events) = connect(&servers, Duration::from_secs(6));
    let (other, _) = connect(&servers, Duration::from_secs(10));
    let root = unique_root("hbase_expire");
    mkdirs(&other, &root);
    let node = format!("{root}/eph");
    a.create(&node, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    let id = a.session_id();

    let b = ZooKeeper::connect_with_session(
        &servers,
        Duration::from_secs(6),
        |_e: zklock::client::WatchedEvent| {},
        id,
        &a.session_password(),
    )
    .unwrap();
    // The server closed A's connection when B resumed the session; A takes it
    // back (closing B's connection on the server) before B closes.
    a_events.wait_state(KeeperState::SyncConnected, 2, WAIT);
    b.close()
        .expect("close() of the second handle: the server closed the session");
    // The server may still list a session it is closing (its log write comes
    // first); it refuses any reconnect to it already.
    zklock::testing::wait_until(WAIT, "the server dropped the closed session", || {
        !dump_has_session(&addr, id)
    });
    a_events.wait_state(KeeperState::Expired, 1, WAIT);
    assert_eq!(a.state(), State::Expired);
    assert!(
        other.exists(&node, false).unwrap().is_none(),
        "the expired session's ephemeral node is gone"
    );
    a.close().unwrap();
    rmr(&other, &root);
    no_client_panics();
}

/// closeSession sent, its answer held (a partition): `close()` says it could
/// not close the session (`ConnectionLoss`, within its bound), and the server
/// does still hold it. A later `close()` tries again, and once a server is
/// reachable closes it.
#[test]
fn close_without_the_servers_answer_is_an_error_and_can_be_retried() {
    let addr = shared_server().connect_string();
    let (proxy, zk, _events) = via_proxy(Duration::from_secs(4));
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("close_unanswered");
    mkdirs(&other, &root);
    let node = format!("{root}/eph");
    zk.create(&node, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    let id = zk.session_id();

    proxy.stall();
    let t = Instant::now();
    let e = zk.close().expect_err("close() without the server's answer");
    assert_eq!(e.code(), Some(ZkError::ConnectionLoss), "{e}");
    // Bounded: 2/3 of the session timeout at most 2 s (slack for the load).
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
    assert!(
        dump_has_session(&addr, id),
        "the server still holds the session"
    );
    assert!(other.exists(&node, false).unwrap().is_some());
    assert_eq!(zk.state(), State::Closed);

    // Reachable again: the retry closes it (a new connection on the session's
    // id and password, closeSession right behind the ConnectRequest).
    proxy.reset();
    zk.close().expect("the retried close() reached the server");
    zklock::testing::wait_until(WAIT, "the server dropped the closed session", || {
        !dump_has_session(&addr, id)
    });
    assert!(other.exists(&node, false).unwrap().is_none());
    // Confirmed: later calls are Ok at once.
    zk.close().unwrap();
    rmr(&other, &root);
    no_client_panics();
}

/// closeSession reached the server (the session is gone) but its answer was
/// lost with the connection: `close()` asks again on a new connection, hears
/// that the session expired, and returns `Ok`.
#[test]
fn close_whose_answer_is_lost_learns_the_session_is_gone() {
    let addr = shared_server().connect_string();
    let (proxy, zk, _events) = via_proxy(Duration::from_secs(6));
    let proxy = Arc::new(proxy);
    let id = zk.session_id();
    proxy.stall_downstream();
    // The connection drops once the server has closed the session (its word:
    // `dump` no longer lists it), before its answer reaches the client.
    let cutter = {
        let (proxy, addr) = (proxy.clone(), addr.clone());
        thread::spawn(move || {
            zklock::testing::wait_until(WAIT, "the server closed the session", || {
                !dump_has_session(&addr, id)
            });
            proxy.reset();
        })
    };
    zk.close()
        .expect("close(): the server said the session had expired");
    cutter.join().unwrap();
    assert!(!dump_has_session(&addr, id));
    no_client_panics();
}

/// Users of `zklock::testing` expire a session with `expire_session` (as
/// Curator's `KillSession`): the server no longer holds it, the handle has
/// heard `Expired` and its ephemeral node is gone when it returns.
#[test]
fn the_exported_expire_session_expires_a_users_session() {
    let servers = server();
    let addr = shared_server().connect_string();
    let (zk, events) = connect(&servers, Duration::from_secs(6));
    let (other, _) = connect(&servers, Duration::from_secs(10));
    let root = unique_root("expire_session");
    mkdirs(&other, &root);
    let node = format!("{root}/eph");
    zk.create(&node, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    let id = zk.session_id();
    zklock::testing::expire_session(&zk, &servers).unwrap();
    assert_eq!(zk.state(), State::Expired);
    zklock::testing::wait_until(WAIT, "the server dropped the expired session", || {
        !dump_has_session(&addr, id)
    });
    assert!(other.exists(&node, false).unwrap().is_none());
    events.wait_state(KeeperState::Expired, 1, WAIT);
    zk.close().unwrap();
    rmr(&other, &root);
    no_client_panics();
}

/// `close_session`: a session held by another handle (another process, in a
/// test's controller), closed by id and password, confirmed by the server.
#[test]
fn the_exported_close_session_closes_a_session_held_elsewhere() {
    let servers = server();
    let addr = shared_server().connect_string();
    let (zk, events) = connect(&servers, Duration::from_secs(6));
    let id = zk.session_id();
    zklock::testing::close_session(&servers, id, &zk.session_password(), zk.session_timeout())
        .unwrap();
    zklock::testing::wait_until(WAIT, "the server dropped the closed session", || {
        !dump_has_session(&addr, id)
    });
    events.wait_state(KeeperState::Expired, 1, WAIT);
    let e = zklock::testing::close_session(&servers, 0, b"", Duration::from_secs(6)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    zk.close().unwrap();
    no_client_panics();
}

// ---------------------------------------------------------------------------
// Issue 50, item 3: close() after an expiry the client declared itself
// ---------------------------------------------------------------------------

/// The client's side of a one-way partition for session `id` of `zk`: the
/// server keeps hearing the client (`stall_downstream`: pings and connect
/// requests reach it, its replies do not) until the client gives the
/// connection up (`Disconnected`); then nothing reaches the server either
/// (`stall`), so neither the client's reconnects nor its background close of
/// the session it declares expired can end or refresh the session there.
/// Returns when the client has declared the session expired.
///
/// The server heard a ping at most a sixth of the session timeout before the
/// client gave up, 2/3 of a timeout after the client last heard the server:
/// so it holds the session at least half a timeout after the client's
/// `Expired`.
fn one_way_partition_until_declared_expired(proxy: &FaultProxy, events: &Events) {
    proxy.stall_downstream();
    events.wait_state(KeeperState::Disconnected, 1, WAIT);
    proxy.stall();
    events.wait_state(KeeperState::Expired, 1, Duration::from_secs(20));
}

/// Issue 50, item 3. In a one-way partition the client declares its session
/// expired a session timeout after it last heard the server, while the
/// server, which heard its pings, holds the session (and its ephemeral node)
/// half a timeout longer or more. `close()` must not count the client's own
/// verdict as the session's end: it sends closeSession on a new connection
/// within its bound, and with no answer says `ConnectionLoss` (the node is
/// still there, as a second, direct client shows). Once the server is
/// reachable a second `close()` closes the session: `Ok`, and the node is gone
/// at once (long before the server would have expired the session).
///
/// Timing, by construction: session timeout T = 10 s; the client declares
/// the expiry at T after it last heard the server; the server holds the
/// session until at least 1.5 T after it (see
/// [`one_way_partition_until_declared_expired`]); `close()` gives up at 2 s.
#[test]
fn close_after_a_declared_expiry_is_ok_only_on_the_servers_word() {
    let addr = shared_server().connect_string();
    let (proxy, zk, events) = via_proxy(Duration::from_secs(10));
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("close_declared_expiry");
    mkdirs(&other, &root);
    let node = format!("{root}/eph");
    zk.create(&node, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    let id = zk.session_id();

    one_way_partition_until_declared_expired(&proxy, &events);
    assert_eq!(zk.state(), State::Expired);
    let t = Instant::now();
    let closed = zk.close();
    let took = t.elapsed();
    let present = other.exists(&node, false).unwrap().is_some();
    assert!(
        closed.is_err(),
        "close() after the client's own expiry returned {closed:?} in {took:?}, while the \
         server still holds the session (its ephemeral node present: {present})"
    );
    let e = closed.unwrap_err();
    assert_eq!(e.code(), Some(ZkError::ConnectionLoss), "{e}");
    // It tried, within its bound (2 s; slack for a loaded machine).
    assert!(
        took >= Duration::from_millis(1500),
        "gave up after {took:?}"
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(
        present,
        "the server still holds the session: its node is there"
    );
    assert!(dump_has_session(&addr, id), "the server lists the session");

    // Reachable again: the retry closes it (closeSession right behind the
    // ConnectRequest on a new connection), confirmed by the server.
    proxy.reset();
    zk.close()
        .expect("the retried close() reached the server and closed the session");
    assert!(
        other.exists(&node, false).unwrap().is_none(),
        "close() said Ok: the session's ephemeral node is gone"
    );
    // Confirmed: later calls are Ok at once.
    let t = Instant::now();
    zk.close().unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    rmr(&other, &root);
    no_client_panics();
}

/// Issue 50, item 3, the other answer: after the client declared the expiry,
/// the server expires the session too (nothing reached it since); once it is
/// reachable, `close()` reconnects with the session's id and hears that it
/// expired: `Ok`, the session is gone.
#[test]
fn close_after_a_declared_expiry_counts_the_servers_expired_answer() {
    let addr = shared_server().connect_string();
    let (proxy, zk, events) = via_proxy(Duration::from_secs(2));
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("close_declared_expiry_expired");
    mkdirs(&other, &root);
    let node = format!("{root}/eph");
    zk.create(&node, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    let id = zk.session_id();

    one_way_partition_until_declared_expired(&proxy, &events);
    zklock::testing::wait_until(WAIT, "the server expired the session", || {
        !dump_has_session(&addr, id)
    });
    assert!(other.exists(&node, false).unwrap().is_none());
    // The requests held meanwhile are dropped with the connections.
    proxy.reset();
    zk.close()
        .expect("close(): the server said the session had expired");
    no_client_panics();
    rmr(&other, &root);
}

/// Dropping the last handle after a `close()` that no server confirmed
/// returns at once, and the close is tried again in the background: once the
/// server is reachable, the session and its ephemeral node go (long before
/// the server would have expired the session).
#[test]
fn dropping_a_client_after_a_failed_close_retries_it_in_the_background() {
    let addr = shared_server().connect_string();
    let (proxy, zk, _events) = via_proxy(Duration::from_secs(10));
    let (other, _) = connect(&server(), Duration::from_secs(10));
    let root = unique_root("drop_after_failed_close");
    mkdirs(&other, &root);
    let node = format!("{root}/eph");
    zk.create(&node, b"", Acl::open_unsafe(), CreateMode::Ephemeral)
        .unwrap();
    let seen = Events::new();
    assert!(other.exists_w(&node, seen.watcher()).unwrap().is_some());
    let id = zk.session_id();

    proxy.stall();
    let stalled = Instant::now();
    let e = zk.close().expect_err("close() without the server's answer");
    assert_eq!(e.code(), Some(ZkError::ConnectionLoss), "{e}");
    assert!(dump_has_session(&addr, id));
    let t = Instant::now();
    drop(zk);
    let took = t.elapsed();
    assert!(took < Duration::from_millis(300), "the drop took {took:?}");
    proxy.reset();
    seen.wait_node(EventType::NodeDeleted, &node, 1, WAIT);
    // The server alone holds the session 10 s after the last ping it heard.
    let gone = stalled.elapsed();
    assert!(
        gone < Duration::from_secs(7),
        "the node went {gone:?} after the stall: by the server's expiry, not the retried close"
    );
    rmr(&other, &root);
    no_client_panics();
}

/// A stale closer of the session, as a partition that heals releases it: a
/// connection with the session's id and password, closeSession right behind
/// the ConnectRequest, its answers read until the server ends it.
fn raw_close(addr: &str, id: i64, password: &[u8]) {
    let mut connect = Vec::new();
    put_i32(&mut connect, 0); // protocol version
    put_i64(&mut connect, 0); // last zxid seen
    put_i32(&mut connect, 2000);
    put_i64(&mut connect, id);
    put_buffer(&mut connect, password);
    let mut close = Vec::new();
    put_i32(&mut close, 1); // xid
    put_i32(&mut close, -11); // closeSession
    let mut frames = frame(&connect);
    frames.extend_from_slice(&frame(&close));
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return;
    };
    // Its own closeSession may be dropped unanswered too (see below).
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    if s.write_all(&frames).is_ok() {
        while read_frame(&mut s).is_ok() {}
    }
}

/// ZooKeeper drops, without an answer, a request whose session is gone
/// (`MissingSessionException`, "Dropping request"), and leaves its
/// connection open: a closeSession sent on a connection that reopened the
/// session just before another connection's closeSession ended it is never
/// answered. close() must then ask again on a new connection, whose
/// ConnectResponse says the session is gone, instead of waiting out its
/// whole bound on the silent one and answering ConnectionLoss. Here other
/// connections close the session at the same moment as close(), round after
/// round; each close() must say Ok.
#[test]
fn close_racing_other_closers_of_its_session_is_confirmed() {
    let addr = server();
    for round in 0..30 {
        let (zk, _events) = connect(&addr, Duration::from_secs(2));
        let (id, password) = (zk.session_id(), zk.session_password());
        let start = Arc::new(std::sync::Barrier::new(4));
        let closers: Vec<_> = (0..3)
            .map(|_| {
                let (start, addr, password) = (start.clone(), addr.clone(), password.clone());
                thread::spawn(move || {
                    start.wait();
                    raw_close(&addr, id, &password);
                })
            })
            .collect();
        start.wait();
        let t = Instant::now();
        let closed = zk.close();
        for c in closers {
            c.join().unwrap();
        }
        assert!(
            closed.is_ok(),
            "round {round}: close() said {closed:?} after {:?}",
            t.elapsed()
        );
    }
    no_client_panics();
}
