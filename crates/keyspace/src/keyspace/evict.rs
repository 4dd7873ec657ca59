//! Eviction: the keys `maxmemory-policy` gives up when memory passes
//! `maxmemory`, chosen as Redis chooses them. Each call samples
//! `maxmemory-samples` keys of one partition this node leads (a random
//! one; for the `volatile-*` policies one holding keys with a time to
//! live, whose keys are sampled from a random point of its expiry index,
//! or for `volatile-ttl` from its start)
//! into a pool of the [`POOL`] best candidates kept across calls, and
//! evicts the best: the longest idle (LRU), the least often used (LFU),
//! the nearest expiry (`volatile-ttl`), or the first sampled (random).
//!
//! An eviction is a logged [`ChangeKind::Evict`](crate::ChangeKind::Evict):
//! the partition's replicas remove the key too (they evict what their
//! primary evicts, never by themselves), client tracking invalidates it,
//! keyspace notifications say `evicted`, and WAN publishers skip it, so
//! other sites keep the key. A replica's copies are never sampled.

use bytes::Bytes;
use parking_lot::Mutex;
use rand::Rng;

use super::Keyspace;
use crate::access;
use crate::partition::Partition;

/// Candidates kept between calls (Redis's `EVPOOL_SIZE`).
const POOL: usize = 16;
/// Partitions tried at random before looking at every one in turn.
const RANDOM_TRIES: usize = 32;

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    /// Every policy, by its Redis name.
    pub const ALL: [(&'static str, Policy); 8] = [
        ("noeviction", Policy::NoEviction),
        ("allkeys-lru", Policy::AllKeysLru),
        ("allkeys-lfu", Policy::AllKeysLfu),
        ("allkeys-random", Policy::AllKeysRandom),
        ("volatile-lru", Policy::VolatileLru),
        ("volatile-lfu", Policy::VolatileLfu),
        ("volatile-random", Policy::VolatileRandom),
        ("volatile-ttl", Policy::VolatileTtl),
    ];

    pub fn parse(name: &str) -> Option<Policy> {
        Self::ALL
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, p)| *p)
    }

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("noeviction", |(n, _)| n)
    }

    /// Index in [`Policy::ALL`] (for an atomic).
    pub fn index(self) -> u8 {
        Self::ALL.iter().position(|(_, p)| *p == self).unwrap_or(0) as u8
    }

    pub fn from_index(i: u8) -> Policy {
        Self::ALL
            .get(i as usize)
            .map_or(Policy::NoEviction, |(_, p)| *p)
    }

    /// Only keys with a time to live may go.
    pub fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    /// Keys count their accesses (see [`crate::access`]).
    pub fn lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }

    fn random(self) -> bool {
        matches!(self, Policy::AllKeysRandom | Policy::VolatileRandom)
    }
}

/// A key that may go: higher scores first.
#[derive(Debug)]
struct Candidate {
    score: u64,
    part: usize,
    key: Bytes,
}

/// The candidates kept across calls.
#[derive(Debug, Default)]
pub(super) struct Evictor {
    pool: Mutex<Vec<Candidate>>,
}

impl Evictor {
    /// Keeps `c` if it is among the best [`POOL`] (the pool is sorted by
    /// score, best last).
    fn offer(pool: &mut Vec<Candidate>, c: Candidate) {
        if let Some(i) = pool.iter().position(|x| x.part == c.part && x.key == c.key) {
            pool.remove(i);
        }
        if pool.len() == POOL {
            if pool[0].score >= c.score {
                return;
            }
            pool.remove(0);
        }
        let at = pool.partition_point(|x| x.score <= c.score);
        pool.insert(at, c);
    }
}

impl Keyspace {
    /// Evicts one key by `policy`, sampling `samples` keys; false when no
    /// key may go (none held here as primary, or, for a `volatile-*`
    /// policy, none with a time to live).
    pub fn evict_one(&self, policy: Policy, samples: usize) -> bool {
        if policy == Policy::NoEviction {
            return false;
        }
        let samples = samples.max(1);
        for _ in 0..POOL {
            let Some(p) = self.eviction_partition(policy) else {
                return false;
            };
            let sampled = self.sample(p, policy, samples);
            let mut pool = self.evictor.pool.lock();
            if policy.random() {
                pool.clear();
            }
            for c in sampled {
                Evictor::offer(&mut pool, c);
            }
            while let Some(c) = pool.pop() {
                if self.evict_candidate(&c, policy) {
                    return true;
                }
            }
        }
        false
    }

