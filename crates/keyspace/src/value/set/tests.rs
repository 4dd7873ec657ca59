use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

const LIMITS: SetLimits = SetLimits {
    max_entries: 4,
    max_value: 6,
};

fn v(hlc: u64) -> Version {
    Version { hlc, site: 2 }
}

fn add(s: &mut SetValue, member: &[u8], at: u64) -> bool {
    s.add_within(member, v(at), LIMITS)
}

fn held(s: &SetValue) -> BTreeMap<Vec<u8>, Version> {
    s.iter().map(|(m, v)| (m.to_vec(), v)).collect()
}

#[test]
fn packed_until_more_members_than_the_entries_limit() {
    let mut s = SetValue::new();
    assert!(s.is_packed());
    assert_eq!(s.packed_bytes(), Some(0));
    for i in 0..4u8 {
        assert!(add(&mut s, &[b'm', i], 1));
    }
    assert!(s.is_packed());
    // Mode byte, one shared version, four members of 1 + 2 bytes: no value
    // lengths.
    assert_eq!(s.packed_bytes(), Some(1 + 10 + 4 * 3));
    assert_eq!(s.capacity(), 0);
    // Adding a held member of a full packed set keeps it packed.
    assert!(!add(&mut s, &[b'm', 0], 2));
    assert!(s.is_packed());
    assert_eq!(s.version_of(&[b'm', 0]), Some(v(2)));
    assert!(add(&mut s, b"fifth", 1));
    assert!(!s.is_packed());
    assert_eq!(s.packed_bytes(), None);
    assert!(s.capacity() >= 5);
    assert_eq!((s.len(), s.payload_len()), (5, 4 * 2 + 5));
    assert_eq!(s.version_of(&[b'm', 0]), Some(v(2)));
    // It stays a table when it shrinks back (as in Redis).
    assert!(s.remove(b"fifth"));
    assert!(!s.is_packed());
    assert_eq!(s.payload_len(), 8);
}

#[test]
fn packed_until_a_member_longer_than_the_value_limit() {
    let mut s = SetValue::new();
    assert!(add(&mut s, b"sixsix", 1));
    assert!(s.is_packed());
    assert!(add(&mut s, b"seven!!", 1));
    assert!(!s.is_packed());
    assert!(s.contains(b"sixsix") && s.contains(b"seven!!"));
}

#[test]
fn an_add_keeps_the_newer_version_in_either_form() {
    for limits in [
        LIMITS,
        SetLimits {
            max_entries: 0,
            max_value: 0,
        },
    ] {
        let mut s = SetValue::new();
        assert!(s.add_within(b"a", v(5), limits));
        assert!(!s.add_within(b"a", v(3), limits));
        assert_eq!(s.version_of(b"a"), Some(v(5)));
        assert!(!s.add_within(b"a", v(7), limits));
        assert_eq!(s.version_of(b"a"), Some(v(7)));
        assert_eq!(s.version_of(b"b"), None);
    }
}

#[test]
fn iter_index_stamp_and_equality_read_both_forms_alike() {
    let mut packed = SetValue::new();
    let mut table = SetValue::new();
    let none = SetLimits {
        max_entries: 0,
        max_value: 0,
    };
    for (m, at) in [(&b"a"[..], 1), (b"bb", 2), (b"12", 1)] {
        packed.add_within(m, v(at), LIMITS);
        table.add_within(m, v(at), none);
    }
    assert!(packed.is_packed() && !table.is_packed());
    assert_eq!(packed, table);
    assert_eq!(held(&packed), held(&table));
    let by_index: BTreeMap<_, _> = (0..3)
        .map(|i| packed.get_index(i).map(|(m, v)| (m.to_vec(), v)).unwrap())
        .collect();
    assert_eq!(by_index, held(&table));
    assert!(packed.get_index(3).is_none() && table.get_index(3).is_none());
    assert_eq!(packed.longest(), 2);
    assert!(!packed.all_integers());
    packed.remove(b"a");
    table.remove(b"a");
    assert!(!packed.all_integers() && !table.all_integers());
    packed.remove(b"bb");
    assert!(packed.all_integers());
    packed.add_within(b"bb", v(2), LIMITS);
    assert_eq!(packed, table);
    packed.stamp(v(9));
    assert_ne!(packed, table);
    table.stamp(v(9));
    assert_eq!(packed, table);
    assert!(packed.iter().all(|(_, at)| at == v(9)));
    // Emptied, a packed set holds no block.
    packed.remove(b"bb");
    packed.remove(b"12");
    assert!(packed.is_empty());
    assert_eq!(packed.packed_bytes(), Some(0));
}

