//! Register-wise maximum of HyperLogLogs, the merge of concurrent PFADDs
//! and PFMERGEs across sites (`DeltaOp::HllMax`): raising registers is
//! idempotent and commutative, so every order and duplication of arrival
//! gives the same registers. So that it also gives the same bytes, a
//! raised value is written in one canonical layout ([`canonical`]), a
//! function of its registers and of the header it was assigned with.

use super::{dense_get, dense_set, encoding_of, sparse, Encoding, HllError};
use super::{DENSE_LEN, ENCODING_AT, HEADER_LEN, REGISTERS, SPARSE_MAX_BYTES, STALE};

/// The largest value a register holds (6 bits).
pub const REGISTER_VALUE_MAX: u8 = 63;

/// The registers of a HyperLogLog, one per byte (header and body checked).
pub fn registers(bytes: &[u8]) -> Result<Vec<u8>, HllError> {
    let enc = encoding_of(bytes)?;
    let mut regs = vec![0u8; REGISTERS];
    match enc {
        Encoding::Dense => {
            for (i, r) in regs.iter_mut().enumerate() {
                *r = dense_get(&bytes[HEADER_LEN..], i);
            }
        }
        Encoding::Sparse => sparse::merge_into(&mut regs, &bytes[HEADER_LEN..])?,
    }
    Ok(regs)
}

/// `bytes` (a HyperLogLog) with each `(index, value)` raised: None when
/// none is higher than what it holds (nothing changes), else the value in
/// the canonical layout with its cache marked stale, as PFADD leaves it.
/// Indexes past the last register and values over 63 are refused as
/// corrupted (a decoder checks them first).
pub fn raised(bytes: &[u8], raise: &[(u16, u8)]) -> Result<Option<Vec<u8>>, HllError> {
    let mut regs = registers(bytes)?;
    let mut changed = false;
    for &(i, v) in raise {
        let r = regs
            .get_mut(usize::from(i))
            .filter(|_| v <= REGISTER_VALUE_MAX)
            .ok_or(HllError::Corrupted)?;
        if *r < v {
            *r = v;
            changed = true;
        }
    }
    Ok(changed.then(|| canonical(&bytes[..HEADER_LEN], &regs)))
}

/// A new HyperLogLog (as PFADD creates it) with `raise` raised, canonical,
/// its cache marked stale.
pub fn created(raise: &[(u16, u8)]) -> Result<Vec<u8>, HllError> {
    let empty = super::Hll::new().into_bytes();
    let regs = vec![0u8; REGISTERS];
    Ok(match raised(&empty, raise)? {
        Some(bytes) => bytes,
        None => canonical(&empty, &regs),
    })
}

/// The canonical bytes of `regs` under `header` (an HyperLogLog's first 16
/// bytes): dense when the header is dense, else sparse while every
/// register is at most 32 and the whole fits [`SPARSE_MAX_BYTES`] (the
/// left-to-right runs of [`sparse::encode`]), else dense. The header is
/// kept, its encoding byte set and its cache marked stale.
pub fn canonical(header: &[u8], regs: &[u8]) -> Vec<u8> {
    let sparse_body = match header.get(ENCODING_AT) {
        Some(0) => None,
        _ => sparse::encode(regs).filter(|b| HEADER_LEN + b.len() <= SPARSE_MAX_BYTES),
    };
    let mut out = match &sparse_body {
        Some(body) => Vec::with_capacity(HEADER_LEN + body.len()),
        None => vec![0u8; DENSE_LEN],
    };
    out.truncate(0);
    out.extend_from_slice(&header[..HEADER_LEN.min(header.len())]);
    out.resize(HEADER_LEN, 0);
    out[HEADER_LEN - 1] |= STALE;
    match sparse_body {
        Some(body) => {
            out[ENCODING_AT] = 1;
            out.extend_from_slice(&body);
        }
        None => {
            out[ENCODING_AT] = 0;
            out.resize(DENSE_LEN, 0);
            for (i, &r) in regs.iter().enumerate().take(REGISTERS) {
                dense_set(&mut out[HEADER_LEN..], i, r);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hll::Hll;

    #[test]
    fn raising_in_any_order_gives_the_same_bytes() {
        let raises: Vec<(u16, u8)> = (0..40u16)
            .map(|i| (i * 3 % 17, (i % 5 + 1) as u8))
            .collect();
        let empty = Hll::new().into_bytes();
        let forward = raised(&empty, &raises).unwrap().unwrap();
        let mut back = empty.clone();
        for r in raises.iter().rev() {
            if let Some(b) = raised(&back, &[*r]).unwrap() {
                back = b;
            }
        }
        assert_eq!(forward, back);
        assert_eq!(raised(&forward, &raises).unwrap(), None, "idempotent");
        let regs = registers(&forward).unwrap();
        assert_eq!(regs[0], 5);
        // Over 32: dense, and back through registers.
        let dense = raised(&forward, &[(9, 40)]).unwrap().unwrap();
        assert_eq!(dense.len(), DENSE_LEN);
        assert_eq!(registers(&dense).unwrap()[9], 40);
        assert_eq!(raised(&empty, &[(16384, 1)]), Err(HllError::Corrupted));
        assert_eq!(raised(&empty, &[(1, 64)]), Err(HllError::Corrupted));
        assert_eq!(raised(b"nope", &[(1, 1)]), Err(HllError::NotHll));
    }
}
