//! ZooKeeper's recipes (`org.apache.zookeeper.recipes.*`, the recipes page) and
//! HBase's `ZKLeaderManager`, on the toolkit, sharing node layouts with the Java
//! recipes so Java and Rust participants meet in one directory.
//!
//! Every wait of a recipe goes through a per-watch watcher handed to the client
//! with the request (never the user's listener registry), the event thread only
//! wakes threads or issues asynchronous calls, every wait ends with the session,
//! and no exit leaves an orphan node (drops remove nodes in the background).

mod support;

pub mod election;
pub mod leader_manager;
pub mod write_lock;
