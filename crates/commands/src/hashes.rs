//! Hash commands. Every write logs only the fields it touched (HSET, HDEL,
//! HINCRBY...), never the whole hash.

use bytes::Bytes;
use keyspace::{HashValue, Write};

use crate::args::{self, is, owned};
use crate::error::CmdError;
use crate::number::{float_sum, parse_f64, parse_i64};
use crate::sampling;
use crate::Ctx;

/// Runs `f` on the hash at `key` (None when missing); WRONGTYPE otherwise.
fn read<R>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Ctx, Option<&HashValue>) -> R,
) -> Result<R, CmdError> {
    let ks = ctx.ks;
    let mut txn = ks.txn([key], ctx.client_id);
    match txn.get(key) {
        None => Ok(f(ctx, None)),
        Some(e) => {
            let h = e.as_hash().ok_or(CmdError::WrongType)?;
            Ok(f(ctx, Some(h)))
        }
    }
}

fn check_hash(txn: &mut keyspace::Txn, key: &[u8]) -> Result<(), CmdError> {
    match txn.get(key) {
        Some(e) if e.as_hash().is_none() => Err(CmdError::WrongType),
        _ => Ok(()),
    }
}

/// The field/value pairs of HSET/HMSET, copied out of the request
/// ([`keyspace::value::copy_pairs`]).
fn pairs(a: &[&[u8]], name: &str) -> Result<Vec<(Bytes, Bytes)>, CmdError> {
    if !a.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.into()));
    }
    Ok(keyspace::value::copy_pairs(
        a.chunks_exact(2).map(|p| (p[0], p[1])),
    ))
}

fn set_fields(ctx: &mut Ctx, key: &[u8], fields: Vec<(Bytes, Bytes)>) -> Result<usize, CmdError> {
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    // Matched, not `ok_or(CmdError::..)`: see `args::int`.
    let held = match txn.get(key) {
        None => None,
        Some(e) => match e.as_hash() {
            Some(h) => Some(h),
            None => return Err(CmdError::WrongType),
        },
    };
    // One field (HSET's usual form) is new unless the hash holds it: known
    // before the write, so the hash is not looked up again after it.
    if let [(name, _)] = &fields[..] {
        let added = held.is_none_or(|h| h.get(name).is_none()) as usize;
        txn.write(key, Write::HashSet(fields))?;
        return Ok(added);
    }
    // Setting fields only adds or replaces: the new ones are what the
    // hash grew by (a name given twice counts once, as in Redis).
    let before = held.map_or(0, HashValue::len);
    txn.write(key, Write::HashSet(fields))?;
    let after = txn
        .get(key)
        .and_then(|e| e.as_hash())
        .map_or(0, HashValue::len);
    Ok(after.saturating_sub(before))
}

pub fn hset(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let fields = pairs(&a[2..], "hset")?;
    let added = set_fields(ctx, a[1], fields)?;
    ctx.out.int(added as i64);
    Ok(())
}

pub fn hmset(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let fields = pairs(&a[2..], "hmset")?;
    set_fields(ctx, a[1], fields)?;
    ctx.out.simple("OK");
    Ok(())
}

pub fn hsetnx(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    check_hash(&mut txn, a[1])?;
    let exists = txn
        .get(a[1])
        .and_then(|e| e.as_hash())
        .is_some_and(|h| h.get(a[2]).is_some());
    if !exists {
        txn.write(a[1], Write::HashSet(vec![(owned(a[2]), owned(a[3]))]))?;
    }
    drop(txn);
    ctx.out.int(!exists as i64);
    Ok(())
}

pub fn hget(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, h| match h.and_then(|h| h.get(a[2])) {
        Some(f) => ctx.out.bulk(f.value),
        None => ctx.out.null(),
    })
}

pub fn hmget(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, h| {
        ctx.out.array(a.len() - 2);
        for f in &a[2..] {
            match h.and_then(|h| h.get(f)) {
                Some(f) => ctx.out.bulk(f.value),
                None => ctx.out.null(),
            }
        }
    })
}

pub fn hgetall(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, h| {
        ctx.out.map(h.map_or(0, |h| h.len()));
        for (f, v) in h.into_iter().flat_map(|h| h.iter()) {
            ctx.out.bulk(f);
            ctx.out.bulk(v.value);
        }
    })
}

pub fn hkeys(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, h| {
        ctx.out.array(h.map_or(0, |h| h.len()));
        for (f, _) in h.into_iter().flat_map(|h| h.iter()) {
            ctx.out.bulk(f);
        }
    })
}

pub fn hvals(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, h| {
        ctx.out.array(h.map_or(0, |h| h.len()));
        for (_, v) in h.into_iter().flat_map(|h| h.iter()) {
            ctx.out.bulk(v.value);
        }
    })
}

pub fn hlen(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, h| {
        ctx.out.int(h.map_or(0, |h| h.len()) as i64)
    })
}

pub fn hexists(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, h| {
        ctx.out.int(h.and_then(|h| h.get(a[2])).is_some() as i64)
    })
}

pub fn hstrlen(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, h| {
        ctx.out
            .int(h.and_then(|h| h.get(a[2])).map_or(0, |f| f.value.len()) as i64)
    })
}

