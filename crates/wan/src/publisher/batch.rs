//! Batches: what the next one holds, sending it, and its answers.
//!
//! Order of sending ([`Publisher::fill`]), which keeps every partition's
//! changes in seq order: the outbox (bodies that are not log reads:
//! full-value fallbacks, re-sync copies, and those given back by a broken
//! link), then the journal, then the logs in memory. A batch mixes
//! partitions; it is acknowledged twice: `received` opens the window,
//! `applied` settles its partitions and trims the journal. When the link
//! goes down, everything not applied is sent again in the same order
//! ([`Publisher::link_down`]).

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use keyspace::partition_log::Logged;
use keyspace::{Change, ChangeKind};

use super::values::Outgoing;
use super::{Outlet, Publisher};
use crate::stats::add;
use crate::wire::{self, Frame};
use crate::PublisherState;

/// A batch sent and not yet applied.
pub(super) struct InFlight {
    pub(super) id: u64,
    pub(super) sent: Instant,
    pub(super) received: bool,
    pub(super) events: u64,
    /// (partition, seq) this batch lets go of once applied.
    pub(super) seqs: Vec<(u16, u64)>,
    pub(super) journal: Option<u64>,
    /// Bodies that cannot be read again from a log or the journal.
    pub(super) body: Option<Bytes>,
    /// Partitions whose hold it releases once applied (see
    /// [`super::cursors::Held`]).
    pub(super) releases: Vec<usize>,
}

impl Publisher {
    /// Sends while the window has room.
    pub(super) fn fill(&mut self) {
        self.flow.expire_hold(Instant::now());
        if self.state() == PublisherState::NeedsResync && self.connected() {
            self.begin_resync();
        }
        if self.state() != PublisherState::Replicating || !self.connected() {
            return;
        }
        self.outbox_waits = false;
        while !self.window_full() {
            match self.send_outbox() {
                Some(ControlFlow::Continue(())) => continue,
                Some(ControlFlow::Break(())) => break,
                None => {}
            }
            if self.read_current_values() {
                continue;
            }
            if let Some(p) = self.resync.pop_first() {
                self.begin_copy(p);
                continue;
            }
            match self.spill.next_record() {
                Ok(Some((id, body))) => {
                    let seqs = wire::max_seqs(&body);
                    self.send(body, seqs, Some(id), None, Vec::new());
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(
                        target_site = self.target.settings.name,
                        "WAN journal unreadable, re-syncing: {e}"
                    );
                    self.needs_resync();
                    return;
                }
            }
            if self.flow.holding() {
                break;
            }
            let (body, seqs) = self.read_logs(self.flow.batch_max);
            if body.is_empty() {
                self.settle_with_in_flight(seqs);
                // Small batches: nothing waits to be sent; shrink.
                self.flow.drained();
                break;
            }
            let len = body.len();
            self.send(body, seqs, None, None, Vec::new());
            self.flow.sent_from_logs(len, self.batch_id, Instant::now());
        }
    }

    /// Partitions read with nothing to ship (only other sites' changes)
    /// while a batch holding them is in flight: each settles with the
    /// newest such batch (the target applies a partition's changes in
    /// order), instead of never (its log kept them until this site next
    /// wrote the partition: megabytes on an idle WAN site). Not where the
    /// journal holds unsent changes of the partition: those settle it.
    fn settle_with_in_flight(&mut self, seqs: Vec<(u16, u64)>) {
        for (p, seq) in seqs {
            let Some(c) = self.cur.get_mut(p as usize) else {
                continue;
            };
            if c.spilled > c.acked {
                continue;
            }
            let holding = self
                .in_flight
                .iter_mut()
                .rev()
                .find(|b| b.seqs.iter().any(|&(q, _)| q == p));
            if let Some(b) = holding {
                b.seqs.push((p, seq));
                c.inflight += 1;
            }
        }
    }

