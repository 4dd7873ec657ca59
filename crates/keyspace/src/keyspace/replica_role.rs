//! Which partitions this node holds as a backup, and the replication
//! batches a backup received (see [`crate::received`]): a copy turning
//! into a backup hands its log to them, a backup promoted gets its log
//! back from them.

use std::sync::Arc;

use bytes::Bytes;

use super::Keyspace;
use crate::partition::ReplicaSource;
use crate::received::{HeldChanges, HeldRun, Pinned};

impl Keyspace {
    /// Marks partitions this node holds as a backup: they change only by
    /// [`Keyspace::apply_replicated`], never expire keys on their own (a
    /// read sees an expired key as missing but leaves it for the primary's
    /// Expire change), so their logs stay identical to the primary's.
    ///
    /// A copy turning into a backup hands what its log holds to the
    /// received batches; a backup promoted gets its log back from them
    /// (see [`crate::received`]), as far as they reach.
    pub fn set_replica(&self, partition: usize, replica: bool) {
        self.set_replica_with(partition, replica, None);
    }

    /// [`Keyspace::set_replica`] for many partitions: the received batches
    /// are read once for all the copies promoted (not once per copy).
    pub fn set_replicas(&self, changes: &[(usize, bool)]) {
        let promoted: Vec<usize> = changes
            .iter()
            .filter(|&&(p, replica)| !replica && p < self.parts.len())
            .map(|&(p, _)| p)
            .collect();
        let mut held = match promoted.len() {
            0 | 1 => Default::default(),
            _ => self.received.lock().changes_of(&promoted),
        };
        for &(p, replica) in changes {
            self.set_replica_with(p, replica, held.remove(&p));
        }
    }

    /// `held`: partition `partition`'s received changes, read beforehand
    /// (see [`Keyspace::set_replicas`]).
    fn set_replica_with(&self, partition: usize, replica: bool, held: Option<HeldRun>) {
        let mut part = self.parts[partition].lock();
        let (was, diverged) = (part.replica, part.source == ReplicaSource::Diverged);
        part.replica = replica;
        part.source = ReplicaSource::Unknown;
        if was == replica {
            return;
        }
        let mut received = self.received.lock();
        match (was, replica) {
            (false, true) => {
                received.forget(partition);
                if let Some((payload, held)) = part.log.take_held(partition as u16) {
                    received.hold(
                        payload,
                        HeldChanges::from_vec(held),
                        None,
                        self.release_generation(),
                        |p| self.released(p),
                    );
                }
            }
            (true, false) => {
                if !diverged {
                    let released = self.released(partition);
                    let next = part.log.next_seq();
                    let run = match &held {
                        Some(ahead) => received.run_with(partition, ahead, next),
                        None => received.run(partition, next),
                    };
                    let from = run.partition_point(|&(seq, _)| seq < released);
                    part.log.restore(&run[from..]);
                }
                part.promoted_through = part.log.next_seq().saturating_sub(1);
                received.forget(partition);
            }
            _ => {}
        }
    }

    /// Holds a replication batch this node received as a backup (the
    /// `changes` in `payload`, read into the buffer `pin` counts), before
    /// applying it: a copy promoted meanwhile finds its changes there.
    pub fn hold_received(&self, payload: Bytes, changes: HeldChanges, pin: Option<Arc<Pinned>>) {
        let generation = self.release_generation();
        self.received
            .lock()
            .hold(payload, changes, pin, generation, |p| self.released(p));
    }

    /// What the received batches hold of partitions `parts` is of no use
    /// here any more: a stale primary's changes of a partition this node
    /// leads, or of a copy it no longer holds. Nothing would release them
    /// (no marker comes for them), so they go now rather than keep the
    /// queue's front until the budget trims it.
    pub fn forget_received(&self, parts: &[usize]) {
        if parts.is_empty() || !self.holds_received {
            return;
        }
        let mut received = self.received.lock();
        for &p in parts {
            received.forget(p);
        }
        received.trim(self.release_generation(), |p| self.released(p));
    }

    /// Whether received batches are held at all (WAN replication keeps a
    /// log; see [`crate::received`]).
    pub fn holds_received(&self) -> bool {
        self.holds_received
    }
}
