//! JWT verification: is this bearer token signed by a trusted key, for us, and valid now?
//! A pure function of the configuration, the token and the time (given, never read here).
//!
//! ```text
//! token ──header (unverified)──> alg allowed? kid known? ──key──> signature (jsonwebtoken,
//!        RustCrypto) ──claims (verified)──> exp / nbf (± skew) ──> iss ──> aud ──> identity
//! ```
//! The identity is `sub`, or the configured `identity_claim` (a dotted path to a nested claim;
//! a list of strings becomes a comma-separated list, see [`identity_from`]).
//! Nothing from the payload is looked at before the signature verifies. A token that verified
//! is remembered (`verified`: by digest, with its dates re-checked on every use) so the next
//! request with it skips the signature check. Errors are written for the person holding the
//! token and never contain key material or the token.

use std::collections::BTreeSet;

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use crate::{
    jwks::{alg_name, parse_jwks, JwksError, VerifyKey},
    remote::{RawRemoteJwks, RemoteJwks},
};

pub mod verified;

/// Largest clock skew that may be configured, in seconds.
pub const MAX_CLOCK_SKEW_S: u64 = 300;
/// Clock skew when the configuration gives none, in seconds.
pub const DEFAULT_CLOCK_SKEW_S: u64 = 60;
/// Longest `sub` forwarded as the identity header.
pub const MAX_SUBJECT_LEN: usize = 256;
/// Most values of a list claim forwarded as the identity.
pub const MAX_IDENTITY_VALUES: usize = 64;
/// Longest `identity_claim` path.
pub const MAX_CLAIM_PATH_LEN: usize = 128;

/// The `jwt` member of the filter configuration, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawJwtConfig {
    issuer: String,
    audiences: Vec<String>,
    /// Inline keys; exactly one of `jwks` and `remote_jwks`.
    jwks: Option<serde_json::Value>,
    remote_jwks: Option<RawRemoteJwks>,
    #[serde(default = "default_skew")]
    clock_skew_s: u64,
    #[serde(default)]
    identity_claim: Option<String>,
}

fn default_skew() -> u64 {
    DEFAULT_CLOCK_SKEW_S
}

/// A validated JWT policy. Invariants: issuer and audiences non-empty, skew at most
/// [`MAX_CLOCK_SKEW_S`], inline keys as `jwks` promises (at least one).
#[derive(Clone)]
pub struct JwtConfig {
    pub issuer: String,
    pub audiences: BTreeSet<String>,
    pub keys: KeySource,
    pub clock_skew_s: u64,
    /// The claim forwarded as the identity, as a path of member names (`None`: `sub`).
    pub identity_claim: Option<ClaimPath>,
}

/// A claim named by a dotted path (`namespace`, `realm_access.roles`); each segment non-empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimPath(Vec<String>);

impl ClaimPath {
    /// Parses `a.b.c`; `None` for an empty path, an empty segment or one longer than
    /// [`MAX_CLAIM_PATH_LEN`].
    pub fn parse(path: &str) -> Option<Self> {
        if path.is_empty() || path.len() > MAX_CLAIM_PATH_LEN {
            return None;
        }
        let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
        segments
            .iter()
            .all(|s| !s.is_empty())
            .then_some(Self(segments))
    }

    /// The path as written.
    pub fn dotted(&self) -> String {
        self.0.join(".")
    }

    /// `None` for `sub` (the default identity), else the path.
    pub fn parse_option(path: Option<&str>) -> Result<Option<Self>, String> {
        match path {
            None | Some("sub") => Ok(None),
            Some(p) => Self::parse(p).map(Some).ok_or_else(|| {
                format!(
                    "`identity_claim` must be a claim name or a dotted path to a nested claim \
                     (e.g. `namespace`, `realm_access.roles`), at most {MAX_CLAIM_PATH_LEN} \
                     characters"
                )
            }),
        }
    }
}

/// Where the trusted keys come from.
#[derive(Clone, Debug)]
pub enum KeySource {
    /// Given in the configuration.
    Inline(Vec<VerifyKey>),
    /// Fetched from the issuer's `jwks_uri` by the glue (see `remote`).
    Remote(RemoteJwks),
}

impl std::fmt::Debug for JwtConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Jwt {{ issuer: {:?}, audiences: {:?}, keys: {:?}, clock_skew_s: {}, identity: {} }}",
            self.issuer,
            self.audiences,
            self.keys,
            self.clock_skew_s,
            self.identity_claim
                .as_ref()
                .map_or_else(|| "sub".to_owned(), ClaimPath::dotted)
        )
    }
}

