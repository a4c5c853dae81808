//! `zklock server`: a throwaway local ZooKeeper, the same one the tests and
//! `make demo` start ([`zklock::testing::ZkServer`]): in the foreground until
//! a signal, or `--detach`ed (prints its connect string, then runs in the
//! background until `zklock server --stop PID`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use crossbeam_channel::RecvTimeoutError;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use zklock::testing::{pid_alive, ZkServer};

use crate::supervise::{signal_name, SignalWatch};
use crate::{Global, ServerArgs};

/// The port to serve on: `--port`, else the port of `--zk`/`$ZK_SERVERS` when
/// it names one local server (so `zklock --zk 127.0.0.1:2181 server` serves
/// what the other commands will dial), else a free one (`None`).
fn port(g: &Global, a: &ServerArgs) -> anyhow::Result<Option<u16>> {
    if a.port.is_some() {
        return Ok(a.port);
    }
    let Some(zk) = g.zk.as_deref().map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let hosts = zk.split('/').next().unwrap_or("");
    let local = hosts
        .split_once(':')
        .filter(|(h, _)| !hosts.contains(',') && matches!(*h, "127.0.0.1" | "localhost"));
    match local.map(|(_, p)| p.parse::<u16>()) {
        Some(Ok(p)) if p > 0 => Ok(Some(p)),
        _ => Err(zklock::Error::BadArguments(format!(
            "zklock server serves one server on 127.0.0.1; --zk/ZK_SERVERS names {zk:?} \
             (use --port, or unset ZK_SERVERS)"
        ))
        .into()),
    }
}

/// Set in the environment of the background `zklock server` that
/// `--detach` starts: it then says why it could not start on stdout, which
/// `--detach` reads (its stderr goes nowhere).
const DETACHED: &str = "ZKLOCK_SERVER_DETACHED";

pub(crate) fn run(g: &Global, a: &ServerArgs) -> anyhow::Result<i32> {
    if let Some(pid) = a.stop {
        return stop(pid);
    }
    let port = port(g, a)?;
    // The port of --zk/ZK_SERVERS (not --port) already serving ZooKeeper: a
    // server of an earlier `export ZK_SERVERS=$(zklock server --detach)`.
    // Said, and its connect string printed again, so that ZK_SERVERS keeps it.
    if let (Some(p), None) = (port, a.port) {
        if serves_zookeeper(p) {
            println!("127.0.0.1:{p}");
            let _ = std::io::stdout().flush();
            eprintln!(
                "zklock: ZooKeeper already serves at 127.0.0.1:{p} (the port of --zk/ZK_SERVERS): \
                 not starting another (`zklock server --stop PID` stops one started with \
                 --detach; unset ZK_SERVERS for a new one)"
            );
            return Ok(0);
        }
    }
    if a.detach {
        return detach(port);
    }
    let signals = SignalWatch::start(|_| {})?;
    let started = match port {
        Some(p) => ZkServer::start_on_port(p),
        None => ZkServer::start(),
    }
    .context("cannot start ZooKeeper");
    let server = match started {
        Ok(s) => s,
        Err(e) if std::env::var_os(DETACHED).is_some() => {
            println!("error: {e:#}");
            return Ok(crate::EXIT_ERROR);
        }
        Err(e) => return Err(e),
    };
    // The connect string alone on stdout, for scripts.
    println!("{}", server.connect_string());
    let _ = std::io::stdout().flush();
    eprintln!(
        "zklock: ZooKeeper serving at {} (pid {}; data and log in {}); Ctrl-C stops it",
        server.connect_string(),
        std::process::id(),
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

/// Starts `zklock server` again in the background (its own process group,
/// no terminal streams), prints the connect string it reports on stdout and
/// its PID on stderr, and returns: `ZK_SERVERS=$(zklock server --detach)`.
fn detach(port: Option<u16>) -> anyhow::Result<i32> {
    let me = std::env::current_exe().context("finding the zklock binary")?;
    let mut cmd = Command::new(me);
    cmd.arg("server");
    if let Some(p) = port {
        cmd.args(["--port", &p.to_string()]);
    }
    let mut child = std::os::unix::process::CommandExt::process_group(&mut cmd, 0)
        .env_remove("ZK_SERVERS")
        .env(DETACHED, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting zklock server in the background")?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out).read_line(&mut line)?;
    }
    let connect = line.trim();
    if let Some(why) = connect.strip_prefix("error: ") {
        let _ = child.wait();
        anyhow::bail!("the background server did not start: {why}");
    }
    if connect.is_empty() {
        let status = child.wait()?;
        anyhow::bail!(
            "the background server did not start ({status}); run `zklock server` to see why"
        );
    }
    println!("{connect}");
    let _ = std::io::stdout().flush();
    eprintln!(
        "zklock: ZooKeeper serving at {connect}, pid {}; stop it with: zklock server --stop {}",
        child.id(),
        child.id()
    );
    Ok(0)
}

/// Whether a ZooKeeper answers on `port` of 127.0.0.1 (a session opens
/// within 2 s; it is closed at once).
fn serves_zookeeper(port: u16) -> bool {
    if std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    )
    .is_err()
    {
        return false;
    }
    match zklock::ZooKeeperWatcher::builder(&format!("127.0.0.1:{port}"))
        .with_connect_wait(Duration::from_secs(2))
        .connect()
    {
        Ok(zkw) => {
            let _ = zkw.close();
            true
        }
        Err(_) => false,
    }
}

/// Stops a `zklock server` by PID (SIGTERM; it stops its ZooKeeper) and
/// waits until it is gone.
fn stop(pid: u32) -> anyhow::Result<i32> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let is_server = args.first().is_some_and(|a| a.ends_with(b"zklock"))
        && args.iter().any(|a| *a == b"server");
    if !is_server {
        return Err(zklock::Error::BadArguments(format!(
            "process {pid} is not a running `zklock server`"
        ))
        .into());
    }
    let target = Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
    kill(target, Signal::SIGTERM).with_context(|| format!("stopping process {pid}"))?;
    let end = Instant::now() + Duration::from_secs(30);
    while pid_alive(pid) {
        if Instant::now() > end {
            anyhow::bail!("process {pid} did not stop within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("zklock: stopped the server {pid}");
    Ok(0)
}
