//! "Sign in with `<issuer>`" (`[server.oauth.console]`): the OpenID Connect
//! authorization code flow with PKCE (S256), `state` and `nonce`.
//!
//! `GET /console/oidc/start` keeps a pending sign-in (bounded, expiring) and
//! sends the browser to the issuer's authorization endpoint; the issuer sends
//! it back to `GET /console/oidc/callback`, where wf trades the code for
//! tokens at the token endpoint, checks the ID token with the issuer's keys
//! (the resource server's cache), names the principal and groups by the same
//! claims as for access tokens, and opens a console session with the cookie
//! the login link sets. The pending sign-in is bound to the browser that
//! started it by a second cookie (`SameSite=Lax`, so it comes back with the
//! issuer's redirect): a code stolen or planted elsewhere does not sign in.
//! No code, token or secret is ever logged; the tokens are dropped once the
//! session is open (wf keeps only the principal).

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::Console;
use super::logins::secret;
use super::viewer::cookie;
use crate::secrets::{eq_32, sha256};
use crate::server::Principal;
use crate::server::identity::oauth::{ConsoleClient, OAuthVerifier, read_bounded};

/// How long a sign-in may take at the issuer.
pub const PENDING_TTL: Duration = Duration::from_secs(10 * 60);
/// Sign-ins under way at once; one more drops the oldest.
const MAX_PENDING: usize = 64;

struct Pending {
    state: [u8; 32],
    /// Digest of the binding cookie's value.
    binding: [u8; 32],
    verifier: String,
    nonce: String,
    started: Instant,
}

/// What one sign-in needs to leave for the issuer.
pub struct Begun {
    pub state: String,
    /// The binding cookie's value.
    pub binding: String,
    pub challenge: String,
    pub nonce: String,
}

/// Why a callback does not sign in (the word the page is sent back with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackRefusal {
    /// No pending sign-in has this `state` (expired, used, or made up).
    UnknownState,
    /// The binding cookie is missing or another browser's.
    OtherBrowser,
}

/// Sign-ins under way, bounded; each is used once.
#[derive(Default)]
pub struct PendingLogins {
    inner: Mutex<VecDeque<Pending>>,
}

impl PendingLogins {
    /// A new sign-in: fresh `state`, binding, PKCE verifier and `nonce`.
    pub fn begin(&self, now: Instant) -> Begun {
        let (state, binding, verifier, nonce) = (secret(), secret(), secret(), secret());
        let challenge = b64url(&sha256(verifier.as_bytes()));
        let mut q = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        q.retain(|p| now.saturating_duration_since(p.started) < PENDING_TTL);
        while q.len() >= MAX_PENDING {
            q.pop_front();
        }
        q.push_back(Pending {
            state: sha256(state.as_bytes()),
            binding: sha256(binding.as_bytes()),
            verifier,
            nonce: nonce.clone(),
            started: now,
        });
        Begun {
            state,
            binding,
            challenge,
            nonce,
        }
    }

    /// The PKCE verifier and `nonce` of the sign-in `state` names, if this
    /// browser (`binding`) started it; the sign-in is spent either way.
    pub fn finish(
        &self,
        state: &str,
        binding: Option<&str>,
        now: Instant,
    ) -> Result<(String, String), CallbackRefusal> {
        let digest = sha256(state.as_bytes());
        let mut q = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        q.retain(|p| now.saturating_duration_since(p.started) < PENDING_TTL);
        let mut found = None;
        for (i, p) in q.iter().enumerate() {
            if eq_32(&digest, &p.state) {
                found = Some(i);
            }
        }
        let p = found
            .and_then(|i| q.remove(i))
            .ok_or(CallbackRefusal::UnknownState)?;
        match binding {
            Some(b) if eq_32(&sha256(b.as_bytes()), &p.binding) => Ok((p.verifier, p.nonce)),
            _ => Err(CallbackRefusal::OtherBrowser),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap().len()
    }
}

/// Base64url without padding (RFC 7636's `code_challenge`).
fn b64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// The binding cookie's name (beside the session cookie's).
fn binding_cookie(c: &Console) -> String {
    format!("{}_oidc", c.cookie)
}

fn query_param<'a>(uri: &'a Uri, key: &str) -> Option<std::borrow::Cow<'a, str>> {
    url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

