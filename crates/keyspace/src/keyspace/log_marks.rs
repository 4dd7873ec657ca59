//! Where each partition's log may let changes go: the lowest seq a
//! consumer (WAN) needs and the seq before which every remote site applied
//! the changes, kept per partition in `LogMarks`. Both move without the
//! partition's lock (an acknowledgement or a marker must not cost a cold
//! lock per partition) and the log catches up with them the next time the
//! partition is locked to log a change or read its log.

use std::sync::atomic::Ordering;

use super::Keyspace;
use crate::partition::Partition;

impl Keyspace {
    /// Tells partition `p`'s log the lowest seq a consumer (WAN) still
    /// needs, None when nobody does; see [`crate::PartitionLog::set_needed_from`].
    pub fn set_log_needed_from(&self, p: usize, seq: Option<u64>) {
        if let Some(part) = self.parts.get(p) {
            let mut part = part.lock();
            self.log_marks[p]
                .needed
                .store(seq.unwrap_or(0), Ordering::SeqCst);
            part.log.set_needed_from(seq);
        }
    }

    /// Moves partition `p`'s lowest needed seq forward to what `low`
    /// computes, without locking the partition (an acknowledgement must not
    /// cost a cold lock per partition it covers): its log trims the next
    /// time the partition is locked to log a change or read the log. Never
    /// registers a consumer nor moves back; that takes
    /// [`Keyspace::set_log_needed_from`]. `low` is computed after the current
    /// value is read, so a lower value stored meanwhile by that locked call
    /// makes the exchange fail and `low` is computed again, never overwritten.
    pub fn advance_log_needed_from(&self, p: usize, low: impl Fn() -> Option<u64>) {
        let Some(cell) = self.log_marks.get(p).map(|m| &m.needed) else {
            return;
        };
        let mut current = cell.load(Ordering::SeqCst);
        loop {
            match low() {
                Some(seq) if current != 0 && seq > current => {
                    match cell.compare_exchange(current, seq, Ordering::SeqCst, Ordering::SeqCst) {
                        Ok(_) => return,
                        Err(now) => current = now,
                    }
                }
                _ => return,
            }
        }
    }

