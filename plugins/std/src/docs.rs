//! What `wf.std` teaches an LLM: the `author_workflow` prompt and the
//! `wf://std/reference` resource, both generated from the node specs.

use std::fmt::Write as _;

use wf_plugin_api::prelude::*;

use crate::nodes::Node;

pub(crate) const PROMPT: &str = "author_workflow";
pub(crate) const REFERENCE_URI: &str = "wf://std/reference";
const MARKDOWN: &str = "text/markdown";

pub(crate) fn prompt() -> Prompt {
    Prompt::new(
        PROMPT,
        "How to author a wf workflow: document shape, references, and the builtin nodes.",
    )
    .argument("goal", "What the workflow should achieve.", false)
}

pub(crate) fn reference_resource() -> Resource {
    Resource::new(
        REFERENCE_URI,
        "reference",
        "Reference of every builtin node: description, input and output schema.",
        MARKDOWN,
    )
}

pub(crate) fn read_reference(source: &str) -> ReadResourceResult {
    ReadResourceResult::text(REFERENCE_URI, MARKDOWN, reference(source))
}

/// The markdown reference of every node of `source`, from the node specs.
fn reference(source: &str) -> String {
    let mut md = format!(
        "# `{source}` reference\n\n\
         The builtin nodes of wf. Each is a workflow node (`\"use\": \"{source}.<name>\"`) and a \
         tool of the same name.\n"
    );
    for node in Node::ALL {
        let spec = node.spec();
        let _ = write!(
            md,
            "\n## `{source}.{name}`\n\n{description}\n\nSide effects: {side_effects}. Stateful: {stateful}.\n\n\
             Input schema:\n\n```json\n{input}\n```\n\nOutput schema:\n\n```json\n{output}\n```\n",
            name = spec.name,
            description = spec.description,
            side_effects = yes_no(spec.side_effects),
            stateful = yes_no(spec.stateful),
            input = pretty(&spec.input_schema),
            output = pretty(&spec.output_schema),
        );
    }
    md
}

fn yes_no(flag: bool) -> &'static str {
    if flag { "yes" } else { "no" }
}

fn pretty(schema: &Value) -> String {
    serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string())
}

/// The `author_workflow` prompt for `source`, optionally aimed at `goal`.
pub(crate) fn author_workflow(source: &str, goal: Option<&str>) -> GetPromptResult {
    let mut text = String::from(
        "You are authoring a workflow for wf, a host that gathers capabilities (tools and workflow \
         nodes) from its sources and runs workflows built from them.\n",
    );
    if let Some(goal) = goal {
        let _ = write!(text, "\nThe workflow's goal: {goal}\n");
    }
    let _ = write!(
        text,
        r#"
## Capabilities

Every capability has a dotted ref `<source>.<name>`: the source that serves it, then its name, e.g. `{source}.template`. Use only capabilities the live catalog lists, and read each one's input and output schema before you use it.

## The workflow document

A workflow is a JSON document with three parts:

- `inputs`: a JSON Schema (`"type": "object"`) of the arguments the workflow takes.
- `nodes`: the steps. Each node has
  - `id`: a name unique in the workflow, used to refer to the node's output;
  - `use`: the ref of the capability it runs;
  - `args`: the capability's input, any mix of literal JSON and references;
  - optionally `after` (nodes that must finish first although no reference says so), `when` (a condition for running the node at all), `timeout_ms`, `retry` and `on_error`.
- `outputs`: the workflow's result, built from references.

A reference is an object `{{"$ref": "<path>"}}` standing where a value would be. `{{"$ref": "inputs.name"}}` is the workflow input `name`; `{{"$ref": "nodes.fetch.output.items.0"}}` is element 0 of `items` in the output of node `fetch`. Path segments are separated by dots, and numbers index arrays. A node that refers to another node runs after it.

For example:

```json
{{
  "inputs": {{"type": "object", "properties": {{"name": {{"type": "string"}}}}, "required": ["name"]}},
  "nodes": [
    {{"id": "greet", "use": "{source}.template",
     "args": {{"template": "Hello, {{{{name}}}}!", "values": {{"name": {{"$ref": "inputs.name"}}}}}}}}
  ],
  "outputs": {{"greeting": {{"$ref": "nodes.greet.output.text"}}}}
}}
```

## How to work

1. Find the capabilities you need and read their schemas.
2. Write the workflow; keep each node small and give it a descriptive id.
3. Call validate on it and fix every problem it reports; repeat until it is valid.
4. Only then run it.

## Builtin nodes (`{source}`)

"#
    );
    for node in Node::ALL {
        let _ = writeln!(text, "- `{source}.{}`: {}", node.name(), node.summary());
    }
    let _ = write!(
        text,
        "\nThe resource `{REFERENCE_URI}` has their full descriptions and schemas.\n"
    );
    GetPromptResult::user_text("How to author a wf workflow", text)
}
