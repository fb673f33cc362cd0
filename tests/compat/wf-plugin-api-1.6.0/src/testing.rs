//! Runs a plugin in-process through the real ABI objects, without the host:
//! the same root module, `#[sabi_trait]` vtables, JSON encoding, plugin
//! runtime and panic catching that a loaded library goes through.
//!
//! ```ignore
//! let h = wf_plugin_api::testing::Harness::start::<MyPlugin>()?;
//! let src = h.source("notes", "notes", serde_json::json!({}))?;
//! let result = src.call_tool("add", serde_json::json!({"text": "hi"})).await?;
//! ```

use std::future::Future as _;
use std::path::PathBuf;
use std::sync::PoisonError;
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
    /// Log lines: (level 1 error … 5 trace, target, message).
    pub logs: Vec<(u8, String, String)>,
    /// Events the plugin emitted, as JSON.
    pub events: Vec<Value>,
    /// Progress reports: (progress, total, message).
    pub progress: Vec<(f64, Option<f64>, Option<String>)>,
    /// Since 1.2: what the plugin asked its caller (JSON `CallerRequest`s).
    pub asked: Vec<Value>,
    /// Since 1.2: the caller's answers, taken in order; when none is left the
    /// caller answers `unsupported` (as a client without the capability does).
    pub answers: std::collections::VecDeque<Result<Value, PluginError>>,
    /// Requests whose future held the polling thread longer than
    /// [`BLOCKING_WARN`] in one poll: (the request's `op`, the longest poll).
    /// Each one is also printed as a warning.
    pub blocked: Vec<(String, std::time::Duration)>,
}

/// One poll of a request's future that runs longer than this blocks a
/// runtime worker: the harness records it ([`Recorded::blocked`]) and
/// warns. Move such work into [`crate::blocking`].
pub const BLOCKING_WARN: std::time::Duration = std::time::Duration::from_millis(100);

#[derive(Clone)]
struct TestHost(Arc<Mutex<Recorded>>);

impl HostContextFfi for TestHost {
    fn log(&self, level: u8, target: RStr<'_>, message: RStr<'_>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .logs
            .push((level, target.to_string(), message.to_string()));
    }
    fn emit(&self, event_json: RString) {
        let v = serde_json::from_str(event_json.as_str()).unwrap_or(Value::Null);
        if let Ok(Event::AskCaller { ask, request, .. }) = serde_json::from_value(v.clone()) {
            // The test caller: the next queued answer, else `unsupported`.
            let answer = {
                let mut r = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                r.asked
                    .push(serde_json::to_value(&request).unwrap_or(Value::Null));
                r.answers.pop_front()
            };
            let answer = answer
                .unwrap_or_else(|| Err(PluginError::unsupported("the test caller has no answer")));
            crate::asks::complete_ask(ask, answer);
            return;
        }
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .push(v);
    }
}

struct TestCall(Arc<Mutex<Recorded>>);

impl CallContextFfi for TestCall {
    fn progress(&self, progress: f64, total: ROption<f64>, message: ROption<RString>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .progress
            .push((
                progress,
                total.into_option(),
                message.into_option().map(Into::into),
            ));
    }
    fn info(&self) -> RString {
        // A call id makes `CallContext::ask` route to the test host's answers.
        RString::from(r#"{"call": 1}"#)
    }
}

/// An instantiated plugin, driven through its ABI objects.
pub struct Harness {
    /// The plugin's manifest.
    pub manifest: Manifest,
    plugin: PluginBox,
    /// What the test host recorded.
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

