//! A list: its elements in order, each a [`StrValue`] (inline up to 30
//! bytes, so a list of short elements costs 32 bytes per element and no
//! block of its own), in a ring buffer so that pushes and pops at both ends
//! are O(1) and an index is found without walking.
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

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListValue {
    items: VecDeque<StrValue>,
    /// Bytes of the elements, kept on every change.
    payload: usize,
}

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
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Bytes of the elements.
    pub fn payload_len(&self) -> usize {
        self.payload
    }

    /// The element at `i` (from the head, 0-based).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.items.get(i).map(|s| s.as_bytes())
    }

    /// The elements from head to tail.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator + '_ {
        self.items.iter().map(|s| s.as_bytes())
    }

    /// The elements `start..end` (clamped to the list).
    pub fn range(&self, start: usize, end: usize) -> impl DoubleEndedIterator<Item = &[u8]> + '_ {
        let end = end.min(self.items.len());
        let start = start.min(end);
        self.items.range(start..end).map(|s| s.as_bytes())
    }

    /// The element at `i` as a `Bytes` (shared for a long one).
    pub fn get_bytes(&self, i: usize) -> Option<Bytes> {
        self.items.get(i).map(StrValue::to_bytes)
    }

    pub fn push_back(&mut self, e: &[u8]) {
        self.payload += e.len();
        self.items.push_back(StrValue::copy(e));
    }

    /// Room for elements the ring buffer has (used or not).
    pub fn capacity(&self) -> usize {
        self.items.capacity()
    }

    /// Heap bytes of the elements past the 30 each holds inline.
    pub fn elements_heap(&self) -> usize {
        self.items
            .iter()
            .filter(|s| !s.is_inline())
            .map(|s| crate::memory::chunk(s.len()))
            .sum()
    }

    /// Applies `edits` in order. On error (an edit out of range) the list
    /// is unchanged.
    pub fn apply(&mut self, edits: &[Edit]) -> Result<(), OutOfRange> {
        // Checked first, so that a bad edit changes nothing.
        if !self.fits(edits) {
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
        edits.iter().try_fold(self.items.len(), |len, e| {
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
        for s in self.items.drain(at..at + remove) {
            self.payload -= s.len();
        }
        self.payload += e.insert.iter().map(Bytes::len).sum::<usize>();
        let new = e.insert.iter().map(|b| StrValue::from(b.clone()));
        if at == 0 {
            // At the head: pushed in reverse, so insert[0] ends first.
            let new: Vec<StrValue> = new.collect();
            for s in new.into_iter().rev() {
                self.items.push_front(s);
            }
        } else if at == self.items.len() {
            self.items.extend(new);
        } else {
            let tail: Vec<StrValue> = self.items.drain(at..).collect();
            self.items.extend(new);
            self.items.extend(tail);
        }
        if self.items.capacity() > 64 && self.items.len() < self.items.capacity() / 4 {
            self.items.shrink_to(self.items.len() * 2);
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
        l.apply(&[edit(0, 0, &["x", "y"])]).unwrap();
        assert_eq!(items(&l), [&b"x"[..], b"y", b"a", b"b"]);
        l.apply(&[edit(4, 0, &["z"]), edit(1, 2, &[])]).unwrap();
        assert_eq!(items(&l), [&b"x"[..], b"b", b"z"]);
        l.apply(&[edit(1, 1, &["long element of more than thirty bytes"])])
            .unwrap();
        assert_eq!(
            l.get(1),
            Some(&b"long element of more than thirty bytes"[..])
        );
        assert_eq!(l.payload_len(), 1 + 38 + 1);
        assert!(l.elements_heap() > 0);
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
}
