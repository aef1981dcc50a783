//! RFC 9457 problem details: every refusal of the control plane's REST APIs (coordinator,
//! analysis, the storage object server) is an `application/problem+json` body with a `detail` a
//! person can act on. Servers build them ([`Problem::new`]; with the `axum` feature a `Problem`
//! is a response); clients read any error body into one ([`Problem::from_body`]), whether a
//! service or the gateway (plain text from Envoy or the auth filter) wrote it. Each service maps
//! its own errors to a status with `From` impls of its own.
//!
//! ```text
//!  {"type":"about:blank","title":"Not Found","status":404,"detail":"no session 6f1a..."}
//! ```

use serde::{Deserialize, Serialize};

/// The media type of a problem body.
pub const MEDIA_TYPE: &str = "application/problem+json";

/// One problem: the HTTP status, its standard title, and what went wrong. Servers always send
/// all four members; a client reading a foreign body gets empty strings (and status 0) for the
/// members it lacks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Problem {
    /// Always `about:blank` from our services.
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub status: u16,
    #[serde(default)]
    pub detail: String,
}

impl Problem {
    /// A problem with this status (its canonical reason as the title; "Error" for a status
    /// without one).
    pub fn new(status: u16, detail: impl Into<String>) -> Self {
        Self {
            kind: "about:blank".to_owned(),
            title: reason(status).unwrap_or("Error").to_owned(),
            status,
            detail: detail.into(),
        }
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(400, detail)
    }

    pub fn status(&self) -> u16 {
        self.status
    }

    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// Reads an error body answered with `status`: a problem document, else the body's first
    /// line (at most 200 characters) as the detail.
    pub fn from_body(status: u16, body: &str) -> Problem {
        match serde_json::from_str::<Problem>(body) {
            Ok(p) if !p.detail.is_empty() || !p.title.is_empty() => p,
            _ => {
                let text: String = body
                    .trim()
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect();
                Problem {
                    kind: String::new(),
                    title: reason(status).unwrap_or_default().to_owned(),
                    status,
                    detail: text,
                }
            }
        }
    }

    /// What to show a person: the detail, else the title, else a generic text.
    pub fn message(&self) -> &str {
        [self.detail.as_str(), self.title.as_str()]
            .into_iter()
            .find(|s| !s.is_empty())
            .unwrap_or("the gateway refused the request")
    }
}

/// The canonical reason phrase of a status, if it has one.
fn reason(status: u16) -> Option<&'static str> {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
}

#[cfg(feature = "axum")]
impl axum::response::IntoResponse for Problem {
    fn into_response(self) -> axum::response::Response {
        use axum::http::{header, StatusCode};
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_string(&self).unwrap_or_default();
        (status, [(header::CONTENT_TYPE, MEDIA_TYPE)], body).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_follows_rfc_9457() {
        let p = Problem::new(404, "no session 6f1a");
        let body = serde_json::to_string(&p).unwrap();
        assert_eq!(
            body,
            r#"{"type":"about:blank","title":"Not Found","status":404,"detail":"no session 6f1a"}"#
        );
        assert_eq!(Problem::new(599, "x").title, "Error");
        assert_eq!(Problem::bad_request("x").status(), 400);
    }

    #[test]
    fn problem_documents_and_plain_bodies() {
        let p = Problem::from_body(
            409,
            r#"{"type":"about:blank","title":"Conflict","status":409,"detail":"already collecting"}"#,
        );
        assert_eq!(p.message(), "already collecting");
        assert_eq!(p.status, 409);
        let p = Problem::from_body(401, "missing bearer token\nmore");
        assert_eq!(p.message(), "missing bearer token");
        assert_eq!(p.status, 401);
        let p = Problem::from_body(502, "");
        assert_eq!(p.message(), "Bad Gateway");
        let p = Problem::from_body(404, r#"{"title":"Not Found"}"#);
        assert_eq!(p.message(), "Not Found");
        assert_eq!(
            Problem::default().message(),
            "the gateway refused the request"
        );
    }

    #[cfg(feature = "axum")]
    #[test]
    fn the_response_has_the_status_and_media_type() {
        use axum::{
            http::{header, StatusCode},
            response::IntoResponse,
        };
        let response = Problem::new(409, "busy").into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(response.headers()[header::CONTENT_TYPE], MEDIA_TYPE);
        let invalid = Problem::new(42, "odd").into_response();
        assert_eq!(invalid.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
