//! `nsight-cloud login` and the bearer token every other command sends when OAuth2 is
//! configured: endpoints (explicit, else the issuer's discovery document), the grants (device
//! authorization for people, client credentials for machines) and refresh, through the
//! `oauth2` crate. Owns when a stored token must be refreshed; storing it is config.rs's.
//!
//! ```text
//! login:   OAuth2 config ──endpoints──> device grant (print URL + code, poll)  ──> StoredToken
//!                                    ├─> authorization code + PKCE in the browser (login_code.rs)
//!                                    └─> client credentials ($NSIGHT_OAUTH_CLIENT_SECRET)
//! command: StoredToken ──expires within 30 s?──> refresh_token grant, else client credentials
//!                                                again, else "run nsight-cloud login"
//! ```

use std::time::Duration;

use oauth2::{
    basic::{BasicClient, BasicTokenResponse},
    ClientId, ClientSecret, DeviceAuthorizationUrl, RefreshToken, Scope,
    StandardDeviceAuthorizationResponse, TokenResponse, TokenUrl,
};
use serde::Deserialize;

use crate::config::{ApiKey, OAuth2, OAuthFlow, StoredToken};

/// Where the client-credentials grant reads the client secret (never stored in the file).
pub const CLIENT_SECRET_ENV: &str = "NSIGHT_OAUTH_CLIENT_SECRET";
/// A token expiring within this many seconds is refreshed before use.
pub const REFRESH_MARGIN_S: u64 = 30;
/// Lifetime assumed when the issuer's answer has no `expires_in`.
const DEFAULT_LIFETIME_S: u64 = 300;
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// Why login or refresh failed. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("cannot read the issuer's discovery document {url}: {reason}; pass --token-endpoint to `configure` if the issuer has none")]
    Discovery { url: String, reason: String },
    #[error("the issuer's discovery document has no {what}; {hint}")]
    MissingEndpoint {
        what: &'static str,
        hint: &'static str,
    },
    #[error("{what} {url:?} is not a valid URL")]
    BadEndpoint { what: &'static str, url: String },
    #[error("the client-credentials flow needs the client secret in ${CLIENT_SECRET_ENV}")]
    NoClientSecret,
    #[error("browser login: {reason}")]
    Callback { reason: String },
    #[error("the issuer refused the {grant} request: {reason}")]
    Refused { grant: &'static str, reason: String },
    #[error("the issuer's access token cannot be sent in a header: {0}")]
    BadToken(String),
    #[error("not logged in to {issuer}; run: nsight-cloud{config_flag} login")]
    NotLoggedIn { issuer: String, config_flag: String },
    #[error("the token from {issuer} expired and cannot be refreshed ({reason}); run: nsight-cloud{config_flag} login")]
    Expired {
        issuer: String,
        reason: String,
        config_flag: String,
    },
    #[error("cannot set up HTTP: {0}")]
    Http(#[from] reqwest::Error),
}

/// The endpoints a login needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    pub token: String,
    pub authorization: Option<String>,
    pub device_authorization: Option<String>,
}

#[derive(Deserialize)]
struct Discovery {
    token_endpoint: Option<String>,
    authorization_endpoint: Option<String>,
    device_authorization_endpoint: Option<String>,
}

/// The discovery document's URL for an issuer (OpenID Connect Discovery 1.0 section 4).
pub fn discovery_url(issuer: &str) -> String {
    format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )
}

