//! Leader election with a real Lease: two managers against one kube-apiserver; only the Lease
//! holder reconciles, and when it stops the other takes over once the Lease expires.
//! Needs `cargo xtask setup kube`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::time::{Duration, Instant};

use nsight_e2e::{kube::Kube, wait_for};
use nsight_operator::{
    leader::Elector,
    manager::{self, Health},
    render::RenderSettings,
};
use serde_json::json;

#[path = "support/kube_client.rs"]
mod kube_client;
use kube_client::client;

const LEASE_NS: &str = "nsight-operator";
const LEASE: &str =
    "/apis/coordination.k8s.io/v1/namespaces/nsight-operator/leases/nsight-operator-leader";
const LEASE_SECS: u64 = 3;

/// Starts a manager that competes for the Lease as `identity`.
fn start(
    rt: &tokio::runtime::Runtime,
    kube: &Kube,
    identity: &str,
) -> (Health, tokio::task::JoinHandle<()>) {
    let client = client(rt, kube);
    let mut elector = Elector::new(client.clone(), LEASE_NS, "nsight-operator-leader", identity);
    elector.duration = Duration::from_secs(LEASE_SECS);
    elector.retry = Duration::from_millis(500);
    let health = Health::default();
    let config = manager::Config {
        settings: RenderSettings::default(),
        namespace: None,
    };
    let h = health.clone();
    let task = rt.spawn(async move {
        let _ = manager::run(client, config, h, Some(elector)).await;
    });
    (health, task)
}

fn holder(kube: &Kube) -> Option<String> {
    kube.get(LEASE)?["spec"]["holderIdentity"]
        .as_str()
        .map(str::to_owned)
}

fn coordinator(kube: &Kube, name: &str) {
    kube.create(
        "/apis/nvidia.com/v1alpha1/namespaces/default/nsightcoordinators",
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCoordinator",
                "metadata": {"name": name}, "spec": {}}),
    );
}

fn deployment_exists(kube: &Kube, name: &str) -> bool {
    kube.get(&format!(
        "/apis/apps/v1/namespaces/default/deployments/{name}"
    ))
    .is_some()
}

#[test]
fn only_the_lease_holder_reconciles_and_the_other_takes_over() {
    let kube = Kube::start();
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(|crd| serde_json::to_value(crd).unwrap()),
    );
    kube.create(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NS}}),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();

    let (a, a_task) = start(&rt, &kube, "manager-a");
    wait_for(Duration::from_secs(20), || {
        (holder(&kube).as_deref() == Some("manager-a")).then_some(())
    })
    .expect("manager-a never took the Lease");
    let (b, _b_task) = start(&rt, &kube, "manager-b");

    coordinator(&kube, "first");
    wait_for(Duration::from_secs(30), || {
        deployment_exists(&kube, "first").then_some(())
    })
    .expect("the leader did not reconcile");
    // Let the follower retry a few times: it must neither take the Lease nor reconcile.
    std::thread::sleep(Duration::from_secs(LEASE_SECS + 1));
    assert!(a.metrics.total_reconciles() >= 1);
    assert_eq!(b.metrics.total_reconciles(), 0, "the follower reconciled");
    assert_eq!(holder(&kube).as_deref(), Some("manager-a"));
    assert!(a.metrics.render().contains("nsight_operator_leader 1"));
    assert!(b.metrics.render().contains("nsight_operator_leader 0"));

    // The leader stops without releasing the Lease: the follower waits for it to expire.
    a_task.abort();
    let stopped = Instant::now();
    coordinator(&kube, "second");
    wait_for(Duration::from_secs(30), || {
        deployment_exists(&kube, "second").then_some(())
    })
    .expect("the follower never took over");
    let took = stopped.elapsed();
    assert_eq!(holder(&kube).as_deref(), Some("manager-b"));
    // The Deployment is applied before the reconcile (status patch included) is counted.
    wait_for(Duration::from_secs(10), || {
        (b.metrics.total_reconciles() >= 1).then_some(())
    })
    .expect("the new leader's reconciles are not counted");
    assert!(
        took >= Duration::from_secs(LEASE_SECS - 1),
        "took over in {took:?}, before the Lease could expire"
    );
    let lease = kube.get(LEASE).unwrap();
    assert_eq!(lease["spec"]["leaseTransitions"], 1, "{lease}");
}
