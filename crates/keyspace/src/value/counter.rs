//! A string counter that merges across sites. A string that INCR, INCRBY,
//! DECR or DECRBY changed on a partition that merges with other sites
//! becomes a counter: reads see it as the string of its value, and its
//! state is a join-semilattice, so every site ends with the same value
//! whatever order its changes arrive in, each change counted once:
//!
//! - each site's contribution: the running total of the increments made
//!   there, with the version of the latest (a site's total only moves in
//!   its own order, so the newer version wins);
//! - the latest assignment (a SET, or any other write of the whole string)
//!   and its version: the value assigned, less the contributions the
//!   assigning site had seen. The newer assignment wins.
//!
//! - a floor: the newest removal (DEL, expiry) of the key; what is older
//!   than it (an assignment, a site's increments) is gone.
//!
//! The value is the assignment's base plus every contribution: increments
//! the assigning site had not seen (made concurrently) are kept, those it
//! had seen are not counted twice (Redis Enterprise's rule for counters:
//! a SET resets, increments concurrent with it are kept). An assignment
//! that is not an integer shows as itself whatever the contributions.
//!
//! A plain string (one written where no increment was held) meets a
//! counter as an assignment that saw every increment older than itself
//! (its floor is its version): the last-writer-wins rule strings follow.
//!
//! INCRBYFLOAT keeps its own per-site running totals beside the integer
//! ones ([`FloatContribution`], decimal texts): a site's float total moves
//! only by its own INCRBYFLOATs, so the two kinds of totals never order
//! against each other. Once a float total is held the value is a float:
//! the base, the integer totals and each float total in site order,
//! added as decimal texts ([`crate::number::add_texts`]), so every site
//! computes the same text. An integer counter and a float increment thus
//! combine by addition (INCRBYFLOAT on "10" gives "10.5"; an INCR made
//! concurrently at another site is added too), and an INCR on a value that
//! reads as a non-integer fails as in Redis.

use bytes::Bytes;
use smallvec::SmallVec;

use crate::number::{add_texts, negate_text, parse_f64};
use crate::version::Version;

/// One site's increments: their running total and the newest's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contribution {
    pub site: u16,
    pub total: i64,
    pub version: Version,
}

/// One site's INCRBYFLOAT increments: their running total (a decimal
/// text, as INCRBYFLOAT prints) and the newest's version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloatContribution {
    pub site: u16,
    pub total: Bytes,
    pub version: Version,
}

/// A site's running total, as an increment ships it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Total<'a> {
    /// Of INCR, INCRBY, DECR, DECRBY, HINCRBY.
    Int(i64),
    /// Of INCRBYFLOAT, HINCRBYFLOAT.
    Float(&'a Bytes),
}

/// What the latest assignment set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Base {
    /// An integer, less the contributions its site had seen.
    Int(i128),
    /// Not a number: the value is this text.
    Text(Bytes),
    /// A float (or an integer written over float totals): `text`, when the
    /// contributions add up to `seen` (their sum where it was assigned);
    /// else `text` plus what they added since.
    Float { text: Bytes, seen: Bytes },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterValue {
    assigned: Version,
    base: Base,
    floor: Version,
    /// The version of the write that last set the key's time to live (an
    /// assignment, EXPIRE, PERSIST): the newer decides the expiry when two
    /// states meet.
    expiry: Version,
    contributions: SmallVec<[Contribution; 2]>,
    /// Per-site INCRBYFLOAT totals, by site (none: an integer counter).
    floats: Vec<FloatContribution>,
    /// The value as reads see it.
    text: Bytes,
}

/// The integer Redis reads from a string (canonical i64 text), widened.
fn parse(text: &[u8]) -> Option<i128> {
    let s = std::str::from_utf8(text).ok()?;
    let n: i64 = s.parse().ok()?;
    (itoa::Buffer::new().format(n).as_bytes() == text).then_some(n as i128)
}

impl CounterValue {
    /// The state of a plain string written at `version` by a site that saw
    /// no increment of it.
    pub fn from_plain(text: Bytes, version: Version) -> Self {
        let base = match parse(&text) {
            Some(n) => Base::Int(n),
            None if parse_f64(&text).is_some() => Base::Float {
                text: text.clone(),
                seen: Bytes::from_static(b"0"),
            },
            None => Base::Text(text.clone()),
        };
        CounterValue {
            assigned: version,
            base,
            floor: version,
            expiry: version,
            contributions: SmallVec::new(),
            floats: Vec::new(),
            text,
        }
    }

