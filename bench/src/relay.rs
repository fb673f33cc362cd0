//! A reference point, not wf: the thinnest MCP pass-through rmcp allows (an
//! rmcp server whose tools/list and tools/call forward to one rmcp client
//! session on the upstream, one tokio runtime, no plugins, no conversions).
//! It shows what any rmcp-based proxy hop costs on the machine at hand, so
//! wf's overhead can be split into "a hop" and "wf's own work".
//!
//! Run as `wf-bench --relay MODE -- COMMAND ARGS...`. The modes, each one
//! piece of wf's path with nothing of wf's own around it:
//!
//! - `stdio`: served with `rmcp::transport::stdio()`;
//! - `pipes`: served with `rmcp::transport::stdio_pipes()` (non-blocking
//!   pipes, no thread hand-off; what `wf serve` uses): the lean relay;
//! - `split`: `pipes`, with the upstream's client session on a second tokio
//!   runtime of one worker, as a plugin's is. The request is polled on the
//!   front's runtime and the upstream's pipes belong to the other one, so
//!   every call crosses between the two runtimes' threads twice: exactly the
//!   crossings wf's plugin boundary makes, and nothing else of wf;
//! - `http`: rmcp's streamable HTTP server (what `wf serve --http` mounts;
//!   2025 sessions and stateless 2026-07-28 requests, a lone answer as JSON)
//!   on `WF_BENCH_RELAY_LISTEN`;
//! - `http-min`: the least an HTTP front can do: one `POST` of a JSON-RPC
//!   `tools/call` answered with one JSON body (axum, no sessions, no MCP
//!   checks; stateless clients only), on `WF_BENCH_RELAY_LISTEN`.

use rmcp::model::*;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleClient, RoleServer, ServerHandler, ServiceExt};

use crate::HANDSHAKE_TIMEOUT;
use crate::proc::McpProc;

#[derive(Clone)]
struct Relay {
    upstream: Peer<RoleClient>,
}

fn upstream_error(e: rmcp::service::ServiceError) -> ErrorData {
    match e {
        rmcp::service::ServiceError::McpError(e) => e,
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

impl ServerHandler for Relay {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("wf-bench-relay", "0.0.0"))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.upstream
            .list_tools(request)
            .await
            .map_err(upstream_error)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.upstream
            .call_tool_once(request)
            .await
            .map_err(upstream_error)
    }
}

/// Where the HTTP relays listen (set by `HttpWf::start_with`).
pub const LISTEN_ENV: &str = "WF_BENCH_RELAY_LISTEN";

pub async fn serve(mode: &str, command: &[String]) -> anyhow::Result<()> {
    let Some((program, args)) = command.split_first() else {
        anyhow::bail!("--relay needs an upstream command after `--`");
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args);
    // `split`: the upstream's process, pipes and client session are created
    // on a runtime of their own, so they stay there.
    let upstream_rt = match mode {
        "split" => Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("relay-upstream")
                .enable_all()
                .build()?,
        ),
        _ => None,
    };
    let start = McpProc::start("relay upstream", cmd, None, HANDSHAKE_TIMEOUT);
    let mut upstream = match &upstream_rt {
        Some(rt) => rt.spawn(start).await??,
        None => start.await?,
    };
    let relay = Relay {
        upstream: upstream.peer(),
    };
    let result = match mode {
        "stdio" => serve_on(relay, rmcp::transport::stdio()).await,
        "pipes" | "split" => serve_on(relay, rmcp::transport::stdio_pipes()).await,
        "http" => serve_http(relay).await,
        "http-min" => serve_http_min(relay).await,
        other => Err(anyhow::anyhow!(
            "--relay {other}: expected stdio, pipes, split, http or http-min"
        )),
    };
    match upstream_rt {
        Some(rt) => {
            let _ = rt.spawn(async move { upstream.stop().await }).await;
            rt.shutdown_background();
        }
        None => upstream.stop().await,
    }
    result
}

async fn serve_on<T, E, A>(relay: Relay, transport: T) -> anyhow::Result<()>
where
    T: rmcp::transport::IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    relay.serve(transport).await?.waiting().await?;
    Ok(())
}

/// The relays' listener. TCP_NODELAY on every connection, as wf's own
/// accept loop sets it: an event stream is written in pieces, and Nagle's
/// algorithm would hold the last one for the client's delayed ACK (~40 ms).
async fn listener() -> anyhow::Result<axum::serve::TapIo<tokio::net::TcpListener, Tap>> {
    use axum::serve::ListenerExt;
    let addr = std::env::var(LISTEN_ENV)
        .map_err(|_| anyhow::anyhow!("--relay http needs {LISTEN_ENV}=ADDR"))?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    Ok(listener.tap_io(nodelay as Tap))
}

type Tap = fn(&mut tokio::net::TcpStream);

fn nodelay(tcp: &mut tokio::net::TcpStream) {
    let _ = tcp.set_nodelay(true);
}

async fn serve_http(relay: Relay) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let service: StreamableHttpService<Relay, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(relay.clone()),
        Default::default(),
        StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_json_response(true),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    axum::serve(listener().await?, router).await?;
    Ok(())
}

/// One JSON-RPC `tools/call` in, one JSON body out.
async fn serve_http_min(relay: Relay) -> anyhow::Result<()> {
    use axum::Json;
    use serde_json::{Value, json};
    async fn call(
        axum::extract::State(relay): axum::extract::State<Relay>,
        Json(request): Json<Value>,
    ) -> Json<Value> {
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let params = &request["params"];
        let mut call =
            CallToolRequestParams::new(params["name"].as_str().unwrap_or_default().to_string());
        if let Some(arguments) = params["arguments"].as_object() {
            call = call.with_arguments(arguments.clone());
        }
        let answer = match relay.upstream.call_tool(call).await {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(e) => json!({"jsonrpc": "2.0", "id": id,
                             "error": {"code": -32603, "message": e.to_string()}}),
        };
        Json(answer)
    }
    let router = axum::Router::new()
        .route("/mcp", axum::routing::post(call))
        .with_state(relay);
    axum::serve(listener().await?, router).await?;
    Ok(())
}
