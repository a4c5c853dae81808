//! Real-ZooKeeper test harness (feature `testing`): servers, ensembles and a
//! fault-injecting proxy for zklock's tests, examples and benchmarks.
//!
//! zklock is tested against Apache ZooKeeper only — never a mock. This module starts
//! Debian's ZooKeeper 3.8 (`/usr/share/java/zookeeper.jar`, installed by
//! `make zookeeper`), or 3.6.3 / 3.9.3 with `ZK_TEST_VERSION=3.6|3.9` (see
//! [Server versions](#server-versions)), on 127.0.0.1:
//!
//! | item | what |
//! |---|---|
//! | [`ZkServer`] | one standalone server: free port, temp data dir, 200 ms tick; `stop`, `restart` (same port and data), `pause`/`resume`, four-letter words |
//! | [`shared_server`], [`test_servers`] | one server per test binary, started on first use; `$ZK_TEST_SERVERS` overrides |
//! | [`ZkEnsemble`] | three `QuorumPeerMain` servers: `kill(i)`, `restart(i)`, `leader()`, `wait_for_quorum` |
//! | [`ZkServer::start_tls`], [`TestPki`] | a server with a TLS port (Netty, `ssl.clientAuth=need`) and certificates, keys and stores made at test time |
//! | [`FaultProxy`] | a TCP proxy in front of a server: `stall` (partition), `cut`, `reset`, `delay`, `pass` |
//! | [`expire_session`], [`close_session`] | expire a session on the server (a second handle on its id and password, closed, until the server confirms), and wait until its handle learned it: Curator's `KillSession` |
//! | [`ScratchDir`], [`remove_at_exit`] | a temp directory removed on drop (kept for a failing test), or when the process ends for one a `static` holds: the only way tests make one |
//! | [`four_letter`], [`parse_mntr`], [`unique_root`] | helpers |
//! | [`test_version`], [`ServerVersion`], [`ZkServer::version`], [`server_version`], [`require_version`] | which server version runs, and skipping a test a server is too old for |
//!
//! The module is built only with the `testing` feature; zklock's own tests, examples
//! and benches get it through a dev-dependency on the crate itself.
//!
//! # Sharing a server
//!
//! Starting a JVM takes about a second, so a test binary shares one server:
//! [`test_servers`] returns its connect string. Each test works under its own root
//! znode ([`unique_root`]) so tests run in parallel. If `$ZK_TEST_SERVERS` is set
//! (e.g. `ZK_TEST_SERVERS=10.0.0.5:2181,10.0.0.6:2181 make test`), [`test_servers`]
//! returns it and starts nothing. Tests that stop, restart, pause or partition a
//! server must start their own [`ZkServer`] / [`ZkEnsemble`] / [`FaultProxy`]:
//! those always run locally, whatever `$ZK_TEST_SERVERS` says.
//!
//! # No leftover JVMs: the watchdog
//!
//! Rust never drops a `static`, and a test process may panic, abort or be killed.
//! So every JVM is started by a tiny `sh` watchdog whose stdin is a pipe from the test
//! process. The watchdog reports the JVM's PID and forwards the commands the handle
//! writes (`KILL`, `STOP`, `CONT`, `KEEP`); when the pipe closes — the handle was
//! dropped, or the test process ended in *any* way, since the kernel closes the pipe
//! then — it kills the JVM, reaps it and removes the server's directory. No unsafe
//! code and no signal handlers are involved.
//!
//! # Failing tests keep their logs
//!
//! A [`ZkServer`] or [`ZkEnsemble`] dropped while its thread panics keeps its
//! directory (config, data, `zookeeper.log`) and prints its path. The shared server
//! installs a panic hook that does the same: after a panic on a named thread other
//! than the client's own (`zklock-*`, where a watcher may panic on purpose) its
//! directory is kept when the process exits, and the path is printed once. A
//! [`ScratchDir`] dropped while its thread panics is kept the same way.
//!
//! # Server versions
//!
//! `ZK_TEST_VERSION=3.6|3.8|3.9` (default `3.8`, Debian's) picks the jars of every
//! server the harness starts, of the tests' Java clients
//! ([`java_client_classpath`]) and of their Curator participants
//! ([`curator_classpath`]: Curator 2.13.0 with 3.6, Debian's 5.4 with 3.8, 5.7.1
//! with 3.9; `ZK_TEST_CURATOR=3.6|3.8|3.9` takes another version's Curator).
//! 3.6.3 and 3.9.3 come from `make zookeeper-versions` (PyPI's pyspark source
//! packages, downloaded once); without it the server start fails with an error
//! naming that target. `$ZK_TEST_CLASSPATH` still names the server jars directly
//! and wins over `ZK_TEST_VERSION` for the server.
//!
//! A test that needs a newer server asks for it and returns early, with the
//! reason printed, on an older one:
//!
//! ```no_run
//! if !zklock::testing::require_version(3, 9) {
//!     return; // prints "<test>: skipped: needs ZooKeeper 3.9 or later, the server is 3.6.3"
//! }
//! ```
//!
//! [`server_version`] is the version of the tests' server ([`test_servers`], asked
//! `srvr` once); [`ZkServer::version`] asks one server. `docs/server-versions.md`
//! lists what each version has and how it is tested.
//!
//! # fsync
//!
//! The harness's servers do not sync their transaction log to disk
//! (`zookeeper.forceSync=no`): a killed server keeps its data, a power cut
//! would not, and the tests run fast. `ZK_TEST_FORCE_SYNC=yes`
//! ([`FORCE_SYNC_ENV`]) starts every server with ZooKeeper's default, fsync
//! before each write is answered (the benchmarks' fsync figures).
//!
//! # Requirements and errors
//!
//! Java and Debian's `zookeeper` package (or `$ZK_TEST_CLASSPATH` naming the
//! ZooKeeper jars; `$JAVA_HOME` picks the JVM). When a server cannot start, the
//! error says what to install and shows the tail of the server log; no test is
//! skipped silently.
//!
//! # Examples
//!
//! ```no_run
//! use zklock::testing::{test_servers, unique_root};
//!
//! let servers = test_servers(); // "127.0.0.1:PORT", or $ZK_TEST_SERVERS
//! let root = unique_root("my_test"); // "/zklock-test/my_test-<pid>-<n>"
//! // connect a client to `servers` and work under `root` ...
//! # let _ = (servers, root);
//! ```

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Once, OnceLock};
use std::time::Duration;

