//! Who is asking the console's API: a browser signed in with the login link
//! (its session cookie), or a caller with a token (`Authorization: Bearer`
//! when tokens are configured; on a token-less loopback server, the admin
//! token). The guard in front of `/console/api/` lets only those through,
//! and holds cookie requests to the same origin: a cookie is sent by the
//! browser on its own, so a page of another origin (another port of
//! 127.0.0.1 is same-site, so `SameSite=Strict` alone does not stop it)
//! must not be able to use it.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::Console;
use super::refused;
use crate::config::AdminOverHttp;
use crate::server::Principal;
use crate::server::identity::guard::{host_origin_refusal, parse_authority, parse_origin};
use crate::surfaces::admin::Caller;

/// How a console request was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    /// A session cookie: of the login link (principal `local`) or of a
    /// sign-in at the identity provider (the principal its ID token names,
    /// with its groups). Read-only unless `[admin] console = "actions"` (or
    /// the admin rules let it act).
    Session,
    /// A bearer token (its principal), or on a token-less server the admin
    /// token (principal `local`): the admin surface's rules as over `/mcp`.
    Token,
}

/// Why a request is not signed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotIn {
    /// It sent a bearer token that is not one of ours.
    WrongToken,
    /// No session cookie, or one that ended (`true`).
    NoSession(bool),
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == name).then_some(v)
        })
}

impl Console {
    /// Who sent `headers`, or why no one we know did.
    pub fn identify(&self, headers: &HeaderMap) -> Result<(Viewer, Principal), NotIn> {
        let g = &self.guard;
        if g.has_tokens() && headers.contains_key(header::AUTHORIZATION) {
            return g
                .principal(headers)
                .map(|p| (Viewer::Token, p))
                .ok_or(NotIn::WrongToken);
        }
        let mut ended = false;
        if let Some(id) = cookie(headers, &self.cookie) {
            if let Some(p) = self.logins.session(id, Instant::now()) {
                return Ok((Viewer::Session, p));
            }
            ended = true;
        }
        // Token-less (loopback) with an admin token: that token is what
        // this caller proves, as over /mcp.
        if !g.has_tokens()
            && self.app.config.config.admin.over_http() == AdminOverHttp::Token
            && headers.contains_key("x-wf-admin-token")
            && self.surfaces.admin.as_ref().is_some_and(|a| {
                a.permits(&Caller::Http {
                    admin_token: admin_token(headers),
                    principal: Principal::local(),
                })
            })
        {
            return Ok((Viewer::Token, Principal::local()));
        }
        Err(NotIn::NoSession(ended))
    }

    /// The 401 for a request that is not signed in, saying how to get in.
    pub fn not_signed_in(&self, why: NotIn) -> Response {
        let error = match why {
            NotIn::WrongToken => "unauthorized: wrong bearer token",
            NotIn::NoSession(true) => {
                "not signed in: this console session has ended (it expired, or wf restarted)"
            }
            NotIn::NoSession(false) => "not signed in to the console",
        };
        let mut r = refused(StatusCode::UNAUTHORIZED, error, &self.how_to_get_in());
        if self.guard.has_tokens() {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("static"));
        }
        r
    }
}

/// The `X-Wf-Admin-Token` header's value.
pub fn admin_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get("x-wf-admin-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Whether a cookie-borne request comes from the console's own origin.
/// `Sec-Fetch-Site`, when the browser sends it, must say `same-origin`; a
/// request that may change state must also carry an `Origin` naming the
/// host and port it was sent to (browsers send one with every POST).
pub fn same_origin(method: &Method, headers: &HeaderMap) -> Result<(), &'static str> {
    if headers
        .get("sec-fetch-site")
        .is_some_and(|site| site.as_bytes() != b"same-origin")
    {
        return Err("cross-origin console request refused (Sec-Fetch-Site is not same-origin)");
    }
    if matches!(*method, Method::GET | Method::HEAD) {
        return Ok(());
    }
    let Some((scheme, host, port)) = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .and_then(parse_origin)
    else {
        return Err(
            "console request refused: a request that may change state needs the Origin header of the console's own page",
        );
    };
    let own = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(parse_authority);
    let default_port = if scheme == "https" { 443 } else { 80 };
    match own {
        Some((h, p)) if h == host && p.unwrap_or(default_port) == port => Ok(()),
        _ => Err("cross-origin console request refused (Origin is not the console's own)"),
    }
}

