//! The two lock kinds: which child a waiter watches (HBase's `getLockPath`).

use super::dialect::{Dialect, Layout, Role};
pub use crate::names::{READ_LOCK_PREFIX, WRITE_LOCK_PREFIX};

/// The strategy of [`ZkInterProcessLockBase`](crate::lock::ZkInterProcessLockBase):
/// HBase's abstract `getLockPath` of `ZKInterProcessLockBase`, implemented by
/// [`ReadLockKind`] and [`WriteLockKind`].
///
/// Children are ordered by their parsed 10-digit sequence, never as strings;
/// names that do not parse (or are not `read-`/`write-` children) are ignored.
/// This is HBase's layout; a lock in another [`Dialect`](crate::lock::Dialect)
/// names, orders and watches as that dialect does.
///
/// **Sealed**: the lock's layout (its [`Dialect`](crate::lock::Dialect) and
/// its role, read or write, which the kind names) decides what a waiter
/// watches, so a kind of one's own could not change it; the trait cannot be
/// implemented outside zklock. Its methods are HBase's rule, for reading and
/// for tests.
///
/// ```compile_fail
/// struct MyKind;
/// impl zklock::lock::LockKind for MyKind {
///     const PREFIX: &'static str = "mine-";
///     fn get_lock_path(_: &str, _: &[String]) -> Option<String> { None }
///     fn lock_holder(_: &str, _: &[String]) -> Option<String> { None }
/// }
/// ```
pub trait LockKind: sealed::Sealed + Send + Sync + 'static {
    /// The child-name prefix: `read-` or `write-`.
    const PREFIX: &'static str;

    /// `None` when `my_node` holds the lock, else the child to watch (whose
    /// deletion may grant it). `my_node` and `children` are names, not paths.
    fn get_lock_path(my_node: &str, children: &[String]) -> Option<String>;

    /// The child whose holder keeps `my_node` waiting (its metadata goes to the
    /// `MetadataHandler`), if any.
    fn lock_holder(my_node: &str, children: &[String]) -> Option<String>;
}

/// Read (shared) locks: HBase's `ZKInterProcessReadLock`. Held when no `write-`
/// child has a lower sequence; else watch the nearest lower `write-` child.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadLockKind;

/// Write (exclusive) locks: HBase's `ZKInterProcessWriteLock`. Held when no child
/// has a lower sequence; else watch the immediate predecessor, of either kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteLockKind;

impl LockKind for ReadLockKind {
    const PREFIX: &'static str = READ_LOCK_PREFIX;

    fn get_lock_path(my_node: &str, children: &[String]) -> Option<String> {
        Layout::new(Dialect::HBase, Role::Read).get_lock_path(my_node, children)
    }

    fn lock_holder(my_node: &str, children: &[String]) -> Option<String> {
        Layout::new(Dialect::HBase, Role::Read).lock_holder(my_node, children)
    }
}

impl LockKind for WriteLockKind {
    const PREFIX: &'static str = WRITE_LOCK_PREFIX;

    fn get_lock_path(my_node: &str, children: &[String]) -> Option<String> {
        Layout::new(Dialect::HBase, Role::Write).get_lock_path(my_node, children)
    }

    fn lock_holder(my_node: &str, children: &[String]) -> Option<String> {
        Layout::new(Dialect::HBase, Role::Write).lock_holder(my_node, children)
    }
}

mod sealed {
    /// Implemented by zklock's two lock kinds only (see [`LockKind`](super::LockKind)).
    #[allow(unreachable_pub)]
    pub trait Sealed {}
    impl Sealed for super::ReadLockKind {}
    impl Sealed for super::WriteLockKind {}
}

