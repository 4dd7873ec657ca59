//! Numbers as Redis reads and writes them: floats without surrounding
//! spaces, and floats printed for humans (INCRBYFLOAT replies and stored
//! values). Here, not in `commands`, because float counters render their
//! value from per-site totals (see [`crate::value::CounterValue`]).
//!
//! Redis computes INCRBYFLOAT in 80-bit long double and prints 17 digits
//! after the point (trailing zeros dropped), so 0.1 + 0.2 reads back as
//! "0.3" and x + 1e-10 - 1e-10 as x. We add the two decimal texts exactly
//! ([`float_sum`], in 96-bit decimal) and round to 17 digits after the
//! point as Redis prints; numbers past that range are added in f64 and
//! rounded to 15 significant digits ([`format_f64`]), which prints no
//! binary noise digits.

use rust_decimal::Decimal;

/// The text INCRBYFLOAT/HINCRBYFLOAT store for `current + by` (both
/// already checked by [`parse_f64`]); `fallback` is their f64 sum, used
/// when either is out of the decimal range.
pub fn float_sum(current: &[u8], by: &[u8], fallback: f64) -> String {
    match (decimal(current), decimal(by)) {
        (Some(a), Some(b)) => match a.checked_add(b) {
            Some(sum) => {
                let sum = sum.round_dp(17).normalize();
                if sum.is_zero() {
                    "0".into()
                } else {
                    sum.to_string()
                }
            }
            None => format_f64(fallback),
        },
        _ => format_f64(fallback),
    }
}

fn decimal(b: &[u8]) -> Option<Decimal> {
    let s = std::str::from_utf8(b).ok()?;
    if s.contains(['e', 'E']) {
        Decimal::from_scientific(s).ok()
    } else {
        Decimal::from_str_exact(s).ok()
    }
}

pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty()
        || s.len() > 5000
        || s.starts_with(char::is_whitespace)
        || s.ends_with(char::is_whitespace)
    {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v: f64 = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ if lower.contains("nan") || lower.contains("inf") => return None,
        _ => s.parse().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

pub fn format_f64(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let rounded: f64 = format!("{v:.14e}").parse().unwrap_or(v);
    let s = format!("{rounded}");
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// [`float_sum`] of two texts that each parse as a float ([`parse_f64`];
/// one that does not counts as 0): the same text at every site. Never
/// NaN (infinities of opposite signs add to 0), so the text always reads
/// back as a float.
pub fn add_texts(a: &[u8], b: &[u8]) -> bytes::Bytes {
    let fallback = parse_f64(a).unwrap_or(0.0) + parse_f64(b).unwrap_or(0.0);
    let fallback = if fallback.is_nan() { 0.0 } else { fallback };
    bytes::Bytes::from(float_sum(a, b, fallback))
}

/// The text of `-x` for a float text `x`.
pub fn negate_text(x: &[u8]) -> bytes::Bytes {
    match x.strip_prefix(b"-") {
        Some(rest) => bytes::Bytes::copy_from_slice(rest),
        None => {
            let mut v = Vec::with_capacity(x.len() + 1);
            v.push(b'-');
            v.extend_from_slice(x);
            bytes::Bytes::from(v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn prints_like_redis() {
        assert_eq!(format_f64(0.1 + 0.2), "0.3");
        assert_eq!(format_f64(10.5 + 0.1), "10.6");
        assert_eq!(format_f64(5.0e3 + 200.0), "5200");
        assert_eq!(format_f64(3.0), "3");
        assert_eq!(format_f64(-0.0), "0");
        assert_eq!(format_f64(1e20), "100000000000000000000");
    }

    #[test]
    fn float_sums_print_like_redis() {
        let sum = |a: &str, b: &str| {
            float_sum(
                a.as_bytes(),
                b.as_bytes(),
                parse_f64(a.as_bytes()).unwrap() + parse_f64(b.as_bytes()).unwrap(),
            )
        };
        assert_eq!(sum("0.1", "0.2"), "0.3");
        assert_eq!(sum("3", "1e-10"), "3.0000000001");
        assert_eq!(sum("3.0000000001", "-1e-10"), "3");
        assert_eq!(sum("0.02439024390243902", "-0.024390243902439025"), "0");
        assert_eq!(sum("17179869184", "1.5"), "17179869185.5");
        assert_eq!(sum("1.23", "0.77"), "2");
        assert_eq!(sum("5.0e3", "200"), "5200");
        assert_eq!(sum("0", "1e-20"), "0");
        assert_eq!(sum("1e30", "1"), format_f64(1e30));
    }

    #[test]
    fn added_texts_read_back_as_floats() {
        assert_eq!(add_texts(b"0.1", b"0.2"), Bytes::from_static(b"0.3"));
        assert_eq!(add_texts(b"10", b"-0.5"), Bytes::from_static(b"9.5"));
        assert_eq!(add_texts(b"inf", b"-inf"), Bytes::from_static(b"0"));
        assert_eq!(add_texts(b"inf", b"1"), Bytes::from_static(b"inf"));
        assert_eq!(negate_text(b"-2.5"), Bytes::from_static(b"2.5"));
        assert_eq!(
            add_texts(b"7", &negate_text(b"7")),
            Bytes::from_static(b"0")
        );
    }

    #[test]
    fn parses_like_redis() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"5.0e3"), Some(5000.0));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b"abc"), None);
        assert_eq!(parse_f64(b""), None);
    }
}
