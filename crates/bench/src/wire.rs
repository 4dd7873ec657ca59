//! The client side of RESP, as little as a benchmark needs: encode a request
//! as an array of bulk strings, and read exactly one reply off a blocking
//! stream.
//!
//! Why not the `resp` crate: the client that measures the server should not
//! share a parser with it (a bug in one would hide in the other), and a
//! benchmark only needs to know where a reply ends and whether it is an
//! error, not to build frames.
//!
//! Invariant: [`ReplyReader::read_reply`] consumes exactly one complete
//! reply; bytes that belong to later replies (pipelined setup) stay
//! buffered for the next call.

use std::io::Read;

/// Aggregates nested deeper than this are refused rather than recursed into.
const MAX_DEPTH: usize = 32;

/// Errors of the benchmark's own client.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("connection closed by the server")]
    Closed,
    #[error("server replied with an error: {0}")]
    Server(String),
    #[error("malformed reply: {0}")]
    Malformed(&'static str),
}

/// Appends `args` to `out` as a RESP array of bulk strings.
pub fn encode_request(args: &[&[u8]], out: &mut Vec<u8>) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        out.extend_from_slice(arg.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// What a caller may want to check about a reply it has read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHead {
    /// The RESP type byte (`+`, `:`, `$`, `*`, ...).
    pub kind: u8,
    /// For bulk strings: the length, `None` for a null bulk.
    pub bulk_len: Option<usize>,
    /// For integers: the value.
    pub int: Option<i64>,
}

/// Buffers bytes from a stream and hands out one reply at a time.
pub struct ReplyReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Default for ReplyReader {
    fn default() -> Self {
        Self {
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
        }
    }
}

impl ReplyReader {
    /// Reads one complete reply. An error reply (`-` or `!`) is returned as
    /// [`WireError::Server`] after it has been consumed, so the stream stays
    /// in step.
    pub fn read_reply(&mut self, stream: &mut impl Read) -> Result<ReplyHead, WireError> {
        loop {
            let pending = &self.buf[self.start..self.end];
            if let Some(len) = frame_len(pending, 0)? {
                let head = head_of(&pending[..len]);
                self.start += len;
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
                return head;
            }
            self.fill(stream)?;
        }
    }

    /// Makes room (compacting, then growing) and reads at least one byte.
    fn fill(&mut self, stream: &mut impl Read) -> Result<(), WireError> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        match stream.read(&mut self.buf[self.end..])? {
            0 => Err(WireError::Closed),
            n => {
                self.end += n;
                Ok(())
            }
        }
    }
}

/// Summarises a complete frame; error frames become `Err`.
fn head_of(frame: &[u8]) -> Result<ReplyHead, WireError> {
    let kind = frame[0];
    let line_end = find_crlf(frame, 1).ok_or(WireError::Malformed("missing CRLF"))?;
    let line = &frame[1..line_end];
    match kind {
        b'-' => Err(WireError::Server(
            String::from_utf8_lossy(line).into_owned(),
        )),
        b'!' => {
            let body = frame.get(line_end + 2..frame.len() - 2).unwrap_or_default();
            Err(WireError::Server(
                String::from_utf8_lossy(body).into_owned(),
            ))
        }
        b'$' => {
            let len = parse_int(line)?;
            Ok(ReplyHead {
                kind,
                bulk_len: usize::try_from(len).ok(),
                int: None,
            })
        }
        b':' => Ok(ReplyHead {
            kind,
            bulk_len: None,
            int: Some(parse_int(line)?),
        }),
        _ => Ok(ReplyHead {
            kind,
            bulk_len: None,
            int: None,
        }),
    }
}

