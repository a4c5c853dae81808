//! `zklock ls` and `zklock reap`.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use zklock::lock::{
    InterProcessLock, InterProcessReadWriteLock, LockKind, ReadLockKind, WriteLockKind,
    ZkInterProcessReadWriteLock, READ_LOCK_PREFIX, WRITE_LOCK_PREFIX,
};
use zklock::{zkutil, ZkError, ZooKeeperWatcher};

use crate::duration::human;
use crate::{connect, Global, LsArgs, ReapArgs};

/// One child of a lock or election znode.
#[derive(Debug, Clone)]
struct Entry {
    /// `holder` / `waiter` for locks, `leader` / `candidate` for elections.
    state: &'static str,
    /// `write`, `read` or `elect`.
    kind: &'static str,
    node: String,
    sequence: i64,
    session: i64,
    ctime_ms: i64,
    metadata: String,
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
fn list(zkw: &ZooKeeperWatcher, znode: &str) -> anyhow::Result<Vec<Entry>> {
    let rzk = zkw.recoverable_zookeeper();
    let children = match rzk.get_children(znode, false) {
        Ok(c) => c,
        Err(e) if e.is(ZkError::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("listing {znode}"))),
    };
    let mut offers: Vec<&String> = children.iter().filter(|c| c.starts_with("n_")).collect();
    offers.sort_by_key(|c| sequence(c));
    let mut entries = Vec::new();
    for child in &children {
        let (kind, held) = if child.starts_with(WRITE_LOCK_PREFIX) {
            (
                "write",
                WriteLockKind::get_lock_path(child, &children).is_none(),
            )
        } else if child.starts_with(READ_LOCK_PREFIX) {
            (
                "read",
                ReadLockKind::get_lock_path(child, &children).is_none(),
            )
        } else if child.starts_with("n_") {
            ("elect", offers.first() == Some(&child))
        } else {
            continue;
        };
        let Some(sequence) = sequence(child) else {
            continue;
        };
        let path = zkutil::join_znode(znode, child);
        // Lock nodes carry HBase's metadata prefix (stripped by get_data);
        // election offers hold the bare candidate name (Java's layout).
        let read = if kind == "elect" {
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

fn print_json(znode: &str, entries: &[Entry]) {
    let now = now_ms();
    let items: Vec<String> = entries
        .iter()
        .map(|e| {
            format!(
                "{{\"state\":{},\"kind\":{},\"node\":{},\"path\":{},\"sequence\":{},\
                 \"session\":\"0x{:x}\",\"ctime_ms\":{},\"age_ms\":{},\"metadata\":{}}}",
                json_string(e.state),
                json_string(e.kind),
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
    println!("[{}]", items.join(",\n "));
}

fn print_table(entries: &[Entry]) {
    let now = now_ms();
    let width = entries
        .iter()
        .map(|e| e.node.len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "{:<9} {:<5} {:<width$} {:<18} {:>7}  METADATA",
        "STATE", "KIND", "NODE", "SESSION", "AGE"
    );
    for e in entries {
        println!(
            "{:<9} {:<5} {:<width$} {:<18} {:>7}  {}",
            e.state,
            e.kind,
            e.node,
            format!("0x{:x}", e.session),
            human(age(e, now)),
            e.metadata
        );
    }
}

pub(crate) fn ls(g: &Global, a: &LsArgs) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let entries = list(&zkw, &a.znode);
    let _ = zkw.close();
    let entries = entries?;
    if a.json {
        print_json(&a.znode, &entries);
    } else if entries.is_empty() {
        println!("{}: no holders, waiters or candidates", a.znode);
    } else {
        print_table(&entries);
    }
    Ok(0)
}

pub(crate) fn reap(g: &Global, a: &ReapArgs) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let result = reap_with(&zkw, a);
    let _ = zkw.close();
    result
}

fn reap_with(zkw: &ZooKeeperWatcher, a: &ReapArgs) -> anyhow::Result<i32> {
    let rw = ZkInterProcessReadWriteLock::new(zkw, &a.znode, None)?;
    let before = list(zkw, &a.znode)?;
    // One lock instance per kind, holding nothing: HBase's reaping API.
    let (write, read) = (rw.write_lock(b""), rw.read_lock(b""));
    let older_than = if a.all {
        Duration::ZERO
    } else {
        a.older_than.unwrap_or_default()
    };
    for lock in [&write as &dyn InterProcessLock, &read] {
        lock.reap_expired_locks(older_than)
            .with_context(|| format!("reaping {}", a.znode))?;
    }
    let after: HashSet<String> = list(zkw, &a.znode)?.into_iter().map(|e| e.node).collect();
    let now = now_ms();
    let removed: Vec<&Entry> = before
        .iter()
        .filter(|e| e.kind != "elect" && !after.contains(&e.node))
        .collect();
    if removed.is_empty() {
        println!("{}: nothing to reap", a.znode);
    }
    for e in removed {
        println!(
            "removed {} ({} {}, session 0x{:x}, age {}): {}",
            zkutil::join_znode(&a.znode, &e.node),
            e.kind,
            e.state,
            e.session,
            human(age(e, now)),
            e.metadata
        );
    }
    Ok(0)
}
