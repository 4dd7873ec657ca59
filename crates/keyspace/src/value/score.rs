//! A sorted-set member's score that merges increments across sites. A
//! member that ZINCRBY (or ZADD INCR) changed on a partition that merges
//! with other sites keeps, beside its score, a join-semilattice state, so
//! every site ends with the same score whatever order the changes arrive
//! in, each increment counted once:
//!
//! - each site's contribution: the running total of the increments of the
//!   member made there, with the newest's version;
//! - the latest assignment (a ZADD of the member) and its version, with
//!   the sum of the contributions its site had seen;
//! - a floor: what is at or below it (an assignment, a site's increments)
//!   was removed (ZREM observed it, DEL, an overwrite by another type).
//!
//! The score is the assignment plus what the contributions (added in site
//! order, the same f64 bits at every site) grew by since it was made: the
//! assigned score itself while they sum to what it saw. So a ZADD of a
//! member held as a counter resets what its site had seen, and increments
//! made concurrently elsewhere are kept (the rule of string counters). A
//! plain member (never incremented where it was written) meets a counter
//! as an assignment that saw every increment older than itself
//! ([`ScoreCounter::from_plain`]: its floor is just below its version).

use smallvec::SmallVec;

use crate::version::Version;

/// One site's increments of a member's score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreContribution {
    pub site: u16,
    pub total: f64,
    pub version: Version,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ScoreCounter {
    assigned: Version,
    score: f64,
    /// The sum of the contributions where the assignment was made.
    seen: f64,
    floor: Version,
    contributions: SmallVec<[ScoreContribution; 2]>,
}

/// The version just below `v` (everything older than `v` is at or below it).
fn below(v: Version) -> Version {
    match (v.site, v.hlc) {
        (0, 0) => v,
        (0, hlc) => Version {
            hlc: hlc - 1,
            site: u16::MAX,
        },
        (site, hlc) => Version {
            hlc,
            site: site - 1,
        },
    }
}

impl ScoreCounter {
    /// A member with score `score` written at `version` by a site that saw
    /// every increment of it older than that.
    pub fn from_plain(score: f64, version: Version) -> Self {
        ScoreCounter {
            assigned: version,
            score,
            seen: 0.0,
            floor: below(version),
            contributions: SmallVec::new(),
        }
    }

    /// A member made by an increment: 0 plus the totals.
    pub fn from_nothing() -> Self {
        ScoreCounter {
            assigned: Version::ZERO,
            score: 0.0,
            seen: 0.0,
            floor: Version::ZERO,
            contributions: SmallVec::new(),
        }
    }

    /// A state from its parts (the decoder's).
    pub fn from_parts(
        assigned: Version,
        score: f64,
        seen: f64,
        floor: Version,
        contributions: Vec<ScoreContribution>,
    ) -> Self {
        let mut c = ScoreCounter {
            assigned,
            score,
            seen,
            floor,
            contributions: SmallVec::from_vec(contributions),
        };
        c.contributions.sort_by_key(|x| x.site);
        c.contributions.dedup_by_key(|x| x.site);
        c.normalize();
        c
    }

    pub fn assigned(&self) -> Version {
        self.assigned
    }

    pub fn assigned_score(&self) -> f64 {
        self.score
    }

    /// The sum of the contributions the assignment had seen.
    pub fn seen(&self) -> f64 {
        self.seen
    }

    pub fn floor(&self) -> Version {
        self.floor
    }

    pub fn contributions(&self) -> &[ScoreContribution] {
        &self.contributions
    }

    /// Site `site`'s running total (0 before its first increment).
    pub fn total_of(&self, site: u16) -> f64 {
        self.held(site).map_or(0.0, |c| c.total)
    }

    pub fn held(&self, site: u16) -> Option<&ScoreContribution> {
        self.contributions.iter().find(|c| c.site == site)
    }

    /// The newest version of what this state holds.
    pub fn version(&self) -> Version {
        self.contributions
            .iter()
            .map(|c| c.version)
            .fold(self.assigned, Version::max)
    }

