//! Secrets the console makes and compares: random values in hex (CSRF tokens, session
//! ids, nonces, set tokens), a comparison whose time does not tell where two secrets
//! differ, and the strength a token given to the console must have.

use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::error::{Error, Result};

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

/// The fewest bits a token must carry, as [`token_bits`] estimates them: 32 hex digits,
/// 22 base64 characters. A token must also have at least [`MIN_TOKEN_DISTINCT`] different
/// characters and no whitespace or control characters. With 2^128 tokens to try, guessing
/// is hopeless whatever the pace of answers, so the console never slows a right token.
pub const MIN_TOKEN_BITS: u32 = 128;

/// How to make a token, as the refusals say.
pub const MAKE_A_TOKEN: &str = "make one with `openssl rand -hex 32` (256 bits)";

/// The bits a token carries at most if its characters were drawn at random from the
/// classes it uses: hex digits (16) when it is all hex of one case, else lower-case
/// letters (26), upper-case letters (26), digits (10) and other printable characters
/// (33), each class counted when used. An upper bound for words a person chose: what
/// [`MIN_TOKEN_DISTINCT`] and the advice to generate one are for.
pub fn token_bits(token: &str) -> u32 {
    let is_hex = |lower: bool| {
        token.chars().all(|c| {
            c.is_ascii_digit()
                || if lower {
                    ('a'..='f').contains(&c)
                } else {
                    ('A'..='F').contains(&c)
                }
        })
    };
    let alphabet: u32 = if !token.is_empty() && (is_hex(true) || is_hex(false)) {
        16
    } else {
        let mut alphabet = 0;
        for (used, size) in [
            (token.chars().any(|c| c.is_ascii_lowercase()), 26),
            (token.chars().any(|c| c.is_ascii_uppercase()), 26),
            (token.chars().any(|c| c.is_ascii_digit()), 10),
            (token.chars().any(|c| !c.is_ascii_alphanumeric()), 33),
        ] {
            if used {
                alphabet += size;
            }
        }
        alphabet
    };
    let length = u32::try_from(token.chars().count()).unwrap_or(u32::MAX);
    // floor(length × log2(alphabet)), in whole bits.
    let bits = f64::from(length) * f64::from(alphabet.max(1)).log2();
    if bits >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        bits as u32
    }
}

/// The fewest different characters a token may have.
pub const MIN_TOKEN_DISTINCT: usize = 8;

/// Refuses a token that is easy to guess; `which` names it in the message.
pub(super) fn check_strength(which: &str, token: &str) -> Result<()> {
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Config(format!(
            "the console's {which} holds whitespace or control characters; use printable characters only: {MAKE_A_TOKEN}"
        )));
    }
    let distinct = token
        .chars()
        .collect::<std::collections::HashSet<_>>()
        .len();
    if distinct < MIN_TOKEN_DISTINCT {
        return Err(Error::Config(format!(
            "the console's {which} has {distinct} different characters; it needs at least {MIN_TOKEN_DISTINCT}: {MAKE_A_TOKEN}"
        )));
    }
    let bits = token_bits(token);
    if bits < MIN_TOKEN_BITS {
        return Err(Error::Config(format!(
            "the console's {which} carries at most {bits} bits; it needs {MIN_TOKEN_BITS} (32 hex digits or 22 base64 characters, drawn at random): {MAKE_A_TOKEN}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_s_bits_are_counted_from_the_classes_of_its_characters() {
        assert_eq!(token_bits(""), 0);
        assert_eq!(token_bits(&"0f".repeat(16)), 128, "32 hex digits");
        assert_eq!(token_bits(&"0F".repeat(16)), 128, "upper-case hex too");
        assert_eq!(token_bits("0123456789abcdef"), 64);
        // 22 base64 characters: upper, lower, digits and `+/` (95 symbols' classes).
        assert!(token_bits("Zm9vYmFyYmF6cXV4cXV1eA") >= 128);
        assert!(token_bits("mixedCaseLetters") < 128);
    }
}
