//! HBase `RecoverableZooKeeper`'s metadata prefix, and the creator tags and
//! sequence suffixes of sequential nodes.
//!
//! # The metadata prefix
//!
//! Data written by `create` and `set_data` carries HBase's metadata prefix, which
//! lets a retry recognise its own earlier write; [`append_metadata`] documents the
//! layout.
//!
//! # Sequential nodes
//!
//! ZooKeeper appends the parent's child version as `%010d` of a signed 32-bit int
//! to the name of a sequential node: `0000000042`, and after 2^31 creates under one
//! parent negative numbers, `-000000005` (10 characters) or `-2147483648` (11).
//! zklock puts a creator tag, unique per create call, before it (`write-<tag>`
//! then the sequence), so a retry finds the node its lost call created.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// HBase's `MAGIC`: the first byte of data that carries the metadata prefix.
const MAGIC: u8 = 0xFF;
/// HBase's `MAGIC_SIZE`.
const MAGIC_SIZE: usize = 1;
/// HBase's `ID_LENGTH_SIZE`: a big-endian `int`.
const ID_LENGTH_SIZE: usize = 4;
/// The salt: one Java `long`.
const SALT_SIZE: usize = 8;

/// HBase's `RecoverableZooKeeper.appendMetaData(data)`: `data` behind the metadata
/// prefix for the writer `identifier`, with a fresh random salt.
///
/// Data written by `create` and `set_data` carries a prefix that lets a retry
/// recognise its own earlier write. The layout is HBase 1.3's
/// (`RecoverableZooKeeper.appendMetaData` / `removeMetaData`), byte for byte:
///
/// ```text
/// offset  size  field
/// 0       1     magic: 0xFF                         (MAGIC, MAGIC_SIZE = 1)
/// 1       4     id length n: big-endian i32         (ID_LENGTH_OFFSET = 1, ID_LENGTH_SIZE = 4)
/// 5       n-8   identifier: UTF-8 bytes of the writer's identifier
/// n-3     8     salt: 8 random bytes (Java: Bytes.toBytes(random.nextLong()))
/// 5+n     ...   the caller's data
/// ```
///
/// The id length `n` counts the identifier **and** the salt, so a reader skips
/// `5 + n` bytes without knowing either. The salt is fresh for every write: two
/// writes of the same data by the same process differ, so a retry that reads the
/// node back and finds exactly the bytes it sent knows that the write was its own.
///
/// Differences from HBase, both compatible with it:
/// - HBase leaves empty data without a prefix (so a retried `create` of empty data
///   cannot tell its own node from another writer's). zklock always prefixes; HBase's
///   `removeMetaData` reads such data back as empty.
/// - HBase's `removeMetaData` throws on a buffer that starts with `0xFF` but is too
///   short for the length it declares (or declares a negative one).
///   [`remove_metadata`] returns such data unchanged: it strips a prefix only
///   when the whole prefix is there.
///
/// # Panics
///
/// If `identifier` is longer than `i32::MAX - 8` bytes (the format's limit).
///
/// # Examples
///
/// ```
/// use zklock::{append_metadata, metadata_identifier, remove_metadata};
///
/// let stored = append_metadata("host-0x1", b"payload");
/// assert_eq!(stored[0], 0xFF);
/// assert_eq!(&stored[1..5], &(8 + 8u32).to_be_bytes()); // identifier + salt
/// assert_eq!(&stored[5..13], b"host-0x1");
/// assert_eq!(&stored[21..], b"payload");
/// assert_eq!(remove_metadata(&stored), b"payload");
/// assert!(metadata_identifier(&stored).unwrap().starts_with(b"host-0x1"));
///
/// // Every write is different: the salt is random.
/// assert_ne!(stored, append_metadata("host-0x1", b"payload"));
/// ```
pub fn append_metadata(identifier: &str, data: &[u8]) -> Vec<u8> {
    append_metadata_salted(identifier, data, random_u64())
}

/// [`append_metadata`] with a given salt.
fn append_metadata_salted(identifier: &str, data: &[u8], salt: u64) -> Vec<u8> {
    let id = identifier.as_bytes();
    let id_length = i32::try_from(id.len() + SALT_SIZE)
        .expect("metadata identifier longer than i32::MAX - 8 bytes");
    let mut out =
        Vec::with_capacity(MAGIC_SIZE + ID_LENGTH_SIZE + id.len() + SALT_SIZE + data.len());
    out.push(MAGIC);
    out.extend_from_slice(&id_length.to_be_bytes());
    out.extend_from_slice(id);
    out.extend_from_slice(&salt.to_be_bytes());
    out.extend_from_slice(data);
    out
}

/// Splits `data` into (id field, payload) if it carries a whole prefix.
fn split_metadata(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&magic, rest) = data.split_first()?;
    if magic != MAGIC || rest.len() < ID_LENGTH_SIZE {
        return None;
    }
    let (length, rest) = rest.split_at(ID_LENGTH_SIZE);
    let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
    let length = usize::try_from(length).ok()?;
    if length > rest.len() {
        return None;
    }
    Some(rest.split_at(length))
}