    /// The score: the assignment plus every site's total, in site order
    /// (a NaN, from infinities of opposite signs, reads as 0).
    pub fn value(&self) -> f64 {
        let sum = self.sum();
        let v = match sum == self.seen {
            true => self.score,
            false => self.score + (sum - self.seen),
        };
        match v.is_nan() {
            true => 0.0,
            false => v,
        }
    }

    /// Every contribution, added in site order.
    fn sum(&self) -> f64 {
        self.contributions.iter().fold(0.0, |acc, c| acc + c.total)
    }

    /// A ZADD of `score` by this site, which sees every contribution held:
    /// the score becomes exactly `score`; increments made concurrently at
    /// other sites will be added to it. Its version is given by
    /// [`ScoreCounter::stamp`] once known.
    pub fn assign(&mut self, score: f64, version: Version) {
        self.assigned = version;
        self.score = score;
        // Never NaN (infinities of opposite signs): states must encode.
        self.seen = match self.sum() {
            s if s.is_nan() => 0.0,
            s => s,
        };
    }

    /// Gives the latest assignment the version `v` (the write's).
    pub fn stamp(&mut self, v: Version) {
        self.assigned = v;
    }

    /// Bytes held, for memory accounting.
    pub fn state_len(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.contributions.len().saturating_sub(2) * std::mem::size_of::<ScoreContribution>()
    }

    /// Site `site`'s total became `total` at `version`; false when that is
    /// not news (as new a total held, or at or below the floor).
    pub fn count(&mut self, site: u16, total: f64, version: Version) -> bool {
        if version <= self.floor {
            return false;
        }
        match self.contributions.iter_mut().find(|c| c.site == site) {
            Some(c) if c.version >= version => false,
            Some(c) => {
                c.total = total;
                c.version = version;
                true
            }
            None => {
                let at = self.contributions.partition_point(|c| c.site < site);
                self.contributions.insert(
                    at,
                    ScoreContribution {
                        site,
                        total,
                        version,
                    },
                );
                true
            }
        }
    }

    /// A ZADD of `score` at `v`: an assignment that saw every increment
    /// older than itself (the join of [`ScoreCounter::from_plain`], a later
    /// score of the same write winning); true when this changed.
    pub fn assign_at(&mut self, score: f64, v: Version) -> bool {
        let before = self.clone();
        if v >= self.assigned {
            self.assigned = v;
            self.score = score;
            self.seen = 0.0;
        }
        self.floor = self.floor.max(below(v));
        self.normalize();
        *self != before
    }

    /// Joins another site's state into this one; true when this changed.
    pub fn join(&mut self, other: &ScoreCounter) -> bool {
        let before = self.clone();
        self.floor = self.floor.max(other.floor);
        if other.assigned > self.assigned {
            self.assigned = other.assigned;
            self.score = other.score;
            self.seen = other.seen;
        }
        for c in &other.contributions {
            match self.contributions.iter_mut().find(|x| x.site == c.site) {
                Some(x) if x.version >= c.version => {}
                Some(x) => *x = *c,
                None => {
                    let at = self.contributions.partition_point(|x| x.site < c.site);
                    self.contributions.insert(at, *c);
                }
            }
        }
        self.normalize();
        *self != before
    }

    /// What is at or below `v` is removed (an observed removal of the
    /// member up to `v`, a delete of the key at `v`).
    pub fn prune(&mut self, v: Version) {
        if v > self.floor {
            self.floor = v;
            self.normalize();
        }
    }

    /// Whether this state says no more than a plain member with its score
    /// written at its assignment's version.
    pub fn is_plain(&self) -> bool {
        self.contributions.is_empty()
            && self.seen == 0.0
            && self.assigned != Version::ZERO
            && self.floor == below(self.assigned)
    }

    /// Whether nothing is left (no assignment, no contribution).
    pub fn is_empty(&self) -> bool {
        self.contributions.is_empty() && self.assigned == Version::ZERO
    }

