//! Property: the partition log is a complete description of the keyspace.
//! Random command-like writes on one keyspace, then every logged change
//! applied through the mirror path to an empty keyspace, give the same state.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::change::DeltaOp;
use crate::clock::DebugClock;
use crate::value::{Entry, HashValue, Value};

fn keyspace(clock: Arc<DebugClock>) -> Keyspace {
    Keyspace::new(
        KeyspaceConfig {
            partitions: 7,
            site_id: 1,
            log_retain_bytes: usize::MAX / 2,
            ..Default::default()
        },
        clock,
    )
}

#[derive(Debug, Clone)]
enum Op {
    Set(u8, Vec<u8>, bool),
    SetSimilar(u8, usize, u8),
    Append(u8, Vec<u8>),
    SetRange(u8, u16, Vec<u8>),
    Incr(u8, i64),
    HSet(u8, Vec<(u8, Vec<u8>)>),
    HDel(u8, Vec<u8>),
    /// Fields `from..from + n` set to `len` bytes each / removed: enough
    /// to cross a small hash's limits (128 fields, 64-byte values) both
    /// ways, so both forms are logged and mirrored.
    HSetRange(u8, u8, u8, u8),
    HDelRange(u8, u8, u8),
    Expire(u8, u16),
    Persist(u8),
    Del(u8),
    Advance(u16),
    /// Eviction of a random key (volatile or not).
    Evict(bool),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..6;
    let val = proptest::collection::vec(any::<u8>(), 0..40);
    prop_oneof![
        (key.clone(), val.clone(), any::<bool>()).prop_map(|(k, v, ttl)| Op::Set(k, v, ttl)),
        (key.clone(), 0usize..400, any::<u8>()).prop_map(|(k, i, b)| Op::SetSimilar(k, i, b)),
        (key.clone(), val.clone()).prop_map(|(k, v)| Op::Append(k, v)),
        (key.clone(), 0u16..300, val.clone()).prop_map(|(k, o, v)| Op::SetRange(k, o, v)),
        (key.clone(), -5i64..5).prop_map(|(k, n)| Op::Incr(k, n)),
        (
            key.clone(),
            proptest::collection::vec((0u8..5, val.clone()), 1..4)
        )
            .prop_map(|(k, f)| Op::HSet(k, f)),
        (key.clone(), proptest::collection::vec(0u8..5, 1..3)).prop_map(|(k, f)| Op::HDel(k, f)),
        (key.clone(), any::<u8>(), 1u8..140, 0u8..80)
            .prop_map(|(k, from, n, len)| Op::HSetRange(k, from, n, len)),
        (key.clone(), any::<u8>(), 1u8..140).prop_map(|(k, from, n)| Op::HDelRange(k, from, n)),
        (key.clone(), 1u16..2000).prop_map(|(k, ms)| Op::Expire(k, ms)),
        key.clone().prop_map(Op::Persist),
        key.clone().prop_map(Op::Del),
        (0u16..1500).prop_map(Op::Advance),
        any::<bool>().prop_map(Op::Evict),
    ]
}

fn k(i: u8) -> Vec<u8> {
    format!("key{i}").into_bytes()
}

