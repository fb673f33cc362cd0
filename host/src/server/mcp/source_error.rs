//! How a source's failure reaches an MCP client: as an MCP error that names
//! the source (for the handler's calls and for the requests it forwards).

use rmcp::ErrorData as McpError;
use serde_json::json;
use wf_plugin_api::ErrorCode;

use crate::sources::SourceError;

/// A source failure as an MCP error that names the source.
pub(super) fn source_error(e: SourceError) -> McpError {
    let data = Some(json!({"source": e.source_name, "code": e.code().as_str()}));
    match e.code() {
        ErrorCode::NotFound => McpError::resource_not_found(e.to_string(), data),
        ErrorCode::InvalidArguments => McpError::invalid_params(e.to_string(), data),
        _ => McpError::internal_error(e.to_string(), data),
    }
}
