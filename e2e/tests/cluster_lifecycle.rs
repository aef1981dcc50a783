//! Profiling on a real node survives what a cluster does to it: a profiled Pod deleted in the
//! middle of a collection, the operator's Pod (its leader) killed in the middle of a session,
//! and `helm upgrade` with changed values.
//!
//! ```text
//! helm install -> storage + coordinator Ready -> Deployment `sample` (2 replicas, labelled)
//!   collection 1: start -> delete Pod A -> stop -> completed: A's agent saved the recording
//!                 before forwarding SIGTERM and uploaded it on its way out; B's uploaded
//!   A's replacement registers; the operator Pod is deleted mid-session
//!   collection 2 (the operator restarting): both agents upload; the new leader reconciles
//!                 an NsightAnalysis created after the kill to Ready
//!   helm upgrade --set webhook.tag=gpu -> restarted samples register under tag `gpu`
//! ```
//! The coordinator's REST API is reached through the API server's service proxy here, with
//! the gateway token the operator issued (without it: 403, checked first; the gateway and the
//! CLI are `cluster_operator.rs`). Needs root, `cargo xtask image all` and
//! `cargo xtask setup helm` (CI does all three).

#![allow(
    clippy::expect_used,
    clippy::panic,
    clippy::unwrap_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::time::Duration;

use nsight_e2e::{cluster, wait_for};
use serde_json::{json, Value};

#[path = "support/node_release.rs"]
mod node_release;

use node_release::{create_ready, sample_deployment, Release};

/// Multi-tenant without auto-provisioning: the test creates the team namespace's control plane
/// itself, and the release namespace has only the operator's Pod.
const VALUES: &str = "image: {pullPolicy: Never}\nmachineConfig: null\nmultiTenant: {enabled: true, autoProvision: false}\nwebhook:\n  coordinatorUrl: 'https://nsight-coordinator.{namespace}.svc:8081'\n";

/// The coordinator's REST API through the API server's service proxy, with the gateway token
/// the operator issued (the coordinator answers nothing else: a namespace admin who can read
/// the Secret can, as here, call it directly).
struct Coordinator<'a> {
    c: &'a cluster::Cluster,
    base: String,
    token: String,
}

impl<'a> Coordinator<'a> {
    fn new(c: &'a cluster::Cluster, ns: &str, name: &str) -> Self {
        let token = wait_for(Duration::from_secs(30), || c.gateway_token(ns, name))
            .unwrap_or_else(|| panic!("no gateway token Secret for {ns}/{name}"));
        Self {
            c,
            base: format!("/api/v1/namespaces/{ns}/services/http:{name}:http/proxy/v1"),
            token,
        }
    }

    fn call(&self, method: &str, rest: &str, body: Option<&Value>) -> (u16, Value) {
        self.c.request_with(
            method,
            &format!("{}{rest}", self.base),
            body,
            &[("x-nsight-gateway-token", &self.token)],
        )
    }
}

/// The connected agents of `tag` by pod name, once there are `n`.
fn connected(coordinator: &Coordinator<'_>, tag: &str, n: usize) -> Option<Vec<String>> {
    let (_, status) = coordinator.call("GET", &format!("/status?tag={tag}"), None);
    let pods: Vec<String> = status["agents"]
        .as_array()?
        .iter()
        .filter(|a| a["connected"] == true)
        .filter_map(|a| a["info"]["identity"]["pod"].as_str().map(str::to_owned))
        .collect();
    (pods.len() == n).then_some(pods)
}

/// The collection `index` of `session` once it is no longer open.
fn settled(coordinator: &Coordinator<'_>, session: &str, index: usize) -> Option<Value> {
    let (_, s) = coordinator.call("GET", &format!("/sessions/{session}"), None);
    let col = s["collections"][index].clone();
    matches!(col["state"].as_str(), Some("completed" | "incomplete")).then_some(col)
}

