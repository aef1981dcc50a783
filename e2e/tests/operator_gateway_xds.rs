//! The manager's xDS side end to end: a real kube-apiserver + etcd, the manager in-process
//! (controllers + the gateway xDS controller + the ADS server), and a real Envoy bootstrapped
//! exactly like the rendered gateway Deployment's ConfigMap (only the admin port moved to a
//! free one). An NsightGateway with an API-key Secret gets listeners: no key 401, the key
//! reaches the coordinator upstream; a rotated Secret swaps the key without restarting Envoy;
//! a broken TLS Secret gives `TLSSecretValid=False` while Envoy keeps serving the last good
//! configuration. Needs `cargo xtask setup kube` and `cargo xtask build-wasm`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::{net::SocketAddr, sync::Arc, time::Duration};

use nsight_e2e::{
    envoy_bin, free_port, gateway::named_upstream, http, wait_for, wasm_artifact, TempDir,
};
use nsight_gateway::{
    bootstrap::Bootstrap,
    server::XdsServer,
    supervisor::{EnvoyConfig, EnvoySupervisor},
};
use nsight_operator::{
    manager::{self, Health},
    render::{gateway::ADMIN_PORT, RenderSettings},
    xds::translate::XdsSettings,
};
use serde_json::{json, Value};

#[path = "support/kube_client.rs"]
mod kube_client;
use kube_client::{client, cluster_with_crds};

const NS: &str = "gw-e2e";
const WAIT: Duration = Duration::from_secs(30);
const KEY1: &str = "first-key-0123456789-test-only";
const KEY2: &str = "second-key-0123456789-test-only";

fn condition(cr: &Value, type_: &str) -> Option<Value> {
    cr["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

fn secret(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data})
}

fn status(addr: SocketAddr, key: Option<&str>) -> Option<(u16, String)> {
    let bearer = key.map(|k| format!("Bearer {k}"));
    let headers: Vec<(&str, &str)> = bearer
        .as_deref()
        .map(|b| vec![("authorization", b)])
        .unwrap_or_default();
    let r = http::get(addr, "/coordinator/api/v1/ping", &headers).ok()?;
    Some((r.status, r.body))
}

