//! units: a wf source written in Rust, built into a WebAssembly component with
//! wit-bindgen for the `wasm32-wasip2` target (see docs/wasm-plugins.md). The
//! same source as `../python/app.py` and `../javascript/app.js`: two tools
//! (`convert`, also a workflow node, and `convert_many`, which reports
//! progress and asks the caller for a missing unit), a prompt and a resource.
//!
//! ```sh
//! rustup target add wasm32-wasip2
//! cargo build --release --target wasm32-wasip2   # target/wasm32-wasip2/release/wf_units.wasm
//! ```

use serde_json::{Value, json};

wit_bindgen::generate!({ path: "../../../plugins/wasm/wit", world: "source" });

use exports::wf::source::guest::Guest;
use wf::source::host;
use wf::source::types::{
    Capabilities, Content, ElicitAction, Error, ErrorCode, LogLevel, Metadata, NodeSpec, Prompt, PromptArgument,
    PromptMessage, PromptResult, ResourceBody, ResourceContents, ResourceEntry, Role, Tool, ToolResult,
};

/// unit -> (dimension, factor to the dimension's base unit); temperatures are affine (below).
const UNITS: &[(&str, &str, f64)] = &[
    ("C", "temperature", 1.0),
    ("F", "temperature", 1.0),
    ("K", "temperature", 1.0),
    ("ft", "length", 0.3048),
    ("g", "mass", 0.001),
    ("kg", "mass", 1.0),
    ("km", "length", 1000.0),
    ("lb", "mass", 0.45359237),
    ("m", "length", 1.0),
    ("mi", "length", 1609.344),
];

fn unit(name: &str) -> Result<(&'static str, f64), Invalid> {
    UNITS
        .iter()
        .find(|(u, _, _)| *u == name)
        .map(|&(_, dim, f)| (dim, f))
        .ok_or_else(|| Invalid(format!("unknown unit `{name}` (known: {})", names().join(", "))))
}

fn names() -> Vec<&'static str> {
    UNITS.iter().map(|(u, _, _)| *u).collect()
}

/// Bad arguments: an isError result for a tool, `invalid-arguments` for a node.
struct Invalid(String);

fn error(code: ErrorCode, message: String) -> Error {
    Error { code, message, data: None }
}

fn round(v: f64) -> f64 {
    (v * 1e9).round() / 1e9
}

fn convert(value: f64, src: &str, dst: &str) -> Result<f64, Invalid> {
    let ((dim, f_src), (dim_dst, f_dst)) = (unit(src)?, unit(dst)?);
    if dim != dim_dst {
        return Err(Invalid(format!("cannot convert {dim} (`{src}`) to {dim_dst} (`{dst}`)")));
    }
    if dim == "temperature" {
        let kelvin = match src {
            "C" => value + 273.15,
            "F" => (value - 32.0) * 5.0 / 9.0 + 273.15,
            _ => value,
        };
        return Ok(round(match dst {
            "C" => kelvin - 273.15,
            "F" => (kelvin - 273.15) * 9.0 / 5.0 + 32.0,
            _ => kelvin,
        }));
    }
    Ok(round(value * f_src / f_dst))
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, Invalid> {
    args[key].as_str().ok_or_else(|| Invalid(format!("argument `{key}` must be a unit")))
}

fn convert_node(args: &Value) -> Result<Value, Invalid> {
    let value = args["value"].as_f64().ok_or_else(|| Invalid("argument `value` must be a number".into()))?;
    let (src, dst) = (str_arg(args, "from")?, str_arg(args, "to")?);
    Ok(json!({"value": convert(value, src, dst)?, "unit": dst}))
}

fn convert_many(args: &Value) -> Result<Result<Value, Invalid>, Error> {
    let values: Vec<f64> = args["values"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
    let src = args["from"].as_str().unwrap_or_default();
    let dst = match args["to"].as_str() {
        Some(dst) => dst.to_string(),
        None => {
            // Ask the person behind the call (`unsupported` when nobody can be asked).
            let schema = json!({"type": "object", "properties": {"to": {"type": "string", "enum": names()}}, "required": ["to"]});
            let message = format!("Convert {} values from {src} to which unit?", values.len());
            let answer = host::elicit(&message, &schema.to_string())?;
            let chosen = match (answer.action, answer.content) {
                (ElicitAction::Accept, Some(content)) => serde_json::from_str::<Value>(&content).ok(),
                _ => None,
            };
            match chosen.as_ref().and_then(|c| c["to"].as_str()) {
                Some(to) => to.to_string(),
                None => return Ok(Err(Invalid("no target unit: the caller did not choose one".into()))),
            }
        }
    };
    let mut out = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        if host::cancelled() {
            return Err(error(ErrorCode::Cancelled, "cancelled".into()));
        }
        match convert(*v, src, &dst) {
            Ok(c) => out.push(c),
            Err(e) => return Ok(Err(e)),
        }
        let done = (i + 1) as f64;
        host::progress(done, Some(values.len() as f64), Some(&format!("{} of {}", i + 1, values.len())));
    }
    host::log(LogLevel::Info, &format!("converted {} values from {src} to {dst}", values.len()));
    Ok(Ok(json!({"values": out, "unit": dst})))
}

fn table() -> String {
    let rows: Vec<String> = UNITS
        .iter()
        .filter(|(_, dim, _)| *dim != "temperature")
        .map(|(u, dim, f)| format!("| `{u}` | {dim} | {f} |"))
        .collect();
    format!(
        "# Units\n\n| unit | dimension | in base units |\n|---|---|---|\n{}\n\nTemperatures: `C`, `F`, `K` (converted through kelvin).\n",
        rows.join("\n")
    )
}

fn object_schema(properties: Value, required: &[&str]) -> String {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false}).to_string()
}

