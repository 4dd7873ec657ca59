//! A batch's body: a run of entries `partition u16 | seq varint | len
//! varint | change` (the change in [`codec`]'s encoding); `seq` 0 marks a
//! change that is not a log entry (a full-value fallback or a re-sync
//! copy). Every length is checked against what the body holds before it
//! is taken.

use bytes::{BufMut, Bytes, BytesMut};
use framing::{put_varint, Payload};
use keyspace::{codec, slot, Change};

use super::{WireError, LIMITS};

/// One change in a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub partition: u16,
    /// 0: not a log entry (fallback or re-sync copy).
    pub seq: u64,
    pub change: Change,
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

/// `partition u16 | seq varint | len varint`, then `len` bytes.
fn split_entry(b: &mut Payload) -> Result<(u16, u64, Bytes), framing::Error> {
    let partition = b.u16("batch entry")?;
    let seq = b.varint("batch entry seq")?;
    let len = b.varint("batch entry length")?;
    let len = usize::try_from(len).map_err(|_| framing::Error::Malformed("batch entry length"))?;
    Ok((partition, seq, b.bytes(len, "batch entry")?))
}

/// A batch body to take entries from.
fn entries(body: &Bytes) -> Payload {
    Payload::new(body.clone(), LIMITS)
}

/// Decodes a batch body. `partitions` is the source site's partition
/// count: an entry whose partition is not its key's is refused, so a forged
/// batch cannot move a watermark it does not own.
pub fn decode_entries(body: &Bytes, partitions: u16) -> Result<Vec<Entry>, WireError> {
    let mut b = entries(body);
    let mut out = Vec::new();
    while !b.is_empty() {
        let (partition, seq, bytes) = split_entry(&mut b)?;
        let (change, used) = codec::decode(&bytes)?;
        if used != bytes.len() {
            return Err(WireError::malformed("batch entry length"));
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
    let mut b = entries(body);
    while split_entry(&mut b).is_ok() {
        let next_end = body.len() - b.remaining();
        if next_end - start > max && end > start {
            out.push(body.slice(start..end));
            start = end;
        }
        end = next_end;
    }
    if end > start {
        out.push(body.slice(start..end));
    }
    out
}

/// Entries in a batch body, without decoding the changes.
pub fn count_entries(body: &Bytes) -> u64 {
    let mut b = entries(body);
    let mut n = 0;
    while split_entry(&mut b).is_ok() {
        n += 1;
    }
    n
}

/// The highest log seq per partition in a batch body, without decoding
/// the changes (what an applied ack lets the publisher release).
pub fn max_seqs(body: &Bytes) -> Vec<(u16, u64)> {
    let mut b = entries(body);
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
    use crate::wire::{decode, encode, Frame};
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
                value: Value::str(Bytes::from(vec![b'x'; 300])),
                expire_at: 0,
            },
        }
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
    fn an_entry_for_another_partition_than_its_keys_is_refused() {
        // A wrong partition for the key.
        let mut body = BytesMut::new();
        let k = b"key:1";
        let p = slot::slot_partition(slot::key_slot(k), 271) as u16;
        put_entry(&mut body, (p + 1) % 271, 1, &change(k));
        assert_eq!(
            decode_entries(&body.freeze(), 271),
            Err(WireError::Partition((p + 1) % 271))
        );
    }

    /// Entries as they were on the wire before the framing moved to
    /// `framing`: they must not change.
    #[test]
    fn the_bytes_of_entries_are_pinned() {
        // Partition, varint seq, varint length, the change.
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
