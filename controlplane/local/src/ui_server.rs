//! Serves the built Cloud UI (a client-side-rendered single-page app): files under the UI
//! directory with their content types, `index.html` for any other path (the app routes in the
//! browser), nothing outside the directory. Only `GET` and `HEAD`: anything else (an API call
//! that reached the UI because no service is routed for it, e.g. the tenant API where none is
//! deployed) is a 405 problem, not a page the caller cannot use.

use std::path::{Component, Path, PathBuf};

use axum::{
    body::Body,
    extract::State,
    http::{header, Method, StatusCode, Uri},
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

async fn serve(State(dir): State<PathBuf>, method: Method, uri: Uri) -> Response {
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
    match tokio::fs::read(&file).await {
        Ok(bytes) => (
            [
                (header::CONTENT_TYPE, content_type(&file)),
                (header::CACHE_CONTROL, "no-cache"),
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
    use super::*;

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
