//! What the node's change log holds, one journal record each: a change a
//! partition logged or applied at a seq, a copy emptied to load a snapshot
//! from its primary, and that snapshot's entries. The change bytes are the
//! keyspace's own encoding (`keyspace::codec`), decoded only on recovery.
//!
//! Layout: `kind u8 | partition u16 LE | ...`: a change adds `seq u64 LE`
//! and the encoded change; a reset `next_seq u64 LE | settled u64 LE`; a
//! loaded entry the encoded change.

/// One record of the change log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    Change {
        partition: u16,
        seq: u64,
        body: &'a [u8],
    },
    Reset {
        partition: u16,
        next_seq: u64,
        settled: u64,
    },
    Loaded {
        partition: u16,
        body: &'a [u8],
    },
}

const CHANGE: u8 = 1;
const RESET: u8 = 2;
const LOADED: u8 = 3;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record cut short")]
    Short,
    #[error("unknown record kind {0}")]
    Kind(u8),
    #[error("{0} bytes after a reset record")]
    Trailing(usize),
}

impl<'a> Record<'a> {
    pub fn partition(&self) -> u16 {
        match self {
            Record::Change { partition, .. }
            | Record::Reset { partition, .. }
            | Record::Loaded { partition, .. } => *partition,
        }
    }

    /// Bytes [`Record::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        3 + match self {
            Record::Change { body, .. } => 8 + body.len(),
            Record::Reset { .. } => 16,
            Record::Loaded { body, .. } => body.len(),
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let (kind, partition) = match self {
            Record::Change { partition, .. } => (CHANGE, partition),
            Record::Reset { partition, .. } => (RESET, partition),
            Record::Loaded { partition, .. } => (LOADED, partition),
        };
        out.push(kind);
        out.extend_from_slice(&partition.to_le_bytes());
        match self {
            Record::Change { seq, body, .. } => {
                out.extend_from_slice(&seq.to_le_bytes());
                out.extend_from_slice(body);
            }
            Record::Reset {
                next_seq, settled, ..
            } => {
                out.extend_from_slice(&next_seq.to_le_bytes());
                out.extend_from_slice(&settled.to_le_bytes());
            }
            Record::Loaded { body, .. } => out.extend_from_slice(body),
        }
    }

    /// Reads a record; its body borrows from `bytes`.
    pub fn decode(bytes: &'a [u8]) -> Result<Record<'a>, RecordError> {
        let (&kind, rest) = bytes.split_first().ok_or(RecordError::Short)?;
        let (partition, rest) = split_u16(rest)?;
        match kind {
            CHANGE => {
                let (seq, body) = split_u64(rest)?;
                Ok(Record::Change {
                    partition,
                    seq,
                    body,
                })
            }
            RESET => {
                let (next_seq, rest) = split_u64(rest)?;
                let (settled, rest) = split_u64(rest)?;
                if !rest.is_empty() {
                    return Err(RecordError::Trailing(rest.len()));
                }
                Ok(Record::Reset {
                    partition,
                    next_seq,
                    settled,
                })
            }
            LOADED => Ok(Record::Loaded {
                partition,
                body: rest,
            }),
            k => Err(RecordError::Kind(k)),
        }
    }
}

fn split_u16(b: &[u8]) -> Result<(u16, &[u8]), RecordError> {
    let (head, rest) = b.split_first_chunk::<2>().ok_or(RecordError::Short)?;
    Ok((u16::from_le_bytes(*head), rest))
}

pub(crate) fn split_u64(b: &[u8]) -> Result<(u64, &[u8]), RecordError> {
    let (head, rest) = b.split_first_chunk::<8>().ok_or(RecordError::Short)?;
    Ok((u64::from_le_bytes(*head), rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record() -> impl Strategy<Value = (u8, u16, u64, u64, Vec<u8>)> {
        (
            0u8..3,
            any::<u16>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
    }

    proptest! {
        #[test]
        fn records_round_trip((kind, partition, a, b, body) in record()) {
            let r = match kind {
                0 => Record::Change { partition, seq: a, body: &body },
                1 => Record::Reset { partition, next_seq: a, settled: b },
                _ => Record::Loaded { partition, body: &body },
            };
            let mut out = Vec::new();
            r.encode(&mut out);
            prop_assert_eq!(out.len(), r.encoded_len());
            prop_assert_eq!(Record::decode(&out).unwrap(), r);
        }

        /// Any bytes decode to a record or an error, never a panic.
        #[test]
        fn any_bytes_decode_or_fail(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = Record::decode(&bytes);
        }
    }

    #[test]
    fn short_and_unknown_records_are_refused() {
        assert_eq!(Record::decode(&[]), Err(RecordError::Short));
        assert_eq!(Record::decode(&[1, 0]), Err(RecordError::Short));
        assert_eq!(Record::decode(&[9, 0, 0]), Err(RecordError::Kind(9)));
        let mut out = Vec::new();
        Record::Reset {
            partition: 1,
            next_seq: 2,
            settled: 3,
        }
        .encode(&mut out);
        out.push(0);
        assert_eq!(Record::decode(&out), Err(RecordError::Trailing(1)));
    }
}
