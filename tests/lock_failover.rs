//! A lock waiter survives the failure of the ensemble member it is connected to.

use std::thread;
use std::time::{Duration, Instant};

use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
use zklock::testing::ZkEnsemble;
use zklock::{RetryConfig, ZooKeeperWatcher};

fn connect(servers: &str) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(servers)
        .with_session_timeout(Duration::from_secs(8))
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(50)))
        .connect()
        .expect("connect")
}

/// The ensemble member a client is connected to, found by its session in `cons`.
fn member_of(ensemble: &ZkEnsemble, session_id: i64) -> usize {
    let sid = format!("sid=0x{session_id:x}");
    (0..ensemble.size())
        .find(|&i| {
            ensemble
                .four_letter(i, "cons")
                .map(|c| c.contains(&sid))
                .unwrap_or(false)
        })
        .expect("the session is connected to some member")
}

#[test]
fn waiter_gets_the_lock_after_its_server_is_killed() {
    let _ = env_logger::builder().is_test(true).try_init();
    let mut ensemble = ZkEnsemble::start().expect("ensemble");
    ensemble
        .wait_for_quorum(Duration::from_secs(60))
        .expect("quorum");
    let holder_zkw = connect(&ensemble.connect_string());
    let holder_member = member_of(&ensemble, holder_zkw.zookeeper().session_id());
    // The waiter connects only to a member other than the holder's, so killing it
    // leaves the holder alone; it knows every member, to fail over.
    let mut waiter_zkw = connect(&ensemble.connect_string());
    while member_of(&ensemble, waiter_zkw.zookeeper().session_id()) == holder_member {
        waiter_zkw.close().unwrap();
        waiter_zkw = connect(&ensemble.connect_string());
    }
    let waiter_member = member_of(&ensemble, waiter_zkw.zookeeper().session_id());
    let root = "/zklock-test/failover";
    let holder = ZkInterProcessReadWriteLock::new(&holder_zkw, root, None)
        .unwrap()
        .write_lock(b"holder");
    holder.acquire().unwrap();
    let waiter = ZkInterProcessReadWriteLock::new(&waiter_zkw, root, None)
        .unwrap()
        .write_lock(b"waiter");
    let h = thread::spawn(move || {
        let ok = waiter.try_acquire(Duration::from_secs(60)).unwrap();
        (ok, waiter)
    });
    let end = Instant::now() + Duration::from_secs(10);
    while holder_zkw
        .zookeeper()
        .get_children(root, false)
        .unwrap()
        .len()
        < 2
    {
        assert!(Instant::now() < end, "the waiter never queued");
        thread::sleep(Duration::from_millis(20));
    }
    ensemble.kill(waiter_member).unwrap();
    // Give the waiter time to notice and move to another member.
    thread::sleep(Duration::from_secs(3));
    holder.release().unwrap();
    let (ok, waiter) = h.join().unwrap();
    assert!(ok, "the waiter got the lock after failover");
    assert_ne!(
        member_of(&ensemble, waiter_zkw.zookeeper().session_id()),
        waiter_member
    );
    waiter.release().unwrap();
    assert!(holder_zkw
        .zookeeper()
        .get_children(root, false)
        .unwrap()
        .is_empty());
    holder_zkw.close().unwrap();
    waiter_zkw.close().unwrap();
}
