//! The user flow on a real node, as the user guide tells it: `helm install` of the chart with
//! an HTTPS gateway and an API key (the operator manager and injector webhook from the images
//! built here; the chart renders the single-tenant control plane as custom resources: managed
//! storage on our S3 server, a coordinator whose agent-channel certificates the operator
//! issues, an analysis service, the gateway) -> `nsight-cloud autoconfigure -n <release
//! namespace>` with the kubeconfig: the gateway URL, the API key from the chart's Secret, the
//! CA from the TLS Secret, and a port-forward helper for 8888 and 9000 that later commands
//! reuse -> a Deployment labelled `nvidia-nsight-profile=enabled` in another namespace is
//! injected (the webhook copies the agent certificates and the storage config there) and its
//! entrypoint wrapped by the agent, which registers over mutual TLS -> session-begin,
//! profiler-start, profiler-stop, ls, download (HTTPS through the 9000 proxy), `analysis run
//! nvtx_sum --wait`, session-end: the numbers are the sample's ranges; with OTLP mirroring on
//! for the sample (an OTLPProxyConfig and a profile config), its Pod runs the Envoy sidecar and
//! the converter behind it (in place of a collector) stores a report beside the agent's, one span
//! per range -> launch mode -> `helm
//! upgrade` to a NodePort gateway, autoconfigure again (the helper stopped, the node's address)
//! -> helm uninstall leaves nothing.
//!
//! Needs root, `cargo xtask image all` and `cargo xtask setup helm` (CI does all three).

#![allow(
    clippy::expect_used,
    clippy::panic,
    clippy::unwrap_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::{ffi::OsStr, path::PathBuf, time::Duration};

use nsight_e2e::{
    cli::Cli,
    cluster,
    kube::{chart_dir, helm_bin, tls_for},
    mock_nsys_image, wait_for, TempDir,
};
use serde_json::{json, Value};

#[path = "support/node_release.rs"]
mod node_release;

use node_release::{b64, condition, free_ports, helm_on, Release};

const AGENT_WAIT: Duration = Duration::from_secs(120);
/// The gateway's API key in this test.
const API_KEY: &str = "e2e-node-key-7f3a9c";
/// The release's streamer cap (`streamerLaunch.maxActive`), small so that the test reaches it.
const MAX_STREAMERS: u32 = 2;
/// The control plane the chart renders (the documented names).
const COORDINATOR: &str = "nsight-operator-coordinator";
/// The project's STAND-IN for NVIDIA's Nsight Streamer image (which cannot be pulled here).
const STANDIN: &str = concat!(
    "nvcr.io/nvidia/devtools/nsight-streamer-standin:",
    env!("CARGO_PKG_VERSION")
);

/// The WebRTC media port and TURN relay every launched streamer gets (`streamerLaunch`); the
/// relay's credentials come from the Secret [`TURN_SECRET`], whose user name is [`TURN_USER`].
const MEDIA_PORT: u16 = 47998;
const TURN_URL: &str = "turn:stunner.stunner.svc:3478?transport=udp";
const TURN_SECRET: &str = "nsight-turn";
const TURN_USER: &str = "e2e-turn-user";

/// The port-forward helper of a CLI configuration, stopped when the test ends however it ends.
struct Helper<'a>(&'a Cli<'a>);

impl Drop for Helper<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(&["port-forward", "stop"]);
    }
}

/// The chart's values in this test: images imported (never pulled), no perf-event DaemonSet
/// (it needs a shell image), an HTTPS gateway with an inline API key, downloads signed for the
/// forwarded storage port, the tenant API launching the stand-in streamer (at most
/// [`MAX_STREAMERS`] at once, each with a media port and a TURN relay), Nsight Systems from
/// an image (the MOCK of `mock_nsys_image`).
fn values(service_type: &str, storage_port: u16) -> String {
    format!(
        "image: {{pullPolicy: Never}}\nmachineConfig: null\n\
         nsight-coordinator: {{storagePublicUrl: 'https://localhost:{storage_port}'}}\n\
         nsight-gateway:\n  service: {{type: {service_type}}}\n  tlsSecretRef: {{name: gateway-tls}}\n  \
         authentication: {{apikey: {{enabled: true, key: {API_KEY}}}}}\n\
         nsight-tenant-operator: {{enabled: true, streamerLaunch: {{image: '{STANDIN}', maxActive: {MAX_STREAMERS}, \
           mediaPorts: [{{name: webrtc, port: {MEDIA_PORT}}}], \
           turn: {{enabled: true, urls: ['{TURN_URL}'], credentialsSecret: {TURN_SECRET}}}}}}}\n\
         nsight-injector: {{nsys: {{image: '{}'}}}}\n",
        mock_nsys_image::NAME
    )
}

