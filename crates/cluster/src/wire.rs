//! The node-to-node data link's frames and payloads (on `cluster_listen`),
//! on the framing every peer protocol shares ([`framing`]: `len: u32 LE |
//! kind: u8 | payload`, capped at [`MAX_FRAME`], so a peer cannot make us
//! allocate more than that). The first frame each side sends is a
//! [`Hello`] starting with the magic and the protocol version: anything
//! else on `cluster_listen` (a Redis client, an old node) is refused before
//! a single other byte is interpreted ([`PROTOCOL`]).

use bytes::{BufMut, Bytes, BytesMut};
use framing::{begin_frame, put_str, Limits, Payload, Protocol};

pub use framing::encode_frame;

/// 2: every replication batch is answered by one ack frame.
/// 3: a snapshot's end marker and its ack carry the snapshot's id.
/// 4: pings carry a lease token and are answered ([`KIND_PONG`]); batches
/// carry the sender's table epoch.
/// 5: a snapshot's begin carries the copy's settled point (tombstones).
pub const PROTOCOL_VERSION: u16 = 7;
pub const MAX_FRAME: usize = 64 << 20;

/// The data link: magic `DGRD`, its version and limits.
pub const PROTOCOL: Protocol = Protocol {
    name: "",
    magic: *b"DGRD",
    version: PROTOCOL_VERSION,
    hello_kind: KIND_HELLO,
    hello_len: None,
    limits: Limits::frames_of(MAX_FRAME),
};

pub const KIND_HELLO: u8 = 1;
pub const KIND_PING: u8 = 2;
pub const KIND_BATCH: u8 = 3;
pub const KIND_ACK: u8 = 4;
/// After its hello, a node that is not a member asks to join.
pub const KIND_JOIN: u8 = 5;
/// The answer to a join: [`JoinAnswer`].
pub const KIND_JOINED: u8 = 6;
/// A refused join: a UTF-8 reason.
pub const KIND_REFUSED: u8 = 7;
/// The answer to a ping (`token u64`): the token and the index of the
/// last metadata entry the answering node applied (`u64`), see
/// [`crate::lease`].
pub const KIND_PONG: u8 = 8;
/// A pub/sub message for this node's subscribers
/// ([`crate::broadcast::Message`]); a node that does not know the kind
/// ignores it.
pub const KIND_MESSAGE: u8 = 9;
/// A node's copies loaded from its disk, sent when a connection opens:
/// `partition u16 | next seq u64 | hlc u64 | site u16` each (protocol 6).
pub const KIND_HOLDINGS: u8 = 10;

/// Sent when a connection opens by a node whose copies came back whole
/// from its disk (no payload; protocol 6).
pub const KIND_RESTORED: u8 = 11;

/// Bytes of one copy in a [`KIND_HOLDINGS`] frame.
const HOLDING_LEN: usize = 2 + 8 + 8 + 2;

/// A [`KIND_HOLDINGS`] payload.
pub fn encode_holdings(copies: &[(u16, u64, keyspace::Version)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(copies.len() * HOLDING_LEN);
    for (p, next, v) in copies {
        out.extend_from_slice(&p.to_le_bytes());
        out.extend_from_slice(&next.to_le_bytes());
        out.extend_from_slice(&v.hlc.to_le_bytes());
        out.extend_from_slice(&v.site.to_le_bytes());
    }
    out
}

/// Reads a [`KIND_HOLDINGS`] payload; None when its length is not a whole
/// number of copies.
pub fn decode_holdings(payload: &[u8]) -> Option<Vec<(u16, u64, keyspace::Version)>> {
    if !payload.len().is_multiple_of(HOLDING_LEN) {
        return None;
    }
    let mut copies = Vec::with_capacity(payload.len() / HOLDING_LEN);
    let mut rest = payload;
    while let Some((p, r)) = rest.split_first_chunk::<2>() {
        let (next, r) = r.split_first_chunk::<8>()?;
        let (hlc, r) = r.split_first_chunk::<8>()?;
        let (site, r) = r.split_first_chunk::<2>()?;
        copies.push((
            u16::from_le_bytes(*p),
            u64::from_le_bytes(*next),
            keyspace::Version {
                hlc: u64::from_le_bytes(*hlc),
                site: u16::from_le_bytes(*site),
            },
        ));
        rest = r;
    }
    rest.is_empty().then_some(copies)
}

/// Why a peer's bytes are refused: the data link has nothing to refuse
/// beyond what the framing does.
pub type WireError = framing::Error;

/// What a node tells a peer about itself when a connection opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub site_id: u16,
    pub node_id: String,
    /// Address peers dial for node-to-node traffic.
    pub cluster_addr: String,
    /// Address Redis clients use (what MOVED points to).
    pub client_addr: String,
    /// Address of its TLS client port, if any (sent as "" when none).
    pub tls_client_addr: Option<String>,
}

