//! Partitions every copy of which went down at once (a whole site killed,
//! a power cut) and that wait for a copy with every acknowledged write to
//! come back from its disk, as a GemFire member waits for the members with
//! newer data.
//!
//! When the member taking a partition's last live copy with it is marked
//! dead, the metadata notes who had every acknowledged write at that
//! moment: the primary and the replicas in sync ([`Waiting::complete`]).
//! A member that restarts with local persistence reports the copies it
//! loaded ([`Command::Restarted`](super::Command::Restarted): the seq each goes on at and the version
//! of its last change). The partition answers `CLUSTERDOWN` until every
//! complete member has reported or been revoked by the operator
//! ([`Command::Revoke`](super::Command::Revoke), `deltagrid cluster revoke`); then the leader
//! gives it to the reported copy with the highest (complete, seq, version)
//! ([`resolutions`], committed as [`Command::Resolve`](super::Command::Resolve)), and repair gives it
//! replicas again.
//!
//! Only sites whose nodes persist their data act on these notes (a node
//! without persistence never comes back with data, so waiting for it
//! would gain nothing): there the failover is as it was.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::state::{Assignment, MemberState, NodeId, Refused, SiteMetadata};

/// A copy a restarted member loaded from its disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DiskCopy {
    pub partition: u16,
    /// The seq the copy's next change gets: how far its log went.
    pub next_seq: u64,
    /// The version of its last change (breaks ties between equal seqs).
    pub hlc: u64,
    pub site: u16,
}

/// What a restarted member loaded from its disk.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Sorted by partition.
    pub copies: Vec<DiskCopy>,
    /// The copies came back whole with every write acknowledged to the
    /// member (`fsync = "always"`, no damage): remote sites' changes need
    /// not be delivered again.
    pub whole: bool,
}

/// A partition whose copies all went down.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    /// The members that held every acknowledged write when it went down
    /// (revoked ones taken out).
    pub complete: Vec<NodeId>,
}

impl SiteMetadata {
    /// Called as member `id` is marked dead, with each assignment as it
    /// was before: a partition left with no live primary and no live
    /// in-sync replica starts waiting, noting who was complete.
    pub(super) fn note_down(&mut self, id: NodeId, before: &[Assignment]) {
        let Some(table) = self.table.as_ref() else {
            return;
        };
        let dead = |n: &NodeId| {
            *n == id
                || self
                    .members
                    .get(n)
                    .is_none_or(|m| m.state == MemberState::Dead)
        };
        for (p, (was, now)) in before.iter().zip(&table.partitions).enumerate() {
            let p = p as u16;
            if self.waiting.contains_key(&p) || !was.holds(id) || !dead(&now.primary) {
                continue;
            }
            if now.in_sync.iter().any(|n| !dead(n)) {
                continue;
            }
            let mut complete = vec![was.primary];
            complete.extend(was.in_sync.iter().copied());
            self.waiting.insert(p, Waiting { complete });
        }
    }

    /// [`Command::Restarted`](super::Command::Restarted): `id` is back with `copies` (it is dead until
    /// the leader makes it active again).
    pub(super) fn restarted(
        &mut self,
        id: NodeId,
        copies: &[DiskCopy],
        whole: bool,
    ) -> Result<(), Refused> {
        if !self.members.contains_key(&id) {
            return Err(Refused::UnknownMember(id));
        }
        self.mark_dead(id)?;
        let mut copies = copies.to_vec();
        copies.sort_unstable();
        copies.dedup_by_key(|c| c.partition);
        self.restarted.insert(id, Report { copies, whole });
        Ok(())
    }

    /// [`Command::Revoke`](super::Command::Revoke): partitions stop waiting for dead member `id`.
    pub(super) fn revoke(&mut self, id: NodeId) -> Result<(), Refused> {
        match self.members.get(&id) {
            None => return Err(Refused::UnknownMember(id)),
            Some(m) if m.state != MemberState::Dead => return Err(Refused::NotDead(id)),
            Some(_) => {}
        }
        for w in self.waiting.values_mut() {
            w.complete.retain(|n| *n != id);
        }
        Ok(())
    }

