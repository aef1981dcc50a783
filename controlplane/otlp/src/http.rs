//! OTLP/HTTP and the converter's own endpoints (axum; routes and answers from
//! `nsight_contracts::otlp`). Thin: every decision is the [`Converter`]'s; this maps its answers
//! to status codes. Bad input gets a 4xx with a message saying what was wrong, never a panic or a
//! 500: plain text on `/v1/traces` (OTLP clients log the body as is), RFC 9457 problem details
//! on the converter's own endpoints, as the other services answer.
//!
//! ```text
//!  POST /v1/traces                                   OTLP/HTTP: protobuf or JSON, gzip or not
//!  POST /v1/collections/{session}/{collection}/stop  convert and upload now (JSON: Flushed)
//!  GET  /v1/collections                              what the buffer holds (JSON)
//!  GET  /healthz
//! ```

use std::sync::Arc;

use axum::{
    body::Body,
    extract::{Path, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use nsight_contracts::{otlp, Problem};
use prost::Message;

use crate::{
    converter::{chain, Converter, FlushError, IngestError},
    group::CollectionId,
    proto::collector::{ExportTracePartialSuccess, ExportTraceServiceResponse},
};

/// The converter's HTTP routes.
pub fn router(converter: Arc<Converter>) -> Router {
    Router::new()
        .route(otlp::TRACES, post(traces))
        .route(otlp::COLLECTIONS, get(collections))
        .route(&otlp::stop_path("{session}", "{collection}"), post(stop))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(converter)
}

fn text(status: StatusCode, message: impl Into<String>) -> Response {
    let mut message = message.into();
    message.push('\n');
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

fn with_retry_after(mut response: Response, seconds: &'static str) -> Response {
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static(seconds));
    response
}

async fn traces(
    State(converter): State<Arc<Converter>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let max = converter.config().max_body_bytes;
    let header_text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(|v| v.trim().to_ascii_lowercase())
    };
    let json = match header_text(header::CONTENT_TYPE).as_deref() {
        None | Some("application/x-protobuf" | "application/protobuf") => false,
        Some(t) if t.starts_with("application/json") => true,
        Some(other) => {
            return text(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "content type `{other}` is not OTLP: send application/x-protobuf or \
                     application/json"
                ),
            )
        }
    };
    let gzip = match header_text(header::CONTENT_ENCODING).as_deref() {
        None | Some("identity") => false,
        Some("gzip") => true,
        Some(other) => {
            return text(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("content encoding `{other}` is not supported: send gzip or no compression"),
            )
        }
    };
    let declared = header_text(header::CONTENT_LENGTH).and_then(|l| l.parse::<usize>().ok());
    let too_big = || {
        text(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is larger than {max} bytes (--max-body-bytes): export smaller \
                 batches"
            ),
        )
    };
    if declared.is_some_and(|l| l > max) {
        return too_big();
    }
    let Ok(body) = axum::body::to_bytes(body, max).await else {
        return too_big();
    };
    let body = if gzip {
        match gunzip(&body, max) {
            Ok(Some(plain)) => plain,
            Ok(None) => return too_big(),
            Err(e) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    format!("the body is not valid gzip (Content-Encoding: gzip): {e}"),
                )
            }
        }
    } else {
        body.to_vec()
    };
    let ingested = if json {
        match crate::json::decode(&body) {
            Ok(request) => converter.ingest(request).await,
            Err(m) => Err(IngestError::BadRequest(m)),
        }
    } else {
        converter.ingest_bytes(&body).await
    };
    match ingested {
        Ok(ingested) if json => {
            let mut answer = serde_json::json!({});
            if ingested.rejected > 0 {
                answer["partialSuccess"] = serde_json::json!({
                    "rejectedSpans": ingested.rejected.to_string(),
                    "errorMessage": ingested.message.unwrap_or_default(),
                });
            }
            Json(answer).into_response()
        }
        Ok(ingested) => {
            let answer = ExportTraceServiceResponse {
                partial_success: (ingested.rejected > 0).then(|| ExportTracePartialSuccess {
                    rejected_spans: i64::try_from(ingested.rejected).unwrap_or(i64::MAX),
                    error_message: ingested.message.unwrap_or_default(),
                }),
            };
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/x-protobuf")],
                answer.encode_to_vec(),
            )
                .into_response()
        }
        Err(IngestError::BadRequest(m)) => text(StatusCode::BAD_REQUEST, m),
        Err(e @ IngestError::Full(_)) => {
            with_retry_after(text(StatusCode::TOO_MANY_REQUESTS, e.to_string()), "5")
        }
        Err(e @ IngestError::Unavailable(_)) => {
            with_retry_after(text(StatusCode::SERVICE_UNAVAILABLE, e.to_string()), "1")
        }
    }
}

/// `body` gunzipped; `None` when it inflates past `max` bytes.
fn gunzip(body: &[u8], max: usize) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read as _;
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(body)
        .take(max as u64 + 1)
        .read_to_end(&mut plain)?;
    Ok((plain.len() <= max).then_some(plain))
}

async fn collections(State(converter): State<Arc<Converter>>) -> Response {
    Json(converter.list()).into_response()
}

async fn stop(
    State(converter): State<Arc<Converter>>,
    Path((session, collection)): Path<(String, String)>,
) -> Response {
    let id = CollectionId {
        session,
        collection,
    };
    match converter.stop(&id).await {
        Ok(flushed) => Json(flushed).into_response(),
        Err(e @ FlushError::Unknown(_)) => Problem::new(404, e.to_string()).into_response(),
        Err(e) => with_retry_after(
            Problem::new(
                503,
                format!(
                    "converting collection {id} failed (retry the stop): {}",
                    chain(&e)
                ),
            )
            .into_response(),
            "1",
        ),
    }
}
