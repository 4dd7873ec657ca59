//! The stored form of a [`Resolved`] object: `DGBR`, a format version
//! byte, then a zstd frame (see [`crate::framing`]) of a postcard header
//! (partition, seq, layer ids, per block its place, checksum, sizes, entry
//! count and live positions) followed by the live keys in block order as
//! `varint length | bytes`, sliced out of one buffer on decode.
//!
//! Decoding trusts nothing: sizes are bounded before anything is
//! allocated, blocks must be in strictly increasing (layer, block) order
//! and name a listed layer, live positions must be strictly increasing and
//! inside the block, and every key must be there. A damaged or forged
//! object is an error, never a panic.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{Block, LiveEntry, Resolved};
use crate::framing::{self, FrameError};
use crate::key_list::{self, KeyReader};
use crate::manifest::valid_id;

pub const MAGIC: &[u8; 4] = b"DGBR";
pub const VERSION: u8 = 1;
/// A resolved object never decompresses past this.
pub const MAX_RESOLVED_BYTES: u64 = 1 << 30;

#[derive(Serialize, Deserialize)]
struct Header {
    partition: u16,
    seq: u64,
    layers: Vec<String>,
    /// Each block with the positions of its live entries (their keys
    /// follow the header).
    blocks: Vec<Block<Vec<u32>>>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolvedError {
    #[error("resolved object {0}")]
    Frame(#[from] FrameError),
    #[error("resolved object does not decode: {0}")]
    Decode(String),
}

impl Resolved {
    pub fn encode(&self) -> Vec<u8> {
        let header = Header {
            partition: self.partition,
            seq: self.seq,
            layers: self.layers.clone(),
            blocks: self
                .blocks
                .iter()
                .map(|b| b.with_live(b.live.iter().map(|e| e.at).collect()))
                .collect(),
        };
        let mut body = postcard::to_stdvec(&header).unwrap_or_default();
        for e in self.blocks.iter().flat_map(|b| &b.live) {
            key_list::put(&mut body, &e.key);
        }
        framing::wrap(MAGIC, VERSION, &body)
    }

    pub fn decode(data: &[u8]) -> Result<Resolved, ResolvedError> {
        let bad = |reason: &str| ResolvedError::Decode(reason.to_string());
        let body = Bytes::from(framing::unwrap(
            data,
            MAGIC,
            VERSION,
            MAX_RESOLVED_BYTES,
            "resolved object",
        )?);
        let (header, rest): (Header, _) =
            postcard::take_from_bytes(&body).map_err(|e| ResolvedError::Decode(e.to_string()))?;
        if let Some(id) = header.layers.iter().find(|id| !valid_id(id)) {
            return Err(ResolvedError::Decode(format!(
                "names a bad layer id {id:?}"
            )));
        }
        let mut keys = KeyReader::new(body.slice(body.len() - rest.len()..));
        let mut blocks = Vec::with_capacity(header.blocks.len());
        let mut last: Option<(u32, u32)> = None;
        for b in header.blocks {
            if last.is_some_and(|l| l >= (b.layer, b.block)) {
                return Err(bad("blocks are not in (layer, block) order"));
            }
            last = Some((b.layer, b.block));
            if b.layer as usize >= header.layers.len() {
                return Err(bad("a block names a layer past the last"));
            }
            if b.live.is_empty() {
                return Err(bad("a block has no live entry"));
            }
            let increasing = b.live.windows(2).all(|w| w[0] < w[1]);
            if !increasing || b.live.last().is_some_and(|&at| at >= b.entries) {
                return Err(bad(
                    "a block's live entries are out of order or past its end",
                ));
            }
            let live = keys
                .take(b.live.len() as u64)
                .map_err(ResolvedError::Decode)?;
            let entries = b
                .live
                .iter()
                .zip(live)
                .map(|(&at, key)| LiveEntry { at, key })
                .collect();
            blocks.push(b.with_live(entries));
        }
        if keys.remaining() != 0 {
            return Err(ResolvedError::Decode(format!(
                "{} bytes after the last key",
                keys.remaining()
            )));
        }
        Ok(Resolved {
            partition: header.partition,
            seq: header.seq,
            layers: header.layers,
            blocks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolved::LiveBlock;
    use proptest::prelude::*;

    type BlockHeader = Block<Vec<u32>>;

    /// Valid objects: what `encode` can be given by `Resolved::next`.
    fn resolved() -> impl Strategy<Value = Resolved> {
        let key = proptest::collection::vec(any::<u8>(), 0..12).prop_map(Bytes::from);
        let live = proptest::collection::btree_map(0u32..40, key, 1..5);
        let block = (
            0u32..3,
            0u32..50,
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            live,
        );
        let layers = proptest::collection::vec("[a-zA-Z0-9_-]{1,30}", 3..5);
        (
            any::<u16>(),
            any::<u64>(),
            layers,
            proptest::collection::btree_map((0u32..3, 0u32..50), block, 0..6),
        )
            .prop_map(|(partition, seq, layers, blocks)| Resolved {
                partition,
                seq,
                layers,
                blocks: blocks
                    .into_iter()
                    .map(
                        |(
                            (layer, block),
                            (_, _, chunk, offset, stored_bytes, checksum, raw_bytes, live),
                        )| LiveBlock {
                            layer,
                            block,
                            chunk,
                            offset,
                            stored_bytes,
                            checksum,
                            raw_bytes,
                            entries: live.keys().last().map_or(0, |&at| at + 1),
                            live: live
                                .into_iter()
                                .map(|(at, key)| LiveEntry { at, key })
                                .collect(),
                        },
                    )
                    .collect(),
            })
    }

    fn wrap_body(body: &[u8]) -> Vec<u8> {
        framing::wrap(MAGIC, VERSION, body)
    }

    proptest! {
        #[test]
        fn round_trips(r in resolved()) {
            prop_assert_eq!(Resolved::decode(&r.encode()).unwrap(), r);
        }

        #[test]
        fn damaged_or_truncated_input_is_an_error_not_a_panic(r in resolved(), at in any::<usize>(), byte in 1u8.., cut in any::<usize>()) {
            let mut data = r.encode();
            let n = data.len();
            prop_assert!(Resolved::decode(&data[..cut % n]).is_err());
            data[at % n] ^= byte;
            let _ = Resolved::decode(&data);
        }

        #[test]
        fn arbitrary_bytes_are_an_error_not_a_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Resolved::decode(&wrap_body(&body));
            let _ = Resolved::decode(&body);
        }

        #[test]
        fn a_damaged_body_under_a_valid_frame_is_an_error_not_a_panic(r in resolved(), at in any::<usize>(), byte in 1u8..) {
            let body = framing::unwrap(&r.encode(), MAGIC, VERSION, MAX_RESOLVED_BYTES, "resolved object").unwrap();
            let mut bad = body.clone();
            let n = bad.len();
            bad[at % n] ^= byte;
            let _ = Resolved::decode(&wrap_body(&bad));
            prop_assert!(Resolved::decode(&wrap_body(&body[..n - 1])).is_err());
        }

        #[test]
        fn forged_headers_are_refused(r in resolved(), live in proptest::collection::vec(any::<u32>(), 0..4), layer in any::<u32>(), entries in any::<u32>()) {
            let forged = Header {
                partition: r.partition,
                seq: r.seq,
                layers: r.layers.clone(),
                blocks: vec![BlockHeader { layer, block: 0, chunk: 0, offset: 0, stored_bytes: 0, checksum: 0, raw_bytes: 0, entries, live: live.clone() }],
            };
            let mut body = postcard::to_stdvec(&forged).unwrap();
            // An empty key per live entry.
            body.resize(body.len() + live.len(), 0);
            let valid = (layer as usize) < r.layers.len()
                && !live.is_empty()
                && live.windows(2).all(|w| w[0] < w[1])
                && live.last().is_some_and(|&at| at < entries);
            prop_assert_eq!(Resolved::decode(&wrap_body(&body)).is_ok(), valid);
        }
    }

    #[test]
    fn a_bad_layer_id_or_missing_keys_are_refused() {
        let r = Resolved {
            partition: 1,
            seq: 2,
            layers: vec!["../x".into()],
            blocks: vec![],
        };
        assert!(matches!(
            Resolved::decode(&r.encode()),
            Err(ResolvedError::Decode(_))
        ));
        let header = Header {
            partition: 0,
            seq: 0,
            layers: vec!["a".into()],
            blocks: vec![BlockHeader {
                layer: 0,
                block: 0,
                chunk: 0,
                offset: 0,
                stored_bytes: 0,
                checksum: 0,
                raw_bytes: 0,
                entries: u32::MAX,
                live: vec![0, 1, 2],
            }],
        };
        let body = postcard::to_stdvec(&header).unwrap();
        assert!(Resolved::decode(&wrap_body(&body)).is_err());
        assert!(matches!(
            Resolved::decode(b"DGBI\x01"),
            Err(ResolvedError::Frame(FrameError::Magic(_)))
        ));
        let mut old = r.encode();
        old[4] = 9;
        assert!(matches!(
            Resolved::decode(&old),
            Err(ResolvedError::Frame(FrameError::Version { got: 9, .. }))
        ));
    }
}
