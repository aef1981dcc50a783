//! Browser sign-in through an OpenID provider in local mode (`local --oauth2-issuer ...`): the
//! auth filter's OAuth2 mode on the gateway, with the API key still accepted beside it (the CLI,
//! the demo, scripts).
//!
//! ```text
//!  --oauth2-issuer https://idp:8443/realms/x ──> upstream `oauth2-idp` (TLS, SNI idp, the CA of
//!                                                 --oauth2-ca-cert or the system bundle)
//!                  http://127.0.0.1:5556      ──> upstream `oauth2-idp` (plain: loopback only)
//!  --oauth2-client-secret-file (mode 0600)    ──> client_secret   (never logged)
//!  <state>/oauth2-cookie-key (made once, 0600)──> cookie_key      (signs the session cookie)
//!  --oauth2-redirect-uri | <gateway URL>/oauth2/callback (register it at the provider)
//! ```
//! The filter refuses OAuth2 on a listener without TLS (the session cookie is `Secure`), so the
//! gateway must serve HTTPS (`--tls` or `--tls-cert`). A plain-HTTP issuer is accepted only on
//! this machine's loopback, where the client secret and the tokens never cross a network.
//! Pure: files are read by the caller ([`crate::platform`]).

use std::{net::Ipv4Addr, path::PathBuf};

use base64::Engine as _;
use nsight_gateway::{
    auth::{ApiKey, AuthPolicy, OAuth2Policy},
    ir::{AuthFilter, CaTrust, Upstream},
};
use serde::Serialize;

/// The Envoy cluster through which the filter reaches the provider (discovery, token, JWKS).
pub const IDP_CLUSTER: &str = "oauth2-idp";
/// The filter's callback path, below the gateway URL, in the default redirect URI.
pub const CALLBACK_PATH: &str = "/oauth2/callback";

/// What the command line says about OAuth2 (all optional but the issuer, the client and its
/// secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuth2Settings {
    /// Exactly as the provider's discovery document names itself.
    pub issuer: String,
    pub client_id: String,
    /// A file holding the client secret (mode 0600).
    pub client_secret_file: PathBuf,
    /// PEM CAs that issued the provider's certificate; `None`: the system bundle.
    pub ca_cert: Option<PathBuf>,
    /// Requested at sign-in; empty: `openid`.
    pub scopes: Vec<String>,
    /// `aud` accepted in bearer tokens; empty: the client id.
    pub audiences: Vec<String>,
    /// `None`: `<gateway URL>/oauth2/callback`.
    pub redirect_uri: Option<String>,
}

/// Where the gateway reaches the issuer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IssuerEndpoint {
    pub host: String,
    pub port: u16,
    pub tls: bool,
}

/// The OAuth2 part of the plan, written to `local.json` (no secret in it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2Plan {
    pub issuer: String,
    pub client_id: String,
    pub redirect_uri: String,
    pub endpoint: IssuerEndpoint,
    pub client_secret_file: PathBuf,
    pub cookie_key_file: PathBuf,
    pub ca_cert: Option<PathBuf>,
    #[serde(skip)]
    pub scopes: Vec<String>,
    #[serde(skip)]
    pub audiences: Vec<String>,
}

/// What the platform read from the files the plan names.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuth2Secrets {
    pub client_secret: String,
    /// At least 32 bytes; encoded for the filter here.
    pub cookie_key: String,
    /// The text of `ca_cert`.
    pub ca_pem: Option<String>,
}

impl std::fmt::Debug for OAuth2Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OAuth2Secrets(<hidden>)")
    }
}

/// The issuer's host, port and scheme. Refused, with the reason: another scheme, plain HTTP
/// off loopback, user info, an IPv6 literal, an empty or odd host, a bad port.
pub fn issuer_endpoint(issuer: &str) -> Result<IssuerEndpoint, String> {
    let (rest, tls) = if let Some(rest) = issuer.strip_prefix("https://") {
        (rest, true)
    } else if let Some(rest) = issuer.strip_prefix("http://") {
        (rest, false)
    } else {
        return Err(format!(
            "--oauth2-issuer {issuer:?} must be an https:// URL (http:// only for a provider on this machine's loopback)"
        ));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let no_host = || {
        format!(
            "--oauth2-issuer {issuer:?} has no usable host name (letters, digits, '.' and '-'; no user info, no IPv6 literal)"
        )
    };
    if authority.starts_with('[') || authority.contains('@') {
        return Err(no_host());
    }
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (
            host,
            port.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("--oauth2-issuer {issuer:?} has an invalid port"))?,
        ),
        None => (authority, if tls { 443 } else { 80 }),
    };
    if !nsight_gateway::auth::is_issuer_host(host) {
        return Err(no_host());
    }
    let host = host.to_ascii_lowercase();
    let loopback = host == "localhost" || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback());
    if !tls && !loopback {
        return Err(format!(
            "--oauth2-issuer {issuer:?} is plain HTTP off this machine: the client secret and the tokens would cross the network unencrypted; use the provider's https:// URL"
        ));
    }
    Ok(IssuerEndpoint { host, port, tls })
}

