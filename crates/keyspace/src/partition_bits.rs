//! A set of partitions, one bit each, shared between threads without a
//! lock. The keyspace keeps one of the partitions holding keys with a time
//! to live (set by a partition when its expiry index stops being empty,
//! cleared by active expiry under the same partition lock when it finds the
//! index empty), so active expiry visits only those; each WAN target keeps
//! one of the partitions whose log grew, so its publisher reads only those
//! (and the publisher keeps two of its own: partitions left to read, and
//! those whose acknowledgement its backups have yet to hear; with 16,384
//! partitions a batch names ~750, and tree sets of them cost more).
//! Either way the cost follows what changed, not the partition count.
//!
//! Every operation is SeqCst: the WAN publisher pairs an insert here with
//! its quiet flag (an insert either sees the publisher awake or the
//! publisher, leaving quiet, sees the insert). On x86 that costs nothing
//! over Relaxed for these read-modify-writes and loads.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

#[derive(Debug)]
pub struct PartitionBits {
    words: Box<[AtomicU64]>,
}

impl PartitionBits {
    pub fn new(partitions: usize) -> Self {
        PartitionBits {
            words: (0..partitions.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Adds `p`; true when it was not in the set.
    pub fn insert(&self, p: usize) -> bool {
        let bit = 1 << (p % 64);
        self.words[p / 64].fetch_or(bit, SeqCst) & bit == 0
    }

    pub fn remove(&self, p: usize) {
        self.words[p / 64].fetch_and(!(1 << (p % 64)), SeqCst);
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| w.load(SeqCst) == 0)
    }

    pub fn clear(&self) {
        self.words.iter().for_each(|w| w.store(0, SeqCst));
    }

    /// Empties the set, appending its members to `into` in order.
    pub fn take(&self, into: &mut Vec<usize>) {
        for (w, word) in self.words.iter().enumerate() {
            push_bits(w, word.swap(0, SeqCst), into);
        }
    }

    /// The members from `start` on, wrapping around; a partition added
    /// during the walk may or may not be listed.
    pub fn members_from(&self, start: usize) -> Vec<usize> {
        let mut all = Vec::new();
        for (w, word) in self.words.iter().enumerate() {
            push_bits(w, word.load(SeqCst), &mut all);
        }
        let split = all.partition_point(|&p| p < start);
        all.rotate_left(split);
        all
    }
}

fn push_bits(word_index: usize, mut bits: u64, into: &mut Vec<usize>) {
    while bits != 0 {
        into.push(word_index * 64 + bits.trailing_zeros() as usize);
        bits &= bits - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_listed_from_the_cursor_round() {
        let e = PartitionBits::new(200);
        for p in [3, 64, 130, 199] {
            e.insert(p);
        }
        assert_eq!(e.members_from(0), vec![3, 64, 130, 199]);
        assert_eq!(e.members_from(100), vec![130, 199, 3, 64]);
        e.remove(64);
        assert_eq!(e.members_from(64), vec![130, 199, 3]);
    }

    #[test]
    fn insert_says_whether_it_was_new_and_take_empties() {
        let s = PartitionBits::new(130);
        assert!(s.is_empty());
        assert!(s.insert(129));
        assert!(!s.insert(129));
        assert!(s.insert(5));
        let mut got = Vec::new();
        s.take(&mut got);
        assert_eq!(got, vec![5, 129]);
        assert!(s.is_empty());
        assert!(s.insert(5), "taken members can be added again");
        s.clear();
        assert!(s.is_empty());
        assert!(s.insert(5), "cleared members can be added again");
    }
}
