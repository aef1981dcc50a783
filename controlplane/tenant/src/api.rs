//! The REST API (docs/tenant.md, OpenAPI at `<prefix>/openapi.json`), served under both `/v1`
//! and `/tenant/v1` (the gateway's prefix). Parses and checks input, asks `core` for the
//! decision, calls the store, renders JSON. Bad input is a 4xx problem document; a failing API
//! server a 503 one; nothing here panics.

use std::{sync::Arc, time::Duration};

use axum::{
    body::Bytes,
    extract::{rejection::QueryRejection, Path, Query, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use nsight_contracts::{
    coordinator::Millis,
    gateway_only::{self, GatewayToken},
    problem::MEDIA_TYPE,
    routes,
    tenant::{CapReached, LaunchStreamer, StreamerList, StreamersQuery, IDENTITY_HEADER},
    Problem,
};
use tokio::sync::Mutex;

use crate::{
    core::{self, Caller, StreamerTemplate},
    store::Streamers,
};

/// What the tenant API is configured with (the tenant operator's flags).
#[derive(Debug, Clone)]
pub struct Config {
    /// At most this many streamers at once (`streamerLaunch.maxActive`).
    pub max_active: u32,
    /// A streamer neither launched nor read for this long is deleted.
    pub idle: Duration,
    pub template: StreamerTemplate,
    /// When set, the API answers only requests carrying it (the gateway adds it), so the
    /// identity header cannot come from anyone else; `None` for a server run by hand.
    pub gateway_token: Option<GatewayToken>,
}

/// The handlers' shared state.
#[derive(Debug, Clone)]
pub struct Service {
    pub store: Streamers,
    pub config: Arc<Config>,
    /// Launches are decided and created one at a time, so two launches cannot both take the
    /// last slot (the tenant operator runs one replica).
    launching: Arc<Mutex<()>>,
}

impl Service {
    pub fn new(store: Streamers, config: Config) -> Self {
        Self {
            store,
            config: Arc::new(config),
            launching: Arc::new(Mutex::new(())),
        }
    }
}

/// The wall clock as unix milliseconds (the shell's only clock read).
pub fn now() -> Millis {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Millis(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

/// The API under `/v1` and `/tenant/v1` (answering only the gateway when the config has a
/// token), and `/healthz`.
pub fn router(service: Service) -> Router {
    let token = service.config.gateway_token.clone();
    let api = Router::new()
        .route("/streamers", get(list).post(launch))
        .route("/streamers/{name}", get(read).delete(remove))
        .route(
            routes::OPENAPI,
            get(|| async { Json(nsight_contracts::openapi::tenant()) }),
        )
        .method_not_allowed_fallback(|| async {
            Problem::new(
                405,
                format!(
                    "method not allowed here; see {}{}",
                    routes::TENANT_V1,
                    routes::OPENAPI
                ),
            )
        })
        .fallback(|| async {
            Problem::new(
                404,
                format!(
                    "no such endpoint; see {}{}",
                    routes::TENANT_V1,
                    routes::OPENAPI
                ),
            )
        })
        .with_state(service);
    let api = gateway_only::require(api, token);
    Router::new()
        .route(routes::HEALTHZ, get(|| async { "ok" }))
        .nest(routes::V1, api.clone())
        .nest(routes::TENANT_V1, api)
}

fn caller(headers: &HeaderMap) -> Result<Caller, Problem> {
    Caller::from_header(headers.get(IDENTITY_HEADER).map(|v| v.as_bytes()))
}

/// The cap refusal as a problem response.
fn refused(cap: &CapReached) -> Response {
    let body = serde_json::to_string(cap).unwrap_or_default();
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(axum::http::header::CONTENT_TYPE, MEDIA_TYPE)],
        body,
    )
        .into_response()
}

async fn list(
    State(s): State<Service>,
    headers: HeaderMap,
    query: Result<Query<StreamersQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    let caller = caller(&headers)?;
    let Query(query) = query.map_err(|e| {
        Problem::bad_request(format!(
            "bad query: {} (only `all=true|false`)",
            e.body_text()
        ))
    })?;
    let mut records = s.store.list().await?;
    let active = u32::try_from(records.len()).unwrap_or(u32::MAX);
    if query.all != Some(true) {
        records.retain(|r| r.owner == caller.as_str());
    }
    records.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    Ok(Json(StreamerList {
        streamers: records.iter().map(|r| r.view(s.config.idle)).collect(),
        active,
        max_active: s.config.max_active,
    })
    .into_response())
}

async fn launch(
    State(s): State<Service>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, Problem> {
    let caller = caller(&headers)?;
    let request: LaunchStreamer = serde_json::from_slice(&bytes)
        .map_err(|e| Problem::bad_request(format!("invalid JSON body: {e}")))?;
    let target = request.target()?;
    let _one_at_a_time = s.launching.lock().await;
    let records = s.store.list().await?;
    if let Err(cap) = core::decide_launch(&records, &caller, s.config.max_active) {
        tracing::info!(
            caller = caller.as_str(),
            active = cap.active,
            "launch refused at the cap"
        );
        return Ok(refused(&cap));
    }
    let object = core::streamer_object(&target, &caller, now(), &s.config.template);
    let created = s.store.create(object).await?;
    tracing::info!(name = %created.name, caller = caller.as_str(), session = %created.session_id, "streamer launched");
    Ok((StatusCode::CREATED, Json(created.view(s.config.idle))).into_response())
}

async fn read(
    State(s): State<Service>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, Problem> {
    caller(&headers)?;
    let name = core::streamer_name(&name)?;
    let mut record = s.store.get(name).await?.ok_or_else(|| no_such(name))?;
    let now = now();
    if core::needs_touch(&record, now, s.config.idle) {
        match s.store.touch(name, now).await {
            Ok(()) => record.last_active = now,
            // The read still answers; the streamer may be reaped earlier than shown.
            Err(e) => tracing::warn!(error = %e, "could not record activity"),
        }
    }
    Ok(Json(record.view(s.config.idle)).into_response())
}

async fn remove(
    State(s): State<Service>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, Problem> {
    let caller = caller(&headers)?;
    let name = core::streamer_name(&name)?;
    let record = s.store.get(name).await?.ok_or_else(|| no_such(name))?;
    core::may_delete(&record, &caller)?;
    if !s.store.delete(&record, false).await? {
        return Err(no_such(name));
    }
    tracing::info!(name, caller = caller.as_str(), "streamer deleted");
    Ok(StatusCode::NO_CONTENT.into_response())
}

fn no_such(name: &str) -> Problem {
    Problem::new(
        404,
        format!("no streamer {name} (launched through the tenant API)"),
    )
}

#[cfg(test)]
mod tests {
    /// The committed document must equal the served one: run `cargo xtask codegen` after a change.
    #[test]
    fn committed_openapi_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/api/tenant.openapi.json"
        );
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        let current = serde_json::to_string_pretty(&nsight_contracts::openapi::tenant())
            .unwrap_or_default()
            + "\n";
        assert!(
            committed == current,
            "docs/api/tenant.openapi.json is stale: run `cargo xtask codegen`"
        );
    }
}
