//! The auth filter's configuration (JSON from the operator, parsed inside Envoy): any bytes give
//! a config or an error, never a panic (a panic aborts the Wasm VM for every request).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nsight_auth_filter::config::AuthConfig;

fuzz_target!(|data: &[u8]| {
    let _ = AuthConfig::parse(data);
});