impl Hello {
    pub fn encode(&self, out: &mut BytesMut) {
        let frame = begin_frame(KIND_HELLO, out);
        PROTOCOL.put_hello(self.version, out);
        out.put_u16_le(self.site_id);
        put_str(out, self.node_id.as_bytes());
        put_str(out, self.cluster_addr.as_bytes());
        put_str(out, self.client_addr.as_bytes());
        put_str(
            out,
            self.tls_client_addr.as_deref().unwrap_or("").as_bytes(),
        );
        frame.finish(out, 0);
    }

    /// Checks magic and version before reading anything else.
    pub fn decode(kind: u8, p: Bytes) -> Result<Hello, WireError> {
        let mut p = Payload::new(p, PROTOCOL.limits);
        let version = PROTOCOL.check_hello(kind, &mut p)?;
        Ok(Hello {
            version,
            site_id: p.u16("hello")?,
            node_id: p.string("hello")?,
            cluster_addr: p.string("hello")?,
            client_addr: p.string("hello")?,
            tls_client_addr: Some(p.string("hello")?).filter(|a| !a.is_empty()),
        })
    }
}

/// What a member tells a node it let join: its node id and every member's
/// (node id, cluster address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinAnswer {
    pub id: u64,
    pub members: Vec<(u64, String)>,
}

impl JoinAnswer {
    pub fn encode(&self, out: &mut BytesMut) {
        let frame = begin_frame(KIND_JOINED, out);
        out.put_u64_le(self.id);
        let members = &self.members[..self.members.len().min(u16::MAX as usize)];
        out.put_u16_le(members.len() as u16);
        for (id, addr) in members {
            out.put_u64_le(*id);
            put_str(out, addr.as_bytes());
        }
        frame.finish(out, 0);
    }

    pub fn decode(p: Bytes) -> Result<JoinAnswer, WireError> {
        const WHAT: &str = "join answer";
        let mut p = Payload::new(p, PROTOCOL.limits);
        let id = p.u64(WHAT)?;
        let n = p.u16(WHAT)? as usize;
        // Each member takes at least 10 bytes: a count past that is a lie.
        let n = p.count(n, 10, WHAT)?;
        let members = (0..n)
            .map(|_| Ok((p.u64(WHAT)?, p.string(WHAT)?)))
            .collect::<Result<_, WireError>>()?;
        p.finish(WHAT)?;
        Ok(JoinAnswer { id, members })
    }
}

