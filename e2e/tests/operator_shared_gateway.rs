//! A gateway shared by several namespaces (`spec.tenants`) on a real kube-apiserver + etcd,
//! with the manager in-process (the reconcile controllers render each tenant's coordinator and
//! analysis Services; the xDS controller publishes the gateway's snapshot on the ADS server):
//! the snapshot carries one cluster per tenant backend and the routing filter's table for both
//! tenants; the table, run through the routing filter's own decision code, routes each tenant's
//! callers (identity or tenant API key) to their backends and denies the other tenant (403); a
//! namespace labelled later joins, one unlabelled leaves; the CRD's CEL rules refuse tenants
//! without authentication or without namespaces; a gateway outside the trusted namespaces may
//! not route other namespaces. Needs `cargo xtask setup kube` (no Envoy: the filter itself
//! against Envoy is `envoy_routing_filter.rs`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use nsight_e2e::{kube::Kube, wait_for};
use nsight_gateway::{
    cache::node_id,
    render::to_json,
    resources::{ResourceType, Resources},
    server::{XdsHandle, XdsServer},
};
use nsight_operator::{
    manager::{self, Health},
    render::RenderSettings,
    xds::translate::XdsSettings,
};
use nsight_routing_filter::{route, Request, RoutingConfig};
use serde_json::{json, Value};

#[path = "support/kube_client.rs"]
mod kube_client;
use kube_client::{client, cluster_with_crds};

const WAIT: Duration = Duration::from_secs(40);
const SHARED: &str = "nsight-operator";
const KEY_A: &str = "team-a-key-0123456789-test-only";
const KEY_B: &str = "team-b-key-0123456789-test-only";
const TENANT_LABEL: &str = "nsight.nvidia.com/tenant";

fn namespace(kube: &Kube, name: &str, tenant: bool) {
    let labels = if tenant {
        json!({TENANT_LABEL: "true"})
    } else {
        json!({})
    };
    kube.create(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": labels}}),
    );
}

fn cr(kube: &Kube, ns: &str, plural: &str, kind: &str, name: &str, spec: Value) {
    kube.create(
        &format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/{plural}"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": kind,
                "metadata": {"name": name}, "spec": spec}),
    );
}

fn tenant_key(kube: &Kube, ns: &str, key: &str) {
    kube.create(
        &format!("/api/v1/namespaces/{ns}/secrets"),
        &json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "nsight-tenant-key"}, "stringData": {"api-key": key}}),
    );
}

/// The snapshot's clusters and the routing filter's table (from the listener's Wasm filter
/// configuration), once the node has a snapshot with a table.
fn published(xds: &XdsHandle, node: &str) -> Option<(Vec<String>, String)> {
    let (clusters, configs) = snapshot(xds, node)?;
    let table = configs.into_iter().find(|s| s.contains("\"tenants\""))?;
    Some((clusters, table))
}

