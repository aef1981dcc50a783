//! Streamer grants: how a browser that holds an API key opens a streamer in a new tab. A
//! navigation carries no `Authorization` header, so the page first asks the gateway, with its
//! key, for a grant; the filter answers with a cookie that opens that one streamer's path, and
//! nothing else, for [`GRANT_TTL_S`].
//!
//! ```text
//!  page ──POST /streamers/<name>/.nsight-grant (Authorization: Bearer <key>)──> filter
//!       <── 204  Set-Cookie: nsight_grant=<sealed {scope, id, exp}>; Path=/streamers/<name>/;
//!                Max-Age=28800; Secure; HttpOnly; SameSite=Strict
//!  new tab ──GET /streamers/<name>/... (Cookie: nsight_grant=...)──> filter: open, check the
//!       scope and expiry ──> forwarded as `id`, the grant cookie removed from the request
//! ```
//!
//! The cookie is sealed like the OAuth2 session (`oauth::cookie`, purpose `grant`) under a key
//! derived from the configured API keys ([`grant_key`]): no key to distribute, and rotating the
//! API keys ends every grant. `SameSite=Strict` and the path keep it off every API route and off
//! requests other sites start, so it cannot be used for cross-site requests; asking for one
//! needs the key itself (a header no other site can set). Pure: the glue is in `filter.rs`.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{
    config::{is_namespace_name, ApiKey},
    oauth::cookie,
};

/// Where grants apply: the gateway's streamer routes (`nsight_contracts::routes::STREAMERS`).
pub const GRANT_PREFIX: &str = "/streamers/";
/// The last segment of a grant request: `POST /streamers/<name>/.nsight-grant`
/// (`nsight_contracts::routes::STREAMER_GRANT`). A leading dot: never a streamer's name.
pub const GRANT_SEGMENT: &str = ".nsight-grant";
/// The grant cookie's name.
pub const GRANT_COOKIE: &str = "nsight_grant";
/// How long a grant opens its streamer: a working day; the page asks again on every open.
pub const GRANT_TTL_S: u64 = 8 * 3600;
/// The sealing purpose: a grant never opens as a session cookie, nor one as a grant.
const PURPOSE: &str = "grant";

/// What a grant cookie holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The path it opens: `/streamers/<name>/`.
    pub scope: String,
    /// The identity it was granted to (forwarded as the request's identity).
    pub id: String,
    /// Its end, in seconds since the epoch.
    pub exp: u64,
}

/// The key grants are sealed under, derived from every configured API key (in order); `None`
/// without keys (a JWT-only gateway offers no grants).
pub fn grant_key(api_keys: &[ApiKey]) -> Option<Vec<u8>> {
    if api_keys.is_empty() {
        return None;
    }
    let mut digest = Sha256::new();
    for key in api_keys {
        digest.update((key.key.len() as u64).to_be_bytes());
        digest.update(key.key.as_bytes());
    }
    // An HMAC under the keys' digest, so the grant key is not the digest itself.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&digest.finalize()).ok()?;
    mac.update(b"nsight-streamer-grant-v1");
    Some(mac.finalize().into_bytes().to_vec())
}

/// The path without its query string.
fn path_only(path: &str) -> &str {
    path.split_once('?').map_or(path, |(p, _)| p)
}

/// The scope a grant request asks for: `/streamers/<name>/` for
/// `/streamers/<name>/.nsight-grant` (any query ignored); `None` for every other path.
pub fn requested_scope(path: &str) -> Option<String> {
    let name = path_only(path)
        .strip_prefix(GRANT_PREFIX)?
        .strip_suffix(GRANT_SEGMENT)?
        .strip_suffix('/')?;
    // A streamer's name is a DNS-1123 label, as a namespace's is.
    is_namespace_name(name).then(|| format!("{GRANT_PREFIX}{name}/"))
}

/// A granted identity's cookie for `scope`, valid from `now` for [`GRANT_TTL_S`].
pub fn grant_cookie(key: &[u8], scope: &str, identity: &str, now: u64) -> String {
    let grant = Grant {
        scope: scope.to_owned(),
        id: identity.to_owned(),
        exp: now.saturating_add(GRANT_TTL_S),
    };
    let sealed = cookie::seal(key, PURPOSE, &grant);
    format!(
        "{GRANT_COOKIE}={sealed}; Path={scope}; Max-Age={GRANT_TTL_S}; Secure; HttpOnly; \
         SameSite=Strict"
    )
}

/// The identity a request to `path` carries in its grant cookies (the `Cookie` header), if one
/// of them is sealed under `key`, unexpired at `now` and covers `path`. Paths outside
/// [`GRANT_PREFIX`], or that climb out of the scope (`..`), are never opened by a grant.
pub fn granted_identity(key: &[u8], cookie_header: &str, path: &str, now: u64) -> Option<String> {
    let path = path_only(path);
    let encoded = path.to_ascii_lowercase();
    if !path.starts_with(GRANT_PREFIX)
        || path.contains("/..")
        || encoded.contains("%2e")
        || encoded.contains("%2f")
    {
        return None;
    }
    cookie::cookie_values(cookie_header, GRANT_COOKIE)
        .filter_map(|sealed| cookie::open::<Grant>(key, PURPOSE, sealed).ok())
        .find(|g| g.exp > now && g.scope.starts_with(GRANT_PREFIX) && path.starts_with(&g.scope))
        .map(|g| g.id)
}

