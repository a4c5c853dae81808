//! A throwaway MIT Kerberos KDC on 127.0.0.1 (Debian's `krb5-kdc` and
//! `krb5-admin-server`'s `kadmin.local`; `make kerberos` installs them): a
//! realm, principals with random keys and their keytabs, made at start, run
//! from files alone (`KRB5_CONFIG`, `KRB5_KDC_PROFILE`; nothing in /etc).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::process::{free_ports, make_temp_dir, ReservedPort, Watchdog};

/// The test realm.
pub const TEST_REALM: &str = "ZKLOCK.TEST";

/// A running KDC for [`TEST_REALM`]; stopped and its files removed on drop,
/// or when the test process ends (it runs under the harness's watchdog, as
/// the ZooKeeper servers: a `static` KDC never outlives the tests).
#[derive(Debug)]
pub struct TestKdc {
    dir: PathBuf,
    port: u16,
    watchdog: Option<Watchdog>,
    /// Its port, reserved machine-wide while it lives (after the watchdog).
    _port: ReservedPort,
}

impl TestKdc {
    /// Creates the realm's database with `principals` (e.g. `alice`,
    /// `zookeeper/localhost`), each with a random key and a keytab
    /// ([`keytab`](Self::keytab)), and starts the KDC (TCP only, on a free
    /// port of 127.0.0.1).
    ///
    /// # Errors
    /// When the MIT tools are missing (the error says `make kerberos`), or
    /// the KDC does not listen within 10 s.
    pub fn start(principals: &[&str]) -> io::Result<TestKdc> {
        let dir = make_temp_dir("kdc")?;
        let reserved = free_ports(1)?.remove(0);
        let port = reserved.get();
        let mut kdc = TestKdc {
            dir,
            port,
            watchdog: None,
            _port: reserved,
        };
        let d = kdc.dir.display().to_string();
        fs::write(
            kdc.krb5_conf(),
            format!(
                "[libdefaults]\n default_realm = {TEST_REALM}\n dns_lookup_kdc = false\n \
                 dns_lookup_realm = false\n udp_preference_limit = 1\n rdns = false\n \
                 dns_canonicalize_hostname = false\n\
                 [realms]\n {TEST_REALM} = {{\n  kdc = 127.0.0.1:{port}\n }}\n"
            ),
        )?;
        fs::write(
            kdc.dir.join("kdc.conf"),
            format!(
                "[kdcdefaults]\n kdc_listen = 127.0.0.1:{port}\n kdc_tcp_listen = 127.0.0.1:{port}\n\
                 [realms]\n {TEST_REALM} = {{\n  database_name = {d}/principal\n  \
                 key_stash_file = {d}/stash\n  kdc_listen = 127.0.0.1:{port}\n  \
                 kdc_tcp_listen = 127.0.0.1:{port}\n  acl_file = {d}/kadm5.acl\n }}\n\
                 [logging]\n kdc = FILE:{d}/kdc.log\n"
            ),
        )?;
        kdc.tool(
            "kdb5_util",
            &["create", "-s", "-r", TEST_REALM, "-P", "zklock-master"],
        )?;
        for p in principals {
            kdc.tool("kadmin.local", &["-q", &format!("addprinc -randkey {p}")])?;
            let keytab = kdc.keytab(p);
            kdc.tool(
                "kadmin.local",
                &["-q", &format!("ktadd -k {} {p}", keytab.display())],
            )?;
        }
        let profile = kdc.dir.join("kdc.conf");
        let krb5 = kdc.krb5_conf();
        let watchdog = Watchdog::spawn_program(
            "krb5kdc",
            &["-n"],
            &[("KRB5_CONFIG", &krb5), ("KRB5_KDC_PROFILE", &profile)],
            &kdc.dir.join("krb5kdc.out"),
            &kdc.dir,
        )?;
        kdc.watchdog = Some(watchdog);
        let until = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > until {
                return Err(io::Error::other(format!(
                    "the KDC does not listen on 127.0.0.1:{port}; see {d}/krb5kdc.out"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(kdc)
    }

    /// The `krb5.conf` clients and servers of this realm use (`KRB5_CONFIG`,
    /// Java's `-Djava.security.krb5.conf`).
    pub fn krb5_conf(&self) -> PathBuf {
        self.dir.join("krb5.conf")
    }

    /// The keytab of `principal` (made at start).
    pub fn keytab(&self, principal: &str) -> PathBuf {
        self.dir
            .join(format!("{}.keytab", principal.replace('/', "_")))
    }

    /// `principal@REALM`.
    pub fn full_name(&self, principal: &str) -> String {
        format!("{principal}@{TEST_REALM}")
    }

    /// `kinit -kt <keytab> principal` into a fresh ticket cache file; returns
    /// its path (for `KRB5CCNAME=FILE:<path>`).
    ///
    /// # Errors
    /// When `kinit` fails (its output in the error).
    pub fn kinit(&self, principal: &str) -> io::Result<PathBuf> {
        let cache = self
            .dir
            .join(format!("{}.ccache", principal.replace('/', "_")));
        let keytab = self.keytab(principal);
        self.tool(
            "kinit",
            &[
                "-c",
                &cache.display().to_string(),
                "-kt",
                &keytab.display().to_string(),
                principal,
            ],
        )?;
        Ok(cache)
    }

    /// Gives `principal` a new random key, written to a new keytab (returned):
    /// its keytab from [`keytab`](Self::keytab) is stale from then on.
    ///
    /// # Errors
    /// When `kadmin.local` fails.
    pub fn rekey(&self, principal: &str) -> io::Result<PathBuf> {
        let fresh = self
            .dir
            .join(format!("{}.rekeyed.keytab", principal.replace('/', "_")));
        self.tool(
            "kadmin.local",
            &["-q", &format!("ktadd -k {} {principal}", fresh.display())],
        )?;
        Ok(fresh)
    }

    /// The KDC's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    fn command(&self, tool: &str) -> Command {
        let mut c = Command::new(tool);
        c.env("KRB5_CONFIG", self.krb5_conf())
            .env("KRB5_KDC_PROFILE", self.dir.join("kdc.conf"));
        c
    }

    fn tool(&self, tool: &str, args: &[&str]) -> io::Result<()> {
        let out = self
            .command(tool)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| missing(tool, e))?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "{tool} {args:?} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }

    /// The directory of the realm's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn missing(tool: &str, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("cannot run {tool} ({e}): run `make kerberos` (Debian's krb5-kdc, krb5-admin-server, krb5-user)"),
    )
}

impl Drop for TestKdc {
    fn drop(&mut self) {
        match self.watchdog.take() {
            // Kills the KDC and removes the directory.
            Some(w) => drop(w.finish("KILL", false)),
            None => drop(fs::remove_dir_all(&self.dir)),
        }
    }
}
