//! A sorted set: members with scores, ordered by (score, member) as Redis
//! orders them, with rank lookups. Each member carries the version of the
//! write that last set its score: scores are last-writer-wins per member,
//! and a removal from another site takes only the writes it observed, so
//! a member added concurrently with its removal stays (as in a set).
//!
//! The order is a sorted vector while the set is small (up to
//! [`SMALL_MAX`] members; what Redis keeps in a listpack) and an
//! order-statistic B-tree (`indexset`) above, so rank, select and range
//! bounds cost O(log n) whatever the size.

use std::cmp::Ordering;

use bytes::Bytes;
use indexmap::IndexMap;

use super::score::ScoreCounter;
use crate::version::Version;

/// Members kept in a sorted vector; one more moves the order to a tree.
pub const SMALL_MAX: usize = 128;
/// The tree's node size.
const NODE: usize = 256;

/// A score: an f64 that is never NaN (commands refuse NaN results), so
/// that the partial order is total.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

/// Whether a score written over `held` leaves it as it was (-0 and 0
/// differ, as Redis prints them).
pub fn same_score(held: f64, new: f64) -> bool {
    held == new && held.is_sign_negative() == new.is_sign_negative()
}

/// Where a member sorts among those of one score; `Min` and `Max` are
/// bounds below and above every member.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lex {
    Min,
    Member(Bytes),
    Max,
}

/// A position in the order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub score: Score,
    pub lex: Lex,
}

