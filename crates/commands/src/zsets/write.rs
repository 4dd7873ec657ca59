//! Sorted-set writes: ZADD (NX XX GT LT CH INCR), ZINCRBY, ZREM, ZPOPMIN,
//! ZPOPMAX, ZMPOP, their blocking forms BZPOPMIN, BZPOPMAX and BZMPOP, and
//! ZREMRANGEBYRANK/SCORE/LEX. Scores are logged as
//! `Write::ZAdd` with only the members whose score changes (ZINCRBY too:
//! its new score), removals as `Write::Remove`, which deletes the key
//! when it empties. A write that changes nothing logs nothing.

use bytes::Bytes;
use keyspace::Write;

use super::{
    err, lex_ranks, parse_lex_bound, parse_score_bound, rank_range, reply_scored, score_ranks,
    zset_of,
};
use crate::args::{self, is, owned};
use crate::error::CmdError;
use crate::{blocking, BlockMode, Ctx};

#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

pub fn zadd(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut f = ZaddFlags::default();
    let mut i = 2;
    while i < a.len() {
        let arg = a[i];
        if is(arg, "NX") {
            f.nx = true;
        } else if is(arg, "XX") {
            f.xx = true;
        } else if is(arg, "GT") {
            f.gt = true;
        } else if is(arg, "LT") {
            f.lt = true;
        } else if is(arg, "CH") {
            f.ch = true;
        } else if is(arg, "INCR") {
            f.incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = &a[i..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if f.nx && f.xx {
        return Err(err(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(err(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && rest.len() > 2 {
        return Err(err(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs: Vec<(f64, &[u8])> = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks_exact(2) {
        pairs.push((args::float(p[0])?, p[1]));
    }
    let incr_by = pairs.first().map_or(0.0, |(by, _)| *by);
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let z = zset_of(&mut txn, key)?;
    if z.is_none() && f.xx {
        drop(txn);
        if f.incr {
            ctx.out.null();
        } else {
            ctx.out.int(0);
        }
        return Ok(());
    }
    // Scores this command sets, in order; a member named twice sees its
    // own earlier score.
    let mut changes: Vec<(Bytes, f64)> = Vec::new();
    let mut added = 0usize;
    let mut updated = 0usize;
    let mut processed = 0usize;
    let mut last_score = 0.0;
    for (score, member) in pairs {
        let current = changes
            .iter()
            .rev()
            .find(|(m, _)| &m[..] == member)
            .map(|(_, s)| *s)
            .or_else(|| z.and_then(|z| z.score(member)));
        match current {
            Some(cur) => {
                if f.nx {
                    continue;
                }
                let mut new = score;
                if f.incr {
                    new += cur;
                    if new.is_nan() {
                        return Err(err("ERR resulting score is not a number (NaN)"));
                    }
                }
                if (f.lt && new >= cur) || (f.gt && new <= cur) {
                    continue;
                }
                processed += 1;
                last_score = new;
                if new != cur {
                    updated += 1;
                    changes.push((owned(member), new));
                }
            }
            None => {
                if f.xx {
                    continue;
                }
                processed += 1;
                last_score = score;
                added += 1;
                changes.push((owned(member), score));
            }
        }
    }
    match (f.incr, changes.pop()) {
        // One member: an increment (summed across sites where they merge).
        (true, Some((member, score))) => {
            let by = incr_by;
            txn.write(key, Write::ZIncr { member, by, score })?;
            last_score = stored_score(&mut txn, key, a[a.len() - 1]).unwrap_or(last_score);
        }
        (_, Some(last)) => {
            changes.push(last);
            txn.write(key, Write::ZAdd(changes))?;
        }
        (_, None) => {}
    }
    drop(txn);
    if f.incr {
        if processed > 0 {
            ctx.out.double(last_score);
        } else {
            ctx.out.null();
        }
    } else {
        ctx.out
            .int((if f.ch { added + updated } else { added }) as i64);
    }
    Ok(())
}

pub fn zincrby(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let by = args::float(a[2])?;
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let z = zset_of(&mut txn, key)?;
    let held = z.and_then(|z| z.score(a[3]));
    let new = held.unwrap_or(0.0) + by;
    if new.is_nan() {
        return Err(err("ERR resulting score is not a number (NaN)"));
    }
    // A score the increment leaves as it was (by 0, or too small to
    // change it) is no write, as in Redis; where sites merge it is one
    // (this site's total is logged).
    if held.is_some_and(|h| keyspace::value::same_score(h, new)) && !txn.merges(key) {
        drop(txn);
        ctx.out.double(new);
        return Ok(());
    }
    // Where sites merge, logged as this site's running total of the
    // member's increments; the reply is the score stored.
    txn.write(
        key,
        Write::ZIncr {
            member: owned(a[3]),
            by,
            score: new,
        },
    )?;
    let new = stored_score(&mut txn, key, a[3]).unwrap_or(new);
    drop(txn);
    ctx.out.double(new);
    Ok(())
}

/// `member`'s score as the keyspace holds it after an increment: where
/// sites merge, the other sites' totals are added to what the command
/// computed; elsewhere it is what the command computed (no lookup).
fn stored_score(txn: &mut keyspace::Txn<'_>, key: &[u8], member: &[u8]) -> Option<f64> {
    if !txn.merges(key) {
        return None;
    }
    txn.get(key)?.as_zset()?.score(member)
}

pub fn zrem(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let mut removed: Vec<Bytes> = Vec::new();
    if let Some(z) = zset_of(&mut txn, key)? {
        for m in &a[2..] {
            if z.score(m).is_some() && !removed.iter().any(|r| r == m) {
                removed.push(owned(m));
            }
        }
    }
    let n = removed.len();
    if n > 0 {
        txn.write(key, Write::Remove(removed))?;
    }
    drop(txn);
    ctx.out.int(n as i64);
    Ok(())
}

/// Removes the members at ranks `[start, end)` of `key`; how many went.
fn remove_ranks(
    txn: &mut keyspace::Txn,
    key: &[u8],
    ranks: impl FnOnce(&keyspace::ZSetValue) -> (usize, usize),
) -> Result<usize, CmdError> {
    let Some(z) = zset_of(txn, key)? else {
        return Ok(0);
    };
    let (start, end) = ranks(z);
    let names: Vec<Bytes> = z
        .range(start, end)
        .map(|(m, _)| Bytes::copy_from_slice(m))
        .collect();
    let n = names.len();
    if n > 0 {
        txn.write(key, Write::Remove(names))?;
    }
    Ok(n)
}

fn remrange(
    ctx: &mut Ctx,
    key: &[u8],
    ranks: impl FnOnce(&keyspace::ZSetValue) -> (usize, usize),
) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let n = remove_ranks(&mut txn, key, ranks)?;
    drop(txn);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn zremrangebyrank(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let start = args::int(a[2])?;
    let stop = args::int(a[3])?;
    remrange(ctx, a[1], |z| rank_range(z.len(), start, stop))
}

pub fn zremrangebyscore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let min = parse_score_bound(a[2])?;
    let max = parse_score_bound(a[3])?;
    remrange(ctx, a[1], |z| score_ranks(z, min, max))
}

pub fn zremrangebylex(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let min = parse_lex_bound(a[2])?;
    let max = parse_lex_bound(a[3])?;
    remrange(ctx, a[1], |z| lex_ranks(z, &min, &max))
}

/// Pops up to `count` members from the low (`max` false) or high end of
/// `key`, lowest/highest first.
fn pop(
    txn: &mut keyspace::Txn,
    key: &[u8],
    count: usize,
    max: bool,
) -> Result<Vec<(Bytes, f64)>, CmdError> {
    let Some(z) = zset_of(txn, key)? else {
        return Ok(Vec::new());
    };
    let n = count.min(z.len());
    let len = z.len();
    let (start, end) = if max { (len - n, len) } else { (0, n) };
    let mut items: Vec<(Bytes, f64)> = z
        .range(start, end)
        .map(|(m, s)| (Bytes::copy_from_slice(m), s))
        .collect();
    if max {
        items.reverse();
    }
    if !items.is_empty() {
        let names = items.iter().map(|(m, _)| m.clone()).collect();
        txn.write(key, Write::Remove(names))?;
    }
    Ok(items)
}

fn zpop(ctx: &mut Ctx, a: &[&[u8]], max: bool) -> Result<(), CmdError> {
    if a.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match a.get(2) {
        None => None,
        Some(c) => {
            let n = args::int(c)?;
            if n < 0 {
                return Err(CmdError::MustBePositive);
            }
            Some(n as usize)
        }
    };
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let items = pop(&mut txn, a[1], count.unwrap_or(1), max)?;
    drop(txn);
    if count.is_some() {
        reply_scored(ctx, &items, true);
    } else {
        // Without a count: one flat [member, score], even in RESP3.
        ctx.out.array(items.len() * 2);
        for (m, s) in &items {
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
    }
    Ok(())
}

pub fn zpopmin(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    zpop(ctx, a, false)
}

pub fn zpopmax(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    zpop(ctx, a, true)
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]: pops from the first
/// non-empty key; `[key, [[member, score], ...]]` or a null array.
pub fn zmpop(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (keys, max, count) = args::mpop(&a[1..], "MIN", "MAX")?;
    let popped = pop_first(ctx, keys, count, max, false)?;
    reply_mpop(ctx, popped);
    Ok(())
}

/// A key and the (member, score) pairs popped from it.
type Popped<'k> = blocking::Popped<'k, (Bytes, f64)>;

/// Pops up to `count` members from the first non-empty sorted set of
/// `keys` ([`blocking::pop_first`]).
fn pop_first<'k>(
    ctx: &mut Ctx,
    keys: &[&'k [u8]],
    count: usize,
    max: bool,
    skip_others: bool,
) -> Result<Option<Popped<'k>>, CmdError> {
    blocking::pop_first(ctx, keys, skip_others, |txn, key| pop(txn, key, count, max))
}

fn reply_mpop(ctx: &mut Ctx, popped: Option<Popped>) {
    match popped {
        None => ctx.out.null_array(),
        Some((key, items)) => {
            ctx.out.array(2);
            ctx.out.bulk(key);
            ctx.out.array(items.len());
            for (m, s) in &items {
                ctx.out.array(2);
                ctx.out.bulk(m);
                ctx.out.double(*s);
            }
        }
    }
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout: `[key, member, score]` from the
/// first non-empty key, else the client waits (see [`crate::blocking`]).
fn bzpop(ctx: &mut Ctx, a: &[&[u8]], max: bool) -> Result<(), CmdError> {
    let timeout = blocking::timeout_ms(a[a.len() - 1])?;
    let keys = &a[1..a.len() - 1];
    let retry = ctx.blocking == BlockMode::Retry;
    match pop_first(ctx, keys, 1, max, retry)? {
        Some((key, items)) => {
            let (m, s) = &items[0];
            ctx.out.array(3);
            ctx.out.bulk(key);
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
        None => blocking::wait_or_null(ctx, keys, timeout),
    }
    Ok(())
}

pub fn bzpopmin(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    bzpop(ctx, a, false)
}

pub fn bzpopmax(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    bzpop(ctx, a, true)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]: as ZMPOP,
/// waiting when every key is empty.
pub fn bzmpop(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    // The timeout is read last, as in Redis.
    let (keys, max, count) = args::mpop(&a[2..], "MIN", "MAX")?;
    let timeout = blocking::timeout_ms(a[1])?;
    let retry = ctx.blocking == BlockMode::Retry;
    match pop_first(ctx, keys, count, max, retry)? {
        Some(popped) => reply_mpop(ctx, Some(popped)),
        None => blocking::wait_or_null(ctx, keys, timeout),
    }
    Ok(())
}
