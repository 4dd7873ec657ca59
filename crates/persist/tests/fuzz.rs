//! Fuzz targets for the node's change-log records (`persist::record`) and
//! its snapshot files (`persist::snapshot::read`, over journal-framed
//! records). Arbitrary bytes and mutated valid encodings: no panic, no
//! allocation past what the bytes hold (or `max_record`); records
//! round-trip. See docs/fuzzing.md.

use persist::record::Record;
use persist::snapshot::{self, Item};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use fuzzing::{bounded, bytes, fuzz, inputs, measure, mutated, Hex};

type Parts = (u8, u16, u64, u64, Vec<u8>);

fn parts() -> impl Strategy<Value = Parts> {
    let body = prop_oneof![
        changes::change().prop_map(|c| changes::encode(&c)),
        proptest::collection::vec(any::<u8>(), 0..32),
    ];
    (0u8..3, any::<u16>(), any::<u64>(), any::<u64>(), body)
}

fn record(p: &Parts) -> Record<'_> {
    let (kind, partition, a, b, ref body) = *p;
    match kind {
        0 => Record::Change {
            partition,
            seq: a,
            body,
        },
        1 => Record::Reset {
            partition,
            next_seq: a,
            settled: b,
        },
        _ => Record::Loaded { partition, body },
    }
}

fn encoded(p: &Parts) -> Vec<u8> {
    let mut out = Vec::new();
    record(p).encode(&mut out);
    out
}

#[test]
fn record_decoder() {
    fuzz(
        "persist::record::Record::decode",
        inputs(parts().prop_map(|p| encoded(&p)), 128),
        |Hex(input)| {
            let (got, allocated) = measure(|| Record::decode(&input));
            bounded("Record::decode", allocated, 0, 0, 0)?;
            if let Ok(r) = got {
                let mut again = Vec::new();
                r.encode(&mut again);
                prop_assert_eq!(&again, &input, "a decoded record re-encodes to its bytes");
                prop_assert_eq!(r.encoded_len(), input.len());
                if let Record::Change { body, .. } | Record::Loaded { body, .. } = r {
                    let (_, allocated) = measure(|| keyspace::codec::decode(body));
                    // A sorted set decoded into its large form costs a fixed ~48 KiB
                    // (its index's nodes) whatever its size: a value-building decoder is
                    // held to 1 KiB a byte plus 64 KiB, which still catches any
                    // allocation for an announced length.
                    bounded("codec::decode", allocated, body.len(), 1024, 1 << 16)?;
                }
            }
            Ok(())
        },
    );
}

#[test]
fn record_round_trip() {
    fuzz("persist::record round trip", parts(), |p| {
        let bytes = encoded(&p);
        prop_assert_eq!(bytes.len(), record(&p).encoded_len());
        prop_assert_eq!(Record::decode(&bytes), Ok(record(&p)));
        Ok(())
    });
}

const PARTITIONS: u16 = 4;
const MAX_RECORD: usize = 1 << 16;

fn framed(payload: &[u8], out: &mut Vec<u8>) {
    journal::record::encode(payload, MAX_RECORD, out).unwrap();
}

/// The records of a valid snapshot file (header, parts with entries, end),
/// before framing.
fn snapshot_records() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let part = (
        0..PARTITIONS,
        any::<u64>(),
        any::<u64>(),
        proptest::collection::vec(changes::full_change(), 0..3),
    );
    (any::<u64>(), proptest::collection::vec(part, 0..3)).prop_map(|(from, parts)| {
        let mut records = Vec::new();
        let mut head = b"DGSNAP1".to_vec();
        head.extend_from_slice(&from.to_le_bytes());
        head.extend_from_slice(&PARTITIONS.to_le_bytes());
        records.push(head);
        let mut entries = 0u64;
        for (p, next, settled, cs) in &parts {
            let mut r = vec![b'P'];
            r.extend_from_slice(&p.to_le_bytes());
            r.extend_from_slice(&next.to_le_bytes());
            r.extend_from_slice(&settled.to_le_bytes());
            r.extend_from_slice(&(cs.len() as u64).to_le_bytes());
            records.push(r);
            for c in cs {
                let mut r = vec![b'E'];
                r.extend_from_slice(&changes::encode(c));
                records.push(r);
                entries += 1;
            }
        }
        let mut end = vec![b'Z'];
        end.extend_from_slice(&(parts.len() as u64).to_le_bytes());
        end.extend_from_slice(&entries.to_le_bytes());
        records.push(end);
        records
    })
}

fn snapshot_file(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    records.iter().for_each(|r| framed(r, &mut out));
    out
}

/// Mutated files, files of mutated records (framed afresh, so the CRCs
/// hold and the snapshot reader itself is reached), arbitrary bytes.
fn snapshot_inputs() -> impl Strategy<Value = Hex> {
    let inner = (
        snapshot_records(),
        any::<prop::sample::Index>(),
        proptest::collection::vec(fuzzing::mutation(), 1..6),
    )
        .prop_map(|(mut records, i, ms)| {
            let at = i.index(records.len());
            records[at] = fuzzing::mutate(std::mem::take(&mut records[at]), &ms);
            Hex(snapshot_file(&records))
        });
    prop_oneof![1 => bytes(256), 2 => mutated(snapshot_records().prop_map(|r| snapshot_file(&r))), 3 => inner]
}

#[test]
fn snapshot_reader() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000001.snap");
    fuzz(
        "persist::snapshot::read",
        snapshot_inputs(),
        |Hex(input)| {
            std::fs::write(&path, &input).unwrap();
            let (got, allocated) = measure(|| {
                snapshot::read(&path, PARTITIONS, MAX_RECORD, |item| {
                    if let Item::Entry(bytes) = item {
                        keyspace::codec::decode(&bytes).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            });
            // The reader's 1 MiB buffer, and a record's payload (at most
            // MAX_RECORD) once its header checked out.
            bounded(
                "snapshot::read",
                allocated,
                input.len(),
                64,
                (1 << 20) + MAX_RECORD + 4096,
            )?;
            let _ = got
                .map_err(|e| TestCaseError::fail(e.to_string()))
                .or_else(|e| {
                    // A damaged file is refused: fine.
                    let _ = e;
                    Ok::<u64, TestCaseError>(0)
                })?;
            Ok(())
        },
    );
}

#[test]
fn snapshot_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000001.snap");
    fuzz(
        "persist::snapshot::read of a valid file",
        snapshot_records(),
        |records| {
            std::fs::write(&path, snapshot_file(&records)).unwrap();
            let mut entries = 0usize;
            let from = snapshot::read(&path, PARTITIONS, MAX_RECORD, |item| {
                if let Item::Entry(bytes) = item {
                    keyspace::codec::decode(&bytes).map_err(|e| e.to_string())?;
                    entries += 1;
                }
                Ok(())
            })
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&from.to_le_bytes()[..], &records[0][7..15]);
            prop_assert_eq!(entries, records.iter().filter(|r| r[0] == b'E').count());
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
