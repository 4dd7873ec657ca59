//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST,
//! on string values in Redis's exact encoding (`encoding`, `sparse`) with
//! Redis 7's estimator (`estimator`), so a value moves between Redis and
//! deltagrid as a plain string (GET there, SET here) and counts the same.
//!
//! The encoding itself (header, dense registers, sparse opcodes, and the
//! register-wise merge) is `keyspace::hll`: the keyspace applies merges.
//!
//! PFADD and PFMERGE hand the write path the registers they raised with the
//! new bytes (`Write::Hll`): where sites merge it logs the raises (merged
//! register by register, see `keyspace::hll::merge`), elsewhere a `Set`
//! keeping the TTL, logged as a patch or splice of the bytes that changed
//! when that is small. PFDEBUG's conversions are whole-value `Set`s.
//!
//! One difference from Redis: PFCOUNT does not write the cardinality it
//! computed back into the header's cache. PFCOUNT is a read (it runs on
//! replicas and while a partition is handed over), and between sites a
//! write of the cache would take part in last-writer-wins, so a count on
//! one site could undo an addition made on another. A cache that is valid
//! (in a value copied from Redis) is used as Redis uses it.

mod estimator;
mod selftest;
#[cfg(test)]
mod tests;

use bytes::Bytes;
use keyspace::hll as encoding;
use keyspace::hll::sparse;
use keyspace::{Txn, Value, Write};

use crate::args::is;
use crate::{CmdError, Ctx};
use encoding::{cached_cardinality, encoding_of, histogram, merge_into, Encoding, Hll};
use encoding::{HEADER_LEN, REGISTERS};

use encoding::HllError;
pub use keyspace::hll::SPARSE_MAX_BYTES;

impl From<HllError> for CmdError {
    fn from(e: HllError) -> Self {
        match e {
            HllError::NotHll => {
                CmdError::other("WRONGTYPE Key is not a valid HyperLogLog string value.")
            }
            HllError::Corrupted => CmdError::other("INVALIDOBJ Corrupted HLL object detected"),
        }
    }
}

/// Adding an element: raising the register its hash picks.
pub(crate) trait AddElement {
    /// Adds `element`: the register and value raised, if one grew. A
    /// sparse body grows past `sparse_max` bytes, or needs a value over
    /// 32, by turning dense.
    fn add(&mut self, element: &[u8], sparse_max: usize) -> Result<Option<(u16, u8)>, HllError>;
}

impl AddElement for Hll {
    fn add(&mut self, element: &[u8], sparse_max: usize) -> Result<Option<(u16, u8)>, HllError> {
        let (index, count) = estimator::register_and_count(element);
        let grew = self.raise(index, count, sparse_max)?;
        Ok(grew.then_some((index as u16, count)))
    }
}

/// The string at `key` (None: missing) with its expiry.
fn string_at(txn: &mut Txn, key: &[u8]) -> Result<Option<(Bytes, u64)>, CmdError> {
    match txn.get(key) {
        None => Ok(None),
        Some(e) => {
            let s = e.str_bytes().ok_or(CmdError::WrongType)?;
            Ok(Some((s, e.expire_at)))
        }
    }
}

/// Stores a changed HyperLogLog, keeping the key's time to live.
fn store(txn: &mut Txn, key: &[u8], hll: Hll, expire_at: u64) -> Result<(), CmdError> {
    txn.write(
        key,
        Write::Set {
            value: Value::str(hll.into_bytes()),
            expire_at,
        },
    )?;
    Ok(())
}

/// Stores a HyperLogLog whose registers `raised` grew: where sites merge,
/// as those raises (merged register by register), else as `store` does.
fn store_raised(
    txn: &mut Txn,
    key: &[u8],
    hll: Hll,
    raised: Vec<(u16, u8)>,
) -> Result<(), CmdError> {
    txn.write(
        key,
        Write::Hll {
            registers: raised,
            value: Bytes::from(hll.into_bytes()),
        },
    )?;
    Ok(())
}

/// `PFADD key [element ...]`: 1 if a register changed (or the key was
/// created), else 0.
pub fn pfadd(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let (mut hll, mut updated) = match txn.get(key) {
        None => (Hll::new(), true),
        Some(e) => {
            let value = e.as_str().ok_or(CmdError::WrongType)?;
            (Hll::from_value(value)?, false)
        }
    };
    let mut raised = Vec::new();
    for element in &a[2..] {
        if let Some(r) = hll.add(element, SPARSE_MAX_BYTES)? {
            raised.push(r);
            updated = true;
        }
    }
    if updated {
        hll.invalidate_cache();
        store_raised(&mut txn, key, hll, raised)?;
    }
    drop(txn);
    ctx.out.int(i64::from(updated));
    Ok(())
}

