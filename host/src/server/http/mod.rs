//! The HTTP front: streamable HTTP at `/mcp`, and the one server that also
//! mounts `/console`, `/metrics` and `/readyz`.
//!
//! Streamable HTTP: the rmcp service mounted at `/mcp`, behind one middleware
//! (`front_door`: the Host/Origin/token guard, the endpoint gate, and the
//! message checks, which hold each request to its principal's bounds),
//! served by wf's own accept loop.

mod connections;
mod direct;
mod endpoint_gate;
mod front_door;
mod headers;
mod late;
mod messages;
mod session_calls;
mod sessions;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::middleware::from_fn_with_state;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use self::connections::ConnLimits;
use self::direct::Direct;
use self::front_door::{FrontDoor, front_door};
use self::messages::Messages;
use self::sessions::BoundedSessions;
use crate::app::App;
use crate::config::ServerConfig;
use crate::server::Surfaces;
use crate::server::identity::guard::guard_host_origin;
use crate::server::identity::guard::{HttpGuard, check_token};
use crate::server::identity::limits::{LimitConfig, Principal, PrincipalLimits};
use crate::server::identity::oauth::OAuthVerifier;
use crate::server::identity::principals::{check_tokens, static_tokens};
use crate::server::mcp::handler::WfServer;

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub bind: SocketAddr,
    pub token: Option<String>,
    /// `[[server.tokens]]`, expanded: each token names its principal.
    pub named_tokens: Vec<(Principal, String)>,
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    pub max_request_bytes: usize,
    pub connections: ConnLimits,
    /// The per-principal bounds: calls in progress, their queue, streams.
    pub limits: LimitConfig,
    pub max_sessions: usize,
    pub max_console_streams_per_principal: usize,
    pub session_idle_timeout: Duration,
    pub json_response: bool,
    /// `[server.oauth]`: access tokens from an identity provider.
    pub oauth: Option<crate::config::OAuthConfig>,
}

impl HttpOptions {
    pub fn new(bind: SocketAddr, token: Option<String>, server: &ServerConfig) -> Self {
        Self {
            bind,
            token,
            named_tokens: Vec::new(),
            allowed_hosts: server.allowed_hosts.clone(),
            allowed_origins: server.allowed_origins.clone(),
            max_request_bytes: server.max_request_bytes,
            connections: ConnLimits {
                max_connections: server.max_connections,
                header_read_timeout: Duration::from_millis(server.header_read_timeout_ms),
                idle_timeout: Duration::from_millis(server.idle_timeout_ms),
            },
            limits: LimitConfig {
                max_in_progress: server.max_requests_per_principal,
                max_queued: server.max_queued_per_principal,
                queue_wait: Duration::from_millis(server.queue_wait_ms),
                max_streams: server.max_streams_per_principal,
            },
            max_sessions: server.max_sessions,
            max_console_streams_per_principal: server.max_console_streams_per_principal,
            session_idle_timeout: Duration::from_millis(server.session_idle_timeout_ms),
            json_response: server.http_json_response,
            oauth: server.oauth.clone(),
        }
    }

    pub fn with_named_tokens(mut self, named: Vec<(Principal, String)>) -> Self {
        self.named_tokens = named;
        self
    }

    /// Every accepted token with its principal: `default` for the single
    /// bearer token, then the named ones.
    pub fn principals(&self) -> Vec<(Principal, String)> {
        let default = self.token.iter().map(|t| (Principal::bearer(), t.clone()));
        default.chain(self.named_tokens.iter().cloned()).collect()
    }

    /// Refuses settings wf must not serve with: a non-loopback bind without
    /// a token (it would expose every source to the network), a weak or
    /// duplicate token, lists that do not parse, a limit of zero.
    pub fn check(&self) -> anyhow::Result<()> {
        let tokens = self.principals();
        if tokens.is_empty() && self.oauth.is_none() && !self.bind.ip().is_loopback() {
            anyhow::bail!(
                "refusing to serve HTTP on non-loopback address {} without a bearer token: \
                 set WF_HTTP_TOKEN, server.http_token, [[server.tokens]] or [server.oauth] in the config",
                self.bind
            );
        }
        check_tokens(&tokens)?;
        HttpGuard::check_lists(&self.allowed_hosts, &self.allowed_origins)?;
        let c = &self.connections;
        for (name, zero) in [
            ("server.max_request_bytes", self.max_request_bytes == 0),
            ("server.max_connections", c.max_connections == 0),
            (
                "server.header_read_timeout_ms",
                c.header_read_timeout.is_zero(),
            ),
            ("server.idle_timeout_ms", c.idle_timeout.is_zero()),
            (
                "server.max_requests_per_principal",
                self.limits.max_in_progress == 0,
            ),
            (
                "server.max_streams_per_principal",
                self.limits.max_streams == 0,
            ),
            ("server.max_sessions", self.max_sessions == 0),
            (
                "server.max_console_streams_per_principal",
                self.max_console_streams_per_principal == 0,
            ),
            (
                "server.session_idle_timeout_ms",
                self.session_idle_timeout.is_zero(),
            ),
        ] {
            if zero {
                anyhow::bail!("{name} must be greater than 0");
            }
        }
        Ok(())
    }
}

