//! The leader latch and the shared counters in Curator's and kazoo's layouts,
//! against a real ZooKeeper server with real Curator 5.4 (`tests/java/
//! CuratorLeader.java`) and kazoo 2.11 (`tests/python/kazoo_leader.py`)
//! participants on the same paths: one leader agreed by all across the
//! leader's stop, kill -9 and session expiry; counters incremented by all at
//! once with no lost update. Nothing of the test's is left behind.

mod common;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::participant::{Participant, ANSWER};
use common::{children, init_log, local, local_raw, local_zkw};
use zklock::client::ZooKeeper;
use zklock::recipes::counter::{Counter, VersionedValue};
use zklock::recipes::leader_latch::{LatchEvent, LatchState, LeaderLatch};
use zklock::testing::{eventually, unique_root, FaultProxy};
use zklock::{zkutil, Error, RetryConfig, ZkError, ZooKeeperWatcher};

/// Bound for a leadership change that waits for a session to time out.
const SUCCESSION: Duration = Duration::from_secs(30);

/// A participant and the lines it printed that no command took yet, so that
/// an event line printed while a command was answered is not lost.
struct Peer {
    p: Participant,
    backlog: Vec<String>,
}

impl Peer {
    fn java(servers: &str) -> Peer {
        Peer::from(Participant::java("CuratorLeader", &[servers]))
    }

    fn kazoo(servers: &str) -> Peer {
        Peer::from(Participant::kazoo("kazoo_leader.py", &[servers]))
    }

    fn from(p: Participant) -> Peer {
        Peer {
            p,
            backlog: Vec::new(),
        }
    }

    /// Sends `command`; returns its answer (the next line starting with
    /// `answer`).
    fn ask(&mut self, command: &str, answer: &str) -> String {
        self.p.send(command);
        self.take(answer, ANSWER)
    }

    /// The answer's words after its first.
    fn ask_value(&mut self, command: &str, answer: &str) -> String {
        let line = self.ask(command, answer);
        line[answer.len()..].trim().to_string()
    }

    /// The next line starting with `prefix` (the backlog first); panics
    /// without one within `timeout`.
    fn take(&mut self, prefix: &str, timeout: Duration) -> String {
        if let Some(i) = self.backlog.iter().position(|l| l.starts_with(prefix)) {
            return self.backlog.remove(i);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.p.try_line(left) {
                Some(l) if l.starts_with(prefix) => return l,
                Some(l) => {
                    assert!(!l.starts_with("error"), "participant: {l}");
                    self.backlog.push(l)
                }
                None => panic!("no {prefix:?} line within {timeout:?}: {:?}", self.backlog),
            }
        }
    }

    /// Whether a line starting with `prefix` was printed (without waiting).
    fn printed(&mut self, prefix: &str) -> bool {
        while let Some(l) = self.p.try_line(Duration::ZERO) {
            self.backlog.push(l);
        }
        self.backlog.iter().any(|l| l.starts_with(prefix))
    }
}

/// A watcher through its own proxy (an expiry can be forced), 4 s session,
/// session renewal on.
fn proxied() -> (FaultProxy, ZooKeeperWatcher) {
    init_log();
    let proxy = FaultProxy::start(local().as_str()).unwrap();
    let zkw = ZooKeeperWatcher::builder(&proxy.connect_string())
        .with_identifier("dialects-test")
        .with_session_timeout(Duration::from_secs(4))
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(20)))
        .with_session_renewal(true)
        .connect()
        .expect("connect");
    (proxy, zkw)
}

/// The id in the lowest `latch-` node of `path`, read directly.
fn lowest_id(zk: &ZooKeeper, path: &str) -> String {
    let mut nodes: Vec<(i64, String)> = children(zk, path)
        .into_iter()
        .map(|c| {
            let seq = c.rsplit("latch-").next().unwrap().parse().unwrap();
            (seq, c)
        })
        .collect();
    nodes.sort();
    let first = zkutil::join_znode(path, &nodes.first().expect("no latch node").1);
    String::from_utf8(zk.get_data(&first, false).unwrap().0).unwrap()
}

/// Every latch's view agrees that `expected` leads: each one's `leader()` /
/// `getLeader()` is the lowest node's id, and exactly one participant
/// believes it leads: `expected` (zklock's by its state, Curator's by its
/// `hasLeadership()`).
fn agree(
    zk: &ZooKeeper,
    path: &str,
    expected: &str,
    zl: &[&LeaderLatch],
    curator: &mut [&mut Peer],
) {
    assert_eq!(lowest_id(zk, path), expected);
    let mut leading = Vec::new();
    for l in zl {
        assert_eq!(l.leader().unwrap().unwrap().id, expected, "{}", l.id());
        if l.has_leadership() {
            leading.push(l.id().to_string());
        }
    }
    for (i, c) in curator.iter_mut().enumerate() {
        assert_eq!(c.ask_value("leader", "leaderid"), expected, "curator {i}");
        if c.ask_value("has", "has") == "true" {
            leading.push(format!("curator {i}"));
        }
    }
    assert_eq!(leading.len(), 1, "believe they lead: {leading:?}");
    if let Some(l) = zl.iter().find(|l| l.id() == expected) {
        assert!(l.has_leadership(), "{expected} does not know it leads");
    }
}