impl Key {
    fn member(score: f64, member: &Bytes) -> Self {
        Key {
            score: Score(score),
            lex: Lex::Member(member.clone()),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub score: f64,
    pub version: Version,
}

#[derive(Clone, Debug)]
enum Order {
    Small(Vec<Key>),
    Large(indexset::BTreeSet<Key>),
}

impl Default for Order {
    fn default() -> Self {
        Order::Small(Vec::new())
    }
}

impl Order {
    /// How many keys sort before `k`.
    fn rank(&self, k: &Key) -> usize {
        match self {
            Order::Small(v) => v.partition_point(|x| x < k),
            Order::Large(t) => t.rank(k),
        }
    }

    fn get(&self, i: usize) -> Option<&Key> {
        match self {
            Order::Small(v) => v.get(i),
            Order::Large(t) => t.get_index(i),
        }
    }

    fn insert(&mut self, k: Key) {
        match self {
            Order::Small(v) if v.len() < SMALL_MAX => {
                let at = v.partition_point(|x| *x < k);
                v.insert(at, k);
            }
            Order::Small(v) => {
                let mut t = indexset::BTreeSet::with_maximum_node_size(NODE);
                for x in v.drain(..) {
                    t.insert(x);
                }
                t.insert(k);
                *self = Order::Large(t);
            }
            Order::Large(t) => {
                t.insert(k);
            }
        }
    }

    fn remove(&mut self, k: &Key) {
        match self {
            Order::Small(v) => {
                if let Ok(at) = v.binary_search(k) {
                    v.remove(at);
                }
            }
            Order::Large(t) => {
                t.remove(k);
            }
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct ZSetValue {
    members: IndexMap<Bytes, Member, ahash::RandomState>,
    order: Order,
    payload: usize,
    /// The members ZINCRBY made merging counters (only where partitions
    /// merge with other sites): member -> its score's state, whose value
    /// is the member's score.
    counter_states: Option<Box<CounterMap>>,
}

type CounterMap = IndexMap<Bytes, ScoreCounter, ahash::RandomState>;

impl PartialEq for ZSetValue {
    /// Equal when they hold the same members with the same scores and
    /// versions (and score states).
    fn eq(&self, other: &Self) -> bool {
        let counters_eq = match (&self.counter_states, &other.counter_states) {
            (None, None) => true,
            (Some(a), Some(b)) => a.len() == b.len() && a.iter().all(|(k, c)| b.get(k) == Some(c)),
            (Some(a), None) | (None, Some(a)) => a.is_empty(),
        };
        counters_eq
            && self.members.len() == other.members.len()
            && self
                .members
                .iter()
                .all(|(m, x)| other.members.get(m) == Some(x))
    }
}

impl ZSetValue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Bytes of the members plus eight per score.
    pub fn payload_len(&self) -> usize {
        self.payload
    }

    /// Members the map holds room for without growing.
    pub fn capacity(&self) -> usize {
        self.members.capacity()
    }

    /// Whether the order is the small (listpack-like) form.
    pub fn is_small(&self) -> bool {
        matches!(self.order, Order::Small(_))
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.members.get(member).map(|m| m.score)
    }

    pub fn get(&self, member: &[u8]) -> Option<&Member> {
        self.members.get(member)
    }

    pub fn version_of(&self, member: &[u8]) -> Option<Version> {
        self.members.get(member).map(|m| m.version)
    }

    /// Members with their score and version, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Member)> {
        self.members.iter()
    }

    /// The member at position `i` of an arbitrary order (ZRANDMEMBER).
    pub fn get_index(&self, i: usize) -> Option<(&Bytes, f64)> {
        self.members.get_index(i).map(|(m, x)| (m, x.score))
    }

    /// Sets `member`'s score at `version` (a held member keeps the newer of
    /// the two versions); true when it is new.
    pub fn insert(&mut self, member: &Bytes, score: f64, version: Version) -> bool {
        debug_assert!(!score.is_nan(), "NaN score");
        match self.members.get_mut(member.as_ref()) {
            Some(held) => {
                held.version = held.version.max(version);
                if !same_score(held.score, score) {
                    let old = Key::member(held.score, member);
                    held.score = score;
                    self.order.remove(&old);
                    self.order.insert(Key::member(score, member));
                }
                false
            }
            None => {
                self.payload += member.len() + 8;
                self.members
                    .insert(member.clone(), Member { score, version });
                self.order.insert(Key::member(score, member));
                true
            }
        }
    }

    /// Gives every member the version `v`: a value built whole, each
    /// score assigned (no score state is kept).
    pub fn stamp(&mut self, v: Version) {
        self.counter_states = None;
        for x in self.members.values_mut() {
            x.version = v;
        }
    }

    /// The score state of `member`, if ZINCRBY made it one.
    pub fn counter(&self, member: &[u8]) -> Option<&ScoreCounter> {
        self.counter_states.as_ref()?.get(member)
    }

    /// The state of `member` as a counter (a plain member: its score
    /// assigned at its version, having seen every older increment).
    pub fn state_of(&self, member: &[u8]) -> Option<ScoreCounter> {
        match self.counter(member) {
            Some(c) => Some(c.clone()),
            None => self
                .get(member)
                .map(|m| ScoreCounter::from_plain(m.score, m.version)),
        }
    }

    /// ZADD of members at `version`: a member held as a counter takes the
    /// score as an assignment that saw every older increment.
    pub fn assign(&mut self, members: &[(Bytes, f64)], version: Version) {
        for (m, score) in members {
            match self.counter(m) {
                Some(c) => {
                    let mut c = c.clone();
                    c.assign_at(*score, version);
                    self.set_counter(m, c);
                }
                None => {
                    self.insert(m, *score, version);
                }
            }
        }
    }

    /// Every score state, in no order.
    pub fn counters(&self) -> impl Iterator<Item = (&Bytes, &ScoreCounter)> {
        self.counter_states.iter().flat_map(|m| m.iter())
    }

    /// `member`'s score is plain again (ZADD assigned it).
    pub fn drop_counter(&mut self, member: &[u8]) {
        if let Some(m) = &mut self.counter_states {
            m.swap_remove(member);
            if m.is_empty() {
                self.counter_states = None;
            }
        }
    }

    /// `member` takes the state `c`, at the version of the newest write
    /// it holds: plain when it says no more than its assignment, removed
    /// when nothing is left of it.
    pub fn set_counter(&mut self, member: &Bytes, c: ScoreCounter) {
        if c.is_empty() {
            self.remove(member);
            return;
        }
        let (score, version) = match c.is_plain() {
            true => (c.assigned_score(), c.assigned()),
            false => (c.value(), c.version()),
        };
        self.insert(member, score, version);
        if let Some(m) = self.members.get_mut(member.as_ref()) {
            m.version = version;
        }
        match c.is_plain() {
            true => self.drop_counter(member),
            false => {
                self.counter_states
                    .get_or_insert_with(Default::default)
                    .insert(member.clone(), c);
            }
        }
    }

    /// Removes what of the score states is at or below `v` (a delete or
    /// an overwrite of the key at `v` that these members outlived).
    pub fn prune_counters(&mut self, v: Version) {
        let names: Vec<Bytes> = self
            .counters()
            .filter(|(_, c)| c.floor() < v)
            .map(|(n, _)| n.clone())
            .collect();
        for n in names {
            if let Some(c) = self.counter(&n) {
                let mut c = c.clone();
                c.prune(v);
                self.set_counter(&n, c);
            }
        }
    }

    /// Bytes the score states take, for memory accounting.
    pub fn counters_len(&self) -> usize {
        self.counters().map(|(k, c)| k.len() + c.state_len()).sum()
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        self.drop_counter(member);
        match self.members.swap_remove_entry(member) {
            Some((m, x)) => {
                self.payload -= m.len() + 8;
                self.order.remove(&Key::member(x.score, &m));
                true
            }
            None => false,
        }
    }

    /// The member's 0-based rank, lowest score first.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let (m, x) = self.members.get_key_value(member)?;
        Some(self.order.rank(&Key::member(x.score, m)))
    }

    /// The member at `rank` (lowest score first) and its score.
    pub fn by_rank(&self, rank: usize) -> Option<(&Bytes, f64)> {
        match self.order.get(rank)? {
            Key {
                score,
                lex: Lex::Member(m),
            } => Some((m, score.0)),
            _ => None,
        }
    }

    /// How many members sort before `bound`.
    pub fn rank_of(&self, bound: &Key) -> usize {
        self.order.rank(bound)
    }

    /// How many members have a score below `score` (`inclusive`: at most
    /// `score`).
    pub fn count_below(&self, score: f64, inclusive: bool) -> usize {
        self.order.rank(&Key {
            score: Score(score),
            lex: if inclusive { Lex::Max } else { Lex::Min },
        })
    }

    /// The length of the longest member.
    pub fn longest(&self) -> usize {
        self.members.keys().map(Bytes::len).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(n: u64) -> Version {
        Version { hlc: n, site: 1 }
    }

    proptest! {
        /// Ranks, selects and counts agree with a sort of the members,
        /// across the small form and the tree.
        #[test]
        fn order_matches_a_sorted_copy(ops in proptest::collection::vec((0u8..200, -20i32..20, any::<bool>()), 0..600)) {
            let mut z = ZSetValue::new();
            let mut model: std::collections::HashMap<Bytes, f64> = Default::default();
            for (i, (m, s, add)) in ops.into_iter().enumerate() {
                let m = Bytes::from(format!("m{m}"));
                if add {
                    z.insert(&m, s as f64, v(i as u64));
                    model.insert(m, s as f64);
                } else {
                    prop_assert_eq!(z.remove(&m), model.remove(&m).is_some());
                }
            }
            let mut sorted: Vec<(f64, Bytes)> = model.iter().map(|(m, s)| (*s, m.clone())).collect();
            sorted.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(&b.1)));
            prop_assert_eq!(z.len(), sorted.len());
            for (i, (s, m)) in sorted.iter().enumerate() {
                prop_assert_eq!(z.by_rank(i), Some((m, *s)));
                prop_assert_eq!(z.rank(m), Some(i));
            }
            for s in -21..21 {
                let below = sorted.iter().filter(|(x, _)| *x < s as f64).count();
                let upto = sorted.iter().filter(|(x, _)| *x <= s as f64).count();
                prop_assert_eq!(z.count_below(s as f64, false), below);
                prop_assert_eq!(z.count_below(s as f64, true), upto);
            }
        }
    }
}
