//! `zklock`: inter-process locks and leader election on ZooKeeper, from the
//! shell, modelled on `flock(1)` and `etcdctl lock` / `etcdctl elect`.
//!
//! ```text
//! zklock lock /locks/nightly --timeout 30s -- ./backup.sh
//! zklock lock -n /locks/nightly -c './backup.sh && ./prune.sh'
//! zklock read-lock /locks/table -- ./report.sh
//! zklock lock /locks/deploy            # no command: hold until SIGINT/SIGTERM
//! zklock lock --dialect curator /locks/job -- ./job.sh   # with Curator services
//! zklock semaphore /semaphores/db --limit 4 -- ./query.sh
//! zklock ls /locks/nightly [--json] [--watch] [--show-acl]
//! zklock stat /locks/nightly [--json]
//! zklock reap /locks/nightly (--older-than 1h | --all)
//! zklock elect /services/cron --name host-a -- ./cron-leader.sh
//! zklock leader /services/cron [--watch]
//! zklock server [--port 2181] [--detach]   # a throwaway local ZooKeeper
//! ```
//!
//! Silent unless `-v`, as flock(1): a taken lock or a timeout is told by the
//! exit code alone; errors and a lost lock are always said.
//!
//! Built with the `cli` feature (`cargo install zklock --features cli`).

mod config;
mod diagnose;
mod duration;
mod elect;
mod lock;
mod ls;
mod server;
mod stat;
mod supervise;
mod watch;
mod whoami;

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use zklock::{RetryConfig, ZooKeeperWatcher, ZooKeeperWatcherBuilder};

use duration::parse_duration;

/// zklock's own failure: connection, ZooKeeper or I/O errors.
pub(crate) const EXIT_ERROR: i32 = 1;
/// Bad input: arguments, paths, durations.
pub(crate) const EXIT_USAGE: i32 = 2;
/// The lock (or leadership) was lost while the command ran.
pub(crate) const EXIT_LOST: i32 = 3;
/// The lock's directory holds nodes of another dialect (`--dialect`).
pub(crate) const EXIT_MIXED: i32 = 4;
/// `--timeout` ran out before the lock was free (sysexits' `EX_TEMPFAIL`).
pub(crate) const EXIT_TIMEOUT: i32 = 75;

const EXIT_CODES: &str = "\
Exit codes:
  the command's own code (128 + N when it died of signal N)
  1    zklock failed (connection, ZooKeeper error)
  2    bad input (arguments, znode path, duration, connect string)
  3    the lock or leadership was lost while the command ran (it got SIGTERM),
       or while held without a command
  4    the lock's directory holds nodes of another dialect than --dialect
       (Curator, kazoo and zklock's own layouts do not see each other: two
       holders at once); nothing was run (`zklock ls PATH` shows them)
  75   --timeout (or -n) ran out before the lock was free (-E N changes it)
  128+N  zklock got signal N while waiting (its place in the queue is removed)

Environment:
  ZK_SERVERS          the connect string when --zk is not given
  ZKLOCK_LOCK         (lock, read-lock, semaphore) the lock znode, as given
  ZKLOCK_LOCK_NODE    (lock, read-lock, semaphore) the holder's own lock
                      (or lease) node
  ZKLOCK_FENCING_TOKEN  a number that grows with every grant of the lock
                      (or leadership): pass it to storage that rejects
                      writes from an older holder
  ZKLOCK_ELECTION     (elect) the election znode, as given
  ZKLOCK_LEADER_NODE  (elect) the leader's offer node
  ZKLOCK_LEADER_NAME  (elect) the leader's --name

The command runs in a process group of its own, watched by a small sh: if
zklock dies, even by kill -9, the group gets SIGKILL at once, before the
session expires and another zklock gets the lock. A process that leaves the
group (setsid, a daemon) is not covered.

A stopped zklock (SIGSTOP, ^Z, a frozen VM or container) cannot keep its
session alive: after --session-timeout the session expires, its lock node
goes, and the next holder's command runs beside this one's, which is still
running (a stopped zklock cannot stop it; once resumed, zklock finds its
session expired and SIGTERMs the command, exit 3). No lock service prevents
this; what protects the data is the fencing token: give
$ZKLOCK_FENCING_TOKEN to storage that refuses writes carrying an older token
(the library's guarded writes do this for data kept in ZooKeeper), and pick a
--session-timeout longer than the pauses you expect.";

/// Inter-process locks and leader election on ZooKeeper, from the shell.
#[derive(Debug, Parser)]
#[command(name = "zklock", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Cmd,
}

