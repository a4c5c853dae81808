//! The event thread and its queue: watchers and async callbacks run here, in
//! the order the connection thread queued them.

use super::*;

/// Queued event-thread messages past which a warning is logged (see
/// [`SessionShared::enqueue`]).
pub(crate) const EVENT_QUEUE_WARN: usize = 10_000;

pub(super) enum EventMsg {
    Deliver(Vec<WatcherRef>, WatchedEvent),
    Answer(Callback, Reply),
    Stop,
}

pub(super) fn run_events(rx: Receiver<EventMsg>) {
    for msg in rx {
        match msg {
            EventMsg::Deliver(watchers, event) => {
                for w in watchers {
                    let ev = event.clone();
                    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| w.process(ev))) {
                        let why = panic
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "non-string panic".into());
                        error!("a watcher panicked on {event}: {why}");
                    }
                }
            }
            EventMsg::Answer(callback, reply) => {
                if catch_unwind(AssertUnwindSafe(|| callback(reply))).is_err() {
                    error!("an async callback panicked");
                }
            }
            EventMsg::Stop => break,
        }
    }
    trace!("event thread ends");
}

impl SessionShared {
    /// Queues `msg` for the event thread.
    ///
    /// The event queue is unbounded, as Java's `EventThread` queue: the
    /// connection thread never blocks on it, so replies, pings and the session
    /// stay correct however slow a watcher is. A watcher stuck for good makes it
    /// grow: each queued event costs about 100 bytes plus its path and one
    /// `Arc` per watcher told (a callback: its reply). Past
    /// [`EVENT_QUEUE_WARN`] queued messages a warning is logged (once, again
    /// after the queue fell below half of it); [`ZooKeeper::queued_events`]
    /// reads the length. Bounding it would mean dropping events (a watch lost
    /// silently) or dropping the connection (the next reconnect replays the
    /// same events): neither keeps the session correct.
    ///
    /// [`ZooKeeper::queued_events`]: crate::client::ZooKeeper::queued_events
    pub(super) fn enqueue(
        &self,
        msg: EventMsg,
    ) -> Result<(), crossbeam_channel::SendError<EventMsg>> {
        let sent = self.events.send(msg);
        let len = self.events.len();
        if len >= EVENT_QUEUE_WARN {
            if !self.queue_warned.swap(true, Ordering::Relaxed) {
                warn!(
                    "{len} events wait for the event thread: a watcher or callback is slow or stuck"
                );
            }
        } else if len < EVENT_QUEUE_WARN / 2 {
            self.queue_warned.store(false, Ordering::Relaxed);
        }
        sent
    }

    /// Messages waiting for the event thread.
    pub(crate) fn queued_events(&self) -> usize {
        self.events.len()
    }

    /// Hands `event` to `watchers` on the event thread.
    pub(crate) fn deliver(&self, watchers: Vec<WatcherRef>, event: WatchedEvent) {
        if !watchers.is_empty() {
            let _ = self.enqueue(EventMsg::Deliver(watchers, event));
        }
    }
}
