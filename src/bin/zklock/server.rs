//! `zklock server`: a throwaway local ZooKeeper in the foreground, the same
//! one the tests and `make demo` start ([`zklock::testing::ZkServer`]).

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use crossbeam_channel::RecvTimeoutError;
use zklock::testing::ZkServer;

use crate::supervise::{signal_name, SignalWatch};

pub(crate) fn run() -> anyhow::Result<i32> {
    let signals = SignalWatch::start(|_| {})?;
    let server = ZkServer::start().context("cannot start ZooKeeper")?;
    // The connect string alone on stdout, for scripts: ZK_SERVERS=$(zklock server | head -1)
    println!("{}", server.connect_string());
    let _ = std::io::stdout().flush();
    eprintln!(
        "zklock: ZooKeeper serving at {} (data and log in {}); Ctrl-C stops it",
        server.connect_string(),
        server.dir().display()
    );
    loop {
        match signals.signals().recv_timeout(Duration::from_millis(500)) {
            Ok(sig) => {
                drop(server);
                eprintln!("zklock: {}: ZooKeeper stopped", signal_name(sig));
                return Ok(0);
            }
            Err(RecvTimeoutError::Timeout) if server.is_running() => {}
            Err(_) => anyhow::bail!(
                "ZooKeeper exited by itself; see its log {}",
                server.log_path().display()
            ),
        }
    }
}
