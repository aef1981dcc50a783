//! The user flow on a real node, through the operator and the gateway: `helm install` of the
//! chart (operator manager and injector webhook from the images built here) -> a namespace
//! with managed storage (our S3 server), a coordinator (its agent channel's certificates
//! issued by the operator), an analysis service and a gateway with API-key auth, each Ready in
//! its status -> the CLI, through kube-rs port-forwards to the gateway Pod (8888 and the 9000
//! storage proxy), is refused without the key -> a Deployment labelled
//! `nvidia-nsight-profile=enabled` running the C NVTX sample is injected (init container
//! `nsight-agent init`, tools volume, hook, storage Secret, agent certificates) and its
//! entrypoint is wrapped by the agent, which registers over mutual TLS -> session-begin,
//! profiler-start, profiler-stop, ls, download, `analysis run nvtx_sum --wait`, session-end:
//! the numbers are the sample's ranges.
//!
//! Needs root, `cargo xtask image all` and `cargo xtask setup helm` (CI does all three).

#![allow(
    clippy::expect_used,
    clippy::panic,
    clippy::unwrap_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::{path::PathBuf, time::Duration};

use nsight_e2e::{
    cli::Cli,
    cluster,
    kube::{chart_dir, helm_bin},
    wait_for, TempDir,
};
use serde_json::{json, Value};

#[path = "support/node_release.rs"]
mod node_release;
#[path = "support/port_forward.rs"]
mod port_forward;

use node_release::{b64, condition, helm_on, Release};

const AGENT_WAIT: Duration = Duration::from_secs(120);
/// The gateway's API key in this test.
const API_KEY: &str = "e2e-node-key-7f3a9c";

