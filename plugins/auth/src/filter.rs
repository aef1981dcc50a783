//! proxy-wasm glue: parse the configuration once per root context, decide per request.
//! Never panics: a panic would abort the Wasm VM for every request on the worker. So it calls
//! `proxy_wasm::hostcalls` (which return `Result`) rather than the trait helpers that unwrap,
//! and reads header values as bytes (a non-UTF-8 value must not abort the VM).

use std::{rc::Rc, time::UNIX_EPOCH};

use proxy_wasm::{
    hostcalls,
    traits::{Context, HttpContext, RootContext},
    types::{Action, BufferType, ContextType, LogLevel, MapType},
};

use crate::{
    config::AuthConfig,
    policy::{decide, Decision},
};

/// Header set on forwarded requests: who the gateway authenticated.
const IDENTITY_HEADER: &str = "x-nsight-auth-identity";

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(AuthRoot { config: Rc::new(AuthConfig::Unauthenticated) })
    });
}}

struct AuthRoot {
    config: Rc<AuthConfig>,
}

impl Context for AuthRoot {}

impl RootContext for AuthRoot {
    fn on_configure(&mut self, _size: usize) -> bool {
        let bytes = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or_default();
        match AuthConfig::parse(&bytes) {
            Ok(config) => {
                log::info(&format!("nsight auth filter configured: {config:?}"));
                self.config = Rc::new(config);
                true
            }
            Err(e) => {
                log::error(&format!(
                    "nsight auth filter refused its configuration: {e}"
                ));
                false
            }
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(AuthRequest {
            config: Rc::clone(&self.config),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct AuthRequest {
    config: Rc<AuthConfig>,
}

impl Context for AuthRequest {}

impl HttpContext for AuthRequest {
    fn on_http_request_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        // Whatever a client sent as its identity is dropped first: only this filter sets it.
        if hostcalls::set_map_value(MapType::HttpRequestHeaders, IDENTITY_HEADER, None).is_err() {
            return fail("could not remove the client's identity header");
        }
        let authorization =
            hostcalls::get_map_value_bytes(MapType::HttpRequestHeaders, "authorization")
                .ok()
                .flatten()
                .map(|b| String::from_utf8_lossy(&b).into_owned());
        let Some(now) = hostcalls::get_current_time()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs())
        else {
            return fail("the host clock is not available");
        };
        match decide(&self.config, authorization.as_deref(), now) {
            Decision::Allow { identity } => {
                let set = hostcalls::set_map_value(
                    MapType::HttpRequestHeaders,
                    IDENTITY_HEADER,
                    Some(&identity),
                );
                if set.is_err() {
                    return fail("could not set the identity header");
                }
                Action::Continue
            }
            Decision::Deny(denial) => {
                let body = serde_json::json!({
                    "title": "Unauthorized",
                    "status": 401,
                    "detail": denial.reason,
                })
                .to_string();
                let challenge = denial.challenge();
                let _ = hostcalls::send_http_response(
                    401,
                    vec![
                        ("content-type", "application/problem+json"),
                        ("www-authenticate", challenge.as_str()),
                    ],
                    Some(body.as_bytes()),
                );
                Action::Pause
            }
        }
    }
}

/// Fails closed: the request is answered 500 and never forwarded.
fn fail(why: &str) -> Action {
    log::error(&format!("nsight auth filter: {why}; request refused"));
    let _ = hostcalls::send_http_response(500, vec![], None);
    Action::Pause
}

/// Logging through the host, never failing.
mod log {
    use proxy_wasm::types::LogLevel;

    pub fn info(msg: &str) {
        let _ = proxy_wasm::hostcalls::log(LogLevel::Info, msg);
    }

    pub fn error(msg: &str) {
        let _ = proxy_wasm::hostcalls::log(LogLevel::Error, msg);
    }
}
