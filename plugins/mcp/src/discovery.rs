//! Discovery: a one-shot session lists everything, then closes. It never
//! touches the persistent runtime, so it cannot disturb a stateful session,
//! and a refresh an operator asks for sees a changed command or script.
//!
//! One exception: a rediscovery that the shared session's own
//! `list_changed` asked for lists on that live session. The notification
//! means "list again on this session"; answering it with a new process
//! would start an upstream per change (server-everything says so right
//! after start, which cost a third Node process for one client), and
//! listing is what any client of that session may do at any time. So does
//! any rediscovery within 2 s after such a listing (`RELIST_GRACE`): a burst
//! of notifications can reach the host in two batches, and the second
//! batch's rediscovery would otherwise start a process of its own. A refresh
//! an operator asks for in that window lists on the live session too.
//!
//! The catalog is returned as soon as the listing is done; the session is
//! closed in the background. Closing a stdio upstream is the MCP shutdown
//! (stdin closed, up to 3 s for it to exit, SIGTERM, SIGKILL), and some
//! upstreams do not exit on their own: server-everything asks the client for
//! its roots 350 ms after `initialized` and waits on that request, so a
//! discovery that waited for the exit took 3.3 s where the listing took
//! 0.3 s (docs/benchmarks.md, "Start-up with real upstreams"). The process
//! still goes: the background close ends it, and a source's shutdown kills
//! whatever of its upstreams is left (`stdio::kill_leftovers`).

use rmcp::model::PaginatedRequestParams;
use rmcp::{Peer, RoleClient};
use wf_plugin_api::{Catalog, NodeSpec, PluginError};

use crate::client::McpClient;
use crate::config::McpConfig;
use crate::opener::open;
use crate::pages::{ListError, all_pages};
use crate::runtime::{Runtime, convert};
use crate::transport::executions::Executions;

pub async fn discover(
    source: &str,
    config: &McpConfig,
    runtime: &Runtime,
) -> Result<Catalog, PluginError> {
    if let Some((peer, client)) = runtime.relist_session().await {
        tracing::debug!(
            source,
            "rediscovery on the live session that said its lists changed"
        );
        let listed = list_everything(source, &peer, &client.executions, config).await;
        runtime.relisted();
        return listed;
    }
    let client = McpClient::one_shot().with_log(source, None);
    let session = open(source, config, client).await?;
    let result = list_everything(
        source,
        session.peer(),
        &session.service().executions,
        config,
    )
    .await;
    tokio::spawn(async move {
        let _ = session.cancel().await;
    });
    result
}

/// Tools, prompts, resources and templates, each listed only when the
/// upstream declares it, the four at once: a first discovery is on the path
/// to a client's first list, and rmcp multiplexes requests on the session.
async fn list_everything(
    source: &str,
    session: &Peer<RoleClient>,
    executions: &Executions,
    config: &McpConfig,
) -> Result<Catalog, PluginError> {
    let caps = session
        .peer_info()
        .map(|i| i.capabilities.clone())
        .unwrap_or_default();
    let fail = |what: &str, e: ListError<rmcp::service::ServiceError>| match e {
        ListError::Upstream(e) => PluginError::upstream(format!("listing {what} failed: {e}")),
        ListError::Bound(e) => e,
    };
    let params = |cursor| Some(PaginatedRequestParams::default().with_cursor(cursor));
    let tools = async {
        if caps.tools.is_none() {
            return Ok(Vec::new());
        }
        all_pages(source, "tools", |c| async move {
            let r = session.list_tools(params(c)).await?;
            Ok((r.tools, r.next_cursor))
        })
        .await
        .map_err(|e| fail("tools", e))
    };
    let prompts = async {
        if caps.prompts.is_none() {
            return Ok(Vec::new());
        }
        all_pages(source, "prompts", |c| async move {
            let r = session.list_prompts(params(c)).await?;
            Ok((r.prompts, r.next_cursor))
        })
        .await
        .map_err(|e| fail("prompts", e))
    };
    let resources = async {
        if caps.resources.is_none() {
            return Ok(Vec::new());
        }
        all_pages(source, "resources", |c| async move {
            let r = session.list_resources(params(c)).await?;
            Ok((r.resources, r.next_cursor))
        })
        .await
        .map_err(|e| fail("resources", e))
    };
    let templates = async {
        if caps.resources.is_none() {
            return Ok(Vec::new());
        }
        all_pages(source, "resource templates", |c| async move {
            let r = session.list_resource_templates(params(c)).await?;
            Ok((r.resource_templates, r.next_cursor))
        })
        .await
        .map_err(|e| fail("resource templates", e))
    };
    let (tools, prompts, resources, templates) =
        futures::try_join!(tools, prompts, resources, templates)?;
    let mut catalog = Catalog::default();
    let mut tools: Vec<wf_plugin_api::Tool> = convert(tools)?;
    crate::transport::executions::restore(executions, &mut tools);
    for tool in tools.into_iter().filter(|t| config.tool_visible(&t.name)) {
        catalog.node_specs.push(node_spec(&tool));
        catalog.tools.push(tool);
    }
    catalog.prompts = convert(prompts)?;
    catalog.resources = convert(resources)?;
    catalog.resource_templates = convert(templates)?;
    Ok(catalog)
}