#[test]
fn a_labelled_deployment_is_injected_profiled_stored_and_analysed() {
    let c = cluster::shared();
    let system = cluster::TestNamespace::create(&c, "nsight-system");
    let team = cluster::TestNamespace::create(&c, "team");
    let (sys, ns) = (system.name.clone(), team.name.clone());
    let release = format!("e2e{}", std::process::id());
    let fullname = format!("{release}-nsight-operator");

    // 1. helm install with the defaults but these: images imported (never pulled), no
    //    perf-event DaemonSet (it needs a shell image), agents pointed at their namespace's
    //    coordinator. The webhook issues its own serving certificate.
    let kubeconfig = c.kubeconfig();
    let dir = TempDir::new("cluster-operator");
    let values = dir.path().join("values.yaml");
    std::fs::write(
        &values,
        "image: {pullPolicy: Never}\nmachineConfig: null\nwebhook:\n  coordinatorUrl: 'https://nsight-coordinator.{namespace}.svc:8081'\n",
    )
    .expect("values");
    let _release = Release {
        helm: helm_bin(),
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
    // The webhook issued its certificate and put its CA into the webhook configuration.
    let (_, mwc) = c.request(
        "GET",
        &format!("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{fullname}-injector"),
        None,
    );
    let bundle = mwc["webhooks"][0]["clientConfig"]["caBundle"]
        .as_str()
        .unwrap_or_default();
    let (status, issued) = c.request(
        "GET",
        &format!("/api/v1/namespaces/{sys}/secrets/{fullname}-webhook-tls"),
        None,
    );
    assert_eq!(status, 200, "the webhook's Secret: {issued}");
    assert_eq!(
        issued["data"]["ca.crt"].as_str(),
        Some(bundle),
        "caBundle is the issued CA"
    );

    // 2. The platform of the team namespace: storage, coordinator (agent channel TLS issued by
    //    the operator), analysis and the gateway with API-key auth. The CLI reaches the gateway
    //    through port-forwards on loopback, as a user's laptop would; the coordinator signs
    //    download URLs for the forwarded storage port.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = port_forward::client(&rt, &kubeconfig);
    let http_listener = port_forward::bind_local();
    let storage_listener = port_forward::bind_local();
    let storage_url = format!(
        "http://{}",
        storage_listener.local_addr().expect("storage port")
    );
    c.create(
        &format!("/api/v1/namespaces/{ns}/secrets"),
        &json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gateway-apikey"},
            "data": {"key": b64(API_KEY)},
        }),
    );
    let crs = [
        (
            "nsightcloudstorageconfigs",
            json!({"kind": "NsightCloudStorageConfig", "metadata": {"name": "team-storage"}, "spec": {}}),
        ),
        (
            "nsightcoordinators",
            json!({"kind": "NsightCoordinator", "metadata": {"name": "nsight-coordinator"},
                   "spec": {"cloudStorageRef": "team-storage", "storagePublicUrl": storage_url}}),
        ),
        (
            "nsightanalyses",
            json!({"kind": "NsightAnalysis", "metadata": {"name": "nsight-analysis"}, "spec": {"cloudStorageRef": "team-storage"}}),
        ),
        (
            "nsightgateways",
            json!({"kind": "NsightGateway", "metadata": {"name": "nsight-gateway"},
                   "spec": {"cloudStorageRef": "team-storage",
                            "authentication": {"apikey": {"enabled": true,
                                "keySecretRef": {"name": "gateway-apikey", "key": "key"}}}}}),
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
        ("nsightgateways", "nsight-gateway", "Ready"),
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
    // The operator issued the agent channel's certificates.
    let (status, tls) = c.request(
        "GET",
        &format!("/api/v1/namespaces/{ns}/secrets/nsight-coordinator-agent-tls"),
        None,
    );
    assert_eq!(status, 200, "agent-channel Secret: {tls}");
    for key in ["ca.crt", "tls.crt", "tls.key", "agent.crt", "agent.key"] {
        assert!(tls["data"][key].is_string(), "{key} missing");
    }
    let (_, pods) = c.request(
        "GET",
        &format!(
            "/api/v1/namespaces/{ns}/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Dgateway"
        ),
        None,
    );
    let gateway_pod = pods["items"][0]["metadata"]["name"]
        .as_str()
        .expect("the gateway Pod")
        .to_owned();
    let http = port_forward::start(&rt, client.clone(), &ns, &gateway_pod, 8888, http_listener);
    port_forward::start(&rt, client, &ns, &gateway_pod, 9000, storage_listener);

    // 3. The CLI through the gateway: without the key it is refused, with it the platform
    //    answers (no agent yet).
    let cli_config = dir.path().join("nsight-cloud.conf");
    let cli = Cli {
        config: &cli_config,
    };
    let gw = format!("http://{}", http.local);
    cli.ok(&["configure", "--gw", &gw]);
    let (code, _, err) = cli.run(&["status"]);
    assert_ne!(
        code, 0,
        "the gateway let a request without the API key through"
    );
    assert!(
        err.contains("401")
            || err.to_lowercase().contains("unauthorized")
            || err.contains("API key"),
        "{err}"
    );
    cli.ok(&["configure", "--gw", &gw, "--apikey", API_KEY]);
    let status = wait_for(Duration::from_secs(60), || {
        let (code, out, _) = cli.run(&["--output", "json", "status"]);
        (code == 0).then(|| serde_json::from_str::<Value>(&out).expect("JSON status"))
    })
    .unwrap_or_else(|| {
        panic!(
            "status through the gateway failed: {:?}",
            cli.run(&["status"])
        )
    });
    assert_eq!(status["agentCounts"]["connected"], 0, "{status}");

    // 4. The workload, labelled: injected, and its entrypoint wrapped by the agent, which
    //    registers over mutual TLS.
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
    let agent = wait_for(AGENT_WAIT, || {
        let status = cli.json(&["status"]);
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
    let pod = &pods["items"][0];
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(
        annotations["nvidia.com/nsight-storage"],
        "NsightCloudStorageConfig team-storage (Secret team-storage-credentials)",
        "{annotations}"
    );
    let tls_volume = pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "nsight-agent-tls")
        .cloned()
        .unwrap_or_else(|| panic!("no agent TLS volume: {}", pod["spec"]));
    assert_eq!(
        tls_volume["secret"]["secretName"], "nsight-coordinator-agent-tls",
        "{tls_volume}"
    );

    // 5. One session, one collection of about two seconds, its report listed and downloaded
    //    through the gateway's storage port.
    let begun = cli.json(&["session-begin", "--title", "on the node"]);
    let session = begun["id"].as_str().expect("session id").to_owned();
    cli.json(&["profiler-start"]);
    std::thread::sleep(Duration::from_secs(2));
    cli.json(&["profiler-stop"]);
    let listing = wait_for(Duration::from_secs(60), || {
        let (code, out, _) = cli.run(&["--output", "json", "ls"]);
        let listing: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        (code == 0 && listing["reports"].as_array().is_some_and(|r| !r.is_empty()))
            .then_some(listing)
    })
    .unwrap_or_else(|| panic!("no report listed\n{}", c.describe_namespace(&ns)));
    let key = listing["reports"][0]["key"]
        .as_str()
        .unwrap_or_else(|| panic!("report key: {listing}"))
        .to_owned();
    assert!(
        key.starts_with(&format!("default/{session}/1/nvtx-sample_")) && key.ends_with(".sqlite"),
        "{key}"
    );
    let out = dir.path().join("reports");
    let downloaded = cli.json(&["download", "-o", out.to_str().expect("path")]);
    assert_eq!(
        downloaded["files"].as_array().map(Vec::len),
        Some(1),
        "{downloaded}"
    );
    let report = find_file(&out, ".sqlite").expect("the downloaded report");
    let head = std::fs::read(&report).expect("read the report");
    assert!(
        head.starts_with(b"SQLite format 3\0"),
        "{} is not a SQLite file",
        report.display()
    );

    // 6. nvtx_sum over the session, in the analysis service that reads the same storage.
    check_sample_ranges(&nvtx_sum_csv(&cli, &session, &dir.path().join("results")));

    // 7. The session ends.
    let ended = cli.json(&["session-end"]);
    assert_eq!(ended["session"], session.as_str(), "{ended}");

    // 8. Launch mode: a profile config whose rule picks the `sample-launch` Pods for a tool
    //    config with `coordinator: false` and nsys' `--duration=3`. The agent profiles from the
    //    start for 3 s, with no coordinator, and stores the report under a session of its own.
    c.create(
        &format!("/apis/nvidia.com/v1/namespaces/{ns}/nsightoperatorprofileconfigs"),
        &json!({
            "apiVersion": "nvidia.com/v1", "kind": "NsightOperatorProfileConfig",
            "metadata": {"name": "profiles"},
            "spec": {
                "nsightToolConfigs": [
                    {"name": "coordinated", "injectionIncludePatterns": [".*"]},
                    {"name": "unattended", "coordinator": false,
                     "nsightToolArgs": "-t nvtx --duration=3", "injectionIncludePatterns": [".*"]},
                ],
                "injectionRules": [{"name": "launch", "nsightToolConfig": "unattended",
                                    "labelSelector": {"matchLabels": {"app": "sample-launch"}}}],
            },
        }),
    );
    // The webhook sees the profile config through its watch: retry until a Pod is injected
    // with it.
    c.create(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "sample-launch"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "sample-launch"}},
                "template": {
                    "metadata": {"labels": {"app": "sample-launch"}},
                    "spec": {"containers": [{
                        "name": "main",
                        "image": format!("nvcr.io/nvidia/devtools/nsight-nvtx-sample:{}", env!("CARGO_PKG_VERSION")),
                        "imagePullPolicy": "Never",
                    }]},
                },
            },
        }),
    );
    let stored = wait_for(Duration::from_secs(90), || {
        let (_, pods) = c.request(
            "GET",
            &format!("/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dsample-launch"),
            None,
        );
        let pod = pods["items"]
            .as_array()?
            .iter()
            .find(|p| p["metadata"]["annotations"]["nvidia.com/nsight-injected"] == "unattended")?;
        let name = pod["metadata"]["name"].as_str()?;
        let (_, log) = c.request(
            "GET",
            &format!("/api/v1/namespaces/{ns}/pods/{name}/log?container=main"),
            None,
        );
        let log = log.as_str()?.to_owned();
        log.contains("launch-mode reports stored").then_some(log)
    })
    .unwrap_or_else(|| {
        panic!(
            "no launch-mode report stored\n{}",
            c.describe_namespace(&ns)
        )
    });
    let launch_session = stored
        .split("default/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .filter(|s| s.starts_with("launch-"))
        .unwrap_or_else(|| panic!("no launch session in the agent's log:\n{stored}"))
        .to_owned();
    check_sample_ranges(&nvtx_sum_csv(
        &cli,
        &launch_session,
        &dir.path().join("launch-results"),
    ));

    // 9. helm uninstall leaves nothing of the release behind (the CRDs stay, as Helm keeps
    //    them; the team namespace's resources are the user's).
    helm_on(&kubeconfig, &["uninstall", &release, "-n", &sys, "--wait"]);
    let leftovers = [
        format!("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{fullname}-injector"),
        format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{fullname}"),
        format!("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{fullname}"),
        format!("/apis/apps/v1/namespaces/{sys}/deployments/{fullname}"),
        format!("/api/v1/namespaces/{sys}/secrets/{fullname}-webhook-tls"),
    ];
    let gone = wait_for(Duration::from_secs(60), || {
        leftovers
            .iter()
            .all(|path| c.request("GET", path, None).0 == 404)
            .then_some(())
    });
    assert!(
        gone.is_some(),
        "left behind: {:?}",
        leftovers
            .iter()
            .filter(|p| c.request("GET", p, None).0 != 404)
            .collect::<Vec<_>>()
    );
}

