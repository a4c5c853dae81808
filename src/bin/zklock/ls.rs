//! `zklock ls` and `zklock reap`.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use zklock::lock::{lock_nodes, Dialect, SEMAPHORE_LEASES, SEMAPHORE_LOCKS};
use zklock::{zkutil, ZkError, ZooKeeperWatcher};

use crate::duration::human;
use crate::{connect, Global, LsArgs, ReapArgs};

/// One child of a lock or election znode (or of a semaphore's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// `holder` / `waiter` for locks and semaphores, `leader` / `candidate`
    /// for elections.
    pub(crate) state: &'static str,
    /// `write`, `read`, `mutex` (Curator's InterProcessMutex), `lease` (a
    /// semaphore's) or `elect`.
    kind: &'static str,
    /// `hbase`, `curator` or `kazoo`.
    dialect: &'static str,
    /// The name shown: the child's, or `leases/<child>` for a semaphore's.
    node: String,
    /// Its full path.
    path: String,
    sequence: i64,
    session: i64,
    ctime_ms: i64,
    /// The node's creation zxid: the fencing token of its grant.
    czxid: i64,
    pub(crate) metadata: String,
}

impl Entry {
    /// A holder of the lock or the leader of the election (not queued).
    pub(crate) fn is_head(&self) -> bool {
        matches!(self.state, "holder" | "leader")
    }
}

/// What `list` found under a znode.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Listing {
    /// In queue order: the lock's (or election's) nodes, then a semaphore's
    /// leases, then its waiters.
    pub(crate) entries: Vec<Entry>,
    /// The directories holding nodes of more than one dialect, with them.
    pub(crate) mixed: Vec<(String, Vec<&'static str>)>,
    /// The znode's children; `None` when it does not exist.
    pub(crate) children: Option<Vec<String>>,
}

/// The trailing sequence number ZooKeeper appended to a name.
fn sequence(name: &str) -> Option<i64> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    name[name.len() - digits.min(10)..].parse().ok()
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The children of `dir`, none when it does not exist.
fn children_of(zkw: &ZooKeeperWatcher, dir: &str) -> anyhow::Result<Vec<String>> {
    match zkw.recoverable_zookeeper().get_children(dir, false) {
        Ok(c) => Ok(c),
        Err(e) if e.is(ZkError::NoNode) => Ok(Vec::new()),
        Err(e) => Err(anyhow::Error::new(e).context(format!("listing {dir}"))),
    }
}

/// A node's data (HBase's metadata prefix stripped) and stat; `None` when it
/// is gone meanwhile.
fn read_node(
    zkw: &ZooKeeperWatcher,
    path: &str,
    hbase: bool,
) -> anyhow::Result<Option<(String, zklock::client::Stat)>> {
    let rzk = zkw.recoverable_zookeeper();
    let read = if hbase {
        rzk.get_data(path, false)
    } else {
        rzk.get_raw_data(path)
    };
    match read {
        Ok((data, stat)) => Ok(Some((String::from_utf8_lossy(&data).into_owned(), stat))),
        Err(e) if e.is(ZkError::NoNode) => Ok(None),
        Err(e) => Err(anyhow::Error::new(e).context(format!("reading {path}"))),
    }
}

