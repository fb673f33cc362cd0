//! wf-source-mcp: upstream MCP servers as wf sources of kind `mcp`.
//!
//! Discovery uses one-shot sessions (`discovery`), but for a rediscovery
//! the shared session's own `list_changed` asked for; every execution — tool
//! calls, resource reads, prompt gets and session-scoped listings — uses the
//! source's persistent runtime (`runtime`), so stateful servers such as
//! Playwright keep their state across calls. Both open sessions through the
//! one [`opener`].
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod config;
mod discovery;
pub mod oauth;
mod pages;
mod runtime;
mod session;
mod transport;

pub use session::{client, opener};
pub use transport::env;

use std::collections::HashMap;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
    on_list_changed: client::OnListChanged,
    on_log: client::OnLog,
    /// For the events of lease sessions (their resource updates).
    host: Host,
    /// The shared persistent runtime every call uses by default.
    runtime: Arc<Runtime>,
    /// Its stdio sessions' stdout, for the host's reactor (`io_watch`).
    io_watch: wf_plugin_api::io_watch::IoWatch,
    /// Run-scoped leases: each its own upstream session, closed when released.
    leases: Mutex<HashMap<String, Arc<Runtime>>>,
    next_lease: AtomicU64,
}

impl Plugin for McpPlugin {
    type Source = McpSource;

    fn manifest() -> Manifest {
        Manifest::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
            .kind("mcp")
            .description("Upstream MCP servers over stdio and streamable HTTP, with a persistent session per source")
            .settings_schema("mcp", config::settings_schema())
            // stdio upstreams are programs it starts (a sandbox allows execve).
            .starts_programs()
    }

    fn new(host: Host) -> Result<Self, PluginError> {
        Ok(Self { host })
    }

    fn create_source(&self, spec: SourceSpec) -> Result<McpSource, PluginError> {
        let mut config = McpConfig::parse(&spec.name, &spec.config)?;
        config.token_dir = Some(spec.data_dir.clone());
        let config = Arc::new(config);
        let (host, name) = (self.host.clone(), spec.name.clone());
        let on_list_changed: client::OnListChanged = Arc::new(move || {
            host.emit(&Event::CapabilitiesChanged {
                source: name.clone(),
            })
        });
        let (host, name) = (self.host.clone(), spec.name.clone());
        let on_resource_updated: client::OnResourceUpdated = Arc::new(move |uri| {
            host.emit(&Event::ResourceUpdated {
                source: name.clone(),
                uri,
                lease: None,
            })
        });
        let (host, name) = (self.host.clone(), spec.name.clone());
        let on_log: client::OnLog = Arc::new(move |level, logger, data| {
            host.emit(&Event::Log {
                source: name.clone(),
                level,
                logger,
                data,
            })
        });
        let io_watch = wf_plugin_api::io_watch::IoWatch::new();
        let runtime = Arc::new(
            Runtime::new(
                spec.name.clone(),
                config.clone(),
                Some(on_list_changed.clone()),
            )
            .with_resource_updates(on_resource_updated)
            .with_on_log(on_log.clone())
            .with_io_watch(io_watch.clone()),
        );
        Ok(McpSource {
            name: spec.name,
            config,
            on_list_changed,
            on_log,
            host: self.host.clone(),
            runtime,
            io_watch,
            leases: Mutex::new(HashMap::new()),
            next_lease: AtomicU64::new(1),
        })
    }
}

impl McpSource {
    /// Where a lease session's `notifications/resources/updated` go: to the
    /// host, naming the lease (only the clients subscribed on it hear them).
    fn lease_updates(&self, lease: &str) -> client::OnResourceUpdated {
        let (host, source, lease) = (self.host.clone(), self.name.clone(), lease.to_string());
        Arc::new(move |uri| {
            host.emit(&Event::ResourceUpdated {
                source: source.clone(),
                uri,
                lease: Some(lease.clone()),
            })
        })
    }

    /// The runtime a call runs on: its lease's, or the shared one.
    fn runtime_for(&self, lease: Option<&str>) -> Result<Arc<Runtime>, PluginError> {
        match lease {
            None => Ok(self.runtime.clone()),
            Some(id) => self
                .leases
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(id)
                .cloned()
                .ok_or_else(|| {
                    PluginError::not_found(format!(
                        "no open lease {id:?} on source {:?}",
                        self.name
                    ))
                }),
        }
    }

