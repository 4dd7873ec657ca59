//! A frame's payload: fixed-width integers (little-endian), strings
//! (`len: u16 LE | bytes`) and varints (LEB128, 7 bits a byte, low first).
//!
//! [`Payload`] reads them with every read checked against what is left and
//! against the protocol's [`Limits`]: a payload cut short or announcing too
//! much is [`Error::Malformed`] naming what was being read, never a panic
//! and never an allocation of what a peer merely announced.

use bytes::{Buf, BufMut, Bytes};

use crate::{Error, Limits};

/// Appends a string: its length (u16 LE) and its bytes, cut at
/// `u16::MAX` bytes.
pub fn put_str(out: &mut impl BufMut, s: &[u8]) {
    let s = &s[..s.len().min(u16::MAX as usize)];
    out.put_u16_le(s.len() as u16);
    out.put_slice(s);
}

/// Appends a varint: 7 bits a byte, low bits first, the high bit set on
/// every byte but the last (1 to 10 bytes).
pub fn put_varint(out: &mut impl BufMut, mut n: u64) {
    while n >= 0x80 {
        out.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

/// A payload being read.
#[derive(Clone, Debug)]
pub struct Payload {
    bytes: Bytes,
    limits: Limits,
}

impl Payload {
    pub fn new(bytes: Bytes, limits: Limits) -> Payload {
        Payload { bytes, limits }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// What is not read yet.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The next `n` bytes, if there are that many, without reading them.
    pub fn peek(&self, n: usize) -> Option<&[u8]> {
        self.bytes.get(..n)
    }

    /// Passes over `n` bytes (at most what is left).
    pub fn skip(&mut self, n: usize) {
        self.bytes.advance(n.min(self.bytes.len()));
    }

    fn need(&self, n: usize, what: &'static str) -> Result<(), Error> {
        if self.bytes.len() < n {
            return Err(Error::Malformed(what));
        }
        Ok(())
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, Error> {
        self.array(what).map(u8::from_le_bytes)
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, Error> {
        self.array(what).map(u16::from_le_bytes)
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, Error> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, Error> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A fixed-size field (a nonce, a proof).
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Error> {
        self.need(N, what)?;
        let mut a = [0u8; N];
        self.bytes.copy_to_slice(&mut a);
        Ok(a)
    }

    /// The next `n` bytes (a view of the payload, not a copy).
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<Bytes, Error> {
        self.need(n, what)?;
        Ok(self.bytes.split_to(n))
    }

    /// A string's bytes (`len: u16 LE | bytes`), at most
    /// [`Limits::max_str`].
    pub fn str(&mut self, what: &'static str) -> Result<Bytes, Error> {
        let n = self.u16(what)? as usize;
        if n > self.limits.max_str {
            return Err(Error::Malformed(what));
        }
        self.bytes(n, what)
    }

    /// A string that must be UTF-8.
    pub fn string(&mut self, what: &'static str) -> Result<String, Error> {
        String::from_utf8(self.str(what)?.to_vec()).map_err(|_| Error::Malformed(what))
    }

    /// A varint ([`put_varint`]); more than 10 bytes is malformed.
    pub fn varint(&mut self, what: &'static str) -> Result<u64, Error> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8(what)?;
            n |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(Error::Malformed(what))
    }

    /// Checks a count of items read from the payload, each at least
    /// `min_item` bytes (at least 1), before anything is allocated for
    /// them: a count over [`Limits::max_items`] or over what the rest of
    /// the payload can hold is malformed.
    pub fn count(&self, n: usize, min_item: usize, what: &'static str) -> Result<usize, Error> {
        if n > self.limits.max_items || n > self.bytes.len() / min_item.max(1) {
            return Err(Error::Malformed(what));
        }
        Ok(n)
    }

    /// Nothing may be left.
    pub fn finish(self, what: &'static str) -> Result<(), Error> {
        if !self.bytes.is_empty() {
            return Err(Error::Malformed(what));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use proptest::prelude::*;

    const LIMITS: Limits = Limits {
        max_frame: 1 << 20,
        max_str: 100,
        max_items: 50,
    };

    fn payload(b: &[u8]) -> Payload {
        Payload::new(Bytes::copy_from_slice(b), LIMITS)
    }

    #[test]
    fn the_bytes_of_strings_and_varints() {
        let mut out = BytesMut::new();
        put_str(&mut out, b"n1");
        put_str(&mut out, b"");
        for n in [0, 127, 128, 300, u64::MAX] {
            put_varint(&mut out, n);
        }
        let mut want = b"\x02\x00n1\x00\x00\x00\x7f\x80\x01\xac\x02".to_vec();
        want.extend_from_slice(&[0xff; 9]);
        want.push(0x01);
        assert_eq!(&out[..], &want[..]);
        let mut long = BytesMut::new();
        put_str(&mut long, &[b'x'; 70_000]);
        assert_eq!(long.len(), 2 + u16::MAX as usize);
        assert_eq!(&long[..2], &u16::MAX.to_le_bytes());
    }

    #[test]
    fn limits_are_checked_before_reading_on() {
        let mut long = BytesMut::new();
        put_str(&mut long, &[b'x'; 101]);
        assert_eq!(payload(&long).str("name"), Err(Error::Malformed("name")));
        let p = payload(&[0; 40]);
        assert_eq!(p.count(40, 1, "items"), Ok(40));
        assert_eq!(p.count(41, 1, "items"), Err(Error::Malformed("items")));
        assert_eq!(p.count(5, 10, "items"), Err(Error::Malformed("items")));
        assert_eq!(
            payload(&[0; 60]).count(51, 1, "items"),
            Err(Error::Malformed("items"))
        );
        assert_eq!(
            payload(&[0xff; 11]).varint("seq"),
            Err(Error::Malformed("seq"))
        );
        assert_eq!(payload(&[0x80]).varint("seq"), Err(Error::Malformed("seq")));
        assert_eq!(
            payload(b"\x02\x00\xff\xfe").string("name"),
            Err(Error::Malformed("name"))
        );
        assert_eq!(payload(b"\x01").u16("id"), Err(Error::Malformed("id")));
        assert_eq!(
            payload(b"x").finish("hello"),
            Err(Error::Malformed("hello"))
        );
    }

    proptest! {
        #[test]
        fn fields_round_trip(
            a in any::<u8>(), b in any::<u16>(), c in any::<u32>(), d in any::<u64>(),
            s in "\\PC{0,30}", v in any::<u64>(), arr in any::<[u8; 16]>(),
        ) {
            let mut out = BytesMut::new();
            out.put_u8(a);
            out.put_u16_le(b);
            out.put_u32_le(c);
            out.put_u64_le(d);
            put_str(&mut out, s.as_bytes());
            put_varint(&mut out, v);
            out.put_slice(&arr);
            let mut p = payload(&out);
            prop_assert_eq!(p.u8("a"), Ok(a));
            prop_assert_eq!(p.u16("b"), Ok(b));
            prop_assert_eq!(p.u32("c"), Ok(c));
            prop_assert_eq!(p.u64("d"), Ok(d));
            prop_assert_eq!(p.string("s"), Ok(s));
            prop_assert_eq!(p.varint("v"), Ok(v));
            prop_assert_eq!(p.array::<16>("arr"), Ok(arr));
            prop_assert!(p.finish("end").is_ok());
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..100)) {
            let mut p = payload(&data);
            let _ = p.string("s");
            let _ = p.varint("v");
            let _ = p.array::<16>("a");
            if let Ok(n) = p.u32("n") {
                let _ = p.count(n as usize, 0, "n");
            }
            let _ = p.bytes(usize::MAX, "b");
            p.skip(usize::MAX);
            prop_assert!(p.is_empty());
        }

        #[test]
        fn a_truncated_field_is_malformed_not_a_panic(v in any::<u64>(), cut in 0usize..10) {
            let mut out = BytesMut::new();
            put_varint(&mut out, v);
            let cut = cut.min(out.len() - 1);
            prop_assert_eq!(payload(&out[..cut]).varint("v"), Err(Error::Malformed("v")));
        }
    }
}
