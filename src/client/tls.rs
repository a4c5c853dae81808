//! TLS for the client's connection (feature `tls`, on rustls with the `ring`
//! provider): [`TlsConfig`], built from PEM files by [`TlsConfigBuilder`], and
//! the typed [`TlsError`].
//!
//! The options follow the Java client's `zookeeper.ssl.*` properties:
//!
//! | Java | here |
//! |---|---|
//! | `zookeeper.client.secure=true` | [`ZooKeeperBuilder::with_tls`](super::ZooKeeperBuilder::with_tls) |
//! | `zookeeper.ssl.trustStore.*` | [`TlsConfigBuilder::with_ca_file`] (PEM bundle) |
//! | `zookeeper.ssl.keyStore.*` | [`TlsConfigBuilder::with_client_cert`] (PEM certificate chain and key) |
//! | `zookeeper.ssl.hostnameVerification` | [`TlsConfigBuilder::with_hostname_verification`] (on by default) |
//! | `zookeeper.ssl.enabledProtocols` | [`TlsConfigBuilder::with_protocols`] (TLS 1.2 and 1.3 by default) |
//! | `zookeeper.ssl.crl` | [`TlsConfigBuilder::with_crl_file`] (PEM CRLs) |
//!
//! ZooKeeper 3.8's server offers TLS 1.2 only unless its `ssl.ciphersuites`
//! lists TLS 1.3 suites; both work. The ZooKeeper protocol inside is unchanged,
//! and the server's x509 provider gives the client the ACL id `x509:` + its
//! certificate's subject (`CN=alice,OU=test,O=zklock`).
//!
//! **Rotated files are picked up**: every connect attempt compares the
//! files' contents with those last read and, when they changed, builds the
//! configuration again (kezhuw's client does the same; Java needs a
//! restart). A changed set that does not build (a key that does not match
//! its certificate yet, a truncated file) is kept out: the previous
//! configuration serves, a warning is logged once per change, and
//! [`TlsConfig::reload_error`] says why.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

pub use crate::error::TlsError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{
    CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName, UnixTime,
};
use rustls::{
    AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore,
    SignatureScheme,
};

/// A TLS protocol version the client may offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsVersion {
    /// TLS 1.2 (all ZooKeeper 3.5+ servers).
    Tls12,
    /// TLS 1.3 (a server whose `ssl.ciphersuites` lists TLS 1.3 suites).
    Tls13,
}

impl TlsError {
    /// From a rustls error on a connection to `host`.
    pub(crate) fn from_rustls(e: rustls::Error, host: &str) -> TlsError {
        use rustls::Error as E;
        match e {
            E::InvalidCertificate(c) => match c {
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => TlsError::HostnameMismatch {
                    host: host.to_string(),
                },
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. } => {
                    TlsError::ServerCertificateExpired(format!("{c:?}"))
                }
                CertificateError::Revoked => TlsError::ServerCertificateRevoked,
                other => TlsError::UntrustedServer(format!("{other:?}")),
            },
            E::AlertReceived(alert) => match alert {
                AlertDescription::BadCertificate
                | AlertDescription::CertificateRequired
                | AlertDescription::CertificateExpired
                | AlertDescription::CertificateRevoked
                | AlertDescription::CertificateUnknown
                | AlertDescription::UnsupportedCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::AccessDenied => {
                    TlsError::ClientCertificateRejected(format!("{alert:?}"))
                }
                other => TlsError::Handshake(format!("alert from the server: {other:?}")),
            },
            E::InvalidMessage(m) => TlsError::NotTls(format!("not a TLS message: {m:?}")),
            other => TlsError::Handshake(other.to_string()),
        }
    }
}

/// A client's TLS settings: trusted CAs, an optional client certificate,
/// hostname verification, protocol versions. Cheap to clone; give it to
/// [`ZooKeeperBuilder::with_tls`](super::ZooKeeperBuilder::with_tls).
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use zklock::client::{TlsConfig, ZooKeeper};
///
/// let tls = TlsConfig::builder()
///     .with_ca_file("/etc/zookeeper/ca.pem")
///     .with_client_cert("/etc/zklock/client.pem", "/etc/zklock/client.key")
///     .build()?;
/// let zk = ZooKeeper::builder("zk1.example.com:2281,zk2.example.com:2281")
///     .with_tls(tls)
///     .connect(|_e| {})?;
/// # Ok::<(), zklock::Error>(())
/// ```
///
/// Clones share the configuration and its reloads.
#[derive(Clone)]
pub struct TlsConfig {
    inner: Arc<Reloading>,
}

/// The files and what was last built from them.
struct Reloading {
    builder: TlsConfigBuilder,
    loaded: Mutex<Loaded>,
}

