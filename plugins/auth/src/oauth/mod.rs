//! The OAuth2 (OpenID Connect) mode: a browser signs in at the issuer with the authorization
//! code flow (PKCE S256, state, nonce) and then holds an HMAC-signed session cookie; API
//! clients (the CLI) keep sending bearer tokens, verified against the issuer's JWKS.
//!
//! ```text
//!  config     the `oauth2` member: issuer, client, cookie key, paths; refuses a listener without TLS
//!  discovery  /.well-known/openid-configuration: parsed, checked, cached (state machine)
//!  cookie     sealing and opening the signed cookies (session, sign-in in progress)
//!  flow       per request: session / callback / logout / redirect to sign in / bearer;
//!             the token endpoint's answers (code exchange, refresh) -> session
//! ```
//! Everything here is pure (time, randomness and HTTP answers are passed in); the glue
//! (`filter/oauth.rs`) does the calls with `dispatch_http_call`.

pub mod config;
pub mod cookie;
pub mod discovery;
pub mod flow;

pub use config::Oauth2Config;
pub use discovery::{Discovery, DiscoveryCache};
pub use flow::{route, Random, Request, Response, Step, TokenRequest};

/// Splits an `http(s)://authority/path` URL into its authority and path (with query).
pub(crate) fn split_url(url: &str) -> Option<(&str, &str)> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let printable = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
    (!authority.is_empty() && printable(authority) && printable(path)).then_some((authority, path))
}
