//! The storage, collector, OTLP proxy, streamer and tenant operator controllers, and the
//! manager's cluster-wide perf_event_paranoid setting (`machineConfig`: one DaemonSet in the
//! operator's namespace, none when `null`), against a real kube-apiserver + etcd (no kubelet,
//! no controller-manager: the
//! assertions are on API objects): create -> objects with owner references; update -> objects
//! follow; drift repaired; objects no longer desired pruned; status conditions with
//! `observedGeneration`; the generated credentials Secret never overwritten; an external
//! bucket's Secret checked into `Ready`; the tenant operator's Role checked with
//! SubjectAccessReviews; a profile config's nsightToolArgs checked into `Ready` (and a Warning
//! Event when nsys would refuse them). Needs `cargo xtask setup kube` (and Envoy from `cargo xtask setup`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::time::Duration;

use base64::Engine;
use nsight_e2e::{kube::Kube, wait_for};
use nsight_operator::{
    manager::{self, Health, MachineSetting},
    render::{perf_event, RenderSettings},
    settings::MachineConfig,
};
use serde_json::{json, Value};

#[path = "support/kube_client.rs"]
mod kube_client;
use kube_client::client;

const NS: &str = "research";
const WAIT: Duration = Duration::from_secs(40);

fn crs(plural: &str) -> String {
    format!("/apis/nvidia.com/v1alpha1/namespaces/{NS}/{plural}")
}

fn profiles(ns: &str) -> String {
    format!("/apis/nvidia.com/v1/namespaces/{ns}/nsightoperatorprofileconfigs")
}

fn core(plural: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{NS}/{plural}/{name}")
}

fn apps(plural: &str, name: &str) -> String {
    format!("/apis/apps/v1/namespaces/{NS}/{plural}/{name}")
}

fn rbac(plural: &str, name: &str) -> String {
    format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/{plural}/{name}")
}

fn start(kube: &Kube, rt: &tokio::runtime::Runtime) -> Health {
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(|crd| serde_json::to_value(crd).unwrap()),
    );
    for ns in [NS, "elsewhere"] {
        kube.create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
    }
    let health = Health::default();
    rt.spawn(manager::run(
        client(rt, kube),
        config(),
        health.clone(),
        None,
    ));
    health
}

fn config() -> manager::Config {
    manager::Config {
        settings: RenderSettings {
            image_repository: "registry.local/nsight".into(),
            image_tag: "e2e".into(),
            ..RenderSettings::default()
        },
        namespace: None,
    }
}

fn condition<'a>(cr: &'a Value, type_: &str) -> Option<&'a Value> {
    cr["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Waits until the CR's `Ready` condition has `reason` at `generation` (and `Reconciled=True`).
fn wait_ready(kube: &Kube, path: &str, generation: i64, reason: &str) -> Value {
    wait_for(WAIT, || {
        let cr = kube.get(path)?;
        let ready = condition(&cr, "Ready")?;
        (cr["status"]["observedGeneration"] == generation
            && condition(&cr, "Reconciled")?["status"] == "True"
            && ready["observedGeneration"] == generation
            && ready["reason"] == reason)
            .then_some(cr)
    })
    .unwrap_or_else(|| {
        panic!(
            "{path}: no Ready {reason} at generation {generation}: {:?}",
            kube.get(path)
        )
    })
}

fn assert_owned(obj: &Value, kind: &str, uid: &str) {
    let owner = &obj["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"], uid, "{obj}");
    assert_eq!(owner["kind"], kind, "{obj}");
    assert_eq!(owner["controller"], true, "{obj}");
    assert_eq!(
        obj["metadata"]["labels"]["app.kubernetes.io/managed-by"], "nsight-operator",
        "{obj}"
    );
}

fn wait_get(kube: &Kube, path: &str) -> Value {
    wait_for(WAIT, || kube.get(path)).unwrap_or_else(|| panic!("{path} missing"))
}

fn wait_gone(kube: &Kube, path: &str, why: &str) {
    wait_for(WAIT, || kube.get(path).is_none().then_some(()))
        .unwrap_or_else(|| panic!("{path} still exists: {why}"));
}

