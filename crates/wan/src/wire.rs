//! The WAN protocol between a publisher (site A, one node) and a receiver
//! (any node of site B). Frames reuse the node-to-node framing
//! (`len u32 | kind u8 | body`, see [`cluster::wire::split_frame`]) with
//! their own magic, so a WAN port never mistakes a site peer or a Redis
//! client for a remote site.
//!
//! Publisher -> receiver: [`Hello`], [`Frame::Proof`] when the receiver
//! asked for one (`wan.secret`, see [`crate::auth`]), then [`Frame::Batch`]es.
//! Receiver -> publisher: [`Welcome`] or a refusal, then `Received` (the
//! batch is in: opens the window), `Applied` (every change of it is applied
//! at its site's primaries: the publisher may let its log go) and `NeedFull`
//! (keys whose delta found another base: send the full value).
//!
//! A batch body is a run of entries `partition u16 | seq varint | len
//! varint | change`, lz4-compressed when that helps; `seq` 0 marks a change that is
//! not a log entry (a full-value fallback or a re-sync copy). Every size read
//! from the wire is checked against a limit before anything is allocated.

use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use keyspace::{codec, slot, Change};

use crate::auth::{Nonce, Proof};

pub const MAGIC: &[u8; 4] = b"DGWN";
/// 2: nonces in the hello, an optional challenge in the welcome, `Proof`.
pub const PROTOCOL_VERSION: u16 = 2;
/// Largest frame on the wire and largest batch once decompressed.
pub const MAX_FRAME: usize = 64 << 20;
/// Keys a single NeedFull frame may list.
const MAX_KEYS: usize = 1 << 16;

const KIND_HELLO: u8 = 1;
const KIND_WELCOME: u8 = 2;
const KIND_REFUSE: u8 = 3;
const KIND_BATCH: u8 = 4;
const KIND_RECEIVED: u8 = 5;
const KIND_APPLIED: u8 = 6;
const KIND_NEED_FULL: u8 = 7;
const KIND_PROOF: u8 = 8;

const FLAG_LZ4: u8 = 1;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("not a deltagrid WAN peer (bad magic)")]
    BadMagic,
    #[error("unsupported WAN protocol version {0} (this node speaks {PROTOCOL_VERSION})")]
    Version(u16),
    #[error("frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("malformed {0}")]
    Malformed(&'static str),
    #[error("unknown frame kind {0}")]
    Kind(u8),
    #[error("batch does not decompress: {0}")]
    Compression(String),
    #[error("entry for partition {0}, which is out of range or not the partition of its key")]
    Partition(u16),
    #[error("bad change in batch: {0}")]
    Change(#[from] codec::DecodeError),
}

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
    /// a [`Frame::Proof`] before any batch.
    pub challenge: Option<Challenge>,
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
        }
    }
}

/// One change in a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub partition: u16,
    /// 0: not a log entry (fallback or re-sync copy).
    pub seq: u64,
    pub change: Change,
}

/// A fixed-size field (a nonce, a proof).
fn get_array<const N: usize>(b: &mut Bytes, what: &'static str) -> Result<[u8; N], WireError> {
    need(b, N, what)?;
    let mut a = [0u8; N];
    b.copy_to_slice(&mut a);
    Ok(a)
}

fn put_str(out: &mut BytesMut, s: &[u8]) {
    out.put_u16_le(s.len() as u16);
    out.put_slice(&s[..s.len().min(u16::MAX as usize)]);
}

fn get_str(b: &mut Bytes) -> Result<Bytes, WireError> {
    if b.remaining() < 2 {
        return Err(WireError::Malformed("string"));
    }
    let n = b.get_u16_le() as usize;
    if b.remaining() < n {
        return Err(WireError::Malformed("string"));
    }
    Ok(b.split_to(n))
}

fn get_string(b: &mut Bytes) -> Result<String, WireError> {
    String::from_utf8(get_str(b)?.to_vec()).map_err(|_| WireError::Malformed("utf-8 string"))
}

fn need(b: &Bytes, n: usize, what: &'static str) -> Result<(), WireError> {
    if b.remaining() < n {
        Err(WireError::Malformed(what))
    } else {
        Ok(())
    }
}

