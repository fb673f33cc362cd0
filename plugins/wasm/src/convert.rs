//! The WIT world's values to and from wf's plugin API types. JSON that
//! crosses as text (schemas, arguments, results) is parsed here, and a
//! component's malformed JSON fails its call with a message naming where.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};
use wf_plugin_api::{
    CallResult, Catalog, ErrorCode, GetPromptResult, NodeSpec, PluginError, Prompt,
    ReadResourceResult, Resource, ResourceTemplate, Tool,
};

use crate::bindings::wf::source::types as wit;

fn json(text: &str, what: &str) -> Result<Value, PluginError> {
    serde_json::from_str(text).map_err(|e| {
        PluginError::failed(format!(
            "the component returned invalid JSON in {what}: {e}"
        ))
    })
}

/// The component's capabilities as a catalog: its node specs are also
/// tools (as `Catalog::node` makes them for native plugins).
pub fn catalog(c: wit::Capabilities) -> Result<Catalog, PluginError> {
    let mut out = Catalog::default();
    for t in c.tools {
        let mut tool = Tool::new(
            &t.name,
            t.description.clone().unwrap_or_default(),
            json(&t.input_schema, &format!("tool {}'s input-schema", t.name))?,
        );
        tool.description = t.description;
        if let Some(o) = &t.output_schema {
            tool.output_schema = Some(json(o, &format!("tool {}'s output-schema", t.name))?);
        }
        out = out.tool(tool);
    }
    for n in c.node_specs {
        let spec = NodeSpec::new(
            &n.name,
            &n.description,
            json(&n.input_schema, &format!("node {}'s input-schema", n.name))?,
            json(
                &n.output_schema,
                &format!("node {}'s output-schema", n.name),
            )?,
        )
        .side_effects(n.side_effects)
        .stateful(n.stateful);
        out = out.node(spec);
    }
    for p in c.prompts {
        let mut prompt = Prompt::new(&p.name, p.description.clone().unwrap_or_default());
        prompt.description = p.description;
        for a in p.arguments {
            prompt = prompt.argument(&a.name, "", a.required);
            if let Some(arg) = prompt.arguments.last_mut() {
                arg.description = a.description;
            }
        }
        out = out.prompt(prompt);
    }
    for r in c.resources {
        let mut res = Resource::new(&r.uri, &r.name, "", "");
        res.description = r.description;
        res.mime_type = r.mime_type;
        out = out.resource(res);
    }
    for t in c.resource_templates {
        let mut tpl = ResourceTemplate::new(&t.uri_template, &t.name, "", "");
        tpl.description = t.description;
        tpl.mime_type = t.mime_type;
        out = out.resource_template(tpl);
    }
    Ok(out)
}

fn content(c: wit::Content) -> Result<Value, PluginError> {
    match c {
        wit::Content::Text(text) => Ok(json!({"type": "text", "text": text})),
        wit::Content::Raw(raw) => {
            let v = json(&raw, "a content block")?;
            if !v.get("type").is_some_and(Value::is_string) {
                return Err(PluginError::failed(
                    "the component returned a content block without a \"type\"",
                ));
            }
            Ok(v)
        }
    }
}

pub fn tool_result(r: wit::ToolResult) -> Result<CallResult, PluginError> {
    let mut out = CallResult {
        content: r
            .content
            .into_iter()
            .map(content)
            .collect::<Result<_, _>>()?,
        is_error: r.is_error,
        ..Default::default()
    };
    if let Some(s) = &r.structured {
        out.structured_content = Some(json(s, "structured content")?);
    }
    Ok(out)
}

pub fn node_output(text: &str) -> Result<Value, PluginError> {
    json(text, "a node's output")
}

pub fn resource(contents: Vec<wit::ResourceContents>) -> ReadResourceResult {
    let contents = contents
        .into_iter()
        .map(|c| {
            let mut v = Map::new();
            v.insert("uri".into(), c.uri.into());
            if let Some(m) = c.mime_type {
                v.insert("mimeType".into(), m.into());
            }
            match c.body {
                wit::ResourceBody::Text(t) => v.insert("text".into(), t.into()),
                wit::ResourceBody::Blob(b) => v.insert("blob".into(), BASE64.encode(&b).into()),
            };
            Value::Object(v)
        })
        .collect();
    ReadResourceResult { contents }
}