type Timeline = Arc<Mutex<Vec<(LatchEvent, Instant)>>>;

fn recorded(latch: &LeaderLatch) -> Timeline {
    let events: Timeline = Arc::default();
    let e = events.clone();
    latch.add_listener(move |ev: LatchEvent| e.lock().unwrap().push((ev, Instant::now())));
    events
}

fn kinds(t: &Timeline) -> Vec<LatchEvent> {
    t.lock().unwrap().iter().map(|(e, _)| *e).collect()
}

/// zklock's and Curator's latches on one path agree on one leader (the
/// lowest node's id), through the leader's close, a Curator leader's kill -9
/// (its session times out) and the expiry of a zklock leader's session
/// (renewal on: the latch ends, the new session does not lead until the
/// latch is started again, at the end of the queue).
#[test]
fn latch_shared_with_curator_agrees_through_stop_kill9_and_expiry() {
    init_log();
    let servers = local();
    let zk = local_raw();
    let path = format!("{}/latch", unique_root("dialects"));
    let (s1, s2) = (servers.clone(), servers.clone());
    let (ja, jb) = (
        thread::spawn(move || Peer::java(&s1)),
        thread::spawn(move || Peer::java(&s2)),
    );
    let z1w = local_zkw();
    let (proxy, zxw) = proxied();

    // Layout: z1, ca, zx, cb queue in this order.
    let z1 = LeaderLatch::new(&z1w, &path, "z1").unwrap();
    let z1_events = recorded(&z1);
    z1.start().unwrap();
    assert!(z1.has_leadership());
    assert_eq!(kinds(&z1_events), [LatchEvent::IsLeader]);
    let node = z1.our_path().unwrap();
    let name = zkutil::get_node_name(&node);
    assert!(
        name.starts_with("_c_") && name[3 + 36..].starts_with("-latch-"),
        "{name}"
    );
    assert_eq!(zk.get_data(&node, false).unwrap().0, b"z1");
    assert!(zk.exists(&node, false).unwrap().unwrap().ephemeral_owner != 0);

    let (mut a, mut b) = (ja.join().unwrap(), jb.join().unwrap());
    a.ask(&format!("latch {path} ca"), "started");
    assert!(eventually(ANSWER, || children(&zk, &path).len() == 2));
    let zx = LeaderLatch::new(&zxw, &path, "zx").unwrap();
    let zx_events = recorded(&zx);
    zx.start().unwrap();
    assert!(!zx.has_leadership());
    assert!(!zx.await_leadership(Duration::from_millis(50)).unwrap());
    b.ask(&format!("latch {path} cb"), "started");
    assert!(eventually(ANSWER, || children(&zk, &path).len() == 4));
    let order = |l: &LeaderLatch| -> Vec<String> {
        l.participants()
            .unwrap()
            .into_iter()
            .map(|p| p.id)
            .collect()
    };
    assert_eq!(order(&zx), ["z1", "ca", "zx", "cb"]);
    assert_eq!(a.ask_value("participants", "participants"), "z1,ca,zx,cb");
    agree(&zk, &path, "z1", &[&z1, &zx], &mut [&mut a, &mut b]);

    // 1. The leader closes: the next node's Curator latch leads.
    z1.close().unwrap();
    z1.close().unwrap(); // idempotent
    assert_eq!(z1.state(), LatchState::Closed);
    assert_eq!(kinds(&z1_events), [LatchEvent::IsLeader]); // close is silent
    a.take("leader ca", ANSWER);
    agree(&zk, &path, "ca", &[&zx], &mut [&mut a, &mut b]);

    // 2. The Curator leader is killed: its session times out, zx leads.
    a.p.kill9();
    assert!(zx.await_leadership(SUCCESSION).unwrap());
    agree(&zk, &path, "zx", &[&zx], &mut [&mut b]);
    assert!(!b.printed("leader cb"));

    // 3. zx is cut off until the server expires its session (renewal on):
    //    zx hears InDoubt before Curator's cb leads, then Lost once it
    //    reconnects; the latch is over, its new session does not lead.
    let old = zxw.zookeeper().session_id();
    proxy.stall();
    b.take("leader cb", SUCCESSION);
    let cb_leads = Instant::now();
    proxy.reset();
    assert!(eventually(ANSWER, || kinds(&zx_events).len() >= 4));
    assert_eq!(
        kinds(&zx_events),
        [
            LatchEvent::IsLeader,
            LatchEvent::LeadershipInDoubt,
            LatchEvent::NotLeader,
            LatchEvent::LeadershipLost
        ]
    );
    let in_doubt = zx_events.lock().unwrap()[1].1;
    assert!(in_doubt < cb_leads, "zx still believed it led when cb led");
    let r = zx.await_leadership(Duration::from_millis(10));
    assert!(
        matches!(&r, Err(e) if e.is(ZkError::SessionExpired)),
        "{r:?}"
    );
    assert_eq!(zx.state(), LatchState::Failed);
    assert!(eventually(ANSWER, || {
        let id = zxw.zookeeper().session_id();
        id != 0 && id != old && zxw.state() == zklock::client::State::Connected
    }));
    assert!(!zx.has_leadership());
    agree(&zk, &path, "cb", &[&zx], &mut [&mut b]);
    assert_eq!(order(&zx), ["cb"]);

    // 4. Started again, zx enters the new session at the end of the queue,
    //    and leads once cb closes.
    zx.start().unwrap();
    assert!(!zx.has_leadership());
    assert_eq!(b.ask_value("participants", "participants"), "cb,zx");
    b.ask("close", "closed");
    assert!(zx.await_leadership(SUCCESSION).unwrap());
    assert_eq!(lowest_id(&zk, &path), "zx");
    zx.close().unwrap();
    // Nothing left: the nodes are gone, and so are the container parents.
    let root = zkutil::get_parent(&path).unwrap();
    assert!(eventually(SUCCESSION, || zk
        .exists(root, false)
        .unwrap()
        .is_none()));
    b.p.finish();
    drop(z1);
    drop(zx);
    z1w.close().unwrap();
    zxw.close().unwrap();
}

