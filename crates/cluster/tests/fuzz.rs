//! Fuzz targets for the cluster's decoders of peer bytes: the node-to-node
//! data link (`cluster::wire`: frames, hello, join answer, holdings), the
//! replication stream in its batch and ack frames
//! (`cluster::replication::stream`), pub/sub messages
//! (`cluster::broadcast::Message`), and the metadata group's RPC
//! (`cluster::metadata::rpc`: hello, postcard requests and responses) and
//! its snapshot (postcard `SiteMetadata`, what `decode_snapshot` reads).
//! Arbitrary bytes and mutated valid encodings: no panic, no allocation for
//! a merely announced length; encoders round-trip. See docs/fuzzing.md.

use bytes::{Bytes, BytesMut};
use cluster::broadcast::{Message, MessageKind};
use cluster::metadata::rpc::{self, LeaderOp, Request, Response};
use cluster::metadata::{Assignment, Command, SiteMetadata, TypeConfig};
use cluster::replication::stream::{Acks, Entries};
use cluster::replication::{Ack, Entry};
use cluster::wire::{self, Hello, JoinAnswer};
use framing::encode_frame;
use keyspace::codec;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest, VoteResponse};
use openraft::{CommittedLeaderId, EntryPayload, LogId, Vote};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use fuzzing::{bounded, bytes, fuzz, measure, mutated, Hex};

fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[a-z0-9.:\u{e9}-]{{0,{max}}}")).unwrap()
}

fn hello() -> impl Strategy<Value = Hello> {
    (
        any::<u16>(),
        any::<u16>(),
        text(12),
        text(24),
        text(24),
        proptest::option::of(text(24)),
    )
        .prop_map(
            |(version, site_id, node_id, cluster_addr, client_addr, tls)| Hello {
                version,
                site_id,
                node_id,
                cluster_addr,
                client_addr,
                tls_client_addr: tls.filter(|t| !t.is_empty()),
            },
        )
}

fn join_answer() -> impl Strategy<Value = JoinAnswer> {
    (
        any::<u64>(),
        proptest::collection::vec((any::<u64>(), text(24)), 0..6),
    )
        .prop_map(|(id, members)| JoinAnswer { id, members })
}

/// An entry as owned parts: (variant, partition, a, b, c, bytes).
type EntryParts = (u8, u16, u64, u64, u64, Vec<u8>);

fn entry_parts() -> impl Strategy<Value = EntryParts> {
    let body = prop_oneof![
        changes::change().prop_map(|c| changes::encode(&c)),
        proptest::collection::vec(any::<u8>(), 0..24),
    ];
    (
        0u8..9,
        any::<u16>(),
        1u64..u64::MAX - 16,
        any::<u64>(),
        any::<u64>(),
        body,
    )
}

fn entry(p: &EntryParts) -> Entry<'_> {
    let (variant, partition, a, b, c, ref body) = *p;
    match variant {
        0 => Entry::Change {
            partition,
            seq: a,
            change: body,
        },
        1 => Entry::TableEpoch { epoch: b },
        2 => Entry::SnapshotBegin {
            partition,
            next: a,
            settled: b,
        },
        3 => Entry::CatchUpBegin {
            partition,
            next: a,
            hlc: b,
            site: c as u16,
        },
        4 => Entry::SnapshotData {
            partition,
            change: body,
        },
        5 => Entry::SnapshotEnd {
            partition,
            next: a,
            id: b,
            entries: c,
        },
        6 => Entry::WanApplied {
            partition,
            seq: b,
            target: body,
        },
        7 => Entry::TombstonesSettled { partition, hlc: b },
        _ => Entry::BackupTaken {
            partition,
            seq: b,
            id: body,
        },
    }
}

fn batch(parts: &[EntryParts]) -> Vec<u8> {
    let mut out = BytesMut::new();
    parts.iter().for_each(|p| entry(p).encode(&mut out));
    out.to_vec()
}

fn ack() -> impl Strategy<Value = Ack> {
    prop_oneof![
        (any::<u16>(), 0u64..u64::MAX - 16)
            .prop_map(|(partition, seq)| Ack::Applied { partition, seq }),
        (any::<u16>(), any::<u64>())
            .prop_map(|(partition, id)| Ack::SnapshotLoaded { partition, id }),
        (any::<u16>(), any::<u64>())
            .prop_map(|(partition, id)| Ack::SnapshotRefused { partition, id }),
        any::<u16>().prop_map(|partition| Ack::SnapshotNeeded { partition }),
    ]
}

