//! How a key's value is held, as Redis's introspection commands tell it:
//! `OBJECT ENCODING|REFCOUNT|HELP` and `MEMORY USAGE|MALLOC-STATS|HELP`.
//!
//! deltagrid keeps every string as bytes and every hash as one map; what
//! ENCODING answers is the encoding Redis would give the same value (what
//! clients and tests look for), from the value as it is now (Redis never
//! turns a hashtable back into a listpack; here a hash that shrinks reads
//! as a listpack again). `OBJECT IDLETIME` and `FREQ` read what eviction
//! keeps of a key's use (`keyspace::access`), as Redis does: the idle time
//! unless an LFU policy is in force, the access counter only when one is.
//! `MEMORY PURGE` hands the allocator's free memory back to the system
//! (`keyspace::memory::purge`). `MEMORY DOCTOR` and `STATS` report the
//! node's figures and are answered by the server (`server::memory_report`).

use keyspace::{Keyspace, Value};

use crate::args::{self, is};
use crate::error::CmdError;
use crate::{help, Ctx};

/// Redis's longest string kept in one allocation with its object header.
const EMBSTR_MAX: usize = 44;

/// Redis shares one object among every value holding an integer below
/// this (unless an LRU/LFU eviction policy needs a per-key access time),
/// and reports it as referenced `SHARED_REFCOUNT` times.
const SHARED_INTEGERS: i64 = 10_000;
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// The integer a string holds when Redis would store it as one: at most
/// 20 bytes, the canonical decimal form of an i64 (no sign but a leading
/// '-', no leading zeros, no spaces).
fn as_integer(s: &[u8]) -> Option<i64> {
    if s.len() > 20 {
        return None;
    }
    let n = args::int(s).ok()?;
    (itoa::Buffer::new().format(n).as_bytes() == s).then_some(n)
}

/// What Redis would call the encoding of `value`: `int`, `embstr` or
/// `raw` for strings, `listpack` or `hashtable` for hashes (by the
/// thresholds CONFIG SET gives `hash-max-listpack-*`).
pub fn encoding(ks: &Keyspace, value: &Value) -> &'static str {
    match value {
        Value::Str(_) | Value::Counter(_) => match value.as_text() {
            Some(s) if as_integer(s).is_some() => "int",
            Some(s) if s.len() <= EMBSTR_MAX => "embstr",
            _ => "raw",
        },
        Value::Hash(h) if ks.encodings().hash_is_small(h) => "listpack",
        Value::Hash(_) => "hashtable",
        Value::Set(s) => ks.encodings().set_encoding(s),
        Value::ZSet(z) if ks.encodings().zset_is_small(z) => "listpack",
        Value::ZSet(_) => "skiplist",
        Value::List(l) if ks.encodings().list_is_small(l) => "listpack",
        Value::List(_) => "quicklist",
    }
}

/// What Redis answers to `OBJECT REFCOUNT`: every value here has one
/// owner, its key; Redis's shared small integers (0 to 9999) answer as
/// its shared objects do.
pub fn refcount(value: &Value) -> i64 {
    match value {
        Value::Str(s) if as_integer(s).is_some_and(|n| (0..SHARED_INTEGERS).contains(&n)) => {
            SHARED_REFCOUNT
        }
        _ => 1,
    }
}

fn check_arity(ok: bool, full_name: &str) -> Result<(), CmdError> {
    if ok {
        Ok(())
    } else {
        Err(CmdError::WrongArity(full_name.into()))
    }
}

fn unknown(cmd: &str, sub: &[u8]) -> CmdError {
    CmdError::UnknownSubcommand {
        cmd: cmd.into(),
        sub: String::from_utf8_lossy(sub).into(),
    }
}

const POLICY_SWITCH: &str = "Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

