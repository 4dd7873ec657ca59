//! The bytes of a HyperLogLog, exactly as Redis lays them out in a string
//! value, so that a value copied from Redis counts the same here and back.
//!
//! ```text
//! 0..4   "HYLL"
//! 4      encoding: 0 dense, 1 sparse
//! 5..8   zero (reserved)
//! 8..16  cached cardinality, little endian; the top bit of byte 15 set
//!        means "not valid, compute again"
//! 16..   dense: 16384 registers of 6 bits, packed from the least
//!        significant bit of each byte up (12288 bytes);
//!        sparse: run-length opcodes (see `sparse`)
//! ```
//!
//! Only the header is checked when a value is read: a sparse body is
//! checked as it is walked (every walk stops at its end and reports a body
//! that does not cover exactly 16384 registers).

pub mod merge;
pub mod sparse;

/// Register index bits (Redis's HLL_P): 2^14 registers.
pub const P: u32 = 14;
/// Per register value, how many of the 64 registers hold it.
pub type Histogram = [u32; 64];
/// Redis's `hll-sparse-max-bytes`: a sparse HyperLogLog that would grow
/// past this many bytes turns dense. Fixed (CONFIG SET accepts only this).
pub const SPARSE_MAX_BYTES: usize = 3000;

pub const HEADER_LEN: usize = 16;
pub const REGISTERS: usize = 1 << P;
/// Bits per dense register: enough for a run of up to 63.
pub const REGISTER_BITS: usize = 6;
const REGISTER_MAX: u32 = (1 << REGISTER_BITS) - 1;
/// The exact length of a dense HyperLogLog.
pub const DENSE_LEN: usize = HEADER_LEN + (REGISTERS * REGISTER_BITS).div_ceil(8);
const MAGIC: &[u8; 4] = b"HYLL";
pub(crate) const ENCODING_AT: usize = 4;
const CARD_AT: usize = 8;
/// The bit of byte 15 that marks the cached cardinality stale.
pub(crate) const STALE: u8 = 0x80;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

impl Encoding {
    /// The name PFDEBUG ENCODING answers.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// Why bytes cannot be used as a HyperLogLog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HllError {
    /// The header is not one (magic, encoding, a dense length): the key
    /// holds some other string.
    NotHll,
    /// The header is fine but the sparse body is not.
    Corrupted,
}

/// The encoding of `bytes` if its header is a HyperLogLog's (Redis's
/// checks: length, magic, a known encoding, a dense one of exact length).
pub fn encoding_of(bytes: &[u8]) -> Result<Encoding, HllError> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != MAGIC {
        return Err(HllError::NotHll);
    }
    match bytes[ENCODING_AT] {
        0 if bytes.len() == DENSE_LEN => Ok(Encoding::Dense),
        1 => Ok(Encoding::Sparse),
        _ => Err(HllError::NotHll),
    }
}

/// The cardinality the header caches, when it is marked valid.
pub fn cached_cardinality(bytes: &[u8]) -> Option<u64> {
    let card = bytes.get(CARD_AT..HEADER_LEN)?;
    (card[7] & STALE == 0).then(|| u64::from_le_bytes(card.try_into().expect("eight bytes")))
}

/// Register `i` of a dense body. A register may straddle two bytes; the
/// last one does not need the byte past the end (Redis reads its string's
/// terminator there).
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let (byte, shift) = (i * REGISTER_BITS / 8, (i * REGISTER_BITS) & 7);
    let lo = u32::from(regs[byte]) >> shift;
    let hi = u32::from(regs.get(byte + 1).copied().unwrap_or(0)) << (8 - shift);
    ((lo | hi) & REGISTER_MAX) as u8
}

/// Sets register `i` of a dense body to `v` (at most 63).
pub fn dense_set(regs: &mut [u8], i: usize, v: u8) {
    let (byte, shift) = (i * REGISTER_BITS / 8, (i * REGISTER_BITS) & 7);
    let v = u32::from(v) & REGISTER_MAX;
    let low_mask = (REGISTER_MAX << shift) as u8;
    regs[byte] = (regs[byte] & !low_mask) | (v << shift) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        let high_mask = (REGISTER_MAX >> (8 - shift)) as u8;
        *next = (*next & !high_mask) | (v >> (8 - shift)) as u8;
    }
}

/// The registers of a dense body, one per byte.
pub fn dense_registers(regs: &[u8]) -> Vec<u8> {
    (0..REGISTERS).map(|i| dense_get(regs, i)).collect()
}

/// The histogram of a dense body: four registers in every three bytes.
fn dense_histogram(regs: &[u8]) -> Histogram {
    let mut h = [0u32; 64];
    for c in regs.chunks_exact(3) {
        let (b0, b1, b2) = (c[0] as usize, c[1] as usize, c[2] as usize);
        h[b0 & 63] += 1;
        h[(b0 >> 6 | b1 << 2) & 63] += 1;
        h[(b1 >> 4 | b2 << 4) & 63] += 1;
        h[b2 >> 2] += 1;
    }
    h
}