fn holdings() -> impl Strategy<Value = Vec<(u16, u64, keyspace::Version)>> {
    proptest::collection::vec((any::<u16>(), any::<u64>(), changes::version()), 0..6)
}

fn message() -> impl Strategy<Value = Message> {
    (any::<bool>(), changes::blob(16), changes::blob(32)).prop_map(|(shard, channel, payload)| {
        Message {
            kind: if shard {
                MessageKind::ShardPublish
            } else {
                MessageKind::Publish
            },
            channel,
            payload,
        }
    })
}

/// A valid data-link payload of some kind: (kind, payload).
fn data_payload() -> impl Strategy<Value = (u8, Vec<u8>)> {
    prop_oneof![
        hello().prop_map(|h| {
            let mut out = BytesMut::new();
            h.encode(&mut out);
            (wire::KIND_HELLO, out[5..].to_vec())
        }),
        join_answer().prop_map(|a| {
            let mut out = BytesMut::new();
            a.encode(&mut out);
            (wire::KIND_JOINED, out[5..].to_vec())
        }),
        proptest::collection::vec(entry_parts(), 1..5).prop_map(|p| (wire::KIND_BATCH, batch(&p))),
        proptest::collection::vec(ack(), 1..6).prop_map(|acks| {
            let mut out = BytesMut::new();
            acks.iter().for_each(|a| a.encode(&mut out));
            (wire::KIND_ACK, out.to_vec())
        }),
        holdings().prop_map(|h| (wire::KIND_HOLDINGS, wire::encode_holdings(&h))),
        message().prop_map(|m| {
            let mut out = BytesMut::new();
            m.encode(&mut out);
            (wire::KIND_MESSAGE, out.to_vec())
        }),
        any::<u64>().prop_map(|t| (wire::KIND_PING, t.to_le_bytes().to_vec())),
    ]
}

fn framed(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_frame(kind, payload, &mut out);
    out.to_vec()
}

/// Inputs: whole streams of frames mutated, payloads mutated inside a
/// correct frame (reaching the payload decoders), or arbitrary bytes.
fn data_inputs() -> impl Strategy<Value = Hex> {
    let stream = proptest::collection::vec(data_payload(), 1..4).prop_map(|ps| {
        ps.iter()
            .flat_map(|(k, p)| framed(*k, p))
            .collect::<Vec<u8>>()
    });
    let inner = (
        data_payload(),
        proptest::collection::vec(fuzzing::mutation(), 1..8),
    )
        .prop_map(|((k, p), ms)| Hex(framed(k, &fuzzing::mutate(p, &ms))));
    prop_oneof![1 => bytes(256), 2 => mutated(stream), 3 => inner]
}

/// Every decoder a data-link payload may meet, as the node meets them.
fn data_payload_decoders(kind: u8, p: &Bytes) -> Result<(), TestCaseError> {
    let _ = Hello::decode(kind, p.clone());
    let _ = JoinAnswer::decode(p.clone());
    let _ = wire::decode_holdings(p);
    let _ = Message::decode(p.clone());
    let mut entries = Entries::new(p);
    let mut n = 0;
    while let Some(e) = entries.next() {
        n += 1;
        prop_assert!(n <= p.len(), "more entries than bytes");
        prop_assert!(entries.position() <= p.len());
        let _ = entries.next_partition();
        if let Ok(Entry::Change { change, .. } | Entry::SnapshotData { change, .. }) = e {
            let _ = codec::decode(change);
            let _ = codec::head(change);
        }
    }
    prop_assert!(Acks::new(p).count() <= p.len() / 10);
    Ok(())
}

#[test]
fn data_link_decoder() {
    fuzz(
        "cluster data link (wire, stream, broadcast)",
        data_inputs(),
        |Hex(input)| {
            let _ = wire::PROTOCOL.check_preamble(&input);
            let mut buf = BytesMut::from(&input[..]);
            loop {
                let before = buf.len();
                let (got, allocated) = measure(|| wire::decode_frame(&mut buf));
                bounded("wire::decode_frame", allocated, 0, 0, 256)?;
                match got {
                    Ok(Some((kind, p))) => {
                        prop_assert!(buf.len() < before);
                        let (r, allocated) = measure(|| data_payload_decoders(kind, &p));
                        r?;
                        // A sorted set decoded into its large form costs a fixed ~48 KiB
                        // (its index's nodes) whatever its size: a value-building decoder is
                        // held to 1 KiB a byte plus 64 KiB, which still catches any
                        // allocation for an announced length.
                        bounded(
                            "data-link payload decoders",
                            allocated,
                            p.len(),
                            1024,
                            1 << 16,
                        )?;
                    }
                    _ => {
                        prop_assert_eq!(buf.len(), before);
                        break;
                    }
                }
            }
            Ok(())
        },
    );
}

