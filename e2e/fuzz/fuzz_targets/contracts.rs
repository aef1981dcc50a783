//! Request bodies and fields every service checks with the shared contract: a streamer launch,
//! tags and titles, the nsys arguments of a tool config, a problem document from any server,
//! a gateway token file. Never a panic; what is accepted is what the rules say.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nsight_contracts::{
    coordinator::{Tag, Title},
    gateway_only::GatewayToken,
    nsys_args,
    tenant::LaunchStreamer,
    Problem,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(launch) = serde_json::from_slice::<LaunchStreamer>(data) {
        if let Ok(target) = launch.target() {
            assert_eq!(target.session_id().len(), 36, "{target:?}");
        }
    }
    let text = String::from_utf8_lossy(data);
    if let Ok(tag) = Tag::parse(&text) {
        assert!(!tag.as_str().is_empty());
    }
    let _ = Title::parse(&text);
    let _ = GatewayToken::parse(&text);
    let words = nsys_args::words(&text);
    let _ = nsys_args::check(&words, true);
    let _ = nsys_args::check(&words, false);
    let _ = Problem::from_body(u16::from(data.first().copied().unwrap_or(0)) + 400, &text);
});