/// In front of `/console/api/`: Host and Origin (as for `/mcp`), then a
/// token or a session; a session's request must be same-origin. The
/// request goes on with its [`Viewer`] and [`Principal`].
pub async fn guard(State(c): State<Console>, mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    if let Some(refused) = host_origin_refusal(&c.guard, headers) {
        return refused;
    }
    let (viewer, principal) = match c.identify(headers) {
        Ok(v) => v,
        Err(why) => return c.not_signed_in(why),
    };
    if viewer == Viewer::Session
        && let Err(why) = same_origin(request.method(), headers)
    {
        tracing::warn!(method = %request.method(), "{why}");
        return refused(
            StatusCode::FORBIDDEN,
            why,
            "use the console page itself; other pages may not drive it",
        );
    }
    request.extensions_mut().insert(viewer);
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// Whether the browser reached wf over HTTPS (a TLS proxy in front).
pub fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .is_some_and(|p| p.as_bytes().eq_ignore_ascii_case(b"https"))
}

/// The `Set-Cookie` value of a new session (login link or identity
/// provider). Secure only when the browser reached wf over HTTPS: over
/// plain http:// a browser drops a Secure cookie, and on loopback the
/// traffic never leaves the machine.
pub fn session_cookie(c: &Console, headers: &HeaderMap, id: &str) -> String {
    format!(
        "{}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{}",
        c.cookie,
        super::logins::SESSION_MAX_AGE.as_secs(),
        if over_https(headers) { "; Secure" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        let h = headers(&[("cookie", "a=1; wf_console_8765=abc"), ("cookie", "x=2")]);
        assert_eq!(cookie(&h, "wf_console_8765"), Some("abc"));
        assert_eq!(cookie(&h, "x"), Some("2"));
        assert_eq!(cookie(&h, "wf_console_876"), None);
        assert_eq!(cookie(&headers(&[]), "a"), None);
    }

    #[test]
    fn cookie_requests_must_be_same_origin() {
        let post = Method::POST;
        let get = Method::GET;
        let own = [
            ("host", "127.0.0.1:8765"),
            ("origin", "http://127.0.0.1:8765"),
        ];
        assert!(same_origin(&post, &headers(&own)).is_ok());
        assert!(
            same_origin(
                &post,
                &headers(&[
                    ("host", "localhost:8765"),
                    ("origin", "http://localhost:8765"),
                    ("sec-fetch-site", "same-origin")
                ])
            )
            .is_ok()
        );
        // Another port of the same host is same-site, not same-origin.
        for bad in [
            vec![
                ("host", "127.0.0.1:8765"),
                ("origin", "http://127.0.0.1:3000"),
            ],
            vec![
                ("host", "127.0.0.1:8765"),
                ("origin", "http://localhost:8765"),
            ],
            vec![("host", "127.0.0.1:8765"), ("origin", "null")],
            vec![("host", "127.0.0.1:8765")],
            vec![
                ("host", "127.0.0.1:8765"),
                ("origin", "http://127.0.0.1:8765"),
                ("sec-fetch-site", "same-site"),
            ],
        ] {
            assert!(same_origin(&post, &headers(&bad)).is_err(), "{bad:?}");
        }
        // Reads need no Origin (a browser sends none on a same-origin GET),
        // but a browser's word that they are cross-site refuses them.
        assert!(same_origin(&get, &headers(&[("host", "127.0.0.1:8765")])).is_ok());
        assert!(
            same_origin(
                &get,
                &headers(&[("host", "127.0.0.1:8765"), ("sec-fetch-site", "cross-site")])
            )
            .is_err()
        );
        // A Host without a port has the Origin scheme's default (behind a
        // TLS proxy the page is https, wf's own listener plain HTTP).
        assert!(
            same_origin(
                &post,
                &headers(&[("host", "wf.example"), ("origin", "http://wf.example")])
            )
            .is_ok()
        );
        assert!(
            same_origin(
                &post,
                &headers(&[("host", "wf.example"), ("origin", "https://wf.example")])
            )
            .is_ok()
        );
        assert!(
            same_origin(
                &post,
                &headers(&[
                    ("host", "wf.example"),
                    ("origin", "https://wf.example:8443")
                ])
            )
            .is_err()
        );
    }
}
