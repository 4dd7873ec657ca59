//! Redis's ziplist (RDB 9 and older, Redis ≤ 6.2): the packed list small
//! hashes (`RDB_TYPE_HASH_ZIPLIST`) and sorted sets (`RDB_TYPE_ZSET_ZIPLIST`)
//! were dumped as.
//!
//! Layout: `zlbytes` (u32 LE, the whole size), `zltail` (u32 LE, offset of
//! the last entry), `zllen` (u16 LE, the count, or 65535 when unknown),
//! entries, and the end byte 0xff. An entry is the previous entry's length
//! (1 byte, or 0xfe and a u32 LE), an encoding (a string length in 1, 2 or
//! 5 bytes, or an integer type) and the data. Every header is checked
//! against the blob before it is read.

use super::rdb::{fixed as bytes, Elem, Malformed};

const HEADER: usize = 10;
const END: u8 = 0xff;

/// The entries of a ziplist blob, in order.
pub fn decode(blob: &[u8]) -> Result<Vec<Elem<'_>>, Malformed> {
    if blob.len() < HEADER + 1 {
        return Err(Malformed);
    }
    let zlbytes = u32::from_le_bytes(bytes(blob, 0)?) as usize;
    let zltail = u32::from_le_bytes(bytes(blob, 4)?) as usize;
    let zllen = u16::from_le_bytes(bytes(blob, 8)?);
    if zlbytes != blob.len() || blob[blob.len() - 1] != END {
        return Err(Malformed);
    }
    let mut out = Vec::new();
    let (mut p, mut prev_len, mut last) = (HEADER, 0usize, HEADER);
    while blob[p] != END {
        let start = p;
        // The previous entry's length.
        let prevlen = if blob[p] < 0xfe {
            p += 1;
            blob[p - 1] as usize
        } else {
            let v = u32::from_le_bytes(bytes(blob, p + 1)?) as usize;
            p += 5;
            v
        };
        if prevlen != prev_len {
            return Err(Malformed);
        }
        let enc = *blob.get(p).ok_or(Malformed)?;
        let (elem, next) = match enc >> 6 {
            0 => string(blob, p + 1, (enc & 0x3f) as usize)?,
            1 => {
                let lo = *blob.get(p + 1).ok_or(Malformed)? as usize;
                string(blob, p + 2, ((enc & 0x3f) as usize) << 8 | lo)?
            }
            2 => {
                let len = u32::from_be_bytes(bytes(blob, p + 1)?) as usize;
                string(blob, p + 5, len)?
            }
            _ => integer(blob, p + 1, enc)?,
        };
        // The entry must leave room for at least the end byte.
        if next >= blob.len() {
            return Err(Malformed);
        }
        out.push(elem);
        prev_len = next - start;
        last = start;
        p = next;
    }
    let tail_ok = zltail == last;
    let count_ok = zllen == u16::MAX || zllen as usize == out.len();
    if p != blob.len() - 1 || !tail_ok || !count_ok {
        return Err(Malformed);
    }
    Ok(out)
}

/// A string of `len` bytes at `at`, and where the next entry starts.
fn string(blob: &[u8], at: usize, len: usize) -> Result<(Elem<'_>, usize), Malformed> {
    let end = at.checked_add(len).ok_or(Malformed)?;
    let s = blob.get(at..end).ok_or(Malformed)?;
    Ok((Elem::Str(s), end))
}

/// An integer of encoding `enc` whose data starts at `at`.
fn integer(blob: &[u8], at: usize, enc: u8) -> Result<(Elem<'static>, usize), Malformed> {
    let (v, size) = match enc {
        0xc0 => (i16::from_le_bytes(bytes(blob, at)?) as i64, 2),
        0xd0 => (i32::from_le_bytes(bytes(blob, at)?) as i64, 4),
        0xe0 => (i64::from_le_bytes(bytes(blob, at)?), 8),
        0xf0 => {
            let [a, b, c] = bytes(blob, at)?;
            ((i32::from_le_bytes([0, a, b, c]) >> 8) as i64, 3)
        }
        0xfe => (i8::from_le_bytes(bytes(blob, at)?) as i64, 1),
        // An immediate 0..=12 in the low 4 bits (stored as 1..=13).
        0xf1..=0xfd => ((enc & 0x0f) as i64 - 1, 0),
        _ => return Err(Malformed),
    };
    Ok((Elem::Int(v), at + size))
}

/// Encoding helpers for tests (this module's and the dump tests').
#[cfg(test)]
pub(crate) mod build {
    use super::*;

    /// A ziplist of `entries` (each its encoding and data, without the
    /// previous entry's length, which this adds).
    pub fn build(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let (mut prev, mut tail) = (0usize, HEADER);
        for e in entries {
            tail = HEADER + body.len();
            let start = body.len();
            if prev < 254 {
                body.push(prev as u8);
            } else {
                body.push(0xfe);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            body.extend_from_slice(e);
            prev = body.len() - start;
        }
        let mut out = Vec::new();
        out.extend_from_slice(&((HEADER + body.len() + 1) as u32).to_le_bytes());
        out.extend_from_slice(&(tail as u32).to_le_bytes());
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(END);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::build::build;
    use super::*;

    #[test]
    fn reads_every_encoding() {
        let long = [b'x'; 300];
        let mut s14 = vec![0x40 | (300 >> 8) as u8, (300 & 0xff) as u8];
        s14.extend_from_slice(&long);
        let zl = build(&[
            b"\x03abc",
            b"\xfe\x80",
            b"\xc0\x39\x30",
            b"\xf0\xff\xff\xff",
            b"\xd0\x00\x00\x00\x80",
            b"\xe0\x01\x00\x00\x00\x00\x00\x00\x00",
            b"\xf1",
            b"\xfd",
            &s14,
            b"\x00",
        ]);
        let got = decode(&zl).unwrap();
        assert_eq!(
            got,
            vec![
                Elem::Str(b"abc"),
                Elem::Int(-128),
                Elem::Int(12345),
                Elem::Int(-1),
                Elem::Int(i32::MIN as i64),
                Elem::Int(1),
                Elem::Int(0),
                Elem::Int(12),
                Elem::Str(&long),
                Elem::Str(b""),
            ]
        );
    }

    #[test]
    fn refuses_bad_headers() {
        let good = build(&[b"\x01a", b"\x01b"]);
        assert!(decode(&good).is_ok());
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad_count = good.clone();
        bad_count[8] = 3;
        assert!(decode(&bad_count).is_err());
        let mut bad_tail = good.clone();
        bad_tail[4] = 11;
        assert!(decode(&bad_tail).is_err());
        assert!(decode(&build(&[b"\x80\xff\xff\xff\xff"])).is_err());
        assert!(decode(&build(&[b"\xc1"])).is_err());
    }
}
