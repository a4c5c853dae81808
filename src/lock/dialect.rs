//! Lock dialects: the node layouts of HBase (zklock's own), Apache Curator and
//! kazoo, so a zklock participant can take the same lock as a fleet of Java or
//! Python services, on the same path.
//!
//! Everything that differs between the layouts lives here: the node names, how
//! a name is parsed and the queue ordered, which node a waiter watches, what
//! the node carries and how the lock's parents are created. The lock engine
//! (`base.rs`, the wait of `engine/wait.rs` and `watch.rs`) is the same for all.

use std::str::FromStr;
use std::sync::OnceLock;

use crate::engine::owned::OwnerMark;
use crate::error::{Error, Result};
use crate::names::{
    sequence_of_child, CURATOR_LOCK, CURATOR_READ, CURATOR_WRITE, HBASE_READ, HBASE_WRITE,
    KAZOO_LOCK, KAZOO_READ,
};
pub use crate::names::{Dialect, LEASE_PREFIX};
use crate::path;
use crate::recoverable::tagged_prefix;
use crate::sequence::parse_sequence;
use crate::types::CreateMode;
use crate::util::random_uuid;

/// The internal mutex's child of a semaphore's znode (Curator's name).
pub const SEMAPHORE_LOCKS: &str = "locks";
/// The leases' child of a semaphore's znode (Curator's name).
pub const SEMAPHORE_LEASES: &str = "leases";
/// kazoo's guard lock beside a semaphore's znode: `<p>-__lock__`.
pub(crate) const KAZOO_SEMAPHORE_LOCK: &str = "-__lock__";

/// How far `sequence` is from `reference`, in creation order: ZooKeeper's
/// sequence is the parent's cversion, a signed 32-bit counter that wraps from
/// 2147483647 to -2147483648. Serial-number arithmetic (RFC 1982) orders across
/// the wrap, as long as the live children span less than 2^31 creates.
pub(crate) fn distance(sequence: i32, reference: i32) -> i32 {
    sequence.wrapping_sub(reference)
}

/// A node of another layout than `dialect`'s among the children of a
/// semaphore's znode `<p>`, and its dialect:
/// - zklock's and Curator's layouts keep only `locks` and `leases` in `<p>`:
///   a kazoo lease (`<uuid hex>`) there is foreign, and zklock's or
///   Curator's leases would not count it;
/// - kazoo's keeps its leases directly in `<p>` and counts every child as
///   one: the other layouts' `locks`/`leases` (and their lease names) are
///   foreign there. Whose directories they are is not in their names: they
///   are told as zklock's ([`Dialect::HBase`]) here.
pub(crate) fn semaphore_foreign(dialect: Dialect, children: &[String]) -> Option<(&str, Dialect)> {
    children.iter().find_map(|c| {
        let found = match Dialect::of_lease(c) {
            Some(d) if d != dialect && (d == Dialect::Kazoo || dialect == Dialect::Kazoo) => d,
            _ if dialect == Dialect::Kazoo && (c == SEMAPHORE_LOCKS || c == SEMAPHORE_LEASES) => {
                Dialect::HBase
            }
            _ => return None,
        };
        Some((c.as_str(), found))
    })
}

impl FromStr for Dialect {
    type Err = Error;

    /// `hbase`, `curator` or `kazoo` (any case).
    fn from_str(s: &str) -> Result<Dialect> {
        Dialect::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::BadArguments(format!("unknown dialect {s:?} (hbase, curator or kazoo)"))
            })
    }
}

/// A lock node as its own dialect's participants see it (what `zklock ls`
/// shows): see [`lock_nodes`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockNode {
    /// The node's name.
    pub name: String,
    /// Its dialect.
    pub dialect: Dialect,
    /// `read` (a shared lock), `write` (the exclusive side of a read/write
    /// lock; kazoo's `Lock` names its nodes the same) or `mutex` (Curator's
    /// `InterProcessMutex`).
    pub kind: &'static str,
    /// Whether it holds the lock, by its dialect's rules (else it waits).
    pub held: bool,
}

