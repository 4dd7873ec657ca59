//! Both sides of replication together: a primary's queues shipped to a
//! replica, its acks taken back, without sockets.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use keyspace::{codec, Change, ChangeKind, DebugClock, Keyspace, KeyspaceConfig, Value, Version};
use proptest::prelude::*;

use super::primary::snapshot::CHUNK_BYTES;
use super::*;
use crate::placement::SharedTable;

/// The replica holds partition `p` up to `seq`.
fn applied(p: u16, seq: u64) -> Ack {
    Ack::Applied { partition: p, seq }
}

/// The replica's copy of partition `p` needs a snapshot.
fn needed(p: u16) -> Ack {
    Ack::SnapshotNeeded { partition: p }
}

/// Four partitions, a log kept (so received batches are held).
pub(crate) fn keyspace() -> Arc<Keyspace> {
    Arc::new(Keyspace::new(
        KeyspaceConfig {
            partitions: 4,
            site_id: 1,
            log_retain_bytes: 1 << 20,
            ..Default::default()
        },
        Arc::new(DebugClock::default()),
    ))
}

fn replicator() -> Arc<Replicator> {
    let ks = keyspace();
    for p in 0..4 {
        ks.set_replica(p, true);
    }
    Replicator::new(
        ks,
        SharedTable::default(),
        Arc::new(crate::lease::Lease::held(2)),
        2,
        1,
    )
}

/// A write of `value` to `key` at hlc `i` of site 1.
fn set(key: impl Into<Bytes>, i: u64, value: impl Into<Bytes>) -> Change {
    Change {
        key: key.into(),
        version: Version {
            hlc: i << 16,
            site: 1,
        },
        kind: ChangeKind::Full {
            value: Value::str(value.into()),
            expire_at: 0,
        },
    }
}

/// The keys "k0", "k1"... of partition `p` among the first `n`.
fn keys_in(ks: &Keyspace, p: usize, n: usize) -> Vec<Bytes> {
    (0..n)
        .map(|i| Bytes::from(format!("k{i}")))
        .filter(|k| ks.partition_of(k) == p)
        .collect()
}

/// About 6 MiB of 600-byte values in partition `p` of `primary` (six
/// snapshot chunks); returns the keys.
fn fill(primary: &Replicator, p: usize) -> Vec<Bytes> {
    let keys = keys_in(&primary.ks, p, 40_000);
    for (i, k) in keys.iter().enumerate() {
        let change = set(k.clone(), i as u64 + 1, vec![b'x'; 600]);
        primary.ks.apply_batch(p, vec![change], 0).unwrap();
    }
    keys
}

fn entry(p: u16, seq: u64, key: &str, value: &str) -> BytesMut {
    let change = set(key.to_string(), seq, value.to_string());
    let mut body = Vec::new();
    codec::encode(&change, &mut body);
    let mut out = BytesMut::new();
    Entry::Change {
        partition: p,
        seq,
        change: &body,
    }
    .encode(&mut out);
    out
}

/// One batch of changes to key "k", (seq, value) each.
fn batch_of(p: u16, changes: &[(u64, &str)]) -> BytesMut {
    let mut batch = BytesMut::new();
    for &(seq, value) in changes {
        batch.extend_from_slice(&entry(p, seq, "k", value));
    }
    batch
}

#[test]
fn batches_apply_in_seq_order_and_resent_entries_change_nothing() {
    let r = replicator();
    let p = r.ks.partition_of(b"k") as u16;
    let batch = batch_of(p, &[(1, "a"), (2, "b")]);
    assert_eq!(
        r.apply_batch(batch.clone().freeze(), 0).unwrap(),
        vec![applied(p, 2)]
    );
    // The same batch again: seqs already held are skipped.
    assert_eq!(
        r.apply_batch(batch.freeze(), 0).unwrap(),
        vec![applied(p, 2)]
    );
    let mut txn = r.ks.txn([&b"k"[..]], 0);
    assert_eq!(
        txn.get(b"k").and_then(|e| e.as_str()).map(|b| b.to_vec()),
        Some(b"b".to_vec())
    );
}

