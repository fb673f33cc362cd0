//! An answer that comes late, on HTTP: wait one keep-alive interval for it,
//! then stream keep-alives and the answer as one event.
//!
//! A JSON answer leaves its connection silent both ways until it comes, and
//! `server.idle_timeout_ms` closes a connection silent both ways, so a call
//! that ran longer than that was cut off. Every answer wf sends as one JSON
//! body goes through [`in_time`]: wf's own answers in place (`direct`,
//! `session_calls`: a JSON-RPC message) and rmcp's response to the stateless
//! requests wf leaves to it (with `http_json_response` on: a `logLevel`
//! opt-in, `Mcp-Param-*` headers, …). Each is sent as it is when it comes
//! within a keep-alive interval, else an event stream at once, a keep-alive
//! comment every interval, then the answer as its one event (or rmcp's own
//! stream, if it chose one after all).

use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, BodyDataStream, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use rmcp::model::ServerJsonRpcMessage;
use serde_json::Value;

use crate::server::jsonrpc::{INTERNAL_ERROR, error_reply};

type Pending<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// wf's own answer `answer`, as `json` writes it when it comes within
/// `patience`; else streamed, with keep-alives.
pub(super) fn message_in_time(
    answer: Pending<ServerJsonRpcMessage>,
    patience: Duration,
    json: fn(&ServerJsonRpcMessage) -> Response,
) -> impl Future<Output = Response> + Send {
    in_time(
        answer,
        patience,
        move |m| json(&m),
        |m| Box::pin(std::future::ready((Ok(message_event(&m)), Late::Done))),
    )
}

/// `answer` (rmcp's response to the request with JSON-RPC id `id`) as it
/// is if it comes within `patience`; else streamed, with keep-alives.
pub(super) fn response_in_time(
    answer: Pending<Response>,
    id: Value,
    patience: Duration,
) -> impl Future<Output = Response> + Send {
    in_time(answer, patience, |r| r, move |r| Box::pin(answered(r, id)))
}

/// `answer` as `quick` makes it when it comes within `patience`. A slower
/// one gets an event stream at once, with a keep-alive comment every
/// `patience` until it comes, then what `late` makes of it.
///
/// `answer` comes boxed: inline, the call would size the middleware's
/// future, which axum copies into a box per request, as do the layers
/// outside it.
async fn in_time<T: Send + 'static>(
    mut answer: Pending<T>,
    patience: Duration,
    quick: impl FnOnce(T) -> Response,
    late: impl FnOnce(T) -> Pending<(Chunk, Late)> + Send + 'static,
) -> Response {
    match tokio::time::timeout(patience, &mut answer).await {
        Ok(answer) => quick(answer),
        Err(_) => {
            tracing::debug!("a slow answer is streamed with keep-alives");
            let mut tick = tokio::time::interval(patience);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let first: Pending<(Chunk, Late)> = Box::pin(async move { late(answer.await).await });
            let body = futures::stream::unfold(Late::Waiting(first, tick), Late::next);
            let mut response = Response::new(Body::from_stream(body));
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
    }
}

enum Late {
    /// The answer's first chunk, and the keep-alive ticks until it comes.
    Waiting(Pending<(Chunk, Late)>, tokio::time::Interval),
    /// rmcp chose an event stream after all: its bytes, as they come.
    Stream(BodyDataStream),
    Done,
}

type Chunk = Result<Bytes, axum::Error>;

impl Late {
    async fn next(self) -> Option<(Chunk, Late)> {
        match self {
            Late::Waiting(mut first, mut tick) => {
                tokio::select! {
                    first = &mut first => Some(first),
                    _ = tick.tick() => Some((Ok(Bytes::from_static(b":\n\n")), Late::Waiting(first, tick))),
                }
            }
            Late::Stream(mut body) => body.next().await.map(|chunk| (chunk, Late::Stream(body))),
            Late::Done => None,
        }
    }
}

/// wf's own answer as one `message` event.
fn message_event(message: &ServerJsonRpcMessage) -> Bytes {
    match serde_json::to_vec(message) {
        Ok(json) => event(&json),
        Err(e) => {
            tracing::error!("cannot serialise an answer: {e}");
            Bytes::from_static(b": unserialisable answer\n\n")
        }
    }
}

/// What goes on the stream once rmcp has answered.
async fn answered(response: Response, id: Value) -> (Chunk, Late) {
    let status = response.status();
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let body = response.into_body();
    if status == StatusCode::OK && kind.starts_with("text/event-stream") {
        let mut body = body.into_data_stream();
        return match body.next().await {
            Some(chunk) => (chunk, Late::Stream(body)),
            None => (Ok(Bytes::new()), Late::Done),
        };
    }
    // The body is already whole in rmcp's response (JSON mode serialises it
    // before answering), so collecting it adds no buffer of its own.
    let message = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) if status.is_success() && kind.starts_with("application/json") => bytes,
        Ok(bytes) => {
            tracing::warn!(%status, "rmcp answered a slow request with {status}, sent as an error");
            let text = String::from_utf8_lossy(&bytes);
            let message = format!("the server answered {status}: {}", text.trim());
            Bytes::from(error_reply(Some(id), INTERNAL_ERROR, &message).to_string())
        }
        Err(e) => {
            let message = format!("the server's answer could not be read: {e}");
            Bytes::from(error_reply(Some(id), INTERNAL_ERROR, &message).to_string())
        }
    };
    (Ok(event(&message)), Late::Done)
}

