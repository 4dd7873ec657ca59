//! Bitwise OR of bytes into a string, the merge of concurrent SETBIT 1s
//! across sites (`DeltaOp::BitsOr`): setting bits is idempotent and
//! commutative, so every order and duplication of arrival gives the same
//! bytes. A mask past the end grows the string with zero bytes first, as
//! SETBIT does, so the string ends as long at every site (the longest of
//! its assignment and of the raises applied to it).

use bytes::Bytes;

use crate::change::DeltaOp;
use crate::keyspace::Write;

/// What SETBIT of `offset` to `on` writes over the string `held` (empty
/// when missing): None when it changes nothing (the bit already so, the
/// string long enough), as in Redis; a bit set from 0 is a `Write::Bits`
/// (a raise where sites merge), anything else a one-byte splice (past the
/// end it pads with zero bytes up to the byte).
pub fn setbit_write(held: &[u8], offset: usize, on: bool) -> Option<Write> {
    let byte = offset / 8;
    let mask = 1u8 << (7 - offset % 8);
    let was = held.get(byte).copied().unwrap_or(0);
    let now = if on { was | mask } else { was & !mask };
    if now == was && byte < held.len() {
        return None;
    }
    let splice = DeltaOp::Splice {
        offset: byte as u32,
        remove: u32::from(byte < held.len()),
        insert: Bytes::copy_from_slice(&[now]),
    };
    Some(if on && was & mask == 0 {
        Write::Bits {
            index: byte as u32,
            mask,
            splice,
        }
    } else {
        Write::Str(splice)
    })
}

/// The longest string a raise may make (Redis's 512 MiB limit of strings,
/// which SETBIT's offsets respect): a decoder refuses byte indexes past it.
pub const MAX_LEN: usize = 512 * 1024 * 1024;

/// `bytes` with each `(index, mask)` ORed in, grown with zero bytes up to
/// the highest index: None when nothing changes (every bit already set and
/// the string long enough). Indexes at or past [`MAX_LEN`] are refused.
pub fn ored(bytes: &[u8], masks: &[(u32, u8)]) -> Result<Option<Vec<u8>>, TooLong> {
    let mut len = bytes.len();
    let mut changed = false;
    for &(i, m) in masks {
        let i = i as usize;
        if i >= MAX_LEN {
            return Err(TooLong);
        }
        if i >= len {
            len = i + 1;
            changed = true;
        } else if bytes.get(i).is_some_and(|b| b | m != *b) {
            changed = true;
        }
    }
    if !changed {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(bytes);
    out.resize(len, 0);
    for &(i, m) in masks {
        if let Some(b) = out.get_mut(i as usize) {
            *b |= m;
        }
    }
    Ok(Some(out))
}

/// The masks that OR `mine` into `theirs`' bits: `(index, bits theirs has
/// and mine lacks)`, plus the last byte of theirs when it is longer (so
/// the string grows to its length). Empty: mine already holds theirs.
pub fn missing(mine: &[u8], theirs: &[u8]) -> Vec<(u32, u8)> {
    let mut masks: Vec<(u32, u8)> = (0u32..)
        .zip(theirs)
        .filter_map(|(i, t)| {
            let m = mine.get(i as usize).copied().unwrap_or(0);
            (t & !m != 0).then_some((i, t & !m))
        })
        .collect();
    if theirs.len() > mine.len() && theirs.last() == Some(&0) {
        masks.push(((theirs.len() - 1) as u32, 0));
    }
    masks
}

/// The hash a string delta made where sites merge carries of the bytes it
/// was made on (`DeltaOp::Checked`): xxh3, the same at every site and build.
pub fn bytes_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// A raise's index past the longest string.
#[derive(Debug, PartialEq, Eq)]
pub struct TooLong;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn or_grows_with_zero_bytes_and_is_idempotent() {
        assert_eq!(ored(b"", &[(2, 0x80)]), Ok(Some(vec![0, 0, 0x80])));
        assert_eq!(ored(b"\x81", &[(0, 0x80)]), Ok(None));
        assert_eq!(ored(b"\x01", &[(0, 0x80)]), Ok(Some(vec![0x81])));
        assert_eq!(ored(b"\x01", &[(1, 0)]), Ok(Some(vec![0x01, 0])));
        assert_eq!(ored(b"", &[(MAX_LEN as u32, 1)]), Err(TooLong));
    }

    #[test]
    fn missing_makes_the_union() {
        let a = b"\x01\x00";
        let b = b"\x02\x00\x00";
        let m = missing(a, b);
        assert_eq!(ored(a, &m), Ok(Some(vec![0x03, 0, 0])));
        assert!(missing(b"\x03\x00\x00", b).is_empty());
    }
}
