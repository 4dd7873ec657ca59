//! Redis's listpack (RDB 10 and newer, Redis ≥ 7.0): the packed list small
//! hashes (`RDB_TYPE_HASH_LISTPACK`), sorted sets (`RDB_TYPE_ZSET_LISTPACK`)
//! and, from Redis 7.2, sets (`RDB_TYPE_SET_LISTPACK`) are dumped as.
//!
//! Layout: total bytes (u32 LE), element count (u16 LE, 65535 when
//! unknown), entries, and the end byte 0xff. An entry is an encoding byte
//! (a 7-bit unsigned integer, a 13/16/24/32/64-bit signed integer, or a
//! string whose length takes 6, 12 or 32 bits), the data, and the entry's
//! own length written backwards in 1 to 5 bytes ("backlen"). Every header
//! and backlen is checked against the blob before it is trusted.

use super::rdb::{fixed as bytes, Elem, Malformed};

const HEADER: usize = 6;
const END: u8 = 0xff;

/// The entries of a listpack blob, in order.
pub fn decode(blob: &[u8]) -> Result<Vec<Elem<'_>>, Malformed> {
    if blob.len() < HEADER + 1 {
        return Err(Malformed);
    }
    let total = u32::from_le_bytes(bytes(blob, 0)?) as usize;
    let count = u16::from_le_bytes(bytes(blob, 4)?);
    if total != blob.len() || blob[blob.len() - 1] != END {
        return Err(Malformed);
    }
    let mut out = Vec::new();
    let mut p = HEADER;
    while blob[p] != END {
        let (elem, size) = entry(blob, p)?;
        let back = backlen_size(size);
        let end = p
            .checked_add(size)
            .and_then(|e| e.checked_add(back))
            .ok_or(Malformed)?;
        // The entry must leave room for at least the end byte.
        if end >= blob.len() || decode_backlen(&blob[p + size..end]) != Some(size) {
            return Err(Malformed);
        }
        out.push(elem);
        p = end;
    }
    if p != blob.len() - 1 || (count != u16::MAX && count as usize != out.len()) {
        return Err(Malformed);
    }
    Ok(out)
}

/// The entry at `p` and the size of its encoding and data.
fn entry(blob: &[u8], p: usize) -> Result<(Elem<'_>, usize), Malformed> {
    let b = blob[p];
    let string = |at: usize, len: usize| -> Result<(Elem<'_>, usize), Malformed> {
        let end = at.checked_add(len).ok_or(Malformed)?;
        Ok((Elem::Str(blob.get(at..end).ok_or(Malformed)?), end - p))
    };
    // A two's complement integer of `bits` bits from `uval`.
    let signed = |uval: u64, bits: u32| -> i64 { ((uval << (64 - bits)) as i64) >> (64 - bits) };
    match b {
        0x00..=0x7f => Ok((Elem::Int(b as i64), 1)),
        0x80..=0xbf => string(p + 1, (b & 0x3f) as usize),
        0xc0..=0xdf => {
            let [lo] = bytes(blob, p + 1)?;
            let uval = ((b & 0x1f) as u64) << 8 | lo as u64;
            Ok((Elem::Int(signed(uval, 13)), 2))
        }
        0xe0..=0xef => {
            let [lo] = bytes(blob, p + 1)?;
            string(p + 2, ((b & 0x0f) as usize) << 8 | lo as usize)
        }
        0xf0 => {
            let len = u32::from_le_bytes(bytes(blob, p + 1)?) as usize;
            string(p + 5, len)
        }
        0xf1 => Ok((Elem::Int(i16::from_le_bytes(bytes(blob, p + 1)?) as i64), 3)),
        0xf2 => {
            let [a, c, d] = bytes(blob, p + 1)?;
            let uval = a as u64 | (c as u64) << 8 | (d as u64) << 16;
            Ok((Elem::Int(signed(uval, 24)), 4))
        }
        0xf3 => Ok((Elem::Int(i32::from_le_bytes(bytes(blob, p + 1)?) as i64), 5)),
        0xf4 => Ok((Elem::Int(i64::from_le_bytes(bytes(blob, p + 1)?)), 9)),
        _ => Err(Malformed),
    }
}

/// How many bytes the backlen of an entry of `size` bytes takes (Redis's
/// `lpEncodeBacklen` thresholds).
fn backlen_size(size: usize) -> usize {
    match size {
        0..=127 => 1,
        128..16383 => 2,
        16383..2097151 => 3,
        2097151..268435455 => 4,
        _ => 5,
    }
}

/// The value of a backlen, read from its last byte backwards as Redis
/// reads it (7 bits a byte, the high bit set on every byte but the first).
fn decode_backlen(b: &[u8]) -> Option<usize> {
    let mut v: usize = 0;
    for (i, &x) in b.iter().rev().enumerate() {
        v |= ((x & 0x7f) as usize) << (7 * i);
        let last = i + 1 == b.len();
        if (x & 0x80 == 0) != last {
            return None;
        }
    }
    Some(v)
}

