//! The recipes side by side (issue 20): zklock's `DistributedQueue` and
//! `LeaderElectionSupport` against Apache Curator's `DistributedQueue` and
//! `LeaderLatch`, ZooKeeper's own Java recipes (`DistributedQueue`,
//! `LeaderElectionSupport`) and kazoo's `Queue` and `Election`, on one server,
//! in one run. Prints figures and a markdown table; fails only when a library
//! loses or duplicates items.
//!
//! `cargo bench --bench recipes` (`make bench`; `make curator` and `make kazoo`
//! install the other participants; without them their rows say why they are
//! missing). Uses `$ZK_SERVERS` if set, else starts a ZooKeeper server through
//! `zklock::testing`. Sizes: `ZK_RECIPES_ITEMS` (default 1000),
//! `ZK_RECIPES_SUCCESSIONS` (default 20), `ZK_BENCH_ROUNDS` (default 5).
//! Sections: `ZK_BENCH_SECTIONS`, a comma-separated subset of `offer`, `take`,
//! `4x4`, `succession` (default all; `take` takes what `offer` offered, so it
//! runs the offer too); the phases not chosen show "—".
//!
//! Rounds: after one unreported warm-up round of each library, the libraries
//! take turns for `ZK_BENCH_ROUNDS` rounds (zklock, Curator, ZooKeeper's
//! recipe, kazoo, zklock, ...; each round all four phases, in directories of
//! its own), so a burst of load on the machine falls on all of them. Each
//! round prints its figures; the tables give the median and the range
//! (min–max) over the rounds, and the load average before and after.
//!
//! 1. **Queue, offer**: one producer (its own session) offers N items.
//! 2. **Queue, take**: one consumer takes those N items.
//! 3. **Queue, 4 × 4**: 4 producers and 4 consumers (8 sessions) move N items,
//!    timed until the last item is taken.
//!
//!    For each: items/s, ZooKeeper requests per item (`zk_packets_received` from
//!    `mntr`, the reads' own cost subtracted, sessions' connects and closes
//!    included) and notifications per item (`zk_packets_sent` −
//!    `zk_packets_received`: every request and ping is answered once).
//! 4. **Leader succession**: K + 1 candidates (a session each) offer in turn;
//!    K times the leader steps down and the next is elected: time per
//!    succession (from the step-down call to the successor's own signal:
//!    zklock's `ElectedComplete`, Curator's `await`, Java's
//!    `ELECTED_COMPLETE`, kazoo's leader function called), requests and
//!    notifications per succession. The requests include setting up the
//!    K + 1 candidates and their sessions (connect, offer, first
//!    determination, close), spread over the K successions.
//!
//! The peers speak the line protocol of `benches/java/RecipesBench.java` and
//! `benches/python/kazoo_recipes_bench.py` (`common::LineProcess`).

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::{Acl, CreateMode};
use zklock::recipes::election::{ElectionEventType, LeaderElectionSupport};
use zklock::recipes::queue::DistributedQueue;
use zklock::testing::example_servers;
use zklock::{zkutil, ZooKeeperWatcher};

mod common;
use common::*;

