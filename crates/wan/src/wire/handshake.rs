//! The WAN handshake's frames: the publisher's [`Hello`] (magic, version,
//! who it is, a fresh nonce), the receiver's [`Welcome`] (who it is, what
//! it applied, a [`Challenge`] when it has `wan.secret`). The publisher's
//! answer to a challenge is a [`super::Frame::Proof`].

use bytes::{BufMut, BytesMut};
use framing::{put_str, Payload};

use super::{KIND_HELLO, PROTOCOL};
use crate::auth::{Nonce, Proof};

/// What a publisher says first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub site_id: u16,
    pub site_name: String,
    /// The source site's partition count: entries are numbered by it.
    pub partitions: u16,
    pub node_id: String,
    /// Random per publisher process: a site whose nodes all restarted
    /// numbers its logs from 1 again, so watermarks are kept per
    /// incarnation and a new one starts with none.
    pub incarnation: u64,
    /// Fresh per connection: the receiver's proof covers it.
    pub nonce: Nonce,
}

/// A receiver with a secret challenges the publisher: its nonce, and its
/// proof that it knows the secret too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    pub nonce: Nonce,
    pub proof: Proof,
}

/// The receiver's answer: who it is, and for each source partition the
/// highest seq its node has applied (so a reconnecting publisher skips
/// what already arrived).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Welcome {
    pub site_id: u16,
    pub site_name: String,
    pub applied: Vec<(u16, u64)>,
    /// Changes when the receiving site starts over without its data (0:
    /// not tracked): a publisher that saw another value re-syncs.
    pub data_incarnation: u64,
    /// Set when the receiver has a secret: the publisher must answer with
    /// a [`super::Frame::Proof`] before any batch.
    pub challenge: Option<Challenge>,
}

impl Hello {
    pub(super) fn encode(&self, out: &mut BytesMut) {
        PROTOCOL.put_hello(self.version, out);
        out.put_u16_le(self.site_id);
        put_str(out, self.site_name.as_bytes());
        out.put_u16_le(self.partitions);
        put_str(out, self.node_id.as_bytes());
        out.put_u64_le(self.incarnation);
        out.put_slice(&self.nonce);
    }

    /// Checks magic and version before reading anything else.
    pub(super) fn decode(b: &mut Payload) -> Result<Hello, framing::Error> {
        Ok(Hello {
            version: PROTOCOL.check_hello(KIND_HELLO, b)?,
            site_id: b.u16("hello")?,
            site_name: b.string("string")?,
            partitions: b.u16("hello")?,
            node_id: b.string("string")?,
            incarnation: b.u64("hello")?,
            nonce: b.array("hello nonce")?,
        })
    }
}

impl Welcome {
    pub(super) fn encode(&self, out: &mut BytesMut) {
        out.put_u16_le(self.site_id);
        put_str(out, self.site_name.as_bytes());
        out.put_u32_le(self.applied.len() as u32);
        for (p, seq) in &self.applied {
            out.put_u16_le(*p);
            out.put_u64_le(*seq);
        }
        out.put_u64_le(self.data_incarnation);
        match &self.challenge {
            None => out.put_u8(0),
            Some(c) => {
                out.put_u8(1);
                out.put_slice(&c.nonce);
                out.put_slice(&c.proof);
            }
        }
    }

    pub(super) fn decode(b: &mut Payload) -> Result<Welcome, framing::Error> {
        let site_id = b.u16("welcome")?;
        let site_name = b.string("string")?;
        let n = b.u32("welcome")? as usize;
        // Each pair takes 10 bytes: a forged count cannot over-allocate.
        let n = b.count(n, 10, "welcome watermarks")?;
        let applied = (0..n)
            .map(|_| Ok((b.u16("welcome")?, b.u64("welcome")?)))
            .collect::<Result<_, framing::Error>>()?;
        let data_incarnation = b.u64("welcome")?;
        let challenge = match b.u8("welcome")? {
            0 => None,
            1 => Some(Challenge {
                nonce: b.array("welcome challenge")?,
                proof: b.array("welcome challenge")?,
            }),
            _ => return Err(framing::Error::Malformed("welcome challenge flag")),
        };
        Ok(Welcome {
            site_id,
            site_name,
            applied,
            data_incarnation,
            challenge,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode, encode, Frame, WireError, PROTOCOL_VERSION};

    fn hello() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            site_id: 3,
            site_name: "london".into(),
            partitions: 271,
            node_id: "n1".into(),
            incarnation: 42,
            nonce: [7; 16],
        }
    }

    fn welcome(challenge: Option<Challenge>) -> Welcome {
        Welcome {
            site_id: 2,
            site_name: "ny".into(),
            applied: vec![(1, 5)],
            data_incarnation: 3,
            challenge,
        }
    }

    fn challenge() -> Challenge {
        Challenge {
            nonce: [1; 16],
            proof: [2; 32],
        }
    }

    fn bytes(f: &Frame) -> BytesMut {
        let mut out = BytesMut::new();
        encode(f, &mut out);
        out
    }

    #[test]
    fn the_handshake_round_trips() {
        let mut welcome_two = welcome(None);
        welcome_two.applied.push((270, 9));
        for f in [
            Frame::Hello(hello()),
            Frame::Welcome(welcome(None)),
            Frame::Welcome(welcome_two),
            Frame::Welcome(welcome(Some(challenge()))),
        ] {
            let mut out = bytes(&f);
            assert_eq!(decode(&mut out), Ok(Some(f)));
            assert!(out.is_empty());
        }
    }

    /// The bytes on the wire, written out by hand from the protocol as it
    /// was before the framing moved to `framing`: they must not change
    /// (WAN protocol version 3, which only added a frame kind).
    #[test]
    fn the_bytes_of_the_handshake_are_pinned() {
        let mut want = b"\x2f\x00\x00\x00\x01DGWN\x03\x00\x03\x00\x06\x00london\x0f\x01\
            \x02\x00n1\x2a\x00\x00\x00\x00\x00\x00\x00"
            .to_vec();
        want.extend_from_slice(&[7; 16]);
        assert_eq!(bytes(&Frame::Hello(hello())), want);

        let mut want = b"\x4e\x00\x00\x00\x02\x02\x00\x02\x00ny\x01\x00\x00\x00\
            \x01\x00\x05\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x01"
            .to_vec();
        want.extend_from_slice(&[1; 16]);
        want.extend_from_slice(&[2; 32]);
        assert_eq!(bytes(&Frame::Welcome(welcome(Some(challenge())))), want);
    }

    #[test]
    fn a_hello_of_another_protocol_or_version_is_refused() {
        let mut out = bytes(&Frame::Hello(Hello {
            version: 9,
            ..hello()
        }));
        assert_eq!(
            decode(&mut out),
            Err(WireError::Frame(framing::Error::Version {
                protocol: "WAN",
                got: 9,
                speaks: PROTOCOL_VERSION
            }))
        );
        let mut out = BytesMut::from(&b"\x09\x00\x00\x00\x01DGRD\x01\x00\x01\x00"[..]);
        assert_eq!(decode(&mut out), Err(PROTOCOL.bad_magic().into()));
        let mut bad_flag = bytes(&Frame::Welcome(welcome(None)));
        *bad_flag.last_mut().unwrap() = 2;
        assert_eq!(
            decode(&mut bad_flag),
            Err(WireError::malformed("welcome challenge flag"))
        );
    }
}
