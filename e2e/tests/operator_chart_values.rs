//! The chart's documented setups, one values file each in `charts/nsight-operator/ci/`: each
//! lints (`--strict`, with the generated values schema), renders exactly its golden output
//! (`e2e/golden/chart/<case>.yaml`; `NSIGHT_UPDATE_GOLDEN=1` rewrites them, review the diff),
//! says what the setup means (Secrets for inline credentials, the CRs' references, the
//! webhook's flags, accepted by the real `nsight-operator` binary), and every rendered object
//! is accepted by a real kube-apiserver's server-side dry run with strict field validation
//! (the CRDs installed, so the CRs' schemas and CEL rules apply). A typo or a wrong type in
//! the values is refused by helm with its path.
//!
//! Needs `cargo xtask setup helm kube` and `cargo build -p nsight-operator`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::{path::PathBuf, process::Command};

use nsight_e2e::kube::{assert_operator_accepts, chart_dir, helm, helm_bin, yaml_documents, Kube};
use serde_json::{json, Value};

const RELEASE: &str = "nsight";
const NAMESPACE: &str = "nsight-system";
const CASES: [&str; 11] = [
    "defaults",
    "tls-apikey",
    "oauth2-inline",
    "oauth2-secret",
    "jwt-secret",
    "external-s3",
    "persistence",
    "otlp-mirroring",
    "nsys",
    "multi-tenant",
    "disabled",
];
/// The control-plane kinds the single-tenant defaults render.
const CONTROL_PLANE: [&str; 5] = [
    "NsightCloudStorageConfig",
    "NsightCoordinator",
    "NsightAnalysis",
    "NsightGateway",
    "NsightCloudUI",
];

fn values_file(case: &str) -> PathBuf {
    chart_dir().join("ci").join(format!("{case}-values.yaml"))
}

fn golden(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("golden/chart")
        .join(format!("{case}.yaml"))
}

/// lint + template of one case; the text (checked against its golden file) and documents.
fn render(case: &str) -> Vec<Value> {
    let chart = chart_dir();
    let (chart, values) = (chart.to_str().unwrap(), values_file(case));
    let values = values.to_str().unwrap();
    helm(&["lint", "--strict", chart, "-f", values]);
    let text = helm(&[
        "template",
        RELEASE,
        chart,
        "--namespace",
        NAMESPACE,
        "-f",
        values,
    ]);
    let path = golden(case);
    if std::env::var_os("NSIGHT_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        text == want,
        "helm template of ci/{case}-values.yaml differs from {}; review and rerun with \
         NSIGHT_UPDATE_GOLDEN=1\n--- rendered:\n{text}",
        path.display()
    );
    yaml_documents(&text)
}

fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "expected one {kind}");
    found[0]
}

fn kinds(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .map(|d| d["kind"].as_str().unwrap().to_owned())
        .collect()
}

