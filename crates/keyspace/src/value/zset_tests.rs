//! Tests of the sorted set in its two forms against a model.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn v(n: u64) -> Version {
    Version { hlc: n, site: 1 }
}

#[derive(Clone, Debug)]
enum Op {
    Add(u8, i8),
    Rem(u8),
    Incr(u8, i8),
    /// A member too long for the small form.
    Long(i8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..160, any::<i8>()).prop_map(|(m, s)| Op::Add(m, s)),
        3 => (0u8..160).prop_map(Op::Rem),
        2 => (0u8..160, any::<i8>()).prop_map(|(m, s)| Op::Incr(m, s)),
        1 => any::<i8>().prop_map(Op::Long),
    ]
}

fn name(m: u8) -> Vec<u8> {
    format!("m{m}").into_bytes()
}

/// The set against its model: members, scores, versions, ranks,
/// and score ranges.
fn agrees(z: &ZSetValue, model: &BTreeMap<Vec<u8>, (f64, Version)>) -> Result<(), TestCaseError> {
    prop_assert_eq!(z.len(), model.len());
    for (m, (s, ver)) in model {
        prop_assert_eq!(
            z.get(m),
            Some(Member {
                score: *s,
                version: *ver
            })
        );
    }
    let mut sorted: Vec<(f64, &[u8])> = model.iter().map(|(m, (s, _))| (*s, &m[..])).collect();
    sorted.sort_by(|a, b| zset_pack::cmp(*a, *b));
    for (i, (s, m)) in sorted.iter().enumerate() {
        prop_assert_eq!(z.by_rank(i), Some((*m, *s)));
        prop_assert_eq!(z.rank(m), Some(i));
    }
    prop_assert_eq!(z.by_rank(sorted.len()), None);
    let swapped: Vec<(&[u8], f64)> = sorted.iter().map(|(s, m)| (*m, *s)).collect();
    prop_assert_eq!(&z.range(0, usize::MAX).collect::<Vec<_>>(), &swapped);
    let (a, b) = (sorted.len() / 3, sorted.len() * 2 / 3 + 1);
    prop_assert_eq!(
        z.range(a, b).collect::<Vec<_>>(),
        &swapped[a..b.min(sorted.len())]
    );
    for s in [-200.5, -128.0, -3.0, 0.0, 1.5, 64.0, 127.0, 300.0] {
        let below = sorted.iter().filter(|(x, _)| *x < s).count();
        let upto = sorted.iter().filter(|(x, _)| *x <= s).count();
        prop_assert_eq!(z.count_below(s, false), below);
        prop_assert_eq!(z.count_below(s, true), upto);
    }
    let payload: usize = model.keys().map(|m| m.len() + 8).sum();
    prop_assert_eq!(z.payload_len(), payload);
    let mut seen: Vec<&[u8]> = z.iter().map(|(m, _)| m).collect();
    seen.sort();
    prop_assert_eq!(seen, model.keys().map(|m| &m[..]).collect::<Vec<_>>());
    Ok(())
}

