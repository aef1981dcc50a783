//! Golden tests of the NsightGateway -> gateway IR translation: `tests/data/xds/<case>.yaml`
//! (the NsightGateway, then Namespaces, Services and Secrets of the cluster; a Secret of another
//! namespace is that tenant's API-key Secret; `<service>-gateway-token` is that Service's
//! gateway token) -> `<case>.out.yaml` (the conditions, the IR or
//! why there is none, the auth filter's JSON configuration and the routing filter's table).
//! `NSIGHT_UPDATE_GOLDEN=1 cargo test -p nsight-operator --test xds_golden` rewrites them.
//! Test keys and certificates in the inputs are for tests only.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::{collections::BTreeMap, path::PathBuf};

use base64::Engine as _;
use k8s_openapi::api::core::v1::{Secret, Service};
use nsight_api::NsightGateway;
use nsight_gateway::translate::translate as to_envoy;
use nsight_operator::{
    render::gateway_token,
    xds::{
        tenants::TenantInputs,
        translate::{self, Inputs, XdsSettings},
    },
};
use serde_json::{json, Value};

/// 2027-01-01T00:00:00Z (the test certificate is valid from 2026-11-22 to 2126).
const NOW: i64 = 1_798_761_600;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/xds")
}

fn run(case: &str) -> (translate::Translation, Value) {
    let text = std::fs::read_to_string(dir().join(format!("{case}.yaml"))).unwrap();
    let docs: Vec<Value> = text
        .split("\n---\n")
        .map(|d| serde_norway::from_str(d).unwrap())
        .collect();
    let gateway: NsightGateway = serde_json::from_value(docs[0].clone()).unwrap();
    let mut services = Vec::new();
    let mut secrets = BTreeMap::new();
    let mut tenant_secrets = BTreeMap::new();
    let mut namespaces = BTreeMap::new();
    let mut tokens = BTreeMap::new();
    for doc in &docs[1..] {
        match doc["kind"].as_str().unwrap() {
            "Service" => services.push(serde_json::from_value::<Service>(doc.clone()).unwrap()),
            "Secret" => {
                let s: Secret = serde_json::from_value(doc.clone()).unwrap();
                let name = s.metadata.name.clone().unwrap();
                if let Some(service) = name.strip_suffix("-gateway-token") {
                    let ns = s.metadata.namespace.clone().unwrap();
                    let token = gateway_token::read(&s).expect("a valid gateway token");
                    tokens.insert((ns, service.to_owned()), token);
                    continue;
                }
                match s.metadata.namespace.clone() {
                    Some(ns) if ns != gateway.metadata.namespace.clone().unwrap() => {
                        tenant_secrets.insert(ns, s);
                    }
                    _ => {
                        secrets.insert(s.metadata.name.clone().unwrap(), s);
                    }
                }
            }
            "Namespace" => {
                let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
                let labels = serde_json::from_value(doc["metadata"]["labels"].clone());
                namespaces.insert(name, labels.unwrap_or_default());
            }
            other => panic!("{case}: unexpected kind {other}"),
        }
    }
    let out = translate::translate_with_tenants(
        &Inputs {
            gateway: &gateway,
            services: &services,
            secrets: &secrets,
            gateway_tokens: &tokens,
            now: NOW,
        },
        &TenantInputs {
            namespaces: &namespaces,
            services: &services,
            api_key_secrets: &tenant_secrets,
            gateway_tokens: &tokens,
        },
        &XdsSettings::default(),
    );
    let conditions: Vec<Value> = out
        .conditions
        .iter()
        .map(|c| json!({"type": c.type_, "status": c.status, "reason": c.reason, "message": c.message}))
        .collect();
    let view = match &out.ir {
        Ok(ir) => {
            let auth: Vec<Value> = ir
                .listeners
                .iter()
                .filter_map(|l| l.auth.as_ref())
                .map(|a| redacted(serde_json::from_str(&a.config_json).unwrap()))
                .collect();
            // The IR must translate to Envoy resources.
            to_envoy(ir).unwrap();
            // Which upstreams the gateway sends a token to (the tokens themselves stay out).
            let mut view = json!({"conditions": conditions, "ir": ir, "auth": auth,
                                  "gateway_token_to": with_token(ir)});
            let routing: Vec<Value> = ir
                .listeners
                .iter()
                .filter_map(|l| l.routing.as_ref())
                .map(|r| serde_json::from_str(&r.config_json).unwrap())
                .collect();
            if !routing.is_empty() {
                view["routing"] = Value::Array(routing);
            }
            view
        }
        Err(why) => json!({"conditions": conditions, "refused": why}),
    };
    (out, view)
}