/// A failover with two replicas: the dead primary (member 0) sent seq 3
/// to this replica but not to the promoted one (member 2), whose own
/// change 3 is another history. This replica must not skip it as held
/// (and acknowledge it), nor apply anything after it, until a snapshot
/// of the new primary replaces the copy.
#[test]
fn a_held_seq_from_a_new_primary_is_a_divergence_not_a_duplicate() {
    let r = replicator();
    let p = r.ks.partition_of(b"k") as u16;
    let old = batch_of(p, &[(1, "a"), (2, "b"), (3, "lost")]);
    assert_eq!(r.apply_batch(old.freeze(), 0).unwrap(), vec![applied(p, 3)]);
    let new = batch_of(p, &[(3, "acked"), (4, "later")]);
    assert_eq!(r.apply_batch(new.freeze(), 2).unwrap(), vec![needed(p)]);
    // Nothing of the new primary's is applied or acknowledged, even at
    // a seq past the ones held, until the copy is replaced.
    assert_eq!(
        r.apply_batch(entry(p, 4, "k", "later").freeze(), 2)
            .unwrap(),
        vec![needed(p)]
    );
    let mut txn = r.ks.txn([&b"k"[..]], 0);
    assert_eq!(
        txn.get(b"k").and_then(|e| e.as_str()).map(|b| b.to_vec()),
        Some(b"lost".to_vec())
    );
    drop(txn);
    // Its snapshot (at the new primary's next seq 4) resets the copy:
    // changes from seq 4 on apply again.
    let mut snap = BytesMut::new();
    Entry::SnapshotBegin {
        partition: p,
        next: 4,
        settled: 0,
    }
    .encode(&mut snap);
    Entry::SnapshotEnd {
        partition: p,
        next: 4,
        id: 7,
        entries: 0,
    }
    .encode(&mut snap);
    assert_eq!(
        r.apply_batch(snap.freeze(), 2).unwrap(),
        vec![
            applied(p, 3),
            Ack::SnapshotLoaded {
                partition: p,
                id: 7
            }
        ]
    );
    assert_eq!(
        r.apply_batch(entry(p, 4, "k", "later").freeze(), 2)
            .unwrap(),
        vec![applied(p, 4)]
    );
}

/// A copy loaded from disk is brought up to date from its primary's log
/// only when it is still that copy, at that seq, with that last change;
/// otherwise the catch-up's end is refused (and a snapshot follows).
#[test]
fn a_catch_up_continues_a_copy_loaded_from_disk_and_nothing_else() {
    let p = replicator().ks.partition_of(b"k") as u16;
    let version = set("k", 2, "b").version;
    // As recovery leaves it: seqs 1 and 2 replayed from disk.
    let recovered = || {
        let r = replicator();
        r.ks.recover_change(p as usize, 1, set("k", 1, "a"))
            .unwrap();
        r.ks.recover_change(p as usize, 2, set("k", 2, "b"))
            .unwrap();
        assert_eq!(r.ks.recovered_tails(), vec![(p, 3, version)]);
        r
    };
    let catch_up = |next: u64, hlc: u64, id: u64| {
        let mut b = BytesMut::new();
        Entry::CatchUpBegin {
            partition: p,
            next,
            hlc,
            site: version.site,
        }
        .encode(&mut b);
        b.extend_from_slice(&entry(p, 3, "k", "c"));
        Entry::SnapshotEnd {
            partition: p,
            next: 4,
            id,
            entries: 0,
        }
        .encode(&mut b);
        b.freeze()
    };
    // Another last change: refused, nothing applied until a snapshot.
    let r = recovered();
    assert_eq!(
        r.apply_batch(catch_up(3, version.hlc + 1, 1), 2).unwrap(),
        vec![
            Ack::SnapshotRefused {
                partition: p,
                id: 1
            },
            needed(p)
        ]
    );
    // The copy did not change: the right catch-up still applies.
    assert_eq!(
        r.apply_batch(catch_up(3, version.hlc, 2), 2).unwrap(),
        vec![
            applied(p, 3),
            Ack::SnapshotLoaded {
                partition: p,
                id: 2
            }
        ]
    );
    // Used once: the copy moved on.
    assert!(r.ks.recovered_tails().is_empty());
    // A copy that moved on since (here: a change applied) is not caught up.
    let r = recovered();
    r.apply_batch(entry(p, 3, "k", "c").freeze(), 2).unwrap();
    assert_eq!(
        r.apply_batch(catch_up(3, version.hlc, 3), 2).unwrap(),
        vec![
            Ack::SnapshotRefused {
                partition: p,
                id: 3
            },
            needed(p)
        ]
    );
}

