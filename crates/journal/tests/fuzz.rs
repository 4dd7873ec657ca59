//! Fuzz targets for the journal's record decoder (`journal::record`:
//! `len u32 | crc32c u32 | payload`, also the framing of persist's
//! snapshots) and for a journal opened over a damaged segment file. Arbitrary
//! bytes and mutated valid streams: no panic, never an allocation past
//! `max_record`; records round-trip. See docs/fuzzing.md.

use std::io::Cursor;

use journal::record::{self, Header, HEADER_LEN};
use journal::{Journal, JournalConfig};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use fuzzing::{bounded, fuzz, inputs, measure, Hex};

const MAX_RECORD: usize = 4096;

fn payloads() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..6)
}

fn stream(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in payloads {
        record::encode(p, MAX_RECORD, &mut out).unwrap();
    }
    out
}

/// Reads records until the end or the first error.
fn read_all(bytes: &[u8], max: usize) -> Result<Vec<Vec<u8>>, record::RecordError> {
    let mut r = Cursor::new(bytes);
    let mut out = Vec::new();
    while let Some(p) = record::read_record(&mut r, max)? {
        out.push(p);
    }
    Ok(out)
}

#[test]
fn record_decoder() {
    fuzz(
        "journal::record::read_record",
        inputs(payloads().prop_map(|p| stream(&p)), 256),
        |Hex(input)| {
            for max in [0, 16, MAX_RECORD, u32::MAX as usize] {
                let (got, allocated) = measure(|| read_all(&input, max));
                // The payload's buffer is allocated once its header checked out
                // (at most `max`), before its bytes are read.
                bounded(
                    "read_record",
                    allocated,
                    input.len(),
                    2,
                    max.min(u32::MAX as usize) + 1024,
                )?;
                prop_assert!(
                    allocated.largest <= max.max(1024),
                    "{allocated:?} over max_record {max}"
                );
                if let Ok(records) = got {
                    prop_assert_eq!(
                        records.iter().map(|r| r.len() + HEADER_LEN).sum::<usize>(),
                        input.len(),
                        "records must account for every byte"
                    );
                }
            }
            if let Some(h) = input.first_chunk::<HEADER_LEN>() {
                let h = Header::from_bytes(*h);
                prop_assert_eq!(Header::from_bytes(h.to_bytes()), h);
                let _ = h.check(MAX_RECORD);
            }
            Ok(())
        },
    );
}

#[test]
fn record_round_trip() {
    fuzz("journal::record round trip", payloads(), |payloads| {
        let bytes = stream(&payloads);
        let got = read_all(&bytes, MAX_RECORD).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&got, &payloads);
        // Cut anywhere inside: the records before the cut, then an error.
        let cut = bytes.len() / 2;
        if cut > 0 {
            let mut r = Cursor::new(&bytes[..cut]);
            let mut n = 0;
            loop {
                match record::read_record(&mut r, MAX_RECORD) {
                    Ok(Some(p)) => {
                        prop_assert_eq!(&p, &payloads[n]);
                        n += 1;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        prop_assert!(!e.to_string().is_empty());
                        break;
                    }
                }
            }
        }
        Ok(())
    });
}

/// A journal opened over a segment file of mutated records: opens (the torn
/// tail cut) or refuses, reads what it holds, and keeps working.
#[test]
fn segment_open() {
    let cases = inputs(payloads().prop_map(|p| stream(&p)), 256);
    fuzz(
        "journal::Journal::open over a damaged segment",
        cases,
        |Hex(input)| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(format!("{:020}.seg", 1)), &input).unwrap();
            let cfg = JournalConfig {
                segment_bytes: 1 << 20,
                max_record: MAX_RECORD,
                sync_on_append: false,
            };
            let (opened, allocated) = measure(|| Journal::open(dir.path(), cfg.clone()));
            bounded("Journal::open", allocated, input.len(), 8, 1 << 20)?;
            if let Ok(mut j) = opened {
                let first = j.first_id();
                let held = j
                    .read(first, usize::MAX)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(held.len() as u64, j.next_id() - first);
                let id = j
                    .append(b"after")
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(id + 1, j.next_id());
            }
            Ok(())
        },
    );
}
