//! RESP2/RESP3 codec for deltagrid: the server decodes requests and writes
//! replies with it, tools and tests decode replies and encode requests.
//!
//! Why our own and not the `redis-protocol` crate: the server needs request
//! limits checked before anything is allocated for a peer-announced length,
//! inline commands parsed the way Redis does, and arguments handed out as
//! zero-copy slices of the read buffer.
//!
//! Layout, one concept per module:
//! - [`request`]: client requests, both directions (decode on the server,
//!   encode in tools).
//! - [`reply`]: [`ReplyWriter`], replies written straight into the output
//!   buffer in the connection's protocol version.
//! - [`frame`]: [`Frame`], a decoded reply, for code acting as a client.
//! - `limits`, `error`, `line`, `double`: the shared pieces (size limits,
//!   error texts, header-line lexing, the textual forms of doubles).
//!
//! Invariant shared by both decoders: they keep no state between calls. A
//! call either consumes exactly one whole request/reply, or consumes nothing
//! (incomplete input, or an error); so a caller retries with more bytes by
//! calling again on the same buffer.

mod double;
mod error;
mod limits;
mod line;

pub mod frame;
pub mod reply;
pub mod request;

#[cfg(test)]
mod testutil;

pub use double::format_human_double;
pub use error::ProtocolError;
pub use frame::{decode_reply, Frame, MAX_REPLY_DEPTH};
pub use limits::Limits;
pub use reply::ReplyWriter;
pub use request::{decode_request, decode_request_into, encode_request, locate_request, Located};