struct Units;

impl Guest for Units {
    fn describe() -> Metadata {
        Metadata {
            name: "units".into(),
            version: "1.0.0".into(),
            description: "Converts between units of length, mass and temperature".into(),
        }
    }

    fn catalog() -> Result<Capabilities, Error> {
        let unit = json!({"type": "string", "enum": names()});
        let node = NodeSpec {
            name: "convert".into(),
            description: "Converts a value from one unit to another".into(),
            input_schema: object_schema(json!({"value": {"type": "number"}, "from": unit, "to": unit}), &["value", "from", "to"]),
            output_schema: json!({"type": "object", "properties": {"value": {"type": "number"}, "unit": {"type": "string"}}, "required": ["value", "unit"]}).to_string(),
            side_effects: false,
            stateful: false,
        };
        let many = Tool {
            name: "convert_many".into(),
            description: Some("Converts a list of values; asks for the target unit when `to` is missing".into()),
            input_schema: object_schema(
                json!({"values": {"type": "array", "items": {"type": "number"}}, "from": unit, "to": unit}),
                &["values", "from"],
            ),
            output_schema: None,
        };
        let prompt = Prompt {
            name: "explain_unit".into(),
            description: Some("Asks the model to explain a unit".into()),
            arguments: vec![PromptArgument {
                name: "unit".into(),
                description: Some("A unit symbol, such as `mi`".into()),
                required: true,
            }],
        };
        let resource = ResourceEntry {
            uri: "units://table".into(),
            name: "Unit table".into(),
            description: Some("Every unit this source knows".into()),
            mime_type: Some("text/markdown".into()),
        };
        Ok(Capabilities {
            tools: vec![many],
            node_specs: vec![node],
            prompts: vec![prompt],
            resources: vec![resource],
            resource_templates: vec![],
        })
    }

    fn call_tool(name: String, arguments: String) -> Result<ToolResult, Error> {
        let args: Value = serde_json::from_str(&arguments).unwrap_or_default();
        let outcome = match name.as_str() {
            "convert" => convert_node(&args),
            "convert_many" => convert_many(&args)?,
            _ => return Err(error(ErrorCode::NotFound, format!("no tool `{name}`"))),
        };
        Ok(match outcome {
            Ok(out) => {
                let text = out.to_string();
                ToolResult { content: vec![Content::Text(text.clone())], structured: Some(text), is_error: false }
            }
            Err(Invalid(message)) => ToolResult { content: vec![Content::Text(message)], structured: None, is_error: true },
        })
    }

    fn run_node(name: String, input: String) -> Result<String, Error> {
        if name != "convert" {
            return Err(error(ErrorCode::NotFound, format!("no node `{name}`")));
        }
        let input: Value = serde_json::from_str(&input).unwrap_or_default();
        convert_node(&input).map(|out| out.to_string()).map_err(|Invalid(m)| error(ErrorCode::InvalidArguments, m))
    }

    fn read_resource(uri: String) -> Result<Vec<ResourceContents>, Error> {
        if uri != "units://table" {
            return Err(error(ErrorCode::NotFound, format!("no resource `{uri}`")));
        }
        Ok(vec![ResourceContents { uri, mime_type: Some("text/markdown".into()), body: ResourceBody::Text(table()) }])
    }

    fn get_prompt(name: String, arguments: Vec<(String, String)>) -> Result<PromptResult, Error> {
        if name != "explain_unit" {
            return Err(error(ErrorCode::NotFound, format!("no prompt `{name}`")));
        }
        let given = arguments.into_iter().find(|(k, _)| k == "unit").map(|(_, v)| v).unwrap_or_default();
        let (dim, _) = unit(&given).map_err(|_| error(ErrorCode::InvalidArguments, format!("no unit `{given}`")))?;
        let text = format!("Explain the unit `{given}` ({dim}) to a newcomer, with one everyday example.");
        Ok(PromptResult {
            description: Some(format!("Explain {given}")),
            messages: vec![PromptMessage { role: Role::User, content: Content::Text(text) }],
        })
    }
}

export!(Units);
