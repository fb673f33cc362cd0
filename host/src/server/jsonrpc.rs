//! Reads one client message and says exactly what is wrong with it, for both
//! transports. rmcp alone drops a non-JSON stdio line, answers a malformed
//! HTTP body with 415, and turns a known method with ill-typed params into a
//! custom request (so the client sees -32601 instead of -32602).

use rmcp::model::{
    CallToolRequestMethod, ClientJsonRpcMessage, ClientRequest, CompleteRequestMethod, ConstString,
    DiscoverRequestMethod, GetPromptRequestMethod, InitializeResultMethod,
    ListPromptsRequestMethod, ListResourceTemplatesRequestMethod, ListResourcesRequestMethod,
    ListToolsRequestMethod, PingRequestMethod, ReadResourceRequestMethod, SetLevelRequestMethod,
    SubscribeRequestMethod, SubscriptionsListenRequestMethod, UnsubscribeRequestMethod,
};
use serde_json::{Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// JSON-RPC's implementation-defined server error range: wf is at a limit.
pub const SERVER_BUSY: i64 = -32000;
pub const METHOD_NOT_FOUND: i64 = -32601;

/// The methods the 2026-07-28 revision removed (the handshake, the session's
/// log level and resource subscriptions, now `subscriptions/listen`).
const REMOVED_IN_2026: [&str; 4] = [
    "initialize",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The `_meta` key that makes a request a 2026-07-28 one.
const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// A request for a method 2026-07-28 removed, sent as a 2026-07-28 request
/// (its `_meta` protocol version, or, without a session, its
/// `MCP-Protocol-Version` header): the -32601 reply the revision asks for
/// (over HTTP with status 404). `None` for anything else.
pub fn removed_in_2026(bytes: &[u8], header_version: Option<&str>) -> Option<Value> {
    // Every message passes here: its method alone is read first (no tree
    // built); the whole message only for one of the four methods, or one
    // that this read cannot judge.
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    if let Ok(head) = serde_json::from_slice::<Head<'_>>(bytes)
        && !head
            .method
            .is_some_and(|m| REMOVED_IN_2026.contains(&m.as_ref()))
    {
        return None;
    }
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let method = v.get("method")?.as_str()?;
    if !REMOVED_IN_2026.contains(&method) {
        return None;
    }
    let version = v
        .pointer("/params/_meta")
        .and_then(|m| m.get(PROTOCOL_VERSION_META))
        .and_then(Value::as_str)
        .or(header_version)?;
    // Revisions are dates: later ones sort after.
    if version < "2026-07-28" {
        return None;
    }
    let id = v.get("id").filter(|id| valid_id(id)).cloned();
    Some(error_reply(
        id,
        METHOD_NOT_FOUND,
        &format!("{method} does not exist in MCP {version}"),
    ))
}

/// Methods rmcp parses into typed params: if one of these arrives as a
/// custom request, its params did not fit.
const TYPED_METHODS: &[&str] = &[
    <InitializeResultMethod as ConstString>::VALUE,
    <PingRequestMethod as ConstString>::VALUE,
    <DiscoverRequestMethod as ConstString>::VALUE,
    <CompleteRequestMethod as ConstString>::VALUE,
    <SetLevelRequestMethod as ConstString>::VALUE,
    <GetPromptRequestMethod as ConstString>::VALUE,
    <ListPromptsRequestMethod as ConstString>::VALUE,
    <ListResourcesRequestMethod as ConstString>::VALUE,
    <ListResourceTemplatesRequestMethod as ConstString>::VALUE,
    <ReadResourceRequestMethod as ConstString>::VALUE,
    <SubscriptionsListenRequestMethod as ConstString>::VALUE,
    <SubscribeRequestMethod as ConstString>::VALUE,
    <UnsubscribeRequestMethod as ConstString>::VALUE,
    <CallToolRequestMethod as ConstString>::VALUE,
    <ListToolsRequestMethod as ConstString>::VALUE,
];

/// A message wf refuses, and the reply it deserves.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// The request's id, when it could be read; `None` for a notification or
    /// an unreadable message.
    pub id: Option<Value>,
    /// The message was a notification (has a method, no id): never answered.
    pub notification: bool,
    pub code: i64,
    pub message: String,
}

impl Rejection {
    fn new(v: Option<&Value>, code: i64, message: String) -> Self {
        let id = v
            .and_then(|v| v.get("id"))
            .filter(|id| valid_id(id))
            .cloned();
        let notification = id.is_none() && v.is_some_and(|v| v.get("method").is_some());
        Self {
            id,
            notification,
            code,
            message,
        }
    }

    /// The JSON-RPC error reply (`id: null` when the id is unknown).
    pub fn reply(&self) -> Value {
        error_reply(self.id.clone(), self.code, &self.message)
    }
}

pub fn error_reply(id: Option<Value>, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "error": {"code": code, "message": message}})
}

fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// The methods of the 2025-11-25 task flavour (`tasks/*` and a
/// task-augmented `tools/call`) arrive under this prefix: rmcp knows only the
/// SEP-2663 flavour (its `tasks/get` and `tasks/cancel` have other shapes and
/// need the extension declared), so wf answers these itself.
pub const TASKS_2025_PREFIX: &str = "wf/2025-11-25/";

const TASKS_2025_METHODS: [&str; 4] = ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"];

/// Where a `subscriptions/listen` filter's `taskIds` (the tasks extension's
/// key) travel to the handler: the request's `_meta` (rmcp's filter type has
/// no such member and drops it).
pub const LISTEN_TASK_IDS_META: &str = "wf/taskIds";

/// The message as wf's handler is to read it, when that differs from what
/// the client sent: a 2025-11-25 task request (not a 2026-07-28 one) renamed
/// under [`TASKS_2025_PREFIX`] (a JSON-RPC reply does not name its method, so
/// the client sees nothing of the rename), or a `subscriptions/listen` whose
/// filter's `taskIds` are copied to [`LISTEN_TASK_IDS_META`]. `None` for
/// anything else.
pub fn rewritten(bytes: &[u8]) -> Option<Vec<u8>> {
    // Cheap first: every such message has `"task` in it (memchr's search: a
    // byte-window loop cost 10 instructions a byte of every request).
    memchr::memmem::find(bytes, b"\"task")?;
    let mut v: Value = serde_json::from_slice(bytes).ok()?;
    let method = v.get("method")?.as_str()?;
    if method == <SubscriptionsListenRequestMethod as ConstString>::VALUE {
        let ids = v.pointer("/params/notifications/taskIds")?.clone();
        let params = v.get_mut("params")?.as_object_mut()?;
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        meta.as_object_mut()?
            .insert(LISTEN_TASK_IDS_META.into(), ids);
        return serde_json::to_vec(&v).ok();
    }
    let augmented_call = method == <CallToolRequestMethod as ConstString>::VALUE
        && v.pointer("/params/task").is_some_and(Value::is_object);
    if !augmented_call && !TASKS_2025_METHODS.contains(&method) {
        return None;
    }
    let version = v
        .pointer("/params/_meta")
        .and_then(|m| m.get(PROTOCOL_VERSION_META))
        .and_then(Value::as_str);
    if version.is_some_and(|v| v >= "2026-07-28") {
        return None;
    }
    let renamed = format!("{TASKS_2025_PREFIX}{method}");
    v["method"] = Value::String(renamed);
    serde_json::to_vec(&v).ok()
}

/// Parses one message, or says why it is refused.
pub fn check(bytes: &[u8]) -> Result<ClientJsonRpcMessage, Box<Rejection>> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let renamed = rewritten(bytes);
    check_rewritten(renamed.as_deref().unwrap_or(bytes))
}

/// [`check`] for a message [`rewritten`] has already been applied to (the
/// HTTP front's, whose body rmcp reads too): the scan is not made twice.
pub fn check_rewritten(bytes: &[u8]) -> Result<ClientJsonRpcMessage, Box<Rejection>> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if let Some(message) = fast_call(bytes) {
        return Ok(message);
    }
    match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(ClientJsonRpcMessage::Request(r)) => match &r.request {
            ClientRequest::CustomRequest(c) if TYPED_METHODS.contains(&c.method.as_str()) => {
                let detail = serde_json::to_value(&r)
                    .ok()
                    .and_then(|v| typed_error(&v))
                    .unwrap_or_default();
                Err(Box::new(Rejection {
                    id: Some(serde_json::to_value(&r.id).unwrap_or(Value::Null)),
                    notification: false,
                    code: INVALID_PARAMS,
                    message: format!("invalid params for {}{detail}", c.method),
                }))
            }
            _ => Ok(ClientJsonRpcMessage::Request(r)),
        },
        Ok(m) => Ok(m),
        Err(e) => match serde_json::from_slice::<Value>(bytes) {
            Err(_) => Err(Box::new(Rejection::new(
                None,
                PARSE_ERROR,
                format!("parse error: not JSON ({e})"),
            ))),
            Ok(v) => Err(Box::new(Rejection::new(
                Some(&v),
                INVALID_REQUEST,
                format!("invalid request: not a JSON-RPC 2.0 message ({e})"),
            ))),
        },
    }
}

