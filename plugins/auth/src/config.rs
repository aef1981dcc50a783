//! The filter's configuration as it arrives through Envoy (JSON in the plugin `configuration`).
//!
//! ```json
//! {"mode": "unauthenticated"}
//! {"mode": "api-key", "api_keys": ["<key>", "..."]}
//! {"mode": "jwt", "jwt": {"issuer": "https://idp.example", "audiences": ["nsight"],
//!                         "jwks": {"keys": [...]}, "clock_skew_s": 60},
//!                 "api_keys": ["<key>"]}            // optional: API keys accepted as well
//! ```
//! Owns parsing and validation only; the decision lives in `policy`, token checks in `jwt`.

use serde::Deserialize;

use crate::{
    jwt::{JwtConfig, JwtConfigError, RawJwtConfig},
    oauth::config::{Oauth2Config, RawOauth2Config},
};

/// Shortest API key accepted: a shorter one is guessable.
pub const MIN_API_KEY_LEN: usize = 16;

/// The configuration as written; validated into [`AuthConfig`].
#[derive(Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case", deny_unknown_fields)]
enum RawConfig {
    Unauthenticated,
    ApiKey {
        api_keys: Vec<String>,
    },
    Jwt {
        jwt: RawJwtConfig,
        #[serde(default)]
        api_keys: Vec<String>,
    },
    Oauth2 {
        oauth2: RawOauth2Config,
        #[serde(default)]
        api_keys: Vec<String>,
    },
}

/// How the filter authenticates a request.
#[derive(Clone)]
pub enum AuthConfig {
    /// Every request passes. For development only.
    Unauthenticated,
    /// `Authorization: Bearer <key>` must equal one of the keys (never empty).
    ApiKey { api_keys: Vec<String> },
    /// `Authorization: Bearer <jwt>` must verify against `jwt`; or, when `api_keys` is not
    /// empty, equal one of those keys.
    Jwt {
        jwt: Box<JwtConfig>,
        api_keys: Vec<String>,
    },
    /// Browsers sign in at the issuer (code flow) and hold a session cookie; bearer tokens
    /// are verified against the issuer's JWKS (found by discovery); API keys, when listed,
    /// are accepted too. See `oauth`.
    Oauth2 {
        oauth2: Box<Oauth2Config>,
        api_keys: Vec<String>,
    },
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
            Self::Jwt(e) => write!(f, "jwt configuration is not valid: {e}"),
            Self::Oauth2(e) => write!(f, "oauth2 configuration is not valid: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {}

fn check_api_keys(api_keys: &[String]) -> Result<(), ConfigError> {
    match api_keys.iter().position(|k| k.len() < MIN_API_KEY_LEN) {
        Some(i) => Err(ConfigError::ApiKeyTooShort(i)),
        None => Ok(()),
    }
}

impl AuthConfig {
    /// Parses and validates a configuration. An empty configuration means unauthenticated.
    pub fn parse(bytes: &[u8]) -> Result<Self, ConfigError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::Unauthenticated);
        }
        let raw: RawConfig =
            serde_json::from_slice(bytes).map_err(|e| ConfigError::Parse(e.to_string()))?;
        match raw {
            RawConfig::Unauthenticated => Ok(Self::Unauthenticated),
            RawConfig::ApiKey { api_keys } => {
                if api_keys.is_empty() {
                    return Err(ConfigError::NoApiKey);
                }
                check_api_keys(&api_keys)?;
                Ok(Self::ApiKey { api_keys })
            }
            RawConfig::Jwt { jwt, api_keys } => {
                check_api_keys(&api_keys)?;
                let jwt = JwtConfig::from_raw(jwt).map_err(ConfigError::Jwt)?;
                Ok(Self::Jwt {
                    jwt: Box::new(jwt),
                    api_keys,
                })
            }
            RawConfig::Oauth2 { oauth2, api_keys } => {
                check_api_keys(&api_keys)?;
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
            matches!(&c, Ok(AuthConfig::ApiKey { api_keys }) if api_keys == &["0123456789abcdef"]),
            "{c:?}"
        );
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
            api_keys: vec!["secret-secret-secret".into()],
        };
        assert!(!format!("{c:?}").contains("secret"));
    }
}
