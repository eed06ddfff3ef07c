//! Secrets the console makes and compares: random values in hex (CSRF tokens, session
//! ids, nonces, set tokens) and a comparison whose time does not tell where two
//! secrets differ.

use rand::RngCore;
use subtle::ConstantTimeEq;

/// `bytes` random bytes, in lowercase hex.
pub(super) fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buffer);
    buffer.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether two secrets are equal, in time that does not depend on where they differ.
pub(super) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}
