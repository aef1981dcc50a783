//! The decision: may this request pass? Pure function of the configuration, the keys fetched
//! so far (remote JWKS), the request's `Authorization` header and the time; no I/O, no clock
//! of its own, no panics.

use std::borrow::Cow;

use subtle::ConstantTimeEq;

use crate::{
    config::AuthConfig,
    jwks::VerifyKey,
    jwt::{KeySource, TokenError},
};

/// Largest `Authorization` header value looked at, in bytes; a larger one is refused unread.
pub const MAX_AUTHORIZATION_LEN: usize = 8 * 1024;

/// What the filter does with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward the request; `identity` names who was authenticated (for an upstream header).
    Allow { identity: String },
    /// Answer 401 without forwarding.
    Deny(Denial),
    /// The token names a `kid` the fetched JWKS lacks: the issuer may have rotated its keys.
    /// The glue may fetch the JWKS again (rate-limited) and decide again; otherwise deny.
    RefreshKeys(Denial),
    /// The issuer's keys were never fetched yet: answer 503 (retry shortly), never forward.
    Unavailable { reason: Cow<'static, str> },
}

/// A refusal. `reason` is safe to show the client: no secrets, no key material, no token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The RFC 6750 error code; `None` when the request carried no credentials at all.
    pub error: Option<BearerError>,
    pub reason: Cow<'static, str>,
}

/// RFC 6750 section 3.1 error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BearerError {
    /// The header is malformed (wrong scheme, too large).
    InvalidRequest,
    /// The token or key is not accepted.
    InvalidToken,
}

pub const CHALLENGE: &str = "Bearer realm=\"nsight-cloud\"";

fn deny(error: Option<BearerError>, reason: impl Into<Cow<'static, str>>) -> Decision {
    Decision::Deny(Denial {
        error,
        reason: reason.into(),
    })
}

impl Denial {
    /// The `WWW-Authenticate` value: the bare challenge when no credentials were sent (RFC
    /// 6750 section 3.1), else with `error` and a quoted-string-safe `error_description`.
    pub fn challenge(&self) -> String {
        let code = match self.error {
            None => return CHALLENGE.to_owned(),
            Some(BearerError::InvalidRequest) => "invalid_request",
            Some(BearerError::InvalidToken) => "invalid_token",
        };
        let description: String = self
            .reason
            .chars()
            .map(|c| match c {
                '"' | '\\' => '\'',
                c if (' '..='~').contains(&c) => c,
                _ => ' ',
            })
            .collect();
        format!("{CHALLENGE}, error=\"{code}\", error_description=\"{description}\"")
    }
}

/// Decides a request from its `Authorization` header value (if any) at `now` (seconds since
/// the Unix epoch, from the host), for configurations with inline keys.
pub fn decide(config: &AuthConfig, authorization: Option<&str>, now: u64) -> Decision {
    decide_with(config, None, authorization, now)
}

