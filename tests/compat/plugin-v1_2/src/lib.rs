//! A plugin built against wf-plugin-api 1.2.0, using what 1.2 added: asks
//! to the caller and completions. Its default source `compat12` has a tool
//! `ask` that elicits a name from the client (`CallContext::elicit`) and
//! greets with the answer, a prompt `greet` whose `name` argument completes
//! (`Source::complete`) from a fixed list, and a tool `lost` that fails with
//! the typed `state_lost` code 1.2 introduced.

use wf_plugin_api::prelude::*;

pub struct Compat;
pub struct CompatSource;

const NAMES: [&str; 4] = ["Ada", "Alan", "Barbara", "Grace"];

impl Plugin for Compat {
    type Source = CompatSource;
    fn manifest() -> Manifest {
        Manifest::new("compat-v1-2", env!("CARGO_PKG_VERSION"))
            .kind("compat12")
            .description("Built against wf-plugin-api 1.2.0 (asks and completions)")
            .default_source("compat12", "compat12")
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
        Ok(Catalog::default()
            .tool(Tool::new("ask", "Asks the caller for a name, then greets", json!({"type": "object", "properties": {}})))
            .node(NodeSpec::new("lost", "Fails with 1.2's typed state_lost (a node, and a tool)", json!({"type": "object"}), json!({})))
            .prompt(Prompt::new("greet", "Greets someone").argument("name", "who to greet", true)))
    }
    async fn call_tool(&self, name: &str, _args: Value, ctx: CallContext) -> Result<CallResult, PluginError> {
        match name {
            "ask" => {
                let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
                let answer = ctx.elicit("Whom shall I greet?", schema).await?;
                let who = match (answer.action, answer.content) {
                    (ElicitAction::Accept, Some(c)) => c.get("name").and_then(Value::as_str).unwrap_or("nobody").to_string(),
                    (action, _) => return Ok(CallResult::text(format!("not greeting: {action:?}"))),
                };
                Ok(CallResult::structured(json!({"greeting": format!("hello from api 1.2, {who}")})))
            }
            "lost" => Err(PluginError::state_lost()),
            _ => Err(PluginError::not_found(format!("no tool {name}"))),
        }
    }
    async fn get_prompt(&self, name: &str, args: Map<String, Value>, _ctx: CallContext) -> Result<GetPromptResult, PluginError> {
        if name != "greet" {
            return Err(PluginError::not_found(format!("no prompt {name}")));
        }
        let who = args.get("name").and_then(Value::as_str).unwrap_or("you");
        Ok(GetPromptResult::user_text("a greeting", format!("Greet {who}, from api 1.2.")))
    }
    async fn complete(&self, params: CompleteParams, _ctx: CallContext) -> Result<Completion, PluginError> {
        let typed = params.argument.value.to_lowercase();
        Ok(Completion::of(NAMES.iter().filter(|n| n.to_lowercase().starts_with(&typed)).copied()))
    }
}

wf_plugin_api::export_plugin!(Compat);
