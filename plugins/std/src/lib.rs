//! `wf.std`: the builtin workflow nodes and tools of wf, shipped as an
//! ordinary plugin. Every node is also a tool of the same name; the source
//! also serves the `author_workflow` prompt and the `wf://std/reference`
//! resource, which teach an LLM how to write workflows.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod args;
mod docs;
mod nodes;
mod template;

use wf_plugin_api::prelude::*;

use crate::nodes::Node;

pub struct StdPlugin;

impl Plugin for StdPlugin {
    type Source = StdSource;

    fn manifest() -> Manifest {
        Manifest::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
            .kind("std")
            .description(
                "Builtin workflow nodes (errors, passthrough, constants, templates, JSON selection, \
                 merge, assert, sleep) and guidance for authoring workflows",
            )
            .default_source("wf.std", "std")
            // No settings: any key in a `std` source's table is a mistake.
            .settings_schema(
                "std",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            )
    }

    fn new(_host: Host) -> Result<Self, PluginError> {
        Ok(StdPlugin)
    }

    /// The source takes no configuration; its name only appears in the refs
    /// its prompt and reference show.
    fn create_source(&self, spec: SourceSpec) -> Result<StdSource, PluginError> {
        Ok(StdSource { name: spec.name })
    }
}

/// A `std` source (normally the default one, `wf.std`).
pub struct StdSource {
    name: String,
}

impl Source for StdSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        let catalog = Node::ALL
            .into_iter()
            .fold(Catalog::default(), |c, node| c.node(node.spec()));
        Ok(catalog
            .prompt(docs::prompt())
            .resource(docs::reference_resource()))
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<CallResult, PluginError> {
        // Node-first: a failed or invalid call is an `isError` result the model reads.
        CallResult::from_node_output(self.run_node(name, arguments, ctx).await)
    }

    /// Overridden so that a failure keeps its code and data instead of
    /// round-tripping through a tool result's text.
    async fn run_node(
        &self,
        name: &str,
        input: Value,
        ctx: CallContext,
    ) -> Result<Value, PluginError> {
        let node = Node::named(name)
            .ok_or_else(|| PluginError::not_found(format!("{} has no node {name}", self.name)))?;
        node.run(&input, &ctx).await
    }

    async fn read_resource(
        &self,
        uri: &str,
        _ctx: CallContext,
    ) -> Result<ReadResourceResult, PluginError> {
        if uri == docs::REFERENCE_URI {
            Ok(docs::read_reference(&self.name))
        } else {
            Err(PluginError::not_found(format!(
                "{} has no resource {uri}",
                self.name
            )))
        }
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        _ctx: CallContext,
    ) -> Result<GetPromptResult, PluginError> {
        if name != docs::PROMPT {
            return Err(PluginError::not_found(format!(
                "{} has no prompt {name}",
                self.name
            )));
        }
        let goal = match arguments.get("goal") {
            None | Some(Value::Null) => None,
            Some(Value::String(goal)) => Some(goal.trim()).filter(|g| !g.is_empty()),
            Some(_) => {
                return Err(PluginError::invalid_arguments(
                    "prompt argument `goal` must be a string",
                ));
            }
        };
        Ok(docs::author_workflow(&self.name, goal))
    }

    async fn status(&self) -> Value {
        json!({"nodes": Node::ALL.len()})
    }
}

wf_plugin_api::export_plugin!(StdPlugin);

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/reference/source-settings.md says a `std` source takes no settings.
    #[test]
    fn the_reference_page_lists_every_setting() {
        let manifest = <StdPlugin as Plugin>::manifest();
        let page = include_str!("../../../docs/reference/source-settings.md");
        let problems = wf_plugin_api::testing::settings_reference_problems(
            &manifest.settings_schemas["std"],
            page,
            "`kind = \"std\"`",
        );
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
