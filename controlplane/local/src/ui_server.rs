//! Serves the built Cloud UI (a client-side-rendered single-page app): files under the UI
//! directory with their content types, `index.html` for any other path (the app routes in the
//! browser), nothing outside the directory. Only `GET` and `HEAD`: anything else (an API call
//! that reached the UI because no service is routed for it, e.g. the tenant API where none is
//! deployed) is a 405 problem, not a page the caller cannot use.
//!
//! Every answer carries an `ETag` (the file's size and modification time) with `no-cache`: a
//! browser revalidates on each load and gets `304 Not Modified` while the build is unchanged,
//! so a reload neither transfers the Wasm again nor compiles it again (Chromium keeps the
//! compiled code of a cached Wasm response).

use std::path::{Component, Path, PathBuf};

use axum::{
    body::Body,
    extract::State,
    http::{header, HeaderMap, Method, StatusCode, Uri},
    response::{IntoResponse, Response},
    Router,
};

/// A router serving `dir`.
pub fn router(dir: PathBuf) -> Router {
    Router::new().fallback(serve).with_state(dir)
}

/// The file a request path names, if it is a plain relative path.
pub fn resolve(dir: &Path, uri_path: &str) -> Option<PathBuf> {
    let relative = Path::new(uri_path.trim_start_matches('/'));
    let plain = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)));
    plain.then(|| dir.join(relative))
}

/// Content type by extension (what the UI build produces).
pub fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        _ => "application/octet-stream",
    }
}

/// The validator of a file: its size and modification time (changed by every build).
pub fn etag(meta: &std::fs::Metadata) -> String {
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("\"{:x}-{modified:x}\"", meta.len())
}

/// Whether `If-None-Match` names `tag` (or is `*`).
fn not_modified(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == tag || t == "*")
}

async fn serve(
    State(dir): State<PathBuf>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return nsight_contracts::Problem::new(
            405,
            format!(
                "the Cloud UI serves files only (GET); no API answers {method} {} behind this gateway",
                uri.path()
            ),
        )
        .into_response();
    }
    let file = resolve(&dir, uri.path())
        .filter(|p| p.is_file())
        .unwrap_or_else(|| dir.join("index.html"));
    let tag = tokio::fs::metadata(&file).await.ok().map(|m| etag(&m));
    if let Some(tag) = tag.as_deref().filter(|t| not_modified(&headers, t)) {
        return (
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, tag), (header::CACHE_CONTROL, "no-cache")],
        )
            .into_response();
    }
    match tokio::fs::read(&file).await {
        Ok(bytes) => (
            [
                (header::CONTENT_TYPE, content_type(&file)),
                (header::CACHE_CONTROL, "no-cache"),
                (header::ETAG, tag.as_deref().unwrap_or("\"0\"")),
            ],
            Body::from(bytes),
        )
            .into_response(),
        Err(_) => (
            StatusCode::NOT_FOUND,
            "the UI is not built: run `cargo xtask build-wasm`",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[tokio::test]
    async fn an_unchanged_file_is_not_sent_again() {
        use tower::ServiceExt as _;
        let dir = std::env::temp_dir().join(format!("nsight-ui-etag-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), "<html></html>").unwrap();
        std::fs::write(dir.join("app.wasm"), [0u8, 97, 115, 109]).unwrap();
        let get = |path: &str, tag: Option<&str>| {
            let mut req = axum::http::Request::get(path);
            if let Some(tag) = tag {
                req = req.header(header::IF_NONE_MATCH, tag);
            }
            router(dir.clone()).oneshot(req.body(Body::empty()).unwrap())
        };
        let first = get("/app.wasm", None).await.unwrap();
        assert_eq!(first.status(), StatusCode::OK);
        let tag = first.headers()[header::ETAG].to_str().unwrap().to_owned();
        assert_eq!(first.headers()[header::CONTENT_TYPE], "application/wasm");
        let again = get("/app.wasm", Some(&tag)).await.unwrap();
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(again.headers()[header::ETAG], tag.as_str());
        let other = get("/app.wasm", Some("\"0-0\"")).await.unwrap();
        assert_eq!(other.status(), StatusCode::OK);
        // A route of the app answers index.html, with index.html's validator.
        let page = get("/some/view", None).await.unwrap();
        assert_ne!(page.headers()[header::ETAG], tag.as_str());
        std::fs::write(dir.join("app.wasm"), [0u8, 97, 115, 109, 1]).unwrap();
        let rebuilt = get("/app.wasm", Some(&tag)).await.unwrap();
        assert_eq!(rebuilt.status(), StatusCode::OK, "a new build is sent");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn only_plain_paths_resolve_inside_the_directory() {
        let dir = Path::new("/ui");
        assert_eq!(resolve(dir, "/app.js"), Some(PathBuf::from("/ui/app.js")));
        assert_eq!(
            resolve(dir, "/a/b.wasm"),
            Some(PathBuf::from("/ui/a/b.wasm"))
        );
        assert_eq!(resolve(dir, "/../etc/passwd"), None);
        assert_eq!(resolve(dir, "/a/../../x"), None);
        assert_eq!(content_type(Path::new("x.wasm")), "application/wasm");
        assert_eq!(
            content_type(Path::new("index.html")),
            "text/html; charset=utf-8"
        );
    }
}
