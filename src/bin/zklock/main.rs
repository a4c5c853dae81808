//! `zklock`: inter-process locks and leader election on ZooKeeper, from the
//! shell, modelled on `flock(1)` and `etcdctl lock` / `etcdctl elect`.
//!
//! ```text
//! zklock lock /locks/nightly --timeout 30s -- ./backup.sh
//! zklock read-lock /locks/table -- ./report.sh
//! zklock ls /locks/nightly [--json]
//! zklock reap /locks/nightly (--older-than 1h | --all)
//! zklock elect /services/cron --name host-a -- ./cron-leader.sh
//! zklock server            # a throwaway local ZooKeeper, for trying it out
//! ```
//!
//! Built with the `cli` feature (`cargo install zklock --features cli`).

mod duration;
mod elect;
mod lock;
mod ls;
mod server;
mod supervise;

use std::ffi::OsString;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use zklock::{RetryConfig, ZooKeeperWatcher};

use duration::parse_duration;

/// zklock's own failure: connection, ZooKeeper or I/O errors.
pub(crate) const EXIT_ERROR: i32 = 1;
/// Bad input: arguments, paths, durations.
pub(crate) const EXIT_USAGE: i32 = 2;
/// The lock (or leadership) was lost while the command ran.
pub(crate) const EXIT_LOST: i32 = 3;
/// `--timeout` ran out before the lock was free (sysexits' `EX_TEMPFAIL`).
pub(crate) const EXIT_TIMEOUT: i32 = 75;

const EXIT_CODES: &str = "\
Exit codes:
  the command's own code (128 + N when it died of signal N)
  1    zklock failed (connection, ZooKeeper error)
  2    bad input (arguments, znode path, duration)
  3    the lock or leadership was lost while the command ran (it got SIGTERM)
  75   --timeout ran out before the lock was free
  128+N  zklock got signal N while waiting (its place in the queue is removed)";

/// Inter-process locks and leader election on ZooKeeper, from the shell.
#[derive(Debug, Parser)]
#[command(name = "zklock", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Cmd,
}

/// Options of every subcommand.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// ZooKeeper connect string (host:port,...[/chroot])
    #[arg(
        long,
        global = true,
        env = "ZK_SERVERS",
        default_value = "127.0.0.1:2181",
        value_name = "SERVERS"
    )]
    zk: String,
    /// Session timeout: how long after a crash of zklock its locks stay taken
    #[arg(long, global = true, value_parser = parse_duration, default_value = "10s", value_name = "D")]
    session_timeout: Duration,
    /// How long to wait for a first connection to ZooKeeper
    #[arg(long, global = true, value_parser = parse_duration, default_value = "5s", value_name = "D")]
    connect_timeout: Duration,
    /// Log what zklock and its ZooKeeper client do (-v info, -vv debug)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Connect over TLS, verifying the servers with these CA certificates (PEM)
    #[arg(long, global = true, env = "ZKLOCK_TLS_CA", value_name = "PEM")]
    tls_ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM) for mutual TLS; its subject is the x509 ACL id
    #[arg(long, global = true, env = "ZKLOCK_TLS_CERT", value_name = "PEM", requires_all = ["tls_ca", "tls_key"])]
    tls_cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM)
    #[arg(
        long,
        global = true,
        env = "ZKLOCK_TLS_KEY",
        value_name = "PEM",
        requires = "tls_cert"
    )]
    tls_key: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Take the write (exclusive) lock, run the command while holding it, release
    Lock(LockArgs),
    /// Take a read (shared) lock, run the command while holding it, release
    ReadLock(LockArgs),
    /// List holders and waiters of a lock (or the candidates of an election), in order
    Ls(LsArgs),
    /// Remove lock nodes left by others (e.g. a process that hangs holding a lock)
    Reap(ReapArgs),
    /// Run the command only while leader of an election
    Elect(ElectArgs),
    /// Start a throwaway local ZooKeeper in the foreground and print its connect string
    Server,
}

/// `lock` and `read-lock`.
#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    /// The lock znode, e.g. /locks/nightly-backup
    #[arg(value_parser = parse_znode)]
    znode: String,
    /// Give up after D (e.g. 500ms, 2s, 1m; 0 = try once) with exit code 75
    #[arg(long, short = 't', value_parser = parse_duration, value_name = "D")]
    timeout: Option<Duration>,
    /// Text stored in the lock node, shown to waiters and by `ls`
    /// [default: "pid <pid> on <host>: <command>"]
    #[arg(long, short = 'm', value_name = "TEXT")]
    metadata: Option<String>,
    /// The command to run while holding the lock
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// `ls`.
#[derive(Debug, Args)]
pub(crate) struct LsArgs {
    /// The lock (or election) znode
    #[arg(value_parser = parse_znode)]
    znode: String,
    /// One JSON array instead of a table
    #[arg(long)]
    json: bool,
}

