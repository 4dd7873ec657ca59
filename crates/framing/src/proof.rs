//! Proof of a shared secret between two ends of a connection, without the
//! secret crossing it: each side contributes a fresh nonce, and a proof is
//! HMAC-SHA256, keyed by the secret, over a label naming the prover's role
//! and both nonces. A proof thus holds for one connection only and cannot
//! be reflected back to its sender as the other role's.
//!
//! Used by `site.secret` on `cluster_listen` (`cluster::auth`) and by
//! `wan.secret` in the WAN hello/welcome (`wan::auth`); each picks its own
//! labels and where the nonces and proofs travel.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const NONCE_LEN: usize = 16;
pub const PROOF_LEN: usize = 32;

pub type Nonce = [u8; NONCE_LEN];
pub type Proof = [u8; PROOF_LEN];

/// A nonce from the operating system's random source.
pub fn nonce() -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).expect("the operating system's random source");
    n
}

fn mac(secret: &[u8], label: &[u8], first: &Nonce, second: &Nonce) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    m.update(label);
    m.update(first);
    m.update(second);
    m
}

/// The proof, under `label`, for these two nonces in this order.
pub fn proof(secret: &[u8], label: &[u8], first: &Nonce, second: &Nonce) -> Proof {
    mac(secret, label, first, second)
        .finalize()
        .into_bytes()
        .into()
}

/// Whether `got` is that proof (constant-time compare).
pub fn verify(secret: &[u8], label: &[u8], first: &Nonce, second: &Nonce, got: &[u8]) -> bool {
    mac(secret, label, first, second).verify_slice(got).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_verifies_only_with_its_secret_label_and_nonces() {
        let (a, b) = (nonce(), nonce());
        assert_ne!(a, b);
        let good = proof(b"s3cret", b"one", &a, &b);
        assert!(verify(b"s3cret", b"one", &a, &b, &good));
        assert!(!verify(b"other", b"one", &a, &b, &good));
        assert!(!verify(b"s3cret", b"two", &a, &b, &good));
        assert!(!verify(b"s3cret", b"one", &b, &a, &good));
        assert!(!verify(b"s3cret", b"one", &a, &b, &good[..31]));
    }

    /// HMAC-SHA256(secret, label ‖ first ‖ second), as computed by
    /// Python's `hmac`: what both ends of a link of mixed versions agree on.
    #[test]
    fn the_bytes_of_a_proof_are_pinned() {
        let got = proof(b"s3cret", b"deltagrid site initiator", &[1; 16], &[2; 16]);
        let want = [
            0x3e, 0xd6, 0x03, 0x96, 0x23, 0x38, 0x0b, 0x17, 0xad, 0xdb, 0x7a, 0x41, 0xd3, 0xc3,
            0x27, 0x28, 0x71, 0x4d, 0xaa, 0x8c, 0x5e, 0xc8, 0x64, 0xed, 0x05, 0x6a, 0x91, 0xe1,
            0x2d, 0x7d, 0xb6, 0x4b,
        ];
        assert_eq!(got, want);
    }
}
