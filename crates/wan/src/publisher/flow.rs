//! Flow control: how large a batch, how many in flight, and when the next
//! batch from the logs may leave.
//!
//! - Batch size: doubles (to [`BATCH_MAX`]) after a batch that the logs
//!   filled, halves (to [`BATCH_MIN`]) when the logs had nothing to send.
//! - Window (batches sent and not yet received): grows by one while round
//!   trips stay near their minimum and the window was full, shrinks by a
//!   quarter when they grow (delay-based: the link is queueing). In
//!   `on-apply` mode one batch is in flight until it is applied.
//! - The small-batch hold: a batch that drained the logs holds the next
//!   one for [`SMALL_BATCH_EVERY`], and one smaller than [`BATCH_MIN`]
//!   also until it is applied (Nagle's rule, with the target's apply time
//!   as the clock), so steady writes leave a few large batches rather than
//!   a large one and then one per change; an isolated write still leaves
//!   at once.

use std::time::{Duration, Instant};

use super::Publisher;
use crate::{AckMode, PublisherState};

pub(super) const BATCH_MIN: usize = 16 << 10;
pub(super) const BATCH_MAX: usize = 1 << 20;
const BATCH_START: usize = 64 << 10;
const WINDOW_MIN: usize = 2;
const WINDOW_MAX: usize = 64;
const WINDOW_START: usize = 4;
/// A batch that drained the logs (not full) is followed by the next one
/// no sooner than this, so a target's fixed work per batch (and both
/// sites' per-batch wake-ups and packets) is shared by more changes; a
/// backlog fills whole batches, which are not held.
pub(super) const SMALL_BATCH_EVERY: Duration = Duration::from_millis(50);
/// A batch not received in this long means the link is gone.
const STALL: Duration = Duration::from_secs(10);
/// Bodies of current values (re-sync copies, full values) are at least
/// this large, so that a copy does not take many round trips.
const BODY_MIN: usize = 256 << 10;

/// Batch size, window and round trips of one target.
#[derive(Debug)]
pub(super) struct Flow {
    /// Largest batch read from the logs.
    pub(super) batch_max: usize,
    /// Bytes the last read of the logs took: the next one starts with room
    /// for as much (a body grown from empty to hundreds of KiB was copied
    /// again at each doubling).
    pub(super) last_read: usize,
    /// Batches sent and not yet received, at most.
    pub(super) window: usize,
    pub(super) rtt_min_us: u64,
    pub(super) rtt_ewma_us: u64,
    /// A small batch read from the logs is on its way and not yet
    /// applied: more changes wait for it to fill the next batch (Nagle).
    /// Waiting for the apply rather than the receipt makes a batch carry
    /// what was written during one apply at the target, so the target's
    /// work per batch (routing, a replica round trip) is shared by many
    /// changes; a backlog fills whole batches, which pipeline as before.
    pub(super) small_in_flight: Option<u64>,
    /// No batch from the logs before this: after one that drained them,
    /// the next waits [`SMALL_BATCH_EVERY`].
    pub(super) hold_until: Option<Instant>,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            batch_max: BATCH_START,
            last_read: 0,
            window: WINDOW_START,
            rtt_min_us: u64::MAX,
            rtt_ewma_us: 0,
            small_in_flight: None,
            hold_until: None,
        }
    }
}

impl Flow {
    /// A batch was received `rtt_us` after it left; `was_full`: the window
    /// was full when it was.
    pub(super) fn received(&mut self, rtt_us: u64, was_full: bool) {
        self.rtt_min_us = self.rtt_min_us.min(rtt_us.max(1));
        self.rtt_ewma_us = if self.rtt_ewma_us == 0 {
            rtt_us
        } else {
            (self.rtt_ewma_us * 7 + rtt_us) / 8
        };
        // Delay-based: grow while the link does not queue.
        if self.rtt_ewma_us > self.rtt_min_us * 3 + 2_000 {
            self.window = (self.window * 3 / 4).max(WINDOW_MIN);
        } else if was_full {
            self.window = (self.window + 1).min(WINDOW_MAX);
        }
    }

