//! List commands. Every write is a sequence of list edits (remove at an
//! index, insert at an index: `keyspace::ListEdit`) made against the list
//! the command read, through the one write path: LPUSH inserts at the
//! head, RPOP removes at the tail, LTRIM removes both ends, LREM one
//! element at a time. A write that empties the list deletes the key.
//! Across sites a list is a whole value, as a string is: edits apply only
//! to the version they were made on, and concurrent writes at two sites
//! end with the list of the later write everywhere (docs/consistency.md).

mod pops;

use bytes::Bytes;
use keyspace::{ListEdit, ListValue, Txn, Write};

use crate::args::{self, is, owned};
use crate::error::CmdError;
use crate::Ctx;

pub use pops::{blmove, blmpop, blpop, brpop, brpoplpush, lmove, lmpop, lpop, rpop, rpoplpush};

/// The list at `key` (None when missing); WRONGTYPE for another type.
fn list_at<'t>(txn: &'t mut Txn, key: &[u8]) -> Result<Option<&'t ListValue>, CmdError> {
    match txn.get(key) {
        None => Ok(None),
        Some(e) => e.as_list().map(Some).ok_or(CmdError::WrongType),
    }
}

/// Runs `f` on the list at `key` (None when missing).
fn read<R>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Ctx, Option<&ListValue>) -> Result<R, CmdError>,
) -> Result<R, CmdError> {
    let ks = ctx.ks;
    let mut txn = ks.txn([key], ctx.client_id);
    let list = list_at(&mut txn, key)?;
    f(ctx, list)
}

fn edit(at: usize, remove: usize, insert: Vec<Bytes>) -> ListEdit {
    ListEdit {
        at: at as u32,
        remove: remove as u32,
        insert,
    }
}

/// The edit pushing `elements` at the head (each in turn, so the last ends
/// first) or the tail of a list of `len` elements.
fn push_edit(left: bool, len: usize, elements: &[&[u8]]) -> ListEdit {
    let mut insert: Vec<Bytes> = elements.iter().map(|e| owned(e)).collect();
    if left {
        insert.reverse();
        edit(0, 0, insert)
    } else {
        edit(len, 0, insert)
    }
}

/// Redis's index arithmetic: `i` counted from the tail when negative;
/// None when outside a list of `len` elements.
fn index(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (i >= 0 && (i as u64) < len as u64).then_some(i as usize)
}

/// Redis's range arithmetic (LRANGE, LTRIM): `start..=stop`, negative
/// indexes from the tail, clamped; None when empty.
fn range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len).then_some((start as usize, stop as usize))
}

/// LPUSH/RPUSH (and the X forms, which push only onto an existing list):
/// the length after.
fn push(ctx: &mut Ctx, a: &[&[u8]], left: bool, existing_only: bool) -> Result<(), CmdError> {
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let len = match list_at(&mut txn, key)? {
        Some(l) => l.len(),
        None if existing_only => {
            drop(txn);
            ctx.out.int(0);
            return Ok(());
        }
        None => 0,
    };
    txn.write(key, Write::List(vec![push_edit(left, len, &a[2..])]))?;
    drop(txn);
    ctx.out.int((len + a.len() - 2) as i64);
    Ok(())
}

pub fn lpush(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    push(ctx, a, true, false)
}

pub fn rpush(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    push(ctx, a, false, false)
}

pub fn lpushx(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    push(ctx, a, true, true)
}

pub fn rpushx(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    push(ctx, a, false, true)
}

pub fn llen(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, l| {
        ctx.out.int(l.map_or(0, ListValue::len) as i64);
        Ok(())
    })
}

pub fn lindex(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let i = args::int(a[2])?;
    read(ctx, a[1], |ctx, l| {
        match l.and_then(|l| l.get(index(i, l.len())?)) {
            Some(e) => ctx.out.bulk(e),
            None => ctx.out.null(),
        }
        Ok(())
    })
}

pub fn lrange(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (start, stop) = (args::int(a[2])?, args::int(a[3])?);
    read(ctx, a[1], |ctx, l| {
        match l.and_then(|l| Some((l, range(start, stop, l.len())?))) {
            Some((l, (start, stop))) => {
                ctx.out.array(stop - start + 1);
                for e in l.range(start, stop + 1) {
                    ctx.out.bulk(e);
                }
            }
            None => ctx.out.array(0),
        }
        Ok(())
    })
}

pub fn lset(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let key = a[1];
    let i = args::int(a[2])?;
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let at = match list_at(&mut txn, key)? {
        None => return Err(CmdError::NoSuchKey),
        Some(l) => index(i, l.len()).ok_or_else(|| CmdError::other("ERR index out of range"))?,
    };
    txn.write(key, Write::List(vec![edit(at, 1, vec![owned(a[3])])]))?;
    drop(txn);
    ctx.out.simple("OK");
    Ok(())
}

/// LINSERT key BEFORE|AFTER pivot element: the length after, 0 when the
/// key is missing, -1 when the pivot is not in the list.
pub fn linsert(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let after = match a[2] {
        w if is(w, "AFTER") => true,
        w if is(w, "BEFORE") => false,
        _ => return Err(CmdError::Syntax),
    };
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let (len, pivot) = match list_at(&mut txn, key)? {
        None => (0, None),
        Some(l) => (l.len(), l.iter().position(|e| e == a[3])),
    };
    let reply = match pivot {
        _ if len == 0 => 0,
        None => -1,
        Some(p) => {
            let at = if after { p + 1 } else { p };
            txn.write(key, Write::List(vec![edit(at, 0, vec![owned(a[4])])]))?;
            len as i64 + 1
        }
    };
    drop(txn);
    ctx.out.int(reply);
    Ok(())
}

