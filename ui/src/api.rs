//! Calls to the platform's REST APIs from the browser, same origin through the gateway: the
//! coordinator below [`routes::COORDINATOR_V1`], the analysis service below
//! [`routes::ANALYSIS_V1`]. Answers decode into the contract's types (`nsight_contracts`); a
//! refusal becomes an [`ApiError`] carrying the problem's message. Credentials: the gateway's
//! session cookie travels with the browser's own `fetch`; an API key the user typed (see
//! `crate::auth`) is sent as `Authorization: Bearer`. Nothing here logs either.
//!
//! ```text
//!  page ──api::sessions(tag)──> fetch /coordinator/v1/sessions?tag=.. ──> JSON ──> SessionList
//!                   401 or a redirect to sign-in ──> ApiError::Unauthorized (the prompt shows)
//!                                    4xx/5xx ──> Problem::from_body ──> ApiError::Refused
//! ```

use nsight_contracts::{
    analysis::{Job, JobList, JobLogs, JobRequest, RecipeList},
    coordinator::{
        BeginSession, Ended, ReportListing, Session, SessionList, SessionSummary, Started, Stopped,
        TagAction, TagList, TagStatus,
    },
    routes,
    tenant::{LaunchStreamer, Streamer, StreamerList},
    timeline::{EventDetail, RangeSummary, SearchAnswer, Tile, Timeline},
    Problem,
};
use serde::{de::DeserializeOwned, Serialize};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::auth;

/// Why an answer is not available; the text is what the page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The request did not complete (no network, no window).
    Unreachable(String),
    /// The gateway wants credentials (401): the app asks for an API key.
    Unauthorized(String),
    /// The service or the gateway refused it.
    Refused { status: u16, message: String },
    /// The answer was not the expected JSON.
    Decode(String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Unreachable(why) => write!(f, "the gateway cannot be reached: {why}"),
            ApiError::Unauthorized(why) => write!(f, "sign-in needed: {why} (HTTP 401)"),
            ApiError::Refused { status, message } => write!(f, "{message} (HTTP {status})"),
            ApiError::Decode(why) => write!(f, "unexpected answer: {why}"),
        }
    }
}

fn js_text(value: JsValue) -> String {
    value
        .as_string()
        .or_else(|| {
            value
                .dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
        })
        .unwrap_or_else(|| "unknown error".to_owned())
}

