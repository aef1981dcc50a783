//! The filter's configuration as it arrives through Envoy (JSON in the plugin `configuration`).
//!
//! ```json
//! {"mode": "unauthenticated"}
//! {"mode": "api-key", "api_keys": ["<key>", {"key": "<key>", "tenant": "team-a"}]}
//! {"mode": "jwt", "jwt": {"issuer": "https://idp.example", "audiences": ["nsight"],
//!                         "jwks": {"keys": [...]}, "clock_skew_s": 60,
//!                         "identity_claim": "sub"},
//!                 "api_keys": ["<key>"]}            // optional: API keys accepted as well
//! ```
//! Owns parsing and validation only; the decision lives in `policy`, token checks in `jwt`.
//! A key bound to a tenant forwards the identity `api-key:<tenant>` (the routing filter lets
//! it reach that tenant only); any other key forwards `api-key`.

use serde::Deserialize;

use crate::{
    jwt::{JwtConfig, JwtConfigError, RawJwtConfig},
    oauth::config::{Oauth2Config, RawOauth2Config},
};

/// Shortest API key accepted: a shorter one is guessable.
pub const MIN_API_KEY_LEN: usize = 16;
/// The identity forwarded for an API key without a tenant.
pub const API_KEY_IDENTITY: &str = "api-key";
/// The prefix of the identity forwarded for an API key bound to a tenant (`api-key:<tenant>`).
pub const API_KEY_TENANT_PREFIX: &str = "api-key:";

/// An API key as written: the key alone, or with the tenant (namespace) it is bound to.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawApiKey {
    Plain(String),
    Bound(RawBoundKey),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBoundKey {
    key: String,
    #[serde(default)]
    tenant: Option<String>,
}

/// An accepted API key and the identity forwarded when it is presented.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub key: String,
    /// `api-key`, or `api-key:<tenant>` for a key bound to a tenant.
    pub identity: String,
}

impl ApiKey {
    /// A key not bound to a tenant.
    pub fn new(key: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            identity: API_KEY_IDENTITY.into(),
        }
    }

    /// The tenant this key is bound to, if any.
    pub fn tenant(&self) -> Option<&str> {
        self.identity.strip_prefix(API_KEY_TENANT_PREFIX)
    }
}

impl std::fmt::Debug for ApiKey {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKey({})", self.identity)
    }
}

/// Whether `name` is a Kubernetes namespace name (RFC 1123 label: 1-63 of `a-z0-9-`, starting
/// and ending with a letter or digit).
pub fn is_namespace_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// The configuration as written; validated into [`AuthConfig`].
#[derive(Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case", deny_unknown_fields)]
enum RawConfig {
    Unauthenticated,
    ApiKey {
        api_keys: Vec<RawApiKey>,
    },
    Jwt {
        jwt: RawJwtConfig,
        #[serde(default)]
        api_keys: Vec<RawApiKey>,
    },
    Oauth2 {
        oauth2: RawOauth2Config,
        #[serde(default)]
        api_keys: Vec<RawApiKey>,
    },
}

/// How the filter authenticates a request.
#[derive(Clone)]
pub enum AuthConfig {
    /// Every request passes. For development only.
    Unauthenticated,
    /// `Authorization: Bearer <key>` must equal one of the keys (never empty).
    ApiKey { api_keys: Vec<ApiKey> },
    /// `Authorization: Bearer <jwt>` must verify against `jwt`; or, when `api_keys` is not
    /// empty, equal one of those keys.
    Jwt {
        jwt: Box<JwtConfig>,
        api_keys: Vec<ApiKey>,
    },
    /// Browsers sign in at the issuer (code flow) and hold a session cookie; bearer tokens
    /// are verified against the issuer's JWKS (found by discovery); API keys, when listed,
    /// are accepted too. See `oauth`.
    Oauth2 {
        oauth2: Box<Oauth2Config>,
        api_keys: Vec<ApiKey>,
    },
}

impl AuthConfig {
    /// The API keys accepted (beside a JWT or OAuth2 policy, or alone); none when unauthenticated.
    pub fn api_keys(&self) -> &[ApiKey] {
        match self {
            Self::Unauthenticated => &[],
            Self::ApiKey { api_keys }
            | Self::Jwt { api_keys, .. }
            | Self::Oauth2 { api_keys, .. } => api_keys,
        }
    }
}

