//! A reference point, not wf: the thinnest MCP pass-through rmcp allows (an
//! rmcp server whose tools/list and tools/call forward to one rmcp client
//! session on the upstream, one tokio runtime, no plugins, no conversions).
//! It shows what any rmcp-based proxy hop costs on the machine at hand, so
//! wf's overhead can be split into "a hop" and "wf's own work".
//!
//! Run as `wf-bench --relay stdio|pipes -- COMMAND ARGS...`; `stdio` serves
//! with `rmcp::transport::stdio()` (what `wf serve` uses), `pipes` with
//! `rmcp::transport::stdio_pipes()` (non-blocking pipes, no thread hand-off).

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

pub async fn serve(transport: &str, command: &[String]) -> anyhow::Result<()> {
    let Some((program, args)) = command.split_first() else {
        anyhow::bail!("--relay needs an upstream command after `--`");
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args);
    let mut upstream = McpProc::start("relay upstream", cmd, None, HANDSHAKE_TIMEOUT).await?;
    let relay = Relay {
        upstream: upstream.peer(),
    };
    let result = match transport {
        "stdio" => match relay.serve(rmcp::transport::stdio()).await {
            Ok(s) => s.waiting().await.map(drop).map_err(anyhow::Error::from),
            Err(e) => Err(e.into()),
        },
        "pipes" => match relay.serve(rmcp::transport::stdio_pipes()).await {
            Ok(s) => s.waiting().await.map(drop).map_err(anyhow::Error::from),
            Err(e) => Err(e.into()),
        },
        other => Err(anyhow::anyhow!("--relay {other}: expected stdio or pipes")),
    };
    upstream.stop().await;
    result
}
