//! Typed configurations of our proxy-wasm auth filter (`plugins/auth`, docs/auth.md) for the
//! IR: API keys (each optionally bound to a tenant), a JWT policy with inline or remote keys,
//! OAuth2 (OIDC sign-in through an upstream cluster to the issuer), each with API keys beside.
//! Builds the JSON the filter parses, so callers (the operator, the local mode) never write it
//! by hand.
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
    /// The claim forwarded as the identity (`sub` when `None`); a dotted path reaches a nested
    /// claim (`realm_access.roles`), a list of strings is forwarded comma-separated.
    pub identity_claim: Option<String>,
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
        if let Some(claim) = &self.identity_claim {
            jwt["identity_claim"] = json!(claim);
        }
        jwt
    }
}

/// One API key; with a tenant it may reach only that tenant's namespace through the routing
/// filter (the auth filter forwards the identity `api-key:<tenant>`).
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub key: String,
    pub tenant: Option<String>,
}

impl ApiKey {
    /// A key not bound to a tenant.
    pub fn new(key: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            tenant: None,
        }
    }

    /// A key bound to the tenant (namespace) `tenant`.
    pub fn for_tenant(key: impl Into<String>, tenant: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            tenant: Some(tenant.into()),
        }
    }

    /// A plain string without a tenant (the filter's original form), else an object.
    fn to_json(&self) -> Value {
        match &self.tenant {
            None => json!(self.key),
            Some(tenant) => json!({ "key": self.key, "tenant": tenant }),
        }
    }
}

impl std::fmt::Debug for ApiKey {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey")
            .field("key", &"<redacted>")
            .field("tenant", &self.tenant)
            .finish()
    }
}

fn keys_json(keys: &[ApiKey]) -> Value {
    Value::Array(keys.iter().map(ApiKey::to_json).collect())
}

/// Whether `host` is a name (or IPv4 address) an issuer URL may carry for the filter's
/// upstream: letters, digits, `.` and `-`, not starting with `.` or `-`, at most 253 bytes (no
/// user info, no IPv6 literal). Shared by the operator and local mode.
pub fn is_issuer_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && !host.starts_with(['.', '-'])
}

/// OAuth2 / OpenID Connect sign-in (docs/auth.md, "OAuth2"): discovery, the token endpoint and
/// the JWKS are reached through the Envoy cluster `cluster` (HTTPS: an upstream with TLS).
#[derive(Clone, PartialEq, Eq)]
pub struct OAuth2Policy {
    pub issuer: String,
    pub cluster: String,
    pub client_id: String,
    /// From a Secret; never printed by `Debug`.
    pub client_secret: String,
    /// `https://<gateway host>/oauth2/callback`, registered at the identity provider.
    pub redirect_uri: String,
    /// Base64 of at least 32 random bytes (signs the session cookie); never printed.
    pub cookie_key: String,
    /// `aud` accepted in bearer tokens (the CLI's access tokens).
    pub audiences: Vec<String>,
    /// Requested at sign-in; must contain `openid`. Empty: the filter's default (`openid`).
    pub scopes: Vec<String>,
    /// As in [`JwtPolicy::identity_claim`].
    pub identity_claim: Option<String>,
    /// Whether the listener serves TLS; the filter refuses OAuth2 without it.
    pub listener_tls: bool,
}

impl std::fmt::Debug for OAuth2Policy {
    /// Never prints the client secret nor the cookie key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth2Policy")
            .field("issuer", &self.issuer)
            .field("cluster", &self.cluster)
            .field("client_id", &self.client_id)
            .field("redirect_uri", &self.redirect_uri)
            .field("audiences", &self.audiences)
            .field("listener_tls", &self.listener_tls)
            .finish_non_exhaustive()
    }
}

impl OAuth2Policy {
    fn to_json(&self) -> Value {
        let mut o = json!({
            "issuer": self.issuer,
            "cluster": self.cluster,
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "redirect_uri": self.redirect_uri,
            "cookie_key": self.cookie_key,
            "audiences": self.audiences,
            "listener_tls": self.listener_tls,
        });
        if !self.scopes.is_empty() {
            o["scopes"] = json!(self.scopes);
        }
        if let Some(claim) = &self.identity_claim {
            o["identity_claim"] = json!(claim);
        }
        o
    }
}

/// What the filter checks on every non-public route.
#[derive(Clone, PartialEq, Eq)]
pub enum AuthPolicy {
    /// Every request passes (development only).
    Unauthenticated,
    /// `Authorization: Bearer <key>` equal to one of the keys.
    ApiKeys(Vec<ApiKey>),
    /// A JWT verified by the policy, or (when not empty) one of the API keys.
    Jwt {
        policy: JwtPolicy,
        api_keys: Vec<ApiKey>,
    },
    /// A browser session from the OIDC code flow, a bearer JWT from the same issuer, or (when
    /// not empty) one of the API keys.
    OAuth2 {
        policy: OAuth2Policy,
        api_keys: Vec<ApiKey>,
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
            Self::OAuth2 { policy, api_keys } => {
                write!(f, "OAuth2 {{ {policy:?}, api_keys: {} }}", api_keys.len())
            }
        }
    }
}

