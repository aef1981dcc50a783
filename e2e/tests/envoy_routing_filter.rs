//! The tenant routing filter (`plugins/routing`) in a real Envoy fed by our xDS server, after the
//! auth filter (JWT mode): two tenants with their own upstreams on one shared gateway. A tenant
//! reaches its upstream with `/t/<namespace>` stripped, another tenant's namespace is 403, an
//! unknown one 404, and a routing table the filter refuses is NACKed while the last good one
//! keeps serving. API keys bound to a tenant reach that tenant only (403 elsewhere), a key
//! bound to none reaches no tenant. A third tenant has one cluster per backend (`routes`, as
//! the operator renders them): the forwarded path picks the cluster.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{
    net::SocketAddr,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use nsight_contracts::gateway_only::GatewayToken;
use nsight_e2e::{
    free_port,
    gateway::{named_upstream, LocalGateway},
    http,
    jwt::TestKeys,
    wait_for, wasm_artifact,
};
use nsight_gateway::{
    bootstrap::AdsFlavor,
    cache::node_id,
    ir::{AuthFilter, GatewayIr, Tenant, TenantRouting, Upstream},
};
use serde_json::{json, Value};

const ISS: &str = "https://idp.test";
const AUD: &str = "nsight-cloud";
/// API keys (test only): one bound to team-a, one to team-b, one to no tenant.
const KEY_A: &str = "team-a-key-0123456789abcdef";
const KEY_B: &str = "team-b-key-0123456789abcdef";
const KEY_PLAIN: &str = "plain-key-0123456789abcdef";

fn token(keys: &TestKeys, sub: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"iss": ISS, "aud": AUD, "sub": sub, "exp": now + 600, "iat": now});
    format!("Bearer {}", keys.sign("ES256", "ec-1", &claims))
}

/// tenant-c's coordinator requires this token (test only).
const GATEWAY_TOKEN: &str = "ngt_test-only-routing-0123456789abcdef0123456789";

fn tenants() -> Vec<Tenant> {
    vec![
        Tenant {
            namespace: "team-a".into(),
            upstream: "tenant-a".into(),
            identities: vec!["alice".into()],
            ..Tenant::default()
        },
        Tenant {
            namespace: "team-b".into(),
            upstream: "tenant-b".into(),
            identities: vec!["bob".into()],
            ..Tenant::default()
        },
        Tenant {
            namespace: "team-c".into(),
            routes: vec![
                ("/coordinator/".into(), "tenant-c-coordinator".into()),
                ("/analysis/".into(), "tenant-c-analysis".into()),
            ],
            identities: vec!["alice".into()],
            ..Tenant::default()
        },
    ]
}

fn problem(r: &http::Response, status: u16, detail: &str) {
    assert_eq!(r.status, status, "{r:?}");
    assert_eq!(
        r.header("content-type"),
        Some("application/problem+json"),
        "{r:?}"
    );
    let body: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["status"], status, "{r:?}");
    assert!(
        body["detail"].as_str().unwrap().contains(detail),
        "detail should say {detail:?}: {r:?}"
    );
}