/// Options of every subcommand: the connection, its security and the ACL of
/// what zklock creates (their own help heading, after the subcommand's).
#[derive(Debug, Args)]
#[command(next_help_heading = "Connection options (every subcommand)")]
pub(crate) struct Global {
    /// ZooKeeper connect string (host:port,...[/chroot]) [default: 127.0.0.1:2181]
    #[arg(long, global = true, env = "ZK_SERVERS", value_name = "SERVERS")]
    zk: Option<String>,
    /// Session timeout: how long after a crash of zklock its locks stay taken
    #[arg(long, global = true, value_parser = parse_duration, default_value = "10s", value_name = "D",
          allow_hyphen_values = true)]
    session_timeout: Duration,
    /// How long to wait for a first connection to ZooKeeper
    #[arg(long, global = true, value_parser = parse_duration, default_value = "5s", value_name = "D",
          allow_hyphen_values = true)]
    connect_timeout: Duration,
    /// Say what zklock does (waiting, got the lock, gave up); -vv also logs
    /// the client (info), -vvv debug, -vvvv trace
    ///
    /// zklock is silent by default, as flock(1): a lock that is taken (-n),
    /// a timeout (-t) or a signal while waiting is told by the exit code
    /// alone, so cron mails nothing. Errors and a lost (or in doubt) lock
    /// are always told on stderr.
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
    /// Authenticate with SASL (DIGEST-MD5) as this user
    ///
    /// The password comes from --sasl-password-file or $ZKLOCK_SASL_PASSWORD,
    /// never from an argument.
    #[arg(long, global = true, env = "ZKLOCK_SASL_USER", value_name = "USER")]
    sasl_user: Option<String>,
    /// File whose first line is the SASL password
    #[arg(
        long,
        global = true,
        env = "ZKLOCK_SASL_PASSWORD_FILE",
        value_name = "FILE",
        requires = "sasl_user"
    )]
    sasl_password_file: Option<std::path::PathBuf>,
    /// Authenticate with Kerberos (SASL GSSAPI) to this service/host principal
    ///
    /// The servers' principal, e.g. zookeeper/zk1.example.com.
    #[arg(
        long,
        global = true,
        env = "ZKLOCK_KERBEROS_SERVICE",
        value_name = "SERVICE/HOST",
        conflicts_with = "sasl_user"
    )]
    kerberos_service: Option<String>,
    /// The client's Kerberos principal [default: the ticket cache's]
    #[arg(
        long,
        global = true,
        env = "ZKLOCK_KERBEROS_PRINCIPAL",
        value_name = "PRINCIPAL",
        requires = "kerberos_service"
    )]
    kerberos_principal: Option<String>,
    /// The client's keytab (else the ticket cache, $KRB5CCNAME)
    #[arg(
        long,
        global = true,
        env = "ZKLOCK_KEYTAB",
        value_name = "FILE",
        requires = "kerberos_service"
    )]
    keytab: Option<std::path::PathBuf>,
    /// The ACL of the nodes zklock creates
    ///
    /// Lock, lease and election nodes and the directories above them: auto
    /// (creator when the session has an identity: --tls-cert, --sasl-user,
    /// Kerberos; else open), open (anyone may do anything), creator (only
    /// this identity and the --acl-id ones), creator-read (creator, and anyone
    /// may read).
    #[arg(
        long,
        global = true,
        env = "ZKLOCK_ACL",
        value_enum,
        default_value = "auto",
        value_name = "ACL"
    )]
    acl: AclChoice,
    /// Also give all permissions to this identity (SCHEME:ID, repeatable)
    ///
    /// E.g. x509:CN=host-b,O=example or sasl:bob: fleet members holding other
    /// identities can then share the lock, and delete its nodes.
    #[arg(long = "acl-id", global = true, value_name = "SCHEME:ID", value_parser = parse_acl_id)]
    acl_ids: Vec<zklock::client::Id>,
}

/// `--acl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AclChoice {
    /// Creator-only when the session has an authenticated identity, else open.
    Auto,
    /// `OPEN_ACL_UNSAFE`: anyone may read, change, create and delete.
    Open,
    /// `CREATOR_ALL_ACL` (plus the `--acl-id` identities).
    Creator,
    /// `CREATOR_ALL_ACL` plus world read (plus the `--acl-id` identities).
    CreatorRead,
}

/// `--acl-id SCHEME:ID`.
fn parse_acl_id(text: &str) -> Result<zklock::client::Id, String> {
    match text.split_once(':') {
        Some((scheme, id)) if !scheme.is_empty() && !id.is_empty() => {
            Ok(zklock::client::Id::new(scheme, id))
        }
        _ => Err(format!(
            "invalid ACL id {text:?}: give SCHEME:ID, e.g. x509:CN=host-b,O=example"
        )),
    }
}

impl Global {
    /// Whether the options give the session an authenticated identity.
    fn has_identity(&self) -> bool {
        if self.kerberos_service.is_some() {
            return true;
        }
        self.tls_cert.is_some() || self.sasl_user.is_some()
    }

