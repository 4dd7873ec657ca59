//! Sorted-set reads: ZSCORE, ZMSCORE, ZCARD, ZCOUNT, ZLEXCOUNT, ZRANK,
//! ZREVRANK and the ZRANGE family (ZRANGE with BYSCORE/BYLEX/REV/LIMIT/
//! WITHSCORES, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
//! ZREVRANGEBYLEX, ZREVRANGE, ZRANGESTORE). Range bounds become ranks in
//! O(log n); the members are then read by rank, so a reply costs what it
//! returns.

use bytes::Bytes;
use keyspace::ZSetValue;

use super::{
    err, lex_ranks, parse_lex_bound, parse_score_bound, rank_range, read, reply_scored,
    score_ranks, store, zset_of, LexBound, ScoreBound,
};
use crate::args::{self, is};
use crate::error::CmdError;
use crate::Ctx;

pub fn zcard(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, z| {
        ctx.out.int(z.map_or(0, |z| z.len()) as i64)
    })
}

pub fn zscore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, z| match z.and_then(|z| z.score(a[2])) {
        Some(s) => ctx.out.double(s),
        None => ctx.out.null(),
    })
}

pub fn zmscore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, z| {
        ctx.out.array(a.len() - 2);
        for m in &a[2..] {
            match z.and_then(|z| z.score(m)) {
                Some(s) => ctx.out.double(s),
                None => ctx.out.null(),
            }
        }
    })
}

pub fn zcount(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let min = parse_score_bound(a[2])?;
    let max = parse_score_bound(a[3])?;
    read(ctx, a[1], |ctx, z| {
        let (s, e) = z.map_or((0, 0), |z| score_ranks(z, min, max));
        ctx.out.int((e - s) as i64)
    })
}

pub fn zlexcount(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let min = parse_lex_bound(a[2])?;
    let max = parse_lex_bound(a[3])?;
    read(ctx, a[1], |ctx, z| {
        let (s, e) = z.map_or((0, 0), |z| lex_ranks(z, &min, &max));
        ctx.out.int((e - s) as i64)
    })
}

