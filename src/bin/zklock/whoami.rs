//! `zklock whoami`: the session's identities as the server knows them
//! (ZooKeeper's `whoAmI`, 3.7 or later), printed as `zkCli whoami` does.

use std::io::{self, Write};

use crate::ls::quiet_on_broken_pipe;
use crate::{connect, Global};

/// Connects with the global options (TLS certificate, SASL) and prints
/// `Auth scheme: User`, then one `scheme: user` line per identity. A server
/// before 3.7 is an error naming the version needed.
pub(crate) fn run(g: &Global) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let infos = zkw.recoverable_zookeeper().who_am_i();
    let _ = zkw.close();
    let infos = infos?;
    let mut out = io::stdout().lock();
    let written = (|| {
        writeln!(out, "Auth scheme: User")?;
        for info in &infos {
            writeln!(out, "{info}")?;
        }
        out.flush()
    })();
    quiet_on_broken_pipe(written)?;
    Ok(0)
}
