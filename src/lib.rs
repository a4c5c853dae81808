//! zklock: HBase's ZooKeeper toolkit and inter-process read/write locks, for Rust.
//!
//! (Crate documentation is completed as the layers land.)

#![forbid(unsafe_code)]

pub mod client;
mod error;
mod listener;
mod metadata;
mod pending;
mod recoverable;
mod retry;
#[cfg(feature = "testing")]
pub mod testing;
mod tracker;
mod util;
mod watcher;
pub mod zkutil;

pub use error::{Error, Result, ZkError, ZkResultExt};
pub use listener::{Abortable, LoggingAbortable, ZooKeeperListener};
pub use metadata::{append_metadata, metadata_identifier, remove_metadata};
pub use pending::{InstancePending, PendingWatcher};
pub use recoverable::RecoverableZooKeeper;
pub use retry::{BackoffPolicy, RetryConfig, RetryCounter, RetryCounterFactory};
pub use watcher::{ZooKeeperWatcher, ZooKeeperWatcherBuilder, DEFAULT_BASE_ZNODE};