fn run(ks: &Keyspace, clock: &DebugClock, op: Op) {
    let key = match &op {
        Op::Advance(ms) => {
            clock.advance(*ms as u64);
            ks.expire_cycle(3);
            return;
        }
        Op::Evict(volatile) => {
            let policy = match volatile {
                true => Policy::VolatileLru,
                false => Policy::AllKeysRandom,
            };
            ks.evict_one(policy, 3);
            return;
        }
        Op::Set(k_, ..) | Op::SetSimilar(k_, ..) | Op::Append(k_, _) | Op::SetRange(k_, ..) => {
            k(*k_)
        }
        Op::Incr(k_, _) | Op::HSet(k_, _) | Op::HDel(k_, _) | Op::Expire(k_, _) => k(*k_),
        Op::HSetRange(k_, ..) | Op::HDelRange(k_, ..) => k(*k_),
        Op::Persist(k_) | Op::Del(k_) => k(*k_),
    };
    let mut txn = ks.txn([&key[..]], 0);
    let now = txn.now_ms();
    // Errors (wrong type, not an integer) are part of the workload: they
    // must leave no trace in the log.
    let _ = match op {
        Op::Set(_, v, ttl) => {
            let expire_at = if ttl { now + 1000 } else { 0 };
            txn.write(
                &key,
                Write::Set {
                    value: Value::str(Bytes::from(v)),
                    expire_at,
                },
            )
        }
        Op::SetSimilar(_, i, b) => {
            let mut v = txn
                .get(&key)
                .and_then(|e| e.str_bytes())
                .map(|b| b.to_vec())
                .unwrap_or_default();
            v.resize(v.len().max(300), b'x');
            let n = v.len();
            v[i % n] = b;
            let expire_at = txn.get(&key).map_or(0, |e| e.expire_at);
            txn.write(
                &key,
                Write::Set {
                    value: Value::str(Bytes::from(v)),
                    expire_at,
                },
            )
        }
        Op::Append(_, v) => {
            let offset = txn
                .get(&key)
                .and_then(|e| e.as_str())
                .map_or(0, |s| s.len()) as u32;
            txn.write(
                &key,
                Write::Str(DeltaOp::Splice {
                    offset,
                    remove: 0,
                    insert: Bytes::from(v),
                }),
            )
        }
        Op::SetRange(_, o, v) => {
            let len = txn
                .get(&key)
                .and_then(|e| e.as_str())
                .map_or(0, |s| s.len());
            let o = o as usize;
            let remove = v.len().min(len.saturating_sub(o)) as u32;
            txn.write(
                &key,
                Write::Str(DeltaOp::Splice {
                    offset: o as u32,
                    remove,
                    insert: Bytes::from(v),
                }),
            )
        }
        Op::Incr(_, n) => txn.write(&key, Write::Str(DeltaOp::IncrBy(n))),
        Op::HSet(_, fields) => txn.write(
            &key,
            Write::HashSet(
                fields
                    .into_iter()
                    .map(|(f, v)| (Bytes::from(vec![f]), Bytes::from(v)))
                    .collect(),
            ),
        ),
        Op::HDel(_, fields) => txn.write(
            &key,
            Write::HashDel(fields.into_iter().map(|f| Bytes::from(vec![f])).collect()),
        ),
        Op::HSetRange(_, from, n, len) => txn.write(
            &key,
            Write::HashSet(
                (0..n)
                    .map(|i| {
                        let f = from.wrapping_add(i);
                        (Bytes::from(vec![f]), Bytes::from(vec![f; len as usize]))
                    })
                    .collect(),
            ),
        ),
        Op::HDelRange(_, from, n) => txn.write(
            &key,
            Write::HashDel(
                (0..n)
                    .map(|i| Bytes::from(vec![from.wrapping_add(i)]))
                    .collect(),
            ),
        ),
        Op::Expire(_, ms) => txn.write(&key, Write::SetExpiry(now + ms as u64)),
        Op::Persist(_) => txn.write(&key, Write::SetExpiry(0)),
        Op::Del(_) => txn.write(&key, Write::Delete),
        Op::Advance(_) | Op::Evict(_) => unreachable!(),
    };
}

fn state(ks: &Keyspace) -> BTreeMap<Bytes, Entry> {
    let mut out = BTreeMap::new();
    for p in 0..ks.partitions() as usize {
        ks.with_partition(p, |part, _| {
            for (k, e) in part.iter() {
                out.insert(k.to_bytes(), e.clone());
            }
        });
    }
    out
}

