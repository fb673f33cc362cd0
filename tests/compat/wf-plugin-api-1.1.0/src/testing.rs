//! Runs a plugin in-process through the real ABI objects, without the host:
//! the same root module, `#[sabi_trait]` vtables, JSON encoding, plugin
//! runtime and panic catching that a loaded library goes through.
//!
//! ```ignore
//! let h = wf_plugin_api::testing::Harness::start::<MyPlugin>()?;
//! let src = h.source("notes", "notes", serde_json::json!({}))?;
//! let result = src.call_tool("add", serde_json::json!({"text": "hi"})).await?;
//! ```

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RStr, RString};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::author::Plugin;
use crate::error::PluginError;
use crate::ffi::*;
use crate::types::*;

/// What the test host recorded: log lines, events and progress reports.
#[derive(Default, Debug)]
pub struct Recorded {
    pub logs: Vec<(u8, String, String)>,
    pub events: Vec<Value>,
    pub progress: Vec<(f64, Option<f64>, Option<String>)>,
}

#[derive(Clone)]
struct TestHost(Arc<Mutex<Recorded>>);

impl HostContextFfi for TestHost {
    fn log(&self, level: u8, target: RStr<'_>, message: RStr<'_>) {
        self.0
            .lock()
            .unwrap()
            .logs
            .push((level, target.to_string(), message.to_string()));
    }
    fn emit(&self, event_json: RString) {
        let v = serde_json::from_str(event_json.as_str()).unwrap_or(Value::Null);
        self.0.lock().unwrap().events.push(v);
    }
}

struct TestCall(Arc<Mutex<Recorded>>);

impl CallContextFfi for TestCall {
    fn progress(&self, progress: f64, total: ROption<f64>, message: ROption<RString>) {
        self.0.lock().unwrap().progress.push((
            progress,
            total.into_option(),
            message.into_option().map(Into::into),
        ));
    }
    fn info(&self) -> RString {
        RString::from("{}")
    }
}

/// An instantiated plugin, driven through its ABI objects.
pub struct Harness {
    pub manifest: Manifest,
    plugin: PluginBox,
    pub recorded: Arc<Mutex<Recorded>>,
}

impl Harness {
    /// Instantiates plugin `P` through its exported root module.
    pub fn start<P: Plugin>() -> Result<Self, PluginError> {
        let module = crate::export::module::<P>();
        let manifest: Manifest = serde_json::from_str((module.manifest())().as_str())?;
        let recorded = Arc::new(Mutex::new(Recorded::default()));
        let host: HostContextBox = HostContextFfi_TO::from_ptr(
            abi_stable::std_types::RArc::new(TestHost(recorded.clone())),
            TD_Opaque,
        );
        let init = json!({"host_version": "test", "log_level": "debug"}).to_string();
        let plugin = (module.instantiate())(host, RString::from(init))
            .into_result()
            .map_err(|e| PluginError::from_json(e.as_str()))?;
        Ok(Self {
            manifest,
            plugin,
            recorded,
        })
    }

    /// Creates a source with a fresh temporary data directory.
    pub fn source(&self, name: &str, kind: &str, config: Value) -> Result<TestSource, PluginError> {
        // Unique per source created, so parallel tests never share files.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let data_dir =
            std::env::temp_dir().join(format!("wf-harness-{}-{n}-{name}", std::process::id()));
        std::fs::create_dir_all(&data_dir).map_err(|e| PluginError::internal(e.to_string()))?;
        self.source_in(name, kind, config, data_dir)
    }

    pub fn source_in(
        &self,
        name: &str,
        kind: &str,
        config: Value,
        data_dir: PathBuf,
    ) -> Result<TestSource, PluginError> {
        let spec = SourceSpec {
            name: name.into(),
            kind: kind.into(),
            config,
            data_dir,
        };
        let source = self
            .plugin
            .create_source(RString::from(serde_json::to_string(&spec)?))
            .into_result()
            .map_err(|e| PluginError::from_json(e.as_str()))?;
        Ok(TestSource {
            source,
            recorded: self.recorded.clone(),
        })
    }
}

