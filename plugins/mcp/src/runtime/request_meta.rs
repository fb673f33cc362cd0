//! The `_meta` wf adds to a call's request upstream, from the call's own
//! request: the client's keys, which are meant for the server (as they
//! would reach it directly), and — on a 2026-07-28 session, where an upstream
//! sends log messages only to a request that asks for them — a log level.
//!
//! Left out: `progressToken` (wf's own token for the upstream request),
//! the protocol's `io.modelcontextprotocol/` keys (the session's envelope,
//! wf's to say), trace context (wf's span continues the trace) and wf's own
//! `wf/` keys.

use rmcp::model::RequestMetaObject;
use serde_json::{Map, Value};
use wf_plugin_api::CallContext;

/// The protocol's `_meta` key of a 2026-07-28 request's log level.
const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// The protocol's `_meta` key a 2026-07-28 client's request carries.
const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// Keys of the caller's `_meta` that are not passed upstream.
fn reserved(key: &str) -> bool {
    key == "progressToken"
        || key.starts_with("io.modelcontextprotocol/")
        || key.starts_with("wf/")
        || matches!(key, "traceparent" | "tracestate" | "baggage")
}

/// The `_meta` to add to the request of a call from `ctx`, merged over
/// `extra` (e.g. a task's capabilities, which win); `modern`: the session
/// speaks 2026-07-28.
pub(super) fn forwarded(
    ctx: Option<&CallContext>,
    modern: bool,
    extra: Option<RequestMetaObject>,
) -> Option<RequestMetaObject> {
    let Some(ctx) = ctx else { return extra };
    let info = ctx.info_ref();
    let own = info.get("meta").and_then(Value::as_object);
    let out = of_client(own, modern);
    if out.is_empty() {
        return extra;
    }
    let mut meta = RequestMetaObject::new();
    meta.0.0 = out;
    if let Some(extra) = extra {
        meta.extend(extra);
    }
    Some(meta)
}

/// The keys taken from a client's request `_meta`.
fn of_client(own: Option<&Map<String, Value>>, modern: bool) -> Map<String, Value> {
    let mut out: Map<String, Value> = own
        .into_iter()
        .flatten()
        .filter(|(k, _)| !reserved(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if modern {
        let own_level = own.and_then(|m| m.get(LOG_LEVEL)).cloned();
        let is_2026_client = own.is_some_and(|m| m.contains_key(PROTOCOL_VERSION));
        match own_level {
            // A 2026-07-28 client's own opt-in, as it would reach the upstream.
            Some(level) => {
                out.insert(LOG_LEVEL.into(), level);
            }
            // A 2025-11-25 client set its level with `logging/setLevel` on
            // wf, which filters what it is sent: the upstream sends all.
            None if !is_2026_client => {
                out.insert(LOG_LEVEL.into(), Value::from("debug"));
            }
            // A 2026-07-28 client that asked for no log messages.
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_clients_own_keys_pass_and_the_protocols_do_not() {
        let own = map(json!({
            "example.com/trace": "abc", "progressToken": 7, "traceparent": "00-x",
            "io.modelcontextprotocol/clientInfo": {}, "wf/runId": "r"
        }));
        assert_eq!(
            of_client(Some(&own), false),
            map(json!({"example.com/trace": "abc"}))
        );
    }

    #[test]
    fn a_2026_session_gets_the_log_level_each_client_generation_wants() {
        // A 2025-11-25 client: wf filters at its level, the upstream sends all.
        assert_eq!(
            of_client(None, true),
            map(json!({"io.modelcontextprotocol/logLevel": "debug"}))
        );
        // A 2026-07-28 client with its own level; and one without.
        let with = map(json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/logLevel": "warning"
        }));
        assert_eq!(
            of_client(Some(&with), true),
            map(json!({"io.modelcontextprotocol/logLevel": "warning"}))
        );
        let without = map(json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}));
        assert!(of_client(Some(&without), true).is_empty());
        // A 2025-11-25 session never gets it.
        assert!(of_client(None, false).is_empty());
    }
}
