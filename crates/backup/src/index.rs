//! A partition's index in one backup layer: its seq, whether the layer
//! holds the whole partition, its blocks (where each is, its checksum, the
//! keys it holds) and the keys deleted since the parent. Restore reads the
//! index first and fetches a block only when it holds a key still needed,
//! and a chunk object only when one of its blocks is.
//!
//! Stored as `DGBI`, a format version byte, then a zstd frame of a
//! postcard header followed by the keys. Decoding bounds every size: a
//! damaged or forged index is an error, never a panic or a huge
//! allocation; keys are slices of the one decompressed buffer.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::framing::{self, FrameError};
use crate::key_list::{self, KeyReader};
use crate::manifest::PartitionEntry;
use crate::{Error, Store};

pub const MAGIC: &[u8; 4] = b"DGBI";
pub const VERSION: u8 = 2;
/// An index never decompresses past this.
pub const MAX_INDEX_BYTES: u64 = 1 << 30;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartitionIndex {
    pub partition: u16,
    /// The last seq the layer holds of this partition.
    pub seq: u64,
    /// Every live key is in this layer; older layers are not needed.
    pub full: bool,
    /// Chunk objects the blocks are stored in.
    pub chunks: u32,
    pub blocks: Vec<BlockInfo>,
    /// Keys changed since the parent layer that no longer exist.
    pub deleted: Vec<Bytes>,
}

/// One block: a zstd frame of a few entries, at `offset` in chunk
/// object `chunk`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockInfo {
    pub chunk: u32,
    pub offset: u64,
    /// Bytes of the stored (compressed) block.
    pub stored_bytes: u64,
    /// xxh3-64 of the stored block.
    pub checksum: u64,
    /// Bytes after decompression.
    pub raw_bytes: u64,
    /// The keys of its entries, in order.
    pub keys: Vec<Bytes>,
}

/// What postcard encodes; the keys follow it as `varint length | bytes`,
/// every block's in order and then the deleted ones, so decoding slices
/// them out of one buffer instead of allocating each.
#[derive(Serialize, Deserialize)]
struct Header {
    partition: u16,
    seq: u64,
    full: bool,
    chunks: u32,
    blocks: Vec<BlockHeader>,
    deleted: u64,
}

#[derive(Serialize, Deserialize)]
struct BlockHeader {
    chunk: u32,
    offset: u64,
    stored_bytes: u64,
    checksum: u64,
    raw_bytes: u64,
    keys: u64,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("index {0}")]
    Frame(#[from] FrameError),
    #[error("index does not decode: {0}")]
    Decode(String),
}

impl PartitionIndex {
    pub fn encode(&self) -> Vec<u8> {
        let header = Header {
            partition: self.partition,
            seq: self.seq,
            full: self.full,
            chunks: self.chunks,
            blocks: self
                .blocks
                .iter()
                .map(|b| BlockHeader {
                    chunk: b.chunk,
                    offset: b.offset,
                    stored_bytes: b.stored_bytes,
                    checksum: b.checksum,
                    raw_bytes: b.raw_bytes,
                    keys: b.keys.len() as u64,
                })
                .collect(),
            deleted: self.deleted.len() as u64,
        };
        let mut body = postcard::to_stdvec(&header).unwrap_or_default();
        for key in self
            .blocks
            .iter()
            .flat_map(|b| &b.keys)
            .chain(&self.deleted)
        {
            key_list::put(&mut body, key);
        }
        framing::wrap(MAGIC, VERSION, &body)
    }

    pub fn decode(data: &[u8]) -> Result<PartitionIndex, IndexError> {
        let body = Bytes::from(framing::unwrap(
            data,
            MAGIC,
            VERSION,
            MAX_INDEX_BYTES,
            "index",
        )?);
        let (header, rest): (Header, _) =
            postcard::take_from_bytes(&body).map_err(|e| IndexError::Decode(e.to_string()))?;
        let mut keys = KeyReader::new(body.slice(body.len() - rest.len()..));
        let blocks = header
            .blocks
            .into_iter()
            .map(|b| {
                Ok(BlockInfo {
                    chunk: b.chunk,
                    offset: b.offset,
                    stored_bytes: b.stored_bytes,
                    checksum: b.checksum,
                    raw_bytes: b.raw_bytes,
                    keys: keys.take(b.keys).map_err(IndexError::Decode)?,
                })
            })
            .collect::<Result<Vec<_>, IndexError>>()?;
        let deleted = keys.take(header.deleted).map_err(IndexError::Decode)?;
        if keys.remaining() != 0 {
            return Err(IndexError::Decode(format!(
                "{} bytes after the last key",
                keys.remaining()
            )));
        }
        Ok(PartitionIndex {
            partition: header.partition,
            seq: header.seq,
            full: header.full,
            chunks: header.chunks,
            blocks,
            deleted,
        })
    }