#[test]
fn gateway_gets_listeners_rotates_keys_and_keeps_serving_on_a_broken_tls_secret() {
    let wasm = wasm_artifact("nsight_auth_filter.wasm");
    let (kube, rt) = cluster_with_crds();
    kube.create(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    );

    // The manager with its ADS server, as `nsight-operator manager` wires them.
    let xds = rt
        .block_on(XdsServer::serve(([127, 0, 0, 1], 0).into()))
        .unwrap();
    let xds_addr = xds.local_addr();
    let xds = Arc::new(xds);
    let config = manager::Config {
        settings: RenderSettings {
            xds_host: "127.0.0.1".into(),
            xds_port: xds_addr.port(),
            ..RenderSettings::default()
        },
        namespace: Some(NS.into()),
    };
    let xds_settings = XdsSettings {
        wasm_path: wasm,
        listen_address: "127.0.0.1".into(),
        ..XdsSettings::default()
    };
    rt.spawn(manager::run_with_xds(
        client(&rt, &kube),
        config,
        Health::default(),
        None,
        Some((xds.clone(), xds_settings)),
    ));

    // The coordinator the gateway routes to: an operator-labelled Service (ExternalName, so
    // Envoy on this host resolves it) in front of a real HTTP server.
    let upstream = named_upstream("coordinator");
    kube.create(
        &format!("/api/v1/namespaces/{NS}/services"),
        &json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "coord", "labels": {
                    "app.kubernetes.io/managed-by": "nsight-operator",
                    "app.kubernetes.io/component": "coordinator"}},
                "spec": {"type": "ExternalName", "externalName": "localhost",
                         "ports": [{"name": "http", "port": upstream.port()}]}}),
    );
    let secrets = format!("/api/v1/namespaces/{NS}/secrets");
    kube.create(&secrets, &secret("gw-key", json!({"api-key": KEY1})));
    let port = free_port();
    let gw_path = format!("/apis/nvidia.com/v1alpha1/namespaces/{NS}/nsightgateways/gw");
    kube.create(
        &format!("/apis/nvidia.com/v1alpha1/namespaces/{NS}/nsightgateways"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
                "metadata": {"name": "gw"},
                "spec": {"port": port, "authentication": {"apikey": {"enabled": true,
                         "keySecretRef": {"name": "gw-key", "key": "api-key"}}}}}),
    );

    // Envoy from the rendered bootstrap.
    let cm = wait_for(WAIT, || {
        kube.get(&format!("/api/v1/namespaces/{NS}/configmaps/gw-envoy"))
    })
    .expect("the gateway's bootstrap ConfigMap");
    let rendered: Value = serde_json::from_str(cm["data"]["envoy.json"].as_str().unwrap()).unwrap();
    let node = rendered["node"]["id"].as_str().unwrap().to_owned();
    assert_eq!(node, format!("nsight-gateway/{NS}/gw"));
    let mut bootstrap = Bootstrap::new(&node, xds_addr, ([127, 0, 0, 1], ADMIN_PORT));
    bootstrap.node_cluster = rendered["node"]["cluster"].as_str().unwrap().into();
    assert_eq!(
        bootstrap.to_json(),
        rendered,
        "the test runs Envoy with the rendered bootstrap"
    );
    bootstrap.admin = ([127, 0, 0, 1], free_port()).into();
    let dir = TempDir::new("operator-gateway-xds");
    let envoy = {
        let _guard = rt.enter();
        EnvoySupervisor::start(EnvoyConfig {
            envoy_bin: envoy_bin(),
            bootstrap,
            work_dir: dir.path().to_path_buf(),
            log_level: "info".into(),
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
        })
        .unwrap()
    };
    let log = || std::fs::read_to_string(envoy.log_path()).unwrap_or_default();
    if let Err(e) = rt.block_on(envoy.wait_ready(Duration::from_secs(60))) {
        panic!("{e}\nstatus: {:?}\n{}", kube.get(&gw_path), log());
    }
    let gw_addr: SocketAddr = ([127, 0, 0, 1], port).into();

    // Listeners arrived: no key 401, the key reaches the coordinator.
    assert_eq!(status(gw_addr, None).map(|s| s.0), Some(401), "{}", log());
    let ok = status(gw_addr, Some(KEY1)).unwrap();
    assert_eq!(
        ok,
        (200, "coordinator /coordinator/api/v1/ping".into()),
        "{}",
        log()
    );
    let cr = wait_for(WAIT, || {
        let cr = kube.get(&gw_path)?;
        (condition(&cr, "XdsConfigured")?["status"] == "True").then_some(cr)
    })
    .unwrap_or_else(|| panic!("no XdsConfigured=True: {:?}", kube.get(&gw_path)));
    assert_eq!(
        condition(&cr, "AuthConfigValid").unwrap()["reason"],
        "ApiKey"
    );
    assert_eq!(
        condition(&cr, "TLSSecretValid").unwrap()["reason"],
        "NotConfigured"
    );
    // The reconcile controller's conditions are kept beside ours.
    assert!(condition(&cr, "Reconciled").is_some(), "{cr}");

    // Rotate the key in the Secret: the new key works, the old one is refused.
    kube.merge_patch(
        &format!("{secrets}/gw-key"),
        &json!({"stringData": {"api-key": KEY2}}),
    );
    wait_for(WAIT, || {
        (status(gw_addr, Some(KEY2))?.0 == 200).then_some(())
    })
    .unwrap_or_else(|| panic!("the rotated key never worked\n{}", log()));
    assert_eq!(status(gw_addr, Some(KEY1)).map(|s| s.0), Some(401));

    // A Service that appears later (the analysis) gets its route.
    let analysis = named_upstream("analysis");
    kube.create(
        &format!("/api/v1/namespaces/{NS}/services"),
        &json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "analysis", "labels": {
                    "app.kubernetes.io/managed-by": "nsight-operator",
                    "app.kubernetes.io/component": "analysis"}},
                "spec": {"type": "ExternalName", "externalName": "localhost",
                         "ports": [{"name": "http", "port": analysis.port()}]}}),
    );
    let bearer = format!("Bearer {KEY2}");
    let routed = wait_for(WAIT, || {
        let r = http::get(gw_addr, "/analysis/jobs", &[("authorization", &bearer)]).ok()?;
        (r.status == 200).then_some(r.body)
    })
    .unwrap_or_else(|| panic!("no /analysis/ route\n{}", log()));
    assert_eq!(routed, "analysis /analysis/jobs");

    // A broken TLS Secret (certificate and an unrelated key): refused with a condition, and
    // Envoy keeps serving the last good configuration (plain HTTP, KEY2).
    let cert = rcgen::generate_simple_self_signed(vec!["gw.test".into()]).unwrap();
    let other = rcgen::KeyPair::generate().unwrap();
    kube.create(
        &secrets,
        &secret(
            "gw-tls",
            json!({"tls.crt": cert.cert.pem(), "tls.key": other.serialize_pem()}),
        ),
    );
    kube.merge_patch(
        &gw_path,
        &json!({"spec": {"tlsSecretRef": {"name": "gw-tls"}}}),
    );
    let cr = wait_for(WAIT, || {
        let cr = kube.get(&gw_path)?;
        (condition(&cr, "TLSSecretValid")?["status"] == "False").then_some(cr)
    })
    .unwrap_or_else(|| panic!("no TLSSecretValid=False: {:?}", kube.get(&gw_path)));
    let tls = condition(&cr, "TLSSecretValid").unwrap();
    assert!(
        tls["message"]
            .as_str()
            .unwrap()
            .contains("is not the private key of the first certificate"),
        "{tls}"
    );
    let configured = wait_for(WAIT, || {
        let c = condition(&kube.get(&gw_path)?, "XdsConfigured")?;
        (c["reason"] == "LastGoodConfigKept").then_some(c)
    })
    .unwrap_or_else(|| panic!("XdsConfigured: {:?}", kube.get(&gw_path)));
    assert_eq!(configured["status"], "False");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        status(gw_addr, Some(KEY2)),
        Some((200, "coordinator /coordinator/api/v1/ping".into())),
        "the last good configuration still serves\n{}",
        log()
    );
    assert_eq!(status(gw_addr, None).map(|s| s.0), Some(401));

    // The matching key: the condition turns True and the gateway serves HTTPS (SDS).
    kube.merge_patch(
        &format!("{secrets}/gw-tls"),
        &json!({"stringData": {"tls.key": cert.signing_key.serialize_pem()}}),
    );
    wait_for(WAIT, || {
        let c = condition(&kube.get(&gw_path)?, "TLSSecretValid")?;
        (c["status"] == "True").then_some(())
    })
    .unwrap_or_else(|| panic!("TLSSecretValid: {:?}", kube.get(&gw_path)));
    let https = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .resolve("gw.test", gw_addr)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = format!("https://gw.test:{port}/coordinator/api/v1/ping");
    let answer = wait_for(WAIT, || {
        let r = https.get(&url).bearer_auth(KEY2).send().ok()?;
        Some((r.status().as_u16(), r.text().ok()?))
    })
    .unwrap_or_else(|| panic!("no HTTPS answer\n{}", log()));
    assert_eq!(answer, (200, "coordinator /coordinator/api/v1/ping".into()));
    assert!(
        status(gw_addr, Some(KEY2)).is_none_or(|s| s.0 != 200),
        "plain HTTP is gone once TLS is on"
    );

    rt.block_on(envoy.stop());
}