/// When a batch is worth trying to compress: while batches shrink, every
/// one; after one that shrank by less than an eighth (random or encrypted
/// values), batches go raw for [`Lz4Probe::RAW_FOR`] and then one is tried
/// again, so incompressible data costs next to no compression work and
/// compressible data is compressed again soon after it returns (a count
/// of batches would mean seconds when batches are few). A large batch is
/// judged by its first [`Lz4Probe::SAMPLE`] bytes before all of it is
/// compressed.
#[derive(Debug, Default)]
pub struct Lz4Probe {
    raw_until: Option<Instant>,
}

impl Lz4Probe {
    const RAW_FOR: Duration = Duration::from_millis(200);
    const SAMPLE: usize = 16 << 10;

    fn should_try(&mut self, body: &[u8]) -> bool {
        if self.raw_until.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        if body.len() >= 4 * Self::SAMPLE {
            let sample = &body[..Self::SAMPLE];
            return self.record(sample.len(), lz4_flex::block::compress(sample).len());
        }
        true
    }

    /// Whether compression paid off; if not, batches go raw for a while.
    fn record(&mut self, raw: usize, compressed: usize) -> bool {
        let paid = compressed <= raw - raw / 8;
        self.raw_until = (!paid).then(|| Instant::now() + Self::RAW_FOR);
        paid
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
    let start = out.len();
    out.put_u32_le(0);
    // A raw batch body: not copied, written after `out` by the caller.
    let mut tail = None;
    match frame {
        Frame::Hello(h) => {
            out.put_u8(KIND_HELLO);
            out.put_slice(MAGIC);
            out.put_u16_le(h.version);
            out.put_u16_le(h.site_id);
            put_str(out, h.site_name.as_bytes());
            out.put_u16_le(h.partitions);
            put_str(out, h.node_id.as_bytes());
            out.put_u64_le(h.incarnation);
            out.put_slice(&h.nonce);
        }
        Frame::Welcome(w) => {
            out.put_u8(KIND_WELCOME);
            out.put_u16_le(w.site_id);
            put_str(out, w.site_name.as_bytes());
            out.put_u32_le(w.applied.len() as u32);
            for (p, seq) in &w.applied {
                out.put_u16_le(*p);
                out.put_u64_le(*seq);
            }
            out.put_u64_le(w.data_incarnation);
            match &w.challenge {
                None => out.put_u8(0),
                Some(c) => {
                    out.put_u8(1);
                    out.put_slice(&c.nonce);
                    out.put_slice(&c.proof);
                }
            }
        }
        Frame::Proof(p) => {
            out.put_u8(KIND_PROOF);
            out.put_slice(p);
        }
        Frame::Refuse(reason) => {
            out.put_u8(KIND_REFUSE);
            put_str(out, reason.as_bytes());
        }
        Frame::Batch { id, body } => {
            out.put_u8(KIND_BATCH);
            out.put_u64_le(*id);
            let compressed = probe
                .should_try(body)
                .then(|| lz4_flex::block::compress(body));
            if let Some(c) = &compressed {
                probe.record(body.len(), c.len());
            }
            match compressed.filter(|c| c.len() < body.len()) {
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
        Frame::Received(id) => {
            out.put_u8(KIND_RECEIVED);
            out.put_u64_le(*id);
        }
        Frame::Applied(id) => {
            out.put_u8(KIND_APPLIED);
            out.put_u64_le(*id);
        }
        Frame::NeedFull(keys) => {
            out.put_u8(KIND_NEED_FULL);
            out.put_u32_le(keys.len() as u32);
            for (p, k) in keys {
                out.put_u16_le(*p);
                out.put_u32_le(k.len() as u32);
                out.put_slice(k);
            }
        }
    }
    let len = (out.len() - start - 4 + tail.as_ref().map_or(0, Bytes::len)) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    tail
}

/// One frame from the front of `buf`: Ok(None) until it is complete.
pub fn decode(buf: &mut BytesMut) -> Result<Option<Frame>, WireError> {
    let (kind, mut b) = match cluster::wire::split_frame(buf, MAX_FRAME) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(None),
        Err(cluster::wire::FrameError::TooLarge(n)) => return Err(WireError::TooLarge(n)),
        Err(cluster::wire::FrameError::Empty) => return Err(WireError::Malformed("empty frame")),
    };
    let frame = match kind {
        KIND_HELLO => {
            need(&b, 4, "hello")?;
            if &b[..4] != MAGIC {
                return Err(WireError::BadMagic);
            }
            b.advance(4);
            need(&b, 4, "hello")?;
            let version = b.get_u16_le();
            if version != PROTOCOL_VERSION {
                return Err(WireError::Version(version));
            }
            let site_id = b.get_u16_le();
            let site_name = get_string(&mut b)?;
            need(&b, 2, "hello")?;
            let partitions = b.get_u16_le();
            let node_id = get_string(&mut b)?;
            need(&b, 8, "hello")?;
            let incarnation = b.get_u64_le();
            let nonce = get_array(&mut b, "hello nonce")?;
            Frame::Hello(Hello {
                version,
                site_id,
                site_name,
                partitions,
                node_id,
                incarnation,
                nonce,
            })
        }
        KIND_WELCOME => {
            need(&b, 2, "welcome")?;
            let site_id = b.get_u16_le();
            let site_name = get_string(&mut b)?;
            need(&b, 4, "welcome")?;
            let n = b.get_u32_le() as usize;
            // Each pair takes 10 bytes: a forged count cannot over-allocate.
            need(&b, n.saturating_mul(10), "welcome watermarks")?;
            let applied = (0..n).map(|_| (b.get_u16_le(), b.get_u64_le())).collect();
            need(&b, 8, "welcome")?;
            let data_incarnation = b.get_u64_le();
            need(&b, 1, "welcome")?;
            let challenge = match b.get_u8() {
                0 => None,
                1 => Some(Challenge {
                    nonce: get_array(&mut b, "welcome challenge")?,
                    proof: get_array(&mut b, "welcome challenge")?,
                }),
                _ => return Err(WireError::Malformed("welcome challenge flag")),
            };
            Frame::Welcome(Welcome {
                site_id,
                site_name,
                applied,
                data_incarnation,
                challenge,
            })
        }
        KIND_PROOF => {
            let proof: Proof = get_array(&mut b, "proof")?;
            if !b.is_empty() {
                return Err(WireError::Malformed("proof length"));
            }
            Frame::Proof(proof)
        }
        KIND_REFUSE => Frame::Refuse(String::from_utf8_lossy(&get_str(&mut b)?).into_owned()),
        KIND_BATCH => {
            need(&b, 8 + 1 + 4, "batch header")?;
            let id = b.get_u64_le();
            let flags = b.get_u8();
            let raw_len = b.get_u32_le() as usize;
            if raw_len > MAX_FRAME {
                return Err(WireError::TooLarge(raw_len));
            }
            let body = if flags & FLAG_LZ4 != 0 {
                let raw = lz4_flex::block::decompress(&b, raw_len)
                    .map_err(|e| WireError::Compression(e.to_string()))?;
                if raw.len() != raw_len {
                    return Err(WireError::Compression(format!(
                        "{} bytes, header said {raw_len}",
                        raw.len()
                    )));
                }
                Bytes::from(raw)
            } else {
                if b.len() != raw_len {
                    return Err(WireError::Malformed("batch length"));
                }
                b
            };
            Frame::Batch { id, body }
        }
        KIND_RECEIVED | KIND_APPLIED => {
            need(&b, 8, "ack")?;
            let id = b.get_u64_le();
            if kind == KIND_RECEIVED {
                Frame::Received(id)
            } else {
                Frame::Applied(id)
            }
        }
        KIND_NEED_FULL => {
            need(&b, 4, "need-full")?;
            let n = b.get_u32_le() as usize;
            if n > MAX_KEYS {
                return Err(WireError::Malformed("need-full key count"));
            }
            let mut keys = Vec::with_capacity(n.min(b.remaining() / 6));
            for _ in 0..n {
                need(&b, 6, "need-full")?;
                let p = b.get_u16_le();
                let len = b.get_u32_le() as usize;
                need(&b, len, "need-full key")?;
                keys.push((p, b.split_to(len)));
            }
            Frame::NeedFull(keys)
        }
        other => return Err(WireError::Kind(other)),
    };
    Ok(Some(frame))
}

/// Appends one entry to a batch body; returns the bytes it took.
pub fn put_entry(body: &mut BytesMut, partition: u16, seq: u64, change: &Change) -> usize {
    let start = body.len();
    let len = codec::encoded_len(change);
    put_entry_head(body, partition, seq, len);
    let at = body.len();
    codec::encode(change, body);
    debug_assert_eq!(
        body.len() - at,
        len,
        "codec::encoded_len disagrees with codec::encode"
    );
    body.len() - start
}

/// [`put_entry`] of a change already encoded with [`codec::encode`] (as
/// the partition log holds it).
pub fn put_encoded(body: &mut BytesMut, partition: u16, seq: u64, encoded: &[u8]) {
    put_entry_head(body, partition, seq, encoded.len());
    body.put_slice(encoded);
}

fn put_entry_head(body: &mut BytesMut, partition: u16, seq: u64, len: usize) {
    body.reserve(len + 22);
    body.put_u16_le(partition);
    put_varint(body, seq);
    put_varint(body, len as u64);
}

fn put_varint(out: &mut BytesMut, mut n: u64) {
    while n >= 0x80 {
        out.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

fn get_varint(b: &mut Bytes) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.first()?;
        b.advance(1);
        n |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

/// `partition u16 | seq varint | len varint`, then `len` bytes.
fn split_entry(b: &mut Bytes) -> Result<(u16, u64, Bytes), WireError> {
    need(b, 2, "batch entry")?;
    let partition = b.get_u16_le();
    let seq = get_varint(b).ok_or(WireError::Malformed("batch entry seq"))?;
    let len = get_varint(b).ok_or(WireError::Malformed("batch entry length"))?;
    let len = usize::try_from(len).map_err(|_| WireError::Malformed("batch entry length"))?;
    need(b, len, "batch entry")?;
    Ok((partition, seq, b.split_to(len)))
}

/// Decodes a batch body. `partitions` is the source site's partition
/// count: an entry whose partition is not its key's is refused, so a forged
/// batch cannot move a watermark it does not own.
pub fn decode_entries(body: &Bytes, partitions: u16) -> Result<Vec<Entry>, WireError> {
    let mut b = body.clone();
    let mut out = Vec::new();
    while b.has_remaining() {
        let (partition, seq, bytes) = split_entry(&mut b)?;
        let (change, used) = codec::decode(&bytes)?;
        if used != bytes.len() {
            return Err(WireError::Malformed("batch entry length"));
        }
        if partition >= partitions
            || slot::slot_partition(slot::key_slot(&change.key), partitions) as u16 != partition
        {
            return Err(WireError::Partition(partition));
        }
        out.push(Entry {
            partition,
            seq,
            change,
        });
    }
    Ok(out)
}

/// Splits a batch body into bodies of whole entries, each at most `max`
/// bytes unless a single entry is larger.
pub fn split_body(body: &Bytes, max: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    let (mut start, mut end) = (0usize, 0usize);
    let mut b = body.clone();
    while let Ok((_, _, change)) = split_entry(&mut b) {
        let next_end = body.len() - b.len();
        if next_end - start > max && end > start {
            out.push(body.slice(start..end));
            start = end;
        }
        end = next_end;
        let _ = change;
    }
    if end > start {
        out.push(body.slice(start..end));
    }
    out
}

/// Entries in a batch body, without decoding the changes.
pub fn count_entries(body: &Bytes) -> u64 {
    let mut b = body.clone();
    let mut n = 0;
    while split_entry(&mut b).is_ok() {
        n += 1;
    }
    n
}

/// The highest log seq per partition in a batch body, without decoding
/// the changes (what an applied ack lets the publisher release).
pub fn max_seqs(body: &Bytes) -> Vec<(u16, u64)> {
    let mut b = body.clone();
    let mut out: Vec<(u16, u64)> = Vec::new();
    while let Ok((p, seq, _)) = split_entry(&mut b) {
        if seq == 0 {
            continue;
        }
        match out.iter_mut().find(|(q, _)| *q == p) {
            Some((_, s)) => *s = (*s).max(seq),
            None => out.push((p, seq)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyspace::{ChangeKind, Value, Version};
    use proptest::prelude::*;

    fn change(key: &[u8]) -> Change {
        Change {
            key: Bytes::copy_from_slice(key),
            version: Version {
                hlc: 77 << 16,
                site: 1,
            },
            kind: ChangeKind::Full {
                value: Value::Str(Bytes::from(vec![b'x'; 300])),
                expire_at: 0,
            },
        }
    }

    fn round_trip(f: &Frame) -> Frame {
        let mut out = BytesMut::new();
        encode(f, &mut out);
        let got = decode(&mut out).unwrap().unwrap();
        assert!(out.is_empty());
        got
    }

    #[test]
    fn frames_round_trip() {
        let hello = Frame::Hello(Hello {
            version: PROTOCOL_VERSION,
            site_id: 3,
            site_name: "london".into(),
            partitions: 271,
            node_id: "n1".into(),
            incarnation: 42,
            nonce: [7; 16],
        });
        assert_eq!(round_trip(&hello), hello);
        let mut welcome = Welcome {
            site_id: 2,
            site_name: "ny".into(),
            applied: vec![(1, 5), (270, 9)],
            data_incarnation: 3,
            challenge: None,
        };
        assert_eq!(
            round_trip(&Frame::Welcome(welcome.clone())),
            Frame::Welcome(welcome.clone())
        );
        welcome.challenge = Some(Challenge {
            nonce: [1; 16],
            proof: [2; 32],
        });
        assert_eq!(
            round_trip(&Frame::Welcome(welcome.clone())),
            Frame::Welcome(welcome)
        );
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
    }

    #[test]
    fn incompressible_batches_go_raw_and_compression_is_retried_later() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let random: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        let random = Bytes::from(random);
        let repeated = Bytes::from(vec![b'x'; 4096]);
        let mut probe = Lz4Probe::default();
        let encoded = |body: &Bytes, probe: &mut Lz4Probe| {
            let mut out = BytesMut::new();
            encode_with(
                &Frame::Batch {
                    id: 1,
                    body: body.clone(),
                },
                probe,
                &mut out,
            );
            let n = out.len();
            let Some(Frame::Batch { body: got, .. }) = decode(&mut out).unwrap() else {
                panic!("not a batch")
            };
            assert_eq!(&got, body);
            n
        };
        // The random batch goes raw, and so does what follows it for a while
        // (compressible or not).
        assert!(encoded(&random, &mut probe) > 4096);
        assert!(encoded(&repeated, &mut probe) > 4096);
        assert!(encoded(&repeated, &mut probe) > 4096);
        // Once that while is over, compression is tried again and pays off.
        probe.raw_until = Some(Instant::now() - Duration::from_millis(1));
        assert!(encoded(&repeated, &mut probe) < 200);
        assert!(encoded(&repeated, &mut probe) < 200);
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
    fn batches_compress_and_decode_with_their_partitions() {
        let mut body = BytesMut::new();
        let keys: Vec<Vec<u8>> = (0..50).map(|i| format!("key:{i}").into_bytes()).collect();
        for (i, k) in keys.iter().enumerate() {
            let p = slot::slot_partition(slot::key_slot(k), 271) as u16;
            put_entry(&mut body, p, i as u64 + 1, &change(k));
        }
        let body = body.freeze();
        let mut out = BytesMut::new();
        encode(
            &Frame::Batch {
                id: 7,
                body: body.clone(),
            },
            &mut out,
        );
        assert!(
            out.len() < body.len() / 4,
            "300 repeated bytes per value compress"
        );
        let Some(Frame::Batch { id, body: got }) = decode(&mut out).unwrap() else {
            panic!("not a batch")
        };
        assert_eq!((id, &got), (7, &body));
        let entries = decode_entries(&got, 271).unwrap();
        assert_eq!(entries.len(), 50);
        assert_eq!(max_seqs(&got).iter().map(|(_, s)| *s).max(), Some(50));
        let parts = split_body(&got, 1000);
        assert!(parts.len() > 10 && parts.iter().all(|p| p.len() <= 1000));
        assert_eq!(parts.iter().map(count_entries).sum::<u64>(), 50);
        assert_eq!(parts.concat(), got.to_vec());
    }

    #[test]
    fn forged_input_is_refused() {
        // A wrong partition for the key.
        let mut body = BytesMut::new();
        let k = b"key:1";
        let p = slot::slot_partition(slot::key_slot(k), 271) as u16;
        put_entry(&mut body, (p + 1) % 271, 1, &change(k));
        assert_eq!(
            decode_entries(&body.freeze(), 271),
            Err(WireError::Partition((p + 1) % 271))
        );
        // A hello from another protocol or version.
        let mut out = BytesMut::new();
        encode(
            &Frame::Hello(Hello {
                version: 9,
                site_id: 1,
                site_name: "a".into(),
                partitions: 1,
                node_id: "n".into(),
                incarnation: 1,
                nonce: [0; 16],
            }),
            &mut out,
        );
        assert_eq!(decode(&mut out), Err(WireError::Version(9)));
        let mut out = BytesMut::from(&b"\x09\x00\x00\x00\x01DGRD\x01\x00\x01\x00"[..]);
        assert_eq!(decode(&mut out), Err(WireError::BadMagic));
        // A proof of the wrong length.
        let mut out = BytesMut::new();
        out.put_u32_le(1 + 31);
        out.put_u8(KIND_PROOF);
        out.put_slice(&[0; 31]);
        assert_eq!(decode(&mut out), Err(WireError::Malformed("proof")));
        let mut out = BytesMut::new();
        out.put_u32_le(1 + 33);
        out.put_u8(KIND_PROOF);
        out.put_slice(&[0; 33]);
        assert_eq!(decode(&mut out), Err(WireError::Malformed("proof length")));
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
            Err(WireError::TooLarge(u32::MAX as usize))
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
        let hello = Frame::Hello(Hello {
            version: PROTOCOL_VERSION,
            site_id: 3,
            site_name: "london".into(),
            partitions: 271,
            node_id: "n1".into(),
            incarnation: 42,
            nonce: [7; 16],
        });
        let mut want = b"\x2f\x00\x00\x00\x01DGWN\x02\x00\x03\x00\x06\x00london\x0f\x01\
            \x02\x00n1\x2a\x00\x00\x00\x00\x00\x00\x00"
            .to_vec();
        want.extend_from_slice(&[7; 16]);
        assert_eq!(bytes(&hello), want);

        let welcome = Frame::Welcome(Welcome {
            site_id: 2,
            site_name: "ny".into(),
            applied: vec![(1, 5)],
            data_incarnation: 3,
            challenge: Some(Challenge {
                nonce: [1; 16],
                proof: [2; 32],
            }),
        });
        let mut want = b"\x4e\x00\x00\x00\x02\x02\x00\x02\x00ny\x01\x00\x00\x00\
            \x01\x00\x05\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x01"
            .to_vec();
        want.extend_from_slice(&[1; 16]);
        want.extend_from_slice(&[2; 32]);
        assert_eq!(bytes(&welcome), want);

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

        // Batch entries: partition, varint seq, varint length, the change.
        let mut body = BytesMut::new();
        put_encoded(&mut body, 5, 300, b"xyz");
        put_encoded(&mut body, 6, 0, b"");
        put_encoded(&mut body, 7, u64::MAX, b"q");
        let mut want = b"\x05\x00\xac\x02\x03xyz\x06\x00\x00\x00\x07\x00".to_vec();
        want.extend_from_slice(&[0xff; 9]);
        want.extend_from_slice(b"\x01\x01q");
        assert_eq!(&body[..], &want[..]);
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

        #[test]
        fn mutated_batches_are_errors_or_valid(pos in 0usize..2000, byte in any::<u8>(), cut in 0usize..2000) {
            let mut body = BytesMut::new();
            for i in 0..5u64 {
                let k = format!("k{i}").into_bytes();
                let p = slot::slot_partition(slot::key_slot(&k), 16) as u16;
                put_entry(&mut body, p, i + 1, &change(&k));
            }
            let mut out = BytesMut::new();
            encode(&Frame::Batch { id: 1, body: body.freeze() }, &mut out);
            let i = pos % out.len();
            out[i] ^= byte;
            out.truncate(cut.max(1).min(out.len()));
            if let Ok(Some(Frame::Batch { body, .. })) = decode(&mut out) {
                let _ = decode_entries(&body, 16);
            }
        }
    }
}
