//! SASL authentication of the connection (Java's `ZooKeeperSaslClient`):
//! after the ConnectResponse, on every connect and reconnect, before anything
//! else is sent, the client and the server exchange SASL tokens in
//! `GetSASLRequest` / `SetSASLResponse` packets (opcode 102). A refusal ends
//! the handle with `AuthFailed`.
//!
//! DIGEST-MD5 (RFC 2831, what a JAAS `Client` section with ZooKeeper's
//! `DigestLoginModule` gives the Java client) is written here over the `md-5`
//! crate: no maintained Rust SASL crate has the mechanism (`rsasl` 2 dropped
//! it; RFC 6331 made it historic), and ZooKeeper servers still offer it.
//! Only `qop=auth` (authentication, no integrity or confidentiality layer),
//! as ZooKeeper negotiates.

use md5::{Digest, Md5};
use std::fmt;

/// The SASL protocol name ZooKeeper's servers register (Java's
/// `zookeeper.sasl.client.username` default).
const PROTOCOL: &str = "zookeeper";
/// The server name a ZooKeeper server uses for DIGEST-MD5.
const DIGEST_SERVER_NAME: &str = "zk-sasl-md5";

/// SASL credentials for the connection
/// ([`ZooKeeperBuilder::with_sasl`](super::ZooKeeperBuilder::with_sasl)).
///
/// The password is never printed: `Debug` shows the mechanism and the user
/// only, and no error or log line carries it.
#[derive(Clone)]
pub struct SaslConfig {
    mech: Mech,
}

#[derive(Clone)]
enum Mech {
    DigestMd5 {
        username: String,
        password: Vec<u8>,
    },
    #[cfg(feature = "kerberos")]
    Gssapi {
        /// `service/host`, e.g. `zookeeper/localhost`.
        server_principal: String,
        /// The client's principal; `None`: GSSAPI's default.
        client_principal: Option<String>,
    },
}

impl SaslConfig {
    /// DIGEST-MD5 with `username` and `password`: what a JAAS `Client` section
    /// with `org.apache.zookeeper.server.auth.DigestLoginModule` gives the Java
    /// client. The server must list the user in its JAAS `Server` section; the
    /// session's ACL id is then `sasl:<username>`.
    pub fn digest_md5(username: &str, password: impl AsRef<[u8]>) -> SaslConfig {
        SaslConfig {
            mech: Mech::DigestMd5 {
                username: username.to_string(),
                password: password.as_ref().to_vec(),
            },
        }
    }

    /// GSSAPI (Kerberos V5; feature `kerberos`), with the credentials
    /// GSSAPI finds: the default ticket cache (`KRB5CCNAME`, filled by
    /// `kinit`), else the client keytab (`KRB5_CLIENT_KTNAME`); `KRB5_CONFIG`
    /// names the realm's configuration. `server_principal` is the servers'
    /// `service/host` (`zookeeper/<host>`; Java derives the host from the
    /// connect string by a reverse lookup, zklock takes it as given). The
    /// session's ACL id is `sasl:<principal>` as the server maps it.
    ///
    /// Deliberate difference from Java (whose JAAS `Client` section names a
    /// keytab per login context): there is no per-handle keytab. Choosing
    /// one per handle needs MIT's `gss_acquire_cred_from` with a
    /// `client_keytab` credential store; the `libgssapi` crate (0.8, and 0.11)
    /// wraps only `gss_acquire_cred` and `gss_acquire_cred_with_password`,
    /// and calling the raw binding in `libgssapi-sys` needs `unsafe`, which
    /// this crate forbids. Setting `KRB5_CLIENT_KTNAME` per handle is no way
    /// out either: the environment is the process's. So one process uses one
    /// keytab (or ticket cache) for all its Kerberos handles.
    #[cfg(feature = "kerberos")]
    pub fn kerberos(server_principal: &str) -> SaslConfig {
        SaslConfig {
            mech: Mech::Gssapi {
                server_principal: server_principal.to_string(),
                client_principal: None,
            },
        }
    }

