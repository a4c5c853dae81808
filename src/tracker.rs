//! `ZooKeeperNodeTracker` and `DeletionListener` (being written).
