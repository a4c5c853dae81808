//! Which ZooKeeper version the harness runs: `$ZK_TEST_VERSION` (`3.6`, `3.8`,
//! `3.9`; default `3.8`, Debian's) picks the jars of the servers it starts and of
//! the Java clients and Curator participants of the tests; [`ServerVersion`] is
//! what a running server says it is (`srvr`), and [`require_version`] lets a test
//! skip, with a printed reason, on a server too old for it.
//!
//! 3.8 is Debian's packages (`make zookeeper`, `make curator`); 3.6.3 and 3.9.3
//! are the jars `make zookeeper-versions` unpacks from PyPI's pyspark source
//! packages into `target/zookeeper-versions/<3.6|3.9>/` (`server.classpath`,
//! `client.classpath`, `curator.classpath`, `version`; `$ZK_VERSIONS_DIR`
//! overrides the directory). See `docs/server-versions.md`.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Debian's `zookeeper` package: the server jar (its manifest pulls in the rest of the
/// classpath) plus a logging backend.
pub(crate) const DEFAULT_CLASSPATH: &str =
    "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";

/// Debian's Java ZooKeeper client (3.8) without a logging backend, for the
/// tests' Java clients ([`NETTY_CLASSPATH`] is added for TLS).
pub(crate) const DEBIAN_CLIENT_JARS: [&str; 4] = [
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];

/// Debian's Curator 5.4 (`make curator`) and its Guava.
pub(crate) const DEBIAN_CURATOR_JARS: [&str; 4] = [
    "/usr/share/java/curator-recipes.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-client.jar",
    "/usr/share/java/guava.jar",
];

/// The jars Debian's `libnetty-java` (a dependency of `libzookeeper-java`)
/// provides that `zookeeper.jar`'s manifest class path leaves out, though the
/// Netty server factory and the Java client's Netty socket (TLS on either side)
/// need them: without `netty-codec.jar` the server accepts TLS connections and
/// fails each with `NoClassDefFoundError: io/netty/handler/codec/ByteToMessageDecoder`.
pub const NETTY_CLASSPATH: &str = "/usr/share/java/netty-codec.jar:\
     /usr/share/java/netty-resolver.jar:/usr/share/java/netty-transport-native-unix-common.jar";

/// The environment variable choosing the server version of the tests:
/// `ZK_TEST_VERSION=3.6|3.8|3.9` (default `3.8`). See [`test_version`].
pub const VERSION_ENV: &str = "ZK_TEST_VERSION";

/// The environment variable naming the directory `make zookeeper-versions`
/// wrote (default `target/zookeeper-versions` in the crate's directory).
pub const VERSIONS_DIR_ENV: &str = "ZK_VERSIONS_DIR";

/// The versions [`VERSION_ENV`] accepts, the default (Debian's) first.
pub const TEST_VERSIONS: [&str; 3] = ["3.8", "3.6", "3.9"];

/// A ZooKeeper server's version, as its `srvr` reply gives it
/// (`Zookeeper version: 3.9.3-c26634f3..., built on ...`). Ordered, so a test
/// can compare: `v >= ServerVersion::new(3, 9, 0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerVersion {
    /// 3 in 3.9.3.
    pub major: u32,
    /// 9 in 3.9.3.
    pub minor: u32,
    /// 3 in 3.9.3.
    pub patch: u32,
}

