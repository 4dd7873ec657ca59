//! Numbers as Redis reads and writes them: strict integers, floats without
//! surrounding spaces, and floats printed for humans (INCRBYFLOAT replies
//! and stored values).
//!
//! Redis computes INCRBYFLOAT in 80-bit long double and prints 17 digits,
//! so 0.1 + 0.2 reads back as "0.3". We compute in f64, so we round to 15
//! significant digits before printing the shortest form: the same text for
//! the sums people actually make, and no binary noise digits.

pub use keyspace::delta::parse_i64;

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

#[cfg(test)]
mod tests {
    use super::*;

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
