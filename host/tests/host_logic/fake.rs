//! A small source plugin for the tests (kind `fake`): nodes that echo, wait,
//! fail, fail a few times, lose their state or never finish, and a journal
//! of when each call started and ended.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use wf_plugin_api::prelude::*;

/// `(source, "start:<label>" | "end:<label>")`, in the order they happened.
static JOURNAL: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// Calls of `flaky` so far, per source.
static FLAKY: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);

/// What the journal says about `source`.
pub fn journal(source: &str) -> Vec<String> {
    JOURNAL
        .lock()
        .unwrap()
        .iter()
        .filter(|(s, _)| s == source)
        .map(|(_, e)| e.clone())
        .collect()
}

fn note(source: &str, event: String) {
    JOURNAL.lock().unwrap().push((source.to_string(), event));
}

pub struct FakePlugin;

impl Plugin for FakePlugin {
    type Source = FakeSource;

    fn manifest() -> Manifest {
        Manifest::new("fake", "0.0.1").kind("fake")
    }

    fn new(_host: Host) -> Result<Self, PluginError> {
        Ok(Self)
    }

    fn create_source(&self, spec: SourceSpec) -> Result<FakeSource, PluginError> {
        if spec.config.get("refuse").is_some() {
            return Err(PluginError::invalid_config("refused on request"));
        }
        Ok(FakeSource { name: spec.name })
    }
}

pub struct FakeSource {
    name: String,
}

fn input() -> Value {
    json!({"type": "object", "properties": {
        "label": {"type": "string"},
        "delay_ms": {"type": "integer"},
        "fails": {"type": "integer"},
        "value": {}
    }})
}

fn output() -> Value {
    json!({"type": "object", "properties": {"label": {"type": "string"}, "value": {}}})
}

impl Source for FakeSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        let node = |name: &str| NodeSpec::new(name, format!("fake {name}"), input(), output());
        Ok(Catalog::default()
            .node(node("echo"))
            .node(node("step").stateful(true))
            .node(node("fail"))
            .node(node("flaky"))
            .node(node("lost"))
            .node(node("hang")))
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<CallResult, PluginError> {
        Ok(CallResult::structured(
            self.run_node(name, arguments, ctx).await?,
        ))
    }

    async fn run_node(
        &self,
        name: &str,
        input: Value,
        _ctx: CallContext,
    ) -> Result<Value, PluginError> {
        let label = input
            .get("label")
            .and_then(Value::as_str)
            .unwrap_or(name)
            .to_string();
        note(&self.name, format!("start:{label}"));
        let delay = input.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let result = match name {
            "echo" | "step" => Ok(json!({"label": label, "value": input.get("value")})),
            "fail" => Err(PluginError::new(
                ErrorCode::Failed,
                format!("{label} failed"),
            )),
            "lost" => Err(PluginError::new(
                ErrorCode::StateLost,
                "the session was lost",
            )),
            "flaky" => {
                let fails = input.get("fails").and_then(Value::as_u64).unwrap_or(0);
                let mut calls = FLAKY.lock().unwrap();
                let n = calls
                    .get_or_insert_with(HashMap::new)
                    .entry(self.name.clone())
                    .or_default();
                *n += 1;
                if *n <= fails {
                    Err(PluginError::new(
                        ErrorCode::Failed,
                        format!("attempt {n} failed"),
                    ))
                } else {
                    Ok(json!({"label": label, "value": *n}))
                }
            }
            "hang" => {
                std::future::pending::<()>().await;
                unreachable!()
            }
            other => Err(PluginError::not_found(format!("no node {other}"))),
        };
        note(&self.name, format!("end:{label}"));
        result
    }
}
