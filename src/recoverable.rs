//! `RecoverableZooKeeper`: every ZooKeeper call of the toolkit, with HBase's
//! retries and its rules for making non-idempotent operations safe to retry.

use std::sync::Arc;
use std::time::Instant;

use log::{debug, info, warn};

use crate::client::{
    Acl, AclPolicy, ClientInfo, CreateMode, CreatedAndListed, Deadline, Op, OpResult, ReadOp,
    ReadResult, Stat, Watcher, ZooKeeper,
};
use crate::error::{Error, Result, ZkError};
use crate::metadata::{append_metadata, remove_metadata};
use crate::retry::{RetryConfig, RetryCounter};
use crate::sequence::unique_tag;

/// HBase's `RecoverableZooKeeper`: a [`ZooKeeper`] handle whose calls retry
/// recoverable errors and stay correct when they do.
///
/// Only `ConnectionLoss` and `OperationTimeout` are retried, sleeping per the
/// [`RetryConfig`] (default: 3 retries after 1 s, 2 s, 4 s); `SessionExpired` and
/// every other code are returned at once. When the retries are spent, the last
/// error is returned unchanged (logged at warn). Each retry is logged at debug.
///
/// # Retry rules (HBase's)
/// | operation | on a retry |
/// |---|---|
/// | `exists`, `get_children`, `get_data`, `get_acl`, `set_acl`, `sync`, `get_all_children_number`, `multi_read` | plain retry |
/// | `delete` | `NoNode` on a retry means the earlier attempt deleted it: success (on the first attempt `NoNode` is an error) |
/// | `set_data` | `BadVersion` on a retry: read the node back; if it holds our write (same metadata salt), success |
/// | `create`, not sequential | `NodeExists` on a retry: read back; if the data is ours, success, else the error |
/// | `create`, sequential | the name carries a tag unique to this call: `<path><tag><sequence>` (16 hex digits, then ZooKeeper's 10-digit sequence: `write-0123456789abcdef0000000042`); a retry first looks for a child with that tag ([`find_previous_sequential_node`](Self::find_previous_sequential_node)) and adopts it |
/// | `multi` | plain retry of the whole transaction, no read-back: if the lost attempt was applied, the retry runs on top of it. A create then fails with [`Error::Multi`] `NodeExists` although the node holds our data, a delete with `NoNode`, an op guarded by a version (`Op::Check`, versioned set/delete) with `BadVersion`; an unversioned `set_data` is applied twice and succeeds. Nothing of the failed retry is applied, but the lost attempt stays applied: on a `Multi` error after a retry, read the nodes to learn the outcome |
///
/// HBase tags sequential nodes with one identifier per process, so two threads
/// of a process can adopt each other's node after a connection loss; zklock's tag
/// is unique per call.
///
/// # Data format
/// `create` and `set_data` store HBase's metadata prefix before the data (see
/// [`append_metadata`](crate::append_metadata): magic `0xFF`, id length, this
/// handle's identifier, an 8-byte random salt) so a retry can recognise its own
/// write; `get_data` strips it, and returns data without a prefix unchanged. Data
/// written by HBase reads the same.
///
/// A plain reader (a non-HBase service, `zkCli`, a config watcher) sees the
/// prefix before the value. [`with_metadata_prefix(false)`](Self::with_metadata_prefix)
/// (or the watcher's
/// [`with_metadata_prefix`](crate::ZooKeeperWatcherBuilder::with_metadata_prefix))
/// writes the data as given, at a cost to two retry rules, which can then no
/// longer tell this write from an identical one by another writer:
///
/// | operation | on a retry, without the prefix |
/// |---|---|
/// | `create`, not sequential | `NodeExists`: success if the node holds the same bytes and, for an ephemeral node, belongs to this session; a persistent node another writer created with the same bytes meanwhile is taken for ours |
/// | `set_data` | `BadVersion`: success if the node holds the same bytes and, with a version, is at `version + 1`; another writer's identical write at that version is taken for ours (without a version: any identical data) |
/// | sequential `create`, `delete`, `multi`, reads | unchanged (the sequential tag is in the name) |
///
/// # Threads and cloning
/// `Send + Sync`, a cheap `Clone` sharing the one session.
#[derive(Clone)]
pub struct RecoverableZooKeeper {
    inner: Arc<RecoverableInner>,
    /// The session's handle, bounded by this handle's deadline (see
    /// [`RecoverableZooKeeper::with_deadline`]).
    zk: ZooKeeper,
}

