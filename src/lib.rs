//! # zklock
//!
//! HBase 1.3's ZooKeeper toolkit — `ZooKeeperWatcher`, `RecoverableZooKeeper`,
//! `ZKUtil`, the node trackers — and its inter-process read/write locks, for
//! threaded Rust services: synchronous, blocking, on zklock's own ZooKeeper client.
//!
//! ## Quick start
//!
//! ```
//! # #[cfg(feature = "testing")] {
//! use std::time::Duration;
//! use zklock::lock::{InterProcessLock, InterProcessReadWriteLock, ZkInterProcessReadWriteLock};
//! use zklock::ZooKeeperWatcher;
//!
//! # let server = zklock::testing::ZkServer::start().unwrap();
//! # let quorum = server.connect_string();
//! // One watcher (session) per process, shared by all its threads.
//! let zkw = ZooKeeperWatcher::connect(&quorum, "my-service", None)?;
//! let rw = ZkInterProcessReadWriteLock::new(&zkw, "/locks/orders", None)?;
//!
//! let write = rw.write_lock(b"compaction by worker 7");
//! {
//!     let guard = write.lock()?; // blocks; released when `guard` drops
//!     assert!(guard.fencing_token() > 0); // hand this to the resource you protect
//! }
//!
//! let read = rw.read_lock(b"report");
//! match read.try_lock_for(Duration::from_secs(1))? {
//!     Some(guard) => guard.unlock()?, // an error from release is returned here
//!     None => println!("busy"),
//! }
//! zkw.close()?;
//! # }
//! # Ok::<(), zklock::Error>(())
//! ```
//!
//! ## What is ported
//!
//! | HBase 1.3 | zklock |
//! |---|---|
//! | `ZooKeeperWatcher` | [`ZooKeeperWatcher`] (+ [`ZooKeeperWatcherBuilder`]) |
//! | `ZooKeeperListener` | [`ZooKeeperListener`] (trait, no-op defaults) |
//! | `Abortable` | [`Abortable`], [`LoggingAbortable`] |
//! | `RecoverableZooKeeper` | [`RecoverableZooKeeper`] |
//! | `RetryCounter`, `RetryCounterFactory`, backoff policies | [`RetryCounter`], [`RetryCounterFactory`], [`RetryConfig`], [`BackoffPolicy`] |
//! | `InstancePending`, `PendingWatcher` | [`InstancePending`], [`PendingWatcher`] |
//! | `ZKUtil` statics | free functions in [`zkutil`] (`ZKUtil.createWithParents(zkw, p)` → `zkutil::create_with_parents(&zkw, p)`) |
//! | `ZooKeeperWatcher.setNodeNames` (HBase 1.3's znode layout: `zookeeper.znode.parent`, `rsZNode`, `masterAddressZNode`, `tableLockZNode`, ...) | [`ZNodePaths`], [`ZooKeeperWatcher::znode_paths`], [`ZooKeeperWatcherBuilder::with_hbase_conf`] |
//! | `ZooKeeperNodeTracker`, `DeletionListener` | [`ZooKeeperNodeTracker`], [`DeletionListener`]; their events reach the watcher's listeners too, once each |
//! | subclasses of `ZooKeeperNodeTracker` (`MasterAddressTracker`, `ClusterStatusTracker`, ...) overriding `nodeCreated` / `nodeDataChanged` / `nodeDeleted` | [`ZooKeeperNodeTracker::with_listener`] with a [`NodeTrackerListener`] |
//! | `InterProcessLock`, `InterProcessReadWriteLock`, `MetadataHandler` | [`lock::InterProcessLock`], [`lock::InterProcessReadWriteLock`], [`lock::MetadataHandler`] |
//! | `ZKInterProcessLockBase`, `ZKInterProcessReadLock`, `ZKInterProcessWriteLock`, `ZKInterProcessReadWriteLock` | [`lock::ZkInterProcessLockBase`], [`lock::ZkInterProcessReadLock`], [`lock::ZkInterProcessWriteLock`], [`lock::ZkInterProcessReadWriteLock`] |
//! | `org.apache.zookeeper.ZooKeeper` | [`client::ZooKeeper`] (zklock's own client) |
//! | `KeeperException.Code` | [`ZkError`] inside [`Error::Zk`] |
//! | ZooKeeper's recipes: `WriteLock`, `LeaderElectionSupport`, `DistributedQueue`, barriers, group, 2PC; HBase's `ZKLeaderManager` (its one ephemeral leader znode) | [`recipes`] |
//! | `TableLockManager`'s `isShared ? readLock : writeLock` | [`lock::ZkInterProcessReadWriteLock::read_or_write_lock`], [`lock::OwnedLockGuard::acquire`] |
//!
//! HBase's names are kept; acronyms are one word (`ZKUtil` → `zkutil`,
//! `ZKInterProcessReadWriteLock` → `ZkInterProcessReadWriteLock`, with a doc alias).
//!
//! ## Threads
//!
//! All blocking work happens on the caller's thread. Each session costs two
//! threads: the client's connection thread and its event thread, which runs
//! watchers and [`ZooKeeperListener`]s in registration order.
//!
//! - **Library waits never go through the listener registry.** A waiting lock, a
//!   held lock's node watch, a tracker's re-read, a node removal waiting for the
//!   reconnect: each uses a per-watch watcher handed to the client with its
//!   request (registered by the thread that reads the reply, with it, so no
//!   event falls into a gap) or a session hook of the watcher.
//!   `unregister_all_listeners` affects only your listeners.
//! - **The event thread never blocks in library code**: library reactions wake a
//!   waiting thread or issue an asynchronous request. A blocking call in *your*
//!   listener delays every event of the session, locks' `InDoubt`/`Lost` signals
//!   included: keep listeners short.
//! - **`Drop` never waits on the network**: a dropped guard or held lock removes
//!   its node in the background; `unlock()`/`release()` are the synchronous forms.
//! - **Deadlines are values** ([`Deadline`]) passed down the layers
//!   ([`RecoverableZooKeeper::with_deadline`], [`client::ZooKeeper::with_deadline`]),
//!   never a thread-local side channel.
//! - Every wait is bounded or ends with the session; a waiting `acquire` can be
//!   cancelled ([`lock::ZkInterProcessLockBase::cancel`]) and ends with
//!   [`ZooKeeperWatcher::close`]. A thousand threads waiting on distinct locks
//!   through one watcher cost nothing to unrelated events (watches are found by
//!   path).
//!
//! ## Errors
//!
//! One [`Error`] enum. ZooKeeper's codes come as [`Error::Zk`] with a [`ZkError`]
//! (`NoNode`, `BadVersion`, `ConnectionLoss`, `SessionExpired`, ... — every code),
//! after [`RecoverableZooKeeper`]'s retries: recoverable ones (`ConnectionLoss`,
//! `OperationTimeout`) are retried, fatal ones (`SessionExpired`, `AuthFailed`)
//! never are, and no replacement session is opened behind your back.
//! `UNIMPLEMENTED` for an operation that a later server version or a server
//! setting provides (`whoAmI` before 3.7, persistent watches before 3.6, TTL
//! nodes without `extendedTypesEnabled`) is [`Error::Unsupported`], naming
//! what is needed; its [`code`](Error::code) is still `Unimplemented`.
//!
//! ## Guides
//!
//! The `README.md` and the guides in `docs/`, shipped with the crate (their
//! Rust code runs as doc tests in `make test`):
//!
//! - [`docs/hbase.md`][guide-hbase]: porting from HBase;
//! - [`docs/dialects.md`][guide-dialects]: joining a Curator or kazoo fleet;
//! - [`docs/recipes.md`][guide-recipes]: the recipes;
//! - [`docs/security.md`][guide-security]: TLS, SASL, ACLs;
//! - [`docs/ensembles.md`][guide-ensembles]: changing ensembles;
//! - [`docs/cli.md`][guide-cli]: the `zklock` command;
//! - [`docs/features.md`][guide-features]: what zklock has, beside its anchors;
//! - [`docs/client.md`][guide-client]: why its own client;
//! - [`docs/observability.md`][guide-observability]: logs and metrics;
//! - [`docs/server-versions.md`][guide-server-versions]: ZooKeeper 3.6 to 3.9;
//! - [`docs/architecture.md`][guide-architecture]: the map of the code;
//! - [`docs/writing-a-recipe.md`][guide-writing-a-recipe]: a new recipe on the engine;
//! - [`docs/testing.md`][guide-testing]: the real-server harness;
//! - [`docs/benchmarks.md`][guide-benchmarks]: measured numbers and how to reproduce them.
//!
//! [guide-hbase]: https://docs.rs/crate/zklock/latest/source/docs/hbase.md
//! [guide-dialects]: https://docs.rs/crate/zklock/latest/source/docs/dialects.md
//! [guide-recipes]: https://docs.rs/crate/zklock/latest/source/docs/recipes.md
//! [guide-security]: https://docs.rs/crate/zklock/latest/source/docs/security.md
//! [guide-ensembles]: https://docs.rs/crate/zklock/latest/source/docs/ensembles.md
//! [guide-cli]: https://docs.rs/crate/zklock/latest/source/docs/cli.md
//! [guide-features]: https://docs.rs/crate/zklock/latest/source/docs/features.md
//! [guide-client]: https://docs.rs/crate/zklock/latest/source/docs/client.md
//! [guide-observability]: https://docs.rs/crate/zklock/latest/source/docs/observability.md
//! [guide-server-versions]: https://docs.rs/crate/zklock/latest/source/docs/server-versions.md
//! [guide-architecture]: https://docs.rs/crate/zklock/latest/source/docs/architecture.md
//! [guide-writing-a-recipe]: https://docs.rs/crate/zklock/latest/source/docs/writing-a-recipe.md
//! [guide-testing]: https://docs.rs/crate/zklock/latest/source/docs/testing.md
//! [guide-benchmarks]: https://docs.rs/crate/zklock/latest/source/docs/benchmarks.md
//!
//! ## Features
//!
//! None is on by default; the library alone needs no C toolchain.
//!
//! - `tls`: TLS for the client's connection ([`client::TlsConfig`]: rustls
//!   with the `ring` provider, PEM files), and x509 identities.
//! - `kerberos`: SASL GSSAPI for the client (`client::SaslConfig::kerberos`,
//!   MIT's `libgssapi_krb5`; its build needs `libkrb5-dev` and `libclang`).
//!   SASL DIGEST-MD5 needs no feature.
//! - `metrics`: counts, latencies and signals through the `metrics` facade
//!   ([`metrics`]; every name in `docs/observability.md`); the application
//!   installs the exporter. Off: nothing is built or measured.
//! - `cli`: the `zklock` command (`cargo install zklock --features cli`
//!   installs that one binary): `flock(1)`-like locking, `ls`, `stat`,
//!   `watch`, elections and a throwaway `server`. Built without the test
//!   harness.
//! - `server`: a throwaway local ZooKeeper ([`testing::ZkServer`]: the
//!   server's jars, a temp directory, free ports; stopped on drop), for
//!   scripts and demos; what `zklock server` runs.
//! - `testing` (implies `server`): the real-ZooKeeper harness ([`testing`]:
//!   `ZkEnsemble`, `FaultProxy`, TLS stores, a KDC, step
//!   hooks) used by zklock's tests, examples and benchmarks; not part of the
//!   stable API.
//!
//! On docs.rs each item behind a feature says which.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod client;
mod deadline;
mod engine;
mod ensemble;
mod error;
mod listener;
pub mod lock;
mod metadata;
pub mod metrics;
mod names;
mod path;
mod pending;
pub mod recipes;
mod recoverable;
mod retry;
mod sequence;
mod shared_count;
#[cfg(feature = "server")]
pub mod testing;
mod tracker;
mod types;
mod util;
mod watcher;
pub mod zkutil;
mod znodes;

