//! Which upstream session a downstream call uses (see `sources::sessions`),
//! and the host-local `wf_session__open` / `wf_session__close` tools that give
//! stateless (2026-07-28) clients a handle on a session of their own.
//!
//! A call's client is its MCP connection: a stdio connection or a 2025-11-25
//! HTTP session (`Mcp-Session-Id`). A 2026-07-28 HTTP request has none; with
//! a handle in `_meta["wf/session"]` it uses the handle's sessions, without
//! one it uses its principal's session (documented: such clients that need
//! isolation from each other open a handle).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wf_plugin_api::{CallResult, Catalog, Tool};

use crate::app::App;
use crate::server::identity::principals::principal_of;
use crate::sources::SourceHandle;
use crate::sources::sessions::{HANDLE_META_KEY, SessionCaller, SessionError, SessionUse};

/// The host-local source of the handle tools (projected as `wf_session__*`).
pub const SESSION_SOURCE: &str = "wf.session";

/// A downstream connection's identity for `client` scope: opaque, never a
/// protocol session id (those are credentials).
pub fn new_client_id(http: bool) -> Arc<str> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}-{n}", if http { "http" } else { "stdio" }).into()
}

fn parts(context: &RequestContext<RoleServer>) -> Option<&http::request::Parts> {
    context.extensions.get::<http::request::Parts>()
}

/// Who is calling: the principal the HTTP guard set, `local` over stdio.
pub fn principal(context: &RequestContext<RoleServer>) -> String {
    principal_of(context).name().to_string()
}

/// A 2026-07-28 HTTP request: no protocol session to tie state to.
/// Whether `context` is a stateless (sessionless) HTTP request.
pub fn is_stateless(http: bool, context: &RequestContext<RoleServer>) -> bool {
    http && stateless(context)
}

fn stateless(context: &RequestContext<RoleServer>) -> bool {
    parts(context).is_some_and(|p| !p.headers.contains_key("mcp-session-id"))
}

/// The caller of a request, for sessions: its principal, and its client —
/// the handle in `_meta["wf/session"]` (checked against the principal), else
/// the connection, else (a stateless request) none.
pub fn caller(
    app: &App,
    http: bool,
    client: &str,
    ended: &CancellationToken,
    context: &RequestContext<RoleServer>,
) -> Result<SessionCaller, McpError> {
    let principal = principal(context);
    let presented = context.meta.get(HANDLE_META_KEY);
    let (client, gone) = match presented {
        Some(Value::String(sealed)) => {
            let secret = unseal(app, sealed)?;
            let label = app
                .sessions
                .check_handle(&principal, &secret)
                .map_err(refusal)?;
            (Some(label), None)
        }
        Some(_) => {
            return Err(McpError::invalid_params(
                format!("_meta[{HANDLE_META_KEY:?}] must be the string wf_session__open returned"),
                None,
            ));
        }
        None if http && stateless(context) => (None, None),
        None => (Some(client.to_string()), Some(ended.clone())),
    };
    Ok(SessionCaller {
        principal,
        client,
        gone,
        http,
        scopes: None,
    })
}

/// The caller behind a client's notification: its connection (a notification
/// carries no session handle).
pub fn notifying_caller(
    http: bool,
    client: &str,
    ended: &CancellationToken,
    context: &rmcp::service::NotificationContext<RoleServer>,
) -> SessionCaller {
    let parts = context.extensions.get::<http::request::Parts>();
    SessionCaller {
        principal: crate::server::identity::limits::principal_of_request(parts)
            .name()
            .to_string(),
        client: Some(client.to_string()),
        gone: Some(ended.clone()),
        http,
        scopes: None,
    }
}

/// The per-principal or per-client session `caller`'s call on `handle`'s
/// source uses, or None when the source is `shared`.
pub async fn session_for(
    app: &App,
    caller: &SessionCaller,
    handle: &Arc<SourceHandle>,
) -> Result<Option<SessionUse>, McpError> {
    app.sessions
        .session_for(caller, handle)
        .await
        .map_err(refusal)
}

fn refusal(e: SessionError) -> McpError {
    let data = Some(json!({"code": "session"}));
    match e {
        SessionError::Open { .. } => McpError::internal_error(e.to_string(), data),
        _ => McpError::invalid_request(e.to_string(), data),
    }
}

pub fn catalog() -> Catalog {
    let handle = json!({"type": "string", "description": "The handle wf_session__open returned"});
    Catalog::default()
        .tool(Tool::new(
            "open",
            "Opens a session handle for a client without a protocol session (MCP 2026-07-28). \
             Send it as _meta[\"wf/session\"] on each call: calls with the same handle share \
             their upstream sessions (browser pages, counters, ...), isolated from other clients. \
             Bound to the principal that opened it.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ))
        .tool(Tool::new(
            "close",
            "Closes a session handle and every upstream session opened with it.",
            json!({"type": "object", "properties": {"handle": handle}, "required": ["handle"], "additionalProperties": false}),
        ))
}

/// A session handle as the client sees it: with several replicas, sealed
/// with this replica's id (handles.rs).
fn seal(app: &App, handle: String) -> String {
    match crate::server::handles::Seal::for_app(app) {
        Some(seal) => seal.issue(&handle),
        None => handle,
    }
}

/// The handle inside what a client presents; another replica's handle is a
/// retryable error naming it. A forged one is passed on as is (unknown).
fn unseal(app: &App, presented: &str) -> Result<String, McpError> {
    use crate::server::handles::{Owner, Seal, wrong_replica};
    let Some(seal) = Seal::for_app(app) else {
        return Ok(presented.to_string());
    };
    match seal.owner(presented) {
        Owner::Here(inner) => Ok(inner.to_string()),
        Owner::Elsewhere(owner) => Err(wrong_replica("session handle", &owner)),
        Owner::Forged => Ok(presented.to_string()),
    }
}

/// Runs one of the handle tools for `principal`. A handle of another
/// replica is a JSON-RPC error (-32050, retryable, naming the replica), as
/// for every other request that needs its handle's replica.
pub async fn call(
    app: &App,
    name: &str,
    args: Value,
    principal: &str,
) -> Result<CallResult, McpError> {
    let result = match name {
        "open" => app.sessions.open_handle(principal).map(|(handle, label)| {
            json!({"handle": seal(app, handle), "label": label, "meta_key": HANDLE_META_KEY})
        }),
        "close" => match args.get("handle").and_then(Value::as_str) {
            Some(h) => {
                let h = unseal(app, h)?;
                app.sessions
                    .close_handle(principal, &h)
                    .await
                    .map(|n| json!({"closed": true, "sessions_closed": n}))
            }
            None => return Ok(CallResult::error("close needs a \"handle\" (a string)")),
        },
        other => return Ok(CallResult::error(format!("unknown tool {other:?}"))),
    };
    Ok(match result {
        Ok(v) => CallResult::structured(v),
        Err(e) => CallResult::error(e.to_string()),
    })
}