const JARS: [&str; 10] = [
    "/usr/share/java/curator-recipes.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-client.jar",
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/zookeeper-recipes-queue.jar",
    "/usr/share/java/zookeeper-recipes-election.jar",
    "/usr/share/java/guava.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];
const JVM_OPTIONS: [&str; 2] = ["-Xmx256m", "-XX:+UseSerialGC"];
const KAZOO_SCRIPT: &str = "benches/python/kazoo_recipes_bench.py";
/// The longest a peer may take to answer one command.
const ANSWER_BOUND: Duration = Duration::from_secs(600);

/// One phase's figures.
#[derive(Clone, Copy)]
struct Phase {
    /// Items moved (or successions).
    n: u64,
    elapsed: Duration,
    traffic: Traffic,
    /// Succession only: the median time of one.
    p50: Option<Duration>,
}

impl Phase {
    fn rate(&self) -> f64 {
        self.n as f64 / self.elapsed.as_secs_f64()
    }

    fn requests(&self) -> f64 {
        self.traffic.received as f64 / self.n.max(1) as f64
    }

    fn notifications(&self) -> f64 {
        self.traffic.notifications() as f64 / self.n.max(1) as f64
    }

    /// Succession: the median one, ms.
    fn p50_ms(&self) -> f64 {
        self.p50.unwrap_or_default().as_secs_f64() * 1e3
    }

    /// Succession: the mean one, ms.
    fn mean_ms(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e3 / self.n.max(1) as f64
    }
}

/// One phase's figure over the rounds that ran it: "median (min–max)", or
/// "—" when no round did.
fn over_rounds(
    rounds: &[[Option<Phase>; 4]],
    phase: usize,
    f: fn(&Phase) -> f64,
    digits: usize,
) -> String {
    let v: Vec<f64> = rounds
        .iter()
        .filter_map(|r| r[phase].as_ref())
        .map(f)
        .collect();
    Spread::of(&v).map_or_else(|| "—".into(), |s| s.text(digits))
}

/// A library's row: its four phases, or why it has none.
struct Row {
    queue_name: String,
    election_name: String,
    /// The reported rounds' phases, or why the library did not run.
    phases: Result<Vec<[Option<Phase>; 4]>, String>,
}

/// A peer process (Java or Python) in `serve` mode.
struct Peer {
    proc: LineProcess,
}

impl Peer {
    fn start(what: &str, cmd: Command) -> Result<Peer, String> {
        let proc = LineProcess::spawn(what, cmd).map_err(|e| format!("cannot start: {e}"))?;
        match proc.recv(Duration::from_secs(120)) {
            Ok(line) if line.starts_with("ready") => {
                println!("{what}: {line}");
                Ok(Peer { proc })
            }
            Ok(line) => Err(line),
            Err(e) => Err(e),
        }
    }

    /// Runs `command` in a traffic window: its figures.
    fn run(&mut self, m: &Mntr, command: &str) -> Result<Phase, String> {
        let w = Window::start(m);
        let line = self.proc.ask(command, ANSWER_BOUND)?;
        let traffic = w.stop(m);
        if !line.starts_with("ok") {
            return Err(format!("{command}: {line}"));
        }
        let f = parse_fields(&line);
        let n = f
            .get("items")
            .or(f.get("successions"))
            .copied()
            .unwrap_or(0.0) as u64;
        let elapsed = Duration::from_nanos(f.get("elapsed_ns").copied().unwrap_or(0.0) as u64);
        let p50 = f.get("p50_ns").map(|&ns| Duration::from_nanos(ns as u64));
        Ok(Phase {
            n,
            elapsed,
            traffic,
            p50,
        })
    }
}

/// The four phases through a peer (`impl_name`: curator, zk, kazoo).
fn peer_phases(
    peer: &mut Peer,
    m: &Mntr,
    impl_name: &str,
    root: &str,
    items: u64,
    k: u64,
    sections: Sections,
) -> [Option<Phase>; 4] {
    let mut run = |i: usize, cmd: String, expect: u64| {
        if !sections.runs(i) {
            return None;
        }
        match peer.run(m, &cmd) {
            Ok(p) if p.n == expect => Some(p),
            Ok(p) => {
                println!("  {impl_name}: {cmd}: {} instead of {expect}", p.n);
                None
            }
            Err(e) => {
                println!("  {impl_name}: {e}");
                None
            }
        }
    };
    let q = format!("{root}/q");
    let mixed = format!("{root}/q-mixed");
    [
        run(0, format!("queue {impl_name} {q} offer {items}"), items),
        run(1, format!("queue {impl_name} {q} take {items}"), items),
        run(
            2,
            format!("queue {impl_name} {mixed} mixed 4 4 {items}"),
            items,
        ),
        run(3, format!("succession {impl_name} {root}/election {k}"), k),
    ]
}

/// How zklock's producer offers.
#[derive(Clone, Copy, PartialEq)]
enum Offer {
    /// `offer`, one at a time.
    One,
    /// One `offer_all`.
    All,
    /// The floor: the client's bare `create` of the same nodes, one at a
    /// time (what `offer` costs beyond it is the recipe's).
    Bare,
}

/// The phases `ZK_BENCH_SECTIONS` chose (see the module docs).
#[derive(Clone, Copy)]
struct Sections {
    offer: bool,
    take: bool,
    mixed: bool,
    succession: bool,
}

impl Sections {
    fn from_env() -> Sections {
        let Ok(v) = std::env::var("ZK_BENCH_SECTIONS") else {
            return Sections {
                offer: true,
                take: true,
                mixed: true,
                succession: true,
            };
        };
        let has = |name: &str| v.split(',').any(|s| s.trim() == name);
        Sections {
            offer: has("offer") || has("take"),
            take: has("take"),
            mixed: has("4x4"),
            succession: has("succession"),
        }
    }

    /// Whether phase `i` (offer, take, 4 × 4, succession) runs.
    fn runs(&self, i: usize) -> bool {
        [self.offer, self.take, self.mixed, self.succession][i]
    }
}

/// One producer offers `items`: the time of the offers (the session's
/// connect and close outside it, as the peers time theirs).
fn zklock_queue_offer(servers: &str, dir: &str, items: u64, how: Offer) -> Duration {
    let zkw = connect(servers, "recipes-bench");
    let q = DistributedQueue::new(&zkw, dir).unwrap();
    let zk = zkw.zookeeper();
    let item = format!("{dir}/qn-");
    let t0 = Instant::now();
    match how {
        Offer::All => {
            let data: Vec<String> = (0..items).map(|i| format!("p0-{i}")).collect();
            assert_eq!(q.offer_all(&data).unwrap().len() as u64, items);
        }
        Offer::One => {
            for i in 0..items {
                q.offer(format!("p0-{i}").as_bytes()).unwrap();
            }
        }
        Offer::Bare => {
            for i in 0..items {
                zk.create(
                    &item,
                    format!("p0-{i}").as_bytes(),
                    Acl::open_unsafe(),
                    CreateMode::PersistentSequential,
                )
                .unwrap();
            }
        }
    }
    let elapsed = t0.elapsed();
    zkw.close().unwrap();
    elapsed
}

/// Takes until `taken` reaches `items`; the time of the last item taken.
fn zklock_queue_take(
    servers: &str,
    dir: &str,
    items: u64,
    taken: &AtomicUsize,
    last: &Mutex<Option<Instant>>,
) {
    let zkw = connect(servers, "recipes-bench");
    let q = DistributedQueue::new(&zkw, dir).unwrap();
    while (taken.load(Ordering::SeqCst) as u64) < items {
        if q.take_timeout(Duration::from_millis(200))
            .unwrap()
            .is_some()
        {
            taken.fetch_add(1, Ordering::SeqCst);
            *last.lock().unwrap() = Some(Instant::now());
        }
    }
    zkw.close().unwrap();
}

/// zklock's four phases; offering otherwise than by `offer`, only the take
/// follows the offer.
fn zklock_phases(
    servers: &str,
    m: &Mntr,
    root: &str,
    items: u64,
    k: u64,
    how: Offer,
    sections: Sections,
) -> [Option<Phase>; 4] {
    let window = |i: usize, f: &dyn Fn() -> (u64, Option<Duration>, Option<Duration>)| {
        if !sections.runs(i) {
            return None;
        }
        let w = Window::start(m);
        let t0 = Instant::now();
        let (n, until, p50) = f();
        let traffic = w.stop(m);
        Some(Phase {
            n,
            elapsed: until.unwrap_or_else(|| t0.elapsed()),
            traffic,
            p50,
        })
    };
    let q = format!("{root}/q");
    let mixed = format!("{root}/q-mixed");
    let offer = window(0, &|| {
        let elapsed = zklock_queue_offer(servers, &q, items, how);
        (items, Some(elapsed), None)
    });
    let take = window(1, &|| {
        let taken = AtomicUsize::new(0);
        zklock_queue_take(servers, &q, items, &taken, &Mutex::new(None));
        (taken.load(Ordering::SeqCst) as u64, None, None)
    });
    if how != Offer::One {
        return [offer, take, None, None];
    }
    let mixed = window(2, &|| {
        let taken = Arc::new(AtomicUsize::new(0));
        let last = Arc::new(Mutex::new(None));
        let t0 = Instant::now();
        let mut threads = Vec::new();
        for _ in 0..4 {
            let (s, d, t, l) = (
                servers.to_string(),
                mixed.clone(),
                taken.clone(),
                last.clone(),
            );
            threads.push(thread::spawn(move || {
                zklock_queue_take(&s, &d, items, &t, &l)
            }));
        }
        for p in 0..4u64 {
            let (s, d) = (servers.to_string(), mixed.clone());
            threads.push(thread::spawn(move || {
                let zkw = connect(&s, "recipes-bench");
                let q = DistributedQueue::new(&zkw, &d).unwrap();
                for i in items * p / 4..items * (p + 1) / 4 {
                    q.offer(format!("p{p}-{i}").as_bytes()).unwrap();
                }
                zkw.close().unwrap();
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
        let until = last.lock().unwrap().map(|l| l - t0);
        (taken.load(Ordering::SeqCst) as u64, until, None)
    });
    let succession = window(3, &|| {
        zklock_succession(servers, &format!("{root}/election"), k)
    });
    [offer, take, mixed, succession]
}

/// K successions among K + 1 candidates, a session each.
fn zklock_succession(
    servers: &str,
    root: &str,
    k: u64,
) -> (u64, Option<Duration>, Option<Duration>) {
    let (tx, rx) = mpsc::channel();
    let candidates: Vec<(ZooKeeperWatcher, LeaderElectionSupport)> = (0..=k)
        .map(|i| {
            let zkw = connect(servers, "recipes-bench");
            let c = LeaderElectionSupport::new(&zkw, root, &format!("c{i}")).unwrap();
            let tx = Mutex::new(tx.clone());
            c.add_listener(move |e: ElectionEventType| {
                if e == ElectionEventType::ElectedComplete {
                    let _ = tx.lock().unwrap().send(i);
                }
            });
            c.start().unwrap();
            (zkw, c)
        })
        .collect();
    assert_eq!(rx.recv_timeout(Duration::from_secs(60)), Ok(0));
    let mut times = Vec::new();
    let t0 = Instant::now();
    for (i, (_, leader)) in candidates.iter().take(k as usize).enumerate() {
        let s = Instant::now();
        leader.stop().unwrap();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(60)),
            Ok(i as u64 + 1),
            "the next candidate elected"
        );
        times.push(s.elapsed());
    }
    let elapsed = t0.elapsed();
    candidates[k as usize].1.stop().unwrap();
    for (zkw, c) in candidates {
        drop(c);
        zkw.close().unwrap();
    }
    times.sort();
    (k, Some(elapsed), Some(times[times.len() / 2]))
}

/// A library's side: zklock in this process, or a peer's `impl_name` (curator,
/// zk, kazoo) through the peer process at `peers[index]`.
enum Side {
    Zklock,
    /// zklock's `offer_all` (and a take to empty the queue).
    ZklockAll,
    /// The client's bare creates (and a take to empty the queue).
    ZklockBare,
    Peer(usize, &'static str),
}

fn main() {
    let (_server, servers) = example_servers().expect("a ZooKeeper server");
    let items = env_usize("ZK_RECIPES_ITEMS", 1000) as u64;
    let k = env_usize("ZK_RECIPES_SUCCESSIONS", 20) as u64;
    let rounds = bench_rounds(5);
    let sections = Sections::from_env();
    let m = Mntr::new(&servers);
    let admin = connect(&servers, "recipes-bench-admin");
    let root = format!("/bench-recipes-{}", std::process::id());
    let load_before = loadavg();
    println!(
        "recipes side by side: {items} items, {k} successions, {rounds} alternating rounds \
         (after a warm-up round), server {servers}, load {load_before}"
    );

    // The peers: the Java side (Curator and ZooKeeper's recipes, one JVM) and
    // the Python side (kazoo).
    let mut peers: Vec<Peer> = Vec::new();
    let mut sides: Vec<(&str, &str, Result<Side, String>)> = vec![(
        "zklock DistributedQueue",
        "zklock LeaderElectionSupport",
        Ok(Side::Zklock),
    )];
    sides.push((
        "zklock DistributedQueue, offer_all",
        "—",
        Ok(Side::ZklockAll),
    ));
    sides.push((
        "zklock client's bare create (the floor)",
        "—",
        Ok(Side::ZklockBare),
    ));
    let java = compile_java("recipes", &["benches/java/RecipesBench.java"], &JARS)
        .map_err(|e| format!("{e}; install Curator with `make curator`"))
        .and_then(|classes| {
            let mut cmd = classes.java(&JVM_OPTIONS, "RecipesBench");
            cmd.args(["serve", &servers]);
            Peer::start("Java recipes bench", cmd).map(|p| (classes, p))
        });
    let _classes = match java {
        Ok((classes, peer)) => {
            peers.push(peer);
            let i = peers.len() - 1;
            sides.push((
                "Curator DistributedQueue",
                "Curator LeaderLatch",
                Ok(Side::Peer(i, "curator")),
            ));
            sides.push((
                "ZooKeeper recipe DistributedQueue",
                "ZooKeeper recipe LeaderElectionSupport",
                Ok(Side::Peer(i, "zk")),
            ));
            Some(classes)
        }
        Err(e) => {
            sides.push((
                "Curator DistributedQueue",
                "Curator LeaderLatch",
                Err(e.clone()),
            ));
            sides.push((
                "ZooKeeper recipe DistributedQueue",
                "ZooKeeper recipe LeaderElectionSupport",
                Err(e),
            ));
            None
        }
    };
    let python = kazoo_python();
    let mut cmd = Command::new(&python);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(KAZOO_SCRIPT))
        .args(["serve", &servers]);
    match Peer::start("kazoo recipes bench", cmd) {
        Ok(peer) => {
            peers.push(peer);
            sides.push((
                "kazoo Queue",
                "kazoo Election",
                Ok(Side::Peer(peers.len() - 1, "kazoo")),
            ));
        }
        Err(e) => sides.push((
            "kazoo Queue",
            "kazoo Election",
            Err(format!(
                "{}: {e}; install kazoo with `make kazoo`",
                python.display()
            )),
        )),
    }

    // The rounds: round 0 is the warm-up; each library's round runs in
    // directories of its own.
    let mut rows: Vec<Row> = sides
        .iter()
        .map(|(q, el, side)| Row {
            queue_name: q.to_string(),
            election_name: el.to_string(),
            phases: side.as_ref().map(|_| Vec::new()).map_err(Clone::clone),
        })
        .collect();
    let short = [
        "zklock",
        "zklock-all",
        "zklock-bare",
        "curator",
        "zk",
        "kazoo",
    ];
    for r in 0..=rounds {
        let mut line = if r == 0 {
            "  warm-up:".to_string()
        } else {
            format!("  round {r}:")
        };
        for (i, (_, _, side)) in sides.iter().enumerate() {
            let Ok(side) = side else { continue };
            let dir = format!("{root}/{}/r{r}", short[i]);
            for sub in ["q", "q-mixed", "election"] {
                zkutil::create_with_parents(&admin, &format!("{dir}/{sub}")).unwrap();
            }
            let phases = match side {
                Side::Zklock => zklock_phases(&servers, &m, &dir, items, k, Offer::One, sections),
                Side::ZklockAll => {
                    zklock_phases(&servers, &m, &dir, items, k, Offer::All, sections)
                }
                Side::ZklockBare => {
                    zklock_phases(&servers, &m, &dir, items, k, Offer::Bare, sections)
                }
                Side::Peer(p, name) => {
                    peer_phases(&mut peers[*p], &m, name, &dir, items, k, sections)
                }
            };
            let f = |p: &Option<Phase>, f: fn(&Phase) -> f64, d: usize| {
                p.as_ref()
                    .map_or("—".into(), |p| format!("{:.d$}", f(p), d = d))
            };
            line += &format!(
                " | {} offer {} take {} 4×4 {} items/s, succ p50 {} ms",
                short[i],
                f(&phases[0], Phase::rate, 0),
                f(&phases[1], Phase::rate, 0),
                f(&phases[2], Phase::rate, 0),
                f(&phases[3], Phase::p50_ms, 2),
            );
            if r > 0 {
                if let Ok(v) = &mut rows[i].phases {
                    v.push(phases);
                }
            }
        }
        println!("{line}");
    }
    for peer in &mut peers {
        let _ = peer.proc.send("quit");
    }

    let _ = zkutil::delete_node_recursively(&admin, &root);
    let _ = admin.close();
    let load_after = loadavg();

    // The tables.
    println!();
    println!(
        "Queue: {items} items (offer: 1 producer; take: 1 consumer; 4 × 4: 4 producers and \
         4 consumers, 8 sessions), {rounds} alternating rounds: median (min–max). req = \
         ZooKeeper requests per item, notif = notifications per item (from mntr). Load \
         average {load_before} before, {load_after} after."
    );
    println!();
    println!("| queue | offer items/s | req | take items/s | req | notif | 4 × 4 items/s | req | notif |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        match &r.phases {
            Ok(p) => println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.queue_name,
                over_rounds(p, 0, Phase::rate, 0),
                over_rounds(p, 0, Phase::requests, 2),
                over_rounds(p, 1, Phase::rate, 0),
                over_rounds(p, 1, Phase::requests, 2),
                over_rounds(p, 1, Phase::notifications, 2),
                over_rounds(p, 2, Phase::rate, 0),
                over_rounds(p, 2, Phase::requests, 2),
                over_rounds(p, 2, Phase::notifications, 2),
            ),
            Err(e) => println!("| {} | not run: {e} |||||||| ", r.queue_name),
        }
    }
    println!();
    println!(
        "Leader succession: {k} successions among {} candidates (a session each), {rounds} \
         alternating rounds: median (min–max); time from the leader's step-down to the \
         successor's own signal; requests include setting up the candidates and their \
         sessions.",
        k + 1
    );
    println!();
    println!("| election | succession p50 (ms) | mean (ms) | requests per succession | notifications per succession |");
    println!("|---|---:|---:|---:|---:|");
    for r in rows.iter().filter(|r| r.election_name != "—") {
        match &r.phases {
            Ok(p) => println!(
                "| {} | {} | {} | {} | {} |",
                r.election_name,
                over_rounds(p, 3, Phase::p50_ms, 2),
                over_rounds(p, 3, Phase::mean_ms, 2),
                over_rounds(p, 3, Phase::requests, 2),
                over_rounds(p, 3, Phase::notifications, 2),
            ),
            Err(e) => println!("| {} | not run: {e} |||| ", r.election_name),
        }
    }
    // zklock's own figures must be there: a queue that lost an item would
    // have hung above; a missing phase is a failure.
    match (&rows[0].phases, &rows[1].phases, &rows[2].phases) {
        (Ok(rounds), Ok(all), Ok(bare)) => assert!(
            rounds
                .iter()
                .flatten()
                .enumerate()
                .all(|(i, p)| p.is_some() || !sections.runs(i % 4))
                && all
                    .iter()
                    .chain(bare)
                    .all(|r| (0..2).all(|i| r[i].is_some() || !sections.runs(i))),
            "a zklock phase failed"
        ),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => panic!("zklock: {e}"),
    }
}