    /// The watcher's ACL policy from `--acl` and `--acl-id`.
    fn acl_policy(&self) -> Result<zklock::client::AclPolicy, zklock::Error> {
        use zklock::client::{AclPolicy, Perms};
        let creator = match self.acl {
            AclChoice::Open if !self.acl_ids.is_empty() => {
                return Err(zklock::Error::BadArguments(
                    "--acl-id needs --acl auto, creator or creator-read".into(),
                ))
            }
            AclChoice::Open => return Ok(AclPolicy::open()),
            AclChoice::Creator | AclChoice::CreatorRead if !self.has_identity() => {
                return Err(zklock::Error::BadArguments(
                    "--acl creator and creator-read need an authenticated identity \
                     (--tls-cert, --sasl-user or Kerberos)"
                        .into(),
                ))
            }
            AclChoice::Auto | AclChoice::Creator => AclPolicy::creator_all(),
            AclChoice::CreatorRead => AclPolicy::creator_all_world_read(),
        };
        let policy = self
            .acl_ids
            .iter()
            .fold(creator, |p, id| p.with_grant(Perms::ALL, id.clone()));
        Ok(match self.acl {
            AclChoice::Auto => policy.with_anonymous(AclPolicy::open()),
            _ => policy,
        })
    }
}

/// The environment variable the SASL password may come from (read here, not
/// by clap: it must never be an argument, nor shown by `--help`).
const SASL_PASSWORD_ENV: &str = "ZKLOCK_SASL_PASSWORD";

/// `--sasl-user` with its password (from `--sasl-password-file`, else
/// `$ZKLOCK_SASL_PASSWORD`). The password is never put in an error.
fn sasl_config(g: &Global) -> anyhow::Result<Option<zklock::client::SaslConfig>> {
    #[cfg(feature = "kerberos")]
    if let Some(service) = &g.kerberos_service {
        let config = zklock::client::SaslConfig::kerberos(service);
        return Ok(Some(match &g.kerberos_principal {
            Some(p) => config.with_client_principal(p),
            None => config,
        }));
    }
    let Some(user) = &g.sasl_user else {
        return Ok(None);
    };
    let password = match &g.sasl_password_file {
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|e| {
                anyhow::anyhow!("cannot read the SASL password file {}: {e}", file.display())
            })?;
            text.lines().next().unwrap_or("").to_string()
        }
        None => match std::env::var(SASL_PASSWORD_ENV) {
            Ok(p) => p,
            Err(_) => anyhow::bail!(
                "--sasl-user {user} needs a password: --sasl-password-file FILE or \
                 ${SASL_PASSWORD_ENV}"
            ),
        },
    };
    Ok(Some(zklock::client::SaslConfig::digest_md5(user, password)))
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Take the write (exclusive) lock, run the command while holding it, release
    ///
    /// With no command, hold the lock until SIGINT or SIGTERM, printing its
    /// node and fencing token on stdout once held (see HOLDING below).
    #[command(after_long_help = HOLD_HELP)]
    Lock(LockCmdArgs),
    /// Take a read (shared) lock, run the command while holding it, release
    ///
    /// With no command, hold it until SIGINT or SIGTERM (as `lock`).
    #[command(after_long_help = HOLD_HELP)]
    ReadLock(LockArgs),
    /// Take one of --limit leases of a counting semaphore, run the command
    /// while holding it, release
    ///
    /// With no command, hold the lease until SIGINT or SIGTERM (as `lock`).
    #[command(after_long_help = HOLD_HELP)]
    Semaphore(SemaphoreArgs),
    /// List holders and waiters of a lock (or the candidates of an election), in order
    ///
    /// --watch follows them.
    Ls(LsArgs),
    /// One lock's state: holders and waiters with sessions, ages, fencing tokens
    ///
    /// A lock's, semaphore's or election's holders and waiters in order, with
    /// their sessions, ages and fencing tokens, and the znode's stat.
    Stat(StatArgs),
    /// Remove lock nodes left by others (e.g. a process that hangs holding a lock)
    Reap(ReapArgs),
    /// Run the command only while leader of an election
    Elect(ElectArgs),
    /// Print the current leader of an election (without taking part)
    ///
    /// --watch follows it.
    Leader(LeaderArgs),
    /// Start a throwaway local ZooKeeper and print its connect string
    Server(ServerArgs),
    /// Print the session's identities as the server knows them
    ///
    /// As zkCli's whoami (scheme: user); needs ZooKeeper 3.7 or later.
    Whoami,
    /// Print the ensemble's configuration (/zookeeper/config)
    ///
    /// As zkCli's config: the members and the config's version; needs
    /// ZooKeeper 3.5 or later. The chroot of --zk does not apply.
    Config(ConfigArgs),
}

/// `config`.
#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    /// One JSON object instead of the server's text
    ///
    /// {"version", "connect_string", "servers": [{"id", "host", "quorum_port",
    /// "election_port", "role", "client"}]} (docs/cli.md).
    #[arg(long)]
    json: bool,
}

/// `lock --help`, `read-lock --help`, `semaphore --help`: the form without a
/// command.
const HOLD_HELP: &str = "\
Holding without a command:
  With no command (nothing after --, no -c), zklock holds the lock until
  SIGINT or SIGTERM, then releases it and exits 0. Once held it prints one
  line on stdout: the holder's node and the fencing token (with --json, an
  object: lock, node, fencing_token, session). If the lock is lost meanwhile
  (session expired, node removed by `zklock reap`), it says so on stderr and
  exits 3. In bash, across several steps:

    coproc HOLD { exec zklock lock /locks/deploy -t 1m; }
    read -r node token <&\"${HOLD[0]}\" || exit 75    # held (or gave up)
    ./step1.sh \"$token\"; ./step2.sh \"$token\"
    kill \"$HOLD_PID\"; wait \"$HOLD_PID\"              # release; 3 if it was lost";

