//! proxy-wasm glue of the OAuth2 mode: fetches the issuer's discovery document and JWKS from
//! the root context's tick, and per request carries out `oauth::route`'s step: answers
//! (redirects, refusals, logout), the code exchange and refresh through `dispatch_http_call`
//! to the token endpoint, the session cookie renewed on the response. Never panics; never
//! logs the client secret, the cookie key, a code or a token.

use std::{cell::RefCell, collections::HashSet, rc::Rc, time::Duration};

use proxy_wasm::{
    hostcalls,
    types::{Action, BufferType, MapType},
};

use super::{
    fail, finish_fetch, log, now_s, request_header as header, start_fetch, AuthRequest, Cache,
};
use crate::{
    config::AuthConfig,
    oauth::{
        cookie::{Pending, Session},
        flow::{self, bearer_config},
        route, DiscoveryCache, Oauth2Config, Random, Request, Response, Step, TokenRequest,
    },
    policy::Decision,
};

/// Largest token endpoint answer read, in bytes.
const MAX_TOKEN_ANSWER: usize = 64 * 1024;

/// The OAuth2 state of one worker's VM, shared by the root and the request contexts.
#[derive(Debug)]
pub(super) struct OidcShared {
    cfg: Oauth2Config,
    api_keys: Vec<crate::config::ApiKey>,
    discovery: RefCell<DiscoveryCache>,
    /// The bearer policy once discovery is done (JWT against the jwks_uri, or API keys).
    bearer: RefCell<Option<Rc<AuthConfig>>>,
    /// Root calls that fetch the discovery document (every other root call fetches the JWKS).
    discovery_calls: RefCell<HashSet<u32>>,
}

impl OidcShared {
    pub(super) fn new(cfg: Oauth2Config, api_keys: Vec<crate::config::ApiKey>) -> Rc<Self> {
        Rc::new(Self {
            cfg,
            api_keys,
            discovery: RefCell::default(),
            bearer: RefCell::default(),
            discovery_calls: RefCell::default(),
        })
    }

    /// The policy for bearer tokens, if discovery is done.
    pub(super) fn bearer(&self) -> Option<Rc<AuthConfig>> {
        self.bearer.try_borrow().ok().and_then(|b| b.clone())
    }
}

/// The root's tick: fetch the discovery document until loaded (and when stale), then the JWKS.
pub(super) fn tick(shared: &OidcShared, cache: &Cache, now: u64) {
    let cfg = &shared.cfg;
    let due = shared
        .discovery
        .try_borrow()
        .is_ok_and(|d| d.refresh_due(cfg, now));
    if due {
        let Ok(mut discovery) = shared.discovery.try_borrow_mut() else {
            return;
        };
        discovery.started(now);
        let sent = hostcalls::dispatch_http_call(
            &cfg.cluster,
            vec![
                (":method", "GET"),
                (":path", &cfg.discovery_path),
                (":authority", &cfg.discovery_authority),
                ("accept", "application/json"),
            ],
            None,
            vec![],
            Duration::from_millis(cfg.timeout_ms),
        );
        match sent {
            Ok(token) => {
                if let Ok(mut calls) = shared.discovery_calls.try_borrow_mut() {
                    calls.insert(token);
                }
            }
            Err(e) => {
                discovery.abandoned();
                log::error(&format!(
                    "nsight auth filter: cannot fetch the OpenID configuration of {} through \
                     cluster {:?} ({e:?}); is the cluster defined?",
                    cfg.issuer, cfg.cluster
                ));
            }
        }
        return;
    }
    let doc = shared.discovery.try_borrow().ok().and_then(|d| d.doc());
    if let Some(doc) = doc {
        let remote = doc.jwks_remote(cfg);
        let jwks_due = cache
            .try_borrow()
            .is_ok_and(|c| c.refresh_due(&remote, now));
        if jwks_due {
            start_fetch(&remote, cache, now);
        }
    }
}

fn call_status(num_headers: usize) -> Option<u16> {
    if num_headers == 0 {
        return None;
    }
    hostcalls::get_map_value(MapType::HttpCallResponseHeaders, ":status")
        .ok()
        .flatten()
        .and_then(|s| s.parse::<u16>().ok())
}

fn call_body(body_size: usize, max: usize) -> Vec<u8> {
    hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, body_size.min(max + 1))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// An answer to one of the root's calls: the discovery document or the JWKS.