#[test]
fn a_labelled_deployment_is_injected_profiled_stored_and_analysed() {
    let c = cluster::shared();
    let system = cluster::TestNamespace::create(&c, "nsight-system");
    let team = cluster::TestNamespace::create(&c, "team");
    let (sys, ns) = (system.name.clone(), team.name.clone());
    let release = format!("e2e{}", std::process::id());
    let fullname = format!("{release}-nsight-operator");
    let kubeconfig = c.kubeconfig();
    let dir = TempDir::new("cluster-operator");

    // 1. The gateway's TLS Secret (its certificate names localhost, for the port-forward, and
    //    the node's address, for NodePort), then helm install.
    let (ca, cert, key) = tls_for(&[
        "localhost",
        "127.0.0.1",
        "10.244.0.1",
        &format!("nsight-operator-gateway.{sys}.svc"),
    ]);
    c.create(
        &format!("/api/v1/namespaces/{sys}/secrets"),
        &json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gateway-tls"},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": b64(&cert), "tls.key": b64(&key), "ca.crt": b64(&ca)},
        }),
    );
    // The TURN relay's credentials, which launched streamers get by reference.
    c.create(
        &format!("/api/v1/namespaces/{sys}/secrets"),
        &json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": TURN_SECRET},
            "stringData": {"username": TURN_USER, "password": "e2e-turn-password"},
        }),
    );
    let nsys_image = mock_nsys_image::write(dir.path()).expect("the mock nsys image");
    c.import_image(&nsys_image)
        .expect("import the mock nsys image");
    let (http_port, storage_port) = free_ports();
    let values_file = dir.path().join("values.yaml");
    std::fs::write(&values_file, values("ClusterIP", storage_port)).expect("values");
    let installed = Release {
        helm: helm_bin(),
        kubeconfig: kubeconfig.clone(),
        name: release.clone(),
        namespace: sys.clone(),
    };
    let notes = helm_on(
        &kubeconfig,
        &[
            "install",
            &release,
            chart_dir().to_str().expect("chart path"),
            "-n",
            &sys,
            "-f",
            values_file.to_str().expect("values path"),
        ],
    );
    assert!(
        notes.contains(&format!("nsight-cloud autoconfigure -n {sys}")),
        "NOTES.txt names the next step:\n{notes}"
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

    // 2. The control plane the chart rendered, each Ready in its status; the operator issued
    //    the agent channel's certificates.
    for (plural, name, kind) in [
        (
            "nsightcloudstorageconfigs",
            "nsight-operator-storage",
            "BucketReady",
        ),
        ("nsightcoordinators", COORDINATOR, "Ready"),
        ("nsightanalyses", "nsight-operator-analysis", "Ready"),
        ("nsightgateways", "nsight-operator-gateway", "Ready"),
        ("nsightclouduis", "nsight-operator-cloud-ui", "Ready"),
        (
            "nsighttenantoperators",
            "nsight-operator-tenant-operator",
            "Ready",
        ),
    ] {
        let path = format!("/apis/nvidia.com/v1alpha1/namespaces/{sys}/{plural}/{name}");
        let ok = wait_for(Duration::from_secs(120), || condition(&c, &path, kind));
        assert!(
            ok.is_some(),
            "{plural}/{name} not {kind}: {}\n{}",
            c.request("GET", &path, None).1["status"],
            c.describe_namespace(&sys)
        );
    }
    let (status, tls) = c.request(
        "GET",
        &format!("/api/v1/namespaces/{sys}/secrets/{COORDINATOR}-agent-tls"),
        None,
    );
    assert_eq!(status, 200, "agent-channel Secret: {tls}");
    for key in ["ca.crt", "tls.crt", "tls.key", "agent.crt", "agent.key"] {
        assert!(tls["data"][key].is_string(), "{key} missing");
    }

    // `helm test`: the chart's probe Pod reaches the coordinator and the analysis service
    // through the gateway, with the key and the CA, from inside the cluster.
    let tested = helm_on(
        &kubeconfig,
        &["test", &release, "-n", &sys, "--timeout", "3m"],
    );
    assert!(tested.contains("Succeeded"), "helm test:\n{tested}");
    // ...and only through it: a client on the Pod network (the API server's service proxy)
    // that goes straight to the coordinator's or the analysis service's Service is refused,
    // while the kubelet's health probes (no token) keep them Ready.
    for (service, path) in [
        (COORDINATOR, "v1/sessions"),
        ("nsight-operator-analysis", "v1/recipes"),
    ] {
        let url = format!("/api/v1/namespaces/{sys}/services/http:{service}:http/proxy/{path}");
        let (status, body) = c.request("GET", &url, None);
        assert_eq!(
            status, 403,
            "{service} answered without the gateway: {body}"
        );
        assert_eq!(
            body["title"], "Forbidden",
            "{service}: a problem document: {body}"
        );
        let token = c
            .gateway_token(&sys, service)
            .expect("the operator's token Secret");
        let (status, body) =
            c.request_with("GET", &url, None, &[("x-nsight-gateway-token", &token)]);
        assert_eq!(status, 200, "{service} with the gateway's token: {body}");
        // And a NetworkPolicy that admits only the gateway's Pods to the API port (the test
        // node's bridge network plugin does not enforce it; the token above is what refused).
        let (status, policy) = c.request(
            "GET",
            &format!("/apis/networking.k8s.io/v1/namespaces/{sys}/networkpolicies/{service}"),
            None,
        );
        assert_eq!(status, 200, "{service}'s NetworkPolicy: {policy}");
        let rule = &policy["spec"]["ingress"][0];
        assert_eq!(
            (
                &rule["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
                &rule["ports"][0]["port"]
            ),
            (&json!("gateway"), &json!("http")),
            "{policy}"
        );
    }

    // 3. autoconfigure, as a user with a kubeconfig: the URL through the port-forward helper,
    //    the key from the chart's Secret, the CA from the TLS Secret.
    let cli_config = dir.path().join("nsight-cloud.conf");
    let cli = Cli {
        config: &cli_config,
    };
    let _helper = Helper(&cli);
    let kube_env = [("KUBECONFIG", kubeconfig.as_os_str())];
    let ports = format!("{http_port},{storage_port}");
    let configured = autoconfigure(&cli, &kube_env, &sys, &["--local-ports", &ports]);
    assert_eq!(
        configured["gateway"],
        format!("https://localhost:{http_port}"),
        "{configured}"
    );
    assert_eq!(configured["auth"]["type"], "apiKey", "{configured}");
    assert_eq!(configured["caTrusted"], true, "{configured}");
    assert!(configured["portForward"]["pid"].is_u64(), "{configured}");
    assert!(
        !std::fs::read_to_string(&cli_config)
            .expect("config")
            .is_empty()
            && !configured.to_string().contains(API_KEY),
        "the key is never printed"
    );
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
    // The Cloud UI at the gateway's root, through the same forward (the UI is public: its
    // API calls carry the credentials).
    let browser = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).expect("CA"))
        .build()
        .expect("client");
    let page = browser
        .get(format!("https://localhost:{http_port}/sessions"))
        .send()
        .and_then(|r| r.error_for_status())
        .and_then(|r| r.text())
        .expect("the UI through the gateway");
    assert!(
        page.contains("nsight_ui"),
        "not the UI's index.html:\n{page}"
    );
    // Without the key, through the same forward and CA, the gateway refuses.
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &ca).expect("CA file");
    let anonymous_config = dir.path().join("anonymous.conf");
    let anonymous = Cli {
        config: &anonymous_config,
    };
    anonymous.ok(&[
        "configure",
        "--gw",
        &format!("https://localhost:{http_port}"),
        "--ca-cert",
        ca_file.to_str().expect("path"),
    ]);
    let (code, _, err) = anonymous.run(&["status"]);
    assert_ne!(
        code, 0,
        "the gateway let a request without the API key through"
    );
    assert!(
        err.contains("401") || err.to_lowercase().contains("unauthorized"),
        "{err}"
    );

    // 4a. OTLP mirroring for the workload: an OTLPProxyConfig whose collector is `otel` (below:
    //     the OTLP converter in place of an OpenTelemetry collector, whose image cannot be
    //     pulled here), and a profile config whose tool config asks for mirroring for the
    //     sample. The webhook has both once a dry run of the sample's Pod gets the sidecar.
    c.create(
        &format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/otlpproxyconfigs"),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "OTLPProxyConfig",
                "metadata": {"name": "otlp"}, "spec": {"collectorRef": "otel"}}),
    );
    c.create(
        &format!("/apis/nvidia.com/v1/namespaces/{ns}/nsightoperatorprofileconfigs"),
        &json!({"apiVersion": "nvidia.com/v1", "kind": "NsightOperatorProfileConfig",
                "metadata": {"name": "mirroring"},
                "spec": {"nsightToolConfigs": [{"name": "mirrored", "coordinator": true,
                            "injectionIncludePatterns": [".*"], "otlpMirroringEnabled": true}],
                         "injectionRules": [{"name": "sample", "nsightToolConfig": "mirrored",
                            "labelSelector": {"matchLabels": {"app": "sample"}}}]}}),
    );
    // The collector's Service first, so that the sidecar resolves it from the start (its
    // Pods come in 4b, once the storage config is copied here).
    c.create(
        &format!("/api/v1/namespaces/{ns}/services"),
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "otel"},
                "spec": {"selector": {"app": "otel"}, "ports": [
                    {"name": "otlp-grpc", "port": 4317, "targetPort": 4317},
                    {"name": "otlp-http", "port": 4318, "targetPort": 4318}]}}),
    );
    let probe = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "labels": {"app": "sample"}},
        "spec": {"containers": [{"name": "main", "image": "x"}]}});
    let mirrored = wait_for(Duration::from_secs(60), || {
        let (_, pod) = c.request(
            "POST",
            &format!("/api/v1/namespaces/{ns}/pods?dryRun=All"),
            Some(&probe),
        );
        sidecar_of(&pod).map(|_| ())
    });
    assert!(
        mirrored.is_some(),
        "the webhook never added the OTLP sidecar\n{}",
        c.describe_namespace(&ns)
    );

    // 4. The workload, labelled, in another namespace: injected, and its entrypoint wrapped by
    //    the agent, which registers over mutual TLS with the certificates the webhook copied.
    c.create(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &node_release::sample_deployment(
            "sample",
            1,
            json!({"app": "sample", "nvidia-nsight-profile": "enabled"}),
        ),
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
    assert!(
        sidecar_of(pod).is_some()
            && annotations["nvidia.com/nsight-otlp-mirroring"]
                .as_str()
                .is_some_and(|a| a.starts_with("OTLPProxyConfig otlp")),
        "the sample runs with the OTLP sidecar: {pod}"
    );
    // The sidecar took its listeners and clusters from the manager's ADS, as its own node.
    let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let synced = wait_for(Duration::from_secs(60), || {
        condition(
            &c,
            &format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/otlpproxyconfigs/otlp"),
            "XdsConfigured",
        )
        .filter(|x| {
            x["message"]
                .as_str()
                .is_some_and(|m| m.contains("1 sidecar(s) connected, 1 up to date"))
        })
    });
    assert!(
        synced.is_some(),
        "the sidecar of {pod_name} never took its configuration over ADS: {}\n{}",
        c.request(
            "GET",
            &format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/otlpproxyconfigs/otlp"),
            None
        )
        .1,
        log_of(&c, &ns, &format!("pods/{pod_name}"), "nsight-otlp-proxy")
    );
    assert_eq!(
        annotations["nvidia.com/nsight-storage"],
        format!("NsightCloudStorageConfig {sys}/nsight-operator-storage (Secret nsight-operator-storage-credentials copied from {sys})"),
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
        tls_volume["secret"]["secretName"],
        format!("{COORDINATOR}-agent-tls"),
        "{tls_volume}"
    );
    let (_, copied) = c.request(
        "GET",
        &format!("/api/v1/namespaces/{ns}/secrets/{COORDINATOR}-agent-tls"),
        None,
    );
    let mut keys: Vec<&String> = copied["data"]
        .as_object()
        .map(|d| d.keys().collect())
        .unwrap_or_default();
    keys.sort();
    assert_eq!(
        keys,
        ["agent.crt", "agent.key", "ca.crt"],
        "only the client half: {copied}"
    );
    assert_eq!(
        copied["metadata"]["labels"]["nvidia.com/nsight-copied-from"],
        sys.as_str()
    );

    // 4b. The converter behind the `otel` Service, with the storage config the webhook copied
    //     here: its reports go beside the agent's.
    c.create(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &converter_deployment(),
    );
    let converter = format!("/apis/apps/v1/namespaces/{ns}/deployments/otel");
    let ready = wait_for(Duration::from_secs(120), || {
        let (_, d) = c.request("GET", &converter, None);
        (d["status"]["readyReplicas"].as_i64() == Some(1)).then_some(())
    });
    assert!(
        ready.is_some(),
        "the converter is not Ready\n{}",
        c.describe_namespace(&ns)
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
    let csv = nvtx_sum_csv(&cli, &session, &dir.path().join("results"));
    check_sample_ranges(&csv);

    // 6b. "View trace", as the UI does it through the gateway: the tenant API launches a
    //     streamer for the session (the chart sets the project's STAND-IN streamer image:
    //     NVIDIA's cannot be pulled here). Its Pod's init container copies the session's
    //     reports from the namespace's only storage; once Ready, the gateway serves it at
    //     /streamers/<name>/ behind the API key, and it finds the report whole.
    let size = listing["reports"][0]["size"].as_u64().expect("listed size");
    let gateway = format!("https://localhost:{http_port}");
    let launched: Value = browser
        .post(format!("{gateway}/tenant/v1/streamers"))
        .bearer_auth(API_KEY)
        .json(&json!({"sessionId": session}))
        .send()
        .and_then(|r| r.error_for_status())
        .and_then(|r| r.json())
        .expect("launch a streamer through the gateway");
    assert_eq!(launched["phase"], "pending", "{launched}");
    assert_eq!(launched["owner"], "api-key", "{launched}");
    let name = launched["name"].as_str().expect("streamer name").to_owned();
    let one = format!("{gateway}/tenant/v1/streamers/{name}");
    let ready = wait_for(Duration::from_secs(120), || {
        let s: Value = browser
            .get(&one)
            .bearer_auth(API_KEY)
            .send()
            .ok()?
            .json()
            .ok()?;
        (s["phase"] == "ready").then_some(s)
    })
    .unwrap_or_else(|| {
        panic!(
            "the streamer {name} never became ready\n{}",
            c.describe_namespace(&sys)
        )
    });
    assert_eq!(
        ready["url"],
        format!("http://{name}.{sys}.svc:8080/"),
        "{ready}"
    );
    // The cap on the node: a second launch fits, a third is refused with 429, naming the
    // caller's own streamers; deleting one frees its slot.
    let launch = || {
        browser
            .post(format!("{gateway}/tenant/v1/streamers"))
            .bearer_auth(API_KEY)
            .json(&json!({"sessionId": session}))
            .send()
            .expect("launch through the gateway")
    };
    let second: Value = launch().json().expect("the second streamer");
    let second = second["name"].as_str().expect("second name").to_owned();
    let refused = launch();
    assert_eq!(refused.status(), 429, "the cap of {MAX_STREAMERS}");
    let refusal: Value = refused.json().expect("a problem document");
    assert_eq!(
        (refusal["active"].as_u64(), refusal["maxActive"].as_u64()),
        (Some(2), Some(u64::from(MAX_STREAMERS))),
        "{refusal}"
    );
    let mut yours: Vec<String> = serde_json::from_value(refusal["yours"].clone()).unwrap();
    yours.sort();
    let mut both = vec![name.clone(), second.clone()];
    both.sort();
    assert_eq!(yours, both, "{refusal}");
    let freed = browser
        .delete(format!("{gateway}/tenant/v1/streamers/{second}"))
        .bearer_auth(API_KEY)
        .send()
        .expect("delete the second streamer");
    assert!(freed.status().is_success(), "{:?}", freed.text());
    assert!(
        streamer_gone(&c, &sys, &second),
        "the streamer {second} was not deleted"
    );
    let through_gateway = format!("{gateway}/streamers/{name}/");
    let synced = wait_for(Duration::from_secs(60), || {
        let r = browser
            .get(&through_gateway)
            .bearer_auth(API_KEY)
            .send()
            .ok()?;
        (r.status() == 200).then(|| r.json::<Value>().ok())?
    })
    .unwrap_or_else(|| panic!("the gateway never served the streamer at {through_gateway}"));
    assert_eq!(synced["standIn"], true, "{synced}");
    assert_eq!(synced["sessionId"], session.as_str(), "{synced}");
    // The launch's WebRTC settings reached the Pod: the relay, its user name from the Secret (the
    // password came too; the stand-in never shows it), and the media port on the Service.
    assert_eq!(
        synced["webrtc"],
        json!({"turn": true, "turnUrls": [TURN_URL], "turnUsername": TURN_USER, "turnPasswordSet": true}),
        "{synced}"
    );
    let (_, service) = c.request(
        "GET",
        &format!("/api/v1/namespaces/{sys}/services/{name}"),
        None,
    );
    assert!(
        service["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == "webrtc" && p["port"] == MEDIA_PORT && p["protocol"] == "UDP"),
        "the streamer's Service has no UDP {MEDIA_PORT}: {}",
        service["spec"]
    );
    let file = synced["files"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["key"] == key.as_str())
        .unwrap_or_else(|| panic!("{key} not synced: {synced}"));
    assert_eq!(
        (file["bytes"].as_u64(), file["onDisk"].as_u64()),
        (Some(size), Some(size)),
        "{synced}"
    );
    let anonymous_view = browser.get(&through_gateway).send().expect("gateway");
    assert_eq!(anonymous_view.status(), 401, "a streamer needs the API key");
    let deleted = browser
        .delete(&one)
        .bearer_auth(API_KEY)
        .send()
        .expect("delete the streamer");
    assert!(deleted.status().is_success(), "{:?}", deleted.text());
    assert!(
        streamer_gone(&c, &sys, &name),
        "the streamer {name} was not deleted"
    );
    // The same from the browser: "View trace" on the session's page, then the Streamers tab.
    view_trace_in_the_browser(&c, &sys, &gateway, &session);
    // Reaping on the node: with a short idle time, a streamer nobody opens is deleted.
    idle_streamers_are_reaped(&c, &sys, &browser, &gateway, &session);

    // 6c. The mirrored ranges: the agent sent the collection's ranges as spans through the
    //     Pod's sidecar to the converter, whose stop writes a report beside the agent's, one
    //     span for each range nvtx_sum counted in the agent's.
    let ranges: u64 = csv
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(2)?.parse::<u64>().ok())
        .sum();
    // Mirroring is asynchronous to the agent's report: wait until the converter holds spans of
    // the collection before stopping it there.
    let collections =
        format!("/api/v1/namespaces/{ns}/services/http:otel:otlp-http/proxy/v1/collections");
    let sample_pod = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let diagnose = || {
        format!(
            "the agent:\n{}\nthe sidecar:\n{}\nthe converter:\n{}",
            log_of(&c, &ns, &format!("pods/{sample_pod}"), "main")
                .lines()
                .filter(|l| l.contains("nsight"))
                .collect::<Vec<_>>()
                .join("\n"),
            log_of(&c, &ns, &format!("pods/{sample_pod}"), "nsight-otlp-proxy"),
            log_of(&c, &ns, "deployments/otel", "converter"),
        )
    };
    let held = wait_for(Duration::from_secs(60), || {
        let (_, list) = c.request("GET", &collections, None);
        list.as_array()?
            .iter()
            .any(|col| col["session"] == session.as_str() && col["active_bytes"].as_u64() > Some(0))
            .then_some(())
    });
    assert!(
        held.is_some(),
        "the converter never got the collection's spans\n{}",
        diagnose()
    );
    let stop = format!("{collections}/{session}/1/stop");
    let (status, answer) = c.request("POST", &stop, None);
    assert_eq!(status, 200, "the converter's stop: {answer}");
    assert_eq!(
        answer["spans"].as_u64(),
        Some(ranges),
        "one span per range: {answer}\n{csv}\n{}",
        diagnose()
    );
    let converted = answer["stored"][0].as_str().unwrap_or_default().to_owned();
    assert!(
        converted.starts_with(&format!("default/{session}/1/nvtx-sample_"))
            && converted.contains("_otlp-pid"),
        "{answer}"
    );
    let listed = cli.json(&["ls"]);
    let keys: Vec<&str> = listed["reports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["key"].as_str())
        .collect();
    assert!(
        keys.contains(&converted.as_str()) && keys.contains(&key.as_str()),
        "both reports listed: {listed}"
    );

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
                    {"name": "nsys", "coordinator": false, "backend": "nsys",
                     "nsightToolArgs": "-t cuda,nvtx --sample=none",
                     "injectionIncludePatterns": ["nvtx-sample"]},
                ],
                "injectionRules": [
                    {"name": "launch", "nsightToolConfig": "unattended",
                     "labelSelector": {"matchLabels": {"app": "sample-launch"}}},
                    {"name": "nsys", "nsightToolConfig": "nsys",
                     "labelSelector": {"matchLabels": {"app": "sample-nsys"}}},
                ],
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

    // 8b. Nsight Systems from the cluster: the release names an image holding nsys (a MOCK of
    //     its CLI: no nsys exists here) and the tool config asks for `backend: nsys`. An init
    //     container copies nsys into the Pod's tools volume with the agent; the agent finds it
    //     there, runs `nsys profile` and `nsys export`, and stores the report and its SQLite
    //     export, which the recipes read.
    check_nsys_from_the_cluster(&c, &ns, &cli, &dir.path().join("nsys-results"));

    // 9. helm upgrade with changed values: the gateway becomes a NodePort Service. autoconfigure
    //    again: the helper of the port-forward is stopped, the URL is the node's address.
    let forwarded = format!("127.0.0.1:{http_port}");
    installed.apply(&c, "upgrade", &values("NodePort", storage_port));
    let node_port = wait_for(Duration::from_secs(60), || {
        let (_, svc) = c.request(
            "GET",
            &format!("/api/v1/namespaces/{sys}/services/nsight-operator-gateway"),
            None,
        );
        (svc["spec"]["type"] == "NodePort").then(|| svc["spec"]["ports"][0]["nodePort"].as_u64())?
    })
    .unwrap_or_else(|| {
        panic!(
            "the gateway Service is not a NodePort\n{}",
            c.describe_namespace(&sys)
        )
    });
    let configured = autoconfigure(&cli, &kube_env, &sys, &[]);
    assert_eq!(
        configured["gateway"],
        format!("https://10.244.0.1:{node_port}"),
        "{configured}"
    );
    assert!(configured["portForward"].is_null(), "{configured}");
    assert!(
        std::net::TcpStream::connect(&forwarded).is_err(),
        "the port-forward helper still listens on {forwarded}"
    );
    // kube-proxy programs the new node port shortly after the Service changed (CI once saw
    // "connection refused" right after autoconfigure).
    let status = wait_for(Duration::from_secs(60), || {
        let (code, out, _) = cli.run(&["--output", "json", "status"]);
        (code == 0).then(|| serde_json::from_str::<Value>(&out).expect("JSON status"))
    })
    .unwrap_or_else(|| panic!("status through the node port: {:?}", cli.run(&["status"])));
    assert!(status["agentCounts"].is_object(), "{status}");

    // 10. helm uninstall leaves nothing of the release behind (the CRDs stay, as Helm keeps
    //    them; the copies in the team namespace are labelled for the admin to delete).
    helm_on(&kubeconfig, &["uninstall", &release, "-n", &sys, "--wait"]);
    let leftovers = [
        format!("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{fullname}-injector"),
        format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{fullname}"),
        format!("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{fullname}"),
        format!("/apis/apps/v1/namespaces/{sys}/deployments/{fullname}"),
        format!("/api/v1/namespaces/{sys}/secrets/{fullname}-webhook-tls"),
        format!("/api/v1/namespaces/{sys}/secrets/{release}-gateway-apikey"),
        format!("/apis/nvidia.com/v1alpha1/namespaces/{sys}/nsightgateways/nsight-operator-gateway"),
        format!("/apis/nvidia.com/v1alpha1/namespaces/{sys}/nsightcoordinators/{COORDINATOR}"),
        format!("/apis/apps/v1/namespaces/{sys}/deployments/{COORDINATOR}"),
        // Owned by its custom resource: collected with it.
        format!("/api/v1/namespaces/{sys}/secrets/{COORDINATOR}-gateway-token"),
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

/// `nsight-cloud autoconfigure -n <namespace> <extra>` with the kubeconfig; its JSON summary.
fn autoconfigure(cli: &Cli<'_>, env: &[(&str, &OsStr)], namespace: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--output", "json", "autoconfigure", "-n", namespace];
    args.extend_from_slice(extra);
    let (code, out, err) = cli.run_env(&args, env);
    assert_eq!(code, 0, "autoconfigure failed:\n{out}\n{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// `nvtx_sum`'s CSV for `session`, downloaded into `dir`.
fn nvtx_sum_csv(cli: &Cli<'_>, session: &str, dir: &std::path::Path) -> String {
    recipe_csv(cli, "nvtx_sum", session, dir)
}

/// `analysis run <recipe> --session <session> --wait` through the CLI; its CSV (named after
/// the recipe), downloaded into `dir`.
fn recipe_csv(cli: &Cli<'_>, recipe: &str, session: &str, dir: &std::path::Path) -> String {
    let job = cli.json(&["analysis", "run", recipe, "--session", session, "--wait"]);
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
    let table = format!("{}.csv", recipe.replace('_', "-"));
    let csv = find_file(dir, &table).unwrap_or_else(|| panic!("no {table} of {recipe}"));
    std::fs::read_to_string(csv).expect("read the CSV")
}

/// The last (3000) lines of a container's log (`what`: `pods/<name>`, or `deployments/<name>` for its
/// first Pod), for failure messages.
fn log_of(c: &cluster::Cluster, ns: &str, what: &str, container: &str) -> String {
    let pod = match what.strip_prefix("deployments/") {
        Some(app) => {
            let (_, pods) = c.request(
                "GET",
                &format!("/api/v1/namespaces/{ns}/pods?labelSelector=app%3D{app}"),
                None,
            );
            pods["items"][0]["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
        None => what.trim_start_matches("pods/").to_owned(),
    };
    let (_, log) = c.request(
        "GET",
        &format!("/api/v1/namespaces/{ns}/pods/{pod}/log?container={container}&tailLines=3000"),
        None,
    );
    log.as_str().map_or_else(|| log.to_string(), str::to_owned)
}

/// The OTLP proxy sidecar of a Pod (or a dry run's answer), if the webhook added it.
fn sidecar_of(pod: &Value) -> Option<&Value> {
    pod["spec"]["initContainers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == "nsight-otlp-proxy" && c["restartPolicy"] == "Always")
}

/// The OTLP converter (`nsight-otlp`, built here) as the `otel` collector of the test's
/// OTLPProxyConfig: OTLP/gRPC on 4317, its endpoints on 4318, reports to the storage config the
/// webhook copied into the namespace.
fn converter_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "otel"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "otel"}},
            "template": {
                "metadata": {"labels": {"app": "otel"}},
                "spec": {
                    "containers": [{
                        "name": "converter",
                        "image": format!("nvcr.io/nvidia/devtools/nsight-otlp:{}", env!("CARGO_PKG_VERSION")),
                        "imagePullPolicy": "Never",
                        "args": ["--data-dir", "/data",
                                 "--storage-config", "/etc/nsight/storage/storage-config.yaml"],
                        "ports": [{"containerPort": 4317}, {"containerPort": 4318}],
                        "volumeMounts": [
                            {"name": "data", "mountPath": "/data"},
                            {"name": "storage", "mountPath": "/etc/nsight/storage", "readOnly": true}],
                    }],
                    "volumes": [
                        {"name": "data", "emptyDir": {}},
                        {"name": "storage",
                         "secret": {"secretName": "nsight-operator-storage-credentials"}}],
                },
            },
        },
    })
}

/// Step 6b in headless Chromium (`tests/ui/streamers.mjs`): launch from the session's page, wait
/// for Ready, click the link and read the new tab (no key there: the page's streamer grant), see the streamer and the cap on the Streamers tab,
/// delete it there; then the NsightStreamer is gone from the cluster.
fn view_trace_in_the_browser(c: &cluster::Cluster, sys: &str, gateway: &str, session: &str) {
    let out = std::process::Command::new("node")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ui/streamers.mjs"))
        .env(
            "PW_DIR",
            nsight_e2e::required_path("NSIGHT_PLAYWRIGHT_DIR", "cargo xtask setup playwright"),
        )
        .env("CHROMIUM", nsight_e2e::chromium_bin())
        .env("URL", gateway)
        .env("API_KEY", API_KEY)
        .env("SESSION", session)
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser's View trace failed (its error last):\n{}\n{stdout}\n{}",
        c.describe_namespace(sys),
        String::from_utf8_lossy(&out.stderr),
    );
    let found: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(found["pageErrors"], json!([]), "{found:#}");
    let name = found["streamer"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        found["openHref"],
        format!("/streamers/{name}/"),
        "{found:#}"
    );
    let stand_in = &found["standIn"];
    assert_eq!(stand_in["status"], 200, "{found:#}");
    assert!(
        stand_in["url"]
            .as_str()
            .is_some_and(|u| u.ends_with(&format!("/streamers/{name}/"))),
        "the new tab did not stay on the streamer: {found:#}"
    );
    assert_eq!(stand_in["body"]["standIn"], true, "{found:#}");
    assert_eq!(stand_in["body"]["sessionId"], session, "{found:#}");
    assert_eq!(found["phase"], "ready", "{found:#}");
    let cap = found["cap"].as_str().unwrap_or_default();
    assert!(
        cap.starts_with(&format!("1 of {MAX_STREAMERS} streamers running")),
        "{found:#}"
    );
    let after = found["capAfter"].as_str().unwrap_or_default();
    assert!(
        after.starts_with(&format!("0 of {MAX_STREAMERS} streamers running")),
        "{found:#}"
    );
    assert!(
        found["tabUrl"]
            .as_str()
            .is_some_and(|u| u.contains("tab=streamers")),
        "{found:#}"
    );
    assert!(
        streamer_gone(c, sys, &name),
        "the page did not delete streamer {name}"
    );
}

/// Step 6d: the NsightTenantOperator's `streamerLaunch.idleTimeout` set to 4 s (the operator
/// rolls the tenant API with `--idle-timeout 4s`), a streamer launched through the gateway and
/// never read again is deleted by the reaper: not before 4 s (less half a second of clock
/// slack), and within 60 s. Last of the
/// streamer steps: every streamer launched before it is deleted already.
fn idle_streamers_are_reaped(
    c: &cluster::Cluster,
    sys: &str,
    browser: &reqwest::blocking::Client,
    gateway: &str,
    session: &str,
) {
    const IDLE: Duration = Duration::from_secs(4);
    let cr = format!(
        "/apis/nvidia.com/v1alpha1/namespaces/{sys}/nsighttenantoperators/nsight-operator-tenant-operator"
    );
    let (status, patched) = c.request_with(
        "PATCH",
        &cr,
        Some(&json!({"spec": {"streamerLaunch": {"idleTimeout": format!("{}s", IDLE.as_secs())}}})),
        &[("content-type", "application/merge-patch+json")],
    );
    assert_eq!(status, 200, "patch the NsightTenantOperator: {patched}");
    // The rollout is done when the Deployment runs only Pods of the new template, with the new
    // flag, and they are available (the old Pod, with 30m, is gone).
    let deployment =
        format!("/apis/apps/v1/namespaces/{sys}/deployments/nsight-operator-tenant-operator");
    let rolled = wait_for(Duration::from_secs(120), || {
        let (_, d) = c.request("GET", &deployment, None);
        let args = d["spec"]["template"]["spec"]["containers"][0]["args"].as_array()?;
        let at = args.iter().position(|a| a == "--idle-timeout")?;
        let st = &d["status"];
        let wanted = d["spec"]["replicas"].as_u64()?;
        (args.get(at + 1)? == "4s"
            && st["observedGeneration"] == d["metadata"]["generation"]
            && [
                &st["replicas"],
                &st["updatedReplicas"],
                &st["availableReplicas"],
            ]
            .iter()
            .all(|n| n.as_u64() == Some(wanted)))
        .then_some(())
    });
    assert!(
        rolled.is_some(),
        "the tenant API was not rolled with --idle-timeout 4s: {}\n{}",
        c.request("GET", &deployment, None).1["status"],
        c.describe_namespace(sys)
    );
    // The Service may still send the first launches to the old Pod while it stops: retry.
    let launched = wait_for(Duration::from_secs(60), || {
        let r = browser
            .post(format!("{gateway}/tenant/v1/streamers"))
            .bearer_auth(API_KEY)
            .json(&json!({"sessionId": session}))
            .send()
            .ok()?;
        (r.status() == 201).then(|| r.json::<Value>().ok())?
    })
    .expect("launch a streamer after the rollout");
    let started = std::time::Instant::now();
    let name = launched["name"].as_str().expect("streamer name").to_owned();
    let path = format!("/apis/nvidia.com/v1alpha1/namespaces/{sys}/nsightstreamers/{name}");
    let reaped = wait_for(Duration::from_secs(60), || {
        (c.request("GET", &path, None).0 == 404).then(|| started.elapsed())
    });
    let Some(after) = reaped else {
        panic!(
            "the idle streamer {name} was not reaped within 60 s\n{}",
            c.describe_namespace(sys)
        )
    };
    // `started` is taken after the answer, a moment after the launch recorded its activity.
    assert!(
        after + Duration::from_millis(500) >= IDLE,
        "{name} was deleted {after:?} after its launch, before it was idle for {IDLE:?}"
    );
}

/// Whether the NsightStreamer `name` of `sys` is gone within 30 s.
fn streamer_gone(c: &cluster::Cluster, sys: &str, name: &str) -> bool {
    wait_for(Duration::from_secs(30), || {
        let (status, _) = c.request(
            "GET",
            &format!("/apis/nvidia.com/v1alpha1/namespaces/{sys}/nsightstreamers/{name}"),
            None,
        );
        (status == 404).then_some(())
    })
    .is_some()
}

/// Step 8b: a Pod whose tool config asks for nsys, with nsys from the release's image.
fn check_nsys_from_the_cluster(
    c: &cluster::Cluster,
    ns: &str,
    cli: &Cli<'_>,
    out: &std::path::Path,
) {
    let pod = "sample-nsys";
    c.create(
        &format!("/api/v1/namespaces/{ns}/pods"),
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "labels": {"app": "sample-nsys"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main",
                "image": format!("nvcr.io/nvidia/devtools/nsight-nvtx-sample:{}", env!("CARGO_PKG_VERSION")),
                "imagePullPolicy": "Never",
                "args": ["3"],
            }]},
        }),
    );
    let (_, injected) = c.request("GET", &format!("/api/v1/namespaces/{ns}/pods/{pod}"), None);
    let annotations = &injected["metadata"]["annotations"];
    assert_eq!(
        annotations["nvidia.com/nsight-injected"], "nsys",
        "{injected}"
    );
    assert_eq!(
        annotations["nvidia.com/nsight-nsys"],
        format!(
            "{} of image {}, copied by init container nsight-nsys",
            mock_nsys_image::DIR,
            mock_nsys_image::NAME
        ),
        "{injected}"
    );
    let log = wait_for(AGENT_WAIT, || {
        let (_, log) = c.request(
            "GET",
            &format!("/api/v1/namespaces/{ns}/pods/{pod}/log?container=main"),
            None,
        );
        let log = log.as_str()?.to_owned();
        log.contains("launch-mode nsys reports stored")
            .then_some(log)
    })
    .unwrap_or_else(|| panic!("no nsys report stored\n{}", c.describe_namespace(ns)));
    let (_, copied) = c.request(
        "GET",
        &format!("/api/v1/namespaces/{ns}/pods/{pod}/log?container=nsight-nsys"),
        None,
    );
    assert!(
        copied.as_str().is_some_and(|l| l.contains("copied 2 files")
            && l.contains("the agent runs /nsight-tools/nsys/2025.3.1/target-linux-x64/nsys")),
        "{copied}"
    );
    // The agent ran the copy, with the tool config's arguments.
    assert!(
        log.contains("/nsight-tools/nsys/2025.3.1/target-linux-x64/nsys profile")
            && log.contains("-t cuda,nvtx --sample=none"),
        "{log}"
    );
    let session = log
        .split("default/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .filter(|s| s.starts_with("launch-"))
        .unwrap_or_else(|| panic!("no launch session in the agent's log:\n{log}"))
        .to_owned();
    for ext in [".nsys-rep", ".sqlite"] {
        assert!(
            log.contains(&format!("default/{session}/1/nvtx-sample_")) && log.contains(ext),
            "no {ext} stored: {log}"
        );
    }
    // The stored export is what nsys exported: the recipes read its two kernels.
    let csv = recipe_csv(cli, "cuda_gpu_kern_sum", &session, out);
    for kernel in ["reduce_kernel", "vectorized_elementwise_kernel"] {
        assert!(csv.contains(kernel), "{kernel} not in\n{csv}");
    }
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
