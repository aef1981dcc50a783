//! RFC 9457 problem details: every refusal of the REST API, with a message a person can act on.

use axum::{
    http::{header, StatusCode},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use super::jobs::ServiceError;

#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
}

impl Problem {
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
}

impl From<ServiceError> for Problem {
    fn from(e: ServiceError) -> Self {
        let status = match &e {
            ServiceError::NotFound(_) => 404,
            ServiceError::Invalid(_) => 400,
            ServiceError::Conflict(_) => 409,
            ServiceError::Unavailable(_) => 503,
        };
        Self::new(status, e.to_string())
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
