//! `zklock::recipes::tree_cache` against a real ZooKeeper server: the cache
//! equals a fresh read node by node after writers stop, across a cut and a
//! server restart; the resync after a short cut costs requests in proportion
//! to the changes (counted with the cache's own counter and the server's
//! `mntr`), not to the tree; with one-shot watches only (the fallback for
//! servers older than 3.6) it follows the same writers; on a 3-node ensemble it follows writes made
//! through other members, resyncs (only what changed) after the member serving
//! its session is killed, and reports `Lost` when the session expires.

mod common;

use common::{force_expiry, init_log, member_of, retry_election};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zklock::client::{Acl, CreateMode, Op, WatchedEvent, ZooKeeper};
use zklock::recipes::tree_cache::{CacheDepth, CacheEvent, CacheStep, ChildData, TreeCache};
use zklock::testing::{eventually, shared_server, unique_root, FaultProxy, ZkEnsemble, ZkServer};
use zklock::{RetryConfig, ZkError, ZooKeeperWatcher};

const LONG: Duration = Duration::from_secs(60);

fn connect(servers: &str) -> ZooKeeperWatcher {
    connect_for(servers, Duration::from_secs(20))
}

fn connect_for(servers: &str, session: Duration) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(servers)
        .with_identifier("cache-test")
        .with_session_timeout(session)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(50)))
        .connect()
        .unwrap()
}

fn plain(servers: &str) -> ZooKeeper {
    let zk = ZooKeeper::connect(servers, Duration::from_secs(20), |_e: WatchedEvent| {}).unwrap();
    zk.wait_connected(LONG).unwrap();
    // The parent of every unique_root.
    match zk.create(
        "/zklock-test",
        b"",
        Acl::open_unsafe(),
        CreateMode::Persistent,
    ) {
        Err(e) if !e.is(ZkError::NodeExists) => panic!("{e}"),
        _ => zk,
    }
}

/// `root` with `fanout` children each holding `fanout` children (the root,
/// `fanout` + `fanout²` nodes), created with multis of 100.
fn make_tree(zk: &ZooKeeper, root: &str, fanout: usize) -> Vec<String> {
    let mut paths = vec![root.to_string()];
    for i in 0..fanout {
        let a = format!("{root}/a{i}");
        paths.push(a.clone());
        for j in 0..fanout {
            paths.push(format!("{a}/b{j}"));
        }
    }
    for batch in paths.chunks(100) {
        let ops: Vec<Op> = batch
            .iter()
            .map(|p| Op::create(p.clone(), p.as_bytes().to_vec(), CreateMode::Persistent))
            .collect();
        zk.multi(&ops).unwrap();
    }
    paths
}

/// Every node under `root` (with it), read now.
fn fresh_read(zk: &ZooKeeper, root: &str) -> BTreeMap<String, ChildData> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_string()];
    while let Some(p) = todo.pop() {
        let (data, stat) = match zk.get_data(&p, false) {
            Ok(read) => read,
            Err(e) if e.is(ZkError::NoNode) => continue,
            Err(e) => panic!("{p}: {e}"),
        };
        out.insert(p.clone(), ChildData { data, stat });
        match zk.get_children(&p, false) {
            Ok(children) => todo.extend(children.iter().map(|c| format!("{p}/{c}"))),
            Err(e) if e.is(ZkError::NoNode) => {}
            Err(e) => panic!("{p}: {e}"),
        }
    }
    out
}

/// Waits until the cache equals a fresh read node by node (data and `Stat`).
fn assert_equal_eventually(cache: &TreeCache, zk: &ZooKeeper, root: &str) {
    let mut last = (BTreeMap::new(), BTreeMap::new());
    let same = eventually(LONG, || {
        if cache.is_stale() {
            return false;
        }
        last = (cache.snapshot(), fresh_read(zk, root));
        last.0 == last.1
    });
    if !same {
        let (c, f) = &last;
        for (p, d) in f {
            if c.get(p) != Some(d) {
                panic!(
                    "{p} (cache of {}): cache {:?}, server {d:?}",
                    if cache.is_one_shot() {
                        "one-shot watches"
                    } else {
                        "a recursive watch"
                    },
                    c.get(p)
                );
            }
        }
        for p in c.keys() {
            assert!(f.contains_key(p), "{p} cached, gone on the server");
        }
        panic!("cache never current (stale: {})", cache.is_stale());
    }
}

