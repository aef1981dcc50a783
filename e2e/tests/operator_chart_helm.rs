//! The Helm chart as helm sees it: `helm lint --strict` and `helm template` of
//! `charts/nsight-operator` with the default values and with documented overrides succeed, and
//! every rendered manifest is accepted by a real kube-apiserver (created for real with the
//! defaults, server-side dry-run with strict field validation for the overrides), so a schema
//! error or an unknown field fails the test. The rendered CRDs are the generated ones, and the
//! rendered container arguments are accepted by the real `nsight-operator` binary.
//!
//! Needs `cargo xtask setup helm kube` and `cargo build -p nsight-operator`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::PathBuf;

use nsight_e2e::{
    kube::{assert_operator_accepts, chart_dir, helm, yaml_documents, Kube},
    TempDir,
};
use serde_json::{json, Value};

const RELEASE: &str = "nsight";
const NAMESPACE: &str = "nsight-system";

fn chart() -> PathBuf {
    chart_dir()
}

/// `helm lint --strict` then `helm template --include-crds` with `extra` value arguments; the
/// rendered documents as JSON.
/// Each release in its own namespace: the control-plane CRs have the documented fixed names.
fn render(release: &str, namespace: &str, extra: &[&str]) -> Vec<Value> {
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let mut lint = vec!["lint", "--strict", chart];
    lint.extend_from_slice(extra);
    helm(&lint);
    let mut template = vec![
        "template",
        release,
        chart,
        "--namespace",
        namespace,
        "--include-crds",
    ];
    template.extend_from_slice(extra);
    yaml_documents(&helm(&template))
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// Sends every non-CRD document to the API server; `dry_run` keeps it from being stored.
fn submit(kube: &Kube, docs: &[Value], dry_run: bool) {
    let query = if dry_run {
        "?fieldValidation=Strict&dryRun=All"
    } else {
        "?fieldValidation=Strict"
    };
    for doc in docs
        .iter()
        .filter(|d| d["kind"] != "CustomResourceDefinition")
    {
        let path = format!("{}{query}", kube.collection(doc));
        let (status, out) = kube.request("POST", &path, Some(doc));
        assert_eq!(
            status, 201,
            "the API server refused {} {}: {out}",
            doc["kind"], doc["metadata"]["name"]
        );
    }
}

fn containers(deployment: &Value) -> &Vec<Value> {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
}

#[test]
fn the_chart_lints_renders_and_is_accepted_by_the_api_server() {
    let kube = Kube::start();
    for ns in [NAMESPACE, "team-a", "gpu"] {
        kube.create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
    }

    // Default values: created for real, CRDs first.
    let docs = render(RELEASE, NAMESPACE, &[]);
    let crds: Vec<Value> = of_kind(&docs, "CustomResourceDefinition")
        .into_iter()
        .cloned()
        .collect();
    let mut rendered: Vec<String> = crds
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    let mut generated: Vec<String> = nsight_api::crds::all()
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    rendered.sort();
    generated.sort();
    assert_eq!(
        rendered, generated,
        "the chart's CRDs are not the generated set"
    );
    for crd in nsight_api::crds::all() {
        let want = serde_json::to_value(&crd).unwrap();
        let got = crds
            .iter()
            .find(|c| c["metadata"]["name"] == want["metadata"]["name"])
            .unwrap();
        assert_eq!(
            got["spec"], want["spec"],
            "{} differs from `cargo xtask codegen`",
            want["metadata"]["name"]
        );
    }
    kube.install_crds(crds);
    let kinds: Vec<&str> = docs
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .filter(|k| *k != "CustomResourceDefinition")
        .collect();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
        "MutatingWebhookConfiguration",
    ] {
        assert!(kinds.contains(&kind), "no {kind} rendered: {kinds:?}");
    }
    submit(&kube, &docs, false);
    let deployment = kube
        .get(&format!(
            "/apis/apps/v1/namespaces/{NAMESPACE}/deployments/nsight-nsight-operator"
        ))
        .expect("the Deployment was not stored");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "nsight-nsight-operator"
    );
    for container in containers(&deployment) {
        assert_operator_accepts(container);
    }
    // The cluster-wide node setting reaches the manager (the default: perf_event_paranoid 2).
    assert!(
        containers(&deployment)[0]["args"]
            .to_string()
            .contains(r#"--machine-config={\"perfEventParanoid\":2}"#),
        "{}",
        containers(&deployment)[0]["args"]
    );
    // The webhook's Service reaches the webhook container's port by name.
    let mwc = kube
        .get("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/nsight-nsight-operator-injector")
        .expect("the webhook configuration was not stored");
    let service = &mwc["webhooks"][0]["clientConfig"]["service"];
    let svc = kube
        .get(&format!(
            "/api/v1/namespaces/{}/services/{}",
            service["namespace"].as_str().unwrap(),
            service["name"].as_str().unwrap()
        ))
        .expect("the webhook's Service does not exist");
    let target = &svc["spec"]["ports"][0]["targetPort"];
    assert!(
        containers(&deployment)
            .iter()
            .flat_map(|c| c["ports"].as_array().unwrap())
            .any(|p| &p["name"] == target),
        "no container port named {target}"
    );
    assert_eq!(mwc["webhooks"][0]["failurePolicy"], "Ignore");
    // By default the webhook issues its own certificate and sets the caBundle of its own
    // configuration (and no other: resourceNames).
    let webhook_args = containers(&deployment)[1]["args"].to_string();
    assert!(
        webhook_args.contains("--issue-tls-secret=nsight-nsight-operator-webhook-tls")
            && webhook_args.contains("--webhook-configuration=nsight-nsight-operator-injector")
            && !webhook_args.contains("--cert="),
        "{webhook_args}"
    );

    // Overrides from values.yaml's comments: one namespace, no leader election, no webhook.
    let docs = render(
        "nsight-one-namespace",
        "team-a",
        &[
        "--set",
        "manager.watchNamespace=team-a,leaderElection.enabled=false,manager.replicas=2,webhook.enabled=false,machineConfig=null",
    ]);
    assert!(of_kind(&docs, "MutatingWebhookConfiguration").is_empty());
    assert!(of_kind(&docs, "Role").is_empty());
    let deployment = of_kind(&docs, "Deployment")[0];
    assert_eq!(containers(deployment).len(), 1);
    let args = containers(deployment)[0]["args"].to_string();
    assert!(args.contains("--namespace=team-a") && !args.contains("--leader-elect"));
    assert!(args.contains("--machine-config=null"), "{args}");
    assert_operator_accepts(&containers(deployment)[0]);
    submit(&kube, &docs, true);

    // Overrides from a values file: image, pull secrets, scheduling, webhook CA and coordinator.
    let dir = TempDir::new("nsight-chart-values");
    let ca = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        kube.ca_pem.as_bytes(),
    );
    let values = dir.path().join("values.yaml");
    std::fs::write(
        &values,
        format!(
            "image: {{repository: registry.example.com/nsight, tag: \"2.0.1\", pullPolicy: Always}}\n\
             imagePullSecrets: [{{name: regcred}}]\n\
             envoyImage: registry.example.com/envoy:v1.36.2\n\
             pluginsImage: registry.example.com/nsight/filters:2.0.1\n\
             nodeSelector: {{nvidia.com/gpu.present: \"true\"}}\n\
             tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]\n\
             manager: {{metricsPort: 9090, xdsPort: 18001}}\n\
             webhook:\n  caBundle: {ca}\n  tlsSecretName: gpu-webhook-tls\n  coordinatorUrl: https://coordinator.team-a.svc:8443\n  \
             failurePolicy: Fail\n  timeoutSeconds: 3\n  port: 9443\n  tag: gpu\n"
        ),
    )
    .unwrap();
    let docs = render("nsight-gpu", "gpu", &["--values", values.to_str().unwrap()]);
    let mwc = of_kind(&docs, "MutatingWebhookConfiguration")[0];
    assert_eq!(mwc["webhooks"][0]["clientConfig"]["caBundle"], ca.as_str());
    assert_eq!(mwc["webhooks"][0]["failurePolicy"], "Fail");
    let deployment = of_kind(&docs, "Deployment")[0];
    let pod = &deployment["spec"]["template"]["spec"];
    // A certificate of one's own: mounted from its Secret, nothing issued.
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "gpu-webhook-tls");
    let webhook_args = containers(deployment)[1]["args"].to_string();
    assert!(
        webhook_args.contains("--cert=") && !webhook_args.contains("--issue-tls-secret"),
        "{webhook_args}"
    );
    assert_eq!(pod["imagePullSecrets"][0]["name"], "regcred");
    assert_eq!(pod["nodeSelector"]["nvidia.com/gpu.present"], "true");
    assert_eq!(
        containers(deployment)[0]["image"],
        "registry.example.com/nsight/nsight-operator:2.0.1"
    );
    // The gateways' filters come from the image the values name.
    assert!(
        containers(deployment)[0]["args"]
            .to_string()
            .contains("--plugins-image=registry.example.com/nsight/filters:2.0.1"),
        "{}",
        containers(deployment)[0]["args"]
    );
    for container in containers(deployment) {
        assert_operator_accepts(container);
    }
    submit(&kube, &docs, true);
}
