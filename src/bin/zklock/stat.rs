//! `zklock stat`: one lock's (semaphore's, election's) state.

use std::io::{self, Write};

use zklock::client::Stat;
use zklock::{ZkError, ZooKeeperWatcher};

use crate::duration::human;
use crate::ls::{
    age_of, entry_json, json_string, list, no_such_node, not_a_lock, now_ms, print_table,
    quiet_on_broken_pipe, warn_mixed, what_is, Entry, Listing, What,
};
use crate::{connect, Global, StatArgs};

pub(crate) fn run(g: &Global, a: &StatArgs) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let read = read(&zkw, &a.znode);
    let _ = zkw.close();
    let Some((stat, listing)) = read? else {
        return Err(no_such_node(&a.znode));
    };
    if listing.entries.is_empty() {
        if let What::Parent(children) = what_is(listing.children.clone()) {
            anyhow::bail!(not_a_lock(&a.znode, &children, "stat"));
        }
    }
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
    // zkCli's `stat` names, times with their age.
    writeln!(out, "  cZxid = 0x{:x}", stat.czxid)?;
    writeln!(
        out,
        "  ctime = {} ({} ago)",
        stat.ctime,
        human(age_of(stat.ctime, now))
    )?;
    writeln!(out, "  mZxid = 0x{:x}", stat.mzxid)?;
    writeln!(
        out,
        "  mtime = {} ({} ago)",
        stat.mtime,
        human(age_of(stat.mtime, now))
    )?;
    writeln!(out, "  pZxid = 0x{:x}", stat.pzxid)?;
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

fn print_json(
    out: &mut impl Write,
    znode: &str,
    stat: &Stat,
    holders: &[Entry],
    waiters: &[Entry],
    listing: &Listing,
) -> io::Result<()> {
    let now = now_ms();
    let array = |entries: &[Entry]| {
        let items: Vec<String> = entries.iter().map(|e| entry_json(e, now)).collect();
        format!("[{}]", items.join(","))
    };
    let mixed: Vec<String> = listing
        .mixed
        .iter()
        .map(|(dir, dialects)| {
            let dialects: Vec<String> = dialects.iter().map(|d| json_string(d)).collect();
            format!(
                "{{\"dir\":{},\"dialects\":[{}]}}",
                json_string(dir),
                dialects.join(",")
            )
        })
        .collect();
    writeln!(
        out,
        "{{\"path\":{},\"stat\":{{\"czxid\":{},\"mzxid\":{},\"pzxid\":{},\"ctime_ms\":{},\
         \"mtime_ms\":{},\"version\":{},\"cversion\":{},\"aversion\":{},\
         \"ephemeral_owner\":\"0x{:x}\",\"data_length\":{},\"num_children\":{}}},\
         \"holders\":{},\"waiters\":{},\"mixed\":[{}]}}",
        json_string(znode),
        stat.czxid,
        stat.mzxid,
        stat.pzxid,
        stat.ctime,
        stat.mtime,
        stat.version,
        stat.cversion,
        stat.aversion,
        stat.ephemeral_owner,
        stat.data_length,
        stat.num_children,
        array(holders),
        array(waiters),
        mixed.join(",")
    )
}
