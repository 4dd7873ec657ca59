//! ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD. Inputs may be
//! sorted sets or sets (members of a set score 1); a missing key is empty.
//! As in Redis, the input keys are type-checked before the options
//! (WEIGHTS, AGGREGATE, WITHSCORES, LIMIT) are parsed, and the inputs are
//! combined smallest first. A STORE with an empty result deletes the
//! destination.

use std::collections::HashMap;

use bytes::Bytes;

use super::{err, reply_scored, store};
use crate::args::{self, is};
use crate::error::CmdError;
use crate::Ctx;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            Aggregate::Sum => {
                let s = a + b;
                // inf + -inf: Redis makes it 0.
                if s.is_nan() {
                    0.0
                } else {
                    s
                }
            }
            Aggregate::Min => a.min(b),
            Aggregate::Max => a.max(b),
        }
    }
}

type Input = HashMap<Bytes, f64, ahash::RandomState>;

/// Copies the members of each input key out of `txn` (missing: empty).
fn inputs(txn: &mut keyspace::Txn, keys: &[&[u8]]) -> Result<Vec<Input>, CmdError> {
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let mut m = Input::default();
        if let Some(e) = txn.get(key) {
            if let Some(z) = e.as_zset() {
                m.reserve(z.len());
                m.extend(z.iter().map(|(k, x)| (Bytes::copy_from_slice(k), x.score)));
            } else if let Some(s) = e.as_set() {
                m.reserve(s.len());
                m.extend(s.members().map(|k| (Bytes::copy_from_slice(k), 1.0)));
            } else {
                return Err(CmdError::WrongType);
            }
        }
        out.push(m);
    }
    Ok(out)
}

struct Opts {
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    limit: usize,
}

fn parse_opts(rest: &[&[u8]], n: usize, op: Op, store: bool, card: bool) -> Result<Opts, CmdError> {
    let mut o = Opts {
        weights: vec![1.0; n],
        aggregate: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let mut j = 0;
    while j < rest.len() {
        let left = rest.len() - j;
        let arg = rest[j];
        if op != Op::Diff && !card && left > n && is(arg, "WEIGHTS") {
            for (i, w) in rest[j + 1..j + 1 + n].iter().enumerate() {
                o.weights[i] =
                    args::float(w).map_err(|_| err("ERR weight value is not a float"))?;
            }
            j += 1 + n;
        } else if op != Op::Diff && !card && left >= 2 && is(arg, "AGGREGATE") {
            let a = rest[j + 1];
            o.aggregate = if is(a, "SUM") {
                Aggregate::Sum
            } else if is(a, "MIN") {
                Aggregate::Min
            } else if is(a, "MAX") {
                Aggregate::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !store && !card && is(arg, "WITHSCORES") {
            o.withscores = true;
            j += 1;
        } else if card && left >= 2 && is(arg, "LIMIT") {
            let l = args::int(rest[j + 1]).unwrap_or(-1);
            if l < 0 {
                return Err(err("ERR LIMIT can't be negative"));
            }
            o.limit = usize::try_from(l).unwrap_or(usize::MAX);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

/// A weighted score; 0 * inf is 0, as in Redis.
fn weighted(s: f64, w: f64) -> f64 {
    let v = s * w;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

fn combine(mut ins: Vec<Input>, o: &Opts, op: Op) -> Vec<(Bytes, f64)> {
    let mut out: Vec<(Bytes, f64)> = match op {
        Op::Diff => {
            let mut it = ins.into_iter();
            let first = it.next().unwrap_or_default();
            let others: Vec<Input> = it.collect();
            first
                .into_iter()
                .filter(|(m, _)| !others.iter().any(|x| x.contains_key(m)))
                .collect()
        }
        Op::Union | Op::Inter => {
            let mut idx: Vec<usize> = (0..ins.len()).collect();
            idx.sort_by_key(|&i| ins[i].len());
            if op == Op::Inter {
                let first = std::mem::take(&mut ins[idx[0]]);
                let w0 = o.weights[idx[0]];
                first
                    .into_iter()
                    .filter_map(|(m, s)| {
                        let mut acc = weighted(s, w0);
                        for &i in &idx[1..] {
                            let x = ins[i].get(&m)?;
                            acc = o.aggregate.apply(acc, weighted(*x, o.weights[i]));
                        }
                        Some((m, acc))
                    })
                    .collect()
            } else {
                let mut acc = Input::default();
                for &i in &idx {
                    let w = o.weights[i];
                    for (m, s) in std::mem::take(&mut ins[i]) {
                        let v = weighted(s, w);
                        acc.entry(m)
                            .and_modify(|a| *a = o.aggregate.apply(*a, v))
                            .or_insert(v);
                    }
                }
                acc.into_iter().collect()
            }
        }
    };
    out.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// The shared command: `dst` for the STORE forms; `numkeys` at `a[ni]`.
fn generic(
    ctx: &mut Ctx,
    a: &[&[u8]],
    dst: Option<&[u8]>,
    ni: usize,
    op: Op,
    card: bool,
) -> Result<(), CmdError> {
    let numkeys = args::int(a[ni])?;
    if numkeys < 1 {
        let name = String::from_utf8_lossy(a[0]).to_ascii_lowercase();
        return Err(err(&format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    if numkeys as u64 > (a.len() - ni - 1) as u64 {
        return Err(CmdError::Syntax);
    }
    let n = numkeys as usize;
    let keys = &a[ni + 1..ni + 1 + n];
    let mut txn = ctx
        .ks
        .txn(dst.into_iter().chain(keys.iter().copied()), ctx.client_id);
    let ins = inputs(&mut txn, keys)?;
    let o = parse_opts(&a[ni + 1 + n..], n, op, dst.is_some(), card)?;
    if card {
        drop(txn);
        let mut result = combine(ins, &o, Op::Inter).len();
        if o.limit > 0 {
            result = result.min(o.limit);
        }
        ctx.out.int(result as i64);
        return Ok(());
    }
    let items = combine(ins, &o, op);
    match dst {
        Some(d) => {
            let n = store(&mut txn, d, items)?;
            drop(txn);
            ctx.out.int(n as i64);
        }
        None => {
            drop(txn);
            reply_scored(ctx, &items, o.withscores);
        }
    }
    Ok(())
}

pub fn zunionstore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    generic(ctx, a, Some(a[1]), 2, Op::Union, false)
}

pub fn zinterstore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    generic(ctx, a, Some(a[1]), 2, Op::Inter, false)
}

pub fn zdiffstore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    generic(ctx, a, Some(a[1]), 2, Op::Diff, false)
}

pub fn zunion(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    generic(ctx, a, None, 1, Op::Union, false)
}

pub fn zinter(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    generic(ctx, a, None, 1, Op::Inter, false)
}

pub fn zdiff(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    generic(ctx, a, None, 1, Op::Diff, false)
}

pub fn zintercard(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    generic(ctx, a, None, 1, Op::Inter, true)
}
