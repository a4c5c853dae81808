//! `DoubleBarrier`: the "Double Barriers" recipe.

use std::time::Duration;

use log::debug;
use parking_lot::Mutex;

use super::layout::{MEMBER_PREFIX, READY_NODE};
use super::node::delete_if_present;
use crate::deadline::Deadline;
use crate::engine::call::CallSession;
use crate::engine::hook::{hook, Hook};
use crate::engine::owned::{create_tagged, remove_and_wait, Attempt, Parents};
use crate::engine::session_node::SessionNode;
use crate::engine::wait::{Bounds, Round, Waiter};
use crate::error::{Error, Result, ZkError};
use crate::recoverable::{tagged_prefix, RecoverableZooKeeper};
use crate::sequence::sequence_of;
use crate::types::{CreateMode, Op};
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// A point of [`DoubleBarrier::enter`] (or `leave`) where a test can hold the member
/// (feature `testing`; see [`DoubleBarrier::with_step_hook`]).
#[cfg_attr(not(feature = "testing"), doc(hidden))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BarrierStep {
    /// `enter` is about to make the member's node (its `ready` watch set).
    Joining,
    /// The member listed `member_count` members and is about to create
    /// `ready` (together with a check of each of them).
    Counted,
    /// The member found fewer than `member_count` members and waits for
    /// `ready`.
    Waiting,
    /// The member's time ran out; it is about to withdraw (unless `ready`
    /// exists by then).
    TimedOut,
    /// The member out of time read `ready` (none current) and is about to
    /// withdraw in one `multi` that holds only if no `ready` was made since.
    Withdrawing,
    /// In `leave`: the member found nobody else left and is about to remove
    /// its round's `ready` (only while `ready` is still its round's).
    Emptied,
}

/// A double barrier: the "Double Barriers" recipe of ZooKeeper's recipes page
/// (Curator's `DistributedDoubleBarrier`). `member_count` processes
/// [`enter`](Self::enter) — each waits until all have — compute, then
/// [`leave`](Self::leave) — each waits until all have.
///
/// The page's pseudo code, step for step: a member creates an ephemeral node
/// under the barrier (sequential, so members are ordered), with an `exists`
/// watch on `<path>/ready` set first; the member that finds `member_count`
/// members creates `ready`, which wakes the others. To leave, the lowest member
/// waits on the highest; every other member deletes its node and waits on the
/// lowest: one deletion wakes one process (no herd) until the lowest is alone,
/// deletes its node and wakes the rest.
///
/// One instance is one member; give each thread or process its own.
///
/// # zklock differs here
/// - The page never removes `ready`; here the last member to leave deletes it,
///   so the barrier's directory is empty again (and the barrier can be used for
///   another round once every member of the last one has left). It deletes
///   only its own round's `ready` (one `multi` checking the barrier node's
///   version read with it), never the next round's, which may already be
///   there when the last leaver's delete lands.
/// - `ready` names its round: its data is the name of the highest member its
///   creator counted (each checked in the same `multi` that creates it). It
///   is current while one of the members it counted is still in the barrier
///   (the lowest member present is at or below the one it names: sequences
///   only grow and a member gone never comes back). A `ready` whose round's
///   members all died without leaving (a crashed batch: their ephemeral nodes
///   went with their sessions) is stale: a later member ignores it, the
///   member that fills the next round replaces it, and a member that runs out
///   of time removes it as it withdraws, so it never lets a later round
///   through. A `ready` that names no round (empty data, as an older zklock
///   makes it) is taken as current.
/// - Every `multi` that makes, replaces or removes `ready`, or withdraws a
///   member that timed out, decides on one reading of it: it checks the
///   barrier node's data version read before `ready`, which the `multi` that
///   makes a `ready` increments (writing the node's data empty). So no
///   `ready` made after the reading is replaced or missed (a `ready` deleted
///   and made again has the same version; the barrier's does not repeat).
/// - A member whose `enter` times out or fails deletes its node; a `leave`
///   that times out withdraws the member (deletes its node), so a member that
///   gives up never blocks the others. A member's node is ephemeral: a member
///   whose process dies leaves with its session.
/// - Dropping an instance that entered and did not leave deletes its node in the
///   background (no network wait in `Drop`).
/// - ACLs: every member writes the barrier's node (the version above) and
///   the member that fills a round `check`s the others' nodes, which needs
///   `READ` on them on every server version: it fails at once with
///   [`Error::NoReadPermission`] (`check`) naming a member it may not read.
///   A waiting member that may not read `ready` fails at once with
///   `NoReadPermission` naming it, on every version (see
///   [`AclPolicy`](crate::client::AclPolicy)).
pub struct DoubleBarrier {
    zkw: ZooKeeperWatcher,
    path: String,
    member_count: usize,
    /// This member's node while it is in the barrier.
    node: Mutex<Option<SessionNode>>,
    /// The data of the `ready` this member entered by (its round's name):
    /// the last member to leave deletes `ready` only while it still holds it.
    round: Mutex<Option<Vec<u8>>>,
    /// Held by an `enter` under way: a second `enter` of the instance refuses
    /// at once, making nothing.
    entering: Mutex<()>,
    waiter: Waiter,
    step_hook: Hook<BarrierStep>,
}

