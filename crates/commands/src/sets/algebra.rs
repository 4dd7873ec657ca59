//! SINTER, SUNION, SDIFF, their *STORE forms and SINTERCARD: computed
//! under the locks of every key named, so a result is one moment's.

use std::collections::HashSet;

use bytes::Bytes;
use keyspace::{SetValue, Txn};

use super::{set_at, store};
use crate::args::{self, is};
use crate::error::CmdError;
use crate::Ctx;

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The members of `op` over the sets at `keys` (missing keys are empty
/// sets); WRONGTYPE when any key holds another type. `limit`: stop an
/// intersection after that many (0: no limit).
fn compute(txn: &mut Txn, keys: &[&[u8]], op: Op, limit: usize) -> Result<Vec<Bytes>, CmdError> {
    let mut sets: Vec<Option<SetValue>> = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(set_at(txn, k)?.cloned());
    }
    let empty = SetValue::new();
    let get = |i: usize| sets[i].as_ref().unwrap_or(&empty);
    Ok(match op {
        Op::Inter => {
            if sets.iter().any(Option::is_none) {
                return Ok(Vec::new());
            }
            // Walk the smallest, probe the others.
            let smallest = (0..sets.len()).min_by_key(|i| get(*i).len()).unwrap_or(0);
            let mut out = Vec::new();
            for m in get(smallest).members() {
                if (0..sets.len()).all(|i| i == smallest || get(i).contains(m)) {
                    out.push(Bytes::copy_from_slice(m));
                    if limit > 0 && out.len() >= limit {
                        break;
                    }
                }
            }
            out
        }
        Op::Union => {
            let mut seen: HashSet<&[u8]> = HashSet::new();
            let mut out = Vec::new();
            for i in 0..sets.len() {
                for m in get(i).members() {
                    if seen.insert(m) {
                        out.push(Bytes::copy_from_slice(m));
                    }
                }
            }
            out
        }
        Op::Diff => get(0)
            .members()
            .filter(|m| (1..sets.len()).all(|i| !get(i).contains(m)))
            .map(Bytes::copy_from_slice)
            .collect(),
    })
}

fn reply(ctx: &mut Ctx, a: &[&[u8]], op: Op) -> Result<(), CmdError> {
    let keys = &a[1..];
    let mut txn = ctx.ks.txn(keys.iter().copied(), ctx.client_id);
    let members = compute(&mut txn, keys, op, 0)?;
    drop(txn);
    ctx.out.set(members.len());
    for m in &members {
        ctx.out.bulk(m);
    }
    Ok(())
}

fn store_result(ctx: &mut Ctx, a: &[&[u8]], op: Op) -> Result<(), CmdError> {
    let (dst, keys) = (a[1], &a[2..]);
    let mut txn = ctx.ks.txn(
        std::iter::once(dst).chain(keys.iter().copied()),
        ctx.client_id,
    );
    let members = compute(&mut txn, keys, op, 0)?;
    let n = store(&mut txn, dst, members)?;
    drop(txn);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn sinter(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    reply(ctx, a, Op::Inter)
}

pub fn sunion(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    reply(ctx, a, Op::Union)
}

pub fn sdiff(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    reply(ctx, a, Op::Diff)
}

pub fn sinterstore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    store_result(ctx, a, Op::Inter)
}

pub fn sunionstore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    store_result(ctx, a, Op::Union)
}

pub fn sdiffstore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    store_result(ctx, a, Op::Diff)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn sintercard(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let numkeys = match args::int(a[1]) {
        Ok(n) if n > 0 => n as usize,
        Ok(_) => return Err(CmdError::other("ERR numkeys should be greater than 0")),
        Err(_) => return Err(CmdError::other("ERR numkeys should be greater than 0")),
    };
    if numkeys > a.len() - 2 {
        return Err(CmdError::other(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let keys = &a[2..2 + numkeys];
    let mut limit = 0usize;
    let mut rest = &a[2 + numkeys..];
    while let [opt, value, tail @ ..] = rest {
        if !is(opt, "LIMIT") {
            return Err(CmdError::Syntax);
        }
        limit = match args::int(value) {
            Ok(n) if n >= 0 => n as usize,
            _ => return Err(CmdError::other("ERR LIMIT can't be negative")),
        };
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(CmdError::Syntax);
    }
    let mut txn = ctx.ks.txn(keys.iter().copied(), ctx.client_id);
    let n = compute(&mut txn, keys, Op::Inter, limit)?.len();
    drop(txn);
    ctx.out.int(n as i64);
    Ok(())
}
