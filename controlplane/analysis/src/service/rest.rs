//! The REST API (docs/analysis.md; OpenAPI at `/v1/openapi.json`), served under both `/v1`
//! and `/analysis/v1` (the gateway's prefix). Parses and checks input, calls [`Service`],
//! renders JSON; output files stream from storage.

use axum::{
    body::Body,
    extract::{DefaultBodyLimit, Path, State},
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use nsight_contracts::{
    analysis::{file_content_type, JobFiles, JobList, JobLogs, JobsQuery, RecipeList},
    gateway_only::{self, GatewayToken},
    request::{self, QueryOf},
    routes,
};
use nsight_storage::ReportStore;
use tokio_util::io::ReaderStream;
use uuid::Uuid;

use super::{
    inputs::HTML_FILE,
    job::{JobRequest, JobStatus},
    jobs::Service,
    openapi,
    problem::Problem,
    render,
};

/// The largest request body (a job request: a recipe, its arguments and its inputs).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The API under `/v1` and `/analysis/v1` (only for the gateway when `gateway_token` is set),
/// plus `/healthz`.
pub fn router(svc: Service, gateway_token: Option<GatewayToken>) -> Router {
    let api = Router::new()
        .route("/recipes", get(list_recipes))
        .route("/recipes/{name}", get(get_recipe))
        .route("/jobs", get(list_jobs).post(create_job))
        .route("/jobs/{id}", get(get_job).delete(delete_job))
        .route("/jobs/{id}/logs", get(job_logs))
        .route("/jobs/{id}/files", get(job_files))
        .route("/jobs/{id}/files/{name}", get(job_file))
        .route("/jobs/{id}/notebook.html", get(job_html))
        .route("/jobs/{id}/cancel", post(cancel_job))
        .merge(super::rest_timeline::routes())
        .route(routes::OPENAPI, get(|| async { Json(openapi::document()) }))
        .fallback(|| async { Problem::new(404, "no such endpoint; see /v1/openapi.json") })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(svc);
    let api = request::refuse_oversized(api, MAX_BODY_BYTES);
    let api = gateway_only::require(api, gateway_token);
    Router::new()
        .route(routes::HEALTHZ, get(|| async { "ok" }))
        .nest(routes::V1, api.clone())
        .nest(routes::ANALYSIS_V1, api)
}

fn job_id(raw: &str) -> Result<Uuid, Problem> {
    raw.parse()
        .map_err(|_| Problem::bad_request(format!("`{raw}` is not a job id (a UUID)")))
}

async fn list_recipes(State(svc): State<Service>) -> Response {
    let recipes = svc.0.catalog.iter().map(|r| r.view()).collect();
    Json(RecipeList { recipes }).into_response()
}

async fn get_recipe(
    State(svc): State<Service>,
    Path(name): Path<String>,
) -> Result<Response, Problem> {
    let recipe = svc.0.catalog.get(&name).ok_or_else(|| {
        Problem::new(
            404,
            format!(
                "no recipe `{name}`; the recipes are: {}",
                svc.0.catalog.names().join(", ")
            ),
        )
    })?;
    Ok(Json(recipe.view()).into_response())
}

async fn create_job(State(svc): State<Service>, bytes: request::Body) -> Result<Response, Problem> {
    let request: JobRequest = request::json_object(bytes, MAX_BODY_BYTES)?;
    let job = svc.create(request)?;
    Ok((StatusCode::ACCEPTED, Json(job)).into_response())
}

async fn list_jobs(State(svc): State<Service>, q: QueryOf<JobsQuery>) -> Result<Response, Problem> {
    let q = request::query(q)?;
    let status = match q.status.as_deref() {
        None => None,
        Some(raw) => Some(JobStatus::parse(raw).ok_or_else(|| {
            let all: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
            Problem::bad_request(format!("status `{raw}` is not one of: {}", all.join(", ")))
        })?),
    };
    let words = q.q.unwrap_or_default();
    if words.chars().count() > nsight_contracts::analysis::MAX_JOBS_QUERY_CHARS {
        return Err(Problem::bad_request(format!(
            "`q` is longer than {} characters",
            nsight_contracts::analysis::MAX_JOBS_QUERY_CHARS
        )));
    }
    let mut jobs: Vec<_> = svc
        .list(status)
        .into_iter()
        .filter(|j| j.matches(&words))
        .collect();
    let matched = jobs.len();
    if let Some(limit) = q.limit {
        // The newest `limit`, still oldest first.
        jobs.drain(..matched.saturating_sub(limit));
    }
    Ok(Json(JobList {
        jobs,
        matched: Some(matched),
    })
    .into_response())
}

async fn get_job(State(svc): State<Service>, Path(id): Path<String>) -> Result<Response, Problem> {
    Ok(Json(svc.get(job_id(&id)?)?).into_response())
}

async fn job_logs(State(svc): State<Service>, Path(id): Path<String>) -> Result<Response, Problem> {
    let lines = svc.log_of(job_id(&id)?)?;
    Ok(Json(JobLogs { lines }).into_response())
}

async fn job_files(
    State(svc): State<Service>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let job = svc.get(job_id(&id)?)?;
    Ok(Json(JobFiles { files: job.files }).into_response())
}

/// Streams one of the job's files from storage.
async fn stream_file(
    svc: &Service,
    id: &str,
    name: &str,
    inline: bool,
) -> Result<Response, Problem> {
    let job = svc.get(job_id(id)?)?;
    let file = job.files.iter().find(|f| f.name == name).ok_or_else(|| {
        let hint = if job.status.is_terminal() {
            "see GET jobs/{id}/files".to_owned()
        } else {
            format!(
                "the job is {}; files appear when it succeeds",
                job.status.as_str()
            )
        };
        Problem::new(404, format!("job {} has no file `{name}`: {hint}", job.id))
    })?;
    let reader = svc.0.store.get(&file.key, None).await.map_err(|e| {
        Problem::new(
            503,
            format!("cannot read the file from storage: {}", e.chain()),
        )
    })?;
    let len = reader.len;
    let mut response = Body::from_stream(ReaderStream::new(reader)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(file_content_type(name)),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if inline {
        // The page is static: no scripts, nothing loaded from elsewhere; figures are images
        // embedded as data: URIs (an SVG shown through <img> runs no script).
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(render::HTML_CSP),
        );
    } else if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(response)
}

async fn job_file(
    State(svc): State<Service>,
    Path((id, name)): Path<(String, String)>,
) -> Result<Response, Problem> {
    stream_file(&svc, &id, &name, false).await
}

async fn job_html(State(svc): State<Service>, Path(id): Path<String>) -> Result<Response, Problem> {
    stream_file(&svc, &id, HTML_FILE, true).await
}

async fn cancel_job(
    State(svc): State<Service>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    Ok(Json(svc.cancel(job_id(&id)?).await?).into_response())
}

async fn delete_job(
    State(svc): State<Service>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    svc.delete(job_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