fn secret_value(secret: &Value, key: &str) -> String {
    let b64 = secret["data"][key].as_str().unwrap();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

fn pod_spec(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

#[test]
fn managed_storage_statefulset_secret_persistence_and_drift() {
    let kube = Kube::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let health = start(&kube, &rt);

    let created = kube.create(
        &crs("nsightcloudstorageconfigs"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCloudStorageConfig",
                "metadata": {"name": "reports"},
                "spec": {"minio": {"persistence": {"enabled": true, "size": "1Gi"}}}}),
    );
    let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
    let set = wait_get(&kube, &apps("statefulsets", "reports"));
    for obj in [
        set.clone(),
        wait_get(&kube, &core("services", "reports")),
        wait_get(&kube, &core("serviceaccounts", "reports")),
        wait_get(&kube, &core("secrets", "reports-credentials")),
    ] {
        assert_owned(&obj, "NsightCloudStorageConfig", &uid);
    }
    assert_eq!(
        set["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
        "1Gi"
    );
    let secret = kube.get(&core("secrets", "reports-credentials")).unwrap();
    let password = secret_value(&secret, "rootPassword");
    assert!(password.len() >= 32, "a strong generated password");
    let config = secret_value(&secret, "storage-config.yaml");
    assert!(
        config.contains("endpoint_url: http://reports.research.svc:9000"),
        "{config}"
    );
    // The generated config is one the agent's parser accepts.
    nsight_storage::config::StorageConfig::from_yaml(&config, "generated").unwrap();
    let cr = wait_ready(
        &kube,
        &crs("nsightcloudstorageconfigs/reports"),
        1,
        "StatefulSetUnavailable",
    );
    assert_eq!(condition(&cr, "Ready").unwrap()["status"], "False");

    // Update: a new image, and persistence off (an immutable field: the StatefulSet is
    // recreated without its claim template). The credentials stay the same.
    kube.merge_patch(
        &crs("nsightcloudstorageconfigs/reports"),
        &json!({"spec": {"minio": {"image": "registry.local/minio:v2", "persistence": {"enabled": false}}}}),
    );
    let updated = wait_for(WAIT, || {
        let s = kube.get(&apps("statefulsets", "reports"))?;
        (pod_spec(&s)["containers"][0]["image"] == "registry.local/minio:v2").then_some(s)
    })
    .expect("the StatefulSet did not follow the update");
    assert!(
        updated["spec"]["volumeClaimTemplates"].is_null(),
        "{updated}"
    );
    wait_ready(
        &kube,
        &crs("nsightcloudstorageconfigs/reports"),
        2,
        "StatefulSetUnavailable",
    );
    let secret = kube.get(&core("secrets", "reports-credentials")).unwrap();
    assert_eq!(
        secret_value(&secret, "rootPassword"),
        password,
        "never overwritten"
    );

    // Drift: a deleted StatefulSet comes back; an edited replica count is restored.
    let old = updated["metadata"]["uid"].clone();
    let (status, _) = kube.request("DELETE", &apps("statefulsets", "reports"), None);
    assert_eq!(status, 200);
    wait_for(WAIT, || {
        let s = kube.get(&apps("statefulsets", "reports"))?;
        (s["metadata"]["uid"] != old).then_some(())
    })
    .expect("the deleted StatefulSet was not recreated");
    kube.merge_patch(
        &apps("statefulsets", "reports"),
        &json!({"spec": {"replicas": 3}}),
    );
    wait_for(WAIT, || {
        (kube.get(&apps("statefulsets", "reports"))?["spec"]["replicas"] == 1).then_some(())
    })
    .expect("an edited replica count was not restored");

    // Switched to an external bucket: the server's objects are pruned (the Secret stays until
    // the resource is deleted); the missing Secret is reported, then a valid one is picked up.
    kube.merge_patch(
        &crs("nsightcloudstorageconfigs/reports"),
        &json!({"spec": {"storage_type": "s3", "secretRef": {"name": "bucket"}}}),
    );
    wait_gone(&kube, &apps("statefulsets", "reports"), "not pruned");
    wait_gone(&kube, &core("services", "reports"), "not pruned");
    wait_gone(&kube, &core("serviceaccounts", "reports"), "not pruned");
    assert!(kube.get(&core("secrets", "reports-credentials")).is_some());
    let cr = wait_ready(
        &kube,
        &crs("nsightcloudstorageconfigs/reports"),
        3,
        "SecretMissing",
    );
    assert!(condition(&cr, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("bucket"));
    kube.create(
        &format!("/api/v1/namespaces/{NS}/secrets"),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bucket"},
                "stringData": {"storage-config.yaml": "storage_type: s3\nregion_name: us-east-1\n"}}),
    );
    let cr = wait_ready(
        &kube,
        &crs("nsightcloudstorageconfigs/reports"),
        3,
        "SecretInvalid",
    );
    assert!(condition(&cr, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("bucket_name"));
    kube.merge_patch(
        &core("secrets", "bucket"),
        &json!({"stringData": {"storage-config.yaml": "storage_type: s3\nbucket_name: team-reports\naws_access_key_id: AK\naws_secret_access_key: SK\n"}}),
    );
    let cr = wait_ready(
        &kube,
        &crs("nsightcloudstorageconfigs/reports"),
        3,
        "SecretValid",
    );
    assert_eq!(condition(&cr, "Ready").unwrap()["status"], "True");

    // A streamer of that storage mounts its Secret.
    kube.create(
        &crs("nsightstreamers"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightStreamer",
                "metadata": {"name": "streamer"},
                "spec": {"sessionId": "5f2c", "cloudStorageRef": "reports"}}),
    );
    let d = wait_get(&kube, &apps("deployments", "streamer"));
    assert_eq!(
        pod_spec(&d)["containers"][0]["image"],
        "registry.local/nsight/nsight-streamer:e2e"
    );
    assert!(pod_spec(&d)["volumes"]
        .to_string()
        .contains("\"secretName\":\"bucket\""));
    wait_get(&kube, &core("services", "streamer"));
    wait_ready(
        &kube,
        &crs("nsightstreamers/streamer"),
        1,
        "DeploymentUnavailable",
    );

    let metrics = health.metrics.render();
    for kind in ["NsightCloudStorageConfig", "NsightStreamer"] {
        assert!(
            !metrics.contains(&format!(
                "nsight_operator_reconcile_errors_total{{kind=\"{kind}\""
            )),
            "{kind} had reconcile errors:\n{metrics}"
        );
    }
}

#[test]
fn collector_proxy_tenant_operator() {
    let kube = Kube::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let health = start(&kube, &rt);

    // A proxy config naming a collector that does not exist yet.
    kube.create(
        &crs("otlpproxyconfigs"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "OTLPProxyConfig",
                "metadata": {"name": "proxy"}, "spec": {"collectorRef": "otel", "port": 4320}}),
    );
    wait_ready(&kube, &crs("otlpproxyconfigs/proxy"), 1, "CollectorMissing");
    let cm = wait_get(&kube, &core("configmaps", "proxy"));
    assert_eq!(
        cm["data"]["collector-endpoint"],
        "http://otel.research.svc:4318"
    );
    // The sidecar's own configuration is not in the ConfigMap: it comes over ADS
    // (controlplane/otlp/tests/sidecar.rs runs it in a real Envoy; cluster_operator in a Pod).
    assert!(cm["data"].get("envoy.json").is_none(), "{cm}");

    // The collector: Deployment, Service, ConfigMap; the proxy config becomes Ready.
    let created = kube.create(
        &crs("nsightotelcollectors"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightOtelCollector",
                "metadata": {"name": "otel"},
                "spec": {"exporters": [{"name": "jaeger", "endpoint": "jaeger.obs.svc:4317"}]}}),
    );
    let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
    let d = wait_get(&kube, &apps("deployments", "otel"));
    for obj in [
        d.clone(),
        wait_get(&kube, &core("services", "otel")),
        wait_get(&kube, &core("configmaps", "otel-config")),
    ] {
        assert_owned(&obj, "NsightOtelCollector", &uid);
    }
    let hash = |d: &Value| {
        d["spec"]["template"]["metadata"]["annotations"]["nvidia.com/nsight-config-hash"].clone()
    };
    let first_hash = hash(&d);
    wait_ready(&kube, &crs("otlpproxyconfigs/proxy"), 1, "CollectorFound");
    wait_ready(
        &kube,
        &crs("nsightotelcollectors/otel"),
        1,
        "DeploymentUnavailable",
    );
    // Update: another exporter endpoint -> the ConfigMap and the Pod template's hash change.
    kube.merge_patch(
        &crs("nsightotelcollectors/otel"),
        &json!({"spec": {"exporters": [{"name": "jaeger", "endpoint": "jaeger.obs.svc:14317"}]}}),
    );
    wait_for(WAIT, || {
        let cm = kube.get(&core("configmaps", "otel-config"))?;
        cm["data"]["collector.yaml"]
            .as_str()?
            .contains("jaeger.obs.svc:14317")
            .then_some(())
    })
    .expect("the collector config did not follow the update");
    wait_for(WAIT, || {
        let d = kube.get(&apps("deployments", "otel"))?;
        (hash(&d) != first_hash).then_some(())
    })
    .expect("the Pod template did not roll with the config");
    // Drift: an edited collector config is restored.
    kube.merge_patch(
        &core("configmaps", "otel-config"),
        &json!({"data": {"collector.yaml": "edited"}}),
    );
    wait_for(WAIT, || {
        let cm = kube.get(&core("configmaps", "otel-config"))?;
        (cm["data"]["collector.yaml"] != "edited").then_some(())
    })
    .expect("an edited ConfigMap was not restored");

    // The converter: asked for without storage, the collector says what is missing; with a
    // storage config it runs beside the collector, and a coordinator of the namespace is told
    // where to stop collections on it.
    kube.merge_patch(
        &crs("nsightotelcollectors/otel"),
        &json!({"spec": {"replicas": 1, "converter": {"enabled": true}, "cloudStorageRef": "reports"}}),
    );
    let refused = wait_for(WAIT, || {
        let cr = kube.get(&crs("nsightotelcollectors/otel"))?;
        let c = condition(&cr, "Reconciled")?;
        (c["status"] == "False" && c["message"].as_str()?.contains("cloudStorageRef")).then_some(())
    });
    assert!(
        refused.is_some(),
        "{:?}",
        kube.get(&crs("nsightotelcollectors/otel"))
    );
    kube.create(
        &crs("nsightcloudstorageconfigs"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCloudStorageConfig",
                "metadata": {"name": "reports"}, "spec": {}}),
    );
    let with_converter = wait_for(WAIT, || {
        let d = kube.get(&apps("deployments", "otel"))?;
        let containers = d["spec"]["template"]["spec"]["containers"]
            .as_array()?
            .clone();
        (containers.len() == 2).then_some(containers)
    })
    .expect("the converter never joined the collector's Pod");
    assert_eq!(with_converter[1]["name"], "nsight-otlp");
    assert_eq!(
        with_converter[1]["image"],
        "registry.local/nsight/nsight-otlp:e2e"
    );
    kube.create(
        &crs("nsightcoordinators"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCoordinator",
                "metadata": {"name": "coord"}, "spec": {}}),
    );
    let told = wait_for(WAIT, || {
        let d = kube.get(&apps("deployments", "coord"))?;
        let args = d["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
        args.contains(r#""--otlp-converter","http://otel.research.svc:14318""#)
            .then_some(())
    });
    assert!(
        told.is_some(),
        "{:?}",
        kube.get(&apps("deployments", "coord"))
    );
    // The converter turned off: the coordinator follows (the collector's change re-renders it).
    kube.merge_patch(
        &crs("nsightotelcollectors/otel"),
        &json!({"spec": {"converter": {"enabled": false}}}),
    );
    let untold = wait_for(WAIT, || {
        let d = kube.get(&apps("deployments", "coord"))?;
        let args = d["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
        (!args.contains("--otlp-converter")).then_some(())
    });
    assert!(
        untold.is_some(),
        "the coordinator still names the converter"
    );

    // The tenant operator: its own ServiceAccount, Role, RoleBinding, Service, Deployment.
    let created = kube.create(
        &crs("nsighttenantoperators"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightTenantOperator",
                "metadata": {"name": "tenant"}, "spec": {"streamerLaunch": {"maxActive": 3}}}),
    );
    let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
    for path in [
        apps("deployments", "tenant"),
        core("services", "tenant"),
        core("serviceaccounts", "tenant"),
        rbac("roles", "tenant"),
        rbac("rolebindings", "tenant"),
    ] {
        assert_owned(&wait_get(&kube, &path), "NsightTenantOperator", &uid);
    }
    wait_ready(
        &kube,
        &crs("nsighttenantoperators/tenant"),
        1,
        "DeploymentUnavailable",
    );
    let may = |verb: &str, resource: &str, ns: &str| {
        let (status, out) = kube.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            Some(
                &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": format!("system:serviceaccount:{NS}:tenant"),
                         "groups": ["system:serviceaccounts", "system:authenticated"],
                         "resourceAttributes": {"namespace": ns, "verb": verb,
                                                "group": "nvidia.com", "resource": resource}}}),
            ),
        );
        assert_eq!(status, 201, "{out}");
        out["status"]["allowed"] == true
    };
    assert!(may("create", "nsightstreamers", NS));
    assert!(may("delete", "nsightstreamers", NS));
    assert!(!may("create", "nsightstreamers", "elsewhere"));
    assert!(!may("delete", "nsightcoordinators", NS));
    assert!(!may("patch", "nsighttenantoperators", NS));
    // Drift: a widened Role is narrowed back; a stray owned Role is pruned.
    kube.merge_patch(
        &rbac("roles", "tenant"),
        &json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
    );
    wait_for(WAIT, || {
        let role = kube.get(&rbac("roles", "tenant"))?;
        (!role["rules"].to_string().contains('*')).then_some(())
    })
    .expect("a widened Role was not restored");
    kube.create(
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles"),
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "tenant-stale", "labels": {
                    "app.kubernetes.io/managed-by": "nsight-operator",
                    "nvidia.com/nsight-owner-kind": "NsightTenantOperator",
                    "app.kubernetes.io/instance": "tenant"},
                    "ownerReferences": [{"apiVersion": "nvidia.com/v1alpha1",
                        "kind": "NsightTenantOperator", "name": "tenant", "uid": uid,
                        "controller": true}]},
                "rules": []}),
    );
    wait_gone(
        &kube,
        &rbac("roles", "tenant-stale"),
        "a stray Role not pruned",
    );

    // A profile config whose nsightToolArgs nsys accepts (collection switches go to `nsys
    // start` in coordinator mode) is Ready; one nsys would refuse is not, with a Warning Event
    // naming the tool config and the option.
    let profile = format!("{}/trainers", profiles(NS));
    kube.create(
        &profiles(NS),
        &json!({"apiVersion": "nvidia.com/v1", "kind": "NsightOperatorProfileConfig",
                "metadata": {"name": "trainers"},
                "spec": {"nsightToolConfigs": [{"name": "gpu",
                    "nsightToolArgs": "-t cuda,nvtx --sample=none --cpuctxsw=none"}]}}),
    );
    wait_ready(&kube, &profile, 1, "ToolArgsValid");
    kube.merge_patch(
        &profile,
        &json!({"spec": {"nsightToolConfigs": [{"name": "gpu",
            "nsightToolArgs": "-t cuda,nvtx --duration=30"}]}}),
    );
    let refused = wait_ready(&kube, &profile, 2, "InvalidToolArgs");
    let ready = condition(&refused, "Ready").unwrap();
    assert_eq!(ready["status"], "False");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("tool config gpu: --duration is accepted only by nsys profile"),
        "{ready}"
    );
    let event = wait_for(WAIT, || {
        let events = kube.get(&format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"))?;
        events["items"]
            .as_array()?
            .iter()
            .find(|e| {
                e["regarding"]["kind"] == "NsightOperatorProfileConfig"
                    && e["regarding"]["name"] == "trainers"
                    && e["reason"] == "InvalidToolArgs"
            })
            .cloned()
    })
    .expect("no InvalidToolArgs Event");
    assert_eq!(event["type"], "Warning");
    assert!(
        event["note"].as_str().unwrap().contains("tool config gpu"),
        "{event}"
    );

    let metrics = health.metrics.render();
    assert!(
        metrics.contains(
            r#"nsight_operator_reconciles_total{kind="NsightOtelCollector",result="success"}"#
        ),
        "{metrics}"
    );
    // The collector's only errors were the converter asked for without storage (above).
    for kind in [
        "OTLPProxyConfig",
        "NsightTenantOperator",
        "NsightOperatorProfileConfig",
    ] {
        assert!(
            metrics.contains(&format!(
                "nsight_operator_reconciles_total{{kind=\"{kind}\",result=\"success\"}}"
            )),
            "{kind} never reconciled:\n{metrics}"
        );
        assert!(
            !metrics.contains(&format!(
                "nsight_operator_reconcile_errors_total{{kind=\"{kind}\""
            )),
            "{kind} had reconcile errors:\n{metrics}"
        );
    }
}

