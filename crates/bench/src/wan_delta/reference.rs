//! GemFire's published figures for the WAN delta experiment (REFERENCE.md
//! #1) and ours in the same rows, printed side by side (labelled as theirs)
//! and written to the results.

use crate::gemfire::{PhaseResult, Workload};

/// REFERENCE.md #1, VMware GemFire 10.0: (metric, delta off, delta on).
/// The second row is derived (three receivers).
pub const THEIRS: [(&str, &str, &str); 8] = [
    (
        "bytes received/s per receiver, avg",
        "19.9M-22.9M",
        "0.53M-0.64M",
    ),
    (
        "bytes received/s, all receivers, avg",
        "~60M-69M",
        "~1.6M-1.9M",
    ),
    (
        "bytes received/s per receiver, max",
        "41.5M-45.8M",
        "0.76M-0.91M",
    ),
    ("client updates/s (5 threads)", "6,485", "11,970"),
    ("events queued/s per sender, avg", "~3,960", "~7,170"),
    ("events distributed/s per sender, avg", "~2,010", "~3,740"),
    (
        "sender queue size, avg (max)",
        "~670 (3,400)",
        "~510 (3,570)",
    ),
    ("WAN bytes per update (derived)", "~9,900", "~150"),
];

fn m(v: f64) -> String {
    format!("{:.2}M", v / 1e6)
}

fn range(vs: impl Iterator<Item = f64>, f: fn(f64) -> String) -> String {
    let vs: Vec<f64> = vs.collect();
    let (lo, hi) = vs
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    if vs.is_empty() {
        "-".into()
    } else if f(lo) == f(hi) {
        f(lo)
    } else {
        format!("{}-{}", f(lo), f(hi))
    }
}

fn whole(v: f64) -> String {
    format!("{v:.0}")
}

/// Our figures in the rows of `THEIRS`.
pub fn ours(r: &PhaseResult) -> [String; 8] {
    let queue_avg =
        r.events.iter().map(|e| e.queue_avg).sum::<f64>() / r.events.len().max(1) as f64;
    let queue_max = r.events.iter().map(|e| e.queue_max).max().unwrap_or(0);
    [
        range(r.received.iter().map(|s| s.avg_per_s), m),
        m(r.received.iter().map(|s| s.avg_per_s).sum()),
        range(r.received.iter().map(|s| s.max_per_s), m),
        whole(r.update_rate()),
        range(r.events.iter().map(|e| e.queued_per_s), whole),
        range(r.events.iter().map(|e| e.distributed_per_s), whole),
        format!("{queue_avg:.0} ({queue_max})"),
        format!("{:.1}", r.bytes_per_update),
    ]
}

pub fn print_comparison(w: &Workload, off: &PhaseResult, on: &PhaseResult) {
    println!();
    println!(
        "== compared with GemFire 10.0 (theirs: REFERENCE.md #1, 100,000 objects, 300 s, 3+3 servers; ours: {} objects, {} s) ==",
        w.objects, w.seconds
    );
    println!(
        "{:<38} {:>16} {:>16} {:>16} {:>16}",
        "metric", "theirs, off", "ours, off", "theirs, on", "ours, on"
    );
    let (a, b) = (ours(off), ours(on));
    for (i, (metric, t_off, t_on)) in THEIRS.iter().enumerate() {
        println!(
            "{metric:<38} {t_off:>16} {:>16} {t_on:>16} {:>16}",
            a[i], b[i]
        );
    }
    println!(
        "{:<38} {:>16} {:>16.1} {:>16} {:>16.2}",
        "delta on: bytes/update less by, rate x",
        "~66x",
        off.bytes_per_update / on.bytes_per_update.max(0.001),
        "1.85x",
        on.update_rate() / off.update_rate().max(0.001)
    );
}
