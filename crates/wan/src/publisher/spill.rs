//! Spilling to the journal, and the memory and disk budgets.
//!
//! When the node's partition logs hold more than `memory_budget` and this
//! target is queueing, its unsent backlog (from what it applied, so the
//! journal always precedes the log) is written to its journal
//! (`data_dir/wan/<target>`) and the logs let it go ([`Publisher::low`]
//! counts `spilled`). The journal is sent before the logs, a record per
//! batch, and trimmed as batches are applied. When the journal is over
//! `disk_budget` (or cannot be written or read) it is dropped and the
//! target goes to `needs-resync`.

use std::collections::VecDeque;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use journal::{Journal, JournalConfig, JournalError};

use super::batch::put_change;
use super::flow::BATCH_MAX;
use super::Publisher;
use crate::stats::add;
use crate::wire;

/// One target's journal, opened at its first spill.
pub(super) struct Spill {
    dir: PathBuf,
    journal: Option<Journal>,
    /// Next journal record to send.
    read: u64,
    /// Per spill into the journal: the id after its last record and the
    /// time of its oldest change, so the lag counts the journal too.
    ages: VecDeque<(u64, u64)>,
}

impl Spill {
    pub(super) fn new(dir: PathBuf) -> Self {
        Spill {
            dir,
            journal: None,
            read: 0,
            ages: VecDeque::new(),
        }
    }

    /// Bytes on disk.
    pub(super) fn bytes(&self) -> u64 {
        self.journal.as_ref().map_or(0, |j| j.disk_bytes())
    }

    /// The time of the oldest change in the journal, ms.
    pub(super) fn oldest_ms(&self) -> Option<u64> {
        self.ages.front().map(|&(_, oldest)| oldest)
    }

    /// Empties the journal: nothing in it is to be sent.
    pub(super) fn clear(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            if let Err(e) = j.clear() {
                tracing::warn!("clearing the WAN journal: {e}");
            }
            self.read = j.next_id();
        }
        self.ages.clear();
    }

    /// The next record to send, and its id.
    pub(super) fn next_record(&mut self) -> Result<Option<(u64, Bytes)>, JournalError> {
        let Some(j) = self.journal.as_ref() else {
            return Ok(None);
        };
        if self.read >= j.next_id() {
            return Ok(None);
        }
        let records = j.read(self.read, 1)?;
        let Some((id, body)) = records.into_iter().next() else {
            return Ok(None);
        };
        self.read = id + 1;
        Ok(Some((id, body)))
    }

    /// Record `id` went with a broken link: it is sent again.
    pub(super) fn rewind(&mut self, id: u64) {
        self.read = self.read.min(id);
    }

    /// Lets go of the records before `oldest_unapplied` (None: before the
    /// next one to send).
    fn trim(&mut self, oldest_unapplied: Option<u64>) {
        let Some(j) = self.journal.as_mut() else {
            return;
        };
        let oldest_unapplied = oldest_unapplied.unwrap_or(self.read);
        while self
            .ages
            .front()
            .is_some_and(|&(end, _)| end <= oldest_unapplied)
        {
            self.ages.pop_front();
        }
        // Every record applied: drop the active segment too (truncate_before
        // keeps it), or journal_bytes and the disk budget would keep counting
        // a delivered backlog of up to a whole segment.
        let result = if oldest_unapplied >= j.next_id() {
            if j.disk_bytes() > 0 {
                j.clear()
            } else {
                Ok(())
            }
        } else {
            j.truncate_before(oldest_unapplied)
        };
        if let Err(e) = result {
            tracing::warn!("trimming the WAN journal: {e}");
        }
    }

    /// Opens the journal if it is not yet.
    fn open(&mut self) -> Result<(), JournalError> {
        if self.journal.is_none() {
            let j = Journal::open(&self.dir, JournalConfig::default())?;
            self.read = j.next_id();
            self.journal = Some(j);
        }
        Ok(())
    }
}

