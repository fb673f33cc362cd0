//! In front of rmcp's HTTP service: reads a POST body within the size limit
//! and answers exactly what is wrong with it (400 -32700 for malformed JSON,
//! 400 -32600 for a non-JSON-RPC message, -32602 for ill-typed params),
//! refuses an `initialize` when the session bound is reached, answers a
//! method 2026-07-28 removed, sent as a 2026-07-28 request, with 404 and
//! -32601, and answers a
//! `DELETE` of an unknown session with 404. It also holds each request to its
//! principal's bounds (`limits`) by what the request is: a call waits for a
//! call slot, a stream (a GET, `subscriptions/listen`) takes a stream slot,
//! and session set-up and tear-down, notifications and answers take none.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ClientRequest, JsonRpcRequest};
use rmcp::transport::streamable_http_server::SessionManager;

use super::direct::Direct;
use super::headers::SESSION_HEADER;
use super::late;
use super::sessions::BoundedSessions;
use crate::server::identity::limits::{
    Cost, PrincipalLimits, RateLimitedWarn, hold, principal_of_request,
};
use crate::server::jsonrpc::{self, INVALID_PARAMS, SERVER_BUSY, error_reply};

pub struct Messages {
    pub max_body: usize,
    pub sessions: Arc<BoundedSessions>,
    /// Answers the plain stateless calls itself (`http_json_response` on).
    pub direct: Option<Direct>,
    /// The per-principal bounds.
    pub limits: Arc<PrincipalLimits>,
    too_large: RateLimitedWarn,
    sessions_full: RateLimitedWarn,
}

impl Messages {
    pub fn new(
        max_body: usize,
        sessions: Arc<BoundedSessions>,
        direct: Option<Direct>,
        limits: Arc<PrincipalLimits>,
    ) -> Self {
        Self {
            max_body,
            sessions,
            direct,
            limits,
            too_large: RateLimitedWarn::new(Duration::from_secs(10)),
            sessions_full: RateLimitedWarn::new(Duration::from_secs(10)),
        }
    }
}

fn json_error(status: StatusCode, body: serde_json::Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// A 2025-11-25 session another replica holds: 421 Misdirected Request (the
/// request may be retried, on that replica), naming it in a header and in a
/// JSON-RPC error, rather than rmcp's 404 (which tells the client its session
/// is gone and it must start over).
fn wrong_replica(owner: &str) -> Response {
    let e = crate::server::handles::wrong_replica("session", owner);
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": e.code.0, "message": e.message, "data": {"replica": owner, "retryable": true}},
    });
    let mut r = json_error(StatusCode::MISDIRECTED_REQUEST, body);
    if let Ok(v) = header::HeaderValue::from_str(owner) {
        r.headers_mut()
            .insert(crate::server::handles::REPLICA_HEADER, v);
    }
    r
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

async fn known_session(m: &Messages, headers: &HeaderMap) -> Option<bool> {
    let id = headers.get(SESSION_HEADER)?.to_str().ok()?;
    Some(
        m.sessions
            .has_session(&id.to_owned().into())
            .await
            .unwrap_or(true),
    )
}

/// The message checks, the last step of the HTTP front's middleware
/// (`server::http::front_door`) before rmcp's service.
pub async fn check_messages(m: &Messages, request: Request, next: Next) -> Response {
    if let Some(owner) = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|id| m.sessions.held_elsewhere(id))
    {
        return wrong_replica(&owner);
    }
    match *request.method() {
        Method::DELETE => {
            if known_session(m, request.headers()).await == Some(false) {
                return (StatusCode::NOT_FOUND, "Not Found: Session not found\n").into_response();
            }
            // rmcp ends the session and answers 202; clients (the official
            // Python one logs "Session termination failed: 202") expect 200.
            let response = next.run(request).await;
            if response.status() == StatusCode::ACCEPTED {
                return StatusCode::OK.into_response();
            }
            response
        }
        // rmcp answers a wrong content type (415) before reading the body.
        Method::POST if is_json(request.headers()) => post(m, request, next).await,
        // A 2025-11-25 session's stream of server messages.
        Method::GET => {
            let (parts, body) = request.into_parts();
            let principal = principal_of_request(Some(&parts));
            match m.limits.acquire(&principal, Cost::Stream).await {
                Ok(slot) => hold(next.run(Request::from_parts(parts, body)).await, slot),
                Err(refused) => m.limits.refusal(&principal, refused, None),
            }
        }
        _ => next.run(request).await,
    }
}

async fn read_body(m: &Messages, body: Body) -> Result<Bytes, Response> {
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            (
                StatusCode::BAD_REQUEST,
                format!("cannot read the request body: {e}\n"),
            )
                .into_response()
        })?;
        if buf.len() + chunk.len() > m.max_body {
            m.too_large.warn(|suppressed| {
                tracing::warn!(
                    max_request_bytes = m.max_body,
                    suppressed,
                    "HTTP request refused (413): body over server.max_request_bytes"
                )
            });
            return Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "Payload Too Large: request body exceeds {} bytes\n",
                    m.max_body
                ),
            )
                .into_response());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.into())
}

