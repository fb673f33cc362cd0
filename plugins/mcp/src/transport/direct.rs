//! wf's own requests on a stdio session, beside rmcp's: a plain `tools/call`
//! is written straight to the child's stdin and its reply handed straight
//! back, without rmcp's service task in between (its channel, its responder
//! pool, a task wake-up each way). See `runtime::direct` for which calls
//! take this path.
//!
//! Ids are strings `wf-<n>`, a namespace of their own: rmcp numbers its
//! requests, so the two never collide. The stdio transport hands every
//! response whose id is in that namespace to the [`Table`], never to rmcp
//! (which would warn about a response to a request it never sent); the rest
//! goes to rmcp as before. When the transport's stream ends, every waiting
//! request fails as an rmcp request would: the session is closed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorData, GetMeta, JsonRpcMessage,
    ProgressToken, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::RxJsonRpcMessage;
use rmcp::{ClientHandler, Peer, RoleClient};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::oneshot;

/// The prefix of wf's own request ids.
const PREFIX: &str = "wf-";

/// A stdio child's stdin, one JSON-RPC message a line (`None` once closed),
/// shared by rmcp's sends and wf's own.
pub type Stdin = Arc<tokio::sync::Mutex<Option<ChildStdin>>>;

/// The reply to a direct request: its result or the upstream's error.
pub type Reply = Result<ServerResult, ErrorData>;

/// The direct-request table of the session's current stdio transport
/// (a session opened with `protocol = "auto"` may start two processes, the
/// second one after the first failed): none for an HTTP session.
#[derive(Clone, Default)]
pub struct Slot(Arc<Mutex<Option<Arc<Table>>>>);

impl Slot {
    /// A new transport's table, which replaces the previous one.
    pub fn attach(&self, stdin: Stdin) -> Arc<Table> {
        let table = Arc::new(Table {
            stdin,
            next: AtomicU64::new(1),
            waiting: Mutex::default(),
            envelope: OnceLock::new(),
        });
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(table.clone());
        table
    }

    /// The table to send direct requests on, if this is a stdio session.
    pub fn table(&self) -> Option<Arc<Table>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the stdio transport's stream has ended. The calls that waited
    /// learn it before rmcp's service does: the next call must not take the
    /// session for alive meanwhile.
    pub fn ended(&self) -> bool {
        self.table().is_some_and(|t| t.lock().ended)
    }
}

#[derive(Default)]
struct Waiting {
    /// The stream ended: nothing more will be answered.
    ended: bool,
    calls: HashMap<u64, oneshot::Sender<Reply>>,
}

/// The direct requests waiting on one stdio transport.
pub struct Table {
    stdin: Stdin,
    next: AtomicU64,
    waiting: Mutex<Waiting>,
    /// The `_meta` rmcp adds to every request of a 2026-07-28 session
    /// (`None` on a 2025-11-25 one), built once.
    envelope: OnceLock<Option<Envelope>>,
}

/// rmcp's per-request `_meta` of a 2026-07-28 session, and its members as
/// JSON (`"k":v,…`, no braces), serialised once per session.
pub struct Envelope {
    meta: RequestMetaObject,
    json: Vec<u8>,
}

