//! RFC 9457 problem details: every refusal the REST API gives, with a message a person can act on.

use axum::{
    http::{header, StatusCode},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use super::hub::HubError;
use crate::state::{CoordError, ValidationError};

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

impl From<CoordError> for Problem {
    fn from(e: CoordError) -> Self {
        Self::new(e.kind().http_status(), e.to_string())
    }
}

impl From<ValidationError> for Problem {
    fn from(e: ValidationError) -> Self {
        Self::bad_request(e.to_string())
    }
}

impl From<HubError> for Problem {
    fn from(e: HubError) -> Self {
        match e {
            HubError::Refused(e) => e.into(),
            HubError::Store(source) => {
                tracing::error!(error = %source, "state store failed");
                Self::new(503, HubError::Store(source).to_string())
            }
        }
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
