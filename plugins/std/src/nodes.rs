//! The `wf.std` nodes. [`Node::spec`] is the single definition of each node's
//! description and schemas: the catalog, the argument check and the markdown
//! reference are all derived from it.

use std::sync::LazyLock;
use std::time::Duration;

use wf_plugin_api::prelude::*;

use crate::args::{Args, wrong_type};
use crate::template;

/// The longest `sleep`: one hour.
const MAX_SLEEP_MS: u64 = 3_600_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Node {
    RuntimeError,
    Passthrough,
    Const,
    Template,
    JsonGet,
    Merge,
    Assert,
    Sleep,
}

impl Node {
    pub(crate) const ALL: [Node; 8] = [
        Node::RuntimeError,
        Node::Passthrough,
        Node::Const,
        Node::Template,
        Node::JsonGet,
        Node::Merge,
        Node::Assert,
        Node::Sleep,
    ];

    /// The node's input schema, built once: a call checks its arguments
    /// against it, and building the whole spec per call cost more than the
    /// node's work.
    fn input_schema(self) -> &'static Value {
        static SCHEMAS: LazyLock<[Value; Node::ALL.len()]> =
            LazyLock::new(|| Node::ALL.map(|node| node.spec().input_schema));
        let i = Node::ALL.iter().position(|n| *n == self);
        &SCHEMAS[i.expect("every node is in Node::ALL")]
    }

    pub(crate) fn named(name: &str) -> Option<Node> {
        Self::ALL.into_iter().find(|node| node.name() == name)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Node::RuntimeError => "runtime_error",
            Node::Passthrough => "passthrough",
            Node::Const => "const",
            Node::Template => "template",
            Node::JsonGet => "json_get",
            Node::Merge => "merge",
            Node::Assert => "assert",
            Node::Sleep => "sleep",
        }
    }

    /// One line for listings; the spec's description starts with it.
    pub(crate) fn summary(self) -> &'static str {
        match self {
            Node::RuntimeError => "Fails with an application error.",
            Node::Passthrough => "Returns its input value unchanged.",
            Node::Const => "Produces a literal value.",
            Node::Template => "Renders a text template with `{{path}}` placeholders.",
            Node::JsonGet => "Selects a value inside JSON with a JSON Pointer.",
            Node::Merge => "Merges a list of objects into one.",
            Node::Assert => "Fails unless a condition holds.",
            Node::Sleep => "Waits for a number of milliseconds.",
        }
    }

    pub(crate) fn spec(self) -> NodeSpec {
        let (details, input, output) = match self {
            Node::RuntimeError => (
                "Always fails, with the message `<code>: <message>` and the error data \
                 `{\"code\": <code>}`: use it to stop a workflow with a clear, machine-readable \
                 error when it detects a condition it cannot handle.",
                object(
                    json!({
                        "code": {"type": "string", "description": "Application error code, e.g. `not_found`."},
                        "message": {"type": "string", "description": "Human-readable explanation of the failure."},
                    }),
                    &["code", "message"],
                ),
                json!({
                    "type": "object",
                    "description": "Never produced: this node always fails.",
                    "properties": {},
                    "additionalProperties": false,
                }),
            ),
            Node::Passthrough => (
                "Use it to forward, rename or group values that come from references, or as a \
                 single step that later nodes can depend on.",
                object(
                    json!({"value": {"description": "Any JSON value."}}),
                    &["value"],
                ),
                object(
                    json!({"value": {"description": "The input `value`, unchanged."}}),
                    &["value"],
                ),
            ),
            Node::Const => (
                "Behaves like `passthrough`, but states a different intent: `value` is a literal \
                 written in the workflow (a number, a string, a configuration object) that other \
                 nodes refer to by this node's id. Use `passthrough` to forward values that come \
                 from references.",
                object(
                    json!({"value": {"description": "The literal JSON value."}}),
                    &["value"],
                ),
                object(
                    json!({"value": {"description": "The literal `value`, unchanged."}}),
                    &["value"],
                ),
            ),
            Node::Template => (
                "Each `{{path}}` in `template` is replaced by the value at `path` in `values`. A \
                 path is a dot-separated list of object keys; a number selects an array element \
                 (`{{user.name}}`, `{{items.0}}`). Whitespace inside the braces is ignored. \
                 Strings are inserted as they are, other values as compact JSON. A path that is \
                 not in `values`, an empty `{{}}` or a `{{` without `}}` fails the node. There is \
                 no escape for a literal `{{`.",
                object(
                    json!({
                        "template": {"type": "string", "description": "Text with `{{path}}` placeholders."},
                        "values": {"type": "object", "description": "The values the placeholders' paths point into."},
                    }),
                    &["template", "values"],
                ),
                object(
                    json!({"text": {"type": "string", "description": "The rendered text."}}),
                    &["text"],
                ),
            ),
            Node::JsonGet => (
                "`pointer` is an RFC 6901 JSON Pointer: `\"\"` is the whole value, `/items/0/name` \
                 walks object keys and array indexes, and `~1` and `~0` stand for `/` and `~` \
                 inside a key. When nothing is at `pointer` the node fails, unless `default` is \
                 given: then it returns `default` with `found: false`.",
                object(
                    json!({
                        "value": {"description": "The JSON value to select from."},
                        "pointer": {"type": "string", "description": "RFC 6901 JSON Pointer, e.g. `/items/0/name`."},
                        "default": {"description": "Returned (with `found: false`) when nothing is at `pointer`."},
                    }),
                    &["value", "pointer"],
                ),
                object(
                    json!({
                        "value": {"description": "The selected value, or `default`."},
                        "found": {"type": "boolean", "description": "Whether `pointer` matched a value."},
                    }),
                    &["value", "found"],
                ),
            ),
            Node::Merge => (
                "Keys of later objects win. With `deep: true`, a key that holds an object on both \
                 sides is merged recursively instead of replaced; arrays and other values are \
                 always replaced. An empty list gives `{}`.",
                object(
                    json!({
                        "objects": {
                            "type": "array",
                            "items": {"type": "object"},
                            "description": "The objects to merge, in order.",
                        },
                        "deep": {
                            "type": "boolean",
                            "default": false,
                            "description": "Merge nested objects recursively (default false).",
                        },
                    }),
                    &["objects"],
                ),
                object(
                    json!({"value": {"type": "object", "description": "The merged object."}}),
                    &["value"],
                ),
            ),
            Node::Assert => (
                "When `condition` is false the node fails with `message`; otherwise it returns \
                 `{\"ok\": true}`. Use it to check assumptions about earlier results before \
                 acting on them.",
                object(
                    json!({
                        "condition": {"type": "boolean", "description": "The condition that must hold."},
                        "message": {
                            "type": "string",
                            "default": "assertion failed",
                            "description": "The failure message when `condition` is false.",
                        },
                    }),
                    &["condition"],
                ),
                object(
                    json!({"ok": {"type": "boolean", "const": true, "description": "Always true."}}),
                    &["ok"],
                ),
            ),
            Node::Sleep => (
                "`ms` is at most 3600000 (one hour); the output says how long it slept. Reports \
                 progress when it starts and when it ends, and stops at once when the call is \
                 cancelled.",
                object(
                    json!({
                        "ms": {
                            "type": "integer",
                            "minimum": 0,
                            "maximum": MAX_SLEEP_MS,
                            "description": "How long to wait, in milliseconds.",
                        },
                    }),
                    &["ms"],
                ),
                object(
                    json!({"slept_ms": {"type": "integer", "description": "How long the node waited, in milliseconds."}}),
                    &["slept_ms"],
                ),
            ),
        };
        NodeSpec::new(
            self.name(),
            format!("{} {details}", self.summary()),
            input,
            output,
        )
        .side_effects(false)
        .stateful(false)
    }

    /// Runs the node. Failures of the node itself have code `failed`; bad
    /// arguments `invalid_arguments`.
    pub(crate) async fn run(self, input: &Value, ctx: &CallContext) -> Result<Value, PluginError> {
        let args = Args::parse(input, self.input_schema())?;
        match self {
            Node::RuntimeError => {
                let code = args.get::<&str>("code")?;
                let message = args.get::<&str>("message")?;
                Err(PluginError::failed(format!("{code}: {message}"))
                    .with_data(json!({"code": code})))
            }
            Node::Passthrough | Node::Const => Ok(json!({"value": args.get::<&Value>("value")?})),
            Node::Template => {
                let template = args.get::<&str>("template")?;
                let text = template::render(
                    template,
                    &Value::Object(args.get::<&Map<String, Value>>("values")?.clone()),
                )
                .map_err(PluginError::failed)?;
                Ok(json!({"text": text}))
            }
            Node::JsonGet => json_get(&args),
            Node::Merge => merge(&args),
            Node::Assert => {
                // Checked even when the condition holds, so a bad message is found early.
                let message = args.opt::<&str>("message")?.unwrap_or("assertion failed");
                if args.get::<bool>("condition")? {
                    Ok(json!({"ok": true}))
                } else {
                    Err(PluginError::failed(message))
                }
            }
            Node::Sleep => sleep(args.get::<u64>("ms")?, ctx).await,
        }
    }
}

