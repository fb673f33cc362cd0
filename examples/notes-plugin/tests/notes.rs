//! The notes plugin driven through the real plugin ABI (root module, vtables,
//! JSON encoding, plugin runtime) with `wf_plugin_api::testing::Harness`.

mod common;

use serde_json::{Map, Value, json};
use wf_plugin_api::testing::{TestSource, schema_problems};
use wf_plugin_api::{
    API_VERSION, Catalog, ErrorCode, Prompt, Resource, ResourceTemplate, SourceRequest,
};

use common::{TempDir, add, fails, harness, invalid, notes, succeeds, titles};

const CAPS: [&str; 5] = ["add", "get", "list", "search", "delete"];

#[test]
fn manifest_declares_the_kind_and_the_default_source() {
    let manifest = harness().manifest;
    assert_eq!(manifest.name, "wf-notes");
    assert_eq!(manifest.api_version, API_VERSION);
    assert_eq!(manifest.kinds, ["notes"]);
    assert_eq!(manifest.default_sources.len(), 1);
    assert_eq!(manifest.default_sources[0].name, "notes");
    assert_eq!(manifest.default_sources[0].kind, "notes");
    assert!(!manifest.description.is_empty());
}

#[tokio::test]
async fn catalog_serves_every_capability_as_node_and_tool() {
    let src = notes();
    let catalog = src.catalog().await.unwrap();
    let problems = schema_problems(&catalog);
    assert!(problems.is_empty(), "{problems:?}");

    let tools: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_str()).collect();
    let specs: Vec<&str> = catalog.node_specs.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(tools, CAPS);
    assert_eq!(specs, CAPS);

    let required = |name: &str| -> Vec<&str> {
        match name {
            "add" => vec!["title", "body"],
            "get" | "delete" => vec!["id"],
            "list" => vec![],
            "search" => vec!["query"],
            _ => unreachable!(),
        }
    };
    let outputs = |name: &str| -> Vec<&str> {
        match name {
            "add" => vec!["id", "note"],
            "get" => vec!["note"],
            "list" | "search" => vec!["notes"],
            "delete" => vec!["deleted"],
            _ => unreachable!(),
        }
    };
    for spec in &catalog.node_specs {
        let name = spec.name.as_str();
        assert!(!spec.description.is_empty(), "{name}");
        assert_eq!(
            spec.side_effects,
            matches!(name, "add" | "delete"),
            "{name} side_effects"
        );
        assert!(!spec.stateful, "{name}");
        let input = &spec.input_schema;
        assert_eq!(input["type"], "object", "{name}");
        assert_eq!(input["additionalProperties"], false, "{name}");
        assert_eq!(input["required"], json!(required(name)), "{name}");
        let output = &spec.output_schema;
        assert_eq!(output["type"], "object", "{name}");
        assert_eq!(output["additionalProperties"], false, "{name}");
        assert_eq!(output["required"], json!(outputs(name)), "{name}");
        for schema in [input, output] {
            for (prop, s) in schema["properties"].as_object().unwrap() {
                assert!(
                    s["description"].is_string(),
                    "{name}.{prop} has no description"
                );
            }
        }
        let tool = catalog.tools.iter().find(|t| t.name == name).unwrap();
        assert_eq!(tool.description.as_deref(), Some(spec.description.as_str()));
        assert_eq!(&tool.input_schema, input);
        assert_eq!(tool.output_schema.as_ref(), Some(output));
    }
    assert_eq!(
        catalog.node_specs[0].input_schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["title", "body", "tags"]
    );

    assert_eq!(catalog.prompts.len(), 1);
    let prompt = &catalog.prompts[0];
    assert_eq!(prompt.name, "summarize");
    assert_eq!(prompt.arguments.len(), 1);
    assert_eq!(prompt.arguments[0].name, "tag");
    assert_eq!(prompt.arguments[0].required, Some(false));

    assert_eq!(catalog.resources.len(), 1);
    assert_eq!(catalog.resources[0].uri, "notes://all");
    assert_eq!(
        catalog.resources[0].mime_type.as_deref(),
        Some("text/markdown")
    );
    assert_eq!(catalog.resource_templates.len(), 1);
    assert_eq!(
        catalog.resource_templates[0].uri_template,
        "notes://note/{id}"
    );
    assert_eq!(
        catalog.resource_templates[0].mime_type.as_deref(),
        Some("text/markdown")
    );

    // The list operations the host uses default to the catalog's.
    let listed: Vec<Prompt> = src.request(&SourceRequest::ListPrompts).await.unwrap();
    assert_eq!(listed, catalog.prompts);
    let listed: Vec<Resource> = src.request(&SourceRequest::ListResources).await.unwrap();
    assert_eq!(listed, catalog.resources);
    let listed: Vec<ResourceTemplate> = src
        .request(&SourceRequest::ListResourceTemplates)
        .await
        .unwrap();
    assert_eq!(listed, catalog.resource_templates);
}

