//! `spec.authentication.oauth2` -> the auth filter's OAuth2 mode and the upstream that reaches
//! the identity provider.
//!
//! ```text
//!  issuer https://idp.example.com:8443/realms/x ──> upstream oauth2-idp-idp.example.com-8443
//!                                                    (TLS, SNI idp.example.com, the name
//!                                                     checked; CAs: the client Secret's ca.crt
//!                                                     or Envoy's system bundle)
//!  clientSecretRef: client_secret.key ──> client_secret   (never logged, never in a condition)
//!                   hmac.key          ──> cookie_key      (base64 of the Secret's bytes)
//!  redirectUri | https://<first DNS name of the TLS cert>[:<port>]/oauth2/callback
//! ```
//! The filter reaches discovery, the token endpoint and the JWKS through that one cluster, so
//! they must live on the issuer's host and port (true of Keycloak, Okta, Auth0, Entra ID).
//! Pure: the Secret and the validated TLS pair come in as arguments.

use base64::Engine as _;
use nsight_gateway::{
    auth::OAuth2Policy,
    ir::{CaTrust, Upstream},
};

use super::{
    secrets::{self, ValidTls},
    translate::{bad, Inputs, CONDITION_AUTH, OAUTH2_KEYS},
};
use crate::conditions::Cond;

/// The optional key of the client Secret holding the issuer's CA (PEM).
pub const CA_KEY: &str = "ca.crt";
/// Fewest bytes of `hmac.key` accepted (the filter's cookie key minimum).
pub const MIN_HMAC_BYTES: usize = 32;
/// The callback path of the default redirect URI.
pub const CALLBACK_PATH: &str = "/oauth2/callback";

/// The filter's OAuth2 settings and the upstream they name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuth2Setup {
    pub policy: OAuth2Policy,
    pub idp: Upstream,
}

