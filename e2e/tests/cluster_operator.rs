//! The user flow on a real node, through the operator: `helm install` of the chart (operator
//! manager and injector webhook from the images built here) -> a namespace with managed
//! storage (our S3 server), a coordinator and an analysis service, each Ready in its status ->
//! a Deployment labelled `nvidia-nsight-profile=enabled` running the C NVTX sample is injected
//! (init container `nsight-agent init`, tools volume, hook, storage Secret) and its entrypoint
//! is wrapped by the agent, which registers with the coordinator -> one collection, started
//! and stopped -> the report is in storage -> `nvtx_sum` in the analysis service gives the
//! sample's ranges. Users' calls go through the API server's service proxy here (the gateway
//! and the CLI come in a later slice, docs/cluster.md).
//!
//! Needs root, `cargo xtask image all` and `cargo xtask setup helm` (CI does all three).

#![allow(
    clippy::expect_used,
    clippy::panic,
    clippy::unwrap_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::{path::PathBuf, process::Command, time::Duration};

use nsight_e2e::{
    cluster,
    kube::{chart_dir, helm, helm_bin},
    wait_for, TempDir,
};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::{json, Value};

const AGENT_WAIT: Duration = Duration::from_secs(120);

/// helm against the node's API server.
fn helm_on(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec![
        "--kubeconfig",
        kubeconfig.to_str().expect("kubeconfig path"),
    ];
    all.extend_from_slice(args);
    helm(&all)
}

