//! `zklock ls --watch`: the listing again at each change, driven by
//! ZooKeeper watches.
//!
//! What is watched: the children of the lock znode, of a semaphore's `locks`
//! and `leases` directories and of kazoo's semaphore guard `<znode>-__lock__`
//! (an existence watch on each that does not exist), set before each read, so
//! that no change between a read and the next watch is missed. A change is a
//! node arriving or leaving; a printed listing equal to the last one (a
//! watch that fired for nothing shown, a reconnect with no change) is not
//! printed again. A path that does not exist (when the watch starts, or
//! later) is shown so and watched until it comes.
//!
//! The session: a lost connection is told on stderr and the lock is read
//! again once reconnected (changes meanwhile are shown then). An expired
//! session is told, and a new session is opened (the watcher's session
//! renewal) and the lock read again: an observer holds nothing the expiry
//! could have taken, so it keeps watching rather than exiting. Only a
//! failure to open a new session, an authentication failure or an error
//! reading the lock while connected ends it (exit 1).

use std::io::{self, Write};
use std::sync::Arc;

use crossbeam_channel::{select, unbounded, Sender};
use zklock::client::{EventType, KeeperState, State, WatchedEvent, Watcher};
use zklock::{ZkError, ZooKeeperListener, ZooKeeperWatcher};

use crate::ls::{list, render, warn_mixed, what_is, Listing};
use crate::supervise::SignalWatch;
use crate::{connect_with, Global, LsArgs};

/// What the watch loop is told.
#[derive(Debug)]
enum Event {
    /// A watched node changed.
    Changed,
    /// The session's connection state changed.
    Connection(KeeperState),
    /// The session expired and no new one could be opened.
    Aborted(String),
}

/// The session's connection events, for the loop (sends only: never blocks
/// the event thread).
struct ConnectionEvents(Sender<Event>);

impl ZooKeeperListener for ConnectionEvents {
    fn connection_event(&self, event: &WatchedEvent) {
        let _ = self.0.send(Event::Connection(event.keeper_state));
    }
}

pub(crate) fn run(g: &Global, a: &LsArgs) -> anyhow::Result<i32> {
    let (tx, events) = unbounded::<Event>();
    let aborted = tx.clone();
    let zkw = connect_with(g, |b| {
        b.with_session_renewal(true).with_abortable(Arc::new(
            move |why: &str, _: Option<&zklock::Error>| {
                let _ = aborted.send(Event::Aborted(why.to_string()));
            },
        ))
    })?;
    let result = follow(&zkw, a, tx, &events);
    let _ = zkw.close();
    result
}

/// The paths whose children (or existence) `list` reads for `znode`.
fn watched_paths(znode: &str) -> [String; 4] {
    use zklock::lock::{SEMAPHORE_LEASES, SEMAPHORE_LOCKS};
    [
        znode.to_string(),
        zklock::zkutil::join_znode(znode, SEMAPHORE_LOCKS),
        zklock::zkutil::join_znode(znode, SEMAPHORE_LEASES),
        format!("{znode}-__lock__"),
    ]
}

/// Sets the watches (children, or existence where missing), then reads.
fn watch_and_list(
    zkw: &ZooKeeperWatcher,
    znode: &str,
    watcher: &Arc<dyn Watcher>,
) -> Result<Listing, anyhow::Error> {
    let rzk = zkw.recoverable_zookeeper();
    for path in watched_paths(znode) {
        loop {
            match rzk.get_children_watch(&path, watcher) {
                Ok(_) => break,
                Err(e) if e.is(ZkError::NoNode) => {
                    match rzk.exists_watch(&path, watcher) {
                        Ok(Some(_)) => continue, // created meanwhile
                        Ok(None) => break,
                        Err(e) => {
                            return Err(anyhow::Error::new(e).context(format!("watching {path}")))
                        }
                    }
                }
                Err(e) => return Err(anyhow::Error::new(e).context(format!("watching {path}"))),
            }
        }
    }
    list(zkw, znode)
}

/// This machine's time, `YYYY-MM-DD HH:MM:SS UTC`, for the table's heading.
fn utc_now() -> String {
    // humantime's RFC 3339 `2026-12-04T01:57:07Z`, as a heading reads it.
    let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    format!("{} UTC", at.trim_end_matches('Z').replacen('T', " ", 1))
}

/// Whether `e` is a ZooKeeper error a reconnect (or a new session) ends.
fn transient(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<zklock::Error>())
        .any(|e| e.is_retryable() || e.is(ZkError::SessionExpired))
}