/// Writers creating, changing and deleting nodes under `root` until `stop`.
fn writers(
    servers: &str,
    root: &str,
    n: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<thread::JoinHandle<()>> {
    (0..n)
        .map(|w| {
            let zk = plain(servers);
            let root = root.to_string();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let p = format!("{root}/a{}/b{}", (i as usize * 7 + w) % 10, i % 10);
                    let r = match i % 3 {
                        0 => zk
                            .set_data(&p, format!("w{w}-{i}").as_bytes(), None)
                            .map(drop),
                        1 => zk.delete(&p, None),
                        _ => zk
                            .create(
                                &p,
                                format!("c{w}-{i}").as_bytes(),
                                Acl::open_unsafe(),
                                CreateMode::Persistent,
                            )
                            .map(drop),
                    };
                    match r {
                        Ok(()) => {}
                        Err(e) if e.is(ZkError::NoNode) || e.is(ZkError::NodeExists) => {}
                        Err(e) if e.is_retryable() => thread::sleep(Duration::from_millis(50)),
                        Err(e) => panic!("writer {w}: {e}"),
                    }
                }
                zk.close().unwrap();
            })
        })
        .collect()
}

#[test]
fn the_cache_equals_a_fresh_read_after_writers_stop() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers);
    let root = unique_root("cache-writers");
    let zk = plain(&servers);
    make_tree(&zk, &root, 10);
    let cache = TreeCache::start(&zkw, &root).unwrap();
    // The fallback of servers older than 3.6 (no addWatch): one-shot
    // watches only, on a session of its own, under the same writers.
    let zkw_one_shot = connect(&servers);
    let one_shot = TreeCache::builder(&root)
        .one_shot_watches(true)
        .start(&zkw_one_shot)
        .unwrap();
    assert!(cache.wait_synced(LONG).unwrap());
    assert_eq!(cache.snapshot().len(), 111);
    assert_eq!(cache.snapshot(), fresh_read(&zk, &root));
    assert!(one_shot.wait_synced(LONG).unwrap());
    assert_eq!(one_shot.snapshot(), fresh_read(&zk, &root));

    let stop = Arc::new(AtomicBool::new(false));
    let ws = writers(&servers, &root, 4, &stop);
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    for w in ws {
        w.join().unwrap();
    }
    assert_equal_eventually(&cache, &zk, &root);
    assert_equal_eventually(&one_shot, &zk, &root);
    one_shot.close().unwrap();
    zkw_one_shot.close().unwrap();
    let watches = zkw.zookeeper().watch_count();
    cache.close().unwrap();
    // The one-shot sentinels stay until they fire (see `close`).
    assert_eq!(
        zkw.zookeeper().watch_count(),
        watches - 1,
        "close removed the recursive watch"
    );
}

