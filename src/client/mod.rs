//! zklock's own blocking ZooKeeper client.

mod types;

pub use types::*;
