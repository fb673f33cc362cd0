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
    /// A one-line description for `wf plugins`.
    pub description: String,
    /// Sources that exist without any configuration (e.g. `wf.std`). An
    /// operator can still disable or reconfigure them by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_sources: Vec<DefaultSource>,
    /// The JSON Schema of a source's settings, per kind (since 1.2). The
    /// host checks each configured source's settings against it before
    /// `create_source`, so a misspelt key is refused with a hint instead of
    /// being silently ignored. A kind without a schema is not checked.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub settings_schemas: Map<String, Value>,
    /// The plugin starts other programs (since 1.3; e.g. the mcp plugin's
    /// stdio servers). A host that sandboxes plugins lets only such a
    /// plugin `execve`, and lets it read the system's program folders; a
    /// plugin that does not declare it and tries is denied (`EPERM`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub starts_programs: bool,
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
            settings_schemas: Map::new(),
            starts_programs: false,
        }
    }
    /// Declares that the plugin starts other programs (`execve`); see
    /// [`Manifest::starts_programs`].
    pub fn starts_programs(mut self) -> Self {
        self.starts_programs = true;
        self
    }
    /// Adds a source kind this plugin serves.
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kinds.push(kind.into());
        self
    }
    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
    /// Declares the JSON Schema of the settings of `kind`'s sources (an
    /// object schema; `"additionalProperties": false` makes unknown keys
    /// errors). The host checks settings against it with
    /// [`crate::schema::instance_problems`] before creating a source; the
    /// host's own keys (`kind`, `enabled`, …) never reach the plugin.
    pub fn settings_schema(mut self, kind: impl Into<String>, schema: Value) -> Self {
        self.settings_schemas.insert(kind.into(), schema);
        self
    }
    /// Adds a source that exists without configuration (`name` of `kind`).
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
    /// The source's name.
    pub name: String,
    /// Its kind, one of the plugin's kinds.
    pub kind: String,
    #[serde(default)]
    /// Its configuration, as a `[sources.NAME]` table would give it.
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
    /// Since 1.2: worker threads of the plugin's tokio runtime (the
    /// operator's `[server] plugin_threads`; 1 when absent, at most
    /// [`crate::export::MAX_RUNTIME_THREADS`]). Read before the runtime starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_threads: Option<usize>,
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
    /// The tool's name within its source (the host projects it for clients).
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// What the tool does, for the model that picks it.
    pub description: Option<String>,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// JSON Schema of `structuredContent`, when the tool returns structured output.
    pub output_schema: Option<Value>,
    #[serde(flatten)]
    /// MCP fields wf does not model (annotations, icons, `_meta`…), passed through as they are.
    pub extra: Map<String, Value>,
}

impl Tool {
    /// A tool with a name, a description and an input schema.
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
    /// Declares the tool's output schema.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }
}

/// A workflow node type: a capability a workflow can use as a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    /// The node's name within its source (refs are `<source>.<name>`).
    pub name: String,
    #[serde(default)]
    /// What the node does.
    pub description: String,
    /// JSON Schema of the node's input.
    pub input_schema: Value,
    #[serde(default = "any_schema")]
    /// JSON Schema of the node's output (default: any value).
    pub output_schema: Value,
    /// The node changes something outside the workflow (not safe to retry blindly).
    #[serde(default)]
    pub side_effects: bool,
    /// The node depends on upstream session state (must run on the persistent runtime).
    #[serde(default)]
    pub stateful: bool,
    #[serde(flatten)]
    /// Fields wf does not model, passed through as they are.
    pub extra: Map<String, Value>,
}

fn any_schema() -> Value {
    json!({})
}

