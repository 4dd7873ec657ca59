//! A sorted set: members with scores, ordered by (score, member) as Redis
//! orders them, with rank lookups. Each member carries the version of the
//! write that last set its score: scores are last-writer-wins per member,
//! and a removal from another site takes only the writes it observed, so
//! a member added concurrently with its removal stays (as in a set).
//!
//! A small set (up to `zset-max-listpack-entries` members of at most
//! `zset-max-listpack-value` bytes) is one sorted buffer, what Redis keeps
//! in a listpack (see [`zset_pack`]). Past those limits it moves to the
//! large form: a map from member to score and version, and the order as
//! an order-statistic B-tree (`indexset`), so rank, select and range
//! bounds cost O(log n) whatever the size. As in Redis, a set does not go
//! back to the small form when it shrinks.

use std::cmp::Ordering;
use std::mem::size_of;

use bytes::Bytes;
use indexmap::IndexMap;

use super::score::ScoreCounter;
use crate::version::Version;

#[path = "zset_pack.rs"]
mod zset_pack;
use zset_pack::Pack;

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

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Member {
    pub score: f64,
    pub version: Version,
}

/// The large form: a map from member to score and version, and the
/// order as an order-statistic tree, and the score states.
#[derive(Clone, Debug)]
struct Large {
    members: IndexMap<Bytes, Member, ahash::RandomState>,
    order: indexset::BTreeSet<Key>,
    payload: usize,
    states: CounterMap,
}

impl Large {
    fn from_pack(p: &Pack) -> Self {
        let mut l = Large {
            members: IndexMap::with_capacity_and_hasher(p.len() + 1, Default::default()),
            order: indexset::BTreeSet::with_maximum_node_size(NODE),
            payload: p.payload(),
            states: CounterMap::default(),
        };
        for i in 0..p.len() {
            let (m, score, version) = p.get(i);
            let m = Bytes::copy_from_slice(m);
            l.order.insert(Key::member(score, &m));
            l.members.insert(m, Member { score, version });
        }
        l
    }
}

/// The small form with score states (members ZINCRBY made merging
/// counters, only where partitions merge with other sites): rare, so
/// boxed, leaving the common small form inline.
#[derive(Clone, Debug)]
struct Scored {
    pack: Pack,
    /// Never empty (the set is then [`Repr::Small`] again).
    states: CounterMap,
}

/// The form, and where the score states are (member -> its score's
/// state, whose value is the member's score). Only the small form
/// without states is inline: [`ZSetValue`] takes 32 bytes, inline in
/// [`Value`](super::Value) as a hash or a set is.
#[derive(Clone, Debug)]
enum Repr {
    Small(Pack),
    Scored(Box<Scored>),
    Large(Box<Large>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Small(Pack::default())
    }
}

