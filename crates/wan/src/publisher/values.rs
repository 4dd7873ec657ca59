//! Current values: what is sent as keys' values now rather than read from
//! a log.
//!
//! - Re-sync copies: a partition whose log no longer reaches back to what
//!   the target has (or every owned one after `needs-resync`) is copied,
//!   its keys taken under its lock and their values and tombstones read a
//!   batch at a time ([`Publisher::begin_copy`], [`Publisher::read_copy`]).
//! - Full values asked for (`NeedFull`): the target lacked the base of a
//!   delta; the keys' values are read a batch at a time, and their
//!   partitions are held (see [`super::cursors::Held`]) until the last one
//!   is applied. The keys not yet read may take a quarter of
//!   `memory_budget`; a target asking for more is re-synced instead.
//!
//! Both wait in the outbox until what the partition logged when they were
//! read is durable (on the replicas): a value may be a change this site
//! would lose with this node. While the outbox's front waits, further
//! batches are read ahead, up to [`READ_AHEAD_BYTES`], so they leave
//! together. A body whose partition moved meanwhile is dropped (its new
//! primary goes on or copies again), and full values are asked for again.

use std::collections::VecDeque;
use std::ops::ControlFlow;

use bytes::{Bytes, BytesMut};

use super::Publisher;
use crate::stats::add;
use crate::wire;
use crate::PublisherState;

/// Keys of full values asked for and not yet read may take this share of
/// `memory_budget` (at least [`ASKED_MIN_BYTES`]); past it the target is
/// re-synced instead, so a site asking for more than this node can hold,
/// or asking again and again, cannot grow its memory.
const ASKED_BUDGET_SHARE: usize = 4;
const ASKED_MIN_BYTES: usize = 64 << 10;

/// Bodies of current values (copies, full values) read ahead into the
/// outbox while its front waits for the replicas, at most.
pub(super) const READ_AHEAD_BYTES: usize = 8 << 20;

/// What a key asked for counts against the share above.
fn asked_size(key: &Bytes) -> usize {
    key.len() + 16
}

/// Keys whose full values the target asked for, not yet read.
pub(super) struct Asked {
    keys: VecDeque<(u16, Bytes)>,
    /// Their partitions, held (see [`super::cursors::Held`]) until the
    /// batch that reads the last of them is applied.
    releases: Vec<usize>,
    /// A batch of them is in the outbox or on its way.
    started: bool,
}

/// The partition being copied (see [`Publisher::begin_copy`]): the keys it
/// held when the copy began, read a batch at a time.
pub(super) struct Copying {
    pub(super) p: usize,
    keys: VecDeque<Bytes>,
    /// Where its log goes on after the copy: the copy's last body settles
    /// `next - 1`.
    next: u64,
}

/// A body that is not a log read, waiting to be sent.
pub(super) struct Outgoing {
    pub(super) body: Bytes,
    /// The (partition, seq) it settles.
    pub(super) seqs: Vec<(u16, u64)>,
    /// It holds current values, which may be changes the replicas do not
    /// hold yet: sent once each (partition, seq) is durable (see
    /// `durable_seq`), or dropped if the partition is led elsewhere by
    /// then (its new primary re-syncs or goes on from its log).
    pub(super) after: Vec<(usize, u64)>,
    /// Full values the target asked for: read again from this node's
    /// copy if dropped (nobody else would send them).
    pub(super) keys: Vec<(u16, Bytes)>,
    /// Partitions whose hold it releases once applied (see
    /// [`super::cursors::Held`]).
    pub(super) releases: Vec<usize>,
}

