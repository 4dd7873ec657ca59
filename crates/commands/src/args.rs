//! Argument parsing shared by the command families.

use bytes::Bytes;

use crate::error::CmdError;
use crate::number;

// The hot helpers below match rather than `ok_or(CmdError::..)`: that
// builds the error on the success path too and drops it there, by a call
// to `CmdError`'s drop glue (not inlined: some variants own a String),
// about 1% of an INCR's server CPU at -P 16.

pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    match number::parse_i64(arg) {
        Some(n) => Ok(n),
        None => Err(CmdError::NotInteger),
    }
}

pub fn float(arg: &[u8]) -> Result<f64, CmdError> {
    match number::parse_f64(arg) {
        Some(n) => Ok(n),
        None => Err(CmdError::NotFloat),
    }
}

/// Case-insensitive keyword comparison (`kw` is upper case).
pub fn is(arg: &[u8], kw: &str) -> bool {
    arg.eq_ignore_ascii_case(kw.as_bytes())
}

/// An owned copy of an argument, so a stored value never pins the whole
/// read buffer it was sliced from.
pub fn owned(arg: &[u8]) -> Bytes {
    Bytes::copy_from_slice(arg)
}

/// The arguments of ZMPOP and LMPOP: `numkeys key [key ...] FIRST|SECOND
/// [COUNT count]` (MIN|MAX, LEFT|RIGHT): the keys, whether SECOND was
/// given, the count.
pub fn mpop<'a, 'b>(
    a: &'a [&'b [u8]],
    first: &str,
    second: &str,
) -> Result<(&'a [&'b [u8]], bool, usize), CmdError> {
    let numkeys = int(a[0]).unwrap_or(0);
    if numkeys <= 0 {
        return Err(CmdError::other("ERR numkeys should be greater than 0"));
    }
    let rest = a.len() - 1;
    if numkeys as u64 >= rest as u64 {
        return Err(CmdError::Syntax);
    }
    let numkeys = numkeys as usize;
    let keys = &a[1..1 + numkeys];
    let mut i = 1 + numkeys;
    let max = if is(a[i], first) {
        false
    } else if is(a[i], second) {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    i += 1;
    let mut count = 1usize;
    let mut counted = false;
    while i < a.len() {
        if is(a[i], "COUNT") && i + 1 < a.len() && !counted {
            let n = int(a[i + 1]).unwrap_or(0);
            if n <= 0 {
                return Err(CmdError::other("ERR count should be greater than 0"));
            }
            count = n as usize;
            counted = true;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((keys, max, count))
}

/// Parses the options of SCAN/HSCAN: MATCH pattern, COUNT n, TYPE t.
pub struct ScanOpts {
    pub pattern: Option<Bytes>,
    pub count: usize,
    pub type_name: Option<String>,
}

pub fn scan_opts(args: &[&[u8]], allow_type: bool) -> Result<ScanOpts, CmdError> {
    let mut o = ScanOpts {
        pattern: None,
        count: 10,
        type_name: None,
    };
    let mut i = 0;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if is(args[i], "MATCH") && has_value {
            o.pattern = Some(Bytes::copy_from_slice(args[i + 1])).filter(|p| &p[..] != b"*");
        } else if is(args[i], "COUNT") && has_value {
            let n = int(args[i + 1])?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = n as usize;
        } else if allow_type && is(args[i], "TYPE") && has_value {
            o.type_name = Some(String::from_utf8_lossy(args[i + 1]).to_ascii_lowercase());
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

pub fn cursor(arg: &[u8]) -> Result<u64, CmdError> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or(CmdError::InvalidCursor)
}

/// Relative expiry (seconds or ms) or absolute (unix s or ms) to absolute ms.
/// `None` when it overflows.
pub fn expire_at_ms(now_ms: u64, n: i64, unit_ms: i64, absolute: bool) -> Option<i64> {
    let ms = n.checked_mul(unit_ms)?;
    if absolute {
        Some(ms)
    } else {
        ms.checked_add(now_ms as i64)
    }
}