/// The webhook's serving certificate for `<service>.<ns>.svc` and its CA (PEM).
fn webhook_tls(service_host: &str) -> (String, String, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key")).expect("CA");
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec![service_host.to_owned()])
        .expect("params")
        .signed_by(&key, &ca)
        .expect("certificate");
    (ca.pem(), cert.pem(), key.serialize_pem())
}

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The release, uninstalled when the test ends (its cluster-scoped webhook configuration
/// would otherwise outlive the namespace).
struct Release {
    kubeconfig: PathBuf,
    name: String,
    namespace: String,
}

impl Drop for Release {
    fn drop(&mut self) {
        let _ = Command::new(helm_bin())
            .env("KUBECONFIG", &self.kubeconfig)
            .args(["uninstall", &self.name, "-n", &self.namespace, "--wait"])
            .output();
    }
}

fn condition(c: &cluster::Cluster, path: &str, kind: &str) -> Option<Value> {
    let (_, cr) = c.request("GET", path, None);
    cr["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|x| x["type"] == kind && x["status"] == "True")
        .cloned()
}

#[test]
fn a_labelled_deployment_is_injected_profiled_stored_and_analysed() {
    let c = cluster::shared();
    let system = cluster::TestNamespace::create(&c, "nsight-system");
    let team = cluster::TestNamespace::create(&c, "team");
    let (sys, ns) = (system.name.clone(), team.name.clone());
    let release = format!("e2e{}", std::process::id());
    let fullname = format!("{release}-nsight-operator");

    // 1. helm install, with the webhook's serving certificate in a Secret and its CA in the
    //    chart's caBundle. No perf-event DaemonSet (it needs a shell image).
    let (ca, cert, key) = webhook_tls(&format!("{fullname}-webhook.{sys}.svc"));
    c.create(
        &format!("/api/v1/namespaces/{sys}/secrets"),
        &json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "webhook-tls"},
            "data": {"tls.crt": b64(&cert), "tls.key": b64(&key)},
        }),
    );
    let kubeconfig = c.kubeconfig();
    let dir = TempDir::new("cluster-operator");
    let values = dir.path().join("values.yaml");
    std::fs::write(
        &values,
        format!(
            "image: {{pullPolicy: Never}}\nmachineConfig: null\nwebhook:\n  tlsSecretName: webhook-tls\n  caBundle: {}\n  coordinatorUrl: 'http://nsight-coordinator.{{namespace}}.svc:8081'\n",
            b64(&ca)
        ),
    )
    .expect("values");
    let _release = Release {
        kubeconfig: kubeconfig.clone(),
        name: release.clone(),
        namespace: sys.clone(),
    };
    helm_on(
        &kubeconfig,
        &[
            "install",
            &release,
            chart_dir().to_str().expect("chart path"),
            "-n",
            &sys,
            "-f",
            values.to_str().expect("values path"),
        ],
    );
    let operator = format!("/apis/apps/v1/namespaces/{sys}/deployments/{fullname}");
    let ready = wait_for(Duration::from_secs(120), || {
        let (_, d) = c.request("GET", &operator, None);
        (d["status"]["readyReplicas"].as_i64() == Some(1)).then_some(())
    });
    assert!(
        ready.is_some(),
        "operator not Ready\n{}",
        c.describe_namespace(&sys)
    );

    // 2. The platform of the team namespace: storage, coordinator, analysis.
    let crs = [
        (
            "nsightcloudstorageconfigs",
            json!({"kind": "NsightCloudStorageConfig", "metadata": {"name": "team-storage"}, "spec": {}}),
        ),
        (
            "nsightcoordinators",
            json!({"kind": "NsightCoordinator", "metadata": {"name": "nsight-coordinator"}, "spec": {"curveEncryption": {"enabled": false}}}),
        ),
        (
            "nsightanalyses",
            json!({"kind": "NsightAnalysis", "metadata": {"name": "nsight-analysis"}, "spec": {"cloudStorageRef": "team-storage"}}),
        ),
    ];
    for (plural, mut cr) in crs {
        cr["apiVersion"] = json!("nvidia.com/v1alpha1");
        c.create(
            &format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/{plural}"),
            &cr,
        );
    }
    for (plural, name, kind) in [
        ("nsightcloudstorageconfigs", "team-storage", "BucketReady"),
        ("nsightcoordinators", "nsight-coordinator", "Ready"),
        ("nsightanalyses", "nsight-analysis", "Ready"),
    ] {
        let path = format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/{plural}/{name}");
        let ok = wait_for(Duration::from_secs(120), || condition(&c, &path, kind));
        assert!(
            ok.is_some(),
            "{plural}/{name} not {kind}: {}\n{}",
            c.request("GET", &path, None).1["status"],
            c.describe_namespace(&ns)
        );
    }

    // 3. The workload, labelled: injected, and its entrypoint wrapped by the agent.
    c.create(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "sample"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "sample"}},
                "template": {
                    "metadata": {"labels": {"app": "sample", "nvidia-nsight-profile": "enabled"}},
                    "spec": {"containers": [{
                        "name": "main",
                        "image": format!("nvcr.io/nvidia/devtools/nsight-nvtx-sample:{}", env!("CARGO_PKG_VERSION")),
                        "imagePullPolicy": "Never",
                    }]},
                },
            },
        }),
    );
    let coordinator =
        format!("/api/v1/namespaces/{ns}/services/http:nsight-coordinator:http/proxy/v1");
    let agent = wait_for(AGENT_WAIT, || {
        let (_, status) = c.request("GET", &format!("{coordinator}/status"), None);
        (status["agentCounts"]["connected"] == 1).then_some(status)
    });
    let agent = agent.unwrap_or_else(|| {
        panic!(
            "no agent connected in {} s\n{}",
            AGENT_WAIT.as_secs(),
            c.describe_namespace(&ns)
        )
    });
    assert_eq!(
        agent["agents"][0]["info"]["identity"]["processName"], "nvtx-sample",
        "{agent}"
    );
    assert_eq!(
        agent["agents"][0]["info"]["identity"]["namespace"],
        ns.as_str(),
        "{agent}"
    );
    let (_, pods) = c.request(
        "GET",
        &format!("/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dsample"),
        None,
    );
    let annotations = &pods["items"][0]["metadata"]["annotations"];
    assert_eq!(
        annotations["nvidia.com/nsight-storage"],
        "NsightCloudStorageConfig team-storage (Secret team-storage-credentials)",
        "{annotations}"
    );

    // 4. One collection of about two seconds.
    let (status, started) = c.request("POST", &format!("{coordinator}/start"), Some(&json!({})));
    assert_eq!(status, 200, "start: {started}");
    let session = started["session"].as_str().expect("session").to_owned();
    std::thread::sleep(Duration::from_secs(2));
    let (status, stopped) = c.request("POST", &format!("{coordinator}/stop"), Some(&json!({})));
    assert_eq!(status, 200, "stop: {stopped}");
    let collection = wait_for(Duration::from_secs(60), || {
        let (_, s) = c.request("GET", &format!("{coordinator}/sessions/{session}"), None);
        let col = s["collections"][0].clone();
        (col["state"] == "completed").then_some(col)
    })
    .unwrap_or_else(|| panic!("collection not completed\n{}", c.describe_namespace(&ns)));
    let outcome = collection["agents"]
        .as_object()
        .and_then(|a| a.values().next().cloned())
        .expect("one agent outcome");
    assert_eq!(outcome["state"], "uploaded", "{collection}");
    let key = outcome["keys"][0].as_str().expect("report key");
    assert!(
        key.starts_with(&format!("default/{session}/1/nvtx-sample_")) && key.ends_with(".sqlite"),
        "{key}"
    );

    // 5. nvtx_sum over the collection, in the analysis service that reads the same storage.
    let analysis = format!("/api/v1/namespaces/{ns}/services/http:nsight-analysis:http/proxy/v1");
    let (status, job) = c.request(
        "POST",
        &format!("{analysis}/jobs"),
        Some(&json!({"recipe": "nvtx_sum", "session": session, "collection": "1"})),
    );
    assert!(
        status == 201 || status == 200 || status == 202,
        "create job: {status} {job}"
    );
    let id = job["id"].as_str().expect("job id").to_owned();
    let done = wait_for(Duration::from_secs(60), || {
        let (_, j) = c.request("GET", &format!("{analysis}/jobs/{id}"), None);
        matches!(j["status"].as_str(), Some("succeeded" | "failed")).then_some(j)
    })
    .expect("job finished");
    assert_eq!(done["status"], "succeeded", "{done}");
    let csv_name = done["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["name"].as_str())
        .find(|n| n.ends_with("nvtx-sum.csv"))
        .expect("the CSV")
        .to_owned();
    let (status, csv) = c.request(
        "GET",
        &format!("{analysis}/jobs/{id}/files/{csv_name}"),
        None,
    );
    assert_eq!(status, 200);
    let csv = csv.as_str().expect("CSV text").to_owned();
    // Range -> (instances, average ns).
    let rows: std::collections::HashMap<String, (f64, f64)> = csv
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Some((
                f.get(9)?.to_string(),
                (f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?),
            ))
        })
        .collect();
    let (epochs, _) = rows["demo:epoch"];
    let (steps, _) = rows["demo:train_step"];
    let (_, forward) = rows["demo:forward"];
    let (_, backward) = rows["demo:backward"];
    // The sample: 5 train_steps per epoch, forward sleeps 4 ms and backward 8 ms.
    assert!(epochs >= 5.0, "{csv}");
    assert!((steps - 5.0 * epochs).abs() <= 5.0, "{csv}");
    assert!(
        (4.0e6..6.0e6).contains(&forward),
        "forward {forward} ns\n{csv}"
    );
    assert!(
        (8.0e6..10.5e6).contains(&backward),
        "backward {backward} ns\n{csv}"
    );
}
