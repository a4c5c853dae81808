//! The double barrier's `ready` tied to its round (issue 32, item 2), against
//! a real server: a round whose members died without leaving (a crashed
//! batch) leaves a `ready` that must not let a later round through.

mod common;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{children, init_log, local_raw, local_zkw};
use zklock::client::{Acl, CreateMode};
use zklock::recipes::double_barrier::{BarrierStep, DoubleBarrier};
use zklock::testing::{eventually, unique_root};

/// Two members of a count-2 barrier enter and their sessions close without
/// `leave` (a crashed batch): their nodes go, their `ready` stays. The next
/// round's lone member must not pass `enter` (before: it passed at once); it
/// runs out of time, and the stale `ready` and its own node are removed. Then,
/// forced with the `TimedOut` step hook, a stale `ready` appears just as a
/// lone member's time runs out: its withdrawal finds it, sees it is stale and
/// withdraws (before: it took any `ready` there for its round's and passed).
/// A full round afterwards replaces a stale `ready`, enters and leaves as
/// usual, leaving nothing.
#[test]
fn a_crashed_rounds_ready_lets_no_later_round_through() {
    init_log();
    let root = unique_root("dbarrier-crashed");
    let path = format!("{root}/b");
    let ready = format!("{path}/ready");
    let zk = local_raw();

    // The crashed batch.
    let (s1, s2) = (local_zkw(), local_zkw());
    let m1 = DoubleBarrier::new(&s1, &path, 2).unwrap();
    let m2 = DoubleBarrier::new(&s2, &path, 2).unwrap();
    let h = thread::spawn(move || (m2.enter(Duration::from_secs(30)).unwrap(), m2));
    assert!(m1.enter(Duration::from_secs(30)).unwrap());
    let (entered, m2) = h.join().unwrap();
    assert!(entered);
    let stale = zk.get_data(&ready, false).unwrap().0;
    s1.close().unwrap();
    s2.close().unwrap();
    drop((m1, m2));
    assert_eq!(children(&zk, &path), ["ready"], "the crashed round's ready");

    // The next round's lone member.
    let s3 = local_zkw();
    let lone = DoubleBarrier::new(&s3, &path, 2).unwrap();
    assert!(
        !lone.enter(Duration::from_millis(500)).unwrap(),
        "a lone member passed on a crashed round's ready"
    );
    assert_eq!(lone.node(), None);
    assert!(
        children(&zk, &path).is_empty(),
        "stale ready or the member left: {:?}",
        children(&zk, &path)
    );

    // A stale `ready` appears as a lone member's time runs out.
    let hook_zk = Mutex::new(local_raw());
    let (hook_ready, hook_stale) = (ready.clone(), stale.clone());
    let lone = DoubleBarrier::new(&s3, &path, 2)
        .unwrap()
        .with_step_hook(move |step| {
            if step == BarrierStep::TimedOut {
                hook_zk
                    .lock()
                    .unwrap()
                    .create(
                        &hook_ready,
                        &hook_stale,
                        Acl::open_unsafe(),
                        CreateMode::Persistent,
                    )
                    .unwrap();
            }
        });
    assert!(
        !lone.enter(Duration::from_millis(300)).unwrap(),
        "a member out of time passed on a crashed round's ready"
    );
    assert_eq!(lone.node(), None);
    assert!(
        children(&zk, &path).is_empty(),
        "stale ready or the member left: {:?}",
        children(&zk, &path)
    );
    drop(lone);

    // A full round replaces a stale `ready`, enters and leaves together;
    // nothing is left.
    zk.create(&ready, &stale, Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    let s4 = local_zkw();
    let (a, b) = (
        DoubleBarrier::new(&s3, &path, 2).unwrap(),
        DoubleBarrier::new(&s4, &path, 2).unwrap(),
    );
    let h = thread::spawn(move || {
        let entered = b.enter(Duration::from_secs(30)).unwrap();
        let left = b.leave(Duration::from_secs(30)).unwrap();
        (entered, left)
    });
    assert!(a.enter(Duration::from_secs(30)).unwrap());
    let named = zk.get_data(&ready, false).unwrap().0;
    assert_ne!(named, stale, "the full round's ready names it");
    assert!(a.leave(Duration::from_secs(30)).unwrap());
    assert_eq!(h.join().unwrap(), (true, true));
    assert!(eventually(Duration::from_secs(5), || children(&zk, &path).is_empty()));
    s3.close().unwrap();
    s4.close().unwrap();
    zklock::zkutil::delete_node_recursively(&local_zkw(), &root).unwrap();
}

/// A stale `ready` is there when a lone member X runs out of time; X reads
/// it and, before X withdraws (held at `Withdrawing`), member Y arrives,
/// counts X and Y, replaces the stale `ready` with its round's and passes.
/// X's withdrawal (one `multi` that checks the barrier's version read with
/// `ready`) fails, X reads again and enters: both are in the round Y passed.
/// Were the withdrawal to act on the stale reading (delete `ready` and X's
/// node), Y would be through alone and X out.
#[test]
fn a_member_withdrawing_on_a_stale_ready_sees_a_round_made_meanwhile() {
    init_log();
    let root = unique_root("dbarrier-stale-race");
    let path = format!("{root}/b");
    let ready = format!("{path}/ready");
    let zk = local_raw();
    zklock::zkutil::create_with_parents(&local_zkw(), &path).unwrap();
    // A stale `ready`: it names a member that is gone.
    zk.create(
        &ready,
        b"m-gone-0000000000",
        Acl::open_unsafe(),
        CreateMode::Persistent,
    )
    .unwrap();

    let (sx, sy) = (local_zkw(), local_zkw());
    let y_path = path.clone();
    let y_entered = Arc::new(Mutex::new(None));
    let y_result = y_entered.clone();
    let x = DoubleBarrier::new(&sx, &path, 2)
        .unwrap()
        .with_step_hook(move |step| {
            if step == BarrierStep::Withdrawing {
                let mut y_result = y_result.lock().unwrap();
                if y_result.is_none() {
                    // Y arrives now, on its own session, and fills the round.
                    let y = DoubleBarrier::new(&sy, &y_path, 2).unwrap();
                    let entered = y.enter(Duration::from_secs(10)).unwrap();
                    *y_result = Some((entered, y));
                }
            }
        });
    let x_entered = x.enter(Duration::from_millis(300)).unwrap();
    let (y_in, y) = y_entered.lock().unwrap().take().expect("Y arrived");
    assert!(y_in, "Y filled the round");
    assert!(x_entered, "X withdrew from the round Y passed with it");
    assert!(x.node().is_some());
    assert_ne!(zk.get_data(&ready, false).unwrap().0, b"m-gone-0000000000");
    let h = thread::spawn(move || y.leave(Duration::from_secs(30)).unwrap());
    assert!(x.leave(Duration::from_secs(30)).unwrap());
    assert!(h.join().unwrap());
    assert!(children(&zk, &path).is_empty());
    drop(x);
    sx.close().unwrap();
    zklock::zkutil::delete_node_recursively(&local_zkw(), &root).unwrap();
}

/// Issue 44, item 3: the last leaver deletes only its own round's `ready`.
/// Round 1 (A, B) enters; both leave, A held at `Emptied` (it found nobody
/// left, its own node gone) while B removes round 1's `ready`. Round 2 (C,
/// D) then enters, making its own `ready`. When A goes on it must leave that
/// `ready` alone (before: it deleted it unconditionally, so a round-2 member
/// that had not yet read it never entered, and one that had was through
/// alone). Round 2 then leaves as usual and nothing is left.
#[test]
fn a_late_leaver_never_deletes_the_next_rounds_ready() {
    init_log();
    let root = unique_root("dbarrier-late-leaver");
    let path = format!("{root}/b");
    let ready = format!("{path}/ready");
    let zk = local_raw();
    let (sa, sb, sc, sd) = (local_zkw(), local_zkw(), local_zkw(), local_zkw());

    let (emptied_tx, emptied_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (emptied_tx, go_rx) = (Mutex::new(emptied_tx), Mutex::new(go_rx));
    let a = DoubleBarrier::new(&sa, &path, 2)
        .unwrap()
        .with_step_hook(move |step| {
            if step == BarrierStep::Emptied {
                emptied_tx.lock().unwrap().send(()).unwrap();
                go_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(60))
                    .unwrap();
            }
        });
    let b = DoubleBarrier::new(&sb, &path, 2).unwrap();
    let hb = thread::spawn(move || {
        assert!(b.enter(Duration::from_secs(30)).unwrap());
        assert!(b.leave(Duration::from_secs(30)).unwrap());
    });
    assert!(a.enter(Duration::from_secs(30)).unwrap());
    let ha = thread::spawn(move || a.leave(Duration::from_secs(30)).unwrap());
    emptied_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    hb.join().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || children(&zk, &path).is_empty()),
        "round 1 left: {:?}",
        children(&zk, &path)
    );

    // Round 2 enters while A's delete is still to land.
    let c = DoubleBarrier::new(&sc, &path, 2).unwrap();
    let d = DoubleBarrier::new(&sd, &path, 2).unwrap();
    let hd = thread::spawn(move || (d.enter(Duration::from_secs(30)).unwrap(), d));
    assert!(c.enter(Duration::from_secs(30)).unwrap());
    let (d_in, d) = hd.join().unwrap();
    assert!(d_in);
    let round2 = zk.get_data(&ready, false).unwrap().0;

    go_tx.send(()).unwrap();
    assert!(ha.join().unwrap(), "A left");
    assert_eq!(
        zk.get_data(&ready, false).map(|(data, _)| data).ok(),
        Some(round2),
        "a leaver of round 1 deleted round 2's ready"
    );
    let hd = thread::spawn(move || d.leave(Duration::from_secs(30)).unwrap());
    assert!(c.leave(Duration::from_secs(30)).unwrap());
    assert!(hd.join().unwrap());
    assert!(children(&zk, &path).is_empty());
    for s in [sa, sb, sc, sd] {
        s.close().unwrap();
    }
    zklock::zkutil::delete_node_recursively(&local_zkw(), &root).unwrap();
}

