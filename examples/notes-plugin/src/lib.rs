//! `wf-notes`: an example third-party wf source plugin.
//!
//! It serves the source kind `notes` — a small notebook kept as JSON in the
//! source's data directory — and a default source named `notes`, so it works
//! without any configuration. Every capability (`add`, `get`, `list`,
//! `search`, `delete`) is both a workflow node and an MCP tool; the source
//! also serves the `summarize` prompt, the `notes://all` resource and the
//! `notes://note/{id}` resource template (`notes://<source>/all` and
//! `notes://<source>/note/{id}` for sources other than the default one).

mod args;
mod caps;
mod confirm;
mod store;
mod views;

use wf_plugin_api::prelude::*;

use crate::caps::{Cap, no_note};
use crate::store::Store;
use crate::views::Uris;

pub use crate::store::FILE_NAME;

/// The source that exists without configuration.
pub const DEFAULT_SOURCE: &str = "notes";

/// The plugin: a factory of `notes` sources.
pub struct NotesPlugin;

impl Plugin for NotesPlugin {
    type Source = NotesSource;

    fn manifest() -> Manifest {
        Manifest::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
            .kind("notes")
            .description("A small persistent notebook: add, get, list, search and delete notes")
            .default_source(DEFAULT_SOURCE, "notes")
            // The host refuses any key before the source is created (the
            // check in `create_source` stays for hosts' testing harnesses).
            .settings_schema(
                "notes",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            )
    }

    fn new(_host: Host) -> Result<Self, PluginError> {
        Ok(NotesPlugin)
    }

    /// Loads the source's notes from its data directory. The `notes` kind
    /// takes no settings, so any key in its config table is a mistake.
    fn create_source(&self, spec: SourceSpec) -> Result<NotesSource, PluginError> {
        match &spec.config {
            Value::Null => {}
            Value::Object(settings) => {
                if let Some(key) = settings.keys().next() {
                    return Err(PluginError::invalid_config(format!(
                        "sources.{}.{key}: unknown setting (the notes kind has no settings)",
                        spec.name
                    )));
                }
            }
            _ => {
                return Err(PluginError::invalid_config(format!(
                    "sources.{}: the config must be a table",
                    spec.name
                )));
            }
        }
        let store = Store::open(&spec.data_dir)?;
        tracing::debug!(source = %spec.name, notes = store.count(), "notes loaded");
        Ok(NotesSource {
            uris: Uris::for_source(&spec.name),
            name: spec.name,
            store,
        })
    }
}

/// A `notes` source: its name, its resource URIs and its notes.
pub struct NotesSource {
    name: String,
    uris: Uris,
    store: Store,
}

impl Source for NotesSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        Ok(Cap::ALL
            .into_iter()
            .fold(Catalog::default(), |c, cap| c.node(cap.spec()))
            .prompt(views::prompt())
            .resource(views::all_resource(&self.uris))
            .resource_template(views::note_template(&self.uris)))
    }

    /// The tool face of each node: its output as structured content; a
    /// failure the caller can fix (bad arguments, an unknown id) as an
    /// `isError` result the model reads.
    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<CallResult, PluginError> {
        // Node-first: a failed or invalid call is an `isError` result the model reads.
        CallResult::from_node_output(self.run_node(name, arguments, ctx).await)
    }

    /// Overridden (rather than derived from `call_tool`) so that a node's
    /// error keeps its code: `invalid_arguments` or `failed`.
    async fn run_node(
        &self,
        name: &str,
        input: Value,
        ctx: CallContext,
    ) -> Result<Value, PluginError> {
        let cap = Cap::named(name)
            .ok_or_else(|| PluginError::not_found(format!("{} has no tool {name}", self.name)))?;
        if cap == Cap::Delete
            && let Some(id) = input.get("id").and_then(Value::as_str)
        {
            confirm::delete(&self.store, &self.name, id, &ctx).await?;
        }
        cap.run(&self.store, &self.name, &input)
    }

    async fn read_resource(
        &self,
        uri: &str,
        _ctx: CallContext,
    ) -> Result<ReadResourceResult, PluginError> {
        if uri == self.uris.all {
            return Ok(views::read_all(&self.uris, &self.store.select(|_| true)));
        }
        if let Some(id) = uri.strip_prefix(&self.uris.note_prefix) {
            let note = self.store.get(id).ok_or_else(|| {
                PluginError::not_found(format!("{}: {}", self.name, no_note(id).message))
            })?;
            return Ok(views::read_note(uri, &note));
        }
        Err(PluginError::not_found(format!(
            "{} has no resource {uri}",
            self.name
        )))
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        _ctx: CallContext,
    ) -> Result<GetPromptResult, PluginError> {
        if name != views::PROMPT {
            return Err(PluginError::not_found(format!(
                "{} has no prompt {name}",
                self.name
            )));
        }
        if let Some(key) = arguments.keys().find(|k| *k != "tag") {
            return Err(PluginError::invalid_arguments(format!(
                "unknown prompt argument `{key}` (expected: tag)"
            )));
        }
        // MCP clients send prompt arguments as strings; an empty one means "not given".
        let tag = match arguments.get("tag") {
            None | Some(Value::Null) => None,
            Some(Value::String(tag)) => Some(tag.trim()).filter(|t| !t.is_empty()),
            Some(_) => {
                return Err(PluginError::invalid_arguments(
                    "prompt argument `tag` must be a string",
                ));
            }
        };
        let notes = match tag {
            Some(tag) => self.store.select(|n| n.has_tag(tag)),
            None => self.store.select(|_| true),
        };
        Ok(views::summarize(&notes, tag))
    }

    async fn status(&self) -> Value {
        json!({"notes": self.store.count()})
    }
}

wf_plugin_api::export_plugin!(NotesPlugin);