impl std::fmt::Debug for DoubleBarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoubleBarrier")
            .field("path", &self.path)
            .field("member_count", &self.member_count)
            .field("node", &self.node())
            .finish()
    }
}

/// The members among `children`, lowest sequence first.
fn members(children: &[String]) -> Vec<String> {
    let mut m: Vec<(i64, &String)> = children
        .iter()
        .filter(|c| c.starts_with(MEMBER_PREFIX))
        .filter_map(|c| sequence_of(c).map(|s| (i64::from(s), c)))
        .collect();
    m.sort();
    m.into_iter().map(|(_, c)| c.clone()).collect()
}

/// `ready`'s data for a round that counted `counted` (lowest first): the
/// name of the highest member counted.
fn ready_data(counted: &[String]) -> Vec<u8> {
    counted
        .last()
        .map(|m| m.as_bytes().to_vec())
        .unwrap_or_default()
}

/// Whether a `ready` holding `data` belongs to a round still on, given the
/// barrier's `present` members (lowest first): one of the members it counted
/// is still there, i.e. the lowest member present is at or below the highest
/// it counted (a member gone never comes back, and a member created later has
/// a higher sequence). A `ready` naming no round is current.
fn ready_is_current(data: &[u8], present: &[String]) -> bool {
    let Some(highest) = std::str::from_utf8(data).ok().and_then(sequence_of) else {
        return true;
    };
    present
        .first()
        .and_then(|m| sequence_of(m))
        .is_some_and(|lowest| i64::from(lowest) <= i64::from(highest))
}

/// How many times a member out of time reads `ready` and tries to withdraw
/// (each failing because `ready` changed meanwhile) before it gives up and
/// withdraws plainly.
const WITHDRAW_ATTEMPTS: usize = 3;

/// What a member read of `ready` (see [`DoubleBarrier::read_ready`]).
enum ReadyState {
    /// A current `ready`: the member is in.
    Current,
    /// No current `ready`.
    NotCurrent {
        /// The barrier node's data version, read before `ready`.
        barrier_version: i32,
        /// A stale `ready` is there.
        stale: bool,
        /// The members present, lowest first.
        members: Vec<String>,
    },
}

/// How long a member's withdrawal after an error may take (it is finished in
/// the background when the server does not answer in time).
const WITHDRAW: Duration = Duration::from_secs(1);