    /// Reads up to `max` bytes of unsent changes from the logs of owned
    /// partitions, in seq order per partition; returns the batch body and
    /// the highest seq read per partition.
    pub(super) fn read_logs(&mut self, max: usize) -> (Bytes, Vec<(u16, u64)>) {
        self.target.dirty.take(&mut self.dirty);
        for p in self.dirty.drain(..) {
            if self.cur.get(p).is_some_and(|c| c.owned) {
                self.pending.insert(p);
            }
        }
        let candidates: Vec<usize> = self.pending.members_from(0);
        let node = self.site.clone();
        let durability = node.durability();
        let room = if candidates.is_empty() {
            0
        } else {
            self.flow.last_read.min(max) + (4 << 10)
        };
        let mut body = BytesMut::with_capacity(room);
        let mut seqs = Vec::new();
        let mut copies = 0u64;
        for (i, &p) in candidates.iter().enumerate() {
            if body.len() >= max {
                break;
            }
            if let Some(&next) = candidates.get(i + 1) {
                if self.wan.ks.prefetch_partition(next) {
                    if let Some(c) = self.cur.get(next) {
                        keyspace::prefetch_line(c);
                    }
                }
            }
            if self.resync.contains(&p) {
                continue;
            }
            let from = self.cur[p].next;
            let site = self.my_site();
            let delta = self.target.settings.delta;
            let stats = &self.target.stats;
            let durable = durability(p);
            let mut hlc = 0;
            let read = self.wan.ks.with_partition(p, |part, _now| {
                if part.replica {
                    // A replica now, whatever the table this publisher
                    // last read says: its log stores nothing. Either the
                    // next table makes the partition someone else's, or
                    // the copy turns primary (a node rejoining its site
                    // with copies loaded from disk leads them once its
                    // site made it active again): read again then.
                    return Some((None, false, false));
                }
                let durable = part.durable_through(durable);
                let iter = part.log.read_from(from)?;
                let mut last = None;
                let mut done = true;
                let mut shipped = false;
                for logged in iter {
                    // Past what the replicas hold: read again later.
                    if body.len() >= max || logged.seq > durable {
                        done = false;
                        break;
                    }
                    last = Some(logged.seq);
                    hlc = hlc.max(logged.head.version.hlc);
                    if !logged.head.ships_from(site) {
                        continue;
                    }
                    put_change(&mut body, p as u16, &logged, delta, part, stats);
                    shipped = true;
                }
                Some((last, done, shipped))
            });
            match read {
                None => {
                    // Trimmed before this target had it: copy the contents.
                    self.resync.insert(p);
                    self.pending.remove(p);
                    copies += 1;
                }
                Some((last, done, shipped)) => {
                    if let Some(last) = last {
                        self.settling.read(p, from, last, hlc);
                        let c = &mut self.cur[p];
                        c.next = last + 1;
                        if shipped {
                            seqs.push((p as u16, last));
                        } else if c.inflight == 0 && c.spilled <= c.acked {
                            // Only other sites' changes, nothing of this
                            // partition on its way: nothing to wait for.
                            // The replicas are told too (since session
                            // 28), so they let go of the batches holding
                            // these and a promoted one resumes from here.
                            self.settle(p, last);
                        } else {
                            // Settled by the batch in flight or the journal.
                            seqs.push((p as u16, last));
                        }
                    }
                    if done {
                        self.pending.remove(p);
                    }
                }
            }
        }
        if copies > 0 {
            add(&self.target.stats.partition_copies, copies);
            tracing::warn!(
                target_site = %self.target.settings.name,
                partitions = copies,
                "the log no longer reaches back to what the target has (a promoted replica's log keeps node.log_memory): copying these partitions' contents"
            );
        }
        if !self.resync.is_empty() {
            self.target.wake.notify_one();
        }
        self.flow.last_read = body.len();
        (body.freeze(), seqs)
    }

    /// Sends a batch, if the link is up: `seqs` are settled, `journal`
    /// (the record it came from) trimmed, once it is applied; `keep` is a
    /// body to send again if the link breaks first.
    pub(super) fn send(
        &mut self,
        body: Bytes,
        seqs: Vec<(u16, u64)>,
        journal: Option<u64>,
        keep: Option<Bytes>,
        releases: Vec<usize>,
    ) {
        let Some(out) = self.out.as_ref() else {
            return;
        };
        self.batch_id += 1;
        let events = wire::count_entries(&body);
        let frame = Frame::Batch {
            id: self.batch_id,
            body,
        };
        if out.tx.send(frame).is_err() {
            return;
        }
        add(&self.target.stats.batches, 1);
        for (p, _) in &seqs {
            if let Some(c) = self.cur.get_mut(*p as usize) {
                c.inflight += 1;
            }
        }
        self.in_flight.push_back(InFlight {
            id: self.batch_id,
            sent: Instant::now(),
            received: false,
            events,
            seqs,
            journal,
            body: keep,
            releases,
        });
    }

