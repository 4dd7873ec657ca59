//! Client requests: decoding on the server (the hot path), encoding for
//! tools and tests.
//!
//! A request is a RESP array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`)
//! or, when the first byte is not `*`, an inline command line (see
//! the `inline` module). This is how Redis tells them apart too.
//!
//! Invariants:
//! - `Ok(None)` and `Err` leave the buffer untouched; `Ok(Some)` consumes
//!   exactly one request.
//! - Every announced length is checked against [`Limits`] as soon as its
//!   header line is complete, before the payload arrives and before anything
//!   is allocated for it.
//! - The decoder keeps no state, so an incomplete request is re-examined
//!   from its start on the next call. That re-examination reads only header
//!   lines and compares `buf.len()` with the lengths they announce: payload
//!   bytes are never scanned, and nothing is allocated until the whole
//!   request is in the buffer.
//! - Arguments of an array request are slices of one frozen `Bytes` holding
//!   the request's bytes: no copy. The server does not even take those:
//!   [`locate_request`] gives their places in its read buffer.

mod inline;

use bytes::{Bytes, BytesMut};

use crate::line::{find_crlf, parse_i64, LineEnd};
use crate::reply::put_header;
use crate::{Limits, ProtocolError};

/// Decode one client request from the front of `buf`.
///
/// - `Ok(None)`: incomplete; nothing consumed, call again with more bytes.
/// - `Ok(Some(args))`: the request's bytes were consumed; `args` are
///   zero-copy slices of them. An empty inline line, `*0` or a negative
///   count yields `Some(vec![])`, which the caller skips (as Redis does).
/// - `Err`: the stream is not RESP; nothing consumed. Reply and close.
pub fn decode_request(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let mut args = Vec::new();
    Ok(decode_request_into(buf, limits, &mut args)?.then_some(args))
}

/// [`decode_request`] into a caller's vector (cleared first), so a server
/// reuses one allocation for every request of a connection. `Ok(true)`: a
/// request was consumed and `args` holds it (empty for a blank request);
/// `Ok(false)`: incomplete. Same invariants as [`decode_request`].
pub fn decode_request_into(
    buf: &mut BytesMut,
    limits: &Limits,
    args: &mut Vec<Bytes>,
) -> Result<bool, ProtocolError> {
    args.clear();
    match buf.first() {
        None => Ok(false),
        Some(b'*') => decode_array(buf, limits, args),
        Some(_) => Ok(match inline::decode_inline(buf, limits)? {
            Some(inline) => {
                *args = inline;
                true
            }
            None => false,
        }),
    }
}