/// The `Cookie` header without the grant cookies (the streamer behind never sees them); `None`
/// when nothing else is left.
pub fn without_grants(cookie_header: &str) -> Option<String> {
    let rest: Vec<&str> = cookie_header
        .split(';')
        .map(str::trim)
        .filter(|pair| {
            !pair.is_empty() && pair.split_once('=').map_or(*pair, |(k, _)| k) != GRANT_COOKIE
        })
        .collect();
    (!rest.is_empty()).then(|| rest.join("; "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;

    fn key() -> Vec<u8> {
        grant_key(&[ApiKey::new("test-key-0123456789abcdef")]).unwrap()
    }

    /// The sealed value of a `Set-Cookie` line.
    fn value(set_cookie: &str) -> &str {
        set_cookie
            .split(';')
            .next()
            .and_then(|p| p.split_once('='))
            .map(|(_, v)| v)
            .unwrap()
    }

    #[test]
    fn only_a_streamers_grant_path_asks_for_a_scope() {
        assert_eq!(
            requested_scope("/streamers/streamer-4xk2p/.nsight-grant").as_deref(),
            Some("/streamers/streamer-4xk2p/")
        );
        assert_eq!(
            requested_scope("/streamers/s1/.nsight-grant?x=1").as_deref(),
            Some("/streamers/s1/")
        );
        for path in [
            "/streamers/.nsight-grant",
            "/streamers//.nsight-grant",
            "/streamers/a/b/.nsight-grant",
            "/streamers/../.nsight-grant",
            "/streamers/UPPER/.nsight-grant",
            "/streamers/s1/.nsight-grant/",
            "/coordinator/v1/.nsight-grant",
            "/streamers/s1/",
        ] {
            assert_eq!(requested_scope(path), None, "{path}");
        }
    }

    #[test]
    fn a_grant_opens_its_streamer_until_it_expires_and_nothing_else() {
        let key = key();
        let set = grant_cookie(&key, "/streamers/s1/", "api-key:team-a", 1_000);
        assert!(
            set.contains("; Path=/streamers/s1/; Max-Age=28800; Secure; HttpOnly; SameSite=Strict"),
            "{set}"
        );
        let header = format!("theme=dark; {GRANT_COOKIE}={}", value(&set));
        let open = |path: &str, now: u64| granted_identity(&key, &header, path, now);
        assert_eq!(
            open("/streamers/s1/", 1_001).as_deref(),
            Some("api-key:team-a")
        );
        assert_eq!(
            open("/streamers/s1/app.js?v=2", 1_001).as_deref(),
            Some("api-key:team-a")
        );
        // Expired, another streamer, a name that extends this one, out of the scope, API routes.
        assert_eq!(open("/streamers/s1/", 1_000 + GRANT_TTL_S), None);
        assert_eq!(open("/streamers/s2/", 1_001), None);
        assert_eq!(open("/streamers/s10/", 1_001), None);
        assert_eq!(open("/streamers/s1/../s2/", 1_001), None);
        assert_eq!(open("/streamers/s1/%2e%2e/s2/", 1_001), None);
        assert_eq!(open("/coordinator/v1/status", 1_001), None);
    }

    #[test]
    fn a_grant_under_other_keys_or_altered_or_of_another_kind_opens_nothing() {
        let key = key();
        let set = grant_cookie(&key, "/streamers/s1/", "api-key", 0);
        let sealed = value(&set).to_owned();
        let other = grant_key(&[ApiKey::new("another-key-0123456789")]).unwrap();
        assert_ne!(key, other);
        let header = format!("{GRANT_COOKIE}={sealed}");
        assert_eq!(granted_identity(&other, &header, "/streamers/s1/", 1), None);
        // One byte of the payload changed.
        let mut altered = sealed.clone().into_bytes();
        altered[3] = if altered[3] == b'A' { b'B' } else { b'A' };
        let altered = format!("{GRANT_COOKIE}={}", String::from_utf8(altered).unwrap());
        assert_eq!(granted_identity(&key, &altered, "/streamers/s1/", 1), None);
        // A session cookie sealed under the same key is not a grant.
        let session = cookie::seal(
            &key,
            "session",
            &Grant {
                scope: "/streamers/s1/".into(),
                id: "x".into(),
                exp: u64::MAX,
            },
        );
        let as_grant = format!("{GRANT_COOKIE}={session}");
        assert_eq!(granted_identity(&key, &as_grant, "/streamers/s1/", 1), None);
        // No keys, no grants; keys in another order make another key.
        assert_eq!(grant_key(&[]), None);
        let ab = grant_key(&[ApiKey::new("a".repeat(16)), ApiKey::new("b".repeat(16))]);
        let ba = grant_key(&[ApiKey::new("b".repeat(16)), ApiKey::new("a".repeat(16))]);
        assert_ne!(ab, ba);
    }

    #[test]
    fn of_several_grants_the_one_for_the_path_opens_it() {
        let key = key();
        let one = grant_cookie(&key, "/streamers/s1/", "alice", 0);
        let two = grant_cookie(&key, "/streamers/s2/", "bob", 0);
        let header = format!(
            "{GRANT_COOKIE}={}; {GRANT_COOKIE}={}; {GRANT_COOKIE}=garbage",
            value(&one),
            value(&two)
        );
        assert_eq!(
            granted_identity(&key, &header, "/streamers/s2/x", 5).as_deref(),
            Some("bob")
        );
        assert_eq!(
            granted_identity(&key, &header, "/streamers/s1/", 5).as_deref(),
            Some("alice")
        );
    }

    #[test]
    fn the_grant_cookies_are_removed_before_forwarding() {
        assert_eq!(
            without_grants("a=1; nsight_grant=x.y;b=2; nsight_grant=z").as_deref(),
            Some("a=1; b=2")
        );
        assert_eq!(without_grants("nsight_grant=x"), None);
        assert_eq!(without_grants(""), None);
        assert_eq!(
            without_grants("nsight_grant_other=1").as_deref(),
            Some("nsight_grant_other=1")
        );
    }
}
