//! Blocks and chunks: the full values of a partition's keys in one backup
//! layer. A block is a zstd frame of entries totalling about `block_bytes`
//! (one entry when values are larger), so restore decompresses little
//! besides the keys it needs; blocks are packed into chunk objects of
//! about `chunk_bytes`, fetched by ranges, so a store holds few objects.
//!
//! A block decompresses to changes in the keyspace codec (each a `Full`
//! change: key, version, value, expiry). Opening one trusts nothing: its
//! checksum and sizes must match the index (or the resolved object that
//! names it), sizes are bounded, and every change must decode, be a full
//! value, be the key listed at its place, and belong to the partition.

use bytes::Bytes;
use keyspace::{codec, Change, ChangeKind};

use crate::index::BlockInfo;
use crate::resolved::LiveBlock;

/// A block never decompresses past this, whatever its index says.
pub const MAX_BLOCK_BYTES: u64 = 256 << 20;

thread_local! {
    // Blocks are small: a zstd context per call would cost more than the
    // block itself, so each thread keeps one of each.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> = const { std::cell::RefCell::new(None) };
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { std::cell::RefCell::new(None) };
}

fn compress(raw: &[u8]) -> Vec<u8> {
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            *c = zstd::bulk::Compressor::new(3).ok();
        }
        match c.as_mut() {
            Some(c) => c.compress(raw).unwrap_or_default(),
            None => zstd::bulk::compress(raw, 3).unwrap_or_default(),
        }
    })
}

fn decompress(stored: &[u8], capacity: usize) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_none() {
            *d = Some(zstd::bulk::Decompressor::new()?);
        }
        match d.as_mut() {
            Some(d) => d.decompress(stored, capacity),
            None => zstd::bulk::decompress(stored, capacity),
        }
    })
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("checksum mismatch (stored object is damaged)")]
    Checksum,
    #[error("size {got} differs from the index's {want}")]
    Size { got: u64, want: u64 },
    #[error("does not decompress: {0}")]
    Compression(String),
    #[error("holds a bad change: {0}")]
    Change(String),
    #[error("holds key {0:?}, which its index does not list there or another partition owns")]
    Key(String),
}

/// Packs `entries` (full values) into blocks of about `block_bytes` before
/// compression, and blocks into chunk objects of about `chunk_bytes`;
/// returns the chunk objects and the blocks' index entries.
pub fn build(
    entries: &[Change],
    block_bytes: usize,
    chunk_bytes: usize,
) -> (Vec<Bytes>, Vec<BlockInfo>) {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut blocks = Vec::new();
    let mut chunk = Vec::new();
    let mut raw = Vec::new();
    let mut keys = Vec::new();
    for (i, c) in entries.iter().enumerate() {
        codec::encode(c, &mut raw);
        keys.push(c.key.clone());
        let last = i + 1 == entries.len();
        if raw.len() >= block_bytes || last {
            let stored = compress(&raw);
            blocks.push(BlockInfo {
                chunk: chunks.len() as u32,
                offset: chunk.len() as u64,
                stored_bytes: stored.len() as u64,
                checksum: xxhash_rust::xxh3::xxh3_64(&stored),
                raw_bytes: raw.len() as u64,
                keys: std::mem::take(&mut keys),
            });
            chunk.extend_from_slice(&stored);
            raw.clear();
            if chunk.len() >= chunk_bytes || last {
                chunks.push(Bytes::from(std::mem::take(&mut chunk)));
            }
        }
    }
    (chunks, blocks)
}

/// Checks a stored block against its index entry and decodes its changes;
/// `owns(key)` says whether a key belongs to the block's partition.
pub fn open(
    stored: &[u8],
    info: &BlockInfo,
    owns: impl Fn(&[u8]) -> bool,
) -> Result<Vec<Change>, BlockError> {
    let seal = Seal {
        stored_bytes: info.stored_bytes,
        checksum: info.checksum,
        raw_bytes: info.raw_bytes,
    };
    let changes = unseal(stored, &seal, info.keys.len())?;
    for (c, key) in changes.iter().zip(&info.keys) {
        if c.key[..] != key[..] || !owns(&c.key) {
            return Err(BlockError::Key(
                String::from_utf8_lossy(&c.key).into_owned(),
            ));
        }
    }
    Ok(changes)
}

