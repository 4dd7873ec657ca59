//! Fuzz targets for the backup formats read back from object storage:
//! blocks (`backup::chunk::open`, `open_live`: zstd frames of keyspace
//! changes), the partition index (`backup::index`, `DGBI`), the resolved
//! object (`backup::resolved`, `DGBR`), their envelope (`backup::framing`),
//! key lists (`backup::key_list`) and the JSON manifest. Arbitrary bytes,
//! mutated objects, and objects whose *body* was mutated then wrapped
//! afresh (so the zstd envelope and checksums hold and the inner decoders
//! are reached): no panic, no allocation past the formats' caps;
//! encoders round-trip. See docs/fuzzing.md.

use backup::chunk::{self, MAX_BLOCK_BYTES};
use backup::index::{self, BlockInfo, PartitionIndex};
use backup::key_list::{self, KeyReader};
use backup::manifest::{self, Manifest};
use backup::resolved::{self, LiveBlock, LiveEntry, Resolved};
use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use fuzzing::{bounded, bytes, fuzz, measure, mutated, Hex};

fn keys(max: usize) -> impl Strategy<Value = Vec<Bytes>> {
    proptest::collection::vec(changes::blob(12), 0..max)
}

fn block_info() -> impl Strategy<Value = BlockInfo> {
    (
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        keys(4),
    )
        .prop_map(
            |(chunk, offset, stored_bytes, checksum, raw_bytes, keys)| BlockInfo {
                chunk,
                offset,
                stored_bytes,
                checksum,
                raw_bytes,
                keys,
            },
        )
}

