//! Where the target is in each partition's log, and what the logs may let
//! go.
//!
//! Per partition a [`Cursor`]: `next` (the next seq to read), `acked` (the
//! highest seq the target applied), `spilled` (the highest seq written to
//! the journal). The log keeps everything from `max(acked, spilled) + 1`
//! ([`Publisher::low`]; the lowest over all targets, [`Wan::retain`]).
//!
//! An acknowledgement *settles* a partition ([`Publisher::settle`]):
//! `acked` moves, the log may let go, and the partition's replicas are told
//! (every [`SHARE_EVERY`]), so a promoted replica resumes from there. A
//! partition whose full values the target asked for is [`Held`] instead:
//! what it applied meanwhile is noted, and `acked` moves only when the last
//! of those full values is applied too.
//!
//! [`Wan::retain`]: crate::Wan

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Publisher;
use crate::PublisherState;

/// How often a primary tells its replicas how far each target applied
/// (after a failover the new primary re-sends at most this much, which the
/// target's watermarks skip). Replicas' logs let go of what every target
/// applied, so this also bounds what they hold beyond the unapplied changes.
pub(super) const SHARE_EVERY: Duration = Duration::from_millis(100);

/// Where a publisher is in one partition's log. One struct per partition
/// rather than a vector per field: a partition a batch reads or an
/// acknowledgement settles costs one cache line, not five (with 16,384
/// partitions few are warm).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Cursor {
    /// The next seq to read.
    pub(super) next: u64,
    /// The highest seq the target applied.
    pub(super) acked: u64,
    /// The highest seq spilled into the journal.
    pub(super) spilled: u64,
    /// Batches in flight holding entries of the partition.
    pub(super) inflight: u32,
    /// This node is the partition's primary.
    pub(super) owned: bool,
}

/// A partition whose `acked` waits for full values the target asked for:
/// how many fallbacks are not yet applied, and the highest seq applied
/// meanwhile (what `acked` becomes when the last one is).
#[derive(Debug, Default)]
pub(super) struct Held {
    pub(super) fallbacks: u32,
    pub(super) applied: u64,
}

impl Publisher {
    /// The lowest seq of partition `p` this target still needs.
    pub(super) fn low(&self, p: usize) -> u64 {
        self.cur[p].acked.max(self.cur[p].spilled) + 1
    }

    /// Whether changes are kept for the target (not stopped, not waiting
    /// for a re-sync).
    pub(super) fn queueing(&self) -> bool {
        matches!(
            self.state(),
            PublisherState::Replicating | PublisherState::Paused
        )
    }

    /// Tells partition `p`'s log the lowest seq this target needs (None:
    /// nothing).
    pub(super) fn set_needed(&self, p: usize, seq: Option<u64>) {
        self.target.needed[p].store(seq.unwrap_or(u64::MAX), Ordering::SeqCst);
        self.wan.retain(p);
    }

    /// [`Self::set_needed`] for what was acknowledged: `low(p)` only grows
    /// there, so the log is told without locking its partition.
    fn advance_needed(&self, p: usize) {
        self.target.needed[p].store(self.low(p), Ordering::SeqCst);
        self.wan.retain_forward(p);
    }

    /// The target applied partition `p` through `seq`: `acked` moves (the
    /// log may let go, the replicas are told) unless full values the
    /// target asked for are outstanding there.
    pub(super) fn settle(&mut self, p: usize, seq: u64) {
        // Almost always empty: then no hashing per partition settled.
        if !self.held.is_empty() {
            if let Some(h) = self.held.get_mut(&p) {
                h.applied = h.applied.max(seq);
                return;
            }
        }
        let Some(c) = self.cur.get_mut(p) else { return };
        if seq > c.acked {
            c.acked = seq;
            let owned = c.owned;
            self.to_share.insert(p);
            if owned && self.queueing() {
                self.advance_needed(p);
            }
        }
    }

    /// One of `p`'s outstanding fallbacks was applied.
    pub(super) fn release(&mut self, p: usize) {
        let Some(h) = self.held.get_mut(&p) else {
            return;
        };
        h.fallbacks = h.fallbacks.saturating_sub(1);
        if h.fallbacks == 0 {
            let applied = h.applied;
            self.held.remove(&p);
            self.settle(p, applied);
        }
    }

    /// Raises what partition `p` is known to have applied to `seq` (a
    /// welcome's watermark, what a previous primary shared), or the held
    /// value while full values are outstanding there: the target may have
    /// applied past a change whose full value it still lacks.
    pub(super) fn raise_acked(&mut self, p: usize, seq: u64) {
        match self.held.get_mut(&p) {
            Some(h) => h.applied = h.applied.max(seq),
            None => {
                if let Some(c) = self.cur.get_mut(p) {
                    c.acked = c.acked.max(seq);
                }
            }
        }
    }

    /// Every owned partition is read again from what the target applied
    /// (or what was spilled): a new link, or one given back.
    pub(super) fn rewind(&mut self) {
        for p in 0..self.parts {
            if self.cur[p].owned {
                self.cur[p].next = self.low(p);
                self.pending.insert(p);
            }
        }
    }

    /// Re-reads which partitions this node is primary for when the table
    /// changed (always on `force`).
    pub(super) fn refresh_ownership(&mut self, force: bool) {
        let table = self.site.table();
        let same = match (&table, &self.table) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => !force,
            _ => false,
        };
        if same && !force {
            return;
        }
        self.table = table;
        for p in 0..self.parts {
            let owned = self.site.is_primary(p);
            if owned == self.cur[p].owned && !force {
                continue;
            }
            self.cur[p].owned = owned;
            if owned {
                // Promoted: resume from what the previous primary shared.
                let shared = self.target.shared_applied[p].load(Ordering::Relaxed);
                self.raise_acked(p, shared);
                self.cur[p].next = self.low(p);
                self.pending.insert(p);
                if self.queueing() {
                    self.set_needed(p, Some(self.low(p)));
                }
            } else {
                self.pending.remove(p);
                self.resync.remove(&p);
                if self.copying.as_ref().is_some_and(|c| c.p == p) {
                    self.copying = None;
                }
                self.set_needed(p, None);
            }
        }
    }

    /// Every [`SHARE_EVERY`], tells the replicas of the owned partitions
    /// that advanced how far the target applied them.
    pub(super) fn share_applied(&mut self) {
        if self.last_share.elapsed() < SHARE_EVERY {
            return;
        }
        self.last_share = Instant::now();
        let mut shared = Vec::new();
        self.to_share.take(&mut shared);
        let applied: Vec<(usize, u64)> = shared
            .into_iter()
            .filter(|&p| self.cur[p].owned)
            .map(|p| (p, self.cur[p].acked))
            .collect();
        self.site
            .share_applied(&self.target.settings.name, &applied);
    }

    /// Forgets the queue for this target: the logs may let go, the journal
    /// is emptied; only a re-sync brings the target back in step.
    pub(super) fn drop_backlog(&mut self) {
        self.spill.clear();
        self.cur.iter_mut().for_each(|c| c.spilled = 0);
        self.outbox.clear();
        self.copying = None;
        self.asked.clear();
        self.asked_bytes = 0;
        self.held.clear();
        self.pending.clear();
        for p in 0..self.parts {
            self.set_needed(p, None);
        }
    }
}