#[test]
fn data_link_round_trip() {
    let strategy = (
        hello(),
        join_answer(),
        proptest::collection::vec(entry_parts(), 0..6),
        proptest::collection::vec(ack(), 0..6),
        holdings(),
        message(),
    );
    fuzz(
        "cluster data link round trip",
        strategy,
        |(h, a, parts, acks, hold, m)| {
            // Another version is refused (tested by the decoder target).
            let h = Hello {
                version: wire::PROTOCOL_VERSION,
                ..h
            };
            let mut out = BytesMut::new();
            h.encode(&mut out);
            a.encode(&mut out);
            let (kind, p) = wire::decode_frame(&mut out).unwrap().unwrap();
            prop_assert_eq!(Hello::decode(kind, p), Ok(h.clone()));
            let (kind, p) = wire::decode_frame(&mut out).unwrap().unwrap();
            prop_assert_eq!(kind, wire::KIND_JOINED);
            prop_assert_eq!(JoinAnswer::decode(p), Ok(a));
            prop_assert!(out.is_empty());

            let bytes = batch(&parts);
            let got: Vec<Entry<'_>> = Entries::new(&bytes)
                .collect::<Result<_, _>>()
                .map_err(|e| TestCaseError::fail(format!("{e}")))?;
            let want: Vec<Entry<'_>> = parts.iter().map(entry).collect();
            prop_assert_eq!(got, want);

            let mut out = BytesMut::new();
            acks.iter().for_each(|a| a.encode(&mut out));
            prop_assert_eq!(out.len(), acks.iter().map(Ack::encoded_len).sum::<usize>());
            prop_assert_eq!(Acks::new(&out).collect::<Vec<_>>(), acks);

            prop_assert_eq!(
                wire::decode_holdings(&wire::encode_holdings(&hold)),
                Some(hold)
            );
            let mut out = BytesMut::new();
            m.encode(&mut out);
            prop_assert_eq!(Message::decode(out.freeze()), Some(m));
            Ok(())
        },
    );
}

// ---- metadata RPC ----

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        (
            any::<u16>(),
            any::<u64>(),
            proptest::collection::vec(any::<u64>(), 0..4),
            proptest::collection::vec(any::<u64>(), 0..4),
            any::<u64>()
        )
            .prop_map(|(partition, primary, replicas, in_sync, expected_epoch)| {
                Command::SetPartition {
                    partition,
                    primary,
                    replicas,
                    in_sync,
                    expected_epoch,
                }
            }),
        (
            proptest::collection::vec(
                (any::<u64>(), proptest::collection::vec(any::<u64>(), 0..3)),
                0..5
            ),
            any::<u64>()
        )
            .prop_map(|(parts, expected_epoch)| Command::SetTable {
                partitions: parts
                    .into_iter()
                    .map(|(p, r)| Assignment::new(p, r.clone(), r))
                    .collect(),
                expected_epoch,
            }),
        any::<u64>().prop_map(|id| Command::MarkDead { id }),
        any::<u64>().prop_map(|id| Command::RemoveMember { id }),
        (
            text(12),
            any::<[u8; 4]>(),
            any::<u16>(),
            text(20),
            proptest::option::of(text(20))
        )
            .prop_map(
                |(name, ip, port, client_addr, tls_client_addr)| Command::Join {
                    name,
                    cluster_addr: std::net::SocketAddr::from((ip, port)),
                    client_addr,
                    tls_client_addr,
                }
            ),
        (
            proptest::collection::vec((any::<u16>(), any::<u64>()), 0..5),
            any::<u64>()
        )
            .prop_map(|(partitions, expected_epoch)| Command::Resolve {
                partitions,
                expected_epoch
            }),
        any::<[u64; 2]>().prop_map(|token| Command::SetInternalToken { token }),
        any::<u64>().prop_map(|value| Command::NewDataIncarnation { value }),
    ]
}

