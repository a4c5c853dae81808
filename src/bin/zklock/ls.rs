//! `zklock ls` and `zklock reap`.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zklock::lock::{lock_nodes, Dialect};
use zklock::{zkutil, ZkError, ZooKeeperWatcher};

use crate::duration::human;
use crate::{connect, Global, LsArgs, ReapArgs};

/// One child of a lock or election znode.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// `holder` / `waiter` for locks, `leader` / `candidate` for elections.
    pub(crate) state: &'static str,
    /// `write`, `read` or `elect`; `mutex` for Curator's `InterProcessMutex`.
    kind: &'static str,
    /// The lock's dialect: `hbase`, `curator`, `kazoo` (`hbase` for elections).
    dialect: Dialect,
    node: String,
    sequence: i64,
    session: i64,
    ctime_ms: i64,
    pub(crate) metadata: String,
}

impl Entry {
    /// A holder of the lock or the leader of the election (not queued).
    fn is_head(&self) -> bool {
        matches!(self.state, "holder" | "leader")
    }
}

/// The trailing sequence number ZooKeeper appended to a name.
fn sequence(name: &str) -> Option<i64> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    name[name.len() - digits.min(10)..].parse().ok()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The lock nodes (and election offers) under `znode`, in queue order.
pub(crate) fn list(zkw: &ZooKeeperWatcher, znode: &str) -> anyhow::Result<Vec<Entry>> {
    let rzk = zkw.recoverable_zookeeper();
    let children = match rzk.get_children(znode, false) {
        Ok(c) => c,
        Err(e) if e.is(ZkError::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("listing {znode}"))),
    };
    let mut offers: Vec<&String> = children.iter().filter(|c| c.starts_with("n_")).collect();
    offers.sort_by_key(|c| sequence(c));
    let locks = lock_nodes(&children);
    let mut entries = Vec::new();
    for child in &children {
        let (kind, held, dialect) = if let Some(l) = locks.iter().find(|l| l.name == *child) {
            (l.kind, l.held, l.dialect)
        } else if child.starts_with("n_") {
            ("elect", offers.first() == Some(&child), Dialect::HBase)
        } else {
            continue;
        };
        let Some(sequence) = sequence(child) else {
            continue;
        };
        let path = zkutil::join_znode(znode, child);
        // HBase's lock nodes carry its metadata prefix (stripped by
        // get_data); election offers hold the bare candidate name (Java's
        // layout), Curator's and kazoo's nodes their bare data.
        let read = if kind == "elect" || dialect != Dialect::HBase {
            rzk.get_raw_data(&path)
        } else {
            rzk.get_data(&path, false)
        };
        let (data, stat) = match read {
            Ok(r) => r,
            Err(e) if e.is(ZkError::NoNode) => continue, // gone meanwhile
            Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {path}"))),
        };
        let state = match (kind, held) {
            ("elect", true) => "leader",
            ("elect", false) => "candidate",
            (_, true) => "holder",
            (_, false) => "waiter",
        };
        entries.push(Entry {
            state,
            kind,
            dialect,
            node: child.clone(),
            sequence,
            session: stat.ephemeral_owner,
            ctime_ms: stat.ctime,
            metadata: String::from_utf8_lossy(&data).into_owned(),
        });
    }
    entries.sort_by_key(|e| e.sequence);
    Ok(entries)
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn age(e: &Entry, now: i64) -> Duration {
    Duration::from_millis(u64::try_from(now.saturating_sub(e.ctime_ms)).unwrap_or(0))
}

fn print_json(out: &mut impl Write, znode: &str, entries: &[Entry]) -> io::Result<()> {
    let now = now_ms();
    let items: Vec<String> = entries
        .iter()
        .map(|e| {
            format!(
                "{{\"state\":{},\"kind\":{},\"dialect\":{},\"node\":{},\"path\":{},\"sequence\":{},\
                 \"session\":\"0x{:x}\",\"ctime_ms\":{},\"age_ms\":{},\"metadata\":{}}}",
                json_string(e.state),
                json_string(e.kind),
                json_string(e.dialect.name()),
                json_string(&e.node),
                json_string(&zkutil::join_znode(znode, &e.node)),
                e.sequence,
                e.session,
                e.ctime_ms,
                age(e, now).as_millis(),
                json_string(&e.metadata)
            )
        })
        .collect();
    writeln!(out, "[{}]", items.join(",\n "))
}