impl std::fmt::Debug for AuthConfig {
    /// Never prints a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unauthenticated => f.write_str("Unauthenticated"),
            Self::ApiKey { api_keys } => write!(f, "ApiKey {{ {} key(s) }}", api_keys.len()),
            Self::Jwt { jwt, api_keys } => {
                write!(f, "{jwt:?}")?;
                if !api_keys.is_empty() {
                    write!(f, " or ApiKey {{ {} key(s) }}", api_keys.len())?;
                }
                Ok(())
            }
            Self::Oauth2 { oauth2, api_keys } => {
                write!(f, "{oauth2:?}")?;
                if !api_keys.is_empty() {
                    write!(f, " or ApiKey {{ {} key(s) }}", api_keys.len())?;
                }
                Ok(())
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The configuration is not valid JSON of the documented shape.
    Parse(String),
    /// API-key mode with no key.
    NoApiKey,
    /// A key shorter than [`MIN_API_KEY_LEN`]; the index says which.
    ApiKeyTooShort(usize),
    /// A key's `tenant` is not a namespace name; the index says which.
    ApiKeyTenant(usize),
    /// An entry of `api_keys` is neither a string nor `{"key": .., "tenant": ..}`.
    ApiKeyShape(usize),
    /// The `jwt` member was refused.
    Jwt(JwtConfigError),
    /// The `oauth2` member was refused.
    Oauth2(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Parse(e) => write!(f, "auth filter configuration is not valid: {e}"),
            Self::NoApiKey => f.write_str("api-key mode needs at least one key in `api_keys`"),
            Self::ApiKeyTooShort(i) => write!(
                f,
                "api key #{i} is shorter than {MIN_API_KEY_LEN} characters; use a random key"
            ),
            Self::ApiKeyTenant(i) => write!(
                f,
                "api key #{i}: `tenant` must be a Kubernetes namespace name (1-63 of a-z, 0-9 \
                 and -)"
            ),
            Self::ApiKeyShape(i) => write!(
                f,
                "api key #{i} must be a string or {{\"key\": \"...\", \"tenant\": \"<namespace>\"}} \
                 (no other fields)"
            ),
            Self::Jwt(e) => write!(f, "jwt configuration is not valid: {e}"),
            Self::Oauth2(e) => write!(f, "oauth2 configuration is not valid: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {}

fn check_api_keys(raw: Vec<RawApiKey>) -> Result<Vec<ApiKey>, ConfigError> {
    raw.into_iter()
        .enumerate()
        .map(|(i, k)| {
            let (key, tenant) = match k {
                RawApiKey::Plain(key) => (key, None),
                RawApiKey::Bound(RawBoundKey { key, tenant }) => (key, tenant),
            };
            if key.len() < MIN_API_KEY_LEN {
                return Err(ConfigError::ApiKeyTooShort(i));
            }
            let identity = match tenant {
                None => API_KEY_IDENTITY.to_owned(),
                Some(t) if is_namespace_name(&t) => format!("{API_KEY_TENANT_PREFIX}{t}"),
                Some(_) => return Err(ConfigError::ApiKeyTenant(i)),
            };
            Ok(ApiKey { key, identity })
        })
        .collect()
}

/// Which entry of `api_keys` has neither shape (serde's untagged error does not say).
fn api_key_shape_error(bytes: &[u8]) -> Option<ConfigError> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let keys = v.get("api_keys")?.as_array()?;
    keys.iter()
        .position(|k| serde_json::from_value::<RawApiKey>(k.clone()).is_err())
        .map(ConfigError::ApiKeyShape)
}

impl AuthConfig {
    /// Parses and validates a configuration. An empty configuration means unauthenticated.
    pub fn parse(bytes: &[u8]) -> Result<Self, ConfigError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::Unauthenticated);
        }
        let raw: RawConfig = serde_json::from_slice(bytes).map_err(|e| {
            api_key_shape_error(bytes).unwrap_or_else(|| ConfigError::Parse(e.to_string()))
        })?;
        match raw {
            RawConfig::Unauthenticated => Ok(Self::Unauthenticated),
            RawConfig::ApiKey { api_keys } => {
                if api_keys.is_empty() {
                    return Err(ConfigError::NoApiKey);
                }
                let api_keys = check_api_keys(api_keys)?;
                Ok(Self::ApiKey { api_keys })
            }
            RawConfig::Jwt { jwt, api_keys } => {
                let api_keys = check_api_keys(api_keys)?;
                let jwt = JwtConfig::from_raw(jwt).map_err(ConfigError::Jwt)?;
                Ok(Self::Jwt {
                    jwt: Box::new(jwt),
                    api_keys,
                })
            }
            RawConfig::Oauth2 { oauth2, api_keys } => {
                let api_keys = check_api_keys(api_keys)?;
                let oauth2 = Oauth2Config::from_raw(oauth2).map_err(ConfigError::Oauth2)?;
                Ok(Self::Oauth2 {
                    oauth2: Box::new(oauth2),
                    api_keys,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_is_unauthenticated() {
        assert!(matches!(
            AuthConfig::parse(b" \n"),
            Ok(AuthConfig::Unauthenticated)
        ));
    }

    #[test]
    fn api_key_config_parses() {
        let c = AuthConfig::parse(br#"{"mode":"api-key","api_keys":["0123456789abcdef"]}"#);
        assert!(
            matches!(&c, Ok(AuthConfig::ApiKey { api_keys }) if api_keys == &[ApiKey::new("0123456789abcdef")]),
            "{c:?}"
        );
    }

    #[test]
    #[allow(clippy::panic, reason = "tests")]
    fn keys_with_tenants_and_plain_keys_mix() {
        let c = AuthConfig::parse(
            br#"{"mode":"api-key","api_keys":["0123456789abcdef",
                {"key":"team-a-key-000000"},
                {"key":"team-b-key-000000","tenant":"team-b"}]}"#,
        );
        let Ok(AuthConfig::ApiKey { api_keys }) = c else {
            panic!("{c:?}");
        };
        let ids: Vec<&str> = api_keys.iter().map(|k| k.identity.as_str()).collect();
        assert_eq!(ids, ["api-key", "api-key", "api-key:team-b"]);
        assert_eq!(api_keys[2].tenant(), Some("team-b"));
        assert_eq!(api_keys[0].tenant(), None);
    }

    #[test]
    fn bad_tenant_keys_are_refused_with_their_index() {
        for (json, want) in [
            (
                r#"{"mode":"api-key","api_keys":["0123456789abcdef",{"key":"0123456789abcdef","tenant":"Team_A"}]}"#,
                ConfigError::ApiKeyTenant(1),
            ),
            (
                r#"{"mode":"api-key","api_keys":[{"key":"0123456789abcdef","tenant":"a","x":1}]}"#,
                ConfigError::ApiKeyShape(0),
            ),
            (
                r#"{"mode":"api-key","api_keys":["0123456789abcdef",7]}"#,
                ConfigError::ApiKeyShape(1),
            ),
            (
                r#"{"mode":"api-key","api_keys":[{"key":"short","tenant":"a"}]}"#,
                ConfigError::ApiKeyTooShort(0),
            ),
        ] {
            let err = AuthConfig::parse(json.as_bytes()).err();
            assert_eq!(err.as_ref(), Some(&want), "{json}");
            let text = want.to_string();
            assert!(!text.contains("0123456789abcdef"), "{text}");
        }
    }

    #[test]
    fn refuses_unknown_mode_fields_and_short_keys() {
        assert!(matches!(
            AuthConfig::parse(br#"{"mode":"magic"}"#),
            Err(ConfigError::Parse(_))
        ));
        assert!(matches!(
            AuthConfig::parse(br#"{"mode":"api-key","api_keys":["0123456789abcdef"],"x":1}"#),
            Err(ConfigError::Parse(_))
        ));
        assert_eq!(
            AuthConfig::parse(br#"{"mode":"api-key","api_keys":[]}"#).err(),
            Some(ConfigError::NoApiKey)
        );
        assert_eq!(
            AuthConfig::parse(br#"{"mode":"api-key","api_keys":["0123456789abcdef","short"]}"#)
                .err(),
            Some(ConfigError::ApiKeyTooShort(1))
        );
    }

    #[test]
    fn debug_never_shows_keys() {
        let c = AuthConfig::ApiKey {
            api_keys: vec![ApiKey::new("secret-secret-secret")],
        };
        assert!(!format!("{c:?}").contains("secret"));
    }
}
