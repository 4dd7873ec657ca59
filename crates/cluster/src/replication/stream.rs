//! The replication stream's entries and acks, and their bytes.
//!
//! A primary sends each replica a stream of entries, one batch frame at a
//! time; the replica answers every batch with one ack frame. On the wire
//! both are flat: an entry is `partition u16 | seq u64 | len u32 | body`
//! and an ack is `partition u16 | seq u64`, with a few reserved seq values
//! at the top of the range (never a change's seq) marking what is not a
//! change. Those values live only here: [`Entry`] and [`Ack`] are what the
//! rest of replication reads and writes, decoded and encoded at the edge
//! ([`Entries`], [`Acks`]), so no other code compares a seq with a marker.
//!
//! Decoding never trusts a length: a body is a slice of the batch it came
//! in, so a peer's bytes never make this code allocate.

use bytes::{BufMut, BytesMut};
use keyspace::codec;

/// `partition u16 | seq u64 | len u32`.
const ENTRY_HEADER: usize = 2 + 8 + 4;
/// `partition u16 | seq u64`.
const ACK_LEN: usize = 2 + 8;

// The reserved seq values (node-to-node protocol version 4; 5 added a
// second word to the snapshot's begin and `TOMBSTONES_SETTLED`).
const SNAPSHOT_DATA: u64 = 0;
const SNAPSHOT_BEGIN: u64 = u64::MAX;
const SNAPSHOT_END: u64 = u64::MAX - 1;
const WAN_APPLIED: u64 = u64::MAX - 2;
const BACKUP_TAKEN: u64 = u64::MAX - 3;
const SNAPSHOT_NEEDED: u64 = u64::MAX - 4;
const SNAPSHOT_REFUSED: u64 = u64::MAX - 5;
const TABLE_EPOCH: u64 = u64::MAX - 6;
const TOMBSTONES_SETTLED: u64 = u64::MAX - 7;
/// Protocol version 6.
const CATCH_UP_BEGIN: u64 = u64::MAX - 8;
/// The lowest marker: seqs from here up are never changes' seqs.
const FIRST_MARKER: u64 = CATCH_UP_BEGIN;
const _: () = assert!(FIRST_MARKER < SNAPSHOT_REFUSED && SNAPSHOT_NEEDED < BACKUP_TAKEN);

/// One entry of the stream a primary sends a replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    /// A change the primary logged at `seq`, as the keyspace codec encodes
    /// it: the replica applies it at the same seq, so its log is the
    /// primary's.
    Change {
        partition: u16,
        seq: u64,
        change: &'a [u8],
    },
    /// The epoch of the partition table the primary had when it queued
    /// what follows. Every batch starts with one, and another follows
    /// wherever the epoch changed: a replica whose table is newer and
    /// names another primary refuses what follows for that partition.
    TableEpoch { epoch: u64 },
    /// A snapshot of the partition starts: the replica empties its copy
    /// and continues the log at `next`, the primary's next seq when the
    /// copy was taken; `settled` is the copy's settled point (what every
    /// remote site has passed, see `wan::settled`: tombstones at or below
    /// it are gone and not in the snapshot).
    SnapshotBegin {
        partition: u16,
        next: u64,
        settled: u64,
    },
    /// Instead of a snapshot's begin: the replica's copy, loaded from its
    /// disk, goes on at `next` and its last change has the version
    /// (`hlc`, `site`) the primary's log holds at that seq, so only the
    /// changes from `next` on follow (as [`Entry::Change`]s), then the
    /// end entry (with no data entries).
    CatchUpBegin {
        partition: u16,
        next: u64,
        hlc: u64,
        site: u16,
    },
    /// One key of a snapshot, a full value (keyspace codec).
    SnapshotData { partition: u16, change: &'a [u8] },
    /// The snapshot `id` ends, after `entries` data entries: loaded
    /// whole, the replica acknowledges it ([`Ack::SnapshotLoaded`]), else
    /// refuses it ([`Ack::SnapshotRefused`]).
    SnapshotEnd {
        partition: u16,
        next: u64,
        id: u64,
        entries: u64,
    },
    /// A WAN watermark: remote site `target` applied the partition up to
    /// `seq`. Replicas keep it so that, promoted, they resume shipping
    /// from there. The name is UTF-8 from a correct primary.
    WanApplied {
        partition: u16,
        seq: u64,
        target: &'a [u8],
    },
    /// The primary let go of the partition's tombstones of removals at or
    /// below `hlc` (see `wan::settled`): the replica does the same, so
    /// that promoted it holds what the primary held.
    TombstonesSettled { partition: u16, hlc: u64 },
    /// A backup to storage named `id` copied the partition at `seq`
    /// (queued under the partition lock), so that replicas anchor their
    /// changed-keys sets at the same point. The name is UTF-8 from a
    /// correct primary.
    BackupTaken {
        partition: u16,
        seq: u64,
        id: &'a [u8],
    },
}