/// Checks a stored block against a resolved object's entry for it and
/// returns only its live changes, each checked against the key listed.
pub fn open_live(
    stored: &[u8],
    block: &LiveBlock,
    owns: impl Fn(&[u8]) -> bool,
) -> Result<Vec<Change>, BlockError> {
    let seal = Seal {
        stored_bytes: block.stored_bytes,
        checksum: block.checksum,
        raw_bytes: block.raw_bytes,
    };
    let mut changes = unseal(stored, &seal, block.entries as usize)?
        .into_iter()
        .enumerate();
    let mut out = Vec::with_capacity(block.live.len());
    for live in &block.live {
        // Live positions are increasing (checked when decoded).
        let c = changes
            .find(|(at, _)| *at == live.at as usize)
            .map(|(_, c)| c);
        match c {
            Some(c) if c.key == live.key && owns(&c.key) => out.push(c),
            Some(c) => {
                return Err(BlockError::Key(
                    String::from_utf8_lossy(&c.key).into_owned(),
                ))
            }
            None => {
                return Err(BlockError::Change(format!(
                    "no entry {} in {} entries",
                    live.at, block.entries
                )))
            }
        }
    }
    Ok(out)
}

/// What a block's index entry says of its stored bytes.
struct Seal {
    stored_bytes: u64,
    checksum: u64,
    raw_bytes: u64,
}

/// Checks a stored block's size and checksum, decompresses it (bounded)
/// and decodes its `entries` changes, which must be full values.
fn unseal(stored: &[u8], seal: &Seal, entries: usize) -> Result<Vec<Change>, BlockError> {
    if stored.len() as u64 != seal.stored_bytes {
        return Err(BlockError::Size {
            got: stored.len() as u64,
            want: seal.stored_bytes,
        });
    }
    if xxhash_rust::xxh3::xxh3_64(stored) != seal.checksum {
        return Err(BlockError::Checksum);
    }
    if seal.raw_bytes > MAX_BLOCK_BYTES {
        return Err(BlockError::Size {
            got: seal.raw_bytes,
            want: MAX_BLOCK_BYTES,
        });
    }
    let raw = decompress(stored, seal.raw_bytes as usize)
        .map_err(|e| BlockError::Compression(e.to_string()))?;
    if raw.len() as u64 != seal.raw_bytes {
        return Err(BlockError::Size {
            got: raw.len() as u64,
            want: seal.raw_bytes,
        });
    }
    let mut rest = Bytes::from(raw);
    let mut out = Vec::with_capacity(entries.min(1 << 16));
    while !rest.is_empty() {
        if out.len() == entries {
            return Err(BlockError::Change(format!(
                "more than the {entries} listed entries"
            )));
        }
        let (change, used) = codec::decode(&rest).map_err(|e| BlockError::Change(e.to_string()))?;
        rest = rest.slice(used..);
        if !matches!(change.kind, ChangeKind::Full { .. }) {
            return Err(BlockError::Change("not a full value".into()));
        }
        out.push(change);
    }
    if out.len() != entries {
        return Err(BlockError::Change(format!(
            "{} changes for {entries} listed entries",
            out.len()
        )));
    }
    Ok(out)
}

