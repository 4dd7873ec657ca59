//! A snapshot of one partition on its way to a new backup, sent in chunks.
//!
//! The copy is taken under the partition lock, at the primary's next seq,
//! as the entries' keys and values (reference-counted: cheap) rather than
//! encoded bytes, and encoded [`CHUNK_BYTES`] at a time as the connection
//! to the backup asks for batches. A backup's stream sends its snapshots
//! before any change queued for it, so every change logged after a
//! snapshot's point follows its end marker; changes from before it arrive
//! after the end and change nothing (the backup has their seqs). The size
//! of a partition therefore never has to fit in the per-peer buffer.

use bytes::{BufMut, BytesMut};
use keyspace::{codec, Change};

use crate::replication::{put_marker, SNAPSHOT_BEGIN, SNAPSHOT_DATA, SNAPSHOT_END};

/// Bytes of snapshot entries per batch.
pub const CHUNK_BYTES: usize = 1 << 20;

pub struct SnapshotStream {
    pub partition: usize,
    /// Entries in the whole snapshot (sent with the end marker).
    total: u64,
    /// The primary's next seq when the copy was taken.
    next: u64,
    /// Sent with the end marker, acknowledged with it.
    id: u64,
    entries: std::vec::IntoIter<Change>,
    begun: bool,
}

impl SnapshotStream {
    pub fn new(partition: usize, next: u64, id: u64, entries: Vec<Change>) -> SnapshotStream {
        SnapshotStream {
            partition,
            next,
            id,
            total: entries.len() as u64,
            entries: entries.into_iter(),
            begun: false,
        }
    }

    pub fn keys(&self) -> usize {
        self.entries.len()
    }

    /// Appends the next chunk (the begin marker first, the end marker
    /// last) to `out`; true once the end marker is in.
    pub fn next_chunk(&mut self, out: &mut BytesMut) -> bool {
        let p = self.partition;
        if !self.begun {
            put_marker(out, p, SNAPSHOT_BEGIN, &[self.next]);
            self.begun = true;
        }
        let start = out.len();
        let mut body = Vec::new();
        while out.len() - start < CHUNK_BYTES {
            let Some(change) = self.entries.next() else {
                put_marker(out, p, SNAPSHOT_END, &[self.next, self.id, self.total]);
                return true;
            };
            body.clear();
            codec::encode(&change, &mut body);
            out.put_u16_le(p as u16);
            out.put_u64_le(SNAPSHOT_DATA);
            out.put_u32_le(body.len() as u32);
            out.put_slice(&body);
        }
        false
    }
}
