//! The upstream's messages read off a stdio line, with a `tools/call` reply
//! parsed in one pass.
//!
//! rmcp's `ServerJsonRpcMessage` is a shape check over a buffered copy of the
//! message, then the untagged `ServerResult`, which tries its variants in
//! order (a tool result is the 16th), each failure building a serde error:
//! the largest single cost of the plugin's side of a call
//! (docs/benchmarks.md, "the call path"). Here a reply whose `result` has
//! only a tool result's members is read straight into `CallToolResult`;
//! anything else, or anything unusual, goes through rmcp's own codec, so
//! both paths give the same message, the same skip or the same error.

use rmcp::RoleClient;
use rmcp::model::{
    CallToolResult, JsonRpcResponse, JsonRpcVersion2_0, RequestId, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;

/// One complete line (with its newline) from the upstream: a message, a line
/// to skip (`Ok(None)`: blank, or a notification rmcp ignores), or rmcp's
/// reason to refuse it.
pub fn decode(
    line: &[u8],
) -> Result<Option<RxJsonRpcMessage<RoleClient>>, JsonRpcMessageCodecError> {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    if body.is_empty() {
        return Ok(None);
    }
    if let Some(message) = tool_reply(body) {
        return Ok(Some(message));
    }
    let mut buf = BytesMut::from(line);
    if !line.ends_with(b"\n") {
        buf.extend_from_slice(b"\n");
    }
    JsonRpcMessageCodec::<RxJsonRpcMessage<RoleClient>>::new().decode(&mut buf)
}

/// The members a tool result may have for the general parse to read it as
/// one: every `ServerResult` variant before `CallToolResult` needs a member
/// outside this set (the tests check it against rmcp's own parse).
const TOOL_RESULT_MEMBERS: [&str; 5] = [
    "content",
    "structuredContent",
    "isError",
    "_meta",
    "resultType",
];

/// A `result` object with `content` and nothing outside [`TOOL_RESULT_MEMBERS`]
/// (its values are skipped here and read in the second pass).
struct ToolResultShape;

impl<'de> Deserialize<'de> for ToolResultShape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = ToolResultShape;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a tool result")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                // One bit per member of TOOL_RESULT_MEMBERS seen; `content` is bit 0.
                let mut seen = 0u8;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let Some(i) = TOOL_RESULT_MEMBERS.iter().position(|m| *m == key) else {
                        return Err(serde::de::Error::custom("not only a tool result's members"));
                    };
                    if seen & (1 << i) != 0 {
                        return Err(serde::de::Error::custom("a duplicate member"));
                    }
                    seen |= 1 << i;
                    map.next_value::<IgnoredAny>()?;
                }
                if seen & 1 == 0 {
                    return Err(serde::de::Error::custom("no content"));
                }
                Ok(ToolResultShape)
            }
        }
        d.deserialize_map(Members)
    }
}

/// Whether a member was there at all (even `null`), as rmcp's shape check asks.
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Present(true))
    }
}

#[derive(Deserialize)]
struct Envelope {
    #[allow(dead_code, reason = "deserializing it checks the version")]
    jsonrpc: JsonRpcVersion2_0,
    #[allow(dead_code, reason = "a response needs one; read in the second pass")]
    id: RequestId,
    #[allow(dead_code, reason = "deserializing it checks the members")]
    result: ToolResultShape,
    #[serde(default)]
    method: Present,
    #[serde(default)]
    error: Present,
}

