//! What a backup keeps of its primaries' changes for WAN replication: the
//! replication batches as they arrived, one queue per node, oldest first,
//! instead of a copy of each change in its partition's log. Only a copy
//! being promoted reads it: [`Received::run`] gives its partition's
//! changes, from which the new primary's log is rebuilt so that its WAN
//! publishers resume from what the remote sites applied.
//!
//! Copying every change a backup applied into its partition log (and
//! trimming it again ~100 ms later) cost the core that also serves the
//! clients a few percent of its writes, for bytes the batch already held
//! in memory; holding a batch costs a reference count and an index entry
//! per change ([`HeldChange`]).
//!
//! The budget counts memory, not lengths: a batch read into a buffer of
//! the connection's keeps that buffer alive, so the buffer is what is
//! counted ([`Pinned`], once however many of its batches are held).
//! Batches go oldest first: once every change in the front batch was
//! applied by every remote site (`released`, see
//! [`crate::Keyspace::release_log_before`]) or belongs to a copy since
//! replaced ([`Received::forget`]; also what nothing will release: a
//! stale primary's changes of a partition this node leads, those of a copy
//! it no longer holds, see `Keyspace::forget_received`), and whenever the
//! queue is over budget.
//! A copy promoted after its changes went over budget finds that its log
//! does not reach back, and its publishers copy the partition's contents
//! instead (as when a backup's own log was trimmed to `log_memory`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use smallvec::SmallVec;

/// One change in a held batch: partition, seq, and where its encoding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldChange {
    pub partition: u16,
    pub seq: u64,
    pub start: u32,
    pub len: u32,
}

/// A partition's held changes, read ahead of its promotion, and the copy
/// they belong to.
pub struct HeldRun {
    copy: u64,
    /// The number the next batch held after this was read gets.
    upto: u64,
    changes: Vec<(u64, Bytes)>,
}

/// Where a batch's changes are (most batches hold a few).
pub type HeldChanges = SmallVec<[HeldChange; 4]>;

/// The bytes a queue holds: buffers its batches keep alive ([`Pinned`]
/// adds and takes away its own), and what it counts per batch (updated
/// under the queue's lock, read without it).
#[derive(Debug, Default)]
pub struct Counts {
    pinned: AtomicUsize,
    own: AtomicUsize,
}

impl Counts {
    pub fn total(&self) -> usize {
        self.pinned.load(Ordering::Relaxed) + self.own.load(Ordering::Relaxed)
    }
}

/// The memory of a buffer batches were read into, counted in a
/// [`Received`] queue's total from when it first holds one of them until
/// the last reference (the queue's, or the connection still reading into
/// the buffer) goes.
#[derive(Debug)]
pub struct Pinned {
    bytes: usize,
    counts: OnceLock<Arc<Counts>>,
}

impl Pinned {
    /// A buffer of `bytes` (its capacity), counted nowhere yet.
    pub fn new(bytes: usize) -> Self {
        Pinned {
            bytes,
            counts: OnceLock::new(),
        }
    }

