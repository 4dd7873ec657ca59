//! BITFIELD and BITFIELD_RO: signed (`i1`..`i64`) and unsigned (`u1`..`u63`)
//! integers at any bit offset of a string (`#n` counts in fields of the
//! type's width), read and written as Redis does: big-endian bit order
//! (bit 0 is the most significant bit of the first byte), reads past the
//! end are zeros, and a write first grows the string with zero bytes up to
//! the furthest bit any write of the command names (even one that fails
//! with `OVERFLOW FAIL`).
//!
//! `INCRBY` and an out-of-range `SET` follow the current OVERFLOW mode:
//! WRAP (the default, modular), SAT (clamped) or FAIL (nothing written, a
//! null reply). The arithmetic is Redis's, edge cases included (a negative
//! SET of an unsigned field saturates to its maximum).
//!
//! The operations run on a copy of the bytes between the first and last
//! byte written, and the change is logged as a patch of the bytes the
//! writes cover (a splice from the first one when the string grows); a
//! command that changes nothing writes nothing.

use bytes::Bytes;
use keyspace::{DeltaOp, Write};

use crate::args::{self, is};
use crate::bits::offset_error;
use crate::{CmdError, Ctx, MAX_STRING};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// A field: its type and where it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Field {
    signed: bool,
    bits: u32,
    offset: u64,
}

impl Field {
    fn first_byte(&self) -> usize {
        (self.offset / 8) as usize
    }

    fn last_byte(&self) -> usize {
        ((self.offset + u64::from(self.bits) - 1) / 8) as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Get(Field),
    Set(Field, i64, Overflow),
    IncrBy(Field, i64, Overflow),
}

fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let err = || {
        CmdError::other(
            "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(err()),
    };
    match args::int(&arg[1..]) {
        Ok(bits @ 1..=64) if signed || bits <= 63 => Ok((signed, bits as u32)),
        _ => Err(err()),
    }
}

/// A bit offset, or with `#` an index in fields of `bits` bits; as for
/// SETBIT, within 512 MiB of string.
fn field_offset(arg: &[u8], bits: u32) -> Result<u64, CmdError> {
    let (digits, scale) = match arg.strip_prefix(b"#") {
        Some(rest) => (rest, i64::from(bits)),
        None => (arg, 1),
    };
    let offset = args::int(digits)
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(offset_error)?;
    if offset < 0 || (offset >> 3) as u64 >= MAX_STRING as u64 {
        return Err(offset_error());
    }
    Ok(offset as u64)
}

/// The subcommands, checked as Redis does: all of them before the key.
fn parse(a: &[&[u8]]) -> Result<Vec<Op>, CmdError> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 0;
    while j < a.len() {
        let left = a.len() - j - 1;
        let sub = a[j];
        let kind = if is(sub, "GET") && left >= 2 {
            0
        } else if is(sub, "SET") && left >= 3 {
            1
        } else if is(sub, "INCRBY") && left >= 3 {
            2
        } else if is(sub, "OVERFLOW") && left >= 1 {
            overflow = [
                ("WRAP", Overflow::Wrap),
                ("SAT", Overflow::Sat),
                ("FAIL", Overflow::Fail),
            ]
            .into_iter()
            .find(|(name, _)| is(a[j + 1], name))
            .map(|(_, o)| o)
            .ok_or_else(|| CmdError::other("ERR Invalid OVERFLOW type specified"))?;
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(a[j + 1])?;
        let field = Field {
            signed,
            bits,
            offset: field_offset(a[j + 2], bits)?,
        };
        ops.push(match kind {
            0 => Op::Get(field),
            1 => Op::Set(field, args::int(a[j + 3])?, overflow),
            _ => Op::IncrBy(field, args::int(a[j + 3])?, overflow),
        });
        j += if kind == 0 { 3 } else { 4 };
    }
    Ok(ops)
}

/// Redis's unsigned overflow check of `value + incr` in `bits` bits: None
/// when it fits, else the value to store (wrapped or saturated; FAIL
/// stores nothing).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, mode: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let wrapped = value.wrapping_add(incr as u64) & max;
    let limit = |saturated: u64| {
        if mode == Overflow::Sat {
            saturated
        } else {
            wrapped
        }
    };
    if value > max || (incr > 0 && incr > max.wrapping_sub(value) as i64) {
        Some(limit(max))
    } else if incr < 0 && incr < (value as i64).wrapping_neg() {
        Some(limit(0))
    } else {
        None
    }
}

