//! Set commands. Every write is a per-member delta through the one write
//! path: SADD logs the members added, SREM/SPOP/SMOVE the members removed
//! with the version each had (an observed remove, so across sites an add
//! the remover did not see wins); the *STORE commands write a whole set.

mod algebra;

use bytes::Bytes;
use keyspace::{SetValue, Txn, Value, Write};

use crate::args::{self, owned};
use crate::error::CmdError;
use crate::sampling;
use crate::Ctx;

pub use algebra::{sdiff, sdiffstore, sinter, sintercard, sinterstore, sunion, sunionstore};

/// The set at `key` (None when missing); WRONGTYPE for another type.
fn set_at<'t>(txn: &'t mut Txn, key: &[u8]) -> Result<Option<&'t SetValue>, CmdError> {
    match txn.get(key) {
        None => Ok(None),
        Some(e) => e.as_set().map(Some).ok_or(CmdError::WrongType),
    }
}

/// Runs `f` on the set at `key` (None when missing).
fn read<R>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Ctx, Option<&SetValue>) -> R,
) -> Result<R, CmdError> {
    let ks = ctx.ks;
    let mut txn = ks.txn([key], ctx.client_id);
    let set = set_at(&mut txn, key)?;
    Ok(f(ctx, set))
}

/// Members given once each (a member named twice counts once, as in Redis).
fn distinct(members: &[&[u8]]) -> Vec<Bytes> {
    let mut seen = std::collections::HashSet::with_capacity(members.len());
    members
        .iter()
        .filter(|m| seen.insert(**m))
        .map(|m| owned(m))
        .collect()
}

pub fn sadd(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let members = distinct(&a[2..]);
    let added = match set_at(&mut txn, key)? {
        Some(s) => members.iter().filter(|m| !s.contains(m)).count(),
        None => members.len(),
    };
    if added > 0 {
        txn.write(key, Write::SetAdd(members))?;
    }
    drop(txn);
    ctx.out.int(added as i64);
    Ok(())
}

pub fn srem(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let members: Vec<Bytes> = match set_at(&mut txn, key)? {
        Some(s) => distinct(&a[2..])
            .into_iter()
            .filter(|m| s.contains(m))
            .collect(),
        None => Vec::new(),
    };
    let removed = members.len();
    if removed > 0 {
        txn.write(key, Write::Remove(members))?;
    }
    drop(txn);
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn smembers(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, s| {
        ctx.out.set(s.map_or(0, SetValue::len));
        for m in s.into_iter().flat_map(SetValue::members) {
            ctx.out.bulk(m);
        }
    })
}

pub fn sismember(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, s| {
        ctx.out.int(s.is_some_and(|s| s.contains(a[2])) as i64)
    })
}

pub fn smismember(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, s| {
        ctx.out.array(a.len() - 2);
        for m in &a[2..] {
            ctx.out.int(s.is_some_and(|s| s.contains(m)) as i64);
        }
    })
}

pub fn scard(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    read(ctx, a[1], |ctx, s| {
        ctx.out.int(s.map_or(0, SetValue::len) as i64)
    })
}

pub fn smove(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (src, dst, member) = (a[1], a[2], a[3]);
    let mut txn = ctx.ks.txn([src, dst], ctx.client_id);
    let held = match set_at(&mut txn, src)? {
        Some(s) => s.contains(member),
        None => false,
    };
    // The destination's type is checked even when nothing moves.
    set_at(&mut txn, dst)?;
    if held && src != dst {
        txn.write(src, Write::Remove(vec![owned(member)]))?;
        let there = set_at(&mut txn, dst)?.is_some_and(|s| s.contains(member));
        if !there {
            txn.write(dst, Write::SetAdd(vec![owned(member)]))?;
        }
    }
    drop(txn);
    ctx.out.int(held as i64);
    Ok(())
}

/// The count argument of SPOP: positive.
fn pop_count(arg: &[u8]) -> Result<i64, CmdError> {
    match args::int(arg) {
        Ok(n) if n >= 0 => Ok(n),
        _ => Err(CmdError::other(
            "ERR value is out of range, must be positive",
        )),
    }
}

