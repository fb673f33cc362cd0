//! The HTTP client of streamable HTTP upstreams: rmcp's reqwest client (its
//! byte limits enforced before parsing), watched so that a reply cut for size
//! can be told from any other early end of a reply stream.
//!
//! rmcp bounds a JSON body and each SSE event (`max_message_bytes` here). An
//! oversized JSON body fails its call with a size error, but an oversized SSE
//! event ends the reply stream and the call only learns "stream closed before
//! its final response". [`WatchedHttp`] notes which request's stream was cut
//! for size, so the runtime can say so, with the limit and the source.
//!
//! It also sends `tools/list` itself, to note each tool's `execution` from
//! the raw reply (`super::executions`), which rmcp's parse drops.

use std::collections::{HashMap, HashSet};
use std::sync::PoisonError;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use super::executions::{self, Executions};
use crate::session::pending_logs::PendingLogs;

/// Requests whose SSE reply stream ended on an event over the size limit.
pub type CutForSize = Arc<Mutex<HashSet<String>>>;

/// The text of rmcp's size errors (JSON body and SSE event).
pub const SIZE_ERROR: &str = "exceeded the maximum size of";

/// How many redirects a request follows (as rmcp's default client).
const MAX_REDIRECTS: usize = 10;

#[derive(Clone)]
pub struct WatchedHttp {
    inner: reqwest::Client,
    source: Arc<str>,
    cut: CutForSize,
    executions: Executions,
    logs: PendingLogs,
}

impl WatchedHttp {
    /// rmcp's default client, rebuilt: no idle pool (avoids delayed-ACK stalls)
    /// and only same-origin 307/308 redirects, which keep the body and never
    /// replay the session id or headers to another host.
    pub fn new(
        source: &str,
        cut: CutForSize,
        executions: Executions,
        logs: PendingLogs,
    ) -> Result<Self, reqwest::Error> {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(
                attempt.status(),
                reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
            );
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("exceeded {MAX_REDIRECTS} redirects"))
            } else {
                attempt.follow()
            }
        });
        let inner = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(policy)
            .build()?;
        Ok(Self {
            inner,
            source: source.into(),
            cut,
            executions,
            logs,
        })
    }

    /// `lists_tools`: the stream answers a `tools/list`, whose reply is noted.
    fn watch(
        &self,
        stream: BoxStream<'static, Result<Sse, SseError>>,
        id: Option<RequestId>,
        lists_tools: bool,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let (cut, source) = (self.cut.clone(), self.source.clone());
        let executions = lists_tools.then(|| self.executions.clone());
        let logs = self.logs.clone();
        stream
            .inspect(move |item| match item {
                Err(e) if e.to_string().contains(SIZE_ERROR) => {
                    tracing::warn!(source = %source, "upstream SSE event over max_message_bytes; its reply stream ends");
                    if let Some(id) = &id {
                        cut.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_string());
                    }
                }
                Ok(Sse { data: Some(data), .. }) => {
                    if let Some(seen) = &executions {
                        executions::note(seen, data.as_bytes());
                    }
                    if crate::session::pending_logs::counted(data.as_bytes()) {
                        logs.arrived();
                    }
                }
                _ => {}
            })
            .boxed()
    }

    /// A `tools/list` sent here rather than by rmcp's client, so that its raw
    /// reply is seen: a JSON body or an SSE stream is read here within the
    /// same limits. Anything else (an auth challenge, an expired session, an
    /// HTTP error, a reserved header) gets `None`, and the caller sends the
    /// request again through rmcp's client, which knows what each of those
    /// means: a listing is safe to repeat.
    async fn list_tools(
        &self,
        uri: &str,
        message: &ClientJsonRpcMessage,
        session_id: Option<&str>,
        auth_header: Option<&str>,
        custom_headers: &HashMap<HeaderName, HeaderValue>,
        limits: &StreamableHttpResponseLimits,
    ) -> Option<StreamableHttpPostResponse> {
        let reserved = ["accept", HEADER_SESSION_ID, HEADER_LAST_EVENT_ID];
        if custom_headers
            .keys()
            .any(|k| reserved.iter().any(|r| k.as_str().eq_ignore_ascii_case(r)))
        {
            return None;
        }
        let mut request = self.inner.post(uri).header(
            reqwest::header::ACCEPT,
            format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
        );
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(id) = session_id {
            request = request.header(HEADER_SESSION_ID, id);
        }
        let response = request.json(message).send().await.ok()?;
        if response.status() != reqwest::StatusCode::OK {
            return None;
        }
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let session = header(HEADER_SESSION_ID);
        let content_type = header(reqwest::header::CONTENT_TYPE.as_str())?.to_ascii_lowercase();
        if content_type.starts_with(JSON_MIME_TYPE) {
            let limit = limits.max_json_response_size;
            if response.content_length().is_some_and(|n| n > limit as u64) {
                return None;
            }
            let mut body = Vec::new();
            let mut chunks = response.bytes_stream();
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk.ok()?;
                if body.len() + chunk.len() > limit {
                    return None;
                }
                body.extend_from_slice(&chunk);
            }
            let reply: ServerJsonRpcMessage = serde_json::from_slice(&body).ok()?;
            executions::note(&self.executions, &body);
            Some(StreamableHttpPostResponse::Json(reply, session))
        } else if content_type.starts_with(EVENT_STREAM_MIME_TYPE) {
            let bytes = events_within(response.bytes_stream(), limits.max_sse_event_size);
            let events = SseStream::from_bytes_stream(bytes).boxed();
            let id = request_id(message);
            Some(StreamableHttpPostResponse::Sse(
                self.watch(events, id, true),
                session,
            ))
        } else {
            None
        }
    }
}