/// Encode a request as a RESP array of bulk strings.
pub fn encode_request(args: &[&[u8]], out: &mut BytesMut) {
    // Headers are at most 1 + 20 + 2 bytes; reserving once avoids regrowth.
    let payload: usize = args.iter().map(|arg| arg.len() + 2 + 23).sum();
    out.reserve(23 + payload);
    put_header(out, b'*', args.len());
    for arg in args {
        put_header(out, b'$', arg.len());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Where [`locate_request`] found the request at the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Located {
    /// An array request taking `buf[..end]`; its arguments are
    /// `buf[start..start + len]` for each `(start, len)` place (none for
    /// `*0` or a negative count, which the caller skips as Redis does).
    Array { end: usize },
    /// An inline command line, which may be incomplete: decode it with
    /// [`decode_request_into`] (its arguments are unquoted copies).
    Inline,
}

/// Finds the request at the front of `buf` without copying or allocating
/// anything but `places` (cleared first; at most one entry per argument
/// present in `buf`): the server's hot path, whose arguments are borrowed
/// from its read buffer for as long as the command runs. `Ok(None)`: empty
/// or an incomplete array. Same checks and limits as [`decode_request`].
pub fn locate_request(
    buf: &[u8],
    limits: &Limits,
    places: &mut Vec<(usize, usize)>,
) -> Result<Option<Located>, ProtocolError> {
    places.clear();
    match buf.first() {
        None => Ok(None),
        Some(b'*') => {
            // One place per argument found in the buffer (each at least 6
            // bytes there), never `count` ahead of them.
            let end = locate_array(buf, limits, |start, len| places.push((start, len)))?;
            if end.is_none() {
                places.clear();
            }
            Ok(end.map(|end| Located::Array { end }))
        }
        Some(_) => Ok(Some(Located::Inline)),
    }
}

/// Arguments whose places the first walk remembers, so that a request of
/// at most this many arguments (nearly all) is walked once.
const REMEMBERED_ARGS: usize = 8;

fn decode_array(
    buf: &mut BytesMut,
    limits: &Limits,
    args: &mut Vec<Bytes>,
) -> Result<bool, ProtocolError> {
    // First walk: validate and find the end, allocating nothing; the first
    // few arguments' places are kept on the stack.
    let mut places = [(0usize, 0usize); REMEMBERED_ARGS];
    let mut seen = 0;
    let Some(end) = locate_array(buf, limits, |start, len| {
        if seen < REMEMBERED_ARGS {
            places[seen] = (start, len);
        }
        seen += 1;
    })?
    else {
        return Ok(false);
    };
    // `seen` is safe to preallocate: every one of those elements is in
    // hand, at least 6 bytes each.
    let request = buf.split_to(end).freeze();
    args.reserve_exact(seen);
    if seen <= REMEMBERED_ARGS {
        args.extend(
            places[..seen]
                .iter()
                .map(|&(start, len)| request.slice(start..start + len)),
        );
    } else {
        // A second walk over the same bytes with the same limits takes the
        // same path, now slicing the frozen request.
        locate_array(&request, limits, |start, len| {
            args.push(request.slice(start..start + len))
        })?;
    }
    Ok(true)
}

/// Walks an array request, calling `visit(start, len)` for each argument
/// found; returns its end, None when incomplete.
fn locate_array(
    buf: &[u8],
    limits: &Limits,
    visit: impl FnMut(usize, usize),
) -> Result<Option<usize>, ProtocolError> {
    let (count, args_start) = match find_crlf(buf, 1, limits.max_inline_len) {
        LineEnd::Crlf(cr) => {
            let count = parse_i64(&buf[1..cr]).ok_or(ProtocolError::InvalidMultibulkLength)?;
            (count, cr + 2)
        }
        LineEnd::Incomplete => return Ok(None),
        LineEnd::TooLong => return Err(ProtocolError::TooBigMbulkCountString),
        LineEnd::BareCr => return Err(ProtocolError::InvalidMultibulkLength),
    };
    if count <= 0 {
        // Redis treats "*0" and "*-1" (any count <= 0) as an empty request.
        return Ok(Some(args_start));
    }
    let count = usize::try_from(count)
        .ok()
        .filter(|&count| count <= limits.max_multibulk_len)
        .ok_or(ProtocolError::InvalidMultibulkLength)?;
    walk_bulks(buf, args_start, count, limits, visit)
}

/// Walk `count` bulk strings starting at `pos`, calling `visit(start, len)`
/// for each payload. Returns the offset just past the last one, or `None`
/// if the buffer ends first.
fn walk_bulks(
    buf: &[u8],
    mut pos: usize,
    count: usize,
    limits: &Limits,
    mut visit: impl FnMut(usize, usize),
) -> Result<Option<usize>, ProtocolError> {
    for _ in 0..count {
        // Checked before the line is complete (Redis waits for the CR): a
        // peer sending garbage is told so at once.
        match buf.get(pos) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&other) => return Err(ProtocolError::ExpectedDollar(other)),
        }
        let (len, data) = match find_crlf(buf, pos + 1, limits.max_inline_len) {
            LineEnd::Crlf(cr) => (bulk_len(&buf[pos + 1..cr], limits)?, cr + 2),
            LineEnd::Incomplete => return Ok(None),
            LineEnd::TooLong => return Err(ProtocolError::TooBigBulkCountString),
            LineEnd::BareCr => return Err(ProtocolError::InvalidBulkLength),
        };
        // `len <= max_bulk_len`, but that limit may be configured as
        // usize::MAX: keep the arithmetic checked.
        let end = data
            .checked_add(len)
            .and_then(|n| n.checked_add(2))
            .ok_or(ProtocolError::InvalidBulkLength)?;
        if end > buf.len() {
            return Ok(None);
        }
        if buf[end - 2..end] != *b"\r\n" {
            return Err(ProtocolError::ExpectedCrlf);
        }
        visit(data, len);
        pos = end;
    }
    Ok(Some(pos))
}

