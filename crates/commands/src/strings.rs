//! String commands. Writes go through `Txn::write`; the ones that are deltas
//! by nature (APPEND, SETRANGE, INCRBY...) say so with a string op, and SET
//! hands the whole value to the write path, which diffs it against a similar
//! old value by itself.

use bytes::Bytes;
use keyspace::{DeltaOp, Value, Write};

use crate::args::{self, expire_at_ms, is, owned};
use crate::error::CmdError;
use crate::number::float_sum;
use crate::{Ctx, MAX_STRING};

/// The string at `key`: Ok(None) when missing, WRONGTYPE for other types.
fn get_str(txn: &mut keyspace::Txn, key: &[u8]) -> Result<Option<Bytes>, CmdError> {
    match txn.get(key) {
        None => Ok(None),
        Some(e) => match e.str_bytes() {
            Some(b) => Ok(Some(b)),
            None => Err(CmdError::WrongType),
        },
    }
}

fn reply_opt(ctx: &mut Ctx, v: Option<Bytes>) {
    match v {
        Some(b) => ctx.out.bulk(&b),
        None => ctx.out.null(),
    }
}

pub fn get(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    match txn.get(a[1]) {
        None => ctx.out.null(),
        Some(e) => match e.as_str() {
            Some(s) => ctx.out.bulk(s),
            None => return Err(CmdError::WrongType),
        },
    }
    Ok(())
}

#[derive(Default)]
struct SetOpts {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    /// (n, unit ms, absolute)
    expire: Option<(i64, i64, bool)>,
}

