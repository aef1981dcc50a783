//! Tokens from a real OpenID provider (npm oidc-provider, client-credentials grant) through a
//! real Envoy running our auth filter in JWT mode with the provider's `jwks_uri`: a fresh token
//! passes; a tampered, expired or wrong-audience one gets a 401 saying why.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{net::SocketAddr, process::Command, time::Duration};

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use nsight_e2e::{
    envoy::{auth_filter_config_with_clusters, Behind},
    envoy_bin, free_port, http,
    oidc::{OidcProvider, AUDIENCE, MACHINE_CLIENT, SHORT_TTL_S},
    process::Running,
    wait_for, wait_for_tcp, wasm_artifact, TempDir,
};
use serde_json::{json, Value};

/// Envoy with the filter trusting `op` (keys from its jwks_uri), no clock skew.
fn start_envoy(dir: &TempDir, op: &OidcProvider) -> (Running, SocketAddr) {
    let config = json!({"mode": "jwt", "jwt": {"issuer": op.issuer, "audiences": [AUDIENCE],
        "clock_skew_s": 0,
        "remote_jwks": {"cluster": "idp", "uri": op.jwks_uri(), "min_refresh_interval_s": 1}}});
    let (listen, admin) = (free_port(), free_port());
    let yaml = auth_filter_config_with_clusters(
        listen,
        admin,
        &wasm_artifact("nsight_auth_filter.wasm"),
        &config.to_string(),
        Behind::DirectResponse("upstream"),
        &[("idp", op.addr)],
    );
    std::fs::write(dir.path().join("envoy.yaml"), yaml).unwrap();
    let mut cmd = Command::new(envoy_bin());
    cmd.arg("-c").arg(dir.path().join("envoy.yaml")).args([
        "--use-dynamic-base-id",
        "--concurrency",
        "1",
    ]);
    let envoy = Running::spawn("envoy", cmd, &dir.path().join("envoy.log"));
    let addr: SocketAddr = ([127, 0, 0, 1], listen).into();
    assert!(
        wait_for_tcp(addr, Duration::from_secs(20)),
        "{}",
        envoy.log()
    );
    (envoy, addr)
}

fn get(addr: SocketAddr, token: &str) -> http::Response {
    let auth = format!("Bearer {token}");
    http::get(addr, "/", &[("Authorization", auth.as_str())]).unwrap()
}

fn payload(token: &str) -> Value {
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
}

#[track_caller]
fn assert_refused(r: &http::Response, why: &str) {
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.body.contains(why), "{why:?} not in {r:?}");
    assert!(
        r.header("www-authenticate")
            .is_some_and(|c| c.contains("error=\"invalid_token\"")),
        "{r:?}"
    );
}

#[test]
fn tokens_from_a_real_openid_provider_pass_our_filter_in_real_envoy() {
    let op = OidcProvider::start(600);
    let discovery = op.discovery();
    assert_eq!(discovery["issuer"], json!(op.issuer));
    assert_eq!(discovery["jwks_uri"], json!(op.jwks_uri()));
    let dir = TempDir::new("envoy-oidc");
    let (envoy, addr) = start_envoy(&dir, &op);

    let token = op.machine_token("urn:nsight:api");
    let claims = payload(&token);
    assert_eq!(claims["aud"], json!(AUDIENCE), "{claims}");
    assert_eq!(claims["sub"], json!(MACHINE_CLIENT), "{claims}");
    // The first requests may meet the filter before its first JWKS fetch (503); then 200.
    let ok = wait_for(Duration::from_secs(15), || {
        let r = get(addr, &token);
        (r.status != 503).then_some(r)
    })
    .unwrap_or_else(|| panic!("keys never loaded:\n{}", envoy.log()));
    assert_eq!(
        (ok.status, ok.body.as_str()),
        (200, "upstream"),
        "{ok:?}\n{}",
        envoy.log()
    );

    // Tampered: the payload's subject changed, the provider's signature kept.
    let parts: Vec<&str> = token.split('.').collect();
    let mut forged = claims.clone();
    forged["sub"] = json!("admin");
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(forged.to_string()),
        parts[2]
    );
    assert_refused(&get(addr, &tampered), "signature does not verify");

    // Wrong audience: a real token of the same provider, for another service.
    let other = op.machine_token("urn:other:api");
    assert_eq!(payload(&other)["aud"], json!("other-service"));
    assert_refused(
        &get(addr, &other),
        "audience (aud) must include one of: nsight-cloud",
    );

    // Expired: a short-lived token passes, then is refused once its lifetime is over.
    let short = op.machine_token("urn:nsight:api-short");
    let c = payload(&short);
    assert_eq!(
        c["exp"].as_u64().unwrap() - c["iat"].as_u64().unwrap(),
        SHORT_TTL_S
    );
    assert_eq!(get(addr, &short).status, 200);
    std::thread::sleep(Duration::from_secs(SHORT_TTL_S + 2));
    assert_refused(&get(addr, &short), "the token expired");

    // A token from another provider instance (another signing key, same kid and issuer
    // shape) is not trusted.
    let impostor = OidcProvider::start(600);
    let foreign = impostor.machine_token("urn:nsight:api");
    let r = get(addr, &foreign);
    assert_eq!(r.status, 401, "{r:?}");
    // The long-lived token still passes.
    assert_eq!(get(addr, &token).status, 200);
}
