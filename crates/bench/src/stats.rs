//! Latency summary of one measured run: percentiles, mean, and GigaSpaces'
//! "average of the best 80%" (sort, drop the slowest 20%, average the rest),
//! which discards the tail that scheduling noise adds on a shared machine.
//!
//! All samples are kept and sorted (tens of thousands of `u64`), so the
//! percentiles are exact nearest-rank values, not histogram buckets.

use serde::Serialize;

/// Microseconds throughout.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub samples: usize,
    pub avg_best_80_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// Summarises per-op latencies given in nanoseconds; `None` when empty.
pub fn summarize(mut ns: Vec<u64>) -> Option<Summary> {
    if ns.is_empty() {
        return None;
    }
    ns.sort_unstable();
    let best = (ns.len() * 8 / 10).max(1);
    Some(Summary {
        samples: ns.len(),
        avg_best_80_us: mean_us(&ns[..best]),
        mean_us: mean_us(&ns),
        p50_us: us(percentile(&ns, 5_000)),
        p90_us: us(percentile(&ns, 9_000)),
        p99_us: us(percentile(&ns, 9_900)),
        p999_us: us(percentile(&ns, 9_990)),
        max_us: us(ns[ns.len() - 1]),
    })
}

/// Nearest-rank percentile of sorted, non-empty samples, with the
/// percentile in hundredths of a percent (p99.9 = 9_990): integer arithmetic,
/// so 99.9% of 1000 samples is rank 999, not 1000 by a rounding error.
fn percentile(sorted: &[u64], per_10k: usize) -> u64 {
    let rank = (per_10k * sorted.len()).div_ceil(10_000);
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn mean_us(ns: &[u64]) -> f64 {
    let sum: u128 = ns.iter().map(|&v| u128::from(v)).sum();
    // Rounded to the nanosecond: more digits are float noise.
    (sum as f64 / ns.len() as f64).round() / 1000.0
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_to_a_thousand() {
        // 1..=1000 µs, shuffled order must not matter.
        let mut ns: Vec<u64> = (1..=1000).map(|v| v * 1000).collect();
        ns.reverse();
        let s = summarize(ns).unwrap();
        assert_eq!(s.samples, 1000);
        assert_eq!(s.p50_us, 500.0);
        assert_eq!(s.p90_us, 900.0);
        assert_eq!(s.p99_us, 990.0);
        assert_eq!(s.p999_us, 999.0);
        assert_eq!(s.max_us, 1000.0);
        assert_eq!(s.mean_us, 500.5);
        // best 800 are 1..=800, mean 400.5
        assert_eq!(s.avg_best_80_us, 400.5);
    }

    #[test]
    fn single_sample_and_empty() {
        let s = summarize(vec![2500]).unwrap();
        assert_eq!((s.p50_us, s.p999_us, s.avg_best_80_us), (2.5, 2.5, 2.5));
        assert!(summarize(Vec::new()).is_none());
    }
}