    /// Reads and checks the index of `entry`'s partition in backup `id`:
    /// its checksum against the manifest, its contents against the entry.
    pub async fn read(
        store: &Store,
        id: &str,
        entry: &PartitionEntry,
    ) -> Result<PartitionIndex, Error> {
        let object = entry.index_object(id);
        let data = store.get(&object).await?;
        let corrupt = |reason: String| Error::Corrupt {
            object: store.describe(&object),
            reason,
        };
        if format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&data)) != entry.index_checksum {
            return Err(corrupt(
                "checksum mismatch (stored object is damaged)".into(),
            ));
        }
        let index = PartitionIndex::decode(&data).map_err(|e| corrupt(e.to_string()))?;
        let matches = index.partition == entry.partition
            && index.seq == entry.seq
            && index.full == entry.full
            && index.chunks == entry.chunks
            && index.blocks.len() as u64 == entry.blocks;
        if !matches {
            return Err(corrupt("does not match its manifest entry".into()));
        }
        if index.blocks.iter().any(|b| b.chunk >= index.chunks) {
            return Err(corrupt("a block names a chunk past the last".into()));
        }
        Ok(index)
    }

    /// Keys in this layer (in blocks), not counting deletes.
    pub fn keys(&self) -> u64 {
        self.blocks.iter().map(|b| b.keys.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn index() -> impl Strategy<Value = PartitionIndex> {
        let key = proptest::collection::vec(any::<u8>(), 0..12).prop_map(Bytes::from);
        let block = (
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(key.clone(), 0..5),
        )
            .prop_map(|(chunk, offset, stored_bytes, checksum, raw_bytes, keys)| {
                BlockInfo {
                    chunk,
                    offset,
                    stored_bytes,
                    checksum,
                    raw_bytes,
                    keys,
                }
            });
        (
            any::<u16>(),
            any::<u64>(),
            any::<bool>(),
            any::<u32>(),
            proptest::collection::vec(block, 0..4),
            proptest::collection::vec(key, 0..4),
        )
            .prop_map(
                |(partition, seq, full, chunks, blocks, deleted)| PartitionIndex {
                    partition,
                    seq,
                    full,
                    chunks,
                    blocks,
                    deleted,
                },
            )
    }

    proptest! {
        #[test]
        fn round_trips(i in index()) {
            prop_assert_eq!(PartitionIndex::decode(&i.encode()).unwrap(), i);
        }

        #[test]
        fn damaged_input_is_an_error_not_a_panic(i in index(), at in any::<usize>(), byte in any::<u8>(), cut in any::<usize>()) {
            let mut data = i.encode();
            let n = data.len();
            data[at % n] ^= byte.max(1);
            let _ = PartitionIndex::decode(&data);
            let _ = PartitionIndex::decode(&data[..cut % n]);
        }

        #[test]
        fn arbitrary_bytes_are_an_error_not_a_panic(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut data = MAGIC.to_vec();
            data.push(VERSION);
            data.extend_from_slice(&zstd::bulk::compress(&body, 1).unwrap());
            let _ = PartitionIndex::decode(&data);
        }

        #[test]
        fn a_valid_header_with_lying_key_counts_is_an_error(i in index(), extra in 1u64..u64::MAX) {
            let mut lie = i.clone();
            let header = Header { partition: 0, seq: 0, full: false, chunks: 0, blocks: vec![], deleted: extra };
            let mut body = postcard::to_stdvec(&header).unwrap();
            body.push(0);
            let mut data = MAGIC.to_vec();
            data.push(VERSION);
            data.extend_from_slice(&zstd::bulk::compress(&body, 1).unwrap());
            prop_assert_eq!(PartitionIndex::decode(&data).is_ok(), extra == 1);
            lie.deleted.clear();
            prop_assert_eq!(PartitionIndex::decode(&lie.encode()).unwrap(), lie);
        }
    }
}
