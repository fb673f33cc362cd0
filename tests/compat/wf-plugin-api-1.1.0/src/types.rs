//! The serde shapes of everything that crosses the ABI as JSON.
//!
//! Descriptor types keep unknown fields in `extra`, so MCP metadata a plugin
//! passes through (annotations, icons, `_meta`…) survives unchanged, and a new
//! optional field is never a breaking change.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// What a plugin declares about itself before it is instantiated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Unique plugin name (e.g. `wf-source-std`).
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// The wf-plugin-api version the plugin was built with.
    pub api_version: String,
    /// Source kinds this plugin serves (the `kind` of a configured source).
    pub kinds: Vec<String>,
    #[serde(default)]
    pub description: String,
    /// Sources that exist without any configuration (e.g. `wf.std`). An
    /// operator can still disable or reconfigure them by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_sources: Vec<DefaultSource>,
}

impl Manifest {
    /// Name and version are usually `env!("CARGO_PKG_NAME")` and
    /// `env!("CARGO_PKG_VERSION")`.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            api_version: crate::API_VERSION.to_string(),
            kinds: Vec::new(),
            description: String::new(),
            default_sources: Vec::new(),
        }
    }
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kinds.push(kind.into());
        self
    }
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
    pub fn default_source(mut self, name: impl Into<String>, kind: impl Into<String>) -> Self {
        self.default_sources.push(DefaultSource {
            name: name.into(),
            kind: kind.into(),
            config: Value::Object(Map::new()),
        });
        self
    }
}

/// A source a plugin serves without configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DefaultSource {
    pub name: String,
    pub kind: String,
    #[serde(default)]
    pub config: Value,
}

/// Handed to the plugin's constructor.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PluginInit {
    /// The host's version (`wf --version`).
    #[serde(default)]
    pub host_version: String,
    /// Which plugin log events the host wants, in `tracing` target syntax:
    /// a level (`info`) optionally followed by `target=level` pairs
    /// (`info,rmcp=warn`). Filtered events never cross the ABI.
    #[serde(default)]
    pub log_level: String,
}

/// A configured source the host asks a plugin to create.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceSpec {
    /// The source's name, e.g. `playwright` or `wf.std`.
    pub name: String,
    /// Its kind, one of the plugin's `Manifest::kinds`.
    pub kind: String,
    /// The source's configuration table, with `${VAR}` already expanded.
    #[serde(default)]
    pub config: Value,
    /// A directory the source may keep files in; it exists.
    pub data_dir: PathBuf,
}

/// A tool as shown to MCP clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Tool {
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description: Some(description.into()),
            input_schema,
            output_schema: None,
            extra: Map::new(),
        }
    }
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }
}

/// A workflow node type: a capability a workflow can use as a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub input_schema: Value,
    #[serde(default = "any_schema")]
    pub output_schema: Value,
    /// The node changes something outside the workflow (not safe to retry blindly).
    #[serde(default)]
    pub side_effects: bool,
    /// The node depends on upstream session state (must run on the persistent runtime).
    #[serde(default)]
    pub stateful: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn any_schema() -> Value {
    json!({})
}