impl Publisher {
    /// Lets the journal go of what the target applied.
    pub(super) fn trim_journal(&mut self) {
        let oldest = self.in_flight.iter().filter_map(|b| b.journal).min();
        self.spill.trim(oldest);
    }

    /// Over the memory budget, moves this target's unsent backlog to its
    /// journal (the link is down or slower than the writes); over the disk
    /// budget, drops it and marks the target for re-sync.
    pub(super) fn check_budget(&mut self) {
        if !self.queueing() {
            return;
        }
        let budget = self.wan.settings.memory_budget as usize;
        if self.wan.ks.log_bytes() <= budget {
            return;
        }
        if let Err(e) = self.spill.open() {
            tracing::error!(
                target_site = self.target.settings.name,
                "cannot open the WAN journal, re-syncing instead: {e}"
            );
            self.needs_resync();
            return;
        }
        let owned: Vec<usize> = (0..self.parts).filter(|&p| self.cur[p].owned).collect();
        let mut spilled_any = false;
        let mut oldest_ms = u64::MAX;
        for p in owned {
            // Re-spill from what was applied: entries in flight from memory
            // go to the journal too, so the journal always precedes the log.
            let from = self.low(p);
            let site = self.my_site();
            let delta = self.target.settings.delta;
            let stats = &self.target.stats;
            let mut body = BytesMut::new();
            let mut last = None;
            let mut done = true;
            let durable = self.durable_seq(p);
            let mut hlc = 0;
            let read = self.wan.ks.with_partition(p, |part, _| {
                if part.replica {
                    return Some(());
                }
                let durable = part.durable_through(durable);
                let iter = part.log.read_from(from)?;
                for logged in iter {
                    if logged.seq > durable {
                        done = false;
                        break;
                    }
                    last = Some(logged.seq);
                    hlc = hlc.max(logged.head.version.hlc);
                    if logged.head.ships_from(site) {
                        put_change(&mut body, p as u16, &logged, delta, part, stats);
                        add(&stats.spilled_events, 1);
                        oldest_ms = oldest_ms.min(logged.head.version.millis());
                    }
                }
                Some(())
            });
            if read.is_none() {
                self.resync.insert(p);
                continue;
            }
            let Some(last) = last else { continue };
            self.settling.read(p, from, last, hlc);
            if !body.is_empty() {
                let Some(j) = self.spill.journal.as_mut() else {
                    return;
                };
                let len = body.len() as u64;
                if let Err(e) = append_chunked(j, &body.freeze()) {
                    tracing::error!(
                        target_site = self.target.settings.name,
                        "WAN journal write failed, re-syncing instead: {e}"
                    );
                    self.needs_resync();
                    return;
                }
                add(&self.target.stats.spilled_bytes, len);
            }
            self.cur[p].spilled = last;
            self.cur[p].next = self.cur[p].next.max(last + 1);
            if done {
                self.pending.remove(p);
            }
            self.set_needed(p, Some(self.low(p)));
            spilled_any = true;
        }
        if let Some(j) = self.spill.journal.as_mut() {
            if oldest_ms != u64::MAX {
                self.spill.ages.push_back((j.next_id(), oldest_ms));
            }
            let _ = j.flush();
            if spilled_any && j.disk_bytes() > self.wan.settings.disk_budget {
                tracing::error!(
                    target_site = self.target.settings.name,
                    disk_bytes = j.disk_bytes(),
                    disk_budget = self.wan.settings.disk_budget,
                    "WAN backlog is over the disk budget: the target needs a re-sync, which runs once it is reachable"
                );
                self.needs_resync();
            }
        }
    }
}