#[test]
fn tenants_reach_their_own_upstream_only() {
    let keys = TestKeys::new();
    let auth_wasm = wasm_artifact("nsight_auth_filter.wasm");
    let auth_lean = wasm_artifact("nsight_auth_filter_lean.wasm");
    let routing_wasm = wasm_artifact("nsight_routing_filter.wasm");
    let (a, b) = (named_upstream("tenant-a"), named_upstream("tenant-b"));
    let c_backends = [
        named_upstream("tenant-c-coordinator"),
        named_upstream("tenant-c-analysis"),
    ];
    let port = free_port();
    let storage_port = free_port();
    let coordinator = named_upstream("coordinator");
    let auth_config = json!({"mode": "jwt", "jwt": {"issuer": ISS, "audiences": [AUD],
        "jwks": keys.jwks()},
        "api_keys": [{"key": KEY_A, "tenant": "team-a"}, {"key": KEY_B, "tenant": "team-b"},
                     KEY_PLAIN]})
    .to_string();
    let ir = |routing: TenantRouting| {
        let mut ir = GatewayIr::local()
            .listen("127.0.0.1", port, storage_port)
            .coordinator(coordinator)
            .auth(AuthFilter {
                wasm_path: auth_wasm.clone(),
                // JWT mode: the gateway loads the lean module (no response-headers hook).
                lean_wasm_path: Some(auth_lean.clone()),
                config_json: auth_config.clone(),
            })
            .build()
            .unwrap();
        ir.upstreams
            .push(Upstream::new("tenant-a", "127.0.0.1", a.port()));
        ir.upstreams
            .push(Upstream::new("tenant-b", "127.0.0.1", b.port()));
        for (name, up) in ["tenant-c-coordinator", "tenant-c-analysis"]
            .into_iter()
            .zip(&c_backends)
        {
            let mut upstream = Upstream::new(name, "127.0.0.1", up.port());
            if name == "tenant-c-coordinator" {
                upstream.gateway_token = Some(GatewayToken::parse(GATEWAY_TOKEN).unwrap());
            }
            ir.upstreams.push(upstream);
        }
        ir.listener_mut("gateway").unwrap().routing = Some(routing);
        ir
    };
    let node = node_id::gateway("test", "routing");
    let gw = LocalGateway::start(&node, AdsFlavor::Delta);
    let good = ir(TenantRouting::by_path(&routing_wasm, &tenants()));
    gw.xds().set_ir(&node, &good).unwrap();
    gw.wait_ready();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let (alice, bob) = (token(&keys, "alice"), token(&keys, "bob"));
    let get = |path: &str, auth: &str, extra: &[(&str, &str)]| {
        let mut headers = vec![("Authorization", auth)];
        headers.extend_from_slice(extra);
        http::get(addr, path, &headers).unwrap()
    };

    // Tenant A reaches A, prefix stripped, query kept.
    let ok = wait_for(Duration::from_secs(20), || {
        let r = get("/t/team-a/api/x?y=1", &alice, &[]);
        (r.status == 200).then_some(r)
    })
    .unwrap_or_else(|| panic!("alice never reached team-a; log:\n{}", gw.envoy_log()));
    assert_eq!(ok.body, "tenant-a /api/x?y=1");
    assert_eq!(get("/t/team-a", &alice, &[]).body, "tenant-a /");
    assert_eq!(get("/t/team-b/y", &bob, &[]).body, "tenant-b /y");
    // One cluster per backend: the path after the tenant prefix picks it.
    // The routing filter sets the gateway token of the cluster it picked (a cluster_header
    // route cannot), and drops one a client sent, where the cluster has a token or none.
    let forged = [(
        "x-nsight-gateway-token",
        "forged-by-the-client-0123456789abcdef",
    )];
    assert_eq!(
        get("/t/team-c/coordinator/v1/s", &alice, &forged).body,
        format!("tenant-c-coordinator /coordinator/v1/s token={GATEWAY_TOKEN}")
    );
    assert_eq!(
        get("/t/team-c/analysis/v1/j?x=1", &alice, &forged).body,
        "tenant-c-analysis /analysis/v1/j?x=1"
    );
    assert_eq!(get("/t/team-a/x", &alice, &forged).body, "tenant-a /x");
    problem(
        &get("/t/team-c/other", &alice, &[]),
        404,
        "tenant \"team-c\" has no backend at \"/other\"",
    );
    problem(
        &get("/t/team-c/coordinator/v1/s", &bob, &[]),
        403,
        "identity \"bob\" may not access tenant \"team-c\"",
    );

    // Cross-tenant: 403, never forwarded.
    let cross = get("/t/team-b/y", &alice, &[]);
    problem(
        &cross,
        403,
        "identity \"alice\" may not access tenant \"team-b\"",
    );
    assert_eq!(
        serde_json::from_str::<Value>(&cross.body).unwrap()["title"],
        "Forbidden"
    );
    // API keys bound to tenants: their own tenant only (the routing table lists no key).
    let (key_a, key_b) = (format!("Bearer {KEY_A}"), format!("Bearer {KEY_B}"));
    assert_eq!(get("/t/team-a/k", &key_a, &[]).body, "tenant-a /k");
    assert_eq!(get("/t/team-b/k", &key_b, &[]).body, "tenant-b /k");
    problem(
        &get("/t/team-b/k", &key_a, &[]),
        403,
        "identity \"api-key:team-a\" may not access tenant \"team-b\"",
    );
    problem(
        &get("/t/team-a/k", &key_b, &[]),
        403,
        "identity \"api-key:team-b\" may not access tenant \"team-a\"",
    );
    // A key bound to no tenant is authenticated but reaches no tenant.
    let plain = format!("Bearer {KEY_PLAIN}");
    problem(
        &get("/t/team-a/k", &plain, &[]),
        403,
        "identity \"api-key\" may not access tenant \"team-a\"",
    );
    assert_eq!(
        get("/coordinator/k", &plain, &[]).body,
        "coordinator /coordinator/k"
    );
    // A client cannot pose as a tenant key by sending the identity header itself.
    problem(
        &get(
            "/t/team-b/k",
            &plain,
            &[("x-nsight-auth-identity", "api-key:team-b")],
        ),
        403,
        "identity \"api-key\" may not access tenant \"team-b\"",
    );
    // Unknown tenant: 404.
    problem(
        &get("/t/team-z/x", &alice, &[]),
        404,
        "no tenant \"team-z\" on this gateway",
    );
    // The auth filter runs first: no token, no routing.
    assert_eq!(http::get(addr, "/t/team-a/x", &[]).unwrap().status, 401);
    // Other routes are not tenant-routed.
    assert_eq!(
        get("/coordinator/x", &alice, &[]).body,
        "coordinator /coordinator/x"
    );
    // A client cannot pick the cluster itself: the filter owns the header.
    let forged = get(
        "/coordinator/x",
        &alice,
        &[("x-nsight-tenant-cluster", "tenant-b")],
    );
    assert!(
        !forged.body.starts_with("tenant-b"),
        "a client-sent cluster header must not route: {forged:?}"
    );
    let forged = get(
        "/t/team-a/x",
        &alice,
        &[("x-nsight-tenant-cluster", "tenant-b")],
    );
    assert_eq!(forged.body, "tenant-a /x", "{forged:?}");

    // A table listing a tenant twice is refused: Envoy NACKs, the last good table serves.
    let mut dup = TenantRouting::by_path(&routing_wasm, &tenants());
    let mut table: Value = serde_json::from_str(&dup.config_json).unwrap();
    let first = table["tenants"][0].clone();
    table["tenants"].as_array_mut().unwrap().push(first);
    dup.config_json = table.to_string();
    gw.xds().set_ir(&node, &ir(dup)).unwrap();
    let nack = wait_for(Duration::from_secs(20), || {
        gw.xds().nacks().into_iter().find(|n| n.kind == "listener")
    })
    .unwrap_or_else(|| panic!("no NACK; log:\n{}", gw.envoy_log()));
    assert!(!nack.resolved);
    assert!(
        gw.envoy_log().contains("tenant \"team-a\" is listed twice"),
        "{}",
        gw.envoy_log()
    );
    assert_eq!(get("/t/team-a/x", &alice, &[]).body, "tenant-a /x");

    // A cluster name Envoy could never have is refused the same way.
    let mut bad = TenantRouting::by_path(&routing_wasm, &tenants());
    bad.config_json = bad.config_json.replace("\"tenant-b\"", "\"tenant b\"");
    gw.xds().set_ir(&node, &ir(bad)).unwrap();
    wait_for(Duration::from_secs(20), || {
        gw.envoy_log()
            .contains("\"tenant b\" is not a valid Envoy cluster name")
            .then_some(())
    })
    .unwrap_or_else(|| panic!("bad cluster not refused; log:\n{}", gw.envoy_log()));
    assert_eq!(get("/t/team-b/y", &bob, &[]).body, "tenant-b /y");
}
