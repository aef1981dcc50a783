//! The decision: may this request pass? Pure function of the configuration, the keys fetched
//! so far (remote JWKS), the request's `Authorization` header and the time; no I/O, no clock
//! of its own, no panics.

use std::borrow::Cow;

use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::{
    config::{ApiKey, AuthConfig},
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
    if let Some(key) = api_key_match(api_keys, presented) {
        return Decision::Allow {
            identity: key.identity.clone(),
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

/// The key `presented` equals, if any. Every key is compared and the match is selected in
/// constant time, so the time taken does not reveal which one (or how many) matched.
fn api_key_match<'k>(api_keys: &'k [ApiKey], presented: &str) -> Option<&'k ApiKey> {
    let mut found = 0u32;
    let mut matched = subtle::Choice::from(0);
    for (i, key) in api_keys.iter().enumerate() {
        let eq = key.key.as_bytes().ct_eq(presented.as_bytes());
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        found = u32::conditional_select(&found, &index, eq);
        matched |= eq;
    }
    bool::from(matched)
        .then(|| usize::try_from(found).ok())
        .flatten()
        .and_then(|i| api_keys.get(i))
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
            api_keys: vec![ApiKey::new("another-key-0000000"), ApiKey::new(KEY)],
        }
    }

    #[test]
    fn a_tenant_key_forwards_its_tenant_and_a_plain_key_does_not() {
        let config = AuthConfig::parse(
            format!(
                r#"{{"mode":"api-key","api_keys":["{KEY}",
                    {{"key":"team-a-key-000000","tenant":"team-a"}},
                    {{"key":"team-b-key-000000","tenant":"team-b"}}]}}"#
            )
            .as_bytes(),
        )
        .unwrap_or(AuthConfig::Unauthenticated);
        let identity = |key: &str| match decide(&config, Some(&format!("Bearer {key}")), NOW) {
            Decision::Allow { identity } => identity,
            other => format!("{other:?}"),
        };
        assert_eq!(identity(KEY), "api-key");
        assert_eq!(identity("team-a-key-000000"), "api-key:team-a");
        assert_eq!(identity("team-b-key-000000"), "api-key:team-b");
        assert!(identity("team-c-key-000000").starts_with("Deny"));
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
