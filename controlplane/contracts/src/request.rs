//! How the control plane's services read requests (with the `axum` feature): a JSON object
//! body and a query string, each refused as a [`Problem`] a person can act on, never axum's
//! plain-text rejections.
//!
//! - Bodies: at most the router's `DefaultBodyLimit` (413 names it), a JSON object (an array
//!   would fill a struct's fields in order: `["t", null]`), no `null` values (an optional field
//!   is left out), then the type's own rules (unknown fields, types).
//! - Query strings: a 400 problem quoting why the string does not parse.
//! - [`refuse_oversized`]: a body declared over the limit is read and dropped before the 413, so
//!   the gateway relays the 413 rather than a reset.

use axum::{
    body::Bytes,
    extract::{
        rejection::{BytesRejection, QueryRejection},
        Query,
    },
    http::{header::CONTENT_LENGTH, StatusCode},
};
use serde::de::DeserializeOwned;

use crate::Problem;

/// A request body as a handler takes it: the bytes, or why they could not be read.
pub type Body = Result<Bytes, BytesRejection>;
/// A query string as a handler takes it.
pub type QueryOf<T> = Result<Query<T>, QueryRejection>;

/// Reads a JSON object body (empty means `{}`) into `T`; `limit` is the router's body limit in
/// bytes, named in the 413.
pub fn json_object<T: DeserializeOwned>(bytes: Body, limit: usize) -> Result<T, Problem> {
    let bytes = bytes.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large(limit)
        } else {
            Problem::bad_request(format!("cannot read the request body: {}", e.body_text()))
        }
    })?;
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        &bytes
    };
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| Problem::bad_request(format!("invalid JSON body: {e}")))?;
    let serde_json::Value::Object(fields) = &value else {
        return Err(Problem::bad_request(
            "invalid JSON body: it must be an object, e.g. {\"tag\":\"default\"}",
        ));
    };
    if let Some((name, _)) = fields.iter().find(|(_, v)| v.is_null()) {
        return Err(Problem::bad_request(format!(
            "invalid JSON body: `{name}` is null; give a value or leave the field out"
        )));
    }
    serde_json::from_value(value)
        .map_err(|e| Problem::bad_request(format!("invalid JSON body: {e}")))
}

fn too_large(limit: usize) -> Problem {
    Problem::new(
        413,
        format!(
            "the request body is larger than {}; these requests are small JSON objects",
            size(limit)
        ),
    )
}

/// The most a refused body is read (and dropped) before the 413.
const DRAIN_MAX: u64 = 64 << 20;

/// `router` answering a request that declares (`Content-Length`) a body over `limit` with the
/// 413 problem at once, but only after reading and dropping that body (up to 64 MiB, a frame at
/// a time): a service that answers before the body is in closes the connection under the proxy
/// still sending it, and Envoy turns that reset into a 503 ("upstream connect error or
/// disconnect/reset before headers") instead of the 413.
pub fn refuse_oversized(router: axum::Router, limit: usize) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(limit, oversized))
}

async fn oversized(
    axum::extract::State(limit): axum::extract::State<usize>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    use http_body_util::BodyExt as _;
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(n) if n > limit as u64 => {
            if n <= DRAIN_MAX {
                let mut body = request.into_body();
                while let Some(Ok(_)) = body.frame().await {}
            }
            too_large(limit).into_response()
        }
        _ => next.run(request).await,
    }
}

/// The parsed query string, or a 400 problem saying why it does not parse.
pub fn query<T>(q: QueryOf<T>) -> Result<T, Problem> {
    q.map(|Query(q)| q)
        .map_err(|e| Problem::bad_request(format!("invalid query string: {}", e.body_text())))
}

/// `64 KiB`, `1 MiB`.
fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Req {
        tag: Option<String>,
        title: Option<String>,
    }

    fn read(body: &str) -> Result<Req, String> {
        json_object::<Req>(Ok(Bytes::from(body.to_owned())), 1024).map_err(|p| p.detail)
    }

    #[test]
    fn objects_only_without_nulls() {
        assert_eq!(
            read(r#"{"tag":"t"}"#),
            Ok(Req {
                tag: Some("t".into()),
                title: None
            })
        );
        assert_eq!(
            read("  "),
            Ok(Req {
                tag: None,
                title: None
            })
        );
        assert!(read(r#"["t",null]"#)
            .unwrap_err()
            .contains("must be an object"));
        assert!(read(r#"{"title":null}"#)
            .unwrap_err()
            .contains("`title` is null"));
        assert!(read(r#"{"bogus":1}"#).unwrap_err().contains("bogus"));
        assert!(read("{").unwrap_err().contains("invalid JSON"));
        assert_eq!(size(64 * 1024), "64 KiB");
        assert_eq!(size(2 << 20), "2 MiB");
    }
}