/// HBase's `RecoverableZooKeeper.removeMetaData(data)`: `data` without the
/// metadata prefix.
///
/// Data without a prefix (not starting with `0xFF`) is returned unchanged, as in
/// HBase. So is data that starts with `0xFF` but is too short for the id length it
/// declares, or declares a negative one, where HBase throws: this never panics.
///
/// # Examples
///
/// ```
/// use zklock::{append_metadata, remove_metadata};
///
/// assert_eq!(remove_metadata(&append_metadata("me", b"x")), b"x");
/// assert_eq!(remove_metadata(&append_metadata("me", b"")), b"");
/// assert_eq!(remove_metadata(b"plain"), b"plain");
/// // A truncated prefix is left alone.
/// assert_eq!(remove_metadata(&[0xFF, 0, 0, 0, 9, b'a']), &[0xFF, 0, 0, 0, 9, b'a']);
/// ```
pub fn remove_metadata(data: &[u8]) -> &[u8] {
    match split_metadata(data) {
        Some((_, payload)) => payload,
        None => data,
    }
}

/// The id field of the metadata prefix (no HBase counterpart): the writer's
/// identifier followed by the 8-byte salt, or `None` if `data` carries no whole
/// prefix.
///
/// Since the salt is fresh for every write, two equal id fields mean the same
/// write. The identifier alone is the field without its last 8 bytes, for data
/// written by HBase or zklock.
///
/// # Examples
///
/// ```
/// use zklock::{append_metadata, metadata_identifier};
///
/// let stored = append_metadata("me", b"x");
/// let field = metadata_identifier(&stored).unwrap();
/// assert_eq!(field.len(), 2 + 8);
/// assert_eq!(&field[..2], b"me");
/// assert_eq!(metadata_identifier(b"plain"), None);
/// ```
pub fn metadata_identifier(data: &[u8]) -> Option<&[u8]> {
    split_metadata(data).map(|(id, _)| id)
}

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
fn parse_sequence(suffix: &str) -> Option<i32> {
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

/// A process-random, never-repeating 64-bit value: a bijective mix of a random
/// per-process seed plus a counter.
fn random_u64() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        // RandomState's keys come from the OS's random source.
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        if let Ok(since_epoch) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)
        {
            hasher.write_u128(since_epoch.as_nanos());
        }
        hasher.finish()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // Odd multiplier and splitmix64's finalizer are both bijections on u64, so
    // distinct counters give distinct values.
    mix(seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
}

/// splitmix64's finalizer (a bijection on `u64`).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn layout_is_hbases() {
        let stored = append_metadata_salted("host,1,2-0xab", b"data", 0x0102_0304_0506_0708);
        let mut expected = vec![0xFF, 0, 0, 0, 13 + 8];
        expected.extend_from_slice(b"host,1,2-0xab");
        expected.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        expected.extend_from_slice(b"data");
        assert_eq!(stored, expected);
        assert_eq!(remove_metadata(&stored), b"data");
        assert_eq!(metadata_identifier(&stored), Some(&expected[5..5 + 13 + 8]));
    }

    #[test]
    fn round_trips() {
        for data in [
            &b""[..],
            b"x",
            &[0xFF; 3],
            &[0xFF, 0, 0, 0, 0],
            &[0u8; 1000],
        ] {
            for id in ["", "me", "\u{e9}t\u{e9}-0x1"] {
                let stored = append_metadata(id, data);
                assert_eq!(remove_metadata(&stored), data);
                let field = metadata_identifier(&stored).unwrap();
                assert_eq!(&field[..field.len() - SALT_SIZE], id.as_bytes());
            }
        }
    }

    #[test]
    fn salts_differ() {
        let writes: HashSet<Vec<u8>> = (0..1000).map(|_| append_metadata("me", b"x")).collect();
        assert_eq!(writes.len(), 1000);
    }

    #[test]
    fn reads_hbase_data_without_salt() {
        // Old HBase (no salt): id length = identifier only.
        let mut old = vec![0xFF, 0, 0, 0, 2];
        old.extend_from_slice(b"mey");
        assert_eq!(remove_metadata(&old), b"y");
        assert_eq!(metadata_identifier(&old), Some(&b"me"[..]));
        // An empty id field and empty data.
        assert_eq!(remove_metadata(&[0xFF, 0, 0, 0, 0]), b"");
    }

    #[test]
    fn garbage_is_returned_unchanged() {
        let cases: &[&[u8]] = &[
            b"",
            b"plain",
            &[0xFF],
            &[0xFF, 0],
            &[0xFF, 0, 0, 0],
            &[0xFF, 0, 0, 0, 1],                // declares 1 byte, has 0
            &[0xFF, 0, 0, 0, 9, 1, 2, 3],       // declares 9, has 3
            &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1], // negative length (-1)
            &[0xFF, 0x80, 0, 0, 0, 1],          // i32::MIN
            &[0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 1], // i32::MAX
            &[0xFE, 0, 0, 0, 0, 1],             // wrong magic
        ];
        for &case in cases {
            assert_eq!(remove_metadata(case), case, "{case:?}");
            assert_eq!(metadata_identifier(case), None, "{case:?}");
        }
    }

    #[test]
    fn every_prefix_of_a_write_is_safe() {
        let stored = append_metadata("me", b"data");
        for end in 0..=stored.len() {
            let cut = &stored[..end];
            let payload = remove_metadata(cut);
            if end >= 1 + 4 + 2 + 8 {
                assert_eq!(payload, &b"data"[..end - 15]);
            } else {
                assert_eq!(payload, cut);
            }
        }
    }

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
    fn mix_is_a_bijection_on_a_sample() {
        let outputs: HashSet<u64> = (0..10_000u64).map(mix).collect();
        assert_eq!(outputs.len(), 10_000);
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