    fn normalize(&mut self) {
        if self.assigned <= self.floor {
            self.assigned = Version::ZERO;
            self.score = 0.0;
            self.seen = 0.0;
        }
        let floor = self.floor;
        self.contributions.retain(|c| c.version > floor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(hlc: u64, site: u16) -> Version {
        Version { hlc, site }
    }

    #[test]
    fn increments_after_an_assignment_count_older_ones_do_not() {
        let mut a = ScoreCounter::from_nothing();
        a.count(1, 3.0, v(2, 1));
        let mut b = ScoreCounter::from_plain(10.0, v(3, 2));
        b.count(2, 1.0, v(5, 2));
        a.count(1, 5.0, v(4, 1));
        let (mut x, mut y) = (a.clone(), b.clone());
        x.join(&b);
        y.join(&a);
        assert_eq!(x, y);
        // Site 1's total moved after the assignment: its whole total counts.
        assert_eq!(x.value(), 16.0);
    }

    #[test]
    fn an_assignment_keeps_the_increments_it_had_not_seen() {
        // Site 1 counts to 5; site 2 saw 3 of them and assigns 100, while
        // site 1 adds 2 more (older by the clock than the assignment).
        let mut a = ScoreCounter::from_nothing();
        a.count(1, 3.0, v(2, 1));
        let mut b = a.clone();
        a.count(1, 5.0, v(3, 1));
        b.assign(100.0, v(4, 2));
        assert_eq!(b.value(), 100.0);
        let (mut x, mut y) = (a.clone(), b.clone());
        x.join(&b);
        y.join(&a);
        assert_eq!(x, y);
        assert_eq!(x.value(), 102.0);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Incr(u16, i8),
        Assign(u16, i8),
        Plain(u16, i8),
        Remove(u16),
    }

    proptest! {
        /// Sites applying their own operations and joining each other's
        /// states in any order end equal; with no assignment or removal
        /// the score is the sum of every increment.
        #[test]
        fn joins_converge_and_sum(ops in proptest::collection::vec(
            prop_oneof![(0u16..3, -5i8..6).prop_map(|(s, n)| Op::Incr(s, n)),
                        (0u16..3, -9i8..9).prop_map(|(s, n)| Op::Assign(s, n)),
                        (0u16..3, -9i8..9).prop_map(|(s, n)| Op::Plain(s, n)),
                        (0u16..3).prop_map(Op::Remove)], 1..40),
            joins in proptest::collection::vec((0usize..3, 0usize..3), 0..40)) {
            let mut sites: Vec<ScoreCounter> = (0..3).map(|_| ScoreCounter::from_nothing()).collect();
            let mut clock = 0u64;
            let mut sum = 0.0;
            let mut reset = false;
            let mut joins = joins.into_iter();
            for op in ops {
                clock += 1;
                match op {
                    Op::Incr(s, n) => {
                        let site = &mut sites[s as usize];
                        let total = site.total_of(s) + n as f64;
                        site.count(s, total, v(clock, s));
                        sum += n as f64;
                    }
                    Op::Assign(s, n) => {
                        sites[s as usize].assign(n as f64, v(clock, s));
                        reset = true;
                    }
                    Op::Plain(s, n) => {
                        let mut fresh = ScoreCounter::from_plain(n as f64, v(clock, s));
                        fresh.join(&sites[s as usize]);
                        sites[s as usize] = fresh;
                        reset = true;
                    }
                    Op::Remove(s) => {
                        let at = sites[s as usize].version();
                        sites[s as usize].prune(at);
                        reset = true;
                    }
                }
                if let Some((a, b)) = joins.next() {
                    let other = sites[b].clone();
                    sites[a].join(&other);
                }
            }
            crate::value::testing::join_everywhere(&mut sites, ScoreCounter::join);
            prop_assert_eq!(&sites[0], &sites[1]);
            prop_assert_eq!(&sites[1], &sites[2]);
            if !reset {
                prop_assert_eq!(sites[0].value(), sum);
            }
        }
    }
}