/// An SSE body whose events (the bytes between blank lines) each stay within
/// `limit`: the first longer one ends the stream with rmcp's size error text.
fn events_within(
    body: impl futures::Stream<Item = reqwest::Result<tokio_util::bytes::Bytes>> + Send + 'static,
    limit: usize,
) -> impl futures::Stream<Item = std::io::Result<tokio_util::bytes::Bytes>> + Send + 'static {
    // (bytes since the last blank line, the last byte was a newline, ended)
    let state = (0usize, false, false);
    body.scan(state, move |(len, newline, ended), chunk| {
        if *ended {
            return futures::future::ready(None);
        }
        let item = chunk.map_err(std::io::Error::other).and_then(|chunk| {
            for &b in chunk.iter() {
                match b {
                    b'\r' => {}
                    b'\n' if *newline => *len = 0,
                    _ => *len += 1,
                }
                if b != b'\r' {
                    *newline = b == b'\n';
                }
                if *len > limit {
                    return Err(std::io::Error::other(format!(
                        "an SSE event {SIZE_ERROR} {limit} bytes"
                    )));
                }
            }
            Ok(chunk)
        });
        *ended = item.is_err();
        futures::future::ready(Some(item))
    })
}

fn lists_tools(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::ListToolsRequest(_)))
}

fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        JsonRpcMessage::Request(r) => Some(r.id.clone()),
        _ => None,
    }
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

impl StreamableHttpClient for WatchedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let id = request_id(&message);
        let mut custom_headers = custom_headers;
        trace_headers(&message, &mut custom_headers);
        if lists_tools(&message)
            && let Some(response) = self
                .list_tools(
                    &uri,
                    &message,
                    session_id.as_deref(),
                    auth_header.as_deref(),
                    &custom_headers,
                    &limits,
                )
                .await
        {
            return Ok(response);
        }
        let response = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await?;
        Ok(match response {
            StreamableHttpPostResponse::Sse(stream, session) => {
                StreamableHttpPostResponse::Sse(self.watch(stream, id, false), session)
            }
            other => other,
        })
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let stream = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(self.watch(stream, None, false))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.watch(stream, None, false))
    }
}