/// One request: `method path` with an optional JSON body; the answer once it is a success (a
/// refusal becomes an [`ApiError`] with the problem's message).
async fn fetch(
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<web_sys::Response, ApiError> {
    let window = web_sys::window().ok_or_else(|| ApiError::Unreachable("no window".to_owned()))?;
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    let headers = web_sys::Headers::new().map_err(|e| ApiError::Unreachable(js_text(e)))?;
    if let Some(key) = auth::api_key() {
        headers
            .set("Authorization", &format!("Bearer {key}"))
            .map_err(|e| ApiError::Unreachable(js_text(e)))?;
    }
    if let Some(body) = body {
        headers
            .set("Content-Type", "application/json")
            .map_err(|e| ApiError::Unreachable(js_text(e)))?;
        init.set_body(&JsValue::from_str(&body));
    }
    init.set_headers(&headers);
    // An OAuth2 gateway answers a GET without a session with a redirect to the identity
    // provider, which fetch cannot follow (another origin): seen here as an opaque redirect.
    init.set_redirect(web_sys::RequestRedirect::Manual);
    let response = JsFuture::from(window.fetch_with_str_and_init(path, &init))
        .await
        .map_err(|e| ApiError::Unreachable(js_text(e)))?;
    let response: web_sys::Response = response
        .dyn_into()
        .map_err(|e| ApiError::Unreachable(js_text(e)))?;
    if response.type_() == web_sys::ResponseType::Opaqueredirect {
        auth::needed();
        return Err(ApiError::Unauthorized(
            "the gateway sends this request to its sign-in page".to_owned(),
        ));
    }
    if response.ok() {
        return Ok(response);
    }
    let status = response.status();
    let message = Problem::from_body(status, &text_of(&response).await?)
        .message()
        .to_owned();
    if status == 401 {
        auth::needed();
        return Err(ApiError::Unauthorized(message));
    }
    Err(ApiError::Refused { status, message })
}

async fn text_of(response: &web_sys::Response) -> Result<String, ApiError> {
    match response.text() {
        Ok(promise) => Ok(JsFuture::from(promise)
            .await
            .map_err(|e| ApiError::Unreachable(js_text(e)))?
            .as_string()
            .unwrap_or_default()),
        Err(e) => Err(ApiError::Unreachable(js_text(e))),
    }
}

/// One request; the answer's status and text.
async fn send(method: &str, path: &str, body: Option<String>) -> Result<(u16, String), ApiError> {
    let response = fetch(method, path, body).await?;
    Ok((response.status(), text_of(&response).await?))
}

/// A GET whose answer is binary.
async fn get_bytes(path: &str) -> Result<Vec<u8>, ApiError> {
    let response = fetch("GET", path, None).await?;
    let buffer = match response.array_buffer() {
        Ok(promise) => JsFuture::from(promise)
            .await
            .map_err(|e| ApiError::Unreachable(js_text(e)))?,
        Err(e) => return Err(ApiError::Unreachable(js_text(e))),
    };
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}

fn decode<T: DeserializeOwned>(text: &str) -> Result<T, ApiError> {
    serde_json::from_str(text).map_err(|e| ApiError::Decode(e.to_string()))
}

async fn get_json<T: DeserializeOwned>(path: &str) -> Result<T, ApiError> {
    decode(&send("GET", path, None).await?.1)
}

async fn post_json<B: Serialize, T: DeserializeOwned>(path: &str, body: &B) -> Result<T, ApiError> {
    let body = serde_json::to_string(body).map_err(|e| ApiError::Decode(e.to_string()))?;
    decode(&send("POST", path, Some(body)).await?.1)
}

/// A query-string value, percent-encoded.
pub fn encode(value: &str) -> String {
    String::from(js_sys::encode_uri_component(value))
}

fn coordinator(path: &str) -> String {
    format!("{}{path}", routes::COORDINATOR_V1)
}

fn analysis(path: &str) -> String {
    format!("{}{path}", routes::ANALYSIS_V1)
}

/// `GET /tags`: every tag that has sessions (the tag selector).
pub async fn tags() -> Result<TagList, ApiError> {
    get_json(&coordinator("/tags")).await
}

/// `GET /sessions`: every session (of `tag`, in `state`, when given), oldest first.
pub async fn sessions(tag: Option<String>, state: Option<String>) -> Result<SessionList, ApiError> {
    let query: Vec<String> = [("tag", tag), ("state", state)]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", encode(&v))))
        .collect();
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{}", query.join("&"))
    };
    get_json(&coordinator(&format!("/sessions{query}"))).await
}

/// `GET /status?tag`: the tag's agents, open session and active collection.
pub async fn status(tag: String) -> Result<TagStatus, ApiError> {
    get_json(&coordinator(&format!("/status?tag={}", encode(&tag)))).await
}

/// `GET /sessions/{id}`: the session with its collections.
pub async fn session(id: String) -> Result<Session, ApiError> {
    get_json(&coordinator(&format!("/sessions/{}", encode(&id)))).await
}

/// `GET /sessions/{id}/reports`.
pub async fn reports(id: String) -> Result<ReportListing, ApiError> {
    get_json(&coordinator(&format!("/sessions/{}/reports", encode(&id)))).await
}

/// `POST /sessions`.
pub async fn begin(tag: String, title: Option<String>) -> Result<SessionSummary, ApiError> {
    let body = BeginSession {
        tag: Some(tag),
        title,
    };
    post_json(&coordinator("/sessions"), &body).await
}

fn action(tag: String, session: Option<String>) -> TagAction {
    TagAction {
        tag: Some(tag),
        session,
    }
}

