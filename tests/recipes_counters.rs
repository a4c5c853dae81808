//! `zklock::recipes::counter` against a real ZooKeeper server: 8 threads on
//! separate sessions incrementing lose no update, optimistic and promoted to
//! a lock; the byte layouts are Curator's.

mod common;

use common::init_log;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zklock::recipes::counter::{DistributedAtomicLong, SharedCount};
use zklock::testing::unique_root;
use zklock::{Error, ZooKeeperWatcher};

const THREADS: usize = 8;
const EACH: i64 = 25;

/// A session on the shared server (6 s, retries 20 ms apart).
fn connect() -> ZooKeeperWatcher {
    common::zkw()
}

/// Runs `work` on `THREADS` threads, each with its own session.
fn on_sessions(work: impl Fn(&ZooKeeperWatcher) + Send + Sync + 'static) {
    let work = Arc::new(work);
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let work = work.clone();
            let zkw = connect();
            thread::spawn(move || {
                work(&zkw);
                zkw.close().unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn eight_sessions_incrementing_a_shared_count_lose_no_update() {
    init_log();
    let path = format!("{}/count", unique_root("shared-count"));
    let zkw = connect();
    let count = SharedCount::new(&zkw, &path, 5).unwrap();
    assert_eq!(count.get().unwrap().value, 5);
    let p = path.clone();
    on_sessions(move |zkw| {
        let count = SharedCount::new(zkw, &p, 0).unwrap();
        for _ in 0..EACH {
            loop {
                let now = count.get().unwrap();
                if count.try_set(now, now.value + 1).unwrap() {
                    break;
                }
            }
        }
    });
    let end = count.get().unwrap();
    assert_eq!(end.value, 5 + THREADS as i32 * EACH as i32);
    assert_eq!(
        end.version,
        THREADS as i32 * EACH as i32,
        "one write per increment"
    );
    // Curator's layout: 4 bytes, big-endian.
    let (data, _) = zkw.zookeeper().get_data(&path, false).unwrap();
    assert_eq!(data, (5 + THREADS as i32 * EACH as i32).to_be_bytes());
    // A stale version is refused.
    assert!(!count
        .try_set(
            count
                .get()
                .map(|mut v| {
                    v.version -= 1;
                    v
                })
                .unwrap(),
            0
        )
        .unwrap());
    zkw.zookeeper().set_data(&path, b"xyz", None).unwrap();
    assert!(matches!(count.get(), Err(Error::BadArguments(_))));
}

#[test]
fn eight_sessions_incrementing_an_atomic_long_lose_no_update() {
    init_log();
    let path = format!("{}/long", unique_root("atomic-long"));
    let zkw = connect();
    let long = DistributedAtomicLong::new(&zkw, &path, 3).unwrap();
    assert_eq!(long.get().unwrap(), 0, "a missing node reads 0");
    let p = path.clone();
    let failed = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let f = failed.clone();
    on_sessions(move |zkw| {
        let long = DistributedAtomicLong::new(zkw, &p, 3).unwrap();
        for _ in 0..EACH {
            // Optimistic only: a failed try is counted, never lost silently.
            while !long.increment().unwrap().succeeded {
                f.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    assert_eq!(long.get().unwrap(), THREADS as i64 * EACH);
    let (data, _) = zkw.zookeeper().get_data(&path, false).unwrap();
    assert_eq!(
        data,
        (THREADS as i64 * EACH).to_be_bytes(),
        "Curator's 8-byte layout"
    );
    let cas = long.compare_and_set(THREADS as i64 * EACH, -1).unwrap();
    assert!(cas.succeeded && cas.post_value == -1);
    assert!(!long.compare_and_set(7, 8).unwrap().succeeded);
    println!(
        "optimistic increments that ran out of tries: {}",
        failed.load(std::sync::atomic::Ordering::Relaxed)
    );
}

#[test]
fn a_promoted_atomic_long_always_succeeds_and_loses_no_update() {
    init_log();
    let root = unique_root("atomic-long-promoted");
    let path = format!("{root}/long");
    let lock = format!("{root}/lock");
    let p = path.clone();
    let promoted = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let pr = promoted.clone();
    on_sessions(move |zkw| {
        let long = DistributedAtomicLong::new(zkw, &p, 1)
            .unwrap()
            .promoted_to_lock(&lock, Duration::from_secs(60))
            .unwrap();
        for _ in 0..EACH {
            let v = long.increment().unwrap();
            assert!(v.succeeded, "{v:?}");
            if v.promoted {
                pr.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    let zkw = connect();
    assert_eq!(
        DistributedAtomicLong::new(&zkw, &path, 1)
            .unwrap()
            .get()
            .unwrap(),
        THREADS as i64 * EACH
    );
    println!(
        "increments done holding the lock: {}",
        promoted.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert!(DistributedAtomicLong::new(&zkw, "bad", 1).is_err());
}