impl NodeSpec {
    /// A node spec with a name, a description and its input and output schemas.
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
    /// Marks the node as changing something outside the workflow.
    pub fn side_effects(mut self, yes: bool) -> Self {
        self.side_effects = yes;
        self
    }
    /// Marks the node as depending on upstream session state.
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
/// An argument a prompt takes.
pub struct PromptArgument {
    /// The argument's name.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// What to pass.
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Whether the prompt needs it.
    pub required: Option<bool>,
    #[serde(flatten)]
    /// MCP fields wf does not model, passed through as they are.
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// A prompt template as shown to MCP clients.
pub struct Prompt {
    /// The prompt's name within its source.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// What the prompt is for.
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    /// The arguments it takes.
    pub arguments: Vec<PromptArgument>,
    #[serde(flatten)]
    /// MCP fields wf does not model, passed through as they are.
    pub extra: Map<String, Value>,
}

impl Prompt {
    /// A prompt with a name and a description and no arguments yet.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: Some(description.into()),
            arguments: Vec::new(),
            extra: Map::new(),
        }
    }
    /// Adds an argument.
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
/// A resource as shown to MCP clients.
pub struct Resource {
    /// The resource's URI (what `read_resource` receives).
    pub uri: String,
    /// A human-readable name.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// What the resource holds.
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The MIME type of its contents.
    pub mime_type: Option<String>,
    #[serde(flatten)]
    /// MCP fields wf does not model, passed through as they are.
    pub extra: Map<String, Value>,
}

impl Resource {
    /// A resource with its URI, name, description and MIME type.
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
/// A family of resources addressed by an RFC 6570 URI template.
pub struct ResourceTemplate {
    /// The template, e.g. `notes://note/{id}`.
    pub uri_template: String,
    /// A human-readable name.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// What the resources hold.
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The MIME type of their contents.
    pub mime_type: Option<String>,
    #[serde(flatten)]
    /// MCP fields wf does not model, passed through as they are.
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
    /// Tools, as MCP clients see them.
    pub tools: Vec<Tool>,
    #[serde(default)]
    /// Workflow node types.
    pub node_specs: Vec<NodeSpec>,
    #[serde(default)]
    /// Prompts.
    pub prompts: Vec<Prompt>,
    #[serde(default)]
    /// Resources listed up front.
    pub resources: Vec<Resource>,
    #[serde(default)]
    /// Resource templates.
    pub resource_templates: Vec<ResourceTemplate>,
}

impl Catalog {
    /// Adds a tool.
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
    /// Adds a prompt.
    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.prompts.push(prompt);
        self
    }
    /// Adds a resource.
    pub fn resource(mut self, resource: Resource) -> Self {
        self.resources.push(resource);
        self
    }
    /// Adds a resource template.
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
    /// MCP content blocks (text, image, audio, resource links, embedded resources).
    pub content: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Structured output, matching the tool's output schema when it has one.
    pub structured_content: Option<Value>,
    #[serde(default)]
    /// The tool ran and failed; the content says why.
    pub is_error: bool,
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    /// MCP `_meta`, passed through.
    pub meta: Option<Value>,
}

impl CallResult {
    /// A result of one text block.
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
    /// MCP resource contents (`{uri, mimeType, text}` or `{uri, mimeType, blob}`).
    pub contents: Vec<Value>,
}

impl ReadResourceResult {
    /// One text content of `uri`.
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
    /// A description of the rendered prompt.
    pub description: Option<String>,
    /// MCP prompt messages (`{role, content}`).
    pub messages: Vec<Value>,
}

impl GetPromptResult {
    /// One user message of text.
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
    /// Calls a tool (the proxy's path).
    CallTool {
        /// The tool's name within the source.
        name: String,
        #[serde(default)]
        /// Its arguments.
        arguments: Value,
    },
    /// Runs a workflow node.
    RunNode {
        /// The node's name within the source.
        name: String,
        #[serde(default)]
        /// Its input.
        input: Value,
    },
    /// Resources (may depend on session state).
    ListResources,
    /// Resource templates.
    ListResourceTemplates,
    /// Reads a resource.
    ReadResource {
        /// The resource's URI.
        uri: String,
    },
    /// Prompts (may depend on session state).
    ListPrompts,
    /// Renders a prompt.
    GetPrompt {
        /// The prompt's name within the source.
        name: String,
        #[serde(default)]
        /// Its arguments.
        arguments: Map<String, Value>,
    },
    /// Health and runtime details (JSON object; secrets never included).
    Status,
    /// Since 1.1: opens (if needed) the session calls will run on — the
    /// shared persistent one, or `lease`'s — and returns its [`SessionInfo`].
    /// Sources without sessions answer `unsupported`.
    OpenSession {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        /// The lease whose session to open; none: the shared one.
        lease: Option<String>,
    },
    /// Since 1.1: opens a run-scoped session of its own, returned as
    /// [`SessionInfo`] with its `lease` id; calls whose [`CallScope`] names the
    /// lease use it.
    OpenLease,
    /// Since 1.1: closes a lease's session.
    CloseLease {
        /// The lease to close.
        lease: String,
    },
    /// Since 1.2: suggests values for an argument of a prompt or resource
    /// template (MCP `completion/complete`). Sources without completions
    /// answer `unsupported` (the host then answers no suggestions).
    Complete(crate::forwarding::CompleteParams),
    /// Since 1.2: the host wants [`Event::ResourceUpdated`] for `uri` (its
    /// first client subscribed) on the session the info JSON's `scope` names
    /// (a lease's; none: the shared one). Sources that cannot tell answer
    /// `unsupported`.
    Subscribe {
        /// The resource's URI within the source.
        uri: String,
    },
    /// Since 1.2: no client wants updates of `uri` any more.
    Unsubscribe {
        /// The resource's URI within the source.
        uri: String,
    },
    /// Since 1.2: the client a session acts for says its roots changed (MCP
    /// `notifications/roots/list_changed`); the info JSON's `scope` names the
    /// session (a lease's; none: the shared one). Sources that do not care
    /// answer `unsupported`.
    RootsListChanged,
    /// Since 1.2: the caller's answer to the request a call sent with
    /// [`Event::AskCaller`] (exactly one of `ok` and `error`).
    CallerAnswer {
        /// The `ask` id of the event.
        ask: u64,
        /// The answer's JSON.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ok: Option<Value>,
        /// Why there is no answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<crate::PluginError>,
    },
    /// Since 1.3: calls a tool as a task (MCP Tasks): the source answers a
    /// [`crate::TaskStart`], a task handle or the plain result. A source
    /// that predates it answers `unsupported` and the host makes the plain
    /// call instead.
    CallToolAsTask {
        /// The tool's name within the source.
        name: String,
        #[serde(default)]
        /// Its arguments.
        arguments: Value,
    },
    /// Since 1.3: the state of a task this source started (MCP `tasks/get`'s
    /// result JSON, with the source's task id).
    GetTask {
        /// The id the source gave the task.
        task_id: String,
    },
    /// Since 1.3: asks the source to cancel a task it started (MCP
    /// `tasks/cancel`; cooperative).
    CancelTask {
        /// The id the source gave the task.
        task_id: String,
    },
    /// Since 1.4: the client's answers to the input a task asks for (MCP
    /// `tasks/update`: a task whose `tasks/get` reads `input_required`
    /// listed `inputRequests`; these are the `inputResponses`, keyed alike).
    /// A source that predates it answers `unsupported`.
    UpdateTask {
        /// The id the source gave the task.
        task_id: String,
        /// MCP's `inputResponses` object.
        #[serde(default)]
        input_responses: Value,
    },
    /// Since 1.5: a host that runs the plugin in a child process hands it a
    /// socket (`fd`, a descriptor of this process) that calls for this
    /// source (`source`, the host's id for it) arrive on; the plugin's own
    /// runtime serves them (`wf_plugin_api::lane`). Answered `null`; an older
    /// plugin answers `unsupported` and the child host serves the socket.
    CallLane {
        /// The socket's descriptor.
        fd: i32,
        /// The host's id of this source on the lane.
        source: u64,
    },
    /// Since 1.7: the host watches descriptors for this source in its own
    /// reactor (`wf_plugin_api::io_watch`). Answered with the next
    /// descriptor the source offers (`WatchOffer`: a duplicate the host then
    /// owns), when there is one; a host keeps one outstanding. A source that
    /// offers none answers `unsupported`, as does an older plugin.
    NextWatch,
    /// Since 1.7: watch `watch` is readable: the source reads it now, on the
    /// caller's thread. Answered with a `Readiness` (`drained`, `more`,
    /// `closed`).
    Readable {
        /// The id from the `WatchOffer`.
        watch: u64,
    },
    /// Since 1.2: what an operation this plugin predates decodes to (any
    /// `op` not listed above). A host never sends it; the export glue answers
    /// it `unsupported`, so the host falls back.
    #[serde(other)]
    Unknown,
}

impl SourceRequest {
    /// The `op` a request names, as sent (for an [`SourceRequest::Unknown`]
    /// answer that says which operation was not understood).
    pub fn op_name(request_json: &str) -> Option<String> {
        #[derive(Deserialize)]
        struct Op {
            op: String,
        }
        serde_json::from_str::<Op>(request_json).ok().map(|o| o.op)
    }
    /// The watch of a `readable` request as a host writes it
    /// (`{"op":"readable","watch":N}`), read without serde: it comes with
    /// every reply an upstream writes. Any other text is `None`, and takes
    /// [`SourceRequest::parse`].
    pub(crate) fn readable_watch(text: &str) -> Option<u64> {
        let digits = text
            .strip_prefix(r#"{"op":"readable","watch":"#)?
            .strip_suffix('}')?;
        if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }
    /// Parses a request. The two per-call operations (`call_tool`,
    /// `run_node`) take a direct path: serde reads an internally tagged enum
    /// by first copying the whole request, arguments included, into a
    /// buffer, which cost more than a small call's own work. Anything else,
    /// and any malformed call, takes the general path and its error.
    pub(crate) fn parse(text: &str) -> serde_json::Result<Self> {
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case")]
        enum Op {
            CallTool,
            RunNode,
        }
        #[derive(Deserialize)]
        struct Call {
            op: Op,
            name: String,
            #[serde(default)]
            arguments: Value,
            #[serde(default)]
            input: Value,
        }
        match serde_json::from_str::<Call>(text) {
            Ok(Call {
                op: Op::CallTool,
                name,
                arguments,
                ..
            }) => Ok(Self::CallTool { name, arguments }),
            Ok(Call {
                op: Op::RunNode,
                name,
                input,
                ..
            }) => Ok(Self::RunNode { name, input }),
            Err(_) => serde_json::from_str(text),
        }
    }
}

/// Since 1.1: which session a call must run on. Sent in the call's info as
/// `{"scope": {...}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallScope {
    /// Run on this lease's session instead of the shared one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// Fail with [`crate::ErrorCode::StateLost`] unless the session is still
    /// the one with this epoch (it did not reconnect meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_epoch: Option<u64>,
}

/// Since 1.1: a session a source's calls run on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// Increases each time the session is (re)opened.
    pub epoch: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The lease id, for a run-scoped session.
    pub lease: Option<String>,
}

