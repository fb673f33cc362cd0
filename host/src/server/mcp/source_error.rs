//! How a source's failure reaches an MCP client: as an MCP error that names
//! the source (for the handler's calls and for the requests it forwards), or,
//! for an upstream MCP server's own JSON-RPC error (the mcp plugin's data
//! `mcp_error`), that error as the upstream gave it: its code, message and
//! `data`, as the client would get them directly.

use rmcp::ErrorData as McpError;
use serde_json::json;
use wf_plugin_api::ErrorCode;

use crate::sources::SourceError;

/// A source failure as an MCP error that names the source.
pub(super) fn source_error(e: SourceError) -> McpError {
    if let Some(upstream) = upstream_error(&e) {
        return upstream;
    }
    let data = Some(json!({"source": e.source_name, "code": e.code().as_str()}));
    match e.code() {
        ErrorCode::NotFound => McpError::resource_not_found(e.to_string(), data),
        ErrorCode::InvalidArguments => McpError::invalid_params(e.to_string(), data),
        _ => McpError::internal_error(e.to_string(), data),
    }
}

/// The upstream's own JSON-RPC error the failure carries, if any.
fn upstream_error(e: &SourceError) -> Option<McpError> {
    if e.code() != ErrorCode::Upstream {
        return None;
    }
    let carried = e.error.data.as_ref()?.get("mcp_error")?;
    serde_json::from_value(carried.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wf_plugin_api::PluginError;

    fn failed(error: PluginError) -> McpError {
        source_error(SourceError {
            source_name: "up".into(),
            error,
        })
    }

    #[test]
    fn an_upstream_error_keeps_its_code_message_and_data() {
        let carried = json!({"code": -32050, "message": "refused", "data": {"n": 1}});
        let e = failed(
            PluginError::upstream("upstream error -32050: refused")
                .with_data(json!({"mcp_error": carried})),
        );
        assert_eq!(e.code.0, -32050);
        assert_eq!(e.message, "refused");
        assert_eq!(e.data, Some(json!({"n": 1})));
    }

    #[test]
    fn other_failures_name_the_source() {
        let e = failed(PluginError::upstream("gone"));
        assert_eq!(e.code.0, -32603);
        assert_eq!(e.data, Some(json!({"source": "up", "code": "upstream"})));
        // An error data that only looks like one: not an upstream failure.
        let e = failed(
            PluginError::failed("x").with_data(json!({"mcp_error": {"code": 1, "message": "m"}})),
        );
        assert_eq!(e.code.0, -32603);
    }
}