impl OAuth2Settings {
    /// The plan's part, with `gateway_url` for the default redirect URI, `gateway_tls` whether
    /// the gateway serves HTTPS, and `cookie_key_file` where the cookie key is kept. Refused: a
    /// gateway without HTTPS, what [`issuer_endpoint`] refuses, a redirect URI that is not
    /// `https://`, scopes without `openid`, an empty client id.
    pub fn plan(
        &self,
        gateway_url: &str,
        gateway_tls: bool,
        cookie_key_file: PathBuf,
    ) -> Result<OAuth2Plan, String> {
        if !gateway_tls {
            return Err(
                "OAuth2 sign-in needs HTTPS on the gateway (the session cookie is Secure): add --tls, or --tls-cert and --tls-key".into(),
            );
        }
        let endpoint = issuer_endpoint(&self.issuer)?;
        if self.client_id.trim().is_empty() {
            return Err("--oauth2-client-id is empty".into());
        }
        let redirect_uri = match &self.redirect_uri {
            Some(uri) if uri.starts_with("https://") && uri.len() > "https://".len() => {
                uri.clone()
            }
            Some(uri) => {
                return Err(format!(
                    "--oauth2-redirect-uri {uri:?} must be an https:// URL on the gateway (e.g. https://localhost:8888{CALLBACK_PATH})"
                ))
            }
            None => format!("{}{CALLBACK_PATH}", gateway_url.trim_end_matches('/')),
        };
        if !self.scopes.is_empty() && !self.scopes.iter().any(|s| s == "openid") {
            return Err("--oauth2-scopes must include `openid` (or be left out)".into());
        }
        Ok(OAuth2Plan {
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            redirect_uri,
            endpoint,
            client_secret_file: self.client_secret_file.clone(),
            cookie_key_file,
            ca_cert: self.ca_cert.clone(),
            scopes: self.scopes.clone(),
            audiences: self.audiences.clone(),
        })
    }
}

impl OAuth2Plan {
    /// The upstream that reaches the provider.
    pub fn idp_upstream(&self, secrets: &OAuth2Secrets) -> Upstream {
        let e = &self.endpoint;
        let upstream = Upstream::new(IDP_CLUSTER, &e.host, e.port);
        if !e.tls {
            return upstream;
        }
        let trust = secrets.ca_pem.clone().map_or(CaTrust::System, CaTrust::Pem);
        upstream.with_tls(&e.host, trust)
    }

