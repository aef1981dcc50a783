//! Per request in OAuth2 mode: what to do (`route`), and what the token endpoint's answers
//! mean (`complete_login`, `complete_refresh`). Pure: the glue supplies the time, 96 random
//! bytes, the issuer's document and keys, and carries out the [`Step`].
//!
//! ```text
//!  logout path ─────────────> clear cookies, 302 to end_session_endpoint (or 200)
//!  sign-in path ?to=P ──────> valid session: 302 to P; else 302 to the authorization endpoint
//!                             returning to P (P a local path, else `/`)
//!  callback path ───────────> pending cookie + state check ─> Exchange (code, PKCE verifier)
//!  Authorization header ────> Bearer (JWT against the issuer's JWKS, or an API key)
//!  session cookie valid ────> Allow(sub) | expired: Refresh (refresh token) or sign in again
//!  none (GET/HEAD) ─────────> 302 to the authorization endpoint (PKCE S256, state, nonce)
//!  none (other methods) ────> Bearer (401 with the challenge)
//! ```

use std::collections::BTreeSet;

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{
    cookie::{self, Pending, Session, PENDING_COOKIE, SESSION_COOKIE},
    split_url, Discovery, Oauth2Config,
};
use crate::{
    jwks::VerifyKey,
    jwt::{JwtConfig, KeySource},
};

/// How long a sign-in may take between the redirect and the callback, in seconds.
pub const PENDING_TTL_S: u64 = 600;

/// What the glue knows of a request.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    /// `:path`, with the query.
    pub path: &'a str,
    pub authorization: Option<&'a str>,
    pub cookie: Option<&'a str>,
}

/// Fresh random bytes from the host, for one possible sign-in.
#[derive(Debug, Clone)]
pub struct Random {
    pub state: [u8; 32],
    pub nonce: [u8; 32],
    pub verifier: [u8; 32],
}

