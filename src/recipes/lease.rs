//! Leases (kazoo's `NonBlockingLease` and `MultiNonBlockingLease`): at most
//! one holder of a lease at a time, until its duration has passed, decided
//! by the **server's clock**.
//!
//! # Layout and clock
//! The lease is the node `<path>/lease_holder` (kazoo's name), its data
//! kazoo's JSON (`{"version": 1, "holder": ..., "end": "%Y-%m-%dT%H:%M:%S"}`)
//! plus `"duration_ms"`. A lease starts at the `mtime` of the write that took
//! it (the server's clock) and ends `duration_ms` later. Whether a foreign
//! lease has run out is decided with the server's time now, the `mtime` of a
//! write to `<path>` made after reading the lease. The take-over is a
//! `setData` guarded by the version read, and the lease node is never
//! deleted (a release writes a lease of zero duration), so its version only
//! grows: no one takes a lease that was renewed or taken meanwhile.
//!
//! Deliberate differences from kazoo, which decides with each client's
//! local clock under a lock: the clocks of the clients do not matter here;
//! kazoo's `"end"` is written (from the local clock) for kazoo's readers, but
//! kazoo participants, which delete and re-create the node under their
//! lock, must not share a lease with zklock ones.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::client::CreateMode;
use crate::engine::owned::{with_parents, Parents};
use crate::error::{Error, Result, ZkError};
use crate::types::Stat;
use crate::watcher::ZooKeeperWatcher;
use crate::zkutil;

/// The lease node's name under the lease's path (kazoo's).
pub const LEASE_HOLDER: &str = "lease_holder";

/// The JSON layout's version (kazoo's `_version`).
const LAYOUT_VERSION: i64 = 1;

/// An obtained lease: valid for its holder until its end by the server's
/// clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The lease node.
    pub path: String,
    /// The holder's identifier.
    pub holder: String,
    /// When it started: the `mtime` of the write that took it (server clock,
    /// ms since the epoch).
    pub start_ms: i64,
    /// Its duration.
    pub duration: Duration,
    /// The local instant the taking write was sent: the lease is surely
    /// valid until `sent + duration` by the local monotonic clock.
    pub sent: Instant,
}

impl Lease {
    /// Its end by the server's clock (ms since the epoch).
    pub fn end_ms(&self) -> i64 {
        self.start_ms + self.duration.as_millis() as i64
    }

    /// Whether it is surely still held, judged conservatively by the local
    /// monotonic clock from before the taking write.
    pub fn is_valid(&self) -> bool {
        self.sent.elapsed() < self.duration
    }
}

/// A lease tried once, without waiting (kazoo's `NonBlockingLease`).
#[derive(Debug)]
pub struct NonBlockingLease;

#[derive(Debug, PartialEq, Eq)]
struct Holder {
    holder: String,
    duration_ms: i64,
}

