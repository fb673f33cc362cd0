//! Values that came from the environment (`${VAR}` in the config) are
//! secrets: they are remembered here and blanked out of everything wf shows
//! that a plugin or an upstream wrote — plugin log lines and source errors —
//! since an upstream library may quote them (a URL with a key in it, say).

use std::sync::RwLock;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Shorter values would blank out ordinary words.
const MIN_LEN: usize = 4;

pub const REDACTED: &str = "[redacted]";

/// Remembers `value` as a secret.
pub fn remember(value: &str) {
    if value.len() < MIN_LEN {
        return;
    }
    let mut all = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|s| s == value) {
        all.push(value.to_string());
        // Longest first, so a secret containing another is blanked whole.
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// `text` with every remembered secret blanked out.
pub fn redact(text: &str) -> String {
    let all = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    let mut out = text.to_string();
    for s in all.iter() {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), REDACTED);
        }
    }
    out
}

/// SHA-256 of `b`: how a token is kept and compared.
pub fn sha256(b: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(b).into()
}

/// Compares two digests without an early exit.
pub fn eq_32(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Compares two secrets in time that depends on neither: both are hashed
/// first, then the digests compared without an early exit.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    eq_32(&sha256(a), &sha256(b))
}

#[cfg(test)]
mod tests {
    #[test]
    fn blanks_remembered_values() {
        super::remember("s3cr3t-value-for-test");
        super::remember("abc");
        let t = super::redact("url http://h/mcp?key=s3cr3t-value-for-test and abc");
        assert_eq!(t, "url http://h/mcp?key=[redacted] and abc");
    }
}
