//! ZooKeeper's recipe `WriteLock` and leader election from zklock: three
//! sessions take a WriteLock in turn (one through the listener, non-blocking),
//! then elect a leader and hand leadership on.
//!
//! Runs against `$ZK_SERVERS` or a throwaway local ZooKeeper:
//! `cargo run --example write_lock`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zklock::client::Acl;
use zklock::recipes::election::LeaderElectionSupport;
use zklock::recipes::write_lock::{LockListener, WriteLock};
use zklock::ZooKeeperWatcher;

struct Told(Arc<AtomicUsize>);

impl LockListener for Told {
    fn lock_acquired(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        println!("  listener: lock acquired");
    }
    fn lock_released(&self) {
        println!("  listener: lock released");
    }
}

fn main() -> anyhow::Result<()> {
    let _ = env_logger::try_init();
    let (_server, servers) = zklock::testing::example_servers()?;
    let dir = format!("/zklock-example/write-lock-{}", std::process::id());
    let (a, b) = (
        ZooKeeperWatcher::connect(&servers, "a", None)?,
        ZooKeeperWatcher::connect(&servers, "b", None)?,
    );
    let first = WriteLock::new(&a, &dir, Acl::open_unsafe())?;
    println!("a.lock() -> {} ({:?})", first.lock()?, first.id());
    let told = Arc::new(AtomicUsize::new(0));
    let second =
        WriteLock::new(&b, &dir, Acl::open_unsafe())?.with_lock_listener(Told(told.clone()));
    println!("b.lock() -> {} (waits for its predecessor)", second.lock()?);
    first.unlock()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while told.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("b.is_owner() -> {}", second.is_owner());
    second.unlock()?;

    let root = format!("/zklock-example/election-{}", std::process::id());
    zklock::zkutil::create_with_parents(&a, &root)?;
    let ea = LeaderElectionSupport::new(&a, &root, "host-a")?;
    ea.add_listener(|e| println!("  host-a: {e:?}"));
    let eb = LeaderElectionSupport::new(&b, &root, "host-b")?;
    eb.add_listener(|e| println!("  host-b: {e:?}"));
    ea.start()?;
    eb.start()?;
    println!("leader: {:?}", eb.get_leader_host_name()?);
    ea.stop()?;
    std::thread::sleep(Duration::from_millis(200));
    println!(
        "after host-a stops, leader: {:?} (b leads: {})",
        eb.get_leader_host_name()?,
        eb.has_leadership()
    );
    eb.stop()?;
    a.close()?;
    b.close()?;
    Ok(())
}
