//! The web console at `/console`: one embedded page (HTML, CSS and vanilla
//! JS compiled into the binary; no CDN, no build step) and its JSON API under
//! `/console/api/`. The page loads behind the Host/Origin checks only (a
//! browser cannot send a bearer token when navigating) and holds no data;
//! every API call and the event stream pass Host/Origin, then need a
//! viewer: a bearer token as for `/mcp`, or the session cookie of the
//! login link `wf serve --http` prints (same-origin requests only), and
//! then the access rules of `access`.

mod access;
mod api;
mod endpoints;
pub mod logins;
mod oidc;
mod signin;
mod stream;
mod stream_slots;
mod viewer;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use access::Kind::{Action, Read};

use crate::app::App;
use crate::server::Surfaces;
use crate::server::identity::guard::{HttpGuard, guard_host_origin};
pub use signin::link_line;

const INDEX: &str = include_str!("assets/index.html");
const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

/// A JSON error answer: `{"error", "hint"}`.
pub fn refused(status: StatusCode, error: impl Into<String>, hint: &str) -> Response {
    (status, Json(json!({"error": error.into(), "hint": hint}))).into_response()
}

/// What the API handlers share.
#[derive(Clone)]
pub struct Console {
    app: Arc<App>,
    surfaces: Surfaces,
    /// Ends open event streams when wf shuts down.
    shutdown: CancellationToken,
    /// How often an idle event stream sends a comment (keeps it under the
    /// connection idle timeout).
    ping: Duration,
    /// Event streams open per principal.
    streams: Arc<stream_slots::StreamSlots>,
    /// Host/Origin lists and bearer tokens, as for `/mcp`.
    guard: Arc<HttpGuard>,
    /// Login links and the sessions they opened.
    logins: Arc<logins::Logins>,
    /// The session cookie's name.
    cookie: Arc<str>,
    /// Sign-ins at the identity provider under way.
    oidc: Arc<oidc::PendingLogins>,
}

/// What the console's routes are built from besides the app.
pub struct ConsoleOptions {
    pub guard: Arc<HttpGuard>,
    pub logins: Arc<logins::Logins>,
    /// The bound address (the cookie is named for its port).
    pub bind: SocketAddr,
    pub shutdown: CancellationToken,
    pub ping: Duration,
    pub max_streams_per_principal: usize,
}

/// The console's routes, each behind its guard.
pub fn router(app: Arc<App>, surfaces: Surfaces, o: ConsoleOptions) -> Router {
    let g = o.guard.clone();
    let console = Console {
        app,
        surfaces,
        shutdown: o.shutdown,
        ping: o.ping,
        streams: Arc::new(stream_slots::StreamSlots::new(o.max_streams_per_principal)),
        guard: o.guard,
        logins: o.logins,
        cookie: signin::cookie_name(o.bind).into(),
        oidc: Arc::new(oidc::PendingLogins::default()),
    };
    let pages = Router::new()
        .route(
            "/console",
            get(|| async { Redirect::permanent("/console/") }),
        )
        .route(
            "/console/",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/console/console.css",
            get(|| async { asset(CSS, "text/css; charset=utf-8") }),
        )
        .route(
            "/console/console.js",
            get(|| async { asset(JS, "text/javascript; charset=utf-8") }),
        )
        .layer(from_fn_with_state(g.clone(), guard_host_origin));
    // Answered without a viewer: signing in, and how to.
    let signin = Router::new()
        .route("/console/login", get(signin::login))
        .route("/console/oidc/start", get(oidc::start))
        .route(
            crate::server::identity::oauth::CONSOLE_CALLBACK_PATH,
            get(oidc::callback),
        )
        .route("/console/api/access", get(signin::access))
        .with_state(console.clone())
        .layer(from_fn_with_state(g, guard_host_origin));
    let api = Router::new()
        .route("/console/api/status", get(api::admin_tool("status", Read)))
        .route(
            "/console/api/sources",
            get(api::admin_tool("list_sources", Read)),
        )
        .route("/console/api/sources/refresh", post(api::refresh))
        .route("/console/api/tools/{action}", post(api::tool_pins))
        .route(
            "/console/api/reload",
            post(api::admin_tool("reload", Action)),
        )
        .route(
            "/console/api/plugins",
            get(api::admin_tool("list_plugins", Read)),
        )
        .route("/console/api/capabilities", post(api::capabilities))
        .route("/console/api/runs", post(api::runs))
        .route("/console/api/audit", post(api::audit))
        .route("/console/api/runs/{id}", get(api::run))
        .route("/console/api/runs/{id}/cancel", post(api::cancel))
        .route("/console/api/tasks", get(api::tasks))
        .route("/console/api/endpoints", get(endpoints::list))
        .route("/console/api/events", get(stream::events))
        .with_state(console.clone())
        // Only on these routes: a path that is no route stays a 404 (with
        // `layer`, the guard would also answer the router's fallback, so any
        // unknown path, `/metrics` when it is not served among them, got 401).
        .route_layer(from_fn_with_state(console, viewer::guard));
    pages.merge(signin).merge(api)
}

/// An embedded asset, with headers that keep it from being framed or
/// running anything not shipped with it.
fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}
