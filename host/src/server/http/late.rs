//! rmcp's answer to a stateless request, streamed once it is slow.
//!
//! With `http_json_response` on, rmcp answers a stateless (2026-07-28)
//! request whose call sends nothing first with one JSON body, when the call
//! ends, and sends nothing before it. `server.idle_timeout_ms` closes a
//! connection silent both ways, so such a call that ran longer than that was
//! cut off. wf's own answers in place avoid it (`http_direct::in_time`);
//! this does the same for the requests it leaves to rmcp (a `logLevel`
//! opt-in, `Mcp-Param-*` headers, …): rmcp's response as it is when it comes
//! within a keep-alive interval, else an event stream at once, a keep-alive
//! comment every interval, then rmcp's answer as its one event (or rmcp's
//! own stream, if it chose one after all).

use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, BodyDataStream, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;

use crate::server::jsonrpc::{INTERNAL_ERROR, error_reply};

type Answer = Pin<Box<dyn Future<Output = Response> + Send>>;

/// `answer` (rmcp's response to the request with JSON-RPC id `id`) as it
/// is if it comes within `patience`; else streamed, with keep-alives.
pub(super) async fn in_time(mut answer: Answer, id: Value, patience: Duration) -> Response {
    match tokio::time::timeout(patience, &mut answer).await {
        Ok(response) => response,
        Err(_) => {
            tracing::debug!("a slow answer of rmcp's is streamed with keep-alives");
            let mut tick = tokio::time::interval(patience);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let body = futures::stream::unfold(Late::Waiting(answer, tick, id), Late::next);
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
    Waiting(Answer, tokio::time::Interval, Value),
    /// rmcp chose an event stream after all: its bytes, as they come.
    Stream(BodyDataStream),
    Done,
}

type Chunk = Result<Bytes, axum::Error>;

impl Late {
    async fn next(self) -> Option<(Chunk, Late)> {
        match self {
            Late::Waiting(mut answer, mut tick, id) => {
                tokio::select! {
                    response = &mut answer => Some(answered(response, id).await),
                    _ = tick.tick() => Some((Ok(Bytes::from_static(b":\n\n")), Late::Waiting(answer, tick, id))),
                }
            }
            Late::Stream(mut body) => body.next().await.map(|chunk| (chunk, Late::Stream(body))),
            Late::Done => None,
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
        let quick = in_time(Box::pin(async { json("{}") }), Value::from(1), PATIENCE).await;
        assert_eq!(quick.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(body_text(quick).await, "{}");

        let slow = Box::pin(async {
            tokio::time::sleep(PATIENCE * 3).await;
            json(r#"{"id":1,"result":{}}"#)
        });
        let r = in_time(slow, Value::from(1), PATIENCE).await;
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
    async fn a_slow_refusal_is_an_error_for_the_request() {
        let slow = Box::pin(async {
            tokio::time::sleep(PATIENCE * 2).await;
            let mut r = Response::new(Body::from("Bad Request: no"));
            *r.status_mut() = StatusCode::BAD_REQUEST;
            r
        });
        let text = body_text(in_time(slow, Value::from(7), PATIENCE).await).await;
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
