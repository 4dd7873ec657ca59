//! Decoded replies, for code acting as a client: the latency benchmark,
//! protocol tests, tools. The server itself never builds a [`Frame`]; it
//! writes replies with [`ReplyWriter`](crate::ReplyWriter).
//!
//! Invariants, the same discipline as the request decoder:
//! - `Ok(None)` and `Err` leave the buffer untouched; `Ok(Some)` consumes
//!   exactly one reply.
//! - Lengths and counts are checked against [`Limits`] as soon as their
//!   header line is complete, and nesting deeper than [`MAX_REPLY_DEPTH`] is
//!   refused, which also bounds the decoder's recursion.
//! - Decoding walks the reply twice with the same code. The first walk
//!   validates and finds the end without allocating anything, so retrying an
//!   incomplete reply costs a header scan and no allocation. The second walk,
//!   over the frozen reply, builds the tree with bulk payloads sliced out of
//!   it (no copy). Its preallocations are bounded by bytes in hand: every
//!   element of a complete reply takes at least 3 bytes.
//! - RESP3 attributes (`|`) are validated and dropped; nothing here needs
//!   them. Streamed RESP3 types (`$?`, `*?`) are refused as invalid lengths;
//!   Redis never sends them.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::line::{find_crlf, parse_i64, LineEnd};
use crate::{Limits, ProtocolError};

/// Deepest nesting of aggregates [`decode_reply`] accepts; the top-level
/// frame is at depth 1.
pub const MAX_REPLY_DEPTH: usize = 64;

/// A decoded reply frame, RESP2 or RESP3.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `+text`.
    Simple(String),
    /// `-text` or RESP3 blob error `!len`.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$len` bulk string.
    Bulk(Bytes),
    /// RESP2 `$-1` / `*-1`, RESP3 `_`.
    Null,
    /// `*n`.
    Array(Vec<Frame>),
    /// RESP3 `%n`.
    Map(Vec<(Frame, Frame)>),
    /// RESP3 `~n`.
    Set(Vec<Frame>),
    /// RESP3 `>n` (out-of-band message).
    Push(Vec<Frame>),
    /// RESP3 `,f`.
    Double(f64),
    /// RESP3 `#t` / `#f`.
    Boolean(bool),
    /// RESP3 `=len\r\nfmt:data`: the format ("txt", "mkd") and the data.
    Verbatim(String, Bytes),
    /// RESP3 `(digits`, kept as text.
    BigNumber(String),
}

/// Decode one reply frame (RESP2 or RESP3) from the front of `buf`.
///
/// `Ok(None)`: incomplete, nothing consumed. `Ok(Some)`: the frame's bytes
/// were consumed. `Err`: not RESP, nothing consumed.
pub fn decode_reply(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Frame>, ProtocolError> {
    let validate = Walk {
        buf,
        source: None,
        limits,
    };
    let Some((_, end)) = validate.frame(0, 1)? else {
        return Ok(None);
    };
    let reply = buf.split_to(end).freeze();
    let build = Walk {
        buf: &reply,
        source: Some(&reply),
        limits,
    };
    // Same bytes, same code: this walk ends where the first one did.
    let built = build.frame(0, 1)?;
    debug_assert!(matches!(built, Some((_, e)) if e == end));
    Ok(built.map(|(frame, _)| frame))
}

/// One walk over a reply: `frame` returns the frame starting at an offset
/// and the offset just past it, or `None` if the buffer ends first.
#[derive(Clone, Copy)]
struct Walk<'a> {
    buf: &'a [u8],
    /// On the building walk, the frozen reply that `buf` views, to slice
    /// payloads from. `None` on the validating walk, which then returns
    /// `Frame::Null` for everything and allocates nothing.
    source: Option<&'a Bytes>,
    limits: &'a Limits,
}

type Step = Result<Option<(Frame, usize)>, ProtocolError>;

