//! The log's appends, reads, trims, chunk reuse and a backup's handover,
//! with the node's total kept in step.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::change::{Change, ChangeKind};
use crate::codec;
use crate::version::Version;

fn del(k: &str) -> Change {
    Change {
        key: Bytes::copy_from_slice(k.as_bytes()),
        version: Version::ZERO,
        kind: ChangeKind::Delete,
    }
}

fn set(k: &str, len: usize) -> Change {
    let value = crate::value::Value::str(Bytes::from(vec![b'v'; len]));
    Change {
        key: Bytes::copy_from_slice(k.as_bytes()),
        version: Version::ZERO,
        kind: ChangeKind::Full {
            value,
            expire_at: 0,
        },
    }
}

#[test]
fn a_log_taken_out_and_restored_holds_the_same_changes_and_skips_store_nothing() {
    let mut log = PartitionLog::new(1 << 20);
    let total = Arc::new(AtomicUsize::new(0));
    log.count_in(total.clone());
    for i in 0..5 {
        log.append(&set(&format!("k{i}"), 100 + i));
    }
    let want: Vec<(u64, Vec<u8>)> = log
        .read_from(1)
        .unwrap()
        .map(|l| (l.seq, l.encoded.to_vec()))
        .collect();
    let (payload, held) = log.take_held(7).unwrap();
    assert_eq!(
        (log.len(), log.next_seq(), total.load(Ordering::Relaxed)),
        (0, 6, 0)
    );
    assert!(held.iter().all(|h| h.partition == 7));
    let changes: Vec<(u64, &[u8])> = held
        .iter()
        .map(|h| {
            (
                h.seq,
                &payload[h.start as usize..(h.start + h.len) as usize],
            )
        })
        .collect();
    // Not ending at the log's last seq, or not consecutive: refused.
    log.restore(&changes[..4]);
    assert!(log.is_empty());
    log.restore(&[changes[0], changes[2], changes[3], changes[4]]);
    assert!(log.is_empty());
    log.restore(&changes[1..]);
    let got: Vec<(u64, Vec<u8>)> = log
        .read_from(2)
        .unwrap()
        .map(|l| (l.seq, l.encoded.to_vec()))
        .collect();
    assert_eq!(got, want[1..]);
    assert_eq!(total.load(Ordering::Relaxed), log.allocated());
    // A backup's copy counts the seq and stores nothing.
    assert_eq!(log.skip(&Bytes::from_static(b"k9")), 6);
    assert_eq!(
        (log.len(), log.next_seq(), total.load(Ordering::Relaxed)),
        (0, 7, 0)
    );
}

#[test]
fn the_shared_total_follows_appends_trims_and_resets() {
    let total = Arc::new(AtomicUsize::new(0));
    let (mut a, mut b) = (PartitionLog::new(300), PartitionLog::new(10_000));
    a.append(&del("before"));
    a.count_in(total.clone());
    b.count_in(total.clone());
    let sum = |a: &PartitionLog, b: &PartitionLog| a.allocated() + b.allocated();
    for i in 0..200 {
        a.append(&del(&format!("key{i}")));
        b.append(&del(&format!("key{i}")));
        assert_eq!(total.load(Ordering::Relaxed), sum(&a, &b));
    }
    a.set_needed_from(Some(a.first_seq()));
    a.append(&del("held"));
    a.set_retain_bytes(10);
    a.set_needed_from(None);
    assert_eq!(total.load(Ordering::Relaxed), sum(&a, &b));
    b.reset_to(500);
    assert_eq!(total.load(Ordering::Relaxed), a.allocated());
}

#[test]
fn trims_to_budget_unless_a_consumer_needs_it() {
    let mut log = PartitionLog::new(100);
    for i in 0..100 {
        log.append(&del(&format!("key{i}")));
        // Trimmed when the chunk being filled is full.
        assert!(log.bytes() <= 100 + CHUNK_MAX);
    }
    log.trim();
    assert!(log.bytes() <= 100);
    assert_eq!(log.next_seq(), 101);
    assert!(log.read_from(1).is_none());
    let first = log.first_seq();
    log.set_needed_from(Some(first));
    for i in 0..100 {
        log.append(&del(&format!("key{i}")));
    }
    assert_eq!(log.first_seq(), first);
    assert_eq!(
        log.read_from(first).unwrap().count(),
        (201 - first) as usize
    );
    log.set_needed_from(None);
    assert!(log.bytes() <= 100);
}

