//! A backup's copy of the log: it only counts seqs ([`PartitionLog::skip`]),
//! the batches it received standing for its changes (see
//! [`crate::received`]); a copy becoming a backup hands what its log held
//! to them ([`PartitionLog::take_held`]), a promoted one gets it back
//! ([`PartitionLog::restore`]), and one loading a snapshot starts again at
//! its seq ([`PartitionLog::reset_to`]).

use bytes::Bytes;

use super::PartitionLog;
use crate::received::HeldChange;

impl PartitionLog {
    /// Counts a change at the next seq without storing it (a backup's
    /// copy: the batch it came in is held instead, see
    /// [`crate::received`]); returns its seq.
    pub fn skip(&mut self, key: &Bytes) -> u64 {
        let seq = self.next_seq;
        self.changed.touch(key, seq);
        self.next_seq += 1;
        if !self.spans.is_empty() {
            self.drop_all();
        }
        seq
    }

    /// Takes out every change held (a primary's copy becoming a backup's):
    /// their encodings back to back, and where each is (as partition
    /// `partition`'s). The log then holds nothing and goes on at the same
    /// seq.
    pub fn take_held(&mut self, partition: u16) -> Option<(Bytes, Vec<HeldChange>)> {
        if self.spans.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(self.bytes);
        let mut held = Vec::with_capacity(self.spans.len());
        for (s, seq) in self.spans.iter().zip(self.first_seq()..) {
            let enc = self.slice(s);
            held.push(HeldChange {
                partition,
                seq,
                start: out.len() as u32,
                len: enc.len() as u32,
            });
            out.extend_from_slice(enc);
        }
        self.drop_all();
        Some((Bytes::from(out), held))
    }

    /// Replaces what the log holds with `changes`, (seq, encoding) pairs
    /// that are consecutive and end at `next_seq - 1` (a promoted copy's
    /// log rebuilt from the batches it received); anything else is
    /// ignored, and the log is left empty.
    pub fn restore(&mut self, changes: &[(u64, &[u8])]) {
        self.drop_all();
        let consecutive = changes.windows(2).all(|w| w[1].0 == w[0].0 + 1);
        let ends = changes.last().map(|&(seq, _)| seq + 1) == Some(self.next_seq);
        if !consecutive || !ends {
            return;
        }
        let next = self.next_seq;
        self.next_seq = changes[0].0;
        let allocated = self.allocated;
        for &(_, enc) in changes {
            self.store(enc.len(), |out| out.extend_from_slice(enc));
        }
        debug_assert_eq!(self.next_seq, next);
        self.count_change(allocated);
    }

    /// Forgets every change held, keeping the next seq.
    fn drop_all(&mut self) {
        let allocated = self.allocated;
        self.spans.clear();
        self.bytes = 0;
        self.free_chunks();
        self.count_change(allocated);
    }

    /// Forgets every change and starts again at `seq` (a backup loading a
    /// snapshot of its primary's partition taken at that seq).
    pub fn reset_to(&mut self, seq: u64) {
        self.changed.drop_anchor();
        self.drop_all();
        self.next_seq = seq;
        self.released_before = 0;
    }
}