fn secret_value(secret: &Value, key: &str) -> String {
    use base64::Engine as _;
    let b64 = secret["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("{key}"));
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

/// The webhook container's arguments.
fn webhook_args(docs: &[Value]) -> Vec<String> {
    let deployment = one(docs, "Deployment");
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    let webhook = containers.iter().find(|c| c["name"] == "webhook").unwrap();
    // The real binary parses them (the default tool config's JSON included).
    assert_operator_accepts(webhook);
    webhook["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

fn has_arg(args: &[String], want: &str) -> bool {
    args.iter().any(|a| a == want)
}

/// What each setup must mean, beyond its golden text.
fn check(case: &str, docs: &[Value]) {
    let kinds = kinds(docs);
    let single_tenant = !matches!(case, "multi-tenant" | "disabled");
    for kind in CONTROL_PLANE {
        assert_eq!(
            kinds.iter().any(|k| k == kind),
            single_tenant,
            "{case}: {kind} in {kinds:?}"
        );
    }
    match case {
        "defaults" => {
            let args = webhook_args(docs);
            assert!(has_arg(
                &args,
                "--coordinator-url=https://nsight-operator-coordinator.nsight-system.svc:8081"
            ));
            assert!(!has_arg(&args, "--auto-provision"));
            let coordinator = one(docs, "NsightCoordinator");
            assert_eq!(
                coordinator["spec"]["cloudStorageRef"],
                "nsight-operator-storage"
            );
            assert_eq!(
                coordinator["spec"]["storagePublicUrl"],
                "http://localhost:9000"
            );
            let gateway = one(docs, "NsightGateway");
            assert_eq!(gateway["spec"]["service"]["type"], "ClusterIP");
            assert!(
                gateway["spec"]["authentication"].is_null(),
                "open by default"
            );
            assert!(!kinds.contains(&"Secret".to_owned()));
        }
        "tls-apikey" => {
            let secret = one(docs, "Secret");
            assert_eq!(secret["metadata"]["name"], "nsight-gateway-apikey");
            assert_eq!(secret_value(secret, "key"), "secret-api-key");
            let spec = &one(docs, "NsightGateway")["spec"];
            assert_eq!(spec["tlsSecretRef"]["name"], "gateway-tls");
            assert_eq!(spec["service"]["type"], "LoadBalancer");
            assert_eq!(
                spec["authentication"]["apikey"],
                json!({"enabled": true, "keySecretRef": {"name": "nsight-gateway-apikey", "key": "key"}}),
                "the key is referenced, never inline in the CR"
            );
            assert_eq!(
                one(docs, "NsightCoordinator")["spec"]["storagePublicUrl"],
                "https://profiling.example.com:9000"
            );
        }
        "oauth2-inline" => {
            let secret = one(docs, "Secret");
            assert_eq!(secret["metadata"]["name"], "nsight-gateway-oauth2");
            assert_eq!(
                secret_value(secret, "client_secret.key"),
                "client-secret-value"
            );
            assert_eq!(
                secret_value(secret, "hmac.key"),
                "aG1hYy1rZXktdmFsdWUtZm9yLWNvb2tpZXM="
            );
            let oauth2 = &one(docs, "NsightGateway")["spec"]["authentication"]["oauth2"];
            assert_eq!(oauth2["clientSecretRef"]["name"], "nsight-gateway-oauth2");
            assert_eq!(oauth2["scopes"], json!(["openid", "profile", "email"]));
            assert!(!oauth2.to_string().contains("client-secret-value"));
        }
        "oauth2-secret" => {
            assert!(
                !kinds.contains(&"Secret".to_owned()),
                "the admin's Secrets only"
            );
            let auth = &one(docs, "NsightGateway")["spec"]["authentication"];
            assert_eq!(auth["oauth2"]["clientSecretRef"]["name"], "my-oauth2");
            assert_eq!(auth["apikey"]["keySecretRef"]["name"], "ci-apikey");
        }
        "jwt-secret" => {
            let spec = &one(docs, "NsightGateway")["spec"];
            assert_eq!(
                spec["authentication"]["jwt"]["jwksSecretRef"]["name"],
                "my-jwks-secret"
            );
            assert_eq!(spec["routing"]["coordinatorPrefix"], "/nsight/coordinator/");
        }
        "external-s3" => {
            let spec = &one(docs, "NsightCloudStorageConfig")["spec"];
            assert_eq!(spec["storage_type"], "s3");
            assert_eq!(spec["secretRef"]["name"], "my-s3-credentials");
            assert!(spec["minio"].is_null());
        }
        "persistence" => {
            let minio = &one(docs, "NsightCloudStorageConfig")["spec"]["minio"];
            assert_eq!(
                minio["persistence"],
                json!({"enabled": true, "storageClassName": "fast-ssd", "size": "20Gi"})
            );
            let coordinator = &one(docs, "NsightCoordinator")["spec"];
            assert_eq!(coordinator["resources"]["requests"]["cpu"], "200m");
            assert_eq!(coordinator["tolerations"][0]["effect"], "NoSchedule");
            let args = webhook_args(docs);
            let tool = args
                .iter()
                .find_map(|a| a.strip_prefix("--default-tool-config="))
                .unwrap();
            let tool: Value = serde_json::from_str(tool).unwrap();
            assert_eq!(tool["duration"], 30);
            assert_eq!(tool["coordinator"], false);
        }
        "multi-tenant" => {
            let args = webhook_args(docs);
            assert!(has_arg(&args, "--auto-provision"));
            assert!(has_arg(
                &args,
                "--coordinator-url=https://nsight-operator-coordinator.{namespace}.svc:8081"
            ));
            let mwc = one(docs, "MutatingWebhookConfiguration");
            assert_eq!(
                mwc["webhooks"][0]["namespaceSelector"]["matchLabels"]["nsight-profiling"],
                "allowed"
            );
            // The cluster role may create the provisioned kinds.
            let role = docs
                .iter()
                .find(|d| d["kind"] == "ClusterRole")
                .unwrap()
                .to_string();
            assert!(role.contains("\"create\""), "{role}");
        }
        "otlp-mirroring" => {
            let collector = one(docs, "NsightOtelCollector");
            assert_eq!(
                collector["spec"]["converter"]["enabled"], true,
                "{collector}"
            );
            assert_eq!(
                collector["spec"]["cloudStorageRef"], "nsight-operator-storage",
                "{collector}"
            );
            let proxy = one(docs, "OTLPProxyConfig");
            assert_eq!(
                proxy["spec"]["collectorRef"], "nsight-operator-otel-collector",
                "{proxy}"
            );
        }
        "nsys" => {
            // The real webhook binary accepts both (the JSON of each is checked).
            let args = webhook_args(docs);
            assert!(
                has_arg(
                    &args,
                    r#"--nsys={"hostPath":"/opt/nvidia/nsight-systems/2025.3.1","image":"","imageDir":"/opt/nvidia/nsight-systems"}"#
                ),
                "{args:?}"
            );
            let tool = args
                .iter()
                .find(|a| a.starts_with("--default-tool-config="))
                .unwrap();
            assert!(tool.contains(r#""backend":"nsys""#), "{tool}");
        }
        "disabled" => {
            for kind in ["MutatingWebhookConfiguration", "Role", "Secret"] {
                assert!(!kinds.iter().any(|k| k == kind), "{kind} rendered");
            }
        }
        other => panic!("no checks for {other}"),
    }
}

#[test]
fn each_documented_setup_renders_its_golden_output_and_the_api_server_accepts_it() {
    let kube = Kube::start();
    kube.create(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
    );
    kube.install_crds(
        nsight_api::crds::all()
            .into_iter()
            .map(|c| serde_json::to_value(c).unwrap()),
    );
    for case in CASES {
        let docs = render(case);
        check(case, &docs);
        for doc in &docs {
            let path = format!("{}?fieldValidation=Strict&dryRun=All", kube.collection(doc));
            let (status, out) = kube.request("POST", &path, Some(doc));
            assert_eq!(
                status, 201,
                "{case}: the API server refused {} {}: {out}",
                doc["kind"], doc["metadata"]["name"]
            );
        }
    }
}

#[test]
fn a_typo_or_a_wrong_type_in_the_values_is_refused_with_its_path() {
    let chart = chart_dir();
    for (set, path, what) in [
        ("nsight-gateway.prot=8888", "/nsight-gateway", "'prot'"),
        (
            "nsight-gateway.authentication.apikey.enabeld=true",
            "/nsight-gateway/authentication/apikey",
            "'enabeld'",
        ),
        (
            "nsight-gateway.port=http",
            "/nsight-gateway/port",
            "integer",
        ),
        (
            "nsight-gateway.service.type=Ingress",
            "/nsight-gateway/service/type",
            "LoadBalancer",
        ),
        (
            "cloudStorage.minio.persistence.size=lots",
            "/cloudStorage/minio/persistence/size",
            "lots",
        ),
        (
            "machineConfig.perfEventParanoid=7",
            "/machineConfig/perfEventParanoid",
            "7",
        ),
    ] {
        let out = Command::new(helm_bin())
            .args(["template", RELEASE, chart.to_str().unwrap(), "--set", set])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--set {set} was accepted");
        assert!(
            err.contains(path) && err.contains(what),
            "--set {set}: the error does not name {path} and {what}:\n{err}"
        );
    }
}