/// How the command is given and stopped: `lock`, `read-lock`, `semaphore`,
/// `elect`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Run this string with `sh -c` instead of a command after --
    #[arg(
        short = 'c',
        long = "command",
        value_name = "SHELL",
        conflicts_with = "command"
    )]
    shell: Option<String>,
    /// How long the command has after SIGTERM before SIGKILL (consul: 5 s)
    ///
    /// After a lost lock, or for what the command leaves running.
    #[arg(long, value_parser = parse_duration, default_value = "5s", value_name = "D",
          allow_hyphen_values = true)]
    kill_after: Duration,
    /// The command to run (after --); none: hold until a signal
    #[arg(last = true, num_args = 1.., value_name = "COMMAND")]
    command: Vec<OsString>,
}

impl RunArgs {
    /// The command's argv: `sh -c SHELL` or the words after `--`; empty
    /// when none is given (hold until a signal).
    pub(crate) fn argv(&self) -> Vec<OsString> {
        match &self.shell {
            Some(s) => vec!["sh".into(), "-c".into(), s.into()],
            None => self.command.clone(),
        }
    }
}

/// `lock` and `read-lock`.
#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    /// The lock znode, e.g. /locks/nightly-backup
    #[arg(value_parser = parse_znode)]
    znode: String,
    /// Give up after D with exit code 75 (flock's -w)
    ///
    /// E.g. 500ms, 2s, 1h30m, or a bare number of seconds; 0 = try once.
    #[arg(long, short = 't', visible_short_alias = 'w', value_parser = parse_duration,
          value_name = "D", allow_hyphen_values = true)]
    timeout: Option<Duration>,
    /// Do not wait: exit 75 (or -E) at once when the lock is taken (= -t 0)
    #[arg(long, short = 'n', conflicts_with = "timeout")]
    nonblock: bool,
    /// The exit code when the lock could not be taken in time [default: 75]
    #[arg(long, short = 'E', value_name = "N", value_parser = clap::value_parser!(u8))]
    conflict_exit_code: Option<u8>,
    /// Text stored in the lock node, shown to waiters and by `ls`
    ///
    /// [default: "pid <pid> on <host>: <command>"]
    #[arg(long, short = 'm', value_name = "TEXT")]
    metadata: Option<String>,
    /// The node layout: hbase (zklock's), curator or kazoo
    ///
    /// To share the lock with services of that library: hbase (zklock's
    /// own), curator (Apache Curator: InterProcessMutex,
    /// InterProcessReadWriteLock, InterProcessSemaphoreV2) or kazoo (Lock,
    /// ReadLock/WriteLock, Semaphore).
    #[arg(long, short = 'd', default_value = "hbase", value_name = "DIALECT",
          value_parser = parse_dialect)]
    dialect: zklock::lock::Dialect,
    /// With no command: print the held lock as a JSON object
    ///
    /// {"lock", "node", "fencing_token", "session"} on one line (docs/cli.md).
    #[arg(long, conflicts_with_all = ["shell", "command"])]
    json: bool,
    #[command(flatten)]
    run: RunArgs,
}

impl LockArgs {
    /// `--metadata`, or "pid <pid> on <host>: <command>".
    pub(crate) fn metadata_or_default(&self) -> String {
        self.metadata
            .clone()
            .unwrap_or_else(|| lock::default_metadata(&self.run.argv()))
    }
}

/// `lock`.
#[derive(Debug, Args)]
pub(crate) struct LockCmdArgs {
    #[command(flatten)]
    lock: LockArgs,
    /// With --dialect curator: the write side of Curator's read/write lock
    ///
    /// The write side of Curator's InterProcessReadWriteLock (`__WRIT__`,
    /// excludes `read-lock`), not its InterProcessMutex (`lock-`, which
    /// readers do not see). The other dialects' write lock is always both.
    #[arg(long)]
    rw: bool,
}

/// `semaphore`.
#[derive(Debug, Args)]
pub(crate) struct SemaphoreArgs {
    #[command(flatten)]
    lock: LockArgs,
    /// How many holders at once
    ///
    /// zklock's and kazoo's layouts keep the limit in the znode: a different
    /// one is refused; Curator's keeps none, so give every participant the
    /// same.
    #[arg(long, short = 'l', value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
}

/// `--dialect`: hbase, curator or kazoo.
fn parse_dialect(text: &str) -> Result<zklock::lock::Dialect, String> {
    text.parse().map_err(|e: zklock::Error| e.to_string())
}