/// The role of `K` in its read/write lock.
pub(crate) fn role_of<K: LockKind>() -> Role {
    if K::PREFIX == READ_LOCK_PREFIX {
        Role::Read
    } else {
        Role::Write
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn write_watches_immediate_predecessor_by_number_not_string() {
        // As strings "…-0000000010" < "…-0000000009" is false, but "read-" < "write-"
        // would reorder kinds: the order must come from the numbers only.
        let c = names(&[
            "write-a-0000000010",
            "read-b-0000000009",
            "write-c-0000000002",
            "read-d-0000000011",
            "garbage",
            "write-bad-00000000x1",
        ]);
        assert_eq!(WriteLockKind::get_lock_path("write-c-0000000002", &c), None);
        assert_eq!(
            WriteLockKind::get_lock_path("write-a-0000000010", &c).as_deref(),
            Some("read-b-0000000009")
        );
        assert_eq!(
            WriteLockKind::lock_holder("write-a-0000000010", &c).as_deref(),
            Some("write-c-0000000002")
        );
        assert_eq!(WriteLockKind::lock_holder("write-c-0000000002", &c), None);
    }

    #[test]
    fn read_watches_nearest_lower_writer_only() {
        let c = names(&[
            "read-a-0000000001",
            "write-b-0000000002",
            "read-c-0000000003",
            "write-d-0000000004",
            "read-e-0000000005",
            "read-f-0000000006",
        ]);
        assert_eq!(ReadLockKind::get_lock_path("read-a-0000000001", &c), None);
        assert_eq!(
            ReadLockKind::get_lock_path("read-c-0000000003", &c).as_deref(),
            Some("write-b-0000000002")
        );
        assert_eq!(
            ReadLockKind::get_lock_path("read-f-0000000006", &c).as_deref(),
            Some("write-d-0000000004")
        );
        assert_eq!(
            ReadLockKind::lock_holder("read-f-0000000006", &c).as_deref(),
            Some("write-b-0000000002")
        );
        // Readers share: two readers with no writer below both hold.
        let r = names(&["read-x-0000000007", "read-y-0000000008"]);
        assert_eq!(ReadLockKind::get_lock_path("read-y-0000000008", &r), None);
        assert_eq!(
            WriteLockKind::get_lock_path("write-z-0000000009", &r).as_deref(),
            Some("read-y-0000000008")
        );
    }

    #[test]
    fn zklock_names_order_exactly_past_a_billion_and_after_wrapping() {
        let t = "0123456789abcdef";
        let n = |kind: &str, seq: i32| format!("{kind}{t}-{seq:010}");
        let c = vec![
            n("write-", 999_999_999),
            n("write-", 1_000_000_000),
            n("read-", 1_500_000_000),
        ];
        assert_eq!(WriteLockKind::get_lock_path(&c[0], &c), None);
        assert_eq!(WriteLockKind::get_lock_path(&c[1], &c), Some(c[0].clone()));
        assert_eq!(ReadLockKind::get_lock_path(&c[2], &c), Some(c[1].clone()));
        let w = vec![n("write-", -2_000_000_000), n("write-", -5)];
        assert_eq!(WriteLockKind::get_lock_path(&w[1], &w), Some(w[0].clone()));
        // Across the wrap: the node created just before it stays first.
        let holder = n("write-", i32::MAX);
        let newcomer = n("write-", i32::MIN);
        let reader = n("read-", i32::MIN + 1);
        let c = vec![newcomer.clone(), reader.clone(), holder.clone()];
        assert_eq!(WriteLockKind::get_lock_path(&holder, &c), None);
        assert_eq!(
            WriteLockKind::get_lock_path(&newcomer, &c),
            Some(holder.clone())
        );
        assert_eq!(
            ReadLockKind::get_lock_path(&reader, &c),
            Some(newcomer.clone())
        );
        assert_eq!(ReadLockKind::lock_holder(&reader, &c), Some(holder.clone()));
    }

    #[test]
    fn negative_sequences_and_unparsable_own_node() {
        let c = names(&["write-a--000000005", "write-b-0000000003"]);
        assert_eq!(
            WriteLockKind::get_lock_path("write-b-0000000003", &c).as_deref(),
            Some("write-a--000000005")
        );
        assert_eq!(WriteLockKind::get_lock_path("nonsense", &c), None);
        assert_eq!(ReadLockKind::get_lock_path("read-", &[]), None);
    }
}
