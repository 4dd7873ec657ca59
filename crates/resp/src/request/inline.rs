//! Inline commands: a request typed as one line (`PING\r\n`, `set k "a b"\n`),
//! as telnet users and some old clients send them.
//!
//! Splitting follows Redis's `sdssplitargs` byte for byte, quirks included,
//! so a line means here what it means to Redis:
//! - blanks are C `isspace` (space, `\t`, `\n`, `\v`, `\f`, `\r`);
//! - `"..."` understands `\xHH` and `\n \r \t \b \a`, any other escaped byte
//!   stands for itself; `'...'` understands only `\'`;
//! - a quote may open mid-token (`a"b c"` is `ab c`), but a closing quote
//!   must be followed by a blank or the end of the line;
//! - a NUL byte ends the line (Redis splits a C string).
//!
//! Invariants: the line, including its line ending, is at most
//! `max_inline_len` bytes, and the search for its end never looks further;
//! `Ok(None)` and `Err` consume nothing. Unquoted arguments are slices of the
//! request's bytes; only quoted ones, which escapes may have changed, are
//! copied. Inline commands are rare, so the line is split twice (validate,
//! then build) to keep "errors consume nothing" without a token list.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::{Limits, ProtocolError};

pub(super) fn decode_inline(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let window = &buf[..buf.len().min(limits.max_inline_len.saturating_add(1))];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() > limits.max_inline_len {
            Err(ProtocolError::TooBigInlineRequest)
        } else {
            Ok(None)
        };
    };
    // Both "\r\n" and a bare "\n" end a line: the CR is left in, the
    // splitter takes it for a blank like any other.
    split_args(&buf[..lf], |_| {})?;

    let request = buf.split_to(lf + 1).freeze();
    let mut args = Vec::new();
    split_args(&request[..lf], |token| {
        args.push(match token {
            Token::Raw(range) => request.slice(range),
            Token::Unescaped(bytes) => Bytes::copy_from_slice(bytes),
        });
    })?;
    Ok(Some(args))
}

/// One argument found by [`split_args`].
enum Token<'a> {
    /// Verbatim bytes of the line.
    Raw(Range<usize>),
    /// Rebuilt from a quoted section (and any unquoted prefix).
    Unescaped(&'a [u8]),
}

