//! What blocking commands (BZPOPMIN, BZPOPMAX, BZMPOP; later BLPOP and
//! the other list forms) share: the timeout argument, and how a command
//! that found nothing to take either waits or answers at once. The waiting
//! itself is the server's (its `blocking` module): a command only says
//! which keys it waits for ([`crate::Wait`]).

use crate::error::CmdError;
use crate::{args, BlockMode, Ctx, Wait};

/// A blocking command's timeout in seconds (a float) as milliseconds, 0
/// for ever, with Redis 7.0's errors: its `(long long)(seconds * 1000)` of
/// a value past the range of a long long is negative on x86, hence
/// "timeout is negative" for `1e100` or `inf`; a fraction under a
/// millisecond is 0 and waits for ever, as there.
pub fn timeout_ms(arg: &[u8]) -> Result<u64, CmdError> {
    let secs = crate::number::parse_f64(arg)
        .ok_or_else(|| CmdError::other("ERR timeout is not a float or out of range"))?;
    let ms = secs * 1000.0;
    // i64::MIN: what x86's conversion gives for what does not fit.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let ms = if (-TWO_63..TWO_63).contains(&ms) {
        ms as i64
    } else {
        i64::MIN
    };
    if ms < 0 {
        return Err(CmdError::other("ERR timeout is negative"));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    if ms > i64::MAX - now {
        return Err(CmdError::other("ERR timeout is out of range"));
    }
    Ok(ms as u64)
}

/// What a pop from the first non-empty key took: the key and its items.
pub type Popped<'k, T> = (&'k [u8], Vec<T>);

/// Pops with `pop` from the first key of `keys` it takes anything from,
/// under one lock of their partitions. A key of another type is
/// WRONGTYPE, or passed over when `skip_others` (a blocked client served
/// again: Redis 7.0 serves it only from a key of the type it waits for).
pub fn pop_first<'k, T>(
    ctx: &mut Ctx,
    keys: &[&'k [u8]],
    skip_others: bool,
    mut pop: impl FnMut(&mut keyspace::Txn, &[u8]) -> Result<Vec<T>, CmdError>,
) -> Result<Option<Popped<'k, T>>, CmdError> {
    let mut txn = ctx.ks.txn(keys.iter().copied(), ctx.client_id);
    for key in keys {
        let items = match pop(&mut txn, key) {
            Err(CmdError::WrongType) if skip_others => continue,
            r => r?,
        };
        if !items.is_empty() {
            return Ok(Some((key, items)));
        }
    }
    Ok(None)
}

/// Nothing to take from `keys`: outside MULTI the command waits for them
/// (see [`Ctx::wait`]); inside it answers as on a timeout (a null array).
pub fn wait_or_null(ctx: &mut Ctx, keys: &[&[u8]], timeout_ms: u64) {
    if ctx.blocking == BlockMode::Deny {
        ctx.out.null_array();
        return;
    }
    let mut unique: Vec<bytes::Bytes> = Vec::with_capacity(keys.len());
    for k in keys {
        if !unique.iter().any(|u| u[..] == **k) {
            unique.push(args::owned(k));
        }
    }
    ctx.wait = Some(Wait {
        keys: unique,
        timeout_ms,
    });
}

#[cfg(test)]
mod tests {
    use super::timeout_ms;

    #[test]
    fn timeouts_parse_as_redis_does() {
        assert_eq!(timeout_ms(b"0"), Ok(0));
        assert_eq!(timeout_ms(b"0.5"), Ok(500));
        assert_eq!(timeout_ms(b"0.0001"), Ok(0));
        assert_eq!(timeout_ms(b"2"), Ok(2000));
        let negative = Err(crate::CmdError::other("ERR timeout is negative"));
        assert_eq!(timeout_ms(b"-1"), negative);
        assert_eq!(timeout_ms(b"1e100"), negative);
        assert_eq!(timeout_ms(b"inf"), negative);
        let not_float = Err(crate::CmdError::other(
            "ERR timeout is not a float or out of range",
        ));
        assert_eq!(timeout_ms(b"abc"), not_float);
        assert_eq!(timeout_ms(b"nan"), not_float);
    }
}