#[tokio::test]
async fn catalog_does_not_change_with_the_notes() {
    let src = notes();
    let before: Catalog = src.catalog().await.unwrap();
    add(&src, "a", "b", &["t"]).await;
    assert_eq!(src.catalog().await.unwrap(), before);
}

#[tokio::test]
async fn add_returns_the_stored_note_through_tool_and_node() {
    let src = notes();
    let result = src
        .call_tool(
            "add",
            json!({"title": "  Groceries ", "body": "milk, eggs", "tags": ["home", " todo", "home"]}),
        )
        .await
        .unwrap();
    assert!(!result.is_error, "{result:?}");
    let out = result.structured_content.clone().unwrap();
    assert_eq!(
        out,
        json!({"id": "n1", "note": {"id": "n1", "title": "Groceries", "body": "milk, eggs", "tags": ["home", "todo"]}})
    );
    assert_eq!(result.content[0]["text"], out.to_string());

    // As a workflow node: the same output, no tool envelope; tags are optional.
    let out = src
        .run_node("add", json!({"title": "Idea", "body": ""}))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"id": "n2", "note": {"id": "n2", "title": "Idea", "body": "", "tags": []}})
    );
    assert_eq!(status(&src).await, json!({"notes": 2}));
}

#[tokio::test]
async fn add_rejects_bad_arguments_naming_them() {
    let src = notes();
    let cases = [
        (json!({"body": "b"}), "missing required argument `title`"),
        (json!({"title": "t"}), "missing required argument `body`"),
        (
            json!({"title": "   ", "body": "b"}),
            "argument `title` must not be empty",
        ),
        (
            json!({"title": 7, "body": "b"}),
            "argument `title` must be a string, got a number",
        ),
        (
            json!({"title": "t", "body": null}),
            "argument `body` must be a string, got null",
        ),
        (
            json!({"title": "t", "body": "b", "tags": "x"}),
            "argument `tags` must be an array of strings, got a string",
        ),
        (
            json!({"title": "t", "body": "b", "tags": ["ok", 1]}),
            "argument `tags[1]` must be a string, got a number",
        ),
        (
            json!({"title": "t", "body": "b", "tags": [""]}),
            "argument `tags[0]` must not be empty",
        ),
        (
            json!({"title": "t", "text": "b"}),
            "unknown argument `text` (expected: title, body, tags)",
        ),
        (
            json!(["t", "b"]),
            "arguments must be a JSON object, got an array",
        ),
    ];
    for (args, message) in cases {
        assert_eq!(invalid(&src, "add", args).await, message);
    }
    // Nothing was stored by the failed calls.
    assert_eq!(
        succeeds(&src, "list", json!({})).await,
        json!({"notes": []})
    );
}

#[tokio::test]
async fn get_returns_a_note_or_fails_on_an_unknown_id() {
    let src = notes();
    let id = add(&src, "Plan", "ship it", &["work"]).await;
    assert_eq!(
        succeeds(&src, "get", json!({"id": id})).await,
        json!({"note": {"id": id, "title": "Plan", "body": "ship it", "tags": ["work"]}})
    );
    let message = fails(&src, "get", json!({"id": "n99"}), ErrorCode::Failed).await;
    assert_eq!(
        message,
        "no note with id `n99` (the `list` and `search` tools show the ids)"
    );
    assert_eq!(
        invalid(&src, "get", json!({})).await,
        "missing required argument `id`"
    );
    assert_eq!(
        invalid(&src, "get", json!({"id": 1})).await,
        "argument `id` must be a string, got a number"
    );
}

