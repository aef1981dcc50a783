//! The local control plane's status endpoint (loopback): `GET /xds/status`, each gateway node's
//! last ACKed version and any NACK with Envoy's error detail, and `GET /metrics`, the xDS
//! counters in Prometheus text format.

use axum::{extract::State, http::header, response::IntoResponse, routing::get, Json, Router};
use nsight_gateway::server::StatusReader;

pub fn router(reader: StatusReader) -> Router {
    Router::new()
        .route(
            "/xds/status",
            get(|State(r): State<StatusReader>| async move { Json(r.json()) }),
        )
        .route(
            "/metrics",
            get(|State(r): State<StatusReader>| async move {
                (
                    [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                    r.metrics_text(),
                )
                    .into_response()
            }),
        )
        .with_state(reader)
}
