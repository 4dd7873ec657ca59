//! Fuzz target for the keyspace change codec (`keyspace::codec`): the form
//! changes take between nodes (replication), sites (WAN), in the change log
//! and in backups. Arbitrary bytes and mutated valid encodings decode or
//! are refused, never panic, never allocate for a merely announced count;
//! whatever decodes re-encodes to a change that decodes to itself, with
//! `encoded_len` exact and `head` agreeing. See docs/fuzzing.md.

use keyspace::codec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use fuzzing::{bounded, fuzz, inputs, measure, Hex};

/// The properties of a change that decoded: re-encoding round-trips.
fn stable(c: &keyspace::Change) -> Result<(), TestCaseError> {
    let bytes = changes::encode(c);
    prop_assert_eq!(
        bytes.len(),
        codec::encoded_len(c),
        "encoded_len disagrees with encode"
    );
    let (back, used) = codec::decode(&bytes)
        .map_err(|e| TestCaseError::fail(format!("re-encoded change does not decode: {e}")))?;
    prop_assert_eq!(used, bytes.len());
    prop_assert_eq!(&back, c);
    let head = codec::head(&bytes).map_err(|e| TestCaseError::fail(format!("head: {e}")))?;
    prop_assert_eq!(
        (head.key, head.version, head.kind),
        (&c.key[..], c.version, c.kind.index())
    );
    Ok(())
}

#[test]
fn change_codec() {
    let valid = proptest::collection::vec(changes::change(), 1..3)
        .prop_map(|cs| cs.iter().flat_map(changes::encode).collect::<Vec<u8>>());
    fuzz(
        "keyspace::codec::decode",
        inputs(valid, 256),
        |Hex(input)| {
            let (got, allocated) = measure(|| codec::decode(&input));
            // Decoded values own copies of their bytes, in collections.
            // A sorted set decoded into its large form costs a fixed ~48 KiB
            // (its index's nodes) whatever its size: a value-building decoder is
            // held to 1 KiB a byte plus 64 KiB, which still catches any
            // allocation for an announced length.
            bounded("codec::decode", allocated, input.len(), 1024, 1 << 16)?;
            let _ = codec::head(&input);
            if let Ok((c, used)) = got {
                prop_assert!(used <= input.len());
                stable(&c)?;
                let (h, _) = (codec::head(&input), ());
                let h =
                    h.map_err(|e| TestCaseError::fail(format!("decode ok but head fails: {e}")))?;
                prop_assert_eq!(h.key, &c.key[..]);
            }
            Ok(())
        },
    );
}

#[test]
fn change_round_trip() {
    fuzz("keyspace::codec round trip", changes::change(), |c| {
        stable(&c)?;
        // Every strict prefix is refused, never mistaken for a change.
        let bytes = changes::encode(&c);
        for cut in 0..bytes.len() {
            if let Ok((_, used)) = codec::decode(&bytes[..cut]) {
                prop_assert!(used <= cut);
            }
        }
        Ok(())
    });
}

/// Valid keyspace changes (`keyspace::codec`), built from public
/// constructors: seeds that the mutations start from (shared by the fuzz
/// targets of every crate that decodes changes).
#[allow(dead_code)]
#[path = "../../fuzzing/changes.rs"]
mod changes;