/// The lock nodes among a lock directory's `children`, of every dialect, as
/// each dialect's participants see them (Curator's `LeaderLatch` nodes and
/// names of no dialect are left out). More than one dialect among them is a
/// mixed directory: their clients may hold at once (see [`Dialect`]).
pub fn lock_nodes(children: &[String]) -> Vec<LockNode> {
    children
        .iter()
        .filter_map(|name| {
            let dialect = Dialect::of_node(name)?;
            let role = match dialect {
                Dialect::HBase if name.starts_with(HBASE_READ) => Role::Read,
                Dialect::HBase => Role::Write,
                Dialect::Curator if name.contains(CURATOR_READ) => Role::Read,
                Dialect::Curator if name.contains(CURATOR_WRITE) => Role::Write,
                Dialect::Curator => Role::Mutex,
                Dialect::Kazoo if name.rsplit_once(KAZOO_READ).is_some() => Role::Read,
                Dialect::Kazoo => Role::Write,
            };
            let layout = Layout::new(dialect, role);
            layout.sequence(name)?;
            Some(LockNode {
                name: name.clone(),
                dialect,
                kind: match role {
                    Role::Read => "read",
                    Role::Write => "write",
                    Role::Mutex => "mutex",
                },
                held: layout.get_lock_path(name, children).is_none(),
            })
        })
        .collect()
}

/// What a lock instance is in its dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    /// The exclusive lock: HBase's write lock, Curator's `InterProcessMutex`,
    /// kazoo's `Lock`.
    Mutex,
    /// The shared side of a read/write lock.
    Read,
    /// The exclusive side of a read/write lock.
    Write,
}

/// A node ahead of an attempt in its dialect's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ahead<'a> {
    name: &'a str,
    /// Whether it keeps the attempt waiting (a writer, for a reader).
    blocks: bool,
}

/// One lock instance's layout (how its nodes are named and ordered, the one
/// meaning of "layout" in zklock): a dialect and a role in it. The names are
/// in `src/names.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Layout {
    pub(crate) dialect: Dialect,
    pub(crate) role: Role,
}

impl Layout {
    pub(crate) fn new(dialect: Dialect, role: Role) -> Layout {
        Layout { dialect, role }
    }

