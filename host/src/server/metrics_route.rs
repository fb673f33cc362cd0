//! `/metrics` on `wf serve --http`: the Prometheus text of
//! [`crate::telemetry::metrics`], behind its own bearer token
//! (`[telemetry] metrics_token`) and, unless `metrics_remote`, for loopback
//! peers only. Host and Origin are checked as for `/mcp`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::app::App;
use crate::config::{TelemetryConfig, expand_env};
use crate::secrets::constant_time_eq;
use crate::server::identity::guard::{HttpGuard, check_token};
use crate::telemetry::metrics;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

struct Metrics {
    app: Arc<App>,
    guard: Arc<HttpGuard>,
    token: String,
    remote: bool,
}

/// The `/metrics` router, or None when no metrics token is set (then
/// `/metrics` is not served at all). A token that is set but unusable is a
/// start error, like the bearer token's.
pub fn router(
    app: Arc<App>,
    guard: Arc<HttpGuard>,
    config: &TelemetryConfig,
) -> anyhow::Result<Option<axum::Router>> {
    let Some(raw) = config.metrics_token.as_deref() else {
        return Ok(None);
    };
    let lookup = |k: &str| std::env::var(k).ok();
    let token = expand_env(
        &serde_json::Value::String(raw.into()),
        "telemetry.metrics_token",
        &lookup,
    )?;
    let token = token.as_str().unwrap_or_default().to_string();
    check_token(&token, "the metrics token ([telemetry] metrics_token)")?;
    let state = Arc::new(Metrics {
        app,
        guard,
        token,
        remote: config.metrics_remote,
    });
    Ok(Some(
        axum::Router::new()
            .route("/metrics", get(serve))
            .with_state(state),
    ))
}

fn refused(status: StatusCode, why: &'static str) -> Response {
    (status, why).into_response()
}

async fn serve(State(m): State<Arc<Metrics>>, request: Request) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>();
    let loopback = peer.is_some_and(|ConnectInfo(p)| p.ip().is_loopback());
    let headers = request.headers();
    if !loopback && !m.remote {
        return refused(
            StatusCode::FORBIDDEN,
            "forbidden: /metrics is served to loopback peers only ([telemetry] metrics_remote)\n",
        );
    }
    if !m.guard.host_ok(headers) {
        return refused(
            StatusCode::FORBIDDEN,
            "forbidden: Host header not allowed (DNS rebinding protection)\n",
        );
    }
    if !m.guard.origin_ok(headers) {
        return refused(StatusCode::FORBIDDEN, "forbidden: Origin not allowed\n");
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !constant_time_eq(given.as_bytes(), m.token.as_bytes()) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "unauthorized: the metrics token is required\n",
        )
            .into_response();
    }
    let in_flight = m
        .app
        .sources
        .list()
        .into_iter()
        .filter_map(|e| Some((e.name.clone(), e.handle.as_ref()?.calls_in_flight())));
    metrics::set_source_gauges(in_flight, m.app.sessions.open_by_source());
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics::render()).into_response()
}