    /// A counter made by an increment of a missing key: 0 plus the totals.
    pub fn from_nothing() -> Self {
        CounterValue {
            assigned: Version::ZERO,
            base: Base::Int(0),
            floor: Version::ZERO,
            expiry: Version::ZERO,
            contributions: SmallVec::new(),
            floats: Vec::new(),
            text: Bytes::from_static(b"0"),
        }
    }

    /// A state from its parts (the decoder's); the text is derived.
    pub fn from_parts(
        assigned: Version,
        base: Base,
        floor: Version,
        expiry: Version,
        contributions: Vec<Contribution>,
        floats: Vec<FloatContribution>,
    ) -> Self {
        let mut c = CounterValue {
            assigned,
            base,
            floor,
            expiry,
            contributions: SmallVec::from_vec(contributions),
            floats,
            text: Bytes::new(),
        };
        c.contributions.sort_by_key(|x| x.site);
        c.contributions.dedup_by_key(|x| x.site);
        c.floats.sort_by_key(|x| x.site);
        c.floats.dedup_by_key(|x| x.site);
        c.normalize();
        c
    }

    pub fn floor(&self) -> Version {
        self.floor
    }

    pub fn expiry(&self) -> Version {
        self.expiry
    }

    /// The key's time to live was set (or removed) at `v`.
    pub fn expiry_set(&mut self, v: Version) {
        self.expiry = self.expiry.max(v);
    }

    pub fn text(&self) -> &Bytes {
        &self.text
    }

    pub fn assigned(&self) -> Version {
        self.assigned
    }

    pub fn base(&self) -> &Base {
        &self.base
    }

    pub fn contributions(&self) -> &[Contribution] {
        &self.contributions
    }

    /// Site `site`'s running total (0 before its first increment).
    pub fn total_of(&self, site: u16) -> i64 {
        self.contribution(site).map_or(0, |c| c.total)
    }

    pub fn contribution(&self, site: u16) -> Option<&Contribution> {
        self.contributions.iter().find(|c| c.site == site)
    }

    pub fn floats(&self) -> &[FloatContribution] {
        &self.floats
    }

    /// Site `site`'s INCRBYFLOAT total ("0" before its first).
    pub fn float_total_of(&self, site: u16) -> Bytes {
        self.floats
            .iter()
            .find(|c| c.site == site)
            .map_or(Bytes::from_static(b"0"), |c| c.total.clone())
    }

    /// The version of the newest increment of site `site` held, of the
    /// kind (integer or float) `float` says.
    pub fn held(&self, site: u16, float: bool) -> Option<Version> {
        match float {
            false => self.contribution(site).map(|c| c.version),
            true => self
                .floats
                .iter()
                .find(|c| c.site == site)
                .map(|c| c.version),
        }
    }

    /// Bytes held beyond the text, for memory accounting.
    pub fn state_len(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.contributions.len().saturating_sub(2) * std::mem::size_of::<Contribution>()
            + self
                .floats
                .iter()
                .map(|c| std::mem::size_of::<FloatContribution>() + c.total.len())
                .sum::<usize>()
            + match &self.base {
                Base::Int(_) => 0,
                Base::Text(t) => t.len(),
                Base::Float { text, seen } => text.len() + seen.len(),
            }
    }

    /// Site `site`'s total became `total` at `version`; false when what is
    /// held of that site is as new (nothing changes).
    pub fn count(&mut self, site: u16, total: Total<'_>, version: Version) -> bool {
        if version < self.floor {
            return false;
        }
        match total {
            Total::Int(total) => match self.contributions.iter_mut().find(|c| c.site == site) {
                Some(c) if c.version >= version => return false,
                Some(c) => {
                    c.total = total;
                    c.version = version;
                }
                None => {
                    let at = self.contributions.partition_point(|c| c.site < site);
                    self.contributions.insert(
                        at,
                        Contribution {
                            site,
                            total,
                            version,
                        },
                    );
                }
            },
            Total::Float(total) => match self.floats.iter_mut().find(|c| c.site == site) {
                Some(c) if c.version >= version => return false,
                Some(c) => {
                    c.total = total.clone();
                    c.version = version;
                }
                None => {
                    let at = self.floats.partition_point(|c| c.site < site);
                    self.floats.insert(
                        at,
                        FloatContribution {
                            site,
                            total: total.clone(),
                            version,
                        },
                    );
                }
            },
        }
        self.render();
        true
    }

