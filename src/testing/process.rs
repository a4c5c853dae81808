//! Starting a ZooKeeper JVM under a watchdog, its files, and small helpers shared
//! by [`ZkServer`](super::ZkServer) and [`ZkEnsemble`](super::ZkEnsemble).
//!
//! # The watchdog
//!
//! Every JVM runs as the child of a tiny `sh` script (the watchdog) whose stdin is a
//! pipe from the test process. The watchdog prints the JVM's PID, then reads command
//! lines from the pipe: a signal name (`KILL`, `TERM`, `STOP`, `CONT`) is sent to the
//! JVM, `KEEP` marks the server's directory to be kept. When the pipe reaches EOF —
//! the handle closed it, or the test process exited, panicked, aborted or was killed,
//! since the kernel closes the write end in every case — the watchdog kills the JVM
//! with SIGKILL, reaps it, and removes the directory unless `KEEP` was sent.
//! So a server never outlives the test process, even one held in a `static` (statics
//! are never dropped), and no `unsafe` code is needed.
//!
//! While the watchdog is blocked reading, it does not reap a JVM that dies on its own:
//! the JVM stays a zombie, so its PID cannot be reused before the watchdog sends it a
//! signal. [`pid_alive`] treats a zombie as dead.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::reserve::{self, Hold, Name};
use super::version::{DEFAULT_CLASSPATH, NETTY_CLASSPATH};

/// How to install what is missing; ends every "cannot start" error.
pub(crate) const FIX_HINT: &str = "run `make zookeeper` (as root it installs Debian's \
     packages: `apt-get install -y zookeeper default-jre-headless libslf4j-java`), \
     or set ZK_TEST_CLASSPATH / JAVA_HOME, or point ZK_TEST_SERVERS at running servers";

/// The watchdog script. Arguments: `$1` log file, `$2` directory to remove on EOF
/// (empty: none), `$3` parent directory to `rmdir` afterwards if it is then empty
/// (empty: none), then the command line of the JVM.
const WATCHDOG: &str = r#"
log=$1; cleanup=$2; parent=$3; shift 3
exec 3<&0 </dev/null
"$@" >>"$log" 2>&1 3<&- &
pid=$!
echo "$pid"
exec >/dev/null
keep=
while read -r cmd <&3; do
  case $cmd in
    KEEP) keep=1 ;;
    KILL|TERM|STOP|CONT|INT) kill -s "$cmd" "$pid" 2>/dev/null ;;
  esac
done
kill -s KILL "$pid" 2>/dev/null
wait "$pid"
if [ -z "$keep" ] && [ -n "$cleanup" ]; then
  rm -rf -- "$cleanup"
  if [ -n "$parent" ]; then rmdir -- "$parent" 2>/dev/null; fi
fi
exit 0
"#;

/// The JAAS file a SASL server reads (beside `zoo.cfg`; see
/// [`JvmSpec`]).
pub(crate) const JAAS_FILE: &str = "jaas.conf";

/// The `krb5.conf` a Kerberos server reads (beside `zoo.cfg`).
pub(crate) const KRB5_FILE: &str = "krb5.conf";

/// `-Djava.security.auth.login.config=...` when a JAAS file
/// ([`JAAS_FILE`]) lies beside `config` (a server
/// started by [`ZkServer::start_sasl`](super::ZkServer::start_sasl)).
/// And `-Djava.security.krb5.conf=...` when a `krb5.conf` lies there
/// ([`ZkServer::start_kerberos`](super::ZkServer::start_kerberos)).
fn jaas_option(config: &Path) -> Vec<String> {
    let jaas = config.with_file_name(JAAS_FILE);
    let krb5 = config.with_file_name(KRB5_FILE);
    let mut options = Vec::new();
    if jaas.exists() {
        options.push(format!(
            "-Djava.security.auth.login.config={}",
            jaas.display()
        ));
    }
    if krb5.exists() {
        options.push(format!("-Djava.security.krb5.conf={}", krb5.display()));
    }
    // Read-only mode is a system property, not a `zoo.cfg` key (a key
    // there becomes `zookeeper.readonlymode.enabled`, which nothing reads).
    if config.with_file_name(READ_ONLY_MARK).exists() {
        options.push("-Dreadonlymode.enabled=true".to_string());
    }
    options
}