fn parse_set_opts(a: &[&[u8]]) -> Result<SetOpts, CmdError> {
    let mut o = SetOpts::default();
    let mut i = 0;
    while i < a.len() {
        let arg = &a[i];
        let unit = [
            ("EX", 1000, false),
            ("PX", 1, false),
            ("EXAT", 1000, true),
            ("PXAT", 1, true),
        ]
        .into_iter()
        .find(|(kw, _, _)| is(arg, kw));
        if let Some((_, unit_ms, absolute)) = unit {
            // Repeating the same option is allowed (the last wins); mixing
            // two kinds of expiry, or an expiry with KEEPTTL, is not.
            let other_kind = o
                .expire
                .is_some_and(|(_, u, abs)| (u, abs) != (unit_ms, absolute));
            if other_kind || o.keepttl || i + 1 >= a.len() {
                return Err(CmdError::Syntax);
            }
            o.expire = Some((args::int(a[i + 1])?, unit_ms, absolute));
            i += 2;
            continue;
        }
        if is(arg, "NX") && !o.xx {
            o.nx = true;
        } else if is(arg, "XX") && !o.nx {
            o.xx = true;
        } else if is(arg, "GET") {
            o.get = true;
        } else if is(arg, "KEEPTTL") && o.expire.is_none() {
            o.keepttl = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

/// Absolute expiry in ms from a relative or absolute time, Redis's checks.
fn checked_expire(
    now: u64,
    (n, unit, absolute): (i64, i64, bool),
    cmd: &'static str,
) -> Result<u64, CmdError> {
    if n <= 0 {
        return Err(CmdError::InvalidExpire(cmd));
    }
    match expire_at_ms(now, n, unit, absolute) {
        Some(at) if at > 0 => Ok(at as u64),
        _ => Err(CmdError::InvalidExpire(cmd)),
    }
}

pub fn set(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let o = parse_set_opts(&a[3..])?;
    set_with(ctx, a[1], a[2], o, "set")
}

fn set_with(
    ctx: &mut Ctx,
    key: &[u8],
    value: &[u8],
    o: SetOpts,
    cmd: &'static str,
) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let now = txn.now_ms();
    let expire_at = match o.expire {
        Some(e) => checked_expire(now, e, cmd)?,
        None => 0,
    };
    // The old value is cloned only for SET ... GET (a clone of a value
    // allocates its shared header).
    let (exists, old, old_expire) = match txn.get(key) {
        None => (false, None, 0),
        Some(e) if o.get => (
            true,
            Some(e.str_bytes().ok_or(CmdError::WrongType)?),
            e.expire_at,
        ),
        Some(e) => (true, None, e.expire_at),
    };
    let blocked = (o.nx && exists) || (o.xx && !exists);
    if !blocked {
        let expire_at = if o.keepttl { old_expire } else { expire_at };
        if expire_at != 0 && expire_at <= now {
            // An absolute time already past: the value would never be seen.
            txn.write(key, Write::Delete)?;
        } else {
            txn.write(
                key,
                Write::Set {
                    value: Value::str(value),
                    expire_at,
                },
            )?;
        }
    }
    drop(txn);
    if o.get {
        reply_opt(ctx, old);
    } else if blocked {
        ctx.out.null();
    } else {
        ctx.out.simple("OK");
    }
    Ok(())
}

pub fn setnx(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    if txn.exists(a[1]) {
        ctx.out.int(0);
    } else {
        txn.write(
            a[1],
            Write::Set {
                value: Value::str(a[2]),
                expire_at: 0,
            },
        )?;
        ctx.out.int(1);
    }
    Ok(())
}

fn set_expiring(
    ctx: &mut Ctx,
    a: &[&[u8]],
    unit_ms: i64,
    cmd: &'static str,
) -> Result<(), CmdError> {
    let n = args::int(a[2])?;
    let o = SetOpts {
        expire: Some((n, unit_ms, false)),
        ..Default::default()
    };
    set_with(ctx, a[1], a[3], o, cmd)
}

pub fn setex(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    set_expiring(ctx, a, 1000, "setex")
}

pub fn psetex(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    set_expiring(ctx, a, 1, "psetex")
}

pub fn getset(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    set_with(
        ctx,
        a[1],
        a[2],
        SetOpts {
            get: true,
            ..Default::default()
        },
        "getset",
    )
}

pub fn getdel(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let old = get_str(&mut txn, a[1])?;
    if old.is_some() {
        txn.write(a[1], Write::Delete)?;
    }
    drop(txn);
    reply_opt(ctx, old);
    Ok(())
}

pub fn getex(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut expire = None;
    let mut persist = false;
    let mut i = 2;
    while i < a.len() {
        let unit = [
            ("EX", 1000, false),
            ("PX", 1, false),
            ("EXAT", 1000, true),
            ("PXAT", 1, true),
        ]
        .into_iter()
        .find(|(kw, _, _)| is(a[i], kw));
        if let Some((_, unit_ms, absolute)) = unit {
            if expire.is_some() || persist || i + 1 >= a.len() {
                return Err(CmdError::Syntax);
            }
            expire = Some((args::int(a[i + 1])?, unit_ms, absolute));
            i += 2;
        } else if is(a[i], "PERSIST") && expire.is_none() {
            persist = true;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let now = txn.now_ms();
    let at = expire
        .map(|e| checked_expire(now, e, "getex"))
        .transpose()?;
    let old = get_str(&mut txn, a[1])?;
    if old.is_some() {
        if let Some(at) = at {
            txn.write(a[1], Write::SetExpiry(at))?;
        } else if persist && txn.get(a[1]).is_some_and(|e| e.expire_at != 0) {
            txn.write(a[1], Write::SetExpiry(0))?;
        }
    }
    drop(txn);
    reply_opt(ctx, old);
    Ok(())
}

pub fn mget(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let keys = &a[1..];
    let mut txn = ctx.ks.txn(keys.iter().map(|k| &k[..]), ctx.client_id);
    ctx.out.array(keys.len());
    for k in keys {
        match txn.get(k).and_then(|e| e.as_str()) {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn mset_pairs(a: &[&[u8]], name: &str) -> Result<(), CmdError> {
    if a.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.into()));
    }
    Ok(())
}

pub fn mset(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    mset_pairs(a, "mset")?;
    let mut txn = ctx
        .ks
        .txn(a[1..].iter().step_by(2).map(|k| &k[..]), ctx.client_id);
    for kv in a[1..].chunks(2) {
        txn.write(
            kv[0],
            Write::Set {
                value: Value::str(kv[1]),
                expire_at: 0,
            },
        )?;
    }
    drop(txn);
    ctx.out.simple("OK");
    Ok(())
}

pub fn msetnx(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    mset_pairs(a, "msetnx")?;
    let mut txn = ctx
        .ks
        .txn(a[1..].iter().step_by(2).map(|k| &k[..]), ctx.client_id);
    if a[1..].iter().step_by(2).any(|k| txn.exists(k)) {
        drop(txn);
        ctx.out.int(0);
        return Ok(());
    }
    for kv in a[1..].chunks(2) {
        txn.write(
            kv[0],
            Write::Set {
                value: Value::str(kv[1]),
                expire_at: 0,
            },
        )?;
    }
    drop(txn);
    ctx.out.int(1);
    Ok(())
}

fn incr_by(ctx: &mut Ctx, key: &[u8], by: i64) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    // Read in place: a clone of the value would allocate its shared header.
    // Matched, not `ok_or(CmdError::..)`: see `args::int`.
    let current = match txn.get(key) {
        Some(e) => match e.as_str() {
            Some(s) => args::int(s)?,
            None => return Err(CmdError::WrongType),
        },
        None => 0,
    };
    let Some(new) = current.checked_add(by) else {
        return Err(CmdError::Overflow);
    };
    txn.write(key, Write::Str(DeltaOp::IncrBy(by)))?;
    drop(txn);
    ctx.out.int(new);
    Ok(())
}

pub fn incr(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    incr_by(ctx, a[1], 1)
}

pub fn decr(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    incr_by(ctx, a[1], -1)
}

pub fn incrby(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let by = args::int(a[2])?;
    incr_by(ctx, a[1], by)
}

pub fn decrby(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let by = args::int(a[2])?;
    let by = by
        .checked_neg()
        .ok_or_else(|| CmdError::other("ERR decrement would overflow"))?;
    incr_by(ctx, a[1], by)
}

pub fn incrbyfloat(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let by = args::float(a[2])?;
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let (current, current_text, expire_at) = match txn.get(a[1]) {
        None => (0.0, Bytes::from_static(b"0"), 0),
        Some(e) => {
            let text = e.as_str().ok_or(CmdError::WrongType)?;
            (
                args::float(text)?,
                Bytes::copy_from_slice(text),
                e.expire_at,
            )
        }
    };
    let new = current + by;
    if !new.is_finite() {
        return Err(CmdError::NanOrInfinity);
    }
    let text = Bytes::from(float_sum(&current_text, a[2], new));
    // Logged as the new value, or where sites merge as this site's running
    // total of its INCRBYFLOATs; the reply is the value stored.
    txn.write(
        a[1],
        Write::FloatIncr {
            by: owned(a[2]),
            text: text.clone(),
            expire_at,
        },
    )?;
    let text = match txn.get(a[1]).and_then(|e| e.as_str()) {
        Some(stored) => Bytes::copy_from_slice(stored),
        None => text,
    };
    drop(txn);
    ctx.out.bulk(&text);
    Ok(())
}

pub fn append(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let len = get_str(&mut txn, a[1])?.map_or(0, |v| v.len());
    if len + a[2].len() > MAX_STRING {
        return Err(CmdError::StringTooLong);
    }
    txn.write(
        a[1],
        Write::Str(DeltaOp::Splice {
            offset: len as u32,
            remove: 0,
            insert: owned(a[2]),
        }),
    )?;
    drop(txn);
    ctx.out.int((len + a[2].len()) as i64);
    Ok(())
}

pub fn strlen(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let len = get_str(&mut txn, a[1])?.map_or(0, |v| v.len());
    drop(txn);
    ctx.out.int(len as i64);
    Ok(())
}

pub fn setrange(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let offset = args::int(a[2])?;
    if offset < 0 {
        return Err(CmdError::OffsetOutOfRange);
    }
    let offset = offset as usize;
    let value = &a[3];
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let len = get_str(&mut txn, a[1])?.map_or(0, |v| v.len());
    if value.is_empty() {
        drop(txn);
        ctx.out.int(len as i64);
        return Ok(());
    }
    if offset + value.len() > MAX_STRING {
        return Err(CmdError::StringTooLong);
    }
    let remove = value.len().min(len.saturating_sub(offset)) as u32;
    txn.write(
        a[1],
        Write::Str(DeltaOp::Splice {
            offset: offset as u32,
            remove,
            insert: owned(value),
        }),
    )?;
    drop(txn);
    ctx.out.int(len.max(offset + value.len()) as i64);
    Ok(())
}

pub fn getrange(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (start, end) = (args::int(a[2])?, args::int(a[3])?);
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let v = get_str(&mut txn, a[1])?.unwrap_or_default();
    drop(txn);
    match byte_range(v.len(), start, end) {
        Some((s, e)) => ctx.out.bulk(&v[s..=e]),
        None => ctx.out.bulk(b""),
    }
    Ok(())
}

/// Redis's inclusive range with negative indexes counted from the end.
fn byte_range(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    if len == 0 || (start < 0 && end < 0 && start > end) {
        return None;
    }
    let len = len as i64;
    let s = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let e = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    (s <= e && s < len).then_some((s as usize, e as usize))
}

#[cfg(test)]
mod tests {
    use super::byte_range;

    #[test]
    fn getrange_indexes_like_redis() {
        // "This is a string"
        assert_eq!(byte_range(16, 0, 3), Some((0, 3)));
        assert_eq!(byte_range(16, -3, -1), Some((13, 15)));
        assert_eq!(byte_range(16, 0, -1), Some((0, 15)));
        assert_eq!(byte_range(16, 10, 100), Some((10, 15)));
        assert_eq!(byte_range(16, 5, 3), None);
        assert_eq!(byte_range(0, 0, -1), None);
        assert_eq!(byte_range(16, -1, -5), None);
    }
}