    /// The string is written whole (`text`) by this site, which sees every
    /// contribution held: so the value becomes exactly `text`.
    pub fn assign(&mut self, text: Bytes, version: Version) {
        self.assigned = version;
        self.expiry = self.expiry.max(version);
        self.base = match parse(&text) {
            Some(n) if self.floats.is_empty() => Base::Int(n - self.sum()),
            Some(_) => Base::Float {
                seen: self.float_sum(),
                text,
            },
            None if parse_f64(&text).is_some() => Base::Float {
                seen: self.float_sum(),
                text,
            },
            None => Base::Text(text),
        };
        self.render();
    }

    /// Gives the latest assignment the version `v` (the write's, once it is
    /// known).
    pub fn stamp(&mut self, v: Version) {
        self.assigned = v;
        self.expiry = v;
    }

    /// Joins another site's state into this one; true when this changed.
    pub fn join(&mut self, other: &CounterValue) -> bool {
        let before = self.clone();
        let mut changed = false;
        if other.floor > self.floor {
            self.floor = other.floor;
            changed = true;
        }
        if other.expiry > self.expiry {
            self.expiry = other.expiry;
            changed = true;
        }
        if other.assigned > self.assigned {
            self.assigned = other.assigned;
            self.base = other.base.clone();
            changed = true;
        }
        for c in &other.contributions {
            match self.contributions.iter_mut().find(|x| x.site == c.site) {
                Some(x) if x.version >= c.version => {}
                Some(x) => {
                    *x = *c;
                    changed = true;
                }
                None => {
                    let at = self.contributions.partition_point(|x| x.site < c.site);
                    self.contributions.insert(at, *c);
                    changed = true;
                }
            }
        }
        for c in &other.floats {
            match self.floats.iter_mut().find(|x| x.site == c.site) {
                Some(x) if x.version >= c.version => {}
                Some(x) => {
                    *x = c.clone();
                    changed = true;
                }
                None => {
                    let at = self.floats.partition_point(|x| x.site < c.site);
                    self.floats.insert(at, c.clone());
                    changed = true;
                }
            }
        }
        if changed {
            self.normalize();
        }
        *self != before
    }

    /// Whether this state says no more than its text written at its
    /// assignment's version ([`CounterValue::from_plain`] of it): then a
    /// plain string at that version is the same value.
    pub fn is_plain(&self) -> bool {
        self.contributions.is_empty() && self.floats.is_empty() && self.floor == self.assigned
    }

    /// Whether a removal (or an overwrite by another type) at `v` is news
    /// to this state: its floor is older.
    pub fn has_older_than(&self, v: Version) -> bool {
        self.floor < v
    }

    /// A removal at `v` of a key written again since: its floor rises to
    /// `v` and what is older goes.
    pub fn prune_older(&mut self, v: Version) {
        if v > self.floor {
            self.floor = v;
            self.normalize();
        }
    }

    /// Drops what the floor covers (an assignment older than it becomes 0
    /// from nothing; the totals of increments older than it go) and
    /// renders the text.
    fn normalize(&mut self) {
        if self.assigned < self.floor {
            self.assigned = Version::ZERO;
            self.base = Base::Int(0);
        }
        if self.expiry < self.floor {
            self.expiry = Version::ZERO;
        }
        let floor = self.floor;
        self.contributions.retain(|c| c.version >= floor);
        self.floats.retain(|c| c.version >= floor);
        self.render();
    }

    fn sum(&self) -> i128 {
        self.contributions.iter().map(|c| c.total as i128).sum()
    }

    /// Every contribution added up as a decimal text: the integer totals,
    /// then each float total in site order (the same text at every site).
    fn float_sum(&self) -> Bytes {
        self.floats
            .iter()
            .fold(Bytes::from(self.sum().to_string()), |acc, c| {
                add_texts(&acc, &c.total)
            })
    }

