//! The HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the
//! process is alive) and `/readyz` (caches synced, or standing by).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tracing::warn;

use crate::metrics::Metrics;

#[derive(Clone)]
struct AppState {
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

pub(crate) async fn serve(listener: TcpListener, health: Arc<Health>, metrics: Arc<Metrics>) {
    let app = Router::new()
        .route("/metrics", get(render_metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(AppState { health, metrics });
    if let Err(e) = axum::serve(listener, app).await {
        warn!(error = %e, "metrics and health server stopped");
    }
}

async fn render_metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

async fn ready(State(state): State<AppState>) -> impl IntoResponse {
    if state.health.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches are not synced yet")
    }
}

/// Liveness and readiness, as the server reports them; the controller sets
/// them (so the server depends on nothing of the controller's).
#[derive(Debug, Default)]
pub(crate) struct Health {
    pub ready: AtomicBool,
}
