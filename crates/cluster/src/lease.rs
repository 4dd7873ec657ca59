//! The primary's lease: a node serves the partitions it leads (reads and
//! writes) and releases writes waiting for their replicas only while a
//! majority of the site's metadata group has recently confirmed that this
//! node knows every metadata change they applied.
//!
//! Every node-to-node connection carries a ping every [`PING_EVERY`] with a
//! token, the sender's clock ([`Lease::now`]); the peer answers with the
//! token and the index of the last metadata entry it applied. The answer
//! *grants* the lease for that token when the peer has applied nothing this
//! node has not. The lease holds until [`LEASE`] after the token of the
//! latest grant of enough voters (this node counts for itself while its
//! metadata lists it alive) to make a majority. Both ends of the
//! comparison are this node's own clock, so clocks need not agree, only
//! tick at about the same rate.
//!
//! An answer from a peer that applied more than this node has is not
//! thrown away: it is kept (a few per peer, [`DEFERRED`]) and counts, still
//! from its token, once this node has applied as far. While the metadata
//! takes a stream of commands (thousands of partitions re-replicated after
//! a failure) a follower is always a few entries behind its leader, and
//! refusing such answers outright would let the lease lapse for no reason.
//! Counting one late changes nothing in the argument below: it counts only
//! when this node knows everything the peer knew when it answered.
//!
//! Why this is enough: a node cut off from the majority stops serving
//! [`LEASE`] after its last grant. The majority declares it dead only once
//! its connection has been silent for `transport::SILENT_AFTER` and down
//! for `failover::DETECT_AFTER` (together longer than [`LEASE`]), and
//! promotes a replica in its place only [`PROMOTE_AFTER`] after that
//! (longer than [`LEASE`] plus the time members take to learn a commit).
//! A grant given after the promotion's `MarkDead` was committed comes from
//! a member that applied it (any majority shares a member with the one
//! that committed it), and such a grant is refused unless this node applied
//! it too, in which case it knows it is dead. So when a replica is promoted,
//! no lease of the old primary is left, and a stale primary that comes
//! back (a healed partition) gets no grant until it has applied the table
//! that replaced it: it never answers a read from, or acknowledges a write
//! to, a partition it no longer leads.
//!
//! The check on the hot paths (routing, the release of a waiting write) is
//! an atomic load and a read of the monotonic clock ([`Lease::valid`]):
//! the end of the lease is recomputed on every grant and every [`TICK`]
//! (which also notices voters and this node's own state changing), and
//! compared with the clock at the moment of use, so a process that was
//! paused longer than its lease finds it over when it resumes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often each side of a node-to-node connection pings the other.
pub const PING_EVERY: Duration = Duration::from_millis(200);
/// How long a majority's grants keep a node serving; below the time the
/// site takes to declare a silent node dead (`SILENT_AFTER + DETECT_AFTER`).
pub const LEASE: Duration = Duration::from_millis(1500);
/// How often [`Lease::valid`] is recomputed without a grant.
pub const TICK: Duration = Duration::from_millis(100);
/// How long after a member is declared dead the metadata leader waits
/// before promoting replicas in its place: its lease has run out by then
/// even if members that granted it learned of the `MarkDead` late.
pub const PROMOTE_AFTER: Duration = Duration::from_millis(2000);
const _: () = assert!(
    PROMOTE_AFTER.as_millis() >= LEASE.as_millis() + 2 * crate::metadata::HEARTBEAT_MILLIS as u128
);

/// How many answers per peer wait for this node to apply as far as the
/// peer had; the oldest is dropped past it (pings come every
/// [`PING_EVERY`], so this covers more than a [`LEASE`]).
pub const DEFERRED: usize = 16;

/// A peer's answers that wait: (token, the peer's applied index).
type Deferred = std::collections::VecDeque<(u64, u64)>;

pub struct Lease {
    base: Instant,
    /// Per member index: the token of the latest ping that member granted.
    granted: Box<[AtomicU64]>,
    /// Per member index: answers (token, the peer's applied index) that
    /// grant once this node applied that far, oldest first.
    deferred: Box<[parking_lot::Mutex<Deferred>]>,
    /// Per member index: the highest metadata index it said it applied.
    peer_applied: Box<[AtomicU64]>,
    /// Until when (this clock, [`Self::now`]) the lease holds; 0: not held.
    until: AtomicU64,
    /// Whether the last [`Self::refresh`] found the lease held, so that a
    /// lease that ran out by the clock between two refreshes is reported.
    held: std::sync::atomic::AtomicBool,
}

