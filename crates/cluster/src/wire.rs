//! Node-to-node framing. Every frame is `len: u32 LE | kind: u8 | payload`,
//! `len` counting kind and payload and capped at [`MAX_FRAME`], so a peer
//! cannot make us allocate more than that. The first frame each side sends
//! is a [`Hello`] starting with the magic and the protocol version: anything
//! else on `cluster_listen` (a Redis client, an old node) is refused before
//! a single other byte is interpreted.

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub const MAGIC: &[u8; 4] = b"DGRD";
/// 2: every replication batch is answered by one ack frame.
/// 3: a snapshot's end marker and its ack carry the snapshot's id.
/// 4: pings carry a lease token and are answered ([`KIND_PONG`]); batches
/// carry the sender's table epoch.
pub const PROTOCOL_VERSION: u16 = 4;
pub const MAX_FRAME: usize = 64 << 20;

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

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("not a deltagrid peer (bad magic)")]
    BadMagic,
    #[error("unsupported protocol version {0} (this node speaks {PROTOCOL_VERSION})")]
    Version(u16),
    #[error("frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("malformed {0}")]
    Malformed(&'static str),
}

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
        let mut p = BytesMut::new();
        p.put_u64_le(self.id);
        p.put_u16_le(self.members.len().min(u16::MAX as usize) as u16);
        for (id, addr) in self.members.iter().take(u16::MAX as usize) {
            p.put_u64_le(*id);
            put_str(&mut p, addr);
        }
        encode_frame(KIND_JOINED, &p, out);
    }

    pub fn decode(mut p: Bytes) -> Result<JoinAnswer, WireError> {
        let bad = || WireError::Malformed("join answer");
        if p.remaining() < 10 {
            return Err(bad());
        }
        let id = p.get_u64_le();
        let n = p.get_u16_le() as usize;
        // Each member takes at least 10 bytes: a count past that is a lie.
        if n > p.remaining() / 10 {
            return Err(bad());
        }
        let mut members = Vec::with_capacity(n);
        for _ in 0..n {
            if p.remaining() < 8 {
                return Err(bad());
            }
            let mid = p.get_u64_le();
            members.push((mid, get_str(&mut p).map_err(|_| bad())?));
        }
        if p.has_remaining() {
            return Err(bad());
        }
        Ok(JoinAnswer { id, members })
    }
}

/// Why a frame header is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    TooLarge(usize),
    Empty,
}

/// Splits one `len | kind | payload` frame off the front of `buf`, `len`
/// capped at `max` before anything is allocated: Ok(None) until complete.
/// Shared by the data protocol and the metadata group's.
pub fn split_frame(buf: &mut BytesMut, max: usize) -> Result<Option<(u8, Bytes)>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if len > max {
        return Err(FrameError::TooLarge(len));
    }
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    buf.advance(4);
    let mut frame = buf.split_to(len).freeze();
    let kind = frame.get_u8();
    Ok(Some((kind, frame)))
}

/// One data-protocol frame from the front of `buf`: Ok(None) until complete.
pub fn decode_frame(buf: &mut BytesMut) -> Result<Option<(u8, Bytes)>, WireError> {
    split_frame(buf, MAX_FRAME).map_err(|e| match e {
        FrameError::TooLarge(n) => WireError::TooLarge(n),
        FrameError::Empty => WireError::Malformed("frame"),
    })
}

pub fn encode_frame(kind: u8, payload: &[u8], out: &mut BytesMut) {
    out.put_u32_le(payload.len() as u32 + 1);
    out.put_u8(kind);
    out.put_slice(payload);
}

fn put_str(out: &mut BytesMut, s: &str) {
    out.put_u16_le(s.len().min(u16::MAX as usize) as u16);
    out.put_slice(&s.as_bytes()[..s.len().min(u16::MAX as usize)]);
}

fn get_str(b: &mut Bytes) -> Result<String, WireError> {
    if b.remaining() < 2 {
        return Err(WireError::Malformed("hello"));
    }
    let n = b.get_u16_le() as usize;
    if b.remaining() < n {
        return Err(WireError::Malformed("hello"));
    }
    String::from_utf8(b.split_to(n).to_vec()).map_err(|_| WireError::Malformed("hello"))
}