/// Redis's signed overflow check of `value + incr` in `bits` bits.
fn signed_overflow(value: i64, incr: i64, bits: u32, mode: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrapped = {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let high = u64::MAX << bits;
            // Sign-extend from the field's top bit.
            c = if c & (1 << (bits - 1)) != 0 {
                c | high
            } else {
                c & !high
            };
        }
        c as i64
    };
    let limit = |saturated: i64| {
        if mode == Overflow::Sat {
            saturated
        } else {
            wrapped
        }
    };
    let wide = bits != 64;
    if value > max || (wide && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Some(limit(max))
    } else if value < min || (wide && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr)
    {
        Some(limit(min))
    } else {
        None
    }
}

/// The string as the command sees it: the stored bytes, with the bytes
/// `lo..` being written held in a copy (`window`), zeros past the end.
struct Bitmap<'a> {
    base: &'a [u8],
    lo: usize,
    window: Vec<u8>,
}

impl Bitmap<'_> {
    fn byte(&self, i: usize) -> u8 {
        match i.checked_sub(self.lo).and_then(|w| self.window.get(w)) {
            Some(&b) => b,
            None => self.base.get(i).copied().unwrap_or(0),
        }
    }

    /// The field's bits, right-aligned (at most 64 bits over 9 bytes).
    fn read(&self, f: Field) -> u64 {
        let mut acc = 0u128;
        for i in f.first_byte()..=f.last_byte() {
            acc = acc << 8 | u128::from(self.byte(i));
        }
        let span = (f.last_byte() - f.first_byte() + 1) as u32 * 8;
        let shift = span - (f.offset % 8) as u32 - f.bits;
        (acc >> shift) as u64 & mask(f.bits)
    }

    /// Writes the low `bits` of `value` into the field (inside the window).
    fn write(&mut self, f: Field, value: u64) {
        let (first, last) = (f.first_byte(), f.last_byte());
        let span = (last - first + 1) as u32 * 8;
        let shift = span - (f.offset % 8) as u32 - f.bits;
        let mut acc = 0u128;
        for i in first..=last {
            acc = acc << 8 | u128::from(self.byte(i));
        }
        let m = u128::from(mask(f.bits)) << shift;
        acc = (acc & !m) | ((u128::from(value) << shift) & m);
        for i in (first..=last).rev() {
            self.window[i - self.lo] = acc as u8;
            acc >>= 8;
        }
    }

    fn read_signed(&self, f: Field) -> i64 {
        let raw = self.read(f);
        if f.bits < 64 && raw & (1 << (f.bits - 1)) != 0 {
            (raw | (u64::MAX << f.bits)) as i64
        } else {
            raw as i64
        }
    }
}