/// The upstreams the gateway sends a gateway token to.
fn with_token(ir: &nsight_gateway::ir::GatewayIr) -> Vec<&str> {
    ir.upstreams
        .iter()
        .filter(|u| u.gateway_token.is_some())
        .map(|u| u.name.as_str())
        .collect()
}

/// The OAuth2 client secret and cookie key replaced, so the golden files hold no secret.
fn redacted(mut config: Value) -> Value {
    if let Some(o) = config.get_mut("oauth2").and_then(Value::as_object_mut) {
        for key in ["client_secret", "cookie_key"] {
            if o.contains_key(key) {
                o.insert(key.into(), json!("<redacted>"));
            }
        }
    }
    config
}

fn golden(case: &str) -> translate::Translation {
    let (out, view) = run(case);
    let text = serde_norway::to_string(&view).unwrap();
    let path = dir().join(format!("{case}.out.yaml"));
    if std::env::var_os("NSIGHT_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} missing: run with NSIGHT_UPDATE_GOLDEN=1",
            path.display()
        )
    });
    assert_eq!(
        text, want,
        "{case}: the translation changed; review and regenerate"
    );
    assert!(
        !text.contains("PRIVATE KEY"),
        "{case}: key material in the view"
    );
    out
}

fn condition<'a>(
    out: &'a translate::Translation,
    type_: &str,
) -> &'a nsight_operator::conditions::Cond {
    out.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

#[test]
fn open_gateway_routes_every_discovered_service() {
    let out = golden("open");
    let ir = out.ir.unwrap();
    assert_eq!(
        ir.listeners.len(),
        1,
        "no storage Service: no storage proxy"
    );
    let l = &ir.listeners[0];
    assert_eq!(
        (l.port, l.auth.is_none(), l.tls_secret.is_none()),
        (8888, true, true)
    );
    let prefixes: Vec<&str> = l.routes.iter().map(|r| r.prefix.as_str()).collect();
    assert_eq!(
        prefixes,
        ["/streamers/view-1/", "/coordinator/", "/analysis/", "/"]
    );
    let streamer = &l.routes[0];
    assert_eq!(
        (
            streamer.upstream.as_str(),
            streamer.rewrite_prefix.as_deref(),
            streamer.timeout,
            streamer.public
        ),
        ("streamer-view-1", Some("/"), None, false),
        "a streamer is served behind auth, rewritten to its root, with no time limit"
    );
    let hosts: Vec<String> = ir
        .upstreams
        .iter()
        .map(|u| format!("{}:{}", u.endpoints[0].host, u.endpoints[0].port))
        .collect();
    assert_eq!(
        hosts,
        [
            "coord.research.svc.cluster.local:8080",
            "analysis.research.svc.cluster.local:8090",
            "ui.research.svc.cluster.local:8080",
            "view-1.research.svc.cluster.local:8080"
        ],
        "only operator-managed Services of the gateway's namespace"
    );
    // The coordinator's token (its Secret exists) rides on its route; analysis has none yet.
    assert_eq!(with_token(&ir), ["coordinator"]);
    let yaml = nsight_gateway::render::to_yaml(&to_envoy(&ir).unwrap()).unwrap();
    assert!(
        yaml.contains("key: x-nsight-gateway-token")
            && yaml.contains("ngt_test-only-research-0123456789abcdef0123456789abcdef"),
        "the coordinator route sets the token:\n{yaml}"
    );
}