    /// Batch `id` was applied: a small batch up to it holds nothing more.
    pub(super) fn applied(&mut self, id: u64) {
        if self.small_in_flight.is_some_and(|s| s <= id) {
            self.small_in_flight = None;
        }
    }

    /// Ends the hold once its time has come.
    pub(super) fn expire_hold(&mut self, now: Instant) {
        if self.hold_until.is_some_and(|t| now >= t) {
            self.hold_until = None;
        }
    }

    /// Whether the next batch from the logs must wait.
    pub(super) fn holding(&self) -> bool {
        self.small_in_flight.is_some() || self.hold_until.is_some()
    }

    /// The logs had nothing to send: batches shrink.
    pub(super) fn drained(&mut self) {
        self.batch_max = (self.batch_max / 2).max(BATCH_MIN);
    }

    /// Batch `id`, `len` bytes read from the logs, left at `now`: a full
    /// one makes the next larger; one that drained the logs holds the
    /// next, a small one also until it is applied.
    pub(super) fn sent_from_logs(&mut self, len: usize, id: u64, now: Instant) {
        let full = len >= self.batch_max;
        if full {
            self.batch_max = (self.batch_max * 2).min(BATCH_MAX);
            return;
        }
        // The logs are drained: what is written next waits to fill a batch
        // rather than leaving one change at a time.
        self.hold_until = Some(now + SMALL_BATCH_EVERY);
        if len < BATCH_MIN {
            self.small_in_flight = Some(id);
        }
    }

    /// The link went down: nothing is held, the window starts over.
    pub(super) fn reset(&mut self) {
        self.small_in_flight = None;
        self.hold_until = None;
        self.window = WINDOW_START;
    }

    /// Largest body of current values (re-sync copies, full values): the
    /// batch size, but not so small that a copy takes many round trips.
    pub(super) fn body_max(&self) -> usize {
        self.batch_max.max(BODY_MIN)
    }
}

impl Publisher {
    pub(super) fn window_full(&self) -> bool {
        match self.target.settings.ack {
            AckMode::OnApply => !self.in_flight.is_empty(),
            AckMode::Pipelined => {
                self.in_flight.iter().filter(|f| !f.received).count() >= self.flow.window
            }
        }
    }

    /// Whether a change written now would be sent at once: otherwise
    /// writes need not wake this publisher.
    pub(super) fn can_send_logs(&self) -> bool {
        self.state() == PublisherState::Replicating
            && self.connected()
            && !self.flow.holding()
            && !self.window_full()
            && !self.outbox_waits
    }

    /// A link that silently stopped carrying (a cable pulled, a peer
    /// frozen) is noticed by acknowledgements that never come.
    pub(super) fn stalled(&self) -> bool {
        self.in_flight
            .iter()
            .find(|b| !b.received)
            .is_some_and(|b| b.sent.elapsed() > STALL)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Options, Rig};
    use super::*;
    use crate::wire::Frame;

    /// Round trips near their minimum: a full window grows by one, to
    /// [`WINDOW_MAX`]; one not full stays. Round trips past three times
    /// the minimum (and 2 ms): it shrinks by a quarter, to [`WINDOW_MIN`].
    #[test]
    fn the_window_grows_while_round_trips_stay_low_and_shrinks_when_they_grow() {
        let mut f = Flow::default();
        f.received(1_000, false);
        assert_eq!(f.window, WINDOW_START, "not full: no reason to grow");
        f.received(1_000, true);
        assert_eq!(f.window, WINDOW_START + 1);
        for _ in 0..100 {
            f.received(1_200, true);
        }
        assert_eq!(f.window, WINDOW_MAX);
        assert_eq!(f.rtt_min_us, 1_000);
        f.received(50_000, true);
        assert!(f.rtt_ewma_us > 5_000);
        assert_eq!(f.window, WINDOW_MAX * 3 / 4, "queueing: a quarter less");
        for _ in 0..100 {
            f.received(50_000, true);
        }
        assert_eq!(f.window, WINDOW_MIN);
        f.reset();
        assert_eq!(f.window, WINDOW_START);
    }