/// The README's and the guides' Rust code (`docs/*.md`), compiled and run as doc
/// tests by `cargo test --all-features --doc` (part of `make test`), each against
/// a throwaway server the code starts with the harness.
#[cfg(all(doctest, feature = "testing"))]
mod guides {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/hbase.md")]
    struct Hbase;
    #[doc = include_str!("../docs/dialects.md")]
    struct Dialects;
    #[doc = include_str!("../docs/recipes.md")]
    struct Recipes;
    #[doc = include_str!("../docs/cli.md")]
    struct Cli;
    #[doc = include_str!("../docs/testing.md")]
    struct Testing;
    #[cfg(all(feature = "tls", feature = "kerberos"))]
    #[doc = include_str!("../docs/security.md")]
    struct Security;
    #[doc = include_str!("../docs/architecture.md")]
    struct Architecture;
}

pub use deadline::Deadline;
pub use ensemble::EnsembleTracker;
pub use error::{ConnectCause, Error, Result, ZkError, ZkResultExt};
pub use listener::{Abortable, LoggingAbortable, ZooKeeperListener};
pub use metadata::{append_metadata, metadata_identifier, remove_metadata};
pub use pending::{InstancePending, PendingWatcher};
pub use recoverable::RecoverableZooKeeper;
pub use retry::{BackoffPolicy, RetryConfig, RetryCounter, RetryCounterFactory};
pub use tracker::{DeletionListener, NodeTrackerListener, ZooKeeperNodeTracker};
pub use watcher::{
    ListenerRegistration, WeakZooKeeperWatcher, ZooKeeperWatcher, ZooKeeperWatcherBuilder,
    DEFAULT_BASE_ZNODE,
};
pub use znodes::{
    ZNodePaths, DEFAULT_ZOOKEEPER_ZNODE_PARENT, META_REPLICAS_NUM, ZOOKEEPER_ZNODE_PARENT,
};