/// The snapshot's cluster names and the JSON configurations of its Wasm filters.
fn snapshot(xds: &XdsHandle, node: &str) -> Option<(Vec<String>, Vec<String>)> {
    let snapshot = xds.snapshot(node)?;
    let mut resources = Resources::new();
    for kind in [ResourceType::Cluster, ResourceType::Listener] {
        let by_name = snapshot
            .resources(kind)
            .map(|r| (r.name.clone(), r.clone()))
            .collect::<BTreeMap<_, _>>();
        resources.insert(kind, by_name);
    }
    let clusters = resources[&ResourceType::Cluster].keys().cloned().collect();
    let configs = strings(&to_json(&resources).unwrap())
        .into_iter()
        .filter(|s| s.starts_with('{'))
        .collect();
    Some((clusters, configs))
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(strings).collect(),
        Value::Object(m) => m.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

fn tenants_of(table: &str) -> Vec<String> {
    let config = RoutingConfig::parse(table.as_bytes()).unwrap();
    config.tenants.keys().cloned().collect()
}

/// The gateway tokens in a published routing table, by cluster.
fn tokens_of(table: &str) -> BTreeMap<String, String> {
    serde_json::from_str::<Value>(table)
        .ok()
        .and_then(|t| serde_json::from_value(t["gateway_tokens"].clone()).ok())
        .unwrap_or_default()
}

/// The routing filter's decision (its own code) on the published table.
fn decide(table: &str, path: &str, identity: &str) -> Result<String, u16> {
    let config = RoutingConfig::parse(table.as_bytes()).unwrap();
    route(&config, Request::by_path(path, identity)).cluster_or_status()
}

fn condition(kube: &Kube, path: &str, type_: &str) -> Option<Value> {
    kube.get(path)?["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

#[test]
fn a_shared_gateway_publishes_both_tenants_and_keeps_them_apart() {
    let (kube, rt) = cluster_with_crds();
    namespace(&kube, SHARED, false);
    namespace(&kube, "team-a", true);
    namespace(&kube, "team-b", true);
    namespace(&kube, "team-c", false);

    // The manager over every namespace, with its ADS server.
    let xds = Arc::new(
        rt.block_on(XdsServer::serve(([127, 0, 0, 1], 0).into()))
            .unwrap(),
    );
    let config = manager::Config {
        settings: RenderSettings::default(),
        namespace: None,
    };
    rt.spawn(manager::run_with_xds(
        client(&rt, &kube),
        config,
        Health::default(),
        None,
        Some((xds.clone(), XdsSettings::default())),
    ));

    // Each tenant's own platform: the operator renders their Services.
    for ns in ["team-a", "team-b", "team-c"] {
        cr(
            &kube,
            ns,
            "nsightcoordinators",
            "NsightCoordinator",
            "coord",
            json!({}),
        );
    }
    cr(
        &kube,
        "team-a",
        "nsightanalyses",
        "NsightAnalysis",
        "analysis",
        json!({}),
    );
    tenant_key(&kube, "team-a", KEY_A);
    tenant_key(&kube, "team-b", KEY_B);

    // The CRD's rules: tenants need authentication and at least one way to name namespaces;
    // names must be namespace names.
    let gateways = format!("/apis/nvidia.com/v1alpha1/namespaces/{SHARED}/nsightgateways");
    let apikey = json!({"apikey": {"enabled": true, "key": "shared-gateway-key-0123456789"}});
    for (spec, says) in [
        (
            json!({"tenants": {"namespaces": ["team-a"]}}),
            "spec.tenants needs authentication",
        ),
        (
            json!({"authentication": apikey, "tenants": {"identityIsNamespace": true}}),
            "spec.tenants names no namespace",
        ),
        (
            json!({"authentication": apikey, "tenants": {"namespaces": ["Team_A"]}}),
            "spec.tenants.namespaces[0]",
        ),
        (
            json!({"authentication": apikey,
                   "tenants": {"namespaces": ["team-a"], "identities": {"team-a": ["a,b"]}}}),
            "should match",
        ),
    ] {
        let body = json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
                          "metadata": {"name": "refused"}, "spec": spec});
        let (status, out) = kube.request("POST", &gateways, Some(&body));
        assert_eq!(status, 422, "{spec}: {out}");
        assert!(out.to_string().contains(says), "{spec}: {out}");
    }

    // The shared gateway: tenants by label, alice listed for team-a, tenant API keys.
    kube.create(
        &gateways,
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
                "metadata": {"name": "shared"},
                "spec": {"authentication": apikey,
                         "tenants": {"namespaceSelector": {"matchLabels": {TENANT_LABEL: "true"}},
                                     "identities": {"team-a": ["alice"]},
                                     "apiKeySecretRef": {"name": "nsight-tenant-key"}}}}),
    );
    let node = node_id::gateway(SHARED, "shared");
    let both = ["team-a", "team-b"];
    let expected = [
        "tenant-team-a-coordinator",
        "tenant-team-a-analysis",
        "tenant-team-b-coordinator",
    ];
    // The tenants' Services appear as the manager renders their CRs: wait for all three.
    let (clusters, table) = wait_for(WAIT, || {
        published(&xds, &node).filter(|(clusters, t)| {
            tenants_of(t) == both
                && expected.iter().all(|c| clusters.iter().any(|x| x == c))
                && tokens_of(t).len() == expected.len()
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "no snapshot with both tenants' backends: {:?}",
            published(&xds, &node)
        )
    });
    assert!(
        !clusters.iter().any(|c| c.contains("team-c")),
        "{clusters:?}"
    );
    // Each tenant backend's gateway token, from the Secret the operator created for it, rides
    // in the routing filter's table (the filter sets it on what it routes there).
    let tokens = tokens_of(&table);
    for (cluster, ns, service) in [
        ("tenant-team-a-coordinator", "team-a", "coord"),
        ("tenant-team-a-analysis", "team-a", "analysis"),
        ("tenant-team-b-coordinator", "team-b", "coord"),
    ] {
        let secret = kube
            .get(&format!(
                "/api/v1/namespaces/{ns}/secrets/{service}-gateway-token"
            ))
            .unwrap_or_else(|| panic!("no gateway token Secret for {ns}/{service}"));
        let issued = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            secret["data"]["token"].as_str().unwrap(),
        )
        .unwrap();
        assert_eq!(
            tokens.get(cluster).map(String::as_bytes),
            Some(&issued[..]),
            "{cluster}"
        );
    }

    // Each tenant reaches its own backends; the other tenant is denied.
    assert_eq!(
        decide(&table, "/t/team-a/coordinator/v1/status", "alice"),
        Ok("tenant-team-a-coordinator".into())
    );
    assert_eq!(
        decide(&table, "/t/team-a/analysis/v1/jobs", "api-key:team-a"),
        Ok("tenant-team-a-analysis".into())
    );
    assert_eq!(
        decide(&table, "/t/team-b/coordinator/v1/status", "api-key:team-b"),
        Ok("tenant-team-b-coordinator".into())
    );
    for (path, identity) in [
        ("/t/team-b/coordinator/v1/status", "alice"),
        ("/t/team-b/coordinator/v1/status", "api-key:team-a"),
        ("/t/team-a/coordinator/v1/status", "api-key:team-b"),
        ("/t/team-a/coordinator/v1/status", "api-key"),
    ] {
        assert_eq!(
            decide(&table, path, identity),
            Err(403),
            "{identity} on {path}"
        );
    }
    assert_eq!(
        decide(&table, "/t/team-c/coordinator/v1/x", "alice"),
        Err(404)
    );
    // The auth filter got each tenant's key from its namespace, bound to that tenant.
    let (_, configs) = snapshot(&xds, &node).unwrap();
    let auth: Value = configs
        .iter()
        .find(|c| c.contains("\"api_keys\""))
        .map(|c| serde_json::from_str(c).unwrap())
        .unwrap();
    let keys = auth["api_keys"].as_array().unwrap();
    assert!(
        keys.contains(&json!({"key": KEY_A, "tenant": "team-a"})),
        "{keys:?}"
    );
    assert!(
        keys.contains(&json!({"key": KEY_B, "tenant": "team-b"})),
        "{keys:?}"
    );
    let gw_path = format!("{gateways}/shared");
    let routed = wait_for(WAIT, || {
        condition(&kube, &gw_path, "TenantRoutingValid").filter(|c| c["status"] == "True")
    })
    .unwrap_or_else(|| panic!("no TenantRoutingValid=True: {:?}", kube.get(&gw_path)));
    assert_eq!(routed["reason"], "Routed", "{routed}");

    // Namespaces change: team-c labelled joins, team-b unlabelled leaves.
    kube.merge_patch(
        "/api/v1/namespaces/team-c",
        &json!({"metadata": {"labels": {TENANT_LABEL: "true"}}}),
    );
    kube.merge_patch(
        "/api/v1/namespaces/team-b",
        &json!({"metadata": {"labels": {TENANT_LABEL: null}}}),
    );
    let (clusters, table) = wait_for(WAIT, || {
        published(&xds, &node).filter(|(_, t)| tenants_of(t) == ["team-a", "team-c"])
    })
    .unwrap_or_else(|| {
        panic!(
            "namespace changes not followed: {:?}",
            published(&xds, &node)
        )
    });
    assert!(clusters.contains(&"tenant-team-c-coordinator".to_owned()));
    assert!(
        !clusters.iter().any(|c| c.contains("team-b")),
        "{clusters:?}"
    );
    assert_eq!(
        decide(&table, "/t/team-b/coordinator/v1/status", "api-key:team-b"),
        Err(404)
    );

    // A namespace admin's gateway may not route another namespace.
    cr(
        &kube,
        "team-a",
        "nsightgateways",
        "NsightGateway",
        "grab",
        json!({"authentication": apikey, "tenants": {"namespaces": ["team-b"]}}),
    );
    let grab = "/apis/nvidia.com/v1alpha1/namespaces/team-a/nsightgateways/grab";
    let refused = wait_for(WAIT, || condition(&kube, grab, "TenantRoutingValid"))
        .unwrap_or_else(|| panic!("no TenantRoutingValid: {:?}", kube.get(grab)));
    assert_eq!(
        (&refused["status"], &refused["reason"]),
        (&json!("False"), &json!("NamespaceNotAllowed")),
        "{refused}"
    );
    assert!(xds.snapshot(&node_id::gateway("team-a", "grab")).is_none());
    drop(rt);
}
