//! Sequential node names: ZooKeeper's sequence suffix, and the creator tag zklock
//! puts before it.
//!
//! ZooKeeper appends the parent's child version as `%010d` of a signed 32-bit int
//! to the name of a sequential node: `0000000042`, and after 2^31 creates under one
//! parent negative numbers, `-000000005` (10 characters) or `-2147483648` (11).
//! zklock puts a creator tag, unique per create call, before it (`write-<tag>`
//! then the sequence), so a retry finds the node its lost call created. Below
//! every layer that names or orders sequential nodes (`RecoverableZooKeeper`, the
//! locks, the recipes).

use crate::util::random_u64;

/// A creator tag unique to one create call: 16 lowercase hex digits.
///
/// Unique within the process (a bijection of a counter: no two calls in one
/// process get the same tag, in any thread) and across processes with
/// overwhelming probability (the counter is offset by a random per-process seed).
/// Sequential names are `<prefix><tag>-<sequence>`; [`tagged_sequence`] reads the
/// sequence back by position, without ambiguity.
pub(crate) fn unique_tag() -> String {
    format!("{:016x}", random_u64())
}

/// The sequence number ZooKeeper appended to a sequential node's name, or `None`
/// if `node_name` does not end in one.
///
/// ZooKeeper formats the number as Java's `%010d` of a signed `int`: 10 digits
/// (`0000000042`), or after 2^31 creates under the parent, a negative number whose
/// sign takes one of the 10 places (`-000000005`) or, from -1000000000 down, an
/// 11th one (`-2147483648`). Only these canonical forms are accepted; anything
/// else is `None`, never a panic.
///
/// A `-` right before 10 digits is read as a sign when the 11 characters form a
/// valid negative sequence (-1000000000 to -2147483648). A name whose prefix
/// itself ends with `-` (ZooKeeper's `WriteLock` recipe uses `x-<session>-`) and
/// whose sequence is 1000000000 or more is therefore misread; use
/// the position when the layout is known: zklock's own `<prefix><tag>-<sequence>`
/// names go through [`tagged_sequence`]; this suffix reading is the fallback for
/// names written by others (HBase's `write-<identifier><sequence>`).
pub(crate) fn sequence_of(node_name: &str) -> Option<i32> {
    let bytes = node_name.as_bytes();
    if bytes.len() >= 11 && node_name.is_char_boundary(bytes.len() - 11) {
        if let Some(n) = parse_sequence(&node_name[bytes.len() - 11..]) {
            return Some(n);
        }
    }
    if bytes.len() >= 10 && node_name.is_char_boundary(bytes.len() - 10) {
        return parse_sequence(&node_name[bytes.len() - 10..]);
    }
    None
}

/// The length of [`unique_tag`]'s tags.
pub(crate) const TAG_LEN: usize = 16;

/// The sequence of a tagged sequential node `<prefix><16 hex tag>-<sequence>`
/// (how `RecoverableZooKeeper` names them), read by position: exact for every
/// sequence, negative ones included. `None` when `node_name` is not of that form.
pub(crate) fn tagged_sequence(node_name: &str, prefix: &str) -> Option<i32> {
    let rest = node_name.strip_prefix(prefix)?;
    let (tag, rest) = (rest.get(..TAG_LEN)?, rest.get(TAG_LEN..)?);
    if !tag.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    parse_sequence(rest.strip_prefix('-')?)
}

/// The sequence number of `node_name` when it is `prefix` followed by ZooKeeper's
/// sequence suffix, or `None`: unambiguous whatever the prefix ends with.
#[cfg(test)]
pub(crate) fn sequence_after(node_name: &str, prefix: &str) -> Option<i32> {
    parse_sequence(node_name.strip_prefix(prefix)?)
}

/// `suffix` as ZooKeeper's `%010d` of an `i32`: the number if `suffix` is exactly
/// how ZooKeeper would have written it.
pub(crate) fn parse_sequence(suffix: &str) -> Option<i32> {
    // Cheap checks first: 10 or 11 ASCII bytes, digits after an optional '-'.
    let digits = suffix.strip_prefix('-').unwrap_or(suffix);
    if !(10..=11).contains(&suffix.len())
        || digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let n: i32 = suffix.parse().ok()?;
    // Canonical: rejects "-0000000001" (ZooKeeper writes -1 as "-000000001"),
    // "-000000000" and 11 digits.
    (format!("{n:010}") == suffix).then_some(n)
}

