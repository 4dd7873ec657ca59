//! The receiver's applied watermarks: per publisher (source site and the
//! publisher process's incarnation, see [`crate::wire::Hello`]), the
//! highest seq applied through this node per source partition. A re-sent
//! entry at or below its mark is skipped, and a reconnecting publisher is
//! told the marks in the welcome so it need not re-send at all.
//!
//! Skipping is an economy: a re-applied change is a Duplicate by version
//! anyway. So the marks are bounded: a source site's publishers restart
//! with new incarnations, and past [`PUBLISHERS_PER_SITE`] the marks of
//! the one that went longest without a batch are forgotten (its process
//! is most likely gone; if not, it re-sends and the versions dedupe).

use std::collections::HashMap;

/// Publishers of one source site whose marks are kept. Each holds at most
/// one mark per source partition (16,384 at most), so a site's marks stay
/// under a few MiB whatever its nodes' restarts.
pub const PUBLISHERS_PER_SITE: usize = 32;

#[derive(Debug, Default)]
pub struct Watermarks {
    by_publisher: HashMap<(u16, u64), Marks>,
    /// Ticks at each use, to find the publisher used longest ago.
    clock: u64,
}

#[derive(Debug, Default)]
struct Marks {
    seqs: HashMap<u16, u64>,
    used: u64,
}

impl Watermarks {
    /// The highest seq applied from `partition` of publisher `(source, inc)`.
    pub fn get(&self, source: u16, inc: u64, partition: u16) -> Option<u64> {
        self.by_publisher
            .get(&(source, inc))
            .and_then(|m| m.seqs.get(&partition).copied())
    }

    /// Every mark of publisher `(source, inc)`, for its welcome.
    pub fn of(&self, source: u16, inc: u64) -> Vec<(u16, u64)> {
        self.by_publisher
            .get(&(source, inc))
            .map_or_else(Vec::new, |m| m.seqs.iter().map(|(&p, &s)| (p, s)).collect())
    }

    /// Raises the marks of publisher `(source, inc)` to the (partition,
    /// seq) given. A batch with no log entries (full values only) raises
    /// nothing and does not count as the publisher's use: it neither adds
    /// a publisher nor makes one forgotten.
    pub fn raise(&mut self, source: u16, inc: u64, seqs: impl IntoIterator<Item = (u16, u64)>) {
        let mut seqs = seqs.into_iter().peekable();
        if seqs.peek().is_none() {
            return;
        }
        self.clock += 1;
        let used = self.clock;
        if !self.by_publisher.contains_key(&(source, inc)) {
            self.make_room(source);
        }
        let marks = self.by_publisher.entry((source, inc)).or_default();
        marks.used = used;
        for (partition, seq) in seqs {
            let m = marks.seqs.entry(partition).or_insert(0);
            *m = (*m).max(seq);
        }
    }

    /// Forgets the marks of `source`'s least recently used publisher if
    /// it has [`PUBLISHERS_PER_SITE`].
    fn make_room(&mut self, source: u16) {
        let of_source = self.by_publisher.iter().filter(|((s, _), _)| *s == source);
        if of_source.clone().count() < PUBLISHERS_PER_SITE {
            return;
        }
        if let Some(&oldest) = of_source.min_by_key(|(_, m)| m.used).map(|(k, _)| k) {
            self.by_publisher.remove(&oldest);
        }
    }

    /// Publishers whose marks are kept.
    pub fn publishers(&self) -> usize {
        self.by_publisher.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_only_rise_and_are_kept_per_publisher() {
        let mut w = Watermarks::default();
        w.raise(1, 7, [(3, 10), (3, 4)]);
        w.raise(1, 8, [(3, 2)]);
        assert_eq!(w.get(1, 7, 3), Some(10));
        assert_eq!(w.get(1, 8, 3), Some(2));
        assert_eq!(w.get(2, 7, 3), None);
        assert_eq!(w.of(1, 7), vec![(3, 10)]);
    }

    /// Restarted publishers come with new incarnations: a site's marks
    /// stay bounded, and the publisher that went longest without a batch
    /// is the one forgotten.
    #[test]
    fn a_site_keeps_the_marks_of_its_most_recent_publishers() {
        let mut w = Watermarks::default();
        for inc in 0..PUBLISHERS_PER_SITE as u64 {
            w.raise(1, inc, [(0, 1)]);
        }
        w.raise(2, 99, [(0, 1)]); // another site's publisher counts apart
        w.raise(1, 0, [(0, 2)]); // publisher 0 is still at work
        w.raise(1, 1000, [(0, 1)]);
        assert_eq!(w.publishers(), PUBLISHERS_PER_SITE + 1);
        assert_eq!(w.get(1, 0, 0), Some(2));
        assert_eq!(w.get(1, 1, 0), None, "the least recently used is forgotten");
        assert_eq!(w.get(2, 99, 0), Some(1));
        assert_eq!(w.get(1, 1000, 0), Some(1));
        // A batch of full values only, from yet another publisher.
        w.raise(1, 2000, []);
        assert_eq!(w.publishers(), PUBLISHERS_PER_SITE + 1);
        assert_eq!(w.get(1, 2, 0), Some(1), "nothing forgotten for it");
    }
}
