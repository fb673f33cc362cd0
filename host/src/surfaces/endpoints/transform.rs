//! One tool's transform on an endpoint: the definition its clients see
//! (name, title, description, annotations, hidden and narrowed arguments,
//! output schema), and a client's arguments made into the original call.

use serde_json::{Map, Value};
use wf_plugin_api::Tool;

use crate::config::ToolTransform;

/// The definition shown on the endpoint, from the source's own.
pub fn shown(original: &Tool, t: &ToolTransform) -> Tool {
    let mut tool = original.clone();
    if let Some(d) = &t.description {
        tool.description = Some(d.clone());
    }
    if let Some(title) = &t.title {
        tool.extra
            .insert("title".into(), Value::String(title.clone()));
    }
    if let Some(a) = &t.annotations {
        let mut merged = match tool.extra.remove("annotations") {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        merged.extend(a.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(title) = &t.title {
            merged.insert("title".into(), Value::String(title.clone()));
        }
        tool.extra
            .insert("annotations".into(), Value::Object(merged));
    }
    match &t.output_schema {
        Some(Value::Bool(false)) => tool.output_schema = None,
        Some(s @ Value::Object(_)) => tool.output_schema = Some(s.clone()),
        _ => {}
    }
    narrow_schema(&mut tool.input_schema, t);
    tool
}

/// Hidden arguments leave the schema (and its `required`); defaults and
/// narrowed enums are written into their properties.
fn narrow_schema(schema: &mut Value, t: &ToolTransform) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for k in t.fixed.keys() {
            props.remove(k);
        }
        for (k, d) in &t.defaults {
            if let Some(Value::Object(p)) = props.get_mut(k) {
                p.insert("default".into(), d.clone());
            }
        }
        for (k, values) in &t.enums {
            if let Some(Value::Object(p)) = props.get_mut(k) {
                p.insert("enum".into(), Value::Array(values.clone()));
            }
        }
    }
    if let Some(Value::Array(required)) = obj.get_mut("required") {
        required.retain(|r| {
            r.as_str()
                .is_none_or(|r| !t.fixed.contains_key(r) && !t.defaults.contains_key(r))
        });
    }
}

/// A client's arguments as the original call: fixed values merged in,
/// defaults filled, narrowed enums enforced. A client value for a hidden
/// argument other than its fixed value is refused (never silently changed),
/// as is a value outside a narrowed enum.
pub fn call_arguments(
    tool: &str,
    args: &mut Map<String, Value>,
    t: &ToolTransform,
) -> Result<(), String> {
    for (k, fixed) in &t.fixed {
        match args.get(k) {
            Some(v) if v != fixed => {
                return Err(format!(
                    "{tool}: argument {k:?} is fixed on this endpoint and cannot be set"
                ));
            }
            _ => {
                args.insert(k.clone(), fixed.clone());
            }
        }
    }
    for (k, d) in &t.defaults {
        if !args.contains_key(k) {
            args.insert(k.clone(), d.clone());
        }
    }
    for (k, values) in &t.enums {
        if let Some(v) = args.get(k)
            && !values.contains(v)
        {
            let allowed: Vec<String> = values.iter().map(Value::to_string).collect();
            return Err(format!(
                "{tool}: argument {k:?} must be one of {} on this endpoint",
                allowed.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn transform() -> ToolTransform {
        ToolTransform {
            name: Some("file_bug".into()),
            title: Some("File a bug".into()),
            description: Some("Files a bug in the site's repository.".into()),
            annotations: Some(Map::from_iter([("readOnlyHint".into(), json!(false))])),
            fixed: Map::from_iter([("repo".into(), json!("acme/site"))]),
            defaults: Map::from_iter([("labels".into(), json!(["bug"]))]),
            enums: [("state".to_string(), vec![json!("open")])].into(),
            output_schema: Some(json!(false)),
        }
    }

    fn original() -> Tool {
        let mut t = Tool::new(
            "create_issue",
            "Creates an issue.",
            json!({"type": "object", "properties": {
                "repo": {"type": "string"}, "title": {"type": "string"},
                "labels": {"type": "array"}, "state": {"enum": ["open", "closed"]}
            }, "required": ["repo", "title"]}),
        );
        t.output_schema = Some(json!({"type": "object"}));
        t.extra
            .insert("annotations".into(), json!({"openWorldHint": true}));
        t
    }

    #[test]
    fn the_shown_definition_hides_fixes_and_narrows() {
        let t = shown(&original(), &transform());
        assert_eq!(
            t.description.as_deref(),
            Some("Files a bug in the site's repository.")
        );
        assert_eq!(t.extra["title"], "File a bug");
        assert_eq!(
            t.extra["annotations"],
            json!({"openWorldHint": true, "readOnlyHint": false, "title": "File a bug"})
        );
        assert!(t.output_schema.is_none());
        let props = &t.input_schema["properties"];
        assert!(props.get("repo").is_none());
        assert_eq!(props["labels"]["default"], json!(["bug"]));
        assert_eq!(props["state"]["enum"], json!(["open"]));
        assert_eq!(t.input_schema["required"], json!(["title"]));
    }

    #[test]
    fn calls_get_the_fixed_values_and_keep_to_the_enums() {
        let t = transform();
        let mut args = Map::from_iter([("title".into(), json!("x"))]);
        call_arguments("file_bug", &mut args, &t).unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"title": "x", "repo": "acme/site", "labels": ["bug"]})
        );
        let mut same = Map::from_iter([("repo".into(), json!("acme/site"))]);
        assert!(call_arguments("file_bug", &mut same, &t).is_ok());
        let mut other = Map::from_iter([("repo".into(), json!("evil/repo"))]);
        let e = call_arguments("file_bug", &mut other, &t).unwrap_err();
        assert!(e.contains("\"repo\" is fixed"), "{e}");
        let mut closed = Map::from_iter([("state".into(), json!("closed"))]);
        let e = call_arguments("file_bug", &mut closed, &t).unwrap_err();
        assert!(e.contains("must be one of \"open\""), "{e}");
    }
}
