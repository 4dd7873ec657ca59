//! BITCOUNT, BITPOS and BITOP on strings, as Redis 7 answers them.
//!
//! A range (`start end`, in bytes or with `BIT` in bits) counts negative
//! indexes from the end and is clipped to the string; bits outside it in
//! its first and last byte are masked off. A missing key reads as an empty
//! string (BITPOS for a 0 bit: an endless run of zeros). BITOP writes its
//! result as a new value of the destination, with no time to live (an
//! empty result deletes it): across sites it is a whole-value write.

use bytes::Bytes;
use keyspace::{Value, Write};

use crate::args::{self, is};
use crate::{CmdError, Ctx};

/// How a range's indexes are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Byte,
    Bit,
}

fn unit(arg: &[u8]) -> Result<Unit, CmdError> {
    if is(arg, "BIT") {
        Ok(Unit::Bit)
    } else if is(arg, "BYTE") {
        Ok(Unit::Byte)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Redis's reading of `start end` over `len` bytes: negative indexes from
/// the end, clipped to the string. The inclusive range of bits it names,
/// or None when it is empty.
fn bit_range(len: usize, start: i64, end: i64, unit: Unit) -> Option<(u64, u64)> {
    let total = match unit {
        Unit::Byte => len as i64,
        Unit::Bit => len as i64 * 8,
    };
    let from_end = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (from_end(start), from_end(end).min(total - 1));
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(match unit {
        Unit::Byte => (start * 8, end * 8 + 7),
        Unit::Bit => (start, end),
    })
}

/// The bits of a byte from bit `from` (0: the most significant) on.
fn from_bit(from: u64) -> u8 {
    0xff >> (from % 8)
}

/// The bits of a byte up to bit `to`, inclusive.
fn to_bit(to: u64) -> u8 {
    !((0xffu16 >> (to % 8 + 1)) as u8)
}

/// Set bits in `bytes`, eight bytes at a time.
fn popcount(bytes: &[u8]) -> u64 {
    let words = bytes.chunks_exact(8);
    let tail: u64 = words
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    words
        .map(|w| u64::from(u64::from_ne_bytes(w.try_into().expect("eight bytes")).count_ones()))
        .sum::<u64>()
        + tail
}

/// Set bits of `s` in the inclusive bit range `[first, last]` (inside `s`).
fn count_bits(s: &[u8], first: u64, last: u64) -> u64 {
    let (fb, lb) = ((first / 8) as usize, (last / 8) as usize);
    let outside = (s[fb] & !from_bit(first)).count_ones() + (s[lb] & !to_bit(last)).count_ones();
    popcount(&s[fb..=lb]) - u64::from(outside)
}

/// The first bit equal to `bit` in the inclusive range `[first, last]`
/// of `s` (inside `s`).
fn find_bit(s: &[u8], first: u64, last: u64, bit: bool) -> Option<u64> {
    // Searching for a 0 is searching for a 1 in the complement.
    let look = |b: u8| if bit { b } else { !b };
    let (fb, lb) = ((first / 8) as usize, (last / 8) as usize);
    let at = |i: usize, b: u8| (i as u64) * 8 + u64::from(b.leading_zeros());
    let edge = |i: usize| {
        let mut b = look(s[i]);
        if i == fb {
            b &= from_bit(first);
        }
        if i == lb {
            b &= to_bit(last);
        }
        (b != 0).then(|| at(i, b))
    };
    if let Some(p) = edge(fb) {
        return Some(p);
    }
    if lb > fb + 1 {
        let middle = &s[fb + 1..lb];
        let skip = if bit { 0u8 } else { 0xff };
        let skip_word = u64::from_ne_bytes([skip; 8]);
        // Whole words that hold nothing, then byte by byte.
        let words = middle
            .chunks_exact(8)
            .take_while(|w| u64::from_ne_bytes((*w).try_into().expect("eight bytes")) == skip_word)
            .count();
        if let Some(i) = middle[words * 8..].iter().position(|&b| b != skip) {
            let i = fb + 1 + words * 8 + i;
            return Some(at(i, look(s[i])));
        }
    }
    if lb > fb {
        return edge(lb);
    }
    None
}

/// The string at `key` for a read: None when missing.
fn read(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Bytes>, CmdError> {
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    match txn.get(key) {
        None => Ok(None),
        Some(e) => Ok(Some(e.str_bytes().ok_or(CmdError::WrongType)?)),
    }
}

/// `BITCOUNT key [start end [BYTE|BIT]]`.
pub fn bitcount(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    // The key is looked up first: a missing key counts 0 whatever follows.
    let Some(s) = read(ctx, a[1])? else {
        ctx.out.int(0);
        return Ok(());
    };
    let range = match a.len() {
        2 => bit_range(s.len(), 0, -1, Unit::Byte),
        4 | 5 => {
            let (start, end) = (args::int(a[2])?, args::int(a[3])?);
            if start < 0 && end < 0 && start > end {
                ctx.out.int(0);
                return Ok(());
            }
            let unit = match a.get(4) {
                Some(u) => unit(u)?,
                None => Unit::Byte,
            };
            bit_range(s.len(), start, end, unit)
        }
        _ => return Err(CmdError::Syntax),
    };
    let n = range.map_or(0, |(first, last)| count_bits(&s, first, last));
    ctx.out.int(n as i64);
    Ok(())
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]`.
pub fn bitpos(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let bit = match args::int(a[2])? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::other("ERR The bit argument must be 1 or 0.")),
    };
    let Some(s) = read(ctx, a[1])? else {
        // Missing: all zeros, no ones.
        ctx.out.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let (range, end_given) = match a.len() {
        3 => (bit_range(s.len(), 0, -1, Unit::Byte), false),
        4..=6 => {
            let start = args::int(a[3])?;
            let unit = match a.get(5) {
                Some(u) => unit(u)?,
                None => Unit::Byte,
            };
            match a.get(4) {
                Some(end) => (bit_range(s.len(), start, args::int(end)?, unit), true),
                None => (bit_range(s.len(), start, -1, unit), false),
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let pos = match range {
        None => -1,
        Some((first, last)) => match find_bit(&s, first, last, bit) {
            Some(p) => p as i64,
            // Without an end the string reads as padded with zeros: the
            // first clear bit is the one right after it.
            None if !bit && !end_given => last as i64 + 1,
            None => -1,
        },
    };
    ctx.out.int(pos);
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    And,
    Or,
    Xor,
    Not,
}

/// `op` over `sources`, the shorter ones read as padded with zeros.
fn combine(op: Op, sources: &[Bytes]) -> Vec<u8> {
    let len = sources.iter().map(Bytes::len).max().unwrap_or(0);
    let mut out = vec![0u8; len];
    let first = &sources[0];
    match op {
        Op::Not => out.iter_mut().zip(first.iter()).for_each(|(o, b)| *o = !b),
        Op::And => {
            out[..first.len()].copy_from_slice(first);
            for s in &sources[1..] {
                out.iter_mut().zip(s.iter()).for_each(|(o, b)| *o &= b);
                out[s.len()..].fill(0);
            }
        }
        Op::Or | Op::Xor => {
            for s in sources {
                let apply = |o: &mut u8, b: &u8| if op == Op::Or { *o |= b } else { *o ^= b };
                out.iter_mut().zip(s.iter()).for_each(|(o, b)| apply(o, b));
            }
        }
    }
    out
}

/// `BITOP AND|OR|XOR|NOT destkey key [key ...]`: the length of the result.
pub fn bitop(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let op = [
        ("AND", Op::And),
        ("OR", Op::Or),
        ("XOR", Op::Xor),
        ("NOT", Op::Not),
    ]
    .into_iter()
    .find(|(name, _)| is(a[1], name))
    .map(|(_, op)| op)
    .ok_or(CmdError::Syntax)?;
    if op == Op::Not && a.len() != 4 {
        return Err(CmdError::other(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let dest = a[2];
    let mut txn = ctx.ks.txn(a[2..].iter().copied(), ctx.client_id);
    let mut sources = Vec::with_capacity(a.len() - 3);
    for key in &a[3..] {
        sources.push(match txn.get(key) {
            None => Bytes::new(),
            Some(e) => e.str_bytes().ok_or(CmdError::WrongType)?,
        });
    }
    let result = combine(op, &sources);
    let len = result.len();
    if len == 0 {
        txn.write(dest, Write::Delete)?;
    } else {
        txn.write(
            dest,
            Write::Set {
                value: Value::str(result),
                expire_at: 0,
            },
        )?;
    }
    drop(txn);
    ctx.out.int(len as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn naive_bits(s: &[u8]) -> Vec<bool> {
        s.iter()
            .flat_map(|b| (0..8).map(move |i| b & (0x80 >> i) != 0))
            .collect()
    }

    #[test]
    fn ranges_read_as_redis() {
        // "foobar": 6 bytes, 48 bits.
        assert_eq!(bit_range(6, 0, -1, Unit::Byte), Some((0, 47)));
        assert_eq!(bit_range(6, 1, -2, Unit::Byte), Some((8, 39)));
        assert_eq!(bit_range(6, -2, 1, Unit::Byte), None);
        assert_eq!(bit_range(6, 0, 1000, Unit::Byte), Some((0, 47)));
        assert_eq!(bit_range(6, 10, -34, Unit::Bit), Some((10, 14)));
        assert_eq!(bit_range(0, 0, -1, Unit::Byte), None);
        assert_eq!(bit_range(6, i64::MIN, i64::MAX, Unit::Bit), Some((0, 47)));
        assert_eq!(count_bits(b"foobar", 0, 47), 26);
        assert_eq!(count_bits(b"ab", 8, 15), 3);
    }

    #[test]
    fn bitop_pads_with_zeros() {
        let s = |b: &[u8]| Bytes::copy_from_slice(b);
        let (a, b) = (s(b"\x01\x02\xff\xff"), s(b"\x01\x02\xff"));
        assert_eq!(
            combine(Op::And, &[a.clone(), b.clone()]),
            b"\x01\x02\xff\x00"
        );
        assert_eq!(
            combine(Op::Or, &[a.clone(), b.clone()]),
            b"\x01\x02\xff\xff"
        );
        assert_eq!(combine(Op::Xor, &[a.clone(), b]), b"\x00\x00\x00\xff");
        assert_eq!(
            combine(Op::Not, &[s(b"\xaa\x00\xff\x55")]),
            b"\x55\xff\x00\xaa"
        );
        assert_eq!(combine(Op::And, &[Bytes::new(), a]), b"\0\0\0\0");
    }

    proptest! {
        #[test]
        fn count_and_find_match_a_bit_by_bit_reading(
            s in prop::collection::vec(any::<u8>(), 1..80),
            x in any::<u16>(), y in any::<u16>(), bit in any::<bool>(),
        ) {
            let bits = naive_bits(&s);
            let (first, last) = {
                let (p, q) = (x as usize % bits.len(), y as usize % bits.len());
                (p.min(q), p.max(q))
            };
            let ones = bits[first..=last].iter().filter(|&&b| b).count() as u64;
            prop_assert_eq!(count_bits(&s, first as u64, last as u64), ones);
            let found = bits[first..=last].iter().position(|&b| b == bit).map(|p| (p + first) as u64);
            prop_assert_eq!(find_bit(&s, first as u64, last as u64, bit), found);
        }

        #[test]
        fn popcount_counts(s in prop::collection::vec(any::<u8>(), 0..100)) {
            prop_assert_eq!(popcount(&s), naive_bits(&s).iter().filter(|&&b| b).count() as u64);
        }
    }
}