#[test]
fn events_tell_added_updated_removed_and_the_children_depth_stops_at_children() {
    init_log();
    let servers = shared_server().connect_string();
    // The cache's connection lags the writer's by 100 ms each way, as under
    // load: every step below must be seen by the cache before the next.
    let slow = FaultProxy::start(servers.as_str()).unwrap();
    slow.delay(Duration::from_millis(100));
    let zkw = connect(&slow.connect_string());
    let root = unique_root("cache-events");
    let zk = plain(&servers);
    zk.create(&root, b"r", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let cache = TreeCache::builder(&root)
        .depth(CacheDepth::Children)
        .start(&zkw)
        .unwrap();
    let events = cache.events();
    assert!(cache.wait_synced(LONG).unwrap());
    // Each step waits until the cache shows it: a node created and deleted
    // before the cache's read of it reaches the server is never seen (the
    // read finds it gone), which is right for a cache, and made this test
    // wait for a `Removed` that could not come (a cold make test at 4 lanes;
    // every run with the lag above, before the waits).
    let child = format!("{root}/c");
    zk.create(&child, b"1", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert!(eventually(LONG, || cache.get(&child).is_some()));
    zk.create(
        &format!("{child}/deep"),
        b"x",
        Acl::open_unsafe(),
        CreateMode::Persistent,
    )
    .unwrap();
    zk.set_data(&child, b"2", None).unwrap();
    assert!(eventually(LONG, || cache
        .get(&child)
        .is_some_and(|d| d.data == b"2")));
    zk.delete(&format!("{child}/deep"), None).unwrap();
    zk.delete(&child, None).unwrap();
    let mut seen = Vec::new();
    while !matches!(seen.last(), Some(CacheEvent::Removed(p, _)) if *p == child) {
        seen.push(events.recv_timeout(LONG).unwrap());
    }
    let on_child: Vec<&CacheEvent> = seen
        .iter()
        .filter(|e| matches!(e, CacheEvent::Added(p, _) | CacheEvent::Updated(p, _) | CacheEvent::Removed(p, _) if *p == child))
        .collect();
    // Added with "1", Updated to "2" (a read made once more after the
    // grandchild's changes may tell another Updated: its pzxid moved), and
    // Removed last.
    assert!(
        matches!(on_child.as_slice(), [CacheEvent::Added(_, a), middle @ .., CacheEvent::Removed(_, r)]
            if a.data == b"1" && r.data == b"2"
                && !middle.is_empty()
                && middle.iter().all(|e| matches!(e, CacheEvent::Updated(..)))
                && matches!(middle[0], CacheEvent::Updated(_, u) if u.data == b"2")),
        "{on_child:?}"
    );
    assert!(
        !seen.iter().any(|e| format!("{e:?}").contains("deep")),
        "a grandchild is below the Children depth: {seen:?}"
    );
    assert_equal_eventually(&cache, &zk, &root);
}

#[test]
fn a_resync_after_a_short_cut_costs_requests_in_proportion_to_the_changes() {
    init_log();
    // A server of its own: its mntr counts this test's packets only.
    let server = ZkServer::start().unwrap();
    let proxy = FaultProxy::start(server.connect_string().as_str()).unwrap();
    let zkw = connect(&proxy.connect_string());
    let root = "/resync";
    let zk = plain(&server.connect_string());
    let paths = make_tree(&zk, root, 31); // 1 + 31 + 961 = 993 nodes
    let cache = TreeCache::start(&zkw, root).unwrap();
    let events = cache.events();
    assert!(cache.wait_synced(LONG).unwrap());
    let load = cache.requests();
    assert!(
        load >= 2 * paths.len() as u64 - 1,
        "initial load: {load} reads"
    );

    proxy.stall();
    assert!(
        eventually(LONG, || cache.is_stale()),
        "a stalled connection makes the cache stale"
    );
    // 1% changed while the cache cannot see it: data, creations, deletions.
    let changed = 10;
    for i in 0..changed {
        let p = &paths[100 + 90 * i];
        match i % 3 {
            0 | 1 => drop(zk.set_data(p, b"changed", None).unwrap()),
            _ => drop(
                zk.create(
                    &format!("{p}-new"),
                    b"new",
                    Acl::open_unsafe(),
                    CreateMode::Persistent,
                )
                .unwrap(),
            ),
        }
    }
    zk.delete(&paths[paths.len() - 1], None).unwrap();
    let before = cache.requests();
    let packets_before: i64 = server.mntr().unwrap()["zk_packets_received"]
        .parse()
        .unwrap();
    proxy.reset();
    assert!(cache.wait_synced(LONG).unwrap());
    let reads = cache.requests() - before;
    let packets_after: i64 = server.mntr().unwrap()["zk_packets_received"]
        .parse()
        .unwrap();
    let packets = packets_after - packets_before;
    println!(
        "resync of {} nodes after {} changes: {reads} reads by the cache, {packets} packets at the server (initial load {load} reads)",
        paths.len(),
        changed + 1
    );
    // Per change at most a data read, a listing and the parent's re-read; a
    // marker; the connect, setWatches, mntr and pings at the server.
    assert!(reads <= 4 * (changed as u64 + 1) + 1, "{reads} reads");
    assert!(
        packets <= 4 * (changed as i64 + 1) + 20,
        "{packets} packets"
    );
    assert!(events.try_iter().any(|e| e == CacheEvent::Resynced));
    assert_equal_eventually(&cache, &zk, root);
    drop(cache);
}

#[test]
fn the_cache_follows_a_server_restart() {
    init_log();
    let mut server = ZkServer::start().unwrap();
    let zkw = connect(&server.connect_string());
    let root = "/restart";
    make_tree(zkw.zookeeper(), root, 5);
    let cache = TreeCache::start(&zkw, root).unwrap();
    let events = cache.events();
    assert!(cache.wait_synced(LONG).unwrap());
    server.restart().unwrap();
    let zk = plain(&server.connect_string());
    zk.set_data(&format!("{root}/a1"), b"after", None).unwrap();
    zk.create(
        &format!("{root}/a1/new"),
        b"n",
        Acl::open_unsafe(),
        CreateMode::Persistent,
    )
    .unwrap();
    zk.delete(&format!("{root}/a2/b2"), None).unwrap();
    assert_equal_eventually(&cache, &zk, root);
    let seen: Vec<CacheEvent> = events.try_iter().collect();
    assert!(seen.contains(&CacheEvent::Suspended), "{seen:?}");
    assert!(seen.contains(&CacheEvent::Reconnected), "{seen:?}");
    assert_eq!(cache.get(&format!("{root}/a1")).unwrap().data, b"after");
}

#[test]
fn a_missing_root_is_cached_once_created_and_an_ended_session_makes_it_lost() {
    init_log();
    let servers = shared_server().connect_string();
    let zkw = connect(&servers);
    let root = unique_root("cache-missing");
    let cache = TreeCache::start(&zkw, &root).unwrap();
    assert!(cache.wait_synced(LONG).unwrap());
    assert!(cache.snapshot().is_empty());
    // Subscribed before the root is made: the cache applies a change before
    // it tells it, so a subscription made once `get` shows the root could
    // still receive its `Added` (seen on 3.9 under load), before `Lost`.
    let events = cache.events();
    let zk = plain(&servers);
    zk.create(&root, b"now", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert!(matches!(
        events.recv_timeout(LONG).unwrap(),
        CacheEvent::Added(path, data) if path == root && data.data == b"now"
    ));
    assert!(eventually(LONG, || cache
        .get(&root)
        .is_some_and(|d| d.data == b"now")));
    assert!(TreeCache::start(&zkw, "no-slash").is_err());
    zkw.close().unwrap();
    assert_eq!(events.recv_timeout(LONG).unwrap(), CacheEvent::Lost);
    assert!(cache.is_stale());
    assert!(cache.wait_synced(Duration::from_secs(1)).is_err());
}

/// An event the watch brings before the initial load has started (a change
/// the cache's member applies just after the addWatch, as a follower lagging
/// the writer's member does) is read with the load; it must not hold the
/// load up. The found bug: its read waited for a reconnect that never came,
/// and `wait_synced` never saw the cache current (the ensemble test's
/// initial load under load). Forced with the start's step hook: the root's
/// data changes once the watch is set, and the start goes on only after the
/// cache applied that event. With the recursive watch and with one-shot
/// watches only (the root's sentinel).
#[test]
fn an_event_before_the_initial_load_is_read_with_it() {
    init_log();
    let servers = shared_server().connect_string();
    let zk = plain(&servers);
    for one_shot in [false, true] {
        let zkw = connect(&servers);
        let root = unique_root("cache-early-event");
        zk.create(&root, b"before", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let (tx, rx) = (parking_lot::Mutex::new(tx), parking_lot::Mutex::new(rx));
        let writer = zk.clone();
        let cache = TreeCache::builder(&root)
            .one_shot_watches(one_shot)
            .with_step_hook(move |step, path| match step {
                CacheStep::WatchSet => {
                    writer.set_data(path, b"early", None).unwrap();
                    let rx = rx.lock();
                    while rx.recv_timeout(LONG).expect("the event applied") != path {}
                }
                CacheStep::EventApplied => {
                    let _ = tx.lock().send(path.to_string());
                }
                _ => {}
            })
            .start(&zkw)
            .unwrap();
        assert!(
            cache.wait_synced(Duration::from_secs(20)).unwrap(),
            "one_shot={one_shot}: the initial load never ended"
        );
        assert_eq!(cache.get(&root).unwrap().data, b"early");
        assert_equal_eventually(&cache, &zk, &root);
        cache.close().unwrap();
    }
}

/// A one-shot cache started while the connection is down loads once it is
/// back: its start sets the root's sentinel first (waiting for the
/// connection), so the cache hears of the reconnect. Before, nothing of the
/// cache was registered with the client then, and its first reads waited
/// for a reconnect it was never told of.
#[test]
fn a_one_shot_cache_started_while_disconnected_loads_after_the_reconnect() {
    init_log();
    let servers = shared_server().connect_string();
    let zk = plain(&servers);
    let root = unique_root("cache-start-down");
    make_tree(&zk, &root, 3);
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zkw = connect(&proxy.connect_string());
    proxy.stall();
    proxy.cut();
    assert!(eventually(LONG, || zkw.zookeeper().state()
        != zklock::client::State::Connected));
    let cache = thread::scope(|scope| {
        let starter = scope.spawn(|| TreeCache::builder(&root).one_shot_watches(true).start(&zkw));
        // The start either waits for the connection or (before the fix) came
        // back at once, its reads held: either way the connection heals now.
        eventually(Duration::from_secs(1), || starter.is_finished());
        proxy.pass();
        starter.join().unwrap().unwrap()
    });
    assert!(
        cache.wait_synced(Duration::from_secs(20)).unwrap(),
        "the initial load never ended"
    );
    assert_equal_eventually(&cache, &zk, &root);
    cache.close().unwrap();
}

/// One ensemble for the whole check (three JVMs are the costly part): writes
/// through other members, a cut during which 1% changes, the kill of the
/// member serving the cache's session, failover, a resync costing requests in
/// proportion to the changes, then an expired session reported as `Lost`.
#[test]
fn on_an_ensemble_the_cache_survives_a_member_kill_and_reports_an_expiry() {
    init_log();
    let mut ensemble = ZkEnsemble::start().unwrap();
    // The cache reaches every member through a proxy of its own, so that a
    // cut is a stall of the three.
    let proxies: Vec<FaultProxy> = (0..ensemble.size())
        .map(|i| FaultProxy::start(ensemble.address(i).as_str()).unwrap())
        .collect();
    let through: Vec<String> = proxies.iter().map(|p| p.connect_string()).collect();
    let zkw = connect_for(&through.join(","), Duration::from_secs(6));
    let session = zkw.zookeeper().session_id();
    let victim = member_of(&ensemble, session);
    let other = (victim + 1) % ensemble.size();
    // Writes and fresh reads go through another member than the cache's.
    let zk = plain(&ensemble.address(other));
    let root = "/ensemble-cache";
    let paths = make_tree(&zk, root, 10); // 111 nodes
    let cache = TreeCache::start(&zkw, root).unwrap();
    let events = cache.events();
    assert!(cache.wait_synced(LONG).unwrap());
    assert_equal_eventually(&cache, &zk, root);

    // Writers on the two other members: the cache follows them.
    let stop = Arc::new(AtomicBool::new(false));
    let third = (victim + 2) % ensemble.size();
    let mut ws = writers(&ensemble.address(other), root, 2, &stop);
    ws.extend(writers(&ensemble.address(third), root, 2, &stop));
    thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    for w in ws {
        w.join().unwrap();
    }
    assert_equal_eventually(&cache, &zk, root);

    // A cut: the cache goes stale; two nodes change meanwhile (through a
    // live member, the leader being alive), then the cache's member is killed.
    for p in &proxies {
        p.stall();
    }
    assert!(
        eventually(LONG, || cache.is_stale()),
        "a cut makes it stale"
    );
    let before = cache.requests();
    zk.set_data(&paths[5], b"cut", None).unwrap();
    zk.create(
        &format!("{root}/a3/cut"),
        b"new",
        Acl::open_unsafe(),
        CreateMode::Persistent,
    )
    .unwrap();
    let changed = 2;
    let role = ensemble.mode(victim).unwrap_or_default();
    ensemble.kill(victim).unwrap();
    for p in &proxies {
        p.reset();
    }
    assert!(cache.wait_synced(LONG).unwrap(), "resynced after failover");
    let reads = cache.requests() - before;
    // Fresh reads on a new session, once the two members serve (the
    // writer's session may still be reconnecting if the leader was killed).
    ensemble.wait_for_quorum(LONG).unwrap();
    let zk = plain(&ensemble.address(other));
    let now = member_of(&ensemble, session);
    assert_ne!(now, victim, "the client moved to another member");
    assert_eq!(zkw.zookeeper().session_id(), session, "same session");
    println!(
        "ensemble resync of {} nodes after {changed} changes and the kill of its member (the {role}): {reads} reads",
        paths.len()
    );
    // Per change at most a data read, a listing and the parent's two
    // re-reads; the root's two re-reads (each made once more when a
    // catch-up event meets it in flight) and a marker. A full reload would
    // be two reads per node (222).
    assert!(
        reads <= 4 * changed + 5,
        "{reads} reads: not only the changes"
    );
    assert_equal_eventually(&cache, &zk, root);
    // Writes after the failover are followed too.
    retry_election("set after failover", || {
        zk.set_data(&format!("{root}/a7"), b"after", None)
    });
    assert_equal_eventually(&cache, &zk, root);
    let seen: Vec<CacheEvent> = events.try_iter().collect();
    for wanted in [
        CacheEvent::Suspended,
        CacheEvent::Reconnected,
        CacheEvent::Resynced,
    ] {
        assert!(seen.contains(&wanted), "{wanted:?} missing in {seen:?}");
    }
    assert!(!seen.contains(&CacheEvent::Lost), "{seen:?}");
    assert_eq!(cache.get(&paths[5]).unwrap().data, b"cut");

    // The session expires (a twin closes it behind a stall): Lost, and the
    // cache says it is stale for good.
    force_expiry(&proxies[now], &ensemble.address(now), &zkw);
    assert!(
        eventually(LONG, || events.try_iter().any(|e| e == CacheEvent::Lost)),
        "Lost after the expiry"
    );
    assert!(cache.is_stale());
    assert!(cache.wait_synced(Duration::from_secs(1)).is_err());
    drop(cache);
}

/// Issue 31, item 8: a getData reply the server made before a deletion but
/// handled after the cache applied the deletion's event (reads run beside
/// commits on the server) must not put the deleted node back. Forced with
/// `hold_next_data_reply`: the cache's read of a new node is answered while
/// the node exists, its reply is held until the cache has applied the
/// node's `NodeDeleted`, then handled. With the recursive watch and with
/// one-shot watches only.
#[test]
fn a_reply_older_than_a_deletion_does_not_bring_the_node_back() {
    use std::sync::mpsc;
    init_log();
    for one_shot in [false, true] {
        let servers = shared_server().connect_string();
        let zkw = connect(&servers);
        let root = unique_root(&format!("cache-stale-reply-{one_shot}"));
        let zk = plain(&servers);
        zk.create(&root, b"r", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        let cache = TreeCache::builder(&root)
            .one_shot_watches(one_shot)
            .start(&zkw)
            .unwrap();
        assert!(cache.wait_synced(LONG).unwrap());
        let events = cache.events();
        let x = format!("{root}/x");
        let (tx, steps) = mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        cache.hold_next_data_reply(&x, move |step, path| {
            if matches!(step, CacheStep::ReplyHeld | CacheStep::HeldReplyHandled) {
                let _ = tx.lock().unwrap().send((step, path.to_string()));
            }
        });
        zk.create(&x, b"old", Acl::open_unsafe(), CreateMode::Persistent)
            .unwrap();
        // The cache read x (it exists): its reply is held.
        assert_eq!(
            steps.recv_timeout(LONG).unwrap(),
            (CacheStep::ReplyHeld, x.clone())
        );
        zk.delete(&x, None).unwrap();
        // The cache applied x's NodeDeleted, then handled the older reply.
        assert_eq!(
            steps.recv_timeout(LONG).unwrap(),
            (CacheStep::HeldReplyHandled, x.clone())
        );
        assert_eq!(cache.get(&x), None, "the deleted node came back");
        // A later change, seen after everything about x: x is still absent.
        zk.set_data(&root, b"r2", None).unwrap();
        loop {
            match events.recv_timeout(LONG).unwrap() {
                CacheEvent::Added(p, _) => assert_ne!(p, x, "the deleted node was added"),
                CacheEvent::Updated(p, d) if p == root && d.data == b"r2" => break,
                _ => {}
            }
        }
        assert!(cache.wait_synced(LONG).unwrap());
        assert_eq!(cache.get(&x), None);
        assert_equal_eventually(&cache, &zk, &root);
        cache.close().unwrap();
        zk.delete(&root, None).unwrap();
    }
}

/// `wait_synced` is a wait of the wait engine bound to the cache's session:
/// the session's end ends it with `SessionExpired` even while a listener
/// holds up the event thread, so that the cache itself never hears the end
/// (before, the wait ran on to its timeout and returned `Ok(false)`).
#[test]
fn wait_synced_ends_with_its_session_even_while_the_event_thread_is_held() {
    init_log();
    let servers = shared_server().connect_string();
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zkw = connect(&proxy.connect_string());
    let root = unique_root("cache-ended");
    plain(&servers)
        .create(&root, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let cache = TreeCache::start(&zkw, &root).unwrap();
    assert!(cache.wait_synced(LONG).unwrap());

    // A listener that holds the event thread at the session's end, before
    // the cache's watcher is told (the default watcher is told first).
    struct Hold {
        entered: std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>,
        release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    }
    impl zklock::ZooKeeperListener for Hold {
        fn connection_event(&self, event: &WatchedEvent) {
            if event.keeper_state == zklock::client::KeeperState::Expired {
                if let Some(tx) = self.entered.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                let _ = self.release.lock().unwrap().recv_timeout(LONG);
            }
        }
    }
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    let _registration = zkw.listen(Arc::new(Hold {
        entered: std::sync::Mutex::new(Some(entered_tx)),
        release: std::sync::Mutex::new(release_rx),
    }));
    force_expiry(&proxy, &servers, &zkw);
    entered.recv_timeout(LONG).unwrap();
    // The disconnect before the expiry reached the cache: it is stale.
    assert!(cache.is_stale());
    let r = cache.wait_synced(Duration::from_secs(20));
    let _ = release.send(());
    match r {
        Err(e) => assert!(e.is(ZkError::SessionExpired), "{e}"),
        Ok(synced) => panic!("wait_synced ran on past its session's end: Ok({synced})"),
    }
}

#[test]
fn reads_queued_when_the_connection_drops_wait_for_the_reconnect() {
    init_log();
    let servers = shared_server().connect_string();
    let zk = plain(&servers);
    let root = unique_root("cache-queued-loss");
    make_tree(&zk, &root, 10); // 1 + 10 + 100 nodes
    let proxy = FaultProxy::start(servers.as_str()).unwrap();
    let zkw = connect(&proxy.connect_string());
    let client = zkw.zookeeper().clone();
    // The event thread held: the answers to the cache's first two reads
    // (the root's listing and data) wait behind this callback.
    let (release, held) = std::sync::mpsc::channel::<()>();
    client.exists_async("/", None, move |_| {
        let _ = held.recv();
    });
    let cache = TreeCache::builder(&root)
        .max_in_flight(2)
        .start(&zkw)
        .unwrap();
    let events = cache.events();
    assert!(eventually(LONG, || client.queued_events() >= 2));
    // The listing handled now queues its 20 reads; two go out (one for each
    // answer), held by the stall.
    proxy.stall();
    release.send(()).unwrap();
    assert!(eventually(LONG, || cache.requests() >= 4));
    let before = cache.requests();
    assert_eq!(before, 4);
    // The connection drops: the client answers both reads with
    // ConnectionLoss, then tells Disconnected (Java's order). The answers
    // must not send the queued reads: they would only fail at once.
    proxy.cut();
    let until = std::time::Instant::now() + LONG;
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match events.recv_timeout(left) {
            Ok(CacheEvent::Suspended) => break,
            Ok(_) => {}
            Err(e) => panic!("no Suspended: {e}"),
        }
    }
    assert_eq!(
        cache.requests(),
        before,
        "reads sent while the connection was down"
    );
    // They go after the reconnect, and the load completes.
    proxy.reset();
    assert!(cache.wait_synced(LONG).unwrap());
    assert_equal_eventually(&cache, &zk, &root);
    cache.close().unwrap();
}
