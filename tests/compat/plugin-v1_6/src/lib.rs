//! A plugin built against wf-plugin-api 1.6.0, using what 1.6 gave: its
//! default source `compat16` has a tool `ask` that asks the client two
//! questions as one round (`ask_round`, keys `name` and `check`): a 2026-07-28
//! client meets them as one input-required round under those keys, a
//! 2025-11-25 client as one request each. 1.6 predates 1.7's descriptor watch
//! (`next_watch`): its glue answers that `unsupported`, and the host leaves it
//! alone.

use std::collections::BTreeMap;

use wf_plugin_api::CallerRequest;
use wf_plugin_api::prelude::*;

pub struct Compat;

pub struct CompatSource;

impl Plugin for Compat {
    type Source = CompatSource;
    fn manifest() -> Manifest {
        Manifest::new("compat-v1-6", env!("CARGO_PKG_VERSION"))
            .kind("compat16")
            .description("Built against wf-plugin-api 1.6.0 (asks as one round)")
            .default_source("compat16", "compat16")
    }
    fn new(_host: Host) -> Result<Self, PluginError> {
        Ok(Compat)
    }
    fn create_source(&self, _spec: SourceSpec) -> Result<CompatSource, PluginError> {
        Ok(CompatSource)
    }
}

/// The accepted answer's `field`, or why there is none.
fn field(answer: Option<&Value>, field: &str) -> Result<Value, String> {
    let answer = answer.ok_or("no answer")?;
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => Ok(answer.get("content").and_then(|c| c.get(field)).cloned().unwrap_or(Value::Null)),
        other => Err(format!("not answered: {other:?}")),
    }
}

fn elicit(message: &str, property: &str, kind: &str) -> CallerRequest {
    CallerRequest::Elicit {
        params: json!({
            "message": message,
            "requestedSchema": {"type": "object", "properties": {property: {"type": kind}}, "required": [property]},
        }),
    }
}

impl Source for CompatSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        Ok(Catalog::default().tool(Tool::new("ask", "Asks your name and whether to go on, as one round (api 1.6)", json!({"type": "object"}))))
    }
    async fn call_tool(&self, name: &str, _args: Value, ctx: CallContext) -> Result<CallResult, PluginError> {
        if name != "ask" {
            return Err(PluginError::not_found(format!("no tool {name}")));
        }
        let round = BTreeMap::from([
            ("name".to_string(), elicit("compat 1.6 asks your name", "name", "string")),
            ("check".to_string(), elicit("compat 1.6 asks whether to go on", "check", "boolean")),
        ]);
        let answers = ctx.ask_round(round).await?;
        let who = match field(answers.get("name"), "name") {
            Ok(v) => v.as_str().unwrap_or("nobody").to_string(),
            Err(why) => return Ok(CallResult::text(why)),
        };
        let check = match field(answers.get("check"), "check") {
            Ok(v) => v.as_bool().unwrap_or(false),
            Err(why) => return Ok(CallResult::text(why)),
        };
        Ok(CallResult::structured(json!({"greeting": format!("hello from api 1.6, {who}"), "check": check})))
    }
}

wf_plugin_api::export_plugin!(Compat);