/// One data-link frame from the front of `buf`: Ok(None) until complete.
pub fn decode_frame(buf: &mut BytesMut) -> Result<Option<(u8, Bytes)>, WireError> {
    PROTOCOL.limits.split_frame(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hello() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            site_id: 1,
            node_id: "n1".into(),
            cluster_addr: "127.0.0.1:17001".into(),
            client_addr: "127.0.0.1:7001".into(),
            tls_client_addr: Some("127.0.0.1:7443".into()),
        }
    }

    #[test]
    fn hello_round_trips() {
        let mut out = BytesMut::new();
        hello().encode(&mut out);
        let (kind, p) = decode_frame(&mut out).unwrap().unwrap();
        assert_eq!(Hello::decode(kind, p).unwrap(), hello());
        assert!(out.is_empty());
    }

    #[test]
    fn wrong_protocol_or_version_is_refused() {
        assert_eq!(
            PROTOCOL.check_preamble(b"*1\r\n$4\r\nPING\r\n"),
            Err(PROTOCOL.bad_magic())
        );
        assert_eq!(
            PROTOCOL.check_preamble(b"GET / HTTP/1.1\r\n"),
            Err(PROTOCOL.bad_magic())
        );
        let mut out = BytesMut::new();
        Hello {
            version: 99,
            ..hello()
        }
        .encode(&mut out);
        assert!(PROTOCOL.check_preamble(&out).is_ok());
        let (kind, p) = decode_frame(&mut out).unwrap().unwrap();
        assert_eq!(
            Hello::decode(kind, p),
            Err(WireError::Version {
                protocol: "",
                got: 99,
                speaks: PROTOCOL_VERSION
            })
        );
    }

    #[test]
    fn oversized_frames_are_refused_before_allocating() {
        let mut buf = BytesMut::from(&u32::MAX.to_le_bytes()[..]);
        assert_eq!(
            decode_frame(&mut buf),
            Err(WireError::TooLarge {
                len: u32::MAX as usize,
                max: MAX_FRAME
            })
        );
    }

    /// The bytes on the wire, written out by hand from the protocol as it
    /// was before the framing moved to `framing`: they must not change
    /// (protocol version 4; 5 changed only the version; 6 the version, a
    /// replication entry and a frame kind; 7 added the hello's TLS client
    /// address).
    #[test]
    fn the_bytes_on_the_wire_are_pinned() {
        let mut out = BytesMut::new();
        hello().encode(&mut out);
        let want: &[u8] = b"\x3e\x00\x00\x00\x01DGRD\x07\x00\x01\x00\
            \x02\x00n1\x0f\x00127.0.0.1:17001\x0e\x00127.0.0.1:7001\x0e\x00127.0.0.1:7443";
        assert_eq!(&out[..], want);

        let mut out = BytesMut::new();
        JoinAnswer {
            id: 3,
            members: vec![(1, "a:1".into()), (2, "b:2".into())],
        }
        .encode(&mut out);
        let want: &[u8] = b"\x25\x00\x00\x00\x06\x03\x00\x00\x00\x00\x00\x00\x00\x02\x00\
            \x01\x00\x00\x00\x00\x00\x00\x00\x03\x00a:1\
            \x02\x00\x00\x00\x00\x00\x00\x00\x03\x00b:2";
        assert_eq!(&out[..], want);
        assert_eq!(
            JoinAnswer::decode(Bytes::copy_from_slice(&want[5..]))
                .unwrap()
                .members[1],
            (2, "b:2".to_string())
        );

        let mut out = BytesMut::new();
        encode_frame(KIND_PING, &7u64.to_le_bytes(), &mut out);
        encode_frame(KIND_JOIN, &[], &mut out);
        assert_eq!(
            &out[..],
            b"\x09\x00\x00\x00\x02\x07\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x05"
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = PROTOCOL.check_preamble(&data);
            let mut buf = BytesMut::from(&data[..]);
            if let Ok(Some((kind, p))) = decode_frame(&mut buf) {
                let _ = Hello::decode(kind, p);
            }
        }

        #[test]
        fn holdings_round_trip_and_garbage_never_panics(
            copies in proptest::collection::vec((any::<u16>(), any::<u64>(), any::<u64>(), any::<u16>()), 0..8),
            data in proptest::collection::vec(any::<u8>(), 0..120),
        ) {
            let copies: Vec<_> = copies
                .into_iter()
                .map(|(p, n, hlc, site)| (p, n, keyspace::Version { hlc, site }))
                .collect();
            let bytes = encode_holdings(&copies);
            prop_assert_eq!(decode_holdings(&bytes), Some(copies.clone()));
            if !bytes.is_empty() {
                prop_assert_eq!(decode_holdings(&bytes[..bytes.len() - 1]), None);
            }
            let _ = decode_holdings(&data);
        }

        #[test]
        fn join_answers_round_trip_and_garbage_never_panics(
            id in any::<u64>(),
            members in proptest::collection::vec((any::<u64>(), "[0-9.:]{0,21}"), 0..8),
            data in proptest::collection::vec(any::<u8>(), 0..120),
        ) {
            let answer = JoinAnswer { id, members };
            let mut out = BytesMut::new();
            answer.encode(&mut out);
            let (kind, p) = decode_frame(&mut out).unwrap().unwrap();
            prop_assert_eq!(kind, KIND_JOINED);
            prop_assert_eq!(JoinAnswer::decode(p.clone()).unwrap(), answer);
            for cut in 0..p.len() {
                prop_assert!(JoinAnswer::decode(p.slice(..cut)).is_err());
            }
            let _ = JoinAnswer::decode(Bytes::from(data));
        }

        #[test]
        fn truncated_hellos_are_incomplete_or_malformed(cut in 0usize..60) {
            let mut out = BytesMut::new();
            hello().encode(&mut out);
            let cut = cut.min(out.len());
            prop_assert!(PROTOCOL.check_preamble(&out[..cut]).is_ok());
            let mut part = BytesMut::from(&out[..cut]);
            match decode_frame(&mut part) {
                Ok(None) => {}
                Ok(Some((kind, p))) => prop_assert!(Hello::decode(kind, p).is_ok()),
                Err(e) => prop_assert!(false, "{e}"),
            }
        }
    }
}