pub fn prompt(r: wit::PromptResult) -> Result<GetPromptResult, PluginError> {
    let messages = r
        .messages
        .into_iter()
        .map(|m| {
            let role = match m.role {
                wit::Role::User => "user",
                wit::Role::Assistant => "assistant",
            };
            Ok(json!({"role": role, "content": content(m.content)?}))
        })
        .collect::<Result<_, PluginError>>()?;
    Ok(GetPromptResult {
        description: r.description,
        messages,
    })
}

pub fn error_from_wit(e: wit::Error) -> PluginError {
    let code = match e.code {
        wit::ErrorCode::InvalidArguments => ErrorCode::InvalidArguments,
        wit::ErrorCode::NotFound => ErrorCode::NotFound,
        wit::ErrorCode::Unsupported => ErrorCode::Unsupported,
        wit::ErrorCode::Failed => ErrorCode::Failed,
        wit::ErrorCode::Upstream => ErrorCode::Upstream,
        wit::ErrorCode::Timeout => ErrorCode::Timeout,
        wit::ErrorCode::Cancelled => ErrorCode::Cancelled,
        wit::ErrorCode::InvalidConfig => ErrorCode::InvalidConfig,
        wit::ErrorCode::Internal => ErrorCode::Internal,
    };
    let mut out = PluginError::new(code, e.message);
    if let Some(d) = e.data.and_then(|d| serde_json::from_str(&d).ok()) {
        out = out.with_data(d);
    }
    out
}

pub fn error_to_wit(e: &PluginError) -> wit::Error {
    let code = match e.code {
        ErrorCode::InvalidArguments => wit::ErrorCode::InvalidArguments,
        ErrorCode::NotFound => wit::ErrorCode::NotFound,
        ErrorCode::Unsupported => wit::ErrorCode::Unsupported,
        ErrorCode::Failed => wit::ErrorCode::Failed,
        ErrorCode::Upstream => wit::ErrorCode::Upstream,
        ErrorCode::Timeout => wit::ErrorCode::Timeout,
        ErrorCode::Cancelled => wit::ErrorCode::Cancelled,
        ErrorCode::InvalidConfig => wit::ErrorCode::InvalidConfig,
        _ => wit::ErrorCode::Internal,
    };
    wit::Error {
        code,
        message: e.message.clone(),
        data: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_maps_every_kind() {
        let c = wit::Capabilities {
            tools: vec![wit::Tool {
                name: "echo".into(),
                description: Some("Echo".into()),
                input_schema: r#"{"type":"object"}"#.into(),
                output_schema: None,
            }],
            node_specs: vec![wit::NodeSpec {
                name: "add".into(),
                description: "Adds".into(),
                input_schema: r#"{"type":"object"}"#.into(),
                output_schema: r#"{"type":"object"}"#.into(),
                side_effects: true,
                stateful: false,
            }],
            prompts: vec![wit::Prompt {
                name: "greet".into(),
                description: None,
                arguments: vec![wit::PromptArgument {
                    name: "who".into(),
                    description: None,
                    required: true,
                }],
            }],
            resources: vec![wit::ResourceEntry {
                uri: "demo://readme".into(),
                name: "readme".into(),
                description: None,
                mime_type: Some("text/plain".into()),
            }],
            resource_templates: vec![],
        };
        let cat = catalog(c).unwrap();
        let tools: Vec<&str> = cat.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(tools, ["echo", "add"], "a node is also a tool");
        assert!(cat.node_specs[0].side_effects && !cat.node_specs[0].stateful);
        assert_eq!(cat.prompts[0].arguments[0].required, Some(true));
        assert_eq!(cat.resources[0].mime_type.as_deref(), Some("text/plain"));
        let bad = wit::Capabilities {
            tools: vec![wit::Tool {
                name: "t".into(),
                description: None,
                input_schema: "{".into(),
                output_schema: None,
            }],
            node_specs: vec![],
            prompts: vec![],
            resources: vec![],
            resource_templates: vec![],
        };
        let e = catalog(bad).unwrap_err();
        assert!(e.message.contains("tool t's input-schema"), "{}", e.message);
    }
}
