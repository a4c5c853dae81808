//! HBase's `ZKUtil`: free functions over a [`ZooKeeperWatcher`], each named
//! after its Java static (`ZKUtil.createWithParents(zkw, p)` →
//! `zkutil::create_with_parents(zkw, p)`). Every call goes through the watcher's
//! [`RecoverableZooKeeper`], with its retries.
//!
//! # Conventions
//! - **Missing nodes are values, not errors**, as in HBase: a read of a node that
//!   does not exist gives `None` (or `false`); `NoNode` is returned as an error
//!   only where HBase throws it (`delete_node`, `set_data`, `create_and_watch`).
//!   Every other ZooKeeper error is returned unchanged, after the
//!   `RecoverableZooKeeper`'s retries (HBase also passes them to
//!   `zkw.keeperException`, which only re-throws).
//! - **"Watch"** means the watcher's default watch (`watch = true` on the client):
//!   the event reaches the [`ZooKeeperListener`](crate::ZooKeeperListener)s
//!   registered on `zkw`.
//! - **Paths** are checked before anything is sent: a bad path is
//!   [`Error::BadArguments`].
//! - Nodes are created persistent (unless a mode is given) with the open ACL
//!   (HBase's `createACL` on an unsecured cluster), and with the
//!   `RecoverableZooKeeper`'s metadata prefix before the data (stripped again on
//!   read).

use log::{debug, info, trace};

use crate::client::{AclPolicy, CreateMode, Op, Stat, MAX_PACKET};
use crate::error::{Error, Result, ZkError, ZkResultExt};
use crate::recoverable::RecoverableZooKeeper;
use crate::watcher::ZooKeeperWatcher;

// ---------------------------------------------------------------------------
// Path helpers
// ---------------------------------------------------------------------------

use crate::path::validate;
pub use crate::path::{get_node_name, get_parent, join_znode};

// ---------------------------------------------------------------------------
// Existence checks and watches
// ---------------------------------------------------------------------------

/// `ZKUtil.watchAndCheckExists`: sets a watch on `node` whether or not it
/// exists (an exists watch), and says whether it exists.
///
/// The watch fires on the node's creation, deletion or data change. Use it to
/// wait for a node to appear; to wait for a deletion use
/// [`set_watch_if_node_exists`], which leaves no watch behind on a missing node.
///
/// # Errors
/// `BadArguments` for a bad path; session errors.
#[doc(alias = "watchAndCheckExists")]
pub fn watch_and_check_exists(zkw: &ZooKeeperWatcher, node: &str) -> Result<bool> {
    watch_and_check_exists_rzk(zkw.recoverable_zookeeper(), node)
}

pub(crate) fn watch_and_check_exists_rzk(rzk: &RecoverableZooKeeper, node: &str) -> Result<bool> {
    validate(node)?;
    let exists = rzk.exists(node, true)?.is_some();
    if exists {
        debug!("set watcher on existing znode {node}");
    } else {
        debug!("set watcher on znode that does not yet exist, {node}");
    }
    Ok(exists)
}

/// `ZKUtil.setWatchIfNodeExists`: sets a data watch on `node` only if it
/// exists; `true` if the watch is set, `false` if the node does not exist (and
/// then **no** watch is left behind).
///
/// Like HBase 1.3 this reads the node's data with a watch instead of calling
/// `exists`: the server registers a `getData` watch only on an existing node,
/// while an `exists` watch on a missing node would stay armed and fire later
/// when some other client re-creates the path. A lock waiter uses this to wait
/// for its predecessor's deletion (see [`DeletionListener`](crate::DeletionListener)):
/// `false` means "already gone, look again", and no stray `NodeCreated` ever
/// reaches the listeners for that path.
///
/// # Errors
/// `BadArguments` for a bad path; `NoAuth` when the node may not be read;
/// session errors.
#[doc(alias = "setWatchIfNodeExists")]
pub fn set_watch_if_node_exists(zkw: &ZooKeeperWatcher, node: &str) -> Result<bool> {
    set_watch_if_node_exists_rzk(zkw.recoverable_zookeeper(), node)
}

pub(crate) fn set_watch_if_node_exists_rzk(rzk: &RecoverableZooKeeper, node: &str) -> Result<bool> {
    validate(node)?;
    Ok(rzk.get_data(node, true).optional()?.is_some())
}

/// `ZKUtil.checkExists`: the node's data version if it exists, `None` if not
/// (HBase returns -1). Sets no watch.
///
/// # Errors
/// `BadArguments` for a bad path; session errors.
#[doc(alias = "checkExists")]
pub fn check_exists(zkw: &ZooKeeperWatcher, node: &str) -> Result<Option<i32>> {
    check_exists_rzk(zkw.recoverable_zookeeper(), node)
}

