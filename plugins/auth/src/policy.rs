//! The decision: may this request pass? Pure function of the configuration and the request's
//! `Authorization` header; no I/O, no clock, no panics.

use subtle::ConstantTimeEq;

use crate::config::AuthConfig;

/// What the filter does with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward the request; `identity` names who was authenticated (for an upstream header).
    Allow { identity: &'static str },
    /// Answer 401 without forwarding; `reason` is safe to show the client (no secrets).
    Deny { reason: &'static str },
}

pub const CHALLENGE: &str = "Bearer realm=\"nsight-cloud\"";

/// Decides a request from its `Authorization` header value (if any).
pub fn decide(config: &AuthConfig, authorization: Option<&str>) -> Decision {
    match config {
        AuthConfig::Unauthenticated => Decision::Allow {
            identity: "anonymous",
        },
        AuthConfig::ApiKey { api_keys } => {
            let Some(value) = authorization else {
                return Decision::Deny {
                    reason: "missing Authorization header; send `Authorization: Bearer <api key>`",
                };
            };
            let Some(presented) = bearer_token(value) else {
                return Decision::Deny {
                    reason: "Authorization header must use the Bearer scheme",
                };
            };
            // Check every key so the time taken does not reveal which one (or how many) matched.
            let matched = api_keys.iter().fold(0u8, |acc, key| {
                acc | u8::from(bool::from(key.as_bytes().ct_eq(presented.as_bytes())))
            });
            if matched == 1 {
                Decision::Allow {
                    identity: "api-key",
                }
            } else {
                Decision::Deny {
                    reason: "invalid API key",
                }
            }
        }
    }
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

    fn api_key() -> AuthConfig {
        AuthConfig::ApiKey {
            api_keys: vec!["another-key-0000000".into(), KEY.into()],
        }
    }

    #[test]
    fn unauthenticated_allows_everything() {
        assert!(matches!(
            decide(&AuthConfig::Unauthenticated, None),
            Decision::Allow { .. }
        ));
    }

    #[test]
    fn api_key_allows_the_right_key_in_any_listed_position() {
        assert_eq!(
            decide(&api_key(), Some(&format!("Bearer {KEY}"))),
            Decision::Allow {
                identity: "api-key"
            }
        );
        assert!(matches!(
            decide(&api_key(), Some(&format!("bearer   {KEY} "))),
            Decision::Allow { .. }
        ));
    }

    #[test]
    fn api_key_denies_missing_wrong_scheme_wrong_key_and_prefixes() {
        let deny = |h: Option<&str>| matches!(decide(&api_key(), h), Decision::Deny { .. });
        assert!(deny(None));
        assert!(deny(Some(KEY)));
        assert!(deny(Some(&format!("Basic {KEY}"))));
        assert!(deny(Some("Bearer ")));
        assert!(deny(Some("Bearer 0123456789abcdef012"))); // one char short
        assert!(deny(Some(&format!("Bearer {KEY}4")))); // one char long
    }
}