    /// The lock name in a node's name (before the sequence).
    pub(crate) fn name(&self) -> &'static str {
        match (self.dialect, self.role) {
            (Dialect::HBase, Role::Read) => HBASE_READ,
            (Dialect::HBase, _) => HBASE_WRITE,
            (Dialect::Curator, Role::Mutex) => CURATOR_LOCK,
            (Dialect::Curator, Role::Read) => CURATOR_READ,
            (Dialect::Curator, Role::Write) => CURATOR_WRITE,
            (Dialect::Kazoo, Role::Read) => KAZOO_READ,
            (Dialect::Kazoo, _) => KAZOO_LOCK,
        }
    }

    /// The path prefix of a new attempt's sequential create under `parent`,
    /// carrying a tag unique to the attempt.
    pub(crate) fn tagged_prefix(&self, parent: &str) -> String {
        match self.dialect {
            Dialect::HBase => tagged_prefix(&path::join_znode(parent, self.name())),
            Dialect::Curator => OwnerMark::new().path_to_create(
                &path::join_znode(parent, self.name()),
                CreateMode::EphemeralSequential,
            ),
            Dialect::Kazoo => path::join_znode(
                parent,
                &format!("{}{}", random_uuid().replace('-', ""), self.name()),
            ),
        }
    }

    /// The data a node of this layout carries for `given` bytes (before
    /// HBase's metadata prefix, which only the HBase dialect writes).
    pub(crate) fn node_data(&self, given: &[u8]) -> Vec<u8> {
        if self.dialect == Dialect::Curator && given.is_empty() {
            local_address().as_bytes().to_vec()
        } else {
            given.to_vec()
        }
    }

    /// Whether node data carries HBase's metadata prefix.
    pub(crate) fn metadata_prefix(&self) -> bool {
        self.dialect == Dialect::HBase
    }

    /// How the lock znode and its missing ancestors are created.
    pub(crate) fn parent_mode(&self) -> CreateMode {
        match self.dialect {
            Dialect::Curator => CreateMode::Container,
            _ => CreateMode::Persistent,
        }
    }

    /// A node of another dialect among `children`, if any (see
    /// [`Dialect::of_node`]).
    pub(crate) fn foreign<'a>(&self, children: &'a [String]) -> Option<(&'a str, Dialect)> {
        children.iter().find_map(|c| {
            Dialect::of_node(c)
                .filter(|d| *d != self.dialect)
                .map(|d| (c.as_str(), d))
        })
    }

    /// The sequence ZooKeeper gave the node `name` of this layout.
    pub(crate) fn sequence(&self, name: &str) -> Option<i32> {
        match self.dialect {
            Dialect::HBase => {
                if !name.starts_with(self.name()) {
                    return None;
                }
                sequence_of_child(name, self.name())
            }
            Dialect::Curator | Dialect::Kazoo => parse_sequence(name.rsplit_once(self.name())?.1),
        }
    }

    /// Whether `name` is a node of this layout's kind (reaping, visiting).
    pub(crate) fn is_own_kind(&self, name: &str) -> bool {
        self.sequence(name).is_some()
    }

    /// This kind's nodes among `children`, oldest first in the dialect's order.
    pub(crate) fn own_kind<'a>(&self, children: &'a [String]) -> Vec<&'a String> {
        let mut mine: Vec<&String> = children.iter().filter(|c| self.is_own_kind(c)).collect();
        match self.dialect {
            Dialect::HBase => {
                if let Some(reference) = mine.first().and_then(|c| self.sequence(c)) {
                    mine.sort_by_key(|c| self.sequence(c).map(|s| distance(s, reference)));
                }
            }
            Dialect::Curator => mine.sort_by(|a, b| self.curator_key(a).cmp(self.curator_key(b))),
            Dialect::Kazoo => mine.sort_by_key(|c| c.rsplit_once(self.name()).map(|(_, s)| s)),
        }
        mine
    }

    /// `None` when `my_node` holds the lock, else the child to watch (whose
    /// deletion may grant it).
    pub(crate) fn get_lock_path(&self, my_node: &str, children: &[String]) -> Option<String> {
        let ahead = self.ahead(my_node, children)?;
        ahead
            .iter()
            .rev()
            .find(|a| a.blocks)
            .map(|a| a.name.to_string())
    }

    /// The child whose holder keeps `my_node` waiting, if any.
    pub(crate) fn lock_holder(&self, my_node: &str, children: &[String]) -> Option<String> {
        let ahead = self.ahead(my_node, children)?;
        ahead.iter().find(|a| a.blocks).map(|a| a.name.to_string())
    }

    /// The nodes ahead of `my_node` in the queue, oldest first; `None` when
    /// `my_node` is not a node of this layout among `children`.
    fn ahead<'a>(&self, my_node: &str, children: &'a [String]) -> Option<Vec<Ahead<'a>>> {
        match self.dialect {
            Dialect::HBase => self.hbase_ahead(my_node, children),
            Dialect::Curator => self.curator_ahead(my_node, children),
            Dialect::Kazoo => self.kazoo_ahead(my_node, children),
        }
    }

    /// HBase: `read-`/`write-` children by their parsed sequence (serial-number
    /// order across the wrap); a writer waits for every lower child, a reader
    /// for lower writers.
    fn hbase_ahead<'a>(&self, my_node: &str, children: &'a [String]) -> Option<Vec<Ahead<'a>>> {
        let parse = |name: &str| -> Option<(i32, bool)> {
            if name.starts_with(HBASE_WRITE) {
                Some((sequence_of_child(name, HBASE_WRITE)?, true))
            } else if name.starts_with(HBASE_READ) {
                Some((sequence_of_child(name, HBASE_READ)?, false))
            } else {
                None
            }
        };
        let (mine, _) = parse(my_node)?;
        let mut v: Vec<(i32, Ahead<'a>)> = children
            .iter()
            .filter_map(|c| {
                let (s, write) = parse(c)?;
                let blocks = write || self.role != Role::Read;
                Some((distance(s, mine), Ahead { name: c, blocks }))
            })
            .filter(|(d, _)| *d < 0)
            .collect();
        v.sort_by_key(|(d, _)| *d);
        Some(v.into_iter().map(|(_, a)| a).collect())
    }

    /// Curator's `StandardLockInternalsDriver.fixForSorting`; for the
    /// read/write lock, its `SortingLockInternalsDriver` (the `__READ__` fix,
    /// then the `__WRIT__` one): the text after the last lock name, or the
    /// whole name without one.
    fn curator_key<'a>(&self, name: &'a str) -> &'a str {
        let fix = |s: &'a str, lock_name: &str| match s.rfind(lock_name) {
            Some(i) => &s[i + lock_name.len()..],
            None => s,
        };
        match self.role {
            Role::Mutex => fix(name, CURATOR_LOCK),
            Role::Read | Role::Write => fix(fix(name, CURATOR_READ), CURATOR_WRITE),
        }
    }

    /// Curator's `LockInternals.getSortedChildren` + `getsTheLock`: every
    /// child of the directory, sorted (stably) by its key as strings; an
    /// exclusive attempt waits for every child before it, a reader for the
    /// writers (`__WRIT__` in the name) before it.
    fn curator_ahead<'a>(&self, my_node: &str, children: &'a [String]) -> Option<Vec<Ahead<'a>>> {
        let mut sorted: Vec<&'a String> = children.iter().collect();
        sorted.sort_by(|a, b| self.curator_key(a).cmp(self.curator_key(b)));
        let index = sorted.iter().position(|c| *c == my_node)?;
        Some(
            sorted[..index]
                .iter()
                .map(|c| Ahead {
                    name: c,
                    blocks: self.role != Role::Read || c.contains(CURATOR_WRITE),
                })
                .collect(),
        )
    }

    /// kazoo's `Lock._get_predecessor`: the contenders are the children
    /// matching `(?:<exclude names>)(-?\d{10})$` (`Lock` and `ReadLock`:
    /// `__lock__`; `WriteLock`: `__lock__` and `__rlock__`) whose sequence, as
    /// a string, is lower than the attempt's; the predecessor is the highest.
    fn kazoo_ahead<'a>(&self, my_node: &str, children: &'a [String]) -> Option<Vec<Ahead<'a>>> {
        // kazoo's own sequence is the text after its prefix, whatever it is.
        let mine = my_node.rsplit_once(self.name())?.1;
        let excluded: &[&str] = match self.role {
            Role::Write => &[KAZOO_LOCK, KAZOO_READ],
            Role::Mutex | Role::Read => &[KAZOO_LOCK],
        };
        let mut v: Vec<(&'a str, Ahead<'a>)> = children
            .iter()
            .filter_map(|c| {
                let s = excluded.iter().find_map(|n| kazoo_sequence(c, n))?;
                (s < mine).then_some((
                    s,
                    Ahead {
                        name: c,
                        blocks: true,
                    },
                ))
            })
            .collect();
        v.sort_by_key(|(s, _)| *s);
        Some(v.into_iter().map(|(_, a)| a).collect())
    }
}

