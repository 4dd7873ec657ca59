//! Writing replies straight into a connection's output buffer.
//!
//! Command handlers call [`ReplyWriter`] methods in reply order; nothing is
//! built in between (no reply tree), so a reply costs only its bytes. RESP3
//! types degrade to their RESP2 forms the way Redis degrades them: a map
//! becomes a flat array, a set or push an array, a double a bulk string, a
//! boolean an integer, a verbatim string a plain bulk string.
//!
//! Invariant: every method writes one well-formed RESP value (or an aggregate
//! header whose elements the caller writes next). Text placed on a line
//! (simple strings, errors) has CR and LF replaced by spaces, so no message
//! can break the framing.

use bytes::BytesMut;

use crate::double::resp_double;

/// Writes replies in the connection's protocol (2 or 3) into an output buffer.
pub struct ReplyWriter<'a> {
    buf: &'a mut BytesMut,
    resp3: bool,
}

impl<'a> ReplyWriter<'a> {
    /// A writer appending to `buf`, in RESP3 when `resp3` (after `HELLO 3`).
    pub fn new(buf: &'a mut BytesMut, resp3: bool) -> Self {
        ReplyWriter { buf, resp3 }
    }

    /// RESP3 big number `(digits`; RESP2 has none, so a bulk string of the
    /// same digits (what Redis sends to RESP2 clients).
    pub fn big_number(&mut self, digits: &str) {
        if self.resp3 {
            self.buf.extend_from_slice(b"(");
            self.buf
                .extend_from_slice(digits.replace(['\r', '\n'], "").as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(digits.as_bytes());
        }
    }

    /// Switches protocol mid-stream (HELLO answers in the version it selects).
    pub fn set_resp3(&mut self, resp3: bool) {
        self.resp3 = resp3;
    }

    /// Whether replies are written in RESP3.
    pub fn resp3(&self) -> bool {
        self.resp3
    }

    /// `+s`, e.g. `+OK`.
    pub fn simple(&mut self, s: &str) {
        self.buf.extend_from_slice(b"+");
        self.line_text(s.as_bytes());
    }

    /// `-msg`; `msg` carries its own prefix ("ERR ...", "WRONGTYPE ...").
    pub fn error(&mut self, msg: &str) {
        self.buf.extend_from_slice(b"-");
        self.line_text(msg.as_bytes());
    }

    /// `:n`.
    pub fn int(&mut self, n: i64) {
        put_header(self.buf, b':', n);
    }

    /// `$len` and the bytes.
    pub fn bulk(&mut self, b: &[u8]) {
        put_header(self.buf, b'$', b.len());
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A bulk string holding `n`'s decimal text, formatted without allocating.
    pub fn bulk_int(&mut self, n: i64) {
        let mut digits = itoa::Buffer::new();
        self.bulk(digits.format(n).as_bytes());
    }

    /// A missing value: RESP2 `$-1`, RESP3 `_`.
    pub fn null(&mut self) {
        self.buf
            .extend_from_slice(if self.resp3 { b"_\r\n" } else { b"$-1\r\n" });
    }

    /// A missing aggregate (e.g. BLPOP timeout): RESP2 `*-1`, RESP3 `_`.
    pub fn null_array(&mut self) {
        self.buf
            .extend_from_slice(if self.resp3 { b"_\r\n" } else { b"*-1\r\n" });
    }

    /// `*n`; the caller writes the `n` elements next.
    pub fn array(&mut self, n: usize) {
        put_header(self.buf, b'*', n);
    }

    /// RESP3 `%n`, RESP2 `*2n`; the caller writes key, value, key, value...
    pub fn map(&mut self, n_pairs: usize) {
        if self.resp3 {
            put_header(self.buf, b'%', n_pairs);
        } else {
            put_header(self.buf, b'*', 2 * n_pairs);
        }
    }

    /// RESP3 `~n`, RESP2 `*n`.
    pub fn set(&mut self, n: usize) {
        put_header(self.buf, if self.resp3 { b'~' } else { b'*' }, n);
    }

    /// RESP3 `>n` (out-of-band: pub/sub messages, invalidations), RESP2 `*n`.
    pub fn push(&mut self, n: usize) {
        put_header(self.buf, if self.resp3 { b'>' } else { b'*' }, n);
    }

    /// RESP3 attribute `|n`: `n` key/value pairs about the reply that
    /// follows it (which the caller writes after the pairs). RESP2 has no
    /// form for it, not even a degraded one, so in RESP2 nothing is written
    /// and the caller writes neither the pairs nor anything else in their
    /// place: check [`resp3`](Self::resp3) first, as Redis does.
    pub fn attribute(&mut self, n_pairs: usize) {
        debug_assert!(self.resp3, "attributes exist in RESP3 only");
        if self.resp3 {
            put_header(self.buf, b'|', n_pairs);
        }
    }

    /// RESP3 `,f`, RESP2 a bulk string of the same text ("inf", "-inf" and
    /// "nan" included).
    pub fn double(&mut self, f: f64) {
        let text = resp_double(f);
        if self.resp3 {
            self.buf.extend_from_slice(b",");
            self.buf.extend_from_slice(text.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text.as_bytes());
        }
    }

    /// RESP3 `#t`/`#f`, RESP2 `:1`/`:0`.
    pub fn boolean(&mut self, b: bool) {
        let bytes: &[u8] = match (self.resp3, b) {
            (true, true) => b"#t\r\n",
            (true, false) => b"#f\r\n",
            (false, true) => b":1\r\n",
            (false, false) => b":0\r\n",
        };
        self.buf.extend_from_slice(bytes);
    }

    /// RESP3 `=len\r\nfmt:b` (`format` is three bytes: "txt", "mkd"), RESP2
    /// a bulk string of `b` alone.
    pub fn verbatim(&mut self, format: &str, b: &[u8]) {
        debug_assert_eq!(format.len(), 3, "verbatim formats are three bytes");
        if !self.resp3 {
            return self.bulk(b);
        }
        put_header(self.buf, b'=', format.len() + 1 + b.len());
        self.buf.extend_from_slice(format.as_bytes());
        self.buf.extend_from_slice(b":");
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// The rest of a `+`/`-` line: text with CR/LF made spaces, then CRLF.
    fn line_text(&mut self, text: &[u8]) {
        if text.iter().any(|&b| b == b'\r' || b == b'\n') {
            self.buf.extend(
                text.iter()
                    .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
        } else {
            self.buf.extend_from_slice(text);
        }
        self.buf.extend_from_slice(b"\r\n");
    }
}

/// `<prefix><n>\r\n`, the header of integers, bulk strings and aggregates.
pub(crate) fn put_header(buf: &mut BytesMut, prefix: u8, n: impl itoa::Integer) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n).as_bytes();
    buf.reserve(digits.len() + 3);
    buf.extend_from_slice(&[prefix]);
    buf.extend_from_slice(digits);
    buf.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{arb_frame, resp2_view, write_frame};
    use crate::{decode_reply, Frame, Limits};
    use bytes::Bytes;
    use proptest::prelude::*;

    /// The bytes one writer call produces, in RESP2 and in RESP3.
    fn both(call: impl Fn(&mut ReplyWriter)) -> (String, String) {
        let render = |resp3| {
            let mut buf = BytesMut::new();
            let mut writer = ReplyWriter::new(&mut buf, resp3);
            assert_eq!(writer.resp3(), resp3);
            call(&mut writer);
            String::from_utf8(buf.to_vec()).unwrap()
        };
        (render(false), render(true))
    }

    fn decode_all(bytes: &[u8]) -> Frame {
        let mut buf = BytesMut::from(bytes);
        let frame = decode_reply(&mut buf, &Limits::default()).unwrap().unwrap();
        assert!(buf.is_empty(), "left over: {buf:?}");
        frame
    }

    #[test]
    fn each_method_in_both_protocols() {
        type Call = Box<dyn Fn(&mut ReplyWriter)>;
        let cases: Vec<(Call, &str, &str)> = vec![
            (Box::new(|w| w.simple("OK")), "+OK\r\n", "+OK\r\n"),
            (
                Box::new(|w| w.error("ERR bad\r\nthing")),
                "-ERR bad  thing\r\n",
                "-ERR bad  thing\r\n",
            ),
            (Box::new(|w| w.simple("a\nb")), "+a b\r\n", "+a b\r\n"),
            (Box::new(|w| w.int(-42)), ":-42\r\n", ":-42\r\n"),
            (
                Box::new(|w| w.int(i64::MIN)),
                ":-9223372036854775808\r\n",
                ":-9223372036854775808\r\n",
            ),
            (
                Box::new(|w| w.bulk(b"a\r\nb")),
                "$4\r\na\r\nb\r\n",
                "$4\r\na\r\nb\r\n",
            ),
            (Box::new(|w| w.bulk(b"")), "$0\r\n\r\n", "$0\r\n\r\n"),
            (
                Box::new(|w| w.bulk_int(-12)),
                "$3\r\n-12\r\n",
                "$3\r\n-12\r\n",
            ),
            (Box::new(|w| w.null()), "$-1\r\n", "_\r\n"),
            (Box::new(|w| w.null_array()), "*-1\r\n", "_\r\n"),
            (Box::new(|w| w.array(3)), "*3\r\n", "*3\r\n"),
            (Box::new(|w| w.map(2)), "*4\r\n", "%2\r\n"),
            (Box::new(|w| w.set(2)), "*2\r\n", "~2\r\n"),
            (Box::new(|w| w.push(3)), "*3\r\n", ">3\r\n"),
            (
                Box::new(|w| w.big_number("1234567999999999999999999999999999999")),
                "$37\r\n1234567999999999999999999999999999999\r\n",
                "(1234567999999999999999999999999999999\r\n",
            ),
            (Box::new(|w| w.double(3.25)), "$4\r\n3.25\r\n", ",3.25\r\n"),
            (
                Box::new(|w| w.double(f64::NEG_INFINITY)),
                "$4\r\n-inf\r\n",
                ",-inf\r\n",
            ),
            (
                Box::new(|w| w.double(f64::NAN)),
                "$3\r\nnan\r\n",
                ",nan\r\n",
            ),
            (Box::new(|w| w.boolean(true)), ":1\r\n", "#t\r\n"),
            (Box::new(|w| w.boolean(false)), ":0\r\n", "#f\r\n"),
            (
                Box::new(|w| w.verbatim("txt", b"hi")),
                "$2\r\nhi\r\n",
                "=6\r\ntxt:hi\r\n",
            ),
        ];
        for (call, resp2, resp3) in cases {
            assert_eq!(both(&*call), (resp2.to_owned(), resp3.to_owned()));
        }
    }

    #[test]
    fn an_attribute_is_written_in_resp3_before_the_reply_it_annotates() {
        let mut buf = BytesMut::new();
        let mut w = ReplyWriter::new(&mut buf, true);
        w.attribute(2);
        w.simple("ttl");
        w.int(60);
        w.simple("source");
        w.simple("cache");
        w.bulk(b"real");
        assert_eq!(
            &buf[..],
            b"|2\r\n+ttl\r\n:60\r\n+source\r\n+cache\r\n$4\r\nreal\r\n"
        );
        // A client reading it sees the reply; the attribute is dropped.
        assert_eq!(decode_all(&buf), Frame::Bulk(Bytes::from_static(b"real")));
    }

    #[test]
    fn each_method_decodes_back() {
        let frames = |call: &dyn Fn(&mut ReplyWriter)| {
            let (resp2, resp3) = both(call);
            (decode_all(resp2.as_bytes()), decode_all(resp3.as_bytes()))
        };
        let bulk = |s: &'static str| Frame::Bulk(Bytes::from_static(s.as_bytes()));
        assert_eq!(frames(&|w| w.null()), (Frame::Null, Frame::Null));
        assert_eq!(frames(&|w| w.null_array()), (Frame::Null, Frame::Null));
        assert_eq!(
            frames(&|w| w.double(2.5)),
            (bulk("2.5"), Frame::Double(2.5))
        );
        assert_eq!(
            frames(&|w| w.boolean(true)),
            (Frame::Int(1), Frame::Boolean(true))
        );
        assert_eq!(frames(&|w| w.bulk_int(7)), (bulk("7"), bulk("7")));
        assert_eq!(
            frames(&|w| w.verbatim("mkd", b"# x")),
            (
                bulk("# x"),
                Frame::Verbatim("mkd".into(), Bytes::from_static(b"# x"))
            )
        );
        assert_eq!(
            frames(&|w| {
                w.map(1);
                w.simple("k");
                w.int(1);
            }),
            (
                Frame::Array(vec![Frame::Simple("k".into()), Frame::Int(1)]),
                Frame::Map(vec![(Frame::Simple("k".into()), Frame::Int(1))])
            )
        );
    }

    proptest! {
        #[test]
        fn frame_trees_round_trip_in_resp3(frame in arb_frame()) {
            let mut buf = BytesMut::new();
            write_frame(&mut ReplyWriter::new(&mut buf, true), &frame);
            let decoded = decode_all(&buf);
            prop_assert_eq!(decoded, frame);
        }

        #[test]
        fn frame_trees_degrade_to_resp2(frame in arb_frame()) {
            let mut buf = BytesMut::new();
            write_frame(&mut ReplyWriter::new(&mut buf, false), &frame);
            let decoded = decode_all(&buf);
            prop_assert_eq!(decoded, resp2_view(&frame));
        }
    }
}