#[tokio::test]
async fn list_returns_all_notes_or_those_with_a_tag() {
    let src = notes();
    assert_eq!(
        succeeds(&src, "list", json!({})).await,
        json!({"notes": []})
    );
    add(&src, "one", "first", &["a"]).await;
    add(&src, "two", "second", &["b", "a"]).await;
    add(&src, "three", "third", &[]).await;

    let all = succeeds(&src, "list", json!({})).await;
    assert_eq!(titles(&all), ["one", "two", "three"]);
    assert_eq!(
        all["notes"][1],
        json!({"id": "n2", "title": "two", "body": "second", "tags": ["b", "a"]})
    );
    assert_eq!(
        titles(&succeeds(&src, "list", json!({"tag": "a"})).await),
        ["one", "two"]
    );
    assert_eq!(
        titles(&succeeds(&src, "list", json!({"tag": "b"})).await),
        ["two"]
    );
    // Tags match exactly.
    assert!(
        titles(&succeeds(&src, "list", json!({"tag": "A"})).await).is_empty(),
        "tags are case-sensitive"
    );
    assert!(titles(&succeeds(&src, "list", json!({"tag": "none"})).await).is_empty());

    assert_eq!(
        invalid(&src, "list", json!({"tag": ["a"]})).await,
        "argument `tag` must be a string, got an array"
    );
    assert_eq!(
        invalid(&src, "list", json!({"tags": "a"})).await,
        "unknown argument `tags` (expected: tag)"
    );
}

#[tokio::test]
async fn search_matches_title_and_body_ignoring_case() {
    let src = notes();
    add(&src, "Rust meetup", "talk about plugins", &[]).await;
    add(&src, "Shopping", "buy RUSTPROOF paint", &[]).await;
    add(&src, "Garden", "plant tomatoes", &[]).await;

    assert_eq!(
        titles(&succeeds(&src, "search", json!({"query": "rust"})).await),
        ["Rust meetup", "Shopping"]
    );
    assert_eq!(
        titles(&succeeds(&src, "search", json!({"query": "TOMATO"})).await),
        ["Garden"]
    );
    assert_eq!(
        titles(&succeeds(&src, "search", json!({"query": "meetup talk"})).await),
        Vec::<String>::new()
    );

    assert_eq!(
        invalid(&src, "search", json!({})).await,
        "missing required argument `query`"
    );
    assert_eq!(
        invalid(&src, "search", json!({"query": " "})).await,
        "argument `query` must not be empty"
    );
}

#[tokio::test]
async fn delete_asks_the_caller_to_confirm_and_keeps_the_note_unless_confirmed() {
    let src = notes();
    let id = add(&src, "precious", "", &[]).await;

    // The user declines: the note stays, and the tool says why.
    src.answer_caller(Ok(json!({"action": "decline"})));
    let r = src.call_tool("delete", json!({"id": id})).await.unwrap();
    assert!(r.is_error, "{r:?}");
    assert!(
        r.content[0]["text"]
            .as_str()
            .unwrap()
            .contains("the user did not confirm")
    );
    assert_eq!(titles(&succeeds(&src, "list", json!({})).await), ["precious"]);
    let asked = src.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["kind"], "elicit");
    assert!(
        asked[0]["params"]["message"]
            .as_str()
            .unwrap()
            .contains("\"precious\"")
    );
    assert_eq!(
        asked[0]["params"]["requestedSchema"]["properties"]["confirm"]["type"],
        "boolean"
    );

    // Accepted without ticking the box: still kept.
    src.answer_caller(Ok(json!({"action": "accept", "content": {"confirm": false}})));
    let r = src.call_tool("delete", json!({"id": id})).await.unwrap();
    assert!(r.is_error);

    // Confirmed: deleted.
    src.answer_caller(Ok(json!({"action": "accept", "content": {"confirm": true}})));
    let r = src.call_tool("delete", json!({"id": id})).await.unwrap();
    assert_eq!(r.structured_content, Some(json!({"deleted": true})));
    assert_eq!(src.asked().len(), 3);
}

