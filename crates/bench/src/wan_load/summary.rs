//! The summary of one run of `deltagrid bench wan-load` from its samples:
//! client and WAN rates, link utilization while a backlog drains, queue
//! and journal highs, publish lag percentiles, events queued against
//! applied.

use super::probe::NodeSample;
use super::result::{site_idx, NodeEnd, OutageTimes, RunResult, Sample, BACKLOG_EVENTS};
use super::spec::{RunSpec, Settings};

/// What a run measured, for `summarize`.
pub struct SummaryInput<'a> {
    pub spec: &'a RunSpec,
    pub s: &'a Settings,
    pub link_bps: Option<f64>,
    pub startup_seconds: f64,
    pub preload_seconds: f64,
    pub write_seconds: f64,
    pub catch_up_seconds: Option<f64>,
    pub outage: Option<OutageTimes>,
    pub keys_differing: Option<usize>,
    pub differing_examples: Vec<String>,
    pub node_end: Vec<NodeEnd>,
    pub client_cpu: [f64; 2],
    pub site1_node_cpu: f64,
    pub steal: f64,
    pub nodes: Vec<(usize, String)>,
    pub samples: Vec<Sample>,
}

/// Nearest rank: the smallest value at or above `p`% of `sorted`.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn summarize(x: SummaryInput) -> RunResult {
    let SummaryInput {
        spec,
        s,
        link_bps,
        samples,
        nodes,
        ..
    } = x;
    let site1 = site_idx(&nodes, 1);
    let site2 = site_idx(&nodes, 2);
    let sum = |idx: &[usize], smp: &Sample, f: fn(&NodeSample) -> u64| -> u64 {
        idx.iter().map(|&i| f(&smp.nodes[i])).sum()
    };
    let first = &samples[0];
    let last = &samples[samples.len() - 1];
    let end_writing = samples.iter().rev().find(|x| x.writing).unwrap_or(first);
    let rate_over = |a: &Sample, b: &Sample, idx: &[usize], f: fn(&NodeSample) -> u64| {
        sum(idx, b, f).saturating_sub(sum(idx, a, f)) as f64 / (b.t - a.t).max(1e-3)
    };
    let mut max_sent: f64 = 0.0;
    let mut max_recv: f64 = 0.0;
    let mut util = Vec::new();
    let mut draining = Vec::new();
    for w in samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if b.t - a.t < 0.5 {
            continue; // the extra sample taken at the drained moment
        }
        let sent = rate_over(a, b, &site1, |n| n.bytes_sent);
        max_sent = max_sent.max(sent);
        // What crossed the link: site 2's count when it answered at both ends.
        let mut crossed = sent;
        if site2.iter().all(|&i| a.nodes[i].ok && b.nodes[i].ok) {
            crossed = rate_over(a, b, &site2, |n| n.bytes_received);
            max_recv = max_recv.max(crossed);
        }
        let queue = |smp: &Sample| sum(&site1, smp, |n| n.queue_events);
        if a.link_up && b.link_up && queue(a) >= BACKLOG_EVENTS && queue(b) >= BACKLOG_EVENTS {
            if let Some(bps) = link_bps {
                util.push(crossed / bps);
            }
            if queue(b) < queue(a) {
                draining.push(crossed);
            }
        }
    }
    let mut lags: Vec<u64> = samples
        .iter()
        .skip(1)
        .flat_map(|smp| site1.iter().map(move |&i| smp.nodes[i].lag_ms))
        .collect();
    lags.sort_unstable();
    let max_total = |f: fn(&NodeSample) -> u64| {
        samples
            .iter()
            .map(|smp| sum(&site1, smp, f))
            .max()
            .unwrap_or(0)
    };
    let events_queued = sum(&site1, last, |n| n.events_queued);
    let events_distributed = sum(&site1, last, |n| n.events_distributed);
    let caught_at = x.catch_up_seconds.map(|c| x.write_seconds + c);
    let dist_span = caught_at.unwrap_or(last.t).max(1e-9);
    let site1_ops = end_writing.site1_ops.max(last.site1_ops);
    RunResult {
        name: spec.name.clone(),
        round: 1,
        spec: spec.clone(),
        startup_seconds: x.startup_seconds,
        preload_seconds: x.preload_seconds,
        write_seconds: x.write_seconds,
        site1_ops,
        site1_sets: last.site1_sets,
        site1_ops_per_s: site1_ops as f64 / x.write_seconds,
        site2_reads_per_s: last.site2_reads as f64 / x.write_seconds,
        site2_sets_per_s: last.site2_sets as f64 / x.write_seconds,
        client_errors: last.client_errors,
        wan_bytes_per_s_mean: rate_over(first, end_writing, &site1, |n| n.bytes_sent),
        wan_bytes_per_s_max: max_sent,
        wan_received_per_s_mean: rate_over(first, end_writing, &site2, |n| n.bytes_received),
        wan_received_per_s_max: max_recv,
        events_distributed_per_s: sum(&site1, last, |n| n.events_distributed).saturating_sub(sum(
            &site1,
            first,
            |n| n.events_distributed,
        )) as f64
            / dist_span,
        events_per_batch: events_distributed as f64
            / sum(&site1, last, |n| n.batches).max(1) as f64,
        link_rate_bytes_per_s: link_bps,
        backlog_seconds: util.len(),
        link_utilization_backlog: (!util.is_empty())
            .then(|| util.iter().sum::<f64>() / util.len() as f64),
        link_utilization_backlog_max: util.iter().copied().reduce(f64::max),
        draining_seconds: draining.len(),
        link_utilization_draining: link_bps
            .filter(|_| !draining.is_empty())
            .map(|bps| draining.iter().sum::<f64>() / draining.len() as f64 / bps),
        draining_bytes_per_s: (!draining.is_empty())
            .then(|| draining.iter().sum::<f64>() / draining.len() as f64),
        site2_log_bytes_end: sum(&site2, last, |n| n.queue_bytes_primary),
        queue_events_max: max_total(|n| n.queue_events),
        queue_bytes_primary_max: max_total(|n| n.queue_bytes_primary),
        queue_bytes_backup_max: max_total(|n| n.queue_bytes_backup),
        journal_bytes_max: max_total(|n| n.journal_bytes),
        lag_p50_ms: percentile(&lags, 50.0),
        lag_p99_ms: percentile(&lags, 99.0),
        lag_max_ms: lags.last().copied().unwrap_or(0),
        caught_up: x.catch_up_seconds.is_some(),
        catch_up_seconds: x.catch_up_seconds,
        outage: x.outage,
        events_queued,
        events_distributed,
        events_undistributed: events_queued as i64 - events_distributed as i64,
        site2_applied: sum(&site2, last, |n| n.applied),
        site2_duplicates: sum(&site2, last, |n| n.duplicates),
        keys_compared: if spec.wan { s.keys } else { 0 },
        keys_differing: x.keys_differing,
        differing_examples: x.differing_examples,
        resyncs: sum(&site1, last, |n| n.resyncs),
        node_end: x.node_end,
        client_cpu_seconds: x.client_cpu,
        site1_node_cpu_seconds: x.site1_node_cpu,
        site1_cpu_us_per_op: x.site1_node_cpu * 1e6 / site1_ops.max(1) as f64,
        steal_seconds: x.steal,
        nodes,
        samples,
    }
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }
}