/// A copy that never held anything (a process restarted without its
/// data, still listed as a replica) does not take a primary's change at
/// seq 5 as the start of its copy: that is a gap, and it asks for a
/// snapshot instead of acknowledging what it does not hold.
#[test]
fn an_empty_copy_is_not_started_by_a_later_change() {
    let r = replicator();
    let p = r.ks.partition_of(b"k") as u16;
    assert_eq!(
        r.apply_batch(batch_of(p, &[(5, "x")]).freeze(), 0).unwrap(),
        vec![needed(p)]
    );
    assert_eq!(
        r.ks.with_partition(p as usize, |part, _| (part.len(), part.log.next_seq())),
        (0, 1)
    );
}

/// The promoted replica held everything this one did: its first change
/// follows on, and this replica stays in sync without a snapshot.
#[test]
fn a_new_primary_that_shares_the_history_is_followed_without_a_snapshot() {
    let r = replicator();
    let p = r.ks.partition_of(b"k") as u16;
    let old = batch_of(p, &[(1, "a"), (2, "b")]);
    assert_eq!(r.apply_batch(old.freeze(), 0).unwrap(), vec![applied(p, 2)]);
    let new = entry(p, 3, "k", "c");
    assert_eq!(
        r.apply_batch(new.clone().freeze(), 2).unwrap(),
        vec![applied(p, 3)]
    );
    // And the new primary's batch again is a duplicate, not a divergence.
    assert_eq!(r.apply_batch(new.freeze(), 2).unwrap(), vec![applied(p, 3)]);
}

#[test]
fn bad_batches_are_errors() {
    let r = replicator();
    let p = r.ks.partition_of(b"k") as u16;
    let good = entry(p, 1, "k", "v");
    assert_eq!(
        r.apply_batch(Bytes::copy_from_slice(&good[..good.len() - 1]), 0),
        Err(BatchError::Truncated)
    );
    assert_eq!(
        r.apply_batch(entry(9, 1, "k", "v").freeze(), 0),
        Err(BatchError::Partition(9))
    );
    let other = (p + 1) % 4;
    assert_eq!(
        r.apply_batch(entry(other, 1, "k", "v").freeze(), 0),
        Err(BatchError::Partition(other))
    );
}

#[test]
fn a_snapshot_larger_than_a_chunk_streams_ahead_of_queued_changes() {
    let primary = replicator();
    let p = primary.ks.partition_of(b"k0");
    primary.ks.set_replica(p, false);
    let keys = fill(&primary, p);
    let key0 = std::str::from_utf8(&keys[0]).unwrap();
    let mut live = BytesMut::new();
    let next = primary.ks.with_partition(p, |part, _| part.log.next_seq());
    assert!(primary.send_snapshot(p, 0, 7));
    assert!(!primary.send_snapshot(p, 0, 7), "once per epoch");
    // A change logged after the snapshot point, already queued.
    live.extend_from_slice(&entry(p as u16, next, key0, "after"));
    primary.primary.queues[0]
        .buf
        .lock()
        .extend_from_slice(&live);

    let replica = replicator();
    let mut batches = 0;
    let mut acks = Vec::new();
    while let Some((batch, _)) = primary.take_batch(0) {
        assert!(batch.len() < 2 * CHUNK_BYTES);
        acks.extend(replica.apply_batch(batch, 0).unwrap());
        batches += 1;
    }
    assert!(batches > 4, "{batches} batches");
    assert!(acks
        .iter()
        .any(|a| matches!(a, Ack::SnapshotLoaded { partition, .. } if *partition == p as u16)));
    assert_eq!(
        acks.last(),
        Some(&applied(p as u16, next)),
        "the queued change came after the snapshot"
    );
    let (have, want) = (
        replica.ks.with_partition(p, |part, _| part.len()),
        keys.len(),
    );
    assert_eq!(have, want);
    let mut txn = replica.ks.txn([&keys[0][..]], 0);
    assert_eq!(
        txn.get(&keys[0][..])
            .and_then(|e| e.as_str())
            .map(|b| b.to_vec()),
        Some(b"after".to_vec())
    );
}