fn print_table(out: &mut impl Write, entries: &[Entry]) -> io::Result<()> {
    let now = now_ms();
    let width = entries
        .iter()
        .map(|e| e.node.len())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(
        out,
        "{:<9} {:<5} {:<width$} {:<18} {:>7}  METADATA",
        "STATE", "KIND", "NODE", "SESSION", "AGE"
    )?;
    for e in entries {
        let kind = match e.dialect {
            Dialect::HBase => e.kind.to_string(),
            d => format!("{}:{}", d.name(), e.kind),
        };
        writeln!(
            out,
            "{:<9} {:<5} {:<width$} {:<18} {:>7}  {}",
            e.state,
            kind,
            e.node,
            format!("0x{:x}", e.session),
            human(age(e, now)),
            e.metadata
        )?;
    }
    Ok(())
}

/// Output to stdout ended by a closed pipe (`zklock ls | head -1`) is no
/// failure: zklock stops writing and exits 0, as `ls | head` does (Rust
/// ignores SIGPIPE, so the write fails with `BrokenPipe` instead).
pub(crate) fn quiet_on_broken_pipe(written: io::Result<()>) -> anyhow::Result<()> {
    match written {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("writing to stdout"))
        }
        _ => Ok(()),
    }
}

pub(crate) fn ls(g: &Global, a: &LsArgs) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let entries = list(&zkw, &a.znode);
    let _ = zkw.close();
    let entries = entries?;
    let mut dialects: Vec<Dialect> = entries.iter().map(|e| e.dialect).collect();
    dialects.dedup();
    dialects.sort_by_key(|d| d.name());
    dialects.dedup();
    if dialects.len() > 1 {
        let names: Vec<&str> = dialects.iter().map(|d| d.name()).collect();
        eprintln!(
            "zklock: warning: {} mixes lock nodes of the {} dialects: their clients do not \
             see each other's nodes and may hold the lock at once",
            a.znode,
            names.join(" and ")
        );
    }
    let mut out = io::stdout().lock();
    let written = if a.json {
        print_json(&mut out, &a.znode, &entries)
    } else if entries.is_empty() {
        writeln!(out, "{}: no holders, waiters or candidates", a.znode)
    } else {
        print_table(&mut out, &entries)
    };
    quiet_on_broken_pipe(written.and_then(|()| out.flush()))?;
    Ok(0)
}

pub(crate) fn reap(g: &Global, a: &ReapArgs) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let result = reap_with(&zkw, a);
    let _ = zkw.close();
    result
}

/// What `reap` removes (a deliberate difference from HBase's
/// `reapExpiredLocks`, which removes every node older than the limit):
/// `--older-than D` removes holders (and an election's leader) older than D
/// — the stuck or dead ones reaping is for — and leaves waiters alone, since
/// a live waiter is harmless and one that is removed gives up (exit 1);
/// `--waiters` adds waiters and candidates older than D; `--all` removes
/// every node, locks and elections alike. A reaped holder's zklock sees its
/// lock lost and SIGTERMs its command (exit 3).
fn reap_with(zkw: &ZooKeeperWatcher, a: &ReapArgs) -> anyhow::Result<i32> {
    let before = list(zkw, &a.znode)?;
    let now = now_ms();
    let doomed: Vec<&Entry> = before
        .iter()
        .filter(|e| {
            a.all
                || a.older_than
                    .is_some_and(|d| age(e, now) > d && (e.is_head() || a.waiters))
        })
        .collect();
    let rzk = zkw.recoverable_zookeeper();
    let mut out = io::stdout().lock();
    let mut removed = 0;
    let mut written = Ok(());
    for e in &doomed {
        let path = zkutil::join_znode(&a.znode, &e.node);
        match rzk.delete(&path, None) {
            Ok(()) => {}
            Err(err) if err.is(ZkError::NoNode) => continue, // gone meanwhile
            Err(err) => return Err(anyhow::Error::new(err).context(format!("reaping {path}"))),
        }
        removed += 1;
        written = written.and_then(|()| {
            writeln!(
                out,
                "removed {path} ({} {}, session 0x{:x}, age {}): {}",
                e.kind,
                e.state,
                e.session,
                human(age(e, now)),
                e.metadata
            )
        });
    }
    if removed == 0 {
        let left = before.len();
        written = written.and_then(|()| {
            if left > 0 && !a.all {
                writeln!(
                    out,
                    "{}: nothing to reap ({left} node(s) younger than the limit, or waiters: \
                     see --waiters, --all)",
                    a.znode
                )
            } else {
                writeln!(out, "{}: nothing to reap", a.znode)
            }
        });
    }
    quiet_on_broken_pipe(written.and_then(|()| out.flush()))?;
    Ok(0)
}
