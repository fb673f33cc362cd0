//! Streamable HTTP: the rmcp service mounted at `/mcp` behind [`super::HttpGuard`].

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio_util::sync::CancellationToken;

use super::Surfaces;
use super::handler::WfServer;
use super::http_guard::{HttpGuard, guard};
use crate::app::App;

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub bind: SocketAddr,
    pub token: Option<String>,
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
}

impl HttpOptions {
    /// A non-loopback bind without a token would expose every source to the
    /// network: refuse it.
    pub fn check(&self) -> anyhow::Result<()> {
        if !self.bind.ip().is_loopback() && self.token.as_deref().is_none_or(str::is_empty) {
            anyhow::bail!(
                "refusing to serve HTTP on non-loopback address {} without a bearer token: \
                 set WF_HTTP_TOKEN or server.http_token in the config",
                self.bind
            );
        }
        Ok(())
    }
}

pub async fn serve_http(
    app: Arc<App>,
    surfaces: Surfaces,
    opts: HttpOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    opts.check()?;
    let listener = tokio::net::TcpListener::bind(opts.bind)
        .await
        .map_err(|e| anyhow::anyhow!("cannot bind {}: {e}", opts.bind))?;
    let local = listener.local_addr()?;
    let config = StreamableHttpServerConfig::default()
        // Our guard checks Host and Origin, with the operator's lists.
        .disable_allowed_hosts()
        .with_cancellation_token(shutdown.child_token());
    let service: StreamableHttpService<WfServer, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(WfServer::new(app.clone(), surfaces.clone(), true)),
        Default::default(),
        config,
    );
    let g = Arc::new(HttpGuard::new(
        local,
        opts.token.clone(),
        &opts.allowed_hosts,
        &opts.allowed_origins,
    ));
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(g, guard));
    tracing::info!("listening on http://{local}/mcp");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    Ok(())
}
