//! Verified-token cache: a token whose signature and claims verified is remembered by the
//! SHA-256 of everything its verdict depends on (the token's bytes, the verifying key's public
//! material, the issuer, the audiences, the clock skew and the identity claim), so the next request with the same
//! token skips the signature check (an RS256 verification costs milliseconds in the Wasm VM).
//!
//! Safe by construction: only successes are remembered; a hit re-checks `exp` and `nbf` against
//! the request's time with the same skew, so a hit answers exactly what a fresh verification
//! would. A new configuration or a rotated key changes the digest (stale entries never match
//! and age out). Bounded: at most [`MAX_ENTRIES`] per Wasm VM (one per Envoy worker); a full
//! cache drops its expired entries, then everything.

use std::{cell::RefCell, collections::HashMap};

use sha2::{Digest, Sha256};

/// Most tokens remembered per VM.
pub const MAX_ENTRIES: usize = 4096;

/// What a verified token established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub sub: String,
    pub exp: u64,
    pub nbf: Option<u64>,
}

/// The digest an entry is found by.
pub type CacheKey = [u8; 32];

/// Verified tokens by digest.
#[derive(Debug, Default)]
pub struct VerifiedTokens {
    entries: HashMap<CacheKey, Verdict>,
}

/// Feeds a length-prefixed field, so that no two field sequences hash the same bytes.
fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

/// The digest of a verification's inputs.
pub fn cache_key<'a>(
    token: &str,
    key_fingerprint: &[u8; 32],
    issuer: &str,
    audiences: impl IntoIterator<Item = &'a String>,
    clock_skew_s: u64,
    identity_claim: Option<&[String]>,
) -> CacheKey {
    let mut h = Sha256::new();
    field(&mut h, token.as_bytes());
    field(&mut h, key_fingerprint);
    field(&mut h, issuer.as_bytes());
    for aud in audiences {
        field(&mut h, aud.as_bytes());
    }
    h.update(clock_skew_s.to_le_bytes());
    // `sub` (no claim) and a claim path hash differently: a 0 or 1 marker, then the segments.
    h.update([u8::from(identity_claim.is_some())]);
    for segment in identity_claim.unwrap_or_default() {
        field(&mut h, segment.as_bytes());
    }
    h.finalize().into()
}

/// Whether `v` is valid at `now` with `skew`: the same test as a fresh verification's.
fn valid(v: &Verdict, now: u64, skew: u64) -> bool {
    now <= v.exp.saturating_add(skew) && v.nbf.is_none_or(|nbf| nbf <= now.saturating_add(skew))
}

impl VerifiedTokens {
    /// The subject of a remembered token still valid at `now`.
    pub fn get(&self, key: &CacheKey, now: u64, skew: u64) -> Option<String> {
        self.entries
            .get(key)
            .filter(|v| valid(v, now, skew))
            .map(|v| v.sub.clone())
    }

    /// Remembers a token that just verified.
    pub fn insert(&mut self, key: CacheKey, verdict: Verdict, now: u64, skew: u64) {
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.retain(|_, v| valid(v, now, skew));
            if self.entries.len() >= MAX_ENTRIES {
                self.entries.clear();
            }
        }
        self.entries.insert(key, verdict);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

thread_local! {
    /// This VM's cache (Envoy runs one VM per worker thread; host tests, one per test thread).
    static VERIFIED: RefCell<VerifiedTokens> = RefCell::default();
}

/// [`VerifiedTokens::get`] on this thread's cache.
pub fn lookup(key: &CacheKey, now: u64, skew: u64) -> Option<String> {
    VERIFIED.with(|c| c.try_borrow().ok()?.get(key, now, skew))
}

/// [`VerifiedTokens::insert`] on this thread's cache.
pub fn remember(key: CacheKey, verdict: Verdict, now: u64, skew: u64) {
    VERIFIED.with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            c.insert(key, verdict, now, skew);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(exp: u64, nbf: Option<u64>) -> Verdict {
        Verdict {
            sub: "alice".into(),
            exp,
            nbf,
        }
    }

    #[test]
    fn every_input_changes_the_key() {
        let auds = vec!["a".to_string()];
        let base = cache_key("t", &[0; 32], "iss", &auds, 60, None);
        assert_ne!(base, cache_key("u", &[0; 32], "iss", &auds, 60, None));
        assert_ne!(base, cache_key("t", &[1; 32], "iss", &auds, 60, None));
        assert_ne!(base, cache_key("t", &[0; 32], "is", &auds, 60, None));
        assert_ne!(
            base,
            cache_key("t", &[0; 32], "iss", &vec!["b".to_string()], 60, None)
        );
        assert_ne!(base, cache_key("t", &[0; 32], "iss", &auds, 30, None));
        let groups = ["groups".to_string()];
        assert_ne!(
            base,
            cache_key("t", &[0; 32], "iss", &auds, 60, Some(&groups))
        );
        // Length prefixes: moving a byte between fields changes the key.
        assert_ne!(
            cache_key("t", &[0; 32], "ab", &vec!["c".to_string()], 60, None),
            cache_key("t", &[0; 32], "a", &vec!["bc".to_string()], 60, None)
        );
    }

    #[test]
    fn hits_respect_exp_and_nbf_with_skew() {
        let mut c = VerifiedTokens::default();
        let k = [7; 32];
        c.insert(k, verdict(1000, Some(900)), 950, 10);
        assert_eq!(c.get(&k, 950, 10).as_deref(), Some("alice"));
        assert_eq!(c.get(&k, 1010, 10).as_deref(), Some("alice"));
        assert_eq!(c.get(&k, 1011, 10), None, "expired beyond the skew");
        assert_eq!(c.get(&k, 889, 10), None, "not yet valid (clock went back)");
        assert_eq!(c.get(&[8; 32], 950, 10), None);
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_everything() {
        let mut c = VerifiedTokens::default();
        for i in 0..MAX_ENTRIES {
            let mut k = [0; 32];
            k[..8].copy_from_slice(&(i as u64).to_le_bytes());
            let exp = if i % 2 == 0 { 100 } else { 10_000 };
            c.insert(k, verdict(exp, None), 50, 0);
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        c.insert([0xff; 32], verdict(10_000, None), 500, 0);
        assert_eq!(c.len(), MAX_ENTRIES / 2 + 1);
    }
}
