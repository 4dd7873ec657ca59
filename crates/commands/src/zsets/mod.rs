//! Sorted-set commands, split by concept: [`write`](mod@write) (ZADD, ZINCRBY, ZREM,
//! ZPOP*, ZMPOP, ZREMRANGE*), [`range`] (reads: ZSCORE, ZRANGE family,
//! ZCOUNT, ZRANK...), [`algebra`] (ZUNION/ZINTER/ZDIFF and their STORE
//! forms, ZINTERCARD) and [`scan`] (ZSCAN, ZRANDMEMBER).
//!
//! This module holds what they share: reading a key as a sorted set,
//! parsing score ranges (`(1.5`, `-inf`, `+inf`) and lex ranges (`[a`,
//! `(a`, `-`, `+`), turning a range into ranks (O(log n) through the
//! order's rank lookups) and writing member/score replies.

pub mod algebra;
pub mod range;
pub mod scan;
pub mod write;

use bytes::Bytes;
use keyspace::ZSetValue;

use crate::error::CmdError;
use crate::number::parse_f64;
use crate::Ctx;

/// Runs `f` on the sorted set at `key` (None when missing); WRONGTYPE
/// otherwise.
pub(crate) fn read<R>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Ctx, Option<&ZSetValue>) -> R,
) -> Result<R, CmdError> {
    let ks = ctx.ks;
    let mut txn = ks.txn([key], ctx.client_id);
    let z = zset_of(&mut txn, key)?;
    Ok(f(ctx, z))
}

/// The sorted set at `key` in `txn` (None when missing); WRONGTYPE otherwise.
pub(crate) fn zset_of<'t>(
    txn: &'t mut keyspace::Txn,
    key: &[u8],
) -> Result<Option<&'t ZSetValue>, CmdError> {
    match txn.get(key) {
        None => Ok(None),
        Some(e) => e.as_zset().map(Some).ok_or(CmdError::WrongType),
    }
}

pub(crate) fn err(msg: &str) -> CmdError {
    CmdError::other(msg)
}

pub(crate) const MINMAX_NOT_FLOAT: &str = "ERR min or max is not a float";
pub(crate) const MINMAX_NOT_LEX: &str = "ERR min or max not valid string range item";

/// One end of a score range.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScoreBound {
    pub value: f64,
    pub exclusive: bool,
}

pub(crate) fn parse_score_bound(arg: &[u8]) -> Result<ScoreBound, CmdError> {
    let (text, exclusive) = match arg.split_first() {
        Some((b'(', rest)) => (rest, true),
        _ => (arg, false),
    };
    let value = parse_f64(text).ok_or_else(|| err(MINMAX_NOT_FLOAT))?;
    Ok(ScoreBound { value, exclusive })
}

/// One end of a lex range.
#[derive(Clone, Debug)]
pub(crate) enum LexBound {
    Min,
    Max,
    Incl(Bytes),
    Excl(Bytes),
}

pub(crate) fn parse_lex_bound(arg: &[u8]) -> Result<LexBound, CmdError> {
    match arg.split_first() {
        Some((b'-', [])) => Ok(LexBound::Min),
        Some((b'+', [])) => Ok(LexBound::Max),
        Some((b'[', rest)) => Ok(LexBound::Incl(Bytes::copy_from_slice(rest))),
        Some((b'(', rest)) => Ok(LexBound::Excl(Bytes::copy_from_slice(rest))),
        _ => Err(err(MINMAX_NOT_LEX)),
    }
}

/// The ranks `[start, end)` of the members with a score in `min..max`.
pub(crate) fn score_ranks(z: &ZSetValue, min: ScoreBound, max: ScoreBound) -> (usize, usize) {
    let start = z.count_below(min.value, min.exclusive);
    let end = z.count_below(max.value, !max.exclusive);
    (start, end.max(start))
}

/// How many members, in rank order, come before member `m` (`after`
/// false) or up to it (`after` true): a binary search comparing members
/// only, as Redis walks its order for a lex range (exact when the scores
/// are equal, as Redis requires; where they are not, the same answer as
/// Redis whenever the members are in order too).
fn lex_rank(z: &ZSetValue, m: &Bytes, after: bool) -> usize {
    let (mut lo, mut hi) = (0, z.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let below = z
            .by_rank(mid)
            .is_some_and(|(x, _)| if after { x <= m } else { x < m });
        if below {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The ranks `[start, end)` of the members in the lex range `min..max`
/// (members are expected to share one score, as Redis requires).
pub(crate) fn lex_ranks(z: &ZSetValue, min: &LexBound, max: &LexBound) -> (usize, usize) {
    let len = z.len();
    let start = match min {
        LexBound::Min => 0,
        LexBound::Max => len,
        LexBound::Incl(m) => lex_rank(z, m, false),
        LexBound::Excl(m) => lex_rank(z, m, true),
    };
    let end = match max {
        LexBound::Min => 0,
        LexBound::Max => len,
        LexBound::Incl(m) => lex_rank(z, m, true),
        LexBound::Excl(m) => lex_rank(z, m, false),
    };
    (start, end.max(start))
}

/// Redis's rank range: negative ranks count from the end; `[start, end)`
/// clamped to the set, empty when out of range.
pub(crate) fn rank_range(len: usize, start: i64, stop: i64) -> (usize, usize) {
    let n = len as i64;
    let mut start = if start < 0 {
        start.saturating_add(n)
    } else {
        start
    };
    let mut stop = if stop < 0 {
        stop.saturating_add(n)
    } else {
        stop
    };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= n {
        return (0, 0);
    }
    if stop >= n {
        stop = n - 1;
    }
    (start as usize, stop as usize + 1)
}

/// Writes members with their scores: a flat array (scores as doubles,
/// bulk strings in RESP2), or in RESP3 with scores an array of pairs.
pub(crate) fn reply_scored<M: AsRef<[u8]>>(ctx: &mut Ctx, items: &[(M, f64)], withscores: bool) {
    let pairs = withscores && ctx.out.resp3();
    ctx.out.array(if withscores && !pairs {
        items.len() * 2
    } else {
        items.len()
    });
    for (m, s) in items {
        if pairs {
            ctx.out.array(2);
        }
        ctx.out.bulk(m.as_ref());
        if withscores {
            ctx.out.double(*s);
        }
    }
}

/// Builds a sorted set value from members and scores (for *STORE).
pub(crate) fn build(items: impl IntoIterator<Item = (Bytes, f64)>) -> ZSetValue {
    let mut z = ZSetValue::new();
    for (m, s) in items {
        z.insert(&m, s, keyspace::Version::ZERO);
    }
    z
}

/// Writes `items` as the whole value of `dst` (deleting it when empty).
pub(crate) fn store(
    txn: &mut keyspace::Txn,
    dst: &[u8],
    items: Vec<(Bytes, f64)>,
) -> Result<usize, CmdError> {
    let n = items.len();
    let w = if n == 0 {
        keyspace::Write::Delete
    } else {
        keyspace::Write::Set {
            value: keyspace::Value::ZSet(build(items)),
            expire_at: 0,
        }
    };
    txn.write(dst, w)?;
    Ok(n)
}
