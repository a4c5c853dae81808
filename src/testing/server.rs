//! [`ZkServer`]: one standalone Apache ZooKeeper on 127.0.0.1.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use super::pki::{TestPki, STORE_PASSWORD};
use super::process::{
    conf_names_dir, four_letter_timeout, free_ports, is_bind_failure, log_len, log_since, log_tail,
    make_temp_dir, parse_mode, JvmSpec, ReservedPort, Watchdog, FIX_HINT,
};
pub(crate) use super::process::{JAAS_FILE, KRB5_FILE};
use super::{parse_mntr, FOUR_LETTER_TIMEOUT};

const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// How long [`ZkServer::start`] and [`ZkServer::restart`] wait for the server to serve.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How many fresh ports [`ZkServer::start`] tries when another process takes the one
/// it picked before the JVM binds it.
const PORT_ATTEMPTS: usize = 5;

/// The server's `tickTime`: sessions are checked for expiry every tick.
pub const TICK_TIME: Duration = Duration::from_millis(200);

/// The smallest session timeout the test servers grant (`minSessionTimeout`).
pub const MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(400);

/// The largest session timeout the test servers grant (`maxSessionTimeout`).
pub const MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(60);

/// One standalone Apache ZooKeeper server (`ZooKeeperServerMain` from Debian's
/// `zookeeper` package), started for a test.
///
/// - listens on 127.0.0.1 only, on a free port;
/// - keeps its data, `zoo.cfg` and log in a fresh directory under
///   [`std::env::temp_dir`], removed when the server is dropped — unless the thread is
///   panicking (a failing test), in which case the directory is kept and its path
///   printed;
/// - `tickTime` [`TICK_TIME`], session timeouts from [`MIN_SESSION_TIMEOUT`] to
///   [`MAX_SESSION_TIMEOUT`], so 1–2 s sessions and quick expiry work;
/// - every four-letter word enabled (`mntr`, `wchc`, `cons`, `stat`, `dump`, ...), no
///   limit on connections per client address, TTL nodes enabled, containers reaped
///   every second, no admin HTTP server.
///
/// The JVM runs under a watchdog (see the [module docs](super)): it is killed when this
/// handle is dropped and also when the test process exits in any way, so no test leaves
/// a JVM behind.
///
/// Tests that only need *a* server should share one per test binary with
/// [`shared_server`](super::shared_server) or [`test_servers`](super::test_servers);
/// tests that stop, restart or pause the server need their own `ZkServer`.
///
/// # Examples
///
/// ```no_run
/// use zklock::testing::ZkServer;
///
/// let mut server = ZkServer::start()?;
/// assert_eq!(server.four_letter("ruok")?, "imok");
/// let connect = server.connect_string(); // "127.0.0.1:PORT"
/// server.restart()?; // same port, same data: sessions survive a quick restart
/// # let _ = connect;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct ZkServer {
    port: u16,
    /// The `secureClientPort` of a server started by [`ZkServer::start_tls`].
    secure_port: Option<u16>,
    dir: PathBuf,
    watchdog: Option<Watchdog>,
    /// Its ports, reserved machine-wide while it lives (stopped and
    /// restarted too: its clients still name them); let go after the
    /// watchdog, so only once the server is gone.
    _ports: Vec<ReservedPort>,
}

/// Why one launch attempt failed.
enum LaunchError {
    /// Another process holds the port: try again (with another port, or later).
    PortTaken,
    /// Anything else: give up with this error.
    Fatal(io::Error),
}

impl ZkServer {
    /// Starts a server and waits (up to 30 s) until it serves requests.
    ///
    /// # Errors
    ///
    /// When ZooKeeper or Java is missing, or the server does not come up, the error
    /// says how to fix it (`make zookeeper`) and includes the tail of the server log.
    pub fn start() -> io::Result<ZkServer> {
        ZkServer::start_with(None)
    }