/// A file of this name beside a member's `zoo.cfg` starts it with
/// `-Dreadonlymode.enabled=true` (see `ZkEnsemble::start_read_only`).
pub(crate) const READ_ONLY_MARK: &str = "readonlymode.enabled";

/// What a JVM is started with.
#[derive(Debug, Clone)]
pub(crate) struct JvmSpec {
    /// `org.apache.zookeeper.server.ZooKeeperServerMain` or `...quorum.QuorumPeerMain`.
    pub(crate) main_class: &'static str,
    /// The `zoo.cfg` to pass.
    pub(crate) config: PathBuf,
    /// Where stdout and stderr of the JVM go (appended across restarts).
    pub(crate) log: PathBuf,
    /// Removed by the watchdog when its pipe closes without `KEEP`.
    pub(crate) cleanup: Option<PathBuf>,
    /// `rmdir`-ed (if empty) after `cleanup` is removed.
    pub(crate) cleanup_parent: Option<PathBuf>,
    /// Netty's codec jars on the classpath too ([`NETTY_CLASSPATH`]): the Netty
    /// server factory (TLS) needs them.
    pub(crate) netty: bool,
}

/// A running (or dead, not yet reaped) JVM under its watchdog.
#[derive(Debug)]
pub(crate) struct Watchdog {
    child: Child,
    stdin: Option<ChildStdin>,
    pid: u32,
}

impl Watchdog {
    /// Starts the JVM described by `spec` under a watchdog.
    pub(crate) fn spawn(spec: &JvmSpec) -> io::Result<Watchdog> {
        let (mut classpath, has_netty) = classpath()?;
        if spec.netty && !has_netty {
            classpath = format!("{classpath}:{NETTY_CLASSPATH}");
        }
        let java = java_binary();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)?;
        let path_arg = |p: &Option<PathBuf>| {
            p.as_ref()
                .map(|p| p.as_os_str().to_owned())
                .unwrap_or_default()
        };
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(WATCHDOG)
            .arg("zklock-zk-watchdog")
            .arg(&spec.log)
            .arg(path_arg(&spec.cleanup))
            .arg(path_arg(&spec.cleanup_parent))
            .arg(&java)
            .args(jvm_options())
            .args(jaas_option(&spec.config))
            .arg("-cp")
            .arg(&classpath)
            .arg(spec.main_class)
            .arg(&spec.config);
        Watchdog::spawn_command(command, log, &spec.log)
    }

    /// Runs `command` (the watchdog script with its arguments, as built by
    /// [`spawn`](Self::spawn) or [`spawn_program`](Self::spawn_program)) and
    /// reads the PID it reports.
    fn spawn_command(mut command: Command, log: File, log_path: &Path) -> io::Result<Watchdog> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot run `sh` for the ZooKeeper watchdog: {e}"),
                )
            })?;
        let stdin = child.stdin.take();
        let mut line = String::new();
        let read = match child.stdout.take() {
            Some(out) => BufReader::new(out).read_line(&mut line),
            None => Ok(0),
        };
        let pid = match read.ok().and_then(|_| line.trim().parse::<u32>().ok()) {
            Some(pid) => pid,
            None => {
                drop(stdin);
                let _ = child.wait();
                return Err(io::Error::other(format!(
                    "the ZooKeeper watchdog did not report a PID (got {line:?}); log: {}",
                    log_path.display()
                )));
            }
        };
        Ok(Watchdog { child, stdin, pid })
    }

    /// Any other program (`program args`, with `env`) under the same watchdog:
    /// killed when the handle or the test process goes, `cleanup` removed
    /// then (e.g. the test KDC).
    pub(crate) fn spawn_program(
        program: &str,
        args: &[&str],
        env: &[(&str, &Path)],
        log_path: &Path,
        cleanup: &Path,
    ) -> io::Result<Watchdog> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(WATCHDOG)
            .arg("zklock-watchdog")
            .arg(log_path)
            .arg(cleanup)
            .arg("")
            .arg(program)
            .args(args);
        for (k, v) in env {
            command.env(k, v);
        }
        Watchdog::spawn_command(command, log, log_path)
    }

    /// The JVM's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the JVM is still running (a zombie counts as dead).
    pub(crate) fn alive(&self) -> bool {
        pid_alive(self.pid)
    }

    /// Sends one command line to the watchdog (`KILL`, `TERM`, `STOP`, `CONT`, `KEEP`).
    pub(crate) fn send(&self, command: &str) -> io::Result<()> {
        match &self.stdin {
            Some(stdin) => {
                let mut stdin: &ChildStdin = stdin;
                stdin.write_all(format!("{command}\n").as_bytes())
            }
            None => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the ZooKeeper watchdog was already closed",
            )),
        }
    }

    /// Freezes (`stop = true`, SIGSTOP) or thaws (SIGCONT) the JVM and waits (up to
    /// 5 s) until the kernel reports the new state: the watchdog delivers the signal
    /// asynchronously, and a test must not race it.
    pub(crate) fn freeze(&self, stop: bool) -> io::Result<()> {
        self.send(if stop { "STOP" } else { "CONT" })?;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match pid_state(self.pid) {
                None => {
                    // No /proc: give the watchdog a moment.
                    thread::sleep(Duration::from_millis(200));
                    return Ok(());
                }
                Some('Z' | 'X') => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotConnected,
                        format!("ZooKeeper pid {} has exited", self.pid),
                    ))
                }
                Some(state) if (state == 'T') == stop => return Ok(()),
                Some(_) if Instant::now() >= deadline => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "ZooKeeper pid {} did not take SIG{}",
                            self.pid,
                            if stop { "STOP" } else { "CONT" }
                        ),
                    ))
                }
                Some(_) => thread::sleep(Duration::from_millis(5)),
            }
        }
    }

    /// Waits (bounded) until the JVM has exited, polling its state.
    pub(crate) fn wait_dead(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.alive() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ends the JVM and the watchdog and waits for both. With `keep`, the directory
    /// stays; without, the watchdog removes it (if it was given one).
    pub(crate) fn finish(mut self, signal: &str, keep: bool) -> io::Result<ExitStatus> {
        if keep {
            let _ = self.send("KEEP");
        }
        let _ = self.send(signal);
        if signal != "KILL" && !self.wait_dead(Duration::from_secs(10)) {
            log::warn!(
                "ZooKeeper pid {} ignored SIG{signal} for 10 s; killing it",
                self.pid
            );
        }
        // EOF: the watchdog SIGKILLs the JVM if still needed, reaps it and exits.
        self.stdin = None;
        self.child.wait()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if self.stdin.take().is_some() {
            let _ = self.child.wait();
        }
    }
}