#[tokio::test]
async fn delete_removes_a_note_and_reports_whether_it_existed() {
    let src = notes();
    let keep = add(&src, "keep", "", &[]).await;
    let gone = add(&src, "gone", "", &[]).await;

    let r = src.call_tool("delete", json!({"id": gone})).await.unwrap();
    assert!(!r.is_error);
    assert_eq!(r.structured_content, Some(json!({"deleted": true})));
    assert_eq!(titles(&succeeds(&src, "list", json!({})).await), ["keep"]);
    fails(&src, "get", json!({"id": gone}), ErrorCode::Failed).await;

    // Again, as a node: nothing left to delete.
    assert_eq!(
        src.run_node("delete", json!({"id": gone})).await.unwrap(),
        json!({"deleted": false})
    );
    assert_eq!(
        src.run_node("delete", json!({"id": keep})).await.unwrap(),
        json!({"deleted": true})
    );

    // Ids are never reused.
    assert_eq!(add(&src, "new", "", &[]).await, "n3");

    assert_eq!(
        invalid(&src, "delete", json!({})).await,
        "missing required argument `id`"
    );
    assert_eq!(
        invalid(&src, "delete", json!({"id": ""})).await,
        "argument `id` must not be empty"
    );
}

#[tokio::test]
async fn an_unknown_capability_is_not_found() {
    let src = notes();
    let err = src.call_tool("edit", json!({})).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    assert_eq!(err.message, "notes has no tool edit");
    let err = src.run_node("edit", json!({})).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
}

#[tokio::test]
async fn notes_persist_across_sources_on_the_same_data_dir() {
    let dir = TempDir::new("persist");
    let h = harness();

    let first = h
        .source_in("notes", "notes", json!({}), dir.0.clone())
        .unwrap();
    add(&first, "kept", "across restarts", &["x"]).await;
    let second_id = add(&first, "deleted later", "", &[]).await;
    first.shutdown().await;
    drop(first);

    // The file is complete JSON and no temporary file is left behind.
    let file = dir.0.join(wf_notes::FILE_NAME);
    let stored: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(stored["notes"].as_array().unwrap().len(), 2);
    let entries: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, [wf_notes::FILE_NAME]);

    let second = h
        .source_in("notes", "notes", json!({}), dir.0.clone())
        .unwrap();
    assert_eq!(
        succeeds(&second, "list", json!({})).await,
        json!({"notes": [
            {"id": "n1", "title": "kept", "body": "across restarts", "tags": ["x"]},
            {"id": "n2", "title": "deleted later", "body": "", "tags": []},
        ]})
    );
    assert_eq!(
        second
            .run_node("delete", json!({"id": second_id}))
            .await
            .unwrap(),
        json!({"deleted": true})
    );
    // Ids continue after a reload, even past a deleted note.
    assert_eq!(add(&second, "third", "", &[]).await, "n3");
    drop(second);

    // A third source (a fresh harness: another "host run") sees both changes.
    let third = harness()
        .source_in("notes", "notes", json!({}), dir.0.clone())
        .unwrap();
    assert_eq!(
        titles(&succeeds(&third, "list", json!({})).await),
        ["kept", "third"]
    );
    assert_eq!(status(&third).await, json!({"notes": 2}));
}