/// The session has ended: no direct request can be sent on it.
#[derive(Debug)]
pub struct Ended;

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a request before it is sent (its reply may come before the
    /// write returns). Dropping the [`Pending`] forgets it.
    pub fn start(self: &Arc<Self>) -> Result<Pending, Ended> {
        let (tx, rx) = oneshot::channel();
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut waiting = self.lock();
        if waiting.ended {
            return Err(Ended);
        }
        waiting.calls.insert(n, tx);
        drop(waiting);
        Ok(Pending {
            table: self.clone(),
            n,
            id: RequestId::String(format!("{PREFIX}{n}").into()),
            rx,
        })
    }

    /// Takes a message read off the stream if it is the reply to a direct
    /// request (delivered, or dropped when nobody waits for it any more);
    /// anything else is given back, for rmcp.
    pub fn route(
        &self,
        message: RxJsonRpcMessage<RoleClient>,
    ) -> Option<RxJsonRpcMessage<RoleClient>> {
        let (n, reply) = match message {
            JsonRpcMessage::Response(r) => match own(&r.id) {
                Some(n) => (n, Ok(r.result)),
                None => return Some(JsonRpcMessage::Response(r)),
            },
            JsonRpcMessage::Error(e) => match e.id.as_ref().and_then(own) {
                Some(n) => (n, Err(e.error)),
                None => return Some(JsonRpcMessage::Error(e)),
            },
            other => return Some(other),
        };
        let waiter = self.lock().calls.remove(&n);
        match waiter {
            Some(tx) => {
                let _ = tx.send(reply);
            }
            None => tracing::debug!(id = n, "a reply to a direct request nobody waits for"),
        }
        None
    }

    /// The stream ended: every waiting request fails (its sender dropped),
    /// and no new one starts.
    pub fn end(&self) {
        let calls = {
            let mut waiting = self.lock();
            waiting.ended = true;
            std::mem::take(&mut waiting.calls)
        };
        drop(calls);
    }

    /// How many direct requests wait for their reply.
    pub fn waiting(&self) -> usize {
        self.lock().calls.len()
    }

    /// What rmcp adds to each request's `_meta` on this session: on a
    /// 2026-07-28 session (no `initialize`), the protocol version, the
    /// client's info and capabilities (rmcp's `ClientRequestMetadata`).
    pub fn envelope<H: ClientHandler>(
        &self,
        peer: &Peer<RoleClient>,
        handler: &H,
    ) -> Option<&Envelope> {
        self.envelope
            .get_or_init(|| {
                let meta = envelope(peer, handler)?;
                let json = serde_json::to_vec(&meta.0.0).ok()?;
                let json = json.get(1..json.len() - 1)?.to_vec();
                Some(Envelope { meta, json })
            })
            .as_ref()
    }

    /// Writes one line to the child's stdin. The line is always written
    /// whole: if this future is dropped halfway (the call cancelled while
    /// the pipe was full), the rest is written by a task of its own, so the
    /// stream never carries a partial message.
    pub async fn write(&self, line: Vec<u8>) -> std::io::Result<()> {
        let mut w = Unfinished {
            stdin: Some(self.stdin.clone().lock_owned().await),
            line,
            done: 0,
        };
        while w.done < w.line.len() {
            let Some(stdin) = w.stdin.as_mut().and_then(|s| s.as_mut()) else {
                return Err(closed());
            };
            let n = stdin.write(&w.line[w.done..]).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            w.done += n;
        }
        // A pipe has nothing buffered to flush; as rmcp's codec does anyway.
        match w.stdin.as_mut().and_then(|s| s.as_mut()) {
            Some(stdin) => stdin.flush().await,
            None => Err(closed()),
        }
    }
}

/// The error a write to a closed stdin gets (as the transport's own writes).
pub fn closed() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotConnected, "Transport is closed")
}

/// A line being written, with the stdin lock held.
struct Unfinished {
    stdin: Option<tokio::sync::OwnedMutexGuard<Option<ChildStdin>>>,
    line: Vec<u8>,
    done: usize,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.done == 0 || self.done >= self.line.len() {
            return;
        }
        let (Some(mut stdin), Ok(rt)) = (self.stdin.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let rest = self.line.split_off(self.done);
        rt.spawn(async move {
            if let Some(w) = stdin.as_mut() {
                let _ = w.write_all(&rest).await;
                let _ = w.flush().await;
            }
        });
    }
}

/// A direct request's wait for its reply; forgotten when dropped.
pub struct Pending {
    table: Arc<Table>,
    n: u64,
    id: RequestId,
    rx: oneshot::Receiver<Reply>,
}