    /// Batches the logs fill double, to [`BATCH_MAX`], and are not held;
    /// logs with nothing to send halve them, to [`BATCH_MIN`].
    #[test]
    fn batches_grow_with_a_backlog_and_shrink_without() {
        let mut f = Flow::default();
        let now = Instant::now();
        for id in 1..10 {
            f.sent_from_logs(f.batch_max, id, now);
        }
        assert_eq!(f.batch_max, BATCH_MAX);
        assert!(!f.holding(), "a backlog is not held");
        assert_eq!(f.body_max(), BATCH_MAX);
        for _ in 0..10 {
            f.drained();
        }
        assert_eq!(f.batch_max, BATCH_MIN);
        assert_eq!(f.body_max(), BODY_MIN, "copies take no more round trips");
    }

    /// A batch that drained the logs holds the next for
    /// [`SMALL_BATCH_EVERY`]; a small one also until it is applied.
    #[test]
    fn a_batch_that_drained_the_logs_holds_the_next() {
        let mut f = Flow::default();
        let now = Instant::now();
        f.sent_from_logs(BATCH_MIN, 1, now);
        assert_eq!(f.hold_until, Some(now + SMALL_BATCH_EVERY));
        assert_eq!(f.small_in_flight, None, "not small");
        f.expire_hold(now + SMALL_BATCH_EVERY / 2);
        assert!(f.holding());
        f.expire_hold(now + SMALL_BATCH_EVERY);
        assert!(!f.holding());
        f.sent_from_logs(100, 2, now);
        f.expire_hold(now + SMALL_BATCH_EVERY);
        assert!(f.holding(), "a small batch holds until it is applied");
        f.applied(1);
        assert!(f.holding());
        f.applied(2);
        assert!(!f.holding());
        f.sent_from_logs(100, 3, now);
        f.reset();
        assert!(!f.holding(), "a broken link holds nothing");
    }

    /// Through the core: a small batch leaves at once, the next write
    /// waits for it to be applied and for the hold, and writes do not wake
    /// the publisher meanwhile.
    #[test]
    fn writes_after_a_small_batch_wait_for_it_and_leave_together() {
        let mut r = Rig::new();
        r.link_up();
        assert!(r.p.can_send_logs());
        r.write("k", "1");
        r.p.fill();
        let (id, _) = r.sent().remove(0);
        assert!(!r.p.can_send_logs());
        r.write("k", "2");
        r.write("k", "3");
        r.hold_over();
        r.p.fill();
        assert!(r.sent().is_empty(), "the small batch is not applied yet");
        r.ack(id);
        assert!(r.p.can_send_logs(), "the hold is over, the batch applied");
        r.p.fill();
        let sent = r.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].1.len(), 2, "both writes in one batch");
    }

    /// The window counts batches not yet received; in `on-apply` mode one
    /// batch is in flight until it is applied.
    #[test]
    fn the_window_counts_batches_not_yet_received() {
        let mut r = Rig::new();
        r.link_up();
        r.p.flow.window = 2;
        for _ in 0..2 {
            r.p.send(bytes::Bytes::new(), Vec::new(), None, None, Vec::new());
        }
        assert!(r.p.window_full());
        r.p.on_frame(Frame::Received(1)).unwrap();
        assert!(!r.p.window_full());
        assert_eq!(
            r.target
                .stats
                .rtt_count
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );

        let mut r = Rig::with(Options {
            ack: crate::AckMode::OnApply,
            ..Default::default()
        });
        r.link_up();
        r.p.send(bytes::Bytes::new(), Vec::new(), None, None, Vec::new());
        r.p.on_frame(Frame::Received(1)).unwrap();
        assert!(r.p.window_full(), "on-apply: received is not enough");
        r.p.on_frame(Frame::Applied(1)).unwrap();
        assert!(!r.p.window_full());
    }

    /// A batch not received within [`STALL`] means the link is gone.
    #[test]
    fn a_batch_never_received_stalls_the_link() {
        let mut r = Rig::new();
        r.link_up();
        r.p.send(bytes::Bytes::new(), Vec::new(), None, None, Vec::new());
        assert!(!r.p.stalled());
        r.p.in_flight[0].sent = Instant::now() - STALL - Duration::from_secs(1);
        assert!(r.p.stalled());
        r.p.on_frame(Frame::Received(1)).unwrap();
        assert!(!r.p.stalled(), "received: only the apply is slow");
    }
}