#[test]
fn api_key_tls_storage_and_custom_prefixes() {
    let out = golden("apikey-tls-storage");
    assert_eq!(condition(&out, "TLSSecretValid").reason, "Valid");
    let ir = out.ir.unwrap();
    let l = &ir.listeners[0];
    assert_eq!(l.port, 9443);
    assert_eq!(l.tls_secret.as_deref(), Some("gateway-tls"));
    assert!(ir.secrets[0].private_key_pem.contains("PRIVATE KEY"));
    let config: Value = serde_json::from_str(&l.auth.as_ref().unwrap().config_json).unwrap();
    assert_eq!(
        config,
        json!({"mode": "api-key", "api_keys": ["0123456789abcdef-test-only"]})
    );
    let prefixes: Vec<&str> = l.routes.iter().map(|r| r.prefix.as_str()).collect();
    assert_eq!(prefixes, ["/analysis/v2/", "/c/", "/"]);
    // Custom prefixes reach the backends under the prefixes they serve.
    let rewrites: Vec<Option<&str>> = l
        .routes
        .iter()
        .map(|r| r.rewrite_prefix.as_deref())
        .collect();
    assert_eq!(rewrites, [Some("/analysis/"), Some("/coordinator/"), None]);
    let storage = &ir.listeners[1];
    assert_eq!((storage.port, storage.auth.is_none()), (9000, true));
    let up = ir.upstreams.iter().find(|u| u.name == "storage").unwrap();
    assert_eq!(
        up.endpoints[0].host, "minio.storage.example",
        "the cloudStorageRef one, ExternalName"
    );
}

#[test]
fn jwt_with_api_keys_and_from_a_secret() {
    for case in ["jwt-inline-and-apikey", "jwt-secret"] {
        let out = golden(case);
        assert_eq!(condition(&out, "AuthConfigValid").reason, "Jwt");
        let ir = out.ir.unwrap();
        let config: Value =
            serde_json::from_str(&ir.listeners[0].auth.as_ref().unwrap().config_json).unwrap();
        assert_eq!(config["mode"], "jwt");
        assert_eq!(config["jwt"]["issuer"], "https://idp.example");
        assert_eq!(config["jwt"]["jwks"]["keys"][0]["kid"], "k1");
        assert_eq!(
            config.get("api_keys").is_some(),
            case == "jwt-inline-and-apikey"
        );
    }
}

#[test]
fn broken_inputs_give_no_ir_and_a_false_condition() {
    for (case, type_, reason, says) in [
        (
            "tls-key-mismatch",
            "TLSSecretValid",
            "Invalid",
            "is not the private key of the first certificate",
        ),
        (
            "apikey-secret-missing",
            "AuthConfigValid",
            "ApiKeyInvalid",
            "Secret research/nope (spec.authentication.apikey.keySecretRef) does not exist",
        ),
        (
            "apikey-too-short",
            "AuthConfigValid",
            "ApiKeyInvalid",
            "shorter than 16 characters",
        ),
        (
            "oauth2-without-tls",
            "AuthConfigValid",
            "OAuth2RequiresTLS",
            "set spec.tlsSecretRef",
        ),
        (
            "oauth2-http-issuer",
            "AuthConfigValid",
            "OAuth2Invalid",
            "must be an https:// URL",
        ),
        (
            "oauth2-short-hmac",
            "AuthConfigValid",
            "OAuth2Invalid",
            "`hmac.key` has 9 bytes; use at least 32",
        ),
    ] {
        let out = golden(case);
        let c = condition(&out, type_);
        assert!(!c.status, "{case}");
        assert_eq!(c.reason, reason, "{case}");
        assert!(c.message.contains(says), "{case}: {}", c.message);
        assert!(out.ir.unwrap_err().contains(type_), "{case}");
    }
}