/// `ls`.
#[derive(Debug, Args)]
pub(crate) struct LsArgs {
    /// The lock (or election) znode
    #[arg(value_parser = parse_any_znode)]
    znode: String,
    /// One JSON array instead of a table, an object per node
    ///
    /// Each object: state, kind, dialect, node, path, sequence, session
    /// (hex), ctime_ms, age_ms, fencing_token (the node's creation zxid),
    /// metadata; with --show-acl, acl (docs/cli.md, "JSON output").
    #[arg(long)]
    json: bool,
    /// Keep running and print the listing again at each change, until Ctrl-C
    ///
    /// Driven by ZooKeeper watches; with --json one array per line. Ends on
    /// Ctrl-C or SIGTERM (exit 0); after a reconnect or a session expiry
    /// (then a new session is opened) the lock is read again. A path that
    /// does not exist yet is watched until it appears.
    #[arg(long, conflicts_with = "show_acl")]
    watch: bool,
    /// Print the ACL of the znode and of each node listed
    ///
    /// SCHEME:ID:PERMS, perms as zkCli's cdrwa (create, delete, read, write,
    /// admin); with --json, the znode's object and each node's, with "acl".
    #[arg(long)]
    show_acl: bool,
}

/// `stat`.
#[derive(Debug, Args)]
pub(crate) struct StatArgs {
    /// The lock (semaphore, election) znode
    #[arg(value_parser = parse_any_znode)]
    znode: String,
    /// One JSON object instead of text
    ///
    /// {"path", "stat": {czxid, mzxid, pzxid, ctime_ms, mtime_ms, version,
    /// cversion, aversion, ephemeral_owner, data_length, num_children},
    /// "holders": [..], "waiters": [..], "mixed": [..]}, holders and waiters
    /// as `ls --json`'s objects (docs/cli.md).
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
    /// Remove holders (and an election's leader) older than D
    ///
    /// By the server's clock; waiters stay unless --waiters.
    #[arg(long, value_parser = parse_duration, value_name = "D", allow_hyphen_values = true)]
    older_than: Option<Duration>,
    /// With --older-than: waiters (and candidates) older than D go too
    #[arg(long, requires = "older_than")]
    waiters: bool,
    /// Remove every node: holders, waiters, leader and candidates
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
    ///
    /// No short flag: `-n` is lock's "do not wait", one meaning per letter.
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    run: RunArgs,
}

/// `leader`.
#[derive(Debug, Args)]
pub(crate) struct LeaderArgs {
    /// The election znode
    #[arg(value_parser = parse_any_znode)]
    znode: String,
    /// Keep running and print the leader again each time it changes
    ///
    /// "(no leader)" while there is none.
    #[arg(long)]
    watch: bool,
}

/// `server`.
#[derive(Debug, Args)]
#[command(after_help = SERVER_HELP)]
pub(crate) struct ServerArgs {
    /// Serve on this port of 127.0.0.1
    ///
    /// [default: the port of --zk/ZK_SERVERS when it names 127.0.0.1 or
    /// localhost, else a free one]
    #[arg(long)]
    port: Option<u16>,
    /// Start in the background: print the connect string, then exit
    ///
    /// The connect string on stdout, the PID on stderr.
    #[arg(long, conflicts_with = "stop")]
    detach: bool,
    /// Stop a server started with --detach (its PID)
    #[arg(long, value_name = "PID")]
    stop: Option<u32>,
}

const SERVER_HELP: &str = "\
For scripts:
  export ZK_SERVERS=$(zklock server --detach)   # prints 127.0.0.1:PORT
  zklock lock /locks/x -- true
  zklock server --stop <PID printed on stderr>";

/// A lock's (semaphore's, election's) path, checked before connecting:
/// [`parse_any_znode`], and not the root, where no lock can live (usage
/// error, rc 2).
fn parse_znode(text: &str) -> Result<String, String> {
    if text == "/" {
        return Err(format!(
            "invalid znode path {text:?}: locks cannot live at the root"
        ));
    }
    parse_any_znode(text)
}

/// A first check of a znode path, before connecting: everything ZooKeeper's
/// `PathUtils.validatePath` refuses, with the reason (usage error, rc 2).
/// The root is a path: `ls /` and `stat /` read it (they say what it holds).
fn parse_any_znode(text: &str) -> Result<String, String> {
    let bad = |why: &str| Err(format!("invalid znode path {text:?}: {why}"));
    if !text.starts_with('/') {
        return bad("it must start with /");
    }
    if text == "/" {
        return Ok(text.to_string());
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
    // ZooKeeper (Java) refuses UTF-16 surrogates, so any character outside
    // the Basic Multilingual Plane, and the private-use and special ranges.
    if let Some(c) = text
        .chars()
        .find(|&c| c > '\u{ffff}' || ('\u{e000}'..='\u{f8ff}').contains(&c) || c >= '\u{fff0}')
    {
        return bad(&format!(
            "ZooKeeper refuses the character {c:?} (U+{:04X}): no characters outside the \
             Basic Multilingual Plane (emoji), private-use or U+FFF0..U+FFFF",
            c as u32
        ));
    }
    Ok(text.to_string())
}

/// The connect string to use: `--zk`, `$ZK_SERVERS`, or 127.0.0.1:2181.
pub(crate) fn servers(g: &Global) -> &str {
    match g.zk.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() => s,
        _ => "127.0.0.1:2181",
    }
}

