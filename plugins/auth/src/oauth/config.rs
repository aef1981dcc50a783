//! The `oauth2` member of the filter configuration: which issuer, which client, where the
//! callback and logout live, the cookie key. Validated once; secrets never reach `Debug`.
//!
//! ```json
//! {"mode": "oauth2",
//!  "oauth2": {"issuer": "https://idp.example.com", "cluster": "idp",
//!             "client_id": "nsight-web", "client_secret": "...",
//!             "redirect_uri": "https://nsight.example.com/oauth2/callback",
//!             "cookie_key": "<base64 of at least 32 random bytes>",
//!             "audiences": ["nsight-cloud"], "listener_tls": true},
//!  "api_keys": ["<optional>"]}
//! ```

use std::collections::BTreeSet;

use base64::Engine as _;
use serde::Deserialize;

use super::split_url;
use crate::jwt::{ClaimPath, MAX_CLOCK_SKEW_S};

/// Shortest cookie key, in bytes (HMAC-SHA256's block of entropy).
pub const MIN_COOKIE_KEY_BYTES: usize = 32;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOauth2Config {
    issuer: String,
    cluster: String,
    client_id: String,
    client_secret: String,
    redirect_uri: String,
    cookie_key: String,
    audiences: Vec<String>,
    #[serde(default)]
    listener_tls: bool,
    #[serde(default = "default_logout_path")]
    logout_path: String,
    #[serde(default = "default_signin_path")]
    signin_path: String,
    #[serde(default)]
    post_logout_redirect_uri: Option<String>,
    #[serde(default = "default_scopes")]
    scopes: Vec<String>,
    #[serde(default = "default_session_max_age")]
    session_max_age_s: u64,
    #[serde(default = "default_skew")]
    clock_skew_s: u64,
    #[serde(default = "default_timeout")]
    timeout_ms: u64,
    #[serde(default = "default_ttl")]
    cache_ttl_s: u64,
    #[serde(default)]
    identity_claim: Option<String>,
}

fn default_logout_path() -> String {
    "/oauth2/logout".into()
}
/// `nsight_contracts::routes::OAUTH2_SIGNIN`, where the UI's "Sign in" link points.
fn default_signin_path() -> String {
    "/oauth2/signin".into()
}
fn default_scopes() -> Vec<String> {
    vec!["openid".into()]
}
fn default_session_max_age() -> u64 {
    8 * 3600
}
fn default_skew() -> u64 {
    60
}
fn default_timeout() -> u64 {
    5000
}
fn default_ttl() -> u64 {
    3600
}

/// A validated OAuth2 configuration. Invariants: URLs are http(s) with an authority; the
/// callback and logout paths differ and start with `/`; the cookie key has at least
/// [`MIN_COOKIE_KEY_BYTES`]; `scopes` contains `openid`; `audiences` is not empty.
#[derive(Clone)]
pub struct Oauth2Config {
    pub issuer: String,
    /// The Envoy cluster reaching the issuer (discovery, token endpoint, JWKS).
    pub cluster: String,
    pub client_id: String,
    pub client_secret: String,
    pub redirect_uri: String,
    /// The path of `redirect_uri`: the callback this filter answers.
    pub callback_path: String,
    pub logout_path: String,
    /// `GET <signin_path>?to=<local path>` signs the user in (unless signed in) and returns
    /// to `to`: a page served without auth (the UI) starts the sign-in here.
    pub signin_path: String,
    pub post_logout_redirect_uri: Option<String>,
    pub cookie_key: Vec<u8>,
    /// `aud` accepted in bearer tokens (the API's audience; the ID token's is `client_id`).
    pub audiences: BTreeSet<String>,
    pub scopes: Vec<String>,
    pub session_max_age_s: u64,
    pub clock_skew_s: u64,
    pub timeout_ms: u64,
    /// How long the discovery document and the JWKS are kept before a refetch.
    pub cache_ttl_s: u64,
    /// `:authority` and `:path` of the discovery document.
    pub discovery_authority: String,
    pub discovery_path: String,
    /// The claim (of bearer tokens and ID tokens) forwarded as the identity; `None`: `sub`.
    pub identity_claim: Option<ClaimPath>,
}

impl std::fmt::Debug for Oauth2Config {
    /// Never prints the client secret or the cookie key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Oauth2 {{ issuer: {:?}, client_id: {:?}, callback: {:?}, logout: {:?}, \
             audiences: {:?}, client_secret: <redacted>, cookie_key: <redacted> }}",
            self.issuer, self.client_id, self.callback_path, self.logout_path, self.audiences
        )
    }
}

fn url_ok(url: &str, what: &str) -> Result<(), String> {
    split_url(url).map(|_| ()).ok_or_else(|| {
        format!("`oauth2.{what}` must be an http:// or https:// URL with a host, without spaces")
    })
}