impl Pending {
    /// The request's id (`wf-<n>`).
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The reply; `None` when the stream ended first.
    pub async fn reply(&mut self) -> Option<Reply> {
        (&mut self.rx).await.ok()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.table.lock().calls.remove(&self.n);
    }
}

/// The number of a direct request's id, if `id` is one.
fn own(id: &RequestId) -> Option<u64> {
    match id {
        RequestId::String(s) => s.strip_prefix(PREFIX)?.parse().ok(),
        RequestId::Number(_) => None,
    }
}

fn envelope<H: ClientHandler>(peer: &Peer<RoleClient>, handler: &H) -> Option<RequestMetaObject> {
    let info = peer.peer_info()?;
    if info.protocol_version.has_initialize() {
        return None;
    }
    let client = handler.get_info();
    let mut meta = RequestMetaObject::new();
    meta.set_protocol_version(info.protocol_version.clone());
    meta.set_client_info(client.client_info);
    meta.set_client_capabilities(client.capabilities);
    Some(meta)
}

/// The line of a direct request, as rmcp would write it on this session:
/// the session's envelope (rmcp's per-request metadata), then the call's
/// `_meta`, then the JSON-RPC message as the transport serialises it. A
/// progress token only when `progress` (its caller asked for progress: the
/// token is the request's own id, where rmcp numbers its tokens, so the two
/// never collide); rmcp gives every request one, which for a caller that
/// asked for none would only ask the upstream for notifications that wf
/// reads and drops.
pub fn line(
    request: ClientRequest,
    envelope: Option<&Envelope>,
    meta: Option<RequestMetaObject>,
    id: &RequestId,
    progress: bool,
) -> serde_json::Result<Vec<u8>> {
    if let ClientRequest::CallToolRequest(call) = &request
        && let Some(line) = call_line(
            &call.params,
            request.get_meta(),
            envelope,
            meta.as_ref(),
            id,
            progress,
        )
    {
        return Ok(line);
    }
    general_line(request, envelope, meta, id, progress)
}

/// [`line`] through rmcp's own types: the request's `_meta` built as rmcp
/// builds it, the message serialised as the transport does.
pub fn general_line(
    mut request: ClientRequest,
    envelope: Option<&Envelope>,
    meta: Option<RequestMetaObject>,
    id: &RequestId,
    progress: bool,
) -> serde_json::Result<Vec<u8>> {
    if let Some(envelope) = envelope {
        request.get_meta_mut().extend(envelope.meta.clone());
    }
    if let Some(meta) = meta {
        request.get_meta_mut().extend(meta);
    }
    if progress {
        // Last, as rmcp sets its own.
        request
            .get_meta_mut()
            .set_progress_token(ProgressToken(id.clone()));
    }
    let message = ClientJsonRpcMessage::request(request, id.clone());
    let mut line = serde_json::to_vec(&message)?;
    line.push(b'\n');
    Ok(line)
}

