//! What a HyperLogLog counts with, as Redis 7 does it: the 64-bit
//! MurmurHash2 of an element (seed `0xadc83b19`) picks a register (its low
//! 14 bits) and the length of the run of zeros ending in a one above them;
//! the cardinality comes from the histogram of register values through the
//! estimator of Otmar Ertl ("New cardinality estimation algorithms for
//! HyperLogLog sketches", arXiv:1702.01284), with the floating point
//! operations in Redis's order so that the rounded result is the same.

use keyspace::hll::REGISTERS;
pub use keyspace::hll::{Histogram, P};

/// Bits left for the run of zeros: a run is at most `Q + 1` long.
pub const Q: u32 = 64 - P;
/// Redis's seed for element hashes.
const SEED: u64 = 0xadc8_3b19;
/// 0.5 / ln(2), the limit of the bias correction as m grows.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// MurmurHash64A as Redis has it: 8-byte blocks read little-endian on every
/// architecture, the tail mixed in byte by byte.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().expect("eight bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register `element` falls in and the value it offers that register:
/// the position of the first one bit above the index bits (1 for a one
/// right away, at most `Q + 1`).
pub fn register_and_count(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The guard bit ends every run at Q + 1.
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Ertl's sigma, for the share of registers still zero.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    // Converges in a few dozen steps for x in [0, 1); the bound only keeps
    // a value outside that range (never produced) from spinning.
    for _ in 0..1000 {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            break;
        }
    }
    z
}

/// Ertl's tau, for the share of registers below the maximum run.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    for _ in 0..1000 {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        // `powf`, not a product: the C library's pow, as Redis calls it.
        z -= (1.0 - x).powf(2.0) * y;
        if before == z {
            break;
        }
    }
    z / 3.0
}

/// The estimated cardinality for a histogram of the 16384 registers.
pub fn estimate(histogram: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let top = histogram[Q as usize + 1];
    let mut z = m * tau((m - f64::from(top)) / m);
    for j in (1..=Q as usize).rev() {
        z += f64::from(histogram[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histogram[0]) / m);
    // Rounded half away from zero, as llroundl.
    (ALPHA_INF * m * m / z).round() as u64
}

/// The histogram of registers held one per byte (values up to 63).
pub fn raw_histogram(registers: &[u8]) -> Histogram {
    let mut h = [0u32; 64];
    for &r in registers {
        h[usize::from(r & 63)] += 1;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_matches_redis_on_every_tail_length() {
        // Redis's own MurmurHash64A compiled from its source, seed 0xadc83b19.
        let expected: [(&[u8], u64); 11] = [
            (b"", 0xd8dfea6585bc9732),
            (b"a", 0x53d2470a9b43b1a7),
            (b"ab", 0x0eaed676437142cf),
            (b"abc", 0x77ec90aeb374e502),
            (b"abcd", 0xb079ee3d44202b3e),
            (b"abcde", 0x52a7daa2324a0e8e),
            (b"abcdef", 0x3a4f3a74f538b54f),
            (b"abcdefg", 0x22fe613bb08c9602),
            (b"abcdefgh", 0xf3a65df559914567),
            (b"abcdefghi", 0x834fba4d9152daf7),
            (b"hello world, this is longer", 0x60dee586f0e0e4f3),
        ];
        for (data, hash) in expected {
            assert_eq!(murmur64a(data, SEED), hash, "{data:?}");
        }
        // "a": index = hash & 16383, then the run above the index bits.
        let (index, count) = register_and_count(b"a");
        assert_eq!(index, (0x53d2470a9b43b1a7u64 & 16383) as usize);
        assert_eq!(
            count,
            ((0x53d2470a9b43b1a7u64 >> 14).trailing_zeros() + 1) as u8
        );
    }

    #[test]
    fn an_empty_histogram_counts_zero() {
        let mut h = [0u32; 64];
        h[0] = REGISTERS as u32;
        assert_eq!(estimate(&h), 0);
    }

    #[test]
    fn the_estimate_tracks_small_and_large_sets() {
        for n in [1u64, 10, 100, 1000, 10_000, 100_000] {
            let mut regs = vec![0u8; REGISTERS];
            for i in 0..n {
                let (idx, count) = register_and_count(format!("e{i}").as_bytes());
                regs[idx] = regs[idx].max(count);
            }
            let est = estimate(&raw_histogram(&regs)) as f64;
            let err = (est - n as f64).abs() / n as f64;
            assert!(err < 0.05, "n={n} estimate={est}");
        }
    }

    #[test]
    fn sigma_and_tau_end_at_their_limits() {
        assert_eq!(sigma(1.0), f64::INFINITY);
        assert_eq!(tau(1.0), 0.0);
        assert_eq!(tau(0.0), 0.0);
        assert!(sigma(0.5).is_finite() && tau(0.5).is_finite());
    }
}