pub fn spop(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    if a.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = a.get(2).map(|c| pop_count(c)).transpose()?;
    let key = a[1];
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let picked: Vec<Bytes> = match set_at(&mut txn, key)? {
        Some(s) => {
            let n = count.map_or(1, |c| (c as usize).min(s.len()));
            let mut rng = rand::thread_rng();
            let at = Positions::of(s);
            rand::seq::index::sample(&mut rng, s.len(), n)
                .into_iter()
                .filter_map(|i| at.get(i).map(Bytes::copy_from_slice))
                .collect()
        }
        None => Vec::new(),
    };
    if !picked.is_empty() {
        txn.write(key, Write::Remove(picked.clone()))?;
    }
    drop(txn);
    match count {
        None => match picked.first() {
            Some(m) => ctx.out.bulk(m),
            None => ctx.out.null(),
        },
        Some(_) => {
            ctx.out.set(picked.len());
            for m in &picked {
                ctx.out.bulk(m);
            }
        }
    }
    Ok(())
}

pub fn srandmember(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    if a.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = a.get(2).map(|c| args::int(c)).transpose()?;
    sampling::check_count(count, false)?;
    read(ctx, a[1], |ctx, s| {
        let len = s.map_or(0, SetValue::len);
        let at = s.map(Positions::of);
        let member = |i: usize| at.as_ref().and_then(|at| at.get(i));
        let Some(count) = count else {
            match member(if len > 0 {
                sampling::random_one(len)
            } else {
                0
            }) {
                Some(m) => ctx.out.bulk(m),
                None => ctx.out.null(),
            }
            return;
        };
        let picks = sampling::random_picks(len, count);
        ctx.out.array(picks.len());
        for i in picks {
            ctx.out.bulk(member(i).map_or(&[][..], |m| m));
        }
    })
}

/// A set's members by position: a packed set's listed once (reaching one
/// there is a scan), a table's looked up.
enum Positions<'a> {
    Listed(Vec<&'a [u8]>),
    Table(&'a SetValue),
}

impl<'a> Positions<'a> {
    fn of(s: &'a SetValue) -> Self {
        match s.is_packed() {
            true => Positions::Listed(s.members().collect()),
            false => Positions::Table(s),
        }
    }

    fn get(&self, i: usize) -> Option<&'a [u8]> {
        match self {
            Positions::Listed(l) => l.get(i).copied(),
            Positions::Table(s) => s.get_index(i).map(|(m, _)| m),
        }
    }
}

pub fn sscan(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let cursor = args::cursor(a[2])?;
    let opts = args::scan_opts(&a[3..], false)?;
    read(ctx, a[1], |ctx, s| {
        // A small set is returned whole with cursor 0, as Redis does for an
        // intset or listpack.
        let one_shot = s.is_none_or(|s| ctx.ks.encodings().set_encoding(s) != "hashtable");
        let members = s.into_iter().flat_map(SetValue::members).map(|m| (m, ()));
        let (next, page) = sampling::scan_page(members, cursor, &opts, one_shot);
        ctx.out.array(2);
        ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
        ctx.out.array(page.len());
        for (m, ()) in page {
            ctx.out.bulk(m);
        }
    })
}

/// Writes `members` as the whole set at `dst` (deleting it when empty);
/// returns the count.
fn store(txn: &mut Txn, dst: &[u8], members: Vec<Bytes>) -> Result<usize, CmdError> {
    let n = members.len();
    if n == 0 {
        txn.write(dst, Write::Delete)?;
        return Ok(0);
    }
    let mut set = SetValue::new();
    for m in &members {
        // Each member takes the write's version when it is logged.
        set.add(m, keyspace::Version::ZERO);
    }
    txn.write(
        dst,
        Write::Set {
            value: Value::Set(set),
            expire_at: 0,
        },
    )?;
    Ok(n)
}
