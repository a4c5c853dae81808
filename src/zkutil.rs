//! HBase's `ZKUtil`: free functions over a [`ZooKeeperWatcher`], each named
//! after its Java static (`ZKUtil.createWithParents(zkw, p)` →
//! `zkutil::create_with_parents(zkw, p)`). Every call goes through the watcher's
//! [`RecoverableZooKeeper`](crate::RecoverableZooKeeper), with its retries.

use crate::client::{Acl, CreateMode};
use crate::error::{Result, ZkError};
use crate::watcher::ZooKeeperWatcher;

/// `ZKUtil.joinZNode`: `prefix` + `/` + `suffix` (no doubled `/` under the root).
///
/// ```
/// use zklock::zkutil::join_znode;
/// assert_eq!(join_znode("/a", "b"), "/a/b");
/// assert_eq!(join_znode("/", "b"), "/b");
/// ```
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
pub fn get_node_name(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// `ZKUtil.createWithParents(zkw, znode)`: creates `znode` and any missing
/// parents, all persistent and empty; an existing node is fine.
///
/// # Errors
/// `BadArguments` for a bad path; `NoAuth`; session errors.
pub fn create_with_parents(zkw: &ZooKeeperWatcher, znode: &str) -> Result<()> {
    create_with_parents_data(zkw, znode, &[])
}

/// `ZKUtil.createWithParents(zkw, znode, data)`: as [`create_with_parents`], with
/// `data` on `znode` itself when this call creates it.
///
/// # Errors
/// As [`create_with_parents`].
pub fn create_with_parents_data(zkw: &ZooKeeperWatcher, znode: &str, data: &[u8]) -> Result<()> {
    crate::client::validate_path(znode)?;
    if znode == "/" {
        return Ok(());
    }
    let rzk = zkw.recoverable_zookeeper();
    match rzk.create(znode, data, Acl::open_unsafe(), CreateMode::Persistent) {
        Ok(_) => Ok(()),
        Err(e) if e.is(ZkError::NodeExists) => Ok(()),
        Err(e) if e.is(ZkError::NoNode) => {
            if let Some(parent) = get_parent(znode) {
                create_with_parents(zkw, parent)?;
            }
            create_with_parents_data(zkw, znode, data)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_helpers() {
        assert_eq!(join_znode("/a/b", "c"), "/a/b/c");
        assert_eq!(get_parent("/a/b/c"), Some("/a/b"));
        assert_eq!(get_parent("a"), None);
        assert_eq!(get_node_name("/"), "");
        assert_eq!(
            get_node_name("/a/b/write-x-0000000001"),
            "write-x-0000000001"
        );
    }
}
