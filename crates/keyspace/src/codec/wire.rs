//! The primitives of the change encoding: LEB128 varints (and zigzag for
//! signed numbers), length-prefixed byte strings, versions, and the
//! [`Reader`] that decodes them from outside bytes, checking every length
//! against what is left before allocating.

use bytes::{BufMut, Bytes};

use super::DecodeError;
use crate::value::{
    copy_packed, copy_pairs, Contribution, CounterBase, CounterValue, FloatContribution,
    ScoreContribution, ScoreCounter,
};
use crate::version::Version;

pub(crate) fn varint_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

pub(crate) fn put_varint(out: &mut impl BufMut, mut n: u64) {
    while n >= 0x80 {
        out.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

pub(super) fn varint128_len(mut n: u128) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

pub(super) fn put_varint128(out: &mut impl BufMut, mut n: u128) {
    while n >= 0x80 {
        out.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

pub(super) fn zigzag128(n: i128) -> u128 {
    ((n << 1) ^ (n >> 127)) as u128
}

pub(super) fn unzigzag128(n: u128) -> i128 {
    ((n >> 1) as i128) ^ -((n & 1) as i128)
}

/// A counter's state: the assignment's version, its floor, its base (0 and an
/// integer, or 1 and a text), then each site's contribution.
pub(super) fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

pub(super) fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

pub(super) fn bytes_len(b: &[u8]) -> usize {
    varint_len(b.len() as u64) + b.len()
}

pub(super) fn put_bytes(out: &mut impl BufMut, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.put_slice(b);
}

pub(super) fn version_len(v: &Version) -> usize {
    varint_len(v.hlc) + varint_len(v.site as u64)
}

pub(super) fn put_version(out: &mut impl BufMut, v: &Version) {
    put_varint(out, v.hlc);
    put_varint(out, v.site as u64);
}

pub(super) type HashFields = Vec<(Bytes, Bytes)>;

/// Reads from a byte slice; what it returns as `Bytes` is copied out of it.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    pub(super) fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(DecodeError::BadVarint);
            }
            n |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(DecodeError::BadVarint)
    }

    pub(super) fn varint128(&mut self) -> Result<u128, DecodeError> {
        let mut n: u128 = 0;
        for shift in (0..128).step_by(7) {
            let b = self.u8()?;
            if shift == 126 && b > 3 {
                return Err(DecodeError::BadVarint);
            }
            n |= ((b & 0x7f) as u128) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(DecodeError::BadVarint)
    }

    pub(super) fn counter(&mut self) -> Result<CounterValue, DecodeError> {
        let assigned = self.version()?;
        let floor = self.version()?;
        let expiry = self.version()?;
        let tag = self.u8()?;
        let base = match tag & !super::states::WITH_FLOATS {
            0 => CounterBase::Int(unzigzag128(self.varint128()?)),
            1 => CounterBase::Text(self.bytes()?),
            2 => CounterBase::Float {
                text: self.float_text()?,
                seen: self.float_text()?,
            },
            _ => {
                return Err(DecodeError::BadTag {
                    what: "counter base",
                    tag,
                })
            }
        };
        let n = self.count(3)?;
        let mut contributions = Vec::with_capacity(n);
        for _ in 0..n {
            let site = u16::try_from(self.varint()?).map_err(|_| DecodeError::OutOfRange)?;
            let total = unzigzag(self.varint()?);
            let version = self.version()?;
            contributions.push(Contribution {
                site,
                total,
                version,
            });
        }
        let mut floats = Vec::new();
        if tag & super::states::WITH_FLOATS != 0 {
            let n = self.count(3)?;
            floats.reserve(n);
            for _ in 0..n {
                let site = u16::try_from(self.varint()?).map_err(|_| DecodeError::OutOfRange)?;
                let total = self.float_text()?;
                let version = self.version()?;
                floats.push(FloatContribution {
                    site,
                    total,
                    version,
                });
            }
        }
        Ok(CounterValue::from_parts(
            assigned,
            base,
            floor,
            expiry,
            contributions,
            floats,
        ))
    }

    /// A sorted-set member's score state.
    pub(super) fn score_counter(&mut self) -> Result<ScoreCounter, DecodeError> {
        let assigned = self.version()?;
        let score = self.score()?;
        let seen = self.score()?;
        let floor = self.version()?;
        let n = self.count(10)?;
        let mut contributions = Vec::with_capacity(n);
        for _ in 0..n {
            let site = u16::try_from(self.varint()?).map_err(|_| DecodeError::OutOfRange)?;
            let total = self.score()?;
            let version = self.version()?;
            contributions.push(ScoreContribution {
                site,
                total,
                version,
            });
        }
        Ok(ScoreCounter::from_parts(
            assigned,
            score,
            seen,
            floor,
            contributions,
        ))
    }

    /// A byte string that must read as a float (a float counter's total).
    pub(super) fn float_text(&mut self) -> Result<Bytes, DecodeError> {
        let b = self.bytes()?;
        match crate::number::parse_f64(&b) {
            Some(_) => Ok(b),
            None => Err(DecodeError::OutOfRange),
        }
    }

    pub(super) fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.varint()?).map_err(|_| DecodeError::OutOfRange)
    }

    /// A length-prefixed byte string, borrowed from the input.
    pub(super) fn slice(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.varint()?;
        let left = (self.buf.len() - self.pos) as u64;
        if len > left {
            return Err(DecodeError::Truncated);
        }
        let b = &self.buf[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(b)
    }

    /// A length-prefixed byte string, copied: what is decoded is stored
    /// (keys, values), and must not keep the whole input (a replication or
    /// WAN batch, a backup block) alive with it.
    pub(super) fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        self.slice().map(Bytes::copy_from_slice)
    }

    /// `n` hash field name/value pairs, copied with [`copy_pairs`];
    /// `versioned`: a version follows each pair.
    pub(super) fn pairs(
        &mut self,
        n: usize,
        versioned: bool,
    ) -> Result<(HashFields, Vec<Version>), DecodeError> {
        let mut pairs = Vec::with_capacity(n);
        let mut versions = Vec::with_capacity(if versioned { n } else { 0 });
        for _ in 0..n {
            pairs.push((self.slice()?, self.slice()?));
            if versioned {
                versions.push(self.version()?);
            }
        }
        Ok((copy_pairs(pairs.iter().copied()), versions))
    }

    /// A sorted-set score: eight bytes, little endian, never NaN.
    pub(super) fn score(&mut self) -> Result<f64, DecodeError> {
        let end = self.pos + 8;
        let b = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        let score = f64::from_le_bytes(b.try_into().map_err(|_| DecodeError::Truncated)?);
        if score.is_nan() {
            return Err(DecodeError::OutOfRange);
        }
        Ok(score)
    }

    /// `n` members (each followed by what `each` reads), the names copied
    /// with [`copy_packed`].
    pub(super) fn members<T>(
        &mut self,
        n: usize,
        mut each: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<(Bytes, T)>, DecodeError> {
        let mut names = Vec::with_capacity(n);
        let mut extra = Vec::with_capacity(n);
        for _ in 0..n {
            names.push(self.slice()?);
            extra.push(each(self)?);
        }
        Ok(copy_packed(names.iter().copied())
            .into_iter()
            .zip(extra)
            .collect())
    }

    pub(super) fn version(&mut self) -> Result<Version, DecodeError> {
        let hlc = self.varint()?;
        let site = u16::try_from(self.varint()?).map_err(|_| DecodeError::OutOfRange)?;
        Ok(Version { hlc, site })
    }

    /// A count of items each at least `min_size` bytes: refused when the
    /// input cannot hold that many, so a forged count allocates nothing.
    pub(super) fn count(&mut self, min_size: usize) -> Result<usize, DecodeError> {
        let n = self.varint()?;
        let left = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(min_size as u64) > left {
            return Err(DecodeError::Truncated);
        }
        Ok(n as usize)
    }
}