proptest! {
    /// Random ZADD / ZREM / ZINCRBY-like writes (some at older
    /// versions, some of long members) give the same members, scores,
    /// versions, ranks and ranges as a model, in the small form and
    /// after it moves to the large one; equal sets compare equal
    /// whatever their forms.
    #[test]
    fn writes_agree_with_a_model(ops in proptest::collection::vec((op(), 0u64..4), 0..400)) {
        let mut z = ZSetValue::new();
        let mut model: BTreeMap<Vec<u8>, (f64, Version)> = BTreeMap::new();
        let mut was_large = false;
        for (i, (op, older)) in ops.into_iter().enumerate() {
            // Versions mostly rise; some writes come late, older.
            let ver = v((i as u64 + 1) * 10 - older * 3);
            match op {
                Op::Add(m, s) => {
                    let m = name(m);
                    let new = !model.contains_key(&m);
                    prop_assert_eq!(z.insert(&m, s as f64, ver), new);
                    let e = model.entry(m).or_insert((s as f64, ver));
                    *e = (s as f64, e.1.max(ver));
                }
                Op::Rem(m) => {
                    let m = name(m);
                    prop_assert_eq!(z.remove(&m), model.remove(&m).is_some());
                }
                Op::Incr(m, by) => {
                    let m = name(m);
                    let s = z.score(&m).unwrap_or(0.0) + by as f64;
                    z.insert(&m, s, ver);
                    let e = model.entry(m).or_insert((s, ver));
                    *e = (s, e.1.max(ver));
                }
                Op::Long(s) => {
                    let m = vec![b'L'; 65 + (s as u8 as usize % 3)];
                    z.insert(&m, s as f64, ver);
                    let e = model.entry(m).or_insert((s as f64, ver));
                    *e = (s as f64, e.1.max(ver));
                }
            }
            prop_assert!(!(was_large && z.is_small()), "never back to small");
            was_large |= !z.is_small();
            if z.is_small() {
                prop_assert!(z.len() <= 128 && z.longest() <= 64);
            }
        }
        agrees(&z, &model)?;
        if z.len() > 128 || z.longest() > 64 {
            prop_assert!(!z.is_small());
        }
        // The same members written into a fresh set (small when they
        // fit) compare equal.
        let mut copy = ZSetValue::new();
        for (m, (s, ver)) in &model {
            copy.insert(m, *s, *ver);
        }
        prop_assert!(copy == z);
        agrees(&copy, &model)?;
        let stamp = v(1 << 40);
        z.stamp(stamp);
        prop_assert!(z.iter().all(|(_, x)| x.version == stamp));
    }
}

#[test]
fn small_sets_are_one_buffer_until_a_limit() {
    let mut z = ZSetValue::new();
    for i in 0..128 {
        assert!(z.insert(format!("m{i:03}").as_bytes(), i as f64, v(1)));
    }
    assert!(z.is_small());
    assert_eq!(z.capacity(), 0);
    // Per member: its length and bytes, and its score (one byte up to
    // 31, two above); one version held once.
    assert_eq!(z.packed_len(), Some(128 * (1 + 4) + 32 + 96 * 2));
    assert_eq!(z.rank(b"m100"), Some(100));
    assert_eq!(z.by_rank(5), Some((&b"m005"[..], 5.0)));
    // -0 replaces 0 (Redis prints it), and only the newer version stays.
    assert!(!z.insert(b"m000", -0.0, v(0)));
    assert_eq!(z.score(b"m000").map(f64::is_sign_negative), Some(true));
    assert_eq!(z.version_of(b"m000"), Some(v(1)));
    let before = z.clone();
    assert!(z.insert(b"m128", 128.0, v(2)));
    assert!(!z.is_small());
    assert!(before != z);
    assert!(z.remove(b"m128"));
    assert!(before == z, "equal whatever the form");
    assert!(!z.is_small(), "stays large, as in Redis");

    let mut long = ZSetValue::new();
    long.insert(b"a", 1.0, v(1));
    long.insert(&[b'x'; 65], 2.0, v(1));
    assert!(!long.is_small());
    assert_eq!(long.rank(b"a"), Some(0));
}

#[test]
fn counters_keep_their_member_version() {
    let mut z = ZSetValue::new();
    z.insert(b"a", 1.0, v(1));
    z.insert(b"b", 2.0, v(1));
    let mut c = ScoreCounter::from_plain(2.0, v(1));
    c.assign_at(7.0, v(9));
    z.set_counter(b"b", c);
    assert_eq!(
        z.get(b"b"),
        Some(Member {
            score: 7.0,
            version: v(9)
        })
    );
    assert_eq!(z.version_of(b"a"), Some(v(1)));
    assert_eq!(z.by_rank(1), Some((&b"b"[..], 7.0)));
}

#[test]
fn a_small_sorted_set_is_inline_in_the_value() {
    use std::mem::size_of;
    assert!(size_of::<ZSetValue>() <= 32);
    assert!(size_of::<super::super::Value>() <= 40);
    assert!(size_of::<super::super::Entry>() <= 64);
}