    /// Kerberos as `principal` (`alice`, `alice@REALM`): its ticket from the
    /// ticket cache, or its key from the client keytab (`KRB5_CLIENT_KTNAME`;
    /// the `zklock` command's `--keytab`). Without it GSSAPI takes the
    /// cache's default principal. No effect on DIGEST-MD5.
    #[cfg(feature = "kerberos")]
    #[must_use]
    pub fn with_client_principal(mut self, principal: &str) -> SaslConfig {
        if let Mech::Gssapi {
            client_principal, ..
        } = &mut self.mech
        {
            *client_principal = Some(principal.to_string());
        }
        self
    }

    /// The user this configuration authenticates as (empty for Kerberos:
    /// the ticket's principal).
    pub fn username(&self) -> &str {
        match &self.mech {
            Mech::DigestMd5 { username, .. } => username,
            #[cfg(feature = "kerberos")]
            Mech::Gssapi { .. } => "",
        }
    }

    /// The mechanism's name (`DIGEST-MD5`, `GSSAPI`).
    pub fn mechanism(&self) -> &'static str {
        match &self.mech {
            Mech::DigestMd5 { .. } => "DIGEST-MD5",
            #[cfg(feature = "kerberos")]
            Mech::Gssapi { .. } => "GSSAPI",
        }
    }

    /// A fresh exchange for one connection.
    pub(crate) fn start(&self) -> Exchange {
        match &self.mech {
            Mech::DigestMd5 { username, password } => Exchange::Digest(DigestMd5 {
                username: username.clone(),
                password: password.clone(),
                expect_rspauth: None,
            }),
            #[cfg(feature = "kerberos")]
            Mech::Gssapi {
                server_principal,
                client_principal,
            } => Exchange::Gssapi(gssapi::Gssapi::new(
                server_principal,
                client_principal.as_deref(),
            )),
        }
    }
}

impl fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("SaslConfig");
        d.field("mechanism", &self.mechanism());
        match &self.mech {
            Mech::DigestMd5 { username, .. } => d
                .field("username", username)
                .field("password", &"<redacted>"),
            #[cfg(feature = "kerberos")]
            Mech::Gssapi {
                server_principal,
                client_principal,
            } => d
                .field("server_principal", server_principal)
                .field("client_principal", client_principal),
        };
        d.finish()
    }
}

/// One connection's exchange, by mechanism.
pub(crate) enum Exchange {
    Digest(DigestMd5),
    #[cfg(feature = "kerberos")]
    Gssapi(gssapi::Gssapi),
}

impl Exchange {
    /// The first token (sent before the server says anything).
    pub(crate) fn initial(&mut self) -> Result<Vec<u8>, SaslFailure> {
        match self {
            Exchange::Digest(d) => Ok(d.initial()),
            #[cfg(feature = "kerberos")]
            Exchange::Gssapi(g) => g.initial(),
        }
    }

    /// The server's token → `Some(next token)`, or `None`: complete.
    pub(crate) fn step(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, SaslFailure> {
        match self {
            Exchange::Digest(d) => d.step(token),
            #[cfg(feature = "kerberos")]
            Exchange::Gssapi(g) => g.step(token),
        }
    }
}

#[cfg(feature = "kerberos")]
mod gssapi {
    //! GSSAPI as a SASL mechanism (RFC 4752) over MIT's GSSAPI (the
    //! `libgssapi` crate): the context tokens, then the security-layer
    //! negotiation (the server's wrapped 4 bytes; the client picks "no
    //! security layer", as ZooKeeper's Java client does with `auth` QOP).
    use super::SaslFailure;
    use libgssapi::context::{ClientCtx, CtxFlags, SecurityContext};
    use libgssapi::credential::{Cred, CredUsage};
    use libgssapi::name::Name;
    use libgssapi::oid::{OidSet, GSS_MECH_KRB5, GSS_NT_HOSTBASED_SERVICE, GSS_NT_KRB5_PRINCIPAL};

    pub(crate) struct Gssapi {
        target: String,
        client: Option<String>,
        ctx: Option<ClientCtx>,
        established: bool,
        answered_layer: bool,
    }

    fn failed(what: &str, e: impl std::fmt::Display) -> SaslFailure {
        SaslFailure(format!("GSSAPI {what}: {e}"))
    }