/// The state letter of `pid` from `/proc/<pid>/stat` (`R`, `S`, `T` stopped, `Z`
/// zombie, ...), `Some('X')` if there is no such process, `None` without `/proc`.
pub(crate) fn pid_state(pid: u32) -> Option<char> {
    if !Path::new("/proc/self/stat").exists() {
        return None;
    }
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].trim_start().chars().next()),
        Err(_) => Some('X'),
    }
}

/// Whether `pid` names a live process (not a zombie). Linux reads `/proc`; elsewhere
/// `kill -0` (which counts a zombie as alive).
pub fn pid_alive(pid: u32) -> bool {
    match pid_state(pid) {
        Some(state) => !matches!(state, 'Z' | 'X' | 'x'),
        None => Command::new("kill")
            .arg("-0")
            .arg(pid.to_string())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false),
    }
}

/// The servers' classpath ([`super::version::server_classpath`]), checked
/// for Debian's jars when it is Debian's; the flag says it has Netty's jars.
fn classpath() -> io::Result<(String, bool)> {
    let (cp, has_netty) = super::version::server_classpath()?;
    if cp == DEFAULT_CLASSPATH {
        for jar in DEFAULT_CLASSPATH.split(':') {
            if !Path::new(jar).exists() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("Apache ZooKeeper is not installed ({jar} is missing): {FIX_HINT}"),
                ));
            }
        }
    }
    Ok((cp, has_netty))
}

/// `ZK_TEST_FORCE_SYNC=yes`: every server the harness starts from then on
/// syncs its transaction log to disk before it answers a write
/// (`zookeeper.forceSync=yes`, ZooKeeper's default), as in production; by
/// default the harness's servers do not (`no`), which makes the tests fast.
/// For the benchmarks' fsync figures (`docs/benchmarks.md`).
pub const FORCE_SYNC_ENV: &str = "ZK_TEST_FORCE_SYNC";

