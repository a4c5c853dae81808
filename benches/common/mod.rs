//! Measuring helpers shared by the benchmarks (`mod common;` in each): the
//! servers' `mntr` counters, request windows with their ping allowance,
//! percentiles, and `/proc` readings. Each bench uses only some of them.
#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, HashSet};
use std::env;
use std::fs;
use std::time::{Duration, Instant};

use zklock::testing::{four_letter, parse_mntr};
use zklock::ZooKeeperWatcher;

/// Session timeout of every session of the benchmarks (the ping allowance
/// depends on it).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

pub fn env_usize(name: &str, default: usize) -> usize {
    env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

pub fn connect(servers: &str, identifier: &str) -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(servers)
        .with_identifier(identifier)
        .with_session_timeout(SESSION_TIMEOUT)
        .connect()
        .unwrap_or_else(|e| panic!("cannot connect to {servers}: {e}"))
}

// ---------------------------------------------------------------------------
// Measuring helpers
// ---------------------------------------------------------------------------

/// The servers' `mntr` counters, summed over every host of the connect string.
pub struct Mntr {
    pub hosts: Vec<String>,
    /// Packets one `packets()` call itself adds (measured; 0 when four-letter
    /// words are not counted).
    pub overhead: u64,
    /// The same for `zk_packets_sent`.
    pub sent_overhead: u64,
}

impl Mntr {
    pub fn new(servers: &str) -> Mntr {
        let hosts_part = servers.split('/').next().unwrap_or(servers);
        let hosts = hosts_part
            .split(',')
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .collect();
        let mut m = Mntr {
            hosts,
            overhead: 0,
            sent_overhead: 0,
        };
        // Consecutive reads with nothing in between: what the reads cost.
        let first = m.received_and_sent();
        let mut last = first;
        const READS: u64 = 5;
        for _ in 0..READS {
            last = m.received_and_sent();
        }
        m.overhead = (last.0 - first.0) / READS;
        m.sent_overhead = (last.1 - first.1) / READS;
        m
    }

    pub fn read(&self) -> Vec<HashMap<String, String>> {
        self.hosts
            .iter()
            .map(|h| {
                four_letter(h, "mntr")
                    .map(|r| parse_mntr(&r))
                    .unwrap_or_else(|e| {
                        panic!(
                            "mntr on {h}: {e} (requests are counted from `mntr`: the servers \
                             must allow it, 4lw.commands.whitelist; or unset ZK_SERVERS to use \
                             a local server)"
                        )
                    })
            })
            .collect()
    }

    pub fn sum(&self, key: &str) -> u64 {
        self.read()
            .iter()
            .map(|m| m.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
            .sum()
    }

    pub fn packets(&self) -> u64 {
        self.sum("zk_packets_received")
    }

    /// `(zk_packets_received, zk_packets_sent)` from one read.
    pub fn received_and_sent(&self) -> (u64, u64) {
        let maps = self.read();
        let get = |key: &str| -> u64 {
            maps.iter()
                .map(|x| x.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
                .sum()
        };
        (get("zk_packets_received"), get("zk_packets_sent"))
    }

    /// Every path with a watch on any of the servers (`wchp`: a path line, then
    /// its sessions indented).
    pub fn watched_paths(&self) -> HashSet<String> {
        self.hosts
            .iter()
            .flat_map(|h| {
                let reply = four_letter(h, "wchp")
                    .unwrap_or_else(|e| panic!("wchp on {h}: {e} (the servers must allow it)"));
                reply
                    .lines()
                    .filter(|l| l.starts_with('/'))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// A window of server requests: packets received between `start` and `stop`,
/// minus one `mntr` read's cost, with the pings that may have fallen inside.
pub struct Requests {
    pub before: u64,
    pub started: Instant,
}

pub struct Counted {
    pub requests: u64,
    /// Most pings the window may include (already inside `requests`).
    pub ping_allowance: u64,
    pub outstanding: u64,
    pub connections: u64,
}

impl Requests {
    pub fn start(m: &Mntr) -> Requests {
        Requests {
            before: m.packets(),
            started: Instant::now(),
        }
    }

    pub fn stop(self, m: &Mntr) -> Counted {
        let elapsed = self.started.elapsed();
        let maps = m.read();
        let get = |key: &str| -> u64 {
            maps.iter()
                .map(|x| x.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
                .sum()
        };
        let after = get("zk_packets_received");
        let connections = get("zk_num_alive_connections");
        Counted {
            requests: after.saturating_sub(self.before + m.overhead),
            ping_allowance: pings_in(elapsed, connections),
            outstanding: get("zk_outstanding_requests"),
            connections,
        }
    }
}

/// Most pings `connections` sessions may send in `elapsed`: each pings at least
/// every sixth of its timeout, whatever the traffic (the client times its pings:
/// see `zklock::client`).
pub fn pings_in(elapsed: Duration, connections: u64) -> u64 {
    let interval = SESSION_TIMEOUT.as_secs_f64() / 6.0;
    (elapsed.as_secs_f64() / interval).ceil() as u64 * connections
}

/// [`pings_in`] for the servers' current connections.
pub fn ping_allowance(elapsed: Duration, m: &Mntr) -> u64 {
    pings_in(elapsed, m.sum("zk_num_alive_connections"))
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub fn us(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1000.0
}

pub fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

pub fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// Virtual size: what the thread stacks reserve (resident or not).
pub fn vm_kib() -> u64 {
    status_kib("VmSize:")
}

pub fn status_kib(field: &str) -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

pub fn threads() -> usize {
    fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
