//! The primary's lease: a node serves the partitions it leads (reads and
//! writes) and releases writes waiting for their backups only while a
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
//! Why this is enough: a node cut off from the majority stops serving
//! [`LEASE`] after its last grant. The majority declares it dead only once
//! its connection has been silent for `transport::SILENT_AFTER` and down
//! for `failover::DETECT_AFTER` (together longer than [`LEASE`]), and
//! promotes a backup in its place only [`PROMOTE_AFTER`] after that
//! (longer than [`LEASE`] plus the time members take to learn a commit).
//! A grant given after the promotion's `MarkDead` was committed comes from
//! a member that applied it (any majority shares a member with the one
//! that committed it), and such a grant is refused unless this node applied
//! it too, in which case it knows it is dead. So when a backup is promoted,
//! no lease of the old primary is left, and a stale primary that comes
//! back (a healed partition) gets no grant until it has applied the table
//! that replaced it: it never answers a read from, or acknowledges a write
//! to, a partition it no longer leads.
//!
//! The check on the hot paths (routing, the release of a waiting write) is
//! one atomic load: [`Lease::valid`], recomputed on every grant and every
//! [`TICK`] so that it turns off a tick before the lease runs out.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often each side of a node-to-node connection pings the other.
pub const PING_EVERY: Duration = Duration::from_millis(200);
/// How long a majority's grants keep a node serving; below the time the
/// site takes to declare a silent node dead (`SILENT_AFTER + DETECT_AFTER`).
pub const LEASE: Duration = Duration::from_millis(1500);
/// How often [`Lease::valid`] is recomputed without a grant.
pub const TICK: Duration = Duration::from_millis(100);
/// How long after a member is declared dead the metadata leader waits
/// before promoting backups in its place: its lease has run out by then
/// even if members that granted it learned of the `MarkDead` late.
pub const PROMOTE_AFTER: Duration = Duration::from_millis(2000);
const _: () = assert!(PROMOTE_AFTER.as_millis() >= LEASE.as_millis() + 2 * crate::metadata::HEARTBEAT_MILLIS as u128);

pub struct Lease {
    base: Instant,
    /// Per member index: the token of the latest ping that member granted.
    granted: Box<[AtomicU64]>,
    valid: AtomicBool,
}

impl Lease {
    pub fn new(members: usize) -> Lease {
        Lease {
            base: Instant::now(),
            granted: (0..members).map(|_| AtomicU64::new(0)).collect(),
            valid: AtomicBool::new(false),
        }
    }

    /// A lease that holds until the first [`Self::refresh`] (unit tests of
    /// what it guards).
    #[cfg(test)]
    pub(crate) fn held(members: usize) -> Lease {
        let l = Lease::new(members);
        l.valid.store(true, Ordering::Release);
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

    /// Whether this node may serve its primaries now.
    #[inline]
    pub fn valid(&self) -> bool {
        self.valid.load(Ordering::Acquire)
    }

    /// Recomputes [`Self::valid`]: `me` is alive in the metadata and
    /// `voters` (member indexes, `me` among them or not) hold a majority
    /// counting `me` and every voter whose latest grant still covers the
    /// next [`TICK`]. Returns (before, after).
    pub fn refresh(&self, me: Option<usize>, voters: &[usize]) -> (bool, bool) {
        let now = self.now();
        let horizon = now.saturating_add(TICK.as_nanos() as u64).saturating_sub(LEASE.as_nanos() as u64);
        let have = voters
            .iter()
            .filter(|&&v| Some(v) == me || self.granted.get(v).is_some_and(|g| g.load(Ordering::Acquire) > horizon))
            .count();
        let ok = me.is_some() && !voters.is_empty() && have > voters.len() / 2;
        (self.valid.swap(ok, Ordering::AcqRel), ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_of_recent_grants_holds_the_lease() {
        let l = Lease::new(5);
        let voters = [0, 1, 2];
        assert_eq!(l.refresh(Some(0), &voters), (false, false), "alone: one of three");
        l.grant(1, l.now());
        assert_eq!(l.refresh(Some(0), &voters), (false, true), "itself and one peer");
        assert_eq!(l.refresh(None, &voters), (true, false), "not alive in the metadata: nothing");
        assert!(!l.refresh(Some(0), &[]).1, "no voters known");
        // A lone voter is its own majority.
        assert!(l.refresh(Some(3), &[3]).1);
    }

    #[test]
    fn grants_run_out_a_tick_before_the_lease() {
        let l = Lease::new(3);
        let old = l.now();
        std::thread::sleep(LEASE - TICK + Duration::from_millis(20));
        l.grant(1, old);
        assert!(!l.refresh(Some(0), &[0, 1, 2]).1, "the grant of a ping sent a lease ago no longer counts");
        l.grant(1, l.now());
        assert!(l.refresh(Some(0), &[0, 1, 2]).1);
    }

    #[test]
    fn a_token_from_the_future_counts_as_now() {
        let l = Lease::new(2);
        l.grant(1, u64::MAX);
        assert!(l.granted[1].load(Ordering::Acquire) <= l.now());
        l.grant(7, 1); // out of range: ignored
    }
}
