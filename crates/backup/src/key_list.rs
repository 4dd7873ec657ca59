//! Keys as the stored formats keep them: `varint length | bytes`, one
//! after another after a postcard header, so decoding slices every key out
//! of one decompressed buffer instead of allocating each. Shared by the
//! index ([`crate::index`]) and the resolved object ([`crate::resolved`]).
//!
//! Reading checks every count and length against what is left, so a forged
//! count allocates nothing big and a damaged length is an error.

use bytes::Bytes;

pub fn put(out: &mut Vec<u8>, key: &[u8]) {
    let mut n = key.len() as u64;
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(key);
}

/// Slices keys off the front of a buffer.
pub struct KeyReader {
    buf: Bytes,
}

impl KeyReader {
    pub fn new(buf: Bytes) -> KeyReader {
        KeyReader { buf }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The next `n` keys.
    pub fn take(&mut self, n: u64) -> Result<Vec<Bytes>, String> {
        // Every key takes at least its length byte.
        if n > self.buf.len() as u64 {
            return Err("keys run past the end".into());
        }
        (0..n).map(|_| self.next()).collect()
    }

    fn next(&mut self) -> Result<Bytes, String> {
        let short = || "keys run past the end".to_string();
        let (mut len, mut shift, mut used) = (0u64, 0u32, 0usize);
        loop {
            let b = *self.buf.get(used).ok_or_else(short)?;
            used += 1;
            len |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return Err("bad key length".into());
            }
        }
        let end = (used as u64)
            .checked_add(len)
            .filter(|&e| e <= self.buf.len() as u64)
            .ok_or_else(short)?;
        let key = self.buf.slice(used..end as usize);
        self.buf = self.buf.slice(end as usize..);
        Ok(key)
    }
}
