//! What a client controls on every request to the gateway: the `Authorization` header (API key
//! or JWT: base64url, JSON header and claims, signature) and the OAuth2 session cookie (sealed:
//! base64url, MAC, JSON). Decided against a fixed JWT + API-key policy; never a panic, and an
//! unsigned input is never let in.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use nsight_auth_filter::{
    config::AuthConfig,
    oauth::cookie,
    policy::{decide, Decision},
};

/// RFC 8037's Ed25519 example public key: any token the fuzzer makes lacks its signature.
const CONFIG: &str = r#"{"mode":"jwt","jwt":{"issuer":"https://issuer.test","audiences":["nsight"],
  "jwks":{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k","alg":"EdDSA",
                   "x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}},
  "api_keys":["0123456789abcdef-fuzz-only"]}"#;

fn config() -> &'static AuthConfig {
    static CONFIG_ONCE: OnceLock<AuthConfig> = OnceLock::new();
    CONFIG_ONCE
        .get_or_init(|| AuthConfig::parse(CONFIG.as_bytes()).expect("the fuzz policy parses"))
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let header = if data.first().is_some_and(|b| b % 2 == 0) {
        format!("Bearer {text}")
    } else {
        text.to_string()
    };
    if let Decision::Allow { identity, .. } = decide(config(), Some(&header), 1_800_000_000) {
        // Only the configured key gets in: no token can be signed by the fuzzer.
        assert_eq!(identity, "api-key", "let in without a key: {header:?}");
    }
    let _ = cookie::cookie_value(&text, "nsight_session");
    let _ =
        cookie::open::<serde_json::Value>(b"0123456789abcdef0123456789abcdef", "session", &text);
});
