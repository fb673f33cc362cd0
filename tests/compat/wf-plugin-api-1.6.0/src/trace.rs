//! Since 1.2: W3C trace context for a call, and the spans a plugin reports
//! back. The host puts the call's context under the info JSON key `"trace"`
//! (only when it exports traces); a plugin passes it on to what it calls and
//! reports each outgoing request as a [`ReportedSpan`] with
//! [`crate::Event::Span`], which the host exports as a child of the call.
//! Plugins link no exporter.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A W3C trace context (`traceparent`, optional `tracestate`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    /// `00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>`.
    pub traceparent: String,
    /// Vendor entries (`tracestate`), passed on unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// Parses the context from a call's info JSON (`{"trace": {...}}`);
    /// `None` when absent or when `traceparent` is not valid W3C.
    pub fn from_info(info: &Value) -> Option<Self> {
        let t = <Self as serde::Deserialize>::deserialize(info.get("trace")?).ok()?;
        if t.parts().is_some() { Some(t) } else { None }
    }
    fn parts(&self) -> Option<(&str, &str, &str)> {
        let mut it = self.traceparent.split('-');
        let (v, trace, span, flags) = (it.next()?, it.next()?, it.next()?, it.next()?);
        let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        let ok = v == "00"
            && it.next().is_none()
            && hex(trace, 32)
            && hex(span, 16)
            && hex(flags, 2)
            && trace.bytes().any(|b| b != b'0')
            && span.bytes().any(|b| b != b'0');
        ok.then_some((trace, span, flags))
    }
    /// The trace id (32 lowercase hex digits).
    pub fn trace_id(&self) -> &str {
        self.parts().map(|p| p.0).unwrap_or_default()
    }
    /// The parent span id: the span of the call in the host.
    pub fn span_id(&self) -> &str {
        self.parts().map(|p| p.1).unwrap_or_default()
    }
    /// A context for one outgoing request: same trace, a fresh span id (the
    /// request's own span, to report with [`ReportedSpan`]).
    pub fn child(&self) -> Self {
        let flags = self.parts().map(|p| p.2).unwrap_or("01");
        Self {
            traceparent: format!("00-{}-{}-{flags}", self.trace_id(), new_span_id()),
            tracestate: self.tracestate.clone(),
        }
    }
}

/// A random, non-zero span id (16 hex digits). Not for secrets.
fn new_span_id() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    loop {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(N.fetch_add(1, Ordering::Relaxed));
        h.write_u128(now_unix_nano() as u128);
        let id = h.finish();
        if id != 0 {
            return format!("{id:016x}");
        }
    }
}

/// Nanoseconds since the Unix epoch, for [`ReportedSpan`] times.
pub fn now_unix_nano() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A span a plugin measured (e.g. one upstream request), for the host to export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportedSpan {
    /// Span name (e.g. `tools/call echo`).
    pub name: String,
    /// The `traceparent` the plugin sent on (from [`TraceContext::child`]):
    /// its trace id and span id are this span's.
    pub traceparent: String,
    /// The parent span id (the call's, [`TraceContext::span_id`]).
    pub parent_span_id: String,
    /// When the span started ([`now_unix_nano`]).
    pub start_unix_nano: u64,
    /// When it ended.
    pub end_unix_nano: u64,
    /// Attributes (strings, numbers, booleans); no argument values.
    #[serde(default)]
    pub attributes: Map<String, Value>,
    /// Set when the request failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn reads_the_trace_key_and_makes_children_in_the_same_trace() {
        let t = TraceContext::from_info(&json!({"trace": {"traceparent": TP}})).unwrap();
        assert_eq!(t.trace_id(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(t.span_id(), "b7ad6b7169203331");
        let (a, b) = (t.child(), t.child());
        assert_eq!(a.trace_id(), t.trace_id());
        assert_ne!(a.span_id(), t.span_id());
        assert_ne!(a.span_id(), b.span_id());
        assert!(a.traceparent.ends_with("-01"));
    }

    #[test]
    fn absent_or_malformed_context_is_none() {
        assert_eq!(TraceContext::from_info(&json!({"meta": {}})), None);
        for bad in [
            "01-x",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "",
        ] {
            assert_eq!(
                TraceContext::from_info(&json!({"trace": {"traceparent": bad}})),
                None
            );
        }
    }
}
