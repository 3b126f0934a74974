//! The HTTP endpoints: `/metrics` (OpenMetrics text), `/healthz` (the
//! process is alive and its watches are not dead for longer than
//! [`WATCHES_DEAD_LIMIT`]) and `/readyz` (caches synced, or standing by).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tracing::warn;

use crate::core::metrics::Metrics;

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

/// How long every watch may fail without a break before `/healthz` fails
/// (and the kubelet restarts the process), unless
/// [`ControllerBuilder::dead_watch_limit`](crate::controller::ControllerBuilder::dead_watch_limit)
/// says otherwise: longer than an apiserver restart or a rolling upgrade
/// takes, short enough that a process whose watches are stuck does not
/// serve stale caches for long.
pub const WATCHES_DEAD_LIMIT: Duration = Duration::from_secs(120);

async fn alive(State(state): State<AppState>) -> impl IntoResponse {
    match state.health.watches.dead_for() {
        Some(d) if d > state.health.dead_limit => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "every watch has failed for {}s: the apiserver is unreachable or refuses this controller",
                d.as_secs()
            ),
        ),
        _ => (StatusCode::OK, "ok".to_owned()),
    }
}

/// Liveness and readiness, as the server reports them; the controller sets
/// them (so the server depends on nothing of the controller's).
#[derive(Debug)]
pub(crate) struct Health {
    pub ready: AtomicBool,
    pub watches: WatchHealth,
    /// See [`WATCHES_DEAD_LIMIT`].
    pub dead_limit: Duration,
}

impl Health {
    pub(crate) fn new(dead_limit: Duration) -> Self {
        Self {
            ready: AtomicBool::new(false),
            watches: WatchHealth::default(),
            dead_limit,
        }
    }
}

/// Which watches there are, which are failing since when; and a signal
/// when one that failed works again (waiting claims are then retried).
#[derive(Debug, Default)]
pub(crate) struct WatchHealth {
    watches: Mutex<Watches>,
    reconnected: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Watches {
    known: std::collections::HashSet<String>,
    failing: HashMap<String, Instant>,
}

impl WatchHealth {
    /// Watch `name` exists (and counts for [`WatchHealth::dead_for`]).
    pub(crate) fn register(&self, name: &str) {
        self.lock().known.insert(name.to_owned());
    }

    /// Watch `name` answered with an error.
    pub(crate) fn failed(&self, name: &str) {
        let mut watches = self.lock();
        if !watches.failing.contains_key(name) {
            watches.failing.insert(name.to_owned(), Instant::now());
        }
    }

    /// Watch `name` delivered something the apiserver sent.
    pub(crate) fn ok(&self, name: &str) {
        let recovered = self.lock().failing.remove(name).is_some();
        if recovered {
            self.reconnected.notify_waiters();
        }
    }

    /// How long every watch has been failing, if every one is: the
    /// apiserver is unreachable, or refuses this controller altogether. One
    /// watch failing alone (one namespace's RoleBinding missing) is not a
    /// dead process: a restart would not mend it, and would interrupt the
    /// others.
    pub(crate) fn dead_for(&self) -> Option<Duration> {
        let watches = self.lock();
        if watches.known.is_empty() || watches.failing.len() < watches.known.len() {
            return None;
        }
        watches.failing.values().max().map(Instant::elapsed)
    }

    /// Resolves when a watch works again after a failure.
    pub(crate) async fn reconnected(&self) {
        self.reconnected.notified().await;
    }

    /// How many watches are failing now.
    pub(crate) fn failing(&self) -> usize {
        self.lock().failing.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watches> {
        self.watches.lock().unwrap_or_else(|p| p.into_inner())
    }
}
