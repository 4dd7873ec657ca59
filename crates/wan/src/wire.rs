//! The WAN protocol between a publisher (site A, one node) and a receiver
//! (any node of site B), on the framing every peer protocol shares
//! ([`framing`]: `len u32 | kind u8 | body`) with its own magic (`DGWN`),
//! so a WAN port never mistakes a site peer or a Redis client for a remote
//! site.
//!
//! Publisher -> receiver: [`Hello`], [`Frame::Proof`] when the receiver
//! asked for one (`wan.secret`, see [`crate::auth`]), then [`Frame::Batch`]es.
//! Receiver -> publisher: [`Welcome`] or a refusal, then `Received` (the
//! batch is in: opens the window), `Applied` (every change of it is applied
//! at its site's primaries: the publisher may let its log go) and `NeedFull`
//! (keys whose delta found another base: send the full value).
//!
//! A batch's body is a run of entries ([`entries`]), lz4-compressed when
//! that helps ([`lz4`]). Every size read from the wire is checked against
//! [`LIMITS`] before anything is allocated.

mod entries;
mod handshake;
mod lz4;

use bytes::{BufMut, Bytes, BytesMut};
use framing::{begin_frame, put_str, Limits, Payload, Protocol};
use keyspace::codec;

use crate::auth::Proof;

pub use entries::{
    count_entries, decode_entries, max_seqs, put_encoded, put_entry, split_body, Entry,
};
pub use handshake::{Challenge, Hello, Welcome};
pub use lz4::Lz4Probe;

/// 2: nonces in the hello, an optional challenge in the welcome, `Proof`.
/// 3: `Settled`, which a receiver of version 2 would not know.
pub const PROTOCOL_VERSION: u16 = 3;
/// Largest frame on the wire and largest batch once decompressed; keys a
/// single NeedFull frame may list.
pub const LIMITS: Limits = Limits {
    max_frame: 64 << 20,
    max_str: u16::MAX as usize,
    max_items: 1 << 16,
};

/// The WAN protocol: magic `DGWN`, its version and limits.
pub const PROTOCOL: Protocol = Protocol {
    name: "WAN",
    magic: *b"DGWN",
    version: PROTOCOL_VERSION,
    hello_kind: KIND_HELLO,
    hello_len: None,
    limits: LIMITS,
};

const KIND_HELLO: u8 = 1;
const KIND_WELCOME: u8 = 2;
const KIND_REFUSE: u8 = 3;
const KIND_BATCH: u8 = 4;
const KIND_RECEIVED: u8 = 5;
const KIND_APPLIED: u8 = 6;
const KIND_NEED_FULL: u8 = 7;
const KIND_PROOF: u8 = 8;
const KIND_SETTLED: u8 = 9;

const FLAG_LZ4: u8 = 1;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error(transparent)]
    Frame(#[from] framing::Error),
    #[error("unknown frame kind {0}")]
    Kind(u8),
    #[error("batch does not decompress: {0}")]
    Compression(String),
    #[error("entry for partition {0}, which is out of range or not the partition of its key")]
    Partition(u16),
    #[error("bad change in batch: {0}")]
    Change(#[from] codec::DecodeError),
}

impl WireError {
    fn malformed(what: &'static str) -> WireError {
        WireError::Frame(framing::Error::Malformed(what))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    Hello(Hello),
    Welcome(Welcome),
    Refuse(String),
    /// `body` is the raw (decompressed) run of entries.
    Batch {
        id: u64,
        body: Bytes,
    },
    Received(u64),
    Applied(u64),
    /// (source partition, key) whose full value the receiver needs.
    NeedFull(Vec<(u16, Bytes)>),
    /// The publisher's answer to a [`Challenge`].
    Proof(Proof),
    /// (source partition, hlc): the receiver applied every change of the
    /// partition the publisher's site logged up to a version with this hlc
    /// (its own and those it applied from other sites), so that site will
    /// never send a change of it at or below the hlc (see
    /// [`crate::settled`]).
    Settled(Vec<(u16, u64)>),
}

impl Frame {
    /// What the frame is, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Frame::Hello(_) => "a hello",
            Frame::Welcome(_) => "a welcome",
            Frame::Refuse(_) => "a refusal",
            Frame::Batch { .. } => "a batch",
            Frame::Received(_) => "a receipt",
            Frame::Applied(_) => "an applied ack",
            Frame::NeedFull(_) => "a full-value request",
            Frame::Proof(_) => "a proof",
            Frame::Settled(_) => "a settled mark",
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Frame::Hello(_) => KIND_HELLO,
            Frame::Welcome(_) => KIND_WELCOME,
            Frame::Refuse(_) => KIND_REFUSE,
            Frame::Batch { .. } => KIND_BATCH,
            Frame::Received(_) => KIND_RECEIVED,
            Frame::Applied(_) => KIND_APPLIED,
            Frame::NeedFull(_) => KIND_NEED_FULL,
            Frame::Proof(_) => KIND_PROOF,
            Frame::Settled(_) => KIND_SETTLED,
        }
    }
}