/// Length of the complete frame starting at `buf[0]`, or `None` if more
/// bytes are needed.
fn frame_len(buf: &[u8], depth: usize) -> Result<Option<usize>, WireError> {
    if depth > MAX_DEPTH {
        return Err(WireError::Malformed("aggregate nested too deep"));
    }
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    let Some(line_end) = find_crlf(buf, 1) else {
        return Ok(None);
    };
    let after_line = line_end + 2;
    match kind {
        // simple string, error, integer, RESP3 null, boolean, double, big number
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Ok(Some(after_line)),
        // bulk string, RESP3 blob error, verbatim string
        b'$' | b'!' | b'=' => {
            let len = parse_int(&buf[1..line_end])?;
            if len < 0 {
                return Ok(Some(after_line));
            }
            let len = usize::try_from(len).map_err(|_| WireError::Malformed("bulk length"))?;
            let total = after_line + len + 2;
            if buf.len() < total {
                return Ok(None);
            }
            if &buf[total - 2..total] != b"\r\n" {
                return Err(WireError::Malformed("bulk string not followed by CRLF"));
            }
            Ok(Some(total))
        }
        // array, set, push: n elements; map: n pairs
        b'*' | b'~' | b'>' | b'%' => {
            let n = parse_int(&buf[1..line_end])?;
            if n < 0 {
                return Ok(Some(after_line));
            }
            let elements = if kind == b'%' { n.saturating_mul(2) } else { n };
            let mut pos = after_line;
            for _ in 0..elements {
                match frame_len(&buf[pos..], depth + 1)? {
                    Some(len) => pos += len,
                    None => return Ok(None),
                }
            }
            Ok(Some(pos))
        }
        _ => Err(WireError::Malformed("unknown reply type byte")),
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| i + from)
}

fn parse_int(line: &[u8]) -> Result<i64, WireError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(WireError::Malformed("length is not an integer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out one byte per read, to exercise partial frames.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            match self.0.split_first() {
                Some((&b, rest)) if !out.is_empty() => {
                    out[0] = b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn encodes_bulk_array() {
        let mut out = Vec::new();
        encode_request(&[b"SET", b"k", b""], &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn reads_replies_one_at_a_time_across_partial_reads() {
        let wire =
            b"+OK\r\n:42\r\n$5\r\nhello\r\n$-1\r\n*2\r\n$1\r\na\r\n*1\r\n:1\r\n%1\r\n+k\r\n+v\r\n";
        let mut src = Trickle(wire);
        let mut r = ReplyReader::default();
        assert_eq!(r.read_reply(&mut src).unwrap().kind, b'+');
        assert_eq!(r.read_reply(&mut src).unwrap().int, Some(42));
        assert_eq!(
            r.read_reply(&mut src).unwrap(),
            ReplyHead {
                kind: b'$',
                bulk_len: Some(5),
                int: None
            }
        );
        assert_eq!(
            r.read_reply(&mut src).unwrap(),
            ReplyHead {
                kind: b'$',
                bulk_len: None,
                int: None
            }
        );
        assert_eq!(r.read_reply(&mut src).unwrap().kind, b'*');
        assert_eq!(r.read_reply(&mut src).unwrap().kind, b'%');
        assert!(matches!(r.read_reply(&mut src), Err(WireError::Closed)));
    }

    #[test]
    fn error_reply_is_consumed_and_reported() {
        let mut src = Trickle(b"-ERR unknown command\r\n+OK\r\n");
        let mut r = ReplyReader::default();
        match r.read_reply(&mut src) {
            Err(WireError::Server(msg)) => assert_eq!(msg, "ERR unknown command"),
            other => panic!("expected server error, got {other:?}"),
        }
        assert_eq!(r.read_reply(&mut src).unwrap().kind, b'+');
    }

    #[test]
    fn bulk_larger_than_the_initial_buffer() {
        let body = vec![b'x'; 200_000];
        let mut wire = format!("${}\r\n", body.len()).into_bytes();
        wire.extend_from_slice(&body);
        wire.extend_from_slice(b"\r\n");
        let mut r = ReplyReader::default();
        let head = r.read_reply(&mut &wire[..]).unwrap();
        assert_eq!(head.bulk_len, Some(200_000));
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        let mut r = ReplyReader::default();
        assert!(matches!(
            r.read_reply(&mut &b"?x\r\n"[..]),
            Err(WireError::Malformed(_))
        ));
        assert!(matches!(
            r.read_reply(&mut &b"$abc\r\n"[..]),
            Err(WireError::Malformed(_))
        ));
    }
}