/// The endpoints from the configuration, completed by the discovery document `doc` when given.
pub fn endpoints(o: &OAuth2, doc: Option<&str>) -> Result<Endpoints, LoginError> {
    let discovered = match doc {
        Some(text) => {
            serde_json::from_str::<Discovery>(text).map_err(|e| LoginError::Discovery {
                url: discovery_url(o.issuer.as_str()),
                reason: format!("not a discovery document ({e})"),
            })?
        }
        None => Discovery {
            token_endpoint: None,
            authorization_endpoint: None,
            device_authorization_endpoint: None,
        },
    };
    let token = match (&o.token_endpoint, discovered.token_endpoint) {
        (Some(explicit), _) => explicit.to_string(),
        (None, Some(found)) => found,
        (None, None) => {
            return Err(LoginError::MissingEndpoint {
                what: "token_endpoint",
                hint: "pass --token-endpoint to `configure`",
            })
        }
    };
    let authorization = o
        .authorization_endpoint
        .as_ref()
        .map(|u| u.to_string())
        .or(discovered.authorization_endpoint);
    Ok(Endpoints {
        token,
        authorization,
        device_authorization: discovered.device_authorization_endpoint,
    })
}

/// Whether `token` must be refreshed before use at `now`.
pub fn needs_refresh(token: &StoredToken, now: u64) -> bool {
    now.saturating_add(REFRESH_MARGIN_S) >= token.expires_at
}

/// The token to store from an issuer's answer received at `now`. A refresh answer without a
/// new refresh token keeps `previous_refresh`.
pub fn stored(
    answer: &BasicTokenResponse,
    now: u64,
    previous_refresh: Option<ApiKey>,
) -> Result<StoredToken, LoginError> {
    let access_token = ApiKey::parse(answer.access_token().secret())
        .map_err(|e| LoginError::BadToken(e.to_string()))?;
    let refresh_token = match answer.refresh_token() {
        Some(r) => {
            Some(ApiKey::parse(r.secret()).map_err(|e| LoginError::BadToken(e.to_string()))?)
        }
        None => previous_refresh,
    };
    let lifetime = answer
        .expires_in()
        .map_or(DEFAULT_LIFETIME_S, |d| d.as_secs());
    Ok(StoredToken {
        access_token,
        refresh_token,
        expires_at: now.saturating_add(lifetime),
    })
}

fn http() -> Result<reqwest::blocking::Client, LoginError> {
    // No redirects: a token endpoint that redirects could forward the credentials elsewhere.
    Ok(reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(HTTP_TIMEOUT)
        .user_agent(concat!("nsight-cloud/", env!("CARGO_PKG_VERSION")))
        .build()?)
}

/// Resolves the endpoints, fetching the discovery document unless the token endpoint is
/// configured and the flow needs nothing else.
fn resolve(o: &OAuth2, http: &reqwest::blocking::Client) -> Result<Endpoints, LoginError> {
    let code_ready = o.flow != OAuthFlow::Code || o.authorization_endpoint.is_some();
    if o.token_endpoint.is_some() && o.flow != OAuthFlow::Device && code_ready {
        return endpoints(o, None);
    }
    let url = discovery_url(o.issuer.as_str());
    let fail = |reason: String| LoginError::Discovery {
        url: url.clone(),
        reason,
    };
    let text = http
        .get(&url)
        .send()
        .and_then(reqwest::blocking::Response::error_for_status)
        .and_then(reqwest::blocking::Response::text)
        .map_err(|e| fail(crate::api::chain(&e)))?;
    endpoints(o, Some(&text))
}

pub(crate) fn scopes(o: &OAuth2) -> Vec<Scope> {
    let default = match o.flow {
        OAuthFlow::ClientCredentials => "",
        OAuthFlow::Code | OAuthFlow::Device => "openid offline_access",
    };
    o.scope
        .as_deref()
        .unwrap_or(default)
        .split_whitespace()
        .map(|s| Scope::new(s.to_owned()))
        .collect()
}

fn token_url(url: &str) -> Result<TokenUrl, LoginError> {
    TokenUrl::new(url.to_owned()).map_err(|_| LoginError::BadEndpoint {
        what: "token endpoint",
        url: url.to_owned(),
    })
}

pub(crate) fn refused<E: std::error::Error>(grant: &'static str) -> impl Fn(E) -> LoginError {
    move |e| LoginError::Refused {
        grant,
        reason: crate::api::chain(&e),
    }
}