/// `POST /start`: a collection in the tag's open session (one is opened if none is).
pub async fn start(tag: String, session: Option<String>) -> Result<Started, ApiError> {
    post_json(&coordinator("/start"), &action(tag, session)).await
}

/// `POST /stop`.
pub async fn stop(tag: String, session: Option<String>) -> Result<Stopped, ApiError> {
    post_json(&coordinator("/stop"), &action(tag, session)).await
}

/// `POST /end`.
pub async fn end(tag: String, session: Option<String>) -> Result<Ended, ApiError> {
    post_json(&coordinator("/end"), &action(tag, session)).await
}

/// `GET /recipes`.
pub async fn recipes() -> Result<RecipeList, ApiError> {
    get_json(&analysis("/recipes")).await
}

/// `GET /jobs`: the newest `limit` jobs in `status` holding the `words` (when given), and how
/// many match in all.
pub async fn jobs(
    status: Option<String>,
    words: Option<String>,
    limit: usize,
) -> Result<JobList, ApiError> {
    let mut query = vec![format!("limit={limit}")];
    query.extend(status.map(|s| format!("status={}", encode(&s))));
    query.extend(
        words
            .filter(|w| !w.trim().is_empty())
            .map(|w| format!("q={}", encode(w.trim()))),
    );
    get_json(&analysis(&format!("/jobs?{}", query.join("&")))).await
}

/// `GET /jobs/{id}`.
pub async fn job(id: String) -> Result<Job, ApiError> {
    get_json(&analysis(&format!("/jobs/{}", encode(&id)))).await
}

/// `GET /jobs/{id}/logs`.
pub async fn job_logs(id: String) -> Result<JobLogs, ApiError> {
    get_json(&analysis(&format!("/jobs/{}/logs", encode(&id)))).await
}

/// `POST /jobs`.
pub async fn run_job(request: JobRequest) -> Result<Job, ApiError> {
    post_json(&analysis("/jobs"), &request).await
}

/// `POST /tenant/v1/streamers`: an Nsight Streamer for a session or one report.
pub async fn launch_streamer(request: LaunchStreamer) -> Result<Streamer, ApiError> {
    post_json(&format!("{}/streamers", routes::TENANT_V1), &request).await
}

/// `GET /tenant/v1/streamers`: the caller's streamers and the cap.
pub async fn streamers() -> Result<StreamerList, ApiError> {
    get_json(&format!("{}/streamers", routes::TENANT_V1)).await
}

/// `DELETE /tenant/v1/streamers/{name}` (only its owner may).
pub async fn delete_streamer(name: String) -> Result<(), ApiError> {
    let path = format!("{}/streamers/{}", routes::TENANT_V1, encode(&name));
    send("DELETE", &path, None).await.map(|_| ())
}

/// `POST /streamers/{name}/.nsight-grant`: with an API key, a cookie that lets a new tab open the
/// streamer (a navigation carries no `Authorization` header). Nothing to ask for without a key
/// (an OAuth2 gateway's session cookie already goes with the tab).
pub async fn grant_streamer(name: String) -> Result<(), ApiError> {
    if auth::api_key().is_none() {
        return Ok(());
    }
    let path = format!(
        "{}{}/{}",
        routes::STREAMERS,
        encode(&name),
        routes::STREAMER_GRANT
    );
    send("POST", &path, None).await.map(|_| ())
}

/// `GET /tenant/v1/streamers/{name}` (reading one also keeps it from being reaped).
pub async fn streamer(name: String) -> Result<Streamer, ApiError> {
    get_json(&format!(
        "{}/streamers/{}",
        routes::TENANT_V1,
        encode(&name)
    ))
    .await
}

/// `POST /jobs/{id}/cancel`.
pub async fn cancel_job(id: String) -> Result<Job, ApiError> {
    let path = analysis(&format!("/jobs/{}/cancel", encode(&id)));
    decode(&send("POST", &path, None).await?.1)
}

/// `DELETE /jobs/{id}`.
pub async fn delete_job(id: String) -> Result<(), ApiError> {
    send("DELETE", &analysis(&format!("/jobs/{}", encode(&id))), None)
        .await
        .map(|_| ())
}