/// Since 1.2: the `_meta` key of a [`CallResult`] under which a source with
/// sessions may report the epoch of the session the call ran on. The host
/// takes it out and tells a proxy client whose session restarted since its
/// previous call (the key is back, with the new epoch, in that result).
pub const SESSION_EPOCH_META: &str = "wf/sessionEpoch";

/// Something a plugin tells the host outside of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The source's capabilities changed; the host should refresh its catalog.
    CapabilitiesChanged {
        /// The source whose capabilities changed.
        source: String,
    },
    /// Since 1.2: a resource the host subscribed to ([`SourceRequest::Subscribe`])
    /// changed; the host tells the clients subscribed to it.
    ResourceUpdated {
        /// The source it belongs to.
        source: String,
        /// The resource's URI within the source.
        uri: String,
        /// The lease whose session reported it (a per-client or per-principal
        /// session the host subscribed on); none: the shared session.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease: Option<String>,
    },
    /// Free-form status change (e.g. an upstream reconnected).
    Status {
        /// The source it concerns.
        source: String,
        #[serde(default)]
        /// What changed (free-form JSON).
        detail: Value,
    },
    /// Since 1.2: a call asks whoever made it ([`crate::CallContext::ask`]):
    /// the host routes `request` to the call's caller and answers with
    /// [`SourceRequest::CallerAnswer`] carrying `ask`. Sent by the export glue.
    AskCaller {
        /// The call's id (the `call` key of its info JSON).
        call: u64,
        /// This request's id, unique within the plugin.
        ask: u64,
        /// What is asked.
        request: crate::CallerRequest,
    },
    /// Since 1.2: a log message for MCP clients that belongs to no call (e.g.
    /// an upstream's `notifications/message` while nothing was in flight).
    /// The host sends it to each client whose log level lets it through.
    Log {
        /// The source it comes from (named as the logger).
        source: String,
        /// MCP level (debug … emergency).
        level: String,
        /// Sub-logger within the source.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        logger: Option<String>,
        /// Any JSON.
        #[serde(default)]
        data: Value,
    },
    /// Since 1.2: a span the plugin measured within a traced call (see
    /// [`crate::trace`]); the host exports it. Hosts without tracing ignore it.
    Span {
        /// The source it comes from.
        source: String,
        /// The span, with its own and its parent's ids.
        span: crate::trace::ReportedSpan,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_this_build_predates_decodes_to_unknown() {
        let r: SourceRequest =
            serde_json::from_str(r#"{"op":"subscribe_resource","uri":"x://y"}"#).unwrap();
        assert_eq!(r, SourceRequest::Unknown);
        assert_eq!(
            SourceRequest::op_name(r#"{"op":"subscribe_resource","uri":"x://y"}"#).as_deref(),
            Some("subscribe_resource")
        );
    }

    /// The host's `readable` is read without serde exactly when serde
    /// would read the same watch from it; any other shape takes the general
    /// parse (and its answer or error).
    #[test]
    fn the_direct_read_of_readable_agrees_with_the_general_one() {
        for watch in [0u64, 7, 123_456, u64::MAX] {
            let text = format!(r#"{{"op":"readable","watch":{watch}}}"#);
            assert_eq!(SourceRequest::readable_watch(&text), Some(watch));
            assert_eq!(
                SourceRequest::parse(&text).unwrap(),
                SourceRequest::Readable { watch }
            );
        }
        for other in [
            r#"{"watch":7,"op":"readable"}"#,
            r#"{"op":"readable", "watch":7}"#,
            r#"{"op":"readable","watch":-7}"#,
            r#"{"op":"readable","watch":}"#,
            r#"{"op":"readable","watch":7.5}"#,
            r#"{"op":"readable","watch":99999999999999999999}"#,
            r#"{"op":"readable","watch":7}x"#,
            r#"{"op":"next_watch"}"#,
        ] {
            assert_eq!(SourceRequest::readable_watch(other), None, "{other}");
        }
    }

    #[test]
    fn the_direct_parse_of_calls_agrees_with_the_general_one() {
        let texts = [
            r#"{"op":"call_tool","name":"echo","arguments":{"text":"hi","n":[1,2]}}"#,
            r#"{"op":"call_tool","name":"echo"}"#,
            r#"{"arguments":{"a":1},"name":"echo","op":"call_tool"}"#,
            r#"{"op":"call_tool","name":"echo","arguments":{},"extra":true}"#,
            r#"{"op":"run_node","name":"passthrough","input":{"value":0}}"#,
            r#"{"op":"run_node","name":"passthrough"}"#,
            r#"{"op":"get_prompt","name":"p","arguments":{"x":"y"}}"#,
            r#"{"op":"read_resource","uri":"x://y"}"#,
            r#"{"op":"catalog"}"#,
            r#"{"op":"subscribe_resource","uri":"x://y"}"#,
        ];
        for text in texts {
            let general: SourceRequest = serde_json::from_str(text).unwrap();
            assert_eq!(SourceRequest::parse(text).unwrap(), general, "{text}");
        }
        for bad in [
            r#"{"op":"call_tool"}"#,
            r#"{"op":"call_tool","name":7}"#,
            r#"{"op":"run_node","name":"n","input":{"#,
            "[]",
        ] {
            assert!(SourceRequest::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_known_operation_with_bad_fields_is_still_an_error() {
        // Not `Unknown`: the caller sent a malformed request, not a new one.
        assert!(serde_json::from_str::<SourceRequest>(r#"{"op":"call_tool"}"#).is_err());
        assert!(
            serde_json::from_str::<SourceRequest>(r#"{"op":"close_lease","lease":3}"#).is_err()
        );
        assert!(serde_json::from_str::<SourceRequest>(r#"{"name":"x"}"#).is_err());
    }

    #[test]
    fn known_operations_round_trip() {
        for r in [
            SourceRequest::Catalog,
            SourceRequest::CallTool {
                name: "t".into(),
                arguments: json!({"a": 1}),
            },
            SourceRequest::OpenSession { lease: None },
            SourceRequest::OpenLease,
            SourceRequest::CloseLease { lease: "l".into() },
            SourceRequest::Subscribe {
                uri: "x://y".into(),
            },
            SourceRequest::Unsubscribe {
                uri: "x://y".into(),
            },
            SourceRequest::RootsListChanged,
            SourceRequest::Complete(crate::forwarding::CompleteParams {
                reference: crate::forwarding::CompletionRef::Prompt { name: "p".into() },
                argument: crate::forwarding::CompletionArgument {
                    name: "a".into(),
                    value: "b".into(),
                },
                context: None,
            }),
        ] {
            let text = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<SourceRequest>(&text).unwrap(), r);
        }
    }
}
