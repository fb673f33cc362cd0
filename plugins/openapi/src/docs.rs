//! What a source teaches an LLM: the document itself as a resource, and the
//! `api_overview` prompt, which explains the API's tags and their tools.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use wf_plugin_api::prelude::*;

use crate::Current;
use crate::api::Api;

pub const PROMPT: &str = "api_overview";

pub fn document_uri(source: &str) -> String {
    format!("openapi://{source}/document")
}

pub fn document_resource(source: &str, current: &Current) -> Resource {
    let title = if current.api.title.is_empty() {
        "the API".to_string()
    } else {
        current.api.title.clone()
    };
    Resource::new(
        document_uri(source),
        "document",
        format!("The OpenAPI {} document of {title}", current.api.openapi),
        current.mime,
    )
}

pub fn prompt(source: &str) -> Prompt {
    Prompt::new(
        PROMPT,
        format!(
            "Explains the API behind source {source}: its purpose, its tags and the tools of each"
        ),
    )
}

/// The overview: the API's description, then each tag with its tools.
pub fn overview(source: &str, api: &Api) -> GetPromptResult {
    let mut text = format!(
        "You can call the REST API \"{}\" (version {}) through the tools of the wf source `{source}`. \
         Each tool is one HTTP operation: its arguments are the operation's path, query, header and \
         cookie parameters, and `body` is the JSON request body. A failed request returns an error \
         with the HTTP status and the response body.\n",
        api.title, api.version
    );
    if !api.description.trim().is_empty() {
        let _ = write!(text, "\n{}\n", api.description.trim());
    }
    let described: BTreeMap<&str, &str> = api
        .tags
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_str()))
        .collect();
    let mut by_tag: BTreeMap<&str, Vec<&crate::api::Operation>> = BTreeMap::new();
    for op in &api.operations {
        if op.tags.is_empty() {
            by_tag.entry("(untagged)").or_default().push(op);
        }
        for t in &op.tags {
            by_tag.entry(t.as_str()).or_default().push(op);
        }
    }
    // Tags in the document's order first, then the others.
    let mut order: Vec<&str> = api.tags.iter().map(|(n, _)| n.as_str()).collect();
    order.extend(by_tag.keys().filter(|t| !described.contains_key(*t)));
    for tag in order {
        let Some(ops) = by_tag.get(tag) else { continue };
        let _ = write!(text, "\n## {tag}\n");
        if let Some(d) = described.get(tag).filter(|d| !d.is_empty()) {
            let _ = writeln!(text, "{d}");
        }
        for op in ops {
            let line = if op.summary.is_empty() {
                format!("{} {}", op.method, op.path)
            } else {
                op.summary.clone()
            };
            let _ = writeln!(text, "- `{}` ({} {}): {line}", op.name, op.method, op.path);
        }
    }
    let _ = write!(
        text,
        "\nThe whole document is the resource `{}`.\n",
        document_uri(source)
    );
    GetPromptResult::user_text(format!("The {} API", api.title), text)
}
