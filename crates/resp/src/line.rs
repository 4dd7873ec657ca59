//! Header-line lexing shared by both decoders: where a CRLF-terminated line
//! ends, and the decimal integer written on it.
//!
//! Invariants:
//! - A search for CR never looks past `max + 1` bytes, so a peer that never
//!   sends CR costs a bounded scan per call, however much it has sent.
//! - Integers follow Redis's `string2ll`: optional `-`, no `+`, no leading
//!   zeros, no `-0`, overflow refused. A length we accept is one Redis
//!   accepts, and the text of a number has exactly one accepted spelling.

/// How the line starting at some offset ends.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineEnd {
    /// The line's content ends at this index (its CR); the next item starts
    /// two bytes later.
    Crlf(usize),
    /// No complete line yet, and not too long yet: wait for more bytes.
    Incomplete,
    /// More than `max` bytes without a CR.
    TooLong,
    /// A CR followed by something other than LF.
    BareCr,
}

/// Find the CRLF ending the line that starts at `start` (`start <= buf.len()`),
/// allowing at most `max` content bytes.
pub(crate) fn find_crlf(buf: &[u8], start: usize, max: usize) -> LineEnd {
    let rest = &buf[start..];
    let window = &rest[..rest.len().min(max.saturating_add(1))];
    match window.iter().position(|&b| b == b'\r') {
        Some(cr) => match rest.get(cr + 1) {
            Some(b'\n') => LineEnd::Crlf(start + cr),
            Some(_) => LineEnd::BareCr,
            None => LineEnd::Incomplete,
        },
        None if rest.len() > max => LineEnd::TooLong,
        None => LineEnd::Incomplete,
    }
}

/// Parse a decimal integer the way Redis's `string2ll` does.
pub(crate) fn parse_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    match digits {
        [] => return None,
        [b'0'] if !negative => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    // Accumulate downwards so that i64::MIN, which has no positive
    // counterpart, parses too.
    let mut n: i64 = 0;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_sub(i64::from(digit))?;
    }
    if negative {
        Some(n)
    } else {
        n.checked_neg()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn finds_crlf_and_reports_why_not() {
        assert_eq!(find_crlf(b"$3\r\nfoo", 1, 10), LineEnd::Crlf(2));
        assert_eq!(find_crlf(b"$3\r", 1, 10), LineEnd::Incomplete);
        assert_eq!(find_crlf(b"$3", 1, 10), LineEnd::Incomplete);
        assert_eq!(find_crlf(b"$3\rx", 1, 10), LineEnd::BareCr);
        // Exactly `max` content bytes is allowed, one more is not.
        assert_eq!(find_crlf(b"$123\r\n", 1, 3), LineEnd::Crlf(4));
        assert_eq!(find_crlf(b"$1234", 1, 3), LineEnd::TooLong);
        assert_eq!(find_crlf(b"$123", 1, 3), LineEnd::Incomplete);
        assert_eq!(find_crlf(b"$1234\r\n", 1, 3), LineEnd::TooLong);
    }

    #[test]
    fn parses_like_string2ll() {
        for (text, want) in [
            (&b"0"[..], Some(0)),
            (b"7", Some(7)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-9223372036854775809", None),
            (b"", None),
            (b"-", None),
            (b"-0", None),
            (b"007", None),
            (b"+7", None),
            (b" 7", None),
            (b"7 ", None),
            (b"1a", None),
        ] {
            assert_eq!(parse_i64(text), want, "{:?}", String::from_utf8_lossy(text));
        }
    }

    proptest! {
        #[test]
        fn every_i64_round_trips(n: i64) {
            prop_assert_eq!(parse_i64(n.to_string().as_bytes()), Some(n));
        }

        #[test]
        fn never_panics_on_arbitrary_text(text in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Some(n) = parse_i64(&text) {
                // Only the canonical spelling is accepted.
                let canonical = n.to_string();
                prop_assert_eq!(canonical.as_bytes(), &text[..]);
            }
        }
    }
}