/// The form a sorted set's members are in, whether it has score states
/// or not.
enum Form<'a> {
    Small(&'a Pack),
    Large(&'a Large),
}

enum FormMut<'a> {
    Small(&'a mut Pack),
    Large(&'a mut Large),
}

#[derive(Clone, Debug, Default)]
pub struct ZSetValue {
    repr: Repr,
}

type CounterMap = IndexMap<Bytes, ScoreCounter, ahash::RandomState>;

impl PartialEq for ZSetValue {
    /// Equal when they hold the same members with the same scores and
    /// versions (and score states), whatever their form.
    fn eq(&self, other: &Self) -> bool {
        same_states(self.states(), other.states())
            && self.len() == other.len()
            && self.iter().all(|(m, x)| other.get(m) == Some(x))
    }
}

/// Whether two maps of score states hold the same, in whatever order;
/// none and an empty map are the same.
fn same_states(a: Option<&CounterMap>, b: Option<&CounterMap>) -> bool {
    let (a, b) = (a.filter(|m| !m.is_empty()), b.filter(|m| !m.is_empty()));
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.len() == b.len() && a.iter().all(|(k, c)| b.get(k) == Some(c)),
        _ => false,
    }
}

impl ZSetValue {
    pub fn new() -> Self {
        Self::default()
    }

    fn form(&self) -> Form<'_> {
        match &self.repr {
            Repr::Small(p) => Form::Small(p),
            Repr::Scored(s) => Form::Small(&s.pack),
            Repr::Large(l) => Form::Large(l),
        }
    }

    fn form_mut(&mut self) -> FormMut<'_> {
        match &mut self.repr {
            Repr::Small(p) => FormMut::Small(p),
            Repr::Scored(s) => FormMut::Small(&mut s.pack),
            Repr::Large(l) => FormMut::Large(l),
        }
    }

    /// The score states (None: there are none).
    fn states(&self) -> Option<&CounterMap> {
        match &self.repr {
            Repr::Small(_) => None,
            Repr::Scored(s) => Some(&s.states),
            Repr::Large(l) => Some(&l.states),
        }
    }

    /// The score states, to add to (the small form boxes itself with
    /// them).
    fn states_mut(&mut self) -> &mut CounterMap {
        if let Repr::Small(p) = &mut self.repr {
            let pack = std::mem::take(p);
            self.repr = Repr::Scored(Box::new(Scored {
                pack,
                states: CounterMap::default(),
            }));
        }
        match &mut self.repr {
            Repr::Scored(s) => &mut s.states,
            Repr::Large(l) => &mut l.states,
            Repr::Small(_) => unreachable!("boxed above"),
        }
    }

    /// Drops the score states (all of them, or only when `emptied`): the
    /// small form is inline again.
    fn clear_states(&mut self, emptied: bool) {
        match &mut self.repr {
            Repr::Small(_) => {}
            Repr::Scored(s) => {
                if !emptied || s.states.is_empty() {
                    self.repr = Repr::Small(std::mem::take(&mut s.pack));
                }
            }
            Repr::Large(l) => {
                if !emptied || l.states.is_empty() {
                    l.states = CounterMap::default();
                }
            }
        }
    }

    /// Sets the limits of the small form (`zset-max-listpack-entries`
    /// and `-value`), for every sorted set written from now on.
    pub fn set_limits(entries: usize, value: usize) {
        zset_pack::set_limits(entries, value)
    }

    pub fn len(&self) -> usize {
        match self.form() {
            Form::Small(p) => p.len(),
            Form::Large(l) => l.members.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the members plus eight per score.
    pub fn payload_len(&self) -> usize {
        match self.form() {
            Form::Small(p) => p.payload(),
            Form::Large(l) => l.payload,
        }
    }

    /// Members the large form's map holds room for without growing (0 in
    /// the small form).
    pub fn capacity(&self) -> usize {
        match self.form() {
            Form::Small(_) => 0,
            Form::Large(l) => l.members.capacity(),
        }
    }

    /// The small form's buffer bytes (None: the large form).
    pub fn packed_len(&self) -> Option<usize> {
        match self.form() {
            Form::Small(p) => Some(p.bytes()),
            Form::Large(_) => None,
        }
    }

    /// Bytes of the boxed struct (the large form's, or the small form's
    /// with score states; 0 for a small set without).
    pub fn boxed_len(&self) -> usize {
        match &self.repr {
            Repr::Small(_) => 0,
            Repr::Scored(_) => size_of::<Scored>(),
            Repr::Large(_) => size_of::<Large>(),
        }
    }

    /// Whether this is the small (listpack-like) form.
    pub fn is_small(&self) -> bool {
        matches!(self.form(), Form::Small(_))
    }

    /// Bytes beyond the payload this value takes (its boxed struct, the
    /// small form's buffer or the large form's structures; the inline
    /// struct is the entry's), for accounting.
    pub fn overhead(&self) -> usize {
        const LARGE_MEMBER_OVERHEAD: usize = 96;
        self.boxed_len()
            + match self.form() {
                Form::Small(p) => p.bytes() - p.payload().min(p.bytes()),
                Form::Large(l) => l.members.len() * LARGE_MEMBER_OVERHEAD,
            }
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.get(member).map(|m| m.score)
    }

    pub fn get(&self, member: &[u8]) -> Option<Member> {
        match self.form() {
            Form::Small(p) => p.find(member).map(|i| {
                let (_, score, version) = p.get(i);
                Member { score, version }
            }),
            Form::Large(l) => l.members.get(member).copied(),
        }
    }

    pub fn version_of(&self, member: &[u8]) -> Option<Version> {
        self.get(member).map(|m| m.version)
    }

    /// The member at position `i` of an arbitrary order, with its score
    /// and version.
    fn entry(&self, i: usize) -> Option<(&[u8], Member)> {
        match self.form() {
            Form::Small(p) => (i < p.len()).then(|| {
                let (m, score, version) = p.get(i);
                (m, Member { score, version })
            }),
            Form::Large(l) => l.members.get_index(i).map(|(m, x)| (&m[..], *x)),
        }
    }

    /// Members with their score and version, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Member)> {
        let (small, large) = match self.form() {
            Form::Small(p) => (Some(p.iter(0)), None),
            Form::Large(l) => (None, Some(l.members.iter())),
        };
        let small = small.into_iter().flatten();
        let large = large.into_iter().flatten();
        small
            .map(|(m, score, version)| (m, Member { score, version }))
            .chain(large.map(|(m, x)| (&m[..], *x)))
    }

    /// The members at ranks `[start, end)` (lowest score first) with their
    /// scores, read in one walk of the small form.
    pub fn range(&self, start: usize, end: usize) -> impl Iterator<Item = (&[u8], f64)> {
        let end = end.min(self.len());
        let start = start.min(end);
        let (small, large) = match self.form() {
            Form::Small(p) => (Some(p.iter(start).take(end - start)), None),
            Form::Large(_) => (None, Some(start..end)),
        };
        let small = small.into_iter().flatten();
        let large = large.into_iter().flatten();
        small
            .map(|(m, s, _)| (m, s))
            .chain(large.filter_map(|r| self.by_rank(r)))
    }

    /// The member at position `i` of an arbitrary order (ZRANDMEMBER).
    pub fn get_index(&self, i: usize) -> Option<(&[u8], f64)> {
        self.entry(i).map(|(m, x)| (m, x.score))
    }

    /// Moves the set to the large form.
    fn make_large(&mut self) {
        let states = match &mut self.repr {
            Repr::Small(_) => CounterMap::default(),
            Repr::Scored(s) => std::mem::take(&mut s.states),
            Repr::Large(_) => return,
        };
        if let Form::Small(p) = self.form() {
            let mut l = Large::from_pack(p);
            l.states = states;
            self.repr = Repr::Large(Box::new(l));
        }
    }

    /// Sets `member`'s score at `version` (a held member keeps the newer of
    /// the two versions); true when it is new.
    pub fn insert(&mut self, member: &[u8], score: f64, version: Version) -> bool {
        debug_assert!(!score.is_nan(), "NaN score");
        if matches!(self.form(), Form::Small(p) if !zset_pack::has_room(p, member.len())) {
            self.make_large();
        }
        if let FormMut::Small(p) = self.form_mut() {
            match p.find(member) {
                Some(i) => {
                    let (_, held, v) = p.get(i);
                    let version = v.max(version);
                    if !same_score(held, score) {
                        p.remove_at(i);
                        p.insert(member, score, version);
                    } else if version != v {
                        p.set_version(i, version);
                    }
                    return false;
                }
                None if zset_pack::may_add(p, member.len()) => {
                    p.insert(member, score, version);
                    return true;
                }
                None => self.make_large(),
            }
        }
        let FormMut::Large(l) = self.form_mut() else {
            unreachable!("moved to the large form")
        };
        match l.members.get_mut(member) {
            Some(held) => {
                held.version = held.version.max(version);
                if !same_score(held.score, score) {
                    let (k, _) = l.members.get_key_value(member).expect("held");
                    let k = k.clone();
                    let held = l.members.get_mut(member).expect("held");
                    l.order.remove(&Key::member(held.score, &k));
                    held.score = score;
                    l.order.insert(Key::member(score, &k));
                }
                false
            }
            None => {
                let m = Bytes::copy_from_slice(member);
                l.payload += m.len() + 8;
                l.order.insert(Key::member(score, &m));
                l.members.insert(m, Member { score, version });
                true
            }
        }
    }

    /// Sets the version of a held `member`.
    fn set_version(&mut self, member: &[u8], v: Version) {
        match self.form_mut() {
            FormMut::Small(p) => {
                if let Some(i) = p.find(member) {
                    p.set_version(i, v);
                }
            }
            FormMut::Large(l) => {
                if let Some(m) = l.members.get_mut(member) {
                    m.version = v;
                }
            }
        }
    }

    /// Gives every member the version `v`: a value built whole, each
    /// score assigned (no score state is kept).
    pub fn stamp(&mut self, v: Version) {
        self.clear_states(false);
        match self.form_mut() {
            FormMut::Small(p) => p.stamp(v),
            FormMut::Large(l) => {
                for x in l.members.values_mut() {
                    x.version = v;
                }
            }
        }
    }
    /// The score state of `member`, if ZINCRBY made it one.
    pub fn counter(&self, member: &[u8]) -> Option<&ScoreCounter> {
        self.states()?.get(member)
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
        self.states().into_iter().flat_map(|m| m.iter())
    }

    /// `member`'s score is plain again (ZADD assigned it).
    pub fn drop_counter(&mut self, member: &[u8]) {
        if self.states().is_some_and(|m| m.contains_key(member)) {
            self.states_mut().swap_remove(member);
            self.clear_states(true);
        }
    }

    /// `member` takes the state `c`, at the version of the newest write
    /// it holds: plain when it says no more than its assignment, removed
    /// when nothing is left of it.
    pub fn set_counter(&mut self, member: &[u8], c: ScoreCounter) {
        if c.is_empty() {
            self.remove(member);
            return;
        }
        let (score, version) = match c.is_plain() {
            true => (c.assigned_score(), c.assigned()),
            false => (c.value(), c.version()),
        };
        self.insert(member, score, version);
        self.set_version(member, version);
        match c.is_plain() {
            true => self.drop_counter(member),
            false => {
                self.states_mut().insert(Bytes::copy_from_slice(member), c);
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
        match self.form_mut() {
            FormMut::Small(p) => match p.find(member) {
                Some(i) => {
                    p.remove_at(i);
                    true
                }
                None => false,
            },
            FormMut::Large(l) => match l.members.swap_remove_entry(member) {
                Some((m, x)) => {
                    l.payload -= m.len() + 8;
                    l.order.remove(&Key::member(x.score, &m));
                    true
                }
                None => false,
            },
        }
    }

    /// The member's 0-based rank, lowest score first.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match self.form() {
            Form::Small(p) => p.find(member),
            Form::Large(l) => {
                let (m, x) = l.members.get_key_value(member)?;
                Some(l.order.rank(&Key::member(x.score, m)))
            }
        }
    }

    /// The member at `rank` (lowest score first) and its score.
    pub fn by_rank(&self, rank: usize) -> Option<(&[u8], f64)> {
        match self.form() {
            Form::Small(p) => (rank < p.len()).then(|| {
                let (m, s, _) = p.get(rank);
                (m, s)
            }),
            Form::Large(l) => match l.order.get_index(rank)? {
                Key {
                    score,
                    lex: Lex::Member(m),
                } => Some((&m[..], score.0)),
                _ => None,
            },
        }
    }

    /// How many members sort before `bound`.
    pub fn rank_of(&self, bound: &Key) -> usize {
        match self.form() {
            Form::Small(p) => p.partition_point(|s, m| {
                let lex = match &bound.lex {
                    Lex::Min => Ordering::Greater,
                    Lex::Member(b) => m.cmp(b),
                    Lex::Max => Ordering::Less,
                };
                Score(s).cmp(&bound.score).then(lex) == Ordering::Less
            }),
            Form::Large(l) => l.order.rank(bound),
        }
    }

    /// How many members have a score below `score` (`inclusive`: at most
    /// `score`).
    pub fn count_below(&self, score: f64, inclusive: bool) -> usize {
        self.rank_of(&Key {
            score: Score(score),
            lex: if inclusive { Lex::Max } else { Lex::Min },
        })
    }

    /// The length of the longest member.
    pub fn longest(&self) -> usize {
        match self.form() {
            Form::Small(p) => p.longest(),
            Form::Large(l) => l.members.keys().map(Bytes::len).max().unwrap_or(0),
        }
    }
}

#[cfg(test)]
#[path = "zset_tests.rs"]
mod tests;
