//! wf-source-mcp: upstream MCP servers as wf sources of kind `mcp`.
//!
//! Discovery uses one-shot sessions ([`discovery`]); every execution — tool
//! calls, resource reads, prompt gets and session-scoped listings — uses the
//! source's persistent runtime ([`runtime`]), so stateful servers such as
//! Playwright keep their state across calls. Both open sessions through the
//! one [`opener`].

mod client;
pub mod config;
mod discovery;
pub mod opener;
mod runtime;

use std::sync::Arc;

use serde_json::{Map, Value, json};
use wf_plugin_api::prelude::*;

use config::McpConfig;
use runtime::Runtime;

pub struct McpPlugin {
    host: Host,
}

pub struct McpSource {
    name: String,
    config: Arc<McpConfig>,
    runtime: Runtime,
}

impl Plugin for McpPlugin {
    type Source = McpSource;

    fn manifest() -> Manifest {
        Manifest::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
            .kind("mcp")
            .description("Upstream MCP servers over stdio and streamable HTTP, with a persistent session per source")
    }

    fn new(host: Host) -> Result<Self, PluginError> {
        Ok(Self { host })
    }

    fn create_source(&self, spec: SourceSpec) -> Result<McpSource, PluginError> {
        let config = Arc::new(McpConfig::parse(&spec.name, &spec.config)?);
        let (host, name) = (self.host.clone(), spec.name.clone());
        let on_list_changed: client::OnListChanged = Arc::new(move || {
            host.emit(&Event::CapabilitiesChanged {
                source: name.clone(),
            })
        });
        let runtime = Runtime::new(spec.name.clone(), config.clone(), Some(on_list_changed));
        Ok(McpSource {
            name: spec.name,
            config,
            runtime,
        })
    }
}

impl McpSource {
    fn check_tool(&self, name: &str) -> Result<(), PluginError> {
        if self.config.tool_visible(name) {
            Ok(())
        } else {
            Err(PluginError::not_found(format!(
                "tool {name:?} is filtered out by this source's allow/deny lists"
            )))
        }
    }
}

impl Source for McpSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        discovery::discover(&self.name, &self.config).await
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<CallResult, PluginError> {
        self.check_tool(name)?;
        self.runtime.call_tool(name, arguments, &ctx).await
    }

    async fn list_resources(&self) -> Result<Vec<Resource>, PluginError> {
        self.runtime.list_resources().await
    }

    async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, PluginError> {
        self.runtime.list_resource_templates().await
    }

    async fn read_resource(
        &self,
        uri: &str,
        ctx: CallContext,
    ) -> Result<ReadResourceResult, PluginError> {
        self.runtime.read_resource(uri, &ctx).await
    }

    async fn list_prompts(&self) -> Result<Vec<Prompt>, PluginError> {
        self.runtime.list_prompts().await
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: CallContext,
    ) -> Result<GetPromptResult, PluginError> {
        self.runtime.get_prompt(name, arguments, &ctx).await
    }

    async fn status(&self) -> Value {
        let mut s = self.runtime.status().await;
        s["upstream"] = self.config.describe();
        s["fingerprint"] = json!(self.config.fingerprint());
        s
    }

    async fn shutdown(&self) {
        self.runtime.close().await;
    }
}

wf_plugin_api::export_plugin!(McpPlugin);