/// A job's output file as text (CSV, SVG, ipynb).
pub async fn job_file(id: String, name: String) -> Result<String, ApiError> {
    let path = analysis(&format!("/jobs/{}/files/{}", encode(&id), encode(&name)));
    Ok(send("GET", &path, None).await?.1)
}

/// A job's notebook rendered as a static page (`notebook.html`).
pub async fn job_notebook(id: String) -> Result<String, ApiError> {
    let path = analysis(&format!("/jobs/{}/notebook.html", encode(&id)));
    Ok(send("GET", &path, None).await?.1)
}

/// `GET /timeline?report`: the report's tracks and time range.
pub async fn timeline(report: String) -> Result<Timeline, ApiError> {
    get_json(&analysis(&format!("/timeline?report={}", encode(&report)))).await
}

/// `GET /timeline/tiles`: one tile, decoded.
pub async fn tile(report: String, track: u32, level: u8, index: u64) -> Result<Tile, ApiError> {
    let path = analysis(&format!(
        "/timeline/tiles?report={}&track={track}&level={level}&index={index}",
        encode(&report)
    ));
    Tile::decode(&get_bytes(&path).await?).map_err(|e| ApiError::Decode(e.to_string()))
}

/// `GET /timeline/perfetto`: the report as a Perfetto trace, saved by the browser as
/// `file_name` (fetched with the tab's credentials, which a plain link would not send).
pub async fn save_perfetto_trace(report: String, file_name: String) -> Result<(), ApiError> {
    let path = analysis(&format!("/timeline/perfetto?report={}", encode(&report)));
    let response = fetch("GET", &path, None).await?;
    let blob = match response.blob() {
        Ok(promise) => JsFuture::from(promise)
            .await
            .map_err(|e| ApiError::Unreachable(js_text(e)))?,
        Err(e) => return Err(ApiError::Unreachable(js_text(e))),
    };
    let blob: web_sys::Blob = blob.unchecked_into();
    let url = web_sys::Url::create_object_url_with_blob(&blob)
        .map_err(|e| ApiError::Unreachable(js_text(e)))?;
    let anchor = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.create_element("a").ok())
        .map(|e| e.unchecked_into::<web_sys::HtmlAnchorElement>());
    if let Some(anchor) = anchor {
        anchor.set_href(&url);
        anchor.set_download(&file_name);
        anchor.click();
    }
    let _ = web_sys::Url::revoke_object_url(&url);
    Ok(())
}

/// `GET /timeline/event`: one event's details.
pub async fn timeline_event(
    report: String,
    track: u32,
    event: u32,
) -> Result<EventDetail, ApiError> {
    get_json(&analysis(&format!(
        "/timeline/event?report={}&track={track}&event={event}",
        encode(&report)
    )))
    .await
}

/// `GET /timeline/search`: the next (`backwards`: previous) event after `from` whose name
/// contains `text`.
pub async fn timeline_search(
    report: String,
    text: String,
    from: Option<(u32, u32)>,
    backwards: bool,
) -> Result<SearchAnswer, ApiError> {
    let from = from
        .map(|(t, e)| format!("&from={t}.{e}"))
        .unwrap_or_default();
    let dir = if backwards { "&dir=prev" } else { "" };
    get_json(&analysis(&format!(
        "/timeline/search?report={}&q={}{from}{dir}",
        encode(&report),
        encode(&text)
    )))
    .await
}

/// `GET /timeline/range`: a selected range's aggregates over `tracks`.
pub async fn timeline_range(
    report: String,
    start: i64,
    end: i64,
    tracks: Vec<u32>,
) -> Result<RangeSummary, ApiError> {
    let tracks: Vec<String> = tracks.iter().map(u32::to_string).collect();
    get_json(&analysis(&format!(
        "/timeline/range?report={}&start={start}&end={end}&tracks={}",
        encode(&report),
        tracks.join(",")
    )))
    .await
}