/// What a replica answers about one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    /// The replica holds the partition's changes up to `seq`
    /// (cumulative).
    Applied { partition: u16, seq: u64 },
    /// The replica loaded all of snapshot `id` (the id of its end entry).
    SnapshotLoaded { partition: u16, id: u64 },
    /// The replica did not load all of snapshot `id` (the partition is not
    /// a replica copy there yet, its table being older than its
    /// primary's, or entries went with a broken connection), so it holds
    /// nothing the primary may count on; the primary sends it again a
    /// little later.
    SnapshotRefused { partition: u16, id: u64 },
    /// The replica's copy has a gap (it was sent a change past the next
    /// seq it holds) or diverged from the sender's history, and needs a
    /// snapshot. The primary takes an in-sync replica out of the in-sync
    /// set, which sends one; until then writes to the partition wait for
    /// an ack that cannot come.
    SnapshotNeeded { partition: u16 },
}

/// Why a batch could not be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("truncated replication entry")]
    Truncated,
    #[error("partition {0} out of range, or not the partition of the change's key")]
    Partition(u16),
    #[error("replication entry with seq {0:#x}, a marker only acks carry")]
    AckMarker(u64),
    #[error("bad change: {0}")]
    Change(#[from] codec::DecodeError),
}

/// The header of an [`Entry::Change`] whose body, `len` bytes of keyspace
/// codec, the caller writes next (the primary encodes a change straight
/// into a replica's queue).
pub fn put_change_header(out: &mut BytesMut, partition: u16, seq: u64, len: usize) {
    debug_assert!(
        seq != SNAPSHOT_DATA && seq < FIRST_MARKER,
        "not a change's seq: {seq}"
    );
    put_header(out, partition, seq, len);
}

fn put_header(out: &mut BytesMut, partition: u16, seq: u64, len: usize) {
    out.put_u16_le(partition);
    out.put_u64_le(seq);
    out.put_u32_le(len as u32);
}