pub(crate) fn check_exists_rzk(rzk: &RecoverableZooKeeper, node: &str) -> Result<Option<i32>> {
    validate(node)?;
    Ok(rzk.exists(node, false)?.map(|s| s.version))
}

// ---------------------------------------------------------------------------
// Listings
// ---------------------------------------------------------------------------

/// `ZKUtil.listChildrenAndWatchForNewChildren`: the names of `node`'s children
/// (unordered), with a watch on `node` that fires when its children change or it
/// is deleted. `None` if `node` does not exist (no watch is set then).
///
/// # Errors
/// `BadArguments` for a bad path; `NoAuth`; session errors.
#[doc(alias = "listChildrenAndWatchForNewChildren")]
pub fn list_children_and_watch_for_new_children(
    zkw: &ZooKeeperWatcher,
    node: &str,
) -> Result<Option<Vec<String>>> {
    validate(node)?;
    let children = zkw
        .recoverable_zookeeper()
        .get_children(node, true)
        .optional()?;
    if children.is_none() {
        debug!("unable to list children of znode {node} because it does not exist (not an error)");
    }
    Ok(children)
}

/// `ZKUtil.listChildrenAndWatchThem`: as
/// [`list_children_and_watch_for_new_children`], and also sets a watch on every
/// child ([`watch_and_check_exists`]) to hear of its deletion or change.
///
/// # Errors
/// As [`list_children_and_watch_for_new_children`].
#[doc(alias = "listChildrenAndWatchThem")]
pub fn list_children_and_watch_them(
    zkw: &ZooKeeperWatcher,
    node: &str,
) -> Result<Option<Vec<String>>> {
    let Some(children) = list_children_and_watch_for_new_children(zkw, node)? else {
        return Ok(None);
    };
    for child in &children {
        watch_and_check_exists(zkw, &join_znode(node, child))?;
    }
    Ok(Some(children))
}

/// `ZKUtil.listChildrenNoWatch`: the names of `node`'s children (unordered),
/// `None` if `node` does not exist. Sets no watch.
///
/// # Errors
/// `BadArguments` for a bad path; `NoAuth`; session errors.
#[doc(alias = "listChildrenNoWatch")]
pub fn list_children_no_watch(zkw: &ZooKeeperWatcher, node: &str) -> Result<Option<Vec<String>>> {
    validate(node)?;
    zkw.recoverable_zookeeper()
        .get_children(node, false)
        .optional()
}

// ---------------------------------------------------------------------------
// Data retrieval
// ---------------------------------------------------------------------------

/// `ZKUtil.getData`: the node's data, `None` if it does not exist. Sets no
/// watch.
///
/// # Errors
/// `BadArguments` for a bad path; `NoAuth`; session errors.
#[doc(alias = "getData")]
pub fn get_data(zkw: &ZooKeeperWatcher, node: &str) -> Result<Option<Vec<u8>>> {
    Ok(get_data_no_watch(zkw, node)?.map(|(data, _)| data))
}

/// `ZKUtil.getDataAndWatch(zkw, znode)`: the node's data, with a watch for its
/// next change or deletion. `None` if the node does not exist, and then no watch
/// is set.
///
/// # Errors
/// `BadArguments` for a bad path; `NoAuth`; session errors.
#[doc(alias = "getDataAndWatch")]
pub fn get_data_and_watch(zkw: &ZooKeeperWatcher, node: &str) -> Result<Option<Vec<u8>>> {
    Ok(get_data_and_watch_stat(zkw, node)?.map(|(data, _)| data))
}

/// `ZKUtil.getDataAndWatch(zkw, znode, stat)`: [`get_data_and_watch`], with the
/// node's `Stat`.
///
/// # Errors
/// As [`get_data_and_watch`].
#[doc(alias = "getDataAndWatch")]
pub fn get_data_and_watch_stat(
    zkw: &ZooKeeperWatcher,
    node: &str,
) -> Result<Option<(Vec<u8>, Stat)>> {
    get_data_and_watch_rzk(zkw.recoverable_zookeeper(), node)
}

pub(crate) fn get_data_and_watch_rzk(
    rzk: &RecoverableZooKeeper,
    node: &str,
) -> Result<Option<(Vec<u8>, Stat)>> {
    validate(node)?;
    let r = rzk.get_data(node, true).optional()?;
    match &r {
        Some((data, _)) => trace!(
            "retrieved {} byte(s) of data from znode {node} and set watcher",
            data.len()
        ),
        None => {
            trace!("unable to get data of znode {node} because it does not exist (not an error)")
        }
    }
    Ok(r)
}

