//! How the log stores changes: their encodings back to back in chunks
//! (the full ones and the tail being filled), one [`Span`] per change
//! saying where it is, and appending; chunks a trim empties are freed or
//! kept as the spare, and the node's total follows what they take.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{PartitionLog, Span, ALONE, CHUNK_MAX, CHUNK_MIN};
use crate::change::Change;
use crate::codec;

impl PartitionLog {
    /// Appends a change; returns its seq and encoded size.
    pub fn append(&mut self, change: &Change) -> (u64, usize) {
        let size = codec::encoded_len(change);
        self.append_with(&change.key, size, |out| codec::encode(change, out))
    }

    /// Appends a change already encoded with [`codec::encode`] (as a backup
    /// receives it from its primary); `key` is the change's key.
    pub fn append_encoded(&mut self, key: &Bytes, encoded: &[u8]) -> (u64, usize) {
        self.append_with(key, encoded.len(), |out| out.extend_from_slice(encoded))
    }

    fn append_with(
        &mut self,
        key: &Bytes,
        size: usize,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> (u64, usize) {
        let seq = self.next_seq;
        self.changed.touch(key, seq);
        if self.needed_from.is_none() && size > self.retain_bytes {
            // Nobody reads, and retention alone would trim this change and
            // all before it at once (no retention; a backup's log with
            // 16,384 partitions): it is not stored only to be dropped.
            self.next_seq += 1;
            if !self.spans.is_empty() {
                self.spans.clear();
                self.bytes = 0;
                self.trim();
            }
            return (seq, size);
        }
        let allocated = self.allocated;
        self.store(size, write);
        // One update of the node's total for the chunk taken and those
        // freed (mostly none: chunks hold many changes).
        self.count_change(allocated);
        (seq, size)
    }

    /// Stores a change of `size` bytes at the next seq, leaving `total`
    /// to the caller.
    pub(super) fn store(&mut self, size: usize, write: impl FnOnce(&mut Vec<u8>)) {
        let chunk = self.chunk_with_room(size);
        let start = chunk.len();
        write(chunk);
        debug_assert_eq!(
            chunk.len() - start,
            size,
            "codec::encoded_len disagrees with codec::encode"
        );
        // A chunk made for a change larger than CHUNK_MAX has no room left.
        let len = u32::try_from(size)
            .ok()
            .filter(|&len| len < ALONE)
            .unwrap_or(ALONE);
        debug_assert!(
            len < ALONE || (start == 0 && chunk.len() == chunk.capacity()),
            "a change of ALONE bytes fills a chunk"
        );
        let number = self.first_chunk + self.full.len() as u64;
        let spans = self.spans.capacity();
        self.spans.push_back(Span {
            chunk: number,
            start: start as u32,
            len,
        });
        self.next_seq += 1;
        self.allocated += (self.spans.capacity() - spans) * std::mem::size_of::<Span>();
        self.bytes += size;
    }

    /// Brings the node's total in step after `allocated` was `before`.
    pub(super) fn count_change(&self, before: usize) {
        if self.allocated > before {
            self.total
                .fetch_add(self.allocated - before, Ordering::Relaxed);
        } else if before > self.allocated {
            self.total
                .fetch_sub(before - self.allocated, Ordering::Relaxed);
        }
    }

    /// The tail chunk with room for `size` bytes. Without room the log
    /// trims first (trimming waits for this: memory goes a chunk at a time,
    /// so a trim per append, reading the oldest and cold span, freed
    /// nothing sooner; acknowledged changes go, and a log they empty has
    /// its tail to reuse); if there is still none, a new tail replaces it
    /// (the old one becoming the newest full chunk if it holds any).
    fn chunk_with_room(&mut self, size: usize) -> &mut Vec<u8> {
        if self.tail.capacity() - self.tail.len() < size {
            self.trim_local();
        }
        let cap = self.tail.capacity();
        if cap - self.tail.len() < size {
            let grown = if self.full.is_empty() { cap } else { cap * 2 };
            let new = self.new_chunk(grown.clamp(CHUNK_MIN, CHUNK_MAX).max(size));
            let old = std::mem::replace(&mut self.tail, new);
            if old.is_empty() {
                self.release_chunk(old);
            } else {
                self.full.push_back(old);
            }
        }
        &mut self.tail
    }

    /// An empty chunk of `capacity` bytes: the spare when it fits, else
    /// allocated (and counted in `allocated`).
    fn new_chunk(&mut self, capacity: usize) -> Vec<u8> {
        if capacity == CHUNK_MAX && self.spare.capacity() == CHUNK_MAX {
            return std::mem::take(&mut self.spare);
        }
        self.allocated += capacity;
        #[cfg(test)]
        {
            self.fresh_chunks += 1;
        }
        Vec::with_capacity(capacity)
    }

    /// A chunk the log no longer uses: kept as the spare when it is a
    /// [`CHUNK_MAX`] one and there is none, else freed (and uncounted).
    pub(super) fn release_chunk(&mut self, mut chunk: Vec<u8>) {
        if chunk.capacity() == CHUNK_MAX && self.spare.capacity() == 0 {
            chunk.clear();
            self.spare = chunk;
        } else {
            self.allocated -= chunk.capacity();
        }
    }

    /// A span's length, reading a chunk only for a change that has one of
    /// its own (trimming does not touch the chunks it frees).
    pub(super) fn span_len(&self, s: &Span) -> usize {
        match s.len {
            ALONE => self.slice(s).len(),
            len => len as usize,
        }
    }

    pub(super) fn slice(&self, s: &Span) -> &[u8] {
        let i = (s.chunk - self.first_chunk) as usize;
        let chunk = self.full.get(i).unwrap_or(&self.tail);
        let start = s.start as usize;
        match s.len {
            ALONE => &chunk[start..],
            len => &chunk[start..start + len as usize],
        }
    }
}
