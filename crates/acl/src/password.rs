//! Passwords: only their SHA-256 (lower-case hex) is ever stored, as
//! Redis's `ACLHashPassword`; comparison is constant-time; `ACL GENPASS`.

use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::AclError;

/// Length of a password hash in hex characters.
pub const HASH_LEN: usize = 64;

/// The largest `ACL GENPASS` size in bits.
pub const GENPASS_MAX_BITS: i64 = 4096;

/// SHA-256 of `clear`, as 64 lower-case hex characters.
pub fn hash_password(clear: &[u8]) -> String {
    let digest = Sha256::digest(clear);
    let mut out = String::with_capacity(HASH_LEN);
    for b in digest {
        out.push(char::from(b"0123456789abcdef"[(b >> 4) as usize]));
        out.push(char::from(b"0123456789abcdef"[(b & 15) as usize]));
    }
    out
}

/// ACLCheckPasswordHash: exactly 64 characters of `0-9a-f`.
pub fn valid_hash(hash: &[u8]) -> bool {
    hash.len() == HASH_LEN && hash.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Equality without an early exit (time independent of where they differ).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// ACL GENPASS `[bits]`: `(bits + 3) / 4` random hex characters (256 bits
/// by default); bits must be in 1..=4096.
pub fn genpass(bits: Option<i64>) -> Result<String, AclError> {
    let bits = bits.unwrap_or(256);
    if bits <= 0 || bits > GENPASS_MAX_BITS {
        return Err(AclError::new(format!(
            "ACL GENPASS argument must be the number of bits for the output password, a positive number up to {GENPASS_MAX_BITS}"
        )));
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let mut out = String::with_capacity(chars);
    for b in bytes {
        out.push(char::from(b"0123456789abcdef"[(b >> 4) as usize]));
        out.push(char::from(b"0123456789abcdef"[(b & 15) as usize]));
    }
    out.truncate(chars);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_sha256_hex() {
        assert_eq!(
            hash_password(b"foo"),
            "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
        );
        assert!(valid_hash(hash_password(b"x").as_bytes()));
        assert!(!valid_hash(b"2C26"));
        assert!(!valid_hash(&[b'A'; 64]));
        assert!(constant_time_eq(b"ab", b"ab") && !constant_time_eq(b"ab", b"ac"));
    }

    #[test]
    fn genpass_sizes() {
        assert_eq!(genpass(None).unwrap().len(), 64);
        assert_eq!(genpass(Some(5)).unwrap().len(), 2);
        assert_eq!(genpass(Some(4096)).unwrap().len(), 1024);
        assert_eq!(
            genpass(Some(0)).unwrap_err().to_string(),
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"
        );
        assert!(genpass(Some(4097)).is_err());
        assert_ne!(genpass(None).unwrap(), genpass(None).unwrap());
    }
}