    #[cfg(feature = "testing")]
    /// Starts a server configured for TLS the way operators do: the Netty
    /// server factory (`serverCnxnFactory=...NettyServerCnxnFactory`), a
    /// `secureClientPort` on 127.0.0.1 ([`secure_connect_string`](Self::secure_connect_string))
    /// with `pki`'s server key store and trust store (PKCS12) and
    /// `ssl.clientAuth=need` (a client certificate issued by `pki`'s CA is
    /// required); the plain [`connect_string`](Self::connect_string) port stays
    /// open too (four-letter words, plaintext clients). ZooKeeper 3.8 offers TLS
    /// 1.2 only; with `tls13` it offers TLS 1.3 and 1.2 (`ssl.enabledProtocols`
    /// and `ssl.ciphersuites` with the TLS 1.3 suites). `pki` must outlive the
    /// server (its files are read at start and restart).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_tls(pki: &TestPki, tls13: bool) -> io::Result<ZkServer> {
        ZkServer::start_with(Some((pki, tls13)))
    }

    /// Starts a server that requires SASL, configured the way operators do:
    /// a JAAS `Server` section with ZooKeeper's `DigestLoginModule` listing
    /// `users` (name, password) in `jaas.conf` beside `zoo.cfg` (passed as
    /// `-Djava.security.auth.login.config`), the SASL authentication provider
    /// (`authProvider.sasl=...SASLAuthenticationProvider`) and
    /// `sessionRequireClientSASLAuth=true`: a client that does not
    /// authenticate gets `SESSIONCLOSEDREQUIRESASLAUTH` for its first request.
    /// DIGEST-MD5 clients authenticate as `sasl:<name>`. Four-letter words
    /// answer without authentication.
    ///
    /// # Errors
    /// As [`start`](Self::start); `InvalidInput` for a name that is not
    /// alphanumeric or a password with `"` or `\`.
    pub fn start_sasl(users: &[(&str, &str)]) -> io::Result<ZkServer> {
        let jaas = jaas_server_section(users)?;
        ZkServer::start_with_sasl(None, Some((jaas, SASL_CONFIG.to_string(), None)))
    }

    #[cfg(feature = "testing")]
    /// Starts a server that requires both TLS and SASL: the TLS port of
    /// [`start_tls`](Self::start_tls) (TLS 1.2, a client certificate from
    /// `pki` required) and the SASL settings of [`start_sasl`](Self::start_sasl)
    /// (DIGEST-MD5 `users`, SASL required on every connection). A client
    /// there authenticates twice: its certificate gives it an `x509:` id, its
    /// SASL exchange a `sasl:` id, and `CREATOR_ALL` names both.
    ///
    /// # Errors
    /// As [`start_sasl`](Self::start_sasl).
    pub fn start_tls_sasl(pki: &TestPki, users: &[(&str, &str)]) -> io::Result<ZkServer> {
        let jaas = jaas_server_section(users)?;
        ZkServer::start_with_sasl(
            Some((pki, false)),
            Some((jaas, SASL_CONFIG.to_string(), None)),
        )
    }

    #[cfg(feature = "testing")]
    /// Starts a server that requires SASL with Kerberos, configured the way
    /// operators do: a JAAS `Server` section with Java's `Krb5LoginModule`
    /// and the keytab of `zookeeper/localhost` from `kdc` (which must hold
    /// that principal), `-Djava.security.krb5.conf` naming `kdc`'s realm,
    /// the SASL provider, `sessionRequireClientSASLAuth=true`, and
    /// `kerberos.removeHostFromPrincipal` / `removeRealmFromPrincipal` (a
    /// client `alice@REALM` is `sasl:alice`).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_kerberos(kdc: &super::TestKdc) -> io::Result<ZkServer> {
        let principal = kdc.full_name("zookeeper/localhost");
        let jaas = format!(
            "Server {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  \
             useKeyTab=true\n  keyTab=\"{}\"\n  storeKey=true\n  useTicketCache=false\n  \
             principal=\"{principal}\";\n}};\n",
            kdc.keytab("zookeeper/localhost").display()
        );
        let cfg = format!(
            "{SASL_CONFIG}kerberos.removeHostFromPrincipal=true\n\
             kerberos.removeRealmFromPrincipal=true\n"
        );
        ZkServer::start_with_sasl(None, Some((jaas, cfg, Some(kdc.krb5_conf()))))
    }

    /// As [`start`](Self::start), granting session timeouts from `min` to
    /// `max` (`minSessionTimeout`, `maxSessionTimeout`) instead of
    /// [`MIN_SESSION_TIMEOUT`] to [`MAX_SESSION_TIMEOUT`]: how a test makes the
    /// server clamp a timeout asked for below its minimum without a session
    /// so short that a loaded machine lets it expire.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_with_session_timeouts(min: Duration, max: Duration) -> io::Result<ZkServer> {
        ZkServer::start_configured(None, None, (min, max))
    }

    fn start_with(tls: Option<(&TestPki, bool)>) -> io::Result<ZkServer> {
        ZkServer::start_with_sasl(tls, None)
    }

    /// `sasl`: the JAAS file, the `zoo.cfg` lines, the `krb5.conf` to use.
    fn start_with_sasl(
        tls: Option<(&TestPki, bool)>,
        sasl: Option<(String, String, Option<PathBuf>)>,
    ) -> io::Result<ZkServer> {
        ZkServer::start_configured(tls, sasl, (MIN_SESSION_TIMEOUT, MAX_SESSION_TIMEOUT))
    }

    /// [`start_with_sasl`](Self::start_with_sasl), granting session timeouts
    /// within `sessions` (min, max).
    fn start_configured(
        tls: Option<(&TestPki, bool)>,
        sasl: Option<(String, String, Option<PathBuf>)>,
        sessions: (Duration, Duration),
    ) -> io::Result<ZkServer> {
        let dir = make_temp_dir("zk")?;
        fs::create_dir(dir.join("data"))?;
        if let Some((jaas, _, krb5)) = &sasl {
            fs::write(dir.join(JAAS_FILE), jaas)?;
            if let Some(krb5) = krb5 {
                fs::copy(krb5, dir.join(KRB5_FILE))?;
            }
        }
        let mut last = 0;
        for _ in 0..PORT_ATTEMPTS {
            let reserved = free_ports(2)?;
            let port = reserved[0].get();
            let secure = tls.map(|(pki, tls13)| (reserved[1].get(), pki, tls13));
            write_config(&dir, port, secure, sessions)?;
            if let Some((_, cfg, _)) = &sasl {
                let mut f = fs::OpenOptions::new()
                    .append(true)
                    .open(dir.join("zoo.cfg"))?;
                io::Write::write_all(&mut f, cfg.as_bytes())?;
            }
            match launch(&dir, port, secure.map(|s| s.0)) {
                Ok(watchdog) => {
                    return Ok(ZkServer {
                        port,
                        secure_port: secure.map(|s| s.0),
                        dir,
                        watchdog: Some(watchdog),
                        _ports: reserved,
                    })
                }
                Err(LaunchError::PortTaken) => {
                    log::debug!("port {port} was taken before ZooKeeper bound it; retrying");
                    last = port;
                }
                // The directory stays: the error names its log.
                Err(LaunchError::Fatal(e)) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "ZooKeeper could not bind a free port in {PORT_ATTEMPTS} attempts (last {last}); \
                 log: {}",
                dir.join("zookeeper.log").display()
            ),
        ))
    }

    /// As [`start`](Self::start), on `port` of 127.0.0.1 (for `zklock server
    /// --port`): no other port is tried.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); `AddrInUse` when another process holds `port`.
    pub fn start_on_port(port: u16) -> io::Result<ZkServer> {
        let dir = make_temp_dir("zk")?;
        fs::create_dir(dir.join("data"))?;
        write_config(&dir, port, None, (MIN_SESSION_TIMEOUT, MAX_SESSION_TIMEOUT))?;
        match launch(&dir, port, None) {
            Ok(watchdog) => Ok(ZkServer {
                port,
                secure_port: None,
                dir,
                watchdog: Some(watchdog),
                // The caller's port: not the harness's pick to reserve.
                _ports: Vec::new(),
            }),
            Err(LaunchError::PortTaken) => {
                let _ = fs::remove_dir_all(&dir);
                Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("port {port} of 127.0.0.1 is already in use"),
                ))
            }
            Err(LaunchError::Fatal(e)) => Err(e),
        }
    }

    /// The connect string for clients: `"127.0.0.1:PORT"`.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The connect string of the TLS port of a server started by
    /// [`start_tls`](Self::start_tls): `"localhost:PORT"` (the host its
    /// certificate names); `None` for a plain server.
    pub fn secure_connect_string(&self) -> Option<String> {
        self.secure_port.map(|p| format!("localhost:{p}"))
    }

    /// The `secureClientPort` of a server started by [`start_tls`](Self::start_tls).
    pub fn secure_port(&self) -> Option<u16> {
        self.secure_port
    }

    /// The client port (the same across [`restart`](ZkServer::restart)s).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PID of the server's JVM, or `None` while it is stopped.
    pub fn pid(&self) -> Option<u32> {
        self.watchdog.as_ref().map(Watchdog::pid)
    }

    /// Whether the JVM is running (a paused server is running).
    pub fn is_running(&self) -> bool {
        self.watchdog.as_ref().is_some_and(Watchdog::alive)
    }

    /// The directory that holds `zoo.cfg`, the `data` directory and `zookeeper.log`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's log file (kept across restarts).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("zookeeper.log")
    }

    /// Kills the server (SIGKILL: what a crash looks like) and waits until the process
    /// is gone. Data and port are kept for [`restart`](ZkServer::restart). Does nothing
    /// if already stopped.
    ///
    /// Every write the server acknowledged survives: ZooKeeper hands its transaction
    /// log to the OS before replying (only `fsync` is off, which matters for power
    /// loss, not for a killed process).
    pub fn stop(&mut self) -> io::Result<()> {
        match self.watchdog.take() {
            Some(watchdog) => watchdog.finish("KILL", true).map(drop),
            None => Ok(()),
        }
    }

    /// Stops the server if it runs, then starts it again on the same port with the
    /// same data, and waits until it serves. Sessions whose timeout has not run out
    /// survive, as with a real server restart.
    ///
    /// # Errors
    ///
    /// If the port stays taken by another process for 15 s, or the server does not
    /// come up (the error includes the log tail).
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop()?;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match launch(&self.dir, self.port, self.secure_port) {
                Ok(watchdog) => {
                    self.watchdog = Some(watchdog);
                    return Ok(());
                }
                Err(LaunchError::Fatal(e)) => return Err(e),
                Err(LaunchError::PortTaken) if Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(200));
                }
                Err(LaunchError::PortTaken) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("port {} stayed taken; cannot restart ZooKeeper", self.port),
                    ))
                }
            }
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open but nothing is answered
    /// and no session expires — a hung server. [`resume`](ZkServer::resume) thaws it.
    pub fn pause(&mut self) -> io::Result<()> {
        let watchdog = self.running_watchdog()?;
        watchdog.freeze(true)
    }

    /// Thaws a server frozen by [`pause`](ZkServer::pause) (SIGCONT).
    pub fn resume(&mut self) -> io::Result<()> {
        let watchdog = self.running_watchdog()?;
        watchdog.freeze(false)
    }

    /// Sends a four-letter word (`ruok`, `srvr`, `stat`, `mntr`, `cons`, `wchc`,
    /// `wchs`, `dump`, `envi`, `conf`, ...) and returns the reply. Bounded: 5 s for the
    /// connect and for each read.
    pub fn four_letter(&self, command: &str) -> io::Result<String> {
        four_letter_timeout(&self.connect_string(), command, FOUR_LETTER_TIMEOUT)
    }

    /// The `mntr` counters (`zk_znode_count`, `zk_watch_count`,
    /// `zk_num_alive_connections`, `zk_ephemerals_count`, ...) as a map.
    pub fn mntr(&self) -> io::Result<HashMap<String, String>> {
        self.four_letter("mntr").map(|r| parse_mntr(&r))
    }

    /// The version this server says it runs (its `srvr` reply), e.g. 3.9.3 with
    /// `ZK_TEST_VERSION=3.9` (see [`test_version`](super::test_version)).
    ///
    /// # Errors
    /// The `srvr` exchange failed, or its reply has no version (`InvalidData`).
    pub fn version(&self) -> io::Result<super::ServerVersion> {
        let reply = self.four_letter("srvr")?;
        super::ServerVersion::from_srvr(&reply).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("no version in the `srvr` reply: {reply}"),
            )
        })
    }

    /// Marks the directory to be kept even if the process exits without dropping
    /// this handle (used for the shared server when a test panics).
    pub(crate) fn keep_on_exit(&self) {
        if let Some(watchdog) = &self.watchdog {
            let _ = watchdog.send("KEEP");
        }
    }

    fn running_watchdog(&self) -> io::Result<&Watchdog> {
        match &self.watchdog {
            Some(w) if w.alive() => Ok(w),
            _ => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!("the ZooKeeper server on port {} is stopped", self.port),
            )),
        }
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        let failing = thread::panicking();
        match self.watchdog.take() {
            // Without KEEP the watchdog removes the directory once the JVM is gone.
            Some(watchdog) => {
                let _ = watchdog.finish("KILL", failing);
            }
            None if !failing => {
                let _ = fs::remove_dir_all(&self.dir);
            }
            None => {}
        }
        if failing {
            eprintln!(
                "zklock::testing: kept the ZooKeeper server's directory for the failed test: \
                 {} (log: {})",
                self.dir.display(),
                self.log_path().display()
            );
        }
    }
}