fn mask(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

/// Runs one SET or INCRBY: the reply (None: FAIL overflow, not written).
fn set_or_incr(map: &mut Bitmap, f: Field, n: i64, incr: bool, mode: Overflow) -> Option<i64> {
    let (store, reply, overflowed) = if f.signed {
        let old = map.read_signed(f);
        let (base, by) = if incr { (old, n) } else { (n, 0) };
        let over = signed_overflow(base, by, f.bits, mode);
        let new = over.unwrap_or(base.wrapping_add(by));
        (new as u64, if incr { new } else { old }, over.is_some())
    } else {
        let old = map.read(f);
        let (base, by) = if incr { (old, n) } else { (n as u64, 0) };
        let over = unsigned_overflow(base, by, f.bits, mode);
        let new = over.unwrap_or(base.wrapping_add(by as u64));
        (
            new,
            if incr { new as i64 } else { old as i64 },
            over.is_some(),
        )
    };
    if overflowed && mode == Overflow::Fail {
        return None;
    }
    map.write(f, store);
    Some(reply)
}

/// `BITFIELD key [GET type offset] [SET type offset value]
/// [INCRBY type offset increment] [OVERFLOW WRAP|SAT|FAIL] ...`
pub fn bitfield(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    run(ctx, a, false)
}

/// `BITFIELD_RO key [GET type offset] ...`
pub fn bitfield_ro(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    run(ctx, a, true)
}

fn run(ctx: &mut Ctx, a: &[&[u8]], read_only: bool) -> Result<(), CmdError> {
    let key = a[1];
    let ops = parse(&a[2..])?;
    let writes: Vec<Field> = ops
        .iter()
        .filter_map(|op| match *op {
            Op::Set(f, ..) | Op::IncrBy(f, ..) => Some(f),
            Op::Get(_) => None,
        })
        .collect();
    if read_only && !writes.is_empty() {
        return Err(CmdError::other(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let base = match txn.get(key) {
        None => None,
        Some(e) => Some(e.str_bytes().ok_or(CmdError::WrongType)?),
    };
    let old: &[u8] = base.as_deref().unwrap_or_default();
    // The bytes the writes cover, copied to be changed.
    let lo = writes.iter().map(Field::first_byte).min().unwrap_or(0);
    let hi = writes.iter().map(Field::last_byte).max();
    let window = match hi {
        Some(hi) => {
            let mut w = old
                .get(lo..old.len().min(hi + 1))
                .unwrap_or_default()
                .to_vec();
            w.resize(hi + 1 - lo, 0);
            w
        }
        None => Vec::new(),
    };
    let mut map = Bitmap {
        base: old,
        lo,
        window,
    };
    let mut replies = Vec::with_capacity(ops.len());
    for op in &ops {
        replies.push(match *op {
            Op::Get(f) if f.signed => Some(map.read_signed(f)),
            Op::Get(f) => Some(map.read(f) as i64),
            Op::Set(f, v, mode) => set_or_incr(&mut map, f, v, false, mode),
            Op::IncrBy(f, by, mode) => set_or_incr(&mut map, f, by, true, mode),
        });
    }
    if let Some(hi) = hi {
        if let Some(change) = change(old, map, &writes, hi) {
            txn.write(key, Write::Str(change))?;
        }
    }
    drop(txn);
    ctx.out.array(replies.len());
    for r in replies {
        match r {
            Some(n) => ctx.out.int(n),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

/// The string op the writes amount to, None when they changed nothing (a
/// missing key is always created, as in Redis).
fn change(old: &[u8], map: Bitmap, writes: &[Field], hi: usize) -> Option<DeltaOp> {
    let lo = map.lo;
    if hi < old.len() {
        if map.window[..] == old[lo..=hi] {
            return None;
        }
        // Length unchanged: the byte ranges the writes cover.
        let mut spans: Vec<(usize, usize)> = writes
            .iter()
            .map(|f| (f.first_byte(), f.last_byte()))
            .collect();
        spans.sort_unstable();
        let mut ranges: Vec<(u32, Bytes)> = Vec::new();
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for (s, e) in spans {
            match merged.last_mut() {
                Some(last) if s <= last.1 + 1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        for (s, e) in merged {
            ranges.push((
                s as u32,
                Bytes::copy_from_slice(&map.window[s - lo..=e - lo]),
            ));
        }
        return Some(DeltaOp::Patch { ranges });
    }
    // Growing: everything from the first byte written on is replaced (the
    // copy becomes the inserted bytes, not copied again).
    Some(DeltaOp::Splice {
        offset: lo as u32,
        remove: old.len().saturating_sub(lo) as u32,
        insert: Bytes::from(map.window),
    })
}

#[cfg(test)]
mod tests;
