//! RFC 9457 problem details: every refusal of the control plane's REST APIs (coordinator,
//! analysis, the storage object server) is an `application/problem+json` body with a `detail` a
//! person can act on. Each service maps its own errors to a status with `From` impls of its own.
//!
//! ```text
//!  {"type":"about:blank","title":"Not Found","status":404,"detail":"no session 6f1a..."}
//! ```

use axum::{
    http::{header, StatusCode},
    response::{IntoResponse, Response},
};
use serde::Serialize;

/// One problem: the HTTP status, its standard title, and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
}

impl Problem {
    /// A problem with this status (its canonical reason as the title; "Error" for a status
    /// without one).
    pub fn new(status: u16, detail: impl Into<String>) -> Self {
        let title = StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Error");
        Self {
            kind: "about:blank",
            title,
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
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_string(&self).unwrap_or_default();
        (
            status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            body,
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_follows_rfc_9457() {
        let p = Problem::new(404, "no session 6f1a");
        let body = serde_json::to_value(&p).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "type": "about:blank",
                "title": "Not Found",
                "status": 404,
                "detail": "no session 6f1a",
            })
        );
        assert_eq!(Problem::new(599, "x").title, "Error");
        assert_eq!(Problem::bad_request("x").status(), 400);
    }

    #[test]
    fn the_response_has_the_status_and_media_type() {
        let response = Problem::new(409, "busy").into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        let invalid = Problem::new(42, "odd").into_response();
        assert_eq!(invalid.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
