//! The HTTP endpoints: `/metrics` (OpenMetrics text), `/healthz` (the
//! process is alive and its watches are not dead for longer than
//! [`WATCHES_DEAD_LIMIT`]) and `/readyz` (caches synced, or standing by).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
        .route("/healthz", get(alive))
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
            // What prometheus-client writes.
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
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

/// How long the watches may fail without a break before `/healthz` fails
/// (and the kubelet restarts the process): longer than an apiserver
/// restart or a rolling upgrade takes, short enough that a process whose
/// watches are stuck does not serve stale caches for long.
pub const WATCHES_DEAD_LIMIT: Duration = Duration::from_secs(120);

async fn alive(State(state): State<AppState>) -> impl IntoResponse {
    match state.health.watches.failing_for() {
        Some(d) if d > WATCHES_DEAD_LIMIT => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the watches have failed for {}s: the apiserver is unreachable or refuses this controller",
                d.as_secs()
            ),
        ),
        _ => (StatusCode::OK, "ok".to_owned()),
    }
}

/// Liveness and readiness, as the server reports them; the controller sets
/// them (so the server depends on nothing of the controller's).
#[derive(Debug, Default)]
pub(crate) struct Health {
    pub ready: AtomicBool,
    pub watches: WatchHealth,
}

/// Which watches are failing, since when; and a signal when the last one
/// that failed works again (waiting claims are then retried at once).
#[derive(Debug, Default)]
pub(crate) struct WatchHealth {
    failing: Mutex<HashMap<&'static str, Instant>>,
    reconnects: AtomicU64,
    reconnected: tokio::sync::Notify,
}

impl WatchHealth {
    /// Watch `name` answered with an error.
    pub(crate) fn failed(&self, name: &'static str) {
        self.lock().entry(name).or_insert_with(Instant::now);
    }

    /// Watch `name` delivered an event.
    pub(crate) fn ok(&self, name: &'static str) {
        let recovered = {
            let mut failing = self.lock();
            failing.remove(name).is_some() && failing.is_empty()
        };
        if recovered {
            self.reconnects.fetch_add(1, Ordering::Relaxed);
            self.reconnected.notify_waiters();
        }
    }

    /// How long the longest-failing watch has failed, if any fails.
    pub(crate) fn failing_for(&self) -> Option<Duration> {
        self.lock().values().min().map(Instant::elapsed)
    }

    /// Resolves when every watch works again after a failure.
    pub(crate) async fn reconnected(&self) {
        self.reconnected.notified().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<&'static str, Instant>> {
        self.failing.lock().unwrap_or_else(|p| p.into_inner())
    }
}
