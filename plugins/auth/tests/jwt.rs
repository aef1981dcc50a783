//! The JWT mode on the host: configuration checks and the security table of docs/security.md,
//! with tokens signed here by the committed test-only keys (tests/keys/).

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use jsonwebtoken::{encode, jwk::Jwk, Algorithm, EncodingKey, Header};
use nsight_auth_filter::{
    config::ConfigError,
    decide, decide_with,
    jwks::parse_jwks,
    jwt::{KeySource, TokenError},
    policy::{BearerError, MAX_AUTHORIZATION_LEN},
    AuthConfig, Decision, Denial,
};
use serde_json::{json, Value};

const NOW: u64 = 1_800_000_000;
const ISS: &str = "https://idp.test";
const AUD: &str = "nsight-cloud";
const API_KEY: &str = "test-key-0123456789abcdef";

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/keys/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn rsa() -> EncodingKey {
    EncodingKey::from_rsa_pem(&pem("rsa-test-only.pem")).unwrap()
}
fn rsa_other() -> EncodingKey {
    EncodingKey::from_rsa_pem(&pem("rsa-other-test-only.pem")).unwrap()
}
fn ec() -> EncodingKey {
    EncodingKey::from_ec_pem(&pem("ec-p256-test-only.pem")).unwrap()
}
fn ed() -> EncodingKey {
    EncodingKey::from_ed_pem(&pem("ed25519-test-only.pem")).unwrap()
}

fn jwk(key: &EncodingKey, alg: Algorithm, kid: &str) -> Value {
    let mut jwk = Jwk::from_encoding_key(key, alg).unwrap();
    jwk.common.key_id = Some(kid.into());
    serde_json::to_value(jwk).unwrap()
}

fn jwks() -> Value {
    json!({"keys": [
        jwk(&rsa(), Algorithm::RS256, "rsa-1"),
        jwk(&ec(), Algorithm::ES256, "ec-1"),
        jwk(&ed(), Algorithm::EdDSA, "ed-1"),
    ]})
}

fn config_json(extra: Value) -> Value {
    let mut c = json!({"mode": "jwt", "jwt": {"issuer": ISS, "audiences": [AUD, "other-aud"],
        "jwks": jwks(), "clock_skew_s": 60}});
    if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            c.insert(k.clone(), v.clone());
        }
    }
    c
}

fn config() -> AuthConfig {
    AuthConfig::parse(config_json(json!({})).to_string().as_bytes()).unwrap()
}

fn claims() -> Value {
    json!({"iss": ISS, "aud": AUD, "sub": "alice@example.com", "exp": NOW + 600, "iat": NOW})
}

fn sign(key: &EncodingKey, alg: Algorithm, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, key).unwrap()
}

fn rs256(claims: &Value) -> String {
    sign(&rsa(), Algorithm::RS256, Some("rsa-1"), claims)
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn without(mut claims: Value, key: &str) -> Value {
    claims.as_object_mut().unwrap().remove(key);
    claims
}

/// A token with a header and payload of our choosing and a given signature.
fn raw_token(header: &Value, payload: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(payload.to_string()),
        URL_SAFE_NO_PAD.encode(signature)
    )
}

fn decide_bearer(config: &AuthConfig, token: &str) -> Decision {
    decide(config, Some(&format!("Bearer {token}")), NOW)
}

fn allowed(d: &Decision) -> &str {
    match d {
        Decision::Allow { identity } => identity,
        other => panic!("not allowed: {other:?}"),
    }
}

/// The refusal of a token; asserts it is a 401 `invalid_token` whose text contains `reason`
/// and whose challenge carries it.
fn refused(d: Decision, reason: &str) -> Denial {
    let Decision::Deny(denial) = d else {
        panic!("allowed, expected a refusal containing {reason:?}");
    };
    assert!(
        denial.reason.contains(reason),
        "reason {:?} does not contain {reason:?}",
        denial.reason
    );
    denial
}

fn invalid_token(d: Decision, reason: &str) {
    let denial = refused(d, reason);
    assert_eq!(denial.error, Some(BearerError::InvalidToken));
    let challenge = denial.challenge();
    assert!(
        challenge.starts_with(
            "Bearer realm=\"nsight-cloud\", error=\"invalid_token\", error_description=\""
        ),
        "{challenge}"
    );
}

// ---- Valid tokens ----