// The harness proper (feature `testing`); the throwaway server alone
// (feature `server`, the `zklock server` command) needs none of it.
#[cfg(feature = "testing")]
mod ensemble;
#[cfg(feature = "testing")]
mod expire;
#[cfg(feature = "testing")]
mod ids;
#[cfg(feature = "testing")]
mod kdc;
// Keys and stores for a TLS server: built with the server, exported with
// the harness.
#[cfg_attr(not(feature = "testing"), allow(dead_code, unreachable_pub))]
mod pki;
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
mod process;
#[cfg(feature = "testing")]
mod proxy;
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
mod reserve;
mod scratch;
mod server;
mod version;

#[cfg(feature = "testing")]
pub use ensemble::{ZkEnsemble, SUPER_AUTH, SUPER_DIGEST};
#[cfg(feature = "testing")]
pub use expire::{close_session, expire_session};
#[cfg(feature = "testing")]
pub use kdc::{TestKdc, TEST_REALM};
#[cfg(feature = "testing")]
pub use pki::{ClientCert, TestPki, STORE_PASSWORD};
pub use process::{pid_alive, FORCE_SYNC_ENV};
#[cfg(all(feature = "testing", feature = "tls"))]
pub use proxy::TlsFront;
#[cfg(feature = "testing")]
pub use proxy::{FaultProxy, ProxyMode, QuorumCounts};
pub use scratch::{remove_at_exit, ScratchDir};
pub use server::{ZkServer, MAX_SESSION_TIMEOUT, MIN_SESSION_TIMEOUT, TICK_TIME};
pub use version::{
    curator_classpath, curator_version, java_client_classpath, require_version, server_classpath,
    server_version, test_version, versions_dir, ServerVersion, NETTY_CLASSPATH, TEST_VERSIONS,
    VERSIONS_DIR_ENV, VERSION_ENV,
};

/// The environment variable naming existing servers for the tests:
/// `ZK_TEST_SERVERS=host:port[,host:port...]`. See [`test_servers`].
pub const SERVERS_ENV: &str = "ZK_TEST_SERVERS";