/// Why a `jwt` configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtConfigError {
    NoIssuer,
    NoAudience,
    ClockSkewTooLarge(u64),
    Jwks(JwksError),
    /// Both or neither of `jwks` and `remote_jwks`.
    KeySource,
    Remote(String),
    IdentityClaim(String),
}

impl std::fmt::Display for JwtConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoIssuer => f.write_str("jwt mode needs a non-empty `issuer`"),
            Self::NoAudience => {
                f.write_str("jwt mode needs at least one non-empty audience in `audiences`")
            }
            Self::ClockSkewTooLarge(s) => write!(
                f,
                "`clock_skew_s` is {s}; at most {MAX_CLOCK_SKEW_S} seconds are accepted"
            ),
            Self::Jwks(e) => e.fmt(f),
            Self::KeySource => f.write_str(
                "jwt mode needs exactly one of `jwks` (inline keys) and `remote_jwks` (the \
                 issuer's jwks_uri)",
            ),
            Self::Remote(e) | Self::IdentityClaim(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for JwtConfigError {}

impl JwtConfig {
    pub(crate) fn from_raw(raw: RawJwtConfig) -> Result<Self, JwtConfigError> {
        if raw.issuer.is_empty() {
            return Err(JwtConfigError::NoIssuer);
        }
        if raw.audiences.is_empty() || raw.audiences.iter().any(String::is_empty) {
            return Err(JwtConfigError::NoAudience);
        }
        if raw.clock_skew_s > MAX_CLOCK_SKEW_S {
            return Err(JwtConfigError::ClockSkewTooLarge(raw.clock_skew_s));
        }
        let keys = match (raw.jwks, raw.remote_jwks) {
            (Some(jwks), None) => {
                KeySource::Inline(parse_jwks(&jwks).map_err(JwtConfigError::Jwks)?)
            }
            (None, Some(remote)) => {
                KeySource::Remote(RemoteJwks::from_raw(remote).map_err(JwtConfigError::Remote)?)
            }
            _ => return Err(JwtConfigError::KeySource),
        };
        let identity_claim = ClaimPath::parse_option(raw.identity_claim.as_deref())
            .map_err(JwtConfigError::IdentityClaim)?;
        Ok(Self {
            issuer: raw.issuer,
            audiences: raw.audiences.into_iter().collect(),
            keys,
            clock_skew_s: raw.clock_skew_s,
            identity_claim,
        })
    }

    /// Verifies `token` at `now` (seconds since the Unix epoch) against the inline keys; the
    /// token's identity (`sub` or the configured claim) on success. With a remote JWKS use [`JwtConfig::verify_with`].
    pub fn verify(&self, token: &str, now: u64) -> Result<String, TokenError> {
        match &self.keys {
            KeySource::Inline(keys) => self.verify_with(keys, token, now),
            KeySource::Remote(_) => Err(TokenError::UnknownKid),
        }
    }

    /// Verifies `token` at `now` against `keys`; the token's identity on success.
    pub fn verify_with(
        &self,
        keys: &[VerifyKey],
        token: &str,
        now: u64,
    ) -> Result<String, TokenError> {
        let header = unverified_header(token)?;
        let alg = accepted_alg(&header.alg)?;
        if header.crit.is_some() {
            return Err(TokenError::CriticalHeader);
        }
        let key = key_for(keys, header.kid.as_deref())?;
        if key.alg != alg {
            return Err(TokenError::AlgorithmMismatch {
                token: alg_name(alg),
                key: alg_name(key.alg),
            });
        }
        let cache_key = verified::cache_key(
            token,
            &key.fingerprint,
            &self.issuer,
            &self.audiences,
            self.clock_skew_s,
            self.identity_claim.as_ref().map(|c| c.0.as_slice()),
        );
        if let Some(sub) = verified::lookup(&cache_key, now, self.clock_skew_s) {
            return Ok(sub);
        }
        let mut validation = Validation::new(alg);
        // Claims are checked below with our clock and our messages; jsonwebtoken checks only the
        // header's algorithm and the signature.
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let data =
            jsonwebtoken::decode::<Claims>(token, &key.key, &validation).map_err(|e| {
                match e.kind() {
                    jsonwebtoken::errors::ErrorKind::InvalidSignature => TokenError::BadSignature,
                    _ => TokenError::Malformed,
                }
            })?;
        let sub = self.check_claims(&data.claims, now)?;
        // check_claims accepted both dates; they parse again the same way.
        if let (Ok(Some(exp)), Ok(nbf)) = (
            numeric_date(data.claims.exp.as_ref(), "exp"),
            numeric_date(data.claims.nbf.as_ref(), "nbf"),
        ) {
            let verdict = verified::Verdict {
                sub: sub.clone(),
                exp,
                nbf,
            };
            verified::remember(cache_key, verdict, now, self.clock_skew_s);
        }
        Ok(sub)
    }

    fn check_claims(&self, claims: &Claims, now: u64) -> Result<String, TokenError> {
        let exp = numeric_date(claims.exp.as_ref(), "exp")?.ok_or(TokenError::NoExpiry)?;
        let skew = self.clock_skew_s;
        if now > exp.saturating_add(skew) {
            return Err(TokenError::Expired { ago: now - exp });
        }
        if let Some(nbf) = numeric_date(claims.nbf.as_ref(), "nbf")? {
            if nbf > now.saturating_add(skew) {
                return Err(TokenError::NotYetValid { r#in: nbf - now });
            }
        }
        if claims.iss.as_deref() != Some(self.issuer.as_str()) {
            return Err(TokenError::WrongIssuer {
                expected: self.issuer.clone(),
            });
        }
        let aud_ok = match &claims.aud {
            Some(Audience::One(a)) => self.audiences.contains(a),
            Some(Audience::Many(all)) => all.iter().any(|a| self.audiences.contains(a)),
            None => false,
        };
        if !aud_ok {
            return Err(TokenError::WrongAudience {
                expected: self.audiences.iter().cloned().collect(),
            });
        }
        let Some(path) = &self.identity_claim else {
            let sub = claims.sub.as_deref().ok_or(TokenError::NoSubject)?;
            if !identity_value_ok(sub) {
                return Err(TokenError::BadSubject);
            }
            return Ok(sub.to_owned());
        };
        let mut segments = path.0.iter();
        let first = segments.next().map(String::as_str).unwrap_or_default();
        let sub_value = claims.sub.clone().map(serde_json::Value::String);
        let root = if first == "sub" {
            sub_value.as_ref()
        } else {
            claims.other.get(first)
        };
        let value = segments.try_fold(root, |v, name| Some(v?.get(name)));
        let value = value
            .flatten()
            .ok_or_else(|| TokenError::NoIdentityClaim(path.dotted()))?;
        identity_from(value).ok_or_else(|| TokenError::BadIdentityClaim(path.dotted()))
    }
}

/// Whether one identity value may be forwarded: 1 to [`MAX_SUBJECT_LEN`] printable ASCII
/// characters, no comma (the list separator), and none of the identities this filter forwards
/// for API keys or unauthenticated requests (`api-key`, `api-key:<tenant>`, `anonymous`), which
/// a token must not be able to claim.
pub fn identity_value_ok(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= MAX_SUBJECT_LEN
        && v.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b',')
        && v != crate::config::API_KEY_IDENTITY
        && !v.starts_with(crate::config::API_KEY_TENANT_PREFIX)
        && v != "anonymous"
}

/// The identity a claim's value gives: a string or a number as it is; a list of them as the
/// values that pass [`identity_value_ok`], comma-separated (at most [`MAX_IDENTITY_VALUES`]);
/// `None` when nothing usable remains (an object, an empty list, a refused string).
pub fn identity_from(value: &serde_json::Value) -> Option<String> {
    let one = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let values: Vec<String> = match value {
        serde_json::Value::Array(items) => items
            .iter()
            .filter_map(one)
            .filter(|v| identity_value_ok(v))
            .take(MAX_IDENTITY_VALUES)
            .collect(),
        v => one(v)
            .filter(|v| identity_value_ok(v))
            .into_iter()
            .collect(),
    };
    (!values.is_empty()).then(|| values.join(","))
}

fn key_for<'k>(keys: &'k [VerifyKey], kid: Option<&str>) -> Result<&'k VerifyKey, TokenError> {
    match (kid, keys) {
        (Some(kid), keys) => keys
            .iter()
            .find(|k| k.kid.as_deref() == Some(kid))
            .ok_or(TokenError::UnknownKid),
        (None, [only]) => Ok(only),
        (None, _) => Err(TokenError::MissingKid),
    }
}

