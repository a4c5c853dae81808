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
    username: String,
    password: Vec<u8>,
}

impl SaslConfig {
    /// DIGEST-MD5 with `username` and `password`: what a JAAS `Client` section
    /// with `org.apache.zookeeper.server.auth.DigestLoginModule` gives the Java
    /// client. The server must list the user in its JAAS `Server` section; the
    /// session's ACL id is then `sasl:<username>`.
    pub fn digest_md5(username: &str, password: impl AsRef<[u8]>) -> SaslConfig {
        SaslConfig {
            username: username.to_string(),
            password: password.as_ref().to_vec(),
        }
    }

    /// The user this configuration authenticates as.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The mechanism's name (`DIGEST-MD5`).
    pub fn mechanism(&self) -> &'static str {
        "DIGEST-MD5"
    }

    /// A fresh exchange for one connection.
    pub(crate) fn start(&self) -> DigestMd5 {
        DigestMd5 {
            username: self.username.clone(),
            password: self.password.clone(),
            expect_rspauth: None,
        }
    }
}

impl fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanism", &self.mechanism())
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
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
        assert!(m.initial().is_empty());
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
