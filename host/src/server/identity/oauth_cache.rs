//! The JWTs the resource server has already checked, so that a client's
//! later requests with the same token skip the signature check: keyed by the
//! token's SHA-256 (the token itself is not kept), each with its principal
//! and `exp`. Bounded: when full, expired entries go first, then the eighth
//! least recently used. An entry is good until its `exp` (+ leeway) only:
//! a token revoked at the issuer keeps working until then unless
//! introspection is configured (opaque tokens are never cached).

use std::collections::HashMap;

use super::limits::Principal;

pub struct CheckedTokens {
    max: usize,
    /// Digest → (principal, `exp`, last use).
    entries: HashMap<[u8; 32], (Principal, i64, u64)>,
    tick: u64,
}

impl CheckedTokens {
    pub fn new(max: usize) -> Self {
        Self {
            max: max.max(8),
            entries: HashMap::new(),
            tick: 0,
        }
    }

    /// The principal of a token checked before, if it has not expired
    /// (`now` and `exp` in seconds since the epoch).
    pub fn get(&mut self, digest: &[u8; 32], now: i64, leeway: i64) -> Option<Principal> {
        self.tick += 1;
        let tick = self.tick;
        match self.entries.get_mut(digest) {
            Some((p, exp, used)) if now <= *exp + leeway => {
                *used = tick;
                Some(p.clone())
            }
            Some(_) => {
                self.entries.remove(digest);
                None
            }
            None => None,
        }
    }

    pub fn insert(&mut self, digest: [u8; 32], p: Principal, exp: i64, now: i64, leeway: i64) {
        if self.entries.len() >= self.max && !self.entries.contains_key(&digest) {
            self.entries.retain(|_, (_, e, _)| now <= *e + leeway);
            if self.entries.len() >= self.max {
                let mut uses: Vec<u64> = self.entries.values().map(|(_, _, u)| *u).collect();
                let cut = self.max / 8;
                uses.select_nth_unstable(cut);
                let oldest = uses[cut];
                self.entries.retain(|_, (_, _, u)| *u > oldest);
            }
        }
        self.tick += 1;
        self.entries.insert(digest, (p, exp, self.tick));
    }

    /// Forgets every token (the issuer's keys changed).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, to age or mark them in tests.
    #[cfg(test)]
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut (Principal, i64, u64)> {
        self.entries.values_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(i: u32) -> [u8; 32] {
        let mut d = [0u8; 32];
        d[..4].copy_from_slice(&i.to_le_bytes());
        d
    }

    #[test]
    fn hits_until_expiry_then_checked_again() {
        let mut c = CheckedTokens::new(16);
        let p = Principal::named("alice");
        c.insert(d(1), p.clone(), 100, 50, 30);
        assert_eq!(c.get(&d(1), 130, 30), Some(p));
        assert_eq!(c.get(&d(1), 131, 30), None, "past exp + leeway");
        assert_eq!(c.len(), 0, "an expired entry is dropped");
        assert_eq!(c.get(&d(2), 0, 30), None);
    }

    #[test]
    fn bounded_expired_first_then_least_recently_used() {
        let mut c = CheckedTokens::new(16);
        for i in 0..16 {
            c.insert(d(i), Principal::named(&format!("p{i}")), 1000, 0, 0);
        }
        // Token 0 is in use: it outlives the others inserted with it.
        assert!(c.get(&d(0), 0, 0).is_some());
        c.insert(d(100), Principal::named("new"), 1000, 0, 0);
        assert!(c.len() <= 16);
        assert!(c.get(&d(0), 0, 0).is_some(), "recently used stays");
        assert!(c.get(&d(1), 0, 0).is_none(), "least recently used went");
        assert!(c.get(&d(100), 0, 0).is_some());
        // Expired entries go before any live one.
        let mut c = CheckedTokens::new(16);
        for i in 0..16 {
            c.insert(
                d(i),
                Principal::named("x"),
                if i < 8 { 10 } else { 1000 },
                0,
                0,
            );
        }
        c.insert(d(99), Principal::named("y"), 1000, 500, 0);
        assert_eq!(c.len(), 9);
        for i in 8..16 {
            assert!(c.get(&d(i), 500, 0).is_some());
        }
        for _ in 0..100 {
            c.insert(d(rand_id()), Principal::named("z"), 1000, 500, 0);
            assert!(c.len() <= 16);
        }
    }

    fn rand_id() -> u32 {
        uuid::Uuid::new_v4().as_u128() as u32 | 0x8000_0000
    }
}
