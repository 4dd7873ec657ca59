//! Reading the log: one change by seq, or every change from a consumer's
//! cursor on, as the encodings it holds.

use super::PartitionLog;
#[cfg(test)]
use crate::change::Change;
use crate::codec;

/// A change read from the log.
pub struct Logged<'a> {
    pub seq: u64,
    pub head: codec::Head<'a>,
    /// As [`codec::encode`] wrote it.
    pub encoded: &'a [u8],
}

impl PartitionLog {
    /// The encoding of the change at `seq`, if held.
    pub fn get(&self, seq: u64) -> Option<&[u8]> {
        let i = seq.checked_sub(self.first_seq())?;
        self.spans
            .get(usize::try_from(i).ok()?)
            .map(|s| self.slice(s))
    }

    /// The changes with seq >= `from`, oldest first; None when `from` was
    /// trimmed.
    pub fn read_from(&self, from: u64) -> Option<impl Iterator<Item = Logged<'_>>> {
        let first = self.first_seq();
        if from < first {
            return None;
        }
        let skip = ((from - first) as usize).min(self.spans.len());
        Some(self.spans.range(skip..).zip(from..).map(|(s, seq)| {
            let encoded = self.slice(s);
            // Appends take only what codec::encode wrote (a backup's, once
            // its primary's batch decoded).
            let head = codec::head(encoded).expect("the log holds encoded changes");
            Logged { seq, head, encoded }
        }))
    }

    /// [`Self::read_from`], decoded.
    #[cfg(test)]
    pub(crate) fn changes_from(
        &self,
        from: u64,
    ) -> Option<impl Iterator<Item = (u64, Change)> + '_> {
        let decode = |l: Logged| {
            (
                l.seq,
                codec::decode(l.encoded)
                    .expect("the log holds encoded changes")
                    .0,
            )
        };
        self.read_from(from).map(|it| it.map(decode))
    }
}