fn bulk_len(text: &[u8], limits: &Limits) -> Result<usize, ProtocolError> {
    parse_i64(text)
        .and_then(|len| usize::try_from(len).ok())
        .filter(|&len| len <= limits.max_bulk_len)
        .ok_or(ProtocolError::InvalidBulkLength)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(bytes: &[u8]) -> (Result<Option<Vec<Bytes>>, ProtocolError>, usize) {
        decode_with(bytes, &Limits::default())
    }

    /// Decode from a fresh buffer; also returns how many bytes were left.
    fn decode_with(
        bytes: &[u8],
        limits: &Limits,
    ) -> (Result<Option<Vec<Bytes>>, ProtocolError>, usize) {
        let mut buf = BytesMut::from(bytes);
        let result = decode_request(&mut buf, limits);
        (result, buf.len())
    }

    fn args(list: &[&str]) -> Vec<Bytes> {
        list.iter()
            .map(|arg| Bytes::copy_from_slice(arg.as_bytes()))
            .collect()
    }

    fn encoded(args: &[Vec<u8>]) -> Vec<u8> {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let mut out = BytesMut::new();
        encode_request(&refs, &mut out);
        out.to_vec()
    }

    #[test]
    fn decodes_an_array_and_consumes_only_it() {
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n"[..]);
        let limits = Limits::default();
        assert_eq!(
            decode_request(&mut buf, &limits),
            Ok(Some(args(&["GET", "k"])))
        );
        assert_eq!(&buf[..], b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(decode_request(&mut buf, &limits), Ok(Some(args(&["PING"]))));
        assert!(buf.is_empty());
        assert_eq!(decode_request(&mut buf, &limits), Ok(None));
    }

    #[test]
    fn args_are_slices_of_the_read_buffer() {
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$5\r\nvalue\r\n"[..]);
        let base = buf.as_ptr() as usize;
        let got = decode_request(&mut buf, &Limits::default())
            .unwrap()
            .unwrap();
        assert_eq!(got[0].as_ptr() as usize, base + 8);
        assert_eq!(got[1].as_ptr() as usize, base + 17);
        assert_eq!(got.capacity(), 2);
    }

    #[test]
    fn binary_and_empty_args() {
        let (got, left) = decode(b"*3\r\n$0\r\n\r\n$4\r\n\r\n\0\xff\r\n$2\r\n$*\r\n");
        let want = vec![
            Bytes::new(),
            Bytes::from_static(b"\r\n\0\xff"),
            Bytes::from_static(b"$*"),
        ];
        assert_eq!((got, left), (Ok(Some(want)), 0));
    }

    #[test]
    fn empty_and_negative_counts_are_empty_requests() {
        for input in [&b"*0\r\n"[..], b"*-1\r\n", b"*-10\r\n"] {
            assert_eq!(decode(input), (Ok(Some(vec![])), 0));
        }
    }

    #[test]
    fn malformed_headers_are_redis_errors() {
        use ProtocolError::*;
        for (input, want) in [
            (&b"*x\r\n"[..], InvalidMultibulkLength),
            (b"*\r\n", InvalidMultibulkLength),
            (b"*01\r\n", InvalidMultibulkLength),
            (b"*1\rx", InvalidMultibulkLength),
            (b"*1\r\n$x\r\n", InvalidBulkLength),
            (b"*1\r\n$-1\r\n", InvalidBulkLength),
            (b"*1\r\n$1\rx", InvalidBulkLength),
            (
                b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n",
                ExpectedDollar(b'f'),
            ),
            (b"*1\r\n:1\r\n", ExpectedDollar(b':')),
            (b"*1\r\n$3\r\nfooXY", ExpectedCrlf),
            (b"*1\r\n$3\r\nfoo\rX", ExpectedCrlf),
        ] {
            let (got, left) = decode(input);
            assert_eq!(got, Err(want), "{:?}", String::from_utf8_lossy(input));
            assert_eq!(left, input.len(), "an error consumes nothing");
        }
    }

    #[test]
    fn error_texts_match_redis() {
        assert_eq!(
            ProtocolError::ExpectedDollar(b'f').to_string(),
            "Protocol error: expected '$', got 'f'"
        );
        assert_eq!(
            ProtocolError::InvalidMultibulkLength.to_string(),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            ProtocolError::InvalidBulkLength.to_string(),
            "Protocol error: invalid bulk length"
        );
    }

    #[test]
    fn over_limit_lengths_fail_before_the_payload_arrives() {
        let limits = Limits {
            max_bulk_len: 10,
            max_multibulk_len: 3,
            max_inline_len: 64,
        };
        assert_eq!(
            decode_with(b"*4\r\n", &limits).0,
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(decode_with(b"*3\r\n", &limits).0, Ok(None));
        assert_eq!(
            decode_with(b"*1\r\n$11\r\n", &limits).0,
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(decode_with(b"*1\r\n$10\r\n", &limits).0, Ok(None));
        // A later argument's header is checked as soon as it is in.
        assert_eq!(
            decode_with(b"*2\r\n$1\r\na\r\n$11\r\n", &limits).0,
            Err(ProtocolError::InvalidBulkLength)
        );
        // Redis's own examples, with default limits.
        assert_eq!(
            decode(b"*20000000\r\n").0,
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            decode(b"*2000000000\r\n").0,
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            decode(b"*1\r\n$999999999999\r\n").0,
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            decode(b"*1\r\n$536870913\r\n").0,
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(decode(b"*1\r\n$536870912\r\n").0, Ok(None));
    }

    #[test]
    fn header_lines_without_cr_are_bounded() {
        let limits = Limits {
            max_inline_len: 8,
            ..Limits::default()
        };
        assert_eq!(decode_with(b"*12345678", &limits).0, Ok(None));
        assert_eq!(
            decode_with(b"*123456789", &limits).0,
            Err(ProtocolError::TooBigMbulkCountString)
        );
        assert_eq!(decode_with(b"*1\r\n$12345678", &limits).0, Ok(None));
        assert_eq!(
            decode_with(b"*1\r\n$123456789", &limits).0,
            Err(ProtocolError::TooBigBulkCountString)
        );
    }

    #[test]
    fn huge_counts_under_the_limit_allocate_nothing_until_complete() {
        let limits = Limits {
            max_bulk_len: usize::MAX,
            max_multibulk_len: usize::MAX,
            max_inline_len: 64,
        };
        assert_eq!(
            decode_with(b"*2000000000\r\n$1\r\na\r\n", &limits).0,
            Ok(None)
        );
        assert_eq!(decode_with(b"*1\r\n$999999999999\r\n", &limits).0, Ok(None));
        assert_eq!(
            decode_with(b"*1\r\n$9223372036854775807\r\n", &limits).0,
            Ok(None)
        );
        // (tests/allocation.rs measures the allocations themselves.)
    }

    /// Decode `bytes` under `limits` until it stops, checking the invariants
    /// that hold for any input at all.
    fn check_invariants(bytes: &[u8], limits: &Limits) -> Result<(), TestCaseError> {
        let mut buf = BytesMut::from(bytes);
        let mut places = vec![(7, 7)];
        loop {
            let before = buf.len();
            let located = locate_request(&buf, limits, &mut places);
            let front = buf.clone();
            let decoded = decode_request(&mut buf, limits);
            // The server's borrowing path finds exactly what the owned one
            // decodes, and fails the same way.
            match (&located, &decoded) {
                (Ok(Some(Located::Array { end })), Ok(Some(args))) => {
                    prop_assert_eq!(*end, before - buf.len());
                    let borrowed: Vec<&[u8]> = places
                        .iter()
                        .map(|&(at, len)| &front[at..at + len])
                        .collect();
                    prop_assert_eq!(borrowed, args.iter().map(|a| &a[..]).collect::<Vec<_>>());
                }
                (Ok(Some(Located::Inline)), _) => prop_assert!(front[0] != b'*'),
                (Ok(None), Ok(None)) => prop_assert!(places.is_empty()),
                (Err(a), Err(b)) => prop_assert_eq!(a, b),
                _ => prop_assert!(false, "locate {:?} vs decode {:?}", located, decoded),
            }
            match decoded {
                Ok(Some(args)) => {
                    prop_assert!(buf.len() < before, "a request consumes bytes");
                    // Capacity is backed by bytes in hand: an array element
                    // takes at least 6 bytes ("$0\r\n\r\n"); an inline Vec
                    // grows from 4 by doubling, one push per token.
                    let consumed = before - buf.len();
                    let cap = if bytes[bytes.len() - before] == b'*' {
                        consumed / 6
                    } else {
                        consumed.max(4)
                    };
                    prop_assert!(
                        args.capacity() <= cap,
                        "capacity {} for {} bytes",
                        args.capacity(),
                        consumed
                    );
                    prop_assert!(args
                        .iter()
                        .all(|arg| arg.len() <= limits.max_bulk_len.max(limits.max_inline_len)));
                }
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

    fn arb_args() -> impl Strategy<Value = Vec<Vec<u8>>> {
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..12), 0..6)
    }

    proptest! {
        #[test]
        fn every_truncation_waits_then_the_whole_pipeline_decodes(
            pipeline in prop::collection::vec(arb_args(), 1..4)
        ) {
            let mut bytes = Vec::new();
            let mut ends = Vec::new();
            for request in &pipeline {
                bytes.extend(encoded(request));
                ends.push(bytes.len());
            }
            let limits = Limits::default();
            for cut in 0..=bytes.len() {
                let mut buf = BytesMut::from(&bytes[..cut]);
                let complete = ends.iter().filter(|&&end| end <= cut).count();
                for request in &pipeline[..complete] {
                    let got = decode_request(&mut buf, &limits).unwrap().unwrap();
                    prop_assert_eq!(&got, request);
                }
                let before = buf.clone();
                prop_assert_eq!(decode_request(&mut buf, &limits), Ok(None));
                prop_assert_eq!(buf, before, "an incomplete request consumes nothing");
            }
        }

        #[test]
        fn one_reused_vector_decodes_short_and_long_requests(
            pipeline in prop::collection::vec(
                prop::collection::vec(prop::collection::vec(any::<u8>(), 0..6), 1..(3 * REMEMBERED_ARGS)),
                1..6,
            )
        ) {
            let mut buf = BytesMut::new();
            for request in &pipeline {
                buf.extend(encoded(request));
            }
            let mut args = vec![Bytes::from_static(b"left over")];
            for request in &pipeline {
                prop_assert_eq!(decode_request_into(&mut buf, &Limits::default(), &mut args), Ok(true));
                prop_assert_eq!(&args, request);
            }
            prop_assert_eq!(decode_request_into(&mut buf, &Limits::default(), &mut args), Ok(false));
            prop_assert!(args.is_empty());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            check_invariants(&bytes, &Limits::default())?;
            check_invariants(&bytes, &small_limits())?;
        }

        #[test]
        fn protocol_shaped_bytes_never_panic(
            bytes in prop::collection::vec(prop::sample::select(&b"*$\r\n0123456789-\"' \\xaF\t\0"[..]), 0..64)
        ) {
            check_invariants(&bytes, &Limits::default())?;
            check_invariants(&bytes, &small_limits())?;
        }

        #[test]
        fn mutated_pipelines_never_panic(
            pipeline in prop::collection::vec(arb_args(), 1..4),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4),
        ) {
            let mut bytes: Vec<u8> = pipeline.iter().flat_map(|args| encoded(args)).collect();
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

        #[test]
        fn limits_are_enforced_exactly(len in 0usize..40, max in 0usize..40) {
            let limits = Limits { max_bulk_len: max, ..Limits::default() };
            let got = decode_with(&encoded(&[vec![b'x'; len]]), &limits).0;
            if len <= max {
                prop_assert_eq!(got, Ok(Some(vec![Bytes::from(vec![b'x'; len])])));
            } else {
                prop_assert_eq!(got, Err(ProtocolError::InvalidBulkLength));
            }
        }
    }
}
