//! A set's members. Each member carries the version of the write that last
//! added it: a removal from another site takes only the adds it observed
//! (an observed-remove set), so an add concurrent with a remove wins.
//!
//! A set is in one of two forms, as Redis keeps them: packed (every member
//! in one block, see [`hash_pack`], entries without
//! values) while it is small, a table (a map of [`MapKey`]s: up to 22
//! bytes inline, no heap block) once it has more members than
//! `set-max-listpack-entries` or a member longer than
//! `set-max-listpack-value` ([`crate::encodings::set_limits`]). A set never
//! goes back to the packed form (neither does Redis's).

use indexmap::IndexMap;

use super::hash_pack::{self, PackedSet};
use crate::encodings::{set_limits, SetLimits};
use crate::map_key::MapKey;
use crate::version::Version;

pub type MemberMap = IndexMap<MapKey, Version, ahash::RandomState>;

/// The table form: members by name, and the bytes of their names.
#[derive(Clone, Debug)]
struct Table {
    members: MemberMap,
    payload: usize,
}

#[derive(Clone, Debug)]
enum Form {
    Packed(PackedSet),
    Table(Box<Table>),
}

#[derive(Clone, Debug)]
pub struct SetValue {
    form: Form,
}

impl Default for SetValue {
    fn default() -> Self {
        SetValue {
            form: Form::Packed(PackedSet::default()),
        }
    }
}

impl PartialEq for SetValue {
    /// Equal when they hold the same members at the same versions,
    /// whatever the order or the form.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(m, v)| other.version_of(m) == Some(v))
    }
}

/// The members of a set and their versions, in either form.
pub struct Iter<'a>(Members<'a>);

enum Members<'a> {
    Packed(hash_pack::Iter<'a, false>),
    Table(indexmap::map::Iter<'a, MapKey, Version>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], Version);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Members::Packed(i) => i.next().map(|(m, f)| (m, f.version)),
            Members::Table(i) => i.next().map(|(m, v)| (&m[..], *v)),
        }
    }
}

impl SetValue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        match &self.form {
            Form::Packed(p) => p.len(),
            Form::Table(t) => t.members.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the members.
    pub fn payload_len(&self) -> usize {
        match &self.form {
            Form::Packed(p) => p.payload_len(),
            Form::Table(t) => t.payload,
        }
    }

    /// Whether the members are packed in one block (Redis's `listpack`
    /// encoding), else in a table.
    pub fn is_packed(&self) -> bool {
        matches!(self.form, Form::Packed(_))
    }

    /// The bytes of the packed block (None: the table form).
    pub fn packed_bytes(&self) -> Option<usize> {
        match &self.form {
            Form::Packed(p) => Some(p.block_len()),
            Form::Table(_) => None,
        }
    }

    /// Members the table form holds room for without growing (0 packed).
    pub fn capacity(&self) -> usize {
        match &self.form {
            Form::Packed(_) => 0,
            Form::Table(t) => t.members.capacity(),
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.version_of(member).is_some()
    }

    /// The version of the write that last added `member`.
    pub fn version_of(&self, member: &[u8]) -> Option<Version> {
        match &self.form {
            Form::Packed(p) => p.get(member).map(|f| f.version),
            Form::Table(t) => t.members.get(member).copied(),
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        match &self.form {
            Form::Packed(p) => Iter(Members::Packed(p.iter())),
            Form::Table(t) => Iter(Members::Table(t.members.iter())),
        }
    }

    pub fn members(&self) -> impl Iterator<Item = &[u8]> {
        self.iter().map(|(m, _)| m)
    }

    /// The member at position `i` (an arbitrary but stable order between
    /// writes; a scan in the packed form): what SRANDMEMBER and SPOP draw
    /// from.
    pub fn get_index(&self, i: usize) -> Option<(&[u8], Version)> {
        match &self.form {
            Form::Packed(p) => p.iter().nth(i).map(|(m, f)| (m, f.version)),
            Form::Table(t) => t.members.get_index(i).map(|(m, v)| (&m[..], *v)),
        }
    }

    /// Adds `member` at `version` (a member already held takes the newer
    /// of the two versions); true when it is new.
    pub fn add(&mut self, member: &[u8], version: Version) -> bool {
        self.add_within(member, version, set_limits())
    }

    /// [`add`](Self::add) under the thresholds `limits` rather than the
    /// process's.
    pub fn add_within(&mut self, member: &[u8], version: Version, limits: SetLimits) -> bool {
        if let Form::Packed(p) = &mut self.form {
            match p.get(member).map(|f| f.version) {
                Some(held) => {
                    if version > held {
                        p.set(member, b"", version);
                    }
                    return false;
                }
                None => {
                    let fits = member.len() <= limits.max_value
                        && p.payload_len() + member.len() < u32::MAX as usize;
                    if fits && p.len() < limits.max_entries.min(u32::MAX as usize) {
                        return p.set(member, b"", version);
                    }
                    self.make_table();
                }
            }
        }
        let Form::Table(t) = &mut self.form else {
            unreachable!("converted above")
        };
        match t.members.get_mut(member) {
            Some(v) => {
                *v = (*v).max(version);
                false
            }
            None => {
                t.payload += member.len();
                t.members.insert(MapKey::new(member), version);
                true
            }
        }
    }

    /// The table form, from the packed one.
    fn make_table(&mut self) {
        if let Form::Packed(p) = &self.form {
            let mut members = MemberMap::with_capacity_and_hasher(p.len() + 1, Default::default());
            for (m, f) in p.iter() {
                members.insert(MapKey::new(m), f.version);
            }
            let payload = p.payload_len();
            self.form = Form::Table(Box::new(Table { members, payload }));
        }
    }

    /// Gives every member the version `v`.
    pub fn stamp(&mut self, v: Version) {
        match &mut self.form {
            Form::Packed(p) => p.stamp(v),
            Form::Table(t) => {
                for x in t.members.values_mut() {
                    *x = v;
                }
            }
        }
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.form {
            Form::Packed(p) => p.remove(member),
            Form::Table(t) => match t.members.swap_remove_entry(member) {
                Some((m, _)) => {
                    t.payload -= m.len();
                    true
                }
                None => false,
            },
        }
    }

    /// Whether every member is an integer Redis would keep in an intset.
    pub fn all_integers(&self) -> bool {
        self.members().all(is_intset_member)
    }

    /// The length of the longest member.
    pub fn longest(&self) -> usize {
        self.members().map(<[u8]>::len).max().unwrap_or(0)
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

#[cfg(test)]
mod tests;