/// A traced request's W3C context (`_meta.traceparent`/`tracestate`, set by
/// `crate::transport::trace`) also travels as HTTP headers, for HTTP-level tracing.
fn trace_headers(message: &ClientJsonRpcMessage, headers: &mut HashMap<HeaderName, HeaderValue>) {
    let JsonRpcMessage::Request(r) = message else {
        return;
    };
    let meta = rmcp::model::GetMeta::get_meta(&r.request);
    for (key, value) in [
        ("traceparent", meta.get_traceparent()),
        ("tracestate", meta.get_tracestate()),
    ] {
        if let Some(v) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(HeaderName::from_static(key), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientRequest, ListToolsRequest, ServerResult};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An HTTP server that answers one request with `response`; its address.
    async fn answers_once(response: String) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // Headers, then a body of Content-Length bytes.
            loop {
                let n = conn.read(&mut buf).await.unwrap();
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request);
                if let Some(end) = text.find("\r\n\r\n") {
                    let length: usize = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            conn.write_all(response.as_bytes()).await.unwrap();
            conn.shutdown().await.unwrap();
        });
        format!("http://{addr}/mcp")
    }

    const LISTING: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"job","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}}"#;

    fn reply(content_type: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nmcp-session-id: s1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    async fn list(
        http: &WatchedHttp,
        url: String,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let message = ClientJsonRpcMessage::request(
            ClientRequest::ListToolsRequest(ListToolsRequest::default()),
            RequestId::Number(1),
        );
        http.post_message_with_response_limits(
            url.into(),
            message,
            None,
            None,
            HashMap::new(),
            limits,
        )
        .await
    }

    fn listed_job(seen: &Executions) -> Option<serde_json::Value> {
        seen.lock().unwrap().get("job").cloned()
    }

    #[tokio::test]
    async fn a_json_tools_list_reply_is_parsed_and_its_executions_noted() {
        let seen = Executions::default();
        let http =
            WatchedHttp::new("fx", Default::default(), seen.clone(), Default::default()).unwrap();
        let url = answers_once(reply("application/json", LISTING)).await;
        let Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Response(r), session)) =
            list(&http, url, StreamableHttpResponseLimits::default()).await
        else {
            panic!("not a JSON reply");
        };
        assert!(matches!(r.result, ServerResult::ListToolsResult(ref l) if l.tools.len() == 1));
        assert_eq!(session.as_deref(), Some("s1"));
        assert_eq!(
            listed_job(&seen),
            Some(serde_json::json!({"taskSupport": "optional"}))
        );
    }

    #[tokio::test]
    async fn an_sse_tools_list_reply_is_noted_and_an_oversized_event_ends_it_cut_for_size() {
        let seen = Executions::default();
        let cut = CutForSize::default();
        let http = WatchedHttp::new("fx", cut.clone(), seen.clone(), Default::default()).unwrap();
        let events = format!("event: message\ndata: {LISTING}\n\n");
        let url = answers_once(reply("text/event-stream", &events)).await;
        let Ok(StreamableHttpPostResponse::Sse(stream, _)) =
            list(&http, url, StreamableHttpResponseLimits::default()).await
        else {
            panic!("not an SSE reply");
        };
        let got: Vec<_> = stream.collect().await;
        assert!(got.len() == 1 && got[0].is_ok(), "{got:?}");
        assert_eq!(
            listed_job(&seen),
            Some(serde_json::json!({"taskSupport": "optional"}))
        );

        let seen_too = Executions::default();
        let http =
            WatchedHttp::new("fx", cut.clone(), seen_too.clone(), Default::default()).unwrap();
        let url = answers_once(reply("text/event-stream", &events)).await;
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = 64;
        let Ok(StreamableHttpPostResponse::Sse(stream, _)) = list(&http, url, limits).await else {
            panic!("not an SSE reply");
        };
        let got: Vec<_> = stream.collect().await;
        assert!(
            matches!(got.last(), Some(Err(e)) if e.to_string().contains(SIZE_ERROR)),
            "{got:?}"
        );
        assert!(
            cut.lock()
                .unwrap()
                .contains(&RequestId::Number(1).to_string())
        );
        assert_eq!(listed_job(&seen_too), None);
    }
}
