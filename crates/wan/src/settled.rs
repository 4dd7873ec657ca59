//! When a tombstone may go: every other site has passed it.
//!
//! A tombstone (a delete, an HDEL, a removed member) is what keeps an
//! older change from another site from bringing data back. It is needed
//! while some site may still send a change older than it, and not after:
//!
//! - A publisher at site B tells its target A, per partition, the highest
//!   hlc among the entries of B's log that A has applied up to a seq
//!   ([`crate::wire::Frame::Settled`]; computed in the publisher's
//!   `settling` file). B's own later changes of the partition get versions
//!   above it: B's clock observed every entry of its log (its own and
//!   those it applied from other sites), its in-sync replicas observed the
//!   same (so a promoted one continues above it), and a version is taken
//!   and logged under the partition lock. So B will never send A a change
//!   of the partition at or below that hlc.
//! - A's receiver hands the marks to every node of its site (`WANSETTLED`),
//!   and each node keeps, per remote site and partition, the highest mark
//!   ([`Settled`]), so that whichever node leads a partition, now or after
//!   a failover, has them.
//! - The partition's primary settles at the lowest of those marks over all
//!   the sites it exchanges with and of how far each of its own targets
//!   applied its log (the same figures its publishers announce; so a
//!   removal made or applied here reached every target before its
//!   tombstone goes: a re-sync copy carries tombstones, not the log), lets
//!   the tombstones at or below it go (`Keyspace::settle_tombstones`) and
//!   tells its replicas (`TombstonesSettled` in the replication stream; a
//!   snapshot carries the point too). While one site has not said, none
//!   go.
//!
//! Marks are about this site's data: when it starts over without it (a
//! new data incarnation), they are all forgotten
//! ([`Wan::check_data_incarnation`]).
//!
//! A site that is away (a cut link, paused replication) holds its marks
//! back, so tombstones wait for it however long it takes. Memory stays
//! bounded by `wan.tombstone_memory`: what goes over budget unsettled is
//! counted and logged ([`watch`]).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use crate::{Target, Wan};

/// Per remote site (a target's name), per partition: the highest settled
/// hlc that site's publishers announced.
#[derive(Debug, Default)]
pub struct Settled {
    by_site: Mutex<HashMap<String, Vec<u64>>>,
    /// The site's data incarnation the marks are about: a site that
    /// started over without its data holds none of what they say.
    incarnation: Mutex<u64>,
    /// Per partition, the settled point last applied here as its primary.
    applied: Mutex<HashMap<usize, u64>>,
}

impl Settled {
    /// Raises `site`'s marks; returns the partitions whose mark rose.
    fn raise(&self, site: &str, marks: &[(u16, u64)], parts: usize) -> Vec<usize> {
        let mut by_site = self.by_site.lock();
        let own = by_site
            .entry(site.to_string())
            .or_insert_with(|| vec![0; parts]);
        let mut rose = Vec::new();
        for &(p, hlc) in marks {
            if let Some(m) = own.get_mut(p as usize) {
                if hlc > *m {
                    *m = hlc;
                    rose.push(p as usize);
                }
            }
        }
        rose
    }

    /// The lowest mark of partition `p` over `sites` (0 where one has none
    /// yet, or without sites).
    fn lowest(&self, p: usize, sites: &[&str]) -> u64 {
        let by_site = self.by_site.lock();
        sites
            .iter()
            .map(|s| by_site.get(*s).and_then(|m| m.get(p).copied()).unwrap_or(0))
            .min()
            .unwrap_or(0)
    }

    /// Per site, the lowest and highest mark over the partitions (for
    /// `wan status`).
    pub fn summary(&self) -> Vec<(String, u64, u64)> {
        let by_site = self.by_site.lock();
        let mut out: Vec<(String, u64, u64)> = by_site
            .iter()
            .map(|(s, m)| {
                let low = m.iter().copied().min().unwrap_or(0);
                let high = m.iter().copied().max().unwrap_or(0);
                (s.clone(), low, high)
            })
            .collect();
        out.sort();
        out
    }
}

/// How often [`watch`] looks at the tombstones evicted unsettled.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Logs, every [`WATCH_EVERY`], tombstones that went over
/// `tombstone_bytes` before every remote site had passed them (also in
/// `wan status` and /metrics).
pub(crate) async fn watch(wan: std::sync::Arc<Wan>) {
    let mut seen = 0;
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let ks = wan.ks.clone();
        let Ok((held, evicted)) = tokio::task::spawn_blocking(move || ks.tombstone_counts()).await
        else {
            continue;
        };
        if evicted > seen {
            tracing::warn!(
                evicted = evicted - seen,
                held,
                "tombstones went over the tombstone budget before every remote site had passed them: a change older than one of them from a site that lags could bring deleted data back; raise wan.tombstone_memory or bring the lagging site back"
            );
            seen = evicted;
        }
    }
}

impl Wan {
    /// Marks from remote site `site` (see the module doc), which came on
    /// a link opened while this site's data incarnation was `incarnation`:
    /// the tombstones every remote site has passed go. Marks of another
    /// incarnation than the current one (about data since lost), or of a
    /// site this node does not exchange with, are ignored.
    pub fn settled(&self, site: &str, marks: &[(u16, u64)], incarnation: u64) {
        let sites: Vec<&str> = self
            .targets
            .iter()
            .map(|t| t.settings.name.as_str())
            .collect();
        if !sites.contains(&site) {
            return;
        }
        self.check_data_incarnation();
        if incarnation != *self.settled.incarnation.lock() {
            return;
        }
        let parts = self.ks.partitions() as usize;
        let rose = self.settled.raise(site, marks, parts);
        self.settle_led(rose);
    }

