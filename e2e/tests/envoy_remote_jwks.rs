//! The auth filter's JWT mode with the JWKS fetched from a URL, in a real Envoy (1.40) against
//! a real HTTP server (Python's `http.server`) serving the JWKS as a file: 503 before the first
//! fetch, the keys loaded once the server is up, a rotated key picked up on its first token
//! (refresh on unknown kid), unknown kids rate-limited, cached keys kept while the server is
//! down.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{
    net::SocketAddr,
    path::Path,
    process::Command,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use nsight_e2e::{
    envoy::{auth_filter_config_with_clusters, Behind},
    envoy_bin, free_port, http,
    jwt::TestKeys,
    process::Running,
    wait_for, wait_for_tcp, wasm_artifact, TempDir,
};
use serde_json::{json, Value};

const ISS: &str = "https://idp.test";
const AUD: &str = "nsight-cloud";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims(sub: &str) -> Value {
    json!({"iss": ISS, "aud": AUD, "sub": sub, "exp": now() + 600, "iat": now()})
}

fn get(addr: SocketAddr, token: &str) -> http::Response {
    let auth = format!("Bearer {token}");
    http::get(addr, "/", &[("Authorization", auth.as_str())]).unwrap()
}

/// A real static HTTP server (python3 -m http.server) over `dir`, on `port`.
fn jwks_server(dir: &Path, port: u16, log: &Path) -> Running {
    let mut cmd = Command::new("python3");
    cmd.args(["-u", "-m", "http.server", "--bind", "127.0.0.1"])
        .arg(port.to_string())
        .arg("--directory")
        .arg(dir);
    let server = Running::spawn("jwks http.server", cmd, log);
    assert!(
        wait_for_tcp(([127, 0, 0, 1], port).into(), Duration::from_secs(10)),
        "http.server did not listen; log:\n{}",
        server.log()
    );
    server
}

/// How many times the server was asked for the JWKS.
fn fetches(server: &Running) -> usize {
    server.log().matches("GET /jwks.json").count()
}

/// Writes the JWKS file atomically (the server never serves half a file).
fn publish(dir: &Path, jwks: &Value) {
    let tmp = dir.join("jwks.json.tmp");
    std::fs::write(&tmp, jwks.to_string()).unwrap();
    std::fs::rename(&tmp, dir.join("jwks.json")).unwrap();
}

