//! Fuzz targets for the WAN link's decoders (`wan::wire`: frames, hello,
//! welcome, batches with their lz4 bodies and entries, need-full and
//! settled frames) and the `WANSETTLED` marks (`wan::settled`). Arbitrary
//! bytes and mutated valid encodings: no panic, no allocation past what
//! the bytes hold or the protocol's limits allow; encoders round-trip. See
//! docs/fuzzing.md.

use bytes::{Bytes, BytesMut};
use keyspace::slot;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use wan::settled;
use wan::wire::{self, Challenge, Frame, Hello, Lz4Probe, Welcome};

use fuzzing::{bounded, bytes, fuzz, measure, mutated, Hex};

fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[a-z0-9.:\u{e9}-]{{0,{max}}}")).unwrap()
}

/// Partition counts the entries are checked against.
const PARTITIONS: [u16; 3] = [1, 16, 271];

/// A batch body of valid entries: each entry's partition is its key's.
fn body() -> impl Strategy<Value = Bytes> {
    (
        0usize..PARTITIONS.len(),
        proptest::collection::vec((changes::change(), any::<u64>()), 0..5),
        any::<bool>(),
    )
        .prop_map(|(pi, cs, repeat)| {
            let parts = PARTITIONS[pi];
            let mut out = BytesMut::new();
            for (c, seq) in &cs {
                let p = slot::slot_partition(slot::key_slot(&c.key), parts) as u16;
                wire::put_entry(&mut out, p, *seq, c);
            }
            if repeat {
                // Compressible: lz4 takes it.
                let once = out.clone();
                for _ in 0..8 {
                    out.extend_from_slice(&once);
                }
            }
            out.freeze()
        })
}

fn frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (
            any::<u16>(),
            text(12),
            any::<u16>(),
            text(12),
            any::<u64>(),
            any::<[u8; 16]>()
        )
            .prop_map(
                |(site_id, site_name, partitions, node_id, incarnation, nonce)| Frame::Hello(
                    Hello {
                        version: wire::PROTOCOL_VERSION,
                        site_id,
                        site_name,
                        partitions,
                        node_id,
                        incarnation,
                        nonce,
                    }
                )
            ),
        (
            any::<u16>(),
            text(12),
            proptest::collection::vec((any::<u16>(), any::<u64>()), 0..6),
            any::<u64>(),
            proptest::option::of((any::<[u8; 16]>(), any::<[u8; 32]>()))
        )
            .prop_map(
                |(site_id, site_name, applied, data_incarnation, c)| Frame::Welcome(Welcome {
                    site_id,
                    site_name,
                    applied,
                    data_incarnation,
                    challenge: c.map(|(nonce, proof)| Challenge { nonce, proof }),
                })
            ),
        text(40).prop_map(Frame::Refuse),
        (any::<u64>(), body()).prop_map(|(id, body)| Frame::Batch { id, body }),
        any::<u64>().prop_map(Frame::Received),
        any::<u64>().prop_map(Frame::Applied),
        proptest::collection::vec((any::<u16>(), changes::blob(16)), 0..5)
            .prop_map(Frame::NeedFull),
        any::<[u8; 32]>().prop_map(Frame::Proof),
        proptest::collection::vec((any::<u16>(), any::<u64>()), 0..6).prop_map(Frame::Settled),
    ]
}

fn encoded(f: &Frame) -> Vec<u8> {
    let mut out = BytesMut::new();
    wire::encode(f, &mut out);
    out.to_vec()
}

/// Inputs: mutated streams, frames whose payload (after the 5-byte frame
/// header) was mutated and the length fixed, arbitrary bytes.
fn inputs() -> impl Strategy<Value = Hex> {
    let stream = proptest::collection::vec(frame(), 1..3)
        .prop_map(|fs| fs.iter().flat_map(encoded).collect::<Vec<u8>>());
    let inner = (
        frame(),
        proptest::collection::vec(fuzzing::mutation(), 1..8),
    )
        .prop_map(|(f, ms)| {
            let e = encoded(&f);
            let payload = fuzzing::mutate(e[5..].to_vec(), &ms);
            let mut out = BytesMut::new();
            framing::encode_frame(e[4], &payload, &mut out);
            Hex(out.to_vec())
        });
    prop_oneof![1 => bytes(256), 2 => mutated(stream), 3 => inner]
}

fn batch_body_decoders(body: &Bytes) -> Result<(), TestCaseError> {
    for parts in PARTITIONS {
        let _ = wire::decode_entries(body, parts);
    }
    let n = wire::count_entries(body);
    prop_assert!(n <= body.len() as u64);
    let _ = wire::max_seqs(body);
    let pieces = wire::split_body(body, 64);
    prop_assert!(pieces.iter().map(Bytes::len).sum::<usize>() <= body.len());
    Ok(())
}