struct Loaded {
    config: Arc<ClientConfig>,
    /// The files' contents when last read (`None`: unreadable).
    contents: Vec<Option<Vec<u8>>>,
    /// Why the last change was kept out.
    error: Option<TlsError>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("client_auth", &self.has_client_cert())
            .field("reload_error", &self.reload_error())
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// Whether a client certificate is presented (its subject becomes the
    /// session's `x509` id on a server that asks for one).
    pub(crate) fn has_client_cert(&self) -> bool {
        self.inner.builder.client.is_some()
    }

    /// The configuration for a new connection: built again first if the
    /// files changed since last read (see the [module docs](self)); a
    /// change that does not build is kept out, the previous configuration
    /// serves.
    pub(crate) fn client_config(&self) -> Arc<ClientConfig> {
        let contents = self.inner.builder.contents();
        let mut loaded = self.inner.loaded.lock();
        if contents == loaded.contents {
            return loaded.config.clone();
        }
        loaded.contents = contents;
        match self.inner.builder.clone().client_config() {
            Ok(config) => {
                log::info!(
                    "TLS: the certificate files changed; using them from this connection on"
                );
                loaded.config = Arc::new(config);
                loaded.error = None;
            }
            Err(e) => {
                log::warn!(
                    "TLS: the certificate files changed but cannot be used ({e}); the previous ones serve"
                );
                loaded.error = Some(e);
            }
        }
        loaded.config.clone()
    }

    /// Why the files' last change was kept out (the previous configuration
    /// serves), or `None` when the files in use are the latest. Cleared by
    /// a later change that builds.
    pub fn reload_error(&self) -> Option<TlsError> {
        self.inner.loaded.lock().error.clone()
    }

    /// A builder: no CA yet (one is required), hostname verification on, TLS
    /// 1.2 and 1.3, no client certificate.
    pub fn builder() -> TlsConfigBuilder {
        TlsConfigBuilder {
            ca_files: Vec::new(),
            client: None,
            hostname_verification: true,
            protocols: vec![TlsVersion::Tls13, TlsVersion::Tls12],
            crl_files: Vec::new(),
        }
    }
}

/// Builds a [`TlsConfig`] from PEM files (see [`TlsConfig::builder`]).
#[derive(Debug, Clone)]
pub struct TlsConfigBuilder {
    ca_files: Vec<PathBuf>,
    client: Option<(PathBuf, PathBuf)>,
    hostname_verification: bool,
    protocols: Vec<TlsVersion>,
    crl_files: Vec<PathBuf>,
}

impl TlsConfigBuilder {
    /// Trusts the CA certificates in this PEM file (Java's trust store);
    /// may be given more than once. At least one CA is required.
    #[must_use]
    pub fn with_ca_file(mut self, path: impl AsRef<Path>) -> Self {
        self.ca_files.push(path.as_ref().to_path_buf());
        self
    }

    /// Presents this certificate chain (PEM, the client's certificate first)
    /// with its private key (PEM: PKCS#8, PKCS#1 or SEC1) to the server:
    /// mutual TLS, what `ssl.clientAuth=need` requires (Java's key store). Its
    /// subject becomes the session's `x509` ACL id.
    #[must_use]
    pub fn with_client_cert(
        mut self,
        cert_pem: impl AsRef<Path>,
        key_pem: impl AsRef<Path>,
    ) -> Self {
        self.client = Some((
            cert_pem.as_ref().to_path_buf(),
            key_pem.as_ref().to_path_buf(),
        ));
        self
    }

    /// Whether the server's certificate must name the host the client
    /// connects to (as given in the connect string: a DNS name or an IP
    /// address). On by default, as Java's `zookeeper.ssl.hostnameVerification`;
    /// off, the certificate chain is still verified against the CAs.
    #[must_use]
    pub fn with_hostname_verification(mut self, on: bool) -> Self {
        self.hostname_verification = on;
        self
    }

    /// The protocol versions offered (Java's `zookeeper.ssl.enabledProtocols`);
    /// default both. An empty list is refused by [`build`](Self::build).
    #[must_use]
    pub fn with_protocols(mut self, versions: &[TlsVersion]) -> Self {
        self.protocols = versions.to_vec();
        self
    }

    /// Checks the server's certificate against the certificate revocation
    /// lists in this PEM file (Java's `zookeeper.ssl.crl`); may be given more
    /// than once.
    #[must_use]
    pub fn with_crl_file(mut self, path: impl AsRef<Path>) -> Self {
        self.crl_files.push(path.as_ref().to_path_buf());
        self
    }

    /// Reads the files and builds the configuration.
    ///
    /// # Errors
    /// [`Error::Tls`](crate::Error::Tls): [`TlsError::File`] for a file that
    /// cannot be read or holds no certificate / key / CRL, [`TlsError::Config`]
    /// for material rustls refuses (no CA, no protocol, a key that does not
    /// match the certificate).
    pub fn build(self) -> crate::Result<TlsConfig> {
        self.build_tls().map_err(crate::Error::Tls)
    }

