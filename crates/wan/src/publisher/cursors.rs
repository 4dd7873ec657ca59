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
            self.settling.acked(p, seq);
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
                    self.settling.acked(p, c.acked);
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
            self.settling.forget(p);
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

#[cfg(test)]
mod tests {
    use super::super::testing::{seqs, Rig};
    use super::*;
    use crate::wire::Frame;

    /// `received` only opens the window; `applied` settles: `acked` moves,
    /// the log is told it may let go, and the replicas are told at the
    /// next share.
    #[test]
    fn an_applied_batch_settles_its_partitions_and_lets_the_log_go() {
        let mut r = Rig::new();
        let (p, _) = r.write("k", "1");
        let (_, seq) = r.write("k", "2");
        r.link_up();
        assert_eq!(r.needed(p), Some(1));
        r.p.fill();
        let sent = r.sent();
        assert_eq!(sent.len(), 1);
        let (id, entries) = &sent[0];
        assert_eq!(
            seqs(entries),
            vec![(p as u16, 1, "k".into()), (p as u16, 2, "k".into())]
        );
        r.p.on_frame(Frame::Received(*id)).unwrap();
        assert_eq!(r.p.cur[p].acked, 0, "received is not applied");
        assert_eq!(r.needed(p), Some(1));
        r.p.on_frame(Frame::Applied(*id)).unwrap();
        assert_eq!(r.p.cur[p].acked, seq);
        assert_eq!(r.p.cur[p].inflight, 0);
        assert_eq!(r.needed(p), Some(seq + 1));
        r.p.last_share = Instant::now() - SHARE_EVERY;
        r.p.share_applied();
        assert_eq!(*r.site.shared.lock(), vec![(p, seq)]);
        // Shared once: nothing advanced since.
        r.p.last_share = Instant::now() - SHARE_EVERY;
        r.p.share_applied();
        assert_eq!(r.site.shared.lock().len(), 1);
    }

    /// An acknowledgement never moves `acked` back, and one for a batch
    /// that is not in flight (a link ago) settles nothing.
    #[test]
    fn acked_only_rises() {
        let mut r = Rig::new();
        let (p, _) = r.write("k", "1");
        r.p.settle(p, 5);
        r.p.settle(p, 3);
        assert_eq!(r.p.cur[p].acked, 5);
        r.p.raise_acked(p, 4);
        assert_eq!(r.p.cur[p].acked, 5);
        r.p.on_frame(Frame::Applied(77)).unwrap();
        assert_eq!(r.p.cur[p].acked, 5);
    }

    /// The target asked for a full value: the batch that asked, applied,
    /// does not settle the partition, nor does a welcome's watermark; the
    /// full value applied does, to the highest seq applied meanwhile.
    #[test]
    fn a_partition_asked_for_full_values_keeps_acked_until_they_are_applied() {
        let mut r = Rig::new();
        let (p, seq) = r.write("k", "1");
        r.link_up();
        r.p.fill();
        let (id, _) = r.sent().remove(0);
        r.p.on_frame(Frame::NeedFull(vec![(p as u16, "k".into())]))
            .unwrap();
        r.ack(id);
        assert_eq!(r.p.cur[p].acked, 0, "held: its full value is outstanding");
        assert_eq!(r.needed(p), Some(1));
        r.p.raise_acked(p, seq);
        assert_eq!(r.p.cur[p].acked, 0, "a watermark does not pass a hold");
        r.p.fill();
        let (full, entries) = r.sent().remove(0);
        assert_eq!(seqs(&entries), vec![(p as u16, 0, "k".into())]);
        assert_eq!(r.p.cur[p].acked, 0);
        r.ack(full);
        assert_eq!(r.p.cur[p].acked, seq);
        assert_eq!(r.needed(p), Some(seq + 1));
        assert!(r.p.held.is_empty());
    }

    /// Only other sites' changes, nothing of the partition on its way: the
    /// reader settles them at once. With a batch of the partition in
    /// flight, they wait for it.
    #[test]
    fn other_sites_changes_settle_at_once_unless_a_batch_is_on_its_way() {
        let mut r = Rig::new();
        r.link_up();
        let (p, seq) = r.write_at(2, "k", b"theirs");
        r.p.fill();
        assert!(r.sent().is_empty(), "nothing of this site's to ship");
        assert_eq!(r.p.cur[p].acked, seq);
        assert_eq!(r.needed(p), Some(seq + 1));
        r.write("k", "ours");
        r.hold_over();
        r.p.fill();
        let sent = r.sent();
        assert_eq!(sent.len(), 1);
        let (_, theirs) = r.write_at(2, "k", b"theirs again");
        r.p.flow.small_in_flight = None;
        r.hold_over();
        r.p.fill();
        assert!(r.sent().is_empty());
        assert_eq!(r.p.cur[p].acked, seq, "the batch on its way settles");
        assert_eq!(r.p.cur[p].next, theirs + 1);
        // Once applied, through the other site's change read behind it:
        // nothing else would settle it (the log would keep it until this
        // site next wrote the partition).
        r.ack(sent[0].0);
        assert_eq!(r.p.cur[p].acked, theirs);
        assert_eq!(r.needed(p), Some(theirs + 1));
        assert_eq!(r.p.cur[p].inflight, 0);
    }

    /// A partition this node comes to lead resumes from what its previous
    /// primary shared; one it no longer leads needs nothing from its log.
    #[test]
    fn a_promoted_partition_resumes_from_what_its_previous_primary_shared() {
        let mut r = Rig::new();
        let p = 2;
        r.site.set_primary(p, false);
        r.p.refresh_ownership(true);
        assert!(!r.p.cur[p].owned);
        assert_eq!(r.needed(p), None);
        r.target.shared_applied[p].store(5, std::sync::atomic::Ordering::Relaxed);
        r.site.set_primary(p, true);
        r.p.refresh_ownership(true);
        assert!(r.p.cur[p].owned);
        assert_eq!((r.p.cur[p].acked, r.p.cur[p].next), (5, 6));
        assert_eq!(r.needed(p), Some(6));
        assert!(r.p.pending.members_from(0).contains(&p));
        r.site.set_primary(p, false);
        r.p.resync.insert(p);
        r.p.refresh_ownership(true);
        assert_eq!(r.needed(p), None);
        assert!(!r.p.pending.members_from(0).contains(&p));
        assert!(r.p.resync.is_empty(), "its new primary copies it if needed");
    }

    /// While stopped or waiting for a re-sync, nothing is kept: an
    /// acknowledgement moves `acked` but tells the log nothing.
    #[test]
    fn a_target_not_queueing_keeps_nothing_in_the_logs() {
        let mut r = Rig::new();
        let (p, _) = r.write("k", "1");
        r.target.control(crate::Control::Stop);
        r.p.run_controls();
        assert_eq!(r.needed(p), None);
        r.p.settle(p, 1);
        assert_eq!(r.p.cur[p].acked, 1);
        assert_eq!(r.needed(p), None);
    }
}
