//! The metadata group's wire protocol, on its own connections (separate
//! from the data connections of `wire.rs`, so a slow snapshot never queues
//! behind replication batches and vice versa).
//!
//! Frames are the shared ones ([`framing`]: `len: u32 LE | kind: u8 |
//! payload`), capped at [`MAX_FRAME`]. The dialer's first frame is a
//! [`Hello`] (magic `DGMD`, version, site, sender, intended receiver); the
//! listener answers with its own. Anything else is refused before another
//! byte is interpreted, and [`PROTOCOL`]'s preamble check refuses a
//! stranger (a Redis client, an HTTP probe, a data connection) from its
//! first bytes.
//!
//! After the hellos the dialer sends requests and the listener answers:
//! `id: u64 LE | postcard body`, answers carrying the request's id, so
//! several calls share one connection and may complete out of order.

use bytes::{BufMut, Bytes, BytesMut};
use framing::{begin_frame, encode_frame, Limits, Payload, Protocol};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

use super::state::{Command, NodeId, Outcome};
use super::TypeConfig;

pub const PROTOCOL_VERSION: u16 = 1;
/// Big enough for a batch of whole-table entries of a 16384-partition site
/// (see the `max_payload_entries` the handle configures).
pub const MAX_FRAME: usize = 32 << 20;

/// The metadata RPC: magic `DGMD`, its version and limits; its hello has a
/// fixed length.
pub const PROTOCOL: Protocol = Protocol {
    name: "metadata",
    magic: *b"DGMD",
    version: PROTOCOL_VERSION,
    hello_kind: KIND_HELLO,
    hello_len: Some(HELLO_LEN),
    limits: Limits::frames_of(MAX_FRAME),
};

pub const KIND_HELLO: u8 = 1;
pub const KIND_REQUEST: u8 = 2;
pub const KIND_RESPONSE: u8 = 3;

const HELLO_LEN: usize = 4 + 2 + 2 + 8 + 8;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    #[error(transparent)]
    Frame(#[from] framing::Error),
    #[error("snapshot over the size limit")]
    SnapshotTooLarge,
}

/// Who is calling whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub site_id: u16,
    pub from: NodeId,
    pub to: NodeId,
}

impl Hello {
    pub fn encode(&self, out: &mut BytesMut) {
        let frame = begin_frame(KIND_HELLO, out);
        PROTOCOL.put_hello(PROTOCOL_VERSION, out);
        out.put_u16_le(self.site_id);
        out.put_u64_le(self.from);
        out.put_u64_le(self.to);
        frame.finish(out, 0);
    }

    /// Checks magic and version before reading anything else.
    pub fn decode(kind: u8, p: Bytes) -> Result<Hello, framing::Error> {
        let mut p = Payload::new(p, PROTOCOL.limits);
        PROTOCOL.check_hello(kind, &mut p)?;
        if p.remaining() != HELLO_LEN - 6 {
            return Err(framing::Error::Malformed("hello"));
        }
        Ok(Hello {
            site_id: p.u16("hello")?,
            from: p.u64("hello")?,
            to: p.u64("hello")?,
        })
    }
}

/// One frame from the front of `buf`: Ok(None) until complete.
pub fn decode_frame(buf: &mut BytesMut) -> Result<Option<(u8, Bytes)>, framing::Error> {
    PROTOCOL.limits.split_frame(buf)
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// Work only the leader can do, forwarded by a member that is not.
    Leader(LeaderOp),
}

/// What a member asks the leader to do on its behalf.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaderOp {
    Propose(Command),
    /// Adds a node to the Raft group: a learner until it caught up, then a
    /// voter.
    AddVoter {
        id: NodeId,
        addr: String,
    },
    RemoveVoter {
        id: NodeId,
    },
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Response {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    /// For a membership change, `Ok(index)` is the index of its log entry.
    Leader(Result<Outcome, ForwardError>),
}

