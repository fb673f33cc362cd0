//! A 2026-07-28 stateless `tools/call` answered in the request's own task.
//!
//! rmcp serves each stateless request by starting a whole service for it: a
//! one-message transport, a serve loop spawned as a task, the handler spawned
//! again from that loop, the answer passed back over a channel, and the body
//! parsed a second time (docs/benchmarks.md, "The HTTP front": 130 µs of a
//! call). Here the message `check_messages` already parsed goes straight to
//! the same handler, through rmcp's own `Service::handle_request` (so its
//! version checks and result shaping still apply), and the answer is written
//! as the JSON body.
//!
//! Only a request whose answer cannot differ from rmcp's is taken: anything
//! that could send a message before the answer (a progress token, a log
//! level), any header rmcp would have to judge (SEP-2243 parameter headers,
//! an encoded or duplicated `Mcp-Name`, a quality-weighted `Accept`), a
//! session header, or a tool wf does not know goes to rmcp as before.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header, request::Parts};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    ClientRequest, ErrorCode, GetExtensions, GetMeta, JsonRpcRequest, ProtocolVersion,
    RequestMetaObject, ServerJsonRpcMessage,
};
use rmcp::service::{RequestContext, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{Peer, RoleServer, ServerHandler, Service};
use serde_json::Value;

use super::headers::{SESSION_HEADER, accepts_json_and_sse, sole};
use super::late::message_in_time;
use crate::app::App;
use crate::server::Surfaces;
use crate::server::mcp::caller::LOG_LEVEL_META;
use crate::server::mcp::handler::WfServer;

/// Serves the requests [`Direct::takes`] accepts.
pub struct Direct {
    app: Arc<App>,
    surfaces: Surfaces,
    /// The peer every direct request's context carries. A handler needs one,
    /// and rmcp makes one only for a running service; what this request path
    /// admits never sends on it (no progress token, no log level, and a
    /// 2026-07-28 request may not ask the client anything), so it leads to a
    /// service that drops what it is given.
    peer: Peer<RoleServer>,
    _detached: RunningService<RoleServer, Detached>,
    /// How long an answer may keep the connection silent (see [`message_in_time`]).
    patience: Duration,
}

impl Direct {
    pub fn new(app: Arc<App>, surfaces: Surfaces, patience: Duration) -> Self {
        // As rmcp's stateless path does: the peer speaks the request's version,
        // so a server-to-client request on it is refused, never sent.
        let info = rmcp::model::InitializeRequestParams::new(
            Default::default(),
            rmcp::model::Implementation::default(),
        )
        .with_protocol_version(ProtocolVersion::V_2026_07_28);
        let detached = rmcp::service::serve_directly(Detached, Dropping, Some(info));
        Self {
            app,
            surfaces,
            peer: detached.peer().clone(),
            _detached: detached,
            patience,
        }
    }

    /// How long an answer may keep its connection silent: the streams'
    /// keep-alive interval.
    pub fn patience(&self) -> Duration {
        self.patience
    }

    /// Whether `request`, with these headers, is one this path answers
    /// exactly as rmcp would.
    pub fn takes(&self, headers: &HeaderMap, request: &JsonRpcRequest<ClientRequest>) -> bool {
        let ClientRequest::CallToolRequest(call) = &request.request else {
            return false;
        };
        takes_call(
            headers,
            request.request.get_meta(),
            &call.params.name,
            |name| {
                self.app
                    .projection()
                    .tool_has_param_headers(name)
                    .map(|h| !h)
            },
        )
    }

    pub async fn serve(
        &self,
        parts: Parts,
        mut request: JsonRpcRequest<ClientRequest>,
    ) -> Response {
        let server = WfServer::new(self.app.clone(), self.surfaces.clone(), true);
        let id = request.id.clone();
        let mut context = RequestContext::new(id.clone(), self.peer.clone());
        std::mem::swap(&mut context.meta, request.request.get_meta_mut());
        std::mem::swap(&mut context.extensions, request.request.extensions_mut());
        context.extensions.insert(parts);
        // The client hanging up drops this future, and with it the call;
        // the token tells whatever the call handed work to.
        let cancel_when_done = context.ct.clone().drop_guard();
        let answer = Box::pin(async move {
            let _cancel_when_done = cancel_when_done;
            match Service::handle_request(&server, request.request, context).await {
                Ok(result) => ServerJsonRpcMessage::response(result, id),
                Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
            }
        });
        let response = message_in_time(answer, self.patience, reply).await;
        tracing::debug!("tools/call answered in place");
        response
    }
}

/// The gate for one `tools/call` of tool `name`; `plain` says, for a tool
/// wf serves, whether its schema leaves the request's headers nothing to check.
fn takes_call(
    headers: &HeaderMap,
    meta: &RequestMetaObject,
    name: &str,
    plain: impl FnOnce(&str) -> Option<bool>,
) -> bool {
    // What `missing_required_keys` checks for 2026-07-28, with the version
    // compared as text rather than decoded twice.
    meta.get("io.modelcontextprotocol/protocolVersion")
        .and_then(Value::as_str)
        == Some(ProtocolVersion::V_2026_07_28.as_str())
        && meta.client_capabilities().is_some()
        && meta.get_progress_token().is_none()
        && !meta.contains_key(LOG_LEVEL_META)
        && sole(headers, "mcp-protocol-version") == Some(ProtocolVersion::V_2026_07_28.as_str())
        && sole(headers, "mcp-method") == Some("tools/call")
        && sole(headers, "mcp-name") == Some(name)
        && !name.starts_with("=?")
        && !headers.contains_key(SESSION_HEADER)
        && !headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
        && accepts_json_and_sse(headers)
        && plain(name) == Some(true)
}

/// The whole answer as JSON, with the status rmcp gives a stateless answer;
/// a call a quota refused is 429 with `Retry-After` (the body is still the
/// JSON-RPC error, naming the rule and when it frees).
fn reply(message: &ServerJsonRpcMessage) -> Response {
    if let ServerJsonRpcMessage::Error(e) = message
        && let Some(after) = limit_refusal(&e.error)
    {
        let mut response = json_reply(StatusCode::TOO_MANY_REQUESTS, message);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(after));
        return response;
    }
    let status = match message {
        ServerJsonRpcMessage::Error(e) => match e.error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    };
    json_reply(status, message)
}