    /// A frame from the target; Err: the link is to be closed, and why.
    pub(super) fn on_frame(&mut self, f: Frame) -> Result<(), &'static str> {
        match f {
            Frame::Received(id) => {
                let now = Instant::now();
                let was_full = self.window_full();
                if let Some(b) = self.in_flight.iter_mut().find(|b| b.id == id) {
                    b.received = true;
                    let rtt = now.duration_since(b.sent).as_micros() as u64;
                    add(&self.target.stats.rtt_us_sum, rtt);
                    add(&self.target.stats.rtt_count, 1);
                    self.flow.received(rtt, was_full);
                }
            }
            Frame::Applied(id) => self.applied(id),
            Frame::NeedFull(keys) => self.ask_full_values(keys),
            Frame::Refuse(why) => {
                tracing::warn!(
                    target_site = self.target.settings.name,
                    "remote site refused: {why}"
                );
                return Err("refused");
            }
            other => {
                tracing::warn!(
                    target_site = self.target.settings.name,
                    "unexpected frame from remote site: {other:?}"
                );
                return Err("protocol error");
            }
        }
        Ok(())
    }

    /// Batch `id` was applied: its partitions settle, its holds are
    /// released, the journal lets go of it.
    fn applied(&mut self, id: u64) {
        self.flow.applied(id);
        let Some(pos) = self.in_flight.iter().position(|b| b.id == id) else {
            return;
        };
        let Some(b) = self.in_flight.remove(pos) else {
            return;
        };
        add(&self.target.stats.events_distributed, b.events);
        for (p, seq) in b.seqs {
            let p = p as usize;
            let Some(c) = self.cur.get_mut(p) else {
                continue;
            };
            c.inflight = c.inflight.saturating_sub(1);
            self.settle(p, seq);
        }
        b.releases.into_iter().for_each(|p| self.release(p));
        self.trim_journal();
    }

    /// The link came up; `applied` is what the target's welcome says it
    /// applied per partition, `incarnation` its data's (a new one: it
    /// started over without its data and is re-synced).
    pub(super) fn linked(&mut self, out: Outlet, applied: Vec<(u16, u64)>, incarnation: u64) {
        self.last_error.clear();
        add(&self.target.stats.connects, 1);
        let restarted =
            incarnation != 0 && self.remote_incarnation.is_some_and(|i| i != incarnation);
        if incarnation != 0 {
            self.remote_incarnation = Some(incarnation);
        }
        if restarted && self.queueing() {
            tracing::warn!(
                target_site = self.target.settings.name,
                "the remote site started over without its data: re-syncing it"
            );
            self.cur.iter_mut().for_each(|c| c.acked = 0);
            // What it had applied is gone with its data.
            self.settling = super::settling::Settling::new(self.parts);
            self.needs_resync();
        }
        for (p, seq) in applied {
            self.raise_acked(p as usize, seq);
        }
        self.rewind();
        self.settling.relinked();
        self.out = Some(out);
        // `wan status` shows the link up now, not at the next refresh.
        self.refresh_status();
    }

    /// The link went down: everything not applied is sent again, in
    /// order: kept bodies first, the journal from its oldest unapplied
    /// record, the logs from what was applied (or spilled).
    pub(super) fn link_down(&mut self, why: &str) {
        self.last_error = format!("link down: {why}");
        if self.out.take().is_some() {
            tracing::warn!(
                target_site = self.target.settings.name,
                "WAN link down ({why}); will reconnect"
            );
            self.last_status = Instant::now() - Duration::from_secs(1);
        }
        self.flow.reset();
        self.cur.iter_mut().for_each(|c| c.inflight = 0);
        let mut kept: VecDeque<Outgoing> = VecDeque::new();
        for b in self.in_flight.drain(..) {
            if let Some(id) = b.journal {
                self.spill.rewind(id);
            }
            if let Some(body) = b.body {
                // Sent once, so it was durable then.
                kept.push_back(Outgoing {
                    body,
                    seqs: b.seqs,
                    after: Vec::new(),
                    keys: Vec::new(),
                    releases: b.releases,
                });
            }
        }
        kept.append(&mut self.outbox);
        self.outbox = kept;
        self.rewind();
    }
}

/// Writes a log entry into a batch body as the log holds it; with `delta`
/// off a delta becomes the key's current full value (what a system without
/// deltas ships).
pub(super) fn put_change(
    body: &mut BytesMut,
    p: u16,
    logged: &Logged,
    delta: bool,
    part: &keyspace::Partition,
    stats: &crate::PublisherStats,
) {
    let is_delta = logged.head.kind == ChangeKind::DELTA_INDEX;
    if is_delta && !delta {
        if let Some(e) = part.get(logged.head.key) {
            let full = Change {
                key: Bytes::copy_from_slice(logged.head.key),
                version: e.version,
                kind: ChangeKind::Full {
                    value: e.value.clone(),
                    expire_at: e.expire_at,
                },
            };
            wire::put_entry(body, p, logged.seq, &full);
            add(&stats.fulls_shipped, 1);
        }
        return;
    }
    wire::put_encoded(body, p, logged.seq, logged.encoded);
    add(
        if is_delta {
            &stats.deltas_shipped
        } else {
            &stats.fulls_shipped
        },
        1,
    );
}

