//! The codec's properties: round trips, exact lengths, and outside bytes
//! (truncated, mutated) giving errors, never panics.

use super::*;
use crate::value::{
    Contribution, CounterBase, CounterValue, FloatContribution, ScoreContribution, ScoreCounter,
};
use bytes::Bytes;
use proptest::prelude::*;

/// A float as INCRBYFLOAT prints it (what a float total holds).
fn float_text() -> impl Strategy<Value = Bytes> {
    (-1e6f64..1e6).prop_map(|f| Bytes::from(f.to_string()))
}

fn bytes() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..12).prop_map(Bytes::from)
}

fn version() -> impl Strategy<Value = Version> {
    (any::<u64>(), any::<u16>()).prop_map(|(hlc, site)| Version { hlc, site })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        bytes().prop_map(Value::str),
        proptest::collection::vec((bytes(), bytes(), version()), 0..4).prop_map(|fs| {
            let mut h = HashValue::new();
            for (f, v, ver) in fs {
                h.set(f, v, ver);
            }
            Value::Hash(h)
        }),
        (
            version(),
            version(),
            any::<i64>(),
            proptest::option::of(bytes()),
            proptest::collection::vec((0u16..5, any::<i64>(), version()), 0..3),
            proptest::option::of((float_text(), float_text())),
            proptest::collection::vec((0u16..5, float_text(), version()), 0..3),
        )
            .prop_map(|(assigned, floor, n, text, cs, float, fs)| {
                let base = match (text, float) {
                    (_, Some((text, seen))) => CounterBase::Float { text, seen },
                    (Some(t), None) => CounterBase::Text(t),
                    (None, None) => CounterBase::Int(n as i128 * 3),
                };
                let fs = fs
                    .into_iter()
                    .map(|(site, total, version)| FloatContribution {
                        site,
                        total,
                        version,
                    })
                    .collect();
                let cs = cs
                    .into_iter()
                    .map(|(site, total, version)| Contribution {
                        site,
                        total,
                        version,
                    })
                    .collect();
                Value::Counter(Box::new(CounterValue::from_parts(
                    assigned, base, floor, floor, cs, fs,
                )))
            }),
        proptest::collection::vec(bytes(), 1..5)
            .prop_map(|items| Value::List(Box::new(crate::value::ListValue::from_items(items)))),
        proptest::collection::vec((bytes(), version()), 0..4).prop_map(|ms| {
            let mut set = SetValue::new();
            for (m, v) in ms {
                set.add(&m, v);
            }
            Value::Set(set)
        }),
        (
            proptest::collection::vec((bytes(), score(), version()), 0..4),
            proptest::collection::vec(
                (
                    0usize..4,
                    version(),
                    score(),
                    score(),
                    version(),
                    proptest::collection::vec((0u16..5, score(), version()), 0..3)
                ),
                0..3
            )
        )
            .prop_map(|(ms, counters)| {
                let mut z = ZSetValue::new();
                for (m, score, v) in &ms {
                    z.insert(m, *score, *v);
                }
                for (i, assigned, score, seen, floor, cs) in counters {
                    let Some((m, ..)) = ms.get(i) else { continue };
                    let cs = cs
                        .into_iter()
                        .map(|(site, total, version)| ScoreContribution {
                            site,
                            total,
                            version,
                        })
                        .collect();
                    z.set_counter(
                        m,
                        ScoreCounter::from_parts(assigned, score, seen, floor, cs),
                    );
                }
                Value::ZSet(z)
            }),
    ]
}

fn score() -> impl Strategy<Value = f64> {
    any::<f64>().prop_filter("not NaN", |s| !s.is_nan())
}