/// Why the node a [`LeaderOp`] was sent to did not carry it out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ForwardError {
    #[error("not the leader (leader: {0:?})")]
    NotLeader(Option<NodeId>),
    #[error("{0}")]
    Failed(String),
}

/// A request or response frame: `id | postcard body`.
pub fn encode_message<T: Serialize>(
    kind: u8,
    id: u64,
    body: &T,
    out: &mut BytesMut,
) -> Result<(), postcard::Error> {
    let mut payload = Vec::with_capacity(64);
    payload.extend_from_slice(&id.to_le_bytes());
    let payload = postcard::to_extend(body, payload)?;
    encode_frame(kind, &payload, out);
    Ok(())
}

/// Decodes a frame's payload. Bounded by the frame: postcard never reads
/// past the slice, and serde preallocates at most a small cautious amount
/// whatever length a peer claims.
pub fn decode_message<T: for<'de> Deserialize<'de>>(
    payload: &[u8],
) -> Result<(u64, T), framing::Error> {
    let malformed = framing::Error::Malformed("message");
    let (id, body) = payload.split_first_chunk::<8>().ok_or(malformed.clone())?;
    let id = u64::from_le_bytes(*id);
    let body = postcard::from_bytes(body).map_err(|_| malformed)?;
    Ok((id, body))
}

