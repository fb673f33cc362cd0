//! The HTTP client of streamable HTTP upstreams: rmcp's reqwest client (its
//! byte limits enforced before parsing), watched so that a reply cut for size
//! can be told from any other early end of a reply stream.
//!
//! rmcp bounds a JSON body and each SSE event (`max_message_bytes` here). An
//! oversized JSON body fails its call with a size error, but an oversized SSE
//! event ends the reply stream and the call only learns "stream closed before
//! its final response". [`WatchedHttp`] notes which request's stream was cut
//! for size, so the runtime can say so, with the limit and the source.

use std::collections::{HashMap, HashSet};
use std::sync::PoisonError;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, RequestId};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

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
}

impl WatchedHttp {
    /// rmcp's default client, rebuilt: no idle pool (avoids delayed-ACK stalls)
    /// and only same-origin 307/308 redirects, which keep the body and never
    /// replay the session id or headers to another host.
    pub fn new(source: &str, cut: CutForSize) -> Result<Self, reqwest::Error> {
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
        })
    }

    fn watch(
        &self,
        stream: BoxStream<'static, Result<Sse, SseError>>,
        id: Option<RequestId>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let (cut, source) = (self.cut.clone(), self.source.clone());
        stream
            .inspect(move |item| {
                if let Err(e) = item
                    && e.to_string().contains(SIZE_ERROR)
                {
                    tracing::warn!(source = %source, "upstream SSE event over max_message_bytes; its reply stream ends");
                    if let Some(id) = &id {
                        cut.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_string());
                    }
                }
            })
            .boxed()
    }
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
                StreamableHttpPostResponse::Sse(self.watch(stream, id), session)
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
        Ok(self.watch(stream, None))
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
        Ok(self.watch(stream, None))
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