fn write_config(
    dir: &Path,
    port: u16,
    tls: Option<(u16, &TestPki, bool)>,
    (min, max): (Duration, Duration),
) -> io::Result<()> {
    let mut config = format!(
        "tickTime={tick}\n\
         dataDir={data}\n\
         clientPort={port}\n\
         clientPortAddress=127.0.0.1\n\
         minSessionTimeout={min}\n\
         maxSessionTimeout={max}\n\
         maxClientCnxns=0\n\
         4lw.commands.whitelist=*\n\
         admin.enableServer=false\n",
        tick = TICK_TIME.as_millis(),
        data = dir.join("data").display(),
        min = min.as_millis(),
        max = max.as_millis(),
    );
    if let Some((secure_port, pki, tls13)) = tls {
        config.push_str(&tls_config(secure_port, pki, tls13));
    }
    fs::write(dir.join("zoo.cfg"), config)
}

/// The `zoo.cfg` lines of a server requiring SASL (see [`ZkServer::start_sasl`]).
pub(crate) const SASL_CONFIG: &str =
    "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
     sessionRequireClientSASLAuth=true\n";

/// A JAAS `Server` section with `DigestLoginModule` and `users`.
pub(crate) fn jaas_server_section(users: &[(&str, &str)]) -> io::Result<String> {
    let mut s =
        String::from("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required");
    for (name, password) in users {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("SASL user name {name:?}: letters, digits and _ only"),
            ));
        }
        if password.contains(['"', '\\', '\n']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the password of SASL user {name:?} has a quote, backslash or newline"),
            ));
        }
        s.push_str(&format!("\n  user_{name}=\"{password}\""));
    }
    s.push_str(";\n};\n");
    Ok(s)
}

