//! The manager's controllers against a real kube-apiserver + etcd (no kubelet: Pods never run,
//! so the assertions are on API objects): a CR gets its Deployment, Service, ServiceAccount
//! (and ConfigMap) with owner references; an update rolls into them; a deleted or edited
//! Deployment is repaired; a stray owned object is pruned; the status carries `Reconciled` and
//! `Ready` with `observedGeneration`; an object the server rejects gives `Reconciled=False`;
//! `/metrics`, `/healthz`, `/readyz` answer. Needs `cargo xtask setup kube`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::time::Duration;

use nsight_e2e::{kube::Kube, wait_for};
use nsight_operator::{
    manager::{self, Health},
    render::RenderSettings,
};
use serde_json::{json, Value};

#[path = "support/kube_client.rs"]
mod kube_client;
use kube_client::client;

const NS: &str = "research";
const WAIT: Duration = Duration::from_secs(30);

fn crs(plural: &str) -> String {
    format!("/apis/nvidia.com/v1alpha1/namespaces/{NS}/{plural}")
}

fn core(plural: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{NS}/{plural}/{name}")
}

fn deployment(name: &str) -> String {
    format!("/apis/apps/v1/namespaces/{NS}/deployments/{name}")
}

fn settings() -> RenderSettings {
    RenderSettings {
        image_repository: "registry.local/nsight".into(),
        image_tag: "e2e".into(),
        ..RenderSettings::default()
    }
}

/// Starts the CRDs' server, the namespace, and a manager (no leader election) with its
/// health endpoints; returns the health base URL.
fn start(kube: &Kube, rt: &tokio::runtime::Runtime) -> (String, Health) {
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(|crd| serde_json::to_value(crd).unwrap()),
    );
    kube.create(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    );
    let health = Health::default();
    let listener = rt
        .block_on(manager::bind(([127, 0, 0, 1], 0).into()))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(manager::serve_health(listener, health.clone()));
    let config = manager::Config {
        settings: settings(),
        namespace: None,
    };
    rt.spawn(manager::run(client(rt, kube), config, health.clone(), None));
    (url, health)
}

