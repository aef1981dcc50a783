//! proxy-wasm glue: parse the configuration once per root context, decide per request, and
//! fetch the issuer's JWKS (remote mode) with `dispatch_http_call`: from the root context on a
//! 1 s tick (first load, TTL refresh), from a request context when a token names an unknown
//! kid (that request waits for the answer, then is decided again).
//! The OAuth2 mode's glue (discovery, code exchange, refresh, cookies) is in `oidc_glue`.
//! Never panics: a panic would abort the Wasm VM for every request on the worker. So it calls
//! `proxy_wasm::hostcalls` (which return `Result`) rather than the trait helpers that unwrap,
//! and reads header values as bytes (a non-UTF-8 value must not abort the VM).

use std::{cell::RefCell, rc::Rc, time::Duration, time::UNIX_EPOCH};

use proxy_wasm::{
    hostcalls,
    traits::{Context, HttpContext, RootContext},
    types::{Action, BufferType, ContextType, LogLevel, MapType},
};

use crate::{
    config::AuthConfig,
    grant,
    jwt::KeySource,
    policy::{decide_with, Decision, Denial},
    remote::{JwksCache, RemoteJwks, MAX_JWKS_BYTES},
};

mod oidc_glue;

/// Header set on forwarded requests: who the gateway authenticated.
const IDENTITY_HEADER: &str = "x-nsight-auth-identity";

/// The remote-JWKS cache of this worker's VM, shared by the root and the request contexts.
type Cache = Rc<RefCell<JwksCache>>;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(AuthRoot {
            config: Rc::new(AuthConfig::Unauthenticated),
            cache: Cache::default(),
            grant_key: None,
            oidc: None,
        })
    });
}}

struct AuthRoot {
    config: Rc<AuthConfig>,
    cache: Cache,
    /// The key streamer grants are sealed under (`grant`): from the API keys, if any.
    grant_key: Option<Rc<Vec<u8>>>,
    /// OAuth2 mode: discovery and sessions.
    oidc: Option<Rc<oidc_glue::OidcShared>>,
}

/// The remote JWKS settings of a configuration, if it fetches its keys.
fn remote(config: &AuthConfig) -> Option<&RemoteJwks> {
    match config {
        AuthConfig::Jwt { jwt, .. } => match &jwt.keys {
            KeySource::Remote(remote) => Some(remote),
            KeySource::Inline(_) => None,
        },
        _ => None,
    }
}

/// Whether deciding under `config` needs the time: JWT expiry and not-before (OAuth2 mode
/// decides through `oidc_glue`, which reads the clock itself).
fn reads_clock(config: &AuthConfig) -> bool {
    !matches!(
        config,
        AuthConfig::Unauthenticated | AuthConfig::ApiKey { .. }
    )
}

fn now_s() -> Option<u64> {
    hostcalls::get_current_time()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
}

/// Dispatches a GET of the JWKS through the issuer's cluster; whether it went out.
fn start_fetch(remote: &RemoteJwks, cache: &Cache, now: u64) -> bool {
    let Ok(mut cache) = cache.try_borrow_mut() else {
        return false;
    };
    cache.started(now);
    let sent = hostcalls::dispatch_http_call(
        &remote.cluster,
        vec![
            (":method", "GET"),
            (":path", &remote.path),
            (":authority", &remote.authority),
            ("accept", "application/json"),
        ],
        None,
        vec![],
        Duration::from_millis(remote.timeout_ms),
    );
    if let Err(e) = sent {
        cache.abandoned();
        log::error(&format!(
            "nsight auth filter: cannot fetch the JWKS from {} through cluster {:?} ({e:?}); \
             is the cluster defined?",
            remote.uri, remote.cluster
        ));
        return false;
    }
    true
}

/// Hands the answer of a JWKS fetch to the cache, logging the outcome.
fn finish_fetch(remote: &RemoteJwks, cache: &Cache, num_headers: usize, body_size: usize) {
    let status = if num_headers == 0 {
        None
    } else {
        hostcalls::get_map_value(MapType::HttpCallResponseHeaders, ":status")
            .ok()
            .flatten()
            .and_then(|s| s.parse::<u16>().ok())
    };
    let body = hostcalls::get_buffer(
        BufferType::HttpCallResponseBody,
        0,
        body_size.min(MAX_JWKS_BYTES + 1),
    )
    .ok()
    .flatten()
    .unwrap_or_default();
    let Ok(mut cache) = cache.try_borrow_mut() else {
        return;
    };
    match cache.finished(now_s().unwrap_or_default(), status, &body) {
        Ok(n) => log::info(&format!(
            "nsight auth filter: loaded {n} signing key(s) from {}",
            remote.uri
        )),
        Err(e) => log::error(&format!(
            "nsight auth filter: JWKS fetch from {} failed: {e}; {}",
            remote.uri,
            match cache.keys() {
                Some(keys) => format!("keeping the {} key(s) loaded before", keys.len()),
                None => "no keys yet: JWT requests get 503".to_owned(),
            }
        )),
    }
}

