//! How far the target has passed each partition, announced so that it can
//! let tombstones go ([`crate::settled`] says why this is safe).
//!
//! The same figures tell this node how far the target applied its log:
//! a tombstone goes only once every target has the removal
//! (`Wan::own_settled`).
//!
//! Per partition: `prefix`, the highest hlc among the log's entries up to a
//! seq as far as they were read; `checkpoints`, (seq, that hlc) at the end
//! of each read not yet applied by the target; `settled`, the hlc of the
//! last checkpoint the target applied. Every [`ANNOUNCE_EVERY`] the
//! partitions whose `settled` rose are sent as a `Settled` frame; all of
//! them again on a new link and every [`REANNOUNCE_EVERY`] (for the
//! target's nodes that missed them).
//!
//! Each figure is a lower bound: a hlc is counted only for a seq at or
//! after its entry. Where that cannot be told (a read that ended before
//! what was already read), less is counted, which only keeps tombstones
//! longer.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::Publisher;
use crate::wire::Frame;

pub(super) const ANNOUNCE_EVERY: Duration = Duration::from_secs(1);
pub(super) const REANNOUNCE_EVERY: Duration = Duration::from_secs(30);
/// Checkpoints kept per partition; past it the newest two merge (the
/// later one waits for both).
const CHECKPOINTS: usize = 32;
/// Marks per frame.
const MARKS_PER_FRAME: usize = 4096;

pub(super) struct Settling {
    prefix: Vec<(u64, u64)>,
    checkpoints: Vec<VecDeque<(u64, u64)>>,
    settled: Vec<u64>,
    announced: Vec<u64>,
    pub(super) last_announce: Instant,
    last_full: Instant,
}

impl Settling {
    pub(super) fn new(parts: usize) -> Self {
        Settling {
            prefix: vec![(0, 0); parts],
            checkpoints: vec![VecDeque::new(); parts],
            settled: vec![0; parts],
            announced: vec![0; parts],
            last_announce: Instant::now(),
            last_full: Instant::now(),
        }
    }

    /// Partition `p`'s log was read from `from` through `last`; `hlc` is
    /// the highest among those entries.
    pub(super) fn read(&mut self, p: usize, from: u64, last: u64, hlc: u64) {
        let (Some(prefix), Some(cps)) = (self.prefix.get_mut(p), self.checkpoints.get_mut(p))
        else {
            return;
        };
        debug_assert!(from <= last);
        let mut hlc = hlc;
        if prefix.0 <= last {
            hlc = hlc.max(prefix.1);
            *prefix = (last, hlc);
        }
        if cps.back().is_some_and(|&(seq, _)| seq >= last) {
            return;
        }
        if cps.len() >= CHECKPOINTS {
            cps.pop_back();
        }
        cps.push_back((last, hlc));
    }

    /// The target applied partition `p` through `acked`.
    pub(super) fn acked(&mut self, p: usize, acked: u64) {
        let (Some(cps), Some(settled)) = (self.checkpoints.get_mut(p), self.settled.get_mut(p))
        else {
            return;
        };
        while let Some(&(seq, hlc)) = cps.front() {
            if seq > acked {
                break;
            }
            cps.pop_front();
            *settled = (*settled).max(hlc);
        }
    }

    /// Partition `p` changed hands: what was read of it says nothing of
    /// the log it has now.
    pub(super) fn forget(&mut self, p: usize) {
        if let Some(cps) = self.checkpoints.get_mut(p) {
            cps.clear();
            self.prefix[p] = (0, 0);
            self.settled[p] = 0;
            self.announced[p] = 0;
        }
    }

    /// A new link: everything is announced again.
    pub(super) fn relinked(&mut self) {
        self.announced.iter_mut().for_each(|a| *a = 0);
        self.last_full = Instant::now();
    }

    /// The marks to announce now, if it is time.
    fn due(&mut self, owned: impl Fn(usize) -> bool) -> Vec<(u16, u64)> {
        if self.last_announce.elapsed() < ANNOUNCE_EVERY {
            return Vec::new();
        }
        self.last_announce = Instant::now();
        if self.last_full.elapsed() >= REANNOUNCE_EVERY {
            self.relinked();
        }
        let mut marks = Vec::new();
        for (p, (&s, a)) in self
            .settled
            .iter()
            .zip(self.announced.iter_mut())
            .enumerate()
        {
            if s > *a && owned(p) {
                *a = s;
                marks.push((p as u16, s));
            }
        }
        marks
    }
}

