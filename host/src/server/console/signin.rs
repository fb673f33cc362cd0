//! Signing in to the console: `GET /console/login?token=…` (the link `wf
//! serve --http` prints) sets the session cookie and sends the browser to
//! the bare page, so the token leaves the address bar and the history; and
//! `GET /console/api/access`, which tells the page what its viewer may do
//! and, to one who is not signed in, how to get in.

use std::net::SocketAddr;
use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::Console;
use super::access::Kind;
use super::logins::LINK_TTL;
use super::viewer::{NotIn, Viewer, session_cookie};
use crate::config::{AdminOverHttp, ConsoleAccess};
use crate::server::Principal;
use crate::surfaces::admin::ADMIN_SOURCE;
use crate::surfaces::planner::PLANNER_SOURCE;

/// The session cookie's name: one per port, as browsers share cookies
/// between the ports of a host (two wf on one machine keep theirs apart).
pub fn cookie_name(bind: SocketAddr) -> String {
    format!("wf_console_{}", bind.port())
}

/// The address a browser on this machine reaches `bind` at.
fn browser_addr(bind: SocketAddr) -> SocketAddr {
    let mut at = bind;
    if bind.ip().is_unspecified() {
        at.set_ip(match bind {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    at
}

/// The one line `wf serve --http` prints on stderr: the login link. It is
/// printed, never logged: no tracing event or span carries the token.
pub fn link_line(bind: SocketAddr, token: &str, access: ConsoleAccess) -> String {
    let grants = match access {
        ConsoleAccess::Actions => "read and act",
        _ => "read-only",
    };
    format!(
        "wf console: open http://{}/console/login?token={token} to sign in ({grants}; the link works once, within {} minutes)",
        browser_addr(bind),
        LINK_TTL.as_secs() / 60
    )
}

/// `GET /console/login?token=…`: a session cookie and 303 to `/console/`,
/// or 303 to `/console/?login=used|expired|invalid|off` (the page says why).
pub async fn login(
    State(c): State<Console>,
    method: Method,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    // A HEAD (a link checker, a preview) must not spend the link.
    if method == Method::HEAD {
        return StatusCode::OK.into_response();
    }
    let token = uri
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
        .unwrap_or("");
    let outcome = if c.app.config.config.admin.console == ConsoleAccess::Off {
        Err("off")
    } else {
        c.logins
            .redeem(token, Instant::now())
            .map_err(|why| why.word())
    };
    let (to, cookie) = match outcome {
        Ok(id) => {
            tracing::info!("console: a browser signed in with the login link");
            (
                "/console/".to_string(),
                Some(session_cookie(&c, &headers, &id)),
            )
        }
        Err(word) => {
            tracing::warn!("console: a login link was refused ({word})");
            (format!("/console/?login={word}"), None)
        }
    };
    let mut r = StatusCode::SEE_OTHER.into_response();
    let h = r.headers_mut();
    h.insert(
        header::LOCATION,
        HeaderValue::from_str(&to).expect("plain path"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        h.insert(header::SET_COOKIE, cookie);
    }
    r
}

/// The views and actions the page has, each with the tool behind it.
const VIEWS: [(&str, &str, &str); 4] = [
    ("sources", ADMIN_SOURCE, "list_sources"),
    ("plugins", ADMIN_SOURCE, "list_plugins"),
    ("capabilities", PLANNER_SOURCE, "list_capabilities"),
    ("runs", PLANNER_SOURCE, "list_runs"),
];
const ACTIONS: [(&str, &str, &str); 5] = [
    ("refresh", ADMIN_SOURCE, "refresh_catalog"),
    ("pin", ADMIN_SOURCE, "pin_tools"),
    ("approve", ADMIN_SOURCE, "approve_tools"),
    ("reload", ADMIN_SOURCE, "reload"),
    ("cancel", PLANNER_SOURCE, "cancel_run"),
];

impl Console {
    /// One paragraph for a viewer who is not signed in.
    pub fn how_to_get_in(&self) -> String {
        let admin = &self.app.config.config.admin;
        let mut text = match admin.console {
            ConsoleAccess::Off => "Sign-in links are off in this wf's config ([admin] console = \"off\"): set [admin] console = \"read\" (or \"actions\") and restart wf, then open the link it prints on its standard error.".to_string(),
            _ => format!(
                "Open the sign-in link that `wf serve --http` printed on its standard error when it started (the line starting \"wf console: open\"); each link works once, within {} minutes. For a new link, restart wf.",
                LINK_TTL.as_secs() / 60
            ),
        };
        if self.guard.has_tokens() {
            text.push_str(" Or enter a bearer token (server.http_token or a [[server.tokens]] token) with the Tokens button.");
        } else if admin.over_http() == AdminOverHttp::Token {
            text.push_str(" Or enter the admin token ([admin] token) with the Tokens button.");
        }
        text
    }
}

fn reasons(
    c: &Console,
    viewer: Viewer,
    headers: &HeaderMap,
    principal: &Principal,
    list: &[(&str, &str, &str)],
    kind: Kind,
) -> Value {
    let mut out = Map::new();
    for (key, source, tool) in list {
        let why = c
            .decide(viewer, headers, principal, source, tool, kind)
            .err()
            .map(|r| r.reason());
        out.insert((*key).into(), json!(why));
    }
    Value::Object(out)
}

/// `GET /console/api/access`: `{"signed_in", "via", "principal", "views",
/// "actions", "how", "tokens"}`; `views` and `actions` map each one to
/// `null` (allowed) or the reason it is not. Answered to anyone past the
/// Host/Origin checks: it holds no data, only how to get in.
pub async fn access(State(c): State<Console>, headers: HeaderMap) -> Response {
    let admin = &c.app.config.config.admin;
    let tokens = json!({
        "bearer": c.guard.has_tokens(),
        "admin": admin.over_http() == AdminOverHttp::Token,
    });
    let body = match c.identify(&headers) {
        Ok((viewer, principal)) => json!({
            "signed_in": true,
            "via": match viewer {
                Viewer::Session if principal.name() == Principal::LOCAL => "link",
                Viewer::Session => "oidc",
                Viewer::Token => "token",
            },
            "principal": principal.name(),
            "views": reasons(&c, viewer, &headers, &principal, &VIEWS, Kind::Read),
            "actions": reasons(&c, viewer, &headers, &principal, &ACTIONS, Kind::Action),
            "tokens": tokens,
        }),
        Err(why) => json!({
            "signed_in": false,
            "error": match why {
                NotIn::WrongToken => "The bearer token this tab sent is not one wf knows.",
                NotIn::NoSession(true) => "Your console session has ended (it expired, or wf restarted).",
                NotIn::NoSession(false) => "You are not signed in to this console.",
            },
            "how": c.how_to_get_in(),
            "tokens": tokens,
            "oidc": super::oidc::issuer(&c).map(|issuer| json!({
                "issuer": issuer,
                "start": "/console/oidc/start",
            })),
        }),
    };
    let mut r = Json(body).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_points_where_a_local_browser_reaches_wf() {
        let line = link_line("0.0.0.0:8765".parse().unwrap(), "ab12", ConsoleAccess::Read);
        assert!(
            line.starts_with("wf console: open http://127.0.0.1:8765/console/login?token=ab12 "),
            "{line}"
        );
        assert!(
            line.contains("read-only") && line.contains("10 minutes"),
            "{line}"
        );
        let line = link_line("[::]:9".parse().unwrap(), "x", ConsoleAccess::Actions);
        assert!(
            line.contains("http://[::1]:9/console/login?token=x "),
            "{line}"
        );
        assert!(line.contains("read and act"), "{line}");
        assert!(!line.contains('\n'));
        assert_eq!(
            cookie_name("127.0.0.1:8765".parse().unwrap()),
            "wf_console_8765"
        );
    }
}
