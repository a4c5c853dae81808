//! [`TestPki`]: certificates, keys and Java key/trust stores made at test time
//! for a TLS [`ZkServer`](super::ZkServer) and its clients.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use super::process::make_temp_dir;
use super::scratch::remove_at_exit;

/// The password of every PKCS12 store a [`TestPki`] writes (test material only).
pub const STORE_PASSWORD: &str = "zklock-test";

/// A throwaway public-key infrastructure for TLS tests, made with `openssl`
/// and `keytool` in a fresh temp directory (removed on drop, or when the process
/// ends for a `TestPki` held in a `static`):
///
/// - a CA (`ca.pem`), and a second, untrusted one (`other-ca.pem`);
/// - the server's key and certificate, issued by the CA for the host name
///   `localhost` only (no IP address: a client that connects to `127.0.0.1`
///   with hostname verification sees a certificate for another host), in a
///   PKCS12 key store for ZooKeeper's `ssl.keyStore.*`;
/// - a PKCS12 trust store holding the CA, made by `keytool` (Java trusts no
///   entry of an `openssl pkcs12 -nokeys` store), for the server and for Java
///   clients;
/// - client certificates on demand ([`client`](Self::client),
///   [`expired_client`](Self::expired_client),
///   [`foreign_client`](Self::foreign_client)), as PEM for zklock and PKCS12
///   for Java.
///
/// Keys are ECDSA P-256. Every certificate names `DNS:localhost` and
/// `IP:127.0.0.1` except the server's (see above); clients' carry both because
/// ZooKeeper's server checks a client certificate's host against the client's
/// address when `ssl.hostnameVerification` is on (its default).
///
/// Needs `openssl` and `keytool` (`make zookeeper` installs both).
#[derive(Debug)]
pub struct TestPki {
    dir: PathBuf,
    /// Held while a client certificate is made (tests ask in parallel; the
    /// CA's serial file is shared).
    issuing: Mutex<()>,
}

/// A client's certificate and key, as files.
#[derive(Debug, Clone)]
pub struct ClientCert {
    /// The certificate (PEM).
    pub cert_pem: PathBuf,
    /// The private key (PKCS#8 PEM).
    pub key_pem: PathBuf,
    /// Key and certificate chain in a PKCS12 store ([`STORE_PASSWORD`]), for Java.
    pub key_store: PathBuf,
    /// The ACL id ZooKeeper's x509 provider gives this certificate: its
    /// subject as Java prints it (`CN=alice,OU=test,O=zklock`), without the
    /// scheme (the ACL entry is `x509:` followed by this id).
    pub acl_id: String,
}

impl TestPki {
    /// Makes the CAs, the server's material and the trust store.
    ///
    /// # Errors
    /// `openssl` or `keytool` missing or failing (the error names the command
    /// and says to run `make zookeeper`).
    pub fn generate() -> io::Result<TestPki> {
        let pki = TestPki {
            dir: make_temp_dir("pki")?,
            issuing: Mutex::new(()),
        };
        // Removed on drop; a PKI held in a `static` (never dropped) is removed
        // when the process ends.
        remove_at_exit(&pki.dir)?;
        pki.make_ca("ca", "zklock test CA")?;
        pki.make_ca("other-ca", "zklock untrusted CA")?;
        pki.issue(
            "ca",
            "server",
            "/O=zklock/OU=test/CN=zookeeper",
            "DNS:localhost",
            3650,
        )?;
        pki.key_store("server")?;
        run(Command::new("keytool")
            .args([
                "-importcert",
                "-noprompt",
                "-alias",
                "ca",
                "-storetype",
                "PKCS12",
            ])
            .arg("-file")
            .arg(pki.path("ca.pem"))
            .arg("-keystore")
            .arg(pki.trust_store())
            .args(["-storepass", STORE_PASSWORD]))?;
        Ok(pki)
    }