struct RecoverableInner {
    identifier: String,
    retry: RetryConfig,
    /// Whether writes carry HBase's metadata prefix (default true).
    metadata: bool,
    /// The ACLs of the nodes zklock creates (default open).
    acl: AclPolicy,
}

impl std::fmt::Debug for RecoverableZooKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecoverableZooKeeper")
            .field("identifier", &self.inner.identifier)
            .field("retry", &self.inner.retry)
            .field("metadata", &self.inner.metadata)
            .field("acl", &self.inner.acl)
            .field("zk", &self.zk)
            .field("deadline", &self.zk.deadline())
            .finish()
    }
}

impl RecoverableZooKeeper {
    /// Wraps `zk`. `identifier` goes into the metadata of every write (HBase uses
    /// the process name; an empty one becomes `pid@host`).
    pub fn new(zk: ZooKeeper, identifier: &str, retry: RetryConfig) -> RecoverableZooKeeper {
        let identifier = if identifier.is_empty() {
            default_identifier()
        } else {
            identifier.to_string()
        };
        RecoverableZooKeeper {
            inner: Arc::new(RecoverableInner {
                identifier,
                retry,
                metadata: true,
                acl: AclPolicy::open(),
            }),
            zk,
        }
    }

    /// A handle on the same session whose writes carry HBase's metadata prefix
    /// (`true`, the default, as HBase) or store the data as given (`false`),
    /// for data that non-HBase readers read. What `false` costs the `create`
    /// and `set_data` retry rules is in the [type's docs](Self#data-format).
    /// Reads strip a prefix either way.
    #[must_use]
    pub fn with_metadata_prefix(&self, on: bool) -> RecoverableZooKeeper {
        RecoverableZooKeeper {
            inner: Arc::new(RecoverableInner {
                identifier: self.inner.identifier.clone(),
                retry: self.inner.retry,
                metadata: on,
                acl: self.inner.acl.clone(),
            }),
            zk: self.zk.clone(),
        }
    }

    /// A handle on the same session whose node creation (its own, `zkutil`'s)
    /// takes ACLs from `policy` (HBase's `ZKUtil.createACL`, Curator's
    /// `ACLProvider`). Default [`AclPolicy::open`].
    #[must_use]
    pub fn with_acl_policy(&self, policy: AclPolicy) -> RecoverableZooKeeper {
        RecoverableZooKeeper {
            inner: Arc::new(RecoverableInner {
                identifier: self.inner.identifier.clone(),
                retry: self.inner.retry,
                metadata: self.inner.metadata,
                acl: policy,
            }),
            zk: self.zk.clone(),
        }
    }

    /// The ACL policy of the nodes zklock creates through this handle, as
    /// it applies to the session now ([`AclPolicy::for_session`] with
    /// [`ZooKeeper::has_identity`]).
    pub fn acl_policy(&self) -> &AclPolicy {
        self.inner.acl.for_session(self.zk.has_identity())
    }

    /// The ACL the policy gives a node at `path` (see [`AclPolicy::acl_for`]).
    pub fn acl_for(&self, path: &str) -> &[Acl] {
        self.acl_policy().acl_for(path)
    }

    /// Whether writes carry HBase's metadata prefix.
    pub fn metadata_prefix(&self) -> bool {
        self.inner.metadata
    }

    /// `data` as this handle stores it: with the metadata prefix, or as given.
    pub(crate) fn encode(&self, data: &[u8]) -> Vec<u8> {
        if self.inner.metadata {
            append_metadata(&self.inner.identifier, data)
        } else {
            data.to_vec()
        }
    }