/// An answer the filter sends itself (the request is not forwarded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// A `POST` to the token endpoint, for the glue to dispatch through the issuer's cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    pub authority: String,
    pub path: String,
    /// Form fields (`application/x-www-form-urlencoded`); the client authenticates with
    /// `Authorization: Basic` (client_secret_basic), built by [`TokenRequest::headers`].
    pub body: String,
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Decide by the bearer policy (JWT against the issuer's keys, or an API key).
    Bearer,
    /// A valid session: forward as `identity`.
    Allow { identity: String },
    /// Answer without forwarding (redirects, refusals, logout).
    Respond(Response),
    /// The callback: exchange the code, then [`complete_login`].
    Exchange {
        request: TokenRequest,
        pending: Pending,
    },
    /// The session needs confirming: refresh, then [`complete_refresh`].
    Refresh {
        request: TokenRequest,
        session: Session,
    },
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The PKCE S256 challenge of a verifier (RFC 7636 section 4.2).
pub fn pkce_challenge(verifier: &str) -> String {
    b64(&Sha256::digest(verifier.as_bytes()))
}

fn query_param(path: &str, name: &str) -> Option<String> {
    let query = path.split_once('?')?.1;
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Text safe to echo to a client: printable ASCII, at most 100 characters.
fn printable(s: &str) -> String {
    s.chars()
        .filter(|c| (' '..='~').contains(c))
        .take(100)
        .collect()
}

fn problem(status: u16, title: &str, detail: &str, set_cookies: &[String]) -> Response {
    let mut headers = vec![(
        "content-type".to_owned(),
        "application/problem+json".to_owned(),
    )];
    headers.extend(
        set_cookies
            .iter()
            .map(|c| ("set-cookie".to_owned(), c.clone())),
    );
    let body = serde_json::json!({"title": title, "status": status, "detail": detail}).to_string();
    Response {
        status,
        headers,
        body,
    }
}

fn redirect(location: String, set_cookies: Vec<String>) -> Response {
    let mut headers = vec![("location".to_owned(), location)];
    headers.extend(
        set_cookies
            .into_iter()
            .map(|c| ("set-cookie".to_owned(), c)),
    );
    headers.push(("cache-control".to_owned(), "no-store".to_owned()));
    Response {
        status: 302,
        headers,
        body: String::new(),
    }
}

/// Where to return after signing in: the request's own path if it is a plain local one.
fn return_to(cfg: &Oauth2Config, req: &Request<'_>) -> String {
    local_return(cfg, req.path)
}

/// `path` if it is a plain path of this gateway (not another origin, not one of the filter's
/// own paths), else `/`.
fn local_return(cfg: &Oauth2Config, path: &str) -> String {
    let local = path.starts_with('/')
        && !path.starts_with("//")
        && !path.contains('\\')
        && path.len() <= 1024
        && path.bytes().all(|b| b.is_ascii_graphic());
    let own = |p: &str| path.split('?').next() == Some(p);
    if local && !own(&cfg.callback_path) && !own(&cfg.logout_path) && !own(&cfg.signin_path) {
        path.to_owned()
    } else {
        "/".to_owned()
    }
}

/// The sign-in entry point: back to `?to=` at once with a valid session, else through the
/// issuer (a session past its refresh time signs in again: the page asked for it).
fn signin(
    cfg: &Oauth2Config,
    disc: &Discovery,
    req: &Request<'_>,
    now: u64,
    rnd: &Random,
) -> Response {
    let to = local_return(cfg, &query_param(req.path, "to").unwrap_or_default());
    let signed_in = req
        .cookie
        .and_then(|c| cookie::cookie_value(c, SESSION_COOKIE))
        .and_then(|sealed| cookie::open::<Session>(&cfg.cookie_key, "session", sealed).ok())
        .is_some_and(|s| now < s.exp && now < s.until);
    if signed_in {
        redirect(to, vec![])
    } else {
        sign_in(cfg, disc, to, now, rnd, vec![])
    }
}

/// The redirect to the issuer's authorization endpoint, with a new pending sign-in.
pub fn sign_in(
    cfg: &Oauth2Config,
    disc: &Discovery,
    return_to: String,
    now: u64,
    rnd: &Random,
    extra_cookies: Vec<String>,
) -> Response {
    let pending = Pending {
        state: b64(&rnd.state),
        nonce: b64(&rnd.nonce),
        verifier: b64(&rnd.verifier),
        return_to,
        exp: now + PENDING_TTL_S,
    };
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("response_type", "code")
        .append_pair("client_id", &cfg.client_id)
        .append_pair("redirect_uri", &cfg.redirect_uri)
        .append_pair("scope", &cfg.scopes.join(" "))
        .append_pair("state", &pending.state)
        .append_pair("nonce", &pending.nonce)
        .append_pair("code_challenge", &pkce_challenge(&pending.verifier))
        .append_pair("code_challenge_method", "S256")
        .finish();
    let sep = if disc.authorization_endpoint.contains('?') {
        '&'
    } else {
        '?'
    };
    let mut cookies = extra_cookies;
    cookies.push(cookie::set_cookie(
        PENDING_COOKIE,
        &cookie::seal(&cfg.cookie_key, "pending", &pending),
        PENDING_TTL_S,
    ));
    redirect(
        format!("{}{sep}{query}", disc.authorization_endpoint),
        cookies,
    )
}

impl TokenRequest {
    fn new(disc: &Discovery, fields: &[(&str, &str)]) -> Self {
        let (authority, path) = split_url(&disc.token_endpoint).unwrap_or_default();
        let mut form = form_urlencoded::Serializer::new(String::new());
        for (k, v) in fields {
            form.append_pair(k, v);
        }
        Self {
            authority: authority.to_owned(),
            path: path.to_owned(),
            body: form.finish(),
        }
    }

    /// The request headers, with the client's credentials (never logged).
    pub fn headers(&self, cfg: &Oauth2Config) -> Vec<(String, String)> {
        // RFC 6749 section 2.3.1: id and secret form-encoded, then Basic.
        let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            enc(&cfg.client_id),
            enc(&cfg.client_secret)
        ));
        vec![
            (":method".into(), "POST".into()),
            (":path".into(), self.path.clone()),
            (":authority".into(), self.authority.clone()),
            (
                "content-type".into(),
                "application/x-www-form-urlencoded".into(),
            ),
            ("accept".into(), "application/json".into()),
            ("authorization".into(), format!("Basic {basic}")),
        ]
    }
}

