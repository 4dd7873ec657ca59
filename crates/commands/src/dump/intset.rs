//! Redis's intset: the sorted array of integers a small all-integer set is
//! kept in, and dumped as (`RDB_TYPE_SET_INTSET`). Header: the width of each
//! element (2, 4 or 8 bytes) and the count, both u32 little endian, then
//! the elements, little endian, strictly ascending.

use super::rdb::Malformed;

/// The integers of an intset blob, checked as Redis's deep sanitization
/// checks them: a known width, a size that matches the count exactly, and
/// strictly ascending elements.
pub fn decode(blob: &[u8]) -> Result<Vec<i64>, Malformed> {
    let header = blob.get(..8).ok_or(Malformed)?;
    let width = u32::from_le_bytes(header[..4].try_into().map_err(|_| Malformed)?) as usize;
    let count = u32::from_le_bytes(header[4..8].try_into().map_err(|_| Malformed)?) as usize;
    if ![2, 4, 8].contains(&width) {
        return Err(Malformed);
    }
    let body = &blob[8..];
    if count.checked_mul(width) != Some(body.len()) {
        return Err(Malformed);
    }
    let values: Vec<i64> = body
        .chunks_exact(width)
        .map(|c| match *c {
            [a, b] => i16::from_le_bytes([a, b]) as i64,
            [a, b, c, d] => i32::from_le_bytes([a, b, c, d]) as i64,
            [a, b, c, d, e, f, g, h] => i64::from_le_bytes([a, b, c, d, e, f, g, h]),
            _ => unreachable!("chunks_exact gives chunks of the width"),
        })
        .collect();
    if values.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Malformed);
    }
    Ok(values)
}

/// The intset blob of `values` (any order, no duplicates), at the
/// narrowest width that holds them all, as Redis builds it.
pub fn encode(mut values: Vec<i64>) -> Vec<u8> {
    values.sort_unstable();
    let fits = |lo: i64, hi: i64| values.iter().all(|v| (lo..=hi).contains(v));
    let width: usize = if fits(i16::MIN.into(), i16::MAX.into()) {
        2
    } else if fits(i32::MIN.into(), i32::MAX.into()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_redis_wrote_and_round_trips() {
        // SADD si 1 2 3 in redis-server 7.0.15.
        let blob = b"\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00";
        assert_eq!(decode(blob).unwrap(), vec![1, 2, 3]);
        assert_eq!(encode(vec![3, 1, 2]), blob.to_vec());
        for vs in [vec![-70000, 5], vec![i64::MIN, 0, i64::MAX], vec![]] {
            assert_eq!(decode(&encode(vs.clone())).unwrap().len(), vs.len());
        }
    }

    #[test]
    fn refuses_bad_blobs() {
        assert!(decode(b"\x02\x00\x00").is_err());
        assert!(decode(b"\x03\x00\x00\x00\x00\x00\x00\x00").is_err());
        assert!(decode(b"\x02\x00\x00\x00\xff\xff\xff\xff\x01\x00").is_err());
        // Not ascending.
        assert!(decode(b"\x02\x00\x00\x00\x02\x00\x00\x00\x02\x00\x01\x00").is_err());
    }
}