/// A closed object schema: exactly `properties`, of which `required` must be present.
fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn json_get(args: &Args<'_>) -> Result<Value, PluginError> {
    let value = args.get::<&Value>("value")?;
    let pointer = args.get::<&str>("pointer")?;
    // serde_json answers "not found" for a malformed pointer too; tell the two apart.
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(PluginError::invalid_arguments(format!(
            "argument `pointer` must be empty or start with `/`, got `{pointer}`"
        )));
    }
    match (value.pointer(pointer), args.map().get("default")) {
        (Some(found), _) => Ok(json!({"value": found, "found": true})),
        (None, Some(default)) => Ok(json!({"value": default, "found": false})),
        (None, None) => Err(PluginError::failed(format!(
            "nothing at pointer `{pointer}`"
        ))),
    }
}

fn merge(args: &Args<'_>) -> Result<Value, PluginError> {
    let deep = args.opt::<bool>("deep")?.unwrap_or(false);
    let mut merged = Map::new();
    for (i, item) in args.get::<&[Value]>("objects")?.iter().enumerate() {
        let object = item
            .as_object()
            .ok_or_else(|| wrong_type(&format!("objects[{i}]"), "an object", item))?;
        merge_into(&mut merged, object, deep);
    }
    Ok(json!({"value": merged}))
}

fn merge_into(target: &mut Map<String, Value>, source: &Map<String, Value>, deep: bool) {
    for (key, value) in source {
        match (target.get_mut(key), value) {
            (Some(Value::Object(inner)), Value::Object(nested)) if deep => {
                merge_into(inner, nested, true)
            }
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

async fn sleep(ms: u64, ctx: &CallContext) -> Result<Value, PluginError> {
    if ms > MAX_SLEEP_MS {
        return Err(PluginError::invalid_arguments(format!(
            "argument `ms` must be at most {MAX_SLEEP_MS}, got {ms}"
        )));
    }
    let total = ms as f64;
    ctx.progress(0.0, Some(total), Some("sleeping"));
    // The ABI adapter also drops this future on cancellation; selecting on it
    // here makes the early return explicit rather than an accident of the caller.
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(ms)) => {}
        () = ctx.cancelled() => return Err(PluginError::cancelled()),
    }
    ctx.progress(total, Some(total), Some("done"));
    Ok(json!({"slept_ms": ms}))
}