impl Hello {
    pub fn encode(&self, out: &mut BytesMut) {
        let mut p = BytesMut::new();
        p.put_slice(MAGIC);
        p.put_u16_le(self.version);
        p.put_u16_le(self.site_id);
        put_str(&mut p, &self.node_id);
        put_str(&mut p, &self.cluster_addr);
        put_str(&mut p, &self.client_addr);
        encode_frame(KIND_HELLO, &p, out);
    }

    /// Checks magic and version before reading anything else.
    pub fn decode(kind: u8, mut p: Bytes) -> Result<Hello, WireError> {
        if kind != KIND_HELLO || p.remaining() < 4 || &p[..4] != MAGIC {
            return Err(WireError::BadMagic);
        }
        p.advance(4);
        if p.remaining() < 4 {
            return Err(WireError::Malformed("hello"));
        }
        let version = p.get_u16_le();
        if version != PROTOCOL_VERSION {
            return Err(WireError::Version(version));
        }
        let site_id = p.get_u16_le();
        Ok(Hello {
            version,
            site_id,
            node_id: get_str(&mut p)?,
            cluster_addr: get_str(&mut p)?,
            client_addr: get_str(&mut p)?,
        })
    }
}

/// Reads the first frame's header bytes as they arrive and refuses a peer
/// that does not start like a deltagrid node, without waiting for a full
/// frame (a Redis client sending "*1\r\n$4\r\nPING\r\n" would otherwise
/// announce a 800-million-byte frame and sit there).
pub fn check_preamble(buf: &[u8]) -> Result<(), WireError> {
    let magic_at = 5;
    let have = buf.len().saturating_sub(magic_at).min(4);
    if buf.len() > 4 && buf[4] != KIND_HELLO {
        return Err(WireError::BadMagic);
    }
    if buf[magic_at.min(buf.len())..magic_at.min(buf.len()) + have] != MAGIC[..have] {
        return Err(WireError::BadMagic);
    }
    Ok(())
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
            check_preamble(b"*1\r\n$4\r\nPING\r\n"),
            Err(WireError::BadMagic)
        );
        assert_eq!(
            check_preamble(b"GET / HTTP/1.1\r\n"),
            Err(WireError::BadMagic)
        );
        let mut out = BytesMut::new();
        Hello {
            version: 99,
            ..hello()
        }
        .encode(&mut out);
        assert!(check_preamble(&out).is_ok());
        let (kind, p) = decode_frame(&mut out).unwrap().unwrap();
        assert_eq!(Hello::decode(kind, p), Err(WireError::Version(99)));
    }

    #[test]
    fn oversized_frames_are_refused_before_allocating() {
        let mut buf = BytesMut::from(&u32::MAX.to_le_bytes()[..]);
        assert_eq!(
            decode_frame(&mut buf),
            Err(WireError::TooLarge(u32::MAX as usize))
        );
    }

    /// The bytes on the wire, written out by hand from the protocol as it
    /// was before the framing moved to `framing`: they must not change
    /// (protocol version 4).
    #[test]
    fn the_bytes_on_the_wire_are_pinned() {
        let mut out = BytesMut::new();
        hello().encode(&mut out);
        let want: &[u8] = b"\x2e\x00\x00\x00\x01DGRD\x04\x00\x01\x00\
            \x02\x00n1\x0f\x00127.0.0.1:17001\x0e\x00127.0.0.1:7001";
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
            let _ = check_preamble(&data);
            let mut buf = BytesMut::from(&data[..]);
            if let Ok(Some((kind, p))) = decode_frame(&mut buf) {
                let _ = Hello::decode(kind, p);
            }
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
            prop_assert!(check_preamble(&out[..cut]).is_ok());
            let mut part = BytesMut::from(&out[..cut]);
            match decode_frame(&mut part) {
                Ok(None) => {}
                Ok(Some((kind, p))) => prop_assert!(Hello::decode(kind, p).is_ok()),
                Err(e) => prop_assert!(false, "{e}"),
            }
        }
    }
}
