//! A list, in one of two forms:
//!
//! - **packed** while its elements take at most [`PACKED_MAX`] bytes: each
//!   element as a varint length and its bytes, one after the other in one
//!   block (as Redis's listpack): a 10-byte element costs 11 bytes;
//! - **ring** past that: a ring buffer of [`StrValue`]s (inline up to 30
//!   bytes, so 32 bytes an element and no block of its own for short
//!   ones), where pushes and pops at both ends are O(1) and an index is
//!   found without walking. A list does not go back to the packed form.
//!
//! A list changes by [`Edit`]s: remove `remove` elements at `at`, then
//! insert `insert` there. Every list command is a sequence of them made
//! against the list it read (LPUSH inserts at 0, RPOP removes at the end,
//! LTRIM removes both ends, LREM removes one element at a time), so the
//! partition log, replicas, backups and other sites carry the edits, not
//! the list. An edit names positions, so it applies only to the exact
//! version it was made on (`DeltaOp::ListEdit` needs its base): a copy
//! holding another version asks for the whole list.

use std::collections::VecDeque;

use bytes::Bytes;

use super::StrValue;
use crate::memory::chunk;

/// The most bytes the packed form holds (varint lengths included).
pub const PACKED_MAX: usize = 4096;

/// One edit of a list: `remove` elements from index `at`, then `insert`
/// at `at` (in the order given: `insert[0]` ends at `at`).
#[derive(Clone, Debug, PartialEq)]
pub struct Edit {
    pub at: u32,
    pub remove: u32,
    pub insert: Vec<Bytes>,
}

/// An edit that does not fit the list (an index past its end).
#[derive(Debug, PartialEq, Eq)]
pub struct OutOfRange;

#[derive(Clone, Debug)]
pub struct ListValue {
    repr: Repr,
    /// Bytes of the elements, kept on every change.
    payload: usize,
}

#[derive(Clone, Debug, PartialEq)]
enum Repr {
    Packed { buf: Vec<u8>, len: u32 },
    Ring(VecDeque<StrValue>),
}

impl PartialEq for ListValue {
    /// The same elements in the same order, whatever the form.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Default for ListValue {
    fn default() -> Self {
        ListValue {
            repr: Repr::Packed {
                buf: Vec::new(),
                len: 0,
            },
            payload: 0,
        }
    }
}

/// Appends `e` to a packed buffer.
fn put(buf: &mut Vec<u8>, e: &[u8]) {
    let mut n = e.len() as u64;
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            buf.push(byte);
            break;
        }
        buf.push(byte | 0x80);
    }
    buf.extend_from_slice(e);
}

/// Bytes `e` takes packed.
fn packed_len(e: &[u8]) -> usize {
    let mut n = e.len() as u64;
    let mut bytes = 1;
    while n >= 0x80 {
        n >>= 7;
        bytes += 1;
    }
    bytes + e.len()
}

/// The element at `pos` of a packed buffer the list wrote itself, and
/// where the next one starts.
fn read(buf: &[u8], mut pos: usize) -> (&[u8], usize) {
    let (mut n, mut shift) = (0usize, 0);
    loop {
        let b = buf[pos];
        pos += 1;
        n |= ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b < 0x80 {
            break;
        }
    }
    (&buf[pos..pos + n], pos + n)
}

/// The offset of element `i` of a packed buffer (`buf.len()` for the end).
fn offset(buf: &[u8], i: usize) -> usize {
    let mut pos = 0;
    for _ in 0..i {
        pos = read(buf, pos).1;
    }
    pos
}