/// Entry points are atomic (issue 44): a second `enter` of one member while
/// its first is under way (held at `Joining`, before its node is made)
/// refuses with `BadArguments` and makes nothing; before, both made a node
/// and the second replaced the first, orphaned in the barrier (counted by
/// every other member). The first then enters with a second member.
#[test]
fn a_second_enter_of_one_member_makes_nothing() {
    init_log();
    let root = unique_root("dbarrier-double-enter");
    let path = format!("{root}/b");
    let zk = local_raw();
    let (sa, sb) = (local_zkw(), local_zkw());
    let (joining_tx, joining_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (joining_tx, go_rx) = (Mutex::new(joining_tx), Mutex::new(go_rx));
    let once = std::sync::atomic::AtomicBool::new(true);
    let a = Arc::new(
        DoubleBarrier::new(&sa, &path, 2)
            .unwrap()
            .with_step_hook(move |step| {
                if step == BarrierStep::Joining
                    && once.swap(false, std::sync::atomic::Ordering::SeqCst)
                {
                    joining_tx.lock().unwrap().send(()).unwrap();
                    go_rx
                        .lock()
                        .unwrap()
                        .recv_timeout(Duration::from_secs(60))
                        .unwrap();
                }
            }),
    );
    let a1 = a.clone();
    let first = thread::spawn(move || a1.enter(Duration::from_secs(30)));
    joining_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let a2 = a.clone();
    let second = thread::spawn(move || a2.enter(Duration::from_secs(2)));
    // The old code's second enter makes its node at once (and then waits
    // for a second member); the new one refuses at once.
    thread::sleep(Duration::from_millis(300));
    go_tx.send(()).unwrap();
    let second = second.join().unwrap();
    assert!(
        matches!(second, Err(zklock::Error::BadArguments(_))),
        "{second:?}"
    );
    let b = DoubleBarrier::new(&sb, &path, 2).unwrap();
    assert!(b.enter(Duration::from_secs(30)).unwrap());
    assert!(first.join().unwrap().unwrap());
    assert_eq!(children(&zk, &path).len(), 3, "two members and ready");
    let a1 = a.clone();
    let h = thread::spawn(move || a1.leave(Duration::from_secs(30)).unwrap());
    assert!(b.leave(Duration::from_secs(30)).unwrap());
    assert!(h.join().unwrap());
    assert!(children(&zk, &path).is_empty());
    drop(a);
    sa.close().unwrap();
    sb.close().unwrap();
    zklock::zkutil::delete_node_recursively(&local_zkw(), &root).unwrap();
}