    impl Gssapi {
        pub(crate) fn new(server_principal: &str, client_principal: Option<&str>) -> Gssapi {
            // `service/host` → GSSAPI's host-based `service@host`.
            Gssapi {
                target: server_principal.replacen('/', "@", 1),
                client: client_principal.map(str::to_string),
                ctx: None,
                established: false,
                answered_layer: false,
            }
        }

        pub(crate) fn initial(&mut self) -> Result<Vec<u8>, SaslFailure> {
            let name = Name::new(self.target.as_bytes(), Some(&GSS_NT_HOSTBASED_SERVICE))
                .map_err(|e| failed("service name", e))?;
            let cred = match &self.client {
                None => None,
                Some(p) => {
                    let who = Name::new(p.as_bytes(), Some(&GSS_NT_KRB5_PRINCIPAL))
                        .map_err(|e| failed("client principal", e))?;
                    let mut mechs = OidSet::new().map_err(|e| failed("mechanisms", e))?;
                    mechs
                        .add(&GSS_MECH_KRB5)
                        .map_err(|e| failed("mechanisms", e))?;
                    let cred = Cred::acquire(Some(&who), None, CredUsage::Initiate, Some(&mechs))
                        .map_err(|e| failed(&format!("credentials of {p}"), e))?;
                    Some(cred)
                }
            };
            let mut ctx = ClientCtx::new(
                cred,
                name,
                CtxFlags::GSS_C_MUTUAL_FLAG,
                Some(&GSS_MECH_KRB5),
            );
            let token = ctx
                .step(None, None)
                .map_err(|e| failed("initial context token", e))?;
            self.established = ctx.is_complete();
            self.ctx = Some(ctx);
            Ok(token.map(|t| t.to_vec()).unwrap_or_default())
        }

        pub(crate) fn step(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, SaslFailure> {
            let ctx = self
                .ctx
                .as_mut()
                .ok_or_else(|| SaslFailure("GSSAPI: no context".into()))?;
            if self.answered_layer {
                return Ok(None);
            }
            if !self.established {
                let out = ctx
                    .step(Some(token), None)
                    .map_err(|e| failed("context", e))?;
                self.established = ctx.is_complete();
                // Established: an empty token asks for the security layers
                // (Java's GssKrb5Client does the same).
                return Ok(Some(out.map(|t| t.to_vec()).unwrap_or_default()));
            }
            let layers = ctx.unwrap(token).map_err(|e| failed("unwrap", e))?;
            if layers.len() != 4 || layers[0] & 1 == 0 {
                return Err(SaslFailure(
                    "GSSAPI: the server offers no 'no security layer' option".into(),
                ));
            }
            // No security layer, no max buffer, no authorization id.
            let answer = ctx
                .wrap(false, &[1, 0, 0, 0])
                .map_err(|e| failed("wrap", e))?;
            self.answered_layer = true;
            Ok(Some(answer.to_vec()))
        }
    }
}

/// Why a SASL exchange failed (no secret in it): the server refused the
/// credentials (`code`), or its tokens made no sense to the mechanism.
#[derive(Debug, Clone)]
pub(crate) struct SaslFailure(pub(crate) String);

impl fmt::Display for SaslFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SASL authentication failed: {}", self.0)
    }
}

impl std::error::Error for SaslFailure {}

impl SaslFailure {
    /// The SASL failure inside a connect attempt's error, if it is one.
    pub(crate) fn in_io(e: &std::io::Error) -> Option<&SaslFailure> {
        e.get_ref().and_then(|e| e.downcast_ref::<SaslFailure>())
    }

    pub(crate) fn into_io(self) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, self)
    }
}

/// One DIGEST-MD5 exchange (client side).
pub(crate) struct DigestMd5 {
    username: String,
    password: Vec<u8>,
    /// After the response: the `rspauth` the server must send back.
    expect_rspauth: Option<String>,
}

impl DigestMd5 {
    /// The first token: DIGEST-MD5 has no initial response (Java sends an
    /// empty token).
    pub(crate) fn initial(&self) -> Vec<u8> {
        Vec::new()
    }

