//! The partition log: the ordered changes of one partition, numbered by
//! `seq` (1, 2, ...). It feeds backups, WAN publishers and incremental
//! backups; each consumer holds a cursor (the next seq it needs). The log
//! keeps what some cursor still needs, and otherwise only up to
//! `retain_bytes`, so with nobody consuming it memory stays flat.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::change::Change;
use crate::changed_keys::ChangedKeys;
use crate::codec;

#[derive(Debug)]
pub struct PartitionLog {
    entries: VecDeque<(u64, Change, usize)>,
    next_seq: u64,
    bytes: usize,
    retain_bytes: usize,
    /// The lowest seq a registered consumer still needs; nothing at or after
    /// it is trimmed. None when no consumer is registered.
    needed_from: Option<u64>,
    /// Keys changed since the partition's last backup to storage.
    pub changed: ChangedKeys,
    /// The node's total over all partition logs, kept in step with `bytes`
    /// so reading it locks nothing.
    total: Arc<AtomicUsize>,
}

impl PartitionLog {
    pub fn new(retain_bytes: usize) -> Self {
        PartitionLog {
            entries: VecDeque::new(),
            next_seq: 1,
            bytes: 0,
            retain_bytes,
            needed_from: None,
            changed: ChangedKeys::new(0),
            total: Arc::default(),
        }
    }