#[test]
fn holds_nothing_every_remote_site_applied() {
    // A backup's copy: retention bounds it, and what every remote site
    // applied goes even within that.
    let mut log = PartitionLog::new(1 << 20);
    for i in 0..100 {
        log.append(&del(&format!("key{i}")));
    }
    log.trim();
    assert_eq!(log.first_seq(), 1, "all within retain_bytes");
    log.release_before(60);
    log.trim();
    assert_eq!(log.first_seq(), 60);
    log.release_before(10);
    for i in 100..200 {
        log.append(&del(&format!("key{i}")));
    }
    log.trim();
    assert_eq!(log.first_seq(), 60, "a release never moves back");
    // Promoted, with a publisher's cursor: exactly what it has yet to
    // read, whatever retain_bytes allows.
    log.set_needed_from(Some(150));
    assert_eq!(
        (log.first_seq(), log.read_from(150).unwrap().count()),
        (150, 51)
    );
    // A copy loaded anew starts with no release.
    log.set_needed_from(None);
    log.reset_to(7);
    for i in 0..3 {
        log.append(&del(&format!("again{i}")));
    }
    log.trim();
    assert_eq!((log.first_seq(), log.len()), (7, 3));
}

#[test]
fn keeps_nothing_without_retention_until_a_consumer_registers() {
    let total = Arc::new(AtomicUsize::new(0));
    let mut log = PartitionLog::new(0);
    log.count_in(total.clone());
    for i in 0..10 {
        assert_eq!(log.append(&del(&format!("key{i}"))).0, i + 1);
    }
    assert!(log.is_empty());
    assert_eq!(
        (log.first_seq(), log.bytes(), total.load(Ordering::Relaxed)),
        (11, 0, 0)
    );
    log.set_needed_from(Some(11));
    log.append(&del("kept"));
    assert_eq!(
        log.read_from(11)
            .unwrap()
            .map(|l| l.seq)
            .collect::<Vec<_>>(),
        vec![11]
    );
    assert_eq!(total.load(Ordering::Relaxed), log.allocated());
    log.set_needed_from(None);
    assert!(log.is_empty());
    assert_eq!(total.load(Ordering::Relaxed), 0);
    assert_eq!(log.allocated(), 0, "an empty log holds no chunk");
}

/// Changes of every size, read back by seq and in order while a consumer
/// moves through them. A chunk left when the next change did not fit
/// wastes less than that change, so chunks hold at most twice the
/// changes, plus the chunk being filled and the one partly trimmed.
#[test]
fn reads_back_what_was_appended_and_frees_chunks_as_it_trims() {
    let mut log = PartitionLog::new(0);
    log.set_needed_from(Some(1));
    let mut appended = Vec::new();
    for i in 0..3000usize {
        let change = set(
            &format!("key{i}"),
            (i * 37) % 700 + if i % 500 == 0 { 3 * CHUNK_MAX } else { 0 },
        );
        let (seq, size) = if i % 2 == 0 {
            log.append(&change)
        } else {
            let mut encoded = Vec::new();
            codec::encode(&change, &mut encoded);
            log.append_encoded(&change.key, &encoded)
        };
        assert_eq!(size, codec::encoded_len(&change));
        assert_eq!(codec::decode(log.get(seq).unwrap()).unwrap().0, change);
        appended.push((seq, change));
        if i % 7 == 0 {
            // The consumer is 100 changes behind.
            log.set_needed_from(Some(seq.saturating_sub(100).max(1)));
            let first = log.first_seq();
            let read: Vec<_> = log.changes_from(first).unwrap().collect();
            assert_eq!(read, appended[(first - 1) as usize..]);
            assert!(log.get(first - 1).is_none() || first == 1);
            let largest = read
                .iter()
                .map(|(_, c)| codec::encoded_len(c))
                .max()
                .unwrap_or(0);
            assert!(
                // Spans: never more than ~110 held, so room for 256.
                log.allocated()
                    <= 2 * log.bytes()
                        + 2 * CHUNK_MAX.max(largest)
                        + 256 * std::mem::size_of::<Span>(),
                "{} bytes allocated for {} bytes of changes",
                log.allocated(),
                log.bytes()
            );
        }
    }
    log.set_needed_from(Some(log.next_seq()));
    assert_eq!((log.len(), log.bytes(), log.allocated()), (0, 0, 0));
    assert!(log.read_from(log.next_seq()).unwrap().next().is_none());
    assert!(
        log.read_from(log.next_seq() + 5).unwrap().next().is_none(),
        "a cursor past the end reads nothing"
    );
}

#[test]
fn a_log_that_briefly_holds_two_changes_keeps_its_small_tail() {
    let mut log = PartitionLog::new(0);
    log.set_needed_from(Some(1));
    for round in 0..20usize {
        // Two changes before the acknowledgement of the first: the
        // second needs a chunk of its own, of the first's size.
        let (first, _) = log.append(&set(&format!("a{round}"), 700));
        let (second, _) = log.append(&set(&format!("b{round}"), 700));
        assert_eq!(
            log.tail.capacity(),
            CHUNK_MIN,
            "round {round}: the second chunk did not stay small"
        );
        assert_eq!(
            codec::decode(log.get(first).unwrap()).unwrap().0,
            set(&format!("a{round}"), 700)
        );
        assert!(log.advance_needed_from(second + 1));
        log.trim();
        assert!(log.is_empty());
        assert_eq!(
            log.tail.capacity(),
            CHUNK_MIN,
            "round {round}: the emptied log gave up its tail"
        );
    }
    assert_eq!(
        log.fresh_chunks, 21,
        "one chunk per round for the second change, and the first tail"
    );
}