/// Logs in with the configured flow. `show` receives what the user must do (device flow).
pub fn login(
    o: &OAuth2,
    client_secret: Option<String>,
    now: impl Fn() -> u64,
    show: &mut dyn FnMut(&str),
) -> Result<StoredToken, LoginError> {
    let http = http()?;
    let ends = resolve(o, &http)?;
    let client = BasicClient::new(ClientId::new(o.client_id.clone()));
    match o.flow {
        OAuthFlow::Code => {
            let authorization = ends.authorization.ok_or(LoginError::MissingEndpoint {
                what: "authorization_endpoint",
                hint: "pass --authorization-endpoint to `configure`",
            })?;
            crate::login_code::login(o, &authorization, &ends.token, &http, now(), show)
        }
        OAuthFlow::ClientCredentials => {
            let secret = client_secret
                .filter(|s| !s.is_empty())
                .ok_or(LoginError::NoClientSecret)?;
            let client = client
                .set_client_secret(ClientSecret::new(secret))
                .set_token_uri(token_url(&ends.token)?);
            let answer = client
                .exchange_client_credentials()
                .add_scopes(scopes(o))
                .request(&http)
                .map_err(refused("client credentials"))?;
            stored(&answer, now(), None)
        }
        OAuthFlow::Device => {
            let device_url = ends
                .device_authorization
                .ok_or(LoginError::MissingEndpoint {
                    what: "device_authorization_endpoint",
                    hint: "the issuer does not offer the device flow; use --oauth-flow-type code",
                })?;
            let device_url = DeviceAuthorizationUrl::new(device_url.clone()).map_err(|_| {
                LoginError::BadEndpoint {
                    what: "device authorization endpoint",
                    url: device_url,
                }
            })?;
            let client = client
                .set_token_uri(token_url(&ends.token)?)
                .set_device_authorization_url(device_url);
            let details: StandardDeviceAuthorizationResponse = client
                .exchange_device_code()
                .add_scopes(scopes(o))
                .request(&http)
                .map_err(refused("device authorization"))?;
            let complete = details
                .verification_uri_complete()
                .map(|u| format!("\n(or open {})", u.secret()))
                .unwrap_or_default();
            show(&format!(
                "To sign in, open {} and enter the code {}{complete}\nWaiting for the sign-in to complete...",
                details.verification_uri().as_str(),
                details.user_code().secret()
            ));
            let answer = client
                .exchange_device_access_token(&details)
                .request(&http, std::thread::sleep, None)
                .map_err(refused("device token"))?;
            stored(&answer, now(), None)
        }
    }
}

