//! JWKS documents (inline in the config, or fetched from an identity provider the gateway does
//! not control): parsed into verification keys or refused, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nsight_auth_filter::{jwks::parse_jwks, remote::parse_answer};

fuzz_target!(|data: &[u8]| {
    let _ = parse_answer(Some(200), data);
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = parse_jwks(&value);
    }
});