pub(super) fn root_response(
    shared: &OidcShared,
    cache: &Cache,
    token_id: u32,
    num_headers: usize,
    body_size: usize,
) {
    let cfg = &shared.cfg;
    let was_discovery = shared
        .discovery_calls
        .try_borrow_mut()
        .is_ok_and(|mut calls| calls.remove(&token_id));
    if !was_discovery {
        let doc = shared.discovery.try_borrow().ok().and_then(|d| d.doc());
        if let Some(doc) = doc {
            finish_fetch(&doc.jwks_remote(cfg), cache, num_headers, body_size);
        }
        return;
    }
    let status = call_status(num_headers);
    let body = call_body(body_size, crate::oauth::discovery::MAX_DISCOVERY_BYTES);
    let Ok(mut discovery) = shared.discovery.try_borrow_mut() else {
        return;
    };
    match discovery.finished(cfg, now_s().unwrap_or_default(), status, &body) {
        Ok(doc) => {
            log::info(&format!(
                "nsight auth filter: loaded the OpenID configuration of {} (jwks_uri {})",
                cfg.issuer, doc.jwks_uri
            ));
            if let Ok(mut bearer) = shared.bearer.try_borrow_mut() {
                *bearer = Some(Rc::new(bearer_config(cfg, &doc, &shared.api_keys)));
            }
            // The keys next, without waiting for the tick.
            let remote = doc.jwks_remote(cfg);
            let now = now_s().unwrap_or_default();
            if cache
                .try_borrow()
                .is_ok_and(|c| c.refresh_due(&remote, now))
            {
                drop(discovery);
                start_fetch(&remote, cache, now);
            }
        }
        Err(e) => log::error(&format!(
            "nsight auth filter: fetching the OpenID configuration of {} failed: {e}",
            cfg.issuer
        )),
    }
}

/// What a request context of the OAuth2 mode remembers.
#[derive(Debug)]
pub(super) struct OidcRequest {
    pub(super) shared: Rc<OidcShared>,
    /// A token endpoint call in flight for this request.
    waiting: Option<Waiting>,
    /// A renewed session cookie to set on the response.
    set_cookie: Option<String>,
}

#[derive(Debug)]
enum Waiting {
    Exchange(Pending),
    Refresh {
        session: Session,
        method: String,
        path: String,
        rnd: Random,
    },
}

impl OidcRequest {
    pub(super) fn new(shared: Rc<OidcShared>) -> Self {
        Self {
            shared,
            waiting: None,
            set_cookie: None,
        }
    }

    pub(super) fn waiting(&self) -> bool {
        self.waiting.is_some()
    }
}

fn random() -> Option<Random> {
    let mut bytes = [0u8; 96];
    getrandom::getrandom(&mut bytes).ok()?;
    let mut r = Random {
        state: [0; 32],
        nonce: [0; 32],
        verifier: [0; 32],
    };
    r.state.copy_from_slice(&bytes[..32]);
    r.nonce.copy_from_slice(&bytes[32..64]);
    r.verifier.copy_from_slice(&bytes[64..]);
    Some(r)
}

/// Sends an answer of the filter's own; the request is not forwarded.
fn respond(r: &Response) -> Action {
    let headers: Vec<(&str, &str)> = r
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let body = (!r.body.is_empty()).then_some(r.body.as_bytes());
    if hostcalls::send_http_response(u32::from(r.status), headers, body).is_err() {
        log::error("nsight auth filter: could not send the sign-in answer");
    }
    Action::Pause
}

fn dispatch(shared: &OidcShared, request: &TokenRequest) -> bool {
    let headers = request.headers(&shared.cfg);
    let sent = hostcalls::dispatch_http_call(
        &shared.cfg.cluster,
        headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
        Some(request.body.as_bytes()),
        vec![],
        Duration::from_millis(shared.cfg.timeout_ms),
    );
    if let Err(e) = sent {
        log::error(&format!(
            "nsight auth filter: cannot reach the token endpoint through cluster {:?} ({e:?})",
            shared.cfg.cluster
        ));
        return false;
    }
    true
}

fn unavailable(what: &str) -> Action {
    respond(&Response {
        status: 503,
        headers: vec![
            ("content-type".into(), "application/problem+json".into()),
            ("retry-after".into(), "1".into()),
        ],
        body: serde_json::json!({"title": "Service Unavailable", "status": 503, "detail": what})
            .to_string(),
    })
}