impl Walk<'_> {
    fn frame(&self, mut pos: usize, depth: usize) -> Step {
        if depth > MAX_REPLY_DEPTH {
            return Err(ProtocolError::TooDeep);
        }
        // Attributes precede the value they annotate. Skipped in a loop, so
        // a chain of them costs no recursion.
        let kind = loop {
            let Some(&kind) = self.buf.get(pos) else {
                return Ok(None);
            };
            if kind != b'|' {
                break kind;
            }
            let skip = Walk {
                source: None,
                ..*self
            };
            let Some((_, end)) = skip.aggregate(kind, pos, depth)? else {
                return Ok(None);
            };
            pos = end;
        };
        match kind {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => self.line_frame(kind, pos),
            b'$' | b'!' | b'=' => self.blob_frame(kind, pos),
            b'*' | b'%' | b'~' | b'>' => self.aggregate(kind, pos, depth),
            other => Err(ProtocolError::UnknownReplyType(other)),
        }
    }

    /// A frame that is a single line: its text is `buf[pos + 1..cr]`.
    fn line_frame(&self, kind: u8, pos: usize) -> Step {
        let Some((text, next)) = self.line(pos)? else {
            return Ok(None);
        };
        let text = &self.buf[text];
        let frame = match kind {
            b'+' => {
                let s = utf8(text)?;
                self.build(|| Frame::Simple(s.to_owned()))
            }
            b'-' => {
                let s = utf8(text)?;
                self.build(|| Frame::Error(s.to_owned()))
            }
            b':' => Frame::Int(parse_i64(text).ok_or(ProtocolError::InvalidReply("integer"))?),
            b'_' if text.is_empty() => Frame::Null,
            b'_' => return Err(ProtocolError::InvalidReply("null")),
            b',' => Frame::Double(
                std::str::from_utf8(text)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or(ProtocolError::InvalidReply("double"))?,
            ),
            b'#' => match text {
                b"t" => Frame::Boolean(true),
                b"f" => Frame::Boolean(false),
                _ => return Err(ProtocolError::InvalidReply("boolean")),
            },
            _ => {
                let digits = text.strip_prefix(b"-").unwrap_or(text);
                if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                    return Err(ProtocolError::InvalidReply("big number"));
                }
                let s = utf8(text)?;
                self.build(|| Frame::BigNumber(s.to_owned()))
            }
        };
        Ok(Some((frame, next)))
    }

    /// A length-prefixed frame: bulk string, blob error, verbatim string.
    fn blob_frame(&self, kind: u8, pos: usize) -> Step {
        let Some((len_text, data)) = self.line(pos)? else {
            return Ok(None);
        };
        let len = parse_i64(&self.buf[len_text]).ok_or(ProtocolError::InvalidBulkLength)?;
        if kind == b'$' && len == -1 {
            return Ok(Some((Frame::Null, data)));
        }
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= self.limits.max_bulk_len)
            .ok_or(ProtocolError::InvalidBulkLength)?;
        let end = data
            .checked_add(len)
            .and_then(|n| n.checked_add(2))
            .ok_or(ProtocolError::InvalidBulkLength)?;
        if end > self.buf.len() {
            return Ok(None);
        }
        if self.buf[end - 2..end] != *b"\r\n" {
            return Err(ProtocolError::ExpectedCrlf);
        }
        let payload = data..data + len;
        let frame = match kind {
            b'$' => self.build(|| Frame::Bulk(self.slice(payload))),
            b'!' => {
                let s = utf8(&self.buf[payload])?;
                self.build(|| Frame::Error(s.to_owned()))
            }
            _ => {
                if len < 4 || self.buf[data + 3] != b':' {
                    return Err(ProtocolError::InvalidReply("verbatim string"));
                }
                let format = utf8(&self.buf[data..data + 3])?;
                self.build(|| Frame::Verbatim(format.to_owned(), self.slice(data + 4..data + len)))
            }
        };
        Ok(Some((frame, end)))
    }

    /// An aggregate (`*`, `%`, `~`, `>`, or an attribute `|`).
    fn aggregate(&self, kind: u8, pos: usize, depth: usize) -> Step {
        let Some((count_text, mut next)) = self.line(pos)? else {
            return Ok(None);
        };
        let count =
            parse_i64(&self.buf[count_text]).ok_or(ProtocolError::InvalidMultibulkLength)?;
        if kind == b'*' && count == -1 {
            return Ok(Some((Frame::Null, next)));
        }
        let count = usize::try_from(count)
            .ok()
            .filter(|&count| count <= self.limits.max_multibulk_len)
            .ok_or(ProtocolError::InvalidMultibulkLength)?;

        if kind == b'%' || kind == b'|' {
            let mut pairs = self.vec(count);
            for _ in 0..count {
                let Some((key, end)) = self.frame(next, depth + 1)? else {
                    return Ok(None);
                };
                let Some((value, end)) = self.frame(end, depth + 1)? else {
                    return Ok(None);
                };
                if self.source.is_some() {
                    pairs.push((key, value));
                }
                next = end;
            }
            return Ok(Some((self.build(|| Frame::Map(pairs)), next)));
        }
        let mut items = self.vec(count);
        for _ in 0..count {
            let Some((item, end)) = self.frame(next, depth + 1)? else {
                return Ok(None);
            };
            if self.source.is_some() {
                items.push(item);
            }
            next = end;
        }
        let frame = match kind {
            b'*' => Frame::Array(items),
            b'~' => Frame::Set(items),
            _ => Frame::Push(items),
        };
        Ok(Some((self.build(|| frame), next)))
    }

    /// The header line at `pos`: the range of its text after the type byte,
    /// and the offset after its CRLF.
    fn line(&self, pos: usize) -> Result<Option<(Range<usize>, usize)>, ProtocolError> {
        match find_crlf(self.buf, pos + 1, self.limits.max_inline_len) {
            LineEnd::Crlf(cr) => Ok(Some((pos + 1..cr, cr + 2))),
            LineEnd::Incomplete => Ok(None),
            LineEnd::TooLong => Err(ProtocolError::InvalidReply(
                "line (longer than max_inline_len)",
            )),
            LineEnd::BareCr => Err(ProtocolError::ExpectedCrlf),
        }
    }

    fn build(&self, make: impl FnOnce() -> Frame) -> Frame {
        if self.source.is_some() {
            make()
        } else {
            Frame::Null
        }
    }

    /// Room for `count` elements on the building walk only, where the whole
    /// reply has been validated: `count` is backed by bytes in hand.
    fn vec<T>(&self, count: usize) -> Vec<T> {
        if self.source.is_some() {
            Vec::with_capacity(count)
        } else {
            Vec::new()
        }
    }

    fn slice(&self, range: Range<usize>) -> Bytes {
        self.source
            .map(|reply| reply.slice(range))
            .unwrap_or_default()
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, ProtocolError> {
    std::str::from_utf8(bytes).map_err(|_| ProtocolError::InvalidReply("UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{arb_frame, write_frame};
    use crate::ReplyWriter;
    use proptest::prelude::*;

    fn decode_with(bytes: &[u8], limits: &Limits) -> (Result<Option<Frame>, ProtocolError>, usize) {
        let mut buf = BytesMut::from(bytes);
        let result = decode_reply(&mut buf, limits);
        (result, buf.len())
    }

    fn decode(bytes: &[u8]) -> Result<Option<Frame>, ProtocolError> {
        let (result, left) = decode_with(bytes, &Limits::default());
        match &result {
            Ok(Some(_)) => assert_eq!(left, 0, "{:?}", String::from_utf8_lossy(bytes)),
            _ => assert_eq!(left, bytes.len(), "nothing consumed"),
        }
        result
    }

    fn bulk(s: &'static str) -> Frame {
        Frame::Bulk(Bytes::from_static(s.as_bytes()))
    }

    #[test]
    fn decodes_every_type() {
        for (input, want) in [
            (&b"+OK\r\n"[..], Frame::Simple("OK".into())),
            (b"-ERR x\r\n", Frame::Error("ERR x".into())),
            (b"!5\r\nERR y\r\n", Frame::Error("ERR y".into())),
            (b":-3\r\n", Frame::Int(-3)),
            (b"$3\r\na\nb\r\n", bulk("a\nb")),
            (b"$-1\r\n", Frame::Null),
            (b"*-1\r\n", Frame::Null),
            (b"_\r\n", Frame::Null),
            (b",1.5\r\n", Frame::Double(1.5)),
            (b",-inf\r\n", Frame::Double(f64::NEG_INFINITY)),
            (b"#f\r\n", Frame::Boolean(false)),
            (
                b"=7\r\ntxt:abc\r\n",
                Frame::Verbatim("txt".into(), Bytes::from_static(b"abc")),
            ),
            (
                b"(-123456789012345678901234567890\r\n",
                Frame::BigNumber("-123456789012345678901234567890".into()),
            ),
            (
                b"*2\r\n:1\r\n$-1\r\n",
                Frame::Array(vec![Frame::Int(1), Frame::Null]),
            ),
            (b"~1\r\n#t\r\n", Frame::Set(vec![Frame::Boolean(true)])),
            (
                b">2\r\n+a\r\n:2\r\n",
                Frame::Push(vec![Frame::Simple("a".into()), Frame::Int(2)]),
            ),
            (
                b"%1\r\n+k\r\n*0\r\n",
                Frame::Map(vec![(Frame::Simple("k".into()), Frame::Array(vec![]))]),
            ),
            // An attribute is dropped; the value it annotates is the frame.
            (b"|1\r\n+ttl\r\n:3\r\n|0\r\n:5\r\n", Frame::Int(5)),
            (
                b"*1\r\n|1\r\n+a\r\n+b\r\n$1\r\nx\r\n",
                Frame::Array(vec![bulk("x")]),
            ),
        ] {
            assert_eq!(
                decode(input),
                Ok(Some(want)),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        let Ok(Some(Frame::Double(nan))) = decode(b",nan\r\n") else {
            panic!("nan")
        };
        assert!(nan.is_nan());
    }

    #[test]
    fn bulk_payloads_are_slices_of_the_read_buffer() {
        let mut buf = BytesMut::from(&b"*1\r\n$5\r\nhello\r\n"[..]);
        let base = buf.as_ptr() as usize;
        let Ok(Some(Frame::Array(items))) = decode_reply(&mut buf, &Limits::default()) else {
            panic!()
        };
        let Frame::Bulk(hello) = &items[0] else {
            panic!()
        };
        assert_eq!(hello.as_ptr() as usize, base + 8);
    }

    #[test]
    fn malformed_frames_are_errors_that_consume_nothing() {
        use ProtocolError::*;
        for (input, want) in [
            (&b"?\r\n"[..], UnknownReplyType(b'?')),
            (b":1.5\r\n", InvalidReply("integer")),
            (b"_x\r\n", InvalidReply("null")),
            (b",1.x\r\n", InvalidReply("double")),
            (b"#x\r\n", InvalidReply("boolean")),
            (b"(12a\r\n", InvalidReply("big number")),
            (b"(\r\n", InvalidReply("big number")),
            (b"=2\r\nab\r\n", InvalidReply("verbatim string")),
            (b"=5\r\ntxt-a\r\n", InvalidReply("verbatim string")),
            (b"+\xff\r\n", InvalidReply("UTF-8 text")),
            (b"$-2\r\n", InvalidBulkLength),
            (b"$?\r\n", InvalidBulkLength),
            (b"%-1\r\n", InvalidMultibulkLength),
            (b"*?\r\n", InvalidMultibulkLength),
            (b"$1\r\nab\r\n", ExpectedCrlf),
            (b"+OK\rx", ExpectedCrlf),
            (b"*2\r\n:1\r\n&\r\n", UnknownReplyType(b'&')),
        ] {
            assert_eq!(
                decode(input),
                Err(want),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn limits_apply_before_the_payload_arrives() {
        let limits = Limits {
            max_bulk_len: 8,
            max_multibulk_len: 4,
            max_inline_len: 16,
        };
        assert_eq!(
            decode_with(b"$9\r\n", &limits).0,
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            decode_with(b"=9\r\n", &limits).0,
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(decode_with(b"$8\r\n", &limits).0, Ok(None));
        assert_eq!(
            decode_with(b"*5\r\n", &limits).0,
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            decode_with(b"%5\r\n", &limits).0,
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(decode_with(b"*4\r\n", &limits).0, Ok(None));
        assert_eq!(
            decode_with(b"+12345678901234567", &limits).0,
            Err(ProtocolError::InvalidReply(
                "line (longer than max_inline_len)"
            ))
        );
        assert_eq!(
            decode(b"*2000000000\r\n"),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            decode(b"$999999999999\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
    }

    #[test]
    fn nesting_is_bounded() {
        let nested = |levels: usize| {
            let mut bytes = b"*1\r\n".repeat(levels - 1);
            bytes.extend(b":1\r\n");
            bytes
        };
        assert!(matches!(decode(&nested(MAX_REPLY_DEPTH)), Ok(Some(_))));
        assert_eq!(
            decode(&nested(MAX_REPLY_DEPTH + 1)),
            Err(ProtocolError::TooDeep)
        );
        // Refused as soon as the too-deep header is in, long before its end.
        assert_eq!(
            decode(&b"*1\r\n".repeat(MAX_REPLY_DEPTH + 1)),
            Err(ProtocolError::TooDeep)
        );
        // Attributes do not deepen what they annotate, however many.
        assert_eq!(
            decode(&[&b"|0\r\n".repeat(1000)[..], b":1\r\n"].concat()),
            Ok(Some(Frame::Int(1)))
        );
    }

    fn encode(frame: &Frame, resp3: bool) -> Vec<u8> {
        let mut buf = BytesMut::new();
        write_frame(&mut ReplyWriter::new(&mut buf, resp3), frame);
        buf.to_vec()
    }

    /// Decode `bytes` under `limits` and check the invariants that hold for
    /// any input at all.
    fn check_invariants(bytes: &[u8], limits: &Limits) -> Result<(), TestCaseError> {
        let mut buf = BytesMut::from(bytes);
        loop {
            let before = buf.len();
            match decode_reply(&mut buf, limits) {
                Ok(Some(_)) => prop_assert!(buf.len() < before, "a frame consumes bytes"),
                Ok(None) | Err(_) => {
                    prop_assert_eq!(&buf[..], &bytes[bytes.len() - before..], "nothing consumed");
                    return Ok(());
                }
            }
        }
    }

    fn small_limits() -> Limits {
        Limits {
            max_bulk_len: 12,
            max_multibulk_len: 5,
            max_inline_len: 10,
        }
    }

    proptest! {
        #[test]
        fn every_truncation_waits(frame in arb_frame(), resp3: bool) {
            let bytes = encode(&frame, resp3);
            for cut in 0..bytes.len() {
                prop_assert_eq!(decode_with(&bytes[..cut], &Limits::default()), (Ok(None), cut));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            check_invariants(&bytes, &Limits::default())?;
            check_invariants(&bytes, &small_limits())?;
        }

        #[test]
        fn protocol_shaped_bytes_never_panic(
            bytes in prop::collection::vec(prop::sample::select(&b"*%~>|$!=+-:_,#(\r\n0123456789-1tfx:?"[..]), 0..64)
        ) {
            check_invariants(&bytes, &Limits::default())?;
            check_invariants(&bytes, &small_limits())?;
        }

        #[test]
        fn mutated_frames_never_panic(
            frames in prop::collection::vec(arb_frame(), 1..3),
            resp3: bool,
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4),
        ) {
            let mut bytes: Vec<u8> = frames.iter().flat_map(|f| encode(f, resp3)).collect();
            for (at, byte, op) in edits {
                let i = at.index(bytes.len() + 1);
                match op {
                    0 if i < bytes.len() => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ => bytes.truncate(i),
                }
            }
            check_invariants(&bytes, &Limits::default())?;
            check_invariants(&bytes, &small_limits())?;
        }
    }
}