/// The `zoo.cfg` lines of a TLS port (see [`ZkServer::start_tls`]).
pub(crate) fn tls_config(secure_port: u16, pki: &TestPki, tls13: bool) -> String {
    let mut config = format!(
        "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
         secureClientPort={secure_port}\n\
         secureClientPortAddress=127.0.0.1\n\
         ssl.keyStore.location={ks}\n\
         ssl.keyStore.password={STORE_PASSWORD}\n\
         ssl.keyStore.type=PKCS12\n\
         ssl.trustStore.location={ts}\n\
         ssl.trustStore.password={STORE_PASSWORD}\n\
         ssl.trustStore.type=PKCS12\n\
         ssl.clientAuth=need\n",
        ks = pki.server_key_store().display(),
        ts = pki.trust_store().display(),
    );
    if tls13 {
        config.push_str(
            "ssl.enabledProtocols=TLSv1.3,TLSv1.2\n\
             ssl.ciphersuites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,\
             TLS_CHACHA20_POLY1305_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,\
             TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n",
        );
    }
    config
}

/// Starts the JVM and waits until it serves on `port` with the data in `dir`.
/// Starts the standalone server of `dir` (its `zoo.cfg`) and waits until it
/// serves on `port` and, with `secure` (a TLS port: the Netty factory),
/// accepts connections there too.
fn launch(dir: &Path, port: u16, secure: Option<u16>) -> Result<Watchdog, LaunchError> {
    let netty = secure.is_some();
    let log = dir.join("zookeeper.log");
    let log_start = log_len(&log);
    let spec = JvmSpec {
        main_class: STANDALONE_MAIN,
        config: dir.join("zoo.cfg"),
        log: log.clone(),
        cleanup: Some(dir.to_path_buf()),
        cleanup_parent: None,
        netty,
    };
    let watchdog = Watchdog::spawn(&spec).map_err(LaunchError::Fatal)?;
    let addr = format!("127.0.0.1:{port}");
    let served =
        wait_serving(&watchdog, &addr, &dir.join("data"), &log, log_start).and_then(|()| {
            match secure {
                Some(secure) => wait_listening(&watchdog, secure, &log, log_start),
                None => Ok(()),
            }
        });
    match served {
        Ok(()) => Ok(watchdog),
        Err(e) => {
            let _ = watchdog.finish("KILL", true);
            Err(e)
        }
    }
}