/// Four partitions, each with primary member 0 and replica member 1
/// (in sync or not), all at partition epoch `epoch`.
fn table(epoch: u64, in_sync: bool) -> crate::placement::PartitionTable {
    let owners = |_| crate::placement::PartitionOwners {
        primary: 0,
        replicas: [1].into_iter().collect(),
        in_sync: if in_sync {
            [1].into_iter().collect()
        } else {
            Default::default()
        },
        epoch,
        moving_to: None,
    };
    crate::placement::PartitionTable::new(epoch, (0..4).map(owners).collect())
}

/// A replicator's keyspace, for tests outside this module.
pub(crate) fn keyspace_of(r: &Replicator) -> &Arc<Keyspace> {
    &r.ks
}

/// A primary (member 0) whose partitions all have member 1 as a
/// replica that is not in sync yet, with itself as the keyspace's sink.
pub(crate) fn primary_with_replica() -> Arc<Replicator> {
    primary_with_lease(Arc::new(crate::lease::Lease::held(2)))
}

fn primary_with_lease(lease: Arc<crate::lease::Lease>) -> Arc<Replicator> {
    let ks = keyspace();
    let shared = SharedTable::default();
    shared.store(Some(Arc::new(table(1, false))));
    let r = Replicator::new(ks.clone(), shared, lease, 2, 0);
    ks.set_sink(r.clone());
    r
}

/// Every batch queued for member 1, applied by `replica`, its acks
/// returned to `primary`.
fn ship(primary: &Replicator, replica: &Replicator) {
    while let Some((batch, _)) = primary.take_batch(1) {
        answer(primary, replica, batch);
    }
}

/// `batch` applied by `replica`, its acks returned to `primary` (as
/// member 1); returns the acks.
fn answer(primary: &Replicator, replica: &Replicator, batch: Bytes) -> Vec<Ack> {
    let applied = replica.apply_batch(batch, 0).unwrap();
    let mut acks = BytesMut::new();
    Replicator::encode_acks(&applied, &mut acks);
    primary.acked_by(1, acks.freeze());
    applied
}

fn contents(r: &Replicator, p: usize) -> Vec<(Bytes, Version)> {
    r.ks.with_partition(p, |part, _| {
        let mut keys: Vec<_> = part
            .iter()
            .map(|(k, e)| (k.to_bytes(), e.version))
            .collect();
        keys.sort();
        keys
    })
}

/// A replica's logs store nothing; promoted, its log holds what it
/// received from where every remote site applied, as its primary's
/// did, and it keeps that through being handed back and forth.
#[test]
fn a_promoted_replica_logs_what_it_received_from_where_every_site_applied() {
    let primary = primary_with_replica();
    let replica = replicator();
    let p = primary.ks.partition_of(b"k0");
    for i in 1..=10u64 {
        let change = set(format!("k{}", i % 3), i, vec![b'v'; 100 * i as usize]);
        let p_of = primary.ks.partition_of(&change.key);
        primary.ks.apply_batch(p_of, vec![change], 0).unwrap();
    }
    ship(&primary, &replica);
    let log = |r: &Replicator, from: u64| {
        r.ks.with_partition(p, |part, _| {
            part.log
                .read_from(from)
                .map(|it| it.map(|l| (l.seq, l.encoded.to_vec())).collect::<Vec<_>>())
        })
    };
    let next = replica.ks.with_partition(p, |part, _| part.log.next_seq());
    assert!(next > 3, "changes of partition {p} reached the replica");
    assert_eq!(
        replica.ks.with_partition(p, |part, _| part.log.len()),
        0,
        "a replica's log stores nothing"
    );
    assert!(replica.ks.log_bytes() > 0, "the batches are held instead");
    replica.ks.release_log_before(p, 3);
    // Promoted with another copy (one pass over what was received).
    replica.ks.set_replicas(&[(p, false), ((p + 1) % 4, false)]);
    let want = log(&primary, 3).unwrap();
    assert_eq!(want.len() as u64, next - 3);
    assert_eq!(log(&replica, 3), Some(want.clone()));
    assert_eq!(
        log(&replica, 2),
        None,
        "what every site applied is not kept"
    );
    // Handed back (a handover), then promoted again.
    replica.ks.set_replica(p, true);
    assert_eq!(replica.ks.with_partition(p, |part, _| part.log.len()), 0);
    replica.ks.set_replica(p, false);
    assert_eq!(log(&replica, 3), Some(want));
    // A snapshot replaces the copy: nothing of the old one comes back.
    replica.ks.set_replica(p, true);
    replica.ks.reset_replica(p, (next + 5, 0), 0).unwrap();
    replica.ks.set_replica(p, false);
    assert_eq!(
        replica
            .ks
            .with_partition(p, |part, _| (part.log.len(), part.log.next_seq())),
        (0, next + 5)
    );
}