fn op() -> impl Strategy<Value = DeltaOp> {
    prop_oneof![
        (any::<u32>(), any::<u32>(), bytes()).prop_map(|(offset, remove, insert)| {
            DeltaOp::Splice {
                offset,
                remove,
                insert,
            }
        }),
        proptest::collection::vec((any::<u32>(), bytes()), 0..4)
            .prop_map(|ranges| DeltaOp::Patch { ranges }),
        any::<i64>().prop_map(DeltaOp::IncrBy),
        proptest::collection::vec((bytes(), bytes()), 0..4)
            .prop_map(|fields| DeltaOp::HashSet { fields }),
        proptest::collection::vec(bytes(), 0..4).prop_map(|fields| DeltaOp::HashDel { fields }),
        any::<u64>().prop_map(DeltaOp::SetExpiry),
        (any::<i64>(), any::<i64>()).prop_map(|(by, total)| DeltaOp::Count { by, total }),
        (bytes(), any::<i64>(), any::<i64>()).prop_map(|(field, by, total)| DeltaOp::HashCount {
            field,
            by,
            total
        }),
        float_text().prop_map(|total| DeltaOp::FloatCount { total }),
        (bytes(), score()).prop_map(|(member, total)| DeltaOp::ZCount { member, total }),
        (
            proptest::collection::vec((bytes(), score()), 0..3),
            proptest::collection::vec((bytes(), version(), score(), score(), version()), 0..3)
        )
            .prop_map(|(members, cs)| DeltaOp::ZAssign {
                members,
                counters: cs
                    .into_iter()
                    .map(|(m, assigned, score, seen, floor)| {
                        (
                            m,
                            ScoreCounter::from_parts(assigned, score, seen, floor, Vec::new()),
                        )
                    })
                    .collect(),
            }),
        (bytes(), float_text()).prop_map(|(field, total)| DeltaOp::HashFloatCount { field, total }),
        proptest::collection::vec(bytes(), 0..4).prop_map(|members| DeltaOp::SetAdd { members }),
        proptest::collection::vec((bytes(), score()), 0..4)
            .prop_map(|members| DeltaOp::ZAdd { members }),
        (
            any::<bool>(),
            proptest::collection::vec((bytes(), version()), 0..4)
        )
            .prop_map(|(z, members)| DeltaOp::Remove {
                coll: if z { Coll::ZSet } else { Coll::Set },
                members
            }),
        proptest::collection::vec(
            (
                any::<u32>(),
                any::<u32>(),
                proptest::collection::vec(bytes(), 0..3)
            ),
            0..4
        )
        .prop_map(|edits| DeltaOp::ListEdit {
            edits: edits
                .into_iter()
                .map(|(at, remove, insert)| crate::value::ListEdit { at, remove, insert })
                .collect()
        }),
        proptest::collection::vec((0u16..16384, 0u8..64), 0..6)
            .prop_map(|registers| DeltaOp::HllMax { registers }),
        proptest::collection::vec((0u32..(crate::bits::MAX_LEN as u32), any::<u8>()), 0..6)
            .prop_map(|bytes| DeltaOp::BitsOr { bytes }),
        (
            any::<u64>(),
            prop_oneof![
                (bytes(), 0u32..100, 0u32..3).prop_map(|(insert, offset, remove)| {
                    DeltaOp::Splice {
                        offset,
                        remove,
                        insert,
                    }
                }),
                proptest::collection::vec((any::<u32>(), bytes()), 0..3)
                    .prop_map(|ranges| DeltaOp::Patch { ranges }),
                any::<u64>().prop_map(DeltaOp::SetExpiry),
            ]
        )
            .prop_map(|(base_hash, op)| DeltaOp::Checked {
                base_hash,
                op: Box::new(op),
            }),
    ]
}

pub fn change() -> impl Strategy<Value = Change> {
    let kind = prop_oneof![
        (value(), any::<u64>())
            .prop_map(|(value, expire_at)| ChangeKind::Full { value, expire_at }),
        (version(), op()).prop_map(|(base, op)| ChangeKind::Delta { base, op }),
        Just(ChangeKind::Delete),
        Just(ChangeKind::Expire),
        Just(ChangeKind::Evict),
    ];
    (bytes(), version(), kind).prop_map(|(key, version, kind)| Change { key, version, kind })
}

#[test]
fn decoded_changes_do_not_point_into_their_input() {
    let fields = vec![
        (Bytes::from_static(b"count"), Bytes::from_static(b"7")),
        (Bytes::from_static(b"big"), Bytes::from(vec![1u8; 2000])),
    ];
    let ops = [
        ChangeKind::Full {
            value: Value::str(Bytes::from_static(b"value")),
            expire_at: 0,
        },
        ChangeKind::Delta {
            base: Version::ZERO,
            op: DeltaOp::HashSet {
                fields: fields.clone(),
            },
        },
        ChangeKind::Delta {
            base: Version::ZERO,
            op: DeltaOp::Splice {
                offset: 1,
                remove: 0,
                insert: Bytes::from_static(b"ab"),
            },
        },
    ];
    for kind in ops {
        let c = Change {
            key: Bytes::from_static(b"key"),
            version: Version::ZERO,
            kind,
        };
        let mut buf = Vec::new();
        encode(&c, &mut buf);
        let input = Bytes::from(buf);
        let (back, _) = decode(&input).unwrap();
        assert_eq!(back, c);
        let range = input.as_ptr() as usize..input.as_ptr() as usize + input.len();
        let mut held: Vec<Bytes> = vec![back.key.clone()];
        match &back.kind {
            ChangeKind::Full {
                value: Value::Str(v),
                ..
            } => held.push(v.to_bytes()),
            ChangeKind::Delta {
                op: DeltaOp::HashSet { fields },
                ..
            } => held.extend(fields.iter().flat_map(|(f, v)| [f.clone(), v.clone()])),
            ChangeKind::Delta {
                op: DeltaOp::Splice { insert, .. },
                ..
            } => held.push(insert.clone()),
            _ => unreachable!(),
        }
        for b in held {
            assert!(
                !range.contains(&(b.as_ptr() as usize)),
                "{b:?} points into the decoded buffer"
            );
        }
    }
}

