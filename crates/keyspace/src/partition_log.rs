//! The partition log: the ordered changes of one partition, numbered by
//! `seq` (1, 2, ...). It feeds backups, WAN publishers and incremental
//! backups; each consumer holds a cursor (the next seq it needs). The log
//! keeps what some cursor still needs, and otherwise only up to
//! `retain_bytes`, so with nobody consuming it memory stays flat.

use std::collections::VecDeque;

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
        }
    }

    /// Appends a change; returns its seq and encoded size.
    pub fn append(&mut self, change: Change) -> (u64, usize) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let size = codec::encoded_len(&change);
        self.changed.touch(&change.key, seq);
        self.bytes += size;
        self.entries.push_back((seq, change, size));
        self.trim();
        (seq, size)
    }

    fn trim(&mut self) {
        while self.bytes > self.retain_bytes {
            match self.entries.front() {
                Some((seq, _, size)) if self.needed_from.is_none_or(|n| *seq < n) => {
                    self.bytes -= *size;
                    self.entries.pop_front();
                }
                _ => break,
            }
        }
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
        self.bytes = 0;
        self.next_seq = seq;
    }

    /// Registers (or moves) the lowest seq some consumer still needs.
    pub fn set_needed_from(&mut self, seq: Option<u64>) {
        self.needed_from = seq;
        self.trim();
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
}