/// The outcome of the agent in `pod` in `collection`.
fn outcome_of<'a>(collection: &'a Value, pod: &str) -> Option<&'a Value> {
    collection["agents"]
        .as_object()?
        .iter()
        .find(|(key, _)| key.contains(pod))
        .map(|(_, v)| v)
}

#[test]
fn a_pod_deleted_mid_collection_a_killed_leader_and_a_helm_upgrade_keep_profiling() {
    let c = cluster::shared();
    let system = cluster::TestNamespace::create(&c, "nsight-life");
    let team = cluster::TestNamespace::create(&c, "life-team");
    let (sys, ns) = (system.name.clone(), team.name.clone());
    let release = Release::install(&c, &format!("life{}", std::process::id()), &sys, VALUES);

    create_ready(
        &c,
        &ns,
        vec![
            (
                "nsightcloudstorageconfigs",
                json!({"kind": "NsightCloudStorageConfig", "metadata": {"name": "team-storage"}, "spec": {}}),
            ),
            (
                "nsightcoordinators",
                json!({"kind": "NsightCoordinator", "metadata": {"name": "nsight-coordinator"},
                       "spec": {"cloudStorageRef": "team-storage"}}),
            ),
        ],
        &[
            ("nsightcloudstorageconfigs", "team-storage", "BucketReady"),
            ("nsightcoordinators", "nsight-coordinator", "Ready"),
        ],
    );
    c.create(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &sample_deployment(
            "sample",
            2,
            json!({"app": "sample", "nvidia-nsight-profile": "enabled"}),
        ),
    );
    // Straight to the coordinator's Service without the gateway's token: refused.
    let direct = format!("/api/v1/namespaces/{ns}/services/http:nsight-coordinator:http/proxy/v1");
    let refused = wait_for(Duration::from_secs(60), || {
        let (status, body) = c.request("POST", &format!("{direct}/start"), Some(&json!({})));
        (status == 403).then_some(body)
    })
    .unwrap_or_else(|| {
        panic!(
            "the coordinator answered a client without the gateway's token\n{}",
            c.describe_namespace(&ns)
        )
    });
    assert!(
        refused["detail"]
            .as_str()
            .is_some_and(|d| d.contains("forwarded by the platform's gateway")),
        "{refused}"
    );
    let coordinator = Coordinator::new(&c, &ns, "nsight-coordinator");
    let pods = wait_for(Duration::from_secs(120), || {
        connected(&coordinator, "default", 2)
    })
    .unwrap_or_else(|| panic!("two agents never connected\n{}", c.describe_namespace(&ns)));

    // 1. A Pod deleted in the middle of a collection.
    let (status, started) = coordinator.call("POST", "/start", Some(&json!({})));
    assert_eq!(status, 200, "start: {started}");
    let session = started["session"].as_str().expect("session").to_owned();
    std::thread::sleep(Duration::from_secs(1));
    let (deleted, kept) = (&pods[0], &pods[1]);
    let (status, _) = c.request(
        "DELETE",
        &format!("/api/v1/namespaces/{ns}/pods/{deleted}"),
        None,
    );
    assert_eq!(status, 200, "delete {deleted}");
    std::thread::sleep(Duration::from_secs(1));
    let (status, stopped) = coordinator.call("POST", "/stop", Some(&json!({})));
    assert_eq!(status, 200, "stop: {stopped}");
    let first = wait_for(Duration::from_secs(90), || {
        settled(&coordinator, &session, 0)
    })
    .unwrap_or_else(|| panic!("collection 1 never settled\n{}", c.describe_namespace(&ns)));
    let kept_outcome = outcome_of(&first, kept).expect("the kept Pod's outcome");
    assert_eq!(kept_outcome["state"], "uploaded", "{first}");
    // SIGTERM reached the agent first: it saved the program's recording before forwarding
    // the signal, so the deleted Pod's ranges are uploaded too.
    let deleted_outcome = outcome_of(&first, deleted).expect("the deleted Pod's outcome");
    assert_eq!(deleted_outcome["state"], "uploaded", "{first}");
    assert_eq!(first["state"], "completed", "{first}");

    // 2. The replacement registers; the operator's Pod (the leader) is killed mid-session.
    let pods = wait_for(Duration::from_secs(120), || {
        connected(&coordinator, "default", 2).filter(|p| !p.contains(deleted))
    })
    .unwrap_or_else(|| panic!("no replacement agent\n{}", c.describe_namespace(&ns)));
    let (_, operator_pods) = c.request("GET", &format!("/api/v1/namespaces/{sys}/pods"), None);
    let leader = operator_pods["items"][0]["metadata"]["name"]
        .as_str()
        .expect("the operator Pod")
        .to_owned();
    let (status, _) = c.request(
        "DELETE",
        &format!("/api/v1/namespaces/{sys}/pods/{leader}?gracePeriodSeconds=0"),
        None,
    );
    assert_eq!(status, 200, "kill the leader {leader}");
    let (status, started) = coordinator.call("POST", "/start", Some(&json!({})));
    assert_eq!(status, 200, "start while the operator restarts: {started}");
    assert_eq!(started["session"], session.as_str(), "{started}");
    // A resource created after the kill is reconciled by the next leader.
    create_ready(
        &c,
        &ns,
        vec![(
            "nsightanalyses",
            json!({"kind": "NsightAnalysis", "metadata": {"name": "nsight-analysis"},
                   "spec": {"cloudStorageRef": "team-storage"}}),
        )],
        &[("nsightanalyses", "nsight-analysis", "Ready")],
    );
    let (status, stopped) = coordinator.call("POST", "/stop", Some(&json!({})));
    assert_eq!(status, 200, "stop: {stopped}");
    let second = wait_for(Duration::from_secs(90), || {
        settled(&coordinator, &session, 1)
    })
    .unwrap_or_else(|| panic!("collection 2 never settled\n{}", c.describe_namespace(&ns)));
    assert_eq!(second["state"], "completed", "{second}");
    for pod in &pods {
        assert_eq!(
            outcome_of(&second, pod).map(|o| o["state"].clone()),
            Some(json!("uploaded")),
            "{pod}: {second}"
        );
    }

    // 3. helm upgrade with a changed value: Pods admitted afterwards carry the new tag.
    release.apply(&c, "upgrade", &format!("{VALUES}  tag: gpu\n"));
    // The rollout is done when the new Pod is Ready, but the API server may still reach the old
    // webhook address for a moment (the Service's endpoints follow); a Pod admitted then is not
    // profiled (failure policy Ignore: a profiler never blocks a workload). Restart the samples
    // once dry runs show the upgraded webhook injecting with the new tag, five times in a row
    // (while both addresses are listed, some calls still reach the old one).
    let probe = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "labels": {"app": "probe", "nvidia-nsight-profile": "enabled"}},
        "spec": {"containers": [{"name": "main", "image": "x"}]}});
    let injected_gpu = || {
        let (_, pod) = c.request(
            "POST",
            &format!("/api/v1/namespaces/{ns}/pods?dryRun=All"),
            Some(&probe),
        );
        pod["spec"]["containers"][0]["env"]
            .as_array()
            .is_some_and(|env| {
                env.iter()
                    .any(|e| e["name"] == "NSIGHT_TAG" && e["value"] == "gpu")
            })
    };
    let upgraded = wait_for(Duration::from_secs(60), || {
        (0..5).all(|_| injected_gpu()).then_some(())
    });
    assert!(
        upgraded.is_some(),
        "the upgraded webhook never injected tag gpu\n{}",
        c.describe_namespace(&ns)
    );
    // The Deployment re-creates the deleted Pods, admitted by the upgraded webhook.
    let (status, deleted) = c.request(
        "DELETE",
        &format!("/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dsample"),
        None,
    );
    assert_eq!(status, 200, "restart the samples: {deleted}");
    wait_for(Duration::from_secs(120), || {
        connected(&coordinator, "gpu", 2)
    })
    .unwrap_or_else(|| {
        panic!(
            "the restarted samples did not register under tag gpu\n{}",
            c.describe_namespace(&ns)
        )
    });
}
