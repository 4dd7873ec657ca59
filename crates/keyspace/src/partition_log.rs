//! The partition log: the ordered changes of one partition, numbered by
//! `seq` (1, 2, ...). It feeds backups, WAN publishers and incremental
//! backups; each consumer holds a cursor (the next seq it needs). With a
//! cursor registered (a primary's WAN publishers) the log keeps exactly
//! what the lowest cursor has yet to see; without one, the newest
//! `retain_bytes`, less what every remote site is known to have applied
//! ([`PartitionLog::release_before`]); plus, either way, the chunk being
//! filled (it trims when an append needs a new chunk). So with nobody
//! consuming it memory stays flat. A backup's copy only counts seqs
//! ([`PartitionLog::skip`]): the batches it received stand for its log
//! ([`crate::received`]) until a promotion rebuilds it
//! ([`PartitionLog::restore`]).
//!
//! Changes are held encoded ([`codec`]), back to back in chunks of up to
//! [`CHUNK_MAX`] bytes, not as [`Change`] values: appending copies the
//! encoding once (what a backup or a WAN batch would copy anyway), a
//! reader ships the bytes as they are, and trimming frees a chunk at a
//! time. A `Change` held until a remote site acknowledged it instead kept
//! the write's keys and values alive, and freed them one by one, long
//! after, from cold memory: most of what WAN replication cost a writer.
//! The price is slack: a partly trimmed chunk is held until its last
//! change goes, the one being filled has room left, and an emptied log
//! keeps a small tail for its next change (with 16,384 partitions most
//! logs hold one change at a time). So the node's total, which budgets
//! compare against, counts what the chunks (and the 16-byte span per
//! change) take from memory, not the changes' bytes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::change::Change;
use crate::changed_keys::ChangedKeys;
use crate::codec;
use crate::received::HeldChange;

/// A partition's first chunk is this small (16,384 partitions hold little
/// each), and so is its second; each next one doubles, up to
/// [`CHUNK_MAX`]. A log emptied by trimming keeps a tail chunk of this size
/// for its next change. (Doubling from the second chunk on made a log that
/// briefly held two changes end with a 2 KiB tail, which emptying freed
/// with the spans, to allocate both again for the next change: at 16,384
/// partitions, most logs, most of the time.)
const CHUNK_MIN: usize = 1 << 10;
/// Room for spans an emptied log keeps.
const KEEP_SPANS: usize = 16;
/// Chunks stop growing here (a change larger gets a chunk of its own size).
pub const CHUNK_MAX: usize = 8 << 10;

/// A change read from the log.
pub struct Logged<'a> {
    pub seq: u64,
    pub head: codec::Head<'a>,
    /// As [`codec::encode`] wrote it.
    pub encoded: &'a [u8],
}

/// Where one change's encoding is: chunk number and range within it.
/// A change of [`ALONE`] bytes or more has a chunk of its own, which it
/// fills, and `len` [`ALONE`]: its length is the chunk's (a hash's full
/// value may pass 4 GiB).
#[derive(Clone, Copy, Debug)]
struct Span {
    chunk: u64,
    start: u32,
    len: u32,
}

#[cfg(not(test))]
const ALONE: u32 = u32::MAX;
/// Low enough that the tests' largest changes take the same path.
#[cfg(test)]
const ALONE: u32 = 2 * CHUNK_MAX as u32;

/// Fields in the order an append reads them (`repr(C)`; see
/// [`crate::partition::Partition`]): counters first, the chunks last.
#[derive(Debug)]
#[repr(C)]
pub struct PartitionLog {
    next_seq: u64,
    /// The lowest seq a registered consumer still needs; nothing at or after
    /// it is trimmed. None when no consumer is registered.
    needed_from: Option<u64>,
    /// Encoded bytes of the held changes (chunk slack not included).
    bytes: usize,
    /// Capacity of the chunks and of `spans`: what the log takes from
    /// memory.
    allocated: usize,
    retain_bytes: usize,
    /// Changes before this seq are let go even within `retain_bytes`: every
    /// remote site applied them (a backup's log; 0 until told).
    released_before: u64,
    first_chunk: u64,
    /// The node's total over all partition logs, kept in step with
    /// `allocated` so reading it locks nothing (and budgets count the memory
    /// taken, slack included).
    total: Arc<AtomicUsize>,
    /// The encodings in chunks numbered from `first_chunk`: the full ones
    /// oldest first, then `tail`, the one being filled (kept in the log
    /// itself, so an append touches no other header). No chunk is ever
    /// reallocated, so spans stay valid.
    tail: Vec<u8>,
    /// One per held change; seqs are consecutive, ending at `next_seq - 1`.
    spans: VecDeque<Span>,
    /// Keys changed since the partition's last backup to storage.
    pub changed: ChangedKeys,
    full: VecDeque<Vec<u8>>,
    /// A [`CHUNK_MAX`] chunk trimming emptied, kept (empty) for the next
    /// new chunk. A log longer than a chunk frees one and takes one every
    /// few changes; a malloc of that size makes glibc consolidate its free
    /// lists, which cost a writer more than copying its change did.
    spare: Vec<u8>,
    /// Chunks allocated (not taken from `spare`), for tests.
    #[cfg(test)]
    fresh_chunks: usize,
}