#[test]
fn a_log_holding_one_change_at_a_time_reuses_its_chunk() {
    let mut log = PartitionLog::new(0);
    log.set_needed_from(Some(1));
    let mut kept = None;
    for i in 0..50usize {
        let change = set(&format!("key{i}"), 700 + i % 13);
        let (seq, _) = log.append(&change);
        let chunk = log.tail.as_ptr();
        assert_eq!(
            *kept.get_or_insert(chunk),
            chunk,
            "change {i} went into a new chunk"
        );
        assert_eq!(
            log.allocated(),
            CHUNK_MIN + log.spans.capacity() * std::mem::size_of::<Span>()
        );
        assert_eq!(codec::decode(log.get(seq).unwrap()).unwrap().0, change);
        // Acknowledged before the next change, as a WAN publisher's
        // acknowledgement does it: the next append trims it.
        assert!(log.advance_needed_from(seq + 1));
        assert_eq!(log.len(), 1);
    }
    log.trim();
    assert_eq!((log.len(), log.bytes()), (0, 0));
    assert!(log.allocated() <= CHUNK_MIN + KEEP_SPANS * std::mem::size_of::<Span>());
    // A larger change takes a chunk of its own size, which goes with it.
    let (seq, _) = log.append(&set("big", 3 * CHUNK_MAX));
    assert_eq!(
        codec::decode(log.get(seq).unwrap()).unwrap().0,
        set("big", 3 * CHUNK_MAX)
    );
    log.set_needed_from(Some(seq + 1));
    assert_eq!(
        log.allocated(),
        log.spans.capacity() * std::mem::size_of::<Span>()
    );
    log.reset_to(seq + 1);
    assert_eq!(log.allocated(), 0, "a reset frees everything");
    let (seq, _) = log.append(&set("small", 10));
    log.set_needed_from(Some(seq + 1));
    assert!(log.is_empty() && log.allocated() > 0);
    log.set_needed_from(None);
    assert_eq!(
        log.allocated(),
        0,
        "a log nobody reads and that retains nothing keeps nothing"
    );
}

/// A log a consumer keeps a few chunks long: a chunk trimming empties
/// becomes the next new one, so most new chunks are not allocated.
#[test]
fn a_log_longer_than_a_chunk_recycles_the_chunk_it_trims() {
    let total = Arc::new(AtomicUsize::new(0));
    let mut log = PartitionLog::new(0);
    log.count_in(total.clone());
    log.set_needed_from(Some(1));
    let mut new_chunks = 0;
    for i in 0..2000usize {
        let change = set(&format!("key{i}"), 500 + i % 300);
        let tail = log.tail.as_ptr();
        let (seq, _) = log.append(&change);
        if log.tail.as_ptr() != tail {
            new_chunks += 1;
        }
        // The consumer holds the last ~20 changes (two or three chunks).
        log.advance_needed_from(seq.saturating_sub(20).max(1));
        assert_eq!(codec::decode(log.get(seq).unwrap()).unwrap().0, change);
        assert_eq!(
            total.load(Ordering::Relaxed),
            log.allocated(),
            "the spare is counted"
        );
        assert!(log.allocated() <= 5 * CHUNK_MAX + 64 * std::mem::size_of::<Span>());
    }
    // New chunks come fresh only when the log grew by one (one spare).
    let fresh = log.fresh_chunks;
    assert!(
        new_chunks > 100 && fresh * 5 < new_chunks,
        "{new_chunks} new chunks, {fresh} of them allocated"
    );
    log.set_needed_from(Some(log.next_seq()));
    assert_eq!(log.spare.capacity(), 0, "an emptied log keeps no spare");
    assert_eq!(total.load(Ordering::Relaxed), log.allocated());
}

#[test]
fn a_change_larger_than_the_retention_is_not_stored_without_a_consumer() {
    let mut log = PartitionLog::new(300);
    let (first, _) = log.append(&set("a", 100));
    log.append(&set("b", 100));
    assert_eq!(log.len(), 2);
    let (seq, _) = log.append(&set("c", 400));
    assert_eq!((log.len(), log.bytes(), log.first_seq()), (0, 0, seq + 1));
    assert!(
        log.read_from(first).is_none(),
        "what came before was trimmed"
    );
    assert_eq!(log.append(&set("d", 10)).0, seq + 1, "seqs go on");
    assert_eq!(log.len(), 1);
}
