//! A small blocking client for the coordinator's REST API (docs/api/coordinator-rest.md) as
//! reached through the gateway at `<gw>/coordinator/v1/...`, and the analysis service's at
//! `<gw>/analysis/v1/...`. The wire types are the contract's (`nsight_contracts`). Owns the base URL, the `Authorization` header, timeouts and turning non-2xx
//! answers (`application/problem+json` or not) into [`ApiError`]s. Prints nothing and never
//! logs the API key.
//!
//! ```text
//! Client::start(tag, session) --POST <gw>/coordinator/v1/start--> gateway
//!        Reply { status, body } <-- 2xx      ApiError::Refused <-- 4xx/5xx (problem)
//! ```
//!
//! Answers are returned as raw text ([`Reply`]) so `--output json` can print them unchanged;
//! [`Reply::parse`] reads the typed view for tables.

use std::time::Duration;

use nsight_contracts::{
    coordinator::{BeginSession, SessionsQuery, StatusQuery, TagAction},
    routes::{ANALYSIS_V1, COORDINATOR_V1},
};
use reqwest::blocking::{Client as Http, RequestBuilder};
use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, LOCATION};
use reqwest::redirect::Policy;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use uuid::Uuid;

pub use nsight_contracts::Problem;

use crate::config::{ApiKey, HttpUrl};
use crate::trust::{self, CaCert};
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a request did not produce a usable 2xx answer.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("cannot set up the HTTP client")]
    Setup(#[source] reqwest::Error),
    #[error("the configured API key cannot be sent in an HTTP header")]
    ApiKeyHeader(#[source] reqwest::header::InvalidHeaderValue),
    #[error("cannot reach the gateway at {url}")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{} (HTTP {})", .0.problem.message(), .0.status)]
    Refused(Box<Refusal>),
    #[error("the gateway redirected {url} to {location} (HTTP {status}); configure the final URL with `nsight-cloud configure --gw ...`")]
    Redirected {
        url: String,
        status: StatusCode,
        location: String,
    },
    #[error("unexpected answer from {url}")]
    Decode {
        url: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the answer from {url} is larger than the {} MiB this command accepts; it was not read \
         (is the gateway URL right?)",
        .limit >> 20
    )]
    TooLarge { url: String, limit: u64 },
    #[error("cannot read the answer from {url}")]
    Read {
        url: String,
        #[source]
        source: std::io::Error,
    },
}

/// The largest API answer (JSON) the CLI reads; a listing of 10,000 sessions is a few MiB.
pub const MAX_ANSWER_BYTES: u64 = 64 << 20;
/// The largest error body kept for the message.
const MAX_ERROR_BYTES: u64 = 64 << 10;

/// Reads at most `limit` bytes of `response` as text: never holds more than that in memory,
/// whatever the server sends.
pub fn read_bounded(
    response: reqwest::blocking::Response,
    url: &str,
    limit: u64,
) -> Result<String, ApiError> {
    use std::io::Read as _;
    if response.content_length().is_some_and(|n| n > limit) {
        return Err(ApiError::TooLarge {
            url: url.to_owned(),
            limit,
        });
    }
    let mut bytes = Vec::new();
    response
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| ApiError::Read {
            url: url.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(ApiError::TooLarge {
            url: url.to_owned(),
            limit,
        });
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// An error answer's body, cut at [`MAX_ERROR_BYTES`] (for the message only).
pub fn error_body(response: reqwest::blocking::Response) -> String {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    let _ = response.take(MAX_ERROR_BYTES).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

impl ApiError {
    /// The process exit code: 1 when the server refused or answered nonsense, 3 when it could
    /// not be reached, 2 when the local setup is unusable.
    pub fn exit_code(&self) -> u8 {
        match self {
            ApiError::Refused(_)
            | ApiError::Redirected { .. }
            | ApiError::Decode { .. }
            | ApiError::TooLarge { .. } => 1,
            ApiError::Unreachable { .. } | ApiError::Read { .. } => 3,
            ApiError::Setup(_) | ApiError::ApiKeyHeader(_) => 2,
        }
    }

    /// Whether a transport error was a timeout (rather than e.g. a refused connection).
    pub fn is_timeout(&self) -> bool {
        matches!(self, ApiError::Unreachable { source, .. } if source.is_timeout())
    }
}

/// A 4xx/5xx answer (boxed in [`ApiError::Refused`] to keep errors small).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub url: String,
    pub status: StatusCode,
    pub problem: Problem,
    /// The answer as received, for `--output json`.
    pub body: String,
}

/// A 2xx answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The URL that answered.
    pub url: String,
    pub status: StatusCode,
    pub body: String,
}

impl Reply {
    /// The body as `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        serde_json::from_str(&self.body).map_err(|source| ApiError::Decode {
            url: self.url.clone(),
            source,
        })
    }
}

