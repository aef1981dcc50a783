//! Serves objects of a store over HTTP to holders of a signed URL ([`crate::signed_url`]): what
//! the gateway's storage proxy (port 9000) fronts when reports live in a local directory, so that
//! `download` works the same way as with S3 presigned URLs. GET and HEAD, single byte ranges
//! (resume), streaming with bounded memory.

use std::{sync::Arc, time::SystemTime};

use axum::{
    body::Body,
    extract::{Path, Query, State},
    http::{header, HeaderMap, Method, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use serde::Deserialize;
use tokio_util::io::ReaderStream;

use crate::{
    error::Cause,
    signed_url::{SignatureError, UrlSigner},
    ByteRange, ReportStore, Store,
};

#[derive(Clone)]
struct Served {
    store: Arc<Store>,
    signer: Arc<UrlSigner>,
}

/// `GET|HEAD /storage/v1/objects/{key}?expires=..&signature=..`.
pub fn router(store: Arc<Store>, signer: Arc<UrlSigner>) -> Router {
    Router::new()
        .route("/storage/v1/objects/{*key}", get(object))
        .with_state(Served { store, signer })
}

#[derive(Debug, Deserialize)]
struct Signed {
    expires: Option<String>,
    signature: Option<String>,
}

/// What a `Range` header asks for, given the object's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeRequest {
    Whole,
    Part(ByteRange),
    Unsatisfiable,
}

/// Parses a single `bytes=` range (`a-b`, `a-`, `-n`); anything else (several ranges, other
/// units, garbage) is served whole, as RFC 9110 allows.
pub fn parse_range(header: Option<&str>, size: u64) -> RangeRequest {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return RangeRequest::Whole;
    };
    if spec.contains(',') {
        return RangeRequest::Whole;
    }
    let Some((first, last)) = spec.split_once('-') else {
        return RangeRequest::Whole;
    };
    let (first, last) = (first.trim(), last.trim());
    let (start, end) = match (first.parse::<u64>(), last.parse::<u64>()) {
        (Ok(a), Ok(b)) if a <= b => (a, b.saturating_add(1).min(size)),
        (Ok(_), Ok(_)) => return RangeRequest::Whole,
        (Ok(a), Err(_)) if last.is_empty() => (a, size),
        (Err(_), Ok(n)) if first.is_empty() => (size.saturating_sub(n), size),
        _ => return RangeRequest::Whole,
    };
    match ByteRange::new(start, end) {
        Some(r) => RangeRequest::Part(r),
        None => RangeRequest::Unsatisfiable,
    }
}

fn problem(status: StatusCode, detail: &str) -> Response {
    nsight_contracts::Problem::new(status.as_u16(), detail).into_response()
}

async fn object(
    method: Method,
    State(served): State<Served>,
    Path(key): Path<String>,
    Query(signed): Query<Signed>,
    headers: HeaderMap,
) -> Response {
    let verdict = served.signer.verify(
        &key,
        signed.expires.as_deref(),
        signed.signature.as_deref(),
        SystemTime::now(),
    );
    if let Err(e) = verdict {
        let status = match e {
            SignatureError::Unsigned => StatusCode::UNAUTHORIZED,
            SignatureError::Expired | SignatureError::BadSignature | SignatureError::TooLong => {
                StatusCode::FORBIDDEN
            }
        };
        return problem(status, &e.to_string());
    }
    let info = match served.store.head(&key).await {
        Ok(info) => info,
        Err(e) if matches!(e.cause(), Cause::NotFound) => {
            return problem(StatusCode::NOT_FOUND, &format!("no object `{key}`"))
        }
        Err(e) if matches!(e.cause(), Cause::InvalidKey { .. }) => {
            return problem(StatusCode::BAD_REQUEST, &e.cause().to_string())
        }
        Err(e) => {
            tracing::warn!(error = %e.chain(), "object server: head");
            return problem(StatusCode::SERVICE_UNAVAILABLE, "storage is not answering");
        }
    };
    let size = info.size;
    let range = parse_range(
        headers.get(header::RANGE).and_then(|v| v.to_str().ok()),
        size,
    );
    let (status, byte_range) = match range {
        RangeRequest::Whole => (StatusCode::OK, None),
        RangeRequest::Part(r) => (StatusCode::PARTIAL_CONTENT, Some(r)),
        RangeRequest::Unsatisfiable => {
            return (
                StatusCode::RANGE_NOT_SATISFIABLE,
                [(header::CONTENT_RANGE, format!("bytes */{size}"))],
            )
                .into_response()
        }
    };
    let len = byte_range.map_or(size, |r| r.len_in(size));
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, len)
        .header(header::ACCEPT_RANGES, "bytes");
    if let Some(etag) = &info.etag {
        response = response.header(header::ETAG, format!("\"{etag}\""));
    }
    if let Some(r) = byte_range {
        let last = r.start() + len.saturating_sub(1);
        response = response.header(
            header::CONTENT_RANGE,
            format!("bytes {}-{last}/{size}", r.start()),
        );
    }
    if method == Method::HEAD {
        return response.body(Body::empty()).unwrap_or_default();
    }
    match served.store.get(&key, byte_range).await {
        Ok(reader) => response
            .body(Body::from_stream(ReaderStream::with_capacity(
                reader,
                64 * 1024,
            )))
            .unwrap_or_default(),
        Err(e) if matches!(e.cause(), Cause::NotFound) => {
            problem(StatusCode::NOT_FOUND, &format!("no object `{key}`"))
        }
        Err(e) => {
            tracing::warn!(error = %e.chain(), "object server: get");
            problem(StatusCode::SERVICE_UNAVAILABLE, "storage is not answering")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(a: u64, b: u64) -> RangeRequest {
        ByteRange::new(a, b).map_or(RangeRequest::Unsatisfiable, RangeRequest::Part)
    }

    #[test]
    fn ranges_parse_like_rfc_9110() {
        assert_eq!(parse_range(None, 100), RangeRequest::Whole);
        assert_eq!(parse_range(Some("bytes=0-9"), 100), part(0, 10));
        assert_eq!(parse_range(Some("bytes=90-"), 100), part(90, 100));
        assert_eq!(parse_range(Some("bytes=-10"), 100), part(90, 100));
        assert_eq!(parse_range(Some("bytes=95-200"), 100), part(95, 100));
        assert_eq!(
            parse_range(Some("bytes=100-"), 100),
            RangeRequest::Unsatisfiable
        );
        assert_eq!(parse_range(Some("bytes=0-1,5-6"), 100), RangeRequest::Whole);
        assert_eq!(parse_range(Some("items=0-1"), 100), RangeRequest::Whole);
        assert_eq!(parse_range(Some("bytes=9-0"), 100), RangeRequest::Whole);
        assert_eq!(parse_range(Some("bytes=x-y"), 100), RangeRequest::Whole);
    }
}