impl ServerVersion {
    /// `major.minor.patch`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> ServerVersion {
        ServerVersion {
            major,
            minor,
            patch,
        }
    }

    /// Reads the `Zookeeper version:` line of a `srvr` (or `stat`) reply;
    /// `None` when there is none (e.g. the server is not serving).
    ///
    /// ```
    /// use zklock::testing::ServerVersion;
    /// let srvr = "Zookeeper version: 3.9.3-c26634f3, built on 2024-10-17 23:21 UTC\nMode: standalone\n";
    /// assert_eq!(ServerVersion::from_srvr(srvr), Some(ServerVersion::new(3, 9, 3)));
    /// assert_eq!(ServerVersion::from_srvr("This ZooKeeper instance is not currently serving requests"), None);
    /// ```
    pub fn from_srvr(reply: &str) -> Option<ServerVersion> {
        let line = reply
            .lines()
            .find_map(|l| l.trim().strip_prefix("Zookeeper version:"))?;
        let number = line
            .trim()
            .split(|c: char| c != '.' && !c.is_ascii_digit())
            .next()?;
        let mut parts = number.split('.').map(|p| p.parse::<u32>().ok());
        Some(ServerVersion::new(
            parts.next()??,
            parts.next()??,
            parts.next().flatten().unwrap_or(0),
        ))
    }

    /// Whether this is `major.minor` or later.
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The server version the tests run, from `$ZK_TEST_VERSION`: `"3.6"`, `"3.8"`
/// (the default, also when unset or empty) or `"3.9"`.
///
/// # Errors
/// `InvalidInput` naming the accepted values when it is anything else.
pub fn test_version() -> io::Result<&'static str> {
    Ok(version_from_env(VERSION_ENV)?.unwrap_or(TEST_VERSIONS[0]))
}

/// The version `$var` names: `None` when unset or empty, an `InvalidInput`
/// naming the accepted values when it is anything else.
fn version_from_env(var: &str) -> io::Result<Option<&'static str>> {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => TEST_VERSIONS
            .iter()
            .copied()
            .find(|t| *t == v.trim())
            .map(Some)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{var}={v:?}: expected one of {}", TEST_VERSIONS.join(", ")),
                )
            }),
        _ => Ok(None),
    }
}

/// Where `make zookeeper-versions` wrote the versions: `$ZK_VERSIONS_DIR`, else
/// `target/zookeeper-versions` in the crate's directory.
pub fn versions_dir() -> PathBuf {
    match std::env::var_os(VERSIONS_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/zookeeper-versions"),
    }
}

/// One of the files `make zookeeper-versions` wrote for `version` (`3.6`, `3.9`),
/// trimmed; the error names the make target.
fn version_file(version: &str, name: &str) -> io::Result<String> {
    let path = versions_dir().join(version).join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => Ok(text.trim().to_string()),
        Ok(_) | Err(_) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{VERSION_ENV}={version}: {} is missing; run `make zookeeper-versions` \
                 (it downloads ZooKeeper 3.6.3 and 3.9.3 from PyPI's pyspark packages once)",
                path.display()
            ),
        )),
    }
}

/// The classpath of the ZooKeeper servers the harness starts: `$ZK_TEST_CLASSPATH`
/// when set, else the [`test_version`]'s (Debian's `zookeeper.jar` and
/// `slf4j-simple` for 3.8; `server.classpath` of `make zookeeper-versions`).
/// The second value says whether the Netty jars the TLS server needs are
/// already on it (true for 3.6 and 3.9, whose classpaths carry Netty's split
/// jars; else [`NETTY_CLASSPATH`] is added for a Netty server).
///
/// # Errors
/// A bad `$ZK_TEST_VERSION`, or that version's files missing (run
/// `make zookeeper-versions`).
pub fn server_classpath() -> io::Result<(String, bool)> {
    if let Ok(cp) = std::env::var("ZK_TEST_CLASSPATH") {
        if !cp.is_empty() {
            return Ok((cp, false));
        }
    }
    match test_version()? {
        "3.8" => Ok((DEFAULT_CLASSPATH.to_string(), false)),
        v => Ok((version_file(v, "server.classpath")?, true)),
    }
}

/// The classpath of the Java ZooKeeper client of the [`test_version`], with its
/// Netty (TLS) jars and no logging backend (stdout stays the test's protocol):
/// for the tests' Java clients (TLS, SASL) and participants.
///
/// # Errors
/// As [`server_classpath`].
pub fn java_client_classpath() -> io::Result<String> {
    match test_version()? {
        "3.8" => Ok(format!(
            "{}:{NETTY_CLASSPATH}",
            DEBIAN_CLIENT_JARS.join(":")
        )),
        v => version_file(v, "client.classpath"),
    }
}