fn redirect(to: &str, cookies: &[String]) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(to) {
        h.insert(header::LOCATION, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    for c in cookies {
        if let Ok(v) = HeaderValue::from_str(c) {
            h.append(header::SET_COOKIE, v);
        }
    }
    r
}

/// Back to the page, which says why (`/console/?login=<word>`).
fn refused_to(word: &str, c: &Console) -> Response {
    redirect(
        &format!("/console/?login={word}"),
        &[format!(
            "{}=; Path=/console/oidc; HttpOnly; SameSite=Lax; Max-Age=0",
            binding_cookie(c)
        )],
    )
}

/// The verifier and the console client, when sign-in is configured.
fn configured(c: &Console) -> Option<(&OAuthVerifier, &ConsoleClient)> {
    let v = c.guard.oauth()?;
    let k = v.console_client()?;
    Some((v.as_ref(), k))
}

/// The issuer the page offers to sign in with, if any.
pub fn issuer(c: &Console) -> Option<String> {
    configured(c).map(|(v, _)| v.issuer().to_string())
}

/// `GET /console/oidc/start`: to the issuer's authorization endpoint.
pub async fn start(State(c): State<Console>, headers: HeaderMap) -> Response {
    let Some((v, k)) = configured(&c) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let endpoint = match v.endpoints().await {
        Ok(m) => m.authorization_endpoint,
        Err(e) => {
            tracing::warn!("console sign-in: cannot read the issuer's metadata: {e}");
            None
        }
    };
    let Some(endpoint) = endpoint.and_then(|e| url::Url::parse(&e).ok()) else {
        tracing::warn!("console sign-in: the issuer's metadata names no authorization_endpoint");
        return refused_to("oidc", &c);
    };
    let b = c.oidc.begin(Instant::now());
    let mut to = endpoint;
    to.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &k.client_id)
        .append_pair("redirect_uri", &k.redirect_uri)
        .append_pair("scope", &k.scopes.join(" "))
        .append_pair("state", &b.state)
        .append_pair("nonce", &b.nonce)
        .append_pair("code_challenge", &b.challenge)
        .append_pair("code_challenge_method", "S256");
    let secure = super::viewer::over_https(&headers) || k.redirect_uri.starts_with("https:");
    let binding = format!(
        "{}={}; Path=/console/oidc; HttpOnly; SameSite=Lax; Max-Age={}{}",
        binding_cookie(&c),
        b.binding,
        PENDING_TTL.as_secs(),
        if secure { "; Secure" } else { "" }
    );
    redirect(to.as_str(), &[binding])
}

/// `GET /console/oidc/callback?code=…&state=…`: a session, or back to the
/// page with `?login=denied|oidc|stale`.
pub async fn callback(State(c): State<Console>, headers: HeaderMap, uri: Uri) -> Response {
    let Some((v, k)) = configured(&c) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let state = query_param(&uri, "state").unwrap_or_default();
    let pending = c.oidc.finish(
        &state,
        cookie(&headers, &binding_cookie(&c)),
        Instant::now(),
    );
    let (verifier, nonce) = match pending {
        Ok(p) => p,
        Err(why) => {
            tracing::warn!(
                ?why,
                "console sign-in refused: no sign-in of this browser's is under way"
            );
            return refused_to("stale", &c);
        }
    };
    if let Some(err) = query_param(&uri, "error") {
        // The issuer's error code is a short ASCII word; keep it so.
        let err: String = err
            .chars()
            .filter(char::is_ascii_graphic)
            .take(64)
            .collect();
        tracing::warn!(error = %err, "console sign-in: the issuer did not sign the person in");
        return refused_to("denied", &c);
    }
    // RFC 9207: an issuer that names itself must be ours.
    if query_param(&uri, "iss").is_some_and(|iss| iss != v.issuer()) {
        tracing::warn!("console sign-in refused: the callback names another issuer");
        return refused_to("oidc", &c);
    }
    let Some(code) = query_param(&uri, "code") else {
        return refused_to("oidc", &c);
    };
    let principal = match exchange(v, k, &code, &verifier, &nonce).await {
        Ok(p) => p,
        Err(reason) => {
            tracing::warn!(%reason, "console sign-in refused");
            return refused_to("oidc", &c);
        }
    };
    if c.guard.names_static(&principal) {
        tracing::warn!(principal = %principal, "console sign-in refused: the principal claim names a static principal");
        return refused_to("oidc", &c);
    }
    tracing::info!(principal = %principal, groups = ?principal.groups(), "console: signed in at the identity provider");
    let id = c.logins.open_session(principal, Instant::now());
    let mut cookies = vec![super::viewer::session_cookie(&c, &headers, &id)];
    cookies.push(format!(
        "{}=; Path=/console/oidc; HttpOnly; SameSite=Lax; Max-Age=0",
        binding_cookie(&c)
    ));
    redirect("/console/", &cookies)
}