/// A stale primary's batch for a partition this node leads is held
/// before it is refused; refused, it goes at once instead of keeping
/// the received queue's front until the budget trims it.
#[test]
fn changes_a_leader_refuses_are_not_held() {
    let primary = primary_with_replica();
    let replica = replicator();
    let p = primary.ks.partition_of(b"k0");
    let keys: Vec<Bytes> = keys_in(&primary.ks, p, 200).into_iter().take(6).collect();
    let write = |i: u64| {
        for k in &keys {
            let change = set(k.clone(), i, vec![b'v'; 300]);
            primary.ks.apply_batch(p, vec![change], 0).unwrap();
        }
    };
    write(1);
    ship(&primary, &replica);
    replica.ks.set_replica(p, false);
    assert_eq!(
        replica.ks.with_partition(p, |part, _| part.log.len()),
        keys.len(),
        "promoted with what it received"
    );
    // The old primary goes on sending: refused, and not kept.
    write(2);
    ship(&primary, &replica);
    let (len, log) = replica
        .ks
        .with_partition(p, |part, _| (part.log.len(), part.log.allocated()));
    assert_eq!(len, keys.len());
    assert_eq!(
        replica.ks.log_bytes(),
        log,
        "nothing held but the promoted copy's log"
    );
}

/// Snapshots taken again and again while a writer keeps logging and
/// the connection keeps shipping: no change logged after a snapshot's
/// point may reach the replica ahead of it (the replica would
/// acknowledge it, then lose it to the snapshot's reset).
#[test]
fn snapshots_taken_while_changes_flow_lose_none_of_them() {
    let primary = primary_with_replica();
    let replica = replicator();
    let p = primary.ks.partition_of(b"k0");
    let keys: Vec<Bytes> = keys_in(&primary.ks, p, 2_000)
        .into_iter()
        .take(64)
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (primary, stop, keys) = (primary.clone(), stop.clone(), keys.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let change = set(keys[i as usize % keys.len()].clone(), i, i.to_string());
                primary.ks.apply_batch(p, vec![change], 0).unwrap();
            }
        })
    };
    let snapshotter = {
        let (primary, stop) = (primary.clone(), stop.clone());
        std::thread::spawn(move || {
            for epoch in 2..3_000 {
                assert!(primary.send_snapshot(p, 1, epoch));
                std::thread::yield_now();
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    while !stop.load(Ordering::Relaxed) {
        ship(&primary, &replica);
    }
    writer.join().unwrap();
    snapshotter.join().unwrap();
    ship(&primary, &replica);
    let last = primary
        .ks
        .with_partition(p, |part, _| part.log.next_seq() - 1);
    assert_eq!(
        replica
            .ks
            .with_partition(p, |part, _| part.log.next_seq() - 1),
        last
    );
    assert_eq!(primary.primary.acked[1][p].load(Ordering::Acquire), last);
    assert_eq!(contents(&replica, p), contents(&primary, p));
    assert_eq!(primary.take_finished_snapshots(), vec![(p, 1, 2_999)]);
}

/// The end of a snapshot that a newer one replaced, acknowledged
/// late, does not count the replica as loaded.
#[test]
fn the_late_end_of_a_replaced_snapshot_does_not_count() {
    let primary = primary_with_replica();
    let replica = replicator();
    let p = primary.ks.partition_of(b"k");
    assert!(primary.send_snapshot(p, 1, 2));
    let (first, _) = primary.take_batch(1).unwrap();
    assert!(primary.send_snapshot(p, 1, 3));
    answer(&primary, &replica, first);
    assert_eq!(primary.take_finished_snapshots(), vec![]);
    ship(&primary, &replica);
    assert_eq!(primary.take_finished_snapshots(), vec![(p, 1, 3)]);
}

/// The primary writes value `i` to key "k" at hlc `i`.
fn write_k(primary: &Replicator, i: u64) {
    let change = set("k", i, i.to_string());
    primary
        .ks
        .apply_batch(primary.ks.partition_of(b"k"), vec![change], 0)
        .unwrap();
}

/// A table at `epoch` where every partition is led by member
/// `primary` and backed up by member 1.
fn led_by(primary: usize, epoch: u64) -> Option<Arc<crate::placement::PartitionTable>> {
    let mut t = table(epoch, true);
    t.epoch = epoch;
    t.partitions.iter_mut().for_each(|o| o.primary = primary);
    Some(Arc::new(t))
}

/// A primary that a newer table replaced (it was cut off, or its
/// metadata lags) gets nothing applied, held or acknowledged at a
/// replica that has the newer table; a primary whose table merely lags
/// the replica's, but which the replica's table still names, is followed.
#[test]
fn a_replaced_primary_gets_nothing_applied_or_acknowledged() {
    let primary = primary_with_replica(); // its table: epoch 1, member 0 leads
    write_k(&primary, 1);
    let (batch, _) = primary.take_batch(1).expect("a batch for the replica");
    let p = primary.ks.partition_of(b"k");
    let replica = replicator();
    replica.table.store(led_by(2, 5)); // epoch 5: member 2 leads now
    assert_eq!(
        replica.apply_batch(batch.clone(), 0).unwrap(),
        vec![],
        "no ack for the replaced primary"
    );
    assert!(contents(&replica, p).is_empty(), "nothing applied");
    assert_eq!(replica.ks.log_bytes(), 0, "nothing held");
    // The same batch, the replica's newer table still naming member 0.
    replica.table.store(led_by(0, 5));
    assert_eq!(
        replica.apply_batch(batch.clone(), 0).unwrap(),
        vec![applied(p as u16, 1)]
    );
    // And a sender whose table is as new as the replica's is trusted.
    let fresh = replicator();
    fresh.table.store(led_by(2, 1));
    assert_eq!(
        fresh.apply_batch(batch, 0).unwrap(),
        vec![applied(p as u16, 1)]
    );
}

/// What may leave the site is what outlives the primary: everything
/// while no replica is waited for, else up to what every waited-for
/// replica acknowledged (a loaded snapshot counts for what it held),
/// and, on a promoted copy, what its log held when promoted.
#[test]
fn only_what_the_replicas_hold_is_durable() {
    let primary = primary_with_replica();
    let replica = replicator();
    let p = primary.ks.partition_of(b"k");
    let write = |i: u64| write_k(&primary, i);
    write(1);
    assert_eq!(
        primary.durable_seq(p),
        u64::MAX,
        "the replica is not in sync: nothing is waited for"
    );
    primary.table.store(Some(Arc::new(table(2, true))));
    primary.table_changed();
    assert_eq!(
        primary.durable_seq(p),
        0,
        "the replica has acknowledged nothing yet"
    );
    ship(&primary, &replica);
    assert_eq!(primary.durable_seq(p), 1);
    write(2);
    write(3);
    assert_eq!(
        primary.durable_seq(p),
        1,
        "seqs 2 and 3 are not on the replica yet"
    );
    ship(&primary, &replica);
    assert_eq!(primary.durable_seq(p), 3);
    // A new copy from a snapshot: nothing until it is loaded, then
    // what the snapshot held, though no change came after it.
    replica.ks.set_replica(p, true);
    assert!(primary.send_snapshot(p, 1, 3));
    assert_eq!(primary.durable_seq(p), 0);
    ship(&primary, &replica);
    assert_eq!(primary.durable_seq(p), 3);
    assert_eq!(replica.durable_seq(p), 0, "not its primary");
    // Promoted, a copy may ship what its log held.
    replica.ks.set_replica(p, false);
    assert_eq!(
        replica
            .ks
            .with_partition(p, |part, _| part.promoted_through),
        3
    );
}

/// A write its replicas acknowledged is released only while the
/// primary's lease holds: a primary cut off from the majority, or back
/// from a cut with a table that was replaced, acknowledges nothing.
#[tokio::test]
async fn a_write_is_released_only_while_the_lease_holds() {
    let lease = Arc::new(crate::lease::Lease::new(2));
    let primary = primary_with_lease(lease.clone());
    primary.table.store(Some(Arc::new(table(2, true))));
    let replica = replicator();
    write_k(&primary, 1);
    let p = primary.ks.partition_of(b"k");
    ship(&primary, &replica);
    assert_eq!(primary.durable_seq(p), 1, "the replica has it");
    let waiting = tokio::spawn({
        let primary = primary.clone();
        async move { primary.wait(&[(p, 1)]).await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!waiting.is_finished(), "no lease: not acknowledged");
    assert_eq!(lease.refresh(Some(0), &[0, 1]), (false, false));
    lease.grant(1, lease.now());
    assert_eq!(lease.refresh(Some(0), &[0, 1]), (false, true));
    primary.sweep();
    let acked = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("released")
        .unwrap();
    assert!(acked);
}

/// A connection broke with a batch in flight: the connection gives it
/// back, it goes out again ahead of what was queued meanwhile, and the
/// replica fills in what it missed instead of finding a gap. Given back
/// after it did arrive, it changes nothing.
#[test]
fn a_batch_unanswered_when_its_connection_broke_is_sent_again() {
    let primary = primary_with_replica();
    let replica = replicator();
    let p = primary.ks.partition_of(b"k");
    let write = |i: u64| write_k(&primary, i);
    write(1);
    ship(&primary, &replica);
    write(2);
    write(3);
    let (lost, _) = primary.take_batch(1).unwrap(); // in flight when the connection broke
    write(4); // queued while it was down
    primary.requeue(1, [lost]);
    let (batch, _) = primary.take_batch(1).unwrap();
    let acks = answer(&primary, &replica, batch.clone());
    assert_eq!(
        acks,
        vec![applied(p as u16, 4)],
        "seqs 2 to 4 arrive in order"
    );
    assert_eq!(contents(&replica, p), contents(&primary, p));
    // The same batch given back though it had arrived: all skipped.
    primary.requeue(1, [batch]);
    ship(&primary, &replica);
    assert_eq!(contents(&replica, p), contents(&primary, p));
}

/// A node that does not hold the partition as a replica copy yet (its
/// table is older than the primary's) refuses the snapshot at its end
/// instead of acknowledging what it did not load; the primary forgets
/// it, so that it can be sent again.
#[test]
fn a_snapshot_the_replica_could_not_load_is_refused_not_acknowledged() {
    let primary = primary_with_replica();
    let replica = replicator();
    let p = primary.ks.partition_of(b"k");
    replica.ks.set_replica(p, false);
    assert!(primary.send_snapshot(p, 1, 2));
    let (batch, _) = primary.take_batch(1).unwrap();
    let applied = answer(&primary, &replica, batch);
    assert_eq!(
        applied,
        vec![Ack::SnapshotRefused {
            partition: p as u16,
            id: 1
        }]
    );
    assert_eq!(primary.take_finished_snapshots(), vec![]);
    assert_eq!(primary.take_refused_snapshots(), vec![(p, 1, 2)]);
    assert!(
        primary.send_snapshot(p, 1, 2),
        "forgotten: it can be sent again"
    );
    replica.ks.set_replica(p, true);
    ship(&primary, &replica);
    assert_eq!(primary.take_finished_snapshots(), vec![(p, 1, 2)]);
}

/// A chunk lost with a connection that broke mid-snapshot: the end
/// finds entries missing and refuses the snapshot.
#[test]
fn a_snapshot_missing_a_chunk_is_refused() {
    let primary = primary_with_replica();
    let replica = replicator();
    let p = primary.ks.partition_of(b"k0");
    fill(&primary, p);
    primary.take_batch(1); // the changes queued so far
    assert!(primary.send_snapshot(p, 1, 2));
    let mut acks = Vec::new();
    let mut n = 0;
    while let Some((batch, _)) = primary.take_batch(1) {
        n += 1;
        if n != 2 {
            acks.extend(replica.apply_batch(batch, 0).unwrap());
        }
    }
    assert!(n > 3, "{n} batches");
    assert!(
        acks.iter()
            .any(|a| matches!(a, Ack::SnapshotRefused { .. }))
            && !acks.iter().any(|a| matches!(a, Ack::SnapshotLoaded { .. })),
        "{acks:?}"
    );
}

/// A replica sent a change past the next seq it holds asks for a
/// snapshot; its primary asks once per partition epoch, and only for
/// an in-sync replica (one that is not has a snapshot coming).
#[test]
fn a_gap_at_an_in_sync_replica_asks_for_a_resync_once_per_epoch() {
    let primary = primary_with_replica();
    let replica = replicator();
    let p = replica.ks.partition_of(b"k");
    let mut batch = entry(p as u16, 1, "k", "a");
    batch.extend_from_slice(&entry(p as u16, 3, "k", "c"));
    batch.extend_from_slice(&entry(p as u16, 4, "k", "d"));
    let acks = answer(&primary, &replica, batch.freeze());
    assert_eq!(acks, vec![applied(p as u16, 1), needed(p as u16)]);
    assert_eq!(
        primary.primary.acked[1][p].load(Ordering::Acquire),
        1,
        "the marker is not a seq"
    );
    assert_eq!(primary.take_gaps(&table(5, true)), vec![(p, 1, 5)]);
    assert_eq!(
        primary.take_gaps(&table(5, true)),
        vec![],
        "asked already at this epoch"
    );
    assert_eq!(
        primary.take_gaps(&table(6, true)),
        vec![(p, 1, 6)],
        "the ask was lost: again"
    );
    primary.ask_gap_again(p, 1);
    assert_eq!(
        primary.take_gaps(&table(6, true)),
        vec![(p, 1, 6)],
        "the proposal failed: again at the same epoch"
    );
    assert_eq!(
        primary.take_gaps(&table(7, false)),
        vec![],
        "out of sync: a snapshot is coming"
    );
    assert_eq!(primary.take_gaps(&table(8, true)), vec![], "and forgotten");
}

proptest! {
    #[test]
    fn random_batches_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let r = replicator();
        let _ = r.apply_batch(Bytes::from(data), 0);
    }

    /// Acks from a peer, whatever they hold, never panic and never
    /// count a marker value as an acknowledged seq.
    #[test]
    fn random_acks_never_panic(acks in proptest::collection::vec((0u16..6, prop_oneof![
        0u64..50,
        // The markers of protocol version 4: a snapshot's end, a copy
        // that needs a snapshot, a refused snapshot, a snapshot's begin
        // and a WAN watermark (which no ack carries).
        Just(u64::MAX - 1),
        Just(u64::MAX - 4),
        Just(u64::MAX - 5),
        Just(u64::MAX),
        Just(u64::MAX - 2),
    ]), 0..20), cut in 0usize..10) {
        let primary = primary_with_replica();
        primary.send_snapshot(0, 1, 2);
        let mut bytes = BytesMut::new();
        for (p, seq) in acks {
            bytes.put_u16_le(p);
            bytes.put_u64_le(seq);
        }
        let len = bytes.len().saturating_sub(cut);
        primary.acked_by(1, bytes.freeze().slice(..len));
        let _ = primary.take_finished_snapshots();
        let _ = primary.take_refused_snapshots();
        for p in 0..4 {
            prop_assert!(primary.primary.acked[1][p].load(Ordering::Acquire) < 50);
        }
    }
}