/// A fresh token for an expiring one: the refresh-token grant when there is a refresh token,
/// else client credentials again (machines), else an error telling to log in.
pub fn refresh(
    o: &OAuth2,
    token: &StoredToken,
    client_secret: Option<String>,
    now: impl Fn() -> u64,
) -> Result<StoredToken, LoginError> {
    match (&token.refresh_token, o.flow) {
        (Some(refresh), _) => {
            let http = http()?;
            let ends = resolve(o, &http)?;
            let mut client = BasicClient::new(ClientId::new(o.client_id.clone()))
                .set_token_uri(token_url(&ends.token)?);
            if let Some(secret) = client_secret.filter(|s| !s.is_empty()) {
                client = client.set_client_secret(ClientSecret::new(secret));
            }
            let answer = client
                .exchange_refresh_token(&RefreshToken::new(refresh.expose().to_owned()))
                .request(&http)
                .map_err(refused("refresh token"))?;
            stored(&answer, now(), Some(refresh.clone()))
        }
        (None, OAuthFlow::ClientCredentials) => login(o, client_secret, now, &mut |_| {}),
        (None, _) => Err(LoginError::Refused {
            grant: "refresh token",
            reason: "no refresh token was issued".to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HttpUrl;

    fn oauth(flow: OAuthFlow, token_endpoint: Option<&str>) -> OAuth2 {
        OAuth2 {
            issuer: HttpUrl::parse("--issuer", "https://idp.example/").unwrap(),
            client_id: "cli".into(),
            flow,
            authorization_endpoint: None,
            token_endpoint: token_endpoint.map(|u| HttpUrl::parse("--token-endpoint", u).unwrap()),
            scope: None,
            token: None,
        }
    }

    #[test]
    fn discovery_fills_what_is_not_configured() {
        let doc = r#"{"issuer":"https://idp.example","token_endpoint":"https://idp.example/t",
                      "device_authorization_endpoint":"https://idp.example/d"}"#;
        let e = endpoints(&oauth(OAuthFlow::Device, None), Some(doc)).unwrap();
        assert_eq!(e.token, "https://idp.example/t");
        assert_eq!(
            e.device_authorization.as_deref(),
            Some("https://idp.example/d")
        );
        let e = endpoints(
            &oauth(OAuthFlow::Device, Some("https://other/token")),
            Some(doc),
        )
        .unwrap();
        assert_eq!(
            e.token, "https://other/token",
            "the configured endpoint wins"
        );
        assert!(matches!(
            endpoints(&oauth(OAuthFlow::Device, None), Some("{}")),
            Err(LoginError::MissingEndpoint {
                what: "token_endpoint",
                ..
            })
        ));
        assert!(matches!(
            endpoints(&oauth(OAuthFlow::Device, None), Some("<html>")),
            Err(LoginError::Discovery { .. })
        ));
        assert_eq!(
            discovery_url("https://idp.example/realms/x/"),
            "https://idp.example/realms/x/.well-known/openid-configuration"
        );
    }

    #[test]
    fn tokens_are_refreshed_shortly_before_they_expire() {
        let t = StoredToken {
            access_token: ApiKey::parse("a.b.c").unwrap(),
            refresh_token: None,
            expires_at: 1000,
        };
        assert!(!needs_refresh(&t, 969));
        assert!(needs_refresh(&t, 970));
        assert!(needs_refresh(&t, 2000));
    }

    #[test]
    fn default_scopes_depend_on_the_flow() {
        let names = |o: &OAuth2| scopes(o).iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            names(&oauth(OAuthFlow::Device, None)),
            ["openid", "offline_access"]
        );
        assert!(names(&oauth(OAuthFlow::ClientCredentials, None)).is_empty());
        let mut o = oauth(OAuthFlow::Device, None);
        o.scope = Some(" api  openid ".into());
        assert_eq!(names(&o), ["api", "openid"]);
    }

    #[test]
    fn answers_become_stored_tokens_keeping_the_old_refresh_token() {
        let answer: BasicTokenResponse = serde_json::from_str(
            r#"{"access_token":"x.y.z","token_type":"Bearer","expires_in":600}"#,
        )
        .unwrap();
        let old = ApiKey::parse("refresh-1").unwrap();
        let t = stored(&answer, 1000, Some(old.clone())).unwrap();
        assert_eq!((t.access_token.expose(), t.expires_at), ("x.y.z", 1600));
        assert_eq!(t.refresh_token, Some(old));
        let with_new: BasicTokenResponse = serde_json::from_str(
            r#"{"access_token":"x.y.z","token_type":"Bearer","refresh_token":"r2"}"#,
        )
        .unwrap();
        let t = stored(&with_new, 1000, None).unwrap();
        assert_eq!(
            t.refresh_token.map(|r| r.expose().to_owned()).as_deref(),
            Some("r2")
        );
        assert_eq!(t.expires_at, 1000 + DEFAULT_LIFETIME_S);
        let bad: BasicTokenResponse =
            serde_json::from_str(r#"{"access_token":"has space","token_type":"Bearer"}"#).unwrap();
        assert!(matches!(
            stored(&bad, 0, None),
            Err(LoginError::BadToken(_))
        ));
    }
}
