//! Real-ZooKeeper test harness (feature `testing`).
