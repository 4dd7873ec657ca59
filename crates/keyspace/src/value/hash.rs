//! A hash value in one of two forms, as Redis keeps them: packed (every
//! field in one block, see [`hash_pack`]) while it is
//! small, a table (a map of fields) once it has more fields than
//! `hash-max-listpack-entries` or a name or value longer than
//! `hash-max-listpack-value` ([`crate::encodings::hash_limits`]). A hash
//! never goes back to the packed form (neither does Redis's).

use bytes::Bytes;
use indexmap::IndexMap;

pub use super::hash_pack::FieldRef;
use super::hash_pack::{self, Packed};
use super::CounterValue;
use crate::encodings::{hash_limits, HashLimits};
use crate::version::Version;

pub type FieldMap = IndexMap<Bytes, Field, ahash::RandomState>;

/// A field of a hash in its table form.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub value: Bytes,
    pub version: Version,
}

impl FieldRef<'_> {
    /// An owned copy.
    pub fn to_field(&self) -> Field {
        Field {
            value: Bytes::copy_from_slice(self.value),
            version: self.version,
        }
    }
}

/// The table form: fields by name, and the bytes of their names and values.
#[derive(Clone, Debug)]
struct Table {
    fields: FieldMap,
    payload: usize,
}

#[derive(Clone, Debug)]
enum Form {
    Packed(Packed),
    Table(Box<Table>),
}

#[derive(Clone, Debug)]
pub struct HashValue {
    form: Form,
    /// The fields HINCRBY made merging counters (only where partitions
    /// merge with other sites): field -> its counter state, whose text is
    /// the field's value.
    counter_states: Option<Box<CounterMap>>,
}

type CounterMap = IndexMap<Bytes, CounterValue, ahash::RandomState>;

impl Default for HashValue {
    fn default() -> Self {
        HashValue {
            form: Form::Packed(Packed::default()),
            counter_states: None,
        }
    }
}

impl PartialEq for HashValue {
    /// Equal when they hold the same fields (and counter states), whatever
    /// the insertion order or the form.
    fn eq(&self, other: &Self) -> bool {
        super::same_states(&self.counter_states, &other.counter_states)
            && self.len() == other.len()
            && self.iter().all(|(k, f)| other.get(k) == Some(f))
    }
}

/// The fields of a hash, in either form.
pub struct Iter<'a>(Fields<'a>);

enum Fields<'a> {
    Packed(hash_pack::Iter<'a>),
    Table(indexmap::map::Iter<'a, Bytes, Field>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], FieldRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Fields::Packed(i) => i.next(),
            Fields::Table(i) => i.next().map(|(n, f)| (&n[..], table_ref(f))),
        }
    }
}

fn table_ref(f: &Field) -> FieldRef<'_> {
    FieldRef {
        value: &f.value,
        version: f.version,
    }
}

impl HashValue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        match &self.form {
            Form::Packed(p) => p.len(),
            Form::Table(t) => t.fields.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn payload_len(&self) -> usize {
        match &self.form {
            Form::Packed(p) => p.payload_len(),
            Form::Table(t) => t.payload,
        }
    }

    /// Whether the fields are packed in one block (Redis's `listpack`
    /// encoding), else in a table (`hashtable`).
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

    /// Fields the table form holds room for without growing (0 packed).
    pub fn capacity(&self) -> usize {
        match &self.form {
            Form::Packed(_) => 0,
            Form::Table(t) => t.fields.capacity(),
        }
    }

