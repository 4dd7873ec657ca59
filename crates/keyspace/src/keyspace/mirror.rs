//! The mirror of the write path: changes made elsewhere, applied, logged
//! and announced ([`Keyspace::apply`], [`Keyspace::apply_batch`]: a
//! remote site, a backup layer's restore), and a backup's copy following
//! its primary ([`Keyspace::apply_replicated`]) or loading its snapshot.

use std::sync::atomic::Ordering;

use super::Keyspace;
use crate::apply::{apply_change, apply_owned_at, ApplyError};
use crate::change::Change;
use crate::partition::ReplicaSource;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaError {
    #[error("change seq {got} after {have}: the copy missed changes and needs a snapshot")]
    Gap { have: u64, got: u64 },
    /// The copy holds seq `got` (and up to `have`) from another node than
    /// the one now sending it: a history its primary does not share.
    #[error("change seq {got} already held (up to {have}) from another node: the copy diverged and needs a snapshot")]
    Diverged { have: u64, got: u64 },
    /// This node is not a backup of the partition (any more): a primary
    /// that lost its role is fenced here.
    #[error("not a backup of this partition")]
    NotReplica,
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

impl Keyspace {
    /// The mirror of the write path: applies a change made elsewhere (a
    /// primary, a remote site, a backup layer), logs and announces it.
    pub fn apply(&self, change: Change, origin: u64) -> Result<u64, ApplyError> {
        self.hlc.observe(change.version.hlc);
        let key = change.key.clone();
        let seq = {
            let mut part = self.parts[self.partition_of(&key)].lock();
            apply_change(&mut part, &change)?;
            self.record(&mut part, &change, 0)
        };
        if let Some(o) = self.observer() {
            o.changed(&[key], origin);
        }
        Ok(seq)
    }

    /// [`Keyspace::apply`] for many changes of partition `p` under one lock
    /// (a restore's batch). A change of another partition is refused, as
    /// are those after it.
    pub fn apply_batch(
        &self,
        p: usize,
        changes: Vec<Change>,
        origin: u64,
    ) -> Result<(), ApplyError> {
        let mut keys = Vec::with_capacity(if self.observer().is_some() {
            changes.len()
        } else {
            0
        });
        let result = (|| {
            let mut part = self.parts.get(p).ok_or(ApplyError::NotPrimary)?.lock();
            for change in changes {
                if self.partition_of(&change.key) != p {
                    return Err(ApplyError::NotPrimary);
                }
                self.hlc.observe(change.version.hlc);
                apply_change(&mut part, &change)?;
                if keys.capacity() > 0 {
                    keys.push(change.key.clone());
                }
                self.record(&mut part, &change, 0);
            }
            Ok(())
        })();
        if let Some(o) = self.observer().filter(|_| !keys.is_empty()) {
            o.changed(&keys, origin);
        }
        result
    }

    /// Applies a change a primary (site member `from`) logged at `seq`,
    /// counting it at the same seq in the partition's log (which stores
    /// nothing on a backup: its batch is held, see `hold_received`). A
    /// seq already held is skipped when `from` sent it (a re-sent batch
    /// changes nothing) and is a divergence otherwise (see
    /// [`crate::partition::ReplicaSource`]); a seq past the next one is a
    /// gap.
    /// `encoded` is the change as the primary encoded it (counted in the
    /// partition's change statistics).
    pub fn apply_replicated(
        &self,
        seq: u64,
        change: Change,
        encoded: &[u8],
        from: u16,
    ) -> Result<(), ReplicaError> {
        self.hlc.observe(change.version.hlc);
        let key = change.key.clone();
        {
            let mut part = self.parts[self.partition_of(&key)].lock();
            if !part.replica {
                return Err(ReplicaError::NotReplica);
            }
            let next = part.log.next_seq();
            if part.source == ReplicaSource::Diverged {
                return Err(ReplicaError::Diverged {
                    have: next - 1,
                    got: seq,
                });
            }
            if seq < next {
                if part.source == ReplicaSource::Node(from) {
                    return Ok(());
                }
                part.source = ReplicaSource::Diverged;
                return Err(ReplicaError::Diverged {
                    have: next - 1,
                    got: seq,
                });
            }
            if seq > next {
                // Also on a log that never held anything: a copy that starts
                // after its primary's first changes starts from a snapshot
                // (a process restarted without its data must not take the
                // primary's next change as the start of its copy).
                return Err(ReplicaError::Gap {
                    have: next - 1,
                    got: seq,
                });
            }
            part.source = ReplicaSource::Node(from);
            let kind = change.kind.index();
            apply_owned_at(&mut part, None, change)?;
            // Its batch is held instead (`hold_received`).
            part.log.skip(&key);
            part.stats.record(kind, encoded.len(), 0);
            if let Some(d) = self.persist() {
                d.changed(part.id as usize, seq, encoded);
            }
        }
        if let Some(o) = self.observer() {
            o.changed(&[key], 0);
        }
        Ok(())
    }

    /// A backup starts loading a snapshot of partition `p` taken when the
    /// primary's next seq was `next_seq` and its settled point `settled`
    /// (see [`crate::tombstones`]): its copy is emptied (nothing is logged:
    /// the copy is being replaced, not changed), its log resumes at
    /// `next_seq`, and it takes the primary's settled point, without which
    /// the tombstones that went there would be missed here.
    pub fn reset_replica(
        &self,
        p: usize,
        (next_seq, settled): (u64, u64),
        from: u16,
    ) -> Result<(), ReplicaError> {
        let Some(part) = self.parts.get(p) else {
            return Err(ReplicaError::NotReplica);
        };
        let mut part = part.lock();
        if !part.replica {
            return Err(ReplicaError::NotReplica);
        }
        part.source = ReplicaSource::Node(from);
        part.recovered_tail = None;
        part.drain_keys();
        part.tombstones.clear();
        part.tombstones.settle(settled);
        part.log.reset_to(next_seq);
        // What was released counted the old copy's seqs.
        self.log_marks[p].released.store(0, Ordering::Relaxed);
        // Under the partition's lock, as a promotion reads the queue.
        self.forget_received(&[p]);
        if let Some(d) = self.persist() {
            d.reset(p, next_seq, settled);
        }
        Ok(())
    }

    /// One entry of a snapshot being loaded: applied, not logged.
    /// `encoded`: the change as the primary encoded it.
    pub fn load_replica_entry(&self, change: Change, encoded: &[u8]) -> Result<(), ReplicaError> {
        let key = change.key.clone();
        {
            let mut part = self.parts[self.partition_of(&key)].lock();
            if !part.replica {
                return Err(ReplicaError::NotReplica);
            }
            self.hlc.observe(change.version.hlc);
            apply_owned_at(&mut part, None, change)?;
            if let Some(d) = self.persist() {
                d.loaded(part.id as usize, encoded);
            }
        }
        if let Some(o) = self.observer() {
            o.changed(&[key], 0);
        }
        Ok(())
    }
}
