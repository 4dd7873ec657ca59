//! Fuzz targets for the RESP decoders (client requests, replies): arbitrary
//! bytes and mutated valid encodings must decode, ask for more or be
//! refused, never panic, never allocate for a length merely announced, and
//! keep the decoders' invariants (nothing consumed unless a whole
//! request/reply was). Encoders round-trip. See docs/fuzzing.md.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use resp::{
    decode_reply, decode_request, encode_request, locate_request, Frame, Limits, Located,
    ReplyWriter,
};

use fuzzing::{bounded, fuzz, inputs, measure, Hex};

fn unlimited() -> Limits {
    Limits {
        max_bulk_len: usize::MAX,
        max_multibulk_len: usize::MAX,
        max_inline_len: 64 * 1024,
    }
}

fn small() -> Limits {
    Limits {
        max_bulk_len: 16,
        max_multibulk_len: 8,
        max_inline_len: 32,
    }
}

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        "[a-zA-Z0-9 \"'\\\\]{0,12}".prop_map(String::into_bytes),
    ]
}

/// Valid requests: arrays, inline lines (with quotes), several pipelined.
fn valid_requests() -> impl Strategy<Value = Vec<u8>> {
    let one = prop_oneof![
        proptest::collection::vec(arg(), 0..6).prop_map(|args| {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let mut out = BytesMut::new();
            encode_request(&refs, &mut out);
            out.to_vec()
        }),
        "[a-zA-Z0-9 \"'\\\\{}]{0,40}(\r\n|\n)".prop_map(String::into_bytes),
        Just(b"*-1\r\n".to_vec()),
        Just(b"*0\r\n".to_vec()),
    ];
    proptest::collection::vec(one, 1..4).prop_map(|v| v.concat())
}

/// Decodes every request in `input` with `limits`, checking the invariants.
fn requests(input: &[u8], limits: &Limits) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::from(input);
    let mut places = Vec::new();
    for _ in 0..input.len() + 1 {
        let before = buf.clone();
        let located = locate_request(&buf, limits, &mut places);
        let (got, allocated) = measure(|| decode_request(&mut buf, limits));
        bounded("decode_request", allocated, before.len(), 64, 4096)?;
        match &got {
            Ok(Some(args)) => {
                let used = before.len() - buf.len();
                prop_assert!(used > 0, "a request consumed nothing");
                if let Ok(Some(Located::Array { end })) = located {
                    prop_assert_eq!(
                        end,
                        used,
                        "locate_request and decode_request disagree on the end"
                    );
                    let located: Vec<&[u8]> =
                        places.iter().map(|&(s, l)| &before[s..s + l]).collect();
                    let decoded: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
                    prop_assert_eq!(located, decoded);
                } else if before[0] == b'*' {
                    return Err(TestCaseError::fail(format!(
                        "decode_request took an array locate_request says is {located:?}"
                    )));
                }
            }
            Ok(None) | Err(_) => {
                prop_assert_eq!(&buf, &before, "nothing may be consumed on {:?}", got);
                if before.first() == Some(&b'*') {
                    match (&got, &located) {
                        (Ok(None), Ok(None)) | (Err(_), Err(_)) => {}
                        _ => {
                            return Err(TestCaseError::fail(format!(
                                "decode_request {got:?} but locate_request {located:?}"
                            )))
                        }
                    }
                }
                break;
            }
        }
    }
    Ok(())
}

#[test]
fn request_decoder() {
    fuzz(
        "resp::decode_request",
        inputs(valid_requests(), 256),
        |Hex(input)| {
            requests(&input, &Limits::default())?;
            requests(&input, &unlimited())?;
            requests(&input, &small())
        },
    );
}

#[test]
fn request_round_trip() {
    let strategy = (
        proptest::collection::vec(arg(), 1..8),
        proptest::collection::vec(any::<u8>(), 0..8),
    );
    fuzz(
        "resp::encode_request round trip",
        strategy,
        |(args, tail)| {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let mut out = BytesMut::new();
            encode_request(&refs, &mut out);
            let whole = out.len();
            // Every strict prefix is incomplete, and leaves the buffer alone.
            for cut in 0..whole {
                let mut part = BytesMut::from(&out[..cut]);
                prop_assert_eq!(decode_request(&mut part, &unlimited()), Ok(None));
                prop_assert_eq!(part.len(), cut);
            }
            out.extend_from_slice(&tail);
            let got = decode_request(&mut out, &unlimited())
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            let got: Vec<Vec<u8>> = got.unwrap().iter().map(|b| b.to_vec()).collect();
            prop_assert_eq!(got, args);
            prop_assert_eq!(&out[..], &tail[..]);
            Ok(())
        },
    );
}

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _.:-]{0,12}"
}