async fn post(m: &Messages, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = match read_body(m, body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    // Without a session, the header names the request's revision too.
    let header_version = (!parts.headers.contains_key(SESSION_HEADER))
        .then(|| parts.headers.get("mcp-protocol-version"))
        .flatten()
        .and_then(|v| v.to_str().ok());
    if let Some(reply) = jsonrpc::removed_in_2026(&bytes, header_version) {
        return json_error(StatusCode::NOT_FOUND, reply);
    }
    // rmcp reads the body again: it gets what wf's handler is to read (`rewritten`).
    let bytes = jsonrpc::rewritten(&bytes).map_or(bytes, Bytes::from);
    match jsonrpc::check_rewritten(&bytes) {
        Err(r) if r.code == INVALID_PARAMS => {
            // An unknown session is rmcp's to answer (404), whatever the body.
            if known_session(m, &parts.headers).await != Some(false) {
                tracing::debug!("refused an HTTP request: {}", r.message);
                if r.notification {
                    return StatusCode::ACCEPTED.into_response();
                }
                return json_error(StatusCode::OK, r.reply());
            }
        }
        Err(r) => {
            tracing::debug!("refused an HTTP request: {}", r.message);
            return json_error(StatusCode::BAD_REQUEST, r.reply());
        }
        Ok(ClientJsonRpcMessage::Request(req))
            if matches!(req.request, ClientRequest::InitializeRequest(_))
                && !parts.headers.contains_key(SESSION_HEADER)
                && m.sessions.open().await >= m.sessions.max() =>
        {
            m.sessions_full.warn(|suppressed| {
                tracing::warn!(
                    max = m.sessions.max(),
                    suppressed,
                    "HTTP session refused (503): too many open sessions (server.max_sessions)"
                )
            });
            let id = serde_json::to_value(&req.id).ok();
            let message = format!(
                "too many open sessions (server.max_sessions = {}): end one with DELETE, or wait for idle ones to expire",
                m.sessions.max()
            );
            return json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                error_reply(id, SERVER_BUSY, &message),
            );
        }
        Ok(ClientJsonRpcMessage::Request(req)) => {
            let cost = match &req.request {
                // Bounded by max_sessions, and what lets a client start at all.
                ClientRequest::InitializeRequest(_) => None,
                ClientRequest::SubscriptionsListenRequest(_) => Some(Cost::Stream),
                _ => Some(Cost::Call),
            };
            let Some(cost) = cost else {
                return serve_request(m, parts, bytes, req, next).await;
            };
            let principal = principal_of_request(Some(&parts));
            return match m.limits.acquire(&principal, cost).await {
                Ok(slot) => hold(serve_request(m, parts, bytes, req, next).await, slot),
                Err(refused) => {
                    let id = serde_json::to_value(&req.id).ok();
                    m.limits.refusal(&principal, refused, id)
                }
            };
        }
        Ok(ClientJsonRpcMessage::Notification(n)) if m.direct.is_some() => {
            // A call answered in place is unknown to the session's serve
            // loop, which still gets the notification (and ignores it).
            if let ClientNotification::CancelledNotification(c) = &n.notification
                && let Some(request) = &c.params.request_id
                && let Some(session) = parts.headers.get(SESSION_HEADER)
                && let Ok(session) = session.to_str()
            {
                m.sessions.calls().cancel(session, request);
            }
        }
        Ok(_) => {}
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Serves one JSON-RPC request: in place where wf answers it itself, else
/// through rmcp.
async fn serve_request(
    m: &Messages,
    parts: http::request::Parts,
    bytes: Bytes,
    req: JsonRpcRequest<ClientRequest>,
    next: Next,
) -> Response {
    // Each boxes its call (`late::in_time`).
    if let Some(direct) = &m.direct {
        if direct.takes(&parts.headers, &req) {
            return direct.serve(parts, req).await;
        }
        if let Some(served) = m.sessions.calls().takes(&parts.headers, &req) {
            let sessions = m.sessions.clone();
            let touch = move |id| async move { sessions.touch(&id).await };
            return served.serve(parts, req, touch, direct.patience()).await;
        }
        // A stateless request rmcp answers as JSON when it is done.
        if !parts.headers.contains_key(SESSION_HEADER)
            && !matches!(req.request, ClientRequest::InitializeRequest(_))
        {
            let id = serde_json::to_value(&req.id).unwrap_or_default();
            let answer = next.run(Request::from_parts(parts, Body::from(bytes)));
            return late::response_in_time(Box::pin(answer), id, direct.patience()).await;
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