#[test]
fn wan_wire_decoder() {
    fuzz("wan::wire::decode", inputs(), |Hex(input)| {
        let _ = wire::PROTOCOL.check_preamble(&input);
        let _ = settled::decode_marks(&input, 16);
        let mut buf = BytesMut::from(&input[..]);
        loop {
            let before = buf.len();
            let (got, allocated) = measure(|| wire::decode(&mut buf));
            // A compressed batch is given its raw length by the frame,
            // capped at the protocol's largest frame (see docs/fuzzing.md).
            bounded(
                "wire::decode",
                allocated,
                before,
                64,
                wire::LIMITS.max_frame + 4096,
            )?;
            match got {
                Ok(Some(frame)) => {
                    prop_assert!(buf.len() < before);
                    if let Frame::Batch { body, .. } = &frame {
                        let (r, allocated) = measure(|| batch_body_decoders(body));
                        r?;
                        // A sorted set decoded into its large form costs a fixed ~48 KiB
                        // (its index's nodes) whatever its size: a value-building decoder is
                        // held to 1 KiB a byte plus 64 KiB, which still catches any
                        // allocation for an announced length.
                        bounded("batch body decoders", allocated, body.len(), 1024, 1 << 16)?;
                    }
                }
                Ok(None) => {
                    prop_assert_eq!(buf.len(), before);
                    break;
                }
                // The frame was taken off (its payload did not decode), or
                // nothing (its header was refused).
                Err(_) => break,
            }
        }
        Ok(())
    });
}

#[test]
fn wan_wire_round_trip() {
    fuzz(
        "wan::wire round trip",
        (proptest::collection::vec(frame(), 1..4), any::<bool>()),
        |(frames, lz4)| {
            let mut out = BytesMut::new();
            let mut probe = Lz4Probe::default();
            for f in &frames {
                if lz4 {
                    wire::encode_with(f, &mut probe, &mut out);
                } else {
                    let mut head = BytesMut::new();
                    let tail = wire::encode_parts(f, &mut probe, &mut head);
                    out.extend_from_slice(&head);
                    if let Some(t) = tail {
                        out.extend_from_slice(&t);
                    }
                }
            }
            prop_assert_eq!(
                wire::PROTOCOL.check_preamble(&out).is_ok(),
                matches!(frames[0], Frame::Hello(_))
            );
            for f in &frames {
                let got =
                    wire::decode(&mut out).map_err(|e| TestCaseError::fail(format!("{e}")))?;
                prop_assert_eq!(got.as_ref(), Some(f));
                if let Frame::Batch { body, .. } = f {
                    for parts in PARTITIONS {
                        // The body was built for one of the counts.
                        if let Ok(entries) = wire::decode_entries(body, parts) {
                            prop_assert_eq!(entries.len() as u64, wire::count_entries(body));
                        }
                    }
                }
            }
            prop_assert!(out.is_empty());
            Ok(())
        },
    );
}

#[test]
fn settled_marks_round_trip() {
    let strategy = (
        proptest::collection::vec((0u16..64, any::<u64>()), 0..8),
        bytes(64),
    );
    fuzz("wan::settled marks", strategy, |(marks, Hex(junk))| {
        prop_assert_eq!(
            settled::decode_marks(&settled::encode_marks(&marks), 64),
            Ok(marks)
        );
        let _ = settled::decode_marks(&junk, 64);
        Ok(())
    });
}

/// Not a crash, a figure for docs/fuzzing.md: a compressed batch frame of a
/// few bytes makes the decoder allocate the raw length its header names,
/// up to `LIMITS.max_frame`.
#[test]
fn lz4_batch_raw_length_is_capped() {
    let mut payload = Vec::new();
    payload.extend_from_slice(&7u64.to_le_bytes());
    payload.push(1); // FLAG_LZ4
    payload.extend_from_slice(&(wire::LIMITS.max_frame as u32).to_le_bytes());
    payload.extend_from_slice(&[0x00]);
    let mut buf = BytesMut::new();
    framing::encode_frame(4, &payload, &mut buf);
    let len = buf.len();
    let (got, allocated) = measure(|| wire::decode(&mut buf));
    println!("a {len}-byte lz4 batch frame: {got:?}, allocated {allocated:?}");
    assert!(got.is_err());
    assert!(allocated.largest <= wire::LIMITS.max_frame + 4096);
}

/// Valid keyspace changes (`keyspace::codec`), built from public
/// constructors: seeds that the mutations start from (shared by the fuzz
/// targets of every crate that decodes changes).
#[allow(dead_code)]
#[path = "../../fuzzing/changes.rs"]
mod changes;
