//! Node metrics, rendered in Prometheus text format on the admin port.
//!
//! Each node owns its own recorder (not the process-global one) so that
//! several nodes in one process (the demo, tests) keep separate numbers.
//! Gauges and the keyspace's change counters are copied into it when
//! `/metrics` is scraped.
//!
//! Per-command calls and latency are kept in plain atomics indexed by the
//! command table and rendered by hand: the recorder's histograms read a
//! clock and append to a shared bucket list on every sample, which showed
//! in profiles of the command path; a fixed-bucket histogram costs two
//! atomic adds. Each thread adds to its own shard of these counters (a
//! shared counter written by every core per command showed as cache-line
//! traffic under pipelined load), with plain stores where it is the shard's
//! only writer ([`CounterShard`]); `/metrics` and INFO sum the shards.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use commands::{CommandSpec, TABLE};
use keyspace::ChangeKind;
use metrics::{Counter, Gauge, Key, Label, Level, Metadata, Recorder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

use crate::thread_shard::CounterShard;

const META: Metadata<'static> = Metadata::new("deltagrid", Level::INFO, None);

/// Latency buckets in seconds: 10 µs .. 1 s.
const BUCKETS: [f64; 14] = [
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 0.25, 1.0,
];

/// Per-command counters owned by one thread each: the process's first
/// threads to be numbered (a thread is numbered at its first allocation,
/// so the runtime's workers are among them unless there are many); after
/// them come as many shared by later threads, which add with locked
/// instructions.
const SHARDS: usize = 8;

/// Calls and a fixed-bucket latency histogram for one command (128 bytes:
/// two cache lines of its own).
#[derive(Default)]
#[repr(align(128))]
struct CommandStats {
    /// Count per bucket (not cumulative); the last is +Inf.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// `2 * SHARDS` copies of the command table's stats, shard after
    /// shard: `SHARDS` owned, then `SHARDS` shared.
    per_command: Box<[CommandStats]>,
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    /// TLS connections whose handshake failed or timed out.
    pub tls_handshake_failures: AtomicU64,
    pub protocol_errors: AtomicU64,
    /// Admin requests refused for want of the admin token.
    pub admin_refused: AtomicU64,
    pub oom_rejections: AtomicU64,
    /// Error replies (INFO errorstats, commandstats' failed and rejected
    /// calls), under a lock: an error is rarer than a command.
    errors: parking_lot::Mutex<ErrorStats>,
}

/// Distinct error prefixes INFO errorstats keeps (Redis's limit too).
const MAX_ERROR_PREFIXES: usize = 128;

#[derive(Default)]
struct ErrorStats {
    total: u64,
    /// First word of the error ("ERR", "WRONGTYPE", "MOVED") -> count.
    prefixes: std::collections::BTreeMap<String, u64>,
    /// Per command table index: (rejected before it ran, failed while running).
    per_command: std::collections::HashMap<usize, (u64, u64)>,
}

/// One command's line of INFO commandstats.
pub struct CommandLine {
    pub name: &'static str,
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets(&BUCKETS)
            .expect("bucket list is non-empty")
            .build_recorder();
        let handle = recorder.handle();
        Metrics {
            recorder,
            handle,
            per_command: (0..2 * SHARDS * TABLE.len())
                .map(|_| CommandStats::default())
                .collect(),
            connections_received: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            tls_handshake_failures: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
            admin_refused: AtomicU64::new(0),
            oom_rejections: AtomicU64::new(0),
            errors: Default::default(),
        }
    }

    fn counter(&self, name: &'static str, labels: Vec<Label>) -> Counter {
        self.recorder
            .register_counter(&Key::from_parts(name, labels), &META)
    }

    fn gauge(&self, name: &'static str) -> Gauge {
        self.recorder.register_gauge(&Key::from_name(name), &META)
    }

    /// Records one executed command and how long it took.
    pub fn command(&self, spec: &'static CommandSpec, took: Duration) {
        let secs = took.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        let shard = CounterShard::of_this_thread(SHARDS);
        let stats = &self.per_command[shard.index * TABLE.len() + table_index(spec)];
        shard.add(&stats.buckets[bucket], 1);
        shard.add(&stats.sum_ns, took.as_nanos() as u64);
    }

    /// An error reply: `rejected` before the command ran (unknown, arity,
    /// auth, routing, OOM), else it failed while running.
    pub fn error(&self, spec: Option<&'static CommandSpec>, message: &str, rejected: bool) {
        let prefix = message.split(' ').next().unwrap_or("ERR");
        let mut e = self.errors.lock();
        e.total += 1;
        if let Some(n) = e.prefixes.get_mut(prefix) {
            *n += 1;
        } else if e.prefixes.len() < MAX_ERROR_PREFIXES {
            e.prefixes.insert(prefix.to_string(), 1);
        }
        if let Some(spec) = spec {
            let c = e.per_command.entry(table_index(spec)).or_default();
            if rejected {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
    }

    /// Error replies so far (INFO total_error_replies).
    pub fn error_replies(&self) -> u64 {
        self.errors.lock().total + self.protocol_errors.load(Ordering::Relaxed)
    }

    /// (prefix, count) of the errors replied, for INFO errorstats.
    pub fn errorstats(&self) -> Vec<(String, u64)> {
        let e = self.errors.lock();
        e.prefixes.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    /// Every command called or refused so far, for INFO commandstats.
    pub fn commandstats(&self) -> Vec<CommandLine> {
        let e = self.errors.lock();
        TABLE
            .iter()
            .enumerate()
            .filter_map(|(i, spec)| {
                let (buckets, sum_ns) = self.command_totals(i);
                let (rejected, failed) = e.per_command.get(&i).copied().unwrap_or_default();
                let seen: u64 = buckets.iter().sum();
                (seen > 0 || rejected > 0).then(|| CommandLine {
                    name: spec.name,
                    calls: seen.saturating_sub(rejected),
                    usec: sum_ns / 1000,
                    rejected,
                    failed,
                })
            })
            .collect()
    }

    /// Commands executed so far, of every kind.
    pub fn commands_processed(&self) -> u64 {
        self.per_command
            .iter()
            .flat_map(|s| &s.buckets)
            .map(|b| b.load(Ordering::Relaxed))
            .sum()
    }

    /// Calls per latency bucket and the summed latency of command `i` of
    /// the table, over every shard.
    fn command_totals(&self, i: usize) -> ([u64; BUCKETS.len() + 1], u64) {
        let mut buckets = [0u64; BUCKETS.len() + 1];
        let mut sum_ns = 0;
        for stats in self.per_command.iter().skip(i).step_by(TABLE.len()) {
            for (total, b) in buckets.iter_mut().zip(&stats.buckets) {
                *total += b.load(Ordering::Relaxed);
            }
            sum_ns += stats.sum_ns.load(Ordering::Relaxed);
        }
        (buckets, sum_ns)
    }

    /// Commands seen so far, in Prometheus text.
    fn render_commands(&self, out: &mut String) {
        use std::fmt::Write;
        let seen: Vec<(&str, Vec<u64>, u64)> = TABLE
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let (buckets, sum_ns) = self.command_totals(i);
                (spec.name, buckets.to_vec(), sum_ns)
            })
            .filter(|(_, buckets, _)| buckets.iter().any(|&n| n > 0))
            .collect();
        let _ = writeln!(out, "# TYPE deltagrid_commands_total counter");
        for (name, buckets, _) in &seen {
            let _ = writeln!(
                out,
                "deltagrid_commands_total{{command=\"{name}\"}} {}",
                buckets.iter().sum::<u64>()
            );
        }
        let _ = writeln!(out, "\n# TYPE deltagrid_command_duration_seconds histogram");
        for (name, buckets, sum_ns) in &seen {
            let mut cumulative = 0;
            for (i, n) in buckets.iter().enumerate() {
                cumulative += n;
                let le = BUCKETS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
                let _ = writeln!(
                    out,
                    "deltagrid_command_duration_seconds_bucket{{command=\"{name}\",le=\"{le}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "deltagrid_command_duration_seconds_sum{{command=\"{name}\"}} {}",
                *sum_ns as f64 / 1e9
            );
            let _ = writeln!(
                out,
                "deltagrid_command_duration_seconds_count{{command=\"{name}\"}} {cumulative}"
            );
        }
    }

    /// WAN metrics, labelled `target_site` (publisher) or `source_site`
    /// (receiver).
    fn render_wan(&self, w: &wan::WanStatus) {
        for t in &w.targets {
            let l = || vec![Label::new("target_site", t.name.clone())];
            let c = |name: &'static str, v: u64| self.counter(name, l()).absolute(v);
            c("deltagrid_wan_bytes_sent_total", t.bytes_sent);
            c("deltagrid_wan_events_queued_total", t.events_queued);
            c(
                "deltagrid_wan_events_distributed_total",
                t.events_distributed,
            );
            c("deltagrid_wan_batches_total", t.batches);
            c("deltagrid_wan_deltas_shipped_total", t.deltas_shipped);
            c("deltagrid_wan_full_values_shipped_total", t.fulls_shipped);
            c("deltagrid_wan_full_value_fallbacks_total", t.full_fallbacks);
            c("deltagrid_wan_resyncs_total", t.resyncs);
            c("deltagrid_wan_partition_copies_total", t.partition_copies);
            c("deltagrid_wan_spilled_events_total", t.spilled_events);
            c("deltagrid_wan_spilled_bytes_total", t.spilled_bytes);
            let g = |name: &'static str, extra: Option<(&'static str, &'static str)>, v: f64| {
                let mut labels = l();
                if let Some((k, val)) = extra {
                    labels.push(Label::new(k, val));
                }
                self.recorder
                    .register_gauge(&Key::from_parts(name, labels), &META)
                    .set(v);
            };
            let snap = &t.snapshot;
            g("deltagrid_wan_queue_events", None, snap.queue_events as f64);
            g(
                "deltagrid_wan_queue_bytes",
                Some(("copy", "primary")),
                snap.queue_bytes_primary as f64,
            );
            g(
                "deltagrid_wan_queue_bytes",
                Some(("copy", "backup")),
                snap.queue_bytes_backup as f64,
            );
            g(
                "deltagrid_wan_queue_bytes",
                Some(("copy", "journal")),
                snap.journal_bytes as f64,
            );
            g(
                "deltagrid_wan_lag_seconds",
                None,
                snap.lag_ms as f64 / 1000.0,
            );
            g(
                "deltagrid_wan_batch_round_trip_seconds",
                None,
                t.batch_rtt_avg_us as f64 / 1e6,
            );
            g("deltagrid_wan_connected", None, snap.connected as u8 as f64);
            for state in ["replicating", "paused", "stopped", "needs-resync"] {
                g(
                    "deltagrid_wan_state",
                    Some(("state", state)),
                    (t.state == state) as u8 as f64,
                );
            }
        }
        for src in &w.sources {
            let name = if src.site_name.is_empty() {
                src.site_id.to_string()
            } else {
                src.site_name.clone()
            };
            let c = |metric: &'static str, v: u64| {
                self.counter(metric, vec![Label::new("source_site", name.clone())])
                    .absolute(v)
            };
            c("deltagrid_wan_bytes_received_total", src.bytes_received);
            c("deltagrid_wan_batches_received_total", src.batches);
            c("deltagrid_wan_events_received_total", src.events_received);
            c("deltagrid_wan_events_applied_total", src.applied);
            c("deltagrid_wan_duplicates_total", src.duplicates);
            c("deltagrid_wan_conflicts_lost_total", src.conflicts_lost);
            c("deltagrid_wan_full_values_requested_total", src.need_full);
            c("deltagrid_wan_refused_total", src.refused);
        }
        self.gauge("deltagrid_tombstones").set(w.tombstones as f64);
        self.counter("deltagrid_tombstones_evicted_unsettled_total", Vec::new())
            .absolute(w.tombstones_evicted_unsettled);
        for s in &w.settled {
            let labels = vec![Label::new("source_site", s.site_name.clone())];
            self.recorder
                .register_gauge(
                    &Key::from_parts("deltagrid_wan_settled_lowest_seconds", labels),
                    &META,
                )
                .set((s.lowest_hlc >> 16) as f64 / 1000.0);
        }
    }

    /// Renders all metrics; `snapshot` supplies the values read at scrape time.
    pub fn render(&self, s: &Snapshot) -> String {
        self.gauge("deltagrid_connected_clients")
            .set(s.connected_clients as f64);
        self.gauge("deltagrid_keys").set(s.keys as f64);
        self.gauge("deltagrid_keys_with_expiry")
            .set(s.expires as f64);
        self.gauge("deltagrid_memory_used_bytes")
            .set(s.used_memory as f64);
        self.gauge("deltagrid_memory_rss_bytes")
            .set(crate::memory::rss() as f64);
        self.gauge("deltagrid_memory_peak_bytes")
            .set(crate::memory::peak() as f64);
        self.gauge("deltagrid_memory_max_bytes")
            .set(s.maxmemory as f64);
        self.gauge("deltagrid_partition_log_bytes")
            .set(s.log_bytes as f64);
        self.gauge("deltagrid_tracking_keys")
            .set(s.tracked_keys as f64);
        for (i, kind) in ChangeKind::NAMES.iter().enumerate() {
            let labels = vec![Label::new("kind", *kind)];
            self.counter("deltagrid_changes_total", labels.clone())
                .absolute(s.changes[i]);
            self.counter("deltagrid_change_bytes_total", labels)
                .absolute(s.change_bytes[i]);
        }
        self.counter("deltagrid_delta_bytes_saved_total", vec![])
            .absolute(s.delta_bytes_saved);
        self.counter("deltagrid_clock_ahead_total", vec![])
            .absolute(s.clock_ahead);
        if let Some(site) = &s.site {
            self.gauge("deltagrid_partition_table_epoch")
                .set(site.epoch as f64);
            self.counter("deltagrid_primary_changes_total", vec![])
                .absolute(site.primary_changes);
            self.gauge("deltagrid_partitions_migrating")
                .set(site.migrating as f64);
            self.gauge("deltagrid_lease_held")
                .set(site.lease as u8 as f64);
            self.counter("deltagrid_handovers_total", vec![])
                .absolute(site.handovers);
            for m in &site.members {
                let g = |name: &'static str, v: f64| {
                    let labels = vec![Label::new("node", m.node_id.clone())];
                    self.recorder
                        .register_gauge(&Key::from_parts(name, labels), &META)
                        .set(v);
                };
                g("deltagrid_member_up", m.connected as u8 as f64);
                g("deltagrid_partitions_primary", m.primaries as f64);
                g("deltagrid_partitions_backup", m.replicas as f64);
                g("deltagrid_partitions_in_sync", m.in_sync as f64);
                if !m.myself {
                    g(
                        "deltagrid_replication_pending_bytes",
                        m.pending_bytes as f64,
                    );
                    g("deltagrid_replication_lag_changes", m.lag_changes as f64);
                }
            }
        }
        if let Some(w) = &s.wan {
            self.render_wan(w);
        }
        if let Some(p) = &s.persist {
            self.counter("deltagrid_persist_fsyncs_total", vec![])
                .absolute(p.fsyncs);
            self.counter("deltagrid_persist_fsync_microseconds_total", vec![])
                .absolute(p.fsync_micros_total);
            self.gauge("deltagrid_persist_fsync_seconds_mean")
                .set(p.fsync_micros_total as f64 / 1e6 / p.fsyncs.max(1) as f64);
            self.gauge("deltagrid_persist_log_bytes")
                .set(p.log_bytes as f64);
            self.gauge("deltagrid_persist_snapshot_bytes")
                .set(p.snapshot_bytes as f64);
            self.counter("deltagrid_persist_snapshots_total", vec![])
                .absolute(p.snapshots);
            self.gauge("deltagrid_persist_changes_since_snapshot")
                .set(p.changes_since_snapshot as f64);
            self.gauge("deltagrid_persist_write_ok")
                .set(p.write_ok as u8 as f64);
        }
        let totals = [
            (
                "deltagrid_connections_received_total",
                &self.connections_received,
            ),
            (
                "deltagrid_connections_rejected_total",
                &self.rejected_connections,
            ),
            (
                "deltagrid_tls_handshake_failures_total",
                &self.tls_handshake_failures,
            ),
            ("deltagrid_protocol_errors_total", &self.protocol_errors),
            ("deltagrid_admin_refused_total", &self.admin_refused),
            ("deltagrid_oom_rejections_total", &self.oom_rejections),
        ];
        for (name, v) in totals {
            self.counter(name, vec![])
                .absolute(v.load(Ordering::Relaxed));
        }
        let mut out = self.handle.render();
        out.push('\n');
        self.render_commands(&mut out);
        out
    }
}

/// Values read from the node when metrics are scraped.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub connected_clients: usize,
    pub keys: usize,
    pub expires: usize,
    pub used_memory: usize,
    pub maxmemory: u64,
    pub log_bytes: usize,
    pub tracked_keys: usize,
    pub changes: [u64; keyspace::stats::KINDS],
    pub change_bytes: [u64; keyspace::stats::KINDS],
    pub delta_bytes_saved: u64,
    /// Versions from peers or remote sites further ahead of this node's
    /// clock than `max_clock_offset`.
    pub clock_ahead: u64,
    pub site: Option<cluster::SiteStatus>,
    pub wan: Option<wan::WanStatus>,
    /// Local persistence's figures, when it is on.
    pub persist: Option<PersistFigures>,
}

/// What local persistence reports to /metrics.
#[derive(Debug, Default)]
pub struct PersistFigures {
    pub fsyncs: u64,
    pub fsync_micros_total: u64,
    pub log_bytes: u64,
    pub snapshot_bytes: u64,
    pub snapshots: u64,
    pub changes_since_snapshot: u64,
    pub write_ok: bool,
}

pub(crate) fn table_index(spec: &'static CommandSpec) -> usize {
    // Specs are elements of TABLE, so the offset is the index.
    let base = TABLE.as_ptr() as usize;
    (spec as *const CommandSpec as usize - base) / std::mem::size_of::<CommandSpec>()
}