impl Publisher {
    /// Sends the outbox's front if what it read is durable: Continue when
    /// something was done (sent, dropped, read ahead), Break when it waits
    /// (nothing else may go first), None when the outbox is empty.
    pub(super) fn send_outbox(&mut self) -> Option<ControlFlow<()>> {
        let front = self.outbox.front()?;
        if let Some(&(p, _)) = front
            .after
            .iter()
            .find(|&&(p, seq)| self.durable_seq(p) < seq)
        {
            if self.cur[p].owned {
                // A replica round trip away; the next tick sends it
                // (quiet till then: nothing else may go first).
                // Meanwhile a copy or a request for full values reads
                // ahead, so that under writes they do not leave one batch
                // per wait.
                if self.read_ahead() {
                    return Some(ControlFlow::Continue(()));
                }
                self.outbox_waits = true;
                return Some(ControlFlow::Break(()));
            }
            if let Some(o) = self.outbox.pop_front() {
                if !o.keys.is_empty() {
                    self.ask_full_values(o.keys);
                }
                o.releases.into_iter().for_each(|p| self.release(p));
            }
            return Some(ControlFlow::Continue(()));
        }
        let o = self.outbox.pop_front()?;
        self.send(o.body.clone(), o.seqs, None, Some(o.body), o.releases);
        Some(ControlFlow::Continue(()))
    }

    /// After `needs-resync`: every primary partition is to be copied.
    pub(super) fn begin_resync(&mut self) {
        tracing::warn!(
            target_site = self.target.settings.name,
            "WAN re-sync: copying the current contents and tombstones of every primary partition"
        );
        add(&self.target.stats.resyncs, 1);
        for p in 0..self.parts {
            if self.cur[p].owned {
                self.resync.insert(p);
            }
        }
        self.target.set_state(PublisherState::Replicating);
    }

    /// Begins copying a partition whose log no longer goes back far enough
    /// (or any owned one after `needs-resync`): its keys are taken under
    /// its lock, with the log's next seq, where the log goes on after the
    /// copy; [`Self::read_copy`] then reads them into the outbox a batch at
    /// a time, entries as full values with their versions, tombstones as
    /// removals. A value read later than the moment of the keys is newer,
    /// and the log ships what changed meanwhile again (last writer wins),
    /// so the copy is what the partition held then or later, and a
    /// re-sync holds at most a batch of it and the keys of one partition
    /// (shared with the partition, a pointer each).
    pub(super) fn begin_copy(&mut self, p: usize) {
        if !self.cur[p].owned {
            return;
        }
        let (keys, next) = self
            .wan
            .ks
            .with_partition(p, |part, now| (part.copy_keys(now), part.log.next_seq()));
        self.cur[p].next = next;
        self.pending.insert(p);
        self.set_needed(p, Some(self.low(p).max(next)));
        self.copying = Some(Copying { p, keys, next });
    }

    /// Reads the next batch of full values asked for, or else of the
    /// partition being copied, into the outbox; false if neither is under
    /// way.
    pub(super) fn read_current_values(&mut self) -> bool {
        if self.read_full_values() {
            return true;
        }
        if self.copying.is_some() {
            self.read_copy();
            return true;
        }
        false
    }

    /// [`Self::read_current_values`] while the outbox's front waits to be
    /// durable, unless the outbox holds [`READ_AHEAD_BYTES`] already.
    fn read_ahead(&mut self) -> bool {
        if self.asked.is_empty() && self.copying.is_none() {
            return false;
        }
        self.outbox.iter().map(|o| o.body.len()).sum::<usize>() < READ_AHEAD_BYTES
            && self.read_current_values()
    }

    /// Reads the next batch of the partition being copied into the outbox;
    /// its last one settles what the log held when the copy began.
    fn read_copy(&mut self) {
        let max = self.flow.body_max();
        let Some(c) = self.copying.as_mut() else {
            return;
        };
        let p = c.p;
        let mut body = BytesMut::new();
        // Read after the values: at or past the changes that made them.
        let unsettled = self.wan.ks.with_partition(p, |part, now| {
            while body.len() < max {
                let Some(key) = c.keys.pop_front() else { break };
                for change in part.copy_changes(&key, now) {
                    wire::put_entry(&mut body, p as u16, 0, &change);
                }
            }
            part.logged_as_primary()
        });
        let (last, next) = (c.keys.is_empty(), c.next);
        let seqs = if last && next > 1 {
            vec![(p as u16, next - 1)]
        } else {
            Vec::new()
        };
        let after = unsettled.map(|l| (p, l)).into_iter().collect();
        self.outbox.push_back(Outgoing {
            body: body.freeze(),
            seqs,
            after,
            keys: Vec::new(),
            releases: Vec::new(),
        });
        if last {
            self.copying = None;
        }
    }

