//! Proof that both ends of a WAN link know the sites' shared `wan.secret`.
//!
//! The publisher's [`crate::wire::Hello`] carries a fresh nonce. A receiver
//! with a secret answers with its own nonce and a proof (HMAC-SHA256 of both
//! nonces, keyed by the secret); the publisher checks it and sends its own
//! proof ([`crate::wire::Frame::Proof`]) before any batch. Both nonces are
//! new per connection, so a recorded handshake proves nothing on another
//! connection, and the secret never crosses the link. A publisher with a
//! secret sends nothing to a site that cannot prove it knows it.
//!
//! This authenticates the peers at connect time; the frames after it are
//! not signed or encrypted (run the link over a VPN or TLS tunnel where the
//! path between sites is not trusted).

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const NONCE_LEN: usize = 16;
pub const PROOF_LEN: usize = 32;

pub type Nonce = [u8; NONCE_LEN];
pub type Proof = [u8; PROOF_LEN];

/// Which end computes the proof: the two proofs of one handshake differ, so
/// neither can be reflected back as the other.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    Receiver,
    Publisher,
}

/// A nonce from the operating system's random source.
pub fn nonce() -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).expect("the operating system's random source");
    n
}

fn mac(secret: &[u8], role: Role, publisher: &Nonce, receiver: &Nonce) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    m.update(match role {
        Role::Receiver => b"deltagrid wan receiver\0",
        Role::Publisher => b"deltagrid wan publisher",
    });
    m.update(publisher);
    m.update(receiver);
    m
}

/// `role`'s proof for the handshake with these nonces.
pub fn proof(secret: &[u8], role: Role, publisher: &Nonce, receiver: &Nonce) -> Proof {
    mac(secret, role, publisher, receiver).finalize().into_bytes().into()
}

/// Whether `got` is `role`'s proof for these nonces (constant-time compare).
pub fn verify(secret: &[u8], role: Role, publisher: &Nonce, receiver: &Nonce, got: &[u8]) -> bool {
    mac(secret, role, publisher, receiver).verify_slice(got).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_verifies_only_with_its_secret_role_and_nonces() {
        let (p, r) = (nonce(), nonce());
        assert_ne!(p, r);
        let good = proof(b"s3cret", Role::Publisher, &p, &r);
        assert!(verify(b"s3cret", Role::Publisher, &p, &r, &good));
        assert!(!verify(b"other", Role::Publisher, &p, &r, &good));
        assert!(!verify(b"s3cret", Role::Receiver, &p, &r, &good));
        assert!(!verify(b"s3cret", Role::Publisher, &r, &p, &good));
        assert!(!verify(b"s3cret", Role::Publisher, &p, &r, &good[..31]));
        assert!(!verify(b"s3cret", Role::Publisher, &p, &r, &[]));
    }
}