    /// The directory holding every file.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA certificate (PEM) that issued the server's and clients' certificates.
    pub fn ca_pem(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// A CA certificate (PEM) that issued nothing the server presents.
    pub fn other_ca_pem(&self) -> PathBuf {
        self.path("other-ca.pem")
    }

    /// The PKCS12 trust store holding the CA ([`STORE_PASSWORD`]).
    pub fn trust_store(&self) -> PathBuf {
        self.path("truststore.p12")
    }

    /// The server's PKCS12 key store ([`STORE_PASSWORD`]).
    pub fn server_key_store(&self) -> PathBuf {
        self.path("server.p12")
    }

    /// A client certificate for `CN=name,OU=test,O=zklock`, issued by the CA,
    /// valid for ten years (made on the first call for `name`).
    ///
    /// # Errors
    /// As [`generate`](Self::generate); `name` must be a plain word.
    pub fn client(&self, name: &str) -> io::Result<ClientCert> {
        self.client_cert("ca", name, 3650)
    }

    /// A client certificate issued by the CA that expired yesterday.
    ///
    /// # Errors
    /// As [`client`](Self::client).
    pub fn expired_client(&self, name: &str) -> io::Result<ClientCert> {
        self.client_cert("ca", name, -1)
    }

    /// A client certificate issued by the untrusted CA.
    ///
    /// # Errors
    /// As [`client`](Self::client).
    pub fn foreign_client(&self, name: &str) -> io::Result<ClientCert> {
        self.client_cert("other-ca", name, 3650)
    }

    /// A certificate revocation list (PEM) from the CA: revoking the server's
    /// certificate when `revoke_server`, else empty (made on the first call).
    ///
    /// # Errors
    /// As [`generate`](Self::generate).
    pub fn crl(&self, revoke_server: bool) -> io::Result<PathBuf> {
        let stem = if revoke_server {
            "crl-revoked"
        } else {
            "crl-empty"
        };
        let out = self.path(&format!("{stem}.pem"));
        let _one_at_a_time = self.issuing.lock().unwrap_or_else(|e| e.into_inner());
        if out.exists() {
            return Ok(out);
        }
        let index = self.path(&format!("{stem}.index"));
        let number = self.path(&format!("{stem}.number"));
        let config = self.path(&format!("{stem}.cnf"));
        fs::write(&index, "")?;
        fs::write(&number, "01\n")?;
        fs::write(
            &config,
            format!(
                "[ca]\ndefault_ca=test\n[test]\ndatabase={}\ncrlnumber={}\n\
                 default_md=sha256\ndefault_crl_days=30\n",
                index.display(),
                number.display()
            ),
        )?;
        let ca = || {
            let mut c = Command::new("openssl");
            c.arg("ca")
                .arg("-config")
                .arg(&config)
                .arg("-keyfile")
                .arg(self.path("ca.key"))
                .arg("-cert")
                .arg(self.path("ca.pem"));
            c
        };
        if revoke_server {
            run(ca().arg("-revoke").arg(self.path("server.pem")))?;
        }
        run(ca().arg("-gencrl").arg("-out").arg(&out))?;
        Ok(out)
    }

    /// The system properties that make the Java client (3.8) connect over TLS
    /// with `client`'s certificate (Netty socket, `zookeeper.client.secure`,
    /// key and trust stores), as `-D` options.
    pub fn java_client_options(&self, client: &ClientCert) -> Vec<String> {
        vec![
            "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty".into(),
            "-Dzookeeper.client.secure=true".into(),
            format!(
                "-Dzookeeper.ssl.keyStore.location={}",
                client.key_store.display()
            ),
            format!("-Dzookeeper.ssl.keyStore.password={STORE_PASSWORD}"),
            "-Dzookeeper.ssl.keyStore.type=PKCS12".into(),
            format!(
                "-Dzookeeper.ssl.trustStore.location={}",
                self.trust_store().display()
            ),
            format!("-Dzookeeper.ssl.trustStore.password={STORE_PASSWORD}"),
            "-Dzookeeper.ssl.trustStore.type=PKCS12".into(),
        ]
    }

    fn client_cert(&self, ca: &str, name: &str, days: i32) -> io::Result<ClientCert> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("client name {name:?}: letters, digits and '-' only"),
            ));
        }
        let stem = format!("client-{ca}-{name}-{days}");
        let _one_at_a_time = self.issuing.lock().unwrap_or_else(|e| e.into_inner());
        if !self.path(&format!("{stem}.p12")).exists() {
            self.issue(
                ca,
                &stem,
                &format!("/O=zklock/OU=test/CN={name}"),
                "DNS:localhost,IP:127.0.0.1",
                days,
            )?;
            self.key_store(&stem)?;
        }
        Ok(ClientCert {
            cert_pem: self.path(&format!("{stem}.pem")),
            key_pem: self.path(&format!("{stem}.key")),
            key_store: self.path(&format!("{stem}.p12")),
            acl_id: format!("CN={name},OU=test,O=zklock"),
        })
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    fn make_ca(&self, stem: &str, cn: &str) -> io::Result<()> {
        run(Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args([
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "3650",
                "-keyout",
            ])
            .arg(self.path(&format!("{stem}.key")))
            .arg("-out")
            .arg(self.path(&format!("{stem}.pem")))
            .args(["-subj", &format!("/CN={cn}")])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]))
    }

    /// A key and a certificate `stem.{key,pem}` issued by `ca` for `subject`
    /// with `san`, valid for `days` (negative: expired).
    fn issue(&self, ca: &str, stem: &str, subject: &str, san: &str, days: i32) -> io::Result<()> {
        let csr = self.path(&format!("{stem}.csr"));
        run(Command::new("openssl")
            .args(["req", "-new", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:P-256", "-nodes", "-keyout"])
            .arg(self.path(&format!("{stem}.key")))
            .arg("-out")
            .arg(&csr)
            .args(["-subj", subject]))?;
        let ext = self.path(&format!("{stem}.ext"));
        fs::write(
            &ext,
            format!(
                "basicConstraints=critical,CA:FALSE\n\
                 keyUsage=critical,digitalSignature,keyAgreement\n\
                 extendedKeyUsage=serverAuth,clientAuth\n\
                 subjectAltName={san}\n"
            ),
        )?;
        run(Command::new("openssl")
            .args(["x509", "-req", "-in"])
            .arg(&csr)
            .arg("-CA")
            .arg(self.path(&format!("{ca}.pem")))
            .arg("-CAkey")
            .arg(self.path(&format!("{ca}.key")))
            .arg("-CAserial")
            .arg(self.path(&format!("{ca}.srl")))
            .arg("-CAcreateserial")
            .args(["-days", &days.to_string(), "-extfile"])
            .arg(&ext)
            .arg("-out")
            .arg(self.path(&format!("{stem}.pem"))))
    }

    /// `stem.p12`: `stem.key` with `stem.pem` and its CA.
    fn key_store(&self, stem: &str) -> io::Result<()> {
        run(Command::new("openssl")
            .args(["pkcs12", "-export", "-name", stem, "-in"])
            .arg(self.path(&format!("{stem}.pem")))
            .arg("-inkey")
            .arg(self.path(&format!("{stem}.key")))
            .arg("-out")
            .arg(self.path(&format!("{stem}.p12")))
            .args(["-passout", &format!("pass:{STORE_PASSWORD}")]))
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Runs a PKI command; its output only on failure, in the error.
fn run(command: &mut Command) -> io::Result<()> {
    let what = format!("{command:?}");
    let out = command.output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot run {what}: {e} (run `make zookeeper`: it installs openssl and a JDK)"),
        )
    })?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )))
}
