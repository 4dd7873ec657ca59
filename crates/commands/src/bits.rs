//! SETBIT and GETBIT on strings, as Redis: bit 0 is the most significant
//! bit of the first byte; a SETBIT past the end grows the string with zero
//! bytes. A SETBIT 1 that sets a bit is a `Write::Bits`: where sites merge
//! it is logged as a raise of the string's assignment (`DeltaOp::BitsOr`),
//! so concurrent SETBIT 1s at several sites merge by OR; elsewhere, and
//! for SETBIT 0 (an assignment: the last writer of the key wins), it is a
//! one-byte splice of the string. A SETBIT that changes nothing (the
//! bit already so, the string long enough) writes nothing, as in Redis:
//! no change logged, no event (the write is `keyspace::bits::setbit_write`,
//! which the keyspace's convergence property also uses). The offset error
//! is shared with BITFIELD.

use bytes::Bytes;

use crate::{args, CmdError, Ctx, MAX_STRING};

/// Redis's limit on a bit offset (512 MiB of string).
const MAX_BIT_OFFSET: i64 = (MAX_STRING as i64) * 8 - 1;

pub(crate) fn offset_error() -> CmdError {
    CmdError::other("ERR bit offset is not an integer or out of range")
}

fn bit_offset(arg: &[u8]) -> Result<usize, CmdError> {
    match args::int(arg) {
        Ok(o) if (0..=MAX_BIT_OFFSET).contains(&o) => Ok(o as usize),
        _ => Err(offset_error()),
    }
}

/// The string at `key`: empty when missing, WRONGTYPE for another type.
fn current(txn: &mut keyspace::Txn, key: &[u8]) -> Result<Bytes, CmdError> {
    match txn.get(key) {
        None => Ok(Bytes::new()),
        Some(e) => e.str_bytes().ok_or(CmdError::WrongType),
    }
}

fn bit_at(s: &[u8], offset: usize) -> i64 {
    s.get(offset / 8)
        .map_or(0, |b| ((b >> (7 - offset % 8)) & 1) as i64)
}

pub fn setbit(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let offset = bit_offset(a[2])?;
    let on = match a[3] {
        b"1" => true,
        b"0" => false,
        _ => return Err(CmdError::other("ERR bit is not an integer or out of range")),
    };
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let s = current(&mut txn, a[1])?;
    let old = bit_at(&s, offset);
    // A bit set from 0 is a raise where sites merge (see `Write::Bits`).
    if let Some(w) = keyspace::bits::setbit_write(&s, offset, on) {
        txn.write(a[1], w)?;
    }
    drop(txn);
    ctx.out.int(old);
    Ok(())
}

pub fn getbit(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let offset = bit_offset(a[2])?;
    let mut txn = ctx.ks.txn([a[1]], ctx.client_id);
    let s = current(&mut txn, a[1])?;
    drop(txn);
    ctx.out.int(bit_at(&s, offset));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::bit_at;

    #[test]
    fn bit_zero_is_the_first_bytes_most_significant() {
        assert_eq!(bit_at(b"\x80", 0), 1);
        assert_eq!(bit_at(b"\x80", 1), 0);
        assert_eq!(bit_at(b"\x01", 7), 1);
        assert_eq!(bit_at(b"\x01", 8), 0);
    }
}
