//! What eviction knows of a key's use: 32 bits in every [`Entry`], read as
//! Redis reads its object's `lru` field, by the `maxmemory-policy` in force.
//!
//! - **LRU** (every policy but the LFU ones): the time of the last access,
//!   in milliseconds, wrapping every 49.7 days (Redis keeps seconds and
//!   wraps every 194 days). A key idle longer than the wrap looks recently
//!   used, as in Redis; milliseconds let a key read every few milliseconds
//!   outrank the keys written in the same second.
//! - **LFU** (`allkeys-lfu`, `volatile-lfu`): Redis's logarithmic counter.
//!   The low 8 bits count accesses, each access incrementing the counter
//!   with probability `1 / ((counter - 5) * lfu-log-factor + 1)`; the high
//!   24 bits hold the minute of the last decrement, and every
//!   `lfu-decay-time` minutes without access take one from the counter. A
//!   new key starts at 5, so it is not evicted before it had a chance.
//!
//! The mode, the factor, the decay time and a coarse clock are process
//! wide (one node per process), as Redis's server fields are: a value made
//! by a replica's apply or a remote site's write gets the same start as
//! one a command made.
//!
//! [`Entry`]: crate::value::Entry

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A new key's LFU counter (Redis's `LFU_INIT_VAL`).
pub const LFU_INIT: u8 = 5;

static LFU: AtomicBool = AtomicBool::new(false);
static LOG_FACTOR: AtomicU32 = AtomicU32::new(10);
static DECAY_MINUTES: AtomicU32 = AtomicU32::new(1);
/// Milliseconds since the epoch, as the last transaction read the clock.
static NOW_MS: AtomicU64 = AtomicU64::new(0);

/// Whether keys count accesses (an LFU policy) rather than their time.
pub fn set_lfu(on: bool) {
    LFU.store(on, Ordering::Relaxed);
}

pub fn lfu() -> bool {
    LFU.load(Ordering::Relaxed)
}

/// `lfu-log-factor`.
pub fn set_lfu_log_factor(v: u32) {
    LOG_FACTOR.store(v, Ordering::Relaxed);
}

/// `lfu-decay-time` (minutes).
pub fn set_lfu_decay_time(v: u32) {
    DECAY_MINUTES.store(v, Ordering::Relaxed);
}

pub fn lfu_log_factor() -> u32 {
    LOG_FACTOR.load(Ordering::Relaxed)
}

pub fn lfu_decay_time() -> u32 {
    DECAY_MINUTES.load(Ordering::Relaxed)
}

/// Tells the clock the time (the write path reads it for every
/// transaction; stored only when the millisecond changed).
pub fn observe_now(now_ms: u64) {
    if NOW_MS.load(Ordering::Relaxed) != now_ms {
        NOW_MS.store(now_ms, Ordering::Relaxed);
    }
}

fn now_ms() -> u64 {
    match NOW_MS.load(Ordering::Relaxed) {
        0 => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        ms => ms,
    }
}

fn minutes(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & 0xFF_FFFF) as u32
}

/// What a key made now holds.
pub fn fresh() -> u32 {
    fresh_at(now_ms())
}

fn fresh_at(now_ms: u64) -> u32 {
    if lfu() {
        (minutes(now_ms) << 8) | LFU_INIT as u32
    } else {
        now_ms as u32
    }
}

/// What a key accessed at `now_ms` holds after the access.
pub fn touched(held: u32, now_ms: u64) -> u32 {
    if !lfu() {
        return now_ms as u32;
    }
    let counter = decayed(held, now_ms);
    (minutes(now_ms) << 8) | log_incr(counter, rand::random::<f64>()) as u32
}

/// The LFU counter after the decay since the last access (`OBJECT FREQ`).
pub fn decayed(held: u32, now_ms: u64) -> u8 {
    let counter = (held & 0xFF) as u8;
    let decay = DECAY_MINUTES.load(Ordering::Relaxed);
    if decay == 0 {
        return counter;
    }
    let last = held >> 8;
    let now = minutes(now_ms);
    // The 24-bit minute clock wraps (every 31 years), as Redis's 16 bits do.
    let elapsed = if now >= last {
        now - last
    } else {
        now + (0x100_0000 - last)
    };
    let periods = elapsed / decay;
    counter.saturating_sub(periods.min(255) as u8)
}

/// Redis's `LFULogIncr`: one more access, counted with a probability
/// falling as the counter grows; `r` is uniform in [0, 1).
fn log_incr(counter: u8, r: f64) -> u8 {
    if counter == u8::MAX {
        return counter;
    }
    let base = counter.saturating_sub(LFU_INIT) as f64;
    let p = 1.0 / (base * LOG_FACTOR.load(Ordering::Relaxed) as f64 + 1.0);
    if r < p {
        counter + 1
    } else {
        counter
    }
}

/// What RESTORE's `IDLETIME seconds` or `FREQ counter` make of a key's
/// access data at `now_ms`, for the policy in force (None: the option
/// given does not apply to it, and the key keeps a new key's).
pub fn restored(idle_s: Option<i64>, freq: Option<i64>, now_ms: u64) -> Option<u32> {
    match (lfu(), idle_s, freq) {
        (true, _, Some(f)) => Some((minutes(now_ms) << 8) | f.clamp(0, 255) as u32),
        (false, Some(idle), _) => {
            Some(now_ms.wrapping_sub((idle.max(0) as u64).saturating_mul(1000)) as u32)
        }
        _ => None,
    }
}

/// Milliseconds since the access `held` records (LRU mode).
pub fn idle_ms(held: u32, now_ms: u64) -> u64 {
    (now_ms as u32).wrapping_sub(held) as u64
}

/// How much eviction wants the key: higher goes first. LRU: the idle time;
/// LFU: 255 less the decayed counter.
pub fn eviction_score(held: u32, now_ms: u64) -> u64 {
    if lfu() {
        (255 - decayed(held, now_ms)) as u64
    } else {
        idle_ms(held, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lfu_counts_slower_as_it_grows_and_decays_by_the_minute() {
        // The first accesses past the start always count (p = 1).
        assert_eq!(log_incr(LFU_INIT, 0.99), LFU_INIT + 1);
        assert_eq!(log_incr(0, 0.99), 1);
        // At 5 + 10 with factor 10, p = 1/101.
        assert_eq!(log_incr(15, 0.02), 15);
        assert_eq!(log_incr(15, 0.005), 16);
        assert_eq!(log_incr(255, 0.0), 255);
        let t0 = 1_700_000_040_000u64; // a whole minute
        let held = (minutes(t0) << 8) | 20;
        assert_eq!(decayed(held, t0 + 59_000), 20);
        assert_eq!(decayed(held, t0 + 3 * 60_000), 17);
        assert_eq!(decayed(held, t0 + 1000 * 60_000), 0);
    }

    #[test]
    fn lru_idle_time_wraps_with_the_clock() {
        let t0 = (u32::MAX as u64) - 10;
        assert_eq!(idle_ms(t0 as u32, t0 + 30), 30);
        assert_eq!(idle_ms(5_000, 5_250), 250);
    }
}