    /// This handle with every call, retries included, ended by `deadline` (or
    /// its own, if earlier): each client call is bounded by it (see
    /// [`ZooKeeper::with_deadline`]) and no retry starts whose backoff would pass
    /// it; the last error is returned. A cheap clone sharing the session.
    #[must_use]
    pub fn with_deadline(&self, deadline: Deadline) -> RecoverableZooKeeper {
        RecoverableZooKeeper {
            inner: self.inner.clone(),
            zk: self.zk.with_deadline(deadline),
        }
    }

    /// This handle with every call made in the session that is current now,
    /// and only in it: after a session renewal they fail with
    /// `SessionExpired` (see `crate::engine::call::CallSession`).
    pub(crate) fn pinned(&self) -> RecoverableZooKeeper {
        RecoverableZooKeeper {
            inner: self.inner.clone(),
            zk: self.zk.pinned(),
        }
    }

    /// The deadline this handle's calls end by.
    pub fn deadline(&self) -> Deadline {
        self.zk.deadline()
    }

    /// The underlying client.
    #[doc(alias = "getZooKeeper")]
    pub fn zookeeper(&self) -> &ZooKeeper {
        &self.zk
    }

    /// The identifier written into data's metadata.
    #[doc(alias = "getIdentifier")]
    pub fn identifier(&self) -> &str {
        &self.inner.identifier
    }

    /// The retry settings.
    pub fn retry_config(&self) -> RetryConfig {
        self.inner.retry
    }

    /// The session id.
    #[doc(alias = "getSessionId")]
    pub fn session_id(&self) -> i64 {
        self.zk.session_id()
    }

    /// The connection state.
    #[doc(alias = "getState")]
    pub fn state(&self) -> crate::client::State {
        self.zk.state()
    }

    /// Closes the session (idempotent).
    pub fn close(&self) -> Result<()> {
        self.zk.close()
    }

    /// Closes the session in the background, never waiting (what a `Drop`
    /// calls; see `ZooKeeper::close_in_background`).
    pub(crate) fn close_in_background(&self) {
        self.zk.close_in_background()
    }

    /// Runs `f` in HBase's retry loop; `f` gets whether this is a retry. (The
    /// trackers' reads, made with asynchronous calls, use it too.)
    pub(crate) fn retrying<T>(
        &self,
        what: &str,
        path: &str,
        mut f: impl FnMut(bool) -> Result<T>,
    ) -> Result<T> {
        let mut counter = RetryCounter::new(self.inner.retry);
        loop {
            match f(counter.is_retry()) {
                Err(e) if e.is_retryable() => {
                    // A caller's deadline (a lock's try_acquire) ends the retries
                    // when the next sleep would pass it.
                    let past_deadline = self.zk.deadline().instant().is_some_and(|d| {
                        Instant::now() + counter.backoff_time(counter.attempt_times()) >= d
                    });
                    if past_deadline {
                        debug!(
                            "ZooKeeper {what} {path}: {e}; the caller's deadline stops the retries"
                        );
                        return Err(e);
                    }
                    if !counter.should_retry() {
                        warn!(
                            "ZooKeeper {what} {path} failed after {} attempts: {e}",
                            counter.attempt_times() + 1
                        );
                        return Err(e);
                    }
                    debug!(
                        "ZooKeeper {what} {path}: {e}; retry {} of {} after {:?}",
                        counter.attempt_times() + 1,
                        counter.max_attempts(),
                        counter.backoff_time(counter.attempt_times())
                    );
                    counter.sleep_until_next_retry();
                }
                other => return other,
            }
        }
    }

    /// Deletes `path` (at `version`, or any). `NoNode` on a retry is success.
    ///
    /// # Errors
    /// `NoNode` (first attempt), `BadVersion`, `NotEmpty`, session errors.
    pub fn delete(&self, path: &str, version: Option<i32>) -> Result<()> {
        self.retrying("delete", path, |is_retry| {
            match self.zk.delete(path, version) {
                Err(e) if is_retry && e.is(ZkError::NoNode) => {
                    info!("node {path} already deleted: an earlier attempt succeeded");
                    Ok(())
                }
                other => other,
            }
        })
    }