/// Waits until the JVM under `watchdog` serves on `addr` with `data_dir` as its data,
/// or it dies, or [`START_TIMEOUT`] passes.
fn wait_serving(
    watchdog: &Watchdog,
    addr: &str,
    data_dir: &Path,
    log: &Path,
    log_start: u64,
) -> Result<(), LaunchError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let probe = Duration::from_secs(1);
    loop {
        if !watchdog.alive() {
            return Err(died(log, log_start));
        }
        let serving = four_letter_timeout(addr, "srvr", probe)
            .ok()
            .and_then(|r| parse_mode(&r))
            .is_some();
        if serving {
            if let Ok(conf) = four_letter_timeout(addr, "conf", probe) {
                if conf_names_dir(&conf, data_dir) {
                    return Ok(());
                }
                if conf.contains("dataDir=") {
                    // Another server answers on our port: ours cannot bind it.
                    return Err(LaunchError::PortTaken);
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(LaunchError::Fatal(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "ZooKeeper (pid {}) did not serve on {addr} within {} s; {FIX_HINT}.\n\
                     Log {}:\n{}",
                    watchdog.pid(),
                    START_TIMEOUT.as_secs(),
                    log.display(),
                    log_tail(log, 30)
                ),
            )));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the JVM under `watchdog` accepts TCP connections on its TLS
/// port `port`, or it dies, or [`START_TIMEOUT`] passes. The server binds
/// that port (the Netty factory's start-up) only after the plain port serves:
/// a test connecting at once was refused there under load.
fn wait_listening(
    watchdog: &Watchdog,
    port: u16,
    log: &Path,
    log_start: u64,
) -> Result<(), LaunchError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    loop {
        if !watchdog.alive() {
            return Err(died(log, log_start));
        }
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
            // Another process on the port would show as our bind failure.
            if is_bind_failure(&log_since(log, log_start)) {
                return Err(LaunchError::PortTaken);
            }
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(LaunchError::Fatal(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "ZooKeeper (pid {}) did not listen on its TLS port {port} within {} s; \
                     {FIX_HINT}.\nLog {}:\n{}",
                    watchdog.pid(),
                    START_TIMEOUT.as_secs(),
                    log.display(),
                    log_tail(log, 30)
                ),
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The JVM exited during start: a lost port race, or a fatal problem.
fn died(log: &Path, log_start: u64) -> LaunchError {
    let text = log_since(log, log_start);
    if is_bind_failure(&text) {
        return LaunchError::PortTaken;
    }
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(30)..].join("\n");
    LaunchError::Fatal(io::Error::other(format!(
        "ZooKeeper exited during start; {FIX_HINT}.\nLog {}:\n{tail}",
        log.display()
    )))
}
