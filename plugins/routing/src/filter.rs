//! proxy-wasm glue: parse the routing table once per root context, decide per request, then set
//! the cluster header (and `:path`) or answer 403/404.
//! Never panics: a panic would abort the Wasm VM for every request on the worker. So it calls
//! `proxy_wasm::hostcalls` (which return `Result`) rather than the trait helpers that unwrap,
//! and reads header values as bytes (a non-UTF-8 value must not abort the VM). Envoy clears the
//! route cache when a Wasm filter changes request headers, so the `cluster_header` route sees
//! the header set here.

use std::rc::Rc;

use proxy_wasm::{
    hostcalls,
    traits::{Context, HttpContext, RootContext},
    types::{Action, BufferType, ContextType, LogLevel, MapType},
};

use crate::{
    config::{RoutingConfig, TenantSource},
    route::{route, Decision, Request},
};

/// Header set on forwarded requests: the tenant's namespace.
const TENANT_HEADER: &str = "x-nsight-tenant";
/// The secret our services require from the gateway (`nsight_contracts::gateway_only::HEADER`).
const GATEWAY_TOKEN_HEADER: &str = "x-nsight-gateway-token";

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(RoutingRoot { config: None })
    });
}}

struct RoutingRoot {
    /// `None` until configured; requests are then refused (fail closed).
    config: Option<Rc<RoutingConfig>>,
}

impl Context for RoutingRoot {}

impl RootContext for RoutingRoot {
    fn on_configure(&mut self, _size: usize) -> bool {
        let bytes = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or_default();
        match RoutingConfig::parse(&bytes) {
            Ok(config) => {
                log::info(&format!(
                    "nsight routing filter configured: {} tenant(s)",
                    config.tenants.len()
                ));
                self.config = Some(Rc::new(config));
                true
            }
            Err(e) => {
                log::error(&format!(
                    "nsight routing filter refused its configuration: {e}"
                ));
                false
            }
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(RoutingRequest {
            config: self.config.clone(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct RoutingRequest {
    config: Option<Rc<RoutingConfig>>,
}

impl Context for RoutingRequest {}

fn header(name: &str) -> Option<String> {
    hostcalls::get_map_value_bytes(MapType::HttpRequestHeaders, name)
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn set(name: &str, value: Option<&str>) -> bool {
    hostcalls::set_map_value(MapType::HttpRequestHeaders, name, value).is_ok()
}

impl HttpContext for RoutingRequest {
    fn on_http_request_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        let Some(config) = self.config.clone() else {
            return fail("no routing table is configured");
        };
        // Only this filter chooses the cluster (and sends a token): client-sent values go first.
        if !set(&config.cluster_header, None)
            || !set(TENANT_HEADER, None)
            || !set(GATEWAY_TOKEN_HEADER, None)
        {
            return fail("could not remove client-sent routing headers");
        }
        let path = header(":path");
        let identity = header(&config.identity_header);
        let tenant_header = match &config.source {
            TenantSource::Header(h) => header(h),
            TenantSource::PathPrefix(_) => None,
        };
        let decision = route(
            &config,
            Request {
                path: path.as_deref(),
                tenant_header: tenant_header.as_deref(),
                identity: identity.as_deref(),
            },
        );
        match decision {
            Decision::Route {
                namespace,
                cluster,
                path,
            } => {
                let path_ok = path.as_deref().is_none_or(|p| set(":path", Some(p)));
                let token_ok = config
                    .gateway_tokens
                    .get(&cluster)
                    .is_none_or(|t| set(GATEWAY_TOKEN_HEADER, Some(t)));
                if !path_ok
                    || !token_ok
                    || !set(TENANT_HEADER, Some(&namespace))
                    || !set(&config.cluster_header, Some(&cluster))
                {
                    return fail("could not set the routing headers");
                }
                Action::Continue
            }
            Decision::Refuse(refusal) => {
                let body = refusal.body();
                let _ = hostcalls::send_http_response(
                    u32::from(refusal.status),
                    vec![("content-type", "application/problem+json")],
                    Some(body.as_bytes()),
                );
                Action::Pause
            }
        }
    }
}

/// Fails closed: the request is answered 500 and never forwarded.
fn fail(why: &str) -> Action {
    log::error(&format!("nsight routing filter: {why}; request refused"));
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