/// The blocking coordinator client. Invariant: `base` is `<gw>/coordinator/v1` with no trailing
/// slash.
#[derive(Debug)]
pub struct Client {
    base: String,
    analysis_base: String,
    auth: Option<HeaderValue>,
    http: Http,
}

impl Client {
    /// A client for `gateway`, sending `Authorization: Bearer <key>` when `api_key` is set.
    /// Redirects are not followed (they would drop the key or turn a POST into a GET).
    /// `ca` is trusted for the gateway's certificate besides the built-in roots.
    pub fn new(
        gateway: &HttpUrl,
        api_key: Option<&ApiKey>,
        ca: Option<&CaCert>,
    ) -> Result<Client, ApiError> {
        let auth = api_key
            .map(|key| {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose()))?;
                value.set_sensitive(true);
                Ok(value)
            })
            .transpose()
            .map_err(ApiError::ApiKeyHeader)?;
        let http = trust::with_ca(Http::builder(), ca)
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .redirect(Policy::none())
            .user_agent(concat!("nsight-cloud/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ApiError::Setup)?;
        Ok(Client {
            base: format!("{}{COORDINATOR_V1}", gateway.as_str().trim_end_matches('/')),
            analysis_base: format!("{}{ANALYSIS_V1}", gateway.as_str().trim_end_matches('/')),
            auth,
            http,
        })
    }

    /// The URL of `path` (starting with `/`, relative to `/coordinator/v1`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET /v1/status?tag=T` -> `TagStatus`.
    pub fn status(&self, tag: &str) -> Result<Reply, ApiError> {
        let url = self.url("/status");
        let query = StatusQuery {
            tag: Some(tag.to_owned()),
            limit: None,
        };
        let request = self.http.get(&url).query(&query);
        self.send("GET", url, request)
    }

    /// `POST /v1/sessions` -> 201 `SessionSummary`.
    pub fn begin_session(&self, tag: &str, title: Option<&str>) -> Result<Reply, ApiError> {
        let body = BeginSession {
            tag: Some(tag.to_owned()),
            title: title.map(str::to_owned),
        };
        self.post("/sessions", &body)
    }

    /// `POST /v1/start` -> `Started`.
    pub fn start(&self, tag: &str, session: Option<Uuid>) -> Result<Reply, ApiError> {
        self.post("/start", &tag_action(tag, session))
    }

    /// `POST /v1/stop` -> `Stopped`.
    pub fn stop(&self, tag: &str, session: Option<Uuid>) -> Result<Reply, ApiError> {
        self.post("/stop", &tag_action(tag, session))
    }

    /// The URL of `path` under the analysis service (`/analysis/v1`).
    pub fn analysis_url(&self, path: &str) -> String {
        format!("{}{path}", self.analysis_base)
    }

    /// `GET /analysis/v1<path>` with `query`.
    pub fn analysis_get(&self, path: &str, query: &[(&str, &str)]) -> Result<Reply, ApiError> {
        let url = self.analysis_url(path);
        let request = self.http.get(&url).query(query);
        self.send("GET", url, request)
    }

    /// `POST /analysis/v1<path>` with a JSON body.
    pub fn analysis_post<B: Serialize>(&self, path: &str, body: &B) -> Result<Reply, ApiError> {
        let url = self.analysis_url(path);
        let request = self.http.post(&url).json(body);
        self.send("POST", url, request)
    }

    /// `DELETE /analysis/v1<path>`.
    pub fn analysis_delete(&self, path: &str) -> Result<Reply, ApiError> {
        let url = self.analysis_url(path);
        let request = self.http.delete(&url);
        self.send("DELETE", url, request)
    }

    /// A streaming GET of a gateway URL with the credentials (for job files).
    pub fn get_stream(&self, url: &str) -> Result<reqwest::blocking::Response, ApiError> {
        let mut request = self.http.get(url).timeout(Duration::from_secs(6 * 3600));
        if let Some(value) = &self.auth {
            request = request.header(AUTHORIZATION, value.clone());
        }
        let response = request.send().map_err(|source| ApiError::Unreachable {
            url: url.to_owned(),
            source,
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = error_body(response);
        Err(ApiError::Refused(Box::new(Refusal {
            url: url.to_owned(),
            status,
            problem: Problem::from_body(status.as_u16(), &body),
            body,
        })))
    }

    /// `GET /v1/sessions?tag=T` -> `SessionList`.
    pub fn sessions(&self, tag: &str) -> Result<Reply, ApiError> {
        let url = self.url("/sessions");
        let query = SessionsQuery {
            tag: Some(tag.to_owned()),
            state: None,
        };
        let request = self.http.get(&url).query(&query);
        self.send("GET", url, request)
    }

    /// `GET /v1/sessions/{id}/reports` -> `ReportListing`.
    pub fn reports(&self, session: Uuid) -> Result<Reply, ApiError> {
        let url = self.url(&format!("/sessions/{session}/reports"));
        let request = self.http.get(&url);
        self.send("GET", url, request)
    }

    /// `POST /v1/end` -> `Ended`.
    pub fn end(&self, tag: &str, session: Option<Uuid>) -> Result<Reply, ApiError> {
        self.post("/end", &tag_action(tag, session))
    }

    fn post<B: Serialize>(&self, path: &str, body: &B) -> Result<Reply, ApiError> {
        let url = self.url(path);
        let request = self.http.post(&url).json(body);
        self.send("POST", url, request)
    }

    fn send(&self, method: &str, url: String, request: RequestBuilder) -> Result<Reply, ApiError> {
        let request = match &self.auth {
            Some(value) => request.header(AUTHORIZATION, value.clone()),
            None => request,
        };
        tracing::debug!(%method, %url, authorized = self.auth.is_some(), "request");
        let response = match request.send() {
            Ok(response) => response,
            Err(source) => {
                tracing::debug!(error = %chain(&source), "request failed");
                return Err(ApiError::Unreachable { url, source });
            }
        };
        let status = response.status();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = if status.is_success() {
            read_bounded(response, &url, MAX_ANSWER_BYTES)?
        } else {
            error_body(response)
        };
        tracing::debug!(%status, %content_type, bytes = body.len(), "response");
        if status.is_success() {
            Ok(Reply { url, status, body })
        } else if status.is_redirection() {
            Err(ApiError::Redirected {
                url,
                status,
                location: location.unwrap_or_else(|| "(no Location header)".to_owned()),
            })
        } else {
            Err(ApiError::Refused(Box::new(Refusal {
                url,
                status,
                problem: Problem::from_body(status.as_u16(), &body),
                body,
            })))
        }
    }
}

/// The body of `start`, `stop` and `end`.
fn tag_action(tag: &str, session: Option<Uuid>) -> TagAction {
    TagAction {
        tag: Some(tag.to_owned()),
        session: session.map(|id| id.to_string()),
    }
}

/// An error and its sources, joined with `: `.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use nsight_contracts::coordinator::Ended;

    use super::*;

    #[test]
    fn refused_error_shows_detail_and_status() {
        let err = ApiError::Refused(Box::new(Refusal {
            url: "http://gw/coordinator/v1/start".into(),
            status: StatusCode::CONFLICT,
            problem: Problem {
                detail: "stop it first".into(),
                ..Problem::default()
            },
            body: String::new(),
        }));
        assert_eq!(err.to_string(), "stop it first (HTTP 409 Conflict)");
        assert_eq!(err.exit_code(), 1);
    }

    #[test]
    fn request_bodies_omit_a_missing_session() {
        let body = serde_json::to_value(tag_action("t", None)).unwrap();
        assert_eq!(body, serde_json::json!({"tag": "t"}));
        let id = Uuid::parse_str("67e55044-10b1-426f-9247-bb680e5fe0c8").unwrap();
        let body = serde_json::to_value(tag_action("t", Some(id))).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"tag": "t", "session": "67e55044-10b1-426f-9247-bb680e5fe0c8"})
        );
    }

    #[test]
    fn client_builds_urls_under_the_coordinator_prefix() {
        let gw = HttpUrl::parse("--gw", "https://gw.example.com:8888/").unwrap();
        let client = Client::new(&gw, None, None).unwrap();
        assert_eq!(
            client.url("/start"),
            "https://gw.example.com:8888/coordinator/v1/start"
        );
    }

    #[test]
    fn answers_parse_from_contract_json() {
        let reply = Reply {
            url: "u".into(),
            status: StatusCode::OK,
            body: r#"{"session":"67e55044-10b1-426f-9247-bb680e5fe0c8","stopped":{"session":"67e55044-10b1-426f-9247-bb680e5fe0c8","collection":2,"agents":3,"state":"stopping"}}"#.into(),
        };
        let ended: Ended = reply.parse().unwrap();
        assert_eq!(ended.stopped.unwrap().collection.0, 2);
        let bad = Reply {
            body: "<html>".into(),
            ..reply
        };
        let err = bad.parse::<Ended>().unwrap_err();
        assert!(matches!(err, ApiError::Decode { .. }));
        assert_eq!(err.exit_code(), 1);
    }
}
