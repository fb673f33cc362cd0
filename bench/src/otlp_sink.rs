//! A do-nothing OTLP/HTTP collector for `--telemetry`: answers 200 to every
//! `POST` (`/v1/traces`, `/v1/metrics`) and counts the exports, so a wf with
//! telemetry on pays for building and sending its spans and metrics, not
//! for a slow collector.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;

pub struct Sink {
    /// The base URL wf is given as `otlp_endpoint`.
    pub endpoint: String,
    exports: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Sink {
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let exports = Arc::new(AtomicU64::new(0));
        let app = Router::new()
            .route("/v1/traces", post(received))
            .route("/v1/metrics", post(received))
            .with_state(exports.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            endpoint,
            exports,
            task,
        })
    }

    /// Exports received so far (proof that telemetry was on).
    pub fn exports(&self) -> u64 {
        self.exports.load(Ordering::Relaxed)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn received(State(n): State<Arc<AtomicU64>>, _body: axum::body::Bytes) -> StatusCode {
    n.fetch_add(1, Ordering::Relaxed);
    StatusCode::OK
}