    /// `exists` with the default watcher when `watch`.
    pub fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>> {
        self.retrying("exists", path, |_| self.zk.exists(path, watch))
    }

    /// `exists` with `watcher` (registered once however many attempts).
    #[doc(alias = "exists")]
    pub fn exists_watch(&self, path: &str, watcher: &Arc<dyn Watcher>) -> Result<Option<Stat>> {
        self.retrying("exists", path, |_| {
            self.zk.exists_watch(path, watcher.clone())
        })
    }

    /// Children of `path`, with the default watcher when `watch`.
    #[doc(alias = "getChildren")]
    pub fn get_children(&self, path: &str, watch: bool) -> Result<Vec<String>> {
        self.retrying("getChildren", path, |_| self.zk.get_children(path, watch))
    }

    /// Children of `path` with `watcher`.
    #[doc(alias = "getChildren")]
    pub fn get_children_watch(
        &self,
        path: &str,
        watcher: &Arc<dyn Watcher>,
    ) -> Result<Vec<String>> {
        self.retrying("getChildren", path, |_| {
            self.zk.get_children_watch(path, watcher.clone())
        })
    }

    /// Children and the node's `Stat`.
    #[doc(alias = "getChildren")]
    pub fn get_children2(&self, path: &str, watch: bool) -> Result<(Vec<String>, Stat)> {
        self.retrying("getChildren", path, |_| self.zk.get_children2(path, watch))
    }

    /// The ensemble's configuration ([`ZooKeeper::get_config`]: it ignores
    /// the chroot), retried on `ConnectionLoss` and `OperationTimeout`.
    /// The data is the server's own (it carries no metadata prefix).
    /// (`reconfig` is not retried here, a lost one may have been applied:
    /// call it on [`zookeeper`](Self::zookeeper) with `from_config`.)
    ///
    /// # Errors
    /// As [`ZooKeeper::get_config`], after the retries.
    #[doc(alias = "getConfig")]
    pub fn get_config(&self, watch: bool) -> Result<(crate::client::ClientConfig, Stat)> {
        self.retrying("getConfig", "/zookeeper/config", |_| {
            self.zk.get_config(watch)
        })
    }

    /// Data without the metadata prefix, and `Stat`.
    #[doc(alias = "getData")]
    pub fn get_data(&self, path: &str, watch: bool) -> Result<(Vec<u8>, Stat)> {
        self.retrying("getData", path, |_| self.zk.get_data(path, watch))
            .map(|(d, s)| (remove_metadata(&d).to_vec(), s))
    }

    /// Data without the metadata prefix, and `Stat`, with `watcher`.
    #[doc(alias = "getData")]
    pub fn get_data_watch(
        &self,
        path: &str,
        watcher: &Arc<dyn Watcher>,
    ) -> Result<(Vec<u8>, Stat)> {
        self.retrying("getData", path, |_| {
            self.zk.get_data_watch(path, watcher.clone())
        })
        .map(|(d, s)| (remove_metadata(&d).to_vec(), s))
    }

    /// ZooKeeper 3.6's `getAllChildrenNumber`: how many descendants `path`
    /// has, at every depth (see [`ZooKeeper::get_all_children_number`]).
    ///
    /// # Errors
    /// `NoNode`, `NoAuth`, [`Error::Unsupported`](crate::Error::Unsupported)
    /// (`code()` `Unimplemented`: a server before 3.6), session errors.
    #[doc(alias = "getAllChildrenNumber")]
    pub fn get_all_children_number(&self, path: &str) -> Result<i32> {
        self.retrying("getAllChildrenNumber", path, |_| {
            self.zk.get_all_children_number(path)
        })
    }