#[test]
fn valid_rs256_es256_and_eddsa_tokens_pass_with_their_subject() {
    let c = config();
    assert_eq!(
        allowed(&decide_bearer(&c, &rs256(&claims()))),
        "alice@example.com"
    );
    let es = sign(&ec(), Algorithm::ES256, Some("ec-1"), &claims());
    assert_eq!(allowed(&decide_bearer(&c, &es)), "alice@example.com");
    let eddsa = sign(
        &ed(),
        Algorithm::EdDSA,
        Some("ed-1"),
        &with(claims(), "sub", json!("bob")),
    );
    assert_eq!(allowed(&decide_bearer(&c, &eddsa)), "bob");
}

#[test]
fn audience_may_be_a_list_and_nbf_in_the_past_is_fine() {
    let c = config();
    let t = rs256(&with(claims(), "aud", json!(["x", "other-aud"])));
    assert!(matches!(decide_bearer(&c, &t), Decision::Allow { .. }));
    let t = rs256(&with(claims(), "nbf", json!(NOW - 10)));
    assert!(matches!(decide_bearer(&c, &t), Decision::Allow { .. }));
    // A fractional NumericDate (RFC 7519 allows it).
    let t = rs256(&with(claims(), "exp", json!(NOW as f64 + 10.5)));
    assert!(matches!(decide_bearer(&c, &t), Decision::Allow { .. }));
}

#[test]
fn a_single_key_jwks_accepts_a_token_without_kid() {
    let c = json!({"mode": "jwt", "jwt": {"issuer": ISS, "audiences": [AUD],
        "jwks": {"keys": [jwk(&ec(), Algorithm::ES256, "only")]}}});
    let c = AuthConfig::parse(c.to_string().as_bytes()).unwrap();
    let t = sign(&ec(), Algorithm::ES256, None, &claims());
    assert_eq!(allowed(&decide_bearer(&c, &t)), "alice@example.com");
    // ... but the three-key set cannot tell which key a kid-less token needs.
    let t = sign(&rsa(), Algorithm::RS256, None, &claims());
    invalid_token(decide_bearer(&config(), &t), "no kid header");
}

// ---- The security table (docs/security.md) ----

#[test]
fn no_token_is_refused_with_a_bare_challenge() {
    let d = refused(decide(&config(), None, NOW), "missing Authorization header");
    assert_eq!(d.error, None);
    assert_eq!(d.challenge(), "Bearer realm=\"nsight-cloud\"");
}

#[test]
fn wrong_scheme_is_refused() {
    let t = rs256(&claims());
    for h in [
        format!("Basic {t}"),
        t.clone(),
        format!("Token {t}"),
        "Bearer ".into(),
    ] {
        let d = refused(decide(&config(), Some(&h), NOW), "Bearer scheme");
        assert_eq!(d.error, Some(BearerError::InvalidRequest));
    }
    // The scheme is case-insensitive.
    assert!(matches!(
        decide(&config(), Some(&format!("bearer {t}")), NOW),
        Decision::Allow { .. }
    ));
}

#[test]
fn alg_none_is_refused() {
    for alg in ["none", "None", "NONE"] {
        let t = raw_token(&json!({"alg": alg, "typ": "JWT"}), &claims(), b"");
        invalid_token(decide_bearer(&config(), &t), "alg none");
        // Also without the (empty) signature part.
        let t = t.trim_end_matches('.');
        assert!(matches!(decide_bearer(&config(), t), Decision::Deny(_)));
    }
}

#[test]
fn hs256_signed_with_the_rsa_public_key_is_refused() {
    // The classic key-confusion attack: the verifier's public key used as an HMAC secret.
    let public_pem = pem("rsa-test-only.pub.pem");
    let n = jwk(&rsa(), Algorithm::RS256, "rsa-1")["n"]
        .as_str()
        .unwrap()
        .to_owned();
    for secret in [public_pem.as_slice(), n.as_bytes()] {
        for (alg, name) in [
            (Algorithm::HS256, "HS256"),
            (Algorithm::HS384, "HS384"),
            (Algorithm::HS512, "HS512"),
        ] {
            let t = sign(
                &EncodingKey::from_secret(secret),
                alg,
                Some("rsa-1"),
                &claims(),
            );
            invalid_token(
                decide_bearer(&config(), &t),
                &format!("symmetric algorithm {name}"),
            );
        }
    }
}

