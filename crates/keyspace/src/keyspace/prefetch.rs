//! Prefetching partition headers: with many partitions their headers are
//! not in cache, so a pipeline's next command has its partition's first
//! lines loaded while the current one runs.

use super::{Keyspace, Slot};

/// Partition headers taking more than this are prefetched (see
/// [`Keyspace::prefetch`]); below it they stay in a core's L2.
const PREFETCH_ABOVE: usize = 1 << 20;
/// The header lines a command reads first (see [`Partition`](crate::partition::Partition)'s layout).
const PREFETCH_LINES: usize = 4;

/// Asks the CPU to load the line holding `at` (a hint: it never faults).
#[inline]
pub fn prefetch_line<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it reads nothing the program sees
    // and does not fault, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

impl Keyspace {
    /// Starts loading the first lines of `key`'s partition header (its
    /// lock, the map and log headers: what a command reads first) into
    /// cache, for a command that runs soon, such as the next one of a
    /// pipeline: with 16,384 partitions the headers (11 MiB) are not in
    /// cache and a write's first miss cost it more than anything else
    /// partition count adds. Nothing when the headers fit in cache anyway.
    /// Returns the partition when it prefetched, for the caller to
    /// prefetch what it keeps per partition too.
    pub fn prefetch(&self, key: &[u8]) -> Option<usize> {
        if !self.prefetching() {
            return None;
        }
        let p = self.partition_of(key);
        self.prefetch_header(p);
        Some(p)
    }

    /// [`Keyspace::prefetch`] by partition number (out of range: nothing),
    /// for a loop over changes of many partitions; true when it prefetched.
    pub fn prefetch_partition(&self, p: usize) -> bool {
        let worth = self.prefetching() && p < self.parts.len();
        if worth {
            self.prefetch_header(p);
        }
        worth
    }

    /// Whether [`Keyspace::prefetch`] does anything here: callers may skip
    /// the work of finding what to prefetch when it does not.
    pub fn prefetching(&self) -> bool {
        self.parts.len() * std::mem::size_of::<Slot>() >= PREFETCH_ABOVE
    }

    fn prefetch_header(&self, p: usize) {
        let at = (&self.parts[p] as *const Slot).cast::<u8>();
        for line in 0..PREFETCH_LINES {
            prefetch_line(at.wrapping_add(line * 64));
        }
        // A write reads them (`catch_up_log`).
        prefetch_line(&self.log_marks[p]);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::clock::DebugClock;
    use crate::{Keyspace, KeyspaceConfig};

    #[test]
    fn prefetching_is_only_done_for_many_partitions_and_never_reads_out_of_range() {
        for (partitions, prefetching) in [(271, false), (16384, true)] {
            let cfg = KeyspaceConfig {
                partitions,
                ..Default::default()
            };
            let ks = Keyspace::new(cfg, Arc::new(DebugClock::default()));
            assert_eq!(ks.prefetching(), prefetching, "{partitions} partitions");
            for key in [&b""[..], b"k", b"{tag}key", &[0xff; 300]] {
                ks.prefetch(key);
            }
            for p in [0, partitions as usize - 1, partitions as usize, usize::MAX] {
                ks.prefetch_partition(p);
            }
        }
    }
}
