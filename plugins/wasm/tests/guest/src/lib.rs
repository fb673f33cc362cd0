//! A wf source component for wf-source-wasm's tests: each tool exercises
//! one behaviour of the host (a call, a trap, a deadline, the memory limit,
//! capabilities, the host imports).

wit_bindgen::generate!({
    path: "../../wit",
    world: "source",
});

use exports::wf::source::guest::Guest;
use wf::source::host;
use wf::source::types::*;

struct Component;

fn obj(props: &str) -> String {
    format!(r#"{{"type":"object","properties":{{{props}}}}}"#)
}

fn text(s: impl Into<String>) -> ToolResult {
    ToolResult { content: vec![Content::Text(s.into())], structured: None, is_error: false }
}

fn err(code: ErrorCode, message: &str) -> Error {
    Error { code, message: message.into(), data: None }
}

fn tool(name: &str, description: &str, props: &str) -> Tool {
    Tool { name: name.into(), description: Some(description.into()), input_schema: obj(props), output_schema: None }
}

/// The string value of `key` in a flat JSON object (enough for tests).
fn arg(json: &str, key: &str) -> Option<String> {
    let at = json.find(&format!("\"{key}\""))?;
    let rest = &json[at + key.len() + 2..];
    let rest = &rest[rest.find('"')? + 1..];
    Some(rest[..rest.find('"')?].to_string())
}

impl Guest for Component {
    fn describe() -> Metadata {
        Metadata { name: "guest".into(), version: "1.0.0".into(), description: "wf-source-wasm's test component".into() }
    }

    fn catalog() -> Result<Capabilities, Error> {
        let s = r#""text":{"type":"string"}"#;
        Ok(Capabilities {
            tools: vec![
                tool("echo", "Returns its text", s),
                tool("trap", "Traps (unreachable)", ""),
                tool("spin", "Loops forever", ""),
                tool("hog", "Allocates without bound", ""),
                tool("big", "Returns a result of `mb` MiB", r#""mb":{"type":"string"}"#),
                tool("read_file", "Reads a file", r#""path":{"type":"string"}"#),
                tool("write_file", "Writes a file", r#""path":{"type":"string"}"#),
                tool("env", "Reads an environment variable", r#""name":{"type":"string"}"#),
                tool("fetch", "GETs a URL through wasi:http", r#""url":{"type":"string"}"#),
                tool("settings", "Returns its settings", ""),
                tool("ask", "Asks the caller to confirm", ""),
                tool("work", "Reports progress, logs and checks cancellation", ""),
                tool("print", "Prints to stdout and stderr", ""),
            ],
            node_specs: vec![NodeSpec {
                name: "add".into(),
                description: "Adds a and b".into(),
                input_schema: r#"{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}"#.into(),
                output_schema: r#"{"type":"object","properties":{"sum":{"type":"number"}}}"#.into(),
                side_effects: false,
                stateful: false,
            }],
            prompts: vec![Prompt {
                name: "greet".into(),
                description: Some("Greets someone".into()),
                arguments: vec![PromptArgument { name: "who".into(), description: None, required: true }],
            }],
            resources: vec![ResourceEntry {
                uri: "guest://readme".into(),
                name: "readme".into(),
                description: Some("About the guest".into()),
                mime_type: Some("text/plain".into()),
            }],
            resource_templates: vec![ResourceTemplate {
                uri_template: "guest://item/{id}".into(),
                name: "item".into(),
                description: None,
                mime_type: None,
            }],
        })
    }

    fn call_tool(name: String, arguments: String) -> Result<ToolResult, Error> {
        match name.as_str() {
            "echo" => Ok(text(arg(&arguments, "text").unwrap_or_default())),
            "trap" => {
                #[cfg(target_arch = "wasm32")]
                core::arch::wasm32::unreachable();
                #[cfg(not(target_arch = "wasm32"))]
                unreachable!()
            }
            "spin" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "hog" => {
                let mut keep: Vec<Vec<u8>> = Vec::new();
                loop {
                    keep.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&keep);
                }
            }
            "big" => {
                let mb: usize = arg(&arguments, "mb").and_then(|m| m.parse().ok()).unwrap_or(1);
                Ok(text("x".repeat(mb << 20)))
            }
            "read_file" => {
                let path = arg(&arguments, "path").unwrap_or_default();
                Ok(match std::fs::read_to_string(&path) {
                    Ok(s) => text(s),
                    Err(e) => ToolResult { content: vec![Content::Text(format!("cannot read {path}: {e}"))], structured: None, is_error: true },
                })
            }
            "write_file" => {
                let path = arg(&arguments, "path").unwrap_or_default();
                Ok(match std::fs::write(&path, b"written by the guest") {
                    Ok(()) => text("written"),
                    Err(e) => ToolResult { content: vec![Content::Text(format!("cannot write {path}: {e}"))], structured: None, is_error: true },
                })
            }
            "env" => {
                let name = arg(&arguments, "name").unwrap_or_default();
                Ok(text(std::env::var(&name).unwrap_or_else(|_| format!("{name} is not set"))))
            }
            "fetch" => Ok(fetch(&arg(&arguments, "url").unwrap_or_default())),
            "settings" => Ok(text(host::settings())),
            "ask" => match host::elicit("Proceed?", r#"{"type":"object","properties":{"ok":{"type":"boolean"}}}"#) {
                Ok(a) => Ok(text(format!("{:?} {}", a.action, a.content.unwrap_or_default()))),
                Err(e) => Ok(text(format!("cannot ask: {:?} {}", e.code, e.message))),
            },
            "work" => {
                host::log(LogLevel::Info, "working");
                host::progress(1.0, Some(2.0), Some("half"));
                host::progress(2.0, Some(2.0), None);
                Ok(text(format!("cancelled={} info={}", host::cancelled(), host::call_info())))
            }
            "print" => {
                println!("to stdout");
                eprintln!("to stderr");
                Ok(text("printed"))
            }
            _ => Err(err(ErrorCode::NotFound, &format!("no tool {name}"))),
        }
    }

    fn run_node(name: String, input: String) -> Result<String, Error> {
        if name != "add" {
            return Err(err(ErrorCode::NotFound, &format!("no node {name}")));
        }
        let num = |k: &str| -> Option<f64> {
            let at = input.find(&format!("\"{k}\""))?;
            let rest = input[at + k.len() + 2..].trim_start().strip_prefix(':')?.trim_start();
            let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-')).unwrap_or(rest.len());
            rest[..end].parse().ok()
        };
        match (num("a"), num("b")) {
            (Some(a), Some(b)) => Ok(format!(r#"{{"sum":{}}}"#, a + b)),
            _ => Err(err(ErrorCode::InvalidArguments, "a and b must be numbers")),
        }
    }

    fn read_resource(uri: String) -> Result<Vec<ResourceContents>, Error> {
        let body = if uri == "guest://readme" {
            ResourceBody::Text("the test guest".into())
        } else if let Some(id) = uri.strip_prefix("guest://item/") {
            ResourceBody::Blob(id.as_bytes().to_vec())
        } else {
            return Err(err(ErrorCode::NotFound, &format!("no resource {uri}")));
        };
        Ok(vec![ResourceContents { uri, mime_type: Some("text/plain".into()), body }])
    }

    fn get_prompt(name: String, arguments: Vec<(String, String)>) -> Result<PromptResult, Error> {
        if name != "greet" {
            return Err(err(ErrorCode::NotFound, &format!("no prompt {name}")));
        }
        let who = arguments.iter().find(|(k, _)| k == "who").map(|(_, v)| v.as_str()).unwrap_or("you");
        Ok(PromptResult {
            description: None,
            messages: vec![PromptMessage { role: Role::User, content: Content::Text(format!("Say hello to {who}")) }],
        })
    }
}

/// GET `url` through wasi:http; the status, or the error as the host gave it.
fn fetch(url: &str) -> ToolResult {
    use wasi::http::outgoing_handler;
    use wasi::http::types::{Fields, OutgoingRequest, Scheme};
    let fail = |m: String| ToolResult { content: vec![Content::Text(m)], structured: None, is_error: true };
    let (scheme, rest) = match url.split_once("://") {
        Some(("http", r)) => (Scheme::Http, r),
        Some(("https", r)) => (Scheme::Https, r),
        _ => return fail(format!("bad url {url}")),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let req = OutgoingRequest::new(Fields::new());
    let _ = req.set_scheme(Some(&scheme));
    let _ = req.set_authority(Some(authority));
    let _ = req.set_path_with_query(Some(path));
    let future = match outgoing_handler::handle(req, None) {
        Ok(f) => f,
        Err(e) => return fail(format!("request failed: {e:?}")),
    };
    future.subscribe().block();
    match future.get() {
        Some(Ok(Ok(resp))) => text(format!("status {}", resp.status())),
        Some(Ok(Err(e))) => fail(format!("request failed: {e:?}")),
        other => fail(format!("request failed: {other:?}")),
    }
}

export!(Component);
