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
