//! The statistics of one phase of the GemFire workload, from its
//! once-a-second samples: bytes received per site-2 node, events queued and
//! distributed and queue size per site-1 node, WAN bytes per update.

use super::sites::Node;
use super::{NodeCounters, PhaseResult, ReceiverStats, Sample, SenderStats};

/// The phase's result; `samples` start with the one taken as the writers
/// started and hold the catching-up ones (`writing` false) after theirs.
#[allow(clippy::too_many_arguments)]
pub(super) fn summarize(
    nodes: &[Node],
    delta: bool,
    updates: Vec<u64>,
    seconds: f64,
    catch_up_seconds: f64,
    samples: Vec<Sample>,
    identical: bool,
    keys: usize,
) -> PhaseResult {
    let (first, last) = (&samples[0], &samples[samples.len() - 1]);
    let writing: Vec<&Sample> = samples.iter().filter(|s| s.writing).collect();
    let end = writing[writing.len() - 1];
    let span = (end.t - first.t).max(1e-9);
    let mut received = Vec::new();
    let mut events = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.site == 2 {
            let max_per_s = samples
                .windows(2)
                .map(|w| {
                    w[1].nodes[i]
                        .received
                        .saturating_sub(w[0].nodes[i].received) as f64
                        / (w[1].t - w[0].t).max(1e-3)
                })
                .fold(0.0, f64::max);
            let during = end.nodes[i]
                .received
                .saturating_sub(first.nodes[i].received);
            received.push(ReceiverStats {
                node: n.id.clone(),
                avg_per_s: during as f64 / span,
                max_per_s,
            });
        } else {
            let rate = |f: fn(&NodeCounters) -> u64| {
                f(&end.nodes[i]).saturating_sub(f(&first.nodes[i])) as f64 / span
            };
            let queues: Vec<u64> = writing.iter().map(|s| s.nodes[i].queue).collect();
            events.push(SenderStats {
                node: n.id.clone(),
                queued_per_s: rate(|c| c.queued),
                distributed_per_s: rate(|c| c.distributed),
                queue_avg: queues.iter().sum::<u64>() as f64 / queues.len() as f64,
                queue_max: samples.iter().map(|s| s.nodes[i].queue).max().unwrap_or(0),
            });
        }
    }
    let site2 = |s: &Sample| {
        nodes
            .iter()
            .zip(&s.nodes)
            .filter(|(n, _)| n.site == 2)
            .map(|(_, c)| c.received)
            .sum::<u64>()
    };
    let bytes_received = site2(last) - site2(first);
    let total_updates: u64 = updates.iter().sum();
    PhaseResult {
        delta,
        blob: false,
        updates,
        seconds,
        catch_up_seconds,
        received,
        events,
        bytes_received,
        bytes_per_update: bytes_received as f64 / total_updates.max(1) as f64,
        identical,
        keys,
        nodes: nodes.iter().map(|n| (n.site, n.id.clone())).collect(),
        samples,
    }
}
