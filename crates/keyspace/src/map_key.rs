//! Keys as a partition holds them (its map and its expiry index): up to
//! [`INLINE`] bytes inside the 24-byte key itself, with no heap block of
//! their own; longer keys in one boxed slice. Most keys are short (Redis's
//! own benchmark uses 16-byte keys), and a `Bytes` handle (32 bytes) plus
//! its heap block (32 bytes at glibc's minimum) cost a small key 64 bytes
//! where this costs 24.
//!
//! A key hashes, compares and orders as its bytes (`[u8]`'s impls), so the
//! map is looked up by `&[u8]`.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use bytes::Bytes;

/// Bytes a key may have and still be held inline.
pub const INLINE: usize = 22;

#[derive(Clone)]
pub enum MapKey {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl MapKey {
    pub fn new(key: &[u8]) -> Self {
        if key.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..key.len()].copy_from_slice(key);
            MapKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            MapKey::Heap(key.into())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            MapKey::Inline { len, bytes } => &bytes[..*len as usize],
            MapKey::Heap(b) => b,
        }
    }

    /// The key as a `Bytes` (a copy: changes, replies and replication
    /// carry `Bytes`).
    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_slice())
    }
}

impl Deref for MapKey {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for MapKey {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for MapKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Hash for MapKey {
    /// As `[u8]` hashes, so that the map finds a key by `&[u8]`.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl PartialEq for MapKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for MapKey {}

impl PartialOrd for MapKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MapKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl PartialEq<[u8]> for MapKey {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl fmt::Debug for MapKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Bytes::copy_from_slice(self.as_slice()), f)
    }
}

impl From<&[u8]> for MapKey {
    fn from(key: &[u8]) -> Self {
        MapKey::new(key)
    }
}

impl From<&Bytes> for MapKey {
    fn from(key: &Bytes) -> Self {
        MapKey::new(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash_of<T: Hash + ?Sized>(t: &T) -> u64 {
        let mut h = DefaultHasher::new();
        t.hash(&mut h);
        h.finish()
    }

    #[test]
    fn a_key_is_24_bytes_and_short_ones_are_inline() {
        assert_eq!(std::mem::size_of::<MapKey>(), 24);
        assert!(matches!(MapKey::new(&[7; INLINE]), MapKey::Inline { .. }));
        assert!(matches!(MapKey::new(&[7; INLINE + 1]), MapKey::Heap(_)));
    }

    proptest::proptest! {
        #[test]
        fn a_key_is_its_bytes(a in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
                              b in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let (ka, kb) = (MapKey::new(&a), MapKey::new(&b));
            proptest::prop_assert_eq!(ka.as_slice(), &a[..]);
            proptest::prop_assert_eq!(hash_of(&ka), hash_of(&a[..]));
            proptest::prop_assert_eq!(ka == kb, a == b);
            proptest::prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            proptest::prop_assert_eq!(ka.to_bytes(), Bytes::from(a));
        }
    }
}
