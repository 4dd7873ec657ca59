//! Output of the latency benchmark: the headline table (what the issue and
//! docs/benchmarks.md quote), a detail table with every statistic, and the
//! same data as JSON for charts. Tables are Markdown so they paste as is.

use std::path::Path;

use serde::Serialize;

use super::{LatencyArgs, WorkloadResult};
use crate::stats::Summary;

#[derive(Serialize)]
struct JsonReport<'a> {
    target: &'a str,
    ops: u64,
    warmup: u64,
    /// Ops per second; 0 = unthrottled.
    rate: u64,
    /// Each op was followed by `WAIT wait_replicas 0` (0 = not).
    wait_replicas: u32,
    unit: &'static str,
    results: &'a [WorkloadResult],
}

pub fn write_json(
    path: &Path,
    target: &str,
    args: &LatencyArgs,
    results: &[WorkloadResult],
) -> anyhow::Result<()> {
    let report = JsonReport {
        target,
        ops: args.ops,
        warmup: args.warmup,
        rate: args.rate,
        wait_replicas: args.wait_replicas,
        unit: "microseconds",
        results,
    };
    std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
    Ok(())
}

pub fn print(target: &str, args: &LatencyArgs, results: &[WorkloadResult]) {
    let rate = match args.rate {
        0 => "unthrottled".to_string(),
        r => format!("{r} ops/s"),
    };
    let wait = match args.wait_replicas {
        0 => String::new(),
        n => format!(", each op followed by WAIT {n} 0 in the same write (timed to its reply)"),
    };
    println!();
    println!(
        "Latency against {target}: one client, one op in flight, TCP_NODELAY, \
         {} ops after {} warm-up, {rate}{wait}. Times in µs.",
        args.ops, args.warmup
    );
    println!();

    let headline: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let floor = r.echo_floor.as_ref().map(|f| f.p50_us);
            match (&r.server, &r.error) {
                (Some(s), _) => vec![
                    r.label.clone(),
                    us(s.avg_best_80_us),
                    us(s.p50_us),
                    us(s.p99_us),
                    us(s.p999_us),
                    floor.map_or("-".into(), us),
                    floor.map_or("-".into(), |f| us(s.p50_us - f)),
                ],
                (None, error) => {
                    let why = error.as_deref().unwrap_or("no result");
                    let mut row = vec![r.label.clone(), format!("FAILED: {why}")];
                    row.extend(["", "", ""].map(String::from));
                    row.push(floor.map_or("-".into(), us));
                    row.push(String::new());
                    row
                }
            }
        })
        .collect();
    table(
        &[
            "workload",
            "avg best 80%",
            "p50",
            "p99",
            "p99.9",
            "echo floor p50",
            "p50 minus floor",
        ],
        &headline,
    );

    println!();
    let mut detail = Vec::new();
    for r in results {
        if let Some(s) = &r.server {
            detail.push(detail_row(&r.label, "server", r.request_bytes, s));
        }
        if let Some(f) = &r.echo_floor {
            detail.push(detail_row(&r.label, "echo floor", r.request_bytes, f));
        }
    }
    table(
        &[
            "workload",
            "against",
            "request B",
            "avg best 80%",
            "mean",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
        ],
        &detail,
    );
}

fn detail_row(label: &str, against: &str, bytes: usize, s: &Summary) -> Vec<String> {
    vec![
        label.to_string(),
        against.to_string(),
        bytes.to_string(),
        us(s.avg_best_80_us),
        us(s.mean_us),
        us(s.p50_us),
        us(s.p90_us),
        us(s.p99_us),
        us(s.p999_us),
        us(s.max_us),
    ]
}

fn us(v: f64) -> String {
    format!("{v:.1}")
}

/// A Markdown table: first column left-aligned, the rest right-aligned.
fn table(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, &w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    line(headers.iter().map(|h| h.to_string()).collect());
    let rule: Vec<String> = widths
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            if i == 0 {
                "-".repeat(w + 2)
            } else {
                format!("{}:", "-".repeat(w + 1))
            }
        })
        .collect();
    println!("|{}|", rule.join("|"));
    for row in rows {
        line(row.clone());
    }
}
