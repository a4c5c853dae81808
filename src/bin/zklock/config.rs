//! `zklock config`: the ensemble's configuration, as the server holds it in
//! `/zookeeper/config` (zkCli's `config`), in text or JSON.

use std::io::{self, Write};

use serde_json::json;
use zklock::client::{ClientConfig, ServerRole};

use crate::ls::quiet_on_broken_pipe;
use crate::{connect, ConfigArgs, Global};

/// Connects, reads the configuration (the chroot does not apply) and prints
/// it: the server's text as zkCli prints it, or one JSON object (see
/// [`as_json`]). A server before 3.5 is an error naming what it lacks; a
/// standalone server, which holds no configuration, exits 1 and says so.
pub(crate) fn run(g: &Global, args: &ConfigArgs) -> anyhow::Result<i32> {
    let zkw = connect(g)?;
    let read = zkw.recoverable_zookeeper().get_config(false);
    let _ = zkw.close();
    let (config, _) = read?;
    if config.servers().is_empty() {
        eprintln!(
            "zklock: the server holds no ensemble configuration (a standalone server: \
             standaloneEnabled=true, or one configured before 3.5)"
        );
        return Ok(1);
    }
    let mut out = io::stdout().lock();
    let written = if args.json {
        writeln!(out, "{}", as_json(&config)).and_then(|()| out.flush())
    } else {
        let text = config.as_str();
        let newline = if text.is_empty() || text.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        write!(out, "{text}{newline}").and_then(|()| out.flush())
    };
    quiet_on_broken_pipe(written)?;
    Ok(0)
}

/// `{"version", "connect_string", "servers": [{"id", "host", "quorum_port",
/// "election_port", "role", "client"}]}`: `version` as the number the
/// server's `version=` line gives in hex, `client` the `host:port` a client
/// connects to (null for a member configured without a client port).
pub(crate) fn as_json(config: &ClientConfig) -> serde_json::Value {
    let servers: Vec<_> = config
        .servers()
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "host": s.host,
                "quorum_port": s.quorum_port,
                "election_port": s.election_port,
                "role": match s.role {
                    ServerRole::Observer => "observer",
                    _ => "participant",
                },
                "client": s.connect_address(),
            })
        })
        .collect();
    json!({
        "version": config.version(),
        "connect_string": config.connect_string(),
        "servers": servers,
    })
}