/// `OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key`, `OBJECT HELP`. None of
/// them counts as an access of the key.
pub fn object(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let sub = String::from_utf8_lossy(a[1]).to_ascii_lowercase();
    match sub.as_str() {
        "encoding" | "refcount" | "idletime" | "freq" => {
            check_arity(a.len() == 3, &format!("object|{sub}"))?;
            let lfu = keyspace::access::lfu();
            if sub == "idletime" && lfu {
                return Err(CmdError::other(format!(
                    "ERR An LFU maxmemory policy is selected, idle time not tracked. {POLICY_SWITCH}"
                )));
            }
            if sub == "freq" && !lfu {
                return Err(CmdError::other(format!(
                    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. {POLICY_SWITCH}"
                )));
            }
            let mut txn = ctx.ks.txn([a[2]], ctx.client_id);
            let now = txn.now_ms();
            let found = txn.peek(a[2]).map(|e| match sub.as_str() {
                "encoding" => Err(encoding(ctx.ks, &e.value)),
                "refcount" => Ok(refcount(&e.value)),
                "idletime" => Ok((keyspace::access::idle_ms(e.access, now) / 1000) as i64),
                _ => Ok(keyspace::access::decayed(e.access, now) as i64),
            });
            drop(txn);
            match found {
                None => ctx.out.null(),
                Some(Err(name)) => ctx.out.bulk(name.as_bytes()),
                Some(Ok(n)) => ctx.out.int(n),
            }
        }
        "help" => {
            check_arity(a.len() == 2, "object|help")?;
            help::reply(
                ctx.out,
                "OBJECT",
                &[
                    "ENCODING <key>",
                    "    Return the kind of internal representation used in order to store the value",
                    "    associated with a <key>.",
                    "FREQ <key>",
                    "    Return the access frequency index of the <key>. The returned integer is",
                    "    proportional to the logarithm of the recent access frequency of the key.",
                    "IDLETIME <key>",
                    "    Return the idle time of the <key>, that is the approximated number of",
                    "    seconds elapsed since the last access to the key.",
                    "REFCOUNT <key>",
                    "    Return the number of references of the value associated with the specified",
                    "    <key>.",
                ],
            );
        }
        _ => return Err(unknown("OBJECT", a[1])),
    }
    Ok(())
}

/// `MEMORY USAGE key [SAMPLES count]`: the bytes the key and its value
/// take in this node's keyspace, as [`keyspace::memory_usage::entry_usage`] estimates them; null
/// for a missing key. SAMPLES is checked as Redis checks it, and needs no
/// sampling here: a hash keeps the size of its fields as it changes.
/// `MEMORY MALLOC-STATS` answers what Redis answers when it is built
/// without jemalloc, as deltagrid is (it uses the system allocator).
pub fn memory(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let sub = String::from_utf8_lossy(a[1]).to_ascii_lowercase();
    match sub.as_str() {
        "usage" => {
            check_arity(a.len() >= 3, "memory|usage")?;
            let mut i = 3;
            while i < a.len() {
                if !(is(a[i], "SAMPLES") && i + 1 < a.len()) {
                    return Err(CmdError::Syntax);
                }
                if args::int(a[i + 1])? < 0 {
                    return Err(CmdError::Syntax);
                }
                i += 2;
            }
            let mut txn = ctx.ks.txn([a[2]], ctx.client_id);
            let usage = txn.memory_usage(a[2]);
            drop(txn);
            match usage {
                Some(bytes) => ctx.out.int(bytes as i64),
                None => ctx.out.null(),
            }
        }
        "purge" => {
            check_arity(a.len() == 2, "memory|purge")?;
            keyspace::memory::purge();
            ctx.out.simple("OK");
        }
        "malloc-stats" => {
            check_arity(a.len() == 2, "memory|malloc-stats")?;
            ctx.out
                .bulk(b"Stats not supported for the current allocator");
        }
        "help" => {
            check_arity(a.len() == 2, "memory|help")?;
            help::reply(
                ctx.out,
                "MEMORY",
                &[
                    "DOCTOR",
                    "    Return memory problems reports.",
                    "MALLOC-STATS",
                    "    Return internal statistics report from the memory allocator.",
                    "PURGE",
                    "    Attempt to purge dirty pages for reclamation by the allocator.",
                    "STATS",
                    "    Return information about the memory usage of the server.",
                    "USAGE <key> [SAMPLES <count>]",
                    "    Return memory in bytes used by <key> and its value. Nested values are",
                    "    sampled up to <count> times (default: 5, 0 means sample all).",
                ],
            );
        }
        _ => return Err(unknown("MEMORY", a[1])),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn string(s: &str) -> Value {
        Value::str(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn integers_are_the_canonical_decimal_forms_of_an_i64() {
        for s in [
            "0",
            "-1",
            "12345",
            "9223372036854775807",
            "-9223372036854775808",
        ] {
            assert!(as_integer(s.as_bytes()).is_some(), "{s}");
        }
        for s in [
            "",
            "-0",
            "+1",
            "01",
            " 1",
            "1 ",
            "1.0",
            "9223372036854775808",
            "abc",
        ] {
            assert_eq!(as_integer(s.as_bytes()), None, "{s}");
        }
    }

    #[test]
    fn refcounts_follow_redis_shared_integers() {
        assert_eq!(refcount(&string("0")), SHARED_REFCOUNT);
        assert_eq!(refcount(&string("9999")), SHARED_REFCOUNT);
        assert_eq!(refcount(&string("10000")), 1);
        assert_eq!(refcount(&string("-1")), 1);
        assert_eq!(refcount(&string("007")), 1);
        assert_eq!(refcount(&string("foo")), 1);
        assert_eq!(SHARED_REFCOUNT, 2147483647);
    }
}
