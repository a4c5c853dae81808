//! zklock: HBase's ZooKeeper toolkit and inter-process read/write locks, for Rust.
//!
//! (Crate documentation is completed as the layers land.)

#![forbid(unsafe_code)]

pub mod client;
mod error;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::{Error, Result, ZkError, ZkResultExt};
