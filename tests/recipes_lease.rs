//! `zklock::recipes::lease` against a real ZooKeeper server: threads on
//! separate sessions contending for a lease (and a multi-lease) never have
//! two holders at once, by the server's clock.

mod common;

use common::init_log;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zklock::recipes::lease::{Lease, MultiNonBlockingLease, NonBlockingLease};
use zklock::testing::unique_root;
use zklock::ZooKeeperWatcher;

/// A session on the shared server (6 s, retries 20 ms apart).
fn connect() -> ZooKeeperWatcher {
    common::zkw()
}

/// Runs 8 contenders on their own sessions for `run`; every lease obtained.
fn contend(
    obtain: impl Fn(&ZooKeeperWatcher, &str) -> Option<Lease> + Send + Sync + 'static,
    run: Duration,
) -> Vec<Lease> {
    let obtain = Arc::new(obtain);
    let got = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (obtain, got, zkw) = (obtain.clone(), got.clone(), connect());
            thread::spawn(move || {
                let me = format!("holder-{t}");
                let end = Instant::now() + run;
                while Instant::now() < end {
                    if let Some(lease) = obtain(&zkw, &me) {
                        got.lock().unwrap().push(lease);
                        // Let it run out, so that it changes hands.
                        thread::sleep(Duration::from_millis(250));
                    }
                    thread::sleep(Duration::from_millis(20 + t * 7));
                }
                zkw.close().unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    Arc::try_unwrap(got).unwrap().into_inner().unwrap()
}

/// No two leases of different holders on one node overlap (server clock).
fn assert_no_two_holders(leases: &[Lease]) {
    for (i, a) in leases.iter().enumerate() {
        for b in &leases[i + 1..] {
            if a.path != b.path || a.holder == b.holder {
                continue;
            }
            let (first, second) = if a.start_ms <= b.start_ms {
                (a, b)
            } else {
                (b, a)
            };
            assert!(
                second.start_ms >= first.end_ms(),
                "two holders at once: {first:?} and {second:?}"
            );
        }
    }
    println!("{} leases obtained", leases.len());
}

#[test]
fn contenders_on_separate_sessions_never_hold_one_lease_at_once() {
    init_log();
    let path = unique_root("lease");
    let p = path.clone();
    let leases = contend(
        move |zkw, me| {
            NonBlockingLease::try_obtain(zkw, &p, Duration::from_millis(200), me).unwrap()
        },
        Duration::from_secs(3),
    );
    assert!(leases.len() >= 5, "{} leases", leases.len());
    let holders: std::collections::HashSet<_> = leases.iter().map(|l| &l.holder).collect();
    assert!(holders.len() >= 2, "the lease changed hands: {holders:?}");
    assert_no_two_holders(&leases);
}

#[test]
fn a_multi_lease_hands_out_each_of_its_leases_to_one_holder_at_a_time() {
    init_log();
    let path = unique_root("multi-lease");
    let p = path.clone();
    let leases = contend(
        move |zkw, me| {
            MultiNonBlockingLease::try_obtain(zkw, &p, 2, Duration::from_millis(200), me).unwrap()
        },
        Duration::from_secs(3),
    );
    let nodes: std::collections::HashSet<_> = leases.iter().map(|l| &l.path).collect();
    assert_eq!(nodes.len(), 2, "both leases used");
    assert_no_two_holders(&leases);
}

#[test]
fn a_released_lease_is_free_at_once_and_a_held_one_is_refused() {
    init_log();
    let path = unique_root("lease-release");
    let (a, b) = (connect(), connect());
    let long = Duration::from_secs(60);
    let held = NonBlockingLease::try_obtain(&a, &path, long, "a")
        .unwrap()
        .unwrap();
    assert!(held.is_valid());
    assert_eq!(
        NonBlockingLease::try_obtain(&b, &path, long, "b").unwrap(),
        None
    );
    let renewed = NonBlockingLease::try_obtain(&a, &path, long, "a")
        .unwrap()
        .unwrap();
    assert!(renewed.start_ms >= held.start_ms);
    assert!(!NonBlockingLease::release(&a, &held).unwrap() || held.start_ms == renewed.start_ms);
    assert!(NonBlockingLease::release(&a, &renewed).unwrap());
    let taken = NonBlockingLease::try_obtain(&b, &path, long, "b")
        .unwrap()
        .unwrap();
    assert_eq!(taken.holder, "b");
    assert!(
        !NonBlockingLease::release(&a, &renewed).unwrap(),
        "a's lease is over"
    );
    assert!(NonBlockingLease::try_obtain(&b, "bad", long, "b").is_err());
    assert!(NonBlockingLease::try_obtain(&b, &path, long, "").is_err());
    assert!(MultiNonBlockingLease::try_obtain(&b, &path, 0, long, "b").is_err());
}
