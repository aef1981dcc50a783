//! The auth filter's OAuth2 mode in a real Envoy (TLS listener) against a real OpenID provider
//! (npm oidc-provider, its development login pages): the browser-style code flow with PKCE
//! ending in a request through Envoy to an upstream, the session refreshed with the refresh
//! token, bearer tokens beside it, tampered cookie, state mismatch, replayed code, logout; and
//! a configuration without TLS refused.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{process::Command, time::Duration};

use base64::{engine::general_purpose::STANDARD, Engine};
use nsight_e2e::{
    browser::Browser,
    envoy::{auth_filter_config_tls, Behind},
    envoy_bin, free_port,
    oidc::{OidcProvider, AUDIENCE},
    process::Running,
    wait_for, wait_for_tcp, wasm_artifact, TempDir,
};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::{json, Value};

const WEB_CLIENT: &str = "nsight-web";
const WEB_SECRET: &str = "web-secret-0123456789abcdef";
/// ID tokens live this long, so the test sees a session refreshed.
const ID_TOKEN_TTL_S: u64 = 4;

/// A CA and a serving certificate for localhost: (CA PEM, chain file, key file).
fn pki(dir: &TempDir) -> (String, std::path::PathBuf, std::path::PathBuf) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let (chain, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&chain, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (ca.pem(), chain, key_path)
}

fn filter_config(op: &OidcProvider, redirect_uri: &str, listener_tls: bool) -> Value {
    json!({"mode": "oauth2", "oauth2": {
        "issuer": op.issuer, "cluster": "idp", "client_id": WEB_CLIENT,
        "client_secret": WEB_SECRET, "redirect_uri": redirect_uri,
        "cookie_key": STANDARD.encode([42u8; 32]), "audiences": [AUDIENCE],
        "listener_tls": listener_tls, "scopes": ["openid", "api"], "clock_skew_s": 0}})
}

fn start_envoy(dir: &TempDir, config: &Value, listen: u16, op: &OidcProvider) -> Running {
    let (_, chain, key) = pki(dir);
    start_envoy_with(dir, config, listen, op, &chain, &key)
}

fn start_envoy_with(
    dir: &TempDir,
    config: &Value,
    listen: u16,
    op: &OidcProvider,
    chain: &std::path::Path,
    key: &std::path::Path,
) -> Running {
    let yaml = auth_filter_config_tls(
        listen,
        free_port(),
        &wasm_artifact("nsight_auth_filter.wasm"),
        &config.to_string(),
        Behind::Upstream(nsight_e2e::echo::identity_echo()),
        &[("idp", op.addr)],
        (chain, key),
    );
    std::fs::write(dir.path().join("envoy.yaml"), yaml).unwrap();
    let mut cmd = Command::new(envoy_bin());
    cmd.arg("-c").arg(dir.path().join("envoy.yaml")).args([
        "--use-dynamic-base-id",
        "--concurrency",
        "1",
        "--log-level",
        "info",
    ]);
    Running::spawn("envoy", cmd, &dir.path().join("envoy.log"))
}

fn query(url: &str, name: &str) -> Option<String> {
    let q = url.split_once('?')?.1;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| v.to_owned())
    })
}

fn replace_query(url: &str, name: &str, value: &str) -> String {
    let old = query(url, name).unwrap();
    url.replace(&format!("{name}={old}"), &format!("{name}={value}"))
}

/// A browser that went to `app` and was sent to the provider: (browser, authorize URL).
fn sent_to_sign_in(ca: &str, app: &str, op: &OidcProvider) -> (Browser, String) {
    let mut b = Browser::new(Some(ca));
    let r = b.get(app).unwrap();
    assert_eq!(r.status, 302, "{r:?}");
    let location = r.location.unwrap();
    assert!(
        location.starts_with(&op.authorization_endpoint()),
        "{location}"
    );
    (b, location)
}