/// The Curator jars (and its Guava) the tests' Curator participants run with on
/// the [`test_version`]: Debian's Curator 5.4 on 3.8, 5.7.1 (from pyspark
/// 4.0.1) on 3.9, 2.13.0 (pyspark 3.5.7, the HBase-era fleets' Curator) on 3.6.
/// `$ZK_TEST_CURATOR=3.6|3.8|3.9` takes another version's Curator.
///
/// # Errors
/// As [`server_classpath`].
pub fn curator_classpath() -> io::Result<String> {
    let which = match version_from_env("ZK_TEST_CURATOR")? {
        Some(v) => v,
        None => test_version()?,
    };
    match which {
        "3.8" => Ok(DEBIAN_CURATOR_JARS.join(":")),
        v => version_file(v, "curator.classpath"),
    }
}

/// The Curator version [`curator_classpath`] names, read from its
/// `curator-recipes-<version>.jar` (e.g. `"5.4.0"`, `"2.13.0"`), or `None`.
pub fn curator_version() -> Option<String> {
    let cp = curator_classpath().ok()?;
    cp.split(':')
        .find_map(|jar| {
            let name = jar.rsplit('/').next()?;
            let version = name
                .strip_prefix("curator-recipes-")?
                .strip_suffix(".jar")?;
            Some(version.to_string())
        })
        .or_else(|| {
            // Debian's unversioned symlink.
            std::fs::read_link("/usr/share/java/curator-recipes.jar")
                .ok()
                .and_then(|t| {
                    t.file_name()?
                        .to_str()?
                        .strip_prefix("curator-recipes-")?
                        .strip_suffix(".jar")
                        .map(str::to_string)
                })
        })
}

/// The version of the server the tests of this binary use ([`test_servers`]'s
/// first address, asked `srvr`), read once.
///
/// # Panics
/// When the server does not answer `srvr` with a version (a test harness fails
/// loudly).
///
/// [`test_servers`]: super::test_servers
pub fn server_version() -> ServerVersion {
    static VERSION: std::sync::OnceLock<ServerVersion> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let servers = super::test_servers();
        let first = servers.split(',').next().unwrap_or_default().to_string();
        let first = first.split('/').next().unwrap_or_default();
        let reply = super::four_letter(first, "srvr")
            .unwrap_or_else(|e| panic!("zklock::testing: `srvr` to {first}: {e}"));
        ServerVersion::from_srvr(&reply)
            .unwrap_or_else(|| panic!("zklock::testing: no version in `srvr` of {first}: {reply}"))
    })
}

/// Whether the tests' server ([`server_version`]) is `major.minor` or later.
/// When it is not, prints why the calling test skips, e.g.
/// `skipped: needs ZooKeeper 3.9 or later, the server is 3.6.3`, to stdout
/// (shown by `cargo test -- --nocapture` and in the logs of `make test`), and
/// returns `false`: the test then returns early.
///
/// ```no_run
/// if !zklock::testing::require_version(3, 9) {
///     return; // whoAmI is 3.9's
/// }
/// ```
pub fn require_version(major: u32, minor: u32) -> bool {
    let version = server_version();
    if version.at_least(major, minor) {
        return true;
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_string();
    println!("{test}: skipped: needs ZooKeeper {major}.{minor} or later, the server is {version}");
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_srvr_versions() {
        let v = |s: &str| ServerVersion::from_srvr(s);
        assert_eq!(
            v("Zookeeper version: 3.8.0-debian--1, built on 2022-07-12 UTC\n"),
            Some(ServerVersion::new(3, 8, 0))
        );
        assert_eq!(
            v("Zookeeper version: 3.6.3--6401e4ad2087061bc6b9f80dec2d69f2e3c8660a, built on 04/08/2021 16:35 GMT\n"),
            Some(ServerVersion::new(3, 6, 3))
        );
        assert_eq!(v("Mode: standalone\n"), None);
        let v36 = ServerVersion::new(3, 6, 3);
        assert!(v36.at_least(3, 6) && v36.at_least(3, 5) && !v36.at_least(3, 9));
        assert!(ServerVersion::new(3, 9, 3) > ServerVersion::new(3, 8, 0));
        assert_eq!(v36.to_string(), "3.6.3");
    }
}
