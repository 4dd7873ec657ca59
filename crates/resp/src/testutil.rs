//! Test helpers shared by the modules' tests: random reply trees, and a way
//! to write one through [`ReplyWriter`].

use bytes::Bytes;
use proptest::prelude::*;

use crate::double::resp_double;
use crate::{Frame, ReplyWriter};

/// Replies a server writes: every [`Frame`] but `BigNumber` (the writer has
/// no method for it) and `NaN` doubles (`NaN != NaN`). Line texts avoid CR/LF,
/// which the writer replaces.
pub(crate) fn arb_frame() -> impl Strategy<Value = Frame> {
    let text = "[^\r\n]{0,12}";
    let leaf = prop_oneof![
        text.prop_map(Frame::Simple),
        text.prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Int),
        prop::collection::vec(any::<u8>(), 0..16).prop_map(|b| Frame::Bulk(Bytes::from(b))),
        Just(Frame::Null),
        any::<f64>()
            .prop_filter("NaN never compares equal", |f| !f.is_nan())
            .prop_map(Frame::Double),
        any::<bool>().prop_map(Frame::Boolean),
        ("[a-z]{3}", prop::collection::vec(any::<u8>(), 0..16))
            .prop_map(|(format, b)| Frame::Verbatim(format, Bytes::from(b))),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Frame::Array),
            prop::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Frame::Map),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Frame::Set),
            prop::collection::vec(inner, 0..6).prop_map(Frame::Push),
        ]
    })
}

/// Write `frame` with the writer method matching its type.
pub(crate) fn write_frame(w: &mut ReplyWriter, frame: &Frame) {
    match frame {
        Frame::Simple(s) => w.simple(s),
        Frame::Error(s) => w.error(s),
        Frame::Int(n) => w.int(*n),
        Frame::Bulk(b) => w.bulk(b),
        Frame::Null => w.null(),
        Frame::Double(f) => w.double(*f),
        Frame::Boolean(b) => w.boolean(*b),
        Frame::Verbatim(format, b) => w.verbatim(format, b),
        Frame::Array(items) => {
            w.array(items.len());
            items.iter().for_each(|item| write_frame(w, item));
        }
        Frame::Set(items) => {
            w.set(items.len());
            items.iter().for_each(|item| write_frame(w, item));
        }
        Frame::Push(items) => {
            w.push(items.len());
            items.iter().for_each(|item| write_frame(w, item));
        }
        Frame::Map(pairs) => {
            w.map(pairs.len());
            for (key, value) in pairs {
                write_frame(w, key);
                write_frame(w, value);
            }
        }
        Frame::BigNumber(digits) => w.big_number(digits),
    }
}

/// What a RESP2 client decodes from `frame` written in RESP2.
pub(crate) fn resp2_view(frame: &Frame) -> Frame {
    let all = |items: &[Frame]| items.iter().map(resp2_view).collect();
    match frame {
        Frame::Double(f) => Frame::Bulk(Bytes::copy_from_slice(resp_double(*f).as_bytes())),
        Frame::Boolean(b) => Frame::Int(i64::from(*b)),
        Frame::Verbatim(_, b) => Frame::Bulk(b.clone()),
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => Frame::Array(all(items)),
        Frame::Map(pairs) => Frame::Array(
            pairs
                .iter()
                .flat_map(|(k, v)| [resp2_view(k), resp2_view(v)])
                .collect(),
        ),
        other => other.clone(),
    }
}
