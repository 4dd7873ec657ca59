//! Fuzz targets for what every peer protocol shares (`framing`): the frame
//! splitter, the hello and preamble checks, and the payload reader's
//! integers, strings, varints and counts. Arbitrary bytes and mutated
//! valid streams: no panic, no allocation for an announced length;
//! encoders round-trip. (TLS-unwrapped frames are these frames: the TLS
//! layer hands the same bytes to the same decoders.) See docs/fuzzing.md.

use bytes::{Bytes, BytesMut};
use framing::{encode_frame, put_str, put_varint, Limits, Payload, Protocol};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use fuzzing::{bounded, fuzz, inputs, measure, Hex};

const LIMITS: Limits = Limits {
    max_frame: 1 << 12,
    max_str: 1 << 8,
    max_items: 1 << 8,
};

const PROTOCOLS: [Protocol; 2] = [
    Protocol {
        name: "",
        magic: *b"DGRD",
        version: 7,
        hello_kind: 1,
        hello_len: None,
        limits: LIMITS,
    },
    Protocol {
        name: "metadata",
        magic: *b"DGMD",
        version: 1,
        hello_kind: 1,
        hello_len: Some(24),
        limits: LIMITS,
    },
];

fn frames() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..48)),
        1..5,
    )
    .prop_map(|fs| {
        let mut out = BytesMut::new();
        let mut hello = BytesMut::new();
        PROTOCOLS[0].put_hello(7, &mut hello);
        encode_frame(1, &hello, &mut out);
        for (k, p) in fs {
            encode_frame(k, &p, &mut out);
        }
        out.to_vec()
    })
}

/// Reads a payload with a script of reads (each byte of `script` picks
/// one), as a protocol's decoder would.
fn read_script(p: &mut Payload, script: &[u8]) -> Result<(), TestCaseError> {
    for &op in script {
        let before = p.remaining();
        let ok = match op % 10 {
            0 => p.u8("x").is_ok(),
            1 => p.u16("x").is_ok(),
            2 => p.u32("x").is_ok(),
            3 => p.u64("x").is_ok(),
            4 => p.str("x").map(|s| s.len() <= LIMITS.max_str).is_ok(),
            5 => p.string("x").is_ok(),
            6 => p.varint("x").is_ok(),
            7 => p.array::<16>("x").is_ok(),
            8 => {
                let n = p
                    .peek(4)
                    .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
                if let Ok(n) = p.count(n, 1 + (op as usize / 10) % 10, "x") {
                    prop_assert!(n <= LIMITS.max_items && n <= p.remaining());
                }
                true
            }
            _ => p.bytes(op as usize / 10, "x").is_ok(),
        };
        prop_assert!(p.remaining() <= before);
        if !ok {
            break;
        }
    }
    Ok(())
}

#[test]
fn frame_and_payload_decoder() {
    let strategy = (
        inputs(frames(), 256),
        proptest::collection::vec(any::<u8>(), 0..16),
    );
    fuzz(
        "framing (split_frame, hello, Payload)",
        strategy,
        |(Hex(input), script)| {
            for proto in PROTOCOLS {
                let _ = proto.check_preamble(&input);
            }
            let mut buf = BytesMut::from(&input[..]);
            loop {
                let before = buf.len();
                let (got, allocated) = measure(|| LIMITS.split_frame(&mut buf));
                bounded("split_frame", allocated, 0, 0, 256)?;
                match got {
                    Ok(Some((kind, payload))) => {
                        prop_assert!(payload.len() < LIMITS.max_frame);
                        prop_assert_eq!(before - buf.len(), 5 + payload.len());
                        for proto in PROTOCOLS {
                            let mut p = Payload::new(payload.clone(), LIMITS);
                            let _ = proto.check_hello(kind, &mut p);
                        }
                        let mut p = Payload::new(payload.clone(), LIMITS);
                        let (r, allocated) = measure(|| read_script(&mut p, &script));
                        r?;
                        bounded("Payload reads", allocated, payload.len(), 2, 512)?;
                    }
                    _ => {
                        prop_assert_eq!(buf.len(), before, "nothing taken off on {:?}", got);
                        break;
                    }
                }
            }
            Ok(())
        },
    );
}

#[test]
fn payload_round_trip() {
    let strategy = (
        any::<u8>(),
        proptest::collection::vec(any::<u64>(), 0..6),
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..4),
    );
    fuzz("framing round trip", strategy, |(kind, ints, strs)| {
        let mut payload = BytesMut::new();
        ints.iter().for_each(|&n| put_varint(&mut payload, n));
        strs.iter().for_each(|s| put_str(&mut payload, s));
        let mut out = BytesMut::new();
        encode_frame(kind, &payload, &mut out);
        let limits = Limits::frames_of(1 << 20);
        let (k, p) = limits.split_frame(&mut out).unwrap().unwrap();
        prop_assert_eq!(k, kind);
        prop_assert!(out.is_empty());
        let mut p = Payload::new(p, limits);
        for &n in &ints {
            prop_assert_eq!(p.varint("n"), Ok(n));
        }
        for s in &strs {
            prop_assert_eq!(p.str("s"), Ok(Bytes::copy_from_slice(s)));
        }
        prop_assert_eq!(p.finish("end"), Ok(()));
        Ok(())
    });
}
