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
            CallToolResponse::Complete(r) => pending.finish(ended, Some(r)),
            _ => pending.finish::<()>(ended, None),
        }
    }
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