#[test]
fn referenced_secrets_are_listed_once() {
    let gw: NsightGateway = serde_json::from_value(json!({
        "apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
        "metadata": {"name": "g", "namespace": "n"},
        "spec": {"tlsSecretRef": {"name": "s"},
                 "authentication": {"apikey": {"enabled": true, "keySecretRef": {"name": "s"}},
                                    "jwt": {"jwksSecretRef": {"name": "j"}}}}}))
    .unwrap();
    assert_eq!(translate::referenced_secrets(&gw), ["j", "s"]);
}

const CLIENT_SECRET: &str = "s3cr3t-client-value";

#[test]
fn oauth2_with_tls_reaches_the_issuer_over_tls_with_the_system_cas() {
    let out = golden("oauth2-with-tls");
    let c = condition(&out, "AuthConfigValid");
    assert!(c.status, "{c:?}");
    assert_eq!(c.reason, "OAuth2");
    assert!(
        !format!("{out:?}").contains(CLIENT_SECRET),
        "secret in Debug"
    );
    assert!(!c.message.contains(CLIENT_SECRET));
    let ir = out.ir.unwrap();
    let idp = ir
        .upstreams
        .iter()
        .find(|u| u.name == "oauth2-idp-idp.example-443")
        .unwrap();
    assert_eq!(
        (idp.endpoints[0].host.as_str(), idp.endpoints[0].port),
        ("idp.example", 443)
    );
    let tls = idp.tls.as_ref().unwrap();
    assert_eq!(tls.sni, "idp.example");
    assert_eq!(tls.trust, nsight_gateway::ir::CaTrust::System);
    let l = &ir.listeners[0];
    assert!(l.tls_secret.is_some());
    let config: Value = serde_json::from_str(&l.auth.as_ref().unwrap().config_json).unwrap();
    let o = &config["oauth2"];
    assert_eq!(config["mode"], "oauth2");
    assert_eq!(o["cluster"], "oauth2-idp-idp.example-443");
    assert_eq!(
        o["client_secret"], CLIENT_SECRET,
        "from the Secret, to the filter"
    );
    assert_eq!(o["listener_tls"], true);
    assert_eq!(o["audiences"], json!(["c"]), "default: the client id");
    assert_eq!(
        o["redirect_uri"], "https://gateway.test:8888/oauth2/callback",
        "the certificate's DNS name and the gateway port"
    );
    // The cookie key is the Secret's hmac.key bytes, base64: at least 32 bytes.
    let key = base64::engine::general_purpose::STANDARD
        .decode(o["cookie_key"].as_str().unwrap())
        .unwrap();
    assert_eq!(key, b"MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI=");
}

#[test]
fn oauth2_with_a_private_ca_redirect_uri_audiences_claim_and_api_key() {
    let out = golden("oauth2-private-ca");
    let c = condition(&out, "AuthConfigValid");
    assert!(c.status, "{c:?}");
    assert!(c.message.ends_with("or API key"), "{}", c.message);
    let ir = out.ir.unwrap();
    let idp = ir.upstreams.last().unwrap();
    assert_eq!(idp.name, "oauth2-idp-idp.example-8443");
    assert_eq!(idp.endpoints[0].port, 8443);
    let Some(nsight_gateway::ir::CaTrust::Pem(pem)) = idp.tls.as_ref().map(|t| &t.trust) else {
        panic!("the Secret's ca.crt is trusted: {idp:?}");
    };
    assert!(pem.contains("BEGIN CERTIFICATE"));
    let config: Value =
        serde_json::from_str(&ir.listeners[0].auth.as_ref().unwrap().config_json).unwrap();
    let o = &config["oauth2"];
    assert_eq!(
        o["redirect_uri"],
        "https://nsight.example.com/oauth2/callback"
    );
    assert_eq!(o["audiences"], json!(["nsight-cloud"]));
    assert_eq!(o["identity_claim"], "groups");
    assert_eq!(o["scopes"], json!(["openid", "profile"]));
    assert_eq!(config["api_keys"], json!(["inline-key-0123456789abcdef"]));
    // The rendered Envoy resources carry the CA and check the issuer's name.
    let yaml = nsight_gateway::render::to_yaml(&to_envoy(&ir).unwrap()).unwrap();
    assert!(yaml.contains("sni: idp.example"), "{yaml}");
    assert!(yaml.contains("exact: idp.example"), "{yaml}");
    assert!(!yaml.contains(CLIENT_SECRET), "client secret rendered");
}

