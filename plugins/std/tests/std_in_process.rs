//! `wf.std` driven through the real plugin ABI (root module, vtables, JSON,
//! plugin runtime), as the host drives it.
#![cfg_attr(test, allow(clippy::unwrap_used))]

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use wf_plugin_api::testing::{Harness, TestSource, schema_problems};
use wf_plugin_api::{ErrorCode, SourceRequest};
use wf_source_std::StdPlugin;

const NODES: [&str; 8] = [
    "runtime_error",
    "passthrough",
    "const",
    "template",
    "json_get",
    "merge",
    "assert",
    "sleep",
];

fn std_source() -> TestSource {
    let harness = Harness::start::<StdPlugin>().expect("plugin starts");
    harness
        .source("wf.std", "std", json!({}))
        .expect("source is created")
}

/// Runs `name` as a tool and as a node; both must succeed with the same output.
async fn succeeds(src: &TestSource, name: &str, args: Value) -> Value {
    let result = src.call_tool(name, args.clone()).await.expect("call_tool");
    assert!(!result.is_error, "{name}: {result:?}");
    let output = src.run_node(name, args).await.expect("run_node");
    assert_eq!(result.structured_content, Some(output.clone()));
    assert_eq!(result.content[0]["text"], output.to_string());
    output
}

/// Runs `name` as a tool and as a node; the tool must report an `isError`
/// result and the node an error of `code`, with the same message (returned).
async fn fails(src: &TestSource, name: &str, args: Value, code: ErrorCode) -> String {
    let result = src.call_tool(name, args.clone()).await.expect("call_tool");
    assert!(result.is_error, "{name}: {result:?}");
    let text = result.content[0]["text"]
        .as_str()
        .expect("text content")
        .to_string();
    let err = src.run_node(name, args).await.expect_err("run_node fails");
    assert_eq!(err.code, code, "{name}: {err:?}");
    assert_eq!(err.message, text);
    text
}

#[test]
fn manifest_declares_the_default_source() {
    let manifest = Harness::start::<StdPlugin>().unwrap().manifest;
    assert_eq!(manifest.name, "wf-source-std");
    assert_eq!(manifest.kinds, ["std"]);
    assert_eq!(manifest.default_sources.len(), 1);
    assert_eq!(manifest.default_sources[0].name, "wf.std");
    assert_eq!(manifest.default_sources[0].kind, "std");
}

#[tokio::test]
async fn catalog_serves_every_node_as_a_tool() {
    let catalog = std_source().catalog().await.unwrap();
    let tools: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_str()).collect();
    let specs: Vec<&str> = catalog.node_specs.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(tools, NODES);
    assert_eq!(specs, NODES);
    assert!(
        schema_problems(&catalog).is_empty(),
        "{:?}",
        schema_problems(&catalog)
    );

    for spec in &catalog.node_specs {
        assert!(!spec.side_effects && !spec.stateful, "{}", spec.name);
        assert_eq!(
            spec.input_schema["additionalProperties"], false,
            "{}",
            spec.name
        );
        for schema in [&spec.input_schema, &spec.output_schema] {
            assert_eq!(schema["type"], "object", "{}", spec.name);
            for (prop, s) in schema["properties"].as_object().unwrap() {
                assert!(
                    s["description"].is_string(),
                    "{}.{prop} has no description",
                    spec.name
                );
            }
        }
        let tool = catalog.tools.iter().find(|t| t.name == spec.name).unwrap();
        assert_eq!(tool.input_schema, spec.input_schema);
        assert_eq!(tool.output_schema.as_ref(), Some(&spec.output_schema));
    }

    assert_eq!(catalog.prompts.len(), 1);
    assert_eq!(catalog.prompts[0].name, "author_workflow");
    assert_eq!(catalog.prompts[0].arguments[0].name, "goal");
    assert_eq!(catalog.prompts[0].arguments[0].required, Some(false));
    assert_eq!(catalog.resources.len(), 1);
    assert_eq!(catalog.resources[0].uri, "wf://std/reference");
    assert_eq!(catalog.resources[0].name, "reference");
    assert_eq!(
        catalog.resources[0].mime_type.as_deref(),
        Some("text/markdown")
    );
}

#[tokio::test]
async fn runtime_error_fails_with_its_code() {
    let src = std_source();
    let args = json!({"code": "E42", "message": "boom"});
    assert_eq!(
        fails(&src, "runtime_error", args.clone(), ErrorCode::Failed).await,
        "E42: boom"
    );
    let err = src.run_node("runtime_error", args).await.unwrap_err();
    assert_eq!(err.data, Some(json!({"code": "E42"})));
}