/// Encoding helpers for tests (this module's and the dump tests').
#[cfg(test)]
pub(crate) mod build {
    use super::*;

    fn backlen(size: usize) -> Vec<u8> {
        let n = backlen_size(size);
        (0..n)
            .map(|i| {
                let shift = 7 * (n - 1 - i);
                let byte = ((size >> shift) & 0x7f) as u8;
                if i == 0 {
                    byte
                } else {
                    byte | 0x80
                }
            })
            .collect()
    }

    /// One entry holding the string `s`.
    pub fn str_entry(s: &[u8]) -> Vec<u8> {
        let mut e = if s.len() < 64 {
            vec![0x80 | s.len() as u8]
        } else if s.len() < 4096 {
            vec![0xe0 | (s.len() >> 8) as u8, s.len() as u8]
        } else {
            let mut h = vec![0xf0];
            h.extend_from_slice(&(s.len() as u32).to_le_bytes());
            h
        };
        e.extend_from_slice(s);
        let size = e.len();
        e.extend(backlen(size));
        e
    }

    /// One entry holding the integer `v`, in the narrowest encoding.
    pub fn int_entry(v: i64) -> Vec<u8> {
        let mut e = if (0..128).contains(&v) {
            vec![v as u8]
        } else if (-4096..4096).contains(&v) {
            let u = (v as u64) & 0x1fff;
            vec![0xc0 | (u >> 8) as u8, u as u8]
        } else if i16::try_from(v).is_ok() {
            let mut h = vec![0xf1];
            h.extend_from_slice(&(v as i16).to_le_bytes());
            h
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            let mut h = vec![0xf2];
            h.extend_from_slice(&v.to_le_bytes()[..3]);
            h
        } else if i32::try_from(v).is_ok() {
            let mut h = vec![0xf3];
            h.extend_from_slice(&(v as i32).to_le_bytes());
            h
        } else {
            let mut h = vec![0xf4];
            h.extend_from_slice(&v.to_le_bytes());
            h
        };
        let size = e.len();
        e.extend(backlen(size));
        e
    }

    /// A listpack of already encoded entries.
    pub fn listpack(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut out = Vec::new();
        out.extend_from_slice(&((HEADER + body.len() + 1) as u32).to_le_bytes());
        out.extend_from_slice(&(entries.len().min(65535) as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(END);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    #[test]
    fn reads_what_redis_wrote() {
        // HSET h f v in redis-server 7.0.15 (the blob inside the DUMP).
        let lp = b"\x0d\x00\x00\x00\x02\x00\x81f\x02\x81v\x02\xff";
        assert_eq!(decode(lp).unwrap(), vec![Elem::Str(b"f"), Elem::Str(b"v")]);
        // ZADD z 1.5 a 2 b.
        let lp = b"\x14\x00\x00\x00\x04\x00\x81a\x02\x831.5\x04\x81b\x02\x02\x01\xff";
        assert_eq!(
            decode(lp).unwrap(),
            vec![
                Elem::Str(b"a"),
                Elem::Str(b"1.5"),
                Elem::Str(b"b"),
                Elem::Int(2)
            ]
        );
    }

    #[test]
    fn reads_every_encoding() {
        let ints = [
            0,
            127,
            -1,
            -4096,
            4095,
            4096,
            -32768,
            8_000_000,
            -8_388_608,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ];
        let strs: [&[u8]; 4] = [b"", b"x", &[b'y'; 200], &[b'z'; 5000]];
        let mut entries: Vec<Vec<u8>> = ints.iter().map(|&v| int_entry(v)).collect();
        entries.extend(strs.iter().map(|s| str_entry(s)));
        let lp = listpack(&entries);
        let mut want: Vec<Elem> = ints.iter().map(|&v| Elem::Int(v)).collect();
        want.extend(strs.iter().map(|s| Elem::Str(s)));
        assert_eq!(decode(&lp).unwrap(), want);
    }

    #[test]
    fn refuses_bad_blobs() {
        let good = listpack(&[str_entry(b"a"), int_entry(300)]);
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad_count = good.clone();
        bad_count[4] = 5;
        assert!(decode(&bad_count).is_err());
        let mut bad_backlen = good.clone();
        bad_backlen[HEADER + 2] = 9;
        assert!(decode(&bad_backlen).is_err());
        assert!(decode(&listpack(&[vec![0xf5, 1]])).is_err());
        // A string length far past the end.
        assert!(decode(&listpack(&[vec![0xf0, 0xff, 0xff, 0xff, 0xff, 1]])).is_err());
    }
}