/// Connects a session for one subcommand. The connection options (`Global`)
/// are applied here and only here. A connect string that does not parse is
/// a usage error; a failed connection says why for each server (refused,
/// timed out, cannot resolve); a session timeout the server changed is told.
pub(crate) fn connect(g: &Global) -> anyhow::Result<ZooKeeperWatcher> {
    connect_with(g, |b| b)
}

/// [`connect`], with `more` settings of the watcher's builder (`ls --watch`:
/// session renewal, its own abortable).
pub(crate) fn connect_with(
    g: &Global,
    more: impl FnOnce(ZooKeeperWatcherBuilder) -> ZooKeeperWatcherBuilder,
) -> anyhow::Result<ZooKeeperWatcher> {
    let servers = servers(g);
    let tls = match &g.tls_ca {
        None => None,
        Some(ca) => {
            let b = zklock::client::TlsConfig::builder().with_ca_file(ca);
            let b = match (&g.tls_cert, &g.tls_key) {
                (Some(cert), Some(key)) => b.with_client_cert(cert, key),
                _ => b,
            };
            Some(anyhow::Context::context(b.build(), "TLS settings")?)
        }
    };
    let sasl = sasl_config(g)?;
    let acl = g.acl_policy()?;
    let zkw = more(ZooKeeperWatcher::builder(servers))
        .with_acl_policy(acl)
        .with_identifier("zklock-cli")
        .with_session_timeout(g.session_timeout)
        .with_connect_wait(g.connect_timeout)
        .with_retry(RetryConfig::default().with_sleep_interval(Duration::from_millis(200)))
        .with_client(|b| {
            let b = match tls {
                Some(t) => b.with_tls(t),
                None => b,
            };
            match sasl {
                Some(s) => b.with_sasl(s),
                None => b,
            }
        })
        .connect();
    let zkw = match zkw {
        Ok(zkw) => zkw,
        Err(e @ zklock::Error::BadArguments(_)) => return Err(e.into()),
        Err(e) => return Err(connect_failed(g, servers, e)),
    };
    let granted = zkw.zookeeper().session_timeout();
    if granted != g.session_timeout {
        eprintln!(
            "zklock: warning: the server granted a session timeout of {} instead of {} \
             (its minSessionTimeout..maxSessionTimeout)",
            duration::human(granted),
            duration::human(g.session_timeout)
        );
    }
    // A chroot that does not exist: say so before anything is created in it.
    if let Some(chroot) = zkw.zookeeper().chroot().map(str::to_string) {
        if let Err(e) = check_chroot(&zkw, &chroot) {
            let _ = zkw.close();
            return Err(e);
        }
    }
    Ok(zkw)
}

/// A message that says what happened, where and what to do: printed alone
/// without `-v` (see [`one_line`]); `-v` adds the errors it stands for.
#[derive(Debug)]
pub(crate) struct Explained(pub(crate) String);

impl std::fmt::Display for Explained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `e` with the one line that explains it.
pub(crate) fn explained(e: impl Into<anyhow::Error>, line: String) -> anyhow::Error {
    e.into().context(Explained(line))
}

/// Why a first connection failed, in one line: refused (every server, at
/// once), TLS (our certificate refused, the server's not trusted), an
/// authentication that failed (with the mechanism's reason), or the cause
/// found per server.
fn connect_failed(g: &Global, servers: &str, e: zklock::Error) -> anyhow::Error {
    use zklock::{Error, ZkError};
    match &e {
        Error::Connect {
            code: ZkError::ConnectionLoss,
            reason,
            ..
        } => {
            let line = format!("cannot connect to ZooKeeper at {servers}: {reason}");
            explained(e, line)
        }
        #[cfg(feature = "tls")]
        Error::Tls(tls) => {
            let line = tls_failed(g, servers, tls);
            explained(e, line)
        }
        Error::Connect {
            code: ZkError::AuthFailed,
            reason,
            ..
        } => {
            let line = if g.kerberos_service.is_some() {
                format!(
                    "cannot authenticate to ZooKeeper at {servers} with Kerberos: {reason} \
                     (check the client's credentials: the --keytab file or the ticket cache \
                     (klist, kinit), the principal, and that the KDC knows the \
                     --kerberos-service principal)"
                )
            } else {
                let user = g.sasl_user.as_deref().unwrap_or("?");
                format!(
                    "ZooKeeper at {servers} refused the SASL login of {user}: {reason} (check \
                     the user and its password, from --sasl-password-file or \
                     ${SASL_PASSWORD_ENV}, against the servers' JAAS Server section)"
                )
            };
            explained(e, line)
        }
        _ if e.is(ZkError::AuthFailed) => {
            let line = format!(
                "ZooKeeper at {servers} refused the authentication (check the credentials \
                 given with --sasl-user, --kerberos-service or --tls-cert)"
            );
            explained(e, line)
        }
        _ => {
            let why = diagnose::why_unreachable(servers, g.connect_timeout);
            anyhow::Error::new(e).context(format!("cannot connect to ZooKeeper at {servers}{why}"))
        }
    }
}