fn logged(ks: &Keyspace) -> Vec<Change> {
    let mut out = Vec::new();
    for p in 0..ks.partitions() as usize {
        ks.with_partition(p, |part, _| {
            assert_eq!(
                part.log.first_seq(),
                1,
                "nothing may be trimmed in this test"
            );
            out.extend(part.log.changes_from(1).unwrap().map(|(_, c)| c));
        });
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn applying_the_log_to_an_empty_keyspace_reproduces_the_state(ops in proptest::collection::vec(op(), 1..80)) {
        let clock = Arc::new(DebugClock::default());
        let ks = keyspace(clock.clone());
        for op in ops {
            run(&ks, &clock, op);
        }
        let replica = keyspace(clock.clone());
        for change in logged(&ks) {
            replica.apply(change, 0).unwrap();
        }
        prop_assert_eq!(state(&replica), state(&ks));
        let summed: usize = (0..ks.partitions() as usize).map(|p| ks.with_partition(p, |part, _| part.log.allocated())).sum();
        prop_assert_eq!(ks.log_bytes(), summed, "the running total follows every log");
    }
}

#[test]
fn hset_of_two_small_fields_beside_a_big_payload_logs_a_small_delta() {
    let ks = keyspace(Arc::new(DebugClock::default()));
    let key = &b"obj"[..];
    let payload = Bytes::from(vec![7u8; 10_240]);
    ks.txn([key], 0)
        .write(
            key,
            Write::HashSet(vec![
                (Bytes::from_static(b"payload"), payload),
                (Bytes::from_static(b"id"), Bytes::from_static(b"1")),
                (Bytes::from_static(b"count"), Bytes::from_static(b"0")),
                (Bytes::from_static(b"timestamp"), Bytes::from_static(b"0")),
            ]),
        )
        .unwrap();
    let before = ks.stats().bytes(1);
    ks.txn([key], 0)
        .write(
            key,
            Write::HashSet(vec![
                (Bytes::from_static(b"count"), Bytes::from_static(b"1")),
                (
                    Bytes::from_static(b"timestamp"),
                    Bytes::from_static(b"1700000000123"),
                ),
            ]),
        )
        .unwrap();
    let size = ks.stats().bytes(1) - before;
    assert!(size < 100, "HSET count+timestamp logged {size} bytes");
    assert!(ks.stats().delta_bytes_saved() > 10_000);
}

#[test]
fn set_of_a_similar_big_string_logs_a_small_delta() {
    let ks = keyspace(Arc::new(DebugClock::default()));
    let key = &b"blob"[..];
    let old: Vec<u8> = (0..10_275u32).map(|i| (i % 251) as u8).collect();
    let mut new = old.clone();
    new[10_240..10_252].copy_from_slice(b"twelve bytes");
    ks.txn([key], 0)
        .write(
            key,
            Write::Set {
                value: Value::str(Bytes::from(old)),
                expire_at: 0,
            },
        )
        .unwrap();
    let before = ks.stats().bytes(1);
    ks.txn([key], 0)
        .write(
            key,
            Write::Set {
                value: Value::str(Bytes::from(new.clone())),
                expire_at: 0,
            },
        )
        .unwrap();
    let size = ks.stats().bytes(1) - before;
    assert!(size < 100, "SET logged a {size}-byte delta");
    assert_eq!(ks.stats().count(1), 1);
    let mut txn = ks.txn([key], 0);
    assert_eq!(
        txn.get(key).and_then(|e| e.as_str()).map(|b| b.to_vec()),
        Some(new)
    );
}

#[test]
fn expiry_is_a_logged_change_lazily_and_actively() {
    let clock = Arc::new(DebugClock::default());
    let ks = keyspace(clock.clone());
    let now = ks.now_ms();
    for key in [&b"lazy"[..], b"active"] {
        ks.txn([key], 0)
            .write(
                key,
                Write::Set {
                    value: Value::str(Bytes::from_static(b"v")),
                    expire_at: now + 100,
                },
            )
            .unwrap();
    }
    clock.advance(101);
    assert!(ks.txn([&b"lazy"[..]], 0).get(b"lazy").is_none());
    assert_eq!(ks.stats().count(3), 1);
    assert_eq!(ks.expire_cycle(100), 1);
    assert_eq!(ks.stats().count(3), 2);
    assert!(ks.is_empty());
    let _ = HashValue::new();
}

/// Live entries (expired ones not yet removed count as gone).
fn live_state(ks: &Keyspace) -> BTreeMap<Bytes, Entry> {
    let now = ks.now_ms();
    state(ks)
        .into_iter()
        .filter(|(_, e)| !e.is_expired(now))
        .collect()
}

/// Restores layers (oldest first) newest-first: a key is taken from the
/// newest layer that names it (as an entry or as deleted); a full layer
/// ends the walk. Returns the state and how many entries were applied.
fn restore_newest_first(
    layers: &[Vec<PartitionCopy>],
    now: u64,
) -> (BTreeMap<Bytes, Entry>, usize) {
    let mut out = BTreeMap::new();
    let mut applied = 0;
    for p in 0..layers[0].len() {
        let mut done = std::collections::HashSet::new();
        for layer in layers.iter().rev() {
            let copy = &layer[p];
            done.extend(copy.deleted.iter().cloned());
            for c in &copy.entries {
                if done.insert(c.key.clone()) {
                    let ChangeKind::Full { value, expire_at } = &c.kind else {
                        panic!("backups hold full values")
                    };
                    if *expire_at != 0 && *expire_at <= now {
                        continue;
                    }
                    out.insert(
                        c.key.clone(),
                        Entry::new(value.clone(), c.version, *expire_at),
                    );
                    applied += 1;
                }
            }
            if copy.full {
                break;
            }
        }
    }
    (out, applied)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]
    #[test]
    fn full_then_incremental_copies_restored_newest_first_give_the_last_state(
        rounds in proptest::collection::vec(proptest::collection::vec(op(), 0..30), 1..6),
        drop_anchor_at in proptest::option::of(0usize..6),
    ) {
        let clock = Arc::new(DebugClock::default());
        let ks = keyspace(clock.clone());
        let parts = ks.partitions() as usize;
        let mut layers: Vec<Vec<PartitionCopy>> = Vec::new();
        for (i, round) in rounds.into_iter().enumerate() {
            for op in round {
                run(&ks, &clock, op);
            }
            if drop_anchor_at == Some(i) {
                // e.g. a failover to a copy that was never anchored
                ks.with_partition_mut(0, |part| part.log.changed.drop_anchor());
            }
            let id = format!("b{i}");
            let layer: Vec<_> = (0..parts)
                .map(|p| {
                    let parent = layers.last().map(|l: &Vec<PartitionCopy>| (format!("b{}", i - 1), l[p].seq));
                    ks.backup_partition(p, &id, parent.as_ref().map(|(id, s)| (id.as_str(), *s)))
                })
                .collect();
            if i > 0 && drop_anchor_at != Some(i) {
                prop_assert!(layer.iter().all(|c| !c.full), "an anchored partition copies only its changes");
            }
            layers.push(layer);
            let (restored, applied) = restore_newest_first(&layers, ks.now_ms());
            let want = live_state(&ks);
            prop_assert_eq!(applied, want.len(), "each live key is applied once");
            prop_assert_eq!(restored, want);
        }
    }
}