/// The routing filter's decision on the rendered table (`nsight_routing_filter::route`, the
/// code the filter runs in Envoy): `Ok(cluster)` or `Err(status)`.
fn routed(table: &str, path: &str, identity: &str) -> Result<String, u16> {
    use nsight_routing_filter::{route, Request, RoutingConfig};
    let config = RoutingConfig::parse(table.as_bytes()).unwrap();
    route(&config, Request::by_path(path, identity)).cluster_or_status()
}

#[test]
fn a_shared_gateway_routes_each_tenant_to_its_own_backends_only() {
    let out = golden("tenants-shared");
    let c = condition(&out, "TenantRoutingValid");
    assert!(c.status, "{c:?}");
    assert_eq!(c.reason, "Routed");
    assert_eq!(
        c.message,
        "/t/<namespace>/ routes team-a (coordinator, analysis), team-b (coordinator); no backend yet: team-c"
    );
    let ir = out.ir.unwrap();
    let names: Vec<&str> = ir.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ui",
            "tenant-team-a-coordinator",
            "tenant-team-a-analysis",
            "tenant-team-b-coordinator"
        ],
        "one cluster per tenant backend; `other` is not selected, unmanaged Services are not routed"
    );
    assert_eq!(
        ir.upstreams[2].endpoints[0].host,
        "analysis.team-a.svc.cluster.local"
    );
    let l = &ir.listeners[0];
    let routing = l.routing.as_ref().unwrap();
    assert_eq!(
        routing.wasm_path,
        PathBuf::from("/etc/envoy/wasm/nsight_routing_filter.wasm")
    );
    assert_eq!(routing.timeout.as_secs(), 300, "a tenant has an analysis");
    let table = routing.config_json.as_str();

    // Identities: alice is listed for team-a; `team-b` (a group named after the namespace)
    // reaches team-b; tenant API keys reach their own namespace.
    assert_eq!(
        routed(table, "/t/team-a/coordinator/v1/status", "alice"),
        Ok("tenant-team-a-coordinator".into())
    );
    assert_eq!(
        routed(table, "/t/team-a/analysis/v1/jobs", "devs,alice"),
        Ok("tenant-team-a-analysis".into())
    );
    assert_eq!(
        routed(table, "/t/team-b/coordinator/v1/status", "team-b"),
        Ok("tenant-team-b-coordinator".into())
    );
    assert_eq!(
        routed(table, "/t/team-b/coordinator/v1/x", "api-key:team-b"),
        Ok("tenant-team-b-coordinator".into())
    );
    // Cross-tenant: 403, whatever the backend asked for.
    for (path, identity) in [
        ("/t/team-b/coordinator/v1/status", "alice"),
        ("/t/team-a/coordinator/v1/status", "team-b"),
        ("/t/team-a/analysis/v1/jobs", "api-key:team-b"),
        ("/t/team-b/coordinator/v1/status", "api-key:team-a"),
        ("/t/team-a/coordinator/v1/status", "api-key"),
    ] {
        assert_eq!(
            routed(table, path, identity),
            Err(403),
            "{identity} on {path}"
        );
    }
    // Not a tenant of this gateway (no backend, not selected) or no such backend: 404.
    assert_eq!(
        routed(table, "/t/team-c/coordinator/v1/x", "team-c"),
        Err(404)
    );
    assert_eq!(
        routed(table, "/t/other/coordinator/v1/x", "other"),
        Err(404)
    );
    assert_eq!(
        routed(table, "/t/team-b/analysis/v1/jobs", "team-b"),
        Err(404)
    );

    // The auth filter: the gateway's own key (no tenant) and one key per tenant Secret.
    let auth: Value = serde_json::from_str(&l.auth.as_ref().unwrap().config_json).unwrap();
    assert_eq!(
        auth["api_keys"],
        json!([
            "0123456789abcdef-test-only",
            {"key": "team-a-key-0123456789-test-only", "tenant": "team-a"},
            {"key": "team-b-key-0123456789-test-only", "tenant": "team-b"}
        ])
    );
    assert_eq!(auth["jwt"]["identity_claim"], "groups");
    // The Envoy resources: both tenants' clusters, the cluster_header routes first.
    let yaml = nsight_gateway::render::to_yaml(&to_envoy(&ir).unwrap()).unwrap();
    for needle in [
        "name: tenant-team-a-analysis",
        "name: tenant-team-b-coordinator",
        "cluster_header: x-nsight-tenant-cluster",
        "nsight.filters.http.routing",
    ] {
        assert!(yaml.contains(needle), "{needle} missing");
    }
    // team-a's coordinator token goes to the routing filter (a cluster_header route cannot set
    // it), keyed by that cluster; the IR's own table holds no token.
    assert!(!l.routing.as_ref().unwrap().config_json.contains("ngt_"));
    let filter = to_envoy(&ir).unwrap();
    let listener =
        serde_json::to_string(&nsight_gateway::render::to_json(&filter).unwrap()).unwrap();
    assert!(
        listener.contains(
            r#"\"gateway_tokens\":{\"tenant-team-a-coordinator\":\"ngt_test-only-team-a-"#
        ),
        "the routing filter's table carries team-a's coordinator token: {listener}"
    );
}