/// A TLS failure with ZooKeeper at `servers`, and what to check.
#[cfg(feature = "tls")]
fn tls_failed(g: &Global, servers: &str, tls: &zklock::client::TlsError) -> String {
    use zklock::client::TlsError;
    match (tls, &g.tls_cert) {
        (TlsError::ClientCertificateRejected(alert), Some(cert)) => format!(
            "ZooKeeper at {servers} refused our client certificate {} (TLS alert {alert}): check \
             that it is issued by a CA in the servers' trust store (ssl.trustStore), not \
             expired, and that --tls-key is its key",
            cert.display()
        ),
        (TlsError::ClientCertificateRejected(alert), None) => format!(
            "ZooKeeper at {servers} requires a client certificate (TLS alert {alert}): give \
             --tls-cert and --tls-key"
        ),
        (TlsError::UntrustedServer(_) | TlsError::ServerCertificateExpired(_), _) => format!(
            "the TLS certificate of ZooKeeper at {servers} is refused: {tls} (check --tls-ca: \
             the CA that issued the servers' certificates)"
        ),
        (TlsError::NotTls(_), _) => format!(
            "ZooKeeper at {servers} does not speak TLS there: {tls} (give its \
             secureClientPort, or drop --tls-ca for its plaintext port)"
        ),
        _ => format!("TLS with ZooKeeper at {servers} failed: {tls}"),
    }
}

/// A SASL-only server (`sessionRequireClientSASLAuth`) refusing a session
/// with no SASL: which options give it.
fn sasl_required(g: &Global, e: &anyhow::Error) -> Option<String> {
    use zklock::ZkError;
    let code = e.chain().find_map(|c| {
        c.downcast_ref::<zklock::Error>()
            .and_then(zklock::Error::code)
    })?;
    // The server's refusal is SessionClosedRequireSaslAuth; a call after it
    // gets the dead handle's AuthFailed (with no identity given, nothing
    // else refuses an authentication).
    let no_sasl = g.sasl_user.is_none() && g.kerberos_service.is_none();
    let refused = code == ZkError::SessionClosedRequireSaslAuth
        || (code == ZkError::AuthFailed && !g.has_identity());
    (no_sasl && refused).then(|| {
        format!(
            "ZooKeeper at {} accepts only SASL-authenticated clients: give --sasl-user USER \
             (DIGEST-MD5; the password from --sasl-password-file or ${SASL_PASSWORD_ENV}) or \
             --kerberos-service SERVICE/HOST (Kerberos)",
            servers(g)
        )
    })
}

/// Fails when the connect string's chroot does not exist.
fn check_chroot(zkw: &ZooKeeperWatcher, chroot: &str) -> anyhow::Result<()> {
    match zkw.recoverable_zookeeper().exists("/", false) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => anyhow::bail!(
            "the chroot {chroot} of the connect string does not exist (create it, or drop \
             {chroot} from --zk)"
        ),
        Err(e) if e.is(zklock::ZkError::NoNode) => anyhow::bail!(
            "the chroot {chroot} of the connect string does not exist (create it, or drop \
             {chroot} from --zk)"
        ),
        Err(e) => Err(anyhow::Error::new(e).context(format!("checking the chroot {chroot}"))),
    }
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
        Cmd::Lock(a) => lock::run(&cli.global, &a.lock, true, a.rw),
        Cmd::ReadLock(a) => lock::run(&cli.global, a, false, false),
        Cmd::Semaphore(a) => lock::run_semaphore(&cli.global, a),
        Cmd::Ls(a) if a.watch => watch::run(&cli.global, a),
        Cmd::Ls(a) => ls::ls(&cli.global, a),
        Cmd::Stat(a) => stat::run(&cli.global, a),
        Cmd::Reap(a) => ls::reap(&cli.global, a),
        Cmd::Elect(a) => elect::run(&cli.global, a),
        Cmd::Leader(a) => elect::leader(&cli.global, a),
        Cmd::Server(a) => server::run(&cli.global, a),
        Cmd::Whoami => whoami::run(&cli.global),
        Cmd::Config(a) => config::run(&cli.global, a),
    }
}

/// The exit code for an error: bad input is 2, anything else 1.
fn exit_code_of(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<zklock::Error>() {
        Some(zklock::Error::BadArguments(_))
        | Some(zklock::Error::Zk {
            code: zklock::ZkError::BadArguments,
            ..
        }) => EXIT_USAGE,
        _ => EXIT_ERROR,
    }
}

/// An error and its causes on one line, without repeating a cause that the
/// message before it already holds, and ending at an [`Explained`] line
/// (which says it all; `-v` prints the rest).
fn one_line(e: &anyhow::Error) -> String {
    let stop = e.downcast_ref::<Explained>().map(|x| x.0.as_str());
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
        if stop == Some(text.as_str()) {
            break;
        }
    }
    line
}

