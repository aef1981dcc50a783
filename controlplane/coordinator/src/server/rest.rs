//! The REST API for users (CLI, UI), documented in docs/api/coordinator-rest.md and served as
//! OpenAPI at `/v1/openapi.json`. Parses and validates input, calls the hub, renders JSON.

use std::sync::Arc;

use axum::{
    extract::{DefaultBodyLimit, FromRef, Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use nsight_contracts::{
    coordinator::{
        BeginSession, Changes, ChangesQuery, SessionList, SessionsQuery, StatusQuery, TagAction,
        TagList, MAX_CHANGES_WAIT_MS,
    },
    gateway_only::{self, GatewayToken},
    request::{self, query, Body, QueryOf},
    routes,
};
use serde::de::DeserializeOwned;

use super::{hub::Hub, openapi, problem::Problem, reports::Reports};
use crate::state::{
    Coordinator, SessionFilter, SessionId, SessionState, SessionSummary, Tag, Title,
};

pub use nsight_contracts::coordinator::DEFAULT_STATUS_LIMIT;

/// The largest request body: every body here is a small JSON object (a tag, a title, an ID).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// What the handlers share: the state machine's hub and, when configured, report storage.
#[derive(Debug, Clone)]
pub struct Api {
    hub: Hub,
    reports: Option<Arc<Reports>>,
}

impl FromRef<Api> for Hub {
    fn from_ref(api: &Api) -> Hub {
        api.hub.clone()
    }
}

/// The API, served under both `/v1` and `/coordinator/v1` (the gateway's prefix), only to the
/// gateway when `gateway_token` is set; with a local report store, also the signed-URL object
/// server at `/storage/v1/objects/` (each URL carries its own signature).
pub fn router(
    hub: Hub,
    reports: Option<Arc<Reports>>,
    gateway_token: Option<GatewayToken>,
) -> Router {
    let objects = reports.as_ref().and_then(|r| r.object_router());
    let api = Router::new()
        .route("/status", get(status))
        .route("/changes", get(changes))
        .route("/tags", get(list_tags))
        .route("/sessions", get(list_sessions).post(begin_session))
        .route("/sessions/{id}", get(get_session))
        .route("/sessions/{id}/reports", get(list_reports))
        .route("/start", post(start))
        .route("/stop", post(stop))
        .route("/end", post(end))
        .route(routes::OPENAPI, get(|| async { Json(openapi::document()) }))
        .fallback(|| async { Problem::new(404, "no such endpoint; see /v1/openapi.json") })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Api { hub, reports });
    let api = request::refuse_oversized(api, MAX_BODY_BYTES);
    let api = gateway_only::require(api, gateway_token);
    let root = Router::new()
        .route(routes::HEALTHZ, get(|| async { "ok" }))
        .nest(routes::V1, api.clone())
        .nest(routes::COORDINATOR_V1, api);
    match objects {
        Some(objects) => root.merge(objects),
        None => root,
    }
}

/// Writes the session's `session.json` when storage is configured.
async fn record_session(api: &Api, id: SessionId) {
    if let Some(reports) = &api.reports {
        if let Ok(session) = api.hub.read(|m| m.session(id).cloned()) {
            reports.record_session(&session).await;
        }
    }
}

async fn list_reports(State(api): State<Api>, Path(id): Path<String>) -> Result<Response, Problem> {
    let id = session_id(&id)?;
    let session = api.hub.read(|m| m.session(id).cloned())?;
    let Some(reports) = &api.reports else {
        return Err(Problem::new(
            501,
            "this coordinator has no report storage configured (--storage-config or --storage-dir)",
        ));
    };
    Ok(Json(reports.list(&session).await?).into_response())
}

fn body<T: DeserializeOwned>(bytes: Body) -> Result<T, Problem> {
    request::json_object(bytes, MAX_BODY_BYTES)
}

fn tag(raw: Option<&str>) -> Result<Tag, Problem> {
    Ok(raw.map(Tag::parse).transpose()?.unwrap_or_default())
}

fn session_id(raw: &str) -> Result<SessionId, Problem> {
    raw.parse()
        .map_err(|_| Problem::bad_request(format!("`{raw}` is not a session id (a UUID)")))
}

async fn status(State(hub): State<Hub>, q: QueryOf<StatusQuery>) -> Result<Response, Problem> {
    let q = query(q)?;
    let tag = tag(q.tag.as_deref())?;
    let limit = q.limit.unwrap_or(DEFAULT_STATUS_LIMIT);
    // Serialize outside the lock: the view is a copy.
    let view = hub.read(|m| m.status_limited(&tag, limit));
    Ok(Json(view).into_response())
}

/// The long poll: the state's version once it differs from `since` (or after the wait).
async fn changes(State(hub): State<Hub>, q: QueryOf<ChangesQuery>) -> Result<Response, Problem> {
    let q = query(q)?;
    let mut rx = hub.changes();
    if let Some(since) = q.since {
        let wait = std::time::Duration::from_millis(
            q.wait
                .unwrap_or(MAX_CHANGES_WAIT_MS)
                .min(MAX_CHANGES_WAIT_MS),
        );
        // Either outcome answers with the version now; a closed channel cannot happen while
        // the hub lives.
        let _ = tokio::time::timeout(wait, rx.wait_for(|v| *v != since)).await;
    }
    let version = *rx.borrow();
    Ok(Json(Changes { version }).into_response())
}

async fn list_tags(State(hub): State<Hub>) -> Response {
    let tags = hub.read(|m| m.tags());
    Json(TagList { tags }).into_response()
}

async fn list_sessions(
    State(hub): State<Hub>,
    q: QueryOf<SessionsQuery>,
) -> Result<Response, Problem> {
    let q = query(q)?;
    let state = match q.state.as_deref() {
        None => None,
        Some(raw) => Some(SessionState::parse(raw).ok_or_else(|| {
            Problem::bad_request(format!("state `{raw}` is not one of: open, ended"))
        })?),
    };
    let filter = SessionFilter {
        tag: q.tag.as_deref().map(Tag::parse).transpose()?,
        state,
    };
    let sessions = hub.read(|m| m.sessions(&filter));
    Ok(Json(SessionList { sessions }).into_response())
}

async fn begin_session(State(api): State<Api>, bytes: Body) -> Result<Response, Problem> {
    let req: BeginSession = body(bytes)?;
    let tag = tag(req.tag.as_deref())?;
    let title = req.title.as_deref().map(Title::parse).transpose()?;
    let id = api
        .hub
        .apply(|m: &mut Coordinator, now| m.begin_session(&tag, title, now))?;
    record_session(&api, id).await;
    let summary = api.hub.read(|m| m.session(id).map(SessionSummary::of))?;
    Ok((StatusCode::CREATED, Json(summary)).into_response())
}

async fn get_session(State(hub): State<Hub>, Path(id): Path<String>) -> Result<Response, Problem> {
    let id = session_id(&id)?;
    let session = hub.read(|m| m.session(id).cloned())?;
    Ok(Json(session).into_response())
}

fn tag_action(bytes: Body) -> Result<(Tag, Option<SessionId>), Problem> {
    let req: TagAction = body(bytes)?;
    let session = req.session.as_deref().map(session_id).transpose()?;
    Ok((tag(req.tag.as_deref())?, session))
}

async fn start(State(api): State<Api>, bytes: Body) -> Result<Response, Problem> {
    let (tag, session) = tag_action(bytes)?;
    let started = api
        .hub
        .apply(|m: &mut Coordinator, now| m.start(&tag, session, now))?;
    if started.session_created {
        record_session(&api, started.session).await;
    }
    Ok(Json(started).into_response())
}

async fn stop(State(hub): State<Hub>, bytes: Body) -> Result<Response, Problem> {
    let (tag, session) = tag_action(bytes)?;
    let stopped = hub.apply(|m: &mut Coordinator, now| m.stop(&tag, session, now))?;
    Ok(Json(stopped).into_response())
}

async fn end(State(api): State<Api>, bytes: Body) -> Result<Response, Problem> {
    let (tag, session) = tag_action(bytes)?;
    let ended = api
        .hub
        .apply(|m: &mut Coordinator, now| m.end_session(&tag, session, now))?;
    record_session(&api, ended.session).await;
    Ok(Json(ended).into_response())
}