/// Host and port of an `https://` issuer URL. Refused: another scheme (the client secret and
/// the tokens cross this connection), user info, an IPv6 literal, an empty or odd host.
pub fn issuer_endpoint(issuer: &str) -> Result<(String, u16), String> {
    let rest = issuer.strip_prefix("https://").ok_or_else(|| {
        format!("spec.authentication.oauth2.issuer {issuer:?} must be an https:// URL: the client secret and tokens travel to it")
    })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let bad_host = || {
        format!("spec.authentication.oauth2.issuer {issuer:?} has no usable host name (letters, digits, '.' and '-'; no user info, no IPv6 literal)")
    };
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (
            host,
            port.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| {
                    format!("spec.authentication.oauth2.issuer {issuer:?} has an invalid port")
                })?,
        ),
        None => (authority, 443),
    };
    if !nsight_gateway::auth::is_issuer_host(host) {
        return Err(bad_host());
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// The Envoy cluster name of the identity provider at `host:port`.
pub fn cluster_name(host: &str, port: u16) -> String {
    format!("oauth2-idp-{host}-{port}")
}

/// `https://<first non-wildcard DNS name>[:port]/oauth2/callback`, or why there is none.
fn default_redirect_uri(tls: Option<&ValidTls>, port: u16) -> Result<String, String> {
    let name = tls
        .and_then(|t| t.dns_names.iter().find(|n| !n.starts_with('*')))
        .ok_or_else(|| {
            "cannot derive the OAuth2 redirect URI: the TLS certificate (spec.tlsSecretRef) names no DNS host; set spec.authentication.oauth2.redirectUri to https://<gateway host>/oauth2/callback and register it at the identity provider".to_owned()
        })?;
    Ok(match port {
        443 => format!("https://{name}{CALLBACK_PATH}"),
        p => format!("https://{name}:{p}{CALLBACK_PATH}"),
    })
}

/// The OAuth2 setup when `oauth2` is enabled (`Ok(None)` when not), or the `AuthConfigValid`
/// condition saying what to fix. `tls` is the listener's validated pair (required).
pub fn setup(
    inputs: &Inputs<'_>,
    ns: &str,
    tls: Option<&ValidTls>,
) -> Result<Option<OAuth2Setup>, Cond> {
    let spec = &inputs.gateway.spec;
    let Some(o) = spec
        .authentication
        .as_ref()
        .and_then(|a| a.oauth2.as_ref())
        .filter(|o| o.enabled)
    else {
        return Ok(None);
    };
    if spec.tls_secret_ref.is_none() {
        return Err(bad(
            CONDITION_AUTH,
            "OAuth2RequiresTLS",
            "OAuth2 requires TLS on the gateway (browsers do not send secure session cookies over plain HTTP): create a TLS Secret and set spec.tlsSecretRef",
        ));
    }
    let invalid = |m: String| bad(CONDITION_AUTH, "OAuth2Invalid", m);
    let issuer = o.issuer.clone().unwrap_or_default();
    let client_id = o.client_id.clone().unwrap_or_default();
    if issuer.is_empty() || client_id.is_empty() {
        return Err(invalid(
            "spec.authentication.oauth2 needs issuer and clientId".into(),
        ));
    }
    let (host, port) = issuer_endpoint(&issuer).map_err(invalid)?;
    let r = o.client_secret_ref.as_ref().ok_or_else(|| {
        invalid("spec.authentication.oauth2.clientSecretRef is not set: name a Secret with client_secret.key and hmac.key".into())
    })?;
    let what = format!(
        "Secret {ns}/{} (spec.authentication.oauth2.clientSecretRef)",
        r.name
    );
    let secret = inputs.secrets.get(&r.name).ok_or_else(|| {
        invalid(format!(
            "{what} does not exist; create it with client_secret.key and hmac.key"
        ))
    })?;
    let value = |key: &str| -> Result<&[u8], Cond> {
        secrets::value(secret, key)
            .map(<[u8]>::trim_ascii)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| invalid(format!("{what} has no `{key}` (or it is empty)")))
    };
    let [secret_key, hmac_key] = OAUTH2_KEYS;
    let client_secret = std::str::from_utf8(value(secret_key)?)
        .map_err(|_| invalid(format!("{what}: `{secret_key}` is not UTF-8 text")))?
        .to_owned();
    let hmac = value(hmac_key)?;
    if hmac.len() < MIN_HMAC_BYTES {
        return Err(invalid(format!(
            "{what}: `{hmac_key}` has {} bytes; use at least {MIN_HMAC_BYTES} random bytes, e.g. `openssl rand -base64 32`",
            hmac.len()
        )));
    }
    let trust = match secrets::value(secret, CA_KEY).filter(|v| !v.trim_ascii().is_empty()) {
        Some(pem) => {
            CaTrust::Pem(secrets::ca_bundle(&format!("{what} `{CA_KEY}`"), pem).map_err(invalid)?)
        }
        None => CaTrust::System,
    };
    let redirect_uri = match o.redirect_uri.as_deref().filter(|u| !u.is_empty()) {
        Some(uri) if uri.starts_with("https://") && uri.len() > "https://".len() => uri.to_owned(),
        Some(uri) => {
            return Err(invalid(format!(
                "spec.authentication.oauth2.redirectUri {uri:?} must be an https:// URL on the gateway (e.g. https://nsight.example.com/oauth2/callback)"
            )))
        }
        None => {
            let port = spec
                .service
                .as_ref()
                .and_then(|s| s.port)
                .or(spec.port)
                .unwrap_or(nsight_gateway::ir::GATEWAY_PORT);
            default_redirect_uri(tls, port).map_err(invalid)?
        }
    };
    if !o.scopes.is_empty() && !o.scopes.iter().any(|s| s == "openid") {
        return Err(invalid(
            "spec.authentication.oauth2.scopes must include `openid` (or be left out)".into(),
        ));
    }
    let audiences: Vec<String> = o
        .audiences
        .iter()
        .filter(|a| !a.is_empty())
        .cloned()
        .collect();
    let cluster = cluster_name(&host, port);
    Ok(Some(OAuth2Setup {
        idp: Upstream::new(&cluster, &host, port).with_tls(&host, trust),
        policy: OAuth2Policy {
            issuer,
            cluster,
            audiences: if audiences.is_empty() {
                vec![client_id.clone()]
            } else {
                audiences
            },
            client_id,
            client_secret,
            redirect_uri,
            cookie_key: base64::engine::general_purpose::STANDARD.encode(hmac),
            scopes: o.scopes.clone(),
            identity_claim: o.identity_claim.clone().filter(|c| !c.is_empty()),
            listener_tls: tls.is_some(),
        },
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn issuer_urls() {
        assert_eq!(
            issuer_endpoint("https://Login.Example.com/realms/x"),
            Ok(("login.example.com".into(), 443))
        );
        assert_eq!(
            issuer_endpoint("https://idp.example:8443"),
            Ok(("idp.example".into(), 8443))
        );
        for bad in [
            "http://idp.example",
            "https://",
            "https://user@idp.example/",
            "https://[::1]:443/",
            "https://idp.example:0/",
            "https://idp.example:99999/",
            "https://-idp/",
            "idp.example",
        ] {
            assert!(issuer_endpoint(bad).is_err(), "{bad}");
        }
        assert!(issuer_endpoint("http://idp.example")
            .unwrap_err()
            .contains("must be an https:// URL"));
        assert_eq!(
            cluster_name("idp.example", 443),
            "oauth2-idp-idp.example-443"
        );
    }

    #[test]
    fn the_default_redirect_uri_uses_the_certificate_name_and_port() {
        let tls = ValidTls {
            cert_chain_pem: String::new(),
            private_key_pem: String::new(),
            not_after: 0,
            dns_names: vec!["*.example.com".into(), "gw.example.com".into()],
        };
        assert_eq!(
            default_redirect_uri(Some(&tls), 8888),
            Ok("https://gw.example.com:8888/oauth2/callback".into())
        );
        assert_eq!(
            default_redirect_uri(Some(&tls), 443),
            Ok("https://gw.example.com/oauth2/callback".into())
        );
        let wildcard_only = ValidTls {
            dns_names: vec!["*.example.com".into()],
            ..tls
        };
        assert!(default_redirect_uri(Some(&wildcard_only), 443)
            .unwrap_err()
            .contains("set spec.authentication.oauth2.redirectUri"));
    }
}
