//! Chunks: the full values of a partition's keys in one backup layer, cut
//! into objects of about `chunk_bytes` each so restore can skip a chunk
//! whose keys all came from a newer layer.
//!
//! Stored as `DGBC`, a format version byte, then a zstd frame of
//! changes in the keyspace codec (each a `Full` change: key, version,
//! value, expiry). Decoding trusts nothing: sizes are bounded by the
//! index, every change must decode, be a full value and belong to the
//! partition.

use bytes::Bytes;
use keyspace::{codec, Change, ChangeKind};

use crate::index::ChunkInfo;

pub const MAGIC: &[u8; 4] = b"DGBC";
pub const VERSION: u8 = 1;
/// A chunk never decompresses past this, whatever its index says.
pub const MAX_CHUNK_BYTES: u64 = 256 << 20;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("checksum mismatch (stored object is damaged)")]
    Checksum,
    #[error("size {got} differs from the index's {want}")]
    Size { got: u64, want: u64 },
    #[error("not a deltagrid backup chunk (bad magic or version)")]
    Magic,
    #[error("does not decompress: {0}")]
    Compression(String),
    #[error("holds a bad change: {0}")]
    Change(String),
    #[error("holds key {0:?}, which its index does not list or another partition owns")]
    Key(String),
}

/// Cuts `entries` (full values) into chunks of about `chunk_bytes` before
/// compression; each is (stored object, its index entry).
pub fn build(entries: &[Change], chunk_bytes: usize) -> Vec<(Bytes, ChunkInfo)> {
    let mut out = Vec::new();
    let mut raw = Vec::new();
    let mut keys = Vec::new();
    for (i, c) in entries.iter().enumerate() {
        codec::encode(c, &mut raw);
        keys.push(c.key.to_vec());
        if raw.len() >= chunk_bytes || i + 1 == entries.len() {
            out.push(seal(&raw, std::mem::take(&mut keys)));
            raw.clear();
        }
    }
    out
}

fn seal(raw: &[u8], keys: Vec<Vec<u8>>) -> (Bytes, ChunkInfo) {
    let mut stored = MAGIC.to_vec();
    stored.push(VERSION);
    stored.extend_from_slice(&zstd::bulk::compress(raw, 3).unwrap_or_default());
    let info = ChunkInfo {
        stored_bytes: stored.len() as u64,
        checksum: xxhash_rust::xxh3::xxh3_64(&stored),
        raw_bytes: raw.len() as u64,
        keys,
    };
    (Bytes::from(stored), info)
}

/// Checks a stored chunk against its index entry and decodes its changes;
/// `owns(key)` says whether a key belongs to the chunk's partition.
pub fn open(stored: &[u8], info: &ChunkInfo, owns: impl Fn(&[u8]) -> bool) -> Result<Vec<Change>, ChunkError> {
    if stored.len() as u64 != info.stored_bytes {
        return Err(ChunkError::Size { got: stored.len() as u64, want: info.stored_bytes });
    }
    if xxhash_rust::xxh3::xxh3_64(stored) != info.checksum {
        return Err(ChunkError::Checksum);
    }
    if stored.len() < 5 || &stored[..4] != MAGIC || stored[4] != VERSION {
        return Err(ChunkError::Magic);
    }
    if info.raw_bytes > MAX_CHUNK_BYTES {
        return Err(ChunkError::Size { got: info.raw_bytes, want: MAX_CHUNK_BYTES });
    }
    let raw = zstd::bulk::decompress(&stored[5..], info.raw_bytes as usize)
        .map_err(|e| ChunkError::Compression(e.to_string()))?;
    if raw.len() as u64 != info.raw_bytes {
        return Err(ChunkError::Size { got: raw.len() as u64, want: info.raw_bytes });
    }
    let mut rest = Bytes::from(raw);
    let mut out = Vec::with_capacity(info.keys.len());
    while !rest.is_empty() {
        let (change, used) = codec::decode(&rest).map_err(|e| ChunkError::Change(e.to_string()))?;
        rest = rest.slice(used..);
        if !matches!(change.kind, ChangeKind::Full { .. }) {
            return Err(ChunkError::Change("not a full value".into()));
        }
        let listed = info.keys.get(out.len()).is_some_and(|k| k[..] == change.key[..]);
        if !listed || !owns(&change.key) {
            return Err(ChunkError::Key(String::from_utf8_lossy(&change.key).into_owned()));
        }
        out.push(change);
    }
    if out.len() != info.keys.len() {
        return Err(ChunkError::Change(format!("{} changes for {} listed keys", out.len(), info.keys.len())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyspace::{Value, Version};
    use proptest::prelude::*;

    fn entry(i: usize, len: usize) -> Change {
        Change {
            key: Bytes::from(format!("key{i}")),
            version: Version { hlc: i as u64 + 1, site: 1 },
            kind: ChangeKind::Full { value: Value::Str(Bytes::from(vec![b'v'; len])), expire_at: 0 },
        }
    }

    #[test]
    fn cuts_at_the_chunk_size_and_opens_what_it_built() {
        let entries: Vec<_> = (0..100).map(|i| entry(i, 100)).collect();
        let chunks = build(&entries, 1000);
        assert!(chunks.len() >= 9 && chunks.len() <= 11, "{} chunks", chunks.len());
        let mut back = Vec::new();
        for (stored, info) in &chunks {
            back.extend(open(stored, info, |_| true).unwrap());
        }
        assert_eq!(back, entries);
        assert!(build(&[], 1000).is_empty());
    }

    #[test]
    fn a_foreign_key_is_refused() {
        let (stored, info) = build(&[entry(1, 10)], 1000).remove(0);
        assert!(matches!(open(&stored, &info, |_| false), Err(ChunkError::Key(_))));
    }

    proptest! {
        #[test]
        fn damaged_chunks_are_an_error_not_a_panic(n in 1usize..20, at in any::<usize>(), byte in 1u8.., raw_lie in any::<u64>()) {
            let entries: Vec<_> = (0..n).map(|i| entry(i, 30)).collect();
            let (stored, info) = build(&entries, 1 << 20).remove(0);
            let mut bad = stored.to_vec();
            let len = bad.len();
            bad[at % len] ^= byte;
            prop_assert_eq!(open(&bad, &info, |_| true), Err(ChunkError::Checksum));
            // A forged index (checksum matching, sizes lying) must not
            // crash or allocate without bound either.
            let forged = ChunkInfo { raw_bytes: raw_lie, ..info.clone() };
            let _ = open(&stored, &forged, |_| true);
            // Valid checksum over garbage.
            let mut garbage = MAGIC.to_vec();
            garbage.push(VERSION);
            garbage.extend_from_slice(&zstd::bulk::compress(&bad, 1).unwrap());
            let info = ChunkInfo { stored_bytes: garbage.len() as u64, checksum: xxhash_rust::xxh3::xxh3_64(&garbage), raw_bytes: bad.len() as u64, keys: info.keys.clone() };
            prop_assert!(open(&garbage, &info, |_| true).is_err());
        }
    }
}
