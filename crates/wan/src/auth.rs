//! Proof that both ends of a WAN link know the sites' shared `wan.secret`.
//!
//! The publisher's [`crate::wire::Hello`] carries a fresh nonce. A receiver
//! with a secret answers with its own nonce and a proof (HMAC-SHA256 of both
//! nonces, keyed by the secret: [`framing::proof`]); the publisher checks it
//! and sends its own proof ([`crate::wire::Frame::Proof`]) before any batch.
//! Both nonces are new per connection, so a recorded handshake proves
//! nothing on another connection, and the secret never crosses the link. A
//! publisher with a secret sends nothing to a site that cannot prove it
//! knows it.
//!
//! This authenticates the peers at connect time; the frames after it are
//! not signed or encrypted (run the link over a VPN or TLS tunnel where the
//! path between sites is not trusted).

pub use framing::proof::{nonce, Nonce, Proof};

/// Which end computes the proof: the two proofs of one handshake differ, so
/// neither can be reflected back as the other.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    Receiver,
    Publisher,
}

impl Role {
    fn label(self) -> &'static [u8] {
        match self {
            Role::Receiver => b"deltagrid wan receiver\0",
            Role::Publisher => b"deltagrid wan publisher",
        }
    }
}

/// `role`'s proof for the handshake with these nonces.
pub fn proof(secret: &[u8], role: Role, publisher: &Nonce, receiver: &Nonce) -> Proof {
    framing::proof::proof(secret, role.label(), publisher, receiver)
}

/// Whether `got` is `role`'s proof for these nonces (constant-time compare).
pub fn verify(secret: &[u8], role: Role, publisher: &Nonce, receiver: &Nonce, got: &[u8]) -> bool {
    framing::proof::verify(secret, role.label(), publisher, receiver, got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_roles_proofs_differ() {
        let (p, r) = (nonce(), nonce());
        let publisher = proof(b"s3cret", Role::Publisher, &p, &r);
        assert!(verify(b"s3cret", Role::Publisher, &p, &r, &publisher));
        assert!(!verify(b"s3cret", Role::Receiver, &p, &r, &publisher));
        assert!(!verify(b"other", Role::Publisher, &p, &r, &publisher));
    }
}
