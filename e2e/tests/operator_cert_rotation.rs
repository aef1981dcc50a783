//! The agent channel's certificates renewed by the manager against a real kube-apiserver + etcd
//! (no kubelet): a Secret `<name>-agent-tls` written by an operator before rotation (no
//! `ca.key`) is migrated on the first reconcile: a new CA, `ca.crt` the bundle of the new and
//! the old CA, new leaves; the coordinator's Pod template carries the fingerprint of what it
//! serves, so the renewal rolls it. Needs `cargo xtask setup kube`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::time::Duration;

use base64::Engine as _;
use nsight_e2e::wait_for;
use nsight_operator::{
    certs::{self, rotation::Files},
    manager,
    render::{coordinator::TLS_ANNOTATION, RenderSettings},
};
use serde_json::{json, Value};

#[path = "support/kube_client.rs"]
mod kube_client;
use kube_client::{client, cluster_with_crds};

const NS: &str = "rotation";
const WAIT: Duration = Duration::from_secs(30);

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The Secret's data as PEM text.
fn files(secret: &Value) -> Files {
    secret["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap();
            (k.clone(), String::from_utf8(bytes).unwrap())
        })
        .collect()
}

#[test]
fn a_secret_without_ca_key_is_migrated_and_the_coordinator_rolls() {
    let (kube, rt) = cluster_with_crds();
    kube.create(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    );
    // What an operator before rotation issued: no ca.key.
    let wanted = certs::agent_channel_wanted(
        &format!("{NS}/coord"),
        certs::service_names("coord", NS, "cluster.local"),
    );
    let mut old = certs::issue(&wanted, certs::now()).unwrap();
    old.remove(certs::CA_PRIVATE_KEY);
    let data: serde_json::Map<String, Value> = old
        .iter()
        .map(|(k, v)| (k.clone(), json!(b64(v))))
        .collect();
    let secret_path = format!("/api/v1/namespaces/{NS}/secrets/coord-agent-tls");
    kube.create(
        &format!("/api/v1/namespaces/{NS}/secrets"),
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": "coord-agent-tls", "labels": {"team": "gpu"}},
                "data": data}),
    );

    let config = manager::Config {
        settings: RenderSettings::default(),
        namespace: None,
    };
    rt.spawn(manager::run(
        client(&rt, &kube),
        config,
        manager::Health::default(),
        None,
    ));
    kube.create(
        &format!("/apis/nvidia.com/v1alpha1/namespaces/{NS}/nsightcoordinators"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCoordinator",
                "metadata": {"name": "coord"}, "spec": {}}),
    );

    let migrated = wait_for(WAIT, || {
        let secret = kube.get(&secret_path)?;
        secret["data"][certs::CA_PRIVATE_KEY]
            .is_string()
            .then(|| files(&secret))
    })
    .unwrap_or_else(|| panic!("not migrated: {:?}", kube.get(&secret_path)));
    let secret = kube.get(&secret_path).unwrap();
    // Others' labels are kept; the operator's are added.
    assert_eq!(secret["metadata"]["labels"]["team"], "gpu", "{secret}");
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "nsight-operator"
    );
    // The bundle: the new CA, then the old one.
    let bundle = &migrated[certs::CA_KEY];
    assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), 2, "{bundle}");
    assert!(
        bundle.ends_with(old[certs::CA_KEY].as_str()) || {
            // The old CA re-encoded: same base64 body.
            let body =
                |pem: &str| -> String { pem.lines().filter(|l| !l.starts_with("-----")).collect() };
            body(bundle).ends_with(&body(&old[certs::CA_KEY]))
        }
    );
    assert_ne!(
        migrated[certs::SERVER_CERT_KEY],
        old[certs::SERVER_CERT_KEY]
    );
    assert!(certs::rotation::plan(&migrated, &wanted, certs::now()).is_empty());

    // The Deployment carries the fingerprint of what is now in the Secret.
    let want = certs::fingerprint(&migrated);
    let deployment = format!("/apis/apps/v1/namespaces/{NS}/deployments/coord");
    let rolled = wait_for(WAIT, || {
        let d = kube.get(&deployment)?;
        (d["spec"]["template"]["metadata"]["annotations"][TLS_ANNOTATION] == want.as_str())
            .then_some(d)
    });
    assert!(
        rolled.is_some(),
        "annotation {want} missing: {:?}",
        kube.get(&deployment)
    );
    assert_ne!(want, certs::fingerprint(&old));
}
