//! proxy-wasm glue: parse the configuration once per root context, decide per request.
//! Never panics: a panic would abort the Wasm VM for every request on the worker.

use std::rc::Rc;

use proxy_wasm::{
    traits::{Context, HttpContext, RootContext},
    types::{Action, ContextType, LogLevel},
};

use crate::{
    config::AuthConfig,
    policy::{decide, Decision, CHALLENGE},
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
        let bytes = self.get_plugin_configuration().unwrap_or_default();
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
        let authorization = self.get_http_request_header("authorization");
        match decide(&self.config, authorization.as_deref()) {
            Decision::Allow { identity } => {
                self.set_http_request_header(IDENTITY_HEADER, Some(identity));
                Action::Continue
            }
            Decision::Deny { reason } => {
                let body = serde_json::json!({
                    "title": "Unauthorized",
                    "status": 401,
                    "detail": reason,
                })
                .to_string();
                self.send_http_response(
                    401,
                    vec![
                        ("content-type", "application/problem+json"),
                        ("www-authenticate", CHALLENGE),
                    ],
                    Some(body.as_bytes()),
                );
                Action::Pause
            }
        }
    }
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
