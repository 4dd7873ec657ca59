//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted as
//! numbers (or as bytes with ALPHA), by themselves or by the values of
//! other keys (`BY weight_*`, `BY h_*->field`), with LIMIT, GET patterns
//! (`#`: the element) and STORE (the result as a list, through the one
//! write path; an empty result deletes the destination), as Redis 7.0's
//! `sortCommandGeneric`.
//!
//! The keys a pattern names are known only once the elements are read:
//! the command reads the source, then opens one transaction over the
//! source, the destination and every key the patterns name, and reads the
//! source again there; if it changed in between so that other keys are
//! named, it tries again with those too.

use std::cmp::Ordering;

use bytes::Bytes;
use keyspace::{ListValue, Txn, Value, Write};

use crate::args::{self, is};
use crate::error::CmdError;
use crate::Ctx;

struct Options<'a> {
    by: Option<&'a [u8]>,
    dont_sort: bool,
    limit: Option<(i64, i64)>,
    gets: Vec<&'a [u8]>,
    desc: bool,
    alpha: bool,
    store: Option<&'a [u8]>,
}

fn options<'a>(a: &[&'a [u8]], read_only: bool, read_any: bool) -> Result<Options<'a>, CmdError> {
    let mut o = Options {
        by: None,
        dont_sort: false,
        limit: None,
        gets: Vec::new(),
        desc: false,
        alpha: false,
        store: None,
    };
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - i - 1;
        match a[i] {
            w if is(w, "ASC") => o.desc = false,
            w if is(w, "DESC") => o.desc = true,
            w if is(w, "ALPHA") => o.alpha = true,
            w if is(w, "LIMIT") && more >= 2 => {
                o.limit = Some((args::int(a[i + 1])?, args::int(a[i + 2])?));
                i += 2;
            }
            w if is(w, "STORE") && more >= 1 && !read_only => {
                o.store = Some(a[i + 1]);
                i += 1;
            }
            w if is(w, "BY") && more >= 1 => {
                o.by = Some(a[i + 1]);
                // A pattern naming no key: do not sort.
                o.dont_sort = !a[i + 1].contains(&b'*');
                if !o.dont_sort && !read_any {
                    return Err(CmdError::other(
                        "ERR BY option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                i += 1;
            }
            w if is(w, "GET") && more >= 1 => {
                if !read_any {
                    return Err(CmdError::other(
                        "ERR GET option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                o.gets.push(a[i + 1]);
                i += 1;
            }
            _ => return Err(CmdError::Syntax),
        }
        i += 1;
    }
    Ok(o)
}

/// The key (and hash field) `pattern` names for `element`; None when it
/// names none (no `*`). `#` is the element itself (handled by the caller).
fn pattern_key(pattern: &[u8], element: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let star = pattern.iter().position(|&b| b == b'*')?;
    let rest = &pattern[star + 1..];
    let (postfix, field) = match rest.windows(2).position(|w| w == b"->") {
        Some(f) if f + 2 < rest.len() => (&rest[..f], Some(rest[f + 2..].to_vec())),
        _ => (rest, None),
    };
    let mut key = pattern[..star].to_vec();
    key.extend_from_slice(element);
    key.extend_from_slice(postfix);
    Some((key, field))
}

/// The value `pattern` names for `element`: the element (`#`), a string
/// key's value or a hash field's; None when missing or of another type.
fn lookup(txn: &mut Txn, pattern: &[u8], element: &[u8]) -> Option<Bytes> {
    if pattern == b"#" {
        return Some(Bytes::copy_from_slice(element));
    }
    let (key, field) = pattern_key(pattern, element)?;
    let e = txn.get(&key)?;
    match field {
        None => e.str_bytes(),
        Some(f) => e
            .as_hash()?
            .get(&f)
            .map(|v| Bytes::copy_from_slice(v.value)),
    }
}

/// The source's elements in their own order (a list's, a sorted set's by
/// score, a set's as held); WRONGTYPE for a string or a hash.
fn elements(txn: &mut Txn, key: &[u8]) -> Result<Vec<Bytes>, CmdError> {
    let Some(e) = txn.get(key) else {
        return Ok(Vec::new());
    };
    let copy = Bytes::copy_from_slice;
    Ok(match &e.value {
        Value::List(l) => l.iter().map(copy).collect(),
        Value::Set(s) => s.members().map(copy).collect(),
        Value::ZSet(z) => z.range(0, z.len()).map(|(m, _)| copy(m)).collect(),
        _ => return Err(CmdError::WrongType),
    })
}

/// Every key the patterns name for `items` (the partitions to lock).
fn named_keys(o: &Options, items: &[Bytes]) -> Vec<Vec<u8>> {
    let patterns =
        o.by.filter(|_| !o.dont_sort)
            .into_iter()
            .chain(o.gets.iter().copied());
    let mut keys = Vec::new();
    for p in patterns.filter(|p| *p != b"#") {
        for e in items {
            if let Some((k, _)) = pattern_key(p, e) {
                keys.push(k);
            }
        }
    }
    keys
}

pub fn sort(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    sort_generic(ctx, a, false)
}

pub fn sort_ro(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    sort_generic(ctx, a, true)
}

fn sort_generic(ctx: &mut Ctx, a: &[&[u8]], read_only: bool) -> Result<(), CmdError> {
    let mut o = options(a, read_only, ctx.read_any_key)?;
    let source = a[1];
    let ks = ctx.ks;
    let mut locked: Vec<Vec<u8>> = vec![source.to_vec()];
    locked.extend(o.store.map(<[u8]>::to_vec));
    let mut attempts = 0;
    let (mut txn, items, is_set) = loop {
        let mut txn = ks.txn(locked.iter().map(Vec::as_slice), ctx.client_id);
        let items = elements(&mut txn, source)?;
        let held = txn.get(source).map(|e| e.value.type_name());
        let named = named_keys(&o, &items);
        let parts: Vec<usize> = locked.iter().map(|k| ks.partition_of(k)).collect();
        let missing: Vec<Vec<u8>> = named
            .into_iter()
            .filter(|k| !parts.contains(&ks.partition_of(k)))
            .collect();
        attempts += 1;
        if missing.is_empty() || attempts > 3 {
            break (txn, items, held == Some("set"));
        }
        drop(txn);
        locked.extend(missing);
    };
    // A set in its own order is not deterministic: stored (or in a
    // script), Redis sorts it as bytes.
    if o.dont_sort && is_set && o.store.is_some() {
        o.dont_sort = false;
        o.alpha = true;
        o.by = None;
    }
    let mut order: Vec<(Bytes, Key)> = Vec::with_capacity(items.len());
    for e in items {
        let key = match (o.dont_sort, o.by) {
            (true, _) => Key::None,
            (false, Some(by)) => match (lookup(&mut txn, by, &e), o.alpha) {
                (v, true) => Key::Bytes(v),
                (None, false) => Key::Num(0.0, e.clone()),
                (Some(v), false) => Key::Num(score(&v)?, e.clone()),
            },
            (false, None) if o.alpha => Key::Bytes(Some(e.clone())),
            (false, None) => Key::Num(score(&e)?, e.clone()),
        };
        order.push((e, key));
    }
    if o.dont_sort {
        if o.desc && !is_set {
            order.reverse();
        }
    } else {
        order.sort_by(|(_, x), (_, y)| {
            let c = x.cmp(y);
            if o.desc {
                c.reverse()
            } else {
                c
            }
        });
    }
    let (start, end) = window(o.limit, order.len());
    let picked = &order[start..end];
    let mut out: Vec<Option<Bytes>> = Vec::new();
    for (e, _) in picked {
        if o.gets.is_empty() {
            out.push(Some(e.clone()));
        }
        for g in &o.gets {
            out.push(lookup(&mut txn, g, e));
        }
    }
    match o.store {
        Some(dest) => {
            let n = out.len();
            let w = match n {
                0 => Write::Delete,
                _ => Write::Set {
                    value: Value::List(Box::new(ListValue::from_items(
                        out.into_iter().map(|v| v.unwrap_or_default()),
                    ))),
                    expire_at: 0,
                },
            };
            txn.write(dest, w)?;
            drop(txn);
            ctx.out.int(n as i64);
        }
        None => {
            drop(txn);
            ctx.out.array(out.len());
            for v in &out {
                match v {
                    Some(v) => ctx.out.bulk(v),
                    None => ctx.out.null(),
                }
            }
        }
    }
    Ok(())
}

/// LIMIT offset count over `len` elements, as Redis clamps it.
fn window(limit: Option<(i64, i64)>, len: usize) -> (usize, usize) {
    let Some((offset, count)) = limit else {
        return (0, len);
    };
    let start = offset.max(0) as u64;
    if start >= len as u64 {
        return (len, len);
    }
    let end = match count {
        c if c < 0 => len as u64,
        c => (start + c as u64).min(len as u64),
    };
    (start as usize, end as usize)
}

fn score(v: &[u8]) -> Result<f64, CmdError> {
    crate::number::parse_f64(v)
        .ok_or_else(|| CmdError::other("ERR One or more scores can't be converted into double"))
}

/// What an element sorts by.
enum Key {
    None,
    /// Numerically; equal scores by the element's bytes.
    Num(f64, Bytes),
    /// As bytes (ALPHA); a missing BY value first.
    Bytes(Option<Bytes>),
}

impl Key {
    fn cmp(&self, other: &Key) -> Ordering {
        match (self, other) {
            (Key::Num(x, a), Key::Num(y, b)) => x
                .partial_cmp(y)
                .unwrap_or(Ordering::Equal)
                .then_with(|| a.cmp(b)),
            (Key::Bytes(a), Key::Bytes(b)) => a.cmp(b),
            _ => Ordering::Equal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_name_keys_and_fields() {
        assert_eq!(pattern_key(b"w_*", b"3"), Some((b"w_3".to_vec(), None)));
        assert_eq!(
            pattern_key(b"h_*->f", b"3"),
            Some((b"h_3".to_vec(), Some(b"f".to_vec())))
        );
        assert_eq!(pattern_key(b"h_*->", b"3"), Some((b"h_3->".to_vec(), None)));
        assert_eq!(pattern_key(b"nosort", b"3"), None);
    }

    #[test]
    fn limits_clamp_as_redis() {
        assert_eq!(window(None, 5), (0, 5));
        assert_eq!(window(Some((1, 2)), 5), (1, 3));
        assert_eq!(window(Some((-1, 2)), 5), (0, 2));
        assert_eq!(window(Some((3, -1)), 5), (3, 5));
        assert_eq!(window(Some((9, 2)), 5), (5, 5));
    }
}