fn leader_op() -> impl Strategy<Value = LeaderOp> {
    prop_oneof![
        command().prop_map(LeaderOp::Propose),
        (any::<u64>(), text(24)).prop_map(|(id, addr)| LeaderOp::AddVoter { id, addr }),
        any::<u64>().prop_map(|id| LeaderOp::RemoveVoter { id }),
    ]
}

fn log_id() -> impl Strategy<Value = LogId<u64>> {
    (any::<u64>(), any::<u64>(), any::<u64>())
        .prop_map(|(t, n, i)| LogId::new(CommittedLeaderId::new(t, n), i))
}

fn request() -> impl Strategy<Value = Request> {
    let entry =
        (log_id(), proptest::option::of(command())).prop_map(|(log_id, cmd)| openraft::Entry::<
            TypeConfig,
        > {
            log_id,
            payload: cmd.map_or(EntryPayload::Blank, EntryPayload::Normal),
        });
    prop_oneof![
        (
            any::<u64>(),
            any::<u64>(),
            proptest::option::of(log_id()),
            proptest::collection::vec(entry, 0..4),
            proptest::option::of(log_id())
        )
            .prop_map(|(term, node, prev_log_id, entries, leader_commit)| {
                Request::AppendEntries(AppendEntriesRequest {
                    vote: Vote::new_committed(term, node),
                    prev_log_id,
                    entries,
                    leader_commit,
                })
            }),
        (any::<u64>(), any::<u64>(), proptest::option::of(log_id())).prop_map(
            |(term, node, last_log_id)| Request::Vote(VoteRequest {
                vote: Vote::new(term, node),
                last_log_id
            })
        ),
        leader_op().prop_map(Request::Leader),
    ]
}

fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        Just(()).prop_map(|()| Response::AppendEntries(Ok(AppendEntriesResponse::Success))),
        (any::<u64>(), any::<u64>()).prop_map(|(t, n)| Response::AppendEntries(Ok(
            AppendEntriesResponse::HigherVote(Vote::new(t, n))
        ))),
        (
            any::<u64>(),
            any::<u64>(),
            any::<bool>(),
            proptest::option::of(log_id())
        )
            .prop_map(|(t, n, vote_granted, last_log_id)| {
                Response::Vote(Ok(VoteResponse {
                    vote: Vote::new(t, n),
                    vote_granted,
                    last_log_id,
                }))
            }),
        any::<u64>().prop_map(|i| Response::Leader(Ok(Ok(i)))),
        text(20).prop_map(|s| Response::Leader(Err(rpc::ForwardError::Failed(s)))),
        proptest::option::of(any::<u64>())
            .prop_map(|l| Response::Leader(Err(rpc::ForwardError::NotLeader(l)))),
    ]
}

fn metadata_payload() -> impl Strategy<Value = (u8, Vec<u8>)> {
    let msg = |kind: u8, body: Vec<u8>| -> (u8, Vec<u8>) {
        let mut out = BytesMut::new();
        encode_frame(kind, &body, &mut out);
        (kind, out[5..].to_vec())
    };
    prop_oneof![
        (any::<u16>(), any::<u64>(), any::<u64>()).prop_map(|(site_id, from, to)| {
            let mut out = BytesMut::new();
            rpc::Hello { site_id, from, to }.encode(&mut out);
            (rpc::KIND_HELLO, out[5..].to_vec())
        }),
        (any::<u64>(), request()).prop_map(move |(id, r)| {
            let mut out = BytesMut::new();
            rpc::encode_message(rpc::KIND_REQUEST, id, &r, &mut out).unwrap();
            msg(rpc::KIND_REQUEST, out[5..].to_vec())
        }),
        (any::<u64>(), response()).prop_map(move |(id, r)| {
            let mut out = BytesMut::new();
            rpc::encode_message(rpc::KIND_RESPONSE, id, &r, &mut out).unwrap();
            msg(rpc::KIND_RESPONSE, out[5..].to_vec())
        }),
        site_metadata().prop_map(|m| (0, postcard::to_stdvec(&m).unwrap())),
    ]
}

fn site_metadata() -> impl Strategy<Value = SiteMetadata> {
    (proptest::collection::vec(command(), 0..4), any::<u64>()).prop_map(|(cmds, inc)| {
        let mut m = SiteMetadata {
            data_incarnation: inc,
            ..SiteMetadata::default()
        };
        for c in &cmds {
            let _ = m.apply(c);
        }
        m
    })
}

