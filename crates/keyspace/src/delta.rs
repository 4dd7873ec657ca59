//! Automatic deltas for strings: when a SET replaces a value with a similar
//! one, find a small description of the difference. Two shapes are tried and
//! the smaller wins: one splice (common prefix and suffix kept), and for equal
//! lengths a few patched ranges (changes far apart, e.g. a counter and a
//! timestamp inside a serialized object). Both are O(n) single passes.
//!
//! The same module applies string ops, for the write path and for replicas.

use bytes::{Bytes, BytesMut};

use crate::change::DeltaOp;
use crate::value::StrValue;

/// Below this size a full value is as cheap as any delta.
pub const MIN_DIFF_LEN: usize = 128;
/// Patch ranges closer than this are merged (a range header costs ~6 bytes).
const MERGE_GAP: usize = 16;
/// More ranges than this and a patch is no longer "a few changed ranges".
const MAX_RANGES: usize = 32;

/// The bytes a delta op carries, roughly what it costs on the wire.
pub fn op_payload_len(op: &DeltaOp) -> usize {
    match op {
        DeltaOp::Splice { insert, .. } => 10 + insert.len(),
        DeltaOp::Patch { ranges } => ranges.iter().map(|(_, b)| 6 + b.len()).sum::<usize>() + 2,
        DeltaOp::IncrBy(_) => 9,
        DeltaOp::HashSet { fields } => fields.iter().map(|(f, v)| 4 + f.len() + v.len()).sum(),
        DeltaOp::HashDel { fields } => fields.iter().map(|f| 2 + f.len()).sum(),
        DeltaOp::SetExpiry(_) => 9,
        DeltaOp::Count { .. } => 18,
        DeltaOp::HashCount { field, .. } => 20 + field.len(),
        DeltaOp::FloatCount { total } => 2 + total.len(),
        DeltaOp::ZCount { member, .. } => 10 + member.len(),
        DeltaOp::ZAssign { members, counters } => {
            members.iter().map(|(m, _)| 10 + m.len()).sum::<usize>()
                + counters
                    .iter()
                    .map(|(m, c)| 40 + m.len() + 12 * c.contributions().len())
                    .sum::<usize>()
        }
        DeltaOp::HashFloatCount { field, total } => 4 + field.len() + total.len(),
        DeltaOp::SetAdd { members } => members.iter().map(|m| 2 + m.len()).sum(),
        DeltaOp::ZAdd { members } => members.iter().map(|(m, _)| 10 + m.len()).sum(),
        DeltaOp::Remove { members, .. } => members.iter().map(|(m, _)| 12 + m.len()).sum(),
        DeltaOp::HllMax { registers } => 2 + 3 * registers.len(),
        DeltaOp::BitsOr { bytes } => 2 + 5 * bytes.len(),
        DeltaOp::Checked { op, .. } => 8 + op_payload_len(op),
        DeltaOp::ListEdit { edits } => edits
            .iter()
            .map(|e| 4 + e.insert.iter().map(|b| 2 + b.len()).sum::<usize>())
            .sum(),
    }
}

/// A delta turning `old` into `new` when it is much smaller than `new`
/// (at most a quarter of it), else None.
pub fn diff(old: &[u8], new: &[u8]) -> Option<DeltaOp> {
    if new.len() < MIN_DIFF_LEN || old.len() > u32::MAX as usize || new.len() > u32::MAX as usize {
        return None;
    }
    let budget = new.len() / 4;
    // A patch, when there is one, is never larger than the splice: its
    // ranges are at least MERGE_GAP apart, and each gap costs the splice
    // more than a range header costs the patch. So one pass suffices.
    if old.len() == new.len() {
        if let Some(p) = patch(old, new, budget) {
            return (op_payload_len(&p) <= budget).then_some(p);
        }
    }
    splice(old, new, budget)
}

/// Chunk compared with one slice equality (memcmp) before looking at bytes.
const CHUNK: usize = 32;