    /// Creates a source with `data_dir` as its data directory.
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
        let op = SourceRequest::op_name(&text).unwrap_or_default();
        // Each poll timed: in a host, a poll this long holds one of the
        // plugin runtime's few workers, and the plugin's other calls wait.
        let mut inner = self.source.request(RString::from(text), ctx);
        let mut longest = std::time::Duration::ZERO;
        let reply = std::future::poll_fn(|cx| {
            let at = std::time::Instant::now();
            let r = std::pin::Pin::new(&mut inner).poll(cx);
            longest = longest.max(at.elapsed());
            r
        })
        .await;
        if longest > BLOCKING_WARN {
            eprintln!(
                "warning: wf_plugin_api::testing: request {op:?} blocked its thread for {} ms in one poll (over {} ms): a plugin's calls wait for it; run blocking work with wf_plugin_api::blocking",
                longest.as_millis(),
                BLOCKING_WARN.as_millis()
            );
            self.recorded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .blocked
                .push((op, longest));
        }
        match reply.into_result() {
            Ok(v) => {
                serde_json::from_str(v.as_str()).map_err(|e| PluginError::internal(e.to_string()))
            }
            Err(e) => Err(PluginError::from_json(e.as_str())),
        }
    }
    /// Discovery: the source's catalog.
    pub async fn catalog(&self) -> Result<Catalog, PluginError> {
        self.request(&SourceRequest::Catalog).await
    }
    /// Calls a tool.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallResult, PluginError> {
        self.request(&SourceRequest::CallTool {
            name: name.into(),
            arguments,
        })
        .await
    }
    /// Runs a workflow node.
    pub async fn run_node(&self, name: &str, input: Value) -> Result<Value, PluginError> {
        self.request(&SourceRequest::RunNode {
            name: name.into(),
            input,
        })
        .await
    }
    /// Reads a resource.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, PluginError> {
        self.request(&SourceRequest::ReadResource { uri: uri.into() })
            .await
    }
    /// Renders a prompt.
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
    /// Shuts the source down.
    pub async fn shutdown(&self) {
        self.source.shutdown().await
    }
    /// Since 1.2: queues the caller's next answer to `CallContext::ask`.
    pub fn answer_caller(&self, answer: Result<Value, PluginError>) {
        self.recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .answers
            .push_back(answer);
    }
    /// Since 1.2: what the plugin asked its caller so far.
    pub fn asked(&self) -> Vec<Value> {
        self.recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .asked
            .clone()
    }
    /// The progress reports recorded so far.
    pub fn progress(&self) -> Vec<(f64, Option<f64>, Option<String>)> {
        self.recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .progress
            .clone()
    }
}

pub use crate::schema::json_schema_problems;

/// The host's checks of a catalog ([`crate::schema::capability_problems`]):
/// every schema is valid JSON Schema ([`json_schema_problems`]), input schemas
/// (and tool output schemas) are object schemas, names are valid and unique.
/// One line per bad capability; empty when the host will serve it all.
pub fn schema_problems(catalog: &Catalog) -> Vec<String> {
    crate::schema::capability_problems(catalog)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// How a settings reference page and a settings schema disagree, so a
/// plugin's documentation cannot drift from what it accepts.
///
/// `page` is Markdown; the section under the level-2 heading `heading`
/// (up to the next one) holds tables whose first column names each setting
/// in backticks, nested ones dotted (`auth.oauth.client_id`). Every property
/// of `settings_schema`, at any depth of `properties`, must have a row, and
/// every row must name a property. One line per difference; empty when
/// they agree.
///
/// ```
/// let schema = serde_json::json!({"type": "object", "properties": {
///     "url": {"type": "string"},
///     "auth": {"type": "object", "properties": {"token": {"type": "string"}}}}});
/// let page = "## `kind = \"x\"`\n\n| key | meaning |\n|---|---|\n| `url` | where |\n| `auth` | how |\n| `auth.token` | a secret |\n";
/// assert!(wf_plugin_api::testing::settings_reference_problems(&schema, page, "`kind = \"x\"`").is_empty());
/// ```
pub fn settings_reference_problems(
    settings_schema: &Value,
    page: &str,
    heading: &str,
) -> Vec<String> {
    let wanted = format!("## {heading}");
    let Some(start) = page.lines().position(|l| l.trim_end() == wanted) else {
        return vec![format!("no section {wanted:?} on the page")];
    };
    let documented: std::collections::BTreeSet<String> = page
        .lines()
        .skip(start + 1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| {
            let first = l.strip_prefix('|')?.split('|').next()?.trim();
            let key = first.strip_prefix('`')?.strip_suffix('`')?;
            Some(key.to_string())
        })
        .collect();
    let mut declared = std::collections::BTreeSet::new();
    fn walk(schema: &Value, prefix: &str, out: &mut std::collections::BTreeSet<String>) {
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (key, sub) in props {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                walk(sub, &path, out);
                out.insert(path);
            }
        }
    }
    walk(settings_schema, "", &mut declared);
    let mut problems: Vec<String> = declared
        .difference(&documented)
        .map(|k| format!("setting `{k}` has no row under {wanted:?}"))
        .collect();
    problems.extend(
        documented
            .difference(&declared)
            .map(|k| format!("row `{k}` under {wanted:?} names no setting")),
    );
    problems
}