    /// [`Command::Resolve`](super::Command::Resolve): each partition given to its chosen member as
    /// its only copy (repair adds replicas), and no longer waiting.
    pub(super) fn resolve(
        &mut self,
        chosen: &[(u16, NodeId)],
        expected_epoch: u64,
    ) -> Result<u64, Refused> {
        let table = self.table.as_ref().ok_or(Refused::NotFormed)?;
        if table.epoch != expected_epoch {
            return Err(Refused::StaleEpoch {
                expected: expected_epoch,
                current: table.epoch,
            });
        }
        for (p, n) in chosen {
            if !self.waiting.contains_key(p) {
                return Err(Refused::Invalid {
                    partition: *p,
                    reason: "it is not waiting".into(),
                });
            }
            if !self.members.contains_key(n) {
                return Err(Refused::UnknownMember(*n));
            }
        }
        let Some(table) = self.table.as_mut() else {
            return Err(Refused::NotFormed);
        };
        table.epoch += 1;
        for (p, n) in chosen {
            self.waiting.remove(p);
            if let Some(a) = table.partitions.get_mut(*p as usize) {
                *a = Assignment {
                    epoch: table.epoch,
                    ..Assignment::new(*n, Vec::new(), Vec::new())
                };
            }
        }
        Ok(table.epoch)
    }

    /// The members partition `p` still waits for (empty when it may be
    /// resolved, or does not wait).
    pub fn awaits(&self, p: u16) -> Vec<NodeId> {
        self.waiting.get(&p).map_or_else(Vec::new, |w| {
            w.complete
                .iter()
                .copied()
                .filter(|n| !self.restarted.contains_key(n))
                .collect()
        })
    }
}