/// The admin token, when HTTP admin calls need it, obeys the bearer token's
/// rules. An unset `${VAR}` is not a start error: admin calls then fail closed
/// (refused, with the reason) while everything else is served.
fn check_admin_token(admin: &crate::config::AdminConfig) -> anyhow::Result<()> {
    if admin.over_http() != crate::config::AdminOverHttp::Token {
        return Ok(());
    }
    let Some(raw) = admin.token.as_deref() else {
        return Ok(());
    };
    match crate::config::expand_env(
        &serde_json::Value::String(raw.into()),
        "admin.token",
        &|k| std::env::var(k).ok(),
    ) {
        Ok(expanded) => check_token(
            expanded.as_str().unwrap_or_default(),
            "the admin token ([admin] token)",
        ),
        Err(e) => {
            tracing::warn!("admin calls over HTTP will be refused: {e}");
            Ok(())
        }
    }
}

/// A reload puts the config's static tokens in force: a token taken out of
/// the file is refused from the next request on, in every session. A reload
/// that would leave a token-protected front with no token (and no OAuth) is
/// refused as a whole.
fn follow_token_reloads(app: &Arc<App>, g: &Arc<HttpGuard>) {
    let g = g.clone();
    let protected = g.has_tokens();
    app.live_config.on_reload(Box::new(move |c| {
        let (token, named) = static_tokens(&c.config.server).map_err(|e| e.to_string())?;
        let all: Vec<(Principal, String)> = token
            .map(|t| (Principal::bearer(), t))
            .into_iter()
            .chain(named)
            .collect();
        check_tokens(&all).map_err(|e| e.to_string())?;
        if all.is_empty() && protected && g.oauth().is_none() {
            return Err(
                "it lists no bearer token: wf would serve /mcp without one; \
                        restart wf to serve without tokens"
                    .into(),
            );
        }
        let g = g.clone();
        Ok(Box::new(move || {
            g.set_tokens(&all);
            tracing::info!(tokens = all.len(), "static tokens reloaded");
        }))
    }));
}

/// RFC 9728 protected resource metadata, at the well-known path for `/mcp`
/// (and at the bare well-known path, which clients try second).
fn resource_metadata(oauth: Option<&Arc<OAuthVerifier>>, g: &Arc<HttpGuard>) -> axum::Router {
    let Some(oauth) = oauth else {
        return axum::Router::new();
    };
    let doc = oauth.resource_metadata();
    let serve = move || {
        let doc = doc.clone();
        async move { axum::Json(doc) }
    };
    let mut r = axum::Router::new().route(oauth.metadata_path(), axum::routing::get(serve.clone()));
    if oauth.metadata_path() != "/.well-known/oauth-protected-resource" {
        r = r.route(
            "/.well-known/oauth-protected-resource",
            axum::routing::get(serve),
        );
    }
    r.layer(from_fn_with_state(g.clone(), guard_host_origin))
}

fn surfaces_endpoint_names(e: &crate::surfaces::endpoints::Endpoints) -> Vec<String> {
    e.all().keys().cloned().collect()
}

