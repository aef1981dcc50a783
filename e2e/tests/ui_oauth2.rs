//! The Cloud UI's whole browser flow (`tests/ui/flow.mjs`, the same as `ui_platform.rs`) on a
//! local platform whose gateway signs people in through a real OpenID provider (npm
//! oidc-provider, its development login pages): `nsight-controlplane local --tls
//! --oauth2-issuer ...`. Headless Chromium opens a deep link, gets the sign-in prompt, follows
//! "Sign in through the gateway (OAuth2)" to the provider, signs in there as a person would
//! (login form, consent), comes back to the same view (`?state=open`) with the gateway's session cookie, and
//! then does everything the API-key run does without ever typing a key. The gateway is HTTPS
//! with the platform's own certificates; the browser context accepts them (`ignoreHTTPSErrors`:
//! Chromium's trust store is not ours to change), this test's client trusts the platform's CA.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

#[path = "support/ui_flow.rs"]
mod ui_flow;

use std::{os::unix::fs::PermissionsExt as _, time::Duration};

use nsight_e2e::{
    demo::{DemoOptions, DemoPaths, LocalPlatform},
    oidc::OidcProvider,
    otlp, wait_for, TempDir,
};
use serde_json::json;
use ui_flow::{check_flow, run_flow, screenshots_dir, start_agent, Gateway};

const WEB_CLIENT: &str = "nsight-web";
const WEB_SECRET: &str = "web-secret-0123456789abcdef";

#[test]
fn a_person_signs_in_through_the_openid_provider_and_does_the_same() {
    let dir = TempDir::new("ui-oauth2");
    let mut options = DemoOptions::for_tests(dir.path());
    options.tls = true;
    let redirect_uri = format!("https://localhost:{}/oauth2/callback", options.gateway_port);
    let web = json!({"client_id": WEB_CLIENT, "client_secret": WEB_SECRET,
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "redirect_uris": [redirect_uri], "token_endpoint_auth_method": "client_secret_basic"});
    let op = OidcProvider::start_with(600, &[web], 600);
    let secret_file = dir.path().join("client-secret");
    std::fs::write(&secret_file, format!("{WEB_SECRET}\n")).unwrap();
    std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    options.extra_args = vec![
        "--oauth2-issuer".into(),
        op.issuer.clone(),
        "--oauth2-client-id".into(),
        WEB_CLIENT.into(),
        "--oauth2-client-secret-file".into(),
        secret_file.display().to_string(),
        "--oauth2-scopes".into(),
        "openid,api".into(),
    ];
    let platform = LocalPlatform::start(&DemoPaths::for_tests(), &options).unwrap();
    assert_eq!(
        platform.description["oauth2"]["redirectUri"], redirect_uri,
        "{:#}",
        platform.description
    );
    let gw = Gateway::new(&platform);

    // Without a session or a key the API sends the browser to the provider (once the filter
    // has the provider's discovery document and keys: 503 until then, never a pass).
    let status_url = format!("{}/coordinator/v1/status", platform.gateway_url);
    let to_provider = wait_for(Duration::from_secs(30), || {
        let r = gw.fetch(&status_url, false);
        assert_ne!(r.status, 200, "served without signing in: {r:?}");
        (r.status == 302).then_some(r)
    })
    .unwrap_or_else(|| panic!("the gateway never sent a browser to sign in"));
    let location = to_provider.location.unwrap();
    assert!(
        location.starts_with(&op.authorization_endpoint()),
        "{location}"
    );
    // The API key still works beside sign-in (the CLI, scripts).
    assert_eq!(gw.get("/coordinator/v1/status").status, 200);

    let converter = otlp::converter(dir.path(), &dir.path().join("converted"));
    let _agent = start_agent(
        &platform,
        &options.state_dir,
        &format!("http://{}", converter.grpc),
    );
    let shots = screenshots_dir("oauth2");
    let found = run_flow(
        &platform,
        &shots,
        &[
            ("AUTH", "oauth2"),
            ("ISSUER", &op.issuer),
            ("LOGIN", "alice"),
        ],
    );
    // The sign-in went through the provider's own pages and came back to the deep link.
    assert!(
        found["providerPages"].as_u64() >= Some(1),
        "{found:#}\n{}",
        op.log()
    );
    let back = found["signedInAt"].as_str().unwrap();
    assert!(
        back.contains("state=open"),
        "the deep link it started from: {back}"
    );
    assert_eq!(found["keyTyped"], false);
    check_flow(&gw, &platform, &found, &shots);
    platform.stop();
}