/// `on_http_request_headers` in OAuth2 mode (the identity header is already removed).
pub(super) fn on_request_headers(req: &mut AuthRequest) -> Action {
    let Some(oidc) = req.oidc.as_ref() else {
        return fail("the OAuth2 state is missing");
    };
    let shared = Rc::clone(&oidc.shared);
    let Some(now) = now_s() else {
        return fail("the host clock is not available");
    };
    let authorization = header("authorization");
    let doc = shared.discovery.try_borrow().ok().and_then(|d| d.doc());
    let keys_loaded = req.cache.try_borrow().is_ok_and(|c| c.keys().is_some());
    let (Some(doc), Some(bearer), true) = (doc, shared.bearer(), keys_loaded) else {
        // Before discovery and the first JWKS nothing is decided: 503, retry shortly.
        return unavailable(
            "the gateway has not loaded the issuer's OpenID configuration and signing keys \
             yet; retry in a few seconds",
        );
    };
    let (method, path, cookie) = (
        header(":method").unwrap_or_default(),
        header(":path").unwrap_or_default(),
        header("cookie"),
    );
    let Some(rnd) = random() else {
        return fail("the host gave no random bytes");
    };
    let request = Request {
        method: &method,
        path: &path,
        authorization: authorization.as_deref(),
        cookie: cookie.as_deref(),
    };
    match route(&shared.cfg, &doc, &request, now, &rnd) {
        Step::Bearer => {
            req.config = bearer;
            let decision = req.decide(authorization.as_deref(), now);
            req.act(decision, authorization, now, true)
        }
        Step::Allow { identity } => req.act(Decision::Allow { identity }, None, now, false),
        Step::Respond(r) => respond(&r),
        Step::Exchange { request, pending } => {
            if !dispatch(&shared, &request) {
                return unavailable("the gateway cannot reach the identity provider");
            }
            if let Some(oidc) = req.oidc.as_mut() {
                oidc.waiting = Some(Waiting::Exchange(pending));
            }
            Action::Pause
        }
        Step::Refresh { request, session } => {
            if !dispatch(&shared, &request) {
                return unavailable("the gateway cannot reach the identity provider");
            }
            if let Some(oidc) = req.oidc.as_mut() {
                oidc.waiting = Some(Waiting::Refresh {
                    session,
                    method,
                    path,
                    rnd,
                });
            }
            Action::Pause
        }
    }
}

/// The token endpoint answered this request's exchange or refresh.
pub(super) fn on_call_response(req: &mut AuthRequest, num_headers: usize, body_size: usize) {
    let Some(oidc) = req.oidc.as_mut() else {
        return;
    };
    let Some(waiting) = oidc.waiting.take() else {
        return;
    };
    let shared = Rc::clone(&oidc.shared);
    let status = call_status(num_headers);
    let body = call_body(body_size, MAX_TOKEN_ANSWER);
    let Some(now) = now_s() else {
        fail("the host clock is not available");
        return;
    };
    let keys = req.cache.try_borrow().ok().and_then(|c| c.keys());
    let doc = shared.discovery.try_borrow().ok().and_then(|d| d.doc());
    let (Some(keys), Some(doc)) = (keys, doc) else {
        unavailable("the gateway has not loaded the issuer's signing keys yet; retry shortly");
        return;
    };
    let cfg = &shared.cfg;
    match waiting {
        Waiting::Exchange(pending) => {
            let r = flow::complete_login(cfg, &keys, &pending, status, &body, now);
            if r.status != 302 {
                log::info(&format!(
                    "nsight auth filter: sign-in refused ({}): {}",
                    r.status, r.body
                ));
            }
            respond(&r);
        }
        Waiting::Refresh {
            session,
            method,
            path,
            rnd,
        } => match flow::complete_refresh(cfg, &keys, &session, status, &body, now) {
            Ok((renewed, set_cookie)) => {
                if let Some(oidc) = req.oidc.as_mut() {
                    oidc.set_cookie = Some(set_cookie);
                }
                let decision = Decision::Allow {
                    identity: renewed.sub,
                };
                if let Action::Continue = req.act(decision, None, now, false) {
                    let _ = hostcalls::resume_http_request();
                }
            }
            Err(why) => {
                log::info(&format!(
                    "nsight auth filter: session refresh failed: {why}"
                ));
                let request = Request {
                    method: &method,
                    path: &path,
                    authorization: None,
                    cookie: None,
                };
                respond(&flow::refresh_failed(cfg, &doc, &request, now, &rnd, &why));
            }
        },
    }
}

/// Adds a renewed session cookie to the upstream's response.
pub(super) fn on_response_headers(req: &mut AuthRequest) {
    let cookie = req.oidc.as_mut().and_then(|o| o.set_cookie.take());
    if let Some(cookie) = cookie {
        if hostcalls::add_map_value(MapType::HttpResponseHeaders, "set-cookie", &cookie).is_err() {
            log::error("nsight auth filter: could not set the renewed session cookie");
        }
    }
}