/// Connect and read bound of [`four_letter`] and the `four_letter` methods.
pub(crate) const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(5);

static SHARED: OnceLock<Result<ZkServer, String>> = OnceLock::new();

/// The servers an example, a demo or a benchmark runs against: `$ZK_SERVERS`
/// when it is set, else a throwaway local server started here (announced on
/// stdout), kept running while the returned `ZkServer` lives.
///
/// # Errors
/// Starting the local server failed (no Java or ZooKeeper jars: run `make
/// zookeeper`).
pub fn example_servers() -> io::Result<(Option<ZkServer>, String)> {
    match std::env::var("ZK_SERVERS") {
        Ok(s) if !s.trim().is_empty() => Ok((None, s.trim().to_string())),
        _ => {
            let server = ZkServer::start().map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("starting a throwaway ZooKeeper (try `make zookeeper`): {e}"),
                )
            })?;
            let cs = server.connect_string();
            println!("started a throwaway ZooKeeper at {cs}");
            Ok((Some(server), cs))
        }
    }
}

/// The connect string the tests of this binary should use: `$ZK_TEST_SERVERS` if
/// set (and not empty), otherwise the [`shared_server`]'s, started on first call.
///
/// # Panics
///
/// If the shared server cannot start; the message says how to fix it (a test
/// harness fails loudly rather than skipping).
pub fn test_servers() -> String {
    match std::env::var(SERVERS_ENV) {
        Ok(servers) if !servers.trim().is_empty() => servers.trim().to_string(),
        _ => shared_server().connect_string(),
    }
}

/// The ZooKeeper server shared by every test of this test binary, started on the
/// first call (about a second) and killed when the process exits (see the
/// [module docs](self)). Always a local server, whatever `$ZK_TEST_SERVERS` says: use
/// it when a test reads the server's four-letter words (`mntr`, `wchc`, `cons`).
///
/// Borrowed `&'static`: it cannot be stopped or restarted — tests that do that start
/// their own [`ZkServer`].
///
/// # Panics
///
/// If the server cannot start; the message says how to fix it. See
/// [`try_shared_server`] for a `Result`.
pub fn shared_server() -> &'static ZkServer {
    match try_shared_server() {
        Ok(server) => server,
        Err(e) => panic!("zklock::testing: cannot start the shared ZooKeeper server: {e}"),
    }
}

/// [`shared_server`], returning the start error instead of panicking. A failed start
/// is not retried: every later call returns the same error.
pub fn try_shared_server() -> io::Result<&'static ZkServer> {
    let result = SHARED.get_or_init(|| {
        let server = ZkServer::start().map_err(|e| e.to_string())?;
        install_keep_on_panic_hook();
        Ok(server)
    });
    match result {
        Ok(server) => Ok(server),
        Err(message) => Err(io::Error::other(message.clone())),
    }
}

/// After a panic that may fail a test, keep the shared server's directory when the
/// process exits, and say where it is (once). The previous hook still runs.
///
/// A panic on an unnamed thread or on one of the client's own threads (`zklock-*`:
/// a watcher or listener panicking on purpose, which the client catches) does not
/// count: a test it fails panics on its own thread too (libtest names it after the
/// test), when it joins the thread or sees the damage. Without this, every run of a
/// binary with a deliberately panicking watcher left the server's directory behind.
fn install_keep_on_panic_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            static TOLD: AtomicBool = AtomicBool::new(false);
            let may_fail_a_test = std::thread::current()
                .name()
                .is_some_and(|n| !n.starts_with("zklock-"));
            if !may_fail_a_test {
                previous(info);
                return;
            }
            if let Some(Ok(server)) = SHARED.get() {
                server.keep_on_exit();
                if !TOLD.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "zklock::testing: a test panicked; the shared ZooKeeper server's \
                         directory is kept: {} (log: {})",
                        server.dir().display(),
                        server.log_path().display()
                    );
                }
            }
            previous(info);
        }));
    });
}