    /// ZooKeeper 3.7's `whoAmI` (see [`ZooKeeper::who_am_i`]): the session's
    /// identities as the server knows them; retried on `ConnectionLoss`.
    ///
    /// # Errors
    /// [`Error::Unsupported`](crate::Error::Unsupported) from a server before
    /// 3.7 (not retried), session errors.
    #[doc(alias = "whoAmI")]
    pub fn who_am_i(&self) -> Result<Vec<ClientInfo>> {
        self.retrying("whoAmI", "/", |_| self.zk.who_am_i())
    }

    /// ZooKeeper 3.6's `multiRead` (see [`ZooKeeper::multi_read`]): the
    /// reads' answers in one round trip, the data of each `GetData` without
    /// its metadata prefix.
    ///
    /// # Errors
    /// `BadArguments`, `Unimplemented` (server before 3.6), session errors; a
    /// failed read is a [`ReadResult::Error`] among the results.
    pub fn multi_read(&self, ops: &[ReadOp]) -> Result<Vec<ReadResult>> {
        let first = ops.first().map_or("/", ReadOp::path).to_string();
        let results = self.retrying("multiRead", &first, |_| self.zk.multi_read(ops))?;
        Ok(results
            .into_iter()
            .map(|r| match r {
                ReadResult::Data { data, stat } => ReadResult::Data {
                    data: remove_metadata(&data).to_vec(),
                    stat,
                },
                other => other,
            })
            .collect())
    }

    /// Data with its metadata prefix, as stored.
    pub fn get_raw_data(&self, path: &str) -> Result<(Vec<u8>, Stat)> {
        self.retrying("getData", path, |_| self.zk.get_data(path, false))
    }

    /// Sets `path`'s data (with the metadata prefix) at `version` or any.
    /// `BadVersion` on a retry reads back: if the node holds this write, success
    /// (without the prefix: the same bytes at `version + 1`, see the
    /// [type's docs](Self#data-format)).
    ///
    /// # Errors
    /// `NoNode`, `BadVersion`, session errors.
    #[doc(alias = "setData")]
    pub fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat> {
        let new_data = self.encode(data);
        self.retrying("setData", path, |is_retry| {
            match self.zk.set_data(path, &new_data, version) {
                Err(e) if is_retry && e.is(ZkError::BadVersion) => {
                    let (current, stat) = self.zk.get_data(path, false)?;
                    let at_our_version = self.inner.metadata
                        || version.map_or(true, |v| stat.version == v.wrapping_add(1));
                    if current == new_data && at_our_version {
                        info!("setData {path}: an earlier attempt succeeded");
                        Ok(stat)
                    } else {
                        Err(e)
                    }
                }
                other => other,
            }
        })
    }

