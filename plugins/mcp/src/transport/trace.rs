//! An upstream request within a traced call: a fresh child of the call's
//! W3C context goes in the request's `_meta` (`traceparent`, `tracestate`;
//! [`crate::transport::http`] copies it into the HTTP header), and the request's span
//! is reported to the host when it ends. Nothing happens for untraced calls.

use rmcp::model::{ClientRequest, GetMeta};
use serde_json::{Map, Value};
use wf_plugin_api::CallContext;
use wf_plugin_api::trace::{ReportedSpan, TraceContext, now_unix_nano};

/// The span of one upstream request; reported when dropped.
pub struct Upstream<'a> {
    ctx: &'a CallContext,
    source: String,
    span: ReportedSpan,
}

impl<'a> Upstream<'a> {
    /// Starts the span and stamps `request` with its context.
    pub fn start(ctx: &'a CallContext, request: &mut ClientRequest, source: &str) -> Option<Self> {
        let parent = ctx.trace_context()?;
        let own = parent.child();
        let method = request.method().to_string();
        let mut attributes = Map::new();
        attributes.insert("mcp.method.name".into(), Value::String(method.clone()));
        let name = match request {
            ClientRequest::CallToolRequest(r) => {
                let tool = r.params.name.to_string();
                attributes.insert("gen_ai.tool.name".into(), Value::String(tool.clone()));
                format!("{method} {tool}")
            }
            ClientRequest::GetPromptRequest(r) => format!("{method} {}", r.params.name),
            _ => method,
        };
        stamp(request, &own);
        // A lease's runtime is named `<source>#lease-N`: the span names the source.
        let source = source.split_once('#').map_or(source, |(s, _)| s);
        Some(Self {
            ctx,
            source: source.to_string(),
            span: ReportedSpan {
                name,
                traceparent: own.traceparent,
                parent_span_id: parent.span_id().to_string(),
                start_unix_nano: now_unix_nano(),
                end_unix_nano: 0,
                attributes,
                // Until told otherwise: an early return is a failure.
                error: Some("the upstream request failed".into()),
            },
        })
    }

    /// How the request ended (before the span is dropped).
    pub fn outcome<T, E: std::fmt::Display>(&mut self, result: &Result<T, E>) {
        self.span.error = result.as_ref().err().map(ToString::to_string);
    }
}

impl Drop for Upstream<'_> {
    fn drop(&mut self) {
        self.span.end_unix_nano = now_unix_nano();
        self.ctx.report_span(&self.source, self.span.clone());
    }
}

fn stamp(request: &mut ClientRequest, own: &TraceContext) {
    let meta = request.get_meta_mut();
    meta.set_traceparent(own.traceparent.clone());
    if let Some(s) = &own.tracestate {
        meta.set_tracestate(s.clone());
    }
}