    fn render(&mut self) {
        self.text = match &self.base {
            Base::Int(b) if self.floats.is_empty() => Bytes::from(format!("{}", b + self.sum())),
            Base::Int(b) => add_texts(b.to_string().as_bytes(), &self.float_sum()),
            Base::Text(t) => t.clone(),
            Base::Float { text, seen } => {
                let now = self.float_sum();
                match now == *seen {
                    true => text.clone(),
                    false => add_texts(text, &add_texts(&now, &negate_text(seen))),
                }
            }
        };
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
    fn increments_the_assigner_had_not_seen_are_kept() {
        // Site 1 counts to 5; site 2 saw 3 of them and SETs 100, while site 1
        // adds 2 more.
        let mut a = CounterValue::from_nothing();
        a.count(1, Total::Int(3), v(2, 1));
        let mut b = a.clone();
        a.count(1, Total::Int(5), v(4, 1));
        b.assign(Bytes::from_static(b"100"), v(3, 2));
        assert_eq!(b.text(), &Bytes::from_static(b"100"));
        let (mut x, mut y) = (a.clone(), b.clone());
        x.join(&b);
        y.join(&a);
        assert_eq!(x, y);
        assert_eq!(x.text(), &Bytes::from_static(b"102"));
    }

    #[test]
    fn a_text_assignment_shows_as_itself() {
        let mut a = CounterValue::from_plain(Bytes::from_static(b"7"), v(1, 1));
        a.count(2, Total::Int(4), v(2, 2));
        assert_eq!(a.text(), &Bytes::from_static(b"11"));
        a.assign(Bytes::from_static(b"seven"), v(3, 1));
        a.count(2, Total::Int(9), v(4, 2));
        assert_eq!(a.text(), &Bytes::from_static(b"seven"));
        a.assign(Bytes::from_static(b"1"), v(5, 1));
        a.count(2, Total::Int(10), v(6, 2));
        assert_eq!(a.text(), &Bytes::from_static(b"2"));
    }

    #[test]
    fn float_totals_add_to_the_integer_value() {
        let t = |s: &'static str| Bytes::from_static(s.as_bytes());
        let mut a = CounterValue::from_plain(t("10"), v(1, 1));
        a.count(2, Total::Float(&t("0.5")), v(2, 2));
        assert_eq!(a.text(), &t("10.5"));
        a.count(1, Total::Int(3), v(3, 1));
        assert_eq!(a.text(), &t("13.5"));
        a.count(2, Total::Float(&t("0.6")), v(4, 2));
        assert_eq!(a.text(), &t("13.6"));
        // An assignment reads back as written; what is added later counts.
        a.assign(t("0.1"), v(5, 1));
        assert_eq!(a.text(), &t("0.1"));
        a.count(2, Total::Float(&t("0.8")), v(6, 2));
        assert_eq!(a.text(), &t("0.3"));
        a.assign(t("7"), v(7, 1));
        assert_eq!(a.text(), &t("7"));
        a.count(1, Total::Int(4), v(8, 1));
        assert_eq!(a.text(), &t("8"));
    }

    #[derive(Clone, Debug)]
    enum Op {
        IncrF(u16, i64),
        Incr(u16, i64),
        Set(u16, i64),
        Del(u16),
    }

    proptest! {
        /// Sites applying their own operations and joining each other's
        /// states in any order, any number of times, end equal; with no
        /// assignment the value is the sum of every increment.
        #[test]
        fn joins_converge_and_sum(ops in proptest::collection::vec(
            prop_oneof![(0u16..3, -5i64..6).prop_map(|(s, n)| Op::Incr(s, n)),
                        (0u16..3, -9i64..9).prop_map(|(s, n)| Op::IncrF(s, n)),
                        (0u16..3, -9i64..9).prop_map(|(s, n)| Op::Set(s, n)),
                        (0u16..3).prop_map(Op::Del)], 1..40),
            joins in proptest::collection::vec((0usize..3, 0usize..3), 0..40)) {
            let mut sites: Vec<CounterValue> =
                (0..3).map(|_| CounterValue::from_nothing()).collect();
            let mut clock = 0u64;
            let mut sum = 0i64;
            let mut fsum = 0f64;
            let mut assigned = false;
            let mut joins = joins.into_iter();
            for op in ops {
                clock += 1;
                match op {
                    Op::Incr(s, n) => {
                        let site = &mut sites[s as usize];
                        let total = site.total_of(s) + n;
                        site.count(s, Total::Int(total), v(clock, s));
                        sum += n;
                    }
                    Op::IncrF(s, n) => {
                        let site = &mut sites[s as usize];
                        let by = Bytes::from((n as f64 / 4.0).to_string());
                        let total = add_texts(&site.float_total_of(s), &by);
                        site.count(s, Total::Float(&total), v(clock, s));
                        fsum += n as f64 / 4.0;
                    }
                    Op::Set(s, n) => {
                        sites[s as usize].assign(Bytes::from(n.to_string()), v(clock, s));
                        assigned = true;
                    }
                    Op::Del(s) => {
                        sites[s as usize].prune_older(v(clock, s));
                        assigned = true;
                    }
                }
                if let Some((a, b)) = joins.next() {
                    let other = sites[b].clone();
                    sites[a].join(&other);
                }
            }
            crate::value::testing::join_everywhere(&mut sites, CounterValue::join);
            prop_assert_eq!(&sites[0], &sites[1]);
            prop_assert_eq!(&sites[1], &sites[2]);
            if !assigned {
                let value = parse_f64(sites[0].text()).unwrap_or(f64::NAN);
                prop_assert_eq!(value, sum as f64 + fsum);
            }
        }
    }
}