    /// The receiver lacked the base of these keys' deltas: their full
    /// values are read and sent a batch at a time ([`Self::read_full_values`]).
    /// The batch that asked is acknowledged as applied next; it does not
    /// settle these partitions until the last of them is applied too.
    pub(super) fn ask_full_values(&mut self, keys: Vec<(u16, Bytes)>) {
        let keys: VecDeque<(u16, Bytes)> = keys
            .into_iter()
            .filter(|(p, key)| {
                (*p as usize) < self.parts && self.wan.ks.partition_of(key) == *p as usize
            })
            .collect();
        if keys.is_empty() {
            return;
        }
        let mut releases: Vec<usize> = keys.iter().map(|(p, _)| *p as usize).collect();
        releases.sort_unstable();
        releases.dedup();
        for &p in &releases {
            self.held.entry(p).or_default().fallbacks += 1;
        }
        self.asked_bytes += keys.iter().map(|(_, k)| asked_size(k)).sum::<usize>();
        self.asked.push_back(Asked {
            keys,
            releases,
            started: false,
        });
        let limit =
            (self.wan.settings.memory_budget as usize / ASKED_BUDGET_SHARE).max(ASKED_MIN_BYTES);
        if self.asked_bytes > limit {
            tracing::error!(
                target_site = self.target.settings.name,
                bytes = self.asked_bytes,
                "the target asked for more full values than this node keeps requests for ({limit} bytes of keys, a quarter of wan.memory_budget): re-syncing it instead"
            );
            self.needs_resync();
        }
    }