/// Why a token was refused. `Display` is the `error_description` the client sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Not three base64url parts with a JSON header and payload.
    Malformed,
    Unsigned,
    Symmetric(String),
    UnsupportedAlg(String),
    CriticalHeader,
    UnknownKid,
    MissingKid,
    AlgorithmMismatch {
        token: &'static str,
        key: &'static str,
    },
    BadSignature,
    NoExpiry,
    /// `exp` or `nbf` is not a number.
    BadDate(&'static str),
    Expired {
        ago: u64,
    },
    NotYetValid {
        r#in: u64,
    },
    WrongIssuer {
        expected: String,
    },
    WrongAudience {
        expected: Vec<String>,
    },
    NoSubject,
    BadSubject,
    /// The configured identity claim is missing (its path).
    NoIdentityClaim(String),
    /// The configured identity claim has no usable value (its path).
    BadIdentityClaim(String),
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed => f.write_str("the token is not a well-formed JWT"),
            Self::Unsigned => f.write_str("unsigned tokens (alg none) are not accepted"),
            Self::Symmetric(alg) => write!(
                f,
                "symmetric algorithm {alg} is not accepted; tokens must be signed with RS256, \
                 ES256 or EdDSA"
            ),
            Self::UnsupportedAlg(alg) => write!(
                f,
                "algorithm {alg} is not accepted; tokens must be signed with RS256, ES256 or \
                 EdDSA"
            ),
            Self::CriticalHeader => f.write_str(
                "the token has critical header extensions (crit) the gateway does not implement",
            ),
            Self::UnknownKid => f.write_str(
                "the token's signing key (kid) is not trusted by the gateway; get a token from \
                 the configured issuer",
            ),
            Self::MissingKid => {
                f.write_str("the token has no kid header and the gateway trusts several keys")
            }
            Self::AlgorithmMismatch { token, key } => {
                write!(f, "the token says {token} but its key (kid) is a {key} key")
            }
            Self::BadSignature => f.write_str(
                "the token's signature does not verify; it was altered or signed by another key",
            ),
            Self::NoExpiry => f.write_str("the token has no expiry (exp claim); it is required"),
            Self::BadDate(claim) => write!(f, "the token's {claim} claim is not a number"),
            Self::Expired { ago } => write!(
                f,
                "the token expired {ago} s ago; get a new token from the issuer"
            ),
            Self::NotYetValid { r#in } => write!(
                f,
                "the token is not valid yet (nbf is {in} s in the future); check the clocks",
                in = r#in
            ),
            Self::WrongIssuer { expected } => write!(
                f,
                "the token was not issued by the expected issuer ({expected})"
            ),
            Self::WrongAudience { expected } => write!(
                f,
                "the token is not meant for this gateway: its audience (aud) must include one \
                 of: {}",
                expected.join(", ")
            ),
            Self::NoSubject => f.write_str("the token has no subject (sub claim)"),
            Self::BadSubject => write!(
                f,
                "the token's subject (sub) must be 1 to {MAX_SUBJECT_LEN} printable ASCII \
                 characters without a comma"
            ),
            Self::NoIdentityClaim(path) => write!(
                f,
                "the token has no `{path}` claim, which the gateway uses as the identity; ask \
                 the issuer to include it"
            ),
            Self::BadIdentityClaim(path) => write!(
                f,
                "the token's `{path}` claim has no usable identity: it must be a string, a \
                 number or a list of them, each 1 to {MAX_SUBJECT_LEN} printable ASCII \
                 characters without a comma"
            ),
        }
    }
}