    /// The node's ACL.
    #[doc(alias = "getAcl")]
    pub fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat)> {
        self.retrying("getAcl", path, |_| self.zk.get_acl(path))
    }

    /// Sets the node's ACL.
    #[doc(alias = "setAcl")]
    pub fn set_acl(&self, path: &str, acl: &[Acl], version: Option<i32>) -> Result<Stat> {
        self.retrying("setAcl", path, |_| self.zk.set_acl(path, acl, version))
    }

    /// Syncs the server with the leader for `path`.
    pub fn sync(&self, path: &str) -> Result<()> {
        self.retrying("sync", path, |_| self.zk.sync(path))
    }

    /// Creates a node with the metadata prefix before `data`; returns the path.
    ///
    /// Sequential modes name the node `<path><tag><sequence>`, the tag unique to
    /// this call, and adopt the node an earlier attempt created. Non-sequential:
    /// `NodeExists` on a retry is success when the node holds this write.
    ///
    /// # Errors
    /// `NodeExists`, `NoNode` (parent), `NoAuth`, session errors.
    pub fn create(&self, path: &str, data: &[u8], acl: &[Acl], mode: CreateMode) -> Result<String> {
        self.create2(path, data, acl, mode).map(|(p, _)| p)
    }

    /// [`create`](Self::create), also returning the new node's `Stat` (one
    /// request: opcode create2; an adopted or read-back node costs one more).
    ///
    /// # Errors
    /// As [`create`](Self::create).
    #[doc(alias = "create")]
    pub fn create2(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<(String, Stat)> {
        let new_data = self.encode(data);
        if mode.is_sequential() {
            return self.create_sequential(&tagged_prefix(path), &new_data, acl, mode);
        }
        self.retrying("create", path, |is_retry| {
            match self.zk.create2(path, &new_data, acl, mode) {
                Err(e) if is_retry && e.is(ZkError::NodeExists) => {
                    match self.zk.get_data(path, false) {
                        Ok((current, stat))
                            if current == new_data
                                && (!mode.is_ephemeral()
                                    || stat.ephemeral_owner == self.zk.session_id()) =>
                        {
                            info!("create {path}: an earlier attempt succeeded");
                            Ok((path.to_string(), stat))
                        }
                        Ok(_) => {
                            warn!("node {path} already exists with other data");
                            Err(e)
                        }
                        // Gone again meanwhile: the create may be tried anew.
                        Err(e2) if e2.is(ZkError::NoNode) => {
                            Err(Error::zk(ZkError::ConnectionLoss, path))
                        }
                        Err(e2) => Err(e2),
                    }
                }
                other => other,
            }
        })
    }

    /// HBase's `ZKUtil.createAndFailSilent(zkw, znode, data)` at this layer:
    /// creates `node` persistent with `data` unless it exists (an existing
    /// node is never an error; see
    /// [`zkutil::create_and_fail_silent_data`](crate::zkutil::create_and_fail_silent_data)).
    /// `zkutil` and the watcher's base znodes use it.
    ///
    /// # Errors
    /// As `zkutil::create_and_fail_silent_data`.
    pub(crate) fn create_and_fail_silent(&self, node: &str, data: &[u8]) -> Result<()> {
        crate::path::validate(node)?;
        match self.exists(node, false) {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => {}
            // An existing node whose ACL gives this session no READ, on
            // ZooKeeper 3.8.4+ / 3.9.2+ (ZOOKEEPER-2590; older servers
            // answered its Stat): the create tells (`NodeExists`).
            Err(Error::NoReadPermission { .. }) => {}
            Err(e) => return Err(e),
        }
        match self.create(node, data, self.acl_for(node), CreateMode::Persistent) {
            Ok(_) => Ok(()),
            Err(e) if e.is(ZkError::NodeExists) => Ok(()),
            Err(e) if e.is(ZkError::NoAuth) => {
                if self.exists(node, false)?.is_some() {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            Err(e) => Err(e),
        }
    }

    /// HBase's `ZKUtil.createWithParents(zkw, znode, data)` at this layer:
    /// creates `znode` (with `data`) and any missing parents (empty), all
    /// persistent; an existing node is fine. `zkutil`, the watcher's base znode
    /// and the locks use it.
    ///
    /// # Errors
    /// `BadArguments` for a bad path; `NoAuth`; session errors; `NoNode` for
    /// `/` when the connect string's chroot does not exist.
    pub(crate) fn create_with_parents(&self, znode: &str, data: &[u8]) -> Result<()> {
        self.create_with_parents_as(znode, data, CreateMode::Persistent)
    }

    /// [`create_with_parents`](Self::create_with_parents) creating `znode` and
    /// its missing parents in `mode` (Curator's
    /// `creatingParentContainersIfNeeded`: `CreateMode::Container`).
    pub(crate) fn create_with_parents_as(
        &self,
        znode: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<()> {
        crate::path::validate(znode)?;
        if znode == "/" {
            return Ok(());
        }
        match self.create(znode, data, self.acl_for(znode), mode) {
            Ok(_) => Ok(()),
            Err(e) if e.is(ZkError::NodeExists) => Ok(()),
            Err(e) if e.is(ZkError::NoNode) => match crate::path::get_parent(znode) {
                // NoNode under the root: the root itself is missing, which
                // happens only when the connect string's chroot does not
                // exist. Nothing here can create it (HBase would recurse
                // forever): `NoNode` for "/".
                None | Some("/") => Err(Error::zk(ZkError::NoNode, "/")),
                Some(parent) => {
                    self.create_with_parents_as(parent, &[], mode)?;
                    self.create_with_parents_as(znode, data, mode)
                }
            },
            Err(e) => Err(e),
        }
    }

    /// A sequential create under a prefix that already carries this call's tag
    /// (`<path><tag>-`, see `tagged_prefix`): the lock keeps the tag so that it can
    /// find and remove its node when every retry failed. `data` gets the metadata
    /// prefix, as in [`create`](Self::create).
    pub(crate) fn create_sequential_tagged(
        &self,
        tagged: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<(String, Stat)> {
        let new_data = self.encode(data);
        self.create_sequential(tagged, &new_data, acl, mode)
    }

    /// [`create_sequential_tagged`](Self::create_sequential_tagged) whose first
    /// attempt also lists `parent` in the same round trip (see
    /// `ZooKeeper::create2_and_get_children`): the lock's acquire. The retries
    /// are the sequential create's own (after a lost reply, the node is found by
    /// its tag and adopted, never made twice); the listing comes back only from
    /// a first attempt that succeeded, and `None` when it failed: the caller
    /// then lists on its own.
    pub(crate) fn create_sequential_tagged_and_list(
        &self,
        tagged: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        parent: &str,
    ) -> Result<CreatedAndListed> {
        let new_data = self.encode(data);
        let mut listing = None;
        let mut created = self.retrying("create", tagged, |is_retry| {
            if is_retry {
                listing = None;
                let (path, stat) = self.sequential_attempt(tagged, &new_data, acl, mode, true)?;
                return Ok(CreatedAndListed {
                    path,
                    stat,
                    listed: None,
                });
            }
            let (path, stat, listed) = self
                .zk
                .create2_and_get_children(tagged, &new_data, acl, mode, parent)?;
            listing = Some(listed);
            Ok(CreatedAndListed {
                path,
                stat,
                listed: None,
            })
        })?;
        created.listed = match listing {
            Some(Ok(children)) => Some(children),
            // A listing lost with the connection is the first attempt of the
            // listing's retries, as the sequential path's own listing would be
            // (with `max_attempts(0)` both end with `ConnectionLoss`); the
            // caller removes the node by its tag.
            Some(Err(e)) if e.is_retryable() => {
                Some(self.retrying_after("getChildren", parent, e, || {
                    self.zk.get_children(parent, false)
                })?)
            }
            // Any other failure: the caller lists again.
            _ => None,
        };
        Ok(created)
    }

    /// [`retrying`](Self::retrying) whose first attempt already failed with
    /// `first` (a request sent with another, whose answer was lost): the budget
    /// counts it, so `max_attempts(0)` returns it at once.
    fn retrying_after<T>(
        &self,
        what: &str,
        path: &str,
        first: Error,
        mut f: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let mut first = Some(first);
        self.retrying(what, path, |_| match first.take() {
            Some(e) => Err(e),
            None => f(),
        })
    }

    fn create_sequential(
        &self,
        tagged: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<(String, Stat)> {
        self.retrying("create", tagged, |is_retry| {
            self.sequential_attempt(tagged, data, acl, mode, is_retry)
        })
    }

    /// One attempt of a sequential create under the tagged prefix `tagged`; a
    /// retry first looks for the node an earlier attempt may have made (its
    /// reply lost) and adopts it.
    fn sequential_attempt(
        &self,
        tagged: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        is_retry: bool,
    ) -> Result<(String, Stat)> {
        if is_retry {
            // The earlier attempt may still be on its way through the
            // ensemble: catch the connected server up before looking.
            if let Some(parent) = crate::path::get_parent(tagged) {
                self.zk.sync(parent)?;
            }
            if let Some(previous) = self.find_previous_sequential_node(tagged)? {
                if let Some(stat) = self.zk.exists(&previous, false)? {
                    info!("create {tagged}: adopting {previous} from an earlier attempt");
                    return Ok((previous, stat));
                }
            }
        }
        self.zk.create2(tagged, data, acl, mode)
    }

    /// HBase's `findPreviousSequentialNode`: the existing child of `prefix`'s
    /// parent whose name starts with `prefix`'s last segment, if any.
    ///
    /// # Errors
    /// `NoNode` for a missing parent; `BadArguments` for a prefix with no `/`.
    #[doc(alias = "findPreviousSequentialNode")]
    pub fn find_previous_sequential_node(&self, prefix: &str) -> Result<Option<String>> {
        let Some(slash) = prefix.rfind('/') else {
            return Err(Error::BadArguments(format!("invalid prefix {prefix:?}")));
        };
        let (parent, node_prefix) = (&prefix[..slash], &prefix[slash + 1..]);
        let parent = if parent.is_empty() { "/" } else { parent };
        let children = self.zk.get_children(parent, false)?;
        Ok(children
            .into_iter()
            .find(|c| c.starts_with(node_prefix))
            .map(|c| crate::path::join_znode(parent, &c)))
    }

    /// Runs `ops` atomically; creates and set-datas get the metadata prefix.
    /// Retried as a whole, without read-back (see the type's table): after a lost
    /// reply, the retry's [`Error::Multi`] (`NodeExists`, `NoNode`, `BadVersion`)
    /// may mean that the earlier attempt was applied.
    ///
    /// # Errors
    /// [`Error::Multi`] with the failing op; session errors.
    pub fn multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        let ops: Vec<Op> = ops
            .iter()
            .map(|op| match op {
                Op::Create {
                    path,
                    data,
                    acl,
                    mode,
                } => Op::Create {
                    path: path.clone(),
                    data: self.encode(data),
                    acl: acl.clone(),
                    mode: *mode,
                },
                Op::SetData {
                    path,
                    data,
                    version,
                } => Op::SetData {
                    path: path.clone(),
                    data: self.encode(data),
                    version: *version,
                },
                other => other.clone(),
            })
            .collect();
        let first = ops.first().map(Op::path).unwrap_or("/").to_string();
        self.retrying("multi", &first, |_| self.zk.multi(&ops))
    }
}

/// The prefix of a sequential create: `path`, a tag unique to this call, `-`
/// (ZooKeeper appends the sequence): `write-<tag>-0000000042`. The tag has a fixed
/// length, so [`tagged_sequence`](crate::sequence::tagged_sequence) reads the
/// sequence by position — a plain "last 10 or 11 characters" reading would take
/// the `-` for a minus sign from sequence 1000000000 on.
pub(crate) fn tagged_prefix(path: &str) -> String {
    format!("{path}{}-", unique_tag())
}

fn default_identifier() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "localhost".into());
    format!("{}@{host}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_names_parse_at_every_sequence() {
        use crate::sequence::{sequence_of, tagged_sequence};
        let prefix = tagged_prefix("/locks/l/write-");
        let name = crate::path::get_node_name(&prefix);
        assert_eq!(name.len(), "write-".len() + 16 + 1, "{name}");
        assert!(name.ends_with('-'));
        // ZooKeeper's `%010d` of the parent's cversion, past 2^31 negative.
        for sequence in [
            0,
            42,
            999_999_999,
            1_000_000_000,
            i32::MAX,
            -5,
            -1_000_000_000,
            i32::MIN,
        ] {
            let node = format!("{name}{sequence:010}");
            assert_eq!(tagged_sequence(&node, "write-"), Some(sequence), "{node}");
        }
        // The positional reading is what makes this exact: the suffix-only one
        // misreads the separator as a sign.
        let node = format!("{name}{:010}", 1_000_000_000);
        assert_eq!(sequence_of(&node), Some(-1_000_000_000));
        assert_eq!(
            tagged_sequence("write-nothex0000000-0000000001", "write-"),
            None
        );
        assert_eq!(
            tagged_sequence("read-0123456789abcdef-0000000001", "write-"),
            None
        );
    }

    #[test]
    fn default_identifier_is_pid_at_host() {
        let id = default_identifier();
        assert!(id.starts_with(&format!("{}@", std::process::id())), "{id}");
    }
}