impl NonBlockingLease {
    /// Tries to obtain (or renew, for the same `identifier`) the lease at
    /// `path` for `duration`: `Ok(Some(lease))` when held, `Ok(None)` when
    /// another holder's lease has not run out (by the server's clock).
    ///
    /// # Errors
    /// `BadArguments` for an invalid path or an empty identifier, or when the
    /// lease node holds another layout; the session's errors (a lost reply
    /// leaves the outcome in doubt: `ConnectionLoss`).
    pub fn try_obtain(
        zkw: &ZooKeeperWatcher,
        path: &str,
        duration: Duration,
        identifier: &str,
    ) -> Result<Option<Lease>> {
        crate::path::validate(path)?;
        if identifier.is_empty() {
            return Err(Error::BadArguments(
                "a lease holder needs an identifier".into(),
            ));
        }
        let zk = zkw.zookeeper();
        let node = zkutil::join_znode(path, LEASE_HOLDER);
        let data = encode(identifier, duration);
        loop {
            let read = match zk.get_data(&node, false) {
                Ok(read) => Some(read),
                Err(e) if e.is(ZkError::NoNode) => None,
                Err(e) => return Err(e),
            };
            let sent = Instant::now();
            let Some((raw, stat)) = read else {
                let rzk = zkw.recoverable_zookeeper();
                let acl = rzk.acl_for(&node);
                match with_parents(rzk, &node, Parents::Persistent, || {
                    zk.create2(&node, &data, acl, CreateMode::Persistent)
                }) {
                    Ok((_, stat)) => {
                        return Ok(Some(lease(&node, identifier, duration, &stat, sent)))
                    }
                    Err(e) if e.is(ZkError::NodeExists) => continue,
                    Err(e) => return Err(e),
                }
            };
            let current = decode(&node, &raw)?;
            if current.holder != identifier {
                // The server's time now: the mtime of a write after the read.
                let now = zk.set_data(path, b"", None)?.mtime;
                if now < stat.mtime + current.duration_ms {
                    return Ok(None);
                }
            }
            let sent = Instant::now();
            match zk.set_data(&node, &data, Some(stat.version)) {
                Ok(stat) => return Ok(Some(lease(&node, identifier, duration, &stat, sent))),
                // Renewed or taken meanwhile: look again.
                Err(e) if e.is(ZkError::BadVersion) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Gives `lease` up (a lease of zero duration is written, guarded so
    /// that it only ends this holder's lease): `Ok(false)` when it was not
    /// held any more (taken by another after it ran out).
    ///
    /// # Errors
    /// The session's errors.
    pub fn release(zkw: &ZooKeeperWatcher, lease: &Lease) -> Result<bool> {
        let zk = zkw.zookeeper();
        let (raw, stat) = match zk.get_data(&lease.path, false) {
            Ok(read) => read,
            Err(e) if e.is(ZkError::NoNode) => return Ok(false),
            Err(e) => return Err(e),
        };
        let current = decode(&lease.path, &raw)?;
        if current.holder != lease.holder || stat.mtime != lease.start_ms {
            return Ok(false);
        }
        match zk.set_data(
            &lease.path,
            &encode(&lease.holder, Duration::ZERO),
            Some(stat.version),
        ) {
            Ok(_) => Ok(true),
            Err(e) if e.is(ZkError::BadVersion) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// One of `count` leases (kazoo's `MultiNonBlockingLease`): the first of
/// `<path>/0` .. `<path>/<count-1>` obtained.
#[derive(Debug)]
pub struct MultiNonBlockingLease;

impl MultiNonBlockingLease {
    /// Tries the `count` leases in order; `Ok(None)` when all are held.
    ///
    /// # Errors
    /// As [`NonBlockingLease::try_obtain`]; `BadArguments` for a zero count.
    pub fn try_obtain(
        zkw: &ZooKeeperWatcher,
        path: &str,
        count: usize,
        duration: Duration,
        identifier: &str,
    ) -> Result<Option<Lease>> {
        if count == 0 {
            return Err(Error::BadArguments("a multi-lease of 0 leases".into()));
        }
        for i in 0..count {
            let one = zkutil::join_znode(path, &i.to_string());
            if let Some(lease) = NonBlockingLease::try_obtain(zkw, &one, duration, identifier)? {
                return Ok(Some(lease));
            }
        }
        Ok(None)
    }
}

fn lease(node: &str, holder: &str, duration: Duration, stat: &Stat, sent: Instant) -> Lease {
    Lease {
        path: node.to_string(),
        holder: holder.to_string(),
        start_ms: stat.mtime,
        duration,
        sent,
    }
}

/// kazoo's JSON, plus the duration the server's clock is judged with.
fn encode(holder: &str, duration: Duration) -> Vec<u8> {
    let end = SystemTime::now() + duration;
    let secs = end
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    format!(
        "{{\"version\": {LAYOUT_VERSION}, \"holder\": {}, \"end\": \"{}\", \"duration_ms\": {}}}",
        json_string(holder),
        format_utc(secs),
        duration.as_millis()
    )
    .into_bytes()
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Reads the holder and duration of a lease node written by [`encode`].
fn decode(node: &str, raw: &[u8]) -> Result<Holder> {
    let bad = || {
        Error::BadArguments(format!(
            "{node}: not a zklock lease: {}",
            String::from_utf8_lossy(raw)
        ))
    };
    let text = std::str::from_utf8(raw).map_err(|_| bad())?;
    let holder_at = text.find("\"holder\": \"").ok_or_else(bad)? + "\"holder\": \"".len();
    let mut holder = String::new();
    let mut chars = text[holder_at..].chars();
    loop {
        match chars.next().ok_or_else(bad)? {
            '"' => break,
            '\\' => match chars.next().ok_or_else(bad)? {
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let code = u32::from_str_radix(&hex, 16).map_err(|_| bad())?;
                    holder.push(char::from_u32(code).ok_or_else(bad)?);
                }
                c => holder.push(c),
            },
            c => holder.push(c),
        }
    }
    let d_at = text.find("\"duration_ms\": ").ok_or_else(bad)? + "\"duration_ms\": ".len();
    let digits: String = text[d_at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let duration_ms = digits.parse().map_err(|_| bad())?;
    Ok(Holder {
        holder,
        duration_ms,
    })
}

/// `%Y-%m-%dT%H:%M:%S` (UTC) of `secs` since the epoch (Howard Hinnant's
/// civil-from-days).
fn format_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_reads_back_and_formats_as_kazoo() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00");
        assert_eq!(format_utc(1_795_648_013), "2026-11-25T23:06:53");
        let raw = encode("host-\"1\"\\x", Duration::from_millis(1500));
        let h = decode("/l", &raw).unwrap();
        assert_eq!(
            h,
            Holder {
                holder: "host-\"1\"\\x".into(),
                duration_ms: 1500
            }
        );
        assert!(String::from_utf8(raw)
            .unwrap()
            .starts_with("{\"version\": 1, \"holder\": "));
        assert!(matches!(decode("/l", b"{}"), Err(Error::BadArguments(_))));
    }
}