fn metadata_inputs() -> impl Strategy<Value = Hex> {
    let stream = proptest::collection::vec(metadata_payload(), 1..3).prop_map(|ps| {
        ps.iter()
            .flat_map(|(k, p)| framed(*k, p))
            .collect::<Vec<u8>>()
    });
    let inner = (
        metadata_payload(),
        proptest::collection::vec(fuzzing::mutation(), 1..8),
    )
        .prop_map(|((k, p), ms)| Hex(framed(k, &fuzzing::mutate(p, &ms))));
    prop_oneof![1 => bytes(256), 2 => mutated(stream), 3 => inner]
}

fn metadata_payload_decoders(kind: u8, p: &Bytes) {
    let _ = rpc::Hello::decode(kind, p.clone());
    let _ = rpc::message_id(p);
    let _ = rpc::decode_message::<Request>(p);
    let _ = rpc::decode_message::<Response>(p);
    // What the state machine's `decode_snapshot` and the log store read.
    let _ = postcard::from_bytes::<SiteMetadata>(p);
    let _ = postcard::from_bytes::<openraft::Entry<TypeConfig>>(p);
}

#[test]
fn metadata_rpc_decoder() {
    fuzz("cluster metadata RPC", metadata_inputs(), |Hex(input)| {
        let _ = rpc::PROTOCOL.check_preamble(&input);
        let mut buf = BytesMut::from(&input[..]);
        loop {
            let before = buf.len();
            let (got, allocated) = measure(|| rpc::decode_frame(&mut buf));
            bounded("rpc::decode_frame", allocated, 0, 0, 256)?;
            match got {
                Ok(Some((kind, p))) => {
                    prop_assert!(buf.len() < before);
                    let ((), allocated) = measure(|| metadata_payload_decoders(kind, &p));
                    // serde preallocates cautiously (at most about 1 MiB).
                    bounded(
                        "metadata payload decoders",
                        allocated,
                        p.len(),
                        256,
                        1 << 20,
                    )?;
                }
                _ => {
                    prop_assert_eq!(buf.len(), before);
                    break;
                }
            }
        }
        Ok(())
    });
}

#[test]
fn metadata_rpc_round_trip() {
    let strategy = (
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        leader_op(),
        request(),
        site_metadata(),
    );
    fuzz(
        "cluster metadata RPC round trip",
        strategy,
        |(site_id, from, to, id, op, req, meta)| {
            let hello = rpc::Hello { site_id, from, to };
            let mut out = BytesMut::new();
            hello.encode(&mut out);
            prop_assert_eq!(rpc::PROTOCOL.check_preamble(&out), Ok(()));
            let (kind, p) = rpc::decode_frame(&mut out).unwrap().unwrap();
            prop_assert_eq!(rpc::Hello::decode(kind, p), Ok(hello));

            let mut out = BytesMut::new();
            rpc::encode_message(
                rpc::KIND_REQUEST,
                id,
                &Request::Leader(op.clone()),
                &mut out,
            )
            .unwrap();
            let (_, p) = rpc::decode_frame(&mut out).unwrap().unwrap();
            match rpc::decode_message::<Request>(&p) {
                Ok((got, Request::Leader(back))) => {
                    prop_assert_eq!(got, id);
                    prop_assert_eq!(back, op);
                }
                other => return Err(TestCaseError::fail(format!("{other:?}"))),
            }

            // Requests without PartialEq: decoding then encoding again gives
            // the same bytes.
            let mut first = BytesMut::new();
            rpc::encode_message(rpc::KIND_REQUEST, id, &req, &mut first).unwrap();
            let (_, p) = rpc::decode_frame(&mut first.clone()).unwrap().unwrap();
            let (_, back): (u64, Request) =
                rpc::decode_message(&p).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mut second = BytesMut::new();
            rpc::encode_message(rpc::KIND_REQUEST, id, &back, &mut second).unwrap();
            prop_assert_eq!(first, second);

            let bytes = postcard::to_stdvec(&meta).unwrap();
            prop_assert_eq!(
                postcard::from_bytes::<SiteMetadata>(&bytes).ok(),
                Some(meta)
            );
            Ok(())
        },
    );
}

/// Valid keyspace changes (`keyspace::codec`), built from public
/// constructors: seeds that the mutations start from (shared by the fuzz
/// targets of every crate that decodes changes).
#[allow(dead_code)]
#[path = "../../fuzzing/changes.rs"]
mod changes;
