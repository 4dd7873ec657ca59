//! The hello that opens every connection: a frame of the protocol's hello
//! kind whose payload starts with its 4-byte magic and its version (u16
//! LE). A [`Protocol`] writes that head, checks it in a peer's hello, and
//! refuses a stranger from its first bytes, before a whole frame arrived
//! (a Redis client's `*1\r\n$4\r\n...` would otherwise announce an
//! 800-million-byte frame and sit there).

use bytes::BufMut;

use crate::{Error, Limits, Payload};

/// One protocol's identity and limits; its frames and payloads are its
/// own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocol {
    /// What messages call it ("" for the node-to-node data link:
    /// "not a deltagrid peer"; "WAN": "not a deltagrid WAN peer").
    pub name: &'static str,
    pub magic: [u8; 4],
    /// The version this node speaks; a hello with another is refused.
    pub version: u16,
    /// The kind of the hello frame.
    pub hello_kind: u8,
    /// The hello's payload length when it is fixed: a frame header
    /// announcing another is refused from its first 4 bytes.
    pub hello_len: Option<usize>,
    pub limits: Limits,
}

impl Protocol {
    /// The error for a peer that does not speak this protocol.
    pub fn bad_magic(&self) -> Error {
        Error::BadMagic(self.name)
    }

    /// Writes the head of a hello payload: magic and `version` (this
    /// node's, [`Protocol::version`], but for tests of a refusal).
    pub fn put_hello(&self, version: u16, out: &mut impl BufMut) {
        out.put_slice(&self.magic);
        out.put_u16_le(version);
    }

    /// Checks the head of a hello before anything else in it is read: a
    /// frame of another kind or without the magic is [`Error::BadMagic`],
    /// another version [`Error::Version`]. Returns the version; `p` is left
    /// at what follows it.
    pub fn check_hello(&self, kind: u8, p: &mut Payload) -> Result<u16, Error> {
        if kind != self.hello_kind || p.peek(4) != Some(&self.magic[..]) {
            return Err(self.bad_magic());
        }
        p.skip(4);
        let version = p.u16("hello")?;
        if version != self.version {
            return Err(Error::Version {
                protocol: self.name,
                got: version,
                speaks: self.version,
            });
        }
        Ok(version)
    }

    /// Refuses a connection whose first bytes (as many as arrived, none
    /// to all) cannot start this protocol's hello: the length when the
    /// hello's is fixed, the hello kind, the magic.
    pub fn check_preamble(&self, buf: &[u8]) -> Result<(), Error> {
        if let (Some(want), Some(len)) = (self.hello_len, crate::announced_len(buf)) {
            if len != 1 + want {
                return Err(self.bad_magic());
            }
        }
        if buf.get(4).is_some_and(|&kind| kind != self.hello_kind) {
            return Err(self.bad_magic());
        }
        let magic = buf.get(5..buf.len().min(9)).unwrap_or(&[]);
        if magic != &self.magic[..magic.len()] {
            return Err(self.bad_magic());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode_frame;
    use bytes::{Bytes, BytesMut};
    use proptest::prelude::*;

    const P: Protocol = Protocol {
        name: "test",
        magic: *b"DGTS",
        version: 3,
        hello_kind: 1,
        hello_len: None,
        limits: Limits::frames_of(1 << 10),
    };

    fn hello(version: u16, rest: &[u8]) -> BytesMut {
        let mut p = BytesMut::new();
        P.put_hello(version, &mut p);
        p.extend_from_slice(rest);
        let mut out = BytesMut::new();
        encode_frame(P.hello_kind, &p, &mut out);
        out
    }

    fn check(frame: &mut BytesMut) -> Result<(u16, Bytes), Error> {
        let (kind, p) = P.limits.split_frame(frame)?.expect("a whole frame");
        let mut p = Payload::new(p, P.limits);
        let version = P.check_hello(kind, &mut p)?;
        Ok((version, p.into_bytes()))
    }

    #[test]
    fn a_hello_is_checked_then_read_on() {
        let mut ok = hello(3, b"more");
        assert_eq!(&ok[..], b"\x0b\x00\x00\x00\x01DGTS\x03\x00more");
        for cut in 0..=ok.len() {
            assert_eq!(P.check_preamble(&ok[..cut]), Ok(()), "cut at {cut}");
        }
        assert_eq!(check(&mut ok), Ok((3, Bytes::from_static(b"more"))));
        assert_eq!(
            check(&mut hello(9, b"")),
            Err(Error::Version {
                protocol: "test",
                got: 9,
                speaks: 3
            })
        );
        assert_eq!(
            check(&mut hello(9, b"")).unwrap_err().to_string(),
            "unsupported test protocol version 9 (this node speaks 3)"
        );
        let mut short = BytesMut::new();
        encode_frame(1, b"DGTS\x03", &mut short);
        assert_eq!(check(&mut short), Err(Error::Malformed("hello")));
    }

    #[test]
    fn strangers_are_refused_from_their_first_bytes() {
        let redis: &[u8] = b"*1\r\n$4\r\nPING\r\n";
        assert_eq!(P.check_preamble(redis), Err(P.bad_magic()));
        let http: &[u8] = b"GET / HTTP/1.1\r\n";
        assert_eq!(P.check_preamble(http), Err(P.bad_magic()));
        let other_magic: &[u8] = b"\x09\x00\x00\x00\x01DGRD\x04\x00";
        assert_eq!(P.check_preamble(other_magic), Err(P.bad_magic()));
        let other_kind: &[u8] = b"\x09\x00\x00\x00\x02DGTS";
        assert_eq!(P.check_preamble(other_kind), Err(P.bad_magic()));
        let mut other_kind = BytesMut::new();
        encode_frame(2, b"DGTS\x03\x00", &mut other_kind);
        assert_eq!(check(&mut other_kind), Err(Error::BadMagic("test")));
        let fixed = Protocol {
            hello_len: Some(10),
            ..P
        };
        assert_eq!(fixed.check_preamble(&hello(3, b"1234")), Ok(()));
        assert_eq!(
            fixed.check_preamble(&hello(3, b"12345")[..4]),
            Err(fixed.bad_magic())
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = P.check_preamble(&data);
            let mut buf = BytesMut::from(&data[..]);
            while let Ok(Some((kind, p))) = P.limits.split_frame(&mut buf) {
                let _ = P.check_hello(kind, &mut Payload::new(p, P.limits));
            }
        }
    }
}
