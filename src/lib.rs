//! zklock: HBase's ZooKeeper toolkit and inter-process read/write locks, for Rust.
//!
//! (Crate documentation is completed as the layers land.)

#![forbid(unsafe_code)]

pub mod client;
mod error;
mod metadata;
mod pending;
mod retry;
#[cfg(feature = "testing")]
pub mod testing;
mod util;

pub use error::{Error, Result, ZkError, ZkResultExt};
pub use metadata::{append_metadata, metadata_identifier, remove_metadata};
pub use pending::{InstancePending, PendingWatcher};
pub use retry::{BackoffPolicy, RetryConfig, RetryCounter, RetryCounterFactory};
