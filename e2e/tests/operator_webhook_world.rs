//! The injector webhook's World from a real kube-apiserver: NsightOperatorProfileConfigs and
//! namespace labels watched into reflector caches, so that rules created, changed or deleted
//! after the webhook started apply to the next Pod (no restart); namespace-label, set-based
//! label with include/exclude patterns, CEL and cluster-wide rules; a skipped Pod gets an
//! Event; multi-tenant auto-provisioning creates a namespace's resources once, respects one
//! that exists, and does nothing on a dry run. Needs `cargo xtask setup kube`.
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
    events::EventSink,
    provision::Provisioner,
    server::{self, Shell, Webhook},
    settings::{Settings, XdsServer},
    world::KubeWorld,
};
use serde_json::{json, Value};

#[path = "support/kube_client.rs"]
mod kube_client;
use kube_client::client;

const WAIT: Duration = Duration::from_secs(30);
const CLUSTER_NS: &str = "nsight-operator";

/// Starts the webhook in-process with the cluster World, skip Events and auto-provisioning;
/// returns (URL, CA PEM).
fn start_webhook(rt: &tokio::runtime::Runtime, kube: &Kube, dir: &TempDir) -> (String, String) {
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

    let client = client(rt, kube);
    let (world, watch) = KubeWorld::start(client.clone(), Some(CLUSTER_NS.into()));
    let (events, publish) = EventSink::start(client.clone());
    let (provisioner, provision) = Provisioner::start(client);
    rt.spawn(watch);
    rt.spawn(publish);
    rt.spawn(provision);
    let synced = wait_for(WAIT, || world.synced().then_some(()));
    assert!(synced.is_some(), "the webhook's caches never synced");

    let settings = Settings {
        agent_image: "registry.local/nsight-agent:e2e".into(),
        coordinator_url: Some("http://nsight-operator-coordinator.{namespace}.svc:8081".into()),
        otlp_xds: Some(XdsServer {
            host: "nsight-operator-xds.nsight.svc".into(),
            port: 18000,
        }),
        ..Settings::default()
    };
    let ready = world.clone();
    let shell = Shell {
        events: Some(events),
        provisioner: Some(provisioner),
        copier: None,
        ready: Some(Arc::new(move || ready.synced())),
    };
    let webhook = Webhook {
        world: Arc::new(world),
        settings: Arc::new(settings),
    };
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    rt.spawn(server::serve(
        listener,
        tls,
        server::router_with(webhook, shell),
    ));
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
                "sideEffects": "NoneOnDryRun",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "clientConfig": {"url": url, "caBundle": bundle},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                           "apiVersions": ["v1"], "resources": ["pods"]}],
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                    "operator": "NotIn", "values": ["kube-system", CLUSTER_NS]}]}
            }]
        }),
    );
}

fn namespace(kube: &Kube, name: &str, labels: Value) {
    kube.create(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": labels}}),
    );
}

fn pod(name: &str, labels: Value, image: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": image,
                                 "command": ["python", "train.py"]}]}
    })
}

fn configs(ns: &str) -> String {
    format!("/apis/nvidia.com/v1/namespaces/{ns}/nsightoperatorprofileconfigs")
}

fn profile(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "nvidia.com/v1", "kind": "NsightOperatorProfileConfig",
           "metadata": {"name": name}, "spec": spec})
}

/// Creates `pod` in `ns` as a dry run (no side effects) and returns what the server stored.
fn dry_run(kube: &Kube, ns: &str, pod: &Value) -> Value {
    let (status, got) = kube.request(
        "POST",
        &format!("/api/v1/namespaces/{ns}/pods?dryRun=All"),
        Some(pod),
    );
    assert_eq!(status, 201, "{got}");
    got
}

/// The tool config the webhook injected, if any.
fn injected(pod: &Value) -> Option<String> {
    pod["metadata"]["annotations"]["nvidia.com/nsight-injected"]
        .as_str()
        .map(str::to_owned)
}