/// The elements of a list, from head to tail.
pub enum Iter<'a> {
    Packed(std::vec::IntoIter<&'a [u8]>),
    Ring(std::collections::vec_deque::Iter<'a, StrValue>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Iter::Packed(i) => i.next(),
            Iter::Ring(i) => i.next().map(StrValue::as_bytes),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Packed(i) => i.size_hint(),
            Iter::Ring(i) => i.size_hint(),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Packed(i) => i.next_back(),
            Iter::Ring(i) => i.next_back().map(StrValue::as_bytes),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl ListValue {
    pub fn new() -> Self {
        Self::default()
    }

    /// A list holding `items` in order.
    pub fn from_items<I, T>(items: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        let mut l = ListValue::new();
        for i in items {
            l.push_back(i.as_ref());
        }
        l
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Packed { len, .. } => *len as usize,
            Repr::Ring(items) => items.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the elements.
    pub fn payload_len(&self) -> usize {
        self.payload
    }

    /// Whether the list is in its packed form.
    pub fn is_packed(&self) -> bool {
        matches!(self.repr, Repr::Packed { .. })
    }

    /// The element at `i` (from the head, 0-based).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        match &self.repr {
            Repr::Packed { buf, len } => (i < *len as usize).then(|| read(buf, offset(buf, i)).0),
            Repr::Ring(items) => items.get(i).map(StrValue::as_bytes),
        }
    }

    /// The elements from head to tail.
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Packed { buf, len } => {
                let mut all = Vec::with_capacity(*len as usize);
                let mut pos = 0;
                while pos < buf.len() {
                    let (e, next) = read(buf, pos);
                    all.push(e);
                    pos = next;
                }
                Iter::Packed(all.into_iter())
            }
            Repr::Ring(items) => Iter::Ring(items.iter()),
        }
    }

    /// The elements `start..end` (clamped to the list).
    pub fn range(&self, start: usize, end: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let end = end.min(self.len());
        let start = start.min(end);
        self.iter().skip(start).take(end - start)
    }

    /// The element at `i` as a `Bytes` (shared for a long one).
    pub fn get_bytes(&self, i: usize) -> Option<Bytes> {
        match &self.repr {
            Repr::Packed { .. } => self.get(i).map(Bytes::copy_from_slice),
            Repr::Ring(items) => items.get(i).map(StrValue::to_bytes),
        }
    }

    pub fn push_back(&mut self, e: &[u8]) {
        self.payload += e.len();
        match &mut self.repr {
            Repr::Packed { buf, len } => {
                put(buf, e);
                *len += 1;
            }
            Repr::Ring(items) => items.push_back(StrValue::copy(e)),
        }
        self.unpack_if_large();
    }

    /// Heap bytes the list's elements take beside the boxed list: the
    /// packed block, or the ring buffer's room (used or not) and a block
    /// per element past the 30 bytes each holds inline.
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Packed { buf, .. } => chunk(buf.capacity()),
            Repr::Ring(items) => {
                chunk(items.capacity() * std::mem::size_of::<StrValue>())
                    + items
                        .iter()
                        .filter(|s| !s.is_inline())
                        .map(|s| chunk(s.len()))
                        .sum::<usize>()
            }
        }
    }

    /// Applies `edits` in order. On error (an edit out of range) the list
    /// is unchanged.
    pub fn apply(&mut self, edits: &[Edit]) -> Result<(), OutOfRange> {
        // Checked first, so that a bad edit changes nothing.
        if self.len_after(edits).is_none() {
            return Err(OutOfRange);
        }
        for e in edits {
            self.edit(e);
        }
        Ok(())
    }

    /// The length the list has after `edits`, applied in order (None: an
    /// edit reaches past the list's end).
    pub fn len_after(&self, edits: &[Edit]) -> Option<usize> {
        edits.iter().try_fold(self.len(), |len, e| {
            let (at, remove) = (e.at as usize, e.remove as usize);
            (at <= len && remove <= len - at).then(|| len - remove + e.insert.len())
        })
    }

    /// Whether `edits` fit the list and leave at least one element.
    pub fn fits(&self, edits: &[Edit]) -> bool {
        self.len_after(edits).is_some_and(|n| n > 0)
    }

    fn edit(&mut self, e: &Edit) {
        let (at, remove) = (e.at as usize, e.remove as usize);
        let inserted: usize = e.insert.iter().map(Bytes::len).sum();
        match &mut self.repr {
            Repr::Packed { buf, len } => {
                let start = offset(buf, at);
                let mut end = start;
                for _ in 0..remove {
                    let (gone, next) = read(buf, end);
                    self.payload -= gone.len();
                    end = next;
                }
                let mut new = Vec::with_capacity(e.insert.iter().map(|b| packed_len(b)).sum());
                for b in &e.insert {
                    put(&mut new, b);
                }
                let grown = (buf.len() + new.len()).saturating_sub(end - start);
                buf.reserve_exact(grown.saturating_sub(buf.len()));
                buf.splice(start..end, new);
                *len = (*len as usize - remove + e.insert.len()) as u32;
                if buf.capacity() > 2 * buf.len() + 64 {
                    buf.shrink_to_fit();
                }
            }
            Repr::Ring(items) => {
                for s in items.drain(at..at + remove) {
                    self.payload -= s.len();
                }
                let new = e.insert.iter().map(|b| StrValue::from(b.clone()));
                if at == items.len() {
                    items.extend(new);
                } else if at == 0 {
                    // At the head: pushed in reverse, so insert[0] ends first.
                    let new: Vec<StrValue> = new.collect();
                    items.reserve(new.len());
                    for s in new.into_iter().rev() {
                        items.push_front(s);
                    }
                } else {
                    let tail: Vec<StrValue> = items.drain(at..).collect();
                    items.extend(new);
                    items.extend(tail);
                }
                if items.capacity() > 64 && items.len() < items.capacity() / 4 {
                    items.shrink_to(items.len() * 2);
                }
            }
        }
        self.payload += inserted;
        self.unpack_if_large();
    }

    /// Past [`PACKED_MAX`] packed bytes, the ring form.
    fn unpack_if_large(&mut self) {
        if let Repr::Packed { buf, .. } = &self.repr {
            if buf.len() > PACKED_MAX {
                let items: VecDeque<StrValue> = self.iter().map(StrValue::copy).collect();
                self.repr = Repr::Ring(items);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(l: &ListValue) -> Vec<&[u8]> {
        l.iter().collect()
    }

    fn edit(at: u32, remove: u32, insert: &[&str]) -> Edit {
        Edit {
            at,
            remove,
            insert: insert.iter().map(|s| Bytes::from(s.to_string())).collect(),
        }
    }

    #[test]
    fn edits_insert_remove_and_keep_the_payload() {
        let mut l = ListValue::from_items(["a", "b"]);
        assert!(l.is_packed());
        l.apply(&[edit(0, 0, &["x", "y"])]).unwrap();
        assert_eq!(items(&l), [&b"x"[..], b"y", b"a", b"b"]);
        l.apply(&[edit(4, 0, &["z"]), edit(1, 2, &[])]).unwrap();
        assert_eq!(items(&l), [&b"x"[..], b"b", b"z"]);
        let long = "long element of more than 127 bytes ".repeat(5);
        l.apply(&[edit(1, 1, &[&long])]).unwrap();
        assert_eq!(l.get(1), Some(long.as_bytes()));
        assert_eq!(l.get(3), None);
        assert_eq!(l.payload_len(), 1 + long.len() + 1);
        assert_eq!(l.iter().next_back(), Some(&b"z"[..]));
    }

    #[test]
    fn an_edit_out_of_range_changes_nothing() {
        let mut l = ListValue::from_items(["a", "b"]);
        assert_eq!(
            l.apply(&[edit(0, 1, &[]), edit(2, 0, &["c"])]),
            Err(OutOfRange)
        );
        assert_eq!(l.apply(&[edit(1, 2, &[])]), Err(OutOfRange));
        assert_eq!(items(&l), [&b"a"[..], b"b"]);
    }

    /// The two forms give the same list for the same edits, across the
    /// change of form.
    #[test]
    fn both_forms_agree_and_a_large_list_leaves_the_packed_form() {
        let mut packed = ListValue::new();
        let mut model: Vec<Vec<u8>> = Vec::new();
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for step in 0..3000u64 {
            let len = model.len() as u64;
            let at = next(len + 1) as usize;
            let remove = next((len - at as u64).min(2) + 1) as usize;
            let insert: Vec<Bytes> = (0..next(4))
                .map(|i| Bytes::from(vec![b'a' + (step % 26) as u8; (next(40) + i) as usize]))
                .collect();
            let e = Edit {
                at: at as u32,
                remove: remove as u32,
                insert: insert.clone(),
            };
            packed.apply(&[e]).unwrap();
            model.splice(at..at + remove, insert.iter().map(|b| b.to_vec()));
            assert_eq!(packed.len(), model.len());
            if step % 97 == 0 {
                let held: Vec<Vec<u8>> = packed.iter().map(<[u8]>::to_vec).collect();
                assert_eq!(held, model, "step {step}");
                let payload: usize = model.iter().map(Vec::len).sum();
                assert_eq!(packed.payload_len(), payload);
            }
        }
        assert!(!packed.is_packed(), "grew past the packed form");
        let held: Vec<Vec<u8>> = packed.iter().map(<[u8]>::to_vec).collect();
        assert_eq!(held, model);
    }
}
