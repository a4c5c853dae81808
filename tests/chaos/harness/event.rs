//! The chaos event log: one line per event, written by the workers (stdout) and
//! by the controller, read back by the checker.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The first word of every event line (other lines are ignored).
pub(crate) const PREFIX: &str = "CHAOS";

/// The worker number of the controller's own events (the nemesis, the final
/// readings).
pub const CONTROLLER: u32 = 0;

/// One event: `CHAOS <ts_us> <worker> <kind> key=value ...`.
///
/// `ts` is wall-clock time in microseconds since the Unix epoch
/// (`SystemTime`): every process of a run is on one host, so the stamps of
/// different processes compare (a per-process `Instant` would not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Microseconds since the Unix epoch.
    pub ts: u64,
    /// The worker's number (1-based), or [`CONTROLLER`].
    pub worker: u32,
    /// What happened: `granted`, `indoubt`, `restored`, `lost`, `releasing`,
    /// `released`, `write_ok`, `write_rejected`, `write_unknown`, `read`, `try`,
    /// `session`, `error`, `panic`, `start`, `exit`; the controller's `fault`,
    /// `worker_paused`, `worker_resumed`, `worker_killed`, `phase`, `final`,
    /// `orphans`, `worker_exit`, `reconfig` (a member added or removed), `trouble`.
    pub kind: String,
    /// The event's fields (values have no spaces).
    pub fields: BTreeMap<String, String>,
}

impl Event {
    /// An event stamped now.
    pub fn now(worker: u32, kind: &str) -> Event {
        Event {
            ts: now_us(),
            worker,
            kind: kind.to_string(),
            fields: BTreeMap::new(),
        }
    }

    /// Adds a field; spaces in the value become `_`.
    #[must_use]
    pub fn with(mut self, key: &str, value: impl fmt::Display) -> Event {
        let v = value.to_string().replace(char::is_whitespace, "_");
        self.fields.insert(key.to_string(), v);
        self
    }

    /// Parses a line written by [`Display`](fmt::Display); `None` for any other
    /// line.
    pub fn parse(line: &str) -> Option<Event> {
        let mut words = line.split_whitespace();
        if words.next()? != PREFIX {
            return None;
        }
        let ts = words.next()?.parse().ok()?;
        let worker = words.next()?.parse().ok()?;
        let kind = words.next()?.to_string();
        let fields = words
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Some(Event {
            ts,
            worker,
            kind,
            fields,
        })
    }

    /// A field.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// A numeric field.
    pub fn num(&self, key: &str) -> Option<i64> {
        self.get(key)?.parse().ok()
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX} {} {} {}", self.ts, self.worker, self.kind)?;
        for (k, v) in &self.fields {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

/// Wall-clock microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Writes a worker's events to stdout, one flushed line each, with stamps that
/// never go backwards within the process.
#[derive(Debug)]
pub(crate) struct Logger {
    worker: u32,
    last: Mutex<u64>,
}

impl Logger {
    pub(crate) fn new(worker: u32) -> Logger {
        Logger {
            worker,
            last: Mutex::new(0),
        }
    }

    /// Stamps `event` (under the lock, so the order of lines is the order of
    /// stamps) and prints it.
    pub(crate) fn log(&self, mut event: Event) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        event.worker = self.worker;
        event.ts = now_us().max(*last);
        *last = event.ts;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{event}");
        let _ = out.flush();
    }

    /// A new event of this worker (stamped again by [`log`](Self::log)).
    pub(crate) fn ev(&self, kind: &str) -> Event {
        Event::now(self.worker, kind)
    }
}

/// A small, seeded random number generator (splitmix64): the nemesis and the
/// workers draw their schedules from it, so a seed names a run.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// A duration between `lo` and `hi` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> std::time::Duration {
        std::time::Duration::from_millis(lo + self.below(hi.saturating_sub(lo) + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip() {
        let e = Event::now(3, "granted")
            .with("path", "/a/write-x-0000000001")
            .with("why", "two words");
        let back = Event::parse(&e.to_string()).unwrap();
        assert_eq!(back, e);
        assert_eq!(back.get("why"), Some("two_words"));
        assert!(Event::parse("thread 'x' panicked").is_none());
    }

    #[test]
    fn rng_is_seeded() {
        let a: Vec<u64> = (0..5)
            .scan(Rng::new(7), |r, _| Some(r.below(100)))
            .collect();
        let b: Vec<u64> = (0..5)
            .scan(Rng::new(7), |r, _| Some(r.below(100)))
            .collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|&x| x < 100));
    }
}