/// The histogram of the registers of a HyperLogLog whose header was
/// checked ([`encoding_of`]).
pub fn histogram(bytes: &[u8], enc: Encoding) -> Result<Histogram, HllError> {
    match enc {
        Encoding::Dense => Ok(dense_histogram(&bytes[HEADER_LEN..])),
        Encoding::Sparse => sparse::histogram(&bytes[HEADER_LEN..]),
    }
}

/// Raises each of `max` (one register per byte) to the HyperLogLog's
/// register, as PFMERGE and a PFCOUNT of several keys do.
pub fn merge_into(max: &mut [u8], bytes: &[u8], enc: Encoding) -> Result<(), HllError> {
    match enc {
        Encoding::Dense => {
            let regs = &bytes[HEADER_LEN..];
            for (i, m) in max.iter_mut().enumerate() {
                *m = (*m).max(dense_get(regs, i));
            }
            Ok(())
        }
        Encoding::Sparse => sparse::merge_into(max, &bytes[HEADER_LEN..]),
    }
}

/// A HyperLogLog being changed: the string's bytes, header checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hll {
    bytes: Vec<u8>,
}

impl Default for Hll {
    fn default() -> Self {
        Self::new()
    }
}

impl Hll {
    /// An empty HyperLogLog, sparse, as PFADD creates it: every register
    /// zero, in XZERO runs.
    pub fn new() -> Self {
        let mut bytes = Vec::with_capacity(HEADER_LEN + 2);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&[1, 0, 0, 0]);
        bytes.extend_from_slice(&[0; 8]);
        sparse::push_zeros(&mut bytes, REGISTERS);
        Hll { bytes }
    }

    /// A copy of a string value that has a HyperLogLog's header.
    pub fn from_value(value: &[u8]) -> Result<Self, HllError> {
        encoding_of(value)?;
        Ok(Hll {
            bytes: value.to_vec(),
        })
    }

    pub fn encoding(&self) -> Encoding {
        if self.bytes[ENCODING_AT] == 0 {
            Encoding::Dense
        } else {
            Encoding::Sparse
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Marks the cached cardinality stale.
    pub fn invalidate_cache(&mut self) {
        self.bytes[HEADER_LEN - 1] |= STALE;
    }

    /// Raises register `index` to `count` if it is lower: whether it was.
    pub fn raise(&mut self, index: usize, count: u8, sparse_max: usize) -> Result<bool, HllError> {
        if self.encoding() == Encoding::Sparse {
            match sparse::raise(&mut self.bytes, index, count, sparse_max)? {
                sparse::Raised::Unchanged => return Ok(false),
                sparse::Raised::Updated => return Ok(true),
                sparse::Raised::NeedsDense => self.make_dense()?,
            };
        }
        let regs = &mut self.bytes[HEADER_LEN..];
        if dense_get(regs, index) < count {
            dense_set(regs, index, count);
            return Ok(true);
        }
        Ok(false)
    }

    /// Turns a sparse HyperLogLog dense (the header, cache included, is
    /// kept): whether it was sparse.
    pub fn make_dense(&mut self) -> Result<bool, HllError> {
        if self.encoding() == Encoding::Dense {
            return Ok(false);
        }
        let mut dense = vec![0u8; DENSE_LEN];
        dense[..HEADER_LEN].copy_from_slice(&self.bytes[..HEADER_LEN]);
        dense[ENCODING_AT] = 0;
        sparse::expand_into(&mut dense[HEADER_LEN..], &self.bytes[HEADER_LEN..])?;
        self.bytes = dense;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_round_trip_without_touching_neighbours() {
        let mut regs = vec![0u8; DENSE_LEN - HEADER_LEN];
        let value = |i: usize| ((i * 7 + 3) % 64) as u8;
        for i in 0..REGISTERS {
            dense_set(&mut regs, i, value(i));
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), value(i), "register {i}");
        }
        let h = dense_histogram(&regs);
        assert_eq!(h.iter().sum::<u32>(), REGISTERS as u32);
        for (v, &count) in h.iter().enumerate() {
            let n = (0..REGISTERS).filter(|&i| value(i) == v as u8).count();
            assert_eq!(count as usize, n);
        }
    }

    #[test]
    fn headers_are_checked_as_redis_does() {
        let empty = Hll::new();
        assert_eq!(empty.bytes().len(), HEADER_LEN + 2);
        assert_eq!(encoding_of(empty.bytes()), Ok(Encoding::Sparse));
        assert_eq!(cached_cardinality(empty.bytes()), Some(0));
        let mut dense = empty.clone();
        assert_eq!(dense.make_dense(), Ok(true));
        assert_eq!(dense.bytes().len(), DENSE_LEN);
        assert_eq!(encoding_of(dense.bytes()), Ok(Encoding::Dense));
        assert_eq!(
            encoding_of(&dense.bytes()[..DENSE_LEN - 1]),
            Err(HllError::NotHll)
        );
        assert_eq!(
            encoding_of(b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0"),
            Err(HllError::NotHll)
        );
        assert_eq!(
            encoding_of(b"HYLX\x01\0\0\0\0\0\0\0\0\0\0\0"),
            Err(HllError::NotHll)
        );
        assert_eq!(encoding_of(b"HYLL\x01"), Err(HllError::NotHll));
        let mut stale = empty;
        stale.invalidate_cache();
        assert_eq!(cached_cardinality(stale.bytes()), None);
    }
}
