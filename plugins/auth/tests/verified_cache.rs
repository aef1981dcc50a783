//! The verified-token cache (`jwt::verified`) never changes a verdict: a token accepted once is
//! still refused once it expires, under another issuer/audience policy, or when its key is no
//! longer trusted (a rotated JWKS with the same kid).

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use jsonwebtoken::{encode, jwk::Jwk, Algorithm, EncodingKey, Header};
use nsight_auth_filter::{decide, AuthConfig, Decision};
use serde_json::{json, Value};

const NOW: u64 = 1_800_000_000;
const ISS: &str = "https://idp.test";

fn key(name: &str) -> EncodingKey {
    let pem = std::fs::read(format!("{}/tests/keys/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    EncodingKey::from_rsa_pem(&pem).unwrap()
}

fn jwks(key: &EncodingKey) -> Value {
    let mut jwk = Jwk::from_encoding_key(key, Algorithm::RS256).unwrap();
    jwk.common.key_id = Some("rsa-1".into());
    json!({"keys": [serde_json::to_value(jwk).unwrap()]})
}

fn config(key: &EncodingKey, aud: &str) -> AuthConfig {
    let c = json!({"mode": "jwt", "jwt": {"issuer": ISS, "audiences": [aud], "jwks": jwks(key),
        "clock_skew_s": 10}});
    AuthConfig::parse(c.to_string().as_bytes()).unwrap()
}

fn token(key: &EncodingKey) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("rsa-1".into());
    let claims = json!({"iss": ISS, "aud": "nsight-cloud", "sub": "alice", "exp": NOW + 100,
        "nbf": NOW - 100});
    format!("Bearer {}", encode(&header, &claims, key).unwrap())
}

fn allowed(d: &Decision) -> bool {
    matches!(d, Decision::Allow { identity } if identity == "alice")
}

#[test]
fn cached_tokens_get_the_same_verdict_as_fresh_ones() {
    let (rsa, other) = (key("rsa-test-only.pem"), key("rsa-other-test-only.pem"));
    let trusted = config(&rsa, "nsight-cloud");
    let t = token(&rsa);
    assert!(allowed(&decide(&trusted, Some(&t), NOW)));
    assert!(
        allowed(&decide(&trusted, Some(&t), NOW + 50)),
        "a cache hit"
    );
    // Expired beyond the skew: refused although remembered.
    assert!(!allowed(&decide(&trusted, Some(&t), NOW + 111)));
    assert!(!allowed(&decide(&trusted, Some(&t), NOW - 111)));
    // Another audience policy: refused.
    assert!(!allowed(&decide(&config(&rsa, "other"), Some(&t), NOW)));
    // The JWKS rotated to another key under the same kid: refused.
    let rotated = config(&other, "nsight-cloud");
    let d = decide(&rotated, Some(&t), NOW);
    assert!(!allowed(&d), "{d:?}");
    // The original policy still accepts it.
    assert!(allowed(&decide(&trusted, Some(&t), NOW)));
}
