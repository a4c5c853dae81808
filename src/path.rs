//! Znode paths, below every other layer: validation as ZooKeeper's
//! `PathUtils.validatePath`, and HBase's `ZKUtil` path helpers (re-exported by
//! [`zkutil`](crate::zkutil)).

use crate::error::{Error, Result};

/// Checks a znode path the way ZooKeeper's `PathUtils.validatePath` does:
/// absolute, no trailing `/` (but `/` itself), no empty, `.` or `..` segment, no
/// NUL or control characters. With `sequential`, a trailing `/` is allowed (the
/// server appends the sequence number).
pub(crate) fn validate_path(path: &str, sequential: bool) -> Result<()> {
    let bad = |why: &str| Err(Error::BadArguments(format!("invalid path {path:?}: {why}")));
    if path.is_empty() {
        return bad("path is empty");
    }
    if !path.starts_with('/') {
        return bad("path must start with /");
    }
    if path == "/" {
        return if sequential {
            bad("cannot create a sequential node at /")
        } else {
            Ok(())
        };
    }
    let body = if sequential && path.ends_with('/') {
        &path[1..path.len() - 1]
    } else if path.ends_with('/') {
        return bad("path must not end with /");
    } else {
        &path[1..]
    };
    for segment in body.split('/') {
        match segment {
            "" => return bad("empty segment"),
            "." | ".." => return bad("relative segment"),
            _ => {}
        }
    }
    if path.contains('\0') {
        return bad("null character");
    }
    // The server's check (ZooKeeper 3.8's `PathUtils.validatePath`), on UTF-16
    // units as Java sees them, bounds inclusive: a character outside the Basic
    // Multilingual Plane is a surrogate pair, which the server refuses.
    let refused = |u: u16| {
        (0x0001..=0x001f).contains(&u)
            || (0x007f..=0x009f).contains(&u)
            || (0xd800..=0xf8ff).contains(&u)
            || (0xfff0..=0xffff).contains(&u)
    };
    if let Some(c) = path
        .chars()
        .find(|c| c.encode_utf16(&mut [0; 2]).iter().any(|&u| refused(u)))
    {
        return bad(&format!("invalid character {c:?}"));
    }
    Ok(())
}

/// [`validate_path`] of a node path (not a sequential create's prefix).
pub(crate) fn validate(path: &str) -> Result<()> {
    validate_path(path, false)
}

/// `ZKUtil.joinZNode`: `prefix` + `/` + `suffix` (no doubled `/` under the root).
///
/// ```
/// use zklock::zkutil::join_znode;
/// assert_eq!(join_znode("/a", "b"), "/a/b");
/// assert_eq!(join_znode("/", "b"), "/b");
/// ```
#[doc(alias = "joinZNode")]
pub fn join_znode(prefix: &str, suffix: &str) -> String {
    if prefix.ends_with('/') {
        format!("{prefix}{suffix}")
    } else {
        format!("{prefix}/{suffix}")
    }
}

/// `ZKUtil.getParent`: the parent of `node`, `None` for the root or a path
/// without `/`.
///
/// ```
/// use zklock::zkutil::get_parent;
/// assert_eq!(get_parent("/a/b"), Some("/a"));
/// assert_eq!(get_parent("/a"), Some("/"));
/// assert_eq!(get_parent("/"), None);
/// ```
#[doc(alias = "getParent")]
pub fn get_parent(node: &str) -> Option<&str> {
    match node.rfind('/') {
        Some(0) if node.len() > 1 => Some("/"),
        Some(0) | None => None,
        Some(i) => Some(&node[..i]),
    }
}

/// `ZKUtil.getNodeName`: the last segment of `path`.
///
/// ```
/// use zklock::zkutil::get_node_name;
/// assert_eq!(get_node_name("/a/b"), "b");
/// assert_eq!(get_node_name("b"), "b");
/// ```
#[doc(alias = "getNodeName")]
pub fn get_node_name(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_paths() {
        for p in [
            "/",
            "/a",
            "/a/b",
            "/a.b/c..d",
            "/zk-lock/write-x-0000000001",
            "/ünï",
        ] {
            validate_path(p, false).unwrap();
        }
        validate_path("/a/", true).unwrap();
        validate_path("/a/x-", true).unwrap();
    }

    #[test]
    fn invalid_paths_are_bad_arguments() {
        for p in [
            "",
            "a",
            "a/b",
            "/a/",
            "//",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/.",
            "/..",
            "/a\0b",
            "/a\u{1}",
            "/\u{7f}",
            "/\u{fff5}",
            "/locks/\u{1f600}",
            "/\u{e000}",
        ] {
            match validate_path(p, false) {
                Err(Error::BadArguments(msg)) => assert!(msg.contains("invalid path"), "{msg}"),
                other => panic!("{p:?} → {other:?}"),
            }
        }
        assert!(validate_path("/", true).is_err());
        assert!(validate_path("/a//", true).is_err());
    }

    /// What the server refuses is refused here, and only that: the ends of its
    /// ranges are refused (ZooKeeper 3.8 refused `/\u{7f}` in `tests/client.rs`),
    /// their neighbours accepted.
    #[test]
    fn the_servers_ranges_and_their_neighbours() {
        for p in [
            "/\u{1f}",
            "/\u{7f}",
            "/\u{9f}",
            "/\u{d7ff}\u{e000}",
            "/\u{f8ff}",
            "/\u{fff0}",
            "/\u{ffff}",
            "/\u{10000}",
        ] {
            assert!(validate_path(p, false).is_err(), "{p:?}");
        }
        for p in [
            "/\u{20}",
            "/\u{7e}",
            "/\u{a0}",
            "/\u{d7ff}",
            "/\u{f900}",
            "/\u{ffef}",
            "/\u{e9}",
        ] {
            validate_path(p, false).unwrap();
        }
    }
}