fn follow(
    zkw: &ZooKeeperWatcher,
    a: &LsArgs,
    tx: Sender<Event>,
    events: &crossbeam_channel::Receiver<Event>,
) -> anyhow::Result<i32> {
    let znode = a.znode.as_str();
    let _registration = zkw.listen(Arc::new(ConnectionEvents(tx.clone())));
    let watcher: Arc<dyn Watcher> = Arc::new(move |e: WatchedEvent| {
        // Connection states reach every watcher too; the listener tells them.
        if e.event_type != EventType::None {
            let _ = tx.send(Event::Changed);
        }
    });
    let signals = SignalWatch::start(|_| {})?;
    // What was printed last: the listing, its kind (no such node, idle,
    // parent of locks) and its warnings; ages are not compared.
    let mut shown = None;
    // Whether a read is due, and whether one can be made now; what stderr
    // said of the connection (the events': a read can fail before the
    // Disconnected event is handled).
    let (mut due, mut connected) = (true, true);
    let (mut told_up, mut expired) = (true, false);
    let mut failures = 0;
    loop {
        if due && connected {
            match watch_and_list(zkw, znode, &watcher) {
                Ok(listing) => {
                    due = false;
                    failures = 0;
                    // A path that does not exist (yet, or any more) is
                    // shown so, and watched until it comes.
                    // A JSON document does not tell an idle lock from a
                    // missing one (both `[]`): compared as printed.
                    let key = (
                        listing.entries.clone(),
                        listing.mixed.clone(),
                        (!a.json).then(|| what_is(listing.children.clone())),
                    );
                    if shown.as_ref() != Some(&key) {
                        if shown.as_ref().map(|(_, m, _)| m) != Some(&listing.mixed) {
                            warn_mixed(&listing.mixed);
                        }
                        let mut out = io::stdout().lock();
                        // A table's heading; a JSON document is one line.
                        let heading = if a.json {
                            Ok(())
                        } else {
                            writeln!(out, "== {znode} at {} ==", utc_now())
                        };
                        let written = heading
                            .and_then(|()| render(&mut out, znode, &listing, a.json, true))
                            .and_then(|()| out.flush());
                        match written {
                            Ok(()) => {}
                            // The reader went away (`| head -1`): done.
                            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(0),
                            Err(e) => {
                                return Err(anyhow::Error::new(e).context("writing to stdout"))
                            }
                        }
                        shown = Some(key);
                    }
                }
                // Connection lost or session expired meanwhile: read again
                // once the connection (or a new session) is back.
                Err(e) if transient(&e) && zkw.state() != State::Connected => {
                    connected = false;
                }
                // Connected again already: read again at once, a few times.
                Err(e) if transient(&e) && failures < 3 => failures += 1,
                Err(e) => return Err(e),
            }
            if due && connected {
                continue;
            }
        }
        select! {
            recv(signals.signals()) -> _ => return Ok(0),
            recv(events) -> event => match event {
                Ok(Event::Changed) => due = true,
                Ok(Event::Connection(KeeperState::Disconnected)) => {
                    if told_up {
                        eprintln!(
                            "zklock: connection to ZooKeeper lost; changes to {znode} are \
                             shown once reconnected"
                        );
                    }
                    (connected, told_up) = (false, false);
                }
                Ok(Event::Connection(KeeperState::Expired)) => {
                    eprintln!(
                        "zklock: the session expired; opening a new session to watch {znode} \
                         again"
                    );
                    (connected, told_up, expired) = (false, false, true);
                }
                Ok(Event::Connection(KeeperState::SyncConnected)) => {
                    let session = zkw.recoverable_zookeeper().session_id();
                    if expired {
                        eprintln!(
                            "zklock: new session 0x{session:x}; reading {znode} again"
                        );
                    } else if !told_up {
                        eprintln!(
                            "zklock: reconnected to ZooKeeper (session 0x{session:x}); \
                             reading {znode} again"
                        );
                    }
                    (connected, told_up, expired, due) = (true, true, false, true);
                }
                Ok(Event::Connection(KeeperState::AuthFailed)) => {
                    anyhow::bail!("ZooKeeper refused the session's authentication while watching {znode}")
                }
                Ok(Event::Connection(KeeperState::Closed)) | Err(_) => {
                    anyhow::bail!("the session to ZooKeeper was closed while watching {znode}")
                }
                Ok(Event::Connection(_)) => {}
                Ok(Event::Aborted(why)) => {
                    anyhow::bail!("the session expired and no new one could be opened: {why}")
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::utc_now;

    #[test]
    fn the_heading_time_is_a_utc_date() {
        let t = utc_now();
        assert_eq!(t.len(), "2026-12-04 01:57:07 UTC".len(), "{t}");
        assert!(t.ends_with(" UTC") && t.as_bytes()[10] == b' ', "{t}");
    }
}