/// A well-formed tool reply (`jsonrpc`, `id`, a `result` with a tool result's
/// members only; no `method`, no `error`), or `None` for the general path.
fn tool_reply(body: &[u8]) -> Option<ServerJsonRpcMessage> {
    let envelope: Envelope = serde_json::from_slice(body).ok()?;
    if envelope.method.0 || envelope.error.0 {
        return None;
    }
    let reply: JsonRpcResponse<CallToolResult> = serde_json::from_slice(body).ok()?;
    Some(ServerJsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: reply.jsonrpc,
        id: reply.id,
        result: ServerResult::CallToolResult(reply.result),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rmcp's messages have no `PartialEq`: compared as their JSON.
    type Seen = Result<Option<serde_json::Value>, String>;

    fn seen(r: Result<Option<ServerJsonRpcMessage>, JsonRpcMessageCodecError>) -> Seen {
        r.map(|m| m.map(|m| serde_json::to_value(m).unwrap()))
            .map_err(|e| e.to_string())
    }

    /// rmcp's own parse of a line, as its stdio transport reads it.
    fn general(line: &[u8]) -> Seen {
        let mut buf = BytesMut::from(line);
        buf.extend_from_slice(b"\n");
        seen(JsonRpcMessageCodec::<ServerJsonRpcMessage>::new().decode(&mut buf))
    }

    fn is_tool_reply(m: &ServerJsonRpcMessage) -> bool {
        matches!(m, ServerJsonRpcMessage::Response(r) if matches!(r.result, ServerResult::CallToolResult(_)))
    }

    /// What rmcp's own parse makes of a line, when it is a message.
    fn general_message(line: &[u8]) -> ServerJsonRpcMessage {
        let mut buf = BytesMut::from(line);
        buf.extend_from_slice(b"\n");
        JsonRpcMessageCodec::<ServerJsonRpcMessage>::new()
            .decode(&mut buf)
            .expect("rmcp reads it")
            .expect("a message")
    }

    #[test]
    fn a_tool_reply_takes_the_fast_path_and_matches_rmcp() {
        let replies: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}]}}"#,
            br#"{"result":{"content":[{"type":"text","text":"h\u00e9 \"q\""}],"isError":true},"id":"a-1","jsonrpc":"2.0"}"#,
            br#"{"jsonrpc":"2.0","id":8,"result":{"content":[],"structuredContent":{"n":1.5,"big":18446744073709551615},"_meta":{"k":[1,null]},"resultType":"complete"}}"#,
            br#"{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"},{"type":"resource_link","uri":"file:///x","name":"x"},{"type":"resource","resource":{"uri":"file:///y","text":"t"}}]}}"#,
            br#"{"jsonrpc":"2.0","id":10,"result":{"content":[{"type":"text","text":"x","annotations":{"audience":["user"],"priority":0.5}}],"structuredContent":null}}"#,
            br#"{"jsonrpc":"2.0","id":11,"result":{"content":[{"type":"text","text":"x"}]},"extra":{"ignored":true}}"#,
        ];
        for line in replies {
            let shown = String::from_utf8_lossy(line);
            let fast = tool_reply(line).expect("a tool reply takes the fast path");
            let slow = general_message(line);
            assert!(is_tool_reply(&fast) && is_tool_reply(&slow), "{shown}");
            let fast = serde_json::to_value(fast).unwrap();
            assert_eq!(fast, serde_json::to_value(slow).unwrap(), "{shown}");
            let mut with_newline = line.to_vec();
            with_newline.extend_from_slice(b"\r\n");
            assert_eq!(seen(decode(&with_newline)), Ok(Some(fast)), "{shown}");
        }
    }

    #[test]
    fn anything_else_gets_rmcps_answer() {
        let others: &[&[u8]] = &[
            // Other results, and results with members a tool result lacks.
            br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"tools":[]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"contents":[{"uri":"file:///x","text":"t"}]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"input_required","inputRequests":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"isError":false}}"#,
            // Not only a response.
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":{"code":1,"message":"m"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"x","result":{"content":[]}}"#,
            // Bad envelopes and content.
            br#"{"jsonrpc":"1.0","id":1,"result":{"content":[]}}"#,
            br#"{"jsonrpc":"2.0","result":{"content":[]}}"#,
            br#"{"jsonrpc":"2.0","id":null,"result":{"content":[]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"nonsense"}]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"content":[]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":{}}}"#,
            // Requests, notifications, errors, and lines that are not JSON.
            br#"{"jsonrpc":"2.0","id":2,"method":"roots/list"}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/unknown/thing"}"#,
            br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#,
            b"not json",
            b"[1,2]",
        ];
        for line in others {
            assert!(
                tool_reply(line).is_none(),
                "{}",
                String::from_utf8_lossy(line)
            );
            let mut with_newline = line.to_vec();
            with_newline.push(b'\n');
            assert_eq!(
                seen(decode(&with_newline)),
                general(line),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn blank_lines_are_skipped() {
        assert_eq!(seen(decode(b"\n")), Ok(None));
        assert_eq!(seen(decode(b"\r\n")), Ok(None));
    }
}
