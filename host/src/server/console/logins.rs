//! The console's sign-in: one-time login links and the sessions they open.
//! `wf serve --http` prints a link carrying a fresh random token; opening it
//! trades the token for a session id, kept by the browser in an `HttpOnly`
//! cookie. A sign-in at the identity provider (`oidc`) opens a session the
//! same way, for the principal its ID token names. Only SHA-256 digests of tokens and session ids are kept, and a
//! presented value is compared with every entry without an early exit, so
//! timing tells nothing about which one (if any) matched.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::secrets::{eq_32, sha256};
use crate::server::Principal;

/// How long a login link works after it was printed.
pub const LINK_TTL: Duration = Duration::from_secs(10 * 60);
/// A session unused this long ends.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 60 * 60);
/// A session ends this long after its sign-in, used or not.
pub const SESSION_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Sessions kept at once; one more ends the least recently used (with
/// `[server.oauth.console]` a whole team may be signed in).
pub const MAX_SESSIONS: usize = 256;
/// Links kept at once (used ones too, until they expire, so a reused link
/// is told apart from a wrong one); one more drops the oldest.
const MAX_LINKS: usize = 8;
/// Length of a token and of a session id: 64 hex digits.
const SECRET_LEN: usize = 64;

/// Why a login link did not sign in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkRefusal {
    /// It worked once already.
    Used,
    /// Its time ran out.
    Expired,
    /// Not a link this wf printed (it restarted since, or the link is cut).
    Unknown,
}

impl LinkRefusal {
    /// The word the page is redirected with (`/console/?login=<word>`).
    pub fn word(self) -> &'static str {
        match self {
            LinkRefusal::Used => "used",
            LinkRefusal::Expired => "expired",
            LinkRefusal::Unknown => "invalid",
        }
    }
}

struct Link {
    digest: [u8; 32],
    expires: Instant,
    used: bool,
}

struct Session {
    digest: [u8; 32],
    /// `local` for a login link's session.
    principal: Principal,
    signed_in: Instant,
    last_used: Instant,
}

impl Session {
    fn live(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_used) < SESSION_IDLE
            && now.saturating_duration_since(self.signed_in) < SESSION_MAX_AGE
    }
}

#[derive(Default)]
struct Inner {
    links: VecDeque<Link>,
    sessions: VecDeque<Session>,
}

/// Outstanding links and live sessions, bounded.
#[derive(Default)]
pub struct Logins {
    inner: Mutex<Inner>,
}

/// 244 random bits from the OS generator (two version-4 UUIDs), as 64 hex
/// digits: safe in a URL and a cookie as they are.
pub(super) fn secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The digest of a presented value, or `None` when it cannot be one of
/// ours (wrong length or characters): nothing to compare then.
fn digest_of(presented: &str) -> Option<[u8; 32]> {
    (presented.len() == SECRET_LEN && presented.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| sha256(presented.as_bytes()))
}

impl Logins {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new link's token, valid once within [`LINK_TTL`] of `now`.
    pub fn mint_link(&self, now: Instant) -> String {
        let token = secret();
        let mut inner = self.lock();
        inner.links.retain(|l| l.expires > now);
        while inner.links.len() >= MAX_LINKS {
            inner.links.pop_front();
        }
        inner.links.push_back(Link {
            digest: sha256(token.as_bytes()),
            expires: now + LINK_TTL,
            used: false,
        });
        token
    }

    /// Trades a link's token for a new session id; the link is spent.
    pub fn redeem(&self, token: &str, now: Instant) -> Result<String, LinkRefusal> {
        let Some(digest) = digest_of(token) else {
            return Err(LinkRefusal::Unknown);
        };
        let mut inner = self.lock();
        let mut found = None;
        for (i, l) in inner.links.iter().enumerate() {
            if eq_32(&digest, &l.digest) {
                found = Some(i);
            }
        }
        let Some(i) = found else {
            return Err(LinkRefusal::Unknown);
        };
        let link = &mut inner.links[i];
        if link.used {
            return Err(LinkRefusal::Used);
        }
        if link.expires <= now {
            return Err(LinkRefusal::Expired);
        }
        link.used = true;
        drop(inner);
        Ok(self.open_session(Principal::local(), now))
    }

    /// A new session for `principal`; its id goes in the cookie.
    pub fn open_session(&self, principal: Principal, now: Instant) -> String {
        let mut inner = self.lock();
        let id = secret();
        inner.sessions.retain(|s| s.live(now));
        if inner.sessions.len() >= MAX_SESSIONS {
            // The least recently used one goes.
            if let Some(oldest) =
                (0..inner.sessions.len()).min_by_key(|&i| inner.sessions[i].last_used)
            {
                inner.sessions.remove(oldest);
            }
        }
        inner.sessions.push_back(Session {
            digest: sha256(id.as_bytes()),
            principal,
            signed_in: now,
            last_used: now,
        });
        id
    }