/// A source created through the ABI.
pub struct TestSource {
    source: SourceBox,
    recorded: Arc<Mutex<Recorded>>,
}

impl TestSource {
    /// Sends one raw request and decodes its result.
    pub async fn request<T: DeserializeOwned>(
        &self,
        request: &SourceRequest,
    ) -> Result<T, PluginError> {
        let ctx = CallContextFfi_TO::from_value(TestCall(self.recorded.clone()), TD_Opaque);
        let text = serde_json::to_string(request)?;
        match self
            .source
            .request(RString::from(text), ctx)
            .await
            .into_result()
        {
            Ok(v) => {
                serde_json::from_str(v.as_str()).map_err(|e| PluginError::internal(e.to_string()))
            }
            Err(e) => Err(PluginError::from_json(e.as_str())),
        }
    }
    pub async fn catalog(&self) -> Result<Catalog, PluginError> {
        self.request(&SourceRequest::Catalog).await
    }
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallResult, PluginError> {
        self.request(&SourceRequest::CallTool {
            name: name.into(),
            arguments,
        })
        .await
    }
    pub async fn run_node(&self, name: &str, input: Value) -> Result<Value, PluginError> {
        self.request(&SourceRequest::RunNode {
            name: name.into(),
            input,
        })
        .await
    }
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, PluginError> {
        self.request(&SourceRequest::ReadResource { uri: uri.into() })
            .await
    }
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<GetPromptResult, PluginError> {
        self.request(&SourceRequest::GetPrompt {
            name: name.into(),
            arguments,
        })
        .await
    }
    pub async fn shutdown(&self) {
        self.source.shutdown().await
    }
    /// The progress reports recorded so far.
    pub fn progress(&self) -> Vec<(f64, Option<f64>, Option<String>)> {
        self.recorded.lock().unwrap().progress.clone()
    }
}

/// The problems of one JSON Schema (draft 2020-12 / draft-07 keyword shapes),
/// checked recursively: `type` names real types, `properties` and `$defs` hold
/// schemas, `required` lists strings naming properties, `items`,
/// `additionalProperties`, `not` and the combinators hold schemas, `enum` is an
/// array, numeric and length bounds are numbers. `at` names the place in messages.
pub fn json_schema_problems(schema: &Value, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    check_schema(schema, at, &mut out);
    out
}