#[test]
fn remote_jwks_is_fetched_cached_refreshed_on_rotation_and_kept_when_the_issuer_is_down() {
    let keys = TestKeys::new();
    let rotated = TestKeys::new(); // its Ed25519 key is the issuer's next key
    let dir = TempDir::new("envoy-remote-jwks");
    let site = dir.path().join("site");
    std::fs::create_dir_all(&site).unwrap();
    publish(
        &site,
        &json!({"keys": [keys.jwk("RS256", "rsa-1"), keys.jwk("EdDSA", "ed-1")]}),
    );

    let idp_port = free_port();
    let idp: SocketAddr = ([127, 0, 0, 1], idp_port).into();
    let config = json!({"mode": "jwt", "jwt": {"issuer": ISS, "audiences": [AUD],
        "remote_jwks": {"cluster": "idp", "uri": format!("http://{idp}/jwks.json"),
                        "cache_ttl_s": 300, "min_refresh_interval_s": 2, "timeout_ms": 1000}}});
    let (listen, admin) = (free_port(), free_port());
    let yaml = auth_filter_config_with_clusters(
        listen,
        admin,
        &wasm_artifact("nsight_auth_filter.wasm"),
        &config.to_string(),
        Behind::DirectResponse("upstream"),
        &[("idp", idp)],
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
    let envoy = Running::spawn("envoy", cmd, &dir.path().join("envoy.log"));
    let addr: SocketAddr = ([127, 0, 0, 1], listen).into();
    assert!(
        wait_for_tcp(addr, Duration::from_secs(20)),
        "envoy did not listen; log:\n{}",
        envoy.log()
    );

    // The issuer is down: no keys yet, so a (valid) token gets a 503 saying why, never a 200.
    let token = keys.sign("RS256", "rsa-1", &claims("alice"));
    let r = get(addr, &token);
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert!(
        r.body.contains("has not loaded the issuer's signing keys"),
        "{r:?}"
    );
    assert!(
        wait_for(Duration::from_secs(10), || envoy
            .log()
            .contains("JWKS fetch from")
            .then_some(()))
        .is_some(),
        "the failed fetch should be logged:\n{}",
        envoy.log()
    );
    // Without credentials it is still the plain 401.
    assert_eq!(http::get(addr, "/", &[]).unwrap().status, 401);

    // The issuer comes up: the filter retries every second and loads the keys.
    let server = jwks_server(&site, idp_port, &dir.path().join("jwks-server.log"));
    let ok = wait_for(Duration::from_secs(15), || {
        let r = get(addr, &token);
        (r.status == 200).then_some(r)
    });
    assert!(
        ok.is_some(),
        "no 200 once the JWKS is served; envoy log:\n{}",
        envoy.log()
    );
    assert_eq!(
        get(addr, &keys.sign("EdDSA", "ed-1", &claims("bob"))).status,
        200
    );
    assert!(envoy.log().contains("loaded 2 signing key(s)"));
    // Bad tokens are refused with the fetched keys as with inline ones.
    let mut expired = claims("alice");
    expired["exp"] = json!(now() - 3600);
    let r = get(addr, &keys.sign("RS256", "rsa-1", &expired));
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.body.contains("expired"), "{r:?}");
    // Signed by another Ed25519 key under the trusted kid.
    let forged = rotated.sign("EdDSA", "ed-1", &claims("mallory"));
    let r = get(addr, &forged);
    assert!(r.status == 401 && r.body.contains("signature"), "{r:?}");
    // Cached: requests do not fetch again.
    let before = fetches(&server);
    for _ in 0..5 {
        assert_eq!(get(addr, &token).status, 200);
    }
    assert_eq!(fetches(&server), before, "{}", server.log());

    // Key rotation at the issuer: the first token with the new kid makes the filter refetch
    // (once min_refresh_interval_s has passed) and passes.
    std::thread::sleep(Duration::from_secs(3));
    publish(
        &site,
        &json!({"keys": [keys.jwk("RS256", "rsa-1"), rotated.jwk("EdDSA", "ed-2")]}),
    );
    let fresh = rotated.sign("EdDSA", "ed-2", &claims("carol"));
    let r = get(addr, &fresh);
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "upstream"),
        "{r:?}\n{}",
        envoy.log()
    );
    assert_eq!(fetches(&server), before + 1, "{}", server.log());
    // The retired key is gone after the refresh.
    let r = get(addr, &keys.sign("EdDSA", "ed-1", &claims("bob")));
    assert_eq!(r.status, 401, "{r:?}\n{}\n{}", envoy.log(), server.log());

    // Unknown kids cannot make the filter hammer the issuer: at most one fetch per interval.
    let before = fetches(&server);
    let started = std::time::Instant::now();
    for i in 0..20 {
        let r = get(
            addr,
            &keys.sign("EdDSA", &format!("ghost-{i}"), &claims("x")),
        );
        assert_eq!(r.status, 401, "{r:?}");
        assert!(r.body.contains("kid"), "{r:?}");
    }
    let elapsed = started.elapsed().as_secs() + 1;
    let extra = fetches(&server) - before;
    assert!(
        extra as u64 <= elapsed.div_ceil(2),
        "{extra} fetches in about {elapsed} s with min_refresh_interval_s 2"
    );

    // The issuer goes down: the loaded keys keep working (fail closed only without keys).
    drop(server);
    std::thread::sleep(Duration::from_secs(3));
    let r = get(addr, &keys.sign("RS256", "rsa-1", &claims("dave")));
    assert_eq!(r.status, 200, "{r:?}");
    let r = get(addr, &rotated.sign("EdDSA", "ed-2", &claims("erin")));
    assert_eq!(r.status, 200, "{r:?}");
    // An unknown kid now triggers a fetch that fails: still a 401, and it is logged.
    let r = get(addr, &keys.sign("EdDSA", "ghost-x", &claims("x")));
    assert_eq!(r.status, 401, "{r:?}");
    let log = envoy.log();
    assert!(log.contains("keeping the 2 key(s) loaded before"), "{log}");
}

#[test]
fn a_cluster_envoy_does_not_know_gives_503_and_a_log_naming_it() {
    // The cluster named in the config does not exist: the fetch cannot be dispatched; requests
    // get the 503 and the log says which cluster is missing.
    let keys = TestKeys::new();
    let dir = TempDir::new("envoy-remote-jwks-nocluster");
    let config = json!({"mode": "jwt", "jwt": {"issuer": ISS, "audiences": [AUD],
        "remote_jwks": {"cluster": "nowhere", "uri": "http://idp.test/jwks"}}});
    let (listen, admin) = (free_port(), free_port());
    let yaml = auth_filter_config_with_clusters(
        listen,
        admin,
        &wasm_artifact("nsight_auth_filter.wasm"),
        &config.to_string(),
        Behind::DirectResponse("upstream"),
        &[],
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
    let r = get(addr, &keys.sign("RS256", "rsa-1", &claims("alice")));
    assert_eq!(r.status, 503, "{r:?}");
    let said = wait_for(Duration::from_secs(10), || {
        envoy
            .log()
            .contains("through cluster \"nowhere\"")
            .then_some(())
    });
    assert!(said.is_some(), "{}", envoy.log());
}
