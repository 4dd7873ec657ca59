//! Size limits the decoders enforce on what a peer announces.
//!
//! Invariant: every length a peer sends (bulk length, element count, length
//! of a line still waiting for its CRLF) is compared with these limits as
//! soon as it is known, before anything is allocated for it.

/// Limits applied while decoding client requests.
///
/// [`decode_reply`](crate::decode_reply) applies the same limits to replies.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Longest bulk string accepted (Redis: `proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Most elements in one request array (or reply aggregate).
    pub max_multibulk_len: usize,
    /// Longest inline command line (Redis: `PROTO_INLINE_MAX_SIZE`); also
    /// bounds header lines (`*<n>`, `$<n>`) and, in replies, every line.
    pub max_inline_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: 1024 * 1024,
            max_inline_len: 64 * 1024,
        }
    }
}