fn split_args(line: &[u8], mut emit: impl FnMut(Token<'_>)) -> Result<(), ProtocolError> {
    let line = &line[..line.iter().position(|&b| b == 0).unwrap_or(line.len())];
    // Reading past the end yields NUL, as in the C original; it keeps the
    // look-ahead below free of bounds checks.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut scratch = Vec::new();
    let mut p = 0;
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p == line.len() {
            return Ok(());
        }
        let start = p;
        // The quote character once a quoted section has opened. A token has
        // at most one: a closing quote ends the token.
        let mut quote = None;
        scratch.clear();
        loop {
            let c = at(p);
            match quote {
                None => match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' | b'\'' => {
                        scratch.extend_from_slice(&line[start..p]);
                        quote = Some(c);
                    }
                    _ => {}
                },
                Some(b'"') => {
                    if c == b'\\' && at(p + 1) == b'x' && is_hex(at(p + 2)) && is_hex(at(p + 3)) {
                        scratch.push(hex(at(p + 2)) << 4 | hex(at(p + 3)));
                        p += 3;
                    } else if c == b'\\' && at(p + 1) != 0 {
                        p += 1;
                        scratch.push(match at(p) {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                    } else if c == b'"' {
                        closing_quote_ends_token(at(p + 1))?;
                        p += 1;
                        break;
                    } else if c == 0 {
                        return Err(ProtocolError::UnbalancedQuotes);
                    } else {
                        scratch.push(c);
                    }
                }
                Some(_) => {
                    if c == b'\\' && at(p + 1) == b'\'' {
                        p += 1;
                        scratch.push(b'\'');
                    } else if c == b'\'' {
                        closing_quote_ends_token(at(p + 1))?;
                        p += 1;
                        break;
                    } else if c == 0 {
                        return Err(ProtocolError::UnbalancedQuotes);
                    } else {
                        scratch.push(c);
                    }
                }
            }
            p += 1;
        }
        emit(match quote {
            None => Token::Raw(start..p),
            Some(_) => Token::Unescaped(&scratch),
        });
    }
}

fn closing_quote_ends_token(next: u8) -> Result<(), ProtocolError> {
    if next == 0 || is_space(next) {
        Ok(())
    } else {
        Err(ProtocolError::UnbalancedQuotes)
    }
}

/// C's `isspace` in the "C" locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

fn hex(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode_request;
    use proptest::prelude::*;

    fn decode_with(
        bytes: &[u8],
        limits: &Limits,
    ) -> (Result<Option<Vec<Bytes>>, ProtocolError>, usize) {
        let mut buf = BytesMut::from(bytes);
        let result = decode_request(&mut buf, limits);
        (result, buf.len())
    }

    fn decode(bytes: &[u8]) -> (Result<Option<Vec<Bytes>>, ProtocolError>, usize) {
        decode_with(bytes, &Limits::default())
    }

    fn split(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
        let mut out = Vec::new();
        split_args(line, |token| {
            out.push(match token {
                Token::Raw(range) => line[range].to_vec(),
                Token::Unescaped(bytes) => bytes.to_vec(),
            })
        })?;
        Ok(out)
    }

    fn strs(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    /// Quote every argument the way redis-cli would need it.
    fn quoted_line(args: &[Vec<u8>]) -> Vec<u8> {
        let mut line = Vec::new();
        for arg in args {
            line.push(b'"');
            for &b in arg {
                match b {
                    b'"' | b'\\' => line.extend([b'\\', b]),
                    b' '..=b'~' => line.push(b),
                    _ => line.extend(format!("\\x{b:02x}").bytes()),
                }
            }
            line.extend(b"\" ");
        }
        line.extend(b"\r\n");
        line
    }

    #[test]
    fn crlf_and_lf_lines() {
        assert_eq!(
            decode(b"PING\r\n"),
            (Ok(Some(vec![Bytes::from("PING")])), 0)
        );
        assert_eq!(
            decode(b"PING\nPING\n"),
            (Ok(Some(vec![Bytes::from("PING")])), 5)
        );
        assert_eq!(
            decode(b"  set  k\tv \r\nrest"),
            (
                Ok(Some(vec![
                    Bytes::from("set"),
                    Bytes::from("k"),
                    Bytes::from("v")
                ])),
                4
            )
        );
        assert_eq!(decode(b"PING"), (Ok(None), 4));
        assert_eq!(decode(b"PING\r"), (Ok(None), 5));
    }

    #[test]
    fn empty_lines_are_empty_requests() {
        for input in [&b"\r\n"[..], b"\n", b"   \t \r\n"] {
            assert_eq!(decode(input), (Ok(Some(vec![])), 0));
        }
    }

    #[test]
    fn unquoted_args_are_slices_of_the_read_buffer() {
        let mut buf = BytesMut::from(&b"GET key\r\n"[..]);
        let base = buf.as_ptr() as usize;
        let got = decode_request(&mut buf, &Limits::default())
            .unwrap()
            .unwrap();
        assert_eq!(got[1].as_ptr() as usize, base + 4);
    }

    #[test]
    fn quotes_and_escapes_like_sdssplitargs() {
        assert_eq!(split(br#"set k "a b""#), Ok(strs(&["set", "k", "a b"])));
        assert_eq!(
            split(br#""\x41\x7a\x4""#),
            Ok(vec![b"Azx4".to_vec()]),
            "a broken \\x escapes the x"
        );
        assert_eq!(
            split(br#""\n\r\t\b\a\q\"\\""#),
            Ok(vec![b"\n\r\t\x08\x07q\"\\".to_vec()])
        );
        assert_eq!(split(br"'it\'s' 'a\nb'"), Ok(strs(&["it's", "a\\nb"])));
        assert_eq!(split(br#"a"b c"d"#), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(split(br#"a"b c" d"#), Ok(strs(&["ab c", "d"])));
        assert_eq!(split(br#""" ''"#), Ok(strs(&["", ""])));
        assert_eq!(
            split(b"a\x0bb"),
            Ok(strs(&["a\x0bb"])),
            "\\v only separates before a token"
        );
        assert_eq!(split(b"a\0b c"), Ok(strs(&["a"])), "NUL ends the line");
        assert_eq!(split(b"\"abc"), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(split(b"'abc"), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(split(b"\"abc\\"), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(split(b"'a'b"), Err(ProtocolError::UnbalancedQuotes));
    }

    #[test]
    fn unbalanced_quotes_consume_nothing() {
        assert_eq!(
            decode(b"set k \"v\r\n"),
            (Err(ProtocolError::UnbalancedQuotes), 10)
        );
    }

    #[test]
    fn inline_length_is_bounded() {
        let limits = Limits {
            max_inline_len: 8,
            ..Limits::default()
        };
        assert_eq!(decode_with(b"12345678", &limits), (Ok(None), 8));
        assert_eq!(
            decode_with(b"1234567\n", &limits).0,
            Ok(Some(vec![Bytes::from("1234567")]))
        );
        assert_eq!(
            decode_with(b"123456789", &limits),
            (Err(ProtocolError::TooBigInlineRequest), 9)
        );
        // Stricter than Redis, which accepts a long line if its LF is
        // already buffered: the scan for LF stops at the limit.
        assert_eq!(
            decode_with(b"123456789\n", &limits).0,
            Err(ProtocolError::TooBigInlineRequest)
        );
        assert_eq!(
            ProtocolError::TooBigInlineRequest.to_string(),
            "Protocol error: too big inline request"
        );
    }

    proptest! {
        #[test]
        fn quoted_args_round_trip(args in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..10), 0..6)) {
            let line = quoted_line(&args);
            let (got, left) = decode(&line);
            let got: Vec<Vec<u8>> = got.unwrap().unwrap().iter().map(|b| b.to_vec()).collect();
            prop_assert_eq!(got, args);
            prop_assert_eq!(left, 0);
        }

        #[test]
        fn plain_words_round_trip(words in prop::collection::vec("[!#-&(-~]{1,8}", 0..6), sep in "[ \t]{1,3}") {
            let mut line = words.join(&sep).into_bytes();
            line.push(b'\n');
            prop_assume!(line[0] != b'*', "a leading '*' makes it an array request");
            let got = decode(&line).0.unwrap().unwrap();
            prop_assert_eq!(got, words.iter().map(|w| Bytes::from(w.clone())).collect::<Vec<_>>());
        }
    }
}