impl Entry<'_> {
    /// The partition the entry is about (0 for [`Entry::TableEpoch`],
    /// which is about none).
    pub fn partition(&self) -> u16 {
        match *self {
            Entry::TableEpoch { .. } => 0,
            Entry::Change { partition, .. }
            | Entry::SnapshotBegin { partition, .. }
            | Entry::CatchUpBegin { partition, .. }
            | Entry::SnapshotData { partition, .. }
            | Entry::SnapshotEnd { partition, .. }
            | Entry::WanApplied { partition, .. }
            | Entry::TombstonesSettled { partition, .. }
            | Entry::BackupTaken { partition, .. } => partition,
        }
    }

    pub fn encode(&self, out: &mut BytesMut) {
        let words = |out: &mut BytesMut, p: u16, seq: u64, words: &[u64]| {
            put_header(out, p, seq, 8 * words.len());
            words.iter().for_each(|&w| out.put_u64_le(w));
        };
        let named = |out: &mut BytesMut, p: u16, kind: u64, seq: u64, name: &[u8]| {
            put_header(out, p, kind, 8 + name.len());
            out.put_u64_le(seq);
            out.put_slice(name);
        };
        match *self {
            Entry::Change {
                partition,
                seq,
                change,
            } => {
                put_header(out, partition, seq, change.len());
                out.put_slice(change);
            }
            Entry::TableEpoch { epoch } => words(out, 0, TABLE_EPOCH, &[epoch]),
            Entry::SnapshotBegin {
                partition,
                next,
                settled,
            } => words(out, partition, SNAPSHOT_BEGIN, &[next, settled]),
            Entry::CatchUpBegin {
                partition,
                next,
                hlc,
                site,
            } => words(out, partition, CATCH_UP_BEGIN, &[next, hlc, site as u64]),
            Entry::SnapshotData { partition, change } => {
                put_header(out, partition, SNAPSHOT_DATA, change.len());
                out.put_slice(change);
            }
            Entry::SnapshotEnd {
                partition,
                next,
                id,
                entries,
            } => words(out, partition, SNAPSHOT_END, &[next, id, entries]),
            Entry::WanApplied {
                partition,
                seq,
                target,
            } => named(out, partition, WAN_APPLIED, seq, target),
            Entry::TombstonesSettled { partition, hlc } => {
                words(out, partition, TOMBSTONES_SETTLED, &[hlc])
            }
            Entry::BackupTaken { partition, seq, id } => {
                named(out, partition, BACKUP_TAKEN, seq, id)
            }
        }
    }

    /// Reads one entry from its header fields and body.
    fn decode(partition: u16, seq: u64, body: &[u8]) -> Result<Entry<'_>, BatchError> {
        let word = |i: usize| {
            body.get(i * 8..i * 8 + 8)
                .and_then(|w| w.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or(BatchError::Truncated)
        };
        let exactly = |words: usize| match body.len() == 8 * words {
            true => Ok(()),
            false => Err(BatchError::Truncated),
        };
        // A snapshot's point is a next seq: never 0.
        let next = || {
            word(0).and_then(|n| {
                if n == 0 {
                    Err(BatchError::Truncated)
                } else {
                    Ok(n)
                }
            })
        };
        Ok(match seq {
            SNAPSHOT_DATA => Entry::SnapshotData {
                partition,
                change: body,
            },
            SNAPSHOT_BEGIN => {
                exactly(2)?;
                Entry::SnapshotBegin {
                    partition,
                    next: next()?,
                    settled: word(1)?,
                }
            }
            CATCH_UP_BEGIN => {
                exactly(3)?;
                Entry::CatchUpBegin {
                    partition,
                    next: next()?,
                    hlc: word(1)?,
                    site: u16::try_from(word(2)?).map_err(|_| BatchError::Truncated)?,
                }
            }
            SNAPSHOT_END => {
                exactly(3)?;
                Entry::SnapshotEnd {
                    partition,
                    next: next()?,
                    id: word(1)?,
                    entries: word(2)?,
                }
            }
            TABLE_EPOCH => {
                exactly(1)?;
                Entry::TableEpoch { epoch: word(0)? }
            }
            TOMBSTONES_SETTLED => {
                exactly(1)?;
                Entry::TombstonesSettled {
                    partition,
                    hlc: word(0)?,
                }
            }
            WAN_APPLIED => Entry::WanApplied {
                partition,
                seq: word(0)?,
                target: &body[8..],
            },
            BACKUP_TAKEN => Entry::BackupTaken {
                partition,
                seq: word(0)?,
                id: &body[8..],
            },
            SNAPSHOT_NEEDED | SNAPSHOT_REFUSED => return Err(BatchError::AckMarker(seq)),
            seq => Entry::Change {
                partition,
                seq,
                change: body,
            },
        })
    }
}

/// The entries of a batch, in order, up to the first that cannot be read
/// (its error is the last item).
pub struct Entries<'a> {
    batch: &'a [u8],
    at: usize,
}

impl<'a> Entries<'a> {
    pub fn new(batch: &'a [u8]) -> Self {
        Entries { batch, at: 0 }
    }

    /// Where the entry last returned ends in the batch (its body's end).
    pub fn position(&self) -> usize {
        self.at
    }

    /// The partition of the next entry, to prefetch while this one is
    /// applied.
    pub fn next_partition(&self) -> Option<u16> {
        match self.batch.get(self.at..self.at + 2) {
            Some(&[a, b]) => Some(u16::from_le_bytes([a, b])),
            _ => None,
        }
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.batch.get(self.at..).filter(|r| !r.is_empty())?;
        let header = rest.get(..ENTRY_HEADER).and_then(|h| {
            let h: &[u8; ENTRY_HEADER] = h.try_into().ok()?;
            let [p0, p1, s @ .., l0, l1, l2, l3] = *h;
            let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
            let body = rest.get(ENTRY_HEADER..ENTRY_HEADER.checked_add(len)?)?;
            Some((u16::from_le_bytes([p0, p1]), u64::from_le_bytes(s), body))
        });
        let entry = match header {
            Some((p, seq, body)) => {
                self.at += ENTRY_HEADER + body.len();
                Entry::decode(p, seq, body)
            }
            None => Err(BatchError::Truncated),
        };
        if entry.is_err() {
            // Nothing after an entry that cannot be read is read.
            self.at = self.batch.len();
        }
        Some(entry)
    }
}

