//! One way to own a node: create it (with its parents) in any [`CreateMode`],
//! find it again after a create whose reply was lost by a **mark only its
//! creator can have written**, and delete it guarded, so that a participant
//! never takes a stranger's node for its own and never leaves its own behind.
//!
//! # The mark
//! An [`OwnerMark`] is a fresh random uuid, one per participant (or per
//! incarnation of its node). Where it is written depends on the mode:
//!
//! | mode | the mark | found again by |
//! |---|---|---|
//! | sequential (persistent, ephemeral, TTL) | the name: Curator's protected prefix `<parent>/_c_<uuid>-<name><sequence>` | listing the parent for a child named with the prefix |
//! | not sequential (persistent, ephemeral, TTL, container) | one extra ACL entry `digest:_c_<uuid>:owner` with **no permissions** (it grants nothing) | reading the node's ACL |
//!
//! Neither the node's name nor its data changes for a fixed name, so a
//! Curator or kazoo reader sees the node as it expects; only `getAcl` shows
//! the extra entry, for the node's whole life (so a participant can tell
//! its node at any time, not only right after the create). The id goes
//! before the `:`: a server shows a reader without `ADMIN` a digest id as
//! `<user>:x`, and the user part survives. A server that refuses the entry
//! (`InvalidAcl`, no `digest` scheme) gets the node without it, with a
//! warning: a lost reply then ends in `NodeExists`, never in adopting a
//! stranger's node.
//!
//! The HBase layouts' sequential nodes (locks, group parties) keep their
//! own mark, [`RecoverableZooKeeper`]'s per-call tag in the name
//! (`<path><tag>-<sequence>`); ZooKeeper's `WriteLock` recipe keeps Java's
//! session prefix (`x-<session>-`), as upstream.
//!
//! Not a mark: "the node belongs to my session" (two participants can share a
//! session) and "the node holds my data" (two participants may write equal
//! data). For an ephemeral node the mark must also be of this session: a node
//! of an earlier session of the same participant is going with that session.
//!
//! # Use
//! [`create_owned`] creates (parents on `NoNode`: persistent or containers)
//! and recovers a lost reply itself, within the
//! [`RecoverableZooKeeper`]'s retries. A caller that keeps its own loop (the
//! persistent node's thread) uses [`create_once`] and asks
//! [`OwnerMark::find`] or [`OwnerMark::is_marked`] afterwards; one that
//! stops while such a create is unsettled removes its node with
//! [`OwnerMark::remove_if_created`] (find, then [`Removal`]).
//! Every delete of a caller's node goes through the one removal API,
//! [`Removal`]: guarded ([`Guard::Created`] deletes the node only while it
//! is the same node, its creation zxid, at the version read) or not,
//! synchronously, in the background (a drop, the event thread; retried
//! after a reconnect, in a pinned session), or waiting a bounded time for
//! the answer.
//!
//! # A failed call leaves nothing
//! A caller that gives up while a create's outcome is unknown (its reply
//! lost, then every lookup failing on the connection) returns its error and
//! hands the create over to be settled once the connection is back, in the
//! create's session, by the mark it carries:
//!
//! | the create's mark | settled by | callers |
//! |---|---|---|
//! | a tag in a sequential name (`<path><tag>-<sequence>`) | [`Attempt::Tag`] through [`remove_and_wait`] / [`remove_in_background`] (a lock's failed attempt: [`abandon`]): the parent listed, the tagged child removed, asynchronously (no thread), again after each reconnect | the locks, the semaphore, the double barrier, a group's party |
//! | an [`OwnerMark`] no later create reuses | [`OwnerMark::unsettled`]: found by the mark, removed ([`Unsettled`]) | the latch's offers, a group's member, a 2PC site's `alive` |
//! | anything a caller decides on (its own lock, a claim to keep) | [`Unsettled::new`] with the caller's settle, run on a short-lived thread (the find blocks), under the caller's making lock | the election's serial offers, the leader manager's znode |
//! | the persistent node's own mark | [`OwnerMark::remove_if_created`] on its own thread at close | `PersistentNode` |

use std::time::Duration;

use log::{debug, info, warn};

use crate::client::{Acl, CreateMode, CreatedAndListed, Id, Perms, Stat, ZooKeeper};
use crate::engine::background::on_reconnect;
use crate::error::{Result, ZkError};
use crate::recoverable::RecoverableZooKeeper;
use crate::watcher::{WeakZooKeeperWatcher, ZooKeeperWatcher};

/// Curator's protected-name prefix (`_c_`, `ProtectedUtils`): the one
/// definition is `layout::CURATOR_PROTECTED_PREFIX`, in the leaf module below
/// the error type (the `Dialect` reads it), re-exported as
/// `recipes::layout::CURATOR_PROTECTED_PREFIX`.
pub(crate) const PROTECTED_PREFIX: &str = crate::names::CURATOR_PROTECTED_PREFIX;

