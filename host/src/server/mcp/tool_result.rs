//! A plugin's tool result handed to rmcp field by field: the content blocks
//! are the only part that changes type, so nothing else is serialised and
//! parsed again (the generic `complete` goes through a whole `Value` tree).

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject, ResultType};
use serde_json::Value;
use wf_plugin_api::CallResult;

/// `result` as rmcp's type, marked complete (rmcp drops `resultType` again
/// for clients of protocol versions before 2026-07-28).
pub fn to_mcp(result: CallResult) -> Result<CallToolResult, McpError> {
    let content = result
        .content
        .into_iter()
        .map(serde_json::from_value::<ContentBlock>)
        .collect::<Result<Vec<_>, _>>()
        .map_err(unconvertible)?;
    let meta = match result.meta {
        None => None,
        Some(Value::Object(m)) => Some(MetaObject(m)),
        Some(other) => return Err(unconvertible(format!("_meta is not an object: {other}"))),
    };
    let mut out = CallToolResult::success(content);
    out.result_type = Some(ResultType::COMPLETE);
    out.structured_content = result.structured_content;
    out.is_error = Some(result.is_error);
    out.meta = meta;
    Ok(out)
}

fn unconvertible(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(format!("cannot convert a plugin reply to MCP: {e}"), None)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The field-by-field conversion gives what the generic JSON round trip gave.
    #[test]
    fn matches_the_json_round_trip() {
        let results = [
            CallResult::text("hi"),
            CallResult::error("failed"),
            CallResult::structured(json!({"n": 1})),
            CallResult {
                content: vec![
                    json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
                    json!({"type": "resource_link", "uri": "file:///x", "name": "x"}),
                ],
                meta: Some(json!({"k": [1, 2]})),
                ..CallResult::default()
            },
        ];
        for r in results {
            let mut v = serde_json::to_value(&r).expect("serialisable");
            v["resultType"] = json!("complete");
            let expected: CallToolResult = serde_json::from_value(v).expect("valid MCP");
            assert_eq!(to_mcp(r).expect("converts"), expected);
        }
    }

    #[test]
    fn a_block_rmcp_cannot_read_is_a_clear_error() {
        let bad = CallResult {
            content: vec![json!({"type": "nonsense"})],
            ..CallResult::default()
        };
        let e = to_mcp(bad).expect_err("refused");
        assert!(
            e.message.contains("cannot convert a plugin reply to MCP"),
            "{e:?}"
        );
        let bad_meta = CallResult {
            meta: Some(json!(3)),
            ..CallResult::text("x")
        };
        assert!(to_mcp(bad_meta).is_err());
    }
}