impl DoubleBarrier {
    /// A member of the double barrier at `path` for `member_count` members.
    ///
    /// # Errors
    /// `BadArguments` for an invalid path or a zero count.
    pub fn new(zkw: &ZooKeeperWatcher, path: &str, member_count: usize) -> Result<DoubleBarrier> {
        crate::path::validate(path)?;
        if member_count == 0 {
            return Err(Error::BadArguments(
                "a double barrier needs at least one member".into(),
            ));
        }
        Ok(DoubleBarrier {
            zkw: zkw.clone(),
            path: path.to_string(),
            member_count,
            node: Mutex::new(None),
            round: Mutex::new(None),
            entering: Mutex::new(()),
            waiter: Waiter::default(),
            step_hook: Hook::default(),
        })
    }

    /// Calls `hook` at each [`BarrierStep`] of `enter` and `leave`, on the calling thread
    /// (feature `testing`: how the tests force a race).
    #[must_use]
    #[cfg(feature = "testing")]
    pub fn with_step_hook(self, hook: impl Fn(BarrierStep) + Send + Sync + 'static) -> Self {
        self.step_hook.set(move |step, _| hook(step));
        self
    }

    /// The barrier's node.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// This member's node, while it is in the barrier.
    pub fn node(&self) -> Option<String> {
        self.node.lock().as_ref().map(|n| n.path().to_string())
    }

    /// Enters: joins the barrier and waits at most `timeout` until
    /// `member_count` members have: `Ok(true)` entered, `Ok(false)` out of time
    /// (this member's node deleted).
    ///
    /// # Errors
    /// `BadArguments` when this instance already entered, or another thread's
    /// `enter` of it is under way (nothing is made); `SessionExpired`,
    /// `Closed`; `ConnectionLoss` when the connection stays down for a session
    /// timeout; [`Error::NoReadPermission`] naming a member this one may not
    /// read (`check`, as it fills the round) or a `ready` it may not read
    /// (see the type's docs). The member's node is deleted on every error,
    /// also one the server made for a create whose reply was lost (found by
    /// its tag, after the reconnect if the link is down): no member that
    /// gave up is ever counted.
    #[must_use = "`Ok(false)` means the barrier was not entered (time ran out)"]
    pub fn enter(&self, timeout: Duration) -> Result<bool> {
        let _started = crate::metrics::Timer::start();
        let entered = self.enter_within(timeout);
        crate::metrics::metric!(barrier_wait(
            "double_barrier_enter",
            &self.path,
            entered.as_ref().ok().copied(),
            _started
        ));
        entered
    }

    /// [`enter`](Self::enter)'s work.
    fn enter_within(&self, timeout: Duration) -> Result<bool> {
        let already = || {
            Err(Error::BadArguments(format!(
                "already entered the double barrier {}",
                self.path
            )))
        };
        // One `enter` at a time: a second one of this instance refuses before
        // it makes a node (its node would replace the first's, orphaned).
        let Some(_entering) = self.entering.try_lock() else {
            return already();
        };
        if self.node.lock().is_some() {
            return already();
        }
        self.round.lock().take();
        let call = CallSession::begin(&self.zkw)?;
        let bounds = Bounds::new(Some(timeout));
        let rzk = call.rzk().with_deadline(bounds.calls);
        let ready = zkutil::join_znode(&self.path, READY_NODE);
        // 2. the watch on `ready` comes before our node.
        let round = self.waiter.round();
        rzk.exists_watch(&ready, self.waiter.watcher())?;
        hook!(self.step_hook, BarrierStep::Joining, &self.path);
        // 1, 3. our node.
        let tagged = tagged_prefix(&zkutil::join_znode(&self.path, MEMBER_PREFIX));
        let mode = CreateMode::EphemeralSequential;
        let created = create_tagged(&rzk, &tagged, &[], mode, Parents::Persistent, None);
        let me = match created {
            Ok(made) => SessionNode::adopt(&call, made.path, &made.stat),
            Err(e) => {
                // The server may have made the node (a lost reply, then every
                // lookup failing): found by its tag and removed, after the
                // reconnect if need be, so no orphan member is ever counted.
                if e.is_retryable() {
                    remove_and_wait(&self.zkw, Attempt::Tag(tagged));
                }
                return Err(e);
            }
        };
        let my_path = me.path().to_string();
        *self.node.lock() = Some(me);
        let result = match self.wait_entered(&call, &rzk, &ready, bounds, round) {
            Err(e) if bounds.cut_short(&e) => Ok(false),
            other => other,
        };
        match result {
            Ok(true) => Ok(true),
            Ok(false) => {
                hook!(self.step_hook, BarrierStep::TimedOut, &self.path);
                self.withdraw_or_enter(&call, &ready, &my_path)
            }
            Err(e) => {
                debug!("leaving {} unentered: {e}", self.path);
                self.withdraw();
                Err(e)
            }
        }
    }