/// For every waiting partition that awaits nobody: the member to give it
/// to, and whether that member's copy came back whole (if not, or if the
/// partition starts empty, the site's data incarnation must change). The
/// best copy is the one with the highest (was complete, next seq,
/// version); with no copy anywhere (a member reports every partition that
/// ever took a change), a complete member that came back, whose whole
/// disk says the partition is empty; else the least loaded active member.
pub fn resolutions(meta: &SiteMetadata) -> Vec<(u16, NodeId, bool)> {
    let active = meta.active_members();
    let mut load: BTreeMap<NodeId, usize> = active.iter().map(|n| (*n, 0)).collect();
    if let Some(t) = &meta.table {
        for a in &t.partitions {
            if let Some(l) = load.get_mut(&a.primary) {
                *l += 1;
            }
        }
    }
    let mut out = Vec::new();
    for (p, w) in &meta.waiting {
        if !meta.awaits(*p).is_empty() {
            continue;
        }
        let best = meta
            .restarted
            .iter()
            .filter_map(|(n, r)| {
                let i = r.copies.binary_search_by_key(p, |c| c.partition).ok()?;
                let c = r.copies[i];
                Some((
                    (w.complete.contains(n), c.next_seq, c.hlc, c.site),
                    *n,
                    r.whole,
                ))
            })
            .max();
        let complete_back = w
            .complete
            .iter()
            .filter_map(|n| meta.restarted.get(n).map(|r| (r.whole, *n)))
            .max();
        let chosen = match (best, complete_back) {
            (Some((_, n, whole)), _) => Some((n, whole)),
            (None, Some((whole, n))) => Some((n, whole)),
            (None, None) => load
                .iter()
                .min_by_key(|(n, l)| (**l, **n))
                .map(|(n, _)| (*n, false)),
        };
        if let Some((n, whole)) = chosen {
            *load.entry(n).or_default() += 1;
            out.push((*p, n, whole));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::state::{Command, Member};

    fn site(partitions: &[(NodeId, &[NodeId])]) -> SiteMetadata {
        let mut s = SiteMetadata::default();
        let members = (1..=3)
            .map(|n| {
                (
                    n,
                    Member {
                        name: format!("n{n}"),
                        cluster_addr: format!("127.0.0.1:{}", 17000 + n).parse().unwrap(),
                        client_addr: format!("127.0.0.1:{}", 7000 + n),
                        tls_client_addr: None,
                        state: MemberState::Active,
                    },
                )
            })
            .collect();
        let partitions = partitions
            .iter()
            .map(|(p, r)| Assignment::new(*p, r.to_vec(), r.to_vec()))
            .collect();
        s.apply(&Command::Form {
            members,
            partitions,
            data_incarnation: 7,
        })
        .unwrap();
        s
    }

    fn copy(partition: u16, next_seq: u64) -> DiskCopy {
        DiskCopy {
            partition,
            next_seq,
            hlc: next_seq,
            site: 1,
        }
    }

    fn restarted(s: &mut SiteMetadata, id: NodeId, copies: &[DiskCopy]) {
        s.apply(&Command::Restarted {
            id,
            copies: copies.to_vec(),
            whole: true,
        })
        .unwrap();
    }

    #[test]
    fn a_partition_waits_for_every_copy_that_was_complete() {
        // Partition 0 on 1 (replica 2), partition 1 on 2 (replica 3).
        let mut s = site(&[(1, &[2]), (2, &[3])]);
        restarted(&mut s, 1, &[copy(0, 10)]);
        assert!(s.waiting.is_empty(), "2 is alive: partition 0 fails over");
        s.apply(&Command::MarkDead { id: 2 }).unwrap();
        // Partition 0: primary 1 dead, 2 (in sync) dead: both complete.
        assert_eq!(s.waiting[&0].complete, vec![1, 2]);
        assert_eq!(s.awaits(0), vec![2]);
        assert!(!s.waiting.contains_key(&1), "3 is alive");
        assert!(resolutions(&s).is_empty());
        restarted(&mut s, 2, &[copy(0, 12), copy(1, 5)]);
        assert_eq!(s.awaits(0), Vec::<NodeId>::new());
        assert_eq!(resolutions(&s), vec![(0, 2, true)], "2 went furthest");
    }

    #[test]
    fn revoking_a_member_resolves_with_the_best_copy_left() {
        let mut s = site(&[(3, &[1]), (1, &[2])]);
        for id in [1, 2, 3] {
            s.apply(&Command::MarkDead { id }).unwrap();
        }
        // Partition 0: 1 fell out of sync when it died first; 3 waited for.
        assert_eq!(s.waiting[&0].complete, vec![3]);
        restarted(&mut s, 1, &[copy(0, 9), copy(1, 4)]);
        restarted(&mut s, 2, &[copy(1, 4)]);
        assert_eq!(s.awaits(0), vec![3]);
        // Partition 1 went down when 2 died, after its primary 1: both
        // complete, both back at the same seq.
        assert_eq!(s.waiting[&1].complete, vec![1, 2]);
        assert_eq!(resolutions(&s), vec![(1, 2, true)]);
        assert_eq!(
            s.apply(&Command::Revoke { id: 1 }),
            Ok(s.table.as_ref().unwrap().epoch)
        );
        assert_eq!(
            s.apply(&Command::Revoke { id: 4 }),
            Err(Refused::UnknownMember(4))
        );
        s.apply(&Command::Revoke { id: 3 }).unwrap();
        // Nothing complete is left of partition 0: 1's copy is the best;
        // partition 1 prefers 2, still complete.
        let r = resolutions(&s);
        assert_eq!(r, vec![(0, 1, true), (1, 2, true)]);
        let epoch = s.table.as_ref().unwrap().epoch;
        let chosen: Vec<(u16, NodeId)> = r.iter().map(|(p, n, _)| (*p, *n)).collect();
        assert_eq!(
            s.apply(&Command::Resolve {
                partitions: chosen.clone(),
                expected_epoch: epoch
            }),
            Ok(epoch + 1)
        );
        assert!(s.waiting.is_empty());
        let t = s.table.as_ref().unwrap();
        assert_eq!((t.partitions[0].primary, t.partitions[1].primary), (1, 2));
        assert!(t.partitions[0].replicas.is_empty());
        assert!(matches!(
            s.apply(&Command::Resolve {
                partitions: chosen,
                expected_epoch: epoch + 1
            }),
            Err(Refused::Invalid { .. })
        ));
    }

    #[test]
    fn an_alive_member_cannot_be_revoked_and_a_new_death_forgets_its_report() {
        let mut s = site(&[(1, &[2])]);
        assert_eq!(
            s.apply(&Command::Revoke { id: 1 }),
            Err(Refused::NotDead(1))
        );
        s.apply(&Command::MarkDead { id: 2 }).unwrap();
        restarted(&mut s, 1, &[copy(0, 3)]);
        assert_eq!(s.waiting[&0].complete, vec![1]);
        assert_eq!(resolutions(&s), vec![(0, 1, true)]);
        s.apply(&Command::MarkDead { id: 1 }).unwrap();
        assert_eq!(s.awaits(0), vec![1], "dead again: its report is stale");
    }

    #[test]
    fn with_no_copy_anywhere_a_complete_member_takes_it_empty() {
        let mut s = site(&[(1, &[2])]);
        s.apply(&Command::MarkDead { id: 2 }).unwrap();
        restarted(&mut s, 1, &[]);
        // Its disk came back whole: the partition never took a change.
        assert_eq!(resolutions(&s), vec![(0, 1, true)]);
        s.apply(&Command::Revoke { id: 1 }).unwrap();
        // Nobody complete left: an active member takes it, empty.
        assert_eq!(resolutions(&s), vec![(0, 3, false)]);
    }
}
