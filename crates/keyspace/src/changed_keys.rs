//! Which keys of a partition changed since its last backup to storage, so
//! an incremental backup writes only those (deletes included: a key that
//! changed and is gone now is written as deleted).
//!
//! The set is *anchored* at a backup: `(backup id, seq)` says it holds every
//! key changed after `seq`, the last seq that backup holds. A partition
//! that was never backed up on this node is not anchored and tracks
//! nothing (no cost). A primary anchors when it takes a backup; its backups
//! anchor at the same point from a marker on the replication stream, so a
//! promoted backup continues the chain. Anything that breaks continuity
//! (the set outgrowing its byte budget, a snapshot replacing the copy)
//! drops the anchor, and the next incremental writes the whole partition:
//! larger, never wrong.

use std::collections::HashMap;

use bytes::Bytes;

/// Bytes one remembered key costs besides its name.
const PER_KEY: usize = 48;

/// `anchor` first: a write reads only it unless a backup anchored the set.
#[derive(Debug, Default)]
#[repr(C)]
pub struct ChangedKeys {
    anchor: Option<(String, u64)>,
    /// Key -> seq of its latest change after the anchor.
    keys: HashMap<Bytes, u64, ahash::RandomState>,
    bytes: usize,
    limit: usize,
}

impl ChangedKeys {
    pub fn new(limit: usize) -> Self {
        ChangedKeys {
            limit,
            ..Default::default()
        }
    }

    /// Notes that `key` changed at `seq` (no-op when not anchored).
    pub fn touch(&mut self, key: &Bytes, seq: u64) {
        if self.anchor.is_none() {
            return;
        }
        match self.keys.get_mut(key) {
            Some(s) => *s = seq,
            None => {
                self.bytes += key.len() + PER_KEY;
                self.keys.insert(key.clone(), seq);
            }
        }
        if self.bytes > self.limit {
            self.drop_anchor();
        }
    }

    /// A backup `id` now holds everything up to `seq`: start over from there.
    pub fn anchor(&mut self, id: &str, seq: u64) {
        self.keys.clear();
        self.bytes = 0;
        self.anchor = (self.limit > 0).then(|| (id.to_string(), seq));
    }

    /// Continuity is lost: the next incremental must copy everything.
    pub fn drop_anchor(&mut self) {
        self.anchor = None;
        self.keys = HashMap::default();
        self.bytes = 0;
    }

    /// The keys changed since backup `id` at `seq`, if this set has been
    /// anchored there ever since; None means "copy the whole partition".
    pub fn since(&self, id: &str, seq: u64) -> Option<impl Iterator<Item = &Bytes>> {
        match &self.anchor {
            Some((a, s)) if a == id && *s == seq => Some(self.keys.keys()),
            _ => None,
        }
    }

    pub fn anchored_at(&self) -> Option<(&str, u64)> {
        self.anchor.as_ref().map(|(id, s)| (id.as_str(), *s))
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn tracks_only_once_anchored_and_only_for_that_anchor() {
        let mut c = ChangedKeys::new(1 << 20);
        c.touch(&b("before"), 1);
        assert!(c.since("b1", 1).is_none());
        c.anchor("b1", 1);
        c.touch(&b("k"), 2);
        c.touch(&b("k"), 3);
        c.touch(&b("j"), 4);
        let mut got: Vec<_> = c.since("b1", 1).unwrap().cloned().collect();
        got.sort();
        assert_eq!(got, vec![b("j"), b("k")]);
        assert!(c.since("b1", 2).is_none(), "another seq is another anchor");
        assert!(c.since("b0", 1).is_none());
        c.anchor("b2", 4);
        assert_eq!(c.since("b2", 4).unwrap().count(), 0);
    }

    #[test]
    fn outgrowing_the_budget_drops_the_anchor() {
        let mut c = ChangedKeys::new(200);
        c.anchor("b1", 0);
        for i in 0..10 {
            c.touch(&b(&format!("key{i}")), i + 1);
        }
        assert!(c.since("b1", 0).is_none());
        assert_eq!(c.bytes(), 0);
        c.touch(&b("x"), 20);
        assert_eq!(c.bytes(), 0, "not anchored: nothing tracked");
    }

    #[test]
    fn a_zero_budget_never_anchors() {
        let mut c = ChangedKeys::new(0);
        c.anchor("b1", 5);
        assert!(c.since("b1", 5).is_none());
    }
}
