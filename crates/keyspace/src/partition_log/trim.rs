//! Trimming: what the log lets go (what the lowest consumer's cursor
//! passed, or beyond `retain_bytes` and what every remote site applied),
//! the marks that decide it, and the chunks an emptied log keeps for its
//! next change.

use std::collections::VecDeque;

use super::{PartitionLog, Span, CHUNK_MIN, KEEP_SPANS};

impl PartitionLog {
    /// Drops what nobody needs now.
    pub fn trim(&mut self) {
        let allocated = self.allocated;
        self.trim_local();
        self.count_change(allocated);
    }

    /// Drops the oldest changes nobody needs (see the module docs), and
    /// the chunks left without changes, leaving `total` to the caller.
    pub(super) fn trim_local(&mut self) {
        if self.spans.is_empty() {
            // What an emptied log kept goes if it stores nothing more now.
            if self.allocated > 0 {
                self.emptied();
            }
            return;
        }
        let first = self.first_seq();
        let (mut n, mut trimmed) = (0, 0);
        for (span, seq) in self.spans.iter().zip(first..) {
            let keep = match self.needed_from {
                // What the consumers have read and every remote site
                // applied serves nobody: a primary's acknowledged changes
                // only pushed the changes still queued out of the caches.
                Some(needed) => seq >= needed,
                None => seq >= self.released_before && self.bytes - trimmed <= self.retain_bytes,
            };
            if keep {
                break;
            }
            trimmed += self.span_len(span);
            n += 1;
        }
        if n == 0 {
            return;
        }
        self.spans.drain(..n);
        self.bytes -= trimmed;
        match self.spans.front() {
            Some(s) => {
                let emptied = (s.chunk - self.first_chunk) as usize;
                self.first_chunk = s.chunk;
                for _ in 0..emptied {
                    if let Some(chunk) = self.full.pop_front() {
                        self.release_chunk(chunk);
                    }
                }
            }
            None => self.emptied(),
        }
    }

    /// Every change was trimmed: frees the chunks, but a tail of
    /// [`CHUNK_MIN`] bytes and a little room for spans stay for the next
    /// change. With 16,384 partitions a log mostly holds one change at a
    /// time (acknowledged before the next comes), and allocating and
    /// freeing a chunk and the spans for each change cost more than
    /// copying it (glibc consolidates its free lists on a large request).
    /// A log that stores nothing more (no retention, no consumer) keeps
    /// nothing.
    fn emptied(&mut self) {
        if self.tail.capacity() > CHUNK_MIN
            || (self.retain_bytes == 0 && self.needed_from.is_none())
        {
            return self.free_chunks();
        }
        self.first_chunk += self.full.len() as u64;
        self.full.clear();
        self.tail.clear();
        self.spare = Vec::new();
        if self.spans.capacity() > KEEP_SPANS {
            self.spans = VecDeque::new();
        }
        self.allocated = self.tail.capacity() + self.spans.capacity() * std::mem::size_of::<Span>();
    }

    /// Frees every chunk and the spans (none is left), leaving `total` to
    /// the caller; numbers go on from there.
    pub(super) fn free_chunks(&mut self) {
        self.first_chunk += self.full.len() as u64 + 1;
        self.full.clear();
        self.tail = Vec::new();
        self.spare = Vec::new();
        self.spans = VecDeque::new();
        self.allocated = 0;
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

    /// Every remote site applied the changes before `seq` (what a backup
    /// heard from its primary, caught up once it is promoted): they go at
    /// the next trim even while within `retain_bytes`. Never moves back.
    pub fn release_before(&mut self, seq: u64) {
        self.released_before = self.released_before.max(seq);
    }

    pub fn set_retain_bytes(&mut self, bytes: usize) {
        self.retain_bytes = bytes;
        self.trim();
    }
}
