//! Memory accounting by counting allocations: `used_memory` is what the
//! process really holds on the heap, not an estimate, so `maxmemory` bounds
//! the real thing. Each block counts as the allocator takes it (glibc's
//! chunk: the request, its header and rounding, see
//! [`keyspace::memory::chunk`]), as Redis counts a block's usable size:
//! a 16-byte string takes a 32-byte chunk, and counting 16 would put
//! `used_memory` 10% below the resident set's growth for small strings. The binary installs [`CountingAlloc`] as the global
//! allocator; without it (library tests) [`allocated`] stays 0 and the
//! maxmemory check never fires.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use keyspace::memory::chunk;

use crate::thread_shard::CounterShard;

/// The count is kept in shards, a thread adding to its own (a single
/// counter written by every core on every allocation bounces its cache
/// line between them). The first `SHARDS` threads each own one and add
/// with a plain load and store ([`CounterShard`]); the threads after them
/// share the next `SHARDS` with locked adds. A block freed by another
/// thread than the one that allocated it makes one shard go down and
/// another up; only the sum means anything (each shard counts wrapping,
/// as two's complement, so the sum is exact).
const SHARDS: usize = 16;

#[repr(align(128))]
struct Shard(AtomicU64);

static COUNTS: [Shard; 2 * SHARDS] = [const { Shard(AtomicU64::new(0)) }; 2 * SHARDS];

fn add(bytes: usize) {
    let shard = CounterShard::of_this_thread(SHARDS);
    shard.add(&COUNTS[shard.index].0, bytes as u64);
}

fn sub(bytes: usize) {
    let shard = CounterShard::of_this_thread(SHARDS);
    shard.add(&COUNTS[shard.index].0, (bytes as u64).wrapping_neg());
}

pub struct CountingAlloc;

// SAFETY: every method forwards to the system allocator unchanged and only
// adds bookkeeping on relaxed atomics (which never allocates).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(chunk(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(chunk(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) };
        sub(chunk(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            let (old, new) = (chunk(layout.size()), chunk(new_size));
            if new > old {
                add(new - old);
            } else {
                sub(old - new);
            }
        }
        p
    }
}

/// Bytes currently allocated through [`CountingAlloc`].
pub fn allocated() -> usize {
    let sum = COUNTS
        .iter()
        .fold(0u64, |sum, s| sum.wrapping_add(s.0.load(Ordering::Relaxed)));
    (sum as i64).max(0) as usize
}

/// The highest [`allocated`] seen by [`peak`] (sampled: by INFO, /metrics
/// and the cron's passes, ten a second; Redis counts it on every
/// allocation, which would cost a shared write per allocation here).
static PEAK: AtomicU64 = AtomicU64::new(0);

/// `used_memory_peak`: the highest heap use sampled so far, this reading
/// included.
pub fn peak() -> usize {
    let now = allocated() as u64;
    PEAK.fetch_max(now, Ordering::Relaxed).max(now) as usize
}

/// Freed bytes (since the heap was last trimmed, from the most it held
/// since) past which the cron hands free pages back to the system
/// ([`should_trim`]), or a quarter of that most if larger.
const TRIM_AFTER_FREED: u64 = 64 << 20;

/// The bytes the resident set may exceed the heap in use by (or an
/// eighth of the heap if larger) before the cron trims, at most every
/// [`TRIM_INTERVAL`]: a WAN site that took 200,000 small keys holds
/// ~25 MB of free chunks beside a 30 MB heap (its batches and logs,
/// freed), which a trim gives back (docs/benchmarks.md).
const TRIM_SLACK: u64 = 8 << 20;

/// The least time between two trims for a resident set above the heap.
const TRIM_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// The most [`allocated`] seen by [`should_trim`] since the last trim.
static TRIM_HIGH: AtomicU64 = AtomicU64::new(0);

/// When the cron last trimmed for a resident set above the heap.
static LAST_TRIM: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

/// Whether the allocator's free pages should go back to the system now
/// (`keyspace::memory::purge`): so much was freed since the last trim
/// (keys deleted, expired or evicted, a large value or a backlog let go),
/// or the resident set is that much above the heap in use (free chunks in
/// glibc's per-thread arenas: a WAN site's logs and batches are freed by
/// other threads than the ones that allocated them), checked at most every
/// [`TRIM_INTERVAL`]. glibc gives back only the top of its main heap by
/// itself, so RSS would stay at its high mark. FLUSHALL and MEMORY PURGE
/// trim at once; the cron asks this ten times a second.
pub fn should_trim() -> bool {
    let now = allocated() as u64;
    let high = TRIM_HIGH.fetch_max(now, Ordering::Relaxed).max(now);
    let freed = high - now >= TRIM_AFTER_FREED.max(high / 4);
    let mut last = LAST_TRIM.lock().unwrap_or_else(|e| e.into_inner());
    let due = last.is_none_or(|t| t.elapsed() >= TRIM_INTERVAL);
    let slack = TRIM_SLACK.max(now / 8);
    if freed || (due && rss() as u64 > now + slack) {
        TRIM_HIGH.store(now, Ordering::Relaxed);
        *last = Some(std::time::Instant::now());
        return true;
    }
    false
}

/// [`allocated`] when the node started serving ([`mark_startup`]).
static STARTUP: AtomicU64 = AtomicU64::new(0);

/// Records what the node holds before its first key (`startup.allocated`).
pub fn mark_startup() {
    STARTUP.store(allocated() as u64, Ordering::Relaxed);
}

pub fn startup() -> usize {
    STARTUP.load(Ordering::Relaxed) as usize
}

/// The process's resident set in bytes (`used_memory_rss`), from
/// /proc/self/statm (0 where there is none).
pub fn rss() -> usize {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * usize::try_from(page).unwrap_or(4096)
}

/// Parses "4GiB", "512mb", "100k", "1048576" into bytes (Redis and IEC units).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" | "kib" => 1 << 10,
        "m" => 1_000_000,
        "mb" | "mib" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" | "gib" => 1 << 30,
        "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_redis_and_iec_units() {
        assert_eq!(parse_size("4GiB"), Some(4 << 30));
        assert_eq!(parse_size("2mb"), Some(2 << 20));
        assert_eq!(parse_size("1k"), Some(1000));
        assert_eq!(parse_size("2097152"), Some(2097152));
        assert_eq!(parse_size("12 MiB"), Some(12 << 20));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("99999999999999TiB"), None);
    }
}