    /// The auth filter (the full module: OAuth2 renews its cookie on responses) accepting a
    /// session from the provider, its bearer tokens, or `api_key`.
    pub fn filter(
        &self,
        wasm_path: impl Into<PathBuf>,
        secrets: &OAuth2Secrets,
        api_key: &str,
    ) -> AuthFilter {
        let policy = OAuth2Policy {
            issuer: self.issuer.clone(),
            cluster: IDP_CLUSTER.into(),
            client_id: self.client_id.clone(),
            client_secret: secrets.client_secret.clone(),
            redirect_uri: self.redirect_uri.clone(),
            cookie_key: base64::engine::general_purpose::STANDARD.encode(&secrets.cookie_key),
            audiences: if self.audiences.is_empty() {
                vec![self.client_id.clone()]
            } else {
                self.audiences.clone()
            },
            scopes: self.scopes.clone(),
            identity_claim: None,
            listener_tls: true,
        };
        AuthPolicy::OAuth2 {
            policy,
            api_keys: vec![ApiKey::new(api_key)],
        }
        .filter(wasm_path)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn settings(issuer: &str) -> OAuth2Settings {
        OAuth2Settings {
            issuer: issuer.into(),
            client_id: "nsight-web".into(),
            client_secret_file: "/s/secret".into(),
            ca_cert: None,
            scopes: Vec::new(),
            audiences: Vec::new(),
            redirect_uri: None,
        }
    }

    fn secrets() -> OAuth2Secrets {
        OAuth2Secrets {
            client_secret: "client-secret-value".into(),
            cookie_key: "c".repeat(40),
            ca_pem: Some("-----BEGIN CERTIFICATE-----".into()),
        }
    }

    #[test]
    fn issuers_https_anywhere_http_on_loopback_only() {
        let ok = |i: &str| issuer_endpoint(i).unwrap();
        assert_eq!(
            ok("https://Login.Example.com/realms/x"),
            IssuerEndpoint {
                host: "login.example.com".into(),
                port: 443,
                tls: true
            }
        );
        assert_eq!(ok("http://127.0.0.1:5556").port, 5556);
        assert!(!ok("http://localhost:5556/dex").tls);
        for (bad, says) in [
            ("http://idp.example.com", "plain HTTP off this machine"),
            ("http://10.0.0.1:80", "plain HTTP off this machine"),
            ("ftp://idp", "must be an https:// URL"),
            ("idp.example", "must be an https:// URL"),
            ("https://", "no usable host"),
            ("https://user@idp/", "no usable host"),
            ("https://[::1]:443/", "no usable host"),
            ("https://idp:0/", "invalid port"),
            ("https://idp:99999/", "invalid port"),
        ] {
            let err = issuer_endpoint(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn the_plan_needs_https_on_the_gateway_and_names_the_fix() {
        let s = settings("http://127.0.0.1:5556");
        let err = s
            .plan("http://127.0.0.1:8888", false, "/s/k".into())
            .unwrap_err();
        assert!(err.contains("add --tls"), "{err}");
        let plan = s
            .plan("https://localhost:8888", true, "/s/k".into())
            .unwrap();
        assert_eq!(plan.redirect_uri, "https://localhost:8888/oauth2/callback");
        let mut s = settings("https://idp");
        s.redirect_uri = Some("http://gw/oauth2/callback".into());
        assert!(s
            .plan("https://gw", true, "/k".into())
            .unwrap_err()
            .contains("--oauth2-redirect-uri"));
        let mut s = settings("https://idp");
        s.scopes = vec!["profile".into()];
        assert!(s
            .plan("https://gw", true, "/k".into())
            .unwrap_err()
            .contains("openid"));
        let mut s = settings("https://idp");
        s.client_id = " ".into();
        assert!(s.plan("https://gw", true, "/k".into()).is_err());
    }

    #[test]
    fn the_filter_takes_sessions_tokens_and_the_api_key_and_never_shows_secrets() {
        let plan = settings("https://idp.example:8443/realms/x")
            .plan("https://localhost:8888", true, "/s/k".into())
            .unwrap();
        let s = secrets();
        let filter = plan.filter("/w/full.wasm", &s, "nsk_key");
        assert!(filter.signs_in());
        let config: serde_json::Value = serde_json::from_str(&filter.config_json).unwrap();
        assert_eq!(config["mode"], "oauth2");
        let o = &config["oauth2"];
        assert_eq!(o["issuer"], "https://idp.example:8443/realms/x");
        assert_eq!(o["cluster"], IDP_CLUSTER);
        assert_eq!(o["client_secret"], "client-secret-value");
        assert_eq!(o["audiences"], serde_json::json!(["nsight-web"]));
        assert_eq!(o["listener_tls"], true);
        let key = base64::engine::general_purpose::STANDARD
            .decode(o["cookie_key"].as_str().unwrap())
            .unwrap();
        assert!(key.len() >= 32);
        assert_eq!(config["api_keys"], serde_json::json!(["nsk_key"]));
        let upstream = plan.idp_upstream(&s);
        assert_eq!(upstream.name, IDP_CLUSTER);
        let tls = upstream.tls.unwrap();
        assert_eq!(tls.sni, "idp.example");
        assert!(matches!(tls.trust, CaTrust::Pem(_)));
        assert_eq!(format!("{s:?}"), "OAuth2Secrets(<hidden>)");
        let shown = serde_json::to_string(&plan).unwrap();
        assert!(!shown.contains("client-secret-value"), "{shown}");
        assert!(plan
            .idp_upstream(&OAuth2Secrets { ca_pem: None, ..s })
            .tls
            .is_some_and(|t| t.trust == CaTrust::System));
    }

    #[test]
    fn a_loopback_http_issuer_is_reached_without_tls() {
        let plan = settings("http://127.0.0.1:5556")
            .plan("https://localhost:8888", true, "/s/k".into())
            .unwrap();
        let upstream = plan.idp_upstream(&secrets());
        assert!(upstream.tls.is_none());
        assert_eq!(upstream.endpoints[0].port, 5556);
    }
}