proptest! {
    #[test]
    fn round_trips_and_len_is_exact(c in change()) {
        let mut out = Vec::new();
        encode(&c, &mut out);
        prop_assert_eq!(out.len(), encoded_len(&c));
        let (back, used) = decode(&out).unwrap();
        prop_assert_eq!(used, out.len());
        let h = head(&out).unwrap();
        prop_assert_eq!((h.key, h.version, h.kind), (&c.key[..], c.version, c.kind.index()));
        prop_assert_eq!(back, c);
    }

    #[test]
    fn truncated_or_mutated_input_is_an_error_not_a_panic(
        c in change(), cut in any::<prop::sample::Index>(), flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4)
    ) {
        let mut out = Vec::new();
        encode(&c, &mut out);
        let n = cut.index(out.len().max(1));
        prop_assert!(decode(&out[..n]).is_err());
        for (i, b) in flips { let i = i.index(out.len()); out[i] ^= b; }
        let _ = decode(&out);
        let _ = head(&out);
    }

    /// Forged bodies of the raise and checked ops (tags 20..=23 behind a
    /// delta's header): an error, or an op within its bounds (no index
    /// past the longest string, no checked op inside a checked op).
    #[test]
    fn forged_raise_and_checked_bodies_are_bounded(
        tag in 20u8..24, body in proptest::collection::vec(any::<u8>(), 0..64)
    ) {
        let mut buf = vec![0, 0, 0, DELTA, 0, 0, tag];
        buf.extend_from_slice(&body);
        if let Ok((Change { kind: ChangeKind::Delta { op, .. }, .. }, _)) = decode(&buf) {
            match op {
                DeltaOp::BitsOr { bytes } => prop_assert!(
                    bytes.iter().all(|(i, _)| (*i as usize) < crate::bits::MAX_LEN)
                ),
                DeltaOp::Checked { op, .. } => {
                    let inner_ok = matches!(
                        *op,
                        DeltaOp::Splice { .. } | DeltaOp::Patch { .. } | DeltaOp::SetExpiry(_)
                    );
                    prop_assert!(inner_ok, "checked around {:?}", op);
                }
                _ => {}
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode(&data);
        let _ = head(&data);
    }
}

#[test]
fn forged_counts_allocate_nothing() {
    // key "", version 0/0, Delta base 0/0, HSET with 2^60 fields.
    let mut buf = vec![0, 0, 0, DELTA, 0, 0, HSET];
    put_varint(&mut buf, 1 << 60);
    assert_eq!(decode(&Bytes::from(buf)), Err(DecodeError::Truncated));
}

#[test]
fn forged_bit_raises_are_refused() {
    // A count past the bytes left allocates nothing.
    let mut buf = vec![0, 0, 0, DELTA, 0, 0, BITSOR];
    put_varint(&mut buf, 1 << 60);
    assert_eq!(decode(&Bytes::from(buf)), Err(DecodeError::Truncated));
    // A byte index past the longest string.
    let mut buf = vec![0, 0, 0, DELTA, 0, 0, BITSOR];
    put_varint(&mut buf, 1);
    buf.extend_from_slice(&(crate::bits::MAX_LEN as u32).to_le_bytes());
    buf.push(1);
    assert_eq!(decode(&Bytes::from(buf)), Err(DecodeError::OutOfRange));
}

#[test]
fn a_checked_delta_holds_only_a_splice_a_patch_or_an_expiry() {
    // CHECKED around CHECKED, or around a raise: refused, not decoded
    // recursively.
    for inner in [CHECKED, BITSOR, HLLMAX, INCRBY] {
        let mut buf = vec![0, 0, 0, DELTA, 0, 0, CHECKED];
        buf.extend_from_slice(&7u64.to_le_bytes());
        buf.push(inner);
        buf.extend_from_slice(&[0; 16]);
        assert!(matches!(
            decode(&Bytes::from(buf)),
            Err(DecodeError::BadTag { .. })
        ));
    }
    // Nothing after the hash.
    let mut buf = vec![0, 0, 0, DELTA, 0, 0, CHECKED];
    buf.extend_from_slice(&7u64.to_le_bytes());
    assert_eq!(decode(&Bytes::from(buf)), Err(DecodeError::Truncated));
}
