//! What `wan status` and the metrics show of a target: refreshed by its
//! publisher every 500 ms and when the link comes up.

use std::time::{Duration, Instant};

use super::Publisher;
use crate::PublisherState;

/// How often the status is refreshed.
const REFRESH_EVERY: Duration = Duration::from_millis(500);

/// What `wan status` shows for a target, refreshed by the publisher.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Snapshot {
    pub connected: bool,
    pub endpoint: String,
    /// Log entries of primary partitions not yet applied by the target.
    pub queue_events: u64,
    /// Partition log bytes held in memory: primaries, and replicas' copies.
    pub queue_bytes_primary: u64,
    pub queue_bytes_backup: u64,
    pub journal_bytes: u64,
    /// Age of the oldest change not yet applied by the target.
    pub lag_ms: u64,
    pub in_flight: usize,
    pub window: usize,
    pub batch_bytes: usize,
    pub rtt_us: u64,
    /// Why the link is down, when it is (empty while it is up): the last
    /// failed connect ("authentication failed: ...", "connect timed out")
    /// or disconnect.
    pub last_error: String,
}

impl Publisher {
    /// Refreshes the status if [`REFRESH_EVERY`] passed since the last
    /// time.
    pub(super) fn refresh_status_due(&mut self) {
        if self.last_status.elapsed() >= REFRESH_EVERY {
            self.last_status = Instant::now();
            self.refresh_status();
        }
    }

    pub(super) fn refresh_status(&mut self) {
        let now_ms = self.wan.ks.now_ms();
        let site = self.my_site();
        let mut scan_budget: u64 = 1 << 20;
        let mut s = Snapshot {
            connected: self.connected(),
            endpoint: self
                .out
                .as_ref()
                .map(|o| o.endpoint.clone())
                .unwrap_or_default(),
            journal_bytes: self.spill.bytes(),
            in_flight: self.in_flight.len(),
            window: self.flow.window,
            batch_bytes: self.flow.batch_max,
            rtt_us: self.flow.rtt_ewma_us,
            last_error: self.last_error.clone(),
            ..Default::default()
        };
        // Only the partitions this node is primary for are visited; the
        // replicas' copies are the rest of the logs' running total.
        for p in (0..self.parts).filter(|&p| self.cur[p].owned) {
            let acked = self.cur[p].acked;
            self.wan.ks.with_partition(p, |part, _| {
                if part.replica {
                    return;
                }
                s.queue_bytes_primary += part.log.allocated() as u64;
                // Only changes that originated here are queued for the
                // site; past a scan budget, every unacknowledged entry
                // counts (an upper bound), so a status never holds a
                // partition lock for long.
                let unacked = part.log.next_seq().saturating_sub(acked + 1);
                let Some(it) = part.log.read_from(acked + 1) else {
                    s.queue_events += unacked;
                    return;
                };
                if unacked > scan_budget {
                    s.queue_events += unacked;
                    if let Some(l) = it.take(1000).find(|l| l.head.ships_from(site)) {
                        s.lag_ms = s.lag_ms.max(now_ms.saturating_sub(l.head.version.millis()));
                    }
                    return;
                }
                scan_budget -= unacked;
                let mut first = true;
                for l in it.filter(|l| l.head.ships_from(site)) {
                    if first {
                        s.lag_ms = s.lag_ms.max(now_ms.saturating_sub(l.head.version.millis()));
                        first = false;
                    }
                    s.queue_events += 1;
                }
            });
        }
        s.queue_bytes_backup =
            (self.wan.ks.log_bytes() as u64).saturating_sub(s.queue_bytes_primary);
        if let Some(oldest) = self.spill.oldest_ms() {
            s.lag_ms = s.lag_ms.max(now_ms.saturating_sub(oldest));
        }
        if self.state() == PublisherState::Stopped {
            s.queue_events = 0;
            s.lag_ms = 0;
        }
        *self.target.status.lock() = s;
    }
}
