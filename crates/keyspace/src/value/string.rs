//! A string value as the keyspace holds it: up to [`StrValue::INLINE`]
//! bytes inside the value itself, longer in a shared buffer.
//!
//! Most stored strings are short (Redis's benchmark writes 3 bytes, a
//! counter is at most 20 digits, a session token a few dozen bytes). Held
//! as a `Bytes` such a string costs the 32-byte handle plus a heap block
//! of at least 32 bytes (glibc's smallest chunk); held inline it costs
//! nothing beside the [`super::Value`] it is in, which stays 40 bytes.
//! Longer strings keep a `Bytes`, so that a reply, a change and a
//! replica's copy share one buffer instead of copying it.

use std::fmt;
use std::ops::Deref;

use bytes::Bytes;

/// A string's bytes, inline when short (see the module docs).
#[derive(Clone)]
pub struct StrValue(Repr);

#[derive(Clone)]
enum Repr {
    Inline {
        len: u8,
        bytes: [u8; StrValue::INLINE],
    },
    Shared(Bytes),
}

impl StrValue {
    /// Bytes a string may have and still be held inline.
    pub const INLINE: usize = 30;

    /// A copy of `s` (inline when it fits).
    pub fn copy(s: &[u8]) -> Self {
        match Self::inline(s) {
            Some(v) => v,
            None => StrValue(Repr::Shared(Bytes::copy_from_slice(s))),
        }
    }

    fn inline(s: &[u8]) -> Option<Self> {
        if s.len() > Self::INLINE {
            return None;
        }
        let mut bytes = [0u8; Self::INLINE];
        bytes[..s.len()].copy_from_slice(s);
        Some(StrValue(Repr::Inline {
            len: s.len() as u8,
            bytes,
        }))
    }

    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..*len as usize],
            Repr::Shared(b) => b,
        }
    }

    /// The string as a `Bytes`: the shared buffer itself for a long one,
    /// a copy of a short one.
    pub fn to_bytes(&self) -> Bytes {
        match &self.0 {
            Repr::Inline { .. } => Bytes::copy_from_slice(self.as_bytes()),
            Repr::Shared(b) => b.clone(),
        }
    }

    /// Whether the string is held inline (no heap block of its own).
    pub fn is_inline(&self) -> bool {
        matches!(self.0, Repr::Inline { .. })
    }

    /// Heap bytes the string holds beside the value (0 inline).
    pub fn heap_len(&self) -> usize {
        match &self.0 {
            Repr::Inline { .. } => 0,
            Repr::Shared(b) => b.len(),
        }
    }
}

impl Default for StrValue {
    fn default() -> Self {
        StrValue::copy(b"")
    }
}

impl From<Bytes> for StrValue {
    /// A short string is copied inline (the `Bytes` may point into a
    /// request or a batch that must not be kept alive); a long one is kept.
    fn from(b: Bytes) -> Self {
        match Self::inline(&b) {
            Some(v) => v,
            None => StrValue(Repr::Shared(b)),
        }
    }
}

impl From<Vec<u8>> for StrValue {
    fn from(v: Vec<u8>) -> Self {
        match Self::inline(&v) {
            Some(s) => s,
            None => StrValue(Repr::Shared(Bytes::from(v))),
        }
    }
}

impl From<&[u8]> for StrValue {
    fn from(s: &[u8]) -> Self {
        StrValue::copy(s)
    }
}

impl<const N: usize> From<&[u8; N]> for StrValue {
    fn from(s: &[u8; N]) -> Self {
        StrValue::copy(s)
    }
}

impl Deref for StrValue {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for StrValue {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for StrValue {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for StrValue {}

impl PartialEq<[u8]> for StrValue {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_bytes() == other
    }
}

impl fmt::Debug for StrValue {
    /// As `Bytes` prints: `b"..."`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Bytes::copy_from_slice(self.as_bytes()), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_strings_are_inline_and_long_ones_share_their_buffer() {
        let short = StrValue::from(Bytes::from_static(b"value:0000000001"));
        assert!(short.is_inline());
        assert_eq!(short.heap_len(), 0);
        assert_eq!(&short[..], b"value:0000000001");

        let edge = StrValue::copy(&[b'x'; StrValue::INLINE]);
        assert!(edge.is_inline());
        assert_eq!(edge.len(), StrValue::INLINE);

        let long = Bytes::from(vec![b'y'; StrValue::INLINE + 1]);
        let held = StrValue::from(long.clone());
        assert!(!held.is_inline());
        assert_eq!(held.to_bytes().as_ptr(), long.as_ptr(), "no copy");
        assert_eq!(held, StrValue::copy(&long));
        assert_eq!(StrValue::default().len(), 0);
    }

    #[test]
    fn a_value_with_an_inline_string_stays_40_bytes() {
        assert!(std::mem::size_of::<StrValue>() <= 40);
        assert!(std::mem::size_of::<super::super::Value>() <= 40);
        assert!(std::mem::size_of::<super::super::Entry>() <= 64);
    }
}
