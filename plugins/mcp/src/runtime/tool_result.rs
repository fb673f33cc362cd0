//! An upstream's tool result as wf's [`CallResult`], field by field: only
//! the content blocks change type, so the rest is moved, not serialised and
//! parsed again through a whole `Value` tree.

use rmcp::model::CallToolResult;
use serde_json::Value;
use wf_plugin_api::{CallResult, PluginError};

pub fn from_mcp(r: CallToolResult) -> Result<CallResult, PluginError> {
    let content = r
        .content
        .into_iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PluginError::upstream(format!("unexpected reply shape: {e}")))?;
    Ok(CallResult {
        content,
        structured_content: r.structured_content,
        is_error: r.is_error.unwrap_or(false),
        meta: r.meta.map(|m| Value::Object(m.0)),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The field-by-field conversion gives what the generic JSON round trip gave.
    #[test]
    fn matches_the_json_round_trip() {
        let replies = [
            json!({"content": [{"type": "text", "text": "hi"}]}),
            json!({"content": [{"type": "text", "text": "no"}], "isError": true}),
            json!({"content": [], "structuredContent": {"n": 1}, "_meta": {"k": 2}, "resultType": "complete"}),
            json!({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"},
                               {"type": "resource_link", "uri": "file:///x", "name": "x"}]}),
        ];
        for reply in replies {
            let r: CallToolResult = serde_json::from_value(reply).expect("valid MCP");
            let expected: CallResult =
                serde_json::from_value(serde_json::to_value(&r).expect("serialisable"))
                    .expect("CallResult");
            assert_eq!(from_mcp(r).expect("converts"), expected);
        }
    }
}