/// `reap`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["older_than", "all"])))]
pub(crate) struct ReapArgs {
    /// The lock znode
    #[arg(value_parser = parse_znode)]
    znode: String,
    /// Remove lock nodes created more than D ago (by the server's clock)
    #[arg(long, value_parser = parse_duration, value_name = "D")]
    older_than: Option<Duration>,
    /// Remove every lock node, holders and waiters
    #[arg(long)]
    all: bool,
}

/// `elect`.
#[derive(Debug, Args)]
pub(crate) struct ElectArgs {
    /// The election znode, e.g. /elections/cron
    #[arg(value_parser = parse_znode)]
    znode: String,
    /// This candidate's name, shown to the others and by `ls` [default: <host>-<pid>]
    #[arg(long, short = 'n')]
    name: Option<String>,
    /// The command to run while leader
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// A first check of a znode path, before connecting (the library checks it
/// fully).
fn parse_znode(text: &str) -> Result<String, String> {
    let bad = |why: &str| Err(format!("invalid znode path {text:?}: {why}"));
    if !text.starts_with('/') {
        return bad("it must start with /");
    }
    if text == "/" {
        return bad("locks cannot live at the root");
    }
    if text.ends_with('/') {
        return bad("it must not end with /");
    }
    if text[1..]
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return bad("empty, . or .. segment");
    }
    if text.chars().any(char::is_control) {
        return bad("control character");
    }
    Ok(text.to_string())
}

/// Connects a session for one subcommand.
pub(crate) fn connect(g: &Global) -> anyhow::Result<ZooKeeperWatcher> {
    let servers = g.zk.trim();
    let servers = if servers.is_empty() {
        "127.0.0.1:2181"
    } else {
        servers
    };
    let tls = match &g.tls_ca {
        None => None,
        Some(ca) => {
            let b = zklock::client::TlsConfig::builder().with_ca_file(ca);
            let b = match (&g.tls_cert, &g.tls_key) {
                (Some(cert), Some(key)) => b.with_client_cert(cert, key),
                _ => b,
            };
            Some(b.build().context("TLS settings")?)
        }
    };
    ZooKeeperWatcher::builder(servers)
        .with_identifier("zklock-cli")
        .with_session_timeout(g.session_timeout)
        .with_connect_wait(g.connect_timeout)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(200)))
        .with_client(|b| match tls {
            Some(t) => b.with_tls(t),
            None => b,
        })
        .connect()
        .with_context(|| format!("cannot connect to ZooKeeper at {servers}"))
}

/// This machine's name, for default metadata and candidate names.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

fn run(cli: &Cli) -> anyhow::Result<i32> {
    match &cli.command {
        Cmd::Lock(a) => lock::run(&cli.global, a, true),
        Cmd::ReadLock(a) => lock::run(&cli.global, a, false),
        Cmd::Ls(a) => ls::ls(&cli.global, a),
        Cmd::Reap(a) => ls::reap(&cli.global, a),
        Cmd::Elect(a) => elect::run(&cli.global, a),
        Cmd::Server => server::run(),
    }
}

/// The exit code for an error: bad input is 2, anything else 1.
fn exit_code_of(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<zklock::Error>() {
        Some(zklock::Error::BadArguments(_)) => EXIT_USAGE,
        _ => EXIT_ERROR,
    }
}

/// An error and its causes on one line, without repeating a cause that the
/// message before it already ends with.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !line.ends_with(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
    }
    line
}

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "off",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_target(verbose > 1)
        .init();
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line, not clap's usage block: "zklock: invalid value ...".
            let rendered = e.render().to_string();
            let first: Vec<&str> = rendered
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            eprintln!("zklock: {}", first.join(" ").trim_start_matches("error: "));
            std::process::exit(EXIT_USAGE);
        }
    };
    let verbose = cli.global.verbose;
    init_logging(verbose);
    if verbose == 0 {
        // A bug must still say one line, not a backtrace.
        std::panic::set_hook(Box::new(|info| {
            eprintln!("zklock: internal error: {info}");
        }));
    }
    let code = match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            if verbose > 0 {
                eprintln!("zklock: {e:?}");
            } else {
                eprintln!("zklock: {}", one_line(&e));
            }
            exit_code_of(&e)
        }
    };
    std::process::exit(code);
}