impl Publisher {
    /// Every [`ANNOUNCE_EVERY`], tells this node (which lets tombstones
    /// go once every target applied their removals) and the target how far
    /// the target has passed the partitions this node leads.
    pub(super) fn announce_settled(&mut self) {
        let cur = &self.cur;
        let marks = self.settling.due(|p| cur[p].owned);
        if marks.is_empty() {
            return;
        }
        self.wan.own_settled(&self.target, &marks);
        let Some(out) = self.out.as_ref() else {
            return;
        };
        for chunk in marks.chunks(MARKS_PER_FRAME) {
            if out.tx.send(Frame::Settled(chunk.to_vec())).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Rig;
    use super::*;
    use bytes::Bytes;
    use keyspace::{Change, ChangeKind, Version};

    /// A delete made here: its tombstone goes once the target applied it
    /// (announced, and counted by this node) and the target said it has
    /// passed it too, not before either.
    #[test]
    fn a_delete_settles_once_applied_there_and_passed_by_the_target() {
        let mut r = Rig::new();
        let (p, _) = r.write("k", "v");
        let delete = Change {
            key: Bytes::from_static(b"k"),
            version: Version {
                hlc: 5 << 16,
                site: 1,
            },
            kind: ChangeKind::Delete,
        };
        r.ks.apply(delete, 0).unwrap();
        assert_eq!(r.ks.tombstone_counts().0, 1);
        let incarnation = r.p.wan.incarnation;
        // The target passed it, but has not applied the delete yet.
        r.p.wan.settled("b", &[(p as u16, 9 << 16)], incarnation);
        assert_eq!(r.ks.tombstone_counts().0, 1, "not applied there yet");
        r.link_up();
        r.p.fill();
        let sent = r.sent();
        assert_eq!(r.announced(), vec![], "nothing applied yet");
        for (id, _) in sent {
            r.ack(id);
        }
        assert_eq!(r.announced(), vec![(p as u16, 5 << 16)]);
        assert_eq!(
            r.ks.tombstone_counts().0,
            0,
            "applied there and passed by it"
        );
        assert_eq!(r.announced(), vec![], "announced once");
    }

    /// A read's hlc settles once the target applied through its last
    /// seq, never before; a read ending before what was read already
    /// does not count the earlier entries' hlc.
    #[test]
    fn a_partition_settles_at_what_the_target_applied() {
        let mut s = Settling::new(2);
        s.read(0, 1, 10, 100);
        s.read(0, 11, 20, 90);
        s.acked(0, 9);
        assert_eq!(s.settled[0], 0);
        s.acked(0, 10);
        assert_eq!(s.settled[0], 100);
        s.acked(0, 25);
        assert_eq!(s.settled[0], 100, "the second read's hlc is lower");
        // A link went down; the read again from 11 ends at 15.
        s.read(0, 11, 15, 95);
        s.read(0, 16, 30, 120);
        s.acked(0, 30);
        assert_eq!(s.settled[0], 120);
        s.last_announce -= ANNOUNCE_EVERY;
        assert_eq!(s.due(|_| true), vec![(0, 120)]);
        s.last_announce -= ANNOUNCE_EVERY;
        assert_eq!(s.due(|_| true), vec![]);
        s.relinked();
        s.last_announce -= ANNOUNCE_EVERY;
        assert_eq!(s.due(|p| p == 1), vec![], "only partitions led");
        s.forget(0);
        assert_eq!((s.settled[0], s.prefix[0]), (0, (0, 0)));
    }

    #[test]
    fn checkpoints_stay_bounded() {
        let mut s = Settling::new(1);
        for i in 1..=1000u64 {
            s.read(0, i, i, i * 10);
        }
        assert!(s.checkpoints[0].len() <= CHECKPOINTS);
        s.acked(0, 999);
        assert!(
            s.settled[0] >= 10 * (CHECKPOINTS as u64 - 1),
            "the early ones settle"
        );
        s.acked(0, 1000);
        assert_eq!(s.settled[0], 10_000);
    }
}