    /// This node's publisher to `target` learnt how far the target applied
    /// partitions `(p, hlc)`.
    pub(crate) fn own_settled(&self, target: &Target, marks: &[(u16, u64)]) {
        for &(p, hlc) in marks {
            if let Some(a) = target.own_settled.get(p as usize) {
                a.fetch_max(hlc, Ordering::Relaxed);
            }
        }
        self.settle_led(marks.iter().map(|&(p, _)| p as usize).collect());
    }

    /// The settled point of each of `parts` that this node leads: the
    /// lowest of what every remote site has passed and of how far every
    /// target applied this node's log (so that a removal made or applied
    /// here reached each of them before its tombstone goes: a re-sync
    /// copy carries tombstones, not the log). Where it rose, the
    /// partition's tombstones below it go, here and at its replicas.
    fn settle_led(&self, parts: Vec<usize>) {
        let sites: Vec<&str> = self
            .targets
            .iter()
            .map(|t| t.settings.name.as_str())
            .collect();
        let mut settled = Vec::new();
        for p in parts {
            if !self.is_primary(p) {
                continue;
            }
            let own = self
                .targets
                .iter()
                .map(|t| {
                    t.own_settled
                        .get(p)
                        .map_or(0, |a| a.load(Ordering::Relaxed))
                })
                .min()
                .unwrap_or(0);
            let low = own.min(self.settled.lowest(p, &sites));
            let mut applied = self.settled.applied.lock();
            if low > applied.get(&p).copied().unwrap_or(0) {
                applied.insert(p, low);
                settled.push((p, low));
            }
        }
        if settled.is_empty() {
            return;
        }
        for &(p, low) in &settled {
            self.ks.settle_tombstones(p, low);
        }
        if let Some(c) = &self.cluster {
            c.replicator.share_tombstones_settled(&settled);
        }
    }
}

impl Wan {
    /// Forgets every mark and settled point when this site's data started
    /// over (partitions restarted empty, a new data incarnation): what the
    /// other sites had passed, it no longer holds, and a re-sync copy must
    /// not be taken for something removed here. Called before marks are
    /// recorded and before remote changes are applied.
    pub fn check_data_incarnation(&self) {
        let now = crate::receiver::site_incarnation(self);
        let mut held = self.settled.incarnation.lock();
        if *held == now {
            return;
        }
        if *held != 0 {
            self.settled.by_site.lock().clear();
            self.settled.applied.lock().clear();
            for t in &self.targets {
                t.own_settled
                    .iter()
                    .for_each(|a| a.store(0, Ordering::Relaxed));
            }
            self.ks.unsettle_tombstones();
        }
        *held = now;
    }
}

/// Encodes marks as a `WANSETTLED` payload: `(partition u16, hlc u64)`
/// little-endian, one after another (the incarnation is an argument of
/// its own).
pub fn encode_marks(marks: &[(u16, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(marks.len() * 10);
    for (p, hlc) in marks {
        out.extend_from_slice(&p.to_le_bytes());
        out.extend_from_slice(&hlc.to_le_bytes());
    }
    out
}

/// Decodes a `WANSETTLED` payload; partitions past `parts` are an error.
pub fn decode_marks(payload: &[u8], parts: usize) -> Result<Vec<(u16, u64)>, String> {
    if !payload.len().is_multiple_of(10) {
        return Err("settled marks: length is not a multiple of 10".into());
    }
    payload
        .chunks_exact(10)
        .map(|c| {
            let p = u16::from_le_bytes([c[0], c[1]]);
            let mut hlc = [0; 8];
            hlc.copy_from_slice(&c[2..]);
            if p as usize >= parts {
                return Err(format!("settled marks: partition {p} out of range"));
            }
            Ok((p, u64::from_le_bytes(hlc)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A partition settles at the lowest mark over every site, once all
    /// have one; marks never move back.
    #[test]
    fn the_lowest_mark_over_every_site_settles() {
        let s = Settled::default();
        let sites = ["ny", "tokyo"];
        assert_eq!(s.raise("ny", &[(1, 50)], 4), vec![1]);
        assert_eq!(s.lowest(1, &sites), 0, "tokyo has not said");
        assert_eq!(s.raise("tokyo", &[(1, 30), (2, 9)], 4), vec![1, 2]);
        assert_eq!((s.lowest(1, &sites), s.lowest(2, &sites)), (30, 0));
        assert_eq!(s.raise("tokyo", &[(1, 80)], 4), vec![1]);
        assert_eq!(s.lowest(1, &sites), 50);
        assert_eq!(s.raise("tokyo", &[(1, 70), (9, 1)], 4), Vec::<usize>::new());
        assert_eq!(s.lowest(1, &[]), 0, "no sites: nothing settles");
        assert_eq!(
            s.summary(),
            vec![("ny".into(), 0, 50), ("tokyo".into(), 0, 80)]
        );
    }

    #[test]
    fn marks_round_trip_and_bad_payloads_are_refused() {
        let marks = vec![(0, 1), (270, u64::MAX)];
        assert_eq!(decode_marks(&encode_marks(&marks), 271), Ok(marks));
        assert!(decode_marks(&[0; 9], 271).is_err());
        assert!(decode_marks(&encode_marks(&[(271, 1)]), 271).is_err());
    }

    proptest! {
        #[test]
        fn any_payload_decodes_or_is_refused(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(marks) = decode_marks(&bytes, 271) {
                prop_assert_eq!(encode_marks(&marks), bytes);
            }
        }
    }
}
