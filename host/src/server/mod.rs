//! The MCP front: one rmcp server handler over stdio or streamable HTTP.

mod console;
pub(crate) mod handles;
mod http;
pub(crate) mod identity;
mod jsonrpc;
pub(crate) mod mcp;
mod metrics_route;
mod readiness;
mod stdio;

/// The meta-tools' definitions (`wf_find`, `wf_describe`, `wf_call`), as listed
/// in `search` mode (the retrieval benchmark weighs them).
pub use mcp::meta_tools::{definitions as meta_tool_definitions, hit as find_hit};

pub use http::{HttpOptions, serve_http};
pub use identity::guard::HttpGuard;
pub use identity::limits::Principal;
pub use identity::oauth::OAuthVerifier;
pub use identity::principals::ToolAccess;
pub use mcp::Surfaces;
pub use mcp::handler::WfServer;
pub use mcp::isolation::Isolation;

use std::sync::Arc;

use rmcp::ServiceExt;

use crate::app::App;

/// Serves MCP over stdin/stdout until the client closes stdin or a signal
/// arrives. `stdio_pipes` reads and writes the pipes directly instead of
/// through a blocking helper thread (measured: ~50-60 µs less per call).
pub async fn serve_stdio(app: Arc<App>, surfaces: Surfaces) -> anyhow::Result<()> {
    serve_stdio_at(app, surfaces, None).await
}

/// [`serve_stdio`], for endpoint `endpoint` (`wf serve --endpoint NAME`)
/// when given: it must be configured.
pub async fn serve_stdio_at(
    app: Arc<App>,
    surfaces: Surfaces,
    endpoint: Option<String>,
) -> anyhow::Result<()> {
    if let Some(name) = &endpoint
        && surfaces.endpoints.get(name).is_none()
    {
        anyhow::bail!(
            "--endpoint {name}: no [endpoints.{name}] in {}",
            app.config.file_label()
        );
    }
    let max_line = app.config.config.server.max_request_bytes;
    let (read, write) = rmcp::transport::stdio_pipes();
    tracing::debug!("serving MCP on stdio; client messages up to {max_line} bytes");
    let mut signal = std::pin::pin!(shutdown_signal());
    // Served boxed (`into_dyn`): rmcp runs each request as a task of its own,
    // and tokio copies a task's future whole as it spawns, polls and finishes
    // it. Unboxed, that future is the handler's largest (kilobytes), copied
    // several times a call; boxed, each request's is copied once, into its box.
    let serving = WfServer::new(app, surfaces, false)
        .for_endpoint(endpoint.map(Arc::from))
        .into_dyn()
        .serve(stdio::StdioTransport::new(read, write, max_line));
    // A signal during the handshake ends wf as cleanly as one after it.
    let service = tokio::select! {
        s = serving => s?,
        _ = &mut signal => return Ok(()),
    };
    tokio::select! {
        r = service.waiting() => { r?; }
        _ = signal => {}
    }
    Ok(())
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is
/// called, not when the future is first polled: a signal that arrives while
/// the server is still starting (before anything awaits it) must not kill wf
/// with the default action.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let int = signal(SignalKind::interrupt());
        let term = signal(SignalKind::terminate());
        async move {
            match (int, term) {
                (Ok(mut int), Ok(mut term)) => {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!("cannot install the SIGINT/SIGTERM handlers: {e}");
                    std::future::pending::<()>().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        let ctrl_c = tokio::signal::ctrl_c();
        async move {
            let _ = ctrl_c.await;
        }
    }
}
