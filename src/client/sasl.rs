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
    ///
    /// The exchange is strict as RFC 2831 asks: a server challenge without
    /// `algorithm=md5-sess`, with a directive that may appear once appearing
    /// twice, or malformed, and a user name or password with characters
    /// outside ISO 8859-1 when the server does not offer `charset=utf-8`
    /// (ZooKeeper's servers do), end the handle with `AuthFailed`, the reason
    /// logged at warn level, as a refused password does.
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

impl SaslConfig {
    /// Who logs in, for messages: "alice", or the client principal (or "the
    /// ticket cache's principal") to the service principal. No secret.
    pub(crate) fn who(&self) -> String {
        match &self.mech {
            Mech::DigestMd5 { username, .. } => username.clone(),
            #[cfg(feature = "kerberos")]
            Mech::Gssapi {
                server_principal,
                client_principal,
            } => format!(
                "{} to {server_principal}",
                client_principal
                    .as_deref()
                    .unwrap_or("the ticket cache's principal")
            ),
        }
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
                Ok(Some(resp))
            }
            Some(want) => {
                // response-auth (RFC 2831 2.1.3): hex digits, in any charset.
                let d = directives(&latin1_text(token))?;
                once(&d, &["rspauth"], "final token")?;
                match get(&d, "rspauth") {
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

    /// The digest-response to `challenge` (its bytes) and the rspauth to
    /// expect. Strict as RFC 2831 2.1.1 asks of a client ("abort the
    /// authentication exchange"): a challenge without `nonce` or
    /// `algorithm=md5-sess`, with a directive that may appear only once
    /// appearing more than once, with a `charset` other than `utf-8`, or
    /// malformed is a failure; so is a user name or password with a
    /// character outside ISO 8859-1 when the server did not offer
    /// `charset=utf-8` (it cannot be sent). Several `realm`s are allowed: the
    /// first is taken.
    fn respond(&self, challenge: &[u8], cnonce: &str) -> Result<(Vec<u8>, String), SaslFailure> {
        let (d, utf8) = parse_challenge(challenge)?;
        let nonce = get(&d, "nonce")
            .ok_or_else(|| SaslFailure("the server's challenge has no nonce".into()))?;
        let qops = get(&d, "qop").unwrap_or("auth");
        if !qops.split(',').any(|q| q.trim() == "auth") {
            return Err(SaslFailure(format!(
                "the server offers qop {qops:?}, not auth"
            )));
        }
        match get(&d, "algorithm") {
            Some(alg) if alg.eq_ignore_ascii_case("md5-sess") => {}
            Some(alg) => return Err(SaslFailure(format!("unsupported algorithm {alg:?}"))),
            None => {
                return Err(SaslFailure(
                    "the server's challenge has no algorithm (RFC 2831: algorithm=md5-sess is \
                     required)"
                        .into(),
                ))
            }
        }
        let realm = get(&d, "realm").unwrap_or("");
        let digest_uri = format!("{PROTOCOL}/{DIGEST_SERVER_NAME}");
        let nc = "00000001";
        let (response, rspauth) = digest_response(
            &encode(&self.username, utf8, "user name")?,
            &encode(realm, utf8, "realm")?,
            &encode_bytes(&self.password, utf8, "password")?,
            nonce,
            cnonce,
            nc,
            &digest_uri,
        );
        let mut out = format!("username=\"{}\"", quote(&self.username));
        if get(&d, "realm").is_some() {
            out.push_str(&format!(",realm=\"{}\"", quote(realm)));
        }
        out.push_str(&format!(
            ",nonce=\"{}\",nc={nc},cnonce=\"{cnonce}\",digest-uri=\"{digest_uri}\",maxbuf=65536,response={response},qop=auth",
            quote(nonce)
        ));
        if utf8 {
            out.push_str(",charset=utf-8");
            return Ok((out.into_bytes(), rspauth));
        }
        // Without charset=utf-8 the response is in ISO 8859-1: every
        // character fits (the user name was checked, the realm and the nonce
        // came in ISO 8859-1).
        let out = latin1(&out)
            .ok_or_else(|| SaslFailure("the response cannot be encoded in ISO 8859-1".into()))?;
        Ok((out, rspauth))
    }
}

/// The directives a DIGEST-MD5 challenge may carry at most once (RFC 2831
/// 2.1.1; `nonce` and `algorithm` exactly once). `realm` may repeat;
/// directives the client does not know are ignored, repeated or not.
const ONCE_IN_CHALLENGE: [&str; 7] = [
    "nonce",
    "qop",
    "stale",
    "maxbuf",
    "charset",
    "algorithm",
    "cipher",
];

/// The challenge's directives, and whether it offers `charset=utf-8`.
/// Without it the challenge is in ISO 8859-1 (RFC 2831 2.1.1), with it in
/// UTF-8.
fn parse_challenge(challenge: &[u8]) -> Result<(Vec<(String, String)>, bool), SaslFailure> {
    // Directive names and the syntax are ASCII: the same in both charsets.
    let d = directives(&latin1_text(challenge))?;
    once(&d, &ONCE_IN_CHALLENGE, "challenge")?;
    match get(&d, "charset") {
        None => Ok((d, false)),
        Some(c) if c.eq_ignore_ascii_case("utf-8") => {
            let text = std::str::from_utf8(challenge).map_err(|_| {
                SaslFailure("the server's challenge says charset=utf-8 but is not UTF-8".into())
            })?;
            Ok((directives(text)?, true))
        }
        Some(c) => Err(SaslFailure(format!(
            "the server's challenge has charset={c:?} (RFC 2831 allows only utf-8)"
        ))),
    }
}

/// The first value of directive `name` (names are case-insensitive).
fn get<'a>(d: &'a [(String, String)], name: &str) -> Option<&'a str> {
    d.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Fails when one of `names` appears more than once in `d` (RFC 2831: the
/// client aborts the exchange).
fn once(d: &[(String, String)], names: &[&str], what: &str) -> Result<(), SaslFailure> {
    for name in names {
        if d.iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
            > 1
        {
            return Err(SaslFailure(format!(
                "the server's {what} has {name} more than once (RFC 2831: the client aborts)"
            )));
        }
    }
    Ok(())
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

/// `s` in ISO 8859-1, when every character fits.
fn latin1(s: &str) -> Option<Vec<u8>> {
    s.chars().map(|c| u8::try_from(c).ok()).collect()
}

/// Bytes read as ISO 8859-1 (every byte is a character).
fn latin1_text(b: &[u8]) -> String {
    b.iter().map(|&b| char::from(b)).collect()
}

/// `s` (the `what`: user name, realm) as it is hashed (RFC 2831 2.1.2.1):
/// in ISO 8859-1 when every character fits, even with `charset=utf-8` (as
/// Java's `DigestMD5Base`); else in UTF-8 when the server offered
/// `charset=utf-8`; else it cannot be sent: a failure that names `what` and
/// never its value.
fn encode(s: &str, utf8: bool, what: &str) -> Result<Vec<u8>, SaslFailure> {
    match latin1(s) {
        Some(b) => Ok(b),
        None if utf8 => Ok(s.as_bytes().to_vec()),
        None => Err(SaslFailure(format!(
            "the {what} has characters outside ISO 8859-1 and the server did not offer \
             charset=utf-8 (RFC 2831: it cannot be sent)"
        ))),
    }
}

/// A password: text (UTF-8) as [`encode`]; other bytes as given.
fn encode_bytes(b: &[u8], utf8: bool, what: &str) -> Result<Vec<u8>, SaslFailure> {
    match std::str::from_utf8(b) {
        Ok(s) => encode(s, utf8, what),
        Err(_) => Ok(b.to_vec()),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A client nonce: 128 bits from the OS's CSPRNG, hex.
fn cnonce() -> String {
    crate::util::os_random::<16>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `name=value` / `name="quoted value"` pairs, comma-separated (RFC 2831's
/// `#rule`: empty elements are skipped); quoted values unescaped. A
/// directive without a name or without `=`, an unterminated quoted string
/// or text after one is a failure (the client aborts).
fn directives(s: &str) -> Result<Vec<(String, String)>, SaslFailure> {
    let malformed = |why: &str| SaslFailure(format!("the server's token is malformed: {why}"));
    let mut out = Vec::new();
    let mut it = s.chars().peekable();
    loop {
        while matches!(it.peek(), Some(c) if *c == ',' || c.is_whitespace()) {
            it.next();
        }
        if it.peek().is_none() {
            break;
        }
        let mut name = String::new();
        while let Some(&c) = it.peek() {
            if c == '=' || c == ',' {
                break;
            }
            name.push(c);
            it.next();
        }
        let name = name.trim().to_string();
        if name.is_empty() {
            return Err(malformed("a directive without a name"));
        }
        if it.next() != Some('=') {
            return Err(malformed(&format!("directive {name:?} has no value")));
        }
        while matches!(it.peek(), Some(c) if c.is_whitespace()) {
            it.next();
        }
        let mut value = String::new();
        if it.peek() == Some(&'"') {
            it.next();
            let mut closed = false;
            while let Some(c) = it.next() {
                match c {
                    '\\' => match it.next() {
                        Some(e) => value.push(e),
                        None => break,
                    },
                    '"' => {
                        closed = true;
                        break;
                    }
                    c => value.push(c),
                }
            }
            if !closed {
                return Err(malformed(&format!(
                    "directive {name:?}: unterminated quotes"
                )));
            }
            while matches!(it.peek(), Some(c) if c.is_whitespace()) {
                it.next();
            }
            if !matches!(it.peek(), None | Some(',')) {
                return Err(malformed(&format!(
                    "directive {name:?}: text after the quoted value"
                )));
            }
        } else {
            while let Some(&c) = it.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                it.next();
            }
            value = value.trim().to_string();
        }
        out.push((name, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 128 bits from the OS's CSPRNG, as 32 hex digits, never the same.
    #[test]
    fn a_cnonce_is_128_random_bits_in_hex() {
        let (a, b) = (cnonce(), cnonce());
        assert_eq!(a.len(), 32, "{a}");
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }

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
        )
        .unwrap();
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

    const GOOD: &str =
        r#"realm="zk-sasl-md5",nonce="n",qop="auth",charset=utf-8,algorithm=md5-sess"#;

    /// The failure of `user` / `password`'s first step on `challenge`.
    fn refused(user: &str, password: &str, challenge: &[u8]) -> String {
        match SaslConfig::digest_md5(user, password)
            .start()
            .step(challenge)
        {
            Err(e) => e.to_string(),
            Ok(r) => panic!("{challenge:?} accepted: {r:?}"),
        }
    }

    /// RFC 2831 2.1.1: `algorithm` is required ("This directive is required
    /// and MUST appear exactly once; if not present, or if multiple
    /// instances are present, the client should abort").
    #[test]
    fn a_challenge_without_algorithm_is_refused() {
        let e = refused(
            "alice",
            "pw",
            br#"realm="zk-sasl-md5",nonce="n",qop="auth",charset=utf-8"#,
        );
        assert!(e.contains("no algorithm"), "{e}");
        let e = refused("alice", "pw", br#"nonce="n",algorithm=md5"#);
        assert!(e.contains("unsupported algorithm"), "{e}");
    }

    /// RFC 2831 2.1.1: a directive that may appear once appearing more than
    /// once aborts the exchange (the first is not silently taken); `realm`
    /// may repeat, and unknown directives are ignored, repeated or not.
    #[test]
    fn duplicated_directives_are_refused() {
        for dup in [
            r#",nonce="m""#,
            ",algorithm=md5-sess",
            r#",qop="auth""#,
            ",charset=utf-8",
            ",maxbuf=1024,maxbuf=2048",
            ",stale=true,stale=true",
            r#",cipher="rc4",cipher="rc4""#,
            ",NONCE=m",
        ] {
            let challenge = format!("{GOOD}{dup}");
            let e = refused("alice", "pw", challenge.as_bytes());
            assert!(e.contains("more than once"), "{challenge}: {e}");
        }
        let ok = format!(r#"realm="other",{GOOD},x-unknown=1,x-unknown=2"#);
        let resp = SaslConfig::digest_md5("alice", "pw")
            .start()
            .step(ok.as_bytes())
            .unwrap()
            .unwrap();
        // The first realm is taken.
        assert!(String::from_utf8(resp)
            .unwrap()
            .contains(r#"realm="other""#));
        // A duplicated rspauth in the final token too.
        let mut m = SaslConfig::digest_md5("alice", "pw").start();
        m.step(GOOD.as_bytes()).unwrap();
        let e = m.step(b"rspauth=00,rspauth=00").unwrap_err().to_string();
        assert!(e.contains("more than once"), "{e}");
    }

    /// Without `charset=utf-8` everything is ISO 8859-1 (RFC 2831 2.1.1): a
    /// user name or password with a character outside it cannot be sent,
    /// and is a failure that never shows the password (not clamped to 0xFF).
    #[test]
    fn characters_outside_latin1_without_utf8_are_refused() {
        let latin1_only = br#"realm="zk-sasl-md5",nonce="n",qop="auth",algorithm=md5-sess"#;
        let e = refused("\u{101}lice", "pw", latin1_only);
        assert!(e.contains("user name") && e.contains("ISO 8859-1"), "{e}");
        let e = refused("alice", "p\u{101}ss-\u{2713}", latin1_only);
        assert!(e.contains("password") && e.contains("ISO 8859-1"), "{e}");
        assert!(!e.contains('\u{2713}') && !e.contains("ss-"), "{e}");
        // With charset=utf-8 both go in UTF-8, and the response says so.
        let resp = SaslConfig::digest_md5("\u{101}lice", "p\u{101}ss")
            .start()
            .step(GOOD.as_bytes())
            .unwrap()
            .unwrap();
        let resp = String::from_utf8(resp).unwrap();
        assert!(resp.starts_with("username=\"\u{101}lice\""), "{resp}");
        assert!(resp.ends_with(",charset=utf-8"), "{resp}");
        // A charset other than utf-8 is not in the RFC's grammar.
        let e = refused(
            "alice",
            "pw",
            br#"nonce="n",algorithm=md5-sess,charset=iso-8859-1"#,
        );
        assert!(e.contains("charset"), "{e}");
    }

    /// ISO 8859-1 names and challenges without `charset=utf-8`: the
    /// challenge's bytes are ISO 8859-1 (a realm byte 0xE9 is `é`, not bad
    /// UTF-8), and the response is sent in ISO 8859-1, hashed the same way.
    #[test]
    fn latin1_challenges_and_responses_without_utf8() {
        let challenge = b"realm=\"r\xe9alm\",nonce=\"n\",qop=\"auth\",algorithm=md5-sess";
        let d = DigestMd5 {
            username: "j\u{f6}rg".into(),
            password: "p\u{e4}ss".as_bytes().to_vec(),
            expect_rspauth: None,
        };
        let (resp, rspauth) = d.respond(challenge, "c").unwrap();
        let want = b"username=\"j\xf6rg\",realm=\"r\xe9alm\",nonce=\"n\"";
        assert!(resp.starts_with(want), "{resp:?}");
        assert!(!resp.windows(10).any(|w| w == b"charset=ut"));
        let (response, expected) = digest_response(
            b"j\xf6rg",
            b"r\xe9alm",
            b"p\xe4ss",
            "n",
            "c",
            "00000001",
            "zookeeper/zk-sasl-md5",
        );
        assert_eq!(rspauth, expected);
        let text = latin1_text(&resp);
        assert!(text.contains(&format!(",response={response},")), "{text}");
    }

    /// A malformed token is a failure, never a guess.
    #[test]
    fn malformed_tokens_are_refused() {
        for bad in [
            r#"nonce="n,algorithm=md5-sess"#,
            r#"nonce="n"x,algorithm=md5-sess"#,
            r#"nonce="n",algorithm"#,
            r#"=x,nonce="n",algorithm=md5-sess"#,
        ] {
            let e = refused("alice", "pw", bad.as_bytes());
            assert!(e.contains("malformed"), "{bad}: {e}");
        }
        // Empty list elements and spaces are the #rule's, accepted.
        assert!(SaslConfig::digest_md5("alice", "pw")
            .start()
            .step(br#" , nonce = "n" ,, algorithm = md5-sess , "#)
            .is_ok());
    }
}
