//! Messages every member of the site hears: PUBLISH and SPUBLISH reach
//! subscribers on every node, as Redis Cluster broadcasts them over its
//! bus. Each peer has a bounded outbox that its node-to-node connection
//! drains into [`KIND_MESSAGE`](crate::wire::KIND_MESSAGE) frames; a
//! received message goes to the sink the server installed (its local
//! subscribers), never on to other members.
//!
//! Pub/sub is at most once, as in Redis: a message for a member whose link
//! is down, or whose outbox is over [`OUTBOX_BYTES`], is dropped, counted
//! ([`Broadcast::dropped`]) and logged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::Notify;

/// Bytes of messages queued for one member before new ones are dropped.
pub const OUTBOX_BYTES: usize = 8 << 20;

/// What a message is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    /// PUBLISH: channel and pattern subscribers.
    Publish = 0,
    /// SPUBLISH: shard channel subscribers.
    ShardPublish = 1,
}

/// One message: `kind u8 | channel length u32 LE | channel | payload`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub kind: MessageKind,
    pub channel: Bytes,
    pub payload: Bytes,
}

impl Message {
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(5 + self.channel.len() + self.payload.len());
        out.put_u8(self.kind as u8);
        out.put_u32_le(self.channel.len() as u32);
        out.put_slice(&self.channel);
        out.put_slice(&self.payload);
    }

    /// None when `frame` is not a message (unknown kind, a channel longer
    /// than the frame): the caller logs and drops it.
    pub fn decode(mut frame: Bytes) -> Option<Message> {
        if frame.remaining() < 5 {
            return None;
        }
        let kind = match frame.get_u8() {
            0 => MessageKind::Publish,
            1 => MessageKind::ShardPublish,
            _ => return None,
        };
        let len = frame.get_u32_le() as usize;
        if len > frame.remaining() {
            return None;
        }
        let channel = frame.split_to(len);
        Some(Message {
            kind,
            channel,
            payload: frame,
        })
    }
}

type Sink = Box<dyn Fn(Message) + Send + Sync>;

#[derive(Default)]
struct Outbox {
    frames: Vec<Message>,
    bytes: usize,
}

/// The per-member outboxes and the local sink.
pub struct Broadcast {
    outboxes: Box<[Mutex<Outbox>]>,
    ready: Box<[Notify]>,
    sink: OnceLock<Sink>,
    dropped: AtomicU64,
}

impl Broadcast {
    pub fn new(members: usize) -> Self {
        Broadcast {
            outboxes: (0..members).map(|_| Mutex::default()).collect(),
            ready: (0..members).map(|_| Notify::new()).collect(),
            sink: OnceLock::new(),
            dropped: AtomicU64::new(0),
        }
    }

    /// Where messages from other members go (set once, by the server).
    pub fn set_sink(&self, sink: impl Fn(Message) + Send + Sync + 'static) {
        let _ = self.sink.set(Box::new(sink));
    }

    /// Queues `m` for each member in `to` (their links are up).
    pub fn send(&self, m: &Message, to: impl IntoIterator<Item = usize>) {
        let size = m.channel.len() + m.payload.len() + 5;
        for peer in to {
            let Some(outbox) = self.outboxes.get(peer) else {
                continue;
            };
            let mut o = outbox.lock();
            if o.bytes + size > OUTBOX_BYTES {
                drop(o);
                if self
                    .dropped
                    .fetch_add(1, Ordering::Relaxed)
                    .is_multiple_of(1000)
                {
                    tracing::warn!(
                        member = peer + 1,
                        "pub/sub message dropped: {OUTBOX_BYTES} bytes already queued for that member"
                    );
                }
                continue;
            }
            o.bytes += size;
            o.frames.push(m.clone());
            drop(o);
            self.ready[peer].notify_one();
        }
    }

    /// Resolves when messages are queued for `peer`.
    pub async fn ready(&self, peer: usize) {
        match self.ready.get(peer) {
            Some(n) => n.notified().await,
            None => std::future::pending().await,
        }
    }

    /// Moves what is queued for `peer` into `out` as frames.
    pub fn drain(&self, peer: usize, out: &mut BytesMut) {
        let Some(outbox) = self.outboxes.get(peer) else {
            return;
        };
        let frames = {
            let mut o = outbox.lock();
            o.bytes = 0;
            std::mem::take(&mut o.frames)
        };
        let mut payload = BytesMut::new();
        for m in frames {
            payload.clear();
            m.encode(&mut payload);
            crate::wire::encode_frame(crate::wire::KIND_MESSAGE, &payload, out);
        }
    }

    /// A member's link went down: what was queued for it is dropped.
    pub fn disconnected(&self, peer: usize) {
        if let Some(outbox) = self.outboxes.get(peer) {
            let mut o = outbox.lock();
            let n = o.frames.len() as u64;
            *o = Outbox::default();
            self.dropped.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// A frame from another member.
    pub fn received(&self, frame: Bytes, from: usize) {
        match Message::decode(frame) {
            Some(m) => {
                if let Some(sink) = self.sink.get() {
                    sink(m);
                }
            }
            None => tracing::warn!(member = from + 1, "malformed pub/sub message dropped"),
        }
    }

    /// Messages dropped so far (outbox full, link down).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl crate::cluster::Cluster {
    /// Sends `m` to every other member whose link is up.
    pub fn broadcast(&self, m: &Message) {
        let to: Vec<usize> = self
            .members()
            .iter()
            .enumerate()
            .filter(|(i, m)| *i != self.my_index && m.as_ref().is_some_and(|m| m.connected))
            .map(|(i, _)| i)
            .collect();
        if !to.is_empty() {
            self.messages.send(m, to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_message_round_trips_and_leaves_as_one_frame() {
        let b = Broadcast::new(3);
        let m = Message {
            kind: MessageKind::ShardPublish,
            channel: Bytes::from_static(b"news"),
            payload: Bytes::from_static(b"hello"),
        };
        b.send(&m, [1]);
        let mut out = BytesMut::new();
        b.drain(0, &mut out);
        assert!(out.is_empty());
        b.drain(1, &mut out);
        let (kind, frame) = crate::wire::decode_frame(&mut out).unwrap().unwrap();
        assert_eq!(kind, crate::wire::KIND_MESSAGE);
        assert_eq!(Message::decode(frame), Some(m));
    }

    #[test]
    fn a_full_outbox_drops_and_counts() {
        let b = Broadcast::new(2);
        let m = Message {
            kind: MessageKind::Publish,
            channel: Bytes::from_static(b"c"),
            payload: Bytes::from(vec![0u8; OUTBOX_BYTES / 2]),
        };
        b.send(&m, [1]);
        b.send(&m, [1]);
        assert_eq!(b.dropped(), 1);
        b.disconnected(1);
        assert_eq!(b.dropped(), 2);
    }

    proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Some(m) = Message::decode(Bytes::from(data.clone())) {
                let mut out = BytesMut::new();
                m.encode(&mut out);
                prop_assert_eq!(&out[..], &data[..]);
            }
        }
    }
}