/// One directory's lock (or election) nodes, each with its dialect, kind and
/// state; `section` orders the directories in the listing.
fn lock_entries(
    zkw: &ZooKeeperWatcher,
    dir: &str,
    shown_as: &str,
    children: &[String],
    out: &mut Listing,
) -> anyhow::Result<()> {
    let mut offers: Vec<&String> = children.iter().filter(|c| c.starts_with("n_")).collect();
    offers.sort_by_key(|c| sequence(c));
    // Each lock node as its own dialect's participants see it.
    let mut found: Vec<(&String, Dialect, &'static str, bool)> = Vec::new();
    let mut dialects: Vec<&'static str> = Vec::new();
    for node in lock_nodes(children) {
        if !dialects.contains(&node.dialect.name()) {
            dialects.push(node.dialect.name());
        }
        if let Some(child) = children.iter().find(|c| **c == node.name) {
            found.push((child, node.dialect, node.kind, node.held));
        }
    }
    for offer in &offers {
        found.push((
            offer,
            Dialect::HBase,
            "elect",
            offers.first() == Some(offer),
        ));
    }
    for (child, dialect, kind, held) in found {
        let Some(seq) = sequence(child) else {
            continue;
        };
        let path = zkutil::join_znode(dir, child);
        // HBase's lock nodes carry its metadata prefix (stripped by
        // get_data); election offers hold the bare candidate name.
        let hbase_lock = dialect == Dialect::HBase && kind != "elect";
        let Some((metadata, stat)) = read_node(zkw, &path, hbase_lock)? else {
            continue; // gone meanwhile
        };
        let state = match (kind, held) {
            ("elect", true) => "leader",
            ("elect", false) => "candidate",
            (_, true) => "holder",
            (_, false) => "waiter",
        };
        out.entries.push(Entry {
            state,
            kind,
            dialect: dialect.name(),
            node: format!("{shown_as}{child}"),
            path,
            sequence: seq,
            session: stat.ephemeral_owner,
            ctime_ms: stat.ctime,
            czxid: stat.czxid,
            metadata,
        });
    }
    if dialects.len() > 1 {
        dialects.sort_unstable();
        out.mixed.push((dir.to_string(), dialects));
    }
    Ok(())
}

/// The lock nodes (election offers, semaphore leases and waiters) under
/// `znode`, in every dialect, in queue order.
///
/// Semaphores: zklock's and Curator's (`InterProcessSemaphoreV2`) keep their
/// leases in `<p>/leases` and their waiters in the mutex `<p>/locks`; the
/// waiter holding that mutex also has a lease node while it counts, shown
/// once, as a waiter. kazoo's `Semaphore` keeps its leases as `<p>/<uuid
/// hex>` (its limit in `<p>`'s data) and its waiters in the lock
/// `<p>-__lock__`. Both kinds at one `<p>` are a mixed path (kazoo counts
/// `locks` and `leases` as leases, the others do not count kazoo's): every
/// holder is shown and `<p>` is reported in `mixed`.
pub(crate) fn list(zkw: &ZooKeeperWatcher, znode: &str) -> anyhow::Result<Listing> {
    let children = match zkw.recoverable_zookeeper().get_children(znode, false) {
        Ok(c) => Some(c),
        Err(e) if e.is(ZkError::NoNode) => None,
        Err(e) => return Err(anyhow::Error::new(e).context(format!("listing {znode}"))),
    };
    let mut out = Listing {
        children: children.clone(),
        ..Listing::default()
    };
    let children = children.unwrap_or_default();
    lock_entries(zkw, znode, "", &children, &mut out)?;
    let mut waiters = Listing::default();
    // The layouts of the semaphores found at `znode`.
    let mut layouts: Vec<&'static str> = Vec::new();
    let semaphore = children
        .iter()
        .any(|c| c == SEMAPHORE_LEASES || c == SEMAPHORE_LOCKS);
    if semaphore {
        let dir = zkutil::join_znode(znode, SEMAPHORE_LOCKS);
        let locks = children_of(zkw, &dir)?;
        lock_entries(zkw, &dir, "locks/", &locks, &mut waiters)?;
        for node in lock_nodes(&locks) {
            layouts.push(node.dialect.name());
        }
        let dir = zkutil::join_znode(znode, SEMAPHORE_LEASES);
        let mut dialects = Vec::new();
        for child in children_of(zkw, &dir)? {
            let dialect = Dialect::of_lease(&child).unwrap_or(Dialect::HBase);
            if !dialects.contains(&dialect.name()) {
                dialects.push(dialect.name());
            }
            let path = zkutil::join_znode(&dir, &child);
            let Some((metadata, stat)) = read_node(zkw, &path, dialect == Dialect::HBase)? else {
                continue;
            };
            // The mutex holder's lease while it counts: it waits, shown
            // once, with its lease's data (Curator's mutex node carries the
            // local address).
            if let Some(w) = waiters
                .entries
                .iter_mut()
                .find(|w| w.session == stat.ephemeral_owner)
            {
                w.metadata = metadata;
                continue;
            }
            out.entries.push(Entry {
                state: "holder",
                kind: "lease",
                dialect: dialect.name(),
                node: format!("{SEMAPHORE_LEASES}/{child}"),
                path,
                sequence: sequence(&child).unwrap_or(0),
                session: stat.ephemeral_owner,
                ctime_ms: stat.ctime,
                czxid: stat.czxid,
                metadata,
            });
        }
        layouts.extend(&dialects);
        if layouts.is_empty() {
            // Empty directories: zklock's or Curator's.
            layouts.push("hbase or curator");
        }
        if dialects.len() > 1 {
            out.mixed.push((dir, dialects));
        }
    }
    let kazoo_leases: Vec<&String> = children
        .iter()
        .filter(|c| Dialect::of_lease(c) == Some(Dialect::Kazoo))
        .collect();
    for child in &kazoo_leases {
        let path = zkutil::join_znode(znode, child);
        let Some((metadata, stat)) = read_node(zkw, &path, false)? else {
            continue;
        };
        out.entries.push(Entry {
            state: "holder",
            kind: "lease",
            dialect: Dialect::Kazoo.name(),
            node: (*child).clone(),
            path,
            sequence: 0,
            session: stat.ephemeral_owner,
            ctime_ms: stat.ctime,
            czxid: stat.czxid,
            metadata,
        });
    }
    // kazoo's guard lock: its waiters, and the sign that kazoo's semaphore
    // uses `znode` (even with no lease held now).
    let guard = format!("{znode}-__lock__");
    let kazoo_used = !kazoo_leases.is_empty()
        || (semaphore
            && zkw
                .recoverable_zookeeper()
                .exists(&guard, false)
                .map_err(|e| anyhow::Error::new(e).context(format!("reading {guard}")))?
                .is_some());
    if kazoo_used {
        let locks = children_of(zkw, &guard)?;
        lock_entries(zkw, &guard, &format!("{guard}/"), &locks, &mut waiters)?;
        layouts.push(Dialect::Kazoo.name());
    }
    layouts.sort_unstable();
    layouts.dedup();
    if semaphore && kazoo_used && layouts.len() > 1 {
        out.mixed.push((znode.to_string(), layouts));
    }
    // Every node of a semaphore's mutex is a waiter for a lease.
    for w in &mut waiters.entries {
        w.state = "waiter";
        w.kind = "lease";
    }
    out.entries
        .sort_by_key(|e| (e.kind == "lease", e.sequence, e.ctime_ms));
    waiters.entries.sort_by_key(|e| e.sequence);
    out.entries.append(&mut waiters.entries);
    out.mixed.append(&mut waiters.mixed);
    Ok(out)
}

/// How long ago (by this machine's clock) a node created at `ctime_ms` (by
/// the server's) was created; 0 when the clocks disagree the other way.
pub(crate) fn age_of(ctime_ms: i64, now: i64) -> Duration {
    Duration::from_millis(u64::try_from(now.saturating_sub(ctime_ms)).unwrap_or(0))
}

fn age(e: &Entry, now: i64) -> Duration {
    age_of(e.ctime_ms, now)
}

/// A session id as the JSON (and the table, and zkCli) show it: `"0x1000..."`.
pub(crate) fn hex(session: i64) -> String {
    format!("0x{session:x}")
}

/// One lock node as the JSON object documented in docs/cli.md ("JSON
/// schema"), the one object of `ls --json`, `stat --json`'s holders and
/// waiters and `ls --show-acl --json`.
pub(crate) fn entry_json(e: &Entry, now: i64) -> Value {
    json!({
        "state": e.state,
        "kind": e.kind,
        "dialect": e.dialect,
        "node": e.node,
        "path": e.path,
        "sequence": e.sequence,
        "session": hex(e.session),
        "ctime_ms": e.ctime_ms,
        "age_ms": u64::try_from(age(e, now).as_millis()).unwrap_or(u64::MAX),
        "fencing_token": e.czxid,
        "metadata": e.metadata,
    })
}

/// An ACL as JSON: `[{"scheme": "world", "id": "anyone", "perms": "cdrwa"}]`.
pub(crate) fn acl_json(acl: &[zklock::client::Acl]) -> Value {
    acl.iter()
        .map(|a| json!({"scheme": a.id.scheme, "id": a.id.id, "perms": a.perms.to_string()}))
        .collect()
}

/// Writes `value` and a newline: one line (`compact`) or, for an array, one
/// element a line.
pub(crate) fn write_json(out: &mut impl Write, value: &Value, compact: bool) -> io::Result<()> {
    match value {
        Value::Array(items) if !compact && !items.is_empty() => {
            let items: Vec<String> = items.iter().map(Value::to_string).collect();
            writeln!(out, "[{}]", items.join(",\n "))
        }
        v => writeln!(out, "{v}"),
    }
}

/// `ls --json`: the entries as one array, one entry a line (`compact`: the
/// whole array on one line, as `--watch` prints each document).
fn print_json(out: &mut impl Write, entries: &[Entry], compact: bool) -> io::Result<()> {
    let now = now_ms();
    let items: Vec<Value> = entries.iter().map(|e| entry_json(e, now)).collect();
    write_json(out, &Value::Array(items), compact)
}

/// The table of `ls` (and, with `fencing`, of `stat`: a FENCING column).
pub(crate) fn print_table(
    out: &mut impl Write,
    entries: &[Entry],
    fencing: bool,
) -> io::Result<()> {
    let now = now_ms();
    let width = entries
        .iter()
        .map(|e| e.node.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let tokens: Vec<String> = entries.iter().map(|e| e.czxid.to_string()).collect();
    let fencing_width = if fencing {
        tokens.iter().map(String::len).max().unwrap_or(0).max(7) + 2
    } else {
        0
    };
    let fencing_head = if fencing { "FENCING" } else { "" };
    writeln!(
        out,
        "{:<9} {:<6} {:<7} {:<width$} {:<18} {:>7}  {fencing_head:<fencing_width$}METADATA",
        "STATE", "KIND", "DIALECT", "NODE", "SESSION", "AGE"
    )?;
    for (e, token) in entries.iter().zip(&tokens) {
        let token = if fencing { token.as_str() } else { "" };
        writeln!(
            out,
            "{:<9} {:<6} {:<7} {:<width$} {:<18} {:>7}  {token:<fencing_width$}{}",
            e.state,
            e.kind,
            e.dialect,
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
    if a.show_acl {
        return show_acl(g, a);
    }
    let zkw = connect(g)?;
    let listing = list(&zkw, &a.znode);
    let _ = zkw.close();
    let listing = listing?;
    check_is_a_lock(&a.znode, &listing, "ls")?;
    warn_mixed(&listing.mixed);
    let mut out = io::stdout().lock();
    let written = render(&mut out, &a.znode, &listing, a.json, false);
    quiet_on_broken_pipe(written.and_then(|()| out.flush()))?;
    Ok(0)
}

/// Fails (exit 1) when `znode` does not exist, or holds other znodes but no
/// lock nodes (a parent of locks: `command` names one to give instead):
/// `ls`, `stat` and `reap` alike.
pub(crate) fn check_is_a_lock(znode: &str, listing: &Listing, command: &str) -> anyhow::Result<()> {
    if !listing.entries.is_empty() {
        return Ok(());
    }
    match what_is(listing.children.clone()) {
        What::Missing => Err(no_such_node(znode)),
        What::Parent(children) => Err(anyhow::anyhow!(not_a_lock(znode, &children, command))),
        What::Free => Ok(()),
    }
}

/// The error of `ls`, `stat` and `reap` for a znode that does not exist (exit 1).
pub(crate) fn no_such_node(znode: &str) -> anyhow::Error {
    let line = format!(
        "no such node: {znode} (no lock, semaphore or election was ever taken there; check the \
         path, and the chroot of --zk)"
    );
    crate::explained(zklock::Error::zk(ZkError::NoNode, znode), line)
}

/// The warning (stderr) for each directory that mixes dialects.
pub(crate) fn warn_mixed(mixed: &[(String, Vec<&'static str>)]) {
    for (dir, dialects) in mixed {
        eprintln!(
            "zklock: warning: {dir} mixes dialects ({}): their clients do not see each \
             other's nodes, so two of them can hold the lock at once",
            dialects.join(", ")
        );
    }
}

/// One listing of `znode` as `ls` prints it: the JSON array (on one line
/// when `compact`), else the table, or a line saying why there is none (no
/// holders; a parent of locks; no such node, which only `ls --watch` prints,
/// when the znode goes away while watched).
pub(crate) fn render(
    out: &mut impl Write,
    znode: &str,
    listing: &Listing,
    json: bool,
    compact: bool,
) -> io::Result<()> {
    if json {
        return print_json(out, &listing.entries, compact);
    }
    if !listing.entries.is_empty() {
        return print_table(out, &listing.entries, false);
    }
    match what_is(listing.children.clone()) {
        What::Missing => writeln!(out, "{znode}: no such node"),
        What::Free => writeln!(out, "{znode}: no holders, waiters or candidates"),
        What::Parent(children) => writeln!(out, "{}", not_a_lock(znode, &children, "ls")),
    }
}

/// What `ls` prints (and `stat` fails with) for a parent of locks.
pub(crate) fn not_a_lock(znode: &str, children: &[String], command: &str) -> String {
    let shown: Vec<&str> = children.iter().take(3).map(String::as_str).collect();
    let more = if children.len() > 3 { ", ..." } else { "" };
    format!(
        "{znode} is not a lock, semaphore or election: it holds {} other znode(s) ({}{more}); \
         if they are locks, list one: zklock {command} {}",
        children.len(),
        shown.join(", "),
        zkutil::join_znode(znode, shown[0])
    )
}

/// What a znode with no lock nodes is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum What {
    /// It does not exist.
    Missing,
    /// It exists with no children: a lock (or election) nobody holds now.
    Free,
    /// It has children, none of them lock nodes: a parent of locks.
    Parent(Vec<String>),
}

pub(crate) fn what_is(children: Option<Vec<String>>) -> What {
    match children {
        None => What::Missing,
        // An idle semaphore keeps its two directories (and nothing else:
        // the root with a `/locks` is a parent of locks).
        Some(c)
            if c.iter()
                .all(|c| c == SEMAPHORE_LEASES || c == SEMAPHORE_LOCKS) =>
        {
            What::Free
        }
        Some(mut c) => {
            c.sort();
            What::Parent(c)
        }
    }
}

/// `ls --show-acl`: the ACL of the znode and of each node `list` finds.
/// With `--json`, one array: the znode's object (`path`, `acl`), then each
/// node's `ls --json` object with its `acl`. A znode that does not exist
/// fails as `ls` does.
fn show_acl(g: &Global, a: &LsArgs) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let acls = list(&zkw, &a.znode).and_then(|listing| {
        let rzk = zkw.recoverable_zookeeper();
        let own = match rzk.get_acl(&a.znode) {
            Ok((acl, _)) => acl,
            Err(e) if e.is(ZkError::NoNode) => return Ok(None),
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!("reading the ACL of {}", a.znode)))
            }
        };
        let mut nodes = Vec::new();
        for e in listing.entries {
            match rzk.get_acl(&e.path) {
                Ok((acl, _)) => nodes.push((e, acl)),
                Err(err) if err.is(ZkError::NoNode) => {} // gone meanwhile
                Err(err) => {
                    let path = e.path;
                    return Err(
                        anyhow::Error::new(err).context(format!("reading the ACL of {path}"))
                    );
                }
            }
        }
        Ok(Some((own, nodes)))
    });
    let _ = zkw.close();
    let Some((own, nodes)) = acls? else {
        return Err(no_such_node(&a.znode));
    };
    let mut out = io::stdout().lock();
    let written = if a.json {
        let now = now_ms();
        let mut items = vec![json!({"path": a.znode, "acl": acl_json(&own)})];
        items.extend(nodes.iter().map(|(e, acl)| {
            let mut item = entry_json(e, now);
            item["acl"] = acl_json(acl);
            item
        }));
        write_json(&mut out, &Value::Array(items), false)
    } else {
        let rows: Vec<(&str, &[zklock::client::Acl])> =
            std::iter::once((a.znode.as_str(), &own[..]))
                .chain(nodes.iter().map(|(e, acl)| (e.path.as_str(), &acl[..])))
                .collect();
        let width = rows.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
        rows.iter().try_for_each(|(path, acl)| {
            let acl: Vec<String> = acl.iter().map(ToString::to_string).collect();
            writeln!(out, "{path:<width$}  {}", acl.join(" "))
        })
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
    let listing = list(zkw, &a.znode)?;
    check_is_a_lock(&a.znode, &listing, "reap")?;
    let before = listing.entries;
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
        let path = &e.path;
        match rzk.delete(path, None) {
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