/// The latch's bad inputs and misuse are typed errors; a dropped latch
/// leaves nothing behind.
#[test]
fn latch_misuse_is_a_typed_error_and_drop_leaves_nothing() {
    let zkw = local_zkw();
    let zk = local_raw();
    assert!(matches!(
        LeaderLatch::new(&zkw, "no-slash", "x"),
        Err(Error::BadArguments(_))
    ));
    let path = format!("{}/latch", unique_root("dialects-misuse"));
    let l = LeaderLatch::new(&zkw, &path, "x").unwrap();
    assert_eq!(l.state(), LatchState::Latent);
    assert!(matches!(
        l.await_leadership(Duration::from_millis(10)),
        Err(Error::Closed)
    ));
    // A directory of another dialect (a kazoo lock node) is refused.
    zkutil::create_with_parents(&zkw, &path).unwrap();
    let foreign = zkutil::join_znode(&path, "0123abcd__lock__0000000000");
    zkutil::create_with_parents(&zkw, &foreign).unwrap();
    let r = l.start();
    assert!(
        matches!(
            &r,
            Err(Error::MixedDialect {
                found: zklock::lock::Dialect::Kazoo,
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(children(&zk, &path), ["0123abcd__lock__0000000000"]);
    assert_eq!(l.state(), LatchState::Latent);
    zk.delete(&foreign, None).unwrap();
    // Made persistent above: the latch makes them again, as containers.
    zk.delete(&path, None).unwrap();
    zk.delete(zkutil::get_parent(&path).unwrap(), None).unwrap();
    l.start().unwrap();
    assert!(matches!(l.start(), Err(Error::BadArguments(_))));
    assert!(l.await_leadership(Duration::MAX).unwrap());
    let second = LeaderLatch::new(&zkw, &path, "y").unwrap();
    second.start().unwrap();
    assert_eq!(children(&zk, &path).len(), 2);
    drop(l);
    assert!(second.await_leadership(SUCCESSION).unwrap());
    l_closed_cannot_start(&second);
    drop(second);
    // The parents are containers (Curator's creatingParentContainersIfNeeded):
    // the server removes them once empty (the test server checks every
    // second), up to the test's root.
    let root = zkutil::get_parent(&path).unwrap();
    assert!(eventually(SUCCESSION, || zk
        .exists(root, false)
        .unwrap()
        .is_none()));
    zkw.close().unwrap();
}

fn l_closed_cannot_start(l: &LeaderLatch) {
    l.close().unwrap();
    assert!(!l.has_leadership());
    assert!(matches!(l.start(), Err(Error::BadArguments(_))));
}

/// kazoo's `Counter` shared by kazoo and zklock (text layout, int and
/// float) and, in kazoo's `support_curator` mode, by kazoo, Curator's
/// `SharedCount` and zklock: everyone increments at once, no update is lost,
/// everyone reads the same value.
#[test]
fn counter_shared_with_kazoo_and_curator_loses_no_update() {
    init_log();
    let servers = local();
    let zk = local_raw();
    let root = unique_root("dialects-counter");
    let (s1, s2) = (servers.clone(), servers.clone());
    let (jk, jc) = (
        thread::spawn(move || Peer::kazoo(&s1)),
        thread::spawn(move || Peer::java(&s2)),
    );
    let (mut kazoo, mut curator) = (jk.join().unwrap(), jc.join().unwrap());
    const EACH: i64 = 60;
    const THREADS: usize = 2;

    // zklock threads adding `step` EACH times each on their own sessions.
    fn zklock_adds<T: zklock::recipes::counter::CounterValue>(
        make: impl Fn(&ZooKeeperWatcher) -> Counter<T> + Send + Sync + 'static,
        step: T,
    ) -> Vec<thread::JoinHandle<()>> {
        let make = Arc::new(make);
        (0..THREADS)
            .map(|_| {
                let make = make.clone();
                thread::spawn(move || {
                    let zkw = local_zkw();
                    let c = make(&zkw);
                    for _ in 0..EACH {
                        let change = c.add(step).unwrap();
                        assert_eq!(change.post_value, change.pre_value.plus(step).unwrap());
                    }
                    zkw.close().unwrap();
                })
            })
            .collect()
    }

    // Text, int: kazoo and zklock.
    let ints = format!("{root}/ints");
    kazoo.p.send(&format!("counter {ints} {EACH}"));
    for h in zklock_adds(move |w| Counter::new(w, &ints, 0i64).unwrap(), 1) {
        h.join().unwrap();
    }
    kazoo.take("done", ANSWER);
    let ints = format!("{root}/ints");
    let total = EACH * (THREADS as i64 + 1);
    assert_eq!(
        zk.get_data(&ints, false).unwrap().0,
        total.to_string().as_bytes()
    );
    assert_eq!(
        kazoo.ask_value(&format!("value {ints}"), "value"),
        total.to_string()
    );

    // Text, float: kazoo and zklock add 0.5 each time ("90.0", Python's repr).
    let floats = format!("{root}/floats");
    kazoo.p.send(&format!("counter {floats} {EACH} float"));
    let f = floats.clone();
    for h in zklock_adds(move |w| Counter::new(w, &f, 0.0f64).unwrap(), 0.5) {
        h.join().unwrap();
    }
    kazoo.take("done", ANSWER);
    let expected = format!("{:.1}", total as f64 * 0.5);
    assert_eq!(zk.get_data(&floats, false).unwrap().0, expected.as_bytes());
    assert_eq!(
        kazoo.ask_value(&format!("value {floats} float"), "value"),
        expected
    );

    // Curator's layout (4 bytes): kazoo support_curator, Curator's
    // SharedCount and zklock at once.
    let shared = format!("{root}/shared");
    let zkw = local_zkw();
    Counter::curator(&zkw, &shared, 0).unwrap().value().unwrap(); // made first, as kazoo's ensure_path
    kazoo.p.send(&format!("counter {shared} {EACH} curator"));
    curator.p.send(&format!("shared {shared} {EACH}"));
    let s = shared.clone();
    for h in zklock_adds(move |w| Counter::curator(w, &s, 0).unwrap(), 1) {
        h.join().unwrap();
    }
    kazoo.take("done", ANSWER);
    curator.take("done", ANSWER);
    let total = EACH * (THREADS as i64 + 2);
    assert_eq!(
        zk.get_data(&shared, false).unwrap().0,
        (total as i32).to_be_bytes()
    );
    assert_eq!(
        Counter::curator(&zkw, &shared, 0).unwrap().value().unwrap(),
        total
    );
    assert_eq!(
        kazoo.ask_value(&format!("value {shared} curator"), "value"),
        total.to_string()
    );
    assert_eq!(
        curator.ask_value(&format!("sharedget {shared}"), "value"),
        total.to_string()
    );

    // Compare-and-set on the version, and the typed errors.
    let c = Counter::new(&zkw, &ints, 0i64).unwrap();
    let now = c.get().unwrap();
    assert!(c.try_set(now, 7).unwrap());
    assert!(!c.try_set(now, 8).unwrap(), "a stale version must lose");
    assert_eq!(c.value().unwrap(), 7);
    let change = c.sub(2).unwrap();
    assert_eq!((change.pre_value, change.post_value), (7, 5));
    assert_eq!(kazoo.ask_value(&format!("value {ints}"), "value"), "5");
    let as_float = Counter::new(&zkw, &floats, 0i64).unwrap();
    assert!(
        matches!(as_float.value(), Err(Error::BadArguments(_))),
        "90.0 is no int"
    );
    let max = Counter::new(&zkw, &ints, 0i64).unwrap();
    max.try_set(max.get().unwrap(), i64::MAX).unwrap();
    assert!(matches!(max.add(1), Err(Error::BadArguments(_))));
    let cur = Counter::curator(&zkw, &shared, 0).unwrap();
    let v: VersionedValue<i64> = cur.get().unwrap();
    assert!(matches!(
        cur.try_set(v, 1 << 40),
        Err(Error::BadArguments(_))
    ));
    assert!(matches!(
        Counter::curator(&zkw, &shared, 1 << 40),
        Err(Error::BadArguments(_))
    ));
    assert!(matches!(
        Counter::new(&zkw, "bad//path", 0i64),
        Err(Error::BadArguments(_))
    ));

    // Nothing but the three counters was made.
    assert_eq!(children(&zk, &root), ["floats", "ints", "shared"]);
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    kazoo.p.finish();
    curator.p.finish();
    zkw.close().unwrap();
}

/// A leader whose connection drops and comes back within its session hears
/// InDoubt (not leading meanwhile), then Restored and IsLeader again, as
/// Curator's SUSPENDED / RECONNECTED; a second latch never leads meanwhile.
#[test]
fn latch_leader_cut_off_within_its_session_is_in_doubt_then_restored() {
    let (proxy, zkw) = proxied();
    let other = local_zkw();
    let zk = local_raw();
    let path = format!("{}/latch", unique_root("dialects-cut"));
    let leader = LeaderLatch::new(&zkw, &path, "l").unwrap();
    let events = recorded(&leader);
    leader.start().unwrap();
    let waiting = LeaderLatch::new(&other, &path, "w").unwrap();
    waiting.start().unwrap();
    let session = zkw.zookeeper().session_id();
    proxy.cut();
    assert!(
        eventually(ANSWER, || kinds(&events).len() >= 5),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(
        kinds(&events),
        [
            LatchEvent::IsLeader,
            LatchEvent::LeadershipInDoubt,
            LatchEvent::NotLeader,
            LatchEvent::LeadershipRestored,
            LatchEvent::IsLeader
        ]
    );
    assert_eq!(zkw.zookeeper().session_id(), session);
    assert!(leader.has_leadership());
    assert!(!waiting.has_leadership());
    assert_eq!(lowest_id(&zk, &path), "l");
    leader.close().unwrap();
    assert!(waiting.await_leadership(SUCCESSION).unwrap());
    waiting.close().unwrap();
    assert!(children(&zk, &path).is_empty());
    zkw.close().unwrap();
    other.close().unwrap();
}

/// What a zklock leader function reports to the test.
#[derive(Debug)]
enum Turn {
    /// It leads, with its fencing token.
    Leads(i64),
    /// Its leadership stopped holding (the signal), when.
    NotLeader { in_doubt: bool, at: Instant },
}

/// zklock's `LeaderSelector` in Curator's layout takes turns with Curator's
/// (auto-requeued) selectors: one leader at a time, agreed by both sides'
/// participant lists; a Curator leader's kill -9 hands over after its session
/// times out; a zklock leader cut off is told InDoubt before a Curator
/// selector leads.
#[test]
fn selector_takes_turns_with_curator_through_kill9_and_a_partition() {
    use std::sync::mpsc;
    use zklock::lock::Dialect;
    use zklock::recipes::leader_selector::{LeaderSelector, Leadership};
    init_log();
    let servers = local();
    let zk = local_raw();
    let path = format!("{}/selector", unique_root("dialects-selector"));
    let s1 = servers.clone();
    let jq = thread::spawn(move || Peer::java(&s1));
    let mut p = Peer::java(&servers);
    let (proxy, zkw) = proxied();
    let sel = Arc::new(LeaderSelector::new(&zkw, &path, Dialect::Curator, "z").unwrap());
    let ids = |s: &LeaderSelector| -> Vec<String> {
        s.participants()
            .unwrap()
            .into_iter()
            .map(|p| p.id)
            .collect()
    };

    // 1. Curator's cp leads; zklock's z queues behind it.
    p.ask(&format!("selector {path} cp"), "started");
    p.take("leader cp", ANSWER);
    let (tx, turns) = mpsc::channel::<Turn>();
    let (release, released) = mpsc::channel::<()>();
    let (s, t) = (sel.clone(), tx.clone());
    let first = thread::spawn(move || {
        s.run(move |l: &Leadership| {
            t.send(Turn::Leads(l.fencing_token())).unwrap();
            released.recv().unwrap();
        })
    });
    assert!(eventually(ANSWER, || ids(&sel) == ["cp", "z"]));
    assert!(!sel.has_leadership());
    let node = zkutil::join_znode(
        &path,
        &children(&zk, &path)
            .into_iter()
            .find(|c| zk.get_data(&zkutil::join_znode(&path, c), false).unwrap().0 == b"z")
            .unwrap(),
    );
    let name = zkutil::get_node_name(&node);
    assert!(name.starts_with("_c_") && name.contains("-lock-"), "{name}");

    // 2. cp gives up (and requeues): z leads, cp does not.
    p.ask("release", "releasing");
    p.take("released cp", ANSWER);
    let Turn::Leads(token) = turns.recv_timeout(ANSWER).unwrap() else {
        panic!("not leading")
    };
    assert!(token > 0);
    assert!(sel.has_leadership());
    assert!(eventually(ANSWER, || ids(&sel) == ["z", "cp"]));
    assert_eq!(p.ask_value("selparticipants", "participants"), "z,cp");
    assert!(!p.printed("leader cp"));

    // 3. z's function returns: cp leads again.
    release.send(()).unwrap();
    first.join().unwrap().unwrap();
    assert!(!sel.has_leadership());
    p.take("leader cp", ANSWER);

    // 4. z queues again, then cq behind it; cp is killed: z leads once cp's
    //    session times out.
    let (s, t) = (sel.clone(), tx);
    let second = thread::spawn(move || {
        s.run(move |l: &Leadership| {
            t.send(Turn::Leads(l.fencing_token())).unwrap();
            assert!(l.wait_until_not_leader(Duration::from_secs(120)));
            t.send(Turn::NotLeader {
                in_doubt: l.is_in_doubt(),
                at: Instant::now(),
            })
            .unwrap();
        })
    });
    assert!(eventually(ANSWER, || ids(&sel) == ["cp", "z"]));
    let mut q = jq.join().unwrap();
    q.ask(&format!("selector {path} cq"), "started");
    assert!(eventually(ANSWER, || ids(&sel) == ["cp", "z", "cq"]));
    p.p.kill9();
    let Turn::Leads(second_token) = turns.recv_timeout(SUCCESSION).unwrap() else {
        panic!("not leading")
    };
    assert!(second_token > token, "fencing tokens grow");
    assert!(sel.has_leadership());
    assert_eq!(q.ask_value("selparticipants", "participants"), "z,cq");

    // 5. z is cut off: told InDoubt, before cq leads (after z's session
    //    expired on the server).
    proxy.stall();
    let Turn::NotLeader { in_doubt, at } = turns.recv_timeout(SUCCESSION).unwrap() else {
        panic!("no signal")
    };
    assert!(in_doubt);
    assert!(!sel.has_leadership());
    q.take("leader cq", SUCCESSION);
    assert!(at < Instant::now());
    proxy.reset();
    second.join().unwrap().unwrap();
    assert_eq!(q.ask_value("selparticipants", "participants"), "cq");
    q.ask("selclose", "closed");
    q.ask("release", "releasing");
    assert!(eventually(ANSWER, || children(&zk, &path).is_empty()));
    q.p.finish();
    zkw.close().unwrap();
}

/// zklock's `LeaderSelector` in kazoo's layout takes turns with kazoo's
/// `Election`: `contenders()` agree on both sides; a queued zklock contender
/// cancelled leaves the queue (kazoo's `cancel`); a kazoo leader's kill -9
/// hands over once its session times out.
#[test]
fn selector_takes_turns_with_kazoo_election_through_cancel_and_kill9() {
    use std::sync::mpsc;
    use zklock::lock::Dialect;
    use zklock::recipes::leader_selector::{LeaderSelector, Leadership};
    init_log();
    let zk = local_raw();
    let zkw = local_zkw();
    let path = format!("{}/election", unique_root("dialects-election"));
    let mut k = Peer::kazoo(&local());
    k.ask(&format!("election {path} kk"), "started");
    k.take("leader kk", ANSWER);
    let sel = Arc::new(LeaderSelector::new(&zkw, &path, Dialect::Kazoo, "zk").unwrap());
    let (tx, leads) = mpsc::channel::<i64>();
    let (release, released) = mpsc::channel::<()>();
    let s = sel.clone();
    let run = thread::spawn(move || {
        s.run(move |l: &Leadership| {
            tx.send(l.fencing_token()).unwrap();
            released.recv().unwrap();
            "done"
        })
    });
    let contenders = |k: &mut Peer| k.ask_value(&format!("contenders {path}"), "contenders");
    assert!(eventually(ANSWER, || sel.participants().unwrap().len() == 2));
    assert_eq!(contenders(&mut k), "kk,zk");
    let name = children(&zk, &path)
        .into_iter()
        .find(|c| zk.get_data(&zkutil::join_znode(&path, c), false).unwrap().0 == b"zk")
        .unwrap();
    assert!(
        name.contains("__lock__") && !name.starts_with("_c_"),
        "{name}"
    );

    // kazoo's leader function returns: zklock leads.
    k.ask("release", "releasing");
    k.take("released kk", ANSWER);
    leads.recv_timeout(ANSWER).unwrap();
    assert!(sel.has_leadership());
    assert_eq!(contenders(&mut k), "zk");
    k.ask(&format!("election {path} kk"), "started");
    assert!(eventually(ANSWER, || sel.participants().unwrap().len() == 2));
    assert_eq!(sel.leader().unwrap().unwrap().id, "zk");
    assert!(!k.printed("leader kk"));

    // zklock's returns: kazoo's leads.
    release.send(()).unwrap();
    assert_eq!(run.join().unwrap().unwrap(), "done");
    k.take("leader kk", ANSWER);

    // A queued zklock contender, cancelled, leaves the queue.
    let waiting = Arc::new(LeaderSelector::new(&zkw, &path, Dialect::Kazoo, "zw").unwrap());
    let w = waiting.clone();
    let queued = thread::spawn(move || w.run(|_: &Leadership| ()));
    assert!(eventually(ANSWER, || waiting.participants().unwrap().len() == 2));
    assert_eq!(contenders(&mut k), "kk,zw");
    waiting.cancel();
    let r = queued.join().unwrap();
    assert!(matches!(r, Err(Error::Cancelled { .. })), "{r:?}");
    assert_eq!(contenders(&mut k), "kk");
    assert!(matches!(
        LeaderSelector::new(&zkw, &path, Dialect::HBase, "x"),
        Err(Error::BadArguments(_))
    ));
    // kazoo's leader is killed (kill -9): once its session times out, zklock
    // leads; requeued (Curator's autoRequeue), alone, it leads turn after
    // turn, each a new node with a larger fencing token, until the function
    // says stop.
    k.p.kill9();
    let mut tokens = Vec::new();
    sel.run_requeued(|l: &Leadership| {
        tokens.push(l.fencing_token());
        tokens.len() < 3
    })
    .unwrap();
    assert_eq!(tokens.len(), 3);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert!(eventually(ANSWER, || children(&zk, &path).is_empty()));
    zkutil::delete_node_recursively(&zkw, zkutil::get_parent(&path).unwrap()).unwrap();
    zkw.close().unwrap();
}

/// A waiting latch whose session expires (renewal on) ends with
/// `SessionExpired` and never leads in the new session, even when the leader
/// ahead of it leaves; `start` enters the new session anew.
#[test]
fn latch_waiting_across_an_expiry_never_continues_in_the_renewed_session() {
    let (proxy, zkw) = proxied();
    let other = local_zkw();
    let zk = local_raw();
    let path = format!("{}/latch", unique_root("dialects-renewal"));
    let leader = LeaderLatch::new(&other, &path, "l").unwrap();
    leader.start().unwrap();
    let waiting = Arc::new(LeaderLatch::new(&zkw, &path, "w").unwrap());
    let events = recorded(&waiting);
    waiting.start().unwrap();
    let w = waiting.clone();
    let awaiting = thread::spawn(move || w.await_leadership(Duration::from_secs(120)));
    let old = zkw.zookeeper().session_id();
    common::force_expiry(&proxy, &local(), &zkw);
    let r = awaiting.join().unwrap();
    assert!(
        matches!(&r, Err(e) if e.is(ZkError::SessionExpired)),
        "{r:?}"
    );
    assert_eq!(waiting.state(), LatchState::Failed);
    assert!(eventually(ANSWER, || {
        let id = zkw.zookeeper().session_id();
        id != 0 && id != old && zkw.state() == zklock::client::State::Connected
    }));
    leader.close().unwrap();
    thread::sleep(Duration::from_millis(300)); // deliberate: a stray round would act now
    assert!(!waiting.has_leadership());
    assert!(
        children(&zk, &path).is_empty(),
        "{:?}",
        children(&zk, &path)
    );
    assert!(kinds(&events).is_empty(), "{:?}", kinds(&events)); // never led
    waiting.start().unwrap();
    assert!(waiting.has_leadership());
    assert_eq!(kinds(&events), [LatchEvent::IsLeader]);
    waiting.close().unwrap();
    assert!(children(&zk, &path).is_empty());
    zkw.close().unwrap();
    other.close().unwrap();
}

/// Entry points are atomic (issue 44): a second `run` of one selector while
/// the first is leading refuses (`BadArguments`) and makes no second node;
/// a second `start` of one leader latch while the first is making its node
/// (held at `NodeMade`) refuses, making nothing.
#[test]
fn a_second_run_or_latch_start_while_the_first_is_under_way_makes_nothing() {
    use std::sync::mpsc;
    use zklock::lock::Dialect;
    use zklock::recipes::leader_latch::LatchStep;
    use zklock::recipes::leader_selector::{LeaderSelector, Leadership};
    init_log();
    let zk = local_raw();
    let zkw = local_zkw();

    let path = format!("{}/election", unique_root("selector-twice"));
    let sel = Arc::new(LeaderSelector::new(&zkw, &path, Dialect::Curator, "s").unwrap());
    let (leads, leading) = mpsc::channel::<()>();
    let (go, gone) = mpsc::channel::<()>();
    let s = sel.clone();
    let first = thread::spawn(move || {
        s.run(|_: &Leadership| {
            leads.send(()).unwrap();
            gone.recv().unwrap();
        })
    });
    leading.recv_timeout(ANSWER).unwrap();
    let second = sel.run(|_: &Leadership| ());
    assert!(matches!(second, Err(Error::BadArguments(_))), "{second:?}");
    assert_eq!(children(&zk, &path).len(), 1, "a second node was made");
    go.send(()).unwrap();
    first.join().unwrap().unwrap();
    assert!(eventually(ANSWER, || children(&zk, &path).is_empty()));

    let latch_path = unique_root("latch-twice");
    let (made_tx, made_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (made_tx, go_rx) = (Mutex::new(made_tx), Mutex::new(go_rx));
    let latch = Arc::new(
        LeaderLatch::new(&zkw, &latch_path, "l")
            .unwrap()
            .with_step_hook(move |step, _| {
                if step == LatchStep::NodeMade {
                    made_tx.lock().unwrap().send(()).unwrap();
                    go_rx.lock().unwrap().recv_timeout(ANSWER).unwrap();
                }
            }),
    );
    let l = latch.clone();
    let first = thread::spawn(move || l.start());
    made_rx.recv_timeout(ANSWER).unwrap();
    let second = latch.start();
    assert!(matches!(second, Err(Error::BadArguments(_))), "{second:?}");
    assert_eq!(
        children(&zk, &latch_path).len(),
        1,
        "a second node was made"
    );
    go_tx.send(()).unwrap();
    first.join().unwrap().unwrap();
    assert!(latch.has_leadership());
    latch.close().unwrap();
    assert!(children(&zk, &latch_path).is_empty());
    zkw.close().unwrap();
}

/// A `cancel` while `run_requeued`'s leader function runs ends
/// `run_requeued` with `Cancelled` once the function returns (it asked to
/// requeue), instead of queuing again with a new, uncancelled lock (issue
/// 44); no node is left. A `run` called after the cancel queues again.
#[test]
fn selector_cancel_while_leading_stops_run_requeued() {
    use std::sync::mpsc;
    use zklock::lock::Dialect;
    use zklock::recipes::leader_selector::{LeaderSelector, Leadership};
    init_log();
    let zk = local_raw();
    let zkw = local_zkw();
    let path = format!("{}/election", unique_root("selector-cancel"));
    let sel = Arc::new(LeaderSelector::new(&zkw, &path, Dialect::Kazoo, "z").unwrap());
    let (leads, leading) = mpsc::channel::<()>();
    let (go, gone) = mpsc::channel::<()>();
    let (done, finished) = mpsc::channel();
    let s = sel.clone();
    thread::spawn(move || {
        let mut turns = 0;
        let r = s.run_requeued(|_: &Leadership| {
            turns += 1;
            leads.send(()).unwrap();
            gone.recv().unwrap();
            true
        });
        done.send((r, turns)).unwrap();
    });
    leading.recv_timeout(ANSWER).unwrap();
    assert_eq!(children(&zk, &path).len(), 1);
    sel.cancel();
    go.send(()).unwrap();
    let (r, turns) = finished
        .recv_timeout(ANSWER)
        .expect("run_requeued queued again after cancel");
    assert!(matches!(r, Err(Error::Cancelled { .. })), "{r:?}");
    assert_eq!(turns, 1);
    assert!(eventually(ANSWER, || children(&zk, &path).is_empty()));
    assert!(leading.try_recv().is_err());
    // A fresh `run` after the cancel queues and leads again.
    assert_eq!(sel.run(|_: &Leadership| 7).unwrap(), 7);
    assert!(children(&zk, &path).is_empty());
    zkutil::delete_node_recursively(&zkw, zkutil::get_parent(&path).unwrap()).unwrap();
    zkw.close().unwrap();
}
