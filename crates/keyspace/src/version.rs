//! Versions: `(hlc, site)`, a hybrid logical clock time plus the origin
//! site. Versions are totally ordered (hlc first, site breaks ties), which is
//! what last-writer-wins between sites relies on.
//!
//! The HLC packs milliseconds in the high 48 bits and a logical counter in the
//! low 16, so it stays close to wall time, is strictly increasing on a node,
//! and can be moved forward past a remote version ([`Hlc::observe`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::clock::Clock;

/// Packed to 12 bytes (4-aligned): beside it in an [`Entry`](crate::Entry)
/// the key's access data fits in what was padding. Fields are read by
/// value (`{ v.hlc }` where a reference would be taken).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(C, packed(4))]
pub struct Version {
    pub hlc: u64,
    pub site: u16,
}

impl Version {
    pub const ZERO: Version = Version { hlc: 0, site: 0 };

    pub fn millis(&self) -> u64 {
        self.hlc >> 16
    }
}

const LOGICAL_BITS: u32 = 16;

/// The default `max_clock_offset`, in milliseconds.
pub const DEFAULT_MAX_OFFSET_MS: u64 = 500;

pub struct Hlc {
    last: AtomicU64,
    clock: Arc<dyn Clock>,
    /// `max_clock_offset` in milliseconds (0: no bound).
    max_offset_ms: AtomicU64,
    /// Versions seen from elsewhere further ahead than that: refused or
    /// adopted only up to the bound.
    ahead: AtomicU64,
}

impl Hlc {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Hlc {
            last: AtomicU64::new(0),
            clock,
            max_offset_ms: AtomicU64::new(DEFAULT_MAX_OFFSET_MS),
            ahead: AtomicU64::new(0),
        }
    }

    /// Sets `max_clock_offset` (milliseconds; 0: no bound).
    pub fn set_max_offset_ms(&self, ms: u64) {
        self.max_offset_ms.store(ms, Ordering::Relaxed);
    }

    pub fn max_offset_ms(&self) -> u64 {
        self.max_offset_ms.load(Ordering::Relaxed)
    }

    /// Versions seen from peers or remote sites further ahead of this
    /// node's clock than `max_clock_offset`.
    pub fn ahead_count(&self) -> u64 {
        self.ahead.load(Ordering::Relaxed)
    }

    /// The latest timestamp this node may adopt now: its clock plus the
    /// bound (None: no bound).
    fn bound(&self) -> Option<u64> {
        let max = self.max_offset_ms();
        let ms = self
            .clock
            .now_ms()
            .saturating_add(max)
            .min(u64::MAX >> LOGICAL_BITS);
        (max > 0).then_some(ms << LOGICAL_BITS | 0xffff)
    }

    /// How many milliseconds `hlc` lies ahead of this node's clock, when
    /// that is more than `max_clock_offset` (counted); None when within.
    pub fn too_far_ahead(&self, hlc: u64) -> Option<u64> {
        let bound = self.bound()?;
        if hlc <= bound {
            return None;
        }
        self.ahead.fetch_add(1, Ordering::Relaxed);
        Some((hlc >> LOGICAL_BITS).saturating_sub(self.clock.now_ms()))
    }

    /// A new timestamp, greater than every one handed out or observed before.
    pub fn tick(&self) -> u64 {
        let physical = self.clock.now_ms() << LOGICAL_BITS;
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let next = physical.max(last + 1);
            match self
                .last
                .compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    /// Move past a timestamp seen from elsewhere (a peer or a remote site),
    /// but not past this node's clock plus `max_clock_offset` (a timestamp
    /// further ahead is counted, and adopted only up to that bound).
    pub fn observe(&self, hlc: u64) {
        let hlc = match self.bound() {
            Some(bound) if hlc > bound => {
                self.ahead.fetch_add(1, Ordering::Relaxed);
                bound
            }
            _ => hlc,
        };
        self.last.fetch_max(hlc, Ordering::AcqRel);
    }

    /// Move past a timestamp of this node's own history (its log read
    /// back at a restart), however far ahead: what it handed out before
    /// must stay behind what it hands out next.
    pub fn observe_own(&self, hlc: u64) {
        self.last.fetch_max(hlc, Ordering::AcqRel);
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::DebugClock;

    #[test]
    fn ticks_strictly_increase_and_follow_the_clock() {
        let clock = Arc::new(DebugClock::default());
        let hlc = Hlc::new(clock.clone());
        let a = hlc.tick();
        let b = hlc.tick();
        assert!(b > a);
        clock.advance(10_000);
        let c = hlc.tick();
        assert!(c >> LOGICAL_BITS >= (a >> LOGICAL_BITS) + 10_000);
        hlc.observe(c + 1_000_000);
        assert!(hlc.tick() > c + 1_000_000);
    }

    #[test]
    fn a_timestamp_beyond_the_max_offset_is_adopted_only_up_to_it() {
        let clock = Arc::new(DebugClock::default());
        let hlc = Hlc::new(clock.clone());
        let now = clock.now_ms();
        let within = (now + 400) << LOGICAL_BITS;
        assert_eq!(hlc.too_far_ahead(within), None);
        hlc.observe(within);
        assert!(hlc.tick() > within);
        assert_eq!(hlc.ahead_count(), 0);
        // A clock 8,900 years ahead (the largest HLC).
        let far = u64::MAX - 1;
        assert!(hlc.too_far_ahead(far).unwrap() > 8_000 * 365 * 86_400_000);
        hlc.observe(far);
        assert_eq!(hlc.ahead_count(), 2);
        let next = hlc.tick() >> LOGICAL_BITS;
        assert!(next <= clock.now_ms() + DEFAULT_MAX_OFFSET_MS + 1, "{next}");
        // Its own history is adopted whatever it is; 0 lifts the bound.
        hlc.observe_own(far - 10);
        assert!(hlc.tick() > far - 10);
        hlc.set_max_offset_ms(0);
        assert_eq!(hlc.too_far_ahead(far), None);
    }

    #[test]
    fn versions_order_by_hlc_then_site() {
        let a = Version { hlc: 5, site: 2 };
        let b = Version { hlc: 5, site: 3 };
        let c = Version { hlc: 6, site: 1 };
        assert!(a < b && b < c);
    }
}
