//! Node metrics, rendered in Prometheus text format on the admin port.
//!
//! Each node owns its own recorder (not the process-global one) so that
//! several nodes in one process (the demo, tests) keep separate numbers.
//! Per-command handles are registered once, on a command's first use, and
//! then cost an atomic add and a histogram sample per call. Gauges and the
//! keyspace's change counters are copied in when `/metrics` is scraped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use commands::{CommandSpec, TABLE};
use keyspace::ChangeKind;
use metrics::{Counter, Gauge, Histogram, Key, Label, Level, Metadata, Recorder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

const META: Metadata<'static> = Metadata::new("deltagrid", Level::INFO, None);

/// Latency buckets in seconds: 10 µs .. 1 s.
const BUCKETS: [f64; 14] =
    [1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 0.25, 1.0];

pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    per_command: Box<[OnceLock<(Counter, Histogram)>]>,
    pub commands_processed: AtomicU64,
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub oom_rejections: AtomicU64,
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
            per_command: TABLE.iter().map(|_| OnceLock::new()).collect(),
            commands_processed: AtomicU64::new(0),
            connections_received: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
            oom_rejections: AtomicU64::new(0),
        }
    }

    fn counter(&self, name: &'static str, labels: Vec<Label>) -> Counter {
        self.recorder.register_counter(&Key::from_parts(name, labels), &META)
    }

    fn gauge(&self, name: &'static str) -> Gauge {
        self.recorder.register_gauge(&Key::from_name(name), &META)
    }

    /// Records one executed command and how long it took.
    pub fn command(&self, spec: &'static CommandSpec, took: Duration) {
        self.commands_processed.fetch_add(1, Ordering::Relaxed);
        let i = table_index(spec);
        let (calls, latency) = self.per_command[i].get_or_init(|| {
            let labels = vec![Label::new("command", spec.name)];
            (
                self.counter("deltagrid_commands_total", labels.clone()),
                self.recorder.register_histogram(&Key::from_parts("deltagrid_command_duration_seconds", labels), &META),
            )
        });
        calls.increment(1);
        latency.record(took.as_secs_f64());
    }

    /// Renders all metrics; `snapshot` supplies the values read at scrape time.
    pub fn render(&self, s: &Snapshot) -> String {
        self.gauge("deltagrid_connected_clients").set(s.connected_clients as f64);
        self.gauge("deltagrid_keys").set(s.keys as f64);
        self.gauge("deltagrid_keys_with_expiry").set(s.expires as f64);
        self.gauge("deltagrid_memory_used_bytes").set(s.used_memory as f64);
        self.gauge("deltagrid_memory_max_bytes").set(s.maxmemory as f64);
        self.gauge("deltagrid_partition_log_bytes").set(s.log_bytes as f64);
        self.gauge("deltagrid_tracking_keys").set(s.tracked_keys as f64);
        for (i, kind) in ChangeKind::NAMES.iter().enumerate() {
            let labels = vec![Label::new("kind", *kind)];
            self.counter("deltagrid_changes_total", labels.clone()).absolute(s.changes[i]);
            self.counter("deltagrid_change_bytes_total", labels).absolute(s.change_bytes[i]);
        }
        self.counter("deltagrid_delta_bytes_saved_total", vec![]).absolute(s.delta_bytes_saved);
        let totals = [
            ("deltagrid_connections_received_total", &self.connections_received),
            ("deltagrid_connections_rejected_total", &self.rejected_connections),
            ("deltagrid_protocol_errors_total", &self.protocol_errors),
            ("deltagrid_oom_rejections_total", &self.oom_rejections),
        ];
        for (name, v) in totals {
            self.counter(name, vec![]).absolute(v.load(Ordering::Relaxed));
        }
        self.handle.render()
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
    pub changes: [u64; 4],
    pub change_bytes: [u64; 4],
    pub delta_bytes_saved: u64,
}

fn table_index(spec: &'static CommandSpec) -> usize {
    // Specs are elements of TABLE, so the offset is the index.
    let base = TABLE.as_ptr() as usize;
    (spec as *const CommandSpec as usize - base) / std::mem::size_of::<CommandSpec>()
}