/// Whether [`FORCE_SYNC_ENV`] asks for fsync (`yes`, `true` or `1`).
pub(crate) fn force_sync() -> bool {
    std::env::var(FORCE_SYNC_ENV)
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "yes" | "true" | "1"))
}

fn java_binary() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) if !home.is_empty() => Path::new(&home).join("bin").join("java"),
        _ => PathBuf::from("java"),
    }
}

/// A light, quick-starting JVM, plus the system properties the tests need: TTL nodes
/// (`extendedTypesEnabled`), containers reaped within a second, no fsync (data
/// survives a killed process, only not a power cut; `$ZK_TEST_FORCE_SYNC=yes`
/// turns it on, see [`FORCE_SYNC_ENV`]), no admin HTTP server.
fn jvm_options() -> Vec<&'static str> {
    let force_sync = if force_sync() {
        "-Dzookeeper.forceSync=yes"
    } else {
        "-Dzookeeper.forceSync=no"
    };
    vec![
        "-Xmx256m",
        "-Xss512k",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        "-Djava.net.preferIPv4Stack=true",
        "-Dzookeeper.extendedTypesEnabled=true",
        "-Dznode.container.checkIntervalMs=1000",
        force_sync,
        "-Dzookeeper.admin.enableServer=false",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
    ]
}

/// A new, empty directory under the system temp dir, unique to this process and call.
pub(crate) fn make_temp_dir(kind: &str) -> io::Result<PathBuf> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    loop {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("zklock-{kind}-{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot create {}: {e}", dir.display()),
                ))
            }
        }
    }
}

/// The lowest port picked by [`free_ports`].
const PICKED_PORTS_FLOOR: u16 = 10_000;

/// A TCP port of 127.0.0.1 picked for a test server, reserved machine-wide
/// ([`reserve`](super::reserve)) while this value lives: no test process of
/// the machine picks it again meanwhile, also while its server is stopped
/// or restarting. An owner keeps it as long as clients or peers may name
/// the port (declared after the server's watchdog, so let go only once the
/// server is gone).
#[derive(Debug)]
pub(crate) struct ReservedPort {
    port: u16,
    _hold: Hold,
}

impl ReservedPort {
    /// The port.
    pub(crate) fn get(&self) -> u16 {
        self.port
    }
}

/// `count` distinct free TCP ports on 127.0.0.1, each reserved machine-wide
/// for as long as its [`ReservedPort`] lives (the server binds it a moment
/// later; a lost race with a process outside the harness is retried by the
/// caller).
///
/// Picked at random **below the kernel's ephemeral range**
/// (`/proc/sys/net/ipv4/ip_local_port_range`, from 10000 up), never from it:
/// a port the kernel handed out for `bind(0)` is free again once let go, and
/// the kernel hands it on to the next outgoing connection as readily, and
/// under load the tests make thousands of those. One took a member's
/// election port between this pick and the JVM's bind; the ensemble lost that
/// member a moment later. The kernel never hands out a port below the range,
/// so only a process binding that very port by number can race the JVM, and
/// the reservation keeps every test process of the machine from doing so
/// while the port's owner lives: a restarted server's port was once taken by
/// another lane's server in the seconds of its restart, and its client,
/// reconnecting, was told by that stranger that its session had expired.
/// Where the range leaves no room below it, ports come from the kernel as
/// before (reserved too).
pub(crate) fn free_ports(count: usize) -> io::Result<Vec<ReservedPort>> {
    let low = ephemeral_low();
    let mut picked: Vec<(ReservedPort, TcpListener)> = Vec::with_capacity(count);
    if low > PICKED_PORTS_FLOOR + 1_000 {
        let span = u64::from(low - PICKED_PORTS_FLOOR);
        let mut tries = 0;
        while picked.len() < count && tries < 64 * count {
            tries += 1;
            let port = PICKED_PORTS_FLOOR + (crate::util::random_u64() % span) as u16;
            if let Some(taken) = take_port(port)? {
                picked.push(taken);
            }
        }
    }
    let mut tries = 0;
    while picked.len() < count {
        tries += 1;
        let l = TcpListener::bind("127.0.0.1:0")?;
        let port = l.local_addr()?.port();
        drop(l);
        match take_port(port)? {
            Some(taken) => picked.push(taken),
            None if tries < 64 * count => {}
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("no {count} free ports on 127.0.0.1"),
                ))
            }
        }
    }
    Ok(picked.into_iter().map(|(port, _listener)| port).collect())
}

