//! A node's copies on its own disk: what local persistence (the `persist`
//! crate) copies of a partition into a snapshot ([`Keyspace::copy_for_disk`]),
//! and how a restarted node loads that snapshot and replays the changes
//! logged after it ([`Keyspace::recover_reset`], [`Keyspace::recover_entry`],
//! [`Keyspace::recover_change`]). Recovery runs before the node serves or
//! replicates: nothing is logged to consumers or announced, and the
//! partition's log is rebuilt from the replayed changes (so a replica may
//! catch up from it).

use super::{Keyspace, ReplicaError};
use crate::apply::{apply_owned_at, ApplyError};
use crate::change::{Change, ChangeKind};
use crate::partition::ReplicaSource;
use crate::version::Version;

/// One partition as a snapshot on disk holds it: consistent at one point
/// of its log.
#[derive(Debug, Default)]
pub struct CopyForDisk {
    /// The seq the partition's next change gets.
    pub next_seq: u64,
    /// Where its tombstones were settled (see [`crate::tombstones`]).
    pub settled: u64,
    /// Every entry (expired ones too: their Expire change may follow in
    /// the log) and then the tombstones, as full values and deletes.
    pub entries: Vec<Change>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryError {
    #[error("partition {partition}: change seq {got} after {have}: changes are missing")]
    Gap {
        partition: usize,
        have: u64,
        got: u64,
    },
    #[error("no partition {0}")]
    NoPartition(usize),
    #[error("change of another partition than {0}")]
    WrongPartition(usize),
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

impl Keyspace {
    /// Copies partition `p` for a snapshot on disk, under its lock (values
    /// are shared, not copied: cheap).
    pub fn copy_for_disk(&self, p: usize) -> CopyForDisk {
        let part = self.parts[p].lock();
        let entries = part.iter().map(|(key, e)| Change {
            key: key.to_bytes(),
            version: e.version,
            kind: ChangeKind::Full {
                value: e.value.clone(),
                expire_at: e.expire_at,
            },
        });
        CopyForDisk {
            next_seq: part.log.next_seq(),
            settled: part.tombstones.settled(),
            entries: entries.chain(part.tombstone_changes()).collect(),
        }
    }

    /// Recovery: partition `p` starts over empty, its log at `next_seq`,
    /// its tombstones settled at `settled` (a snapshot's start, or a copy
    /// its primary replaced).
    pub fn recover_reset(
        &self,
        p: usize,
        next_seq: u64,
        settled: u64,
    ) -> Result<(), RecoveryError> {
        let mut part = self
            .parts
            .get(p)
            .ok_or(RecoveryError::NoPartition(p))?
            .lock();
        part.drain_keys();
        part.tombstones.clear();
        part.tombstones.settle(settled);
        part.log.reset_to(next_seq);
        part.recovered_tail = None;
        Ok(())
    }

    /// Recovery: one entry of a snapshot of partition `p`, applied, not
    /// logged.
    pub fn recover_entry(&self, p: usize, change: Change) -> Result<(), RecoveryError> {
        if self.partition_of(&change.key) != p {
            return Err(RecoveryError::WrongPartition(p));
        }
        self.hlc.observe_own(change.version.hlc);
        let mut part = self.parts[p].lock();
        apply_owned_at(&mut part, None, change)?;
        Ok(())
    }

    /// Recovery: the change partition `p` logged at `seq`, applied and
    /// logged again at that seq. False when the copy holds it already (a
    /// snapshot taken after it); a seq past the next one is a gap.
    pub fn recover_change(
        &self,
        p: usize,
        seq: u64,
        change: Change,
    ) -> Result<bool, RecoveryError> {
        if self.partition_of(&change.key) != p {
            return Err(RecoveryError::WrongPartition(p));
        }
        let mut part = self.parts[p].lock();
        let next = part.log.next_seq();
        if seq < next {
            return Ok(false);
        }
        if seq > next {
            return Err(RecoveryError::Gap {
                partition: p,
                have: next - 1,
                got: seq,
            });
        }
        self.hlc.observe_own(change.version.hlc);
        part.log.append(&change);
        part.recovered_tail = Some(Box::new((seq + 1, change.version)));
        apply_owned_at(&mut part, None, change)?;
        Ok(true)
    }

    /// Every partition that holds a history after recovery: (partition,
    /// the seq it goes on at, the version of the last change replayed from
    /// the log, or the default one when it came from a snapshot alone). A
    /// partition left out never took a change.
    pub fn loaded_copies(&self) -> Vec<(u16, u64, Version)> {
        self.parts
            .iter()
            .filter_map(|p| {
                let part = p.lock();
                let next = part.log.next_seq();
                let version = part.recovered_tail.as_deref().map(|t| t.1);
                (next > 1).then(|| (part.id, next, version.unwrap_or_default()))
            })
            .collect()
    }

    /// The copies loaded from disk that a primary may bring up to date
    /// from its log rather than with a snapshot: (partition, the seq each
    /// goes on at, the version of its last change).
    pub fn recovered_tails(&self) -> Vec<(u16, u64, Version)> {
        self.parts
            .iter()
            .filter_map(|p| {
                let part = p.lock();
                let tail = part.recovered_tail.as_deref()?;
                (part.log.next_seq() == tail.0).then_some((part.id, tail.0, tail.1))
            })
            .collect()
    }

    /// A primary (site member `from`) brings this node's copy of `p` up to
    /// date from its log, from seq `next` on: only if the copy is still
    /// the one loaded from disk, at `next`, whose last change was
    /// `version` (the primary found the same change at that seq). The
    /// changes follow as ordinary replicated changes.
    pub fn begin_catch_up(
        &self,
        p: usize,
        next: u64,
        version: Version,
        from: u16,
    ) -> Result<(), ReplicaError> {
        let mut part = self.parts.get(p).ok_or(ReplicaError::NotReplica)?.lock();
        if !part.replica {
            return Err(ReplicaError::NotReplica);
        }
        let have = part.log.next_seq();
        if part.recovered_tail.as_deref() != Some(&(next, version)) || have != next {
            // The changes that follow are not for this copy: refused
            // until a snapshot replaces it.
            part.source = ReplicaSource::Diverged;
            return Err(ReplicaError::Diverged {
                have: have - 1,
                got: next,
            });
        }
        part.recovered_tail = None;
        part.source = ReplicaSource::Node(from);
        Ok(())
    }
}
