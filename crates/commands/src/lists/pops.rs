//! The list commands that pop: LPOP and RPOP, LMPOP, LMOVE and RPOPLPUSH,
//! and their blocking forms (BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH),
//! which wait in the server's blocking registry when every key is empty
//! (see [`crate::blocking`]).

use bytes::Bytes;
use keyspace::{ListEdit, Txn, Write};

use super::{edit, list_at, push_edit};
use crate::args::{self, is};
use crate::error::CmdError;
use crate::{blocking, BlockMode, Ctx};

/// Pops up to `count` elements from the head (`left`) or tail of the list
/// at `key`, in pop order; none when the key is missing.
fn pop(txn: &mut Txn, key: &[u8], left: bool, count: usize) -> Result<Vec<Bytes>, CmdError> {
    let Some(l) = list_at(txn, key)? else {
        return Ok(Vec::new());
    };
    let n = count.min(l.len());
    let copy = Bytes::copy_from_slice;
    let (popped, e): (Vec<Bytes>, ListEdit) = match left {
        true => (l.iter().take(n).map(copy).collect(), edit(0, n, Vec::new())),
        false => (
            l.iter().rev().take(n).map(copy).collect(),
            edit(l.len() - n, n, Vec::new()),
        ),
    };
    if n > 0 {
        txn.write(key, Write::List(vec![e]))?;
    }
    Ok(popped)
}

/// `LPOP/RPOP key [count]`: one element (or nil), or with a count an array
/// (a missing key: a null array).
fn pop_cmd(ctx: &mut Ctx, a: &[&[u8]], left: bool) -> Result<(), CmdError> {
    if a.len() > 3 {
        return Err(CmdError::WrongArity(
            if left { "lpop" } else { "rpop" }.into(),
        ));
    }
    let count = match a.get(2) {
        None => None,
        // Redis: the same error for a negative count and for no integer.
        Some(c) => match crate::number::parse_i64(c) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return Err(CmdError::MustBePositive),
        },
    };
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let exists = list_at(&mut txn, key)?.is_some();
    let popped = pop(&mut txn, key, left, count.unwrap_or(1))?;
    drop(txn);
    match count {
        None => match popped.first() {
            Some(e) => ctx.out.bulk(e),
            None => ctx.out.null(),
        },
        Some(_) if !exists => ctx.out.null_array(),
        Some(_) => {
            ctx.out.array(popped.len());
            for e in &popped {
                ctx.out.bulk(e);
            }
        }
    }
    Ok(())
}

pub fn lpop(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    pop_cmd(ctx, a, true)
}

pub fn rpop(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    pop_cmd(ctx, a, false)
}

/// A key and the elements popped from it.
type Popped<'k> = blocking::Popped<'k, Bytes>;

/// Pops up to `count` elements from the first non-empty list of `keys`
/// ([`blocking::pop_first`]).
fn pop_first<'k>(
    ctx: &mut Ctx,
    keys: &[&'k [u8]],
    left: bool,
    count: usize,
    skip_others: bool,
) -> Result<Option<Popped<'k>>, CmdError> {
    blocking::pop_first(ctx, keys, skip_others, |txn, key| {
        pop(txn, key, left, count)
    })
}

/// `[key, [element, ...]]`, or a null array.
fn reply_mpop(ctx: &mut Ctx, popped: Option<Popped>) {
    match popped {
        None => ctx.out.null_array(),
        Some((key, items)) => {
            ctx.out.array(2);
            ctx.out.bulk(key);
            ctx.out.array(items.len());
            for e in &items {
                ctx.out.bulk(e);
            }
        }
    }
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count].
pub fn lmpop(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (keys, right, count) = args::mpop(&a[1..], "LEFT", "RIGHT")?;
    let popped = pop_first(ctx, keys, !right, count, false)?;
    reply_mpop(ctx, popped);
    Ok(())
}

/// LEFT (true) or RIGHT.
fn side(arg: &[u8]) -> Result<bool, CmdError> {
    match arg {
        w if is(w, "LEFT") => Ok(true),
        w if is(w, "RIGHT") => Ok(false),
        _ => Err(CmdError::Syntax),
    }
}