    fn count_in(&self, counts: &Arc<Counts>) {
        if self.counts.get().is_none() && self.counts.set(counts.clone()).is_ok() {
            counts.pinned.fetch_add(self.bytes, Ordering::Relaxed);
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(counts) = self.counts.get() {
            counts.pinned.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

struct Batch {
    number: u64,
    payload: Bytes,
    changes: HeldChanges,
    /// Keeps the buffer counted while the payload keeps it alive.
    _pin: Option<Arc<Pinned>>,
    /// Bytes counted for this batch alone (one without a shared buffer).
    own: usize,
}

pub struct Received {
    batches: VecDeque<Batch>,
    next_number: u64,
    /// How many changes of the front batch are known to be let go (what
    /// `released` says only grows, and a forgotten copy stays forgotten).
    front_done: usize,
    /// The release generation (see [`Self::trim`]) at which the front
    /// batch was last found to hold a change still needed; None: not
    /// checked since it changed.
    blocked_at: Option<u64>,
    /// Per partition: batches numbered below this hold nothing of its
    /// current copy.
    valid_from: Box<[u64]>,
    /// The highest of `valid_from`: batches numbered from here on are
    /// valid for every partition (forgetting is rare; at 16,384
    /// partitions `valid_from` is a cache miss per change looked at).
    forgotten_below: u64,
    budget: usize,
    /// What `counts.own` says, kept under the lock.
    own: usize,
    counts: Arc<Counts>,
}

impl Received {
    /// A queue for `partitions` partitions holding up to `budget` bytes
    /// (0: it holds nothing).
    pub fn new(partitions: usize, budget: usize) -> Self {
        Received {
            batches: VecDeque::new(),
            next_number: 0,
            front_done: 0,
            blocked_at: None,
            valid_from: vec![0; partitions].into_boxed_slice(),
            forgotten_below: 0,
            budget,
            own: 0,
            counts: Arc::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// The running count of [`Self::bytes`], to read without a lock.
    pub fn counts(&self) -> Arc<Counts> {
        self.counts.clone()
    }

    /// Bytes of memory the held batches take.
    pub fn bytes(&self) -> usize {
        self.counts.total()
    }

    fn count_own(&mut self, add: usize, sub: usize) {
        self.own = self.own + add - sub;
        // Only ever written under the queue's lock: a plain store.
        self.counts.own.store(self.own, Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Holds a batch whose `changes` lie in `payload` (ranges outside it
    /// are dropped); `pin` is the buffer it was read into, None when the
    /// payload has its own allocation. Then lets go what the budget and
    /// `released` allow (see [`Self::trim`]).
    pub fn hold(
        &mut self,
        payload: Bytes,
        mut changes: HeldChanges,
        pin: Option<Arc<Pinned>>,
        generation: u64,
        released: impl Fn(usize) -> u64,
    ) {
        let parts = self.valid_from.len();
        changes.retain(|h| {
            (h.partition as usize) < parts
                && (h.start as usize)
                    .checked_add(h.len as usize)
                    .is_some_and(|end| end <= payload.len())
        });
        if !self.enabled() || changes.is_empty() {
            return;
        }
        let index = if changes.spilled() {
            changes.capacity() * std::mem::size_of::<HeldChange>()
        } else {
            0
        };
        let own =
            std::mem::size_of::<Batch>() + index + if pin.is_none() { payload.len() } else { 0 };
        if let Some(pin) = &pin {
            pin.count_in(&self.counts);
        }
        self.count_own(own, 0);
        if self.batches.is_empty() {
            self.blocked_at = None;
        }
        self.batches.push_back(Batch {
            number: self.next_number,
            payload,
            changes,
            _pin: pin,
            own,
        });
        self.next_number += 1;
        self.trim(generation, released);
    }

    /// What the queue holds of partition `p` belongs to a copy that is
    /// gone (replaced by a snapshot, promoted, handed on).
    pub fn forget(&mut self, p: usize) {
        if let Some(v) = self.valid_from.get_mut(p) {
            *v = self.next_number;
            self.forgotten_below = self.next_number;
            self.blocked_at = None;
        }
    }

    /// Drops the batches nobody needs from the front: while over budget,
    /// and while every change in the front one is released (`released(p)`
    /// is the seq before which every remote site applied partition p's
    /// changes) or forgotten. `generation` changes whenever some
    /// `released(p)` grew: a front found blocked is not looked at again
    /// until it did (its index is cold by then; one look per batch held
    /// cost more than holding it).
    pub fn trim(&mut self, generation: u64, released: impl Fn(usize) -> u64) {
        while let Some(front) = self.batches.front() {
            if self.bytes() <= self.budget {
                if self.blocked_at == Some(generation) {
                    return;
                }
                let all_valid = front.number >= self.forgotten_below;
                while let Some(h) = front.changes.get(self.front_done) {
                    let p = h.partition as usize;
                    if (all_valid || front.number >= self.valid_from[p]) && h.seq >= released(p) {
                        break;
                    }
                    self.front_done += 1;
                }
                if self.front_done < front.changes.len() {
                    self.blocked_at = Some(generation);
                    return;
                }
            }
            if let Some(b) = self.batches.pop_front() {
                self.count_own(0, b.own);
            }
            self.front_done = 0;
            self.blocked_at = None;
        }
    }

    /// Partition `p`'s changes ending at seq `next - 1`, consecutive and
    /// oldest first, as far back as the queue holds them without a gap;
    /// empty when it does not hold `next - 1`. A change held twice (a
    /// batch sent again after a reconnection) counts once; changes at
    /// `next` or after were not applied.
    pub fn run(&self, p: usize, next: u64) -> Vec<(u64, &[u8])> {
        consecutive_run(self.changes(p, 0), next)
    }

    /// [`Self::run`] from what [`Self::changes_of`] read ahead and the
    /// batches held since (all of the queue if the copy was replaced in
    /// between).
    pub fn run_with<'a>(&'a self, p: usize, ahead: &'a HeldRun, next: u64) -> Vec<(u64, &'a [u8])> {
        if self.copy_of(p) != Some(ahead.copy) {
            return self.run(p, next);
        }
        let early = ahead.changes.iter().map(|(seq, b)| (*seq, &b[..]));
        consecutive_run(early.chain(self.changes(p, ahead.upto)), next)
    }

    /// Partition `p`'s changes of its current copy held in batches
    /// numbered `from` on, oldest first.
    fn changes(&self, p: usize, from: u64) -> impl Iterator<Item = (u64, &[u8])> {
        let from = from.max(self.valid_from.get(p).copied().unwrap_or(u64::MAX));
        let skip = self
            .batches
            .front()
            .map_or(0, |f| from.saturating_sub(f.number) as usize)
            .min(self.batches.len());
        self.batches.range(skip..).flat_map(move |b| {
            b.changes
                .iter()
                .filter(move |h| h.partition as usize == p)
                .map(|h| {
                    (
                        h.seq,
                        &b.payload[h.start as usize..h.start as usize + h.len as usize],
                    )
                })
        })
    }

    /// The changes held of each partition in `parts`, oldest first, in
    /// one pass (a table that promotes many copies at once), for
    /// [`Self::run_with`].
    pub fn changes_of(&self, parts: &[usize]) -> HashMap<usize, HeldRun> {
        let mut out: HashMap<usize, HeldRun> = parts
            .iter()
            .filter_map(|&p| {
                Some((
                    p,
                    HeldRun {
                        copy: self.copy_of(p)?,
                        upto: self.next_number,
                        changes: Vec::new(),
                    },
                ))
            })
            .collect();
        for b in &self.batches {
            for h in &b.changes {
                let p = h.partition as usize;
                if b.number < self.valid_from[p] {
                    continue;
                }
                if let Some(run) = out.get_mut(&p) {
                    run.changes.push((
                        h.seq,
                        b.payload
                            .slice(h.start as usize..h.start as usize + h.len as usize),
                    ));
                }
            }
        }
        out
    }

    /// Which copy of partition `p` the queue holds changes of: it changes
    /// with every [`Self::forget`].
    pub fn copy_of(&self, p: usize) -> Option<u64> {
        self.valid_from.get(p).copied()
    }
}

/// Of one partition's `changes` (oldest first), the consecutive run
/// ending at seq `next - 1`, as far back as it goes without a gap; empty
/// when `next - 1` is not among them. A seq seen twice counts once;
/// changes at `next` or after were not applied.
pub fn consecutive_run<'a>(
    changes: impl IntoIterator<Item = (u64, &'a [u8])>,
    next: u64,
) -> Vec<(u64, &'a [u8])> {
    let mut run: Vec<(u64, &[u8])> = Vec::new();
    for (seq, enc) in changes.into_iter().filter(|&(seq, _)| seq < next) {
        let last = run.last().map(|&(seq, _)| seq);
        if last.is_some_and(|last| seq <= last) {
            continue;
        }
        if last.is_some_and(|last| seq != last + 1) {
            run.clear();
        }
        run.push((seq, enc));
    }
    if run.last().map(|&(seq, _)| seq + 1) != Some(next) {
        run.clear();
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of (partition, seq) changes whose encoding is the seq's
    /// decimal digits.
    fn batch(changes: &[(u16, u64)]) -> (Bytes, HeldChanges) {
        let mut payload = Vec::new();
        let mut held = HeldChanges::new();
        for &(p, seq) in changes {
            let enc = seq.to_string();
            held.push(HeldChange {
                partition: p,
                seq,
                start: payload.len() as u32,
                len: enc.len() as u32,
            });
            payload.extend_from_slice(enc.as_bytes());
        }
        (Bytes::from(payload), held)
    }

    fn seqs(run: &[(u64, &[u8])]) -> Vec<u64> {
        run.iter()
            .map(|&(seq, enc)| {
                assert_eq!(
                    enc,
                    seq.to_string().as_bytes(),
                    "the encoding held for the seq"
                );
                seq
            })
            .collect()
    }

    const NONE: fn(usize) -> u64 = |_| 0;

    #[test]
    fn a_promoted_copy_gets_its_consecutive_changes_up_to_its_last() {
        let mut r = Received::new(2, 1 << 20);
        for b in [
            batch(&[(0, 1), (1, 1), (0, 2)]),
            batch(&[(0, 3), (1, 2)]),
            batch(&[(0, 4)]),
        ] {
            r.hold(b.0, b.1, None, 0, NONE);
        }
        assert_eq!(seqs(&r.run(0, 5)), [1, 2, 3, 4]);
        assert_eq!(seqs(&r.run(1, 3)), [1, 2]);
        // Held but not applied (the copy's next seq is 4): not in the run.
        assert_eq!(seqs(&r.run(0, 4)), [1, 2, 3]);
        // The copy applied a change the queue does not hold: no run.
        assert!(r.run(0, 6).is_empty());
    }

    #[test]
    fn one_pass_for_many_partitions_gives_the_same_runs() {
        let mut r = Received::new(3, 1 << 20);
        for b in [
            batch(&[(0, 1), (1, 1), (0, 2)]),
            batch(&[(2, 9), (0, 3), (1, 2)]),
            batch(&[(0, 4), (1, 3)]),
        ] {
            r.hold(b.0, b.1, None, 0, NONE);
        }
        r.forget(2);
        let all = r.changes_of(&[0, 1, 2]);
        for (p, next) in [(0, 5), (1, 4), (1, 3), (2, 10)] {
            assert_eq!(
                seqs(&r.run_with(p, &all[&p], next)),
                seqs(&r.run(p, next)),
                "partition {p}"
            );
        }
        assert!(all[&2].changes.is_empty(), "forgotten");
        // Batches held after the read-ahead count too.
        let (b, h) = batch(&[(0, 5), (1, 4)]);
        r.hold(b, h, None, 0, NONE);
        assert_eq!(seqs(&r.run_with(0, &all[&0], 6)), [1, 2, 3, 4, 5]);
        assert_eq!(seqs(&r.run_with(1, &all[&1], 5)), [1, 2, 3, 4]);
        assert_eq!(Some(all[&0].copy), r.copy_of(0));
        r.forget(0);
        assert_ne!(
            Some(all[&0].copy),
            r.copy_of(0),
            "a list read before a forget is of another copy"
        );
        assert!(
            r.run_with(0, &all[&0], 6).is_empty(),
            "so the queue is read again, and holds nothing of the new copy"
        );
    }

    #[test]
    fn a_gap_starts_the_run_again_and_repeats_count_once() {
        let mut r = Received::new(1, 1 << 20);
        for b in [
            batch(&[(0, 1), (0, 2)]),
            batch(&[(0, 5), (0, 6)]),
            batch(&[(0, 5), (0, 6), (0, 7)]),
        ] {
            r.hold(b.0, b.1, None, 0, NONE);
        }
        assert_eq!(seqs(&r.run(0, 8)), [5, 6, 7]);
    }

    #[test]
    fn released_changes_go_oldest_batch_first() {
        let mut r = Received::new(2, 1 << 20);
        let (a, ha) = batch(&[(0, 1), (1, 1)]);
        let (b, hb) = batch(&[(0, 2)]);
        r.hold(a, ha, None, 0, NONE);
        r.hold(b, hb, None, 0, NONE);
        // Partition 0 released through 2, partition 1 not yet: both stay.
        r.trim(1, |p| if p == 0 { 3 } else { 0 });
        assert_eq!(r.len(), 2);
        r.trim(1, |_| 3);
        assert_eq!(
            r.len(),
            2,
            "a blocked front is looked at again only once the generation moved"
        );
        r.trim(2, |_| 3);
        assert_eq!(r.len(), 0);
        assert_eq!(r.bytes(), 0, "nothing counted once empty");
    }

    #[test]
    fn a_forgotten_copy_holds_nothing_back() {
        let mut r = Received::new(2, 1 << 20);
        let (a, ha) = batch(&[(0, 1), (1, 7)]);
        r.hold(a, ha, None, 0, NONE);
        r.forget(1);
        assert!(
            r.run(1, 8).is_empty(),
            "changes of the old copy are not the new one's"
        );
        r.trim(3, |p| if p == 0 { 2 } else { 0 });
        assert!(r.is_empty());
        // The new copy's changes are held until released.
        let (b, hb) = batch(&[(1, 3)]);
        r.hold(b, hb, None, 4, |_| 0);
        assert_eq!(seqs(&r.run(1, 4)), [3]);
        r.trim(5, |_| 3);
        assert_eq!(r.len(), 1);
        r.trim(6, |_| 4);
        assert!(r.is_empty());
    }

    #[test]
    fn over_budget_the_oldest_go_and_the_run_no_longer_reaches_back() {
        let (a, _) = batch(&[(0, 1)]);
        let per = a.len() + std::mem::size_of::<Batch>();
        let mut r = Received::new(1, 2 * per);
        for seq in 1..=3 {
            let (b, h) = batch(&[(0, seq)]);
            r.hold(b, h, None, 0, NONE);
        }
        assert_eq!(r.len(), 2);
        assert!(r.bytes() <= 2 * per);
        assert_eq!(seqs(&r.run(0, 4)), [2, 3]);
    }

    #[test]
    fn a_shared_buffer_is_counted_once_and_until_its_last_batch_goes() {
        let mut r = Received::new(1, 1 << 20);
        let pin = Arc::new(Pinned::new(64 << 10));
        let index = std::mem::size_of::<Batch>();
        for seq in 1..=2 {
            let (b, h) = batch(&[(0, seq)]);
            r.hold(b, h, Some(pin.clone()), 0, NONE);
        }
        assert_eq!(r.bytes(), (64 << 10) + 2 * index);
        drop(pin);
        r.trim(4, |_| 2);
        assert_eq!(
            r.bytes(),
            (64 << 10) + index,
            "one batch still holds the buffer"
        );
        r.trim(5, |_| 3);
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn disabled_or_out_of_range_holds_nothing() {
        let mut r = Received::new(1, 0);
        let (a, ha) = batch(&[(0, 1)]);
        r.hold(a.clone(), ha.clone(), None, 0, NONE);
        assert!(r.is_empty());
        let mut r = Received::new(1, 1 << 20);
        let bad: HeldChanges = [
            HeldChange {
                partition: 0,
                seq: 1,
                start: 0,
                len: 99,
            },
            HeldChange {
                partition: 3,
                seq: 1,
                start: 0,
                len: 1,
            },
        ]
        .into_iter()
        .collect();
        r.hold(a, bad, None, 0, NONE);
        assert!(
            r.is_empty(),
            "ranges past the payload and unknown partitions are dropped"
        );
    }
}
