//! Fuzz target for RESTORE's payload decoder (`commands::dump::rdb`: Redis
//! RDB objects, with their ziplist, listpack, intset and LZF encodings, and
//! the footer) and FUNCTION RESTORE's. Arbitrary bytes, mutated DUMP
//! payloads and hand-made Redis encodings, fed both to `load` (the object)
//! and to `restore` (with a correct footer, so the object decoder is
//! reached): no panic, no allocation past what the bytes can expand to;
//! what loads dumps and restores to the same payload. See
//! docs/fuzzing.md.

use commands::dump::rdb;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use fuzzing::{bounded, bytes, fuzz, measure, mutated, Hex};

/// Redis's CRC-64 (Jones, reflected), as DUMP payloads carry it.
fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// The RDB version DUMP writes.
fn version() -> [u8; 2] {
    let d = rdb::dump(&keyspace::Value::str(bytes::Bytes::from_static(b"x")));
    [d[d.len() - 10], d[d.len() - 9]]
}

/// A payload of `body`: DUMP's RDB version and the CRC.
fn payload(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(&version());
    out.extend_from_slice(&crc64(&out).to_le_bytes());
    out
}

/// The object of a DUMP payload (version and CRC cut off).
fn body(payload: &[u8]) -> Vec<u8> {
    payload[..payload.len().saturating_sub(10)].to_vec()
}

fn h(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Objects as Redis 7 writes them, in the encodings deltagrid never
/// writes itself.
fn redis_objects() -> Vec<Vec<u8>> {
    [
        "00c07b",                             // string, int8 encoded
        "00c1d204",                           // string, int16
        "00c2d2029649",                       // string, int32
        "00c3050403616161610",                // string, LZF (odd hex: cut below)
        "0b0c0200000002000000010002000",      // set, intset
        "100d0d0000000200816102816202ff",     // hash, listpack
        "14 0d0d0000000200816102816202ff",    // set, listpack
        "110c0c000000020081610201 01ff",      // zset, listpack
        "1201020d0d0000000200816102816202ff", // list, quicklist 2
        "0d0d0d0000000200816102816202ff",     // hash, ziplist-ish
        "0302016103312e35",                   // zset (old float scores)
        "0502016103ae47e17a14ae0540",         // zset, binary doubles
    ]
    .iter()
    .map(|s| {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let even = &s[..s.len() & !1];
        h(even)
    })
    .collect()
}

fn valid_values() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        changes::value().prop_map(|v| body(&rdb::dump(&v))),
        proptest::sample::select(redis_objects()),
    ]
}

fn check(object: &[u8]) -> Result<(), TestCaseError> {
    let (got, allocated) = measure(|| rdb::load(object));
    // LZF expands at most 88 times.
    // A sorted set decoded into its large form costs a fixed ~48 KiB
    // (its index's nodes) whatever its size: a value-building decoder is
    // held to 1 KiB a byte plus 64 KiB, which still catches any
    // allocation for an announced length.
    bounded("rdb::load", allocated, object.len(), 1024, 1 << 16)?;
    let full = payload(object);
    let (restored, allocated) = measure(|| rdb::restore(&full));
    bounded("rdb::restore", allocated, full.len(), 1024, 1 << 16)?;
    prop_assert_eq!(got.is_ok(), restored.is_ok());
    if let Ok(v) = got {
        let dumped = rdb::dump(&v);
        let again = rdb::restore(&dumped).map_err(|e| {
            TestCaseError::fail(format!("dump of a loaded value does not restore: {e:?}"))
        })?;
        prop_assert_eq!(rdb::dump(&again), dumped);
    }
    let _ = rdb::restore_functions(&full);
    Ok(())
}

#[test]
fn restore_payload_decoder() {
    // The footer check is our own CRC's: the seeds must restore.
    let d = rdb::dump(&keyspace::Value::str(bytes::Bytes::from_static(b"x")));
    assert_eq!(payload(&body(&d)), d, "crc64 disagrees with DUMP's");
    let strategy = prop_oneof![1 => bytes(128), 4 => mutated(valid_values())];
    fuzz(
        "commands::dump::rdb::load/restore",
        strategy,
        |Hex(object)| {
            check(&object)?;
            // Untouched footers too: arbitrary payloads reach `verify`.
            let _ = rdb::restore(&object);
            Ok(())
        },
    );
}

#[test]
fn restore_round_trip() {
    fuzz("commands::dump::rdb round trip", changes::value(), |v| {
        let dumped = rdb::dump(&v);
        let back = rdb::restore(&dumped).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(rdb::dump(&back), dumped);
        Ok(())
    });
}

#[test]
fn function_payload_round_trip() {
    let strategy = (
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..4),
        proptest::collection::vec(fuzzing::mutation(), 0..4),
    );
    fuzz("commands::dump::rdb functions", strategy, |(codes, ms)| {
        let refs: Vec<&[u8]> = codes.iter().map(Vec::as_slice).collect();
        let p = rdb::dump_functions(refs.iter().copied());
        prop_assert_eq!(
            rdb::restore_functions(&p).map_err(|e| TestCaseError::fail(format!("{e:?}")))?,
            codes
        );
        let damaged = payload(&body(&fuzzing::mutate(p, &ms)));
        let (_, allocated) = measure(|| rdb::restore_functions(&damaged));
        bounded("restore_functions", allocated, damaged.len(), 64, 4096)?;
        Ok(())
    });
}

/// Valid keyspace changes (`keyspace::codec`), built from public
/// constructors: seeds that the mutations start from (shared by the fuzz
/// targets of every crate that decodes changes).
#[allow(dead_code)]
#[path = "../../fuzzing/changes.rs"]
mod changes;
