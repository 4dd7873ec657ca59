//! Length-prefixed frames: `len: u32 LE | kind: u8 | payload`, `len`
//! counting kind and payload, under one limits policy ([`Limits`]).
//!
//! Decoding takes a frame off the front of a read buffer once all of it is
//! there ([`Limits::split_frame`]): the announced length is checked against
//! the limit first, so a peer announcing more is refused before a byte is
//! allocated for it, and a frame not complete yet is `Ok(None)` (read more).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::Error;

/// What a protocol accepts from a peer. Every length and count read from
/// the wire is checked against these before anything is allocated for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame (kind and payload), and largest thing a frame may
    /// say it expands to (a compressed batch's raw length).
    pub max_frame: usize,
    /// Longest string ([`crate::Payload::str`]); strings are
    /// u16-length-prefixed, so at most `u16::MAX`.
    pub max_str: usize,
    /// Most items a count in a payload may announce
    /// ([`crate::Payload::count`]).
    pub max_items: usize,
}

impl Limits {
    /// Frames of up to `max_frame` bytes, strings and counts as large as
    /// a u16 length allows.
    pub const fn frames_of(max_frame: usize) -> Limits {
        Limits {
            max_frame,
            max_str: u16::MAX as usize,
            max_items: u16::MAX as usize,
        }
    }

    /// Refuses a length over `max_frame`.
    pub fn check_len(&self, len: usize) -> Result<(), Error> {
        if len > self.max_frame {
            return Err(Error::TooLarge {
                len,
                max: self.max_frame,
            });
        }
        Ok(())
    }

    /// Splits one frame off the front of `buf`: its kind and payload, or
    /// Ok(None) until all of it has arrived. The announced length is
    /// checked before anything else (nothing is allocated: the payload is
    /// a view of `buf`).
    pub fn split_frame(&self, buf: &mut BytesMut) -> Result<Option<(u8, Bytes)>, Error> {
        let Some(len) = announced_len(buf) else {
            return Ok(None);
        };
        self.check_len(len)?;
        if len == 0 {
            return Err(Error::Malformed("empty frame"));
        }
        if buf.len() < 4 + len {
            return Ok(None);
        }
        buf.advance(4);
        let mut frame = buf.split_to(len).freeze();
        let kind = frame.get_u8();
        Ok(Some((kind, frame)))
    }
}

/// The length the frame at the front of `buf` announces, once its 4 bytes
/// are there (unchecked: see [`Limits::split_frame`]).
pub fn announced_len(buf: &[u8]) -> Option<usize> {
    let len: [u8; 4] = buf.get(..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(len) as usize)
}

/// Appends one frame to `out`.
pub fn encode_frame(kind: u8, payload: &[u8], out: &mut BytesMut) {
    out.reserve(5 + payload.len());
    let frame = begin_frame(kind, out);
    out.put_slice(payload);
    frame.finish(out, 0);
}

/// Starts a frame whose payload is then written straight into `out`:
/// [`OpenFrame::finish`] sets its length.
pub fn begin_frame(kind: u8, out: &mut BytesMut) -> OpenFrame {
    let start = out.len();
    out.put_u32_le(0);
    out.put_u8(kind);
    OpenFrame { start }
}

/// A frame begun in a buffer, its length not set yet.
#[must_use = "a frame's length is set by finish"]
#[derive(Debug)]
pub struct OpenFrame {
    start: usize,
}

impl OpenFrame {
    /// Sets the frame's length: what was written to `out` since it began,
    /// plus `tail` bytes the caller writes right after `out` (a body sent
    /// from its own buffer rather than copied).
    pub fn finish(self, out: &mut BytesMut, tail: usize) {
        let len = (out.len() - self.start - 4 + tail) as u32;
        out[self.start..self.start + 4].copy_from_slice(&len.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: Limits = Limits::frames_of(1 << 10);

    #[test]
    fn the_bytes_of_a_frame() {
        let mut out = BytesMut::new();
        encode_frame(7, b"abc", &mut out);
        encode_frame(2, b"", &mut out);
        assert_eq!(&out[..], b"\x04\x00\x00\x00\x07abc\x01\x00\x00\x00\x02");
        let mut parts = BytesMut::from(&b"xy"[..]);
        let frame = begin_frame(7, &mut parts);
        parts.put_slice(b"a");
        frame.finish(&mut parts, 2);
        parts.put_slice(b"bc");
        assert_eq!(&parts[..], b"xy\x04\x00\x00\x00\x07abc");
    }

    #[test]
    fn an_empty_frame_is_malformed() {
        let mut buf = BytesMut::from(&[0u8, 0, 0, 0, 1][..]);
        assert_eq!(
            LIMITS.split_frame(&mut buf),
            Err(Error::Malformed("empty frame"))
        );
    }

    proptest! {
        #[test]
        fn frames_round_trip(
            frames in proptest::collection::vec(
                (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..300)),
                0..8,
            ),
        ) {
            let mut out = BytesMut::new();
            for (kind, payload) in &frames {
                encode_frame(*kind, payload, &mut out);
            }
            for (kind, payload) in &frames {
                let (k, p) = LIMITS.split_frame(&mut out).unwrap().unwrap();
                prop_assert_eq!((k, &p[..]), (*kind, &payload[..]));
            }
            prop_assert!(out.is_empty());
            prop_assert_eq!(LIMITS.split_frame(&mut out), Ok(None));
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut buf = BytesMut::from(&data[..]);
            while let Ok(Some(_)) = LIMITS.split_frame(&mut buf) {}
        }

        #[test]
        fn truncated_frames_ask_for_more(
            kind in any::<u8>(),
            payload in proptest::collection::vec(any::<u8>(), 0..300),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut out = BytesMut::new();
            encode_frame(kind, &payload, &mut out);
            let cut = cut.index(out.len());
            let mut part = BytesMut::from(&out[..cut]);
            prop_assert_eq!(LIMITS.split_frame(&mut part), Ok(None));
            prop_assert_eq!(part.len(), cut, "nothing taken from an incomplete frame");
        }

        #[test]
        fn a_length_over_the_limit_is_refused_however_little_came(
            len in (LIMITS.max_frame as u32 + 1)..=u32::MAX,
            rest in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let mut buf = BytesMut::from(&len.to_le_bytes()[..]);
            buf.extend_from_slice(&rest);
            prop_assert_eq!(
                LIMITS.split_frame(&mut buf),
                Err(Error::TooLarge { len: len as usize, max: LIMITS.max_frame })
            );
        }
    }
}