    /// Each lease's session status (epoch, connected, calls in flight), by lease id.
    async fn lease_status(&self) -> Value {
        let leases: Vec<(String, Arc<Runtime>)> = self
            .leases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(id, rt)| (id.clone(), rt.clone()))
            .collect();
        let mut out = Map::new();
        for (id, rt) in leases {
            out.insert(id, rt.status().await);
        }
        Value::Object(out)
    }

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
        discovery::discover(&self.name, &self.config, &self.runtime).await
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<CallResult, PluginError> {
        self.check_tool(name)?;
        let rt = self.runtime_for(ctx.scope().lease.as_deref())?;
        rt.call_tool(name, arguments, &ctx).await
    }

    async fn call_tool_as_task(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<TaskStart, PluginError> {
        self.check_tool(name)?;
        let arguments = match arguments {
            Value::Object(m) => m,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(PluginError::invalid_arguments(format!(
                    "tool arguments must be an object, got {other}"
                )));
            }
        };
        // Tasks live on the shared session: tasks/get comes without a lease.
        self.runtime.call_tool_as_task(name, arguments, &ctx).await
    }

    async fn get_task(&self, task_id: &str, ctx: CallContext) -> Result<Value, PluginError> {
        self.runtime.get_task(task_id, &ctx).await
    }

    async fn cancel_task(&self, task_id: &str, ctx: CallContext) -> Result<(), PluginError> {
        self.runtime.cancel_task(task_id, &ctx).await
    }

    async fn update_task(
        &self,
        task_id: &str,
        input_responses: Value,
        ctx: CallContext,
    ) -> Result<(), PluginError> {
        self.runtime
            .update_task(task_id, input_responses, &ctx)
            .await
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
        let rt = self.runtime_for(ctx.scope().lease.as_deref())?;
        rt.read_resource(uri, &ctx).await
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
        let rt = self.runtime_for(ctx.scope().lease.as_deref())?;
        rt.get_prompt(name, arguments, &ctx).await
    }

    async fn complete(
        &self,
        params: CompleteParams,
        ctx: CallContext,
    ) -> Result<Completion, PluginError> {
        let rt = self.runtime_for(ctx.scope().lease.as_deref())?;
        rt.complete(params, &ctx).await
    }

    /// Subscriptions live on the shared session (the host counts clients).
    async fn subscribe(&self, uri: &str, ctx: CallContext) -> Result<(), PluginError> {
        let rt = self.runtime_for(ctx.scope().lease.as_deref())?;
        rt.subscribe(uri).await
    }

    async fn unsubscribe(&self, uri: &str, ctx: CallContext) -> Result<(), PluginError> {
        let rt = self.runtime_for(ctx.scope().lease.as_deref())?;
        rt.unsubscribe(uri).await
    }

    /// The host passes the client's new roots in the info JSON (`roots`).
    async fn roots_list_changed(&self, ctx: CallContext) -> Result<(), PluginError> {
        let rt = self.runtime_for(ctx.scope().lease.as_deref())?;
        let roots = ctx.info().get_mut("roots").map(Value::take).and_then(|r| {
            serde_json::from_value(r)
                .inspect_err(|e| tracing::info!(source = %self.name, "the client's roots are not MCP roots: {e}"))
                .ok()
        });
        rt.roots_list_changed(roots).await
    }

    async fn open_session(&self, lease: Option<&str>) -> Result<SessionInfo, PluginError> {
        let epoch = self.runtime_for(lease)?.open_session().await?;
        Ok(SessionInfo {
            epoch,
            lease: lease.map(str::to_string),
        })
    }

    async fn open_lease(&self) -> Result<SessionInfo, PluginError> {
        let id = format!("lease-{}", self.next_lease.fetch_add(1, Ordering::Relaxed));
        let rt = Arc::new(
            Runtime::new(
                format!("{}#{id}", self.name),
                self.config.clone(),
                Some(self.on_list_changed.clone()),
            )
            .with_on_log(self.on_log.clone())
            .with_resource_updates(self.lease_updates(&id))
            .with_io_watch(self.io_watch.clone()),
        );
        let epoch = rt.open_session().await?;
        self.leases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), rt);
        Ok(SessionInfo {
            epoch,
            lease: Some(id),
        })
    }

    async fn close_lease(&self, lease: &str) -> Result<(), PluginError> {
        let rt = self
            .leases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(lease);
        match rt {
            Some(rt) => {
                rt.close().await;
                Ok(())
            }
            None => Err(PluginError::not_found(format!("no open lease {lease:?}"))),
        }
    }

    fn io_watch(&self) -> Option<&wf_plugin_api::io_watch::IoWatch> {
        Some(&self.io_watch)
    }

    async fn status(&self) -> Value {
        let mut s = self.runtime.status().await;
        s["leases"] = json!(
            self.leases
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len()
        );
        s["lease_sessions"] = self.lease_status().await;
        s["upstream"] = self.config.describe();
        // Which generation of MCP the upstream is spoken to in (`auto` finds out).
        s["protocol"] = json!({
            "setting": self.config.protocol_setting(),
            "spoken": self.config.spoken(),
        });
        s["fingerprint"] = json!(self.config.fingerprint());
        s
    }

    async fn shutdown(&self) {
        let leases: Vec<Arc<Runtime>> = self
            .leases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, rt)| rt)
            .collect();
        futures::future::join_all(leases.iter().map(|rt| rt.close())).await;
        self.runtime.close().await;
        // A session still closing (a rediscovery when wf stops) must not
        // outlive the source.
        transport::stdio::kill_leftovers(&self.name, transport::stdio::instance_key(&self.config));
    }
}

wf_plugin_api::export_plugin!(McpPlugin);

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `make` returns, without calling it.
    fn returned_size<A, F: std::future::Future>(_: &impl Fn(A) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// A call's future is moved whole into its box at the ABI (`reply` in
    /// wf-plugin-api), and it is as large as every path it may take: rmcp's
    /// service, the retry after listing the tools and a round of answers are
    /// boxed where they are taken, so a plain call copies about 5 KiB, not 10
    /// (docs/performance/call-path.md, "Futures copied whole").
    #[test]
    fn a_calls_future_stays_small() {
        let call = |(source, name, args, ctx): (McpSource, String, Value, CallContext)| async move {
            source.call_tool(&name, args, ctx).await
        };
        let size = returned_size(&call);
        assert!(size <= 6 * 1024, "a call's future is {size} bytes");
    }
}
