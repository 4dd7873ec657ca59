use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

const LIMITS: HashLimits = HashLimits {
    max_entries: 4,
    max_value: 6,
};

fn v(hlc: u64) -> Version {
    Version { hlc, site: 2 }
}

fn b(s: &[u8]) -> Bytes {
    Bytes::copy_from_slice(s)
}

fn set(h: &mut HashValue, name: &[u8], value: &[u8], at: u64) -> bool {
    h.set_within(&b(name), b(value), v(at), LIMITS)
}

#[test]
fn packed_until_more_fields_than_the_entries_limit() {
    let mut h = HashValue::new();
    assert!(h.is_packed());
    for i in 0..4u8 {
        assert!(set(&mut h, &[b'f', i], b"v", 1));
    }
    assert!(h.is_packed());
    // Rewriting a field of a full packed hash keeps it packed.
    assert!(!set(&mut h, &[b'f', 0], b"w", 1));
    assert!(h.is_packed());
    assert!(set(&mut h, b"fifth", b"v", 1));
    assert!(!h.is_packed());
    assert_eq!(h.len(), 5);
    assert_eq!(h.payload_len(), 4 * 3 + 6);
    assert_eq!(h.get(&[b'f', 0]).unwrap().value, b"w");
    // It stays a table when it shrinks back (as in Redis).
    h.remove(b"fifth");
    h.remove(&[b'f', 0]);
    assert!(!h.is_packed());
    assert_eq!(h.payload_len(), 3 * 3);
}

#[test]
fn packed_until_a_name_or_value_longer_than_the_value_limit() {
    let mut h = HashValue::new();
    set(&mut h, b"a", b"123456", 1);
    set(&mut h, b"123456", b"b", 2);
    assert!(h.is_packed());
    let mut long_value = h.clone();
    set(&mut long_value, b"a", b"1234567", 3);
    assert!(!long_value.is_packed());
    assert_eq!(long_value.get(b"a").unwrap().value, b"1234567");
    assert_eq!(long_value.get(b"123456").unwrap().version, v(2));
    let mut long_name = h.clone();
    set(&mut long_name, b"1234567", b"c", 3);
    assert!(!long_name.is_packed());
    assert_eq!(long_name.len(), 3);
    // Equal across forms.
    let mut packed = h.clone();
    set(&mut packed, b"x", b"y", 4);
    let mut table = long_name.clone();
    table.remove(b"1234567");
    set(&mut table, b"x", b"y", 4);
    assert!(!table.is_packed());
    assert_eq!(packed, table);
    assert_eq!(table, packed);
}

#[test]
fn get_iter_and_index_read_both_forms_alike() {
    let mut h = HashValue::new();
    set(&mut h, b"a", b"1", 1);
    set(&mut h, b"b", b"2", 2);
    let read = |h: &HashValue| {
        let all: Vec<_> = h.iter().map(|(n, f)| (n.to_vec(), f.to_field())).collect();
        let indexed: Vec<_> = (0..h.len())
            .map(|i| {
                h.get_index(i)
                    .map(|(n, f)| (n.to_vec(), f.to_field()))
                    .unwrap()
            })
            .collect();
        assert_eq!(all, indexed);
        assert!(h.get_index(h.len()).is_none());
        all
    };
    let packed = read(&h);
    assert_eq!(
        h.get(b"b"),
        Some(FieldRef {
            value: b"2",
            version: v(2)
        })
    );
    set(&mut h, b"long name", b"3", 3);
    assert!(!h.is_packed());
    assert_eq!(read(&h)[..2], packed[..]);
    assert_eq!(
        h.get(b"b"),
        Some(FieldRef {
            value: b"2",
            version: v(2)
        })
    );
}

#[test]
fn stamp_and_counters_in_the_packed_form() {
    let mut h = HashValue::new();
    set(&mut h, b"a", b"1", 1);
    set(&mut h, b"b", b"2", 2);
    h.stamp(v(5));
    assert!(h.iter().all(|(_, f)| f.version == v(5)));
    let c = CounterValue::from_plain(b(b"7"), v(6));
    h.set_counter(&b(b"n"), c.clone(), v(6));
    assert!(h.is_packed());
    assert_eq!(h.counter(b"n"), Some(&c));
    assert_eq!(h.get(b"n").unwrap().value, b"7");
    h.remove(b"n");
    assert!(h.counter(b"n").is_none());
}

