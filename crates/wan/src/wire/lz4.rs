//! Compression of batch bodies: lz4 blocks, tried while they pay off
//! ([`Lz4Probe`]), and decompression bounded by the raw length the frame
//! announced (checked against the limits before this is called).

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::WireError;

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

    /// `body` compressed, when the probe advises trying and it came out
    /// smaller.
    pub(super) fn compress(&mut self, body: &[u8]) -> Option<Vec<u8>> {
        if !self.should_try(body) {
            return None;
        }
        let compressed = lz4_flex::block::compress(body);
        self.record(body.len(), compressed.len());
        (compressed.len() < body.len()).then_some(compressed)
    }

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

/// A compressed batch body, which must come out `raw_len` bytes long.
pub(super) fn decompress(compressed: &[u8], raw_len: usize) -> Result<Bytes, WireError> {
    let raw = lz4_flex::block::decompress(compressed, raw_len)
        .map_err(|e| WireError::Compression(e.to_string()))?;
    if raw.len() != raw_len {
        return Err(WireError::Compression(format!(
            "{} bytes, header said {raw_len}",
            raw.len()
        )));
    }
    Ok(Bytes::from(raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode, encode_with, Frame};
    use bytes::BytesMut;

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
}
