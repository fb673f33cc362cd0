//! A plugin built against wf-plugin-api 1.0.0: one tool and one node, a
//! default source `compat`.

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
        Ok(Catalog::default().node(NodeSpec::new("hello", "Greets, as built against api 1.0", input, output)))
    }
    async fn call_tool(&self, name: &str, args: Value, _ctx: CallContext) -> Result<CallResult, PluginError> {
        match name {
            "hello" => {
                let who = args.get("name").and_then(Value::as_str).unwrap_or("you");
                Ok(CallResult::structured(json!({"greeting": format!("hello from api 1.0, {who}")})))
            }
            _ => Err(PluginError::not_found(format!("no tool {name}"))),
        }
    }
}

wf_plugin_api::export_plugin!(Compat);
