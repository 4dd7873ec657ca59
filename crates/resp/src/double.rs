//! The textual forms of doubles in replies.
//!
//! Two forms, as in Redis:
//! - [`format_human_double`], for INCRBYFLOAT/HINCRBYFLOAT, whose result is
//!   also stored as the key's new value: fixed notation, never an exponent
//!   (Redis: `%.17Lf`, trailing zeros trimmed). Redis computes in `long
//!   double`, where 17 fixed digits read back as what the user typed; we
//!   compute in `f64`, where they would show binary noise (0.1 would print as
//!   0.10000000000000001), so we print the shortest digits that read back as
//!   the same `f64`, which is the outcome Redis aims for.
//! - [`resp_double`], for double replies (RESP3 `,`, RESP2 bulk): `%g`
//!   layout (an exponent when the decimal exponent is below -4 or at least
//!   17) with the shortest round-trip digits. Redis 7.0 printed `%.17g`
//!   ("3.1400000000000001"); newer versions print the shortest form, as here.
//!
//! Invariants: every finite output parses back (`str::parse::<f64>`) to the
//! value formatted; non-finite values are "inf", "-inf" and "nan";
//! [`resp_double`] never allocates.

use std::fmt::{self, Write};

/// Format a double the way Redis does for INCRBYFLOAT/HINCRBYFLOAT replies:
/// "10.5", "3", "5000" (for 5e3), never an exponent, "0" for negative zero.
pub fn format_human_double(f: f64) -> String {
    if let Some(text) = non_finite(f) {
        return text.to_owned();
    }
    if f == 0.0 {
        // Redis turns "-0" into "0".
        return "0".to_owned();
    }
    // `Display` for f64 is fixed notation with the shortest round-trip digits.
    f.to_string()
}

/// Text of a double reply, in a stack buffer.
pub(crate) fn resp_double(f: f64) -> DoubleText {
    let mut text = DoubleText {
        bytes: [0; DoubleText::CAPACITY],
        len: 0,
    };
    // Cannot fail: the longest output is a sign, 17 digits, a point and a
    // 5-character exponent ("-1.2345678901234567e-308"), or in fixed notation
    // a sign, "0.0000" and 17 digits: well under CAPACITY.
    let written = write_resp_double(&mut text, f);
    debug_assert!(written.is_ok());
    text
}

fn write_resp_double(out: &mut DoubleText, f: f64) -> fmt::Result {
    if let Some(text) = non_finite(f) {
        return out.write_str(text);
    }
    // `{:e}` gives the shortest round-trip digits as "d.ddde<exp>".
    let mut sci = DoubleText {
        bytes: [0; DoubleText::CAPACITY],
        len: 0,
    };
    write!(sci, "{f:e}")?;
    let sci = sci.as_str();
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..17).contains(&exponent) {
        write!(out, "{f}")
    } else {
        // C's layout: explicit sign and at least two exponent digits.
        let sign = if exponent < 0 { '-' } else { '+' };
        write!(out, "{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    }
}

fn non_finite(f: f64) -> Option<&'static str> {
    if f.is_nan() {
        Some("nan")
    } else if f.is_infinite() {
        Some(if f > 0.0 { "inf" } else { "-inf" })
    } else {
        None
    }
}

/// A small fixed buffer that `write!` can target, so formatting a double
/// reply allocates nothing.
pub(crate) struct DoubleText {
    bytes: [u8; DoubleText::CAPACITY],
    len: usize,
}

impl DoubleText {
    const CAPACITY: usize = 48;

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn as_str(&self) -> &str {
        // Only `write_str` fills the buffer, and only with whole `&str`s.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
}

impl Write for DoubleText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn resp(f: f64) -> String {
        String::from_utf8(resp_double(f).as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn human_form_matches_redis_examples() {
        assert_eq!(format_human_double(10.5), "10.5");
        assert_eq!(format_human_double(3.0), "3");
        assert_eq!(format_human_double(5.0e3), "5000");
        assert_eq!(format_human_double(-0.0), "0");
        assert_eq!(format_human_double(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_human_double(0.1), "0.1");
        assert_eq!(format_human_double(1e20), "100000000000000000000");
        assert_eq!(format_human_double(f64::INFINITY), "inf");
        assert_eq!(format_human_double(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_human_double(f64::NAN), "nan");
    }

    #[test]
    fn reply_form_uses_g_layout() {
        assert_eq!(resp(3.25), "3.25");
        assert_eq!(
            resp(0.1),
            "0.1",
            "shortest digits, not %.17g's 0.10000000000000001"
        );
        assert_eq!(resp(3.0), "3");
        assert_eq!(resp(-2.5), "-2.5");
        assert_eq!(resp(0.0001), "0.0001");
        assert_eq!(resp(0.00001), "1e-05");
        assert_eq!(resp(1e16), "10000000000000000");
        assert_eq!(resp(1e17), "1e+17");
        assert_eq!(resp(1.5e300), "1.5e+300");
        assert_eq!(resp(-f64::MIN_POSITIVE), "-2.2250738585072014e-308");
        assert_eq!(resp(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(resp(f64::INFINITY), "inf");
        assert_eq!(resp(f64::NEG_INFINITY), "-inf");
        assert_eq!(resp(f64::NAN), "nan");
    }

    proptest! {
        #[test]
        fn both_forms_round_trip(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
            prop_assert_eq!(resp(f).parse::<f64>().unwrap(), f);
            prop_assert_eq!(format_human_double(f).parse::<f64>().unwrap(), f);
            prop_assert!(!format_human_double(f).contains('e'));
            prop_assert!(resp(f).len() <= 24);
        }
    }
}
