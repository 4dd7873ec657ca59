//! Protocol errors: the one place their client-visible text lives.
//!
//! Invariant: for the request-side variants, `Display` is exactly the text
//! Redis sends (networking.c), without the `ERR ` prefix, so the server
//! replies `-ERR <display>` and clients that match on Redis's wording keep
//! working. The reply-side variants only reach our own tools.

/// Why a request or reply could not be decoded. The connection cannot be
/// resynchronised after one of these: the server replies and closes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*<n>` that is not an integer, or above `max_multibulk_len`.
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// `$<n>` that is not an integer, negative, or above `max_bulk_len`.
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// An element of a request array that is not a bulk string.
    #[error("Protocol error: expected '$', got '{}'", char::from(*.0))]
    ExpectedDollar(u8),
    /// An inline line longer than `max_inline_len`.
    #[error("Protocol error: too big inline request")]
    TooBigInlineRequest,
    /// A `*<n>` line longer than `max_inline_len`.
    #[error("Protocol error: too big mbulk count string")]
    TooBigMbulkCountString,
    /// A `$<n>` line longer than `max_inline_len`.
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCountString,
    /// An inline line with an unclosed quote, or a closing quote followed by
    /// something other than a space.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// Bulk data not followed by CRLF, or a CR not followed by LF. Redis
    /// skips those two bytes unchecked; we refuse them, since accepting them
    /// only hides a client that has lost track of its own framing.
    #[error("Protocol error: expected CRLF")]
    ExpectedCrlf,
    /// Reply side: a type byte that is neither RESP2 nor RESP3.
    #[error("Protocol error: unknown reply type '{}'", char::from(*.0))]
    UnknownReplyType(u8),
    /// Reply side: a line that does not parse as its type says; the payload
    /// names what was expected ("integer", "double", "boolean", ...).
    #[error("Protocol error: invalid {0}")]
    InvalidReply(&'static str),
    /// Reply side: aggregates nested deeper than [`crate::MAX_REPLY_DEPTH`].
    #[error("Protocol error: reply nested too deeply")]
    TooDeep,
}