/// Sends a four-letter word (`ruok`, `srvr`, `stat`, `mntr`, `cons`, `wchc`, `dump`,
/// `conf`, ...) to one server, `addr` = `"host:port"`, and returns the whole reply.
/// Bounded: 5 s for the connect and for each read.
///
/// The server must whitelist the word (`4lw.commands.whitelist`); the harness's
/// servers allow every word.
///
/// # Errors
///
/// `InvalidInput` if `command` is not four lower-case letters; any I/O error of the
/// exchange (`ConnectionRefused`, `TimedOut`/`WouldBlock`, ...).
pub fn four_letter(addr: &str, command: &str) -> io::Result<String> {
    process::four_letter_timeout(addr, command, FOUR_LETTER_TIMEOUT)
}

/// Parses a `mntr` reply (`key<TAB>value` lines) into a map.
///
/// ```
/// let m = zklock::testing::parse_mntr("zk_version\t3.8.0\nzk_znode_count\t5\n");
/// assert_eq!(m["zk_znode_count"], "5");
/// ```
pub fn parse_mntr(reply: &str) -> HashMap<String, String> {
    reply
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Polls `condition` every 10 ms until it holds (`true`) or `timeout` passes
/// (`false`): for conditions seen through another session or the server, where
/// there is no event to wait on. Never a fixed sleep.
///
/// ```
/// use std::time::Duration;
/// use zklock::testing::eventually;
/// let mut n = 0;
/// assert!(eventually(Duration::from_secs(1), || { n += 1; n == 3 }));
/// assert!(!eventually(Duration::from_millis(30), || false));
/// ```
pub fn eventually(timeout: std::time::Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// [`eventually`], asserting: panics with `timed out after {timeout:?}: {what}`
/// when `condition` does not hold in time.
///
/// # Panics
/// When `timeout` passes first.
#[track_caller]
pub fn wait_until(timeout: std::time::Duration, what: &str, condition: impl FnMut() -> bool) {
    assert!(
        eventually(timeout, condition),
        "timed out after {timeout:?}: {what}"
    );
}

/// How many times the calling thread has been woken in the crate's one wait
/// engine (every lock's, recipe's and tracker's wait): each return from
/// blocking in it counts one (a wake-up, a deadline, a spurious wake-up),
/// a wait that finds its wake-up already there counts none. Exact and per
/// thread: read it on the waiting thread before and after a wait to count
/// how often that wait woke up (an idle waiter: never, until what it waits
/// for happens).
#[cfg(feature = "testing")]
pub fn engine_wake_ups() -> u64 {
    crate::engine::hook::wake_ups_on_this_thread()
}

/// A root znode path no other test (in this or another process) uses:
/// `/zklock-test/<name>-<pid>-<n>`, `n` counting calls in this process. Slashes in
/// `name` become `_`, so the root is always one level under `/zklock-test`.
///
/// ```
/// let a = zklock::testing::unique_root("locks");
/// let b = zklock::testing::unique_root("locks");
/// assert!(a.starts_with("/zklock-test/locks-"));
/// assert_ne!(a, b);
/// ```
pub fn unique_root(name: &str) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    format!(
        "/zklock-test/{}-{}-{n}",
        name.replace('/', "_"),
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::process::{conf_names_dir, parse_mode};
    use super::*;
    use std::path::Path;

    #[test]
    fn parses_srvr_mode() {
        let srvr = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\n";
        assert_eq!(parse_mode(srvr).as_deref(), Some("follower"));
        let not_serving = "This ZooKeeper instance is not currently serving requests\n";
        assert_eq!(parse_mode(not_serving), None);
    }

    #[test]
    fn recognises_own_data_dir() {
        let conf = "clientPort=1\ndataDir=/tmp/zklock-zk-1-0/data/version-2\n";
        assert!(conf_names_dir(conf, Path::new("/tmp/zklock-zk-1-0/data")));
        assert!(!conf_names_dir(conf, Path::new("/tmp/zklock-zk-1-1/data")));
    }

    #[test]
    fn rejects_bad_four_letter_words() {
        let e = four_letter("127.0.0.1:1", "ruok\n").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync + 'static>() {}
        check::<ZkServer>();
        check::<ZkEnsemble>();
        check::<FaultProxy>();
        check::<ProxyMode>();
    }

    #[test]
    fn unique_roots_are_one_level_deep() {
        let root = unique_root("a/b");
        assert_eq!(root.matches('/').count(), 2, "{root}");
    }
}
