//! Generic keyspace commands: existence, types, expiry, renames, iteration.
//!
//! SCAN's cursor is a partition index: each call returns whole partitions
//! until COUNT keys are gathered. That gives Redis's guarantee (a key present
//! for the whole iteration is returned at least once) with no cursor state,
//! and a call's work is bounded by partition size.

use bytes::Bytes;
use keyspace::glob::glob_match;
use keyspace::{Value, Write};
use rand::Rng;

use crate::args::{self, expire_at_ms, is};
use crate::error::CmdError;
use crate::Ctx;

pub fn del(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let keys = &a[1..];
    let mut txn = ctx.ks.txn(keys.iter().map(|k| &k[..]), ctx.client_id);
    let mut n = 0;
    for k in keys {
        if txn.exists(k) {
            txn.write(k, Write::Delete)?;
            n += 1;
        }
    }
    drop(txn);
    ctx.out.int(n);
    Ok(())
}

/// EXISTS and TOUCH: how many of the arguments exist (duplicates count).
pub fn exists(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let keys = &a[1..];
    let mut txn = ctx.ks.txn(keys.iter().map(|k| &k[..]), ctx.client_id);
    let n = keys.iter().filter(|k| txn.exists(k)).count();
    drop(txn);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn type_(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let t = txn.get(a[1]).map_or("none", |e| e.value.type_name());
    drop(txn);
    ctx.out.simple(t);
    Ok(())
}

#[derive(Default)]
struct ExpireCond {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn expire_cond(a: &[&[u8]]) -> Result<ExpireCond, CmdError> {
    let mut c = ExpireCond::default();
    for arg in a {
        match () {
            _ if is(arg, "NX") => c.nx = true,
            _ if is(arg, "XX") => c.xx = true,
            _ if is(arg, "GT") => c.gt = true,
            _ if is(arg, "LT") => c.lt = true,
            _ => {
                return Err(CmdError::UnsupportedOption(
                    String::from_utf8_lossy(arg).into_owned(),
                ))
            }
        }
    }
    if c.nx && (c.xx || c.gt || c.lt) {
        return Err(CmdError::ExpireNxIncompatible);
    }
    if c.gt && c.lt {
        return Err(CmdError::ExpireGtLt);
    }
    Ok(c)
}

fn expire_generic(
    ctx: &mut Ctx,
    a: &[&[u8]],
    unit_ms: i64,
    absolute: bool,
    cmd: &'static str,
) -> Result<(), CmdError> {
    let n = args::int(a[2])?;
    let cond = expire_cond(&a[3..])?;
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let now = txn.now_ms();
    let at = expire_at_ms(now, n, unit_ms, absolute).ok_or(CmdError::InvalidExpire(cmd))?;
    let Some(current) = txn.get(a[1]).map(|e| e.expire_at) else {
        drop(txn);
        ctx.out.int(0);
        return Ok(());
    };
    // A key without expiry counts as an infinite TTL for GT and LT.
    let ok = if cond.nx {
        current == 0
    } else if cond.xx && current == 0 {
        false
    } else if cond.gt {
        current != 0 && at > current as i64
    } else if cond.lt {
        current == 0 || at < (current as i64)
    } else {
        true
    };
    if ok {
        if at <= now as i64 {
            txn.write(a[1], Write::Delete)?;
        } else {
            txn.write(a[1], Write::SetExpiry(at as u64))?;
        }
    }
    drop(txn);
    ctx.out.int(ok as i64);
    Ok(())
}

pub fn expire(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    expire_generic(ctx, a, 1000, false, "expire")
}

pub fn pexpire(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    expire_generic(ctx, a, 1, false, "pexpire")
}

pub fn expireat(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    expire_generic(ctx, a, 1000, true, "expireat")
}

pub fn pexpireat(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    expire_generic(ctx, a, 1, true, "pexpireat")
}

/// -2 missing, -1 no expiry, else f(expire_at_ms, now_ms).
fn ttl_generic(ctx: &mut Ctx, key: &[u8], f: impl Fn(u64, u64) -> i64) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let now = txn.now_ms();
    let v = match txn.get(key) {
        None => -2,
        Some(e) if e.expire_at == 0 => -1,
        Some(e) => f(e.expire_at, now),
    };
    drop(txn);
    ctx.out.int(v);
    Ok(())
}

pub fn ttl(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    ttl_generic(ctx, a[1], |at, now| ((at - now + 500) / 1000) as i64)
}

pub fn pttl(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    ttl_generic(ctx, a[1], |at, now| (at - now) as i64)
}

pub fn expiretime(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    ttl_generic(ctx, a[1], |at, _| (at / 1000) as i64)
}

pub fn pexpiretime(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    ttl_generic(ctx, a[1], |at, _| at as i64)
}

pub fn persist(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let had = txn.get(a[1]).is_some_and(|e| e.expire_at != 0);
    if had {
        txn.write(a[1], Write::SetExpiry(0))?;
    }
    drop(txn);
    ctx.out.int(had as i64);
    Ok(())
}

/// Moves `from` to `to`; Ok(false) when `nx` and `to` exists.
fn rename_generic(ctx: &mut Ctx, from: &[u8], to: &[u8], nx: bool) -> Result<bool, CmdError> {
    let mut txn = ctx.ks.txn([from, to], ctx.client_id);
    let Some(entry) = txn.get(from) else {
        return Err(CmdError::NoSuchKey);
    };
    if from == to {
        return Ok(!nx);
    }
    let (value, expire_at): (Value, u64) = (entry.value.clone(), entry.expire_at);
    if nx && txn.exists(to) {
        return Ok(false);
    }
    txn.write(from, Write::Delete)?;
    txn.write(to, Write::Set { value, expire_at })?;
    Ok(true)
}

pub fn rename(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    rename_generic(ctx, a[1], a[2], false)?;
    ctx.out.simple("OK");
    Ok(())
}

pub fn renamenx(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let done = rename_generic(ctx, a[1], a[2], true)?;
    ctx.out.int(done as i64);
    Ok(())
}

/// `COPY source destination [DB destination-db] [REPLACE]`: the source's
/// value and expiry, written to the destination as one `Write::Set` (as
/// RENAME writes its destination). There is one database: `DB 0` is the
/// one, any other index is out of range, as in Redis with `databases 1`.
pub fn copy(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (from, to) = (a[1], a[2]);
    let mut replace = false;
    let mut i = 3;
    while i < a.len() {
        if is(a[i], "REPLACE") {
            replace = true;
        } else if is(a[i], "DB") && i + 1 < a.len() {
            // Redis reads the index as a C int.
            let db = i32::try_from(args::int(a[i + 1])?).map_err(|_| CmdError::IntOutOfRange)?;
            if db != 0 {
                return Err(CmdError::DbIndexOutOfRange);
            }
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if from == to {
        return Err(CmdError::SameObject);
    }
    let mut txn = ctx.ks.txn([from, to], ctx.client_id);
    let copied = match txn.get(from) {
        Some(e) => {
            let (value, expire_at) = (e.value.clone(), e.expire_at);
            if replace || !txn.exists(to) {
                txn.write(to, Write::Set { value, expire_at })?;
                true
            } else {
                false
            }
        }
        None => false,
    };
    drop(txn);
    ctx.out.int(copied as i64);
    Ok(())
}

pub fn scan(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let cursor = args::cursor(a[1])?;
    let opts = args::scan_opts(&a[2..], true)?;
    let parts = ctx.ks.partitions() as u64;
    let mut keys: Vec<Bytes> = Vec::new();
    let mut p = cursor;
    while p < parts && keys.len() < opts.count {
        ctx.ks.with_partition(p as usize, |part, now| {
            for (k, e) in part.iter() {
                let live = !e.is_expired(now);
                let pattern_ok = opts.pattern.as_ref().is_none_or(|pat| glob_match(pat, k));
                let type_ok = opts
                    .type_name
                    .as_deref()
                    .is_none_or(|t| t == e.value.type_name());
                if live && pattern_ok && type_ok {
                    keys.push(k.to_bytes());
                }
            }
        });
        p += 1;
    }
    let next = if p >= parts { 0 } else { p };
    ctx.out.array(2);
    ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.out.array(keys.len());
    for k in &keys {
        ctx.out.bulk(k);
    }
    Ok(())
}

pub fn keys(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let pattern = &a[1];
    let all = &pattern[..] == b"*";
    let mut keys: Vec<Bytes> = Vec::new();
    for p in 0..ctx.ks.partitions() as usize {
        ctx.ks.with_partition(p, |part, now| {
            keys.extend(
                part.iter()
                    .filter(|(k, e)| !e.is_expired(now) && (all || glob_match(pattern, k)))
                    .map(|(k, _)| k.to_bytes()),
            );
        });
    }
    ctx.out.array(keys.len());
    for k in &keys {
        ctx.out.bulk(k);
    }
    Ok(())
}

pub fn randomkey(ctx: &mut Ctx, _a: &[&[u8]]) -> Result<(), CmdError> {
    let parts = ctx.ks.partitions() as usize;
    let mut rng = rand::thread_rng();
    // Expired keys met on the way are removed by the lookup; attempts are
    // bounded so a keyspace full of expired keys cannot hold the connection.
    for _ in 0..100 {
        let start = rng.gen_range(0..parts);
        let mut picked = None;
        for i in 0..parts {
            picked = ctx.ks.with_partition((start + i) % parts, |part, _| {
                let n = part.len();
                (n > 0)
                    .then(|| part.get_index(rng.gen_range(0..n)).map(|(k, _)| k.clone()))
                    .flatten()
            });
            if picked.is_some() {
                break;
            }
        }
        let Some(key) = picked else { break };
        let mut txn = ctx.ks.txn([&key[..]], ctx.client_id);
        if txn.exists(&key) {
            drop(txn);
            ctx.out.bulk(&key);
            return Ok(());
        }
    }
    ctx.out.null();
    Ok(())
}

pub fn dbsize(ctx: &mut Ctx, _a: &[&[u8]]) -> Result<(), CmdError> {
    ctx.out.int(ctx.ks.len() as i64);
    Ok(())
}

pub fn flushall(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    match a.get(1) {
        None => {}
        Some(m) if (is(m, "ASYNC") || is(m, "SYNC")) && a.len() == 2 => {}
        Some(_) => return Err(CmdError::Syntax),
    }
    ctx.ks.flush(ctx.client_id);
    ctx.out.simple("OK");
    Ok(())
}
