//! A plugin built against wf-plugin-api 1.0.0: two nodes (each also a tool),
//! a default source `compat`.
//!
//! `down` fails with an ordinary `upstream` error; `lost` answers the way a 1.0/1.1 source said "state lost" before 1.2 had
//! a code for it: `upstream` with the message below. A 1.2 host must still
//! read it as a lost session (never retried; recorded as `state_lost`).

use wf_plugin_api::prelude::*;

pub struct Compat;
pub struct CompatSource;

impl Plugin for Compat {
    type Source = CompatSource;
    fn manifest() -> Manifest {
        Manifest::new("compat-v1-0", env!("CARGO_PKG_VERSION"))
            .kind("compat")
            .description("Built against wf-plugin-api 1.0.0")
            .default_source("compat", "compat")
    }
    fn new(_host: Host) -> Result<Self, PluginError> {
        Ok(Compat)
    }
    fn create_source(&self, _spec: SourceSpec) -> Result<CompatSource, PluginError> {
        Ok(CompatSource)
    }
}

impl Source for CompatSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        let input = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let output = json!({"type": "object", "properties": {"greeting": {"type": "string"}}, "required": ["greeting"]});
        let lost = NodeSpec::new("lost", "Fails the way a 1.0/1.1 source reported a lost session", json!({"type": "object"}), json!({}));
        Ok(Catalog::default()
            .node(NodeSpec::new("hello", "Greets, as built against api 1.0", input, output))
            .node(lost)
            .node(NodeSpec::new("down", "Fails with an ordinary upstream error", json!({"type": "object"}), json!({}))))
    }
    async fn call_tool(&self, name: &str, args: Value, _ctx: CallContext) -> Result<CallResult, PluginError> {
        match name {
            "hello" => {
                let who = args.get("name").and_then(Value::as_str).unwrap_or("you");
                Ok(CallResult::structured(json!({"greeting": format!("hello from api 1.0, {who}")})))
            }
            // The exact words of wf-plugin-api 1.1's STATE_LOST (1.0 has no constant).
            "lost" => Err(PluginError::upstream("upstream session restarted; state lost")),
            "down" => Err(PluginError::upstream("upstream unreachable")),
            _ => Err(PluginError::not_found(format!("no tool {name}"))),
        }
    }
}

wf_plugin_api::export_plugin!(Compat);
