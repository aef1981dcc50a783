//! The filter's cookies, sealed with HMAC-SHA256 under the configured key:
//! `base64url(JSON) "." base64url(HMAC(key, purpose "." base64url(JSON)))`. The purpose
//! (`session`, `pending`) is part of the MAC, so one kind of cookie never opens as another.
//! Integrity only: the browser can read (not alter) what is inside, so the session carries the
//! identity, its expiry and the refresh token (the cookie is `HttpOnly`), never the ID or
//! access token.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use hmac::{Hmac, Mac};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use sha2::Sha256;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "nsight_session";
/// The cookie of a sign-in in progress (state, nonce, PKCE verifier, where to return).
pub const PENDING_COOKIE: &str = "nsight_oauth_pending";
/// Largest cookie value opened, in bytes.
pub const MAX_COOKIE_LEN: usize = 4000;

/// A signed-in browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The ID token's `sub`.
    pub sub: String,
    /// When the identity must be confirmed again (the ID token's `exp`): refreshed with `rt`,
    /// or a new sign-in.
    pub exp: u64,
    /// The session's end, whatever refreshes happen (`session_max_age_s` after sign-in).
    pub until: u64,
    /// The refresh token, when the issuer gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt: Option<String>,
}

/// A sign-in in progress, between the redirect to the issuer and the callback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub state: String,
    pub nonce: String,
    /// The PKCE code verifier.
    pub verifier: String,
    /// Where the browser goes once signed in (a local path).
    pub return_to: String,
    pub exp: u64,
}

/// Why a cookie does not open. Deliberately coarse: the client learns nothing about the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookieError {
    /// Not of the sealed shape, or too large.
    Malformed,
    /// The MAC does not match: altered, or sealed under another key or for another purpose.
    BadSignature,
}

impl std::fmt::Display for CookieError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Malformed => "the session cookie is malformed",
            Self::BadSignature => "the session cookie's signature does not match",
        })
    }
}

fn mac(key: &[u8], purpose: &str, payload: &str) -> Result<Hmac<Sha256>, CookieError> {
    // HMAC takes keys of any length: the error does not happen, but is not unwrapped either.
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).map_err(|_| CookieError::BadSignature)?;
    mac.update(purpose.as_bytes());
    mac.update(b".");
    mac.update(payload.as_bytes());
    Ok(mac)
}

/// Seals `value` for `purpose`.
pub fn seal<T: Serialize>(key: &[u8], purpose: &str, value: &T) -> String {
    let json = serde_json::to_vec(value).unwrap_or_default();
    let payload = URL_SAFE_NO_PAD.encode(json);
    match mac(key, purpose, &payload) {
        Ok(mac) => format!(
            "{payload}.{}",
            URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
        ),
        // An empty value never opens: the browser is sent to sign in again.
        Err(_) => String::new(),
    }
}

/// Opens a sealed cookie value; the MAC is checked (in constant time) before anything is parsed.
pub fn open<T: DeserializeOwned>(
    key: &[u8],
    purpose: &str,
    sealed: &str,
) -> Result<T, CookieError> {
    if sealed.len() > MAX_COOKIE_LEN {
        return Err(CookieError::Malformed);
    }
    let (payload, tag) = sealed.split_once('.').ok_or(CookieError::Malformed)?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| CookieError::Malformed)?;
    mac(key, purpose, payload)?
        .verify_slice(&tag)
        .map_err(|_| CookieError::BadSignature)?;
    let json = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| CookieError::Malformed)?;
    serde_json::from_slice(&json).map_err(|_| CookieError::Malformed)
}

/// The value of cookie `name` in a `Cookie` request header (the first, if it is sent twice).
pub fn cookie_value<'h>(header: &'h str, name: &str) -> Option<&'h str> {
    cookie_values(header, name).next()
}

/// Every value of cookie `name` in a `Cookie` request header, in order (cookies of one name on
/// several paths are all sent).
pub fn cookie_values<'h, 'n>(
    header: &'h str,
    name: &'n str,
) -> impl Iterator<Item = &'h str> + use<'h, 'n> {
    header.split(';').filter_map(move |pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then(|| v.trim().trim_matches('"'))
    })
}

/// A `Set-Cookie` value: `Secure; HttpOnly; SameSite=Lax`, on every path, for `max_age_s`.
pub fn set_cookie(name: &str, value: &str, max_age_s: u64) -> String {
    format!("{name}={value}; Path=/; Max-Age={max_age_s}; Secure; HttpOnly; SameSite=Lax")
}

/// A `Set-Cookie` value that removes cookie `name`.
pub fn clear_cookie(name: &str) -> String {
    set_cookie(name, "", 0)
}