fn reason(pod: &Value) -> String {
    pod["metadata"]["annotations"]["nvidia.com/nsight-injection-reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn env(pod: &Value, name: &str) -> Option<String> {
    pod["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)?["value"]
        .as_str()
        .map(str::to_owned)
}

/// Waits until a dry-run create of `pod` in `ns` is injected with `want` (or, with `None`,
/// not injected); returns the last answer.
fn eventually(kube: &Kube, ns: &str, pod: &Value, want: Option<&str>) -> Value {
    let mut last = Value::Null;
    let ok = wait_for(WAIT, || {
        last = dry_run(kube, ns, pod);
        (injected(&last).as_deref() == want).then_some(())
    });
    assert!(
        ok.is_some(),
        "{ns}/{}: wanted injection {want:?}, last answer {last}",
        pod["metadata"]["name"]
    );
    last
}

fn cr_names(kube: &Kube, ns: &str, plural: &str) -> Vec<String> {
    let (status, list) = kube.request(
        "GET",
        &format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/{plural}"),
        None,
    );
    assert_eq!(status, 200, "{list}");
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

const PROVISIONED: [&str; 6] = [
    "nsightcloudstorageconfigs",
    "nsightcoordinators",
    "nsightotelcollectors",
    "otlpproxyconfigs",
    "nsightanalyses",
    "nsightgateways",
];

#[test]
fn the_webhook_follows_the_cluster() {
    let kube = Kube::start();
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(|crd| serde_json::to_value(crd).unwrap()),
    );
    for (ns, labels) in [
        (CLUSTER_NS, json!({})),
        ("team-a", json!({})),
        ("team-b", json!({})),
        ("team-c", json!({})),
        ("tenant-x", json!({})),
    ] {
        namespace(&kube, ns, labels);
    }
    // A namespace admin's own gateway, before any profiled Pod: provisioning must respect it.
    let own_gateway = json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
        "metadata": {"name": "team-gateway"}, "spec": {"port": 9999}});
    kube.create(
        "/apis/nvidia.com/v1alpha1/namespaces/tenant-x/nsightgateways",
        &own_gateway,
    );

    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = TempDir::new("nsight-webhook-world-e2e");
    let (url, ca) = start_webhook(&rt, &kube, &dir);
    register_webhook(&kube, &url, &ca);
    let labelled = pod(
        "probe",
        json!({"nvidia-nsight-profile": "enabled"}),
        "python:3.12",
    );
    eventually(&kube, "default", &labelled, Some("default"));

    // 1. A profile config created after the webhook started selects a Pod; a change to it
    //    and its deletion apply too, without a restart.
    let trainer = pod("trainer", json!({"app": "trainer"}), "python:3.12");
    eventually(&kube, "team-a", &trainer, None);
    kube.create(
        &configs("team-a"),
        &profile(
            "rules",
            json!({"nsightToolConfigs": [{"name": "trainer-profile", "nsightToolArgs": "--trace=cuda"}],
                   "injectionRules": [{"name": "trainers", "nsightToolConfig": "trainer-profile",
                                       "labelSelector": {"matchLabels": {"app": "trainer"}}}]}),
        ),
    );
    let got = eventually(&kube, "team-a", &trainer, Some("trainer-profile"));
    assert_eq!(reason(&got), "profile config rules, rule trainers");
    assert_eq!(
        env(&got, "NSIGHT_TOOL_ARGS").as_deref(),
        Some("--trace=cuda")
    );
    assert_eq!(
        env(&got, "NSIGHT_COORDINATOR_URL").as_deref(),
        Some("http://nsight-operator-coordinator.team-a.svc:8081"),
        "the coordinator URL names the Pod's namespace"
    );
    kube.merge_patch(
        &format!("{}/rules", configs("team-a")),
        &json!({"spec": {"nsightToolConfigs": [
            {"name": "trainer-profile", "nsightToolArgs": "--trace=cuda,nvtx"}]}}),
    );
    let ok = wait_for(WAIT, || {
        let got = dry_run(&kube, "team-a", &trainer);
        (env(&got, "NSIGHT_TOOL_ARGS").as_deref() == Some("--trace=cuda,nvtx")).then_some(())
    });
    assert!(ok.is_some(), "the changed tool args never applied");

    // 2. A namespace-label rule: applies once the namespace gets the label. (The config's
    //    second rule shows when the cache has it.)
    let worker = pod("worker", json!({"app": "worker"}), "python:3.12");
    kube.create(
        &configs("team-b"),
        &profile(
            "gpu-namespaces",
            json!({"nsightToolConfigs": [{"name": "ns-profile"}],
                   "injectionRules": [
                       {"name": "gpu-tier", "nsightToolConfig": "ns-profile",
                        "namespaceSelector": {"matchLabels": {"tier": "gpu"}}},
                       {"name": "marker", "nsightToolConfig": "ns-profile",
                        "labelSelector": {"matchLabels": {"app": "marker"}}}]}),
        ),
    );
    let marker = pod("marker", json!({"app": "marker"}), "python:3.12");
    eventually(&kube, "team-b", &marker, Some("ns-profile"));
    assert_eq!(injected(&dry_run(&kube, "team-b", &worker)), None);
    kube.merge_patch(
        "/api/v1/namespaces/team-b",
        &json!({"metadata": {"labels": {"tier": "gpu"}}}),
    );
    let got = eventually(&kube, "team-b", &worker, Some("ns-profile"));
    assert_eq!(reason(&got), "profile config gpu-namespaces, rule gpu-tier");

    // 3. A set-based label rule whose tool config has include/exclude patterns.
    kube.create(
        &configs("team-c"),
        &profile(
            "patterns",
            json!({"nsightToolConfigs": [{"name": "train-only",
                        "injectionIncludePatterns": ["python.*train\\.py"],
                        "injectionExcludePatterns": ["pip", "nvidia-smi"]}],
                   "injectionRules": [{"name": "train-not-debug", "nsightToolConfig": "train-only",
                        "labelSelector": {"matchExpressions": [
                            {"key": "app", "operator": "In", "values": ["train", "eval"]},
                            {"key": "stage", "operator": "NotIn", "values": ["debug"]}]}}]}),
        ),
    );
    let prod = pod(
        "train-prod",
        json!({"app": "train", "stage": "prod"}),
        "python:3.12",
    );
    let got = eventually(&kube, "team-c", &prod, Some("train-only"));
    assert_eq!(
        env(&got, "NSIGHT_INJECT_INCLUDE").as_deref(),
        Some("python.*train\\.py")
    );
    assert_eq!(
        env(&got, "NSIGHT_INJECT_EXCLUDE").as_deref(),
        Some("pip\nnvidia-smi")
    );
    let debug = pod(
        "train-debug",
        json!({"app": "train", "stage": "debug"}),
        "python:3.12",
    );
    assert_eq!(injected(&dry_run(&kube, "team-c", &debug)), None);

    // 4. A CEL rule over the Pod.
    kube.create(
        &configs("team-c"),
        &profile(
            "z-cel",
            json!({"nsightToolConfigs": [{"name": "cuda-images"}],
                   "injectionRules": [{"name": "cuda", "nsightToolConfig": "cuda-images",
                        "celExpression": "object.metadata.name.startsWith('sim-') && object.spec.containers.exists(c, c.image.contains('cuda'))"}]}),
        ),
    );
    let cuda = pod(
        "sim-1",
        json!({}),
        "nvcr.io/nvidia/cuda:12.4.0-runtime-ubuntu22.04",
    );
    let got = eventually(&kube, "team-c", &cuda, Some("cuda-images"));
    assert_eq!(reason(&got), "profile config z-cel, rule cuda");
    let plain = pod("sim-2", json!({}), "python:3.12");
    assert_eq!(injected(&dry_run(&kube, "team-c", &plain)), None);

    // 5. Cluster-wide rules: the configs of the operator's namespace, in every namespace,
    //    after the namespace's own.
    kube.create(
        &configs(CLUSTER_NS),
        &profile(
            "everywhere",
            json!({"nsightToolConfigs": [{"name": "cluster-profile"}],
                   "injectionRules": [{"name": "opted-in", "nsightToolConfig": "cluster-profile",
                        "labelSelector": {"matchLabels": {"nsight.example/profile": "yes"}}}]}),
        ),
    );
    let anywhere = pod(
        "anywhere",
        json!({"nsight.example/profile": "yes"}),
        "python:3.12",
    );
    let got = eventually(&kube, "default", &anywhere, Some("cluster-profile"));
    assert_eq!(
        reason(&got),
        "cluster-wide profile config nsight-operator/everywhere, rule opted-in"
    );

    // 5b. OTLP mirroring: a tool config that asks for it gets the namespace's OTLP proxy
    //     sidecar once an OTLPProxyConfig naming a collector exists; before that the Pod is
    //     injected without it and says why. The API server accepts the native sidecar.
    kube.create(
        &configs("team-a"),
        &profile(
            "mirroring",
            json!({"nsightToolConfigs": [{"name": "mirrored", "otlpMirroringEnabled": true}],
                   "injectionRules": [{"name": "traced", "nsightToolConfig": "mirrored",
                        "labelSelector": {"matchLabels": {"app": "traced"}}}]}),
        ),
    );
    let traced = pod("traced", json!({"app": "traced"}), "python:3.12");
    let got = eventually(&kube, "team-a", &traced, Some("mirrored"));
    let mirroring = |pod: &Value| {
        pod["metadata"]["annotations"]["nvidia.com/nsight-otlp-mirroring"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        mirroring(&got).starts_with("off: ") && mirroring(&got).contains("no OTLPProxyConfig"),
        "{got}"
    );
    assert_eq!(env(&got, "NSIGHT_OTLP_MIRROR_ENDPOINT"), None);
    kube.create(
        "/apis/nvidia.com/v1alpha1/namespaces/team-a/otlpproxyconfigs",
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "OTLPProxyConfig",
                "metadata": {"name": "otlp"}, "spec": {"collectorRef": "otel"}}),
    );
    let mut last = Value::Null;
    let sidecar = wait_for(WAIT, || {
        last = dry_run(&kube, "team-a", &traced);
        last["spec"]["initContainers"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "nsight-otlp-proxy")
            .cloned()
    })
    .unwrap_or_else(|| panic!("the sidecar never came: {last}"));
    assert_eq!(sidecar["restartPolicy"], "Always", "{sidecar}");
    // Configured over the manager's ADS, as its OTLPProxyConfig's sidecar.
    let args = sidecar["args"].to_string();
    assert!(
        args.contains("nsight-operator-xds.nsight.svc")
            && args.contains(r#""--service-cluster","otlp""#),
        "{sidecar}"
    );
    assert_eq!(
        sidecar["image"],
        "nvcr.io/nvidia/devtools/nsight-gateway:0.1.0"
    );
    assert_eq!(
        env(&last, "NSIGHT_OTLP_MIRROR_ENDPOINT").as_deref(),
        Some("http://127.0.0.1:4317")
    );
    assert!(
        mirroring(&last).starts_with("OTLPProxyConfig otlp"),
        "{last}"
    );
    // Gone before 1b, which wants team-a without profile configs.
    let (status, body) = kube.request("DELETE", &format!("{}/mirroring", configs("team-a")), None);
    assert_eq!(status, 200, "{body}");

    // 1b. The deleted config no longer selects.
    let (status, body) = kube.request("DELETE", &format!("{}/rules", configs("team-a")), None);
    assert_eq!(status, 200, "{body}");
    eventually(&kube, "team-a", &trainer, None);

    // 6. Skipped Pods get an Event (real creates: dry runs have no side effects): an opt-out,
    //    and a Pod no rule selects in a namespace with profile configs. A Pod of a namespace
    //    nobody configured gets none.
    let opted_out = pod(
        "opted-out",
        json!({"nvidia-nsight-profile": "disabled"}),
        "python:3.12",
    );
    kube.create("/api/v1/namespaces/team-c/pods", &opted_out);
    kube.create(
        "/api/v1/namespaces/team-c/pods",
        &pod("bystander", json!({"app": "web"}), "python:3.12"),
    );
    kube.create(
        "/api/v1/namespaces/team-a/pods",
        &pod("unconfigured", json!({"app": "web"}), "python:3.12"),
    );
    let events = |ns: &str| -> Vec<Value> {
        let (status, list) = kube.request(
            "GET",
            &format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
            None,
        );
        assert_eq!(status, 200, "{list}");
        list["items"].as_array().cloned().unwrap_or_default()
    };
    let find = |ns: &str, pod: &str, reason: &str| {
        events(ns).into_iter().find(|e| {
            e["regarding"]["name"] == pod
                && e["reason"] == reason
                && e["reportingController"] == "nsight-injector"
        })
    };
    let opted = wait_for(WAIT, || find("team-c", "opted-out", "OptedOut"));
    let opted = opted.expect("no OptedOut Event for the opted-out Pod");
    assert_eq!(opted["type"], "Normal");
    assert_eq!(opted["regarding"]["kind"], "Pod");
    assert!(
        opted["note"]
            .as_str()
            .unwrap()
            .contains("nvidia-nsight-profile=disabled"),
        "{opted}"
    );
    let bystander = wait_for(WAIT, || find("team-c", "bystander", "NotSelected"));
    assert!(
        bystander.is_some(),
        "no NotSelected Event: {:?}",
        events("team-c")
    );
    // team-a has no profile config any more (deleted above): no Event for its Pod.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        events("team-a")
            .iter()
            .all(|e| e["regarding"]["name"] != "unconfigured"),
        "{:?}",
        events("team-a")
    );

    // 7. Auto-provisioning: dry runs provisioned nothing; the first injected Pod of tenant-x
    //    creates the namespace's resources, except the gateway it already has.
    for plural in PROVISIONED {
        assert!(
            cr_names(&kube, "default", plural).is_empty(),
            "a dry run provisioned {plural} in default"
        );
    }
    kube.create("/api/v1/namespaces/tenant-x/pods", &{
        let mut p = labelled.clone();
        p["metadata"]["name"] = json!("first");
        p
    });
    let done = wait_for(WAIT, || {
        PROVISIONED
            .iter()
            .all(|plural| !cr_names(&kube, "tenant-x", plural).is_empty())
            .then_some(())
    });
    assert!(done.is_some(), "tenant-x was not provisioned");
    for (plural, name) in [
        ("nsightcloudstorageconfigs", "nsight-operator-storage"),
        ("nsightcoordinators", "nsight-operator-coordinator"),
        ("nsightotelcollectors", "nsight-operator-otel-collector"),
        ("otlpproxyconfigs", "nsight-operator-otlp-proxy"),
        ("nsightanalyses", "nsight-operator-analysis"),
        ("nsightgateways", "team-gateway"),
    ] {
        assert_eq!(cr_names(&kube, "tenant-x", plural), [name], "{plural}");
    }
    let gateway = kube
        .get("/apis/nvidia.com/v1alpha1/namespaces/tenant-x/nsightgateways/team-gateway")
        .unwrap();
    assert_eq!(
        gateway["spec"],
        json!({"port": 9999}),
        "the own gateway was changed"
    );
    assert_eq!(gateway["metadata"]["generation"], 1);
    let analysis = kube
        .get(
            "/apis/nvidia.com/v1alpha1/namespaces/tenant-x/nsightanalyses/nsight-operator-analysis",
        )
        .unwrap();
    assert_eq!(
        analysis["spec"]["cloudStorageRef"],
        "nsight-operator-storage"
    );
    assert_eq!(
        analysis["metadata"]["labels"]["nvidia.com/nsight-auto-provisioned"],
        "true"
    );
    // A second Pod (and a deleted provisioned resource) change nothing: once per namespace.
    let (status, body) = kube.request(
        "DELETE",
        "/apis/nvidia.com/v1alpha1/namespaces/tenant-x/nsightanalyses/nsight-operator-analysis",
        None,
    );
    assert_eq!(status, 200, "{body}");
    kube.create("/api/v1/namespaces/tenant-x/pods", &{
        let mut p = labelled.clone();
        p["metadata"]["name"] = json!("second");
        p
    });
    std::thread::sleep(Duration::from_secs(2));
    for plural in PROVISIONED {
        let want = usize::from(plural != "nsightanalyses");
        assert_eq!(
            cr_names(&kube, "tenant-x", plural).len(),
            want,
            "{plural} after the second Pod"
        );
    }
}