/// `analysis run nvtx_sum --session <session> --wait` through the CLI; its CSV, downloaded
/// into `dir`.
fn nvtx_sum_csv(cli: &Cli<'_>, session: &str, dir: &std::path::Path) -> String {
    let job = cli.json(&[
        "analysis",
        "run",
        "nvtx_sum",
        "--session",
        session,
        "--wait",
    ]);
    assert_eq!(job["status"], "succeeded", "{job}");
    let id = job["id"].as_str().expect("job id").to_owned();
    cli.ok(&[
        "analysis",
        "reports",
        "download",
        &id,
        "-o",
        dir.to_str().expect("path"),
    ]);
    let csv = find_file(dir, "nvtx-sum.csv").expect("the CSV");
    std::fs::read_to_string(csv).expect("read the CSV")
}

/// The first file under `dir` whose name ends with `suffix`.
fn find_file(dir: &std::path::Path, suffix: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, suffix) {
                return Some(found);
            }
        } else if path.to_string_lossy().ends_with(suffix) {
            return Some(path);
        }
    }
    None
}

/// The sample's ranges in `nvtx_sum`'s CSV: 5 train_steps per epoch, forward sleeps 4 ms and
/// backward 8 ms.
fn check_sample_ranges(csv: &str) {
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
    assert!(epochs >= 5.0, "{csv}");
    // A window cuts an epoch at each end: the steps of those two partial epochs (at most 4
    // each) count, their epochs do not (seen in CI: 28 epochs, 146 steps).
    assert!((steps - 5.0 * epochs).abs() <= 10.0, "{csv}");
    assert!(
        (4.0e6..6.0e6).contains(&forward),
        "forward {forward} ns\n{csv}"
    );
    assert!(
        (8.0e6..10.5e6).contains(&backward),
        "backward {backward} ns\n{csv}"
    );
}