#[test]
fn browser_code_flow_session_refresh_logout_and_refusals() {
    let dir = TempDir::new("envoy-oauth2");
    let listen = free_port();
    let base = format!("https://localhost:{listen}");
    let redirect_uri = format!("{base}/oauth2/callback");
    let web = json!({"client_id": WEB_CLIENT, "client_secret": WEB_SECRET,
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "redirect_uris": [redirect_uri], "token_endpoint_auth_method": "client_secret_basic",
        "post_logout_redirect_uris": [format!("{base}/")]});
    let op = OidcProvider::start_with(600, &[web], ID_TOKEN_TTL_S);
    let (ca, chain, key) = pki(&dir);
    let mut envoy = start_envoy_with(
        &dir,
        &filter_config(&op, &redirect_uri, true),
        listen,
        &op,
        &chain,
        &key,
    );
    assert!(
        wait_for_tcp(([127, 0, 0, 1], listen).into(), Duration::from_secs(20)),
        "{}",
        envoy.log()
    );
    let app = format!("{base}/api/sessions?limit=5");

    // Until the filter has the provider's configuration and keys: 503, never a pass.
    let ready = wait_for(Duration::from_secs(20), || {
        let r = Browser::new(Some(&ca)).get(&app).ok()?;
        assert_ne!(r.status, 200, "{r:?}");
        (r.status == 302).then_some(())
    });
    assert!(ready.is_some(), "{}", envoy.log());

    // The code flow, as a browser: app -> provider (login form) -> callback -> app.
    let (mut alice, authorize) = sent_to_sign_in(&ca, &app, &op);
    for part in [
        "code_challenge_method=S256",
        "response_type=code",
        "nonce=",
        "state=",
    ] {
        assert!(authorize.contains(part), "{part} missing in {authorize}");
    }
    let callback = alice.sign_in_at_provider(&authorize, "alice").unwrap();
    assert!(callback.starts_with(&redirect_uri), "{callback}");
    let back = alice.get(&callback).unwrap();
    assert_eq!(back.status, 302, "{back:?}\n{}", envoy.log());
    assert_eq!(back.location.as_deref(), Some(app.as_str()));
    let set = back
        .set_cookies
        .iter()
        .find(|c| c.starts_with("nsight_session="))
        .unwrap();
    for attr in ["Secure", "HttpOnly", "SameSite=Lax"] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(alice.cookie(&base, "nsight_oauth_pending").is_none());
    let through = alice.get(&app).unwrap();
    assert_eq!(
        (through.status, through.body.as_str()),
        (200, "identity=alice")
    );

    // State mismatch: a real code, but the state is not this browser's.
    let (mut bob, authorize) = sent_to_sign_in(&ca, &app, &op);
    let callback = bob.sign_in_at_provider(&authorize, "bob").unwrap();
    let r = bob
        .get(&replace_query(&callback, "state", "forged"))
        .unwrap();
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.body.contains("state does not match"), "{}", r.body);
    assert!(bob.cookie(&base, "nsight_session").is_none());

    // Replayed code: carol signs in; her callback is then sent again (with the pending
    // cookie it came with). The provider refuses the code (and revokes what it granted).
    let (mut carol, authorize) = sent_to_sign_in(&ca, &app, &op);
    let pending = carol.cookie(&base, "nsight_oauth_pending").unwrap();
    let callback = carol.sign_in_at_provider(&authorize, "carol").unwrap();
    assert_eq!(carol.get(&callback).unwrap().status, 302);
    let mut replay = Browser::new(Some(&ca));
    replay.set_cookie(&base, "nsight_oauth_pending", Some(&pending));
    let r = replay.get(&callback).unwrap();
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.body.contains("invalid_grant"), "{}", r.body);
    assert!(replay.cookie(&base, "nsight_session").is_none());

    // Tampered cookie: one character of the payload changed.
    let session = alice.cookie(&base, "nsight_session").unwrap();
    let mut forged = session.clone().into_bytes();
    forged[3] = if forged[3] == b'A' { b'B' } else { b'A' };
    let mut mallory = Browser::new(Some(&ca));
    mallory.set_cookie(
        &base,
        "nsight_session",
        Some(&String::from_utf8(forged).unwrap()),
    );
    let r = mallory.get(&app).unwrap();
    assert_eq!(r.status, 302, "{r:?}");
    assert!(r
        .location
        .unwrap()
        .starts_with(&op.authorization_endpoint()));
    let api = mallory.post_form(&app, &[("x", "1")]).unwrap();
    assert_eq!(api.status, 401, "{api:?}");

    // The ID token expires: the session is refreshed with the refresh token, not re-signed-in.
    std::thread::sleep(Duration::from_secs(ID_TOKEN_TTL_S + 2));
    let r = alice.get(&app).unwrap();
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "identity=alice"),
        "{}",
        envoy.log()
    );
    let renewed = alice.cookie(&base, "nsight_session").unwrap();
    assert_ne!(renewed, session, "the refreshed session sets a new cookie");
    assert!(op.log().contains("refresh_token") || !op.log().contains("server_error"));

    // Bearer tokens (the CLI's) keep working beside the cookies.
    let token = op.machine_token("urn:nsight:api");
    let auth = format!("Bearer {token}");
    let r = Browser::new(Some(&ca))
        .get_with(&app, &[("authorization", auth.as_str())])
        .unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    let r = Browser::new(Some(&ca))
        .get_with(&app, &[("authorization", "Bearer not.a.token")])
        .unwrap();
    assert_eq!(r.status, 401, "{r:?}");

    // Logout: the cookie is cleared and the browser sent to the provider's end-session page.
    let r = alice.get(&format!("{base}/oauth2/logout")).unwrap();
    assert_eq!(r.status, 302, "{r:?}");
    let end = op.discovery()["end_session_endpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(r.location.unwrap().starts_with(&end));
    assert!(alice.cookie(&base, "nsight_session").is_none());
    let r = alice.get(&app).unwrap();
    assert_eq!(r.status, 302, "{r:?}");

    // Secrets are never logged.
    let log = envoy.log();
    assert!(!log.contains(WEB_SECRET), "client secret in the log");
    assert!(
        !log.contains(&STANDARD.encode([42u8; 32])),
        "cookie key in the log"
    );
    envoy.kill();
}

#[test]
fn envoy_refuses_oauth2_without_tls_on_the_listener() {
    let dir = TempDir::new("envoy-oauth2-notls");
    let op = OidcProvider::start(600);
    let listen = free_port();
    let config = filter_config(&op, &format!("https://localhost:{listen}/cb"), false);
    let mut envoy = start_envoy(&dir, &config, listen, &op);
    let status = envoy.wait_exit(Duration::from_secs(30));
    let log = envoy.log();
    assert!(status.is_some_and(|s| !s.success()), "{log}");
    assert!(log.contains("needs TLS on the listener"), "{log}");
}
