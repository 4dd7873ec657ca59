//! The sparse body of a HyperLogLog: the 16384 registers as runs, in
//! Redis's three opcodes.
//!
//! ```text
//! 00xxxxxx            ZERO:  1..=64 registers at 0
//! 01xxxxxx yyyyyyyy   XZERO: 1..=16384 registers at 0 (14-bit length)
//! 1vvvvvxx            VAL:   1..=4 registers at 1..=32
//! ```
//!
//! A register is raised in place as Redis does it, byte for byte: the run
//! holding it is split into at most three opcodes, and adjacent VAL runs of
//! the same value are merged again, so the same additions give the same
//! bytes here as in Redis. A body that would grow past `sparse_max` bytes,
//! or a value over 32, means the HyperLogLog must turn dense.
//!
//! Bodies come from clients (any string with the header), so every walk
//! stops at the end, and a two-byte opcode cut short reads a zero as its
//! second byte (the terminator Redis finds there). Reading a body (count,
//! merge, conversion to dense) requires runs covering exactly the 16384
//! registers; raising a register only needs a run covering it, as Redis.

use super::{dense_set, Histogram, HllError, HEADER_LEN, REGISTERS};

const XZERO_BIT: u8 = 0x40;
const VAL_BIT: u8 = 0x80;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
/// How many opcodes after the changed one may merge with it.
const MERGE_SCAN: usize = 5;

/// One opcode, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Zero(usize),
    XZero(usize),
    Val { value: u8, len: usize },
}

impl Op {
    /// Registers the opcode covers.
    pub fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) => n,
            Op::Val { len, .. } => len,
        }
    }

    /// Bytes the opcode takes.
    fn width(self) -> usize {
        if matches!(self, Op::XZero(_)) {
            2
        } else {
            1
        }
    }
}

fn is_val(b: u8) -> bool {
    b & VAL_BIT != 0
}

fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}

fn val_len(b: u8) -> usize {
    usize::from(b & 0x3) + 1
}

fn val_byte(value: u8, len: usize) -> u8 {
    VAL_BIT | ((value - 1) << 2) | (len as u8 - 1)
}

/// The opcode at `at` of `body` (`at` inside it).
fn decode(body: &[u8], at: usize) -> Op {
    let b = body[at];
    if is_val(b) {
        Op::Val {
            value: val_value(b),
            len: val_len(b),
        }
    } else if b & XZERO_BIT != 0 {
        let second = body.get(at + 1).copied().unwrap_or(0);
        Op::XZero(((usize::from(b & 0x3f) << 8) | usize::from(second)) + 1)
    } else {
        Op::Zero(usize::from(b & 0x3f) + 1)
    }
}

/// Every opcode of `body`, in order.
pub fn ops(body: &[u8]) -> impl Iterator<Item = Op> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let op = (at < body.len()).then(|| decode(body, at))?;
        at += op.width();
        Some(op)
    })
}

/// Appends the opcodes for a run of `n` zero registers (ZERO when it fits
/// one, else XZERO runs of at most 16384).
pub fn push_zeros(out: &mut Vec<u8>, mut n: usize) {
    while n > 0 {
        let run = n.min(XZERO_MAX_LEN);
        if run > ZERO_MAX_LEN {
            out.extend_from_slice(&[XZERO_BIT | ((run - 1) >> 8) as u8, (run - 1) as u8]);
        } else {
            out.push((run - 1) as u8);
        }
        n -= run;
    }
}

/// Calls `each(first register, opcode)` for every opcode of a body that
/// covers exactly 16384 registers; Corrupted as soon as a run would pass
/// the last register (as Redis since the fix of CVE-2025-32023: a body
/// covering more is not read at all), or when the body falls short.
fn for_each_run(body: &[u8], mut each: impl FnMut(usize, Op)) -> Result<(), HllError> {
    let mut index = 0usize;
    for op in ops(body) {
        if index + op.span() > REGISTERS {
            return Err(HllError::Corrupted);
        }
        each(index, op);
        index += op.span();
    }
    if index != REGISTERS {
        return Err(HllError::Corrupted);
    }
    Ok(())
}

/// The histogram of a sparse body.
pub fn histogram(body: &[u8]) -> Result<Histogram, HllError> {
    let mut h = [0u32; 64];
    for_each_run(body, |_, op| {
        let value = match op {
            Op::Val { value, .. } => value,
            _ => 0,
        };
        h[usize::from(value)] += op.span() as u32;
    })?;
    Ok(h)
}

/// Calls `each(first register, run length, value)` for every VAL run of a
/// body that covers exactly 16384 registers.
fn for_each_val(body: &[u8], mut each: impl FnMut(usize, usize, u8)) -> Result<(), HllError> {
    for_each_run(body, |first, op| {
        if let Op::Val { value, len } = op {
            each(first, len, value);
        }
    })
}

/// Raises `max` (one register per byte) to the registers of a sparse body.
pub fn merge_into(max: &mut [u8], body: &[u8]) -> Result<(), HllError> {
    for_each_val(body, |first, len, value| {
        for m in &mut max[first..first + len] {
            *m = (*m).max(value);
        }
    })
}