impl AuthPolicy {
    /// The filter's JSON configuration (docs/auth.md, "Configuration").
    pub fn to_json(&self) -> Value {
        match self {
            Self::Unauthenticated => json!({ "mode": "unauthenticated" }),
            Self::ApiKeys(keys) => json!({ "mode": "api-key", "api_keys": keys_json(keys) }),
            Self::Jwt { policy, api_keys } => {
                let mut config = json!({ "mode": "jwt", "jwt": policy.to_json() });
                if !api_keys.is_empty() {
                    config["api_keys"] = keys_json(api_keys);
                }
                config
            }
            Self::OAuth2 { policy, api_keys } => {
                let mut config = json!({ "mode": "oauth2", "oauth2": policy.to_json() });
                if !api_keys.is_empty() {
                    config["api_keys"] = keys_json(api_keys);
                }
                config
            }
        }
    }

    /// The filter, loaded from `wasm_path`, with this policy.
    pub fn filter(&self, wasm_path: impl Into<PathBuf>) -> AuthFilter {
        AuthFilter {
            wasm_path: wasm_path.into(),
            lean_wasm_path: None,
            config_json: self.to_json().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn api_keys_match_the_existing_builder() {
        let policy = AuthPolicy::ApiKeys(vec![ApiKey::new("k".repeat(16))]);
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
                identity_claim: None,
            },
            api_keys: vec![ApiKey::new("a-key-of-16-chars")],
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
                identity_claim: Some("groups".into()),
            },
            api_keys: vec![],
        };
        assert_eq!(
            remote.to_json()["jwt"]["remote_jwks"],
            json!({"cluster": "idp", "uri": "https://idp/jwks"})
        );
        assert_eq!(remote.to_json()["jwt"]["identity_claim"], json!("groups"));
        assert!(remote.to_json().get("api_keys").is_none());
        assert!(!format!("{inline:?}").contains("a-key-of-16-chars"));
    }

    #[test]
    fn tenant_keys_are_objects_and_plain_keys_stay_strings() {
        let policy = AuthPolicy::ApiKeys(vec![
            ApiKey::new("plain-key-0000000"),
            ApiKey::for_tenant("tenant-key-000000", "team-a"),
        ]);
        assert_eq!(
            policy.to_json()["api_keys"],
            json!(["plain-key-0000000", {"key": "tenant-key-000000", "tenant": "team-a"}])
        );
        assert!(!format!("{policy:?}").contains("tenant-key"));
    }

    fn oauth2_policy() -> AuthPolicy {
        AuthPolicy::OAuth2 {
            policy: OAuth2Policy {
                issuer: "https://idp.example".into(),
                cluster: "idp-idp.example-443".into(),
                client_id: "nsight-web".into(),
                client_secret: "client-secret-value".into(),
                redirect_uri: "https://gw.example:8888/oauth2/callback".into(),
                cookie_key: "cookie-key-value".into(),
                audiences: vec!["nsight-web".into()],
                scopes: vec![],
                identity_claim: None,
                listener_tls: true,
            },
            api_keys: vec![],
        }
    }

    #[test]
    fn the_lean_module_serves_every_mode_but_oauth2() {
        let jwt = AuthPolicy::Jwt {
            policy: JwtPolicy {
                issuer: "https://idp".into(),
                audiences: vec!["nsight-cloud".into()],
                jwks: Jwks::Inline(json!({"keys": []})),
                identity_claim: None,
            },
            api_keys: vec![],
        };
        let keys = AuthPolicy::ApiKeys(vec![ApiKey::new("k".repeat(16))]);
        for policy in [AuthPolicy::Unauthenticated, keys, jwt] {
            let filter = policy.filter("/full.wasm");
            // Without a lean module, always the full one.
            assert_eq!(filter.module_path(), Path::new("/full.wasm"), "{policy:?}");
            let filter = filter.with_lean_module("/lean.wasm");
            assert_eq!(filter.module_path(), Path::new("/lean.wasm"), "{policy:?}");
        }
        // OAuth2 renews its cookie on the response: the full module, lean one or not.
        let oauth2 = oauth2_policy()
            .filter("/full.wasm")
            .with_lean_module("/lean.wasm");
        assert_eq!(oauth2.module_path(), Path::new("/full.wasm"));
        // A configuration the gateway cannot read goes to the full module (the filter judges).
        let mut odd = AuthFilter::api_key("/full.wasm", &[]).with_lean_module("/lean.wasm");
        odd.config_json = "{not json".into();
        assert_eq!(odd.module_path(), Path::new("/full.wasm"));
        odd.config_json = r#"{"mode":"magic"}"#.into();
        assert_eq!(odd.module_path(), Path::new("/full.wasm"));
    }

    #[test]
    fn oauth2_carries_its_secrets_but_debug_hides_them() {
        let policy = oauth2_policy();
        let v = policy.to_json();
        assert_eq!(v["mode"], "oauth2");
        assert_eq!(v["oauth2"]["client_secret"], "client-secret-value");
        assert_eq!(v["oauth2"]["listener_tls"], true);
        assert!(v["oauth2"].get("scopes").is_none());
        let debug = format!("{policy:?}");
        assert!(!debug.contains("client-secret-value") && !debug.contains("cookie-key-value"));
    }
}
