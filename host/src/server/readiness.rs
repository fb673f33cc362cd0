//! `GET /readyz` on `wf serve --http`, for load balancers: 200 when the
//! store answers and first discovery is over, 503 (with the reason) while
//! the store is unreachable, sources are still being discovered, or the
//! replica drains before it stops. No token: it tells nothing but that.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::app::App;

pub fn router(app: Arc<App>) -> axum::Router {
    axum::Router::new()
        .route("/readyz", get(readyz))
        .with_state(app)
}

async fn readyz(State(app): State<Arc<App>>) -> Response {
    let not_ready = |why: String| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"ready": false, "reason": why})),
        )
            .into_response()
    };
    if app.store.is_draining() {
        return not_ready("draining: this replica is shutting down".into());
    }
    if let Err(e) = tokio::time::timeout(Duration::from_secs(2), app.store.ping())
        .await
        .map_err(|_| "no answer within 2 s".to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
    {
        return not_ready(format!("store: {e}"));
    }
    if tokio::time::timeout(Duration::from_millis(20), app.projection_ready())
        .await
        .is_err()
    {
        return not_ready("sources are still being discovered".into());
    }
    axum::Json(json!({"ready": true, "replica": app.store.replica()})).into_response()
}
