//! Signed object URLs for stores that have no presigning of their own (the local directory):
//! `<base>/storage/v1/objects/<key>?expires=<unix s>&signature=<hex HMAC-SHA256>`. Pure: signing
//! and checking are functions of the key, the expiry, the secret and the clock.
//!
//! The secret never leaves the process that signs and serves (the coordinator); a URL grants
//! one GET of one key until it expires, like an S3 presigned URL.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The path every signed URL starts with, after the base.
pub const OBJECTS_PATH: &str = nsight_contracts::routes::STORAGE_OBJECTS;

/// Longest lifetime a URL may have (the same cap as S3's presigned URLs).
pub const MAX_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// Signs and checks object URLs with one secret.
#[derive(Clone)]
pub struct UrlSigner {
    base: String,
    secret: [u8; 32],
}

impl std::fmt::Debug for UrlSigner {
    /// Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlSigner")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Why a signed URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the URL has no `expires` and `signature` parameters: ask the coordinator for a download URL")]
    Unsigned,
    #[error("the URL expired: ask the coordinator for a new download URL")]
    Expired,
    #[error("the URL's signature does not match: it was altered or signed by another coordinator")]
    BadSignature,
    #[error(
        "the URL is valid for longer than the 7-day maximum: ask the coordinator for a new \
         download URL"
    )]
    TooLong,
}

impl UrlSigner {
    /// `base` is what users reach the object server at, e.g. `http://localhost:9000` (the
    /// gateway's storage proxy); a trailing `/` is dropped.
    pub fn new(base: &str, secret: [u8; 32]) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            secret,
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// A URL for one GET of `key`, valid for `lifetime` (capped at [`MAX_LIFETIME`]) from `now`.
    pub fn sign(&self, key: &str, lifetime: Duration, now: SystemTime) -> String {
        let expires = unix_secs(now).saturating_add(lifetime.min(MAX_LIFETIME).as_secs());
        format!(
            "{}{OBJECTS_PATH}{}?expires={expires}&signature={}",
            self.base,
            encode_key(key),
            self.signature(key, expires)
        )
    }

    /// Checks the `expires` and `signature` query parameters for `key` (already decoded).
    pub fn verify(
        &self,
        key: &str,
        expires: Option<&str>,
        signature: Option<&str>,
        now: SystemTime,
    ) -> Result<(), SignatureError> {
        let (Some(expires), Some(signature)) = (expires, signature) else {
            return Err(SignatureError::Unsigned);
        };
        let expires: u64 = expires.parse().map_err(|_| SignatureError::BadSignature)?;
        let wanted = self.signature(key, expires);
        if !bool::from(wanted.as_bytes().ct_eq(signature.as_bytes())) {
            return Err(SignatureError::BadSignature);
        }
        if unix_secs(now) > expires {
            return Err(SignatureError::Expired);
        }
        // However it was signed (an older coordinator, a clock set back), no URL outlives the
        // documented cap.
        if expires > unix_secs(now).saturating_add(MAX_LIFETIME.as_secs()) {
            return Err(SignatureError::TooLong);
        }
        Ok(())
    }

    fn signature(&self, key: &str, expires: u64) -> String {
        hex::encode(hmac_sha256(
            &self.secret,
            format!("GET\n{key}\n{expires}").as_bytes(),
        ))
    }
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// HMAC (RFC 2104) over SHA-256.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut padded = [0u8; BLOCK];
    padded[..key.len()].copy_from_slice(key);
    let mut inner = Sha256::new();
    inner.update(padded.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(padded.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// Percent-encodes everything but unreserved characters and `/`.
pub fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> UrlSigner {
        UrlSigner::new("http://localhost:9000/", [7; 32])
    }

    fn parts(url: &str) -> (String, String, String) {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let key = path
            .strip_prefix("http://localhost:9000/storage/v1/objects/")
            .unwrap_or_default()
            .to_owned();
        let mut expires = String::new();
        let mut signature = String::new();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("expires", v)) => expires = v.to_owned(),
                Some(("signature", v)) => signature = v.to_owned(),
                _ => {}
            }
        }
        (key, expires, signature)
    }

    #[test]
    fn hmac_matches_openssl() {
        // `printf hello | openssl dgst -sha256 -mac HMAC -macopt hexkey:0707...07` (32 bytes).
        assert_eq!(
            hex::encode(hmac_sha256(&[7; 32], b"hello")),
            "290af183d08286ae740dfed386724985dc666de6350a8df2e8520307ae2503ed"
        );
    }

    #[test]
    fn a_signed_url_verifies_until_it_expires() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let url = signer().sign("t/s/1/a b.nsys-rep", Duration::from_secs(60), now);
        assert!(url.starts_with("http://localhost:9000/storage/v1/objects/t/s/1/a%20b.nsys-rep?"));
        let (_, expires, signature) = parts(&url);
        let key = "t/s/1/a b.nsys-rep";
        let s = signer();
        assert_eq!(s.verify(key, Some(&expires), Some(&signature), now), Ok(()));
        let later = now + Duration::from_secs(61);
        assert_eq!(
            s.verify(key, Some(&expires), Some(&signature), later),
            Err(SignatureError::Expired)
        );
    }

    #[test]
    fn altered_urls_are_refused() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let (_, expires, signature) =
            parts(&signer().sign("t/s/1/a", Duration::from_secs(60), now));
        let s = signer();
        let bad = Err(SignatureError::BadSignature);
        assert_eq!(
            s.verify("t/s/1/b", Some(&expires), Some(&signature), now),
            bad
        );
        let longer = (expires.parse::<u64>().unwrap_or(0) + 3600).to_string();
        assert_eq!(
            s.verify("t/s/1/a", Some(&longer), Some(&signature), now),
            bad
        );
        let other = UrlSigner::new("http://localhost:9000", [8; 32]);
        assert_eq!(
            other.verify("t/s/1/a", Some(&expires), Some(&signature), now),
            bad
        );
        assert_eq!(
            s.verify("t/s/1/a", None, Some(&signature), now),
            Err(SignatureError::Unsigned)
        );
    }

    #[test]
    fn lifetimes_are_capped_at_seven_days() {
        let now = UNIX_EPOCH;
        let (_, expires, _) = parts(&signer().sign("k", Duration::from_secs(u64::MAX / 2), now));
        assert_eq!(expires, MAX_LIFETIME.as_secs().to_string());
    }

    /// A URL correctly signed for longer than the cap (by an older coordinator, or with the
    /// clock set back) is refused; one at the cap is served (issue 22, item 9).
    #[test]
    fn a_url_valid_beyond_the_cap_is_refused_however_it_was_signed() {
        let s = signer();
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let too_far = 1_000_000 + MAX_LIFETIME.as_secs() + 1;
        let signature = s.signature("k", too_far);
        assert_eq!(
            s.verify("k", Some(&too_far.to_string()), Some(&signature), now),
            Err(SignatureError::TooLong)
        );
        let (_, expires, signature) = parts(&s.sign("k", MAX_LIFETIME, now));
        assert_eq!(s.verify("k", Some(&expires), Some(&signature), now), Ok(()));
    }

    #[test]
    fn keys_are_percent_encoded_except_slashes() {
        assert_eq!(encode_key("a/b c/ü?&"), "a/b%20c/%C3%BC%3F%26");
    }
}
