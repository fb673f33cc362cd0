//! Tool results checked against the tool's declared output schema: a client
//! validates `structuredContent` against `outputSchema` and fails the call
//! with a vague error on a mismatch, so the proxy says what is wrong instead.
//! Only tools that declare an output schema pay for the check; it is the
//! focused `wf_plugin_api::schema::instance_problems` (no full validator).

use serde_json::Value;
use wf_plugin_api::schema::instance_problems;
use wf_plugin_api::{CallResult, Tool};

/// How many mismatches an error names (the rest are counted).
const SHOWN: usize = 3;

/// `result` unchanged when it matches `tool`'s output schema (or the tool
/// declares none, or the result is an error); else a tool error that says
/// where the structured content departs from the schema. `reference` is the
/// tool's dotted ref (`source.name`).
pub fn check_output(reference: &str, tool: &Tool, result: CallResult) -> CallResult {
    match &tool.output_schema {
        Some(schema) => check_output_against(reference, schema, result),
        None => result,
    }
}

/// [`check_output`] against `schema` (an endpoint's, in place of the tool's).
pub fn check_output_against(reference: &str, schema: &Value, result: CallResult) -> CallResult {
    if result.is_error {
        return result;
    }
    let problems = match &result.structured_content {
        None => vec!["it has no structuredContent".to_string()],
        Some(v) => instance_problems(schema, v, "structuredContent"),
    };
    if problems.is_empty() {
        return result;
    }
    let more = problems.len().saturating_sub(SHOWN);
    let mut listed = problems[..problems.len().min(SHOWN)].join("; ");
    if more > 0 {
        listed.push_str(&format!(" (and {more} more)"));
    }
    let message = format!(
        "tool {reference} returned a result that does not match its output schema: {listed}"
    );
    tracing::warn!("{message}");
    CallResult::error(message)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool() -> Tool {
        Tool::new("count", "counts", json!({"type": "object"})).output_schema(
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
    }

    #[test]
    fn matching_results_pass_unchanged() {
        let ok = CallResult::structured(json!({"n": 1}));
        assert_eq!(check_output("s.count", &tool(), ok.clone()), ok);
        let plain = Tool::new("t", "t", json!({"type": "object"}));
        let text = CallResult::text("x");
        assert_eq!(check_output("s.t", &plain, text.clone()), text);
        let err = CallResult::error("failed");
        assert_eq!(check_output("s.count", &tool(), err.clone()), err);
    }

    #[test]
    fn a_mismatch_becomes_a_clear_tool_error() {
        let r = check_output(
            "s.count",
            &tool(),
            CallResult::structured(json!({"n": "1"})),
        );
        assert!(r.is_error);
        let text = r.content[0]["text"].as_str().unwrap();
        assert!(
            text.contains("tool s.count returned a result that does not match its output schema: structuredContent.n: expected integer, got string"),
            "{text}"
        );
        let r = check_output("s.count", &tool(), CallResult::text("no structure"));
        assert!(
            r.content[0]["text"]
                .as_str()
                .unwrap()
                .contains("no structuredContent")
        );
    }
}
