//! What deltagrid's three peer protocols share, so that each defines only
//! its own frame kinds and payloads: the node-to-node data link
//! (`cluster::wire`), the metadata group's RPC (`cluster::metadata::rpc`)
//! and the WAN link between sites (`wan::wire`).
//!
//! - [`frame`]: every frame is `len: u32 LE | kind: u8 | payload`, `len`
//!   counting kind and payload. [`Limits`] is the one policy for what a
//!   peer may announce (frame bytes, string bytes, item counts); every
//!   length read from the wire is checked against it before anything is
//!   allocated, and input cut short asks for more rather than failing.
//! - [`hello`]: a [`Protocol`] (name, magic, version, limits) checks the
//!   first frame a peer sends, from its first bytes on: a stranger is "not
//!   a deltagrid peer", another version is "unsupported protocol version N
//!   (this node speaks M)".
//! - [`payload`]: reading a frame's payload with every read checked
//!   ([`Payload`]), writing strings ([`put_str`]) and varints
//!   ([`put_varint`]).
//! - [`read`]: reading frames off a connection ([`read_with`], [`expect`]).
//! - [`proof`]: proving a shared secret without sending it (HMAC-SHA256
//!   over both ends' nonces under a label naming the role).
//! - [`tls`]: mutual TLS of a peer link, a peer named by its certificate.

pub mod frame;
pub mod hello;
pub mod payload;
pub mod proof;
pub mod read;
pub mod tls;

pub use frame::{announced_len, begin_frame, encode_frame, Limits, OpenFrame};
pub use hello::Protocol;
pub use payload::{put_str, put_varint, Payload};
pub use read::{expect, read_with, ReadError};

/// Why bytes from a peer are refused; a protocol with more to refuse wraps
/// it in its own error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The first frame is not this protocol's hello: the peer speaks
    /// something else (a Redis client, an HTTP probe, another protocol).
    #[error("not a deltagrid {}peer (bad magic)", named(.0))]
    BadMagic(&'static str),
    #[error(
        "unsupported {}protocol version {got} (this node speaks {speaks})",
        named(protocol)
    )]
    Version {
        protocol: &'static str,
        got: u16,
        speaks: u16,
    },
    /// A length over [`Limits`]: a frame's, or what a frame says its
    /// contents become (a decompressed batch).
    #[error("frame of {len} bytes is over the {max}-byte limit")]
    TooLarge { len: usize, max: usize },
    #[error("malformed {0}")]
    Malformed(&'static str),
}

/// A protocol's name as it stands before "peer" or "protocol" in a
/// message: none for the data link, "WAN " for the WAN.
fn named(protocol: &str) -> String {
    if protocol.is_empty() {
        String::new()
    } else {
        format!("{protocol} ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_protocol() {
        assert_eq!(
            Error::BadMagic("").to_string(),
            "not a deltagrid peer (bad magic)"
        );
        assert_eq!(
            Error::BadMagic("WAN").to_string(),
            "not a deltagrid WAN peer (bad magic)"
        );
        let version = Error::Version {
            protocol: "metadata",
            got: 9,
            speaks: 1,
        };
        assert_eq!(
            version.to_string(),
            "unsupported metadata protocol version 9 (this node speaks 1)"
        );
        let version = Error::Version {
            protocol: "",
            got: 9,
            speaks: 4,
        };
        assert_eq!(
            version.to_string(),
            "unsupported protocol version 9 (this node speaks 4)"
        );
        assert_eq!(
            Error::TooLarge { len: 10, max: 5 }.to_string(),
            "frame of 10 bytes is over the 5-byte limit"
        );
    }
}
