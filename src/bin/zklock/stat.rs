//! `zklock stat`: one lock's (semaphore's, election's) state.

use std::io::{self, Write};

use zklock::client::Stat;
use zklock::{ZkError, ZooKeeperWatcher};

use crate::duration::human;
use serde_json::{json, Value};

use crate::ls::{
    age_of, check_is_a_lock, entry_json, hex, list, no_such_node, now_ms, print_table,
    quiet_on_broken_pipe, warn_mixed, write_json, Entry, Listing,
};
use crate::{connect, Global, StatArgs};

pub(crate) fn run(g: &Global, a: &StatArgs) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let read = read(&zkw, &a.znode);
    let _ = zkw.close();
    let Some((stat, listing)) = read? else {
        return Err(no_such_node(&a.znode));
    };
    check_is_a_lock(&a.znode, &listing, "stat")?;
    warn_mixed(&listing.mixed);
    let (holders, waiters): (Vec<Entry>, Vec<Entry>) =
        listing.entries.iter().cloned().partition(Entry::is_head);
    let mut out = io::stdout().lock();
    let written = if a.json {
        print_json(&mut out, &a.znode, &stat, &holders, &waiters, &listing)
    } else {
        print_text(&mut out, &a.znode, &stat, &holders, &waiters)
    };
    quiet_on_broken_pipe(written.and_then(|()| out.flush()))?;
    Ok(0)
}

/// The znode's stat and its listing; `None` when it does not exist. The stat
/// is read first: a lock created between the two reads is listed, one
/// deleted between them is a listing of nothing.
fn read(zkw: &ZooKeeperWatcher, znode: &str) -> anyhow::Result<Option<(Stat, Listing)>> {
    let stat = match zkw.recoverable_zookeeper().exists(znode, false) {
        Ok(Some(stat)) => stat,
        Ok(None) => return Ok(None),
        Err(e) if e.is(ZkError::NoNode) => return Ok(None),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {znode}"))),
    };
    Ok(Some((stat, list(zkw, znode)?)))
}

fn print_text(
    out: &mut impl Write,
    znode: &str,
    stat: &Stat,
    holders: &[Entry],
    waiters: &[Entry],
) -> io::Result<()> {
    let now = now_ms();
    writeln!(
        out,
        "{znode}: {} holder(s), {} waiter(s)",
        holders.len(),
        waiters.len()
    )?;
    // zkCli's `stat` names; zxids in hex (as zkCli) and in decimal (as the
    // FENCING column and $ZKLOCK_FENCING_TOKEN), times as dates with their age.
    writeln!(out, "  cZxid = {}", zxid(stat.czxid))?;
    writeln!(
        out,
        "  ctime = {} ({} ago)",
        date(stat.ctime),
        human(age_of(stat.ctime, now))
    )?;
    writeln!(out, "  mZxid = {}", zxid(stat.mzxid))?;
    writeln!(
        out,
        "  mtime = {} ({} ago)",
        date(stat.mtime),
        human(age_of(stat.mtime, now))
    )?;
    writeln!(out, "  pZxid = {}", zxid(stat.pzxid))?;
    writeln!(out, "  cversion = {}", stat.cversion)?;
    writeln!(out, "  dataVersion = {}", stat.version)?;
    writeln!(out, "  aclVersion = {}", stat.aversion)?;
    writeln!(out, "  ephemeralOwner = 0x{:x}", stat.ephemeral_owner)?;
    writeln!(out, "  dataLength = {}", stat.data_length)?;
    writeln!(out, "  numChildren = {}", stat.num_children)?;
    let entries: Vec<Entry> = holders.iter().chain(waiters).cloned().collect();
    if !entries.is_empty() {
        writeln!(out)?;
        print_table(out, &entries, true)?;
    }
    Ok(())
}

/// A zxid as zkCli prints it, and as a fencing token: `0x1a (26)`.
fn zxid(z: i64) -> String {
    format!("0x{z:x} ({z})")
}

/// A server time (ms since the epoch) as a UTC date, `2026-12-04T01:57:07.123Z`.
pub(crate) fn date(ms: i64) -> String {
    let at =
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

/// `stat --json`: the znode's object (docs/cli.md, "JSON schema").
fn print_json(
    out: &mut impl Write,
    znode: &str,
    stat: &Stat,
    holders: &[Entry],
    waiters: &[Entry],
    listing: &Listing,
) -> io::Result<()> {
    let now = now_ms();
    let array =
        |entries: &[Entry]| -> Value { entries.iter().map(|e| entry_json(e, now)).collect() };
    let mixed: Vec<Value> = listing
        .mixed
        .iter()
        .map(|(dir, dialects)| json!({"dir": dir, "dialects": dialects}))
        .collect();
    let doc = json!({
        "path": znode,
        "stat": {
            "czxid": stat.czxid,
            "mzxid": stat.mzxid,
            "pzxid": stat.pzxid,
            "ctime_ms": stat.ctime,
            "mtime_ms": stat.mtime,
            "version": stat.version,
            "cversion": stat.cversion,
            "aversion": stat.aversion,
            "ephemeral_owner": hex(stat.ephemeral_owner),
            "data_length": stat.data_length,
            "num_children": stat.num_children,
        },
        "holders": array(holders),
        "waiters": array(waiters),
        "mixed": mixed,
    });
    write_json(out, &doc, true)
}
