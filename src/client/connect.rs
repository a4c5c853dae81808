//! The connect string (`host:port[,host:port...][/chroot]`) and the chroot's
//! translation of paths.

use crate::error::{Error, Result};
use crate::path::validate_path;

/// A parsed connect string: `host:port[,host:port...][/chroot]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectString {
    pub(crate) hosts: Vec<String>,
    pub(crate) chroot: Option<String>,
}

impl ConnectString {
    pub(crate) fn parse(s: &str) -> Result<ConnectString> {
        let bad = |why: &str| {
            Err(Error::BadArguments(format!(
                "invalid connect string {s:?}: {why}"
            )))
        };
        let s = s.trim();
        let (hosts_part, chroot) = match s.find('/') {
            Some(i) => (&s[..i], Some(&s[i..])),
            None => (s, None),
        };
        let chroot = match chroot {
            None | Some("/") => None,
            Some(c) => {
                validate_path(c, false)?;
                Some(c.to_string())
            }
        };
        let mut hosts = Vec::new();
        for h in hosts_part.split(',') {
            let h = h.trim();
            if h.is_empty() {
                continue;
            }
            // host, host:port, [v6], [v6]:port
            let (host, port) = if let Some(rest) = h.strip_prefix('[') {
                match rest.split_once(']') {
                    Some((host, "")) => (format!("[{host}]"), None),
                    Some((host, p)) => match p.strip_prefix(':') {
                        Some(p) => (format!("[{host}]"), Some(p)),
                        None => return bad("junk after ipv6 address"),
                    },
                    None => return bad("unclosed ["),
                }
            } else {
                match h.rsplit_once(':') {
                    Some((host, p)) => (host.to_string(), Some(p)),
                    None => (h.to_string(), None),
                }
            };
            if host.is_empty() {
                return bad("empty host");
            }
            let port = match port {
                None => 2181,
                Some(p) => match p.parse::<u16>() {
                    Ok(p) if p > 0 => p,
                    _ => return bad("bad port"),
                },
            };
            hosts.push(format!("{host}:{port}"));
        }
        if hosts.is_empty() {
            return bad("no host");
        }
        Ok(ConnectString { hosts, chroot })
    }
}

/// Client path → server path.
pub(crate) fn prepend_chroot(chroot: Option<&str>, path: &str) -> String {
    match chroot {
        None => path.to_string(),
        Some(c) if path == "/" => c.to_string(),
        Some(c) => format!("{c}{path}"),
    }
}

/// Server path → client path. A path outside the chroot is returned unchanged
/// (Java does the same).
pub(crate) fn strip_chroot(chroot: Option<&str>, server_path: &str) -> String {
    match chroot {
        None => server_path.to_string(),
        Some(c) => match server_path.strip_prefix(c) {
            Some("") => "/".to_string(),
            Some(rest) if rest.starts_with('/') => rest.to_string(),
            _ => server_path.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_strings() {
        let c = ConnectString::parse("127.0.0.1:2181,localhost:2182/app/root").unwrap();
        assert_eq!(c.hosts, ["127.0.0.1:2181", "localhost:2182"]);
        assert_eq!(c.chroot.as_deref(), Some("/app/root"));
        let c = ConnectString::parse("h1, h2:3/").unwrap();
        assert_eq!(c.hosts, ["h1:2181", "h2:3"]);
        assert_eq!(c.chroot, None);
        let c = ConnectString::parse("[::1]:2181,[::1]").unwrap();
        assert_eq!(c.hosts, ["[::1]:2181", "[::1]:2181"]);
        for bad in [
            "", ",", "h:0", "h:x", "h:99999", "/chroot", "h/a/", "[::1", ":80",
        ] {
            assert!(
                matches!(ConnectString::parse(bad), Err(Error::BadArguments(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn chroot_round_trip() {
        let c = Some("/app");
        assert_eq!(prepend_chroot(c, "/"), "/app");
        assert_eq!(prepend_chroot(c, "/x"), "/app/x");
        assert_eq!(strip_chroot(c, "/app"), "/");
        assert_eq!(strip_chroot(c, "/app/x"), "/x");
        assert_eq!(strip_chroot(c, "/apple"), "/apple");
        assert_eq!(prepend_chroot(None, "/x"), "/x");
        assert_eq!(strip_chroot(None, "/x"), "/x");
    }
}