    /// A partition led here holding keys the policy may take.
    fn eviction_partition(&self, policy: Policy) -> Option<usize> {
        let fits = |part: &Partition| {
            !part.replica
                && if policy.volatile() {
                    part.expires_len() > 0
                } else {
                    !part.is_empty()
                }
        };
        let n = self.parts.len();
        let mut rng = rand::thread_rng();
        if policy.volatile() {
            let start = rng.gen_range(0..n);
            return self
                .expiring
                .members_from(start)
                .into_iter()
                .find(|&p| fits(&self.parts[p].lock()));
        }
        for _ in 0..RANDOM_TRIES {
            let p = rng.gen_range(0..n);
            if fits(&self.parts[p].lock()) {
                return Some(p);
            }
        }
        let start = rng.gen_range(0..n);
        (0..n)
            .map(|i| (start + i) % n)
            .find(|&p| fits(&self.parts[p].lock()))
    }

    /// Up to `samples` keys of partition `p` the policy may take, scored.
    fn sample(&self, p: usize, policy: Policy, samples: usize) -> Vec<Candidate> {
        let part = self.parts[p].lock();
        let now = self.now_ms();
        let mut rng = rand::thread_rng();
        let score = |access: u32, expire_at: u64| match policy {
            Policy::VolatileTtl => u64::MAX - expire_at,
            _ if policy.random() => 0,
            _ => access::eviction_score(access, now),
        };
        let mut out = Vec::with_capacity(samples);
        if policy.volatile() {
            let Some((lo, hi)) = part.expiry_range() else {
                return out;
            };
            // volatile-ttl: the nearest expiries of the partition (exact
            // within it); else from a random point of its expiry index.
            let from = match policy {
                Policy::VolatileTtl => lo,
                _ => rng.gen_range(lo..=hi),
            };
            for (at, key) in part.expiring_from(from).take(samples) {
                let access = part.get(key).map_or(0, |e| e.access);
                out.push(Candidate {
                    score: score(access, at),
                    part: p,
                    key: key.to_bytes(),
                });
            }
        } else if !part.is_empty() {
            for _ in 0..samples {
                let i = rng.gen_range(0..part.len());
                if let Some((key, e)) = part.get_index(i) {
                    out.push(Candidate {
                        score: score(e.access, e.expire_at),
                        part: p,
                        key: key.to_bytes(),
                    });
                }
            }
        }
        out
    }