/// A `tools/call` line written member by member, in the order and with the
/// skips of rmcp's serialisation (`JsonRpcRequest`, then
/// `CallToolRequestParams`), the session's envelope copied as serialised
/// once: serialising rmcp's request through its types cost ≈ 40 K
/// instructions a call. `None` (take [`general_line`]) when a `_meta` key
/// would be set twice, where rmcp's map keeps one.
fn call_line(
    params: &CallToolRequestParams,
    own: &RequestMetaObject,
    envelope: Option<&Envelope>,
    meta: Option<&RequestMetaObject>,
    id: &RequestId,
    progress: bool,
) -> Option<Vec<u8>> {
    // rmcp merges a `_meta` of the params' own with the request's: not here.
    if params.meta.is_some() {
        return None;
    }
    let own = Some(&own.0.0);
    let env = envelope.map(|e| &e.meta.0.0);
    let taken = |k: &str| {
        k == "progressToken"
            || own.is_some_and(|m| m.contains_key(k))
            || env.is_some_and(|m| m.contains_key(k))
    };
    if let Some(own) = own
        && own
            .keys()
            .any(|k| k == "progressToken" || env.is_some_and(|m| m.contains_key(k)))
    {
        return None;
    }
    if let Some(meta) = meta
        && meta.0.0.keys().any(|k| taken(k))
    {
        return None;
    }
    let mut out =
        Vec::with_capacity(160 + envelope.map_or(0, |e| e.json.len()) + params.name.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    serde_json::to_writer(&mut out, id).ok()?;
    out.extend_from_slice(br#","method":"tools/call","params":{"#);
    let meta_at = out.len();
    out.extend_from_slice(br#""_meta":{"#);
    // The call's own keys (the trace context), the envelope, the forwarded keys.
    let mut first = true;
    for (k, v) in own.into_iter().flatten() {
        member(&mut out, &mut first, k, v)?;
    }
    if let Some(e) = envelope.filter(|e| !e.json.is_empty()) {
        separate(&mut out, &mut first);
        out.extend_from_slice(&e.json);
    }
    for (k, v) in meta.into_iter().flat_map(|m| m.0.0.iter()) {
        member(&mut out, &mut first, k, v)?;
    }
    if progress {
        separate(&mut out, &mut first);
        out.extend_from_slice(br#""progressToken":"#);
        serde_json::to_writer(&mut out, id).ok()?;
    }
    if first {
        // Nothing in it: no `_meta`, as rmcp leaves out an empty one.
        out.truncate(meta_at);
    } else {
        out.extend_from_slice(b"},");
    }
    out.extend_from_slice(br#""name":"#);
    serde_json::to_writer(&mut out, &params.name).ok()?;
    if let Some(arguments) = &params.arguments {
        out.extend_from_slice(br#","arguments":"#);
        serde_json::to_writer(&mut out, arguments).ok()?;
    }
    if let Some(responses) = &params.input_responses {
        out.extend_from_slice(br#","inputResponses":"#);
        serde_json::to_writer(&mut out, responses).ok()?;
    }
    if let Some(state) = &params.request_state {
        out.extend_from_slice(br#","requestState":"#);
        serde_json::to_writer(&mut out, state).ok()?;
    }
    out.extend_from_slice(b"}}\n");
    Some(out)
}

/// A comma before every member but the first.
fn separate(out: &mut Vec<u8>, first: &mut bool) {
    if !std::mem::take(first) {
        out.push(b',');
    }
}

/// One `"key":value` member of an object.
fn member(out: &mut Vec<u8>, first: &mut bool, k: &str, v: &serde_json::Value) -> Option<()> {
    separate(out, first);
    serde_json::to_writer(&mut *out, k).ok()?;
    out.push(b':');
    serde_json::to_writer(&mut *out, v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{
        CallToolRequestParams, CallToolResult, ErrorCode, JsonRpcError, JsonRpcResponse,
        JsonRpcVersion2_0, Request,
    };
    use serde_json::{Value, json};

    /// A table whose stdin is a real pipe (`cat` to /dev/null).
    fn table() -> (Arc<Table>, tokio::process::Child) {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "cat >/dev/null"])
            .stdin(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sh");
        let stdin = child.stdin.take().unwrap();
        let slot = Slot::default();
        let table = slot.attach(Arc::new(tokio::sync::Mutex::new(Some(stdin))));
        assert!(Arc::ptr_eq(&table, &slot.table().unwrap()));
        (table, child)
    }

    fn response(id: RequestId) -> RxJsonRpcMessage<RoleClient> {
        JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id,
            result: ServerResult::CallToolResult(CallToolResult::success(vec![])),
        })
    }

    #[tokio::test]
    async fn a_reply_reaches_its_caller_and_nothing_is_left() {
        let (table, _child) = table();
        let mut first = table.start().unwrap();
        let mut second = table.start().unwrap();
        assert_eq!(first.id(), &RequestId::String("wf-1".into()));
        assert_eq!(table.waiting(), 2);
        // Out of order, and an error for the first.
        assert!(table.route(response(second.id().clone())).is_none());
        let error = JsonRpcMessage::Error(JsonRpcError {
            jsonrpc: JsonRpcVersion2_0,
            id: Some(first.id().clone()),
            error: ErrorData::new(
                ErrorCode(-32603),
                "too large",
                Some(json!({"max_message_bytes": 9})),
            ),
        });
        assert!(table.route(error).is_none());
        assert!(matches!(
            second.reply().await,
            Some(Ok(ServerResult::CallToolResult(_)))
        ));
        let e = first.reply().await.unwrap().unwrap_err();
        assert_eq!(e.data, Some(json!({"max_message_bytes": 9})));
        assert_eq!(table.waiting(), 0);
        drop((first, second));
        assert_eq!(table.waiting(), 0);
    }

    #[tokio::test]
    async fn everything_else_goes_to_rmcp() {
        let (table, _child) = table();
        let _pending = table.start().unwrap();
        // rmcp's numeric ids, ids outside wf's namespace, requests and notifications.
        for id in [
            RequestId::Number(1),
            RequestId::String("1".into()),
            RequestId::String("wf-x".into()),
        ] {
            assert!(table.route(response(id)).is_some());
        }
        let request: RxJsonRpcMessage<RoleClient> =
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": "wf-1", "method": "roots/list"}))
                .unwrap();
        assert!(
            table.route(request).is_some(),
            "the upstream's own request ids are its own"
        );
        let note: RxJsonRpcMessage<RoleClient> = serde_json::from_value(
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        )
        .unwrap();
        assert!(table.route(note).is_some());
        assert_eq!(table.waiting(), 1);
    }

    #[tokio::test]
    async fn a_cancelled_call_leaves_no_entry_and_its_late_reply_is_dropped() {
        let (table, _child) = table();
        let pending = table.start().unwrap();
        let id = pending.id().clone();
        drop(pending);
        assert_eq!(table.waiting(), 0);
        assert!(table.route(response(id)).is_none(), "never handed to rmcp");
        assert_eq!(table.waiting(), 0);
    }

    #[tokio::test]
    async fn the_end_of_the_stream_fails_every_waiter_and_every_later_call() {
        let (table, _child) = table();
        let mut a = table.start().unwrap();
        let mut b = table.start().unwrap();
        table.end();
        assert!(a.reply().await.is_none());
        assert!(b.reply().await.is_none());
        assert_eq!(table.waiting(), 0);
        assert!(table.start().is_err());
    }

    #[tokio::test]
    async fn a_line_is_written_whole() {
        let (table, _child) = table();
        table.write(b"{}\n".to_vec()).await.unwrap();
        *table.stdin.lock().await = None;
        let e = table.write(b"{}\n".to_vec()).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotConnected);
    }

    /// The direct line as it goes out, for a plain call: no progress token
    /// (its caller asked for none), so no `_meta` at all when nothing else
    /// goes in it, the same line through rmcp's types.
    #[test]
    fn the_line_of_a_call() {
        let params = CallToolRequestParams::new("echo")
            .with_arguments(json!({"text": "hi"}).as_object().unwrap().clone());
        let request = ClientRequest::CallToolRequest(Request::new(params));
        let id = RequestId::String("wf-3".into());
        let line = line(request.clone(), None, None, &id, false).unwrap();
        assert!(line.ends_with(b"\n") && !line[..line.len() - 1].contains(&b'\n'));
        assert_eq!(
            line,
            general_line(request.clone(), None, None, &id, false).unwrap()
        );
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "id": "wf-3", "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "hi"}}})
        );
        // A caller that asked for progress: the id is the token.
        let with = super::line(request.clone(), None, None, &id, true).unwrap();
        assert_eq!(with, general_line(request, None, None, &id, true).unwrap());
        let v: Value = serde_json::from_slice(&with).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "id": "wf-3", "method": "tools/call",
                   "params": {"_meta": {"progressToken": "wf-3"},
                              "name": "echo", "arguments": {"text": "hi"}}})
        );
    }
}