impl std::error::Error for TokenError {}

/// The JOSE header members we act on, read before the signature is checked.
#[derive(Deserialize)]
struct UnverifiedHeader {
    alg: String,
    kid: Option<String>,
    crit: Option<serde_json::Value>,
}

fn unverified_header(token: &str) -> Result<UnverifiedHeader, TokenError> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| TokenError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed)
}

fn accepted_alg(alg: &str) -> Result<Algorithm, TokenError> {
    match alg {
        "RS256" => Ok(Algorithm::RS256),
        "ES256" => Ok(Algorithm::ES256),
        "EdDSA" => Ok(Algorithm::EdDSA),
        a if a.eq_ignore_ascii_case("none") => Err(TokenError::Unsigned),
        "HS256" | "HS384" | "HS512" => Err(TokenError::Symmetric(alg.to_owned())),
        other => Err(TokenError::UnsupportedAlg(printable(other))),
    }
}

/// `s` cut to 16 printable ASCII characters, for echoing a token's value in a message.
fn printable(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(16)
        .collect()
}

#[derive(Deserialize)]
struct Claims {
    exp: Option<serde_json::Value>,
    nbf: Option<serde_json::Value>,
    iss: Option<String>,
    aud: Option<Audience>,
    sub: Option<String>,
    /// Every other claim (looked at only for a configured `identity_claim`).
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

/// A NumericDate (RFC 7519: seconds, possibly fractional); negative counts as 0.
fn numeric_date(
    value: Option<&serde_json::Value>,
    claim: &'static str,
) -> Result<Option<u64>, TokenError> {
    let Some(value) = value else {
        return Ok(None);
    };
    if let Some(n) = value.as_u64() {
        return Ok(Some(n));
    }
    match value.as_f64() {
        // `as` saturates: finite, clamped at 0, so the result is the date in whole seconds.
        Some(f) if f.is_finite() => Ok(Some(f.max(0.0) as u64)),
        _ => Err(TokenError::BadDate(claim)),
    }
}