fn check_schema(schema: &Value, at: &str, out: &mut Vec<String>) {
    const TYPES: [&str; 7] = [
        "null", "boolean", "object", "array", "number", "integer", "string",
    ];
    let obj = match schema {
        Value::Bool(_) => return,
        Value::Object(o) => o,
        _ => return out.push(format!("{at}: a schema must be an object or a boolean")),
    };
    match obj.get("type") {
        None => {}
        Some(Value::String(t)) if TYPES.contains(&t.as_str()) => {}
        Some(Value::Array(ts))
            if ts
                .iter()
                .all(|t| t.as_str().is_some_and(|t| TYPES.contains(&t))) => {}
        Some(t) => out.push(format!("{at}.type: {t} is not a JSON Schema type")),
    }
    for key in ["properties", "patternProperties", "$defs", "definitions"] {
        match obj.get(key) {
            None => {}
            Some(Value::Object(m)) => m
                .iter()
                .for_each(|(k, v)| check_schema(v, &format!("{at}.{key}.{k}"), out)),
            Some(_) => out.push(format!("{at}.{key}: must be an object of schemas")),
        }
    }
    let props = obj.get("properties").and_then(Value::as_object);
    match obj.get("required") {
        None => {}
        Some(Value::Array(names)) => {
            for n in names {
                match n.as_str() {
                    None => out.push(format!("{at}.required: {n} is not a string")),
                    Some(name) if props.is_some_and(|p| !p.contains_key(name)) => {
                        out.push(format!("{at}.required: {name:?} is not a property"))
                    }
                    Some(_) => {}
                }
            }
        }
        Some(_) => out.push(format!("{at}.required: must be an array")),
    }
    for key in [
        "items",
        "additionalProperties",
        "not",
        "contains",
        "propertyNames",
        "if",
        "then",
        "else",
        "additionalItems",
        "unevaluatedProperties",
    ] {
        if let Some(v) = obj.get(key) {
            // draft-07 allows `items` to be an array of schemas.
            match (key, v) {
                ("items", Value::Array(list)) => list
                    .iter()
                    .enumerate()
                    .for_each(|(i, s)| check_schema(s, &format!("{at}.items[{i}]"), out)),
                _ => check_schema(v, &format!("{at}.{key}"), out),
            }
        }
    }
    for key in ["allOf", "anyOf", "oneOf", "prefixItems"] {
        match obj.get(key) {
            None => {}
            Some(Value::Array(list)) if !list.is_empty() => list
                .iter()
                .enumerate()
                .for_each(|(i, s)| check_schema(s, &format!("{at}.{key}[{i}]"), out)),
            Some(_) => out.push(format!("{at}.{key}: must be a non-empty array of schemas")),
        }
    }
    if let Some(e) = obj.get("enum")
        && !e.is_array()
    {
        out.push(format!("{at}.enum: must be an array"));
    }
    for key in [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
    ] {
        if let Some(v) = obj.get(key)
            && !v.is_number()
        {
            out.push(format!("{at}.{key}: must be a number"));
        }
    }
}

/// Checks of a catalog: every schema is valid JSON Schema
/// ([`json_schema_problems`]), every input schema is an object schema, names
/// are unique and non-empty. Returns the problems found (empty when all is well).
pub fn schema_problems(catalog: &Catalog) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |what: &str, name: &str, schema: &Value, must_be_object: bool| {
        problems.extend(json_schema_problems(schema, &format!("{what} {name}")));
        if must_be_object && schema.get("type").and_then(Value::as_str) != Some("object") {
            problems.push(format!(
                "{what} {name}: input schema must have \"type\": \"object\""
            ));
        }
    };
    for t in &catalog.tools {
        check("tool", &t.name, &t.input_schema, true);
        if let Some(o) = &t.output_schema {
            check("tool output", &t.name, o, false);
        }
    }
    for n in &catalog.node_specs {
        check("node", &n.name, &n.input_schema, true);
        check("node output", &n.name, &n.output_schema, false);
    }
    let mut seen = std::collections::HashSet::new();
    for t in &catalog.tools {
        if t.name.is_empty() || !seen.insert(t.name.clone()) {
            problems.push(format!("tool name {:?} is empty or duplicated", t.name));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for n in &catalog.node_specs {
        if n.name.is_empty() || !seen.insert(n.name.clone()) {
            problems.push(format!(
                "node spec name {:?} is empty or duplicated",
                n.name
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_schema_shapes() {
        let good = json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}, "b": {"type": "array", "items": {"type": "integer", "minimum": 0}}},
                          "required": ["a"], "additionalProperties": false, "$defs": {"x": {"anyOf": [{"type": "string"}, true]}}});
        assert!(
            json_schema_problems(&good, "s").is_empty(),
            "{:?}",
            json_schema_problems(&good, "s")
        );
        let bad = json!({"type": "object", "properties": {"a": {"type": "text"}, "b": 3}, "required": ["c", 1], "items": "x", "anyOf": [], "minimum": "0"});
        let p = json_schema_problems(&bad, "s");
        for needle in [
            "s.properties.a.type",
            "s.properties.b",
            "\"c\" is not a property",
            "1 is not a string",
            "s.items",
            "s.anyOf",
            "s.minimum",
        ] {
            assert!(
                p.iter().any(|m| m.contains(needle)),
                "missing {needle}: {p:?}"
            );
        }
    }
}