fn frame() -> impl Strategy<Value = Frame> {
    let leaf = prop_oneof![
        text().prop_map(Frame::Simple),
        text().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Int),
        proptest::collection::vec(any::<u8>(), 0..24).prop_map(|b| Frame::Bulk(Bytes::from(b))),
        Just(Frame::Null),
        any::<f64>()
            .prop_filter("NaN never equals itself", |f| !f.is_nan())
            .prop_map(Frame::Double),
        any::<bool>().prop_map(Frame::Boolean),
        ("[a-z]{3}", proptest::collection::vec(any::<u8>(), 0..16))
            .prop_map(|(f, b)| Frame::Verbatim(f, Bytes::from(b))),
        "-?[1-9][0-9]{0,40}".prop_map(Frame::BigNumber),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Array),
            proptest::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Frame::Map),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Set),
            proptest::collection::vec(inner, 0..6).prop_map(Frame::Push),
        ]
    })
}

fn write(w: &mut ReplyWriter, f: &Frame) {
    match f {
        Frame::Simple(s) => w.simple(s),
        Frame::Error(s) => w.error(s),
        Frame::Int(n) => w.int(*n),
        Frame::Bulk(b) => w.bulk(b),
        Frame::Null => w.null(),
        Frame::Array(v) => {
            w.array(v.len());
            v.iter().for_each(|f| write(w, f));
        }
        Frame::Map(v) => {
            w.map(v.len());
            for (k, x) in v {
                write(w, k);
                write(w, x);
            }
        }
        Frame::Set(v) => {
            w.set(v.len());
            v.iter().for_each(|f| write(w, f));
        }
        Frame::Push(v) => {
            w.push(v.len());
            v.iter().for_each(|f| write(w, f));
        }
        Frame::Double(d) => w.double(*d),
        Frame::Boolean(b) => w.boolean(*b),
        Frame::Verbatim(fmt, b) => w.verbatim(fmt, b),
        Frame::BigNumber(d) => w.big_number(d),
    }
}

fn encoded(f: &Frame, resp3: bool) -> Vec<u8> {
    let mut out = BytesMut::new();
    write(&mut ReplyWriter::new(&mut out, resp3), f);
    out.to_vec()
}

fn valid_replies() -> impl Strategy<Value = Vec<u8>> {
    (frame(), any::<bool>(), proptest::option::of(frame())).prop_map(|(f, resp3, attr)| {
        let mut out = Vec::new();
        if let (Some(a), true) = (attr, resp3) {
            // An attribute before the reply: validated and dropped.
            out.extend_from_slice(b"|1\r\n+key\r\n");
            out.extend_from_slice(&encoded(&a, true));
        }
        out.extend_from_slice(&encoded(&f, resp3));
        out
    })
}

fn replies(input: &[u8], limits: &Limits) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::from(input);
    loop {
        let before = buf.clone();
        let (got, allocated) = measure(|| decode_reply(&mut buf, limits));
        // A frame tree takes more memory than its bytes (`:1\r\n` is 4
        // bytes, a `Frame` 40): a generous but linear bound.
        bounded("decode_reply", allocated, before.len(), 64, 4096)?;
        match got {
            Ok(Some(_)) => prop_assert!(buf.len() < before.len(), "a reply consumed nothing"),
            Ok(None) | Err(_) => {
                prop_assert_eq!(&buf, &before, "nothing may be consumed on {:?}", got);
                return Ok(());
            }
        }
    }
}

#[test]
fn reply_decoder() {
    fuzz(
        "resp::decode_reply",
        inputs(valid_replies(), 256),
        |Hex(input)| {
            replies(&input, &Limits::default())?;
            replies(&input, &unlimited())?;
            replies(&input, &small())
        },
    );
}

#[test]
fn reply_round_trip() {
    fuzz("resp::ReplyWriter/decode_reply round trip", frame(), |f| {
        let bytes = encoded(&f, true);
        let mut buf = BytesMut::from(&bytes[..]);
        let got = decode_reply(&mut buf, &unlimited())
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(got, Some(f.clone()));
        prop_assert!(buf.is_empty());
        for cut in 0..bytes.len() {
            let mut part = BytesMut::from(&bytes[..cut]);
            prop_assert_eq!(decode_reply(&mut part, &unlimited()), Ok(None));
        }
        // RESP2 is lossy (maps become arrays), but always decodes whole.
        let resp2 = encoded(&f, false);
        let mut buf = BytesMut::from(&resp2[..]);
        prop_assert!(matches!(decode_reply(&mut buf, &unlimited()), Ok(Some(_))));
        Ok(())
    });
}
