//! Values held by the keyspace. A hash field carries its own version so that
//! field deltas from backups or remote sites merge field by field without a
//! base check. Sizes are tracked incrementally so that deciding whether a
//! delta is worth it, and reporting memory, never walks a whole value.

use bytes::Bytes;
use indexmap::IndexMap;

use crate::version::Version;

pub type FieldMap = IndexMap<Bytes, Field, ahash::RandomState>;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Bytes),
    Hash(HashValue),
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
        }
    }

    /// Payload bytes (strings: length; hashes: fields plus values).
    pub fn payload_len(&self) -> usize {
        match self {
            Value::Str(b) => b.len(),
            Value::Hash(h) => h.payload_len(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub value: Bytes,
    pub version: Version,
}

#[derive(Clone, Debug, Default)]
pub struct HashValue {
    fields: FieldMap,
    payload: usize,
}

impl PartialEq for HashValue {
    /// Equal when they hold the same fields, whatever the insertion order.
    fn eq(&self, other: &Self) -> bool {
        self.fields.len() == other.fields.len()
            && self.fields.iter().all(|(k, v)| other.fields.get(k) == Some(v))
    }
}

impl HashValue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub fn payload_len(&self) -> usize {
        self.payload
    }

    pub fn get(&self, field: &[u8]) -> Option<&Field> {
        self.fields.get(field)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Field)> {
        self.fields.iter()
    }

    pub fn get_index(&self, i: usize) -> Option<(&Bytes, &Field)> {
        self.fields.get_index(i)
    }

    /// Sets a field; returns true when the field is new.
    pub fn set(&mut self, name: Bytes, value: Bytes, version: Version) -> bool {
        self.payload += value.len();
        match self.fields.get_mut(&name) {
            Some(f) => {
                self.payload -= f.value.len();
                *f = Field { value, version };
                false
            }
            None => {
                self.payload += name.len();
                self.fields.insert(name, Field { value, version });
                true
            }
        }
    }

    pub fn remove(&mut self, name: &[u8]) -> bool {
        match self.fields.swap_remove_entry(name) {
            Some((k, f)) => {
                self.payload -= k.len() + f.value.len();
                true
            }
            None => false,
        }
    }
}

/// One key's value, version and expiry (absolute ms since epoch, 0 = none).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub value: Value,
    pub version: Version,
    pub expire_at: u64,
}

impl Entry {
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }

    pub fn as_str(&self) -> Option<&Bytes> {
        match &self.value {
            Value::Str(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_hash(&self) -> Option<&HashValue> {
        match &self.value {
            Value::Hash(h) => Some(h),
            _ => None,
        }
    }

    /// Rough bytes this entry costs in memory, for the partition's accounting.
    pub fn footprint(&self, key_len: usize) -> usize {
        const ENTRY_OVERHEAD: usize = 64;
        const FIELD_OVERHEAD: usize = 48;
        let fields = match &self.value {
            Value::Hash(h) => h.len() * FIELD_OVERHEAD,
            Value::Str(_) => 0,
        };
        ENTRY_OVERHEAD + key_len + self.value.payload_len() + fields
    }
}