/// The code traded at the token endpoint; the ID token checked.
async fn exchange(
    v: &OAuthVerifier,
    k: &ConsoleClient,
    code: &str,
    verifier: &str,
    nonce: &str,
) -> Result<Principal, String> {
    let endpoint = v
        .endpoints()
        .await
        .map_err(|e| format!("the issuer's metadata: {e}"))?
        .token_endpoint
        .ok_or("the issuer's metadata names no token_endpoint")?;
    // Built before any await: the serializer is not Send.
    let body = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", &k.redirect_uri)
            .append_pair("code_verifier", verifier);
        if k.client_secret.is_none() {
            form.append_pair("client_id", &k.client_id);
        }
        form.finish()
    };
    let mut req = v
        .http()
        .post(&endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json");
    // client_secret_basic, each part form-encoded (RFC 6749 2.3.1).
    if let Some(s) = &k.client_secret {
        let enc = |x: &str| url::form_urlencoded::byte_serialize(x.as_bytes()).collect::<String>();
        req = req.basic_auth(enc(&k.client_id), Some(enc(s)));
    }
    let mut resp = req
        .body(body)
        .send()
        .await
        .map_err(|e| format!("token endpoint: {}", e.without_url()))?;
    let status = resp.status();
    let body = read_bounded(&mut resp)
        .await
        .map_err(|e| format!("token endpoint: {e}"))?;
    let doc: Value =
        serde_json::from_slice(&body).map_err(|_| "token endpoint: not JSON".to_string())?;
    if !status.is_success() {
        // Only the error code: the description may echo what was sent.
        let err = doc.get("error").and_then(Value::as_str).unwrap_or("?");
        return Err(format!("token endpoint: HTTP {status} ({err:.64})"));
    }
    let id_token = doc
        .get("id_token")
        .and_then(Value::as_str)
        .ok_or("token endpoint: no id_token in the answer (is `openid` a scope of the client?)")?;
    v.verify_id_token(id_token, &k.client_id, nonce)
        .await
        .map_err(|r| format!("ID token: {}", r.reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_challenge_is_base64url_of_sha256() {
        // RFC 7636 appendix B.
        let v = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        assert_eq!(
            b64url(&sha256(v.as_bytes())),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert_eq!(b64url(b"f"), "Zg");
        assert_eq!(b64url(b"fo"), "Zm8");
        assert_eq!(b64url(b"foo"), "Zm9v");
    }

    #[test]
    fn a_sign_in_finishes_once_in_the_browser_that_started_it() {
        let p = PendingLogins::default();
        let t0 = Instant::now();
        let b = p.begin(t0);
        assert_eq!(b.challenge.len(), 43);
        assert_eq!(
            p.finish(&b.state, Some(&secret()), t0),
            Err(CallbackRefusal::OtherBrowser),
            "another browser's cookie"
        );
        assert_eq!(
            p.finish(&b.state, Some(&b.binding), t0),
            Err(CallbackRefusal::UnknownState),
            "a refused callback spends the sign-in"
        );
        let b = p.begin(t0);
        let (verifier, nonce) = p.finish(&b.state, Some(&b.binding), t0).unwrap();
        assert_eq!(b64url(&sha256(verifier.as_bytes())), b.challenge);
        assert_eq!(nonce, b.nonce);
        assert_eq!(
            p.finish(&b.state, Some(&b.binding), t0),
            Err(CallbackRefusal::UnknownState),
            "used once"
        );
        assert_eq!(p.finish("", None, t0), Err(CallbackRefusal::UnknownState));
    }

    #[test]
    fn sign_ins_expire_and_are_bounded() {
        let p = PendingLogins::default();
        let t0 = Instant::now();
        let b = p.begin(t0);
        assert_eq!(
            p.finish(&b.state, Some(&b.binding), t0 + PENDING_TTL),
            Err(CallbackRefusal::UnknownState)
        );
        let first = p.begin(t0);
        for _ in 0..MAX_PENDING {
            p.begin(t0);
        }
        assert_eq!(p.len(), MAX_PENDING);
        assert_eq!(
            p.finish(&first.state, Some(&first.binding), t0),
            Err(CallbackRefusal::UnknownState),
            "the oldest dropped out"
        );
    }
}