pub async fn serve_http(
    app: Arc<App>,
    surfaces: Surfaces,
    opts: HttpOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    opts.check()?;
    check_admin_token(&app.config.config.admin)?;
    connections::fit_open_files(opts.connections.max_connections);
    for w in crate::config::sizing::warnings(&app.config.config.server) {
        tracing::warn!(key = %w.key, "{} (wf check says the same)", w.message);
    }
    for (name, sc) in app.config.sources().unwrap_or_default() {
        if sc.session.is_none() && crate::config::sizing::looks_stateful(&sc) {
            tracing::info!(
                source = %name,
                "each HTTP client gets its own session of this source: it looks like a \
                 browser server, which keeps state per client (set session = \"shared\" to share one)"
            );
        }
    }
    let listener = tokio::net::TcpListener::bind(opts.bind)
        .await
        .map_err(|e| anyhow::anyhow!("cannot bind {}: {e}", opts.bind))?;
    let local = listener.local_addr()?;
    // Streams ping often enough that a live one never trips the idle timeout.
    let ping = (opts.connections.idle_timeout / 3).min(Duration::from_secs(15));
    let config = StreamableHttpServerConfig::default()
        // Our guard checks Host and Origin, with the operator's lists.
        .disable_allowed_hosts()
        .with_sse_keep_alive(Some(ping))
        // A stateless (2026-07-28) request whose first message is its answer
        // gets a plain JSON body, not a one-event stream; anything the call
        // sends first (progress, a request for input) falls back to SSE.
        .with_json_response(opts.json_response)
        .with_max_request_body_bytes(opts.max_request_bytes)
        .with_cancellation_token(shutdown.child_token());
    let sessions = Arc::new(
        BoundedSessions::new(
            opts.max_sessions,
            opts.session_idle_timeout,
            app.front.clone(),
        )
        .with_seal(crate::server::handles::Seal::for_app(&app)),
    );
    app.set_local(
        crate::server::mcp::session_route::SESSION_SOURCE,
        crate::server::mcp::session_route::catalog(),
    );
    let factory_app = app.clone();
    let endpoints = surfaces.endpoints.clone();
    let console_surfaces = surfaces.clone();
    // With JSON answers, a session's plain calls are answered in place too.
    let calls = opts.json_response.then(|| sessions.calls().clone());
    let service: StreamableHttpService<WfServer, BoundedSessions> = StreamableHttpService::new(
        move || {
            let server = WfServer::new(factory_app.clone(), surfaces.clone(), true);
            Ok(match &calls {
                Some(calls) => server.with_session_calls(calls.clone()),
                None => server,
            })
        },
        sessions.clone(),
        config,
    );
    let oauth = match &opts.oauth {
        Some(c) => {
            let v = Arc::new(OAuthVerifier::new(c)?);
            v.start();
            tracing::info!(issuer = %v.issuer(), metadata = %v.metadata_url(), "OAuth: accepting the issuer's access tokens");
            Some(v)
        }
        None => None,
    };
    let g = Arc::new(
        HttpGuard::new(
            local,
            &opts.principals(),
            &opts.allowed_hosts,
            &opts.allowed_origins,
        )
        .with_oauth(oauth.clone()),
    );
    follow_token_reloads(&app, &g);
    // A stateless call answered as JSON skips rmcp's per-request service.
    let direct = opts
        .json_response
        .then(|| Direct::new(app.clone(), console_surfaces.clone(), ping));
    let limits = Arc::new(PrincipalLimits::new(opts.limits));
    let messages = Arc::new(Messages::new(
        opts.max_request_bytes,
        sessions,
        direct,
        limits,
    ));
    let logins = Arc::new(crate::server::console::logins::Logins::default());
    let metrics =
        crate::server::metrics_route::router(app.clone(), g.clone(), &app.config.config.telemetry)?;
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        // The guard, then `/mcp/NAME`'s gate (it needs the principal), then
        // the message checks (they answer stateless calls): one layer.
        .layer(from_fn_with_state(
            Arc::new(FrontDoor {
                guard: g.clone(),
                endpoints: endpoints.clone(),
                messages,
            }),
            front_door,
        ))
        .merge(resource_metadata(oauth.as_ref(), &g))
        // Outside the /mcp guard: it has its own token and peer rule.
        .merge(metrics.unwrap_or_default())
        .merge(crate::server::readiness::router(app.clone()))
        .merge(crate::server::console::router(
            app.clone(),
            console_surfaces,
            crate::server::console::ConsoleOptions {
                guard: g,
                logins: logins.clone(),
                bind: local,
                shutdown: shutdown.clone(),
                ping,
                max_streams_per_principal: opts.max_console_streams_per_principal,
            },
        ));
    tracing::info!("listening on http://{local}/mcp");
    for name in surfaces_endpoint_names(&endpoints) {
        tracing::info!("endpoint {name}: http://{local}/mcp/{name}");
    }
    let console = app.config.config.admin.console;
    if console != crate::config::ConsoleAccess::Off {
        // Printed, not logged: the token must reach the operator's terminal
        // and nothing else (no log file, no exported span or log record).
        let token = logins.mint_link(std::time::Instant::now());
        crate::telemetry::operator_line(
            "wf::console",
            &crate::server::console::link_line(local, &token, console),
        );
    }
    connections::serve(
        listener,
        router,
        opts.connections,
        app.front.clone(),
        shutdown,
    )
    .await;
    Ok(())
}