#[test]
fn other_algorithms_are_refused() {
    for alg in ["RS384", "PS256", "ES384", "ES512"] {
        let t = raw_token(&json!({"alg": alg, "kid": "rsa-1"}), &claims(), b"sig");
        invalid_token(
            decide_bearer(&config(), &t),
            &format!("algorithm {alg} is not accepted"),
        );
    }
    // A token whose alg does not match its key's type (ES256 header, RSA kid).
    let es = sign(&ec(), Algorithm::ES256, Some("rsa-1"), &claims());
    invalid_token(decide_bearer(&config(), &es), "is a RS256 key");
}

#[test]
fn expired_is_refused_within_the_skew_accepted() {
    let t = rs256(&with(claims(), "exp", json!(NOW - 61)));
    invalid_token(decide_bearer(&config(), &t), "expired 61 s ago");
    // Within the 60 s clock skew: still accepted.
    let t = rs256(&with(claims(), "exp", json!(NOW - 60)));
    assert!(matches!(
        decide_bearer(&config(), &t),
        Decision::Allow { .. }
    ));
}

#[test]
fn a_token_without_exp_is_refused() {
    let t = rs256(&without(claims(), "exp"));
    invalid_token(decide_bearer(&config(), &t), "no expiry");
    let t = rs256(&with(claims(), "exp", json!("tomorrow")));
    invalid_token(decide_bearer(&config(), &t), "exp claim is not a number");
}

#[test]
fn not_yet_valid_is_refused_within_the_skew_accepted() {
    let t = rs256(&with(claims(), "nbf", json!(NOW + 61)));
    invalid_token(decide_bearer(&config(), &t), "not valid yet");
    let t = rs256(&with(claims(), "nbf", json!(NOW + 60)));
    assert!(matches!(
        decide_bearer(&config(), &t),
        Decision::Allow { .. }
    ));
}

#[test]
fn wrong_issuer_is_refused() {
    let t = rs256(&with(claims(), "iss", json!("https://evil.test")));
    invalid_token(
        decide_bearer(&config(), &t),
        "not issued by the expected issuer",
    );
    let t = rs256(&without(claims(), "iss"));
    invalid_token(decide_bearer(&config(), &t), "expected issuer");
}

#[test]
fn wrong_audience_is_refused() {
    let t = rs256(&with(claims(), "aud", json!("someone-else")));
    invalid_token(
        decide_bearer(&config(), &t),
        "audience (aud) must include one of",
    );
    let t = rs256(&with(claims(), "aud", json!(["a", "b"])));
    invalid_token(decide_bearer(&config(), &t), "audience");
    let t = rs256(&without(claims(), "aud"));
    invalid_token(decide_bearer(&config(), &t), "audience");
}

#[test]
fn unknown_kid_is_refused() {
    let t = sign(&rsa(), Algorithm::RS256, Some("rsa-2"), &claims());
    invalid_token(
        decide_bearer(&config(), &t),
        "signing key (kid) is not trusted",
    );
    // Another key claiming a trusted kid fails on the signature.
    let t = sign(&rsa_other(), Algorithm::RS256, Some("rsa-1"), &claims());
    invalid_token(decide_bearer(&config(), &t), "signature does not verify");
}

#[test]
fn tampered_payload_is_refused() {
    for token in [
        rs256(&claims()),
        sign(&ec(), Algorithm::ES256, Some("ec-1"), &claims()),
        sign(&ed(), Algorithm::EdDSA, Some("ed-1"), &claims()),
    ] {
        let parts: Vec<&str> = token.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(with(claims(), "sub", json!("admin")).to_string());
        let t = format!("{}.{forged}.{}", parts[0], parts[2]);
        invalid_token(decide_bearer(&config(), &t), "signature does not verify");
        // A flipped signature byte as well.
        let mut sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        sig[5] ^= 1;
        let t = format!("{}.{}.{}", parts[0], parts[1], URL_SAFE_NO_PAD.encode(sig));
        invalid_token(decide_bearer(&config(), &t), "signature does not verify");
    }
}