/// The sequence text of a kazoo contender: `name` matches kazoo's
/// `(?:<node_name>)(-?\d{10})$` (searched, so anything may come before).
/// ZooKeeper writes sequences -1 to -999999999 as `-` and 9 digits: kazoo's
/// pattern does not match them, and neither does this.
fn kazoo_sequence<'a>(name: &'a str, node_name: &str) -> Option<&'a str> {
    let digits_at = name.len().checked_sub(10)?;
    let digits = name.get(digits_at..)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let head = &name[..digits_at];
    if head.ends_with(node_name) {
        return Some(digits);
    }
    let signed = head.strip_suffix('-')?;
    signed.ends_with(node_name).then(|| &name[digits_at - 1..])
}

/// The local address as Curator's default node data writes it
/// (`InetAddress.getLocalHost().getHostAddress()`): the host name resolved,
/// IPv4 first; `127.0.0.1` when it does not resolve. Resolved once.
pub(crate) fn local_address() -> &'static str {
    static ADDRESS: OnceLock<String> = OnceLock::new();
    ADDRESS.get_or_init(|| {
        use std::net::ToSocketAddrs;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|h| h.trim().to_string())
            .unwrap_or_default();
        let addrs: Vec<std::net::IpAddr> = (host.as_str(), 0)
            .to_socket_addrs()
            .map(|a| a.map(|s| s.ip()).collect())
            .unwrap_or_default();
        addrs
            .iter()
            .find(|a| a.is_ipv4())
            .or(addrs.first())
            .map_or_else(|| "127.0.0.1".to_string(), ToString::to_string)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    const U1: &str = "_c_0f1e2d3c-aaaa-4bbb-8ccc-000000000001-";
    const U2: &str = "_c_0f1e2d3c-aaaa-4bbb-8ccc-000000000002-";
    const K1: &str = "0123456789abcdef0123456789abcdef";
    const K2: &str = "fedcba9876543210fedcba9876543210";

    #[test]
    fn names_carry_a_fresh_tag_per_attempt() {
        let curator = Layout::new(Dialect::Curator, Role::Mutex).tagged_prefix("/l");
        let uuid = curator
            .strip_prefix("/l/_c_")
            .and_then(|s| s.strip_suffix("-lock-"))
            .unwrap();
        assert_eq!(uuid.len(), 36, "{uuid}");
        assert_eq!(uuid.matches('-').count(), 4);
        assert_eq!(&uuid[14..15], "4");
        let kazoo = Layout::new(Dialect::Kazoo, Role::Read).tagged_prefix("/l");
        let hex = kazoo
            .strip_prefix("/l/")
            .and_then(|s| s.strip_suffix("__rlock__"))
            .unwrap();
        assert_eq!(hex.len(), 32);
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(
            curator,
            Layout::new(Dialect::Curator, Role::Mutex).tagged_prefix("/l")
        );
        assert!(Layout::new(Dialect::Curator, Role::Write)
            .tagged_prefix("/l")
            .ends_with("-__WRIT__"));
        assert!(Layout::new(Dialect::HBase, Role::Mutex)
            .tagged_prefix("/l")
            .starts_with("/l/write-"));
    }

    #[test]
    fn dialect_of_each_layout_and_of_garbage() {
        for (name, d) in [
            (format!("{U1}lock-0000000003"), Some(Dialect::Curator)),
            (format!("{U1}__WRIT__0000000003"), Some(Dialect::Curator)),
            (format!("{U1}__READ__0000000003"), Some(Dialect::Curator)),
            ("lock-0000000003".to_string(), Some(Dialect::Curator)),
            (format!("{U1}latch-0000000003"), Some(Dialect::Curator)),
            (format!("{K1}__lock__0000000003"), Some(Dialect::Kazoo)),
            (format!("{K1}__rlock__-000000003"), Some(Dialect::Kazoo)),
            (
                "write-0123456789abcdef-0000000003".to_string(),
                Some(Dialect::HBase),
            ),
            ("read-host0000000003".to_string(), Some(Dialect::HBase)),
            ("reap-clock-0123456789abcdef-0000000001".to_string(), None),
            ("x-72057594037927936-0000000001".to_string(), None),
            ("garbage".to_string(), None),
            ("__lock__".to_string(), None),
        ] {
            assert_eq!(Dialect::of_node(&name), d, "{name}");
        }
        assert_eq!("Curator".parse::<Dialect>().unwrap(), Dialect::Curator);
        assert!(matches!(
            "zk".parse::<Dialect>(),
            Err(Error::BadArguments(_))
        ));
    }

    #[test]
    fn curator_mutex_orders_by_the_text_after_lock_and_watches_its_predecessor() {
        let l = Layout::new(Dialect::Curator, Role::Mutex);
        let (a, b, c) = (
            format!("{U2}lock-0000000001"),
            format!("{U1}lock-0000000002"),
            format!("{U2}lock-0000000010"),
        );
        let children = names(&[&c, &a, &b]);
        assert_eq!(l.get_lock_path(&a, &children), None);
        assert_eq!(l.get_lock_path(&b, &children), Some(a.clone()));
        assert_eq!(l.get_lock_path(&c, &children), Some(b.clone()));
        assert_eq!(l.lock_holder(&c, &children), Some(a.clone()));
        assert_eq!(l.sequence(&c), Some(10));
        assert_eq!(l.own_kind(&children), vec![&a, &b, &c]);
        // Every child takes part, as in Curator: an unknown one too.
        let with_other = names(&[&a, "0000000000-other"]);
        assert_eq!(
            l.get_lock_path(&a, &with_other).as_deref(),
            Some("0000000000-other")
        );
        assert_eq!(l.get_lock_path("absent", &children), None);
    }

    #[test]
    fn the_issues_facts_curator_sorts_kazoo_after_itself_kazoo_ignores_curator() {
        // Curator sorts a kazoo node (no "lock-" in it: its whole name is the
        // key) after all of its own, even one created later.
        let curator = Layout::new(Dialect::Curator, Role::Mutex);
        let kazoo_node = format!("{K1}__lock__0000000001");
        let curator_node = format!("{U1}lock-0000000002");
        let c = names(&[&kazoo_node, &curator_node]);
        assert_eq!(curator.get_lock_path(&curator_node, &c), None);
        assert_eq!(
            curator.get_lock_path(&kazoo_node, &c),
            Some(curator_node.clone())
        );
        // kazoo does not see Curator's node at all: both would hold.
        let kazoo = Layout::new(Dialect::Kazoo, Role::Mutex);
        assert_eq!(kazoo.get_lock_path(&kazoo_node, &c), None);
        let later = format!("{K2}__lock__0000000003");
        let c = names(&[&curator_node, &later]);
        assert_eq!(kazoo.get_lock_path(&later, &c), None);
        // Hence the refusal.
        assert_eq!(curator.foreign(&c), Some((later.as_str(), Dialect::Kazoo)));
        assert_eq!(
            kazoo.foreign(&c),
            Some((curator_node.as_str(), Dialect::Curator))
        );
        let hbase = Layout::new(Dialect::HBase, Role::Write);
        assert_eq!(
            hbase.foreign(&names(&[&later])).map(|f| f.1),
            Some(Dialect::Kazoo)
        );
        assert_eq!(kazoo.foreign(&names(&[&later, "garbage"])), None);
    }

    #[test]
    fn curator_read_write_readers_share_writers_exclude() {
        let r = Layout::new(Dialect::Curator, Role::Read);
        let w = Layout::new(Dialect::Curator, Role::Write);
        let r1 = format!("{U1}__READ__0000000001");
        let w2 = format!("{U2}__WRIT__0000000002");
        let r3 = format!("{U1}__READ__0000000003");
        let w4 = format!("{U2}__WRIT__0000000004");
        let r5 = format!("{U1}__READ__0000000005");
        let c = names(&[&r5, &w4, &r3, &w2, &r1]);
        assert_eq!(r.get_lock_path(&r1, &c), None);
        assert_eq!(w.get_lock_path(&w2, &c), Some(r1.clone()));
        // The nearest lower writer (Curator's own reader watches the first).
        assert_eq!(r.get_lock_path(&r5, &c), Some(w4.clone()));
        assert_eq!(r.lock_holder(&r5, &c), Some(w2.clone()));
        assert_eq!(r.get_lock_path(&r3, &c), Some(w2.clone()));
        assert_eq!(w.get_lock_path(&w4, &c), Some(r3.clone()));
        let readers = names(&[&r1, &r3]);
        assert_eq!(r.get_lock_path(&r3, &readers), None);
        assert_eq!(r.own_kind(&c), vec![&r1, &r3, &r5]);
        assert_eq!(w.own_kind(&c), vec![&w2, &w4]);
    }

    #[test]
    fn kazoo_orders_sequences_as_strings_and_lock_ignores_readers() {
        let m = Layout::new(Dialect::Kazoo, Role::Mutex);
        let w = Layout::new(Dialect::Kazoo, Role::Write);
        let r = Layout::new(Dialect::Kazoo, Role::Read);
        let w1 = format!("{K2}__lock__0000000001");
        let r2 = format!("{K1}__rlock__0000000002");
        let r3 = format!("{K2}__rlock__0000000003");
        let w4 = format!("{K1}__lock__0000000004");
        let r5 = format!("{K1}__rlock__0000000005");
        let c = names(&[&r5, &w4, &r3, &r2, &w1, "other"]);
        assert_eq!(m.get_lock_path(&w1, &c), None);
        assert_eq!(m.get_lock_path(&w4, &c), Some(w1.clone()));
        assert_eq!(w.get_lock_path(&w4, &c), Some(r3.clone()));
        assert_eq!(w.lock_holder(&w4, &c), Some(w1.clone()));
        assert_eq!(r.get_lock_path(&r3, &c), Some(w1.clone()));
        assert_eq!(r.get_lock_path(&r5, &c), Some(w4.clone()));
        assert_eq!(r.get_lock_path(&r2, &names(&[&r2, &r3])), None);
        // Strings: a wrapped (negative) sequence sorts first, as in kazoo ...
        let neg = format!("{K1}__lock__-1000000005");
        assert_eq!(
            m.get_lock_path(&w1, &names(&[&w1, &neg])),
            Some(neg.clone())
        );
        assert_eq!(m.sequence(&neg), Some(-1_000_000_005));
        // ... and -1 to -999999999 (`-` and 9 digits) do not match its pattern.
        let short = format!("{K1}__lock__-000000005");
        assert_eq!(m.get_lock_path(&w1, &names(&[&w1, &short])), None);
        assert_eq!(m.get_lock_path(&short, &names(&[&w1, &short])), None);
        assert_eq!(m.sequence(&short), Some(-5));
        assert_eq!(m.own_kind(&c), vec![&w1, &w4]);
    }

    #[test]
    fn hbase_layout_is_zklocks_own() {
        let w = Layout::new(Dialect::HBase, Role::Write);
        let r = Layout::new(Dialect::HBase, Role::Read);
        let c = names(&[
            "write-a-0000000010",
            "read-b-0000000009",
            "write-c-0000000002",
        ]);
        assert_eq!(w.get_lock_path("write-c-0000000002", &c), None);
        assert_eq!(
            w.get_lock_path("write-a-0000000010", &c).as_deref(),
            Some("read-b-0000000009")
        );
        assert_eq!(
            r.get_lock_path("read-b-0000000009", &c).as_deref(),
            Some("write-c-0000000002")
        );
        assert_eq!(
            Layout::new(Dialect::HBase, Role::Mutex),
            Layout {
                role: Role::Mutex,
                ..w
            }
        );
        assert_eq!(Layout::new(Dialect::HBase, Role::Mutex).name(), "write-");
    }

    #[test]
    fn lock_nodes_of_every_dialect() {
        let c = names(&[
            &format!("{U1}lock-0000000002"),
            &format!("{U2}lock-0000000001"),
            &format!("{K1}__rlock__0000000003"),
            &format!("{K2}__lock__0000000004"),
            &format!("{U1}latch-0000000005"),
            "write-0123456789abcdef-0000000006",
            "garbage",
        ]);
        let got: Vec<(Dialect, &str, bool)> = lock_nodes(&c)
            .iter()
            .map(|n| (n.dialect, n.kind, n.held))
            .collect();
        assert_eq!(
            got,
            [
                (Dialect::Curator, "mutex", false),
                (Dialect::Curator, "mutex", true),
                (Dialect::Kazoo, "read", true),
                (Dialect::Kazoo, "write", false),
                (Dialect::HBase, "write", true),
            ]
        );
    }

    #[test]
    fn semaphore_leases_and_the_foreign_ones_in_each_layout() {
        let hbase = "lease-0123456789abcdef-0000000001";
        let curator = format!("{U1}lease-0000000002");
        for (name, d) in [
            (hbase, Some(Dialect::HBase)),
            (curator.as_str(), Some(Dialect::Curator)),
            (K1, Some(Dialect::Kazoo)),
            ("lease-0000000001", None),
            ("locks", None),
            ("0123456789abcdef", None),
        ] {
            assert_eq!(Dialect::of_lease(name), d, "{name}");
        }
        let kazoo_p = names(&[K1, K2]);
        let zklock_p = names(&[SEMAPHORE_LOCKS, SEMAPHORE_LEASES]);
        for own in [Dialect::HBase, Dialect::Curator] {
            assert_eq!(semaphore_foreign(own, &kazoo_p), Some((K1, Dialect::Kazoo)));
            assert_eq!(semaphore_foreign(own, &zklock_p), None);
            // A user's node beside them is no lease.
            assert_eq!(semaphore_foreign(own, &names(&["count", "locks"])), None);
        }
        assert_eq!(semaphore_foreign(Dialect::Kazoo, &kazoo_p), None);
        assert_eq!(
            semaphore_foreign(Dialect::Kazoo, &names(&[K1, SEMAPHORE_LEASES])),
            Some((SEMAPHORE_LEASES, Dialect::HBase))
        );
        assert_eq!(
            semaphore_foreign(Dialect::Kazoo, &names(&[&curator])),
            Some((curator.as_str(), Dialect::Curator))
        );
    }

    #[test]
    fn data_and_parents_per_dialect() {
        let curator = Layout::new(Dialect::Curator, Role::Mutex);
        assert_eq!(curator.node_data(b""), local_address().as_bytes());
        assert_eq!(curator.node_data(b"x"), b"x");
        assert_eq!(curator.parent_mode(), CreateMode::Container);
        assert!(!curator.metadata_prefix());
        let kazoo = Layout::new(Dialect::Kazoo, Role::Mutex);
        assert_eq!(kazoo.node_data(b""), b"");
        assert_eq!(kazoo.parent_mode(), CreateMode::Persistent);
        assert!(Layout::new(Dialect::HBase, Role::Read).metadata_prefix());
        assert!(local_address().parse::<std::net::IpAddr>().is_ok());
    }
}