    /// The server's token → `Some(next token)`, or `None` when the exchange
    /// is complete (the server proved it knows the password).
    pub(crate) fn step(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, SaslFailure> {
        match self.expect_rspauth.take() {
            None => {
                let cnonce = cnonce();
                let (resp, rspauth) = self.respond(token, &cnonce)?;
                self.expect_rspauth = Some(rspauth);
                Ok(Some(resp.into_bytes()))
            }
            Some(want) => {
                let text = std::str::from_utf8(token)
                    .map_err(|_| SaslFailure("server's final token is not UTF-8".into()))?;
                let got = directives(text)
                    .into_iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("rspauth"))
                    .map(|(_, v)| v);
                match got {
                    Some(v) if v.eq_ignore_ascii_case(&want) => Ok(None),
                    Some(_) => Err(SaslFailure(
                        "the server's rspauth does not match (it does not know the password)"
                            .into(),
                    )),
                    None => Err(SaslFailure("no rspauth in the server's final token".into())),
                }
            }
        }
    }

    /// The digest-response to `challenge` and the rspauth to expect.
    fn respond(&self, challenge: &[u8], cnonce: &str) -> Result<(String, String), SaslFailure> {
        let text = std::str::from_utf8(challenge)
            .map_err(|_| SaslFailure("the server's challenge is not UTF-8".into()))?;
        let d = directives(text);
        let get = |k: &str| {
            d.iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.as_str())
        };
        let nonce = get("nonce")
            .ok_or_else(|| SaslFailure("the server's challenge has no nonce".into()))?;
        let qops = get("qop").unwrap_or("auth");
        if !qops.split(',').any(|q| q.trim() == "auth") {
            return Err(SaslFailure(format!(
                "the server offers qop {qops:?}, not auth"
            )));
        }
        if let Some(alg) = get("algorithm") {
            if !alg.eq_ignore_ascii_case("md5-sess") {
                return Err(SaslFailure(format!("unsupported algorithm {alg:?}")));
            }
        }
        let utf8 = get("charset").is_some_and(|c| c.eq_ignore_ascii_case("utf-8"));
        let realm = get("realm").unwrap_or("");
        let digest_uri = format!("{PROTOCOL}/{DIGEST_SERVER_NAME}");
        let nc = "00000001";
        let (response, rspauth) = digest_response(
            &encode(&self.username, utf8),
            &encode(realm, utf8),
            &encode_bytes(&self.password, utf8),
            nonce,
            cnonce,
            nc,
            &digest_uri,
        );
        let mut out = format!("username=\"{}\"", quote(&self.username));
        if get("realm").is_some() {
            out.push_str(&format!(",realm=\"{}\"", quote(realm)));
        }
        out.push_str(&format!(
            ",nonce=\"{}\",nc={nc},cnonce=\"{cnonce}\",digest-uri=\"{digest_uri}\",maxbuf=65536,response={response},qop=auth",
            quote(nonce)
        ));
        if utf8 {
            out.push_str(",charset=utf-8");
        }
        Ok((out, rspauth))
    }
}

/// RFC 2831 2.1.2.1: the response value and the rspauth value (both hex).
fn digest_response(
    username: &[u8],
    realm: &[u8],
    password: &[u8],
    nonce: &str,
    cnonce: &str,
    nc: &str,
    digest_uri: &str,
) -> (String, String) {
    let mut h = Md5::new();
    h.update(username);
    h.update(b":");
    h.update(realm);
    h.update(b":");
    h.update(password);
    let inner = h.finalize();
    let mut a1 = Md5::new();
    a1.update(inner);
    a1.update(format!(":{nonce}:{cnonce}").as_bytes());
    let ha1 = hex(&a1.finalize());
    let kd = |a2: &str| {
        let ha2 = hex(&Md5::digest(a2.as_bytes()));
        hex(&Md5::digest(
            format!("{ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}").as_bytes(),
        ))
    };
    (
        kd(&format!("AUTHENTICATE:{digest_uri}")),
        kd(&format!(":{digest_uri}")),
    )
}

/// RFC 2831: with `charset=utf-8`, a string whose characters all fit ISO
/// 8859-1 is hashed in ISO 8859-1 (Java's `DigestMD5Base` does the same).
fn encode(s: &str, utf8: bool) -> Vec<u8> {
    if utf8 && s.chars().any(|c| c as u32 > 0xff) {
        return s.as_bytes().to_vec();
    }
    s.chars().map(|c| (c as u32).min(0xff) as u8).collect()
}