impl Lease {
    pub fn new(members: usize) -> Lease {
        Lease {
            base: Instant::now(),
            granted: (0..members).map(|_| AtomicU64::new(0)).collect(),
            deferred: (0..members).map(|_| Default::default()).collect(),
            peer_applied: (0..members).map(|_| AtomicU64::new(0)).collect(),
            until: AtomicU64::new(0),
            held: Default::default(),
        }
    }

    /// A lease that holds until the first [`Self::refresh`] (unit tests of
    /// what it guards).
    #[cfg(test)]
    pub(crate) fn held(members: usize) -> Lease {
        let l = Lease::new(members);
        l.until.store(u64::MAX, Ordering::Release);
        l
    }

    /// This node's clock for tokens: nanoseconds since the lease began
    /// (never 0, which means "no grant").
    pub fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64 + 1
    }

    /// Member `peer` granted the lease for the ping carrying `token`.
    pub fn grant(&self, peer: usize, token: u64) {
        if let Some(g) = self.granted.get(peer) {
            g.fetch_max(token.min(self.now()), Ordering::AcqRel);
        }
    }

    /// Member `peer` answered the ping carrying `token` having applied the
    /// metadata up to `applied`, and this node has applied up to `mine`: a
    /// grant now if `applied <= mine`, else one kept for [`Self::catch_up`].
    pub fn answered(&self, peer: usize, token: u64, applied: u64, mine: u64) {
        if let Some(a) = self.peer_applied.get(peer) {
            a.fetch_max(applied, Ordering::AcqRel);
        }
        if applied <= mine {
            self.grant(peer, token);
        } else if let Some(d) = self.deferred.get(peer) {
            let mut d = d.lock();
            if d.len() == DEFERRED {
                d.pop_front();
            }
            d.push_back((token, applied));
        }
    }

    /// This node has applied the metadata up to `mine`: the kept answers of
    /// peers that had applied no further grant now.
    pub fn catch_up(&self, mine: u64) {
        for (peer, d) in self.deferred.iter().enumerate() {
            let mut d = d.lock();
            let Some(latest) = d.iter().filter(|(_, a)| *a <= mine).map(|(t, _)| *t).max() else {
                continue;
            };
            d.retain(|(t, _)| *t > latest);
            drop(d);
            self.grant(peer, latest);
        }
    }

    /// Whether this node may serve its primaries now.
    #[inline]
    pub fn valid(&self) -> bool {
        self.now() < self.until.load(Ordering::Acquire)
    }

    /// Recomputes the end of the lease: `me` (None: this node is not
    /// alive in its metadata, and holds none) counts for itself if it is
    /// among `voters` (member indexes), and each other voter from its
    /// latest grant; the lease lasts [`LEASE`] from the grant that
    /// completes a majority. Returns whether it held at the previous
    /// refresh and whether it holds now.
    pub fn refresh(&self, me: Option<usize>, voters: &[usize]) -> (bool, bool) {
        let mut grants: Vec<u64> = voters
            .iter()
            .map(|&v| match self.granted.get(v) {
                _ if Some(v) == me => u64::MAX,
                Some(g) => g.load(Ordering::Acquire),
                None => 0,
            })
            .collect();
        grants.sort_unstable_by(|a, b| b.cmp(a));
        let until = match grants.get(voters.len() / 2) {
            Some(&t) if me.is_some() && t > 0 => t.saturating_add(LEASE.as_nanos() as u64),
            _ => 0,
        };
        self.until.store(until, Ordering::Release);
        let now = self.valid();
        (self.held.swap(now, Ordering::AcqRel), now)
    }
}

impl Lease {
    /// The highest metadata index member `peer` said it applied (its
    /// answers to this node's pings).
    pub fn peer_applied(&self, peer: usize) -> u64 {
        self.peer_applied
            .get(peer)
            .map_or(0, |a| a.load(Ordering::Acquire))
    }
}

