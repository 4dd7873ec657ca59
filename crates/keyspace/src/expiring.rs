//! Which partitions hold keys with a time to live: one bit per partition,
//! set by a partition when its expiry index stops being empty and cleared
//! by active expiry (under the same partition lock) when it finds the index
//! empty. Active expiry visits only marked partitions, so its cost follows
//! the keys with a TTL, not the partition count.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub struct Expiring {
    words: Box<[AtomicU64]>,
}

impl Expiring {
    pub fn new(partitions: usize) -> Self {
        Expiring { words: (0..partitions.div_ceil(64)).map(|_| AtomicU64::new(0)).collect() }
    }

    pub fn mark(&self, p: usize) {
        self.words[p / 64].fetch_or(1 << (p % 64), Ordering::Relaxed);
    }

    /// Call with partition `p` locked and its expiry index empty.
    pub fn clear(&self, p: usize) {
        self.words[p / 64].fetch_and(!(1 << (p % 64)), Ordering::Relaxed);
    }

    /// Marked partitions, from `start` on and wrapping around; a partition
    /// marked during the walk may or may not be seen.
    pub fn marked_from(&self, start: usize) -> Vec<usize> {
        let n = self.words.len() * 64;
        let mut all = Vec::new();
        for (w, word) in self.words.iter().enumerate() {
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                all.push(w * 64 + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
        let split = all.partition_point(|&p| p < start.min(n));
        all.rotate_left(split);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_listed_from_the_cursor_round() {
        let e = Expiring::new(200);
        for p in [3, 64, 130, 199] {
            e.mark(p);
        }
        assert_eq!(e.marked_from(0), vec![3, 64, 130, 199]);
        assert_eq!(e.marked_from(100), vec![130, 199, 3, 64]);
        e.clear(64);
        assert_eq!(e.marked_from(64), vec![130, 199, 3]);
    }
}