    /// Out of time: withdraws, or enters after all when `ready` exists (see
    /// [`withdraw_unentered`](Self::withdraw_unentered)); a failed attempt
    /// withdraws as after an error.
    fn withdraw_or_enter(&self, call: &CallSession, ready: &str, my_path: &str) -> Result<bool> {
        match self.withdraw_unentered(call, ready, my_path) {
            Ok(entered) => Ok(entered),
            Err(e) => {
                debug!("leaving {} unentered: {e}", self.path);
                self.withdraw();
                Ok(false)
            }
        }
    }

    /// A member out of time withdraws, unless a current `ready` exists: it
    /// reads `ready` (see [`read_ready`](Self::read_ready)), then sends one
    /// `multi` that checks the barrier's version (no `ready` made since),
    /// deletes a stale `ready` or creates and deletes `ready` (failing when
    /// one is there, also from an older zklock that does not count), and
    /// deletes our node. `Ok(true)`: a current `ready` exists, we entered
    /// after all; `Ok(false)`: withdrawn, and no member can count us any more.
    fn withdraw_unentered(&self, call: &CallSession, ready: &str, me: &str) -> Result<bool> {
        let rzk = call.rzk().with_deadline(Deadline::after(WITHDRAW));
        let mut attempt = 0;
        loop {
            attempt += 1;
            let ReadyState::NotCurrent {
                barrier_version,
                stale,
                ..
            } = self.read_ready(&rzk, ready, false)?
            else {
                return Ok(true);
            };
            hook!(self.step_hook, BarrierStep::Withdrawing, &self.path);
            let mut ops = vec![Op::check(self.path.clone(), Some(barrier_version))];
            if stale {
                ops.push(Op::Delete {
                    path: ready.to_string(),
                    version: None,
                });
            } else {
                ops.push(Op::Create {
                    path: ready.to_string(),
                    data: Vec::new(),
                    acl: rzk.acl_for(ready).to_vec(),
                    mode: CreateMode::Persistent,
                });
                ops.push(Op::Delete {
                    path: ready.to_string(),
                    version: None,
                });
            }
            ops.push(Op::Delete {
                path: me.to_string(),
                version: None,
            });
            match rzk.zookeeper().multi(&ops) {
                Ok(_) => {
                    self.node.lock().take();
                    return Ok(false);
                }
                // `ready` made, replaced or removed meanwhile: read again
                // (the caller withdraws plainly when it keeps changing).
                Err(
                    e @ Error::Multi {
                        code: ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode,
                        ..
                    },
                ) => {
                    if attempt >= WITHDRAW_ATTEMPTS {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads `ready` as a member decides on it: the barrier node's data
    /// version first (it grows with every `ready` made, see
    /// [`create_ready`](Self::create_ready)), then `ready`, then the members.
    /// A `multi` that checks that version fails if a `ready` was made after
    /// this read; the `ready` read here is the only one there can be
    /// otherwise (a session's reads are in order).
    ///
    /// A waiting member (`watch`) reads the barrier node with the waiter's
    /// data watch: the `multi` that makes `ready` writes it, and servers
    /// from 3.7 on do not deliver `ready`'s creation event to a session
    /// without `READ` on `ready` (its `exists` watch never fires there), so
    /// this watch wakes the member, whose next read of `ready` is then
    /// refused at once ([`Error::NoReadPermission`]) instead of waiting out
    /// its timeout.
    fn read_ready(
        &self,
        rzk: &RecoverableZooKeeper,
        ready: &str,
        watch: bool,
    ) -> Result<ReadyState> {
        let (_, barrier) = if watch {
            rzk.get_data_watch(&self.path, self.waiter.watcher())?
        } else {
            rzk.get_data(&self.path, false)?
        };
        let data = match rzk.get_data(ready, false) {
            Ok((data, _)) => Some(data),
            Err(e) if e.is(ZkError::NoNode) => None,
            Err(e) => return Err(e),
        };
        let members = members(&rzk.get_children(&self.path, false)?);
        match data {
            Some(data) if ready_is_current(&data, &members) => {
                // The caller enters by it: its round.
                *self.round.lock() = Some(data);
                Ok(ReadyState::Current)
            }
            data => Ok(ReadyState::NotCurrent {
                barrier_version: barrier.version,
                stale: data.is_some(),
                members,
            }),
        }
    }

    /// Steps 4 to 6 of the page: until a current `ready` exists or this
    /// member finds `member_count` members and creates it. A stale `ready`
    /// counts as none.
    fn wait_entered(
        &self,
        call: &CallSession,
        rzk: &RecoverableZooKeeper,
        ready: &str,
        bounds: Bounds,
        first: Round,
    ) -> Result<bool> {
        let mut round = Some(first);
        loop {
            call.check()?;
            let this_round = match round.take() {
                Some(r) => r,
                None => {
                    let r = self.waiter.round();
                    rzk.exists_watch(ready, self.waiter.watcher())?;
                    r
                }
            };
            // 4, 5, 6.
            let ReadyState::NotCurrent {
                barrier_version,
                stale,
                members: counted,
            } = self.read_ready(rzk, ready, true)?
            else {
                return Ok(true);
            };
            if counted.len() >= self.member_count {
                hook!(self.step_hook, BarrierStep::Counted, &self.path);
                if self.create_ready(rzk, ready, &counted, barrier_version, stale)? {
                    return Ok(true);
                }
                // A counted member left, or `ready` changed, meanwhile: again.
                continue;
            }
            hook!(self.step_hook, BarrierStep::Waiting, &self.path);
            if !self
                .waiter
                .wait(&call.pinned(), this_round, bounds.wait, &self.path)?
            {
                return Ok(false);
            }
        }
    }

    /// Creates `ready`, naming this round, in one `multi`: a check of every
    /// member `counted`, a check that the barrier's version is still
    /// `barrier_version` (no `ready` made since it was read), the deletion of
    /// the `stale` one read then, if any, a write to the barrier's node (its
    /// version counts the `ready`s made; its data is left empty) and the
    /// create. `Ok(true)` when `ready` is ours; `Ok(false)` when a counted
    /// member is gone or `ready` changed meanwhile (nothing written: read
    /// again).
    fn create_ready(
        &self,
        rzk: &RecoverableZooKeeper,
        ready: &str,
        counted: &[String],
        barrier_version: i32,
        stale: bool,
    ) -> Result<bool> {
        let mut ops: Vec<Op> = counted
            .iter()
            .map(|m| Op::Check {
                path: zkutil::join_znode(&self.path, m),
                version: None,
            })
            .collect();
        ops.push(Op::check(self.path.clone(), Some(barrier_version)));
        if stale {
            ops.push(Op::Delete {
                path: ready.to_string(),
                version: None,
            });
        }
        ops.push(Op::set_data(self.path.clone(), Vec::new(), None));
        ops.push(Op::Create {
            path: ready.to_string(),
            data: ready_data(counted),
            acl: rzk.acl_for(ready).to_vec(),
            mode: CreateMode::Persistent,
        });
        match rzk.zookeeper().multi(&ops) {
            Ok(_) => {
                *self.round.lock() = Some(ready_data(counted));
                Ok(true)
            }
            Err(Error::Multi {
                code: ZkError::NoNode | ZkError::NodeExists | ZkError::BadVersion,
                ..
            }) => Ok(false),
            // A `check` needs `READ` on its node (on every server version):
            // a member this one may not read can never be counted.
            Err(Error::Multi {
                index,
                code: ZkError::NoAuth,
                results,
            }) => match ops.get(index) {
                Some(Op::Check { path, .. }) => Err(Error::NoReadPermission {
                    operation: "check",
                    path: path.clone(),
                }),
                _ => Err(Error::Multi {
                    index,
                    code: ZkError::NoAuth,
                    results,
                }),
            },
            // In doubt: the next round looks for `ready` and counts again.
            Err(e) if e.is_retryable() && !rzk.deadline().is_past() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Leaves: waits at most `timeout` until every member has left:
    /// `Ok(true)` all left, `Ok(false)` out of time (this member withdrawn: its
    /// node deleted, so it does not hold the others up).
    ///
    /// # Errors
    /// `BadArguments` when this instance has not entered; `SessionExpired`,
    /// `Closed`; `ConnectionLoss` when the connection stays down for a session
    /// timeout. The member's node is deleted on every error.
    #[must_use = "`Ok(false)` means the barrier was not left by all members in time"]
    pub fn leave(&self, timeout: Duration) -> Result<bool> {
        let _started = crate::metrics::Timer::start();
        let left = self.leave_within(timeout);
        crate::metrics::metric!(barrier_wait(
            "double_barrier_leave",
            &self.path,
            left.as_ref().ok().copied(),
            _started
        ));
        left
    }

    /// [`leave`](Self::leave)'s work.
    fn leave_within(&self, timeout: Duration) -> Result<bool> {
        let Some((call, me)) = self
            .node
            .lock()
            .as_ref()
            .map(|n| (n.session().clone(), n.path().to_string()))
        else {
            return Err(Error::BadArguments(format!(
                "not in the double barrier {}",
                self.path
            )));
        };
        let bounds = Bounds::new(Some(timeout));
        let rzk = call.rzk().with_deadline(bounds.calls);
        let result = match self.wait_left(&call, &rzk, &me, bounds) {
            Err(e) if bounds.cut_short(&e) => Ok(false),
            other => other,
        };
        match result {
            Ok(true) => {
                self.node.lock().take();
                Ok(true)
            }
            other => {
                self.withdraw();
                other
            }
        }
    }

    /// The page's leave, step for step.
    fn wait_left(
        &self,
        call: &CallSession,
        rzk: &RecoverableZooKeeper,
        me: &str,
        bounds: Bounds,
    ) -> Result<bool> {
        let my_name = zkutil::get_node_name(me).to_string();
        let ready = zkutil::join_znode(&self.path, READY_NODE);
        let mut mine = true;
        loop {
            call.check()?;
            // 1.
            let l = match rzk.get_children(&self.path, false) {
                Ok(c) => members(&c),
                Err(e) if e.is(ZkError::NoNode) => Vec::new(),
                Err(e) => return Err(e),
            };
            let present = l.contains(&my_name);
            // 2, 3: nobody else is left.
            if l.iter().all(|m| *m == my_name) {
                if present {
                    delete_if_present(rzk, me)?;
                }
                hook!(self.step_hook, BarrierStep::Emptied, &self.path);
                self.remove_own_ready(rzk, &ready)?;
                return Ok(true);
            }
            let lowest = &l[0];
            // 4, 5.
            let to_watch = if present && *lowest == my_name {
                l.last().cloned().unwrap_or_default()
            } else {
                if mine && present {
                    delete_if_present(rzk, me)?;
                }
                mine = false;
                lowest.clone()
            };
            let round = self.waiter.round();
            match rzk.get_data_watch(
                &zkutil::join_znode(&self.path, &to_watch),
                self.waiter.watcher(),
            ) {
                Ok(_) => {}
                Err(e) if e.is(ZkError::NoNode) => continue,
                Err(e) => return Err(e),
            }
            // 6.
            if !self
                .waiter
                .wait(&call.pinned(), round, bounds.wait, &self.path)?
            {
                return Ok(false);
            }
        }
    }

    /// The last member out deletes its round's `ready`, and only that: it
    /// reads the barrier node's version, then `ready`; a `ready` of another
    /// round (the next one, made after this one emptied: its data names
    /// other members) or none is left alone; its own goes in one `multi`
    /// with a check of that version, which fails if a `ready` was made since
    /// the read (then it reads again). Before, every member that found the
    /// barrier empty deleted `ready` unconditionally, and a delete landing
    /// after the next round made its `ready` let one of that round's members
    /// in and kept the others out.
    fn remove_own_ready(&self, rzk: &RecoverableZooKeeper, ready: &str) -> Result<()> {
        let Some(round) = self.round.lock().take() else {
            return Ok(());
        };
        for _ in 0..WITHDRAW_ATTEMPTS {
            let barrier_version = match rzk.get_data(&self.path, false) {
                Ok((_, stat)) => stat.version,
                Err(e) if e.is(ZkError::NoNode) => return Ok(()),
                Err(e) => return Err(e),
            };
            match rzk.get_data(ready, false) {
                Ok((data, _)) if data == round => {}
                Ok(_) => {
                    debug!("{ready} is another round's: left alone");
                    return Ok(());
                }
                Err(e) if e.is(ZkError::NoNode) => return Ok(()),
                Err(e) => return Err(e),
            }
            let ops = [
                Op::check(self.path.clone(), Some(barrier_version)),
                Op::Delete {
                    path: ready.to_string(),
                    version: None,
                },
            ];
            match rzk.zookeeper().multi(&ops) {
                Ok(_) => return Ok(()),
                // Removed, or another `ready` made, meanwhile: read again.
                Err(Error::Multi {
                    code: ZkError::BadVersion | ZkError::NoNode,
                    ..
                }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Deletes this member's node, if any (bounded; finished in the background
    /// when the server does not answer in time; nothing to do once its session
    /// ended).
    fn withdraw(&self) {
        let Some(me) = self.node.lock().take() else {
            return;
        };
        if me.session().check().is_err() {
            return; // ephemeral: gone with the session
        }
        if let Err(e) = me.delete_by(Deadline::after(WITHDRAW)) {
            debug!(
                "could not remove double-barrier member {} now ({e}); removing it in the background",
                me.path()
            );
            me.remove_in_background();
        }
    }
}

impl Drop for DoubleBarrier {
    fn drop(&mut self) {
        if let Some(me) = self.node.get_mut().take() {
            // Retried after a reconnect; nothing to do once the session ended.
            me.remove_in_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_by_sequence_without_ready() {
        let c: Vec<String> = [
            "m-bb-0000000003",
            "ready",
            "m-aa-0000000001",
            "m-cc-0000000002",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            members(&c),
            ["m-aa-0000000001", "m-cc-0000000002", "m-bb-0000000003"]
        );
    }

    #[test]
    fn ready_is_current_while_a_member_it_counted_is_present() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let round = ready_data(&names(&["m-a-0000000004", "m-b-0000000007"]));
        assert_eq!(round, b"m-b-0000000007");
        // A counted member (or one at or below the highest) is present.
        assert!(ready_is_current(&round, &names(&["m-b-0000000007"])));
        assert!(ready_is_current(
            &round,
            &names(&["m-a-0000000004", "m-c-0000000009"])
        ));
        // Only later members: the round is over (its members died).
        assert!(!ready_is_current(&round, &names(&["m-c-0000000009"])));
        assert!(!ready_is_current(&round, &[]));
        // A `ready` naming no round (an older zklock's) is taken as current.
        assert!(ready_is_current(b"", &names(&["m-c-0000000009"])));
        assert!(ready_is_current(b"\xff\x00", &[]));
    }
}