/// Length of the common prefix of `a` and `b`, skipping equal chunks with
/// memcmp: diffing runs under the partition lock on every similar SET.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + CHUNK <= n && a[i..i + CHUNK] == b[i..i + CHUNK] {
        i += CHUNK;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Length of the leading run in which `a` and `b` differ at every byte,
/// eight bytes at a time: two unrelated values differ almost everywhere,
/// and a SET over one walked up to a quarter of its bytes one by one
/// before giving up on a patch.
fn differing_run(a: &[u8], b: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let word = |s: &[u8]| u64::from_le_bytes(s[i..i + 8].try_into().expect("eight bytes"));
        let x = word(a) ^ word(b);
        // A zero byte of x is an equal byte; the lowest flagged byte is
        // always a true zero (a false flag needs a borrow from below it).
        let equal = x.wrapping_sub(ONES) & !x & HIGHS;
        if equal != 0 {
            return i + (equal.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x != y)
        .count()
}

/// Length of the common suffix of `a` and `b`, at most `max`.
fn common_suffix(a: &[u8], b: &[u8], max: usize) -> usize {
    let (mut ea, mut eb, mut n) = (a.len(), b.len(), 0);
    while n + CHUNK <= max && a[ea - CHUNK..ea] == b[eb - CHUNK..eb] {
        ea -= CHUNK;
        eb -= CHUNK;
        n += CHUNK;
    }
    n + a[..ea]
        .iter()
        .rev()
        .zip(b[..eb].iter().rev())
        .take(max - n)
        .take_while(|(x, y)| x == y)
        .count()
}

/// The splice keeping the common prefix and suffix, if its payload is
/// within `budget` (checked before the inserted bytes are copied: most
/// SETs of unrelated values end here).
fn splice(old: &[u8], new: &[u8], budget: usize) -> Option<DeltaOp> {
    let prefix = common_prefix(old, new);
    let max_suffix = old.len().min(new.len()) - prefix;
    let suffix = common_suffix(old, new, max_suffix);
    let (offset, remove) = (prefix as u32, (old.len() - prefix - suffix) as u32);
    let insert = &new[prefix..new.len() - suffix];
    let header = op_payload_len(&DeltaOp::Splice {
        offset,
        remove,
        insert: Bytes::new(),
    });
    (header + insert.len() <= budget).then(|| DeltaOp::Splice {
        offset,
        remove,
        insert: Bytes::copy_from_slice(insert),
    })
}

fn patch(old: &[u8], new: &[u8], budget: usize) -> Option<DeltaOp> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    let mut cost = 0;
    while i < new.len() {
        if old[i] == new[i] {
            i += common_prefix(&old[i..], &new[i..]);
            continue;
        }
        let start = i;
        i += differing_run(&old[i..], &new[i..]);
        match ranges.last_mut() {
            Some(last) if start - last.1 < MERGE_GAP => {
                cost += i - last.1;
                last.1 = i;
            }
            _ => {
                cost += 6 + i - start;
                ranges.push((start, i));
            }
        }
        if ranges.len() > MAX_RANGES || cost > budget {
            return None;
        }
    }
    Some(DeltaOp::Patch {
        ranges: ranges
            .into_iter()
            .map(|(s, e)| (s as u32, Bytes::copy_from_slice(&new[s..e])))
            .collect(),
    })
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum StringOpError {
    #[error("delta range outside the value")]
    OutOfRange,
    #[error("value is not an integer or out of range")]
    NotAnInteger,
    #[error("increment or decrement would overflow")]
    Overflow,
    #[error("not a string operation")]
    NotAStringOp,
}

/// Applies a string op to `old`, giving the new value.
pub fn apply_string_op(old: &[u8], op: &DeltaOp) -> Result<Bytes, StringOpError> {
    match op {
        DeltaOp::Splice {
            offset,
            remove,
            insert,
        } => {
            let (offset, remove) = (*offset as usize, *remove as usize);
            // A splice may start past the end (SETRANGE): the gap is zero-filled.
            if offset > old.len() && remove > 0 {
                return Err(StringOpError::OutOfRange);
            }
            let end = offset
                .checked_add(remove)
                .ok_or(StringOpError::OutOfRange)?;
            if end > old.len().max(offset) {
                return Err(StringOpError::OutOfRange);
            }
            // Never past the longest string (a peer's splice far past the
            // end would otherwise allocate the gap).
            if old.len().max(offset) - remove + insert.len() > crate::bits::MAX_LEN {
                return Err(StringOpError::OutOfRange);
            }
            let mut out = BytesMut::with_capacity(old.len().max(offset) - remove + insert.len());
            out.extend_from_slice(&old[..offset.min(old.len())]);
            out.resize(offset, 0);
            out.extend_from_slice(insert);
            if end < old.len() {
                out.extend_from_slice(&old[end..]);
            }
            Ok(out.freeze())
        }
        DeltaOp::Checked { op, .. } if !matches!(**op, DeltaOp::Checked { .. }) => {
            apply_string_op(old, op)
        }
        DeltaOp::Patch { ranges } => {
            let mut out = BytesMut::from(old);
            for (offset, bytes) in ranges {
                let start = *offset as usize;
                let end = start
                    .checked_add(bytes.len())
                    .ok_or(StringOpError::OutOfRange)?;
                if end > out.len() {
                    return Err(StringOpError::OutOfRange);
                }
                out[start..end].copy_from_slice(bytes);
            }
            Ok(out.freeze())
        }
        DeltaOp::IncrBy(by) => {
            let n = parse_i64(old).ok_or(StringOpError::NotAnInteger)?;
            let n = n.checked_add(*by).ok_or(StringOpError::Overflow)?;
            Ok(Bytes::from(itoa_bytes(n)))
        }
        _ => Err(StringOpError::NotAStringOp),
    }
}

/// Strict integer parse with Redis's rules: no spaces, no '+', no leading zeros.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let (neg, digits) = if b[0] == b'-' {
        (true, &b[1..])
    } else {
        (false, b)
    };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let v = (d - b'0') as i64;
        n = if neg {
            n.checked_mul(10)?.checked_sub(v)?
        } else {
            n.checked_mul(10)?.checked_add(v)?
        };
    }
    Some(n)
}

