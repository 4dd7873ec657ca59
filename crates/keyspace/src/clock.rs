//! Wall-clock time, injected so expiry and versions can be tested without
//! sleeping. [`DebugClock`] is the system clock plus an offset that only
//! moves forward (`DEBUG CLOCK-ADVANCE`), so time seen by the keyspace and
//! the HLC never goes backwards.
//!
//! [`DebugClock`] caches its reading: the server refreshes it once per batch
//! of requests read from a connection (and the expiry loop once per pass),
//! as Redis caches its time per command, instead of asking the OS on every
//! write. Until the first refresh it reads the system clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> u64;
}

#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// System time plus a forward-only offset, cached between refreshes.
#[derive(Debug, Default)]
pub struct DebugClock {
    offset_ms: AtomicU64,
    cached_ms: AtomicU64,
}

impl DebugClock {
    pub fn advance(&self, ms: u64) {
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
        self.refresh();
    }

    /// Reads the system clock into the cache (never moving it backwards).
    pub fn refresh(&self) -> u64 {
        let now = SystemClock.now_ms() + self.offset_ms.load(Ordering::Relaxed);
        self.cached_ms.fetch_max(now, Ordering::Relaxed).max(now)
    }
}

impl Clock for DebugClock {
    fn now_ms(&self) -> u64 {
        match self.cached_ms.load(Ordering::Relaxed) {
            0 => self.refresh(),
            t => t,
        }
    }
}
