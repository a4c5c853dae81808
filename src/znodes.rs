//! HBase 1.3's znode layout: the node names `ZooKeeperWatcher.setNodeNames`
//! derives from the configuration (HBase 2 moved them into `ZNodePaths`).

use crate::error::{Error, Result};

/// `zookeeper.znode.parent`: HBase's base znode.
pub const ZOOKEEPER_ZNODE_PARENT: &str = "zookeeper.znode.parent";
/// HBase's `DEFAULT_ZOOKEEPER_ZNODE_PARENT`.
pub const DEFAULT_ZOOKEEPER_ZNODE_PARENT: &str = "/hbase";
/// `hbase.meta.replica.count` (HBase's `META_REPLICAS_NUM`), default 1.
pub const META_REPLICAS_NUM: &str = "hbase.meta.replica.count";

/// HBase 1.3's znode layout, as `ZooKeeperWatcher.setNodeNames` builds it:
/// each node is `<base>/<name>`, the name read from its configuration key
/// (defaults in [`ZNodePaths::KEYS`]), the base from `zookeeper.znode.parent`
/// (default `/hbase`). Get it from a watcher with
/// [`ZooKeeperWatcher::znode_paths`](crate::ZooKeeperWatcher::znode_paths).
///
/// HBase 1.3 keeps these as public fields of its `ZooKeeperWatcher`
/// (`watcher.rsZNode`, `watcher.tableLockZNode`, ...); here they are the fields
/// of this value, with the same names in snake case.
///
/// ```
/// use zklock::ZNodePaths;
/// let hbase = ZNodePaths::from_conf([("zookeeper.znode.master", "active-master")])?;
/// assert_eq!(hbase.base_znode, "/hbase");
/// assert_eq!(hbase.master_address_znode, "/hbase/active-master");
/// assert_eq!(hbase.table_lock_znode, "/hbase/table-lock");
/// assert_eq!(hbase.znode_for_replica(2), "/hbase/meta-region-server-2");
/// # Ok::<(), zklock::Error>(())
/// ```
#[doc(alias = "setNodeNames")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ZNodePaths {
    /// `baseZNode`: `zookeeper.znode.parent`, default `/hbase`.
    pub base_znode: String,
    /// `metaServerZNode` (HBase 1.3: `getZNodeForReplica(0)`): where the
    /// default meta replica's location is, `<base>/meta-region-server`.
    pub meta_server_znode: String,
    /// `rsZNode`: the region servers' ephemeral nodes, `<base>/rs`.
    pub rs_znode: String,
    /// `drainingZNode`: draining region servers, `<base>/draining`.
    pub draining_znode: String,
    /// `masterAddressZNode`: the active master, `<base>/master`.
    pub master_address_znode: String,
    /// `backupMasterAddressesZNode`: `<base>/backup-masters`.
    pub backup_master_addresses_znode: String,
    /// `clusterStateZNode`: present while the cluster is up, `<base>/running`.
    pub cluster_state_znode: String,
    /// `assignmentZNode`: regions in transition, `<base>/region-in-transition`.
    pub assignment_znode: String,
    /// `tableZNode`: table states, `<base>/table`.
    pub table_znode: String,
    /// `clusterIdZNode`: the cluster id, `<base>/hbaseid`.
    pub cluster_id_znode: String,
    /// `splitLogZNode`: distributed log splitting, `<base>/splitWAL`.
    pub split_log_znode: String,
    /// `balancerZNode`: the balancer's switch, `<base>/balancer`.
    pub balancer_znode: String,
    /// `regionNormalizerZNode`: the normalizer's switch, `<base>/normalizer`.
    pub region_normalizer_znode: String,
    /// `switchZNode`: the split / merge switches, `<base>/switch`.
    pub switch_znode: String,
    /// `tableLockZNode`: the table locks (HBase's `TableLockManager`),
    /// `<base>/table-lock`.
    pub table_lock_znode: String,
    /// `recoveringRegionsZNode`: `<base>/recovering-regions`.
    pub recovering_regions_znode: String,
    /// `namespaceZNode`: `<base>/namespace`.
    pub namespace_znode: String,
    /// The meta server znode's name (`zookeeper.znode.metaserver`).
    meta_server_name: String,
    /// `metaReplicaZnodes`: replica id → znode, for `hbase.meta.replica.count`.
    meta_replica_znodes: Vec<String>,
}

