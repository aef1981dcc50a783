//! The filter's configuration as it arrives through Envoy (JSON in the plugin `configuration`).
//!
//! ```json
//! {"mode": "unauthenticated"}
//! {"mode": "api-key", "api_keys": ["<key>", "..."]}
//! ```
//! Owns parsing and validation only; the decision lives in `policy`.

use serde::Deserialize;

/// Shortest API key accepted: a shorter one is guessable.
pub const MIN_API_KEY_LEN: usize = 16;

/// How the filter authenticates a request.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AuthConfig {
    /// Every request passes. For development only.
    Unauthenticated,
    /// `Authorization: Bearer <key>` must equal one of the keys.
    ApiKey { api_keys: Vec<String> },
}

impl std::fmt::Debug for AuthConfig {
    /// Never prints a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unauthenticated => f.write_str("Unauthenticated"),
            Self::ApiKey { api_keys } => write!(f, "ApiKey {{ {} key(s) }}", api_keys.len()),
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
        }
    }
}

impl std::error::Error for ConfigError {}

impl AuthConfig {
    /// Parses and validates a configuration. An empty configuration means unauthenticated.
    pub fn parse(bytes: &[u8]) -> Result<Self, ConfigError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::Unauthenticated);
        }
        let config: Self =
            serde_json::from_slice(bytes).map_err(|e| ConfigError::Parse(e.to_string()))?;
        if let Self::ApiKey { api_keys } = &config {
            if api_keys.is_empty() {
                return Err(ConfigError::NoApiKey);
            }
            if let Some(i) = api_keys.iter().position(|k| k.len() < MIN_API_KEY_LEN) {
                return Err(ConfigError::ApiKeyTooShort(i));
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_is_unauthenticated() {
        assert_eq!(AuthConfig::parse(b" \n"), Ok(AuthConfig::Unauthenticated));
    }

    #[test]
    fn api_key_config_parses() {
        let c = AuthConfig::parse(br#"{"mode":"api-key","api_keys":["0123456789abcdef"]}"#);
        assert_eq!(
            c,
            Ok(AuthConfig::ApiKey {
                api_keys: vec!["0123456789abcdef".into()]
            })
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
            AuthConfig::parse(br#"{"mode":"api-key","api_keys":[]}"#),
            Err(ConfigError::NoApiKey)
        );
        assert_eq!(
            AuthConfig::parse(br#"{"mode":"api-key","api_keys":["0123456789abcdef","short"]}"#),
            Err(ConfigError::ApiKeyTooShort(1))
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
