//! `GET /console/api/events[?run=ID]`: run and node state changes as a
//! server-sent event stream (`data: {json}` per event). It opens with
//! `{"type":"ready"}` once subscribed, so a page that loads a run's state
//! after that misses nothing; a listener that falls behind gets
//! `{"type":"lagged"}` and reloads. Idle streams carry a comment every
//! `ping` so the connection idle timeout does not close them.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use super::Console;
use super::access::Kind;
use super::refused;
use super::viewer::Viewer;
use crate::server::Principal;
use crate::surfaces::planner::PLANNER_SOURCE;

fn frame(v: &impl serde::Serialize) -> Bytes {
    let text = serde_json::to_string(v).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!("data: {text}\n\n"))
}

/// The `run` query parameter: run ids are plain names, so no decoding.
fn run_filter(uri: &Uri) -> Option<String> {
    uri.query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("run="))
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

pub async fn events(
    State(c): State<Console>,
    Extension(v): Extension<Viewer>,
    Extension(p): Extension<Principal>,
    h: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(r) = c.admit(v, &h, &p, PLANNER_SOURCE, "get_run", Kind::Read) {
        return *r;
    }
    // Held by the stream: its slot frees when the stream ends or is dropped.
    let Some(slot) = c.streams.try_acquire(&p) else {
        tracing::warn!(
            principal = p.name(),
            max = c.streams.max(),
            "console event stream refused (429): too many open for this principal"
        );
        return refused(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "too many console event streams open for principal {:?} (limit {})",
                p.name(),
                c.streams.max()
            ),
            "close another console tab, or raise server.max_console_streams_per_principal",
        );
    };
    let only = run_filter(&uri);
    let rx = c.surfaces.planner.engine.events.subscribe();
    let mut ping = tokio::time::interval(c.ping);
    ping.reset();
    let state = (rx, ping, c.shutdown.clone(), only, true);
    let stream =
        futures::stream::unfold(state, |(mut rx, mut ping, stop, only, first)| async move {
            if first {
                let ready = frame(&json!({"type": "ready"}));
                return Some((Ok::<_, Infallible>(ready), (rx, ping, stop, only, false)));
            }
            loop {
                let out = tokio::select! {
                    () = stop.cancelled() => return None,
                    _ = ping.tick() => Bytes::from_static(b": ping\n\n"),
                    r = rx.recv() => match r {
                        Ok(e) if only.as_deref().is_some_and(|id| id != e.run_id()) => continue,
                        Ok(e) => frame(&e),
                        Err(RecvError::Lagged(n)) => frame(&json!({"type": "lagged", "missed": n})),
                        Err(RecvError::Closed) => return None,
                    },
                };
                return Some((Ok(out), (rx, ping, stop, only, false)));
            }
        });
    let stream = stream.map(move |chunk| {
        let _held = &slot;
        chunk
    });
    let mut r = Body::from_stream(stream).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_filter_is_read_from_the_query() {
        let uri: Uri = "/console/api/events?x=1&run=run_abc".parse().unwrap();
        assert_eq!(run_filter(&uri).as_deref(), Some("run_abc"));
        let uri: Uri = "/console/api/events".parse().unwrap();
        assert_eq!(run_filter(&uri), None);
        let uri: Uri = "/console/api/events?run=".parse().unwrap();
        assert_eq!(run_filter(&uri), None);
    }
}