impl Context for AuthRoot {
    fn on_http_call_response(
        &mut self,
        token_id: u32,
        num_headers: usize,
        body_size: usize,
        _num_trailers: usize,
    ) {
        if let Some(oidc) = &self.oidc {
            oidc_glue::root_response(oidc, &self.cache, token_id, num_headers, body_size);
            return;
        }
        if let Some(remote) = remote(&self.config) {
            finish_fetch(remote, &self.cache, num_headers, body_size);
        }
    }
}

impl RootContext for AuthRoot {
    fn on_configure(&mut self, _size: usize) -> bool {
        let bytes = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or_default();
        match AuthConfig::parse(&bytes) {
            Ok(config) => {
                log::info(&format!("nsight auth filter configured: {config:?}"));
                self.grant_key = grant::grant_key(config.api_keys()).map(Rc::new);
                self.config = Rc::new(config);
                // New configuration, new keys: never verify with another issuer's cache.
                self.cache = Cache::default();
                self.oidc = match &*self.config {
                    AuthConfig::Oauth2 { oauth2, api_keys } => Some(oidc_glue::OidcShared::new(
                        (**oauth2).clone(),
                        api_keys.clone(),
                    )),
                    _ => None,
                };
                if (remote(&self.config).is_some() || self.oidc.is_some())
                    && hostcalls::set_tick_period(Duration::from_secs(1)).is_err()
                {
                    log::error("nsight auth filter: cannot set the JWKS refresh timer");
                    return false;
                }
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

    fn on_tick(&mut self) {
        if let (Some(oidc), Some(now)) = (&self.oidc, now_s()) {
            oidc_glue::tick(oidc, &self.cache, now);
            return;
        }
        let (Some(remote), Some(now)) = (remote(&self.config), now_s()) else {
            return;
        };
        let due = self
            .cache
            .try_borrow()
            .is_ok_and(|c| c.refresh_due(remote, now));
        if due {
            start_fetch(remote, &self.cache, now);
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        let bearer = self.oidc.as_ref().and_then(|o| o.bearer());
        Some(Box::new(AuthRequest {
            config: bearer.unwrap_or_else(|| Rc::clone(&self.config)),
            cache: Rc::clone(&self.cache),
            grant_key: self.grant_key.clone(),
            waiting: None,
            oidc: self
                .oidc
                .as_ref()
                .map(|o| oidc_glue::OidcRequest::new(Rc::clone(o))),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct AuthRequest {
    config: Rc<AuthConfig>,
    cache: Cache,
    grant_key: Option<Rc<Vec<u8>>>,
    /// Paused for a JWKS refresh: the request's `Authorization` and the refusal if it fails.
    waiting: Option<(Option<String>, Denial)>,
    /// OAuth2 mode: the sign-in state of this request.
    oidc: Option<oidc_glue::OidcRequest>,
}

impl AuthRequest {
    fn decide(&self, authorization: Option<&str>, now: u64) -> Decision {
        let keys = self.cache.try_borrow().ok().and_then(|c| c.keys());
        decide_with(
            &self.config,
            keys.as_deref().map(Vec::as_slice),
            authorization,
            now,
        )
    }

    /// Carries out a decision; `may_refresh`: an unknown kid may trigger a JWKS fetch.
    fn act(
        &mut self,
        decision: Decision,
        authorization: Option<String>,
        now: u64,
        may_refresh: bool,
    ) -> Action {
        match decision {
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
            Decision::Deny(denial) => refuse(&denial),
            Decision::Unavailable { reason } => {
                let body = serde_json::json!({
                    "title": "Service Unavailable",
                    "status": 503,
                    "detail": reason,
                })
                .to_string();
                let _ = hostcalls::send_http_response(
                    503,
                    vec![
                        ("content-type", "application/problem+json"),
                        ("retry-after", "1"),
                    ],
                    Some(body.as_bytes()),
                );
                Action::Pause
            }
            Decision::RefreshKeys(denial) => {
                let Some(remote) = remote(&self.config) else {
                    return refuse(&denial);
                };
                let allowed = may_refresh
                    && self
                        .cache
                        .try_borrow()
                        .is_ok_and(|c| c.may_refresh_for_unknown_kid(remote, now));
                if allowed && start_fetch(remote, &self.cache, now) {
                    self.waiting = Some((authorization, denial));
                    Action::Pause
                } else {
                    refuse(&denial)
                }
            }
        }
    }

    /// Streamer grants (`grant`): answers a grant request, or lets a request without
    /// credentials through on a grant cookie for its path. `None`: decide as usual. Only paths
    /// under [`grant::GRANT_PREFIX`] are looked at, and only on gateways with API keys.
    fn by_grant(
        &mut self,
        key: &[u8],
        decision: &Decision,
        has_credentials: bool,
    ) -> Option<Action> {
        let path = request_header(":path")?;
        if !path.starts_with(grant::GRANT_PREFIX) {
            return None;
        }
        let Some(now) = now_s() else {
            return Some(fail("the host clock is not available"));
        };
        if let Some(scope) = grant::requested_scope(&path) {
            if request_header(":method").as_deref() != Some("POST") {
                return Some(method_not_allowed(
                    "a streamer grant is asked for with POST (and the API key)",
                ));
            }
            return Some(match decision {
                Decision::Allow { identity } => {
                    let cookie = grant::grant_cookie(key, &scope, identity, now);
                    let _ = hostcalls::send_http_response(
                        204,
                        vec![
                            ("set-cookie", cookie.as_str()),
                            ("cache-control", "no-store"),
                        ],
                        None,
                    );
                    Action::Pause
                }
                // A refusal, never a key refresh: a grant is for a request that already passes.
                Decision::Deny(denial) | Decision::RefreshKeys(denial) => refuse(denial),
                Decision::Unavailable { .. } => self.act(decision.clone(), None, now, false),
            });
        }
        if has_credentials || matches!(decision, Decision::Allow { .. }) {
            return None;
        }
        let cookies = request_header("cookie")?;
        let identity = grant::granted_identity(key, &cookies, &path, now)?;
        let rest = grant::without_grants(&cookies);
        if hostcalls::set_map_value(MapType::HttpRequestHeaders, "cookie", rest.as_deref()).is_err()
        {
            return Some(fail("could not remove the grant cookie"));
        }
        Some(self.act(Decision::Allow { identity }, None, now, false))
    }
}

impl Context for AuthRequest {
    fn on_http_call_response(
        &mut self,
        _token_id: u32,
        num_headers: usize,
        body_size: usize,
        _num_trailers: usize,
    ) {
        if self
            .oidc
            .as_ref()
            .is_some_and(oidc_glue::OidcRequest::waiting)
        {
            oidc_glue::on_call_response(self, num_headers, body_size);
            return;
        }
        let Some((authorization, denial)) = self.waiting.take() else {
            return;
        };
        if let Some(remote) = remote(&self.config) {
            finish_fetch(remote, &self.cache, num_headers, body_size);
        }
        let Some(now) = now_s() else {
            fail("the host clock is not available");
            return;
        };
        let decision = match self.decide(authorization.as_deref(), now) {
            // The refreshed keys still lack the kid: the refusal that was pending.
            Decision::RefreshKeys(_) => Decision::Deny(denial),
            d => d,
        };
        if let Action::Continue = self.act(decision, authorization, now, false) {
            let _ = hostcalls::resume_http_request();
        }
    }
}

impl HttpContext for AuthRequest {
    fn on_http_request_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        // Only this filter sets the identity header; whatever a client sent must never reach
        // the upstream. A request is forwarded only through `act(Decision::Allow)`, which
        // replaces the header (Envoy's `replaceHeaderMapValue` removes every value of it, then
        // adds ours; e2e tests send two spoofed values), so API-key and JWT requests need no
        // removal first: one host call and one route-cache reset fewer per request. The OAuth2
        // mode, with more ways through, drops it first.
        if self.oidc.is_some() {
            if hostcalls::set_map_value(MapType::HttpRequestHeaders, IDENTITY_HEADER, None).is_err()
            {
                return fail("could not remove the client's identity header");
            }
            return oidc_glue::on_request_headers(self);
        }
        let authorization = request_header("authorization");
        // Only tokens have a validity period: API keys are decided without a clock read (one
        // host call fewer per request).
        let now = if reads_clock(&self.config) {
            let Some(now) = now_s() else {
                return fail("the host clock is not available");
            };
            now
        } else {
            0
        };
        let decision = self.decide(authorization.as_deref(), now);
        if let Some(key) = self.grant_key.clone() {
            if let Some(action) = self.by_grant(&key, &decision, authorization.is_some()) {
                return action;
            }
        }
        self.act(decision, authorization, now, true)
    }

    fn on_http_response_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        if self.oidc.is_some() {
            oidc_glue::on_response_headers(self);
        }
        Action::Continue
    }
}

/// One request header's value (only that header is copied into the VM, not the whole map), as
/// text: the host's buffer as it is when valid UTF-8 (the usual case, no second copy), else
/// with U+FFFD for the invalid sequences (which no credential matches). Bytes, not the SDK's
/// `String` reader: a non-UTF-8 value must not abort the VM.
fn request_header(name: &str) -> Option<String> {
    let bytes = hostcalls::get_map_value_bytes(MapType::HttpRequestHeaders, name)
        .ok()
        .flatten()?;
    Some(
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// Answers 401 with the reason (problem+json and the Bearer challenge).
fn refuse(denial: &Denial) -> Action {
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

/// Answers 405 with a problem document saying `detail`.
fn method_not_allowed(detail: &str) -> Action {
    let body =
        serde_json::json!({ "title": "Method Not Allowed", "status": 405, "detail": detail })
            .to_string();
    let _ = hostcalls::send_http_response(
        405,
        vec![("content-type", "application/problem+json")],
        Some(body.as_bytes()),
    );
    Action::Pause
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