/// Appends one encoded frame to `out`.
pub fn encode(frame: &Frame, out: &mut BytesMut) {
    encode_with(frame, &mut Lz4Probe::default(), out)
}

/// [`encode`], compressing batches as `probe` advises.
pub fn encode_with(frame: &Frame, probe: &mut Lz4Probe, out: &mut BytesMut) {
    if let Some(body) = encode_parts(frame, probe, out) {
        out.put_slice(&body);
    }
}

/// [`encode_with`], except that a batch body sent raw is not copied into
/// `out`: it is returned, to be written right after `out` (the frame's
/// length already counts it).
pub fn encode_parts(frame: &Frame, probe: &mut Lz4Probe, out: &mut BytesMut) -> Option<Bytes> {
    let open = begin_frame(frame.kind(), out);
    // A raw batch body: not copied, written after `out` by the caller.
    let mut tail = None;
    match frame {
        Frame::Hello(h) => h.encode(out),
        Frame::Welcome(w) => w.encode(out),
        Frame::Proof(p) => out.put_slice(p),
        Frame::Refuse(reason) => put_str(out, reason.as_bytes()),
        Frame::Batch { id, body } => {
            out.put_u64_le(*id);
            match probe.compress(body) {
                Some(compressed) => {
                    out.put_u8(FLAG_LZ4);
                    out.put_u32_le(body.len() as u32);
                    out.put_slice(&compressed);
                }
                None => {
                    out.put_u8(0);
                    out.put_u32_le(body.len() as u32);
                    tail = Some(body.clone());
                }
            }
        }
        Frame::Received(id) | Frame::Applied(id) => out.put_u64_le(*id),
        Frame::NeedFull(keys) => {
            out.put_u32_le(keys.len() as u32);
            for (p, k) in keys {
                out.put_u16_le(*p);
                out.put_u32_le(k.len() as u32);
                out.put_slice(k);
            }
        }
        Frame::Settled(marks) => {
            out.put_u32_le(marks.len() as u32);
            for (p, hlc) in marks {
                out.put_u16_le(*p);
                out.put_u64_le(*hlc);
            }
        }
    }
    open.finish(out, tail.as_ref().map_or(0, Bytes::len));
    tail
}

