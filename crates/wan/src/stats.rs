//! Counters for WAN replication, per remote site, read by `/metrics`,
//! `/wan/status` and the demo. Plain atomics: they are bumped on the
//! publisher's and receiver's paths and only read at scrape time.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default, Debug)]
pub struct PublisherStats {
    /// Bytes of frames written to the target (compressed batches).
    pub bytes_sent: AtomicU64,
    /// Changes that originated here and entered the queue.
    pub events_queued: AtomicU64,
    /// Changes the target acknowledged as applied.
    pub events_distributed: AtomicU64,
    pub batches: AtomicU64,
    /// Sum and count of batch round trips (send -> received), microseconds.
    pub rtt_us_sum: AtomicU64,
    pub rtt_count: AtomicU64,
    pub deltas_shipped: AtomicU64,
    pub fulls_shipped: AtomicU64,
    /// Full values sent because the receiver lacked a delta's base.
    pub full_fallbacks: AtomicU64,
    pub resyncs: AtomicU64,
    /// Partitions whose log no longer reached back to what the target had
    /// (a promoted replica's, mostly), so their contents were copied.
    pub partition_copies: AtomicU64,
    /// Changes and bytes written to the journal because memory was over budget.
    pub spilled_events: AtomicU64,
    pub spilled_bytes: AtomicU64,
    pub connects: AtomicU64,
}

impl PublisherStats {
    /// Average batch round trip (send to received), microseconds.
    pub fn rtt_avg_us(&self) -> u64 {
        get(&self.rtt_us_sum) / get(&self.rtt_count).max(1)
    }
}

#[derive(Default, Debug)]
pub struct ReceiverStats {
    /// The source site's name, from its hello ("" until one connected).
    pub name: parking_lot::Mutex<String>,
    /// Bytes of frames read from the source site's publishers.
    pub bytes_received: AtomicU64,
    pub batches: AtomicU64,
    pub events_received: AtomicU64,
    pub applied: AtomicU64,
    /// Re-sent changes that changed nothing.
    pub duplicates: AtomicU64,
    /// Changes older than what this site holds (last writer wins).
    pub conflicts_lost: AtomicU64,
    /// Deltas whose base this site did not hold (a full value was asked for).
    pub need_full: AtomicU64,
    /// Connections or batches refused as malformed or unexpected.
    pub refused: AtomicU64,
}

pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

pub(crate) fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}