/// [`decide`] with the keys fetched from the issuer's `jwks_uri` so far (`None`: none yet);
/// `fetched` is ignored when the keys are inline.
pub fn decide_with(
    config: &AuthConfig,
    fetched: Option<&[VerifyKey]>,
    authorization: Option<&str>,
    now: u64,
) -> Decision {
    let (api_keys, jwt) = match config {
        AuthConfig::Unauthenticated => {
            return Decision::Allow {
                identity: "anonymous".into(),
            }
        }
        AuthConfig::ApiKey { api_keys } => (api_keys.as_slice(), None),
        AuthConfig::Jwt { jwt, api_keys } => (api_keys.as_slice(), Some(jwt)),
        // Bearer tokens are checked against the issuer's keys once discovery found them: the
        // glue then decides with `oauth::flow::bearer_config`; before that, nothing passes.
        AuthConfig::Oauth2 { .. } => {
            return Decision::Unavailable {
                reason: "the gateway has not loaded the issuer's OpenID configuration yet; \
                         retry in a few seconds"
                    .into(),
            }
        }
    };
    let Some(value) = authorization else {
        return deny(
            None,
            match jwt {
                None => "missing Authorization header; send `Authorization: Bearer <api key>`",
                Some(_) => "missing Authorization header; send `Authorization: Bearer <token>`",
            },
        );
    };
    if value.len() > MAX_AUTHORIZATION_LEN {
        return deny(
            Some(BearerError::InvalidRequest),
            format!("Authorization header is larger than {MAX_AUTHORIZATION_LEN} bytes"),
        );
    }
    let Some(presented) = bearer_token(value) else {
        return deny(
            Some(BearerError::InvalidRequest),
            "Authorization header must use the Bearer scheme",
        );
    };
    if api_key_matches(api_keys, presented) {
        return Decision::Allow {
            identity: "api-key".into(),
        };
    }
    match jwt {
        // API keys are accepted too and this is no JWT (a JWT has dots): it was meant as a key.
        Some(_) if !api_keys.is_empty() && !presented.contains('.') => {
            deny(Some(BearerError::InvalidToken), "invalid API key")
        }
        Some(jwt) => {
            let keys = match (&jwt.keys, fetched) {
                (KeySource::Inline(keys), _) => keys.as_slice(),
                (KeySource::Remote(_), Some(keys)) => keys,
                (KeySource::Remote(remote), None) => {
                    return Decision::Unavailable {
                        reason: format!(
                            "the gateway has not loaded the issuer's signing keys from {} yet; \
                             retry in a few seconds",
                            remote.uri
                        )
                        .into(),
                    }
                }
            };
            match jwt.verify_with(keys, presented, now) {
                Ok(sub) => Decision::Allow { identity: sub },
                Err(e @ TokenError::UnknownKid) if matches!(jwt.keys, KeySource::Remote(_)) => {
                    Decision::RefreshKeys(Denial {
                        error: Some(BearerError::InvalidToken),
                        reason: e.to_string().into(),
                    })
                }
                Err(e) => deny(Some(BearerError::InvalidToken), e.to_string()),
            }
        }
        None => deny(Some(BearerError::InvalidToken), "invalid API key"),
    }
}

/// Whether `presented` equals one of the keys. Every key is compared so the time taken does
/// not reveal which one (or how many) matched.
fn api_key_matches(api_keys: &[String], presented: &str) -> bool {
    let matched = api_keys.iter().fold(0u8, |acc, key| {
        acc | u8::from(bool::from(key.as_bytes().ct_eq(presented.as_bytes())))
    });
    matched == 1
}

/// The token of a `Bearer <token>` header value; the scheme is case-insensitive (RFC 7235).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123";
    const NOW: u64 = 1_800_000_000;

    fn api_key() -> AuthConfig {
        AuthConfig::ApiKey {
            api_keys: vec!["another-key-0000000".into(), KEY.into()],
        }
    }

    #[test]
    fn unauthenticated_allows_everything() {
        assert!(matches!(
            decide(&AuthConfig::Unauthenticated, None, NOW),
            Decision::Allow { .. }
        ));
    }

    #[test]
    fn api_key_allows_the_right_key_in_any_listed_position() {
        assert_eq!(
            decide(&api_key(), Some(&format!("Bearer {KEY}")), NOW),
            Decision::Allow {
                identity: "api-key".into()
            }
        );
        assert!(matches!(
            decide(&api_key(), Some(&format!("bearer   {KEY} ")), NOW),
            Decision::Allow { .. }
        ));
    }

    #[test]
    fn api_key_denies_missing_wrong_scheme_wrong_key_and_prefixes() {
        let deny = |h: Option<&str>| matches!(decide(&api_key(), h, NOW), Decision::Deny(_));
        assert!(deny(None));
        assert!(deny(Some(KEY)));
        assert!(deny(Some(&format!("Basic {KEY}"))));
        assert!(deny(Some("Bearer ")));
        assert!(deny(Some("Bearer 0123456789abcdef012"))); // one char short
        assert!(deny(Some(&format!("Bearer {KEY}4")))); // one char long
    }
}
