//! The Cloud UI in a real browser against the real local platform (`nsight-controlplane local`:
//! coordinator, analysis service, UI server and the Envoy gateway with API-key auth) with a real
//! agent profiling the demo's Python NVTX program. Headless Chromium, driven by npm
//! playwright-core (`tests/ui/flow.mjs`), does what a person does: types the API key, begins a
//! session, starts and stops a collection, sees the report, runs `nvtx_sum` from the form
//! generated from the recipe's arguments, sorts its table, reloads a deep link, cancels and
//! deletes a job that would run forever, compares two collections in one click and ends the
//! session; the agent mirrors its ranges to the real OTLP converter and the agents table shows
//! its counters. This test then checks what the page showed against the REST APIs and downloads
//! the report through the link the page offered (`support/ui_flow.rs`; `ui_oauth2.rs` runs the
//! same flow signed in through an OpenID provider). Screenshots: `<target>/ui-screenshots/`.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

#[path = "support/ui_flow.rs"]
mod ui_flow;

use nsight_e2e::{demo::LocalPlatform, otlp, TempDir};
use ui_flow::{check_flow, run_flow, screenshots_dir, start_agent, Gateway};

#[test]
fn a_person_profiles_and_analyses_from_the_browser() {
    let dir = TempDir::new("ui-platform");
    let (platform, options) = LocalPlatform::start_for_tests(dir.path()).unwrap();
    let converter = otlp::converter(dir.path(), &dir.path().join("converted"));
    let _agent = start_agent(
        &platform,
        &options.state_dir,
        &format!("http://{}", converter.grpc),
    );
    let shots = screenshots_dir("");
    let found = run_flow(
        &platform,
        &shots,
        &[("AUTH", "api-key"), ("API_KEY", &platform.api_key)],
    );
    check_flow(&Gateway::new(&platform), &platform, &found, &shots);
    platform.stop();
}