#[cfg(test)]
mod tests {
    use super::super::testing::{seqs, Rig};
    use super::*;

    /// A log is read up to what the partition's replicas hold; the rest
    /// is read once they hold it.
    #[test]
    fn log_reads_stop_at_what_the_replicas_hold() {
        let mut r = Rig::new();
        let (p, first) = r.write("k", "1");
        r.write("k", "2");
        let (_, last) = r.write("k", "3");
        r.site.set_durable(p, first);
        r.link_up();
        r.p.fill();
        let sent = r.sent();
        assert_eq!(seqs(&sent[0].1), vec![(p as u16, first, "k".into())]);
        assert!(r.p.pending.members_from(0).contains(&p), "read again later");
        r.ack(sent[0].0);
        r.hold_over();
        r.p.fill();
        assert!(r.sent().is_empty(), "still not on the replicas");
        r.site.set_durable(p, last);
        r.p.fill();
        let sent = r.sent();
        assert_eq!(
            sent[0].1.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![2, last]
        );
    }

    /// The link broke with batches unapplied: bodies that cannot be read
    /// again (current values) go first, then the logs from what was
    /// applied; the window starts over and nothing is held.
    #[test]
    fn a_broken_link_sends_everything_unapplied_again_in_order() {
        let mut r = Rig::new();
        let (p, _) = r.write("k", "1");
        r.link_up();
        r.p.fill();
        let (logs, _) = r.sent().remove(0);
        r.p.on_frame(Frame::NeedFull(vec![(p as u16, "k".into())]))
            .unwrap();
        r.ack(logs);
        let (_, seq) = r.write("k", "2");
        r.p.flow.window = 9;
        r.hold_over();
        r.p.fill();
        let sent = r.sent();
        assert_eq!(sent.len(), 2, "the full value, then the log");
        assert_eq!(sent[0].1[0].seq, 0);
        assert_eq!(sent[1].1[0].seq, seq);
        r.p.link_down("test");
        assert!(!r.p.connected());
        assert_eq!(r.p.last_error, "link down: test");
        assert!(r.p.in_flight.is_empty());
        assert_eq!(r.p.cur[p].inflight, 0);
        assert_eq!(r.p.flow.window, 4);
        assert!(!r.p.flow.holding());
        r.link_up();
        r.p.fill();
        let again = r.sent();
        assert_eq!(again.len(), 2);
        assert_eq!(seqs(&again[0].1), seqs(&sent[0].1));
        assert_eq!(
            seqs(&again[1].1),
            vec![(p as u16, 1, "k".into()), (p as u16, seq, "k".into())],
            "from `acked`, which the hold kept at 0"
        );
        r.ack(again[0].0);
        r.ack(again[1].0);
        assert_eq!(r.p.cur[p].acked, seq, "the hold was given back too");
    }

    /// The welcome raises what the target applied; a target whose data
    /// incarnation changed started over without its data: re-synced.
    #[test]
    fn a_welcome_from_a_restarted_target_re_syncs_it() {
        let mut r = Rig::new();
        let (p, seq) = r.write("k", "1");
        r.link_up_with(vec![(p as u16, seq)], 7);
        assert_eq!(r.p.cur[p].acked, seq);
        assert_eq!(r.p.cur[p].next, seq + 1);
        assert!(r.p.last_error.is_empty());
        assert!(r.target.status.lock().connected, "shown at once");
        r.p.link_down("test");
        r.link_up_with(Vec::new(), 7);
        assert_eq!(r.target.state(), PublisherState::Replicating);
        r.p.link_down("test");
        r.link_up_with(Vec::new(), 8);
        assert_eq!(r.target.state(), PublisherState::NeedsResync);
        assert_eq!(r.p.cur[p].acked, 0);
        r.p.fill();
        let copied: Vec<_> = r.sent().iter().flat_map(|(_, e)| seqs(e)).collect();
        assert_eq!(copied, vec![(p as u16, 0, "k".into())]);
    }

    /// A refusal or a frame a receiver never sends closes the link.
    #[test]
    fn a_refusal_or_an_unexpected_frame_closes_the_link() {
        let mut r = Rig::new();
        r.link_up();
        assert_eq!(r.p.on_frame(Frame::Refuse("no".into())), Err("refused"));
        assert_eq!(r.p.on_frame(Frame::Proof([0; 32])), Err("protocol error"));
    }
}
