//! The Helm chart's RBAC is enough, and no more: the chart's ServiceAccount, ClusterRole(Binding)
//! and leader Role(Binding) are created on a real kube-apiserver, the manager runs as that
//! ServiceAccount (impersonated) with leader election and reconciles a coordinator to
//! `Reconciled=True`; the same identity cannot patch or delete Secrets (it updates only the
//! certificates it issued, to renew them).
//!
//! `templates/rbac.yaml` and `templates/serviceaccount.yaml` are rendered by `helm template`.
//! Needs `cargo xtask setup kube helm`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::{path::PathBuf, time::Duration};

use nsight_e2e::{kube::Kube, wait_for};
use nsight_operator::{
    leader::Elector,
    manager::{self, Health},
    render::RenderSettings,
};
use serde_json::{json, Value};

const RELEASE_NS: &str = "nsight-operator";
const FULLNAME: &str = "nsight-operator";
const SA_USER: &str = "system:serviceaccount:nsight-operator:nsight-operator";

/// One of the chart's templates rendered by `helm template` (release `nsight-operator` in
/// namespace `nsight-operator`), as JSON documents.
fn chart_docs(file: &str) -> Vec<Value> {
    let chart = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/nsight-operator");
    let out = std::process::Command::new(nsight_e2e::kube::helm_bin())
        .args(["template", FULLNAME])
        .arg(&chart)
        .args(["--namespace", RELEASE_NS, "--show-only"])
        .arg(format!("templates/{file}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split("\n---")
        .map(|doc| serde_norway::from_str::<Value>(doc).unwrap())
        .filter(|doc| !doc.is_null())
        .collect()
}

fn collection(doc: &Value) -> String {
    let ns = doc["metadata"]["namespace"].as_str();
    match (doc["kind"].as_str().unwrap(), ns) {
        ("ServiceAccount", Some(ns)) => format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        ("ClusterRole", None) => "/apis/rbac.authorization.k8s.io/v1/clusterroles".into(),
        ("ClusterRoleBinding", None) => {
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".into()
        }
        ("Role", Some(ns)) => format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
        ("RoleBinding", Some(ns)) => {
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings")
        }
        (kind, ns) => panic!("unexpected {kind} in namespace {ns:?}"),
    }
}

#[test]
fn the_chart_rbac_lets_the_manager_reconcile_and_nothing_more() {
    let kube = Kube::start();
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(|crd| serde_json::to_value(crd).unwrap()),
    );
    for ns in [RELEASE_NS, "team-a"] {
        kube.create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
    }
    let mut kinds = Vec::new();
    for doc in chart_docs("serviceaccount.yaml")
        .into_iter()
        .chain(chart_docs("rbac.yaml"))
    {
        kinds.push(doc["kind"].as_str().unwrap().to_owned());
        kube.create(&collection(&doc), &doc);
    }
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding"
        ]
    );

    // The manager as the chart's ServiceAccount, with leader election.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let kubeconfig = ::kube::config::Kubeconfig::read_from(kube.kubeconfig()).unwrap();
    let client = rt.block_on(async {
        let mut config = ::kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        config.auth_info.impersonate = Some(SA_USER.into());
        ::kube::Client::try_from(config).unwrap()
    });
    let mut elector = Elector::new(
        client.clone(),
        RELEASE_NS,
        "nsight-operator-leader",
        "rbac-test",
    );
    elector.retry = Duration::from_millis(500);
    let health = Health::default();
    let config = manager::Config {
        settings: RenderSettings::default(),
        namespace: None,
    };
    rt.spawn(manager::run(client, config, health.clone(), Some(elector)));

    let crs = "/apis/nvidia.com/v1alpha1/namespaces/team-a";
    kube.create(
        &format!("{crs}/nsightcloudstorageconfigs"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCloudStorageConfig",
                "metadata": {"name": "s3"},
                "spec": {"storage_type": "s3", "secretRef": {"name": "s3-config"}}}),
    );
    for (plural, kind, spec) in [
        ("nsightcoordinators", "NsightCoordinator", json!({})),
        ("nsightgateways", "NsightGateway", json!({})),
        (
            "nsightanalyses",
            "NsightAnalysis",
            json!({"cloudStorageRef": "s3"}),
        ),
        ("nsightclouduis", "NsightCloudUI", json!({})),
    ] {
        kube.create(
            &format!("{crs}/{plural}"),
            &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": kind,
                    "metadata": {"name": plural}, "spec": spec}),
        );
        let reconciled = wait_for(Duration::from_secs(30), || {
            let cr = kube.get(&format!("{crs}/{plural}/{plural}"))?;
            let c = cr["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Reconciled")?
                .clone();
            (c["status"] == "True").then_some(c)
        });
        assert!(
            reconciled.is_some(),
            "{kind} not reconciled as the chart's ServiceAccount: {:?}\nmetrics:\n{}",
            kube.get(&format!("{crs}/{plural}/{plural}")),
            health.metrics.render()
        );
    }
    let lease = kube
        .get(
            "/apis/coordination.k8s.io/v1/namespaces/nsight-operator/leases/nsight-operator-leader",
        )
        .expect("no leader Lease");
    assert_eq!(lease["spec"]["holderIdentity"], "rbac-test");
    assert!(!health
        .metrics
        .render()
        .contains("nsight_operator_reconcile_errors_total{"));
    // Settled: no reconcile loop (status and apply writes that change nothing trigger nothing).
    std::thread::sleep(Duration::from_secs(2));
    let settled = health.metrics.total_reconciles();
    std::thread::sleep(Duration::from_secs(3));
    let more = health.metrics.total_reconciles() - settled;
    assert!(more <= 2, "{more} reconciles in 3 s with nothing changing");

    // Least privilege: Secrets read (an external bucket's config, gateway TLS/API-key Secrets,
    // watched for rotation), created (generated credentials) and updated (the certificates the
    // operator issued, renewed in place), never patched or deleted; no Pods.
    let review = |verb: &str, group_resource: &str| {
        let (resource, group) = group_resource
            .split_once('.')
            .unwrap_or((group_resource, ""));
        let (status, out) = kube.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            Some(&json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": SA_USER, "groups": ["system:serviceaccounts", "system:authenticated"],
                         "resourceAttributes": {"namespace": "team-a", "verb": verb,
                                                "group": group, "resource": resource}}})),
        );
        assert_eq!(status, 201, "{out}");
        out["status"]["allowed"] == true
    };
    assert!(review("patch", "services"));
    assert!(review("create", "events.events.k8s.io"));
    for verb in ["get", "list", "watch", "create", "update"] {
        assert!(review(verb, "secrets"), "{verb} secrets");
    }
    for verb in ["patch", "delete"] {
        assert!(!review(verb, "secrets"), "{verb} secrets");
    }
    assert!(!review("create", "pods"));
    assert!(!review("delete", "nsightcoordinators.nvidia.com"));
    assert!(!review("patch", "nsightcoordinators.nvidia.com"));
}