/// INCRBY on a held string, as [`apply_string_op`] with `IncrBy(by)`, but
/// in place: the digits (at most 20) are held inline, so an increment
/// allocates nothing. On error `held` is unchanged.
pub fn incr_in_place(held: &mut StrValue, by: i64) -> Result<(), StringOpError> {
    let n = parse_i64(held).ok_or(StringOpError::NotAnInteger)?;
    let n = n.checked_add(by).ok_or(StringOpError::Overflow)?;
    // At most 20 digits: always inline, no allocation.
    *held = StrValue::copy(itoa::Buffer::new().format(n).as_bytes());
    Ok(())
}

pub fn itoa_bytes(n: i64) -> Vec<u8> {
    itoa::Buffer::new().format(n).as_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_splice_past_the_longest_string_is_refused() {
        let far = DeltaOp::Splice {
            offset: u32::MAX,
            remove: 0,
            insert: Bytes::from_static(b"x"),
        };
        assert_eq!(apply_string_op(b"ab", &far), Err(StringOpError::OutOfRange));
        let checked = DeltaOp::Checked {
            base_hash: 0,
            op: Box::new(far),
        };
        assert_eq!(
            apply_string_op(b"ab", &checked),
            Err(StringOpError::OutOfRange)
        );
    }

    #[test]
    fn twelve_changed_bytes_in_ten_kilobytes_make_a_small_delta() {
        let old: Vec<u8> = (0..10_275u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut new = old.clone();
        new[10_240..10_244].copy_from_slice(&[1, 2, 3, 4]);
        new[10_250..10_258].copy_from_slice(&[9; 8]);
        let op = diff(&old, &new).expect("delta");
        assert!(op_payload_len(&op) < 40, "{op:?}");
        assert_eq!(apply_string_op(&old, &op).unwrap(), new);
    }

    proptest! {
        #[test]
        fn differing_run_stops_at_the_first_equal_byte(
            pairs in proptest::collection::vec((any::<u8>(), any::<u8>()), 0..64),
            equal_every in 1usize..40,
        ) {
            let a: Vec<u8> = pairs.iter().map(|p| p.0).collect();
            // Some equal bytes on purpose, so that every position in a word is tried.
            let b: Vec<u8> = pairs.iter().enumerate().map(|(i, p)| if i % equal_every == equal_every - 1 { p.0 } else { p.1 }).collect();
            let expected = a.iter().zip(&b).take_while(|(x, y)| x != y).count();
            prop_assert_eq!(differing_run(&a, &b), expected);
        }
    }

    #[test]
    fn incr_in_place_adds_and_an_error_changes_nothing() {
        let mut held = StrValue::copy(b"41");
        incr_in_place(&mut held, 1).unwrap();
        assert_eq!(&held[..], b"42");
        incr_in_place(&mut held, 58).unwrap();
        assert_eq!(&held[..], b"100");
        incr_in_place(&mut held, -200).unwrap();
        assert_eq!(&held[..], b"-100");
        assert_eq!(
            incr_in_place(&mut held, i64::MIN),
            Err(StringOpError::Overflow)
        );
        let mut text = StrValue::copy(b"abc");
        assert_eq!(
            incr_in_place(&mut text, 1),
            Err(StringOpError::NotAnInteger)
        );
        assert_eq!(
            (&held[..], &text[..]),
            (&b"-100"[..], &b"abc"[..]),
            "an error changes nothing"
        );
    }

    #[test]
    fn far_apart_changes_use_ranges_not_one_splice() {
        let old = vec![b'a'; 4096];
        let mut new = old.clone();
        new[10] = b'x';
        new[4000] = b'y';
        let op = diff(&old, &new).expect("delta");
        assert!(matches!(op, DeltaOp::Patch { ref ranges } if ranges.len() == 2));
    }

    #[test]
    fn unrelated_values_get_no_delta() {
        let old = vec![b'a'; 1000];
        let new = vec![b'b'; 1000];
        assert_eq!(diff(&old, &new), None);
        assert_eq!(diff(b"short", b"shorter"), None);
    }

    #[test]
    fn integers_parse_like_redis() {
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"+1",
            b" 1",
            b"01",
            b"-0",
            b"1.0",
            b"9223372036854775808",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad);
        }
    }

    proptest! {
        #[test]
        fn chunked_prefix_and_suffix_match_the_bytewise_ones(
            a in proptest::collection::vec(0u8..3, 0..200),
            b in proptest::collection::vec(0u8..3, 0..200),
        ) {
            let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &b), prefix);
            let max = a.len().min(b.len()) - prefix;
            let suffix = a.iter().rev().zip(b.iter().rev()).take(max).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_suffix(&a, &b, max), suffix);
        }

        #[test]
        fn a_patch_is_never_larger_than_the_splice(
            old in proptest::collection::vec(0u8..4, 128..600),
            edits in proptest::collection::vec((0usize..600, 0u8..4), 0..40),
        ) {
            let mut new = old.clone();
            for (i, b) in edits { if i < new.len() { new[i] = b; } }
            if let Some(p) = patch(&old, &new, usize::MAX) {
                let s = splice(&old, &new, usize::MAX).expect("no budget");
                prop_assert!(op_payload_len(&p) < op_payload_len(&s));
            }
        }

        #[test]
        fn diff_then_apply_reproduces_the_new_value(
            old in proptest::collection::vec(0u8..4, 0..600),
            edits in proptest::collection::vec((0usize..600, 0u8..4), 0..8),
            grow in proptest::collection::vec(0u8..4, 0..20),
        ) {
            let mut new = old.clone();
            for (i, b) in edits { if i < new.len() { new[i] = b; } }
            if grow.len() % 2 == 1 { new.extend_from_slice(&grow); }
            if let Some(op) = diff(&old, &new) {
                prop_assert_eq!(apply_string_op(&old, &op).unwrap(), Bytes::from(new));
            }
        }
    }
}