impl PartitionLog {
    pub fn new(retain_bytes: usize) -> Self {
        PartitionLog {
            full: VecDeque::new(),
            tail: Vec::new(),
            spare: Vec::new(),
            first_chunk: 0,
            spans: VecDeque::new(),
            next_seq: 1,
            bytes: 0,
            allocated: 0,
            retain_bytes,
            released_before: 0,
            needed_from: None,
            changed: ChangedKeys::new(0),
            #[cfg(test)]
            fresh_chunks: 0,
            total: Arc::default(),
        }
    }

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

    /// The encoding of the change at `seq`, if held.
    pub fn get(&self, seq: u64) -> Option<&[u8]> {
        let i = seq.checked_sub(self.first_seq())?;
        self.spans
            .get(usize::try_from(i).ok()?)
            .map(|s| self.slice(s))
    }

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
    fn store(&mut self, size: usize, write: impl FnOnce(&mut Vec<u8>)) {
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
    fn count_change(&self, before: usize) {
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
    fn release_chunk(&mut self, mut chunk: Vec<u8>) {
        if chunk.capacity() == CHUNK_MAX && self.spare.capacity() == 0 {
            chunk.clear();
            self.spare = chunk;
        } else {
            self.allocated -= chunk.capacity();
        }
    }

    /// A span's length, reading a chunk only for a change that has one of
    /// its own (trimming does not touch the chunks it frees).
    fn span_len(&self, s: &Span) -> usize {
        match s.len {
            ALONE => self.slice(s).len(),
            len => len as usize,
        }
    }

    fn slice(&self, s: &Span) -> &[u8] {
        let i = (s.chunk - self.first_chunk) as usize;
        let chunk = self.full.get(i).unwrap_or(&self.tail);
        let start = s.start as usize;
        match s.len {
            ALONE => &chunk[start..],
            len => &chunk[start..start + len as usize],
        }
    }

    /// Drops what nobody needs now.
    pub fn trim(&mut self) {
        let allocated = self.allocated;
        self.trim_local();
        self.count_change(allocated);
    }

    /// Drops the oldest changes nobody needs (see the module docs), and
    /// the chunks left without changes, leaving `total` to the caller.
    fn trim_local(&mut self) {
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
    fn free_chunks(&mut self) {
        self.first_chunk += self.full.len() as u64 + 1;
        self.full.clear();
        self.tail = Vec::new();
        self.spare = Vec::new();
        self.spans = VecDeque::new();
        self.allocated = 0;
    }

    /// Forgets every change and starts again at `seq` (a backup loading a
    /// snapshot of its primary's partition taken at that seq).
    pub fn reset_to(&mut self, seq: u64) {
        self.changed.drop_anchor();
        self.drop_all();
        self.next_seq = seq;
        self.released_before = 0;
    }

    /// Counts this log's bytes in `total` too (shared by a node's logs).
    pub fn count_in(&mut self, total: Arc<AtomicUsize>) {
        total.fetch_add(self.allocated, Ordering::Relaxed);
        self.total.fetch_sub(self.allocated, Ordering::Relaxed);
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

    /// Seq the next change will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Oldest seq still held (== next_seq when empty).
    pub fn first_seq(&self) -> u64 {
        self.next_seq - self.spans.len() as u64
    }

    /// Encoded bytes of the changes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of the chunks that hold them and of their spans: what the log
    /// takes from memory, and what the node's total counts.
    pub fn allocated(&self) -> usize {
        let chunks = self.full.iter().map(Vec::capacity).sum::<usize>()
            + self.tail.capacity()
            + self.spare.capacity();
        debug_assert_eq!(
            self.allocated,
            chunks + self.spans.capacity() * std::mem::size_of::<Span>()
        );
        self.allocated
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The changes with seq >= `from`, oldest first; None when `from` was
    /// trimmed.
    pub fn read_from(&self, from: u64) -> Option<impl Iterator<Item = Logged<'_>>> {
        let first = self.first_seq();
        if from < first {
            return None;
        }
        let skip = ((from - first) as usize).min(self.spans.len());
        Some(self.spans.range(skip..).zip(from..).map(|(s, seq)| {
            let encoded = self.slice(s);
            // Appends take only what codec::encode wrote (a backup's, once
            // its primary's batch decoded).
            let head = codec::head(encoded).expect("the log holds encoded changes");
            Logged { seq, head, encoded }
        }))
    }

    /// [`Self::read_from`], decoded.
    #[cfg(test)]
    pub(crate) fn changes_from(
        &self,
        from: u64,
    ) -> Option<impl Iterator<Item = (u64, Change)> + '_> {
        let decode = |l: Logged| {
            (
                l.seq,
                codec::decode(l.encoded)
                    .expect("the log holds encoded changes")
                    .0,
            )
        };
        self.read_from(from).map(|it| it.map(decode))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::ChangeKind;
    use crate::version::Version;

    fn del(k: &str) -> Change {
        Change {
            key: Bytes::copy_from_slice(k.as_bytes()),
            version: Version::ZERO,
            kind: ChangeKind::Delete,
        }
    }

    fn set(k: &str, len: usize) -> Change {
        let value = crate::value::Value::Str(Bytes::from(vec![b'v'; len]));
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
}
