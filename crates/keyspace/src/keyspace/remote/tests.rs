//! Conflict resolution of changes from other sites, and tombstones: one test
//! per rule, then a property: two sites writing concurrently and shipping
//! their logs to each other, interleaved at random, end identical, and each
//! one's backup (fed its log) ends identical to it.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

use super::super::{KeyspaceConfig, ReplicationSink, Write};
use super::*;
use crate::clock::DebugClock;
use crate::value::{Field, HashValue};

fn config(site: u16) -> KeyspaceConfig {
    KeyspaceConfig {
        partitions: 7,
        site_id: site,
        log_retain_bytes: usize::MAX / 2,
        tombstone_bytes: 1 << 30,
        ..Default::default()
    }
}

fn keyspace(site: u16) -> Keyspace {
    Keyspace::new(config(site), Arc::new(DebugClock::default()))
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// A version of site 2 `d` ticks after (or before, when negative) the
/// keyspace's clock now.
fn remote_version(ks: &Keyspace, d: i64) -> Version {
    let now = ks.hlc().tick();
    Version {
        hlc: now.checked_add_signed(d).unwrap(),
        site: 2,
    }
}

fn full(key: &str, val: &str, v: Version) -> Change {
    Change {
        key: b(key),
        version: v,
        kind: ChangeKind::Full {
            value: Value::str(b(val)),
            expire_at: 0,
        },
    }
}

fn full_hash(key: &str, fields: &[(&str, &str, Version)], v: Version) -> Change {
    let mut h = HashValue::new();
    for (f, val, fv) in fields {
        h.set(b(f), b(val), *fv);
    }
    Change {
        key: b(key),
        version: v,
        kind: ChangeKind::Full {
            value: Value::Hash(h),
            expire_at: 0,
        },
    }
}

fn delta(key: &str, base: Version, op: DeltaOp, v: Version) -> Change {
    Change {
        key: b(key),
        version: v,
        kind: ChangeKind::Delta { base, op },
    }
}

fn hset(key: &str, fields: &[(&str, &str)], v: Version) -> Change {
    let fields = fields.iter().map(|(f, val)| (b(f), b(val))).collect();
    delta(key, Version::ZERO, DeltaOp::HashSet { fields }, v)
}

fn hdel(key: &str, fields: &[&str], v: Version) -> Change {
    delta(
        key,
        Version::ZERO,
        DeltaOp::HashDel {
            fields: fields.iter().map(|f| b(f)).collect(),
        },
        v,
    )
}

fn del(key: &str, v: Version) -> Change {
    Change {
        key: b(key),
        version: v,
        kind: ChangeKind::Delete,
    }
}

fn write(ks: &Keyspace, key: &str, w: Write) -> Option<Version> {
    ks.txn([key.as_bytes()], 0)
        .write(key.as_bytes(), w)
        .unwrap();
    entry(ks, key).map(|e| e.version)
}

fn local_set(ks: &Keyspace, key: &str, val: &str) -> Version {
    write(
        ks,
        key,
        Write::Set {
            value: Value::str(b(val)),
            expire_at: 0,
        },
    )
    .unwrap()
}

fn local_hset(ks: &Keyspace, key: &str, fields: &[(&str, &str)]) -> Version {
    write(
        ks,
        key,
        Write::HashSet(fields.iter().map(|(f, v)| (b(f), b(v))).collect()),
    )
    .unwrap()
}

fn entry(ks: &Keyspace, key: &str) -> Option<Entry> {
    ks.with_partition(ks.partition_of(key.as_bytes()), |p, _| {
        p.get(key.as_bytes()).cloned()
    })
}

fn string(ks: &Keyspace, key: &str) -> Option<Bytes> {
    entry(ks, key).and_then(|e| e.str_bytes())
}

fn field(ks: &Keyspace, key: &str, f: &str) -> Option<Field> {
    entry(ks, key).and_then(|e| {
        e.as_hash()
            .and_then(|h| h.get(f.as_bytes()).map(|f| f.to_field()))
    })
}

fn floor(ks: &Keyspace, key: &str) -> Option<Version> {
    ks.with_partition(ks.partition_of(key.as_bytes()), |p, _| {
        p.tombstones.key(key.as_bytes())
    })
}

fn field_tomb(ks: &Keyspace, key: &str, f: &str) -> Option<Version> {
    ks.with_partition(ks.partition_of(key.as_bytes()), |p, _| {
        p.tombstones.field(key.as_bytes(), f.as_bytes())
    })
}

/// Every change logged for `key`, oldest first.
fn log_of(ks: &Keyspace, key: &str) -> Vec<Change> {
    ks.with_partition(ks.partition_of(key.as_bytes()), |p, _| {
        p.log
            .changes_from(p.log.first_seq())
            .unwrap()
            .map(|(_, c)| c)
            .filter(|c| c.key == key.as_bytes())
            .collect()
    })
}

fn apply(ks: &Keyspace, c: &Change) -> RemoteOutcome {
    ks.apply_remote(c.clone(), 0).unwrap()
}

#[test]
fn a_delete_beats_an_older_write_that_arrives_later() {
    let ks = keyspace(1);
    let old = remote_version(&ks, -1000);
    let d = remote_version(&ks, 0);
    assert_eq!(apply(&ks, &del("k", d)), Applied);
    assert_eq!(
        floor(&ks, "k"),
        Some(d),
        "a delete of a missing key still leaves its tombstone"
    );
    assert_eq!(
        log_of(&ks, "k"),
        vec![del("k", d)],
        "and is logged, so backups get the tombstone"
    );
    assert_eq!(apply(&ks, &full("k", "old", old)), ConflictLost);
    assert_eq!(apply(&ks, &hset("k", &[("f", "old")], old)), ConflictLost);
    assert_eq!(
        apply(&ks, &delta("k", Version::ZERO, DeltaOp::IncrBy(1), old)),
        ConflictLost
    );
    assert_eq!(apply(&ks, &del("k", d)), Duplicate);
    assert_eq!(entry(&ks, "k"), None);
    assert_eq!(log_of(&ks, "k").len(), 1);
}

/// Once every other site has passed a delete its tombstone goes, and
/// what is at or below the settled point and not held is known removed:
/// a late full value of the key, or of a hash with a field removed here,
/// does not bring them back; what is newer still applies.
#[test]
fn settled_tombstones_go_and_late_full_values_do_not_resurrect() {
    let ks = keyspace(1);
    let old = remote_version(&ks, -1000);
    let d = remote_version(&ks, 0);
    assert_eq!(
        apply(
            &ks,
            &full_hash("h", &[("a", "1", old), ("b", "1", old)], old)
        ),
        Applied
    );
    assert_eq!(apply(&ks, &del("k", d)), Applied);
    assert_eq!(apply(&ks, &hdel("h", &["b"], d)), Applied);
    for p in 0..ks.partitions() as usize {
        ks.settle_tombstones(p, d.hlc);
    }
    assert!(tombstones(&ks).iter().all(Vec::is_empty), "settled: gone");
    assert_eq!(apply(&ks, &full("k", "old", old)), ConflictLost);
    assert_eq!(entry(&ks, "k"), None);
    assert_eq!(
        apply(
            &ks,
            &full_hash("h", &[("a", "1", old), ("b", "1", old)], old)
        ),
        ConflictLost
    );
    let newer = remote_version(&ks, 10);
    apply(
        &ks,
        &full_hash(
            "h",
            &[("a", "1", old), ("b", "1", old), ("c", "2", newer)],
            newer,
        ),
    );
    let fields: Vec<Bytes> = ks.with_partition(ks.partition_of(b"h"), |p, _| {
        let Some(Value::Hash(h)) = p.get(b"h").map(|e| e.value.clone()) else {
            return Vec::new();
        };
        let mut names: Vec<Bytes> = h.iter().map(|(n, _)| Bytes::copy_from_slice(n)).collect();
        names.sort();
        names
    });
    assert_eq!(
        fields,
        vec![b("a"), b("c")],
        "the removed field stays removed"
    );
    assert_eq!(apply(&ks, &full("k", "new", newer)), Applied);
}

#[test]
fn a_newer_write_beats_a_delete_and_drops_its_tombstone() {
    let ks = keyspace(1);
    // Local write newer than a remote delete arriving later: the delete loses.
    let mine = local_set(&ks, "a", "mine");
    let older = Version {
        hlc: mine.hlc - 5,
        site: 2,
    };
    assert_eq!(apply(&ks, &del("a", older)), ConflictLost);
    assert_eq!(string(&ks, "a"), Some(b("mine")));
    assert_eq!(apply(&ks, &del("a", mine)), Duplicate);
    // A remote write newer than a delete wins, and the string's version now
    // holds older writes back: the tombstone goes.
    let d = remote_version(&ks, 0);
    let newer = remote_version(&ks, 10);
    assert_eq!(apply(&ks, &del("b", d)), Applied);
    assert_eq!(apply(&ks, &full("b", "new", newer)), Applied);
    assert_eq!(string(&ks, "b"), Some(b("new")));
    assert_eq!(floor(&ks, "b"), None);
    // A local DEL then SET behaves the same.
    ks.txn([&b"a"[..]], 0).write(b"a", Write::Delete).unwrap();
    assert!(floor(&ks, "a").is_some());
    local_set(&ks, "a", "again");
    assert_eq!(floor(&ks, "a"), None);
}

#[test]
fn a_delete_newer_than_a_string_removes_it() {
    let ks = keyspace(1);
    let mine = local_set(&ks, "k", "v");
    let d = remote_version(&ks, 0);
    assert!(d > mine);
    assert_eq!(apply(&ks, &del("k", d)), Applied);
    assert_eq!(entry(&ks, "k"), None);
    assert_eq!(floor(&ks, "k"), Some(d));
    let expire = Change {
        key: b("k"),
        version: d,
        kind: ChangeKind::Expire,
    };
    assert_eq!(apply(&ks, &expire), Duplicate);
}

#[test]
fn concurrent_hsets_of_different_fields_from_two_sites_both_survive() {
    let a = keyspace(1);
    let bb = keyspace(2);
    local_hset(&a, "h", &[("x", "from a")]);
    local_hset(&bb, "h", &[("y", "from b")]);
    let from_a = log_of(&a, "h");
    let from_b = log_of(&bb, "h");
    assert_eq!(apply(&bb, &from_a[0]), Applied);
    assert_eq!(apply(&a, &from_b[0]), Applied);
    for ks in [&a, &bb] {
        assert_eq!(field(ks, "h", "x").unwrap().value, b("from a"));
        assert_eq!(field(ks, "h", "y").unwrap().value, b("from b"));
    }
    assert_eq!(
        entry(&a, "h"),
        entry(&bb, "h"),
        "same fields, field versions and key version"
    );
    // The same field written at both: the newer write wins at both.
    local_hset(&a, "h", &[("z", "a")]);
    local_hset(&bb, "h", &[("z", "b")]);
    let (za, zb) = (
        log_of(&a, "h").pop().unwrap(),
        log_of(&bb, "h").pop().unwrap(),
    );
    let outcomes = (apply(&bb, &za), apply(&a, &zb));
    let winner = if za.version > zb.version { "a" } else { "b" };
    assert!(matches!(
        outcomes,
        (Applied, ConflictLost) | (ConflictLost, Applied)
    ));
    assert_eq!(field(&a, "h", "z").unwrap().value, b(winner));
    assert_eq!(entry(&a, "h"), entry(&bb, "h"));
}

#[test]
fn field_versions_after_a_merge() {
    let ks = keyspace(1);
    let early = local_hset(&ks, "h", &[("old", "1"), ("both", "1")]);
    let v = remote_version(&ks, 0);
    let late = local_hset(&ks, "h", &[("new", "1")]);
    assert!(early < v && v < late);
    let change = hset("h", &[("old", "2"), ("new", "2"), ("fresh", "2")], v);
    assert_eq!(apply(&ks, &change), Applied);
    assert_eq!(
        field(&ks, "h", "old"),
        Some(Field {
            value: b("2"),
            version: v
        })
    );
    assert_eq!(
        field(&ks, "h", "fresh"),
        Some(Field {
            value: b("2"),
            version: v
        })
    );
    assert_eq!(
        field(&ks, "h", "new"),
        Some(Field {
            value: b("1"),
            version: late
        })
    );
    assert_eq!(
        field(&ks, "h", "both"),
        Some(Field {
            value: b("1"),
            version: early
        })
    );
    assert_eq!(
        entry(&ks, "h").unwrap().version,
        late,
        "the key version never moves back"
    );
    // Only the winning fields are logged.
    assert_eq!(
        log_of(&ks, "h").pop().unwrap(),
        hset("h", &[("old", "2"), ("fresh", "2")], v)
    );
    assert_eq!(
        apply(&ks, &change),
        Duplicate,
        "fields at v: this change was applied"
    );
    let older = Version {
        hlc: v.hlc - 1,
        site: 2,
    };
    assert_eq!(
        apply(&ks, &hset("h", &[("old", "3"), ("new", "3")], older)),
        ConflictLost
    );
}

#[test]
fn hdel_removes_only_older_fields_and_leaves_field_tombstones() {
    let ks = keyspace(1);
    local_hset(&ks, "h", &[("a", "1")]);
    let v = remote_version(&ks, 0);
    let late = local_hset(&ks, "h", &[("b", "1")]);
    let change = hdel("h", &["a", "b", "never"], v);
    assert_eq!(apply(&ks, &change), Applied);
    assert_eq!(field(&ks, "h", "a"), None);
    assert_eq!(field(&ks, "h", "b").unwrap().version, late);
    assert_eq!(
        log_of(&ks, "h").pop().unwrap(),
        hdel("h", &["a", "never"], v)
    );
    assert_eq!(field_tomb(&ks, "h", "never"), Some(v));
    assert_eq!(
        apply(&ks, &change),
        Duplicate,
        "a and never were removed at v, b is newer"
    );
    assert_eq!(apply(&ks, &hdel("h", &["b"], v)), ConflictLost);
    assert_eq!(apply(&ks, &hdel("h", &["a"], v)), Duplicate);
    // A write of a removed field older than the HDEL loses, a newer one wins.
    let older = Version {
        hlc: v.hlc - 1,
        site: 2,
    };
    assert_eq!(
        apply(&ks, &hset("h", &[("never", "x")], older)),
        ConflictLost
    );
    let newer = remote_version(&ks, 0);
    assert_eq!(apply(&ks, &hset("h", &[("never", "x")], newer)), Applied);
    // HDEL of the last field removes the key; its tombstones stay.
    let v2 = remote_version(&ks, 0);
    assert_eq!(apply(&ks, &hdel("h", &["b", "never"], v2)), Applied);
    assert_eq!(entry(&ks, "h"), None);
    assert_eq!(
        apply(&ks, &hset("h", &[("b", "late")], newer)),
        ConflictLost
    );
}

#[test]
fn a_delete_older_than_a_hash_removes_only_the_older_fields() {
    let ks = keyspace(1);
    let early = local_hset(&ks, "h", &[("a", "1"), ("b", "1")]);
    let d = remote_version(&ks, 0);
    let late = local_hset(&ks, "h", &[("b", "2"), ("c", "2")]);
    assert_eq!(apply(&ks, &del("h", d)), Applied);
    let e = entry(&ks, "h").unwrap();
    assert_eq!(e.as_hash().unwrap().len(), 2);
    assert_eq!(field(&ks, "h", "a"), None);
    assert_eq!(e.version, late);
    assert_eq!(
        floor(&ks, "h"),
        Some(d),
        "the floor stays while the hash lives"
    );
    assert_eq!(log_of(&ks, "h").pop().unwrap(), del("h", d));
    // Older field writes arriving later lose to the floor; newer ones win.
    let between = Version {
        hlc: early.hlc,
        site: 2,
    };
    assert!(early < between && between < d);
    assert_eq!(apply(&ks, &hset("h", &[("a", "x")], between)), ConflictLost);
    assert_eq!(
        apply(&ks, &hset("h", &[("a", "y")], remote_version(&ks, 0))),
        Applied
    );
    assert_eq!(apply(&ks, &del("h", d)), Duplicate);
    // Nothing older to remove: lost (the floor is still recorded).
    let ks = keyspace(1);
    let d = remote_version(&ks, 0);
    local_hset(&ks, "h", &[("a", "1")]);
    assert_eq!(apply(&ks, &del("h", d)), ConflictLost);
    assert_eq!(floor(&ks, "h"), Some(d));
}

#[test]
fn a_string_delta_on_a_wrong_base_needs_the_full_value_which_then_applies() {
    // A local SET at d older than every write at a: done first, since the
    // test clocks read the system time and never go back.
    let d = keyspace(3);
    local_set(&d, "s", "other");
    let a = keyspace(1);
    let bb = keyspace(2);
    let v1 = local_set(&a, "s", "hello");
    let first = log_of(&a, "s");
    a.txn([&b"s"[..]], 0)
        .write(
            b"s",
            Write::Str(DeltaOp::Splice {
                offset: 5,
                remove: 0,
                insert: b(" world"),
            }),
        )
        .unwrap();
    let append = log_of(&a, "s").pop().unwrap();
    assert!(matches!(append.kind, ChangeKind::Delta { base, .. } if base == v1));
    // b never got the first SET: the APPEND cannot apply.
    assert_eq!(apply(&bb, &append), NeedFull);
    assert_eq!(entry(&bb, "s"), None);
    for c in a.full_changes(b"s") {
        assert_eq!(apply(&bb, &c), Applied);
    }
    assert_eq!(entry(&bb, "s"), entry(&a, "s"));
    // The first SET, late, and the APPEND again change nothing.
    assert_eq!(apply(&bb, &first[0]), ConflictLost);
    assert_eq!(apply(&bb, &append), Duplicate);
    // On the right base it applies; on another version of the string, full value.
    let c = keyspace(3);
    assert_eq!(apply(&c, &first[0]), Applied);
    assert_eq!(apply(&c, &append), Applied);
    assert_eq!(string(&c, "s"), Some(b("hello world")));
    assert_eq!(
        apply(&d, &append),
        NeedFull,
        "a local SET older than the APPEND"
    );
    let e = keyspace(3);
    let newer = e.hlc().tick() + (1 << 40);
    e.hlc().observe(newer);
    local_set(&e, "s", "newer");
    assert_eq!(apply(&e, &append), ConflictLost);
}

#[test]
fn setbit_raises_merge_by_or_and_a_delta_on_raised_bytes_needs_the_full_value() {
    let a = keyspace(1);
    let bb = keyspace(2);
    let v1 = local_set(&a, "s", "\x00\x00");
    for c in log_of(&a, "s") {
        assert_eq!(apply(&bb, &c), Applied);
    }
    // SETBIT 1 at both sites on the same assignment: raises of v1.
    for (ks, offset) in [(&a, 0u32), (&bb, 17)] {
        let mut txn = ks.txn([&b"s"[..]], 0);
        set_bit(&mut txn, b"s", offset, true).unwrap();
    }
    let raise_a = log_of(&a, "s").pop().unwrap();
    let raise_b = log_of(&bb, "s").pop().unwrap();
    assert!(
        matches!(raise_a.kind, ChangeKind::Delta { base, op: DeltaOp::BitsOr { .. } } if base == v1)
    );
    assert_eq!(apply(&bb, &raise_a), Applied);
    assert_eq!(apply(&bb, &raise_a), Duplicate);
    assert_eq!(apply(&a, &raise_b), Applied);
    assert_eq!(string(&a, "s"), Some(Bytes::from_static(b"\x80\x00\x40")));
    assert_eq!(string(&a, "s"), string(&bb, "s"));
    assert_eq!(entry(&a, "s").map(|e| e.version), Some(v1));
    // A third site raised too (bit 9), unseen by a: a's SETBIT 0 is a
    // delta on bytes the third site does not hold at v1.
    let c = keyspace(3);
    assert_eq!(apply(&c, &log_of(&a, "s")[0]), Applied);
    let mut txn = c.txn([&b"s"[..]], 0);
    set_bit(&mut txn, b"s", 9, true).unwrap();
    drop(txn);
    let mut txn = a.txn([&b"s"[..]], 0);
    set_bit(&mut txn, b"s", 0, false).unwrap();
    drop(txn);
    let clear = log_of(&a, "s").pop().unwrap();
    assert!(matches!(
        clear.kind,
        ChangeKind::Delta {
            op: DeltaOp::Checked { .. },
            ..
        }
    ));
    assert_eq!(apply(&bb, &clear), Applied);
    assert_eq!(apply(&c, &clear), NeedFull);
    for f in a.full_changes(b"s") {
        assert_eq!(apply(&c, &f), Applied);
    }
    assert_eq!(string(&c, "s"), string(&a, "s"));
    assert_eq!(string(&bb, "s"), string(&a, "s"));
}

#[test]
fn an_expire_racing_a_setbit_raise_elsewhere_ends_the_same_at_both_sites() {
    // EXPIRE gives the key a new version; a SETBIT 1 made concurrently at
    // the other site raised the old one there. Unchecked, the expiry
    // applied on the raised bytes while the raise lost at the EXPIRE's
    // site: the two held other bytes at one version for good.
    let a = keyspace(1);
    let b = keyspace(2);
    local_set(&a, "s", "\x00");
    for c in log_of(&a, "s") {
        assert_eq!(apply(&b, &c), Applied);
    }
    let mut txn = a.txn([&b"s"[..]], 0);
    txn.write(b"s", Write::SetExpiry(u64::MAX / 2)).unwrap();
    drop(txn);
    let mut txn = b.txn([&b"s"[..]], 0);
    set_bit(&mut txn, b"s", 3, true).unwrap();
    drop(txn);
    let expire = log_of(&a, "s").pop().unwrap();
    let raise = log_of(&b, "s").pop().unwrap();
    assert!(matches!(
        &expire.kind,
        ChangeKind::Delta { op: DeltaOp::Checked { op, .. }, .. } if matches!(**op, DeltaOp::SetExpiry(_))
    ));
    assert_eq!(apply(&a, &raise), ConflictLost);
    assert_eq!(apply(&b, &expire), NeedFull);
    for f in a.full_changes(b"s") {
        assert_eq!(apply(&b, &f), Applied);
    }
    assert_eq!(entry(&a, "s"), entry(&b, "s"));
    // On the same bytes the checked expiry applies as a plain one.
    let c = keyspace(3);
    assert_eq!(apply(&c, &log_of(&a, "s")[0]), Applied);
    assert_eq!(apply(&c, &expire), Applied);
    assert_eq!(entry(&c, "s"), entry(&a, "s"));
}

#[test]
fn forged_string_ops_past_the_longest_string_change_nothing() {
    let ks = keyspace(1);
    let v1 = local_set(&ks, "s", "ab");
    let logged = log_of(&ks, "s").len();
    let past = crate::bits::MAX_LEN as u32;
    // A checked splice on the right bytes, far past the end: an error.
    let splice = delta(
        "s",
        v1,
        DeltaOp::Checked {
            base_hash: crate::bits::bytes_hash(b"ab"),
            op: Box::new(DeltaOp::Splice {
                offset: u32::MAX,
                remove: 0,
                insert: Bytes::from_static(b"x"),
            }),
        },
        remote_version(&ks, 0),
    );
    assert!(ks.apply_remote(splice, 0).is_err());
    // A raise past the longest string (the decoder refuses it too).
    let raise = delta(
        "s",
        v1,
        DeltaOp::BitsOr {
            bytes: vec![(past, 1)],
        },
        remote_version(&ks, 0),
    );
    assert_eq!(apply(&ks, &raise), ConflictLost);
    assert_eq!(string(&ks, "s"), Some(Bytes::from_static(b"ab")));
    assert_eq!(entry(&ks, "s").map(|e| e.version), Some(v1));
    assert_eq!(log_of(&ks, "s").len(), logged);
}

#[test]
fn a_string_write_against_a_hash_removes_older_fields_and_wins_only_over_older() {
    let ks = keyspace(1);
    local_hset(&ks, "h", &[("a", "1")]);
    let v = remote_version(&ks, 0);
    let late = local_hset(&ks, "h", &[("b", "1")]);
    assert_eq!(apply(&ks, &full("h", "str", v)), ConflictLost);
    assert_eq!(field(&ks, "h", "a"), None, "the SET overwrote a");
    assert_eq!(field(&ks, "h", "b").unwrap().version, late);
    assert_eq!(log_of(&ks, "h").pop().unwrap(), del("h", v));
    assert_eq!(apply(&ks, &full("h", "str", v)), Duplicate);
    // Newer than every field: the string replaces the hash.
    let w = remote_version(&ks, 0);
    assert_eq!(apply(&ks, &full("h", "str", w)), Applied);
    assert_eq!(string(&ks, "h"), Some(b("str")));
    // A string delta against a hash with no newer field needs the full value.
    let ks = keyspace(1);
    local_hset(&ks, "h", &[("a", "1")]);
    let v = remote_version(&ks, 0);
    assert_eq!(
        apply(&ks, &delta("h", Version::ZERO, DeltaOp::IncrBy(1), v)),
        NeedFull
    );
    assert!(
        field(&ks, "h", "a").is_some(),
        "nothing changed until the full value comes"
    );
}

#[test]
fn field_writes_against_a_string() {
    let ks = keyspace(1);
    local_set(&ks, "s", "v");
    let newer = remote_version(&ks, 0);
    assert_eq!(apply(&ks, &hset("s", &[("f", "1")], newer)), NeedFull);
    let s = entry(&ks, "s").unwrap().version;
    let older = Version {
        hlc: s.hlc - 1,
        site: 2,
    };
    assert_eq!(apply(&ks, &hset("s", &[("f", "1")], older)), ConflictLost);
    assert_eq!(apply(&ks, &hdel("s", &["f"], older)), ConflictLost);
    assert_eq!(string(&ks, "s"), Some(b("v")));
    // The sender's full hash replaces the older string; the string's
    // overwrite still holds back fields older than it.
    let fresh = remote_version(&ks, 0);
    let change = full_hash("s", &[("old", "1", older), ("g", "1", fresh)], fresh);
    assert_eq!(apply(&ks, &change), Applied);
    assert_eq!(entry(&ks, "s").unwrap().as_hash().unwrap().len(), 1);
    assert_eq!(field(&ks, "s", "g").unwrap().version, fresh);
    assert_eq!(floor(&ks, "s"), Some(s));
}

#[test]
fn a_hash_that_lost_its_last_field_still_beats_an_older_string() {
    // At site 2 a hash newer than a SET from site 1 loses its last field;
    // the SET arriving later must not bring a string back.
    let ks = keyspace(2);
    let set_at_1 = remote_version(&ks, 0);
    let h = local_hset(&ks, "k", &[("f", "1")]);
    assert_eq!(apply(&ks, &full("k", "from 1", set_at_1)), ConflictLost);
    ks.txn([&b"k"[..]], 0)
        .write(b"k", Write::HashDel(vec![b("f")]))
        .unwrap();
    let gone = log_of(&ks, "k").pop().unwrap().version;
    assert_eq!(entry(&ks, "k"), None);
    let hash_version = ks.with_partition(ks.partition_of(b"k"), |p, _| p.tombstones.hash(b"k"));
    assert_eq!(hash_version, Some(gone));
    assert_eq!(apply(&ks, &full("k", "from 1", set_at_1)), Duplicate);
    let other = Version {
        hlc: h.hlc,
        site: 3,
    };
    assert!(
        h < other && other < gone,
        "a SET after the HSET but before the HDEL"
    );
    assert_eq!(apply(&ks, &full("k", "x", other)), ConflictLost);
    assert_eq!(
        floor(&ks, "k"),
        Some(other),
        "the losing SET still overwrote older fields"
    );
    // Site 1, holding the SET, asks for the full value of the key when the
    // HSET arrives, and gets the floor and the hash version: its string goes.
    let one = keyspace(1);
    one.hlc().observe(set_at_1.hlc - 1);
    assert_eq!(apply(&one, &full("k", "from 1", set_at_1)), Applied);
    assert_eq!(apply(&one, &hset("k", &[("f", "1")], h)), NeedFull);
    for c in ks.full_changes(b"k") {
        apply(&one, &c);
    }
    assert_eq!(entry(&one, "k"), None);
    // A field written again starts from the hash version at both.
    let again = remote_version(&ks, 0);
    let field_at = Version {
        hlc: h.hlc,
        site: 4,
    };
    for site in [&ks, &one] {
        assert_eq!(apply(site, &hset("k", &[("g", "1")], field_at)), Applied);
        assert_eq!(entry(site, "k").unwrap().version, gone);
        assert_eq!(apply(site, &hset("k", &[("g", "2")], again)), Applied);
    }
    assert_eq!(entry(&ks, "k"), entry(&one, "k"));
}

#[test]
fn an_hdel_newer_than_a_string_replaces_it() {
    let ks = keyspace(1);
    let s = local_set(&ks, "s", "v");
    let newer = remote_version(&ks, 0);
    assert_eq!(apply(&ks, &hdel("s", &["f"], newer)), Applied);
    assert_eq!(entry(&ks, "s"), None);
    assert_eq!(field_tomb(&ks, "s", "f"), Some(newer));
    assert_eq!(
        floor(&ks, "s"),
        Some(s),
        "the string's overwrite still holds older fields back"
    );
    assert_eq!(apply(&ks, &hdel("s", &["f"], newer)), Duplicate);
    assert_eq!(apply(&ks, &full("s", "v", s)), Duplicate);
    assert_eq!(
        apply(
            &ks,
            &full(
                "s",
                "w",
                Version {
                    hlc: s.hlc,
                    site: 0
                }
            )
        ),
        ConflictLost
    );
}

#[test]
fn a_full_hash_merges_field_by_field() {
    let ks = keyspace(1);
    let v0 = remote_version(&ks, 0);
    let a = local_hset(&ks, "h", &[("a", "local"), ("keep", "local")]);
    let v1 = remote_version(&ks, 0);
    let gone = local_hset(&ks, "h", &[("gone", "x")]);
    ks.txn([&b"h"[..]], 0)
        .write(b"h", Write::HashDel(vec![b("gone")]))
        .unwrap();
    let held = entry(&ks, "h").unwrap().version;
    let v = remote_version(&ks, 0);
    let change = full_hash(
        "h",
        &[("a", "old", v0), ("b", "remote", v1), ("gone", "old", gone)],
        v,
    );
    assert_eq!(apply(&ks, &change), Applied);
    let h = entry(&ks, "h").unwrap();
    assert_eq!(h.version, v);
    assert_eq!(
        field(&ks, "h", "a"),
        Some(Field {
            value: b("local"),
            version: a
        })
    );
    assert_eq!(
        field(&ks, "h", "keep"),
        Some(Field {
            value: b("local"),
            version: a
        })
    );
    assert_eq!(
        field(&ks, "h", "b"),
        Some(Field {
            value: b("remote"),
            version: v1
        })
    );
    assert_eq!(
        field(&ks, "h", "gone"),
        None,
        "removed here after it was written"
    );
    assert!(held < v);
    assert_eq!(
        log_of(&ks, "h").pop().unwrap(),
        Change {
            key: b("h"),
            version: v,
            kind: ChangeKind::Full {
                value: h.value,
                expire_at: 0
            }
        }
    );
    assert_eq!(apply(&ks, &change), Duplicate);
}

#[test]
fn set_expiry_needs_its_base() {
    let ks = keyspace(1);
    let v1 = local_set(&ks, "s", "v");
    let at = ks.now_ms() + 100_000;
    let v = remote_version(&ks, 0);
    let change = delta("s", v1, DeltaOp::SetExpiry(at), v);
    assert_eq!(apply(&ks, &change), Applied);
    assert_eq!(entry(&ks, "s").unwrap().expire_at, at);
    assert_eq!(entry(&ks, "s").unwrap().version, v);
    assert_eq!(apply(&ks, &change), Duplicate);
    let other = delta("s", v1, DeltaOp::SetExpiry(0), remote_version(&ks, 0));
    assert_eq!(
        apply(&ks, &other),
        NeedFull,
        "made against a value this copy no longer holds"
    );
    let older = delta(
        "s",
        v1,
        DeltaOp::SetExpiry(0),
        Version {
            hlc: v.hlc - 1,
            site: 2,
        },
    );
    assert_eq!(apply(&ks, &older), ConflictLost);
    assert_eq!(
        apply(
            &ks,
            &delta("missing", v1, DeltaOp::SetExpiry(0), remote_version(&ks, 0))
        ),
        NeedFull
    );
}

#[test]
fn reapplying_any_change_is_a_duplicate_and_changes_nothing() {
    let a = keyspace(1);
    let bb = keyspace(2);
    local_set(&a, "s", "x");
    a.txn([&b"s"[..]], 0)
        .write(b"s", Write::Str(DeltaOp::IncrBy(0)))
        .unwrap_err();
    local_set(&a, "n", "1");
    a.txn([&b"n"[..]], 0)
        .write(b"n", Write::Str(DeltaOp::IncrBy(41)))
        .unwrap();
    local_hset(&a, "h", &[("f", "1"), ("g", "1")]);
    a.txn([&b"h"[..]], 0)
        .write(b"h", Write::HashDel(vec![b("f")]))
        .unwrap();
    let at = a.now_ms() + 100_000;
    a.txn([&b"h"[..]], 0)
        .write(b"h", Write::SetExpiry(at))
        .unwrap();
    a.txn([&b"s"[..]], 0).write(b"s", Write::Delete).unwrap();
    let changes: Vec<Change> = ["s", "n", "h"].iter().flat_map(|k| log_of(&a, k)).collect();
    for c in &changes {
        assert_eq!(apply(&bb, c), Applied, "{c:?}");
        let log_len: usize = ["s", "n", "h"].iter().map(|k| log_of(&bb, k).len()).sum();
        let before: Vec<_> = ["s", "n", "h"].iter().map(|k| entry(&bb, k)).collect();
        assert_eq!(apply(&bb, c), Duplicate, "{c:?}");
        assert_eq!(
            ["s", "n", "h"]
                .iter()
                .map(|k| entry(&bb, k))
                .collect::<Vec<_>>(),
            before
        );
        assert_eq!(
            ["s", "n", "h"]
                .iter()
                .map(|k| log_of(&bb, k).len())
                .sum::<usize>(),
            log_len
        );
    }
    for k in ["s", "n", "h"] {
        assert_eq!(entry(&a, k), entry(&bb, k));
    }
    assert_eq!(string(&bb, "n"), Some(b("42")));
}

#[test]
fn refuses_on_a_backup_partition() {
    let ks = keyspace(1);
    ks.set_replica(ks.partition_of(b"k"), true);
    assert_eq!(
        ks.apply_remote(full("k", "v", remote_version(&ks, 0)), 0),
        Err(ApplyError::NotPrimary)
    );
    assert_eq!(entry(&ks, "k"), None);
}

#[test]
fn the_hlc_moves_past_remote_versions() {
    let ks = keyspace(1);
    // Ahead, within max_clock_offset (400 ms).
    let far = remote_version(&ks, 400 << 16);
    apply(&ks, &full("k", "v", far));
    assert!(local_set(&ks, "k", "w") > far);
}

/// What the sink saw: partition, sequence, change and its encoding.
type Captured = (usize, u64, Change, Vec<u8>);

#[derive(Default)]
struct Capture(Mutex<Vec<Captured>>);

impl ReplicationSink for Capture {
    fn logged(&self, partition: usize, seq: u64, change: &Change, encoded: Option<&[u8]>) {
        let mut own = Vec::new();
        crate::codec::encode(change, &mut own);
        if let Some(encoded) = encoded {
            assert_eq!(encoded, own, "the log's copy is the change's encoding");
        }
        self.0.lock().push((partition, seq, change.clone(), own));
    }
}

#[derive(Default)]
struct Seen(Mutex<Vec<(Bytes, u64)>>);

impl crate::ChangeObserver for Seen {
    fn active(&self) -> bool {
        true
    }
    fn changed(&self, keys: &[Bytes], origin: u64) {
        self.0
            .lock()
            .extend(keys.iter().map(|k| (k.clone(), origin)));
    }
    fn flushed(&self, _origin: u64) {}
}

#[test]
fn remote_changes_reach_the_sink_and_the_observer_and_replay_on_a_backup() {
    let ks = keyspace(1);
    let sink = Arc::new(Capture::default());
    let seen = Arc::new(Seen::default());
    ks.set_sink(sink.clone());
    ks.set_observer(seen.clone());
    local_hset(&ks, "h", &[("a", "1")]);
    let v = remote_version(&ks, 0);
    local_hset(&ks, "h", &[("b", "1")]);
    apply(&ks, &del("h", v));
    apply(
        &ks,
        &hset(
            "h",
            &[("a", "2"), ("b", "2")],
            Version {
                hlc: v.hlc + 1,
                site: 2,
            },
        ),
    );
    assert_eq!(
        apply(
            &ks,
            &full(
                "gone",
                "x",
                Version {
                    hlc: v.hlc - 1,
                    site: 2
                }
            )
        ),
        Applied
    );
    apply(&ks, &del("gone", v));
    assert_eq!(seen.0.lock().last(), Some(&(b("gone"), 0)));
    let backup = keyspace(1);
    for p in 0..7 {
        backup.set_replica(p, true);
    }
    let logged = std::mem::take(&mut *sink.0.lock());
    assert_eq!(logged.len(), 6);
    for (_, seq, c, encoded) in logged {
        backup.apply_replicated(seq, c, &encoded, 0).unwrap();
    }
    assert_eq!(state(&backup), state(&ks));
    assert_eq!(tombstones(&backup), tombstones(&ks));
    assert_eq!(floor(&backup, "gone"), Some(v));
}

/// A change applied once whose backups never acknowledged it (the
/// sender's wait failed) comes again: the second attempt changes nothing
/// but still waits for the backups to hold it, as the first did.
#[test]
fn a_remote_change_that_changes_nothing_still_waits_for_the_backups() {
    let ks = keyspace(1);
    ks.set_sink(Arc::new(Capture::default()));
    let v = remote_version(&ks, 0);
    crate::take_written();
    assert_eq!(apply(&ks, &full("k", "x", v)), Applied);
    let first = crate::take_written();
    assert_eq!(first.len(), 1);
    assert_eq!(apply(&ks, &full("k", "x", v)), Duplicate);
    assert_eq!(crate::take_written(), first);
    let older = Version {
        hlc: v.hlc - 1,
        site: 2,
    };
    assert_eq!(apply(&ks, &full("k", "y", older)), ConflictLost);
    assert_eq!(crate::take_written(), first);
    // A copy promoted since: its backups acknowledge only what it logs
    // from then on, and nothing is logged now.
    let p = ks.partition_of(b"k");
    ks.set_replica(p, true);
    ks.set_replica(p, false);
    assert_eq!(apply(&ks, &full("k", "x", v)), Duplicate);
    assert!(crate::take_written().is_empty());
}

#[test]
fn flushall_deletes_leave_tombstones_and_backups_get_the_same() {
    let ks = keyspace(1);
    let sink = Arc::new(Capture::default());
    ks.set_sink(sink.clone());
    local_set(&ks, "a", "1");
    local_hset(&ks, "b", &[("f", "1")]);
    ks.flush(0);
    assert!(floor(&ks, "a").is_some() && floor(&ks, "b").is_some());
    assert!(ks.tombstone_bytes() > 0);
    let backup = keyspace(1);
    for p in 0..7 {
        backup.set_replica(p, true);
    }
    for (_, seq, c, encoded) in std::mem::take(&mut *sink.0.lock()) {
        backup.apply_replicated(seq, c, &encoded, 0).unwrap();
    }
    assert_eq!(tombstones(&backup), tombstones(&ks));
    assert_eq!(backup.tombstone_bytes(), ks.tombstone_bytes());
    // A snapshot's tombstones, loaded as changes, rebuild them too.
    let fresh = keyspace(1);
    for p in 0..7 {
        fresh.set_replica(p, true);
        for c in ks.with_partition(p, |part, _| part.tombstone_changes()) {
            fresh.load_replica_entry(c, &[]).unwrap();
        }
    }
    assert_eq!(tombstones(&fresh), tombstones(&ks));
    backup
        .reset_replica(ks.partition_of(b"a"), (1, 0), 0)
        .unwrap();
    assert_eq!(floor(&backup, "a"), None);
}

/// A full value at the version held here (asked for when a change of the
/// key could not be applied, e.g. an expiry on another base) brings the
/// sender's expiry: it was lost when the held copy had the same version.
#[test]
fn a_full_collection_at_the_version_held_brings_its_expiry() {
    let ks = keyspace(1);
    let v = remote_version(&ks, 0);
    let at = u64::MAX / 4;
    for plain in [full_hash("h", &[("f", "1", v)], v), {
        let mut set = crate::value::SetValue::new();
        set.add(b"m", v);
        Change {
            key: b("s"),
            version: v,
            kind: ChangeKind::Full {
                value: Value::Set(set),
                expire_at: 0,
            },
        }
    }] {
        apply(&ks, &plain);
        let key = std::str::from_utf8(&plain.key).unwrap().to_owned();
        let mut timed = plain.clone();
        if let ChangeKind::Full { expire_at, .. } = &mut timed.kind {
            *expire_at = at;
        }
        assert_eq!(apply(&ks, &timed), Applied, "{key}");
        assert_eq!(entry(&ks, &key).unwrap().expire_at, at, "{key}");
        assert_eq!(apply(&ks, &timed), Duplicate, "{key}");
    }
}

/// A new replica loads a snapshot's entries, then its tombstones: the
/// tombstone of a field removed and written again since is older than the
/// field it loads, which stays (it was lost, the copy then differing from
/// its primary).
#[test]
fn a_snapshot_keeps_a_field_written_again_after_its_removal() {
    let ks = keyspace(1);
    local_hset(&ks, "h", &[("f", "1"), ("g", "1")]);
    ks.txn([&b"h"[..]], 0)
        .write(b"h", Write::HashDel(vec![b("f")]))
        .unwrap();
    local_hset(&ks, "h", &[("f", "2")]);
    let p = ks.partition_of(b"h");
    let (entries, tombs) = ks.with_partition(p, |part, _| {
        let entries: Vec<Change> = part
            .iter()
            .map(|(key, e)| Change {
                key: key.to_bytes(),
                version: e.version,
                kind: ChangeKind::Full {
                    value: e.value.clone(),
                    expire_at: e.expire_at,
                },
            })
            .collect();
        (entries, part.tombstone_changes())
    });
    assert!(!tombs.is_empty(), "the field's removal left a tombstone");
    let fresh = keyspace(1);
    fresh.set_replica(p, true);
    for c in entries.into_iter().chain(tombs) {
        fresh.load_replica_entry(c, &[]).unwrap();
    }
    let held =
        |ks: &Keyspace| ks.with_partition(p, |part, _| part.get(b"h").map(|e| e.value.clone()));
    assert_eq!(held(&fresh), held(&ks));
}

#[test]
fn a_copy_read_key_by_key_gives_another_site_the_same_contents_and_tombstones() {
    let ks = keyspace(1);
    local_set(&ks, "a", "1");
    local_set(&ks, "gone", "1");
    ks.txn([&b"gone"[..]], 0)
        .write(b"gone", Write::Delete)
        .unwrap();
    local_hset(&ks, "h", &[("f", "1"), ("g", "1")]);
    ks.txn([&b"h"[..]], 0)
        .write(b"h", Write::HashDel(vec![b("f")]))
        .unwrap();
    local_hset(&ks, "emptied", &[("f", "1")]);
    ks.txn([&b"emptied"[..]], 0)
        .write(b"emptied", Write::HashDel(vec![b("f")]))
        .unwrap();
    let other = keyspace(2);
    let mut copied = Vec::new();
    for p in 0..ks.partitions() as usize {
        let keys = ks.with_partition(p, |part, now| part.copy_keys(now));
        for key in keys {
            copied.push(key.clone());
            for c in ks.with_partition(p, |part, now| part.copy_changes(&key, now)) {
                apply(&other, &c);
            }
        }
    }
    copied.sort();
    assert_eq!(copied, [b("a"), b("emptied"), b("gone"), b("h")]);
    assert_eq!(state(&other), state(&ks));
    let sorted = |t: TombList| {
        t.into_iter()
            .flatten()
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(sorted(tombstones(&other)), sorted(tombstones(&ks)));
    assert!(field_tomb(&other, "h", "f").is_some() && floor(&other, "gone").is_some());
}

#[test]
fn without_tombstones_nothing_is_kept() {
    let ks = Keyspace::new(
        KeyspaceConfig {
            partitions: 7,
            ..Default::default()
        },
        Arc::new(DebugClock::default()),
    );
    local_set(&ks, "a", "1");
    local_hset(&ks, "h", &[("f", "1"), ("g", "1")]);
    ks.txn([&b"h"[..]], 0)
        .write(b"h", Write::HashDel(vec![b("f")]))
        .unwrap();
    ks.txn([&b"a"[..]], 0).write(b"a", Write::Delete).unwrap();
    ks.flush(0);
    assert_eq!(ks.tombstone_bytes(), 0);
    assert_eq!(floor(&ks, "a"), None);
    // Remote changes still resolve by the versions held.
    let d = remote_version(&ks, 0);
    assert_eq!(apply(&ks, &del("a", d)), Duplicate);
    assert_eq!(
        apply(
            &ks,
            &full(
                "a",
                "x",
                Version {
                    hlc: d.hlc - 1,
                    site: 2
                }
            )
        ),
        Applied
    );
}

// ---- convergence ----

fn state(ks: &Keyspace) -> BTreeMap<Bytes, Entry> {
    let mut out = BTreeMap::new();
    for p in 0..ks.partitions() as usize {
        ks.with_partition(p, |part, _| {
            out.extend(part.iter().map(|(k, e)| (k.to_bytes(), e.clone())))
        });
    }
    out
}

type TombList = Vec<Vec<(Bytes, crate::tombstones::Tomb, Version)>>;

fn tombstones(ks: &Keyspace) -> TombList {
    (0..ks.partitions() as usize)
        .map(|p| {
            ks.with_partition(p, |part, _| {
                part.tombstones
                    .iter()
                    .map(|(k, t, v)| (k.clone(), t.clone(), v))
                    .collect()
            })
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    Set(u8, Vec<u8>, bool),
    /// Overwrite one byte of a long string: logged as a delta (Patch).
    SetSimilar(u8, usize, u8),
    Append(u8, Vec<u8>),
    Incr(u8, i64),
    HSet(u8, Vec<(u8, Vec<u8>)>),
    HDel(u8, Vec<u8>),
    /// HINCRBY of a field.
    HIncr(u8, u8, i64),
    /// INCRBYFLOAT by n/4.
    IncrF(u8, i64),
    /// HINCRBYFLOAT of a field by n/4.
    HIncrF(u8, u8, i64),
    /// ZINCRBY of a member by n/2.
    ZIncr(u8, u8, i8),
    SAdd(u8, Vec<u8>),
    ZAdd(u8, Vec<(u8, i8)>),
    /// SREM or ZREM, whichever the key holds.
    Rem(u8, Vec<u8>),
    Del(u8),
    /// PFADD: raise registers (index, value) of the HyperLogLog at the key.
    PfAdd(u8, Vec<(u16, u8)>),
    /// PFMERGE dest src.
    PfMerge(u8, u8),
    /// SETBIT key offset 1 (true) or 0, as the command does it.
    SetBit(u8, u32, bool),
    /// EXPIRE (far in the future) or PERSIST of key 3, which only ever
    /// holds a string, or of a bitmap key (8, 9: strings or nothing, their
    /// SETBIT 1s raise the version EXPIRE replaces): an expiry has no
    /// version of its own, so EXPIRE on a key whose type the sites contest
    /// is out of scope (see the remote module's docs).
    Expire(u8, bool),
    /// LPUSH (true) or RPUSH of elements.
    Push(u8, bool, Vec<u8>),
    /// LPOP (true) or RPOP of up to n elements.
    Pop(u8, bool, u8),
}

#[derive(Debug, Clone)]
enum Action {
    Local(usize, Op),
    /// Deliver up to n of the changes site `from` logged to another (the
    /// second number picks which); with `true`, NeedFull is answered later
    /// (by an [`Action::Late`]), as a publisher does with changes already in
    /// flight.
    Deliver(usize, usize, u8, bool),
    /// Deliver the full values one site owes another.
    Late(usize, usize),
    /// Send one already delivered change again.
    Resend(usize, usize, u16),
    Advance(usize, u16),
}

/// Sets are written to keys 0, 1 and 4, sorted sets to 0, 1 and 5: keys 0
/// and 1 are contested by every type (strings, counters, hashes, sets,
/// sorted sets), 4 and 5 hold one collection type each.
const SET_KEY: u8 = 4;
const ZSET_KEY: u8 = 5;
/// Lists are written to keys 0 and 1 (contested by every type) and 10
/// (lists only).
const LIST_KEY: u8 = 10;

/// HyperLogLogs are written to keys 6 and 7, contested by PFADD, PFMERGE
/// (from one to the other) and DEL; their clash with other writes of the
/// key is a known limit (docs/data-types.md).
fn hll_key() -> impl Strategy<Value = u8> {
    prop_oneof![Just(6u8), Just(7u8)]
}

/// Bitmaps are written to keys 8 and 9, contested by SETBIT 1 (merged by
/// OR), SETBIT 0 (an assignment) and DEL.
fn bit_key() -> impl Strategy<Value = u8> {
    prop_oneof![Just(8u8), Just(9u8)]
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..4;
    let val = proptest::collection::vec(b'a'..b'e', 0..6);
    prop_oneof![
        (key.clone(), val.clone(), any::<bool>()).prop_map(|(k, v, ttl)| Op::Set(k, v, ttl)),
        (key.clone(), 0usize..200, b'a'..b'e').prop_map(|(k, i, c)| Op::SetSimilar(k, i, c)),
        (key.clone(), val.clone()).prop_map(|(k, v)| Op::Append(k, v)),
        (0u8..3, -3i64..4).prop_map(|(k, n)| Op::Incr(k, n)),
        (0u8..3, proptest::collection::vec((0u8..4, val), 1..3)).prop_map(|(k, f)| Op::HSet(k, f)),
        (0u8..3, proptest::collection::vec(0u8..4, 1..3)).prop_map(|(k, f)| Op::HDel(k, f)),
        (0u8..3, 0u8..4, -3i64..4).prop_map(|(k, f, n)| Op::HIncr(k, f, n)),
        (0u8..3, -3i64..4).prop_map(|(k, n)| Op::IncrF(k, n)),
        (0u8..3, 0u8..4, -3i64..4).prop_map(|(k, f, n)| Op::HIncrF(k, f, n)),
        (
            prop_oneof![Just(0u8), Just(1u8), Just(SET_KEY)],
            proptest::collection::vec(0u8..4, 1..3)
        )
            .prop_map(|(k, m)| Op::SAdd(k, m)),
        (
            prop_oneof![Just(0u8), Just(1u8), Just(ZSET_KEY)],
            proptest::collection::vec((0u8..4, -2i8..3), 1..3)
        )
            .prop_map(|(k, m)| Op::ZAdd(k, m)),
        (
            prop_oneof![Just(0u8), Just(1u8), Just(ZSET_KEY)],
            0u8..4,
            -3i8..4
        )
            .prop_map(|(k, m, n)| Op::ZIncr(k, m, n)),
        (
            SET_KEY..ZSET_KEY + 1,
            proptest::collection::vec(0u8..4, 1..3)
        )
            .prop_map(|(k, m)| Op::Rem(k, m)),
        (0u8..8).prop_map(Op::Del),
        (bit_key(), 0u32..40, 0u8..5).prop_map(|(k, o, b)| match b {
            0 => Op::Del(k),
            1 => Op::SetBit(k, o, false),
            _ => Op::SetBit(k, o, true),
        }),
        (
            hll_key(),
            proptest::collection::vec((0u16..48, 1u8..40), 0..4)
        )
            .prop_map(|(k, r)| Op::PfAdd(k, r)),
        (hll_key(), hll_key()).prop_map(|(d, s)| Op::PfMerge(d, s)),
        (prop_oneof![Just(3u8), bit_key()], any::<bool>()).prop_map(|(k, p)| Op::Expire(k, p)),
        (
            prop_oneof![Just(0u8), Just(1u8), Just(LIST_KEY)],
            any::<bool>(),
            proptest::collection::vec(b'a'..b'e', 1..3)
        )
            .prop_map(|(k, l, v)| Op::Push(k, l, v)),
        (
            prop_oneof![Just(0u8), Just(1u8), Just(LIST_KEY)],
            any::<bool>(),
            1u8..3
        )
            .prop_map(|(k, l, n)| Op::Pop(k, l, n)),
    ]
}

/// Actions on `n` sites.
fn action(n: usize) -> impl Strategy<Value = Action> {
    prop_oneof![
        5 => (0..n, op()).prop_map(|(s, o)| Action::Local(s, o)),
        4 => (0..n, 0..n, 1u8..4, any::<bool>()).prop_map(|(s, t, k, late)| Action::Deliver(s, t, k, late)),
        1 => (0..n, 0..n).prop_map(|(s, t)| Action::Late(s, t)),
        1 => (0..n, 0..n, any::<u16>()).prop_map(|(s, t, i)| Action::Resend(s, t, i)),
        1 => (0..n, 0u16..50).prop_map(|(s, ms)| Action::Advance(s, ms)),
    ]
}

fn key(i: u8) -> Vec<u8> {
    format!("key{i}").into_bytes()
}

fn run_local(ks: &Keyspace, op: Op) {
    let k = match &op {
        Op::Set(k, ..) | Op::SetSimilar(k, ..) | Op::Append(k, _) | Op::Incr(k, _) => key(*k),
        Op::HSet(k, _) | Op::HDel(k, _) | Op::Del(k) => key(*k),
        Op::SAdd(k, _) | Op::ZAdd(k, _) | Op::Rem(k, _) | Op::HIncr(k, ..) => key(*k),
        Op::IncrF(k, _) | Op::HIncrF(k, ..) | Op::ZIncr(k, ..) => key(*k),
        Op::PfAdd(k, _) | Op::PfMerge(k, _) | Op::SetBit(k, ..) => key(*k),
        Op::Expire(k, _) | Op::Push(k, ..) | Op::Pop(k, ..) => key(*k),
    };
    if let Op::PfMerge(_, src) = &op {
        let src = key(*src);
        let mut txn = ks.txn([&k[..], &src[..]], 0);
        let regs = match txn.get(&src).map(|e| e.str_bytes()) {
            None => Vec::new(),
            Some(Some(b)) => match crate::hll::merge::registers(&b) {
                Ok(r) => r,
                Err(_) => return,
            },
            Some(None) => return,
        };
        let raises: Vec<(u16, u8)> = (0u16..).zip(regs).filter(|(_, r)| *r > 0).collect();
        pf_raise(&mut txn, &k, raises);
        return;
    }
    let mut txn = ks.txn([&k[..]], 0);
    let now = txn.now_ms();
    // Wrong types and non-integers fail and leave no trace, as for clients.
    let _ = match op {
        Op::Set(_, v, ttl) => {
            let expire_at = if ttl { now + 86_400_000 } else { 0 };
            txn.write(
                &k,
                Write::Set {
                    value: Value::str(Bytes::from(v)),
                    expire_at,
                },
            )
        }
        Op::SetSimilar(_, i, c) => {
            let mut v = txn
                .get(&k)
                .and_then(|e| e.str_bytes())
                .map(|s| s.to_vec())
                .unwrap_or_default();
            v.resize(v.len().max(200), b'x');
            let n = v.len();
            v[i % n] = c;
            let expire_at = txn.get(&k).map_or(0, |e| e.expire_at);
            txn.write(
                &k,
                Write::Set {
                    value: Value::str(Bytes::from(v)),
                    expire_at,
                },
            )
        }
        Op::Append(_, v) => {
            let offset = txn.get(&k).and_then(|e| e.as_str()).map_or(0, |s| s.len()) as u32;
            txn.write(
                &k,
                Write::Str(DeltaOp::Splice {
                    offset,
                    remove: 0,
                    insert: Bytes::from(v),
                }),
            )
        }
        Op::Incr(_, n) => txn.write(&k, Write::Str(DeltaOp::IncrBy(n))),
        Op::HSet(_, fields) => txn.write(
            &k,
            Write::HashSet(
                fields
                    .into_iter()
                    .map(|(f, v)| (Bytes::from(vec![b'f', f]), Bytes::from(v)))
                    .collect(),
            ),
        ),
        Op::HDel(_, fields) => txn.write(
            &k,
            Write::HashDel(
                fields
                    .into_iter()
                    .map(|f| Bytes::from(vec![b'f', f]))
                    .collect(),
            ),
        ),
        Op::HIncr(_, f, n) => {
            let field = Bytes::from(vec![b'f', f]);
            let current = match txn.get(&k) {
                Some(e) => e
                    .as_hash()
                    .and_then(|h| h.get(&field))
                    .map(|f| Bytes::copy_from_slice(f.value))
                    .unwrap_or_else(|| Bytes::from_static(b"0")),
                None => Bytes::from_static(b"0"),
            };
            match std::str::from_utf8(&current)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
            {
                Some(c) => txn.write(
                    &k,
                    Write::HashIncr {
                        field,
                        by: n,
                        text: Bytes::from((c + n).to_string()),
                    },
                ),
                None => Ok(()),
            }
        }
        Op::IncrF(_, n) => {
            // As INCRBYFLOAT: the value must read as a float.
            let by = Bytes::from((n as f64 / 4.0).to_string());
            let held = match txn.get(&k) {
                Some(e) => e.str_bytes(),
                None => Some(Bytes::from_static(b"0")),
            };
            match held.filter(|h| crate::number::parse_f64(h).is_some()) {
                Some(h) => {
                    let expire_at = txn.get(&k).map_or(0, |e| e.expire_at);
                    txn.write(
                        &k,
                        Write::FloatIncr {
                            text: crate::number::add_texts(&h, &by),
                            by,
                            expire_at,
                        },
                    )
                }
                None => Ok(()),
            }
        }
        Op::HIncrF(_, f, n) => {
            let field = Bytes::from(vec![b'f', f]);
            let by = Bytes::from((n as f64 / 4.0).to_string());
            let current = match txn.get(&k) {
                Some(e) => e
                    .as_hash()
                    .and_then(|h| h.get(&field))
                    .map(|f| Bytes::copy_from_slice(f.value))
                    .unwrap_or_else(|| Bytes::from_static(b"0")),
                None => Bytes::from_static(b"0"),
            };
            match crate::number::parse_f64(&current) {
                Some(_) => txn.write(
                    &k,
                    Write::HashFloatIncr {
                        field,
                        text: crate::number::add_texts(&current, &by),
                        by,
                    },
                ),
                None => Ok(()),
            }
        }
        Op::ZIncr(_, m, n) => {
            let member = Bytes::from(vec![b'm', m]);
            let by = n as f64 / 2.0;
            let current = match txn.get(&k) {
                Some(e) => e.as_zset().map(|z| z.score(&member).unwrap_or(0.0)),
                None => Some(0.0),
            };
            match current {
                Some(c) => txn.write(
                    &k,
                    Write::ZIncr {
                        member,
                        by,
                        score: c + by,
                    },
                ),
                None => Ok(()),
            }
        }
        Op::SAdd(_, members) => txn.write(
            &k,
            Write::SetAdd(
                members
                    .into_iter()
                    .map(|m| Bytes::from(vec![b'm', m]))
                    .collect(),
            ),
        ),
        Op::ZAdd(_, members) => txn.write(
            &k,
            Write::ZAdd(
                members
                    .into_iter()
                    .map(|(m, s)| (Bytes::from(vec![b'm', m]), s as f64))
                    .collect(),
            ),
        ),
        Op::Rem(_, members) => txn.write(
            &k,
            Write::Remove(
                members
                    .into_iter()
                    .map(|m| Bytes::from(vec![b'm', m]))
                    .collect(),
            ),
        ),
        Op::Del(_) => txn.write(&k, Write::Delete),
        Op::PfAdd(_, raises) => {
            pf_raise(&mut txn, &k, raises);
            Ok(())
        }
        Op::PfMerge(..) => Ok(()),
        Op::Expire(_, persist) => txn.write(
            &k,
            Write::SetExpiry(if persist { 0 } else { now + 86_400_000 }),
        ),
        Op::SetBit(_, offset, on) => set_bit(&mut txn, &k, offset, on),
        Op::Push(_, left, elements) => {
            let len = match txn.get(&k).map(|e| e.as_list().map(|l| l.len())) {
                None => 0,
                Some(Some(n)) => n,
                Some(None) => return,
            };
            let mut insert: Vec<Bytes> = elements.iter().map(|e| Bytes::from(vec![*e])).collect();
            if left {
                insert.reverse();
            }
            let at = if left { 0 } else { len as u32 };
            let edit = crate::value::ListEdit {
                at,
                remove: 0,
                insert,
            };
            txn.write(&k, Write::List(vec![edit]))
        }
        Op::Pop(_, left, n) => {
            let Some(len) = txn.get(&k).and_then(|e| e.as_list().map(|l| l.len())) else {
                return;
            };
            let n = (n as usize).min(len);
            let at = if left { 0 } else { (len - n) as u32 };
            let edit = crate::value::ListEdit {
                at,
                remove: n as u32,
                insert: Vec::new(),
            };
            txn.write(&k, Write::List(vec![edit]))
        }
    };
}

/// SETBIT as the command does it (`commands::bits::setbit`).
fn set_bit(txn: &mut crate::Txn, k: &[u8], offset: u32, on: bool) -> Result<(), crate::WriteError> {
    let s = match txn.get(k) {
        None => Bytes::new(),
        Some(e) => match e.str_bytes() {
            Some(s) => s,
            None => return Ok(()),
        },
    };
    match crate::bits::setbit_write(&s, offset as usize, on) {
        Some(w) => txn.write(k, w),
        None => Ok(()),
    }
}

/// PFADD/PFMERGE as the commands do it: the registers raised on the
/// HyperLogLog held (made if missing; another value: WRONGTYPE, nothing).
fn pf_raise(txn: &mut crate::Txn, k: &[u8], raises: Vec<(u16, u8)>) {
    use crate::hll::{Hll, SPARSE_MAX_BYTES};
    let (mut hll, mut updated) = match txn.get(k).map(|e| e.str_bytes()) {
        None => (Hll::new(), true),
        Some(Some(b)) => match Hll::from_value(&b) {
            Ok(h) => (h, false),
            Err(_) => return,
        },
        Some(None) => return,
    };
    let mut registers = Vec::new();
    for (i, v) in raises {
        match hll.raise(usize::from(i), v, SPARSE_MAX_BYTES) {
            Ok(true) => registers.push((i, v)),
            Ok(false) => {}
            Err(_) => return,
        }
    }
    updated |= !registers.is_empty();
    if updated {
        hll.invalidate_cache();
        let value = Bytes::from(hll.into_bytes());
        let _ = txn.write(k, Write::Hll { registers, value });
    }
}

struct Site {
    id: u16,
    clock: Arc<DebugClock>,
    ks: Keyspace,
    sink: Arc<Capture>,
    backup: Keyspace,
}

impl Site {
    fn new(id: u16, skew_ms: u64) -> Site {
        let clock = Arc::new(DebugClock::default());
        clock.advance(skew_ms);
        let ks = Keyspace::new(config(id), clock.clone());
        let sink = Arc::new(Capture::default());
        ks.set_sink(sink.clone());
        let backup = Keyspace::new(config(id), clock.clone());
        for p in 0..backup.partitions() as usize {
            backup.set_replica(p, true);
        }
        Site {
            id,
            clock,
            ks,
            sink,
            backup,
        }
    }

    /// Feeds what the primary logged to its backup; returns what originated
    /// here (what the WAN publisher ships), in log order.
    fn drain(&self) -> Vec<Change> {
        let mut out = Vec::new();
        for (_, seq, c, encoded) in std::mem::take(&mut *self.sink.0.lock()) {
            if c.version.site == self.id {
                out.push(c.clone());
            }
            self.backup.apply_replicated(seq, c, &encoded, 0).unwrap();
        }
        out
    }
}

thread_local! {
    /// (what arrived, outcome) -> count, to check the property reaches
    /// every rule.
    static CENSUS: std::cell::RefCell<BTreeMap<(&'static str, &'static str), usize>> = Default::default();
}

fn census(c: &Change, outcome: RemoteOutcome, response: bool) {
    let kind = match &c.kind {
        ChangeKind::Full {
            value: Value::Str(_),
            ..
        } => "full string",
        ChangeKind::Full {
            value: Value::Hash(_),
            ..
        } => "full hash",
        ChangeKind::Full {
            value: Value::Counter(_),
            ..
        } => "full counter",
        ChangeKind::Full { .. } => "full set",
        ChangeKind::Delta {
            op: DeltaOp::Count { .. },
            ..
        } => "count",
        ChangeKind::Delta {
            op: DeltaOp::HashCount { .. },
            ..
        } => "hash count",
        ChangeKind::Delta {
            op: DeltaOp::FloatCount { .. },
            ..
        } => "float count",
        ChangeKind::Delta {
            op: DeltaOp::ZCount { .. },
            ..
        } => "score count",
        ChangeKind::Delta {
            op: DeltaOp::ZAssign { .. },
            ..
        } => "score assign",
        ChangeKind::Delta {
            op: DeltaOp::HashFloatCount { .. },
            ..
        } => "hash float count",
        ChangeKind::Delta { op, .. } if op.needs_base() => "string delta",
        ChangeKind::Delta {
            op: DeltaOp::HllMax { .. },
            ..
        } => "hll max",
        ChangeKind::Delta {
            op: DeltaOp::BitsOr { .. },
            ..
        } => "bits or",
        ChangeKind::Delta {
            op: DeltaOp::SetAdd { .. } | DeltaOp::ZAdd { .. },
            ..
        } => "add members",
        ChangeKind::Delta {
            op: DeltaOp::Remove { .. },
            ..
        } => "remove members",
        ChangeKind::Delta {
            op: DeltaOp::HashSet { .. },
            ..
        } => "hset",
        ChangeKind::Delta {
            op: DeltaOp::HashDel { .. },
            ..
        } => "hdel",
        ChangeKind::Delta { .. } => "expiry",
        ChangeKind::Delete | ChangeKind::Expire => "delete",
        ChangeKind::Evict => "evict",
    };
    let kind = match (response, kind) {
        (false, k) => k,
        (true, "full string") => "resent full string",
        (true, "full hash") => "resent full hash",
        (true, "full set") => "resent full set",
        (true, _) => "resent floor",
    };
    let outcome = match outcome {
        Applied => "applied",
        Duplicate => "duplicate",
        ConflictLost => "conflict lost",
        NeedFull => "need full",
    };
    CENSUS.with(|c| *c.borrow_mut().entry((kind, outcome)).or_default() += 1);
}

/// Applies a change from `from` at `to`, answering NeedFull with `from`'s
/// current value of the key: at once, or into `owed` to be sent later.
fn deliver(
    to: &Site,
    from: &Site,
    c: Change,
    owed: Option<&mut Vec<Change>>,
) -> Result<(), TestCaseError> {
    let key = c.key.clone();
    let outcome = to.ks.apply_remote(c.clone(), 0);
    prop_assert!(outcome.is_ok(), "{:?} on {:?}", outcome, c);
    let outcome = outcome.unwrap();
    if std::env::var_os("TRACE_KEY").is_some_and(|k| k.as_encoded_bytes() == &c.key[..]) {
        eprintln!("{} <- {}: {:?} => {:?}", to.id, from.id, c, outcome);
    }
    census(&c, outcome, false);
    if outcome == NeedFull {
        let fulls = from.ks.full_changes(&key);
        match owed {
            Some(owed) => owed.extend(fulls),
            None => {
                for full in fulls {
                    deliver_full(to, full)?;
                }
            }
        }
    }
    Ok(())
}

fn deliver_full(to: &Site, full: Change) -> Result<(), TestCaseError> {
    let o = to.ks.apply_remote(full.clone(), 0);
    prop_assert!(
        matches!(o, Ok(Applied | Duplicate | ConflictLost)),
        "{:?} on full {:?}",
        o,
        full
    );
    if std::env::var_os("TRACE_KEY").is_some_and(|k| k.as_encoded_bytes() == &full.key[..]) {
        eprintln!("{} <- full: {:?} => {:?}", to.id, full, o);
    }
    census(&full, o.unwrap(), true);
    Ok(())
}

/// Runs `actions` on `skews.len()` sites (site i's clock `skews[i]` ms
/// ahead), in a full mesh, then delivers everything still in flight and
/// checks that all sites, and each site's backup, hold the same.
fn converge(actions: Vec<Action>, skews: &[u64]) -> Result<(), TestCaseError> {
    let n = skews.len();
    let sites: Vec<Site> = skews
        .iter()
        .enumerate()
        .map(|(i, skew)| Site::new(i as u16 + 1, *skew))
        .collect();
    // What each site logged that originated there; per (from, to) pair, how
    // much of it was sent and the full values owed.
    let mut outbox: Vec<Vec<Change>> = vec![Vec::new(); n];
    let mut sent = vec![vec![0usize; n]; n];
    let mut owed: Vec<Vec<Vec<Change>>> = vec![vec![Vec::new(); n]; n];
    let drain = |outbox: &mut Vec<Vec<Change>>| {
        for (i, s) in sites.iter().enumerate() {
            outbox[i].extend(s.drain());
        }
    };
    // The receiving site: any other than `from`.
    let other = |from: usize, pick: usize| (from + 1 + pick % (n - 1)) % n;
    for a in actions {
        match a {
            Action::Local(s, op) => run_local(&sites[s].ks, op),
            Action::Deliver(from, pick, k, late) => {
                let to = other(from, pick);
                for _ in 0..k {
                    if sent[from][to] < outbox[from].len() {
                        let c = outbox[from][sent[from][to]].clone();
                        sent[from][to] += 1;
                        deliver(
                            &sites[to],
                            &sites[from],
                            c,
                            late.then_some(&mut owed[from][to]),
                        )?;
                        drain(&mut outbox);
                    }
                }
            }
            Action::Late(from, pick) => {
                let to = other(from, pick);
                for full in std::mem::take(&mut owed[from][to]) {
                    deliver_full(&sites[to], full)?;
                }
            }
            Action::Resend(from, pick, i) => {
                let to = other(from, pick);
                if sent[from][to] > 0 {
                    let c = outbox[from][i as usize % sent[from][to]].clone();
                    deliver(&sites[to], &sites[from], c, None)?;
                }
            }
            Action::Advance(s, ms) => {
                sites[s].clock.advance(ms as u64);
            }
        }
        drain(&mut outbox);
    }
    // Everything still queued or owed is delivered.
    let pending =
        |sent: &Vec<Vec<usize>>, outbox: &Vec<Vec<Change>>, owed: &Vec<Vec<Vec<Change>>>| {
            (0..n).any(|f| {
                (0..n).any(|t| f != t && (sent[f][t] < outbox[f].len() || !owed[f][t].is_empty()))
            })
        };
    while pending(&sent, &outbox, &owed) {
        for from in 0..n {
            for to in (0..n).filter(|t| *t != from) {
                for full in std::mem::take(&mut owed[from][to]) {
                    deliver_full(&sites[to], full)?;
                    drain(&mut outbox);
                }
                while sent[from][to] < outbox[from].len() {
                    let c = outbox[from][sent[from][to]].clone();
                    sent[from][to] += 1;
                    deliver(&sites[to], &sites[from], c, None)?;
                    drain(&mut outbox);
                }
            }
        }
    }
    for s in &sites[1..] {
        prop_assert_eq!(
            state(&sites[0].ks),
            state(&s.ks),
            "site 1 and site {}",
            s.id
        );
    }
    for s in &sites {
        prop_assert_eq!(state(&s.backup), state(&s.ks));
        prop_assert_eq!(tombstones(&s.backup), tombstones(&s.ks));
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(512)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]
    #[test]
    fn three_sites_converge_whatever_the_interleaving(
        actions in proptest::collection::vec(action(3), 1..150),
        skews in proptest::collection::vec(0u64..100, 3),
    ) {
        converge(actions, &skews)?;
    }

    #[test]
    fn two_sites_converge_whatever_the_interleaving(
        actions in proptest::collection::vec(action(2), 1..120),
        skew_ms in 0u64..100,
    ) {
        converge(actions, &[0, skew_ms])?;
    }
}

/// The property is only as good as the paths it takes: over a few hundred
/// runs every rule must be reached.
#[test]
fn convergence_runs_reach_every_rule() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (proptest::collection::vec(action(2), 1..120), 0u64..100);
    for _ in 0..1500 {
        let (actions, skew) = strategy.new_tree(&mut runner).unwrap().current();
        converge(actions, &[0, skew]).unwrap();
    }
    let census = CENSUS.with(|c| c.borrow().clone());
    if std::env::var_os("CENSUS").is_some() {
        eprintln!("{census:#?}");
    }
    for want in [
        ("full string", "applied"),
        ("full string", "conflict lost"),
        ("full string", "duplicate"),
        ("hset", "applied"),
        ("hset", "conflict lost"),
        ("hset", "duplicate"),
        ("hset", "need full"),
        ("hdel", "applied"),
        ("hdel", "conflict lost"),
        ("delete", "applied"),
        ("delete", "conflict lost"),
        ("delete", "duplicate"),
        ("string delta", "applied"),
        ("string delta", "need full"),
        ("string delta", "conflict lost"),
        ("expiry", "applied"),
        ("expiry", "need full"),
        ("resent full string", "applied"),
        ("resent full hash", "applied"),
        ("resent floor", "applied"),
        ("add members", "applied"),
        ("add members", "conflict lost"),
        ("add members", "duplicate"),
        ("remove members", "applied"),
        ("remove members", "conflict lost"),
        ("count", "applied"),
        ("hash count", "applied"),
        ("hash count", "duplicate"),
        ("count", "duplicate"),
        ("count", "conflict lost"),
        ("full counter", "applied"),
        ("float count", "applied"),
        ("float count", "duplicate"),
        ("hash float count", "applied"),
        ("hash float count", "duplicate"),
        ("score count", "applied"),
        ("score count", "duplicate"),
        ("score count", "conflict lost"),
        ("score assign", "applied"),
        ("hll max", "applied"),
        ("hll max", "duplicate"),
        ("hll max", "conflict lost"),
        ("bits or", "applied"),
        ("bits or", "duplicate"),
        ("bits or", "conflict lost"),
    ] {
        assert!(census.contains_key(&want), "no {want:?} in {census:#?}");
    }
}

/// Found by the property: a hash field removal (a hash write) at one site
/// overwrote an older sorted-set member another site still ships in a
/// full value; every site must drop it.
#[test]
fn a_hash_write_removes_older_members_of_a_sorted_set_shipped_whole() {
    use Action::*;
    use Op::*;
    let actions = vec![
        Local(0, HSet(1, vec![(1, vec![])])),
        Local(0, SetSimilar(0, 0, 97)),
        Deliver(0, 0, 1, false),
        Deliver(0, 1, 1, false),
        Local(2, Set(2, vec![], false)),
        Local(2, Del(1)),
        Local(2, ZAdd(1, vec![(0, 0)])),
        Deliver(2, 2, 3, false),
        Local(0, Set(2, vec![], false)),
        Advance(0, 1),
        Deliver(0, 2, 2, false),
        Local(0, ZAdd(1, vec![(1, 0)])),
        Local(0, Append(0, vec![])),
        Local(1, HDel(1, vec![0])),
    ];
    converge(actions, &[47, 0, 0]).unwrap();
}

#[test]
fn a_change_further_ahead_than_max_clock_offset_is_refused_and_not_adopted() {
    let ks = keyspace(1);
    let before = ks.hlc().tick();
    // A remote clock 8,900 years ahead: refused, nothing stored, this
    // clock not dragged along, the refusal counted.
    let far = Version {
        hlc: u64::MAX - 1,
        site: 2,
    };
    assert!(matches!(
        ks.apply_remote(full("k", "from the future", far), 0),
        Err(ApplyError::ClockAhead { max_ms: 500, .. })
    ));
    assert_eq!(string(&ks, "k"), None);
    assert!(ks.hlc().tick() < before + (10_000 << 16));
    assert_eq!(ks.hlc().ahead_count(), 1);
    // Within the offset it applies.
    let near = remote_version(&ks, 300 << 16);
    assert_eq!(apply(&ks, &full("k", "near", near)), Applied);
    assert_eq!(string(&ks, "k"), Some(b("near")));
}