#[tokio::test]
async fn passthrough_and_const_return_their_value() {
    let src = std_source();
    for value in [json!(null), json!(3), json!("s"), json!([1, {"a": [true]}])] {
        for name in ["passthrough", "const"] {
            let output = succeeds(&src, name, json!({"value": value})).await;
            assert_eq!(output, json!({"value": value}));
        }
    }
}

#[tokio::test]
async fn template_renders_paths() {
    let src = std_source();
    let args = json!({
        "template": "Hi {{ user.name }}, first: {{items.0}}, all: {{items}}, n={{n}}",
        "values": {"user": {"name": "Ada"}, "items": ["a", "b"], "n": 2},
    });
    let output = succeeds(&src, "template", args).await;
    assert_eq!(
        output,
        json!({"text": r#"Hi Ada, first: a, all: ["a","b"], n=2"#})
    );
}

#[tokio::test]
async fn template_fails_on_a_missing_path() {
    let src = std_source();
    let args = json!({"template": "Hi {{user.nmae}}", "values": {"user": {"name": "Ada"}}});
    let message = fails(&src, "template", args, ErrorCode::Failed).await;
    assert_eq!(message, "template path `user.nmae` not found in values");
}

#[tokio::test]
async fn json_get_selects_by_pointer() {
    let src = std_source();
    let value = json!({"items": [{"name": "a"}, {"name": "b"}], "a/b": 1});
    let get = |pointer: &str| json!({"value": value, "pointer": pointer});
    assert_eq!(
        succeeds(&src, "json_get", get("/items/1/name")).await,
        json!({"value": "b", "found": true})
    );
    assert_eq!(
        succeeds(&src, "json_get", get("/a~1b")).await,
        json!({"value": 1, "found": true})
    );
    assert_eq!(
        succeeds(&src, "json_get", get("")).await,
        json!({"value": value, "found": true})
    );

    let with_default = json!({"value": value, "pointer": "/items/5", "default": null});
    assert_eq!(
        succeeds(&src, "json_get", with_default).await,
        json!({"value": null, "found": false})
    );
    let message = fails(&src, "json_get", get("/items/5"), ErrorCode::Failed).await;
    assert_eq!(message, "nothing at pointer `/items/5`");
    let message = fails(&src, "json_get", get("items"), ErrorCode::InvalidArguments).await;
    assert!(message.contains("`pointer`"), "{message}");
}

#[tokio::test]
async fn merge_is_shallow_unless_deep() {
    let src = std_source();
    let objects = json!([{"a": 1, "o": {"x": 1, "y": 1}}, {"b": 2, "o": {"y": 2}}, {"a": 3}]);
    assert_eq!(
        succeeds(&src, "merge", json!({"objects": objects})).await,
        json!({"value": {"a": 3, "o": {"y": 2}, "b": 2}})
    );
    assert_eq!(
        succeeds(&src, "merge", json!({"objects": objects, "deep": true})).await,
        json!({"value": {"a": 3, "o": {"x": 1, "y": 2}, "b": 2}})
    );
    assert_eq!(
        succeeds(&src, "merge", json!({"objects": []})).await,
        json!({"value": {}})
    );
    let message = fails(
        &src,
        "merge",
        json!({"objects": [{}, 1]}),
        ErrorCode::InvalidArguments,
    )
    .await;
    assert_eq!(
        message,
        "argument `objects[1]` must be an object, got a number"
    );
}

#[tokio::test]
async fn assert_fails_with_its_message() {
    let src = std_source();
    assert_eq!(
        succeeds(&src, "assert", json!({"condition": true})).await,
        json!({"ok": true})
    );
    let message = fails(
        &src,
        "assert",
        json!({"condition": false}),
        ErrorCode::Failed,
    )
    .await;
    assert_eq!(message, "assertion failed");
    let args = json!({"condition": false, "message": "no rows"});
    assert_eq!(
        fails(&src, "assert", args, ErrorCode::Failed).await,
        "no rows"
    );
}

#[tokio::test]
async fn sleep_sleeps_and_reports_progress() {
    let src = std_source();
    let started = Instant::now();
    let output = src.run_node("sleep", json!({"ms": 50})).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(output, json!({"slept_ms": 50}));
    assert_eq!(
        src.progress(),
        [
            (0.0, Some(50.0), Some("sleeping".to_string())),
            (50.0, Some(50.0), Some("done".to_string())),
        ]
    );
    assert_eq!(
        succeeds(&src, "sleep", json!({"ms": 0})).await,
        json!({"slept_ms": 0})
    );
    let message = fails(
        &src,
        "sleep",
        json!({"ms": 3_600_001}),
        ErrorCode::InvalidArguments,
    )
    .await;
    assert_eq!(
        message,
        "argument `ms` must be at most 3600000, got 3600001"
    );
}

#[tokio::test]
async fn dropping_a_sleep_cancels_it() {
    let src = std_source();
    let started = Instant::now();
    let call = tokio::time::timeout(
        Duration::from_millis(200),
        src.run_node("sleep", json!({"ms": 60000})),
    );
    assert!(call.await.is_err(), "the timeout fires first");
    assert!(started.elapsed() < Duration::from_secs(5));

    // A sleep that would end soon after being dropped never reports its end:
    // the plugin-side work stopped with the host's future.
    let call = tokio::time::timeout(
        Duration::from_millis(50),
        src.run_node("sleep", json!({"ms": 300})),
    );
    assert!(call.await.is_err());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let done = src
        .progress()
        .iter()
        .filter(|(_, _, m)| m.as_deref() == Some("done"))
        .count();
    assert_eq!(done, 0, "{:?}", src.progress());
}

#[tokio::test]
async fn invalid_arguments_name_the_argument() {
    let src = std_source();
    for (name, args, message) in [
        (
            "template",
            json!({"template": "x"}),
            "missing required argument `values`",
        ),
        (
            "assert",
            json!({"condition": "yes"}),
            "argument `condition` must be a boolean, got a string",
        ),
        (
            "assert",
            json!({"condition": true, "message": 1}),
            "argument `message` must be a string, got a number",
        ),
        (
            "merge",
            json!({"objects": [], "depp": true}),
            "unknown argument `depp` (expected: objects, deep)",
        ),
        (
            "sleep",
            json!({"ms": -1}),
            "argument `ms` must be a non-negative integer, got a number",
        ),
        (
            "passthrough",
            json!([1]),
            "arguments must be a JSON object, got an array",
        ),
    ] {
        assert_eq!(
            fails(&src, name, args, ErrorCode::InvalidArguments).await,
            message
        );
    }
    for name in NODES {
        fails(&src, name, json!({}), ErrorCode::InvalidArguments).await;
    }
}

#[tokio::test]
async fn unknown_names_are_not_found() {
    let src = std_source();
    let err = src.call_tool("nope", json!({})).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    let err = src.run_node("nope", json!({})).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    let err = src.get_prompt("nope", Map::new()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    let err = src.read_resource("wf://std/nope").await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
}

fn prompt_text(result: &wf_plugin_api::GetPromptResult) -> &str {
    assert_eq!(result.messages.len(), 1);
    assert_eq!(result.messages[0]["role"], "user");
    result.messages[0]["content"]["text"].as_str().unwrap()
}

#[tokio::test]
async fn author_workflow_prompt_teaches_the_document_and_the_nodes() {
    let src = std_source();
    let plain = src.get_prompt("author_workflow", Map::new()).await.unwrap();
    let text = prompt_text(&plain);
    for needle in [
        "`inputs`",
        "`nodes`",
        "`outputs`",
        "`use`",
        "`args`",
        "\"$ref\"",
        "validate",
        "wf.std.template",
    ] {
        assert!(text.contains(needle), "prompt lacks {needle}");
    }
    for name in NODES {
        assert!(
            text.contains(&format!("- `wf.std.{name}`: ")),
            "prompt lacks {name}"
        );
    }
    assert!(!text.contains("The workflow's goal"));

    let mut args = Map::new();
    args.insert("goal".into(), json!("summarise open issues"));
    let aimed = src.get_prompt("author_workflow", args).await.unwrap();
    assert!(prompt_text(&aimed).contains("The workflow's goal: summarise open issues"));

    let mut args = Map::new();
    args.insert("goal".into(), json!(1));
    let err = src.get_prompt("author_workflow", args).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArguments);
}

#[tokio::test]
async fn reference_documents_every_node_from_its_spec() {
    let src = std_source();
    let read = src.read_resource("wf://std/reference").await.unwrap();
    assert_eq!(read.contents.len(), 1);
    assert_eq!(read.contents[0]["uri"], "wf://std/reference");
    assert_eq!(read.contents[0]["mimeType"], "text/markdown");
    let text = read.contents[0]["text"].as_str().unwrap();
    for spec in src.catalog().await.unwrap().node_specs {
        assert!(text.contains(&format!("## `wf.std.{}`", spec.name)));
        assert!(text.contains(&spec.description));
        assert!(text.contains(&serde_json::to_string_pretty(&spec.input_schema).unwrap()));
        assert!(text.contains(&serde_json::to_string_pretty(&spec.output_schema).unwrap()));
    }
}

#[tokio::test]
async fn status_counts_the_nodes() {
    let status: Value = std_source().request(&SourceRequest::Status).await.unwrap();
    assert_eq!(status, json!({"nodes": 8}));
}