    /// Every remote site applied partition `p`'s changes before `seq` (a
    /// backup hears it from the primary): the held batches holding only
    /// such changes go (see [`crate::received`]), and a promoted copy's
    /// log lets them go when the partition is next locked to log a change
    /// or read its log (a marker per partition ten times a second must not
    /// cost a cold lock each); see [`crate::PartitionLog::release_before`].
    pub fn release_log_before(&self, p: usize, seq: u64) {
        if let Some(cell) = self.log_marks.get(p).map(|m| &m.released) {
            if cell.fetch_max(seq, Ordering::Relaxed) < seq {
                self.release_generation.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Brings a locked partition's log up to [`Keyspace::advance_log_needed_from`]
    /// and [`Keyspace::release_log_before`]; true when the first lets
    /// changes go (trimmed by the caller's append or trim).
    pub(super) fn catch_up_log(&self, part: &mut Partition) -> bool {
        let p = part.id as usize;
        let marks = &self.log_marks[p];
        let released = marks.released.load(Ordering::Relaxed);
        if released != 0 {
            part.log.release_before(released);
        }
        let needed = marks.needed.load(Ordering::Relaxed);
        needed != 0 && part.log.advance_needed_from(needed)
    }

    /// Brings the logs of up to `max` partitions (in turn, skipping any
    /// another thread holds) up to their marks and trims them. The marks
    /// move without the partition's lock, so a partition written no more
    /// would keep the chunks of changes every consumer is done with until
    /// something locked it (10 MB on a WAN site idle after 110,000 writes);
    /// the cron calls this so that an idle node's logs shrink too.
    pub fn trim_idle_logs(&self, max: usize) {
        let n = self.parts.len();
        let start = self.log_trim_cursor.fetch_add(max, Ordering::Relaxed) % n;
        for i in 0..max.min(n) {
            if let Some(mut part) = self.parts[(start + i) % n].try_lock() {
                self.catch_up_log(&mut part);
                part.log.trim();
            }
        }
    }

    pub(super) fn release_generation(&self) -> u64 {
        self.release_generation.load(Ordering::Relaxed)
    }

    /// The seq before which every remote site applied partition `p`'s
    /// changes (0: not known).
    pub(super) fn released(&self, p: usize) -> u64 {
        self.log_marks
            .get(p)
            .map_or(0, |m| m.released.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use crate::clock::DebugClock;
    use crate::value::Value;
    use crate::{Keyspace, KeyspaceConfig, Write};

    fn set(ks: &Keyspace, key: &str) {
        let mut txn = ks.txn([key.as_bytes()], 0);
        txn.write(
            key.as_bytes(),
            Write::Set {
                value: Value::str(Bytes::from(key.to_owned())),
                expire_at: 0,
            },
        )
        .unwrap();
    }

    #[test]
    fn an_advanced_needed_seq_trims_when_the_partition_is_next_locked_and_never_goes_back() {
        let cfg = KeyspaceConfig {
            partitions: 1,
            log_retain_bytes: 0,
            ..Default::default()
        };
        let ks = Keyspace::new(cfg, Arc::new(DebugClock::default()));
        ks.advance_log_needed_from(0, || Some(5));
        for i in 0..4 {
            set(&ks, &format!("k{i}"));
        }
        assert_eq!(
            ks.with_partition(0, |p, _| p.log.len()),
            0,
            "no consumer registered: advancing does nothing"
        );
        ks.set_log_needed_from(0, Some(5));
        for i in 4..10 {
            set(&ks, &format!("k{i}"));
        }
        assert_eq!(ks.with_partition(0, |p, _| p.log.first_seq()), 5);
        ks.advance_log_needed_from(0, || Some(8));
        ks.advance_log_needed_from(0, || Some(6));
        assert_eq!(
            ks.with_partition(0, |p, _| p.log.first_seq()),
            8,
            "trimmed on the next lock, not moved back"
        );
        ks.advance_log_needed_from(0, || Some(9));
        set(&ks, "k10");
        // The append trims when it needs a new chunk (this one has room).
        assert_eq!(
            ks.with_partition(0, |p, _| (p.log.first_seq(), p.log.next_seq())),
            (8, 12)
        );
        assert_eq!(
            ks.with_partition_mut(0, |p| {
                p.log.trim();
                p.log.first_seq()
            }),
            9
        );
        ks.set_log_needed_from(0, None);
        assert_eq!(ks.with_partition(0, |p, _| p.log.len()), 0);
    }

    #[test]
    fn the_cron_trims_idle_partitions_logs_to_their_marks() {
        let cfg = KeyspaceConfig {
            partitions: 4,
            log_retain_bytes: 0,
            ..Default::default()
        };
        let ks = Keyspace::new(cfg, Arc::new(DebugClock::default()));
        for p in 0..4 {
            ks.set_log_needed_from(p, Some(1));
        }
        for i in 0..4000 {
            set(&ks, &format!("key:{i:08}"));
        }
        let next: Vec<u64> = (0..4)
            .map(|p| ks.with_partition(p, |part, _| part.log.next_seq()))
            .collect();
        let held = ks.log_bytes();
        // Every consumer is done; the marks move without the locks.
        for (p, &seq) in next.iter().enumerate() {
            ks.advance_log_needed_from(p, || Some(seq));
        }
        assert_eq!(ks.log_bytes(), held, "nothing trims without a lock");
        ks.trim_idle_logs(2);
        let half = ks.log_bytes();
        assert!(half < held, "{half} < {held}");
        ks.trim_idle_logs(2);
        let all = ks.log_bytes();
        assert!(all < half && all < held / 8, "{all} of {held}");
    }

    #[test]
    fn a_release_lets_retained_changes_go_once_the_partition_is_next_locked() {
        let cfg = KeyspaceConfig {
            partitions: 1,
            log_retain_bytes: 1 << 20,
            ..Default::default()
        };
        let ks = Keyspace::new(cfg, Arc::new(DebugClock::default()));
        for i in 0..10 {
            set(&ks, &format!("k{i}"));
        }
        ks.release_log_before(0, 6);
        ks.release_log_before(0, 3);
        assert_eq!(
            ks.with_partition_mut(0, |p| {
                p.log.trim();
                p.log.first_seq()
            }),
            1,
            "not before the next lock that logs"
        );
        set(&ks, "k10");
        assert_eq!(
            ks.with_partition_mut(0, |p| {
                p.log.trim();
                p.log.first_seq()
            }),
            6,
            "and never moved back"
        );
    }
}