fn zrank_generic(ctx: &mut Ctx, a: &[&[u8]], rev: bool) -> Result<(), CmdError> {
    let withscore = match a.get(3) {
        None => false,
        Some(w) if a.len() == 4 && is(w, "WITHSCORE") => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    read(ctx, a[1], |ctx, z| {
        let found = z.and_then(|z| {
            let r = z.rank(a[2])?;
            let s = z.score(a[2])?;
            Some((if rev { z.len() - 1 - r } else { r }, s))
        });
        match (found, withscore) {
            (Some((r, s)), true) => {
                ctx.out.array(2);
                ctx.out.int(r as i64);
                ctx.out.double(s);
            }
            (Some((r, _)), false) => ctx.out.int(r as i64),
            (None, true) => ctx.out.null_array(),
            (None, false) => ctx.out.null(),
        }
    })
}

pub fn zrank(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    zrank_generic(ctx, a, false)
}

pub fn zrevrank(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    zrank_generic(ctx, a, true)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

enum Range {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

/// A parsed ZRANGE-family request.
struct Request {
    range: Range,
    rev: bool,
    withscores: bool,
    /// LIMIT offset count (count < 0: no limit).
    limit: Option<(i64, i64)>,
}

/// Parses `key min max [options]` starting at `a[start]` (the key), as
/// Redis's zrangeGenericCommand: `by`/`rev` given by the command name are
/// fixed, ZRANGE's options choose them otherwise.
fn parse(
    a: &[&[u8]],
    start: usize,
    store: bool,
    fixed_by: Option<By>,
    fixed_rev: Option<bool>,
) -> Result<Request, CmdError> {
    let mut by = fixed_by.unwrap_or(By::Rank);
    let mut rev = fixed_rev.unwrap_or(false);
    let mut withscores = false;
    let mut limit = None;
    let mut j = start + 3;
    while j < a.len() {
        let left = a.len() - j - 1;
        let arg = a[j];
        if !store && is(arg, "WITHSCORES") {
            withscores = true;
        } else if is(arg, "LIMIT") && left >= 2 {
            limit = Some((args::int(a[j + 1])?, args::int(a[j + 2])?));
            j += 2;
        } else if fixed_rev.is_none() && is(arg, "REV") {
            rev = true;
        } else if fixed_by.is_none() && is(arg, "BYLEX") {
            by = By::Lex;
        } else if fixed_by.is_none() && is(arg, "BYSCORE") {
            by = By::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if limit.is_some() && by == By::Rank {
        return Err(err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(err(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut lo, mut hi) = (a[start + 1], a[start + 2]);
    if rev && by != By::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let range = match by {
        By::Rank => Range::Rank(args::int(lo)?, args::int(hi)?),
        By::Score => Range::Score(parse_score_bound(lo)?, parse_score_bound(hi)?),
        By::Lex => Range::Lex(parse_lex_bound(lo)?, parse_lex_bound(hi)?),
    };
    Ok(Request {
        range,
        rev,
        withscores,
        limit,
    })
}

/// The members a request selects, in reply order.
fn select<'a>(z: &'a ZSetValue, req: &Request) -> Vec<(&'a [u8], f64)> {
    let len = z.len();
    let (start, end) = match &req.range {
        Range::Rank(s, e) => {
            let (s, e) = rank_range(len, *s, *e);
            if req.rev {
                (len - e, len - s)
            } else {
                (s, e)
            }
        }
        Range::Score(min, max) => score_ranks(z, *min, *max),
        Range::Lex(min, max) => lex_ranks(z, min, max),
    };
    let (mut start, mut end) = (start, end.max(start));
    if let Some((offset, count)) = req.limit {
        if offset < 0 {
            return Vec::new();
        }
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let n = end - start;
        let skip = offset.min(n);
        let take = if count < 0 {
            n - skip
        } else {
            usize::try_from(count).unwrap_or(usize::MAX).min(n - skip)
        };
        if req.rev {
            end -= skip;
            start = end - take;
        } else {
            start += skip;
            end = start + take;
        }
    }
    let mut items: Vec<(&[u8], f64)> = z.range(start, end).collect();
    if req.rev {
        items.reverse();
    }
    items
}

fn range_reply(
    ctx: &mut Ctx,
    a: &[&[u8]],
    fixed_by: Option<By>,
    fixed_rev: Option<bool>,
) -> Result<(), CmdError> {
    let req = parse(a, 1, false, fixed_by, fixed_rev)?;
    read(ctx, a[1], |ctx, z| {
        let items = z.map(|z| select(z, &req)).unwrap_or_default();
        reply_scored(ctx, &items, req.withscores);
    })
}

pub fn zrange(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    range_reply(ctx, a, None, None)
}

pub fn zrevrange(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    range_reply(ctx, a, Some(By::Rank), Some(true))
}

pub fn zrangebyscore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    range_reply(ctx, a, Some(By::Score), Some(false))
}

pub fn zrevrangebyscore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    range_reply(ctx, a, Some(By::Score), Some(true))
}

pub fn zrangebylex(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    range_reply(ctx, a, Some(By::Lex), Some(false))
}

pub fn zrevrangebylex(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    range_reply(ctx, a, Some(By::Lex), Some(true))
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`.
pub fn zrangestore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let req = parse(a, 2, true, None, None)?;
    let (dst, src) = (a[1], a[2]);
    let mut txn = ctx.ks.txn([dst, src], ctx.client_id);
    let items: Vec<(Bytes, f64)> = zset_of(&mut txn, src)?
        .map(|z| {
            select(z, &req)
                .into_iter()
                .map(|(m, s)| (Bytes::copy_from_slice(m), s))
                .collect()
        })
        .unwrap_or_default();
    let n = store(&mut txn, dst, items)?;
    drop(txn);
    ctx.out.int(n as i64);
    Ok(())
}
