//! The issuer's JWKS fetched from its `jwks_uri`: the configuration (which Envoy cluster, which
//! URL, how long keys are cached, how often a refresh may happen) and the cache's state machine.
//! Pure: the glue (filter.rs) does the HTTP call and hands the answer here with the time.
//!
//! ```text
//!            tick (1 s) / unknown kid                 answer (status, body)
//!  Empty ───────────────────────────> fetching ─────────────────────────────> Loaded(keys)
//!    ^  refused or unreachable: retry after 1 s       │ ttl passed / unknown kid, at most
//!    └────────────────────────────────────────────────┘ once per min_refresh_interval_s
//! ```
//! A failed refresh keeps the keys already loaded (an issuer outage does not lock out valid
//! tokens); before the first successful fetch there are no keys and requests get a 503.

use std::rc::Rc;

use serde::Deserialize;

use crate::jwks::{parse_jwks, VerifyKey};

/// Largest JWKS document accepted, in bytes.
pub const MAX_JWKS_BYTES: usize = 64 * 1024;
/// Retry period while no keys were ever loaded, in seconds.
pub const EMPTY_RETRY_S: u64 = 1;

/// `remote_jwks` in the `jwt` configuration, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRemoteJwks {
    /// The Envoy cluster that reaches the issuer.
    cluster: String,
    /// The issuer's `jwks_uri`, `http://` or `https://` (TLS is the cluster's business).
    uri: String,
    #[serde(default = "default_ttl")]
    cache_ttl_s: u64,
    #[serde(default = "default_min_refresh")]
    min_refresh_interval_s: u64,
    #[serde(default = "default_timeout")]
    timeout_ms: u64,
}

fn default_ttl() -> u64 {
    600
}
fn default_min_refresh() -> u64 {
    30
}
fn default_timeout() -> u64 {
    5000
}

/// Where and how to fetch the JWKS. Invariants: cluster non-empty; `authority` non-empty;
/// `path` starts with `/`; 1 <= min_refresh_interval_s <= cache_ttl_s <= 86400; timeout in
/// 100..=60000 ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteJwks {
    pub cluster: String,
    pub uri: String,
    pub authority: String,
    pub path: String,
    pub cache_ttl_s: u64,
    pub min_refresh_interval_s: u64,
    pub timeout_ms: u64,
}

impl RemoteJwks {
    pub(crate) fn from_raw(raw: RawRemoteJwks) -> Result<Self, String> {
        if raw.cluster.is_empty() {
            return Err("`remote_jwks.cluster` must name the Envoy cluster of the issuer".into());
        }
        let rest = raw
            .uri
            .strip_prefix("https://")
            .or_else(|| raw.uri.strip_prefix("http://"))
            .ok_or("`remote_jwks.uri` must be an http:// or https:// URL (the jwks_uri)")?;
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, "/"),
        };
        let printable = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
        if authority.is_empty() || !printable(authority) || !printable(path) {
            return Err(
                "`remote_jwks.uri` has no host or contains spaces/control characters".into(),
            );
        }
        if raw.cache_ttl_s > 86_400 {
            return Err(format!(
                "`remote_jwks.cache_ttl_s` is {}; at most 86400 (one day)",
                raw.cache_ttl_s
            ));
        }
        if raw.min_refresh_interval_s == 0 || raw.min_refresh_interval_s > raw.cache_ttl_s {
            return Err(format!(
                "`remote_jwks.min_refresh_interval_s` is {}; between 1 and cache_ttl_s ({})",
                raw.min_refresh_interval_s, raw.cache_ttl_s
            ));
        }
        if !(100..=60_000).contains(&raw.timeout_ms) {
            return Err(format!(
                "`remote_jwks.timeout_ms` is {}; between 100 and 60000",
                raw.timeout_ms
            ));
        }
        Ok(Self {
            cluster: raw.cluster,
            authority: authority.to_owned(),
            path: path.to_owned(),
            uri: raw.uri,
            cache_ttl_s: raw.cache_ttl_s,
            min_refresh_interval_s: raw.min_refresh_interval_s,
            timeout_ms: raw.timeout_ms,
        })
    }
}

/// One worker's cache of the fetched keys.
#[derive(Debug, Default)]
pub struct JwksCache {
    keys: Option<Rc<Vec<VerifyKey>>>,
    fetched_at: u64,
    last_attempt: Option<u64>,
    /// Since when a fetch is in flight.
    in_flight: Option<u64>,
    fetches: u64,
}