/// Moves one element from the `from` end of `src` to the `to` end of
/// `dst`; None when `src` is missing. The destination's type is checked
/// before anything moves. One list rotated (`src` = `dst`) is one write.
fn move_one(
    ctx: &mut Ctx,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> Result<Option<Bytes>, CmdError> {
    let mut txn = ctx.ks.txn([src, dst], ctx.client_id);
    let Some(l) = list_at(&mut txn, src)? else {
        return Ok(None);
    };
    let len = l.len();
    let at = if from_left { 0 } else { len - 1 };
    let Some(value) = l.get_bytes(at) else {
        return Ok(None);
    };
    if src == dst {
        let edits = vec![
            edit(at, 1, Vec::new()),
            push_edit(to_left, len - 1, &[&value[..]]),
        ];
        txn.write(src, Write::List(edits))?;
        return Ok(Some(value));
    }
    let dst_len = list_at(&mut txn, dst)?.map_or(0, |d| d.len());
    // The push first, then the pop: Redis's order of events.
    txn.write(
        dst,
        Write::List(vec![push_edit(to_left, dst_len, &[&value[..]])]),
    )?;
    txn.write(src, Write::List(vec![edit(at, 1, Vec::new())]))?;
    Ok(Some(value))
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT.
pub fn lmove(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (from, to) = (side(a[3])?, side(a[4])?);
    let moved = move_one(ctx, a[1], a[2], from, to)?;
    reply_moved(ctx, moved);
    Ok(())
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
pub fn rpoplpush(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let moved = move_one(ctx, a[1], a[2], false, true)?;
    reply_moved(ctx, moved);
    Ok(())
}

fn reply_moved(ctx: &mut Ctx, moved: Option<Bytes>) {
    match moved {
        Some(e) => ctx.out.bulk(&e),
        None => ctx.out.null(),
    }
}

/// BLPOP/BRPOP key [key ...] timeout: `[key, element]` from the first
/// non-empty list, else the client waits.
fn bpop(ctx: &mut Ctx, a: &[&[u8]], left: bool) -> Result<(), CmdError> {
    let timeout = blocking::timeout_ms(a[a.len() - 1])?;
    let keys = &a[1..a.len() - 1];
    let retry = ctx.blocking == BlockMode::Retry;
    match pop_first(ctx, keys, left, 1, retry)? {
        Some((key, items)) => {
            ctx.out.array(2);
            ctx.out.bulk(key);
            ctx.out.bulk(&items[0]);
        }
        None => blocking::wait_or_null(ctx, keys, timeout),
    }
    Ok(())
}

pub fn blpop(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    bpop(ctx, a, true)
}

pub fn brpop(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    bpop(ctx, a, false)
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count].
pub fn blmpop(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    // The timeout is read last, as in Redis.
    let (keys, right, count) = args::mpop(&a[2..], "LEFT", "RIGHT")?;
    let timeout = blocking::timeout_ms(a[1])?;
    let retry = ctx.blocking == BlockMode::Retry;
    match pop_first(ctx, keys, !right, count, retry)? {
        Some(popped) => reply_mpop(ctx, Some(popped)),
        None => blocking::wait_or_null(ctx, keys, timeout),
    }
    Ok(())
}

/// BLMOVE and BRPOPLPUSH: LMOVE, waiting while the source is missing.
/// Inside MULTI an empty source answers nil (Redis: a null bulk here,
/// while a timeout answers a null array).
fn bmove(ctx: &mut Ctx, a: &[&[u8]], from: bool, to: bool, timeout: &[u8]) -> Result<(), CmdError> {
    let timeout = blocking::timeout_ms(timeout)?;
    match move_one(ctx, a[1], a[2], from, to)? {
        Some(e) => ctx.out.bulk(&e),
        None if ctx.blocking == BlockMode::Deny => ctx.out.null(),
        None => blocking::wait_or_null(ctx, &a[1..2], timeout),
    }
    Ok(())
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout.
pub fn blmove(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (from, to) = (side(a[3])?, side(a[4])?);
    bmove(ctx, a, from, to, a[5])
}

/// BRPOPLPUSH source destination timeout.
pub fn brpoplpush(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    bmove(ctx, a, false, true, a[3])
}