/// Every upstream tool is also a workflow node: same schemas; stateful
/// (it runs on the persistent session) and with side effects unless the
/// upstream marks it read-only.
fn node_spec(tool: &wf_plugin_api::Tool) -> NodeSpec {
    let read_only = tool
        .extra
        .get("annotations")
        .and_then(|a| a.get("readOnlyHint"))
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    NodeSpec::new(
        tool.name.clone(),
        tool.description.clone().unwrap_or_default(),
        tool.input_schema.clone(),
        tool.output_schema
            .clone()
            .unwrap_or_else(|| serde_json::json!({})),
    )
    .side_effects(!read_only)
    .stateful(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An upstream like server-everything: asks for the client's roots after
    /// `initialized`, answers tools/list once it has them, and does not exit
    /// when its stdin closes (it notes the close, and a SIGTERM, in `$OUT`).
    const UPSTREAM: &str = r#"
trap 'echo terminated >> "$OUT"; exit 0' TERM
read -r line
echo '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}'
read -r line
echo '{"jsonrpc":"2.0","id":"r1","method":"roots/list"}'
list=""; roots=""
while read -r line; do
  case "$line" in
    *'"method":"tools/list"'*) list=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p') ;;
    *'"id":"r1"'*) roots=1; echo "$line" >> "$OUT" ;;
  esac
  if [ -n "$list" ] && [ -n "$roots" ]; then
    echo '{"jsonrpc":"2.0","id":'"$list"',"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}'
    list=""
  fi
done
echo "stdin closed" >> "$OUT"
while :; do sleep 1; done
"#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn discovery_answers_roots_and_does_not_wait_for_the_exit() {
        let dir = std::env::temp_dir().join(format!("wf-discovery-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("out");
        let _ = std::fs::remove_file(&out);
        let config = McpConfig::parse(
            "t",
            &json!({"command": "/bin/sh", "args": ["-c", UPSTREAM],
                    "env": {"OUT": out.to_str().unwrap()}}),
        )
        .unwrap();
        let runtime = Runtime::new("t".into(), std::sync::Arc::new(config.clone()), None);
        let catalog = discover("t", &config, &runtime).await.unwrap();
        assert_eq!(catalog.tools.len(), 1);
        // Returned before the close went as far as SIGTERM (3 s after stdin
        // closed): the catalog did not wait for the upstream to exit.
        let seen = std::fs::read_to_string(&out).unwrap_or_default();
        assert!(!seen.contains("terminated"), "{seen}");
        let answer: serde_json::Value = serde_json::from_str(seen.lines().next().unwrap()).unwrap();
        assert_eq!(answer["result"], json!({"roots": []}), "{seen}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