#[test]
fn oversized_header_is_refused_before_parsing() {
    let big = "a".repeat(MAX_AUTHORIZATION_LEN);
    let d = refused(
        decide(&config(), Some(&format!("Bearer {big}")), NOW),
        "larger than 8192 bytes",
    );
    assert_eq!(d.error, Some(BearerError::InvalidRequest));
    // Same in API-key mode.
    let api =
        AuthConfig::parse(format!(r#"{{"mode":"api-key","api_keys":["{API_KEY}"]}}"#).as_bytes())
            .unwrap();
    refused(
        decide(&api, Some(&format!("Bearer {big}")), NOW),
        "larger than",
    );
    // Just under the limit is read (and refused for what it is).
    let t = format!("Bearer {}", "a".repeat(MAX_AUTHORIZATION_LEN - 7));
    invalid_token(decide(&config(), Some(&t), NOW), "not a well-formed JWT");
}

#[test]
fn api_key_of_the_wrong_length_is_refused() {
    let api =
        AuthConfig::parse(format!(r#"{{"mode":"api-key","api_keys":["{API_KEY}"]}}"#).as_bytes())
            .unwrap();
    let short = &API_KEY[..API_KEY.len() - 1];
    let long = format!("{API_KEY}0");
    for k in [short, long.as_str(), "", "x"] {
        assert!(
            matches!(
                decide(&api, Some(&format!("Bearer {k}")), NOW),
                Decision::Deny(_)
            ),
            "{k:?}"
        );
    }
    assert!(matches!(
        decide(&api, Some(&format!("Bearer {API_KEY}")), NOW),
        Decision::Allow { .. }
    ));
}

#[test]
fn garbage_tokens_are_refused_as_malformed() {
    for t in [
        "a.b.c",
        "a.b",
        "....",
        "eyJhbGciOiJSUzI1NiJ9.e30",
        "\u{fffd}.\u{fffd}.\u{fffd}",
    ] {
        invalid_token(decide_bearer(&config(), t), "not a well-formed JWT");
    }
    // A signed payload that is not claims JSON.
    let t = raw_token(
        &json!({"alg": "RS256", "kid": "rsa-1"}),
        &json!([1, 2]),
        b"x",
    );
    assert!(matches!(decide_bearer(&config(), &t), Decision::Deny(_)));
}

#[test]
fn subject_must_be_present_and_printable() {
    invalid_token(
        decide_bearer(&config(), &rs256(&without(claims(), "sub"))),
        "no subject",
    );
    for bad in ["", "a\r\nx-evil: 1", "é", &"s".repeat(257)] {
        let t = rs256(&with(claims(), "sub", json!(bad)));
        invalid_token(decide_bearer(&config(), &t), "printable ASCII");
    }
}

#[test]
fn crit_header_is_refused() {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("rsa-1".into());
    header.crit = Some(vec!["exp".into()]);
    let t = encode(&header, &claims(), &rsa()).unwrap();
    invalid_token(decide_bearer(&config(), &t), "critical header");
}

#[test]
fn messages_and_challenges_never_carry_key_material_or_the_token() {
    let n = jwk(&rsa(), Algorithm::RS256, "rsa-1")["n"]
        .as_str()
        .unwrap()
        .to_owned();
    let tokens = [
        rs256(&with(claims(), "exp", json!(NOW - 1000))),
        sign(&rsa_other(), Algorithm::RS256, Some("rsa-1"), &claims()),
        rs256(&with(claims(), "aud", json!("x"))),
    ];
    for t in tokens {
        let Decision::Deny(d) = decide_bearer(&config(), &t) else {
            panic!("allowed")
        };
        for text in [d.reason.to_string(), d.challenge()] {
            assert!(!text.contains(&n[..20]), "{text}");
            assert!(!text.contains(&t[..20]), "{text}");
            assert!(text.bytes().all(|b| (0x20..0x7f).contains(&b)), "{text}");
        }
    }
    // Not through Debug either.
    let debug = format!("{:?}", config());
    assert!(!debug.contains(&n[..20]), "{debug}");
    assert!(debug.contains("RS256 key \"rsa-1\""), "{debug}");
}

#[test]
fn error_description_is_a_safe_quoted_string() {
    let d = Denial {
        error: Some(BearerError::InvalidToken),
        reason: "say \"hi\" \\ then\r\nX-Injected: 1".into(),
    };
    assert_eq!(
        d.challenge(),
        "Bearer realm=\"nsight-cloud\", error=\"invalid_token\", error_description=\"say 'hi' ' then  X-Injected: 1\""
    );
}

// ---- JWT and API keys together ----

#[test]
fn jwt_and_api_keys_together_accept_either() {
    let c = AuthConfig::parse(
        config_json(json!({"api_keys": [API_KEY]}))
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(allowed(&decide_bearer(&c, API_KEY)), "api-key");
    assert_eq!(
        allowed(&decide_bearer(&c, &rs256(&claims()))),
        "alice@example.com"
    );
    invalid_token(
        decide_bearer(&c, "test-key-0123456789abcdeX"),
        "invalid API key",
    );
    invalid_token(
        decide_bearer(&c, &rs256(&with(claims(), "exp", json!(NOW - 3600)))),
        "expired",
    );
    // Without api_keys a key is just a malformed token.
    invalid_token(decide_bearer(&config(), API_KEY), "not a well-formed JWT");
}

// ---- Configuration ----

fn config_error(c: Value) -> String {
    match AuthConfig::parse(c.to_string().as_bytes()) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => e.to_string(),
    }
}

fn jwt_config(jwt: Value) -> Value {
    json!({"mode": "jwt", "jwt": jwt})
}

#[test]
fn config_defaults_the_skew_and_bounds_it() {
    let c = jwt_config(json!({"issuer": ISS, "audiences": [AUD], "jwks": jwks()}));
    let Ok(AuthConfig::Jwt { jwt, api_keys }) = AuthConfig::parse(c.to_string().as_bytes()) else {
        panic!()
    };
    assert_eq!(jwt.clock_skew_s, 60);
    assert!(api_keys.is_empty());
    assert!(matches!(&jwt.keys, KeySource::Inline(k) if k.len() == 3));
    let e = config_error(jwt_config(
        json!({"issuer": ISS, "audiences": [AUD], "jwks": jwks(), "clock_skew_s": 301}),
    ));
    assert!(e.contains("`clock_skew_s` is 301; at most 300"), "{e}");
}

#[test]
fn config_refuses_missing_or_empty_fields() {
    let e = config_error(jwt_config(
        json!({"issuer": "", "audiences": [AUD], "jwks": jwks()}),
    ));
    assert!(e.contains("non-empty `issuer`"), "{e}");
    let e = config_error(jwt_config(
        json!({"issuer": ISS, "audiences": [], "jwks": jwks()}),
    ));
    assert!(e.contains("audience"), "{e}");
    let e = config_error(jwt_config(json!({"issuer": ISS, "jwks": jwks()})));
    assert!(e.contains("missing field `audiences`"), "{e}");
    let e = config_error(jwt_config(
        json!({"issuer": ISS, "audiences": [AUD], "jwks": jwks(), "algorithms": ["HS256"]}),
    ));
    assert!(e.contains("unknown field `algorithms`"), "{e}");
    let e = config_error(json!({"mode": "jwt"}));
    assert!(e.contains("missing field `jwt`"), "{e}");
    let e = config_error(config_json(json!({"api_keys": ["short"]})));
    assert!(e.contains("shorter than 16"), "{e}");
}

fn jwks_error(keys: Value) -> String {
    config_error(jwt_config(
        json!({"issuer": ISS, "audiences": [AUD], "jwks": keys}),
    ))
}

#[test]
fn config_refuses_unusable_keys() {
    let rsa_jwk = jwk(&rsa(), Algorithm::RS256, "rsa-1");
    let ec_jwk = jwk(&ec(), Algorithm::ES256, "ec-1");
    let cases = [
        (json!({"keys": []}), "has no keys"),
        (json!([]), "not a JSON Web Key Set"),
        (
            json!({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}]}),
            "jwks key #0: symmetric keys",
        ),
        (
            json!({"keys": [with(rsa_jwk.clone(), "d", json!("AQAB"))]}),
            "private key material",
        ),
        (
            json!({"keys": [with(rsa_jwk.clone(), "use", json!("enc"))]}),
            "`use` is \"enc\"",
        ),
        (
            json!({"keys": [with(rsa_jwk.clone(), "alg", json!("RS512"))]}),
            "`alg` is \"RS512\"",
        ),
        (
            json!({"keys": [with(rsa_jwk.clone(), "n", json!(URL_SAFE_NO_PAD.encode([0xffu8; 128])))]}),
            "RSA modulus has 1024 bits",
        ),
        (
            json!({"keys": [with(rsa_jwk.clone(), "e", json!("AQ"))]}),
            "exponent",
        ),
        (
            json!({"keys": [with(ec_jwk.clone(), "crv", json!("P-384"))]}),
            "must be P-256",
        ),
        (
            json!({"keys": [with(ec_jwk.clone(), "x", json!("AAAA"))]}),
            "32 bytes",
        ),
        (
            // 32-byte coordinates that are not a point on P-256.
            json!({"keys": [with(ec_jwk.clone(), "y", json!(URL_SAFE_NO_PAD.encode([7u8; 32])))]}),
            "not a valid point",
        ),
        (
            json!({"keys": [{"kty": "OKP", "crv": "X25519", "x": "AAAA"}]}),
            "must be Ed25519",
        ),
        (
            json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AAAA"}]}),
            "32 bytes",
        ),
        (
            json!({"keys": [{"kty": "RSA", "e": "AQAB"}]}),
            "missing member `n`",
        ),
        (
            json!({"keys": [rsa_jwk.clone(), rsa_jwk.clone()]}),
            "two keys have kid \"rsa-1\"",
        ),
        (
            json!({"keys": [rsa_jwk.clone(), without(ec_jwk.clone(), "kid")]}),
            "jwks key #1 has no `kid`",
        ),
    ];
    for (keys, want) in cases {
        let e = jwks_error(keys.clone());
        assert!(e.contains(want), "{keys}: {e:?} does not contain {want:?}");
        assert!(
            e.starts_with("jwt configuration is not valid") || e.contains("not valid"),
            "{e}"
        );
    }
}

#[test]
fn config_errors_are_typed() {
    let e = AuthConfig::parse(
        jwt_config(json!({"issuer": ISS, "audiences": [AUD], "jwks": {"keys": []}}))
            .to_string()
            .as_bytes(),
    )
    .err();
    assert!(matches!(e, Some(ConfigError::Jwt(_))), "{e:?}");
    // The token error type is public for callers that want the kind, not the text.
    assert_eq!(
        TokenError::Expired { ago: 5 }.to_string(),
        "the token expired 5 s ago; get a new token from the issuer"
    );
}

// ---- JWKS fetched from the issuer's jwks_uri (the fetch itself: remote.rs, e2e) ----

fn remote_config() -> AuthConfig {
    let c = jwt_config(json!({"issuer": ISS, "audiences": [AUD],
        "remote_jwks": {"cluster": "idp", "uri": "http://idp.test/jwks", "cache_ttl_s": 60,
                        "min_refresh_interval_s": 5}}));
    AuthConfig::parse(c.to_string().as_bytes()).unwrap()
}

#[test]
fn remote_jwks_before_the_first_fetch_is_unavailable_not_allowed() {
    let d = decide_with(
        &remote_config(),
        None,
        Some(&format!("Bearer {}", rs256(&claims()))),
        NOW,
    );
    let Decision::Unavailable { reason } = d else {
        panic!("{d:?}")
    };
    assert!(
        reason.contains("http://idp.test/jwks") && reason.contains("retry"),
        "{reason}"
    );
    // No credentials at all is still a plain 401, keys or not.
    assert!(matches!(
        decide_with(&remote_config(), None, None, NOW),
        Decision::Deny(_)
    ));
}

#[test]
fn remote_jwks_verifies_with_the_fetched_keys_and_asks_for_a_refresh_on_unknown_kid() {
    let keys = parse_jwks(&jwks()).unwrap();
    let c = remote_config();
    let bearer = |t: &str| format!("Bearer {t}");
    let d = decide_with(&c, Some(&keys), Some(&bearer(&rs256(&claims()))), NOW);
    assert_eq!(allowed(&d), "alice@example.com");
    let rotated = sign(&rsa_other(), Algorithm::RS256, Some("rsa-2"), &claims());
    let d = decide_with(&c, Some(&keys), Some(&bearer(&rotated)), NOW);
    let Decision::RefreshKeys(denial) = d else {
        panic!("{d:?}")
    };
    assert!(denial.reason.contains("kid"), "{}", denial.reason);
    // Other refusals are final: no refresh for a bad signature or an expired token.
    let expired = rs256(&with(claims(), "exp", json!(NOW - 3600)));
    invalid_token(
        decide_with(&c, Some(&keys), Some(&bearer(&expired)), NOW),
        "expired",
    );
    // With inline keys an unknown kid is a plain refusal.
    invalid_token(decide_bearer(&config(), &rotated), "kid");
}

#[test]
fn config_needs_exactly_one_key_source() {
    let both = config_error(jwt_config(
        json!({"issuer": ISS, "audiences": [AUD], "jwks": jwks(),
        "remote_jwks": {"cluster": "idp", "uri": "http://idp.test/jwks"}}),
    ));
    assert!(both.contains("exactly one of `jwks`"), "{both}");
    let neither = config_error(jwt_config(json!({"issuer": ISS, "audiences": [AUD]})));
    assert!(neither.contains("exactly one of `jwks`"), "{neither}");
    let bad = config_error(jwt_config(json!({"issuer": ISS, "audiences": [AUD],
        "remote_jwks": {"cluster": "idp", "uri": "idp.test/jwks"}})));
    assert!(bad.contains("http:// or https://"), "{bad}");
}

// ---- Identity claims beyond `sub` ----

fn config_with_claim(claim: &str) -> AuthConfig {
    let mut c = config_json(json!({}));
    c["jwt"]["identity_claim"] = json!(claim);
    AuthConfig::parse(c.to_string().as_bytes()).unwrap()
}

#[test]
fn a_configured_claim_is_the_identity_top_level_nested_or_a_list() {
    let t = rs256(&with(claims(), "namespace", json!("team-a")));
    assert_eq!(
        allowed(&decide_bearer(&config_with_claim("namespace"), &t)),
        "team-a"
    );
    let t = rs256(&with(
        claims(),
        "realm_access",
        json!({"roles": ["team-a", "team-b"]}),
    ));
    assert_eq!(
        allowed(&decide_bearer(&config_with_claim("realm_access.roles"), &t)),
        "team-a,team-b"
    );
    // In a list, values that cannot be forwarded are dropped, usable ones kept.
    let t = rs256(&with(
        claims(),
        "groups",
        json!(["team-a", "a,b", "api-key:team-b", {"x": 1}, 42, ""]),
    ));
    assert_eq!(
        allowed(&decide_bearer(&config_with_claim("groups"), &t)),
        "team-a,42"
    );
    // `sub` spelled out is the default.
    assert_eq!(
        allowed(&decide_bearer(&config_with_claim("sub"), &rs256(&claims()))),
        "alice@example.com"
    );
}

#[test]
fn a_missing_or_unusable_identity_claim_is_refused() {
    let c = config_with_claim("namespace");
    invalid_token(decide_bearer(&c, &rs256(&claims())), "no `namespace` claim");
    for bad in [json!({"a": 1}), json!([]), json!(["x,y"]), json!("")] {
        let t = rs256(&with(claims(), "namespace", bad));
        invalid_token(decide_bearer(&c, &t), "has no usable identity");
    }
    let t = rs256(&with(claims(), "realm_access", json!("flat")));
    invalid_token(
        decide_bearer(&config_with_claim("realm_access.roles"), &t),
        "no `realm_access.roles` claim",
    );
}

#[test]
fn a_token_cannot_claim_an_api_key_identity() {
    for sub in ["api-key", "api-key:team-a", "anonymous", "alice,bob"] {
        let t = rs256(&with(claims(), "sub", json!(sub)));
        invalid_token(decide_bearer(&config(), &t), "printable ASCII");
    }
    let t = rs256(&with(claims(), "namespace", json!("api-key:team-a")));
    invalid_token(
        decide_bearer(&config_with_claim("namespace"), &t),
        "has no usable identity",
    );
}

#[test]
fn bad_identity_claim_paths_are_refused() {
    for bad in ["", "a..b", ".a", "a."] {
        let mut c = config_json(json!({}));
        c["jwt"]["identity_claim"] = json!(bad);
        let e = config_error(c);
        assert!(e.to_string().contains("identity_claim"), "{bad:?}: {e}");
    }
}

#[test]
fn the_verified_cache_does_not_mix_identity_claims() {
    // The same token, verified once with `sub` and then with `namespace`: each answers its own.
    let t = rs256(&with(claims(), "namespace", json!("team-a")));
    assert_eq!(allowed(&decide_bearer(&config(), &t)), "alice@example.com");
    assert_eq!(
        allowed(&decide_bearer(&config_with_claim("namespace"), &t)),
        "team-a"
    );
    assert_eq!(allowed(&decide_bearer(&config(), &t)), "alice@example.com");
}
