//! LZF decompression (Marc Lehmann's liblzf, as bundled with Redis), for
//! strings and encoded blobs Redis compresses in RDB payloads (every string
//! longer than 20 bytes by default).
//!
//! Written here rather than taken from crates.io: the `lzf` crate is marked
//! deprecated by its author and `lzf-rust` is a single fresh release; the
//! decoder is a few dozen lines. It works on untrusted input: the claimed
//! output length is checked against what the input can expand to and
//! against the largest string (512 MB), memory is taken as output is really
//! produced, and every literal run and back reference is bounds-checked, so
//! a forged payload fails and never panics.

use crate::MAX_STRING;

/// The most one input byte can expand to: a 3-byte back reference copies
/// at most 7 + 255 + 2 = 264 bytes.
const MAX_RATIO: usize = 88;

/// Decompresses `input` into exactly `out_len` bytes; None when the input
/// is not a valid LZF stream of that length.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    if out_len == 0 || out_len > input.len().saturating_mul(MAX_RATIO) || out_len > MAX_STRING {
        return None;
    }
    // Room for what the input surely holds; past that the output grows as
    // it is really produced, so a claimed length costs nothing by itself.
    let mut out = Vec::with_capacity(out_len.min(input.len().saturating_mul(2)));
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            // A literal run of ctrl + 1 bytes.
            let n = ctrl + 1;
            if out.len() + n > out_len {
                return None;
            }
            out.extend_from_slice(input.get(i..i + n)?);
            i += n;
        } else {
            // A back reference: length in the top 3 bits (7: one more byte
            // follows), distance in the low 5 bits and the next byte.
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i)? as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
            i += 1;
            let len = len + 2;
            if back > out.len() || out.len() + len > out_len {
                return None;
            }
            // Byte by byte: the source may overlap what is being written.
            let start = out.len() - back;
            for k in start..start + len {
                let b = out[k];
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decompresses_what_redis_wrote() {
        // 'a' * 1000 as redis-server 7.0.15 compresses it in DUMP.
        let c = b"\x01aa\xe0\xff\x00\xe0\xff\x00\xe0\xff\x00\xe0\xc3\x00\x01aa";
        assert_eq!(decompress(c, 1000).unwrap(), vec![b'a'; 1000]);
        assert_eq!(decompress(c, 999), None);
        assert_eq!(decompress(c, 1001), None);
    }

    #[test]
    fn refuses_bad_streams_without_panicking() {
        assert_eq!(decompress(b"", 1), None);
        assert_eq!(decompress(b"\x05ab", 6), None); // literal past the end
        assert_eq!(decompress(b"\x20\x00", 3), None); // reference before the start
        assert_eq!(decompress(b"\x00a\xe0", 10), None); // truncated reference
        assert_eq!(decompress(b"\x00a", 1 << 40), None); // forged length
        assert_eq!(decompress(b"\x00a\x20\x00", 4), Some(b"aaaa".to_vec()));
    }
}