impl Default for ZNodePaths {
    /// HBase's defaults under `/hbase`.
    fn default() -> Self {
        ZNodePaths::from_conf(std::iter::empty::<(&str, &str)>())
            .expect("HBase's defaults are valid")
    }
}

impl ZNodePaths {
    /// The configuration key of each node name and its default, in
    /// `setNodeNames`' order (the base znode's is [`ZOOKEEPER_ZNODE_PARENT`]).
    pub const KEYS: &'static [(&'static str, &'static str)] = &[
        ("zookeeper.znode.metaserver", "meta-region-server"),
        ("zookeeper.znode.rs", "rs"),
        ("zookeeper.znode.draining.rs", "draining"),
        ("zookeeper.znode.master", "master"),
        ("zookeeper.znode.backup.masters", "backup-masters"),
        ("zookeeper.znode.state", "running"),
        ("zookeeper.znode.unassigned", "region-in-transition"),
        ("zookeeper.znode.tableEnableDisable", "table"),
        ("zookeeper.znode.clusterId", "hbaseid"),
        ("zookeeper.znode.splitlog", "splitWAL"),
        ("zookeeper.znode.balancer", "balancer"),
        ("zookeeper.znode.regionNormalizer", "normalizer"),
        ("zookeeper.znode.switch", "switch"),
        ("zookeeper.znode.tableLock", "table-lock"),
        ("zookeeper.znode.recovering.regions", "recovering-regions"),
        ("zookeeper.znode.namespace", "namespace"),
    ];

    /// `setNodeNames(conf)`: the layout from HBase configuration entries
    /// (`key`, `value`); keys it does not know are ignored, missing ones take
    /// HBase's defaults.
    ///
    /// # Errors
    /// `BadArguments` when `zookeeper.znode.parent` or a resulting path is not
    /// a valid znode path, or `hbase.meta.replica.count` is not a number ≥ 1.
    pub fn from_conf<K: AsRef<str>, V: AsRef<str>>(
        conf: impl IntoIterator<Item = (K, V)>,
    ) -> Result<ZNodePaths> {
        let conf: Vec<(String, String)> = conf
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string()))
            .collect();
        // The last entry for a key wins, as in a Configuration.
        let get = |key: &str| {
            conf.iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let base = get(ZOOKEEPER_ZNODE_PARENT).unwrap_or(DEFAULT_ZOOKEEPER_ZNODE_PARENT);
        crate::path::validate(base)?;
        let replicas = match get(META_REPLICAS_NUM) {
            None => 1,
            Some(v) => match v.trim().parse::<i32>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    return Err(Error::BadArguments(format!(
                        "{META_REPLICAS_NUM} must be a number >= 1, not {v:?}"
                    )))
                }
            },
        };
        let mut names = Vec::with_capacity(Self::KEYS.len());
        for &(key, default) in Self::KEYS {
            let name = get(key).unwrap_or(default);
            let path = crate::path::join_znode(base, name);
            crate::path::validate(&path)
                .map_err(|_| Error::BadArguments(format!("{key} = {name:?} gives {path:?}")))?;
            names.push(path);
        }
        let meta_server_name = get(Self::KEYS[0].0).unwrap_or(Self::KEYS[0].1).to_string();
        let mut it = names.into_iter();
        let mut next = || it.next().expect("one path per key");
        let meta_server_znode = next();
        let mut paths = ZNodePaths {
            base_znode: base.to_string(),
            meta_replica_znodes: vec![meta_server_znode.clone()],
            meta_server_znode,
            rs_znode: next(),
            draining_znode: next(),
            master_address_znode: next(),
            backup_master_addresses_znode: next(),
            cluster_state_znode: next(),
            assignment_znode: next(),
            table_znode: next(),
            cluster_id_znode: next(),
            split_log_znode: next(),
            balancer_znode: next(),
            region_normalizer_znode: next(),
            switch_znode: next(),
            table_lock_znode: next(),
            recovering_regions_znode: next(),
            namespace_znode: next(),
            meta_server_name,
        };
        for i in 1..replicas {
            let z = paths.replica_path(i);
            paths.meta_replica_znodes.push(z);
        }
        Ok(paths)
    }

    /// HBase's defaults under `base` (`zookeeper.znode.parent` = `base`).
    ///
    /// # Errors
    /// `BadArguments` for a bad path.
    pub fn under(base: &str) -> Result<ZNodePaths> {
        ZNodePaths::from_conf([(ZOOKEEPER_ZNODE_PARENT, base)])
    }

    fn replica_path(&self, replica_id: i32) -> String {
        crate::path::join_znode(
            &self.base_znode,
            &format!("{}-{replica_id}", self.meta_server_name),
        )
    }

    /// `getZNodeForReplica(replicaId)`: the meta replica's znode
    /// (`<base>/meta-region-server` for 0, `...-<id>` for the others, whether
    /// or not `hbase.meta.replica.count` counts them).
    pub fn znode_for_replica(&self, replica_id: i32) -> String {
        match usize::try_from(replica_id)
            .ok()
            .and_then(|i| self.meta_replica_znodes.get(i))
        {
            Some(z) => z.clone(),
            None => self.replica_path(replica_id),
        }
    }

    /// `isAnyMetaReplicaZnode(node)`: whether `node` is a configured meta
    /// replica's znode.
    pub fn is_any_meta_replica_znode(&self, node: &str) -> bool {
        self.meta_replica_znodes.iter().any(|z| z == node)
    }

    /// `isDefaultMetaReplicaZnode(node)`.
    pub fn is_default_meta_replica_znode(&self, node: &str) -> bool {
        node == self.meta_server_znode
    }

    /// `getMetaReplicaIdFromZnode(znode)`: the replica id in a meta replica
    /// znode's *name* (`meta-region-server` → 0, `meta-region-server-2` → 2).
    ///
    /// # Errors
    /// `BadArguments` for a name that is not a meta replica's (HBase throws a
    /// `NumberFormatException`).
    pub fn meta_replica_id_from_znode(&self, znode: &str) -> Result<i32> {
        if znode == self.meta_server_name {
            return Ok(0);
        }
        znode
            .strip_prefix(&self.meta_server_name)
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|id| id.parse().ok())
            .ok_or_else(|| Error::BadArguments(format!("not a meta replica znode: {znode:?}")))
    }

    /// `isClientReadable(node)`: whether HBase makes `node` world-readable
    /// (the base, the meta replicas, the master, the cluster id, the region
    /// servers, the tables; not the table locks).
    pub fn is_client_readable(&self, node: &str) -> bool {
        node == self.base_znode
            || self.is_any_meta_replica_znode(node)
            || node == self.master_address_znode
            || node == self.cluster_id_znode
            || node == self.rs_znode
            || node == self.table_znode
            || node
                .strip_prefix(self.table_znode.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// The znodes HBase's `createBaseZNodes` creates under the base (which it
    /// creates with its parents first): the assignment znode (while
    /// `hbase.assignment.usezk` is true, HBase 1.3's default), `rs`,
    /// `draining`, `table`, `splitWAL`, `backup-masters`, `table-lock`,
    /// `recovering-regions`.
    pub fn base_children(&self, assignment_uses_zk: bool) -> Vec<&str> {
        let mut v = Vec::with_capacity(8);
        if assignment_uses_zk {
            v.push(self.assignment_znode.as_str());
        }
        v.extend([
            self.rs_znode.as_str(),
            self.draining_znode.as_str(),
            self.table_znode.as_str(),
            self.split_log_znode.as_str(),
            self.backup_master_addresses_znode.as_str(),
            self.table_lock_znode.as_str(),
            self.recovering_regions_znode.as_str(),
        ]);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hbase_1_3_defaults() {
        let p = ZNodePaths::default();
        let want = [
            (&p.base_znode, "/hbase"),
            (&p.meta_server_znode, "/hbase/meta-region-server"),
            (&p.rs_znode, "/hbase/rs"),
            (&p.draining_znode, "/hbase/draining"),
            (&p.master_address_znode, "/hbase/master"),
            (&p.backup_master_addresses_znode, "/hbase/backup-masters"),
            (&p.cluster_state_znode, "/hbase/running"),
            (&p.assignment_znode, "/hbase/region-in-transition"),
            (&p.table_znode, "/hbase/table"),
            (&p.cluster_id_znode, "/hbase/hbaseid"),
            (&p.split_log_znode, "/hbase/splitWAL"),
            (&p.balancer_znode, "/hbase/balancer"),
            (&p.region_normalizer_znode, "/hbase/normalizer"),
            (&p.switch_znode, "/hbase/switch"),
            (&p.table_lock_znode, "/hbase/table-lock"),
            (&p.recovering_regions_znode, "/hbase/recovering-regions"),
            (&p.namespace_znode, "/hbase/namespace"),
        ];
        for (got, want) in want {
            assert_eq!(got, want);
        }
        assert_eq!(p.znode_for_replica(0), "/hbase/meta-region-server");
        assert_eq!(p.znode_for_replica(3), "/hbase/meta-region-server-3");
        assert!(p.is_any_meta_replica_znode("/hbase/meta-region-server"));
        assert!(!p.is_any_meta_replica_znode("/hbase/meta-region-server-1"));
        assert!(p.is_default_meta_replica_znode("/hbase/meta-region-server"));
        assert_eq!(
            p.meta_replica_id_from_znode("meta-region-server").unwrap(),
            0
        );
        assert_eq!(
            p.meta_replica_id_from_znode("meta-region-server-7")
                .unwrap(),
            7
        );
        assert!(p.meta_replica_id_from_znode("rs").is_err());
        assert!(p.is_client_readable("/hbase/table/t1"));
        assert!(!p.is_client_readable("/hbase/table-lock"));
        assert!(!p.is_client_readable("/hbase/table-lock/t1"));
        assert_eq!(p.base_children(true).len(), 8);
    }

    #[test]
    fn configuration_keys_and_bad_values() {
        let p = ZNodePaths::from_conf([
            ("zookeeper.znode.parent", "/hbase-unsecure"),
            ("zookeeper.znode.tableLock", "locks"),
            ("hbase.meta.replica.count", "3"),
            ("zookeeper.znode.master", "m1"),
            ("zookeeper.znode.master", "m2"),
            ("unrelated.key", "x"),
        ])
        .unwrap();
        assert_eq!(p.base_znode, "/hbase-unsecure");
        assert_eq!(p.table_lock_znode, "/hbase-unsecure/locks");
        assert_eq!(
            p.master_address_znode, "/hbase-unsecure/m2",
            "the last wins"
        );
        assert!(p.is_any_meta_replica_znode("/hbase-unsecure/meta-region-server-2"));
        assert!(!p.is_any_meta_replica_znode("/hbase-unsecure/meta-region-server-3"));
        assert_eq!(ZNodePaths::under("/").unwrap().rs_znode, "/rs");
        for bad in [
            vec![("zookeeper.znode.parent", "hbase")],
            vec![("zookeeper.znode.parent", "/hbase/")],
            vec![("zookeeper.znode.rs", "")],
            vec![("zookeeper.znode.rs", "a//b")],
            vec![("hbase.meta.replica.count", "0")],
            vec![("hbase.meta.replica.count", "two")],
        ] {
            let e = ZNodePaths::from_conf(bad.clone()).unwrap_err();
            assert!(matches!(e, Error::BadArguments(_)), "{bad:?}: {e}");
        }
    }
}
