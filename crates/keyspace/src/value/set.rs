//! A set's members. Each member carries the version of the write that last
//! added it: a removal from another site takes only the adds it observed
//! (an observed-remove set), so an add concurrent with a remove wins.
//! Members are held as [`MapKey`]s: up to 22 bytes inline, no heap block.

use indexmap::IndexMap;

use crate::map_key::MapKey;
use crate::version::Version;

type MemberMap = IndexMap<MapKey, Version, ahash::RandomState>;

#[derive(Clone, Debug, Default)]
pub struct SetValue {
    members: MemberMap,
    payload: usize,
}

impl PartialEq for SetValue {
    /// Equal when they hold the same members at the same versions,
    /// whatever the order.
    fn eq(&self, other: &Self) -> bool {
        self.members.len() == other.members.len()
            && self
                .members
                .iter()
                .all(|(m, v)| other.members.get(m) == Some(v))
    }
}

impl SetValue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Bytes of the members.
    pub fn payload_len(&self) -> usize {
        self.payload
    }

    /// Members the map holds room for without growing.
    pub fn capacity(&self) -> usize {
        self.members.capacity()
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.members.contains_key(member)
    }

    /// The version of the write that last added `member`.
    pub fn version_of(&self, member: &[u8]) -> Option<Version> {
        self.members.get(member).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&MapKey, Version)> {
        self.members.iter().map(|(m, v)| (m, *v))
    }

    pub fn members(&self) -> impl Iterator<Item = &MapKey> {
        self.members.keys()
    }

    /// The member at position `i` (an arbitrary but stable order between
    /// writes): what SRANDMEMBER and SPOP draw from.
    pub fn get_index(&self, i: usize) -> Option<(&MapKey, Version)> {
        self.members.get_index(i).map(|(m, v)| (m, *v))
    }

    /// Adds `member` at `version` (a member already held takes the newer
    /// of the two versions); true when it is new.
    pub fn add(&mut self, member: &[u8], version: Version) -> bool {
        match self.members.get_mut(member) {
            Some(v) => {
                *v = (*v).max(version);
                false
            }
            None => {
                self.payload += member.len();
                self.members.insert(MapKey::new(member), version);
                true
            }
        }
    }

    /// Gives every member the version `v`.
    pub fn stamp(&mut self, v: Version) {
        for x in self.members.values_mut() {
            *x = v;
        }
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.members.swap_remove_entry(member) {
            Some((m, _)) => {
                self.payload -= m.len();
                true
            }
            None => false,
        }
    }

    /// Whether every member is an integer Redis would keep in an intset.
    pub fn all_integers(&self) -> bool {
        self.members.keys().all(|m| is_intset_member(m))
    }

    /// The length of the longest member.
    pub fn longest(&self) -> usize {
        self.members.keys().map(|m| m.len()).max().unwrap_or(0)
    }
}

/// A member Redis stores in an intset: the canonical text of an i64.
fn is_intset_member(m: &[u8]) -> bool {
    if m.is_empty() || m.len() > 20 {
        return false;
    }
    let Ok(s) = std::str::from_utf8(m) else {
        return false;
    };
    s.parse::<i64>()
        .is_ok_and(|n| itoa::Buffer::new().format(n).as_bytes() == m)
}
