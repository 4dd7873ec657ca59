//! Encoding and decoding of one journal record.
//!
//! Frame: `len u32 LE | crc32c u32 LE (of the payload) | payload`.
//!
//! The length is read from disk, so it is untrusted: a decoder checks it
//! against `max_record` *before* allocating, which bounds the memory a forged
//! or flipped length can claim. The CRC covers only the payload; a damaged
//! length shows up as a payload whose CRC does not match, or as a record that
//! runs past the end of the data (a torn record).

use std::io::{self, Read};

/// Bytes in a record header: the length and the CRC.
pub const HEADER_LEN: usize = 8;

/// What is wrong with the bytes of a record. Not an I/O failure: the bytes
/// were read, they just do not form a valid record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    #[error("header cut short: {got} of {HEADER_LEN} bytes")]
    TornHeader { got: usize },
    #[error("payload cut short: {got} of {len} bytes")]
    TornPayload { len: u32, got: u64 },
    #[error("length {len} exceeds max_record {max}")]
    TooLarge { len: u32, max: usize },
    #[error("crc32c mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
}

impl Damage {
    /// True for damage a crash while appending can cause: the end of the
    /// data was not (fully) written. A record that is complete but too large
    /// is not torn: it was written with a larger `max_record`.
    pub fn is_torn(&self) -> bool {
        !matches!(self, Damage::TooLarge { .. })
    }
}

/// Reading a record failed: either the reader failed or the bytes are bad.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Damaged(#[from] Damage),
}

/// The fixed-size front of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub crc: u32,
}

impl Header {
    /// The header for `payload`; `None` if it does not fit a `u32` length.
    pub fn for_payload(payload: &[u8]) -> Option<Header> {
        let len = u32::try_from(payload.len()).ok()?;
        Some(Header {
            len,
            crc: crc32c::crc32c(payload),
        })
    }

    pub fn to_bytes(self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..4].copy_from_slice(&self.len.to_le_bytes());
        out[4..].copy_from_slice(&self.crc.to_le_bytes());
        out
    }

    pub fn from_bytes(bytes: [u8; HEADER_LEN]) -> Header {
        let [a, b, c, d, e, f, g, h] = bytes;
        Header {
            len: u32::from_le_bytes([a, b, c, d]),
            crc: u32::from_le_bytes([e, f, g, h]),
        }
    }

    /// Size of the whole record on disk.
    pub fn record_len(self) -> u64 {
        HEADER_LEN as u64 + u64::from(self.len)
    }

    /// Rejects a length over `max_record`, before anything is allocated.
    pub fn check(self, max_record: usize) -> Result<(), Damage> {
        match usize::try_from(self.len) {
            Ok(len) if len <= max_record => Ok(()),
            _ => Err(Damage::TooLarge {
                len: self.len,
                max: max_record,
            }),
        }
    }
}