/// LREM key count element: removes up to |count| occurrences (from the
/// head when positive, from the tail when negative, all when 0).
pub fn lrem(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let count = args::int(a[2])?;
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let mut found: Vec<usize> = match list_at(&mut txn, key)? {
        None => Vec::new(),
        Some(l) => {
            let limit = if count == 0 {
                usize::MAX
            } else {
                count.unsigned_abs().try_into().unwrap_or(usize::MAX)
            };
            let hits = l.iter().enumerate().filter(|(_, e)| *e == a[3]);
            match count < 0 {
                true => hits.rev().take(limit).map(|(i, _)| i).collect(),
                false => hits.take(limit).map(|(i, _)| i).collect(),
            }
        }
    };
    // Removed from the highest index down, each index then still the
    // element's own.
    found.sort_unstable_by(|x, y| y.cmp(x));
    let removed = found.len();
    if removed > 0 {
        let edits = found.into_iter().map(|i| edit(i, 1, Vec::new())).collect();
        txn.write(key, Write::List(edits))?;
    }
    drop(txn);
    ctx.out.int(removed as i64);
    Ok(())
}

/// LTRIM key start stop: keeps `start..=stop`; an empty range deletes the
/// key.
pub fn ltrim(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (start, stop) = (args::int(a[2])?, args::int(a[3])?);
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    if let Some(len) = list_at(&mut txn, key)?.map(ListValue::len) {
        let edits = match range(start, stop, len) {
            None => vec![edit(0, len, Vec::new())],
            Some((start, stop)) => [
                (stop + 1 < len).then(|| edit(stop + 1, len - stop - 1, Vec::new())),
                (start > 0).then(|| edit(0, start, Vec::new())),
            ]
            .into_iter()
            .flatten()
            .collect(),
        };
        if !edits.is_empty() {
            txn.write(key, Write::List(edits))?;
        }
    }
    drop(txn);
    ctx.out.simple("OK");
    Ok(())
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
pub fn lpos(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<usize>, 0usize);
    let mut i = 3;
    while i < a.len() {
        let Some(v) = a.get(i + 1) else {
            return Err(CmdError::Syntax);
        };
        if is(a[i], "RANK") {
            rank = args::int(v)?;
            if rank == i64::MIN {
                return Err(CmdError::other(
                    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                ));
            }
            if rank == 0 {
                return Err(CmdError::other(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if is(a[i], "COUNT") {
            count = Some(positive(v, "ERR COUNT can't be negative")?);
        } else if is(a[i], "MAXLEN") {
            maxlen = positive(v, "ERR MAXLEN can't be negative")?;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    read(ctx, a[1], |ctx, l| {
        let len = l.map_or(0, ListValue::len);
        let scanned = if maxlen == 0 { len } else { maxlen.min(len) };
        let wanted = match count {
            Some(0) => usize::MAX,
            Some(n) => n,
            None => 1,
        };
        let skip = (rank.unsigned_abs() - 1).try_into().unwrap_or(usize::MAX);
        let matches = |it: &mut dyn Iterator<Item = (usize, &[u8])>| -> Vec<usize> {
            it.take(scanned)
                .filter(|(_, e)| *e == a[2])
                .skip(skip)
                .take(wanted)
                .map(|(i, _)| i)
                .collect()
        };
        let found = match l {
            None => Vec::new(),
            Some(l) if rank > 0 => matches(&mut l.iter().enumerate()),
            Some(l) => matches(&mut l.iter().enumerate().rev()),
        };
        match count {
            Some(_) => {
                ctx.out.array(found.len());
                for i in found {
                    ctx.out.int(i as i64);
                }
            }
            None => match found.first() {
                Some(&i) => ctx.out.int(i as i64),
                None => ctx.out.null(),
            },
        }
        Ok(())
    })
}

/// A count that must be at least 0 (`msg` otherwise, and for a non-integer).
fn positive(arg: &[u8], msg: &str) -> Result<usize, CmdError> {
    match crate::number::parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as usize),
        _ => Err(CmdError::other(msg)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_and_ranges_follow_redis() {
        assert_eq!(index(-1, 3), Some(2));
        assert_eq!(index(3, 3), None);
        assert_eq!(index(-4, 3), None);
        assert_eq!(range(0, -1, 3), Some((0, 2)));
        assert_eq!(range(-100, 100, 3), Some((0, 2)));
        assert_eq!(range(2, 1, 3), None);
        assert_eq!(range(5, 10, 3), None);
        assert_eq!(range(0, -1, 0), None);
    }

    #[test]
    fn a_left_push_puts_the_last_element_first() {
        let e = push_edit(true, 5, &[b"a", b"b"]);
        assert_eq!((e.at, e.remove), (0, 0));
        assert_eq!(e.insert, [Bytes::from("b"), Bytes::from("a")]);
        let e = push_edit(false, 5, &[b"a", b"b"]);
        assert_eq!((e.at, e.insert.len()), (5, 2));
    }
}