fn condition<'a>(cr: &'a Value, type_: &str) -> Option<&'a Value> {
    cr["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Waits until the CR's status was computed from `generation`; returns the CR.
fn wait_status(kube: &Kube, path: &str, generation: i64) -> Value {
    wait_for(WAIT, || {
        let cr = kube.get(path)?;
        (cr["status"]["observedGeneration"] == generation
            && condition(&cr, "Reconciled")?["observedGeneration"] == generation)
            .then_some(cr)
    })
    .unwrap_or_else(|| {
        panic!(
            "{path}: no status for generation {generation}: {:?}",
            kube.get(path)
        )
    })
}

fn container(d: &Value) -> &Value {
    &d["spec"]["template"]["spec"]["containers"][0]
}

fn args(d: &Value) -> Vec<String> {
    container(d)["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn controllers_reconcile_update_repair_prune_and_report() {
    let kube = Kube::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (health_url, health) = start(&kube, &rt);
    let http = reqwest::blocking::Client::new();

    // Create -> Deployment, Service, ServiceAccount with owner references.
    let created = kube.create(
        &crs("nsightcoordinators"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCoordinator",
                "metadata": {"name": "coord"},
                "spec": {"service": {"type": "NodePort"}}}),
    );
    let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
    let first = wait_for(WAIT, || kube.get(&deployment("coord"))).expect("no Deployment");
    for path in [
        deployment("coord"),
        core("services", "coord"),
        core("serviceaccounts", "coord"),
    ] {
        let obj = wait_for(WAIT, || kube.get(&path)).unwrap_or_else(|| panic!("{path} missing"));
        let owner = &obj["metadata"]["ownerReferences"][0];
        assert_eq!(owner["uid"], uid.as_str(), "{path}: {obj}");
        assert_eq!(owner["kind"], "NsightCoordinator");
        assert_eq!(owner["controller"], true);
        assert_eq!(
            obj["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "nsight-operator"
        );
    }
    assert_eq!(
        container(&first)["image"],
        "registry.local/nsight/nsight-coordinator:e2e"
    );
    assert!(args(&first).contains(&"--tls-dir".to_string()));
    let service = kube.get(&core("services", "coord")).unwrap();
    assert_eq!(service["spec"]["type"], "NodePort");
    // Every field the operator sets is owned by its one field manager.
    let managers: Vec<&Value> = first["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["manager"])
        .collect();
    assert_eq!(managers, [&json!("nsight-operator")], "{managers:?}");

    // Status: Reconciled, and Ready=False (no kubelet runs the Pod).
    let cr = wait_status(&kube, &crs("nsightcoordinators/coord"), 1);
    assert_eq!(condition(&cr, "Reconciled").unwrap()["status"], "True");
    let ready = condition(&cr, "Ready").unwrap();
    assert_eq!(ready["status"], "False", "{cr}");
    assert_eq!(ready["reason"], "DeploymentUnavailable");
    assert_eq!(ready["observedGeneration"], 1);

    // Update the CR -> the Deployment follows; the status moves to generation 2.
    kube.merge_patch(
        &crs("nsightcoordinators/coord"),
        &json!({"spec": {"curveEncryption": {"enabled": false}, "image": "registry.local/coord:v2"}}),
    );
    let updated = wait_for(WAIT, || {
        let d = kube.get(&deployment("coord"))?;
        (container(&d)["image"] == "registry.local/coord:v2").then_some(d)
    })
    .expect("the Deployment did not follow the update");
    assert!(args(&updated).contains(&"--insecure-agent-channel".to_string()));
    assert!(!args(&updated).contains(&"--tls-dir".to_string()));
    let volumes = updated["spec"]["template"]["spec"]["volumes"].to_string();
    assert!(!volumes.contains("agent-tls"), "{volumes}");
    wait_status(&kube, &crs("nsightcoordinators/coord"), 2);

    // Drift: a deleted Deployment is recreated, an edited field is restored.
    let old_uid = updated["metadata"]["uid"].clone();
    let (status, _) = kube.request("DELETE", &deployment("coord"), None);
    assert_eq!(status, 200);
    let recreated = wait_for(WAIT, || {
        let d = kube.get(&deployment("coord"))?;
        (d["metadata"]["uid"] != old_uid).then_some(d)
    })
    .expect("the deleted Deployment was not recreated");
    assert_eq!(container(&recreated)["image"], "registry.local/coord:v2");
    kube.merge_patch(&deployment("coord"), &json!({"spec": {"replicas": 5}}));
    wait_for(WAIT, || {
        (kube.get(&deployment("coord"))?["spec"]["replicas"] == 1).then_some(())
    })
    .expect("an edited replica count was not restored");

    // A stray object labelled as the CR's own is pruned.
    let stray_labels = json!({"app.kubernetes.io/managed-by": "nsight-operator",
        "nvidia.com/nsight-owner-kind": "NsightCoordinator", "app.kubernetes.io/instance": "coord"});
    kube.create(
        &format!("/api/v1/namespaces/{NS}/configmaps"),
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "coord-stale", "labels": stray_labels,
                    "ownerReferences": [{"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCoordinator",
                        "name": "coord", "uid": uid, "controller": true}]},
                "data": {"k": "v"}}),
    );
    wait_for(WAIT, || {
        kube.get(&core("configmaps", "coord-stale"))
            .is_none()
            .then_some(())
    })
    .expect("the stray ConfigMap was not pruned");

    // The other kinds: a gateway (with its bootstrap ConfigMap), analysis with S3 storage, UI.
    kube.create(
        &crs("nsightgateways"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
                "metadata": {"name": "nsight-operator-gateway"}, "spec": {}}),
    );
    kube.create(
        &crs("nsightcloudstorageconfigs"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCloudStorageConfig",
                "metadata": {"name": "s3"},
                "spec": {"storage_type": "s3", "secretRef": {"name": "s3-config"}}}),
    );
    kube.create(
        &crs("nsightanalyses"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightAnalysis",
                "metadata": {"name": "analysis"}, "spec": {"cloudStorageRef": "s3"}}),
    );
    kube.create(
        &crs("nsightclouduis"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCloudUI",
                "metadata": {"name": "ui"}, "spec": {}}),
    );
    let bootstrap = wait_for(WAIT, || {
        kube.get(&core("configmaps", "nsight-operator-gateway-envoy"))
    })
    .expect("no Envoy bootstrap ConfigMap");
    assert!(bootstrap["data"]["envoy.json"]
        .as_str()
        .unwrap()
        .contains("nsight-gateway/research/nsight-operator-gateway"));
    let gw = wait_for(WAIT, || {
        kube.get(&core("services", "nsight-operator-gateway"))
    })
    .unwrap();
    let ports: Vec<&Value> = gw["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["port"])
        .collect();
    assert_eq!(ports, [&json!(8888), &json!(9000)]);
    let analysis = wait_for(WAIT, || kube.get(&deployment("analysis"))).unwrap();
    assert!(
        args(&analysis).contains(&"--storage-config".to_string()),
        "{analysis}"
    );
    wait_for(WAIT, || kube.get(&deployment("ui"))).expect("no UI Deployment");
    // A storage config created after the analysis that names it is picked up (watched).
    kube.create(
        &crs("nsightanalyses"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightAnalysis",
                "metadata": {"name": "late"}, "spec": {"cloudStorageRef": "later"}}),
    );
    let local = wait_for(WAIT, || kube.get(&deployment("late"))).unwrap();
    assert!(
        args(&local).contains(&"--storage-dir".to_string()),
        "{local}"
    );
    kube.create(
        &crs("nsightcloudstorageconfigs"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCloudStorageConfig",
                "metadata": {"name": "later"},
                "spec": {"storage_type": "s3", "secretRef": {"name": "later-config"}}}),
    );
    wait_for(WAIT, || {
        let d = kube.get(&deployment("late"))?;
        args(&d)
            .contains(&"--storage-config".to_string())
            .then_some(())
    })
    .expect("the analysis did not pick up its new storage config");
    for path in [
        crs("nsightgateways/nsight-operator-gateway"),
        crs("nsightanalyses/analysis"),
        crs("nsightclouduis/ui"),
    ] {
        wait_status(&kube, &path, 1);
    }

    // Same name as the coordinator, another kind: its objects would be the coordinator's. It
    // reports the conflict and takes nothing over.
    kube.create(
        &crs("nsightclouduis"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCloudUI",
                "metadata": {"name": "coord"}, "spec": {}}),
    );
    let clash = wait_status(&kube, &crs("nsightclouduis/coord"), 1);
    let reconciled = condition(&clash, "Reconciled").unwrap();
    assert_eq!(reconciled["reason"], "NameConflict", "{clash}");
    assert!(
        reconciled["message"]
            .as_str()
            .unwrap()
            .contains("controlled by NsightCoordinator coord"),
        "{reconciled}"
    );
    let event = wait_for(WAIT, || {
        let events = kube.get(&format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"))?;
        events["items"]
            .as_array()?
            .iter()
            .find(|e| {
                e["regarding"]["kind"] == "NsightCloudUI"
                    && e["regarding"]["name"] == "coord"
                    && e["reason"] == "NameConflict"
            })
            .cloned()
    })
    .expect("no NameConflict Event");
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reportingController"], "nsight-operator");
    let service = kube.get(&core("services", "coord")).unwrap();
    assert_eq!(
        service["metadata"]["ownerReferences"][0]["uid"],
        uid.as_str()
    );
    assert_eq!(service["spec"]["ports"].as_array().unwrap().len(), 2);

    // The server rejects an object: Reconciled=False with its message, counted as an error.
    kube.create(
        &crs("nsightcoordinators"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCoordinator",
                "metadata": {"name": "bad"}, "spec": {"service": {"type": "Bogus"}}}),
    );
    let bad = wait_status(&kube, &crs("nsightcoordinators/bad"), 1);
    let reconciled = condition(&bad, "Reconciled").unwrap();
    assert_eq!(reconciled["status"], "False", "{bad}");
    assert_eq!(reconciled["reason"], "ApplyFailed");
    assert!(
        reconciled["message"]
            .as_str()
            .unwrap()
            .contains("Service bad"),
        "{reconciled}"
    );

    // Health and metrics.
    let get = |path: &str| {
        let resp = http.get(format!("{health_url}{path}")).send().unwrap();
        (resp.status().as_u16(), resp.text().unwrap())
    };
    assert_eq!(get("/healthz").0, 200);
    assert_eq!(get("/readyz").0, 200);
    let (status, metrics) = get("/metrics");
    assert_eq!(status, 200);
    for want in [
        "nsight_operator_reconciles_total{kind=\"NsightCoordinator\",result=\"success\"}",
        "nsight_operator_reconcile_errors_total{kind=\"NsightCoordinator\",step=\"apply\"}",
        "nsight_operator_reconcile_duration_seconds_count{kind=\"NsightGateway\"}",
        "nsight_operator_leader 1",
    ] {
        assert!(metrics.contains(want), "{want} missing from\n{metrics}");
    }
    wait_for(WAIT, || {
        (health.metrics.reconciles("NsightAnalysis") >= 1).then_some(())
    })
    .expect("analysis reconciles are not counted");
}
