//! The manager: the controllers of every kind, run only while this replica holds the leader
//! Lease (when election is on), and its HTTP endpoints on one port (default :8080):
//!
//! ```text
//! GET /healthz  200 while the process serves
//! GET /readyz   200 once the API server answered (leader or standby), 503 before
//! GET /metrics  Prometheus text (metrics.rs)
//! ```
//!
//! Owns wiring and the health endpoints; reconcile logic is in `controller`.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use axum::{extract::State, http::StatusCode, response::IntoResponse, routing::get, Router};
use kube::Client;
use tokio::net::TcpListener;

use crate::{
    controller::{self, Context},
    leader::{Elector, LeadError},
    metrics::Metrics,
    render::RenderSettings,
};

/// How the manager runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub settings: RenderSettings,
    /// Watch one namespace only (`None`: the whole cluster).
    pub namespace: Option<String>,
}

/// What the HTTP endpoints read.
#[derive(Debug, Clone, Default)]
pub struct Health {
    pub metrics: Arc<Metrics>,
    pub ready: Arc<AtomicBool>,
}

/// `/healthz`, `/readyz`, `/metrics`.
pub fn router(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(h): State<Health>| async move {
                if h.ready.load(Ordering::Relaxed) {
                    (StatusCode::OK, "ok")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "not connected to the API server yet",
                    )
                }
            }),
        )
        .route(
            "/metrics",
            get(|State(h): State<Health>| async move {
                (
                    [("content-type", "text/plain; version=0.0.4")],
                    h.metrics.render(),
                )
                    .into_response()
            }),
        )
        .with_state(health)
}

/// Serves the endpoints until the task is dropped.
pub async fn serve_health(listener: TcpListener, health: Health) -> std::io::Result<()> {
    axum::serve(listener, router(health)).await
}

/// Binds the health address; a separate step so a busy port fails before anything starts.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Runs the controllers: directly, or while `elector` holds the Lease. Returns only when
/// leadership is lost (the caller exits, and its restart competes again) or the controllers end.
pub async fn run(
    client: Client,
    config: Config,
    health: Health,
    elector: Option<Elector>,
) -> Result<(), LeadError> {
    match client.apiserver_version().await {
        Ok(v) => tracing::info!(version = %v.git_version, "connected to the API server"),
        Err(e) => tracing::warn!(error = %e, "the API server does not answer yet"),
    }
    health.ready.store(true, Ordering::Relaxed);
    let ctx = Arc::new(Context::new(
        client,
        config.settings.clone(),
        health.metrics.clone(),
    ));
    let work = controller::run_all(ctx, config.namespace.clone());
    match elector {
        None => {
            health.metrics.set_leader(true);
            work.await;
            Ok(())
        }
        Some(elector) => {
            let metrics = health.metrics.clone();
            elector
                .lead(work, |leading| metrics.set_leader(leading))
                .await
        }
    }
}
