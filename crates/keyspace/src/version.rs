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

pub struct Hlc {
    last: AtomicU64,
    clock: Arc<dyn Clock>,
}

impl Hlc {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Hlc {
            last: AtomicU64::new(0),
            clock,
        }
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

    /// Move past a timestamp seen from elsewhere (a peer or a remote site).
    pub fn observe(&self, hlc: u64) {
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
    fn versions_order_by_hlc_then_site() {
        let a = Version { hlc: 5, site: 2 };
        let b = Version { hlc: 5, site: 3 };
        let c = Version { hlc: 6, site: 1 };
        assert!(a < b && b < c);
    }
}