impl NodeSpec {
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        output_schema: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            output_schema,
            side_effects: false,
            stateful: false,
            extra: Map::new(),
        }
    }
    pub fn side_effects(mut self, yes: bool) -> Self {
        self.side_effects = yes;
        self
    }
    pub fn stateful(mut self, yes: bool) -> Self {
        self.stateful = yes;
        self
    }
    /// The tool a node spec is also served as (same name, schemas and description).
    pub fn as_tool(&self) -> Tool {
        Tool {
            name: self.name.clone(),
            description: Some(self.description.clone()),
            input_schema: self.input_schema.clone(),
            // MCP wants an output schema to be an object schema; "any" is left out.
            output_schema: (self.output_schema.get("type").and_then(Value::as_str)
                == Some("object"))
            .then(|| self.output_schema.clone()),
            extra: Map::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptArgument {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<PromptArgument>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Prompt {
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: Some(description.into()),
            arguments: Vec::new(),
            extra: Map::new(),
        }
    }
    pub fn argument(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        required: bool,
    ) -> Self {
        self.arguments.push(PromptArgument {
            name: name.into(),
            description: Some(description.into()),
            required: Some(required),
            extra: Map::new(),
        });
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    pub uri: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Resource {
    pub fn new(
        uri: impl Into<String>,
        name: impl Into<String>,
        description: impl Into<String>,
        mime_type: impl Into<String>,
    ) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            description: Some(description.into()),
            mime_type: Some(mime_type.into()),
            extra: Map::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    pub uri_template: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ResourceTemplate {
    /// `uri_template` is an RFC 6570 template such as `notes://note/{id}`.
    pub fn new(
        uri_template: impl Into<String>,
        name: impl Into<String>,
        description: impl Into<String>,
        mime_type: impl Into<String>,
    ) -> Self {
        Self {
            uri_template: uri_template.into(),
            name: name.into(),
            description: Some(description.into()),
            mime_type: Some(mime_type.into()),
            extra: Map::new(),
        }
    }
}

/// Everything a source offers, as found by discovery.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Catalog {
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub node_specs: Vec<NodeSpec>,
    #[serde(default)]
    pub prompts: Vec<Prompt>,
    #[serde(default)]
    pub resources: Vec<Resource>,
    #[serde(default)]
    pub resource_templates: Vec<ResourceTemplate>,
}

impl Catalog {
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }
    /// Adds a node spec and, under the same name, the tool that serves it.
    pub fn node(mut self, spec: NodeSpec) -> Self {
        self.tools.push(spec.as_tool());
        self.node_specs.push(spec);
        self
    }
    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.prompts.push(prompt);
        self
    }
    pub fn resource(mut self, resource: Resource) -> Self {
        self.resources.push(resource);
        self
    }
    pub fn resource_template(mut self, template: ResourceTemplate) -> Self {
        self.resource_templates.push(template);
        self
    }
}

/// The result of a tool call, in MCP's shape: `content` holds MCP content
/// blocks as they are (text, image, audio, resource links, embedded resources).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallResult {
    #[serde(default)]
    pub content: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

impl CallResult {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![json!({"type": "text", "text": text.into()})],
            ..Self::default()
        }
    }
    /// Structured output plus its JSON text as a content block (MCP's advice
    /// for clients that do not read `structuredContent`).
    pub fn structured(value: Value) -> Self {
        let text = serde_json::to_string(&value).unwrap_or_default();
        Self {
            content: vec![json!({"type": "text", "text": text})],
            structured_content: Some(value),
            ..Self::default()
        }
    }
    /// A tool-level failure the caller should read (MCP `isError: true`).
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(message)
        }
    }
}

/// `resources/read` result: MCP resource contents as they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceResult {
    pub contents: Vec<Value>,
}

impl ReadResourceResult {
    pub fn text(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self {
            contents: vec![
                json!({"uri": uri.into(), "mimeType": mime_type.into(), "text": text.into()}),
            ],
        }
    }
}

/// `prompts/get` result: MCP prompt messages as they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GetPromptResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub messages: Vec<Value>,
}

impl GetPromptResult {
    pub fn user_text(description: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            description: Some(description.into()),
            messages: vec![
                json!({"role": "user", "content": {"type": "text", "text": text.into()}}),
            ],
        }
    }
}

/// One operation on a source. This enum is the source protocol: it crosses the
/// ABI as JSON, so adding an operation never changes the ABI layout; a plugin
/// that does not know an operation answers `unsupported`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SourceRequest {
    /// Discovery: everything the source offers (may use a one-shot session).
    Catalog,
    CallTool {
        name: String,
        #[serde(default)]
        arguments: Value,
    },
    RunNode {
        name: String,
        #[serde(default)]
        input: Value,
    },
    ListResources,
    ListResourceTemplates,
    ReadResource {
        uri: String,
    },
    ListPrompts,
    GetPrompt {
        name: String,
        #[serde(default)]
        arguments: Map<String, Value>,
    },
    /// Health and runtime details (JSON object; secrets never included).
    Status,
    /// Since 1.1: opens (if needed) the session calls will run on — the
    /// shared persistent one, or `lease`'s — and returns its [`SessionInfo`].
    /// Sources without sessions answer `unsupported`.
    OpenSession {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease: Option<String>,
    },
    /// Since 1.1: opens a run-scoped session of its own, returned as
    /// [`SessionInfo`] with its `lease` id; calls whose [`CallScope`] names the
    /// lease use it.
    OpenLease,
    /// Since 1.1: closes a lease's session.
    CloseLease {
        lease: String,
    },
}

/// Since 1.1: which session a call must run on. Sent in the call's info as
/// `{"scope": {...}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallScope {
    /// Run on this lease's session instead of the shared one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// Fail with "upstream session restarted; state lost" unless the session
    /// is still the one with this epoch (it did not reconnect meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_epoch: Option<u64>,
}

/// Since 1.1: a session a source's calls run on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// Increases each time the session is (re)opened.
    pub epoch: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
}

/// The message of the error a call fails with when its session restarted.
pub const STATE_LOST: &str = "upstream session restarted; state lost";

/// Something a plugin tells the host outside of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The source's capabilities changed; the host should refresh its catalog.
    CapabilitiesChanged { source: String },
    /// Free-form status change (e.g. an upstream reconnected).
    Status {
        source: String,
        #[serde(default)]
        detail: Value,
    },
}