/// `ZKUtil.getDataNoWatch`: the node's data and `Stat`, `None` if it does not
/// exist. Sets no watch.
///
/// # Errors
/// `BadArguments` for a bad path; `NoAuth`; session errors.
#[doc(alias = "getDataNoWatch")]
pub fn get_data_no_watch(zkw: &ZooKeeperWatcher, node: &str) -> Result<Option<(Vec<u8>, Stat)>> {
    validate(node)?;
    zkw.recoverable_zookeeper().get_data(node, false).optional()
}

// ---------------------------------------------------------------------------
// Data setting
// ---------------------------------------------------------------------------

/// `ZKUtil.setData`: sets the node's data, only at `version` when given (any
/// version for `None`); returns the new `Stat`. Sets no watch (but fires the
/// node's data watches).
///
/// HBase's javadoc promises `false` on a version mismatch, but its code throws
/// `BadVersionException`; zklock returns the error too, and the new `Stat` (for a
/// later compare-and-set) instead of a `bool`.
///
/// # Errors
/// `NoNode`, `BadVersion`, `NoAuth`; `BadArguments` for a bad path or data over
/// the packet limit; session errors.
#[doc(alias = "setData")]
pub fn set_data(
    zkw: &ZooKeeperWatcher,
    node: &str,
    data: &[u8],
    version: Option<i32>,
) -> Result<Stat> {
    validate(node)?;
    zkw.recoverable_zookeeper().set_data(node, data, version)
}

// ---------------------------------------------------------------------------
// Node creation
// ---------------------------------------------------------------------------

/// `ZKUtil.createEphemeralNodeAndWatch`: creates `node` ephemeral with `data`,
/// and sets a watch on it whether or not this call created it. `true` if this
/// call created the node, `false` if it already existed. If the node vanishes
/// between the two steps, it tries again.
///
/// # Errors
/// `NoNode` (no parent), `NoChildrenForEphemerals`, `NoAuth`; `BadArguments` for
/// a bad path; session errors.
#[doc(alias = "createEphemeralNodeAndWatch")]
pub fn create_ephemeral_node_and_watch(
    zkw: &ZooKeeperWatcher,
    node: &str,
    data: &[u8],
) -> Result<bool> {
    validate(node)?;
    let rzk = zkw.recoverable_zookeeper();
    loop {
        let created = match rzk.create(node, data, rzk.acl_for(node), CreateMode::Ephemeral) {
            Ok(_) => true,
            Err(e) if e.is(ZkError::NodeExists) => false,
            Err(e) => return Err(e),
        };
        if watch_and_check_exists(zkw, node)? {
            return Ok(created);
        }
        debug!("znode {node} existed but is gone again: creating it anew");
    }
}

/// `ZKUtil.createNodeIfNotExistsAndWatch`: creates `node` persistent with
/// `data` unless it exists, and sets a watch on it in both cases. `true` if this
/// call created it, `false` if it already existed.
///
/// # Errors
/// `NoNode` (no parent), `NoAuth`; `BadArguments` for a bad path; session errors.
#[doc(alias = "createNodeIfNotExistsAndWatch")]
pub fn create_node_if_not_exists_and_watch(
    zkw: &ZooKeeperWatcher,
    node: &str,
    data: &[u8],
) -> Result<bool> {
    validate(node)?;
    let rzk = zkw.recoverable_zookeeper();
    let created = match rzk.create(node, data, rzk.acl_for(node), CreateMode::Persistent) {
        Ok(_) => true,
        Err(e) if e.is(ZkError::NodeExists) => false,
        Err(e) => return Err(e),
    };
    rzk.exists(node, true)?;
    Ok(created)
}