/// Why a fetch brought no keys; logged by the glue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchError(pub String);

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl JwksCache {
    /// The keys loaded, if any fetch ever succeeded.
    pub fn keys(&self) -> Option<Rc<Vec<VerifyKey>>> {
        self.keys.clone()
    }

    /// How many fetches were started.
    pub fn fetches(&self) -> u64 {
        self.fetches
    }

    fn busy(&self, cfg: &RemoteJwks, now: u64) -> bool {
        // A lost answer must not wedge the cache: a fetch older than its timeout is over.
        self.in_flight
            .is_some_and(|since| now <= since + cfg.timeout_ms.div_ceil(1000) + 1)
    }

    /// Whether the periodic tick should fetch now: nothing loaded (retry every
    /// [`EMPTY_RETRY_S`]), or the keys are older than the TTL (at most once per
    /// `min_refresh_interval_s`).
    pub fn refresh_due(&self, cfg: &RemoteJwks, now: u64) -> bool {
        if self.busy(cfg, now) {
            return false;
        }
        let since_attempt = self.last_attempt.map(|t| now.saturating_sub(t));
        match &self.keys {
            None => since_attempt.is_none_or(|s| s >= EMPTY_RETRY_S),
            Some(_) => {
                now >= self.fetched_at.saturating_add(cfg.cache_ttl_s)
                    && since_attempt.is_none_or(|s| s >= cfg.min_refresh_interval_s)
            }
        }
    }

    /// Whether a token with an unknown `kid` may trigger a fetch now (key rotation at the
    /// issuer): at most once per `min_refresh_interval_s`, so forged kids cannot flood it.
    pub fn may_refresh_for_unknown_kid(&self, cfg: &RemoteJwks, now: u64) -> bool {
        !self.busy(cfg, now)
            && self
                .last_attempt
                .is_none_or(|t| now.saturating_sub(t) >= cfg.min_refresh_interval_s)
    }

    /// A fetch was dispatched at `now`.
    pub fn started(&mut self, now: u64) {
        self.in_flight = Some(now);
        self.last_attempt = Some(now);
        self.fetches += 1;
    }

    /// The fetch could not be dispatched (unknown cluster, ...).
    pub fn abandoned(&mut self) {
        self.in_flight = None;
    }

    /// The answer to a fetch: `status` (None when Envoy got no response: timeout, reset) and
    /// body. On success the keys are replaced and their count returned; on failure the keys
    /// already loaded stay.
    pub fn finished(
        &mut self,
        now: u64,
        status: Option<u16>,
        body: &[u8],
    ) -> Result<usize, FetchError> {
        self.in_flight = None;
        let keys = parse_answer(status, body)?;
        let n = keys.len();
        self.keys = Some(Rc::new(keys));
        self.fetched_at = now;
        Ok(n)
    }
}

