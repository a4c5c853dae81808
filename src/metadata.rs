//! HBase `RecoverableZooKeeper`'s metadata prefix: data written by `create` and
//! `set_data` carries it, which lets a retry recognise its own earlier write;
//! [`append_metadata`] documents the layout.

use crate::util::random_u64;

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
}