/// A well-formed `tools/call` request, parsed straight into its variant.
///
/// rmcp's `ClientRequest` is an untagged union that tries its 22 variants in
/// order over a buffered copy of the message (`tools/call` is the 14th), under
/// two more buffering layers (the message's shape, then the request beside its
/// `jsonrpc` and `id`): ≈ 20 µs a call on the benchmark machine, a tenth of
/// what wf adds to one (docs/benchmarks.md). Here the envelope is read once,
/// and the request through the same `Request` deserializer rmcp's own variant
/// uses. Anything else, or anything unusual (a `result` or `error` member, a
/// bad `jsonrpc`, params that do not fit), returns `None` and takes the general
/// path, so both paths give the same message or the same refusal.
fn fast_call(bytes: &[u8]) -> Option<ClientJsonRpcMessage> {
    use std::borrow::Cow;

    /// Whether a member was there at all (even `null`), as rmcp's shape check asks.
    #[derive(Default)]
    struct Present(bool);
    impl<'de> serde::Deserialize<'de> for Present {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            serde::de::IgnoredAny::deserialize(d).map(|_| Present(true))
        }
    }
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[allow(dead_code, reason = "deserializing it checks the version")]
        jsonrpc: rmcp::model::JsonRpcVersion2_0,
        id: rmcp::model::RequestId,
        #[serde(borrow)]
        method: Cow<'a, str>,
        #[serde(default)]
        result: Present,
        #[serde(default)]
        error: Present,
    }
    let envelope: Envelope = serde_json::from_slice(bytes).ok()?;
    if envelope.result.0 || envelope.error.0 {
        return None;
    }
    let request = match envelope.method.as_ref() {
        m if m == <CallToolRequestMethod as ConstString>::VALUE => {
            ClientRequest::CallToolRequest(serde_json::from_slice(bytes).ok()?)
        }
        _ => return None,
    };
    Some(ClientJsonRpcMessage::Request(
        rmcp::model::JsonRpcRequest::new(envelope.id, request),
    ))
}

/// Why the params of a known request did not parse, for the error message.
fn typed_error(v: &Value) -> Option<String> {
    // Re-parse the params as the typed request's to get serde's own reason.
    let method = v.get("method")?.as_str()?;
    let params = v.get("params").cloned().unwrap_or(Value::Null);
    let err = match method {
        m if m == <CallToolRequestMethod as ConstString>::VALUE => {
            serde_json::from_value::<rmcp::model::CallToolRequestParams>(params).err()
        }
        m if m == <GetPromptRequestMethod as ConstString>::VALUE => {
            serde_json::from_value::<rmcp::model::GetPromptRequestParams>(params).err()
        }
        m if m == <ReadResourceRequestMethod as ConstString>::VALUE => {
            serde_json::from_value::<rmcp::model::ReadResourceRequestParams>(params).err()
        }
        _ => None,
    }?;
    Some(format!(": {err}"))
}

