//! Revocable shared locks (ZooKeeper recipes page, "Revocable Shared Locks"):
//! a reader that agrees to give its lock up when asked, then a stubborn reader
//! whose lock is forcibly revoked after a grace period — each time a writer in
//! another session is waiting and gets the lock.
//!
//! Runs against `$ZK_SERVERS` or a throwaway local ZooKeeper:
//! `cargo run --example revocable`.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use zklock::lock::{InterProcessLock, LockEvent};
use zklock::recipes::revocable::{
    attempt_revoke, attempt_revoke_with_grace, lock_holders, RevocableReadLock, RevocableWriteLock,
    RevocationReply,
};
use zklock::ZooKeeperWatcher;

/// A writer in its own session waits for the lock in a thread; returns once its
/// node is queued.
fn waiting_writer(
    zkw: &ZooKeeperWatcher,
    znode: &str,
) -> anyhow::Result<(
    Arc<RevocableWriteLock>,
    thread::JoinHandle<zklock::Result<bool>>,
)> {
    let writer = Arc::new(RevocableWriteLock::new(zkw, znode, b"writer", None)?);
    let w = writer.clone();
    let handle = thread::spawn(move || w.try_acquire(Duration::from_secs(30)));
    let deadline = Instant::now() + Duration::from_secs(10);
    while zkw
        .recoverable_zookeeper()
        .get_children(znode, false)?
        .len()
        < 2
    {
        anyhow::ensure!(Instant::now() < deadline, "the writer never queued");
        thread::sleep(Duration::from_millis(10));
    }
    Ok((writer, handle))
}

fn main() -> anyhow::Result<()> {
    let _ = env_logger::try_init();
    let (_server, servers) = zklock::testing::example_servers()?;
    let znode = format!("/zklock-example/revocable-{}", std::process::id());
    let holder = ZooKeeperWatcher::connect(&servers, "holder", None)?;
    let waiter = ZooKeeperWatcher::connect(&servers, "waiter", None)?;
    let revoker = ZooKeeperWatcher::connect(&servers, "revoker", None)?;

    println!("1. a cooperative reader");
    let reader = RevocableReadLock::new(&holder, &znode, b"polite reader", None)?
        .with_revocation_listener(|path: &str| {
            println!("  reader: asked to give up {path}: releasing");
            RevocationReply::Release
        });
    reader.acquire()?;
    let (writer, handle) = waiting_writer(&waiter, &znode)?;
    for node in lock_holders(&revoker, &znode)? {
        println!(
            "  revoker: attempt_revoke({node}) -> {}",
            attempt_revoke(&revoker, &node)?
        );
    }
    println!(
        "  writer got the lock: {}",
        handle.join().expect("writer thread")?
    );
    println!("  reader.is_held() -> {}", reader.is_held());
    writer.release()?;

    println!("2. a stubborn reader, forced after a 1 s grace period");
    let stubborn = RevocableReadLock::new(&holder, &znode, b"stubborn reader", None)?
        .with_revocation_listener(|path: &str| {
            println!("  reader: asked to give up {path}: keeping it");
            RevocationReply::Keep
        })
        .with_lock_listener(|path: &str, event: LockEvent| {
            println!("  reader: {path}: {event:?}");
        });
    stubborn.acquire()?;
    let (writer, handle) = waiting_writer(&waiter, &znode)?;
    let node = stubborn.acquired_lock().expect("held").path;
    let started = Instant::now();
    let outcome = attempt_revoke_with_grace(&revoker, &node, Duration::from_secs(1))?;
    println!("  revoker: {outcome:?} after {:?}", started.elapsed());
    println!(
        "  writer got the lock: {}",
        handle.join().expect("writer thread")?
    );
    println!(
        "  reader.is_held() -> {}, release() -> {:?}",
        stubborn.is_held(),
        stubborn.release().map_err(|e| e.to_string())
    );
    writer.release()?;

    println!(
        "3. revoking a node that is gone: {}",
        attempt_revoke(&revoker, &node)?
    );
    drop((reader, stubborn, writer));
    let left = revoker
        .recoverable_zookeeper()
        .get_children(&znode, false)?;
    println!("nodes left under {znode}: {left:?}");
    holder.close()?;
    waiter.close()?;
    revoker.close()?;
    Ok(())
}