/// The id of a message whose body could not be decoded, so its caller can
/// still be answered or failed.
pub fn message_id(payload: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(payload.get(..8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::state::Assignment;
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};
    use proptest::prelude::*;

    fn hello() -> Hello {
        Hello {
            site_id: 7,
            from: 1,
            to: 2,
        }
    }

    fn append_request() -> Request {
        let cmd = Command::SetPartition {
            partition: 3,
            primary: 1,
            replicas: vec![2],
            in_sync: vec![2],
            expected_epoch: 4,
        };
        let entry = Entry::<TypeConfig> {
            log_id: LogId::new(CommittedLeaderId::new(2, 1), 10),
            payload: EntryPayload::Normal(cmd),
        };
        Request::AppendEntries(AppendEntriesRequest {
            vote: Vote::new_committed(2, 1),
            prev_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), 9)),
            entries: vec![entry],
            leader_commit: None,
        })
    }

    #[test]
    fn hello_round_trips_and_passes_the_preamble_check_at_every_length() {
        let mut out = BytesMut::new();
        hello().encode(&mut out);
        for cut in 0..=out.len() {
            assert_eq!(PROTOCOL.check_preamble(&out[..cut]), Ok(()), "cut at {cut}");
        }
        let (kind, p) = decode_frame(&mut out).unwrap().unwrap();
        assert_eq!(Hello::decode(kind, p), Ok(hello()));
        assert!(out.is_empty());
    }

    #[test]
    fn strangers_are_refused() {
        assert_eq!(
            PROTOCOL.check_preamble(b"*1\r\n$4\r\nPING\r\n"),
            Err(PROTOCOL.bad_magic())
        );
        assert_eq!(
            PROTOCOL.check_preamble(b"GET / HTTP/1.1\r\n"),
            Err(PROTOCOL.bad_magic())
        );
        // A data-connection hello (wire.rs) is not a metadata hello.
        let mut data = BytesMut::new();
        crate::wire::Hello {
            version: crate::wire::PROTOCOL_VERSION,
            site_id: 7,
            node_id: "n1".into(),
            cluster_addr: "127.0.0.1:1".into(),
            client_addr: "127.0.0.1:2".into(),
            tls_client_addr: None,
        }
        .encode(&mut data);
        assert_eq!(PROTOCOL.check_preamble(&data), Err(PROTOCOL.bad_magic()));
        // Right magic, wrong version.
        let mut p = BytesMut::new();
        PROTOCOL.put_hello(9, &mut p);
        p.put_slice(&[0; HELLO_LEN - 6]);
        assert_eq!(
            Hello::decode(KIND_HELLO, p.freeze()),
            Err(framing::Error::Version {
                protocol: "metadata",
                got: 9,
                speaks: PROTOCOL_VERSION
            })
        );
        let mut huge = BytesMut::from(&u32::MAX.to_le_bytes()[..]);
        assert_eq!(
            decode_frame(&mut huge),
            Err(framing::Error::TooLarge {
                len: u32::MAX as usize,
                max: MAX_FRAME
            })
        );
    }

    #[test]
    fn messages_round_trip() {
        let mut out = BytesMut::new();
        encode_message(KIND_REQUEST, 42, &append_request(), &mut out).unwrap();
        let (kind, p) = decode_frame(&mut out).unwrap().unwrap();
        assert_eq!(kind, KIND_REQUEST);
        let (id, req): (u64, Request) = decode_message(&p).unwrap();
        assert_eq!(id, 42);
        match (req, append_request()) {
            (Request::AppendEntries(a), Request::AppendEntries(b)) => {
                assert_eq!(
                    (a.vote, a.prev_log_id, a.leader_commit),
                    (b.vote, b.prev_log_id, b.leader_commit)
                );
                assert_eq!(a.entries, b.entries);
            }
            other => panic!("{other:?}"),
        }
        let set = Command::SetTable {
            partitions: vec![Assignment::new(1, vec![], vec![])],
            expected_epoch: 1,
        };
        let mut out = BytesMut::new();
        encode_message(
            KIND_REQUEST,
            1,
            &Request::Leader(LeaderOp::Propose(set.clone())),
            &mut out,
        )
        .unwrap();
        let (_, p) = decode_frame(&mut out).unwrap().unwrap();
        assert!(
            matches!(decode_message::<Request>(&p), Ok((1, Request::Leader(LeaderOp::Propose(c)))) if c == set)
        );
    }

    /// The bytes on the wire, written out by hand from the protocol as it
    /// was before the framing moved to `framing`: they must not change
    /// (metadata protocol version 1).
    #[test]
    fn the_bytes_on_the_wire_are_pinned() {
        let mut out = BytesMut::new();
        hello().encode(&mut out);
        let want: &[u8] = b"\x19\x00\x00\x00\x01DGMD\x01\x00\x07\x00\
            \x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00";
        assert_eq!(&out[..], want);

        let mut out = BytesMut::new();
        let remove = Request::Leader(LeaderOp::RemoveVoter { id: 3 });
        encode_message(KIND_REQUEST, 42, &remove, &mut out).unwrap();
        let want: &[u8] = b"\x0c\x00\x00\x00\x02\x2a\x00\x00\x00\x00\x00\x00\x00\x03\x02\x03";
        assert_eq!(&out[..], want);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = PROTOCOL.check_preamble(&data);
            let mut buf = BytesMut::from(&data[..]);
            while let Ok(Some((kind, p))) = decode_frame(&mut buf) {
                let _ = Hello::decode(kind, p.clone());
                let _ = decode_message::<Request>(&p);
                let _ = decode_message::<Response>(&p);
            }
            let _ = decode_message::<Request>(&data);
            let _ = decode_message::<Response>(&data);
            let _ = super::super::state_machine::decode_snapshot(&data);
        }

        #[test]
        fn corrupted_requests_are_errors_or_requests(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
            let mut out = BytesMut::new();
            encode_message(KIND_REQUEST, 5, &append_request(), &mut out).unwrap();
            let (_, p) = decode_frame(&mut out).unwrap().unwrap();
            let mut p = p.to_vec();
            for (i, b) in flips {
                let i = i.index(p.len());
                p[i] = b;
            }
            let _ = decode_message::<Request>(&p);
        }

        #[test]
        fn truncated_frames_are_incomplete(cut in 0usize..200) {
            let mut out = BytesMut::new();
            encode_message(KIND_REQUEST, 5, &append_request(), &mut out).unwrap();
            let cut = cut.min(out.len() - 1);
            let mut part = BytesMut::from(&out[..cut]);
            prop_assert_eq!(decode_frame(&mut part), Ok(None));
        }
    }
}
