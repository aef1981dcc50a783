//! Typed configurations of our proxy-wasm auth filter (`plugins/auth`, docs/auth.md) for the
//! IR: API keys, a JWT policy with inline or remote keys, or both. Builds the JSON the filter
//! parses, so callers (the operator, the local mode) never write it by hand.
//!
//! Pure; whether the filter accepts a configuration is the filter's business (a refused one is
//! NACKed by Envoy and the last good listener keeps serving).

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::ir::AuthFilter;

/// Where a JWT policy's verification keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Jwks {
    /// A JWKS document (`{"keys": [...]}`), given inline.
    Inline(Value),
    /// Fetched by the filter from `uri` through the Envoy cluster `cluster`.
    Remote { cluster: String, uri: String },
}

/// Bearer JWTs verified against `jwks`: `iss` must equal `issuer`, `aud` contain one of
/// `audiences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtPolicy {
    pub issuer: String,
    pub audiences: Vec<String>,
    pub jwks: Jwks,
}

impl JwtPolicy {
    fn to_json(&self) -> Value {
        let mut jwt = json!({ "issuer": self.issuer, "audiences": self.audiences });
        match &self.jwks {
            Jwks::Inline(doc) => jwt["jwks"] = doc.clone(),
            Jwks::Remote { cluster, uri } => {
                jwt["remote_jwks"] = json!({ "cluster": cluster, "uri": uri });
            }
        }
        jwt
    }
}

/// What the filter checks on every non-public route.
#[derive(Clone, PartialEq, Eq)]
pub enum AuthPolicy {
    /// Every request passes (development only).
    Unauthenticated,
    /// `Authorization: Bearer <key>` equal to one of the keys.
    ApiKeys(Vec<String>),
    /// A JWT verified by the policy, or (when not empty) one of the API keys.
    Jwt {
        policy: JwtPolicy,
        api_keys: Vec<String>,
    },
}

impl std::fmt::Debug for AuthPolicy {
    /// Never prints a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unauthenticated => f.write_str("Unauthenticated"),
            Self::ApiKeys(keys) => write!(f, "ApiKeys({} key(s))", keys.len()),
            Self::Jwt { policy, api_keys } => write!(
                f,
                "Jwt {{ issuer: {:?}, audiences: {:?}, api_keys: {} }}",
                policy.issuer,
                policy.audiences,
                api_keys.len()
            ),
        }
    }
}

impl AuthPolicy {
    /// The filter's JSON configuration (docs/auth.md, "Configuration").
    pub fn to_json(&self) -> Value {
        match self {
            Self::Unauthenticated => json!({ "mode": "unauthenticated" }),
            Self::ApiKeys(keys) => json!({ "mode": "api-key", "api_keys": keys }),
            Self::Jwt { policy, api_keys } => {
                let mut config = json!({ "mode": "jwt", "jwt": policy.to_json() });
                if !api_keys.is_empty() {
                    config["api_keys"] = json!(api_keys);
                }
                config
            }
        }
    }

    /// The filter, loaded from `wasm_path`, with this policy.
    pub fn filter(&self, wasm_path: impl Into<PathBuf>) -> AuthFilter {
        AuthFilter {
            wasm_path: wasm_path.into(),
            config_json: self.to_json().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys_match_the_existing_builder() {
        let policy = AuthPolicy::ApiKeys(vec!["k".repeat(16)]);
        assert_eq!(
            policy.filter("/f.wasm"),
            AuthFilter::api_key("/f.wasm", &[&"k".repeat(16)])
        );
    }

    #[test]
    fn jwt_inline_remote_and_keys() {
        let inline = AuthPolicy::Jwt {
            policy: JwtPolicy {
                issuer: "https://idp".into(),
                audiences: vec!["nsight-cloud".into()],
                jwks: Jwks::Inline(json!({"keys": []})),
            },
            api_keys: vec!["a-key-of-16-chars".into()],
        };
        assert_eq!(
            inline.to_json(),
            json!({"mode": "jwt", "jwt": {"issuer": "https://idp", "audiences": ["nsight-cloud"],
                   "jwks": {"keys": []}}, "api_keys": ["a-key-of-16-chars"]})
        );
        let remote = AuthPolicy::Jwt {
            policy: JwtPolicy {
                issuer: "https://idp".into(),
                audiences: vec!["a".into()],
                jwks: Jwks::Remote {
                    cluster: "idp".into(),
                    uri: "https://idp/jwks".into(),
                },
            },
            api_keys: vec![],
        };
        assert_eq!(
            remote.to_json()["jwt"]["remote_jwks"],
            json!({"cluster": "idp", "uri": "https://idp/jwks"})
        );
        assert!(remote.to_json().get("api_keys").is_none());
        assert!(!format!("{inline:?}").contains("a-key-of-16-chars"));
    }
}