/// The operator's namespace in the machineConfig test.
const OPERATOR_NS: &str = "nsight-operator";

fn daemon_sets(kube: &Kube) -> Vec<Value> {
    kube.get("/apis/apps/v1/daemonsets").unwrap()["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn machine_config_is_one_cluster_wide_daemonset_and_null_deletes_it() {
    let kube = Kube::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _controllers = start(&kube, &rt);
    kube.create(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NS}}),
    );
    // Profile configs in two namespaces: none of them gets a DaemonSet of its own.
    for (ns, name) in [(NS, "team-a"), (NS, "team-b"), ("elsewhere", "team-c")] {
        kube.create(
            &profiles(ns),
            &json!({"apiVersion": "nvidia.com/v1", "kind": "NsightOperatorProfileConfig",
                    "metadata": {"name": name},
                    "spec": {"nsightToolConfigs": [{"name": "default"}]}}),
        );
    }
    // The manager with the chart's default setting: the one DaemonSet, perf_event_paranoid 2.
    let setting = |machine_config| MachineSetting {
        machine_config,
        namespace: OPERATOR_NS.into(),
    };
    let leader = rt.spawn(manager::run_with_machine(
        client(&rt, &kube),
        config(),
        Health::default(),
        None,
        None,
        Some(setting(Some(MachineConfig::default()))),
    ));
    let path = format!(
        "/apis/apps/v1/namespaces/{OPERATOR_NS}/daemonsets/{}",
        perf_event::DAEMON_SET_NAME
    );
    let ds = wait_get(&kube, &path);
    let script = pod_spec(&ds)["initContainers"][0]["args"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        script.starts_with("echo 2 > /proc/sys/kernel/perf_event_paranoid"),
        "{script}"
    );
    assert_eq!(
        pod_spec(&ds)["initContainers"][0]["securityContext"]["privileged"],
        true
    );
    assert_eq!(
        ds["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "nsight-operator"
    );
    assert!(
        ds["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["manager"] == "nsight-operator" && f["operation"] == "Apply"),
        "not server-side applied by the operator: {}",
        ds["metadata"]["managedFields"]
    );
    std::thread::sleep(Duration::from_secs(2));
    let all = daemon_sets(&kube);
    assert_eq!(
        all.len(),
        1,
        "one DaemonSet for the cluster, whatever the profile configs: {all:?}"
    );

    // The manager restarted with `machineConfig: null` (`helm upgrade`): the DaemonSet is deleted.
    leader.abort();
    rt.spawn(manager::run_with_machine(
        client(&rt, &kube),
        config(),
        Health::default(),
        None,
        None,
        Some(setting(None)),
    ));
    wait_gone(
        &kube,
        &path,
        "machineConfig: null must delete the DaemonSet",
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(daemon_sets(&kube).is_empty(), "{:?}", daemon_sets(&kube));
}
