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
//! Changes are held encoded ([`codec`](crate::codec)), back to back in chunks of up to
//! [`CHUNK_MAX`] bytes, not as [`Change`](crate::change::Change) values: appending copies the
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
//!
//! The parts, a file each below `partition_log/`: how changes are stored
//! in chunks and appended (`chunks`), trimming what nobody needs (`trim`),
//! reading changes back (`read`), and a backup's copy, whose log only
//! counts seqs until a promotion rebuilds it (`handover`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::changed_keys::ChangedKeys;

mod chunks;
mod handover;
mod read;
#[cfg(test)]
mod tests;
mod trim;

pub use read::Logged;

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

    /// Counts this log's bytes in `total` too (shared by a node's logs).
    pub fn count_in(&mut self, total: Arc<AtomicUsize>) {
        total.fetch_add(self.allocated, Ordering::Relaxed);
        self.total.fetch_sub(self.allocated, Ordering::Relaxed);
        self.total = total;
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
}
