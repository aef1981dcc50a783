//! Calls to the platform's REST APIs from the browser, same origin through the gateway: the
//! coordinator below [`routes::COORDINATOR_V1`]. Answers decode into the contract's types
//! (`nsight_contracts`); a refusal becomes an [`ApiError`] carrying the problem's message. The
//! gateway's credentials (session cookie) travel with the browser's own `fetch`; nothing here
//! stores or logs them.
//!
//! ```text
//!  page ──coordinator("/sessions")──> fetch /coordinator/v1/sessions ──> JSON ──> SessionList
//!                                                    4xx/5xx ──> Problem::from_body ──> ApiError
//! ```

use nsight_contracts::{coordinator::SessionList, routes, Problem};
use serde::de::DeserializeOwned;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// Why an answer is not available; the text is what the page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The request did not complete (no network, no window).
    Unreachable(String),
    /// The service or the gateway refused it.
    Refused { status: u16, message: String },
    /// The answer was not the expected JSON.
    Decode(String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Unreachable(why) => write!(f, "the gateway cannot be reached: {why}"),
            ApiError::Refused { status, message } => write!(f, "{message} (HTTP {status})"),
            ApiError::Decode(why) => write!(f, "unexpected answer: {why}"),
        }
    }
}

fn js_text(value: JsValue) -> String {
    value
        .as_string()
        .or_else(|| {
            value
                .dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
        })
        .unwrap_or_else(|| "unknown error".to_owned())
}

/// `GET <path>` (absolute, same origin) as `T`.
async fn get_json<T: DeserializeOwned>(path: &str) -> Result<T, ApiError> {
    let window = web_sys::window().ok_or_else(|| ApiError::Unreachable("no window".to_owned()))?;
    let response = JsFuture::from(window.fetch_with_str(path))
        .await
        .map_err(|e| ApiError::Unreachable(js_text(e)))?;
    let response: web_sys::Response = response
        .dyn_into()
        .map_err(|e| ApiError::Unreachable(js_text(e)))?;
    let text = match response.text() {
        Ok(promise) => JsFuture::from(promise)
            .await
            .map_err(|e| ApiError::Unreachable(js_text(e)))?
            .as_string()
            .unwrap_or_default(),
        Err(e) => return Err(ApiError::Unreachable(js_text(e))),
    };
    let status = response.status();
    if !response.ok() {
        let problem = Problem::from_body(status, &text);
        return Err(ApiError::Refused {
            status,
            message: problem.message().to_owned(),
        });
    }
    serde_json::from_str(&text).map_err(|e| ApiError::Decode(e.to_string()))
}

/// `GET /coordinator/v1/sessions`: every session, oldest first.
pub async fn sessions() -> Result<SessionList, ApiError> {
    get_json(&format!("{}/sessions", routes::COORDINATOR_V1)).await
}