    /// Every file's contents, in a fixed order (`None`: unreadable).
    fn contents(&self) -> Vec<Option<Vec<u8>>> {
        let client = self.client.iter().flat_map(|(c, k)| [c, k]);
        self.ca_files
            .iter()
            .chain(&self.crl_files)
            .chain(client)
            .map(|p| std::fs::read(p).ok())
            .collect()
    }

    fn build_tls(self) -> Result<TlsConfig, TlsError> {
        // Read before building: a change made meanwhile is seen at the next
        // connect.
        let contents = self.contents();
        let config = self.clone().client_config()?;
        Ok(TlsConfig {
            inner: Arc::new(Reloading {
                builder: self,
                loaded: Mutex::new(Loaded {
                    config: Arc::new(config),
                    contents,
                    error: None,
                }),
            }),
        })
    }

    fn client_config(self) -> Result<ClientConfig, TlsError> {
        if self.ca_files.is_empty() {
            return Err(TlsError::Config(
                "no CA: give the server's CA with with_ca_file".into(),
            ));
        }
        let mut roots = RootCertStore::empty();
        for path in &self.ca_files {
            let certs = read_certs(path)?;
            for cert in certs {
                roots.add(cert).map_err(|e| TlsError::File {
                    path: path.clone(),
                    reason: format!("not a usable CA certificate: {e}"),
                })?;
            }
        }
        let mut crls: Vec<CertificateRevocationListDer<'static>> = Vec::new();
        for path in &self.crl_files {
            crls.extend(read_pem(path, "certificate revocation list")?);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .with_crls(crls)
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
        if self.protocols.contains(&TlsVersion::Tls13) {
            versions.push(&rustls::version::TLS13);
        }
        if self.protocols.contains(&TlsVersion::Tls12) {
            versions.push(&rustls::version::TLS12);
        }
        if versions.is_empty() {
            return Err(TlsError::Config("no protocol version enabled".into()));
        }
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = if self.hostname_verification {
            builder.with_webpki_verifier(webpki)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyHostVerifier(webpki)))
        };
        Ok(match &self.client {
            None => builder.with_no_client_auth(),
            Some((cert_path, key_path)) => {
                let chain = read_certs(cert_path)?;
                let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| TlsError::File {
                    path: key_path.clone(),
                    reason: format!("no private key: {e}"),
                })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| TlsError::Config(format!("client certificate and key: {e}")))?
            }
        })
    }
}

fn file_error(path: &Path, e: impl fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// Every certificate in a PEM file; none is an error.
fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    read_pem(path, "certificate")
}

/// Every `what` (a PEM section type) in a PEM file; none is an error.
fn read_pem<T: PemObject>(path: &Path, what: &str) -> Result<Vec<T>, TlsError> {
    let found: Vec<T> = T::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(path, e))?;
    if found.is_empty() {
        return Err(TlsError::File {
            path: path.to_path_buf(),
            reason: format!("no {what} in it"),
        });
    }
    Ok(found)
}

/// The server name rustls checks the certificate against: the host of a
/// connect-string entry (`host:port`, `[v6]:port`).
pub(crate) fn server_name(host_port: &str) -> Result<ServerName<'static>, TlsError> {
    let host = match host_port.rsplit_once(':') {
        Some((h, _)) => h,
        None => host_port,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| TlsError::Config(format!("{host:?} is not a valid server name: {e}")))
}

/// Hostname verification off: the chain is verified as always, a name that
/// does not match is accepted.
#[derive(Debug)]
struct AnyHostVerifier(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_from_connect_string_hosts() {
        assert!(matches!(
            server_name("localhost:2281"),
            Ok(ServerName::DnsName(_))
        ));
        assert!(matches!(
            server_name("127.0.0.1:2281"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("[::1]:2281"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("bad host:1"),
            Err(TlsError::Config(_))
        ));
    }

    #[test]
    fn missing_material_is_a_typed_error() {
        let no_ca = TlsConfig::builder().build();
        assert!(
            matches!(no_ca, Err(crate::Error::Tls(TlsError::Config(_)))),
            "{no_ca:?}"
        );
        let missing = TlsConfig::builder()
            .with_ca_file("/nonexistent/ca.pem")
            .build();
        assert!(
            matches!(&missing, Err(crate::Error::Tls(TlsError::File { path, .. })) if path.ends_with("ca.pem")),
            "{missing:?}"
        );
        let dir = std::env::temp_dir().join(format!("zklock-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a pem file\n").unwrap();
        let e = TlsConfig::builder().with_ca_file(&empty).build();
        assert!(
            matches!(e, Err(crate::Error::Tls(TlsError::File { .. }))),
            "{e:?}"
        );
        let e = TlsConfig::builder()
            .with_ca_file(&empty)
            .with_protocols(&[])
            .build();
        assert!(matches!(e, Err(crate::Error::Tls(_))), "{e:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