/// The cardinality of one HyperLogLog value: its valid cache, or computed.
fn cardinality(value: &[u8]) -> Result<u64, CmdError> {
    let enc = encoding_of(value)?;
    if let Some(card) = cached_cardinality(value) {
        return Ok(card);
    }
    Ok(estimator::estimate(&histogram(value, enc)?))
}

/// `PFCOUNT key [key ...]`: the cardinality of one HyperLogLog, or of the
/// union of several (missing keys count as empty).
pub fn pfcount(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let keys = &a[1..];
    // The values are shared, not copied: counting runs outside the locks.
    // Errors come in key order, as Redis checks the keys one by one.
    let mut txn = ctx.ks.txn(keys.iter().copied(), ctx.client_id);
    let values: Vec<Option<Option<Bytes>>> = keys
        .iter()
        .map(|k| txn.get(k).map(|e| e.str_bytes()))
        .collect();
    drop(txn);
    let card = match &values[..] {
        [None] => 0,
        [Some(one)] => cardinality(one.as_ref().ok_or(CmdError::WrongType)?)?,
        _ => {
            let mut max = vec![0u8; REGISTERS];
            for value in values.iter().flatten() {
                let value = value.as_ref().ok_or(CmdError::WrongType)?;
                merge_into(&mut max, value, encoding_of(value)?)?;
            }
            estimator::estimate(&estimator::raw_histogram(&max))
        }
    };
    ctx.out.int(card as i64);
    Ok(())
}

/// `PFMERGE destkey [sourcekey ...]`: the destination (created if
/// missing) takes the register-wise maximum of itself and the sources.
pub fn pfmerge(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let dest = a[1];
    let mut txn = ctx.ks.txn(a[1..].iter().copied(), ctx.client_id);
    let mut max = vec![0u8; REGISTERS];
    let mut any_dense = false;
    for key in &a[1..] {
        let Some(e) = txn.get(key) else { continue };
        let value = e.as_str().ok_or(CmdError::WrongType)?;
        let enc = encoding_of(value)?;
        any_dense |= enc == Encoding::Dense;
        merge_into(&mut max, value, enc)?;
    }
    let mut hll = match string_at(&mut txn, dest)? {
        None => Hll::new(),
        Some((value, _)) => Hll::from_value(&value)?,
    };
    // A dense input makes the result dense at once (no conversion later).
    if any_dense {
        hll.make_dense()?;
    }
    let mut raised = Vec::new();
    for (index, &m) in max.iter().enumerate() {
        if m != 0 && hll.raise(index, m, SPARSE_MAX_BYTES)? {
            raised.push((index as u16, m));
        }
    }
    hll.invalidate_cache();
    store_raised(&mut txn, dest, hll, raised)?;
    drop(txn);
    ctx.out.simple("OK");
    Ok(())
}

/// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key`. GETREG and TODENSE turn a
/// sparse value dense, as Redis does (a write).
pub fn pfdebug(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (sub, key) = (a[1], a[2]);
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let Some((value, expire_at)) = string_at(&mut txn, key)? else {
        return Err(CmdError::other("ERR The specified key does not exist"));
    };
    let mut hll = Hll::from_value(&value)?;
    if is(sub, "GETREG") || is(sub, "TODENSE") {
        let converted = hll.make_dense()?;
        let regs = is(sub, "GETREG").then(|| encoding::dense_registers(&hll.bytes()[HEADER_LEN..]));
        if converted {
            store(&mut txn, key, hll, expire_at)?;
        }
        drop(txn);
        match regs {
            Some(regs) => {
                ctx.out.array(regs.len());
                for r in regs {
                    ctx.out.int(i64::from(r));
                }
            }
            None => ctx.out.int(i64::from(converted)),
        }
    } else if is(sub, "DECODE") {
        if hll.encoding() != Encoding::Sparse {
            return Err(CmdError::other("ERR HLL encoding is not sparse"));
        }
        ctx.out
            .bulk(sparse::describe(&hll.bytes()[HEADER_LEN..]).as_bytes());
    } else if is(sub, "ENCODING") {
        ctx.out.simple(hll.encoding().name());
    } else {
        return Err(CmdError::other(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(sub)
        )));
    }
    Ok(())
}

/// `PFSELFTEST`: Redis's self test of the registers and the estimator.
pub fn pfselftest(ctx: &mut Ctx, _a: &[&[u8]]) -> Result<(), CmdError> {
    match selftest::run() {
        Ok(()) => ctx.out.simple("OK"),
        Err(reason) => return Err(CmdError::other(format!("ERR {reason}"))),
    }
    Ok(())
}
