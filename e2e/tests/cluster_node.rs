//! The platform's images on a real node: the coordinator image built here runs as a
//! Deployment, simulated agents (`nsight-agent-sim`, the load simulator, named as such) in
//! another Pod reach it by its Service's name (CoreDNS, then kube-proxy), and a collection
//! is started and stopped through the API server's service proxy; Pod logs come back through
//! the kubelet. Needs root and `cargo xtask image all` (CI runs both before the tests).
//!
//! ```text
//! test --(API server: Deployment, Service, service proxy, pod logs)--> node (containerd)
//!   Pod nsight-coordinator :8080 REST  :8081 agents  <--ClusterIP-- Pod nsight-agent-sim x3
//! ```

#![allow(
    clippy::expect_used,
    clippy::panic,
    clippy::unwrap_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::time::Duration;

use nsight_e2e::{cluster, wait_for};
use serde_json::{json, Value};

/// The tag of the images `cargo xtask image all` writes (the workspace version).
const TAG: &str = env!("CARGO_PKG_VERSION");
const REPOSITORY: &str = "nvcr.io/nvidia/devtools";
const AGENTS: usize = 3;

fn image(name: &str) -> String {
    format!("{REPOSITORY}/{name}:{TAG}")
}

fn deployment(name: &str, image: &str, args: &[&str], ports: &[(&str, u16)]) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "securityContext": {"runAsNonRoot": true},
                    "containers": [{
                        "name": name,
                        "image": image,
                        // Images are imported into the node, never pulled.
                        "imagePullPolicy": "Never",
                        "args": args,
                        "ports": ports.iter().map(|(n, p)| json!({"name": n, "containerPort": p})).collect::<Vec<_>>(),
                        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true},
                    }],
                },
            },
        },
    })
}

fn ready_replicas(c: &cluster::Cluster, ns: &str, name: &str) -> i64 {
    let (_, d) = c.request(
        "GET",
        &format!("/apis/apps/v1/namespaces/{ns}/deployments/{name}"),
        None,
    );
    d["status"]["readyReplicas"].as_i64().unwrap_or(0)
}

#[test]
fn the_coordinator_image_serves_agents_in_other_pods_through_its_service() {
    let c = cluster::shared();
    let namespace = cluster::TestNamespace::create(&c, "node-e2e");
    let ns = namespace.name.clone();

    let mut coordinator = deployment(
        "coordinator",
        &image("nsight-coordinator"),
        &["--insecure-agent-channel", "--state-dir", "/state"],
        &[("http", 8080), ("grpc", 8081)],
    );
    let pod = &mut coordinator["spec"]["template"]["spec"];
    pod["volumes"] = json!([{"name": "state", "emptyDir": {}}]);
    pod["containers"][0]["volumeMounts"] = json!([{"name": "state", "mountPath": "/state"}]);
    pod["containers"][0]["readinessProbe"] =
        json!({"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1});
    let (status, body) = c.request(
        "POST",
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        Some(&coordinator),
    );
    assert_eq!(status, 201, "create coordinator: {body}");
    let (status, svc) = c.request(
        "POST",
        &format!("/api/v1/namespaces/{ns}/services"),
        Some(&json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "coordinator"},
            "spec": {
                "selector": {"app": "coordinator"},
                "ports": [
                    {"name": "http", "port": 8080, "targetPort": "http"},
                    {"name": "grpc", "port": 8081, "targetPort": "grpc"},
                ],
            },
        })),
    );
    assert_eq!(status, 201, "create service: {svc}");
    let cluster_ip = svc["spec"]["clusterIP"]
        .as_str()
        .expect("clusterIP")
        .to_owned();

    let ready = wait_for(Duration::from_secs(120), || {
        (ready_replicas(&c, &ns, "coordinator") == 1).then_some(())
    });
    assert!(
        ready.is_some(),
        "coordinator not Ready in 120 s\n{}",
        c.describe_namespace(&ns)
    );

    // Agents in another Pod reach the coordinator by its Service name: the cluster DNS
    // answers with the ClusterIP, kube-proxy forwards to the Pod.
    assert!(!cluster_ip.is_empty());
    let agents = AGENTS.to_string();
    let url = format!("http://coordinator.{ns}.svc.cluster.local:8081");
    let sim = deployment(
        "agents",
        &image("nsight-test-tools"),
        &[
            "--coordinator",
            &url,
            "--count",
            &agents,
            "--pod-prefix",
            "in-cluster",
        ],
        &[],
    );
    let mut sim = sim;
    sim["spec"]["template"]["spec"]["containers"][0]["command"] =
        json!(["/usr/local/bin/nsight-agent-sim"]);
    let (status, body) = c.request(
        "POST",
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        Some(&sim),
    );
    assert_eq!(status, 201, "create agents: {body}");

    let api = format!("/api/v1/namespaces/{ns}/services/http:coordinator:http/proxy/v1");
    let connected = wait_for(Duration::from_secs(120), || {
        let (status, view) = c.request("GET", &format!("{api}/status"), None);
        (status == 200 && view["agentCounts"]["connected"].as_u64() == Some(AGENTS as u64))
            .then_some(view)
    });
    assert!(
        connected.is_some(),
        "{AGENTS} agents not connected in 120 s; last status {:?}\n{}",
        c.request("GET", &format!("{api}/status"), None),
        c.describe_namespace(&ns)
    );

    // One collection: START reaches every agent, STOP completes it with a report from each.
    let (status, started) = c.request("POST", &format!("{api}/start"), Some(&json!({})));
    assert_eq!(status, 200, "start: {started}");
    assert_eq!(started["agents"].as_u64(), Some(AGENTS as u64), "{started}");
    let session = started["session"].as_str().expect("session id").to_owned();
    std::thread::sleep(Duration::from_millis(500));
    let (status, stopped) = c.request("POST", &format!("{api}/stop"), Some(&json!({})));
    assert_eq!(status, 200, "stop: {stopped}");
    let completed = wait_for(Duration::from_secs(60), || {
        let (_, s) = c.request("GET", &format!("{api}/sessions/{session}"), None);
        (s["collections"][0]["state"] == "completed").then_some(s)
    });
    let completed = completed.unwrap_or_else(|| {
        panic!(
            "collection not completed: {:?}",
            c.request("GET", &format!("{api}/sessions/{session}"), None)
        )
    });
    let agents = completed["collections"][0]["agents"]
        .as_object()
        .map(|a| a.len())
        .or_else(|| {
            completed["collections"][0]["agents"]
                .as_array()
                .map(Vec::len)
        });
    assert_eq!(agents, Some(AGENTS), "{completed}");

    // Logs come back from the kubelet through the API server.
    let (_, pods) = c.request(
        "GET",
        &format!("/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dcoordinator"),
        None,
    );
    let pod = pods["items"][0]["metadata"]["name"]
        .as_str()
        .expect("coordinator pod")
        .to_owned();
    let (status, log) = c.request(
        "GET",
        &format!("/api/v1/namespaces/{ns}/pods/{pod}/log"),
        None,
    );
    assert_eq!(status, 200, "pod log: {log}");
    assert!(
        !log.as_str().unwrap_or_default().is_empty(),
        "empty coordinator log"
    );
}