#[tokio::test]
async fn a_corrupt_notes_file_refuses_the_source_and_is_kept() {
    let dir = TempDir::new("corrupt");
    let file = dir.0.join(wf_notes::FILE_NAME);
    std::fs::write(&file, "{ not json").unwrap();
    let err = harness()
        .source_in("notes", "notes", json!({}), dir.0.clone())
        .err()
        .expect("source is refused");
    assert_eq!(err.code, ErrorCode::Failed);
    assert!(err.message.contains("notes.json"), "{}", err.message);
    assert!(
        err.message.contains("is not a valid notes file"),
        "{}",
        err.message
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ not json");
}

#[test]
fn config_settings_are_rejected_naming_the_key() {
    let h = harness();
    let err = h
        .source("work", "notes", json!({"path": "/tmp/x"}))
        .err()
        .expect("refused");
    assert_eq!(err.code, ErrorCode::InvalidConfig);
    assert_eq!(
        err.message,
        "sources.work.path: unknown setting (the notes kind has no settings)"
    );
    // A missing config (null) is the same as an empty table.
    assert!(h.source("work", "notes", Value::Null).is_ok());
}

#[tokio::test]
async fn concurrent_adds_get_distinct_ids_and_are_all_stored() {
    let dir = TempDir::new("concurrent");
    let h = harness();
    let src = std::sync::Arc::new(
        h.source_in("notes", "notes", json!({}), dir.0.clone())
            .unwrap(),
    );
    let calls = (0..20).map(|i| {
        let src = src.clone();
        tokio::spawn(async move { add(&src, &format!("note {i}"), "", &[]).await })
    });
    let mut ids = Vec::new();
    for call in calls {
        ids.push(call.await.unwrap());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 20);

    let reopened = h
        .source_in("notes", "notes", json!({}), dir.0.clone())
        .unwrap();
    assert_eq!(status(&reopened).await, json!({"notes": 20}));
}

fn prompt_args(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn message_text(result: &wf_plugin_api::GetPromptResult) -> String {
    assert_eq!(result.messages.len(), 1, "{result:?}");
    assert_eq!(result.messages[0]["role"], "user");
    assert_eq!(result.messages[0]["content"]["type"], "text");
    result.messages[0]["content"]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn summarize_prompt_includes_the_matching_notes() {
    let src = notes();
    let empty = message_text(&src.get_prompt("summarize", Map::new()).await.unwrap());
    assert!(empty.contains("there are none yet"), "{empty}");

    add(&src, "Standup", "discuss the release blockers", &["work"]).await;
    add(&src, "Dentist", "call on Monday", &["home"]).await;

    let all = src.get_prompt("summarize", Map::new()).await.unwrap();
    assert_eq!(all.description.as_deref(), Some("Summarize the notes"));
    let text = message_text(&all);
    assert!(text.starts_with("Please summarize my notes."), "{text}");
    assert!(text.contains("There are 2 notes:"), "{text}");
    for needle in [
        "## Standup",
        "discuss the release blockers",
        "## Dentist",
        "call on Monday",
        "`n1`",
    ] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }

    let work = src
        .get_prompt("summarize", prompt_args(&[("tag", json!("work"))]))
        .await
        .unwrap();
    let text = message_text(&work);
    assert!(text.contains("summarize my notes tagged `work`"), "{text}");
    assert!(text.contains("There is one note tagged `work`:"), "{text}");
    assert!(
        text.contains("Standup") && !text.contains("Dentist"),
        "{text}"
    );

    // An empty tag is "no tag" (clients send prompt arguments as strings).
    let text = message_text(
        &src.get_prompt("summarize", prompt_args(&[("tag", json!(""))]))
            .await
            .unwrap(),
    );
    assert!(text.contains("There are 2 notes:"), "{text}");

    let none = message_text(
        &src.get_prompt("summarize", prompt_args(&[("tag", json!("nope"))]))
            .await
            .unwrap(),
    );
    assert!(
        none.contains("tagged `nope`, but there are none yet"),
        "{none}"
    );
}

#[tokio::test]
async fn summarize_prompt_errors() {
    let src = notes();
    let err = src.get_prompt("digest", Map::new()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    assert_eq!(err.message, "notes has no prompt digest");

    let err = src
        .get_prompt("summarize", prompt_args(&[("tag", json!(3))]))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArguments);
    assert_eq!(err.message, "prompt argument `tag` must be a string");

    let err = src
        .get_prompt("summarize", prompt_args(&[("topic", json!("x"))]))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArguments);
    assert_eq!(
        err.message,
        "unknown prompt argument `topic` (expected: tag)"
    );
}

#[tokio::test]
async fn resources_show_all_notes_and_one_note_by_id() {
    let src = notes();
    let empty = src.read_resource("notes://all").await.unwrap();
    assert_eq!(
        empty.contents,
        [
            json!({"uri": "notes://all", "mimeType": "text/markdown", "text": "# Notes\n\nNo notes.\n"})
        ]
    );

    let id = add(&src, "Alpha", "first body", &["greek", "letters"]).await;
    add(&src, "Beta", "second body", &[]).await;

    let all = src.read_resource("notes://all").await.unwrap();
    assert_eq!(all.contents.len(), 1);
    assert_eq!(all.contents[0]["uri"], "notes://all");
    assert_eq!(all.contents[0]["mimeType"], "text/markdown");
    let text = all.contents[0]["text"].as_str().unwrap();
    assert!(text.starts_with("# Notes\n\n2 notes.\n"), "{text}");
    for needle in [
        "## Alpha",
        "first body",
        "`greek`, `letters`",
        "## Beta",
        "second body",
    ] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
    assert!(
        text.find("Alpha") < text.find("Beta"),
        "oldest first: {text}"
    );

    let uri = format!("notes://note/{id}");
    let one = src.read_resource(&uri).await.unwrap();
    assert_eq!(
        one.contents,
        [json!({
            "uri": uri,
            "mimeType": "text/markdown",
            "text": "## Alpha\n\nid: `n1` · tags: `greek`, `letters`\n\nfirst body\n",
        })]
    );

    let err = src.read_resource("notes://note/n42").await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    assert!(
        err.message.contains("no note with id `n42`"),
        "{}",
        err.message
    );
    let err = src.read_resource("notes://elsewhere").await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    assert_eq!(err.message, "notes has no resource notes://elsewhere");
}

async fn status(src: &TestSource) -> Value {
    src.request(&SourceRequest::Status).await.unwrap()
}

#[tokio::test]
async fn status_counts_the_notes() {
    let src = notes();
    assert_eq!(status(&src).await, json!({"notes": 0}));
    let id = add(&src, "a", "", &[]).await;
    add(&src, "b", "", &[]).await;
    assert_eq!(status(&src).await, json!({"notes": 2}));
    src.run_node("delete", json!({"id": id})).await.unwrap();
    assert_eq!(status(&src).await, json!({"notes": 1}));
}

#[tokio::test]
async fn sources_on_different_data_dirs_do_not_share_notes() {
    // `Harness::source` gives every source a fresh data dir.
    let h = harness();
    let a = h.source("a", "notes", json!({})).unwrap();
    let b = h.source("b", "notes", json!({})).unwrap();
    add(&a, "only in a", "", &[]).await;
    assert!(titles(&succeeds(&b, "list", json!({})).await).is_empty());
    assert_eq!(
        titles(&succeeds(&a, "list", json!({})).await),
        ["only in a"]
    );
}

#[tokio::test]
async fn other_sources_name_their_resources_after_themselves() {
    let src = harness().source("work", "notes", json!({})).unwrap();
    let catalog = src.catalog().await.unwrap();
    assert_eq!(catalog.resources[0].uri, "notes://work/all");
    assert_eq!(
        catalog.resource_templates[0].uri_template,
        "notes://work/note/{id}"
    );

    let id = add(&src, "Roadmap", "Q3 goals", &[]).await;
    let all = src.read_resource("notes://work/all").await.unwrap();
    assert_eq!(all.contents[0]["uri"], "notes://work/all");
    assert!(
        all.contents[0]["text"]
            .as_str()
            .unwrap()
            .contains("## Roadmap")
    );
    let uri = format!("notes://work/note/{id}");
    let one = src.read_resource(&uri).await.unwrap();
    assert_eq!(one.contents[0]["uri"], uri.as_str());

    // The default source's URIs are not this source's.
    for uri in ["notes://all", "notes://note/n1"] {
        let err = src.read_resource(uri).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound, "{uri}");
        assert_eq!(err.message, format!("work has no resource {uri}"));
    }
}