impl crate::Cluster {
    /// Waits until every member this node is connected to has said (in
    /// its answers to lease pings, every [`PING_EVERY`]) that it applied
    /// the metadata up to `index`; false after `timeout`. A change that
    /// must hold everywhere once acknowledged (ACL users) waits for it.
    pub async fn members_applied(&self, index: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let behind = self.members().iter().enumerate().any(|(i, m)| {
                i != self.my_index
                    && m.as_ref().is_some_and(|m| m.connected)
                    && self.lease.peer_applied(i) < index
            });
            if !behind {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The index of the last metadata entry this node applied, what its
    /// answers to lease pings carry.
    pub fn applied_index(&self) -> u64 {
        self.metadata.get().map_or(0, |md| md.applied_index())
    }

    /// Member `peer` answered the lease ping carrying `token`, having
    /// applied the metadata up to `applied`: a grant unless it applied
    /// something this node has not, or once this node applied as far
    /// ([`crate::lease`]).
    pub fn lease_answered(&self, peer: usize, token: u64, applied: u64) {
        self.lease
            .answered(peer, token, applied, self.applied_index());
        self.refresh_lease();
    }

    /// Recomputes whether this node may serve its primaries; logs a change.
    pub fn refresh_lease(&self) {
        self.lease.catch_up(self.applied_index());
        let (me, voters) = match self.metadata.get() {
            Some(md) => {
                let id = self.my_index as u64 + 1;
                let alive = md
                    .current()
                    .members
                    .get(&id)
                    .is_some_and(|m| m.state != crate::metadata::MemberState::Dead);
                let voters: Vec<usize> = md
                    .voters()
                    .iter()
                    .map(|v| (*v as usize).saturating_sub(1))
                    .collect();
                (alive.then_some(self.my_index), voters)
            }
            None => (None, Vec::new()),
        };
        match self.lease.refresh(me, &voters) {
            (true, false) if self.is_up() => tracing::warn!(
                "lease lost: no majority of the site confirmed this node's metadata within {:?}; \
                 its partitions answer CLUSTERDOWN",
                crate::lease::LEASE
            ),
            (false, true) => {
                if self.is_up() {
                    tracing::info!("lease held: serving this node's partitions");
                }
                // Writes whose acks are in may be released now.
                self.replicator.sweep();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_of_recent_grants_holds_the_lease() {
        let l = Lease::new(5);
        let voters = [0, 1, 2];
        assert_eq!(
            l.refresh(Some(0), &voters),
            (false, false),
            "alone: one of three"
        );
        l.grant(1, l.now());
        assert_eq!(
            l.refresh(Some(0), &voters),
            (false, true),
            "itself and one peer"
        );
        assert_eq!(
            l.refresh(None, &voters),
            (true, false),
            "not alive in the metadata: nothing"
        );
        assert!(!l.refresh(Some(0), &[]).1, "no voters known");
        // A lone voter is its own majority.
        assert!(l.refresh(Some(3), &[3]).1);
    }

    #[test]
    fn a_lease_runs_out_a_lease_after_the_ping_whose_grant_made_the_majority() {
        let l = Lease::new(3);
        let old = l.now();
        std::thread::sleep(Duration::from_millis(50));
        l.grant(1, old);
        assert!(l.refresh(Some(0), &[0, 1, 2]).1);
        let until = l.until.load(Ordering::Acquire);
        assert_eq!(
            until,
            old + LEASE.as_nanos() as u64,
            "from the ping's sending, not from its answer"
        );
        // Without a refresh (a process that was paused), the clock ends it.
        l.until.store(l.now(), Ordering::Release);
        assert!(!l.valid());
        // Of two grants, the older completes the majority of five.
        let l = Lease::new(5);
        let (a, b) = (l.now(), l.now() + 1000);
        l.grant(1, b);
        l.grant(2, a);
        assert!(l.refresh(Some(0), &[0, 1, 2, 3, 4]).1);
        assert_eq!(l.until.load(Ordering::Acquire), a + LEASE.as_nanos() as u64);
    }

    #[test]
    fn an_answer_from_a_peer_ahead_grants_once_this_node_caught_up() {
        let l = Lease::new(2);
        let voters = [0, 1];
        let (a, b) = (l.now(), l.now() + 10);
        l.answered(1, a, 7, 5);
        l.answered(1, b, 9, 5);
        assert!(!l.refresh(Some(0), &voters).1, "the peer knows more");
        l.catch_up(6);
        assert!(!l.refresh(Some(0), &voters).1, "still behind both");
        l.catch_up(7);
        assert!(l.refresh(Some(0), &voters).1);
        assert_eq!(l.granted[1].load(Ordering::Acquire), a, "from its token");
        l.catch_up(9);
        assert_eq!(l.granted[1].load(Ordering::Acquire), b.min(l.now()));
        assert!(l.deferred[1].lock().is_empty());
        // A peer that stays ahead keeps only the latest few answers.
        for t in 0..(DEFERRED as u64 + 5) {
            l.answered(1, t + 1, 100, 9);
        }
        assert_eq!(l.deferred[1].lock().len(), DEFERRED);
        l.answered(9, 1, 100, 9); // out of range: ignored
    }

    #[test]
    fn a_token_from_the_future_counts_as_now() {
        let l = Lease::new(2);
        l.grant(1, u64::MAX);
        assert!(l.granted[1].load(Ordering::Acquire) <= l.now());
        l.grant(7, 1); // out of range: ignored
    }
}
