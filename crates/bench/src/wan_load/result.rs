//! What one run of `deltagrid bench wan-load` measured: its samples (every
//! node's counters, once a second), each server's end state, the outage's
//! times and the run's summary (`RunResult`), as the JSON results hold them.

use serde::Serialize;

use super::probe::NodeSample;
use super::spec::RunSpec;

/// Backlog: at least this many events queued for site 2 (all site-1 nodes;
/// ~7 MB, a quarter second of a 200 Mbit/s link). Publish lag is no guide:
/// `lag_ms` reads 0 while the backlog sits in the journal.
pub const BACKLOG_EVENTS: u64 = 10_000;

/// Every node's counters and the clients' at one instant of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Seconds since the run's clients started.
    pub t: f64,
    pub writing: bool,
    pub link_up: bool,
    pub site1_ops: u64,
    pub site1_sets: u64,
    pub site2_reads: u64,
    /// SETs of site 2's mirror writers (`wan-off-mirror`; else 0).
    pub site2_sets: u64,
    pub client_errors: u64,
    /// In the order of `RunResult::nodes`.
    pub nodes: Vec<NodeSample>,
}

/// A server process as the run ended.
#[derive(Clone, Debug, Serialize)]
pub struct NodeEnd {
    pub node: String,
    pub site: usize,
    /// VmHWM of the server process at the end of the run (KiB).
    pub peak_rss_kib: u64,
    pub cpu_seconds: f64,
}

/// When the outage run's link went down and came back, and how the
/// publishers recovered.
#[derive(Clone, Debug, Serialize)]
pub struct OutageTimes {
    pub method: String,
    pub down_at_s: f64,
    pub up_at_s: f64,
    /// From the link coming back until site 1's queue was back to its size
    /// before the outage (at a once-a-second sample: at most twice its
    /// highest then, or 1,000 events), or until drained after the writers stopped.
    pub catch_up_seconds: Option<f64>,
    /// First sample after the link came back with every site-1 publisher connected.
    pub reconnected_after_s: Option<f64>,
}

/// One run's summary and samples.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub name: String,
    /// 1.. with --rounds (the name then ends in #round).
    pub round: u32,
    pub spec: RunSpec,
    pub startup_seconds: f64,
    pub preload_seconds: f64,
    /// Seconds the clients ran.
    pub write_seconds: f64,
    pub site1_ops: u64,
    pub site1_sets: u64,
    pub site1_ops_per_s: f64,
    pub site2_reads_per_s: f64,
    /// Site 2's mirror writers' SETs per second (`wan-off-mirror`).
    pub site2_sets_per_s: f64,
    pub client_errors: u64,
    /// Bytes site 1's publishers sent per second: mean over the write phase, highest second.
    pub wan_bytes_per_s_mean: f64,
    pub wan_bytes_per_s_max: f64,
    /// Bytes site 2's receivers read per second (same periods).
    pub wan_received_per_s_mean: f64,
    pub wan_received_per_s_max: f64,
    /// Events applied at site 2 per second, from the clients' start until caught up.
    pub events_distributed_per_s: f64,
    /// Events per batch site 1's publishers sent (all batches, re-sent
    /// ones and copies included): what a batch's fixed cost is shared by.
    pub events_per_batch: f64,
    /// The link's rate per direction in this run (bytes/s), if known.
    pub link_rate_bytes_per_s: Option<f64>,
    /// One-second intervals with a backlog (>= BACKLOG_EVENTS queued at
    /// both ends) and the link up, and bytes site 2 received per second /
    /// link rate over them.
    pub backlog_seconds: usize,
    pub link_utilization_backlog: Option<f64>,
    pub link_utilization_backlog_max: Option<f64>,
    /// The same over the backlog intervals in which the queue shrank.
    pub draining_seconds: usize,
    pub link_utilization_draining: Option<f64>,
    /// Bytes/s site 2 received over the draining intervals.
    pub draining_bytes_per_s: Option<f64>,
    /// Partition log bytes held by site 2's primaries (all nodes) at the
    /// end of the run: what site 2 keeps of the changes it applied.
    pub site2_log_bytes_end: u64,
    pub queue_events_max: u64,
    pub queue_bytes_primary_max: u64,
    pub queue_bytes_backup_max: u64,
    pub journal_bytes_max: u64,
    pub lag_p50_ms: u64,
    pub lag_p99_ms: u64,
    pub lag_max_ms: u64,
    pub caught_up: bool,
    /// From the writers stopping until every site-1 publisher's
    /// events_distributed reached its events_queued (polled every 250 ms).
    pub catch_up_seconds: Option<f64>,
    pub outage: Option<OutageTimes>,
    pub events_queued: u64,
    pub events_distributed: u64,
    /// events_queued - events_distributed at the end (must be 0; negative:
    /// batches applied twice were counted twice).
    pub events_undistributed: i64,
    /// Site 2's receivers: changes applied, and re-sent changes that were
    /// duplicates (over the whole run, preload included).
    pub site2_applied: u64,
    pub site2_duplicates: u64,
    pub keys_compared: usize,
    /// Keys whose value differs between the sites after catch-up (must be 0).
    pub keys_differing: Option<usize>,
    pub differing_examples: Vec<String>,
    pub resyncs: u64,
    pub node_end: Vec<NodeEnd>,
    /// CPU seconds of this process (site 1's clients and the sampling)
    /// and of site 2's reader process, while the clients ran.
    pub client_cpu_seconds: [f64; 2],
    /// CPU seconds of site 1's server processes while the clients ran, and
    /// per client op: what WAN replication costs site 1, which the client
    /// rate shows only when site 1 is CPU-bound (and then with the noise
    /// of everything else on its CPUs).
    pub site1_node_cpu_seconds: f64,
    pub site1_cpu_us_per_op: f64,
    /// CPU time the hypervisor gave to other guests while the clients ran
    /// (all CPUs, /proc/stat steal).
    pub steal_seconds: f64,
    /// (site, node id), the order of every sample's nodes.
    pub nodes: Vec<(usize, String)>,
    pub samples: Vec<Sample>,
}

impl RunResult {
    /// A key differs, or a queued event was never acknowledged as applied.
    /// (A negative difference is not a loss: re-sent events counted twice.)
    pub fn lost(&self) -> bool {
        self.spec.wan && (self.keys_differing != Some(0) || self.events_undistributed > 0)
    }
}

/// The positions of `site`'s nodes in a run's `nodes` (and every sample's).
pub fn site_idx(nodes: &[(usize, String)], site: usize) -> Vec<usize> {
    nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.0 == site)
        .map(|(i, _)| i)
        .collect()
}