/// Writes the registers of a sparse body into a zeroed dense one.
pub fn expand_into(dense: &mut [u8], body: &[u8]) -> Result<(), HllError> {
    for_each_val(body, |first, len, value| {
        for i in first..first + len {
            dense_set(dense, i, value);
        }
    })
}

/// PFDEBUG DECODE's text: `z:N` (ZERO), `Z:N` (XZERO), `v:VALUE,N`.
pub fn describe(body: &[u8]) -> String {
    let words: Vec<String> = ops(body)
        .map(|op| match op {
            Op::Zero(n) => format!("z:{n}"),
            Op::XZero(n) => format!("Z:{n}"),
            Op::Val { value, len } => format!("v:{value},{len}"),
        })
        .collect();
    words.join(" ")
}

/// What [`raise`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Raised {
    Unchanged,
    Updated,
    /// Not done: the value needs the dense encoding (over 32, or the body
    /// would outgrow `sparse_max`).
    NeedsDense,
}

/// Raises register `index` of the sparse HyperLogLog `hll` (header
/// included) to `count` if it is lower, in place. Corrupted when no opcode
/// covers `index`.
pub fn raise(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max: usize,
) -> Result<Raised, HllError> {
    if count > VAL_MAX_VALUE {
        return Ok(Raised::NeedsDense);
    }
    // The opcode covering `index`, the one before it, and its first register.
    let (mut at, mut prev, mut first) = (HEADER_LEN, None, 0usize);
    let op = loop {
        if at >= hll.len() {
            return Err(HllError::Corrupted);
        }
        let op = decode(hll, at);
        if index < first + op.span() {
            break op;
        }
        prev = Some(at);
        at += op.width();
        first += op.span();
    };
    let last = first + op.span() - 1;
    match op {
        Op::Val { value, .. } if value >= count => return Ok(Raised::Unchanged),
        // A run of one register becomes a VAL of one: no byte moves.
        Op::Val { len: 1, .. } | Op::Zero(1) => hll[at] = val_byte(count, 1),
        _ => {
            // Split the run around `index`: [before] VAL(count) [after].
            let mut seq: Vec<u8> = Vec::with_capacity(5);
            let before = index - first;
            let after = last - index;
            match op {
                Op::Val { value, .. } => {
                    if before > 0 {
                        seq.push(val_byte(value, before));
                    }
                    seq.push(val_byte(count, 1));
                    if after > 0 {
                        seq.push(val_byte(value, after));
                    }
                }
                _ => {
                    push_zero_run(&mut seq, before);
                    seq.push(val_byte(count, 1));
                    push_zero_run(&mut seq, after);
                }
            }
            let new_len = (hll.len() + seq.len()) - op.width();
            if seq.len() > op.width() && new_len > sparse_max {
                return Ok(Raised::NeedsDense);
            }
            let end = (at + op.width()).min(hll.len());
            hll.splice(at..end, seq);
            // An XZERO cut short by the end of the string loses what Redis
            // would have written past its length.
            hll.truncate(new_len);
        }
    }
    merge_vals(hll, prev.unwrap_or(HEADER_LEN));
    hll[HEADER_LEN - 1] |= 0x80;
    Ok(Raised::Updated)
}

/// One run of zeros of 1..=16384 registers as one opcode (none for 0).
fn push_zero_run(out: &mut Vec<u8>, n: usize) {
    if n > 0 {
        push_zeros(out, n);
    }
}

/// Merges adjacent VAL opcodes of one value (while the run fits one
/// opcode), looking at up to five opcodes from `at`.
fn merge_vals(hll: &mut Vec<u8>, mut at: usize) {
    let mut scan = MERGE_SCAN;
    while at < hll.len() && scan > 0 {
        scan -= 1;
        let b = hll[at];
        if !is_val(b) {
            at += if b & XZERO_BIT != 0 { 2 } else { 1 };
            continue;
        }
        if let Some(&next) = hll.get(at + 1) {
            let len = val_len(b) + val_len(next);
            if is_val(next) && val_value(b) == val_value(next) && len <= VAL_MAX_LEN {
                hll[at + 1] = val_byte(val_value(b), len);
                hll.remove(at);
                // Stay: the merged run may merge with the next one too.
                continue;
            }
        }
        at += 1;
    }
}

/// The canonical sparse body of `regs` (one register per byte, 16384 of
/// them): zero runs as ZERO/XZERO, equal values as VAL runs of up to four,
/// left to right. None when a register is over 32 (sparse cannot hold it).
/// The same registers always give the same bytes, whatever order they were
/// raised in (Redis's in-place raises do not: see [`raise`]).
pub fn encode(regs: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < regs.len() {
        let v = regs[i];
        let run = regs[i..].iter().take_while(|&&r| r == v).count();
        if v == 0 {
            push_zeros(&mut out, run);
        } else if v > VAL_MAX_VALUE {
            return None;
        } else {
            let mut left = run;
            while left > 0 {
                let len = left.min(VAL_MAX_LEN);
                out.push(val_byte(v, len));
                left -= len;
            }
        }
        i += run;
    }
    Some(out)
}