/// clap's error in one line ("unexpected argument '--tiemout' found"),
/// with clap's suggestion kept ("a similar argument exists: '--timeout'")
/// and zklock's hint (see [`hint`]).
fn usage_line(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let rendered = e.render().to_string();
    let first: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let mut line = first.join(" ").trim_start_matches("error: ").to_string();
    for (kind, what) in [
        (ContextKind::SuggestedSubcommand, "subcommand"),
        (ContextKind::SuggestedArg, "argument"),
        (ContextKind::SuggestedValue, "value"),
    ] {
        let similar = match e.get(kind) {
            Some(ContextValue::String(s)) => vec![s.clone()],
            Some(ContextValue::Strings(s)) => s.clone(),
            _ => continue,
        };
        if let [one] = similar.as_slice() {
            line.push_str(&format!(" (a similar {what} exists: '{one}')"));
        } else if !similar.is_empty() {
            line.push_str(&format!(
                " (similar {what}s exist: '{}')",
                similar.join("', '")
            ));
        }
    }
    line.push_str(hint(e));
    line
}

/// A hint for a usage error: flock's flags (`-s`, `-x`, `-e`, `-u`) say
/// what zklock does instead, and a word that is not a flag, given to a
/// subcommand that runs a command, is most likely the command without `--`
/// before it. A mistyped flag gets clap's suggestion alone.
fn hint(e: &clap::Error) -> &'static str {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return "";
    }
    let runs_a_command = std::env::args()
        .skip(1)
        .any(|a| matches!(a.as_str(), "lock" | "read-lock" | "semaphore" | "elect"));
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return "";
    };
    match arg.as_str() {
        "-s" | "--shared" => {
            " (flock's -s: for a shared lock use `zklock read-lock PATH -- CMD ARGS...`)"
        }
        "-x" | "-e" | "--exclusive" => {
            " (flock's -x: `zklock lock PATH -- CMD ARGS...` is exclusive already; \
             `zklock read-lock` is the shared one)"
        }
        "-u" | "--unlock" => {
            " (flock's -u: zklock releases when the command ends, or, holding without a \
             command, on SIGINT or SIGTERM)"
        }
        "-n" if std::env::args().any(|a| a == "elect") => {
            " (elect's candidate name is --name NAME; -n is lock's --nonblock)"
        }
        a if a.starts_with('-') => "",
        _ if runs_a_command => {
            " (hint: put the command after --, as in `zklock lock /locks/x -- CMD ARGS...`, \
             or give a shell string with -c 'CMD')"
        }
        _ => "",
    }
}

/// A Kerberos option given to a zklock built without the `kerberos`
/// feature: which feature and system packages it needs. (The options exist in
/// every build so that they are found in `--help`; `cli` does not bring
/// `kerberos`, whose build needs MIT Kerberos' headers and libclang, which a
/// Cargo feature cannot detect.)
#[cfg(not(feature = "kerberos"))]
fn kerberos_unavailable(g: &Global) -> Option<String> {
    let flag = if g.kerberos_service.is_some() {
        "--kerberos-service"
    } else if g.kerberos_principal.is_some() {
        "--kerberos-principal"
    } else if g.keytab.is_some() {
        "--keytab"
    } else {
        return None;
    };
    Some(format!(
        "{flag} needs a zklock built with the `kerberos` feature, and this one was not: \
         cargo install zklock --features cli,kerberos (building it needs the Debian packages \
         libkrb5-dev, libclang-dev and pkg-config: `make kerberos` installs them)"
    ))
}

/// The log: off by default and with one `-v` (which makes zklock talk,
/// not its client), then info, debug, trace.
fn init_logging(verbose: u8) {
    let level = match verbose {
        0 | 1 => "off",
        2 => "info",
        3 => "debug",
        _ => "trace",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_target(verbose > 2)
        .init();
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line, not clap's usage block: "zklock: invalid value ...".
            eprintln!("zklock: {}", usage_line(&e));
            std::process::exit(EXIT_USAGE);
        }
    };
    // GSSAPI reads the client keytab's name from the environment; set here,
    // while zklock has no other thread.
    #[cfg(feature = "kerberos")]
    if let Some(keytab) = &cli.global.keytab {
        std::env::set_var("KRB5_CLIENT_KTNAME", keytab);
        // Tickets got from the keytab stay in this process (as Java's
        // `useTicketCache=false`): the user's ticket cache is not touched.
        std::env::set_var("KRB5CCNAME", "MEMORY:zklock");
    }
    #[cfg(not(feature = "kerberos"))]
    if let Some(line) = kerberos_unavailable(&cli.global) {
        eprintln!("zklock: {line}");
        std::process::exit(EXIT_USAGE);
    }
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
            let e = match sasl_required(&cli.global, &e) {
                Some(line) => e.context(Explained(line)),
                None => e,
            };
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
