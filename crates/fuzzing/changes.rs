//! Valid keyspace changes (`keyspace::codec`), built from public
//! constructors: the seeds the fuzz targets' mutations start from.
//! Included (`#[path]`) by the `tests/fuzz.rs` of each crate that decodes
//! changes, so that `keyspace` is that crate's own dependency.

use bytes::Bytes;
use keyspace::value::{HashValue, ListValue, SetValue, ZSetValue};
use keyspace::{Change, ChangeKind, DeltaOp, Value, Version};
use proptest::prelude::*;

pub fn blob(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

pub fn version() -> impl Strategy<Value = Version> {
    (any::<u64>(), any::<u16>()).prop_map(|(hlc, site)| Version { hlc, site })
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        -1e9f64..1e9,
        Just(0.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY)
    ]
}

/// Collections are never empty (a key holding none does not exist, and
/// the codec refuses a count of 0).
pub fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        blob(48).prop_map(Value::str),
        (
            proptest::collection::vec((blob(8), blob(16)), 1..6),
            version()
        )
            .prop_map(|(fields, v)| {
                let mut h = HashValue::new();
                for (f, x) in fields {
                    h.set(f, x, v);
                }
                Value::Hash(h)
            }),
        (proptest::collection::vec(blob(8), 1..6), version()).prop_map(|(members, v)| {
            let mut s = SetValue::new();
            for m in members {
                s.add(&m, v);
            }
            Value::Set(s)
        }),
        (
            proptest::collection::vec((blob(8), score()), 1..6),
            version()
        )
            .prop_map(|(members, v)| {
                let mut z = ZSetValue::new();
                for (m, sc) in members {
                    z.insert(&m, sc, v);
                }
                Value::ZSet(z)
            }),
        proptest::collection::vec(blob(8), 1..6).prop_map(|items| {
            let mut l = ListValue::new();
            for i in items {
                l.push_back(&i);
            }
            Value::List(Box::new(l))
        }),
    ]
}

pub fn op() -> impl Strategy<Value = DeltaOp> {
    prop_oneof![
        (any::<u32>(), any::<u32>(), blob(16)).prop_map(|(offset, remove, insert)| {
            DeltaOp::Splice {
                offset,
                remove,
                insert,
            }
        }),
        proptest::collection::vec((any::<u32>(), blob(8)), 0..4)
            .prop_map(|ranges| DeltaOp::Patch { ranges }),
        any::<i64>().prop_map(DeltaOp::IncrBy),
        proptest::collection::vec((blob(8), blob(8)), 0..4)
            .prop_map(|fields| DeltaOp::HashSet { fields }),
        proptest::collection::vec(blob(8), 0..4).prop_map(|fields| DeltaOp::HashDel { fields }),
        any::<u64>().prop_map(DeltaOp::SetExpiry),
        (any::<i64>(), any::<i64>()).prop_map(|(by, total)| DeltaOp::Count { by, total }),
        (blob(8), any::<i64>(), any::<i64>()).prop_map(|(field, by, total)| DeltaOp::HashCount {
            field,
            by,
            total
        }),
        proptest::collection::vec(blob(8), 0..4).prop_map(|members| DeltaOp::SetAdd { members }),
        proptest::collection::vec((blob(8), score()), 0..4)
            .prop_map(|members| DeltaOp::ZAdd { members }),
    ]
}

pub fn kind() -> impl Strategy<Value = ChangeKind> {
    prop_oneof![
        4 => (value(), any::<u64>()).prop_map(|(value, expire_at)| ChangeKind::Full { value, expire_at }),
        4 => (version(), op()).prop_map(|(base, op)| ChangeKind::Delta { base, op }),
        1 => Just(ChangeKind::Delete),
        1 => Just(ChangeKind::Expire),
        1 => Just(ChangeKind::Evict),
    ]
}

pub fn change() -> impl Strategy<Value = Change> {
    (blob(16), version(), kind()).prop_map(|(key, version, kind)| Change { key, version, kind })
}

/// A full value (what snapshots and backups hold).
pub fn full_change() -> impl Strategy<Value = Change> {
    (blob(16), version(), value(), any::<u64>()).prop_map(|(key, version, value, expire_at)| {
        Change {
            key,
            version,
            kind: ChangeKind::Full { value, expire_at },
        }
    })
}

pub fn encode(c: &Change) -> Vec<u8> {
    let mut out = Vec::new();
    keyspace::codec::encode(c, &mut out);
    out
}
