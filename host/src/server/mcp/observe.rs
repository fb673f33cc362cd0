//! The trace span of one downstream MCP request: named for its method and
//! target, a child of the client's W3C context (`_meta.traceparent`, else the
//! HTTP `traceparent` header). `Span::none()` while traces are off. And the
//! per-method request counter.

use std::borrow::Cow;

use rmcp::model::*;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use tracing::Span;

use crate::pipeline::record::{self, Pending};
use crate::telemetry::{metrics, traces};

/// `what` is `"<method> <target>"` (e.g. `tools/call echo`).
pub(super) fn request_span(context: &RequestContext<RoleServer>, what: &str) -> Span {
    if !traces::enabled() {
        return Span::none();
    }
    let (method, target) = match what.split_once(' ') {
        Some((m, t)) => (m, Some(t)),
        None => (what, None),
    };
    let parts = context.extensions.get::<http::request::Parts>();
    let header = |k: &str| {
        parts
            .and_then(|p| p.headers.get(k))
            .and_then(|v| v.to_str().ok())
    };
    let meta = |k: &str| context.meta.get(k).and_then(|v| v.as_str());
    let parent = match meta("traceparent") {
        Some(tp) => Some((tp, meta("tracestate"))),
        None => header("traceparent").map(|tp| (tp, header("tracestate"))),
    };
    traces::request_span(method, target, header("mcp-session-id"), parent)
}

/// Counts one MCP request in `wf_requests_total{method,outcome}`: by
/// [`Counted::finish`], or as `error` when the handler returned early (`?`)
/// or was dropped (the client cancelled). An admitted call's audit record
/// ([`Counted::audited`]) ends with it: written by `finish` with the outcome,
/// or `cancelled` when dropped unfinished.
pub(super) struct Counted {
    method: &'static str,
    done: bool,
    audit: Option<Pending>,
}

impl Counted {
    pub(super) fn new(method: &'static str) -> Self {
        Self {
            method,
            done: false,
            audit: None,
        }
    }

    /// The audit record `finish` completes.
    pub(super) fn audited(&mut self, pending: Option<Pending>) {
        self.audit = pending;
    }

    /// Records `result`'s outcome and hands it back.
    pub(super) fn finish<T: Outcome>(mut self, result: Result<T, McpError>) -> Result<T, McpError> {
        self.done = true;
        let outcome = match &result {
            Ok(r) => r.outcome(),
            Err(e) => Cow::Owned(e.code.0.to_string()),
        };
        metrics::request(self.method, &outcome);
        if let Some(pending) = self.audit.take() {
            match &result {
                Ok(r) => {
                    let ended = match outcome.as_ref() {
                        "tool_error" => record::Outcome::ToolError,
                        "input_required" => record::Outcome::InputRequired,
                        _ => record::Outcome::Ok,
                    };
                    r.audited(pending, ended);
                }
                Err(e) => pending.finish::<()>(
                    record::Outcome::ProtocolError {
                        code: i64::from(e.code.0),
                        message: e.message.to_string(),
                    },
                    None,
                ),
            }
        }
        result
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if !self.done {
            metrics::request(self.method, "error");
        }
    }
}

/// The outcome label of a successful reply, and what its audit record keeps.
pub(super) trait Outcome {
    fn outcome(&self) -> Cow<'static, str> {
        Cow::Borrowed("ok")
    }

    /// Ends `pending` with this reply (its size and shape).
    fn audited(&self, pending: Pending, ended: record::Outcome) {
        pending.finish::<()>(ended, None);
    }
}

impl Outcome for CallToolResponse {
    fn outcome(&self) -> Cow<'static, str> {
        match self {
            CallToolResponse::Complete(r) if r.is_error == Some(true) => {
                Cow::Borrowed("tool_error")
            }
            CallToolResponse::InputRequired(_) => Cow::Borrowed("input_required"),
            _ => Cow::Borrowed("ok"),
        }
    }

    fn audited(&self, pending: Pending, ended: record::Outcome) {
        match self {
            CallToolResponse::Complete(r) => {
                pending.finish_shaped(ended, Some(r), |bytes| tool_result_shape(r, bytes))
            }
            _ => pending.finish::<()>(ended, None),
        }
    }
}
/// The audit's shape of `r` without a JSON copy of it; `None` for a content
/// block this build does not name (rmcp's enum is open), left to the copy.
fn tool_result_shape(r: &CallToolResult, bytes: usize) -> Option<serde_json::Value> {
    let kinds = r
        .content
        .iter()
        .map(|c| match c {
            ContentBlock::Text(_) => Some("text"),
            ContentBlock::Image(_) => Some("image"),
            ContentBlock::Audio(_) => Some("audio"),
            ContentBlock::Resource(_) => Some("resource"),
            ContentBlock::ResourceLink(_) => Some("resource_link"),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(crate::audit::shape::tool_result_shape(
        r.is_error,
        kinds.into_iter(),
        r.structured_content.as_ref(),
        bytes,
    ))
}

impl Outcome for () {}
impl Outcome for ListToolsResult {}
impl Outcome for ListPromptsResult {}
impl Outcome for ListResourcesResult {}
impl Outcome for ListResourceTemplatesResult {}
impl Outcome for GetPromptResponse {
    fn audited(&self, pending: Pending, ended: record::Outcome) {
        match self {
            GetPromptResponse::Complete(r) => pending.finish(ended, Some(r)),
            _ => pending.finish::<()>(record::Outcome::InputRequired, None),
        }
    }
}
impl Outcome for ReadResourceResponse {
    fn audited(&self, pending: Pending, ended: record::Outcome) {
        match self {
            ReadResourceResponse::Complete(r) => pending.finish(ended, Some(r)),
            _ => pending.finish::<()>(record::Outcome::InputRequired, None),
        }
    }
}
impl Outcome for CompleteResult {
    fn audited(&self, pending: Pending, ended: record::Outcome) {
        pending.finish(ended, Some(self));
    }
}
impl Outcome for GetTaskResult {}
impl Outcome for CustomResult {}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tool_results_shape_reads_as_from_its_json() {
        let results: Vec<CallToolResult> = [
            json!({"content": [{"type": "text", "text": "hi"}]}),
            json!({"content": [], "isError": true}),
            json!({"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"},
                               {"type": "resource_link", "uri": "file:///a", "name": "a"},
                               {"type": "resource", "resource": {"uri": "file:///b", "text": "b"}}],
                   "structuredContent": {"n": 1, "s": "abc", "deep": {"a": [1, 2]}}, "isError": false}),
            json!({"content": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}],
                   "structuredContent": null, "_meta": {"k": 1}}),
        ]
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
        for r in &results {
            let bytes = record::json_len(r);
            let from_json =
                crate::audit::shape::result_shape(&serde_json::to_value(r).unwrap(), bytes);
            assert_eq!(tool_result_shape(r, bytes), Some(from_json), "{r:?}");
        }
    }
}