/// The bytes of `block` within its whole chunk object, if they are there.
pub fn slice<'a>(chunk: &'a [u8], block: &BlockInfo) -> Option<&'a [u8]> {
    let start = usize::try_from(block.offset).ok()?;
    let end = start.checked_add(usize::try_from(block.stored_bytes).ok()?)?;
    chunk.get(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyspace::{Value, Version};
    use proptest::prelude::*;

    fn entry(i: usize, len: usize) -> Change {
        Change {
            key: Bytes::from(format!("key{i}")),
            version: Version {
                hlc: i as u64 + 1,
                site: 1,
            },
            kind: ChangeKind::Full {
                value: Value::str(Bytes::from(vec![b'v'; len])),
                expire_at: 0,
            },
        }
    }

    #[test]
    fn packs_blocks_into_chunks_and_opens_what_it_built() {
        let entries: Vec<_> = (0..100).map(|i| entry(i, 100)).collect();
        let (chunks, blocks) = build(&entries, 250, 100);
        assert!(
            blocks.len() >= 30 && blocks.len() <= 40,
            "{} blocks",
            blocks.len()
        );
        assert!(chunks.len() > 1 && chunks.len() < blocks.len());
        let mut back = Vec::new();
        for b in &blocks {
            let stored = slice(&chunks[b.chunk as usize], b).unwrap();
            back.extend(open(stored, b, |_| true).unwrap());
        }
        assert_eq!(back, entries);
        assert_eq!(build(&[], 1000, 1000), (vec![], vec![]));
    }

    #[test]
    fn a_foreign_key_is_refused() {
        let (chunks, blocks) = build(&[entry(1, 10)], 1000, 1000);
        assert!(matches!(
            open(&chunks[0], &blocks[0], |_| false),
            Err(BlockError::Key(_))
        ));
    }

    #[test]
    fn a_live_block_opens_to_its_live_entries_only() {
        let entries: Vec<_> = (0..5).map(|i| entry(i, 10)).collect();
        let (chunks, blocks) = build(&entries, 1 << 20, 1 << 20);
        let b = &blocks[0];
        let live = |at: u32| crate::resolved::LiveEntry {
            at,
            key: entries[at as usize].key.clone(),
        };
        let block = LiveBlock {
            stored_bytes: b.stored_bytes,
            checksum: b.checksum,
            raw_bytes: b.raw_bytes,
            entries: 5,
            live: vec![live(1), live(4)],
            ..Default::default()
        };
        assert_eq!(
            open_live(&chunks[0], &block, |_| true).unwrap(),
            vec![entries[1].clone(), entries[4].clone()]
        );
        // A key listed at the wrong place, a wrong entry count, a foreign key.
        let swapped = LiveBlock {
            live: vec![crate::resolved::LiveEntry {
                at: 1,
                key: entries[2].key.clone(),
            }],
            ..block.clone()
        };
        assert!(matches!(
            open_live(&chunks[0], &swapped, |_| true),
            Err(BlockError::Key(_))
        ));
        assert!(open_live(
            &chunks[0],
            &LiveBlock {
                entries: 4,
                ..block.clone()
            },
            |_| true
        )
        .is_err());
        assert!(open_live(
            &chunks[0],
            &LiveBlock {
                entries: 6,
                ..block.clone()
            },
            |_| true
        )
        .is_err());
        assert!(matches!(
            open_live(&chunks[0], &block, |_| false),
            Err(BlockError::Key(_))
        ));
    }

    proptest! {
        #[test]
        fn damaged_blocks_are_an_error_not_a_panic(n in 1usize..20, at in any::<usize>(), byte in 1u8.., raw_lie in any::<u64>(), off in any::<u64>()) {
            let entries: Vec<_> = (0..n).map(|i| entry(i, 30)).collect();
            let (chunks, blocks) = build(&entries, 1 << 20, 1 << 20);
            let (stored, info) = (&chunks[0], &blocks[0]);
            let mut bad = stored.to_vec();
            let len = bad.len();
            bad[at % len] ^= byte;
            prop_assert_eq!(open(&bad, info, |_| true), Err(BlockError::Checksum));
            // A forged index (checksum matching, sizes or place lying) must
            // not crash or allocate without bound either.
            let forged = BlockInfo { raw_bytes: raw_lie, ..info.clone() };
            let _ = open(stored, &forged, |_| true);
            let _ = slice(stored, &BlockInfo { offset: off, ..info.clone() });
            // A valid checksum over garbage.
            let garbage = zstd::bulk::compress(&bad, 1).unwrap();
            let info = BlockInfo { stored_bytes: garbage.len() as u64, checksum: xxhash_rust::xxh3::xxh3_64(&garbage), raw_bytes: bad.len() as u64, ..info.clone() };
            prop_assert!(open(&garbage, &info, |_| true).is_err());
        }
    }
}