impl Ack {
    pub fn encode(&self, out: &mut BytesMut) {
        let mut pair = |p: u16, seq: u64| {
            out.put_u16_le(p);
            out.put_u64_le(seq);
        };
        match *self {
            Ack::Applied { partition, seq } => pair(partition, seq),
            Ack::SnapshotLoaded { partition, id } => {
                pair(partition, SNAPSHOT_END);
                pair(partition, id);
            }
            Ack::SnapshotRefused { partition, id } => {
                pair(partition, SNAPSHOT_REFUSED);
                pair(partition, id);
            }
            Ack::SnapshotNeeded { partition } => pair(partition, SNAPSHOT_NEEDED),
        }
    }

    /// Bytes [`Self::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        match self {
            Ack::SnapshotLoaded { .. } | Ack::SnapshotRefused { .. } => 2 * ACK_LEN,
            Ack::Applied { .. } | Ack::SnapshotNeeded { .. } => ACK_LEN,
        }
    }
}

/// The acks of an ack frame, in order. Pairs that carry no ack a primary
/// knows (an entry's marker) are skipped, and so is a last pair cut short.
pub struct Acks<'a> {
    rest: &'a [u8],
}

impl<'a> Acks<'a> {
    pub fn new(frame: &'a [u8]) -> Self {
        Acks { rest: frame }
    }

    fn pair(&mut self) -> Option<(u16, u64)> {
        let (pair, rest) = self.rest.split_first_chunk::<ACK_LEN>()?;
        self.rest = rest;
        let [p0, p1, s @ ..] = *pair;
        Some((u16::from_le_bytes([p0, p1]), u64::from_le_bytes(s)))
    }
}