/// The keys of a JWKS answer, or why it is unusable.
pub fn parse_answer(status: Option<u16>, body: &[u8]) -> Result<Vec<VerifyKey>, FetchError> {
    match status {
        None => return Err(FetchError("no response (unreachable or timed out)".into())),
        Some(200) => {}
        Some(s) => return Err(FetchError(format!("HTTP status {s}, expected 200"))),
    }
    if body.len() > MAX_JWKS_BYTES {
        return Err(FetchError(format!(
            "the JWKS is {} bytes; at most {MAX_JWKS_BYTES}",
            body.len()
        )));
    }
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| FetchError(format!("the JWKS is not JSON: {e}")))?;
    parse_jwks(&value).map_err(|e| FetchError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(json: &str) -> Result<RemoteJwks, String> {
        RemoteJwks::from_raw(serde_json::from_str(json).map_err(|e| e.to_string())?)
    }

    fn good() -> RemoteJwks {
        cfg(
            r#"{"cluster":"idp","uri":"http://127.0.0.1:9/jwks","cache_ttl_s":60,
               "min_refresh_interval_s":10}"#,
        )
        .unwrap()
    }

    const JWKS: &[u8] = br#"{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"a",
        "x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;

    #[test]
    fn uri_splits_into_authority_and_path() {
        let c = good();
        assert_eq!(
            (c.authority.as_str(), c.path.as_str()),
            ("127.0.0.1:9", "/jwks")
        );
        let c = cfg(r#"{"cluster":"idp","uri":"https://idp.example"}"#).unwrap();
        assert_eq!(
            (c.authority.as_str(), c.path.as_str()),
            ("idp.example", "/")
        );
        assert_eq!((c.cache_ttl_s, c.min_refresh_interval_s), (600, 30));
    }

    #[test]
    fn bad_remote_configs_are_refused_with_the_member() {
        for (json, says) in [
            (r#"{"cluster":"","uri":"http://a/j"}"#, "cluster"),
            (
                r#"{"cluster":"c","uri":"ftp://a/j"}"#,
                "http:// or https://",
            ),
            (r#"{"cluster":"c","uri":"http:///j"}"#, "no host"),
            (r#"{"cluster":"c","uri":"http://a/j k"}"#, "spaces"),
            (
                r#"{"cluster":"c","uri":"http://a","cache_ttl_s":100000}"#,
                "cache_ttl_s",
            ),
            (
                r#"{"cluster":"c","uri":"http://a","min_refresh_interval_s":0}"#,
                "min_refresh",
            ),
            (
                r#"{"cluster":"c","uri":"http://a","cache_ttl_s":5}"#,
                "min_refresh",
            ),
            (
                r#"{"cluster":"c","uri":"http://a","timeout_ms":5}"#,
                "timeout_ms",
            ),
        ] {
            let e = cfg(json).unwrap_err();
            assert!(e.contains(says), "{json}: {e}");
        }
        assert!(cfg(r#"{"cluster":"c","uri":"http://a","extra":1}"#).is_err());
    }

    #[test]
    fn empty_cache_fetches_at_once_and_retries_every_second() {
        let c = good();
        let mut cache = JwksCache::default();
        assert!(cache.keys().is_none());
        assert!(cache.refresh_due(&c, 1000));
        cache.started(1000);
        assert!(
            !cache.refresh_due(&c, 1000),
            "one fetch in flight at a time"
        );
        assert!(cache.finished(1000, None, b"").is_err());
        assert!(!cache.refresh_due(&c, 1000));
        assert!(cache.refresh_due(&c, 1001));
        cache.started(1001);
        assert!(cache.finished(1001, Some(503), b"down").is_err());
        assert!(cache.keys().is_none());
        cache.started(1002);
        assert_eq!(cache.finished(1002, Some(200), JWKS), Ok(1));
        assert_eq!(cache.keys().map(|k| k.len()), Some(1));
        assert_eq!(cache.fetches(), 3);
    }

    #[test]
    fn loaded_keys_refresh_after_the_ttl_and_survive_a_failed_refresh() {
        let c = good();
        let mut cache = JwksCache::default();
        cache.started(1000);
        cache.finished(1000, Some(200), JWKS).unwrap();
        assert!(!cache.refresh_due(&c, 1059));
        assert!(cache.refresh_due(&c, 1060));
        cache.started(1060);
        assert!(cache.finished(1060, Some(500), b"").is_err());
        assert!(
            cache.keys().is_some(),
            "a failed refresh keeps the loaded keys"
        );
        assert!(
            !cache.refresh_due(&c, 1069),
            "retry limited by min_refresh_interval_s"
        );
        assert!(cache.refresh_due(&c, 1070));
    }

    #[test]
    fn unknown_kid_refresh_is_rate_limited() {
        let c = good();
        let mut cache = JwksCache::default();
        cache.started(1000);
        cache.finished(1000, Some(200), JWKS).unwrap();
        assert!(!cache.may_refresh_for_unknown_kid(&c, 1005));
        assert!(cache.may_refresh_for_unknown_kid(&c, 1010));
        cache.started(1010);
        assert!(!cache.may_refresh_for_unknown_kid(&c, 1010), "in flight");
        cache.abandoned();
        assert!(!cache.may_refresh_for_unknown_kid(&c, 1015));
        // A fetch whose answer never came is over after its timeout.
        cache.started(1020);
        assert!(!cache.may_refresh_for_unknown_kid(&c, 1025));
        assert!(cache.may_refresh_for_unknown_kid(&c, 1030));
    }

    #[test]
    fn unusable_answers_are_explained() {
        let e = |status, body: &[u8]| parse_answer(status, body).unwrap_err().0;
        assert!(e(Some(404), b"").contains("404"));
        assert!(e(Some(200), b"<html>").contains("not JSON"));
        assert!(e(Some(200), br#"{"keys":[]}"#).contains("no keys"));
        assert!(e(Some(200), &vec![b' '; MAX_JWKS_BYTES + 1]).contains("at most"));
        let private = br#"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","d":"AQAB"}]}"#;
        assert!(e(Some(200), private).contains("private"));
    }
}