/// Encodes one record into `out`.
pub fn encode(payload: &[u8], max_record: usize, out: &mut Vec<u8>) -> Result<(), Damage> {
    let header = Header::for_payload(payload).ok_or(Damage::TooLarge {
        len: u32::MAX,
        max: max_record,
    })?;
    header.check(max_record)?;
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// Reads a header. `Ok(None)` is a clean end: no byte at all was left.
pub fn read_header(r: &mut impl Read) -> Result<Option<Header>, RecordError> {
    let mut buf = [0u8; HEADER_LEN];
    let got = read_full(r, &mut buf)?;
    match got {
        0 => Ok(None),
        HEADER_LEN => Ok(Some(Header::from_bytes(buf))),
        got => Err(Damage::TornHeader { got }.into()),
    }
}

/// Reads the payload `header` announces and checks its CRC. The caller has
/// already checked the length against `max_record`; the allocation is
/// exactly `header.len` bytes.
pub fn read_payload(r: &mut impl Read, header: Header) -> Result<Vec<u8>, RecordError> {
    let len = usize::try_from(header.len).map_err(|_| Damage::TooLarge {
        len: header.len,
        max: usize::MAX,
    })?;
    let mut payload = vec![0u8; len];
    let got = read_full(r, &mut payload)?;
    if got < len {
        return Err(Damage::TornPayload {
            len: header.len,
            got: got as u64,
        }
        .into());
    }
    let computed = crc32c::crc32c(&payload);
    if computed != header.crc {
        return Err(Damage::Checksum {
            stored: header.crc,
            computed,
        }
        .into());
    }
    Ok(payload)
}

/// Reads one whole record from a stream. `Ok(None)` is a clean end. Never
/// allocates more than `max_record` bytes for the payload.
pub fn read_record(r: &mut impl Read, max_record: usize) -> Result<Option<Vec<u8>>, RecordError> {
    let Some(header) = read_header(r)? else {
        return Ok(None);
    };
    header.check(max_record)?;
    read_payload(r, header).map(Some)
}

/// Fills `buf` as far as the reader allows; returns how much was filled.
/// A short count means the reader ended.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Cursor;

    fn decode_all(bytes: &[u8], max: usize) -> (Vec<Vec<u8>>, Option<RecordError>) {
        let mut r = Cursor::new(bytes);
        let mut out = Vec::new();
        loop {
            match read_record(&mut r, max) {
                Ok(Some(p)) => out.push(p),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        for p in [&b""[..], b"a", b"hello world"] {
            encode(p, 64, &mut buf).unwrap();
        }
        let (records, err) = decode_all(&buf, 64);
        assert!(err.is_none());
        assert_eq!(
            records,
            vec![b"".to_vec(), b"a".to_vec(), b"hello world".to_vec()]
        );
    }

    #[test]
    fn oversize_rejected_on_encode_and_decode() {
        let mut buf = Vec::new();
        assert_eq!(
            encode(&[0u8; 17], 16, &mut buf),
            Err(Damage::TooLarge { len: 17, max: 16 })
        );
        assert!(buf.is_empty());
        encode(&[7u8; 17], 17, &mut buf).unwrap();
        let err = read_record(&mut Cursor::new(&buf), 16).unwrap_err();
        assert!(matches!(
            err,
            RecordError::Damaged(Damage::TooLarge { len: 17, max: 16 })
        ));
    }

    #[test]
    fn torn_and_flipped() {
        let mut buf = Vec::new();
        encode(b"payload", 64, &mut buf).unwrap();
        let err = read_record(&mut Cursor::new(&buf[..5]), 64).unwrap_err();
        assert!(matches!(
            err,
            RecordError::Damaged(Damage::TornHeader { got: 5 })
        ));
        let err = read_record(&mut Cursor::new(&buf[..10]), 64).unwrap_err();
        assert!(matches!(
            err,
            RecordError::Damaged(Damage::TornPayload { len: 7, got: 2 })
        ));
        buf[9] ^= 1;
        let err = read_record(&mut Cursor::new(&buf), 64).unwrap_err();
        assert!(matches!(err, RecordError::Damaged(Damage::Checksum { .. })));
    }

    proptest! {
        #[test]
        fn decoder_never_panics_on_random_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            max in 0usize..256,
        ) {
            let (records, _) = decode_all(&bytes, max);
            let mut consumed = 0usize;
            for p in &records {
                prop_assert!(p.len() <= max);
                consumed += HEADER_LEN + p.len();
            }
            prop_assert!(consumed <= bytes.len());
        }

        #[test]
        fn decoder_reads_back_what_was_encoded(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..16),
        ) {
            let mut buf = Vec::new();
            for p in &payloads {
                encode(p, 64, &mut buf).unwrap();
            }
            let (records, err) = decode_all(&buf, 64);
            prop_assert!(err.is_none());
            prop_assert_eq!(records, payloads);
        }
    }
}