/// One SSE `message` event carrying `data` (one `data:` line per line).
fn event(data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 32);
    out.extend_from_slice(b"event: message\n");
    for line in data.split(|b| *b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.push(b'\n');
    }
    out.push(b'\n');
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_carries_each_line_as_data() {
        assert_eq!(
            &event(b"{\"a\":1}")[..],
            b"event: message\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(
            &event(b"x\r\ny")[..],
            b"event: message\ndata: x\ndata: y\n\n"
        );
    }

    async fn body_text(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn json(text: &'static str) -> Response {
        let mut r = Response::new(Body::from(text));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }

    // Real time, in wide margins (tokio's paused clock needs a feature that
    // would rebuild rmcp for the tests).
    const PATIENCE: Duration = Duration::from_millis(200);

    #[tokio::test]
    async fn a_quick_answer_is_rmcps_and_a_slow_one_is_streamed_with_keep_alives() {
        let quick =
            response_in_time(Box::pin(async { json("{}") }), Value::from(1), PATIENCE).await;
        assert_eq!(quick.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(body_text(quick).await, "{}");

        let slow = Box::pin(async {
            tokio::time::sleep(PATIENCE * 3).await;
            json(r#"{"id":1,"result":{}}"#)
        });
        let r = response_in_time(slow, Value::from(1), PATIENCE).await;
        assert_eq!(r.headers()[header::CONTENT_TYPE], "text/event-stream");
        let text = body_text(r).await;
        let (pings, answer) = text.split_at(text.find("event:").expect("an event"));
        assert!(
            pings.starts_with(":\n\n") && pings.replace(":\n\n", "").is_empty(),
            "{text:?}"
        );
        assert_eq!(answer, "event: message\ndata: {\"id\":1,\"result\":{}}\n\n");
    }

    #[tokio::test]
    async fn wfs_own_answer_is_json_when_quick_and_one_event_after_keep_alives_when_slow() {
        fn message(id: i64) -> ServerJsonRpcMessage {
            serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}}))
                .unwrap()
        }
        fn json(m: &ServerJsonRpcMessage) -> Response {
            let mut r = Response::new(Body::from(serde_json::to_vec(m).unwrap()));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
        let quick = message_in_time(Box::pin(async { message(1) }), PATIENCE, json).await;
        assert_eq!(quick.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(
            body_text(quick).await,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        );

        let slow = Box::pin(async {
            tokio::time::sleep(PATIENCE * 3).await;
            message(2)
        });
        let r = message_in_time(slow, PATIENCE, json).await;
        assert_eq!(r.headers()[header::CONTENT_TYPE], "text/event-stream");
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-cache");
        let text = body_text(r).await;
        let (pings, answer) = text.split_at(text.find("event:").expect("an event"));
        assert!(
            pings.starts_with(":\n\n") && pings.replace(":\n\n", "").is_empty(),
            "{text:?}"
        );
        assert_eq!(
            answer,
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n"
        );
    }

    #[tokio::test]
    async fn a_slow_refusal_is_an_error_for_the_request() {
        let slow = Box::pin(async {
            tokio::time::sleep(PATIENCE * 2).await;
            let mut r = Response::new(Body::from("Bad Request: no"));
            *r.status_mut() = StatusCode::BAD_REQUEST;
            r
        });
        let text = body_text(response_in_time(slow, Value::from(7), PATIENCE).await).await;
        let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        let message: Value = serde_json::from_str(data).unwrap();
        assert_eq!(message["id"], 7);
        assert_eq!(message["error"]["code"], INTERNAL_ERROR);
        assert!(
            message["error"]["message"]
                .as_str()
                .unwrap()
                .contains("400")
        );
    }
}
