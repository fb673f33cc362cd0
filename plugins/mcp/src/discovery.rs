//! Discovery: a one-shot session lists everything, then closes. It never
//! touches the persistent runtime, so it cannot disturb a stateful session.

use rmcp::model::PaginatedRequestParams;
use wf_plugin_api::{Catalog, NodeSpec, PluginError};

use crate::client::McpClient;
use crate::config::McpConfig;
use crate::opener::open;
use crate::pages::{ListError, all_pages};
use crate::runtime::convert;

pub async fn discover(source: &str, config: &McpConfig) -> Result<Catalog, PluginError> {
    let session = open(source, config, McpClient::new(None)).await?;
    let result = list_everything(source, &session, config).await;
    let _ = session.cancel().await;
    result
}

async fn list_everything(
    source: &str,
    session: &crate::opener::Session,
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
    let mut catalog = Catalog::default();
    if caps.tools.is_some() {
        let tools = all_pages(source, "tools", |c| async move {
            let r = session.list_tools(params(c)).await?;
            Ok((r.tools, r.next_cursor))
        })
        .await
        .map_err(|e| fail("tools", e))?;
        let tools: Vec<wf_plugin_api::Tool> = convert(tools)?;
        for tool in tools.into_iter().filter(|t| config.tool_visible(&t.name)) {
            catalog.node_specs.push(node_spec(&tool));
            catalog.tools.push(tool);
        }
    }
    if caps.prompts.is_some() {
        let prompts = all_pages(source, "prompts", |c| async move {
            let r = session.list_prompts(params(c)).await?;
            Ok((r.prompts, r.next_cursor))
        })
        .await
        .map_err(|e| fail("prompts", e))?;
        catalog.prompts = convert(prompts)?;
    }
    if caps.resources.is_some() {
        let resources = all_pages(source, "resources", |c| async move {
            let r = session.list_resources(params(c)).await?;
            Ok((r.resources, r.next_cursor))
        })
        .await
        .map_err(|e| fail("resources", e))?;
        catalog.resources = convert(resources)?;
        let templates = all_pages(source, "resource templates", |c| async move {
            let r = session.list_resource_templates(params(c)).await?;
            Ok((r.resource_templates, r.next_cursor))
        })
        .await
        .map_err(|e| fail("resource templates", e))?;
        catalog.resource_templates = convert(templates)?;
    }
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