/// Decides what to do with a request in OAuth2 mode.
pub fn route(
    cfg: &Oauth2Config,
    disc: &Discovery,
    req: &Request<'_>,
    now: u64,
    rnd: &Random,
) -> Step {
    let path_only = req.path.split('?').next().unwrap_or(req.path);
    if path_only == cfg.logout_path {
        return Step::Respond(logout(cfg, disc));
    }
    if path_only == cfg.callback_path {
        return callback(cfg, disc, req, now);
    }
    if path_only == cfg.signin_path && matches!(req.method, "GET" | "HEAD") {
        return Step::Respond(signin(cfg, disc, req, now, rnd));
    }
    if req.authorization.is_some() {
        return Step::Bearer;
    }
    let browser = matches!(req.method, "GET" | "HEAD");
    let sealed = req
        .cookie
        .and_then(|c| cookie::cookie_value(c, SESSION_COOKIE))
        .filter(|v| !v.is_empty());
    let Some(sealed) = sealed else {
        return if browser {
            Step::Respond(sign_in(cfg, disc, return_to(cfg, req), now, rnd, vec![]))
        } else {
            Step::Bearer
        };
    };
    let clear = vec![cookie::clear_cookie(SESSION_COOKIE)];
    let again = |why: &str| {
        if browser {
            Step::Respond(sign_in(
                cfg,
                disc,
                return_to(cfg, req),
                now,
                rnd,
                clear.clone(),
            ))
        } else {
            Step::Respond(problem(
                401,
                "Unauthorized",
                &format!("{why}; sign in again"),
                &clear,
            ))
        }
    };
    match cookie::open::<Session>(&cfg.cookie_key, "session", sealed) {
        Err(e) => again(&e.to_string()),
        Ok(s) if now >= s.until => again("the session ended"),
        Ok(s) if now < s.exp => Step::Allow { identity: s.sub },
        Ok(s) => match &s.rt {
            Some(rt) => Step::Refresh {
                request: TokenRequest::new(
                    disc,
                    &[("grant_type", "refresh_token"), ("refresh_token", rt)],
                ),
                session: s.clone(),
            },
            None => again("the session expired"),
        },
    }
}

fn logout(cfg: &Oauth2Config, disc: &Discovery) -> Response {
    let cookies = vec![
        cookie::clear_cookie(SESSION_COOKIE),
        cookie::clear_cookie(PENDING_COOKIE),
    ];
    match &disc.end_session_endpoint {
        Some(end) => {
            let mut q = form_urlencoded::Serializer::new(String::new());
            q.append_pair("client_id", &cfg.client_id);
            if let Some(after) = &cfg.post_logout_redirect_uri {
                q.append_pair("post_logout_redirect_uri", after);
            }
            let sep = if end.contains('?') { '&' } else { '?' };
            redirect(format!("{end}{sep}{}", q.finish()), cookies)
        }
        None => {
            let mut r = problem(
                200,
                "Signed out",
                "the session cookie was removed",
                &cookies,
            );
            r.headers[0].1 = "application/json".into();
            r
        }
    }
}