/// The seconds until it frees, when `error` is the call pipeline's `limit`
/// stage refusing a call (`data.stage`, `data.retryAfterSeconds`).
fn limit_refusal(error: &rmcp::model::ErrorData) -> Option<u64> {
    let data = error.data.as_ref()?;
    if data.get("stage")?.as_str()? != "limit" {
        return None;
    }
    data.get("retryAfterSeconds")?.as_u64()
}

/// `message` as the JSON body of a response with `status`.
pub(super) fn json_reply(status: StatusCode, message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(message) {
        Ok(body) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!("cannot serialise an answer: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// The handler behind the detached peer; it is never sent a request.
struct Detached;

impl ServerHandler for Detached {}

/// A transport that receives nothing and drops what it is given.
struct Dropping;

impl Transport<RoleServer> for Dropping {
    type Error = std::convert::Infallible;

    fn name() -> Cow<'static, str> {
        "detached".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // The kind only: a message may carry a call's data.
        let kind = match item {
            ServerJsonRpcMessage::Request(_) => "request",
            ServerJsonRpcMessage::Notification(_) => "notification",
            _ => "answer",
        };
        tracing::debug!(
            kind,
            "a message from a direct call had nowhere to go; dropped"
        );
        std::future::ready(Ok(()))
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        std::future::pending()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn a_call_a_quota_refused_is_429_with_retry_after_and_other_refusals_are_not() {
        let answer = |data: Value| {
            let e = rmcp::model::ErrorData::invalid_params("refused", Some(data));
            reply(&ServerJsonRpcMessage::error(
                e,
                Some(rmcp::model::NumberOrString::Number(1)),
            ))
        };
        let limited = answer(json!({"stage": "limit", "policy": "q", "retryAfterSeconds": 12}));
        assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(limited.headers()[header::RETRY_AFTER], "12");
        let denied = answer(json!({"stage": "authorize", "policy": "p"}));
        assert_eq!(denied.status(), StatusCode::OK);
        assert!(!denied.headers().contains_key(header::RETRY_AFTER));
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    const PLAIN: &[(&str, &str)] = &[
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "fix__echo"),
    ];

    fn meta(extra: Value) -> RequestMetaObject {
        let mut m = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        });
        m.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(m).unwrap()
    }

    fn takes(h: &HeaderMap, m: &RequestMetaObject) -> bool {
        takes_call(h, m, "fix__echo", |_| Some(true))
    }

    #[test]
    fn a_plain_call_is_taken() {
        assert!(takes(&headers(PLAIN), &meta(json!({}))));
    }

    #[test]
    fn anything_that_may_send_first_or_lacks_metadata_is_left_to_rmcp() {
        let h = headers(PLAIN);
        assert!(!takes(&h, &meta(json!({"progressToken": 1}))));
        assert!(!takes(&h, &meta(json!({LOG_LEVEL_META: "debug"}))));
        let old = meta(json!({"io.modelcontextprotocol/protocolVersion": "2025-11-25"}));
        assert!(!takes(&h, &old));
        assert!(!takes(&h, &RequestMetaObject::default()));
        // A tool wf does not know, or whose schema names parameter headers.
        assert!(!takes_call(&h, &meta(json!({})), "fix__echo", |_| None));
        assert!(!takes_call(&h, &meta(json!({})), "fix__echo", |_| Some(
            false
        )));
    }

    #[test]
    fn headers_rmcp_must_judge_are_left_to_it() {
        let m = meta(json!({}));
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut h = headers(PLAIN);
            for (k, v) in extra {
                h.append(*k, HeaderValue::from_static(v));
            }
            takes(&h, &m)
        };
        assert!(!with(&[("mcp-method", "tools/call")]), "a duplicate");
        assert!(!with(&[("mcp-session-id", "s")]));
        assert!(!with(&[("mcp-param-message", "x")]));
        let without = |name: &str| {
            let mut h = headers(PLAIN);
            h.remove(name);
            takes(&h, &m)
        };
        for name in ["mcp-method", "mcp-name", "mcp-protocol-version", "accept"] {
            assert!(!without(name), "{name} missing");
        }
        let mut h = headers(PLAIN);
        h.insert("mcp-name", HeaderValue::from_static("fix__other"));
        assert!(!takes(&h, &m));
        h.insert(
            "mcp-name",
            HeaderValue::from_static("=?base64?Zml4X19lY2hv?="),
        );
        assert!(!takes(&h, &m));
    }
}