    /// Evicts `c` if it may still go: held here as primary, with a time to
    /// live for a `volatile-*` policy, and not used since it was sampled
    /// (LRU/LFU: its score did not fall).
    fn evict_candidate(&self, c: &Candidate, policy: Policy) -> bool {
        let mut txn = self.txn_partition(c.part, 0);
        let now = txn.now;
        let part = &txn.guards[0].1;
        if part.replica {
            return false;
        }
        let Some(e) = part.get(&c.key) else {
            return false;
        };
        if policy.volatile() && e.expire_at == 0 {
            return false;
        }
        if !policy.random()
            && policy != Policy::VolatileTtl
            && access::eviction_score(e.access, now) < c.score
        {
            return false;
        }
        txn.evict_key(0, &c.key);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(score: u64, key: &'static str) -> Candidate {
        Candidate {
            score,
            part: 0,
            key: Bytes::from_static(key.as_bytes()),
        }
    }

    #[test]
    fn the_pool_keeps_the_best_sixteen_best_last() {
        let mut pool = Vec::new();
        for i in 0..40u64 {
            Evictor::offer(&mut pool, c((i * 7) % 40, "k"));
            Evictor::offer(&mut pool, c(i, Box::leak(format!("k{i}").into_boxed_str())));
        }
        assert_eq!(pool.len(), POOL);
        assert!(pool.windows(2).all(|w| w[0].score <= w[1].score));
        assert_eq!(pool.last().map(|c| c.score), Some(39));
        // Offered again, a key replaces its old place.
        assert!(pool.iter().filter(|c| c.key == "k").count() <= 1);
    }

    use std::sync::Arc;

    use crate::clock::DebugClock;
    use crate::value::Value;
    use crate::{KeyspaceConfig, Write};

    fn keyspace(partitions: u16) -> (Keyspace, Arc<DebugClock>) {
        let clock = Arc::new(DebugClock::default());
        clock.advance(1_700_000_000_000);
        let cfg = KeyspaceConfig {
            partitions,
            site_id: 1,
            ..Default::default()
        };
        (Keyspace::new(cfg, clock.clone()), clock)
    }

    fn set(ks: &Keyspace, key: &str, ttl_ms: u64) {
        let mut txn = ks.txn([key.as_bytes()], 0);
        let expire_at = if ttl_ms == 0 {
            0
        } else {
            txn.now_ms() + ttl_ms
        };
        let value = Value::str(Bytes::from_static(b"v"));
        txn.write(key.as_bytes(), Write::Set { value, expire_at })
            .unwrap();
    }

    fn held(ks: &Keyspace, key: &str) -> bool {
        ks.txn([key.as_bytes()], 0).peek(key.as_bytes()).is_some()
    }

    #[test]
    fn volatile_policies_take_only_keys_with_a_time_to_live() {
        let (ks, _) = keyspace(8);
        for i in 0..50 {
            set(&ks, &format!("plain{i}"), 0);
        }
        for i in 0..5 {
            set(&ks, &format!("ttl{i}"), 60_000 + i);
        }
        for policy in [
            Policy::VolatileLru,
            Policy::VolatileRandom,
            Policy::VolatileTtl,
        ] {
            for i in 0..5 {
                set(&ks, &format!("ttl{i}"), 60_000 + i);
            }
            for _ in 0..5 {
                assert!(ks.evict_one(policy, 5), "{policy:?}");
            }
            assert!(!ks.evict_one(policy, 5), "{policy:?}: nothing left to take");
            assert_eq!(ks.len(), 50);
        }
        let evicted = ks.stats().count(crate::ChangeKind::EVICT_INDEX);
        assert_eq!(evicted, 15, "each eviction logged");
        assert!(!ks.evict_one(Policy::NoEviction, 5));
    }

    #[test]
    fn volatile_ttl_takes_the_nearest_expiry_of_a_partition_first() {
        let (ks, _) = keyspace(1);
        for i in 0..40u64 {
            set(&ks, &format!("k{i}"), 1_000 + (i * 7919) % 40 * 1_000);
        }
        let mut order = Vec::new();
        for _ in 0..40 {
            let before: Vec<u64> = (0..40).filter(|i| held(&ks, &format!("k{i}"))).collect();
            assert!(ks.evict_one(Policy::VolatileTtl, 5));
            let gone = before.into_iter().find(|i| !held(&ks, &format!("k{i}")));
            order.push((gone.unwrap() * 7919) % 40);
        }
        assert_eq!(order, (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn lru_and_lfu_keep_a_key_in_use() {
        for policy in [Policy::AllKeysLru, Policy::AllKeysLfu] {
            access::set_lfu(policy.lfu());
            let (ks, clock) = keyspace(4);
            set(&ks, "hot", 0);
            for i in 0..200 {
                set(&ks, &format!("k{i}"), 0);
                clock.advance(10);
                ks.txn([&b"hot"[..]], 0).get(b"hot");
            }
            for _ in 0..190 {
                assert!(ks.evict_one(policy, 5));
                clock.advance(1);
                ks.txn([&b"hot"[..]], 0).get(b"hot");
            }
            assert!(held(&ks, "hot"), "{policy:?} evicted the key in use");
            access::set_lfu(false);
        }
    }

    #[test]
    fn policies_round_trip_by_name_and_index() {
        for (name, p) in Policy::ALL {
            assert_eq!(Policy::parse(name), Some(p));
            assert_eq!(Policy::parse(&name.to_uppercase()), Some(p));
            assert_eq!(p.name(), name);
            assert_eq!(Policy::from_index(p.index()), p);
        }
        assert_eq!(Policy::parse("lru"), None);
    }
}