    /// Reads the next batch of full values asked for (up to `batch_max`
    /// bytes: a request for many large values neither makes one body over
    /// the frame limit nor holds them all at once) into the outbox; false
    /// if none is asked for.
    fn read_full_values(&mut self) -> bool {
        if self.asked.is_empty() {
            return false;
        }
        let max = self.flow.body_max();
        let mut body = BytesMut::new();
        let mut after: Vec<(usize, u64)> = Vec::new();
        let mut keys = Vec::new();
        let mut unheld = 0u64;
        while body.len() < max {
            let Some((p16, key)) = self.asked.front_mut().and_then(|a| a.keys.pop_front()) else {
                break;
            };
            self.asked_bytes = self.asked_bytes.saturating_sub(asked_size(&key));
            let p = p16 as usize;
            // A partition led elsewhere since the batch left still gets
            // the value this node holds as its replica (its primary's
            // publisher counts the change as applied: nobody else sends
            // it); last writer wins makes an older one harmless.
            let changes = self.wan.ks.full_changes(&key);
            if changes.is_empty() && !self.cur[p].owned {
                unheld += 1;
            }
            for change in changes {
                wire::put_entry(&mut body, p16, 0, &change);
            }
            // Read after the value: at or past the change that made it.
            let unsettled = self
                .wan
                .ks
                .with_partition(p, |part, _| part.logged_as_primary());
            if let Some(last) = unsettled.filter(|_| self.cur[p].owned) {
                match after.iter_mut().find(|(q, _)| *q == p) {
                    Some(a) => a.1 = a.1.max(last),
                    None => after.push((p, last)),
                }
            }
            keys.push((p16, key));
            add(&self.target.stats.full_fallbacks, 1);
        }
        if unheld > 0 {
            tracing::warn!(
                target_site = %self.target.settings.name,
                keys = unheld,
                "the target asked for full values of keys in partitions this node no longer holds: they may differ there until written again"
            );
        }
        // The request's last batch releases its partitions (an empty one
        // too, if earlier ones are on their way: it is applied after them).
        let Some(front) = self.asked.front_mut() else {
            return true;
        };
        let started = std::mem::replace(&mut front.started, true);
        let releases = match front.keys.is_empty() {
            true => self
                .asked
                .pop_front()
                .map(|a| a.releases)
                .unwrap_or_default(),
            false => Vec::new(),
        };
        if body.is_empty() && !started {
            releases.into_iter().for_each(|p| self.release(p));
            return true;
        }
        let keys = if after.is_empty() { Vec::new() } else { keys };
        self.outbox.push_back(Outgoing {
            body: body.freeze(),
            seqs: Vec::new(),
            after,
            keys,
            releases,
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{seqs, Options, Rig};
    use super::*;
    use crate::wire::Frame;

    /// A re-sync copies every owned partition's keys; a body waits in the
    /// outbox until what the partition logged is on its replicas, the
    /// copy reads ahead meanwhile (up to [`READ_AHEAD_BYTES`]), and the
    /// bodies leave in order once durable, the last settling the log's
    /// seq at the copy.
    #[test]
    fn a_copy_waits_for_the_replicas_and_reads_ahead_meanwhile() {
        let mut r = Rig::new();
        let p = 1;
        let keys = r.keys_of(p, 40);
        let value = vec![b'v'; 300 << 10];
        let mut last = 0;
        for k in &keys {
            last = r.write_at(1, k, &value).1;
        }
        r.site.set_durable(p, last - 1);
        r.target.control(crate::Control::Resync);
        r.p.run_controls();
        assert_eq!(r.target.state(), PublisherState::NeedsResync);
        r.link_up();
        r.p.fill();
        assert_eq!(r.target.state(), PublisherState::Replicating);
        assert_eq!(
            r.target
                .stats
                .resyncs
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        // Partition 0 (empty) went; partition 1 waits, read ahead.
        let sent = r.sent();
        assert!(sent.iter().all(|(_, e)| e.is_empty()));
        assert!(r.p.outbox_waits);
        let ahead: usize = r.p.outbox.iter().map(|o| o.body.len()).sum();
        assert!(ahead >= READ_AHEAD_BYTES, "read ahead: {ahead}");
        assert!(r.p.copying.is_some(), "not past the read-ahead bound");
        assert!(!r.p.can_send_logs());
        r.site.set_durable(p, last);
        let mut copied = Vec::new();
        for _ in 0..100 {
            r.p.fill();
            for (id, entries) in r.sent() {
                copied.extend(seqs(&entries));
                r.ack(id);
            }
            if r.p.copying.is_none() && r.p.outbox.is_empty() && r.p.resync.is_empty() {
                break;
            }
        }
        let mut got: Vec<String> = copied
            .iter()
            .filter(|(q, seq, _)| *q as usize == p && *seq == 0)
            .map(|(_, _, k)| k.clone())
            .collect();
        got.sort();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(got, want, "every key once, as a current value");
        assert_eq!(r.p.cur[p].acked, last, "the copy's last body settles");
        assert_eq!(r.p.cur[p].next, last + 1);
    }

    /// A body waiting for the replicas whose partition is led elsewhere
    /// by then is dropped; full values asked for are read again (this
    /// node holds them as a replica, nobody else would send them), and
    /// sent without waiting.
    #[test]
    fn full_values_whose_partition_moved_are_read_again_and_sent() {
        let mut r = Rig::new();
        let (p, first) = r.write("k", "1");
        r.link_up();
        r.p.fill();
        let (id, _) = r.sent().remove(0);
        r.site.set_durable(p, first);
        let (_, second) = r.write("k", "2");
        r.p.on_frame(Frame::NeedFull(vec![(p as u16, "k".into())]))
            .unwrap();
        r.ack(id);
        r.p.fill();
        assert!(r.sent().is_empty(), "seq {second} is not on the replicas");
        assert!(r.p.outbox_waits);
        assert_eq!(r.p.outbox[0].after, vec![(p, second)]);
        r.p.cur[p].owned = false;
        r.p.fill();
        let sent = r.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(seqs(&sent[0].1), vec![(p as u16, 0, "k".into())]);
        assert_eq!(r.p.held[&p].fallbacks, 1, "released when applied");
        r.ack(sent[0].0);
        assert!(r.p.held.is_empty());
        assert_eq!(r.p.cur[p].acked, first);
    }

    /// A request for full values larger than a body is read and sent a
    /// body at a time; the partition is released by the last one.
    #[test]
    fn many_full_values_leave_a_body_at_a_time() {
        let mut r = Rig::new();
        let p = 3;
        let keys = r.keys_of(p, 6);
        let value = vec![b'v'; 100 << 10];
        for k in &keys {
            r.write_at(1, k, &value);
        }
        r.link_up();
        r.p.fill();
        let logs = r.sent();
        let asked = keys.iter().map(|k| (p as u16, k.clone().into())).collect();
        r.p.on_frame(Frame::NeedFull(asked)).unwrap();
        for (id, _) in logs {
            r.ack(id);
        }
        assert_eq!(r.p.cur[p].acked, 0, "held");
        r.p.flow.batch_max = crate::publisher::flow::BATCH_MIN;
        r.p.fill();
        let sent = r.sent();
        assert_eq!(sent.len(), 2, "three 100 KiB values pass 256 KiB");
        assert_eq!(sent.iter().map(|(_, e)| e.len()).sum::<usize>(), keys.len());
        r.ack(sent[0].0);
        assert_eq!(r.p.cur[p].acked, 0, "held until the last body");
        r.ack(sent[1].0);
        assert_eq!(r.p.cur[p].acked, keys.len() as u64);
    }

    /// Keys asked for may take a quarter of `memory_budget` (at least
    /// [`ASKED_MIN_BYTES`]); a target asking for more is re-synced.
    #[test]
    fn asking_for_more_full_values_than_the_budget_re_syncs() {
        let mut r = Rig::with(Options::over_memory_budget());
        let (p, _) = r.write("k", "1");
        r.link_up();
        let keys = r.keys_of(p, 1000);
        let asked: Vec<(u16, Bytes)> = keys
            .iter()
            .map(|k| (p as u16, Bytes::from(format!("{k:0>1000}"))))
            .filter(|(q, k)| r.ks.partition_of(k) == *q as usize)
            .collect();
        let few = asked[..10].to_vec();
        r.p.ask_full_values(few);
        assert_eq!(r.target.state(), PublisherState::Replicating);
        r.p.ask_full_values(asked);
        assert_eq!(r.target.state(), PublisherState::NeedsResync);
        assert!(r.p.asked.is_empty() && r.p.held.is_empty());
        assert_eq!(r.needed(p), None, "the logs let go");
        // Keys of another partition than named are not taken (forged).
        let mut r = Rig::new();
        let other = (r.ks.partition_of(b"k") + 1) % 4;
        r.p.ask_full_values(vec![(other as u16, "k".into())]);
        assert!(r.p.asked.is_empty() && r.p.held.is_empty());
    }

    /// A partition whose log no longer reaches back to what the target
    /// has is copied instead, and counted.
    #[test]
    fn a_partition_whose_log_was_trimmed_is_copied() {
        let mut r = Rig::with(Options {
            log_retain_bytes: 0,
            ..Default::default()
        });
        let (p, _) = r.write("k", "1");
        let (_, seq) = r.write("k", "2");
        // As if written before WAN was configured: nobody kept the log.
        r.p.set_needed(p, None);
        r.link_up();
        r.p.fill();
        assert_eq!(
            r.target
                .stats
                .partition_copies
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        assert!(r.p.resync.contains(&p));
        // The reader woke the task, which fills again.
        r.p.fill();
        let sent = r.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(seqs(&sent[0].1), vec![(p as u16, 0, "k".into())]);
        r.ack(sent[0].0);
        assert_eq!(r.p.cur[p].acked, seq);
    }
}