impl Iterator for Acks<'_> {
    type Item = Ack;

    fn next(&mut self) -> Option<Ack> {
        loop {
            let (partition, seq) = self.pair()?;
            return Some(match seq {
                SNAPSHOT_NEEDED => Ack::SnapshotNeeded { partition },
                SNAPSHOT_END => Ack::SnapshotLoaded {
                    partition,
                    id: self.pair()?.1,
                },
                SNAPSHOT_REFUSED => Ack::SnapshotRefused {
                    partition,
                    id: self.pair()?.1,
                },
                seq if seq < FIRST_MARKER => Ack::Applied { partition, seq },
                _ => continue,
            });
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Any entry a primary may send (names and bodies of any bytes).
    pub(crate) fn any_entry() -> impl Strategy<Value = (u8, u16, u64, u64, u64, Vec<u8>)> {
        (
            0u8..8,
            any::<u16>(),
            1..FIRST_MARKER,
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..40),
        )
    }

    fn entry(
        &(kind, partition, seq, a, b, ref body): &(u8, u16, u64, u64, u64, Vec<u8>),
    ) -> Entry<'_> {
        match kind {
            0 => Entry::Change {
                partition,
                seq,
                change: body,
            },
            1 => Entry::TableEpoch { epoch: a },
            2 => Entry::SnapshotBegin {
                partition,
                next: seq,
                settled: a,
            },
            3 => Entry::SnapshotData {
                partition,
                change: body,
            },
            4 => Entry::SnapshotEnd {
                partition,
                next: seq,
                id: a,
                entries: b,
            },
            5 => Entry::WanApplied {
                partition,
                seq: a,
                target: body,
            },
            6 => Entry::TombstonesSettled { partition, hlc: a },
            _ => Entry::BackupTaken {
                partition,
                seq: a,
                id: body,
            },
        }
    }

    fn any_ack() -> impl Strategy<Value = Ack> {
        prop_oneof![
            (any::<u16>(), 0..FIRST_MARKER)
                .prop_map(|(partition, seq)| Ack::Applied { partition, seq }),
            (any::<u16>(), any::<u64>())
                .prop_map(|(partition, id)| Ack::SnapshotLoaded { partition, id }),
            (any::<u16>(), any::<u64>())
                .prop_map(|(partition, id)| Ack::SnapshotRefused { partition, id }),
            any::<u16>().prop_map(|partition| Ack::SnapshotNeeded { partition }),
        ]
    }

    /// The bytes of protocol version 4, written out by hand.
    #[test]
    fn the_bytes_are_protocol_version_4() {
        let mut out = BytesMut::new();
        Entry::TableEpoch { epoch: 9 }.encode(&mut out);
        Entry::SnapshotEnd {
            partition: 3,
            next: 5,
            id: 7,
            entries: 2,
        }
        .encode(&mut out);
        Entry::BackupTaken {
            partition: 1,
            seq: 4,
            id: b"b1",
        }
        .encode(&mut out);
        let mut want = Vec::new();
        let mut put = |p: u16, seq: u64, body: &[u8]| {
            want.extend_from_slice(&p.to_le_bytes());
            want.extend_from_slice(&seq.to_le_bytes());
            want.extend_from_slice(&(body.len() as u32).to_le_bytes());
            want.extend_from_slice(body);
        };
        put(0, u64::MAX - 6, &9u64.to_le_bytes());
        let end: Vec<u8> = [5u64, 7, 2].iter().flat_map(|w| w.to_le_bytes()).collect();
        put(3, u64::MAX - 1, &end);
        put(1, u64::MAX - 3, &[&4u64.to_le_bytes()[..], b"b1"].concat());
        assert_eq!(&out[..], &want[..]);

        let mut acks = BytesMut::new();
        Ack::SnapshotNeeded { partition: 2 }.encode(&mut acks);
        Ack::SnapshotRefused {
            partition: 2,
            id: 6,
        }
        .encode(&mut acks);
        let pairs: Vec<u8> = [(2u16, u64::MAX - 4), (2, u64::MAX - 5), (2, 6)]
            .iter()
            .flat_map(|(p, s)| [&p.to_le_bytes()[..], &s.to_le_bytes()].concat())
            .collect();
        assert_eq!(&acks[..], &pairs[..]);
    }

    proptest! {
        #[test]
        fn every_entry_reads_back_as_written(entries in proptest::collection::vec(any_entry(), 0..8)) {
            let want: Vec<Entry<'_>> = entries.iter().map(entry).collect();
            let mut out = BytesMut::new();
            want.iter().for_each(|e| e.encode(&mut out));
            let got: Vec<Entry<'_>> = Entries::new(&out).collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn every_ack_reads_back_as_written(acks in proptest::collection::vec(any_ack(), 0..8)) {
            let mut out = BytesMut::new();
            acks.iter().for_each(|a| a.encode(&mut out));
            prop_assert_eq!(out.len(), acks.iter().map(Ack::encoded_len).sum::<usize>());
            prop_assert_eq!(Acks::new(&out).collect::<Vec<_>>(), acks);
        }

        /// Whatever the bytes, reading them ends without a panic, every
        /// body is a slice of them (nothing allocated for a length a peer
        /// announced), and nothing is read after an error.
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut entries = Entries::new(&data);
            let mut failed = false;
            while let Some(e) = entries.next() {
                prop_assert!(!failed, "an entry read after an error");
                match e {
                    Ok(Entry::Change { change: body, .. } | Entry::SnapshotData { change: body, .. }
                        | Entry::WanApplied { target: body, .. } | Entry::BackupTaken { id: body, .. }) => {
                        let inside = data.as_ptr_range();
                        prop_assert!(body.is_empty() || inside.contains(&body.as_ptr()));
                    }
                    Ok(_) => {}
                    Err(_) => failed = true,
                }
                prop_assert!(entries.position() <= data.len());
            }
            prop_assert!(Acks::new(&data).count() <= data.len() / ACK_LEN);
        }

        /// A frame cut anywhere reads as the whole entries before the cut
        /// and then an error.
        #[test]
        fn a_cut_batch_reads_up_to_the_cut(entries in proptest::collection::vec(any_entry(), 1..6), cut in 1usize..64) {
            let want: Vec<Entry<'_>> = entries.iter().map(entry).collect();
            let mut out = BytesMut::new();
            want.iter().for_each(|e| e.encode(&mut out));
            let len = out.len().saturating_sub(cut);
            let got: Vec<_> = Entries::new(&out[..len]).collect();
            let whole = got.iter().take_while(|e| e.is_ok()).count();
            prop_assert!(whole < want.len());
            prop_assert!(got.len() - whole <= 1, "one error at most, and last");
            for (g, w) in got.iter().zip(&want).take(whole) {
                prop_assert_eq!(g.as_ref().ok(), Some(w));
            }
        }
    }
}