fn encode_bytes(b: &[u8], utf8: bool) -> Vec<u8> {
    match std::str::from_utf8(b) {
        Ok(s) => encode(s, utf8),
        Err(_) => b.to_vec(),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A client nonce: 128 random bits (std's per-process random hash keys,
/// mixed with the time and a counter), hex.
fn cnonce() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut out = String::new();
    for i in 0..2u8 {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(now);
        h.write_u64(n);
        h.write_u8(i);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// `name=value` / `name="quoted value"` pairs, comma-separated (RFC 2831's
/// `#rule`); quoted values unescaped.
fn directives(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut it = s.chars().peekable();
    loop {
        while matches!(it.peek(), Some(c) if *c == ',' || c.is_whitespace()) {
            it.next();
        }
        let mut name = String::new();
        while let Some(&c) = it.peek() {
            if c == '=' || c == ',' {
                break;
            }
            name.push(c);
            it.next();
        }
        if name.is_empty() && it.peek().is_none() {
            break;
        }
        let mut value = String::new();
        if it.peek() == Some(&'=') {
            it.next();
            while matches!(it.peek(), Some(c) if c.is_whitespace()) {
                it.next();
            }
            if it.peek() == Some(&'"') {
                it.next();
                while let Some(c) = it.next() {
                    match c {
                        '\\' => {
                            if let Some(e) = it.next() {
                                value.push(e);
                            }
                        }
                        '"' => break,
                        c => value.push(c),
                    }
                }
                while matches!(it.peek(), Some(c) if *c != ',') {
                    it.next();
                }
            } else {
                while let Some(&c) = it.peek() {
                    if c == ',' {
                        break;
                    }
                    value.push(c);
                    it.next();
                }
            }
        }
        out.push((name.trim().to_string(), value.trim().to_string()));
        if it.peek().is_none() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 2831 section 4's example (IMAP, chris / secret).
    #[test]
    fn rfc2831_example() {
        let (resp, rspauth) = digest_response(
            b"chris",
            b"elwood.innosoft.com",
            b"secret",
            "OA6MG9tEQGm2hh",
            "OA6MHXh6VqTrRk",
            "00000001",
            "imap/elwood.innosoft.com",
        );
        assert_eq!(resp, "d388dad90d4bbd760a152321f2143af7");
        assert_eq!(rspauth, "ea40f60335c427b5527b84dbabcdfffd");
    }

    #[test]
    fn parses_challenges() {
        let d = directives(
            r#"realm="zk-sasl-md5",nonce="a\"b,c",qop="auth",charset=utf-8,algorithm=md5-sess"#,
        );
        assert_eq!(
            d,
            [
                ("realm", "zk-sasl-md5"),
                ("nonce", "a\"b,c"),
                ("qop", "auth"),
                ("charset", "utf-8"),
                ("algorithm", "md5-sess"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
    }

    #[test]
    fn exchange_checks_rspauth() {
        let cfg = SaslConfig::digest_md5("alice", "pw");
        let mut m = cfg.start();
        assert!(m.initial().unwrap().is_empty());
        let resp = m
            .step(br#"realm="zk-sasl-md5",nonce="n",qop="auth",charset=utf-8,algorithm=md5-sess"#)
            .unwrap()
            .unwrap();
        let resp = String::from_utf8(resp).unwrap();
        assert!(resp.starts_with("username=\"alice\",realm=\"zk-sasl-md5\",nonce=\"n\""));
        assert!(resp.contains("digest-uri=\"zookeeper/zk-sasl-md5\""));
        assert!(!resp.contains("pw"), "{resp}");
        assert!(m.step(b"rspauth=00").is_err());
        // Bad challenges are failures, not panics.
        for bad in [
            &b""[..],
            b"qop=auth-int,nonce=x",
            b"\xff",
            b"nonce=x,algorithm=md5",
        ] {
            assert!(cfg.start().step(bad).is_err(), "{bad:?}");
        }
        let dbg = format!("{cfg:?}");
        assert!(dbg.contains("alice") && !dbg.contains("pw\""), "{dbg}");
    }
}
