//! A plugin built against wf-plugin-api 1.5.0, using what 1.5 gave: isolated,
//! its own runtime serves its calls over the call lane (`CallLane`), and
//! `blocking` runs work on that runtime's blocking pool. Its default source
//! `compat15` has a tool `ask` that asks the client two questions, one at a
//! time (1.5 has no `ask_round`): a 2026-07-28 client meets them as rounds of
//! wf's own keys, a 2025-11-25 client as one request each. Its answer names
//! the thread the call ran on (`wf-plugin`: the plugin's own runtime).

use wf_plugin_api::prelude::*;

pub struct Compat;

pub struct CompatSource;

impl Plugin for Compat {
    type Source = CompatSource;
    fn manifest() -> Manifest {
        Manifest::new("compat-v1-5", env!("CARGO_PKG_VERSION"))
            .kind("compat15")
            .description("Built against wf-plugin-api 1.5.0 (the call lane; asks one at a time)")
            .default_source("compat15", "compat15")
    }
    fn new(_host: Host) -> Result<Self, PluginError> {
        Ok(Compat)
    }
    fn create_source(&self, _spec: SourceSpec) -> Result<CompatSource, PluginError> {
        Ok(CompatSource)
    }
}

/// The accepted answer's `field`, or why there is none.
fn field(answer: ElicitAnswer, field: &str) -> Result<Value, String> {
    match (answer.action, answer.content) {
        (ElicitAction::Accept, Some(c)) => Ok(c.get(field).cloned().unwrap_or(Value::Null)),
        (action, _) => Err(format!("not answered: {action:?}")),
    }
}

impl Source for CompatSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        Ok(Catalog::default().tool(Tool::new("ask", "Asks your name, then whether to go on (api 1.5)", json!({"type": "object"}))))
    }
    async fn call_tool(&self, name: &str, _args: Value, ctx: CallContext) -> Result<CallResult, PluginError> {
        if name != "ask" {
            return Err(PluginError::not_found(format!("no tool {name}")));
        }
        let thread = std::thread::current().name().unwrap_or("").to_string();
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let who = match field(ctx.elicit("compat 1.5 asks your name", schema).await?, "name") {
            Ok(v) => v.as_str().unwrap_or("nobody").to_string(),
            Err(why) => return Ok(CallResult::text(why)),
        };
        let schema = json!({"type": "object", "properties": {"check": {"type": "boolean"}}, "required": ["check"]});
        let check = match field(ctx.elicit("compat 1.5 asks whether to go on", schema).await?, "check") {
            Ok(v) => v.as_bool().unwrap_or(false),
            Err(why) => return Ok(CallResult::text(why)),
        };
        let greeting = blocking(move || format!("hello from api 1.5, {who}")).await?;
        Ok(CallResult::structured(json!({"greeting": greeting, "check": check, "thread": thread})))
    }
}

wf_plugin_api::export_plugin!(Compat);