/// One frame from the front of `buf`: Ok(None) until it is complete.
pub fn decode(buf: &mut BytesMut) -> Result<Option<Frame>, WireError> {
    let Some((kind, payload)) = LIMITS.split_frame(buf)? else {
        return Ok(None);
    };
    let mut b = Payload::new(payload, LIMITS);
    let frame = match kind {
        KIND_HELLO => Frame::Hello(Hello::decode(&mut b)?),
        KIND_WELCOME => Frame::Welcome(Welcome::decode(&mut b)?),
        KIND_PROOF => {
            let proof: Proof = b.array("proof")?;
            b.finish("proof length")?;
            Frame::Proof(proof)
        }
        KIND_REFUSE => Frame::Refuse(String::from_utf8_lossy(&b.str("string")?).into_owned()),
        KIND_BATCH => {
            let id = b.u64("batch header")?;
            let flags = b.u8("batch header")?;
            let raw_len = b.u32("batch header")? as usize;
            LIMITS.check_len(raw_len)?;
            let body = b.into_bytes();
            let body = if flags & FLAG_LZ4 != 0 {
                // lz4 expands a block at most ~255 times: a larger claim
                // is refused before anything is allocated for it.
                if raw_len > body.len().saturating_mul(256).saturating_add(64) {
                    return Err(WireError::malformed("batch length"));
                }
                lz4::decompress(&body, raw_len)?
            } else if body.len() != raw_len {
                return Err(WireError::malformed("batch length"));
            } else {
                body
            };
            Frame::Batch { id, body }
        }
        KIND_RECEIVED => Frame::Received(b.u64("ack")?),
        KIND_APPLIED => Frame::Applied(b.u64("ack")?),
        KIND_NEED_FULL => {
            let n = b.u32("need-full")? as usize;
            // Each key takes at least 6 bytes.
            let n = b.count(n, 6, "need-full key count")?;
            let mut keys = Vec::with_capacity(n);
            for _ in 0..n {
                let p = b.u16("need-full")?;
                let len = b.u32("need-full")? as usize;
                keys.push((p, b.bytes(len, "need-full key")?));
            }
            Frame::NeedFull(keys)
        }
        KIND_SETTLED => {
            let n = b.u32("settled")? as usize;
            let n = b.count(n, 10, "settled mark count")?;
            let mut marks = Vec::with_capacity(n);
            for _ in 0..n {
                marks.push((b.u16("settled")?, b.u64("settled")?));
            }
            b.finish("settled length")?;
            Frame::Settled(marks)
        }
        other => return Err(WireError::Kind(other)),
    };
    Ok(Some(frame))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(f: &Frame) -> Frame {
        let mut out = BytesMut::new();
        encode(f, &mut out);
        let got = decode(&mut out).unwrap().unwrap();
        assert!(out.is_empty());
        got
    }

    #[test]
    fn frames_round_trip() {
        for f in [
            Frame::Received(9),
            Frame::Applied(10),
            Frame::Refuse("no".into()),
            Frame::Proof([3; 32]),
        ] {
            assert_eq!(round_trip(&f), f);
        }
        let nf = Frame::NeedFull(vec![(4, Bytes::from_static(b"k1")), (5, Bytes::new())]);
        assert_eq!(round_trip(&nf), nf);
        let settled = Frame::Settled(vec![(0, 1 << 40), (16_383, u64::MAX)]);
        assert_eq!(round_trip(&settled), settled);
        assert_eq!(
            round_trip(&Frame::Settled(Vec::new())),
            Frame::Settled(Vec::new())
        );
    }

    #[test]
    fn a_raw_batch_in_parts_is_the_same_frame() {
        let mut random = vec![0u8; 200 << 10];
        let mut x = 0x9e3779b97f4a7c15u64;
        for b in random.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let frame = Frame::Batch {
            id: 9,
            body: Bytes::from(random),
        };
        let mut whole = BytesMut::new();
        encode(&frame, &mut whole);
        let mut parts = BytesMut::new();
        let body = encode_parts(&frame, &mut Lz4Probe::default(), &mut parts)
            .expect("random data goes raw");
        parts.extend_from_slice(&body);
        assert_eq!(parts, whole);
        let Some(Frame::Batch { id, body: got }) = decode(&mut parts).unwrap() else {
            panic!("not a batch")
        };
        assert_eq!((id, got), (9, body));
        // Compressible: no separate body.
        let frame = Frame::Batch {
            id: 10,
            body: Bytes::from(vec![7u8; 200 << 10]),
        };
        assert!(encode_parts(&frame, &mut Lz4Probe::default(), &mut BytesMut::new()).is_none());
    }

    #[test]
    fn forged_input_is_refused() {
        // A proof of the wrong length.
        let mut out = BytesMut::new();
        out.put_u32_le(1 + 31);
        out.put_u8(KIND_PROOF);
        out.put_slice(&[0; 31]);
        assert_eq!(decode(&mut out), Err(WireError::malformed("proof")));
        let mut out = BytesMut::new();
        out.put_u32_le(1 + 33);
        out.put_u8(KIND_PROOF);
        out.put_slice(&[0; 33]);
        assert_eq!(decode(&mut out), Err(WireError::malformed("proof length")));
        // A batch claiming a huge decompressed size.
        let mut out = BytesMut::new();
        out.put_u32_le(1 + 8 + 1 + 4 + 3);
        out.put_u8(KIND_BATCH);
        out.put_u64_le(1);
        out.put_u8(FLAG_LZ4);
        out.put_u32_le(u32::MAX);
        out.put_slice(b"abc");
        assert_eq!(
            decode(&mut out),
            Err(WireError::Frame(framing::Error::TooLarge {
                len: u32::MAX as usize,
                max: LIMITS.max_frame
            }))
        );
    }

    /// The bytes on the wire, written out by hand from the protocol as it
    /// was before the framing moved to `framing`: they must not change
    /// (WAN protocol version 2).
    #[test]
    fn the_bytes_on_the_wire_are_pinned() {
        let bytes = |f: &Frame| {
            let mut out = BytesMut::new();
            encode(f, &mut out);
            out.to_vec()
        };
        assert_eq!(
            bytes(&Frame::Refuse("no".into())),
            b"\x05\x00\x00\x00\x03\x02\x00no"
        );
        assert_eq!(
            bytes(&Frame::Received(9)),
            b"\x09\x00\x00\x00\x05\x09\x00\x00\x00\x00\x00\x00\x00"
        );
        assert_eq!(
            bytes(&Frame::Applied(10)),
            b"\x09\x00\x00\x00\x06\x0a\x00\x00\x00\x00\x00\x00\x00"
        );
        assert_eq!(
            bytes(&Frame::NeedFull(vec![(4, Bytes::from_static(b"k1"))])),
            b"\x0d\x00\x00\x00\x07\x01\x00\x00\x00\x04\x00\x02\x00\x00\x00k1"
        );
        let mut want = b"\x21\x00\x00\x00\x08".to_vec();
        want.extend_from_slice(&[3; 32]);
        assert_eq!(bytes(&Frame::Proof([3; 32])), want);
        let raw = Frame::Batch {
            id: 1,
            body: Bytes::from_static(b"abc"),
        };
        assert_eq!(
            bytes(&raw),
            b"\x11\x00\x00\x00\x04\x01\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00abc"
        );
        let compressed = bytes(&Frame::Batch {
            id: 1,
            body: Bytes::from(vec![b'x'; 4096]),
        });
        assert_eq!(
            &compressed[4..18],
            b"\x04\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x10\x00\x00"
        );
        assert_eq!(
            compressed[..4],
            ((compressed.len() - 4) as u32).to_le_bytes()
        );
    }

    proptest! {
        #[test]
        fn random_frames_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut buf = BytesMut::from(&data[..]);
            while let Ok(Some(f)) = decode(&mut buf) {
                if let Frame::Batch { body, .. } = f {
                    let _ = decode_entries(&body, 271);
                    let _ = max_seqs(&body);
                }
            }
        }
    }
}
