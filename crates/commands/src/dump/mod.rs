//! DUMP, RESTORE and RESTORE-ASKING, as Redis 7 does them: a value is
//! serialized in Redis's RDB format ([`rdb`]), so payloads move both ways
//! between deltagrid and real Redis (7.0 writes RDB 10; 7.2's RDB 11 is read
//! too).
//!
//! RESTORE decodes the payload before it takes the key's lock and writes the
//! value through `Txn::write` as one `Write::Set`, like COPY: every element of
//! a restored collection gets the write's version. A TTL already in the past
//! creates nothing (and with REPLACE deletes what the key held), as in Redis.
//! IDLETIME and FREQ are checked as Redis checks them and set the key's
//! idle time (an LRU policy in force) or access counter (an LFU one), as
//! Redis sets them (`keyspace::access::restored`).

mod crc64;
mod intset;
mod listpack;
mod lzf;
pub mod rdb;
mod ziplist;

use keyspace::Write;

use crate::args::{self, is};
use crate::error::CmdError;
use crate::Ctx;

use rdb::LoadError;

/// `DUMP key`: the value's payload, or null for a missing key.
pub fn dump(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let payload = txn.get(a[1]).map(|e| rdb::dump(&e.value));
    drop(txn);
    match payload {
        Some(p) => ctx.out.bulk(&p),
        None => ctx.out.null(),
    }
    Ok(())
}

/// RESTORE's options after the payload.
#[derive(Debug, Default, PartialEq)]
struct Options {
    replace: bool,
    absttl: bool,
    idle: Option<i64>,
    freq: Option<i64>,
}

/// Redis's option loop: IDLETIME and FREQ exclude each other (the second
/// is a syntax error), each checked as it is met.
fn options(a: &[&[u8]]) -> Result<Options, CmdError> {
    let mut o = Options::default();
    let mut i = 0;
    while i < a.len() {
        let has_arg = i + 1 < a.len();
        if is(a[i], "REPLACE") {
            o.replace = true;
        } else if is(a[i], "ABSTTL") {
            o.absttl = true;
        } else if is(a[i], "IDLETIME") && has_arg && o.freq.is_none() {
            let idle = args::int(a[i + 1])?;
            if idle < 0 {
                return Err(CmdError::InvalidIdleTime);
            }
            o.idle = Some(idle);
            i += 1;
        } else if is(a[i], "FREQ") && has_arg && o.idle.is_none() {
            let freq = args::int(a[i + 1])?;
            if !(0..=255).contains(&freq) {
                return Err(CmdError::InvalidFreq);
            }
            o.freq = Some(freq);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds]
/// [FREQ frequency]` (and RESTORE-ASKING, the same). Errors come in Redis's
/// order: options, BUSYKEY, the TTL, the footer, the object.
pub fn restore(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let key = a[1];
    let opts = options(&a[4..])?;
    if !opts.replace && ctx.ks.txn([key], ctx.client_id).exists(key) {
        return Err(CmdError::BusyKey);
    }
    let ttl = args::int(a[2])?;
    if ttl < 0 {
        return Err(CmdError::InvalidTtl);
    }
    let value = rdb::restore(a[3]).map_err(|e| match e {
        LoadError::Footer => CmdError::DumpPayload,
        LoadError::Malformed => CmdError::BadDataFormat,
    })?;
    let mut txn = ctx.ks.txn([key], ctx.client_id);
    let exists = txn.exists(key);
    // Created meanwhile by another client: the same answer as above.
    if exists && !opts.replace {
        return Err(CmdError::BusyKey);
    }
    let now = txn.now_ms();
    // A relative TTL that overflows wraps into the past in Redis (the key
    // is not created), and so it does here.
    let expire_at = match ttl {
        0 => 0,
        t if opts.absttl => t as u64,
        t => (now as i64).checked_add(t).map_or(1, |at| at as u64),
    };
    if expire_at != 0 && expire_at <= now {
        if exists {
            txn.write(key, Write::Delete)?;
        }
    } else {
        txn.write(key, Write::Set { value, expire_at })?;
        if let Some(access) = keyspace::access::restored(opts.idle, opts.freq, now) {
            txn.set_access(key, access);
        }
    }
    drop(txn);
    ctx.out.simple("OK");
    Ok(())
}

#[cfg(test)]
mod tests;