/// The number after the last `sep` of a sequential node's name, as Java's
/// recipes read it (`ZNodeName` after the last `-`, `LeaderElectionSupport`
/// after the last `_`); `None` when it is not a number.
pub(crate) fn number_after_last(name: &str, sep: char) -> Option<i64> {
    let i = name.rfind(sep)?;
    name[i + 1..].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tags_are_unique_across_threads() {
        let tags: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..2000).map(|_| unique_tag()).collect::<Vec<_>>()))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        assert_eq!(tags.len(), 16_000);
        assert_eq!(tags.iter().collect::<HashSet<_>>().len(), 16_000);
        for tag in &tags {
            assert_eq!(tag.len(), 16);
            assert!(tag
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
    }

    #[test]
    fn sequences_positive() {
        assert_eq!(sequence_of("write-0000000000"), Some(0));
        assert_eq!(sequence_of("write-0000000042"), Some(42));
        assert_eq!(sequence_of("0000000042"), Some(42));
        assert_eq!(sequence_of("read-0123456789abcdef0000000007"), Some(7));
        assert_eq!(sequence_of("x2147483647"), Some(i32::MAX));
        assert_eq!(sequence_of("lock-0999999999"), Some(999_999_999));
        assert_eq!(
            sequence_of(&format!("write-{}{:010}", unique_tag(), 123)),
            Some(123)
        );
    }

    #[test]
    fn sequences_negative() {
        assert_eq!(sequence_of("write-abc-2147483648"), Some(i32::MIN));
        // Only a sign can make sense of this one.
        assert_eq!(sequence_of("write-2147483648"), Some(i32::MIN));
        assert_eq!(sequence_of("-2147483648"), Some(i32::MIN));
        assert_eq!(sequence_of("write-abc-1000000000"), Some(-1_000_000_000));
        assert_eq!(sequence_of("write-abc-999999999"), Some(-999_999_999));
        assert_eq!(sequence_of("write-abc-000000005"), Some(-5));
        assert_eq!(sequence_of("-000000001"), Some(-1));
        assert_eq!(sequence_of("x-72-000000001"), Some(-1));
        for n in [
            i32::MIN,
            -1_000_000_000,
            -999_999_999,
            -5,
            -1,
            0,
            1,
            i32::MAX,
        ] {
            let name = format!("write-{}{n:010}", unique_tag());
            assert_eq!(sequence_of(&name), Some(n), "{name}");
        }
    }

    #[test]
    fn a_dash_separator_before_small_sequences_is_not_a_sign() {
        // ZooKeeper's WriteLock recipe: "x-<session>-" + sequence.
        assert_eq!(sequence_of("x-72057594037927936-0000000001"), Some(1));
        assert_eq!(sequence_of("write-0000000042"), Some(42));
        assert_eq!(sequence_of("x--0000000001"), Some(1));
        // The documented ambiguity: 10 digits >= 10^9 after a '-' read as negative;
        // sequence_after settles it.
        assert_eq!(sequence_of("x-1-1500000000"), Some(-1_500_000_000));
        assert_eq!(sequence_of("lock-1000000000"), Some(-1_000_000_000));
        assert_eq!(
            sequence_after("lock-1000000000", "lock-"),
            Some(1_000_000_000)
        );
        assert_eq!(
            sequence_after("lock--1000000000", "lock-"),
            Some(-1_000_000_000)
        );
        assert_eq!(
            sequence_after("x-1-1500000000", "x-1-"),
            Some(1_500_000_000)
        );
    }

    #[test]
    fn sequence_garbage_is_none() {
        for name in [
            "",
            "write-",
            "123456789",
            "write-12345678x9",
            "write-+000000042",
            "write- 000000042",
            "-000000000",      // -0 is never written
            "write2147483648", // over i32::MAX, no sign
            "write-9999999999",
            "-",
            "----------",
            "\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}",
            "x\u{e9}000000001",
            "\u{1F600}\u{1F600}\u{1F600}",
        ] {
            assert_eq!(sequence_of(name), None, "{name:?}");
        }
    }

    #[test]
    fn sequence_after_prefix() {
        assert_eq!(sequence_after("write-0000000042", "write-"), Some(42));
        assert_eq!(sequence_after("write--000000042", "write-"), Some(-42));
        assert_eq!(
            sequence_after("write--2147483648", "write-"),
            Some(i32::MIN)
        );
        assert_eq!(sequence_after("read-0000000042", "write-"), None);
        assert_eq!(sequence_after("write-00000000421", "write-"), None);
        assert_eq!(sequence_after("write-", "write-"), None);
    }
}