#[test]
fn a_set_value_is_inline_in_a_value_no_larger_than_a_string() {
    use std::mem::size_of;
    assert!(
        size_of::<SetValue>() <= size_of::<bytes::Bytes>(),
        "{}",
        size_of::<SetValue>()
    );
    assert_eq!(
        size_of::<super::super::Value>(),
        size_of::<bytes::Bytes>() + 8
    );
}

#[derive(Clone, Debug)]
enum Op {
    Add(u8, u64),
    Remove(u8),
    Stamp(u64),
}

/// Members the ops pick among: short ones, and one past the value limit.
fn member(i: u8) -> Vec<u8> {
    match i {
        7 => b"too long".to_vec(),
        i => vec![b'm', i],
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..8u8, 1..4u64).prop_map(|(m, at)| Op::Add(m, at)),
        3 => (0..8u8).prop_map(Op::Remove),
        1 => (1..4u64).prop_map(Op::Stamp),
    ]
}

proptest! {
    /// The set reads as a plain map of versions would, whatever its form,
    /// across the conversion at either threshold; it is packed exactly
    /// while nothing held or added so far outgrew them.
    #[test]
    fn agrees_with_a_map(ops in proptest::collection::vec(op(), 0..40)) {
        let mut s = SetValue::new();
        let mut model: BTreeMap<Vec<u8>, Version> = BTreeMap::new();
        let mut outgrown = false;
        for op in ops {
            match op {
                Op::Add(m, at) => {
                    let m = member(m);
                    let new = !model.contains_key(&m);
                    outgrown |= new
                        && (m.len() > LIMITS.max_value || model.len() == LIMITS.max_entries);
                    let kept = model.entry(m.clone()).or_insert(v(at));
                    *kept = (*kept).max(v(at));
                    prop_assert_eq!(add(&mut s, &m, at), new);
                }
                Op::Remove(m) => {
                    let m = member(m);
                    prop_assert_eq!(s.remove(&m), model.remove(&m).is_some());
                }
                Op::Stamp(at) => {
                    s.stamp(v(at));
                    model.values_mut().for_each(|x| *x = v(at));
                }
            }
            prop_assert_eq!(s.is_packed(), !outgrown);
            prop_assert_eq!(s.len(), model.len());
            let payload: usize = model.keys().map(Vec::len).sum();
            prop_assert_eq!(s.payload_len(), payload);
            prop_assert_eq!(&held(&s), &model);
            let by_index: BTreeMap<_, _> = (0..s.len())
                .filter_map(|i| s.get_index(i).map(|(m, v)| (m.to_vec(), v)))
                .collect();
            prop_assert_eq!(&by_index, &model);
            for (m, at) in &model {
                prop_assert_eq!(s.version_of(m), Some(*at));
                prop_assert!(s.contains(m));
            }
            prop_assert!(s.version_of(b"absent").is_none());
            // One version shared: written once; no value lengths.
            if let Some(block) = s.packed_bytes() {
                let first = model.values().next();
                let shared = model.values().all(|x| Some(x) == first);
                let versions = match (model.len(), shared) {
                    (0, _) => 0,
                    (_, true) => 10,
                    (n, false) => 10 * n,
                };
                let mode = usize::from(!model.is_empty());
                prop_assert_eq!(block, mode + versions + model.len() + payload);
            }
            // A table rebuilt from the model is equal to it.
            let mut rebuilt = SetValue::new();
            for (m, at) in &model {
                rebuilt.add_within(m, *at, SetLimits { max_entries: 0, max_value: 0 });
            }
            prop_assert!(!rebuilt.is_packed() || model.is_empty());
            prop_assert_eq!(&rebuilt, &s);
        }
    }
}