pub fn hdel(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    check_hash(&mut txn, a[1])?;
    let mut removed: Vec<Bytes> = Vec::new();
    if let Some(h) = txn.get(a[1]).and_then(|e| e.as_hash()) {
        for f in &a[2..] {
            if h.get(f).is_some() && !removed.iter().any(|r| r == f) {
                removed.push(owned(f));
            }
        }
    }
    let n = removed.len();
    if n > 0 {
        txn.write(a[1], Write::HashDel(removed))?;
    }
    drop(txn);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn hincrby(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let by = args::int(a[3])?;
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    check_hash(&mut txn, a[1])?;
    let current = match txn
        .get(a[1])
        .and_then(|e| e.as_hash())
        .and_then(|h| h.get(a[2]))
    {
        Some(f) => parse_i64(f.value).ok_or(CmdError::HashNotInteger)?,
        None => 0,
    };
    let new = current.checked_add(by).ok_or(CmdError::Overflow)?;
    let text = Bytes::copy_from_slice(itoa::Buffer::new().format(new).as_bytes());
    // Where sites merge, logged as this site's running total of the
    // field's increments, so that increments at every site sum.
    txn.write(
        a[1],
        Write::HashIncr {
            field: owned(a[2]),
            by,
            text,
        },
    )?;
    drop(txn);
    ctx.out.int(new);
    Ok(())
}

pub fn hincrbyfloat(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let by = args::float(a[3])?;
    if !by.is_finite() {
        return Err(CmdError::other("ERR value is NaN or Infinity"));
    }
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    check_hash(&mut txn, a[1])?;
    let (current, current_text) = match txn
        .get(a[1])
        .and_then(|e| e.as_hash())
        .and_then(|h| h.get(a[2]))
    {
        Some(f) => (
            parse_f64(f.value).ok_or(CmdError::HashNotFloat)?,
            Bytes::copy_from_slice(f.value),
        ),
        None => (0.0, Bytes::from_static(b"0")),
    };
    let new = current + by;
    if !new.is_finite() {
        return Err(CmdError::NanOrInfinity);
    }
    let text = Bytes::from(float_sum(&current_text, a[3], new));
    // Where sites merge, logged as this site's running total of the
    // field's HINCRBYFLOATs; the reply is the value stored.
    txn.write(
        a[1],
        Write::HashFloatIncr {
            field: owned(a[2]),
            by: owned(a[3]),
            text: text.clone(),
        },
    )?;
    let text = match txn
        .get(a[1])
        .and_then(|e| e.as_hash())
        .and_then(|h| h.get(a[2]))
    {
        Some(f) => Bytes::copy_from_slice(f.value),
        None => text,
    };
    drop(txn);
    ctx.out.bulk(&text);
    Ok(())
}

/// HSCAN pages through fields in scan order (`crate::sampling`).
pub fn hscan(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let cursor = args::cursor(a[2])?;
    let mut novalues = false;
    let mut rest: Vec<&[u8]> = Vec::new();
    for arg in &a[3..] {
        if is(arg, "NOVALUES") {
            novalues = true;
        } else {
            rest.push(arg);
        }
    }
    let opts = args::scan_opts(&rest, false)?;
    read(ctx, a[1], |ctx, h| {
        // A small hash is returned whole in one page with cursor 0, whatever
        // COUNT says (as Redis does for a listpack).
        let one_shot = h.is_none_or(|h| ctx.ks.encodings().hash_is_small(h));
        let fields = h
            .into_iter()
            .flat_map(|h| h.iter())
            .map(|(f, v)| (f, v.value));
        let (next, page) = sampling::scan_page(fields, cursor, &opts, one_shot);
        ctx.out.array(2);
        ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
        ctx.out.array(page.len() * if novalues { 1 } else { 2 });
        for (f, v) in page {
            ctx.out.bulk(f);
            if !novalues {
                ctx.out.bulk(v);
            }
        }
    })
}

pub fn hrandfield(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let count = a.get(2).map(|c| args::int(c)).transpose()?;
    let withvalues = match a.get(3) {
        None => false,
        Some(w) if is(w, "WITHVALUES") && a.len() == 4 => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    sampling::check_count(count, withvalues)?;
    read(ctx, a[1], |ctx, h| {
        let len = h.map_or(0, |h| h.len());
        let Some(count) = count else {
            match h.filter(|h| !h.is_empty()) {
                Some(h) => ctx.out.bulk(
                    h.get_index(sampling::random_one(len))
                        .map_or(&[][..], |(f, _)| f),
                ),
                None => ctx.out.null(),
            }
            return;
        };
        let picks = sampling::random_picks(len, count);
        let h = match h {
            Some(h) => h,
            None => {
                ctx.out.array(0);
                return;
            }
        };
        let resp3_pairs = withvalues && ctx.out.resp3();
        ctx.out.array(if withvalues && !resp3_pairs {
            picks.len() * 2
        } else {
            picks.len()
        });
        // A packed hash is read by a scan: read once, not once per pick.
        let packed: Vec<_> = match h.is_packed() {
            true => h.iter().collect(),
            false => Vec::new(),
        };
        for i in picks {
            let pick = match h.is_packed() {
                true => packed.get(i).copied(),
                false => h.get_index(i),
            };
            if let Some((f, v)) = pick {
                if resp3_pairs {
                    ctx.out.array(2);
                }
                ctx.out.bulk(f);
                if withvalues {
                    ctx.out.bulk(v.value);
                }
            }
        }
    })
}
