//! The chaos worker's recipe modes: an election whose leaders do fenced
//! writes (checked as the locks are: a leader is a write-lock holder whose
//! node is its offer; a quarter of the offers made with their create's reply
//! lost), and a queue of unique items offered and taken.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::{lock_path, Belief, Worker};
use crate::harness::event::{now_us, Rng};
use zklock::client::ReplyKind;
use zklock::recipes::election::{ElectionEventType, ElectionState, LeaderElectionSupport};
use zklock::recipes::queue::DistributedQueue;
use zklock::{Error, ZooKeeperWatcher};

/// The queue's directory under a run's `root`.
pub(crate) fn queue_path(root: &str) -> String {
    format!("{root}/queue")
}

/// Whether `e` is about a queue item (a claim in doubt names its item).
fn item_of(e: &Error) -> Option<String> {
    match e {
        Error::Zk {
            path: Some(path), ..
        } if path.contains("/qn-") => Some(path.clone()),
        _ => None,
    }
}

impl Worker {
    /// The election's listener: logs `indoubt`/`restored`/`lost` for the
    /// candidate's offer once its leadership was logged (`granted`), and
    /// updates the belief, under the beliefs' lock.
    fn election_listener(
        self: &Arc<Self>,
        offer: Arc<Mutex<Option<String>>>,
    ) -> impl Fn(ElectionEventType) + Send + Sync + 'static {
        let w = Arc::downgrade(self);
        move |event: ElectionEventType| {
            let (kind, belief) = match event {
                ElectionEventType::LeadershipInDoubt => ("indoubt", Belief::InDoubt),
                ElectionEventType::LeadershipRestored => ("restored", Belief::Valid),
                ElectionEventType::LeadershipLost => ("lost", Belief::Lost),
                _ => return,
            };
            let Some(w) = w.upgrade() else { return };
            let Some(path) = offer.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
                return;
            };
            let mut beliefs = w.beliefs.lock().unwrap();
            if !beliefs.contains_key(&path) {
                return; // leadership not logged yet: the worker checks again
            }
            beliefs.insert(path.clone(), belief);
            w.log
                .log(w.log.ev(kind).with("path", &path).with("lock", 0));
        }
    }

    /// One candidacy: start, wait to lead, lead (fenced writes on resource 0
    /// with the offer as the fence), stop.
    pub(super) fn candidacy(
        self: &Arc<Self>,
        zkw: &ZooKeeperWatcher,
        generation: u64,
        rng: &mut Rng,
    ) {
        let dir = lock_path(&self.args.root, 0);
        let host = format!("w{}", self.args.id);
        let c = match LeaderElectionSupport::new(zkw, &dir, &host) {
            Ok(c) => c,
            Err(e) => {
                self.log
                    .log(self.log.ev("error").with("what", "new").with("err", e));
                return;
            }
        };
        let offer: Arc<Mutex<Option<String>>> = Arc::default();
        c.add_listener(self.election_listener(offer.clone()));
        let start = now_us();
        // One start in four has its offer create's reply lost (applied, then
        // the connection drops): the retry must find this candidate's own
        // offer, never a sibling's of the same session.
        if rng.chance(0.25) {
            zkw.zookeeper().lose_next_reply(ReplyKind::Create);
            self.log
                .log(self.log.ev("inject").with("what", "lose_create_reply"));
        }
        if let Err(e) = c.start() {
            self.log
                .log(self.log.ev("error").with("what", "start").with("err", &e));
            let _ = c.stop();
            if e.is_fatal() || zkw.is_expired() {
                self.renew(generation);
            } else {
                thread::sleep(Duration::from_millis(50));
            }
            return;
        }
        let Some(path) = c.offer_node() else {
            return;
        };
        *offer.lock().unwrap_or_else(|e| e.into_inner()) = Some(path.clone());
        // Wait to lead (or for the candidacy to fail, or the stop).
        while !self.stopping() && c.state() != ElectionState::Failed && !c.has_leadership() {
            thread::sleep(Duration::from_millis(10));
        }
        let stat = if c.has_leadership() {
            zkw.zookeeper().exists(&path, false).ok().flatten()
        } else {
            None
        };
        let fence = stat.and_then(|stat| {
            let mut beliefs = self.beliefs.lock().unwrap();
            // Logged under the beliefs' lock, only while leading: a doubt told
            // before this finds no belief and leaves it to this check.
            if !c.has_leadership() || self.stopping() {
                return None;
            }
            beliefs.insert(path.clone(), Belief::Valid);
            self.log.log(
                self.log
                    .ev("granted")
                    .with("lock", 0)
                    .with("kind", "w")
                    .with("path", &path)
                    .with("czxid", stat.czxid)
                    .with("version", stat.version)
                    .with("start", start),
            );
            Some(stat.version)
        });
        if let Some(version) = fence {
            let zk = zkw.zookeeper();
            for _ in 0..1 + rng.below(3) {
                // A leader in doubt waits (as a real one does) for its
                // leadership to be restored or lost before it goes on: a
                // `LeadershipRestored` told while another leads (the offer
                // deleted meanwhile) then shows as two leaders at once.
                let until = std::time::Instant::now() + self.args.session * 2;
                while !self.stopping()
                    && self.belief(&path) == Some(Belief::InDoubt)
                    && std::time::Instant::now() < until
                {
                    thread::sleep(Duration::from_millis(10));
                }
                if self.stopping() || self.belief(&path) != Some(Belief::Valid) {
                    break;
                }
                self.write(zk, 0, &path, Some(version));
                thread::sleep(rng.millis(5, 40));
            }
            self.log
                .log(self.log.ev("releasing").with("lock", 0).with("path", &path));
        }
        let failed = c.state() == ElectionState::Failed;
        let outcome = match c.stop() {
            Ok(()) if failed => "lost".to_string(),
            Ok(()) => "ok".to_string(),
            Err(e) => format!("err:{e}"),
        };
        self.beliefs.lock().unwrap().remove(&path);
        if fence.is_some() {
            self.log.log(
                self.log
                    .ev("released")
                    .with("lock", 0)
                    .with("path", &path)
                    .with("result", outcome),
            );
        }
        if failed {
            self.log
                .log(self.log.ev("error").with("what", "election_failed"));
            if zkw.is_expired() {
                self.renew(generation);
            }
        }
    }

    /// One queue step: even threads offer a unique item, odd threads take one
    /// (waiting up to 1 s). Logged before (`offer_sent`, `take_start`) and
    /// after (`offered`/`offer_unknown`/`offer_failed`,
    /// `took`/`take_none`/`take_failed`) so the checker accounts for every
    /// item.
    pub(super) fn queue_step(
        self: &Arc<Self>,
        zkw: &ZooKeeperWatcher,
        generation: u64,
        thread_no: u64,
        rng: &mut Rng,
    ) {
        let q = match DistributedQueue::new(zkw, &queue_path(&self.args.root)) {
            Ok(q) => q,
            Err(e) => {
                self.log
                    .log(self.log.ev("error").with("what", "new").with("err", e));
                return;
            }
        };
        let result = if thread_no % 2 == 0 {
            let op = format!(
                "w{}.{}.{}",
                self.args.id,
                std::process::id(),
                self.ops.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            );
            self.log.log(
                self.log
                    .ev("offer_sent")
                    .with("op", &op)
                    .with("t", thread_no),
            );
            let r = q.offer(op.as_bytes());
            let ev = match &r {
                Ok(path) => self.log.ev("offered").with("path", path),
                Err(e) if e.is_retryable() => self.log.ev("offer_unknown").with("err", e),
                Err(e) => self.log.ev("offer_failed").with("err", e),
            };
            self.log.log(ev.with("op", &op).with("t", thread_no));
            thread::sleep(rng.millis(5, 60));
            r.map(|_| ())
        } else {
            self.log.log(self.log.ev("take_start").with("t", thread_no));
            let r = q.take_timeout(Duration::from_secs(1));
            let ev = match &r {
                Ok(Some(data)) => self
                    .log
                    .ev("took")
                    .with("op", String::from_utf8_lossy(data)),
                Ok(None) => self.log.ev("take_none"),
                Err(e) => {
                    let ev = self.log.ev("take_failed").with("err", e);
                    match item_of(e) {
                        Some(item) => ev.with("item", item),
                        None => ev,
                    }
                }
            };
            self.log.log(ev.with("t", thread_no));
            r.map(|_| ())
        };
        if let Err(e) = result {
            if e.is_fatal() || zkw.is_expired() {
                self.renew(generation);
            } else {
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