/// Appends a spilled body to the journal as records of at most
/// [`BATCH_MAX`] bytes (whole entries each), so every record is a batch
/// the receiver accepts.
fn append_chunked(j: &mut Journal, body: &Bytes) -> Result<(), JournalError> {
    for chunk in wire::split_body(body, BATCH_MAX) {
        j.append(&chunk)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{seqs, Options, Rig};
    use crate::PublisherState;

    /// Over the memory budget with the link down, the backlog moves to the
    /// journal and the log lets it go; once the link is up the journal is
    /// sent before the log, and trimmed as it is applied.
    #[test]
    fn over_the_memory_budget_the_backlog_spills_to_the_journal_and_back() {
        let mut r = Rig::with(Options::over_memory_budget());
        let (p, _) = r.write("k", "1");
        r.write_at(2, "k", b"theirs");
        let (_, spilled) = r.write("k", "3");
        r.p.check_budget();
        assert_eq!(r.p.cur[p].spilled, spilled);
        assert_eq!(r.needed(p), Some(spilled + 1), "the log lets it go");
        assert!(r.p.spill.bytes() > 0);
        assert_eq!(
            r.target
                .stats
                .spilled_events
                .load(std::sync::atomic::Ordering::Relaxed),
            2,
            "only this site's changes"
        );
        // Spilled again: nothing new to spill.
        r.p.check_budget();
        assert_eq!(
            r.target
                .stats
                .spilled_events
                .load(std::sync::atomic::Ordering::Relaxed),
            2
        );
        let (_, after) = r.write("k", "4");
        r.link_up();
        r.p.fill();
        let sent = r.sent();
        assert_eq!(sent.len(), 2, "the journal, then the log");
        assert_eq!(
            seqs(&sent[0].1),
            vec![(p as u16, 1, "k".into()), (p as u16, spilled, "k".into())]
        );
        assert_eq!(seqs(&sent[1].1), vec![(p as u16, after, "k".into())]);
        r.ack(sent[0].0);
        assert_eq!(r.p.cur[p].acked, spilled);
        assert_eq!(r.p.spill.bytes(), 0, "every record applied: emptied");
        r.ack(sent[1].0);
        assert_eq!(r.p.cur[p].acked, after);
        assert_eq!(r.needed(p), Some(after + 1));
    }

    /// A journal record on its way when the link broke is sent again.
    #[test]
    fn a_journal_record_lost_with_the_link_is_sent_again() {
        let mut r = Rig::with(Options::over_memory_budget());
        let (p, seq) = r.write("k", "1");
        r.p.check_budget();
        r.link_up();
        r.p.fill();
        let first = r.sent();
        assert_eq!(first.len(), 1);
        r.p.link_down("test");
        r.link_up();
        r.p.fill();
        let again = r.sent();
        assert_eq!(again.len(), 1);
        assert_eq!(seqs(&again[0].1), seqs(&first[0].1));
        r.ack(again[0].0);
        assert_eq!(r.p.cur[p].acked, seq);
        assert_eq!(r.p.spill.bytes(), 0);
    }

    /// Over the disk budget the backlog is dropped and the target needs a
    /// re-sync, which copies every owned partition once it is reachable.
    #[test]
    fn over_the_disk_budget_the_target_needs_a_resync() {
        let mut r = Rig::with(Options {
            disk_budget: 0,
            ..Options::over_memory_budget()
        });
        let (p, seq) = r.write("k", "1");
        r.p.check_budget();
        assert_eq!(r.target.state(), PublisherState::NeedsResync);
        assert_eq!(r.p.spill.bytes(), 0);
        assert_eq!(r.p.cur[p].spilled, 0);
        assert!((0..4).all(|q| r.needed(q).is_none()), "the logs let go");
        // Not queueing: over the budget, nothing more is spilled.
        r.write("k", "2");
        r.p.check_budget();
        assert_eq!(r.p.spill.bytes(), 0);
        r.link_up();
        r.p.fill();
        assert_eq!(r.target.state(), PublisherState::Replicating);
        let sent = r.sent();
        let copied: Vec<_> = sent.iter().flat_map(|(_, e)| seqs(e)).collect();
        assert_eq!(copied, vec![(p as u16, 0, "k".into())]);
        for (id, _) in sent {
            r.ack(id);
        }
        assert_eq!(r.p.cur[p].acked, seq + 1);
    }
}