#[test]
fn shared_gateway_refusals_and_bad_tenant_keys() {
    let out = golden("tenants-not-allowed");
    let c = condition(&out, "TenantRoutingValid");
    assert_eq!((c.status, c.reason), (false, "NamespaceNotAllowed"));
    assert!(
        c.message.contains("may not route namespaces team-a")
            && c.message.contains("[nsight-operator]"),
        "{}",
        c.message
    );
    assert!(out.ir.unwrap_err().contains("TenantRoutingValid"));

    // Bad tenant keys are left out (that tenant's key gets 401), the rest is published.
    let out = golden("tenants-bad-keys");
    let c = condition(&out, "TenantRoutingValid");
    assert_eq!((c.status, c.reason), (false, "TenantApiKeyInvalid"));
    assert!(
        c.message.contains(
            "Secret team-a/key (spec.tenants.apiKeySecretRef): `token` is shorter than 16"
        ),
        "{}",
        c.message
    );
    assert!(
        c.message
            .contains("Secret team-b/key: the key is already another tenant's or the gateway's"),
        "{}",
        c.message
    );
    assert!(
        !c.message.contains("0123456789abcdef-test-only"),
        "a key in a message"
    );
    let ir = out.ir.unwrap();
    let l = &ir.listeners[0];
    let auth: Value = serde_json::from_str(&l.auth.as_ref().unwrap().config_json).unwrap();
    assert_eq!(auth["api_keys"], json!(["0123456789abcdef-test-only"]));
    let table = l.routing.as_ref().unwrap().config_json.as_str();
    assert_eq!(l.routing.as_ref().unwrap().path_prefix, "/tenants/");
    assert_eq!(
        routed(table, "/tenants/team-a/coordinator/v1/x", "api-key:team-a"),
        Ok("tenant-team-a-coordinator".into())
    );
    assert_eq!(
        routed(table, "/tenants/team-a/coordinator/v1/x", "api-key"),
        Err(403)
    );
}