/// The part after the `:` of an owner mark's `digest` id
/// (`_c_<uuid>:owner`; the server wants two parts, and masks the second).
const MARK_ID_SUFFIX: &str = ":owner";

/// A mark only its creator can have written (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnerMark {
    uuid: String,
}

impl Default for OwnerMark {
    fn default() -> Self {
        Self::new()
    }
}

impl OwnerMark {
    /// A fresh mark (a random version-4 uuid).
    pub(crate) fn new() -> OwnerMark {
        OwnerMark {
            uuid: crate::util::random_uuid(),
        }
    }

    /// The protected prefix of a sequential node's name: `_c_<uuid>-`.
    pub(crate) fn protected_prefix(&self) -> String {
        format!("{PROTECTED_PREFIX}{}-", self.uuid)
    }

    /// The path to send in a create of `path` in `mode`: for a sequential
    /// mode `<parent>/_c_<uuid>-<name>` (the server appends the sequence),
    /// else `path` itself.
    pub(crate) fn path_to_create(&self, path: &str, mode: CreateMode) -> String {
        if !mode.is_sequential() {
            return path.to_string();
        }
        let parent = crate::path::get_parent(path).unwrap_or("/");
        let name = crate::path::get_node_name(path);
        crate::path::join_znode(parent, &format!("{}{name}", self.protected_prefix()))
    }

    /// The ACL entry holding the mark: `digest:_c_<uuid>:owner`, no
    /// permissions.
    fn acl_entry(&self) -> Acl {
        Acl::new(
            Perms(0),
            Id::new(
                "digest",
                format!("{PROTECTED_PREFIX}{}{MARK_ID_SUFFIX}", self.uuid),
            ),
        )
    }

    /// The ACL to create a node in `mode` with: `acl`, plus the mark's entry
    /// for a fixed name (a sequential node carries it in its name).
    pub(crate) fn acl_for(&self, acl: &[Acl], mode: CreateMode) -> Vec<Acl> {
        let mut out = acl.to_vec();
        if !mode.is_sequential() {
            out.push(self.acl_entry());
        }
        out
    }

    /// Whether `acl` (as the server shows it, a digest id possibly masked to
    /// `<user>:x`) holds this mark.
    fn in_acl(&self, acl: &[Acl]) -> bool {
        let user = format!("{PROTECTED_PREFIX}{}", self.uuid);
        acl.iter().any(|a| {
            a.id.scheme == "digest"
                && a.id
                    .id
                    .split_once(':')
                    .is_some_and(|(u, _)| u == user.as_str())
        })
    }

    /// Whether the node `stat` describes may be kept by this session: an
    /// ephemeral node only when this session owns it.
    fn of_this_session(zk: &ZooKeeper, mode: CreateMode, stat: &Stat) -> bool {
        !mode.is_ephemeral() || stat.ephemeral_owner == zk.session_id()
    }