    /// The length of the longest field name or value.
    pub fn longest(&self) -> usize {
        match &self.form {
            Form::Packed(p) => p.longest(),
            Form::Table(t) => t
                .fields
                .iter()
                .map(|(f, v)| f.len().max(v.value.len()))
                .max()
                .unwrap_or(0),
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<FieldRef<'_>> {
        match &self.form {
            Form::Packed(p) => p.get(field),
            Form::Table(t) => t.fields.get(field).map(table_ref),
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        match &self.form {
            Form::Packed(p) => Iter(Fields::Packed(p.iter())),
            Form::Table(t) => Iter(Fields::Table(t.fields.iter())),
        }
    }

    /// The `i`th field (a scan in the packed form).
    pub fn get_index(&self, i: usize) -> Option<(&[u8], FieldRef<'_>)> {
        match &self.form {
            Form::Packed(p) => p.iter().nth(i),
            Form::Table(t) => t.fields.get_index(i).map(|(n, f)| (&n[..], table_ref(f))),
        }
    }

    /// Sets a field; returns true when the field is new.
    pub fn set(&mut self, name: Bytes, value: Bytes, version: Version) -> bool {
        self.set_ref(&name, value, version)
    }

    /// [`set`](Self::set), cloning the name only when the field is new.
    pub fn set_ref(&mut self, name: &Bytes, value: Bytes, version: Version) -> bool {
        self.set_within(name, value, version, hash_limits())
    }

    /// [`set_ref`](Self::set_ref) under the thresholds `limits` rather than
    /// the process's.
    pub fn set_within(
        &mut self,
        name: &Bytes,
        value: Bytes,
        version: Version,
        limits: HashLimits,
    ) -> bool {
        if let Form::Packed(p) = &mut self.form {
            let fits = name.len() <= limits.max_value
                && value.len() <= limits.max_value
                && p.payload_len() + name.len() + value.len() < u32::MAX as usize;
            let room = p.len() < limits.max_entries.min(u32::MAX as usize) || p.get(name).is_some();
            if fits && room {
                return p.set(name, &value, version);
            }
            self.make_table();
        }
        let Form::Table(t) = &mut self.form else {
            unreachable!("converted above")
        };
        t.payload += value.len();
        match t.fields.get_mut(name) {
            Some(f) => {
                t.payload -= f.value.len();
                *f = Field { value, version };
                false
            }
            None => {
                t.payload += name.len();
                t.fields.insert(name.clone(), Field { value, version });
                true
            }
        }
    }

    /// The table form, from the packed one.
    fn make_table(&mut self) {
        if let Form::Packed(p) = &self.form {
            let mut fields = FieldMap::with_capacity_and_hasher(p.len() + 1, Default::default());
            for (n, f) in p.iter() {
                fields.insert(Bytes::copy_from_slice(n), f.to_field());
            }
            let payload = p.payload_len();
            self.form = Form::Table(Box::new(Table { fields, payload }));
        }
    }

    /// Gives every field the version `v`.
    pub fn stamp(&mut self, v: Version) {
        match &mut self.form {
            Form::Packed(p) => p.stamp(v),
            Form::Table(t) => {
                for f in t.fields.values_mut() {
                    f.version = v;
                }
            }
        }
    }

    pub fn remove(&mut self, name: &[u8]) -> bool {
        self.drop_counter(name);
        match &mut self.form {
            Form::Packed(p) => p.remove(name),
            Form::Table(t) => match t.fields.swap_remove_entry(name) {
                Some((k, f)) => {
                    t.payload -= k.len() + f.value.len();
                    true
                }
                None => false,
            },
        }
    }

    /// The counter state of field `name`, if HINCRBY made it one.
    pub fn counter(&self, name: &[u8]) -> Option<&CounterValue> {
        self.counter_states.as_ref()?.get(name)
    }

    /// Every counter state, in no order.
    pub fn counters(&self) -> impl Iterator<Item = (&Bytes, &CounterValue)> {
        self.counter_states.iter().flat_map(|m| m.iter())
    }

    /// Field `name` is a plain value again (HSET wrote it whole).
    pub fn drop_counter(&mut self, name: &[u8]) {
        if let Some(m) = &mut self.counter_states {
            m.swap_remove(name);
            if m.is_empty() {
                self.counter_states = None;
            }
        }
    }

    /// Field `name` becomes (or stays) the counter `c`: its value is the
    /// counter's text, at `version`.
    pub fn set_counter(&mut self, name: &Bytes, c: CounterValue, version: Version) {
        self.set_ref(name, c.text().clone(), version);
        self.counter_states
            .get_or_insert_with(Default::default)
            .insert(name.clone(), c);
    }

    /// A removal at `v` of a hash written since: its counter fields lose
    /// what is older than `v` (their values follow).
    pub fn prune_counters(&mut self, v: Version) {
        let names: Vec<Bytes> = self
            .counters()
            .filter(|(_, c)| c.has_older_than(v))
            .map(|(n, _)| n.clone())
            .collect();
        for n in names {
            if let (Some(c), Some(f)) = (self.counter(&n), self.get(&n)) {
                let (mut c, at) = (c.clone(), f.version);
                c.prune_older(v);
                self.set_counter(&n, c, at);
            }
        }
    }

    /// Bytes the counter states take, for memory accounting.
    pub fn counters_len(&self) -> usize {
        self.counters().map(|(k, c)| k.len() + c.state_len()).sum()
    }
}

#[cfg(test)]
mod tests;