fn partition_index() -> impl Strategy<Value = PartitionIndex> {
    (
        any::<u16>(),
        any::<u64>(),
        any::<bool>(),
        any::<u32>(),
        proptest::collection::vec(block_info(), 0..4),
        keys(4),
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

fn resolved_object() -> impl Strategy<Value = Resolved> {
    let block = (
        0u32..3,
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        proptest::collection::btree_map(0u32..64, changes::blob(12), 1..4),
    );
    (
        any::<u16>(),
        any::<u64>(),
        proptest::collection::vec(any::<u64>(), 3..4),
        proptest::collection::vec(block, 0..4),
    )
        .prop_map(|(partition, seq, times, blocks)| {
            let layers: Vec<String> = times
                .iter()
                .map(|t| manifest::new_id(*t % 4_000_000_000_000))
                .collect();
            let mut blocks: Vec<LiveBlock> = blocks
                .into_iter()
                .enumerate()
                .map(
                    |(i, (layer, _, chunk, offset, stored_bytes, checksum, live))| LiveBlock {
                        layer,
                        block: i as u32,
                        chunk: chunk as u32,
                        offset,
                        stored_bytes,
                        checksum,
                        raw_bytes: stored_bytes / 2,
                        entries: 64,
                        live: live
                            .into_iter()
                            .map(|(at, key)| LiveEntry { at, key })
                            .collect(),
                    },
                )
                .collect();
            blocks.sort_by_key(|b| (b.layer, b.block));
            Resolved {
                partition,
                seq,
                layers,
                blocks,
            }
        })
}

/// An object's body mutated, wrapped afresh in its envelope.
fn rewrapped(object: Vec<u8>, magic: &[u8; 4], version: u8, ms: &[fuzzing::Mutation]) -> Vec<u8> {
    let body = backup::framing::unwrap(&object, magic, version, 1 << 20, "object").unwrap();
    backup::framing::wrap(magic, version, &fuzzing::mutate(body, ms))
}

fn object_inputs(
    valid: BoxedStrategy<Vec<u8>>,
    magic: &'static [u8; 4],
    version: u8,
) -> impl Strategy<Value = Hex> {
    let inner = (
        valid.clone(),
        proptest::collection::vec(fuzzing::mutation(), 1..8),
    )
        .prop_map(move |(o, ms)| Hex(rewrapped(o, magic, version, &ms)));
    let raw_body =
        bytes(128).prop_map(move |Hex(b)| Hex(backup::framing::wrap(magic, version, &b)));
    prop_oneof![1 => bytes(128), 1 => raw_body, 2 => mutated(valid), 4 => inner]
}

#[test]
fn index_decoder() {
    let valid = partition_index().prop_map(|i| i.encode()).boxed();
    fuzz(
        "backup::index::PartitionIndex::decode",
        object_inputs(valid, index::MAGIC, index::VERSION),
        |Hex(input)| {
            let (got, allocated) = measure(|| PartitionIndex::decode(&input));
            // zstd's decoder context (about 128 KiB window buffers) aside,
            // linear in what the (small) body decompresses to.
            bounded(
                "PartitionIndex::decode",
                allocated,
                input.len(),
                256,
                1 << 20,
            )?;
            if let Ok(i) = got {
                prop_assert_eq!(PartitionIndex::decode(&i.encode()), Ok(i));
            }
            Ok(())
        },
    );
}

#[test]
fn index_round_trip() {
    fuzz("backup::index round trip", partition_index(), |i| {
        prop_assert_eq!(PartitionIndex::decode(&i.encode()), Ok(i));
        Ok(())
    });
}

#[test]
fn resolved_decoder() {
    let valid = resolved_object().prop_map(|r| r.encode()).boxed();
    fuzz(
        "backup::resolved::Resolved::decode",
        object_inputs(valid, resolved::MAGIC, resolved::VERSION),
        |Hex(input)| {
            let (got, allocated) = measure(|| Resolved::decode(&input));
            bounded("Resolved::decode", allocated, input.len(), 256, 1 << 20)?;
            if let Ok(r) = got {
                prop_assert_eq!(Resolved::decode(&r.encode()), Ok(r));
            }
            Ok(())
        },
    );
}

#[test]
fn resolved_round_trip() {
    fuzz("backup::resolved round trip", resolved_object(), |r| {
        prop_assert_eq!(Resolved::decode(&r.encode()), Ok(r));
        Ok(())
    });
}

/// A block as stored and the index entry naming it. Mutations go to the
/// raw (decompressed) bytes, which are then compressed and sealed afresh
/// so that `open` reaches the change decoder; or to the stored bytes; or
/// to the entry's figures.
fn block_inputs() -> impl Strategy<Value = (Hex, BlockInfo)> {
    let entries = proptest::collection::vec(changes::full_change(), 1..4);
    let ms = proptest::collection::vec(fuzzing::mutation(), 1..8);
    (entries, ms, 0u8..4).prop_map(|(entries, ms, how)| {
        let (chunks, mut blocks) = chunk::build(&entries, 1 << 20, 1 << 20);
        let mut info = blocks.remove(0);
        let stored = chunk::slice(&chunks[0], &info).unwrap().to_vec();
        let stored = match how {
            0 => {
                let raw = zstd::bulk::decompress(&stored, info.raw_bytes as usize).unwrap();
                let raw = fuzzing::mutate(raw, &ms);
                let stored = zstd::bulk::compress(&raw, 1).unwrap();
                info.raw_bytes = raw.len() as u64;
                info.stored_bytes = stored.len() as u64;
                info.checksum = xxhash_rust::xxh3::xxh3_64(&stored);
                stored
            }
            1 => {
                let stored = fuzzing::mutate(stored, &ms);
                info.stored_bytes = stored.len() as u64;
                info.checksum = xxhash_rust::xxh3::xxh3_64(&stored);
                stored
            }
            2 => {
                // The index lies about the raw size or the keys.
                let lie = fuzzing::mutate(info.raw_bytes.to_le_bytes().to_vec(), &ms);
                let mut b = [0u8; 8];
                b[..lie.len().min(8)].copy_from_slice(&lie[..lie.len().min(8)]);
                info.raw_bytes = u64::from_le_bytes(b);
                if info.keys.len() > 1 {
                    info.keys.pop();
                }
                stored
            }
            _ => fuzzing::mutate(stored, &ms),
        };
        (Hex(stored), info)
    })
}

#[test]
fn chunk_block_decoder() {
    fuzz(
        "backup::chunk::open",
        block_inputs(),
        |(Hex(stored), info)| {
            let (got, allocated) = measure(|| chunk::open(&stored, &info, |_| true));
            // The raw buffer is the index's raw size, capped.
            bounded(
                "chunk::open",
                allocated,
                stored.len(),
                256,
                (info.raw_bytes.min(MAX_BLOCK_BYTES) as usize).saturating_mul(8) + (1 << 20),
            )?;
            if let Ok(changes) = &got {
                prop_assert_eq!(changes.len(), info.keys.len());
            }
            let live = LiveBlock {
                layer: 0,
                block: 0,
                chunk: info.chunk,
                offset: info.offset,
                stored_bytes: info.stored_bytes,
                checksum: info.checksum,
                raw_bytes: info.raw_bytes,
                entries: info.keys.len() as u32,
                live: info
                    .keys
                    .iter()
                    .enumerate()
                    .step_by(2)
                    .map(|(at, k)| LiveEntry {
                        at: at as u32,
                        key: k.clone(),
                    })
                    .collect(),
            };
            let (got_live, allocated) = measure(|| chunk::open_live(&stored, &live, |_| true));
            bounded(
                "chunk::open_live",
                allocated,
                stored.len(),
                256,
                (info.raw_bytes.min(MAX_BLOCK_BYTES) as usize).saturating_mul(8) + (1 << 20),
            )?;
            if got.is_ok() {
                prop_assert!(
                    got_live.is_ok(),
                    "open_live refused what open took: {:?}",
                    got_live
                );
            }
            Ok(())
        },
    );
}

#[test]
fn chunk_round_trip() {
    let strategy = (
        proptest::collection::vec(changes::full_change(), 1..8),
        1usize..256,
        1usize..512,
    );
    fuzz(
        "backup::chunk build/open round trip",
        strategy,
        |(entries, block_bytes, chunk_bytes)| {
            let (chunks, blocks) = chunk::build(&entries, block_bytes, chunk_bytes);
            let mut back = Vec::new();
            for b in &blocks {
                let stored = chunk::slice(&chunks[b.chunk as usize], b)
                    .ok_or_else(|| TestCaseError::fail("block past its chunk"))?;
                back.extend(
                    chunk::open(stored, b, |_| true)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?,
                );
            }
            prop_assert_eq!(back, entries);
            Ok(())
        },
    );
}

#[test]
fn key_list_and_envelope() {
    fuzz(
        "backup::key_list, backup::framing",
        (keys(8), bytes(128), any::<u64>()),
        |(keys, Hex(junk), n)| {
            let mut out = Vec::new();
            keys.iter().for_each(|k| key_list::put(&mut out, k));
            let mut r = KeyReader::new(Bytes::from(out));
            prop_assert_eq!(r.take(keys.len() as u64), Ok(keys));
            prop_assert_eq!(r.remaining(), 0);
            let (_, allocated) =
                measure(|| KeyReader::new(Bytes::from(junk.clone())).take(n % 1024));
            bounded("KeyReader::take", allocated, junk.len(), 64, 1024)?;
            let (_, allocated) =
                measure(|| backup::framing::unwrap(&junk, b"DGBI", 2, 1 << 16, "index"));
            bounded(
                "framing::unwrap",
                allocated,
                junk.len(),
                64,
                (1 << 20) + (1 << 17),
            )?;
            Ok(())
        },
    );
}

const MANIFEST: &str = r#"{"format":2,"id":"20261129T120000000Z-abcd","parent":null,"created_ms":1795000000000,
"site_id":1,"site_name":"a","partitions":2,"entries":[
{"partition":0,"seq":10,"full":true,"chunks":1,"blocks":2,"keys":3,"deleted":0,"bytes":100,"index_bytes":40,
 "index_checksum":"0123456789abcdef","resolved_bytes":0,"resolved_checksum":null},
{"partition":1,"seq":0,"full":true,"chunks":0,"blocks":0,"keys":0,"deleted":0,"bytes":0,"index_bytes":40,
 "index_checksum":"fedcba9876543210","resolved_bytes":0,"resolved_checksum":null}]}"#;

#[test]
fn manifest_json() {
    assert!(
        serde_json::from_str::<Manifest>(MANIFEST).is_ok(),
        "the seed manifest must be valid"
    );
    let valid = Just(MANIFEST.as_bytes().to_vec());
    fuzz(
        "backup manifest (serde_json)",
        prop_oneof![1 => bytes(128), 4 => mutated(valid)],
        |Hex(input)| {
            let (got, allocated) = measure(|| serde_json::from_slice::<Manifest>(&input));
            bounded("Manifest from JSON", allocated, input.len(), 64, 4096)?;
            if let Ok(m) = got {
                let _ = m.restorable();
                let _ = (m.keys(), m.bytes(), m.is_full());
                let json = serde_json::to_vec(&m).unwrap();
                let again: Manifest = serde_json::from_slice(&json)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(serde_json::to_vec(&again).unwrap(), json);
            }
            Ok(())
        },
    );
}

/// Valid keyspace changes (`keyspace::codec`), built from public
/// constructors: seeds that the mutations start from (shared by the fuzz
/// targets of every crate that decodes changes).
#[allow(dead_code)]
#[path = "../../fuzzing/changes.rs"]
mod changes;