impl Oauth2Config {
    pub(crate) fn from_raw(raw: RawOauth2Config) -> Result<Self, String> {
        if !raw.listener_tls {
            return Err(
                "OAuth2 mode sets Secure session cookies and needs TLS on the listener; \
                        serve the listener over TLS and set `oauth2.listener_tls: true`"
                    .into(),
            );
        }
        url_ok(&raw.issuer, "issuer")?;
        url_ok(&raw.redirect_uri, "redirect_uri")?;
        if !raw.redirect_uri.starts_with("https://") {
            return Err(
                "`oauth2.redirect_uri` must be an https:// URL (the listener serves TLS)".into(),
            );
        }
        if let Some(uri) = &raw.post_logout_redirect_uri {
            url_ok(uri, "post_logout_redirect_uri")?;
        }
        for (value, what) in [
            (&raw.cluster, "cluster"),
            (&raw.client_id, "client_id"),
            (&raw.client_secret, "client_secret"),
        ] {
            if value.is_empty() {
                return Err(format!("`oauth2.{what}` must not be empty"));
            }
        }
        let callback_path = split_url(&raw.redirect_uri)
            .map(|(_, p)| p.split('?').next().unwrap_or(p).to_owned())
            .unwrap_or_default();
        if !raw.logout_path.starts_with('/') || raw.logout_path == callback_path {
            return Err(format!(
                "`oauth2.logout_path` must be a path starting with `/` other than the callback \
                 ({callback_path})"
            ));
        }
        if !raw.signin_path.starts_with('/')
            || raw.signin_path == callback_path
            || raw.signin_path == raw.logout_path
        {
            return Err(format!(
                "`oauth2.signin_path` must be a path starting with `/` other than the callback \
                 ({callback_path}) and the logout path ({})",
                raw.logout_path
            ));
        }
        let cookie_key = base64::engine::general_purpose::STANDARD
            .decode(raw.cookie_key.trim())
            .or_else(|_| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(raw.cookie_key.trim())
            })
            .map_err(|_| "`oauth2.cookie_key` must be base64 (e.g. `openssl rand -base64 32`)")?;
        if cookie_key.len() < MIN_COOKIE_KEY_BYTES {
            return Err(format!(
                "`oauth2.cookie_key` has {} bytes; use at least {MIN_COOKIE_KEY_BYTES} random bytes",
                cookie_key.len()
            ));
        }
        if raw.audiences.is_empty() || raw.audiences.iter().any(String::is_empty) {
            return Err("`oauth2.audiences` must list the API audience of bearer tokens".into());
        }
        if !raw.scopes.iter().any(|s| s == "openid") {
            return Err("`oauth2.scopes` must include `openid`".into());
        }
        if raw.clock_skew_s > MAX_CLOCK_SKEW_S {
            return Err(format!(
                "`oauth2.clock_skew_s` is {}; at most {MAX_CLOCK_SKEW_S}",
                raw.clock_skew_s
            ));
        }
        if !(60..=30 * 86_400).contains(&raw.session_max_age_s) {
            return Err(
                "`oauth2.session_max_age_s` must be between 60 and 2592000 (30 days)".into(),
            );
        }
        if !(100..=60_000).contains(&raw.timeout_ms) {
            return Err("`oauth2.timeout_ms` must be between 100 and 60000".into());
        }
        if !(10..=86_400).contains(&raw.cache_ttl_s) {
            return Err("`oauth2.cache_ttl_s` must be between 10 and 86400".into());
        }
        let identity_claim = ClaimPath::parse_option(raw.identity_claim.as_deref())
            .map_err(|e| format!("oauth2: {e}"))?;
        let issuer = raw.issuer.trim_end_matches('/').to_owned();
        let (authority, base) = split_url(&issuer).unwrap_or_default();
        let discovery_path = format!(
            "{}/.well-known/openid-configuration",
            base.trim_end_matches('/')
        );
        Ok(Self {
            discovery_authority: authority.to_owned(),
            discovery_path,
            issuer: raw.issuer,
            cluster: raw.cluster,
            client_id: raw.client_id,
            client_secret: raw.client_secret,
            redirect_uri: raw.redirect_uri,
            callback_path,
            logout_path: raw.logout_path,
            signin_path: raw.signin_path,
            post_logout_redirect_uri: raw.post_logout_redirect_uri,
            cookie_key,
            audiences: raw.audiences.into_iter().collect(),
            scopes: raw.scopes,
            session_max_age_s: raw.session_max_age_s,
            clock_skew_s: raw.clock_skew_s,
            timeout_ms: raw.timeout_ms,
            cache_ttl_s: raw.cache_ttl_s,
            identity_claim,
        })
    }
}