/// `ZKUtil.createNodeIfNotExistsNoWatch`: creates `node` with `data` in `mode`
/// unless it exists. Sets no watch.
///
/// Returns the created path (with the sequence number for sequential modes),
/// or `None` when the node already existed. (HBase returns the given path in
/// that case, so a caller cannot tell whether it created the node.)
///
/// # Errors
/// `NoNode` (no parent), `NoChildrenForEphemerals`, `NoAuth`; `BadArguments` for
/// a bad path or a TTL mode; session errors.
#[doc(alias = "createNodeIfNotExistsNoWatch")]
pub fn create_node_if_not_exists_no_watch(
    zkw: &ZooKeeperWatcher,
    node: &str,
    data: &[u8],
    mode: CreateMode,
) -> Result<Option<String>> {
    // A sequential node's path is a prefix (it may end in `/`); the client
    // checks it with the sequence appended.
    if !mode.is_sequential() {
        validate(node)?;
    }
    let rzk = zkw.recoverable_zookeeper();
    match rzk.create(node, data, rzk.acl_for(node), mode) {
        Ok(created) => Ok(Some(created)),
        Err(e) if e.is(ZkError::NodeExists) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `ZKUtil.createAndWatch`: creates `node` persistent with `data` and sets a
/// watch on it; returns the new node's data version.
///
/// # Errors
/// `NodeExists` when the node exists (unlike the `..._if_not_exists` forms);
/// `SystemError` if the node vanished before the watch was set (HBase's choice);
/// `NoNode` (no parent), `NoAuth`; `BadArguments` for a bad path; session errors.
#[doc(alias = "createAndWatch")]
pub fn create_and_watch(zkw: &ZooKeeperWatcher, node: &str, data: &[u8]) -> Result<i32> {
    validate(node)?;
    let rzk = zkw.recoverable_zookeeper();
    rzk.create(node, data, rzk.acl_for(node), CreateMode::Persistent)?;
    match rzk.exists(node, true)? {
        Some(stat) => Ok(stat.version),
        // Likely a race: someone deleted the node. The exists watch stays set.
        None => Err(Error::zk(ZkError::SystemError, node)),
    }
}

/// `ZKUtil.createAndFailSilent(zkw, znode)`: creates `node` persistent and
/// empty unless it exists. Sets no watch.
///
/// # Errors
/// As [`create_and_fail_silent_data`].
#[doc(alias = "createAndFailSilent")]
pub fn create_and_fail_silent(zkw: &ZooKeeperWatcher, node: &str) -> Result<()> {
    create_and_fail_silent_data(zkw, node, &[])
}

/// `ZKUtil.createAndFailSilent(zkw, znode, data)`: creates `node` persistent
/// with `data` unless it exists. Sets no watch.
///
/// As in HBase, an existing node is never an error, even one the caller could
/// not have created: it checks for the node first, ignores `NodeExists`, and on
/// `NoAuth` succeeds if the node exists after all.
///
/// A deliberate difference from HBase 1.3: from ZooKeeper 3.8.4 / 3.9.2
/// (ZOOKEEPER-2590) `exists` needs READ, so HBase's check throws `NoAuth` for
/// an existing node the caller may not read. Here a refused `exists` goes on
/// to the create, whose `NodeExists` tells the node is there: `Ok` on every
/// server version, as HBase answers on the servers it was written for (the
/// watcher's base znodes at connect rely on it).
///
/// # Errors
/// `NoAuth` when the node does not exist and may not be created; `NoNode` (no
/// parent); `BadArguments` for a bad path; session errors.
#[doc(alias = "createAndFailSilent")]
pub fn create_and_fail_silent_data(zkw: &ZooKeeperWatcher, node: &str, data: &[u8]) -> Result<()> {
    zkw.recoverable_zookeeper()
        .create_and_fail_silent(node, data)
}

/// `ZKUtil.createWithParents(zkw, znode)`: creates `znode` and any missing
/// parents, all persistent and empty; an existing node is fine.
///
/// # Errors
/// `BadArguments` for a bad path; `NoAuth`; session errors; `NoNode` for `/`
/// when the connect string's chroot does not exist (HBase recurses forever
/// there).
#[doc(alias = "createWithParents")]
pub fn create_with_parents(zkw: &ZooKeeperWatcher, znode: &str) -> Result<()> {
    create_with_parents_data(zkw, znode, &[])
}

/// `ZKUtil.createWithParents(zkw, znode, data)`: as [`create_with_parents`], with
/// `data` on `znode` itself when this call creates it.
///
/// # Errors
/// As [`create_with_parents`].
#[doc(alias = "createWithParents")]
pub fn create_with_parents_data(zkw: &ZooKeeperWatcher, znode: &str, data: &[u8]) -> Result<()> {
    zkw.recoverable_zookeeper().create_with_parents(znode, data)
}

// ---------------------------------------------------------------------------
// Deletes
// ---------------------------------------------------------------------------

/// `ZKUtil.deleteNode(zkw, node, version)`: deletes `node`, only at `version`
/// when given (any version for `None`). `false` on a version mismatch (the node
/// stays). Sets no watch.
///
/// # Errors
/// `NoNode`, `NotEmpty` (the node has children; it stays), `NoAuth`;
/// `BadArguments` for a bad path; session errors.
#[doc(alias = "deleteNode")]
pub fn delete_node(zkw: &ZooKeeperWatcher, node: &str, version: Option<i32>) -> Result<bool> {
    validate(node)?;
    match zkw.recoverable_zookeeper().delete(node, version) {
        Ok(()) => Ok(true),
        Err(e) if e.is(ZkError::BadVersion) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `ZKUtil.deleteNodeFailSilent`: deletes `node` (any version); a missing node
/// is fine. Sets no watch.
///
/// # Errors
/// `NotEmpty`, `NoAuth`; `BadArguments` for a bad path; session errors.
#[doc(alias = "deleteNodeFailSilent")]
pub fn delete_node_fail_silent(zkw: &ZooKeeperWatcher, node: &str) -> Result<()> {
    validate(node)?;
    match zkw.recoverable_zookeeper().delete(node, None) {
        Ok(()) => Ok(()),
        Err(e) if e.is(ZkError::NoNode) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `ZKUtil.deleteNodeRecursively`: deletes `node` and everything under it;
/// idempotent (a missing node is fine).
///
/// As HBase, it lists the subtree breadth-first setting watches on every node
/// (so listeners hear each `NodeDeleted`), then deletes leaves first with
/// [`multi_or_sequential`] (falling back to one delete at a time when the
/// tree changed meanwhile): [`delete_node_recursively_multi_or_sequential`]
/// with the fallback on, for one root. A subtree too large for one request is
/// deleted in several `multi`s, in order. Not atomic as a whole.
///
/// # Errors
/// `NotEmpty` when a child was added concurrently; `NoAuth`; `BadArguments`
/// for a bad path; session errors.
#[doc(alias = "deleteNodeRecursively")]
pub fn delete_node_recursively(zkw: &ZooKeeperWatcher, node: &str) -> Result<()> {
    delete_node_recursively_multi_or_sequential(zkw, true, &[node])
}

/// `ZKUtil.deleteChildrenRecursively`: deletes everything under `node`, but not
/// `node` itself; a missing node is fine. Sets no watch. Leaves first, with
/// [`multi_or_sequential`] and its sequential fallback:
/// [`delete_children_recursively_multi_or_sequential`] with the fallback on,
/// for one root.
///
/// # Errors
/// `NotEmpty` when a child was added concurrently; `NoAuth`; `BadArguments`
/// for a bad path; session errors.
#[doc(alias = "deleteChildrenRecursively")]
pub fn delete_children_recursively(zkw: &ZooKeeperWatcher, node: &str) -> Result<()> {
    delete_children_recursively_multi_or_sequential(zkw, true, &[node])
}

/// `ZKUtil.deleteChildrenRecursivelyMultiOrSequential(zkw,
/// runSequentialOnMultiFailure, pathRoots...)`: deletes everything under each
/// of `path_roots`, but not the roots themselves; a missing root has nothing
/// under it. Sets no watch.
///
/// Every root's subtree is listed breadth-first, then all the deletes (each
/// root's nodes deepest first, the roots in the order given) go in **one**
/// [`multi_or_sequential`]: atomic, or, when the `multi` fails with
/// `NodeExists`, `NoNode`, `BadVersion` or `NoAuth` and
/// `run_sequential_on_multi_failure` is set, the same deletes one at a time,
/// a missing node being no error. An empty `path_roots` does nothing (HBase
/// logs "Given path is not valid!" and returns). Unlike HBase 1.3, deletes
/// too large for one request (the server's packet limit) go in several
/// `multi`s, in order, as HBase 2's `partitionOps` does, rather than failing.
///
/// # Errors
/// `BadArguments` for a bad path (before anything is sent); without the
/// fallback, [`Error::Multi`] with the first failing op (nothing deleted);
/// with it, the first error of a delete run on its own (`NotEmpty` when a
/// child was added concurrently, `NoAuth`); session errors.
///
/// # Examples
/// ```no_run
/// use zklock::zkutil;
/// # let zkw = zklock::ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// zkutil::delete_children_recursively_multi_or_sequential(
///     &zkw,
///     true,
///     &["/proc/acquired", "/proc/reached", "/proc/abort"],
/// )?;
/// # Ok::<(), zklock::Error>(())
/// ```
#[doc(alias = "deleteChildrenRecursivelyMultiOrSequential")]
pub fn delete_children_recursively_multi_or_sequential<S: AsRef<str>>(
    zkw: &ZooKeeperWatcher,
    run_sequential_on_multi_failure: bool,
    path_roots: &[S],
) -> Result<()> {
    delete_trees(zkw, run_sequential_on_multi_failure, path_roots, false)
}

/// `ZKUtil.deleteNodeRecursivelyMultiOrSequential(zkw,
/// runSequentialOnMultiFailure, pathRoots...)`: deletes each of `path_roots`
/// and everything under it; a missing root is fine.
///
/// As HBase, every root's subtree is listed breadth-first setting watches on
/// every node, and each root that exists gets an exists watch (listeners
/// hear each `NodeDeleted`); then all the deletes (each root's nodes deepest
/// first, then the root; the roots in the order given) go in **one**
/// [`multi_or_sequential`], with the same fallback, empty list and size
/// rules as [`delete_children_recursively_multi_or_sequential`].
///
/// # Errors
/// As [`delete_children_recursively_multi_or_sequential`].
#[doc(alias = "deleteNodeRecursivelyMultiOrSequential")]
pub fn delete_node_recursively_multi_or_sequential<S: AsRef<str>>(
    zkw: &ZooKeeperWatcher,
    run_sequential_on_multi_failure: bool,
    path_roots: &[S],
) -> Result<()> {
    delete_trees(zkw, run_sequential_on_multi_failure, path_roots, true)
}

/// The two multi-root deletes: every root's subtree (deepest first), and the
/// root itself when `with_roots` (then with watches, as HBase).
fn delete_trees<S: AsRef<str>>(
    zkw: &ZooKeeperWatcher,
    run_sequential_on_multi_failure: bool,
    path_roots: &[S],
    with_roots: bool,
) -> Result<()> {
    if path_roots.is_empty() {
        log::warn!("no path to delete");
        return Ok(());
    }
    for root in path_roots {
        validate(root.as_ref())?;
    }
    let mut paths = Vec::new();
    for root in path_roots {
        let root = root.as_ref();
        let mut tree = list_children_bfs(zkw, root, with_roots)?;
        tree.reverse();
        paths.append(&mut tree);
        if with_roots && zkw.recoverable_zookeeper().exists(root, true)?.is_some() {
            paths.push(root.to_string());
        }
    }
    delete_in_chunks(zkw, paths, run_sequential_on_multi_failure)
}

/// Every node under `node` (not `node` itself), breadth-first: parents before
/// their children. With `watch`, HBase's `listChildrenBFSAndWatchThem`.
fn list_children_bfs(zkw: &ZooKeeperWatcher, node: &str, watch: bool) -> Result<Vec<String>> {
    let mut tree = Vec::new();
    let mut queue = std::collections::VecDeque::from([node.to_string()]);
    while let Some(current) = queue.pop_front() {
        let children = if watch {
            list_children_and_watch_them(zkw, &current)?
        } else {
            list_children_no_watch(zkw, &current)?
        };
        for child in children.unwrap_or_default() {
            let path = join_znode(&current, &child);
            queue.push_back(path.clone());
            tree.push(path);
        }
    }
    Ok(tree)
}

/// Deletes `paths` in order, fail-silent, in `multi`s that each fit in a
/// request (one when they fit), with the sequential fallback when
/// `run_sequential_on_multi_failure`.
fn delete_in_chunks(
    zkw: &ZooKeeperWatcher,
    paths: Vec<String>,
    run_sequential_on_multi_failure: bool,
) -> Result<()> {
    let ops: Vec<ZkUtilOp> = paths
        .into_iter()
        .map(|path| ZkUtilOp::DeleteNodeFailSilent { path })
        .collect();
    for chunk in partition_ops(&ops, MULTI_BUDGET) {
        multi_or_sequential(zkw, chunk, run_sequential_on_multi_failure)?;
    }
    Ok(())
}

/// How many request bytes one `multi` built by the delete helpers may use: half
/// the server's packet limit, leaving room for the metadata prefix and framing.
const MULTI_BUDGET: usize = MAX_PACKET / 2;

/// Splits `ops` into consecutive runs whose estimated request size stays within
/// `budget` bytes (each run holds at least one op). HBase 2's `partitionOps`.
fn partition_ops(ops: &[ZkUtilOp], budget: usize) -> Vec<&[ZkUtilOp]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut size = 0;
    for (i, op) in ops.iter().enumerate() {
        let len = op.estimated_size();
        if i > start && size + len > budget {
            out.push(&ops[start..i]);
            start = i;
            size = 0;
        }
        size += len;
    }
    if start < ops.len() {
        out.push(&ops[start..]);
    }
    out
}

// ---------------------------------------------------------------------------
// multi
// ---------------------------------------------------------------------------

/// One operation of [`multi_or_sequential`]: HBase's `ZKUtil.ZKUtilOp`, whose
/// sequential meaning is "fail silent" for creates and deletes.
///
/// ```
/// use zklock::zkutil::ZkUtilOp;
/// let op = ZkUtilOp::create_and_fail_silent("/a", b"x".to_vec());
/// assert_eq!(op.path(), "/a");
/// assert_eq!(ZkUtilOp::delete_node_fail_silent("/b").path(), "/b");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[doc(alias = "ZKUtilOp")]
pub enum ZkUtilOp {
    /// `ZKUtilOp.CreateAndFailSilent`: create a persistent node; sequentially, an
    /// existing node is fine ([`create_and_fail_silent_data`]).
    CreateAndFailSilent {
        /// The node.
        path: String,
        /// Its data.
        data: Vec<u8>,
    },
    /// `ZKUtilOp.DeleteNodeFailSilent`: delete a node (any version);
    /// sequentially, a missing node is fine ([`delete_node_fail_silent`]).
    DeleteNodeFailSilent {
        /// The node.
        path: String,
    },
    /// `ZKUtilOp.SetData`: set a node's data, at `version` if given
    /// ([`set_data`]; never silent).
    SetData {
        /// The node.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The expected version; `None` for any.
        version: Option<i32>,
    },
}

impl ZkUtilOp {
    /// `ZKUtilOp.createAndFailSilent(path, data)`.
    #[doc(alias = "createAndFailSilent")]
    pub fn create_and_fail_silent(path: impl Into<String>, data: impl Into<Vec<u8>>) -> ZkUtilOp {
        ZkUtilOp::CreateAndFailSilent {
            path: path.into(),
            data: data.into(),
        }
    }

    /// `ZKUtilOp.deleteNodeFailSilent(path)`.
    #[doc(alias = "deleteNodeFailSilent")]
    pub fn delete_node_fail_silent(path: impl Into<String>) -> ZkUtilOp {
        ZkUtilOp::DeleteNodeFailSilent { path: path.into() }
    }

    /// `ZKUtilOp.setData(path, data)`: any version.
    #[doc(alias = "setData")]
    pub fn set_data(path: impl Into<String>, data: impl Into<Vec<u8>>) -> ZkUtilOp {
        ZkUtilOp::SetData {
            path: path.into(),
            data: data.into(),
            version: None,
        }
    }

    /// `ZKUtilOp.getPath()`: the node the operation is about.
    #[doc(alias = "getPath")]
    pub fn path(&self) -> &str {
        match self {
            ZkUtilOp::CreateAndFailSilent { path, .. }
            | ZkUtilOp::DeleteNodeFailSilent { path }
            | ZkUtilOp::SetData { path, .. } => path,
        }
    }

    /// HBase's `toZooKeeperOp`; a create takes its ACL from `acl`.
    fn to_zookeeper_op(&self, acl: &AclPolicy) -> Op {
        match self {
            ZkUtilOp::CreateAndFailSilent { path, data } => Op::Create {
                path: path.clone(),
                data: data.clone(),
                acl: acl.acl_for(path).to_vec(),
                mode: CreateMode::Persistent,
            },
            ZkUtilOp::DeleteNodeFailSilent { path } => Op::delete(path.as_str(), None),
            ZkUtilOp::SetData {
                path,
                data,
                version,
            } => Op::set_data(path.as_str(), data.as_slice(), *version),
        }
    }

    /// A generous estimate of the op's bytes in a `multi` request (header,
    /// path, data, ACL, metadata prefix).
    fn estimated_size(&self) -> usize {
        let data = match self {
            ZkUtilOp::CreateAndFailSilent { data, .. } | ZkUtilOp::SetData { data, .. } => {
                data.len() + 128
            }
            ZkUtilOp::DeleteNodeFailSilent { .. } => 0,
        };
        32 + self.path().len() + data
    }

    /// Runs the op on its own, with its fail-silent meaning.
    fn run_sequentially(&self, zkw: &ZooKeeperWatcher) -> Result<()> {
        match self {
            ZkUtilOp::CreateAndFailSilent { path, data } => {
                create_and_fail_silent_data(zkw, path, data)
            }
            ZkUtilOp::DeleteNodeFailSilent { path } => delete_node_fail_silent(zkw, path),
            ZkUtilOp::SetData {
                path,
                data,
                version,
            } => set_data(zkw, path, data, *version).map(drop),
        }
    }
}

/// Whether a failed `multi` may be redone op by op (HBase's list: the codes a
/// fail-silent op, or a retry one at a time, can get past).
fn sequential_fallback_applies(code: ZkError) -> bool {
    matches!(
        code,
        ZkError::NodeExists | ZkError::NoNode | ZkError::BadVersion | ZkError::NoAuth
    )
}

/// `ZKUtil.multiOrSequential`: runs `ops` atomically with ZooKeeper's `multi`
/// (through the `RecoverableZooKeeper`). An empty list is a no-op.
///
/// If the `multi` fails with `NodeExists`, `NoNode`, `BadVersion` or `NoAuth`
/// and `run_sequential_on_multi_failure` is set, the ops are run again one at a
/// time with their fail-silent meaning (a create of an existing node and a
/// delete of a missing node are ignored): the final state is what the caller
/// wanted, but not reached atomically. (HBase runs sequentially unless
/// `hbase.zookeeper.useMulti` is set; zklock always tries `multi` first.)
///
/// # Errors
/// Without the fallback (or for other codes): [`Error::Multi`] with the index
/// and code of the first failing op — nothing was applied. In the fallback: the
/// first error of an op run on its own (ops before it are applied). Bad paths
/// are `BadArguments` before anything is sent; session errors.
///
/// # Examples
/// ```no_run
/// use zklock::zkutil::{self, ZkUtilOp};
/// # let zkw = zklock::ZooKeeperWatcher::connect("127.0.0.1:2181", "doc", None)?;
/// zkutil::multi_or_sequential(
///     &zkw,
///     &[
///         ZkUtilOp::create_and_fail_silent("/app/config", b"v1".to_vec()),
///         ZkUtilOp::delete_node_fail_silent("/app/stale"),
///     ],
///     true,
/// )?;
/// # Ok::<(), zklock::Error>(())
/// ```
#[doc(alias = "multiOrSequential")]
pub fn multi_or_sequential(
    zkw: &ZooKeeperWatcher,
    ops: &[ZkUtilOp],
    run_sequential_on_multi_failure: bool,
) -> Result<()> {
    if ops.is_empty() {
        return Ok(());
    }
    for op in ops {
        validate(op.path())?;
    }
    let zk_ops: Vec<Op> = ops
        .iter()
        .map(|op| op.to_zookeeper_op(zkw.recoverable_zookeeper().acl_policy()))
        .collect();
    match zkw.recoverable_zookeeper().multi(&zk_ops) {
        Ok(_) => Ok(()),
        Err(Error::Multi { index, code, .. })
            if run_sequential_on_multi_failure && sequential_fallback_applies(code) =>
        {
            info!(
                "multi failed at op {index} ({}): {code}; running the {} ops sequentially",
                ops[index.min(ops.len() - 1)].path(),
                ops.len()
            );
            ops.iter().try_for_each(|op| op.run_sequentially(zkw))
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
        // join then split round-trips.
        let p = join_znode("/x/y", "z");
        assert_eq!(get_parent(&p), Some("/x/y"));
        assert_eq!(get_node_name(&p), "z");
    }

    #[test]
    fn ops_convert_to_zookeeper_ops() {
        let create = ZkUtilOp::create_and_fail_silent("/a", b"d".to_vec());
        assert_eq!(
            create.to_zookeeper_op(&AclPolicy::open()),
            Op::create("/a", b"d".to_vec(), CreateMode::Persistent)
        );
        assert_eq!(
            ZkUtilOp::delete_node_fail_silent("/b").to_zookeeper_op(&AclPolicy::open()),
            Op::delete("/b", None)
        );
        let set = ZkUtilOp::SetData {
            path: "/c".into(),
            data: b"e".to_vec(),
            version: Some(3),
        };
        assert_eq!(
            set.to_zookeeper_op(&AclPolicy::open()),
            Op::set_data("/c", b"e".to_vec(), Some(3))
        );
        assert_eq!(
            ZkUtilOp::set_data("/c", b"e".to_vec()).to_zookeeper_op(&AclPolicy::open()),
            Op::set_data("/c", b"e".to_vec(), None)
        );
        assert_eq!(set.path(), "/c");
    }

    #[test]
    fn fallback_codes_are_hbases() {
        for code in [
            ZkError::NodeExists,
            ZkError::NoNode,
            ZkError::BadVersion,
            ZkError::NoAuth,
        ] {
            assert!(sequential_fallback_applies(code), "{code:?}");
        }
        for code in [
            ZkError::NotEmpty,
            ZkError::ConnectionLoss,
            ZkError::SessionExpired,
            ZkError::RuntimeInconsistency,
        ] {
            assert!(!sequential_fallback_applies(code), "{code:?}");
        }
    }

    #[test]
    fn partition_keeps_order_and_budget() {
        let ops: Vec<ZkUtilOp> = (0..10)
            .map(|i| ZkUtilOp::delete_node_fail_silent(format!("/n{i:04}")))
            .collect();
        let one = ops[0].estimated_size();
        // Three ops per chunk.
        let chunks = partition_ops(&ops, one * 3);
        assert_eq!(
            chunks.iter().map(|c| c.len()).collect::<Vec<_>>(),
            [3, 3, 3, 1]
        );
        let flat: Vec<&ZkUtilOp> = chunks.iter().flat_map(|c| c.iter()).collect();
        assert_eq!(flat, ops.iter().collect::<Vec<_>>());
        // An op bigger than the budget still gets a chunk of its own.
        let big = vec![
            ZkUtilOp::create_and_fail_silent("/big", vec![0; 100]),
            ZkUtilOp::delete_node_fail_silent("/small"),
        ];
        assert_eq!(partition_ops(&big, 10).len(), 2);
        assert!(partition_ops(&[], 10).is_empty());
        assert_eq!(partition_ops(&ops, usize::MAX).len(), 1);
    }
}