/// Reserves `port` and checks that it is free now: the reservation and a
/// listener holding it until the caller has all it needs, or `None`.
fn take_port(port: u16) -> io::Result<Option<(ReservedPort, TcpListener)>> {
    let Some(hold) = reserve::hold(Name::Port(port))? else {
        return Ok(None); // another test server's, stopped or not
    };
    Ok(TcpListener::bind(("127.0.0.1", port))
        .ok()
        .map(|l| (ReservedPort { port, _hold: hold }, l)))
}

/// The first port of the kernel's ephemeral range (Linux's default, 32768,
/// when it cannot be read).
fn ephemeral_low() -> u16 {
    fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// The last `lines` lines of a log file, for error messages.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(path) {
        let mut bytes = Vec::new();
        let _ = f.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    all[start..].join("\n")
}

/// The log's text from byte `offset` on (what one JVM run wrote).
pub(crate) fn log_since(path: &Path, offset: u64) -> String {
    fs::read(path)
        .map(|b| {
            let start = usize::try_from(offset).unwrap_or(usize::MAX).min(b.len());
            String::from_utf8_lossy(&b[start..]).into_owned()
        })
        .unwrap_or_default()
}

/// The size of the log now, for [`log_since`].
pub(crate) fn log_len(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Whether log text shows the JVM failed to bind one of its ports.
pub(crate) fn is_bind_failure(log_text: &str) -> bool {
    log_text.contains("BindException") || log_text.contains("Address already in use")
}

/// Sends a four-letter word to `addr` and reads the reply to EOF, within `timeout`
/// for the connect and for each read.
pub(crate) fn four_letter_timeout(
    addr: &str,
    command: &str,
    timeout: Duration,
) -> io::Result<String> {
    if command.len() != 4 || !command.bytes().all(|b| b.is_ascii_lowercase()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a four-letter word: {command:?}"),
        ));
    }
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    let mut last = io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{addr:?} resolves to no address"),
    );
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(mut stream) => {
                stream.set_read_timeout(Some(timeout))?;
                stream.set_write_timeout(Some(timeout))?;
                stream.write_all(command.as_bytes())?;
                let _ = stream.shutdown(Shutdown::Write);
                let mut reply = Vec::new();
                stream.read_to_end(&mut reply)?;
                return Ok(String::from_utf8_lossy(&reply).into_owned());
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The `Mode:` line of a `srvr` reply (`standalone`, `leader`, `follower`,
/// `observer`), or `None` when the server is not serving.
pub(crate) fn parse_mode(srvr: &str) -> Option<String> {
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(|m| m.trim().to_string())
}

/// Whether a `conf` reply names `data_dir` as the server's data directory: tells our
/// server apart from another one that grabbed the port first.
pub(crate) fn conf_names_dir(conf: &str, data_dir: &Path) -> bool {
    let want = data_dir.to_string_lossy();
    conf.lines()
        .filter_map(|l| l.strip_prefix("dataDir="))
        .any(|d| d.starts_with(want.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_and_below_the_ephemeral_range() {
        let low = ephemeral_low();
        let reserved = free_ports(40).unwrap();
        let ports: Vec<u16> = reserved.iter().map(ReservedPort::get).collect();
        let distinct: std::collections::HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), 40, "{ports:?}");
        if low > PICKED_PORTS_FLOOR + 1_000 {
            assert!(
                ports
                    .iter()
                    .all(|&p| (PICKED_PORTS_FLOOR..low).contains(&p)),
                "{ports:?} (ephemeral from {low})"
            );
        }
        // Free: each binds (its owner's server will)...
        for &p in &ports {
            TcpListener::bind(("127.0.0.1", p)).unwrap();
        }
        // ...and none is picked again while reserved, the kernel's or not.
        for _ in 0..50 {
            for again in free_ports(40).unwrap() {
                assert!(
                    !distinct.contains(&again.get()),
                    "{} picked twice",
                    again.get()
                );
            }
        }
        for p in &ports {
            assert!(reserve::hold(Name::Port(*p)).unwrap().is_none(), "{p}");
        }
        // (Let go when dropped: `reserve`'s own test; here another lane may
        // take a port the moment it is let go.)
        drop(reserved);
    }
}