#[derive(Clone, Debug)]
enum Op {
    Set(u8, Vec<u8>, u64),
    Remove(u8),
    Stamp(u64),
}

/// Names the ops pick among: short ones, and one past the value limit.
fn name(i: u8) -> Vec<u8> {
    match i {
        7 => b"too long".to_vec(),
        i => vec![b'f', i],
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..8u8, proptest::collection::vec(any::<u8>(), 0..8), 1..4u64)
            .prop_map(|(n, value, at)| Op::Set(n, value, at)),
        2 => (0..8u8).prop_map(Op::Remove),
        1 => (1..4u64).prop_map(Op::Stamp),
    ]
}

proptest! {
    /// The hash reads as a plain map would, whatever its form, across the
    /// conversion at either threshold; it is packed exactly while nothing
    /// held or written so far outgrew them.
    #[test]
    fn agrees_with_a_map(ops in proptest::collection::vec(op(), 0..40)) {
        let mut h = HashValue::new();
        let mut model: BTreeMap<Vec<u8>, (Vec<u8>, Version)> = BTreeMap::new();
        let mut outgrown = false;
        for op in ops {
            match op {
                Op::Set(n, value, at) => {
                    let n = name(n);
                    outgrown |= n.len() > LIMITS.max_value
                        || value.len() > LIMITS.max_value
                        || (!model.contains_key(&n) && model.len() == LIMITS.max_entries);
                    let new = model.insert(n.clone(), (value.clone(), v(at))).is_none();
                    prop_assert_eq!(set(&mut h, &n, &value, at), new);
                }
                Op::Remove(n) => {
                    let n = name(n);
                    prop_assert_eq!(h.remove(&n), model.remove(&n).is_some());
                }
                Op::Stamp(at) => {
                    h.stamp(v(at));
                    model.values_mut().for_each(|f| f.1 = v(at));
                }
            }
            prop_assert_eq!(h.is_packed(), !outgrown);
            prop_assert_eq!(h.len(), model.len());
            let payload: usize = model.iter().map(|(n, f)| n.len() + f.0.len()).sum();
            prop_assert_eq!(h.payload_len(), payload);
            let held: BTreeMap<_, _> =
                h.iter().map(|(n, f)| (n.to_vec(), (f.value.to_vec(), f.version))).collect();
            prop_assert_eq!(&held, &model);
            for (n, f) in &model {
                prop_assert_eq!(h.get(n), Some(FieldRef { value: &f.0, version: f.1 }));
            }
            prop_assert!(h.get(b"absent").is_none());
            // One version shared: written once.
            if let Some(block) = h.packed_bytes() {
                let shared = model.values().all(|f| model.values().next().map(|g| g.1) == Some(f.1));
                let lengths = 2 * model.len();
                let versions = match (model.len(), shared) {
                    (0, _) => 0,
                    (_, true) => 10,
                    (n, false) => 10 * n,
                };
                let mode = usize::from(!model.is_empty());
                prop_assert_eq!(block, mode + versions + lengths + payload);
            }
            // A table rebuilt from the model is equal to it.
            let mut rebuilt = HashValue::new();
            for (n, f) in &model {
                rebuilt.set_within(&b(n), b(&f.0), f.1, HashLimits { max_entries: 0, max_value: 0 });
            }
            prop_assert_eq!(&rebuilt, &h);
        }
    }
}

#[test]
fn a_hash_value_is_inline_in_a_value_no_larger_than_a_string() {
    use std::mem::size_of;
    // A Value is a string's Bytes and a tag: a hash inline takes no more.
    assert!(
        size_of::<HashValue>() <= size_of::<Bytes>(),
        "{}",
        size_of::<HashValue>()
    );
    assert_eq!(size_of::<super::super::Value>(), size_of::<Bytes>() + 8);
}