/// Reads the `id` of a message cut short (a line over the size limit): the
/// first top-level `"id"` member, when its value is complete in `prefix`.
pub fn id_in_prefix(prefix: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < prefix.len() {
        match prefix[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let start = i;
                i += 1;
                while i < prefix.len() && prefix[i] != b'"' {
                    if prefix[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if depth == 1 && &prefix[start..(i + 1).min(prefix.len())] == b"\"id\"" {
                    let rest = &prefix[(i + 1).min(prefix.len())..];
                    let rest = rest.trim_ascii_start().strip_prefix(b":")?;
                    let mut values =
                        serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
                    let id = values.next()?.ok().filter(valid_id)?;
                    // A number that reaches the end of the prefix may go on.
                    return (values.byte_offset() < rest.len()).then_some(id);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn removed_methods_of_2026_requests_are_method_not_found() {
        let meta = |m: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"{m}","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}}}}"#
            )
        };
        for m in [
            "initialize",
            "logging/setLevel",
            "resources/subscribe",
            "resources/unsubscribe",
        ] {
            let r = super::removed_in_2026(meta(m).as_bytes(), None).unwrap();
            assert_eq!(r["error"]["code"], -32601, "{m}");
            assert_eq!(r["id"], 7);
        }
        assert!(super::removed_in_2026(meta("tools/list").as_bytes(), None).is_none());
        let plain = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        // A 2025-11-25 initialize stays what it is.
        assert!(super::removed_in_2026(plain, None).is_none());
        assert!(super::removed_in_2026(plain, Some("2025-11-25")).is_none());
        assert!(super::removed_in_2026(plain, Some("2026-07-28")).is_some());
    }

    use super::*;

    #[test]
    fn the_2025_task_flavour_is_renamed_and_the_2026_one_is_not() {
        let method = |bytes: &[u8]| match check(bytes).unwrap() {
            ClientJsonRpcMessage::Request(r) => serde_json::to_value(&r).unwrap()["method"].clone(),
            _ => Value::Null,
        };
        for m in ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"] {
            let b =
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{m}","params":{{"taskId":"t"}}}}"#);
            assert_eq!(method(b.as_bytes()), json!(format!("wf/2025-11-25/{m}")));
        }
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{"ttl":5}}}"#;
        assert_eq!(method(call), json!("wf/2025-11-25/tools/call"));
        // A plain call, and a call whose arguments merely mention a task.
        let plain = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"task":{}}}}"#;
        assert_eq!(method(plain), json!("tools/call"));
        // A 2026-07-28 tasks/get is rmcp's (SEP-2663).
        let modern = br#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert_eq!(method(modern), json!("tasks/get"));
        // A listen's task ids reach the handler in `_meta`.
        let listen = br#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["wft-1"]},"_meta":{"x":1}}}"#;
        let v: Value = serde_json::from_slice(&rewritten(listen).unwrap()).unwrap();
        assert_eq!(
            v["params"]["_meta"],
            json!({"x": 1, "wf/taskIds": ["wft-1"]})
        );
    }

    #[test]
    fn exact_codes() {
        let e = check(b"{not json").unwrap_err();
        assert_eq!((e.code, e.id.clone()), (PARSE_ERROR, None));
        assert_eq!(e.reply()["id"], Value::Null);

        let e = check(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":"oops"}}"#)
            .unwrap_err();
        assert_eq!((e.code, e.id.clone()), (INVALID_PARAMS, Some(json!(7))));
        assert!(e.message.contains("tools/call"), "{}", e.message);

        let e = check(br#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#).unwrap_err();
        assert_eq!((e.code, e.id.clone()), (INVALID_REQUEST, Some(json!("a"))));

        let e = check(br#"{"jsonrpc":"1.0","method":"notifications/x"}"#).unwrap_err();
        assert!(e.notification, "{e:?}");

        assert!(check(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1}}}"#).is_ok());
        // Methods wf does not know still reach the handler (it answers -32601).
        assert!(
            check(br#"{"jsonrpc":"2.0","id":1,"method":"vendor/thing","params":{"a":1}}"#).is_ok()
        );
        // A params array is not an MCP request.
        let e =
            check(br#"{"jsonrpc":"2.0","id":1,"method":"vendor/thing","params":[1]}"#).unwrap_err();
        assert_eq!(e.code, INVALID_REQUEST);
    }

    /// rmcp's own parse, the general path.
    fn general(bytes: &[u8]) -> Value {
        serde_json::to_value(serde_json::from_slice::<ClientJsonRpcMessage>(bytes).unwrap())
            .unwrap()
    }

    #[test]
    fn the_fast_path_gives_rmcps_message() {
        let calls: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":"a-7","method":"tools/call","params":{"name":"fx__echo","arguments":{"message":"h\u00e9 \"q\"","n":1.5,"big":18446744073709551615,"neg":-3,"list":[null,true,{"k":[]}]}}}"#,
            br#"{"method":"tools/call","params":{"_meta":{"progressToken":"p1","io.modelcontextprotocol/protocolVersion":"2026-07-28","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},"name":"t","arguments":{}},"id":99,"jsonrpc":"2.0"}"#,
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{"a":1},"requestState":"s1","inputResponses":{"q":{"action":"accept","content":{"x":1}}}},"extra":{"ignored":true}}"#,
        ];
        for bytes in calls {
            let fast = fast_call(bytes).expect("a well-formed tools/call takes the fast path");
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                general(bytes),
                "{}",
                String::from_utf8_lossy(bytes)
            );
            assert!(
                matches!(&fast, ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::CallToolRequest(_)))
            );
        }
    }

    #[test]
    fn anything_unusual_takes_the_general_path() {
        let others: &[&[u8]] = &[
            // Not tools/call.
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            // Not a request, or not only one.
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"result":null}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"error":{}}"#,
            br#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"x"}}"#,
            // Params that do not fit.
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":"oops"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            b"{not json",
        ];
        for bytes in others {
            assert!(
                fast_call(bytes).is_none(),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn id_of_a_cut_message() {
        assert_eq!(
            id_in_prefix(br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"#),
            Some(json!(42))
        );
        assert_eq!(
            id_in_prefix(br#"{"params":{"id":1,"x":"}"},"id":"abc","#),
            Some(json!("abc"))
        );
        assert_eq!(id_in_prefix(br#"{"jsonrpc":"2.0","params":{"id":3,"#), None);
        assert_eq!(id_in_prefix(br#"{"id":12"#), None, "the number may go on");
        assert_eq!(id_in_prefix(b"garbage"), None);
    }
}
