//! The issuer's OpenID configuration (`/.well-known/openid-configuration`): parsing and
//! checking the document, and the per-worker cache's state machine (when to fetch). The JWKS
//! named by its `jwks_uri` is then fetched by the same cache as the JWT mode's (`remote`).
//!
//! ```text
//!  Empty ──tick──> fetching ──200, valid──> Loaded(doc) ──cache_ttl_s──> fetching ...
//!    ^ failure: retry after 1 s                 failure while loaded: keep the document
//! ```

use std::rc::Rc;

use serde::Deserialize;

use super::{split_url, Oauth2Config};
use crate::remote::RemoteJwks;

/// Largest discovery document accepted, in bytes.
pub const MAX_DISCOVERY_BYTES: usize = 64 * 1024;

/// What the filter uses from the discovery document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    pub end_session_endpoint: Option<String>,
}

#[derive(Deserialize)]
struct RawDiscovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
    end_session_endpoint: Option<String>,
    code_challenge_methods_supported: Option<Vec<String>>,
}

impl Discovery {
    /// Parses and checks an answer to the discovery request (`status` `None`: no answer).
    pub fn parse(cfg: &Oauth2Config, status: Option<u16>, body: &[u8]) -> Result<Self, String> {
        match status {
            Some(200) => {}
            Some(s) => return Err(format!("the issuer answered {s}")),
            None => return Err("no answer (unreachable or timed out)".into()),
        }
        if body.len() > MAX_DISCOVERY_BYTES {
            return Err(format!(
                "the document is larger than {MAX_DISCOVERY_BYTES} bytes"
            ));
        }
        let raw: RawDiscovery = serde_json::from_slice(body)
            .map_err(|e| format!("not an OpenID configuration: {e}"))?;
        if raw.issuer != cfg.issuer {
            return Err(format!(
                "the document names issuer {:?}, configured is {:?}",
                raw.issuer, cfg.issuer
            ));
        }
        for (url, what) in [
            (&raw.authorization_endpoint, "authorization_endpoint"),
            (&raw.token_endpoint, "token_endpoint"),
            (&raw.jwks_uri, "jwks_uri"),
        ] {
            if split_url(url).is_none() {
                return Err(format!("its {what} is not an http(s) URL"));
            }
        }
        if let Some(methods) = &raw.code_challenge_methods_supported {
            if !methods.iter().any(|m| m == "S256") {
                return Err("the issuer does not support PKCE with S256".into());
            }
        }
        Ok(Self {
            authorization_endpoint: raw.authorization_endpoint,
            token_endpoint: raw.token_endpoint,
            jwks_uri: raw.jwks_uri,
            end_session_endpoint: raw.end_session_endpoint.filter(|u| split_url(u).is_some()),
        })
    }

    /// The JWKS fetch settings for `jwks_uri`, through the issuer's cluster.
    pub fn jwks_remote(&self, cfg: &Oauth2Config) -> RemoteJwks {
        let (authority, path) = split_url(&self.jwks_uri).unwrap_or_default();
        RemoteJwks {
            cluster: cfg.cluster.clone(),
            uri: self.jwks_uri.clone(),
            authority: authority.to_owned(),
            path: path.to_owned(),
            cache_ttl_s: cfg.cache_ttl_s,
            min_refresh_interval_s: 10,
            timeout_ms: cfg.timeout_ms,
        }
    }
}

/// One worker's cache of the discovery document.
#[derive(Debug, Default)]
pub struct DiscoveryCache {
    doc: Option<Rc<Discovery>>,
    fetched_at: u64,
    last_attempt: Option<u64>,
    in_flight: Option<u64>,
}

impl DiscoveryCache {
    pub fn doc(&self) -> Option<Rc<Discovery>> {
        self.doc.clone()
    }

    /// Whether the tick should fetch now: nothing loaded (every second) or older than the TTL.
    pub fn refresh_due(&self, cfg: &Oauth2Config, now: u64) -> bool {
        let busy = self
            .in_flight
            .is_some_and(|since| now <= since + cfg.timeout_ms.div_ceil(1000) + 1);
        if busy {
            return false;
        }
        let since_attempt = self.last_attempt.map(|t| now.saturating_sub(t));
        match self.doc {
            None => since_attempt.is_none_or(|s| s >= 1),
            Some(_) => {
                now >= self.fetched_at.saturating_add(cfg.cache_ttl_s)
                    && since_attempt.is_none_or(|s| s >= 10)
            }
        }
    }

    pub fn started(&mut self, now: u64) {
        self.in_flight = Some(now);
        self.last_attempt = Some(now);
    }

    pub fn abandoned(&mut self) {
        self.in_flight = None;
    }

    /// Takes an answer; a failure keeps the document loaded before (if any).
    pub fn finished(
        &mut self,
        cfg: &Oauth2Config,
        now: u64,
        status: Option<u16>,
        body: &[u8],
    ) -> Result<Rc<Discovery>, String> {
        self.in_flight = None;
        let doc = Rc::new(Discovery::parse(cfg, status, body)?);
        self.doc = Some(Rc::clone(&doc));
        self.fetched_at = now;
        Ok(doc)
    }
}