    /// The node at the fixed name `path` when it carries this mark (and, for
    /// an ephemeral mode, belongs to this session): its `Stat`; `None` when
    /// it is missing or not this mark's.
    ///
    /// # Errors
    /// ZooKeeper errors (no retry).
    pub(crate) fn is_marked(
        &self,
        zk: &ZooKeeper,
        path: &str,
        mode: CreateMode,
    ) -> Result<Option<Stat>> {
        match zk.get_acl(path) {
            Ok((acl, stat)) if self.in_acl(&acl) && Self::of_this_session(zk, mode, &stat) => {
                Ok(Some(stat))
            }
            Ok(_) => Ok(None),
            Err(e) if e.is(ZkError::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The node a create of `path` in `mode` with this mark made, if one
    /// exists: its actual path and `Stat`. A sequential node is looked for
    /// among the parent's children by its protected prefix, a fixed name by
    /// its ACL. Call after a reconnect (a `sync` first catches the server up
    /// with a create still on its way).
    ///
    /// # Errors
    /// ZooKeeper errors (no retry).
    pub(crate) fn find(
        &self,
        zk: &ZooKeeper,
        path: &str,
        mode: CreateMode,
    ) -> Result<Option<(String, Stat)>> {
        let parent = crate::path::get_parent(path).unwrap_or("/");
        if !mode.is_sequential() {
            match zk.sync(parent) {
                Ok(()) => {}
                Err(e) if e.is(ZkError::NoNode) => return Ok(None),
                Err(e) => return Err(e),
            }
            return Ok(self
                .is_marked(zk, path, mode)?
                .map(|s| (path.to_string(), s)));
        }
        let Some(children) = synced_children(zk, parent)? else {
            return Ok(None);
        };
        let prefix = self.protected_prefix();
        for child in children.iter().filter(|c| c.starts_with(&prefix)) {
            let found = crate::path::join_znode(parent, child);
            match zk.exists(&found, false)? {
                Some(stat) if Self::of_this_session(zk, mode, &stat) => {
                    return Ok(Some((found, stat)));
                }
                _ => {}
            }
        }
        Ok(None)
    }

    /// Settles a create of `path` in `mode` under this mark whose outcome is
    /// unknown (its reply lost, the client maybe still disconnected) by
    /// removing its node if it made one: waits for the reconnect and finds
    /// the node ([`find`](Self::find)) within `rzk`'s retries and deadline
    /// (a call made while disconnected waits for the connection), then
    /// deletes it guarded by its creation zxid ([`Removal`] with
    /// [`Guard::Created`]). `Ok(true)` removed; `Ok(false)` there is none
    /// (the create never landed, an ephemeral one went with its session, or
    /// another node has the name).
    ///
    /// # Errors
    /// `ConnectionLoss` when the connection is not back by `rzk`'s deadline;
    /// as [`Removal::run`] otherwise.
    pub(crate) fn remove_if_created(
        &self,
        rzk: &RecoverableZooKeeper,
        path: &str,
        mode: CreateMode,
    ) -> Result<bool> {
        let found = rzk.retrying("find", path, |_| self.find(rzk.zookeeper(), path, mode))?;
        match found {
            Some((found, stat)) => {
                debug!("{found}: removing the node of a create whose outcome was unknown");
                Removal::new(found, Guard::Created(stat.czxid)).run(rzk)
            }
            None => Ok(false),
        }
    }

    /// A create of `path` in `mode` under this mark, made in `session`, gave
    /// up with its outcome unknown: the node it may have made is found by
    /// the mark and removed once the connection is back ([`Unsettled`]).
    /// Only for a mark no later create reuses (a fresh one per attempt):
    /// nothing then can have claimed the node meanwhile.
    pub(crate) fn unsettled(
        self,
        path: &str,
        mode: CreateMode,
        session: i64,
        zkw: &ZooKeeperWatcher,
    ) {
        let path = path.to_string();
        Unsettled::new(path.clone(), move |zk, zkw| {
            if let Some((found, stat)) = self.find(zk, &path, mode)? {
                remove_found(zk, zkw, &found, &stat);
            }
            Ok(())
        })
        .in_session(zkw, session);
    }
}

/// The children of `parent` as the leader has them: a `sync`, then the
/// listing (a reconnect may have landed on a follower that has not applied a
/// create still on its way; the listing alone would hide that node). `None`
/// when `parent` does not exist.
///
/// # Errors
/// ZooKeeper errors (no retry).
pub(crate) fn synced_children(zk: &ZooKeeper, parent: &str) -> Result<Option<Vec<String>>> {
    let listed = zk
        .sync(parent)
        .and_then(|()| zk.get_children(parent, false));
    match listed {
        Ok(children) => Ok(Some(children)),
        Err(e) if e.is(ZkError::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// How the missing parents of a node are created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parents {
    /// Persistent, empty (HBase's `ZKUtil.createWithParents`, through the
    /// `RecoverableZooKeeper`: retried, its data with the metadata prefix
    /// when the handle writes it).
    Persistent,
    /// Containers, with no data (Curator's `creatingParentContainersIfNeeded`,
    /// see [`create_container_parents`]): the server removes one once its
    /// last child is gone.
    Container,
    /// None: a missing parent is the caller's answer (`NoNode` returned as
    /// it is), for a node that must not bring a deleted parent back (a
    /// two-phase commit's site joining a transaction the coordinator
    /// deleted).
    None,
}

impl Parents {
    /// The parents a layout's [`CreateMode`] for them means: containers for
    /// `Container`, persistent nodes otherwise.
    pub(crate) fn of_mode(mode: CreateMode) -> Parents {
        match mode {
            CreateMode::Container => Parents::Container,
            _ => Parents::Persistent,
        }
    }

    /// Creates the missing ancestors of `node` (not `node` itself) this way.
    ///
    /// # Errors
    /// `NoAuth`, session errors (after `rzk`'s retries).
    fn create_for(self, rzk: &RecoverableZooKeeper, node: &str) -> Result<()> {
        match self {
            Parents::Persistent => match crate::path::get_parent(node) {
                Some(parent) => rzk.create_with_parents(parent, &[]),
                None => Ok(()),
            },
            Parents::Container => create_container_parents(rzk, node),
            // Never asked: `with_parents_then` returns the `NoNode`.
            Parents::None => Ok(()),
        }
    }
}

/// A node to create for a caller.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeSpec<'a> {
    /// Its path; for a sequential mode the path before the protection and the
    /// sequence (`<parent>/<name>`).
    pub(crate) path: &'a str,
    /// Its data, stored as given (a caller that wants HBase's metadata prefix
    /// encodes it first: [`RecoverableZooKeeper::encode`]).
    pub(crate) data: &'a [u8],
    /// Its ACL (the mark's entry is added for a fixed name).
    pub(crate) acl: &'a [Acl],
    /// Its mode.
    pub(crate) mode: CreateMode,
    /// Its TTL, for a TTL mode.
    pub(crate) ttl: Option<Duration>,
    /// How missing parents are made.
    pub(crate) parents: Parents,
}

/// One create of `spec` under `mark`, the parents created when missing
/// (`NoNode`, then the create once more); no recovery of a lost reply: a
/// `ConnectionLoss` leaves the outcome to [`OwnerMark::find`]. Returns the
/// node's actual path and `Stat`.
///
/// # Errors
/// `NodeExists` (a fixed name taken: maybe by this mark, see
/// [`OwnerMark::is_marked`]), `NoAuth`, `Unimplemented` (TTL modes on a
/// server without them), session errors.
pub(crate) fn create_once(
    rzk: &RecoverableZooKeeper,
    spec: &NodeSpec<'_>,
    mark: &OwnerMark,
) -> Result<(String, Stat)> {
    let zk = rzk.zookeeper();
    let path = mark.path_to_create(spec.path, spec.mode);
    let marked = mark.acl_for(spec.acl, spec.mode);
    let create = |acl: &[Acl]| match spec.ttl {
        Some(ttl) => zk.create_ttl(&path, spec.data, acl, spec.mode, ttl),
        None => zk.create2(&path, spec.data, acl, spec.mode),
    };
    let create = || match create(&marked) {
        // A server without the digest scheme refuses the mark's entry: the
        // node is created without it (a lost reply then cannot be told from
        // a stranger's node: `NodeExists`, never adopted).
        Err(e) if e.is(ZkError::InvalidAcl) && marked.len() > spec.acl.len() => {
            let created = create(spec.acl);
            if created.is_ok() {
                warn!(
                    "create {path}: the server refuses the owner mark's ACL entry: created without"
                );
            }
            created
        }
        other => other,
    };
    with_parents(rzk, &path, spec.parents, create)
}

/// "Create, create the parents on `NoNode`, create again", written once:
/// runs `create` (a create of `path`, a sequential prefix included); on
/// `NoNode` creates `path`'s missing ancestors (empty, in the `parents`
/// mode, through `rzk`'s retries) and runs `create` once more. Every create
/// of a node with its parents goes through here ([`create_once`] for the
/// owned ones; shared nodes such as counters, leases and queue items, and
/// the HBase-tagged sequential creates, directly).
///
/// # Errors
/// `create`'s errors; the parents' (`NoAuth`, session errors).
pub(crate) fn with_parents<T>(
    rzk: &RecoverableZooKeeper,
    path: &str,
    parents: Parents,
    create: impl Fn() -> Result<T>,
) -> Result<T> {
    with_parents_then(rzk, path, parents, &create, &create)
}

/// [`with_parents`] whose first try (`first`) differs from the one after
/// the parents are made (`again`): a lock's create pipelined with the first
/// listing of its directory, which a fresh directory does not need.
///
/// # Errors
/// `first`'s errors but `NoNode`; the parents'; `again`'s.
pub(crate) fn with_parents_then<T>(
    rzk: &RecoverableZooKeeper,
    path: &str,
    parents: Parents,
    first: impl FnOnce() -> Result<T>,
    again: impl FnOnce() -> Result<T>,
) -> Result<T> {
    match first() {
        Err(e) if e.is(ZkError::NoNode) && parents != Parents::None => {
            parents.create_for(rzk, path)?;
            again()
        }
        other => other,
    }
}

/// A sequential node under `tagged`, a prefix that already carries its own
/// mark (the HBase layouts' per-call tag, see
/// [`RecoverableZooKeeper::create_sequential_tagged`]; Curator's
/// `_c_<uuid>-`; kazoo's uuid), with its parents ([`with_parents_then`]):
/// a lost reply's node is found again by the prefix, inside `rzk`'s retries.
/// With `list`, the first try lists that directory in the same round trip
/// (a lock's acquire); the try after the parents were made lists nothing
/// (`listed: None`, the caller lists on its own).
///
/// # Errors
/// `NoAuth`, session errors, after `rzk`'s retries.
pub(crate) fn create_tagged(
    rzk: &RecoverableZooKeeper,
    tagged: &str,
    data: &[u8],
    mode: CreateMode,
    parents: Parents,
    list: Option<&str>,
) -> Result<CreatedAndListed> {
    let acl = rzk.acl_for(tagged);
    let create = || {
        rzk.create_sequential_tagged(tagged, data, acl, mode)
            .map(|(path, stat)| CreatedAndListed {
                path,
                stat,
                listed: None,
            })
    };
    let first = || match list {
        Some(dir) => rzk.create_sequential_tagged_and_list(tagged, data, acl, mode, dir),
        None => create(),
    };
    with_parents_then(rzk, tagged, parents, first, create)
}

/// Creates every missing ancestor of `node` (not `node` itself) as a
/// container, with no data, as Curator's `creatingParentContainersIfNeeded`
/// does; the server removes a container once its last child is gone.
/// Bottom up, as the locks always made theirs: each create through `rzk`'s
/// retries, an existing node being no error, and nothing above the deepest
/// ancestor that exists is touched (a create there would need `CREATE` on
/// its parent, which an ACL may deny).
///
/// # Errors
/// `NoAuth`, session errors (after `rzk`'s retries); `NoNode` for `/` when
/// the connect string's chroot does not exist.
fn create_container_parents(rzk: &RecoverableZooKeeper, node: &str) -> Result<()> {
    match crate::path::get_parent(node) {
        Some(parent) => rzk.with_metadata_prefix(false).create_with_parents_as(
            parent,
            &[],
            CreateMode::Container,
        ),
        None => Ok(()),
    }
}

/// Creates `spec` under `mark` ([`create_once`]) within `rzk`'s retries: a
/// retry after a lost reply first looks for the node by the mark
/// ([`OwnerMark::find`]) and adopts it, so the node is made once. A fixed
/// name taken by a node with this mark (`NodeExists`) is adopted too; one
/// without it is a stranger's: `NodeExists`.
///
/// # Errors
/// `NodeExists` for a stranger's node; as [`create_once`] otherwise, the
/// retryable ones once the retries are spent.
pub(crate) fn create_owned(
    rzk: &RecoverableZooKeeper,
    spec: &NodeSpec<'_>,
    mark: &OwnerMark,
) -> Result<(String, Stat)> {
    let zk = rzk.zookeeper();
    rzk.retrying("create", spec.path, |is_retry| {
        if is_retry {
            if let Some((found, stat)) = mark.find(zk, spec.path, spec.mode)? {
                info!(
                    "create {}: adopting {found} from an earlier attempt",
                    spec.path
                );
                return Ok((found, stat));
            }
        }
        match create_once(rzk, spec, mark) {
            Err(e) if e.is(ZkError::NodeExists) && !spec.mode.is_sequential() => {
                match mark.is_marked(zk, spec.path, spec.mode)? {
                    Some(stat) => {
                        debug!("create {}: the node is this creator's", spec.path);
                        Ok((spec.path.to_string(), stat))
                    }
                    None => Err(e),
                }
            }
            other => other,
        }
    })
}

/// How long a caller that removes its node on the way out (a failed
/// attempt, a lost lock's release) waits for the answer before it returns
/// and lets the removal finish in the background: [`Removal::and_wait`].
pub(crate) const REMOVAL_WAIT: Duration = Duration::from_millis(250);

/// Which node a [`Removal`] may delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guard {
    /// Whatever node has the path, at any version: a node only this
    /// participant names (HBase's per-call tag, a session prefix, an
    /// ephemeral node of a session only this participant uses).
    Any,
    /// The node at exactly this version (`BadVersion` otherwise).
    Version(i32),
    /// The node created at this zxid, at the version read (written
    /// meanwhile: read again); another node that took its name is left
    /// alone.
    Created(i64),
}

/// Runs once a background removal is settled here (its first answer).
type Then = Box<dyn FnOnce() + Send>;

/// The one removal API: deletes a caller's node, guarded ([`Guard`]) or
/// not, synchronously ([`run`](Self::run)), in the background
/// ([`in_background`](Self::in_background), [`in_session`](Self::in_session):
/// asynchronous calls only, so it may run on the event thread or in a
/// `Drop`), or in the background waiting a bounded time for the answer
/// ([`and_wait`](Self::and_wait)). A background removal whose connection is
/// lost first is sent again after the reconnect (Curator's "guaranteed
/// delete"), unless made [`once`](Self::once); nothing is done once the
/// session has ended (an ephemeral node went with it).
pub(crate) struct Removal {
    path: String,
    guard: Guard,
    retry: bool,
    then: Option<Then>,
}

impl Removal {
    /// A removal of `path` guarded by `guard`, retried after a reconnect.
    pub(crate) fn new(path: impl Into<String>, guard: Guard) -> Removal {
        Removal {
            path: path.into(),
            guard,
            retry: true,
            then: None,
        }
    }

    /// One try only: not sent again after a reconnect, nor read again when
    /// a [`Guard::Created`] node was written to between the read and the
    /// delete.
    pub(crate) fn once(mut self) -> Removal {
        self.retry = false;
        self
    }

    /// `then` runs once the background removal is settled here (deleted,
    /// gone, refused, left for the reconnect, or nothing to do).
    pub(crate) fn then(mut self, then: impl FnOnce() + Send + 'static) -> Removal {
        self.then = Some(Box::new(then));
        self
    }

    /// Deletes the node now, through `rzk`'s retries: `Ok(true)` deleted,
    /// `Ok(false)` gone already (or, guarded by [`Guard::Created`], another
    /// node has its name: left alone).
    ///
    /// # Errors
    /// `BadVersion` ([`Guard::Version`]), `NotEmpty`, `NoAuth`, session
    /// errors (after `rzk`'s retries for the reads and the delete).
    pub(crate) fn run(&self, rzk: &RecoverableZooKeeper) -> Result<bool> {
        let path = self.path.as_str();
        let version = match self.guard {
            Guard::Any => None,
            Guard::Version(v) => Some(v),
            Guard::Created(czxid) => loop {
                let stat = match rzk.exists(path, false)? {
                    Some(stat) if stat.czxid == czxid => stat,
                    Some(_) => {
                        debug!("{path} was replaced by another node: left alone");
                        return Ok(false);
                    }
                    None => return Ok(false),
                };
                match rzk.delete(path, Some(stat.version)) {
                    Ok(()) => return Ok(true),
                    Err(e) if e.is(ZkError::NoNode) => return Ok(false),
                    // Written to meanwhile: read again.
                    Err(e) if e.is(ZkError::BadVersion) => continue,
                    Err(e) => return Err(e),
                }
            },
        };
        match rzk.delete(path, version) {
            Ok(()) => Ok(true),
            Err(e) if e.is(ZkError::NoNode) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// [`in_session`](Self::in_session) in the watcher's current session;
    /// nothing to do (but `then`) once the watcher is gone.
    pub(crate) fn in_background(self, zkw: &WeakZooKeeperWatcher) {
        match zkw.zookeeper() {
            Some(zk) => self.in_session(&zk, zkw),
            None => self.settled(),
        }
    }

    /// Deletes the node without waiting, in `zk`'s session (a handle pinned
    /// to one session, `ZooKeeper::pinned`, never reaches a session that
    /// replaced it): asynchronous calls answered on the event thread. A
    /// retryable error sends it again after the next reconnect (unless
    /// [`once`](Self::once)); the retry is dropped when the session ends
    /// first. Guarded by [`Guard::Created`], the node is read first and
    /// deleted at the version read (written meanwhile: read again).
    pub(crate) fn in_session(self, zk: &ZooKeeper, zkw: &WeakZooKeeperWatcher) {
        if zk.state().is_terminal() {
            return self.settled();
        }
        match self.guard {
            Guard::Any => self.send(zk, zkw, None),
            Guard::Version(v) => self.send(zk, zkw, Some(v)),
            Guard::Created(czxid) => {
                let (zk2, zkw2) = (zk.clone(), zkw.clone());
                zk.exists_async(&self.path.clone(), None, move |r| match r {
                    Ok(Some(stat)) if stat.czxid == czxid => {
                        self.send(&zk2, &zkw2, Some(stat.version))
                    }
                    Ok(Some(_)) => {
                        debug!("{} was replaced by another node: left alone", self.path);
                        self.settled();
                    }
                    Ok(None) => self.settled(),
                    Err(e) => self.failed(&zk2, &zkw2, &e),
                });
            }
        }
    }

    /// Deletes the node in the background ([`in_background`](Self::in_background))
    /// and waits up to `wait` for the answer; the removal goes on without
    /// the caller after that (or after the reconnect). Never waits on the
    /// network past `wait`.
    pub(crate) fn and_wait(mut self, zkw: &WeakZooKeeperWatcher, wait: Duration) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let then = self.then.take();
        self.then = Some(Box::new(move || {
            if let Some(then) = then {
                then();
            }
            let _ = tx.try_send(());
        }));
        self.in_background(zkw);
        let _ = rx.recv_timeout(wait);
    }

    /// The asynchronous delete at `version`.
    fn send(self, zk: &ZooKeeper, zkw: &WeakZooKeeperWatcher, version: Option<i32>) {
        let (zk2, zkw2) = (zk.clone(), zkw.clone());
        zk.delete_async(&self.path.clone(), version, move |r| match r {
            Err(e)
                if e.is(ZkError::BadVersion)
                    && self.retry
                    && matches!(self.guard, Guard::Created(_)) =>
            {
                // Written to meanwhile: read again.
                self.in_session(&zk2, &zkw2)
            }
            Err(e) => self.failed(&zk2, &zkw2, &e),
            Ok(()) => self.settled(),
        });
    }

    /// An error answered: retryable, or refused by a read-only server
    /// (`NotReadOnly`), sent again after the reconnect (to a read-write
    /// server: see [`on_reconnect`]); gone or the session ended, nothing to
    /// do; anything else, logged.
    fn failed(mut self, zk: &ZooKeeper, zkw: &WeakZooKeeperWatcher, e: &crate::Error) {
        if (e.is_retryable() || e.is(ZkError::NotReadOnly)) && self.retry {
            info!("will remove {} when the connection is back", self.path);
            let then = self.then.take();
            let (zk, again) = (zk.clone(), zkw.clone());
            on_reconnect(zkw, move |connected| {
                if connected {
                    self.in_session(&zk, &again);
                }
            });
            if let Some(then) = then {
                then();
            }
            return;
        }
        if !e.is(ZkError::NoNode) && !e.is_fatal() {
            warn!("could not remove {}: {e}", self.path);
        }
        self.settled();
    }

    /// Tells `then`, if any.
    fn settled(mut self) {
        if let Some(then) = self.then.take() {
            then();
        }
    }
}

/// What a failed attempt left behind: its node, or (when the create's reply was
/// lost) the tagged prefix its node carries (`RecoverableZooKeeper`'s
/// per-call tag, `<path><tag>-<sequence>`). Removed without blocking:
/// asynchronous calls answered on the event thread, finished after a
/// reconnect when the connection is lost first (Curator's "guaranteed
/// delete"), through the watcher's session hooks (held weakly, never the
/// user's listener registry).
#[derive(Debug, Clone)]
pub(crate) enum Attempt {
    Node(String),
    Tag(String),
}

/// Looks for a lost create's tagged node again once the connection is back,
/// when listing failed with a recoverable error (Curator's "guaranteed
/// delete"); nothing when the session ends first (its ephemeral node goes with
/// it).
fn sweep_after_reconnect(zkw: &WeakZooKeeperWatcher, attempt: Attempt) {
    info!("will remove {attempt:?} when the connection is back");
    let again = zkw.clone();
    on_reconnect(zkw, move |connected| {
        if connected {
            let (done, _) = crossbeam_channel::bounded(1);
            remove_async(&again, attempt, done);
        }
    });
}

/// Removes an attempt's node without blocking (async calls, answered on the event
/// thread); when the connection is lost first, it is removed after the
/// reconnect. `done` is told once the removal is settled here.
fn remove_async(zkw: &WeakZooKeeperWatcher, attempt: Attempt, done: crossbeam_channel::Sender<()>) {
    let Some(zk) = zkw.zookeeper() else {
        let _ = done.send(());
        return;
    };
    let zkw = zkw.clone();
    match attempt.clone() {
        // The one removal API (any version: the node carries this
        // attempt's tag; retried after a reconnect).
        Attempt::Node(path) => Removal::new(path, Guard::Any)
            .then(move || {
                let _ = done.send(());
            })
            .in_background(&zkw),
        Attempt::Tag(prefix) => {
            let (parent, name_prefix) = match prefix.rfind('/') {
                Some(i) => (prefix[..i.max(1)].to_string(), prefix[i + 1..].to_string()),
                None => return,
            };
            zk.get_children_async(&parent.clone(), None, move |r| match r {
                Ok(children) => {
                    // One node at most carries the tag; remove whatever does.
                    let tagged: Vec<&String> = children
                        .iter()
                        .filter(|c| c.starts_with(&name_prefix))
                        .collect();
                    if tagged.is_empty() {
                        let _ = done.send(());
                    }
                    for c in tagged {
                        let node = Attempt::Node(crate::path::join_znode(&parent, c));
                        remove_async(&zkw, node, done.clone());
                    }
                }
                Err(e) => {
                    if e.is_retryable() {
                        sweep_after_reconnect(&zkw, attempt);
                    }
                    let _ = done.send(());
                }
            })
        }
    }
}

/// Removes `attempt`'s node: waits up to [`REMOVAL_WAIT`] for it, then lets it
/// finish in the background (or after the reconnect). Never waits on the network
/// past that bound.
pub(crate) fn remove_and_wait(zkw: &ZooKeeperWatcher, attempt: Attempt) {
    if zkw.state().is_terminal() {
        return; // ephemeral: gone with the session
    }
    let (done, removed) = crossbeam_channel::bounded(1);
    remove_async(&zkw.downgrade(), attempt, done);
    let _ = removed.recv_timeout(REMOVAL_WAIT);
}

/// Removes `attempt`'s node in the background: returns at once.
pub(crate) fn remove_in_background(zkw: &ZooKeeperWatcher, attempt: Attempt) {
    if zkw.state().is_terminal() {
        return;
    }
    let (done, _) = crossbeam_channel::bounded(1);
    remove_async(&zkw.downgrade(), attempt, done);
}

/// An attempt that ends without its grant (a lock's, a semaphore lease's):
/// removes what it left (waiting up to [`REMOVAL_WAIT`]) and returns its
/// outcome, an error that the attempt's call bound cut short made a timeout
/// (`Ok(None)`). `ended` is `Ok(())` for a wait that ran out. `remove` false
/// leaves the attempt alone (an error that cannot have left a node).
pub(crate) fn abandon<T>(
    zkw: &ZooKeeperWatcher,
    attempt: Attempt,
    ended: Result<()>,
    bounds: &crate::engine::wait::Bounds,
    remove: bool,
) -> Result<Option<T>> {
    if remove {
        remove_and_wait(zkw, attempt);
    }
    match ended {
        Ok(()) => Ok(None),
        Err(e) if bounds.cut_short(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// How a settle finds and removes what an unsettled create left: runs on
/// the settle's own thread (it may block), in the create's session.
type Settle = Box<dyn FnMut(&ZooKeeper, &WeakZooKeeperWatcher) -> Result<()> + Send>;

/// A create whose outcome is unknown when its caller gave up (its reply
/// lost, then every lookup failed on the connection): settled after the
/// reconnect, never forgotten. The one rule for every caller that makes a
/// node and can fail after the server made it (the election's offer, the
/// latch's node, the leader manager's znode): the call returns its error,
/// and what it may have left is found again (by its mark) and removed
/// ([`remove_found`]) once the connection is back, in the create's session.
///
/// The settle runs on a short-lived thread of its own (the find blocks;
/// the event thread never does), started at the next `SyncConnected` of the
/// session (at once when connected now). A recoverable failure waits for
/// the next reconnect; the session's end settles it (an ephemeral node goes
/// with its session; a handle pinned to the session never reaches a session
/// that replaced it).
pub(crate) struct Unsettled {
    what: String,
    settle: Settle,
}

impl Unsettled {
    /// An unsettled create of `what` (for the logs), settled by `settle`:
    /// it finds the node and removes it ([`remove_found`]), or keeps it when
    /// its caller has meanwhile bound it. `settle` runs with a handle pinned
    /// to the create's session.
    pub(crate) fn new(
        what: impl Into<String>,
        settle: impl FnMut(&ZooKeeper, &WeakZooKeeperWatcher) -> Result<()> + Send + 'static,
    ) -> Unsettled {
        Unsettled {
            what: what.into(),
            settle: Box::new(settle),
        }
    }

    /// Settles in the background in `session`, the create's: at the next
    /// reconnect, or at once when connected now; dropped when that session
    /// ends first (nothing to do when it has ended, or been replaced,
    /// already: an ephemeral node went with it).
    pub(crate) fn in_session(self, zkw: &ZooKeeperWatcher, session: i64) {
        let zk = zkw.zookeeper().pinned();
        if zk.session_id() == session {
            self.in_background(&zk, &zkw.downgrade());
        }
    }

    /// [`in_session`](Self::in_session) with the session's pinned handle.
    fn in_background(self, zk: &ZooKeeper, zkw: &WeakZooKeeperWatcher) {
        info!(
            "will settle the create of {} when the connection is back",
            self.what
        );
        let (zk, again) = (zk.clone(), zkw.clone());
        on_reconnect(zkw, move |connected| {
            if !connected || zk.state().is_terminal() {
                return; // the session ended: its ephemeral node went with it
            }
            let what = self.what.clone();
            // Not util::run_in_background: its fallback runs the closure
            // here, on the event thread, which the find must never block.
            let spawned = std::thread::Builder::new()
                .name("zklock-settle".into())
                .spawn(move || self.settle_now(&zk, &again));
            if let Err(e) = spawned {
                warn!("could not settle the create of {what}: no thread ({e})");
            }
        });
    }

    /// One try; a recoverable failure tries again after the next reconnect.
    fn settle_now(mut self, zk: &ZooKeeper, zkw: &WeakZooKeeperWatcher) {
        match (self.settle)(zk, zkw) {
            Ok(()) => debug!("settled the create of {}", self.what),
            Err(e) if e.is_retryable() => self.in_background(zk, zkw),
            Err(e) if e.is_fatal() => {}
            Err(e) => warn!("could not settle the create of {}: {e}", self.what),
        }
    }
}

/// Removes the node an [`Unsettled`] create's settle found at `path`, as
/// `stat` shows it: one delete at that version, sent now (so it is ordered
/// before any request the caller's next attempt sends in the session, when
/// the settle holds the caller's making lock meanwhile), retried after a
/// reconnect.
pub(crate) fn remove_found(zk: &ZooKeeper, zkw: &WeakZooKeeperWatcher, path: &str, stat: &Stat) {
    info!("removing {path}, left by a create that gave up");
    Removal::new(path, Guard::Version(stat.version)).in_session(zk, zkw);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protected_prefix_is_curators() {
        let p = OwnerMark::new().protected_prefix();
        // "_c_" + 36 + "-"
        assert_eq!(p.len(), 3 + 36 + 1, "{p}");
        let uuid = &p[3..39];
        let groups: Vec<&str> = uuid.split('-').collect();
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(groups[2].starts_with('4'), "{p}");
        assert!("89ab".contains(&groups[3][..1]), "{p}");
        assert_ne!(p, OwnerMark::new().protected_prefix());
    }

    #[test]
    fn the_mark_is_in_the_name_or_the_acl() {
        let mark = OwnerMark::new();
        let seq = mark.path_to_create("/a/b/svc-", CreateMode::EphemeralSequential);
        assert_eq!(seq, format!("/a/b/{}svc-", mark.protected_prefix()));
        assert_eq!(
            mark.path_to_create("/a/svc", CreateMode::Persistent),
            "/a/svc"
        );
        let open = Acl::open_unsafe();
        assert_eq!(mark.acl_for(open, CreateMode::PersistentSequential), open);
        let acl = mark.acl_for(open, CreateMode::PersistentWithTtl);
        assert_eq!(acl.len(), 2);
        assert_eq!(acl[1].perms, Perms(0), "grants nothing");
        assert!(mark.in_acl(&acl));
        // As a reader without ADMIN sees it.
        let masked = vec![Acl::new(
            Perms(0),
            Id::new("digest", format!("_c_{}:x", mark.uuid)),
        )];
        assert!(mark.in_acl(&masked));
        assert!(!OwnerMark::new().in_acl(&acl), "another mark");
        assert!(!mark.in_acl(open));
    }
}