fn callback(cfg: &Oauth2Config, disc: &Discovery, req: &Request<'_>, now: u64) -> Step {
    let clear = vec![cookie::clear_cookie(PENDING_COOKIE)];
    let bad = |status: u16, detail: &str| {
        Step::Respond(problem(
            status,
            if status == 400 {
                "Bad Request"
            } else {
                "Unauthorized"
            },
            detail,
            &clear,
        ))
    };
    let sealed = req
        .cookie
        .and_then(|c| cookie::cookie_value(c, PENDING_COOKIE))
        .filter(|v| !v.is_empty());
    let Some(sealed) = sealed else {
        return bad(
            400,
            "no sign-in is in progress in this browser (cookies blocked, or it already \
             completed); open the page you wanted again",
        );
    };
    let pending = match cookie::open::<Pending>(&cfg.cookie_key, "pending", sealed) {
        Ok(p) => p,
        Err(e) => return bad(400, &format!("{e}; open the page you wanted again")),
    };
    if now >= pending.exp {
        return bad(
            400,
            "the sign-in took too long; open the page you wanted again",
        );
    }
    if let Some(error) = query_param(req.path, "error") {
        return bad(
            401,
            &format!(
                "the identity provider refused the sign-in: {}",
                printable(&error)
            ),
        );
    }
    let state = query_param(req.path, "state").unwrap_or_default();
    if !bool::from(state.as_bytes().ct_eq(pending.state.as_bytes())) {
        return bad(
            400,
            "the sign-in's state does not match this browser's; open the page you wanted again",
        );
    }
    let Some(code) = query_param(req.path, "code").filter(|c| !c.is_empty()) else {
        return bad(400, "the callback carries no authorization code");
    };
    Step::Exchange {
        request: TokenRequest::new(
            disc,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", &cfg.redirect_uri),
                ("code_verifier", &pending.verifier),
            ],
        ),
        pending,
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    id_token: Option<String>,
    refresh_token: Option<String>,
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct TokenErrorAnswer {
    error: String,
}

#[derive(Deserialize)]
struct IdClaims {
    exp: Option<u64>,
    nonce: Option<String>,
}

/// Verifies an ID token (signature against `keys`, `iss`, `aud` = client id, `exp`/`nbf`) and,
/// when `nonce` is given, its `nonce`; the identity (`sub` or `identity_claim`) and `exp`.
pub fn verify_id_token(
    cfg: &Oauth2Config,
    keys: &[VerifyKey],
    token: &str,
    now: u64,
    nonce: Option<&str>,
) -> Result<(String, u64), String> {
    let jwt = JwtConfig {
        issuer: cfg.issuer.clone(),
        audiences: BTreeSet::from([cfg.client_id.clone()]),
        keys: KeySource::Inline(Vec::new()),
        clock_skew_s: cfg.clock_skew_s,
        identity_claim: cfg.identity_claim.clone(),
    };
    let sub = jwt
        .verify_with(keys, token, now)
        .map_err(|e| format!("the ID token was refused: {e}"))?;
    // The signature is verified: the payload is the issuer's.
    let claims: IdClaims = token
        .split('.')
        .nth(1)
        .and_then(|p| URL_SAFE_NO_PAD.decode(p).ok())
        .and_then(|json| serde_json::from_slice(&json).ok())
        .ok_or("the ID token's claims are malformed")?;
    if let Some(expected) = nonce {
        let got = claims.nonce.unwrap_or_default();
        if !bool::from(got.as_bytes().ct_eq(expected.as_bytes())) {
            return Err("the ID token's nonce does not match this sign-in".into());
        }
    }
    Ok((sub, claims.exp.unwrap_or(now)))
}

fn token_error(status: Option<u16>, body: &[u8], hint: &str) -> String {
    match status {
        None => "the identity provider's token endpoint did not answer".into(),
        Some(s) => match serde_json::from_slice::<TokenErrorAnswer>(body) {
            Ok(e) => format!(
                "the identity provider refused ({s} {}){hint}",
                printable(&e.error)
            ),
            Err(_) => format!("the identity provider's token endpoint answered {s}"),
        },
    }
}

fn session_cookie(cfg: &Oauth2Config, session: &Session, now: u64) -> String {
    let mut sealed = cookie::seal(&cfg.cookie_key, "session", session);
    if sealed.len() > cookie::MAX_COOKIE_LEN {
        // Too large with the refresh token: keep the session, sign in again when it expires.
        let lean = Session {
            rt: None,
            ..session.clone()
        };
        sealed = cookie::seal(&cfg.cookie_key, "session", &lean);
    }
    cookie::set_cookie(SESSION_COOKIE, &sealed, session.until.saturating_sub(now))
}

/// The token endpoint's answer to the code exchange: the redirect back to where the browser
/// was going, with the session cookie; or a 401 saying why.
pub fn complete_login(
    cfg: &Oauth2Config,
    keys: &[VerifyKey],
    pending: &Pending,
    status: Option<u16>,
    body: &[u8],
    now: u64,
) -> Response {
    let clear_pending = cookie::clear_cookie(PENDING_COOKIE);
    let refuse = |detail: String| {
        problem(
            401,
            "Unauthorized",
            &format!("{detail}; open the page you wanted again to sign in"),
            std::slice::from_ref(&clear_pending),
        )
    };
    if status != Some(200) {
        return refuse(token_error(
            status,
            body,
            "; an authorization code works once",
        ));
    }
    let Ok(answer) = serde_json::from_slice::<TokenAnswer>(body) else {
        return refuse("the token endpoint's answer is not a token response".into());
    };
    let Some(id_token) = answer.id_token else {
        return refuse("the token response has no ID token (is `openid` in the scopes?)".into());
    };
    let (sub, exp) = match verify_id_token(cfg, keys, &id_token, now, Some(&pending.nonce)) {
        Ok(v) => v,
        Err(e) => return refuse(e),
    };
    let session = Session {
        sub,
        exp,
        until: now + cfg.session_max_age_s,
        rt: answer.refresh_token,
    };
    redirect(
        pending.return_to.clone(),
        vec![session_cookie(cfg, &session, now), clear_pending],
    )
}

/// The token endpoint's answer to a refresh: the renewed session and its `Set-Cookie`.
pub fn complete_refresh(
    cfg: &Oauth2Config,
    keys: &[VerifyKey],
    session: &Session,
    status: Option<u16>,
    body: &[u8],
    now: u64,
) -> Result<(Session, String), String> {
    if status != Some(200) {
        return Err(token_error(status, body, " to renew the session"));
    }
    let answer: TokenAnswer = serde_json::from_slice(body)
        .map_err(|_| "the token endpoint's answer is not a token response".to_owned())?;
    let exp = match &answer.id_token {
        Some(id_token) => {
            let (sub, exp) = verify_id_token(cfg, keys, id_token, now, None)?;
            if sub != session.sub {
                return Err("the refreshed ID token names another identity".into());
            }
            exp
        }
        None => now + answer.expires_in.unwrap_or(300).min(3600),
    };
    let renewed = Session {
        sub: session.sub.clone(),
        exp,
        until: session.until,
        rt: answer.refresh_token.or_else(|| session.rt.clone()),
    };
    let set = session_cookie(cfg, &renewed, now);
    Ok((renewed, set))
}

/// The answer when a refresh failed: sign in again (browser) or 401.
pub fn refresh_failed(
    cfg: &Oauth2Config,
    disc: &Discovery,
    req: &Request<'_>,
    now: u64,
    rnd: &Random,
    why: &str,
) -> Response {
    let clear = vec![cookie::clear_cookie(SESSION_COOKIE)];
    if matches!(req.method, "GET" | "HEAD") {
        sign_in(cfg, disc, return_to(cfg, req), now, rnd, clear)
    } else {
        problem(
            401,
            "Unauthorized",
            &format!("the session could not be renewed: {why}; sign in again"),
            &clear,
        )
    }
}

/// The bearer policy of OAuth2 mode once discovery is done: JWTs from the issuer (keys from
/// its `jwks_uri`, audiences from the configuration), or the API keys.
pub fn bearer_config(
    cfg: &Oauth2Config,
    disc: &Discovery,
    api_keys: &[crate::config::ApiKey],
) -> crate::config::AuthConfig {
    crate::config::AuthConfig::Jwt {
        jwt: Box::new(JwtConfig {
            issuer: cfg.issuer.clone(),
            audiences: cfg.audiences.clone(),
            keys: KeySource::Remote(disc.jwks_remote(cfg)),
            clock_skew_s: cfg.clock_skew_s,
            identity_claim: cfg.identity_claim.clone(),
        }),
        api_keys: api_keys.to_vec(),
    }
}