    /// Appends a change; returns its seq and encoded size.
    pub fn append(&mut self, change: Change) -> (u64, usize) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let size = codec::encoded_len(&change);
        self.changed.touch(&change.key, seq);
        if self.retain_bytes == 0 && self.needed_from.is_none() {
            // Nothing is kept and nobody reads: the log is empty (every
            // change of either setting trimmed it) and the change is not
            // stored only to be dropped again.
            return (seq, size);
        }
        self.bytes += size;
        self.entries.push_back((seq, change, size));
        // One update of the node's total for both (often none: with nobody
        // consuming, a change in is about a change out).
        let trimmed = self.trim_local();
        if size > trimmed {
            self.total.fetch_add(size - trimmed, Ordering::Relaxed);
        } else if trimmed > size {
            self.total.fetch_sub(trimmed - size, Ordering::Relaxed);
        }
        (seq, size)
    }

    /// Drops what nobody needs beyond `retain_bytes` now.
    pub fn trim(&mut self) {
        let trimmed = self.trim_local();
        if trimmed > 0 {
            self.total.fetch_sub(trimmed, Ordering::Relaxed);
        }
    }

    /// Drops the oldest changes nobody needs while over `retain_bytes`;
    /// returns their bytes, not yet taken off `total`.
    fn trim_local(&mut self) -> usize {
        let (mut n, mut trimmed) = (0, 0);
        for (seq, _, size) in &self.entries {
            if self.bytes - trimmed <= self.retain_bytes || self.needed_from.is_some_and(|needed| *seq >= needed) {
                break;
            }
            trimmed += size;
            n += 1;
        }
        // Dropped in place (pop_front would move each one out first).
        self.entries.drain(..n);
        self.bytes -= trimmed;
        trimmed
    }

    /// Starts an empty log at `seq` (a copy that begins after the primary's
    /// first changes, e.g. from a snapshot).
    pub fn skip_to(&mut self, seq: u64) {
        if self.entries.is_empty() && seq > self.next_seq {
            self.next_seq = seq;
        }
    }

    /// Forgets every change and starts again at `seq` (a backup loading a
    /// snapshot of its primary's partition taken at that seq).
    pub fn reset_to(&mut self, seq: u64) {
        self.changed.drop_anchor();
        self.entries.clear();
        self.total.fetch_sub(self.bytes, Ordering::Relaxed);
        self.bytes = 0;
        self.next_seq = seq;
    }

    /// Counts this log's bytes in `total` too (shared by a node's logs).
    pub fn count_in(&mut self, total: Arc<AtomicUsize>) {
        total.fetch_add(self.bytes, Ordering::Relaxed);
        self.total.fetch_sub(self.bytes, Ordering::Relaxed);
        self.total = total;
    }

    /// Registers (or moves) the lowest seq some consumer still needs.
    pub fn set_needed_from(&mut self, seq: Option<u64>) {
        self.needed_from = seq;
        self.trim();
    }

    /// Moves the lowest needed seq forward to `seq`, never back, and never
    /// registers a consumer (see [`Self::set_needed_from`]); true when it
    /// moved. What it lets go is trimmed by the next append or [`Self::trim`].
    pub fn advance_needed_from(&mut self, seq: u64) -> bool {
        let moved = self.needed_from.is_some_and(|needed| seq > needed);
        if moved {
            self.needed_from = Some(seq);
        }
        moved
    }

    pub fn set_retain_bytes(&mut self, bytes: usize) {
        self.retain_bytes = bytes;
        self.trim();
    }

    /// Seq the next change will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Oldest seq still held (== next_seq when empty).
    pub fn first_seq(&self) -> u64 {
        self.entries.front().map_or(self.next_seq, |e| e.0)
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Changes with seq >= `from`, oldest first; None when `from` was trimmed.
    pub fn read_from(&self, from: u64) -> Option<impl Iterator<Item = (u64, &Change)>> {
        if from < self.first_seq() {
            return None;
        }
        let skip = (from - self.first_seq()) as usize;
        Some(self.entries.iter().skip(skip).map(|(s, c, _)| (*s, c)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::ChangeKind;
    use crate::version::Version;
    use bytes::Bytes;

    fn del(k: &str) -> Change {
        Change { key: Bytes::copy_from_slice(k.as_bytes()), version: Version::ZERO, kind: ChangeKind::Delete }
    }

    #[test]
    fn the_shared_total_follows_appends_trims_and_resets() {
        let total = Arc::new(AtomicUsize::new(0));
        let (mut a, mut b) = (PartitionLog::new(300), PartitionLog::new(10_000));
        a.append(del("before"));
        a.count_in(total.clone());
        b.count_in(total.clone());
        let sum = |a: &PartitionLog, b: &PartitionLog| a.bytes() + b.bytes();
        for i in 0..200 {
            a.append(del(&format!("key{i}")));
            b.append(del(&format!("key{i}")));
            assert_eq!(total.load(Ordering::Relaxed), sum(&a, &b));
        }
        a.set_needed_from(Some(a.first_seq()));
        a.append(del("held"));
        a.set_retain_bytes(10);
        a.set_needed_from(None);
        assert_eq!(total.load(Ordering::Relaxed), sum(&a, &b));
        b.reset_to(500);
        assert_eq!(total.load(Ordering::Relaxed), a.bytes());
    }

    #[test]
    fn trims_to_budget_unless_a_consumer_needs_it() {
        let mut log = PartitionLog::new(100);
        for i in 0..100 {
            log.append(del(&format!("key{i}")));
        }
        assert!(log.bytes() <= 100);
        assert_eq!(log.next_seq(), 101);
        assert!(log.read_from(1).is_none());
        let first = log.first_seq();
        log.set_needed_from(Some(first));
        for i in 0..100 {
            log.append(del(&format!("key{i}")));
        }
        assert_eq!(log.first_seq(), first);
        assert_eq!(log.read_from(first).unwrap().count(), (201 - first) as usize);
        log.set_needed_from(None);
        assert!(log.bytes() <= 100);
    }

    #[test]
    fn keeps_nothing_without_retention_until_a_consumer_registers() {
        let total = Arc::new(AtomicUsize::new(0));
        let mut log = PartitionLog::new(0);
        log.count_in(total.clone());
        for i in 0..10 {
            assert_eq!(log.append(del(&format!("key{i}"))).0, i + 1);
        }
        assert!(log.is_empty());
        assert_eq!((log.first_seq(), log.bytes(), total.load(Ordering::Relaxed)), (11, 0, 0));
        log.set_needed_from(Some(11));
        log.append(del("kept"));
        assert_eq!(log.read_from(11).unwrap().map(|(seq, _)| seq).collect::<Vec<_>>(), vec![11]);
        assert_eq!(total.load(Ordering::Relaxed), log.bytes());
        log.set_needed_from(None);
        assert!(log.is_empty());
        assert_eq!(total.load(Ordering::Relaxed), 0);
    }
}