    /// The principal of the live session `id` names; using it keeps it alive.
    pub fn session(&self, id: &str, now: Instant) -> Option<Principal> {
        let digest = digest_of(id)?;
        let mut inner = self.lock();
        let mut found = None;
        for (i, s) in inner.sessions.iter().enumerate() {
            if eq_32(&digest, &s.digest) {
                found = Some(i);
            }
        }
        match found {
            Some(i) if inner.sessions[i].live(now) => {
                inner.sessions[i].last_used = now;
                Some(inner.sessions[i].principal.clone())
            }
            Some(i) => {
                inner.sessions.remove(i);
                None
            }
            None => None,
        }
    }

    #[cfg(test)]
    fn sessions(&self) -> usize {
        self.lock().sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_signs_in_once() {
        let logins = Logins::default();
        let t0 = Instant::now();
        let token = logins.mint_link(t0);
        assert_eq!(token.len(), SECRET_LEN);
        assert_ne!(token, logins.mint_link(t0), "each link is fresh");
        let id = logins.redeem(&token, t0).unwrap();
        assert_ne!(id, token);
        assert!(logins.session(&id, t0).is_some());
        assert_eq!(logins.redeem(&token, t0), Err(LinkRefusal::Used));
        assert_eq!(
            logins.redeem(&secret(), t0),
            Err(LinkRefusal::Unknown),
            "a token wf never printed"
        );
        assert_eq!(logins.redeem("short", t0), Err(LinkRefusal::Unknown));
        let mut near = token.clone().into_bytes();
        near[SECRET_LEN - 1] = if near[SECRET_LEN - 1] == b'0' {
            b'1'
        } else {
            b'0'
        };
        let near = String::from_utf8(near).unwrap();
        assert_eq!(logins.redeem(&near, t0), Err(LinkRefusal::Unknown));
        // A session id is no link, and a link no session.
        assert_eq!(logins.redeem(&id, t0), Err(LinkRefusal::Unknown));
        assert!(logins.session(&token, t0).is_none());
        assert!(logins.session("", t0).is_none());
    }

    #[test]
    fn a_session_carries_its_principal() {
        let logins = Logins::default();
        let t0 = Instant::now();
        let link = logins.redeem(&logins.mint_link(t0), t0).unwrap();
        let alice = Principal::with_groups("alice@example.com", vec!["eng".into()]);
        let id = logins.open_session(alice.clone(), t0);
        assert_eq!(logins.session(&link, t0), Some(Principal::local()));
        let p = logins.session(&id, t0).unwrap();
        assert_eq!(p.name(), "alice@example.com");
        assert_eq!(p.groups().unwrap().len(), 1);
    }

    #[test]
    fn a_link_expires() {
        let logins = Logins::default();
        let t0 = Instant::now();
        let token = logins.mint_link(t0);
        assert_eq!(
            logins.redeem(&token, t0 + LINK_TTL),
            Err(LinkRefusal::Expired)
        );
        let token = logins.mint_link(t0);
        assert!(
            logins
                .redeem(&token, t0 + LINK_TTL - Duration::from_secs(1))
                .is_ok()
        );
    }

    #[test]
    fn sessions_end_when_idle_or_old() {
        let logins = Logins::default();
        let t0 = Instant::now();
        let id = logins.redeem(&logins.mint_link(t0), t0).unwrap();
        assert!(
            logins.session(&id, t0 + SESSION_IDLE).is_none(),
            "idle too long"
        );
        assert!(
            logins.session(&id, t0).is_none(),
            "an ended session stays ended"
        );
        // Used often, it still ends at its maximum age.
        let id = logins.redeem(&logins.mint_link(t0), t0).unwrap();
        let mut t = t0;
        while t + SESSION_IDLE / 2 < t0 + SESSION_MAX_AGE {
            t += SESSION_IDLE / 2;
            assert!(logins.session(&id, t).is_some());
        }
        assert!(logins.session(&id, t0 + SESSION_MAX_AGE).is_none());
    }

    #[test]
    fn sessions_and_links_are_bounded() {
        let logins = Logins::default();
        let t0 = Instant::now();
        let mut ids = Vec::new();
        for i in 0..MAX_SESSIONS as u64 + 3 {
            let t = t0 + Duration::from_secs(i);
            ids.push(logins.redeem(&logins.mint_link(t), t).unwrap());
        }
        assert_eq!(logins.sessions(), MAX_SESSIONS);
        let now = t0 + Duration::from_secs(100);
        // The three least recently used went; the newest are live.
        assert!(logins.session(&ids[0], now).is_none());
        assert!(logins.session(&ids[2], now).is_none());
        assert!(logins.session(&ids[3], now).is_some());
        assert!(logins.session(ids.last().unwrap(), now).is_some());
        // Links: the oldest unused ones drop out past the bound.
        let first = logins.mint_link(now);
        for _ in 0..MAX_LINKS {
            logins.mint_link(now);
        }
        assert_eq!(logins.redeem(&first, now), Err(LinkRefusal::Unknown));
        assert!(logins.lock().links.len() <= MAX_LINKS);
    }
}
